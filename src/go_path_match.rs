//! Go's `path.Match` (and `filepath.Match`, the same on Unix), as the ApplicationSet controller's
//! git generator matches `directories` (include and `exclude: true` entries alike) and Helm
//! matches `.helmignore` rules: `*` matches any run of characters but `/`, `?`
//! any one character but `/`, `[...]`/`[^...]` a class (non-empty; ranges `lo-hi`; `\` escapes;
//! a class may match `/`), `\c` the character `c`; everything else, `{`, `}` and `,` included,
//! is itself. There is no `**`: it is two `*`. The whole name must match.
//!
//! Written from the documented grammar and the observable behaviour of Go's matcher, quirks
//! included: each `*` takes the leftmost place where the fixed run after it matches (no
//! backtracking into earlier stars), bytes are compared one by one, and a malformed pattern is an
//! error whatever the name.

/// A malformed pattern (`path.ErrBadPattern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadPattern;

impl std::fmt::Display for BadPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("syntax error in pattern")
    }
}

/// Reports whether `name` matches `pattern`, as `path.Match(pattern, name)` does.
pub fn path_match(pattern: &str, name: &str) -> Result<bool, BadPattern> {
    let mut pattern = pattern.as_bytes();
    let mut name = name.as_bytes();
    'chunks: while !pattern.is_empty() {
        let (star, chunk, rest) = next_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            // A trailing `*` takes the rest of the name unless it holds a `/`.
            return Ok(!name.contains(&b'/'));
        }
        // Here first: the chunk must end the name when it is the last one.
        let here = match_chunk(chunk, name);
        if let Ok(Some(left)) = here {
            if left.is_empty() || !pattern.is_empty() {
                name = left;
                continue;
            }
        }
        here?;
        if star {
            // Then after skipping 1, 2, ... bytes: a star never skips a `/`.
            let mut skip = 0;
            while skip < name.len() && name[skip] != b'/' {
                if let Some(left) = match_chunk(chunk, &name[skip + 1..])? {
                    if pattern.is_empty() && !left.is_empty() {
                        skip += 1;
                        continue;
                    }
                    name = left;
                    continue 'chunks;
                }
                skip += 1;
            }
        }
        // No match: still an error when the rest of the pattern is malformed.
        while !pattern.is_empty() {
            let (_, chunk, rest) = next_chunk(pattern);
            pattern = rest;
            match_chunk(chunk, b"")?;
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// Splits off the next chunk: leading `*`s (whether there were any), then the run up to the next
/// `*` outside a class, then the rest.
fn next_chunk(pattern: &[u8]) -> (bool, &[u8], &[u8]) {
    let stars = pattern.iter().take_while(|&&b| b == b'*').count();
    let pattern = &pattern[stars..];
    let mut in_class = false;
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'\\' if i + 1 < pattern.len() => i += 1,
            b'[' => in_class = true,
            b']' => in_class = false,
            b'*' if !in_class => return (stars > 0, &pattern[..i], &pattern[i..]),
            _ => {}
        }
        i += 1;
    }
    (stars > 0, pattern, &[])
}

/// The character at the start of `bytes` and its length in bytes: U+FFFD and 1 for bytes that
/// are not UTF-8 there (a star may skip into the middle of a character), U+FFFD and 0 at the end.
fn decode(bytes: &[u8]) -> (char, usize) {
    let Some(&first) = bytes.first() else { return (char::REPLACEMENT_CHARACTER, 0) };
    let width = match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 0,
    };
    match bytes.get(..width).map(std::str::from_utf8) {
        Some(Ok(s)) if width > 0 => (s.chars().next().unwrap_or(char::REPLACEMENT_CHARACTER), width),
        _ => (char::REPLACEMENT_CHARACTER, 1),
    }
}

/// Matches a chunk (literals, `?`, classes) against the start of `s`: what is left of `s`, or
/// `None`. The whole chunk is always read, so a malformed one is an error even after a mismatch.
fn match_chunk<'a>(mut chunk: &[u8], mut s: &'a [u8]) -> Result<Option<&'a [u8]>, BadPattern> {
    let mut failed = false;
    while let Some(&first) = chunk.first() {
        failed |= s.is_empty();
        match first {
            b'[' => {
                let mut c = None;
                if !failed {
                    let (decoded, width) = decode(s);
                    c = Some(decoded);
                    s = &s[width..];
                }
                chunk = &chunk[1..];
                let negated = chunk.first() == Some(&b'^');
                if negated {
                    chunk = &chunk[1..];
                }
                let mut matched = false;
                let mut ranges = 0;
                loop {
                    if chunk.first() == Some(&b']') && ranges > 0 {
                        chunk = &chunk[1..];
                        break;
                    }
                    let (lo, rest) = class_char(chunk)?;
                    chunk = rest;
                    let mut hi = lo;
                    if chunk[0] == b'-' {
                        let (top, rest) = class_char(&chunk[1..])?;
                        hi = top;
                        chunk = rest;
                    }
                    matched |= c.is_some_and(|c| lo <= c && c <= hi);
                    ranges += 1;
                }
                failed |= matched == negated;
            }
            b'?' => {
                if !failed {
                    failed = s[0] == b'/';
                    s = &s[decode(s).1..];
                }
                chunk = &chunk[1..];
            }
            _ => {
                if first == b'\\' {
                    chunk = &chunk[1..];
                    if chunk.is_empty() {
                        return Err(BadPattern);
                    }
                }
                if !failed {
                    failed = chunk[0] != s[0];
                    s = &s[1..];
                }
                chunk = &chunk[1..];
            }
        }
    }
    Ok((!failed).then_some(s))
}

/// One character of a class, `\` escaping: the character and the rest, which must not be empty
/// (the class still needs its `]`).
fn class_char(chunk: &[u8]) -> Result<(char, &[u8]), BadPattern> {
    let chunk = match chunk.first() {
        None | Some(b'-') | Some(b']') => return Err(BadPattern),
        Some(b'\\') => &chunk[1..],
        Some(_) => chunk,
    };
    if chunk.is_empty() {
        return Err(BadPattern);
    }
    let (c, width) = decode(chunk);
    let rest = &chunk[width..];
    if (c == char::REPLACEMENT_CHARACTER && width == 1) || rest.is_empty() {
        return Err(BadPattern);
    }
    Ok((c, rest))
}

#[cfg(test)]
mod tests {
    use super::{path_match, BadPattern};

    /// Go's own table for `path.Match` (src/path/match_test.go).
    #[test]
    fn matches_as_go() {
        let ok = |matched| Ok::<bool, BadPattern>(matched);
        let bad = Err::<bool, BadPattern>(BadPattern);
        let table = [
            ("abc", "abc", ok(true)),
            ("*", "abc", ok(true)),
            ("*c", "abc", ok(true)),
            ("a*", "a", ok(true)),
            ("a*", "abc", ok(true)),
            ("a*", "ab/c", ok(false)),
            ("a*/b", "abc/b", ok(true)),
            ("a*/b", "a/c/b", ok(false)),
            ("a*b*c*d*e*/f", "axbxcxdxe/f", ok(true)),
            ("a*b*c*d*e*/f", "axbxcxdxexxx/f", ok(true)),
            ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", ok(false)),
            ("a*b*c*d*e*/f", "axbxcxdxexxx/fff", ok(false)),
            ("a*b?c*x", "abxbbxdbxebxczzx", ok(true)),
            ("a*b?c*x", "abxbbxdbxebxczzy", ok(false)),
            ("ab[c]", "abc", ok(true)),
            ("ab[b-d]", "abc", ok(true)),
            ("ab[e-g]", "abc", ok(false)),
            ("ab[^c]", "abc", ok(false)),
            ("ab[^b-d]", "abc", ok(false)),
            ("ab[^e-g]", "abc", ok(true)),
            ("a\\*b", "a*b", ok(true)),
            ("a\\*b", "ab", ok(false)),
            ("a?b", "a☺b", ok(true)),
            ("a[^a]b", "a☺b", ok(true)),
            ("a???b", "a☺b", ok(false)),
            ("a[^a][^a][^a]b", "a☺b", ok(false)),
            ("[a-ζ]*", "α", ok(true)),
            ("*[a-ζ]", "A", ok(false)),
            ("a?b", "a/b", ok(false)),
            ("a*b", "a/b", ok(false)),
            ("[\\]a]", "]", ok(true)),
            ("[\\-]", "-", ok(true)),
            ("[x\\-]", "x", ok(true)),
            ("[x\\-]", "-", ok(true)),
            ("[x\\-]", "z", ok(false)),
            ("[\\-x]", "x", ok(true)),
            ("[\\-x]", "-", ok(true)),
            ("[\\-x]", "a", ok(false)),
            ("[]a]", "]", bad),
            ("[-]", "-", bad),
            ("[x-]", "x", bad),
            ("[x-]", "-", bad),
            ("[x-]", "z", bad),
            ("[-x]", "x", bad),
            ("[-x]", "-", bad),
            ("[-x]", "a", bad),
            ("\\", "a", bad),
            ("[a-b-c]", "a", bad),
            ("[", "a", bad),
            ("[^", "a", bad),
            ("[^bc", "a", bad),
            ("a[", "a", bad),
            ("a[", "ab", bad),
            ("a[", "x", bad),
            ("a/b[", "x", bad),
            ("*x", "xxx", ok(true)),
        ];
        for (pattern, name, want) in table {
            assert_eq!(path_match(pattern, name), want, "Match({pattern:?}, {name:?})");
        }
    }

    #[test]
    fn what_argo_cd_generator_paths_mean() {
        assert_eq!(path_match("services/*-old", "services/team/evil-old"), Ok(false));
        assert_eq!(path_match("services/*/*", "services/team/evil-old"), Ok(true));
        assert_eq!(path_match("services/*", "services/api/x"), Ok(false));
        assert_eq!(path_match("services/**", "services/api/x"), Ok(false), "** is *");
        assert_eq!(path_match("services/{a,b}", "services/a"), Ok(false), "no alternatives");
        assert_eq!(path_match("services/{a,b}", "services/{a,b}"), Ok(true));
        assert_eq!(path_match("./services/*", "services/a"), Ok(false), "no ./ trimming");
        assert_eq!(path_match("a[^x]b", "a/b"), Ok(true), "a class matches /");
        // Each star takes the leftmost match of what follows it: Go answers false here.
        assert_eq!(path_match("*[^x]*", "a/"), Ok(false));
        assert_eq!(path_match("a*", "a\u{e9}"), Ok(true));
    }
}
