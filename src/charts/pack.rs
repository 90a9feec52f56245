//! A directory packed as Flux's artifact storage packs one (fluxcd/pkg `artifact/storage/archive.go`,
//! `Storage.Archive`, which source-watcher uses for the artifacts an ArtifactGenerator builds): a
//! gzip tar of every regular file and directory under it, named relative to it, in lexical walk
//! order; symbolic links and other special files left out. helm-controller loads a chart from
//! such an artifact with Helm's archive loader, so what the chart holds is decided by these
//! names (the first component dropped), not by a directory walk.

use std::io::Write;
use std::path::Path;

/// Packs `dir` into a gzip tar held in memory; more than `max_bytes` of file content is refused.
pub fn pack_dir(dir: &Path, max_bytes: u64) -> Result<Vec<u8>, String> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), Default::default()));
    let mut total: u64 = 0;
    // Go's filepath.Walk visits names in lexical order, the root first (named "." and skipped by
    // every loader as a directory).
    for entry in walkdir::WalkDir::new(dir).follow_links(false).sort_by_file_name().min_depth(1) {
        let entry = entry.map_err(|e| format!("cannot read the artifact's files: {e}"))?;
        let kind = entry.file_type();
        if !(kind.is_file() || kind.is_dir()) {
            continue;
        }
        let name = entry.path().strip_prefix(dir).map_err(|e| e.to_string())?;
        let mut header = tar::Header::new_gnu();
        header.set_mode(if kind.is_dir() { 0o755 } else { 0o644 });
        if kind.is_dir() {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_size(0);
            builder
                .append_data(&mut header, name, std::io::empty())
                .map_err(|e| format!("cannot pack the artifact: {e}"))?;
            continue;
        }
        let bytes =
            std::fs::read(entry.path()).map_err(|e| format!("cannot read {}: {e}", name.display()))?;
        total += bytes.len() as u64;
        if total > max_bytes {
            return Err(format!("the artifact holds more than {} MiB", max_bytes >> 20));
        }
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        builder
            .append_data(&mut header, name, &bytes[..])
            .map_err(|e| format!("cannot pack the artifact: {e}"))?;
    }
    let mut gzip = builder.into_inner().map_err(|e| format!("cannot pack the artifact: {e}"))?;
    gzip.flush().map_err(|e| format!("cannot pack the artifact: {e}"))?;
    gzip.finish().map_err(|e| format!("cannot pack the artifact: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(archive: &[u8]) -> Vec<(String, bool)> {
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
        tar.entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.path().unwrap().display().to_string(), e.header().entry_type().is_dir())
            })
            .collect()
    }

    #[test]
    fn names_are_relative_in_walk_order_and_links_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("db/templates")).unwrap();
        std::fs::write(dir.path().join("db/Chart.yaml"), "name: db\n").unwrap();
        std::fs::write(dir.path().join("db/templates/.hidden.yaml"), "x\n").unwrap();
        std::fs::write(dir.path().join("db/.helmignore"), "templates/\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("db/templates/link.yaml")).unwrap();
        let packed = pack_dir(dir.path(), 1 << 20).unwrap();
        assert_eq!(
            names(&packed),
            [
                ("db".to_string(), true),
                ("db/.helmignore".to_string(), false),
                ("db/Chart.yaml".to_string(), false),
                ("db/templates".to_string(), true),
                ("db/templates/.hidden.yaml".to_string(), false),
            ]
        );
        assert!(pack_dir(dir.path(), 4).unwrap_err().contains("more than"));
    }
}
