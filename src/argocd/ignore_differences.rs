//! `spec.ignoreDifferences`: fields Argo CD leaves out when it compares live and desired state.

use crate::flux::ObjectId;
use serde_json::Value;

/// The fields of `id` that `rules` ignore, as JSON pointers, and the expressions that could not
/// be read as one (jq beyond plain paths, managed-fields managers).
pub fn ignored_fields(rules: &[Value], id: &ObjectId) -> (Vec<String>, Vec<String>) {
    let mut pointers = Vec::new();
    let mut unsupported = Vec::new();
    for rule in rules.iter().filter(|rule| applies(rule, id)) {
        let strings = |key: &str| rule[key].as_array().into_iter().flatten().filter_map(Value::as_str);
        pointers.extend(strings("jsonPointers").map(str::to_string));
        for expression in strings("jqPathExpressions") {
            match jq_path_as_pointer(expression) {
                Some(pointer) => pointers.push(pointer),
                None => unsupported.push(format!("jqPathExpressions {expression}")),
            }
        }
        unsupported.extend(strings("managedFieldsManagers").map(|m| format!("managedFieldsManagers {m}")));
    }
    (pointers, unsupported)
}

fn applies(rule: &Value, id: &ObjectId) -> bool {
    let matches = |key: &str, actual: &str| rule[key].as_str().is_none_or(|wanted| wanted == actual);
    rule["kind"].as_str() == Some(id.kind.as_str())
        && rule["group"].as_str().unwrap_or("") == id.group
        && matches("name", &id.name)
        && matches("namespace", &id.namespace)
}

/// `.spec.replicas` or `.metadata.annotations["a/b"]` as `/spec/replicas`; `None` for anything
/// jq would have to evaluate.
fn jq_path_as_pointer(expression: &str) -> Option<String> {
    let mut rest = expression.trim().strip_prefix('.')?;
    let mut pointer = String::new();
    while !rest.is_empty() {
        let segment;
        if let Some(quoted) = rest.strip_prefix("[\"") {
            let end = quoted.find("\"]")?;
            segment = &quoted[..end];
            rest = &quoted[end + 2..];
        } else {
            let rest_after_dot = rest.strip_prefix('.').unwrap_or(rest);
            let end = rest_after_dot.find(['.', '[']).unwrap_or(rest_after_dot.len());
            segment = &rest_after_dot[..end];
            if segment.is_empty() || !segment.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-') {
                return None;
            }
            rest = &rest_after_dot[end..];
        }
        pointer.push('/');
        pointer.push_str(&segment.replace('~', "~0").replace('/', "~1"));
    }
    (!pointer.is_empty()).then_some(pointer)
}

/// `object` without the fields at `pointers` (borrowed when there are none).
pub fn without<'a>(object: &'a Value, pointers: &[String]) -> std::borrow::Cow<'a, Value> {
    if pointers.is_empty() {
        return std::borrow::Cow::Borrowed(object);
    }
    let mut object = object.clone();
    for pointer in pointers {
        let Some((parent, last)) = pointer.rsplit_once('/') else { continue };
        let key = last.replace("~1", "/").replace("~0", "~");
        match object.pointer_mut(parent) {
            Some(Value::Object(map)) => {
                map.remove(&key);
            }
            Some(Value::Array(items)) => {
                if let Ok(index) = key.parse::<usize>() {
                    if index < items.len() {
                        items.remove(index);
                    }
                }
            }
            _ => {}
        }
    }
    std::borrow::Cow::Owned(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_that_match_the_object_give_its_ignored_fields() {
        let rules = vec![
            json!({"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"],
                   "jqPathExpressions": [".metadata.annotations[\"deploy/at\"]", ".spec.template.spec.containers[] | select(.name == \"x\")"],
                   "managedFieldsManagers": ["kube-controller-manager"]}),
            json!({"group": "apps", "kind": "Deployment", "name": "other", "jsonPointers": ["/spec/paused"]}),
            json!({"kind": "ConfigMap", "jsonPointers": ["/data"]}),
        ];
        let id = ObjectId::new("web", "web", "apps", "Deployment");
        let (pointers, unsupported) = ignored_fields(&rules, &id);
        assert_eq!(pointers, ["/spec/replicas", "/metadata/annotations/deploy~1at"]);
        assert_eq!(unsupported.len(), 2);
        let (pointers, _) = ignored_fields(&rules, &ObjectId::new("web", "c", "", "ConfigMap"));
        assert_eq!(pointers, ["/data"]);

        let object = json!({"metadata": {"annotations": {"deploy/at": "now", "keep": "x"}}, "spec": {"replicas": 3, "paused": false}});
        let stripped =
            without(&object, &["/spec/replicas".into(), "/metadata/annotations/deploy~1at".into()]);
        assert_eq!(*stripped, json!({"metadata": {"annotations": {"keep": "x"}}, "spec": {"paused": false}}));
        assert!(matches!(without(&object, &[]), std::borrow::Cow::Borrowed(o) if *o == object));
    }
}
