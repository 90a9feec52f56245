//! The globs of `directory.include`/`exclude`, as the repo-server matches them (gobwas/glob
//! v0.2, compiled without separators): `*` and `**` match any text, `/` included; `?` any one
//! character; `[abc]`, `[a-z]` and `[!...]` classes (one range or one list of characters each);
//! `{a,b}` alternatives, nested too, and an unclosed `{` closes at the end of the pattern; `\`
//! escapes (a trailing one is dropped). The repo-server matches a pattern that does not compile
//! (a bad class) against nothing: it logs a warning and reads no file for an include, leaves
//! out no file for an exclude.
//!
//! AppProjects match `sourceRepos` with `/` as a separator ([`Glob::with_separator`]): then
//! `*` and `?` stop at `/` and only `**` crosses it; classes and alternatives are unchanged.
//!
//! Patterns are parsed iteratively and translated to a regular expression (linear-time
//! matching, no expansion of alternatives). A pattern longer than [`MAX_PATTERN_BYTES`] or
//! nested deeper than [`MAX_DEPTH`] is [`TooComplex`]: fluxplan cannot tell what the
//! repo-server would read, so the unit fails rather than guessing.

use regex::{Regex, RegexBuilder};
use std::fmt::Write;

/// The longest pattern fluxplan evaluates.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// The deepest nesting of `{` fluxplan evaluates.
pub const MAX_DEPTH: usize = 64;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Glob(Regex);

/// A pattern beyond what fluxplan evaluates, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooComplex(pub String);

impl std::fmt::Display for TooComplex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Glob {
    /// `Ok(None)` when gobwas/glob does not compile it (the repo-server then matches nothing);
    /// `Err` when it is beyond what fluxplan evaluates.
    pub fn new(pattern: &str) -> Result<Option<Glob>, TooComplex> {
        Self::compile(pattern, None)
    }

    /// As [`Glob::new`], compiled with one separator (gobwas/glob's `Compile(pattern, sep)`).
    pub fn with_separator(pattern: &str, separator: char) -> Result<Option<Glob>, TooComplex> {
        Self::compile(pattern, Some(separator))
    }

    fn compile(pattern: &str, separator: Option<char>) -> Result<Option<Glob>, TooComplex> {
        let Some(regex) = translate(pattern, separator)? else { return Ok(None) };
        RegexBuilder::new(&regex)
            .size_limit(1 << 20)
            .nest_limit(MAX_DEPTH as u32 + 8)
            .build()
            .map(|r| Some(Glob(r)))
            .map_err(|e| TooComplex(format!("the pattern is too complex to evaluate ({e})")))
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

/// True when `pattern` compiles and matches `text` (a pattern beyond fluxplan's limits matches
/// nothing here: callers that must not guess use [`Glob::new`]).
pub fn is_match(pattern: &str, text: &str) -> bool {
    matches!(Glob::new(pattern), Ok(Some(g)) if g.is_match(text))
}

/// Any one character but the separator.
fn any_char(out: &mut String, separator: Option<char>) {
    match separator {
        Some(separator) => {
            out.push_str("[^");
            literal(out, separator);
            out.push(']');
        }
        None => out.push('.'),
    }
}

/// One character, as the regular expression matches it literally.
fn literal(out: &mut String, c: char) {
    let _ = write!(out, "\\x{{{:x}}}", c as u32);
}

/// The pattern as an anchored regular expression, lexed as gobwas/glob lexes it; `None` when
/// it does not compile.
fn translate(pattern: &str, separator: Option<char>) -> Result<Option<String>, TooComplex> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(TooComplex(format!(
            "the pattern is {} bytes long; fluxplan evaluates patterns of at most {MAX_PATTERN_BYTES}",
            pattern.len()
        )));
    }
    // The lexer reads NUL as the end of input.
    let pattern = pattern.split('\0').next().unwrap_or("");
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::from(r"\A(?s:");
    let mut depth = 0usize;
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        at += 1;
        match c {
            '{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(TooComplex(format!(
                        "the pattern nests `{{` deeper than {MAX_DEPTH}, as far as fluxplan evaluates"
                    )));
                }
                out.push_str("(?:");
            }
            ',' if depth > 0 => out.push('|'),
            '}' if depth > 0 => {
                depth -= 1;
                out.push(')');
            }
            '?' => any_char(&mut out, separator),
            '*' => {
                // `**` (super) crosses separators; `*` does not.
                if chars.get(at) == Some(&'*') {
                    at += 1;
                    out.push_str(".*");
                } else {
                    any_char(&mut out, separator);
                    out.push('*');
                }
            }
            '[' => match class(&chars, &mut at) {
                Some(class) => out.push_str(&class),
                None => return Ok(None),
            },
            '\\' => {
                // A trailing `\` escapes nothing and is dropped.
                if let Some(&escaped) = chars.get(at) {
                    at += 1;
                    literal(&mut out, escaped);
                }
            }
            c => literal(&mut out, c),
        }
    }
    // An unclosed `{` ends with the pattern.
    for _ in 0..depth {
        out.push(')');
    }
    out.push_str(r")\z");
    Ok(Some(out))
}

/// A class after its `[`, as gobwas/glob lexes and parses it: an optional `!`, then one range
/// `lo-hi` (raw characters, `lo <= hi`) or one list of characters (`\` escapes) up to `]`.
/// `None` when it does not compile; `at` ends after the `]`.
fn class(chars: &[char], at: &mut usize) -> Option<String> {
    let mut negated = false;
    let mut range: Option<(char, char)> = None;
    let mut list = String::new();
    let mut lo: Option<char> = None;
    loop {
        let c = *chars.get(*at)?;
        *at += 1;
        if let Some(lo_char) = lo {
            // `lo-` then any character is the top of the range, then `]`.
            if c < lo_char || chars.get(*at) != Some(&']') {
                return None;
            }
            *at += 1;
            range = Some((lo_char, c));
            break;
        }
        if c == '!' && !negated && list.is_empty() {
            negated = true;
            continue;
        }
        if chars.get(*at) == Some(&'-') {
            *at += 1;
            lo = Some(c);
            continue;
        }
        // A list: from this character up to an unescaped `]`.
        *at -= 1;
        let mut escaped = false;
        while let Some(&c) = chars.get(*at) {
            if !escaped && c == ']' {
                break;
            }
            *at += 1;
            if !escaped && c == '\\' {
                escaped = true;
                continue;
            }
            escaped = false;
            list.push(c);
        }
        // Then `]`.
        if chars.get(*at) != Some(&']') {
            return None;
        }
        *at += 1;
        break;
    }
    let mut out = String::from(if negated { "[^" } else { "[" });
    match range {
        Some((lo, hi)) => {
            literal(&mut out, lo);
            out.push('-');
            literal(&mut out, hi);
        }
        None if list.is_empty() => return None,
        None => list.chars().for_each(|c| literal(&mut out, c)),
    }
    out.push(']');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::{is_match, Glob, MAX_DEPTH};

    #[test]
    fn matches_as_gobwas_without_separators() {
        assert!(is_match("*.yaml", "a.yaml"));
        assert!(is_match("*.yaml", "sub/dir/a.yaml"), "* crosses /");
        assert!(!is_match("**/*.yaml", "a.yaml"), "**/ needs a /");
        assert!(is_match("**/*.yaml", "sub/a.yaml"));
        assert!(is_match("{a,b/*}.y*ml", "b/c.yml"));
        assert!(is_match("{a,{b,c}}.yaml", "c.yaml"), "nested alternatives");
        assert!(!is_match("{a,b}.yaml", "ab.yaml"));
        assert!(is_match("{a,}.yaml", ".yaml"), "an empty alternative");
        assert!(is_match("a,b}", "a,b}"), "`,` and `}}` outside braces are text");
        assert!(is_match("[a-c]?.json", "b/.json"));
        assert!(is_match("[!a-c]*", "d"));
        assert!(!is_match("[!a-c]*", "a"));
        assert!(is_match("[abc]x", "bx") && !is_match("[abc]x", "dx"));
        assert!(is_match("[!abc]x", "dx") && !is_match("[!abc]x", "ax"));
        assert!(is_match("[\\]]", "]"), "an escaped ] in a list");
        assert!(is_match("\\*.yaml", "*.yaml"));
        assert!(!is_match("\\*.yaml", "a.yaml"));
        assert!(is_match(".*", ".backdoor.yaml"), "dot-files are names like any other");
        assert!(is_match("a.y\u{e9}ml", "a.y\u{e9}ml") && is_match("?", "\u{e9}"));
        assert!(is_match("(a|b)+.yaml", "(a|b)+.yaml"), "regex syntax is text");
        assert!(!is_match("(a|b)+.yaml", "a.yaml"));
    }

    #[test]
    fn what_gobwas_does_not_compile_and_what_it_compiles_leniently() {
        for broken in ["[top", "[]", "[!]", "[a-cx]", "[c-a]", "[a-", "x[a-]"] {
            assert_eq!(Glob::new(broken).map(|g| g.is_some()), Ok(false), "{broken} does not compile");
            assert!(!is_match(broken, "top") && !is_match(broken, "a"), "{broken}");
        }
        assert!(is_match("{a,b", "b"), "an unclosed brace closes at the end");
        assert!(is_match("{a,{b,c", "c"));
        assert!(is_match("a\\", "a"), "a trailing backslash is dropped");
        assert!(is_match("a\0b", "a"), "NUL ends the pattern");
    }

    #[test]
    fn with_a_separator_only_double_star_crosses_it() {
        let matches = |pattern: &str, text: &str| matches!(Glob::with_separator(pattern, '/'), Ok(Some(g)) if g.is_match(text));
        assert!(matches("https://github.com/org/*", "https://github.com/org/app"));
        assert!(!matches("https://github.com/org/*", "https://github.com/org/app/sub"));
        assert!(matches("https://github.com/org/**", "https://github.com/org/app/sub"));
        assert!(!matches("https://github.com/?rg/app", "https://github.com//rg/app"));
        assert!(matches("*", "no-separator") && !matches("*", "a/b"));
        assert!(is_match("*", "a/b"), "without a separator `*` still crosses /");
    }

    #[test]
    fn alternatives_are_not_expanded_and_matching_stays_linear() {
        assert!(is_match(&"{a,b}".repeat(40), &"ab".repeat(20)));
        let hostile = format!("{}b", "*a".repeat(40));
        assert!(!is_match(&hostile, &"a".repeat(5000)));
    }

    #[test]
    fn a_million_nested_braces_do_not_overflow_the_stack() {
        let nested = |n: usize| format!("{}a{}", "{".repeat(n), "}".repeat(n));
        assert!(is_match(&nested(MAX_DEPTH), "a"), "nesting up to the limit matches");
        assert!(Glob::new(&nested(MAX_DEPTH + 1)).unwrap_err().0.contains("deeper than 64"));
        for (n, why) in [(3_000, "deeper than 64"), (1_000_000, "bytes long")] {
            let error = Glob::new(&"{".repeat(n)).unwrap_err();
            assert!(error.0.contains(why), "{error}");
        }
        assert!(!is_match(&"{".repeat(1_000_000), "a"));
    }
}
