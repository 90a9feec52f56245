//! A HelmRelease rendered as helm-controller renders it: its chart found in a source of this
//! repository, the values merged in the controller's order, `helm template` run by the engine,
//! then the controller's post-rendering (commonMetadata, then its origin labels).
//! What fluxplan cannot reproduce yet is said, never guessed: the release is not planned.

use super::engine::{Helm, Template};
use super::manifest::Release;
use super::units::ChartVersion;
use crate::cancel::CancelToken;
use crate::flux::helm::{ChartSource, CrdPolicy, HelmReleaseSpec, HELM_GROUP};
use crate::flux::SourceRef;
use crate::paths;
use crate::render::RenderError;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Why a HelmRelease is not rendered.
#[derive(Debug, Clone, PartialEq)]
pub enum NotRendered {
    /// fluxplan cannot reproduce what the controller reads (a chart it does not fetch yet, values
    /// only the cluster holds): not planned, with the reason.
    External(String),
    /// The controller fails too (a chart path that does not exist, a values file missing).
    Failed(RenderError),
}

/// What a render of a HelmRelease reads besides its spec.
pub struct Inputs<'a> {
    /// The tree of a source of this repository (`None` for any other source).
    pub source_tree: &'a dyn Fn(&SourceRef) -> Option<PathBuf>,
    /// A ConfigMap of the same render, by namespace and name.
    pub config_map: &'a dyn Fn(&str, &str) -> Option<Value>,
    /// A chart given for this HelmRelease (`--chart`): a directory or a packaged archive, used
    /// whatever its spec names.
    pub given_chart: Option<&'a Path>,
    /// `.Capabilities`: the cluster's Kubernetes version and extra API versions.
    pub kube_version: Option<&'a str>,
    pub api_versions: &'a [String],
}

/// A release as rendered, and the chart it came from.
#[derive(Debug)]
pub struct Rendered {
    pub release: Release,
    pub chart: Option<ChartVersion>,
}

/// Renders `spec` (a HelmRelease of namespace `namespace`): the release's objects, hooks and
/// tests, post-rendered as the controller does.
pub fn render(
    helm: &Helm,
    spec: &HelmReleaseSpec,
    namespace: &str,
    name: &str,
    inputs: &Inputs,
    cancel: &CancelToken,
) -> Result<Rendered, NotRendered> {
    let scratch = tempfile::tempdir().map_err(|e| failed(format!("cannot prepare the chart: {e}")))?;
    let chart = match inputs.given_chart {
        Some(given) => given_chart(given, spec, scratch.path())?,
        None => locate_chart(spec, inputs)?,
    };
    if !spec.post_renderers.is_empty() {
        return Err(NotRendered::External(
            "its postRenderers are not applied by fluxplan yet: the release is not planned".into(),
        ));
    }
    let values = merged_values(spec, namespace, inputs)?;
    // Where the chart's values come from its source's files, the chart is planned with them as
    // its values.yaml, as source-controller packages it.
    let (chart_dir, readable) = match &chart.values_files {
        Some(values) => {
            let copy = scratch.path().join("chart");
            copy_chart(&chart.dir, &copy).map_err(|e| failed(format!("cannot prepare the chart: {e}")))?;
            std::fs::write(copy.join("values.yaml"), crate::yaml::to_yaml(values))
                .map_err(|e| failed(format!("cannot prepare the chart: {e}")))?;
            (copy, scratch.path().to_path_buf())
        }
        None => (chart.dir.clone(), chart.dir.clone()),
    };
    let version = chart_version(&chart.dir);
    let template = Template {
        chart: &chart_dir,
        readable: &readable,
        release: &spec.release.name,
        namespace: &spec.release.namespace,
        values: &values,
        kube_version: inputs.kube_version,
        api_versions: inputs.api_versions,
        include_crds: spec.install_crds != CrdPolicy::Skip,
        is_upgrade: false,
    };
    let mut release = helm.template(&template, cancel).map_err(|e| match e {
        // Chart dependencies source-controller would fetch: not a failure of the release.
        crate::render::kustomize::BuildError::Failed(message) if message.contains("missing in charts/") => {
            NotRendered::External(format!("its chart's dependencies are not vendored in charts/: {message}"))
        }
        crate::render::kustomize::BuildError::Failed(message) => {
            failed(format!("helm template failed: {message}"))
        }
        crate::render::kustomize::BuildError::Limit(message) => {
            NotRendered::Failed(RenderError::Limit(message))
        }
        crate::render::kustomize::BuildError::Cancelled(reason) => {
            NotRendered::Failed(RenderError::Cancelled(reason))
        }
    })?;
    let origin = [
        (format!("{HELM_GROUP}/name"), Value::String(name.to_string())),
        (format!("{HELM_GROUP}/namespace"), Value::String(namespace.to_string())),
    ];
    for object in &mut release.objects {
        set_all(object, "annotations", spec.common_annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
        set_all(object, "labels", spec.common_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        set_all(object, "labels", origin.iter().cloned());
    }
    Ok(Rendered { release, chart: version })
}

/// The name and version its `Chart.yaml` declares.
fn chart_version(dir: &Path) -> Option<ChartVersion> {
    let text = std::fs::read_to_string(dir.join("Chart.yaml")).ok()?;
    let chart = crate::yaml::parse_documents(&text).ok()?.into_iter().next()?;
    Some(ChartVersion {
        name: chart["name"].as_str()?.to_string(),
        version: match &chart["version"] {
            Value::String(version) => version.clone(),
            other => other.to_string(),
        },
    })
}

/// A chart given on the command line: a directory, or an archive unpacked into `scratch`.
/// Values files are paths in the chart, as in a chart from a Helm repository.
fn given_chart(given: &Path, spec: &HelmReleaseSpec, scratch: &Path) -> Result<Chart, NotRendered> {
    let dir = if given.is_dir() {
        given.to_path_buf()
    } else {
        crate::charts::archive::unpack(given, &scratch.join("given"))
            .map_err(|e| failed(format!("the chart given with --chart ({}): {e}", given.display())))?
    };
    if !dir.join("Chart.yaml").is_file() {
        return Err(failed(format!("the chart given with --chart ({}) has no Chart.yaml", given.display())));
    }
    let (values_files, ignore_missing) = match &spec.chart {
        Some(ChartSource::Template { values_files, ignore_missing_values_files, .. }) => {
            (values_files.clone(), *ignore_missing_values_files)
        }
        _ => (Vec::new(), false),
    };
    let values_files = read_values_files(&dir, &values_files, ignore_missing, "the given chart")?;
    Ok(Chart { dir, values_files })
}

struct Chart {
    dir: PathBuf,
    /// The merged values files that replace the chart's values.yaml, when the spec names some.
    values_files: Option<Value>,
}

fn failed(message: String) -> NotRendered {
    NotRendered::Failed(RenderError::InvalidSource(message))
}

fn locate_chart(spec: &HelmReleaseSpec, inputs: &Inputs) -> Result<Chart, NotRendered> {
    let (chart, source, values_files, ignore_missing) = match &spec.chart {
        None => return Err(failed("the HelmRelease names no chart (spec.chart or spec.chartRef)".into())),
        Some(ChartSource::Reference(source)) => {
            return Err(NotRendered::External(format!(
                "its chart comes from {source}, which fluxplan does not fetch yet"
            )))
        }
        Some(ChartSource::Template { chart, source, values_files, ignore_missing_values_files, .. }) => {
            (chart, source, values_files, *ignore_missing_values_files)
        }
    };
    if !matches!(source.kind.as_str(), "GitRepository" | "Bucket") {
        return Err(NotRendered::External(format!(
            "its chart {chart} comes from {source}, which fluxplan does not fetch yet"
        )));
    }
    let Some(tree) = (inputs.source_tree)(source) else {
        return Err(NotRendered::External(format!("its chart's source {source} is not this repository")));
    };
    let dir = paths::secure_join(&tree, chart);
    if !dir.join("Chart.yaml").is_file() {
        return Err(failed(format!("no chart at '{chart}' in the source {source} (no Chart.yaml there)")));
    }
    let values_files = read_values_files(&tree, values_files, ignore_missing, &source.to_string())?;
    Ok(Chart { dir, values_files })
}

/// The values files (paths under `root`) merged in order; `None` when there are none.
fn read_values_files(
    root: &Path,
    files: &[String],
    ignore_missing: bool,
    whose: &str,
) -> Result<Option<Value>, NotRendered> {
    if files.is_empty() {
        return Ok(None);
    }
    let mut merged = Value::Object(Map::new());
    for file in files {
        let path = paths::secure_join(root, file);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(_) if ignore_missing => continue,
            Err(e) => return Err(failed(format!("values file '{file}' in {whose}: {e}"))),
        };
        let document = crate::yaml::parse_documents(&text)
            .map_err(|e| failed(format!("values file '{file}' in {whose} is not YAML: {e}")))?
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
        merge(&mut merged, document);
    }
    Ok(Some(merged))
}

/// `valuesFrom` in order, then `spec.values` over them (the controller's order).
/// They are read from the HelmRelease's own namespace.
fn merged_values(spec: &HelmReleaseSpec, namespace: &str, inputs: &Inputs) -> Result<Value, NotRendered> {
    let mut values = Value::Object(Map::new());
    for reference in &spec.values_from {
        let named = format!("{} {namespace}/{}", reference.kind, reference.name);
        if reference.kind != "ConfigMap" {
            return Err(NotRendered::External(format!(
                "its values from {named} are not read by fluxplan yet"
            )));
        }
        if reference.target_path.is_some() {
            return Err(NotRendered::External(format!(
                "its values from {named} use targetPath, which fluxplan does not apply yet"
            )));
        }
        let Some(config_map) = (inputs.config_map)(namespace, &reference.name) else {
            if reference.optional {
                continue;
            }
            return Err(NotRendered::External(format!(
                "its values come from {named}, which this render does not hold (the live cluster's is not read yet)"
            )));
        };
        let Some(text) = config_map["data"][&reference.values_key].as_str() else {
            if reference.optional {
                continue;
            }
            return Err(failed(format!("{named} has no key '{}'", reference.values_key)));
        };
        let document = crate::yaml::parse_documents(text)
            .map_err(|e| failed(format!("{named} key '{}' is not YAML: {e}", reference.values_key)))?
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
        merge(&mut values, document);
    }
    merge(&mut values, spec.values.clone());
    Ok(values)
}

/// Merges `over` into `base`: maps key by key, recursively; anything else replaces.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(existing) if existing.is_object() && value.is_object() => merge(existing, value),
                    _ => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (_, Value::Null) => {}
        (base, over) => *base = over,
    }
}

/// Sets every pair on `metadata.<field>`, creating it when absent (kustomize's label and
/// annotation transformers as the controller configures them: metadata only).
fn set_all(object: &mut Value, field: &str, pairs: impl Iterator<Item = (String, Value)>) {
    let mut pairs = pairs.peekable();
    if pairs.peek().is_none() {
        return;
    }
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    let entry = metadata.entry(field).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    let map = entry.as_object_mut().expect("made a mapping");
    map.extend(pairs);
}

/// Copies a chart directory (no symlinks: exports hold none) with an explicit stack.
fn copy_chart(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut pending = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((source, target)) = pending.pop() {
        std::fs::create_dir_all(&target)?;
        for entry in std::fs::read_dir(&source)? {
            let entry = entry?;
            let file_type = entry.file_type()?;
            if file_type.is_dir() {
                pending.push((entry.path(), target.join(entry.file_name())));
            } else if file_type.is_file() {
                std::fs::copy(entry.path(), target.join(entry.file_name()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_merge_map_by_map_and_anything_else_replaces() {
        let mut base = json!({"a": {"b": 1, "c": 2}, "list": [1, 2]});
        merge(&mut base, json!({"a": {"c": 3, "d": 4}, "list": [3]}));
        assert_eq!(base, json!({"a": {"b": 1, "c": 3, "d": 4}, "list": [3]}));
    }
}
