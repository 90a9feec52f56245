//! A HelmRelease's values, merged as helm-controller merges them (fluxcd/pkg
//! `chartutil/values.go`): `valuesFrom` in order (ConfigMaps and Secrets, a key's whole document
//! or, with `targetPath`, values set with Helm's `--set` syntax), then `spec.values`. What comes
//! from a Secret is merged masked: no render ever sees it.

use super::release::{failed, Inputs, NotRendered};
use super::shared::{int64_assignments, map_to_json, merge_maps, new_map, Node, SharedMap};
use super::strvals::{replace_path_literal_value, replace_path_value, Budget, Dialect};
use crate::cluster::Lookup;
use crate::flux::helm::{HelmReleaseSpec, ValuesReference};
use serde_json::{Map, Value};

/// The merged values the release is rendered with.
pub struct Merged {
    /// With values from Secrets, each of those is replaced by the mask: no render ever sees one.
    pub values: Value,
    /// The `--set` assignments that make the `int64`s of `values` Go's `int64`s again
    /// (`shared::int64_assignments`).
    pub int64s: Vec<String>,
    pub from_secrets: bool,
}

/// What a value from a Secret is replaced with in the render that is shown.
pub const MASKED: &str = "(masked)";

/// One `valuesFrom` entry as read: its text, and whether a Secret holds it.
struct Source<'a> {
    reference: &'a ValuesReference,
    named: String,
    text: String,
    is_secret: bool,
}

/// The values helm-controller gives the chart, built as fluxcd/pkg `chartutil`
/// `ChartValuesFromReferences` builds them (`dialect`: the Helm whose `--set` parser it links):
/// `valuesFrom` in order — a whole document merged over what is there, or, with `targetPath`,
/// `spec.values` merged in first and the value set with Helm's `--set` syntax — then `spec.values`
/// over everything. Sources are read from the HelmRelease's namespace: ConfigMaps from the render of
/// the same revision, else the cluster; Secrets from the cluster (read with `--read-secrets`).
pub fn merged(
    spec: &HelmReleaseSpec,
    namespace: &str,
    inputs: &Inputs,
    dialect: Dialect,
) -> Result<Merged, NotRendered> {
    if spec.values_from.len() > MAX_VALUE_SOURCES {
        return Err(failed(format!("more than {MAX_VALUE_SOURCES} valuesFrom entries")));
    }
    let mut sources = Vec::new();
    for reference in &spec.values_from {
        let named = format!("{} {namespace}/{}", reference.kind, reference.name);
        let is_secret = match reference.kind.as_str() {
            "ConfigMap" => false,
            "Secret" => true,
            other => return Err(failed(format!("valuesFrom kind {other} is neither ConfigMap nor Secret"))),
        };
        let Some(mut data) = data_of(reference, namespace, inputs, &named)? else { continue };
        let Some(text) = data.remove(&reference.values_key) else {
            if reference.optional {
                continue;
            }
            return Err(failed(format!("{named} has no key '{}'", reference.values_key)));
        };
        sources.push(Source { reference, named, text, is_secret });
    }
    let from_secrets = sources.iter().any(|s| s.is_secret);
    let merged = compose(&spec.values, &sources, dialect, from_secrets)?;
    Ok(Merged { values: map_to_json(&merged), int64s: int64_assignments(&merged), from_secrets })
}

/// `ChartValuesFromReferences`' loop over sources already read; `masked`: every value a Secret
/// gives replaced by the mask (the same keys and lists).
fn compose(
    spec_values: &Value,
    sources: &[Source],
    dialect: Dialect,
    masked: bool,
) -> Result<SharedMap, NotRendered> {
    let spec_values = match Node::from_json(spec_values) {
        Node::Map(map) => map,
        _ => new_map([]),
    };
    let mut result = new_map([]);
    let mut budget = Budget::default();
    for source in sources {
        let Source { reference, named, text, is_secret } = source;
        let mask = (masked && *is_secret).then_some(MASKED);
        // A parser's message may quote the text: a Secret's never shows.
        let quote = |e: String| {
            if *is_secret {
                String::from("(message hidden: the value is a Secret's)")
            } else {
                e
            }
        };
        match reference.target_path.as_deref().filter(|p| !p.is_empty()) {
            Some(path) => {
                // spec.values first, through maps shared with it: a targetPath that writes into
                // one of them writes into spec.values too, which is merged again at the end.
                result = merge_maps(&result, &spec_values);
                let set = if reference.literal { replace_path_literal_value } else { replace_path_value };
                // A Secret's text is never parsed: its commas, lists and keys would shape the
                // values (and a parse error the status). The path alone is set, masked.
                let (set, text) =
                    if mask.is_some() { (replace_path_literal_value as _, MASKED) } else { (set, &text[..]) };
                set(&result, path, text, mask, dialect, &mut budget)
                    .map_err(|e| failed(format!("{named} targetPath '{path}': {}", quote(e.0))))?;
            }
            None => {
                let document = values_document(text).map_err(|e| {
                    failed(format!(
                        "{named} key '{}' is not a map of values: {}",
                        reference.values_key,
                        quote(e)
                    ))
                })?;
                let document = if mask.is_some() { self::masked(&document) } else { document };
                match Node::from_json(&document) {
                    Node::Map(map) => result = merge_maps(&result, &map),
                    _ => result = merge_maps(&result, &new_map([])),
                }
            }
        }
    }
    Ok(merge_maps(&result, &spec_values))
}

/// A values document as Helm's `ReadValues` reads one (`sigs.k8s.io/yaml`: the first document,
/// merge keys applied, YAML 1.1 scalars): a map, `{}` when empty; anything else fails.
pub fn values_document(text: &str) -> Result<Value, String> {
    match crate::go_yaml::first_document(text)? {
        Value::Null => Ok(Value::Object(Map::new())),
        map @ Value::Object(_) => Ok(map),
        other => Err(format!("it holds {}, not a map", kind_of(&other))),
    }
}

/// Every document of a values file as Helm 4's `loader.LoadValues` reads them (each a map or
/// empty, merged in order); Helm 3 reads the first only.
pub fn values_file(text: &str, dialect: Dialect) -> Result<SharedMap, String> {
    if dialect == Dialect::V3 {
        return Ok(as_map(values_document(text)?));
    }
    let mut merged = new_map([]);
    for document in crate::go_yaml::documents(text)? {
        let document = match document {
            Value::Null => Value::Object(Map::new()),
            map @ Value::Object(_) => map,
            other => return Err(format!("a document holds {}, not a map", kind_of(&other))),
        };
        merged = merge_maps(&merged, &as_map(document));
    }
    Ok(merged)
}

/// A JSON object as a fresh shared map (anything else as an empty one).
pub fn as_map(value: Value) -> SharedMap {
    match Node::from_json(&value) {
        Node::Map(map) => map,
        _ => new_map([]),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "a list",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "nothing",
        Value::Object(_) => "a map",
    }
}

/// The data of a valuesFrom source; `None` when it is optional and missing.
fn data_of(
    reference: &ValuesReference,
    namespace: &str,
    inputs: &Inputs,
    named: &str,
) -> Result<Option<std::collections::BTreeMap<String, String>>, NotRendered> {
    // A ConfigMap the same revision applies is what the cluster holds after the merge.
    if reference.kind == "ConfigMap" {
        if let Some(config_map) = (inputs.config_map)(namespace, &reference.name) {
            let data = config_map["data"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect();
            return Ok(Some(data));
        }
    }
    if reference.kind == "Secret" {
        if let Some(why) = (inputs.values_secret_refused)(namespace, &reference.name) {
            return Err(NotRendered::External(format!(
                "its values come from {named}, which is not read: {why}"
            )));
        }
    }
    match (inputs.cluster)(&reference.kind, namespace, &reference.name) {
        Lookup::Found(data) => Ok(Some(data)),
        Lookup::NotFound if reference.optional => Ok(None),
        Lookup::NotFound => Err(failed(format!("{named} does not exist: helm-controller fails the release"))),
        Lookup::Unknown if reference.kind == "Secret" => Err(NotRendered::External(format!(
            "its values come from {named}, which only the cluster holds (plan with a cluster and --read-secrets)"
        ))),
        Lookup::Unknown => Err(NotRendered::External(format!(
            "its values come from {named}, which this render does not hold and only the cluster has (plan with a \
             cluster snapshot or --kube)"
        ))),
    }
}

/// `value` with every scalar replaced by the mask, its shape kept: its keys are the chart's value
/// paths (`auth.password`), which the shown render must see to put the mask where the value goes.
fn masked(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), masked(v))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(masked).collect()),
        // Null too: whether a value is set is the Secret's to tell, not the plan's.
        _ => Value::String(MASKED.into()),
    }
}

/// The most `valuesFrom` entries (or Argo CD parameters) one release may have.
pub const MAX_VALUE_SOURCES: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reference(target_path: Option<&str>) -> ValuesReference {
        ValuesReference {
            kind: "ConfigMap".into(),
            name: "v".into(),
            values_key: "values.yaml".into(),
            target_path: target_path.map(str::to_string),
            optional: false,
            literal: false,
        }
    }

    fn compose_json(spec_values: Value, sources: &[(Option<&str>, &str)]) -> Value {
        let references: Vec<_> = sources.iter().map(|(path, _)| reference(*path)).collect();
        let sources: Vec<_> = references
            .iter()
            .zip(sources)
            .map(|(reference, (_, text))| Source {
                reference,
                named: "ConfigMap ns/v".into(),
                text: text.to_string(),
                is_secret: false,
            })
            .collect();
        match compose(&spec_values, &sources, Dialect::V4, false) {
            Ok(values) => map_to_json(&values),
            Err(_) => panic!("compose failed"),
        }
    }

    /// chartutil merges spec.values in before a targetPath through maps it shares with it: the
    /// targetPath's write lands in spec.values and wins over a later document.
    #[test]
    fn a_target_path_written_into_spec_values_outlives_a_later_document() {
        let values = compose_json(json!({"a": {"b": 1}}), &[(Some("a.c"), "2"), (None, "a: {c: 3}")]);
        assert_eq!(values, json!({"a": {"b": 1, "c": 2}}));
        // The other order: the document first, then the targetPath, spec.values last.
        let values = compose_json(json!({"a": {"b": 1}}), &[(None, "a: {c: 3}"), (Some("a.c"), "2")]);
        assert_eq!(values, json!({"a": {"b": 1, "c": 2}}));
        // A path spec.values does not hold: the later document wins, spec.values has no say.
        let values = compose_json(json!({"a": {"b": 1}}), &[(Some("x.c"), "2"), (None, "x: {c: 3}")]);
        assert_eq!(values, json!({"a": {"b": 1}, "x": {"c": 3}}));
    }

    #[test]
    fn a_target_path_value_with_a_comma_sets_a_second_path() {
        let values = compose_json(json!({}), &[(Some("x"), "plain,gate.open=true")]);
        assert_eq!(values, json!({"x": "plain", "gate": {"open": true}}));
        let values = compose_json(json!({}), &[(Some("x"), "plain\\,gate.open=true")]);
        assert_eq!(values, json!({"x": "plain,gate.open=true"}));
    }

    #[test]
    fn values_documents_are_maps_read_as_go_reads_them() {
        assert_eq!(values_document("").unwrap(), json!({}));
        assert_eq!(
            values_document("base: &b {x: 1}\nuse: {<<: *b, z: off}\n").unwrap(),
            json!({"base": {"x": 1}, "use": {"x": 1, "z": false}})
        );
        assert!(values_document("- a\n").unwrap_err().contains("a list"));
        let two = "a: 1\n---\nb: 2\n";
        assert_eq!(map_to_json(&values_file(two, Dialect::V3).unwrap()), json!({"a": 1}));
        assert_eq!(map_to_json(&values_file(two, Dialect::V4).unwrap()), json!({"a": 1, "b": 2}));
    }
}
