//! What a HelmRelease asks for of its chart, read from its spec and the source objects of the
//! same render: the chart's name, the version it asks for, and everything else that decides which
//! archive source-controller hands helm-controller (the source's URL and ref, a HelmChart's
//! spec, the layer an OCIRepository selects). A chart can change while the HelmRelease object
//! stays the same (a new OCIRepository tag, a HelmChart version): comparing the origins of base
//! and head says so even when the chart itself could not be had.

use crate::flux::helm::{ChartSource, HelmReleaseSpec};
use crate::flux::SourceRef;
use serde_json::Value;

/// The chart a release asks for, as its spec and sources say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartOrigin {
    /// The chart's name: the chart of a HelmRepository or HelmChart, the last path segment of an
    /// OCIRepository's URL, the chart's path in a GitRepository or Bucket.
    pub name: String,
    /// The version asked for: a tag, `@sha256:…` for a digest, a semver range, `*` for the
    /// latest, or the ref of a Git source.
    pub version: String,
    /// Every input that decides the archive, one `what: value` line each (URLs redacted).
    pub inputs: Vec<String>,
}

impl ChartOrigin {
    /// `db 1.0.0`: the chart as asked for.
    pub fn describe(&self) -> String {
        format!("{} {}", self.name, self.version)
    }
}

/// The origin of `spec`'s chart; `source_object` finds a source object of the same render.
/// `None` when the spec names no chart, or an ExternalArtifact (built from this repository).
pub fn of(
    spec: &HelmReleaseSpec,
    source_object: &dyn Fn(&SourceRef) -> Option<Value>,
) -> Option<ChartOrigin> {
    match spec.chart.as_ref()? {
        ChartSource::Reference(reference) => match reference.kind.as_str() {
            "OCIRepository" => Some(oci_repository(reference, source_object)),
            "HelmChart" => Some(helm_chart(reference, source_object)),
            _ => None,
        },
        ChartSource::Template { chart, version, source, values_files, .. } => {
            let mut inputs = vec![format!("chart: {chart}")];
            inputs.extend(values_files.iter().map(|f| format!("valuesFile: {f}")));
            Some(template(chart, version.as_deref(), source, inputs, source_object))
        }
    }
}

/// A chart named in a source (`spec.chart.spec`, or a HelmChart's spec).
fn template(
    chart: &str,
    version: Option<&str>,
    source: &SourceRef,
    mut inputs: Vec<String>,
    source_object: &dyn Fn(&SourceRef) -> Option<Value>,
) -> ChartOrigin {
    let object = source_object(source);
    let spec = object.as_ref().map(|o| &o["spec"]);
    let version = match source.kind.as_str() {
        // A chart of a Git source or Bucket has the version its source's ref brings.
        "GitRepository" | "Bucket" => spec.map(|s| reference(&s["ref"])).unwrap_or_else(|| "?".into()),
        _ => version.filter(|v| !v.is_empty()).unwrap_or("*").to_string(),
    };
    inputs.push(format!("version: {version}"));
    inputs.extend(source_inputs(source, object.as_ref()));
    ChartOrigin { name: chart.to_string(), version, inputs }
}

fn oci_repository(reference: &SourceRef, source_object: &dyn Fn(&SourceRef) -> Option<Value>) -> ChartOrigin {
    let object = source_object(reference);
    let url = object.as_ref().and_then(|o| o["spec"]["url"].as_str()).unwrap_or("");
    let name =
        url.trim_end_matches('/').rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or(&reference.name);
    let version = object.as_ref().map(|o| reference_of_oci(&o["spec"]["ref"])).unwrap_or_else(|| "?".into());
    let mut inputs = vec![format!("version: {version}")];
    inputs.extend(source_inputs(reference, object.as_ref()));
    ChartOrigin { name: name.to_string(), version, inputs }
}

fn helm_chart(reference: &SourceRef, source_object: &dyn Fn(&SourceRef) -> Option<Value>) -> ChartOrigin {
    let Some(object) = source_object(reference) else {
        return ChartOrigin {
            name: reference.name.clone(),
            version: "?".into(),
            inputs: source_inputs(reference, None),
        };
    };
    let spec = &object["spec"];
    let text = |key: &str| spec[key].as_str().unwrap_or("").to_string();
    let source = SourceRef {
        kind: spec["sourceRef"]["kind"].as_str().unwrap_or("").to_string(),
        name: spec["sourceRef"]["name"].as_str().unwrap_or("").to_string(),
        namespace: reference.namespace.clone(),
    };
    let mut inputs = vec![format!("{reference}: chart {}", text("chart"))];
    let files = spec["valuesFiles"].as_array().into_iter().flatten().filter_map(Value::as_str);
    inputs.extend(files.map(|f| format!("valuesFile: {f}")));
    let version = spec["version"].as_str();
    template(&text("chart"), version, &source, inputs, source_object)
}

/// What of a source object decides what it holds: its URL, type, ref and selected layer.
fn source_inputs(reference: &SourceRef, object: Option<&Value>) -> Vec<String> {
    let Some(object) = object else {
        return vec![format!("{reference}: not in this render")];
    };
    let spec = &object["spec"];
    let mut inputs =
        vec![format!("{reference} url: {}", crate::git::redact_url(spec["url"].as_str().unwrap_or("")))];
    for key in ["type", "bucketName", "endpoint", "prefix"] {
        if let Some(value) = spec[key].as_str() {
            inputs.push(format!("{reference} {key}: {value}"));
        }
    }
    for key in ["ref", "layerSelector"] {
        if !spec[key].is_null() {
            inputs.push(format!("{reference} {key}: {}", crate::yaml::canonical_json(&spec[key])));
        }
    }
    inputs
}

/// An OCIRepository's `ref` as the version it asks for: digest, then semver, then tag (`latest`
/// by default), as source-controller reads it.
fn reference_of_oci(reference: &Value) -> String {
    let text = |key: &str| reference[key].as_str().filter(|v| !v.is_empty());
    match (text("digest"), text("semver"), text("tag")) {
        (Some(digest), _, _) => format!("@{digest}"),
        (None, Some(range), _) => range.to_string(),
        (None, None, tag) => tag.unwrap_or("latest").to_string(),
    }
}

/// A Git source's `ref` as read: its commit, name, semver, tag or branch (`master` by default).
fn reference(reference: &Value) -> String {
    let text = |key: &str| reference[key].as_str().filter(|v| !v.is_empty());
    ["commit", "name", "semver", "tag", "branch"]
        .iter()
        .find_map(|key| text(key).map(|v| if *key == "commit" { format!("@{v}") } else { v.to_string() }))
        .unwrap_or_else(|| "master".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn release(chart: Value) -> HelmReleaseSpec {
        let manifest = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "db", "namespace": "data"}, "spec": chart});
        HelmReleaseSpec::parse(&manifest).unwrap()
    }

    fn oci(reference: Value) -> impl Fn(&SourceRef) -> Option<Value> {
        move |_: &SourceRef| {
            Some(
                json!({"kind": "OCIRepository", "spec": {"url": "oci://registry.example.com/charts/db", "ref": reference}}),
            )
        }
    }

    #[test]
    fn an_oci_repository_tag_is_the_version_asked_for() {
        let spec = release(json!({"chartRef": {"kind": "OCIRepository", "name": "db"}}));
        let one = of(&spec, &oci(json!({"tag": "1.0.0"}))).unwrap();
        let two = of(&spec, &oci(json!({"tag": "2.0.0"}))).unwrap();
        assert_eq!((one.name.as_str(), one.version.as_str()), ("db", "1.0.0"));
        assert_eq!(two.version, "2.0.0");
        assert_ne!(one, two, "a new tag is another chart");
        // A digest wins over a tag, as source-controller reads the ref.
        let pinned = of(&spec, &oci(json!({"tag": "1.0.0", "digest": "sha256:ab"}))).unwrap();
        assert_eq!(pinned.version, "@sha256:ab");
        // The same ref written again is the same chart.
        assert_eq!(of(&spec, &oci(json!({"tag": "1.0.0"}))).unwrap(), one);
    }

    #[test]
    fn a_helm_chart_s_version_and_its_repository_decide_the_chart() {
        let spec = release(json!({"chartRef": {"kind": "HelmChart", "name": "db"}}));
        let objects = |version: &str, url: &str| {
            let (version, url) = (version.to_string(), url.to_string());
            move |source: &SourceRef| match source.kind.as_str() {
                "HelmChart" => Some(json!({"spec": {"chart": "db", "version": version,
                    "sourceRef": {"kind": "HelmRepository", "name": "charts"}}})),
                _ => Some(json!({"spec": {"url": url}})),
            }
        };
        let one = of(&spec, &objects("1.0.0", "https://charts.example.com")).unwrap();
        assert_eq!(one.describe(), "db 1.0.0");
        assert_ne!(one, of(&spec, &objects("1.1.0", "https://charts.example.com")).unwrap());
        let moved = of(&spec, &objects("1.0.0", "https://other.example.com")).unwrap();
        assert_eq!(moved.version, one.version);
        assert_ne!(moved, one, "another repository is another chart, at the same version");
    }

    #[test]
    fn a_template_without_a_version_asks_for_the_latest() {
        let spec = release(json!({"chart": {"spec": {"chart": "db",
            "sourceRef": {"kind": "HelmRepository", "name": "charts"}}}}));
        let origin = of(&spec, &|_: &SourceRef| None).unwrap();
        assert_eq!(origin.version, "*");
        assert!(origin.inputs.iter().any(|i| i.ends_with("not in this render")), "{:?}", origin.inputs);
    }
}
