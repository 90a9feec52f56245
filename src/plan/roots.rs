//! The clusters' roots, compared between base and head. A root is where Flux starts; when it
//! fails to build, or base and head disagree on it, what Flux runs in that cluster is unknown on
//! one side: the plan says so (`root-failed`, `roots-changed`) instead of listing phantom
//! creates and removals.

use super::{Alert, KustomizationPlan, KustomizationStatus, Policy};
use crate::render::{Cluster, ErrorReport, Render, RootKind, Status, UnitKind};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Why a cluster is not planned.
#[derive(Debug, Clone, PartialEq)]
pub enum RootProblem {
    /// Its root fails to build at `sides` (base, head or both).
    Failed { sides: &'static str, root: String, kind: UnitKind, path: String, error: ErrorReport },
    /// Base and head disagree on its root (`None`: the side has no such cluster).
    Changed { base: Option<String>, head: Option<String> },
}

/// The renders without phantom roots: a fallback root ("nothing produces it") on one side that
/// the other side renders as some Kustomization's child is that child, not a cluster.
/// Likewise a cluster whose root directory base does not have and head does (a root declared
/// ahead in `.fluxplan.yaml`): no cluster runs it before the merge, so it is new.
pub fn without_phantom_roots<'r>(base: &'r Render, head: &'r Render) -> (Cow<'r, Render>, Cow<'r, Render>) {
    let mut kept_base = drop_phantoms(base, head);
    let not_yet: Vec<String> =
        kept_base.clusters.iter().filter(|c| not_yet_created(c, head)).map(|c| c.name.clone()).collect();
    if !not_yet.is_empty() {
        kept_base.to_mut().clusters.retain(|c| !not_yet.contains(&c.name));
    }
    (kept_base, drop_phantoms(head, base))
}

/// True when the root of a base cluster fails for want of its directory, which head has.
fn not_yet_created(base: &Cluster, head: &Render) -> bool {
    let Some(after) = head.clusters.iter().find(|c| c.name == base.name) else { return false };
    let missing = base.root_kustomization().is_some_and(|k| {
        k.status == Status::Failed && k.error.as_ref().is_some_and(|e| e.code == "path-not-found")
    });
    let renders = after.root_kustomization().is_some_and(|k| k.status == Status::Rendered);
    missing && renders && identity(base) == identity(after)
}

fn drop_phantoms<'r>(render: &'r Render, other: &Render) -> Cow<'r, Render> {
    let is_phantom = |cluster: &Cluster| {
        cluster.found_by == RootKind::Fallback
            && other.kustomizations().any(|(_, k)| {
                k.parent.is_some()
                    && k.reference() == cluster.root
                    && (k.file.is_none() || cluster.root_file.is_none() || k.file == cluster.root_file)
            })
    };
    if !render.clusters.iter().any(is_phantom) {
        return Cow::Borrowed(render);
    }
    let mut kept = render.clone();
    kept.clusters.retain(|c| !is_phantom(c));
    Cow::Owned(kept)
}

/// How a cluster's root reads: `flux-system/flux-system at kubernetes/flux/cluster (flux-instance
/// HelmRelease in kubernetes/apps/flux-system/flux-instance/app/helmrelease.yaml)`.
fn describe(cluster: &Cluster) -> String {
    let path = cluster.root_kustomization().map(|k| k.path.as_str()).unwrap_or("?");
    let file = cluster.root_file.as_deref().map(|f| format!(" in {f}")).unwrap_or_default();
    format!("{} at {path} ({}{file})", cluster.root, cluster.found_by.describe())
}

/// The root's identity: what must stay the same for base and head to be comparable.
fn identity(cluster: &Cluster) -> (String, RootKind, String) {
    // An Argo CD root is the Application applied by hand: its path may change with the merge
    // (when it manages itself) and it is still the same root.
    let path = match cluster.found_by {
        RootKind::ArgoCd => String::new(),
        _ => cluster.root_kustomization().map(|k| k.path.clone()).unwrap_or_default(),
    };
    (cluster.root.to_string(), cluster.found_by, crate::render::roots::normalized_path(&path))
}

/// The clusters that cannot be planned, by name.
pub fn problems<'r>(base: &'r Render, head: &'r Render) -> BTreeMap<String, RootProblem> {
    let find = |render: &'r Render, name: &str| render.clusters.iter().find(|c| c.name == name);
    let names: BTreeSet<&str> = base.clusters.iter().chain(&head.clusters).map(|c| c.name.as_str()).collect();
    // Clusters head alone has are new only when the merge adds and nothing else: every cluster of
    // base stays, with the same root, not newly failing. Else a head-only cluster may be one
    // moved or renamed (its sync path changed), which no plan can tell apart.
    let only_adds = base.clusters.iter().all(|b| {
        find(head, &b.name).is_some_and(|h| {
            identity(b) == identity(h)
                && !matches!(failure(b, h), Some(RootProblem::Failed { sides: "head", .. }))
        })
    });
    let mut problems = BTreeMap::new();
    for name in names {
        let (before, after) = (find(base, name), find(head, name));
        let problem = match (before, after) {
            (Some(b), Some(h)) if identity(b) == identity(h) => failure(b, h),
            (None, Some(h)) if only_adds && added_by_the_merge(h) => None,
            _ => Some(RootProblem::Changed { base: before.map(describe), head: after.map(describe) }),
        };
        if let Some(problem) = problem {
            problems.insert(name.to_string(), problem);
        }
    }
    problems
}

/// A cluster only head has, whose root the repository declares (a `flux bootstrap` directory, a
/// Flux Operator sync): the pull request adds it, and everything it renders is new. A fallback
/// root only head has may be a Kustomization its parent no longer includes: never new.
fn added_by_the_merge(head: &Cluster) -> bool {
    matches!(
        head.found_by,
        RootKind::Bootstrap | RootKind::FluxInstance | RootKind::FluxInstanceHelmRelease | RootKind::Declared
    )
}

fn failure<'r>(base: &'r Cluster, head: &'r Cluster) -> Option<RootProblem> {
    let failed = |c: &'r Cluster| c.root_kustomization().filter(|k| k.status == Status::Failed);
    let (b, h) = (failed(base), failed(head));

    let sides = match (&b, &h) {
        (Some(_), Some(_)) => "base and head",
        (Some(_), None) => "base",
        (None, Some(_)) => "head",
        (None, None) => return None,
    };
    let root = h.or(b)?;
    Some(RootProblem::Failed {
        sides,
        root: root.reference().to_string(),
        kind: root.kind,
        path: root.path.clone(),
        error: root.error.clone().unwrap_or(ErrorReport { code: "build-failed", message: "failed".into() }),
    })
}

/// The plan of a cluster that cannot be planned: its failing root alone, with why nothing else
/// is listed; nothing at all when the roots changed (the alert says it).
pub fn unplanned(cluster: &str, problem: &RootProblem) -> Vec<KustomizationPlan> {
    let RootProblem::Failed { sides, root, kind, path, error } = problem else { return Vec::new() };
    let (namespace, name) = root.split_once('/').unwrap_or(("", root));
    vec![KustomizationPlan {
        cluster: cluster.to_string(),
        engine: kind.engine(),
        kind: *kind,
        namespace: namespace.to_string(),
        name: name.to_string(),
        status: KustomizationStatus::Failed,
        path: Some(path.clone()),
        changes: Vec::new(),
        counts: Default::default(),
        inventory_size: 0,
        inventory_source: super::InventorySource::None,
        error: Some(error.clone()),
        drift: Vec::new(),
        notes: vec![format!("the root fails to build at {sides}: {}", consequence(sides))],
        desired: Vec::new(),
        unmanaged: Vec::new(),
        parent: None,
        chart: None,
        release_status: None,
        base_unknown: false,
        release_fate: None,
    }]
}

/// What a root failing at `sides` means for the cluster.
fn consequence(sides: &str) -> &'static str {
    if sides == "head" {
        "after the merge Flux applies and prunes nothing in this cluster until it is fixed; nothing of this \
         cluster is planned"
    } else {
        "what this cluster runs is unknown, so nothing of it is planned (no creates or removals are guessed)"
    }
}

/// One alert per cluster that cannot be planned.
pub fn alerts(policy: &Policy, problems: &BTreeMap<String, RootProblem>) -> Vec<Alert> {
    let mut alerts = Vec::new();
    for (cluster, problem) in problems {
        alerts.extend(match problem {
            RootProblem::Failed { sides, root, error, .. } => policy.alert(
                "root-failed",
                cluster,
                Some(root.clone()),
                format!("root {root} fails to build at {sides} ({}): {}", error.described(), consequence(sides)),
                Vec::new(),
            ),
            RootProblem::Changed { base, head } => policy.alert(
                "roots-changed",
                cluster,
                None,
                format!(
                    "the root of this cluster differs between base ({}) and head ({}): what Flux keeps or prunes \
                     cannot be told, so nothing of this cluster is planned (declare roots in .fluxplan.yaml if \
                     fluxplan found the wrong ones)",
                    base.as_deref().unwrap_or("no such cluster"),
                    head.as_deref().unwrap_or("no such cluster")
                ),
                Vec::new(),
            ),
        });
    }
    alerts
}

/// A Flux Operator sync the pull request points at another source (kind or URL): after the
/// merge the operator applies that source to the cluster, which fluxplan cannot plan.
pub fn sync_alerts(policy: &Policy, base: &Render, head: &Render) -> Vec<Alert> {
    head.untrusted_syncs
        .iter()
        .filter_map(|sync| {
            let before = base.syncs.iter().find(|b| b.same_name(sync))?;
            let normalized = crate::git::normalize_url;
            let mut changed = Vec::new();
            if before.source_kind != sync.source_kind || normalized(&before.url) != normalized(&sync.url) {
                let url = crate::git::redact_url(&before.url);
                changed.push(format!("at base it synced {} from {url}", before.source_kind));
            }
            if before.reference != sync.reference {
                changed.push(format!("its ref is now '{}' (it was '{}')", sync.reference, before.reference));
            }
            if before.patches != sync.patches {
                changed.push(
                    "its instance's kustomize.patches changed (the operator applies them to the sync's source \
                     and Kustomization too)"
                        .to_string(),
                );
            }
            policy.alert(
                "sync-changed",
                &crate::render::roots::normalized_path(&sync.path),
                None,
                format!(
                    "{} changed: {}. After the merge the Flux Operator applies what that sync names to this \
                     cluster and prunes what it lacks; fluxplan plans a sync as this repository only as the base \
                     revision has it, so this cluster is not planned",
                    sync.describe(),
                    changed.join("; ")
                ),
                Vec::new(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flux::{KustomizationRef, SourceRef};
    use crate::render::RenderedKustomization;

    fn kustomization(name: &str, parent: Option<&str>, file: &str, status: Status) -> RenderedKustomization {
        let flux_system =
            |name: &str| KustomizationRef { namespace: "flux-system".into(), name: name.into() };
        let source = SourceRef {
            kind: "GitRepository".into(),
            namespace: "flux-system".into(),
            name: "flux-system".into(),
        };
        let mut k = RenderedKustomization::new(
            UnitKind::Kustomization,
            flux_system(name),
            format!("./{name}"),
            source,
            parent.map(flux_system),
            Some(file.into()),
        );
        k.status = status;
        k.error = (status == Status::Failed).then(|| ErrorReport {
            code: "invalid-source",
            message: "broken.yaml: missing metadata.name".into(),
        });
        k
    }

    fn cluster(name: &str, found_by: RootKind, ks: Vec<RenderedKustomization>) -> Cluster {
        let root = ks[0].reference();
        Cluster { name: name.into(), root, found_by, root_file: ks[0].file.clone(), kustomizations: ks }
    }

    fn render(clusters: Vec<Cluster>) -> Render {
        Render::with_clusters(clusters)
    }

    #[test]
    fn a_fallback_root_the_other_side_produces_is_a_phantom() {
        let base = render(vec![cluster(
            "clusters/dev",
            RootKind::Fallback,
            vec![
                kustomization("apps", None, "clusters/dev/apps.yaml", Status::Rendered),
                kustomization("a", Some("apps"), "apps/a/ks.yaml", Status::Rendered),
            ],
        )]);
        let head = render(vec![
            cluster(
                "clusters/dev",
                RootKind::Fallback,
                vec![kustomization("apps", None, "clusters/dev/apps.yaml", Status::Rendered)],
            ),
            cluster(
                "apps/a",
                RootKind::Fallback,
                vec![kustomization("a", None, "apps/a/ks.yaml", Status::Rendered)],
            ),
        ]);
        let (b, h) = without_phantom_roots(&base, &head);
        assert!(matches!(b, Cow::Borrowed(_)));
        assert_eq!(h.clusters.len(), 1);
        assert!(problems(&b, &h).is_empty());
        // Without the filter the phantom is a changed root.
        assert!(matches!(
            problems(&base, &head).get("apps/a"),
            Some(RootProblem::Changed { base: None, .. })
        ));
    }

    #[test]
    fn a_failing_root_at_either_side_is_a_problem() {
        let ok = render(vec![cluster(
            "c",
            RootKind::Bootstrap,
            vec![kustomization("flux-system", None, "c/f.yaml", Status::Rendered)],
        )]);
        let broken = render(vec![cluster(
            "c",
            RootKind::Bootstrap,
            vec![kustomization("flux-system", None, "c/f.yaml", Status::Failed)],
        )]);
        assert!(problems(&ok, &ok).is_empty());
        let Some(RootProblem::Failed { sides, .. }) = problems(&broken, &ok).remove("c") else { panic!() };
        assert_eq!(sides, "base");
        let Some(RootProblem::Failed { sides, .. }) = problems(&ok, &broken).remove("c") else { panic!() };
        assert_eq!(sides, "head");
        let plans = unplanned("c", &problems(&broken, &broken)["c"]);
        assert_eq!(plans.len(), 1);
        assert_eq!(plans[0].status, KustomizationStatus::Failed);
        assert!(plans[0].changes.is_empty());
        let alerts = alerts(&Policy::default(), &problems(&broken, &ok));
        assert_eq!(alerts.len(), 1);
        assert_eq!(alerts[0].code, "root-failed");
        assert_eq!(alerts[0].severity, super::super::Severity::Danger);
    }

    #[test]
    fn a_root_found_another_way_is_a_changed_root() {
        let bootstrap = render(vec![cluster(
            "c",
            RootKind::Bootstrap,
            vec![kustomization("flux-system", None, "c/f.yaml", Status::Rendered)],
        )]);
        let instance = render(vec![cluster(
            "c",
            RootKind::FluxInstance,
            vec![kustomization("flux-system", None, "c/f.yaml", Status::Rendered)],
        )]);
        assert!(matches!(problems(&bootstrap, &instance).get("c"), Some(RootProblem::Changed { .. })));
        assert_eq!(alerts(&Policy::default(), &problems(&bootstrap, &instance))[0].code, "roots-changed");
    }
}
