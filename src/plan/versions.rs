//! The versions a merge moves: container images of pod templates and HelmRelease charts, each
//! change listed once (`name: old → new`) with where it happens, each a `major-bump` alert (info
//! by default, a step up across major versions).

use super::{Action, Alert, KustomizationPlan, Policy, Severity};
use crate::flux::ObjectId;
use crate::render::Render;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One version change, however many objects or releases make it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct VersionChange {
    /// `image` or `chart`.
    pub kind: &'static str,
    /// The image's repository (`ghcr.io/org/app`) or the chart's name.
    pub name: String,
    /// Tag or version, with the digest when pinned (`1.2.3@sha256:…`).
    pub from: String,
    pub to: String,
    /// The major version differs (both read as versions).
    pub major: bool,
    /// Where: `Cluster: Kind namespace/name` of each object or release.
    pub places: Vec<String>,
}

/// Every version the plan's updates change, sorted by kind and name.
pub fn changes(plans: &[KustomizationPlan], base: &Render, head: &Render) -> Vec<VersionChange> {
    let mut found: BTreeMap<(&'static str, String, String, String), Vec<String>> = BTreeMap::new();
    // The objects updated, by cluster and id, indexed once: an update is not a search through
    // every object, and objects nothing updates are not indexed.
    let mut updated: BTreeMap<&str, BTreeSet<ObjectId>> = BTreeMap::new();
    for plan in plans {
        for change in plan.changes.iter().filter(|c| c.action == Action::Update) {
            updated.entry(plan.cluster.as_str()).or_default().extend(ObjectId::parse(&change.id));
        }
    }
    let (before_index, after_index) = (index(base, &updated), index(head, &updated));
    for plan in plans {
        for change in plan.changes.iter().filter(|c| c.action == Action::Update) {
            let key = (plan.cluster.as_str(), change.id.clone());
            let (Some(before), Some(after)) = (before_index.get(&key), after_index.get(&key)) else {
                continue;
            };
            let (before, after) = (images(before), images(after));
            for (container, image) in &after {
                let Some(old) = before.get(container).filter(|old| *old != image) else { continue };
                let (old_name, old_ref) = split_image(old);
                let (new_name, new_ref) = split_image(image);
                if old_name == new_name {
                    let place = format!("{}: {}", plan.cluster, change.display_name());
                    found.entry(("image", new_name, old_ref, new_ref)).or_default().push(place);
                }
            }
        }
        let place = format!("{}: HelmRelease {}/{}", plan.cluster, plan.namespace, plan.name);
        if let (Some(before), Some(after)) = (chart(base, plan), chart(head, plan)) {
            if before.name == after.name && before.version != after.version {
                found
                    .entry(("chart", after.name.clone(), before.version.clone(), after.version.clone()))
                    .or_default()
                    .push(place);
            }
        } else if let Some((before, after)) = super::helm_release::asked_chart_change(
            base.unit(&plan.cluster, &plan.unit_ref()),
            head.unit(&plan.cluster, &plan.unit_ref()),
        ) {
            // A side's chart was not rendered: the versions its spec and sources ask for.
            if before.name == after.name && before.version != after.version {
                found
                    .entry(("chart", after.name.clone(), before.version.clone(), after.version.clone()))
                    .or_default()
                    .push(format!("{place} (chart not rendered)"));
            }
        }
    }
    found
        .into_iter()
        .map(|((kind, name, from, to), mut places)| {
            places.dedup();
            let major = match (major_of(&from), major_of(&to)) {
                (Some(a), Some(b)) => a != b,
                _ => false,
            };
            VersionChange { kind, name, from, to, major, places }
        })
        .collect()
}

/// `major-bump` for every change: the policy's severity (info by default), one step up across
/// major versions. Reports show them in the version table, not among the alerts.
pub fn alerts(policy: &Policy, changes: &[VersionChange]) -> Vec<Alert> {
    changes
        .iter()
        .filter_map(|c| {
            let jump = if c.major {
                ", across major versions (read its release notes for breaking changes)"
            } else {
                ""
            };
            let message =
                format!("{} {}: {} → {}{jump}, in {}", c.kind, c.name, c.from, c.to, c.places.join(", "));
            let mut alert = policy.general_alert("major-bump", message)?;
            if c.major {
                alert.severity = match alert.severity {
                    Severity::Info => Severity::Warning,
                    _ => Severity::Danger,
                };
            }
            alert.shown_elsewhere = true;
            Some(alert)
        })
        .collect()
}

/// The objects of `render` among `wanted`, by cluster and id.
fn index<'r>(
    render: &'r Render,
    wanted: &BTreeMap<&str, BTreeSet<ObjectId>>,
) -> HashMap<(&'r str, String), &'r Value> {
    render
        .clusters
        .iter()
        .filter_map(|c| Some((c, wanted.get(c.name.as_str())?)))
        .flat_map(|(c, ids)| {
            render.objects_of(&c.name).filter_map(move |o| {
                let id = o.id.as_ref().filter(|id| ids.contains(*id))?;
                Some(((c.name.as_str(), id.to_string()), &*o.object))
            })
        })
        .collect()
}

fn chart<'r>(
    render: &'r Render,
    plan: &KustomizationPlan,
) -> Option<&'r crate::render::helm::units::ChartVersion> {
    render.unit(&plan.cluster, &plan.unit_ref())?.helm.as_deref()?.chart.as_ref()
}

/// The image of each container of an object's pod template, by container name.
fn images(object: &Value) -> BTreeMap<String, String> {
    let spec = match object["kind"].as_str().unwrap_or("") {
        "Pod" => &object["spec"],
        "CronJob" => &object["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        _ => &object["spec"]["template"]["spec"],
    };
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| spec[list].as_array().into_iter().flatten())
        .filter_map(|c| Some((c["name"].as_str()?.to_string(), c["image"].as_str()?.to_string())))
        .collect()
}

/// `ghcr.io/org/app:1.2@sha256:…` → (`ghcr.io/org/app`, `1.2@sha256:…`); no tag reads `latest`.
fn split_image(image: &str) -> (String, String) {
    let (named, digest) = match image.split_once('@') {
        Some((named, digest)) => (named, Some(digest)),
        None => (image, None),
    };
    // A colon after the last slash is the tag's (one before it is a registry's port).
    let last_slash = named.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match named[last_slash..].rfind(':') {
        Some(colon) => (&named[..last_slash + colon], Some(&named[last_slash + colon + 1..])),
        None => (named, None),
    };
    let reference = match (tag, digest) {
        (Some(tag), Some(digest)) => format!("{tag}@{digest}"),
        (None, Some(digest)) => format!("@{digest}"),
        (Some(tag), None) => tag.to_string(),
        (None, None) => "latest".to_string(),
    };
    (name.to_string(), reference)
}

/// The major version of a tag or chart version (`v2.1.0`, `2.1`, `2`), when it reads as one.
fn major_of(reference: &str) -> Option<u64> {
    let tag = reference.split('@').next()?.trim_start_matches('v');
    let major = tag.split(['.', '-', '+']).next()?;
    (!major.is_empty() && major.bytes().all(|b| b.is_ascii_digit()) && tag.contains('.'))
        .then(|| major.parse().ok())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_split_into_repository_and_reference() {
        assert_eq!(split_image("nginx:1.25"), ("nginx".into(), "1.25".into()));
        assert_eq!(
            split_image("registry:5000/team/app:v2.0.1"),
            ("registry:5000/team/app".into(), "v2.0.1".into())
        );
        assert_eq!(split_image("registry:5000/team/app"), ("registry:5000/team/app".into(), "latest".into()));
        assert_eq!(
            split_image("ghcr.io/org/app:1.2@sha256:abc"),
            ("ghcr.io/org/app".into(), "1.2@sha256:abc".into())
        );
        assert_eq!(
            split_image("ghcr.io/org/app@sha256:abc"),
            ("ghcr.io/org/app".into(), "@sha256:abc".into())
        );
    }

    #[test]
    fn major_versions_read_from_tags_and_chart_versions() {
        assert_eq!(major_of("v2.1.0"), Some(2));
        assert_eq!(major_of("6.5.0"), Some(6));
        assert_eq!(major_of("1.25@sha256:abc"), Some(1));
        assert_eq!(major_of("latest"), None);
        assert_eq!(major_of("2024"), None, "a bare number may be a date: not read as a version");
        assert_eq!(major_of("@sha256:abc"), None);
    }
}
