//! Chart archives (`.tgz`, as `helm package` writes and registries serve them) unpacked for
//! `helm template`: regular files and directories only, every path a plain relative one, the
//! whole bounded. An archive is a pull request's as much as a file in it is.

use flate2::read::MultiGzDecoder;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// The most a chart may unpack to; real charts are far below (the largest of kube-prometheus-stack
/// unpacks to a few MiB).
pub const MAX_UNPACKED_BYTES: u64 = 64 << 20;
/// The most entries an archive may hold.
const MAX_ENTRIES: usize = 20_000;

/// Unpacks a gzip-compressed tar stream into `into` and returns the chart's directory: the
/// archive's one top-level directory that holds a `Chart.yaml`.
pub fn unpack_from(reader: impl Read, into: &Path) -> Result<PathBuf, String> {
    // Every gzip member, as Go's reader (Helm's, Argo CD's) reads them: a first member that ends
    // early must not hide the templates of the next.
    let mut tar = tar::Archive::new(MultiGzDecoder::new(reader));
    let mut total: u64 = 0;
    let mut tops = std::collections::BTreeSet::new();
    let entries = tar.entries().map_err(|e| format!("not a chart archive (gzip tar): {e}"))?;
    for (count, entry) in entries.enumerate() {
        if count >= MAX_ENTRIES {
            return Err(format!("the chart archive holds more than {MAX_ENTRIES} entries"));
        }
        let mut entry = entry.map_err(|e| format!("the chart archive is damaged: {e}"))?;
        let kind = entry.header().entry_type();
        // pax and GNU long-name headers are read by the tar crate itself; other kinds (links,
        // devices) have no place in a chart.
        if !(kind.is_file() || kind.is_dir()) {
            let path = entry.path().map(|p| p.display().to_string()).unwrap_or_default();
            return Err(format!("the chart archive holds '{path}', which is not a file or directory"));
        }
        let path = entry.path().map_err(|e| format!("the chart archive has a bad path: {e}"))?.into_owned();
        if path.as_os_str().is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(format!(
                "the chart archive holds the path '{}', which leaves the chart",
                path.display()
            ));
        }
        if let Some(Component::Normal(top)) = path.components().next() {
            tops.insert(top.to_os_string());
        }
        let target = into.join(&path);
        if kind.is_dir() {
            std::fs::create_dir_all(&target).map_err(|e| format!("cannot unpack the chart: {e}"))?;
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot unpack the chart: {e}"))?;
        }
        let mut out = std::fs::File::create(&target).map_err(|e| format!("cannot unpack the chart: {e}"))?;
        let room = MAX_UNPACKED_BYTES - total;
        let copied = std::io::copy(&mut (&mut entry).take(room + 1), &mut out)
            .map_err(|e| format!("the chart archive is damaged: {e}"))?;
        if copied > room {
            return Err(format!("the chart unpacks to more than {} MiB", MAX_UNPACKED_BYTES >> 20));
        }
        total += copied;
    }
    let mut tops = tops.into_iter();
    match (tops.next(), tops.next()) {
        (Some(top), None) if into.join(&top).join("Chart.yaml").is_file() => Ok(into.join(top)),
        _ => Err("the archive is not a chart: it must hold one directory with a Chart.yaml".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), Default::default()));
        for (path, kind, body) in entries {
            let mut header = tar::Header::new_gnu();
            header.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_entry_type(*kind);
            header.set_size(body.len() as u64);
            header.set_mode(0o644);
            if *kind == tar::EntryType::Symlink {
                header.set_link_name("/etc/passwd").unwrap();
            }
            header.set_cksum();
            builder.append(&header, *body).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    /// Attack: the templates of a second gzip member, after a first that ends without the tar
    /// end marker. Go's reader (Helm's, Argo CD's) reads both members: so does the unpacking.
    #[test]
    fn a_second_gzip_member_is_unpacked_as_go_reads_it() {
        let first = archive(&[("web/Chart.yaml", tar::EntryType::Regular, b"name: web\nversion: 1.0.0\n")]);
        let second = archive(&[("web/templates/hidden.yaml", tar::EntryType::Regular, b"kind: Hidden\n")]);
        // The first member without its end marker (two zero blocks).
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&first[..]), &mut plain).unwrap();
        plain.truncate(plain.len() - 1024);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), Default::default());
        std::io::Write::write_all(&mut gz, &plain).unwrap();
        let mut bytes = gz.finish().unwrap();
        bytes.extend_from_slice(&second);
        let dir = tempfile::tempdir().unwrap();
        let chart = unpack_from(&bytes[..], dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(chart.join("templates/hidden.yaml")).unwrap(), "kind: Hidden\n");
    }

    #[test]
    fn a_chart_unpacks_to_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = archive(&[
            ("web/Chart.yaml", tar::EntryType::Regular, b"name: web\nversion: 1.0.0\n"),
            ("web/templates/a.yaml", tar::EntryType::Regular, b"kind: A\n"),
        ]);
        let chart = unpack_from(&bytes[..], dir.path()).unwrap();
        assert_eq!(chart, dir.path().join("web"));
        assert_eq!(std::fs::read_to_string(chart.join("templates/a.yaml")).unwrap(), "kind: A\n");
    }

    #[test]
    fn paths_that_leave_the_chart_links_and_two_charts_are_refused() {
        let outside = [("web/../../evil", tar::EntryType::Regular, &b"x"[..])];
        let absolute = [("/tmp/evil", tar::EntryType::Regular, &b"x"[..])];
        let link = [
            ("web/Chart.yaml", tar::EntryType::Regular, &b"name: web\n"[..]),
            ("web/values.yaml", tar::EntryType::Symlink, &b""[..]),
        ];
        let two = [
            ("a/Chart.yaml", tar::EntryType::Regular, &b"name: a\n"[..]),
            ("b/Chart.yaml", tar::EntryType::Regular, &b"name: b\n"[..]),
        ];
        for (entries, expected) in [
            (&outside[..], "leaves the chart"),
            (&absolute[..], "leaves the chart"),
            (&link[..], "not a file or directory"),
            (&two[..], "one directory with a Chart.yaml"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let error = unpack_from(&archive(entries)[..], dir.path()).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn an_archive_larger_than_the_bound_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = vec![b'a'; (MAX_UNPACKED_BYTES + 1) as usize];
        let bytes = archive(&[
            ("web/Chart.yaml", tar::EntryType::Regular, b"name: web\n"),
            ("web/big", tar::EntryType::Regular, &big),
        ]);
        let error = unpack_from(&bytes[..], dir.path()).unwrap_err();
        assert!(error.contains("more than 64 MiB"), "{error}");
    }
}
