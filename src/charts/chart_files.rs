//! A chart's files as Helm loads them, for checks that read its templates' text: an archive by
//! the names its archive loader gives (`loader`), a directory as its directory loader reads it
//! (`.helmignore` and `templates/.?*` left out). Subcharts vendored as archives under `charts/`
//! are read too, their files named `charts/<archive>/<name>`. Bounded like every chart read.

use super::helmignore::Rules;
use super::loader::{ChartArchive, MAX_ENTRIES, MAX_LOADED_BYTES};
use std::path::Path;

/// One file of a chart: its path as Helm names it, its text (invalid UTF-8 replaced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartFile {
    pub path: String,
    pub text: String,
}

/// How deep vendored archives are opened (a chart in a chart in a chart…).
const MAX_DEPTH: usize = 4;

/// The files of the chart at `chart` (a directory or a packaged archive).
pub fn chart_files(chart: &Path) -> Result<Vec<ChartFile>, String> {
    let mut files = Vec::new();
    let mut budget = Budget::default();
    if chart.is_dir() {
        read_dir(chart, &mut files, &mut budget)?;
    } else {
        let bytes = std::fs::read(chart).map_err(|e| format!("cannot read {}: {e}", chart.display()))?;
        read_archive(&bytes, "", 0, &mut files, &mut budget)?;
    }
    Ok(files)
}

/// The files of an archive already in memory.
pub fn archive_files(bytes: &[u8]) -> Result<Vec<ChartFile>, String> {
    let mut files = Vec::new();
    read_archive(bytes, "", 0, &mut files, &mut Budget::default())?;
    Ok(files)
}

#[derive(Default)]
struct Budget {
    bytes: u64,
    files: usize,
}

impl Budget {
    fn take(&mut self, size: u64) -> Result<(), String> {
        self.bytes += size;
        self.files += 1;
        if self.bytes > MAX_LOADED_BYTES || self.files > MAX_ENTRIES {
            return Err(format!(
                "the chart holds more than {} MiB or {MAX_ENTRIES} files",
                MAX_LOADED_BYTES >> 20
            ));
        }
        Ok(())
    }
}

fn push(files: &mut Vec<ChartFile>, budget: &mut Budget, path: String, data: &[u8]) -> Result<(), String> {
    budget.take(data.len() as u64)?;
    files.push(ChartFile { path, text: String::from_utf8_lossy(data).into_owned() });
    Ok(())
}

fn read_archive(
    bytes: &[u8],
    prefix: &str,
    depth: usize,
    files: &mut Vec<ChartFile>,
    budget: &mut Budget,
) -> Result<(), String> {
    let archive = ChartArchive::read(bytes).map_err(|e| e.to_string())?;
    for entry in archive.entries() {
        let data = archive.data(entry);
        nested(&entry.loaded, data, prefix, depth, files, budget)?;
        push(files, budget, format!("{prefix}{}", entry.loaded), data)?;
    }
    Ok(())
}

/// Opens `charts/<name>.tgz` (a subchart the loader reads as an archive).
fn nested(
    name: &str,
    data: &[u8],
    prefix: &str,
    depth: usize,
    files: &mut Vec<ChartFile>,
    budget: &mut Budget,
) -> Result<(), String> {
    let is_subchart_archive = name
        .strip_prefix("charts/")
        .is_some_and(|rest| !rest.contains('/') && rest.ends_with(".tgz") && !rest.starts_with(['_', '.']));
    if is_subchart_archive && depth < MAX_DEPTH {
        // A subchart Helm cannot read fails the chart's load: its files are simply not listed.
        let _ = read_archive(data, &format!("{prefix}{name}/"), depth + 1, files, budget);
    }
    Ok(())
}

fn read_dir(chart: &Path, files: &mut Vec<ChartFile>, budget: &mut Budget) -> Result<(), String> {
    let helmignore = std::fs::read(chart.join(".helmignore")).ok();
    let rules = Rules::for_chart(helmignore.as_deref())?;
    let mut pending = vec![String::new()];
    while let Some(relative) = pending.pop() {
        let dir = if relative.is_empty() { chart.to_path_buf() } else { chart.join(&relative) };
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = if relative.is_empty() { name } else { format!("{relative}/{name}") };
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                if !rules.ignores(&path, true) {
                    pending.push(path);
                }
            } else if kind.is_file() && !rules.ignores(&path, false) {
                let data = std::fs::read(entry.path()).map_err(|e| format!("cannot read {path}: {e}"))?;
                nested(&path, &data, "", 0, files, budget)?;
                push(files, budget, path, &data)?;
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_lists_what_its_loader_reads_and_a_directory_what_its_loader_reads() {
        let sub = crate::charts::loader::tests::archive(&[
            ("sub/Chart.yaml", b"name: sub\n"),
            ("sub/templates/l.yaml", b"{{ lookup \"v1\" \"Secret\" \"\" \"\" }}"),
        ]);
        let bytes = crate::charts::loader::tests::archive(&[
            ("app/Chart.yaml", b"name: app\n"),
            ("app/templates/.dot.yaml", b"kind: A\n"),
            ("app/charts/sub-1.0.0.tgz", &sub),
        ]);
        let paths: Vec<String> = archive_files(&bytes).unwrap().into_iter().map(|f| f.path).collect();
        assert_eq!(
            paths,
            [
                "Chart.yaml",
                "templates/.dot.yaml",
                "charts/sub-1.0.0.tgz/Chart.yaml",
                "charts/sub-1.0.0.tgz/templates/l.yaml",
                "charts/sub-1.0.0.tgz"
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("templates")).unwrap();
        std::fs::write(dir.path().join("Chart.yaml"), "name: app\n").unwrap();
        std::fs::write(dir.path().join(".helmignore"), "skip.yaml\n").unwrap();
        std::fs::write(dir.path().join("templates/.dot.yaml"), "kind: A\n").unwrap();
        std::fs::write(dir.path().join("templates/skip.yaml"), "kind: A\n").unwrap();
        std::fs::write(dir.path().join("templates/a.yaml"), "kind: A\n").unwrap();
        let paths: Vec<String> = chart_files(dir.path()).unwrap().into_iter().map(|f| f.path).collect();
        assert_eq!(paths, [".helmignore", "Chart.yaml", "templates/a.yaml"]);
    }
}
