//! Every file or URL a kustomization names, found before kustomize runs, and the rule that
//! each must be an existing local path inside the source. This is the first wall against a pull
//! request that wants kustomize to read the planner's files or fetch from its network (the
//! sandbox is the second): anything it cannot account for is refused, never skipped.
//!
//! kustomize must read exactly what was checked: kustomization files and plugin configurations
//! are handed to it re-serialized from what this module parsed (`canonical_kustomization`,
//! `rewrite`), so no YAML feature the two parsers read differently (tags, anchors) can hide a
//! reference.

use super::RenderError;
use crate::flux::generator::is_remote;
use crate::paths;
use crate::yaml;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Kustomization fields that list files or directories.
const LIST_FIELDS: &[&str] = &[
    "resources",
    "bases",
    "components",
    "crds",
    "configurations",
    "patchesStrategicMerge",
    "transformers",
    "generators",
    "validators",
];
/// Fields whose entries are plugin configurations (inline or in the files they name), which
/// name files of their own.
pub const PLUGIN_FIELDS: &[&str] = &["transformers", "generators", "validators"];
/// Fields holding a list of objects, each with a `path`.
const PATH_OBJECT_FIELDS: &[&str] = &["patches", "patchesJson6902", "replacements"];
/// Generator fields whose objects name files (`files` entries may be `key=path`).
const GENERATOR_FIELDS: &[&str] = &["configMapGenerator", "secretGenerator"];

/// One reference: the field that holds it and the path or URL as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub field: String,
    pub value: String,
    /// The target holds plugin configurations (a file of them, or a kustomization whose
    /// resources are), whose own references must be checked too; otherwise it is data.
    pub plugin: bool,
    /// Inline objects, already checked: kustomize reads them in place, or, when it cannot, as a
    /// path, which therefore must not exist.
    pub inline: bool,
}

/// A reference checked against the source root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    pub field: String,
    pub path: PathBuf,
    pub plugin: bool,
    pub inline: bool,
}

/// The only fields a kustomization used as a source of plugin configurations may have: one that
/// transforms its resources could rewrite a checked configuration into an unchecked one.
const PLUGIN_KUSTOMIZATION_FIELDS: &[&str] = &["apiversion", "kind", "metadata", "resources", "bases"];

/// The references of a kustomization document. kustomize matches field names without regard
/// to case (Go's JSON decoding) and applies YAML merge keys; both are accounted for here, so a
/// field cannot hide behind `Resources:`, a non-ASCII look-alike or `<<:`. In a kustomization
/// used as a source of plugin configurations (`plugin_context`), only resources are allowed.
pub fn of_kustomization(
    document: &Value,
    file: &str,
    plugin_context: bool,
) -> Result<Vec<Reference>, RenderError> {
    let document = folded(document, file)?;
    if plugin_context {
        let fields = document.as_object().into_iter().flatten().map(|(k, _)| k);
        if let Some(field) = fields.into_iter().find(|k| !PLUGIN_KUSTOMIZATION_FIELDS.contains(&k.as_str())) {
            return Err(RenderError::InvalidSource(format!(
                "{file} is used as a source of plugin configurations and sets '{field}': such a kustomization \
                 may only list resources (fluxplan cannot check what its transformations make of them)"
            )));
        }
    }
    let mut out = Vec::new();
    for field in LIST_FIELDS {
        for item in list(&document, field) {
            let plugin_field = PLUGIN_FIELDS.contains(field);
            let inline_field = plugin_field || *field == "patchesStrategicMerge";
            match inline_field.then(|| inline_documents(item)).flatten() {
                Some(docs) => {
                    // An inline plugin configuration: its references are checked here, and
                    // kustomize gets its re-serialization (see `canonical_kustomization`), which
                    // is therefore what must name no path. An inline strategic-merge patch is
                    // content, handed on as written.
                    if plugin_field {
                        let text = Value::String(yaml::to_yaml_stream(&docs));
                        for doc in &unlisted(docs) {
                            out.extend(of_plugin_config(doc, file)?);
                        }
                        push_inline(&mut out, field, &text);
                    } else {
                        push_inline(&mut out, field, item);
                    }
                }
                None => match item.as_str() {
                    // URLs fall through to `check`, which names them as such.
                    Some(text)
                        if inline_field && !plain_path(text) && !is_remote(text) && !looks_like_url(text) =>
                    {
                        return Err(RenderError::InvalidSource(format!(
                            "{field} entry '{}' in {file} is neither a plain path nor inline objects with a \
                             kind: fluxplan cannot tell how kustomize would read it",
                            excerpt(text)
                        )))
                    }
                    Some(text) => {
                        let plugin =
                            plugin_field || (plugin_context && matches!(*field, "resources" | "bases"));
                        out.push(Reference {
                            field: field.to_string(),
                            value: text.to_string(),
                            plugin,
                            inline: false,
                        });
                    }
                    None => return Err(unreadable(file, field, "an entry is not a string")),
                },
            }
        }
    }
    for field in PATH_OBJECT_FIELDS {
        for item in list(&document, field) {
            if let Some(path) = get(item, "path") {
                push_string(&mut out, field, path, file)?;
            }
        }
    }
    if let Some(path) = get(&document, "openapi").and_then(|o| get(o, "path")) {
        push_string(&mut out, "openapi", path, file)?;
    }
    for field in GENERATOR_FIELDS {
        for generator in list(&document, field) {
            out.extend(generator_files(generator, field, file)?);
        }
    }
    out.extend(helm_references(&document, file)?);
    Ok(out)
}

/// The documents of an entry that is an inline configuration or patch (YAML or JSON objects with
/// a `kind`, written in place) rather than a path. kustomize tries an entry as inline objects
/// first and as a path second; an entry is inline here exactly when it is inline there, because
/// anything else must be a plain path (see `plain_path`).
fn inline_documents(item: &Value) -> Option<Vec<Value>> {
    if item.is_object() {
        return Some(vec![item.clone()]);
    }
    let docs = yaml::parse_documents(item.as_str()?).ok()?;
    let with_kind = |d: &Value| d.get("kind").is_some_and(Value::is_string);
    (!docs.is_empty() && docs.iter().all(with_kind)).then_some(docs)
}

/// A path no YAML reader takes for inline objects: letters, digits and `._-/+=,~` only.
fn plain_path(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "._-/+=,~".contains(c))
}

/// Plugin configurations as kustomize reads them: a `*List` stands for its items.
pub fn unlisted(docs: Vec<Value>) -> Vec<Value> {
    docs.into_iter()
        .flat_map(|doc| {
            let is_list = doc.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"));
            match doc.get("items").and_then(Value::as_array) {
                Some(items) if is_list => unlisted(items.clone()),
                _ => vec![doc],
            }
        })
        .collect()
}

/// Replaces every inline plugin configuration of a kustomization with its re-serialization, so
/// kustomize reads the configuration that was checked and nothing a YAML tag could change.
pub fn canonical_kustomization(document: &mut Value) {
    let Some(map) = document.as_object_mut() else { return };
    for (key, value) in map.iter_mut() {
        if !PLUGIN_FIELDS.iter().any(|f| key.eq_ignore_ascii_case(f)) {
            continue;
        }
        for item in value.as_array_mut().into_iter().flatten() {
            if let Some(docs) = item.is_string().then(|| inline_documents(item)).flatten() {
                *item = Value::String(yaml::to_yaml_stream(&docs));
            }
        }
    }
}

/// The references of one builtin plugin configuration (`apiVersion: builtin`, or any other:
/// kustomize refuses non-builtin plugins, but a field naming a file is checked all the same).
pub fn of_plugin_config(document: &Value, file: &str) -> Result<Vec<Reference>, RenderError> {
    let document = folded(document, file)?;
    let kind = get(&document, "kind").and_then(Value::as_str).unwrap_or("plugin").to_string();
    let field = |name: &str| format!("{kind}.{name}");
    let mut out = Vec::new();
    // Every field named like a path or a file (`path`, `targetFilePath`, `valuesFile`, ...),
    // known to today's builtins or not; generators' `files`/`envs`/`env` are read below.
    for (name, value) in document.as_object().into_iter().flatten() {
        let pathlike = ["path", "paths", "file", "files"].iter().any(|end| name.ends_with(end));
        if !pathlike || matches!(name.as_str(), "files" | "envs" | "env") {
            continue;
        }
        let values = value.as_array().map_or_else(|| vec![value], |items| items.iter().collect());
        for value in values {
            match (name == "paths").then(|| inline_documents(value)).flatten() {
                Some(_) => push_inline(&mut out, &field(name), value),
                None => push_string(&mut out, &field(name), value, file)?,
            }
        }
    }
    for item in list(&document, "replacements") {
        if let Some(path) = get(item, "path") {
            push_string(&mut out, &field("replacements.path"), path, file)?;
        }
    }
    out.extend(generator_files(&document, &kind, file)?);
    for name in ["chartHome", "configHome", "repo"] {
        if let Some(value) = get(&document, name) {
            push_string(&mut out, &field(name), value, file)?;
        }
    }
    Ok(out)
}

/// Checks one reference made from `dir`: URLs fail with `remote-base`; absolute paths, paths
/// that climb out of `root` (lexically, or through a symlink) and paths that cannot be
/// normalised fail with `invalid-source`.
pub fn check(
    root: &Path,
    dir: &Path,
    reference: &Reference,
    here: &str,
    resolver: &Resolver,
) -> Result<Local, RenderError> {
    let Reference { field, value, plugin, inline } = reference;
    if *inline {
        return check_inline(root, dir, reference, here);
    }
    // Where the reference lands, lexically; `None` when it leaves the source.
    let lexical = (!value.is_empty() && !value.contains('\0') && !Path::new(value).is_absolute())
        .then(|| paths::normalize(&dir.join(value)))
        .flatten()
        .filter(|p| p.starts_with(root));
    // kustomize loads an existing file before it considers a remote; a directory spelled like a
    // repository it may fetch instead.
    let local_file =
        !is_remote(value) && !looks_like_url(value) && lexical.as_ref().is_some_and(|p| p.is_file());
    if url_like(value) && !local_file {
        return Err(RenderError::RemoteBase(format!(
            "{field} entry '{value}' in {here} is a URL: fluxplan never fetches from the network \
             (kustomize-controller does, unless it runs with `--no-remote-bases`); vendor it into the repository"
        )));
    }
    let outside = || {
        RenderError::InvalidSource(format!(
            "{field} entry '{value}' in {here} points outside the source: Flux only reads files inside \
             the source artifact"
        ))
    };
    let path = lexical.ok_or_else(outside)?;
    // Only what exists is read: anything else would be kustomize's to interpret (as a remote
    // repository, for one), and it would fail the build anyway.
    let Ok(real) = resolver.canonicalize(&path) else {
        return Err(if looks_remote(value) {
            RenderError::RemoteBase(format!(
                "{field} entry '{value}' in {here} is not in the source and looks like a remote location: \
                 fluxplan never fetches from the network; vendor it into the repository"
            ))
        } else {
            RenderError::InvalidSource(format!(
                "{field} entry '{value}' in {here} does not exist in the source"
            ))
        });
    };
    // The export holds no symlinks; a tree that does (a working-tree render) must not lead out.
    // The root is resolved only when needed (it is itself reached through a symlink).
    if !real.starts_with(root) {
        let real_root = resolver.canonicalize(root).map_err(|e| RenderError::InvalidSource(e.to_string()))?;
        if !real.starts_with(real_root) {
            return Err(outside());
        }
    }
    Ok(Local { field: field.clone(), path, plugin: *plugin, inline: false })
}

/// Canonical paths of one render's trees, with each directory resolved once: thousands of
/// references land in the same few directories. Trees do not change while they are rendered
/// (builds cannot write to them), so a resolved directory stays resolved.
#[derive(Default)]
pub struct Resolver {
    dirs: std::sync::Mutex<std::collections::HashMap<PathBuf, PathBuf>>,
}

impl Resolver {
    /// What `path.canonicalize()` gives, for an existing path without `.` or `..` components.
    pub fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return path.canonicalize();
        };
        if path.symlink_metadata()?.file_type().is_symlink() {
            return path.canonicalize();
        }
        let known = self.dirs.lock().unwrap_or_else(|e| e.into_inner()).get(parent).cloned();
        let parent_real = match known {
            Some(real) => real,
            None => {
                let real = parent.canonicalize()?;
                self.dirs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(parent.to_path_buf(), real.clone());
                real
            }
        };
        Ok(parent_real.join(name))
    }
}

/// An inline entry read as a path, as kustomize does when it cannot read it in place: it must
/// name nothing, neither a remote location nor a path in or out of the source.
fn check_inline(root: &Path, dir: &Path, reference: &Reference, here: &str) -> Result<Local, RenderError> {
    let Reference { field, value, .. } = reference;
    let start = value.trim_start().to_ascii_lowercase();
    let remote_prefixes = ["git::", "git@", "github.com", "gitlab.com", "bitbucket.org"];
    if looks_like_url(&start) || remote_prefixes.iter().any(|p| start.starts_with(p)) {
        return Err(RenderError::RemoteBase(format!(
            "{field} entry in {here} starts like a remote location ('{}'): fluxplan never fetches from \
             the network",
            excerpt(&start)
        )));
    }
    let path = (!Path::new(value).is_absolute())
        .then(|| paths::normalize(&dir.join(value)))
        .flatten()
        .filter(|p| p.starts_with(root));
    match path {
        Some(path) if !path.exists() => Ok(Local { field: field.clone(), path, plugin: false, inline: true }),
        _ => Err(RenderError::InvalidSource(format!(
            "{field} entry '{}' in {here} is inline objects but also names a path (outside the source, \
             or existing): kustomize could read either, so fluxplan refuses it",
            excerpt(value)
        ))),
    }
}

/// Names an entry a pull request wrote without echoing it (it may be a Secret's patch): the kind
/// and name of inline objects, else its length.
fn excerpt(text: &str) -> String {
    let docs = inline_documents(&Value::String(text.to_string())).unwrap_or_default();
    match docs.first() {
        Some(doc) => format!(
            "<inline {}/{}>",
            doc["kind"].as_str().unwrap_or("?"),
            doc["metadata"]["name"].as_str().unwrap_or("?")
        ),
        None => format!("<{} characters>", text.chars().count()),
    }
}

/// A URL or anything kustomize takes for a remote location.
fn url_like(value: &str) -> bool {
    is_remote(value) || looks_like_url(value) || remote_spelling(value)
}

/// A reference kustomize parses as a repository before it looks on disk, whatever exists
/// locally: `host:path`, `user@host`, a known forge host in any case.
fn remote_spelling(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    lower.contains(':')
        || lower.contains('@')
        || lower.contains("?ref=")
        || lower.contains("?version=")
        || ["github.com", "gitlab.com", "bitbucket.org", "git::"].iter().any(|h| lower.starts_with(h))
}

/// A missing path kustomize could take for a remote repository: the spellings above, or a first
/// segment that looks like a host name (`example.com/org/repo`).
fn looks_remote(value: &str) -> bool {
    let first = value.split('/').next().unwrap_or("");
    value.contains(':')
        || value.contains('@')
        || (value.contains('/') && first.contains('.') && !first.starts_with('.'))
}

/// Writes `text` to `file` through a rename (trees share files by hard links, and a reader
/// sees the old or the new content, never half of one); nothing when it already holds it, as
/// after the first build that reaches it.
pub fn rewrite(file: &Path, text: &str) -> Result<(), RenderError> {
    if std::fs::read(file).is_ok_and(|held| held == text.as_bytes()) {
        return Ok(());
    }
    let io =
        |e: std::io::Error| RenderError::InvalidSource(format!("cannot prepare {}: {e}", file.display()));
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut temp, text.as_bytes()).map_err(io)?;
    temp.persist(file).map_err(|e| io(e.error))?;
    Ok(())
}

/// Every document of a plugin configuration file (each a mapping).
pub fn plugin_configs_in(file: &Path, shown: &str) -> Result<Vec<Value>, RenderError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| RenderError::InvalidSource(format!("cannot read {shown}: {e}")))?;
    let docs = yaml::parse_documents(&text).map_err(|e| {
        RenderError::InvalidSource(format!("{shown} is used as a plugin configuration but is not YAML: {e}"))
    })?;
    if !docs.iter().all(Value::is_object) {
        return Err(RenderError::InvalidSource(format!(
            "{shown} is used as a plugin configuration but is not YAML mappings"
        )));
    }
    Ok(unlisted(docs))
}

fn looks_like_url(value: &str) -> bool {
    let lower = value.trim().to_ascii_lowercase();
    ["http:", "https:", "git:", "ssh:", "file:", "ftp:", "s3:", "gs:", "oci:"]
        .iter()
        .any(|s| lower.starts_with(s))
}

/// The files of a configMapGenerator/secretGenerator (or of their builtin plugin forms).
fn generator_files(generator: &Value, field: &str, file: &str) -> Result<Vec<Reference>, RenderError> {
    let mut out = Vec::new();
    for entry in list(generator, "files") {
        let text = entry.as_str().ok_or_else(|| unreadable(file, field, "a files entry is not a string"))?;
        // `key=path`: the path is what follows the first `=`.
        let path = text.split_once('=').map_or(text, |(_, path)| path);
        push(&mut out, &format!("{field}.files"), path);
    }
    for entry in list(generator, "envs") {
        push_string(&mut out, &format!("{field}.envs"), entry, file)?;
    }
    if let Some(env) = get(generator, "env") {
        push_string(&mut out, &format!("{field}.env"), env, file)?;
    }
    Ok(out)
}

fn helm_references(document: &Value, file: &str) -> Result<Vec<Reference>, RenderError> {
    let mut out = Vec::new();
    for chart in list(document, "helmCharts") {
        out.extend(of_plugin_config(chart, file)?.into_iter().map(|mut r| {
            r.field = format!("helmCharts.{}", r.field.rsplit('.').next().unwrap_or(""));
            r
        }));
    }
    if let Some(globals) = get(document, "helmGlobals") {
        for name in ["chartHome", "configHome"] {
            if let Some(value) = get(globals, name) {
                push_string(&mut out, &format!("helmGlobals.{name}"), value, file)?;
            }
        }
    }
    Ok(out)
}

/// Maps whose keys are data (label and annotation names, literals), not kustomize fields: they
/// are left as written.
const DATA_MAPS: &[&str] = &[
    "commonannotations",
    "commonlabels",
    "labels",
    "annotations",
    "pairs",
    "metadata",
    "options",
    "selector",
    "matchlabels",
    "data",
    "stringdata",
    "values",
    "valuesinline",
];

/// The document with every field name lower-cased as kustomize matches them, YAML merge keys
/// refused, and names Go could fold onto another field (non-ASCII look-alikes such as `ſ`, or two
/// spellings of one field) refused. Data maps are left as written.
fn folded(value: &Value, file: &str) -> Result<Value, RenderError> {
    Ok(match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, item) in map {
                if key == "<<" {
                    return Err(RenderError::InvalidSource(format!(
                        "{file} uses a YAML merge key (<<); fluxplan cannot check what it references, so it \
                         refuses it"
                    )));
                }
                if !key.is_ascii() {
                    return Err(RenderError::InvalidSource(format!(
                        "{file} has a field name with characters other than ASCII ('{key}'); fluxplan refuses it, \
                         as kustomize could read it as another field"
                    )));
                }
                let lower = key.to_ascii_lowercase();
                let item =
                    if DATA_MAPS.contains(&lower.as_str()) { item.clone() } else { folded(item, file)? };
                if out.insert(lower.clone(), item).is_some() {
                    return Err(RenderError::InvalidSource(format!(
                        "{file} sets the field '{lower}' twice (field names are matched without regard to case)"
                    )));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| folded(i, file)).collect::<Result<_, _>>()?),
        other => other.clone(),
    })
}

/// A field of a folded document, by its canonical name.
fn get<'a>(document: &'a Value, field: &str) -> Option<&'a Value> {
    document.get(field.to_lowercase())
}

fn list<'a>(document: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    get(document, field).and_then(Value::as_array).into_iter().flatten()
}

/// A data reference (a file read as content, never as configuration).
fn push(out: &mut Vec<Reference>, field: &str, value: &str) {
    out.push(Reference { field: field.to_string(), value: value.to_string(), plugin: false, inline: false });
}

/// An inline entry given as text, which kustomize may also try as a path.
fn push_inline(out: &mut Vec<Reference>, field: &str, item: &Value) {
    if let Some(text) = item.as_str() {
        out.push(Reference {
            field: field.to_string(),
            value: text.to_string(),
            plugin: false,
            inline: true,
        });
    }
}

fn push_string(out: &mut Vec<Reference>, field: &str, value: &Value, file: &str) -> Result<(), RenderError> {
    match value.as_str() {
        Some(text) => {
            push(out, field, text);
            Ok(())
        }
        None if value.is_null() => Ok(()),
        None => Err(unreadable(file, field, "it is not a string")),
    }
}

fn unreadable(file: &str, field: &str, reason: &str) -> RenderError {
    RenderError::InvalidSource(format!("cannot check the {field} of {file}: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The paths a kustomization names (inline entries left out).
    fn values(doc: Value) -> Vec<(String, String)> {
        let refs = of_kustomization(&doc, "k.yaml", false).unwrap();
        refs.into_iter().filter(|r| !r.inline).map(|r| (r.field, r.value)).collect()
    }

    #[test]
    fn every_field_that_names_a_file_is_found() {
        let found = values(json!({
            "resources": ["a.yaml"],
            "Bases": ["b"],
            "components": ["c"],
            "crds": ["crd.yaml"],
            "configurations": ["conf.yaml"],
            "patchesStrategicMerge": ["psm.yaml", "{kind: ConfigMap, metadata: {name: inline}}"],
            "patches": [{"path": "p.yaml"}, {"patch": "inline"}],
            "patchesJson6902": [{"path": "j.yaml"}],
            "replacements": [{"path": "r.yaml"}],
            "openapi": {"path": "schema.json"},
            "configMapGenerator": [{"files": ["key=f.txt", "g.txt"], "envs": ["e.env"], "env": "old.env"}],
            "secretGenerator": [{"files": ["s.txt"]}],
            "transformers": [
                "t.yaml",
                "apiVersion: builtin\nkind: PatchTransformer\npath: tp.yaml\n",
                "{apiVersion: builtin, kind: ConfigMapGenerator, files: [flow.txt]}"
            ],
            "generators": [{"apiVersion": "builtin", "kind": "ConfigMapGenerator", "files": ["gf.txt"]}],
            "validators": ["v.yaml"],
            "helmCharts": [{"valuesFile": "values.yaml", "additionalValuesFiles": ["more.yaml"], "repo": "https://charts.example"}],
            "helmGlobals": {"chartHome": "charts"},
        }));
        let paths: Vec<&str> = found.iter().map(|(_, v)| v.as_str()).collect();
        let expected = [
            "a.yaml",
            "b",
            "c",
            "crd.yaml",
            "conf.yaml",
            "psm.yaml",
            "p.yaml",
            "j.yaml",
            "r.yaml",
            "schema.json",
            "f.txt",
            "g.txt",
            "e.env",
            "old.env",
            "s.txt",
            "t.yaml",
            "tp.yaml",
            "flow.txt",
            "gf.txt",
            "v.yaml",
            "values.yaml",
            "more.yaml",
            "https://charts.example",
            "charts",
        ];
        for path in expected {
            assert!(paths.contains(&path), "{path} not found in {paths:?}");
        }
        assert_eq!(paths.len(), expected.len(), "inline patches are content: {paths:?}");
    }

    #[test]
    fn field_names_kustomize_would_read_otherwise_are_refused() {
        for hostile in [
            json!({"<<": {"resources": ["../x"]}}),
            json!({"resources": ["a"], "RESOURCES": ["b"]}),
            json!({"re\u{17f}ources": ["/etc/passwd"]}),
            json!({"configMapGenerator": [{"name": "x", "file\u{17f}": ["/etc/passwd"]}]}),
        ] {
            let refused = of_kustomization(&hostile, "k.yaml", false);
            assert_eq!(refused.unwrap_err().code(), "invalid-source", "{hostile}");
        }
    }

    #[test]
    fn a_source_of_plugin_configurations_may_only_list_them() {
        let transforming = json!({"resources": ["gen.yaml"], "patches": [{"patch": "x"}]});
        assert_eq!(of_kustomization(&transforming, "k.yaml", true).unwrap_err().code(), "invalid-source");
        let listing = of_kustomization(&json!({"resources": ["gen.yaml"]}), "k.yaml", true).unwrap();
        assert!(listing[0].plugin);
    }

    #[test]
    fn inline_plugin_configurations_are_handed_on_as_parsed() {
        let mut doc =
            json!({"transformers": ["{apiVersion: builtin, kind: X, path: !!str p.yaml}", "file.yaml"]});
        canonical_kustomization(&mut doc);
        assert_eq!(doc["transformers"][0], "apiVersion: builtin\nkind: X\npath: p.yaml\n");
        assert_eq!(doc["transformers"][1], "file.yaml");
    }

    #[test]
    fn refused_inline_text_is_named_never_echoed() {
        let hostile = json!({"patchesStrategicMerge": ["stringData: {password: hunter2}\nmore"]});
        let message = of_kustomization(&hostile, "k.yaml", false).unwrap_err().to_string();
        assert!(!message.contains("hunter2") && message.contains("characters"), "{message}");
        let root = tempfile::tempdir().unwrap();
        let inline = "kind: Secret\nmetadata: {name: db}\nstringData: {password: hunter2}\nx: ../../../../../../../../../../../../y";
        let reference = Reference {
            field: "patchesStrategicMerge".into(),
            value: inline.into(),
            plugin: false,
            inline: true,
        };
        let message = check(root.path(), root.path(), &reference, "apps", &Resolver::default())
            .unwrap_err()
            .to_string();
        assert!(!message.contains("hunter2") && message.contains("<inline Secret/db>"), "{message}");
    }

    #[test]
    fn references_outside_the_root_missing_or_remote_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("apps/prod");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(root.path().join("apps/base")).unwrap();
        std::fs::create_dir_all(root.path().join("other")).unwrap();
        // One resolver for every check: directories it resolved before must not hide a symlink.
        let resolver = Resolver::default();
        let check = |value: &str| {
            let reference =
                Reference { field: "resources".into(), value: value.into(), plugin: false, inline: false };
            check(root.path(), &dir, &reference, "apps/prod", &resolver)
        };
        assert!(check("../base").is_ok());
        assert!(check("../../other").is_ok());
        let escape = format!("{}etc/passwd", "../".repeat(14));
        for bad in ["../../../x", escape.as_str(), "/etc/passwd", "", "missing.yaml"] {
            assert_eq!(check(bad).unwrap_err().code(), "invalid-source", "{bad}");
        }
        for remote in [
            "http://127.0.0.1:8080/x",
            "HTTPS://host/x",
            "github.com/org/repo",
            "GitHub.com/acme/x",
            "github.com:acme/x",
            "git@host:org/r",
            "me@127.0.0.1:acme/x",
        ] {
            assert_eq!(check(remote).unwrap_err().code(), "remote-base", "{remote}");
        }
        std::os::unix::fs::symlink("/etc", dir.join("link")).unwrap();
        assert_eq!(check("link/passwd").unwrap_err().code(), "invalid-source");
        std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd.yaml")).unwrap();
        assert_eq!(check("passwd.yaml").unwrap_err().code(), "invalid-source");
        std::os::unix::fs::symlink("../base", dir.join("inside")).unwrap();
        assert!(check("inside").is_ok());
    }

    #[test]
    fn a_root_reached_through_a_symlink_still_holds_its_own_paths_and_nothing_else() {
        let place = tempfile::tempdir().unwrap();
        let real = place.path().join("real");
        std::fs::create_dir_all(real.join("apps/prod")).unwrap();
        std::fs::create_dir_all(real.join("apps/base")).unwrap();
        std::os::unix::fs::symlink(&real, place.path().join("root")).unwrap();
        let root = place.path().join("root");
        let dir = root.join("apps/prod");
        let resolver = Resolver::default();
        let check = |value: &str| {
            let reference =
                Reference { field: "resources".into(), value: value.into(), plugin: false, inline: false };
            check(&root, &dir, &reference, "apps/prod", &resolver)
        };
        assert!(check("../base").is_ok());
        assert!(check("../base").is_ok(), "the resolved root is remembered");
        std::fs::create_dir(place.path().join("outside")).unwrap();
        std::os::unix::fs::symlink(place.path(), dir.join("up")).unwrap();
        assert!(check("up/real/apps/base").is_ok(), "back into the source");
        assert_eq!(check("up/outside").unwrap_err().code(), "invalid-source");
    }
}
