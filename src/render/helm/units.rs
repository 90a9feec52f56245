//! HelmReleases as units of a plan: every HelmRelease a rendered Kustomization applies becomes a
//! unit of its own, below that Kustomization, whose objects are its chart's as helm-controller
//! would install them.

use super::release::{self, Inputs, NotRendered};
use crate::cancel::CancelToken;
use crate::charts::store::ChartRequest;
use crate::flux::helm::{ChartSource, CrdPolicy, HelmReleaseSpec};
use crate::flux::{KustomizationRef, SourceRef};
use crate::render::build::BuiltObject;
use crate::render::{
    postbuild, Cluster, ErrorReport, RenderError, RenderedKustomization, RenderedObject, Status, UnitKind,
};
use rayon::prelude::*;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// What helm-controller knows of a HelmRelease unit.
#[derive(Debug, Clone, Serialize)]
pub struct HelmUnit {
    /// The Helm release's name and namespace, and where Helm stores it.
    pub release: String,
    pub release_namespace: String,
    pub storage_namespace: String,
    /// The chart's name and version, as its `Chart.yaml` says (when it was read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart: Option<ChartVersion>,
    /// The chart as its spec and sources ask for it, known even when the chart could not be had.
    #[serde(skip)]
    pub origin: Option<super::origin::ChartOrigin>,
    /// Hooks the release runs (not part of its manifest): `Job ns/name on pre-install`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<String>,
    /// Test hooks, left out of the plan.
    #[serde(skip_serializing_if = "is_zero")]
    pub tests: usize,
    /// The Helm that rendered it (`v4.1.4`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub helm: String,
    #[serde(skip)]
    pub suspended: bool,
    /// What it reads in its chart's source: the chart's path and its values files.
    #[serde(skip)]
    pub reads: Vec<String>,
    /// Names of the CRDs from the chart's `crds/` directories: not part of the manifest, never
    /// deleted by an upgrade or uninstall, created or replaced per `install.crds`/`upgrade.crds`.
    #[serde(skip)]
    pub crds: BTreeSet<String>,
    #[serde(skip)]
    pub install_crds: CrdPolicy,
    #[serde(skip)]
    pub upgrade_crds: CrdPolicy,
    /// `spec.driftDetection`: whether helm-controller puts drift back, and what it ignores.
    #[serde(skip)]
    pub drift_detection: DriftDetection,
    /// The release's hooks, test hooks included, as the plan compares them (they are not part
    /// of its manifest: `objects` never holds them).
    #[serde(skip)]
    pub hook_objects: Vec<HookObject>,
    /// Which hooks the controller's install, upgrade, uninstall and test run.
    #[serde(skip)]
    pub hook_settings: crate::flux::helm::HookSettings,
    /// The chart's templates that call `lookup`: the controller's Helm asks the API server,
    /// `helm template` answers an empty map.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lookup: Vec<String>,
    /// The chart's templates that read `.Capabilities` when no Kubernetes version was known:
    /// Helm's built-in version stood for the cluster's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capabilities_assumed: Vec<String>,
    /// What the shown render depends on, hashed: equal at base and head when nothing the
    /// release is rendered from changed.
    #[serde(skip)]
    pub inputs_digest: String,
    /// Entries of its chart archive that helm-controller's archive loader installs and a render
    /// of the unpacked chart would not show (or show otherwise), each with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub archive_differences: Vec<String>,
    /// What decides between an upgrade and an uninstall-and-install, and where the release goes
    /// (`flux::helm`): its chart name change strategy, its uninstall's hooks, its `kubeConfig`.
    #[serde(skip)]
    pub reinstalls_on_chart_rename: bool,
    #[serde(skip)]
    pub uninstall_disables_hooks: bool,
    #[serde(skip)]
    pub kube_config: Option<String>,
}

/// A hook of a release: when Helm runs it, when it deletes it, and the object.
#[derive(Debug, Clone)]
pub struct HookObject {
    /// `pre-install`, `post-upgrade`, `test`, … (as Helm reads `helm.sh/hook`).
    pub events: Vec<String>,
    /// `helm.sh/hook-delete-policy` as written (Helm applies `before-hook-creation` when empty).
    pub delete_policy: Vec<String>,
    pub object: RenderedObject,
}

/// A HelmRelease's `spec.driftDetection`. With `mode: enabled` helm-controller compares the
/// release's objects with the cluster on every reconcile and puts back what differs; with `warn`
/// it only reports, and by default it does neither.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriftDetection {
    pub corrects: bool,
    /// `ignore` rules: JSON pointers (`paths`) for the objects a `target` selects (all without).
    pub ignore: Vec<Value>,
}

impl DriftDetection {
    pub fn of(helm_release: &Value) -> Self {
        let spec = &helm_release["spec"]["driftDetection"];
        DriftDetection {
            corrects: spec["mode"].as_str() == Some("enabled"),
            ignore: spec["ignore"].as_array().cloned().unwrap_or_default(),
        }
    }

    /// The JSON pointers helm-controller leaves alone on `id`. A target's fields are matched
    /// exactly (a pattern matches only itself), and a rule whose target selects by version, labels
    /// or annotations is not applied: fluxplan shows more drift rather than less.
    pub fn ignored(&self, id: &crate::flux::ObjectId) -> Vec<String> {
        let selects = |target: &Value| {
            let field = |key: &str, actual: &str| target[key].as_str().is_none_or(|wanted| wanted == actual);
            ["version", "labelSelector", "annotationSelector"].iter().all(|key| target.get(*key).is_none())
                && field("kind", &id.kind)
                && field("name", &id.name)
                && field("namespace", &id.namespace)
                && field("group", &id.group)
        };
        self.ignore
            .iter()
            .filter(|rule| rule.get("target").is_none_or(selects))
            .flat_map(|rule| rule["paths"].as_array().into_iter().flatten().filter_map(Value::as_str))
            .map(str::to_string)
            .collect()
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ChartVersion {
    pub name: String,
    pub version: String,
}

impl std::fmt::Display for ChartVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.version)
    }
}

/// What rendering the HelmReleases of a revision needs besides the renders.
pub struct Releases<'a> {
    pub charts: super::Charts<'a>,
    /// The tree of a source of this repository, by the source and the file naming it.
    pub source_tree: &'a (dyn Fn(&SourceRef) -> Option<PathBuf> + Sync),
    /// Charts given on the command line (`--chart NAMESPACE/NAME=DIR`), by HelmRelease.
    pub given_charts: &'a BTreeMap<String, PathBuf>,
    /// kustomize, for `postRenderers` (a directory, and what it may read).
    pub kustomize: &'a (dyn Fn(&std::path::Path, &std::path::Path) -> Result<String, crate::render::kustomize::BuildError>
             + Sync),
    /// ConfigMaps and Secrets of the cluster (Secrets only when read).
    pub cluster: &'a dyn crate::cluster::SubstitutionSource,
    /// Which releases are installed (rendered as upgrades).
    pub installed: &'a super::installed::Installed,
    pub cancel: &'a CancelToken,
}

/// Adds the HelmRelease units of every cluster: each cluster with its own ConfigMaps and
/// Secrets, and its own Helm and Kubernetes when the clusters file names them.
pub fn add_all(
    clusters: &mut [Cluster],
    charts: &super::Charts,
    toolkit: &super::Toolkit,
    opts: &crate::render::RenderOptions,
    source_tree: &(dyn Fn(&SourceRef) -> Option<PathBuf> + Sync),
    kustomize: &(dyn Fn(&std::path::Path, &std::path::Path) -> Result<String, crate::render::kustomize::BuildError>
          + Sync),
) {
    for cluster in clusters.iter_mut() {
        let values = opts.cluster_values.get(&cluster.name).unwrap_or(&opts.values);
        let mut charts = charts.clone();
        if let Some(own) = opts.cluster_helm.get(&cluster.name) {
            charts.helm = toolkit.helm(own.major.unwrap_or(opts.helm_major));
            charts.kube_version = own.kube_version.as_deref().or(charts.kube_version);
        }
        let releases = Releases {
            charts,
            source_tree,
            given_charts: &opts.charts,
            kustomize,
            cluster: values.as_ref(),
            installed: &opts.installed_releases,
            cancel: &opts.cancel,
        };
        add_units(cluster, &releases);
    }
}

/// Adds a unit for every HelmRelease the cluster's rendered Flux Kustomizations apply (the first
/// one rendering it, when several do), rendered in parallel.
pub fn add_units(cluster: &mut Cluster, releases: &Releases) {
    // What the cluster holds after the merge, as the render has it (never objects holding values
    // from Secrets: their manifests are masked).
    let applied = || {
        cluster
            .kustomizations
            .iter()
            .filter(|k| k.status == Status::Rendered)
            .flat_map(|k| &k.objects)
            .filter(|o| !o.holds_secret_values)
            .map(|o| &*o.object)
    };
    let named = |o: &Value| {
        Some((o["metadata"]["namespace"].as_str()?.to_string(), o["metadata"]["name"].as_str()?.to_string()))
    };
    let config_maps: BTreeMap<(String, String), Value> = applied()
        .filter(|o| o["kind"] == "ConfigMap" && o["apiVersion"] == "v1")
        .filter_map(|o| Some((named(o)?, Value::clone(o))))
        .collect();
    let sources: BTreeMap<(String, String, String), Value> = applied()
        .filter(|o| {
            crate::flux::split_api_version(o["apiVersion"].as_str().unwrap_or("")).0
                == crate::flux::SOURCE_GROUP
        })
        .filter_map(|o| {
            let (namespace, name) = named(o)?;
            Some(((o["kind"].as_str()?.to_string(), namespace, name), Value::clone(o)))
        })
        .collect();
    let found = found_in(cluster);
    let name = cluster.name.clone();
    let units: Vec<RenderedKustomization> = found
        .into_par_iter()
        .map(|found| render_unit(found, &name, releases, &config_maps, &sources))
        .collect();
    cluster.kustomizations.extend(units);
}

/// The HelmReleases a cluster's Kustomizations apply, or its ResourceSets generate (the first
/// one rendering each, when several do).
fn found_in(cluster: &Cluster) -> Vec<Found> {
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    // HelmReleases a Kustomization applies, or a ResourceSet generates.
    for k in cluster
        .kustomizations
        .iter()
        .filter(|k| matches!(k.kind, UnitKind::Kustomization | UnitKind::ResourceSet))
    {
        if k.status != Status::Rendered {
            continue;
        }
        for object in k.objects.iter().filter(|o| crate::flux::helm::is_helm_release(&o.object)) {
            let manifest = object.real.as_ref().unwrap_or(&object.object);
            let name = manifest["metadata"]["name"].as_str().unwrap_or("").to_string();
            let namespace = manifest["metadata"]["namespace"].as_str().unwrap_or("").to_string();
            if name.is_empty() || namespace.is_empty() || !seen.insert((namespace.clone(), name.clone())) {
                continue;
            }
            found.push(Found {
                reference: KustomizationRef { namespace, name },
                parent: k.reference(),
                file: object.origin.clone(),
                manifest: manifest.clone(),
                holds_secret_values: object.holds_secret_values,
            });
        }
    }
    found
}

/// The releases (cluster, storage namespace, name) of the HelmReleases these clusters apply.
pub fn releases_of(clusters: &[Cluster]) -> BTreeSet<super::installed::ReleaseKey> {
    clusters
        .iter()
        .flat_map(|cluster| {
            found_in(cluster).into_iter().filter_map(|found| {
                let release = crate::flux::helm::release_of(&found.manifest)?;
                Some((cluster.name.clone(), release.storage_namespace, release.name))
            })
        })
        .collect()
}

struct Found {
    reference: KustomizationRef,
    parent: KustomizationRef,
    file: Option<String>,
    manifest: Value,
    holds_secret_values: bool,
}

fn render_unit(
    found: Found,
    cluster: &str,
    releases: &Releases,
    config_maps: &BTreeMap<(String, String), Value>,
    sources: &BTreeMap<(String, String, String), Value>,
) -> RenderedKustomization {
    let spec = HelmReleaseSpec::parse(&found.manifest);
    let (path, source) = match spec.as_ref().and_then(|s| s.chart.as_ref()) {
        Some(ChartSource::Template { chart, source, .. }) => (chart.clone(), source.clone()),
        Some(ChartSource::Reference(source)) => (format!("{} {}", source.kind, source.name), source.clone()),
        None => {
            (String::new(), SourceRef { kind: String::new(), name: String::new(), namespace: String::new() })
        }
    };
    let mut unit = RenderedKustomization::new(
        UnitKind::HelmRelease,
        found.reference.clone(),
        path,
        source,
        Some(found.parent),
        found.file,
    );
    let Some(spec) = spec else {
        return failed(unit, RenderError::InvalidSpec("not a HelmRelease fluxplan can read".into()));
    };
    let mut helm_unit = HelmUnit {
        release: spec.release.name.clone(),
        release_namespace: spec.release.namespace.clone(),
        storage_namespace: spec.release.storage_namespace.clone(),
        chart: None,
        origin: None,
        hooks: Vec::new(),
        tests: 0,
        helm: String::new(),
        suspended: found.manifest["spec"]["suspend"].as_bool() == Some(true),
        reads: reads(&spec, releases),
        crds: BTreeSet::new(),
        install_crds: spec.install_crds,
        upgrade_crds: spec.upgrade_crds,
        drift_detection: DriftDetection::of(&found.manifest),
        hook_objects: Vec::new(),
        hook_settings: spec.hooks.clone(),
        lookup: Vec::new(),
        capabilities_assumed: Vec::new(),
        inputs_digest: String::new(),
        archive_differences: Vec::new(),
        reinstalls_on_chart_rename: crate::flux::helm::reinstalls_on_chart_rename(&found.manifest),
        uninstall_disables_hooks: crate::flux::helm::uninstall_disables_hooks(&found.manifest),
        kube_config: crate::flux::helm::kube_config(&found.manifest),
    };
    let external = |mut unit: RenderedKustomization, helm_unit: HelmUnit, why: String| {
        unit.status = Status::External;
        unit.warnings.push(why);
        unit.helm = Some(Box::new(helm_unit));
        unit
    };
    if found.holds_secret_values {
        return external(
            unit,
            helm_unit,
            "its spec holds values substituted from a Secret: not rendered, so they cannot show in its objects".into(),
        );
    }
    let source_object = |source: &SourceRef| {
        sources.get(&(source.kind.clone(), source.namespace.clone(), source.name.clone())).cloned()
    };
    // Known from the spec alone (its values from Secrets aside, above): what the chart is asked
    // as, compared between base and head even when the chart cannot be had.
    helm_unit.origin = super::origin::of(&spec, &source_object);
    let helm = match &releases.charts.helm {
        Ok(helm) => *helm,
        Err(why) => return external(unit, helm_unit, format!("not rendered: {why}")),
    };
    helm_unit.helm = helm.version.clone();
    let key = format!("{}/{}", found.reference.namespace, found.reference.name);
    let given = releases.given_charts.get(&key).cloned();
    let fetch = |request: &ChartRequest, credentials: &crate::charts::credentials::SourceCredentials| {
        releases.charts.fetch_chart(request, credentials)
    };
    let source_tree = |source: &SourceRef| (releases.source_tree)(source);
    let config_map =
        |namespace: &str, name: &str| config_maps.get(&(namespace.to_string(), name.to_string())).cloned();
    let inputs = Inputs {
        source_tree: &source_tree,
        config_map: &config_map,
        given_chart: given.as_deref(),
        source_object: &source_object,
        kustomize: releases.kustomize,
        templates: releases.charts.templates,
        cluster: &|kind: &str, namespace: &str, name: &str| releases.cluster.lookup(kind, namespace, name),
        values_secret_refused: &|namespace: &str, name: &str| {
            releases.cluster.values_secret_refused(namespace, name)
        },
        fetch: &fetch,
        prepared: releases.charts.prepared,
        upgrade: releases.installed.is_installed(&(
            cluster.to_string(),
            spec.release.storage_namespace.clone(),
            spec.release.name.clone(),
        )),
        kube_version: releases.charts.kube_version,
        api_versions: releases.charts.api_versions,
    };
    match release::render(
        helm,
        &spec,
        &found.reference.namespace,
        &found.reference.name,
        &inputs,
        releases.cancel,
    ) {
        Err(NotRendered::External(why)) => external(unit, helm_unit, why),
        Err(NotRendered::Failed(error)) => {
            unit.helm = Some(Box::new(helm_unit));
            failed(unit, error)
        }
        Ok(rendered) => {
            helm_unit.chart = rendered.chart.clone();
            unit.warnings.extend(rendered.warnings.iter().cloned());
            helm_unit.archive_differences = rendered.loader_differences.clone();
            let release = &rendered.release;
            helm_unit.tests = release.tests.len();
            helm_unit.hooks = release
                .hooks
                .iter()
                .map(|(phases, hook)| {
                    let meta = &hook["metadata"];
                    let name = crate::flux::id::display_name(
                        hook["kind"].as_str().unwrap_or("?"),
                        meta["namespace"].as_str().unwrap_or(&spec.release.namespace),
                        meta["name"].as_str().unwrap_or("?"),
                    );
                    format!("{name} on {phases}")
                })
                .collect();
            helm_unit.crds = release
                .crds
                .iter()
                .filter_map(|crd| crd["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            let plain = |documents: Vec<&Value>| {
                let built =
                    documents.into_iter().map(|object| BuiltObject { object: object.clone(), origin: None });
                let mut objects = postbuild::plain(built.collect());
                // Rendered with values from Secrets masked: the live objects hold the values, so
                // they are never compared with the cluster (drift would show them).
                for object in objects.iter_mut().filter(|_| rendered.from_secrets) {
                    object.holds_secret_values = true;
                }
                objects
            };
            let objects = plain(release.crds.iter().chain(&release.objects).collect());
            let hook_objects =
                plain(release.hooks.iter().map(|(_, hook)| hook).chain(&release.tests).collect());
            helm_unit.hook_objects = hook_objects
                .into_iter()
                .map(|object| {
                    let phases = object.object["metadata"]["annotations"][super::manifest::HOOK_ANNOTATION]
                        .as_str()
                        .unwrap_or("");
                    HookObject {
                        events: super::manifest::hook_events(phases).unwrap_or_default(),
                        delete_policy: super::manifest::delete_policies(&object.object),
                        object,
                    }
                })
                .collect();
            helm_unit.lookup = rendered.calls.lookup.iter().cloned().collect();
            if releases.charts.kube_version.is_none() {
                helm_unit.capabilities_assumed = rendered.calls.capabilities.iter().cloned().collect();
            }
            helm_unit.inputs_digest = rendered.inputs_digest.clone();
            unit.objects = objects;
            unit.helm = Some(Box::new(helm_unit));
            unit
        }
    }
}

/// What a release reads in its chart's source: the chart's path, its values files, and the
/// charts its `file://` dependencies name.
fn reads(spec: &HelmReleaseSpec, releases: &Releases) -> Vec<String> {
    let Some(ChartSource::Template { chart, values_files, source, .. }) = &spec.chart else {
        return Vec::new();
    };
    let mut reads: Vec<String> = std::iter::once(chart).chain(values_files).cloned().collect();
    if let Some(tree) = (releases.source_tree)(source) {
        let dir = crate::paths::secure_join(&tree, chart);
        for dependency in super::dependencies::missing(&dir, &tree).unwrap_or_default() {
            if let super::dependencies::Missing::Local { dir, .. } = dependency {
                reads.extend(dir.strip_prefix(&tree).ok().map(|p| p.to_string_lossy().into_owned()));
            }
        }
    }
    reads
}

fn failed(mut unit: RenderedKustomization, error: RenderError) -> RenderedKustomization {
    unit.status = Status::Failed;
    unit.error = Some(ErrorReport::from(&error));
    unit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_detection_ignores_the_paths_of_rules_whose_target_it_can_match_exactly() {
        let release = serde_json::json!({"spec": {"driftDetection": {"mode": "enabled", "ignore": [
            {"paths": ["/spec/replicas"], "target": {"kind": "Deployment", "name": "web"}},
            {"paths": ["/metadata/labels"]},
            {"paths": ["/spec/a"], "target": {"kind": "Deployment", "version": "v1"}},
            {"paths": ["/spec/b"], "target": {"labelSelector": "app=web"}},
            {"paths": ["/spec/c"], "target": {"kind": "Deploy.*"}},
        ]}}});
        let detection = DriftDetection::of(&release);
        assert!(detection.corrects);
        let web = crate::flux::ObjectId::new("apps", "web", "apps", "Deployment");
        assert_eq!(detection.ignored(&web), vec!["/spec/replicas", "/metadata/labels"]);
        let other = crate::flux::ObjectId::new("apps", "api", "apps", "Deployment");
        assert_eq!(detection.ignored(&other), vec!["/metadata/labels"]);
        assert!(
            !DriftDetection::of(&serde_json::json!({"spec": {"driftDetection": {"mode": "warn"}}})).corrects
        );
    }
}
