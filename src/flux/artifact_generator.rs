//! The Flux 2.7 `ArtifactGenerator` (source.extensions.fluxcd.io/v1beta1, served by
//! fluxcd/source-watcher): which `ExternalArtifact`s it produces and the copy operations that fill
//! them. Pure: parsing, validation and the path/glob rules; `render::artifacts` does the copying.
//!
//! Facts (fluxcd/source-watcher `api/v1beta1/artifactgenerator_types.go`,
//! `internal/builder/builder.go`, `internal/controller/artifactgenerator_controller.go`):
//! - `spec.sources[]`: `alias`, `kind` (Bucket, GitRepository, OCIRepository, HelmChart,
//!   ExternalArtifact), `name`, `namespace` (defaults to the generator's).
//! - `spec.artifacts[]`: `name` (the ExternalArtifact's name; it lives in the generator's
//!   namespace), `copy[]` of `{from: "@alias/pattern", to: "@artifact/path", exclude[], strategy}`
//!   applied in order, later files overwriting earlier ones.
//! - `strategy`: Overwrite (default), Merge (YAML deep merge of maps, lists replaced, when the
//!   destination exists), Extract (tarballs).
//! - `spec.pathPattern: "@alias/apps/{app}"` expands one generator per matching directory of the
//!   source (`internal/controller/artifactgenerator_pathpattern.go`): `{name}` captures one path
//!   segment; artifact names take the captures lower-cased, `from`/`to` take them as found.

use serde_json::Value;
use std::collections::BTreeMap;

/// API group of the source extensions (ArtifactGenerator).
pub const EXTENSIONS_GROUP: &str = "source.extensions.fluxcd.io";

/// The most copy operations, sources and artifacts one generator may list (the CRD's own caps).
const MAX_ITEMS: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Overwrite,
    Merge,
    Extract,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorSource {
    pub alias: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// One copy operation, its paths already checked to stay inside their roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOperation {
    /// As written, for messages.
    pub from_raw: String,
    pub to_raw: String,
    pub alias: String,
    /// The pattern (or plain path) inside the source; "" is the source's root.
    pub pattern: String,
    /// The destination inside the artifact; "" is the artifact's root.
    pub to: String,
    /// `to` ends with `/`: a file copied there keeps its name.
    pub to_is_dir: bool,
    pub exclude: Vec<String>,
    pub strategy: Strategy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputArtifact {
    pub name: String,
    pub copy: Vec<CopyOperation>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactGenerator {
    pub namespace: String,
    pub name: String,
    pub sources: Vec<GeneratorSource>,
    pub artifacts: Vec<OutputArtifact>,
    /// Set when the generator expands `spec.pathPattern` (its artifacts are name templates).
    pub path_pattern: Option<String>,
}

/// True when a manifest is an ArtifactGenerator.
pub fn is_artifact_generator(doc: &Value) -> bool {
    let api = doc["apiVersion"].as_str().unwrap_or("");
    super::split_api_version(api).0 == EXTENSIONS_GROUP && doc["kind"] == "ArtifactGenerator"
}

impl ArtifactGenerator {
    /// Reads and validates a generator; every path it names is hostile until checked here.
    pub fn from_value(doc: &Value, default_namespace: &str) -> Result<Self, String> {
        let meta = &doc["metadata"];
        let name = meta["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or("ArtifactGenerator has no metadata.name")?;
        let namespace = meta["namespace"].as_str().unwrap_or(default_namespace).to_string();
        let me = format!("ArtifactGenerator {namespace}/{name}");
        let spec = &doc["spec"];
        let list = |field: &str| -> Result<&Vec<Value>, String> {
            let items = spec[field].as_array().ok_or_else(|| format!("{me}: spec.{field} must be a list"))?;
            if items.is_empty() || items.len() > MAX_ITEMS {
                return Err(format!("{me}: spec.{field} must hold 1 to {MAX_ITEMS} entries"));
            }
            Ok(items)
        };
        let mut sources: Vec<GeneratorSource> = Vec::new();
        for (i, source) in list("sources")?.iter().enumerate() {
            let field = |key: &str| {
                source[key]
                    .as_str()
                    .filter(|v| !v.is_empty())
                    .map(str::to_string)
                    .ok_or_else(|| format!("{me}: spec.sources[{i}].{key} is missing"))
            };
            let alias = field("alias")?;
            if !is_alias(&alias) {
                return Err(format!(
                    "{me}: source alias '{alias}' must be lower-case letters, digits, '-' or '_'"
                ));
            }
            if sources.iter().any(|s| s.alias == alias) {
                return Err(format!("{me}: duplicate source alias '{alias}'"));
            }
            sources.push(GeneratorSource {
                alias,
                kind: field("kind")?,
                namespace: source["namespace"]
                    .as_str()
                    .filter(|v| !v.is_empty())
                    .unwrap_or(&namespace)
                    .to_string(),
                name: field("name")?,
            });
        }
        let path_pattern = spec["pathPattern"].as_str().filter(|p| !p.is_empty()).map(str::to_string);
        let mut artifacts: Vec<OutputArtifact> = Vec::new();
        for (i, artifact) in list("artifacts")?.iter().enumerate() {
            let artifact_name = artifact["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| format!("{me}: spec.artifacts[{i}].name is missing"))?;
            if artifacts.iter().any(|a| a.name == artifact_name) {
                return Err(format!("{me}: duplicate artifact name '{artifact_name}'"));
            }
            let ops =
                artifact["copy"].as_array().filter(|c| !c.is_empty() && c.len() <= MAX_ITEMS).ok_or_else(
                    || format!("{me}: artifact {artifact_name}: copy must list 1 to {MAX_ITEMS} operations"),
                )?;
            let mut copy = Vec::new();
            for op in ops {
                let parsed = CopyOperation::from_value(op)
                    .map_err(|e| format!("{me}: artifact {artifact_name}: {e}"))?;
                if !sources.iter().any(|s| s.alias == parsed.alias) {
                    return Err(format!(
                        "{me}: artifact {artifact_name}: copy from '{}': source alias '{}' is not in spec.sources",
                        parsed.from_raw, parsed.alias
                    ));
                }
                copy.push(parsed);
            }
            artifacts.push(OutputArtifact { name: artifact_name.to_string(), copy });
        }
        if let Some(pattern) = &path_pattern {
            let parsed = PathPattern::parse(pattern).map_err(|e| format!("{me}: {e}"))?;
            if !sources.iter().any(|s| s.alias == parsed.alias) {
                return Err(format!(
                    "{me}: pathPattern '{pattern}': source alias '{}' is not in spec.sources",
                    parsed.alias
                ));
            }
        }
        Ok(ArtifactGenerator { namespace, name: name.to_string(), sources, artifacts, path_pattern })
    }

    pub fn reference(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The artifacts one directory matched by `spec.pathPattern` yields, with the captures put in.
    pub fn expand(&self, captures: &BTreeMap<String, String>) -> Result<Vec<OutputArtifact>, String> {
        let lower: BTreeMap<String, String> =
            captures.iter().map(|(k, v)| (k.clone(), v.to_lowercase())).collect();
        let mut out = Vec::new();
        for artifact in &self.artifacts {
            let name = render_template(&artifact.name, &lower)?;
            let mut copy = Vec::new();
            for op in &artifact.copy {
                let rendered = serde_json::json!({
                    "from": render_template(&op.from_raw, captures)?,
                    "to": render_template(&op.to_raw, captures)?,
                    "exclude": op.exclude,
                    "strategy": match op.strategy {
                        Strategy::Overwrite => "Overwrite",
                        Strategy::Merge => "Merge",
                        Strategy::Extract => "Extract",
                    },
                });
                copy.push(CopyOperation::from_value(&rendered).map_err(|e| format!("artifact {name}: {e}"))?);
            }
            out.push(OutputArtifact { name, copy });
        }
        Ok(out)
    }
}

/// `spec.pathPattern` compiled: the source alias and a matcher of directory paths.
#[derive(Debug, Clone)]
pub struct PathPattern {
    pub alias: String,
    matcher: regex::Regex,
}

impl PathPattern {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let (alias, pattern) = raw
            .strip_prefix('@')
            .and_then(|rest| rest.split_once('/'))
            .filter(|(alias, _)| is_alias(alias))
            .ok_or_else(|| format!("pathPattern '{raw}' must read '@<alias>/<pattern>'"))?;
        let mut regex = String::from("^");
        let mut seen: Vec<&str> = Vec::new();
        let mut rest = pattern;
        while let Some(open) = rest.find(['{', '}']) {
            if rest.as_bytes()[open] == b'}' {
                return Err(format!("pathPattern '{raw}': '}}' without '{{'"));
            }
            let close =
                rest[open..].find('}').ok_or_else(|| format!("pathPattern '{raw}': '{{' without '}}'"))?;
            let name = &rest[open + 1..open + close];
            if !is_capture_name(name) || seen.contains(&name) {
                return Err(format!(
                    "pathPattern '{raw}': capture '{{{name}}}' must be a new name of letters, digits or '_'"
                ));
            }
            seen.push(name);
            regex.push_str(&regex::escape(&rest[..open]));
            regex.push_str(&format!("(?P<{name}>[^/]+)"));
            rest = &rest[open + close + 1..];
        }
        regex.push_str(&regex::escape(rest));
        regex.push('$');
        let matcher = regex::Regex::new(&regex).map_err(|e| format!("pathPattern '{raw}': {e}"))?;
        Ok(PathPattern { alias: alias.to_string(), matcher })
    }

    /// The captures when the directory `path` (relative to the source root) matches.
    pub fn captures(&self, path: &str) -> Option<BTreeMap<String, String>> {
        let found = self.matcher.captures(path)?;
        Some(
            self.matcher
                .capture_names()
                .flatten()
                .filter_map(|n| Some((n.to_string(), found.name(n)?.as_str().to_string())))
                .collect(),
        )
    }
}

fn is_capture_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `{name}` placeholders replaced by their captures; an unknown or malformed one is an error.
pub fn render_template(template: &str, captures: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err(format!("'{template}': '}}' without '{{'"));
        }
        let close = rest[open..].find('}').ok_or_else(|| format!("'{template}': '{{' without '}}'"))?;
        let name = &rest[open + 1..open + close];
        let value = captures
            .get(name)
            .ok_or_else(|| format!("'{template}': '{{{name}}}' is not captured by spec.pathPattern"))?;
        out.push_str(&rest[..open]);
        out.push_str(value);
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl CopyOperation {
    fn from_value(op: &Value) -> Result<Self, String> {
        let from_raw = op["from"].as_str().ok_or("a copy operation has no 'from'")?.to_string();
        let to_raw =
            op["to"].as_str().ok_or_else(|| format!("copy from '{from_raw}' has no 'to'"))?.to_string();
        let what = format!("copy from '{from_raw}' to '{to_raw}'");
        let (alias, pattern) = from_raw
            .strip_prefix('@')
            .and_then(|rest| rest.split_once('/'))
            .filter(|(alias, _)| is_alias(alias))
            .ok_or_else(|| format!("{what}: 'from' must read '@<alias>/<path or glob>'"))?;
        let to = to_raw
            .strip_prefix("@artifact/")
            .ok_or_else(|| format!("{what}: 'to' must read '@artifact/<path>'"))?;
        let alias = alias.to_string();
        let pattern =
            contained(pattern).map_err(|e| format!("{what}: 'from' {e}; it must stay inside the source"))?;
        let to_clean =
            contained(to).map_err(|e| format!("{what}: 'to' {e}; it must stay inside the artifact"))?;
        let exclude: Vec<String> = match &op["exclude"] {
            Value::Null => Vec::new(),
            Value::Array(items) if items.len() <= 100 => items
                .iter()
                .map(|p| {
                    p.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("{what}: exclude holds a non-string"))
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(format!("{what}: exclude must be a list of at most 100 globs")),
        };
        for pattern in &exclude {
            glob_matcher(pattern).map_err(|e| format!("{what}: invalid exclude pattern '{pattern}': {e}"))?;
        }
        let strategy = match op["strategy"].as_str() {
            None | Some("Overwrite") => Strategy::Overwrite,
            Some("Merge") => Strategy::Merge,
            Some("Extract") => Strategy::Extract,
            Some(other) => {
                return Err(format!("{what}: strategy '{other}' is not Overwrite, Merge or Extract"))
            }
        };
        Ok(CopyOperation {
            to_is_dir: to.ends_with('/') || to_clean.is_empty(),
            from_raw,
            to_raw,
            alias,
            pattern,
            to: to_clean,
            exclude,
            strategy,
        })
    }

    /// True when `from` names files by glob rather than one path.
    pub fn is_glob(&self) -> bool {
        has_glob_chars(&self.pattern)
    }
}

fn is_alias(alias: &str) -> bool {
    !alias.is_empty()
        && alias.len() <= 63
        && alias.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && alias.as_bytes()[0].is_ascii_alphanumeric()
        && alias.as_bytes()[alias.len() - 1].is_ascii_alphanumeric()
}

pub fn has_glob_chars(path: &str) -> bool {
    path.contains(['*', '?', '[', ']'])
}

/// A relative path with `.` and empty parts dropped; refused when it is absolute or climbs out
/// with `..` (the controller confines copies with os.Root; fluxplan refuses them outright).
pub fn contained(path: &str) -> Result<String, String> {
    if path.starts_with('/') {
        return Err(format!("'{path}' is absolute"));
    }
    if path.contains('\\') || path.contains('\0') {
        return Err(format!("'{path}' holds a backslash or NUL"));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(format!("'{path}' climbs out with '..'")),
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// A glob as the controller's doublestar matches it: `*` stays within one path segment, `**`
/// spans any number of them.
pub fn glob_matcher(pattern: &str) -> Result<globset::GlobMatcher, String> {
    // Go negates a class with `^` as well as `!`; globset knows only `!`.
    globset::GlobBuilder::new(&pattern.replace("[^", "[!"))
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.kind().to_string())
}

/// The literal directory a pattern selects from, before its first glob segment ("" for the root).
pub fn selection_root(pattern: &str) -> String {
    pattern
        .split('/')
        .take_while(|part| !has_glob_chars(part))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

/// Where a glob match lands: `dir/**` copies what is under `dir` (like `cp -r dir/* dest/`);
/// any other pattern keeps the match's whole path under the destination.
pub fn glob_destination(pattern: &str, matched: &str, to: &str) -> String {
    let rest = pattern
        .strip_suffix("/**")
        .and_then(|prefix| matched.strip_prefix(prefix)?.strip_prefix('/'))
        .unwrap_or(matched);
    join(to, rest)
}

pub fn join(dir: &str, name: &str) -> String {
    match (dir.is_empty(), name.is_empty()) {
        (true, _) => name.to_string(),
        (_, true) => dir.to_string(),
        _ => format!("{dir}/{name}"),
    }
}

/// Exclusion as the controller decides it: a pattern matches the path from the source root, or
/// the path from the selection root; a pattern without `/` also matches the file name alone.
pub struct Excludes(Vec<(globset::GlobMatcher, bool)>);

impl Excludes {
    pub fn new(patterns: &[String]) -> Result<Self, String> {
        patterns
            .iter()
            .map(|p| glob_matcher(p).map(|m| (m, !p.contains('/'))))
            .collect::<Result<_, _>>()
            .map(Excludes)
    }

    /// `path` is relative to the source root; `base` is the selection root.
    pub fn excludes(&self, path: &str, base: &str) -> bool {
        if self.0.is_empty() {
            return false;
        }
        if self.matches(path) {
            return true;
        }
        let relative =
            if base.is_empty() { None } else { path.strip_prefix(base).and_then(|r| r.strip_prefix('/')) };
        relative.is_some_and(|r| !r.is_empty() && self.matches(r))
    }

    fn matches(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        self.0.iter().any(|(m, name_only)| m.is_match(path) || (*name_only && m.is_match(name)))
    }
}

/// One segment of a `from` glob, matched as Go's `path.Match` does (the controller globs with
/// `fs.Glob`, where `**` is no more than `*`).
pub fn segment_matcher(segment: &str) -> Result<globset::GlobMatcher, String> {
    // `path.Match` has no `{a,b}` alternatives: braces are literal there.
    glob_matcher(&segment.replace("**", "*").replace('{', "\\{").replace('}', "\\}"))
}

/// Deep merge of YAML mappings as the Merge strategy does it: maps merge key by key, anything
/// else (lists included) is replaced by the overlay's value.
pub fn merge_values(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge_values(existing, value)
                    }
                    _ => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, overlay) => *base = overlay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn generator(copy: Value) -> Result<ArtifactGenerator, String> {
        ArtifactGenerator::from_value(
            &json!({
                "apiVersion": "source.extensions.fluxcd.io/v1beta1",
                "kind": "ArtifactGenerator",
                "metadata": {"name": "gen"},
                "spec": {
                    "sources": [{"alias": "repo", "kind": "GitRepository", "name": "flux-system"}],
                    "artifacts": [{"name": "apps", "copy": copy}],
                },
            }),
            "flux-system",
        )
    }

    #[test]
    fn parses_the_example_layout() {
        let g = generator(json!([
            {"from": "@repo/apps/base/**", "to": "@artifact/base/"},
            {"from": "@repo/apps/x.yaml", "to": "@artifact/y.yaml", "strategy": "Merge", "exclude": ["*.md"]},
        ]))
        .unwrap();
        assert_eq!(g.namespace, "flux-system");
        assert_eq!(g.sources[0].namespace, "flux-system", "source namespace defaults to the generator's");
        let ops = &g.artifacts[0].copy;
        assert_eq!(
            (ops[0].pattern.as_str(), ops[0].to.as_str(), ops[0].to_is_dir),
            ("apps/base/**", "base", true)
        );
        assert!(ops[0].is_glob());
        assert_eq!(
            (ops[1].to.as_str(), ops[1].to_is_dir, ops[1].strategy),
            ("y.yaml", false, Strategy::Merge)
        );
    }

    #[test]
    fn refuses_paths_that_leave_their_root() {
        for (from, to, says) in [
            ("@repo/../../etc/**", "@artifact/", "'from' '../../etc/**' climbs out"),
            ("@repo/apps/../../x", "@artifact/", "climbs out"),
            ("@repo//etc/passwd", "@artifact/", "'from' '/etc/passwd' is absolute"),
            ("@repo/apps/**", "@artifact/../x", "'to' '../x' climbs out"),
            ("@repo/apps/**", "../x", "'to' must read '@artifact/<path>'"),
            ("repo/apps", "@artifact/", "'from' must read '@<alias>/<path or glob>'"),
            ("@other/apps", "@artifact/", "source alias 'other' is not in spec.sources"),
        ] {
            let error = generator(json!([{"from": from, "to": to}])).unwrap_err();
            assert!(error.contains(says), "{from} -> {to}: {error}");
        }
    }

    #[test]
    fn refuses_invalid_strategies_and_duplicates() {
        let error =
            generator(json!([{"from": "@repo/a", "to": "@artifact/", "strategy": "Append"}])).unwrap_err();
        assert!(error.contains("strategy 'Append'"), "{error}");
        let error = generator(json!([])).unwrap_err();
        assert!(error.contains("copy must list"), "{error}");
    }

    #[test]
    fn destinations_follow_cp() {
        assert_eq!(glob_destination("apps/base/**", "apps/base/podinfo", "base"), "base/podinfo");
        assert_eq!(glob_destination("apps/*.yaml", "apps/a.yaml", "out"), "out/apps/a.yaml");
        assert_eq!(glob_destination("**", "apps", ""), "apps");
        assert_eq!(selection_root("apps/base/*/x"), "apps/base");
        assert_eq!(selection_root("*.yaml"), "");
    }

    #[test]
    fn excludes_match_full_relative_and_file_names() {
        let ex = Excludes::new(&["*.md".into(), "**/testdata/**".into(), "secret/x.yaml".into()]).unwrap();
        assert!(ex.excludes("apps/deep/README.md", "apps"), "a name-only pattern matches at any depth");
        assert!(ex.excludes("apps/testdata/a.yaml", "apps"));
        assert!(ex.excludes("apps/secret/x.yaml", "apps"), "matched relative to the selection root");
        assert!(!ex.excludes("secretx/x.yaml", ""));
        assert!(!ex.excludes("apps/a.yaml", "apps"));
    }

    #[test]
    fn segments_glob_like_go() {
        let m = segment_matcher("**").unwrap();
        assert!(m.is_match("apps") && m.is_match(".hidden"));
        assert!(segment_matcher("*.yaml").unwrap().is_match("a.yaml"));
        assert!(!segment_matcher("*.yaml").unwrap().is_match("a.yml"));
        assert!(segment_matcher("{a,b}").unwrap().is_match("{a,b}"), "braces are literal in Go");
        assert!(!segment_matcher("{a,b}").unwrap().is_match("a"));
        assert!(
            segment_matcher("[^a]x").unwrap().is_match("bx")
                && !segment_matcher("[^a]x").unwrap().is_match("ax")
        );
    }

    #[test]
    fn path_patterns_capture_segments_and_fill_templates() {
        let p = PathPattern::parse("@repo/apps/{app}/envs/{env}").unwrap();
        assert_eq!(p.alias, "repo");
        let c = p.captures("apps/Web/envs/prod").unwrap();
        assert_eq!(c, BTreeMap::from([("app".into(), "Web".into()), ("env".into(), "prod".into())]));
        assert!(p.captures("apps/web/envs").is_none() && p.captures("apps/a/b/envs/prod").is_none());
        assert_eq!(render_template("{app}-{env}", &c).unwrap(), "Web-prod");
        assert!(render_template("{other}", &c).unwrap_err().contains("not captured"));
        for bad in ["@repo/{a}/{a}", "@repo/{a", "@repo/a}", "@repo/{1a}", "repo/{a}"] {
            assert!(PathPattern::parse(bad).is_err(), "{bad}");
        }
        // Regex characters in the literal part are literal.
        assert!(PathPattern::parse("@repo/a.b/{x}").unwrap().captures("aXb/y").is_none());
    }

    #[test]
    fn expansion_lowercases_names_and_revalidates_paths() {
        let g = ArtifactGenerator::from_value(
            &json!({"metadata": {"name": "g"}, "spec": {
                "pathPattern": "@repo/apps/{app}",
                "sources": [{"alias": "repo", "kind": "GitRepository", "name": "r"}],
                "artifacts": [{"name": "{app}-art", "copy": [{"from": "@repo/apps/{app}/**", "to": "@artifact/"}]}]}}),
            "ns",
        )
        .unwrap();
        let made = g.expand(&BTreeMap::from([("app".into(), "Web".into())])).unwrap();
        assert_eq!(made[0].name, "web-art");
        assert_eq!(made[0].copy[0].pattern, "apps/Web/**");
        let error = g.expand(&BTreeMap::from([("app".into(), "..".into())])).unwrap_err();
        assert!(error.contains("climbs out"), "{error}");
    }

    #[test]
    fn merge_replaces_lists_and_merges_maps() {
        let mut base = json!({"a": {"b": 1, "c": [1, 2]}, "d": 1});
        merge_values(&mut base, json!({"a": {"c": [3], "e": 2}, "d": {"x": 1}}));
        assert_eq!(base, json!({"a": {"b": 1, "c": [3], "e": 2}, "d": {"x": 1}}));
    }
}
