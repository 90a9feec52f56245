//! Flux's postBuild variable substitution dialect (not bash): only `${...}` expands, `$$` is a
//! literal `$`, every default operator (`:=`, `=`, `:-`, `:?`, `:+`) means "use the default when
//! the variable is empty or unset", and string operators are supported.

use globset::GlobBuilder;
use std::collections::{BTreeMap, BTreeSet};

/// What to do with a variable that has no value and no default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undefined {
    /// Strict mode (the controller's default from 1.9): fail the render.
    Error,
    /// Non-strict mode: an empty string.
    Empty,
    /// Offline with values only the cluster knows: keep the expression as written.
    Keep,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvsubstError {
    #[error("variable not set (strict mode): \"{0}\"")]
    Undefined(String),
    #[error("bad substitution \"{0}\": {1}")]
    Syntax(String, &'static str),
}

/// The result of substituting a text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Substituted {
    pub text: String,
    /// Variables kept as written because their value is unknown (`Undefined::Keep`).
    pub unresolved: BTreeSet<String>,
}

/// Substitutes `${...}` expressions in `text` with `vars`.
pub fn substitute(
    text: &str,
    vars: &BTreeMap<String, String>,
    on_undefined: Undefined,
) -> Result<Substituted, EnvsubstError> {
    let mut out = Substituted::default();
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.text.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.text.push('$');
            rest = tail;
        } else if let Some(body_start) = after.strip_prefix('{') {
            let end = closing_brace(body_start)
                .ok_or_else(|| EnvsubstError::Syntax(truncate(&rest[pos..]), "missing closing brace"))?;
            let body = &body_start[..end];
            let expression = &rest[pos..pos + 3 + end];
            match evaluate(body, vars, on_undefined, &mut out.unresolved)? {
                Some(value) => out.text.push_str(&value),
                None => out.text.push_str(expression),
            }
            rest = &body_start[end + 1..];
        } else {
            out.text.push('$');
            rest = after;
        }
    }
    out.text.push_str(rest);
    Ok(out)
}

fn truncate(s: &str) -> String {
    s.chars().take(40).collect()
}

/// Index of the `}` closing an expression body, counting nested `${`.
fn closing_brace(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                depth += 1;
                i += 1;
            }
            b'}' if depth == 0 => return Some(i),
            b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

fn is_name_start(c: char) -> bool {
    c == '_' || c.is_ascii_alphabetic()
}

fn is_name_char(c: char) -> bool {
    c == '_' || c.is_ascii_alphanumeric()
}

/// True when `name` is a valid variable name for `substitute`/`substituteFrom`.
pub fn is_valid_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(is_name_start) && chars.all(is_name_char)
}

/// Evaluates one expression body; `None` keeps the expression as written.
fn evaluate(
    body: &str,
    vars: &BTreeMap<String, String>,
    on_undefined: Undefined,
    unresolved: &mut BTreeSet<String>,
) -> Result<Option<String>, EnvsubstError> {
    let syntax = |why| EnvsubstError::Syntax(format!("${{{body}}}"), why);
    let (length_of, body_rest) = match body.strip_prefix('#') {
        Some(rest) => (true, rest),
        None => (false, body),
    };
    let name_len = body_rest.find(|c: char| !is_name_char(c)).unwrap_or(body_rest.len());
    let name = &body_rest[..name_len];
    if !name.chars().next().is_some_and(is_name_start) {
        return Err(syntax("expected a variable name"));
    }
    let op = &body_rest[name_len..];
    if length_of && !op.is_empty() {
        return Err(syntax("unexpected characters after ${#name"));
    }
    let value = vars.get(name);

    // Default operators: the default is itself a template.
    for prefix in [":=", ":-", ":?", ":+", "="] {
        if let Some(default) = op.strip_prefix(prefix) {
            return match value.filter(|v| !v.is_empty()) {
                Some(v) => Ok(Some(v.clone())),
                None if on_undefined == Undefined::Keep && value.is_none() => {
                    unresolved.insert(name.to_string());
                    Ok(None)
                }
                None => {
                    let nested = substitute(default, vars, on_undefined)?;
                    unresolved.extend(nested.unresolved);
                    Ok(Some(nested.text))
                }
            };
        }
    }
    if op.starts_with('-') {
        return Err(syntax("'-' without ':' is not supported; write ${name:-default}"));
    }

    let value = match value {
        Some(v) => v.clone(),
        None => match on_undefined {
            Undefined::Error => return Err(EnvsubstError::Undefined(name.to_string())),
            Undefined::Keep => {
                unresolved.insert(name.to_string());
                return Ok(None);
            }
            Undefined::Empty => String::new(),
        },
    };
    if length_of {
        // Byte length, as the controller counts.
        return Ok(Some(value.len().to_string()));
    }
    apply_operator(&value, op).map(Some).ok_or_else(|| syntax("unknown operator"))
}

/// Applies a string operator (`^^`, `,,`, `:o:l`, `#p`, `%p`, `/p/r`, ...) to a value.
fn apply_operator(value: &str, op: &str) -> Option<String> {
    Some(match op {
        "" => value.to_string(),
        "^^" => value.to_uppercase(),
        ",," => value.to_lowercase(),
        "^" => map_first(value, |c| c.to_uppercase().collect()),
        "," => map_first(value, |c| c.to_lowercase().collect()),
        _ => {
            if let Some(range) = op.strip_prefix(':') {
                return substring(value, range);
            }
            if let Some(p) = op.strip_prefix("##") {
                return Some(trim_prefix(value, p, true));
            }
            if let Some(p) = op.strip_prefix('#') {
                return Some(trim_prefix(value, p, false));
            }
            if let Some(p) = op.strip_prefix("%%") {
                return Some(trim_suffix(value, p, true));
            }
            if let Some(p) = op.strip_prefix('%') {
                return Some(trim_suffix(value, p, false));
            }
            if let Some(spec) = op.strip_prefix("//") {
                let (from, to) = split_replacement(spec);
                return Some(value.replace(&from, &to));
            }
            if let Some(spec) = op.strip_prefix("/#") {
                let (from, to) = split_replacement(spec);
                return Some(match value.strip_prefix(from.as_str()) {
                    Some(rest) => format!("{to}{rest}"),
                    None => value.to_string(),
                });
            }
            if let Some(spec) = op.strip_prefix("/%") {
                let (from, to) = split_replacement(spec);
                return Some(match value.strip_suffix(from.as_str()) {
                    Some(rest) => format!("{rest}{to}"),
                    None => value.to_string(),
                });
            }
            if let Some(spec) = op.strip_prefix('/') {
                let (from, to) = split_replacement(spec);
                return Some(value.replacen(&from, &to, 1));
            }
            return None;
        }
    })
}

/// Splits `pattern/replacement` at the first unescaped `/`, resolving `\x` escapes.
fn split_replacement(spec: &str) -> (String, String) {
    let mut parts = vec![String::new()];
    let mut chars = spec.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => parts.last_mut().unwrap().extend(chars.next()),
            '/' if parts.len() == 1 => parts.push(String::new()),
            c => parts.last_mut().unwrap().push(c),
        }
    }
    let to = parts.pop().filter(|_| parts.len() == 1).unwrap_or_default();
    (parts.pop().unwrap_or_default(), to)
}

fn map_first(value: &str, f: impl Fn(char) -> String) -> String {
    let mut chars = value.chars();
    match chars.next() {
        Some(first) => f(first) + chars.as_str(),
        None => String::new(),
    }
}

/// `${v:offset}` and `${v:offset:length}` on bytes; negative numbers count from the end and an
/// unparsable number returns the value unchanged, as in the controller.
fn substring(value: &str, range: &str) -> Option<String> {
    let (offset, length) = match range.split_once(':') {
        Some((o, l)) => (o, Some(l)),
        None => (range, None),
    };
    let Ok(offset) = offset.parse::<i64>() else {
        return Some(value.to_string());
    };
    let len = value.len() as i64;
    let start = if offset < 0 { (len + offset).max(0) } else { offset.min(len) };
    let end = match length.map(str::parse::<i64>) {
        None => len,
        Some(Err(_)) => return Some(value.to_string()),
        Some(Ok(l)) if l < 0 => len + l,
        Some(Ok(l)) => (start + l).min(len),
    };
    Some(value.get(start as usize..end.max(start) as usize).unwrap_or("").to_string())
}

fn glob_matches(pattern: &str, text: &str) -> bool {
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher().is_match(text))
        .unwrap_or(false)
}

/// Char boundaries of `value` strictly inside or at its end, shortest prefix first; an empty
/// match never trims, as in the controller.
fn boundaries(value: &str) -> Vec<usize> {
    value.char_indices().map(|(i, _)| i).skip(1).chain([value.len()]).collect()
}

fn trim_prefix(value: &str, pattern: &str, longest: bool) -> String {
    let mut cuts = boundaries(value);
    if longest {
        cuts.reverse();
    }
    cuts.into_iter()
        .find(|&i| glob_matches(pattern, &value[..i]))
        .map_or_else(|| value.to_string(), |i| value[i..].to_string())
}

fn trim_suffix(value: &str, pattern: &str, longest: bool) -> String {
    let mut cuts: Vec<usize> = value.char_indices().map(|(i, _)| i).collect();
    if !longest {
        cuts.reverse();
    }
    cuts.into_iter()
        .find(|&i| glob_matches(pattern, &value[i..]))
        .map_or_else(|| value.to_string(), |i| value[..i].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn strict(text: &str, pairs: &[(&str, &str)]) -> Result<String, EnvsubstError> {
        substitute(text, &vars(pairs), Undefined::Error).map(|s| s.text)
    }

    #[test]
    fn expands_braced_variables_only() {
        assert_eq!(strict("a ${x} $x b", &[("x", "1")]).unwrap(), "a 1 $x b");
    }

    #[test]
    fn double_dollar_is_a_literal_dollar() {
        assert_eq!(strict("$${x} and $$", &[("x", "1")]).unwrap(), "${x} and $");
    }

    #[test]
    fn every_default_operator_uses_the_default_when_empty_or_unset() {
        for op in [":=", "=", ":-", ":?", ":+"] {
            let text = format!("${{v{op}d}}");
            assert_eq!(strict(&text, &[]).unwrap(), "d", "{op} unset");
            assert_eq!(strict(&text, &[("v", "")]).unwrap(), "d", "{op} empty");
            assert_eq!(strict(&text, &[("v", "x")]).unwrap(), "x", "{op} set");
        }
    }

    #[test]
    fn default_may_reference_other_variables() {
        assert_eq!(strict("${a:=${b}-x}", &[("b", "B")]).unwrap(), "B-x");
    }

    #[test]
    fn dash_without_colon_is_a_parse_error() {
        assert!(matches!(strict("${v-d}", &[]), Err(EnvsubstError::Syntax(..))));
    }

    #[test]
    fn strict_mode_rejects_undefined_variables() {
        assert_eq!(strict("${nope}", &[]), Err(EnvsubstError::Undefined("nope".into())));
    }

    #[test]
    fn non_strict_mode_empties_undefined_variables() {
        let out = substitute("[${nope}]", &vars(&[]), Undefined::Empty).unwrap();
        assert_eq!(out.text, "[]");
    }

    #[test]
    fn keep_mode_leaves_unknown_expressions_and_reports_them() {
        let out = substitute("${a} ${b:=x} ${c}", &vars(&[("c", "C")]), Undefined::Keep).unwrap();
        assert_eq!(out.text, "${a} ${b:=x} C");
        assert_eq!(out.unresolved.into_iter().collect::<Vec<_>>(), vec!["a", "b"]);
    }

    #[test]
    fn string_operators() {
        let v = &[("v", "Hello-World.tar.gz")];
        assert_eq!(strict("${#v}", v).unwrap(), "18");
        assert_eq!(strict("${v^^}", v).unwrap(), "HELLO-WORLD.TAR.GZ");
        assert_eq!(strict("${v,,}", v).unwrap(), "hello-world.tar.gz");
        assert_eq!(strict("${v:6:5}", v).unwrap(), "World");
        assert_eq!(strict("${v:6}", v).unwrap(), "World.tar.gz");
        assert_eq!(strict("${v#*.}", v).unwrap(), "tar.gz");
        assert_eq!(strict("${v##*.}", v).unwrap(), "gz");
        assert_eq!(strict("${v%.*}", v).unwrap(), "Hello-World.tar");
        assert_eq!(strict("${v%%.*}", v).unwrap(), "Hello-World");
        assert_eq!(strict("${v/o/0}", v).unwrap(), "Hell0-World.tar.gz");
        assert_eq!(strict("${v//o/0}", v).unwrap(), "Hell0-W0rld.tar.gz");
        assert_eq!(strict("${v/#Hello/Bye}", v).unwrap(), "Bye-World.tar.gz");
        assert_eq!(strict("${v/%gz/xz}", v).unwrap(), "Hello-World.tar.xz");
        assert_eq!(strict("${w^}", &[("w", "abc")]).unwrap(), "Abc");
        assert_eq!(strict("${w,}", &[("w", "ABC")]).unwrap(), "aBC");
        assert_eq!(strict("${w:1:-1}", &[("w", "abcd")]).unwrap(), "bc");
        assert_eq!(strict("${w:9}", &[("w", "abcd")]).unwrap(), "");
        assert_eq!(strict("${w/./}", &[("w", "foo.bar")]).unwrap(), "foobar");
        assert_eq!(strict(r"${w//\//-}", &[("w", "a/b/c")]).unwrap(), "a-b-c");
        assert_eq!(strict("${w/#/pre-}", &[("w", "x")]).unwrap(), "pre-x");
        assert_eq!(strict("${w#*/}", &[("w", "/path/to")]).unwrap(), "path/to");
    }

    #[test]
    fn bare_and_trailing_dollars_stay() {
        assert_eq!(strict("cost: 5$ and $HOME", &[]).unwrap(), "cost: 5$ and $HOME");
    }

    #[test]
    fn malformed_expressions_are_errors() {
        assert!(matches!(strict("${unclosed", &[]), Err(EnvsubstError::Syntax(..))));
        assert!(matches!(strict("${{ github.sha }}", &[]), Err(EnvsubstError::Syntax(..))));
    }

    #[test]
    fn validates_variable_names() {
        assert!(is_valid_variable_name("cluster_name"));
        assert!(is_valid_variable_name("_x1"));
        assert!(!is_valid_variable_name("1x"));
        assert!(!is_valid_variable_name("a-b"));
        assert!(!is_valid_variable_name(""));
    }
}
