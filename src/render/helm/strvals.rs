//! Helm's `--set` syntax (`pkg/strvals/parser.go`), as helm-controller applies a `targetPath`
//! (fluxcd/pkg `chartutil.ReplacePathValue` → `strvals.ParseInto("PATH=VALUE")`) and as Helm
//! applies Argo CD's `--set`/`--set-string`/`--set-file`: `,` separates assignments, `.` nests
//! maps, `[i]` indexes lists (nested too), `{a,b}` is a list, `\` makes the next character plain,
//! and values are typed (`true`, `false`, `null`, integers without a leading zero) unless the
//! string form is asked for. Written from the Go source, decision for decision: what it
//! silently ignores, ignores here; what fails there, fails here; it writes into the maps and
//! lists it finds, shared or not (`shared.rs`).
//!
//! Beyond Helm, bounds against a hostile text: Go's stack grows to a gigabyte and a list index
//! allocates up to 65,537 entries per assignment; here nesting and the entries allocated by one
//! build are bounded, with a message that names the bound.

use super::shared::{new_map, Node, SharedList, SharedMap};
use serde_json::Value;
use std::rc::Rc;

/// Helm's `MaxIndex`: the largest list index an assignment may name.
pub const MAX_INDEX: i64 = 65_536;
/// Helm's `MaxNestedNameLevel`: how many `.` one name may nest.
pub const MAX_NESTED_NAME_LEVEL: usize = 30;
/// fluxplan's bound on maps and lists nested by one assignment (Helm has none for `[0][0]…` and
/// `[0].a[0].b…`, which only its growable stack bounds).
pub const MAX_DEPTH: usize = 100;
/// fluxplan's bound on the list entries one build may allocate (each `[65536]` allocates 65,537).
pub const MAX_LIST_ENTRIES: usize = 2_000_000;

/// The Helm whose parser is ported: v4 stops silently at an unfinished index (`a[1`) where v3
/// fails (v4 unwraps the end-of-input error its message wraps, v3 compares it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    V3,
    V4,
}

impl Dialect {
    /// The dialect of a Helm major version (4 when unknown: today's controllers).
    pub fn of_major(major: Option<u8>) -> Dialect {
        if major == Some(3) {
            Dialect::V3
        } else {
            Dialect::V4
        }
    }
}

/// How a value's characters become a value.
pub enum Reader<'a> {
    /// `--set` (`ParseInto`): typed.
    Typed,
    /// `--set-string` (`ParseIntoString`): always a string.
    String,
    /// Every value replaced by `mask`: the keys and lists the text names, none of its values.
    Masked(&'a str),
    /// `--set-file`: the value names a file, whose content is the string.
    File(&'a dyn Fn(&str) -> Result<String, String>),
}

/// A parse that failed, with Helm's message (or fluxplan's, for its own bounds).
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a step stopped: the end of the text (what ends a parse without error), or an error —
/// which may wrap the end of the text (only Helm v4 sees through the wrap).
#[derive(Debug)]
enum Stop {
    End,
    Error { message: String, wraps_end: bool },
}

fn error(message: impl Into<String>) -> Stop {
    Stop::Error { message: message.into(), wraps_end: false }
}

/// `fmt.Errorf("error parsing index: %w", err)`.
fn wrap_index(stop: Stop) -> Stop {
    match stop {
        Stop::End => Stop::Error { message: "error parsing index: EOF".into(), wraps_end: true },
        Stop::Error { message, wraps_end } => {
            Stop::Error { message: format!("error parsing index: {message}"), wraps_end }
        }
    }
}

/// A panic of a Go type assertion, as `key`'s recover reports it.
fn conversion(found: &Node, wanted: &str) -> Stop {
    error(format!(
        "unable to parse key: interface conversion: interface {{}} is {}, not {wanted}",
        found.go_type()
    ))
}

const MAP: &str = "map[string]interface {}";
const LIST: &str = "[]interface {}";

/// Counts what a build allocates, across every parse it makes.
#[derive(Debug, Default)]
pub struct Budget {
    list_entries: usize,
}

/// Parses `text` (`name=value,name2=value2`) into `dest`, as Helm does.
pub fn parse_into(
    text: &str,
    dest: &SharedMap,
    reader: &Reader,
    dialect: Dialect,
    budget: &mut Budget,
) -> Result<(), ParseError> {
    let mut parser = Parser { chars: text.chars().collect(), at: 0, reader, budget };
    loop {
        match parser.key(dest, 0, 0) {
            Ok(()) => continue,
            Err(Stop::End) => return Ok(()),
            Err(Stop::Error { wraps_end: true, .. }) if dialect == Dialect::V4 => return Ok(()),
            Err(Stop::Error { message, .. }) => return Err(ParseError(message)),
        }
    }
}

struct Parser<'a, 'r> {
    chars: Vec<char>,
    at: usize,
    reader: &'a Reader<'r>,
    budget: &'a mut Budget,
}

/// What `runesUntil` stopped at.
enum Until {
    Char(char),
    End,
}

impl Parser<'_, '_> {
    fn next(&mut self) -> Option<char> {
        let c = self.chars.get(self.at).copied();
        if c.is_some() {
            self.at += 1;
        }
        c
    }

    fn unread(&mut self) {
        self.at -= 1;
    }

    /// `runesUntil`: the characters up to one of `stop` (consumed), `\` taking the next one as is.
    fn until(&mut self, stop: &[char]) -> (String, Until) {
        let mut text = String::new();
        loop {
            match self.next() {
                None => return (text, Until::End),
                Some(c) if stop.contains(&c) => return (text, Until::Char(c)),
                Some('\\') => match self.next() {
                    None => return (text, Until::End),
                    Some(next) => text.push(next),
                },
                Some(c) => text.push(c),
            }
        }
    }

    fn read(&self, text: &str) -> Result<Node, Stop> {
        match self.reader {
            Reader::Typed => Ok(typed(text)),
            Reader::String => Ok(Node::string(text)),
            // `null` too: whether a Secret's value is set is not the plan's to tell.
            Reader::Masked(mask) => Ok(Node::string(*mask)),
            Reader::File(read) => read(text).map(Node::string).map_err(error),
        }
    }

    fn key(&mut self, data: &SharedMap, name_level: usize, depth: usize) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(error(format!("values nested deeper than fluxplan's bound of {MAX_DEPTH} levels")));
        }
        let (key, last) = self.until(&['=', '[', ',', '.']);
        match last {
            Until::End if key.is_empty() => Err(Stop::End),
            Until::End => Err(error(format!("key {key:?} has no value"))),
            Until::Char('[') => {
                let index = self.key_index().map_err(wrap_index)?;
                let list = match data.borrow().get(&key) {
                    None => empty_list(),
                    Some(Node::List(list)) => list.clone(),
                    Some(other) => return Err(conversion(other, LIST)),
                };
                let (list, result) = self.list_item(list, index, name_level, depth + 1);
                set(data, &key, Node::List(list));
                result
            }
            Until::Char('=') => match self.value_list() {
                Ok(list) => {
                    set(data, &key, Node::List(list));
                    Ok(())
                }
                Err(ListStop::End) => {
                    set(data, &key, Node::string(""));
                    Err(Stop::End)
                }
                Err(ListStop::NotList) => {
                    let (text, _) = self.until(&[',']);
                    let value = self.read(&text)?;
                    set(data, &key, value);
                    Ok(())
                }
                Err(ListStop::Failed(stop)) => Err(stop),
            },
            Until::Char(',') => {
                set(data, &key, Node::string(""));
                Err(error(format!("key {key:?} has no value (cannot end with ,)")))
            }
            Until::Char(_) => {
                // '.'
                let name_level = name_level + 1;
                if name_level > MAX_NESTED_NAME_LEVEL {
                    return Err(error(format!(
                        "value name nested level is greater than maximum supported nested level of \
                         {MAX_NESTED_NAME_LEVEL}"
                    )));
                }
                let inner = match data.borrow().get(&key) {
                    None => new_map([]),
                    Some(Node::Map(map)) => map.clone(),
                    Some(other) => return Err(conversion(other, MAP)),
                };
                let result = self.key(&inner, name_level, depth + 1);
                let empty = inner.borrow().is_empty();
                if result.is_ok() && empty {
                    return Err(error(format!("key map {key:?} has no value")));
                }
                if !empty {
                    set(data, &key, Node::Map(inner));
                }
                result
            }
        }
    }

    /// `keyIndex`: the index up to `]`, read as Go's `strconv.Atoi`.
    fn key_index(&mut self) -> Result<i64, Stop> {
        match self.until(&[']']) {
            (_, Until::End) => Err(Stop::End),
            (text, Until::Char(_)) => atoi(&text).map_err(error),
        }
    }

    /// `listItem`: what follows `[i]`, set at index `i` of `list`; the list to keep (a longer
    /// copy when it grew) and how the step ended.
    fn list_item(
        &mut self,
        list: SharedList,
        index: i64,
        name_level: usize,
        depth: usize,
    ) -> (SharedList, Result<(), Stop>) {
        if depth > MAX_DEPTH {
            return (
                list,
                Err(error(format!("values nested deeper than fluxplan's bound of {MAX_DEPTH} levels"))),
            );
        }
        if index < 0 {
            return (list, Err(error(format!("negative {index} index not allowed"))));
        }
        let (rest, last) = self.until(&['[', '.', '=']);
        if !rest.is_empty() {
            return (list, Err(error(format!("unexpected data at end of array index: {rest:?}"))));
        }
        match last {
            Until::End => (list, Err(Stop::End)),
            Until::Char('=') => match self.value_list() {
                Ok(items) => self.set_index(list, index, Node::List(items)),
                Err(ListStop::End) => self.set_index(list, index, Node::string("")),
                Err(ListStop::NotList) => {
                    let (text, _) = self.until(&[',']);
                    match self.read(&text) {
                        Ok(value) => self.set_index(list, index, value),
                        Err(stop) => (list, Err(stop)),
                    }
                }
                Err(ListStop::Failed(stop)) => (list, Err(stop)),
            },
            Until::Char('[') => {
                let next = match self.key_index() {
                    Ok(next) => next,
                    Err(stop) => return (list, Err(wrap_index(stop))),
                };
                let existing = usize::try_from(index).ok().and_then(|i| list.borrow().get(i).cloned());
                let current = match existing {
                    None | Some(Node::Scalar(Value::Null)) => empty_list(),
                    Some(Node::List(inner)) => inner,
                    Some(other) => return (list, Err(conversion(&other, LIST))),
                };
                let (inner, result) = self.list_item(current, next, name_level, depth + 1);
                if let Err(stop) = result {
                    return (list, Err(stop));
                }
                self.set_index(list, index, Node::List(inner))
            }
            Until::Char(_) => {
                // '.': a map at the index (one written in place when the index held something else).
                let inner = match usize::try_from(index).ok().filter(|i| *i < list.borrow().len()) {
                    None => new_map([]),
                    Some(i) => {
                        let existing = list.borrow()[i].clone();
                        match existing {
                            Node::Map(map) => map,
                            _ => {
                                let map = new_map([]);
                                list.borrow_mut()[i] = Node::Map(map.clone());
                                map
                            }
                        }
                    }
                };
                if let Err(stop) = self.key(&inner, name_level, depth + 1) {
                    return (list, Err(stop));
                }
                self.set_index(list, index, Node::Map(inner))
            }
        }
    }

    /// `setIndex`: `value` at `index`, in place when the list is long enough, else in a longer
    /// copy.
    fn set_index(&mut self, list: SharedList, index: i64, value: Node) -> (SharedList, Result<(), Stop>) {
        if index < 0 {
            return (list, Err(error(format!("negative {index} index not allowed"))));
        }
        if index > MAX_INDEX {
            return (
                list,
                Err(error(format!(
                    "index of {index} is greater than maximum supported index of {MAX_INDEX}"
                ))),
            );
        }
        let index = index as usize;
        let len = list.borrow().len();
        let list = if len <= index {
            self.budget.list_entries += index + 1;
            if self.budget.list_entries > MAX_LIST_ENTRIES {
                return (
                    list,
                    Err(error(format!(
                        "list indexes allocate more than fluxplan's bound of {MAX_LIST_ENTRIES} entries"
                    ))),
                );
            }
            let mut longer = list.borrow().clone();
            longer.resize(index + 1, Node::null());
            Rc::new(std::cell::RefCell::new(longer))
        } else {
            list
        };
        list.borrow_mut()[index] = value;
        (list, Ok(()))
    }

    /// `valList`: `{a,b}` as a list, each item read as a value.
    fn value_list(&mut self) -> Result<SharedList, ListStop> {
        match self.next() {
            None => return Err(ListStop::End),
            Some('{') => {}
            Some(_) => {
                self.unread();
                return Err(ListStop::NotList);
            }
        }
        let mut items = Vec::new();
        loop {
            match self.until(&[',', '}']) {
                (_, Until::End) => return Err(ListStop::Failed(error("list must terminate with '}'"))),
                (text, Until::Char('}')) => {
                    // A ',' after the list is consumed with it.
                    if let Some(c) = self.next() {
                        if c != ',' {
                            self.unread();
                        }
                    }
                    items.push(self.read(&text).map_err(ListStop::Failed)?);
                    return Ok(Rc::new(std::cell::RefCell::new(items)));
                }
                (text, Until::Char(_)) => items.push(self.read(&text).map_err(ListStop::Failed)?),
            }
        }
    }
}

/// Why `valList` gave no list.
enum ListStop {
    End,
    NotList,
    Failed(Stop),
}

fn empty_list() -> SharedList {
    Rc::new(std::cell::RefCell::new(Vec::new()))
}

/// Go's `set`: an empty key is never set.
fn set(data: &SharedMap, key: &str, value: Node) {
    if !key.is_empty() {
        data.borrow_mut().insert(key.to_string(), value);
    }
}

/// `typedVal`: `true`, `false` and `null` in any case (Go's `EqualFold`), `0`, and integers in
/// int64 that do not start with `0`; anything else is the string.
pub fn typed(text: &str) -> Node {
    if equal_fold(text, "true") {
        return Node::Scalar(Value::Bool(true));
    }
    if equal_fold(text, "false") {
        return Node::Scalar(Value::Bool(false));
    }
    if equal_fold(text, "null") {
        return Node::null();
    }
    if text == "0" {
        return Node::Int(0);
    }
    if !text.is_empty() && !text.starts_with('0') {
        if let Some(int) = parse_int(text) {
            return Node::Int(int);
        }
    }
    Node::string(text)
}

/// Go's `strings.EqualFold` against an ASCII word: case-insensitive, and `ſ` (U+017F) folds
/// to `s` as Unicode simple folding has it.
fn equal_fold(text: &str, word: &str) -> bool {
    let mut chars = text.chars();
    for expected in word.chars() {
        match chars.next() {
            Some(c) if c.to_ascii_lowercase() == expected => {}
            Some('\u{17f}') if expected == 's' => {}
            _ => return false,
        }
    }
    chars.next().is_none()
}

/// Go's `strconv.ParseInt(text, 10, 64)`: an optional sign, then decimal digits only.
fn parse_int(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Rust's parser accepts the same form (a sign, decimal digits), and fails on overflow as Go does.
    text.parse::<i64>().ok()
}

/// Go's `strconv.Atoi`, with its messages.
fn atoi(text: &str) -> Result<i64, String> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {text:?}: invalid syntax"));
    }
    text.parse::<i64>().map_err(|_| format!("strconv.Atoi: parsing {text:?}: value out of range"))
}

/// fluxcd/pkg `chartutil.ReplacePathValue`: `PATH=VALUE` parsed into `values`; a value that
/// starts and ends with a quote (`'` or `"`) loses every quote at both ends and is parsed as
/// strings (commas still separate assignments).
pub fn replace_path_value(
    values: &SharedMap,
    path: &str,
    value: &str,
    masked: Option<&str>,
    dialect: Dialect,
    budget: &mut Budget,
) -> Result<(), ParseError> {
    let quoted = |q: char| value.starts_with(q) && value.ends_with(q);
    if quoted('\'') || quoted('"') {
        let trimmed = value.trim_matches(['\'', '"']);
        let reader = match masked {
            Some(mask) => Reader::Masked(mask),
            None => Reader::String,
        };
        return parse_into(&format!("{path}={trimmed}"), values, &reader, dialect, budget);
    }
    let reader = match masked {
        Some(mask) => Reader::Masked(mask),
        None => Reader::Typed,
    };
    parse_into(&format!("{path}={value}"), values, &reader, dialect, budget)
}

/// fluxcd/pkg `chartutil.ReplacePathLiteralValue` (`literal: true`): the value verbatim, its
/// `\ , [ ] { }` escaped, parsed as a string; `\.` in the path still escapes a dot.
pub fn replace_path_literal_value(
    values: &SharedMap,
    path: &str,
    value: &str,
    masked: Option<&str>,
    dialect: Dialect,
    budget: &mut Budget,
) -> Result<(), ParseError> {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '[' | ']' | '{' | '}') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    let reader = match masked {
        Some(mask) => Reader::Masked(mask),
        None => Reader::String,
    };
    parse_into(&format!("{path}={escaped}"), values, &reader, dialect, budget)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::helm::shared::map_to_json;
    use serde_json::json;

    fn parse(text: &str, dialect: Dialect) -> Result<Value, String> {
        let map = new_map([]);
        parse_into(text, &map, &Reader::Typed, dialect, &mut Budget::default()).map_err(|e| e.0)?;
        Ok(map_to_json(&map))
    }

    #[test]
    fn helms_own_edge_cases() {
        for dialect in [Dialect::V3, Dialect::V4] {
            assert_eq!(parse("a.", dialect), Ok(json!({})));
            assert_eq!(parse("a[0]", dialect), Ok(json!({"a": []})));
            assert_eq!(parse("a=", dialect), Ok(json!({"a": ""})));
            assert_eq!(parse("a=1,", dialect), Ok(json!({"a": 1})));
            assert_eq!(parse("[0]=1,.b=2", dialect), Ok(json!({})));
            assert_eq!(parse("a={1,x},b=2", dialect), Ok(json!({"a": [1, "x"], "b": 2})));
            assert_eq!(parse("a={}", dialect), Ok(json!({"a": [""]})));
            assert_eq!(parse("a=falſe", dialect), Ok(json!({"a": false})));
            assert_eq!(
                parse("a=+05,b=-0,c=007,d=99999999999999999999", dialect),
                Ok(json!({"a": 5, "b": 0, "c": "007", "d": "99999999999999999999"}))
            );
            assert!(parse("a", dialect).unwrap_err().contains("has no value"));
            assert!(parse("a,b=1", dialect).unwrap_err().contains("cannot end with"));
            assert!(parse("a={1,2", dialect).unwrap_err().contains("must terminate"));
            assert!(parse("a=1,a.b=2", dialect).unwrap_err().contains("interface conversion"));
            assert!(parse("a[65537]=1", dialect).unwrap_err().contains("maximum supported index"));
            assert!(parse("a[-1]=1", dialect).unwrap_err().contains("negative"));
            assert!(parse("a[x]=1", dialect).unwrap_err().contains("invalid syntax"));
        }
        // An index left open: v3 fails, v4 stops there without error.
        assert!(parse("x=1,a[1", Dialect::V3).unwrap_err().contains("error parsing index"));
        assert_eq!(parse("x=1,a[1", Dialect::V4), Ok(json!({"x": 1})));
    }

    #[test]
    fn hostile_texts_end_in_an_error_that_names_the_bound() {
        let deep = format!("a{}=1", "[0]".repeat(MAX_DEPTH + 5));
        assert!(parse(&deep, Dialect::V4).unwrap_err().contains("fluxplan's bound"));
        let chained = format!("a{}=1", "[0].b".repeat(MAX_DEPTH));
        assert!(parse(&chained, Dialect::V4).unwrap_err().contains("fluxplan's bound"));
        let names = vec!["a"; 40].join(".") + "=1";
        assert!(parse(&names, Dialect::V4).unwrap_err().contains("nested level"));
        let wide = (0..40).map(|n| format!("k{n}[65536]=1")).collect::<Vec<_>>().join(",");
        assert!(parse(&wide, Dialect::V4).unwrap_err().contains("fluxplan's bound"));
    }

    #[test]
    fn writes_go_into_shared_lists_in_place_until_they_grow() {
        let shared = Rc::new(std::cell::RefCell::new(vec![Node::string("old")]));
        let map = new_map([("a".to_string(), Node::List(shared.clone()))]);
        parse_into("a[0]=new,a[2]=x", &map, &Reader::Typed, Dialect::V4, &mut Budget::default()).unwrap();
        assert_eq!(Node::List(shared).to_json(), json!(["new"]));
        assert_eq!(map_to_json(&map), json!({"a": ["new", null, "x"]}));
    }

    #[test]
    fn quoted_and_literal_target_path_values() {
        let run = |value: &str, literal: bool| {
            let map = new_map([]);
            let budget = &mut Budget::default();
            if literal {
                replace_path_literal_value(&map, "x", value, None, Dialect::V4, budget).unwrap();
            } else {
                replace_path_value(&map, "x", value, None, Dialect::V4, budget).unwrap();
            }
            map_to_json(&map)
        };
        assert_eq!(run("\"42\"", false), json!({"x": "42"}));
        assert_eq!(run("'\"true,y=1\"'", false), json!({"x": "true", "y": "1"}));
        assert_eq!(run("\"", false), json!({"x": ""}));
        assert_eq!(run("plain,gate.open=true", false), json!({"x": "plain", "gate": {"open": true}}));
        assert_eq!(run("plain,gate.open=true", true), json!({"x": "plain,gate.open=true"}));
        assert_eq!(run("{a,b}\\n[0]", true), json!({"x": "{a,b}\\n[0]"}));
    }
}
