//! Charts as source-controller gets them: a version resolved from a Helm repository's
//! `index.yaml` or an OCI registry's tags, the archive fetched (`fetch`), its digest checked,
//! and kept by digest so that every plan after the first reads it from disk. Each request is
//! resolved once per renderer: base and head of a plan see the same chart for the same request.

use super::credentials::SourceCredentials;
use super::fetch::{Access, FetchError, Fetcher, Presented};
use super::oci;
use super::version::Constraint;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::OnceLock;
use url::Url;

/// The most an `index.yaml` may weigh (the largest public indexes are a few tens of MiB).
pub const MAX_INDEX_BYTES: u64 = 64 << 20;
/// The most a chart archive may weigh.
pub const MAX_CHART_BYTES: u64 = 20 << 20;

/// A chart to get.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChartRequest {
    /// From a Helm repository served over HTTP: its URL, the chart's name and a version
    /// constraint (`*` when the HelmRelease names none).
    Repository { url: String, chart: String, version: String },
    /// From an OCI registry: `oci://host/path/chart` and which version.
    Oci { url: String, reference: oci::Reference },
}

impl std::fmt::Display for ChartRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChartRequest::Repository { url, chart, version } => {
                write!(f, "chart {chart} {version} from {}", crate::git::redact_url(url))
            }
            ChartRequest::Oci { url, reference } => write!(f, "{} {reference}", crate::git::redact_url(url)),
        }
    }
}

/// A chart archive on disk, checked against its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub archive: PathBuf,
    /// `sha256:…` of the archive.
    pub digest: String,
    /// An OCI artifact's revision as source-controller records it (`TAG@sha256:…`).
    pub revision: Option<String>,
}

/// Gets charts for one renderer; `None` access: fetching is off (every chart is unavailable).
pub struct ChartStore {
    /// `cache_dir/charts`, when there is a cache; else a temporary directory made on first use.
    dir: ChartDir,
    /// By request and the credentials it was made with (login and TLS material alike): a chart
    /// fetched for one source never answers another without them (nor a refusal with them), so a
    /// pull request that names the same URL without the credentials, or without the CA, fetches
    /// (and fails) as source-controller would. Archives on disk are found by digest only after a
    /// fetch, never by URL. These keys are in memory only.
    resolved: Memo<(ChartRequest, SourceCredentials), Fetched>,
    indexes: Memo<(String, SourceCredentials), serde_json::Value>,
}

type Memo<K, V> = crate::memo::Memo<K, Result<V, String>>;

/// A directory of charts: the cache's, else a temporary one of this process made on first use.
pub(super) struct ChartDir {
    kept: Option<PathBuf>,
    scratch: OnceLock<Result<tempfile::TempDir, String>>,
}

impl ChartDir {
    pub(super) fn new(kept: Option<PathBuf>) -> Self {
        ChartDir { kept, scratch: OnceLock::new() }
    }

    /// The directory, made (owner-only) on first use.
    pub(super) fn path(&self) -> Result<PathBuf, String> {
        let dir = match &self.kept {
            Some(dir) => dir.clone(),
            None => self
                .scratch
                .get_or_init(|| {
                    tempfile::tempdir().map_err(|e| format!("cannot make a chart directory: {e}"))
                })
                .as_ref()
                .map_err(Clone::clone)?
                .path()
                .to_path_buf(),
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| e.to_string())
            .and_then(|_| crate::private_files::owner_only_dir(&dir).map_err(|e| e.to_string()))
            .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        Ok(dir)
    }
}

impl ChartStore {
    /// Charts kept under `cache_dir/charts`, else in a temporary directory for this process.
    /// Nothing is made on disk until a chart is fetched.
    pub fn new(cache_dir: Option<PathBuf>) -> Self {
        ChartStore {
            dir: ChartDir::new(cache_dir.map(|dir| dir.join("charts"))),
            resolved: Memo::default(),
            indexes: Memo::default(),
        }
    }

    /// The chart `request` names, fetched with `access` (once per store and credentials).
    /// `credentials`: the source's, when it names Secrets.
    pub fn get(
        &self,
        request: &ChartRequest,
        access: &Access,
        credentials: &SourceCredentials,
    ) -> Result<Fetched, String> {
        self.resolved.get(&(request.clone(), credentials.clone()), || {
            // A host that failed is not asked again: no client is made for it.
            let (ChartRequest::Repository { url, .. } | ChartRequest::Oci { url, .. }) = request;
            if let Some(failed) = access.remembered_failure(url, credentials.tls.as_ref()) {
                return Err(failed.to_string());
            }
            Fetcher::for_source(access.clone(), credentials.tls.as_ref())
                .and_then(|fetcher| self.fetch(request, &fetcher, credentials))
        })
    }

    fn fetch(
        &self,
        request: &ChartRequest,
        fetcher: &Fetcher,
        source: &SourceCredentials,
    ) -> Result<Fetched, String> {
        let credentials = source.auth.as_ref();
        match request {
            ChartRequest::Repository { url, chart, version } => {
                let (archive_url, digest) = self.resolve_in_index(url, chart, version, fetcher, source)?;
                let target = fetcher.target(archive_url.as_str()).map_err(|e| e.to_string())?;
                // The repository's credentials go to archives on its own host and port only (its
                // mirror's, when it has one), as Helm sends them.
                let repository = fetcher.target(url).map_err(|e| e.to_string())?;
                let own = (target.host_str(), target.port_or_known_default())
                    == (repository.host_str(), repository.port_or_known_default());
                let presented = if own { Presented::source(credentials) } else { Presented::nothing() };
                let (bytes, _) =
                    fetcher.get(&target, None, presented, MAX_CHART_BYTES).map_err(|e| e.to_string())?;
                self.keep(&bytes, digest.as_deref())
            }
            ChartRequest::Oci { url, reference } => {
                let pulled = oci::pull_chart(fetcher, url, reference, credentials, MAX_CHART_BYTES)?;
                let kept = self.keep(&pulled.bytes, Some(&pulled.digest))?;
                Ok(Fetched { revision: Some(pulled.revision), ..kept })
            }
        }
    }

    /// The archive URL and digest of the best version of `chart` in the repository at `url`.
    fn resolve_in_index(
        &self,
        url: &str,
        chart: &str,
        version: &str,
        fetcher: &Fetcher,
        credentials: &SourceCredentials,
    ) -> Result<(Url, Option<String>), String> {
        let constraint = Constraint::parse(version).map_err(|e| format!("version '{version}': {e}"))?;
        let index = self.index(url, fetcher, credentials)?;
        let entries = index["entries"][chart]
            .as_array()
            .ok_or_else(|| format!("the Helm repository {url} has no chart named {chart}"))?;
        let versions = entries.iter().filter_map(|e| e["version"].as_str());
        let best = constraint
            .best(versions)
            .ok_or_else(|| format!("no version of {chart} in {url} matches '{version}'"))?;
        let entry = entries
            .iter()
            .find(|e| e["version"].as_str() == Some(best.original()))
            .ok_or_else(|| format!("{chart} {} vanished from the index", best.original()))?;
        let first = entry["urls"][0]
            .as_str()
            .ok_or_else(|| format!("{chart} {} in {url} lists no archive URL", best.original()))?;
        // Relative URLs are relative to the repository, as Helm reads them.
        let base =
            Url::parse(&format!("{}/", url.trim_end_matches('/'))).map_err(|e| format!("{url}: {e}"))?;
        let archive = base.join(first).map_err(|e| format!("{chart} archive URL '{first}': {e}"))?;
        let digest = entry["digest"].as_str().filter(|d| !d.is_empty()).map(|d| format!("sha256:{d}"));
        Ok((archive, digest))
    }

    fn index(
        &self,
        url: &str,
        fetcher: &Fetcher,
        credentials: &SourceCredentials,
    ) -> Result<serde_json::Value, String> {
        self.indexes.get(&(url.to_string(), credentials.clone()), || {
            let index_url = format!("{}/index.yaml", url.trim_end_matches('/'));
            let target = fetcher.target(&index_url).map_err(|e| e.to_string())?;
            let (bytes, _) = fetcher
                .get(&target, None, Presented::source(credentials.auth.as_ref()), MAX_INDEX_BYTES)
                .map_err(|e| match e {
                    FetchError::Status { status: 404, .. } => {
                        format!("{url} is not a Helm repository (no index.yaml)")
                    }
                    other => other.to_string(),
                })?;
            let text = String::from_utf8(bytes).map_err(|_| format!("{index_url} is not text"))?;
            crate::yaml::parse_documents(&text)
                .map_err(|e| format!("{index_url} is not YAML: {e}"))?
                .into_iter()
                .next()
                .ok_or_else(|| format!("{index_url} is empty"))
        })
    }

    /// Checks `bytes` against `expected` (when known) and keeps them under their digest.
    fn keep(&self, bytes: &[u8], expected: Option<&str>) -> Result<Fetched, String> {
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(bytes)));
        if let Some(expected) = expected.filter(|e| !e.eq_ignore_ascii_case(&digest)) {
            return Err(format!(
                "the chart archive's digest is {digest}, not the {expected} its source names"
            ));
        }
        let dir = self.dir.path()?;
        let archive = dir.join(format!("{}.tgz", digest.replace(':', "-")));
        if !archive.is_file() {
            let partial =
                tempfile::NamedTempFile::new_in(&dir).map_err(|e| format!("cannot keep the chart: {e}"))?;
            std::fs::write(partial.path(), bytes).map_err(|e| format!("cannot keep the chart: {e}"))?;
            partial.persist(&archive).map_err(|e| format!("cannot keep the chart: {e}"))?;
        }
        Ok(Fetched { archive, digest, revision: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_never_says_credentials_written_in_its_url() {
        let request = ChartRequest::Repository {
            url: "https://reader:hunter2@charts.example.com/stable".into(),
            chart: "db".into(),
            version: "*".into(),
        };
        let shown = request.to_string();
        assert!(!shown.contains("hunter2") && shown.contains("charts.example.com/stable"), "{shown}");
    }
}
