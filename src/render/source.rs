//! Source trees fluxplan owns: a revision (or the working tree) exported into a temporary
//! directory with no symlinks and no oversized files, then filtered by the source's ignore rules.

use crate::flux::sourceignore::SourceIgnore;
use crate::git;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Files larger than this are left out of a source (a hostile PR cannot exhaust memory).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 10 * 1024 * 1024;

/// A repository exported at one revision, plus its filtered variants.
pub struct ExportedSource {
    workdir: tempfile::TempDir,
    raw: PathBuf,
    /// The commit exported, when a revision was given.
    pub commit: Option<String>,
    /// Things left out while exporting (symlinks, oversized files), for the report.
    pub warnings: Vec<String>,
    filtered: Mutex<BTreeMap<Option<String>, PathBuf>>,
}

/// Below this much free space a memory-backed scratch directory is not used.
const MIN_SCRATCH_SPACE: u64 = 1024 * 1024 * 1024;

/// Where source trees are exported: `$FLUXPLAN_WORKDIR`, else a memory-backed directory
/// (`$XDG_RUNTIME_DIR`, `/dev/shm`) with room to spare, else the system temporary directory.
/// Exports create and delete thousands of small files; on some disks that costs seconds.
pub fn scratch_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FLUXPLAN_WORKDIR") {
        return PathBuf::from(dir);
    }
    let memory_backed =
        [std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from), Some(PathBuf::from("/dev/shm"))];
    memory_backed
        .into_iter()
        .flatten()
        .find(|dir| fs4::available_space(dir).is_ok_and(|free| free >= MIN_SCRATCH_SPACE))
        .unwrap_or_else(std::env::temp_dir)
}

impl ExportedSource {
    /// Exports `rev` of `repo` (or its working tree when `rev` is `None`).
    pub fn export(repo: &Path, rev: Option<&str>, max_file_size: u64) -> Result<Self> {
        let scratch = scratch_dir();
        let workdir = tempfile::Builder::new()
            .prefix("fluxplan-src-")
            .tempdir_in(&scratch)
            .with_context(|| format!("cannot create a scratch directory in {}", scratch.display()))?;
        let raw = workdir.path().join("raw");
        std::fs::create_dir(&raw)?;
        let mut warnings = Vec::new();
        let commit = match rev {
            Some(rev) => {
                let commit = git::resolve_commit(repo, rev)?;
                git::archive_into(repo, &commit, |tar| unpack(tar, &raw, max_file_size, &mut warnings))?;
                Some(commit)
            }
            None => {
                anyhow::ensure!(repo.is_dir(), "repository directory {} does not exist", repo.display());
                copy_tree(repo, repo, &raw, max_file_size, &mut warnings)?;
                None
            }
        };
        Ok(ExportedSource { workdir, raw, commit, warnings, filtered: Mutex::default() })
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
            link_filtered(&self.raw, &self.raw, &dir, &rules)?;
            dir
        } else {
            // Nothing to leave out: the export itself is the artifact.
            self.raw.clone()
        };
        filtered.insert(key, dir.clone());
        Ok(dir)
    }
}

fn unpack(
    tar: &mut dyn std::io::Read,
    dest: &Path,
    max_file_size: u64,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let mut archive = tar::Archive::new(tar);
    let mut made_dirs = std::collections::HashSet::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let kind = entry.header().entry_type();
        if kind.is_symlink() || kind.is_hard_link() {
            warnings.push(format!("{}: symlink left out, as Flux never archives symlinks", path.display()));
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
            if entry.size() > max_file_size {
                warnings.push(format!(
                    "{}: left out, {} bytes is over the {} byte limit per file",
                    path.display(),
                    entry.size(),
                    max_file_size
                ));
                continue;
            }
            if let Some(parent) = target.parent() {
                if !made_dirs.contains(parent) {
                    std::fs::create_dir_all(parent)?;
                    made_dirs.insert(parent.to_path_buf());
                }
            }
            let mut file = std::fs::File::create(&target)
                .with_context(|| format!("cannot unpack {}", path.display()))?;
            std::io::copy(&mut entry, &mut file)?;
        }
    }
    Ok(())
}

fn copy_tree(
    base: &Path,
    dir: &Path,
    dest: &Path,
    max_file_size: u64,
    warnings: &mut Vec<String>,
) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let rel = path.strip_prefix(base).unwrap_or(&path);
        let file_type = entry.file_type()?;
        let target = dest.join(rel);
        if file_type.is_symlink() {
            warnings.push(format!("{}: symlink left out, as Flux never archives symlinks", rel.display()));
        } else if file_type.is_dir() {
            if entry.file_name() == ".git" {
                continue;
            }
            std::fs::create_dir_all(&target)?;
            copy_tree(base, &path, dest, max_file_size, warnings)?;
        } else if file_type.is_file() {
            let size = entry.metadata()?.len();
            if size > max_file_size {
                warnings.push(format!(
                    "{}: left out, {size} bytes is over the {max_file_size} byte limit per file",
                    rel.display()
                ));
                continue;
            }
            std::fs::copy(&path, &target).with_context(|| format!("cannot copy {}", rel.display()))?;
        }
    }
    Ok(())
}

fn any_ignored(dir: &Path, rules: &SourceIgnore) -> Result<bool> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let is_dir = entry.file_type()?.is_dir();
        if rules.is_ignored(&entry.path(), is_dir) || (is_dir && any_ignored(&entry.path(), rules)?) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Hard-links every file not ignored into `dest` (cheap; the files are never modified).
fn link_filtered(raw: &Path, dir: &Path, dest: &Path, rules: &SourceIgnore) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let is_dir = entry.file_type()?.is_dir();
        if rules.is_ignored(&path, is_dir) {
            continue;
        }
        let target = dest.join(path.strip_prefix(raw)?);
        if is_dir {
            std::fs::create_dir_all(&target)?;
            link_filtered(raw, &path, dest, rules)?;
        } else if std::fs::hard_link(&path, &target).is_err() {
            std::fs::copy(&path, &target)?;
        }
    }
    Ok(())
}
