//! Chart versions and version constraints with the semantics source-controller gets from
//! Masterminds/semver v3 (which Cargo's `semver` does not share: `1.2.3` means exactly that,
//! `1.x` and `*` are wildcards, spaces and commas join, `||` separates alternatives, `1 - 2` is a
//! range, and pre-releases match only constraints that name one). Written from that library's
//! rules; each form is tested below.

use regex::Regex;
use std::cmp::Ordering;
use std::sync::LazyLock;

/// A version as Masterminds parses it leniently (`v1.2` is 1.2.0). Versions compare by
/// precedence: build metadata and spelling aside.
#[derive(Debug, Clone)]
pub struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    original: String,
}

const NUMBER: &str = r"[0-9|x|X|\*]+";
const TAIL: &str = r"(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";
const OPS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";

static VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"^v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?{TAIL}$")).expect("valid regex"));
fn constraint_version() -> String {
    format!(r"v?({NUMBER})(\.{NUMBER})?(\.{NUMBER})?{TAIL}")
}
static CONSTRAINT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"^\s*({OPS})\s*({})\s*$", constraint_version())).expect("valid regex")
});
static RANGE: LazyLock<Regex> = LazyLock::new(|| {
    let v = constraint_version();
    Regex::new(&format!(r"\s*({v})\s+-\s+({v})\s*")).expect("valid regex")
});
static FIND: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"({OPS})\s*({})", constraint_version())).expect("valid regex"));
static VALID: LazyLock<Regex> = LazyLock::new(|| {
    let v = constraint_version();
    Regex::new(&format!(r"^(\s*({OPS})\s*({v})\s*)((?:\s+|,\s*)({OPS})\s*({v})\s*)*$")).expect("valid regex")
});

impl Version {
    /// Parses leniently, as Masterminds' `NewVersion` does by default.
    pub fn parse(text: &str) -> Option<Version> {
        let m = VERSION.captures(text)?;
        let number = |i: usize| -> Option<u64> {
            match m.get(i) {
                Some(part) => part.as_str().trim_start_matches('.').parse().ok(),
                None => Some(0),
            }
        };
        let part = |i: usize| m.get(i).map_or("", |p| p.as_str()).to_string();
        let (pre, metadata) = (part(5), part(8));
        let identifiers_ok = |s: &str| s.is_empty() || s.split('.').all(|id| !id.is_empty());
        if !identifiers_ok(&pre) || !identifiers_ok(&metadata) {
            return None;
        }
        Some(Version { major: number(1)?, minor: number(2)?, patch: number(3)?, pre, original: text.into() })
    }

    pub fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }

    /// The version as written.
    pub fn original(&self) -> &str {
        &self.original
    }

    /// The version as Masterminds prints it (`String()`: `v` and missing parts normalised) with
    /// `metadata` as its build metadata, as `SetMetadata` sets it.
    pub fn with_metadata(&self, metadata: &str) -> String {
        let pre = if self.pre.is_empty() { String::new() } else { format!("-{}", self.pre) };
        format!("{}.{}.{}{pre}+{metadata}", self.major, self.minor, self.patch)
    }

    /// Equal precedence (Masterminds' `Equal`: build metadata aside).
    pub fn same_as(&self, other: &Version) -> bool {
        self.compare(other) == Ordering::Equal
    }

    fn compare(&self, other: &Version) -> Ordering {
        (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch)).then_with(
            || match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_prerelease(&self.pre, &other.pre),
            },
        )
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.compare(other)
    }
}

fn compare_prerelease(a: &str, b: &str) -> Ordering {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    (0..a.len().max(b.len()))
        .map(|i| compare_part(a.get(i).copied().unwrap_or(""), b.get(i).copied().unwrap_or("")))
        .find(|o| *o != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
}

fn compare_part(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    if a.is_empty() {
        return Ordering::Less;
    }
    if b.is_empty() {
        return Ordering::Greater;
    }
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Err(_), Err(_)) => a.cmp(b),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        // Equal numbers written differently (`01`, `1`) order as the library orders them.
        (Ok(x), Ok(y)) => {
            if x > y {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    TildeOrEqual,
    NotEqual,
    Greater,
    Less,
    GreaterEqual,
    LessEqual,
    Tilde,
    Caret,
}

#[derive(Debug, Clone)]
struct Comparator {
    op: Op,
    version: Version,
    /// A wildcard or missing part: `1` or `1.x` (minor), `1.2` or `1.2.x` (patch).
    minor_dirty: bool,
    patch_dirty: bool,
    dirty: bool,
}

/// One version constraint (`spec.chart.spec.version`, an OCIRepository's `ref.semver`).
#[derive(Debug, Clone)]
pub struct Constraint {
    /// Alternatives (`||`), each a list that must all hold.
    alternatives: Vec<(Vec<Comparator>, bool)>,
    original: String,
}

impl Constraint {
    pub fn parse(text: &str) -> Result<Constraint, String> {
        let rewritten = rewrite_ranges(text);
        let mut alternatives = Vec::new();
        for alternative in rewritten.split("||") {
            if !VALID.is_match(alternative) {
                return Err(format!("improper constraint: {alternative:?}"));
            }
            let mut comparators = Vec::new();
            let found: Vec<&str> = FIND.find_iter(alternative).map(|m| m.as_str()).collect();
            for part in if found.is_empty() { vec![alternative] } else { found } {
                comparators.push(parse_comparator(part)?);
            }
            let has_pre = comparators.iter().any(|c| c.version.is_prerelease());
            alternatives.push((comparators, has_pre));
        }
        Ok(Constraint { alternatives, original: text.to_string() })
    }

    /// True when `version` satisfies the constraint.
    pub fn matches(&self, version: &Version) -> bool {
        self.alternatives
            .iter()
            .any(|(comparators, has_pre)| comparators.iter().all(|c| c.check(version, *has_pre)))
    }

    /// The highest of `versions` that satisfies the constraint, as source-controller picks it.
    pub fn best<'a>(&self, versions: impl IntoIterator<Item = &'a str>) -> Option<Version> {
        versions.into_iter().filter_map(Version::parse).filter(|v| self.matches(v)).max()
    }

    pub fn original(&self) -> &str {
        &self.original
    }
}

fn is_x(part: &str) -> bool {
    matches!(part, "x" | "X" | "*")
}

fn parse_comparator(text: &str) -> Result<Comparator, String> {
    let improper = || format!("improper constraint: {text:?}");
    let m = CONSTRAINT.captures(text).ok_or_else(improper)?;
    let op = match m.get(1).map_or("", |o| o.as_str()) {
        "" | "=" => Op::TildeOrEqual,
        "!=" => Op::NotEqual,
        ">" => Op::Greater,
        "<" => Op::Less,
        ">=" | "=>" => Op::GreaterEqual,
        "<=" | "=<" => Op::LessEqual,
        "~" | "~>" => Op::Tilde,
        "^" => Op::Caret,
        _ => return Err(improper()),
    };
    let part = |i: usize| m.get(i).map_or("", |p| p.as_str());
    let (major, minor, patch, pre) =
        (part(3), part(4).trim_start_matches('.'), part(5).trim_start_matches('.'), part(6));
    let (mut minor_dirty, mut patch_dirty, mut dirty) = (false, false, false);
    let version = if is_x(major) || major.is_empty() {
        dirty = true;
        format!("0.0.0{pre}")
    } else if is_x(minor) || minor.is_empty() {
        (minor_dirty, dirty) = (true, true);
        format!("{major}.0.0{pre}")
    } else if is_x(patch) || patch.is_empty() {
        (patch_dirty, dirty) = (true, true);
        format!("{major}.{minor}.0{pre}")
    } else {
        part(2).to_string()
    };
    let version = Version::parse(&version).ok_or_else(improper)?;
    Ok(Comparator { op, version, minor_dirty, patch_dirty, dirty })
}

/// `1.2 - 1.4.5` becomes `>= 1.2, <= 1.4.5`.
fn rewrite_ranges(text: &str) -> String {
    let mut out = text.to_string();
    for m in RANGE.captures_iter(text) {
        let (whole, low, high) = (&m[0], &m[1], &m[11]);
        out = out.replacen(whole, &format!(">= {low}, <= {high} "), 1);
    }
    out
}

impl Comparator {
    fn check(&self, v: &Version, include_pre: bool) -> bool {
        if v.is_prerelease() && !include_pre {
            return false;
        }
        let c = &self.version;
        match self.op {
            Op::NotEqual => {
                if self.dirty {
                    if c.major != v.major {
                        return true;
                    }
                    if c.minor != v.minor && !self.minor_dirty {
                        return true;
                    }
                    if self.minor_dirty {
                        return false;
                    }
                    if c.patch != v.patch && !self.patch_dirty {
                        return true;
                    }
                    if self.patch_dirty {
                        return (v.is_prerelease() || c.is_prerelease())
                            && compare_prerelease(&v.pre, &c.pre) != Ordering::Equal;
                    }
                }
                v.compare(c) != Ordering::Equal
            }
            Op::Greater => {
                if !self.dirty {
                    return v > c;
                }
                if v.major != c.major {
                    return v.major > c.major;
                }
                if self.minor_dirty {
                    return false;
                }
                if self.patch_dirty {
                    return v.minor > c.minor;
                }
                v > c
            }
            Op::Less => v < c,
            Op::GreaterEqual => v >= c,
            Op::LessEqual => {
                if !self.dirty {
                    return v <= c;
                }
                !(v.major > c.major || (v.major == c.major && v.minor > c.minor && !self.minor_dirty))
            }
            Op::Tilde => self.tilde(v),
            Op::TildeOrEqual => {
                if self.dirty {
                    self.tilde(v)
                } else {
                    v.compare(c) == Ordering::Equal
                }
            }
            Op::Caret => {
                if v < c {
                    return false;
                }
                if c.major > 0 || self.minor_dirty {
                    return v.major == c.major;
                }
                if v.major > 0 {
                    return false;
                }
                if c.minor > 0 || self.patch_dirty {
                    return v.minor == c.minor;
                }
                if v.minor > 0 {
                    return false;
                }
                c.patch == v.patch
            }
        }
    }

    fn tilde(&self, v: &Version) -> bool {
        let c = &self.version;
        if v < c {
            return false;
        }
        if (c.major, c.minor, c.patch) == (0, 0, 0) && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        v.major == c.major && (v.minor == c.minor || self.minor_dirty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (constraint, versions that satisfy it, versions that do not)
    const CASES: &[(&str, &[&str], &[&str])] = &[
        ("1.2.3", &["1.2.3", "v1.2.3"], &["1.2.4", "1.2.2", "1.2.3-rc.1"]),
        ("=1.2", &["1.2.0", "1.2.9"], &["1.3.0", "1.1.9"]),
        ("1.x", &["1.0.0", "1.9.9"], &["2.0.0", "0.9.0"]),
        ("1.2.x", &["1.2.0", "1.2.7"], &["1.3.0"]),
        ("*", &["0.0.1", "9.9.9"], &["1.0.0-alpha"]),
        ("~1.2.3", &["1.2.3", "1.2.9"], &["1.3.0", "1.2.2"]),
        ("~1", &["1.0.0", "1.9.0"], &["2.0.0"]),
        ("~1.2", &["1.2.0", "1.2.5"], &["1.3.0"]),
        ("^1.2.3", &["1.2.3", "1.9.0"], &["2.0.0", "1.2.2"]),
        ("^0.2.3", &["0.2.3", "0.2.9"], &["0.3.0"]),
        ("^0.0.3", &["0.0.3"], &["0.0.4"]),
        ("^0", &["0.0.0", "0.9.9"], &["1.0.0"]),
        (">= 1.0 < 2.0", &["1.0.0", "1.9.9"], &["2.0.0", "0.9.9"]),
        (">=1.0, <2.0", &["1.5.0"], &["2.0.0"]),
        ("> 1.2", &["1.3.0", "2.0.0"], &["1.2.9", "1.2.0"]),
        ("<= 2.x", &["2.9.9", "1.0.0"], &["3.0.0"]),
        ("!= 1.2.3", &["1.2.4"], &["1.2.3"]),
        ("1.2 - 1.4.5", &["1.2.0", "1.4.5"], &["1.4.6", "1.1.9"]),
        ("1.x || >= 3.1", &["1.4.0", "3.1.0", "4.0.0"], &["2.0.0", "3.0.9"]),
        (">= 1.0.0-0", &["1.0.0-rc.1", "2.0.0"], &["0.9.0"]),
        ("~1.2.3-beta.2", &["1.2.3-beta.10", "1.2.4"], &["1.2.3-beta.1", "1.3.0"]),
    ];

    #[test]
    fn every_constraint_form_matches_as_source_controller_does() {
        for (constraint, good, bad) in CASES {
            let parsed = Constraint::parse(constraint).unwrap_or_else(|e| panic!("{constraint}: {e}"));
            for v in *good {
                assert!(parsed.matches(&Version::parse(v).unwrap()), "{constraint} should match {v}");
            }
            for v in *bad {
                assert!(!parsed.matches(&Version::parse(v).unwrap()), "{constraint} should not match {v}");
            }
        }
    }

    #[test]
    fn the_highest_matching_version_wins_and_junk_is_refused() {
        let c = Constraint::parse("~1.2").unwrap();
        assert_eq!(
            c.best(["1.2.0", "1.2.10", "1.2.9", "1.3.0", "not-a-version"]).unwrap().original(),
            "1.2.10"
        );
        assert!(c.best(["2.0.0"]).is_none());
        for junk in ["", "abc", ">>1", "1.2.3 ||| 2", "1.2.3-"] {
            assert!(Constraint::parse(junk).is_err(), "{junk:?}");
        }
        assert!(Version::parse("1.2.3-").is_none());
        assert!(Version::parse("1.2.3-rc..1").is_none());
    }
}
