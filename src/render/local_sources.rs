//! Which sources are this repository, and where each source lives locally: the exported tree
//! of this repository (filtered by a source's ignore rules, or a directory of it), a directory
//! mapped with `--source`, or an artifact a generator here builds. A source a pull request
//! re-points (a changed Flux Operator sync) is not this repository (`trusted_syncs`).

use super::artifacts::{self, Generators, Resolved};
use super::roots::{DeclaredSource, InstanceSync};
use super::source::ExportedSource;
use super::{Cluster, RenderError};
use crate::{flux, git, paths};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The GitRepository that denotes the repository being rendered in bootstrap layouts.
pub(super) const BOOTSTRAP_SOURCE: (&str, &str) = ("flux-system", "flux-system");

/// A GitRepository manifest found in the repository's files.
pub(super) struct DiskGitRepository {
    pub(super) key: String,
    pub(super) url: String,
    pub(super) ignore: Option<String>,
    /// What its artifact holds beyond its own tree, if anything (see `adds_to_its_tree`).
    pub(super) adds: Option<String>,
}

/// Why a GitRepository's artifact holds more than its own tree: other repositories' artifacts
/// (`spec.include`) or its submodules (`spec.recurseSubmodules`). Neither is in the export, so
/// rendering it from this repository alone would plan what Flux does not apply.
pub(super) fn adds_to_its_tree(spec: &Value) -> Option<String> {
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
pub(super) struct ThisRepo {
    /// `GitRepository`, or the kind an operator sync or `.fluxplan.yaml` gives the name.
    pub(super) kinds: BTreeSet<String>,
    pub(super) ignore: Option<String>,
    pub(super) adds: Option<String>,
    /// The artifact is this directory of the repository (`sources:` in `.fluxplan.yaml`).
    pub(super) subpath: Option<String>,
}

/// Where each source lives locally.
pub(super) struct Sources<'a> {
    pub(super) this_repo: &'a ExportedSource,
    pub(super) this_repo_keys: BTreeMap<String, ThisRepo>,
    /// Syncs the pull request adds or changes, whose sources are not taken for this repository
    /// (see `trusted_syncs`).
    pub(super) untrusted: Vec<InstanceSync>,
    pub(super) mapped: &'a BTreeMap<String, ExportedSource>,
    pub(super) generators: &'a Generators,
}

/// What decides which sources are this repository, before the syncs are known.
pub(super) struct KnownSources<'a> {
    pub(super) this_repo: &'a ExportedSource,
    pub(super) repositories: &'a [DiskGitRepository],
    pub(super) base_syncs: Option<&'a [InstanceSync]>,
    pub(super) remotes: &'a BTreeSet<String>,
    pub(super) declared: &'a [DeclaredSource],
    pub(super) mapped: &'a BTreeMap<String, ExportedSource>,
    pub(super) generators: &'a Generators,
}

impl<'a> KnownSources<'a> {
    /// The sources once `syncs` are found (and what rendered GitRepositories add, `learned`).
    pub(super) fn with_syncs(
        &self,
        syncs: &[InstanceSync],
        learned: &BTreeMap<String, String>,
    ) -> Sources<'a> {
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
pub(super) fn learned_adds(clusters: &[Cluster], sources: &Sources) -> BTreeMap<String, String> {
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
    /// The sources rendered from this repository's files, for the render's accounting of which
    /// files each unit reads.
    pub(super) fn this_repo_artifacts(&self) -> BTreeMap<String, super::ThisRepoArtifact> {
        self.this_repo_keys
            .iter()
            .filter(|(key, _)| !self.mapped.contains_key(*key))
            .map(|(key, repo)| {
                let artifact = super::ThisRepoArtifact {
                    kinds: repo.kinds.clone(),
                    dir: repo.subpath.clone().unwrap_or_default(),
                };
                (key.clone(), artifact)
            })
            .collect()
    }

    /// True when `source` is the repository being rendered (not a mapped directory).
    pub(super) fn is_this_repo(&self, source: &flux::SourceRef) -> bool {
        self.this_repo(source).is_some()
    }

    /// The entry of a source that is this repository (not a mapped directory).
    pub(super) fn this_repo(&self, source: &flux::SourceRef) -> Option<&ThisRepo> {
        let key = format!("{}/{}", source.namespace, source.name);
        if self.mapped.contains_key(&key) {
            return None;
        }
        self.this_repo_keys.get(&key).filter(|repo| repo.kinds.contains(&source.kind))
    }

    /// The local tree of a source for a Kustomization defined in `near`, or `None` when it is
    /// external. An ExternalArtifact is local when a generator here builds it from local sources.
    pub(super) fn tree(
        &self,
        source: &flux::SourceRef,
        near: Option<&str>,
    ) -> Result<Option<PathBuf>, RenderError> {
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
    pub(super) fn adds_of(&self, source: &flux::SourceRef) -> Option<&str> {
        (source.kind == "GitRepository").then(|| self.this_repo(source)?.adds.as_deref()).flatten()
    }

    /// Why a source is external, for the Kustomization's warning.
    pub(super) fn external_reason(&self, source: &flux::SourceRef, near: Option<&str>) -> String {
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
    pub(super) fn repo_origin(&self, root: &Path, origin: &str) -> Option<String> {
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
