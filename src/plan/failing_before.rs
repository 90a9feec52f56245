//! A unit that fails to render at base exactly as it fails at head, whose object and files this
//! pull request leaves as they are, fails whatever the merge does: the controller applies and
//! prunes nothing of it before and after. Its failure is not this plan's news, so it is a
//! standing `failing-before` warning, not a danger that blocks every pull request of the
//! repository until someone fixes it.
//!
//! Only failures that repeat exactly qualify: over one of fluxplan's limits (time, output) or
//! stopped, a render says nothing about the next one, and stays a danger.

use super::unplanned::reads;
use super::{Action, Alert, KustomizationPlan, Policy};
use crate::argocd::reads::covers;
use crate::render::{Render, Status};

/// The alert a unit failing as before gets instead of its failure's.
pub const CODE: &str = "failing-before";

/// Failures fluxplan's own limits or a stop caused: not the same failure twice by nature.
const NOT_REPEATABLE: &[&str] = &["source-limit", "cancelled"];

/// Failures where only fluxplan cannot build what the controller can (it fetches remote bases
/// unless it runs with `--no-remote-bases`).
const FLUXPLAN_ONLY: &[&str] = &["remote-base"];

/// Replaces the failure alert of every unit that fails as it failed before with a
/// `failing-before` warning. `changed`: the files the pull request changes.
pub fn relabel(
    alerts: &mut [Alert],
    policy: &Policy,
    plans: &[KustomizationPlan],
    (base, head): (&Render, &Render),
    changed: &[String],
) {
    for alert in alerts.iter_mut().filter(|a| matches!(a.code.as_str(), "build-failed" | "path-not-found")) {
        let Some(plan) = plans.iter().find(|p| {
            Some(&p.cluster) == alert.cluster.as_ref() && Some(p.reference()) == alert.kustomization
        }) else {
            continue;
        };
        if !fails_as_before(plan, plans, base, head, changed) {
            continue;
        }
        let error = plan.error.as_ref().map(|e| e.message.as_str()).unwrap_or_default();
        let consequence = if plan.error.as_ref().is_some_and(|e| FLUXPLAN_ONLY.contains(&e.code)) {
            "fluxplan could not plan it before this merge either".to_string()
        } else {
            format!("{} applies and prunes nothing of it, before this merge and after", plan.controller())
        };
        let message = format!(
            "{error}. It fails the same way at the base revision, and this pull request changes neither \
             it nor the files it reads: {consequence} (not caused by this pull request)"
        );
        if let Some(relabelled) =
            policy.alert(CODE, &plan.cluster, alert.kustomization.clone(), message, alert.objects.clone())
        {
            *alert = relabelled;
        }
    }
}

/// The unit's render fails at base with the same error as at head, its own object is neither
/// created, updated nor deleted, and no changed file is one it reads at either revision.
fn fails_as_before(
    plan: &KustomizationPlan,
    plans: &[KustomizationPlan],
    base: &Render,
    head: &Render,
    changed: &[String],
) -> bool {
    let Some(error) = plan.error.as_ref().filter(|e| !NOT_REPEATABLE.contains(&e.code)) else {
        return false;
    };
    let unit = plan.unit_ref();
    let (Some(before), Some(after)) = (base.unit(&plan.cluster, &unit), head.unit(&plan.cluster, &unit))
    else {
        return false;
    };
    let same_failure = before.status == Status::Failed && before.error.as_ref() == Some(error);
    let object_changes = plan.own_object_action(plans, |action| action != Action::Skip);
    let read: Vec<String> = reads(base, before).into_iter().chain(reads(head, after)).collect();
    let reads_a_change = changed.iter().any(|file| read.iter().any(|r| covers(r, file)));
    same_failure && !object_changes && !reads_a_change
}
