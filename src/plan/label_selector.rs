//! Kubernetes `metav1.LabelSelector` (`matchLabels` and `matchExpressions`), evaluated against a
//! set of labels by kube's `Selector`, with the API server's validation on top (kube accepts an
//! `In` without values and an `Exists` with some; the API server refuses both).

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube::core::{Selector, SelectorExt};
use serde_json::Value;
use std::collections::BTreeMap;

pub type Labels = BTreeMap<String, String>;

/// A parsed selector; the empty selector has no requirements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    selector: Selector,
    empty: bool,
}

impl LabelSelector {
    /// Parses a selector; invalid ones (unknown operator, `In` without values, `Exists` with
    /// values, non-string values) are refused as the API server refuses them.
    pub fn parse(selector: &Value) -> Result<Self, String> {
        if selector.is_null() {
            return Ok(LabelSelector { selector: Selector::default(), empty: true });
        }
        let parsed: meta::LabelSelector =
            serde_json::from_value(selector.clone()).map_err(|e| format!("not a label selector: {e}"))?;
        for expression in parsed.match_expressions.iter().flatten() {
            validate(expression)?;
        }
        let empty = parsed.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && parsed.match_expressions.as_ref().is_none_or(Vec::is_empty);
        let selector = Selector::try_from(parsed).map_err(|e| e.0)?;
        Ok(LabelSelector { selector, empty })
    }

    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// True when every requirement holds (the empty selector matches everything).
    pub fn matches(&self, labels: &Labels) -> bool {
        self.selector.matches(labels)
    }
}

/// What the API server refuses and kube's conversion lets through.
fn validate(expression: &meta::LabelSelectorRequirement) -> Result<(), String> {
    let key = &expression.key;
    if key.is_empty() {
        return Err("an expression has no key".into());
    }
    let operator = expression.operator.as_str();
    let has_values = expression.values.as_ref().is_some_and(|v| !v.is_empty());
    match (operator, has_values) {
        ("In" | "NotIn", true) | ("Exists" | "DoesNotExist", false) => Ok(()),
        ("In" | "NotIn", false) => Err(format!("operator {operator} on {key} needs values")),
        ("Exists" | "DoesNotExist", true) => Err(format!("operator {operator} on {key} takes no values")),
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
