//! From two renders (and a cluster snapshot) to changes per Kustomization, pruning as the
//! controller prunes: only with `prune: true`, never what is protected or no longer owned, and
//! with the cascades of deleted Kustomizations.

use super::{
    diff, live_diff, ownership_moves, Action, Cause, Change, Counts, Drift, InventorySource,
    KustomizationPlan, KustomizationStatus,
};
use crate::argocd::sync_options::ObjectOptions;
use crate::cluster::snapshot::ClusterSnapshot;
use crate::flux::control::{self, OWNER_NAMESPACE_LABEL, OWNER_NAME_LABEL};
use crate::flux::{order, DeletionPolicy, Kustomization, ObjectId, KUSTOMIZE_GROUP};
use crate::render::{
    Cluster, Engine, Render, RenderedKustomization, RenderedObject, Status, UnitKind, UnitRef,
};
use std::collections::{BTreeMap, BTreeSet};

/// What the plan compares.
pub struct Inputs<'a> {
    pub base: &'a Render,
    pub head: &'a Render,
    /// Cluster snapshots; each applies to the clusters (roots) it names, or to all.
    pub snapshots: &'a [&'a ClusterSnapshot],
}

/// The plan of every Kustomization of every cluster, sorted by cluster then name.
pub fn compute(inputs: &Inputs) -> Vec<KustomizationPlan> {
    compute_with_review(inputs).0
}

/// The plans, with what the review of their changes found (`review`).
pub(super) fn compute_with_review(
    inputs: &Inputs,
) -> (Vec<KustomizationPlan>, Vec<super::review::Candidate>) {
    let names: BTreeSet<&str> =
        inputs.base.clusters.iter().chain(&inputs.head.clusters).map(|c| c.name.as_str()).collect();
    let problems = super::roots::problems(inputs.base, inputs.head);
    let mut plans = Vec::new();
    let mut findings = Vec::new();
    for name in names {
        if let Some(problem) = problems.get(name) {
            plans.extend(super::roots::unplanned(name, problem));
            continue;
        }
        fn find<'r>(render: &'r Render, name: &str) -> Option<&'r Cluster> {
            render.clusters.iter().find(|c| c.name == name)
        }
        let view = ClusterView::new(
            name,
            find(inputs.base, name),
            find(inputs.head, name),
            inputs.snapshots.iter().copied().find(|s| s.applies_to(name)),
        );
        let mut cluster = view.plan();
        findings.extend(super::review::review(&view, &cluster));
        withhold_base_unknown(&mut cluster);
        plans.extend(cluster);
    }
    (plans, findings)
}

/// The creates of releases whose base is unknown offline, once the review has read them: every
/// object the head renders may be held already, so none is listed as created.
fn withhold_base_unknown(plans: &mut [KustomizationPlan]) {
    for plan in plans.iter_mut().filter(|p| p.base_unknown) {
        plan.changes.retain(|c| c.action != Action::Create);
        let mut counts = Counts { unchanged: plan.counts.unchanged, ..Counts::default() };
        for change in &plan.changes {
            counts.add(change.action);
        }
        plan.counts = counts;
    }
}

fn by_reference(cluster: Option<&Cluster>) -> BTreeMap<UnitRef, &RenderedKustomization> {
    cluster.into_iter().flat_map(|c| &c.kustomizations).map(|k| (k.unit_ref(), k)).collect()
}

pub(super) const NOT_FOUND: &str = "not found in the cluster: already deleted";
/// How a deletion Argo CD makes last (`PruneLast=true`) ends its reason.
const PRUNED_LAST: &str = "pruned last (PruneLast=true), once everything else is applied and healthy";

/// What is known of a live object.
pub(super) enum Live<'a> {
    /// No cluster snapshot (or one without objects): assume it exists as the inventory says.
    Unknown,
    Missing,
    Present(&'a serde_json::Value),
}

pub(super) struct ClusterView<'a> {
    name: &'a str,
    pub(super) base: BTreeMap<UnitRef, &'a RenderedKustomization>,
    pub(super) head: BTreeMap<UnitRef, &'a RenderedKustomization>,
    pub(super) live: Option<&'a ClusterSnapshot>,
    /// Who desires each object after the merge (rendered, not suspended Kustomizations).
    pub(super) head_owner: BTreeMap<ObjectId, UnitRef>,
    /// Who holds each object in its inventory now.
    pub(super) inventory_owner: BTreeMap<ObjectId, UnitRef>,
    /// The base render's objects by id, with the Kustomization rendering each: looked up for
    /// every change, so indexed once rather than scanned.
    base_objects: BTreeMap<&'a ObjectId, Vec<(&'a RenderedKustomization, &'a RenderedObject)>>,
}

impl<'a> ClusterView<'a> {
    fn new(
        name: &'a str,
        base: Option<&'a Cluster>,
        head: Option<&'a Cluster>,
        live: Option<&'a ClusterSnapshot>,
    ) -> Self {
        let mut view = ClusterView {
            name,
            base: by_reference(base),
            head: by_reference(head),
            live,
            head_owner: BTreeMap::new(),
            inventory_owner: BTreeMap::new(),
            base_objects: BTreeMap::new(),
        };
        for k in view.base.values() {
            for object in &k.objects {
                if let Some(id) = &object.id {
                    view.base_objects.entry(id).or_default().push((*k, object));
                }
            }
        }
        for (reference, k) in &view.head {
            if k.status == Status::Rendered && !k.suspended() {
                for id in k.objects.iter().filter_map(|o| o.id.clone()) {
                    view.head_owner.entry(id).or_insert_with(|| reference.clone());
                }
            }
        }
        for reference in view.references() {
            for id in view.inventory(&reference).0 {
                view.inventory_owner.entry(id).or_insert_with(|| reference.clone());
            }
        }
        view
    }

    fn references(&self) -> BTreeSet<UnitRef> {
        let live = self.live.into_iter().flat_map(|s| {
            let kustomizations =
                s.kustomizations.keys().map(|r| UnitRef::new(UnitKind::Kustomization, &r.namespace, &r.name));
            kustomizations.chain(
                s.applications.keys().map(|r| UnitRef::new(UnitKind::Application, &r.namespace, &r.name)),
            )
        });
        self.base.keys().chain(self.head.keys()).cloned().chain(live).collect()
    }

    /// The inventory the cluster holds for a Kustomization: the snapshot's when there is one,
    /// else (offline) what the base render produced.
    fn inventory(&self, reference: &UnitRef) -> (Vec<ObjectId>, InventorySource) {
        let live = match reference.kind {
            UnitKind::Kustomization => self
                .live
                .and_then(|s| s.kustomizations.get(&reference.reference()))
                .map(|k| k.inventory.clone()),
            // Helm's storage first when its record was read: an uninstall deletes the manifest
            // of the release's latest record (helm/helm pkg/action/uninstall.go), not what
            // status.inventory says; the inventory stands in when no record was readable.
            UnitKind::HelmRelease => self
                .helm_record_inventory(reference)
                .or_else(|| self.helm_status_inventory(reference))
                .or_else(|| self.helm_inventory(reference)),
            // The operator's inventory, when the cluster's ResourceSets were read: one the cluster
            // does not have yet has none.
            UnitKind::ResourceSet => self
                .live
                .and_then(|s| s.resource_sets.as_ref())
                .map(|sets| sets.get(&reference.reference()).cloned().unwrap_or_default()),
            UnitKind::Application => self.live_application(reference).map(|a| a.inventory.clone()),
            // The Applications it generated: those it owns.
            UnitKind::ApplicationSet => self.live.filter(|s| !s.applications.is_empty()).map(|s| {
                s.applications
                    .values()
                    .filter(|a| {
                        crate::argocd::applicationset::owned_by(&a.application.raw, &reference.reference())
                    })
                    .map(|a| {
                        ObjectId::new(
                            &a.application.namespace,
                            &a.application.name,
                            crate::argocd::GROUP,
                            "Application",
                        )
                    })
                    .collect()
            }),
        };
        if let Some(inventory) = live {
            return (inventory, InventorySource::Cluster);
        }
        // Without Helm's storage, a release's objects are known only from the base render.
        if self.live.is_none() || matches!(reference.kind, UnitKind::HelmRelease | UnitKind::ResourceSet) {
            if let Some(base) = self.base.get(reference).filter(|k| k.status == Status::Rendered) {
                return (
                    base.objects.iter().filter_map(|o| o.id.clone()).collect(),
                    InventorySource::BaseRender,
                );
            }
        }
        (Vec::new(), InventorySource::None)
    }

    /// What Helm's storage says a release holds now (its manifest's objects, those `keep` keeps
    /// included), when the cluster was read with its storage; empty when Helm has no record of it.
    fn helm_inventory(&self, reference: &UnitRef) -> Option<Vec<ObjectId>> {
        let release = self.current_release(reference)?;
        let read = self.live?.helm_releases.as_ref()?;
        let Some(stored) = read.get(&(release.storage_namespace.clone(), release.name.clone())) else {
            return Some(Vec::new());
        };
        if stored.error.is_some() {
            return None;
        }
        if stored.status == "uninstalled" {
            return Some(Vec::new());
        }
        Some(stored.objects.iter().chain(&stored.kept).filter_map(|id| ObjectId::parse(id)).collect())
    }

    /// What Helm's storage says the release holds, only when its record was read and decoded
    /// (`--read-secrets`): the truth an uninstall acts on.
    fn helm_record_inventory(&self, reference: &UnitRef) -> Option<Vec<ObjectId>> {
        self.helm_stored(reference).filter(|stored| stored.error.is_none())?;
        self.helm_inventory(reference)
    }

    /// Which of the cluster's sources a HelmRelease's inventory came from, as its note says it:
    /// Helm's storage when its record was read, else the live `status.inventory`.
    pub(super) fn helm_inventory_source(&self, reference: &UnitRef) -> &'static str {
        if self.helm_record_inventory(reference).is_none() && self.helm_status_inventory(reference).is_some()
        {
            "the HelmRelease's status.inventory"
        } else {
            "Helm's storage"
        }
    }

    /// The live HelmRelease's `status.inventory`: the release's manifest and the chart's CRDs.
    /// Used where Helm's storage was not read (no `--read-secrets`) or holds no readable record.
    pub(super) fn helm_status_inventory(&self, reference: &UnitRef) -> Option<Vec<ObjectId>> {
        let Live::Present(live) = self.live_helm_release(reference) else { return None };
        crate::flux::helm::status_inventory(live)
    }

    /// The nearest head ancestor of a Kustomization whose base render fails, if any.
    fn ancestor_failed_at_base(&self, reference: &UnitRef) -> Option<UnitRef> {
        let mut current = parent_of(&self.head, self.head.get(reference)?);
        // Bounded: a parent chain longer than the Kustomizations is a cycle.
        for _ in 0..=self.head.len() {
            let ancestor = current?;
            if self.base.get(&ancestor).is_some_and(|b| b.status == Status::Failed) {
                return Some(ancestor);
            }
            current = parent_of(&self.head, self.head.get(&ancestor)?);
        }
        None
    }

    /// The unit as head renders it, else as base did.
    pub(super) fn unit(&self, reference: &UnitRef) -> Option<&'a RenderedKustomization> {
        self.head.get(reference).or_else(|| self.base.get(reference)).copied()
    }

    fn live_application(&self, reference: &UnitRef) -> Option<&'a crate::cluster::snapshot::LiveApplication> {
        self.live
            .filter(|_| reference.kind == UnitKind::Application)
            .and_then(|s| s.applications.get(&reference.reference()))
    }

    /// The Application as the cluster runs it, else as base renders it.
    fn current_application(&self, reference: &UnitRef) -> Option<&'a crate::argocd::Application> {
        if let Some(live) = self.live_application(reference) {
            return Some(&live.application);
        }
        self.base.get(reference).and_then(|k| k.argocd.as_deref()?.application.as_ref())
    }

    /// The spec the cluster runs now: the live one, else the base render's.
    fn current_spec(&self, reference: &UnitRef) -> Option<&Kustomization> {
        if let Some(live) = self
            .live
            .filter(|_| reference.kind == UnitKind::Kustomization)
            .and_then(|s| s.kustomizations.get(&reference.reference()))
        {
            return Some(&live.spec);
        }
        self.base.get(reference).and_then(|k| k.spec.as_ref())
    }

    pub(super) fn live_object(&self, id: &ObjectId) -> Live<'a> {
        match self.live {
            Some(snapshot) if snapshot.is_unreadable(id) => Live::Unknown,
            Some(snapshot) if !snapshot.objects.is_empty() => match snapshot.objects.get(id) {
                Some(object) => Live::Present(object),
                None => Live::Missing,
            },
            _ => Live::Unknown,
        }
    }

    /// The base render's manifest of an object, preferring the same Kustomization's.
    pub(super) fn base_object(&self, owner: &UnitRef, id: &ObjectId) -> Option<&'a RenderedObject> {
        let renders = self.base_objects.get(id)?;
        let own = renders.iter().find(|(k, _)| k.namespace == owner.namespace && k.name == owner.name);
        own.or(renders.first()).map(|(_, object)| *object)
    }

    /// True when the base render of `owner` renders this object.
    fn rendered_at_base_by(&self, owner: &UnitRef, id: &ObjectId) -> bool {
        self.base_objects.get(id).is_some_and(|renders| {
            renders.iter().any(|(k, _)| k.namespace == owner.namespace && k.name == owner.name)
        })
    }

    fn plan(&self) -> Vec<KustomizationPlan> {
        let mut plans: Vec<KustomizationPlan> =
            self.references().iter().map(|reference| self.plan_one(reference)).collect();
        self.cascade_removed(&mut plans);
        // A kept HelmRelease or ResourceDistribution in a deleted Namespace still goes, and what
        // an uninstall keeps in a deleted Namespace goes too: sweep before and after.
        sweep_deleted_namespaces(&mut plans);
        self.cascade_fan_out(&mut plans);
        sweep_deleted_namespaces(&mut plans);
        // A Kustomization only the cluster has, that this merge neither produces nor deletes, is
        // not this plan's business.
        plans.retain(|p| {
            let reference = p.unit_ref();
            !(p.status == KustomizationStatus::Removed
                && p.changes.is_empty()
                && !self.base.contains_key(&reference))
        });
        let mut plans = releases_below_their_parents(plans);
        for plan in &mut plans {
            plan.changes.sort_by_cached_key(display_order);
            // Argo CD prunes PruneLast objects after everything else is applied and healthy.
            plan.changes.sort_by_key(|c| {
                c.action == Action::Delete && c.reason.as_deref().is_some_and(|r| r.ends_with(PRUNED_LAST))
            });
            let mut counts = Counts { unchanged: plan.counts.unchanged, ..Counts::default() };
            for change in &plan.changes {
                counts.add(change.action);
            }
            plan.counts = counts;
            if plan.status == KustomizationStatus::Unchanged && plan.counts.any_change() {
                plan.status = KustomizationStatus::Changed;
            }
        }
        plans
    }

    fn plan_one(&self, reference: &UnitRef) -> KustomizationPlan {
        let (inventory, inventory_source) = self.inventory(reference);
        let kind = reference.kind;
        let mut plan = KustomizationPlan {
            cluster: self.name.to_string(),
            engine: kind.engine(),
            kind,
            namespace: reference.namespace.clone(),
            name: reference.name.clone(),
            status: KustomizationStatus::Unchanged,
            path: None,
            changes: Vec::new(),
            counts: Counts::default(),
            inventory_size: inventory.len(),
            inventory_source,
            error: None,
            drift: Vec::new(),
            notes: Vec::new(),
            desired: Vec::new(),
            unmanaged: Vec::new(),
            parent: None,
            chart: None,
            release_status: None,
            base_unknown: false,
            release_fate: None,
        };
        if matches!(reference.kind, UnitKind::HelmRelease | UnitKind::ResourceSet) {
            let unit = self.unit(reference);
            plan.parent = unit.and_then(|k| {
                let units = if self.head.contains_key(reference) { &self.head } else { &self.base };
                let parent = parent_of(units, k)?;
                Some(format!("{} {parent}", parent.kind.as_str()))
            });
            plan.chart = self.chart_line(reference);
            plan.release_status = self.helm_stored(reference).map(|stored| stored.status.clone());
        }
        if let Some(set) = self.head.get(reference).and_then(|k| k.resourceset.as_deref()) {
            if !set.copied_from.is_empty() {
                let sources: Vec<&str> = set.copied_from.iter().map(String::as_str).collect();
                plan.notes.push(format!(
                    "the Flux Operator copies data from {} into generated objects when it applies them \
                     (copyFrom): not read, not shown",
                    sources.join(", ")
                ));
            }
        }
        let Some(head) = self.head.get(reference) else {
            plan.status = KustomizationStatus::Removed;
            // The base render's path is the shown one (masked where it came from a Secret).
            plan.path = match self.base.get(reference) {
                Some(base) => Some(base.path.clone()),
                None => self.current_spec(reference).map(|s| s.path.clone()),
            };
            return plan;
        };
        plan.path = Some(head.path.clone());
        let known_before = self.base.contains_key(reference)
            || self.live.is_some_and(|s| {
                reference.kind == UnitKind::Kustomization
                    && s.kustomizations.contains_key(&reference.reference())
            })
            || self.live_application(reference).is_some()
            || (reference.kind == UnitKind::HelmRelease
                && inventory_source == InventorySource::Cluster
                && !inventory.is_empty());
        if head.suspended() {
            plan.status = KustomizationStatus::Suspended;
            plan.notes.push("suspended: Flux applies nothing and prunes nothing until it is resumed".into());
            return plan;
        }
        match head.status {
            Status::External => {
                plan.status = KustomizationStatus::External;
                if head.argocd.is_some() || head.helm.is_some() {
                    plan.notes.extend(head.warnings.first().cloned());
                    // The controller uninstalls the old release before it renders the new chart:
                    // a chart fluxplan cannot have hides the install, never the uninstall.
                    if let Some(reinstall) = self.reinstall(reference) {
                        let uninstalled = self.uninstall_for_reinstall(reference, &reinstall, &inventory);
                        plan.changes.extend(uninstalled.into_values());
                        self.note_reinstall(reference, &reinstall, &mut plan);
                    }
                    self.note_cluster_move(reference, &mut plan);
                    return plan;
                }
                if head.secret_spec.is_some() {
                    plan.notes.extend(head.warnings.first().cloned());
                    return plan;
                }
                let why = if head.source.kind == "ExternalArtifact" {
                    "is not built locally"
                } else {
                    "is not in this repository"
                };
                plan.notes.push(format!("source {} {why}: not planned", head.source));
                return plan;
            }
            Status::Failed => {
                plan.status = KustomizationStatus::Failed;
                plan.error = head.error.clone();
                let note = if head.error.as_ref().is_some_and(|e| e.code == "source-limit") {
                    "over fluxplan's limits: not planned, what the controller does is unknown".to_string()
                } else if head.error.as_ref().is_some_and(|e| e.code == "remote-base") {
                    "fluxplan never fetches remote bases: not planned, what the controller does is unknown"
                        .to_string()
                } else {
                    format!(
                        "the render fails: {} applies nothing and prunes nothing of this {}",
                        plan.controller(),
                        plan.kind.as_str()
                    )
                };
                plan.notes.push(note);
                return plan;
            }
            // What a release's render could not do as the controller does (a schema validated
            // online only) is said with its plan.
            Status::Rendered if head.helm.is_some() => plan.notes.extend(head.warnings.iter().cloned()),
            Status::Rendered => {}
        }
        let prune = head.prunes();
        if !known_before {
            match self.ancestor_failed_at_base(reference) {
                // Its parent's base render failing says nothing of whether it runs now.
                Some(ancestor) => plan.notes.push(format!(
                    "{ancestor} fails to build at base, so whether this {} runs in the cluster is unknown \
                     offline: every object is listed as created (plan with a cluster snapshot or --kube to know)",
                    plan.kind.as_str()
                )),
                None => plan.status = KustomizationStatus::Added,
            }
        }
        // A release whose base chart could not be had: base unknown, not every
        // object a create (offline) nor every object it holds unchanged (with Helm's storage).
        let base_unknown = super::helm_release::base_unknown(self.base.get(reference).copied(), Some(head))
            .then(|| {
                self.base.get(reference).map(|b| super::helm_release::why_not_rendered(b)).unwrap_or_default()
            });
        let mut not_compared = 0;
        if base_unknown.is_none()
            && inventory_source == InventorySource::None
            && self.base.get(reference).is_some_and(|b| b.status == Status::Failed)
        {
            plan.notes.push(
                "the base render fails, so what the cluster holds is unknown offline: every object is listed as \
                 created (plan with a cluster snapshot or --kube to know)"
                    .into(),
            );
        }
        let inventory_set: BTreeSet<&ObjectId> = inventory.iter().collect();
        // A release whose target changes is uninstalled and installed anew: what the uninstall
        // deletes is created again, even under the same name.
        let reinstall = self.reinstall(reference);
        let uninstalled = match &reinstall {
            Some(reinstall) => self.uninstall_for_reinstall(reference, reinstall, &inventory),
            None => BTreeMap::new(),
        };
        let reinstalled = |id: &ObjectId| uninstalled.get(id).is_some_and(|c| c.action == Action::Delete);
        let mut desired = BTreeSet::new();
        for object in &head.objects {
            let Some(id) = &object.id else { continue };
            desired.insert(id);
            let metadata = &object.object["metadata"];
            if control::control_is(metadata, control::SSA_KEY, "ignore")
                || control::control_is(metadata, control::RECONCILE_KEY, "disabled")
            {
                plan.unmanaged.push(id.to_string());
            }
            // helm-controller leaves drift alone unless its drift detection is on.
            let corrected = head.helm.as_ref().is_none_or(|helm| helm.drift_detection.corrects);
            if let Some(drift) = self.drift(reference, id, object).filter(|_| corrected) {
                plan.drift.push(drift);
            }
            if !inventory_set.contains(id) || reinstalled(id) {
                let moved_from = self.inventory_owner.get(id).filter(|o| *o != reference);
                let mut change = new_change(Action::Create, id);
                if let Some(reinstall) = &reinstall {
                    change.reason = Some(format!("installed with Helm release {}", reinstall.to));
                } else if let Some(from) = moved_from {
                    change.moved_from = Some(from.to_string());
                    change.reason = Some(format!("moves here from {}", from.label()));
                }
                plan.changes.push(change);
                continue;
            }
            match self.base_object(reference, id).and_then(|before| update(before, object, id)) {
                Some(change) => plan.changes.push(change),
                None if base_unknown.is_some() => not_compared += 1,
                None => plan.counts.unchanged += 1,
            }
        }
        if let Some(why) = &base_unknown {
            plan.notes.push(if inventory_source == InventorySource::None {
                // The creates are withheld once the review has read them (`withhold_base_unknown`).
                plan.base_unknown = true;
                format!(
                    "base unknown: its chart at base could not be had ({why}), so what the release \
                     holds before the merge is unknown offline; the {} its head renders are not listed as \
                     creates (plan with a cluster read with --read-secrets to compare with Helm's storage)",
                    crate::words::count(desired.len(), "object", "objects")
                )
            } else {
                format!(
                    "base unknown: its chart at base could not be had ({why}); {} \
                     the release holds now are not compared with the head render (listed neither as updated nor \
                     as unchanged)",
                    crate::words::count(not_compared, "object", "objects")
                )
            });
        }
        let base = self.base.get(reference).filter(|b| b.status == Status::Rendered);
        // Paths as shown: masked where they came from a Secret.
        let path_change = base
            .filter(|before| before.path != head.path)
            .map(|before| format!("path changed from {} to {}", before.path, head.path));
        for id in inventory.iter().filter(|id| !desired.contains(id) || reinstalled(id)) {
            if let Some(change) = uninstalled.get(id) {
                plan.changes.push(change.clone());
                continue;
            }
            let mut change = self.stale(id, reference, prune, None);
            if matches!(change.action, Action::Delete | Action::Orphan) {
                let rendered_before = base.map(|_| self.rendered_at_base_by(reference, id));
                let stale = inventory_source == InventorySource::Cluster && rendered_before == Some(false);
                if stale {
                    change.cause = Some(Cause::Stale);
                    change.reason = Some(match change.reason.take() {
                        // Prune is off: Flux stops managing it, merged or not.
                        Some(prune_off) => {
                            format!("stale inventory entry, not in the base render either; {prune_off}")
                        }
                        None => format!(
                            "stale inventory entry: not in the base render either, so {} prunes it on its next \
                             reconcile whether or not this merges",
                            plan.controller()
                        ),
                    });
                } else {
                    change.cause = Some(Cause::PullRequest);
                    let origin = self.base_object(reference, id).and_then(|o| o.origin.as_deref());
                    let why = match (&path_change, origin) {
                        (Some(path), _) => path.clone(),
                        (None, Some(file)) => format!("no longer rendered (it came from {file})"),
                        (None, None) => "no longer rendered".to_string(),
                    };
                    change.reason = Some(match change.reason.take() {
                        Some(prune_off) => format!("{why}; {prune_off}"),
                        None => why,
                    });
                }
            }
            plan.changes.push(change);
        }
        if head.argocd.is_some() {
            self.argo_sync(head, &desired, &inventory, &mut plan);
        }
        if let Some(helm) = head.helm.as_deref() {
            // A reinstall installs anew: its install hooks run, and none is an upgrade's.
            let upgrade = known_before && reinstall.is_none();
            self.helm_upgrade(helm, upgrade, &mut plan);
            self.helm_hooks(reference, helm, upgrade, &mut plan);
            match &reinstall {
                Some(reinstall) => self.note_reinstall(reference, reinstall, &mut plan),
                None => self.note_cluster_move(reference, &mut plan),
            }
            self.note_installed_chart(reference, &mut plan);
        }
        plan.desired = desired.iter().map(|id| id.to_string()).collect();
        plan.desired.sort();
        plan.unmanaged.sort();
        plan
    }

    /// How the live object already differs from the base render (the drift this merge reverts),
    /// with what the merge does to it when this pull request changes it too. Secrets and objects
    /// holding values from Secrets are never compared: a diff would show their values.
    fn drift(&self, reference: &UnitRef, id: &ObjectId, head: &RenderedObject) -> Option<Drift> {
        let Live::Present(live) = self.live_object(id) else { return None };
        let base = self.base_object(reference, id)?;
        // Nor Argo CD's own objects: values set by hand on a live Application (Helm parameters,
        // plugin environments) would show.
        let hidden = |o: &RenderedObject| {
            id.kind == "Secret" || o.holds_secret_values || id.group == crate::argocd::GROUP
        };
        if hidden(head)
            || hidden(base)
            || !reverted_by_flux(&live["metadata"])
            || !reverted_by_flux(&head.object["metadata"])
        {
            return None;
        }
        let cluster_scoped = id.namespace.is_empty();
        // Argo CD compares without the fields its Application's ignoreDifferences names.
        let rules = self
            .head
            .get(reference)
            .and_then(|k| k.argocd.as_deref()?.application.as_ref())
            .map(|a| a.ignore_differences.as_slice())
            .unwrap_or_default();
        let (mut ignored, ignore_rules_not_applied) =
            crate::argocd::ignore_differences::ignored_fields(rules, id);
        // And helm-controller without the paths its drift detection ignores.
        if let Some(helm) = self.head.get(reference).and_then(|k| k.helm.as_deref()) {
            ignored.extend(helm.drift_detection.ignored(id));
        }
        use crate::argocd::ignore_differences::without;
        let (base_object, head_object, live) =
            (without(&base.object, &ignored), without(&head.object, &ignored), without(live, &ignored));
        let diff = live_diff::drift(&base_object, &live, "base", cluster_scoped)?;
        let after_merge = (base.digest != head.digest)
            .then(|| live_diff::drift(&head_object, &live, "head", cluster_scoped))
            .flatten();
        Some(Drift {
            id: id.to_string(),
            display: id.display_name(),
            diff,
            after_merge,
            ignore_rules_not_applied,
        })
    }

    /// What happens to an object in `owner`'s inventory that it no longer desires.
    pub(super) fn stale(&self, id: &ObjectId, owner: &UnitRef, prune: bool, cascade: Option<&str>) -> Change {
        match self.head_owner.get(id).filter(|o| *o != owner) {
            // Another controller takes it over: what the old one does to it still happens.
            Some(new_owner) if ownership_moves::across_controllers(owner, new_owner) => {
                ownership_moves::moved(self.unowned_stale(id, owner, prune, cascade), owner, new_owner)
            }
            Some(new_owner) => {
                let mut change = new_change(Action::Skip, id);
                change.cascade_from = cascade.map(str::to_string);
                change.moved_to = Some(new_owner.to_string());
                change.reason = Some(format!(
                    "moves to {}; if {owner} reconciles first it deletes the object and {new_owner} recreates it",
                    new_owner.label()
                ));
                change
            }
            None => self.unowned_stale(id, owner, prune, cascade),
        }
    }

    /// What `owner`'s controller does to an object it no longer desires, no other unit desiring it.
    fn unowned_stale(&self, id: &ObjectId, owner: &UnitRef, prune: bool, cascade: Option<&str>) -> Change {
        let mut change = new_change(Action::Delete, id);
        change.cascade_from = cascade.map(str::to_string);
        if !prune {
            change.action = Action::Orphan;
            change.reason = Some(match self.unit(owner).and_then(|k| k.argocd.as_deref()) {
                Some(unit) => {
                    let ignored = matches!(self.live_object(id), Live::Present(o)
                        if crate::argocd::sync_options::ignore_extraneous(&o["metadata"]));
                    let why = argo_prune_off(unit);
                    if ignored {
                        format!(
                            "{why}; marked IgnoreExtraneous, so it does not make the Application OutOfSync"
                        )
                    } else {
                        why
                    }
                }
                None => "prune is off: Flux stops managing it and leaves it in the cluster".into(),
            });
            return change;
        }
        if owner.kind == UnitKind::ApplicationSet {
            // Its Applications carry an owner reference, not a tracking marker, and are read as
            // Applications: one the cluster does not have is already gone.
            let gone = self.live.filter(|s| !s.applications.is_empty()).is_some_and(|s| {
                let reference =
                    crate::flux::KustomizationRef { namespace: id.namespace.clone(), name: id.name.clone() };
                !s.applications.contains_key(&reference)
            });
            if gone {
                change.action = Action::Skip;
                change.reason = Some(NOT_FOUND.into());
            }
            return change;
        }
        if owner.kind == UnitKind::HelmRelease {
            return self.helm_stale(change, owner, id);
        }
        if owner.kind == UnitKind::ResourceSet {
            return self.resourceset_stale(change, owner, id);
        }
        if owner.kind.engine() == Engine::ArgoCd {
            // Argo CD reads the object's own sync options (the live object's, else offline the
            // base manifest's): Prune= when Git drops it, Delete= when its Application is deleted.
            let live = self.live_object(id);
            let (metadata, from_base) = match live {
                Live::Missing => {
                    change.action = Action::Skip;
                    change.reason = Some(NOT_FOUND.into());
                    return change;
                }
                Live::Present(object) => (Some(&object["metadata"]), false),
                Live::Unknown => (self.base_object(owner, id).map(|o| &o.object["metadata"]), true),
            };
            let options = metadata.map(ObjectOptions::of);
            let app_prunes_last = self
                .unit(owner)
                .and_then(|k| k.argocd.as_deref()?.application.as_ref())
                .is_some_and(|a| a.sync_options.prune_last);
            if cascade.is_none() && (app_prunes_last || options.is_some_and(|o| o.prune_last)) {
                change.reason = Some(PRUNED_LAST.into());
            }
            let exemption = options.and_then(|o| match cascade {
                Some(_) => o.delete_exemption(),
                None => o.prune_exemption(),
            });
            let default_tracking = crate::argocd::tracking::TrackingMethod::default();
            let tracking = self.live.map_or(&default_tracking, |s| &s.tracking);
            if let Some(why) = exemption {
                change.action = Action::Skip;
                change.reason =
                    Some(if from_base { format!("{why} (in the base manifest)") } else { why.into() });
            } else if let Live::Present(object) = live {
                if !tracking.tracks(&object["metadata"], &owner.name, &owner.namespace) {
                    change.action = Action::Skip;
                    change.reason = Some(format!(
                        "does not carry Application {owner}'s tracking marker ({}): Argo CD leaves it alone",
                        tracking.describe()
                    ));
                }
            }
            return change;
        }
        match self.live_object(id) {
            // Offline, the base manifest's own control labels and annotations are what is known.
            Live::Unknown => {
                let base = self.base_object(owner, id);
                if let Some(why) = base.and_then(|o| control::prune_exemption(&o.object["metadata"])) {
                    change.action = Action::Skip;
                    change.reason = Some(format!("{why} (in the base manifest): Flux never deletes it"));
                }
            }
            Live::Missing => {
                change.action = Action::Skip;
                change.reason = Some(NOT_FOUND.into());
            }
            Live::Present(object) => {
                let meta = &object["metadata"];
                if let Some(why) = control::prune_exemption(meta) {
                    change.action = Action::Skip;
                    change.reason = Some(format!("{why}: Flux never deletes it"));
                } else if meta["labels"][OWNER_NAME_LABEL] != owner.name.as_str()
                    || meta["labels"][OWNER_NAMESPACE_LABEL] != owner.namespace.as_str()
                {
                    change.action = Action::Skip;
                    change.reason =
                        Some(format!("no longer carries the owner labels of {owner}: Flux leaves it alone"));
                }
            }
        }
        change
    }

    /// What an Argo CD sync adds to the plan of an Application: the allowEmpty guard, the
    /// destination namespace it creates, the hooks it runs, and whether anyone must sync.
    fn argo_sync(
        &self,
        head: &RenderedKustomization,
        desired: &BTreeSet<&ObjectId>,
        inventory: &[ObjectId],
        plan: &mut KustomizationPlan,
    ) {
        let Some(unit) = head.argocd.as_deref() else { return };
        let Some(app) = &unit.application else { return };
        if app.automated.is_some_and(|a| a.prune && !a.allow_empty)
            && desired.is_empty()
            && !inventory.is_empty()
        {
            for change in plan.changes.iter_mut().filter(|c| c.action == Action::Delete) {
                change.action = Action::Skip;
                change.reason = Some(
                    "not pruned: Argo CD refuses an automated sync that would leave the Application empty \
                     (allowEmpty is false)"
                        .into(),
                );
            }
            plan.notes.push(
                "renders no resources: Argo CD refuses the automated sync (syncPolicy.automated.allowEmpty is false) \
                 and reports a sync error, so nothing is pruned; the Application stays OutOfSync, and a manual sync \
                 with prune would delete everything listed here"
                    .into(),
            );
        }
        if let Some(namespace) =
            app.destination.namespace.as_deref().filter(|_| app.sync_options.create_namespace)
        {
            let id = ObjectId::new("", namespace, "", "Namespace");
            let before =
                self.base.get(&head.unit_ref()).and_then(|b| b.argocd.as_deref()?.application.as_ref());
            let new_destination =
                before.is_none_or(|b| b.destination.namespace.as_deref() != Some(namespace));
            let present = matches!(self.live_object(&id), Live::Present(_));
            if new_destination && !present && !self.head_owner.contains_key(&id) {
                let mut change = new_change(Action::Create, &id);
                change.reason = Some(
                    "CreateNamespace=true: Argo CD creates the destination namespace when it is missing; it is not one \
                     of the Application's resources and is never pruned with it"
                        .into(),
                );
                plan.changes.push(change);
            }
        }
        let changes = plan.changes.iter().any(|c| c.action != Action::Skip);
        if changes && !unit.hooks.is_empty() {
            let hooks: Vec<String> =
                unit.hooks.iter().map(|h| format!("{} on {}", h.object, h.phases.join(", "))).collect();
            let noun = crate::words::agree(hooks.len(), "a hook", "hooks");
            plan.notes.push(format!("the sync runs {noun}, not managed resources: {}", hooks.join("; ")));
        }
        if changes && app.automated.is_none() {
            plan.notes.push(
                "manual sync: Argo CD shows these changes as OutOfSync and applies them only when someone syncs".into(),
            );
        }
    }

    /// What deleting a unit's object does to what it applied.
    fn removal(&self, reference: &UnitRef, deleter: &UnitRef) -> Removal {
        let argo = |r: &UnitRef| self.unit(r).and_then(|k| k.argocd.as_deref());
        match reference.kind {
            UnitKind::HelmRelease => self.helm_removal(reference),
            UnitKind::ResourceSet => match self.unit(reference).and_then(|k| k.resourceset.as_deref()) {
                Some(set) if set.disabled => {
                    Removal::Keeps("its reconciliation is disabled: the finalizer deletes nothing".into())
                }
                _ => Removal::DeletesAll(
                    "the Flux Operator's finalizer deletes everything it generated".into(),
                ),
            },
            UnitKind::Kustomization => {
                let spec = self.current_spec(reference);
                if spec.is_some_and(Kustomization::deletes_inventory_on_removal) {
                    return Removal::DeletesAll("the finalizer deletes its whole inventory".into());
                }
                Removal::Keeps(
                    match spec {
                        Some(s) if s.suspend => "it is suspended",
                        Some(s) if s.deletion_policy == DeletionPolicy::Orphan => {
                            "its deletionPolicy is Orphan"
                        }
                        _ => "prune is off",
                    }
                    .into(),
                )
            }
            UnitKind::ApplicationSet => {
                Removal::DeletesAll("Kubernetes deletes the Applications it generated (it owns them)".into())
            }
            UnitKind::Application => {
                let preserving = argo(deleter)
                    .and_then(|u| u.application_set.as_ref())
                    .filter(|set| set.preserve_resources_on_deletion);
                if let Some(set) = preserving {
                    return Removal::Keeps(format!(
                        "ApplicationSet {}/{} preserves resources on deletion (it removes the finalizer first)",
                        set.namespace, set.name
                    ));
                }
                match self.current_application(reference).and_then(|a| a.finalizer) {
                    Some(_) => Removal::DeletesAll(
                        "its resources finalizer deletes everything it manages (except Delete=false)".into(),
                    ),
                    None => {
                        Removal::Keeps(format!("it has no {} finalizer", crate::argocd::RESOURCES_FINALIZER))
                    }
                }
            }
        }
    }

    /// Removed Kustomizations whose object is deleted take their inventory with them (the
    /// finalizer), recursively: a deleted child Kustomization cascades in turn. So do Argo CD
    /// Applications with their resources finalizer, and ApplicationSets.
    fn cascade_removed(&self, plans: &mut [KustomizationPlan]) {
        let mut expanded = BTreeSet::new();
        loop {
            // Unit objects deleted, by (kind, reference): the plan that deletes each.
            let deleted: BTreeMap<UnitRef, (String, UnitRef)> = plans
                .iter()
                .flat_map(|p| p.changes.iter().map(move |c| (p, c)))
                .filter(|(_, c)| c.action == Action::Delete)
                .filter_map(|(p, c)| {
                    let id = ObjectId::parse(&c.id)?;
                    let kind = unit_kind(&id)?;
                    let deleter = p.unit_ref();
                    Some((UnitRef::new(kind, &id.namespace, &id.name), (p.label(), deleter)))
                })
                .collect();
            let mut progressed = false;
            for plan in plans.iter_mut().filter(|p| p.status == KustomizationStatus::Removed) {
                let reference = plan.unit_ref();
                let Some((deleter, deleter_ref)) = deleted.get(&reference) else {
                    continue;
                };
                if !expanded.insert(reference.clone()) {
                    continue;
                }
                progressed = true;
                let cascade = plan.label();
                let what = plan.kind.as_str();
                let (inventory, source) = self.inventory(&reference);
                match self.removal(&reference, deleter_ref) {
                    Removal::DeletesAll(how) => {
                        plan.notes.push(format!("its {what} object is deleted by {deleter}: {how}"));
                        for id in &inventory {
                            let mut change = self.stale(id, &reference, true, Some(&cascade));
                            change.cause = Some(Cause::Cascade);
                            plan.changes.push(change);
                        }
                        if reference.kind == UnitKind::HelmRelease {
                            self.note_helm_uninstall(&reference, source, plan);
                        }
                    }
                    Removal::Keeps(why) => {
                        if reference.kind == UnitKind::HelmRelease {
                            self.note_helm_orphaned(
                                &reference,
                                &format!("deleted by {deleter}, but {why}"),
                                plan,
                            );
                        }
                        plan.notes.push(format!(
                            "its {what} object is deleted by {deleter}; {why}, so what it applied stays"
                        ));
                        for id in &inventory {
                            let mut change = new_change(Action::Orphan, id);
                            change.cause = Some(Cause::Cascade);
                            change.cascade_from = Some(cascade.clone());
                            change.reason = Some(format!("{why}: left in place, no longer managed"));
                            plan.changes.push(change);
                        }
                    }
                }
            }
            if !progressed {
                break;
            }
        }
        // A removed HelmRelease that its Kustomization keeps (prune off, `prune: disabled`) stays
        // in the cluster: its release stays installed.
        let kept_objects: BTreeMap<(String, String), String> = plans
            .iter()
            .flat_map(|p| p.changes.iter().map(move |c| (p, c)))
            .filter(|(_, c)| matches!(c.action, Action::Orphan | Action::Skip) && c.moved_to.is_none())
            .filter(|(_, c)| !c.reason.as_deref().is_some_and(|r| r.starts_with(NOT_FOUND)))
            .map(|(p, c)| ((p.cluster.clone(), c.id.clone()), c.reason.clone().unwrap_or_default()))
            .collect();
        for plan in plans.iter_mut().filter(|p| {
            p.status == KustomizationStatus::Removed && p.notes.is_empty() && p.kind == UnitKind::HelmRelease
        }) {
            let id =
                ObjectId::new(&plan.namespace, &plan.name, crate::flux::helm::HELM_GROUP, plan.kind.as_str());
            if let Some(why) = kept_objects.get(&(plan.cluster.clone(), id.to_string())) {
                let reference = plan.unit_ref();
                self.note_helm_orphaned(
                    &reference,
                    &format!("its Kustomization keeps the object ({why})"),
                    plan,
                );
            }
        }
        for plan in
            plans.iter_mut().filter(|p| p.status == KustomizationStatus::Removed && p.notes.is_empty())
        {
            // A parent that reads a source fluxplan cannot see now may or may not still produce it.
            let external_parent = self
                .base
                .get(&plan.unit_ref())
                .and_then(|k| parent_of(&self.base, k))
                .filter(|parent| self.head.get(parent).is_some_and(|p| p.status == Status::External));
            plan.notes.push(match external_parent {
                Some(parent) => format!(
                    "its parent {parent} reads a source that is not planned now: whether it still produces this {} \
                     is unknown",
                    plan.kind.as_str()
                ),
                None => format!(
                    "no longer produced, but its {} object is not deleted (its parent does not prune it, or fails): \
                     it keeps reconciling its last applied spec",
                    plan.kind.as_str()
                ),
            });
        }
    }
}

/// Each HelmRelease's and ResourceSet's plan right after the plan of the unit that applies it
/// (a ResourceSet's releases after the ResourceSet).
fn releases_below_their_parents(plans: Vec<KustomizationPlan>) -> Vec<KustomizationPlan> {
    let placed_below =
        |p: &KustomizationPlan| matches!(p.kind, UnitKind::HelmRelease | UnitKind::ResourceSet);
    let (mut below, others): (Vec<_>, Vec<_>) = plans.into_iter().partition(|p| placed_below(p));
    let mut ordered = Vec::with_capacity(others.len() + below.len());
    for plan in others {
        let mut stack = vec![plan];
        while let Some(plan) = stack.pop() {
            let label = plan.label();
            ordered.push(plan);
            let (children, rest): (Vec<_>, Vec<_>) =
                below.into_iter().partition(|r| r.parent.as_deref() == Some(label.as_str()));
            below = rest;
            stack.extend(children.into_iter().rev());
        }
    }
    ordered.extend(below);
    ordered
}

/// The unit that renders `unit`: parents are Kustomizations, Applications or ApplicationSets.
fn parent_of(
    units: &BTreeMap<UnitRef, &RenderedKustomization>,
    unit: &RenderedKustomization,
) -> Option<UnitRef> {
    let parent = unit.parent.as_ref()?;
    [UnitKind::Kustomization, UnitKind::ResourceSet, UnitKind::Application, UnitKind::ApplicationSet]
        .into_iter()
        .map(|kind| UnitRef::new(kind, &parent.namespace, &parent.name))
        .find(|candidate| units.contains_key(candidate))
}

/// What deleting a unit's object does to what it applied.
pub(super) enum Removal {
    /// Deleted along with it: how.
    DeletesAll(String),
    /// Left in place: why.
    Keeps(String),
}

/// The unit kind an object is, if it is one.
pub(super) fn unit_kind(id: &ObjectId) -> Option<UnitKind> {
    match (id.group.as_str(), id.kind.as_str()) {
        (KUSTOMIZE_GROUP, "Kustomization") => Some(UnitKind::Kustomization),
        (crate::argocd::GROUP, "Application") => Some(UnitKind::Application),
        (crate::argocd::GROUP, "ApplicationSet") => Some(UnitKind::ApplicationSet),
        (crate::flux::helm::HELM_GROUP, crate::flux::helm::HELM_RELEASE_KIND) => Some(UnitKind::HelmRelease),
        (crate::flux::resourceset::GROUP, crate::flux::resourceset::KIND) => Some(UnitKind::ResourceSet),
        _ => None,
    }
}

/// Why an Argo CD unit that does not prune leaves what Git dropped.
fn argo_prune_off(unit: &crate::render::ArgoUnit) -> String {
    match (&unit.application, &unit.application_set) {
        (Some(app), _) if app.automated.is_none() => "manual sync: a sync leaves it in the cluster, OutOfSync and \
            marked \"requires pruning\", until someone syncs with prune"
            .into(),
        (Some(_), _) => "automated prune is off: Argo CD leaves it in the cluster, OutOfSync and marked \
            \"requires pruning\""
            .into(),
        (None, Some(set)) => format!(
            "applicationsSync is {}: the ApplicationSet controller does not delete the Applications it generated",
            set.applications_sync.as_str()
        ),
        (None, None) => "not pruned".into(),
    }
}

/// False for objects Flux applies but never puts back (`ssa: IfNotPresent` or `Ignore`,
/// `reconcile: disabled`): their drift stays.
fn reverted_by_flux(metadata: &serde_json::Value) -> bool {
    !(control::control_is(metadata, control::SSA_KEY, "ifnotpresent")
        || control::control_is(metadata, control::SSA_KEY, "ignore")
        || control::control_is(metadata, control::RECONCILE_KEY, "disabled"))
}

/// Objects Flux keeps (prune disabled, no longer owned, prune off) still go when their Namespace
/// is deleted: Kubernetes deletes everything in it.
fn sweep_deleted_namespaces(plans: &mut [KustomizationPlan]) {
    let deleted: BTreeSet<(String, String)> = plans
        .iter()
        .flat_map(|p| p.changes.iter().map(move |c| (p, c)))
        .filter(|(_, c)| c.action == Action::Delete && c.id.ends_with("__Namespace"))
        .map(|(p, c)| (p.cluster.clone(), c.name.clone()))
        .collect();
    for plan in plans.iter_mut() {
        for change in plan.changes.iter_mut() {
            let kept = matches!(change.action, Action::Skip | Action::Orphan) && change.moved_to.is_none();
            let gone = change.reason.as_deref().is_some_and(|r| r.starts_with(NOT_FOUND));
            if kept && !gone && deleted.contains(&(plan.cluster.clone(), change.namespace.clone())) {
                let kept_because = change.reason.take().unwrap_or_default();
                change.action = Action::Delete;
                change.cause = Some(Cause::Cascade);
                change.cascade_from = Some(format!("Namespace {}", change.namespace));
                change.reason = Some(format!(
                    "Flux would keep it ({kept_because}), but Kubernetes deletes it with its Namespace"
                ));
            }
        }
    }
}

/// Changes grouped by action; creates in apply order, deletions in the reverse order the
/// controller prunes in (custom resources and workloads first, Namespaces and CRDs last).
fn display_order(change: &Change) -> (Action, usize, String) {
    let rank = order::apply_rank(&change.kind);
    let rank = match change.action {
        Action::Delete => usize::MAX - rank,
        _ => rank,
    };
    (change.action, rank, change.id.clone())
}

pub(super) fn new_change(action: Action, id: &ObjectId) -> Change {
    Change {
        action,
        id: id.to_string(),
        kind: id.kind.clone(),
        namespace: id.namespace.clone(),
        name: id.name.clone(),
        reason: None,
        cause: None,
        cascade_from: None,
        moved_from: None,
        moved_to: None,
        diff: None,
        hidden_changes: Vec::new(),
        takes_with_it: Vec::new(),
        hook: None,
    }
}

/// The update of an object whose desired state changed, `None` when it did not.
pub(super) fn update(before: &RenderedObject, after: &RenderedObject, id: &ObjectId) -> Option<Change> {
    if before.digest == after.digest {
        return None;
    }
    let mut change = new_change(Action::Update, id);
    change.diff = if id.namespace.is_empty() {
        // The API gives cluster-scoped objects no namespace, whatever a manifest says.
        diff::unified(&without_namespace(&before.object), &without_namespace(&after.object))
    } else {
        diff::unified(&before.object, &after.object)
    };
    let keys: BTreeSet<&String> = before.secret_digests.keys().chain(after.secret_digests.keys()).collect();
    for key in keys {
        if before.secret_digests.get(key) != after.secret_digests.get(key) {
            change.hidden_changes.push(format!("Secret {key} changed (value hidden)"));
        }
    }
    if change.diff.is_none() && change.hidden_changes.is_empty() {
        if !(before.holds_secret_values || after.holds_secret_values) {
            return None;
        }
        change.hidden_changes.push("values substituted from Secrets changed (values hidden)".into());
    }
    Some(change)
}

/// A manifest without `metadata.namespace`.
pub(super) fn without_namespace(object: &serde_json::Value) -> serde_json::Value {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(serde_json::Value::as_object_mut) {
        meta.remove("namespace");
    }
    object
}
