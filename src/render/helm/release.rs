//! A HelmRelease rendered as helm-controller renders it: its chart found in a source of this
//! repository, the values merged in the controller's order, `helm template` run by the engine,
//! then the controller's post-rendering (commonMetadata, then its origin labels).
//! What fluxplan cannot reproduce yet is said, never guessed: the release is not planned.

use super::engine::{Helm, Template};
use super::manifest::Release;
use super::units::ChartVersion;
use crate::cancel::CancelToken;
use crate::charts::credentials::{docker_login, SourceCredentials};
use crate::charts::fetch::{wants_credentials, Auth};
use crate::charts::oci;
use crate::charts::store::ChartRequest;
use crate::charts::tls::{SourceTls, TlsError};
use crate::flux::helm::{ChartSource, CrdPolicy, HelmReleaseSpec, HELM_GROUP};
use crate::flux::SourceRef;
use crate::paths;
use crate::render::kustomize::BuildError;
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
    /// A ConfigMap or Secret of the cluster (kind, namespace, name): Secrets only when read.
    pub cluster: &'a dyn Fn(&str, &str, &str) -> crate::cluster::Lookup,
    /// A chart given for this HelmRelease (`--chart`): a directory or a packaged archive, used
    /// whatever its spec names.
    pub given_chart: Option<&'a Path>,
    /// A source object (HelmRepository, OCIRepository, HelmChart) of the same render.
    pub source_object: &'a dyn Fn(&SourceRef) -> Option<Value>,
    /// Builds a kustomization directory with kustomize (reading nothing outside the second
    /// directory), for `postRenderers`.
    pub kustomize: &'a dyn Fn(&Path, &Path) -> Result<String, crate::render::kustomize::BuildError>,
    /// `helm template` through the cache: by key, `true` when the output may hold a Secret's
    /// value (then it is kept in memory only), and the run to make on a miss.
    pub templates: &'a Templates<'a>,
    /// Gets a chart from a Helm repository or an OCI registry, with its source's credentials;
    /// `Err` says why it cannot.
    pub fetch: &'a FetchChart<'a>,
    /// The release is installed (its storage says so): rendered as an upgrade.
    pub upgrade: bool,
    /// `.Capabilities`: the cluster's Kubernetes version and extra API versions.
    pub kube_version: Option<&'a str>,
    pub api_versions: &'a [String],
}

/// Gets a chart's archive (see `Inputs::fetch`).
pub type FetchChart<'a> = dyn Fn(&ChartRequest, &SourceCredentials) -> Result<PathBuf, String> + 'a;

/// `helm template` through a cache (see `Inputs::templates`).
pub type Templates<'a> =
    dyn Fn(&str, bool, &dyn Fn() -> Result<Release, BuildError>) -> Result<Release, BuildError> + Sync + 'a;

/// A release as rendered, and the chart it came from.
#[derive(Debug)]
pub struct Rendered {
    pub release: Release,
    pub chart: Option<ChartVersion>,
    /// When values come from Secrets: the release rendered with them masked, which is what is
    /// shown (`release` is what the cluster gets; only its digests are used).
    pub shown: Option<Release>,
    /// What the plan should know of how it was rendered (a schema not validated offline).
    pub warnings: Vec<String>,
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
    // fluxplan's own scratch space failing says nothing of what the controller does.
    let scratch = tempfile::tempdir().map_err(|e| unprepared(&e))?;
    let chart = match inputs.given_chart {
        Some(given) => chart_on_disk(given, spec, scratch.path(), "the chart given with --chart")?,
        None => {
            let release = format!("{namespace}/{name}");
            locate_chart(spec.chart.as_ref(), spec, inputs, scratch.path(), &release, 0)?
        }
    };
    let merged = super::values::merged(spec, namespace, inputs)?;
    let values = merged.values;
    // Where the chart's values come from its source's files, the chart is planned with them as
    // its values.yaml, as source-controller packages it.
    // Dependencies not vendored are got as source-controller gets them when it builds the chart.
    let missing = super::dependencies::missing(&chart.dir, &chart.root)
        .map_err(|why| NotRendered::External(format!("its chart's dependencies cannot be had: {why}")))?;
    let (chart_dir, readable) = if chart.values_files.is_none() && missing.is_empty() {
        (chart.dir.clone(), chart.dir.clone())
    } else {
        let copy = scratch.path().join("chart");
        let prepare = |e: std::io::Error| unprepared(&e);
        copy_chart(&chart.dir, &copy).map_err(prepare)?;
        if let Some(values) = &chart.values_files {
            std::fs::write(copy.join("values.yaml"), crate::yaml::to_yaml(values)).map_err(prepare)?;
        }
        for dependency in missing {
            cancel.check().map_err(|reason| NotRendered::Failed(RenderError::Cancelled(reason)))?;
            match dependency {
                super::dependencies::Missing::Local { name, dir } => {
                    if !dir.join("Chart.yaml").is_file() {
                        return Err(failed(format!("dependency {name}: no chart at {}", dir.display())));
                    }
                    copy_chart(&dir, &copy.join("charts").join(&name)).map_err(prepare)?;
                }
                super::dependencies::Missing::Fetch { name, request } => {
                    let archive = (inputs.fetch)(&request, &SourceCredentials::default()).map_err(|why| {
                        NotRendered::External(format!(
                            "its chart's dependency {name} could not be had ({request}): {why}"
                        ))
                    })?;
                    std::fs::create_dir_all(copy.join("charts")).map_err(prepare)?;
                    std::fs::copy(&archive, copy.join("charts").join(format!("{name}.tgz")))
                        .map_err(prepare)?;
                }
            }
        }
        (copy, scratch.path().to_path_buf())
    };
    let version = chart_version(&chart.dir);
    let holds_secrets = merged.shown.is_some();
    // The controller skips validation when the spec says so for the action it takes; a schema
    // that needs the network is validated by the controller only, never here.
    let disabled = if inputs.upgrade { spec.upgrade_skips_schema } else { spec.install_skips_schema };
    let remote = if disabled { None } else { super::schema::remote_reference(&chart_dir) };
    let warnings: Vec<String> = remote
        .iter()
        .map(|(schema, url)| {
            format!(
                "its chart's values schema ({schema}) refers to {url}: helm-controller fetches it and validates                  the values, fluxplan renders offline without validating them"
            )
        })
        .collect();
    let skip_schema_validation = disabled || remote.is_some();
    let run = |values: &Value, may_hold_secrets: bool| -> Result<Release, BuildError> {
        let template = Template {
            chart: &chart_dir,
            readable: &readable,
            release: &spec.release.name,
            namespace: &spec.release.namespace,
            values,
            kube_version: inputs.kube_version,
            api_versions: inputs.api_versions,
            include_crds: spec.install_crds != CrdPolicy::Skip,
            is_upgrade: inputs.upgrade,
            skip_schema_validation,
        };
        let key = template_key(helm, &template, &chart_dir)
            .map_err(|e| BuildError::Failed(format!("cannot read the chart: {e}")))?;
        let mut release = (inputs.templates)(&key, may_hold_secrets, &|| helm.template(&template, cancel))?;
        finish(&mut release, spec, namespace, name, inputs, helm.major() != Some(3))?;
        Ok(release)
    };
    let rendered = run(&values, holds_secrets);
    // A chart's templates may print a value in any form (encoded, split, in a name): what is shown
    // of a release with values from Secrets comes from a render that never saw them. Its messages
    // too: the real render's could quote one.
    let shown = merged.shown.as_ref().map(|shown| run(shown, false));
    let (release, shown) = match (rendered, shown) {
        (Ok(release), None) => (release, None),
        (Ok(release), Some(Ok(shown))) => (release, Some(shown)),
        (Err(e), None) => return Err(not_rendered(e)),
        (Err(e), Some(shown)) => {
            return Err(match (e, shown) {
                (BuildError::Failed(_), Err(shown_error)) => not_rendered(shown_error),
                (BuildError::Failed(_), Ok(_)) => failed(
                    "helm template failed with the values from Secrets (its message is hidden: it could quote them)".into(),
                ),
                (other, _) => not_rendered(other),
            })
        }
        (Ok(_), Some(Err(_))) => {
            return Err(NotRendered::External(
                "its objects depend on its values from Secrets in a way fluxplan cannot show without showing them: \
                 not rendered"
                    .into(),
            ))
        }
    };
    Ok(Rendered { release, shown, chart: version, warnings })
}

/// Why `helm template` gave nothing, as the plan says it.
fn not_rendered(error: BuildError) -> NotRendered {
    match error {
        // Chart dependencies source-controller would fetch: not a failure of the release.
        BuildError::Failed(message) if message.contains("missing in charts/") => {
            NotRendered::External(format!("its chart's dependencies are not vendored in charts/: {message}"))
        }
        // Helm reaching for the network (a schema reference the scan did not see): the sandbox
        // refuses it, the controller has it; not the chart's failure.
        BuildError::Failed(message) if needed_the_network(&message) => NotRendered::External(format!(
            "helm template needed the network, which fluxplan's sandbox refuses and helm-controller has: not \
             planned ({message})"
        )),
        BuildError::Failed(message) => failed(format!("helm template failed: {message}")),
        BuildError::Limit(message) => NotRendered::Failed(RenderError::Limit(message)),
        BuildError::Cancelled(reason) => NotRendered::Failed(RenderError::Cancelled(reason)),
    }
}

/// fluxplan could not copy or unpack the chart on its own disk: not planned, never "the
/// controller fails".
fn unprepared(error: &std::io::Error) -> NotRendered {
    NotRendered::External(format!(
        "fluxplan could not prepare the chart on its own disk ({error}): not planned"
    ))
}

/// Helm's words when it tried to fetch something (its schema loader's HTTP errors, a refused
/// connection, the dead proxy of the sandbox).
fn needed_the_network(message: &str) -> bool {
    ["HTTP request failed for ", "failed to create HTTP request for ", "proxyconnect tcp", "dial tcp "]
        .iter()
        .any(|words| message.contains(words))
}

/// The controller's post-rendering of a release: `postRenderers`, then `commonMetadata`, then
/// its origin labels. Helm 3 post-renders the manifest only; Helm 4 its hooks too (measured:
/// docs/helm.md). Neither post-renders the chart's `crds/`.
fn finish(
    release: &mut Release,
    spec: &HelmReleaseSpec,
    namespace: &str,
    name: &str,
    inputs: &Inputs,
    hooks_too: bool,
) -> Result<(), BuildError> {
    let mut documents = std::mem::take(&mut release.objects);
    if hooks_too {
        documents.extend(release.hooks.drain(..).map(|(_, hook)| hook));
        documents.append(&mut release.tests);
    }
    for (n, renderer) in spec.post_renderers.iter().enumerate() {
        if let Some(kustomize) = renderer.get("kustomize").filter(|k| k.is_object()) {
            documents = post_render(&documents, kustomize, inputs, n).map_err(BuildError::Failed)?;
        }
    }
    let origin = [
        (format!("{HELM_GROUP}/name"), Value::String(name.to_string())),
        (format!("{HELM_GROUP}/namespace"), Value::String(namespace.to_string())),
    ];
    for object in &mut documents {
        set_all(object, "annotations", spec.common_annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
        set_all(object, "labels", spec.common_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        set_all(object, "labels", origin.iter().cloned());
    }
    if hooks_too {
        // Helm sorts after post-rendering: a patch may make an object a hook, or a hook not one.
        for document in documents {
            release.sort(document);
        }
    } else {
        release.objects = documents;
    }
    Ok(())
}

/// The release's objects through one `postRenderers[].kustomize`: its `patches` (inline, with
/// their `target`) and `images`, applied by kustomize as helm-controller applies them.
fn post_render(
    objects: &[Value],
    kustomize: &Value,
    inputs: &Inputs,
    n: usize,
) -> Result<Vec<Value>, String> {
    crate::render::kustomize::inline::apply(
        objects,
        &kustomize["patches"],
        &kustomize["images"],
        inputs.kustomize,
    )
    .map_err(|e| format!("postRenderers[{n}].kustomize failed: {e}"))
}

/// What a `helm template` run depends on, hashed: the Helm, every file of the chart, the values,
/// the release and the capabilities. The same key prints the same release.
pub(super) fn template_key(helm: &Helm, template: &Template, chart: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let inputs = serde_json::json!({
        "helm": helm.version, "release": template.release, "namespace": template.namespace,
        "values": template.values, "kube": template.kube_version, "apis": template.api_versions,
        "crds": template.include_crds, "upgrade": template.is_upgrade,
        "skip_schema": template.skip_schema_validation,
        // What a cached release holds (test hooks kept since format 2).
        "format": 2,
    });
    hasher.update(inputs.to_string().as_bytes());
    let mut files = Vec::new();
    crate::tree::walk(chart, |entry, kind| -> Result<crate::tree::Descend, crate::tree::Unreadable> {
        if kind.is_file() {
            files.push(entry.path());
        }
        Ok(crate::tree::Descend::Yes)
    })
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    for file in files {
        let relative = file.strip_prefix(chart).unwrap_or(&file);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        let content = std::fs::read(&file)?;
        hasher.update((content.len() as u64).to_le_bytes());
        hasher.update(&content);
    }
    Ok(format!("helm-template:{}", hex::encode(hasher.finalize())))
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

/// A chart on disk (given with `--chart`, or fetched): a directory, or an archive unpacked into
/// `scratch`. Values files are paths in the chart, as in a chart from a Helm repository.
fn chart_on_disk(
    given: &Path,
    spec: &HelmReleaseSpec,
    scratch: &Path,
    whose: &str,
) -> Result<Chart, NotRendered> {
    let dir = if given.is_dir() {
        given.to_path_buf()
    } else {
        crate::charts::archive::unpack(given, &scratch.join("given"))
            .map_err(|e| failed(format!("{whose} ({}): {e}", given.display())))?
    };
    if !dir.join("Chart.yaml").is_file() {
        return Err(failed(format!("{whose} ({}) has no Chart.yaml", given.display())));
    }
    let (values_files, ignore_missing) = match &spec.chart {
        Some(ChartSource::Template { values_files, ignore_missing_values_files, .. }) => {
            (values_files.clone(), *ignore_missing_values_files)
        }
        _ => (Vec::new(), false),
    };
    let values_files = read_values_files(&dir, &values_files, ignore_missing, whose)?;
    Ok(Chart { root: dir.clone(), dir, values_files })
}

struct Chart {
    dir: PathBuf,
    /// What `file://` dependencies may reach: the source's tree, or the chart itself.
    root: PathBuf,
    /// The merged values files that replace the chart's values.yaml, when the spec names some.
    values_files: Option<Value>,
}

pub(super) fn failed(message: String) -> NotRendered {
    NotRendered::Failed(RenderError::InvalidSource(message))
}

/// Finds the chart `source` names: in a source tree of this repository, or fetched from a Helm
/// repository or OCI registry (through a HelmChart when it names one).
fn locate_chart(
    source: Option<&ChartSource>,
    spec: &HelmReleaseSpec,
    inputs: &Inputs,
    scratch: &Path,
    release: &str,
    depth: usize,
) -> Result<Chart, NotRendered> {
    let (chart, source, version, values_files, ignore_missing) = match source {
        None => return Err(failed("the HelmRelease names no chart (spec.chart or spec.chartRef)".into())),
        Some(ChartSource::Reference(reference)) => {
            let request = match reference.kind.as_str() {
                "OCIRepository" => oci_repository(reference, inputs, release)?,
                // An artifact an ArtifactGenerator builds from this repository: the chart is its root.
                "ExternalArtifact" => {
                    let tree = (inputs.source_tree)(reference).ok_or_else(|| {
                        NotRendered::External(format!(
                            "its chart comes from {reference}, which is not built locally"
                        ))
                    })?;
                    if !tree.join("Chart.yaml").is_file() {
                        return Err(failed(format!(
                            "{reference} holds no chart (no Chart.yaml at its root)"
                        )));
                    }
                    return Ok(Chart { dir: tree.clone(), root: tree, values_files: None });
                }
                "HelmChart" if depth == 0 => {
                    let template = helm_chart(reference, inputs)?;
                    return locate_chart(Some(&template), spec, inputs, scratch, release, depth + 1);
                }
                _ => {
                    return Err(NotRendered::External(format!(
                        "its chart comes from {reference}, which fluxplan does not fetch yet"
                    )))
                }
            };
            return fetched(&request, spec, inputs, scratch);
        }
        Some(ChartSource::Template { chart, source, version, values_files, ignore_missing_values_files }) => {
            (chart, source, version, values_files, *ignore_missing_values_files)
        }
    };
    if source.kind == "HelmRepository" {
        let request = helm_repository(source, chart, version.as_deref(), inputs, release)?;
        return fetched(&request, spec, inputs, scratch);
    }
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
    Ok(Chart { dir, root: tree, values_files })
}

/// A chart to fetch, with its source's credentials.
struct Sourced {
    request: ChartRequest,
    credentials: SourceCredentials,
    /// The Secret whose login is sent (`Secret NAMESPACE/NAME`), named when it is refused.
    login: Option<String>,
}

impl Sourced {
    /// Why the chart could not be had (`why`, the fetch's message), and when the server wants
    /// credentials, whose it refused or that the source gives none.
    fn explain(&self, why: &str) -> String {
        if !wants_credentials(why) {
            return why.to_string();
        }
        match &self.login {
            Some(secret) => format!("{why}: the server refused the login of {secret} (spec.secretRef)"),
            None => format!("{why}: it wants credentials, and its source gives no login (spec.secretRef)"),
        }
    }
}

/// The chart `sourced` names, fetched and unpacked.
fn fetched(
    sourced: &Sourced,
    spec: &HelmReleaseSpec,
    inputs: &Inputs,
    scratch: &Path,
) -> Result<Chart, NotRendered> {
    let request = &sourced.request;
    let archive = (inputs.fetch)(request, &sourced.credentials).map_err(|why| {
        NotRendered::External(format!("its chart could not be had ({request}): {}", sourced.explain(&why)))
    })?;
    chart_on_disk(&archive, spec, scratch, &format!("the chart fetched for {request}"))
}

/// A source object of the render with its credentials, and the Secret whose login they hold; or
/// why the chart it holds is not planned. `release` (`NAMESPACE/NAME`) is the HelmRelease, for
/// the reasons that say how to give its chart.
fn source_object(
    reference: &SourceRef,
    inputs: &Inputs,
    release: &str,
) -> Result<(Value, SourceCredentials, Option<String>), NotRendered> {
    let object = (inputs.source_object)(reference).ok_or_else(|| {
        NotRendered::External(format!(
            "its chart's source {reference} is not in this render (only the cluster has it)"
        ))
    })?;
    let spec = &object["spec"];
    let by_hand = format!("give its chart with --chart {release}=DIR|TGZ");
    if spec.get("verify").is_some_and(|v| !v.is_null()) {
        return Err(NotRendered::External(format!(
            "its chart's source {reference} verifies signatures (spec.verify), which fluxplan cannot do: not \
             fetched; {by_hand}"
        )));
    }
    if let Some(provider) = spec["provider"].as_str().filter(|p| !p.is_empty() && *p != "generic") {
        return Err(NotRendered::External(format!(
            "its chart's source {reference} authenticates with provider {provider}, whose cloud credentials \
             fluxplan does not get: not fetched; {by_hand}"
        )));
    }
    let secret_named =
        |field: &str| spec[field]["name"].as_str().filter(|n| !n.is_empty()).map(str::to_string);
    let read = |field: &str, name: &str| secret_data(reference, field, name, inputs, &by_hand);
    let mut credentials = SourceCredentials::default();
    let login = secret_named("secretRef")
        .map(|name| Ok::<_, NotRendered>((read("secretRef", &name)?, name)))
        .transpose()?;
    if let Some(name) = secret_named("certSecretRef") {
        let data = read("certSecretRef", &name)?;
        let tls = SourceTls::from_secret_data(&data).map_err(|why| {
            failed(format!(
                "{reference}'s certSecretRef Secret {}/{name} cannot be used: {why}",
                reference.namespace
            ))
        })?;
        credentials.tls = Some(tls);
    } else if let Some((data, name)) = login.as_ref().filter(|_| reference.kind == "HelmRepository") {
        // Deprecated, still honoured by source-controller: TLS keys in a HelmRepository's secretRef,
        // when it has no certSecretRef. Keys missing there are no error (it may hold a login only).
        credentials.tls = match SourceTls::from_secret_data(data) {
            Ok(tls) => Some(tls),
            Err(TlsError::Incomplete(_)) => None,
            Err(TlsError::Invalid(why)) => {
                return Err(failed(format!(
                    "{reference}'s secretRef Secret {}/{name} holds TLS keys that cannot be used: {why}",
                    reference.namespace
                )))
            }
        };
    }
    if let Some((data, name)) = &login {
        let url = url_of(&object, reference)?;
        credentials.auth = login_of(data, &url).map_err(|why| {
            failed(format!("{reference}'s secretRef Secret {}/{name}: {why}", reference.namespace))
        })?;
        if credentials.auth.is_none() && credentials.tls.is_none() {
            return Err(failed(format!(
                "Secret {}/{name} holds neither username and password nor a .dockerconfigjson login",
                reference.namespace
            )));
        }
    }
    let login = login
        .filter(|_| credentials.auth.is_some())
        .map(|(_, name)| format!("Secret {}/{name}", reference.namespace));
    Ok((object, credentials, login))
}

/// A Secret a source names in `field`, from the cluster (read with `--read-secrets`). Never shown.
fn secret_data(
    reference: &SourceRef,
    field: &str,
    name: &str,
    inputs: &Inputs,
    by_hand: &str,
) -> Result<std::collections::BTreeMap<String, String>, NotRendered> {
    let named = format!("Secret {}/{name}", reference.namespace);
    match (inputs.cluster)("Secret", &reference.namespace, name) {
        crate::cluster::Lookup::Found(data) => Ok(data),
        crate::cluster::Lookup::NotFound => {
            Err(failed(format!("{reference} names {named} in spec.{field}, which does not exist")))
        }
        crate::cluster::Lookup::Unknown => Err(NotRendered::External(format!(
            "its chart's source {reference} needs {named} (spec.{field}), which only the cluster holds: plan with \
             a cluster and --read-secrets, or {by_hand}"
        ))),
    }
}

/// The login in a `secretRef`'s data: `username` and `password`, else the entry of a
/// `.dockerconfigjson` for the registry of `url`; `None` when it holds neither.
fn login_of(data: &std::collections::BTreeMap<String, String>, url: &str) -> Result<Option<Auth>, String> {
    if let (Some(username), Some(password)) = (data.get("username"), data.get("password")) {
        return Ok(Some(Auth::Basic { username: username.clone(), password: password.clone() }));
    }
    let Some(config) = data.get(".dockerconfigjson") else { return Ok(None) };
    let parsed = url::Url::parse(url).map_err(|_| format!("{url} is not a URL"))?;
    let host = parsed.host_str().unwrap_or("");
    let registry = match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    docker_login(config, &registry).map(Some)
}

fn url_of(object: &Value, reference: &SourceRef) -> Result<String, NotRendered> {
    object["spec"]["url"]
        .as_str()
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .ok_or_else(|| failed(format!("{reference} has no spec.url")))
}

/// A chart of a HelmRepository (HTTP index, or `type: oci`), as source-controller resolves it.
fn helm_repository(
    reference: &SourceRef,
    chart: &str,
    version: Option<&str>,
    inputs: &Inputs,
    release: &str,
) -> Result<Sourced, NotRendered> {
    let (object, credentials, login) = source_object(reference, inputs, release)?;
    let url = url_of(&object, reference)?;
    let version = version.filter(|v| !v.is_empty()).unwrap_or("*").to_string();
    let request = if object["spec"]["type"] == "oci" || url.starts_with("oci://") {
        let url = format!("{}/{chart}", url.trim_end_matches('/'));
        ChartRequest::Oci { url, reference: oci::Reference::Semver(version) }
    } else {
        ChartRequest::Repository { url, chart: chart.to_string(), version }
    };
    Ok(Sourced { request, credentials, login })
}

/// The chart of an OCIRepository: its `ref` (digest, then semver, then tag; `latest` by default).
fn oci_repository(reference: &SourceRef, inputs: &Inputs, release: &str) -> Result<Sourced, NotRendered> {
    let (object, credentials, login) = source_object(reference, inputs, release)?;
    let url = url_of(&object, reference)?;
    let selector = &object["spec"]["layerSelector"]["mediaType"];
    if selector.as_str().is_some_and(|m| m != oci::CHART_LAYER) {
        return Err(NotRendered::External(format!(
            "{reference} selects layer {selector}, not a Helm chart's"
        )));
    }
    let pinned = &object["spec"]["ref"];
    let text = |key: &str| pinned[key].as_str().filter(|v| !v.is_empty()).map(str::to_string);
    let reference = match (text("digest"), text("semver"), text("tag")) {
        (Some(digest), _, _) => oci::Reference::Digest(digest),
        (None, Some(range), _) => oci::Reference::Semver(range),
        (None, None, tag) => oci::Reference::Tag(tag.unwrap_or_else(|| "latest".into())),
    };
    Ok(Sourced { request: ChartRequest::Oci { url, reference }, credentials, login })
}

/// A HelmChart's chart, read as the template of a HelmRelease.
fn helm_chart(reference: &SourceRef, inputs: &Inputs) -> Result<ChartSource, NotRendered> {
    let object = (inputs.source_object)(reference).ok_or_else(|| {
        NotRendered::External(format!("its chart's source {reference} is not in this render"))
    })?;
    let spec = &object["spec"];
    let source = SourceRef {
        kind: spec["sourceRef"]["kind"].as_str().unwrap_or("").to_string(),
        name: spec["sourceRef"]["name"].as_str().unwrap_or("").to_string(),
        namespace: reference.namespace.clone(),
    };
    Ok(ChartSource::Template {
        chart: spec["chart"].as_str().unwrap_or("").to_string(),
        version: spec["version"].as_str().map(str::to_string),
        source,
        values_files: spec["valuesFiles"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        ignore_missing_values_files: spec["ignoreMissingValuesFiles"].as_bool() == Some(true),
    })
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
        super::values::merge(&mut merged, document);
    }
    Ok(Some(merged))
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
