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

/// Where a release is installed, as helm-controller's `ReleaseTargetChanged` compares it
/// (internal/action/verify.go): storage namespace, release namespace, release name, chart name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseTarget {
    pub release: ReleaseRef,
    /// The chart's name (`Chart.yaml`), when known.
    pub chart: Option<String>,
}

/// What differs between the installed release and the one the spec asks for, in the
/// controller's order of checks: the first difference is the reason it gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetChange {
    /// `storage namespace`, `release namespace`, `release name` or `chart name`.
    pub field: &'static str,
    pub from: String,
    pub to: String,
}

impl std::fmt::Display for TargetChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} → {}", self.field, self.from, self.to)
    }
}

/// The chart (name, version) of the latest release a live HelmRelease's status records.
pub fn installed_chart(helm_release: &Value) -> Option<(String, String)> {
    let latest = helm_release["status"]["history"]
        .as_array()?
        .iter()
        .filter(|h| h["name"].as_str().is_some_and(|n| !n.is_empty()))
        .max_by_key(|h| h["version"].as_i64().unwrap_or(0))?;
    Some((text(latest, "/chartName")?.to_string(), text(latest, "/chartVersion")?.to_string()))
}

/// The release a live HelmRelease's status records: `status.storageNamespace` and the latest
/// `status.history` entry (name, namespace, chart name). `None` when either is missing: the
/// controller then sees nothing installed and no target to change.
pub fn installed_target(helm_release: &Value) -> Option<ReleaseTarget> {
    let storage = text(helm_release, "/status/storageNamespace")?;
    let latest = helm_release["status"]["history"]
        .as_array()?
        .iter()
        .filter(|h| h["name"].as_str().is_some_and(|n| !n.is_empty()))
        .max_by_key(|h| h["version"].as_i64().unwrap_or(0))?;
    Some(ReleaseTarget {
        release: ReleaseRef {
            name: text(latest, "/name")?.to_string(),
            namespace: text(latest, "/namespace").unwrap_or("").to_string(),
            storage_namespace: storage.to_string(),
        },
        chart: text(latest, "/chartName").map(str::to_string),
    })
}

/// Whether helm-controller uninstalls `installed` and installs `wanted` instead of upgrading.
/// A chart name change counts only when both names are known and the HelmRelease reinstalls on
/// one (`spec.upgrade.chartNameChangeStrategy`, see [`reinstalls_on_chart_rename`]).
pub fn target_change(
    installed: &ReleaseTarget,
    wanted: &ReleaseTarget,
    reinstalls_on_chart_rename: bool,
) -> Option<TargetChange> {
    let change = |field, from: &str, to: &str| {
        (from != to).then(|| TargetChange { field, from: from.to_string(), to: to.to_string() })
    };
    let (before, after) = (&installed.release, &wanted.release);
    change("storage namespace", &before.storage_namespace, &after.storage_namespace)
        .or_else(|| change("release namespace", &before.namespace, &after.namespace))
        .or_else(|| change("release name", &before.name, &after.name))
        .or_else(|| match (&installed.chart, &wanted.chart) {
            (Some(from), Some(to)) if reinstalls_on_chart_rename => change("chart name", from, to),
            _ => None,
        })
}

/// `spec.upgrade.chartNameChangeStrategy`: `Reinstall` (the default, and the only behaviour
/// before helm-controller v1.6.0) uninstalls on a chart name change; `InPlaceUpdate` upgrades.
pub fn reinstalls_on_chart_rename(helm_release: &Value) -> bool {
    text(helm_release, "/spec/upgrade/chartNameChangeStrategy") != Some("InPlaceUpdate")
}

/// `spec.uninstall.disableHooks`: the uninstall runs no delete hooks.
pub fn uninstall_disables_hooks(helm_release: &Value) -> bool {
    helm_release["spec"]["uninstall"]["disableHooks"].as_bool() == Some(true)
}

/// The cluster `spec.kubeConfig` names, in words (`the cluster of kubeConfig Secret apps/remote`);
/// `None` when the release goes to the cluster helm-controller runs in.
pub fn kube_config(helm_release: &Value) -> Option<String> {
    let config = helm_release["spec"].get("kubeConfig").filter(|k| k.is_object())?;
    let namespace = text(helm_release, "/metadata/namespace").unwrap_or("default");
    let described = if let Some(name) = text(config, "/secretRef/name") {
        let key = text(config, "/secretRef/key").unwrap_or("value");
        format!("the cluster of kubeConfig Secret {namespace}/{name} (key {key})")
    } else if let Some(name) = text(config, "/configMapRef/name") {
        format!("the cluster of kubeConfig ConfigMap {namespace}/{name}")
    } else {
        format!("the cluster of kubeConfig {}", crate::yaml::canonical_json(config))
    };
    Some(described)
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
    /// `literal: true` (helm-controller v1.6+): the value set at `targetPath` verbatim, not
    /// parsed with Helm's `--set` syntax.
    pub literal: bool,
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
    /// `spec.postRenderStrategy`: whether hooks go through the post-renderers.
    pub post_render_strategy: PostRenderStrategy,
    /// Which hooks the controller's actions run.
    pub hooks: HookSettings,
}

/// `spec.postRenderStrategy` (helm-controller `api/v2/helmrelease_types.go`, handed to Helm's
/// `renderResources` in `pkg/action/action.go`): which of the chart's documents the
/// post-renderers (`postRenderers`, `commonMetadata`, the origin labels) see.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PostRenderStrategy {
    /// The default: hooks and tests post-rendered in one stream with the manifest.
    #[default]
    Combined,
    /// Hooks and tests left as the chart renders them (Helm 3's behaviour).
    NoHooks,
    /// Hooks and tests post-rendered in a stream of their own.
    Separate,
    /// A value the CRD's enum refuses.
    Invalid(String),
}

/// What `spec.install`, `spec.upgrade`, `spec.uninstall` and `spec.test` say about hooks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HookSettings {
    pub install_disabled: bool,
    pub upgrade_disabled: bool,
    pub uninstall_disabled: bool,
    /// `spec.test.enable`: helm-controller runs the test hooks after an install or upgrade.
    pub test_enabled: bool,
    /// `spec.test.filters`: names to run only (`exclude: false`) or to skip (`exclude: true`).
    pub test_filters: Vec<(String, bool)>,
}

impl HookSettings {
    /// True when `helm test` as helm-controller configures it runs the test hook `name`
    /// (Helm's `pkg/action/release_testing.go`: excluded names go first, then, when any name is
    /// included, only those).
    pub fn runs_test(&self, name: &str) -> bool {
        let listed = |exclude: bool| self.test_filters.iter().filter(move |(_, e)| *e == exclude);
        if listed(true).any(|(n, _)| n == name) {
            return false;
        }
        let mut included = listed(false).peekable();
        included.peek().is_none() || included.any(|(n, _)| n == name)
    }
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
                literal: entry["literal"].as_bool() == Some(true),
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
            post_render_strategy: match text(spec, "/postRenderStrategy") {
                None | Some("combined") => PostRenderStrategy::Combined,
                Some("nohooks") => PostRenderStrategy::NoHooks,
                Some("separate") => PostRenderStrategy::Separate,
                Some(other) => PostRenderStrategy::Invalid(other.to_string()),
            },
            hooks: HookSettings {
                install_disabled: spec["install"]["disableHooks"].as_bool() == Some(true),
                upgrade_disabled: spec["upgrade"]["disableHooks"].as_bool() == Some(true),
                uninstall_disabled: spec["uninstall"]["disableHooks"].as_bool() == Some(true),
                test_enabled: spec["test"]["enable"].as_bool() == Some(true),
                test_filters: spec["test"]["filters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|f| {
                        Some((f["name"].as_str()?.to_string(), f["exclude"].as_bool() == Some(true)))
                    })
                    .collect(),
            },
        })
    }
}

/// What a live HelmRelease's `status.inventory` lists (helm-controller v1.5.0 and later, written on
/// every install, upgrade and rollback: internal/reconcile/release.go `observeInventory`): the
/// release manifest's objects, hooks left out, then the CRDs of the chart's crds/ directories.
/// `None` when it has none.
pub fn status_inventory(helm_release: &Value) -> Option<Vec<super::ObjectId>> {
    let inventory = helm_release["status"]["inventory"].as_object()?;
    let entries = inventory.get("entries").and_then(Value::as_array);
    Some(entries.into_iter().flatten().filter_map(|e| super::ObjectId::parse(e["id"].as_str()?)).collect())
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
    fn hook_settings_and_the_post_render_strategy_are_read_as_the_controller_reads_them() {
        let parse = |spec: Value| {
            HelmReleaseSpec::parse(&json!({
                "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": {"name": "web", "namespace": "apps"}, "spec": spec,
            }))
            .unwrap()
        };
        let plain = parse(json!({}));
        assert_eq!(plain.post_render_strategy, PostRenderStrategy::Combined);
        assert_eq!(plain.hooks, HookSettings::default());
        let set = parse(json!({
            "postRenderStrategy": "nohooks",
            "install": {"disableHooks": true}, "upgrade": {"disableHooks": false},
            "test": {"enable": true, "filters": [{"name": "a"}, {"name": "b", "exclude": true}]},
        }));
        assert_eq!(set.post_render_strategy, PostRenderStrategy::NoHooks);
        assert!(set.hooks.install_disabled && !set.hooks.upgrade_disabled && set.hooks.test_enabled);
        // Included names only, excluded ones never.
        assert!(set.hooks.runs_test("a") && !set.hooks.runs_test("b") && !set.hooks.runs_test("c"));
        let excluding = parse(json!({"test": {"enable": true, "filters": [{"name": "b", "exclude": true}]}}));
        assert!(excluding.hooks.runs_test("a") && !excluding.hooks.runs_test("b"));
        assert_eq!(
            parse(json!({"postRenderStrategy": "sometimes"})).post_render_strategy,
            PostRenderStrategy::Invalid("sometimes".into())
        );
    }

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

    fn target(storage: &str, namespace: &str, name: &str, chart: Option<&str>) -> ReleaseTarget {
        ReleaseTarget {
            release: ReleaseRef {
                name: name.into(),
                namespace: namespace.into(),
                storage_namespace: storage.into(),
            },
            chart: chart.map(str::to_string),
        }
    }

    #[test]
    fn a_target_change_is_reported_in_the_controllers_order() {
        let installed = target("flux-system", "apps", "web", Some("web"));
        assert_eq!(target_change(&installed, &installed, true), None);
        // Everything differs: the storage namespace is checked first, as ReleaseTargetChanged does.
        let elsewhere = target("helm", "web", "web2", Some("site"));
        let change = target_change(&installed, &elsewhere, true).unwrap();
        assert_eq!(change.to_string(), "storage namespace flux-system → helm");
        let moved = target("flux-system", "web", "web2", Some("site"));
        assert_eq!(target_change(&installed, &moved, true).unwrap().field, "release namespace");
        let renamed = target("flux-system", "apps", "web2", Some("site"));
        assert_eq!(target_change(&installed, &renamed, true).unwrap().field, "release name");
        let new_chart = target("flux-system", "apps", "web", Some("site"));
        assert_eq!(target_change(&installed, &new_chart, true).unwrap().to_string(), "chart name web → site");
        // InPlaceUpdate upgrades across a chart rename; an unknown chart name changes nothing.
        assert_eq!(target_change(&installed, &new_chart, false), None);
        assert_eq!(target_change(&installed, &target("flux-system", "apps", "web", None), true), None);
    }

    #[test]
    fn the_installed_target_is_the_status_or_nothing() {
        let live = json!({"metadata": {"name": "web", "namespace": "apps"},
            "spec": {"releaseName": "renamed"},
            "status": {"storageNamespace": "apps", "history": [
                {"name": "web", "namespace": "apps", "version": 2, "chartName": "web"},
                {"name": "older", "namespace": "apps", "version": 1, "chartName": "old"}]}});
        assert_eq!(installed_target(&live), Some(target("apps", "apps", "web", Some("web"))));
        // No storage namespace (never installed, or cleared by an uninstall), or no history.
        let mut cleared = live.clone();
        cleared["status"]["storageNamespace"] = json!("");
        assert_eq!(installed_target(&cleared), None);
        let mut no_history = live.clone();
        no_history["status"]["history"] = json!([]);
        assert_eq!(installed_target(&no_history), None);
        assert_eq!(installed_target(&json!({"spec": {}})), None);
    }

    #[test]
    fn kube_config_chart_rename_and_uninstall_hooks_are_read_with_defaults() {
        let hr = |spec: Value| json!({"metadata": {"name": "web", "namespace": "apps"}, "spec": spec});
        assert_eq!(kube_config(&hr(json!({}))), None);
        assert_eq!(
            kube_config(&hr(json!({"kubeConfig": {"secretRef": {"name": "remote"}}}))).as_deref(),
            Some("the cluster of kubeConfig Secret apps/remote (key value)")
        );
        assert_eq!(
            kube_config(&hr(json!({"kubeConfig": {"configMapRef": {"name": "eks"}}}))).as_deref(),
            Some("the cluster of kubeConfig ConfigMap apps/eks")
        );
        assert!(reinstalls_on_chart_rename(&hr(json!({}))));
        assert!(reinstalls_on_chart_rename(&hr(
            json!({"upgrade": {"chartNameChangeStrategy": "Reinstall"}})
        )));
        assert!(!reinstalls_on_chart_rename(&hr(
            json!({"upgrade": {"chartNameChangeStrategy": "InPlaceUpdate"}})
        )));
        assert!(!uninstall_disables_hooks(&hr(json!({}))));
        assert!(uninstall_disables_hooks(&hr(json!({"uninstall": {"disableHooks": true}}))));
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
