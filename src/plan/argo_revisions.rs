//! `source-ref-pinned` for Argo CD: a pull request that changes the revision an Application's
//! source (`targetRevision`) or an ApplicationSet's git generator (`revision`) or template reads.
//! The plan renders what the new revision holds, but the revision is the pull request's choice:
//! what it brings was never reviewed as a change of this branch.

use super::{Alert, Policy};
use crate::argocd::revision::normalized;
use crate::render::{ArgoUnit, Render};
use serde_json::Value;

/// Every revision a unit reads, by where it is written (`source`, `sources[1]`,
/// `generators git`, `template source`).
fn revisions(unit: &ArgoUnit) -> Vec<(String, String)> {
    let mut found = Vec::new();
    if let Some(app) = &unit.application {
        for (i, source) in app.sources.iter().enumerate() {
            let place =
                if app.sources.len() == 1 { "targetRevision".into() } else { format!("sources[{i}]") };
            found.push((place, normalized(source.target_revision.as_deref()).to_string()));
        }
    }
    if let Some(set) = &unit.application_set {
        let mut generators = Vec::new();
        git_revisions(&Value::Array(set.generators.clone()), &mut generators);
        found.extend(generators.into_iter().map(|r| ("git generator revision".to_string(), r)));
        let spec = &set.template["spec"];
        let sources = spec.get("source").into_iter().chain(spec["sources"].as_array().into_iter().flatten());
        for source in sources {
            let revision = normalized(source["targetRevision"].as_str()).to_string();
            found.push(("template targetRevision".to_string(), revision));
        }
    }
    found
}

/// The `revision` of every git generator, nested ones (matrix, merge) too.
fn git_revisions(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                if key == "git" {
                    out.push(normalized(inner["revision"].as_str()).to_string());
                }
                git_revisions(inner, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| git_revisions(i, out)),
        _ => {}
    }
}

pub(super) fn alerts(policy: &Policy, base: &Render, head: &Render) -> Vec<Alert> {
    let mut alerts = Vec::new();
    for (cluster, unit) in head.kustomizations() {
        let Some(now) = unit.argocd.as_deref() else { continue };
        let Some(before) =
            base.kustomization(&cluster.name, &unit.namespace, &unit.name).and_then(|k| k.argocd.as_deref())
        else {
            continue;
        };
        let (was, is) = (revisions(before), revisions(now));
        if was == is {
            continue;
        }
        let describe = |list: &[(String, String)]| {
            list.iter().map(|(place, revision)| format!("{place} {revision}")).collect::<Vec<_>>().join(", ")
        };
        let message = format!(
            "{} now reads {} (it read {}): Argo CD syncs that revision, not what this merge leaves on the branch \
             merged into; the plan shows what the revision holds, which this pull request chose",
            unit.label(),
            describe(&is),
            describe(&was)
        );
        let reference = Some(unit.reference().to_string());
        alerts.extend(policy.alert("source-ref-pinned", &cluster.name, reference, message, Vec::new()));
    }
    alerts
}
