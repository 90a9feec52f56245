//! Helm charts rendered as helm-controller renders them: the real, pinned Helm binary running
//! `helm template` on a chart already on disk, in the same sandbox as kustomize (`engine`), and
//! its output split into the release's manifest, its hooks and its tests (`manifest`).

pub mod engine;
pub mod manifest;
pub mod release;
pub mod units;
pub mod values;

pub use engine::{Helm, HelmError, Template};
pub use manifest::{is_kept, split_release, Release};
pub use units::{ChartVersion, HelmUnit};
