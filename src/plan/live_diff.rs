//! Drift: the live object against the desired one, compared the way server-side apply settles
//! them. Fields the manifest sets are compared; fields only the server or other managers set are
//! ignored; fields kustomize-controller owns (per `managedFields`) that the manifest no longer sets
//! show as removals. Lists merge as server-side apply merges them: by their merge keys (from
//! `managedFields`, else the Kubernetes schema's keys for well-known fields), item by item in
//! order otherwise.

use super::diff;
use serde_json::{Map, Value};

/// The field manager kustomize-controller applies with.
pub const FLUX_MANAGER: &str = "kustomize-controller";

/// A unified diff live → desired (headed `+++ {label}`), `None` when applying `desired` would
/// change nothing.
pub fn drift(desired: &Value, live: &Value, label: &str, cluster_scoped: bool) -> Option<String> {
    if !has_content(live) {
        return None;
    }
    // The API never gives a cluster-scoped object a namespace, whatever the manifest says.
    let desired = match cluster_scoped {
        true => &super::compute::without_namespace(desired),
        false => desired,
    };
    let owned = owned_fields(live, FLUX_MANAGER);
    let mut projected = project(live, Some(desired), owned.as_ref(), "");
    if let Some(meta) = projected.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    diff::unified(&projected, desired)
        .map(|d| d.replacen("--- base\n+++ head\n", &format!("--- live\n+++ {label}\n"), 1))
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

/// The part of `live` (the value of field `field`) that `desired` sets or `owned` (a fieldsV1
/// tree) claims.
fn project(live: &Value, desired: Option<&Value>, owned: Option<&Value>, field: &str) -> Value {
    match live {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                let wanted = desired.and_then(|d| d.get(key));
                let claimed = owned.and_then(|o| o.get(format!("f:{key}")));
                if wanted.is_some() || claimed.is_some() {
                    out.insert(key.clone(), project(value, wanted, claimed, key));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => project_list(field, items, desired.and_then(Value::as_array), owned),
        other => other.clone(),
    }
}

/// A list as server-side apply merges it: keyed lists item by item (items only others set are
/// left out), sets by value, atomic lists position by position (so fields the server defaults
/// inside an item are not drift, while items added or removed are).
fn project_list(field: &str, items: &[Value], desired: Option<&Vec<Value>>, owned: Option<&Value>) -> Value {
    if SET_LISTS.contains(&field) {
        let wanted = |item: &&Value| desired.is_some_and(|d| d.contains(item));
        return Value::Array(items.iter().filter(wanted).cloned().collect());
    }
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
    let key_fields: Vec<&str> = match owned_keys.first() {
        Some((key, _)) => key.keys().map(String::as_str).collect(),
        None => match merge_keys(field, items) {
            Some(keys) => keys.to_vec(),
            None => return project_positionally(items, desired),
        },
    };
    let same_key = |a: &Value, b: &Value| {
        key_fields.iter().all(|k| key_value(a, k).is_some() && key_value(a, k) == key_value(b, k))
    };
    let matches =
        |item: &Value, key: &Map<String, Value>| key.iter().all(|(k, v)| key_value(item, k) == Some(v));
    let mut out = Vec::new();
    for item in items {
        let wanted = desired.and_then(|d| d.iter().find(|w| same_key(w, item)));
        let claimed = owned_keys.iter().find(|(key, _)| matches(item, key)).map(|(_, fields)| *fields);
        if wanted.is_some() || claimed.is_some() {
            out.push(project(item, wanted, claimed, ""));
        }
    }
    Value::Array(out)
}

/// An atomic list of objects: item `i` of the live list against item `i` of the desired one;
/// live items beyond the desired ones stay whole (applying removes them).
fn project_positionally(items: &[Value], desired: Option<&Vec<Value>>) -> Value {
    let wanted = |i: usize| desired.and_then(|d| d.get(i));
    Value::Array(
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match wanted(i) {
                Some(w) => project(item, Some(w), None, ""),
                None => item.clone(),
            })
            .collect(),
    )
}

/// Lists of values merged as sets.
const SET_LISTS: &[&str] = &["finalizers"];

/// The merge keys the Kubernetes schema gives well-known list fields (`patchMergeKey` /
/// `x-kubernetes-list-map-keys`); `None` for lists that are atomic.
fn merge_keys(field: &str, items: &[Value]) -> Option<&'static [&'static str]> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => &["name"],
        "volumeMounts" => &["mountPath"],
        "volumeDevices" => &["devicePath"],
        "hostAliases" => &["ip"],
        "conditions" => &["type"],
        "readinessGates" => &["conditionType"],
        "ownerReferences" => &["uid"],
        "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
        // Container ports and Service ports: the same field name, different keys.
        "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => &["containerPort", "protocol"],
        "ports" => &["port", "protocol"],
        _ => return None,
    })
}

/// A merge key's value in an item, with the defaults the API server fills in.
fn key_value<'v>(item: &'v Value, key: &str) -> Option<&'v Value> {
    match (item.get(key), key) {
        (Some(value), _) => Some(value),
        (None, "protocol") => Some(tcp()),
        _ => None,
    }
}

/// `"TCP"`, the protocol a port without one gets.
fn tcp() -> &'static Value {
    static TCP: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    TCP.get_or_init(|| Value::String("TCP".into()))
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
        assert_eq!(drift(&desired(), &live(2, "nginx:1.27", false), "head", false), None);
    }

    #[test]
    fn fields_the_manifest_sets_are_compared() {
        let text = drift(&desired(), &live(5, "nginx:1.27", false), "head", false).unwrap();
        assert!(text.contains("-  replicas: 5\n+  replicas: 2\n"), "{text}");
        assert!(!text.contains("sidecar") && !text.contains("imagePullPolicy"), "{text}");
    }

    #[test]
    fn fields_flux_owned_but_no_longer_set_are_removals() {
        let text = drift(&desired(), &live(2, "nginx:1.27", true), "head", false).unwrap();
        assert!(text.contains("-  paused: false\n"), "{text}");
    }

    #[test]
    fn atomic_lists_without_names_compare_item_by_item() {
        let rules = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]);
        let desired = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "reader", "namespace": "team-a"}, "rules": rules});
        let live = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "reader", "uid": "u", "managedFields": [{"manager": "kustomize-controller",
                "operation": "Apply", "fieldsV1": {"f:rules": {}}}]}, "rules": rules});
        // No `name` in the items, and no namespace on a cluster-scoped object: no drift.
        assert_eq!(drift(&desired, &live, "head", true), None);
        let mut widened = live.clone();
        widened["rules"][0]["verbs"] = json!(["get", "list", "delete"]);
        widened["rules"]
            .as_array_mut()
            .unwrap()
            .push(json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}));
        let text = drift(&desired, &widened, "head", true).unwrap();
        assert!(text.contains("-  - delete\n") && text.contains("-- apiGroups:\n-  - '*'\n"), "{text}");
    }

    #[test]
    fn service_ports_merge_by_port_and_default_protocol() {
        let desired = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
        let live = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"},
                {"port": 9090, "protocol": "TCP", "name": "added-by-hand"}]}});
        // Another manager's port is not ours to compare; the server's default protocol is no drift.
        assert_eq!(drift(&desired, &live, "head", false), None);
        let mut moved = live.clone();
        moved["spec"]["ports"][0]["targetPort"] = json!(9000);
        let text = drift(&desired, &moved, "head", false).unwrap();
        assert!(text.contains("-    targetPort: 9000\n+    targetPort: 8080\n"), "{text}");
    }

    #[test]
    fn metadata_only_objects_give_no_drift() {
        let meta = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        assert_eq!(drift(&json!({"kind": "ConfigMap", "data": {"a": "1"}}), &meta, "head", false), None);
    }
}
