//! The walk: find the roots of a repository, render each through its engine (`engine.rs`), and
//! follow the Kustomizations and ResourceSets their objects apply (with the spec as rendered)
//! until every reachable one is rendered; then the HelmReleases of each cluster and the Argo CD
//! walk.

use super::artifacts::{self, Generators};
use super::build::Builder;
use super::cache::RenderCache;
use super::engine::{Engine, Node, Pending, PendingSet};
use super::kustomize::unit::{is_self, BuildInputs, KustomizationEngine};
use super::kustomize::Kustomize;
use super::local_sources::{
    adds_to_its_tree, learned_adds, DiskGitRepository, KnownSources, Sources, BOOTSTRAP_SOURCE,
};
use super::postbuild;
use super::progress::Progress;
use super::reach;
use super::resourceset::unit::ResourceSetEngine;
use super::roots::{self, Candidate, DeclaredSource, InstanceSync, Root, Sourced};
use super::source::ExportedSource;
use super::{
    Cluster, ErrorReport, Render, RenderError, RenderOptions, RenderStats, RenderedKustomization,
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
use std::sync::Arc;
use std::time::Duration;

/// How often roots are chosen again because the walk found syncs they were not chosen by.
const SYNC_ROUNDS: usize = 3;

/// Renders repositories; keeps the kustomize runner and cache between renders (the base and
/// head of a plan share them).
pub struct Renderer {
    builder: Builder,
    helm: super::helm::Toolkit,
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
        Renderer { builder, helm: super::helm::Toolkit::new(cache_dir) }
    }

    /// Whether base and head share the finished renders they both read (decoded once, one copy
    /// of each manifest); on by default. Off only to check that sharing changes no plan.
    pub fn with_shared_decodes(mut self, on: bool) -> Self {
        self.builder.decoded = super::finished::Decoded::new(on);
        self
    }

    /// Every helm and kustomize process of this renderer's renders runs under `bytes` of memory
    /// (`--max-render-memory`).
    pub fn with_memory_limit(mut self, bytes: u64) -> Self {
        self.builder.kustomize.memory_limit = bytes;
        self.helm.memory_limit = bytes;
        self
    }

    pub fn kustomize_version(&self) -> &str {
        &self.builder.kustomize.version
    }

    /// What the chart store did for this renderer: parts it wrote, and chart archives it read
    /// and decompressed (each once per digest when cold, none when warm).
    pub fn chart_store_counts(&self) -> (usize, usize) {
        (self.helm.prepared.store.written(), self.helm.prepared.loaded())
    }

    /// How many chart directories (of a GitRepository, or given with `--chart`) were hashed and
    /// scanned: once per directory, whatever the releases that use it.
    pub fn chart_directories_read(&self) -> usize {
        self.helm.prepared.directories_read()
    }
}

/// Renders with a fresh renderer (no on-disk cache).
pub fn render(opts: &RenderOptions) -> Result<Render> {
    Renderer::new(opts.kustomize_timeout, None)?.with_memory_limit(opts.memory_limit).render(opts)
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
        // A plan's base tells its head which releases it installs, however it ends.
        let publisher = opts.installed_releases.publisher();
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

        let memo = Default::default();
        let inputs = BuildInputs::default();
        let kustomizations = KustomizationEngine {
            builder: &self.builder,
            opts,
            sources: &sources,
            progress: &progress,
            memo: &memo,
            inputs: &inputs,
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
        // The Kustomizations that can render here: those of sources fluxplan has, not every one
        // the files define (a Kustomization of another repository is listed, never rendered).
        progress.set_total(candidates.len());
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
                    let made = kustomizations
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
            let ctx = Context {
                opts,
                kustomizations: KustomizationEngine {
                    builder: &self.builder,
                    opts,
                    sources: &sources,
                    progress: &progress,
                    memo: &memo,
                    inputs: &inputs,
                },
                resourcesets: ResourceSetEngine { opts, generated: AtomicUsize::new(0) },
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
        // Every HelmRelease a Kustomization applies, rendered from its chart as a unit below it,
        // once its cluster is walked: its values may come from anything the cluster applies.
        if let Some(publisher) = publisher {
            publisher.publish(super::helm::units::releases_of(&clusters));
        }
        let access = opts.chart_settings.access(&super::helm::applied_source_urls(&clusters));
        let templates =
            |key: &str, run: &dyn Fn() -> Result<super::helm::Release, super::kustomize::BuildError>| {
                self.helm.template(&self.builder.cache, key, run)
            };
        let charts = super::helm::Charts {
            helm: self.helm.helm(opts.helm_major),
            fetching: access.as_ref().map(|access| (&self.helm.store, access)).map_err(Clone::clone),
            templates: &templates,
            prepared: &self.helm.prepared,
            kube_version: opts.kube_version.as_deref(),
            api_versions: &opts.api_versions,
        };
        let source_tree = |source: &flux::SourceRef| sources.tree(source, None).ok().flatten();
        let kustomize =
            |dir: &Path, readable: &Path| self.builder.kustomize.build(dir, readable, &opts.cancel);
        pool.install(|| {
            super::helm::units::add_all(&mut clusters, &charts, &self.helm, opts, &source_tree, &kustomize)
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
                let key = format!("{}/{}", k.source.namespace, k.source.name);
                let repo = sources.this_repo_keys.get(&key)?;
                // A directory of the repository as the artifact: its paths start there.
                let path =
                    Path::new(repo.subpath.as_deref().unwrap_or("")).join(k.path.trim_start_matches('/'));
                let path = crate::paths::normalize(&path)?;
                Some((path.to_string_lossy().into_owned(), repo.ignore.clone()))
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
        let read_by_builds =
            read_by_builds(&opts.explain, &clusters, &inputs.into_inner().unwrap_or_default());
        Ok(Render {
            revision: this_repo.commit.clone(),
            clusters,
            unreachable,
            warnings,
            source_limits,
            kustomize: self.builder.kustomize.version.clone(),
            stats: RenderStats { builds, cache_hits },
            this_repo_sources: sources.this_repo_keys.keys().cloned().collect(),
            this_repo_artifacts: sources.this_repo_artifacts(),
            kube_versions,
            untrusted_syncs: sources.untrusted.clone(),
            syncs,
            not_read: not_read(&opts.explain, &clusters_for_explain, &sources),
            read_by_builds,
            ignored: ignored(&opts.explain, &clusters_for_explain, &sources),
            units: Default::default(),
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

/// The files of `files` that the build of a rendered Kustomization reads (`inputs`, recorded as
/// each was built): a base it reaches with `../`, a file an ArtifactGenerator copies into the
/// artifact it builds from.
fn read_by_builds(
    files: &[String],
    clusters: &[Cluster],
    inputs: &BTreeMap<(String, String), BTreeSet<String>>,
) -> BTreeSet<String> {
    let read: BTreeSet<&String> = clusters
        .iter()
        .flat_map(|c| &c.kustomizations)
        .filter(|k| k.kind == super::UnitKind::Kustomization && k.status == Status::Rendered)
        .filter_map(|k| inputs.get(&(k.namespace.clone(), k.name.clone())))
        .flatten()
        .collect();
    files.iter().filter(|file| read.contains(file)).cloned().collect()
}

/// The files of `files` that every source of `units` (Kustomizations rendered from this
/// repository) leaves out of its artifact; none when no such Kustomization is rendered.
fn ignored(files: &[String], units: &[(String, Option<String>)], sources: &Sources) -> BTreeSet<String> {
    let ignores: BTreeSet<&Option<String>> = units.iter().map(|(_, ignore)| ignore).collect();
    let rules: Vec<_> =
        ignores.iter().filter_map(|ignore| sources.this_repo.ignore_rules(ignore.as_deref()).ok()).collect();
    if rules.is_empty() || rules.len() < ignores.len() {
        return BTreeSet::new();
    }
    files
        .iter()
        .filter(|file| rules.iter().all(|rules| sources.this_repo.would_leave_out(rules, file)))
        .cloned()
        .collect()
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

/// One walk: the engines it renders units with, and what it counts.
struct Context<'a> {
    opts: &'a RenderOptions,
    kustomizations: KustomizationEngine<'a>,
    resourcesets: ResourceSetEngine<'a>,
}

impl Context<'_> {
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
        for (Root { spec, file, kind, instance_patches, .. }, name) in roots.into_iter().zip(names) {
            queue.push(Node {
                cluster: clusters.len(),
                cluster_name: name.clone(),
                inherited_secrets: BTreeSet::new(),
                secret_spec: None,
                parent: None,
                file: file.clone(),
                ancestors: Vec::new(),
                is_root: true,
                instance_patches,
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

    /// A unit rendered by its engine, and the units its objects apply.
    fn render_node(&self, node: &Node) -> (RenderedKustomization, Vec<Node>) {
        let mut record = match &node.unit {
            Pending::Kustomization(spec) => self.kustomizations.render(node, spec),
            Pending::ResourceSet(set) => self.resourcesets.render(node, set),
        };
        // A Kustomization's record holds its spec (a root reconciled with its own rendered
        // definition, that definition): its children name it, and it is not its own child.
        let own = record.spec.clone();
        let parent = own.as_ref().map(Kustomization::reference).unwrap_or_else(|| KustomizationRef {
            namespace: record.namespace.clone(),
            name: record.name.clone(),
        });
        let objects = std::mem::take(&mut record.objects);
        let children = self.nested(node, &parent, own.as_ref(), &objects, &mut record);
        record.objects = objects;
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
        let child = |unit: Pending, object: &RenderedObject, secret_spec: Option<String>| Node {
            cluster: node.cluster,
            cluster_name: node.cluster_name.clone(),
            inherited_secrets: secret_substitutes(object),
            secret_spec,
            unit,
            parent: Some(parent.clone()),
            file: object.origin.clone(),
            ancestors: ancestors.clone(),
            is_root: false,
            instance_patches: String::new(),
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
                Ok(spec) => match secret_spec_fields(object) {
                    // Shown as masked, never rendered: which path renders would tell the value.
                    Some(fields) => match Kustomization::from_value(&object.object, "") {
                        Ok(shown) => children.push(child(
                            Pending::Kustomization(Box::new(shown)),
                            object,
                            Some(fields),
                        )),
                        Err(e) => record
                            .warnings
                            .push(format!("nested {}: {e}", postbuild::describe(&object.object))),
                    },
                    None => children.push(child(Pending::Kustomization(Box::new(spec)), object, None)),
                },
                Err(e) => record.warnings.push(format!("nested {}: {e}", postbuild::describe(manifest))),
            }
        }
        children
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

/// The fields of a nested Kustomization's spec, other than `postBuild.substitute`, its parent
/// substitutes from Secrets (`spec.path`), when any.
pub(super) fn secret_spec_fields(object: &RenderedObject) -> Option<String> {
    let fields = &object.secret_template.spec_fields;
    (!fields.is_empty()).then(|| fields.join(", "))
}

/// Inline `substitute` variables of a nested Kustomization its parent substitutes from Secrets.
fn secret_substitutes(object: &RenderedObject) -> BTreeSet<String> {
    object.secret_template.substitutes.clone()
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
            match identify(object, default_namespace.as_deref(), &scopes) {
                Err(Unidentified::NoNamespace(what)) => missing_namespace.push(what),
                Err(Unidentified::UnknownScope(kind)) => {
                    unknown_scope.insert(kind);
                }
                Ok(()) => {}
            }
        }
        // A release's hooks are no objects of it, but the plan names them by id too (Helm
        // creates them in the release's namespace when they name none).
        for hook in k.helm.iter_mut().flat_map(|h| &mut h.hook_objects) {
            if let Err(Unidentified::UnknownScope(kind)) =
                identify(&mut hook.object, default_namespace.as_deref(), &scopes)
            {
                unknown_scope.insert(kind);
            }
        }
        k.objects.sort_by(|a, b| a.id.cmp(&b.id));
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

/// Why an object's id is not sound.
enum Unidentified {
    /// A namespaced object without a namespace (`Kind/name`): the apply fails.
    NoNamespace(String),
    /// A kind whose scope nothing told (`Kind.group`).
    UnknownScope(String),
}

/// Gives one object its id, filling in `default_namespace` (an Application's destination, a
/// release's namespace) where a namespaced object names none.
fn identify(
    object: &mut RenderedObject,
    default_namespace: Option<&str>,
    scopes: &ScopeMap,
) -> Result<(), Unidentified> {
    let (group, _) = flux::split_api_version(object.object["apiVersion"].as_str().unwrap_or(""));
    let kind = object.object["kind"].as_str().unwrap_or("");
    if let Some(namespace) = default_namespace {
        let namespaced = scopes.scope_of(group, kind) != Scope::Cluster;
        let meta = Arc::make_mut(&mut object.object).get_mut("metadata").and_then(Value::as_object_mut);
        if let Some(meta) = meta.filter(|_| namespaced) {
            if meta.get("namespace").and_then(Value::as_str).unwrap_or("").is_empty() {
                meta.insert("namespace".into(), Value::String(namespace.to_string()));
            }
        }
    }
    let manifest = &object.object;
    let (group, _) = flux::split_api_version(manifest["apiVersion"].as_str().unwrap_or(""));
    let kind = manifest["kind"].as_str().unwrap_or("");
    let namespace = manifest["metadata"]["namespace"].as_str().unwrap_or("");
    let name = manifest["metadata"]["name"].as_str().unwrap_or("");
    let scope = scopes.scope_of(group, kind);
    let id_namespace = if scope == Scope::Cluster { "" } else { namespace };
    let id = ObjectId::new(id_namespace, name, group, kind);
    let sound = match scope {
        Scope::Namespaced if namespace.is_empty() => Err(Unidentified::NoNamespace(format!("{kind}/{name}"))),
        Scope::Unknown => Err(Unidentified::UnknownScope(format!("{kind}.{group}"))),
        _ => Ok(()),
    };
    object.id = Some(id);
    sound
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
