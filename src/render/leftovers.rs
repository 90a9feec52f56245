//! Exports a dead process left behind. An export (`fluxplan-src-*` in the scratch directory,
//! see `source::scratch_dir`) is deleted when its render ends; a process that crashed or was
//! killed leaves it for good, in memory when the scratch directory is memory-backed. Each
//! export's name says which process owns it (pid namespace, pid, start time), so the next
//! `serve`, `plan` or `build` removes exactly those whose owner is gone, never one another
//! fluxplan is rendering from. Exports named otherwise (by an older fluxplan) are left alone.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

const EXPORT_PREFIX: &str = "fluxplan-src-";

/// The process that owns an export: a pid is reused, a pid with its start time is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    /// The inode of the pid namespace its pid means something in.
    namespace: u64,
    pid: u32,
    /// Clock ticks after boot when it started (`/proc/PID/stat`, field 22).
    started: u64,
}

impl Owner {
    fn this() -> Option<Owner> {
        let pid = std::process::id();
        Some(Owner { namespace: pid_namespace()?, pid, started: start_time(pid)? })
    }

    /// `NAMESPACE.PID.STARTED`, the form `parse` reads.
    fn label(&self) -> String {
        format!("{}.{}.{}", self.namespace, self.pid, self.started)
    }

    /// The owner an export's name records, if it records one.
    fn parse(name: &str) -> Option<Owner> {
        let label = name.strip_prefix(EXPORT_PREFIX)?.split('-').next()?;
        let mut parts = label.split('.').map(str::parse::<u64>);
        let (namespace, pid, started) = (parts.next()?.ok()?, parts.next()?.ok()?, parts.next()?.ok()?);
        if parts.next().is_some() {
            return None;
        }
        Some(Owner { namespace, pid: u32::try_from(pid).ok()?, started })
    }

    /// The owner an owner lock's name records (see `lock_path`).
    fn of_lock(name: &str) -> Option<Owner> {
        let label = name.strip_prefix("fluxplan-owner-")?.strip_suffix(".lock")?;
        Owner::parse(&format!("{EXPORT_PREFIX}{label}-"))
    }

    /// False only when it is certain the owner is gone: a pid of another namespace says nothing.
    fn may_be_alive(&self, namespace: u64) -> bool {
        self.namespace != namespace || start_time(self.pid) == Some(self.started)
    }
}

/// What this process's exports are named with (`source` gives it to the scratch directory):
/// `fluxplan-src-NAMESPACE.PID.STARTED-`, or the bare prefix where `/proc` cannot tell.
pub fn export_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| match Owner::this() {
        Some(owner) => format!("{EXPORT_PREFIX}{}-", owner.label()),
        None => EXPORT_PREFIX.to_string(),
    })
}

/// The lock file an owner holds in a scratch directory for as long as it lives: the kernel
/// releases it when the owner exits, so a fluxplan of another pid namespace (a restarted
/// container) can tell that the owner is gone.
fn lock_path(scratch: &Path, owner: &Owner) -> PathBuf {
    scratch.join(format!("fluxplan-owner-{}.lock", owner.label()))
}

/// Takes this process's owner lock in `scratch` (once per directory, held until it exits),
/// before its first export there.
pub fn hold_owner_lock(scratch: &Path) {
    static HELD: Mutex<BTreeMap<PathBuf, File>> = Mutex::new(BTreeMap::new());
    let Some(owner) = Owner::this() else { return };
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    if held.contains_key(scratch) {
        return;
    }
    let opened =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(lock_path(scratch, &owner));
    match opened.and_then(|file| file.try_lock().map(|()| file).map_err(std::io::Error::other)) {
        Ok(file) => {
            held.insert(scratch.to_path_buf(), file);
        }
        Err(e) => tracing::debug!("no owner lock in {}: {e}", scratch.display()),
    }
}

/// True when the owner's lock in `scratch` is free: it exited. Without a lock file nothing is
/// known (an owner that never took one).
fn lock_released(scratch: &Path, owner: &Owner) -> bool {
    let Ok(file) = File::open(lock_path(scratch, owner)) else { return false };
    match file.try_lock() {
        Ok(()) => true,
        Err(_) => false,
    }
}

/// Removes the exports of dead processes from every directory exports can be in (`source`
/// picks one per export: `$FLUXPLAN_WORKDIR`, else `$XDG_RUNTIME_DIR`, `/dev/shm` or the
/// temporary directory); returns how many went.
pub fn remove_dead_exports() -> usize {
    let removed: usize = scratch_candidates().iter().map(|dir| remove_dead_exports_in(dir)).sum();
    if removed > 0 {
        tracing::info!(removed, "removed exports left by fluxplan processes that are gone");
    }
    removed
}

fn scratch_candidates() -> Vec<PathBuf> {
    if let Some(dir) = std::env::var_os("FLUXPLAN_WORKDIR") {
        return vec![PathBuf::from(dir)];
    }
    let mut dirs: Vec<PathBuf> =
        [std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from), Some("/dev/shm".into())]
            .into_iter()
            .flatten()
            .chain([std::env::temp_dir()])
            .collect();
    dirs.dedup();
    dirs
}

/// Removes from `scratch` the exports, this user's, whose owner is certainly gone.
pub fn remove_dead_exports_in(scratch: &Path) -> usize {
    let (Some(namespace), Ok(entries)) = (pid_namespace(), std::fs::read_dir(scratch)) else { return 0 };
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    let gone = |owner: &Owner| {
        // Another pid namespace's owner (a restarted container): its lock says whether it runs.
        !owner.may_be_alive(namespace) || (owner.namespace != namespace && lock_released(scratch, owner))
    };
    let names: Vec<(PathBuf, String)> =
        entries.flatten().filter_map(|e| Some((e.path(), e.file_name().to_str()?.to_string()))).collect();
    let mut removed = 0;
    for (path, name) in &names {
        if !Owner::parse(name).is_some_and(|o| gone(&o)) {
            continue;
        }
        // Never through a symlink, never another user's.
        let ours = std::fs::symlink_metadata(path).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && m.uid() == uid
        });
        if ours && std::fs::remove_dir_all(path).is_ok() {
            removed += 1;
        }
    }
    // Owner locks last (the exports above were judged by them); they outlive a clean exit too.
    for (path, name) in &names {
        if Owner::of_lock(name).is_some_and(|o| gone(&o)) {
            let _ = std::fs::remove_file(path);
        }
    }
    removed
}

/// The inode of this process's pid namespace.
fn pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let link = link.to_str()?;
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// When `pid` started (clock ticks after boot), while it runs; a zombie has stopped running.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields after it follow the last `)`.
    let rest = stat.rsplit_once(") ")?.1;
    let mut fields = rest.split(' ');
    if fields.next()? == "Z" {
        return None;
    }
    // Field 3 is the state just read; field 22 is the start time.
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_name_records_its_owner() {
        let this = Owner::this().expect("/proc tells");
        let name = format!("{}Ab12Cd", export_prefix());
        assert_eq!(Owner::parse(&name), Some(this));
        assert!(this.may_be_alive(this.namespace));
        assert_eq!(Owner::parse("fluxplan-src-Ab12Cd"), None, "an older fluxplan's export");
        assert_eq!(Owner::parse("fluxplan-kept"), None);
    }

    #[test]
    fn only_exports_of_owners_that_are_gone_are_removed() {
        let scratch = tempfile::tempdir().unwrap();
        let this = Owner::this().unwrap();
        // A child that has exited and been reaped: its pid and start time name no process.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = Owner { pid: child.id(), started: start_time(child.id()).unwrap_or(1), ..this };
        child.wait().unwrap();
        let restarted = Owner { started: this.started + 1, ..this };
        let elsewhere = Owner { namespace: this.namespace + 1, pid: 999_999, ..this };
        let export = |owner: Option<Owner>, suffix: &str| {
            let label = owner.map(|o| format!("{}-", o.label())).unwrap_or_default();
            let dir = scratch.path().join(format!("{EXPORT_PREFIX}{label}{suffix}"));
            std::fs::create_dir_all(dir.join("raw")).unwrap();
            std::fs::write(dir.join("raw/app.yaml"), "kind: ConfigMap\n").unwrap();
            dir
        };
        let (mine, dead, reused, foreign, old) = (
            export(Some(this), "a"),
            export(Some(gone), "b"),
            export(Some(restarted), "c"),
            export(Some(elsewhere), "d"),
            export(None, "Ab12Cd"),
        );
        assert_eq!(remove_dead_exports_in(scratch.path()), 2);
        assert!(mine.exists() && foreign.exists() && old.exists());
        assert!(!dead.exists(), "the export of a process that exited");
        assert!(!reused.exists(), "the export of a process whose pid another now has");
    }

    /// A container restarted with the same scratch directory runs in a new pid namespace: the
    /// owner lock says the old owner is gone; a held one keeps its exports.
    #[test]
    fn another_namespaces_exports_go_once_their_owner_lock_is_free() {
        let scratch = tempfile::tempdir().unwrap();
        let this = Owner::this().unwrap();
        let elsewhere = |pid: u32| Owner { namespace: this.namespace + 1, pid, ..this };
        let (crashed, running) = (elsewhere(41), elsewhere(42));
        for owner in [crashed, running] {
            std::fs::create_dir_all(scratch.path().join(format!("{EXPORT_PREFIX}{}-x/raw", owner.label())))
                .unwrap();
            std::fs::write(lock_path(scratch.path(), &owner), "").unwrap();
        }
        // The running owner holds its lock (here through another open file description).
        let held = File::open(lock_path(scratch.path(), &running)).unwrap();
        held.lock().unwrap();
        assert_eq!(remove_dead_exports_in(scratch.path()), 1);
        assert!(!scratch.path().join(format!("{EXPORT_PREFIX}{}-x", crashed.label())).exists());
        assert!(!lock_path(scratch.path(), &crashed).exists());
        assert!(scratch.path().join(format!("{EXPORT_PREFIX}{}-x", running.label())).exists());
        drop(held);
    }
}
