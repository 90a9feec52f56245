//! Exports kept between runs: a later export of the same repository takes the tree an earlier
//! one left and rewrites only the files whose git ids differ, instead of unpacking every file of
//! the commit again (most of a warm render's time on large repositories).
//!
//! A kept tree is claimed by renaming it into the new export's scratch directory, so no two
//! exports ever share one, and it is put back only with the state that describes it: a crash
//! leaves nothing to misread, only a tree that is exported afresh next time.

use super::source::{note_manifest, Budget};
use crate::git::TreeEntry as Entry;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Trees kept per repository: a plan exports base and head side by side.
pub(super) const SLOTS: usize = 2;
/// Trees kept in all; the oldest go first.
const MAX_KEPT: usize = 6;
const STATE_FILE: &str = "state.json";

/// v2: trees written from git's blobs, never converted by attributes or line-ending settings.
#[derive(Serialize, Deserialize)]
enum StateFormat {
    V2,
}
/// File contents held before they are written, at most.
const MAX_BATCH_BYTES: usize = 64 * 1024 * 1024;
const TREE_DIR: &str = "tree";
/// Where kept trees live in a scratch directory.
const KEPT_DIR: &str = "fluxplan-kept";
/// What a tree being evicted is renamed to begin with.
const EVICTED: &str = ".evicted-";

/// What a kept tree holds (in `STATE_FILE`: a state of another format is no state, and the tree
/// is exported afresh).
#[derive(Serialize, Deserialize)]
pub(super) struct State {
    format: StateFormat,
    commit: String,
    /// Every file by repository path: git's blob id.
    files: BTreeMap<String, String>,
    /// Every directory, those holding no file written (only symlinks, oversized files) too.
    dirs: BTreeSet<String>,
    /// The texts of the files that mention Flux or Argo CD (see `ExportedSource::flux_manifests`).
    manifests: BTreeMap<String, String>,
}

/// A kept tree claimed by an export: `dir/tree` is the export's raw tree.
pub(super) struct Claimed {
    pub dir: PathBuf,
    pub state: Option<State>,
}

impl Claimed {
    pub fn tree(&self) -> PathBuf {
        self.dir.join(TREE_DIR)
    }
}

/// True when `path` is one git checks out: relative, no empty, `.`, `..` or `.git` component (in
/// any case). A tree entry git accepted without fsck may be named `..`, and a kept tree joins
/// these paths to its own; `a/./x` would be written over `a/x`.
fn is_plain(path: &str) -> bool {
    path.split('/').all(|part| !matches!(part, "" | "." | "..") && !part.eq_ignore_ascii_case(".git"))
}

/// Why the tree `entries` cannot be written path by path, if it cannot: a path git would not
/// check out, or one listed twice (a malformed tree: one would silently replace the other).
pub(super) fn unwritable(entries: &[Entry]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    entries.iter().find_map(|e| {
        if !is_plain(&e.path) {
            Some(format!("it holds a path git does not check out: {:?}", e.path))
        } else if !seen.insert(e.path.as_str()) {
            Some(format!("it lists {:?} twice", e.path))
        } else {
            None
        }
    })
}

/// Entries `git archive` writes as directories: trees, and submodules (an empty directory).
fn is_dir(entry: &Entry) -> bool {
    entry.kind == "tree" || entry.mode == "160000"
}

/// The directory kept trees live in, and the name of a repository's.
pub(super) fn location(scratch: &Path, repo: &Path) -> (PathBuf, String) {
    use sha2::{Digest, Sha256};
    let repo = std::fs::canonicalize(repo).unwrap_or_else(|_| repo.to_path_buf());
    let key = hex::encode(&Sha256::digest(repo.to_string_lossy().as_bytes())[..12]);
    (scratch.join(KEPT_DIR), key)
}

/// Deletes every kept tree under the scratch directory `scratch`; true when there was one.
pub(super) fn evict_all(scratch: &Path) -> bool {
    let root = scratch.join(KEPT_DIR);
    let Ok(entries) = std::fs::read_dir(&root) else { return false };
    if !private(&root) {
        return false;
    }
    let entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    let mut evicted = false;
    for path in entries {
        if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with(EVICTED)) {
            // Left by an eviction that stopped half-way (another may be deleting it now).
            let _ = std::fs::remove_dir_all(&path);
        } else {
            evicted |= evict(&path);
        }
    }
    evicted
}

/// Deletes the kept tree at `path`, first renamed to a name of its own: an export claiming it at
/// the same moment gets it whole or not at all, never half deleted.
fn evict(path: &Path) -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let number = COUNTER.fetch_add(1, Ordering::Relaxed);
    let trash = path.with_file_name(format!("{EVICTED}{}-{number}", std::process::id()));
    std::fs::rename(path, &trash).is_ok() && std::fs::remove_dir_all(&trash).is_ok()
}

/// A kept tree of the repository `key` under `scratch` holding one file, as an export leaves it.
#[cfg(test)]
pub(super) fn plant_for_test(scratch: &Path, key: &str) {
    use std::os::unix::fs::DirBuilderExt;
    let root = scratch.join(KEPT_DIR);
    std::fs::DirBuilder::new().mode(0o700).create(&root).unwrap();
    let tree = root.join(format!("{key}-0")).join(TREE_DIR);
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("app.yaml"), "kind: ConfigMap\n").unwrap();
}

/// True when `root` is this user's alone (created so when missing): what another user could
/// write there is never taken for a repository's content.
fn private(root: &Path) -> bool {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let _ = std::fs::DirBuilder::new().mode(0o700).create(root);
    std::fs::symlink_metadata(root).is_ok_and(|meta| {
        // SAFETY: getuid cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        meta.is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0
    })
}

/// Takes a kept tree of the repository `key` into `workdir` (renamed: no one else can have it).
pub(super) fn claim(root: &Path, key: &str, workdir: &Path) -> Option<Claimed> {
    if !private(root) {
        return None;
    }
    let dir = workdir.join("kept");
    for slot in 0..SLOTS {
        if std::fs::rename(root.join(format!("{key}-{slot}")), &dir).is_ok() {
            // The state goes now: a crash while the tree is rewritten leaves no state to trust.
            let state_file = dir.join(STATE_FILE);
            let state = std::fs::read(&state_file).ok().and_then(|text| serde_json::from_slice(&text).ok());
            let _ = std::fs::remove_file(&state_file);
            return Some(Claimed { dir, state });
        }
    }
    None
}

/// A fresh, empty tree to keep after this export.
pub(super) fn fresh(workdir: &Path) -> Result<Claimed> {
    let dir = workdir.join("kept");
    std::fs::create_dir_all(dir.join(TREE_DIR))?;
    Ok(Claimed { dir, state: None })
}

/// What updating a tree found: the texts of the manifests, and the files left out.
pub(super) struct Updated {
    pub state: State,
    pub warnings: Vec<String>,
}

/// Brings a claimed tree that holds `before` to `commit` (whose `entries` are given): files
/// whose id changed are rewritten, files gone are deleted, symlinks and oversized files left out
/// as `unpack` leaves them out.
pub(super) fn update(
    repo: &Path,
    commit: &str,
    entries: &[Entry],
    tree: &Path,
    before: &State,
    budget: &mut Budget,
) -> Result<Updated> {
    let mut warnings = Vec::new();
    let mut files = BTreeMap::new();
    let mut dirs = BTreeSet::new();
    for entry in entries {
        match (entry.mode.as_str(), entry.kind.as_str()) {
            ("120000", _) => {
                warnings.push(format!("{}: symlink left out, as Flux never archives symlinks", entry.path))
            }
            _ if is_dir(entry) => {
                dirs.insert(entry.path.clone());
            }
            (_, "blob") if budget.admit(Path::new(&entry.path), entry.size)? => {
                files.insert(entry.path.clone(), entry.id.clone());
            }
            _ => {}
        }
    }
    // Out with what changed or went; directories gone go after their files, deepest first.
    for (path, id) in &before.files {
        if files.get(path) != Some(id) {
            remove_file(&tree.join(path))?;
        }
    }
    let mut old_dirs: Vec<&str> = before
        .files
        .keys()
        .flat_map(|path| ancestors(path))
        .chain(before.dirs.iter().map(String::as_str))
        .collect();
    old_dirs.sort_by_key(|dir| std::cmp::Reverse(dir.matches('/').count()));
    old_dirs.dedup();
    for dir in old_dirs.into_iter().filter(|dir| !dirs.contains(*dir)) {
        let _ = std::fs::remove_dir_all(tree.join(dir));
    }
    for dir in dirs.iter().filter(|dir| !tree.join(dir).is_dir()) {
        std::fs::create_dir_all(tree.join(dir))?;
    }
    // In with what is new or changed, read from git in one stream.
    let wanted: Vec<(&String, &String)> =
        files.iter().filter(|(path, id)| before.files.get(*path) != Some(*id)).collect();
    let mut manifests: BTreeMap<String, String> = before
        .manifests
        .iter()
        .filter(|(path, _)| before.files.get(*path).is_some_and(|id| files.get(*path) == Some(id)))
        .map(|(path, text)| (path.clone(), text.clone()))
        .collect();
    let mut noted = Vec::new();
    // Creating many small files is the kernel's work: they are written in parallel, a bounded
    // batch at a time.
    let mut batch: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let mut batched = 0;
    let flush = |batch: &mut Vec<(PathBuf, Vec<u8>)>| -> Result<()> {
        use rayon::prelude::*;
        let written: Result<()> = batch.par_iter().try_for_each(|(target, content)| {
            std::fs::write(target, content).with_context(|| format!("cannot write {}", target.display()))
        });
        batch.clear();
        written
    };
    read_blobs(repo, &wanted, |path, content| {
        note_manifest(Path::new(path), content, &mut noted);
        batched += content.len();
        batch.push((tree.join(path), content.to_vec()));
        if batched > MAX_BATCH_BYTES {
            batched = 0;
            flush(&mut batch)?;
        }
        Ok(())
    })?;
    flush(&mut batch)?;
    manifests.extend(noted);
    Ok(Updated {
        state: State { format: StateFormat::V2, commit: commit.to_string(), files, dirs, manifests },
        warnings,
    })
}

impl State {
    /// An empty tree's: updating it writes every file.
    pub fn empty(commit: &str) -> Self {
        State {
            format: StateFormat::V2,
            commit: commit.to_string(),
            files: BTreeMap::new(),
            dirs: BTreeSet::new(),
            manifests: BTreeMap::new(),
        }
    }

    /// What a tree unpacked whole from `commit`'s archive holds: every blob but symlinks and the
    /// files left out for their size.
    pub fn of(
        commit: &str,
        entries: &[Entry],
        oversized: &[(String, u64)],
        manifests: Vec<(String, String)>,
    ) -> Self {
        let left_out: BTreeSet<&str> = oversized.iter().map(|(path, _)| path.as_str()).collect();
        let files = entries
            .iter()
            .filter(|e| e.kind == "blob" && e.mode != "120000" && !left_out.contains(e.path.as_str()))
            .map(|e| (e.path.clone(), e.id.clone()))
            .collect();
        let dirs = entries.iter().filter(|e| is_dir(e)).map(|e| e.path.clone()).collect();
        State {
            format: StateFormat::V2,
            commit: commit.to_string(),
            files,
            dirs,
            manifests: manifests.into_iter().collect(),
        }
    }

    /// The texts of the manifests discovery reads (repository path, text).
    pub fn manifests(&self) -> Vec<(String, String)> {
        self.manifests.iter().map(|(path, text)| (path.clone(), text.clone())).collect()
    }
}

/// Puts a claimed tree back with its state, for the next export to take; the oldest kept trees
/// beyond the limit are deleted.
pub(super) fn put_back(claimed_dir: &Path, state: &State, root: &Path, key: &str) {
    let put = || -> Result<()> {
        if !private(root) {
            bail!("{} is not private", root.display());
        }
        std::fs::write(claimed_dir.join(STATE_FILE), serde_json::to_vec(state)?)?;
        for slot in 0..SLOTS {
            if std::fs::rename(claimed_dir, root.join(format!("{key}-{slot}"))).is_ok() {
                return Ok(());
            }
        }
        bail!("every slot is taken");
    };
    if put().is_err() {
        return; // the scratch directory deletes it with the rest
    }
    let Ok(entries) = std::fs::read_dir(root) else { return };
    let mut kept: Vec<(std::time::SystemTime, PathBuf)> =
        entries.flatten().filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path()))).collect();
    kept.sort();
    let excess = kept.len().saturating_sub(MAX_KEPT);
    for (_, path) in kept.into_iter().take(excess) {
        evict(&path);
    }
}

fn remove_file(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(anyhow::Error::new(e).context(format!("cannot remove {}", path.display())))
        }
        _ => Ok(()),
    }
}

/// `a/b/c.yaml` → `a/b`, `a`.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = path;
    std::iter::from_fn(move || {
        let (parent, _) = rest.rsplit_once('/')?;
        rest = parent;
        Some(parent)
    })
}

/// Streams the blobs `wanted` (path, id) out of git into `write`.
fn read_blobs(
    repo: &Path,
    wanted: &[(&String, &String)],
    mut write: impl FnMut(&str, &[u8]) -> Result<()>,
) -> Result<()> {
    if wanted.is_empty() {
        return Ok(());
    }
    let mut child = crate::git::git_command(repo)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run git cat-file")?;
    let mut stdin = child.stdin.take().context("git cat-file has no input")?;
    let ids: Vec<String> = wanted.iter().map(|(_, id)| format!("{id}\n")).collect();
    // Written on another thread: git answers while it reads, and both pipes are bounded.
    let feeder = std::thread::spawn(move || {
        for id in ids {
            if stdin.write_all(id.as_bytes()).is_err() {
                break;
            }
        }
    });
    let mut out =
        BufReader::with_capacity(256 * 1024, child.stdout.take().context("git cat-file has no output")?);
    // Every way out of the loop goes through the clean-up below (no `?` inside).
    let mut read = || -> Result<()> {
        for (path, id) in wanted {
            let mut header = String::new();
            out.read_line(&mut header)?;
            // `<id> blob <size>`
            let fields: Vec<&str> = header.split_whitespace().collect();
            let size = match fields[..] {
                [got, "blob", size] if got == id.as_str() => {
                    size.parse::<usize>().context("bad blob size")?
                }
                _ => bail!("git cat-file did not give blob {id} ({path}): {}", header.trim()),
            };
            let mut content = vec![0; size + 1];
            out.read_exact(&mut content)?;
            content.truncate(size);
            write(path, &content)?;
        }
        Ok(())
    };
    let result = read();
    drop(out);
    let _ = child.kill();
    let _ = child.wait();
    let _ = feeder.join();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str) -> Entry {
        Entry { mode: "100644".into(), kind: "blob".into(), id: "0".repeat(40), size: 1, path: path.into() }
    }

    #[test]
    fn a_tree_is_written_path_by_path_only_when_git_would_check_every_path_out() {
        assert_eq!(unwritable(&[entry("apps/x.yaml"), entry("apps/.gitkeep"), entry("a.git/x")]), None);
        for path in ["..", "x/../y", "a/./x", "a//x", "/etc/x", "x/", ".git/config", "a/.GIT/hooks/x"] {
            let why = unwritable(&[entry("ok.yaml"), entry(path)]);
            assert!(why.as_deref().is_some_and(|w| w.contains("does not check out")), "{path}: {why:?}");
        }
        let twice = unwritable(&[entry("x.yaml"), entry("x.yaml")]);
        assert_eq!(twice.as_deref(), Some("it lists \"x.yaml\" twice"));
    }
}
