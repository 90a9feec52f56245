//! Mirrors heal. A `git fetch` killed mid-way (the bot killed, the node gone) leaves lock files
//! in the mirror (`shallow.lock`, `packed-refs.lock`, `refs/**/*.lock`, `config.lock`,
//! `objects/info/commit-graphs/*.lock`, ...), and every later fetch of that repository fails on
//! them, across restarts. A lock is stale, and removed, when no git process of this host works in
//! the mirror (its working directory or an argument inside it: `/proc`) and it is older than
//! `LOCK_GRACE` (git itself waits at most a second for a ref lock; the age also covers a replica
//! on another host sharing the data directory, whose processes cannot be seen). The caller holds
//! the mirror's in-process lock, so no fetch of this process is under way.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How old a lock file must be before it is taken for stale.
pub const LOCK_GRACE: Duration = Duration::from_secs(10);

/// The lock files in `mirror`.
pub fn lock_files(mirror: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(mirror)
        .follow_links(false)
        .into_iter()
        .flatten()
        .filter(|entry| entry.file_type().is_file() && entry.file_name().to_string_lossy().ends_with(".lock"))
        .map(walkdir::DirEntry::into_path)
        .collect()
}

/// True when a git process on this host works in `mirror`: its working directory is inside it
/// (`git -C`), or one of its arguments names a path inside it.
pub fn git_working_in(mirror: &Path) -> bool {
    let Ok(mirror) = mirror.canonicalize() else { return false };
    let Ok(processes) = std::fs::read_dir("/proc") else { return false };
    processes.flatten().filter(|p| p.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit())).any(
        |process| {
            let dir = process.path();
            let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else { return false };
            let mut args = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned());
            let is_git = args.next().is_some_and(|program| {
                Path::new(&program).file_name().is_some_and(|name| name.to_string_lossy().starts_with("git"))
            });
            is_git
                && (std::fs::read_link(dir.join("cwd")).is_ok_and(|cwd| cwd.starts_with(&mirror))
                    || args.any(|arg| Path::new(&arg).starts_with(&mirror)))
        },
    )
}

/// Removes the stale lock files of `mirror` and returns them. A lock younger than `LOCK_GRACE` is
/// waited for, up to `patience` (zero at start: the fetch that meets it waits); none is removed
/// while a git process works in the mirror.
pub fn remove_stale_locks(mirror: &Path, patience: Duration) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let locks = lock_files(mirror);
    if locks.is_empty() {
        return removed;
    }
    if git_working_in(mirror) {
        tracing::info!(mirror = %mirror.display(), "a git process works in the mirror: its lock files are left alone");
        return removed;
    }
    let youngest = locks.iter().filter_map(|lock| age(lock)).min().unwrap_or(LOCK_GRACE);
    if youngest < LOCK_GRACE {
        let wait = LOCK_GRACE - youngest;
        if wait > patience {
            return removed;
        }
        std::thread::sleep(wait);
        if git_working_in(mirror) {
            return removed;
        }
    }
    for lock in locks {
        // Gone meanwhile (its owner finished), or made anew since: left alone.
        if age(&lock).is_some_and(|age| age >= LOCK_GRACE) && std::fs::remove_file(&lock).is_ok() {
            tracing::warn!(lock = %lock.display(), "removed a stale git lock file (left by a killed git)");
            removed.push(lock);
        }
    }
    removed
}

/// The stale locks of every mirror in `dir` (at start).
pub fn heal_all(dir: &Path) {
    let Ok(mirrors) = std::fs::read_dir(dir) else { return };
    for mirror in mirrors.flatten().filter(|m| m.path().extension().is_some_and(|e| e == "git")) {
        remove_stale_locks(&mirror.path(), Duration::ZERO);
    }
}

/// Moves a broken mirror out of the way (then deletes it): the next fetch clones it anew.
pub fn move_aside(mirror: &Path) -> std::io::Result<()> {
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis();
    let aside = mirror.with_extension(format!("broken-{stamp}"));
    std::fs::rename(mirror, &aside)?;
    tracing::warn!(mirror = %mirror.display(), "the mirror stays broken: cloned anew");
    if let Err(e) = std::fs::remove_dir_all(&aside) {
        tracing::warn!(path = %aside.display(), error = %e, "cannot delete the broken mirror");
    }
    Ok(())
}

fn age(path: &Path) -> Option<Duration> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    Some(SystemTime::now().duration_since(modified).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn bare(dir: &Path) -> PathBuf {
        let mirror = dir.join("m.git");
        let status = Command::new("git").args(["init", "-q", "--bare"]).arg(&mirror).status().unwrap();
        assert!(status.success());
        mirror
    }

    fn plant(path: &Path, age: Duration) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let file = std::fs::File::create(path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
    }

    #[test]
    fn stale_locks_go_young_ones_and_those_of_a_live_git_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mirror = bare(dir.path());
        let old = Duration::from_secs(600);
        let stale = ["shallow.lock", "packed-refs.lock", "refs/heads/main.lock", "config.lock"]
            .map(|name| mirror.join(name));
        for lock in &stale {
            plant(lock, old);
        }
        plant(&mirror.join("objects/info/commit-graphs/commit-graph-chain.lock"), old);
        // A git process working in the mirror: nothing is removed while it lives.
        let mut live = Command::new("git")
            .arg("-C")
            .arg(&mirror)
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // Once it runs (a process just spawned may not have become git yet).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !git_working_in(&mirror) {
            assert!(std::time::Instant::now() < deadline, "the git process never showed in /proc");
            std::thread::yield_now();
        }
        assert_eq!(remove_stale_locks(&mirror, Duration::ZERO), Vec::<PathBuf>::new());
        assert!(stale.iter().all(|lock| lock.exists()));
        live.kill().unwrap();
        live.wait().unwrap();
        assert!(!git_working_in(&mirror));
        // A lock just made is not taken for stale without waiting for it.
        plant(&mirror.join("HEAD.lock"), Duration::ZERO);
        let removed = remove_stale_locks(&mirror, Duration::ZERO);
        assert!(removed.is_empty(), "{removed:?}");
        let removed = remove_stale_locks(&mirror, LOCK_GRACE);
        assert_eq!(removed.len(), 6, "{removed:?}");
        assert!(lock_files(&mirror).is_empty());
        assert!(mirror.join("HEAD").exists(), "only lock files go");
    }

    #[test]
    fn a_broken_mirror_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let mirror = bare(dir.path());
        move_aside(&mirror).unwrap();
        assert!(!mirror.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "and deleted");
    }
}
