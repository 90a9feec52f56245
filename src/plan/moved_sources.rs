//! Sources that move to another repository (`source-moved`). A Flux source whose URL now names a
//! host or repository the base revision never used, and a Kustomization or Argo CD Application
//! re-pointed to a source of another repository, make the controllers apply content this plan
//! never saw: source-controller fetches whatever the new URL serves, and kustomize-controller (or
//! Argo CD) applies it and prunes what it lacks. Offline that content is unknown, so the move
//! itself is the danger, not an `external-source` note. A new source is not a move; another ref
//! of the same repository is not one either (the ref alerts say what they can).

use super::{Alert, Policy};
use crate::flux::{ObjectId, SourceRef, SOURCE_GROUP};
use crate::render::{Render, RenderedKustomization, UnitKind};
use serde_json::Value;
use std::collections::BTreeSet;

pub const CODE: &str = "source-moved";

/// The Flux source kinds whose content comes from a URL.
const KINDS: &[&str] = &["GitRepository", "OCIRepository", "HelmRepository", "Bucket"];

/// The repository a URL names, for comparing: host in lower case with its port unless the
/// scheme's default, and path without a trailing `/` or `.git`; scheme, user and query left out
/// (`https://github.com/org/app.git` and `ssh://git@github.com/org/app` are one repository).
/// `None` for an empty URL.
pub fn repository(url: &str) -> Option<String> {
    let url = url.trim();
    if url.is_empty() {
        return None;
    }
    let (host, port, path) = match url::Url::parse(url).ok().filter(|u| u.has_host()) {
        Some(parsed) => {
            let default = match parsed.scheme() {
                "ssh" => Some(22),
                "http" => Some(80),
                "https" | "oci" => Some(443),
                _ => None,
            };
            let port = parsed.port().filter(|p| Some(*p) != default);
            (parsed.host_str().unwrap_or("").to_string(), port, parsed.path().to_string())
        }
        // scp-like syntax: user@host:path
        None => {
            let rest = url.split_once('@').map_or(url, |(_, rest)| rest);
            let (host, path) = rest.split_once(':').unwrap_or((rest, ""));
            (host.to_string(), None, path.to_string())
        }
    };
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).trim_matches('/');
    let host = host.to_lowercase();
    Some(match port {
        Some(port) => format!("{host}:{port}/{path}"),
        None => format!("{host}/{path}"),
    })
}

/// The repository a Flux source object fetches from: its URL, or a Bucket's endpoint and bucket.
fn source_repository(object: &Value) -> Option<String> {
    let spec = &object["spec"];
    if object["kind"] == "Bucket" {
        let endpoint = spec["endpoint"].as_str().unwrap_or("");
        let bucket = spec["bucketName"].as_str().unwrap_or("");
        let endpoint =
            if endpoint.contains("://") { endpoint.to_string() } else { format!("https://{endpoint}") };
        return repository(&format!("{}/{bucket}", endpoint.trim_end_matches('/')));
    }
    repository(spec["url"].as_str().unwrap_or(""))
}

/// How messages show a source's location (credentials never shown).
fn shown(object: &Value) -> String {
    let spec = &object["spec"];
    match object["kind"].as_str() {
        Some("Bucket") => format!(
            "bucket {} at {}",
            spec["bucketName"].as_str().unwrap_or("?"),
            crate::git::redact_url(spec["endpoint"].as_str().unwrap_or("?"))
        ),
        _ => crate::git::redact_url(spec["url"].as_str().unwrap_or("?")),
    }
}

fn is_source(id: &ObjectId) -> bool {
    id.group == SOURCE_GROUP && KINDS.contains(&id.kind.as_str())
}

/// The unit as alerts name it (`ns/name`, `HelmRelease ns/name`).
fn reference(k: &RenderedKustomization) -> String {
    match k.kind {
        UnitKind::HelmRelease | UnitKind::ResourceSet => k.label(),
        _ => format!("{}/{}", k.namespace, k.name),
    }
}

/// A `source-moved` alert for every source of head whose URL names a repository no source of
/// the base revision names, when base had that source with another URL. This repository's own
/// GitRepository pointed elsewhere is `sync-changed` (see `policy::source_ref_alerts`).
pub(super) fn alerts(policy: &Policy, base: &Render, head: &Render) -> Vec<Alert> {
    let used: BTreeSet<String> = base
        .clusters
        .iter()
        .flat_map(|c| base.objects_of(&c.name))
        .filter(|o| o.id.as_ref().is_some_and(is_source))
        .filter_map(|o| source_repository(&o.object))
        .collect();
    let mut seen = BTreeSet::new();
    let mut alerts = Vec::new();
    for (cluster, k) in head.kustomizations() {
        for object in &k.objects {
            let Some(id) = object.id.as_ref().filter(|id| is_source(id)) else { continue };
            let key = format!("{}/{}", id.namespace, id.name);
            if (id.kind == "GitRepository" && head.this_repo_sources.contains(&key))
                || !seen.insert((cluster.name.clone(), id.clone()))
            {
                continue;
            }
            // A source base does not have is new, not moved.
            let Some(earlier) = base.object(&cluster.name, &id.to_string()) else { continue };
            let (Some(was), Some(now)) =
                (source_repository(&earlier.object), source_repository(&object.object))
            else {
                continue;
            };
            if was == now || used.contains(&now) {
                continue;
            }
            let message = format!(
                "{} {key} now fetches from {} (it fetched from {}), a repository the base revision never uses: \
                 after the merge source-controller fetches whatever that serves, and whatever applies this source \
                 applies it and prunes what it lacks; none of it is in this plan",
                id.kind,
                shown(&object.object),
                shown(&earlier.object),
            );
            alerts.extend(policy.alert(
                CODE,
                &cluster.name,
                Some(reference(k)),
                message,
                vec![id.to_string()],
            ));
        }
    }
    alerts
}

/// Why `k` (not rendered at head: its source is not this repository) counts as re-pointed to
/// another repository, when it does: a Kustomization whose `sourceRef` now names a source of
/// another repository than its base source's, an Application whose `repoURL`s name a repository
/// its base did not.
pub(super) fn repointed(
    base: &Render,
    head: &Render,
    cluster: &str,
    k: &RenderedKustomization,
) -> Option<String> {
    let before = base.unit(cluster, &k.unit_ref())?;
    match k.kind {
        UnitKind::Kustomization if k.source.kind != "ExternalArtifact" && before.source != k.source => {
            let object = |render: &Render, source: &SourceRef| {
                let id = ObjectId::new(&source.namespace, &source.name, SOURCE_GROUP, &source.kind);
                render.object(cluster, &id.to_string()).map(|o| Value::clone(&o.object))
            };
            let (was, now) = (object(base, &before.source), object(head, &k.source));
            let repository = |o: &Option<Value>| o.as_ref().and_then(source_repository);
            if repository(&was) == repository(&now) {
                return None;
            }
            let at = |o: &Option<Value>| o.as_ref().map(shown).unwrap_or_else(|| "not in this render".into());
            let prunes =
                if k.prunes() { " and prunes every object of its inventory that content lacks" } else { "" };
            Some(format!(
                "re-pointed from {} ({}) to {} ({}), a source of another repository: after the merge \
                 kustomize-controller applies what that source holds{prunes}, none of which is in this plan",
                before.source,
                at(&was),
                k.source,
                at(&now)
            ))
        }
        UnitKind::Application => {
            let repositories = |unit: &RenderedKustomization| -> BTreeSet<String> {
                let application = unit.argocd.as_ref().and_then(|a| a.application.as_ref());
                application
                    .into_iter()
                    .flat_map(|a| &a.sources)
                    .filter_map(|s| repository(&s.repo_url))
                    .collect()
            };
            let (was, now) = (repositories(before), repositories(k));
            let new: Vec<&String> = now.difference(&was).collect();
            if new.is_empty() || k.argocd.as_ref().is_some_and(|a| a.unknown_revision) {
                return None;
            }
            let prunes = if k.prunes() { " and prunes what it lacks" } else { "" };
            Some(format!(
                "re-pointed to another repository ({}; it synced {}): after the merge Argo CD syncs what that \
                 holds{prunes}, none of which is in this plan",
                new.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", "),
                was.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ")
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_repository_however_its_url_is_written() {
        let app = repository("https://github.com/org/app").unwrap();
        for same in [
            "https://github.com/org/app.git",
            "https://github.com/org/app/",
            "ssh://git@github.com/org/app.git",
            "git@github.com:org/app.git",
            "https://GitHub.com/org/app",
            "https://user:token@github.com:443/org/app",
        ] {
            assert_eq!(repository(same).as_deref(), Some(app.as_str()), "{same}");
        }
        for other in [
            "https://github.com/org/other",
            "https://gitlab.com/org/app",
            "https://github.com:8443/org/app",
            "https://github.com/org/app/sub",
        ] {
            assert_ne!(repository(other).as_deref(), Some(app.as_str()), "{other}");
        }
        assert_ne!(
            repository("oci://127.0.0.1:5000/charts/db"),
            repository("oci://127.0.0.1:5001/charts/db")
        );
        assert_eq!(repository("oci://ghcr.io/org/charts/db"), repository("oci://ghcr.io/org/charts/db/"));
        assert_eq!(repository(""), None);
    }

    #[test]
    fn a_bucket_is_its_endpoint_and_bucket() {
        let bucket = |endpoint: &str, name: &str| serde_json::json!({"kind": "Bucket", "spec": {"endpoint": endpoint, "bucketName": name}});
        assert_eq!(
            source_repository(&bucket("minio.example.com", "fleet")),
            source_repository(&bucket("https://minio.example.com/", "fleet"))
        );
        assert_ne!(
            source_repository(&bucket("minio.example.com", "fleet")),
            source_repository(&bucket("s3.attacker.example", "fleet"))
        );
    }
}
