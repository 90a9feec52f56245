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

/// The branch a plan's base revision names, when it names one (`main`, `refs/heads/main`,
/// `origin/main`); `None` for a commit id.
fn branch_of(base_rev: &str) -> Option<&str> {
    let name = base_rev.trim_start_matches("refs/heads/").trim_start_matches("refs/remotes/");
    let name = name.strip_prefix("origin/").unwrap_or(name);
    let commit_like = name.len() >= 7 && name.chars().all(|c| c.is_ascii_hexdigit());
    (!commit_like && !name.is_empty() && name != "HEAD" && !name.contains(['~', '^', '@'])).then_some(name)
}

/// `pinned-revision` for units the pull request adds that read a revision other than the branch
/// merged into: the plan renders what that revision holds today, but whoever can move it (a
/// branch anyone may push to, a tag) changes what Argo CD syncs after the merge, unreviewed.
pub(super) fn new_pins(policy: &Policy, base: &Render, head: &Render, base_rev: &str) -> Vec<Alert> {
    let Some(branch) = branch_of(base_rev) else { return Vec::new() };
    let mut alerts = Vec::new();
    for (cluster, unit) in head.kustomizations() {
        let Some(now) = unit.argocd.as_deref() else { continue };
        if base.kustomization(&cluster.name, &unit.namespace, &unit.name).is_some() {
            continue; // a change of revision is `source-ref-pinned`
        }
        let pinned: Vec<String> = revisions(now)
            .into_iter()
            .filter(|(_, revision)| revision != "HEAD" && revision != branch)
            .map(|(place, revision)| format!("{place} {revision}"))
            .collect();
        if pinned.is_empty() {
            continue;
        }
        let message = format!(
            "{} is new and reads {}, not {branch}: Argo CD syncs whatever that revision holds when it syncs; the \
             plan shows what it holds today",
            unit.label(),
            pinned.join(", ")
        );
        let reference = Some(unit.reference().to_string());
        alerts.extend(policy.alert("pinned-revision", &cluster.name, reference, message, Vec::new()));
    }
    alerts
}

#[cfg(test)]
mod tests {
    use super::branch_of;

    #[test]
    fn the_branch_a_base_revision_names() {
        assert_eq!(branch_of("main"), Some("main"));
        assert_eq!(branch_of("refs/heads/release/1.x"), Some("release/1.x"));
        assert_eq!(branch_of("origin/main"), Some("main"));
        for not_a_branch in
            ["0123abc", "2f1e0c9d8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e", "HEAD", "HEAD~1", "main@{1}", ""]
        {
            assert_eq!(branch_of(not_a_branch), None, "{not_a_branch}");
        }
    }
}
