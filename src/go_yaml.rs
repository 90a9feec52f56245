//! YAML read as the controllers' Go reads it (`sigs.k8s.io/yaml` over go-yaml v2:
//! `go.yaml.in/yaml/v2` `decode.go` and `resolve.go`, then `yaml.go`'s conversion to JSON), for
//! values documents and manifests whose meaning must not differ from what the cluster gets:
//! - `<<` merge keys are applied where they stand: the merged map's keys overwrite the keys
//!   before `<<`, keys after it overwrite the merged ones, and of a list of maps the first wins.
//!   A quoted `"<<"` is a plain key.
//! - plain scalars are typed by YAML 1.1's rules: `yes`/`no`/`on`/`off`/`y`/`n` are booleans,
//!   `0755` is octal, `1_000` is 1000, `0b101` binary; quoted scalars stay strings.
//! - keys become strings (`1` → "1", `true` → "true"); `.inf`/`.nan` fail (JSON has no such number).
//!
//! What Go reads in a way this cannot see is refused with a message, never guessed: tags other
//! than the core ones, keys that are not strings, integers or booleans, and keys that only
//! differ in type (`1` and `"1"`, which Go's map order decides between).

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// The first document of `text` as Go's `yaml.Unmarshal` reads it (`null` when it is empty);
/// the documents after it are not read, as go-yaml does not read them.
pub fn first_document(text: &str) -> Result<Value, String> {
    match serde_norway::Deserializer::from_str(text).next() {
        None => Ok(Value::Null),
        Some(document) => read(document, text),
    }
}

/// Every document of `text` (empty ones as `null`), each read as `first_document` reads one.
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    serde_norway::Deserializer::from_str(text).map(|document| read(document, text)).collect()
}

fn read<'de>(document: serde_norway::Deserializer<'de>, text: &'de str) -> Result<Value, String> {
    let parsed = Seed { text }.deserialize(document).map_err(|e| e.to_string())?;
    to_json(parsed.value())
}

/// A value as go-yaml v2 decodes it into `interface{}`.
#[derive(Debug, Clone, PartialEq)]
enum Go {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    List(Vec<Go>),
    Map(BTreeMap<Key, Go>),
}

/// A key of a go-yaml map (`map[interface{}]interface{}`): `1` and `"1"` are two keys.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Str(String),
    Int(i64),
    Bool(bool),
}

/// What a node reads as: a value, or the merge key `<<`.
enum Parsed {
    Value(Go),
    Merge,
}

impl Parsed {
    fn value(self) -> Go {
        match self {
            Parsed::Value(value) => value,
            Parsed::Merge => Go::Str("<<".into()),
        }
    }
}

struct Seed<'de> {
    text: &'de str,
}

impl<'de> DeserializeSeed<'de> for Seed<'de> {
    type Value = Parsed;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Parsed, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'de> {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_unit<E>(self) -> Result<Parsed, E> {
        Ok(Parsed::Value(Go::Null))
    }

    /// An empty document.
    fn visit_none<E>(self) -> Result<Parsed, E> {
        Ok(Parsed::Value(Go::Null))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Parsed, E> {
        Ok(Parsed::Value(Go::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Parsed, E> {
        Ok(Parsed::Value(Go::Int(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Parsed, E> {
        Ok(Parsed::Value(i64::try_from(v).map(Go::Int).unwrap_or(Go::Uint(v))))
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Parsed, E> {
        Err(E::custom("an integer beyond 64 bits: fluxplan cannot tell how Go reads it (quote it)"))
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Parsed, E> {
        Err(E::custom("an integer beyond 64 bits: fluxplan cannot tell how Go reads it (quote it)"))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Parsed, E> {
        if !v.is_finite() {
            return Err(E::custom(format!(
                "{v} is no JSON number: sigs.k8s.io/yaml fails on it (\"json: unsupported value\")"
            )));
        }
        Ok(Parsed::Value(Go::Float(v)))
    }

    /// A scalar serde could not slice from the text: quoted with escapes, a block scalar, or a
    /// plain scalar folded over lines (which holds a space, so Go keeps it a string too).
    fn visit_str<E>(self, v: &str) -> Result<Parsed, E> {
        Ok(Parsed::Value(Go::Str(v.to_string())))
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Parsed, E> {
        match style(self.text, v) {
            Style::Quoted => Ok(Parsed::Value(Go::Str(v.to_string()))),
            Style::Tagged(tag) if tag == "!!str" => Ok(Parsed::Value(Go::Str(v.to_string()))),
            Style::Tagged(tag) => Err(E::custom(format!("the YAML tag {tag} is not read by fluxplan"))),
            Style::Plain if v == "<<" => Ok(Parsed::Merge),
            Style::Plain => Ok(Parsed::Value(resolve(v))),
        }
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<Parsed, A::Error> {
        Err(de::Error::custom("a local YAML tag (!name) is not read by fluxplan"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Parsed, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Seed { text: self.text })? {
            items.push(item.value());
        }
        Ok(Parsed::Value(Go::List(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Parsed, A::Error> {
        let mut map = BTreeMap::new();
        while let Some(key) = entries.next_key_seed(Seed { text: self.text })? {
            let value = entries.next_value_seed(Seed { text: self.text })?.value();
            match key {
                // go-yaml v2 `merge`: unmarshals the map (or each map of a list, last first)
                // into this one, over what it already holds.
                Parsed::Merge => match value {
                    Go::Map(merged) => map.extend(merged),
                    Go::List(items) => {
                        for item in items.into_iter().rev() {
                            match item {
                                Go::Map(merged) => map.extend(merged),
                                _ => return Err(merge_wants_map()),
                            }
                        }
                    }
                    _ => return Err(merge_wants_map()),
                },
                Parsed::Value(key) => {
                    map.insert(key_of(key).map_err(de::Error::custom)?, value);
                }
            }
        }
        Ok(Parsed::Value(Go::Map(map)))
    }
}

fn merge_wants_map<E: de::Error>() -> E {
    E::custom("map merge requires map or sequence of maps as the value")
}

/// A decoded key as a map key; go-yaml's other key types fail in sigs.k8s.io/yaml or cannot be
/// told apart here.
fn key_of(key: Go) -> Result<Key, String> {
    match key {
        Go::Str(s) => Ok(Key::Str(s)),
        Go::Int(i) => Ok(Key::Int(i)),
        Go::Bool(b) => Ok(Key::Bool(b)),
        Go::Null => Err("a null map key: sigs.k8s.io/yaml fails on it (\"unsupported map key\")".into()),
        Go::Uint(u) => {
            Err(format!("the map key {u}: sigs.k8s.io/yaml fails on it (\"unsupported map key\")"))
        }
        Go::Float(f) => Err(format!("the float map key {f}: not read by fluxplan (quote it)")),
        Go::List(_) | Go::Map(_) => Err("a map key that is a list or a map: Go fails on it".into()),
    }
}

/// The value as sigs.k8s.io/yaml hands it on: JSON, keys as strings.
fn to_json(value: Go) -> Result<Value, String> {
    Ok(match value {
        Go::Null => Value::Null,
        Go::Bool(b) => Value::Bool(b),
        Go::Int(i) => Value::from(i),
        Go::Uint(u) => Value::from(u),
        Go::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| format!("{f} is no JSON number: sigs.k8s.io/yaml fails on it"))?,
        Go::Str(s) => Value::String(s),
        Go::List(items) => Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?),
        Go::Map(map) => {
            let mut object = Map::new();
            for (key, value) in map {
                let name = match key {
                    Key::Str(s) => s,
                    Key::Int(i) => i.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                if object.contains_key(&name) {
                    return Err(format!(
                        "the keys of one map include '{name}' twice in two types (as `1` and \"1\"): which one Go keeps \
                         depends on its map order"
                    ));
                }
                object.insert(name, to_json(value)?);
            }
            Value::Object(object)
        }
    })
}

/// How a scalar serde sliced from the text was written.
enum Style {
    Plain,
    Quoted,
    /// Preceded by a tag (`!!str`).
    Tagged(String),
}

/// Reads the text around `slice` (a part of `text`): a quote before it makes it quoted; a tag
/// among the properties before it (`!!str &anchor value`) makes it tagged.
fn style(text: &str, slice: &str) -> Style {
    let start = (slice.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    let Some(before) = text.get(..start).filter(|_| start <= text.len()) else {
        return Style::Plain;
    };
    if before.ends_with(['"', '\'']) {
        return Style::Quoted;
    }
    let mut rest = before.trim_end_matches([' ', '\t']);
    loop {
        let token_start = rest.rfind([' ', '\t', '\n', '\r', ',', '[', '{']).map_or(0, |i| i + 1);
        let token = &rest[token_start..];
        if token.starts_with('!') {
            return Style::Tagged(token.to_string());
        }
        if !token.starts_with('&') || token.is_empty() {
            return Style::Plain;
        }
        rest = rest[..token_start].trim_end_matches([' ', '\t']);
    }
}

/// go-yaml v2 `resolve` of a plain scalar with no tag (timestamps stay strings when decoded into
/// `interface{}`, and only strings that could not be numbers look like one).
fn resolve(plain: &str) -> Go {
    match plain {
        "" | "~" | "null" | "Null" | "NULL" => return Go::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Go::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Go::Bool(false)
        }
        // ±Inf and NaN: Go reads them as floats that JSON cannot hold.
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf"
        | "-.Inf" | "-.INF" => return Go::Float(f64::NAN),
        _ => {}
    }
    match plain.as_bytes().first() {
        Some(b'.') => {
            if is_go_float(plain) {
                if let Some(f) = plain.parse::<f64>().ok().filter(|f| f.is_finite()) {
                    return Go::Float(f);
                }
            }
            Go::Str(plain.to_string())
        }
        Some(b'0'..=b'9' | b'+' | b'-') => {
            let digits = plain.replace('_', "");
            if let Some(int) = go_parse_int(&digits) {
                return Go::Int(int);
            }
            if let Some(uint) = go_parse_uint(&digits) {
                return Go::Uint(uint);
            }
            if is_yaml_float(&digits) {
                if let Some(f) = digits.parse::<f64>().ok().filter(|f| f.is_finite()) {
                    return Go::Float(f);
                }
            }
            if let Some(binary) = digits.strip_prefix("0b") {
                if let Some(int) = signed_radix(binary, 2) {
                    return Go::Int(int);
                }
                if let Ok(uint) = u64::from_str_radix(binary, 2).map_err(|_| ()).and_then(|u| {
                    if binary.starts_with('+') {
                        Err(())
                    } else {
                        Ok(u)
                    }
                }) {
                    return Go::Uint(uint);
                }
            } else if let Some(binary) = digits.strip_prefix("-0b") {
                if let Some(int) = signed_radix(&format!("-{binary}"), 2) {
                    return Go::Int(int);
                }
            }
            Go::Str(plain.to_string())
        }
        _ => Go::Str(plain.to_string()),
    }
}

/// go-yaml's `yamlStyleFloat`: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn is_yaml_float(text: &str) -> bool {
    let s = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", fraction)) => digits(fraction),
        Some((whole, fraction)) => digits(whole) && (fraction.is_empty() || digits(fraction)),
        None => digits(mantissa),
    };
    mantissa_ok && exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)))
}

/// Go's `strconv.ParseFloat` for a text starting with `.` (decimal forms only can start so).
fn is_go_float(text: &str) -> bool {
    is_yaml_float(text)
}

/// Go's `strconv.ParseUint(text, 0, 64)`: base from the prefix (`0x`, `0o`, `0b`, a leading `0`
/// for octal), no sign.
fn go_parse_uint(text: &str) -> Option<u64> {
    let lower = |p: &str| text.get(..2).is_some_and(|h| h.eq_ignore_ascii_case(p));
    let (digits, radix) = if lower("0x") {
        (&text[2..], 16)
    } else if lower("0o") {
        (&text[2..], 8)
    } else if lower("0b") {
        (&text[2..], 2)
    } else if text.len() > 1 && text.starts_with('0') {
        (&text[1..], 8)
    } else {
        (text, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Go's `strconv.ParseInt(text, 0, 64)`: a sign, then `ParseUint`'s forms.
fn go_parse_int(text: &str) -> Option<i64> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let magnitude = go_parse_uint(rest)?;
    if negative {
        if magnitude <= i64::MAX as u64 + 1 {
            Some((magnitude as i64).wrapping_neg())
        } else {
            None
        }
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Go's `strconv.ParseInt(text, radix, 64)` for an explicit radix: a sign, then digits.
fn signed_radix(text: &str, radix: u32) -> Option<i64> {
    let rest = text.strip_prefix(['+', '-']).unwrap_or(text);
    if rest.is_empty() || !rest.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    i64::from_str_radix(text.strip_prefix('+').unwrap_or(text), radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_keys_apply_where_they_stand() {
        let text = "base: &base {a: 1, b: 1}\nother: &other {b: 2, c: 2}\n\
                    before: {a: 0, <<: *base}\nafter: {<<: *base, a: 3}\nlist: {<<: [*base, *other]}\n\
                    quoted: {\"<<\": *base}\n";
        assert_eq!(
            first_document(text).unwrap(),
            json!({"base": {"a": 1, "b": 1}, "other": {"b": 2, "c": 2}, "before": {"a": 1, "b": 1},
                   "after": {"a": 3, "b": 1}, "list": {"a": 1, "b": 1, "c": 2}, "quoted": {"<<": {"a": 1, "b": 1}}})
        );
        assert!(first_document("a: {<<: 1}\n").unwrap_err().contains("map merge requires"));
    }

    #[test]
    fn plain_scalars_are_typed_by_yaml_1_1_and_quoted_ones_stay_strings() {
        let text = "a: yes\nb: off\nc: 0755\nd: 1_000\ne: \"yes\"\nf: 'on'\ng: 0b101\nh: 08\ni: 0x1F\nj: 1e3\n\
                    k: !!str 12\nl: &x y\nm: .5\nn: 2024-01-01\no: ~\np: 0o17\nq: 18446744073709551615\nr: |\n  no\n";
        assert_eq!(
            first_document(text).unwrap(),
            json!({"a": true, "b": false, "c": 493, "d": 1000, "e": "yes", "f": "on", "g": 5, "h": 8.0, "i": 31,
                   "j": 1000.0, "k": "12", "l": true, "m": 0.5, "false": "2024-01-01", "o": null, "p": 15,
                   "q": 18446744073709551615u64, "r": "no\n"})
        );
        assert_eq!(first_document("1: a\ntrue: b\nyes: c\n").unwrap(), json!({"1": "a", "true": "c"}));
    }

    #[test]
    fn what_go_reads_otherwise_is_refused() {
        for text in ["a: .inf\n", "a: .nan\n", "1: a\n\"1\": b\n", "~: a\n", "a: !custom x\n", "1.5: a\n"] {
            assert!(first_document(text).is_err(), "{text}");
        }
        assert_eq!(first_document("---\n---\na: 1\n").unwrap(), Value::Null);
        assert_eq!(first_document("a: 1\n---\n[broken\n").unwrap(), json!({"a": 1}));
    }
}
