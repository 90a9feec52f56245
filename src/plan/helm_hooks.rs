//! A release's hooks in its plan. Helm runs a release's hooks around its install and upgrade
//! (`pkg/action/install.go`, `upgrade.go`: unless `disableHooks`, which helm-controller sets from
//! `spec.install.disableHooks`/`spec.upgrade.disableHooks`), and its test hooks when
//! helm-controller tests the release (`spec.test.enable`, `internal/reconcile/install.go`,
//! `upgrade.go`). Each run creates the hook anew (`pkg/action/hooks.go`: the previous one is
//! deleted first under `before-hook-creation`, Helm's default): so a hook is a change of the
//! release when the pull request adds or changes it, compared by content with the base render.
//! An unchanged hook ran at the last upgrade too and is no change. Hooks are not part of the
//! release's manifest: an upgrade never deletes one the chart drops, and neither does an
//! uninstall (it runs the delete hooks of the stored release and deletes its manifest only).
//!
//! A chart that calls `lookup` is rendered with an empty map where the controller asks the API
//! server: when the release's inputs change, the release is a change whatever the renders show.

use super::compute::{new_change, update, ClusterView};
use super::{Action, HookRun, KustomizationPlan, KustomizationStatus};
use crate::flux::ObjectId;
use crate::render::helm::manifest::{DEFAULT_DELETE_POLICY, TEST_EVENT};
use crate::render::helm::units::HookObject;
use crate::render::helm::HelmUnit;
use crate::render::{Status, UnitRef};
use std::collections::{BTreeMap, BTreeSet};

impl ClusterView<'_> {
    /// Adds the hooks this install (`upgrade` false) or upgrade runs and the pull request adds or
    /// changes, and says which changed hooks do not run and which hooks the chart dropped.
    pub(super) fn helm_hooks(
        &self,
        reference: &UnitRef,
        helm: &HelmUnit,
        upgrade: bool,
        plan: &mut KustomizationPlan,
    ) {
        let base =
            self.base.get(reference).filter(|k| k.status == Status::Rendered).and_then(|k| k.helm.as_deref());
        let before: BTreeMap<&ObjectId, &HookObject> = base
            .into_iter()
            .flat_map(|h| &h.hook_objects)
            .filter_map(|hook| Some((hook.object.id.as_ref()?, hook)))
            .collect();
        let action = if upgrade { "upgrade" } else { "install" };
        let mut not_run = Vec::new();
        let mut run_again = Vec::new();
        for hook in &helm.hook_objects {
            let Some(id) = &hook.object.id else { continue };
            let events = hook.events.join(", ");
            let mut change = match before.get(id) {
                Some(old) => match update(&old.object, &hook.object, id) {
                    Some(change) => change,
                    // Unchanged, and it did not run before but runs now (a `disableHooks` lifted,
                    // tests enabled): its first run, reviewed as new, or a hook planted while
                    // disabled would never be.
                    None if runs(helm, hook, upgrade).is_ok()
                        && base.is_some_and(|b| runs(b, old, upgrade).is_err()) =>
                    {
                        new_change(Action::Create, id)
                    }
                    None => {
                        if runs(helm, hook, upgrade).is_ok() {
                            run_again.push(format!("{} on {events}", id.display_name()));
                        }
                        continue;
                    }
                },
                None => new_change(Action::Create, id),
            };
            let delete_policy = if hook.delete_policy.is_empty() {
                DEFAULT_DELETE_POLICY.to_string()
            } else {
                hook.delete_policy.join(",")
            };
            let when = match runs(helm, hook, upgrade) {
                Ok(()) => Ok(format!("the {action} creates it anew")),
                // Put in place by this merge, run by a later uninstall or rollback: reviewed now,
                // or a planted hook would never be reviewed at all.
                Err(_) => runs_later(helm, hook).ok_or(()),
            };
            match when {
                Ok(when) => {
                    change.reason = Some(format!(
                        "Helm hook on {events} (delete policy {delete_policy}): {when}, outside the release's \
                         manifest"
                    ));
                    change.hook = Some(HookRun { events: hook.events.clone(), delete_policy });
                    plan.changes.push(change);
                }
                Err(()) => not_run.push(format!(
                    "{} on {events} ({}): {}",
                    id.display_name(),
                    if change.action == Action::Create { "new" } else { "changed" },
                    runs(helm, hook, upgrade).err().unwrap_or_default()
                )),
            }
        }
        // Any change makes helm-controller upgrade, and every upgrade runs the upgrade hooks.
        if plan.changes.iter().any(|c| c.action != Action::Skip) && !run_again.is_empty() {
            plan.notes.push(format!(
                "the {action} runs {}, unchanged, not part of the release: {}",
                crate::words::agree(run_again.len(), "a hook", "hooks"),
                run_again.join("; ")
            ));
        }
        if !not_run.is_empty() {
            plan.notes.push(format!(
                "{} this {action} does not run, so no change: {}",
                crate::words::agree(not_run.len(), "a hook", "hooks"),
                not_run.join("; ")
            ));
        }
        // Still rendered: as a hook, or as an object of the manifest (a post-renderer unhooked it).
        let rendered: BTreeSet<&ObjectId> = helm
            .hook_objects
            .iter()
            .map(|h| &h.object)
            .chain(self.head.get(reference).into_iter().flat_map(|k| &k.objects))
            .filter_map(|o| o.id.as_ref())
            .collect();
        let dropped: Vec<String> = before
            .iter()
            .filter(|(id, _)| !rendered.contains(*id))
            .map(|(id, hook)| format!("{} ({})", id.display_name(), hook.events.join(", ")))
            .collect();
        if !dropped.is_empty() {
            plan.notes.push(format!(
                "no longer {} of the chart: {}. Helm neither runs nor deletes {} (hooks are not part of the \
                 release's manifest): an object an earlier run left stays",
                crate::words::agree(dropped.len(), "a hook", "hooks"),
                dropped.join("; "),
                crate::words::agree(dropped.len(), "it", "them")
            ));
        }
        self.helm_lookup(reference, helm, plan);
    }

    /// A release whose chart calls `lookup`: when what it renders from changed, what the
    /// controller installs may differ from both renders, so the release is a change.
    fn helm_lookup(&self, reference: &UnitRef, helm: &HelmUnit, plan: &mut KustomizationPlan) {
        if helm.lookup.is_empty() {
            return;
        }
        let before = self
            .base
            .get(reference)
            .filter(|k| k.status == Status::Rendered)
            .and_then(|k| k.helm.as_deref())
            .map(|h| h.inputs_digest.as_str());
        if before == Some(helm.inputs_digest.as_str()) {
            return;
        }
        if plan.status == KustomizationStatus::Unchanged {
            plan.status = KustomizationStatus::Changed;
        }
        plan.notes.push(format!(
            "its chart calls lookup ({}) and what the release is rendered from changes: helm template answers \
             lookup with an empty map, helm-controller's Helm with what the API server holds, so what it installs \
             may differ from what is shown",
            helm.lookup.join(", ")
        ));
    }
}

/// When a later uninstall or rollback runs `hook` (`None`: it never runs on either): helm-controller
/// runs the delete hooks unless `spec.uninstall.disableHooks`, and a rollback's hooks when its
/// remediation rolls back.
fn runs_later(helm: &HelmUnit, hook: &HookObject) -> Option<String> {
    let on = |events: &[&str]| hook.events.iter().any(|e| events.contains(&e.as_str()));
    if on(&["pre-delete", "post-delete"]) && !helm.hook_settings.uninstall_disabled {
        return Some(
            "the uninstall of the release runs it, later: reviewed now, as this merge puts it in place"
                .into(),
        );
    }
    if on(&["pre-rollback", "post-rollback"]) {
        return Some(
            "a rollback of the release runs it, later: reviewed now, as this merge puts it in place".into(),
        );
    }
    None
}

/// Whether this install or upgrade runs `hook`, or why not.
fn runs(helm: &HelmUnit, hook: &HookObject, upgrade: bool) -> Result<(), String> {
    let settings = &helm.hook_settings;
    let (pre, post, disabled, field) = if upgrade {
        ("pre-upgrade", "post-upgrade", settings.upgrade_disabled, "spec.upgrade.disableHooks")
    } else {
        ("pre-install", "post-install", settings.install_disabled, "spec.install.disableHooks")
    };
    let on_action = hook.events.iter().any(|e| e == pre || e == post);
    if on_action && !disabled {
        return Ok(());
    }
    let name = hook.object.object["metadata"]["name"].as_str().unwrap_or("");
    if hook.events.iter().any(|e| e == TEST_EVENT) {
        if settings.test_enabled && settings.runs_test(name) {
            return Ok(());
        }
        if !on_action {
            return Err(if settings.test_enabled {
                "spec.test.filters leave it out".into()
            } else {
                "test hooks run only with spec.test.enable".into()
            });
        }
    }
    if on_action {
        return Err(format!("{field} is true"));
    }
    Err(format!("it runs only on {}", hook.events.join(", ")))
}
