//! The overrides of `source.kustomize` layered onto a kustomization, as Argo CD's repo-server
//! applies them (`kustomize edit set ...`) before building.

use super::application::KustomizeOptions;
use crate::flux::generator::{merge_image, push, GenerateError};
use serde_json::{json, Map, Value};

/// Layers `options` onto the kustomization document `obj`.
pub fn layer(obj: &mut Map<String, Value>, options: &KustomizeOptions) -> Result<(), GenerateError> {
    if let Some(prefix) = &options.name_prefix {
        obj.insert("namePrefix".into(), json!(prefix));
    }
    if let Some(suffix) = &options.name_suffix {
        obj.insert("nameSuffix".into(), json!(suffix));
    }
    if let Some(namespace) = &options.namespace {
        obj.insert("namespace".into(), json!(namespace));
    }
    for image in &options.images {
        merge_image(obj, &image_override(image));
    }
    if !options.common_labels.is_empty() {
        if options.label_without_selector {
            push(obj, "labels", json!({"pairs": options.common_labels, "includeSelectors": false}));
        } else {
            merge_map(obj, "commonLabels", &options.common_labels, options.force_common_labels);
        }
    }
    if !options.common_annotations.is_empty() {
        merge_map(obj, "commonAnnotations", &options.common_annotations, options.force_common_annotations);
    }
    for replica in &options.replicas {
        let count = match &replica["count"] {
            Value::String(text) => {
                json!(text.parse::<i64>().map_err(|_| GenerateError::InvalidKustomization {
                    file: "the Application's kustomize.replicas".into(),
                    reason: format!("count {text:?} is not a number"),
                })?)
            }
            other => other.clone(),
        };
        push(obj, "replicas", json!({"name": replica["name"], "count": count}));
    }
    for patch in &options.patches {
        push(obj, "patches", patch.clone());
    }
    for component in &options.components {
        if std::path::Path::new(component).is_absolute() || crate::flux::generator::is_remote(component) {
            return Err(GenerateError::RemoteComponent(component.clone()));
        }
        push(obj, "components", json!(component));
    }
    Ok(())
}

/// `kustomize edit add label/annotation`: existing keys are kept unless forced.
fn merge_map(obj: &mut Map<String, Value>, key: &str, values: &Map<String, Value>, force: bool) {
    let entry = obj.entry(key).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    let map = entry.as_object_mut().expect("made an object");
    for (k, v) in values {
        if force || !map.contains_key(k) {
            let text = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
            map.insert(k.clone(), json!(text));
        }
    }
}

/// An Argo CD image override (`nginx:1.27`, `nginx=ghcr.io/x/nginx:1.27`, `nginx@sha256:...`)
/// as a kustomize `images` entry.
fn image_override(text: &str) -> Value {
    let (name, target) = match text.split_once('=') {
        Some((name, target)) => (name.to_string(), Some(target)),
        None => {
            let (name, _, _) = split_image(text);
            (name, None)
        }
    };
    let (new_name, tag, digest) = split_image(target.unwrap_or(text));
    let mut image = json!({"name": name});
    if target.is_some() {
        image["newName"] = json!(new_name);
    }
    if let Some(tag) = tag {
        image["newTag"] = json!(tag);
    }
    if let Some(digest) = digest {
        image["digest"] = json!(digest);
    }
    image
}

/// `registry:5000/name:tag@digest` → (`registry:5000/name`, tag, digest).
fn split_image(text: &str) -> (String, Option<String>, Option<String>) {
    let (rest, digest) = match text.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest.to_string())),
        None => (text, None),
    };
    let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
    match rest[last_slash..].rfind(':') {
        Some(colon) => {
            let at = last_slash + colon;
            (rest[..at].to_string(), Some(rest[at + 1..].to_string()), digest)
        }
        None => (rest.to_string(), None, digest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_overrides_read_as_kustomize_edit_reads_them() {
        assert_eq!(image_override("nginx:1.27"), json!({"name": "nginx", "newTag": "1.27"}));
        assert_eq!(
            image_override("nginx=registry:5000/mirror/nginx:1.27"),
            json!({"name": "nginx", "newName": "registry:5000/mirror/nginx", "newTag": "1.27"})
        );
        assert_eq!(image_override("nginx@sha256:abc"), json!({"name": "nginx", "digest": "sha256:abc"}));
        assert_eq!(image_override("registry:5000/nginx"), json!({"name": "registry:5000/nginx"}));
    }

    #[test]
    fn overrides_layer_onto_the_kustomization() {
        let options = KustomizeOptions {
            name_prefix: Some("dev-".into()),
            namespace: Some("dev".into()),
            images: vec!["nginx:1.27".into()],
            common_labels: json!({"team": "web", "env": "dev"}).as_object().unwrap().clone(),
            replicas: vec![json!({"name": "web", "count": "3"})],
            patches: vec![json!({"patch": "- op: add", "target": {"kind": "Deployment"}})],
            components: vec!["../components/probes".into()],
            ..Default::default()
        };
        let mut obj = json!({"resources": ["a.yaml"], "commonLabels": {"env": "base"},
            "images": [{"name": "nginx", "newTag": "1.26"}]})
        .as_object()
        .unwrap()
        .clone();
        layer(&mut obj, &options).unwrap();
        assert_eq!(obj["namePrefix"], "dev-");
        assert_eq!(obj["namespace"], "dev");
        assert_eq!(obj["images"], json!([{"name": "nginx", "newTag": "1.27"}]));
        assert_eq!(
            obj["commonLabels"],
            json!({"env": "base", "team": "web"}),
            "existing keys kept unless forced"
        );
        assert_eq!(obj["replicas"], json!([{"name": "web", "count": 3}]));
        assert_eq!(obj["components"], json!(["../components/probes"]));
        let remote = KustomizeOptions { components: vec!["https://x/y".into()], ..Default::default() };
        assert!(layer(&mut Map::new(), &remote).is_err());
    }
}
