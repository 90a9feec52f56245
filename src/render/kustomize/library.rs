//! Where kustomize's Go library (c-shared, from the `pykustomize` wheel) is found, and which
//! binary hosts it. `scripts/fetch-kustomize-lib.sh` fetches the pinned wheel with pip, checks its
//! sha256 and installs the library at `default_path()`.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Points at the library; `off` turns it off (the kustomize binary is used).
pub const LIB_ENV: &str = "FLUXPLAN_KUSTOMIZE_LIB";
pub const FILE_NAME: &str = "libpykustomize-0.1.4.so";

/// The sha256 of the pinned library (`lib_sha256` in `scripts/fetch-kustomize-lib.sh`).
pub const PINNED_SHA256: &str = "cd8f48b55a9fd7292a45bed20800581067026db985056a4e1605ab477b924230";

/// Refuses a library at the default place that is not the pinned one (replaced or damaged since
/// the fetch script checked it). A library named by `FLUXPLAN_KUSTOMIZE_LIB` is the operator's
/// choice and is not checked.
pub fn check_pinned(path: &Path) -> Result<(), String> {
    let found = facts(path)?.sha256;
    if found == PINNED_SHA256 {
        Ok(())
    } else {
        Err(format!(
            "{} is not the pinned library (sha256 {found}, expected {PINNED_SHA256}): run \
             scripts/fetch-kustomize-lib.sh again",
            path.display()
        ))
    }
}

/// The `sigs.k8s.io/kustomize/api` version the library was built with, from the Go build
/// information embedded in it (`dep\tsigs.k8s.io/kustomize/api\tv0.21.3\t…`). The library
/// reports only its wrapper's version.
pub fn kustomize_api_version(path: &Path) -> Option<String> {
    facts(path).ok()?.api_version
}

/// The version a worker of `program` reported for the library at `path`, when a stamp records
/// it for these very files on this kernel (see `remember_worker_version`): the probe worker need
/// not start.
pub fn known_worker_version(path: &Path, program: &Path) -> Option<String> {
    known_worker_version_on(path, program, &host())
}

fn known_worker_version_on(path: &Path, program: &Path, host: &str) -> Option<String> {
    let text = std::fs::read_to_string(stamp_path(path)).ok()?;
    let mut lines = text.lines();
    (lines.next()? == identity(path).ok()?).then_some(())?;
    let (for_worker, version) = lines.nth(2)?.split_once('\t')?;
    (for_worker == worker_identity(program, host).ok()? && !version.is_empty()).then(|| version.to_string())
}

/// Records what a worker of `program` reported for the library at `path` (best effort).
pub fn remember_worker_version(path: &Path, program: &Path, version: &str) {
    remember_worker_version_on(path, program, version, &host());
}

fn remember_worker_version_on(path: &Path, program: &Path, version: &str, host: &str) {
    let (Ok(facts), Ok(library), Ok(worker)) = (facts(path), identity(path), worker_identity(program, host))
    else {
        return;
    };
    if version.contains(['\n', '\t']) {
        return;
    }
    write_stamp(&stamp_path(path), &library, &facts, Some(&format!("{worker}\t{version}")));
}

/// Forgets what a worker reported for the library at `path`, after a worker the stamp vouched
/// for failed to start: the next process probes again, and falls back to the kustomize binary
/// if the library still does not work.
pub fn forget_worker_version(path: &Path) {
    if let (Ok(facts), Ok(library)) = (facts(path), identity(path)) {
        write_stamp(&stamp_path(path), &library, &facts, None);
    }
}

/// The worker program's identity on this kernel: a worker that started under one kernel (or
/// Landlock ABI) says nothing about another.
fn worker_identity(program: &Path, host: &str) -> std::io::Result<String> {
    Ok(format!("{} {host}", identity(program)?))
}

fn host() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{} landlock {}", release.trim(), crate::sandbox::status().landlock_abi)
}

/// What reading a library file teaches: its sha256 and kustomize's version.
#[derive(Debug, Clone, PartialEq)]
struct Facts {
    sha256: String,
    api_version: Option<String>,
}

/// The facts of the library at `path`: once per process, and across processes from a stamp
/// beside it (`LIB.facts`) while the file is the one the stamp describes. Reading 28 MB took a
/// tenth of a warm plan's time. The stamp names the file by device, inode, size, mtime and ctime:
/// any write to the library changes its ctime, which no unprivileged process can set back.
fn facts(path: &Path) -> Result<Facts, String> {
    static SEEN: Mutex<Option<HashMap<PathBuf, Result<Facts, String>>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    seen.get_or_insert_with(HashMap::new)
        .entry(path.to_path_buf())
        .or_insert_with(|| read_facts(path))
        .clone()
}

fn read_facts(path: &Path) -> Result<Facts, String> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let before = identity(path).map_err(cannot)?;
    let stamp = stamp_path(path);
    if let Some(facts) = read_stamp(&stamp, &before) {
        return Ok(facts);
    }
    let bytes = std::fs::read(path).map_err(cannot)?;
    let facts = Facts { sha256: hex::encode(Sha256::digest(&bytes)), api_version: api_version_in(&bytes) };
    // The file must not have changed while it was read, or the stamp would vouch for it.
    if identity(path).ok().as_deref() == Some(before.as_str()) {
        write_stamp(&stamp, &before, &facts, None);
    }
    Ok(facts)
}

fn stamp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".facts");
    path.with_file_name(name)
}

/// Device, inode, size, mtime and ctime (nanoseconds) of the file at `path`.
fn identity(path: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok(format!(
        "{} {} {} {}.{} {}.{}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

/// Stamp format: the identity line, the sha256, the API version (empty when unknown), and
/// optionally the worker's report: the worker program's identity, a tab, the version it said.
fn read_stamp(stamp: &Path, identity: &str) -> Option<Facts> {
    let text = std::fs::read_to_string(stamp).ok()?;
    let mut lines = text.lines();
    if lines.next()? != identity {
        return None;
    }
    let sha256 = lines.next().filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))?;
    let api_version = lines.next().filter(|v| !v.is_empty()).map(str::to_string);
    Some(Facts { sha256: sha256.to_string(), api_version })
}

/// Best effort (the library's directory may be read-only): written whole, then renamed.
fn write_stamp(stamp: &Path, identity: &str, facts: &Facts, worker: Option<&str>) {
    let mut text = format!("{identity}\n{}\n{}\n", facts.sha256, facts.api_version.as_deref().unwrap_or(""));
    if let Some(worker) = worker {
        text.push_str(worker);
        text.push('\n');
    }
    let Some(dir) = stamp.parent() else { return };
    if let Ok(mut file) = tempfile::NamedTempFile::new_in(dir) {
        if std::io::Write::write_all(&mut file, text.as_bytes()).is_ok() {
            let _ = file.persist(stamp);
        }
    }
}

fn api_version_in(bytes: &[u8]) -> Option<String> {
    let needle = b"\tsigs.k8s.io/kustomize/api\t";
    let at = memchr::memmem::find(bytes, needle)? + needle.len();
    let rest = &bytes[at..bytes.len().min(at + 64)];
    let end = rest.iter().position(|b| !(b.is_ascii_alphanumeric() || b"._-+".contains(b)))?;
    String::from_utf8(rest[..end].to_vec()).ok()
}

/// Where the fetch script installs the library: `$XDG_CACHE_HOME/fluxplan/lib/`, else
/// `~/.cache/fluxplan/lib/`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(default_path_under(&base))
}

/// Where the library sits under a cache directory.
pub fn default_path_under(cache: &Path) -> PathBuf {
    cache.join("fluxplan/lib").join(FILE_NAME)
}

/// What the environment asks for.
pub enum Choice {
    /// `FLUXPLAN_KUSTOMIZE_LIB` names it: it must work.
    Explicit(PathBuf),
    /// The default place, if the fetch script put it there.
    Default(Option<PathBuf>),
    Off,
}

pub fn choice() -> Choice {
    match std::env::var_os(LIB_ENV).filter(|v| !v.is_empty()) {
        Some(v) if v == "off" => Choice::Off,
        Some(v) => Choice::Explicit(PathBuf::from(v)),
        None => Choice::Default(default_path()),
    }
}

/// Set by fluxplan's `main`: this process is the fluxplan binary, whatever its file is named.
static HOSTS_WORKERS: AtomicBool = AtomicBool::new(false);

/// Says that this process's own executable hosts kustomize workers (fluxplan's `main` says it
/// first): installed under another name, or started through a symlink, it still runs them.
pub fn workers_run_this_executable() {
    HOSTS_WORKERS.store(true, Ordering::Relaxed);
}

/// The fluxplan binary that hosts workers: this process's own executable, or (when this is a
/// test harness or another program linking the crate) the `fluxplan` built beside it.
pub fn worker_program() -> Option<PathBuf> {
    // What the kernel ran (`/proc/self/exe`), not the name or symlink it was started by.
    let me = std::env::current_exe().ok()?;
    if HOSTS_WORKERS.load(Ordering::Relaxed) {
        // Replaced on disk since it started (an upgrade): the link still reaches this very binary.
        return Some(if me.is_file() { me } else { PathBuf::from("/proc/self/exe") });
    }
    me.ancestors().skip(1).take(2).map(|dir| dir.join("fluxplan")).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_read_once_then_from_the_stamp_until_the_library_changes() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("lib.so");
        std::fs::write(&lib, b"\x7fELF...dep\tsigs.k8s.io/kustomize/api\tv0.21.3\th1:abc").unwrap();
        let read = read_facts(&lib).unwrap();
        assert_eq!(read.sha256, hex::encode(Sha256::digest(std::fs::read(&lib).unwrap())));
        assert_eq!(read.api_version.as_deref(), Some("v0.21.3"));
        // The stamp is what the next process reads: proved by a stamp that says otherwise.
        let stamp = stamp_path(&lib);
        let text = std::fs::read_to_string(&stamp).unwrap();
        let forged = text.replace(&read.sha256, &"0".repeat(64));
        std::fs::write(&stamp, &forged).unwrap();
        assert_eq!(read_facts(&lib).unwrap().sha256, "0".repeat(64));
        // A changed library is read again (a write also moves its ctime, which a test cannot
        // rely on within one clock tick; the size it can).
        let mut changed = std::fs::read(&lib).unwrap();
        changed.push(b'\n');
        std::fs::write(&lib, &changed).unwrap();
        let again = read_facts(&lib).unwrap();
        assert_eq!(again.sha256, hex::encode(Sha256::digest(&changed)));
        // A stamp that is not one is ignored.
        std::fs::write(&stamp, "garbage").unwrap();
        assert_eq!(read_facts(&lib).unwrap(), again);
    }

    #[test]
    fn a_workers_version_is_remembered_for_its_program_and_kernel_until_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let (lib, program) = (dir.path().join("lib.so"), dir.path().join("fluxplan"));
        std::fs::write(&lib, b"\x7fELF...").unwrap();
        std::fs::write(&program, b"#!/bin/sh\n").unwrap();
        remember_worker_version_on(&lib, &program, "v0.1.4", "6.8.0 landlock 7");
        assert_eq!(known_worker_version_on(&lib, &program, "6.8.0 landlock 7").as_deref(), Some("v0.1.4"));
        // Another kernel, or the same without Landlock, starts a probe worker again.
        assert_eq!(known_worker_version_on(&lib, &program, "6.1.0 landlock 7"), None);
        assert_eq!(known_worker_version_on(&lib, &program, "6.8.0 landlock 0"), None);
        // So does another program.
        let other = dir.path().join("other");
        std::fs::write(&other, b"#!/bin/sh\nexit 1\n").unwrap();
        assert_eq!(known_worker_version_on(&lib, &other, "6.8.0 landlock 7"), None);
        // A forgotten report is gone; the library's facts stay.
        forget_worker_version(&lib);
        assert_eq!(known_worker_version_on(&lib, &program, "6.8.0 landlock 7"), None);
        assert!(read_stamp(&stamp_path(&lib), &identity(&lib).unwrap()).is_some());
    }
}
