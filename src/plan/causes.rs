//! One alert per cause of deletions. A Kustomization whose path renders nothing, or one that is
//! removed, is the cause of everything that goes with it: its own deletions and, through the
//! finalizers, those of the Kustomizations it deletes. Those get one alert, on the Kustomization
//! that causes them, naming every facet (mass deletion, protected kinds, lost data) once. Other
//! deletions get one alert per Kustomization. Stale inventory entries are not this pull
//! request's doing: they get their own warning.

use super::{
    blast, Action, Alert, BlastRadius, Cause, Change, KustomizationPlan, KustomizationStatus, Policy,
    ReleaseFate,
};
use crate::cluster::DataLoss;
use crate::flux::{KustomizationRef, ObjectId};
use crate::render::{Engine, Render, UnitKind};
use std::collections::{BTreeMap, BTreeSet};

/// The alerts about deletions, one per cause.
pub fn deletion_alerts(
    policy: &Policy,
    plans: &[KustomizationPlan],
    base: &Render,
    head: &Render,
    blast_radius: &BTreeMap<String, BlastRadius>,
) -> Vec<Alert> {
    let deleters = deleters(plans);
    let owners: Vec<Option<usize>> = (0..plans.len()).map(|i| cause_owner(plans, &deleters, i, 0)).collect();
    let root_of = |i: usize| owners[i].unwrap_or(i);
    // Objects kept by Flux but deleted with their Namespace belong to the cause of whoever deletes
    // that Namespace, whichever Kustomization holds them.
    let namespace_deleters: BTreeMap<(&str, &str), usize> = plans
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            p.changes
                .iter()
                .filter(|c| c.action == Action::Delete && c.id.ends_with("__Namespace"))
                .map(move |c| ((p.cluster.as_str(), c.name.as_str()), i))
        })
        .collect();
    let mut deletions: BTreeMap<usize, Vec<&Change>> = BTreeMap::new();
    for (i, plan) in plans.iter().enumerate() {
        for change in caused(plan) {
            let origin = match swept_with_namespace(change) {
                true => namespace_deleters.get(&(plan.cluster.as_str(), change.namespace.as_str())).copied(),
                false => None,
            };
            deletions.entry(root_of(origin.unwrap_or(i))).or_default().push(change);
        }
    }
    let mut alerts = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        alerts.extend(stale_alert(policy, plan));
        if root_of(i) != i {
            continue;
        }
        let members: Vec<&KustomizationPlan> =
            plans.iter().enumerate().filter(|(j, _)| root_of(*j) == i).map(|(_, p)| p).collect();
        let deletes = deletions.remove(&i).unwrap_or_default();
        let radius = blast_radius.get(&plan.cluster);
        let inputs = Inputs { policy, plans, deleters: &deleters, base, head };
        alerts.extend(group_alert(inputs, plan, &members, &deletes, radius));
    }
    alerts
}

/// True when a Kustomization that still exists renders nothing while its inventory holds objects.
pub fn renders_nothing(plan: &KustomizationPlan) -> bool {
    matches!(plan.status, KustomizationStatus::Changed | KustomizationStatus::Unchanged)
        && plan.counts.create + plan.counts.update + plan.counts.unchanged == 0
        && plan.inventory_size > 0
}

/// The Kustomization whose cause a plan's deletions belong to: itself when it renders nothing;
/// for a removed one, the cause of whoever deletes it, else itself.
fn cause_owner(plans: &[KustomizationPlan], deleters: &Deleters, i: usize, depth: usize) -> Option<usize> {
    let plan = &plans[i];
    if renders_nothing(plan) {
        return Some(i);
    }
    if plan.status != KustomizationStatus::Removed || depth > plans.len() {
        return None;
    }
    let deleter = deleter_of(deleters, plan)?;
    cause_owner(plans, deleters, deleter, depth + 1).or(Some(i))
}

/// Which plan deletes each unit's object (a Kustomization, an Argo CD Application or
/// ApplicationSet): (cluster, kind, reference) → plan index.
type Deleters = BTreeMap<(String, UnitKind, KustomizationRef), usize>;

fn deleters(plans: &[KustomizationPlan]) -> Deleters {
    let mut deleters = Deleters::new();
    for (i, plan) in plans.iter().enumerate() {
        for change in plan.changes.iter().filter(|c| c.action == Action::Delete) {
            let Some(id) = ObjectId::parse(&change.id) else { continue };
            let Some(kind) = super::compute::unit_kind(&id) else { continue };
            let deleted = KustomizationRef { namespace: id.namespace, name: id.name };
            deleters.entry((plan.cluster.clone(), kind, deleted)).or_insert(i);
        }
    }
    deleters
}

/// The plan that deletes this unit's object.
fn deleter_of(deleters: &Deleters, plan: &KustomizationPlan) -> Option<usize> {
    let reference = KustomizationRef { namespace: plan.namespace.clone(), name: plan.name.clone() };
    deleters.get(&(plan.cluster.clone(), plan.kind, reference)).copied()
}

/// Deletions this pull request brings about (its own and their cascades, not stale entries).
fn caused(plan: &KustomizationPlan) -> impl Iterator<Item = &Change> {
    plan.changes.iter().filter(|c| c.action == Action::Delete && c.cause != Some(Cause::Stale))
}

/// What every cause's alert is judged against.
#[derive(Clone, Copy)]
struct Inputs<'a> {
    policy: &'a Policy,
    plans: &'a [KustomizationPlan],
    deleters: &'a Deleters,
    base: &'a Render,
    head: &'a Render,
}

/// The one alert of a cause: `root` and the plans whose deletions it brings about.
fn group_alert(
    inputs: Inputs,
    root: &KustomizationPlan,
    members: &[&KustomizationPlan],
    deletes: &[&Change],
    radius: Option<&BlastRadius>,
) -> Option<Alert> {
    let Inputs { policy, .. } = inputs;
    let finalizer = root.label();
    let finalized = root
        .changes
        .iter()
        .filter(|c| c.action == Action::Delete && c.cascade_from.as_deref() == Some(&finalizer))
        .count();
    let primary = if renders_nothing(root) {
        Some("empty-render")
    // A removed HelmRelease's uninstall is judged by what it deletes (protected kinds, counts),
    // as the uninstall was before releases were units.
    } else if root.status == KustomizationStatus::Removed
        && finalized > 0
        && root.kind != UnitKind::HelmRelease
    {
        Some("kustomization-removed")
    } else {
        // A HelmRelease's release uninstalled: removed, or its target changed.
        match &root.release_fate {
            Some(ReleaseFate::Uninstalled(_)) if root.status == KustomizationStatus::Removed => {
                Some("helmrelease-removed")
            }
            Some(ReleaseFate::Reinstalled { .. }) => Some("release-target-changed"),
            _ => None,
        }
    };
    if primary.is_none() && deletes.is_empty() {
        return None;
    }
    // The share counts what leaves inventories; Helm uninstalls and distributed copies count in
    // the total only.
    let from_inventories = deletes.iter().filter(|c| !beyond_flux(c)).count();
    let inventory = members.iter().map(|p| p.inventory_size).sum::<usize>().max(from_inventories);
    let share_exceeded = inventory > 0
        && from_inventories >= policy.min_deletions_for_percent
        && (from_inventories as f64) * 100.0 > policy.max_deletion_percent * inventory as f64;
    let mass = deletes.len() > policy.max_deletions || share_exceeded;
    let protected: Vec<&&Change> =
        deletes.iter().filter(|c| policy.protected_kinds.contains(&c.kind)).collect();
    // A claim deleted directly and with its Namespace loses its data once.
    let lost: BTreeSet<&DataLoss> =
        radius.into_iter().flat_map(|r| deletes.iter().flat_map(move |c| blast::lost_with(c, r))).collect();
    // What StatefulSets' deletions do to their claims' data.
    let claims =
        super::claims::statefulset_losses(deletes, inputs.plans, &root.cluster, inputs.base, inputs.head);
    let mut codes: Vec<&str> = primary.into_iter().collect();
    codes.extend((!lost.is_empty() || !claims.is_empty()).then_some("data-loss"));
    codes.extend((!protected.is_empty()).then_some("protected-kind-deletion"));
    codes.extend(mass.then_some("mass-deletion"));
    let ids: Vec<String> = deletes.iter().map(|c| c.id.clone()).collect();
    let code = most_severe(policy, &codes, &root.cluster, &ids)?;

    let mut message = match primary {
        Some("empty-render") if root.kind == UnitKind::ApplicationSet => format!(
            "its generators ({}) generate no Application while it owns {}: {}",
            root.path.as_deref().unwrap_or("?"),
            root.inventory_size,
            decisions(root)
        ),
        Some("empty-render") => format!(
            "path {} renders zero objects while its inventory holds {}: {}",
            root.path.as_deref().unwrap_or("?"),
            root.inventory_size,
            decisions(root)
        ),
        Some("helmrelease-removed" | "release-target-changed") => match &root.release_fate {
            Some(ReleaseFate::Uninstalled(what)) => format!("is removed, and {what}"),
            Some(ReleaseFate::Reinstalled { what, .. }) => what.clone(),
            _ => String::new(),
        },
        Some(_) => {
            format!(
                "is removed, and its finalizer deletes its whole inventory: {}",
                crate::words::count(finalized, "object", "objects")
            )
        }
        None => format!(
            "deletes {} of the {} in its inventory",
            root.changes
                .iter()
                .filter(|c| c.action == Action::Delete && c.cause == Some(Cause::PullRequest))
                .count(),
            crate::words::count(root.inventory_size, "object", "objects")
        ),
    };
    for plan in members.iter().filter(|p| p.reference() != root.reference()) {
        let finalizer = plan.label();
        let n = plan
            .changes
            .iter()
            .filter(|c| c.action == Action::Delete && c.cascade_from.as_deref() == Some(&finalizer))
            .count();
        if n > 0 {
            message.push_str(&format!(
                "; {} goes with it and its finalizer deletes its {}",
                plan.label(),
                crate::words::count(n, "object", "objects")
            ));
        }
    }
    // A release's uninstall already says what goes with it.
    let mut cascades = cascade_phrases(deletes);
    if primary == Some("helmrelease-removed") {
        cascades.retain(|phrase| !phrase.ends_with("uninstalled with their Helm release"));
    }
    if !cascades.is_empty() {
        message.push_str(&format!("; with them go {}", cascades.join(", ")));
    }
    if !protected.is_empty() {
        let names: Vec<String> = protected.iter().map(|c| c.display_name()).collect();
        message.push_str(&format!("; protected kinds among them: {}", names.join(", ")));
    }
    for change in protected.iter().filter(|c| c.kind == "Namespace" || c.kind == "CustomResourceDefinition") {
        if let Some(first) = change.takes_with_it.first() {
            message.push_str(&format!("; {} takes with it {first}", change.display_name()));
        }
    }
    if !lost.is_empty() {
        let claims: Vec<String> = lost.iter().map(ToString::to_string).collect();
        message.push_str(&format!("; data is lost: {}", claims.join("; ")));
    }
    for line in &claims {
        message.push_str(&format!("; {line}"));
    }
    if mass {
        // The rule that fired, with its numbers.
        let mut rules = Vec::new();
        if deletes.len() > policy.max_deletions {
            rules.push(format!(
                "{} deletions, over massDeletion.maxObjects ({})",
                deletes.len(),
                policy.max_deletions
            ));
        }
        if share_exceeded {
            rules.push(format!(
                "{from_inventories} of {inventory} inventory objects ({:.0}%), over massDeletion.maxPercent ({}%)",
                from_inventories as f64 * 100.0 / inventory as f64,
                policy.max_deletion_percent
            ));
        }
        message.push_str(&format!("; mass deletion: {}", rules.join(" and ")));
    }
    let mut alert = policy.alert(code, &root.cluster, Some(root.reference()), message, ids)?;
    alert.related_codes = codes.iter().filter(|c| **c != code).map(|c| c.to_string()).collect();
    alert.also_blocking = (alert.related_codes.iter())
        .filter(|c| policy.severity_in(c, &root.cluster, &alert.objects) == Some(super::Severity::Danger))
        .cloned()
        .collect();
    alert.cause = cause_line(inputs, root, deletes);
    Some(alert)
}

/// The code among `codes` this policy rates most severe for an alert in `cluster` about
/// `objects` (its `alertRules` included: a rule relaxing one code leaves the others of the same
/// cause as they are); the first of equals; `None` when the policy turns all of them off.
fn most_severe<'c>(policy: &Policy, codes: &[&'c str], cluster: &str, objects: &[String]) -> Option<&'c str> {
    let rated = codes.iter().filter_map(|c| Some((policy.severity_in(c, cluster, objects)?, *c)));
    rated.min_by_key(|(severity, _)| *severity).map(|(_, code)| code)
}

/// What the plan decided for an empty render's inventory, in its own words.
fn decisions(plan: &KustomizationPlan) -> String {
    let count = |action| {
        plan.changes.iter().filter(|c| c.cause != Some(Cause::Cascade) && c.action == action).count()
    };
    let (deleted, skipped, orphaned) = (count(Action::Delete), count(Action::Skip), count(Action::Orphan));
    let mut parts = Vec::new();
    if deleted > 0 {
        parts.push(format!("{} prunes {deleted} of them", plan.controller()));
    }
    if orphaned > 0 {
        parts.push(match plan.engine {
            Engine::Flux | Engine::Helm | Engine::ResourceSet => {
                format!("stops managing {orphaned} (prune is off)")
            }
            Engine::ArgoCd => {
                format!("leaves {orphaned} in the cluster (prune is off: OutOfSync, requires pruning)")
            }
        });
    }
    if skipped > 0 {
        // Grouped by reason: one refused sync keeps every object for the same reason.
        let mut by_reason: Vec<(&str, Vec<String>)> = Vec::new();
        for c in plan.changes.iter().filter(|c| c.cause != Some(Cause::Cascade) && c.action == Action::Skip) {
            let reason = c.reason.as_deref().unwrap_or("kept");
            match by_reason.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, names)) => names.push(c.display_name()),
                None => by_reason.push((reason, vec![c.display_name()])),
            }
        }
        let kept: Vec<String> = by_reason
            .iter()
            .map(|(reason, names)| match names.as_slice() {
                [one] => format!("{one} ({reason})"),
                many => format!("{} ({reason})", many.join(", ")),
            })
            .collect();
        parts.push(format!("keeps {skipped}: {}", kept.join("; ")));
    }
    if parts.is_empty() {
        "nothing is deleted".into()
    } else {
        parts.join("; ")
    }
}

/// "2 kept by Flux but deleted with their Namespace, 5 uninstalled by Helm": deletions that go
/// with something other than a Kustomization's finalizer, by what they go with.
fn cascade_phrases(deletes: &[&Change]) -> Vec<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for change in deletes.iter().filter(|c| c.cause == Some(Cause::Cascade)) {
        let source = change.cascade_from.as_deref().and_then(|f| f.split(' ').next()).unwrap_or("");
        *counts.entry(source).or_default() += 1;
    }
    counts
        .into_iter()
        .filter_map(|(source, n)| {
            Some(match source {
                "Namespace" => format!("{n} kept by Flux but deleted by Kubernetes with their Namespace"),
                "HelmRelease" => format!("{n} uninstalled with their Helm release"),
                "ResourceDistribution" => format!("{n} distributed copies"),
                _ => return None,
            })
        })
        .collect()
}

/// Deleted by something other than Flux's prune or a finalizer: not in any inventory.
fn beyond_flux(change: &Change) -> bool {
    change
        .cascade_from
        .as_deref()
        .is_some_and(|from| from.starts_with("HelmRelease ") || from.starts_with("ResourceDistribution "))
}

/// Kept by Flux, deleted by Kubernetes with its Namespace.
fn swept_with_namespace(change: &Change) -> bool {
    change.cascade_from.as_deref().is_some_and(|from| from.starts_with("Namespace "))
}

/// The change in the pull request that triggered a cause, as a diff line reads.
fn cause_line(inputs: Inputs, root: &KustomizationPlan, deletes: &[&Change]) -> Option<String> {
    let Inputs { plans, deleters, base, head, .. } = inputs;
    if let Some(line) = spec_change(root, base, head) {
        return Some(line);
    }
    if let Some(ReleaseFate::Reinstalled { change, .. }) = &root.release_fate {
        let file = head.unit(&root.cluster, &root.unit_ref()).and_then(|k| k.file.as_deref());
        let file = file.map(|f| format!("{f}: ")).unwrap_or_default();
        return Some(format!("{file}{} {change}", root.label()));
    }
    if root.status == KustomizationStatus::Removed {
        let unit = match root.kind {
            UnitKind::HelmRelease => base.unit(&root.cluster, &root.unit_ref()),
            _ => base.kustomization(&root.cluster, &root.namespace, &root.name),
        };
        let file = unit.and_then(|k| k.file.clone());
        let deleter = deleter_of(deleters, root).map(|d| &plans[d]);
        if let Some(line) = deleter.and_then(|d| spec_change(d, base, head)) {
            return Some(line);
        }
        if let Some(set) = deleter.filter(|d| d.kind == UnitKind::ApplicationSet) {
            return Some(format!(
                "{} no longer generates {} (source path {})",
                set.label(),
                root.label(),
                root.path.as_deref().unwrap_or("?")
            ));
        }
        return Some(match file {
            Some(file) if head.unreachable.iter().any(|u| u.file == file) => {
                format!("{file}: {} is no longer reached from any root", root.label())
            }
            Some(file) => format!("{file}: {} removed", root.label()),
            None => format!("{} removed", root.label()),
        });
    }
    if renders_nothing(root) {
        if root.kind == UnitKind::ApplicationSet {
            return Some(format!("{}: its generators match nothing", root.label()));
        }
        return Some(format!("{}: no manifest is left under it", root.path.as_deref().unwrap_or("?")));
    }
    let first = deletes.iter().find(|c| c.cause == Some(Cause::PullRequest))?;
    let origin = base.object(&root.cluster, &first.id).and_then(|o| o.origin.clone());
    let more = deletes.iter().filter(|c| c.cause == Some(Cause::PullRequest)).count() - 1;
    let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
    Some(match origin {
        Some(file) => format!("{file}: {} removed{more}", first.display_name()),
        None => format!("{} removed{more}", first.display_name()),
    })
}

/// `FILE: path OLD → NEW` when the pull request changes a Kustomization's path.
pub fn spec_change(plan: &KustomizationPlan, base: &Render, head: &Render) -> Option<String> {
    let before = base.unit(&plan.cluster, &plan.unit_ref())?;
    let after = head.unit(&plan.cluster, &plan.unit_ref())?;
    (before.path != after.path).then(|| {
        let file = after.file.as_deref().map(|f| format!("{f}: ")).unwrap_or_default();
        let what = if plan.kind == UnitKind::ApplicationSet { "generators" } else { "path" };
        format!("{file}{} {what} {} → {}", plan.label(), before.path, after.path)
    })
}

/// Stale inventory entries Flux prunes anyway: a warning, never the pull request's fault.
fn stale_alert(policy: &Policy, plan: &KustomizationPlan) -> Option<Alert> {
    let stale: Vec<&Change> =
        plan.changes.iter().filter(|c| c.action == Action::Delete && c.cause == Some(Cause::Stale)).collect();
    if stale.is_empty() {
        return None;
    }
    let names: Vec<String> = stale.iter().map(|c| c.display_name()).collect();
    policy.alert(
        "stale-inventory",
        &plan.cluster,
        Some(plan.reference()),
        format!(
            "{} in the cluster's inventory {} not in the base render either: {} prunes them on its \
             next reconcile whether or not this merges (not caused by this pull request): {}",
            crate::words::count(stale.len(), "object", "objects"),
            if stale.len() == 1 { "is" } else { "are" },
            plan.controller(),
            names.join(", ")
        ),
        stale.iter().map(|c| c.id.clone()).collect(),
    )
}

/// Kustomizations this merge deletes (their objects, with their finalizers).
pub fn deleted_kustomizations(plans: &[KustomizationPlan]) -> Vec<(String, KustomizationRef)> {
    let keys = deleters(plans).into_keys();
    keys.filter(|(_, kind, _)| *kind == UnitKind::Kustomization).map(|(cluster, _, k)| (cluster, k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Severity;

    #[test]
    fn the_most_severe_code_wins_and_codes_turned_off_are_skipped() {
        let mut policy = Policy::default();
        let codes = ["empty-render", "data-loss", "protected-kind-deletion", "mass-deletion"];
        let most_severe = |policy: &Policy| most_severe(policy, &codes, "clusters/prod", &[]);
        assert_eq!(most_severe(&policy), Some("empty-render"), "equals: the first");
        policy.severities.insert("empty-render".into(), Some(Severity::Warning));
        policy.severities.insert("data-loss".into(), None);
        assert_eq!(most_severe(&policy), Some("protected-kind-deletion"));
        // A rule for this cluster relaxing the cause's code leaves the others as they are.
        let mut relaxed = Policy::default();
        relaxed.rules.push(crate::plan::policy::AlertRule {
            code: "empty-render".into(),
            cluster: Some("clusters/prod".into()),
            namespace: None,
            kind: None,
            severity: "warning".into(),
        });
        assert_eq!(most_severe(&relaxed), Some("data-loss"));
        for code in codes {
            policy.severities.insert(code.into(), None);
        }
        assert_eq!(most_severe(&policy), None);
    }
}
