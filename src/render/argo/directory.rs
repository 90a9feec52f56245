//! Directory sources as Argo CD's repo-server reads them: which files are manifests, `recurse`,
//! `include` and `exclude`, links, and files marked to be skipped.

use super::Unrendered;
use crate::argocd::{self, application::DirectoryOptions};
use crate::paths;
use crate::render::RenderError;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Marks a file the repo-server leaves out of a directory source.
const SKIP_FILE_RENDERING: &[u8] = b"+argocd:skip-file-rendering";

/// True when the repo-server takes a file name for a manifest (`^.*\.(yaml|yml|json|jsonnet)$`,
/// case-sensitive; its `.` does not match a newline).
fn is_manifest_name(name: &str) -> bool {
    !name.contains('\n') && [".yaml", ".yml", ".json", ".jsonnet"].iter().any(|ext| name.ends_with(ext))
}

/// The plain manifests of a directory source, as the repo-server reads them (`findManifests`):
/// every file whose name it takes for a manifest, dot-files too, sub-directories only with
/// `recurse`, `exclude` then `include` matched against the path under the directory, files
/// marked `+argocd:skip-file-rendering` left out. Jsonnet is not rendered here: external.
pub(super) fn read_directory(
    root: &Path,
    dir: &Path,
    options: &DirectoryOptions,
    links: &BTreeMap<String, String>,
) -> Result<Vec<crate::render::build::BuiltObject>, Unrendered> {
    // A pattern that does not compile matches nothing (the repo-server logs it); one beyond
    // what fluxplan evaluates (the repo-server may well compile it) is over a limit, never a
    // guess at what the repo-server reads.
    type Compiled = Option<Option<argocd::glob::Glob>>;
    let compile = |field: &str, pattern: &Option<String>| -> Result<Compiled, Unrendered> {
        let compiled = pattern.as_deref().map(argocd::glob::Glob::new).transpose();
        compiled.map_err(|e| RenderError::Limit(format!("directory.{field}: {e}")).into())
    };
    let globs = DirectoryGlobs {
        include: compile("include", &options.include)?,
        exclude: compile("exclude", &options.exclude)?,
    };
    let mut files = Vec::new();
    collect_manifest_files(dir, dir, options, &globs, &mut files)?;
    // (walk order, the repository file read, its content)
    let mut read: Vec<(String, String, Vec<u8>)> = files
        .into_iter()
        .map(|(file, content)| (paths::relative(root, &file), paths::relative(root, &file), content))
        .collect();
    read.extend(linked_manifests(root, dir, options, &globs, links)?);
    read.sort_by(|a, b| a.0.cmp(&b.0));
    let mut objects = Vec::new();
    for (_, shown, content) in read {
        if shown.ends_with(".jsonnet") {
            return Err(Unrendered::External(format!(
                "{shown} is Jsonnet: Jsonnet sources are not rendered by fluxplan, so this Application is not planned"
            )));
        }
        let text = String::from_utf8_lossy(&content);
        for object in manifests_of(&shown, &text)? {
            let has = |field: &str| object.get(field).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
            let meta = &object["metadata"];
            let text = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty());
            // Hooks may be named by generateName (Argo CD creates them anew on each sync).
            let hook = argocd::sync_options::hook_phases(meta).is_some();
            let named = text(&meta["name"]) || (hook && text(&meta["generateName"]));
            if !(object.is_object()
                && has("apiVersion")
                && has("kind")
                && object["metadata"].is_object()
                && named)
            {
                return Err(RenderError::InvalidSource(format!(
                    "{shown}: a document is not a Kubernetes object (it needs apiVersion, kind and metadata.name, or metadata.generateName for a hook)"
                ))
                .into());
            }
            objects.push(crate::render::build::BuiltObject { object, origin: Some(shown.clone()) });
        }
    }
    Ok(objects)
}

/// The objects of one manifest file, as the repo-server decodes them: a JSON file holds one
/// object; a YAML file's documents are objects (empty ones skipped), and a YAML file whose first
/// document is not an object with a `kind` is ignored unless it looks like a manifest (it holds
/// `apiVersion:`, `kind:` and `metadata:`), then it fails. `items` lists are flattened.
fn manifests_of(shown: &str, text: &str) -> Result<Vec<Value>, RenderError> {
    let invalid = |e: String| RenderError::InvalidSource(format!("{shown}: not valid YAML or JSON: {e}"));
    let docs = if shown.ends_with(".json") {
        vec![serde_json::from_str::<Value>(text).map_err(|e| invalid(e.to_string()))?]
    } else {
        let looks_like_manifest =
            ["apiVersion:", "kind:", "metadata:"].iter().all(|marker| text.contains(marker));
        // gitops-engine `SplitYAML`: each document through sigs.k8s.io/yaml (go-yaml v2: merge
        // keys applied, YAML 1.1 scalars).
        let docs = match crate::go_yaml::documents(text) {
            Ok(docs) => docs,
            Err(e) if looks_like_manifest => return Err(invalid(e.to_string())),
            Err(_) => return Ok(Vec::new()),
        };
        let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
        let has_kind = |d: &Value| d.get("kind").and_then(Value::as_str).is_some_and(|k| !k.is_empty());
        match docs.iter().position(|d| !has_kind(d)) {
            None => docs,
            // Decoding stops at the first document that is not an object: what came before it
            // means the file was meant as manifests.
            Some(0) if !looks_like_manifest => return Ok(Vec::new()),
            Some(_) => {
                return Err(RenderError::InvalidSource(format!(
                    "{shown}: a document is not a Kubernetes object (it has no kind)"
                )))
            }
        }
    };
    let mut objects = Vec::new();
    for doc in docs {
        match doc.get("items") {
            Some(Value::Array(items)) => objects.extend(items.iter().cloned()),
            // A list whose items are null holds nothing (unless it is an object with a spec or
            // status that happens to have a null `items`).
            Some(Value::Null) if doc.get("spec").is_none() && doc.get("status").is_none() => {}
            _ => objects.push(doc),
        }
    }
    Ok(objects)
}

/// The manifests the repo-server reads through symbolic links under `dir` (exports leave the
/// links out): a link is walked as a file of its own name, and read where it leads, which must
/// stay inside the repository; a link to a directory is not a manifest. (walk order, file read,
/// content)
fn linked_manifests(
    root: &Path,
    dir: &Path,
    options: &DirectoryOptions,
    globs: &DirectoryGlobs,
    links: &BTreeMap<String, String>,
) -> Result<Vec<(String, String, Vec<u8>)>, RenderError> {
    let base = paths::relative(root, dir);
    let mut found = Vec::new();
    for link in links.keys() {
        let relative = match base.as_str() {
            "" | "." => link.as_str(),
            base => match link.strip_prefix(base).and_then(|r| r.strip_prefix('/')) {
                Some(relative) => relative,
                None => continue,
            },
        };
        if !options.recurse && relative.contains('/') {
            continue;
        }
        let name = relative.rsplit('/').next().unwrap_or(relative);
        if !options.disable_extension_filter && !is_manifest_name(name) {
            continue;
        }
        if !globs.selects(relative) {
            continue;
        }
        // Links to links are followed, a bounded number of times.
        let mut target = link.clone();
        for _ in 0..40 {
            let Some(next) = links.get(&target) else { break };
            target = link_target(&target, next).ok_or_else(|| {
                RenderError::InvalidSource(format!(
                    "{link} is a symbolic link out of the repository: Argo CD refuses to generate manifests from it"
                ))
            })?;
        }
        let file = root.join(&target);
        if links.contains_key(&target) || !file.exists() {
            return Err(RenderError::InvalidSource(format!(
                "{link} is a symbolic link that leads nowhere ({target}): Argo CD cannot generate manifests from it"
            )));
        }
        if !file.is_file() {
            continue;
        }
        let content = std::fs::read(&file)
            .map_err(|e| RenderError::InvalidSource(format!("cannot read {target}: {e}")))?;
        if memchr::memmem::find(&content, SKIP_FILE_RENDERING).is_none() {
            found.push((link.clone(), target, content));
        }
    }
    Ok(found)
}

/// The repository path a symlink at `link` with `target` leads to, when it stays inside.
fn link_target(link: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let parent = Path::new(link).parent().unwrap_or(Path::new(""));
    let joined = paths::normalize(&parent.join(target))?;
    Some(joined.to_string_lossy().into_owned()).filter(|p| !p.is_empty())
}

/// The files of `dir` the repo-server reads as manifests, with their content, in its walk's
/// (lexical) order: see `read_directory`.
/// `directory.include` and `exclude`, compiled: absent, or a glob (`None` when it does not
/// compile, then it matches nothing).
struct DirectoryGlobs {
    include: Option<Option<argocd::glob::Glob>>,
    exclude: Option<Option<argocd::glob::Glob>>,
}

impl DirectoryGlobs {
    /// True when a file at `relative` (under the directory) is read: not excluded, and included
    /// when an include is given (one that does not compile includes nothing).
    fn selects(&self, relative: &str) -> bool {
        let matches = |glob: &Option<Option<argocd::glob::Glob>>| {
            glob.as_ref().is_some_and(|g| g.as_ref().is_some_and(|g| g.is_match(relative)))
        };
        !matches(&self.exclude) && (self.include.is_none() || matches(&self.include))
    }
}

fn collect_manifest_files(
    app_dir: &Path,
    dir: &Path,
    options: &DirectoryOptions,
    globs: &DirectoryGlobs,
    out: &mut Vec<(PathBuf, Vec<u8>)>,
) -> Result<(), RenderError> {
    // What cannot be read fails the Application: fewer manifests would be a plan that hides some.
    crate::tree::walk::<RenderError>(dir, |entry, file_type| {
        if file_type.is_dir() {
            return Ok(if options.recurse { crate::tree::Descend::Yes } else { crate::tree::Descend::No });
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !file_type.is_file() || (!options.disable_extension_filter && !is_manifest_name(&name)) {
            return Ok(crate::tree::Descend::No);
        }
        let relative = paths::relative(app_dir, &entry.path());
        if !globs.selects(&relative) {
            return Ok(crate::tree::Descend::No);
        }
        let content = std::fs::read(entry.path())
            .map_err(|e| RenderError::InvalidSource(format!("cannot read {relative}: {e}")))?;
        if memchr::memmem::find(&content, SKIP_FILE_RENDERING).is_none() {
            out.push((entry.path(), content));
        }
        Ok(crate::tree::Descend::No)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The repo-server reads a manifest with sigs.k8s.io/yaml: a merge key is applied, YAML 1.1
    /// scalars are typed (the same reader the values tests check against the pinned Helm).
    #[test]
    fn manifests_apply_merge_keys_as_the_repo_server_reads_them() {
        let text =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: merged\n  labels: &labels {app: web}\n  \
                    annotations:\n    <<: *labels\n    quoted: \"yes\"\ndata:\n  \"<<\": kept\n";
        let objects = manifests_of("cm.yaml", text).unwrap();
        assert_eq!(objects[0]["metadata"]["annotations"], json!({"app": "web", "quoted": "yes"}));
        assert_eq!(objects[0]["data"], json!({"<<": "kept"}));
    }
}
