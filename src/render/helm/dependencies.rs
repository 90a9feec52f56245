//! A chart's dependencies that are not vendored in its `charts/`, got as source-controller gets
//! them when it builds a chart from a source: the version `Chart.lock` pins (else the
//! constraint), from the `repository` each names (HTTP or OCI, through the same fetch rules as
//! any chart), or `file://` paths inside the same source. Helm itself never fetches.

use crate::charts::oci;
use crate::charts::store::ChartRequest;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The most dependencies a chart may declare (real charts have a handful).
const MAX_DEPENDENCIES: usize = 64;

/// A chart name as Helm allows it: letters, digits, `-`, `_` and `.`, not starting with `.`.
fn is_chart_name(name: &str) -> bool {
    name.len() <= 250
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.contains("..")
}

/// A dependency the chart does not vendor, and where it comes from.
#[derive(Debug, PartialEq)]
pub enum Missing {
    /// From a Helm repository or registry.
    Fetch { name: String, request: ChartRequest },
    /// A chart directory of the same source (`file://../common`).
    Local { name: String, dir: PathBuf },
}

/// The dependencies of the chart in `dir` that its `charts/` lacks. `root` bounds `file://`
/// paths (the source's tree). `Err` says why one cannot be had.
pub fn missing(dir: &Path, root: &Path) -> Result<Vec<Missing>, String> {
    let read = |name: &str| -> Option<Value> {
        let text = std::fs::read_to_string(dir.join(name)).ok()?;
        crate::yaml::parse_documents(&text).ok()?.into_iter().next()
    };
    let Some(chart) = read("Chart.yaml") else { return Ok(Vec::new()) };
    // Helm 2 charts list them in requirements.yaml (and lock them in requirements.lock).
    let (declared, lock) = match chart["dependencies"].as_array() {
        Some(list) => (list.clone(), read("Chart.lock")),
        None => (
            read("requirements.yaml").and_then(|r| r["dependencies"].as_array().cloned()).unwrap_or_default(),
            read("requirements.lock"),
        ),
    };
    let locked = |name: &str| -> Option<String> {
        lock.as_ref()?["dependencies"]
            .as_array()?
            .iter()
            .find(|d| d["name"] == name)
            .and_then(|d| d["version"].as_str().map(str::to_string))
    };
    if declared.len() > MAX_DEPENDENCIES {
        return Err(format!(
            "the chart declares {} dependencies, more than {MAX_DEPENDENCIES}",
            declared.len()
        ));
    }
    let vendored = vendored(dir);
    let mut missing = Vec::new();
    for dependency in &declared {
        let Some(name) = dependency["name"].as_str().filter(|n| !n.is_empty()) else { continue };
        // The name becomes a file name under charts/: nothing but a chart name.
        if !is_chart_name(name) {
            return Err(format!("dependency name {name:?} is not a chart name"));
        }
        if vendored.iter().any(|v| v == name) {
            continue;
        }
        let repository = dependency["repository"].as_str().unwrap_or("").trim();
        let version = locked(name)
            .or_else(|| dependency["version"].as_str().map(str::to_string))
            .unwrap_or_else(|| "*".into());
        let item = if repository.is_empty() || repository.starts_with("file://") {
            let relative = repository.trim_start_matches("file://");
            if relative.starts_with('/') {
                return Err(format!(
                    "dependency {name}: {repository} is an absolute path, outside the source"
                ));
            }
            let relative = if relative.is_empty() { format!("charts/{name}") } else { relative.to_string() };
            let local =
                crate::paths::normalize(&dir.strip_prefix(root).unwrap_or(Path::new("")).join(&relative))
                    .ok_or_else(|| format!("dependency {name}: {repository} leaves the source"))?;
            Missing::Local { name: name.to_string(), dir: root.join(local) }
        } else if repository.starts_with("oci://") {
            let url = format!("{}/{name}", repository.trim_end_matches('/'));
            Missing::Fetch {
                name: name.to_string(),
                request: ChartRequest::Oci { url, reference: oci::Reference::Semver(version) },
            }
        } else if repository.starts_with("https://") || repository.starts_with("http://") {
            let request =
                ChartRequest::Repository { url: repository.to_string(), chart: name.to_string(), version };
            Missing::Fetch { name: name.to_string(), request }
        } else {
            return Err(format!(
                "dependency {name} names its repository as {repository}, an alias only a Helm client's configuration knows"
            ));
        };
        missing.push(item);
    }
    Ok(missing)
}

/// The charts vendored in `dir/charts`: directories by their name, archives by their chart name.
fn vendored(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join("charts")) else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().join("Chart.yaml").is_file() {
                return Some(name);
            }
            // `name-1.2.3.tgz`: the chart's name is what precedes the version.
            let stem = name.strip_suffix(".tgz")?;
            let split = stem
                .match_indices('-')
                .map(|(i, _)| i)
                .find(|i| stem[i + 1..].chars().next().is_some_and(|c| c.is_ascii_digit()))?;
            Some(stem[..split].to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_charts_does_not_hold_is_missing_with_its_locked_version() {
        let dir = tempfile::tempdir().unwrap();
        let chart = dir.path().join("app");
        std::fs::create_dir_all(chart.join("charts/common")).unwrap();
        std::fs::write(chart.join("charts/common/Chart.yaml"), "name: common\n").unwrap();
        std::fs::write(chart.join("charts/redis-17.3.1.tgz"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("lib")).unwrap();
        std::fs::write(
            chart.join("Chart.yaml"),
            "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- {name: common, repository: file://../common}\n\
             - {name: redis, version: 17.x, repository: https://charts.example.com}\n\
             - {name: db, version: 1.x, repository: https://charts.example.com/stable}\n\
             - {name: cache, version: ~2.0, repository: oci://registry.example.com/charts}\n\
             - {name: lib, repository: file://../lib}\n",
        )
        .unwrap();
        std::fs::write(chart.join("Chart.lock"), "dependencies:\n- {name: db, version: 1.4.2}\n").unwrap();
        let missing = missing(&chart, dir.path()).unwrap();
        assert_eq!(
            missing,
            [
                Missing::Fetch {
                    name: "db".into(),
                    request: ChartRequest::Repository {
                        url: "https://charts.example.com/stable".into(),
                        chart: "db".into(),
                        version: "1.4.2".into()
                    }
                },
                Missing::Fetch {
                    name: "cache".into(),
                    request: ChartRequest::Oci {
                        url: "oci://registry.example.com/charts/cache".into(),
                        reference: oci::Reference::Semver("~2.0".into())
                    }
                },
                Missing::Local { name: "lib".into(), dir: dir.path().join("lib") },
            ]
        );
    }

    #[test]
    fn names_and_paths_that_leave_the_chart_or_the_source_and_aliases_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (name, repository, expected) in [
            ("x", "file://../../../etc", "leaves the source"),
            ("x", "file:///etc", "absolute path"),
            ("x", "@stable", "alias"),
            ("../../../home/user/.ssh", "file://../lib", "not a chart name"),
            ("/home/user/.ssh", "file://../lib", "not a chart name"),
        ] {
            std::fs::write(
                dir.path().join("Chart.yaml"),
                format!("apiVersion: v2\nname: app\ndependencies:\n- {{name: \"{name}\", repository: \"{repository}\"}}\n"),
            )
            .unwrap();
            let error = missing(dir.path(), dir.path()).unwrap_err();
            assert!(error.contains(expected), "{name} {repository}: {error}");
        }
    }
}
