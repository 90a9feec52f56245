//! Source trees fluxplan owns: a revision (or the working tree) exported into a temporary
//! directory with no symlinks and within the source limits, then filtered by the source's ignore
//! rules. A pull request cannot make an export grow without bound, and nothing it loses is
//! silent: every file left out is a recorded breach.

use crate::flux::sourceignore::SourceIgnore;
use crate::git;
use crate::tree::Descend;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Files larger than this are left out of a source (a hostile PR cannot exhaust memory).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 10 * 1024 * 1024;
/// A source larger than this in all is not rendered.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 512 * 1024 * 1024;
/// A source with more files than this is not rendered.
pub const DEFAULT_MAX_FILES: u64 = 100_000;

/// How much of a repository fluxplan is willing to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLimits {
    pub max_file_size: u64,
    pub max_total_bytes: u64,
    pub max_files: u64,
}

impl Default for SourceLimits {
    fn default() -> Self {
        SourceLimits {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            max_files: DEFAULT_MAX_FILES,
        }
    }
}

/// A source over its total limits: it is not rendered at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SourceLimitExceeded(pub String);

/// Counts what an export has taken so far against the limits.
pub(super) struct Budget {
    limits: SourceLimits,
    bytes: u64,
    files: u64,
    /// Files left out for their size: (path, size).
    oversized: Vec<(String, u64)>,
}

impl Budget {
    fn new(limits: SourceLimits) -> Self {
        Budget { limits, bytes: 0, files: 0, oversized: Vec::new() }
    }

    /// Whether to write the file; an error when the whole source is over its limits.
    pub(super) fn admit(&mut self, path: &Path, size: u64) -> Result<bool, SourceLimitExceeded> {
        if size > self.limits.max_file_size {
            self.oversized.push((path.display().to_string(), size));
            return Ok(false);
        }
        self.files += 1;
        self.bytes += size;
        if self.files > self.limits.max_files {
            return Err(SourceLimitExceeded(format!(
                "the source holds more than {} files (--max-source-files); it is not rendered",
                self.limits.max_files
            )));
        }
        if self.bytes > self.limits.max_total_bytes {
            return Err(SourceLimitExceeded(format!(
                "the source holds more than {} bytes (--max-source-bytes; reached at {}); it is not rendered",
                self.limits.max_total_bytes,
                path.display()
            )));
        }
        Ok(true)
    }
}

/// A repository exported at one revision, plus its filtered variants.
pub struct ExportedSource {
    workdir: tempfile::TempDir,
    raw: PathBuf,
    /// The commit exported, when a revision was given.
    pub commit: Option<String>,
    /// Things left out while exporting (symlinks), for the report.
    pub warnings: Vec<String>,
    /// Files left out for their size: (path, size). Each is a `source-limit` alert.
    pub oversized: Vec<(String, u64)>,
    /// The YAML files that mention Flux or Argo CD, with their text, read while exporting: discovery needs
    /// nothing else (repository path, text).
    pub flux_manifests: Vec<(String, String)>,
    limits: SourceLimits,
    filtered: Mutex<BTreeMap<Option<String>, PathBuf>>,
    /// git's object ids of the exported commit and of its `.sourceignore` files (see `tree_ids`).
    object_ids: Option<(Arc<HashMap<String, String>>, String)>,
    /// The kept tree this export took (see `kept`), put back when it drops.
    kept: Option<Kept>,
}

/// A kept tree in use: where it is, what it holds, and where it goes back to.
struct Kept {
    claimed: PathBuf,
    state: super::kept::State,
    root: PathBuf,
    key: String,
}

/// A tree of an export named by content: git's object id of every file and directory of the
/// commit by repository path, and what else decides what the tree holds (the ignore rules it was
/// filtered with, every `.sourceignore`, the limits). Builds whose inputs have the same ids read
/// the same bytes.
#[derive(Clone)]
pub struct TreeIds {
    pub ids: Arc<HashMap<String, String>>,
    pub salt: String,
}

/// git's id of every path of a tree (the root tree's under `""`), and every `.sourceignore` with
/// its id as one string: the ignore rules' part of what builds known by git ids are keyed by.
fn ids_of(entries: &[git::TreeEntry], root_tree: String) -> (Arc<HashMap<String, String>>, String) {
    let mut ids: HashMap<String, String> = entries.iter().map(|e| (e.path.clone(), e.id.clone())).collect();
    ids.insert(String::new(), root_tree);
    let mut ignores: Vec<(&String, &String)> =
        ids.iter().filter(|(path, _)| path.rsplit('/').next() == Some(".sourceignore")).collect();
    ignores.sort();
    let ignores = format!("{ignores:?}");
    (Arc::new(ids), ignores)
}

/// True when git attributes would make an archive of the tree (`entries`) differ from its
/// blobs: a `.gitattributes` anywhere in it (which the pull request writes), or the
/// repository's own `info/attributes`. Flux clones, so no attribute means anything to it: an
/// archive would leave out what `export-ignore` names, rewrite what `export-subst` names and run
/// filters (a `git-crypt` one would decrypt what Flux reads encrypted).
fn attributes_apply(repo: &Path, entries: &[git::TreeEntry]) -> Result<bool> {
    Ok(entries.iter().any(|e| e.path.rsplit('/').next() == Some(".gitattributes"))
        || git::attributes_file(repo)?.is_some())
}

/// Writes every blob of `commit` (whose tree is `entries`) into the empty `tree`, as a clone
/// holds them: what the archive does where no attribute applies, the same files left out.
fn write_blobs(
    repo: &Path,
    commit: &str,
    entries: &[git::TreeEntry],
    tree: &Path,
    budget: &mut Budget,
) -> Result<super::kept::Updated> {
    if let Some(why) = super::kept::unwritable(entries) {
        bail!("{commit} cannot be exported: {why}");
    }
    super::kept::update(repo, commit, entries, tree, &super::kept::State::empty(commit), budget)
}

/// Free space a memory-backed scratch directory keeps beyond what exports may take.
const SCRATCH_HEADROOM: u64 = 1024 * 1024 * 1024;

/// Where source trees are exported: `$FLUXPLAN_WORKDIR`, else a memory-backed directory
/// (`$XDG_RUNTIME_DIR`, `/dev/shm`) with room for two full-size exports (base and head) to
/// spare, else the system temporary directory. Exports create and delete thousands of small
/// files; on some disks that costs seconds.
pub fn scratch_dir(limits: &SourceLimits) -> PathBuf {
    scratch_dir_for(limits, false)
}

/// `scratch_dir`; with `make_room` (an export about to start, before its own files take any),
/// kept trees are deleted from a memory-backed directory that lacks the room (see
/// `memory_backed_with_room`).
fn scratch_dir_for(limits: &SourceLimits, make_room: bool) -> PathBuf {
    if let Some(dir) = std::env::var_os("FLUXPLAN_WORKDIR") {
        return PathBuf::from(dir);
    }
    let memory_backed =
        [std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from), Some(PathBuf::from("/dev/shm"))];
    let needed = limits.max_total_bytes.saturating_mul(2).saturating_add(SCRATCH_HEADROOM);
    memory_backed_with_room(memory_backed.into_iter().flatten(), needed, make_room)
        .unwrap_or_else(std::env::temp_dir)
}

/// The first of `candidates` with `needed` bytes free. With `make_room`, kept trees (memory that
/// only speeds up later exports) are deleted from a candidate that lacks the room: they would
/// otherwise hold it for good, unused, while exports go elsewhere.
fn memory_backed_with_room(
    candidates: impl IntoIterator<Item = PathBuf>,
    needed: u64,
    make_room: bool,
) -> Option<PathBuf> {
    let has_room = |dir: &Path| fs4::available_space(dir).is_ok_and(|free| free >= needed);
    candidates
        .into_iter()
        .find(|dir| has_room(dir) || (make_room && super::kept::evict_all(dir) && has_room(dir)))
}

impl ExportedSource {
    /// Exports `rev` of `repo` (or its working tree when `rev` is `None`).
    pub fn export(repo: &Path, rev: Option<&str>, limits: SourceLimits) -> Result<Self> {
        Self::export_keeping(repo, rev, limits, false)
    }

    /// Exports `rev` of `repo`; with `keep`, from the tree an earlier export of it left (only the
    /// files that differ are written), and leaves this one for the next.
    pub fn export_keeping(repo: &Path, rev: Option<&str>, limits: SourceLimits, keep: bool) -> Result<Self> {
        let scratch = scratch_dir_for(&limits, true);
        super::leftovers::hold_owner_lock(&scratch);
        let workdir = tempfile::Builder::new()
            .prefix(super::leftovers::export_prefix())
            .tempdir_in(&scratch)
            .with_context(|| format!("cannot create a scratch directory in {}", scratch.display()))?;
        let raw = workdir.path().join("raw");
        std::fs::create_dir(&raw)?;
        let mut warnings = Vec::new();
        let mut budget = Budget::new(limits);
        let mut object_ids = None;
        let mut flux_manifests = Vec::new();
        let commit = match rev {
            Some(rev) if keep => {
                let commit = git::resolve_commit(repo, rev)?;
                if let Some(export) = Self::from_kept(repo, &commit, &scratch, workdir, limits).transpose() {
                    return export;
                }
                return Self::export_keeping(repo, Some(&commit), limits, false);
            }
            Some(rev) => {
                let commit = git::resolve_commit(repo, rev)?;
                let entries = git::tree_entries(repo, &commit, true)?;
                // git archive writes a path listed twice twice, in no order a plan can trust.
                if let Some(why) = super::kept::unwritable(&entries) {
                    bail!("{commit} cannot be exported: {why}");
                }
                // Attributes anywhere count: those of a directory above `repo` apply below it.
                let attributes = attributes_apply(repo, &entries)?;
                // Below a work tree's top, the export is `repo`'s directory (git archive run
                // there writes that): every list of the tree is named from there too.
                let prefix = git::prefix(repo);
                let entries = git::entries_under(entries, &prefix);
                if attributes {
                    let written = write_blobs(repo, &commit, &entries, &raw, &mut budget)?;
                    warnings = written.warnings;
                    flux_manifests = written.state.manifests();
                } else {
                    git::archive_into(repo, &commit, |tar| {
                        unpack(tar, &raw, &mut budget, &mut warnings, &mut flux_manifests)
                    })?;
                }
                // Only an optimisation: without them every build reads its inputs.
                object_ids = git::tree_at(repo, &commit, &prefix)
                    .inspect_err(|e| tracing::debug!("no object ids for {commit}: {e:#}"))
                    .ok()
                    .map(|root| ids_of(&entries, root));
                Some(commit)
            }
            None => {
                anyhow::ensure!(repo.is_dir(), "repository directory {} does not exist", repo.display());
                copy_tree(repo, &raw, &mut budget, &mut warnings, &mut flux_manifests)?;
                None
            }
        };
        Ok(ExportedSource {
            workdir,
            raw,
            commit,
            warnings,
            oversized: budget.oversized,
            flux_manifests,
            limits,
            filtered: Mutex::default(),
            object_ids,
            kept: None,
        })
    }

    /// The export of `commit` from a kept tree (or a fresh one to keep); `None` when the commit
    /// cannot be exported that way.
    fn from_kept(
        repo: &Path,
        commit: &str,
        scratch: &Path,
        workdir: tempfile::TempDir,
        limits: SourceLimits,
    ) -> Result<Option<Self>> {
        let entries = git::tree_entries(repo, commit, true)?;
        // A path that is not plain (an entry named `..`) must never be joined to the kept tree:
        // the archive refuses such a commit, with an error that says why.
        if super::kept::unwritable(&entries).is_some() {
            return Ok(None);
        }
        // As in `export_keeping`: attributes anywhere count; the tree is `repo`'s directory.
        let attributes = attributes_apply(repo, &entries)?;
        let prefix = git::prefix(repo);
        let entries = git::entries_under(entries, &prefix);
        let (root, key) = super::kept::location(scratch, repo);
        let claimed = match super::kept::claim(&root, &key, workdir.path()) {
            Some(claimed) => claimed,
            None => super::kept::fresh(workdir.path())?,
        };
        let mut budget = Budget::new(limits);
        let updated = if let Some(before) = &claimed.state {
            // A tree that cannot be brought forward (git failed, a limit) is exported afresh,
            // which says what went wrong the usual way.
            match super::kept::update(repo, commit, &entries, &claimed.tree(), before, &mut budget) {
                Ok(updated) => updated,
                Err(e) => {
                    tracing::debug!("kept export not reused: {e:#}");
                    return Ok(None);
                }
            }
        } else {
            // Nothing known to start from: every file is written, and the archive is the
            // quicker way to write them all where no attribute applies.
            let tree = claimed.tree();
            let _ = std::fs::remove_dir_all(&tree);
            std::fs::create_dir_all(&tree)?;
            if attributes {
                write_blobs(repo, commit, &entries, &tree, &mut budget)?
            } else {
                let (mut warnings, mut manifests) = (Vec::new(), Vec::new());
                git::archive_into(repo, commit, |tar| {
                    unpack(tar, &tree, &mut budget, &mut warnings, &mut manifests)
                })?;
                super::kept::Updated {
                    state: super::kept::State::of(commit, &entries, &budget.oversized, manifests),
                    warnings,
                }
            }
        };
        // Without it, the fresh export says what git cannot do.
        let Ok(root_tree) = git::tree_at(repo, commit, &prefix) else { return Ok(None) };
        let (ids, ignores) = ids_of(&entries, root_tree);
        let raw = claimed.tree();
        Ok(Some(ExportedSource {
            raw,
            commit: Some(commit.to_string()),
            warnings: updated.warnings,
            oversized: budget.oversized,
            flux_manifests: updated.state.manifests(),
            limits,
            filtered: Mutex::default(),
            object_ids: Some((ids, ignores)),
            kept: Some(Kept { claimed: claimed.dir, state: updated.state, root, key }),
            workdir,
        }))
    }

    /// One message per file left out for its size, unless the source's ignore rules leave it
    /// out anyway (a large image under `docs/` is no loss).
    pub fn oversized_messages(&self, prefix: &str) -> Result<Vec<String>> {
        if self.oversized.is_empty() {
            return Ok(Vec::new());
        }
        let rules = SourceIgnore::load(&self.raw, None)?;
        Ok(self
            .oversized
            .iter()
            .filter(|(path, _)| !rules.is_ignored(&self.raw.join(path), false))
            .map(|(path, size)| {
                format!(
                    "{prefix}{path} was left out: {size} bytes is over the {} byte limit per file \
                     (--max-file-size), so Flux would read a file this plan did not",
                    self.limits.max_file_size
                )
            })
            .collect())
    }

    /// The repository path of a file in one of this export's trees.
    pub fn repo_path(&self, file: &Path) -> Option<String> {
        if let Ok(inside) = file.strip_prefix(&self.raw) {
            return Some(inside.to_string_lossy().replace('\\', "/")).filter(|p| !p.is_empty());
        }
        let mut parts = file.strip_prefix(self.workdir.path()).ok()?.components();
        parts.next()?; // the tree: one filtered variant
        Some(parts.as_path().to_string_lossy().replace('\\', "/")).filter(|p| !p.is_empty())
    }

    /// The tree as exported, no ignore rule applied: what a clone holds (less symlinks and
    /// oversized files), as Argo CD's repo-server reads it.
    pub fn unfiltered(&self) -> PathBuf {
        self.raw.clone()
    }

    /// The ignore rules a source with `spec_ignore` applies to this export.
    pub fn ignore_rules(&self, spec_ignore: Option<&str>) -> std::io::Result<SourceIgnore> {
        SourceIgnore::load(&self.raw, spec_ignore)
    }

    /// Why the repository file `file` is not in the artifact `rules` make of this export; `None`
    /// when it is there (or not in the export at all).
    pub fn why_left_out(&self, rules: &SourceIgnore, file: &str) -> Option<String> {
        let path = self.raw.join(file);
        path.is_file().then(|| rules.why_ignored(&self.raw, &path)).flatten()
    }

    /// True when `rules` would leave the repository file `file` out of the artifact, whether or
    /// not this revision has it (a pull request adds and deletes files).
    pub fn would_leave_out(&self, rules: &SourceIgnore, file: &str) -> bool {
        rules.why_ignored(&self.raw, &self.raw.join(file)).is_some()
    }

    /// The content identity of `tree`, one of this export's trees, when the export is of a commit.
    pub fn tree_ids(&self, tree: &Path) -> Option<TreeIds> {
        let (ids, sourceignores) = self.object_ids.as_ref()?;
        if tree == self.raw {
            return Some(TreeIds { ids: ids.clone(), salt: format!("unfiltered {:?}", self.limits) });
        }
        let filtered = self.filtered.lock().unwrap_or_else(|e| e.into_inner());
        let (ignore, _) = filtered.iter().find(|(_, dir)| dir.as_path() == tree)?;
        let salt = format!("{ignore:?} {sourceignores} {:?}", self.limits);
        Some(TreeIds { ids: ids.clone(), salt })
    }

    /// The tree as the artifact of a source with `spec.ignore` would hold it.
    pub fn tree(&self, spec_ignore: Option<&str>) -> Result<PathBuf> {
        let key = spec_ignore.map(str::to_string);
        let mut filtered = self.filtered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dir) = filtered.get(&key) {
            return Ok(dir.clone());
        }
        let rules = SourceIgnore::load(&self.raw, spec_ignore)?;
        let dir = if any_ignored(&self.raw, &rules)? {
            let dir = self.workdir.path().join(format!("src{}", filtered.len()));
            std::fs::create_dir(&dir)?;
            link_filtered(&self.raw, &dir, &rules)?;
            dir
        } else {
            // Nothing to leave out: the export itself is the artifact.
            self.raw.clone()
        };
        filtered.insert(key, dir.clone());
        Ok(dir)
    }
}

/// The trees kept for `repo` (see `ExportedSource::export_keeping`), each with its state file.
pub fn kept_trees(repo: &Path, limits: &SourceLimits) -> Vec<PathBuf> {
    let (root, key) = super::kept::location(&scratch_dir(limits), repo);
    (0..super::kept::SLOTS)
        .map(|slot| root.join(format!("{key}-{slot}")))
        .filter(|dir| dir.is_dir())
        .collect()
}

/// Set by the command line: exports are deleted by a detached `rm`, so the user does not wait
/// for thousands of unlinks once the answer is known. A long-lived process (the bot) deletes them
/// itself.
static DELETE_DETACHED: AtomicBool = AtomicBool::new(false);

/// Lets a detached process delete this process's exports (see `DELETE_DETACHED`).
pub fn delete_exports_detached() {
    DELETE_DETACHED.store(true, Ordering::Relaxed);
}

impl Drop for ExportedSource {
    /// Deleting thousands of files is the kernel's work: subtrees go in parallel (the scratch
    /// directory itself removes what is left when it drops).
    fn drop(&mut self) {
        use rayon::prelude::*;
        if let Some(kept) = self.kept.take() {
            super::kept::put_back(&kept.claimed, &kept.state, &kept.root, &kept.key);
        }
        if DELETE_DETACHED.load(Ordering::Relaxed) {
            let rm = Command::new("rm")
                .env_clear()
                .arg("-rf")
                .arg("--")
                .arg(self.workdir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn();
            if rm.is_ok() {
                self.workdir.disable_cleanup(true);
                return;
            }
        }
        let mut subtrees = Vec::new();
        collect_subtrees(self.workdir.path(), 3, &mut subtrees);
        subtrees.par_iter().for_each(|(path, is_dir)| {
            let _ = if *is_dir { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
        });
    }
}

/// The entries `depth` levels below `dir` (and the files above them).
fn collect_subtrees(dir: &Path, depth: usize, out: &mut Vec<(PathBuf, bool)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && depth > 1 {
            collect_subtrees(&entry.path(), depth - 1, out);
        } else {
            out.push((entry.path(), is_dir));
        }
    }
}

/// Bytes read from an archive and not yet written, at most.
const MAX_PENDING_WRITES: u64 = 64 * 1024 * 1024;

/// Keeps the text of a YAML file that mentions Flux (see `ExportedSource::flux_manifests`).
pub(super) fn note_manifest(path: &Path, content: &[u8], manifests: &mut Vec<(String, String)>) {
    let name = path.to_string_lossy();
    let mentions = |word: &str| memchr::memmem::find(content, word.as_bytes()).is_some();
    if (name.ends_with(".yaml") || name.ends_with(".yml"))
        && (mentions("fluxcd.io") || mentions("FluxInstance") || super::argo::mentions_argocd(content))
    {
        if let Ok(text) = std::str::from_utf8(content) {
            manifests.push((name.replace('\\', "/"), text.to_string()));
        }
    }
}

fn unpack(
    tar: &mut dyn std::io::Read,
    dest: &Path,
    budget: &mut Budget,
    warnings: &mut Vec<String>,
    manifests: &mut Vec<(String, String)>,
) -> Result<()> {
    // Headers are read 512 bytes at a time: straight from the pipe, that is a system call each.
    let mut archive = tar::Archive::new(std::io::BufReader::with_capacity(256 * 1024, tar));
    let mut made_dirs = std::collections::HashSet::new();
    // Creating thousands of small files is the kernel's work: files are written on other threads
    // while this one reads the archive (directories first, here, so every parent exists).
    let failed: Mutex<Option<anyhow::Error>> = Mutex::default();
    let pending = AtomicU64::new(0);
    rayon::in_place_scope(|writers| -> Result<()> {
        for entry in archive.entries()? {
            let mut entry = entry?;
            let path = entry.path()?.into_owned();
            let kind = entry.header().entry_type();
            if kind.is_symlink() || kind.is_hard_link() {
                warnings
                    .push(format!("{}: symlink left out, as Flux never archives symlinks", path.display()));
                continue;
            }
            // git archive writes plain relative paths; anything else is refused, never unpacked.
            if !path.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
                warnings.push(format!("{}: unsafe path in the archive left out", path.display()));
                continue;
            }
            let target = dest.join(&path);
            if kind.is_dir() {
                std::fs::create_dir_all(&target)?;
                made_dirs.insert(target);
            } else if kind.is_file() {
                if !budget.admit(&path, entry.size())? {
                    continue;
                }
                if let Some(parent) = target.parent() {
                    if !made_dirs.contains(parent) {
                        std::fs::create_dir_all(parent)?;
                        made_dirs.insert(parent.to_path_buf());
                    }
                }
                let mut content = Vec::with_capacity(entry.size() as usize);
                entry.read_to_end(&mut content)?;
                note_manifest(&path, &content, manifests);
                let size = content.len() as u64;
                // Writers that fall behind hold at most this much: then this thread writes too.
                if pending.fetch_add(size, Ordering::AcqRel) + size > MAX_PENDING_WRITES {
                    pending.fetch_sub(size, Ordering::AcqRel);
                    std::fs::write(&target, content)
                        .with_context(|| format!("cannot unpack {}", path.display()))?;
                    continue;
                }
                let (failed, pending) = (&failed, &pending);
                writers.spawn(move |_| {
                    if let Err(e) = std::fs::write(&target, content) {
                        let error =
                            anyhow::Error::new(e).context(format!("cannot unpack {}", path.display()));
                        failed.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(error);
                    }
                    pending.fetch_sub(size, Ordering::AcqRel);
                });
            }
        }
        Ok(())
    })?;
    match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// Copies a working tree. Unlike `tree::walk` it sees every name: one that is not UTF-8 is
/// refused, not skipped (an explicit stack, for any depth).
fn copy_tree(
    base: &Path,
    dest: &Path,
    budget: &mut Budget,
    warnings: &mut Vec<String>,
    manifests: &mut Vec<(String, String)>,
) -> Result<()> {
    let mut pending = vec![base.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))? {
            let entry = entry?;
            let path = entry.path();
            let rel = path.strip_prefix(base).unwrap_or(&path);
            // As for commits (`git::tree_entries`): names that are not UTF-8 are fluxplan's own in
            // an export (`scratch`), never the repository's.
            anyhow::ensure!(
                entry.file_name().to_str().is_some(),
                "{} is not UTF-8: fluxplan cannot plan it; rename the file",
                rel.display()
            );
            let file_type = entry.file_type()?;
            let target = dest.join(rel);
            if file_type.is_symlink() {
                warnings
                    .push(format!("{}: symlink left out, as Flux never archives symlinks", rel.display()));
            } else if file_type.is_dir() {
                if entry.file_name() == ".git" {
                    continue;
                }
                std::fs::create_dir_all(&target)?;
                pending.push(path);
            } else if file_type.is_file() {
                if !budget.admit(rel, entry.metadata()?.len())? {
                    continue;
                }
                let content =
                    std::fs::read(&path).with_context(|| format!("cannot read {}", rel.display()))?;
                note_manifest(rel, &content, manifests);
                std::fs::write(&target, content).with_context(|| format!("cannot copy {}", rel.display()))?;
            }
        }
    }
    Ok(())
}

fn any_ignored(dir: &Path, rules: &SourceIgnore) -> Result<bool> {
    let mut any = false;
    crate::tree::walk::<anyhow::Error>(dir, |entry, file_type| {
        any |= rules.is_ignored(&entry.path(), file_type.is_dir());
        Ok(if any { Descend::No } else { Descend::Yes })
    })?;
    Ok(any)
}

/// Hard-links every file not ignored into `dest` (cheap; the files are never modified).
fn link_filtered(raw: &Path, dest: &Path, rules: &SourceIgnore) -> Result<()> {
    crate::tree::walk::<anyhow::Error>(raw, |entry, file_type| {
        let path = entry.path();
        if rules.is_ignored(&path, file_type.is_dir()) {
            return Ok(Descend::No);
        }
        let target = dest.join(path.strip_prefix(raw)?);
        if file_type.is_dir() {
            std::fs::create_dir_all(&target)?;
        } else if std::fs::hard_link(&path, &target).is_err() {
            std::fs::copy(&path, &target)?;
        }
        Ok(Descend::Yes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_trees_in_a_directory_without_room_are_deleted_and_others_are_not() {
        let (roomy, full) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for scratch in [&roomy, &full] {
            super::super::kept::plant_for_test(scratch.path(), "repo");
        }
        let tree = |scratch: &tempfile::TempDir| scratch.path().join("fluxplan-kept/repo-0/tree/app.yaml");
        // Room enough: the directory is taken and its kept tree stays.
        let chosen = memory_backed_with_room([roomy.path().to_path_buf()], 0, true);
        assert_eq!(chosen.as_deref(), Some(roomy.path()));
        assert!(tree(&roomy).exists());
        // No room, but only looking (not about to export): nothing is deleted.
        assert_eq!(memory_backed_with_room([full.path().to_path_buf()], u64::MAX, false), None);
        assert!(tree(&full).exists());
        // No room for an export: it goes elsewhere, and the kept tree goes too.
        assert_eq!(memory_backed_with_room([full.path().to_path_buf()], u64::MAX, true), None);
        assert!(!tree(&full).exists());
        assert_eq!(std::fs::read_dir(full.path().join("fluxplan-kept")).unwrap().count(), 0);
    }
}
