//! Argo CD API knowledge only: Application and ApplicationSet specs, sync options, hooks,
//! tracking, finalizers, generators and AppProject permissions. Pure, like `flux`: no IO but reading a source tree.

pub mod application;
pub mod applicationset;
pub mod glob;
pub mod ignore_differences;
pub mod kustomize;
pub mod project;
pub mod reads;
pub mod repository_credentials;
pub mod revision;
pub mod sync_options;
pub mod tracking;

pub use application::{Application, SourceKind};
pub use applicationset::ApplicationSet;

use serde_json::Value;

/// API group of Applications, ApplicationSets and AppProjects.
pub const GROUP: &str = "argoproj.io";
/// The finalizer that makes deleting an Application delete its resources (foreground).
pub const RESOURCES_FINALIZER: &str = "resources-finalizer.argocd.argoproj.io";
/// The same, deleting in the background.
pub const RESOURCES_FINALIZER_BACKGROUND: &str = "resources-finalizer.argocd.argoproj.io/background";

fn is_kind(obj: &Value, kind: &str) -> bool {
    let api = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    crate::flux::split_api_version(api).0 == GROUP && obj.get("kind").and_then(Value::as_str) == Some(kind)
}

/// True when a manifest is an Argo CD Application.
pub fn is_application(obj: &Value) -> bool {
    is_kind(obj, "Application")
}

/// True when a manifest is an Argo CD ApplicationSet.
pub fn is_application_set(obj: &Value) -> bool {
    is_kind(obj, "ApplicationSet")
}

/// Reduces a repository URL for comparison (scheme, credentials, `.git` and case ignored), as
/// Argo CD normalizes `repoURL`.
pub fn normalize_repo_url(url: &str) -> String {
    crate::git::normalize_url(url).to_lowercase()
}

/// A string field of a JSON object.
fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}
