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
    images_of(render, |o| !o.holds_secret_values)
}

/// Images (as shown: values from Secrets masked) of `render`'s objects that `keep` keeps.
fn images_of(
    render: &Render,
    keep: impl Fn(&crate::render::RenderedObject) -> bool,
) -> BTreeMap<(String, String), Vec<Container>> {
    let mut by_object: BTreeMap<(String, String), Vec<Container>> = BTreeMap::new();
    for cluster in &render.clusters {
        for unit in &cluster.kustomizations {
            let kustomization = format!("{}/{}", unit.namespace, unit.name);
            // A release's hooks run its images too (a pre-upgrade migration Job whose image is
            // missing fails the upgrade); test-only hooks run only under `helm test`.
            let hooks = unit
                .helm
                .iter()
                .flat_map(|h| &h.hook_objects)
                .filter(|hook| hook.events.iter().any(|event| event != "test"))
                .map(|hook| &hook.object);
            for object in unit.objects.iter().chain(hooks).filter(|o| keep(o)) {
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

/// `Kind namespace/name` of head's objects holding values substituted from Secrets whose images
/// (as shown, the values masked) base's same object did not have: their images are not asked
/// (whether one exists would tell a value), and the plan must say so rather than pass them in
/// silence (a pull request could otherwise hide a mistyped image by substituting any Secret
/// variable into the object). Read from the masked manifests only.
pub fn unchecked_for_secrets(base: &Render, head: &Render) -> Vec<String> {
    let before = images_of(base, |_| true);
    let mut shown = BTreeSet::new();
    for (key, images) in images_of(head, |o| o.holds_secret_values) {
        let had: BTreeSet<&str> =
            before.get(&key).into_iter().flatten().map(|(_, _, _, image)| image.as_str()).collect();
        if let Some((_, name, _, _)) = images.iter().find(|(_, _, _, image)| !had.contains(image.as_str())) {
            shown.insert(name.clone());
        }
    }
    shown.into_iter().collect()
}

/// A render of one Kustomization applying Deployments `(name, image, holds_secret_values)`
/// (tests of the image check here and in the planner).
#[cfg(test)]
pub(crate) fn deployments(objects: Vec<(&str, &str, bool)>) -> Render {
    use crate::flux::{KustomizationRef, SourceRef};
    use crate::render::{Cluster, RenderedKustomization, RenderedObject, RootKind, UnitKind};
    let reference = KustomizationRef { namespace: "flux-system".into(), name: "apps".into() };
    let source = SourceRef {
        kind: "GitRepository".into(),
        namespace: "flux-system".into(),
        name: "flux-system".into(),
    };
    let mut unit = RenderedKustomization::new(
        UnitKind::Kustomization,
        reference.clone(),
        "./apps".into(),
        source,
        None,
        None,
    );
    unit.objects = objects
        .into_iter()
        .map(|(name, image, holds_secret_values)| RenderedObject {
            id: Some(crate::flux::id::ObjectId::new("apps", name, "apps", "Deployment")),
            named_from_secret: false,
            origin: None,
            object: serde_json::json!({"kind": "Deployment", "metadata": {"name": name, "namespace": "apps"},
                           "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})
            .into(),
            digest: String::new(),
            secret_digests: Default::default(),
            real: None,
            holds_secret_values,
            secret_template: Default::default(),
        })
        .collect();
    Render::with_clusters(vec![Cluster {
        name: "c".into(),
        root: reference,
        found_by: RootKind::Bootstrap,
        root_file: None,
        kustomizations: vec![unit],
    }])
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

    /// Attack: a pull request hides a mistyped image from the check by substituting any Secret
    /// variable into the object (its images are not asked: whether one exists would tell the
    /// value). The plan names the object (never its images' values). Near misses: the same
    /// masked image as base's is not new; a plain object's new image is asked, not named here.
    #[test]
    fn objects_holding_secret_values_with_new_images_are_named_not_passed_in_silence() {
        let base = super::deployments(vec![
            ("kept", "ghcr.io/acme/kept:(masked:TAG)", true),
            ("plain", "ghcr.io/acme/plain:1", false),
        ]);
        let head = super::deployments(vec![
            ("kept", "ghcr.io/acme/kept:(masked:TAG)", true),
            ("plain", "ghcr.io/acme/plain:2", false),
            ("hidden", "ghcr.io/acme/web:1.2.4-typo (masked:ANY)", true),
        ]);
        assert_eq!(unchecked_for_secrets(&base, &head), ["Deployment apps/hidden"]);
        assert_eq!(
            new_images(&base, &head).iter().map(|i| i.image.as_str()).collect::<Vec<_>>(),
            ["ghcr.io/acme/plain:2"]
        );
    }
}
