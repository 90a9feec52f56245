//! Every file or URL a kustomization names, found before kustomize runs, and the rule that
//! each must be a local path inside the source. This is the first wall against a pull request
//! that wants kustomize to read the planner's files or fetch from its network (the sandbox is
//! the second): anything it cannot account for is refused, never skipped.

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
}

/// A reference checked against the source root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    pub field: String,
    pub path: PathBuf,
}

/// The references of a kustomization document. kustomize matches field names without regard
/// to case (Go's JSON decoding) and applies YAML merge keys; both are accounted for here, so a
/// field cannot hide behind `Resources:` or `<<:`.
pub fn of_kustomization(document: &Value, file: &str) -> Result<Vec<Reference>, RenderError> {
    let document = folded(document, file)?;
    let mut out = Vec::new();
    for field in LIST_FIELDS {
        for item in list(&document, field) {
            match item.as_str() {
                Some(text) if PLUGIN_FIELDS.contains(field) && text.contains('\n') => {
                    // An inline plugin configuration.
                    let docs = yaml::parse_documents(text).map_err(|e| unreadable(file, field, &e))?;
                    for doc in &docs {
                        out.extend(of_plugin_config(doc, file)?);
                    }
                }
                // An inline strategic-merge patch is content, not a path.
                Some(text) if *field == "patchesStrategicMerge" && text.contains('\n') => {}
                Some(text) => push(&mut out, field, text),
                None if PLUGIN_FIELDS.contains(field) && item.is_object() => {
                    out.extend(of_plugin_config(item, file)?)
                }
                None => return Err(unreadable(file, field, "an entry is not a string")),
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

/// The references of one builtin plugin configuration (`apiVersion: builtin`, or any other:
/// kustomize refuses non-builtin plugins, but a field naming a file is checked all the same).
pub fn of_plugin_config(document: &Value, file: &str) -> Result<Vec<Reference>, RenderError> {
    let document = folded(document, file)?;
    let kind = get(&document, "kind").and_then(Value::as_str).unwrap_or("plugin").to_string();
    let field = |name: &str| format!("{kind}.{name}");
    let mut out = Vec::new();
    if let Some(path) = get(&document, "path") {
        push_string(&mut out, &field("path"), path, file)?;
    }
    for path in list(&document, "paths") {
        push_string(&mut out, &field("paths"), path, file)?;
    }
    for item in list(&document, "replacements") {
        if let Some(path) = get(item, "path") {
            push_string(&mut out, &field("replacements.path"), path, file)?;
        }
    }
    out.extend(generator_files(&document, &kind, file)?);
    for name in ["valuesFile", "chartHome", "configHome", "repo"] {
        if let Some(value) = get(&document, name) {
            push_string(&mut out, &field(name), value, file)?;
        }
    }
    for path in list(&document, "additionalValuesFiles") {
        push_string(&mut out, &field("additionalValuesFiles"), path, file)?;
    }
    Ok(out)
}

/// Checks one reference made from `dir`: URLs fail with `remote-base`; absolute paths, paths
/// that climb out of `root` (lexically, or through a symlink) and paths that cannot be
/// normalised fail with `invalid-source`.
pub fn check(root: &Path, dir: &Path, reference: &Reference, here: &str) -> Result<Local, RenderError> {
    let Reference { field, value } = reference;
    if is_remote(value) || looks_like_url(value) {
        return Err(RenderError::RemoteBase(format!(
            "{field} entry '{value}' in {here} is a URL: fluxplan never fetches from the network (Flux \
             builds only from the source artifact); vendor it into the repository"
        )));
    }
    let outside = || {
        RenderError::InvalidSource(format!(
            "{field} entry '{value}' in {here} points outside the source: Flux only reads files inside \
             the source artifact"
        ))
    };
    if value.is_empty() || value.contains('\0') || Path::new(value).is_absolute() {
        return Err(outside());
    }
    let path = paths::normalize(&dir.join(value)).filter(|p| p.starts_with(root)).ok_or_else(outside)?;
    // The export holds no symlinks; a tree that does (a working-tree render) must not lead out.
    if let Ok(real) = path.canonicalize() {
        let real_root = root.canonicalize().map_err(|e| RenderError::InvalidSource(e.to_string()))?;
        if !real.starts_with(real_root) {
            return Err(outside());
        }
    }
    Ok(Local { field: field.clone(), path })
}

/// Reads every YAML document of a plugin configuration file.
pub fn plugin_configs_in(file: &Path, shown: &str) -> Result<Vec<Value>, RenderError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| RenderError::InvalidSource(format!("cannot read {shown}: {e}")))?;
    yaml::parse_documents(&text).map_err(|e| {
        RenderError::InvalidSource(format!(
            "{shown} is used as a plugin configuration but is not YAML fluxplan can read: {e}"
        ))
    })
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

/// The document with every mapping key lower-cased and YAML merge keys refused.
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
                let lower = key.to_lowercase();
                if out.insert(lower.clone(), folded(item, file)?).is_some() {
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

fn push(out: &mut Vec<Reference>, field: &str, value: &str) {
    out.push(Reference { field: field.to_string(), value: value.to_string() });
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

    fn values(doc: Value) -> Vec<(String, String)> {
        of_kustomization(&doc, "k.yaml").unwrap().into_iter().map(|r| (r.field, r.value)).collect()
    }

    #[test]
    fn every_field_that_names_a_file_is_found() {
        let found = values(json!({
            "resources": ["a.yaml"],
            "Bases": ["b"],
            "components": ["c"],
            "crds": ["crd.yaml"],
            "configurations": ["conf.yaml"],
            "patchesStrategicMerge": ["psm.yaml"],
            "patches": [{"path": "p.yaml"}, {"patch": "inline"}],
            "patchesJson6902": [{"path": "j.yaml"}],
            "replacements": [{"path": "r.yaml"}],
            "openapi": {"path": "schema.json"},
            "configMapGenerator": [{"files": ["key=f.txt", "g.txt"], "envs": ["e.env"], "env": "old.env"}],
            "secretGenerator": [{"files": ["s.txt"]}],
            "transformers": ["t.yaml", "apiVersion: builtin\nkind: PatchTransformer\npath: tp.yaml\n"],
            "generators": [{"apiVersion": "builtin", "kind": "ConfigMapGenerator", "files": ["gf.txt"]}],
            "validators": ["v.yaml"],
            "helmCharts": [{"valuesFile": "values.yaml", "additionalValuesFiles": ["more.yaml"], "repo": "https://charts.example"}],
            "helmGlobals": {"chartHome": "charts"},
        }));
        let paths: Vec<&str> = found.iter().map(|(_, v)| v.as_str()).collect();
        for expected in [
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
            "gf.txt",
            "v.yaml",
            "values.yaml",
            "more.yaml",
            "https://charts.example",
            "charts",
        ] {
            assert!(paths.contains(&expected), "{expected} not found in {paths:?}");
        }
    }

    #[test]
    fn merge_keys_and_duplicate_fields_are_refused() {
        let merged = of_kustomization(&json!({"<<": {"resources": ["../x"]}}), "k.yaml");
        assert_eq!(merged.unwrap_err().code(), "invalid-source");
        let twice = of_kustomization(&json!({"resources": ["a"], "RESOURCES": ["b"]}), "k.yaml");
        assert_eq!(twice.unwrap_err().code(), "invalid-source");
    }

    #[test]
    fn references_outside_the_root_or_remote_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("apps/prod");
        std::fs::create_dir_all(&dir).unwrap();
        let check = |value: &str| {
            check(
                root.path(),
                &dir,
                &Reference { field: "resources".into(), value: value.into() },
                "apps/prod",
            )
        };
        assert!(check("../base").is_ok());
        assert!(check("../../other").is_ok());
        let escape = format!("{}etc/passwd", "../".repeat(14));
        for bad in ["../../../x", escape.as_str(), "/etc/passwd", ""] {
            assert_eq!(check(bad).unwrap_err().code(), "invalid-source", "{bad}");
        }
        for remote in ["http://127.0.0.1:8080/x", "HTTPS://host/x", "github.com/org/repo", "git@host:org/r"] {
            assert_eq!(check(remote).unwrap_err().code(), "remote-base", "{remote}");
        }
        std::os::unix::fs::symlink("/etc", dir.join("link")).unwrap();
        assert_eq!(check("link/passwd").unwrap_err().code(), "invalid-source");
    }
}
