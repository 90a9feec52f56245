//! Kubernetes `metav1.LabelSelector` (`matchLabels` and `matchExpressions`), evaluated against a
//! set of labels as the API machinery does.

use serde_json::Value;
use std::collections::BTreeMap;

pub type Labels = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed selector; the empty selector has no requirements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a selector; invalid ones (unknown operator, `In` without values, `Exists` with
    /// values, non-string values) are refused as the API server refuses them.
    pub fn parse(selector: &Value) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if selector.is_null() {
            return Ok(LabelSelector { requirements });
        }
        if !selector.is_object() {
            return Err("the selector is not a mapping".into());
        }
        match &selector["matchLabels"] {
            Value::Null => {}
            Value::Object(labels) => {
                for (key, value) in labels {
                    let value = value.as_str().ok_or_else(|| format!("matchLabels.{key} is not a string"))?;
                    requirements.push(Requirement::Equals(key.clone(), value.to_string()));
                }
            }
            _ => return Err("matchLabels is not a mapping".into()),
        }
        match &selector["matchExpressions"] {
            Value::Null => {}
            Value::Array(expressions) => {
                for expression in expressions {
                    requirements.push(expression_requirement(expression)?);
                }
            }
            _ => return Err("matchExpressions is not a list".into()),
        }
        Ok(LabelSelector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// True when every requirement holds (the empty selector matches everything).
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(key, value) => labels.get(key) == Some(value),
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => !labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::Exists(key) => labels.contains_key(key),
            Requirement::DoesNotExist(key) => !labels.contains_key(key),
        })
    }
}

fn expression_requirement(expression: &Value) -> Result<Requirement, String> {
    let key = expression["key"].as_str().filter(|k| !k.is_empty()).ok_or("an expression has no key")?;
    let operator = expression["operator"].as_str().unwrap_or("");
    let values: Vec<String> = match &expression["values"] {
        Value::Null => Vec::new(),
        Value::Array(values) => values
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| format!("a value for {key} is not a string"))
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(format!("the values for {key} are not a list")),
    };
    let key = key.to_string();
    match (operator, values.is_empty()) {
        ("In", false) => Ok(Requirement::In(key, values)),
        ("NotIn", false) => Ok(Requirement::NotIn(key, values)),
        ("Exists", true) => Ok(Requirement::Exists(key)),
        ("DoesNotExist", true) => Ok(Requirement::DoesNotExist(key)),
        ("In" | "NotIn", true) => Err(format!("operator {operator} on {key} needs values")),
        ("Exists" | "DoesNotExist", false) => Err(format!("operator {operator} on {key} takes no values")),
        _ => Err(format!("{key}: unknown operator (In, NotIn, Exists or DoesNotExist expected)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn match_labels_need_every_pair() {
        let selector = LabelSelector::parse(&json!({"matchLabels": {"team": "a", "env": "prod"}})).unwrap();
        assert!(selector.matches(&labels(&[("team", "a"), ("env", "prod"), ("x", "y")])));
        assert!(!selector.matches(&labels(&[("team", "a")])));
        assert!(!selector.matches(&labels(&[("team", "b"), ("env", "prod")])));
    }

    #[test]
    fn expressions_follow_kubernetes_semantics() {
        let parse = |e: Value| LabelSelector::parse(&json!({"matchExpressions": [e]})).unwrap();
        let in_ = parse(json!({"key": "env", "operator": "In", "values": ["prod", "staging"]}));
        assert!(in_.matches(&labels(&[("env", "staging")])));
        assert!(!in_.matches(&labels(&[("env", "dev")])));
        assert!(!in_.matches(&labels(&[])));
        let not_in = parse(json!({"key": "env", "operator": "NotIn", "values": ["prod"]}));
        assert!(not_in.matches(&labels(&[("env", "dev")])));
        assert!(not_in.matches(&labels(&[])), "NotIn matches a missing label");
        assert!(!not_in.matches(&labels(&[("env", "prod")])));
        let exists = parse(json!({"key": "team", "operator": "Exists"}));
        assert!(exists.matches(&labels(&[("team", "")])));
        assert!(!exists.matches(&labels(&[])));
        let absent = parse(json!({"key": "team", "operator": "DoesNotExist"}));
        assert!(absent.matches(&labels(&[])));
        assert!(!absent.matches(&labels(&[("team", "a")])));
    }

    #[test]
    fn invalid_selectors_are_refused() {
        for bad in [
            json!({"matchExpressions": [{"key": "a", "operator": "in", "values": ["x"]}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            json!({"matchExpressions": [{"operator": "Exists"}]}),
            json!({"matchLabels": {"a": 1}}),
            json!({"matchLabels": ["a"]}),
            json!("team=a"),
        ] {
            assert!(LabelSelector::parse(&bad).is_err(), "{bad}");
        }
        assert!(LabelSelector::parse(&json!({})).unwrap().is_empty());
        assert!(LabelSelector::parse(&Value::Null).unwrap().matches(&labels(&[])));
    }
}
