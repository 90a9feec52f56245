//! The Flux Operator's `ResourceSet` and `ResourceSetInputProvider` (`fluxcd.controlplane.io/v1`):
//! their shapes, labels and annotations.

use serde_json::{Map, Value};

pub const GROUP: &str = "fluxcd.controlplane.io";
pub const KIND: &str = "ResourceSet";
pub const PROVIDER_KIND: &str = "ResourceSetInputProvider";
/// The labels the operator stamps on what a ResourceSet generates (its owner).
pub const OWNER_NAME_LABEL: &str = "resourceset.fluxcd.controlplane.io/name";
pub const OWNER_NAMESPACE_LABEL: &str = "resourceset.fluxcd.controlplane.io/namespace";
/// `disabled` on a generated object: never built; on a ResourceSet: not reconciled.
pub const RECONCILE_ANNOTATION: &str = "fluxcd.controlplane.io/reconcile";
/// `disabled` on a generated object: the operator never deletes it.
pub const PRUNE_ANNOTATION: &str = "fluxcd.controlplane.io/prune";
/// `namespace/name` of a ConfigMap or Secret whose data the operator copies in.
pub const COPY_FROM_ANNOTATION: &str = "fluxcd.controlplane.io/copyFrom";
pub const DISABLED: &str = "disabled";
/// The one provider type whose inputs its spec holds (`defaultValues`).
pub const STATIC_PROVIDER: &str = "Static";

/// How the inputs of several providers combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputStrategy {
    /// One input set per input of every provider, in turn.
    Flatten,
    /// Every combination of one input per provider, each scoped by its provider's name.
    Permute { include_empty_providers: bool },
}

/// A ResourceSet's `inputsFrom` entry: providers by name, or by label selector.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderRef {
    Name(String),
    Selector(Value),
}

/// One step, or the whole of a ResourceSet without steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Templates {
    pub step: Option<String>,
    pub resources: Vec<Value>,
    pub resources_template: String,
}

/// What the operator reads of a ResourceSet to build its objects.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceSet {
    pub namespace: String,
    pub name: String,
    pub inputs: Vec<Map<String, Value>>,
    pub inputs_from: Vec<ProviderRef>,
    pub strategy: InputStrategy,
    /// The steps in order; one anonymous step for a ResourceSet without `steps`.
    pub steps: Vec<Templates>,
    /// `commonMetadata` labels and annotations for every generated object.
    pub common_labels: Map<String, Value>,
    pub common_annotations: Map<String, Value>,
    /// `fluxcd.controlplane.io/reconcile: disabled`: the operator leaves it alone.
    pub disabled: bool,
}

/// True for a `ResourceSet` of the operator's group.
pub fn is_resourceset(object: &Value) -> bool {
    is_kind(object, KIND)
}

/// True for a `ResourceSetInputProvider` of the operator's group.
pub fn is_input_provider(object: &Value) -> bool {
    is_kind(object, PROVIDER_KIND)
}

fn is_kind(object: &Value, kind: &str) -> bool {
    object["kind"] == kind && super::split_api_version(object["apiVersion"].as_str().unwrap_or("")).0 == GROUP
}

/// True when an annotation of `object` is `disabled`.
pub fn disabled_by(object: &Value, annotation: &str) -> bool {
    object["metadata"]["annotations"][annotation].as_str().is_some_and(|v| v.eq_ignore_ascii_case(DISABLED))
}

impl ResourceSet {
    /// Reads a ResourceSet manifest; refuses what the operator's validation refuses.
    pub fn parse(object: &Value) -> Result<Self, String> {
        let meta = &object["metadata"];
        let name =
            meta["name"].as_str().filter(|n| !n.is_empty()).ok_or("a ResourceSet needs metadata.name")?;
        let namespace = meta["namespace"].as_str().unwrap_or("").to_string();
        let spec = &object["spec"];
        let inputs = match &spec["inputs"] {
            Value::Null => Vec::new(),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| item.as_object().cloned().ok_or(format!("spec.inputs[{i}] is not a map")))
                .collect::<Result<_, _>>()?,
            _ => return Err("spec.inputs is not a list".into()),
        };
        let mut inputs_from = Vec::new();
        for (i, entry) in spec["inputsFrom"].as_array().into_iter().flatten().enumerate() {
            if let Some(kind) = entry["kind"].as_str().filter(|k| *k != PROVIDER_KIND) {
                return Err(format!("spec.inputsFrom[{i}]: kind {kind} is not a {PROVIDER_KIND}"));
            }
            match (entry["name"].as_str().filter(|n| !n.is_empty()), &entry["selector"]) {
                (Some(name), _) => inputs_from.push(ProviderRef::Name(name.to_string())),
                (None, selector) if selector.is_object() => {
                    inputs_from.push(ProviderRef::Selector(selector.clone()))
                }
                _ => {
                    return Err(format!(
                    "spec.inputsFrom[{i}]: input provider reference must have either name or selector set"
                ))
                }
            }
        }
        let strategy = match spec["inputStrategy"]["name"].as_str().unwrap_or("Flatten") {
            "Flatten" => InputStrategy::Flatten,
            "Permute" => InputStrategy::Permute {
                include_empty_providers: spec["inputStrategy"]["includeEmptyProviders"] == true,
            },
            other => return Err(format!("unknown input strategy: '{other}'")),
        };
        let templates = |value: &Value, step: Option<String>| -> Result<Templates, String> {
            Ok(Templates {
                step,
                resources: match &value["resources"] {
                    Value::Null => Vec::new(),
                    Value::Array(items) => items.clone(),
                    _ => return Err("resources is not a list".into()),
                },
                resources_template: value["resourcesTemplate"].as_str().unwrap_or("").to_string(),
            })
        };
        let steps = match spec["steps"].as_array().filter(|s| !s.is_empty()) {
            Some(steps) => {
                if spec["resources"].as_array().is_some_and(|r| !r.is_empty())
                    || spec["resourcesTemplate"].as_str().is_some_and(|t| !t.is_empty())
                {
                    return Err(
                        "spec.steps is mutually exclusive with spec.resources and spec.resourcesTemplate"
                            .into(),
                    );
                }
                steps
                    .iter()
                    .map(|step| {
                        let name = step["name"].as_str().unwrap_or("").to_string();
                        let built = templates(step, Some(name.clone()))?;
                        if built.resources.is_empty() && built.resources_template.is_empty() {
                            return Err(format!(
                                "step {name:?}: at least one of resources or resourcesTemplate must be set"
                            ));
                        }
                        Ok(built)
                    })
                    .collect::<Result<_, String>>()?
            }
            None => vec![templates(spec, None)?],
        };
        let common = &spec["commonMetadata"];
        Ok(ResourceSet {
            namespace,
            name: name.to_string(),
            inputs,
            inputs_from,
            strategy,
            steps,
            common_labels: common["labels"].as_object().cloned().unwrap_or_default(),
            common_annotations: common["annotations"].as_object().cloned().unwrap_or_default(),
            disabled: disabled_by(object, RECONCILE_ANNOTATION),
        })
    }
}

/// Go's `adler32.Checksum` printed in decimal: the operator's input ids.
pub fn input_id(text: &str) -> String {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    for byte in text.bytes() {
        a = (a + u32::from(byte)) % MOD;
        b = (b + a) % MOD;
    }
    ((b << 16) | a).to_string()
}

/// The operator's `NormalizeKeyForTemplate`: a provider's name as a key of a permuted input set
/// (lower case; spaces and punctuation become `_`; other characters dropped; runs of `_` and
/// the ends trimmed).
pub fn normalize_key(key: &str) -> String {
    let mapped: String = key
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| {
            // Provider names are Kubernetes names: ASCII, so ASCII punctuation is all there is.
            if c.is_whitespace() || c.is_ascii_punctuation() {
                Some('_')
            } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
                Some(c)
            } else {
                None
            }
        })
        .collect();
    mapped.split('_').filter(|w| !w.is_empty()).collect::<Vec<_>>().join("_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_adler32_as_go_prints_them() {
        // adler32("Wikipedia") = 0x11E60398.
        assert_eq!(input_id("Wikipedia"), 0x11E6_0398u32.to_string());
        assert_eq!(input_id(""), "1");
    }

    #[test]
    fn provider_names_become_template_keys() {
        assert_eq!(normalize_key("GitHub-Branches.v2"), "github_branches_v2");
        assert_eq!(normalize_key("--a  b--"), "a_b");
    }

    #[test]
    fn parse_refuses_what_the_operator_refuses() {
        let parse = |spec: Value| {
            ResourceSet::parse(
                &json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "ResourceSet", "metadata": {"name": "x", "namespace": "n"}, "spec": spec}),
            )
        };
        assert!(parse(json!({"inputStrategy": {"name": "Zip"}}))
            .unwrap_err()
            .contains("unknown input strategy"));
        assert!(parse(json!({"steps": [{"name": "a", "resources": [{}]}], "resourcesTemplate": "x"}))
            .unwrap_err()
            .contains("mutually exclusive"));
        assert!(parse(json!({"inputsFrom": [{}]})).unwrap_err().contains("either name or selector"));
        let set = parse(json!({"inputs": [{"a": 1}], "resources": [{"kind": "X"}]})).unwrap();
        assert_eq!(set.strategy, InputStrategy::Flatten);
        assert_eq!(set.steps.len(), 1);
        assert_eq!(set.steps[0].step, None);
    }
}
