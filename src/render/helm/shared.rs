//! Values as Go holds them while helm-controller and Helm build them: maps and lists are shared
//! by reference, so a write through one holder shows through every other. fluxcd/pkg's
//! `chartutil.MergeMaps` copies only the top map and puts the other side's maps and lists in by
//! reference, and Helm's strvals parser writes into the maps and lists it finds in place; the
//! order `spec.values` and `targetPath`s are applied in is only reproduced with that sharing.

use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// A Go `map[string]interface{}`: one map, however many hold it.
pub type SharedMap = Rc<RefCell<BTreeMap<String, Node>>>;
/// A Go `[]interface{}` that is never appended to: a fixed backing array, shared until a
/// longer one replaces it.
pub type SharedList = Rc<RefCell<Vec<Node>>>;

/// One Go value.
#[derive(Debug, Clone)]
pub enum Node {
    /// `nil`, a bool, a number or a string (never an object or array). A number here is Go's
    /// `float64`: what decoding JSON or YAML into `interface{}` gives.
    Scalar(Value),
    /// An `int64`, which only Helm's strvals parser makes (`--set`, a `targetPath`).
    Int(i64),
    Map(SharedMap),
    List(SharedList),
}

impl Node {
    pub fn null() -> Node {
        Node::Scalar(Value::Null)
    }

    pub fn string(text: impl Into<String>) -> Node {
        Node::Scalar(Value::String(text.into()))
    }

    /// A fresh Go value holding `value` (nothing shared).
    pub fn from_json(value: &Value) -> Node {
        match value {
            Value::Object(map) => {
                Node::Map(new_map(map.iter().map(|(k, v)| (k.clone(), Node::from_json(v)))))
            }
            Value::Array(items) => {
                Node::List(Rc::new(RefCell::new(items.iter().map(Node::from_json).collect())))
            }
            scalar => Node::Scalar(scalar.clone()),
        }
    }

    /// What the value holds now, as JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Node::Scalar(value) => value.clone(),
            Node::Int(int) => Value::from(*int),
            Node::Map(map) => map_to_json(map),
            Node::List(list) => Value::Array(list.borrow().iter().map(Node::to_json).collect()),
        }
    }

    /// Go's name of the value's type, for the messages of a failed type assertion.
    pub fn go_type(&self) -> &'static str {
        match self {
            Node::Scalar(Value::Null) => "nil",
            Node::Scalar(Value::Bool(_)) => "bool",
            Node::Scalar(Value::Number(_)) => "float64",
            Node::Int(_) => "int64",
            Node::Scalar(_) => "string",
            Node::Map(_) => "map[string]interface {}",
            Node::List(_) => "[]interface {}",
        }
    }
}

/// A new map holding `entries`.
pub fn new_map(entries: impl IntoIterator<Item = (String, Node)>) -> SharedMap {
    Rc::new(RefCell::new(entries.into_iter().collect()))
}

/// A map's content as a JSON object.
pub fn map_to_json(map: &SharedMap) -> Value {
    Value::Object(map.borrow().iter().map(|(k, v)| (k.clone(), v.to_json())).collect::<Map<_, _>>())
}

/// The `--set PATH=N` assignments that give back, after `--values`, every `int64` of `map`:
/// `helm template` reads its values file as Go's JSON decoder does (every number a `float64`),
/// while the controller's values hold the `int64`s its strvals parser made, which a template
/// can tell apart (`kindIs "int64"`, `printf "%d"`). Keys are escaped for strvals (`\` before
/// `. , [ ] = { } \`); a key strvals cannot write (empty) is left out, as it never holds one.
pub fn int64_assignments(map: &SharedMap) -> Vec<String> {
    fn escaped(key: &str) -> String {
        let mut out = String::with_capacity(key.len());
        for c in key.chars() {
            if matches!(c, '.' | ',' | '[' | ']' | '=' | '{' | '}' | '\\') {
                out.push('\\');
            }
            out.push(c);
        }
        out
    }
    fn walk(node: &Node, path: &str, out: &mut Vec<String>) {
        match node {
            Node::Int(int) => out.push(format!("{path}={int}")),
            Node::Map(map) => {
                for (key, value) in map.borrow().iter().filter(|(key, _)| !key.is_empty()) {
                    let key = escaped(key);
                    let path = if path.is_empty() { key } else { format!("{path}.{key}") };
                    walk(value, &path, out);
                }
            }
            // A list is only reached under a key (strvals never indexes the top map).
            Node::List(list) if !path.is_empty() => {
                for (index, value) in list.borrow().iter().enumerate() {
                    walk(value, &format!("{path}[{index}]"), out);
                }
            }
            Node::List(_) | Node::Scalar(_) => {}
        }
    }
    let mut out = Vec::new();
    walk(&Node::Map(map.clone()), "", &mut out);
    out
}

/// fluxcd/pkg `chartutil.MergeMaps` (and Helm's `loader.MergeMaps`): a new map with `a`'s
/// entries, then `b`'s over them; where both hold a map under one key, a new merged map; every
/// other value of `b` (maps, lists) goes in by reference.
pub fn merge_maps(a: &SharedMap, b: &SharedMap) -> SharedMap {
    let mut out = a.borrow().clone();
    for (key, value) in b.borrow().iter() {
        if let (Node::Map(over), Some(Node::Map(under))) = (value, out.get(key)) {
            let merged = merge_maps(under, over);
            out.insert(key.clone(), Node::Map(merged));
            continue;
        }
        out.insert(key.clone(), value.clone());
    }
    Rc::new(RefCell::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merged_maps_share_what_only_one_side_holds() {
        let a = new_map([]);
        let b = match Node::from_json(&json!({"inner": {"x": 1}, "list": [1]})) {
            Node::Map(map) => map,
            _ => unreachable!(),
        };
        let merged = merge_maps(&a, &b);
        // A write into the merged map's inner map is a write into b's.
        if let Some(Node::Map(inner)) = merged.borrow().get("inner") {
            inner.borrow_mut().insert("y".into(), Node::string("shared"));
        }
        assert_eq!(map_to_json(&b), json!({"inner": {"x": 1, "y": "shared"}, "list": [1]}));
        // Maps both sides hold are merged into a new one: b's stays as it was.
        let both = match Node::from_json(&json!({"inner": {"z": 2}})) {
            Node::Map(map) => map,
            _ => unreachable!(),
        };
        let again = merge_maps(&merged, &both);
        assert_eq!(map_to_json(&again), json!({"inner": {"x": 1, "y": "shared", "z": 2}, "list": [1]}));
        assert_eq!(map_to_json(&b), json!({"inner": {"x": 1, "y": "shared"}, "list": [1]}));
    }
}
