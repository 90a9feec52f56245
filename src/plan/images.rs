//! The container image references a merge brings: those in head's pod templates that the same
//! object did not have in base (every one of an object base lacks). Only these are checked
//! against their registries (`charts::images`): the fleet's other images run already.

use crate::render::Render;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One container's image, new in head.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NewImage {
    pub cluster: String,
    /// `namespace/name` of the unit that renders it.
    pub kustomization: String,
    /// The object's inventory id.
    pub object: String,
    /// `Kind namespace/name`.
    pub shown: String,
    /// `containers/web`, `initContainers/migrate`, `ephemeralContainers/debug`.
    pub container: String,
    pub image: String,
}

/// (unit `namespace/name`, object `Kind namespace/name`, container, image).
type Container = (String, String, String, String);

/// The kinds whose pods run containers, and where their pod spec sits.
fn pod_spec(object: &Value) -> Option<&Value> {
    let spec = &object["spec"];
    let pod = match object["kind"].as_str()? {
        "Pod" => spec,
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "ReplicationController" | "Job" => {
            &spec["template"]["spec"]
        }
        "CronJob" => &spec["jobTemplate"]["spec"]["template"]["spec"],
        _ => return None,
    };
    pod.is_object().then_some(pod)
}

/// `(container, image)` of every container of `object`'s pods.
pub fn containers(object: &Value) -> Vec<(String, String)> {
    let Some(pod) = pod_spec(object) else { return Vec::new() };
    let mut found = Vec::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in pod[list].as_array().into_iter().flatten() {
            let Some(image) = container["image"].as_str().filter(|i| !i.is_empty()) else { continue };
            let name = container["name"].as_str().unwrap_or("?");
            found.push((format!("{list}/{name}"), image.to_string()));
        }
    }
    found
}

/// Images of `render`'s objects by (cluster, object id). Objects whose shown manifest masks
/// values substituted from Secrets are left out: whether such an image exists would tell the
/// value.
fn images_by_object(render: &Render) -> BTreeMap<(String, String), Vec<Container>> {
    let mut by_object: BTreeMap<(String, String), Vec<Container>> = BTreeMap::new();
    for cluster in &render.clusters {
        for unit in &cluster.kustomizations {
            let kustomization = format!("{}/{}", unit.namespace, unit.name);
            for object in unit.objects.iter().filter(|o| !o.holds_secret_values) {
                let Some(id) = &object.id else { continue };
                for (container, image) in containers(&object.object) {
                    by_object.entry((cluster.name.clone(), id.to_string())).or_default().push((
                        kustomization.clone(),
                        id.display_name(),
                        container,
                        image,
                    ));
                }
            }
        }
    }
    by_object
}

/// Every image `render` runs (for the hosts base already pulls from).
pub fn all_images(render: &Render) -> BTreeSet<String> {
    images_by_object(render).into_values().flatten().map(|(_, _, _, image)| image).collect()
}

/// The images of head's objects that base's same object (same cluster, same inventory id) does
/// not run: a new object's every image, a changed one's new references.
pub fn new_images(base: &Render, head: &Render) -> Vec<NewImage> {
    let before = images_by_object(base);
    let mut new = BTreeSet::new();
    for ((cluster, object), images) in images_by_object(head) {
        let had: BTreeSet<&str> = before
            .get(&(cluster.clone(), object.clone()))
            .into_iter()
            .flatten()
            .map(|(_, _, _, image)| image.as_str())
            .collect();
        for (kustomization, shown, container, image) in images {
            if !had.contains(image.as_str()) {
                new.insert(NewImage {
                    cluster: cluster.clone(),
                    kustomization,
                    object: object.clone(),
                    shown,
                    container,
                    image,
                });
            }
        }
    }
    new.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_of_pod_template_and_container_list_is_read() {
        let pod = json!({"containers": [{"name": "web", "image": "nginx:1"}], "initContainers": [{"name": "init", "image": "busybox"}],
                         "ephemeralContainers": [{"name": "debug", "image": "alpine"}]});
        for (kind, object) in [
            ("Pod", json!({"kind": "Pod", "spec": pod})),
            ("Deployment", json!({"kind": "Deployment", "spec": {"template": {"spec": pod}}})),
            ("StatefulSet", json!({"kind": "StatefulSet", "spec": {"template": {"spec": pod}}})),
            ("DaemonSet", json!({"kind": "DaemonSet", "spec": {"template": {"spec": pod}}})),
            ("ReplicaSet", json!({"kind": "ReplicaSet", "spec": {"template": {"spec": pod}}})),
            ("Job", json!({"kind": "Job", "spec": {"template": {"spec": pod}}})),
            (
                "CronJob",
                json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": pod}}}}}),
            ),
        ] {
            assert_eq!(
                containers(&object),
                [
                    ("initContainers/init".to_string(), "busybox".to_string()),
                    ("containers/web".to_string(), "nginx:1".to_string()),
                    ("ephemeralContainers/debug".to_string(), "alpine".to_string()),
                ],
                "{kind}"
            );
        }
        // Near misses: a ConfigMap that holds an `image`, a pod spec under another key.
        assert!(containers(&json!({"kind": "ConfigMap", "data": {"image": "nginx"}})).is_empty());
        assert!(containers(&json!({"kind": "Deployment", "spec": {"pod": {"spec": pod}}})).is_empty());
    }
}
