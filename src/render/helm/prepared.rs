//! Packaged charts prepared for `helm template` once per digest, in the chart store
//! (`charts::unpacked`): what a render needs to know of the chart (its version, where Helm's
//! loaders differ, a values schema that needs the network, what its templates call) is learned
//! the first time a digest is seen and kept beside it, and the archive Helm reads (rewritten
//! where the controller changes the chart) is written there once. A render whose `helm template`
//! output is cached reads no chart file and unpacks nothing: only the facts, from memory or
//! one small file.

use super::release::{failed, NotRendered};
use super::template_calls::ChartCalls;
use super::units::ChartVersion;
use crate::charts::loader::{Changes, ChartArchive, LoadError};
use crate::charts::unpacked::{digest_of, read_checked, UnpackedCharts};
use crate::memo::Memo;
use crate::render::RenderError;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The store's part holding a chart's facts (the format in its name: a new one is learned again).
const FACTS: &str = "facts-1.json";
/// The part holding the archive `helm template` reads.
const ARCHIVE: &str = "chart.tgz";

/// What a render needs to know of a chart archive, learned once per digest.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ChartFacts {
    /// `version` in its `Chart.yaml`, as written (helm-controller appends a digest to it).
    pub version: Value,
    /// Its name and version, as the plan shows them.
    pub chart: Option<ChartVersion>,
    /// Dependencies it declares and does not vendor (left out, as the controller installs it).
    pub unvendored: Vec<String>,
    /// Entries Helm's directory loader would read otherwise than its archive loader.
    pub loader_differences: Vec<String>,
    /// A values schema that refers to the network: its path and the URL.
    pub remote_schema: Option<(String, String)>,
    /// What its templates call, whatever the values.
    pub calls: ChartCalls,
}

/// A chart archive and its digest: a file kept by digest, or bytes read or packed here.
pub struct Packaged {
    bytes: Bytes,
    pub digest: String,
}

enum Bytes {
    /// A file that must have the digest (checked when read).
    File(PathBuf),
    Memory(Arc<Vec<u8>>),
}

impl Packaged {
    /// The archive at `path`, kept under `digest` (a fetched chart).
    pub fn kept(path: PathBuf, digest: String) -> Self {
        Packaged { bytes: Bytes::File(path), digest }
    }

    /// An archive in memory.
    pub fn in_memory(bytes: Vec<u8>) -> Self {
        Packaged { digest: digest_of(&bytes), bytes: Bytes::Memory(Arc::new(bytes)) }
    }

    fn bytes(&self) -> Result<Arc<Vec<u8>>, String> {
        match &self.bytes {
            Bytes::File(path) => read_checked(path, &self.digest).map(Arc::new),
            Bytes::Memory(bytes) => Ok(bytes.clone()),
        }
    }
}

/// Charts prepared for renders: the store, and the facts learned in this process.
pub struct PreparedCharts {
    pub store: UnpackedCharts,
    facts: Memo<String, Result<Arc<ChartFacts>, Unprepared>>,
    /// Archives read to be rewritten, by digest: releases of one chart with their own
    /// `valuesFiles` each get a rewritten archive, all from one read.
    archives: Memo<String, Result<Arc<ChartArchive>, Unprepared>>,
    /// Archives this process read and decompressed (tests and benchmarks count them).
    loaded: AtomicUsize,
    /// Chart directories read, by path: every release of a chart directory of one export
    /// shares one read (an export does not change while a renderer lives).
    directories: Memo<PathBuf, Result<Arc<DirectoryFacts>, String>>,
    /// Chart directories this process read (tests count them).
    directories_read: AtomicUsize,
}

/// What a render needs to know of a chart directory, read once.
#[derive(Debug)]
pub struct DirectoryFacts {
    /// Every file of it, hashed: its part of the render cache's key.
    pub digest: String,
    /// A values schema that refers to the network: its path and the URL.
    pub remote_schema: Option<(String, String)>,
    /// What its templates call, whatever the values.
    pub calls: ChartCalls,
}

/// Why a chart is not prepared.
#[derive(Debug, Clone)]
enum Unprepared {
    /// Helm's loader refuses it, or one of fluxplan's bounds does.
    Load(LoadError),
    /// fluxplan's own disk.
    Disk(String),
}

impl PreparedCharts {
    pub fn new(cache_dir: Option<PathBuf>) -> Self {
        PreparedCharts {
            store: UnpackedCharts::new(cache_dir),
            facts: Memo::default(),
            archives: Memo::default(),
            loaded: AtomicUsize::new(0),
            directories: Memo::default(),
            directories_read: AtomicUsize::new(0),
        }
    }

    /// The chart directory at `dir`, read once (hashed and scanned) however many releases use it.
    pub fn directory(&self, dir: &Path) -> Result<Arc<DirectoryFacts>, String> {
        let read = || {
            self.directories_read.fetch_add(1, Ordering::SeqCst);
            let digest = directory_digest(dir).map_err(|e| format!("cannot read the chart: {e}"))?;
            // A chart too large to read fails in Helm, which says so.
            let files = crate::charts::chart_files::chart_files(dir).unwrap_or_default();
            Ok(Arc::new(DirectoryFacts {
                digest,
                remote_schema: super::schema::remote_reference(dir),
                calls: ChartCalls::of(files.iter().map(|f| (f.path.as_str(), f.text.as_str()))),
            }))
        };
        self.directories.get(&dir.to_path_buf(), read)
    }

    /// How many chart directories this process read.
    pub fn directories_read(&self) -> usize {
        self.directories_read.load(Ordering::SeqCst)
    }

    /// How many archives this process read and decompressed.
    pub fn loaded(&self) -> usize {
        self.loaded.load(Ordering::SeqCst)
    }

    /// The archive read as Helm's archive loader reads it (for what only its files say).
    pub fn load(&self, archive: &Packaged, whose: &str) -> Result<ChartArchive, NotRendered> {
        self.load_archive(archive).map_err(|e| e.not_rendered(whose))
    }

    fn load_archive(&self, archive: &Packaged) -> Result<ChartArchive, Unprepared> {
        let bytes = archive.bytes().map_err(Unprepared::Disk)?;
        self.loaded.fetch_add(1, Ordering::SeqCst);
        ChartArchive::read(&bytes).map_err(Unprepared::Load)
    }

    /// The chart's facts: from this process, else the store, else learned from the archive and
    /// kept. `whose` names the chart in messages.
    pub fn facts(&self, archive: &Packaged, whose: &str) -> Result<Arc<ChartFacts>, NotRendered> {
        let learn = || -> Result<Arc<ChartFacts>, Unprepared> {
            let mut learned = None;
            let part = self.store.part(&archive.digest, FACTS, |path| {
                let facts = self.learn(archive).map_err(|e| {
                    let why = e.to_string();
                    learned = Some(Err(e));
                    why
                })?;
                let text = serde_json::to_string(&facts).expect("facts serialize");
                learned = Some(Ok(Arc::new(facts)));
                std::fs::write(path, text).map_err(|e| e.to_string())
            });
            match (learned, part) {
                (Some(learned), _) => learned,
                (None, Err(why)) => Err(Unprepared::Disk(why)),
                (None, Ok(path)) => {
                    let kept = std::fs::read(&path).ok().and_then(|text| serde_json::from_slice(&text).ok());
                    // A damaged part is learned again, in memory.
                    kept.map(Arc::new).map_or_else(|| self.learn(archive).map(Arc::new), Ok)
                }
            }
        };
        self.facts.get(&archive.digest, learn).map_err(|e| e.not_rendered(whose))
    }

    fn learn(&self, archive: &Packaged) -> Result<ChartFacts, Unprepared> {
        let bytes = archive.bytes().map_err(Unprepared::Disk)?;
        self.loaded.fetch_add(1, Ordering::SeqCst);
        let chart = ChartArchive::read(&bytes).map_err(Unprepared::Load)?;
        let metadata = chart.metadata().map_err(|why| Unprepared::Load(LoadError::Refused(why)))?;
        let files = crate::charts::chart_files::archive_files(&bytes).unwrap_or_default();
        Ok(ChartFacts {
            version: metadata["version"].clone(),
            chart: chart_version(&metadata),
            unvendored: chart.unvendored_dependencies(),
            loader_differences: chart.loader_differences(),
            remote_schema: super::schema::remote_reference_in_archive(&bytes),
            calls: ChartCalls::of(files.iter().map(|f| (f.path.as_str(), f.text.as_str()))),
        })
    }

    /// The archive `helm template` reads, `changes` made (written once per digest and changes),
    /// and what identifies it in the render cache's key.
    pub fn for_helm(
        &self,
        archive: &Packaged,
        changes: &Changes,
        whose: &str,
    ) -> Result<(PathBuf, String), NotRendered> {
        let unchanged = changes.values_yaml.is_none()
            && changes.version.is_none()
            && changes.drop_dependencies.is_empty();
        let disk = |why: String| Unprepared::Disk(why).not_rendered(whose);
        if unchanged {
            let path = self.store.part(&archive.digest, ARCHIVE, |path| write(path, &archive.bytes()?));
            return Ok((path.map_err(disk)?, archive.digest.clone()));
        }
        let identity = rewritten_identity(&archive.digest, changes);
        let mut refused = None;
        let path = self.store.part(&identity, ARCHIVE, |path| {
            let read = || self.load_archive(archive).map(Arc::new);
            let chart = self.archives.get(&archive.digest, read).map_err(|e| {
                let why = e.to_string();
                refused = Some(e);
                why
            })?;
            let bytes = chart.rewrite(changes).map_err(|why| {
                refused =
                    Some(Unprepared::Load(LoadError::Refused(format!("cannot prepare the chart: {why}"))));
                why
            })?;
            write(path, &bytes)
        });
        match (path, refused) {
            (Ok(path), _) => Ok((path, identity)),
            (Err(_), Some(refused)) => Err(refused.not_rendered(whose)),
            (Err(why), None) => Err(disk(why)),
        }
    }
}

/// Every file of a chart directory (its relative path, length and bytes), hashed.
pub fn directory_digest(chart: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut files = Vec::new();
    crate::tree::walk(chart, |entry, kind| -> Result<crate::tree::Descend, crate::tree::Unreadable> {
        if kind.is_file() {
            files.push(entry.path());
        }
        Ok(crate::tree::Descend::Yes)
    })
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut hasher = Sha256::new();
    for file in files {
        let relative = file.strip_prefix(chart).unwrap_or(&file);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        let content = std::fs::read(&file)?;
        hasher.update((content.len() as u64).to_le_bytes());
        hasher.update(&content);
    }
    Ok(hex::encode(hasher.finalize()))
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot keep the chart: {e}"))
}

/// What identifies an archive rewritten with `changes` (a pure function of the original's bytes
/// and the changes): the store's entry for it and its part of the render cache's key.
fn rewritten_identity(digest: &str, changes: &Changes) -> String {
    let described = serde_json::json!({
        "archive": digest,
        "values": changes.values_yaml.as_deref().map(digest_of),
        "version": changes.version,
        "drop": changes.drop_dependencies,
    });
    digest_of(described.to_string().as_bytes())
}

/// The name and version a `Chart.yaml` declares.
pub fn chart_version(metadata: &Value) -> Option<ChartVersion> {
    Some(ChartVersion {
        name: metadata["name"].as_str()?.to_string(),
        // As written: the digest helm-controller appends is not a version change.
        version: match &metadata["version"] {
            Value::String(version) => version.clone(),
            other => other.to_string(),
        },
    })
}

impl std::fmt::Display for Unprepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unprepared::Load(error) => write!(f, "{error}"),
            Unprepared::Disk(why) => write!(f, "{why}"),
        }
    }
}

impl Unprepared {
    fn not_rendered(self, whose: &str) -> NotRendered {
        match self {
            Unprepared::Load(LoadError::Refused(why)) => failed(format!("{whose}: {why}")),
            Unprepared::Load(LoadError::Limit(why)) => {
                NotRendered::Failed(RenderError::Limit(format!("{whose}: {why}")))
            }
            // fluxplan's own disk failing says nothing of what the controller does.
            Unprepared::Disk(why) => NotRendered::External(format!(
                "fluxplan could not prepare the chart on its own disk ({why}): not planned"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charts::loader::tests::archive;

    fn chart(lookup_in: &str) -> Vec<u8> {
        archive(&[
            ("app/Chart.yaml", b"apiVersion: v2\nname: app\nversion: 1.2.3\ndependencies:\n- name: db\n"),
            ("app/values.yaml", b"a: 1\n"),
            (lookup_in, b"{{ lookup \"v1\" \"Secret\" \"\" \"\" }}"),
            ("app/values.schema.json", br#"{"$ref": "https://example.com/s.json"}"#),
        ])
    }

    #[test]
    fn a_chart_is_read_once_per_digest_and_never_again_by_the_next_process() {
        let cache = tempfile::tempdir().unwrap();
        let bytes = chart("app/templates/a.yaml");
        let charts = PreparedCharts::new(Some(cache.path().to_path_buf()));
        let changes = Changes { version: Some("1.2.3+abc".into()), ..Changes::default() };
        std::thread::scope(|scope| {
            for _ in 0..35 {
                scope.spawn(|| {
                    let packaged = Packaged::in_memory(bytes.clone());
                    let facts = charts.facts(&packaged, "the chart").unwrap();
                    assert_eq!(facts.unvendored, ["db"]);
                    charts.for_helm(&packaged, &Changes::default(), "the chart").unwrap();
                    charts.for_helm(&packaged, &changes, "the chart").unwrap()
                });
            }
        });
        // Facts once, the rewrite once; facts, archive and rewritten archive written once each.
        assert_eq!((charts.loaded(), charts.store.written()), (2, 3));
        let warm = PreparedCharts::new(Some(cache.path().to_path_buf()));
        let packaged = Packaged::in_memory(bytes.clone());
        let facts = warm.facts(&packaged, "the chart").unwrap();
        let (path, identity) = warm.for_helm(&packaged, &changes, "the chart").unwrap();
        assert_eq!((warm.loaded(), warm.store.written()), (0, 0), "a warm render reads no chart");
        assert_eq!(facts.chart.as_ref().map(ToString::to_string).as_deref(), Some("app 1.2.3"));
        assert_eq!(
            facts.remote_schema.as_ref().map(|(_, url)| url.as_str()),
            Some("https://example.com/s.json")
        );
        assert_eq!(facts.calls.with_values(&Value::Null).lookup.len(), 1);
        // What helm reads is the rewritten archive, identified apart from the original.
        let rewritten = ChartArchive::read(&std::fs::read(&path).unwrap()).unwrap();
        assert!(String::from_utf8_lossy(rewritten.last("Chart.yaml").unwrap()).contains("1.2.3+abc"));
        assert_ne!(identity, packaged.digest);
    }

    #[test]
    fn releases_of_one_chart_with_their_own_values_files_read_it_once() {
        let cache = tempfile::tempdir().unwrap();
        let bytes = chart("app/templates/a.yaml");
        let charts = PreparedCharts::new(Some(cache.path().to_path_buf()));
        let identities: Vec<String> = std::thread::scope(|scope| {
            let releases: Vec<_> = (0..12)
                .map(|n| {
                    let (charts, bytes) = (&charts, bytes.clone());
                    scope.spawn(move || {
                        let values = format!("a: {}\n", n % 4).into_bytes();
                        let changes = Changes { values_yaml: Some(values), ..Changes::default() };
                        charts.for_helm(&Packaged::in_memory(bytes), &changes, "the chart").unwrap().1
                    })
                })
                .collect();
            releases.into_iter().map(|r| r.join().unwrap()).collect()
        });
        // One read of the archive; one rewritten archive per distinct values file.
        assert_eq!((charts.loaded(), charts.store.written()), (1, 4));
        assert_eq!(identities.iter().collect::<std::collections::BTreeSet<_>>().len(), 4);
    }

    #[test]
    fn an_archive_helm_refuses_fails_as_before_and_leaves_no_facts() {
        let cache = tempfile::tempdir().unwrap();
        let charts = PreparedCharts::new(Some(cache.path().to_path_buf()));
        let outside = archive(&[("Chart.yaml", b"name: app\nversion: 1.0.0\n")]);
        match charts.facts(&Packaged::in_memory(outside), "the chart X") {
            Err(NotRendered::Failed(RenderError::InvalidSource(why))) => {
                assert!(why.starts_with("the chart X: "), "{why}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(charts.store.written(), 0);
        // A file kept under a digest it does not have: never learned from.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kept.tgz");
        std::fs::write(&path, chart("app/templates/a.yaml")).unwrap();
        let forged = Packaged::kept(path, digest_of(b"another archive"));
        assert!(matches!(charts.facts(&forged, "the chart"), Err(NotRendered::External(_))));
        assert_eq!(charts.store.written(), 0);
    }
}
