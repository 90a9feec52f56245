//! Readable diffs of desired state: noise removed, keys in a stable order, unified format.

use crate::yaml;
use serde_json::Value;
use similar::TextDiff;

/// Fields the server or other controllers own: never part of the desired state.
const NOISE_METADATA: &[&str] =
    &["managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"];
const NOISE_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// The manifest as compared: without status and server-owned metadata, keys sorted.
pub fn normalize(manifest: &Value) -> Value {
    let mut value = manifest.clone();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("status");
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            for key in NOISE_METADATA {
                meta.remove(*key);
            }
            if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                for key in NOISE_ANNOTATIONS {
                    annotations.remove(*key);
                }
                if annotations.is_empty() {
                    meta.remove("annotations");
                }
            }
        }
    }
    yaml::sorted(&value)
}

/// A unified diff (3 lines of context) between two manifests; `None` when they read the same.
pub fn unified(before: &Value, after: &Value) -> Option<String> {
    let old = yaml::to_yaml(&normalize(before));
    let new = yaml::to_yaml(&normalize(after));
    if old == new {
        return None;
    }
    let diff = TextDiff::from_lines(&old, &new);
    let text = diff.unified_diff().context_radius(3).header("base", "head").to_string();
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ignores_noise_and_key_order() {
        let a = json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "1", "resourceVersion": "5"}, "data": {"x": "1", "y": "2"}, "status": {}});
        let b = json!({"data": {"y": "2", "x": "1"}, "metadata": {"name": "a", "managedFields": []}, "kind": "ConfigMap"});
        assert_eq!(unified(&a, &b), None);
    }

    #[test]
    fn shows_changed_lines() {
        let a = json!({"kind": "Deployment", "spec": {"replicas": 2, "image": "nginx:1.26"}});
        let b = json!({"kind": "Deployment", "spec": {"replicas": 2, "image": "nginx:1.27"}});
        let diff = unified(&a, &b).unwrap();
        assert!(diff.contains("--- base\n+++ head\n"), "{diff}");
        assert!(diff.contains("-  image: nginx:1.26\n+  image: nginx:1.27\n"), "{diff}");
    }
}
