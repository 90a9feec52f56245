//! HelmReleases in a plan. A release is a unit of its own (`plan_one` plans it like any unit);
//! what is Helm's is here: an upgrade deletes what the new manifest no longer holds, except what
//! `helm.sh/resource-policy: keep` keeps and the chart's `crds/` (never part of the manifest),
//! and creates or updates those CRDs only as `install.crds`/`upgrade.crds` say.
//!
//! Deleting a HelmRelease object runs helm-controller's finalizer, which (unless the HelmRelease
//! is suspended) uninstalls its release: every object of the latest revision's manifest is
//! deleted but for what `keep` keeps; delete hooks run. What the manifest holds is known from the
//! release's storage Secret (a cluster read with `--read-secrets`; only object ids reach the
//! plan), else from the base render of the release.

use super::compute::{new_change, ClusterView, Live, Removal};
use super::{Action, Cause, Change, InventorySource, KustomizationPlan, ReleaseFate};
use crate::cluster::helm_storage::StoredReleaseSummary;
use crate::flux::helm::CrdPolicy;
use crate::flux::helm::{self, OnDeletion, ReleaseRef, HELM_GROUP, HELM_RELEASE_KIND};
use crate::flux::ObjectId;
use crate::render::helm::origin::ChartOrigin;
use crate::render::helm::{is_kept, HelmUnit};
use crate::render::{RenderedKustomization, Status, UnitKind, UnitRef};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What is known of a release's storage.
#[derive(Debug, Clone, Copy)]
pub(super) enum Storage<'a> {
    /// No cluster: nothing read.
    Offline,
    /// A cluster read without `--read-secrets`.
    NotRead,
    /// Read: the release's summary, `None` when Helm holds no record of it.
    Read(Option<&'a StoredReleaseSummary>),
}

/// The consequence of deleting one HelmRelease: a sentence for the plan (and the HelmRelease's
/// change), and the objects the uninstall deletes or keeps.
#[derive(Debug)]
pub(super) struct Uninstall {
    pub summary: String,
    pub changes: Vec<Change>,
}

/// How the HelmRelease asks for its uninstall (`spec.uninstall`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct UninstallSpec {
    pub disable_hooks: bool,
}

impl UninstallSpec {
    fn of(manifest: &serde_json::Value) -> Self {
        UninstallSpec { disable_hooks: manifest["spec"]["uninstall"]["disableHooks"].as_bool() == Some(true) }
    }
}

/// What deleting the HelmRelease `name` (in `namespace`) does, given `outcome` and its storage.
pub(super) fn uninstall(
    namespace: &str,
    name: &str,
    outcome: &OnDeletion,
    spec: UninstallSpec,
    storage: Storage,
) -> Uninstall {
    let cascade = format!("{HELM_RELEASE_KIND} {namespace}/{name}");
    let mut changes = Vec::new();
    let summary = match outcome {
        OnDeletion::Suspended(release) => {
            format!("suspended: the finalizer skips the uninstall, so Helm release {release} stays installed, unmanaged")
        }
        OnDeletion::NeverInstalled => {
            "its status names no storage namespace: no release was installed, nothing to uninstall".into()
        }
        OnDeletion::RemoteCluster(release) => format!(
            "uninstalls Helm release {release} in the cluster its spec.kubeConfig names (not read: contents unknown)"
        ),
        OnDeletion::Uninstalls(release) => match storage {
            Storage::Offline => format!("uninstalls Helm release {release} (contents unknown offline)"),
            Storage::NotRead => format!(
                "uninstalls Helm release {release} (contents unknown: plan with --read-secrets to list what it deletes)"
            ),
            Storage::Read(None) => format!(
                "Helm has no record of release {release} in namespace {}: nothing left to uninstall",
                release.storage_namespace
            ),
            Storage::Read(Some(stored)) => read_release(release, stored, spec, &cascade, &mut changes),
        },
    };
    Uninstall { summary, changes }
}

fn read_release(
    release: &ReleaseRef,
    stored: &StoredReleaseSummary,
    spec: UninstallSpec,
    cascade: &str,
    changes: &mut Vec<Change>,
) -> String {
    if let Some(error) = &stored.error {
        return format!("uninstalls Helm release {release}; what it deletes is unknown: {error}");
    }
    if stored.status == "uninstalled" {
        return format!(
            "Helm release {release} is already uninstalled (its history was kept): nothing left to delete"
        );
    }
    let objects =
        |ids: &[String]| -> Vec<ObjectId> { ids.iter().filter_map(|id| ObjectId::parse(id)).collect() };
    let deleted = objects(&stored.objects);
    let kept = objects(&stored.kept);
    for id in &deleted {
        let mut change = new_change(Action::Delete, id);
        change.cause = Some(Cause::Cascade);
        change.cascade_from = Some(cascade.to_string());
        change.reason = Some(format!("uninstalled with Helm release {release}"));
        changes.push(change);
    }
    for id in &kept {
        let mut change = new_change(Action::Skip, id);
        change.cause = Some(Cause::Cascade);
        change.cascade_from = Some(cascade.to_string());
        change.reason =
            Some("its helm.sh/resource-policy annotation keeps it: the uninstall leaves it in place".into());
        changes.push(change);
    }
    let mut summary = format!(
        "uninstalls Helm release {release} (revision {}): deletes {}",
        stored.version,
        crate::words::count(deleted.len(), "object", "objects")
    );
    if !kept.is_empty() {
        summary.push_str(&format!(", keeps {} (helm.sh/resource-policy)", kept.len()));
    }
    match (stored.delete_hooks, spec.disable_hooks) {
        (0, _) => {}
        (hooks, false) => {
            summary.push_str(&format!(", runs {}", crate::words::count(hooks, "delete hook", "delete hooks")))
        }
        (hooks, true) => summary.push_str(&format!(
            ", skips {} (spec.uninstall.disableHooks)",
            crate::words::count(hooks, "delete hook", "delete hooks")
        )),
    }
    summary
}

fn is_helm_release(id: &ObjectId) -> bool {
    id.group == HELM_GROUP && id.kind == HELM_RELEASE_KIND
}

impl ClusterView<'_> {
    /// Adds what uninstalling their releases deletes under each Kustomization that deletes a
    /// HelmRelease (directly or through a removed Kustomization's cascade).
    pub(super) fn cascade_helm_uninstalls(&self, plans: &mut [KustomizationPlan]) {
        for plan in plans.iter_mut() {
            let owner = plan.unit_ref();
            let mut added = Vec::new();
            for change in plan.changes.iter_mut().filter(|c| c.action == Action::Delete) {
                let Some(id) = ObjectId::parse(&change.id).filter(is_helm_release) else { continue };
                let (manifest, live) = match self.live_object(&id) {
                    Live::Present(object) => (object.clone(), true),
                    _ => match self.base_object(&owner, &id) {
                        Some(object) => (Value::clone(&object.object), false),
                        None => (json!({"metadata": {"name": id.name, "namespace": id.namespace}}), false),
                    },
                };
                let Some(outcome) = helm::on_deletion(&manifest, live) else { continue };
                let storage = self.helm_storage(&outcome);
                let unit = UnitRef::new(UnitKind::HelmRelease, &id.namespace, &id.name);
                // A readable storage record is what the uninstall deletes; status.inventory only
                // stands in without one.
                let recorded = matches!(storage, Storage::Read(Some(stored)) if stored.error.is_none());
                let listed = (live && !recorded).then(|| helm::status_inventory(&manifest)).flatten();
                let mut uninstall = match (&outcome, &listed) {
                    (OnDeletion::Uninstalls(release), Some(listed)) => {
                        self.uninstall_listed(&unit, release, listed)
                    }
                    _ => uninstall(&id.namespace, &id.name, &outcome, UninstallSpec::of(&manifest), storage),
                };
                // A release rendered at base is a unit of the plan: its own plan lists what the
                // uninstall deletes, from its status.inventory, Helm's storage or else that render.
                if let Some(base) = self.base.get(&unit) {
                    let rendered = base.status == crate::render::Status::Rendered;
                    let from = match storage {
                        _ if listed.is_some() => Some("its status.inventory"),
                        Storage::Offline | Storage::NotRead if rendered => Some("the base render"),
                        _ => None,
                    };
                    if let (OnDeletion::Uninstalls(release), Some(from)) = (&outcome, from) {
                        uninstall.summary = format!(
                            "uninstalls Helm release {release}: what it deletes is listed under {} (from {from})",
                            unit.label()
                        );
                    }
                    uninstall.changes.clear();
                }
                change.reason = Some(match change.reason.take() {
                    Some(reason) => format!("{reason}; {}", uninstall.summary),
                    None => uninstall.summary.clone(),
                });
                // A deletion that is itself a cascade is listed by where it comes from (the
                // report shows no reason for it): say the uninstall in a note too.
                if change.cascade_from.is_some() {
                    plan.notes.push(format!(
                        "{HELM_RELEASE_KIND} {}/{} is deleted: {}",
                        id.namespace, id.name, uninstall.summary
                    ));
                }
                added.extend(uninstall.changes);
            }
            plan.changes.extend(added);
        }
    }

    /// What uninstalling `release` deletes as its live HelmRelease's `status.inventory` lists it:
    /// all of it but what `keep` keeps and the CRDs of the chart's crds/ (`helm_stale`).
    fn uninstall_listed(&self, owner: &UnitRef, release: &ReleaseRef, listed: &[ObjectId]) -> Uninstall {
        let cascade = format!("{HELM_RELEASE_KIND} {}/{}", owner.namespace, owner.name);
        let changes: Vec<Change> = listed
            .iter()
            .map(|id| {
                let mut change = new_change(Action::Delete, id);
                change.cause = Some(Cause::Cascade);
                change.cascade_from = Some(cascade.clone());
                change.reason = Some(format!("uninstalled with Helm release {release}"));
                self.helm_stale(change, owner, id)
            })
            .collect();
        let deleted = changes.iter().filter(|c| c.action == Action::Delete).count();
        let mut summary = format!(
            "uninstalls Helm release {release}: deletes {} (from the HelmRelease's status.inventory)",
            crate::words::count(deleted, "object", "objects")
        );
        if deleted < changes.len() {
            let kept = changes.len() - deleted;
            summary.push_str(&format!(", keeps {kept} (helm.sh/resource-policy: keep, the chart's crds/)"));
        }
        Uninstall { summary, changes }
    }

    fn helm_storage(&self, outcome: &OnDeletion) -> Storage<'_> {
        let OnDeletion::Uninstalls(release) = outcome else { return Storage::NotRead };
        match self.live {
            None => Storage::Offline,
            Some(snapshot) => match &snapshot.helm_releases {
                None => Storage::NotRead,
                Some(read) => Storage::Read(read_summary(read, release)),
            },
        }
    }
}

impl ClusterView<'_> {
    /// The HelmRelease object as its finalizer sees it: the live one (`true`), else the base
    /// revision's.
    fn helm_release_object(&self, reference: &UnitRef) -> Option<(serde_json::Value, bool)> {
        let id = ObjectId::new(&reference.namespace, &reference.name, HELM_GROUP, HELM_RELEASE_KIND);
        match self.live_object(&id) {
            Live::Present(object) => Some((object.clone(), true)),
            _ => self.base_object(reference, &id).map(|o| (Value::clone(&o.object), false)),
        }
    }

    /// What deleting a HelmRelease does to its release (internal/controller/helmrelease_controller.go
    /// `reconcileDelete`): uninstalled unless it is suspended or never installed anything.
    pub(super) fn helm_removal(&self, reference: &UnitRef) -> Removal {
        let manifest = self.helm_release_object(reference);
        let outcome = manifest.as_ref().and_then(|(object, live)| helm::on_deletion(object, *live));
        let suspended = self.unit(reference).and_then(|k| k.helm.as_deref()).is_some_and(|h| h.suspended);
        match outcome {
            Some(OnDeletion::Suspended(_)) => {
                Removal::Keeps("it is suspended: the finalizer skips the uninstall".into())
            }
            None if suspended => Removal::Keeps("it is suspended: the finalizer skips the uninstall".into()),
            Some(OnDeletion::NeverInstalled) => Removal::Keeps(
                "its status names no installed release: the finalizer has nothing to uninstall".into(),
            ),
            Some(OnDeletion::RemoteCluster(_)) => Removal::DeletesAll(
                "helm-controller uninstalls its Helm release in the cluster its spec.kubeConfig names".into(),
            ),
            _ => Removal::DeletesAll("helm-controller uninstalls its Helm release".into()),
        }
    }

    /// What the uninstall of a removed HelmRelease does, once its deletions are in its plan: a
    /// note, and the fate its alert (`helmrelease-removed`) reads. Nothing when Helm has no record
    /// of the release.
    pub(super) fn note_helm_uninstall(
        &self,
        reference: &UnitRef,
        source: InventorySource,
        plan: &mut KustomizationPlan,
    ) {
        let release =
            self.current_release(reference).map(|r| r.to_string()).unwrap_or_else(|| plan.name.clone());
        let stored = self.helm_stored(reference);
        if source == InventorySource::Cluster && plan.changes.is_empty() {
            return;
        }
        let cascade = plan.label();
        let count = |action| {
            plan.changes
                .iter()
                .filter(|c| c.action == action && c.cascade_from.as_deref() == Some(&cascade))
                .count()
        };
        let (deleted, kept) = (count(Action::Delete), count(Action::Skip));
        let mut what = match source {
            InventorySource::None => format!(
                "helm-controller's finalizer uninstalls Helm release {release}; what it deletes is unknown (the base \
                 revision did not render it{})",
                if self.live.is_some() { ", and Helm's storage was not read: plan with --read-secrets" } else { "" }
            ),
            _ => format!(
                "helm-controller's finalizer uninstalls Helm release {release}: deletes {} (from {})",
                crate::words::count(deleted, "object", "objects"),
                match source {
                    InventorySource::Cluster => self.helm_inventory_source(reference),
                    _ => "the base render",
                }
            ),
        };
        if kept > 0 {
            what.push_str(&format!(", keeps {kept} (helm.sh/resource-policy: keep, the chart's crds/)"));
        }
        let base_helm = self.base.get(reference).and_then(|k| k.helm.as_deref());
        let listed = base_helm.map(|h| super::release_target::delete_hooks(&h.hooks)).unwrap_or_default();
        let disabled =
            self.helm_release_object(reference).is_some_and(|(o, _)| helm::uninstall_disables_hooks(&o));
        if let Some(hooks) =
            super::release_target::delete_hooks_phrase(&listed, stored.map(|s| s.delete_hooks), disabled)
        {
            what.push_str(&format!(", {hooks}"));
        }
        plan.notes.push(what.clone());
        plan.release_fate = Some(ReleaseFate::Uninstalled(what));
    }

    /// A removed HelmRelease whose release stays installed: said in a note, and its fate.
    pub(super) fn note_helm_orphaned(&self, reference: &UnitRef, why: &str, plan: &mut KustomizationPlan) {
        let release =
            self.current_release(reference).map(|r| r.to_string()).unwrap_or_else(|| plan.name.clone());
        let what = format!(
            "removed from Git: {why}; Helm release {release} stays installed, and nothing is uninstalled"
        );
        plan.notes.push(what.clone());
        plan.release_fate = Some(ReleaseFate::Orphaned(what));
    }
}

/// True when Helm installed `object` from a release's manifest: Helm marks what it installs from
/// templates with the release's name (pkg/action/install.go `setMetadataVisitor`), helm-controller
/// with its HelmRelease's (its post-renderer), and Helm creates the CRDs of crds/ as they are
/// (`installCRDs`). A live CRD with neither mark is from crds/.
fn helm_installed(object: &serde_json::Value) -> bool {
    let metadata = &object["metadata"];
    metadata["annotations"]["meta.helm.sh/release-name"].is_string()
        || metadata["labels"]["helm.toolkit.fluxcd.io/name"].is_string()
}

/// Why an upgrade or uninstall leaves a CRD of the chart's `crds/` directory alone.
const CRDS_STAY: &str =
    "a CRD from the chart's crds/ directory: not part of the release's manifest, so Helm never deletes it";

impl ClusterView<'_> {
    /// What becomes of an object a release held and no longer renders (`change` a deletion):
    /// Helm deletes it unless `helm.sh/resource-policy: keep` says otherwise, or it is one of the
    /// chart's CRDs.
    pub(super) fn helm_stale(&self, mut change: Change, owner: &UnitRef, id: &ObjectId) -> Change {
        // Which CRDs came from crds/ is the old release's fact: the base render's, or the live
        // CRD's lack of Helm's marks. Never the head's: a pull request that moves a CRD to crds/
        // does not save it from an uninstall.
        let is_chart_crd = id.kind == "CustomResourceDefinition"
            && (self
                .base
                .get(owner)
                .and_then(|k| k.helm.as_deref())
                .is_some_and(|h| h.crds.contains(&id.name))
                || matches!(self.live_object(id), Live::Present(crd) if !helm_installed(crd)));
        if let (Some(_), Some(helm)) =
            (&change.cascade_from, self.unit(owner).and_then(|k| k.helm.as_deref()))
        {
            change.reason =
                Some(format!("uninstalled with Helm release {}/{}", helm.release_namespace, helm.release));
        }
        let skip = |change: &mut Change, why: String| {
            change.action = Action::Skip;
            change.reason = Some(why);
        };
        if is_chart_crd {
            skip(&mut change, CRDS_STAY.into());
            return change;
        }
        // A snapshot holds the live objects of Flux inventories and of HelmReleases' status
        // inventories, not of releases without one: an object it lacks is not known to be gone.
        // Helm's storage says what the release keeps.
        let stored_kept = self.helm_stored(owner).is_some_and(|s| s.kept.contains(&id.to_string()));
        match self.live_object(id) {
            Live::Present(object) if is_kept(object) => skip(&mut change, KEPT.into()),
            Live::Present(_) => {}
            _ if stored_kept => skip(&mut change, format!("{KEPT} (in the release's stored manifest)")),
            _ if self.base_object(owner, id).is_some_and(|o| is_kept(&o.object)) => {
                skip(&mut change, format!("{KEPT} (in the base manifest)"))
            }
            _ => {}
        }
        change
    }

    /// What an upgrade (or install) adds to a release's plan: the CRD policy (its hooks: `helm_hooks`).
    pub(super) fn helm_upgrade(&self, helm: &HelmUnit, upgrade: bool, plan: &mut KustomizationPlan) {
        let (policy, field) =
            if upgrade { (helm.upgrade_crds, "upgrade.crds") } else { (helm.install_crds, "install.crds") };
        for change in plan.changes.iter_mut() {
            if change.kind != "CustomResourceDefinition" || !helm.crds.contains(&change.name) {
                continue;
            }
            // Create makes missing CRDs and leaves existing ones; CreateReplace also replaces them.
            let applied = !matches!(
                (policy, change.action),
                (CrdPolicy::Skip, _) | (CrdPolicy::Create, Action::Update)
            );
            if !applied && matches!(change.action, Action::Create | Action::Update) {
                change.action = Action::Skip;
                change.reason = Some(format!(
                    "{field} is {policy:?}: helm-controller does not {} the chart's CRDs{}",
                    if change.diff.is_some() { "update" } else { "create" },
                    if policy == CrdPolicy::Skip && upgrade {
                        " (Skip is the default on upgrade)"
                    } else {
                        ""
                    }
                ));
            }
        }
        if upgrade {
            self.crds_leaving_the_manifest(helm, plan);
        }
    }

    /// CRDs the chart moves from its templates to its crds/ directory: Helm's upgrade deletes
    /// what the old manifest holds and the new one lacks (pkg/action/upgrade.go), crds/ are never
    /// part of a manifest, so the CRD is deleted, and every custom resource of it with it, whatever
    /// `upgrade.crds` says. Which CRDs were templates is read from the base render only: the head
    /// is the pull request's.
    fn crds_leaving_the_manifest(&self, helm: &HelmUnit, plan: &mut KustomizationPlan) {
        let owner = plan.unit_ref();
        let Some(base) = self.base.get(&owner).filter(|k| k.status == Status::Rendered) else { return };
        let Some(base_helm) = base.helm.as_deref() else { return };
        for name in helm.crds.iter().filter(|name| !base_helm.crds.contains(*name)) {
            let id = ObjectId::new("", name, "apiextensions.k8s.io", "CustomResourceDefinition");
            if self.base_object(&owner, &id).is_none() {
                continue;
            }
            let reason =
                "moves from the chart's templates/ to crds/: Helm's upgrade deletes it with the old \
                          manifest (crds/ are never part of one), and every custom resource of it with it";
            let key = id.to_string();
            let index = match plan.changes.iter().position(|c| c.id == key) {
                Some(index) => index,
                None => {
                    plan.changes.push(new_change(Action::Delete, &id));
                    plan.changes.len() - 1
                }
            };
            let change = &mut plan.changes[index];
            change.action = Action::Delete;
            change.diff = None;
            change.cause = Some(Cause::PullRequest);
            change.reason = Some(reason.into());
        }
    }

    /// The release's chart, and its change: `podinfo 6.5.0 → 6.6.0`. When a side's chart could
    /// not be had, the change its spec and sources ask for: `db 1.0.0 → 2.0.0 (asked for, not
    /// rendered)`.
    pub(super) fn chart_line(&self, reference: &UnitRef) -> Option<String> {
        let (base, head) = (self.base.get(reference).copied(), self.head.get(reference).copied());
        if let Some((before, after)) = asked_chart_change(base, head) {
            return Some(format!("{} (asked for, not rendered)", describe_change(&before, &after)));
        }
        let chart = |k: Option<&crate::render::RenderedKustomization>| k?.helm.as_deref()?.chart.clone();
        match (chart(base), chart(head)) {
            (Some(before), Some(after)) if before == after => Some(after.to_string()),
            (Some(before), Some(after)) if before.name == after.name => {
                Some(format!("{} {} → {}", after.name, before.version, after.version))
            }
            (Some(before), Some(after)) => Some(format!("{before} → {after}")),
            (before, after) => after.or(before).map(|c| c.to_string()),
        }
    }

    /// The record in Helm's storage of the release this HelmRelease manages now (the installed
    /// one, which a changed target replaces), when the storage was read.
    pub(super) fn helm_stored(&self, reference: &UnitRef) -> Option<&StoredReleaseSummary> {
        self.helm_stored_release(&self.current_release(reference)?)
    }

    /// A release's record in Helm's storage, when the storage was read and holds it.
    pub(super) fn helm_stored_release(&self, release: &ReleaseRef) -> Option<&StoredReleaseSummary> {
        read_summary(self.live?.helm_releases.as_ref()?, release)
    }
}

/// The chart a release asks for at base and at head, when the two differ and one side's chart
/// was not rendered (it could not be had, or its render fails): a chart change fluxplan cannot
/// show, whether or not the HelmRelease object changes (a new OCIRepository tag, a HelmChart's
/// version, another repository).
pub(super) fn asked_chart_change(
    base: Option<&RenderedKustomization>,
    head: Option<&RenderedKustomization>,
) -> Option<(ChartOrigin, ChartOrigin)> {
    let (base, head) = (base?, head?);
    if base.status == Status::Rendered && head.status == Status::Rendered {
        return None;
    }
    let origin = |k: &RenderedKustomization| k.helm.as_deref()?.origin.clone();
    let (before, after) = (origin(base)?, origin(head)?);
    (before != after).then_some((before, after))
}

/// `db 1.0.0 → 2.0.0`, or what else changes when the name and version stay (another URL).
pub(super) fn describe_change(before: &ChartOrigin, after: &ChartOrigin) -> String {
    if before.name != after.name || before.version != after.version {
        return match before.name == after.name {
            true => format!("{} {} → {}", after.name, before.version, after.version),
            false => format!("{} → {}", before.describe(), after.describe()),
        };
    }
    let changed: Vec<&str> =
        after.inputs.iter().filter(|i| !before.inputs.contains(i)).map(String::as_str).collect();
    format!("{} from another source ({})", after.describe(), changed.join("; "))
}

/// True for a release rendered at head whose base chart fluxplan could not have (`external` at
/// base): what it holds before the merge is not known from the base render. A base render that
/// fails is the controller's failure too, planned as other failing bases are (every object
/// listed as created, with a note).
pub(super) fn base_unknown(
    base: Option<&RenderedKustomization>,
    head: Option<&RenderedKustomization>,
) -> bool {
    let (Some(base), Some(head)) = (base, head) else { return false };
    base.kind == UnitKind::HelmRelease && base.status == Status::External && head.status == Status::Rendered
}

/// Why the base render of a release has no objects: its warning or its error.
pub(super) fn why_not_rendered(unit: &RenderedKustomization) -> String {
    match (&unit.error, unit.warnings.first()) {
        (Some(error), _) => error.message.lines().next().unwrap_or("").to_string(),
        (None, Some(warning)) => warning.clone(),
        (None, None) => "it was not rendered".into(),
    }
}

const KEPT: &str = "its helm.sh/resource-policy annotation keeps it: Helm leaves it in place";

fn read_summary<'a>(
    read: &'a BTreeMap<(String, String), StoredReleaseSummary>,
    release: &ReleaseRef,
) -> Option<&'a StoredReleaseSummary> {
    read.get(&(release.storage_namespace.clone(), release.name.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release() -> ReleaseRef {
        ReleaseRef { name: "web".into(), namespace: "apps".into(), storage_namespace: "flux-system".into() }
    }

    fn stored(objects: &[&str], kept: &[&str]) -> StoredReleaseSummary {
        StoredReleaseSummary {
            name: "web".into(),
            namespace: "apps".into(),
            storage_namespace: "flux-system".into(),
            version: 4,
            status: "deployed".into(),
            objects: objects.iter().map(|s| s.to_string()).collect(),
            kept: kept.iter().map(|s| s.to_string()).collect(),
            delete_hooks: 1,
            error: None,
        }
    }

    #[test]
    fn a_read_release_lists_its_objects_under_the_cascade() {
        let summary =
            stored(&["apps_web_apps_Deployment", "apps_web__Service"], &["apps_data__PersistentVolumeClaim"]);
        let out = uninstall(
            "flux-system",
            "web",
            &OnDeletion::Uninstalls(release()),
            UninstallSpec::default(),
            Storage::Read(Some(&summary)),
        );
        let listed: Vec<_> = out.changes.iter().map(|c| (c.action, c.id.as_str())).collect();
        assert_eq!(
            listed,
            [
                (Action::Delete, "apps_web_apps_Deployment"),
                (Action::Delete, "apps_web__Service"),
                (Action::Skip, "apps_data__PersistentVolumeClaim")
            ]
        );
        assert!(out.changes.iter().all(|c| c.cascade_from.as_deref() == Some("HelmRelease flux-system/web")));
        assert!(
            out.summary.contains("revision 4") && out.summary.contains("deletes 2 objects"),
            "{}",
            out.summary
        );
        assert!(
            out.summary.contains("keeps 1") && out.summary.contains("runs 1 delete hook"),
            "{}",
            out.summary
        );
        let no_hooks = UninstallSpec { disable_hooks: true };
        let uninstalls = OnDeletion::Uninstalls(release());
        let out = uninstall("flux-system", "web", &uninstalls, no_hooks, Storage::Read(Some(&summary)));
        assert!(out.summary.contains("skips 1 delete hook "), "{}", out.summary);
    }

    #[test]
    fn unknown_contents_are_said_never_guessed() {
        let offline = uninstall(
            "flux-system",
            "web",
            &OnDeletion::Uninstalls(release()),
            UninstallSpec::default(),
            Storage::Offline,
        );
        assert!(offline.changes.is_empty());
        assert_eq!(offline.summary, "uninstalls Helm release apps/web (contents unknown offline)");
        let not_read = uninstall(
            "flux-system",
            "web",
            &OnDeletion::Uninstalls(release()),
            UninstallSpec::default(),
            Storage::NotRead,
        );
        assert!(not_read.summary.contains("--read-secrets"));
        let mut broken = stored(&[], &[]);
        broken.error = Some("the release data is not valid gzip".into());
        let out = uninstall(
            "flux-system",
            "web",
            &OnDeletion::Uninstalls(release()),
            UninstallSpec::default(),
            Storage::Read(Some(&broken)),
        );
        assert!(out.changes.is_empty() && out.summary.contains("not valid gzip"), "{}", out.summary);
        let gone = uninstall(
            "flux-system",
            "web",
            &OnDeletion::Uninstalls(release()),
            UninstallSpec::default(),
            Storage::Read(None),
        );
        assert!(gone.summary.contains("no record"), "{}", gone.summary);
    }

    #[test]
    fn suspended_and_uninstalled_releases_delete_nothing() {
        let out = uninstall(
            "flux-system",
            "web",
            &OnDeletion::Suspended(release()),
            UninstallSpec::default(),
            Storage::Offline,
        );
        assert!(out.changes.is_empty() && out.summary.contains("stays installed"));
        let mut done = stored(&["apps_web_apps_Deployment"], &[]);
        done.status = "uninstalled".into();
        let out = uninstall(
            "flux-system",
            "web",
            &OnDeletion::Uninstalls(release()),
            UninstallSpec::default(),
            Storage::Read(Some(&done)),
        );
        assert!(out.changes.is_empty() && out.summary.contains("already uninstalled"));
    }
}
