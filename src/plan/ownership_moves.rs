//! Objects that move between a Kustomization and a HelmRelease (`ownership-move-deletion`). The
//! two controllers do not hand an object over: each acts on it alone, and which reconciles first
//! decides whether it survives.
//!
//! Kustomization → HelmRelease: helm-controller adopts the existing object (it takes ownership
//! unless `install`/`upgrade.disableTakeOwnership`: `internal/action/install.go`, `upgrade.go`)
//! and leaves kustomize-controller's owner labels on it. kustomize-controller's garbage collection
//! deletes what left its inventory when the object still carries those labels and none of its
//! opt-outs (`internal/controller/kustomization_controller.go` `deleteObjects`, fluxcd/pkg
//! `ssa/manager_delete.go` `Delete`: `Inclusions` are the owner labels, `Exclusions` the
//! `prune: disabled`, `reconcile: disabled` and `ssa: Ignore` marks). Should it run after the
//! adoption, the object is gone and nothing recreates it until the release's next upgrade (or
//! helm-controller's drift correction, when on).
//!
//! HelmRelease → Kustomization: kustomize-controller applies the object over the live one, and
//! Helm's upgrade deletes what the release's last manifest holds and the new one lacks, unless
//! `helm.sh/resource-policy: keep` (helm/helm `pkg/kube/client.go` `Update`). Should the upgrade
//! come after the apply, the object is gone until the Kustomization reconciles again.

use super::{Action, Change};
use crate::render::{UnitKind, UnitRef};

pub const CODE: &str = "ownership-move-deletion";

/// True when the object leaves a Kustomization for a HelmRelease, or the other way.
pub(super) fn across_controllers(old: &UnitRef, new: &UnitRef) -> bool {
    matches!(
        (old.kind, new.kind),
        (UnitKind::Kustomization, UnitKind::HelmRelease) | (UnitKind::HelmRelease, UnitKind::Kustomization)
    )
}

/// The old owner's change for an object `new` takes over, from what the old owner's controller
/// does to an object it no longer desires (`fate`): a deletion stays one, named as the possible
/// lasting deletion it is; what the old owner keeps (prune off, `prune: disabled`, `keep`, gone
/// already) is kept, its reason first, and the new owner takes it over.
pub(super) fn moved(mut fate: Change, old: &UnitRef, new: &UnitRef) -> Change {
    let takes_over = format!("{} takes it over", new.label());
    fate.reason = Some(match (fate.action, fate.reason.take()) {
        (Action::Delete, _) => {
            fate.moved_to = Some(new.to_string());
            format!("moves to {}: {}", new.label(), consequence(old, new))
        }
        (_, Some(kept_because)) => format!("{kept_because}; {takes_over}"),
        (_, None) => takes_over,
    });
    fate
}

/// What the two controllers may do to an object moving from `old` to `new`, and how to move it
/// safely.
fn consequence(old: &UnitRef, new: &UnitRef) -> String {
    let from_kustomization = old.kind == UnitKind::Kustomization;
    let (old, new) = (old.label(), new.label());
    if from_kustomization {
        format!(
            "helm-controller adopts it, and if kustomize-controller's garbage collection of {old} runs after \
             that, it deletes it for good (nothing recreates it until the release's next upgrade or drift \
             correction). To move it safely, first mark it `kustomize.toolkit.fluxcd.io/prune: disabled` in \
             {old}, merge, then move it"
        )
    } else {
        format!(
            "if kustomize-controller applies it before helm-controller upgrades {old}, Helm's upgrade deletes it \
             (it leaves the release's manifest), and it stays deleted until {new} reconciles again. To move it \
             safely, first annotate it `helm.sh/resource-policy: keep` in the chart, upgrade, then move it"
        )
    }
}

/// The `ownership-move-deletion` message of a change `moved` made a deletion in `old`'s plan;
/// `None` for any other change.
pub fn alert_message(change: &Change, old: &UnitRef) -> Option<String> {
    let (namespace, name) = change.moved_to.as_deref()?.split_once('/')?;
    let kind = match old.kind {
        UnitKind::Kustomization => UnitKind::HelmRelease,
        UnitKind::HelmRelease => UnitKind::Kustomization,
        _ => return None,
    };
    let new = UnitRef::new(kind, namespace, name);
    (change.action == Action::Delete).then(|| {
        format!(
            "{} moves from {} to {}: {}",
            change.display_name(),
            old.label(),
            new.label(),
            consequence(old, &new)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::compute::{new_change, NOT_FOUND};

    #[test]
    fn a_kept_object_keeps_its_reason_first_and_only_a_deletion_warns() {
        let id = crate::flux::ObjectId::parse("data_shared__ConfigMap").unwrap();
        let kustomization = UnitRef::new(UnitKind::Kustomization, "flux-system", "apps");
        let release = UnitRef::new(UnitKind::HelmRelease, "data", "web");
        let mut gone = new_change(Action::Skip, &id);
        gone.reason = Some(NOT_FOUND.into());
        let gone = moved(gone, &kustomization, &release);
        assert!(gone.reason.as_deref().unwrap().starts_with(NOT_FOUND), "{gone:?}");
        assert_eq!(gone.moved_to, None);
        assert_eq!(alert_message(&gone, &kustomization), None);
        let deleted = moved(new_change(Action::Delete, &id), &release, &kustomization);
        assert_eq!(deleted.moved_to.as_deref(), Some("flux-system/apps"));
        let message = alert_message(&deleted, &release).unwrap();
        assert!(
            message.starts_with(
                "ConfigMap data/shared moves from HelmRelease data/web to Kustomization flux-system/apps: "
            ),
            "{message}"
        );
    }
}
