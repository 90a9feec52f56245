//! The walk: find the roots of a repository, render each, and follow the Kustomizations that
//! renders produce (using their rendered spec) until every reachable one is rendered.

use super::build::Builder;
use super::cache::RenderCache;
use super::kustomize::Kustomize;
use super::postbuild::{self, Variables};
use super::source::ExportedSource;
use super::{
    Cluster, ErrorReport, RealName, Render, RenderError, RenderOptions, RenderStats, RenderedKustomization,
    RenderedObject, Status, Unreachable,
};
use crate::flux::scope::{Scope, ScopeMap};
use crate::flux::{self, is_flux_kustomization, Kustomization, KustomizationRef, ObjectId};
use crate::{git, paths, yaml};
use anyhow::Result;
use rayon::prelude::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The GitRepository that denotes the repository being rendered in bootstrap layouts.
const BOOTSTRAP_SOURCE: (&str, &str) = ("flux-system", "flux-system");
/// How often a root that renders its own definition is re-rendered with that definition.
const ROOT_FIXPOINT_ROUNDS: usize = 3;

/// Renders repositories; keeps the kustomize runner and cache between renders (the base and
/// head of a plan share them).
pub struct Renderer {
    builder: Builder,
}

impl Renderer {
    pub fn new(kustomize_timeout: Duration, cache_dir: Option<PathBuf>) -> Result<Self> {
        let kustomize = Kustomize::detect(kustomize_timeout)?;
        Ok(Renderer { builder: Builder::new(kustomize, RenderCache::new(cache_dir)) })
    }

    /// A renderer using the kustomize at `program`.
    pub fn with_kustomize(program: &str, kustomize_timeout: Duration) -> Result<Self> {
        let kustomize = Kustomize::at(program, kustomize_timeout)?;
        Ok(Renderer { builder: Builder::new(kustomize, RenderCache::new(None)) })
    }

    /// A renderer using `kustomize` (no on-disk cache).
    pub fn from_kustomize(kustomize: Kustomize) -> Self {
        Renderer { builder: Builder::new(kustomize, RenderCache::new(None)) }
    }

    pub fn kustomize_version(&self) -> &str {
        &self.builder.kustomize.version
    }
}

/// Renders with a fresh renderer (no on-disk cache).
pub fn render(opts: &RenderOptions) -> Result<Render> {
    Renderer::new(opts.kustomize_timeout, None)?.render(opts)
}

/// A Kustomization manifest found in the repository's files.
struct DiskKustomization {
    file: String,
    name: String,
    namespace: Option<String>,
    spec: Result<Kustomization, String>,
}

/// A GitRepository manifest found in the repository's files.
struct DiskGitRepository {
    key: String,
    url: String,
    ignore: Option<String>,
}

/// One Kustomization waiting to be rendered.
#[derive(Clone)]
struct Node {
    cluster: usize,
    cluster_name: String,
    /// Inline `substitute` variables whose values the parent substituted from Secrets.
    inherited_secrets: BTreeSet<String>,
    /// The path as shown (masked) when it differs from the real one.
    shown_path: Option<String>,
    spec: Kustomization,
    parent: Option<KustomizationRef>,
    file: Option<String>,
    ancestors: Vec<KustomizationRef>,
    is_root: bool,
}

/// Where each source lives locally.
struct Sources<'a> {
    this_repo: &'a ExportedSource,
    this_repo_keys: BTreeMap<String, Option<String>>,
    mapped: BTreeMap<String, ExportedSource>,
}

impl Sources<'_> {
    /// The local tree of a source, or `None` when it is external.
    fn tree(&self, source: &flux::SourceRef) -> Result<Option<PathBuf>, RenderError> {
        let key = format!("{}/{}", source.namespace, source.name);
        let tree = if let Some(mapped) = self.mapped.get(&key) {
            mapped.tree(None)
        } else if source.kind != "GitRepository" {
            return Ok(None);
        } else if let Some(ignore) = self.this_repo_keys.get(&key) {
            self.this_repo.tree(ignore.as_deref())
        } else {
            return Ok(None);
        };
        tree.map(Some).map_err(|e| RenderError::InvalidSource(format!("cannot prepare source {source}: {e}")))
    }
}

impl Renderer {
    /// Renders every Kustomization reachable from the repository's roots.
    pub fn render(&self, opts: &RenderOptions) -> Result<Render> {
        let started = std::time::Instant::now();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(opts.jobs.max(1)).build()?;
        crate::sandbox::announce();
        let this_repo = ExportedSource::export(&opts.repo, opts.rev.as_deref(), opts.limits)?;
        let mut warnings = this_repo.warnings.clone();
        let mut source_limits = this_repo.oversized_messages("")?;
        let mut mapped = BTreeMap::new();
        for (key, dir) in &opts.sources {
            let source = ExportedSource::export(dir, None, opts.limits)
                .map_err(|e| e.context(format!("cannot read source {key} from {}", dir.display())))?;
            warnings.extend(source.warnings.iter().map(|w| format!("source {key}: {w}")));
            source_limits.extend(source.oversized_messages(&format!("source {key}: "))?);
            mapped.insert(key.clone(), source);
        }
        tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "source exported");
        let discovery_tree = this_repo.tree(None)?;
        let (disk_kustomizations, git_repositories, flux_instances) = discover(&discovery_tree);

        tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "manifests discovered");
        let remotes: BTreeSet<String> =
            git::remote_urls(&opts.repo).iter().map(|u| git::normalize_url(u)).collect();
        let bootstrap_key = format!("{}/{}", BOOTSTRAP_SOURCE.0, BOOTSTRAP_SOURCE.1);
        let mut this_repo_keys: BTreeMap<String, Option<String>> = BTreeMap::new();
        this_repo_keys.insert(bootstrap_key.clone(), None);
        for repo in &git_repositories {
            if repo.key == bootstrap_key || remotes.contains(&git::normalize_url(&repo.url)) {
                this_repo_keys.insert(repo.key.clone(), repo.ignore.clone());
            }
        }
        let sources = Sources { this_repo: &this_repo, this_repo_keys, mapped };

        let progress = Progress::new(opts.progress);
        let ctx = Context {
            renderer: self,
            opts,
            sources: &sources,
            progress: &progress,
            memo: Default::default(),
        };

        // Render every local candidate once with its spec as written, to learn who produces whom.
        let candidates: Vec<(usize, &Kustomization)> = disk_kustomizations
            .iter()
            .enumerate()
            .filter_map(|(i, d)| Some((i, d.spec.as_ref().ok()?)))
            .filter(|(_, spec)| matches!(sources.tree(&spec.source_ref), Ok(Some(_))))
            .collect();
        let produced: Vec<(usize, Vec<(String, String)>)> = pool.install(|| {
            candidates
                .par_iter()
                .map(|(i, spec)| {
                    let made = ctx
                        .render_objects(spec, "", &BTreeSet::new())
                        .map(|(objects, _)| objects)
                        .unwrap_or_default();
                    let children = made
                        .iter()
                        .filter(|o| is_flux_kustomization(&o.object))
                        .filter_map(|o| {
                            Some((o.origin.clone()?, o.object["metadata"]["name"].as_str()?.to_string()))
                        })
                        .collect();
                    (*i, children)
                })
                .collect()
        });
        // A produced Kustomization is the manifest of its origin file with its name (or the only
        // one in that file, when a prefix or suffix renamed it).
        let matches = |file: &str, name: &str| -> Option<usize> {
            let same_file: Vec<usize> =
                (0..disk_kustomizations.len()).filter(|&j| disk_kustomizations[j].file == file).collect();
            let exact = same_file.iter().copied().find(|&j| disk_kustomizations[j].name == name);
            exact.or_else(|| (same_file.len() == 1).then(|| same_file[0]))
        };
        let mut producers: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for (producer, children) in &produced {
            for (file, name) in children {
                if let Some(child) = matches(file, name) {
                    producers.entry(child).or_default().insert(*producer);
                }
            }
        }
        let self_producing: Vec<usize> = candidates
            .iter()
            .map(|(i, _)| *i)
            .filter(|i| producers.get(i).is_some_and(|p| p.contains(i)))
            .collect();
        let mut root_specs: Vec<(Kustomization, Option<String>)> = self_producing
            .iter()
            .map(|&i| {
                (
                    disk_kustomizations[i].spec.clone().expect("candidate"),
                    Some(disk_kustomizations[i].file.clone()),
                )
            })
            .collect();
        root_specs.extend(flux_instances);
        if root_specs.is_empty() {
            // No bootstrap or operator root in the repository: every candidate nothing else
            // produces is a root.
            root_specs = candidates
                .iter()
                .filter(|(i, _)| producers.get(i).is_none_or(|p| p.iter().all(|q| q == i)))
                .map(|(i, spec)| ((*spec).clone(), Some(disk_kustomizations[*i].file.clone())))
                .collect();
        }

        tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "roots found");
        let mut clusters: Vec<Cluster> = Vec::new();
        let mut queue: Vec<Node> = Vec::new();
        for (spec, file) in root_specs {
            let mut name = paths::relative(Path::new("/"), &paths::secure_join(Path::new("/"), &spec.path));
            if clusters.iter().any(|c| c.name == name) {
                name = format!("{name} ({})", spec.reference());
            }
            queue.push(Node {
                cluster: clusters.len(),
                cluster_name: name.clone(),
                inherited_secrets: BTreeSet::new(),
                shown_path: None,
                parent: None,
                file,
                ancestors: Vec::new(),
                is_root: true,
                spec: spec.clone(),
            });
            clusters.push(Cluster { name, root: spec.reference(), kustomizations: Vec::new() });
        }

        let mut reached: BTreeSet<(String, String)> = BTreeSet::new();
        while !queue.is_empty() {
            let results: Vec<(Node, RenderedKustomization, Vec<Node>)> = pool.install(|| {
                std::mem::take(&mut queue)
                    .into_par_iter()
                    .map(|node| {
                        let (rendered, children) = ctx.render_node(&node);
                        (node, rendered, children)
                    })
                    .collect()
            });
            for (node, mut rendered, children) in results {
                let cluster = &mut clusters[node.cluster];
                if let Some(other) =
                    cluster.kustomizations.iter_mut().find(|k| k.reference() == rendered.reference())
                {
                    other.warnings.push(format!(
                        "also produced by {}: two definitions of one Kustomization fight over it",
                        rendered.parent.as_ref().map(|p| p.to_string()).unwrap_or_default()
                    ));
                    continue;
                }
                if let Some(file) = &rendered.file {
                    reached.insert((file.clone(), rendered.name.clone()));
                }
                for child in &children {
                    if let Some(file) = &child.file {
                        reached.insert((file.clone(), child.spec.name.clone()));
                    }
                }
                rendered.warnings.sort();
                cluster.kustomizations.push(rendered);
                queue.extend(children);
            }
        }
        progress.finish();
        if let Err(reason) = opts.cancel.check() {
            return Err(RenderError::Cancelled(reason).into());
        }

        warnings.extend(assign_ids(&mut clusters, &opts.known_scopes, &opts.declared_scopes));
        for cluster in &mut clusters {
            cluster.kustomizations.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        }
        clusters.sort_by(|a, b| a.name.cmp(&b.name));
        let mut unreachable: Vec<Unreachable> = disk_kustomizations
            .iter()
            .filter(|d| {
                !reached
                    .iter()
                    .any(|(file, name)| *file == d.file && (*name == d.name || name.contains(&d.name)))
            })
            .map(|d| Unreachable {
                file: d.file.clone(),
                namespace: d.namespace.clone(),
                name: d.name.clone(),
            })
            .collect();
        unreachable.sort();
        warnings.sort();
        let builds = progress.done.load(Ordering::Relaxed);
        let cache_hits = progress.cached.load(Ordering::Relaxed);
        tracing::info!(
            builds,
            cache_hits,
            kustomize_runs = builds - cache_hits,
            kustomizations = clusters.iter().map(|c| c.kustomizations.len()).sum::<usize>(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            kustomize = %self.builder.kustomize.version,
            "render finished"
        );
        Ok(Render {
            revision: this_repo.commit.clone(),
            clusters,
            unreachable,
            warnings,
            source_limits,
            kustomize: self.builder.kustomize.version.clone(),
            stats: RenderStats { builds, cache_hits },
        })
    }
}

type Rendered = Result<(Vec<RenderedObject>, Vec<String>), RenderError>;

struct Context<'a> {
    renderer: &'a Renderer,
    opts: &'a RenderOptions,
    sources: &'a Sources<'a>,
    progress: &'a Progress,
    /// Results by identity and spec: a child whose rendered spec is the one written in its file
    /// reuses the render made while looking for roots.
    memo: std::sync::Mutex<BTreeMap<String, Rendered>>,
}

impl Context<'_> {
    /// Renders `spec` as a Kustomization of `cluster` (whose substitution values apply).
    fn render_objects(
        &self,
        spec: &Kustomization,
        cluster: &str,
        inherited_secrets: &BTreeSet<String>,
    ) -> Rendered {
        let values_of = if self.opts.cluster_values.contains_key(cluster) { cluster } else { "" };
        let key = yaml::canonical_json(&serde_json::json!([
            values_of,
            spec.namespace,
            spec.name,
            spec.raw["spec"]
        ]));
        if let Some(hit) = self.memo.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return hit.clone();
        }
        let result = self.render_uncached(spec, values_of, inherited_secrets);
        self.memo.lock().unwrap_or_else(|e| e.into_inner()).insert(key, result.clone());
        result
    }

    /// Builds and post-processes one spec: the objects and the variables left unresolved.
    fn render_uncached(
        &self,
        spec: &Kustomization,
        values_of: &str,
        inherited_secrets: &BTreeSet<String>,
    ) -> Rendered {
        let root = self.sources.tree(&spec.source_ref)?.ok_or_else(|| {
            RenderError::InvalidSource(format!("source {} is not available locally", spec.source_ref))
        })?;
        let built = self.renderer.builder.build(&root, spec, &self.opts.cancel)?;
        self.progress.tick(built.cache_hit);
        let values = self.opts.cluster_values.get(values_of).unwrap_or(&self.opts.values);
        let vars: Variables = postbuild::resolve_variables(spec, values.as_ref(), inherited_secrets)?;
        let finished = postbuild::finish(built.objects, spec, &vars, self.opts.strict_substitution)?;
        Ok((finished.objects, finished.unresolved.into_iter().collect()))
    }

    fn render_node(&self, node: &Node) -> (RenderedKustomization, Vec<Node>) {
        let mut spec = node.spec.clone();
        let mut record = RenderedKustomization {
            namespace: spec.namespace.clone(),
            name: spec.name.clone(),
            path: node.shown_path.clone().unwrap_or_else(|| spec.path.clone()),
            source: spec.source_ref.clone(),
            parent: node.parent.clone(),
            file: node.file.clone(),
            status: Status::Rendered,
            error: None,
            warnings: Vec::new(),
            unresolved_variables: Vec::new(),
            objects: Vec::new(),
            spec: None,
        };
        if matches!(self.sources.tree(&spec.source_ref), Ok(None)) {
            record.status = Status::External;
            record.warnings.push(format!(
                "source {} is not in this repository: not rendered (map it with --source {}/{}=DIR)",
                spec.source_ref, spec.source_ref.namespace, spec.source_ref.name
            ));
            record.spec = Some(spec);
            return (record, Vec::new());
        }
        let mut result = self.render_objects(&spec, &node.cluster_name, &node.inherited_secrets);
        // A root that renders its own definition is reconciled with that rendered definition.
        for _ in 0..ROOT_FIXPOINT_ROUNDS {
            let Ok((objects, _)) = &result else { break };
            if !node.is_root {
                break;
            }
            let own = objects.iter().find(|o| is_self(o, &spec, node.file.as_deref())).and_then(|o| {
                Kustomization::from_value(o.real.as_ref().unwrap_or(&o.object), &spec.namespace).ok()
            });
            match own {
                Some(own) if own.raw["spec"] != spec.raw["spec"] => {
                    spec = own;
                    record.path = spec.path.clone();
                    result = self.render_objects(&spec, &node.cluster_name, &node.inherited_secrets);
                }
                _ => break,
            }
        }
        let mut children = Vec::new();
        match result {
            Err(error) => {
                record.status = Status::Failed;
                record.error = Some(ErrorReport::from(&error));
            }
            Ok((objects, unresolved)) => {
                if !unresolved.is_empty() {
                    record.warnings.push(format!(
                        "unresolved variables {} come from substituteFrom sources only the cluster knows; \
                         shown as written (give --cluster-snapshot to resolve them)",
                        unresolved.iter().map(|v| format!("${{{v}}}")).collect::<Vec<_>>().join(", ")
                    ));
                }
                record.unresolved_variables = unresolved;
                let mut ancestors = node.ancestors.clone();
                ancestors.push(spec.reference());
                for object in objects.iter().filter(|o| is_flux_kustomization(&o.object)) {
                    if is_self(object, &spec, node.file.as_deref()) {
                        continue;
                    }
                    let manifest = object.real.as_ref().unwrap_or(&object.object);
                    if manifest["metadata"]["namespace"].as_str().is_none() {
                        continue; // reported as "namespace not specified" when ids are assigned
                    }
                    match Kustomization::from_value(manifest, "") {
                        Ok(child) if ancestors.contains(&child.reference()) => {
                            let cycle: Vec<String> = ancestors
                                .iter()
                                .skip_while(|a| **a != child.reference())
                                .chain([&child.reference()])
                                .map(|a| a.to_string())
                                .collect();
                            record.status = Status::Failed;
                            record.error = Some(ErrorReport::from(&RenderError::Cycle(format!(
                                "Kustomization cycle: {}",
                                cycle.join(" → ")
                            ))));
                        }
                        Ok(child) => children.push(Node {
                            cluster: node.cluster,
                            cluster_name: node.cluster_name.clone(),
                            inherited_secrets: secret_substitutes(object),
                            shown_path: object
                                .real
                                .as_ref()
                                .and_then(|_| object.object["spec"]["path"].as_str().map(str::to_string)),
                            spec: child,
                            parent: Some(spec.reference()),
                            file: object.origin.clone(),
                            ancestors: ancestors.clone(),
                            is_root: false,
                        }),
                        Err(e) => {
                            record.warnings.push(format!("nested {}: {e}", postbuild::describe(manifest)))
                        }
                    }
                }
                record.objects = objects;
            }
        }
        record.spec = Some(spec);
        (record, children)
    }
}

/// Inline `substitute` variables of a nested Kustomization whose shown (masked) value differs
/// from the real one: the parent substituted them from Secrets.
fn secret_substitutes(object: &RenderedObject) -> BTreeSet<String> {
    let Some(real) = &object.real else { return BTreeSet::new() };
    let pointer = "/spec/postBuild/substitute";
    let shown = object.object.pointer(pointer);
    real.pointer(pointer)
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(name, value)| shown.and_then(|s| s.get(name.as_str())) != Some(*value))
        .map(|(name, _)| name.clone())
        .collect()
}

/// True when a rendered object is the definition of the Kustomization being rendered.
fn is_self(object: &RenderedObject, spec: &Kustomization, file: Option<&str>) -> bool {
    is_flux_kustomization(&object.object)
        && object.object["metadata"]["name"] == spec.name.as_str()
        && (object.origin.as_deref() == file
            || object.object["metadata"]["namespace"] == spec.namespace.as_str())
}

/// Gives every object its inventory id. Scope comes from the built-in kinds, the cluster's CRDs
/// when known, and every CRD of the whole render (which wins: it is what will be applied); a namespaced object without a namespace fails its Kustomization as the apply would.
/// Gives every object its inventory id; returns the kinds whose scope nothing told, once per run.
fn assign_ids(
    clusters: &mut [Cluster],
    known: &[(String, String, Scope)],
    declared: &[(String, String, Scope)],
) -> Option<String> {
    let mut scopes = ScopeMap::default();
    for (group, kind, scope) in known {
        scopes.learn(group, kind, *scope);
    }
    for (group, kind, scope) in declared {
        scopes.declare(group, kind, *scope);
    }
    let mut unknown_scope = BTreeSet::new();
    for object in clusters.iter().flat_map(|c| &c.kustomizations).flat_map(|k| &k.objects) {
        if object.object["kind"] == "CustomResourceDefinition" {
            scopes.learn_crd(&object.object);
        }
    }
    for k in clusters.iter_mut().flat_map(|c| &mut c.kustomizations) {
        let mut missing_namespace = Vec::new();
        for object in &mut k.objects {
            let manifest = &object.object;
            let (group, _) = flux::split_api_version(manifest["apiVersion"].as_str().unwrap_or(""));
            let kind = manifest["kind"].as_str().unwrap_or("");
            let shown = RealName::of(manifest);
            // A name substituted from a Secret: the inventory holds the real one, readers see the mask.
            let real = object.real_name.clone().unwrap_or_else(|| shown.clone());
            let scope = scopes.scope_of(group, kind);
            match scope {
                Scope::Namespaced if real.namespace.as_deref().unwrap_or("").is_empty() => {
                    missing_namespace.push(format!("{kind}/{}", shown.name))
                }
                Scope::Unknown => {
                    unknown_scope.insert(format!("{kind}.{group}"));
                }
                _ => {}
            }
            let id_of = |name: &RealName| {
                let namespace =
                    if scope == Scope::Cluster { "" } else { name.namespace.as_deref().unwrap_or("") };
                ObjectId::new(namespace, &name.name, group, kind)
            };
            object.id = Some(id_of(&real));
            object.shown_id = Some(id_of(&shown));
        }
        k.objects.sort_by(|a, b| (&a.shown_id, &a.id).cmp(&(&b.shown_id, &b.id)));
        if !missing_namespace.is_empty() && k.error.is_none() {
            k.status = Status::Failed;
            k.error = Some(ErrorReport::from(&RenderError::Apply(format!(
                "{} namespace not specified: set metadata.namespace in the manifest or spec.targetNamespace \
                 on the Kustomization",
                missing_namespace.join(", ")
            ))));
        }
    }
    (!unknown_scope.is_empty()).then(|| {
        format!(
            "no CustomResourceDefinition found for {}: scope taken from the manifests (declare them under \
             crdScopes in .fluxplan.yaml, or plan with a cluster)",
            unknown_scope.into_iter().collect::<Vec<_>>().join(", ")
        )
    })
}

/// Scans the repository's YAML files for Kustomization, GitRepository and FluxInstance manifests.
#[allow(clippy::type_complexity)]
fn discover(
    root: &Path,
) -> (Vec<DiskKustomization>, Vec<DiskGitRepository>, Vec<(Kustomization, Option<String>)>) {
    let mut files = Vec::new();
    collect_yaml_files(root, &mut files);
    files.sort();
    let mut kustomizations = Vec::new();
    let mut repositories = Vec::new();
    let mut instances = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        if !text.contains("toolkit.fluxcd.io") && !text.contains("FluxInstance") {
            continue;
        }
        // Files that are not YAML (Helm values templates, CI files) are simply not manifests.
        let Ok(docs) = yaml::parse_documents(&text) else {
            continue;
        };
        let rel = paths::relative(root, &file);
        for doc in docs {
            let api = doc["apiVersion"].as_str().unwrap_or("");
            let kind = doc["kind"].as_str().unwrap_or("");
            let group = flux::split_api_version(api).0;
            if is_flux_kustomization(&doc) {
                let name = doc["metadata"]["name"].as_str().unwrap_or("").to_string();
                let namespace = doc["metadata"]["namespace"].as_str().map(str::to_string);
                let spec = Kustomization::from_value(&doc, BOOTSTRAP_SOURCE.0).map_err(|e| e.to_string());
                kustomizations.push(DiskKustomization { file: rel.clone(), name, namespace, spec });
            } else if group == flux::SOURCE_GROUP && kind == "GitRepository" {
                let meta = &doc["metadata"];
                repositories.push(DiskGitRepository {
                    key: format!(
                        "{}/{}",
                        meta["namespace"].as_str().unwrap_or(BOOTSTRAP_SOURCE.0),
                        meta["name"].as_str().unwrap_or("")
                    ),
                    url: doc["spec"]["url"].as_str().unwrap_or("").to_string(),
                    ignore: doc["spec"]["ignore"].as_str().map(str::to_string),
                });
            } else if kind == "FluxInstance" {
                if let Some(root_spec) = flux_instance_root(&doc) {
                    instances.push((root_spec, Some(rel.clone())));
                }
            }
        }
    }
    (kustomizations, repositories, instances)
}

/// The root Kustomization the Flux Operator creates for a FluxInstance that syncs from Git.
fn flux_instance_root(doc: &Value) -> Option<Kustomization> {
    let sync = doc["spec"].get("sync")?;
    if sync["kind"].as_str().is_some_and(|k| k != "GitRepository") {
        return None;
    }
    let namespace = doc["metadata"]["namespace"].as_str().unwrap_or(BOOTSTRAP_SOURCE.0);
    let name = sync["name"].as_str().unwrap_or(namespace);
    let manifest = serde_json::json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "path": sync["path"].as_str().unwrap_or("."),
            "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": name},
        },
    });
    Kustomization::from_value(&manifest, namespace).ok()
}

fn collect_yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => collect_yaml_files(&path, out),
            Ok(t) if t.is_file() => {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.ends_with(".yaml") || name.ends_with(".yml") {
                    out.push(path);
                }
            }
            _ => {}
        }
    }
}

/// A progress line on a terminal while renders run.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    done: AtomicUsize,
    cached: AtomicUsize,
}

impl Progress {
    fn new(enabled: bool) -> Self {
        use std::io::IsTerminal;
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress { bar, done: AtomicUsize::new(0), cached: AtomicUsize::new(0) }
    }

    fn tick(&self, cache_hit: bool) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let cached =
            self.cached.fetch_add(usize::from(cache_hit), Ordering::Relaxed) + usize::from(cache_hit);
        if let Some(bar) = &self.bar {
            bar.set_message(format!("rendered {done} kustomize builds ({cached} from cache)"));
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
