//! The walk: find the roots of a repository, render each, and follow the Kustomizations that
//! renders produce (using their rendered spec) until every reachable one is rendered.

use super::artifacts::{self, Generators, Resolved};
use super::build::Builder;
use super::cache::RenderCache;
use super::finished;
use super::kustomize::Kustomize;
use super::postbuild::{self, Variables};
use super::reach;
use super::roots::{self, Candidate, DeclaredSource, InstanceSync, Root, Sourced};
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
/// How often roots are chosen again because the walk found syncs they were not chosen by.
const SYNC_ROUNDS: usize = 3;
/// Objects all the ResourceSets of one render may generate (each may generate ResourceSets).
const MAX_GENERATED_OBJECTS: usize = 200_000;
/// How often a root that renders its own definition is re-rendered with that definition.
const ROOT_FIXPOINT_ROUNDS: usize = 3;

/// Renders repositories; keeps the kustomize runner and cache between renders (the base and
/// head of a plan share them).
pub struct Renderer {
    builder: Builder,
    /// Helm v3 and v4, found when a render first needs them.
    helm: [std::sync::OnceLock<Result<super::helm::Helm, String>>; 2],
    /// Fetched charts, kept under the cache directory when there is one.
    charts: crate::charts::store::ChartStore,
    /// `helm template` runs, by key: each runs once per renderer (base and head share it).
    templates: crate::memo::Memo<String, Result<super::helm::Release, super::kustomize::BuildError>>,
}

impl Renderer {
    pub fn new(kustomize_timeout: Duration, cache_dir: Option<PathBuf>) -> Result<Self> {
        let kustomize = Kustomize::detect(kustomize_timeout)?;
        Ok(Self::from_builder(Builder::new(kustomize, RenderCache::new(cache_dir.clone())), cache_dir))
    }

    /// A renderer using the kustomize at `program`.
    pub fn with_kustomize(program: &str, kustomize_timeout: Duration) -> Result<Self> {
        let kustomize = Kustomize::at(program, kustomize_timeout)?;
        Ok(Self::from_builder(Builder::new(kustomize, RenderCache::new(None)), None))
    }

    /// A renderer using `kustomize` (no on-disk cache).
    pub fn from_kustomize(kustomize: Kustomize) -> Self {
        Self::from_builder(Builder::new(kustomize, RenderCache::new(None)), None)
    }

    fn from_builder(builder: Builder, cache_dir: Option<PathBuf>) -> Self {
        Renderer {
            builder,
            helm: Default::default(),
            charts: crate::charts::store::ChartStore::new(cache_dir),
            templates: Default::default(),
        }
    }

    /// A release printed by `helm template`: from this renderer's memory, else the render cache
    /// (never for a release holding values from Secrets: those stay in memory), else `run`.
    fn template(
        &self,
        key: &str,
        holds_secrets: bool,
        run: &dyn Fn() -> Result<super::helm::Release, super::kustomize::BuildError>,
    ) -> Result<super::helm::Release, super::kustomize::BuildError> {
        self.templates.get(&key.to_string(), || {
            let cached = (!holds_secrets).then(|| self.builder.cache.get(key)).flatten();
            if let Some(release) = cached.and_then(|text| serde_json::from_str(&text).ok()) {
                return Ok(release);
            }
            let release = run()?;
            if !holds_secrets {
                let text = serde_json::to_string(&release).expect("JSON values serialize");
                self.builder.cache.put(key, std::sync::Arc::new(text));
            }
            Ok(release)
        })
    }

    /// Helm `major` (3 or 4), or why there is none.
    fn helm(&self, major: u8) -> Result<&super::helm::Helm, String> {
        let slot = &self.helm[usize::from(major != 3)];
        slot.get_or_init(|| super::helm::Helm::detect(major).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(Clone::clone)
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
    /// No `spec.sourceRef`: a patch or partial manifest, never applied on its own.
    is_fragment: bool,
}

/// What the repository's files declare, read without rendering.
struct Discovered {
    kustomizations: Vec<DiskKustomization>,
    git_repositories: Vec<DiskGitRepository>,
    /// Flux Operator syncs in files (FluxInstances, flux-instance HelmReleases).
    syncs: Vec<InstanceSync>,
    /// OCIRepositories in files: a HelmRelease's `chartRef` may name one.
    chart_sources: Vec<Value>,
    /// Files holding an object that may declare a Flux Operator sync once rendered (see
    /// `roots::may_declare_sync`) where the file read as it is declares none.
    hidden_sync_files: BTreeSet<String>,
}

/// A GitRepository manifest found in the repository's files.
struct DiskGitRepository {
    key: String,
    url: String,
    ignore: Option<String>,
    /// What its artifact holds beyond its own tree, if anything (see `adds_to_its_tree`).
    adds: Option<String>,
}

/// Why a GitRepository's artifact holds more than its own tree: other repositories' artifacts
/// (`spec.include`) or its submodules (`spec.recurseSubmodules`). Neither is in the export, so
/// rendering it from this repository alone would plan what Flux does not apply.
fn adds_to_its_tree(spec: &Value) -> Option<String> {
    let included: Vec<&str> = spec["include"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| i["repository"]["name"].as_str().unwrap_or("?"))
        .collect();
    if !included.is_empty() {
        return Some(format!("spec.include adds {}", included.join(", ")));
    }
    // Anything but false or nothing fails closed (Flux's schema takes a boolean).
    (!matches!(spec["recurseSubmodules"], Value::Null | Value::Bool(false)))
        .then(|| "spec.recurseSubmodules adds its submodules".to_string())
}

/// A source of this repository: the kinds that name it, its `spec.ignore`, what its artifact
/// adds (see `adds_to_its_tree`), and the directory of the repository its artifact holds.
#[derive(Default)]
struct ThisRepo {
    /// `GitRepository`, or the kind an operator sync or `.fluxplan.yaml` gives the name.
    kinds: BTreeSet<String>,
    ignore: Option<String>,
    adds: Option<String>,
    /// The artifact is this directory of the repository (`sources:` in `.fluxplan.yaml`).
    subpath: Option<String>,
}

/// One unit waiting to be rendered: a Kustomization, or a ResourceSet.
#[derive(Clone)]
struct Node {
    cluster: usize,
    cluster_name: String,
    /// Inline `substitute` variables whose values the parent substituted from Secrets.
    inherited_secrets: BTreeSet<String>,
    /// The path as shown (masked) when it differs from the real one.
    shown_path: Option<String>,
    unit: Pending,
    parent: Option<KustomizationRef>,
    file: Option<String>,
    ancestors: Vec<KustomizationRef>,
    is_root: bool,
}

/// What a node renders.
#[derive(Clone)]
enum Pending {
    Kustomization(Box<Kustomization>),
    ResourceSet(std::sync::Arc<PendingSet>),
}

/// A ResourceSet its parent applies.
struct PendingSet {
    /// The manifest as the parent renders it (values from Secrets included).
    manifest: Value,
    /// It holds values substituted from Secrets: its objects would show them.
    holds_secret_values: bool,
    /// The input providers among the objects its parent applies (and its parent's parents').
    providers: std::sync::Arc<Vec<Value>>,
    /// Some provider it may read holds values substituted from Secrets.
    secret_providers: bool,
}

impl Node {
    fn name(&self) -> String {
        match &self.unit {
            Pending::Kustomization(spec) => spec.name.clone(),
            Pending::ResourceSet(set) => set.manifest["metadata"]["name"].as_str().unwrap_or("").to_string(),
        }
    }
}

/// Where each source lives locally.
struct Sources<'a> {
    this_repo: &'a ExportedSource,
    this_repo_keys: BTreeMap<String, ThisRepo>,
    /// Syncs the pull request adds or changes, whose sources are not taken for this repository
    /// (see `trusted_syncs`).
    untrusted: Vec<InstanceSync>,
    mapped: &'a BTreeMap<String, ExportedSource>,
    generators: &'a Generators,
}

/// What decides which sources are this repository, before the syncs are known.
struct KnownSources<'a> {
    this_repo: &'a ExportedSource,
    repositories: &'a [DiskGitRepository],
    base_syncs: Option<&'a [InstanceSync]>,
    remotes: &'a BTreeSet<String>,
    declared: &'a [DeclaredSource],
    mapped: &'a BTreeMap<String, ExportedSource>,
    generators: &'a Generators,
}

impl<'a> KnownSources<'a> {
    /// The sources once `syncs` are found (and what rendered GitRepositories add, `learned`).
    fn with_syncs(&self, syncs: &[InstanceSync], learned: &BTreeMap<String, String>) -> Sources<'a> {
        let (trusted, untrusted) = trusted_syncs(syncs, self.base_syncs, self.remotes, self.declared);
        Sources {
            this_repo: self.this_repo,
            this_repo_keys: this_repo_keys(
                self.repositories,
                &trusted,
                self.declared,
                self.remotes,
                learned,
                &untrusted,
            ),
            untrusted,
            mapped: self.mapped,
            generators: self.generators,
        }
    }
}

/// The syncs whose sources are this repository, and the others. With `base` (a plan's head), a
/// sync the base revision has by name counts only when unchanged (kind, URL, ref, instance
/// patches); a new one when its URL is one of the repository's remotes or `.fluxplan.yaml`
/// declares its source. A pull request that adds or re-points a FluxInstance cannot have another
/// source rendered from this repository, which would show a tree the operator never applies.
fn trusted_syncs(
    syncs: &[InstanceSync],
    base: Option<&[InstanceSync]>,
    remotes: &BTreeSet<String>,
    declared: &[DeclaredSource],
) -> (Vec<InstanceSync>, Vec<InstanceSync>) {
    syncs.iter().cloned().partition(|sync| match base {
        None => true,
        // A sync the base revision has by this name must be the same in every respect: a
        // declaration or a remote never excuses a URL, ref or patch the pull request changes.
        Some(base) if base.iter().any(|b| b.same_name(sync)) => base.iter().any(|b| b.same_source(sync)),
        Some(_) => {
            (sync.source_kind == "GitRepository" && remotes.contains(&git::normalize_url(&sync.url)))
                || declared
                    .iter()
                    .any(|d| d.source.key() == sync.source_key() && d.source.kind == sync.source_kind)
        }
    })
}

/// The sources that denote the repository being rendered: `flux-system/flux-system`, every
/// Flux Operator sync whatever its kind (the instance syncs the repository that declares it: a
/// GitRepository, or the OCIRepository or Bucket CI pushes it to), every source `.fluxplan.yaml`
/// declares, and every GitRepository whose URL is one of the repository's remotes.
/// `learned` holds what rendered GitRepositories of this repository add (see `learned_adds`):
/// files read as written miss what patches give them. Once any definition of a source adds
/// content, it stays marked: a later plain definition of the same name never clears it.
fn this_repo_keys(
    repositories: &[DiskGitRepository],
    syncs: &[InstanceSync],
    declared: &[DeclaredSource],
    remotes: &BTreeSet<String>,
    learned: &BTreeMap<String, String>,
    untrusted: &[InstanceSync],
) -> BTreeMap<String, ThisRepo> {
    let bootstrap_key = format!("{}/{}", BOOTSTRAP_SOURCE.0, BOOTSTRAP_SOURCE.1);
    let mut keys: BTreeMap<String, ThisRepo> = BTreeMap::new();
    let git = || "GitRepository".to_string();
    let untrusted_key = |key: &str| untrusted.iter().any(|sync| sync.source_key() == key);
    if !untrusted_key(&bootstrap_key) {
        keys.entry(bootstrap_key.clone()).or_default().kinds.insert(git());
    }
    for sync in syncs {
        keys.entry(sync.source_key()).or_default().kinds.insert(sync.source_kind.clone());
    }
    for source in declared {
        let entry = keys.entry(source.source.key()).or_default();
        entry.kinds.insert(source.source.kind.clone());
        entry.subpath = source.subpath();
    }
    for repo in repositories {
        // An untrusted sync makes the operator write that source with the sync's URL.
        if untrusted_key(&repo.key) && !keys.contains_key(&repo.key) {
            continue;
        }
        if repo.key == bootstrap_key || remotes.contains(&git::normalize_url(&repo.url)) {
            let entry = keys.entry(repo.key.clone()).or_default();
            entry.kinds.insert(git());
            entry.ignore = repo.ignore.clone();
            entry.adds = entry.adds.take().or_else(|| repo.adds.clone());
        }
    }
    for (key, adds) in learned {
        if let Some(repo) = keys.get_mut(key) {
            repo.adds.get_or_insert_with(|| adds.clone());
        }
    }
    keys
}

/// GitRepositories of this repository, as the walk rendered them (patches applied), whose
/// artifact adds content that `sources` does not know of yet, with what they add.
fn learned_adds(clusters: &[Cluster], sources: &Sources) -> BTreeMap<String, String> {
    clusters
        .iter()
        .flat_map(|c| &c.kustomizations)
        .flat_map(|k| &k.objects)
        .map(|o| &o.object)
        .filter(|o| o["kind"] == "GitRepository")
        .filter(|o| flux::split_api_version(o["apiVersion"].as_str().unwrap_or("")).0 == flux::SOURCE_GROUP)
        .filter_map(|o| {
            let meta = &o["metadata"];
            let key = format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap_or(BOOTSTRAP_SOURCE.0),
                meta["name"].as_str().unwrap_or("")
            );
            let known = sources.this_repo_keys.get(&key)?;
            known.adds.is_none().then_some(())?;
            Some((key, adds_to_its_tree(&o["spec"])?))
        })
        .collect()
}

impl Sources<'_> {
    /// True when `source` is the repository being rendered (not a mapped directory).
    fn is_this_repo(&self, source: &flux::SourceRef) -> bool {
        self.this_repo(source).is_some()
    }

    /// The entry of a source that is this repository (not a mapped directory).
    fn this_repo(&self, source: &flux::SourceRef) -> Option<&ThisRepo> {
        let key = format!("{}/{}", source.namespace, source.name);
        if self.mapped.contains_key(&key) {
            return None;
        }
        self.this_repo_keys.get(&key).filter(|repo| repo.kinds.contains(&source.kind))
    }

    /// The local tree of a source for a Kustomization defined in `near`, or `None` when it is
    /// external. An ExternalArtifact is local when a generator here builds it from local sources.
    fn tree(&self, source: &flux::SourceRef, near: Option<&str>) -> Result<Option<PathBuf>, RenderError> {
        match self.artifact(source, near)? {
            Some(Resolved::Tree(tree)) => Ok(Some(tree)),
            Some(Resolved::Unavailable(_)) => Ok(None),
            None => self.local_tree(source),
        }
    }

    /// How an ExternalArtifact not mapped with `--source` resolves; `None` for other sources.
    fn artifact(
        &self,
        source: &flux::SourceRef,
        near: Option<&str>,
    ) -> Result<Option<Resolved>, RenderError> {
        let mapped = self.mapped.contains_key(&format!("{}/{}", source.namespace, source.name));
        if source.kind != artifacts::KIND || mapped {
            return Ok(None);
        }
        self.generators.resolve(source, near, &|s| self.local_tree(s)).map(Some)
    }

    /// What a GitRepository of this repository adds to its artifact (see `adds_to_its_tree`).
    fn adds_of(&self, source: &flux::SourceRef) -> Option<&str> {
        (source.kind == "GitRepository").then(|| self.this_repo(source)?.adds.as_deref()).flatten()
    }

    /// Why a source is external, for the Kustomization's warning.
    fn external_reason(&self, source: &flux::SourceRef, near: Option<&str>) -> String {
        let map = format!("map it with --source {}/{}=DIR", source.namespace, source.name);
        let key = format!("{}/{}", source.namespace, source.name);
        if let Some(sync) = self.untrusted.iter().find(|sync| sync.source_key() == key) {
            return format!(
                "source {source} is named by {}, which the base revision does not have this way: fluxplan \
                 takes a sync's source for this repository only when the base revision syncs it the same way or \
                 .fluxplan.yaml declares it (sources:), so it is not planned ({map})",
                sync.describe()
            );
        }
        if let Some(adds) = self.adds_of(source) {
            return format!(
                "source {source} is this repository and more ({adds}): what Flux applies from it is not in \
                 this repository alone, so it is not planned ({map}, a directory holding the whole artifact)"
            );
        }
        match self.artifact(source, near) {
            Ok(Some(Resolved::Unavailable(why))) => {
                format!("source {source} is not built locally, so it is not planned: {why}; or map the artifact itself with --source {}/{}=DIR", source.namespace, source.name)
            }
            _ => format!("source {source} is not in this repository: not rendered ({map})"),
        }
    }

    /// The repository file an object built from `root` came from, when `root` is an artifact
    /// generated from this repository: nested Kustomizations are then matched to their files.
    fn repo_origin(&self, root: &Path, origin: &str) -> Option<String> {
        let source = self.generators.source_of(&root.join(origin))?;
        self.this_repo.repo_path(&source)
    }

    fn local_tree(&self, source: &flux::SourceRef) -> Result<Option<PathBuf>, RenderError> {
        let key = format!("{}/{}", source.namespace, source.name);
        let tree = if let Some(mapped) = self.mapped.get(&key) {
            mapped.tree(None)
        } else if let Some(repo) = self.this_repo(source) {
            if repo.adds.is_some() {
                return Ok(None);
            }
            let tree = self.this_repo.tree(repo.ignore.as_deref());
            match (&repo.subpath, tree) {
                (Some(subpath), Ok(tree)) => return subtree(&tree, subpath, source).map(Some),
                (_, tree) => tree,
            }
        } else {
            return Ok(None);
        };
        tree.map(Some).map_err(|e| RenderError::InvalidSource(format!("cannot prepare source {source}: {e}")))
    }
}

/// The directory `subpath` of an exported tree, as the artifact of `source` (`.fluxplan.yaml`
/// says it holds that directory): it must be a directory inside the tree at this revision.
fn subtree(tree: &Path, subpath: &str, source: &flux::SourceRef) -> Result<PathBuf, RenderError> {
    let dir = paths::secure_join(tree, subpath);
    let inside = |dir: &Path| {
        Some(dir.canonicalize().ok()?.starts_with(tree.canonicalize().ok()?)).filter(|_| dir.is_dir())
    };
    match inside(&dir) {
        Some(true) => Ok(dir),
        _ => Err(RenderError::PathNotFound(format!(
            "source {source} is the directory {subpath} of this repository (sources: in .fluxplan.yaml), \
             which this revision does not have"
        ))),
    }
}

impl Renderer {
    /// Renders every Kustomization reachable from the repository's roots.
    pub fn render(&self, opts: &RenderOptions) -> Result<Render> {
        let started = std::time::Instant::now();
        // On the progress line from the start: exporting a large revision takes a while too.
        let progress = Progress::new(opts.progress.clone());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(opts.jobs.max(1))
            .stack_size(crate::stack::RENDER_STACK_BYTES)
            .build()?;
        crate::sandbox::announce();
        // A tree kept for later renders must be one no build could write to: only where the
        // sandbox confines builds to reading it.
        let keep = opts.keep_exports && crate::sandbox::status().filesystem;
        let this_repo = ExportedSource::export_keeping(&opts.repo, opts.rev.as_deref(), opts.limits, keep)?;
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
        // Only files that mention Flux declare anything discovery looks for: the export kept
        // them (those the source's ignore rules leave out are not in the tree).
        let mut flux_files: Vec<(PathBuf, String)> = this_repo
            .flux_manifests
            .iter()
            .map(|(path, text)| (discovery_tree.join(path), text.clone()))
            .filter(|(file, _)| file.is_file())
            .collect();
        flux_files.sort();
        let discovered = discover(&discovery_tree, &flux_files);
        let disk_kustomizations = &discovered.kustomizations;
        let generators = Generators::discover(&discovery_tree, &flux_files, opts.limits);

        tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "manifests discovered");
        // Sources `.fluxplan.yaml` says are this repository: under `sources:`, and those its roots name.
        let declared_sources: Vec<DeclaredSource> = opts
            .declared_sources
            .iter()
            .cloned()
            .chain(
                opts.declared_roots
                    .iter()
                    .flatten()
                    .filter_map(|root| Some(DeclaredSource { source: root.source.clone()?, path: None })),
            )
            .collect();
        let remotes: BTreeSet<String> =
            git::remote_urls(&opts.repo).iter().map(|u| git::normalize_url(u)).collect();
        let known = KnownSources {
            this_repo: &this_repo,
            repositories: &discovered.git_repositories,
            base_syncs: opts.base_syncs.as_deref(),
            remotes: &remotes,
            declared: &declared_sources,
            mapped: &mapped,
            generators: &generators,
        };
        let sources = known.with_syncs(&discovered.syncs, &BTreeMap::new());

        progress.set_total(disk_kustomizations.len());
        let memo = Default::default();
        let generated = AtomicUsize::new(0);
        let ctx = Context {
            renderer: self,
            opts,
            sources: &sources,
            progress: &progress,
            memo: &memo,
            generated: &generated,
        };

        // Local candidates, rendered once with their spec as written (those that may be roots or
        // declare syncs, below) to learn who produces whom and which Flux Operator syncs the
        // renders hold.
        let candidates: Vec<(usize, &Kustomization)> = disk_kustomizations
            .iter()
            .enumerate()
            .filter_map(|(i, d)| Some((i, d.spec.as_ref().ok()?)))
            // An ExternalArtifact Kustomization is never left unreachable for want of its artifact:
            // it renders, fails or is listed external with the reason.
            .filter(|(i, spec)| {
                spec.source_ref.kind == artifacts::KIND
                    || matches!(
                        sources.tree(&spec.source_ref, Some(&disk_kustomizations[*i].file)),
                        Ok(Some(_))
                    )
            })
            .collect();
        // What each candidate of this repository includes by its kustomization files, read
        // without kustomize: a parent whose build fails still claims its children, so they never
        // pass for roots.
        let includes: BTreeMap<usize, BTreeSet<String>> = pool.install(|| {
            candidates
                .par_iter()
                .filter(|(_, spec)| sources.is_this_repo(&spec.source_ref))
                .map(|(i, spec)| (*i, reach::included_files(&discovery_tree, &spec.path, &spec.components)))
                .collect()
        });
        let mut by_file: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (j, d) in disk_kustomizations.iter().enumerate() {
            by_file.entry(d.file.as_str()).or_default().push(j);
        }
        let mut producers: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for (i, files) in &includes {
            for child in files.iter().filter_map(|file| by_file.get(file.as_str())).flatten() {
                producers.entry(*child).or_default().insert(*i);
            }
        }
        // A candidate another one includes is never a root, and everything its render could
        // produce comes from the files it includes: rendering it as written would teach only the
        // syncs its objects declare, and the walk learns those (below) from its one build, with
        // the spec its parent gives it. It is rendered as written only when it includes an object
        // that may declare a sync its file does not show (values from a generated ConfigMap).
        let to_render: Vec<&(usize, &Kustomization)> = candidates
            .iter()
            .filter(|(i, _)| {
                let included_by_other = producers.get(i).is_some_and(|p| p.iter().any(|q| q != i));
                let hides_no_sync =
                    includes.get(i).is_some_and(|files| files.is_disjoint(&discovered.hidden_sync_files));
                !(included_by_other && hides_no_sync)
            })
            .collect();
        let chart_sources: Vec<&Value> = discovered.chart_sources.iter().collect();
        let learned: Vec<Learned> = pool.install(|| {
            to_render
                .par_iter()
                .map(|(i, spec)| {
                    let made = ctx
                        .render_objects(spec, Some(&disk_kustomizations[*i].file), "", &BTreeSet::new())
                        .map(|(objects, _)| objects)
                        .unwrap_or_default();
                    let children = made
                        .iter()
                        .filter(|o| is_flux_kustomization(&o.object))
                        .filter_map(|o| {
                            Some((o.origin.clone()?, o.object["metadata"]["name"].as_str()?.to_string()))
                        })
                        .collect();
                    let sourced: Vec<Sourced> = made
                        .iter()
                        .map(|o| (o.real.as_ref().unwrap_or(&o.object), o.origin.as_deref()))
                        .collect();
                    (*i, children, roots::instance_syncs(&sourced, &chart_sources))
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
        let mut rendered_syncs = Vec::new();
        for (producer, children, syncs) in learned {
            for (file, name) in &children {
                if let Some(child) = matches(file, name) {
                    producers.entry(child).or_default().insert(producer);
                }
            }
            rendered_syncs.extend(syncs);
        }
        let root_candidates: Vec<Candidate> = candidates
            .iter()
            .map(|(i, spec)| {
                let by = producers.get(i);
                Candidate {
                    spec,
                    file: &disk_kustomizations[*i].file,
                    self_producing: by.is_some_and(|p| p.contains(i)),
                    produced_by_other: by.is_some_and(|p| p.iter().any(|q| q != i)),
                }
            })
            .collect();
        let known_syncs = roots::dedup_syncs(rendered_syncs, discovered.syncs.clone());
        let mut syncs = known_syncs.clone();
        let mut learned = BTreeMap::new();
        let mut round = 1;
        let (sources, mut clusters, reached, syncs) = loop {
            let roots = roots::choose(opts.declared_roots.as_deref(), &root_candidates, &syncs);
            // Syncs found only in renders may name sources of this repository discovery missed.
            let sources = known.with_syncs(&syncs, &learned);
            // Each round walks anew: what ResourceSets generate is counted per walk.
            let generated = AtomicUsize::new(0);
            let ctx = Context {
                renderer: self,
                opts,
                sources: &sources,
                progress: &progress,
                memo: &memo,
                generated: &generated,
            };
            tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, round, "roots found");
            let (clusters, reached) = ctx.walk(&pool, roots);
            // The walk built every Kustomization with the spec its parent gives it: the syncs its
            // objects declare win over those of renders as written and of files. When they differ
            // from the syncs the roots were chosen by, the roots are chosen again (the renders are
            // memoized).
            let found = roots::dedup_syncs(declared_syncs(&clusters, &chart_sources), known_syncs.clone());
            // Likewise when a GitRepository of this repository renders with content its file
            // did not show (a patch adds `spec.include`): walked again with it marked, however
            // many rounds the syncs took (each such round marks one more source at least, and
            // there are finitely many).
            let adds = learned_adds(&clusters, &sources);
            if (found == syncs || round >= SYNC_ROUNDS) && adds.is_empty() {
                break (sources, clusters, reached, syncs);
            }
            syncs = found;
            learned.extend(adds);
            round += 1;
        };
        if let Err(reason) = opts.cancel.check() {
            return Err(RenderError::Cancelled(reason).into());
        }
        // Every HelmRelease a Kustomization applies, rendered from its chart as a unit below it.
        let source_tree = |source: &flux::SourceRef| sources.tree(source, None).ok().flatten();
        let own_urls: Vec<String> = clusters
            .iter()
            .flat_map(|c| &c.kustomizations)
            .flat_map(|k| &k.objects)
            .filter(|o| {
                flux::split_api_version(o.object["apiVersion"].as_str().unwrap_or("")).0 == flux::SOURCE_GROUP
            })
            .filter_map(|o| o.object["spec"]["url"].as_str().map(str::to_string))
            .collect();
        let access = opts.chart_settings.access(&own_urls);
        let fetching = access.as_ref().map(|access| (&self.charts, access)).map_err(Clone::clone);
        let templates =
            |key: &str,
             holds_secrets: bool,
             run: &dyn Fn() -> Result<super::helm::Release, super::kustomize::BuildError>| {
                self.template(key, holds_secrets, run)
            };
        let charts = super::helm::Charts {
            helm: self.helm(opts.helm_major),
            fetching,
            templates: &templates,
            kube_version: opts.kube_version.as_deref(),
            api_versions: &opts.api_versions,
        };
        let kustomize =
            |dir: &Path, readable: &Path| self.builder.kustomize.build(dir, readable, &opts.cancel);
        pool.install(|| {
            for cluster in clusters.iter_mut() {
                // Each cluster's own ConfigMaps and Secrets, when roots have clusters of their own.
                let values = opts.cluster_values.get(&cluster.name).unwrap_or(&opts.values);
                // A cluster of its own may run another Helm, or another Kubernetes.
                let mut charts = charts.clone();
                if let Some(own) = opts.cluster_helm.get(&cluster.name) {
                    charts.helm = self.helm(own.major.unwrap_or(opts.helm_major));
                    charts.kube_version = own.kube_version.as_deref().or(charts.kube_version);
                }
                let releases = super::helm::units::Releases {
                    charts,
                    source_tree: &source_tree,
                    given_charts: &opts.charts,
                    kustomize: &kustomize,
                    cluster: values.as_ref(),
                    installed: opts.installed_releases.as_ref(),
                    cancel: &opts.cancel,
                };
                super::helm::units::add_units(cluster, &releases);
            }
        });

        // A Kustomization that fails to build still claims what its path includes, and those
        // files what theirs include: reached, just not rendered.
        let mut claimed: BTreeSet<String> = BTreeSet::new();
        let mut claiming: Vec<&Kustomization> = clusters
            .iter()
            .flat_map(|c| &c.kustomizations)
            .filter(|k| k.status == Status::Failed)
            .filter_map(|k| k.spec.as_ref())
            .collect();
        while let Some(spec) = claiming.pop() {
            if !sources.is_this_repo(&spec.source_ref) {
                continue;
            }
            for file in reach::included_files(&discovery_tree, &spec.path, &spec.components) {
                if let Some(inside) = by_file.get(file.as_str()).filter(|_| !claimed.contains(&file)) {
                    claiming.extend(inside.iter().filter_map(|&j| disk_kustomizations[j].spec.as_ref().ok()));
                }
                claimed.insert(file);
            }
        }
        // Argo CD Applications of the same revision, one cluster per root Application. The
        // repo-server reads every file of a clone: no `.sourceignore` applies.
        let argo_tree = this_repo.unfiltered();
        let argo_files: Vec<(String, String)> = this_repo
            .flux_manifests
            .iter()
            .filter(|(path, text)| {
                super::argo::mentions_argocd(text.as_bytes()) && argo_tree.join(path).is_file()
            })
            .cloned()
            .collect();
        let argo = super::argo::ArgoWalk::new(
            &self.builder,
            &this_repo,
            argo_tree,
            &remotes,
            opts,
            &progress,
            charts,
        );
        clusters.extend(argo.walk(&pool, &argo_files, &mut warnings));
        progress.finish();
        if let Err(reason) = opts.cancel.check() {
            return Err(RenderError::Cancelled(reason).into());
        }
        warnings.extend(assign_ids(&mut clusters, &opts.known_scopes, &opts.declared_scopes));
        for cluster in &mut clusters {
            cluster
                .kustomizations
                .sort_by(|a, b| (&a.namespace, &a.name, a.kind).cmp(&(&b.namespace, &b.name, b.kind)));
        }
        clusters.sort_by(|a, b| a.name.cmp(&b.name));
        let patch_files = std::cell::OnceCell::new();
        let mut unreachable: Vec<Unreachable> = disk_kustomizations
            .iter()
            .filter(|d| {
                !reached
                    .iter()
                    .any(|(file, name)| *file == d.file && (*name == d.name || name.contains(&d.name)))
            })
            // Patches are fragments by nature, never applied on their own (read only when needed:
            // every kustomization file of the repository).
            .filter(|d| {
                !d.is_fragment
                    && !patch_files
                        .get_or_init(|| {
                            let mut yaml_files = Vec::new();
                            collect_yaml_files(&discovery_tree, &mut yaml_files);
                            reach::patch_files(&discovery_tree, &yaml_files)
                        })
                        .contains(&d.file)
            })
            .filter(|d| !claimed.contains(&d.file))
            .map(|d| Unreachable {
                file: d.file.clone(),
                namespace: d.namespace.clone(),
                name: d.name.clone(),
            })
            .collect();
        unreachable.sort();
        warnings.sort();
        // The paths (and ignore rules) of Kustomizations rendered from this repository.
        let clusters_for_explain: Vec<(String, Option<String>)> = clusters
            .iter()
            .flat_map(|c| &c.kustomizations)
            // Only a plan asks (`build` explains nothing).
            .filter(|_| !opts.explain.is_empty())
            .filter(|k| k.kind == super::UnitKind::Kustomization && k.status == Status::Rendered)
            .filter(|k| sources.is_this_repo(&k.source))
            .filter_map(|k| {
                let path = crate::paths::normalize(Path::new(k.path.trim_start_matches('/')))?;
                let key = format!("{}/{}", k.source.namespace, k.source.name);
                Some((path.to_string_lossy().into_owned(), sources.this_repo_keys.get(&key)?.ignore.clone()))
            })
            .collect();
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
        let kube_versions = clusters
            .iter()
            .filter_map(|c| {
                let own = opts.cluster_helm.get(&c.name).and_then(|h| h.kube_version.clone());
                Some((c.name.clone(), own.or_else(|| opts.kube_version.clone())?))
            })
            .collect();
        Ok(Render {
            revision: this_repo.commit.clone(),
            clusters,
            unreachable,
            warnings,
            source_limits,
            kustomize: self.builder.kustomize.version.clone(),
            stats: RenderStats { builds, cache_hits },
            this_repo_sources: sources.this_repo_keys.keys().cloned().collect(),
            kube_versions,
            untrusted_syncs: sources.untrusted.clone(),
            syncs,
            not_read: not_read(&opts.explain, &clusters_for_explain, &sources),
        })
    }
}

/// Why each file of `files` lying under the path of a Kustomization rendered from this repository
/// is never read by its controller, where it is not: an ignore rule leaves it out of the artifact,
/// or the path's generated kustomization reads only `.yaml` and `.yml` files.
fn not_read(
    files: &[String],
    units: &[(String, Option<String>)],
    sources: &Sources,
) -> BTreeMap<String, String> {
    let mut rules = BTreeMap::new();
    let mut reasons = BTreeMap::new();
    for file in files {
        for (path, ignore) in units {
            let under =
                path.is_empty() || file.strip_prefix(path.as_str()).is_some_and(|r| r.starts_with('/'));
            if !under {
                continue;
            }
            let loaded = rules
                .entry(ignore.clone())
                .or_insert_with(|| sources.this_repo.ignore_rules(ignore.as_deref()).ok());
            if let Some(why) = loaded.as_ref().and_then(|r| sources.this_repo.why_left_out(r, file)) {
                reasons.insert(file.clone(), format!("{why}: Flux never reads it"));
                break;
            }
            if let Some(why) = generator_skips(&sources.this_repo.unfiltered(), path, file) {
                reasons.insert(file.clone(), why);
                break;
            }
        }
    }
    reasons
}

/// Why the generated kustomization of `path` does not read `file` (under it), if it does not.
fn generator_skips(root: &Path, path: &str, file: &str) -> Option<String> {
    let start = root.join(path);
    if flux::generator::kustomization_file(&start).is_some() {
        return None; // the kustomization file decides: what it names is what is read
    }
    let relative = Path::new(file).strip_prefix(path).ok()?;
    // A directory on the way with a kustomization file is read as that kustomization says.
    let mut dir = start.clone();
    for part in relative.parent().into_iter().flat_map(|p| p.components()) {
        dir.push(part);
        if flux::generator::kustomization_file(&dir).is_some() {
            return None;
        }
    }
    let name = relative.file_name()?.to_string_lossy();
    (!(name.ends_with(".yaml") || name.ends_with(".yml"))).then(|| {
        format!(
            "not a .yaml or .yml file (names are case-sensitive): the kustomization Flux generates for {path} \
             reads only those"
        )
    })
}

/// What rendering a candidate teaches: its index, the Kustomizations it produces (origin file,
/// name), and the operator syncs its objects declare.
type Learned = (usize, Vec<(String, String)>, Vec<InstanceSync>);

type Rendered = Result<(Vec<RenderedObject>, Vec<String>), RenderError>;

struct Context<'a> {
    renderer: &'a Renderer,
    opts: &'a RenderOptions,
    sources: &'a Sources<'a>,
    progress: &'a Progress,
    /// Results by identity and spec: a child whose rendered spec is the one written in its file
    /// reuses the render made while looking for roots.
    memo: &'a std::sync::Mutex<BTreeMap<String, Rendered>>,
    /// Objects ResourceSets generated so far in this render.
    generated: &'a AtomicUsize,
}

impl Context<'_> {
    /// Renders `spec` as a Kustomization of `cluster` (whose substitution values apply).
    /// `file` defines the Kustomization: it picks the nearest generator of an ExternalArtifact.
    fn render_objects(
        &self,
        spec: &Kustomization,
        file: Option<&str>,
        cluster: &str,
        inherited_secrets: &BTreeSet<String>,
    ) -> Rendered {
        let values_of = if self.opts.cluster_values.contains_key(cluster) { cluster } else { "" };
        let root = self.sources.tree(&spec.source_ref, file)?.ok_or_else(|| {
            RenderError::InvalidSource(format!("source {} is not available locally", spec.source_ref))
        })?;
        let key = yaml::canonical_json(&serde_json::json!([
            values_of,
            spec.namespace,
            spec.name,
            spec.raw["spec"],
            root.to_string_lossy()
        ]));
        if let Some(hit) = self.memo.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return hit.clone();
        }
        let result = self.render_uncached(&root, spec, values_of, inherited_secrets);
        self.memo.lock().unwrap_or_else(|e| e.into_inner()).insert(key, result.clone());
        result
    }

    /// Builds and post-processes one spec: the objects and the variables left unresolved.
    fn render_uncached(
        &self,
        root: &Path,
        spec: &Kustomization,
        values_of: &str,
        inherited_secrets: &BTreeSet<String>,
    ) -> Rendered {
        let builder = &self.renderer.builder;
        let tree = self.sources.this_repo.tree_ids(root);
        let values = self.opts.cluster_values.get(values_of).unwrap_or(&self.opts.values);
        let vars = postbuild::resolve_variables(spec, values.as_ref(), inherited_secrets);
        let strict = self.opts.strict_substitution;
        // Inputs git says are unchanged since this spec was finished with these values: the
        // finished render, without preparing the build.
        let warm_key = tree
            .as_ref()
            .zip(vars.as_ref().ok())
            .filter(|_| spec.source_ref.kind != artifacts::KIND)
            .and_then(|(tree, vars)| {
                finished::warm_key(&builder.kustomize.version, &tree.salt, spec, vars, strict)
            });
        let warm_hit = warm_key
            .as_ref()
            .and_then(|key| serde_json::from_str::<finished::Warm>(&builder.cache.get(key)?).ok())
            .filter(|warm| tree.as_ref().is_some_and(|tree| super::build::unchanged(&warm.ids, tree)))
            .and_then(|warm| finished::decode(&builder.cache.get(&warm.finished)?));
        if let Some(hit) = warm_hit {
            self.progress.tick(true);
            return Ok((hit.objects, hit.unresolved.into_iter().collect()));
        }
        let request = builder.prepare(root, spec, tree.as_ref())?;
        // An artifact's origins depend on its generator's layout, not only on the build.
        let finished_key = vars
            .as_ref()
            .ok()
            .filter(|_| spec.source_ref.kind != artifacts::KIND)
            .and_then(|vars| finished::key(&request.key, spec, vars, strict));
        let remember_warm = |finished_key: &str| {
            if let Some((key, ids)) = warm_key.as_deref().zip(request.input_ids.clone()) {
                let warm = finished::Warm { ids, finished: finished_key.to_string() };
                builder
                    .cache
                    .put(key, std::sync::Arc::new(serde_json::to_string(&warm).expect("JSON serializes")));
            }
        };
        if let Some(hit) =
            finished_key.as_ref().and_then(|key| builder.cache.get(key)).and_then(|t| finished::decode(&t))
        {
            remember_warm(finished_key.as_deref().unwrap_or_default());
            self.progress.tick(true);
            return Ok((hit.objects, hit.unresolved.into_iter().collect()));
        }
        // The finished render is what later runs read: kustomize's output goes to disk only when
        // that cannot be kept (values from Secrets).
        let mut built = builder.objects(&request, finished_key.is_none(), &self.opts.cancel)?;
        if spec.source_ref.kind == artifacts::KIND {
            for object in &mut built.objects {
                if let Some(file) = object.origin.as_deref().and_then(|o| self.sources.repo_origin(root, o)) {
                    object.origin = Some(file);
                }
            }
        } else if let Some(subpath) =
            self.sources.this_repo(&spec.source_ref).and_then(|r| r.subpath.as_deref())
        {
            // A directory of the repository as the artifact: its files are named from the top.
            for object in &mut built.objects {
                if let Some(origin) = &mut object.origin {
                    *origin = format!("{subpath}/{origin}");
                }
            }
        }
        self.progress.tick(built.cache_hit);
        let vars: Variables = vars?;
        let finished = postbuild::finish(built.objects, spec, &vars, strict)?;
        if let Some(key) = finished_key {
            builder.cache.put(&key, std::sync::Arc::new(finished::encode(&finished)));
            remember_warm(&key);
        }
        Ok((finished.objects, finished.unresolved.into_iter().collect()))
    }

    /// Renders every root and the Kustomizations their renders produce, level by level; returns
    /// the clusters and the (file, name) of every Kustomization reached.
    fn walk(
        &self,
        pool: &rayon::ThreadPool,
        mut roots: Vec<Root>,
    ) -> (Vec<Cluster>, BTreeSet<(String, String)>) {
        let mut clusters: Vec<Cluster> = Vec::new();
        let mut queue: Vec<Node> = Vec::new();
        let mut names = roots::cluster_names(&roots);
        roots::carry(&mut roots, &mut names, &self.opts.carried_roots);
        for (Root { spec, file, kind, .. }, name) in roots.into_iter().zip(names) {
            queue.push(Node {
                cluster: clusters.len(),
                cluster_name: name.clone(),
                inherited_secrets: BTreeSet::new(),
                shown_path: None,
                parent: None,
                file: file.clone(),
                ancestors: Vec::new(),
                is_root: true,
                unit: Pending::Kustomization(Box::new(spec.clone())),
            });
            clusters.push(Cluster {
                name,
                root: spec.reference(),
                found_by: kind,
                root_file: file,
                kustomizations: Vec::new(),
            });
        }
        let mut reached: BTreeSet<(String, String)> = BTreeSet::new();
        // Each cluster's Kustomizations by reference: a pull request can write many.
        let mut index: Vec<std::collections::HashMap<super::UnitRef, usize>> =
            vec![Default::default(); clusters.len()];
        // A stopped plan stops between levels too.
        while !queue.is_empty() && self.opts.cancel.check().is_ok() {
            let results: Vec<(Node, RenderedKustomization, Vec<Node>)> = pool.install(|| {
                std::mem::take(&mut queue)
                    .into_par_iter()
                    .map(|node| {
                        let (rendered, children) = self.render_node(&node);
                        (node, rendered, children)
                    })
                    .collect()
            });
            for (node, mut rendered, children) in results {
                let cluster = &mut clusters[node.cluster];
                if let Some(other) =
                    index[node.cluster].get(&rendered.unit_ref()).map(|&i| &mut cluster.kustomizations[i])
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
                        reached.insert((file.clone(), child.name()));
                    }
                }
                rendered.warnings.sort();
                index[node.cluster].insert(rendered.unit_ref(), cluster.kustomizations.len());
                cluster.kustomizations.push(rendered);
                queue.extend(children);
            }
        }
        (clusters, reached)
    }

    fn render_node(&self, node: &Node) -> (RenderedKustomization, Vec<Node>) {
        match &node.unit {
            Pending::Kustomization(spec) => self.render_kustomization(node, (**spec).clone()),
            Pending::ResourceSet(set) => self.render_resourceset(node, set),
        }
    }

    fn render_kustomization(
        &self,
        node: &Node,
        mut spec: Kustomization,
    ) -> (RenderedKustomization, Vec<Node>) {
        let mut record = RenderedKustomization::new(
            super::UnitKind::Kustomization,
            spec.reference(),
            node.shown_path.clone().unwrap_or_else(|| spec.path.clone()),
            spec.source_ref.clone(),
            node.parent.clone(),
            node.file.clone(),
        );
        if node.ancestors.len() >= super::build::MAX_NESTING {
            record.status = Status::Failed;
            record.error = Some(ErrorReport::from(&RenderError::Limit(format!(
                "Kustomizations nest more than {} levels deep (each applied by the one before): over fluxplan's \
                 limit, so this one is not planned",
                super::build::MAX_NESTING
            ))));
            record.spec = Some(spec);
            return (record, Vec::new());
        }
        // The root of an untrusted sync reads another source, though other clusters' syncs of the
        // same name may be this repository.
        let untrusted_root = node.is_root
            && self.sources.untrusted.iter().any(|sync| {
                sync.source_key() == spec.reference().to_string()
                    && roots::normalized_path(&sync.path) == roots::normalized_path(&spec.path)
            });
        if untrusted_root || matches!(self.sources.tree(&spec.source_ref, node.file.as_deref()), Ok(None)) {
            record.status = Status::External;
            record.warnings.push(self.sources.external_reason(&spec.source_ref, node.file.as_deref()));
            record.source_adds = self.sources.adds_of(&spec.source_ref).map(str::to_string);
            record.spec = Some(spec);
            return (record, Vec::new());
        }
        let mut result =
            self.render_objects(&spec, node.file.as_deref(), &node.cluster_name, &node.inherited_secrets);
        // A root that renders its own definition is reconciled with that rendered definition.
        for _ in 0..ROOT_FIXPOINT_ROUNDS {
            let Ok((objects, _)) = &result else { break };
            if !node.is_root {
                break;
            }
            // Reconciled with the real definition; shown with the masked path.
            let own = objects.iter().find(|o| is_self(o, &spec, node.file.as_deref())).and_then(|o| {
                let real =
                    Kustomization::from_value(o.real.as_ref().unwrap_or(&o.object), &spec.namespace).ok()?;
                let shown = o.object["spec"]["path"].as_str().map(str::to_string);
                Some((real, shown))
            });
            match own {
                Some((own, shown)) if own.raw["spec"] != spec.raw["spec"] => {
                    record.path = shown.unwrap_or_else(|| own.path.clone());
                    spec = own;
                    result = self.render_objects(
                        &spec,
                        node.file.as_deref(),
                        &node.cluster_name,
                        &node.inherited_secrets,
                    );
                }
                _ => break,
            }
        }
        let mut children = Vec::new();
        match result {
            Err(error) => {
                record.status = Status::Failed;
                let mut report = ErrorReport::from(&error);
                if let Some(shown) = &node.shown_path {
                    // The real path holds values substituted from Secrets: never show it.
                    report.message = report.message.replace(&spec.path, shown);
                }
                record.error = Some(report);
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
                children = self.nested(node, &spec.reference(), Some(&spec), &objects, &mut record);
                record.objects = objects;
            }
        }
        record.spec = Some(spec);
        (record, children)
    }

    /// The units among `objects` a unit applies: Kustomizations (but the unit itself, `own`) and
    /// ResourceSets, to render next; a cycle fails `record`.
    fn nested(
        &self,
        node: &Node,
        parent: &KustomizationRef,
        own: Option<&Kustomization>,
        objects: &[RenderedObject],
        record: &mut RenderedKustomization,
    ) -> Vec<Node> {
        let mut ancestors = node.ancestors.clone();
        ancestors.push(parent.clone());
        // A ResourceSet reads the providers applied beside it (and above it); one holding values
        // substituted from Secrets would show them in what it generates.
        let mut providers: Option<(std::sync::Arc<Vec<Value>>, bool)> = None;
        let mut children = Vec::new();
        let child = |unit: Pending, object: &RenderedObject, shown_path: Option<String>| Node {
            cluster: node.cluster,
            cluster_name: node.cluster_name.clone(),
            inherited_secrets: secret_substitutes(object),
            shown_path,
            unit,
            parent: Some(parent.clone()),
            file: object.origin.clone(),
            ancestors: ancestors.clone(),
            is_root: false,
        };
        for object in objects {
            let manifest = object.real.as_ref().unwrap_or(&object.object);
            let is_set = flux::resourceset::is_resourceset(&object.object);
            if !is_set && !is_flux_kustomization(&object.object) {
                continue;
            }
            if own.is_some_and(|spec| is_self(object, spec, node.file.as_deref())) {
                continue;
            }
            if manifest["metadata"]["namespace"].as_str().is_none() {
                continue; // reported as "namespace not specified" when ids are assigned
            }
            if is_set {
                let (providers, secret_providers) = providers.get_or_insert_with(|| {
                    let here: Vec<&RenderedObject> =
                        objects.iter().filter(|o| flux::resourceset::is_input_provider(&o.object)).collect();
                    let (inherited, inherited_secrets) = match &node.unit {
                        Pending::ResourceSet(set) => (set.providers.as_slice(), set.secret_providers),
                        Pending::Kustomization(_) => (&[][..], false),
                    };
                    let secrets =
                        inherited_secrets || here.iter().any(|o| o.holds_secret_values || o.real.is_some());
                    let all =
                        here.iter().map(|o| o.real.as_ref().unwrap_or(&o.object)).chain(inherited).cloned();
                    (std::sync::Arc::new(all.collect()), secrets)
                });
                let set = PendingSet {
                    manifest: manifest.clone(),
                    holds_secret_values: object.holds_secret_values || object.real.is_some(),
                    providers: providers.clone(),
                    secret_providers: *secret_providers,
                };
                children.push(child(Pending::ResourceSet(std::sync::Arc::new(set)), object, None));
                continue;
            }
            match Kustomization::from_value(manifest, "") {
                Ok(spec) if ancestors.contains(&spec.reference()) => {
                    let cycle: Vec<String> = ancestors
                        .iter()
                        .skip_while(|a| **a != spec.reference())
                        .chain([&spec.reference()])
                        .map(|a| a.to_string())
                        .collect();
                    record.status = Status::Failed;
                    record.error = Some(ErrorReport::from(&RenderError::Cycle(format!(
                        "Kustomization cycle: {}",
                        cycle.join(" → ")
                    ))));
                }
                Ok(spec) => {
                    let shown_path = object
                        .real
                        .as_ref()
                        .and_then(|_| object.object["spec"]["path"].as_str().map(str::to_string));
                    children.push(child(Pending::Kustomization(Box::new(spec)), object, shown_path));
                }
                Err(e) => record.warnings.push(format!("nested {}: {e}", postbuild::describe(manifest))),
            }
        }
        children
    }

    /// A ResourceSet as the Flux Operator builds it: its templates for every input set, with the
    /// Kustomizations and ResourceSets it generates to render next.
    fn render_resourceset(&self, node: &Node, set: &PendingSet) -> (RenderedKustomization, Vec<Node>) {
        let meta = &set.manifest["metadata"];
        let reference = KustomizationRef {
            namespace: meta["namespace"].as_str().unwrap_or("").to_string(),
            name: meta["name"].as_str().unwrap_or("").to_string(),
        };
        let no_source =
            flux::SourceRef { kind: String::new(), name: String::new(), namespace: String::new() };
        let mut record = RenderedKustomization::new(
            super::UnitKind::ResourceSet,
            reference.clone(),
            String::new(),
            no_source,
            node.parent.clone(),
            node.file.clone(),
        );
        let mut unit = super::resourceset::ResourceSetUnit {
            disabled: flux::resourceset::disabled_by(&set.manifest, flux::resourceset::RECONCILE_ANNOTATION),
            ..Default::default()
        };
        if node.ancestors.len() >= super::build::MAX_NESTING {
            record.status = Status::Failed;
            record.error = Some(ErrorReport::from(&RenderError::Limit(format!(
                "units nest more than {} levels deep: over fluxplan's limit, so this one is not planned",
                super::build::MAX_NESTING
            ))));
            return (record, Vec::new());
        }
        if set.holds_secret_values || set.secret_providers {
            record.status = Status::External;
            let what =
                if set.holds_secret_values { "its spec" } else { "an input provider applied beside it" };
            record.warnings.push(format!(
                "{what} holds values substituted from a Secret: not expanded, so they cannot show in its objects"
            ));
            record.resourceset = Some(Box::new(unit));
            return (record, Vec::new());
        }
        let live = self.opts.input_providers.as_deref().map(Vec::as_slice);
        let providers = super::resourceset::Providers { rendered: &set.providers, live };
        if let Err(reason) = self.opts.cancel.check() {
            record.status = Status::Failed;
            record.error = Some(ErrorReport::from(&RenderError::Cancelled(reason)));
            return (record, Vec::new());
        }
        let mut children = Vec::new();
        match super::resourceset::expand(&set.manifest, &providers) {
            Err(error) => {
                record.status = Status::Failed;
                record.error = Some(ErrorReport::from(&match error {
                    super::resourceset::ExpandError::Invalid(why) => {
                        RenderError::Template(format!("this ResourceSet is not built: {why}"))
                    }
                    super::resourceset::ExpandError::Limit(why) => {
                        RenderError::Limit(format!("this ResourceSet is not planned: {why}"))
                    }
                }));
            }
            Ok(super::resourceset::Expansion::Unknown(why)) => {
                record.status = Status::External;
                record.warnings.push(why);
            }
            Ok(super::resourceset::Expansion::Built { objects, .. })
                if self.generated.fetch_add(objects.len(), Ordering::Relaxed) + objects.len()
                    > MAX_GENERATED_OBJECTS =>
            {
                record.status = Status::Failed;
                record.error = Some(ErrorReport::from(&RenderError::Limit(format!(
                    "ResourceSets generate more than {MAX_GENERATED_OBJECTS} objects in this render: over fluxplan's \
                     limit, so this one is not planned"
                ))));
            }
            Ok(super::resourceset::Expansion::Built { objects, input_sets, notes }) => {
                record.warnings.extend(notes);
                unit.input_sets = Some(input_sets);
                let mut built = Vec::with_capacity(objects.len());
                for (object, input) in objects {
                    let meta = &object["metadata"];
                    let (kind, namespace, name) = (
                        object["kind"].as_str().unwrap_or(""),
                        meta["namespace"].as_str().unwrap_or(""),
                        meta["name"].as_str().unwrap_or(""),
                    );
                    if let Some(from) = meta["annotations"][flux::resourceset::COPY_FROM_ANNOTATION].as_str()
                    {
                        unit.copied_from.insert(from.to_string());
                    }
                    if let Some(input) = input {
                        unit.inputs.insert(
                            super::resourceset::ResourceSetUnit::object_key(kind, namespace, name),
                            input,
                        );
                    }
                    built.push(super::build::BuiltObject { object, origin: node.file.clone() });
                }
                record.objects = postbuild::plain(built);
                let objects = std::mem::take(&mut record.objects);
                children = self.nested(node, &reference, None, &objects, &mut record);
                record.objects = objects;
            }
        }
        record.resourceset = Some(Box::new(unit));
        (record, children)
    }
}

/// The Flux Operator syncs the objects of each rendered Kustomization declare.
fn declared_syncs(clusters: &[Cluster], chart_sources: &[&Value]) -> Vec<InstanceSync> {
    let renders = clusters.iter().flat_map(|c| &c.kustomizations);
    renders
        .flat_map(|k| {
            let sourced: Vec<Sourced> = k
                .objects
                .iter()
                .map(|o| (o.real.as_ref().unwrap_or(&o.object), o.origin.as_deref()))
                .collect();
            roots::instance_syncs(&sourced, chart_sources)
        })
        .collect()
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
        // Argo CD applies namespaced objects without a namespace into the destination's.
        // Helm installs them into the release's namespace.
        let default_namespace = match (&k.argocd, &k.helm) {
            (Some(unit), _) => unit.application.as_ref().and_then(|a| a.destination.namespace.clone()),
            (None, Some(helm)) => Some(helm.release_namespace.clone()),
            (None, None) => None,
        };
        for object in &mut k.objects {
            let (group, _) = flux::split_api_version(object.object["apiVersion"].as_str().unwrap_or(""));
            let kind = object.object["kind"].as_str().unwrap_or("");
            if let Some(namespace) = &default_namespace {
                let namespaced = scopes.scope_of(group, kind) != Scope::Cluster;
                let meta = object.object.get_mut("metadata").and_then(Value::as_object_mut);
                if let Some(meta) = meta.filter(|_| namespaced) {
                    if meta.get("namespace").and_then(Value::as_str).unwrap_or("").is_empty() {
                        meta.insert("namespace".into(), Value::String(namespace.clone()));
                    }
                    // The real name too (a Helm object named from a Secret's value).
                    if let Some(real) =
                        object.real_name.as_mut().filter(|r| r.namespace.as_deref().unwrap_or("").is_empty())
                    {
                        real.namespace = Some(namespace.clone());
                    }
                }
            }
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

/// Scans the repository's YAML files that mention Flux (with their text) for Kustomization,
/// GitRepository and Flux Operator manifests.
fn discover(root: &Path, flux_files: &[(PathBuf, String)]) -> Discovered {
    let mut kustomizations = Vec::new();
    let mut repositories = Vec::new();
    let mut operator_objects: Vec<(Value, String)> = Vec::new();
    for (file, text) in flux_files {
        if !text.contains("toolkit.fluxcd.io") && !text.contains("FluxInstance") {
            continue;
        }
        // Files that are not YAML (Helm values templates, CI files) are simply not manifests.
        let Ok(docs) = yaml::parse_documents(text) else {
            continue;
        };
        let rel = paths::relative(root, file);
        for doc in docs {
            let api = doc["apiVersion"].as_str().unwrap_or("");
            let kind = doc["kind"].as_str().unwrap_or("");
            let group = flux::split_api_version(api).0;
            if is_flux_kustomization(&doc) {
                let name = doc["metadata"]["name"].as_str().unwrap_or("").to_string();
                let namespace = doc["metadata"]["namespace"].as_str().map(str::to_string);
                let spec = Kustomization::from_value(&doc, BOOTSTRAP_SOURCE.0).map_err(|e| e.to_string());
                let is_fragment = doc["spec"].get("sourceRef").is_none();
                kustomizations.push(DiskKustomization {
                    file: rel.clone(),
                    name,
                    namespace,
                    spec,
                    is_fragment,
                });
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
                    adds: adds_to_its_tree(&doc["spec"]),
                });
            } else if matches!(kind, "FluxInstance" | "HelmRelease" | "OCIRepository") {
                operator_objects.push((doc, rel.clone()));
            }
        }
    }
    let sourced: Vec<Sourced> = operator_objects.iter().map(|(o, f)| (o, Some(f.as_str()))).collect();
    let syncs = roots::instance_syncs(&sourced, &[]);
    let chart_sources: Vec<Value> =
        operator_objects.iter().map(|(o, _)| o.clone()).filter(|o| o["kind"] == "OCIRepository").collect();
    let declared: BTreeSet<&str> = syncs.iter().filter_map(|s| s.file.as_deref()).collect();
    let hidden_sync_files = operator_objects
        .iter()
        .filter(|(o, file)| !declared.contains(file.as_str()) && roots::may_declare_sync(o, &chart_sources))
        .map(|(_, file)| file.clone())
        .collect();
    Discovered { kustomizations, git_repositories: repositories, syncs, chart_sources, hidden_sync_files }
}

fn collect_yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let _ = crate::tree::walk::<crate::tree::Unreadable>(dir, |entry, file_type| {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if file_type.is_file() && (name.ends_with(".yaml") || name.ends_with(".yml")) {
            out.push(entry.path());
        }
        Ok(crate::tree::Descend::Yes)
    });
}

/// What a render counts as it goes (for its log line), and its part of the progress line.
pub(super) struct Progress {
    lane: Option<super::progress::Lane>,
    done: AtomicUsize,
    cached: AtomicUsize,
}

impl Progress {
    fn new(lane: Option<super::progress::Lane>) -> Self {
        if let Some(lane) = &lane {
            lane.start();
        }
        Progress { lane, done: AtomicUsize::new(0), cached: AtomicUsize::new(0) }
    }

    /// The Kustomizations the revision's files define.
    fn set_total(&self, total: usize) {
        if let Some(lane) = &self.lane {
            lane.set_total(total);
        }
    }

    pub(super) fn tick(&self, cache_hit: bool) {
        self.done.fetch_add(1, Ordering::Relaxed);
        self.cached.fetch_add(usize::from(cache_hit), Ordering::Relaxed);
        if let Some(lane) = &self.lane {
            lane.tick(cache_hit);
        }
    }

    fn finish(&self) {
        if let Some(lane) = &self.lane {
            lane.finish();
        }
    }
}

/// A render that ends, however it ends, leaves the progress line.
impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
