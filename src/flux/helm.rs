//! HelmRelease (helm.toolkit.fluxcd.io) knowledge: which Helm release a HelmRelease manages, where
//! Helm keeps its storage, and whether deleting the HelmRelease uninstalls it (helm-controller's
//! rules, from its API types and deletion reconciler).

use serde_json::Value;
use sha2::{Digest, Sha256};

/// API group of Flux HelmReleases.
pub const HELM_GROUP: &str = "helm.toolkit.fluxcd.io";
pub const HELM_RELEASE_KIND: &str = "HelmRelease";

/// Helm refuses release names longer than this; helm-controller shortens longer ones.
const MAX_RELEASE_NAME: usize = 53;
/// Hex characters of the SHA-256 kept when shortening.
const SHORT_HASH: usize = 12;

/// One Helm release as helm-controller addresses it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReleaseRef {
    pub name: String,
    /// The release namespace: objects without a namespace land here.
    pub namespace: String,
    /// Where Helm keeps the release's storage Secrets.
    pub storage_namespace: String,
}

impl std::fmt::Display for ReleaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What deleting a HelmRelease object does to its release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnDeletion {
    /// The finalizer uninstalls the release.
    Uninstalls(ReleaseRef),
    /// Suspended: the finalizer skips the uninstall; the release stays installed.
    Suspended(ReleaseRef),
    /// Installed through `spec.kubeConfig` in another cluster, which fluxplan does not read.
    RemoteCluster(ReleaseRef),
    /// Its status names no storage namespace: nothing was ever installed, nothing to uninstall.
    NeverInstalled,
}

/// The release name helm-controller gives a HelmRelease: `spec.releaseName`, else
/// `[targetNamespace-]name`, shortened to 53 characters as `<first 40>-<12 hex of sha256>`.
pub fn release_name(name: &str, release_name: Option<&str>, target_namespace: Option<&str>) -> String {
    let full = match (release_name.filter(|r| !r.is_empty()), target_namespace.filter(|t| !t.is_empty())) {
        (Some(release), _) => release.to_string(),
        (None, Some(target)) => format!("{target}-{name}"),
        (None, None) => name.to_string(),
    };
    shorten(&full)
}

fn shorten(name: &str) -> String {
    if name.len() <= MAX_RELEASE_NAME {
        return name.to_string();
    }
    let hash = hex::encode(Sha256::digest(name.as_bytes()));
    // Byte-wise like the controller; a name cut inside a character is invalid for Helm anyway.
    let head = String::from_utf8_lossy(&name.as_bytes()[..MAX_RELEASE_NAME - SHORT_HASH - 1]);
    format!("{head}-{}", &hash[..SHORT_HASH])
}

fn text<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The release a HelmRelease manifest (live, or as rendered) manages. A live object's status is
/// the truth (the latest history entry and the storage namespace in use); a manifest without
/// status gives what its spec would install.
pub fn release_of(helm_release: &Value) -> Option<ReleaseRef> {
    let name = text(helm_release, "/metadata/name")?;
    let namespace = text(helm_release, "/metadata/namespace").unwrap_or("default");
    let spec = &helm_release["spec"];
    let latest = helm_release["status"]["history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| h["name"].as_str().is_some_and(|n| !n.is_empty()))
        .max_by_key(|h| h["version"].as_i64().unwrap_or(0));
    let (release, release_namespace) = match latest {
        Some(h) => (
            h["name"].as_str().unwrap_or(name).to_string(),
            text(h, "/namespace").unwrap_or(namespace).to_string(),
        ),
        None => (
            release_name(name, text(spec, "/releaseName"), text(spec, "/targetNamespace")),
            text(spec, "/targetNamespace").unwrap_or(namespace).to_string(),
        ),
    };
    let storage = text(helm_release, "/status/storageNamespace")
        .or_else(|| text(spec, "/storageNamespace"))
        .unwrap_or(namespace);
    Some(ReleaseRef { name: release, namespace: release_namespace, storage_namespace: storage.to_string() })
}

/// What the finalizer does when this HelmRelease is deleted. `live` says whether the manifest is
/// the live object (whose status tells whether anything was installed).
pub fn on_deletion(helm_release: &Value, live: bool) -> Option<OnDeletion> {
    let release = release_of(helm_release)?;
    let spec = &helm_release["spec"];
    if live && text(helm_release, "/status/storageNamespace").is_none() {
        return Some(OnDeletion::NeverInstalled);
    }
    if spec["suspend"].as_bool() == Some(true) {
        return Some(OnDeletion::Suspended(release));
    }
    if spec.get("kubeConfig").is_some_and(|k| !k.is_null()) {
        return Some(OnDeletion::RemoteCluster(release));
    }
    Some(OnDeletion::Uninstalls(release))
}

/// True when a manifest is a Flux HelmRelease.
pub fn is_helm_release(object: &Value) -> bool {
    let (group, _) = super::split_api_version(object["apiVersion"].as_str().unwrap_or(""));
    group == HELM_GROUP && object["kind"] == HELM_RELEASE_KIND
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn release_name_follows_spec_then_target_namespace() {
        assert_eq!(release_name("podinfo", None, None), "podinfo");
        assert_eq!(release_name("podinfo", None, Some("apps")), "apps-podinfo");
        assert_eq!(release_name("podinfo", Some("web"), Some("apps")), "web");
    }

    #[test]
    fn long_release_names_are_shortened_with_a_hash() {
        let target = "a-very-long-target-namespace-name";
        let name = release_name("and-a-rather-long-release-name", None, Some(target));
        let full = format!("{target}-and-a-rather-long-release-name");
        assert_eq!(name.len(), 53);
        assert_eq!(&name[..41], &format!("{}-", &full[..40]));
        assert_eq!(&name[41..], &hex::encode(Sha256::digest(full.as_bytes()))[..12]);
        // Multi-byte characters at the cut do not panic.
        assert_eq!(release_name(&"é".repeat(40), None, None).len(), 53);
    }

    #[test]
    fn live_status_wins_over_spec() {
        let live = json!({"metadata": {"name": "podinfo", "namespace": "flux-system"},
            "spec": {"targetNamespace": "apps", "storageNamespace": "elsewhere"},
            "status": {"storageNamespace": "flux-system", "history": [
                {"name": "old", "namespace": "apps", "version": 1},
                {"name": "apps-podinfo", "namespace": "apps", "version": 4}]}});
        let release = release_of(&live).unwrap();
        assert_eq!(release.name, "apps-podinfo");
        assert_eq!(release.namespace, "apps");
        assert_eq!(release.storage_namespace, "flux-system");
        let rendered = json!({"metadata": {"name": "podinfo", "namespace": "flux-system"},
            "spec": {"storageNamespace": "helm"}});
        let release = release_of(&rendered).unwrap();
        assert_eq!((release.namespace.as_str(), release.storage_namespace.as_str()), ("flux-system", "helm"));
    }

    #[test]
    fn suspended_never_installed_and_remote_releases_are_not_uninstalled_here() {
        let base = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {}});
        assert!(matches!(on_deletion(&base, false), Some(OnDeletion::Uninstalls(_))));
        assert_eq!(on_deletion(&base, true), Some(OnDeletion::NeverInstalled));
        let mut suspended = base.clone();
        suspended["spec"]["suspend"] = json!(true);
        assert!(matches!(on_deletion(&suspended, false), Some(OnDeletion::Suspended(_))));
        let mut remote = base.clone();
        remote["spec"]["kubeConfig"] = json!({"secretRef": {"name": "k"}});
        assert!(matches!(on_deletion(&remote, false), Some(OnDeletion::RemoteCluster(_))));
        assert_eq!(on_deletion(&json!({"spec": {}}), false), None);
    }
}
