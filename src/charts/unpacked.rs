//! The chart store: charts as Helm reads them, kept by the digest of their archive and shared by
//! every release, both sides of a plan and every plan after (the render cache's directory,
//! `unpacked/`). An entry is a directory named by the digest's hex digits; it holds parts, each
//! made once: the archive as `helm template` reads it, what the render learns of the chart, the
//! chart unpacked (Argo CD renders the directory). A part is made in a temporary directory and
//! renamed into place, so a crash leaves no half part and writers of one digest race harmlessly.
//!
//! The store holds at most `MAX_ENTRIES` digests; past that the least recently used go first
//! (an entry's modification time is set when a process first uses it), but never one used within
//! the default plan timeout: another plan may hold it. Each part is bounded by
//! the chart bounds (`store::MAX_CHART_BYTES` fetched, `archive::MAX_UNPACKED_BYTES` unpacked).

use crate::memo::Memo;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

/// The store's directory under the cache directory.
pub const DIR: &str = "unpacked";
/// The most digests kept.
pub const MAX_ENTRIES: usize = 128;
/// Temporary directories a crashed writer left are removed after this long.
const STALE_AFTER: Duration = Duration::from_secs(3600);
/// An entry used this recently may be in a running plan's hands (the default plan timeout): it
/// is never evicted, past the bound if need be, so no pull request's charts push out another
/// plan's.
const IN_USE_FOR: Duration = Duration::from_secs(crate::planner::DEFAULT_PLAN_TIMEOUT_SECS);
/// The prefix of temporary directories (never a digest's hex).
const TEMPORARY: &str = ".tmp-";

/// Charts kept by digest; a temporary directory of this process when there is no cache.
pub struct UnpackedCharts {
    root: super::store::ChartDir,
    /// Parts this process found or made, by (digest, part).
    parts: Memo<(String, String), Result<PathBuf, String>>,
    /// Parts this process wrote (tests and benchmarks count them).
    written: AtomicUsize,
}

impl UnpackedCharts {
    /// A store under `cache_dir/unpacked`, else in a temporary directory made on first use.
    pub fn new(cache_dir: Option<PathBuf>) -> Self {
        UnpackedCharts {
            root: super::store::ChartDir::new(cache_dir.map(|dir| dir.join(DIR))),
            parts: Memo::default(),
            written: AtomicUsize::new(0),
        }
    }

    /// How many parts this store wrote.
    pub fn written(&self) -> usize {
        self.written.load(Ordering::SeqCst)
    }

    /// The part `part` of the entry of `digest` (`sha256:` and 64 hex digits), made by `fill`
    /// (which must create the path it is given) when the store does not hold it.
    pub fn part(
        &self,
        digest: &str,
        part: &str,
        fill: impl FnOnce(&Path) -> Result<(), String>,
    ) -> Result<PathBuf, String> {
        let hex = entry_name(digest)?;
        self.parts.get(&(hex.to_string(), part.to_string()), || {
            let root = self.root.path()?;
            let entry = root.join(hex);
            let target = entry.join(part);
            if target.exists() {
                touch(&entry);
                return Ok(target);
            }
            let cannot = |e: std::io::Error| format!("cannot keep the chart in {}: {e}", root.display());
            let scratch = tempfile::Builder::new().prefix(TEMPORARY).tempdir_in(&root).map_err(cannot)?;
            let made = scratch.path().join(part);
            fill(&made)?;
            std::fs::create_dir_all(&entry).map_err(cannot)?;
            match std::fs::rename(&made, &target) {
                Ok(()) => {
                    self.written.fetch_add(1, Ordering::SeqCst);
                    touch(&entry);
                    evict(&root, &entry);
                }
                // Another writer of the same digest was first: its part is the same.
                Err(_) if target.exists() => {}
                Err(e) => return Err(cannot(e)),
            }
            Ok(target)
        })
    }

    /// The chart of the archive at `archive` unpacked (its directory holding `Chart.yaml`), as
    /// the entry of `digest`; the archive must have that digest.
    pub fn unpacked(&self, archive: &Path, digest: &str) -> Result<PathBuf, String> {
        let tree = self.part(digest, "chart", |into| {
            let bytes = read_checked(archive, digest)?;
            std::fs::create_dir_all(into).map_err(|e| format!("cannot unpack the chart: {e}"))?;
            super::archive::unpack_from(&bytes[..], into).map(drop)
        })?;
        // The archive holds one top directory (checked when unpacked).
        let top =
            std::fs::read_dir(&tree)
                .ok()
                .and_then(|mut entries| entries.next())
                .and_then(Result::ok)
                .ok_or_else(|| format!("the chart store's entry {} is damaged: remove it", tree.display()))?;
        Ok(top.path())
    }
}

/// The sha256 digest of `bytes`, as entries are named (`sha256:…`).
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The bytes of the archive at `path`, which must have `digest`: an archive put where another
/// was (the same name, other bytes) never fills that one's entry.
pub fn read_checked(path: &Path, digest: &str) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let actual = digest_of(&bytes);
    if !actual.eq_ignore_ascii_case(digest) {
        return Err(format!(
            "the chart archive {} is {actual}, not the {digest} it was kept as",
            path.display()
        ));
    }
    Ok(bytes)
}

/// The hex digits of a `sha256:` digest: an entry's name, never a path.
fn entry_name(digest: &str) -> Result<&str, String> {
    digest
        .strip_prefix("sha256:")
        .filter(|hex| {
            hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        })
        .ok_or_else(|| format!("'{digest}' is not a sha256 digest"))
}

/// Marks an entry used now (eviction takes the least recently used first).
fn touch(entry: &Path) {
    if let Ok(dir) = std::fs::File::open(entry) {
        let _ = dir.set_modified(SystemTime::now());
    }
}

/// Removes the least recently used entries past `MAX_ENTRIES` (never `keep`, just written, nor
/// one used within `IN_USE_FOR`), and temporary directories a crashed writer left. An entry is renamed away first, so a reader
/// sees it whole or not at all.
fn evict(root: &Path, keep: &Path) {
    let Ok(listing) = std::fs::read_dir(root) else { return };
    let now = SystemTime::now();
    let (mut total, mut entries): (usize, _) = (0, Vec::new());
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let modified = entry.metadata().and_then(|m| m.modified()).unwrap_or(now);
        if name.starts_with(TEMPORARY) {
            if now.duration_since(modified).is_ok_and(|age| age > STALE_AFTER) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        } else if entry.path() != keep {
            total += 1;
            if now.duration_since(modified).is_ok_and(|age| age > IN_USE_FOR) {
                entries.push((modified, entry.path()));
            }
        }
    }
    let excess = (total + 1).saturating_sub(MAX_ENTRIES);
    entries.sort();
    for (_, path) in entries.into_iter().take(excess) {
        let Ok(away) = tempfile::Builder::new().prefix(TEMPORARY).tempdir_in(root) else { return };
        let target = away.path().join("evicted");
        if std::fs::rename(&path, &target).is_ok() {
            drop(away); // removes what it holds
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(name: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), Default::default()));
        let chart_yaml = format!("apiVersion: v2\nname: {name}\nversion: 1.0.0\n");
        let all = std::iter::once(("Chart.yaml", chart_yaml.as_bytes())).chain(files.iter().copied());
        for (path, body) in all {
            let mut header = tar::Header::new_gnu();
            header.set_size(body.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, format!("{name}/{path}"), body).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    fn kept(dir: &Path, bytes: &[u8]) -> (PathBuf, String) {
        let digest = digest_of(bytes);
        let path = dir.join(format!("{}.tgz", digest.replace(':', "-")));
        std::fs::write(&path, bytes).unwrap();
        (path, digest)
    }

    #[test]
    fn a_chart_is_unpacked_once_per_digest_and_found_by_the_next_process() {
        let (cache, archives) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (path, digest) = kept(archives.path(), &chart("app", &[("templates/a.yaml", b"kind: A\n")]));
        let store = UnpackedCharts::new(Some(cache.path().to_path_buf()));
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| store.unpacked(&path, &digest).unwrap());
            }
        });
        let dir = store.unpacked(&path, &digest).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("templates/a.yaml")).unwrap(), "kind: A\n");
        assert_eq!(store.written(), 1);
        let next = UnpackedCharts::new(Some(cache.path().to_path_buf()));
        assert_eq!(next.unpacked(&path, &digest).unwrap(), dir);
        assert_eq!(next.written(), 0, "a warm store writes nothing");
        // Two processes writing the same digest at once: one entry, whole.
        let racing = tempfile::tempdir().unwrap();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    UnpackedCharts::new(Some(racing.path().to_path_buf())).unpacked(&path, &digest)
                });
            }
        });
        let listing: Vec<_> = std::fs::read_dir(racing.path().join(DIR)).unwrap().flatten().collect();
        assert_eq!(listing.len(), 1, "{listing:?}");
        let again = UnpackedCharts::new(Some(racing.path().to_path_buf())).unpacked(&path, &digest).unwrap();
        assert!(again.join("templates/a.yaml").is_file());
    }

    #[test]
    fn hostile_archives_leave_no_entry() {
        let (cache, archives) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store = UnpackedCharts::new(Some(cache.path().to_path_buf()));
        let raw = |path: &str, kind: tar::EntryType, body: &[u8], link: Option<&str>| {
            let mut builder =
                tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), Default::default()));
            let mut ok = tar::Header::new_gnu();
            let chart_yaml = b"name: app\n";
            ok.set_size(chart_yaml.len() as u64);
            ok.set_mode(0o644);
            ok.set_cksum();
            builder.append_data(&mut ok, "app/Chart.yaml", &chart_yaml[..]).unwrap();
            let mut header = tar::Header::new_gnu();
            header.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_entry_type(kind);
            header.set_size(body.len() as u64);
            header.set_mode(0o644);
            if let Some(link) = link {
                header.set_link_name(link).unwrap();
            }
            header.set_cksum();
            builder.append(&header, body).unwrap();
            builder.into_inner().unwrap().finish().unwrap()
        };
        let huge = vec![b'a'; (super::super::archive::MAX_UNPACKED_BYTES + 1) as usize];
        for (what, bytes) in [
            ("climbs out", raw("app/../../escaped", tar::EntryType::Regular, b"x", None)),
            ("absolute", raw("/tmp/escaped", tar::EntryType::Regular, b"x", None)),
            ("symlink", raw("app/templates/l.yaml", tar::EntryType::Symlink, b"", Some("/etc/passwd"))),
            ("hard link", raw("app/templates/h.yaml", tar::EntryType::Link, b"", Some("app/Chart.yaml"))),
            ("huge", raw("app/templates/big.yaml", tar::EntryType::Regular, &huge, None)),
        ] {
            let (path, digest) = kept(archives.path(), &bytes);
            assert!(store.unpacked(&path, &digest).is_err(), "{what}");
        }
        assert_eq!(store.written(), 0);
        let left: Vec<_> = std::fs::read_dir(cache.path().join(DIR))
            .unwrap()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with(TEMPORARY))
            .filter(|e| std::fs::read_dir(e.path()).unwrap().next().is_some())
            .collect();
        assert!(left.is_empty(), "{left:?}");
        assert!(!Path::new("/tmp/escaped").exists() && !archives.path().join("escaped").exists());
        // Near miss: the same layout with plain files is kept.
        let (path, digest) =
            kept(archives.path(), &raw("app/templates/ok.yaml", tar::EntryType::Regular, b"x", None));
        assert!(store.unpacked(&path, &digest).unwrap().join("templates/ok.yaml").is_file());
    }

    #[test]
    fn another_archive_at_the_name_of_a_digest_never_fills_its_entry() {
        let (cache, archives) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let genuine = chart("app", &[("templates/a.yaml", b"kind: Genuine\n")]);
        let (path, digest) = kept(archives.path(), &genuine);
        // A different archive put where the genuine one is kept, under its name.
        std::fs::write(&path, chart("app", &[("templates/a.yaml", b"kind: Forged\n")])).unwrap();
        let store = UnpackedCharts::new(Some(cache.path().to_path_buf()));
        let error = store.unpacked(&path, &digest).unwrap_err();
        assert!(error.contains("not the sha256:"), "{error}");
        // Near miss: the genuine bytes back in place fill it (another process: nothing memoized).
        std::fs::write(&path, &genuine).unwrap();
        let dir = UnpackedCharts::new(Some(cache.path().to_path_buf())).unpacked(&path, &digest).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("templates/a.yaml")).unwrap(), "kind: Genuine\n");
        // A digest is a name, never a path.
        for bad in ["sha256:../../etc", "sha256:", "md5:00", &digest.to_uppercase(), &format!("{digest}/x")] {
            assert!(store.part(bad, "chart", |_| Ok(())).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_least_recently_used_entries_go_first_past_the_bound() {
        let cache = tempfile::tempdir().unwrap();
        let store = UnpackedCharts::new(Some(cache.path().to_path_buf()));
        let digests: Vec<String> =
            (0..MAX_ENTRIES + 2).map(|n| digest_of(n.to_string().as_bytes())).collect();
        let write = |store: &UnpackedCharts, digest: &str| {
            store.part(digest, "facts", |path| std::fs::write(path, "{}").map_err(|e| e.to_string())).unwrap()
        };
        for (n, digest) in digests.iter().enumerate() {
            write(&store, digest);
            // Ages one second apart, the first used again (by another process) just before the bound.
            let entry = cache.path().join(DIR).join(entry_name(digest).unwrap());
            let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + n as u64);
            std::fs::File::open(entry).unwrap().set_modified(at).unwrap();
            if n == MAX_ENTRIES - 2 {
                touch(&cache.path().join(DIR).join(entry_name(&digests[0]).unwrap()));
            }
        }
        let names: std::collections::BTreeSet<String> = std::fs::read_dir(cache.path().join(DIR))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), MAX_ENTRIES, "{}", names.len());
        let kept = |n: usize| names.contains(entry_name(&digests[n]).unwrap());
        assert!(kept(0), "used again: kept");
        assert!(!kept(1) && !kept(2), "the oldest unused go");
        assert!(kept(3) && kept(MAX_ENTRIES + 1));
    }

    /// Attack: a pull request whose charts are many digests, while another plan holds entries.
    /// What was used within the plan timeout stays, past the bound.
    #[test]
    fn entries_in_use_are_never_evicted() {
        let cache = tempfile::tempdir().unwrap();
        let store = UnpackedCharts::new(Some(cache.path().to_path_buf()));
        for n in 0..MAX_ENTRIES + 2 {
            let digest = digest_of(format!("in use {n}").as_bytes());
            store
                .part(&digest, "facts", |path| std::fs::write(path, "{}").map_err(|e| e.to_string()))
                .unwrap();
        }
        assert_eq!(std::fs::read_dir(cache.path().join(DIR)).unwrap().count(), MAX_ENTRIES + 2);
    }
}
