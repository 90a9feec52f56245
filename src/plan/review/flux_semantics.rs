//! `flux-semantics`: what a change to a Flux object makes the controllers do that its diff does
//! not say. `suspend-changed` and `prune-changed` already cover a Kustomization's own flips (see
//! `policy::spec_change_alerts`); this pass adds what they miss: a HelmRelease suspended or
//! resumed (`suspend-changed` too: one policy key for every suspension), `force` switched on,
//! intervals and timeouts the API server rejects or the controller reads as "never", and changes
//! under a unit that stays suspended.

use super::super::compute::ClusterView;
use super::super::{KustomizationPlan, KustomizationStatus};
use super::{fields, Candidate, Subject};
use crate::flux::ObjectId;
use crate::render::{Status, UnitKind};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const CODE: &str = "flux-semantics";

pub(super) fn check(subject: &Subject, found: &mut Vec<Candidate>) {
    match (subject.id.group.as_str(), subject.id.kind.as_str()) {
        (crate::flux::KUSTOMIZE_GROUP, "Kustomization") => kustomization(subject, found),
        (crate::flux::helm::HELM_GROUP, crate::flux::helm::HELM_RELEASE_KIND) => helm_release(subject, found),
        _ => {}
    }
}

fn kustomization(subject: &Subject, found: &mut Vec<Candidate>) {
    if switched_on(subject, &["spec", "force"]) {
        found.push(subject.finding(
            CODE,
            "spec.force",
            format!(
                "force is switched on: from now on Flux deletes and recreates any object of Kustomization {} \
                 whose immutable fields change, instead of failing the apply (a Job runs again, a claim comes \
                 back empty, a Service gets a new clusterIP)",
                reference(&subject.id)
            ),
        ));
    }
    durations(subject, &["interval", "retryInterval", "timeout"], found);
}

fn helm_release(subject: &Subject, found: &mut Vec<Candidate>) {
    if let Some(before) = subject.before() {
        let suspended = |o: &Value| o["spec"]["suspend"] == true;
        match (suspended(before), suspended(subject.after())) {
            (false, true) => found.push(subject.finding(
                "suspend-changed",
                "spec.suspend",
                "suspended: helm-controller stops installing, upgrading and remediating the release until it is \
                 resumed (and, deleted while suspended, leaves it installed)"
                    .into(),
            )),
            (true, false) => found.push(subject.finding(
                "suspend-changed",
                "spec.suspend",
                "resumed: helm-controller upgrades the release to this spec at once, with everything that \
                 changed while it was suspended"
                    .into(),
            )),
            _ => {}
        }
    }
    if switched_on(subject, &["spec", "upgrade", "force"]) {
        found.push(subject.finding(
            CODE,
            "spec.upgrade.force",
            "upgrade.force is switched on: every upgrade replaces the release's objects instead of patching \
             them, dropping what other controllers set on them (an autoscaler's replicas, injected fields)"
                .into(),
        ));
    }
    durations(subject, &["interval", "timeout"], found);
}

/// `namespace/name` of the object.
fn reference(id: &ObjectId) -> String {
    format!("{}/{}", id.namespace, id.name)
}

/// True when the field is `true` after the merge and was not before (an object the cluster
/// holds; a new one is not "switched").
fn switched_on(subject: &Subject, path: &[&str]) -> bool {
    let on = |o: &Value| fields::at(o, path) == Some(&Value::Bool(true));
    subject.before().is_some_and(|before| !on(before)) && on(subject.after())
}

/// Flux's duration fields: `^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$` in every Flux CRD.
fn duration_pattern() -> &'static regex::Regex {
    static PATTERN: OnceLock<regex::Regex> = OnceLock::new();
    PATTERN
        .get_or_init(|| regex::Regex::new(r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$").expect("the pattern parses"))
}

/// True when every number of a duration is zero (`0s`, `0m0s`).
fn is_zero(duration: &str) -> bool {
    duration
        .split(|c: char| c.is_ascii_alphabetic())
        .filter(|n| !n.is_empty())
        .all(|n| n.parse::<f64>().is_ok_and(|v| v == 0.0))
}

/// Durations this pull request sets that the API server rejects, or that the controller reads
/// as "never" or "no time".
fn durations(subject: &Subject, names: &[&str], found: &mut Vec<Candidate>) {
    let kind = subject.id.kind.as_str();
    for name in names {
        let path = ["spec", *name];
        let Some(value) = fields::at(subject.after(), &path) else { continue };
        if subject.before().is_some_and(|before| fields::same(fields::at(before, &path), Some(value))) {
            continue;
        }
        let text = value.as_str().unwrap_or("");
        let message = if !duration_pattern().is_match(text) {
            format!(
                "{} is not a duration Flux's API accepts (like 30s, 10m or 1h30m): the API server rejects this \
                 {kind}, so the apply of {} fails",
                fields::brief(value),
                subject.plan.label()
            )
        } else if !is_zero(text) {
            continue;
        } else {
            match *name {
                "interval" => format!(
                    "interval {text}: the controller never reconciles this {kind} on a schedule, only when its \
                     source or its spec changes (drift is not corrected, failures are not retried)"
                ),
                "retryInterval" => format!(
                    "retryInterval {text}: a failed reconcile of this {kind} is not retried on a schedule, only \
                     when its source or its spec changes"
                ),
                // kustomize-controller takes a timeout under 30s as 30s.
                "timeout" if kind == "Kustomization" => continue,
                _ => format!(
                    "timeout {text}: Helm's actions for this {kind} (waiting for its resources, hooks) get no \
                     time and fail at once"
                ),
            }
        };
        found.push(subject.finding(CODE, &fields::dotted(&path), message));
    }
}

/// Units suspended before and after the merge whose render this pull request changes: none of it
/// is applied until someone resumes them, and then all at once.
pub(super) fn suspended_units(view: &ClusterView, plans: &[KustomizationPlan], found: &mut Vec<Candidate>) {
    for plan in plans.iter().filter(|p| p.status == KustomizationStatus::Suspended) {
        let reference = plan.unit_ref();
        let (Some(head), Some(base)) = (view.head.get(&reference), view.base.get(&reference)) else {
            continue;
        };
        if !base.suspended() || head.status != Status::Rendered || base.status != Status::Rendered {
            continue;
        }
        let digests = |objects: &[crate::render::RenderedObject]| -> BTreeMap<String, String> {
            objects.iter().filter_map(|o| Some((o.id.as_ref()?.to_string(), o.digest.clone()))).collect()
        };
        let (before, after) = (digests(&base.objects), digests(&head.objects));
        let created = after.keys().filter(|id| !before.contains_key(*id)).count();
        let removed = before.keys().filter(|id| !after.contains_key(*id)).count();
        let updated = after.iter().filter(|(id, d)| before.get(*id).is_some_and(|b| b != *d)).count();
        if created + removed + updated == 0 {
            continue;
        }
        let counts: Vec<String> = [(created, "created"), (updated, "updated"), (removed, "removed")]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        let path = match plan.kind {
            UnitKind::ResourceSet => {
                format!("metadata.annotations.{}", crate::flux::resourceset::RECONCILE_ANNOTATION)
            }
            _ => "spec.suspend".into(),
        };
        found.push(Candidate {
            cluster: plan.cluster.clone(),
            unit: plan.label(),
            reference: plan.reference(),
            object: ObjectId::new(&plan.namespace, &plan.name, plan.kind.group(), plan.kind.as_str()),
            path,
            code: CODE,
            message: format!(
                "stays suspended while this pull request changes what it renders ({}): {} applies none of it \
                 until it is resumed, and then all of it at once",
                counts.join(", "),
                plan.controller()
            ),
            origin: head.file.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_durations_as_the_crds_do() {
        for ok in ["30s", "10m", "1h30m", "1.5h", "500ms", "0s"] {
            assert!(duration_pattern().is_match(ok), "{ok}");
        }
        for bad in ["1d", "10", "5min", "-1m", "1h 30m", "", "m"] {
            assert!(!duration_pattern().is_match(bad), "{bad}");
        }
        assert!(is_zero("0s") && is_zero("0m0s") && is_zero("0.0h"));
        assert!(!is_zero("0m1s") && !is_zero("500ms"));
    }
}
