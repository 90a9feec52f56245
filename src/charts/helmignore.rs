//! What Helm's directory loader leaves out of a chart: the rules of its `.helmignore` plus the
//! default `templates/.?*` (helm `pkg/ignore/rules.go`, `pkg/chart/v2/loader/directory.go`).
//! The archive loader applies none of them; fluxplan uses these rules to say where the two
//! loaders read one archive differently, and to read a chart directory as Helm reads it.
//! Patterns are Go's `filepath.Match` globs (`crate::go_path_match`: `*` and `?` never match
//! `/`), with Helm's quirks kept: a negated rule that does not match a path ignores it.

use crate::go_path_match::path_match as glob_match;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go_path_match::BadPattern;

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
