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

/// Where a HelmRelease's chart comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ChartSource {
    /// `spec.chart.spec`: a chart source-controller builds from a source (a path in a
    /// GitRepository or Bucket, a chart name in a HelmRepository).
    Template {
        chart: String,
        version: Option<String>,
        source: super::SourceRef,
        /// Values files replacing the chart's `values.yaml` (paths in the source), merged in order.
        values_files: Vec<String>,
        ignore_missing_values_files: bool,
    },
    /// `spec.chartRef`: an OCIRepository, HelmChart or ExternalArtifact holding the chart.
    Reference(super::SourceRef),
}

/// One `spec.valuesFrom` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ValuesReference {
    pub kind: String,
    pub name: String,
    /// The key holding the values (`values.yaml` by default).
    pub values_key: String,
    /// Where the value goes (`a.b.c`); the whole document is merged when absent.
    pub target_path: Option<String>,
    pub optional: bool,
}

/// How the controller treats the chart's `crds/` directory on install or upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrdPolicy {
    Skip,
    Create,
    CreateReplace,
}

/// What helm-controller reads of a HelmRelease to render it.
#[derive(Debug, Clone, PartialEq)]
pub struct HelmReleaseSpec {
    pub release: ReleaseRef,
    pub chart: Option<ChartSource>,
    pub values_from: Vec<ValuesReference>,
    /// `spec.values`, merged over `valuesFrom`.
    pub values: Value,
    pub install_crds: CrdPolicy,
    pub upgrade_crds: CrdPolicy,
    /// `spec.install.disableSchemaValidation` / `spec.upgrade.disableSchemaValidation`: Helm's
    /// install or upgrade does not validate the values against the chart's schema.
    pub install_skips_schema: bool,
    pub upgrade_skips_schema: bool,
    /// `spec.postRenderers`, as written.
    pub post_renderers: Vec<Value>,
    /// `spec.commonMetadata` labels and annotations.
    pub common_labels: serde_json::Map<String, Value>,
    pub common_annotations: serde_json::Map<String, Value>,
}

impl HelmReleaseSpec {
    /// Reads a HelmRelease manifest; `None` when it is not one with a name.
    pub fn parse(helm_release: &Value) -> Option<Self> {
        if !is_helm_release(helm_release) {
            return None;
        }
        let release = release_of(helm_release)?;
        let own_namespace = text(helm_release, "/metadata/namespace").unwrap_or("default");
        let spec = &helm_release["spec"];
        let source_ref = |value: &Value| super::SourceRef {
            kind: value["kind"].as_str().unwrap_or("").to_string(),
            name: value["name"].as_str().unwrap_or("").to_string(),
            namespace: text(value, "/namespace").unwrap_or(own_namespace).to_string(),
        };
        let strings = |value: &Value| -> Vec<String> {
            value.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
        };
        let chart = if spec["chartRef"].is_object() {
            Some(ChartSource::Reference(source_ref(&spec["chartRef"])))
        } else {
            let template = &spec["chart"]["spec"];
            template.is_object().then(|| ChartSource::Template {
                chart: template["chart"].as_str().unwrap_or("").to_string(),
                version: text(template, "/version").map(str::to_string),
                source: source_ref(&template["sourceRef"]),
                values_files: strings(&template["valuesFiles"]),
                ignore_missing_values_files: template["ignoreMissingValuesFiles"].as_bool() == Some(true),
            })
        };
        let values_from = spec["valuesFrom"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|entry| ValuesReference {
                kind: entry["kind"].as_str().unwrap_or("").to_string(),
                name: entry["name"].as_str().unwrap_or("").to_string(),
                values_key: text(entry, "/valuesKey").unwrap_or("values.yaml").to_string(),
                target_path: text(entry, "/targetPath").map(str::to_string),
                optional: entry["optional"].as_bool() == Some(true),
            })
            .collect();
        let crds = |pointer: &str, default: CrdPolicy| match text(spec, pointer) {
            Some("Skip") => CrdPolicy::Skip,
            Some("Create") => CrdPolicy::Create,
            Some("CreateReplace") => CrdPolicy::CreateReplace,
            _ => default,
        };
        let map =
            |pointer: &str| spec.pointer(pointer).and_then(Value::as_object).cloned().unwrap_or_default();
        Some(HelmReleaseSpec {
            release,
            chart,
            values_from,
            values: if spec["values"].is_object() {
                spec["values"].clone()
            } else {
                Value::Object(Default::default())
            },
            install_crds: crds("/install/crds", CrdPolicy::Create),
            upgrade_crds: crds("/upgrade/crds", CrdPolicy::Skip),
            install_skips_schema: spec.pointer("/install/disableSchemaValidation")
                == Some(&Value::Bool(true)),
            upgrade_skips_schema: spec.pointer("/upgrade/disableSchemaValidation")
                == Some(&Value::Bool(true)),
            post_renderers: spec["postRenderers"].as_array().cloned().unwrap_or_default(),
            common_labels: map("/commonMetadata/labels"),
            common_annotations: map("/commonMetadata/annotations"),
        })
    }
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
    fn a_helm_release_spec_is_read_with_the_controllers_defaults() {
        let hr = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {"targetNamespace": "web",
                "chart": {"spec": {"chart": "./charts/web", "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"},
                    "valuesFiles": ["charts/web/values.yaml", "charts/web/prod.yaml"]}},
                "valuesFrom": [{"kind": "ConfigMap", "name": "web-values"},
                    {"kind": "Secret", "name": "web-secret", "valuesKey": "token", "targetPath": "auth.token", "optional": true}],
                "values": {"replicaCount": 2},
                "upgrade": {"crds": "CreateReplace"},
                "commonMetadata": {"labels": {"team": "a"}}}});
        let spec = HelmReleaseSpec::parse(&hr).unwrap();
        assert_eq!(spec.release.name, "web-web");
        assert_eq!(spec.release.namespace, "web");
        let Some(ChartSource::Template { chart, source, values_files, .. }) = &spec.chart else {
            panic!("{spec:?}")
        };
        assert_eq!(chart, "./charts/web");
        assert_eq!(source.to_string(), "GitRepository/flux-system/flux-system");
        assert_eq!(values_files.len(), 2);
        assert_eq!(spec.values_from[0].values_key, "values.yaml");
        assert_eq!(spec.values_from[1].target_path.as_deref(), Some("auth.token"));
        assert!(spec.values_from[1].optional);
        assert_eq!((spec.install_crds, spec.upgrade_crds), (CrdPolicy::Create, CrdPolicy::CreateReplace));
        assert_eq!(spec.common_labels["team"], "a");
        let by_ref = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "db", "namespace": "apps"}, "spec": {"chartRef": {"kind": "OCIRepository", "name": "db"}}});
        let spec = HelmReleaseSpec::parse(&by_ref).unwrap();
        assert_eq!(
            spec.chart,
            Some(ChartSource::Reference(crate::flux::SourceRef {
                kind: "OCIRepository".into(),
                namespace: "apps".into(),
                name: "db".into()
            }))
        );
        assert_eq!(spec.values, json!({}));
    }

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
