//! What a reader needs beyond the verdict: how a blocked plan is unblocked, and which alerts are
//! standing ones about units the pull request does not change (shown once, in a footer).

use crate::plan::{Action, Alert, KustomizationPlan, KustomizationStatus, Plan, Severity, Verdict};
use std::collections::BTreeSet;

/// Alerts that describe a unit as it stands, whatever the pull request does.
const STANDING_CODES: &[&str] = &[
    "unresolved-substitution",
    "external-source",
    "external-artifact",
    "unknown-revision",
    "helm-release-stuck",
    "chart-lookup",
    "capabilities-assumed",
    "chart-archive-hidden",
    "failing-before",
    "roots-assumed",
];

/// True for a warning or note about how a unit this pull request leaves as it is stands (a
/// substitution only the cluster resolves, a source in another repository): it says the same on
/// every plan, so it is not among the alerts that are this plan's news. Dangers are never standing.
pub fn standing(plan: &Plan, alert: &Alert) -> bool {
    if alert.severity == Severity::Danger || !STANDING_CODES.contains(&alert.code.as_str()) {
        return false;
    }
    let (Some(cluster), Some(reference)) = (&alert.cluster, &alert.kustomization) else {
        return false;
    };
    plan.kustomizations
        .iter()
        .find(|k| &k.cluster == cluster && &k.reference() == reference)
        .is_some_and(|k| untouched(plan, k))
}

/// The unit neither changes nor has its own object created, updated or deleted by the merge.
fn untouched(plan: &Plan, unit: &KustomizationPlan) -> bool {
    let quiet = matches!(
        unit.status,
        KustomizationStatus::Unchanged
            | KustomizationStatus::External
            | KustomizationStatus::Suspended
            | KustomizationStatus::Failed
    );
    let object_changed = unit.own_object_action(&plan.kustomizations, |action| action != Action::Skip);
    quiet && unit.changes.is_empty() && !object_changed
}

/// How a blocked plan is unblocked, a line each: fix and push, approve (`approve`, the bot's
/// words for who may, when there is a bot), or rate the alerts otherwise in the base branch's
/// policy, naming the keys that would change this verdict.
pub fn unblock(plan: &Plan, approve: Option<&str>) -> Vec<String> {
    if plan.verdict != Verdict::Blocked {
        return Vec::new();
    }
    // Every code that blocks, those a rated-down alert would leave blocking included: one policy
    // change unblocks, not one code at a time.
    let codes: BTreeSet<&str> = plan
        .alerts
        .iter()
        .filter(|a| a.severity == Severity::Danger)
        .flat_map(|a| std::iter::once(&a.code).chain(&a.also_blocking))
        .map(String::as_str)
        .collect();
    let mut lines = vec!["fix what the dangerous alerts name and push: the plan runs again".to_string()];
    lines.extend(approve.map(|how| format!("or, if the changes are intended, {how}")));
    let rated: Vec<String> = codes.iter().map(|code| format!("{code}: warning")).collect();
    let mut keys = vec![format!("`alerts: {{{}}}`", rated.join(", "))];
    if codes.contains("mass-deletion") {
        keys.push("`massDeletion.maxObjects` / `massDeletion.maxPercent` (the limits)".into());
    }
    if codes.contains("protected-kind-deletion") {
        keys.push("`protectedKinds` (the kinds whose deletion blocks)".into());
    }
    lines.push(format!(
        "or change the policy in `.fluxplan.yaml` on the base branch, in a pull request of its own (a pull \
         request's own policy does not rate it): {}",
        keys.join(", ")
    ));
    lines
}
