//! ApplicationSets: the `list` and `git` (directories, files) generators expanded against the
//! revision being planned, the template rendered per element, and what the controller does
//! when an element disappears.

use super::text;
use crate::go_path_match::path_match;
use globset::{Glob, GlobMatcher};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// `syncPolicy.applicationsSync`: what the controller may do to the Applications it generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplicationsSync {
    /// Unset: create, update and delete.
    Full,
    CreateOnly,
    CreateUpdate,
    CreateDelete,
}

impl ApplicationsSync {
    /// True when an Application whose element disappeared is deleted.
    pub fn deletes(self) -> bool {
        matches!(self, ApplicationsSync::Full | ApplicationsSync::CreateDelete)
    }

    /// True when a generated Application is changed to follow its template.
    pub fn updates(self) -> bool {
        matches!(self, ApplicationsSync::Full | ApplicationsSync::CreateUpdate)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ApplicationsSync::Full => "create, update and delete",
            ApplicationsSync::CreateOnly => "create-only",
            ApplicationsSync::CreateUpdate => "create-update",
            ApplicationsSync::CreateDelete => "create-delete",
        }
    }
}

/// The fields of an ApplicationSet that fluxplan acts on.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplicationSet {
    pub namespace: String,
    pub name: String,
    pub generators: Vec<Value>,
    pub template: Value,
    pub go_template: bool,
    pub applications_sync: ApplicationsSync,
    /// `syncPolicy.preserveResourcesOnDeletion`: generated Applications lose their resources
    /// finalizer before they are deleted, so their resources stay.
    pub preserve_resources_on_deletion: bool,
}

/// True when a live Application is owned by the ApplicationSet `set` (its controller sets an
/// owner reference on every Application it generates).
pub fn owned_by(application: &Value, set: &crate::flux::KustomizationRef) -> bool {
    application["metadata"]["namespace"].as_str() == Some(set.namespace.as_str())
        && application["metadata"]["ownerReferences"].as_array().into_iter().flatten().any(|owner| {
            owner["kind"] == "ApplicationSet"
                && owner["name"].as_str() == Some(set.name.as_str())
                && owner["apiVersion"].as_str().is_some_and(|v| v.starts_with(super::GROUP))
        })
}

/// What the repository at the planned revision looks like to a git generator.
pub trait RepoTree {
    /// Every directory, by repository path (`apps/web`).
    fn directories(&self) -> Vec<String>;
    /// Every file, by repository path.
    fn files(&self) -> Vec<String>;
    /// A file's text.
    fn read(&self, path: &str) -> Option<String>;
}

/// The repository at a git generator's `revision`, or why it cannot be known.
pub type TreeAt<'a, T> = dyn Fn(Option<&str>) -> Result<std::sync::Arc<T>, String> + 'a;

/// The Applications an ApplicationSet generates, with generators this plan cannot expand.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expansion {
    pub applications: Vec<Value>,
    /// Why a generator's elements are unknown here (another repository, the cluster's state).
    pub external: Vec<String>,
}

impl ApplicationSet {
    pub fn from_value(obj: &Value, default_namespace: &str) -> Result<Self, String> {
        let meta = &obj["metadata"];
        let name =
            text(meta, "name").filter(|n| !n.is_empty()).ok_or("ApplicationSet has no metadata.name")?;
        let namespace = text(meta, "namespace").unwrap_or_else(|| default_namespace.to_string());
        let spec = &obj["spec"];
        let template = spec
            .get("template")
            .filter(|t| t.is_object())
            .cloned()
            .ok_or_else(|| format!("ApplicationSet {namespace}/{name} has no spec.template"))?;
        let policy = &spec["syncPolicy"];
        let applications_sync = match policy["applicationsSync"].as_str() {
            Some("create-only") => ApplicationsSync::CreateOnly,
            Some("create-update") => ApplicationsSync::CreateUpdate,
            Some("create-delete") => ApplicationsSync::CreateDelete,
            _ => ApplicationsSync::Full,
        };
        Ok(ApplicationSet {
            namespace,
            name,
            generators: spec["generators"].as_array().cloned().unwrap_or_default(),
            template,
            go_template: spec["goTemplate"] == Value::Bool(true),
            applications_sync,
            preserve_resources_on_deletion: policy["preserveResourcesOnDeletion"] == Value::Bool(true),
        })
    }

    /// The generators as a reader recognizes them: `git services/*, !services/legacy`, `list (2)`.
    pub fn describe_generators(&self) -> String {
        let described: Vec<String> = self
            .generators
            .iter()
            .filter_map(|g| g.as_object()?.iter().find(|(k, _)| *k != "selector"))
            .map(|(kind, body)| match kind.as_str() {
                "git" => {
                    let paths: Vec<String> = ["directories", "files"]
                        .iter()
                        .flat_map(|field| body[*field].as_array().into_iter().flatten())
                        .map(|entry| {
                            let path = entry["path"].as_str().unwrap_or("");
                            if entry["exclude"] == Value::Bool(true) {
                                format!("!{path}")
                            } else {
                                path.to_string()
                            }
                        })
                        .collect();
                    format!("git {}", paths.join(", "))
                }
                "list" => format!("list ({})", body["elements"].as_array().map_or(0, Vec::len)),
                other => other.to_string(),
            })
            .collect();
        described.join("; ")
    }

    /// Expands every generator. `is_this_repo` tells whether a git generator reads the
    /// repository being planned (else its elements are external); `tree_at` gives the repository
    /// at a generator's `revision`, or why it cannot be known (then its elements are external).
    pub fn expand<T: RepoTree + ?Sized>(
        &self,
        is_this_repo: &dyn Fn(&str) -> bool,
        tree_at: &TreeAt<'_, T>,
    ) -> Result<Expansion, String> {
        let mut expansion = Expansion::default();
        let mut seen = BTreeMap::new();
        for generator in &self.generators {
            let Some((kind, body)) =
                generator.as_object().and_then(|g| g.iter().find(|(k, _)| *k != "selector"))
            else {
                continue;
            };
            let elements = match kind.as_str() {
                "list" => list_elements(body)?,
                "git" => {
                    let url = text(body, "repoURL").unwrap_or_default();
                    if !is_this_repo(&url) {
                        expansion.external.push(format!(
                            "its git generator reads {url}, not this repository: the Applications it generates are not planned"
                        ));
                        continue;
                    }
                    let revision = text(body, "revision");
                    match tree_at(revision.as_deref()) {
                        Ok(tree) => git_elements(body, &*tree, self.go_template)?,
                        Err(why) => {
                            expansion.external.push(format!(
                                "its git generator's revision {}: {why}, so the Applications it generates are not planned",
                                super::revision::normalized(revision.as_deref())
                            ));
                            continue;
                        }
                    }
                }
                other => {
                    expansion.external.push(format!(
                        "its {other} generator depends on state outside the repository: the Applications it generates \
                         are not planned"
                    ));
                    continue;
                }
            };
            for params in elements {
                let application = self.render(&params)?;
                let name = application["metadata"]["name"].as_str().unwrap_or("").to_string();
                // Two elements naming one Application: the controller refuses the whole set.
                if seen.insert(name.clone(), ()).is_some() {
                    return Err(format!(
                        "ApplicationSet {}/{} generates two Applications named {name}: the controller generates none",
                        self.namespace, self.name
                    ));
                }
                expansion.applications.push(application);
            }
        }
        Ok(expansion)
    }

    /// The Application of one element.
    fn render(&self, params: &Value) -> Result<Value, String> {
        let rendered = substitute(&self.template, params, self.go_template)?;
        let mut metadata = rendered["metadata"].as_object().cloned().unwrap_or_default();
        metadata.entry("namespace").or_insert_with(|| json!(self.namespace));
        // The controller gives every Application it generates the resources finalizer, unless
        // it is to preserve their resources.
        if !self.preserve_resources_on_deletion {
            let finalizers = metadata.entry("finalizers").or_insert_with(|| json!([]));
            if let Some(list) = finalizers.as_array_mut() {
                let has = |f: &str| list.iter().any(|v| v == f);
                if !has(super::RESOURCES_FINALIZER) && !has(super::RESOURCES_FINALIZER_BACKGROUND) {
                    list.push(json!(super::RESOURCES_FINALIZER));
                }
            }
        }
        let name = metadata.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() || name.contains("{{") {
            return Err(format!(
                "ApplicationSet {}/{}: the template gives no Application name for element {}",
                self.namespace, self.name, params
            ));
        }
        Ok(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": metadata,
            "spec": rendered["spec"],
        }))
    }
}

fn list_elements(body: &Value) -> Result<Vec<Value>, String> {
    if body.get("elementsYaml").is_some() {
        return Err("list generator elementsYaml is not supported: write the elements out".into());
    }
    Ok(body["elements"].as_array().cloned().unwrap_or_default())
}

/// A `files` path, as `git ls-files -- PATH` (the repo-server's default) reads it: `*` crosses
/// `/`.
fn files_glob(pattern: &str) -> Result<GlobMatcher, String> {
    let pattern = pattern.trim_start_matches("./");
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("invalid git generator path {pattern:?}: {e}"))
}

/// `path*` parameters of a directory or file's directory, flat (fasttemplate) or nested.
fn path_params(dir: &str, go_template: bool) -> Map<String, Value> {
    let segments: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
    let basename = segments.last().copied().unwrap_or("");
    let normalized = normalize_name(basename);
    let mut params = Map::new();
    if go_template {
        params.insert(
            "path".into(),
            json!({"path": dir, "basename": basename, "basenameNormalized": normalized, "segments": segments}),
        );
    } else {
        params.insert("path".into(), json!(dir));
        params.insert("path.basename".into(), json!(basename));
        params.insert("path.basenameNormalized".into(), json!(normalized));
        for (i, segment) in segments.iter().enumerate() {
            params.insert(format!("path[{i}]"), json!(segment));
        }
    }
    params
}

/// A name made valid for Kubernetes as Argo CD does: lowercase, other characters `-`.
fn normalize_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c.to_ascii_lowercase() } else { '-' })
        .collect()
}

fn git_elements<T: RepoTree + ?Sized>(
    body: &Value,
    tree: &T,
    go_template: bool,
) -> Result<Vec<Value>, String> {
    let mut elements = Vec::new();
    let directories = body["directories"].as_array().filter(|d| !d.is_empty());
    if let Some(directories) = directories {
        // `filterApps`: Go's `path.Match` for every entry; an entry whose pattern is malformed
        // is logged and skipped; an exclude wins over any include.
        let entries: Vec<(&str, bool)> = directories
            .iter()
            .map(|e| (e["path"].as_str().unwrap_or(""), e["exclude"] == Value::Bool(true)))
            .collect();
        for dir in tree.directories() {
            // The repo-server lists no directory under one whose name starts with `.`.
            let hidden = dir.split('/').any(|s| s.starts_with('.'));
            let matching = |exclude: bool| {
                entries.iter().any(|(pattern, excludes)| {
                    *excludes == exclude && path_match(pattern, &dir).unwrap_or(false)
                })
            };
            if !hidden && matching(false) && !matching(true) {
                elements.push(Value::Object(path_params(&dir, go_template)));
            }
        }
        // With directories, the generator reads no files.
        return Ok(elements);
    }
    if let Some(files) = body["files"].as_array() {
        // Every include's files, less every exclude's, once each, in path order.
        let mut selected = std::collections::BTreeSet::new();
        for exclude in [false, true] {
            for entry in files.iter().filter(|e| (e["exclude"] == Value::Bool(true)) == exclude) {
                let matcher = files_glob(entry["path"].as_str().unwrap_or(""))?;
                for file in tree.files().into_iter().filter(|f| matcher.is_match(f)) {
                    if exclude {
                        selected.remove(&file);
                    } else {
                        selected.insert(file);
                    }
                }
            }
        }
        for file in selected {
            let text = tree.read(&file).ok_or_else(|| format!("cannot read {file}"))?;
            let docs = crate::yaml::parse_documents(&text).map_err(|e| format!("{file}: {e}"))?;
            let dir = file.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
            let name = file.rsplit('/').next().unwrap_or(&file);
            for doc in docs {
                let mut params = if go_template {
                    doc.as_object().cloned().unwrap_or_default()
                } else {
                    let mut flat = Map::new();
                    flatten("", &doc, &mut flat);
                    flat
                };
                params.extend(path_params(dir, go_template));
                if go_template {
                    params["path"]["filename"] = json!(name);
                    params["path"]["filenameNormalized"] = json!(normalize_name(name));
                } else {
                    params.insert("path.filename".into(), json!(name));
                    params.insert("path.filenameNormalized".into(), json!(normalize_name(name)));
                }
                elements.push(Value::Object(params));
            }
        }
    }
    Ok(elements)
}

/// Flattens a file's values to `a.b.c` keys, as the fasttemplate parameters are named.
fn flatten(prefix: &str, value: &Value, out: &mut Map<String, Value>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let key = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                flatten(&key, inner, out);
            }
        }
        Value::String(s) => {
            out.insert(prefix.to_string(), json!(s));
        }
        other => {
            out.insert(prefix.to_string(), json!(other.to_string()));
        }
    }
}

/// The template with every string's `{{...}}` replaced by the element's parameters.
fn substitute(template: &Value, params: &Value, go_template: bool) -> Result<Value, String> {
    Ok(match template {
        Value::String(s) => Value::String(render_string(s, params, go_template)?),
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| substitute(i, params, go_template)).collect::<Result<_, _>>()?)
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), substitute(v, params, go_template)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// One string: `{{ key }}` (fasttemplate: unknown keys stay as written) or `{{ .a.b }}` (Go
/// templates: only field lookups are supported; a missing key is an error, as with
/// `missingkey=error`).
fn render_string(s: &str, params: &Value, go_template: bool) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else { break };
        out.push_str(&rest[..start]);
        let tag = rest[start + 2..start + 2 + len].trim();
        let whole = &rest[start..start + 2 + len + 2];
        if go_template {
            let path = tag.strip_prefix('.').filter(|p| {
                p.split('.')
                    .all(|seg| !seg.is_empty() && seg.chars().all(|c| c.is_alphanumeric() || c == '_'))
            });
            let Some(path) = path else {
                return Err(format!(
                    "template expression {whole} is not supported here (only field lookups like {{{{ .path.basename }}}})"
                ));
            };
            let value = path.split('.').try_fold(params, |v, seg| v.get(seg));
            match value {
                Some(Value::String(text)) => out.push_str(text),
                Some(other) if !other.is_object() => out.push_str(&other.to_string()),
                _ => return Err(format!("template expression {whole}: no such parameter")),
            }
        } else {
            match params.get(tag) {
                Some(Value::String(text)) => out.push_str(text),
                Some(other) => out.push_str(&other.to_string()),
                None => out.push_str(whole),
            }
        }
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tree(Vec<(&'static str, &'static str)>);

    impl RepoTree for Tree {
        fn directories(&self) -> Vec<String> {
            let mut dirs: Vec<String> = self
                .0
                .iter()
                .flat_map(|(f, _)| {
                    let parts: Vec<&str> = f.split('/').collect();
                    (1..parts.len()).map(move |n| parts[..n].join("/"))
                })
                .collect();
            dirs.sort();
            dirs.dedup();
            dirs
        }
        fn files(&self) -> Vec<String> {
            self.0.iter().map(|(f, _)| f.to_string()).collect()
        }
        fn read(&self, path: &str) -> Option<String> {
            self.0.iter().find(|(f, _)| *f == path).map(|(_, t)| t.to_string())
        }
    }

    fn set(generators: Value, go_template: bool) -> ApplicationSet {
        ApplicationSet::from_value(
            &json!({"metadata": {"name": "apps", "namespace": "argocd"}, "spec": {
                "goTemplate": go_template,
                "generators": generators,
                "template": {
                    "metadata": {"name": if go_template { "{{ .path.basename }}" } else { "{{path.basename}}" },
                        "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
                    "spec": {"project": "default",
                        "source": {"repoURL": "https://github.com/org/fleet.git",
                            "path": if go_template { "{{ .path.path }}" } else { "{{path}}" }},
                        "destination": {"server": "https://kubernetes.default.svc",
                            "namespace": if go_template { "{{ .path.basename }}" } else { "{{path.basename}}" }}}},
                "syncPolicy": {"applicationsSync": "create-update"}}}),
            "argocd",
        )
        .unwrap()
    }

    /// The same tree at every revision.
    fn at(tree: Tree) -> impl Fn(Option<&str>) -> Result<std::sync::Arc<Tree>, String> {
        let tree = std::sync::Arc::new(tree);
        move |_| Ok(tree.clone())
    }

    fn tree() -> Tree {
        Tree(vec![
            ("apps/web/deploy.yaml", "kind: Deployment"),
            ("apps/api/deploy.yaml", "kind: Deployment"),
            ("apps/legacy/deploy.yaml", "kind: Deployment"),
            ("apps/.hidden/x.yaml", "a: b"),
            ("config/dev/config.json", r#"{"cluster": {"name": "dev"}, "replicas": 2}"#),
        ])
    }

    fn names(expansion: &Expansion) -> Vec<(&str, &str)> {
        expansion
            .applications
            .iter()
            .map(|a| (a["metadata"]["name"].as_str().unwrap(), a["spec"]["source"]["path"].as_str().unwrap()))
            .collect()
    }

    #[test]
    fn git_directories_expand_with_excludes_in_both_template_dialects() {
        let generators = json!([{"git": {"repoURL": "https://github.com/org/fleet.git", "revision": "HEAD",
            "directories": [{"path": "apps/*"}, {"path": "apps/legacy", "exclude": true}]}}]);
        for go in [false, true] {
            let expansion = set(generators.clone(), go).expand(&|_| true, &at(tree())).unwrap();
            assert_eq!(names(&expansion), [("api", "apps/api"), ("web", "apps/web")], "goTemplate {go}");
            let app = &expansion.applications[0];
            assert_eq!(app["metadata"]["namespace"], "argocd");
            assert_eq!(app["spec"]["destination"]["namespace"], "api");
            assert_eq!(app["metadata"]["finalizers"][0], "resources-finalizer.argocd.argoproj.io");
        }
        let mut appset = set(generators, false);
        assert_eq!(appset.applications_sync, ApplicationsSync::CreateUpdate);
        assert!(!appset.applications_sync.deletes());
        // The controller adds the resources finalizer to what it generates...
        appset.template["metadata"].as_object_mut().unwrap().remove("finalizers");
        let generated = appset.expand(&|_| true, &at(tree())).unwrap().applications;
        assert_eq!(generated[0]["metadata"]["finalizers"], json!(["resources-finalizer.argocd.argoproj.io"]));
        // ...unless it is to preserve their resources.
        appset.preserve_resources_on_deletion = true;
        let generated = appset.expand(&|_| true, &at(tree())).unwrap().applications;
        assert_eq!(generated[0]["metadata"].get("finalizers"), None);
    }

    #[test]
    fn a_glob_that_stops_matching_generates_nothing() {
        let generators = json!([{"git": {"repoURL": "u", "directories": [{"path": "workloads/*"}]}}]);
        let expansion = set(generators, false).expand(&|_| true, &at(tree())).unwrap();
        assert!(expansion.applications.is_empty());
        assert!(expansion.external.is_empty());
    }

    #[test]
    fn git_directories_match_as_go_path_match_and_files_exclude() {
        let tree = || {
            Tree(vec![
                ("services/team/api/d.yaml", "a: b"),
                ("services/team/evil-old/pod.yaml", "a: b"),
                ("services/web-old/d.yaml", "a: b"),
                ("config/a/config.json", r#"{"n": "a"}"#),
                ("config/b/config.json", r#"{"n": "b"}"#),
            ])
        };
        let expand = |generator: Value| {
            set(json!([{"git": generator}]), false).expand(&|_| true, &at(tree())).unwrap()
        };
        let generated = expand(json!({"repoURL": "u", "directories": [
            {"path": "services/*/*"}, {"path": "services/*-old", "exclude": true}, {"path": "services/[", "exclude": true}]}));
        assert_eq!(
            names(&generated),
            [("api", "services/team/api"), ("evil-old", "services/team/evil-old")],
            "* stops at /; a malformed entry is skipped"
        );
        let generated = expand(json!({"repoURL": "u", "directories": [{"path": "services/*"}]}));
        assert_eq!(names(&generated), [("team", "services/team"), ("web-old", "services/web-old")]);
        for never in ["./services/*", "**/api", "services/{team,x}"] {
            let generated = expand(json!({"repoURL": "u", "directories": [{"path": never}]}));
            assert!(generated.applications.is_empty(), "{never}: {:?}", names(&generated));
        }
        let generated = expand(json!({"repoURL": "u", "files": [
            {"path": "config/*/config.json"}, {"path": "config/**"}, {"path": "config/b/*", "exclude": true}]}));
        assert_eq!(names(&generated), [("a", "config/a")], "each file once, excludes removed");
    }

    #[test]
    fn list_files_and_external_generators() {
        let mut s = set(
            json!([
                {"list": {"elements": [{"path": "apps/web", "path.basename": "web-list"}]}},
                {"git": {"repoURL": "u", "files": [{"path": "config/**/config.json"}]}},
                {"clusters": {}},
                {"git": {"repoURL": "https://elsewhere/repo", "directories": [{"path": "*"}]}}
            ]),
            false,
        );
        s.template["spec"]["source"]["path"] = json!("{{path}}/{{cluster.name}}/r{{replicas}}");
        let expansion = s.expand(&|url| url == "u", &at(tree())).unwrap();
        assert_eq!(
            names(&expansion),
            [("web-list", "apps/web/{{cluster.name}}/r{{replicas}}"), ("dev", "config/dev/dev/r2")],
            "fasttemplate leaves unknown parameters as written"
        );
        s.template["metadata"]["name"] = json!("{{path.basename}}-{{cluster.name}}");
        assert!(s.expand(&|url| url == "u", &at(tree())).unwrap_err().contains("no Application name"));
        assert_eq!(expansion.external.len(), 2);
        assert!(expansion.external[0].contains("clusters generator"));
        assert!(expansion.external[1].contains("https://elsewhere/repo"));
    }

    #[test]
    fn go_templates_beyond_lookups_and_duplicate_names_are_errors() {
        let mut s = set(json!([{"list": {"elements": [{"path": {"basename": "a", "path": "a"}}]}}]), true);
        s.template["metadata"]["name"] = json!("{{ .path.basename | upper }}");
        assert!(s.expand(&|_| true, &at(tree())).unwrap_err().contains("not supported"));
        let s = set(
            json!([{"list": {"elements": [{"path": {"basename": "a", "path": "a"}}, {"path": {"basename": "a", "path": "b"}}]}}]),
            true,
        );
        assert!(s.expand(&|_| true, &at(tree())).unwrap_err().contains("two Applications named a"));
        let s = set(json!([{"list": {"elements": [{"other": 1}]}}]), true);
        assert!(s.expand(&|_| true, &at(tree())).unwrap_err().contains("no such parameter"));
    }
}
