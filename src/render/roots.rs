//! How a repository declares its clusters: the roots Flux starts reconciling from.
//!
//! In order: roots declared in `.fluxplan.yaml`; else every `flux bootstrap` Kustomization
//! (one that renders its own definition) and every Flux Operator sync (a `FluxInstance`, or the
//! one a HelmRelease of the `flux-instance` chart renders); only when none exists, the fallback:
//! Kustomizations that no other one produces or includes.

use crate::flux::{Kustomization, KustomizationRef};
use crate::paths;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The namespace the Flux Operator and `flux bootstrap` install into by default.
const FLUX_NAMESPACE: &str = "flux-system";
/// The Helm chart that renders a `FluxInstance` from its `instance` values.
const FLUX_INSTANCE_CHART: &str = "flux-instance";
/// helm-controller's default key of a `valuesFrom` ConfigMap.
const DEFAULT_VALUES_KEY: &str = "values.yaml";

/// How a root was found (shown in `build --format json` and used by the plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootKind {
    /// Declared in `.fluxplan.yaml` (`roots:`).
    Declared,
    /// `flux bootstrap`: a Kustomization that renders its own definition.
    Bootstrap,
    /// The `spec.sync` of a `FluxInstance` object.
    FluxInstance,
    /// The `FluxInstance` a HelmRelease of the `flux-instance` chart renders from its values.
    FluxInstanceHelmRelease,
    /// Nothing declares the sync: a Kustomization no other one produces or includes.
    Fallback,
    /// An Argo CD Application or ApplicationSet no other Application renders.
    #[serde(rename = "argocd")]
    ArgoCd,
}

impl RootKind {
    pub fn describe(self) -> &'static str {
        match self {
            RootKind::Declared => "declared in .fluxplan.yaml",
            RootKind::Bootstrap => "flux bootstrap",
            RootKind::FluxInstance => "FluxInstance",
            RootKind::FluxInstanceHelmRelease => "flux-instance HelmRelease",
            RootKind::Fallback => "not produced by any other Kustomization",
            RootKind::ArgoCd => "Argo CD Application no other Application renders",
        }
    }
}

/// What fluxplan assumed of a cluster whose root it took by the fallback, and how to declare it
/// instead; `None` for a root the repository or `.fluxplan.yaml` declares.
pub fn assumed(cluster: &super::Cluster) -> Option<String> {
    if cluster.found_by != RootKind::Fallback {
        return None;
    }
    let file = cluster.root_file.as_deref().map(|f| format!(" in {f}")).unwrap_or_default();
    let path = cluster.root_file.as_deref().and_then(|f| Path::new(f).parent()).map(|d| d.to_string_lossy());
    let path = path.filter(|p| !p.is_empty()).unwrap_or(".".into());
    Some(format!(
        "no sync declares cluster {}: no `flux bootstrap` Kustomization that renders its own definition (a \
         placeholder gotk-sync.yaml declares none) and no FluxInstance, so fluxplan took {}{file}, which no \
         other Kustomization produces, as its root; if Flux starts elsewhere, declare the cluster in \
         .fluxplan.yaml: `roots: [{{path: {path}}}]` (docs/build.md#how-fluxplan-finds-your-clusters)",
        cluster.name, cluster.root
    ))
}

/// A root declared in `.fluxplan.yaml`: `roots: [{path: clusters/prod, name: production}]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeclaredRoot {
    /// The directory the cluster syncs, relative to the repository root.
    pub path: String,
    /// The cluster's name (default: the path).
    #[serde(default)]
    pub name: Option<String>,
    /// The source the root Kustomization syncs (default: the Flux Operator sync found at that
    /// path, else `GitRepository/flux-system/flux-system`): this repository at the planned
    /// revision, whatever its kind.
    #[serde(default)]
    pub source: Option<SourceName>,
}

/// A Flux source by kind, namespace and name, as `.fluxplan.yaml` names one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceName {
    pub kind: String,
    pub name: String,
    #[serde(default = "flux_namespace")]
    pub namespace: String,
}

fn flux_namespace() -> String {
    FLUX_NAMESPACE.to_string()
}

/// Source kinds whose artifact can be this repository (or a directory of it).
const REPOSITORY_SOURCE_KINDS: &[&str] = &["GitRepository", "OCIRepository", "Bucket"];

impl SourceName {
    /// `namespace/name`, as sources are keyed.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn validate(&self, field: &str) -> Result<(), String> {
        if !REPOSITORY_SOURCE_KINDS.contains(&self.kind.as_str()) {
            return Err(format!(
                "{field}: kind '{}' cannot hold this repository (use one of {})",
                self.kind,
                REPOSITORY_SOURCE_KINDS.join(", ")
            ));
        }
        if self.name.trim().is_empty() || self.namespace.trim().is_empty() {
            return Err(format!("{field}: a source needs a non-empty name and namespace"));
        }
        Ok(())
    }
}

/// A source `.fluxplan.yaml` says is this repository (`sources:`), or a directory of it whose
/// content is the source's whole artifact (a CI job pushes `./apps` as an OCI artifact).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeclaredSource {
    #[serde(flatten)]
    pub source: SourceName,
    /// The directory of this repository the artifact holds (default: the whole repository).
    #[serde(default)]
    pub path: Option<String>,
}

impl DeclaredSource {
    /// Refuses what cannot name a source or a directory of this repository.
    pub fn validate(sources: &[DeclaredSource]) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for declared in sources {
            declared.source.validate("sources")?;
            if !seen.insert(declared.source.clone()) {
                return Err(format!(
                    "sources: {} {} is declared twice",
                    declared.source.kind,
                    declared.source.key()
                ));
            }
            if let Some(path) = &declared.path {
                if Path::new(path).is_absolute() || path.split('/').any(|part| part == "..") {
                    return Err(format!(
                        "sources: the path of {} {} must be a directory inside the repository, not '{path}'",
                        declared.source.kind,
                        declared.source.key()
                    ));
                }
            }
        }
        Ok(())
    }

    /// The directory, normalized; `None` for the whole repository.
    pub fn subpath(&self) -> Option<String> {
        self.path.as_deref().map(normalized_path).filter(|p| !p.is_empty() && p != ".")
    }
}

impl DeclaredRoot {
    /// Refuses what cannot name a cluster: an empty path or name.
    pub fn validate(roots: &[DeclaredRoot]) -> Result<(), String> {
        let mut names = std::collections::BTreeSet::new();
        for root in roots {
            if root.path.trim().is_empty() {
                return Err("roots: every root needs a non-empty path".into());
            }
            if root.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
                return Err(format!("roots: the root at {} has an empty name", root.path));
            }
            if let Some(source) = &root.source {
                source.validate(&format!("roots: the source of the root at {}", root.path))?;
            }
            let name = root.name.clone().unwrap_or_else(|| normalized_path(&root.path));
            if !names.insert(name.clone()) {
                return Err(format!("roots: two roots are named {name}"));
            }
        }
        Ok(())
    }
}

/// The sync a Flux Operator instance declares: the operator creates a source and a
/// Kustomization, both named `name` in `namespace`, reconciling `path` of that source.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct InstanceSync {
    pub kind: RootKind,
    pub namespace: String,
    pub name: String,
    pub source_kind: String,
    pub url: String,
    /// `sync.ref`: the branch, tag or artifact tag the operator fetches.
    pub reference: String,
    /// The instance's `kustomize.patches` (canonical JSON): the operator applies them to the
    /// sync's source and Kustomization too.
    pub patches: String,
    pub path: String,
    /// The file it was found in, when known.
    pub file: Option<String>,
}

impl InstanceSync {
    /// `namespace/name` of the source the operator creates.
    pub fn source_key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The root Kustomization the operator creates for this sync.
    pub fn root_spec(&self) -> Option<Kustomization> {
        let manifest = json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "interval": "10m0s",
                "path": self.path,
                "prune": true,
                "sourceRef": {"kind": self.source_kind, "name": self.name},
            },
        });
        Kustomization::from_value(&manifest, &self.namespace).ok()
    }
}

impl InstanceSync {
    /// The same source the same way: kind, name and URL. A sync the base revision already had
    /// this way is trusted to be this repository at head too.
    pub fn same_source(&self, other: &InstanceSync) -> bool {
        (&self.namespace, &self.name, &self.source_kind, &self.reference, &self.patches)
            == (&other.namespace, &other.name, &other.source_kind, &other.reference, &other.patches)
            && crate::git::normalize_url(&self.url) == crate::git::normalize_url(&other.url)
    }

    /// The same sync name (the operator's source and root Kustomization of that name).
    pub fn same_name(&self, other: &InstanceSync) -> bool {
        (&self.namespace, &self.name) == (&other.namespace, &other.name)
    }

    /// How it is named in messages: `OCIRepository flux-system/flux-system (oci://…)`.
    pub fn describe(&self) -> String {
        let file = self.file.as_deref().map(|f| format!(" in {f}")).unwrap_or_default();
        format!(
            "the {} sync{file} ({} {} from {})",
            self.kind_name(),
            self.source_kind,
            self.source_key(),
            crate::git::redact_url(&self.url)
        )
    }

    fn kind_name(&self) -> &'static str {
        match self.kind {
            RootKind::FluxInstanceHelmRelease => "flux-instance HelmRelease",
            _ => "FluxInstance",
        }
    }
}

/// An object with the file it came from.
pub type Sourced<'a> = (&'a Value, Option<&'a str>);

/// The syncs declared among `objects` (one render, or the repository's files):
/// `FluxInstance` objects, and HelmReleases of the `flux-instance` chart, whose values may come
/// from ConfigMaps among the same objects. `chart_sources` are OCIRepositories known elsewhere.
pub fn instance_syncs(objects: &[Sourced], chart_sources: &[&Value]) -> Vec<InstanceSync> {
    let mut syncs = Vec::new();
    for (object, file) in objects {
        let kind = object["kind"].as_str().unwrap_or("");
        let group = crate::flux::split_api_version(object["apiVersion"].as_str().unwrap_or("")).0;
        if kind == "FluxInstance" {
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or(FLUX_NAMESPACE);
            let patches = &object["spec"]["kustomize"]["patches"];
            syncs.extend(sync_of(&object["spec"]["sync"], patches, namespace, RootKind::FluxInstance, *file));
        } else if kind == "HelmRelease" && group == "helm.toolkit.fluxcd.io" {
            let others = objects.iter().map(|(o, _)| *o).chain(chart_sources.iter().copied());
            if !renders_flux_instance(object, others) {
                continue;
            }
            let namespace = release_namespace(object);
            let values = helm_values(object, objects.iter().map(|(o, _)| *o), &namespace);
            let sync = &values["instance"]["sync"];
            // The chart writes `spec.sync` only when a URL is set.
            if sync["url"].as_str().is_some_and(|u| !u.is_empty()) {
                let patches = &values["instance"]["kustomize"]["patches"];
                syncs.extend(sync_of(sync, patches, &namespace, RootKind::FluxInstanceHelmRelease, *file));
            }
        }
    }
    syncs
}

/// The sync of a FluxInstance spec; the operator names its objects after the instance's
/// namespace unless `sync.name` is set.
fn sync_of(
    sync: &Value,
    patches: &Value,
    namespace: &str,
    kind: RootKind,
    file: Option<&str>,
) -> Option<InstanceSync> {
    let sync = sync.as_object()?;
    let patches = sync_patches(patches);
    let text = |key: &str| sync.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
    let namespace = if namespace.is_empty() { FLUX_NAMESPACE } else { namespace };
    Some(InstanceSync {
        kind,
        namespace: namespace.to_string(),
        name: text("name").unwrap_or(namespace).to_string(),
        source_kind: text("kind").unwrap_or("GitRepository").to_string(),
        url: text("url").unwrap_or("").to_string(),
        reference: text("ref").unwrap_or("").to_string(),
        patches,
        path: text("path").unwrap_or(".").to_string(),
        file: file.map(str::to_string),
    })
}

/// The kinds the operator generates for a sync.
const SYNC_KINDS: &[&str] = &["Kustomization", "GitRepository", "OCIRepository", "Bucket"];

/// The instance patches that may reach its sync's source or Kustomization (canonical JSON;
/// empty when none): a target whose kind (a regular expression, as kustomize reads it) may name
/// one of their kinds, or no target and a patch naming one. Patches for its controllers alone
/// change neither what the sync reads nor how.
fn sync_patches(patches: &Value) -> String {
    let may_name_a_sync_kind = |kind: &str| match regex::Regex::new(&format!("^(?:{kind})$")) {
        Ok(pattern) => SYNC_KINDS.iter().any(|k| pattern.is_match(k)),
        // A pattern fluxplan cannot read: taken to reach it.
        Err(_) => true,
    };
    let reaches_the_sync = |patch: &Value| match patch["target"].as_object() {
        // An empty kind selects every kind, as kustomize reads a target.
        Some(target) => target
            .get("kind")
            .and_then(Value::as_str)
            .filter(|kind| !kind.trim().is_empty())
            .is_none_or(may_name_a_sync_kind),
        None => {
            let body = patch["patch"].as_str().and_then(|text| crate::yaml::parse_documents(text).ok());
            // Unreadable: taken to reach it.
            body.is_none_or(|docs| docs.iter().any(|d| d["kind"].as_str().is_none_or(may_name_a_sync_kind)))
        }
    };
    let relevant: Vec<&Value> =
        patches.as_array().into_iter().flatten().filter(|p| reaches_the_sync(p)).collect();
    if relevant.is_empty() {
        String::new()
    } else {
        crate::yaml::canonical_json(&serde_json::json!(relevant))
    }
}

/// Helm installs a release into `spec.targetNamespace`, else the HelmRelease's namespace.
fn release_namespace(release: &Value) -> String {
    let spec = &release["spec"];
    spec["targetNamespace"]
        .as_str()
        .or_else(|| release["metadata"]["namespace"].as_str())
        .filter(|n| !n.is_empty())
        .unwrap_or(FLUX_NAMESPACE)
        .to_string()
}

/// True when a HelmRelease installs the `flux-instance` chart: by name from a chart repository,
/// or through `chartRef` to an OCIRepository whose URL ends in `/flux-instance`.
fn renders_flux_instance<'a>(release: &Value, mut others: impl Iterator<Item = &'a Value>) -> bool {
    let spec = &release["spec"];
    if spec["chart"]["spec"]["chart"].as_str().is_some_and(names_the_chart) {
        return true;
    }
    let chart_ref = &spec["chartRef"];
    if chart_ref["kind"] != "OCIRepository" {
        return false;
    }
    let Some(name) = chart_ref["name"].as_str() else { return false };
    let namespace = chart_ref["namespace"].as_str().or_else(|| release["metadata"]["namespace"].as_str());
    others.any(|o| {
        o["kind"] == "OCIRepository"
            && o["metadata"]["name"] == name
            && match (namespace, o["metadata"]["namespace"].as_str()) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
            && o["spec"]["url"].as_str().is_some_and(names_the_chart)
    })
}

/// True when `object`, read from a file, may declare a sync once rendered: a FluxInstance, or a
/// HelmRelease that installs (or, through a variable or an OCIRepository not among
/// `chart_sources`, may install) the `flux-instance` chart.
pub fn may_declare_sync(object: &Value, chart_sources: &[Value]) -> bool {
    let unknown = |text: &str| text.contains('$');
    match object["kind"].as_str() {
        Some("FluxInstance") => true,
        Some("HelmRelease") => {
            let spec = &object["spec"];
            if let Some(chart) = spec["chart"]["spec"]["chart"].as_str() {
                return names_the_chart(chart) || unknown(chart);
            }
            if spec["chartRef"]["kind"] != "OCIRepository" {
                return false;
            }
            let Some(name) = spec["chartRef"]["name"].as_str() else { return false };
            let named: Vec<&Value> = chart_sources.iter().filter(|o| o["metadata"]["name"] == name).collect();
            unknown(name)
                || named.is_empty()
                || named
                    .iter()
                    .any(|o| o["spec"]["url"].as_str().is_none_or(|u| names_the_chart(u) || unknown(u)))
        }
        _ => false,
    }
}

/// `flux-instance`, or a URL or path ending in `/flux-instance`.
fn names_the_chart(reference: &str) -> bool {
    let reference = reference.trim_end_matches('/');
    reference == FLUX_INSTANCE_CHART || reference.ends_with(&format!("/{FLUX_INSTANCE_CHART}"))
}

/// The values helm-controller gives the chart: `valuesFrom` ConfigMaps in order (later wins),
/// then the inline `values` on top. Secrets are never read; a `targetPath` entry is skipped.
fn helm_values<'a>(
    release: &Value,
    objects: impl Iterator<Item = &'a Value> + Clone,
    namespace: &str,
) -> Value {
    let mut merged = json!({});
    for from in release["spec"]["valuesFrom"].as_array().into_iter().flatten() {
        if from["kind"] != "ConfigMap" || from.get("targetPath").is_some() {
            continue;
        }
        let Some(name) = from["name"].as_str() else { continue };
        let key = from["valuesKey"].as_str().unwrap_or(DEFAULT_VALUES_KEY);
        let config_map = objects.clone().find(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"].as_str().is_none_or(|n| n == namespace)
        });
        let text = config_map.and_then(|c| c["data"][key].as_str());
        if let Some(values) =
            text.and_then(|t| crate::yaml::parse_documents(t).ok()).and_then(|mut d| d.pop())
        {
            deep_merge(&mut merged, &values);
        }
    }
    deep_merge(&mut merged, &release["spec"]["values"]);
    merged
}

/// Merges `overlay` into `base` as Helm merges values: maps key by key, anything else replaced.
fn deep_merge(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        deep_merge(existing, value)
                    }
                    _ => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, overlay) if !overlay.is_null() => *base = overlay.clone(),
        _ => {}
    }
}

/// The same sync found twice (in a file and in a render, or by two renders) counts once; a sync
/// found in a render wins over its file read raw (the render knows the namespace).
pub fn dedup_syncs(rendered: Vec<InstanceSync>, on_disk: Vec<InstanceSync>) -> Vec<InstanceSync> {
    let rendered_files: std::collections::BTreeSet<Option<String>> =
        rendered.iter().map(|s| s.file.clone()).filter(Option::is_some).collect();
    let mut all: Vec<InstanceSync> = rendered
        .into_iter()
        .chain(on_disk.into_iter().filter(|s| !rendered_files.contains(&s.file)))
        .collect();
    all.sort();
    let mut seen = std::collections::BTreeSet::new();
    all.retain(|s| seen.insert((s.namespace.clone(), s.name.clone(), normalized_path(&s.path))));
    all
}

/// A `flux bootstrap` root of the plan's base, carried into the head render when head no longer
/// declares it: the root object stays in the cluster with its last applied spec and goes on
/// reconciling the new revision (a removed or renamed cluster directory fails it; nothing is
/// pruned).
#[derive(Debug, Clone)]
pub struct CarriedRoot {
    /// The cluster's name at base.
    pub name: String,
    pub spec: Kustomization,
    pub file: Option<String>,
}

impl CarriedRoot {
    /// The bootstrap roots of a render, as the cluster holds them.
    pub fn of(render: &super::Render) -> Vec<CarriedRoot> {
        render
            .clusters
            .iter()
            .filter(|c| c.found_by == RootKind::Bootstrap)
            .filter_map(|c| {
                let spec = c.root_kustomization()?.spec.clone()?;
                Some(CarriedRoot { name: c.name.clone(), spec, file: c.root_file.clone() })
            })
            .collect()
    }
}

/// Adds the carried roots whose cluster the render does not have, with their base names.
pub fn carry(roots: &mut Vec<Root>, names: &mut Vec<String>, carried: &[CarriedRoot]) {
    for root in carried {
        let present = names.contains(&root.name)
            || roots.iter().any(|r| {
                r.spec.reference() == root.spec.reference()
                    && normalized_path(&r.spec.path) == normalized_path(&root.spec.path)
            });
        if !present {
            roots.push(Root {
                spec: root.spec.clone(),
                file: root.file.clone(),
                kind: RootKind::Bootstrap,
                declared_name: None,
                instance_patches: String::new(),
            });
            names.push(root.name.clone());
        }
    }
}

/// A root Kustomization with how it was found.
#[derive(Debug, Clone)]
pub struct Root {
    pub spec: Kustomization,
    pub file: Option<String>,
    pub kind: RootKind,
    /// The name declared for it in `.fluxplan.yaml`.
    pub declared_name: Option<String>,
    /// The `kustomize.patches` of the FluxInstance that creates it (canonical JSON; empty when
    /// none): the operator applies them to the Kustomization it generates.
    pub instance_patches: String,
}

/// A Kustomization file of the repository that could be a root.
pub struct Candidate<'a> {
    pub spec: &'a Kustomization,
    pub file: &'a str,
    /// Its render contains its own definition (`flux bootstrap`).
    pub self_producing: bool,
    /// Another Kustomization renders it or includes its file: never a root.
    pub produced_by_other: bool,
}

/// Picks the roots: declared ones alone when given; else bootstrap roots and operator syncs;
/// else the fallback.
pub fn choose(
    declared: Option<&[DeclaredRoot]>,
    candidates: &[Candidate],
    syncs: &[InstanceSync],
) -> Vec<Root> {
    if let Some(declared) = declared.filter(|d| !d.is_empty()) {
        return declared.iter().filter_map(|d| declared_root(d, candidates, syncs)).collect();
    }
    let mut roots: Vec<Root> = candidates
        .iter()
        .filter(|c| c.self_producing)
        .map(|c| Root {
            spec: c.spec.clone(),
            file: Some(c.file.to_string()),
            kind: RootKind::Bootstrap,
            declared_name: None,
            instance_patches: String::new(),
        })
        .collect();
    for sync in syncs {
        // A bootstrap root the instance took over is the same root.
        let same = |r: &Root| {
            r.spec.reference() == ref_of(sync) && normalized_path(&r.spec.path) == normalized_path(&sync.path)
        };
        if roots.iter().any(same) {
            continue;
        }
        if let Some(spec) = sync.root_spec() {
            roots.push(Root {
                spec,
                file: sync.file.clone(),
                kind: sync.kind,
                declared_name: None,
                instance_patches: sync.patches.clone(),
            });
        }
    }
    if roots.is_empty() {
        roots = candidates
            .iter()
            .filter(|c| !c.produced_by_other)
            .map(|c| Root {
                spec: c.spec.clone(),
                file: Some(c.file.to_string()),
                kind: RootKind::Fallback,
                declared_name: None,
                instance_patches: String::new(),
            })
            .collect();
    }
    roots
}

fn ref_of(sync: &InstanceSync) -> KustomizationRef {
    KustomizationRef { namespace: sync.namespace.clone(), name: sync.name.clone() }
}

/// A declared root: the bootstrap Kustomization syncing that path when there is one (its own
/// patches apply to itself), else the one `flux bootstrap` or the operator would create, syncing
/// the declared source, else the source of the operator's sync of that path.
fn declared_root(declared: &DeclaredRoot, candidates: &[Candidate], syncs: &[InstanceSync]) -> Option<Root> {
    let path = normalized_path(&declared.path);
    let existing = candidates.iter().find(|c| c.self_producing && normalized_path(&c.spec.path) == path);
    let (spec, file, instance_patches) = match existing {
        Some(c) if declared.source.is_none() => (c.spec.clone(), Some(c.file.to_string()), String::new()),
        _ => {
            let operator = syncs.iter().find(|s| normalized_path(&s.path) == path);
            let (namespace, name, source_kind) = match (&declared.source, operator) {
                (Some(source), _) => (source.namespace.clone(), source.name.clone(), source.kind.clone()),
                (None, Some(sync)) => (sync.namespace.clone(), sync.name.clone(), sync.source_kind.clone()),
                (None, None) => (FLUX_NAMESPACE.into(), FLUX_NAMESPACE.into(), "GitRepository".into()),
            };
            let sync = InstanceSync {
                kind: RootKind::Declared,
                namespace,
                name,
                source_kind,
                url: String::new(),
                reference: String::new(),
                patches: String::new(),
                path: declared.path.clone(),
                file: None,
            };
            // The operator's own Kustomization carries its instance's patches.
            let patches = match (&declared.source, operator) {
                (None, Some(sync)) => sync.patches.clone(),
                _ => String::new(),
            };
            (sync.root_spec()?, operator.and_then(|s| s.file.clone()), patches)
        }
    };
    Some(Root {
        spec,
        file,
        kind: RootKind::Declared,
        declared_name: declared.name.clone(),
        instance_patches,
    })
}

/// `./clusters/prod/` → `clusters/prod`; `..` stops at the repository root.
pub fn normalized_path(path: &str) -> String {
    paths::relative(Path::new("/"), &paths::secure_join(Path::new("/"), path))
}

/// The cluster name of each root, in order. Declared roots take their declared name; bootstrap
/// and operator roots their path (`clusters/production`), as cluster files and snapshots key
/// them; fallback roots the directory their file sits in (`clusters/staging`). A name two roots
/// share is told apart by the Kustomization in parentheses.
pub fn cluster_names(roots: &[Root]) -> Vec<String> {
    let base: Vec<String> = roots
        .iter()
        .map(|r| match (&r.declared_name, r.kind, &r.file) {
            (Some(name), _, _) => name.clone(),
            (None, RootKind::Fallback, Some(file)) => match Path::new(file).parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir.to_string_lossy().into_owned(),
                _ => ".".to_string(),
            },
            _ => normalized_path(&r.spec.path),
        })
        .collect();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for name in &base {
        *count.entry(name.as_str()).or_default() += 1;
    }
    let mut names: Vec<String> = Vec::with_capacity(roots.len());
    for (root, name) in roots.iter().zip(&base) {
        let shared = count[name.as_str()] > 1;
        let mut unique = if shared && (root.kind == RootKind::Fallback || names.contains(name)) {
            format!("{name} ({})", root.spec.reference())
        } else {
            name.clone()
        };
        // The same Kustomization twice in one directory: its file tells them apart.
        if names.contains(&unique) {
            unique = format!("{unique} [{}]", root.file.as_deref().unwrap_or("?"));
        }
        let mut n = 2;
        let stem = unique.clone();
        while names.contains(&unique) {
            unique = format!("{stem} #{n}");
            n += 1;
        }
        names.push(unique);
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(yaml: &str) -> Vec<Value> {
        crate::yaml::parse_documents(yaml).unwrap()
    }

    fn syncs_of(yaml: &str) -> Vec<InstanceSync> {
        let docs = docs(yaml);
        let sourced: Vec<Sourced> = docs.iter().map(|d| (d, Some("f.yaml"))).collect();
        instance_syncs(&sourced, &[])
    }

    const OCI: &str = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: flux-instance\nspec:\n  url: oci://ghcr.io/controlplaneio-fluxcd/charts/flux-instance\n---\n";

    #[test]
    fn may_declare_a_sync_only_when_a_render_could() {
        let sources = docs(OCI);
        let chart = |chart: &str| {
            docs(&format!("kind: HelmRelease\nspec:\n  chart:\n    spec:\n      chart: {chart}\n")).remove(0)
        };
        let chart_ref = |name: &str| {
            docs(&format!(
                "kind: HelmRelease\nspec:\n  chartRef:\n    kind: OCIRepository\n    name: {name}\n"
            ))
            .remove(0)
        };
        let app_source = docs("kind: OCIRepository\nmetadata:\n  name: radarr\nspec:\n  url: oci://ghcr.io/bjw-s/app-template\n");
        let all: Vec<Value> = sources.iter().chain(&app_source).cloned().collect();
        assert!(may_declare_sync(&docs("kind: FluxInstance\n")[0], &[]));
        assert!(may_declare_sync(&chart("flux-instance"), &[]));
        assert!(may_declare_sync(&chart("${CHART}"), &[]));
        assert!(!may_declare_sync(&chart("podinfo"), &[]));
        assert!(may_declare_sync(&chart_ref("flux-instance"), &all));
        // An OCIRepository the files do not hold may be the chart's: only a render tells.
        assert!(may_declare_sync(&chart_ref("elsewhere"), &all));
        assert!(!may_declare_sync(&chart_ref("radarr"), &all));
        assert!(!may_declare_sync(&docs("kind: ConfigMap\n")[0], &all));
    }
    #[test]
    fn helm_release_of_the_flux_instance_chart_declares_its_sync() {
        let syncs = syncs_of(&format!(
            "{OCI}apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: flux-instance\n  namespace: flux-system\nspec:\n  chartRef:\n    kind: OCIRepository\n    name: flux-instance\n  values:\n    instance:\n      sync:\n        kind: GitRepository\n        url: https://github.com/acme/home\n        ref: refs/heads/main\n        path: kubernetes/flux/cluster\n"
        ));
        assert_eq!(syncs.len(), 1);
        let sync = &syncs[0];
        assert_eq!(sync.kind, RootKind::FluxInstanceHelmRelease);
        // The operator names the source and Kustomization after the namespace.
        assert_eq!((sync.namespace.as_str(), sync.name.as_str()), ("flux-system", "flux-system"));
        assert_eq!(sync.path, "kubernetes/flux/cluster");
        let spec = sync.root_spec().unwrap();
        assert_eq!(spec.source_ref.name, "flux-system");
        assert_eq!(spec.path, "kubernetes/flux/cluster");
    }

    #[test]
    fn values_from_a_config_map_are_merged_under_inline_values() {
        let syncs = syncs_of(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flux-values-abc\n  namespace: flux\ndata:\n  values.yaml: |\n    instance:\n      sync:\n        url: https://git.example/fleet\n        path: clusters/old\n        name: fleet\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: flux\n  namespace: flux\nspec:\n  chart:\n    spec:\n      chart: flux-instance\n  valuesFrom:\n  - kind: ConfigMap\n    name: flux-values-abc\n  values:\n    instance:\n      sync:\n        path: clusters/new\n",
        );
        assert_eq!(syncs.len(), 1);
        assert_eq!((syncs[0].namespace.as_str(), syncs[0].name.as_str()), ("flux", "fleet"));
        assert_eq!(syncs[0].path, "clusters/new");
        assert_eq!(syncs[0].url, "https://git.example/fleet");
    }

    #[test]
    fn other_charts_and_syncless_instances_declare_nothing() {
        // Another chart, a chartRef to an OCIRepository of another chart, and no sync URL.
        assert!(syncs_of("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: x\nspec:\n  chart:\n    spec:\n      chart: my-flux-instance\n  values:\n    instance:\n      sync:\n        url: u\n        path: p\n").is_empty());
        assert!(syncs_of("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: x\nspec:\n  chart:\n    spec:\n      chart: podinfo\n  values:\n    instance:\n      sync:\n        url: u\n        path: p\n").is_empty());
        assert!(syncs_of("apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: flux-instance\nspec:\n  url: oci://ghcr.io/acme/not-flux-instance-really\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: x\nspec:\n  chartRef:\n    kind: OCIRepository\n    name: flux-instance\n  values:\n    instance:\n      sync:\n        url: u\n        path: p\n").is_empty());
        assert!(syncs_of(&format!("{OCI}apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: x\nspec:\n  chartRef:\n    kind: OCIRepository\n    name: flux-instance\n")).is_empty());
        // Hostile shapes never panic.
        assert!(syncs_of("kind: FluxInstance\nspec:\n  sync: [1, 2]\n").is_empty());
        assert!(syncs_of("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n  chart: 5\n  valuesFrom: {a: b}\n").is_empty());
    }

    #[test]
    fn flux_instance_objects_declare_their_sync() {
        let syncs = syncs_of("apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\nspec:\n  sync:\n    kind: GitRepository\n    url: https://github.com/acme/fleet\n    ref: refs/heads/main\n    path: clusters/edge\n    name: fleet\n");
        assert_eq!(syncs[0].kind, RootKind::FluxInstance);
        assert_eq!(syncs[0].source_key(), "flux-system/fleet");
    }

    fn root(kind: RootKind, file: &str, path: &str, name: &str) -> Root {
        let spec = Kustomization::from_value(
            &json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                    "metadata": {"name": name, "namespace": "flux-system"},
                    "spec": {"path": path, "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}),
            "flux-system",
        )
        .unwrap();
        Root { spec, file: Some(file.into()), kind, declared_name: None, instance_patches: String::new() }
    }

    #[test]
    fn fallback_roots_are_named_by_their_directory_and_told_apart_only_when_shared() {
        let names = cluster_names(&[
            root(RootKind::Fallback, "clusters/staging/apps.yaml", "./apps/staging", "apps"),
            root(RootKind::Fallback, "clusters/production/apps.yaml", "./apps/production", "apps"),
            root(RootKind::Fallback, "clusters/dev/apps.yaml", "./apps/dev", "apps"),
            root(RootKind::Fallback, "clusters/dev/infra.yaml", "./infra/dev", "infra"),
            root(RootKind::Fallback, "top.yaml", "./top", "top"),
        ]);
        assert_eq!(
            names,
            vec![
                "clusters/staging",
                "clusters/production",
                "clusters/dev (flux-system/apps)",
                "clusters/dev (flux-system/infra)",
                "."
            ]
        );
    }

    #[test]
    fn bootstrap_roots_keep_their_path_as_name() {
        let names = cluster_names(&[
            root(
                RootKind::Bootstrap,
                "clusters/prod/flux-system/gotk-sync.yaml",
                "./clusters/prod",
                "flux-system",
            ),
            root(RootKind::FluxInstance, "x.yaml", "clusters/prod/", "other"),
        ]);
        assert_eq!(names, vec!["clusters/prod", "clusters/prod (flux-system/other)"]);
    }

    #[test]
    fn declared_roots_replace_detection_and_reuse_a_bootstrap_root_of_the_same_path() {
        let bootstrap = root(
            RootKind::Bootstrap,
            "clusters/prod/flux-system/gotk-sync.yaml",
            "./clusters/prod",
            "flux-system",
        );
        let candidates = [Candidate {
            spec: &bootstrap.spec,
            file: "clusters/prod/flux-system/gotk-sync.yaml",
            self_producing: true,
            produced_by_other: false,
        }];
        let declared = [
            DeclaredRoot { path: "clusters/prod".into(), name: Some("production".into()), source: None },
            DeclaredRoot { path: "clusters/staging/".into(), name: None, source: None },
        ];
        let roots = choose(Some(&declared), &candidates, &[]);
        assert_eq!(roots.len(), 2);
        assert!(roots.iter().all(|r| r.kind == RootKind::Declared));
        assert_eq!(roots[0].file.as_deref(), Some("clusters/prod/flux-system/gotk-sync.yaml"));
        assert_eq!(roots[1].spec.path, "clusters/staging/");
        assert_eq!(cluster_names(&roots), vec!["production", "clusters/staging"]);
        assert!(DeclaredRoot::validate(&declared).is_ok());
        assert!(
            DeclaredRoot::validate(&[DeclaredRoot { path: " ".into(), name: None, source: None }]).is_err()
        );
        let twice = DeclaredRoot { path: "a".into(), name: Some("x".into()), source: None };
        assert!(DeclaredRoot::validate(&[twice.clone(), twice]).is_err());
    }

    #[test]
    fn a_declared_root_syncs_its_declared_source_else_the_operators() {
        let sync = syncs_of("kind: FluxInstance\nmetadata:\n  namespace: flux-system\nspec:\n  sync:\n    kind: OCIRepository\n    url: oci://ghcr.io/acme/fleet\n    path: clusters/eu\n");
        let declared =
            |path: &str, source: Option<SourceName>| DeclaredRoot { path: path.into(), name: None, source };
        let source_of = |root: &Root| root.spec.source_ref.to_string();
        let roots = choose(Some(&[declared("clusters/eu", None), declared("clusters/us", None)]), &[], &sync);
        assert_eq!(source_of(&roots[0]), "OCIRepository/flux-system/flux-system");
        assert_eq!(source_of(&roots[1]), "GitRepository/flux-system/flux-system");
        let bucket = SourceName { kind: "Bucket".into(), name: "fleet".into(), namespace: "ops".into() };
        let roots = choose(Some(&[declared("clusters/eu", Some(bucket))]), &[], &sync);
        assert_eq!(source_of(&roots[0]), "Bucket/ops/fleet");
        assert_eq!(roots[0].spec.reference().to_string(), "ops/fleet");
    }

    #[test]
    fn carried_roots_fill_in_only_clusters_head_lacks() {
        let prod = root(
            RootKind::Bootstrap,
            "clusters/prod/flux-system/gotk-sync.yaml",
            "./clusters/prod",
            "flux-system",
        );
        let gone = root(
            RootKind::Bootstrap,
            "clusters/old/flux-system/gotk-sync.yaml",
            "./clusters/old",
            "flux-system",
        );
        let carried: Vec<CarriedRoot> = [&prod, &gone]
            .iter()
            .map(|r| CarriedRoot {
                name: normalized_path(&r.spec.path),
                spec: r.spec.clone(),
                file: r.file.clone(),
            })
            .collect();
        let mut roots = vec![prod.clone()];
        let mut names = cluster_names(&roots);
        carry(&mut roots, &mut names, &carried);
        assert_eq!(names, vec!["clusters/prod", "clusters/old"]);
        assert_eq!(roots[1].spec.path, "./clusters/old");
    }

    #[test]
    fn fallback_only_when_nothing_declares_a_sync_and_never_for_produced_files() {
        let a = root(RootKind::Fallback, "clusters/dev/apps.yaml", "./apps", "apps");
        let b = root(RootKind::Fallback, "apps/b/ks.yaml", "./b", "b");
        let candidates = [
            Candidate {
                spec: &a.spec,
                file: "clusters/dev/apps.yaml",
                self_producing: false,
                produced_by_other: false,
            },
            Candidate {
                spec: &b.spec,
                file: "apps/b/ks.yaml",
                self_producing: false,
                produced_by_other: true,
            },
        ];
        let fallback = choose(None, &candidates, &[]);
        assert_eq!(fallback.len(), 1);
        assert_eq!(fallback[0].kind, RootKind::Fallback);
        let sync = syncs_of("kind: FluxInstance\nmetadata:\n  namespace: flux-system\nspec:\n  sync:\n    url: u\n    path: clusters/dev\n");
        let with_sync = choose(None, &candidates, &sync);
        assert_eq!(with_sync.len(), 1);
        assert_eq!(with_sync[0].kind, RootKind::FluxInstance);
    }
}
