//! The one way to make a plan: a [`Request`] (repository, base, head, where cluster knowledge
//! and the policy come from, limits, a cancel token) in, a [`Plan`] out. The CLI and the bot's
//! workers both call [`plan`]; neither knows the other, and this module knows neither.

pub mod clusters;
mod coverage;
mod images;
pub mod locations;
mod policy_source;

pub use clusters::{read_cluster_helm, read_clusters_file, ClusterHelm, ClusterKnowledge, ClusterSource};
pub use policy_source::PolicySource;

use crate::cancel::{CancelReason, CancelToken};
use crate::cluster::kube::KubeOptions;
use crate::plan::{make_plan, Plan, PlanRequest, Policy, Revision};
use crate::render::roots::CarriedRoot;
use crate::render::source::{SourceLimitExceeded, SourceLimits};
use crate::render::{Render, RenderError, RenderOptions, Renderer};
use anyhow::{Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_KUSTOMIZE_TIMEOUT_SECS: u64 = crate::render::kustomize::DEFAULT_TIMEOUT_SECS;
/// Ten minutes: a real fleet plans in seconds; a plan this slow is an attack or a bug.
pub const DEFAULT_PLAN_TIMEOUT_SECS: u64 = 600;

/// How much work a repository may ask for: every breach is a `source-limit` alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// One kustomize build.
    pub kustomize_timeout: Duration,
    /// The memory of each helm and kustomize process (bytes).
    pub render_memory: u64,
    /// The exported source: one file's size, the total size and file count.
    pub source: SourceLimits,
    /// The whole plan; then its kustomize processes are killed.
    pub plan_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            kustomize_timeout: Duration::from_secs(DEFAULT_KUSTOMIZE_TIMEOUT_SECS),
            render_memory: crate::sandbox::DEFAULT_MEMORY_LIMIT,
            source: SourceLimits::default(),
            plan_timeout: Duration::from_secs(DEFAULT_PLAN_TIMEOUT_SECS),
        }
    }
}

/// Where a plan's knowledge of its clusters comes from.
#[derive(Debug, Clone, Default)]
pub enum Clusters {
    /// None: the base render stands for every inventory.
    #[default]
    Offline,
    /// One snapshot file for every root (unless the file names its root).
    Snapshot(PathBuf),
    /// The live cluster (read-only) for every root.
    Live(KubeOptions),
    /// A clusters file mapping each root to a context or a snapshot; roots not listed are planned
    /// offline (with a `cluster-not-covered` warning). Contexts are read with `kube`'s options.
    PerRoot { file: PathBuf, kube: KubeOptions },
}

/// How to render, beyond the limits.
#[derive(Debug, Clone)]
pub struct RenderSettings {
    /// Other sources mapped to local directories, keyed `namespace/name`.
    pub sources: BTreeMap<String, PathBuf>,
    /// Other URLs of the repository (Argo CD `repoURL`s rendered from it), beyond its remotes.
    pub repo_urls: Vec<String>,
    /// Undefined variables fail the Kustomization (controller 1.9 on).
    pub strict_substitution: bool,
    /// Parallel kustomize builds; `None`: the number of cores.
    pub jobs: Option<usize>,
    /// The on-disk render cache; `None` (the default): memory only.
    pub cache_dir: Option<PathBuf>,
    /// A progress line on stderr when it is a terminal.
    pub progress: bool,
    pub helm: HelmSettings,
    /// Base and head share the finished renders both read (see `Renderer::with_shared_decodes`);
    /// off only in the test that checks sharing changes no plan.
    #[doc(hidden)]
    pub share_decodes: bool,
}

/// How HelmReleases are rendered.
#[derive(Debug, Clone)]
pub struct HelmSettings {
    /// Charts given by hand (`--chart`), keyed by HelmRelease `namespace/name`.
    pub charts: BTreeMap<String, PathBuf>,
    /// The Helm major version helm-controller runs.
    pub major: u8,
    /// `.Capabilities.KubeVersion` for charts; `None`: the live cluster's, else Helm's default.
    pub kube_version: Option<String>,
    /// Where charts may be fetched from.
    pub fetch: crate::charts::Settings,
}

impl Default for HelmSettings {
    fn default() -> Self {
        HelmSettings { charts: BTreeMap::new(), major: 4, kube_version: None, fetch: Default::default() }
    }
}

impl HelmSettings {
    pub fn apply(&self, opts: &mut RenderOptions) {
        opts.charts = self.charts.clone();
        opts.helm_major = self.major;
        opts.chart_settings = self.fetch.clone();
        if self.kube_version.is_some() {
            opts.kube_version = self.kube_version.clone();
        }
    }
}

impl Default for RenderSettings {
    fn default() -> Self {
        RenderSettings {
            sources: BTreeMap::new(),
            repo_urls: Vec::new(),
            strict_substitution: true,
            jobs: None,
            cache_dir: None,
            progress: false,
            helm: HelmSettings::default(),
            share_decodes: true,
        }
    }
}

/// Everything a plan is made from.
#[derive(Clone)]
pub struct Request {
    /// The Flux repository: a git checkout, or a bare mirror.
    pub repo: PathBuf,
    /// How messages name the repository (the bot: `owner/name`, not its mirror's path);
    /// `None`: its path.
    pub repo_name: Option<String>,
    /// The revision merged into (its policy applies).
    pub base: String,
    /// The revision being merged.
    pub head: String,
    pub clusters: Clusters,
    pub policy: PolicySource,
    pub render: RenderSettings,
    pub limits: Limits,
    /// Stops the plan from outside (superseded, shutting down); the plan timeout is added to it.
    pub cancel: CancelToken,
}

impl Request {
    /// A request with the defaults: offline, the base revision's policy, default limits.
    pub fn new(repo: impl Into<PathBuf>, base: impl Into<String>, head: impl Into<String>) -> Self {
        Request {
            repo: repo.into(),
            repo_name: None,
            base: base.into(),
            head: head.into(),
            clusters: Clusters::Offline,
            policy: PolicySource::BaseRevision,
            render: RenderSettings::default(),
            limits: Limits::default(),
            cancel: CancelToken::new(),
        }
    }

    /// Render options for `rev` (no cluster values yet).
    pub fn render_options(&self, rev: Option<String>) -> RenderOptions {
        let mut opts = RenderOptions::new(&self.repo);
        opts.rev = rev;
        opts.sources = self.render.sources.clone();
        opts.repo_urls = self.render.repo_urls.clone();
        self.render.helm.apply(&mut opts);
        // Argo CD sources that follow the branch merged into read the tree being planned.
        opts.planned_branch =
            crate::git::branch_of(&self.repo, &self.base).or_else(|| crate::git::current_branch(&self.repo));
        opts.keep_exports = self.render.cache_dir.is_some();
        opts.strict_substitution = self.render.strict_substitution;
        if let Some(jobs) = self.render.jobs {
            opts.jobs = jobs.max(1);
        }
        opts.kustomize_timeout = self.limits.kustomize_timeout;
        opts.memory_limit = self.limits.render_memory;
        opts.limits = self.limits.source;
        opts.cancel = self.cancel.clone();
        opts
    }
}

/// The plan; a failure to make it is a plan with verdict `failed` (exit 3), never a crash. A
/// failure over a limit also carries a `source-limit` alert, so it is never mistaken for an
/// infrastructure hiccup. It runs on a thread whose stack holds what the render may nest.
pub fn plan(request: &Request) -> Plan {
    let work = || plan_here(request);
    crate::stack::on_render_stack("fluxplan-plan", work).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot start a planning thread: planning on this one");
        work()
    })
}

fn plan_here(request: &Request) -> Plan {
    // The base commit, resolved once: the policy read before rendering, the base render and a
    // failed plan must name the same one, whatever a fetch does to the branch meanwhile. A failed
    // plan names its commits, where git knows them: the bot's resync compares the base it
    // planned against with the branch tip, so a plan that fails the same way each time is not
    // made again and again while the base stands still.
    let base_resolved = crate::git::resolve_commit(&request.repo, &request.base);
    // A revision the repository does not hold fails the plan before anything renders, said once
    // with its fix (a shallow clone, a mistyped name), not once per render that tries it.
    if let Some(plan) = unknown_revision(request, &base_resolved) {
        return plan;
    }
    let base_commit = base_resolved.ok();
    let _deadline = request.cancel.deadline(request.limits.plan_timeout.max(Duration::from_secs(1)));
    match try_plan(request, base_commit.as_deref()) {
        Ok(plan) => plan,
        Err(error) => {
            let base = Revision { rev: request.base.clone(), commit: base_commit };
            let head = Revision {
                rev: request.head.clone(),
                commit: crate::git::resolve_commit(&request.repo, &request.head).ok(),
            };
            let mut plan = Plan::failed(base, head, format!("{error:#}"));
            if let Some(limit) = limit_breach(&error) {
                plan.alerts.extend(Policy::default().general_alert("source-limit", limit));
            }
            plan
        }
    }
}

/// The failed plan of a request whose base or head the repository does not hold.
fn unknown_revision(request: &Request, base: &Result<String>) -> Option<Plan> {
    let head = crate::git::resolve_commit(&request.repo, &request.head);
    let unknown = |role: &str, resolved: &Result<String>| {
        let error = resolved.as_ref().err()?.downcast_ref::<crate::git::UnknownRevision>()?;
        Some(format!("{role} {error}"))
    };
    let errors: Vec<String> = [unknown("base", base), unknown("head", &head)].into_iter().flatten().collect();
    if errors.is_empty() {
        return None;
    }
    let revision = |rev: &str, resolved: &Result<String>| Revision {
        rev: rev.to_string(),
        commit: resolved.as_ref().ok().cloned(),
    };
    Some(Plan::failed(revision(&request.base, base), revision(&request.head, &head), errors.join("\n")))
}

/// The limit an error is about, if it is about one.
fn limit_breach(error: &anyhow::Error) -> Option<String> {
    error.chain().find_map(|cause| {
        if let Some(exceeded) = cause.downcast_ref::<SourceLimitExceeded>() {
            return Some(exceeded.to_string());
        }
        match cause.downcast_ref::<RenderError>() {
            Some(RenderError::Cancelled(reason @ CancelReason::TimedOut(_))) => Some(reason.to_string()),
            _ => None,
        }
    })
}

fn try_plan(request: &Request, base_commit: Option<&str>) -> Result<Plan> {
    let sources = cluster_sources(&request.clusters)?;
    let listed_roots: BTreeSet<String> = sources.keys().filter(|root| !root.is_empty()).cloned().collect();
    let knowledge = ClusterKnowledge::gather(sources)?;
    let renderer = Renderer::new(request.limits.kustomize_timeout, request.render.cache_dir.clone())?
        .with_memory_limit(request.limits.render_memory)
        .with_shared_decodes(request.render.share_decodes);
    // An unknown revision is left for the render to report.
    let base_commit = base_commit.map_or_else(|| request.base.clone(), str::to_string);
    let declared = request.policy.before_render(&request.repo, &base_commit).unwrap_or_default();
    // What the pull request changes: the renders explain those no Kustomization reads. An
    // unknown revision is left for the render to report.
    let head_commit = crate::git::resolve_commit(&request.repo, &request.head).ok();
    let changed = head_commit
        .as_deref()
        .and_then(|head| crate::git::changed_files(&request.repo, &base_commit, head).ok())
        .unwrap_or_default();
    // Charts are fetched only from hosts the base revision's or the cluster's sources already use
    // (or the operator allows): a pull request cannot point fluxplan anywhere new.
    let mut base_urls = crate::charts::base_source_urls(&request.repo, &base_commit);
    // And the sources the cluster runs now.
    base_urls.extend(
        knowledge
            .snapshots
            .iter()
            .flat_map(|s| s.objects.values())
            .filter(|o| {
                crate::flux::split_api_version(o["apiVersion"].as_str().unwrap_or("")).0
                    == crate::flux::SOURCE_GROUP
            })
            .filter_map(|o| o["spec"]["url"].as_str().map(str::to_string)),
    );
    let cluster_helm = match &request.clusters {
        Clusters::PerRoot { file, .. } => read_cluster_helm(file)?,
        _ => BTreeMap::new(),
    };
    // Offline, the base revision stands for what is installed: its releases render as upgrades,
    // and so do the head's that the base has (the head waits for the base's walk to know them).
    let base_releases = std::sync::Arc::new(crate::render::helm::installed::BaseReleases::default());
    // One progress line on a terminal, naming base and head.
    let board = if request.render.progress { crate::render::progress::Board::for_terminal() } else { None };
    let render = |side: &str,
                  rev: &str,
                  shown: &str,
                  carried_roots: Vec<CarriedRoot>,
                  kept,
                  base_syncs|
     -> Result<Render> {
        let mut opts = request.render_options(Some(rev.to_string()));
        opts.progress = board.as_ref().map(|board| board.lane(side));
        opts.base_syncs = base_syncs;
        opts.chart_settings.known_urls = Some(base_urls.clone());
        opts.cluster_helm = cluster_helm.clone();
        opts.explain = changed.clone();
        opts.carried_roots = carried_roots;
        opts.kept_applications = kept;
        knowledge.apply_to(&mut opts);
        use crate::render::helm::installed::Installed;
        if matches!(opts.installed_releases, Installed::Unknown) {
            opts.installed_releases = match side {
                "base" => Installed::Base(base_releases.clone()),
                _ => Installed::Head(base_releases.clone()),
            };
        }
        opts.declared_scopes = declared.crd_scopes.clone();
        opts.declared_roots = declared.roots.clone();
        opts.declared_sources = declared.sources.clone();
        renderer.render(&opts).with_context(|| format!("cannot render revision {shown}"))
    };
    // However the base's render ends (a panic included), the head is told: nothing known, if it
    // ended before it knew.
    let told = crate::render::helm::installed::Installed::Base(base_releases.clone()).publisher();
    // Base and head render side by side: exports, discovery and builds of the two overlap.
    let (base, head) = std::thread::scope(|scope| -> Result<_> {
        let head = std::thread::Builder::new()
            .name("fluxplan-head".into())
            .stack_size(crate::stack::RENDER_STACK_BYTES)
            .spawn_scoped(scope, || {
                render("head", &request.head, &request.head, Vec::new(), BTreeMap::new(), None)
            })
            .context("cannot start a thread to render the head")?;
        let base = render("base", &base_commit, &request.base, Vec::new(), BTreeMap::new(), None);
        drop(told);
        Ok((base, head.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))))
    })?;
    let base = base?;
    // A bootstrap root the head no longer declares is still in the cluster, reconciling head:
    // head is rendered again with it (from the cache) when base has a cluster head lacks.
    // Likewise when an ApplicationSet that never updates what it generated would change an
    // Application it made: the Application keeps its spec.
    let carried = CarriedRoot::of(&base);
    let head = head?;
    let kept = crate::render::kept_applications(&base, &head);
    // And when the pull request adds a Flux Operator sync, or points one elsewhere: its source is
    // this repository only if the base revision says so.
    let new_syncs = head.syncs.iter().any(|sync| !base.syncs.iter().any(|b| b.same_source(sync)));
    let head = if carried.iter().any(|root| head.clusters.iter().all(|c| c.name != root.name))
        || !kept.is_empty()
        || new_syncs
    {
        render("head", &request.head, &request.head, carried, kept, Some(base.syncs.clone()))?
    } else {
        head
    };
    // A plan from a directory below the repository's top, whose paths Flux reads from the top,
    // plans what Flux would never do: the hint alone, no plan buried under its alerts.
    if let Some(hint) = coverage::rendered_below_top(request, &base, &head) {
        anyhow::bail!(hint);
    }
    // A plan of nothing is a gate that passes on nothing: a wrong --repo must fail, not pass.
    if base.clusters.is_empty() && head.clusters.is_empty() {
        anyhow::bail!(coverage::nothing_to_plan(request, &head));
    }
    let (policy, policy_source, mut extra_alerts) = request.policy.load(&request.repo, &base, &head)?;
    extra_alerts.extend(coverage::alerts(
        request,
        &listed_roots,
        &knowledge.snapshots,
        &policy,
        &base,
        &head,
    ));
    extra_alerts.extend(pinned_sources(request, &policy));
    // The images the merge brings, asked of their registries under the charts' host policy.
    let mut image_settings = request.render.helm.fetch.clone();
    image_settings.known_urls = Some(base_urls.clone());
    extra_alerts.extend(images::alerts(&image_settings, &policy, &base, &head, &request.cancel));
    // Every changed file is accounted for: planned, read by a unit not rendered, or by none.
    let changed_files = match (&base.revision, &head.revision) {
        // The commits rendered are those diffed (a branch may have moved meanwhile).
        (Some(b), Some(h)) if *b == base_commit && Some(h) == head_commit.as_ref() => changed,
        (Some(b), Some(h)) => crate::git::changed_files(&request.repo, b, h)?,
        _ => Vec::new(),
    };
    let changed_symlinks = match &head.revision {
        Some(h) if !changed_files.is_empty() => crate::git::symlinks_among(&request.repo, h, &changed_files)?,
        _ => Default::default(),
    };
    let ask = |root: &str, ids: &[crate::flux::ObjectId]| knowledge.blast_radius(root, ids);
    let mut plan = make_plan(PlanRequest {
        base: &base,
        head: &head,
        base_rev: request.base.clone(),
        head_rev: request.head.clone(),
        snapshots: &knowledge.snapshots.iter().collect::<Vec<_>>(),
        blast_radius: knowledge.has_live().then_some(&ask as &crate::plan::BlastRadiusQuery),
        degraded: knowledge.degraded(),
        policy: &policy,
        policy_source,
        extra_alerts,
        changed_files: changed_files.clone(),
        changed_symlinks,
    });
    // The lines that cause each alert, read from the commits rendered.
    locations::fill(
        &mut plan,
        &locations::Sources {
            repo: &request.repo,
            base_commit: base.revision.as_deref(),
            head_commit: head.revision.as_deref(),
            changed: &changed_files,
            base: &base,
            head: &head,
        },
    );
    tracing::info!(requests = knowledge.request_count(), "cluster reads");
    Ok(plan)
}

/// A `--source` directory is read as it is now, for base and head alike: the plan says so.
fn pinned_sources(request: &Request, policy: &Policy) -> Vec<crate::plan::Alert> {
    let pinned = request.render.sources.iter().filter_map(|(key, dir)| {
        policy.general_alert(
            "source-pinned",
            format!(
                "source {key} is read from {} as it is now, for base and head alike: changes to it are not planned",
                dir.display()
            ),
        )
    });
    let charts = request.render.helm.charts.iter().filter_map(|(key, chart)| {
        policy.general_alert(
            "source-pinned",
            format!(
                "the chart of HelmRelease {key} is read from {} (--chart), for base and head alike: a change of \
                 its chart in this pull request is not planned",
                chart.display()
            ),
        )
    });
    pinned.chain(charts).collect()
}

/// The sources of cluster knowledge per root ("" applies to every root).
fn cluster_sources(clusters: &Clusters) -> Result<BTreeMap<String, ClusterSource>> {
    let mut sources = BTreeMap::new();
    match clusters {
        Clusters::Offline => {}
        Clusters::Snapshot(path) => {
            sources.insert(String::new(), ClusterSource::Snapshot(path.clone()));
        }
        Clusters::Live(options) => {
            sources.insert(String::new(), ClusterSource::Live(options.clone()));
        }
        Clusters::PerRoot { file, kube } => sources.extend(read_clusters_file(file, kube)?),
    }
    Ok(sources)
}
