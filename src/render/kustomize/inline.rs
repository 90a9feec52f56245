//! Objects a controller generated, through kustomize with inline `patches` and `images`: what
//! helm-controller's post-renderers and the Flux Operator's instance patches do. Only each
//! patch's `patch` and `target` and each image's fields are written, so nothing a pull request
//! writes there can make kustomize read a file.

use super::BuildError;
use serde_json::{Map, Value};
use std::path::Path;

/// kustomize on a directory, reading nothing outside the second.
pub type Build<'a> = dyn Fn(&Path, &Path) -> Result<String, BuildError> + 'a;

/// `objects` with `patches` and `images` (arrays as a kustomization writes them; `Null` for
/// none) applied by kustomize.
pub fn apply(
    objects: &[Value],
    patches: &Value,
    images: &Value,
    build: &Build,
) -> Result<Vec<Value>, String> {
    let patches: Vec<Value> = patches
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let mut patch = Map::new();
            if let Some(text) = p["patch"].as_str() {
                patch.insert("patch".into(), Value::String(text.to_string()));
            }
            if p["target"].is_object() {
                patch.insert("target".into(), p["target"].clone());
            }
            Value::Object(patch)
        })
        .collect();
    let images: Vec<Value> = images
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let fields = ["name", "newName", "newTag", "digest"];
            Value::Object(fields.iter().filter_map(|f| Some((f.to_string(), i.get(*f)?.clone()))).collect())
        })
        .collect();
    let kustomization = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["objects.yaml"],
        "patches": patches,
        "images": images,
    });
    let dir = tempfile::tempdir().map_err(|e| format!("cannot prepare kustomize: {e}"))?;
    let write = |name: &str, text: String| {
        std::fs::write(dir.path().join(name), text).map_err(|e| format!("cannot prepare kustomize: {e}"))
    };
    write("objects.yaml", crate::yaml::to_yaml_stream(objects))?;
    write("kustomization.yaml", crate::yaml::to_yaml(&kustomization))?;
    let printed = build(dir.path(), dir.path()).map_err(|e| e.to_string())?;
    crate::yaml::parse_documents(&printed)
        .map(|docs| docs.into_iter().filter(Value::is_object).collect())
        .map_err(|e| format!("kustomize printed what is not YAML: {e}"))
}
