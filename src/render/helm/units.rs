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
    postbuild, Cluster, ErrorReport, RealName, RenderError, RenderedKustomization, RenderedObject, Status,
    UnitKind,
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
            .map(|o| &o.object)
    };
    let named = |o: &Value| {
        Some((o["metadata"]["namespace"].as_str()?.to_string(), o["metadata"]["name"].as_str()?.to_string()))
    };
    let config_maps: BTreeMap<(String, String), Value> = applied()
        .filter(|o| o["kind"] == "ConfigMap" && o["apiVersion"] == "v1")
        .filter_map(|o| Some((named(o)?, o.clone())))
        .collect();
    let sources: BTreeMap<(String, String, String), Value> = applied()
        .filter(|o| {
            crate::flux::split_api_version(o["apiVersion"].as_str().unwrap_or("")).0
                == crate::flux::SOURCE_GROUP
        })
        .filter_map(|o| {
            let (namespace, name) = named(o)?;
            Some(((o["kind"].as_str()?.to_string(), namespace, name), o.clone()))
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
        hooks: Vec::new(),
        tests: 0,
        helm: String::new(),
        suspended: found.manifest["spec"]["suspend"].as_bool() == Some(true),
        reads: reads(&spec, releases),
        crds: BTreeSet::new(),
        install_crds: spec.install_crds,
        upgrade_crds: spec.upgrade_crds,
        drift_detection: DriftDetection::of(&found.manifest),
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
    let helm = match &releases.charts.helm {
        Ok(helm) => *helm,
        Err(why) => return external(unit, helm_unit, format!("not rendered: {why}")),
    };
    helm_unit.helm = helm.version.clone();
    let key = format!("{}/{}", found.reference.namespace, found.reference.name);
    let given = releases.given_charts.get(&key).cloned();
    let source_object = |source: &SourceRef| {
        sources.get(&(source.kind.clone(), source.namespace.clone(), source.name.clone())).cloned()
    };
    let fetch = |request: &ChartRequest, credentials: &crate::charts::credentials::SourceCredentials| {
        releases.charts.fetch(request, credentials)
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
        fetch: &fetch,
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
            // What is shown comes from the render that never saw values from Secrets.
            let shown = rendered.shown.as_ref().unwrap_or(&rendered.release);
            helm_unit.tests = shown.tests.len();
            helm_unit.hooks = shown
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
            helm_unit.crds = shown
                .crds
                .iter()
                .filter_map(|crd| crd["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            let plain = |release: &super::Release| {
                let built = release
                    .crds
                    .iter()
                    .chain(&release.objects)
                    .map(|object| BuiltObject { object: object.clone(), origin: None });
                postbuild::plain(built.collect())
            };
            let real = plain(&rendered.release);
            // Post-renderers may reorder objects by name: with names from Secrets, they do not pair.
            let reordered = !spec.post_renderers.is_empty();
            let objects = match &rendered.shown {
                None => real,
                Some(shown) => match with_shown_manifests(real, plain(shown), reordered) {
                    Some(objects) => objects,
                    None => {
                        return external(
                            unit,
                            helm_unit,
                            "its objects depend on its values from Secrets in a way fluxplan cannot show without \
                             showing them: not rendered"
                                .into(),
                        )
                    }
                },
            };
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

/// The real objects (what the cluster gets: their digests, their names for the inventory) shown
/// as the render without Secret values has them; `None` when the two renders do not pair up.
/// They pair when each has the same kind and the same shape (keys, list lengths): only values
/// may differ, so what is shown cannot be a decoy of other fields. `reordered`: the objects went
/// through kustomize, which sorts by name, so names must match too.
fn with_shown_manifests(
    real: Vec<RenderedObject>,
    shown: Vec<RenderedObject>,
    reordered: bool,
) -> Option<Vec<RenderedObject>> {
    let pairs = real.len() == shown.len()
        && real.iter().zip(&shown).all(|(r, s)| {
            same_shape(&r.object, &s.object)
                && (!reordered || RealName::of(&r.object) == RealName::of(&s.object))
        });
    if !pairs {
        return None;
    }
    Some(
        real.into_iter()
            .zip(shown)
            .map(|(real, shown)| {
                let real_name = RealName::of(&real.object);
                // The real data keys could be named from a Secret: one digest for them all.
                let secret_digests = if real.secret_digests.is_empty() {
                    real.secret_digests
                } else {
                    let all = serde_json::to_string(&real.secret_digests).unwrap_or_default();
                    [("data".to_string(), crate::render::postbuild::digest(&Value::String(all)))].into()
                };
                RenderedObject {
                    real_name: (real_name != RealName::of(&shown.object)).then_some(real_name),
                    object: shown.object,
                    holds_secret_values: true,
                    secret_digests,
                    ..real
                }
            })
            .collect(),
    )
}

/// The same keys at every level and the same list lengths; scalars may differ (but not in kind
/// of container).
fn same_shape(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same_shape(v, w)))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(v, w)| same_shape(v, w))
        }
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => false,
        _ => true,
    }
}

fn failed(mut unit: RenderedKustomization, error: RenderError) -> RenderedKustomization {
    unit.status = Status::Failed;
    unit.error = Some(ErrorReport::from(&error));
    unit
}

#[cfg(test)]
mod tests {

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

    use super::*;
    use serde_json::json;

    fn objects(manifest: &Value) -> Vec<RenderedObject> {
        let manifests = std::slice::from_ref(manifest);
        postbuild::plain(
            manifests.iter().map(|object| BuiltObject { object: object.clone(), origin: None }).collect(),
        )
    }

    #[test]
    fn a_shown_render_pairs_only_when_just_values_differ() {
        let real = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"pw": "hunter22"}});
        let shown = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"pw": "(masked)"}});
        let paired = with_shown_manifests(objects(&real), objects(&shown), false).unwrap();
        assert_eq!(paired[0].object, shown);
        assert!(paired[0].holds_secret_values);
        assert_eq!(paired[0].digest, objects(&real)[0].digest, "compared as the cluster gets it");
        // A decoy: the shown render lacks a field the real one has.
        let decoy = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}});
        assert!(with_shown_manifests(objects(&real), objects(&decoy), false).is_none());
        // Names that differ do not pair once kustomize may have reordered the objects.
        let renamed =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "data": {"pw": "x"}});
        assert!(with_shown_manifests(objects(&real), objects(&renamed), true).is_none());
        assert!(with_shown_manifests(objects(&real), objects(&renamed), false).is_some());
    }

    #[test]
    fn secret_data_keys_from_a_secret_never_name_a_change() {
        let real = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"hunter22": "x"}});
        let shown = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "x"}});
        // Keys differ: not the same shape, not shown.
        assert!(with_shown_manifests(objects(&real), objects(&shown), false).is_none());
        let paired = with_shown_manifests(objects(&real), objects(&real), false).unwrap();
        assert_eq!(paired[0].secret_digests.keys().collect::<Vec<_>>(), ["data"]);
    }
}
