//! Flux API knowledge: object shapes, inventory ids, control annotations, the envsubst dialect,
//! the kustomization generator and source-ignore rules. No IO but the filesystem.

pub mod artifact_generator;
pub mod control;
pub mod envsubst;
pub mod generator;
pub mod helm;
pub mod id;
pub mod kustomization;
pub mod order;
pub mod resourceset;
pub mod scope;
pub mod sourceignore;

pub use id::ObjectId;
pub use kustomization::{DeletionPolicy, Kustomization, KustomizationRef, SourceRef};

/// API group of Flux Kustomizations.
pub const KUSTOMIZE_GROUP: &str = "kustomize.toolkit.fluxcd.io";
/// API group of Flux sources (GitRepository, OCIRepository, Bucket).
pub const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";

/// Splits an `apiVersion` into (group, version); the core group is "".
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.rsplit_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// True when a manifest is a Flux Kustomization (not a kustomize `kustomization.yaml`).
pub fn is_flux_kustomization(obj: &serde_json::Value) -> bool {
    let api = obj.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("");
    split_api_version(api).0 == KUSTOMIZE_GROUP
        && obj.get("kind").and_then(|v| v.as_str()) == Some("Kustomization")
}
