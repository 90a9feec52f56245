//! The kustomization the controller builds: the one found at the path, or one generated from the
//! YAML files under it, with the Kustomization's spec overrides layered on top.

use super::kustomization::Kustomization;
use crate::tree::Descend;
use crate::yaml;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// File names kustomize recognises as a kustomization, in its order of preference.
pub const KUSTOMIZATION_FILES: &[&str] = &["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Why the controller could not prepare a kustomization.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerateError {
    #[error("failed to decode Kubernetes YAML from {file}: {reason}")]
    NotKubernetes { file: String, reason: String },
    #[error("invalid kustomization file {file}: {reason}")]
    InvalidKustomization { file: String, reason: String },
    #[error("component path '{0}' must be local and relative")]
    RemoteComponent(String),
    #[error("cannot read {file}: {reason}")]
    Io { file: String, reason: String },
    #[error("Found multiple kustomization files under: {0} (kustomize reads exactly one of {names}; remove the others)", names = KUSTOMIZATION_FILES.join(", "))]
    MultipleKustomizations(String),
}

/// The kustomization file of a directory, if it has one (as a file, not a directory): the first
/// of kustomize's names. Enough to tell a kustomization directory; a build reads the file through
/// `the_kustomization_file`, which refuses a directory holding several.
pub fn kustomization_file(dir: &Path) -> Option<PathBuf> {
    KUSTOMIZATION_FILES.iter().map(|name| dir.join(name)).find(|p| p.is_file())
}

/// The one kustomization file kustomize reads in `dir`, if any. Like kustomize, a directory
/// holding more than one of its names is refused before any is read: the build fails in the
/// controller, and whichever file a lookup picked would not describe the directory.
pub fn the_kustomization_file(
    dir: &Path,
    display: &dyn Fn(&Path) -> String,
) -> Result<Option<PathBuf>, GenerateError> {
    let mut found = KUSTOMIZATION_FILES.iter().map(|name| dir.join(name)).filter(|p| p.is_file());
    let first = found.next();
    if first.is_some() && found.next().is_some() {
        return Err(GenerateError::MultipleKustomizations(display(dir)));
    }
    Ok(first)
}

/// The prepared kustomization for `dir` and the files it was derived from.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub document: Value,
    /// True when the final document asks for origin annotations itself (they stay in the output).
    pub wants_origin_annotations: bool,
    /// True when the kustomization was generated (no file at the path).
    pub generated: bool,
}

/// Prepares the kustomization the controller would build for `spec` at `dir`. `root` is the source
/// root (components must stay inside it); `display` renders paths for messages.
pub fn prepare(
    dir: &Path,
    root: &Path,
    spec: &Kustomization,
    display: &dyn Fn(&Path) -> String,
) -> Result<Prepared, GenerateError> {
    prepare_with(dir, display, &|obj| layer_spec(obj, dir, root, spec))
}

/// A controller's overrides, layered onto a kustomization document.
pub type Layer<'a> = dyn Fn(&mut Map<String, Value>) -> Result<(), GenerateError> + 'a;

/// Prepares the kustomization at `dir` (generated when there is none) with `layer` applied on
/// top: the overrides of whichever controller builds it.
pub fn prepare_with(
    dir: &Path,
    display: &dyn Fn(&Path) -> String,
    layer: &Layer,
) -> Result<Prepared, GenerateError> {
    let (mut doc, generated) = match the_kustomization_file(dir, display)? {
        Some(file) => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| GenerateError::Io { file: display(&file), reason: e.to_string() })?;
            let mut docs = yaml::parse_documents(&text)
                .map_err(|reason| GenerateError::InvalidKustomization { file: display(&file), reason })?;
            let doc = match docs.len() {
                0 => json!({}),
                1 => docs.remove(0),
                _ => {
                    return Err(GenerateError::InvalidKustomization {
                        file: display(&file),
                        reason: "holds more than one YAML document".into(),
                    })
                }
            };
            if !doc.is_object() {
                return Err(GenerateError::InvalidKustomization {
                    file: display(&file),
                    reason: "is not a YAML mapping".into(),
                });
            }
            (doc, false)
        }
        None => (generate(dir, display)?, true),
    };
    let obj = doc.as_object_mut().expect("checked to be a mapping");
    if !generated && obj.get("resources").and_then(Value::as_array).is_none_or(|r| r.is_empty()) {
        // The controller's guard against kustomize's "kustomization.yaml is empty" error.
        obj.insert("buildMetadata".into(), json!(["originAnnotations"]));
    }
    layer(obj)?;
    let wants_origin_annotations = obj
        .get("buildMetadata")
        .and_then(Value::as_array)
        .is_some_and(|m| m.iter().any(|v| v == "originAnnotations"));
    Ok(Prepared { document: doc, wants_origin_annotations, generated })
}

/// Generates a kustomization listing the YAML files under `dir` in lexical order; a sub-directory
/// with its own kustomization becomes one resource.
fn generate(dir: &Path, display: &dyn Fn(&Path) -> String) -> Result<Value, GenerateError> {
    let mut resources = Vec::new();
    collect_resources(dir, &mut resources, display)?;
    let mut doc = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
    });
    if resources.is_empty() {
        // What the controller writes for an empty directory: a build of zero objects.
        doc["namespace"] = json!("_placeholder");
    } else {
        doc["resources"] = json!(resources);
    }
    Ok(doc)
}

/// The controller's walk (filepath.Walk): depth first, entries in lexical order, a directory with
/// a kustomization file taken whole.
fn collect_resources(
    base: &Path,
    out: &mut Vec<String>,
    display: &dyn Fn(&Path) -> String,
) -> Result<(), GenerateError> {
    crate::tree::walk(base, |entry, file_type| {
        let path = entry.path();
        let relative = format!("./{}", path.strip_prefix(base).unwrap_or(&path).display());
        if file_type.is_dir() {
            if kustomization_file(&path).is_some() {
                out.push(relative);
                return Ok(Descend::No);
            }
        } else if file_type.is_file() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".yaml") || name.ends_with(".yml") {
                validate_manifest_file(&path, display)?;
                out.push(relative);
            }
        }
        Ok(Descend::Yes)
    })
    .map_err(|e| match e {
        GenerateError::Io { file, reason } => GenerateError::Io { file: display(Path::new(&file)), reason },
        other => other,
    })
}

impl From<crate::tree::Unreadable> for GenerateError {
    fn from(e: crate::tree::Unreadable) -> Self {
        GenerateError::Io { file: e.path.display().to_string(), reason: e.error.to_string() }
    }
}

/// Every non-empty document must be a Kubernetes object with `kind` and `metadata.name` (kinds
/// ending in `List` need no name), or the whole build fails, as in the controller.
fn validate_manifest_file(file: &Path, display: &dyn Fn(&Path) -> String) -> Result<(), GenerateError> {
    let fail = |reason: String| GenerateError::NotKubernetes { file: display(file), reason };
    let text = std::fs::read_to_string(file).map_err(|e| fail(e.to_string()))?;
    for doc in yaml::parse_documents(&text).map_err(fail)? {
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind.is_empty() {
            return Err(fail(format!("missing kind in object {}", short(&doc))));
        }
        let named = doc["metadata"]["name"].as_str().is_some_and(|n| !n.is_empty());
        if !named && !kind.ends_with("List") {
            return Err(fail(format!("missing metadata.name in object {}", short(&doc))));
        }
    }
    Ok(())
}

/// A short, single-line rendering of a document for error messages (values of Secret-like
/// fields left out).
fn short(doc: &Value) -> String {
    let mut doc = doc.clone();
    if let Some(map) = doc.as_object_mut() {
        for field in ["data", "stringData"] {
            if map.contains_key(field) {
                map.insert(field.into(), Value::String("…".into()));
            }
        }
    }
    let text = doc.to_string();
    if text.len() > 80 {
        format!("{}…", &text[..text.floor_char_boundary(80)])
    } else {
        text
    }
}

/// Layers the Kustomization's spec overrides onto a kustomization document.
pub fn layer_spec(
    obj: &mut Map<String, Value>,
    dir: &Path,
    root: &Path,
    spec: &Kustomization,
) -> Result<(), GenerateError> {
    if let Some(ns) = &spec.target_namespace {
        obj.insert("namespace".into(), json!(ns));
    }
    if let Some(prefix) = &spec.name_prefix {
        obj.insert("namePrefix".into(), json!(prefix));
    }
    if let Some(suffix) = &spec.name_suffix {
        obj.insert("nameSuffix".into(), json!(suffix));
    }
    for patch in &spec.patches {
        let mut entry = Map::new();
        if let Some(p) = patch.get("patch") {
            entry.insert("patch".into(), p.clone());
        }
        if let Some(target) = patch.get("target").and_then(selector) {
            entry.insert("target".into(), target);
        }
        push(obj, "patches", Value::Object(entry));
    }
    for patch in &spec.patches_strategic_merge {
        push(obj, "patchesStrategicMerge", json!(patch.to_string()));
    }
    for patch in &spec.patches_json6902 {
        let mut entry = Map::new();
        if let Some(target) = patch.get("target").and_then(selector) {
            entry.insert("target".into(), target);
        }
        entry.insert("patch".into(), json!(patch.get("patch").unwrap_or(&json!([])).to_string()));
        push(obj, "patchesJson6902", Value::Object(entry));
    }
    for image in &spec.images {
        merge_image(obj, image);
    }
    for component in &spec.components {
        if Path::new(component).is_absolute() || is_remote(component) {
            return Err(GenerateError::RemoteComponent(component.clone()));
        }
        if spec.ignore_missing_components && !crate::paths::exists_within(root, &dir.join(component)) {
            continue;
        }
        push(obj, "components", json!(component));
    }
    Ok(())
}

/// True when a kustomization reference names a remote location rather than a local path.
pub fn is_remote(reference: &str) -> bool {
    reference.contains("://")
        || reference.starts_with("git::")
        || reference.starts_with("git@")
        || ["github.com/", "gitlab.com/", "bitbucket.org/"].iter().any(|h| reference.starts_with(h))
        || reference.contains("?ref=")
}

fn selector(target: &Value) -> Option<Value> {
    let fields = ["group", "version", "kind", "name", "namespace", "labelSelector", "annotationSelector"];
    let map: Map<String, Value> = fields
        .iter()
        .filter_map(|f| target.get(*f).filter(|v| !v.is_null()).map(|v| (f.to_string(), v.clone())))
        .collect();
    Some(Value::Object(map))
}

pub fn push(obj: &mut Map<String, Value>, key: &str, value: Value) {
    match obj.get_mut(key).and_then(Value::as_array_mut) {
        Some(list) => list.push(value),
        None => {
            obj.insert(key.into(), json!([value]));
        }
    }
}

/// Images merge by name: `newName` overwrites when set; `newTag` and `digest` overwrite together.
pub fn merge_image(obj: &mut Map<String, Value>, image: &Value) {
    let name = image.get("name");
    let existing = obj
        .get_mut("images")
        .and_then(Value::as_array_mut)
        .and_then(|list| list.iter_mut().find(|i| i.get("name") == name));
    let Some(existing) = existing else {
        push(obj, "images", image.clone());
        return;
    };
    let non_empty = |key: &str| image.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
    if let Some(new_name) = non_empty("newName") {
        existing["newName"] = json!(new_name);
    }
    if non_empty("newTag").is_some() || non_empty("digest").is_some() {
        for key in ["newTag", "digest"] {
            match non_empty(key) {
                Some(v) => existing[key] = json!(v),
                None => {
                    if let Some(map) = existing.as_object_mut() {
                        map.remove(key);
                    }
                }
            }
        }
    }
}
