//! What Helm's directory loader leaves out of a chart: the rules of its `.helmignore` plus the
//! default `templates/.?*` (helm `pkg/ignore/rules.go`, `pkg/chart/v2/loader/directory.go`).
//! The archive loader applies none of them; fluxplan uses these rules to say where the two
//! loaders read one archive differently, and to read a chart directory as Helm reads it.
//! Patterns are Go's `filepath.Match` globs (`*` and `?` never match `/`), with Helm's quirks
//! kept: a negated rule that does not match a path ignores it.

/// One rule of a `.helmignore`.
#[derive(Debug, Clone)]
struct Rule {
    pattern: String,
    negate: bool,
    must_dir: bool,
    /// How the pattern is matched: against the whole path, or its last element only.
    whole_path: bool,
}

/// The rules a directory loader applies.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    rules: Vec<Rule>,
}

impl Rules {
    /// The rules of a `.helmignore` (`None`: there is none) followed by Helm's default rule, as
    /// `LoadDir` builds them. `Err`: Helm refuses the file (the directory loader fails).
    pub fn for_chart(helmignore: Option<&[u8]>) -> Result<Self, String> {
        let mut rules = Rules::default();
        if let Some(text) = helmignore {
            let text = text.strip_prefix(&[0xEF, 0xBB, 0xBF][..]).unwrap_or(text);
            for line in String::from_utf8_lossy(text).lines() {
                rules.add(line)?;
            }
        }
        rules.add("templates/.?*")?;
        Ok(rules)
    }

    fn add(&mut self, line: &str) -> Result<(), String> {
        let rule = line.trim();
        if rule.is_empty() || rule.starts_with('#') {
            return Ok(());
        }
        if rule.contains("**") {
            return Err(format!(".helmignore rule {rule:?}: double-star (**) syntax is not supported"));
        }
        glob_match(rule, "abc").map_err(|_| format!(".helmignore rule {rule:?} is not a valid pattern"))?;
        let (negate, rule) = match rule.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, rule),
        };
        let (must_dir, rule) = match rule.strip_suffix('/') {
            Some(rest) => (true, rest),
            None => (false, rule),
        };
        let (whole_path, pattern) = match rule.strip_prefix('/') {
            Some(rest) => (true, rest),
            None => (rule.contains('/'), rule),
        };
        self.rules.push(Rule { pattern: pattern.to_string(), negate, must_dir, whole_path });
        Ok(())
    }

    /// Whether the directory loader skips `path` (relative to the chart, `/`-separated); a
    /// skipped directory is skipped with everything under it.
    pub fn ignores(&self, path: &str, is_dir: bool) -> bool {
        if path.is_empty() || path == "." || path == "./" {
            return false;
        }
        for rule in &self.rules {
            let subject = if rule.whole_path { path } else { path.rsplit('/').next().unwrap_or(path) };
            let matches = glob_match(&rule.pattern, subject).unwrap_or(false);
            if rule.negate {
                // Helm's rule as written: a negation that does not apply ignores the path.
                if (rule.must_dir && !is_dir) || !matches {
                    return true;
                }
                continue;
            }
            if rule.must_dir && !is_dir {
                continue;
            }
            if matches {
                return true;
            }
        }
        false
    }

    /// Whether a file at `path` is left out, itself or through a directory above it.
    pub fn ignores_file(&self, path: &str) -> bool {
        let mut end = 0;
        while let Some(slash) = path[end..].find('/') {
            end += slash;
            if self.ignores(&path[..end], true) {
                return true;
            }
            end += 1;
        }
        self.ignores(path, false)
    }
}

/// A pattern Go's `filepath.Match` refuses (`ErrBadPattern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadPattern;

/// Go's `filepath.Match` on a Unix system: `Err` for a malformed pattern.
pub fn glob_match(pattern: &str, name: &str) -> Result<bool, BadPattern> {
    let mut pattern = pattern.as_bytes();
    let mut name = name.as_bytes();
    'outer: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            return Ok(!name.contains(&b'/'));
        }
        let (t, ok) = match_chunk(chunk, name)?;
        if ok && (t.is_empty() || !pattern.is_empty()) {
            name = t;
            continue;
        }
        if star {
            let mut i = 0;
            while i < name.len() && name[i] != b'/' {
                let (t, ok) = match_chunk(chunk, &name[i + 1..])?;
                if ok {
                    if pattern.is_empty() && !t.is_empty() {
                        i += 1;
                        continue;
                    }
                    name = t;
                    continue 'outer;
                }
                i += 1;
            }
        }
        while !pattern.is_empty() {
            let (_, chunk, rest) = scan_chunk(pattern);
            pattern = rest;
            match_chunk(chunk, b"")?;
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

fn scan_chunk(mut pattern: &[u8]) -> (bool, &[u8], &[u8]) {
    let mut star = false;
    while pattern.first() == Some(&b'*') {
        pattern = &pattern[1..];
        star = true;
    }
    let mut in_range = false;
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'\\' if i + 1 < pattern.len() => i += 1,
            b'[' => in_range = true,
            b']' => in_range = false,
            b'*' if !in_range => break,
            _ => {}
        }
        i += 1;
    }
    (star, &pattern[..i], &pattern[i..])
}

/// The first character of `s` as Go decodes it: an invalid byte is U+FFFD of length 1.
fn decode(s: &[u8]) -> (char, usize) {
    for n in 1..=s.len().min(4) {
        if let Ok(text) = std::str::from_utf8(&s[..n]) {
            return (text.chars().next().unwrap_or('\u{FFFD}'), n);
        }
    }
    ('\u{FFFD}', 1)
}

fn match_chunk<'a>(mut chunk: &[u8], mut s: &'a [u8]) -> Result<(&'a [u8], bool), BadPattern> {
    let mut failed = false;
    while !chunk.is_empty() {
        if !failed && s.is_empty() {
            failed = true;
        }
        match chunk[0] {
            b'[' => {
                let mut r = '\0';
                if !failed {
                    let (c, n) = decode(s);
                    r = c;
                    s = &s[n..];
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
                    let (lo, rest) = get_escaped(chunk)?;
                    chunk = rest;
                    let mut hi = lo;
                    if chunk[0] == b'-' {
                        let (h, rest) = get_escaped(&chunk[1..])?;
                        hi = h;
                        chunk = rest;
                    }
                    if lo <= r && r <= hi {
                        matched = true;
                    }
                    ranges += 1;
                }
                if matched == negated {
                    failed = true;
                }
            }
            b'?' => {
                if !failed {
                    if s[0] == b'/' {
                        failed = true;
                    }
                    let (_, n) = decode(s);
                    s = &s[n..];
                }
                chunk = &chunk[1..];
            }
            first => {
                let literal = if first == b'\\' {
                    chunk = &chunk[1..];
                    *chunk.first().ok_or(BadPattern)?
                } else {
                    first
                };
                if !failed {
                    if literal != s[0] {
                        failed = true;
                    }
                    s = &s[1..];
                }
                chunk = &chunk[1..];
            }
        }
    }
    if failed {
        Ok((&[], false))
    } else {
        Ok((s, true))
    }
}

fn get_escaped(mut chunk: &[u8]) -> Result<(char, &[u8]), BadPattern> {
    if chunk.is_empty() || chunk[0] == b'-' || chunk[0] == b']' {
        return Err(BadPattern);
    }
    if chunk[0] == b'\\' {
        chunk = &chunk[1..];
        if chunk.is_empty() {
            return Err(BadPattern);
        }
    }
    let (r, n) = decode(chunk);
    if r == '\u{FFFD}' && n == 1 {
        return Err(BadPattern);
    }
    let rest = &chunk[n..];
    if rest.is_empty() {
        return Err(BadPattern);
    }
    Ok((r, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_go_filepath_match_does() {
        // Cases from Go's path/filepath match tests.
        for (pattern, name, expected) in [
            ("abc", "abc", Ok(true)),
            ("*", "abc", Ok(true)),
            ("*c", "abc", Ok(true)),
            ("a*", "a", Ok(true)),
            ("a*", "abc", Ok(true)),
            ("a*", "ab/c", Ok(false)),
            ("a*/b", "abc/b", Ok(true)),
            ("a*/b", "a/c/b", Ok(false)),
            ("a*b*c*d*e*/f", "axbxcxdxe/f", Ok(true)),
            ("a*b*c*d*e*/f", "axbxcxdxexxx/fff", Ok(false)),
            ("ab[c]", "abc", Ok(true)),
            ("ab[b-d]", "abc", Ok(true)),
            ("ab[e-g]", "abc", Ok(false)),
            ("ab[^c]", "abc", Ok(false)),
            ("ab[^e-g]", "abc", Ok(true)),
            ("a\\*b", "a*b", Ok(true)),
            ("a\\*b", "ab", Ok(false)),
            ("a?b", "a☺b", Ok(true)),
            ("a?b", "a/b", Ok(false)),
            ("a*b", "a/b", Ok(false)),
            ("[\\]a]", "]", Ok(true)),
            ("[x\\-]", "-", Ok(true)),
            ("[", "a", Err(BadPattern)),
            ("[^", "a", Err(BadPattern)),
            ("a[", "a", Err(BadPattern)),
            ("a[", "x", Err(BadPattern)),
            ("[a-b-c]", "a", Err(BadPattern)),
            ("*x", "xxx", Ok(true)),
            ("templates/.?*", "templates/.x.yaml", Ok(true)),
            ("templates/.?*", "templates/.", Ok(false)),
            ("templates/.?*", "charts/sub/templates/.x.yaml", Ok(false)),
        ] {
            assert_eq!(glob_match(pattern, name), expected, "{pattern} {name}");
        }
    }

    #[test]
    fn a_helmignore_and_the_default_rule_leave_out_what_helm_leaves_out() {
        let rules = Rules::for_chart(Some(b"# comment\nsecret.yaml\n/top.txt\ndocs/\nconf/*.ini\n")).unwrap();
        for (path, ignored) in [
            ("templates/secret.yaml", true),
            ("secret.yaml", true),
            ("top.txt", true),
            ("sub/top.txt", false),
            ("docs/a.md", true),
            ("conf/a.ini", true),
            ("x/conf/a.ini", false),
            ("templates/.hidden.yaml", true),
            ("templates/deployment.yaml", false),
            ("charts/sub/templates/.hidden.yaml", false),
        ] {
            assert_eq!(rules.ignores_file(path), ignored, "{path}");
        }
        // Helm's negation as written: `!x` ignores every path that is not x.
        let negated = Rules::for_chart(Some(b"!keep.yaml\n")).unwrap();
        assert!(negated.ignores_file("templates/a.yaml"));
        assert!(!negated.ignores_file("keep.yaml"));
        assert!(Rules::for_chart(Some(b"**/x\n")).unwrap_err().contains("double-star"));
    }
}
