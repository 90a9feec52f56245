//! A HelmRelease's values, merged as helm-controller merges them: `valuesFrom` in order
//! (ConfigMaps and Secrets, a key's whole document or, with `targetPath`, one value set at a
//! path), then `spec.values`. What comes from a Secret is also merged masked, for the render
//! everything shown comes from.

use super::release::{failed, Inputs, NotRendered};
use crate::cluster::Lookup;
use crate::flux::helm::{HelmReleaseSpec, ValuesReference};
use serde_json::{Map, Value};

/// The merged values, and the masked ones when some come from Secrets.
pub struct Merged {
    pub values: Value,
    /// When some values come from Secrets: the same values with each of those replaced by a mask,
    /// the only ones the release is rendered with (`values` is never rendered).
    pub shown: Option<Value>,
}

/// What a value from a Secret is replaced with in the render that is shown.
pub const MASKED: &str = "(masked)";

/// `valuesFrom` in order, then `spec.values` over them, read from the HelmRelease's namespace:
/// ConfigMaps from the render of the same revision, else the cluster; Secrets from the cluster
/// (read with `--read-secrets`).
pub fn merged(spec: &HelmReleaseSpec, namespace: &str, inputs: &Inputs) -> Result<Merged, NotRendered> {
    let mut values = Value::Object(Map::new());
    let mut shown = Value::Object(Map::new());
    let mut from_secrets = false;
    if spec.values_from.len() > MAX_VALUE_SOURCES {
        return Err(failed(format!("more than {MAX_VALUE_SOURCES} valuesFrom entries")));
    }
    for reference in &spec.values_from {
        let named = format!("{} {namespace}/{}", reference.kind, reference.name);
        let is_secret = match reference.kind.as_str() {
            "ConfigMap" => false,
            "Secret" => true,
            other => return Err(failed(format!("valuesFrom kind {other} is neither ConfigMap nor Secret"))),
        };
        let Some(data) = data_of(reference, namespace, inputs, &named)? else { continue };
        let Some(text) = data.get(&reference.values_key) else {
            if reference.optional {
                continue;
            }
            return Err(failed(format!("{named} has no key '{}'", reference.values_key)));
        };
        from_secrets |= is_secret;
        // A parser's message may quote the text: a Secret's never shows.
        let quote =
            |e: String| if is_secret { String::from("(message hidden: the value is a Secret's)") } else { e };
        match &reference.target_path {
            Some(path) => {
                set_at_path(&mut values, path, text)
                    .map_err(|e| failed(format!("{named} targetPath '{path}': {}", quote(e))))?;
                if is_secret {
                    set_string_at_path(&mut shown, path, MASKED)
                        .map_err(|e| failed(format!("{named}: {e}")))?;
                } else {
                    set_at_path(&mut shown, path, text).map_err(|e| failed(format!("{named}: {e}")))?;
                }
            }
            None => {
                let document = crate::yaml::parse_documents(text)
                    .map_err(|e| {
                        failed(format!("{named} key '{}' is not YAML: {}", reference.values_key, quote(e)))
                    })?
                    .into_iter()
                    .next()
                    .unwrap_or(Value::Null);
                if is_secret {
                    merge(&mut shown, masked(&document));
                } else {
                    merge(&mut shown, document.clone());
                }
                merge(&mut values, document);
            }
        }
    }
    merge(&mut values, spec.values.clone());
    merge(&mut shown, spec.values.clone());
    Ok(Merged { values, shown: from_secrets.then_some(shown) })
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
    match (inputs.cluster)(&reference.kind, namespace, &reference.name) {
        Lookup::Found(data) => Ok(Some(data)),
        Lookup::NotFound if reference.optional => Ok(None),
        Lookup::NotFound => Err(failed(format!("{named} does not exist: helm-controller fails the release"))),
        Lookup::NotReadable(why) => {
            Err(NotRendered::External(format!("its values come from {named}, which is not read: {why}")))
        }
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

/// Merges `over` into `base`: maps key by key, recursively; anything else replaces.
pub fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(existing) if existing.is_object() && value.is_object() => merge(existing, value),
                    _ => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (_, Value::Null) => {}
        (base, over) => *base = over,
    }
}

/// Bounds on a path a pull request writes (each index makes a list that long): far beyond what
/// values need, far below what exhausts memory.
const MAX_INDEX: usize = 1_000;
const MAX_STEPS: usize = 30;
/// The most `valuesFrom` entries (or Argo CD parameters) one release may have.
pub const MAX_VALUE_SOURCES: usize = 200;

/// One step of a target path: a key of a map or an index of a list.
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The steps of `a.b\.c[0].d`: dots separate keys (`\.` is a dot in a key), `[n]` indexes a list.
fn steps(path: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    let mut key = String::new();
    let mut chars = path.trim().chars().peekable();
    let end_key = |key: &mut String, steps: &mut Vec<Step>| {
        if !key.is_empty() {
            steps.push(Step::Key(std::mem::take(key)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => key.push(chars.next().unwrap_or('.')),
            '.' => {
                if key.is_empty() && !matches!(steps.last(), Some(Step::Index(_))) {
                    return Err("an empty key".into());
                }
                end_key(&mut key, &mut steps);
            }
            '[' => {
                end_key(&mut key, &mut steps);
                let digits: String = chars.by_ref().take_while(|c| *c != ']').collect();
                let index =
                    digits.parse::<usize>().map_err(|_| format!("'[{digits}]' is not a list index"))?;
                if index > MAX_INDEX {
                    return Err(format!("list index {index} is over {MAX_INDEX}"));
                }
                steps.push(Step::Index(index));
            }
            c => key.push(c),
        }
    }
    end_key(&mut key, &mut steps);
    if steps.is_empty() {
        return Err("an empty path".into());
    }
    if steps.len() > MAX_STEPS {
        return Err(format!("more than {MAX_STEPS} levels deep"));
    }
    Ok(steps)
}

/// The value a text stands for, as Helm's `--set` reads it: quoted means a string; `true`,
/// `false`, `null` and integers without a leading zero are typed; anything else is a string.
fn typed(text: &str) -> Value {
    let quoted = text.len() >= 2
        && ((text.starts_with('"') && text.ends_with('"'))
            || (text.starts_with('\'') && text.ends_with('\'')));
    if quoted {
        return Value::String(text.trim_matches(|c| c == '"' || c == '\'').to_string());
    }
    match text {
        t if t.eq_ignore_ascii_case("true") => Value::Bool(true),
        t if t.eq_ignore_ascii_case("false") => Value::Bool(false),
        t if t.eq_ignore_ascii_case("null") => Value::Null,
        "0" => Value::from(0),
        t if !t.starts_with('0') && !t.starts_with("-0") => match t.parse::<i64>() {
            Ok(n) => Value::from(n),
            Err(_) => Value::String(t.to_string()),
        },
        t => Value::String(t.to_string()),
    }
}

/// Sets the value `text` stands for at `path` in `values`, making maps and lists on the way.
pub fn set_at_path(values: &mut Value, path: &str, text: &str) -> Result<(), String> {
    set(values, path, typed(text))
}

/// Sets `text`, as a string whatever it looks like, at `path` (Helm's `--set-string`).
pub fn set_string_at_path(values: &mut Value, path: &str, text: &str) -> Result<(), String> {
    set(values, path, Value::String(text.to_string()))
}

fn set(values: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let steps = steps(path)?;
    let mut current = values;
    for step in &steps {
        current = match step {
            Step::Key(key) => {
                if !current.is_object() {
                    *current = Value::Object(Map::new());
                }
                current.as_object_mut().expect("made a map").entry(key.clone()).or_insert(Value::Null)
            }
            Step::Index(index) => {
                if !current.is_array() {
                    *current = Value::Array(Vec::new());
                }
                let list = current.as_array_mut().expect("made a list");
                if list.len() <= *index {
                    list.resize(index + 1, Value::Null);
                }
                &mut list[*index]
            }
        };
    }
    *current = value;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_merge_map_by_map_and_anything_else_replaces() {
        let mut base = json!({"a": {"b": 1, "c": 2}, "list": [1, 2]});
        merge(&mut base, json!({"a": {"c": 3, "d": 4}, "list": [3]}));
        assert_eq!(base, json!({"a": {"b": 1, "c": 3, "d": 4}, "list": [3]}));
    }

    #[test]
    fn target_paths_set_typed_values_as_helm_reads_them() {
        let mut values = json!({"a": {"keep": 1}});
        set_at_path(&mut values, "a.b.c", "42").unwrap();
        set_at_path(&mut values, "a.quoted", "\"42\"").unwrap();
        set_at_path(&mut values, "flag", "TRUE").unwrap();
        set_at_path(&mut values, "zip", "0755").unwrap();
        set_at_path(&mut values, "dotted\\.key", "x").unwrap();
        set_at_path(&mut values, "list[1].name", "second").unwrap();
        set_at_path(&mut values, "text", "a,b: c").unwrap();
        assert_eq!(
            values,
            json!({"a": {"keep": 1, "b": {"c": 42}, "quoted": "42"}, "flag": true, "zip": "0755",
                   "dotted.key": "x", "list": [null, {"name": "second"}], "text": "a,b: c"})
        );
        let deep = vec!["a"; 31].join(".");
        for bad in ["", "a..b", "a[x]", "a[1001]", "a[99999999]", deep.as_str()] {
            assert!(set_at_path(&mut json!({}), bad, "1").is_err(), "{bad}");
        }
    }
}
