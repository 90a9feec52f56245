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
use crate::flux::helm::{ChartSource, CrdPolicy, HelmReleaseSpec, PostRenderStrategy, HELM_GROUP};
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
    /// Why a Secret (namespace, name) is not read for values (`None`: it may be).
    pub values_secret_refused: &'a dyn Fn(&str, &str) -> Option<String>,
    /// A chart given for this HelmRelease (`--chart`): a directory or a packaged archive, used
    /// whatever its spec names.
    pub given_chart: Option<&'a Path>,
    /// A source object (HelmRepository, OCIRepository, HelmChart) of the same render.
    pub source_object: &'a dyn Fn(&SourceRef) -> Option<Value>,
    /// Builds a kustomization directory with kustomize (reading nothing outside the second
    /// directory), for `postRenderers`.
    pub kustomize: &'a dyn Fn(&Path, &Path) -> Result<String, crate::render::kustomize::BuildError>,
    /// `helm template` through the cache: by key, and the run to make on a miss.
    pub templates: &'a Templates<'a>,
    /// Gets a chart from a Helm repository or an OCI registry, with its source's credentials;
    /// `Err` says why it cannot.
    pub fetch: &'a FetchChart<'a>,
    /// Packaged charts prepared once per digest (the chart store).
    pub prepared: &'a super::prepared::PreparedCharts,
    /// The release is installed (its storage says so): rendered as an upgrade.
    pub upgrade: bool,
    /// `.Capabilities`: the cluster's Kubernetes version and extra API versions.
    pub kube_version: Option<&'a str>,
    pub api_versions: &'a [String],
}

/// Gets a chart's archive (see `Inputs::fetch`).
pub type FetchChart<'a> =
    dyn Fn(&ChartRequest, &SourceCredentials) -> Result<crate::charts::store::Fetched, String> + 'a;

/// `helm template` through a cache (see `Inputs::templates`).
pub type Templates<'a> =
    dyn Fn(&str, &dyn Fn() -> Result<Release, BuildError>) -> Result<Release, BuildError> + Sync + 'a;

/// A release as rendered, and the chart it came from.
#[derive(Debug)]
pub struct Rendered {
    pub release: Release,
    pub chart: Option<ChartVersion>,
    /// Some values come from Secrets: the release was rendered with each of them masked.
    pub from_secrets: bool,
    /// What the chart's templates ask of the cluster (`lookup`, `.Capabilities`).
    pub calls: super::template_calls::TemplateCalls,
    /// What the render depends on, hashed (chart files, values, release, capabilities): equal at
    /// base and head when the release's inputs did not change.
    pub inputs_digest: String,
    /// Entries of its chart archive that Helm's directory loader would read otherwise than the
    /// archive loader the controller uses (hidden from a render of the unpacked chart).
    pub loader_differences: Vec<String>,
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
    // Made only for a chart directory that must be copied; removed after the render.
    let mut scratch = None;
    let chart = match inputs.given_chart {
        Some(given) => chart_on_disk(given, None, spec, "the chart given with --chart", inputs)?,
        None => {
            let release = format!("{namespace}/{name}");
            locate_chart(spec.chart.as_ref(), spec, inputs, &release, 0)?
        }
    };
    let dialect = super::strvals::Dialect::of_major(helm.major());
    let merged = super::values::merged(spec, namespace, inputs, dialect)?;
    let prepared = match &chart.form {
        ChartForm::Directory { dir, root } => {
            prepare_directory(dir, root, chart.values_files.as_ref(), inputs, &mut scratch, cancel)?
        }
        ChartForm::Archive(archive) => prepare_archive(archive, chart.values_files.as_ref(), inputs)?,
    };
    let (chart_dir, readable) = (&prepared.chart, &prepared.readable);
    // The controller skips validation when the spec says so for the action it takes; a schema
    // that needs the network is validated by the controller only, never here.
    let disabled = if inputs.upgrade { spec.upgrade_skips_schema } else { spec.install_skips_schema };
    let remote = if disabled { None } else { prepared.remote_schema.clone() };
    let warnings: Vec<String> = remote
        .iter()
        .map(|(schema, url)| {
            format!(
                "its chart's values schema ({schema}) refers to {url}: helm-controller fetches it and validates \
                 the values, fluxplan renders offline without validating them"
            )
        })
        .collect();
    // A chart's templates may branch on a value, print it in any form, fail or loop on it: with
    // values from Secrets, the only render made is the one where each of them is masked, so
    // nothing the plan says (objects, status, errors, timing) can depend on a Secret's value.
    let super::values::Merged { values, int64s, from_secrets } = merged;
    let template = Template {
        chart: chart_dir,
        readable,
        release: &spec.release.name,
        namespace: &spec.release.namespace,
        values: &values,
        int64s: &int64s,
        kube_version: inputs.kube_version,
        api_versions: inputs.api_versions,
        include_crds: spec.install_crds != CrdPolicy::Skip,
        is_upgrade: inputs.upgrade,
        skip_schema_validation: disabled || remote.is_some(),
        // helm-controller always post-renders (its origin labels): Helm 4 reads each template
        // file through kyaml around it.
        through_kyaml: helm.major() == Some(4),
    };
    let key = template_key(helm, &template, &prepared.identity)
        .map_err(|e| failed(format!("cannot read the chart: {e}")))?;
    let mut release = (inputs.templates)(&key, &|| helm.template(&template, cancel))
        .map_err(|e| masked_not_rendered(e, from_secrets))?;
    finish(&mut release, spec, namespace, name, inputs, helm.major() != Some(3))
        .map_err(|e| masked_not_rendered(e, from_secrets))?;
    // What the templates ask of the cluster, read from the chart as it is rendered (an archive
    // with the controller's names).
    let calls = prepared.calls.with_values(&values);
    Ok(Rendered {
        release,
        chart: prepared.version,
        from_secrets,
        calls,
        inputs_digest: key,
        loader_differences: prepared.differences,
        warnings,
    })
}

/// Why `helm template` gave nothing. With values from Secrets masked, a chart may fail where
/// the controller (which sees the values) does not, e.g. a schema that wants a number: not
/// planned rather than failed.
fn masked_not_rendered(error: BuildError, from_secrets: bool) -> NotRendered {
    match (error, from_secrets) {
        (BuildError::Failed(message), true) => NotRendered::External(format!(
            "rendered with its values from Secrets masked, helm template failed: {message}"
        )),
        (error, _) => not_rendered(error),
    }
}

/// A chart ready for `helm template`: the path to give it, the directory it may read, what
/// identifies it in the render cache's key, and what the render needs to know of it.
struct Prepared {
    chart: PathBuf,
    readable: PathBuf,
    identity: ChartIdentity,
    version: Option<ChartVersion>,
    differences: Vec<String>,
    remote_schema: Option<(String, String)>,
    calls: super::template_calls::ChartCalls,
}

/// What a chart is, for the render cache's key.
pub(super) enum ChartIdentity {
    /// A directory: every file of it.
    Directory(PathBuf),
    /// An archive `helm template` reads, by digest (of it, or of the original and the changes).
    Archive(String),
    /// The archive of this digest unpacked (rendered by Helm's directory loader).
    Unpacked(String),
    /// A directory whose files hash to this digest (`prepared::directory_digest`).
    Hashed(String),
}

/// A chart directory of this repository, loaded by Helm's directory loader (source-controller
/// loads it so too): its values files as its values.yaml, and the dependencies it does not
/// vendor got as source-controller gets them when it builds the chart.
fn prepare_directory(
    dir: &Path,
    root: &Path,
    values_files: Option<&Value>,
    inputs: &Inputs,
    scratch: &mut Option<tempfile::TempDir>,
    cancel: &CancelToken,
) -> Result<Prepared, NotRendered> {
    let missing = super::dependencies::missing(dir, root)
        .map_err(|why| NotRendered::External(format!("its chart's dependencies cannot be had: {why}")))?;
    let version = chart_version(dir);
    if values_files.is_none() && missing.is_empty() {
        // The chart as the export holds it: read once for every release of it.
        let facts = inputs.prepared.directory(dir).map_err(failed)?;
        return Ok(Prepared {
            calls: facts.calls.clone(),
            remote_schema: facts.remote_schema.clone(),
            identity: ChartIdentity::Hashed(facts.digest.clone()),
            chart: dir.to_path_buf(),
            readable: dir.to_path_buf(),
            version,
            differences: Vec::new(),
        });
    }
    let prepare = |e: std::io::Error| unprepared(&e);
    // fluxplan's own scratch space failing says nothing of what the controller does.
    let scratch = scratch.insert(tempfile::tempdir().map_err(prepare)?).path();
    let copy = scratch.join("chart");
    copy_chart(dir, &copy).map_err(prepare)?;
    if let Some(values) = values_files {
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
                let fetched = (inputs.fetch)(&request, &SourceCredentials::default()).map_err(|why| {
                    NotRendered::External(format!(
                        "its chart's dependency {name} could not be had ({request}): {why}"
                    ))
                })?;
                std::fs::create_dir_all(copy.join("charts")).map_err(prepare)?;
                std::fs::copy(&fetched.archive, copy.join("charts").join(format!("{name}.tgz")))
                    .map_err(prepare)?;
            }
        }
    }
    Ok(directory_prepared(copy, scratch.to_path_buf(), version))
}

/// A chart directory ready: what its files call and its schemas refer to, read from them.
fn directory_prepared(chart: PathBuf, readable: PathBuf, version: Option<ChartVersion>) -> Prepared {
    // A chart too large to read fails in Helm, which says so.
    let files = crate::charts::chart_files::chart_files(&chart).unwrap_or_default();
    Prepared {
        calls: super::template_calls::ChartCalls::of(
            files.iter().map(|f| (f.path.as_str(), f.text.as_str())),
        ),
        remote_schema: super::schema::remote_reference(&chart),
        identity: ChartIdentity::Directory(chart.clone()),
        chart,
        readable,
        version,
        differences: Vec::new(),
    }
}

/// A packaged chart, rendered as helm-controller loads it: `helm template` of the archive itself
/// (Helm's archive loader), alone in a directory of its own. No dependency is built: a declared
/// subchart the archive does not vendor is left out of its `Chart.yaml`, as the controller, which
/// never checks dependencies, installs without it. Values files and a version set by the
/// controller rewrite those entries only.
fn prepare_archive(
    archive: &Archive,
    values_files: Option<&Value>,
    inputs: &Inputs,
) -> Result<Prepared, NotRendered> {
    let facts = &archive.facts;
    let changes = crate::charts::loader::Changes {
        values_yaml: values_files.map(|v| crate::yaml::to_yaml(v).into_bytes()),
        version: archive.version.clone(),
        drop_dependencies: facts.unvendored.clone(),
    };
    let (path, identity) = inputs.prepared.for_helm(&archive.packaged, &changes, &archive.whose)?;
    let mut calls = facts.calls.clone();
    if let Some(values) = &changes.values_yaml {
        calls.values_file("values.yaml", &String::from_utf8_lossy(values));
    }
    Ok(Prepared {
        readable: path.parent().map_or_else(|| path.clone(), Path::to_path_buf),
        chart: path,
        identity: ChartIdentity::Archive(identity),
        version: facts.chart.clone(),
        differences: facts.loader_differences.clone(),
        remote_schema: facts.remote_schema.clone(),
        calls,
    })
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
/// its origin labels (one chain: helm-controller `internal/postrender/build.go`). Helm 3
/// post-renders the manifest only. Helm 4 follows `spec.postRenderStrategy` (Helm's
/// `renderResources`, `pkg/action/action.go`): `combined` (the default) post-renders hooks and
/// tests in one stream with the manifest, `separate` in a stream of their own, `nohooks` not at
/// all; then it sorts every document again, so a patch may make an object a hook or a hook not
/// one. Neither post-renders the chart's `crds/`.
fn finish(
    release: &mut Release,
    spec: &HelmReleaseSpec,
    namespace: &str,
    name: &str,
    inputs: &Inputs,
    helm_4: bool,
) -> Result<(), BuildError> {
    if !helm_4 {
        release.objects =
            post_render_chain(std::mem::take(&mut release.objects), spec, namespace, name, inputs)?;
        return Ok(());
    }
    // Helm 4 reads what the chain wrote and trims each document (`post_render`).
    let chain = |documents: Vec<Value>| {
        let mut documents = post_render_chain(documents, spec, namespace, name, inputs)?;
        documents.iter_mut().for_each(super::post_render::trim_document_end);
        Ok::<_, BuildError>(documents)
    };
    let mut hooks: Vec<Value> = release.hooks.drain(..).map(|(_, hook)| hook).collect();
    hooks.append(&mut release.tests);
    let objects = std::mem::take(&mut release.objects);
    let documents = match &spec.post_render_strategy {
        PostRenderStrategy::Combined => chain(objects.into_iter().chain(hooks).collect())?,
        PostRenderStrategy::NoHooks => chain(objects)?.into_iter().chain(hooks).collect(),
        // Helm skips a stream that holds nothing.
        PostRenderStrategy::Separate if hooks.is_empty() => chain(objects)?,
        PostRenderStrategy::Separate => chain(objects)?.into_iter().chain(chain(hooks)?).collect(),
        PostRenderStrategy::Invalid(value) => {
            return Err(BuildError::Failed(format!(
                "spec.postRenderStrategy {value:?} is not one of nohooks, combined, separate: the API server refuses \
                 the HelmRelease"
            )))
        }
    };
    for document in documents {
        release.sort(document);
    }
    Ok(())
}

/// Documents through the controller's chain of post-renderers: each `postRenderers[].kustomize`,
/// then `commonMetadata`, then the origin labels.
fn post_render_chain(
    mut documents: Vec<Value>,
    spec: &HelmReleaseSpec,
    namespace: &str,
    name: &str,
    inputs: &Inputs,
) -> Result<Vec<Value>, BuildError> {
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
    Ok(documents)
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
pub(super) fn template_key(
    helm: &Helm,
    template: &Template,
    chart: &ChartIdentity,
) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let inputs = serde_json::json!({
        "helm": helm.version, "release": template.release, "namespace": template.namespace,
        "values": template.values, "int64s": template.int64s, "kube": template.kube_version, "apis": template.api_versions,
        "crds": template.include_crds, "upgrade": template.is_upgrade,
        "skip_schema": template.skip_schema_validation, "through_kyaml": template.through_kyaml,
        // What a cached release holds (test hooks kept since format 2; hooks sorted as Helm's
        // manifest sorter sorts them since format 3; a block scalar that ends a document keeps
        // its last line break since format 4; documents read through kyaml as Helm 4 reads them
        // around a post-renderer since format 5).
        "format": 5,
    });
    hasher.update(inputs.to_string().as_bytes());
    let chart = match chart {
        // By digest: nothing of the chart is read for the key.
        ChartIdentity::Archive(digest) | ChartIdentity::Unpacked(digest) | ChartIdentity::Hashed(digest) => {
            let form: &[u8] = match chart {
                ChartIdentity::Archive(_) => b"archive\0",
                ChartIdentity::Unpacked(_) => b"unpacked\0",
                _ => b"directory\0",
            };
            hasher.update(form);
            hasher.update(digest.as_bytes());
            return Ok(format!("helm-template:{}", hex::encode(hasher.finalize())));
        }
        ChartIdentity::Directory(dir) => dir,
    };
    hasher.update(b"directory\0");
    hasher.update(super::prepared::directory_digest(chart)?.as_bytes());
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

/// A chart on disk (given with `--chart`, or fetched: kept by `digest`): a directory, or an
/// archive. Values files are paths in the chart, as in a chart from a Helm repository.
fn chart_on_disk(
    given: &Path,
    digest: Option<&str>,
    spec: &HelmReleaseSpec,
    whose: &str,
    inputs: &Inputs,
) -> Result<Chart, NotRendered> {
    let (values_files, ignore_missing) = match &spec.chart {
        Some(ChartSource::Template { values_files, ignore_missing_values_files, .. }) => {
            (values_files.clone(), *ignore_missing_values_files)
        }
        _ => (Vec::new(), false),
    };
    if given.is_dir() {
        if !given.join("Chart.yaml").is_file() {
            return Err(failed(format!("{whose} ({}) has no Chart.yaml", given.display())));
        }
        let values_files = read_values_files(given, &values_files, ignore_missing, whose)?;
        let form = ChartForm::Directory { dir: given.to_path_buf(), root: given.to_path_buf() };
        return Ok(Chart { form, values_files });
    }
    let archive = match digest {
        Some(digest) => {
            let packaged = super::prepared::Packaged::kept(given.to_path_buf(), digest.to_string());
            Archive::of(packaged, None, whose, inputs)?
        }
        None => Archive::read(given, whose, inputs)?,
    };
    // Only values files need the archive's own files.
    let values_files = match values_files.is_empty() {
        true => None,
        false => {
            let chart = inputs.prepared.load(&archive.packaged, whose)?;
            archive_values_files(&chart, &values_files, ignore_missing, whose)?
        }
    };
    Ok(Chart { form: ChartForm::Archive(archive), values_files })
}

struct Chart {
    form: ChartForm,
    /// The merged values files that replace the chart's values.yaml, when the spec names some.
    values_files: Option<Value>,
}

/// How the controller loads the chart.
enum ChartForm {
    /// A chart directory of a source of this repository (`root`: what `file://` dependencies
    /// may reach).
    Directory { dir: PathBuf, root: PathBuf },
    /// A packaged chart: fetched, given, or a `.tgz` at a source's chart path.
    Archive(Archive),
}

/// A chart archive, and what its loader reads of it (learned once per digest).
struct Archive {
    packaged: super::prepared::Packaged,
    facts: std::sync::Arc<super::prepared::ChartFacts>,
    /// `.Chart.Version` as helm-controller sets it (a chartRef to an OCIRepository).
    version: Option<String>,
    /// How messages name it.
    whose: String,
}

impl Archive {
    /// Reads the archive at `path` (a chart given, or in a source tree).
    fn read(path: &Path, whose: &str, inputs: &Inputs) -> Result<Archive, NotRendered> {
        use crate::charts::loader::MAX_LOADED_BYTES;
        let size =
            std::fs::metadata(path).map_err(|e| failed(format!("{whose}: cannot read it: {e}")))?.len();
        if size > MAX_LOADED_BYTES {
            return Err(NotRendered::Failed(RenderError::Limit(format!(
                "{whose} weighs more than {} MiB",
                MAX_LOADED_BYTES >> 20
            ))));
        }
        let bytes = std::fs::read(path).map_err(|e| failed(format!("{whose}: cannot read it: {e}")))?;
        Self::of(super::prepared::Packaged::in_memory(bytes), None, whose, inputs)
    }

    /// The archive `packaged`; `revision`: the OCIRepository artifact revision whose digest
    /// helm-controller appends to the chart's version.
    fn of(
        packaged: super::prepared::Packaged,
        revision: Option<&str>,
        whose: &str,
        inputs: &Inputs,
    ) -> Result<Archive, NotRendered> {
        let facts = inputs.prepared.facts(&packaged, whose)?;
        let version = match revision {
            Some(revision) => Some(digest_version(&facts.version, revision).map_err(failed)?),
            None => None,
        };
        Ok(Archive { packaged, facts, version, whose: whose.to_string() })
    }
}

/// The chart version helm-controller gives a chart from an OCIRepository
/// (`mutateChartWithSourceRevision`): the first 12 hex digits of the artifact's digest as build
/// metadata. A semver tag must be the chart's version.
fn digest_version(version: &Value, revision: &str) -> Result<String, String> {
    use crate::charts::version::Version;
    let written = version.as_str().map(str::to_string).unwrap_or_else(|| version.to_string());
    let parsed = Version::parse(&written).ok_or_else(|| format!("invalid chart version {written}"))?;
    let invalid = || format!("invalid artifact revision {revision}");
    let short = |digest: &str| -> Result<String, String> {
        match digest.split(':').collect::<Vec<_>>()[..] {
            [_, hex] if hex.len() >= 12 => Ok(hex.get(..12).ok_or_else(invalid)?.to_string()),
            _ => Err(invalid()),
        }
    };
    let pair: Vec<&str> = revision.split('@').collect();
    let tag = revision.contains('@').then(|| pair[0].replace('_', "+"));
    let tag_version = Version::parse(tag.as_deref().unwrap_or(revision));
    let metadata = match tag_version {
        Some(tag_version) => {
            if pair.len() != 2 || !tag_version.same_as(&parsed) {
                return Err(format!("artifact revision {} does not match chart version {written}", pair[0]));
            }
            short(pair[1])?
        }
        None => short(revision)?,
    };
    Ok(parsed.with_metadata(&metadata))
}

/// The values files (paths in the chart archive) merged in order, as source-controller merges
/// them when it packages a fetched chart: `values.yaml` is the chart's values, any other a file
/// of the chart's `.Files`; `None` when there are none.
fn archive_values_files(
    chart: &crate::charts::loader::ChartArchive,
    files: &[String],
    ignore_missing: bool,
    whose: &str,
) -> Result<Option<Value>, NotRendered> {
    merge_values_files(files, ignore_missing, whose, |file| {
        let name = crate::charts::loader::clean(file);
        let data = if name == "values.yaml" {
            chart.last("values.yaml")
        } else if file.starts_with('/') {
            None
        } else {
            chart.chart_file(&name)
        };
        data.map(|data| String::from_utf8_lossy(data).into_owned())
            .ok_or_else(|| format!("{whose}: no values file found at path '{file}'"))
    })
}

/// `files` read with `read` (`Err`: why one cannot be, skipped with `ignore_missing`), each a map
/// as sigs.k8s.io/yaml reads it, merged in order with `MergeMaps` as source-controller merges
/// them (`mergeFileValues`/`mergeChartValues`); `None` when there are none.
fn merge_values_files(
    files: &[String],
    ignore_missing: bool,
    whose: &str,
    read: impl Fn(&str) -> Result<String, String>,
) -> Result<Option<Value>, NotRendered> {
    if files.is_empty() {
        return Ok(None);
    }
    let mut merged = super::shared::new_map([]);
    for file in files {
        let text = match read(file) {
            Ok(text) => text,
            Err(_) if ignore_missing => continue,
            Err(why) => return Err(failed(why)),
        };
        let document = super::values::values_document(&text)
            .map_err(|e| failed(format!("values file '{file}' in {whose} is not a map of values: {e}")))?;
        merged = super::shared::merge_maps(&merged, &super::values::as_map(document));
    }
    Ok(Some(super::shared::map_to_json(&merged)))
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
    release: &str,
    depth: usize,
) -> Result<Chart, NotRendered> {
    let (chart, source, version, values_files, ignore_missing) = match source {
        None => return Err(failed("the HelmRelease names no chart (spec.chart or spec.chartRef)".into())),
        Some(ChartSource::Reference(reference)) => {
            let request = match reference.kind.as_str() {
                "OCIRepository" => oci_repository(reference, inputs, release)?,
                // An artifact an ArtifactGenerator builds from this repository: the chart is its root.
                // helm-controller loads it as an archive (source-watcher packs the generated
                // tree): the chart is what the archive loader reads of it, `.helmignore` and
                // dot-files included, and its files must sit in one top directory.
                "ExternalArtifact" => {
                    let tree = (inputs.source_tree)(reference).ok_or_else(|| {
                        NotRendered::External(format!(
                            "its chart comes from {reference}, which is not built locally"
                        ))
                    })?;
                    let whose = format!("the chart in {reference}");
                    let bytes = crate::charts::pack::pack_dir(&tree, crate::charts::loader::MAX_LOADED_BYTES)
                        .map_err(|why| failed(format!("{whose}: {why}")))?;
                    let packaged = super::prepared::Packaged::in_memory(bytes);
                    let archive = Archive::of(packaged, None, &whose, inputs).map_err(|e| match e {
                        NotRendered::Failed(RenderError::InvalidSource(why)) if why.contains("chart's directory") => {
                            failed(format!(
                                "{why} (helm-controller loads the artifact as a chart archive, whose files sit \
                                 in one directory: copy the chart to \"@artifact/{}/\")",
                                reference.name
                            ))
                        }
                        other => other,
                    })?;
                    return Ok(Chart { form: ChartForm::Archive(archive), values_files: None });
                }
                "HelmChart" if depth == 0 => {
                    let template = helm_chart(reference, inputs)?;
                    return locate_chart(Some(&template), spec, inputs, release, depth + 1);
                }
                _ => {
                    return Err(NotRendered::External(format!(
                        "its chart comes from {reference}, which fluxplan does not fetch yet"
                    )))
                }
            };
            // helm-controller appends the artifact's digest to the version of a chart it gets
            // from an OCIRepository.
            let tracked = reference.kind == "OCIRepository";
            return fetched(&request, spec, inputs, tracked, release);
        }
        Some(ChartSource::Template { chart, source, version, values_files, ignore_missing_values_files }) => {
            (chart, source, version, values_files, *ignore_missing_values_files)
        }
    };
    if source.kind == "HelmRepository" {
        let request = helm_repository(source, chart, version.as_deref(), inputs, release)?;
        return fetched(&request, spec, inputs, false, release);
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
    let values_files = read_values_files(&tree, values_files, ignore_missing, &source.to_string())?;
    if dir.is_file() {
        // A packaged chart at the path: source-controller copies it, loaded as an archive, and
        // builds no dependency for it.
        let archive =
            Archive::read(&dir, &format!("the chart archive '{chart}' in the source {source}"), inputs)?;
        return Ok(Chart { form: ChartForm::Archive(archive), values_files });
    }
    if !dir.join("Chart.yaml").is_file() {
        return Err(failed(format!("no chart at '{chart}' in the source {source} (no Chart.yaml there)")));
    }
    Ok(Chart { form: ChartForm::Directory { dir, root: tree }, values_files })
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

/// The chart `sourced` names, fetched; `tracked`: its version carries the artifact's digest.
/// Not fetched, the reason names the ways to supply it (`release`: `NAMESPACE/NAME`).
fn fetched(
    sourced: &Sourced,
    spec: &HelmReleaseSpec,
    inputs: &Inputs,
    tracked: bool,
    release: &str,
) -> Result<Chart, NotRendered> {
    let request = &sourced.request;
    let fetched = (inputs.fetch)(request, &sourced.credentials).map_err(|why| {
        NotRendered::External(format!(
            "its chart could not be had ({request}): {}; {}",
            sourced.explain(&why),
            crate::charts::ways_to_supply(release, &why)
        ))
    })?;
    let whose = format!("the chart fetched for {request}");
    if tracked {
        let packaged = super::prepared::Packaged::kept(fetched.archive, fetched.digest);
        let archive = Archive::of(packaged, fetched.revision.as_deref(), &whose, inputs)?;
        return Ok(Chart { form: ChartForm::Archive(archive), values_files: None });
    }
    chart_on_disk(&fetched.archive, Some(&fetched.digest), spec, &whose, inputs)
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
    merge_values_files(files, ignore_missing, whose, |file| {
        std::fs::read_to_string(paths::secure_join(root, file))
            .map_err(|e| format!("values file '{file}' in {whose}: {e}"))
    })
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
    use super::digest_version;
    use serde_json::json;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_chart_from_an_oci_repository_carries_the_artifacts_digest_in_its_version() {
        let tagged = format!("1.2.3@{DIGEST}");
        assert_eq!(digest_version(&json!("1.2.3"), &tagged).unwrap(), "1.2.3+0123456789ab");
        // Masterminds prints the version normalised, its old metadata replaced.
        assert_eq!(digest_version(&json!("v1.2"), &format!("1.2.0@{DIGEST}")).unwrap(), "1.2.0+0123456789ab");
        assert_eq!(digest_version(&json!("1.2.3+old"), &tagged).unwrap(), "1.2.3+0123456789ab");
        // An OCI tag spells `+` as `_`.
        let with_build = format!("1.2.3_build@{DIGEST}");
        assert_eq!(digest_version(&json!("1.2.3+build"), &with_build).unwrap(), "1.2.3+0123456789ab");
        // Not a semver tag, or pinned by digest: the digest alone decides.
        assert_eq!(
            digest_version(&json!("1.2.3"), &format!("latest@{DIGEST}")).unwrap(),
            "1.2.3+0123456789ab"
        );
        assert_eq!(digest_version(&json!("1.2.3"), DIGEST).unwrap(), "1.2.3+0123456789ab");
    }

    #[test]
    fn a_semver_tag_that_is_not_the_charts_version_fails_as_the_controller_fails() {
        let error = digest_version(&json!("1.2.3"), &format!("2.0.0@{DIGEST}")).unwrap_err();
        assert!(error.contains("does not match chart version 1.2.3"), "{error}");
        assert!(digest_version(&json!("not-a-version"), DIGEST)
            .unwrap_err()
            .contains("invalid chart version"));
        assert!(digest_version(&json!("1.2.3"), "sha256:0123")
            .unwrap_err()
            .contains("invalid artifact revision"));
    }
}
