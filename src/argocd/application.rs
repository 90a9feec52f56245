//! The Application object (argoproj.io/v1alpha1), read leniently: what decides what a sync
//! renders, applies and prunes, and what deleting the Application does.

use super::sync_options::AppSyncOptions;
use super::text;
use serde_json::Value;

/// Where the resources go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Destination {
    pub server: Option<String>,
    pub name: Option<String>,
    /// Namespaced objects without a namespace are applied here.
    pub namespace: Option<String>,
}

impl Destination {
    /// `name` or `server`, as Argo CD shows the destination cluster.
    pub fn cluster(&self) -> String {
        self.name.clone().or_else(|| self.server.clone()).unwrap_or_else(|| "in-cluster".into())
    }
}

/// How a source is rendered, as its spec declares it (the tree may decide further: a
/// `kustomization.yaml` makes a kustomize source, a `Chart.yaml` a Helm one).
#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    /// Declared nothing: decided by the files at the path.
    Unspecified,
    Directory(DirectoryOptions),
    Kustomize(Box<KustomizeOptions>),
    Helm(Box<HelmOptions>),
    Plugin,
}

/// `source.helm`, as the repo-server passes it to `helm template`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HelmOptions {
    /// Values files, in order: paths relative to the source's path, or `$REF/path` of a
    /// multi-source Application's `ref` source.
    pub value_files: Vec<String>,
    pub ignore_missing_value_files: bool,
    /// `values` (a YAML string) and `valuesObject` (which wins when both are given).
    pub values: Option<String>,
    pub values_object: Option<Value>,
    /// `parameters`: (name, value, forceString).
    pub parameters: Vec<(String, String, bool)>,
    /// `fileParameters`: (name, path of the file whose content is the value).
    pub file_parameters: Vec<(String, String)>,
    pub release_name: Option<String>,
    pub namespace: Option<String>,
    pub skip_crds: bool,
    pub kube_version: Option<String>,
    pub api_versions: Vec<String>,
}

/// `source.directory`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectoryOptions {
    pub recurse: bool,
    pub include: Option<String>,
    pub exclude: Option<String>,
    /// `jsonnet` options given: Jsonnet is not rendered here.
    pub jsonnet: bool,
    /// `disableExtensionFilter`: every file is a candidate, `include`/`exclude` alone select.
    pub disable_extension_filter: bool,
}

/// `source.kustomize`: the overrides Argo CD layers onto the kustomization before building.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KustomizeOptions {
    pub name_prefix: Option<String>,
    pub name_suffix: Option<String>,
    pub namespace: Option<String>,
    pub images: Vec<String>,
    pub common_labels: serde_json::Map<String, Value>,
    pub common_annotations: serde_json::Map<String, Value>,
    pub force_common_labels: bool,
    pub force_common_annotations: bool,
    pub label_without_selector: bool,
    pub replicas: Vec<Value>,
    pub patches: Vec<Value>,
    pub components: Vec<String>,
}

/// One source of an Application.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub repo_url: String,
    pub path: Option<String>,
    pub target_revision: Option<String>,
    /// A Helm repository's chart (then there is no path).
    pub chart: Option<String>,
    /// `ref`: a source only other sources read values from (never rendered itself).
    pub reference: Option<String>,
    pub kind: SourceKind,
}

/// `syncPolicy.automated`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Automated {
    pub prune: bool,
    pub self_heal: bool,
    pub allow_empty: bool,
}

/// What deleting the Application does to its resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finalizer {
    /// `resources-finalizer.argocd.argoproj.io`: deletes them, then the Application.
    Foreground,
    /// `.../background`: deletes the Application, then them.
    Background,
}

/// The fields of an Application that fluxplan acts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Application {
    pub namespace: String,
    pub name: String,
    pub project: String,
    pub sources: Vec<Source>,
    pub destination: Destination,
    /// `None`: manual sync only.
    pub automated: Option<Automated>,
    pub sync_options: AppSyncOptions,
    pub finalizer: Option<Finalizer>,
    /// `spec.ignoreDifferences`, as written.
    pub ignore_differences: Vec<Value>,
    /// The whole object as read.
    pub raw: Value,
}

/// Why a manifest could not be read as an Application.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

impl Application {
    /// Reads an Application manifest; `default_namespace` applies when metadata has none (Argo
    /// CD's own namespace, `argocd`, for Applications applied by hand).
    pub fn from_value(obj: &Value, default_namespace: &str) -> Result<Self, SpecError> {
        let meta = &obj["metadata"];
        let name = text(meta, "name")
            .filter(|n| !n.is_empty())
            .ok_or_else(|| SpecError("Application has no metadata.name".into()))?;
        let namespace = text(meta, "namespace").unwrap_or_else(|| default_namespace.to_string());
        let spec = obj
            .get("spec")
            .filter(|s| s.is_object())
            .ok_or_else(|| SpecError(format!("Application {namespace}/{name} has no spec")))?;
        let mut sources = Vec::new();
        if let Some(source) = spec.get("source").filter(|s| s.is_object()) {
            sources.push(read_source(source));
        }
        for source in spec.get("sources").and_then(Value::as_array).into_iter().flatten() {
            sources.push(read_source(source));
        }
        if sources.is_empty() {
            return Err(SpecError(format!(
                "Application {namespace}/{name} has neither spec.source nor spec.sources"
            )));
        }
        let dest = &spec["destination"];
        let destination = Destination {
            server: text(dest, "server").filter(|s| !s.is_empty()),
            name: text(dest, "name").filter(|s| !s.is_empty()),
            namespace: text(dest, "namespace").filter(|s| !s.is_empty()),
        };
        let policy = &spec["syncPolicy"];
        // `automated: {}` turns automation on with every flag at its default; `enabled: false`
        // (Argo CD 3.1) turns it off again.
        let automated = policy
            .get("automated")
            .filter(|a| a.is_object() && a["enabled"] != Value::Bool(false))
            .map(|a| Automated {
                prune: a["prune"] == Value::Bool(true),
                self_heal: a["selfHeal"] == Value::Bool(true),
                allow_empty: a["allowEmpty"] == Value::Bool(true),
            });
        let finalizers: Vec<&str> =
            meta["finalizers"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let finalizer = if finalizers.contains(&super::RESOURCES_FINALIZER) {
            Some(Finalizer::Foreground)
        } else if finalizers.contains(&super::RESOURCES_FINALIZER_BACKGROUND) {
            Some(Finalizer::Background)
        } else {
            None
        };
        Ok(Application {
            namespace,
            name,
            // An empty project is the default one, as Argo CD reads it.
            project: text(spec, "project")
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| super::project::DEFAULT_PROJECT.into()),
            sources,
            destination,
            automated,
            sync_options: AppSyncOptions::parse(policy.get("syncOptions")),
            finalizer,
            ignore_differences: spec["ignoreDifferences"].as_array().cloned().unwrap_or_default(),
            raw: obj.clone(),
        })
    }

    /// True when a sync runs by itself and deletes what Git no longer holds.
    pub fn prunes(&self) -> bool {
        self.automated.is_some_and(|a| a.prune)
    }

    /// How the sync policy reads, for notes.
    pub fn describe_sync(&self) -> &'static str {
        match self.automated {
            None => "manual sync",
            Some(a) if a.prune => "automated sync with prune",
            Some(_) => "automated sync without prune",
        }
    }
}

fn read_source(source: &Value) -> Source {
    let kind = if source.get("plugin").is_some_and(|p| !p.is_null()) {
        SourceKind::Plugin
    } else if source.get("helm").is_some_and(|h| !h.is_null()) || source.get("chart").is_some() {
        SourceKind::Helm(Box::new(read_helm(&source["helm"])))
    } else if let Some(k) = source.get("kustomize").filter(|k| k.is_object()) {
        SourceKind::Kustomize(Box::new(read_kustomize(k)))
    } else if let Some(d) = source.get("directory").filter(|d| d.is_object()) {
        SourceKind::Directory(DirectoryOptions {
            recurse: d["recurse"] == Value::Bool(true),
            include: text(d, "include").filter(|s| !s.is_empty()),
            exclude: text(d, "exclude").filter(|s| !s.is_empty()),
            jsonnet: d.get("jsonnet").and_then(Value::as_object).is_some_and(|j| !j.is_empty()),
            disable_extension_filter: d["disableExtensionFilter"] == Value::Bool(true),
        })
    } else {
        SourceKind::Unspecified
    };
    Source {
        repo_url: text(source, "repoURL").unwrap_or_default(),
        path: text(source, "path"),
        target_revision: text(source, "targetRevision"),
        chart: text(source, "chart"),
        reference: text(source, "ref"),
        kind,
    }
}

fn read_helm(h: &Value) -> HelmOptions {
    let strings = |key: &str| -> Vec<String> {
        h[key].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
    };
    let pairs = |key: &str| h[key].as_array().cloned().unwrap_or_default();
    HelmOptions {
        value_files: strings("valueFiles"),
        ignore_missing_value_files: h["ignoreMissingValueFiles"] == Value::Bool(true),
        values: text(h, "values").filter(|v| !v.trim().is_empty()),
        values_object: h.get("valuesObject").filter(|v| v.is_object()).cloned(),
        parameters: pairs("parameters")
            .iter()
            .filter_map(|p| {
                let value = match &p["value"] {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                };
                Some((text(p, "name")?, value, p["forceString"] == Value::Bool(true)))
            })
            .collect(),
        file_parameters: pairs("fileParameters")
            .iter()
            .filter_map(|p| Some((text(p, "name")?, text(p, "path")?)))
            .collect(),
        release_name: text(h, "releaseName").filter(|s| !s.is_empty()),
        namespace: text(h, "namespace").filter(|s| !s.is_empty()),
        skip_crds: h["skipCrds"] == Value::Bool(true),
        kube_version: text(h, "kubeVersion").filter(|s| !s.is_empty()),
        api_versions: strings("apiVersions"),
    }
}

fn read_kustomize(k: &Value) -> KustomizeOptions {
    let strings = |key: &str| -> Vec<String> {
        k[key].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
    };
    let map = |key: &str| k[key].as_object().cloned().unwrap_or_default();
    KustomizeOptions {
        name_prefix: text(k, "namePrefix").filter(|s| !s.is_empty()),
        name_suffix: text(k, "nameSuffix").filter(|s| !s.is_empty()),
        namespace: text(k, "namespace").filter(|s| !s.is_empty()),
        images: strings("images"),
        common_labels: map("commonLabels"),
        common_annotations: map("commonAnnotations"),
        force_common_labels: k["forceCommonLabels"] == Value::Bool(true),
        force_common_annotations: k["forceCommonAnnotations"] == Value::Bool(true),
        label_without_selector: k["labelWithoutSelector"] == Value::Bool(true),
        replicas: k["replicas"].as_array().cloned().unwrap_or_default(),
        patches: k["patches"].as_array().cloned().unwrap_or_default(),
        components: strings("components"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn app(spec: Value, finalizers: Value) -> Application {
        Application::from_value(
            &json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                "metadata": {"name": "web", "finalizers": finalizers}, "spec": spec}),
            "argocd",
        )
        .unwrap()
    }

    #[test]
    fn defaults_are_argo_cds() {
        let a = app(
            json!({"source": {"repoURL": "https://g/x.git", "path": "apps/web"},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "web"}}),
            json!([]),
        );
        assert_eq!(a.namespace, "argocd");
        assert_eq!(a.project, "default");
        assert_eq!(a.automated, None, "no automated: manual sync");
        assert!(!a.prunes());
        assert_eq!(a.finalizer, None);
        assert_eq!(a.sources[0].kind, SourceKind::Unspecified);
        assert_eq!(a.destination.namespace.as_deref(), Some("web"));

        let a =
            app(json!({"source": {"repoURL": "u", "path": "p"}, "syncPolicy": {"automated": {}}}), json!([]));
        assert_eq!(a.automated, Some(Automated::default()), "automated: {{}} turns sync on, prune off");
        let a = app(
            json!({"source": {"repoURL": "u", "path": "p"}, "syncPolicy": {"automated": {"prune": true, "enabled": false}}}),
            json!([]),
        );
        assert_eq!(a.automated, None, "enabled: false turns automation off");
    }

    #[test]
    fn reads_sources_policy_and_finalizers() {
        let a = app(
            json!({"sources": [
                {"repoURL": "u", "path": "base", "kustomize": {"namePrefix": "p-", "images": ["nginx:1.27"], "commonLabels": {"team": "a"}}},
                {"repoURL": "u", "ref": "values"},
                {"repoURL": "https://charts", "chart": "redis", "targetRevision": "1.0",
                 "helm": {"valueFiles": ["$values/redis.yaml"], "values": "a: 1", "valuesObject": {"b": 2},
                          "parameters": [{"name": "c", "value": "3", "forceString": true}, {"name": "d", "value": 4}],
                          "fileParameters": [{"name": "e", "path": "e.txt"}], "releaseName": "cache",
                          "skipCrds": true, "kubeVersion": "1.33.0", "apiVersions": ["x/v1"]}},
                {"repoURL": "u", "path": "raw", "directory": {"recurse": true, "include": "*.yaml"}}],
              "syncPolicy": {"automated": {"prune": true, "allowEmpty": true}, "syncOptions": ["CreateNamespace=true"]}}),
            json!([RESOURCES_FINALIZER_BACKGROUND_FOR_TEST]),
        );
        assert_eq!(a.sources.len(), 4);
        let SourceKind::Kustomize(k) = &a.sources[0].kind else { panic!("kustomize") };
        assert_eq!(k.name_prefix.as_deref(), Some("p-"));
        assert_eq!(k.images, ["nginx:1.27"]);
        assert_eq!(a.sources[1].reference.as_deref(), Some("values"));
        let SourceKind::Helm(h) = &a.sources[2].kind else { panic!("helm") };
        assert_eq!(h.value_files, ["$values/redis.yaml"]);
        assert_eq!((h.values.as_deref(), &h.values_object), (Some("a: 1"), &Some(json!({"b": 2}))));
        assert_eq!(h.parameters, [("c".into(), "3".into(), true), ("d".into(), "4".into(), false)]);
        assert_eq!(h.file_parameters, [("e".into(), "e.txt".into())]);
        assert_eq!(
            (h.release_name.as_deref(), h.skip_crds, h.kube_version.as_deref()),
            (Some("cache"), true, Some("1.33.0"))
        );
        assert_eq!(h.api_versions, ["x/v1"]);
        let SourceKind::Directory(d) = &a.sources[3].kind else { panic!("directory") };
        assert!(d.recurse);
        assert_eq!(a.automated, Some(Automated { prune: true, self_heal: false, allow_empty: true }));
        assert!(a.sync_options.create_namespace);
        assert_eq!(a.finalizer, Some(Finalizer::Background));
    }

    const RESOURCES_FINALIZER_BACKGROUND_FOR_TEST: &str = "resources-finalizer.argocd.argoproj.io/background";

    #[test]
    fn rejects_what_argo_cd_rejects() {
        let read = |v: Value| Application::from_value(&v, "argocd").unwrap_err().to_string();
        assert!(read(json!({"metadata": {}, "spec": {}})).contains("no metadata.name"));
        assert!(read(json!({"metadata": {"name": "a"}})).contains("has no spec"));
        assert!(read(json!({"metadata": {"name": "a"}, "spec": {"destination": {}}}))
            .contains("neither spec.source"));
    }
}
