//! Drift: the live object against the desired one, compared the way server-side apply settles
//! them. Fields the manifest sets are compared; fields only the server or other managers set are
//! ignored; fields kustomize-controller owns (per `managedFields`) that the manifest no longer sets
//! show as removals.

use super::diff;
use serde_json::{Map, Value};

/// The field manager kustomize-controller applies with.
pub const FLUX_MANAGER: &str = "kustomize-controller";

/// A unified diff live → desired, `None` when applying `desired` would change nothing.
pub fn drift(desired: &Value, live: &Value) -> Option<String> {
    if !has_content(live) {
        return None;
    }
    let owned = owned_fields(live, FLUX_MANAGER);
    let mut projected = project(live, Some(desired), owned.as_ref());
    if let Some(meta) = projected.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    diff::unified(&projected, desired).map(|d| d.replacen("--- base\n+++ head\n", "--- live\n+++ head\n", 1))
}

/// True when a live object carries more than metadata (a snapshot may hold metadata only).
fn has_content(live: &Value) -> bool {
    live.as_object()
        .is_some_and(|m| m.keys().any(|k| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata")))
}

/// The union of the `fieldsV1` sets `manager` holds on the object.
fn owned_fields(live: &Value, manager: &str) -> Option<Value> {
    let entries = live["metadata"]["managedFields"].as_array()?;
    let mut owned = Value::Object(Map::new());
    for entry in entries.iter().filter(|e| e["manager"] == manager) {
        merge(&mut owned, &entry["fieldsV1"]);
    }
    Some(owned)
}

fn merge(into: &mut Value, from: &Value) {
    let (Some(into), Some(from)) = (into.as_object_mut(), from.as_object()) else { return };
    for (key, value) in from {
        merge(into.entry(key.clone()).or_insert_with(|| Value::Object(Map::new())), value);
    }
}

/// The part of `live` that `desired` sets or `owned` (a fieldsV1 tree) claims.
fn project(live: &Value, desired: Option<&Value>, owned: Option<&Value>) -> Value {
    match live {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                let wanted = desired.and_then(|d| d.get(key));
                let claimed = owned.and_then(|o| o.get(format!("f:{key}")));
                if wanted.is_some() || claimed.is_some() {
                    out.insert(key.clone(), project(value, wanted, claimed));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => project_list(items, desired.and_then(Value::as_array), owned),
        other => other.clone(),
    }
}

/// Lists of objects are matched item by item (by the keys managedFields uses, else `name`);
/// other lists are atomic.
fn project_list(items: &[Value], desired: Option<&Vec<Value>>, owned: Option<&Value>) -> Value {
    if !items.iter().all(Value::is_object) {
        return Value::Array(items.to_vec());
    }
    let owned_keys: Vec<(Map<String, Value>, &Value)> = owned
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            Some((serde_json::from_str::<Map<String, Value>>(k.strip_prefix("k:")?).ok()?, v))
        })
        .collect();
    let key_fields: Vec<String> = match owned_keys.first() {
        Some((key, _)) => key.keys().cloned().collect(),
        None => vec!["name".to_string()],
    };
    let matches = |item: &Value, key: &Map<String, Value>| key.iter().all(|(k, v)| item.get(k) == Some(v));
    let same_key =
        |a: &Value, b: &Value| key_fields.iter().all(|k| a.get(k).is_some() && a.get(k) == b.get(k));
    let mut out = Vec::new();
    for item in items {
        let wanted = desired.and_then(|d| d.iter().find(|w| same_key(w, item)));
        let claimed = owned_keys.iter().find(|(key, _)| matches(item, key)).map(|(_, fields)| *fields);
        if wanted.is_some() || claimed.is_some() {
            out.push(project(item, wanted, claimed));
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn live(replicas: i64, image: &str, extra_owned: bool) -> Value {
        let mut fields = json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}});
        if extra_owned {
            fields["f:spec"]["f:paused"] = json!({});
        }
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "9",
                "managedFields": [
                    {"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": fields},
                    {"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:status": {}}}]},
            "spec": {"replicas": replicas, "paused": false, "progressDeadlineSeconds": 600,
                "template": {"spec": {"containers": [
                    {"name": "web", "image": image, "imagePullPolicy": "IfNotPresent"},
                    {"name": "sidecar", "image": "injected:1"}]}}},
            "status": {"readyReplicas": 1}
        })
    }

    fn desired() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}})
    }

    #[test]
    fn no_drift_when_only_the_server_and_others_add_fields() {
        assert_eq!(drift(&desired(), &live(2, "nginx:1.27", false)), None);
    }

    #[test]
    fn fields_the_manifest_sets_are_compared() {
        let text = drift(&desired(), &live(5, "nginx:1.27", false)).unwrap();
        assert!(text.contains("-  replicas: 5\n+  replicas: 2\n"), "{text}");
        assert!(!text.contains("sidecar") && !text.contains("imagePullPolicy"), "{text}");
    }

    #[test]
    fn fields_flux_owned_but_no_longer_set_are_removals() {
        let text = drift(&desired(), &live(2, "nginx:1.27", true)).unwrap();
        assert!(text.contains("-  paused: false\n"), "{text}");
    }

    #[test]
    fn metadata_only_objects_give_no_drift() {
        let meta = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        assert_eq!(drift(&json!({"kind": "ConfigMap", "data": {"a": "1"}}), &meta), None);
    }
}
