//! Reading fields of manifests as the API server compares them: a missing field and an empty one
//! are the same, numbers are numbers whatever their spelling, and a live object holds more than
//! the manifest sets (defaults, fields other managers own) without that being a change.

use serde_json::Value;

/// The value at `path` (object keys), `None` when it is missing or null.
pub fn at<'v>(value: &'v Value, path: &[&str]) -> Option<&'v Value> {
    let mut current = value;
    for key in path {
        // A number steps into a list (`ipFamilies.0`).
        current = match current {
            Value::Array(items) => items.get(key.parse::<usize>().ok()?)?,
            _ => current.get(*key)?,
        };
    }
    (!current.is_null()).then_some(current)
}

/// Null, `{}`, `[]` and `""`: what a manifest may as well leave out.
pub fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::String(text) => text.is_empty(),
        _ => false,
    }
}

/// True when two fields read the same: missing and empty alike, numbers by value, objects
/// without their empty members.
pub fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a.filter(|v| !is_empty(v)), b.filter(|v| !is_empty(v))) {
        (None, None) => true,
        (Some(a), Some(b)) => equal(a, b),
        _ => false,
    }
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys = x.keys().chain(y.keys());
            keys.into_iter().all(|k| same(x.get(k), y.get(k)))
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b)),
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// True when `live` holds everything `desired` sets, as applying `desired` would leave it:
/// objects may hold more keys (defaults, other managers' fields), lists item by item.
pub fn within(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(want), Value::Object(have)) => want.iter().all(|(key, value)| match have.get(key) {
            Some(found) => within(value, found),
            None => is_empty(value),
        }),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| within(w, h))
        }
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => desired == live,
    }
}

/// A value on one line for a message, in YAML's flow style (`{matchLabels: {app: web}}`), cut
/// at 120 characters.
pub fn brief(value: &Value) -> String {
    let text = flow(value).replace(['\n', '\r'], " ");
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn flow(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(flow).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => {
            let members: Vec<String> = map.iter().map(|(k, v)| format!("{k}: {}", flow(v))).collect();
            format!("{{{}}}", members.join(", "))
        }
        other => other.to_string(),
    }
}

/// `spec.selector`, as messages name a field.
pub fn dotted(path: &[&str]) -> String {
    path.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_and_empty_fields_read_the_same() {
        let object = json!({"spec": {"a": {}, "b": null, "c": 1}});
        assert_eq!(at(&object, &["spec", "b"]), None);
        assert!(same(at(&object, &["spec", "a"]), None));
        assert!(same(Some(&json!(1)), Some(&json!(1.0))));
        assert!(!same(Some(&json!({"app": "a"})), Some(&json!({"app": "b"}))));
        assert!(same(Some(&json!({"x": {}, "y": 2})), Some(&json!({"y": 2}))));
    }

    #[test]
    fn a_live_object_may_hold_more_than_the_manifest() {
        let live = json!({"matchLabels": {"app": "web"}, "extra": true});
        assert!(within(&json!({"matchLabels": {"app": "web"}}), &live));
        assert!(!within(&json!({"matchLabels": {"app": "web2"}}), &live));
        assert!(!within(&json!([1, 2]), &json!([1])));
        assert!(within(&json!({"empty": {}}), &json!({})));
    }

    #[test]
    fn brief_values_stay_on_one_line() {
        assert_eq!(brief(&json!("a\nb")), "a b");
        assert_eq!(
            brief(&json!({"matchLabels": {"app": "web"}, "n": [1, "a"]})),
            "{matchLabels: {app: web}, n: [1, a]}"
        );
        assert!(brief(&json!("x".repeat(200))).ends_with('…'));
    }
}
