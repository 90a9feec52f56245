//! The Flux Operator's ResourceSets: each template rendered for every input set, as the
//! operator builds them (`resources` first, then `resourcesTemplate`, objects deduplicated by
//! group, kind, namespace and name, `reconcile: disabled` ones left out), with its owner labels
//! and `commonMetadata`.

pub mod inputs;
pub mod template;
pub(super) mod unit;

use crate::flux::resourceset::{self, ResourceSet, Templates};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

pub use inputs::{Combined, Providers};

/// What the plan needs to know of a ResourceSet beyond its objects.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ResourceSetUnit {
    /// How many input sets it was expanded with (`None`: unknown offline).
    pub input_sets: Option<usize>,
    /// The input set each generated object came from, by `Kind namespace/name`.
    #[serde(skip)]
    pub inputs: BTreeMap<String, String>,
    /// `namespace/name` of the ConfigMaps and Secrets whose data the operator copies into
    /// generated objects (`copyFrom`): never read, never shown.
    pub copied_from: BTreeSet<String>,
    /// `fluxcd.controlplane.io/reconcile: disabled`: the operator applies and prunes nothing.
    pub disabled: bool,
}

impl ResourceSetUnit {
    /// The key of `inputs` for an object.
    pub fn object_key(kind: &str, namespace: &str, name: &str) -> String {
        format!("{kind} {namespace}/{name}")
    }
}

/// The YAML a ResourceSet's templates may print in all.
const MAX_OUTPUT_BYTES: usize = 64 << 20;
/// The values its template functions may build in all (strings, lists and maps).
const MAX_BUILT_BYTES: usize = 256 << 20;
/// Template renders one ResourceSet may take (input sets times templates).
const MAX_RENDERS: usize = 50_000;
/// The objects one ResourceSet may generate.
const MAX_OBJECTS: usize = 20_000;

/// Why a ResourceSet cannot be expanded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExpandError {
    /// The operator would refuse it too (or fluxplan does not render what it uses).
    #[error("{0}")]
    Invalid(String),
    /// Over fluxplan's limits.
    #[error("{0}")]
    Limit(String),
}

impl From<String> for ExpandError {
    fn from(message: String) -> Self {
        ExpandError::Invalid(message)
    }
}

/// What a ResourceSet generates, or why only the cluster knows.
#[derive(Debug, Clone, PartialEq)]
pub enum Expansion {
    Built {
        /// The objects, each with the input set it came from (`tenant=frontend`) when it has one.
        objects: Vec<(Value, Option<String>)>,
        /// How many input sets there were.
        input_sets: usize,
        notes: Vec<String>,
    },
    Unknown(String),
}

/// Expands a ResourceSet manifest with the providers given.
pub fn expand(manifest: &Value, providers: &Providers) -> Result<Expansion, ExpandError> {
    template::with_allocation_budget(MAX_BUILT_BYTES, || expand_within_budget(manifest, providers))
}

fn expand_within_budget(manifest: &Value, providers: &Providers) -> Result<Expansion, ExpandError> {
    let set = ResourceSet::parse(manifest)?;
    let (sets, notes) = match inputs::combine(&set, providers)? {
        Combined::Known { sets, notes } => (sets, notes),
        Combined::Unknown(why) => return Ok(Expansion::Unknown(why)),
    };
    // Providers that export nothing: the operator builds nothing (and prunes everything).
    let with_inputs = !set.inputs_from.is_empty() || !set.inputs.is_empty();
    if with_inputs && sets.is_empty() {
        return Ok(Expansion::Built { objects: Vec::new(), input_sets: 0, notes });
    }
    let templates: usize =
        set.steps.iter().map(|s| s.resources.len() + usize::from(!s.resources_template.is_empty())).sum();
    if sets.len().max(1).saturating_mul(templates) > MAX_RENDERS {
        return Err(ExpandError::Limit(format!(
            "{} input sets times {templates} templates is more than {MAX_RENDERS} renders: over fluxplan's limit",
            sets.len()
        )));
    }
    let mut objects = Vec::new();
    let mut steps_of: BTreeMap<String, Option<String>> = BTreeMap::new();
    let budget = template::Budget::new(MAX_OUTPUT_BYTES);
    for step in &set.steps {
        let built = match build(step, &sets, &budget) {
            Ok(built) => built,
            Err(e) if budget.exhausted() || template::allocation_spent() || e.contains(template::OVER_LIMIT) => {
                return Err(ExpandError::Limit(e))
            }
            // A Static provider's id is its UID: only the cluster knows it.
            Err(e) if e.contains("no entry for key: id") && notes.iter().any(|n| n.contains("has no id offline")) => {
                return Ok(Expansion::Unknown(format!(
                    "its templates use inputs.id of a Static input provider, the adler32 of the provider's UID in the \
                     cluster: unknown offline ({e})"
                )))
            }
            Err(e) => return Err(step.step.as_ref().map_or(e.clone(), |name| format!("step {name:?}: {e}")).into()),
        };
        if objects.len() + built.len() > MAX_OBJECTS {
            return Err(ExpandError::Limit(format!(
                "it generates more than {MAX_OBJECTS} objects: over fluxplan's limit"
            )));
        }
        for (object, input) in built {
            let key = object_key(&object);
            match steps_of.get(&key) {
                Some(previous) if previous != &step.step => {
                    return Err(ExpandError::Invalid(format!(
                        "duplicate resource {key} in step {:?}, already defined in step {:?}",
                        step.step.clone().unwrap_or_default(),
                        previous.clone().unwrap_or_default()
                    )))
                }
                _ => {
                    steps_of.insert(key, step.step.clone());
                }
            }
            objects.push((stamped(object, &set), input));
        }
    }
    Ok(Expansion::Built { objects, input_sets: sets.len(), notes })
}

/// The objects of one step (or of a ResourceSet without steps) for every input set.
fn build(
    templates: &Templates,
    sets: &[Value],
    budget: &template::Budget,
) -> Result<Vec<(Value, Option<String>)>, String> {
    let mut objects: Vec<(Value, Option<String>)> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut add = |object: Value, input: Option<String>, dedup: bool| {
        let key = object_key(&object);
        if seen.contains(&key) && dedup {
            return;
        }
        seen.insert(key);
        objects.push((object, input));
    };
    // The builder compares the annotation exactly (the ResourceSet's own ignores case).
    let disabled =
        |o: &Value| o["metadata"]["annotations"][resourceset::RECONCILE_ANNOTATION] == resourceset::DISABLED;
    // Each template is parsed once, and each input set converted once, for every render.
    let values: Vec<gotmpl::Value> =
        sets.iter().map(template::to_value).collect::<Result<_, _>>().map_err(|e| e.0)?;
    let runs: Vec<(Option<&Value>, gotmpl::Value)> = if sets.is_empty() {
        vec![(None, gotmpl::Value::Nil)]
    } else {
        sets.iter().map(Some).zip(values).collect()
    };
    for (i, resource) in templates.resources.iter().enumerate() {
        // Each JSON template is printed as YAML (keys sorted, as Go's encoder writes them) and
        // rendered as text: `replicas: << inputs.n >>` renders to a number.
        let at = |e: &dyn std::fmt::Display| format!("resources[{i}]: {e}");
        let text = serde_norway::to_string(&sorted(resource)).map_err(|e| at(&e))?;
        let prepared = template::Prepared::parse(&text).map_err(|e| at(&e))?;
        for (set, value) in &runs {
            let object = one_object(&prepared.render(value.clone(), budget).map_err(|e| at(&e))?, i)?;
            // Without inputs, the builder neither filters nor deduplicates.
            match set {
                None => add(object, None, false),
                Some(set) if !disabled(&object) => add(object, Some(describe(set)), true),
                Some(_) => {}
            }
        }
    }
    if !templates.resources_template.is_empty() {
        let at = |e: &dyn std::fmt::Display| format!("resourcesTemplate: {e}");
        let prepared = template::Prepared::parse(&templates.resources_template).map_err(|e| at(&e))?;
        for (set, value) in &runs {
            let rendered = prepared.render(value.clone(), budget).map_err(|e| at(&e))?;
            let documents = crate::yaml::parse_documents(&rendered)
                .map_err(|e| at(&format!("the rendered YAML does not parse: {e}")))?;
            for object in documents {
                check_object(&object, "resourcesTemplate")?;
                if !disabled(&object) {
                    add(object, set.map(describe), true);
                }
            }
        }
    }
    Ok(objects)
}

/// The one object a JSON template renders to.
fn one_object(rendered: &str, i: usize) -> Result<Value, String> {
    let mut documents = crate::yaml::parse_documents(rendered)
        .map_err(|e| format!("resources[{i}]: the rendered YAML does not parse: {e}"))?;
    if documents.len() != 1 {
        return Err(format!("resources[{i}]: renders {} objects, not one", documents.len()));
    }
    let object = documents.remove(0);
    check_object(&object, &format!("resources[{i}]"))?;
    Ok(object)
}

/// What the operator's object reader requires: a map with apiVersion, kind and a name.
fn check_object(object: &Value, at: &str) -> Result<(), String> {
    let text = |key: &str| object[key].as_str().is_some_and(|s| !s.is_empty());
    if !object.is_object() || !text("apiVersion") || !text("kind") {
        return Err(format!("{at}: an object needs apiVersion and kind"));
    }
    if object["metadata"]["name"].as_str().is_none_or(str::is_empty) {
        return Err(format!("{at}: a {} needs metadata.name", object["kind"].as_str().unwrap_or("?")));
    }
    Ok(())
}

/// `group/kind/namespace/name`: the operator's identity of a generated object.
fn object_key(object: &Value) -> String {
    let group = crate::flux::split_api_version(object["apiVersion"].as_str().unwrap_or("")).0;
    let meta = &object["metadata"];
    format!(
        "{group}/{}/{}/{}",
        object["kind"].as_str().unwrap_or(""),
        meta["namespace"].as_str().unwrap_or(""),
        meta["name"].as_str().unwrap_or("")
    )
}

/// The operator's labels and `commonMetadata` on a generated object.
fn stamped(mut object: Value, set: &ResourceSet) -> Value {
    let owner = [
        (resourceset::OWNER_NAME_LABEL, Value::String(set.name.clone())),
        (resourceset::OWNER_NAMESPACE_LABEL, Value::String(set.namespace.clone())),
    ];
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else { return object };
    let mut merge = |field: &str, entries: &mut dyn Iterator<Item = (String, Value)>| {
        let map = meta.entry(field).or_insert_with(|| Value::Object(Map::new()));
        if !map.is_object() {
            *map = Value::Object(Map::new());
        }
        if let Some(map) = map.as_object_mut() {
            map.extend(entries);
        }
    };
    // The operator sets its owner labels, then `commonMetadata` (which wins).
    merge("labels", &mut owner.into_iter().map(|(k, v)| (k.to_string(), v)));
    merge("labels", &mut set.common_labels.clone().into_iter());
    merge("annotations", &mut set.common_annotations.clone().into_iter());
    if meta.get("annotations").and_then(Value::as_object).is_some_and(Map::is_empty) {
        meta.remove("annotations");
    }
    object
}

/// An input set in a line: its scalar values by key (`tenant=frontend`), the provider left out.
fn describe(set: &Value) -> String {
    let parts: Vec<String> = set
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.as_str() != "provider")
        .filter_map(|(key, value)| match value {
            Value::String(s) => Some(format!("{key}={s}")),
            Value::Number(n) => Some(format!("{key}={n}")),
            Value::Bool(b) => Some(format!("{key}={b}")),
            _ => None,
        })
        .collect();
    if parts.is_empty() {
        "input".to_string()
    } else {
        parts.join(", ")
    }
}

/// Keys sorted at every level, as Go's encoder writes maps.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expand_offline(spec: Value) -> Result<Expansion, String> {
        expand(
            &json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "ResourceSet",
                "metadata": {"name": "apps", "namespace": "flux-system"}, "spec": spec}),
            &Providers { rendered: &[], live: None },
        )
        .map_err(|e| e.to_string())
    }

    fn built(expansion: Expansion) -> Vec<(Value, Option<String>)> {
        match expansion {
            Expansion::Built { objects, .. } => objects,
            Expansion::Unknown(why) => panic!("unknown: {why}"),
        }
    }

    #[test]
    fn every_template_renders_for_every_input_with_owner_labels() {
        let objects = built(
            expand_offline(json!({
                "inputs": [{"tenant": "frontend", "replicas": 2}, {"tenant": "backend", "replicas": 3}],
                "commonMetadata": {"labels": {"team": "platform"}},
                "resources": [
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "<< inputs.tenant >>"}},
                    {"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": "web", "namespace": "<< inputs.tenant >>"},
                     "spec": {"replicas": "<< inputs.replicas >>"}},
                ],
                "resourcesTemplate": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: flux-system\n",
            }))
            .unwrap(),
        );
        let names: Vec<String> = objects
            .iter()
            .map(|(o, _)| {
                format!("{}/{}", o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap())
            })
            .collect();
        // Deduplicated: the shared ConfigMap once.
        assert_eq!(
            names,
            vec![
                "Namespace/frontend",
                "Namespace/backend",
                "Deployment/web",
                "Deployment/web",
                "ConfigMap/shared"
            ]
        );
        // A template string renders to a number where the input is one.
        assert_eq!(objects[3].0["spec"]["replicas"], json!(3));
        assert_eq!(objects[3].1.as_deref(), Some("tenant=backend, replicas=3"));
        let labels = &objects[0].0["metadata"]["labels"];
        assert_eq!(labels["resourceset.fluxcd.controlplane.io/name"], "apps");
        assert_eq!(labels["resourceset.fluxcd.controlplane.io/namespace"], "flux-system");
        assert_eq!(labels["team"], "platform");
    }

    #[test]
    fn disabled_objects_are_left_out_and_an_unknown_function_fails_by_name() {
        let objects = built(
            expand_offline(json!({
                "inputs": [{"tenant": "a"}],
                "resourcesTemplate": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    fluxcd.controlplane.io/reconcile: disabled\n",
            }))
            .unwrap(),
        );
        assert!(objects.is_empty());
        let error = expand_offline(
            json!({"inputs": [{"t": "a"}], "resourcesTemplate": "<< inputs.t | toDate \"x\" >>"}),
        )
        .unwrap_err();
        assert!(error.contains("resourcesTemplate: the template calls toDate"), "{error}");
    }

    #[test]
    fn without_inputs_the_templates_render_once() {
        let objects = built(
            expand_offline(json!({"resources": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "solo"}}]}))
                .unwrap(),
        );
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0].1, None);
    }

    #[test]
    fn a_resourceset_printing_without_end_is_over_the_limit() {
        let spec = json!({"inputs": (0..100).map(|i| json!({"n": i})).collect::<Vec<_>>(),
            "resourcesTemplate": "<< range $i, $x := list 1 2 3 4 5 6 7 8 9 10 >>\n# << repeat 1000000 \"x\" >>\n<< end >>"});
        let error = expand(
            &json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "ResourceSet",
                "metadata": {"name": "apps", "namespace": "flux-system"}, "spec": spec}),
            &Providers { rendered: &[], live: None },
        )
        .unwrap_err();
        assert!(matches!(&error, ExpandError::Limit(why) if why.contains("more than 64 MiB")), "{error:?}");
    }

    #[test]
    fn steps_may_not_define_one_object_twice() {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
        let error = expand_offline(
            json!({"steps": [{"name": "one", "resources": [ns]}, {"name": "two", "resources": [ns]}]}),
        )
        .unwrap_err();
        assert!(
            error.contains(
                "duplicate resource /Namespace//x in step \"two\", already defined in step \"one\""
            ),
            "{error}"
        );
    }
}
