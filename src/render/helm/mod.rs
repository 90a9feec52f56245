//! Helm charts rendered as helm-controller renders them: the real, pinned Helm binary running
//! `helm template` on a chart already on disk, in the same sandbox as kustomize (`engine`), and
//! its output split into the release's manifest, its hooks and its tests (`manifest`).

pub mod argo;
pub mod dependencies;
pub mod engine;
pub mod manifest;
pub mod release;
pub mod units;
pub mod values;

pub use engine::{Helm, HelmError, Template};
pub use manifest::{is_kept, split_release, Release};
pub use units::{ChartVersion, HelmUnit};

use crate::charts::fetch::Access;
use crate::charts::store::{ChartRequest, ChartStore};

/// What rendering charts needs, shared by HelmRelease units and Argo CD Helm sources.
#[derive(Clone)]
pub struct Charts<'a> {
    /// The Helm to render with, or why there is none.
    pub helm: Result<&'a Helm, String>,
    /// Where fetched charts are kept, and what may be fetched; `Err`: why nothing is.
    pub fetching: Result<(&'a ChartStore, &'a Access), String>,
    /// `helm template` through the render cache.
    pub templates: &'a release::Templates<'a>,
    /// `.Capabilities` by default.
    pub kube_version: Option<&'a str>,
    pub api_versions: &'a [String],
}

impl Charts<'_> {
    /// The archive of the chart `request` names, or why it cannot be had.
    pub fn fetch(
        &self,
        request: &ChartRequest,
        credentials: &crate::charts::credentials::SourceCredentials,
    ) -> Result<std::path::PathBuf, String> {
        match &self.fetching {
            Ok((store, access)) => store.get(request, access, credentials).map(|fetched| fetched.archive),
            Err(why) => Err(why.clone()),
        }
    }
}
