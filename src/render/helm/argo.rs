//! Argo CD Helm sources, rendered as the repo-server renders them: `helm template` of the chart
//! (a path of this repository, or a chart of a Helm repository or OCI registry) with the values
//! merged in the repo-server's order (value files, then `values`/`valuesObject`, then
//! `parameters` and `fileParameters`), the release named after the Application unless
//! `releaseName` says otherwise. Same engine, sandbox, fetch rules and cache as HelmReleases.

use super::engine::Template;
use super::release::template_key;
use super::values::{merge, set_at_path, set_string_at_path};
use super::Charts;
use crate::argocd::application::HelmOptions;
use crate::cancel::CancelToken;
use crate::charts::oci;
use crate::charts::store::ChartRequest;
use serde_json::{Map, Value};
use std::path::Path;

/// Why a Helm source gives no objects.
pub enum NotRendered {
    /// fluxplan cannot reproduce it (no Helm, a chart it cannot have, remote value files).
    External(String),
    /// The repo-server fails too.
    Failed(String),
}

/// One Helm source of an Application.
pub struct Source<'a> {
    /// The chart's directory.
    pub chart: &'a Path,
    pub options: &'a HelmOptions,
    /// The Application's name and destination namespace.
    pub application: &'a str,
    pub namespace: Option<&'a str>,
    /// Reads a `valueFiles` or `fileParameters` path: `Ok(None)` when it does not exist.
    pub read: &'a dyn Fn(&str) -> Result<Option<String>, NotRendered>,
}

/// The chart a Helm repository or registry source names (`repoURL` with `chart`; an OCI
/// repoURL has no scheme, or `oci://`), at `targetRevision` (a version or a range).
pub fn request(repo_url: &str, chart: &str, revision: Option<&str>) -> ChartRequest {
    let version = revision.filter(|r| !r.is_empty() && *r != "HEAD").unwrap_or("*").to_string();
    if repo_url.starts_with("http://") || repo_url.starts_with("https://") {
        ChartRequest::Repository { url: repo_url.to_string(), chart: chart.to_string(), version }
    } else {
        let registry = repo_url.trim_start_matches("oci://").trim_end_matches('/');
        ChartRequest::Oci {
            url: format!("oci://{registry}/{chart}"),
            reference: oci::Reference::Semver(version),
        }
    }
}

/// The source's objects as the repo-server renders them: hooks included (Argo CD maps Helm's
/// hook annotations to its own), test hooks left out.
pub fn render(charts: &Charts, source: &Source, cancel: &CancelToken) -> Result<Vec<Value>, NotRendered> {
    let helm = charts.helm.as_ref().map_err(|why| NotRendered::External(format!("not rendered: {why}")))?;
    let options = source.options;
    let count = options.parameters.len() + options.file_parameters.len() + options.value_files.len();
    if count > super::values::MAX_VALUE_SOURCES {
        return Err(NotRendered::Failed(format!(
            "more than {} value files and parameters",
            super::values::MAX_VALUE_SOURCES
        )));
    }
    let mut values = Value::Object(Map::new());
    for file in &options.value_files {
        if file.starts_with("http://") || file.starts_with("https://") {
            return Err(NotRendered::External(format!(
                "value file {file} is fetched by the repo-server from the network: not rendered by fluxplan"
            )));
        }
        match (source.read)(file)? {
            Some(text) => {
                let document = crate::yaml::parse_documents(&text)
                    .map_err(|e| NotRendered::Failed(format!("value file {file} is not YAML: {e}")))?
                    .into_iter()
                    .next()
                    .unwrap_or(Value::Null);
                merge(&mut values, document);
            }
            None if options.ignore_missing_value_files => {}
            None => return Err(NotRendered::Failed(format!("value file {file} does not exist"))),
        }
    }
    let inline = match (&options.values_object, &options.values) {
        (Some(object), _) => Some(object.clone()),
        (None, Some(text)) => crate::yaml::parse_documents(text)
            .map_err(|e| NotRendered::Failed(format!("helm.values is not YAML: {e}")))?
            .into_iter()
            .next(),
        (None, None) => None,
    };
    merge(&mut values, inline.unwrap_or(Value::Null));
    for (name, value, force_string) in &options.parameters {
        let set = if *force_string { set_string_at_path } else { set_at_path };
        set(&mut values, name, value).map_err(|e| NotRendered::Failed(format!("parameter {name}: {e}")))?;
    }
    for (name, path) in &options.file_parameters {
        let text = (source.read)(path)?
            .ok_or_else(|| NotRendered::Failed(format!("fileParameter {name}: {path} does not exist")))?;
        set_string_at_path(&mut values, name, &text)
            .map_err(|e| NotRendered::Failed(format!("fileParameter {name}: {e}")))?;
    }
    let release = options.release_name.as_deref().unwrap_or(source.application);
    let namespace = options.namespace.as_deref().or(source.namespace).unwrap_or("default");
    let mut api_versions = charts.api_versions.to_vec();
    api_versions.extend(options.api_versions.iter().cloned());
    let template = Template {
        chart: source.chart,
        readable: source.chart,
        release,
        namespace,
        values: &values,
        kube_version: options.kube_version.as_deref().or(charts.kube_version),
        api_versions: &api_versions,
        include_crds: !options.skip_crds,
        is_upgrade: false,
        // The repo-server fetches what a schema refers to; the sandbox cannot.
        skip_schema_validation: super::schema::remote_reference(source.chart).is_some(),
    };
    let key = template_key(helm, &template, source.chart)
        .map_err(|e| NotRendered::Failed(format!("cannot read the chart: {e}")))?;
    let printed =
        (charts.templates)(&key, false, &|| helm.template(&template, cancel)).map_err(|e| match e {
            // Dependencies the repo-server would fetch (`helm dependency build`): not a failure.
            crate::render::kustomize::BuildError::Failed(message)
                if message.contains("missing in charts/") =>
            {
                NotRendered::External(format!(
                    "its chart's dependencies are not vendored in charts/: {message}"
                ))
            }
            other => NotRendered::Failed(format!("helm template failed: {other}")),
        })?;
    let hooks = printed.hooks.into_iter().map(|(_, hook)| hook);
    Ok(printed.crds.into_iter().chain(printed.objects).chain(hooks).collect())
}
