//! The globs of `directory.include`/`exclude`, as the repo-server matches them (gobwas/glob
//! compiled without separators): `*` and `**` match any text, `/` included; `?` any one
//! character; `[a-z]`, `[!a-z]` classes; `{a,b}` alternatives, nested too; `\` escapes. A pattern
//! that does not compile matches nothing (the repo-server logs it and matches nothing).

/// Alternatives are expanded before matching; a pattern with more than this many is refused
/// (matches nothing), so a hostile pattern cannot make matching explode.
const MAX_EXPANSIONS: usize = 1024;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Literal(char),
    AnyOne,
    AnyRun,
    Class { negated: bool, ranges: Vec<(char, char)> },
}

/// A compiled pattern: the alternatives it expands to.
#[derive(Debug, Clone)]
pub struct Glob {
    alternatives: Vec<Vec<Token>>,
}

impl Glob {
    /// `None` when the repo-server could not compile it (an unclosed `[` or `{`).
    pub fn new(pattern: &str) -> Option<Glob> {
        let chars: Vec<char> = pattern.chars().collect();
        let (alternatives, end) = sequence(&chars, 0, false)?;
        (end == chars.len()).then_some(Glob { alternatives })
    }

    pub fn is_match(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        self.alternatives.iter().any(|tokens| matches(tokens, &text))
    }
}

/// True when `pattern` compiles and matches `text`.
pub fn is_match(pattern: &str, text: &str) -> bool {
    Glob::new(pattern).is_some_and(|g| g.is_match(text))
}

/// Parses from `at` up to the end (or, inside braces, up to `,` or `}`): the token sequences it
/// expands to, and where it stopped.
fn sequence(chars: &[char], mut at: usize, in_braces: bool) -> Option<(Vec<Vec<Token>>, usize)> {
    let mut expanded: Vec<Vec<Token>> = vec![Vec::new()];
    let push = |expanded: &mut Vec<Vec<Token>>, token: Token| {
        for tokens in expanded.iter_mut() {
            tokens.push(token.clone());
        }
    };
    while at < chars.len() {
        match chars[at] {
            ',' | '}' if in_braces => break,
            '*' => {
                while chars.get(at) == Some(&'*') {
                    at += 1;
                }
                push(&mut expanded, Token::AnyRun);
                continue;
            }
            '?' => push(&mut expanded, Token::AnyOne),
            '\\' => {
                at += 1;
                push(&mut expanded, Token::Literal(*chars.get(at)?));
            }
            '[' => {
                let (token, end) = class(chars, at + 1)?;
                push(&mut expanded, token);
                at = end;
            }
            '{' => {
                let mut options = Vec::new();
                at += 1;
                loop {
                    let (alternatives, end) = sequence(chars, at, true)?;
                    options.extend(alternatives);
                    match chars.get(end)? {
                        ',' => at = end + 1,
                        _ => {
                            at = end;
                            break;
                        }
                    }
                }
                if expanded.len().saturating_mul(options.len()) > MAX_EXPANSIONS {
                    return None;
                }
                expanded = expanded
                    .iter()
                    .flat_map(|prefix| {
                        options.iter().map(move |option| prefix.iter().chain(option).cloned().collect())
                    })
                    .collect();
            }
            c => push(&mut expanded, Token::Literal(c)),
        }
        at += 1;
    }
    Some((expanded, at))
}

/// A `[...]` class starting after its `[`: the token, and the index of its `]`.
fn class(chars: &[char], mut at: usize) -> Option<(Token, usize)> {
    let negated = chars.get(at) == Some(&'!');
    if negated {
        at += 1;
    }
    let mut ranges = Vec::new();
    loop {
        let c = *chars.get(at)?;
        if c == ']' {
            return Some((Token::Class { negated, ranges }, at));
        }
        let c = if c == '\\' {
            at += 1;
            *chars.get(at)?
        } else {
            c
        };
        if chars.get(at + 1) == Some(&'-') && chars.get(at + 2).is_some_and(|e| *e != ']') {
            let end = *chars.get(at + 2)?;
            ranges.push((c, end));
            at += 3;
        } else {
            ranges.push((c, c));
            at += 1;
        }
    }
}

/// Glob matching without backtracking blow-up: the set of pattern positions reachable after
/// each character.
fn matches(tokens: &[Token], text: &[char]) -> bool {
    let mut states = vec![false; tokens.len() + 1];
    states[0] = true;
    close(tokens, &mut states);
    for &c in text {
        let mut next = vec![false; tokens.len() + 1];
        for (i, token) in tokens.iter().enumerate().filter(|(i, _)| states[*i]) {
            match token {
                Token::AnyRun => next[i] = true,
                Token::AnyOne => next[i + 1] = true,
                Token::Literal(l) => next[i + 1] |= *l == c,
                Token::Class { negated, ranges } => {
                    next[i + 1] |= ranges.iter().any(|(from, to)| (*from..=*to).contains(&c)) != *negated
                }
            }
        }
        close(tokens, &mut next);
        if !next.iter().any(|s| *s) {
            return false;
        }
        states = next;
    }
    states[tokens.len()]
}

/// A `*` may match nothing: the position after it is reachable wherever it is.
fn close(tokens: &[Token], states: &mut [bool]) {
    for i in 0..tokens.len() {
        if states[i] && tokens[i] == Token::AnyRun {
            states[i + 1] = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_match;

    #[test]
    fn matches_as_gobwas_without_separators() {
        assert!(is_match("*.yaml", "a.yaml"));
        assert!(is_match("*.yaml", "sub/dir/a.yaml"), "* crosses /");
        assert!(!is_match("**/*.yaml", "a.yaml"), "**/ needs a /");
        assert!(is_match("**/*.yaml", "sub/a.yaml"));
        assert!(is_match("{a,b/*}.y*ml", "b/c.yml"));
        assert!(is_match("{a,{b,c}}.yaml", "c.yaml"), "nested alternatives");
        assert!(!is_match("{a,b}.yaml", "ab.yaml"));
        assert!(is_match("[a-c]?.json", "b/.json"));
        assert!(is_match("[!a-c]*", "d"));
        assert!(!is_match("[!a-c]*", "a"));
        assert!(is_match("\\*.yaml", "*.yaml"));
        assert!(!is_match("\\*.yaml", "a.yaml"));
        assert!(is_match(".*", ".backdoor.yaml"), "dot-files are names like any other");
        for broken in ["[top", "{a,b", "a\\"] {
            assert!(!is_match(broken, "top"), "{broken} does not compile: matches nothing");
        }
        assert!(!is_match(&"{a,b}".repeat(12), "a"), "too many alternatives: refused");
        let hostile = format!("{}b", "*a".repeat(40));
        assert!(!is_match(&hostile, &"a".repeat(5000)));
    }
}
