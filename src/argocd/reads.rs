//! What an Application or ApplicationSet reads in this repository, as repository paths (a
//! directory stands for everything under it; `""` for the whole repository): its sources' paths,
//! the Helm value files and Jsonnet libraries they name, the files and directories its git
//! generators read. Used to account for every file a pull request changes; generous where Argo
//! CD could read more (a chart's values reach outside its directory only through what is named).

use super::application::Application;
use super::applicationset::ApplicationSet;
use serde_json::Value;
use std::path::Path;

/// A repository path as specs write it (`./apps/`), as repository paths read (`apps`): without
/// `./`, `..` or a leading `/`; `None` when it climbs out.
pub fn repo_path(path: &str) -> Option<String> {
    let normalized = crate::paths::normalize(Path::new(path.trim_start_matches('/')))?;
    Some(normalized.to_string_lossy().trim_end_matches('/').to_string())
}

/// The part of a path written with templates or globs that is fixed: up to the last `/` before
/// the first `{{`, `*`, `?`, `[`, `{` or `\` (an escape in Go's `path.Match`, which the git
/// generator's directories use: what follows it is not the path as written).
fn fixed_prefix(path: &str) -> &str {
    match path.find(['*', '?', '[', '{', '\\']) {
        None => path,
        Some(at) => path[..at].rsplit_once('/').map_or("", |(dir, _)| dir),
    }
}

/// What an Application's sources of this repository read.
pub fn of_application(app: &Application, is_this_repo: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut reads = Vec::new();
    for (source, raw) in app.sources.iter().zip(raw_sources(&app.raw["spec"])) {
        if !is_this_repo(&source.repo_url) {
            continue;
        }
        let Some(path) = source.path.as_deref() else { continue };
        let Some(dir) = repo_path(path) else { continue };
        for file in raw["helm"]["valueFiles"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            reads.extend(value_file(app, is_this_repo, &dir, file));
        }
        for parameter in raw["helm"]["fileParameters"].as_array().into_iter().flatten() {
            reads.extend(parameter["path"].as_str().and_then(|f| value_file(app, is_this_repo, &dir, f)));
        }
        for lib in
            raw["directory"]["jsonnet"]["libs"].as_array().into_iter().flatten().filter_map(Value::as_str)
        {
            reads.extend(repo_path(lib));
        }
        reads.push(dir);
    }
    // `ref` sources lend value files: `$ref/path` names a file of the referenced source.
    reads.sort();
    reads.dedup();
    reads
}

/// `spec.source` then `spec.sources[]`, as `Application::from_value` reads them.
fn raw_sources(spec: &Value) -> Vec<&Value> {
    spec.get("source")
        .filter(|s| s.is_object())
        .into_iter()
        .chain(spec["sources"].as_array().into_iter().flatten())
        .collect()
}

/// The repository path of a Helm value file: relative to the chart, or `$ref/...` in the source
/// named `ref`; `None` for URLs and other repositories.
fn value_file(
    app: &Application,
    is_this_repo: &dyn Fn(&str) -> bool,
    chart: &str,
    file: &str,
) -> Option<String> {
    if file.contains("://") {
        return None;
    }
    if let Some(rest) = file.strip_prefix('$') {
        let (name, path) = rest.split_once('/')?;
        let source = app.sources.iter().find(|s| s.reference.as_deref() == Some(name))?;
        return is_this_repo(&source.repo_url).then(|| repo_path(path)).flatten();
    }
    repo_path(&format!("{chart}/{file}"))
}

/// What an ApplicationSet reads here: its git generators' paths (nested ones too) and the fixed
/// part of its template's source paths.
pub fn of_application_set(set: &ApplicationSet, is_this_repo: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut reads = Vec::new();
    git_paths(&Value::Array(set.generators.clone()), is_this_repo, &mut reads);
    let spec = &set.template["spec"];
    let mut whole_repository = false;
    for source in raw_sources(spec) {
        let (Some(url), Some(path)) = (source["repoURL"].as_str(), source["path"].as_str()) else { continue };
        // A templated URL may be this repository: counted as one.
        if is_this_repo(url) || url.contains("{{") {
            match repo_path(fixed_prefix(path)) {
                Some(prefix) if !prefix.is_empty() => reads.push(prefix),
                _ => whole_repository = true,
            }
        }
    }
    // A path that is all template: the git generators say where it points; without them,
    // anywhere.
    if whole_repository && reads.is_empty() {
        reads.push(String::new());
    }
    reads.sort();
    reads.dedup();
    reads
}

fn git_paths(value: &Value, is_this_repo: &dyn Fn(&str) -> bool, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                if key == "git" && inner["repoURL"].as_str().is_some_and(is_this_repo) {
                    let entries = ["directories", "files"]
                        .into_iter()
                        .flat_map(|k| inner[k].as_array().into_iter().flatten());
                    for entry in entries.filter(|e| e["exclude"] != Value::Bool(true)) {
                        out.extend(entry["path"].as_str().and_then(|p| repo_path(fixed_prefix(p))));
                    }
                }
                git_paths(inner, is_this_repo, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| git_paths(i, is_this_repo, out)),
        _ => {}
    }
}

/// True when `file` (a repository path) is `read` or under it.
pub fn covers(read: &str, file: &str) -> bool {
    read.is_empty()
        || read == "."
        || file == read
        || file.strip_prefix(read).is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_paths_value_files_and_generator_globs() {
        let app = Application::from_value(
            &json!({"metadata": {"name": "a"}, "spec": {"sources": [
                {"repoURL": "here", "path": "./charts/web", "helm": {"valueFiles": ["values.yaml", "../common/v.yaml", "$vals/env/prod.yaml", "https://x/v.yaml"]}},
                {"repoURL": "here", "ref": "vals"},
                {"repoURL": "elsewhere", "path": "apps"}]}}),
            "argocd",
        )
        .unwrap();
        let here = |url: &str| url == "here";
        assert_eq!(
            of_application(&app, &here),
            ["charts/common/v.yaml", "charts/web", "charts/web/values.yaml", "env/prod.yaml"]
        );
        let set = ApplicationSet::from_value(
            &json!({"metadata": {"name": "s"}, "spec": {"generators": [{"matrix": {"generators": [
                {"git": {"repoURL": "here", "directories": [{"path": "services/*"}, {"path": "services/x", "exclude": true}]}},
                {"clusters": {}}]}}],
              "template": {"metadata": {}, "spec": {"source": {"repoURL": "here", "path": "deploy/{{path.basename}}/x"}}}}}),
            "argocd",
        )
        .unwrap();
        assert_eq!(of_application_set(&set, &here), ["deploy", "services"]);
        assert_eq!(fixed_prefix("services/a\\-b/*"), "services", "an escape is not the path as written");
        assert!(covers("charts/web", "charts/web/Chart.yaml"));
        assert!(!covers("charts/web", "charts/website/Chart.yaml"));
        assert!(covers("", "README.md"));
    }

    /// An Application of an OCI artifact or another repository at `path: .` reads none of this
    /// repository; one of this repository at `.` reads all of it.
    #[test]
    fn a_source_elsewhere_at_the_top_reads_nothing_here() {
        let here = |url: &str| url == "https://github.com/acme/fleet";
        for url in ["oci://ghcr.io/acme/manifests", "https://github.com/acme/other"] {
            let app = Application::from_value(
                &json!({"metadata": {"name": "a"}, "spec": {"source": {"repoURL": url, "path": "."}}}),
                "argocd",
            )
            .unwrap();
            assert!(of_application(&app, &here).is_empty(), "{url}");
        }
        let app = Application::from_value(
            &json!({"metadata": {"name": "a"}, "spec": {"source": {"repoURL": "https://github.com/acme/fleet", "path": "."}}}),
            "argocd",
        )
        .unwrap();
        assert_eq!(of_application(&app, &here), [""]);
    }
}
