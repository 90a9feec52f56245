//! The Argo CD walk: find the Applications and ApplicationSets of a repository, render each
//! source as the repo-server does (kustomize with Argo CD's overrides, or a directory of plain
//! manifests), and follow app-of-apps and ApplicationSets until every reachable one is rendered.

mod directory;
mod permission;

use super::build::Builder;
use super::helm::argo_credentials::Credentials;
use super::progress::Progress;
use super::source::ExportedSource;
use super::{
    postbuild, Cluster, ErrorReport, RenderError, RenderOptions, RenderedKustomization, RenderedObject,
    RootKind, Status, UnitKind,
};
use crate::argocd::application::{DirectoryOptions, Source};
use crate::argocd::applicationset::{ApplicationSet, RepoTree};
use crate::argocd::revision::{self, Resolved};
use crate::argocd::{self, sync_options, Application, SourceKind};
use crate::flux::generator::kustomization_file;
use crate::flux::{KustomizationRef, SourceRef};
use crate::{paths, yaml};
use rayon::prelude::*;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The namespace Argo CD runs in, where Applications applied without one live.
const ARGOCD_NAMESPACE: &str = "argocd";

/// What an Argo CD unit (an Application or an ApplicationSet) is, beyond its objects.
#[derive(Debug, Clone, Serialize)]
pub struct ArgoUnit {
    /// The Application (for an ApplicationSet: none).
    #[serde(skip)]
    pub application: Option<Application>,
    /// The ApplicationSet's policy (for an Application: none).
    #[serde(skip)]
    pub application_set: Option<ApplicationSet>,
    /// Sync hooks: run on every sync, never tracked as managed resources.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
    /// What it reads in this repository, as repository paths (see `argocd::reads`).
    #[serde(skip)]
    pub reads: Vec<String>,
    /// Not planned because a revision it reads cannot be resolved here (see `Unrendered`).
    #[serde(skip)]
    pub unknown_revision: bool,
}

impl ArgoUnit {
    /// True when what Git no longer holds is deleted: an automated sync with prune, or an
    /// ApplicationSet allowed to delete the Applications it generated.
    pub fn prunes(&self) -> bool {
        match (&self.application, &self.application_set) {
            (Some(app), _) => app.prunes(),
            (None, Some(set)) => set.applications_sync.deletes(),
            (None, None) => false,
        }
    }
}

/// A hook and the phases it runs in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hook {
    /// `Kind namespace/name`.
    pub object: String,
    pub phases: Vec<String>,
}

/// An Application or ApplicationSet manifest in the repository's files.
struct DiskUnit {
    file: String,
    manifest: Value,
    reference: KustomizationRef,
}

/// One unit waiting to be rendered.
struct Node {
    cluster: usize,
    /// The cluster's name (its root's reference): what kept Applications are looked up under.
    cluster_name: String,
    manifest: Value,
    reference: KustomizationRef,
    parent: Option<KustomizationRef>,
    file: Option<String>,
    ancestors: Vec<KustomizationRef>,
}

/// What rendering a unit gives: its managed objects and hooks.
type Output = Result<(Vec<RenderedObject>, Vec<Hook>), Unrendered>;

#[derive(Clone)]
enum Unrendered {
    /// Its source is not rendered here (another repository, Helm, a plugin): listed, not planned.
    External(String),
    /// A revision it reads that this repository cannot resolve (a semver range, an unknown name):
    /// what it syncs is not known here.
    UnknownRevision(String),
    Failed(RenderError),
}

impl From<RenderError> for Unrendered {
    fn from(error: RenderError) -> Self {
        Unrendered::Failed(error)
    }
}

pub(super) struct ArgoWalk<'a> {
    pub builder: &'a Builder,
    pub source: &'a ExportedSource,
    /// The tree being planned, as Applications of this repository read it.
    planned: Arc<TreeView>,
    /// Normalized URLs that name this repository.
    pub this_repo: BTreeSet<String>,
    pub opts: &'a RenderOptions,
    pub progress: &'a Progress,
    memo: Mutex<BTreeMap<String, Output>>,
    /// The branch the plan merges into (see `RenderOptions::planned_branch`).
    planned_branch: Option<String>,
    /// The repository's refs, listed once (see `revision::resolve`).
    refs: OnceLock<Vec<revision::Ref>>,
    /// Other revisions sources and generators pin, exported once each, by commit.
    pinned: Mutex<BTreeMap<String, Result<Arc<TreeView>, String>>>,
    /// The symbolic links of each commit read (exports leave them out; the repo-server follows
    /// those that stay in the repository), by commit.
    links: Mutex<BTreeMap<String, Arc<BTreeMap<String, String>>>>,
    /// Helm, charts and the template cache, for Helm sources.
    charts: super::helm::Charts<'a>,
}

/// One revision of the repository as the repo-server reads it: every file, no ignore rule.
struct TreeView {
    /// The export of a pinned revision (the planned tree's export is the walk's own).
    export: Option<ExportedSource>,
    tree: PathBuf,
    listing: OnceLock<(Vec<String>, Vec<String>)>,
}

impl TreeView {
    fn new(export: Option<ExportedSource>, tree: PathBuf) -> Self {
        TreeView { export, tree, listing: OnceLock::new() }
    }

    fn listing(&self) -> &(Vec<String>, Vec<String>) {
        self.listing.get_or_init(|| {
            let (mut dirs, mut files) = (Vec::new(), Vec::new());
            list_tree(&self.tree, &self.tree, &mut dirs, &mut files);
            dirs.sort();
            files.sort();
            (dirs, files)
        })
    }
}

impl RepoTree for TreeView {
    fn directories(&self) -> Vec<String> {
        self.listing().0.clone()
    }
    fn files(&self) -> Vec<String> {
        self.listing().1.clone()
    }
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(paths::secure_join(&self.tree, path)).ok()
    }
}

/// True when a file may hold an Argo CD manifest (kept while exporting, see `note_manifest`).
pub fn mentions_argocd(text: &[u8]) -> bool {
    memchr::memmem::find(text, argocd::GROUP.as_bytes()).is_some()
}

impl<'a> ArgoWalk<'a> {
    pub fn new(
        builder: &'a Builder,
        source: &'a ExportedSource,
        tree: PathBuf,
        remotes: &BTreeSet<String>,
        opts: &'a RenderOptions,
        progress: &'a Progress,
        charts: super::helm::Charts<'a>,
    ) -> Self {
        let this_repo =
            remotes.iter().chain(&opts.repo_urls).map(|u| argocd::normalize_repo_url(u)).collect();
        let planned_branch = opts.planned_branch.clone().or_else(|| {
            opts.rev
                .as_deref()
                .and_then(|rev| crate::git::branch_of(&opts.repo, rev))
                .or_else(|| crate::git::current_branch(&opts.repo))
        });
        ArgoWalk {
            builder,
            source,
            planned: Arc::new(TreeView::new(None, tree)),
            this_repo,
            opts,
            progress,
            memo: Mutex::default(),
            planned_branch,
            refs: OnceLock::new(),
            pinned: Mutex::default(),
            links: Mutex::default(),
            charts,
        }
    }

    /// The tree a source or git generator reads at `revision` (as written in the spec), or why
    /// it cannot be known here.
    fn tree_at(&self, revision: Option<&str>) -> Result<Arc<TreeView>, String> {
        let refs = self.refs.get_or_init(|| {
            crate::git::refs(&self.opts.repo)
                .inspect_err(|e| tracing::debug!("no refs: {e:#}"))
                .unwrap_or_default()
                .into_iter()
                .map(|(name, commit)| revision::Ref { name, commit })
                .collect()
        });
        let commit = match revision::resolve(revision, self.planned_branch.as_deref(), refs) {
            Resolved::Planned => return Ok(self.planned.clone()),
            Resolved::Unresolvable(why) => return Err(why),
            Resolved::Ref { commit, .. } => commit,
            // Hexadecimal only: git reads it as a revision, never as an option.
            Resolved::Commit(hex) => crate::git::resolve_commit(&self.opts.repo, &hex)
                .map_err(|_| format!("no commit '{hex}' in this repository"))?,
        };
        if self.source.commit.as_deref() == Some(commit.as_str())
            || self.opts.planned_commits.contains(&commit)
        {
            return Ok(self.planned.clone());
        }
        let mut pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        pinned
            .entry(commit.clone())
            .or_insert_with(|| {
                let export = ExportedSource::export(&self.opts.repo, Some(&commit), self.opts.limits)
                    .map_err(|e| format!("cannot export {commit}: {e:#}"))?;
                let tree = export.unfiltered();
                Ok(Arc::new(TreeView::new(Some(export), tree)))
            })
            .clone()
    }

    /// The symbolic links of the commit `export` holds (none for a working tree: its copy
    /// leaves them out with a warning).
    fn links_of(&self, export: &ExportedSource) -> Result<Arc<BTreeMap<String, String>>, RenderError> {
        let Some(commit) = &export.commit else { return Ok(Arc::default()) };
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = links.get(commit) {
            return Ok(known.clone());
        }
        let read = crate::git::symlinks(&self.opts.repo, commit).map_err(|e| {
            RenderError::InvalidSource(format!("cannot read the symbolic links of {commit}: {e:#}"))
        })?;
        let read = Arc::new(read.into_iter().collect::<BTreeMap<_, _>>());
        links.insert(commit.clone(), read.clone());
        Ok(read)
    }

    fn is_this_repo(&self, url: &str) -> bool {
        self.this_repo.contains(&argocd::normalize_repo_url(url))
    }

    /// Renders every Application reachable from the repository's roots: one cluster per root
    /// (an Application or ApplicationSet no other Application renders). `files` are the
    /// repository's YAML files that mention Argo CD (path, text).
    pub fn walk(
        &self,
        pool: &rayon::ThreadPool,
        files: &[(String, String)],
        warnings: &mut Vec<String>,
    ) -> Vec<Cluster> {
        let disk = discover(files, warnings);
        if disk.is_empty() {
            return Vec::new();
        }
        // Which files' units each unit's render produces: those are not roots.
        let produced: BTreeSet<(String, String)> = pool.install(|| {
            disk.par_iter()
                .filter(|d| argocd::is_application(&d.manifest))
                .flat_map_iter(|d| {
                    let made = match Application::from_value(&d.manifest, ARGOCD_NAMESPACE) {
                        Ok(app) => self.render_app(&app).map(|(objects, _)| objects).unwrap_or_default(),
                        Err(_) => Vec::new(),
                    };
                    made.into_iter()
                        .filter(|o| {
                            argocd::is_application(&o.object) || argocd::is_application_set(&o.object)
                        })
                        .filter_map(|o| Some((o.origin?, o.object["metadata"]["name"].as_str()?.to_string())))
                        .filter(|(file, name)| !(*file == d.file && *name == d.reference.name))
                        .collect::<Vec<_>>()
                })
                .collect()
        });
        let mut clusters = Vec::new();
        let mut queue = Vec::new();
        for unit in disk.iter().filter(|d| !produced.contains(&(d.file.clone(), d.reference.name.clone()))) {
            queue.push(Node {
                cluster: clusters.len(),
                cluster_name: unit.reference.to_string(),
                manifest: unit.manifest.clone(),
                reference: unit.reference.clone(),
                parent: None,
                file: Some(unit.file.clone()),
                ancestors: Vec::new(),
            });
            clusters.push(Cluster {
                name: unit.reference.to_string(),
                root: unit.reference.clone(),
                found_by: RootKind::ArgoCd,
                root_file: Some(unit.file.clone()),
                kustomizations: Vec::new(),
            });
        }
        // Each cluster's units by reference: a pull request can write many.
        let mut index: Vec<HashMap<KustomizationRef, usize>> = vec![HashMap::new(); clusters.len()];
        // A stopped plan stops here too: directory sources never reach kustomize, which checks.
        while !queue.is_empty() && self.opts.cancel.check().is_ok() {
            let results: Vec<(usize, RenderedKustomization, Vec<Node>)> = pool.install(|| {
                std::mem::take(&mut queue)
                    .into_par_iter()
                    .map(|node| {
                        let (rendered, children) = self.render_node(&node);
                        (node.cluster, rendered, children)
                    })
                    .collect()
            });
            for (cluster, mut rendered, children) in results {
                let units = &mut clusters[cluster].kustomizations;
                if let Some(other) = index[cluster].get(&rendered.reference()).map(|&i| &mut units[i]) {
                    other.warnings.push(format!(
                        "also produced by {}: two definitions of one {} fight over it",
                        rendered.parent.as_ref().map(|p| p.to_string()).unwrap_or_default(),
                        rendered.kind.as_str()
                    ));
                    continue;
                }
                rendered.warnings.sort();
                index[cluster].insert(rendered.reference(), units.len());
                units.push(rendered);
                queue.extend(children);
            }
        }
        // What only unreached units produce (a cycle of Applications with no root) is never
        // synced by anything this repository holds: said, not silently dropped.
        let rendered: BTreeSet<KustomizationRef> =
            clusters.iter().flat_map(|c| &c.kustomizations).map(|k| k.reference()).collect();
        for unit in disk.iter().filter(|d| !rendered.contains(&d.reference)) {
            warnings.push(format!(
                "{}: {} {} is not reached from any root (only Applications no root reaches render it): not planned",
                unit.file,
                unit.manifest["kind"].as_str().unwrap_or("Application"),
                unit.reference
            ));
        }
        clusters
    }

    fn render_node(&self, node: &Node) -> (RenderedKustomization, Vec<Node>) {
        let is_set = argocd::is_application_set(&node.manifest);
        let mut record = RenderedKustomization::new(
            if is_set { UnitKind::ApplicationSet } else { UnitKind::Application },
            node.reference.clone(),
            String::new(),
            SourceRef { kind: "repoURL".into(), namespace: String::new(), name: String::new() },
            node.parent.clone(),
            node.file.clone(),
        );
        let mut unit = ArgoUnit {
            application: None,
            application_set: None,
            hooks: Vec::new(),
            reads: Vec::new(),
            unknown_revision: false,
        };
        if node.ancestors.len() >= super::build::MAX_NESTING {
            record.status = Status::Failed;
            record.error = Some(ErrorReport::from(&RenderError::Limit(format!(
                "Applications nest more than {} levels deep: over fluxplan's limit, so this one is not planned",
                super::build::MAX_NESTING
            ))));
            record.argocd = Some(Box::new(unit));
            return (record, Vec::new());
        }
        let is_this_repo = |url: &str| self.is_this_repo(url);
        let output = if is_set {
            match ApplicationSet::from_value(&node.manifest, &node.reference.namespace) {
                Ok(set) => {
                    let output = self.expand(&node.cluster_name, &set, &mut record);
                    unit.reads = argocd::reads::of_application_set(&set, &is_this_repo);
                    unit.application_set = Some(set);
                    output
                }
                Err(e) => Err(Unrendered::Failed(RenderError::InvalidSpec(e))),
            }
        } else {
            match Application::from_value(&node.manifest, &node.reference.namespace) {
                Ok(app) => {
                    record.path =
                        app.sources.iter().filter_map(|s| s.path.clone()).collect::<Vec<_>>().join(", ");
                    record.source.name =
                        app.sources.iter().map(|s| s.repo_url.clone()).collect::<Vec<_>>().join(", ");
                    let output = self.render_app(&app);
                    unit.reads = argocd::reads::of_application(&app, &is_this_repo);
                    unit.application = Some(app);
                    output
                }
                Err(e) => Err(Unrendered::Failed(RenderError::InvalidSpec(e.to_string()))),
            }
        };
        let mut children = Vec::new();
        match output {
            Err(Unrendered::External(why)) => {
                record.status = Status::External;
                record.warnings.push(why);
            }
            Err(Unrendered::UnknownRevision(why)) => {
                record.status = Status::External;
                record.warnings.push(why);
                unit.unknown_revision = true;
            }
            Err(Unrendered::Failed(error)) => {
                record.status = Status::Failed;
                record.error = Some(ErrorReport::from(&error));
            }
            Ok((objects, hooks)) => {
                let mut ancestors = node.ancestors.clone();
                ancestors.push(node.reference.clone());
                let default_namespace = unit
                    .application
                    .as_ref()
                    .and_then(|a| a.destination.namespace.clone())
                    .unwrap_or_else(|| node.reference.namespace.clone());
                for object in &objects {
                    let manifest = &*object.object;
                    if !(argocd::is_application(manifest) || argocd::is_application_set(manifest)) {
                        continue;
                    }
                    let name = manifest["metadata"]["name"].as_str().unwrap_or("").to_string();
                    let namespace =
                        manifest["metadata"]["namespace"].as_str().unwrap_or(&default_namespace).to_string();
                    let reference = KustomizationRef { namespace, name };
                    if reference == node.reference {
                        continue; // an app-of-apps that manages itself
                    }
                    if ancestors.contains(&reference) {
                        record.status = Status::Failed;
                        record.error = Some(ErrorReport::from(&RenderError::Cycle(format!(
                            "Application cycle: {} → {reference}",
                            ancestors.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(" → ")
                        ))));
                        continue;
                    }
                    let mut manifest = manifest.clone();
                    if let Some(meta) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.insert("namespace".into(), Value::String(reference.namespace.clone()));
                    }
                    children.push(Node {
                        cluster: node.cluster,
                        cluster_name: node.cluster_name.clone(),
                        manifest,
                        reference,
                        parent: Some(node.reference.clone()),
                        file: object.origin.clone(),
                        ancestors: ancestors.clone(),
                    });
                }
                if record.status == Status::Failed {
                    children.clear();
                }
                record.objects = objects;
                unit.hooks = hooks;
            }
        }
        record.argocd = Some(Box::new(unit));
        (record, children)
    }

    /// The Applications an ApplicationSet generates, as its objects.
    fn expand(&self, cluster: &str, set: &ApplicationSet, record: &mut RenderedKustomization) -> Output {
        record.path = set.describe_generators();
        let unknown_revision = std::sync::atomic::AtomicBool::new(false);
        let tree_at = |revision: Option<&str>| {
            let tree = self.tree_at(revision);
            if tree.is_err() {
                unknown_revision.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            tree
        };
        let expansion = set
            .expand(&|url| self.is_this_repo(url), &tree_at)
            .map_err(|e| Unrendered::Failed(RenderError::InvalidSpec(e)))?;
        if !expansion.external.is_empty() {
            let why =
                format!("ApplicationSet {}/{}: {}", set.namespace, set.name, expansion.external.join("; "));
            return Err(if unknown_revision.into_inner() {
                Unrendered::UnknownRevision(why)
            } else {
                Unrendered::External(why)
            });
        }
        let mut kept = Vec::new();
        let built = expansion
            .applications
            .into_iter()
            .map(|object| {
                let reference =
                    KeptApplication::new(cluster, set.namespace.clone(), set.name.clone(), &object);
                let object = match self.opts.kept_applications.get(&reference) {
                    Some(before) if !set.applications_sync.updates() => {
                        kept.push(reference.application.to_string());
                        before.clone()
                    }
                    _ => object,
                };
                super::build::BuiltObject { object, origin: None }
            })
            .collect();
        if !kept.is_empty() {
            record.warnings.push(format!(
                "applicationsSync is {}: the controller does not update the Applications it generated, so {} keep \
                 their current spec (the template's changes apply to new Applications only)",
                set.applications_sync.as_str(),
                kept.join(", ")
            ));
        }
        Ok((postbuild::plain(built), Vec::new()))
    }

    /// Renders every source of an Application (memoized by its spec).
    fn render_app(&self, app: &Application) -> Output {
        // Before the memo: it is keyed by spec, and the project decides before any fetch.
        permission::admit(self.opts.values.as_ref(), app)?;
        let key = yaml::canonical_json(&app.raw["spec"]);
        if let Some(hit) = self.memo.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return hit.clone();
        }
        let result = self.render_sources(app);
        self.memo.lock().unwrap_or_else(|e| e.into_inner()).insert(key, result.clone());
        result
    }

    fn render_sources(&self, app: &Application) -> Output {
        let mut built = Vec::new();
        for source in &app.sources {
            if source.reference.is_some() && source.path.is_none() {
                continue; // only read for values by other sources
            }
            built.extend(self.render_source(app, source)?);
        }
        let mut objects = Vec::new();
        let mut hooks = Vec::new();
        for object in postbuild::plain(built) {
            match sync_options::hook_phases(&object.object["metadata"]) {
                Some(phases) if phases.iter().all(|p| p == "Skip") => {}
                Some(phases) => {
                    let meta = &object.object["metadata"];
                    let namespace =
                        meta["namespace"].as_str().or(app.destination.namespace.as_deref()).unwrap_or("");
                    hooks.push(Hook {
                        object: crate::flux::id::display_name(
                            object.object["kind"].as_str().unwrap_or(""),
                            namespace,
                            meta["name"].as_str().or(meta["generateName"].as_str()).unwrap_or(""),
                        ),
                        phases,
                    });
                }
                None => objects.push(object),
            }
        }
        Ok((objects, hooks))
    }

    /// A Helm source: the chart in `dir`, its value files read from `dir` (within `root`), or
    /// `$REF/path` from a `ref` source of this repository.
    fn render_helm(
        &self,
        app: &Application,
        dir: &Path,
        root: &Path,
        digest: Option<&str>,
        options: &argocd::application::HelmOptions,
    ) -> Result<Vec<super::build::BuiltObject>, Unrendered> {
        let read = |file: &str| -> Result<Option<String>, super::helm::argo::NotRendered> {
            use super::helm::argo::NotRendered;
            let (base, relative) = match file.strip_prefix('$').and_then(|f| f.split_once('/')) {
                Some((name, relative)) => {
                    let referenced =
                        app.sources.iter().find(|s| s.reference.as_deref() == Some(name)).ok_or_else(
                            || NotRendered::Failed(format!("value file {file}: no source has ref {name}")),
                        )?;
                    if !self.is_this_repo(&referenced.repo_url) {
                        return Err(NotRendered::External(format!(
                            "value file {file} is in {}, which is not this repository",
                            crate::git::redact_url(&referenced.repo_url)
                        )));
                    }
                    let view = self
                        .tree_at(referenced.target_revision.as_deref())
                        .map_err(|why| NotRendered::External(format!("value file {file}: {why}")))?;
                    (view.tree.clone(), relative.to_string())
                }
                None => {
                    let inside = dir.strip_prefix(root).unwrap_or(Path::new(""));
                    (root.to_path_buf(), inside.join(file).to_string_lossy().into_owned())
                }
            };
            // The repo-server refuses a path that climbs out of the repository; so does fluxplan.
            let Some(normalized) = paths::normalize(Path::new(relative.trim_start_matches('/'))) else {
                return Err(NotRendered::Failed(format!("value file {file} leaves the repository")));
            };
            match std::fs::read_to_string(base.join(normalized)) {
                Ok(text) => Ok(Some(text)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(NotRendered::Failed(format!("value file {file}: {e}"))),
            }
        };
        let source = super::helm::argo::Source {
            chart: dir,
            digest,
            options,
            application: &app.name,
            namespace: app.destination.namespace.as_deref(),
            read: &read,
        };
        let objects =
            super::helm::argo::render(&self.charts, &source, &self.opts.cancel).map_err(|e| match e {
                super::helm::argo::NotRendered::External(why) => {
                    Unrendered::External(format!("{why}: this Application is not planned"))
                }
                super::helm::argo::NotRendered::Failed(why) => {
                    Unrendered::Failed(RenderError::InvalidSource(format!(
                        "Helm source of Application {}/{}: {why}",
                        app.namespace, app.name
                    )))
                }
            })?;
        self.progress.tick(false);
        Ok(objects.into_iter().map(|object| super::build::BuiltObject { object, origin: None }).collect())
    }

    fn render_source(
        &self,
        app: &Application,
        source: &Source,
    ) -> Result<Vec<super::build::BuiltObject>, Unrendered> {
        let url = crate::git::redact_url(&source.repo_url);
        if let Some(chart) = &source.chart {
            // A chart of a Helm repository or registry: fetched by the same rules as HelmReleases'.
            let request =
                super::helm::argo::request(&source.repo_url, chart, source.target_revision.as_deref());
            // Argo CD's repository credentials: Secrets of its namespace in the live cluster only.
            let credentials = Credentials::of(self.opts.values.as_ref(), &source.repo_url, &app.project)
                .map_err(|why| {
                    Unrendered::External(format!(
                        "Helm chart {chart} from {url}: {why}; this Application is not planned"
                    ))
                })?;
            let login = crate::charts::credentials::SourceCredentials {
                auth: credentials.auth().cloned(),
                tls: None,
            };
            let fetched = self.charts.fetch_chart(&request, &login).map_err(|why| {
                Unrendered::External(format!(
                    "Helm chart {chart} from {url} could not be had ({request}): {}; this Application is not planned",
                    credentials.explain(&why)
                ))
            })?;
            // Unpacked once per digest, in the chart store: the repo-server renders the directory.
            let dir = self
                .charts
                .prepared
                .store
                .unpacked(&fetched.archive, &fetched.digest)
                .map_err(|e| RenderError::InvalidSource(format!("the chart {chart} from {url}: {e}")))?;
            let options = match &source.kind {
                SourceKind::Helm(options) => options.as_ref().clone(),
                _ => Default::default(),
            };
            return self.render_helm(app, &dir, &dir, Some(&fetched.digest), &options);
        }
        if !self.is_this_repo(&source.repo_url) {
            return Err(Unrendered::External(format!(
                "source {url} is not this repository: not rendered (if it is, name it with --repo-url {url})"
            )));
        }
        let path = source.path.as_deref().ok_or_else(|| {
            RenderError::InvalidSpec(format!(
                "Application {}/{}: source {url} has no path",
                app.namespace, app.name
            ))
        })?;
        // Argo CD refuses a path that climbs out of the repository; so does fluxplan (the join
        // below would only clamp it).
        if paths::normalize(Path::new(path.trim_start_matches('/'))).is_none() {
            return Err(RenderError::PathNotFound(format!(
                "application path '{path}' leaves the repository {url}: Argo CD cannot generate the manifests, so it \
                 syncs and prunes nothing"
            ))
            .into());
        }
        let view = self.tree_at(source.target_revision.as_deref()).map_err(|why| {
            Unrendered::UnknownRevision(format!(
                "targetRevision {} of {url}: {why}: what Argo CD syncs is not known here, so this Application is \
                 not planned",
                revision::normalized(source.target_revision.as_deref())
            ))
        })?;
        let tree = &view.tree;
        let export = view.export.as_ref().unwrap_or(self.source);
        let dir = paths::secure_join(tree, path);
        if !dir.is_dir() {
            let what = if dir.exists() { "is not a directory" } else { "does not exist" };
            return Err(RenderError::PathNotFound(format!(
                "application path not found: '{path}' {what} in {url}: Argo CD cannot generate the manifests, \
                 so it syncs and prunes nothing"
            ))
            .into());
        }
        let kind = match &source.kind {
            SourceKind::Unspecified if dir.join("Chart.yaml").is_file() => {
                SourceKind::Helm(Default::default())
            }
            SourceKind::Unspecified if kustomization_file(&dir).is_some() => {
                SourceKind::Kustomize(Default::default())
            }
            SourceKind::Unspecified => SourceKind::Directory(DirectoryOptions::default()),
            declared => declared.clone(),
        };
        match kind {
            SourceKind::Helm(options) => self.render_helm(app, &dir, tree, None, &options),
            SourceKind::Plugin => Err(Unrendered::External(format!(
                "'{path}' is rendered by a config management plugin: not rendered by fluxplan, so this Application \
                 is not planned"
            ))),
            SourceKind::Kustomize(options) => {
                if kustomization_file(&dir).is_none() {
                    return Err(RenderError::InvalidSource(format!(
                        "'{path}' has source.kustomize but no kustomization.yaml: kustomize cannot build it"
                    ))
                    .into());
                }
                let layer = |obj: &mut serde_json::Map<String, Value>| argocd::kustomize::layer(obj, &options);
                let request = self.builder.prepare_at(tree, &dir, &layer, export.tree_ids(tree).as_ref())?;
                let built = self.builder.objects(&request, true, &self.opts.cancel)?;
                self.progress.tick(built.cache_hit);
                Ok(built.objects)
            }
            SourceKind::Directory(options) => directory::read_directory(tree, &dir, &options, &*self.links_of(export)?),
            SourceKind::Unspecified => unreachable!("decided above"),
        }
    }
}

/// An Application an ApplicationSet generated, in one cluster: the same name may be generated in
/// several clusters, or by several ApplicationSets, each keeping its own.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeptApplication {
    pub cluster: String,
    pub set: KustomizationRef,
    pub application: KustomizationRef,
}

impl KeptApplication {
    fn new(cluster: &str, set_namespace: String, set_name: String, application: &Value) -> Self {
        let meta = &application["metadata"];
        KeptApplication {
            cluster: cluster.to_string(),
            set: KustomizationRef { namespace: set_namespace, name: set_name },
            application: KustomizationRef {
                namespace: meta["namespace"].as_str().unwrap_or("").to_string(),
                name: meta["name"].as_str().unwrap_or("").to_string(),
            },
        }
    }
}

/// The Applications of `head` that an ApplicationSet which does not update what it generated
/// keeps as `base` generated them: those whose generated spec the merge changes.
pub fn kept_applications(base: &super::Render, head: &super::Render) -> BTreeMap<KeptApplication, Value> {
    let mut kept = BTreeMap::new();
    for (cluster, set) in head.kustomizations() {
        let keeps = set
            .argocd
            .as_deref()
            .and_then(|u| u.application_set.as_ref())
            .is_some_and(|s| !s.applications_sync.updates());
        let Some(before) = base.kustomization(&cluster.name, &set.namespace, &set.name).filter(|_| keeps)
        else {
            continue;
        };
        for generated in &set.objects {
            let earlier =
                before.objects.iter().find(|o| o.id == generated.id && o.digest != generated.digest);
            if let Some(earlier) = earlier {
                let reference = KeptApplication::new(
                    &cluster.name,
                    set.namespace.clone(),
                    set.name.clone(),
                    &earlier.object,
                );
                kept.insert(reference, Value::clone(&earlier.object));
            }
        }
    }
    kept
}

fn list_tree(root: &Path, dir: &Path, dirs: &mut Vec<String>, files: &mut Vec<String>) {
    let _ = crate::tree::walk::<crate::tree::Unreadable>(dir, |entry, file_type| {
        if file_type.is_dir() {
            dirs.push(paths::relative(root, &entry.path()));
        } else if file_type.is_file() {
            files.push(paths::relative(root, &entry.path()));
        }
        Ok(crate::tree::Descend::Yes)
    });
}

/// The Applications and ApplicationSets declared in the repository's files.
fn discover(files: &[(String, String)], warnings: &mut Vec<String>) -> Vec<DiskUnit> {
    let mut units = Vec::new();
    for (file, text) in files {
        // Files that are not YAML (templates, CI files) are simply not manifests.
        let Ok(docs) = yaml::parse_documents(text) else { continue };
        for manifest in docs {
            if !(argocd::is_application(&manifest) || argocd::is_application_set(&manifest)) {
                continue;
            }
            let meta = &manifest["metadata"];
            let Some(name) = meta["name"].as_str().filter(|n| !n.is_empty()) else {
                warnings.push(format!(
                    "{file}: an Argo CD {} without metadata.name is ignored",
                    manifest["kind"]
                ));
                continue;
            };
            let namespace = meta["namespace"].as_str().unwrap_or(ARGOCD_NAMESPACE).to_string();
            units.push(DiskUnit {
                file: file.clone(),
                reference: KustomizationRef { namespace, name: name.to_string() },
                manifest,
            });
        }
    }
    units
}
