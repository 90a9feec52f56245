//! The Flux Kustomization object (kustomize.toolkit.fluxcd.io v1, v1beta2, v1beta1), read
//! leniently: unknown fields are kept in `raw`, missing ones take the controller's defaults.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// `namespace/name` of a Kustomization.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KustomizationRef {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for KustomizationRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A source reference with its namespace defaulted to the Kustomization's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourceRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for SourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// One `postBuild.substituteFrom` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubstituteReference {
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub optional: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PostBuild {
    pub substitute: BTreeMap<String, String>,
    pub substitute_from: Vec<SubstituteReference>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommonMetadata {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// What the controller does with a Kustomization's inventory when the object is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeletionPolicy {
    MirrorPrune,
    Delete,
    WaitForTermination,
    Orphan,
}

/// The fields of a Kustomization that fluxplan acts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Kustomization {
    pub api_version: String,
    pub namespace: String,
    pub name: String,
    pub path: String,
    pub source_ref: SourceRef,
    pub target_namespace: Option<String>,
    pub name_prefix: Option<String>,
    pub name_suffix: Option<String>,
    pub patches: Vec<Value>,
    pub patches_strategic_merge: Vec<Value>,
    pub patches_json6902: Vec<Value>,
    pub images: Vec<Value>,
    pub components: Vec<String>,
    pub ignore_missing_components: bool,
    pub common_metadata: Option<CommonMetadata>,
    pub post_build: Option<PostBuild>,
    /// `substituteStrategy: Always` substitutes even when no variable is defined.
    pub substitute_always: bool,
    pub prune: bool,
    pub suspend: bool,
    pub deletion_policy: DeletionPolicy,
    pub has_decryption: bool,
    pub has_remote_kubeconfig: bool,
    /// The whole object as read.
    pub raw: Value,
}

/// Why a manifest could not be read as a Kustomization.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn list_field(v: &Value, key: &str) -> Vec<Value> {
    v.get(key).and_then(Value::as_array).cloned().unwrap_or_default()
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Kustomization {
    /// Reads a Kustomization manifest. `default_namespace` applies when metadata has none.
    pub fn from_value(obj: &Value, default_namespace: &str) -> Result<Self, SpecError> {
        let meta = &obj["metadata"];
        let name =
            str_field(meta, "name").ok_or_else(|| SpecError("Kustomization has no metadata.name".into()))?;
        let namespace = str_field(meta, "namespace").unwrap_or_else(|| default_namespace.to_string());
        let spec = obj
            .get("spec")
            .filter(|s| s.is_object())
            .ok_or_else(|| SpecError(format!("Kustomization {namespace}/{name} has no spec")))?;
        let source = &spec["sourceRef"];
        let source_ref = SourceRef {
            kind: str_field(source, "kind").unwrap_or_else(|| "GitRepository".into()),
            namespace: str_field(source, "namespace").unwrap_or_else(|| namespace.clone()),
            name: str_field(source, "name").ok_or_else(|| {
                SpecError(format!("Kustomization {namespace}/{name} has no spec.sourceRef.name"))
            })?,
        };
        let post_build = spec.get("postBuild").filter(|p| p.is_object()).map(|p| PostBuild {
            substitute: string_map(p.get("substitute")),
            substitute_from: p
                .get("substituteFrom")
                .and_then(|l| serde_json::from_value(l.clone()).ok())
                .unwrap_or_default(),
        });
        let strategy =
            spec["postBuild"]["substituteStrategy"].as_str().or_else(|| spec["substituteStrategy"].as_str());
        let common_metadata = spec.get("commonMetadata").filter(|c| c.is_object()).map(|c| CommonMetadata {
            labels: string_map(c.get("labels")),
            annotations: string_map(c.get("annotations")),
        });
        let prune = spec["prune"].as_bool().unwrap_or(false);
        let deletion_policy = match spec["deletionPolicy"].as_str() {
            Some("Delete") => DeletionPolicy::Delete,
            Some("WaitForTermination") => DeletionPolicy::WaitForTermination,
            Some("Orphan") => DeletionPolicy::Orphan,
            _ => DeletionPolicy::MirrorPrune,
        };
        Ok(Kustomization {
            api_version: str_field(obj, "apiVersion").unwrap_or_default(),
            namespace,
            name,
            path: str_field(spec, "path").unwrap_or_default(),
            source_ref,
            target_namespace: str_field(spec, "targetNamespace").filter(|s| !s.is_empty()),
            name_prefix: str_field(spec, "namePrefix").filter(|s| !s.is_empty()),
            name_suffix: str_field(spec, "nameSuffix").filter(|s| !s.is_empty()),
            patches: list_field(spec, "patches"),
            patches_strategic_merge: list_field(spec, "patchesStrategicMerge"),
            patches_json6902: list_field(spec, "patchesJson6902"),
            images: list_field(spec, "images"),
            components: list_field(spec, "components")
                .iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect(),
            ignore_missing_components: spec["ignoreMissingComponents"].as_bool().unwrap_or(false),
            common_metadata,
            post_build,
            substitute_always: strategy == Some("Always"),
            prune,
            suspend: spec["suspend"].as_bool().unwrap_or(false),
            deletion_policy,
            has_decryption: spec.get("decryption").is_some_and(|d| !d.is_null()),
            has_remote_kubeconfig: spec.get("kubeConfig").is_some_and(|d| !d.is_null()),
            raw: obj.clone(),
        })
    }

    pub fn reference(&self) -> KustomizationRef {
        KustomizationRef { namespace: self.namespace.clone(), name: self.name.clone() }
    }

    /// True when deleting this Kustomization object deletes what it applied.
    pub fn deletes_inventory_on_removal(&self) -> bool {
        if self.suspend {
            return false;
        }
        match self.deletion_policy {
            DeletionPolicy::MirrorPrune => self.prune,
            DeletionPolicy::Delete | DeletionPolicy::WaitForTermination => true,
            DeletionPolicy::Orphan => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample(spec: Value) -> Value {
        json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "apps"},
            "spec": spec,
        })
    }

    #[test]
    fn defaults_namespaces_and_policy() {
        let k = Kustomization::from_value(
            &sample(json!({"path": "./apps", "prune": true, "sourceRef": {"kind": "GitRepository", "name": "flux-system"}})),
            "flux-system",
        )
        .unwrap();
        assert_eq!(k.namespace, "flux-system");
        assert_eq!(k.source_ref.namespace, "flux-system");
        assert_eq!(k.deletion_policy, DeletionPolicy::MirrorPrune);
        assert!(k.deletes_inventory_on_removal());
    }

    #[test]
    fn orphan_and_suspended_keep_inventory() {
        let orphan = Kustomization::from_value(
            &sample(json!({"prune": true, "deletionPolicy": "Orphan", "sourceRef": {"name": "s"}})),
            "ns",
        )
        .unwrap();
        assert!(!orphan.deletes_inventory_on_removal());
        let suspended = Kustomization::from_value(
            &sample(json!({"prune": true, "suspend": true, "sourceRef": {"name": "s"}})),
            "ns",
        )
        .unwrap();
        assert!(!suspended.deletes_inventory_on_removal());
    }

    #[test]
    fn reads_post_build() {
        let k = Kustomization::from_value(
            &sample(json!({
                "sourceRef": {"name": "s"},
                "postBuild": {"substitute": {"a": "1", "n": 5}, "substituteFrom": [{"kind": "Secret", "name": "vars", "optional": true}]}
            })),
            "ns",
        )
        .unwrap();
        let pb = k.post_build.unwrap();
        assert_eq!(pb.substitute["n"], "5");
        assert_eq!(
            pb.substitute_from[0],
            SubstituteReference { kind: "Secret".into(), name: "vars".into(), optional: true }
        );
    }

    #[test]
    fn missing_source_is_an_error() {
        let err = Kustomization::from_value(&sample(json!({"path": "."})), "ns").unwrap_err();
        assert!(err.0.contains("sourceRef.name"), "{err}");
    }
}
