//! Where a HelmRelease's Helm release is installed, and what helm-controller does when that
//! changes. Before it upgrades, the controller compares the release its status records (storage
//! namespace, the latest release's namespace, name and chart name) with what the spec asks for
//! (`ReleaseTargetChanged`, internal/action/verify.go); on a difference it uninstalls the recorded
//! release, delete hooks and all, and installs anew (internal/controller/helmrelease_controller.go).
//! So every object of the old release goes, even one the new release renders under the same name.
//! `spec.kubeConfig` is not part of that check: a release sent to another cluster leaves the old
//! one installed where it was.

use super::compute::{ClusterView, Live};
use super::{Action, Cause, Change, InventorySource, KustomizationPlan, ReleaseFate};
use crate::flux::helm::{self, ReleaseRef, ReleaseTarget, TargetChange, HELM_GROUP, HELM_RELEASE_KIND};
use crate::flux::ObjectId;
use crate::render::helm::HelmUnit;
use crate::render::UnitRef;
use std::collections::BTreeMap;

/// A release uninstalled and installed anew.
#[derive(Debug, Clone)]
pub(super) struct Reinstall {
    pub change: TargetChange,
    pub from: ReleaseRef,
    pub to: ReleaseRef,
}

/// The cluster a release lives in, in words, when `spec.kubeConfig` names none.
const LOCAL_CLUSTER: &str = "the cluster helm-controller runs in";

fn target_of(helm: &HelmUnit) -> ReleaseTarget {
    ReleaseTarget {
        release: ReleaseRef {
            name: helm.release.clone(),
            namespace: helm.release_namespace.clone(),
            storage_namespace: helm.storage_namespace.clone(),
        },
        chart: helm.chart.as_ref().map(|c| c.name.clone()),
    }
}

/// The hooks among a release's (`Job ns/name on pre-delete`) that an uninstall runs.
pub(super) fn delete_hooks(hooks: &[String]) -> Vec<&str> {
    let runs_on_delete = |hook: &&String| {
        hook.rsplit_once(" on ").is_some_and(|(_, events)| {
            events.split(',').any(|e| matches!(e.trim(), "pre-delete" | "post-delete"))
        })
    };
    hooks.iter().filter(runs_on_delete).map(String::as_str).collect()
}

/// What a sentence says of an uninstall's delete hooks: those the base render lists, else the
/// count Helm's storage holds; `disabled` by `spec.uninstall.disableHooks`.
pub(super) fn delete_hooks_phrase(listed: &[&str], stored: Option<usize>, disabled: bool) -> Option<String> {
    let what = match (listed, stored) {
        ([], None | Some(0)) => return None,
        ([], Some(n)) => crate::words::count(n, "delete hook", "delete hooks"),
        ([hook], _) => format!("its delete hook {hook}"),
        (hooks, _) => format!("its delete hooks {}", hooks.join("; ")),
    };
    Some(match disabled {
        false => format!("runs {what}"),
        true => format!("skips {what} (spec.uninstall.disableHooks)"),
    })
}

impl<'a> ClusterView<'a> {
    /// The HelmRelease object as the cluster has it.
    pub(super) fn live_helm_release(&self, reference: &UnitRef) -> Live<'a> {
        self.live_object(&ObjectId::new(&reference.namespace, &reference.name, HELM_GROUP, HELM_RELEASE_KIND))
    }

    /// The release installed now: as the live HelmRelease's status records it, else (the cluster
    /// not read) as the base revision renders it. `None` when nothing is installed.
    fn installed_target(&self, reference: &UnitRef) -> Option<ReleaseTarget> {
        match self.live_helm_release(reference) {
            Live::Present(live) => helm::installed_target(live),
            Live::Missing => None,
            Live::Unknown => self.base.get(reference).and_then(|k| k.helm.as_deref()).map(target_of),
        }
    }

    /// The release helm-controller manages for this HelmRelease now (the installed one), else
    /// the one the head asks for: where Helm's storage says what it holds.
    pub(super) fn current_release(&self, reference: &UnitRef) -> Option<ReleaseRef> {
        if let Some(installed) = self.installed_target(reference) {
            return Some(installed.release);
        }
        self.unit(reference).and_then(|k| k.helm.as_deref()).map(|h| target_of(h).release)
    }

    /// The cluster the release is in now and the one the head sends it to, when they differ
    /// (`spec.kubeConfig` added, changed or removed).
    pub(super) fn cluster_move(&self, reference: &UnitRef) -> Option<(String, String)> {
        let head = self.head.get(reference)?.helm.as_deref()?;
        let now = match self.live_helm_release(reference) {
            Live::Present(live) => helm::kube_config(live),
            Live::Missing => return None,
            Live::Unknown => self.base.get(reference)?.helm.as_deref()?.kube_config.clone(),
        };
        let words = |config: Option<&String>| config.cloned().unwrap_or_else(|| LOCAL_CLUSTER.to_string());
        (now != head.kube_config).then(|| (words(now.as_ref()), words(head.kube_config.as_ref())))
    }

    /// The reinstall the head asks for, if any. Not when the release moves to another cluster:
    /// the uninstall then looks for the old release where it never was.
    pub(super) fn reinstall(&self, reference: &UnitRef) -> Option<Reinstall> {
        if self.cluster_move(reference).is_some() {
            return None;
        }
        self.target_change(reference)
    }

    /// The release target the head asks for, when it differs from the installed one.
    fn target_change(&self, reference: &UnitRef) -> Option<Reinstall> {
        let head = self.head.get(reference)?.helm.as_deref()?;
        let installed = self.installed_target(reference)?;
        let wanted = target_of(head);
        let change = helm::target_change(&installed, &wanted, head.reinstalls_on_chart_rename)?;
        Some(Reinstall { change, from: installed.release, to: wanted.release })
    }

    /// What uninstalling the old release does to each object it holds (`inventory`): deleted,
    /// but for what `helm.sh/resource-policy: keep` keeps and the chart's `crds/`.
    pub(super) fn uninstall_for_reinstall(
        &self,
        reference: &UnitRef,
        reinstall: &Reinstall,
        inventory: &[ObjectId],
    ) -> BTreeMap<ObjectId, Change> {
        inventory
            .iter()
            .map(|id| {
                let mut change = self.stale(id, reference, true, None);
                if change.action == Action::Delete {
                    change.cause = Some(Cause::PullRequest);
                    change.reason = Some(format!(
                        "uninstalled with Helm release {}: its {}, so helm-controller uninstalls it before \
                         installing {}",
                        reinstall.from, reinstall.change, reinstall.to
                    ));
                }
                (id.clone(), change)
            })
            .collect()
    }

    /// The notes and fate of a reinstall, once its changes are in the plan.
    pub(super) fn note_reinstall(
        &self,
        reference: &UnitRef,
        reinstall: &Reinstall,
        plan: &mut KustomizationPlan,
    ) {
        let deleted = plan
            .changes
            .iter()
            .filter(|c| c.action == Action::Delete && c.cause == Some(Cause::PullRequest))
            .count();
        let base_helm = self.base.get(reference).and_then(|k| k.helm.as_deref());
        let listed = base_helm.map(|h| delete_hooks(&h.hooks)).unwrap_or_default();
        let stored = self.helm_stored_release(&reinstall.from).map(|s| s.delete_hooks);
        let disabled = self
            .head
            .get(reference)
            .and_then(|k| k.helm.as_deref())
            .is_some_and(|h| h.uninstall_disables_hooks);
        let deletes = match plan.inventory_source {
            InventorySource::None => {
                "what it deletes is unknown: the base revision did not render it".to_string()
            }
            _ => format!("deletes {}", crate::words::count(deleted, "object", "objects")),
        };
        let mut what = format!(
            "its {}: helm-controller uninstalls Helm release {} ({deletes}",
            reinstall.change, reinstall.from
        );
        if let Some(hooks) = delete_hooks_phrase(&listed, stored, disabled) {
            what.push_str(&format!(", {hooks}"));
        }
        what.push_str(&format!(") and installs {} anew", reinstall.to));
        plan.notes.push(what.clone());
        plan.release_fate = Some(ReleaseFate::Reinstalled { change: reinstall.change.to_string(), what });
    }

    /// A note when the cluster runs another chart version than base and head both render: the
    /// source moved outside Git (an index that resolves a range anew, a tag pushed again), and
    /// helm-controller upgrades at its next reconcile whether or not this merges. The plan
    /// compares base with head, so that upgrade is not among its changes.
    pub(super) fn note_installed_chart(&self, reference: &UnitRef, plan: &mut KustomizationPlan) {
        let Live::Present(live) = self.live_helm_release(reference) else { return };
        let Some((name, installed)) = helm::installed_chart(live) else { return };
        let chart = |side: &BTreeMap<UnitRef, &crate::render::RenderedKustomization>| {
            side.get(reference).and_then(|k| k.helm.as_deref()).and_then(|h| h.chart.clone())
        };
        let (Some(base), Some(head)) = (chart(&self.base), chart(&self.head)) else { return };
        // Build metadata is the artifact digest helm-controller appends, not a version change.
        let plain = |version: &str| version.split('+').next().unwrap_or(version).to_string();
        if base != head || head.name != name || plain(&head.version) == plain(&installed) {
            return;
        }
        plan.notes.push(format!(
            "the cluster runs chart {name} {installed}, and its source gives {} {} now, before and after this \
             merge alike: helm-controller upgrades to it at its next reconcile whether or not this merges, and \
             that upgrade is not among this plan's changes",
            head.name, head.version
        ));
    }

    /// The note and fate of a release sent to another cluster.
    pub(super) fn note_cluster_move(&self, reference: &UnitRef, plan: &mut KustomizationPlan) {
        let Some((from, to)) = self.cluster_move(reference) else { return };
        let release = self.current_release(reference).map(|r| r.to_string()).unwrap_or_default();
        plan.notes.push(format!(
            "spec.kubeConfig changes: helm-controller installs the release in {to}; Helm release {release} stays \
             installed in {from}, managed by nothing"
        ));
        // Whether the new kubeConfig reaches another cluster is the Secret's to say: should it be
        // this one, the changed target uninstalls the old release here.
        let retargeted = self.target_change(reference).map(|reinstall| {
            format!(
                "its {} too: should {to} be {from} after all, helm-controller uninstalls Helm release {} there \
                 (every object of it deleted) before installing {}",
                reinstall.change, reinstall.from, reinstall.to
            )
        });
        plan.notes.extend(retargeted.clone());
        plan.release_fate = Some(ReleaseFate::Moved { from, to, retargeted });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_hooks_are_those_that_run_on_delete() {
        let hooks: Vec<String> = vec![
            "Job data/migrate on pre-install,pre-upgrade".into(),
            "Job data/cleanup on pre-delete".into(),
            "ConfigMap data/bye on post-upgrade,post-delete".into(),
            // A name holding " on " is split at the last one.
            "Job data/on on-call on pre-upgrade".into(),
        ];
        assert_eq!(
            delete_hooks(&hooks),
            ["Job data/cleanup on pre-delete", "ConfigMap data/bye on post-upgrade,post-delete"]
        );
        assert_eq!(
            delete_hooks_phrase(&delete_hooks(&hooks), Some(5), false).as_deref(),
            Some("runs its delete hooks Job data/cleanup on pre-delete; ConfigMap data/bye on post-upgrade,post-delete")
        );
        assert_eq!(
            delete_hooks_phrase(&[], Some(2), true).as_deref(),
            Some("skips 2 delete hooks (spec.uninstall.disableHooks)")
        );
        assert_eq!(delete_hooks_phrase(&[], Some(0), false), None);
        assert_eq!(delete_hooks_phrase(&[], None, false), None);
    }
}
