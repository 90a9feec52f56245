//! The review pass: every create and update of the plan read for the dangers a reviewer misses in
//! a diff (issue 26). A diff shows that a Deployment's selector changed; it does not say that the
//! API server refuses the change and the whole Kustomization stops applying. Each check is a
//! module of its own with a stable alert code:
//!
//! - [`immutable`] `immutable-field`: fields the API server will not change in place.
//! - [`flux_semantics`] `flux-semantics` (and `suspend-changed` for HelmReleases): what a
//!   change to a Flux object's spec makes the controllers do.
//! - [`privilege`] `privilege`: more power given to someone (bindings, rules, Pods, namespaces).
//! - `data-loss` (in [`immutable`]): a StatefulSet recreated without the claim templates its
//!   data lives on.
//!
//! A check sees one change at a time as a [`Subject`]: the object after the merge (the head
//! render), the base render's manifest, and the live object when the cluster was read. What it
//! finds is a [`Candidate`]; the policy rates it (or turns it off) into a [`Finding`] of the plan
//! and an alert of the same code, so the verdict weighs it like any other alert.

mod fields;
mod flux_semantics;
mod immutable;
mod privilege;
mod quantity;

use super::compute::{ClusterView, Live};
use super::{Action, Alert, KustomizationPlan, Policy, Severity};
use crate::flux::ObjectId;
use crate::render::{RenderedKustomization, RenderedObject};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The codes this pass raises (`suspend-changed` too, shared with the Kustomization check in
/// `policy`; `data-loss` is shared with the deletions' alerts in `causes`).
pub const CODES: &[&str] = &["immutable-field", "flux-semantics", "privilege", "data-loss"];

/// Something the review found in one change, rated by the policy.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Finding {
    /// The alert code (`immutable-field`, `flux-semantics`, `privilege`, ...).
    pub code: String,
    pub severity: Severity,
    /// The cluster (repository root).
    pub cluster: String,
    /// The unit that applies the object: `Kustomization ns/name`, `HelmRelease ns/name`, ...
    pub unit: String,
    /// The inventory id of the object.
    pub object: String,
    /// The field concerned, e.g. `spec.selector`.
    pub path: String,
    /// What happens, in one line.
    pub message: String,
}

/// A finding before the policy rates it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Candidate {
    pub cluster: String,
    /// `Kustomization ns/name`.
    pub unit: String,
    /// The unit as alerts name it (`ns/name`, `HelmRelease ns/name`).
    pub reference: String,
    pub object: ObjectId,
    pub path: String,
    pub code: &'static str,
    pub message: String,
    /// The repository file the object comes from.
    pub origin: Option<String>,
}

/// One change under review: the object before and after the merge.
pub(super) struct Subject<'a> {
    pub plan: &'a KustomizationPlan,
    pub id: ObjectId,
    /// The head render's manifest: what the controller applies after the merge.
    pub after: &'a RenderedObject,
    /// The base render's manifest, when the object was rendered at base.
    pub base: Option<&'a RenderedObject>,
    /// The live object, when the cluster was read and holds it.
    pub live: Option<&'a Value>,
    /// The unit as head renders it.
    pub unit: &'a RenderedKustomization,
    /// Every object the head render of the cluster holds, by id (a binding's role, a
    /// HelmRelease's manifest).
    pub head_objects: &'a BTreeMap<&'a ObjectId, &'a RenderedObject>,
}

impl<'a> Subject<'a> {
    pub fn after(&self) -> &'a Value {
        &self.after.object
    }

    /// The object as the cluster holds it now: the live object, else the base render's manifest.
    pub fn before(&self) -> Option<&'a Value> {
        self.live.or(self.base.map(|b| &*b.object))
    }

    /// True when the object is new to the cluster: nothing before it.
    pub fn is_new(&self) -> bool {
        self.before().is_none()
    }

    /// True when the pull request changes the field (base render → head render; an object the
    /// cluster holds that base did not render counts as changed) and applying the head render
    /// changes it in the live object, when the cluster was read (fields the server or others
    /// set beside the manifest's are no change).
    pub fn changes(&self, path: &[&str]) -> bool {
        let after = fields::at(self.after(), path);
        let by_pull_request = match self.base {
            Some(base) => !fields::same(fields::at(&base.object, path), after),
            None => self.live.is_some(),
        };
        if !by_pull_request {
            return false;
        }
        match self.live {
            Some(live) => {
                let now = fields::at(live, path);
                match after {
                    Some(after) => {
                        !now.is_some_and(|now| fields::within(after, now)) && !fields::is_empty(after)
                    }
                    // The manifest no longer sets it: server-side apply removes what the
                    // controller set.
                    None => now.is_some_and(|now| !fields::is_empty(now)),
                }
            }
            None => true,
        }
    }

    /// The field before and after when both are set and differ, and the pull request changes it.
    pub fn both_set_and_differ(&self, path: &[&str]) -> Option<(&'a Value, &'a Value)> {
        let after = fields::at(self.after(), path).filter(|v| !fields::is_empty(v))?;
        let before = fields::at(self.before()?, path).filter(|v| !fields::is_empty(v))?;
        let by_pull_request =
            self.base.is_none_or(|b| !fields::same(fields::at(&b.object, path), Some(after)));
        (by_pull_request && !fields::same(Some(before), Some(after))).then_some((before, after))
    }

    /// A finding about this object.
    pub fn finding(&self, code: &'static str, path: &str, message: String) -> Candidate {
        Candidate {
            cluster: self.plan.cluster.clone(),
            unit: self.plan.label(),
            reference: self.plan.reference(),
            object: self.id.clone(),
            path: path.to_string(),
            code,
            message,
            origin: self.after.origin.clone(),
        }
    }

    /// The head render's manifest of another object of the cluster.
    pub fn head_object(&self, id: &ObjectId) -> Option<&'a Value> {
        self.head_objects.get(id).map(|o| &*o.object)
    }
}

/// Every create and update of a cluster's plans, reviewed; plus what concerns a unit as a whole
/// (changes under a suspended one).
pub(super) fn review(view: &ClusterView, plans: &[KustomizationPlan]) -> Vec<Candidate> {
    // Every object of the cluster, indexed only when some unit creates or updates one: a plan
    // that changes one unit does no work for the others.
    let head_objects = std::cell::OnceCell::new();
    let head_objects = || {
        head_objects.get_or_init(|| {
            let mut head_objects: BTreeMap<&ObjectId, &RenderedObject> = view
                .head
                .values()
                .flat_map(|k| &k.objects)
                .filter_map(|o| Some((o.id.as_ref()?, o)))
                .collect();
            // A hook's binding may name a hook's role: the release's objects win where both name one.
            for hook in view.head.values().flat_map(|k| hooks_of(k)) {
                if let Some(id) = &hook.id {
                    head_objects.entry(id).or_insert(hook);
                }
            }
            head_objects
        })
    };
    let mut found = Vec::new();
    let reviewed = |c: &&super::Change| matches!(c.action, Action::Create | Action::Update);
    for plan in plans.iter().filter(|p| p.changes.iter().any(|c| reviewed(&c))) {
        let reference = plan.unit_ref();
        let Some(unit) = view.head.get(&reference).copied() else { continue };
        let objects: BTreeMap<&ObjectId, &RenderedObject> =
            unit.objects.iter().filter_map(|o| Some((o.id.as_ref()?, o))).collect();
        // Every hook of an id: a chart may render two under one name (one that runs, one that
        // does not), and the one that runs must not hide behind the other.
        let mut hooks: BTreeMap<&ObjectId, Vec<&RenderedObject>> = BTreeMap::new();
        for hook in hooks_of(unit) {
            if let Some(id) = &hook.id {
                hooks.entry(id).or_default().push(hook);
            }
        }
        for change in plan.changes.iter().filter(reviewed) {
            let Some(id) = ObjectId::parse(&change.id) else { continue };
            if change.hook.is_some() {
                // A hook created (new, or run for the first time) is reviewed whole, whatever
                // base rendered.
                let base = view
                    .base
                    .get(&reference)
                    .filter(|_| change.action != Action::Create)
                    .into_iter()
                    .flat_map(|k| hooks_of(k))
                    .find(|hook| hook.id.as_ref() == Some(&id));
                for after in hooks.get(&id).into_iter().flatten().copied() {
                    review_hook(plan, unit, id.clone(), after, base, head_objects(), &mut found);
                }
                continue;
            }
            // An object the sync creates without rendering it (Argo CD's CreateNamespace).
            let Some(after) = objects.get(&id).copied() else { continue };
            // Values substituted from Secrets are masked in the manifest: its fields cannot be
            // compared with the live ones, which may hold such a value (from the base's
            // substitution too) and must never be quoted.
            let state = view.live_object(&id);
            let base_held_secrets = view.base_object(&reference, &id).is_some_and(|b| b.holds_secret_values);
            let live = match state {
                Live::Present(object) if !after.holds_secret_values && !base_held_secrets => Some(object),
                _ => None,
            };
            let base = match change.action {
                // The cluster was read and does not hold it (a Job its TTL deleted): it is created
                // anew, whatever base rendered.
                _ if matches!(state, Live::Missing) => None,
                Action::Update => view.base_object(&reference, &id),
                // Moved from another unit: what that unit rendered is what the cluster holds.
                _ if change.moved_from.is_some() => view.base_object(&reference, &id),
                _ => None,
            };
            let subject = Subject { plan, id, after, base, live, unit, head_objects: head_objects() };
            if !applied(&subject) {
                continue;
            }
            immutable::check(&subject, &mut found);
            flux_semantics::check(&subject, &mut found);
            privilege::check(&subject, &mut found);
        }
    }
    flux_semantics::suspended_units(view, plans, &mut found);
    found
}

/// A release's hooks (test hooks included), as rendered.
fn hooks_of(unit: &RenderedKustomization) -> impl Iterator<Item = &RenderedObject> {
    unit.helm.iter().flat_map(|h| &h.hook_objects).map(|hook| &hook.object)
}

/// A hook the merge adds or changes, reviewed like any object against `base`, the base render's
/// hook when it is an update (never the live object: Helm deletes the previous one and creates
/// it anew). Not for `immutable-field`: a hook is created, never updated in place.
fn review_hook<'a>(
    plan: &'a KustomizationPlan,
    unit: &'a RenderedKustomization,
    id: ObjectId,
    after: &'a RenderedObject,
    base: Option<&'a RenderedObject>,
    head_objects: &'a BTreeMap<&'a ObjectId, &'a RenderedObject>,
    found: &mut Vec<Candidate>,
) {
    let subject = Subject { plan, id, after, base, live: None, unit, head_objects };
    flux_semantics::check(&subject, found);
    privilege::check(&subject, found);
}

/// False for an object Flux never changes: marked `ssa: Ignore` or `reconcile: disabled`, or
/// `ssa: IfNotPresent` when the cluster already holds it.
fn applied(subject: &Subject) -> bool {
    use crate::flux::control::{control_is, RECONCILE_KEY, SSA_KEY};
    if subject.plan.kind != crate::render::UnitKind::Kustomization {
        return true;
    }
    let objects = [Some(subject.after()), subject.live];
    !objects.into_iter().flatten().any(|object| {
        let metadata = &object["metadata"];
        control_is(metadata, SSA_KEY, "ignore")
            || control_is(metadata, RECONCILE_KEY, "disabled")
            || (control_is(metadata, SSA_KEY, "ifnotpresent") && !subject.is_new())
    })
}

/// The findings and their alerts under `policy`: a code turned off gives neither. Each finding
/// is listed once, sorted most severe first.
pub(super) fn rate(policy: &Policy, candidates: Vec<Candidate>) -> (Vec<Finding>, Vec<Alert>) {
    let candidates: BTreeSet<Candidate> = candidates.into_iter().collect();
    let mut rated = Vec::new();
    for candidate in candidates {
        let display = candidate.object.display_name();
        let message = format!("{display} {}: {}", candidate.path, candidate.message.trim_end_matches('.'));
        let Some(mut alert) = policy.alert(
            candidate.code,
            &candidate.cluster,
            Some(candidate.reference.clone()),
            message,
            vec![candidate.object.to_string()],
        ) else {
            continue;
        };
        alert.cause = Some(match &candidate.origin {
            Some(file) => format!("{file}: {display} {}", candidate.path),
            None => format!("{display} {}", candidate.path),
        });
        alert.shown_elsewhere = true;
        let finding = Finding {
            code: candidate.code.to_string(),
            severity: alert.severity,
            cluster: candidate.cluster,
            unit: candidate.unit,
            object: candidate.object.to_string(),
            path: candidate.path,
            message: candidate.message,
        };
        rated.push((finding, alert));
    }
    rated.sort_by(|(a, _), (b, _)| {
        (a.severity, &a.cluster, &a.unit, &a.object, &a.path, &a.code)
            .cmp(&(b.severity, &b.cluster, &b.unit, &b.object, &b.path, &b.code))
    });
    rated.into_iter().unzip()
}

/// Why the controller deletes and recreates an object whose immutable field changes, instead of
/// failing its apply, when it does: `force: true` on the Kustomization, the object's force
/// annotation, a ResourceSet's.
pub(super) fn forced_by(subject: &Subject) -> Option<String> {
    use crate::flux::control;
    let plan = subject.plan;
    let object_says = |key: &str| {
        [Some(subject.after()), subject.live]
            .into_iter()
            .flatten()
            .any(|o| control::control_is(&o["metadata"], key, "enabled"))
    };
    match plan.kind {
        crate::render::UnitKind::Kustomization => {
            if subject.unit.spec.as_ref().is_some_and(|s| s.raw["spec"]["force"] == true) {
                Some(format!("force: true on {}", plan.label()))
            } else if object_says(control::FORCE_KEY) {
                Some(format!("its {}: Enabled", control::FORCE_KEY))
            } else {
                None
            }
        }
        crate::render::UnitKind::ResourceSet => {
            let own = ObjectId::new(
                &plan.namespace,
                &plan.name,
                crate::flux::resourceset::GROUP,
                crate::flux::resourceset::KIND,
            );
            let set_forces = subject
                .head_object(&own)
                .is_some_and(|o| control::control_is(&o["metadata"], RESOURCESET_FORCE, "enabled"));
            (set_forces || object_says(RESOURCESET_FORCE)).then(|| format!("{RESOURCESET_FORCE}: enabled"))
        }
        // Neither Helm's upgrade.force nor Argo CD (without Replace=true,Force=true) recreates.
        _ => None,
    }
}

/// The Flux Operator's annotation that recreates objects whose immutable fields change.
const RESOURCESET_FORCE: &str = "fluxcd.controlplane.io/force";

/// What the controller of a unit does with an object whose immutable field changes: the apply
/// fails and stops the unit, or (forced) the object is deleted and created again, losing `loses`.
pub(super) fn on_immutable_change(subject: &Subject, loses: &str) -> String {
    let plan = subject.plan;
    if let Some(why) = forced_by(subject) {
        return format!("{why}: the object is deleted and recreated, and {loses}");
    }
    match plan.kind {
        crate::render::UnitKind::Kustomization => format!(
            "the API server refuses it: Flux's apply fails and {} stops applying (and pruning) until this is \
             fixed (force: true on the Kustomization, or the object's {}: Enabled annotation, has Flux \
             recreate it instead)",
            plan.label(),
            crate::flux::control::FORCE_KEY
        ),
        crate::render::UnitKind::ResourceSet => format!(
            "the API server refuses it, so the Flux Operator's apply of {} fails until this is fixed (with \
             {RESOURCESET_FORCE}: enabled it would delete and recreate the object instead)",
            plan.label()
        ),
        crate::render::UnitKind::HelmRelease => format!(
            "the API server refuses it, so helm-controller's upgrade of {} fails (upgrade.force replaces the \
             object with an update the API server refuses the same way); the release is left failed and its \
             spec.upgrade.remediation decides what follows",
            plan.label()
        ),
        crate::render::UnitKind::Application | crate::render::UnitKind::ApplicationSet => format!(
            "the API server refuses it, so Argo CD's sync of {} fails on it and the Application stays \
             OutOfSync until this is fixed (sync options Replace=true with Force=true would delete and \
             recreate the object instead)",
            plan.label()
        ),
    }
}
