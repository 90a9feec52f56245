//! The live cluster, read-only by construction: this module only ever lists and gets. It reads
//! what the snapshot file holds (Flux Kustomizations with their inventories, the live objects of
//! those inventories, Namespaces, CRD scopes, substituteFrom sources) with one paginated list per
//! kind and namespace, never one GET per object, and answers blast-radius questions.

use super::helm_storage::{self, StoredReleaseSummary};
use super::snapshot::{live_id, ClusterSnapshot};
use super::{BlastRadius, DataLoss, Lookup, SubstitutionSource};
use crate::argocd::project::{AppProject, AppProjects};
use crate::argocd::repository_credentials::{self, RepositorySecret};
use crate::flux::control::OWNER_NAME_LABEL;
use crate::flux::helm::{self, ReleaseRef};
use crate::flux::scope::Scope as FluxScope;
use crate::flux::{self, ObjectId, KUSTOMIZE_GROUP};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::discovery::{verbs, ApiCapabilities, Discovery, Scope};
use kube::Client;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Objects per page of a list.
const PAGE_SIZE: u32 = 500;
/// Inventory entries not found by the labelled lists are looked up one by one, up to this many.
const MAX_SINGLE_LOOKUPS: usize = 200;
/// The label helm-controller puts on every object it renders: its HelmRelease's name.
const HELM_OWNER_NAME_LABEL: &str = "helm.toolkit.fluxcd.io/name";
/// Objects wanted from the cluster, by group, kind and namespace.
type WantedKey = (String, String, String);

/// Why the cluster could not be read; `label` names the failure for metrics.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("no usable kubeconfig or in-cluster configuration: {0}")]
    Config(String),
    #[error("the cluster is unreachable: {0}")]
    Unreachable(String),
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("the cluster answered with an error: {0}")]
    Api(String),
}

impl KubeError {
    pub fn label(&self) -> &'static str {
        match self {
            KubeError::Config(_) => "config",
            KubeError::Unreachable(_) => "unreachable",
            KubeError::Forbidden(_) => "forbidden",
            KubeError::Api(_) => "api",
        }
    }

    fn from_kube(error: kube::Error, what: impl Fn() -> String) -> Self {
        match error {
            kube::Error::Api(status) if status.code == 403 => {
                KubeError::Forbidden(format!("{}: {}", what(), status.message))
            }
            kube::Error::Api(status) => {
                KubeError::Api(format!("{}: {} ({})", what(), status.message, status.code))
            }
            other => KubeError::Unreachable(format!("{}: {other}", what())),
        }
    }
}

/// How to reach the cluster and what to read.
#[derive(Debug, Clone, Default)]
pub struct KubeOptions {
    /// A kubeconfig context; default: the current one (KUBECONFIG honoured), else in-cluster.
    pub context: Option<String>,
    /// Read Secrets named by substituteFrom (their values are never printed).
    pub read_secrets: bool,
    /// Keep Secret values in a written snapshot (off by default).
    pub include_secret_values: bool,
    /// The only namespaces whose Secrets are read (empty: every namespace).
    pub secret_namespaces: Vec<String>,
}

impl KubeOptions {
    /// True when Secrets of `namespace` may be read: `--read-secrets`, and the namespace among
    /// those the operator allows.
    pub fn may_read_secrets_in(&self, namespace: &str) -> bool {
        self.read_secrets
            && (self.secret_namespaces.is_empty() || self.secret_namespaces.iter().any(|n| n == namespace))
    }

    /// Why Secrets of `namespace` are not read although `--read-secrets` is given.
    fn outside_secret_namespaces(&self, namespace: &str) -> Option<String> {
        (self.read_secrets && !self.may_read_secrets_in(namespace)).then(|| {
            format!(
                "namespace {namespace} is not among those fluxplan may read Secrets in (--secret-namespaces {})",
                self.secret_namespaces.join(",")
            )
        })
    }
}

/// A connected, discovered cluster.
pub struct KubeCluster {
    client: Client,
    discovery: Discovery,
    requests: AtomicUsize,
    options: KubeOptions,
    /// Where the live `argocd-cm` was found (see `argocd_settings`): Argo CD's namespace.
    argocd_namespace: std::sync::OnceLock<String>,
}

/// Argo CD's namespace when the cluster says nothing else (no `argocd-cm` found elsewhere).
const DEFAULT_ARGOCD_NAMESPACE: &str = "argocd";

/// A client for the configured context (or in-cluster).
pub async fn client(context: Option<&str>) -> Result<Client, KubeError> {
    crate::tls::install_crypto_provider();
    let config = match context {
        Some(context) => {
            let options =
                kube::config::KubeConfigOptions { context: Some(context.to_string()), ..Default::default() };
            kube::Config::from_kubeconfig(&options).await.map_err(|e| KubeError::Config(e.to_string()))?
        }
        None => kube::Config::infer().await.map_err(|e| KubeError::Config(e.to_string()))?,
    };
    Client::try_from(config).map_err(|e| KubeError::Config(e.to_string()))
}

/// `resource.group` as RBAC and people name it.
fn resource_name(resource: &ApiResource) -> String {
    if resource.group.is_empty() {
        resource.plural.clone()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

impl KubeCluster {
    /// Connects and runs discovery (legacy: `/api`, `/apis` and each group version).
    pub async fn connect(options: KubeOptions) -> Result<Self, KubeError> {
        let client = client(options.context.as_deref()).await?;
        Self::with_client(client, options).await
    }

    pub async fn with_client(client: Client, options: KubeOptions) -> Result<Self, KubeError> {
        let discovery = Discovery::new(client.clone())
            .run()
            .await
            .map_err(|e| KubeError::from_kube(e, || "discovery (get /api, /apis)".into()))?;
        Ok(KubeCluster {
            client,
            discovery,
            requests: AtomicUsize::new(0),
            options,
            argocd_namespace: Default::default(),
        })
    }

    /// Requests sent so far (discovery excluded).
    pub fn request_count(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }

    /// The served resource for a kind, in its preferred version.
    fn resource(&self, group: &str, kind: &str) -> Option<(ApiResource, ApiCapabilities)> {
        self.discovery.get(group)?.recommended_kind(kind)
    }

    fn api(&self, resource: &ApiResource, namespaced: bool, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace.filter(|_| namespaced) {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        }
    }

    /// Every object of a resource (in a namespace, or everywhere), page by page.
    async fn list_all(
        &self,
        resource: &ApiResource,
        namespaced: bool,
        namespace: Option<&str>,
        labels: Option<&str>,
    ) -> Result<Vec<Value>, KubeError> {
        let api = self.api(resource, namespaced, namespace);
        let what = || {
            format!(
                "cannot list {}{} (the role needs `list` on it)",
                resource_name(resource),
                namespace.map(|ns| format!(" in namespace {ns}")).unwrap_or_default()
            )
        };
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(PAGE_SIZE);
            if let Some(labels) = labels {
                params = params.labels(labels);
            }
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            self.requests.fetch_add(1, Ordering::Relaxed);
            let page = api.list(&params).await.map_err(|e| KubeError::from_kube(e, what))?;
            for object in page.items {
                items.push(with_type(serde_json::to_value(object).unwrap_or(Value::Null), resource));
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(items);
            }
        }
    }

    /// How many objects a list would return: one request of one item, counting the rest.
    async fn count(
        &self,
        resource: &ApiResource,
        namespaced: bool,
        namespace: Option<&str>,
    ) -> Result<usize, KubeError> {
        let api = self.api(resource, namespaced, namespace);
        self.requests.fetch_add(1, Ordering::Relaxed);
        let page = api
            .list(&ListParams::default().limit(1))
            .await
            .map_err(|e| KubeError::from_kube(e, || format!("cannot list {}", resource_name(resource))))?;
        let remaining = page.metadata.remaining_item_count.unwrap_or(0).max(0) as usize;
        // Without remainingItemCount but with more pages, count them all.
        if page.metadata.continue_.as_deref().is_some_and(|c| !c.is_empty()) && remaining == 0 {
            return Ok(self.list_all(resource, namespaced, namespace, None).await?.len());
        }
        Ok(page.items.len() + remaining)
    }

    async fn get(
        &self,
        resource: &ApiResource,
        namespaced: bool,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, KubeError> {
        let ns = (!namespace.is_empty()).then_some(namespace);
        let api = self.api(resource, namespaced, ns);
        self.requests.fetch_add(1, Ordering::Relaxed);
        match api.get_opt(name).await {
            Ok(object) => {
                Ok(object.map(|o| with_type(serde_json::to_value(o).unwrap_or(Value::Null), resource)))
            }
            Err(e) => Err(KubeError::from_kube(e, || {
                format!("cannot get {} {namespace}/{name}", resource_name(resource))
            })),
        }
    }

    /// Reads everything a plan needs into the snapshot document form. Fails only when the
    /// Kustomizations themselves cannot be read; other gaps become warnings and unreadable kinds.
    pub async fn snapshot(&self) -> Result<ClusterSnapshot, KubeError> {
        let mut warnings = Vec::new();
        let mut unreadable = Vec::new();
        let flux = self.resource(KUSTOMIZE_GROUP, "Kustomization");
        let argo = self.resource(crate::argocd::GROUP, "Application");
        if flux.is_none() && argo.is_none() {
            return Err(KubeError::Api(
                "the cluster serves neither kustomize.toolkit.fluxcd.io Kustomizations nor argoproj.io \
                 Applications: is Flux or Argo CD installed?"
                    .into(),
            ));
        }
        let kustomizations = match &flux {
            Some((resource, caps)) => {
                self.list_all(resource, caps.scope == Scope::Namespaced, None, None).await?
            }
            None => Vec::new(),
        };
        let applications = match &argo {
            Some((resource, caps)) => {
                self.list_all(resource, caps.scope == Scope::Namespaced, None, None).await?
            }
            None => Vec::new(),
        };
        let argocd_settings = self.argocd_settings(&applications, &mut warnings).await;
        // The Flux Operator's ResourceSets (their inventories) and input providers (the inputs
        // they export), where the cluster serves them.
        let operator_kind = |kind: &'static str| {
            let found = self.resource(crate::flux::resourceset::GROUP, kind);
            async move {
                match found {
                    Some((resource, caps)) => {
                        Some(self.list_all(&resource, caps.scope == Scope::Namespaced, None, None).await)
                    }
                    None => None,
                }
            }
        };
        let resource_sets = operator_kind(crate::flux::resourceset::KIND).await;
        let input_providers = operator_kind(crate::flux::resourceset::PROVIDER_KIND).await;
        let mut listed = |read: Option<Result<Vec<Value>, KubeError>>| match read {
            None => Ok(None),
            Some(Ok(items)) => Ok(Some(items)),
            Some(Err(e @ KubeError::Forbidden(_))) => {
                warnings.push(e.to_string());
                Ok(None)
            }
            Some(Err(e)) => Err(e),
        };
        let resource_sets = listed(resource_sets)?;
        let input_providers = listed(input_providers)?;

        // What the inventories hold, by (group, kind, namespace).
        let mut wanted: BTreeMap<WantedKey, BTreeSet<ObjectId>> = BTreeMap::new();
        for k in &kustomizations {
            for entry in k["status"]["inventory"]["entries"].as_array().into_iter().flatten() {
                if let Some(id) = entry["id"].as_str().and_then(ObjectId::parse) {
                    wanted
                        .entry((id.group.clone(), id.kind.clone(), id.namespace.clone()))
                        .or_default()
                        .insert(id);
                }
            }
            // v1beta1: kinds per namespace, objects found through owner labels.
            for entry in k["status"]["snapshot"]["entries"].as_array().into_iter().flatten() {
                let namespace = entry["namespace"].as_str().unwrap_or("").to_string();
                for key in entry["kinds"].as_object().into_iter().flat_map(|m| m.keys()) {
                    if let Some((api, kind)) = key.split_once(", Kind=") {
                        let group = flux::split_api_version(api).0.to_string();
                        wanted.entry((group, kind.to_string(), namespace.clone())).or_default();
                    }
                }
            }
        }

        // What ResourceSets generated: their objects carry the operator's owner labels, not
        // Flux's, so they are looked up one by one.
        for set in resource_sets.iter().flatten() {
            for entry in set["status"]["inventory"]["entries"].as_array().into_iter().flatten() {
                if let Some(id) = entry["id"].as_str().and_then(ObjectId::parse) {
                    wanted
                        .entry((id.group.clone(), id.kind.clone(), id.namespace.clone()))
                        .or_default()
                        .insert(id);
                }
            }
        }

        // What Argo CD Applications manage (`status.resources`): their objects carry no Flux owner
        // label, so their kinds are listed whole.
        let mut argo_kinds = BTreeSet::new();
        for app in &applications {
            for resource in app["status"]["resources"].as_array().into_iter().flatten() {
                let field = |k: &str| resource[k].as_str().unwrap_or("").to_string();
                let id = ObjectId::new(&field("namespace"), &field("name"), &field("group"), &field("kind"));
                let key = (id.group.clone(), id.kind.clone(), id.namespace.clone());
                argo_kinds.insert(key.clone());
                wanted.entry(key).or_default().insert(id);
            }
        }

        let mut objects: BTreeMap<ObjectId, Value> = BTreeMap::new();
        let selector = |key: &WantedKey| (!argo_kinds.contains(key)).then_some(OWNER_NAME_LABEL);
        let mut secrets_left_out =
            self.read_objects(&wanted, selector, &mut objects, &mut unreadable, &mut warnings).await?;
        // What the live HelmReleases' `status.inventory` lists (helm-controller v1.5.0 and later):
        // their live metadata says which objects `helm.sh/resource-policy: keep` keeps and which
        // CRDs came from the chart's crds/ directory. helm-controller labels what it renders with
        // its HelmRelease's name (internal/postrender/common_renderer.go).
        let released = release_inventories(&objects);
        secrets_left_out += self
            .read_objects(
                &released,
                |_| Some(HELM_OWNER_NAME_LABEL),
                &mut objects,
                &mut unreadable,
                &mut warnings,
            )
            .await?;

        if secrets_left_out > 0 {
            warnings.push(format!(
                "{} in inventories {} not read (no --read-secrets): whether {} in the cluster is unknown, so the \
                 plan takes {} as the base render has {}",
                crate::words::count(secrets_left_out, "Secret", "Secrets"),
                crate::words::agree(secrets_left_out, "was", "were"),
                crate::words::agree(secrets_left_out, "it exists", "they exist"),
                crate::words::agree(secrets_left_out, "it", "them"),
                crate::words::agree(secrets_left_out, "it", "them"),
            ));
        }

        let namespaces: Vec<Value> = match self.resource("", "Namespace") {
            Some((resource, _)) => match self.list_all(&resource, false, None, None).await {
                // Names with labels: ResourceDistributions select namespaces by label.
                Ok(items) => items
                    .iter()
                    .filter_map(|n| {
                        let name = n["metadata"]["name"].as_str()?;
                        let labels = n["metadata"]["labels"].clone();
                        Some(match labels {
                            Value::Object(map) if !map.is_empty() => {
                                json!({"metadata": {"name": name, "labels": map}})
                            }
                            _ => json!(name),
                        })
                    })
                    .collect(),
                Err(e) => {
                    warnings.push(e.to_string());
                    Vec::new()
                }
            },
            None => Vec::new(),
        };
        let crds: Vec<Value> = self
            .discovery
            .groups()
            .filter(|g| !crate::flux::scope::is_builtin_group(g.name()))
            .flat_map(|g| g.recommended_resources())
            .map(|(r, caps)| {
                json!({"group": r.group, "kind": r.kind,
                       "scope": if caps.scope == Scope::Cluster { "Cluster" } else { "Namespaced" }})
            })
            .collect();

        // The ConfigMaps and Secrets the live Kustomizations substitute from, those the live
        // HelmReleases take values from, and the credentials of the live chart sources.
        let mut config_maps = Vec::new();
        let mut secrets = Vec::new();
        let mut wanted: std::collections::BTreeSet<(String, String, String)> = Default::default();
        let mut want = |owner: &Value, references: &Value| {
            let namespace = owner["metadata"]["namespace"].as_str().unwrap_or("");
            for reference in references.as_array().into_iter().flatten() {
                if let (Some(kind), Some(name)) = (reference["kind"].as_str(), reference["name"].as_str()) {
                    wanted.insert((kind.to_string(), namespace.to_string(), name.to_string()));
                }
            }
        };
        let mut substitution_secrets: std::collections::BTreeSet<(String, String)> = Default::default();
        for k in &kustomizations {
            want(k, &k["spec"]["postBuild"]["substituteFrom"]);
            let namespace = k["metadata"]["namespace"].as_str().unwrap_or("");
            for reference in k["spec"]["postBuild"]["substituteFrom"].as_array().into_iter().flatten() {
                if let (Some("Secret"), Some(name)) = (reference["kind"].as_str(), reference["name"].as_str())
                {
                    substitution_secrets.insert((namespace.to_string(), name.to_string()));
                }
            }
        }
        for object in objects.values() {
            if crate::flux::helm::is_helm_release(object) {
                want(object, &object["spec"]["valuesFrom"]);
            }
            let is_source = crate::flux::split_api_version(object["apiVersion"].as_str().unwrap_or("")).0
                == crate::flux::SOURCE_GROUP;
            for field in ["secretRef", "certSecretRef"] {
                if let Some(name) = object["spec"][field]["name"].as_str().filter(|_| is_source) {
                    want(object, &json!([{"kind": "Secret", "name": name}]));
                }
            }
        }
        // The Secrets a chart's values may come from: those the live HelmReleases read (never a
        // source's credentials, nor what a Kustomization substitutes).
        let values_secrets: std::collections::BTreeSet<(String, String)> = objects
            .values()
            .filter(|object| crate::flux::helm::is_helm_release(object))
            .flat_map(|object| {
                let namespace = object["metadata"]["namespace"].as_str().unwrap_or("").to_string();
                let references = object["spec"]["valuesFrom"].as_array().cloned().unwrap_or_default();
                references
                    .into_iter()
                    .filter(|r| r["kind"] == "Secret")
                    .filter_map(move |r| Some((namespace.clone(), r["name"].as_str()?.to_string())))
            })
            .collect();
        for (kind, namespace, name) in &wanted {
            let (kind, namespace, name) = (kind.as_str(), namespace.as_str(), name.as_str());
            {
                let found = match kind {
                    "ConfigMap" => self.fetch_values("ConfigMap", namespace, name).await,
                    "Secret" if self.options.may_read_secrets_in(namespace) => {
                        self.fetch_values("Secret", namespace, name).await
                    }
                    _ => continue,
                };
                match found {
                    Ok(Some(object)) if kind == "Secret" => {
                        secrets.push(if self.options.include_secret_values {
                            object
                        } else {
                            strip_secret_values(object)
                        })
                    }
                    Ok(Some(object)) => config_maps.push(object),
                    Ok(None) => {}
                    Err(e) => warnings.push(e.to_string()),
                }
            }
        }

        let helm_releases = if self.options.read_secrets {
            Some(self.read_helm_storage(&objects, &mut warnings).await)
        } else {
            None
        };

        // `.Capabilities` for charts: the server's version and every group version it serves.
        let kube_version = self.client.apiserver_version().await.ok().map(|info| info.git_version);
        let api_versions: Vec<String> = self
            .discovery
            .groups()
            .flat_map(|g| {
                g.versions()
                    .map(|v| if g.name().is_empty() { v.to_string() } else { format!("{}/{v}", g.name()) })
                    .collect::<Vec<_>>()
            })
            .collect();
        // DaemonSets run a pod on every node: the capacity they add is per node times this.
        let node_count = match self.resource("", "Node") {
            Some((resource, _)) => match self.count(&resource, false, None).await {
                Ok(count) => Some(count),
                Err(e) => {
                    warnings.push(e.to_string());
                    None
                }
            },
            None => None,
        };
        let mut document = json!({
            "apiVersion": "fluxplan.dev/v1alpha1",
            "kubeVersion": kube_version,
            "nodeCount": node_count,
            "apiVersions": api_versions,
            "kind": "ClusterSnapshot",
            "kustomizations": kustomizations,
            "applications": applications,
            "argocd": argocd_settings,
            "objects": objects.into_values().collect::<Vec<_>>(),
            "namespaces": namespaces,
            "customResourceDefinitions": crds,
            "configMaps": config_maps,
            "secrets": secrets,
            "unreadable": unreadable,
            "warnings": warnings,
        });
        if let Some(releases) = helm_releases {
            document["helmReleases"] = json!(releases);
        }
        if let Some(sets) = resource_sets {
            document["resourceSets"] = json!(sets);
        }
        if let Some(providers) = input_providers {
            document["resourceSetInputProviders"] = json!(providers);
        }
        let mut snapshot =
            ClusterSnapshot::from_document(document).map_err(|e| KubeError::Api(format!("{e:#}")))?;
        snapshot.readable_secrets = values_secrets;
        snapshot.substitution_secrets = substitution_secrets;
        Ok(snapshot)
    }

    /// Reads the live objects `wanted` names, listed by kind and namespace with the label
    /// `selector` gives (all of the kind without one, keeping only those named), then looked up
    /// one by one. Returns how many Secrets were left unread (no --read-secrets).
    async fn read_objects(
        &self,
        wanted: &BTreeMap<WantedKey, BTreeSet<ObjectId>>,
        selector: impl Fn(&WantedKey) -> Option<&'static str>,
        objects: &mut BTreeMap<ObjectId, Value>,
        unreadable: &mut Vec<Value>,
        warnings: &mut Vec<String>,
    ) -> Result<usize, KubeError> {
        let mut secrets_left_out = 0;
        for ((group, kind, namespace), ids) in wanted {
            // Secrets only with --read-secrets: their live state is then unknown, never read.
            if group.is_empty() && kind == "Secret" && !self.options.may_read_secrets_in(namespace) {
                secrets_left_out += ids.len();
                unreadable.push(json!({"group": group, "kind": kind, "namespace": namespace}));
                continue;
            }
            let Some((resource, caps)) = self.resource(group, kind) else {
                warnings.push(format!("the cluster does not serve {kind} in group '{group}' any more"));
                continue;
            };
            if !caps.supports_operation(verbs::LIST) {
                continue;
            }
            let namespaced = caps.scope == Scope::Namespaced;
            let ns = (!namespace.is_empty()).then_some(namespace.as_str());
            let selector = selector(&(group.clone(), kind.clone(), namespace.clone()));
            match self.list_all(&resource, namespaced, ns, selector).await {
                Ok(items) => {
                    // Kinds listed whole (for Argo CD) keep only what an inventory holds.
                    let whole = selector.is_none();
                    for item in items {
                        if let Some(id) = live_id(&item).filter(|id| !whole || ids.contains(id)) {
                            objects.insert(id, strip_secret_values(item));
                        }
                    }
                    // Entries not carrying owner labels any more, or gone: look them up one by one.
                    let missing: Vec<&ObjectId> = ids.iter().filter(|id| !objects.contains_key(id)).collect();
                    for id in missing.into_iter().take(MAX_SINGLE_LOOKUPS) {
                        match self.get(&resource, namespaced, &id.namespace, &id.name).await {
                            Ok(Some(item)) => {
                                objects.insert(id.clone(), strip_secret_values(item));
                            }
                            Ok(None) => {}
                            Err(e) => warnings.push(e.to_string()),
                        }
                    }
                }
                Err(e @ KubeError::Forbidden(_)) => {
                    warnings.push(e.to_string());
                    unreadable.push(json!({"group": group, "kind": kind, "namespace": namespace}));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(secrets_left_out)
    }

    /// Argo CD's tracking settings from `argocd-cm`: in `argocd`, else in a namespace that holds
    /// Applications; the defaults, with a warning, when there is none to read.
    async fn argocd_settings(&self, applications: &[Value], warnings: &mut Vec<String>) -> Value {
        if applications.is_empty() {
            return json!({});
        }
        let mut namespaces = vec![DEFAULT_ARGOCD_NAMESPACE];
        for namespace in applications.iter().filter_map(|a| a["metadata"]["namespace"].as_str()) {
            if !namespaces.contains(&namespace) {
                namespaces.push(namespace);
            }
        }
        let mut found = None;
        for namespace in namespaces.iter().take(5) {
            match self.fetch_values("ConfigMap", namespace, "argocd-cm").await {
                Ok(Some(config)) => {
                    found = Some(config);
                    let _ = self.argocd_namespace.set(namespace.to_string());
                    break;
                }
                Ok(None) => {}
                Err(e) => {
                    warnings
                        .push(format!("{e}: Argo CD's tracking method is not known, so either marker (tracking annotation or instance label) counts"));
                    return json!({});
                }
            }
        }
        match found {
            Some(config) => {
                let data = &config["data"];
                let mut settings = json!({});
                if let Some(method) = data["application.resourceTrackingMethod"].as_str() {
                    settings["trackingMethod"] = json!(method);
                }
                if let Some(key) = data["application.instanceLabelKey"].as_str() {
                    settings["instanceLabelKey"] = json!(key);
                }
                settings
            }
            None => {
                warnings.push(format!(
                    "no argocd-cm ConfigMap in {}: Argo CD's tracking method is not known, so either marker (tracking annotation or instance label) counts",
                    namespaces.join(", ")
                ));
                json!({})
            }
        }
    }

    /// What uninstalling the release of each live HelmRelease without a `status.inventory` would
    /// delete, read from Helm's storage Secrets: one labelled list per storage namespace (a few releases per request),
    /// only the latest revision decoded, and only object ids kept, never the payload.
    async fn read_helm_storage(
        &self,
        objects: &BTreeMap<ObjectId, Value>,
        warnings: &mut Vec<String>,
    ) -> Vec<StoredReleaseSummary> {
        let mut wanted: BTreeMap<String, BTreeSet<ReleaseRef>> = BTreeMap::new();
        // Every live release, status.inventory or not: an uninstall deletes the manifest of the
        // release's latest storage record (helm/helm pkg/action/uninstall.go), which is the
        // truth where it can be read; status.inventory is what stands in without Secrets.
        for object in objects.values().filter(|o| helm::is_helm_release(o)) {
            if let Some(helm::OnDeletion::Uninstalls(release)) = helm::on_deletion(object, true) {
                if !valid_label_value(&release.name) {
                    warnings.push(format!(
                        "Helm release name {:?} is not a valid label value: its storage is not read",
                        release.name.chars().take(80).collect::<String>()
                    ));
                    continue;
                }
                wanted.entry(release.storage_namespace.clone()).or_default().insert(release);
            }
        }
        let Some((secrets, _)) = self.resource("", "Secret") else { return Vec::new() };
        let mut summaries = Vec::new();
        for (storage_namespace, releases) in &wanted {
            let releases: Vec<&ReleaseRef> = releases.iter().collect();
            if let Some(why) = self.options.outside_secret_namespaces(storage_namespace) {
                summaries.extend(releases.iter().map(|release| unreadable_release(release, &why)));
                continue;
            }
            for batch in releases.chunks(HELM_RELEASES_PER_LIST) {
                let names: Vec<&str> = batch.iter().map(|r| r.name.as_str()).collect();
                let selector = format!("owner=helm,name in ({})", names.join(","));
                match self.list_all(&secrets, true, Some(storage_namespace), Some(&selector)).await {
                    Ok(items) => {
                        summaries
                            .extend(batch.iter().filter_map(|r| self.summarize_release(r, &items, warnings)));
                    }
                    Err(e) => {
                        warnings.push(e.to_string());
                        for release in batch {
                            summaries
                                .push(unreadable_release(release, "its storage Secrets could not be listed"));
                        }
                    }
                }
            }
        }
        summaries
    }

    /// The latest revision's storage Secret of `release` among `items`, decoded to object ids.
    /// `None` when Helm has no record of it (nothing left to uninstall).
    fn summarize_release(
        &self,
        release: &ReleaseRef,
        items: &[Value],
        warnings: &mut Vec<String>,
    ) -> Option<StoredReleaseSummary> {
        let latest = items
            .iter()
            .filter(|s| s["type"] == helm_storage::STORAGE_SECRET_TYPE)
            .filter(|s| s["metadata"]["labels"]["name"] == release.name.as_str())
            .max_by_key(|s| {
                s["metadata"]["labels"]["version"].as_str().and_then(|v| v.parse::<i64>().ok()).unwrap_or(0)
            });
        let secret = latest?;
        let secret_name = secret["metadata"]["name"].as_str().unwrap_or("?");
        let decoded = match secret["data"]["release"].as_str() {
            Some(value) => helm_storage::decode_secret_value(value),
            None => Err(helm_storage::DecodeError::Missing),
        };
        let decoded = match decoded {
            Ok(decoded) => decoded,
            Err(e) => {
                let why = format!(
                    "storage Secret {storage}/{secret_name}: {e}",
                    storage = release.storage_namespace
                );
                warnings.push(format!("Helm release {release}: {why}"));
                return Some(unreadable_release(release, &why));
            }
        };
        let mut summary = StoredReleaseSummary {
            name: release.name.clone(),
            namespace: release.namespace.clone(),
            storage_namespace: release.storage_namespace.clone(),
            version: decoded.version,
            status: decoded.status.clone(),
            objects: Vec::new(),
            kept: Vec::new(),
            delete_hooks: decoded.delete_hooks,
            error: None,
        };
        let release_namespace =
            if decoded.namespace.is_empty() { &release.namespace } else { &decoded.namespace };
        for object in &decoded.objects {
            let (group, _) = flux::split_api_version(&object.api_version);
            let scope = match self.resource(group, &object.kind) {
                Some((_, caps)) if caps.scope == Scope::Cluster => FluxScope::Cluster,
                Some(_) => FluxScope::Namespaced,
                None => crate::flux::scope::ScopeMap::default().scope_of(group, &object.kind),
            };
            let namespace = match scope {
                FluxScope::Cluster => "",
                _ => object.namespace.as_deref().unwrap_or(release_namespace),
            };
            let id = ObjectId::new(namespace, &object.name, group, &object.kind).to_string();
            if helm_storage::kept_by_policy(object.resource_policy.as_deref()) {
                summary.kept.push(id);
            } else {
                summary.objects.push(id);
            }
        }
        summary.objects.sort();
        summary.objects.dedup();
        summary.kept.sort();
        summary.kept.dedup();
        Some(summary)
    }

    /// Argo CD's namespace: where the live `argocd-cm` is (`argocd`, else a namespace holding live
    /// Applications), `argocd` when none was found. The cluster says it, never a pull request.
    pub fn argocd_namespace(&self) -> &str {
        self.argocd_namespace.get().map(String::as_str).unwrap_or(DEFAULT_ARGOCD_NAMESPACE)
    }

    /// Argo CD's repository and credential-template Secrets, in its namespace: one labelled list.
    pub async fn argocd_repository_secrets(&self) -> Result<Vec<RepositorySecret>, KubeError> {
        let (secrets, _) =
            self.resource("", "Secret").ok_or_else(|| KubeError::Api("Secret not served".into()))?;
        let namespace = self.argocd_namespace();
        let items =
            self.list_all(&secrets, true, Some(namespace), Some(repository_credentials::SELECTOR)).await?;
        let mut found: Vec<RepositorySecret> = items
            .iter()
            .filter_map(|secret| {
                let metadata = &secret["metadata"];
                let name = format!("{namespace}/{}", metadata["name"].as_str()?);
                let secret_type = metadata["labels"][repository_credentials::SECRET_TYPE_LABEL].as_str()?;
                RepositorySecret::new(name, secret_type, super::snapshot::secret_values(secret))
            })
            .collect();
        // Argo CD takes them in its informer's order; sorted, every plan takes the same.
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(found)
    }

    /// The AppProjects of Argo CD's namespace: one list, no Secrets. When the kind is not served
    /// (no Argo CD) there are none: only the built-in `default` project exists.
    pub async fn argocd_projects(&self) -> Result<AppProjects, KubeError> {
        let Some((projects, _)) = self.resource(crate::argocd::GROUP, "AppProject") else {
            return Ok(AppProjects::default());
        };
        let items = self.list_all(&projects, true, Some(self.argocd_namespace()), None).await?;
        Ok(AppProjects::new(items.iter().filter_map(AppProject::from_value)))
    }

    async fn fetch_values(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, KubeError> {
        let (resource, caps) =
            self.resource("", kind).ok_or_else(|| KubeError::Api(format!("{kind} not served")))?;
        self.get(&resource, caps.scope == Scope::Namespaced, namespace, name).await
    }

    /// What Kubernetes deletes along with `deleted` objects: the contents of Namespaces (counted
    /// per kind over every namespaced, listable resource), the custom resources of CRDs, and
    /// whether deleted PersistentVolumeClaims lose their data (bound volume reclaimed by Delete).
    pub async fn blast_radius(&self, deleted: &[ObjectId]) -> BlastRadius {
        let mut radius = BlastRadius::default();
        let namespaced: Vec<(ApiResource, ApiCapabilities)> = self
            .discovery
            .groups()
            .flat_map(|g| g.recommended_resources())
            .filter(|(_, caps)| caps.scope == Scope::Namespaced && caps.supports_operation(verbs::LIST))
            // Events and metrics are records about objects, not objects a deletion loses (and
            // they change by the minute).
            .filter(|(resource, _)| {
                resource.kind != "Event"
                    && !matches!(resource.group.as_str(), "events.k8s.io" | "metrics.k8s.io")
            })
            .collect();
        for id in deleted {
            match (id.group.as_str(), id.kind.as_str()) {
                ("", "Namespace") => {
                    let mut counts = BTreeMap::new();
                    for (resource, _) in &namespaced {
                        match self.count(resource, true, Some(&id.name)).await {
                            Ok(0) => {}
                            Ok(n) => {
                                counts.insert(resource.kind.clone(), n);
                            }
                            Err(e) => radius.warnings.push(e.to_string()),
                        }
                    }
                    radius.namespaces.insert(id.name.clone(), counts);
                }
                ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                    let Some((_, group)) = id.name.split_once('.') else { continue };
                    let served =
                        self.discovery.get(group).map(|g| g.recommended_resources()).unwrap_or_default();
                    let plural = id.name.split('.').next().unwrap_or("");
                    if let Some((resource, caps)) = served.iter().find(|(r, _)| r.plural == plural) {
                        match self.count(resource, caps.scope == Scope::Namespaced, None).await {
                            Ok(n) => {
                                radius.custom_resources.insert(id.name.clone(), n);
                            }
                            Err(e) => radius.warnings.push(e.to_string()),
                        }
                    }
                }
                _ => {}
            }
        }
        // Claims deleted directly or with their Namespace: is their volume deleted too?
        let claim_namespaces: BTreeSet<&str> = deleted
            .iter()
            .filter(|id| id.kind == "Namespace" && id.group.is_empty())
            .map(|id| id.name.as_str())
            .collect();
        let direct: BTreeSet<(String, String)> = deleted
            .iter()
            .filter(|id| id.kind == "PersistentVolumeClaim" && id.group.is_empty())
            .map(|id| (id.namespace.clone(), id.name.clone()))
            .collect();
        if direct.is_empty() && claim_namespaces.is_empty() {
            return radius;
        }
        let (Some((pv, _)), Some((pvc, _))) =
            (self.resource("", "PersistentVolume"), self.resource("", "PersistentVolumeClaim"))
        else {
            return radius;
        };
        let volumes = match self.list_all(&pv, false, None, None).await {
            Ok(items) => items,
            Err(e) => {
                radius.warnings.push(e.to_string());
                return radius;
            }
        };
        let mut claims: BTreeSet<(String, String)> = direct;
        for namespace in claim_namespaces {
            match self.list_all(&pvc, true, Some(namespace), None).await {
                Ok(items) => claims.extend(items.iter().filter_map(|c| {
                    Some((namespace.to_string(), c["metadata"]["name"].as_str()?.to_string()))
                })),
                Err(e) => radius.warnings.push(e.to_string()),
            }
        }
        for volume in &volumes {
            let claim = &volume["spec"]["claimRef"];
            let key = (
                claim["namespace"].as_str().unwrap_or("").to_string(),
                claim["name"].as_str().unwrap_or("").to_string(),
            );
            if claims.contains(&key) && volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete" {
                radius.data_loss.push(DataLoss {
                    namespace: key.0,
                    claim: key.1,
                    volume: volume["metadata"]["name"].as_str().unwrap_or("?").to_string(),
                });
            }
        }
        radius
    }
}

/// Release names per labelled list of storage Secrets (keeps the URL short).
const HELM_RELEASES_PER_LIST: usize = 20;

fn unreadable_release(release: &ReleaseRef, why: &str) -> StoredReleaseSummary {
    StoredReleaseSummary {
        name: release.name.clone(),
        namespace: release.namespace.clone(),
        storage_namespace: release.storage_namespace.clone(),
        version: 0,
        status: String::new(),
        objects: Vec::new(),
        kept: Vec::new(),
        delete_hooks: 0,
        error: Some(why.to_string()),
    }
}

/// A Kubernetes label value (what a label selector may name).
fn valid_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    !value.is_empty()
        && value.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
}

/// Lists of dynamic objects carry no type: put apiVersion and kind back.
fn with_type(mut object: Value, resource: &ApiResource) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), json!(resource.api_version));
        map.insert("kind".into(), json!(resource.kind));
    }
    object
}

/// What the live HelmReleases among `objects` list in `status.inventory` and `objects` lacks.
fn release_inventories(objects: &BTreeMap<ObjectId, Value>) -> BTreeMap<WantedKey, BTreeSet<ObjectId>> {
    let mut wanted: BTreeMap<WantedKey, BTreeSet<ObjectId>> = BTreeMap::new();
    for release in objects.values().filter(|o| helm::is_helm_release(o)) {
        for entry in release["status"]["inventory"]["entries"].as_array().into_iter().flatten() {
            let Some(id) = entry["id"].as_str().and_then(ObjectId::parse) else { continue };
            if !objects.contains_key(&id) {
                wanted
                    .entry((id.group.clone(), id.kind.clone(), id.namespace.clone()))
                    .or_default()
                    .insert(id);
            }
        }
    }
    wanted
}

/// A live object as fluxplan keeps it: a Secret without its values, and no object with the
/// `last-applied-configuration` annotation, which repeats the whole object (a Secret's values
/// too). Values never leave the process; a snapshot then reads them as only the cluster knows.
fn strip_secret_values(mut object: Value) -> Value {
    if let Some(annotations) = object.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    if object["kind"] == "Secret" {
        if let Some(map) = object.as_object_mut() {
            map.remove("data");
            map.remove("stringData");
        }
    }
    // The Secret a ResourceDistribution copies into namespaces holds the same values.
    if crate::render::postbuild::distributes_secret(&object) {
        if let Some(map) = object.pointer_mut("/spec/resource").and_then(Value::as_object_mut) {
            map.remove("data");
            map.remove("stringData");
        }
    }
    object
}

/// Substitution values read from the cluster on demand (the head may name sources the live
/// Kustomizations do not), cached; Secrets only when allowed.
pub struct LiveValues {
    runtime: tokio::runtime::Handle,
    cluster: std::sync::Arc<KubeCluster>,
    cache: Mutex<BTreeMap<(String, String, String), Lookup>>,
    readable_secrets: std::collections::BTreeSet<(String, String)>,
    /// The Secrets the cluster's Kustomizations substitute from.
    substitution_secrets: std::collections::BTreeSet<(String, String)>,
    /// Argo CD's repository Secrets, listed once.
    repository_secrets: std::sync::OnceLock<Result<std::sync::Arc<Vec<RepositorySecret>>, String>>,
    /// Argo CD's AppProjects, listed once per plan.
    projects: std::sync::OnceLock<Result<std::sync::Arc<AppProjects>, String>>,
}

impl LiveValues {
    /// The Secrets (namespace, name) the cluster's own Flux objects read, as `snapshot` lists
    /// them, are the only ones looked up: a pull request names any Secret it likes.
    pub fn new(
        runtime: tokio::runtime::Handle,
        cluster: std::sync::Arc<KubeCluster>,
        snapshot: &ClusterSnapshot,
    ) -> Self {
        LiveValues {
            runtime,
            cluster,
            readable_secrets: snapshot.readable_secrets.clone(),
            substitution_secrets: snapshot.substitution_secrets.clone(),
            cache: Mutex::default(),
            repository_secrets: Default::default(),
            projects: Default::default(),
        }
    }
}

impl SubstitutionSource for LiveValues {
    fn lookup(&self, kind: &str, namespace: &str, name: &str) -> Lookup {
        let key = (kind.to_string(), namespace.to_string(), name.to_string());
        if let Some(hit) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return hit.clone();
        }
        let answer = if kind == "Secret" && !self.cluster.options.may_read_secrets_in(namespace) {
            Lookup::Unknown
        } else {
            match self.runtime.block_on(self.cluster.fetch_values(kind, namespace, name)) {
                Ok(Some(object)) => {
                    let doc = json!({"kind": "ClusterSnapshot",
                        "configMaps": if kind == "ConfigMap" { vec![object.clone()] } else { vec![] },
                        "secrets": if kind == "Secret" { vec![object] } else { vec![] }});
                    ClusterSnapshot::from_document(doc)
                        .map(|s| s.lookup(kind, namespace, name))
                        .unwrap_or(Lookup::Unknown)
                }
                Ok(None) => Lookup::NotFound,
                Err(_) => Lookup::Unknown,
            }
        };
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(key, answer.clone());
        answer
    }

    fn substitution_secret_refused(&self, namespace: &str, name: &str) -> bool {
        // A pull request names any Secret it likes: only those the cluster's own Flux objects
        // read are read for it; its placeholders are left to the cluster.
        let key = (namespace.to_string(), name.to_string());
        (!self.substitution_secrets.contains(&key) && !self.readable_secrets.contains(&key))
            || self.cluster.options.outside_secret_namespaces(namespace).is_some()
    }

    fn values_secret_refused(&self, namespace: &str, name: &str) -> Option<String> {
        if let Some(why) = self.cluster.options.outside_secret_namespaces(namespace) {
            return Some(why);
        }
        // A pull request names any Secret it likes: only those the cluster's own Flux objects
        // read are read for it.
        (!self.readable_secrets.contains(&(namespace.to_string(), name.to_string()))).then(|| {
            "no HelmRelease in the cluster takes values from it yet, and fluxplan gives a chart only the \
             Secrets the cluster's HelmReleases already take values from (docs/security.md)"
                .to_string()
        })
    }

    fn argocd_repository_secrets(&self) -> Result<std::sync::Arc<Vec<RepositorySecret>>, String> {
        if !self.cluster.options.read_secrets {
            return Err(format!(
                "Argo CD's repository credentials are Secrets in namespace {}, read only with --read-secrets \
                 (plan with a cluster and --read-secrets)",
                self.cluster.argocd_namespace()
            ));
        }
        if let Some(why) = self.cluster.options.outside_secret_namespaces(self.cluster.argocd_namespace()) {
            return Err(format!("Argo CD's repository credentials are not read: {why}"));
        }
        self.repository_secrets
            .get_or_init(|| {
                self.runtime
                    .block_on(self.cluster.argocd_repository_secrets())
                    .map(std::sync::Arc::new)
                    .map_err(|e| format!("Argo CD's repository credentials could not be read: {e}"))
            })
            .clone()
    }
    fn argocd_projects(&self) -> Option<Result<std::sync::Arc<AppProjects>, String>> {
        let projects = self.projects.get_or_init(|| {
            self.runtime
                .block_on(self.cluster.argocd_projects())
                .map(std::sync::Arc::new)
                .map_err(|e| format!("Argo CD's AppProjects could not be read: {e}"))
        });
        Some(projects.clone())
    }
}
