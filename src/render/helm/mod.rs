//! Helm charts rendered as helm-controller renders them: the real, pinned Helm binary running
//! `helm template` on a chart already on disk, in the same sandbox as kustomize (`engine`), and
//! its output split into the release's manifest, its hooks and its tests (`manifest`).

pub mod argo;
pub mod argo_credentials;
pub mod dependencies;
pub mod engine;
pub mod installed;
pub mod manifest;
pub mod origin;
pub mod post_render;
pub mod prepared;
pub mod release;
pub mod schema;
pub mod shared;
pub mod strvals;
pub mod template_calls;
pub mod units;
pub mod values;

pub use engine::{Helm, HelmError, Template};
pub use manifest::{is_kept, split_release, Release};
pub use units::{ChartVersion, HelmUnit};

use crate::charts::fetch::Access;
use crate::charts::store::{ChartRequest, ChartStore};
use crate::render::cache::RenderCache;
use crate::render::kustomize::BuildError;
use std::path::PathBuf;
use std::sync::OnceLock;

/// What chart renders keep between the renders of one renderer (a plan's base and head share
/// it): the Helm binaries found, the fetched charts, and the `helm template` runs.
pub struct Toolkit {
    /// Helm v3 and v4, found when a render first needs them.
    helm: [OnceLock<Result<Helm, String>>; 2],
    /// Fetched charts, kept under the cache directory when there is one.
    pub store: ChartStore,
    /// Packaged charts prepared for `helm template`, once per digest (the chart store).
    pub prepared: prepared::PreparedCharts,
    /// `helm template` runs, by key: each runs once per renderer.
    templates: crate::memo::Memo<String, Result<Release, BuildError>>,
    /// The memory limit of each `helm template` (bytes, `--max-render-memory`).
    pub memory_limit: u64,
}

impl Toolkit {
    pub fn new(cache_dir: Option<PathBuf>) -> Self {
        Toolkit {
            helm: Default::default(),
            store: ChartStore::new(cache_dir.clone()),
            prepared: prepared::PreparedCharts::new(cache_dir),
            templates: Default::default(),
            memory_limit: crate::sandbox::DEFAULT_MEMORY_LIMIT,
        }
    }

    /// Helm `major` (3 or 4), or why there is none.
    pub fn helm(&self, major: u8) -> Result<&Helm, String> {
        let slot = &self.helm[usize::from(major != 3)];
        let found = || {
            let mut helm = Helm::detect(major).map_err(|e| e.to_string())?;
            helm.memory_limit = self.memory_limit;
            Ok(helm)
        };
        slot.get_or_init(found).as_ref().map_err(Clone::clone)
    }

    /// A release printed by `helm template`: from memory, else the render cache, else `run`.
    /// No render sees a Secret's value (those are masked), so every one may be kept on disk.
    pub fn template(
        &self,
        cache: &RenderCache,
        key: &str,
        run: &dyn Fn() -> Result<Release, BuildError>,
    ) -> Result<Release, BuildError> {
        self.templates.get(&key.to_string(), || {
            if let Some(release) = cache.get(key).and_then(|text| serde_json::from_str(&text).ok()) {
                return Ok(release);
            }
            let release = run()?;
            let text = serde_json::to_string(&release).expect("JSON values serialize");
            cache.put(key, std::sync::Arc::new(text));
            Ok(release)
        })
    }
}

/// The URLs of the sources a render applies: charts may be fetched from their hosts too.
pub fn applied_source_urls(clusters: &[crate::render::Cluster]) -> Vec<String> {
    clusters
        .iter()
        .flat_map(|c| &c.kustomizations)
        .flat_map(|k| &k.objects)
        .filter(|o| {
            let api_version = o.object["apiVersion"].as_str().unwrap_or("");
            crate::flux::split_api_version(api_version).0 == crate::flux::SOURCE_GROUP
        })
        .filter_map(|o| o.object["spec"]["url"].as_str().map(str::to_string))
        .collect()
}

/// What rendering charts needs, shared by HelmRelease units and Argo CD Helm sources.
#[derive(Clone)]
pub struct Charts<'a> {
    /// The Helm to render with, or why there is none.
    pub helm: Result<&'a Helm, String>,
    /// Where fetched charts are kept, and what may be fetched; `Err`: why nothing is.
    pub fetching: Result<(&'a ChartStore, &'a Access), String>,
    /// `helm template` through the render cache.
    pub templates: &'a release::Templates<'a>,
    /// Packaged charts prepared once per digest.
    pub prepared: &'a prepared::PreparedCharts,
    /// `.Capabilities` by default.
    pub kube_version: Option<&'a str>,
    pub api_versions: &'a [String],
}

impl Charts<'_> {
    /// The chart `request` names, with its digest and (from a registry) its revision.
    pub fn fetch_chart(
        &self,
        request: &ChartRequest,
        credentials: &crate::charts::credentials::SourceCredentials,
    ) -> Result<crate::charts::store::Fetched, String> {
        match &self.fetching {
            Ok((store, access)) => store.get(request, access, credentials),
            Err(why) => Err(why.clone()),
        }
    }
}
