//! The image check of a plan: the references the merge brings (`plan::images`), asked of their
//! registries (`charts::images`), as alerts. A missing one is `image-missing`, naming the object,
//! the container and the reference; a host refused or unreachable is one `image-unchecked`
//! warning, whatever number of images it serves. Checks off (`--no-image-check`,
//! `--no-chart-fetch`): nothing is asked, nothing said.

use crate::charts::images::{self, ImageRef, Outcome};
use crate::plan::images::{all_images, new_images, unchecked_for_secrets};
use crate::plan::{Alert, Policy};
use crate::render::Render;
use std::collections::{BTreeMap, BTreeSet};

/// How many references an `image-unchecked` alert names before it counts the rest.
const SHOWN: usize = 3;
/// `image-unchecked` alerts one plan has at most (one per registry, the last for the rest).
const MAX_REGISTRY_ALERTS: usize = 10;

/// The alerts of the images `head` brings over `base`, `settings` saying where they may be asked
/// (its `known_urls`: the base revision's and the cluster's sources).
pub fn alerts(
    settings: &crate::charts::Settings,
    policy: &Policy,
    base: &Render,
    head: &Render,
    cancel: &crate::cancel::CancelToken,
) -> Vec<Alert> {
    if settings.offline || settings.no_image_check {
        return Vec::new();
    }
    let mut alerts = Vec::new();
    let hidden = unchecked_for_secrets(base, head);
    if !hidden.is_empty() {
        let mut named = hidden.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
        if hidden.len() > SHOWN {
            named.push_str(&format!(" and {} more", hidden.len() - SHOWN));
        }
        alerts.extend(policy.general_alert(
            "image-unchecked",
            format!(
                "new images of objects holding values substituted from Secrets were not checked ({named}): \
                 whether such an image exists would tell the value"
            ),
        ));
    }
    let new = new_images(base, head);
    if new.is_empty() {
        return alerts;
    }
    let mut parsed = Vec::new();
    for image in &new {
        match ImageRef::parse(&image.image) {
            Ok(reference) => parsed.push((image, reference)),
            // A variable only the cluster fills: `unresolved-substitution` says so.
            Err(_) if image.image.contains("${") => {}
            Err(why) => alerts.extend(policy.alert(
                "image-missing",
                &image.cluster,
                Some(image.kustomization.clone()),
                format!(
                    "{} {}: image {:?} is not an image reference the container runtime can pull: {why}",
                    image.shown,
                    image.container,
                    shortened(&image.image)
                ),
                vec![image.object.clone()],
            )),
        }
    }
    // The registries base already pulls from are known, as its sources' hosts are for charts.
    let mut hosts: Vec<String> =
        all_images(base).iter().filter_map(|i| ImageRef::parse(i).ok()).map(|r| r.registry).collect();
    hosts.sort();
    hosts.dedup();
    let references: Vec<ImageRef> = parsed.iter().map(|(_, r)| r.clone()).collect();
    let outcomes = match images::access(settings, &hosts) {
        Ok(access) => images::check_until(access, &settings.image_cache, &references, cancel),
        Err(why) => references.iter().map(|r| (r.clone(), Outcome::Unchecked { why: why.clone() })).collect(),
    };
    // Unchecked: once per registry.
    let mut unchecked: BTreeMap<&str, (String, BTreeSet<&str>)> = BTreeMap::new();
    for (image, reference) in &parsed {
        match outcomes.get(reference) {
            Some(Outcome::Missing) => alerts.extend(policy.alert(
                "image-missing",
                &image.cluster,
                Some(image.kustomization.clone()),
                format!(
                    "{} {}: image {} does not exist: {} has no manifest for {}",
                    image.shown,
                    image.container,
                    image.image,
                    reference.registry,
                    shown_reference(reference)
                ),
                vec![image.object.clone()],
            )),
            Some(Outcome::Unchecked { why }) => {
                let entry = unchecked
                    .entry(reference.registry.as_str())
                    .or_insert_with(|| (why.clone(), BTreeSet::new()));
                entry.1.insert(image.image.as_str());
            }
            Some(Outcome::Present) | None => {}
        }
    }
    // One alert per registry, up to `MAX_REGISTRY_ALERTS`: a pull request naming images on ten
    // thousand hosts it may not ask gets one more alert for the rest, not ten thousand comments.
    let mut rest = Vec::new();
    if unchecked.len() > MAX_REGISTRY_ALERTS {
        let keep: Vec<&str> = unchecked.keys().take(MAX_REGISTRY_ALERTS - 1).copied().collect();
        unchecked.retain(|registry, _| {
            let kept = keep.contains(registry);
            if !kept {
                rest.push(registry.to_string());
            }
            kept
        });
    }
    if !rest.is_empty() {
        let mut named = rest.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
        if rest.len() > SHOWN {
            named.push_str(&format!(" and {} more", rest.len() - SHOWN));
        }
        alerts.extend(policy.general_alert(
            "image-unchecked",
            format!(
                "new images on {} more registries were not checked ({named}): allow them with --chart-hosts, \
                 or turn the check off with --no-image-check",
                rest.len()
            ),
        ));
    }
    for (registry, (why, images)) in unchecked {
        let mut named = images.iter().take(SHOWN).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
        if images.len() > SHOWN {
            named.push_str(&format!(" and {} more", images.len() - SHOWN));
        }
        alerts.extend(policy.general_alert(
            "image-unchecked",
            format!(
                "new images on {registry} were not checked ({named}): {why}; allow the registry with \
                 --chart-hosts {registry}, reach it through --registry-mirror {registry}=MIRROR, or turn the \
                 check off with --no-image-check"
            ),
        ));
    }
    alerts
}

/// How much of a text that is no reference an alert quotes: the pull request writes it, and
/// may write megabytes (the parse error quotes parts of it too, so those are cut at the source).
const QUOTED: usize = 200;

/// `text`, cut to `QUOTED` characters.
fn shortened(text: &str) -> String {
    match text.char_indices().nth(QUOTED) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// `repository:tag` or `repository@digest`, as the registry is asked.
fn shown_reference(reference: &ImageRef) -> String {
    match &reference.digest {
        Some(digest) => format!("{}@{digest}", reference.repository),
        None => format!("{}:{}", reference.repository, reference.reference()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack: an `image:` of megabytes that is no reference: the alert quotes its start.
    /// Near miss: a short one is quoted whole.
    #[test]
    fn a_huge_text_that_is_no_reference_is_quoted_short() {
        let huge = format!("ghcr.io/{}", "é".repeat(1 << 20));
        let quoted = shortened(&huge);
        assert_eq!(quoted.chars().count(), QUOTED + 1);
        assert!(quoted.ends_with('…'));
        assert_eq!(shortened("Nginx:1"), "Nginx:1");
    }

    fn render(images: &[String]) -> Render {
        let names: Vec<String> = (0..images.len()).map(|i| format!("d{i}")).collect();
        crate::plan::images::deployments(
            names.iter().zip(images).map(|(name, image)| (name.as_str(), image.as_str(), false)).collect(),
        )
    }

    /// Attack: a pull request names images on thousands of hosts it may not ask (one alert each
    /// would be thousands of comments), and thousands of images on one (named one by one, each
    /// compared with every other). At most `MAX_REGISTRY_ALERTS` alerts, the last counting the
    /// rest. Near miss: a few hosts get one alert each.
    #[test]
    fn thousands_of_refused_registries_make_a_bounded_number_of_alerts() {
        let settings = crate::charts::Settings { known_urls: Some(Vec::new()), ..Default::default() };
        let policy = Policy::default();
        let base = render(&[]);
        let mut images: Vec<String> = (0..3000).map(|i| format!("r{i}.evil.example/a/b:1")).collect();
        images.extend((0..20_000).map(|i| format!("one.evil.example/a/b:{i}")));
        let alerts = alerts(&settings, &policy, &base, &render(&images), &Default::default());
        assert_eq!(alerts.len(), MAX_REGISTRY_ALERTS, "{:#?}", &alerts[..3]);
        assert!(alerts.iter().all(|a| a.code == "image-unchecked"));
        assert!(alerts
            .iter()
            .any(|a| a.message.contains(&format!("{} more registries", 3001 - (MAX_REGISTRY_ALERTS - 1)))));
        let few: Vec<String> = (0..3).map(|i| format!("r{i}.evil.example/a/b:1")).collect();
        assert_eq!(alerts_of(&settings, &policy, &base, &render(&few)), 3);
    }

    fn alerts_of(settings: &crate::charts::Settings, policy: &Policy, base: &Render, head: &Render) -> usize {
        alerts(settings, policy, base, head, &Default::default()).len()
    }
}
