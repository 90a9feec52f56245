//! An in-process fake Kubernetes API server for the integration tests.
//!
//! It serves read-only (GET) discovery, list and get requests in the real wire format, well enough
//! for the `kube` crate and the real `kubectl` binary: legacy discovery (`/api`, `/apis`, ...),
//! label and field selectors, `limit`/`continue` pagination, `Status` errors (404, 403, 405, 410)
//! and `meta.k8s.io/v1` Tables for kubectl's human-readable output. Watches are not supported.
#![allow(dead_code)]

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use base64::Engine as _;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The user named in 403 messages, as the real API server names the caller.
pub const USER: &str = "system:serviceaccount:flux-system:fluxplan";

/// A running fake API server; dropping it shuts the server down.
pub struct FakeKube {
    addr: SocketAddr,
    state: Arc<Mutex<Inner>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeKube {
    /// Starts the server on 127.0.0.1 port 0 in a background thread with its own tokio runtime,
    /// serving `objects` (full manifests as serde_json::Value). Returns once it is listening.
    pub fn start(objects: Vec<Value>) -> FakeKube {
        let mut inner = Inner {
            objects: BTreeMap::new(),
            forbidden: HashSet::new(),
            requests: Vec::new(),
            epoch: new_epoch(),
        };
        for object in objects {
            inner.insert(object);
        }
        let state = Arc::new(Mutex::new(inner));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = Router::new().fallback(handle).with_state(state.clone());
        let thread = std::thread::Builder::new()
            .name(format!("fake-kube-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    let server = std::future::IntoFuture::into_future(axum::serve(listener, app));
                    tokio::select! {
                        result = server => result.expect("fake kube server failed"),
                        _ = rx => {}
                    }
                });
                rt.shutdown_timeout(std::time::Duration::from_secs(1));
            })
            .expect("spawn fake kube thread");
        FakeKube { addr, state, shutdown: Some(tx), thread: Some(thread) }
    }

    /// Base URL, e.g. "http://127.0.0.1:41234".
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Writes a kubeconfig (YAML) into `dir` with one cluster/user/context named "fake" pointing at
    /// the URL (plain http, no auth, current-context fake) and returns its path.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             users:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    \
             user: fake\ncurrent-context: fake\npreferences: {{}}\n",
            self.url()
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    /// Every later request for this verb ("list" or "get") on this resource (group "" for core,
    /// resource plural like "deployments") is answered 403 Forbidden, in any namespace.
    pub fn forbid(&self, verb: &str, group: &str, resource: &str) {
        self.lock().forbidden.insert((verb.to_string(), group.to_string(), resource.to_string()));
    }

    /// Every request received so far: (HTTP method, path with query string).
    pub fn requests(&self) -> Vec<(String, String)> {
        self.lock().requests.clone()
    }

    /// Adds or replaces an object while running (keyed by group, kind, namespace and name).
    pub fn put(&self, object: Value) {
        self.lock().insert(object);
    }

    /// Invalidates every continue token handed out so far: using one answers 410 Gone (Expired),
    /// as when the real API server has compacted the revision a paginated list started at.
    pub fn expire_continue_tokens(&self) {
        self.lock().epoch = new_epoch();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn new_epoch() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (nanos ^ (u64::from(std::process::id()) << 32)).wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed))
}

// ---------------------------------------------------------------------------------------------
// State and the resource registry

/// (group, kind, namespace as stored, name)
type ObjKey = (String, String, String, String);

struct Inner {
    objects: BTreeMap<ObjKey, Value>,
    forbidden: HashSet<(String, String, String)>,
    requests: Vec<(String, String)>,
    epoch: u64,
}

#[derive(Clone, Debug)]
struct ResType {
    group: String,
    /// Served versions, preferred first.
    versions: Vec<String>,
    plural: String,
    singular: String,
    kind: String,
    namespaced: bool,
    short_names: Vec<String>,
}

impl ResType {
    fn gv(&self, version: &str) -> String {
        group_version(&self.group, version)
    }
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// (group, versions, plural, kind, namespaced, short names)
type BuiltinRow =
    (&'static str, &'static [&'static str], &'static str, &'static str, bool, &'static [&'static str]);

fn builtin_types() -> Vec<ResType> {
    #[rustfmt::skip]
    let table: &[BuiltinRow] = &[
        ("", &["v1"], "namespaces", "Namespace", false, &["ns"]),
        ("", &["v1"], "configmaps", "ConfigMap", true, &["cm"]),
        ("", &["v1"], "secrets", "Secret", true, &[]),
        ("", &["v1"], "services", "Service", true, &["svc"]),
        ("", &["v1"], "serviceaccounts", "ServiceAccount", true, &["sa"]),
        ("", &["v1"], "pods", "Pod", true, &["po"]),
        ("", &["v1"], "persistentvolumeclaims", "PersistentVolumeClaim", true, &["pvc"]),
        ("", &["v1"], "persistentvolumes", "PersistentVolume", false, &["pv"]),
        ("", &["v1"], "events", "Event", true, &["ev"]),
        ("apps", &["v1"], "deployments", "Deployment", true, &["deploy"]),
        ("apps", &["v1"], "statefulsets", "StatefulSet", true, &["sts"]),
        ("apps", &["v1"], "daemonsets", "DaemonSet", true, &["ds"]),
        ("apps", &["v1"], "replicasets", "ReplicaSet", true, &["rs"]),
        ("batch", &["v1"], "jobs", "Job", true, &[]),
        ("batch", &["v1"], "cronjobs", "CronJob", true, &["cj"]),
        ("rbac.authorization.k8s.io", &["v1"], "roles", "Role", true, &[]),
        ("rbac.authorization.k8s.io", &["v1"], "rolebindings", "RoleBinding", true, &[]),
        ("rbac.authorization.k8s.io", &["v1"], "clusterroles", "ClusterRole", false, &[]),
        ("rbac.authorization.k8s.io", &["v1"], "clusterrolebindings", "ClusterRoleBinding", false, &[]),
        ("networking.k8s.io", &["v1"], "ingresses", "Ingress", true, &["ing"]),
        ("apiextensions.k8s.io", &["v1"], "customresourcedefinitions", "CustomResourceDefinition", false,
            &["crd", "crds"]),
        ("kustomize.toolkit.fluxcd.io", &["v1", "v1beta2", "v1beta1"], "kustomizations", "Kustomization",
            true, &["ks"]),
        ("source.toolkit.fluxcd.io", &["v1"], "gitrepositories", "GitRepository", true, &["gitrepo"]),
        ("source.toolkit.fluxcd.io", &["v1"], "ocirepositories", "OCIRepository", true, &["ocirepo"]),
        ("source.toolkit.fluxcd.io", &["v1"], "buckets", "Bucket", true, &[]),
    ];
    table
        .iter()
        .map(|(group, versions, plural, kind, namespaced, short)| ResType {
            group: group.to_string(),
            versions: versions.iter().map(|v| v.to_string()).collect(),
            plural: plural.to_string(),
            singular: kind.to_lowercase(),
            kind: kind.to_string(),
            namespaced: *namespaced,
            short_names: short.iter().map(|s| s.to_string()).collect(),
        })
        .collect()
}

/// The type a CustomResourceDefinition manifest defines, if it is well-formed.
fn crd_type(crd: &Value) -> Option<ResType> {
    let spec = crd.get("spec")?;
    let group = spec.get("group")?.as_str()?.to_string();
    let names = spec.get("names")?;
    let plural = names.get("plural")?.as_str()?.to_string();
    let kind = names.get("kind")?.as_str()?.to_string();
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let short_names = names
        .get("shortNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
    let mut versions: Vec<String> = match spec.get("versions").and_then(Value::as_array) {
        Some(vs) => vs
            .iter()
            .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
            .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
            .collect(),
        None => spec.get("version").and_then(Value::as_str).map(|v| vec![v.to_string()]).unwrap_or_default(),
    };
    if versions.is_empty() {
        return None;
    }
    sort_versions(&mut versions);
    Some(ResType { group, versions, plural, singular, kind, namespaced, short_names })
}

/// Kubernetes version priority: GA before beta before alpha, higher numbers first, then the rest
/// alphabetically.
fn sort_versions(versions: &mut Vec<String>) {
    fn key(v: &str) -> (u8, i64, i64, String) {
        let parsed = (|| {
            let rest = v.strip_prefix('v')?;
            let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            let major: i64 = rest[..digits].parse().ok()?;
            let tail = &rest[digits..];
            if tail.is_empty() {
                return Some((0, -major, 0));
            }
            for (i, stage) in ["beta", "alpha"].iter().enumerate() {
                if let Some(minor) = tail.strip_prefix(stage) {
                    let minor: i64 = minor.parse().ok()?;
                    return Some((i as u8 + 1, -major, -minor));
                }
            }
            None
        })();
        match parsed {
            Some((stage, major, minor)) => (stage, major, minor, String::new()),
            None => (3, 0, 0, v.to_string()),
        }
    }
    versions.sort_by_key(|v| key(v));
    versions.dedup();
}

struct Registry {
    types: Vec<ResType>,
}

impl Registry {
    fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.plural == plural && t.versions.iter().any(|v| v == version))
    }

    fn by_kind(&self, group: &str, kind: &str) -> Option<&ResType> {
        self.types.iter().find(|t| t.group == group && t.kind == kind)
    }

    /// Non-core groups in registration order, each with its versions, preferred first.
    fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            match groups.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, versions)) => versions.extend(t.versions.iter().cloned()),
                None => groups.push((t.group.clone(), t.versions.clone())),
            }
        }
        for (_, versions) in &mut groups {
            sort_versions(versions);
        }
        groups
    }

    fn resources(&self, group: &str, version: &str) -> Vec<&ResType> {
        self.types.iter().filter(|t| t.group == group && t.versions.iter().any(|v| v == version)).collect()
    }
}

fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or("")
}

impl Inner {
    fn registry(&self) -> Registry {
        let mut types = builtin_types();
        for ((group, kind, _, _), object) in &self.objects {
            if group != "apiextensions.k8s.io" || kind != "CustomResourceDefinition" {
                continue;
            }
            if let Some(t) = crd_type(object) {
                match types.iter_mut().find(|x| x.group == t.group && x.plural == t.plural) {
                    Some(existing) => *existing = t,
                    None => types.push(t),
                }
            }
        }
        Registry { types }
    }

    fn insert(&mut self, object: Value) {
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let group = split_api_version(api_version).0.to_string();
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        let name = meta_str(&object, "name").to_string();
        let mut namespace = meta_str(&object, "namespace").to_string();
        if let Some(t) = self.registry().by_kind(&group, &kind) {
            if !t.namespaced {
                namespace.clear();
            } else if namespace.is_empty() {
                namespace = "default".to_string();
            }
        }
        self.objects.insert((group, kind, namespace, name), object);
    }

    /// The stored objects of type `t` (in `namespace` if given) as served at `version`, sorted by
    /// namespace then name.
    fn objects_of(
        &self,
        t: &ResType,
        version: &str,
        namespace: Option<&str>,
    ) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        for ((group, kind, ns, name), object) in &self.objects {
            if *group != t.group || *kind != t.kind {
                continue;
            }
            let ns = match (t.namespaced, ns.is_empty()) {
                (false, _) => String::new(),
                (true, true) => "default".to_string(),
                (true, false) => ns.clone(),
            };
            if namespace.is_some_and(|want| want != ns) {
                continue;
            }
            let mut object = object.clone();
            if let Some(map) = object.as_object_mut() {
                map.insert("apiVersion".into(), Value::String(t.gv(version)));
                if t.namespaced {
                    if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
                        metadata.insert("namespace".into(), Value::String(ns.clone()));
                    }
                }
            }
            out.push((ns, name.clone(), object));
        }
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP

type Shared = Arc<Mutex<Inner>>;

async fn handle(State(state): State<Shared>, method: Method, uri: Uri, headers: HeaderMap) -> Response {
    let path_and_query = uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| "/".into());
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    let table = accept.split(',').any(|a| a.contains("as=Table"));
    let query = parse_query(uri.query().unwrap_or(""));
    let (code, body) = {
        let mut inner = state.lock().unwrap_or_else(|e| e.into_inner());
        inner.requests.push((method.to_string(), path_and_query));
        serve(&inner, &method, uri.path(), &query, table)
    };
    let mut response = (StatusCode::from_u16(code).unwrap(), body.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

struct Query(Vec<(String, String)>);

impl Query {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

fn parse_query(query: &str) -> Query {
    Query(url::form_urlencoded::parse(query.as_bytes()).into_owned().collect())
}

/// What a request path addresses.
enum Target {
    Version,
    CoreVersions,
    CoreResources(String),
    Groups,
    Group(String),
    GroupResources(String, String),
    Resource {
        group: String,
        version: String,
        namespace: Option<String>,
        plural: String,
        name: Option<String>,
    },
    Unknown,
}

fn parse_path(path: &str) -> Target {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Target::Version,
        ["api"] => return Target::CoreVersions,
        ["api", v] => return Target::CoreResources(v.to_string()),
        ["apis"] => return Target::Groups,
        ["apis", g] => return Target::Group(g.to_string()),
        ["apis", g, v] => return Target::GroupResources(g.to_string(), v.to_string()),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Target::Unknown,
    };
    let (namespace, plural, name) = match rest {
        ["namespaces", ns, plural] => (Some(*ns), *plural, None),
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name)),
        [plural] => (None, *plural, None),
        [plural, name] => (None, *plural, Some(*name)),
        _ => return Target::Unknown,
    };
    Target::Resource {
        group: group.to_string(),
        version: version.to_string(),
        namespace: namespace.map(str::to_string),
        plural: plural.to_string(),
        name: name.map(str::to_string),
    }
}

fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> (u16, Value) {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    });
    if let Some(details) = details {
        body["details"] = details;
    }
    body["code"] = json!(code);
    (code, body)
}

fn details(name: Option<&str>, group: &str, resource: &str) -> Value {
    let mut d = Map::new();
    if let Some(name) = name {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    d.insert("kind".into(), json!(resource));
    Value::Object(d)
}

fn not_found_path() -> (u16, Value) {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource",
        Some(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]})),
    )
}

fn serve(inner: &Inner, method: &Method, path: &str, query: &Query, table: bool) -> (u16, Value) {
    let target = parse_path(path);
    if method != Method::GET {
        let d = match &target {
            Target::Resource { group, plural, name, .. } => details(name.as_deref(), group, plural),
            _ => json!({}),
        };
        return status(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            Some(d),
        );
    }
    let registry = inner.registry();
    match target {
        Target::Version => (
            200,
            json!({
                "major": "1",
                "minor": "33",
                "emulationMajor": "1",
                "emulationMinor": "33",
                "minCompatibilityMajor": "1",
                "minCompatibilityMinor": "32",
                "gitVersion": "v1.33.0",
                "gitCommit": "60a317eadfcb839692a68eab88b2096f4d708f4f",
                "gitTreeState": "clean",
                "buildDate": "2025-04-23T13:07:04Z",
                "goVersion": "go1.24.2",
                "compiler": "gc",
                "platform": "linux/amd64"
            }),
        ),
        Target::CoreVersions => (
            200,
            json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]
            }),
        ),
        Target::CoreResources(version) if version == "v1" => (200, resource_list(&registry, "", "v1")),
        Target::Groups => {
            let groups: Vec<Value> = registry.groups().iter().map(|(g, vs)| api_group(g, vs)).collect();
            (200, json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        }
        Target::Group(group) => match registry.groups().iter().find(|(g, _)| *g == group) {
            Some((g, vs)) => {
                let mut body = api_group(g, vs);
                body["kind"] = json!("APIGroup");
                body["apiVersion"] = json!("v1");
                (200, body)
            }
            None => not_found_path(),
        },
        Target::GroupResources(group, version) if !registry.resources(&group, &version).is_empty() => {
            (200, resource_list(&registry, &group, &version))
        }
        Target::Resource { group, version, namespace, plural, name } => {
            let Some(t) = registry.find(&group, &version, &plural) else {
                return not_found_path();
            };
            if (namespace.is_some() && !t.namespaced)
                || (namespace.is_none() && name.is_some() && t.namespaced)
            {
                return not_found_path();
            }
            if matches!(query.get("watch"), Some("true" | "1")) {
                return status(400, "BadRequest", "the fake API server does not support watch", None);
            }
            let verb = if name.is_some() { "get" } else { "list" };
            if inner.forbidden.contains(&(verb.to_string(), group.clone(), plural.clone())) {
                return forbidden(verb, &group, &plural, namespace.as_deref(), name.as_deref());
            }
            let objects = inner.objects_of(t, &version, namespace.as_deref());
            match name {
                Some(name) => get(t, objects, &name, query, table),
                None => list(inner.epoch, t, &version, objects, query, table),
            }
        }
        _ => not_found_path(),
    }
}

fn api_group(group: &str, versions: &[String]) -> Value {
    let gvs: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": group_version(group, v), "version": v})).collect();
    json!({
        "name": group,
        "versions": gvs,
        "preferredVersion": {"groupVersion": group_version(group, &versions[0]), "version": versions[0]},
    })
}

fn resource_list(registry: &Registry, group: &str, version: &str) -> Value {
    let resources: Vec<Value> = registry
        .resources(group, version)
        .into_iter()
        .map(|t| {
            let mut r = json!({
                "name": t.plural,
                "singularName": t.singular,
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "list", "watch"],
            });
            if !t.short_names.is_empty() {
                r["shortNames"] = json!(t.short_names);
            }
            r
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(group, version),
        "resources": resources,
    })
}

fn forbidden(verb: &str, group: &str, plural: &str, ns: Option<&str>, name: Option<&str>) -> (u16, Value) {
    let resource = if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") };
    let subject = match name {
        Some(name) => format!("{resource} \"{name}\""),
        None => resource,
    };
    let scope = match ns {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    let message = format!(
        "{subject} is forbidden: User \"{USER}\" cannot {verb} resource \"{plural}\" in API group \"{group}\" {scope}"
    );
    status(403, "Forbidden", &message, Some(details(name, group, plural)))
}

fn get(
    t: &ResType,
    objects: Vec<(String, String, Value)>,
    name: &str,
    query: &Query,
    table: bool,
) -> (u16, Value) {
    match objects.into_iter().find(|(_, n, _)| n == name) {
        Some((_, _, object)) if table => (200, to_table(&[object], Map::new(), query)),
        Some((_, _, object)) => (200, object),
        None => status(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", qualified(t)),
            Some(details(Some(name), &t.group, &t.plural)),
        ),
    }
}

/// `configmaps`, `deployments.apps`: how the API server names a resource in messages.
fn qualified(t: &ResType) -> String {
    if t.group.is_empty() {
        t.plural.clone()
    } else {
        format!("{}.{}", t.plural, t.group)
    }
}

fn list(
    epoch: u64,
    t: &ResType,
    version: &str,
    objects: Vec<(String, String, Value)>,
    query: &Query,
    table: bool,
) -> (u16, Value) {
    let labels = match query.get("labelSelector").map(parse_label_selector).transpose() {
        Ok(l) => l.unwrap_or_default(),
        Err(message) => return status(400, "BadRequest", &message, Some(details(None, &t.group, &t.plural))),
    };
    let fields = match query.get("fieldSelector").map(parse_field_selector).transpose() {
        Ok(f) => f.unwrap_or_default(),
        Err(message) => return status(400, "BadRequest", &message, Some(details(None, &t.group, &t.plural))),
    };
    let mut objects: Vec<(String, String, Value)> = objects
        .into_iter()
        .filter(|(ns, name, object)| {
            labels.iter().all(|r| r.matches(object)) && fields.iter().all(|f| f.matches(ns, name))
        })
        .collect();
    if let Some(token) = query.get("continue").filter(|t| !t.is_empty()) {
        let Some((ns, name)) = decode_continue(token, epoch) else {
            return status(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list result. You can \
                 start a new list without the continue parameter.",
                Some(details(None, &t.group, &t.plural)),
            );
        };
        objects.retain(|(n, m, _)| (n.as_str(), m.as_str()) > (ns.as_str(), name.as_str()));
    }
    let limit = query.get("limit").and_then(|l| l.parse::<usize>().ok()).unwrap_or(0);
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), json!("1"));
    if limit > 0 && objects.len() > limit {
        let remaining = objects.len() - limit;
        objects.truncate(limit);
        let (ns, name, _) = objects.last().unwrap();
        metadata.insert("continue".into(), json!(encode_continue(epoch, ns, name)));
        metadata.insert("remainingItemCount".into(), json!(remaining));
    }
    let items: Vec<Value> = objects.into_iter().map(|(_, _, o)| o).collect();
    if table {
        return (200, to_table(&items, metadata, query));
    }
    (
        200,
        json!({
            "kind": format!("{}List", t.kind),
            "apiVersion": t.gv(version),
            "metadata": metadata,
            "items": items,
        }),
    )
}

fn encode_continue(epoch: u64, ns: &str, name: &str) -> String {
    let raw = json!({"epoch": epoch.to_string(), "namespace": ns, "name": name}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str, epoch: u64) -> Option<(String, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).ok()?;
    let value: Value = serde_json::from_slice(&raw).ok()?;
    if value.get("epoch")?.as_str()? != epoch.to_string() {
        return None;
    }
    Some((value.get("namespace")?.as_str()?.to_string(), value.get("name")?.as_str()?.to_string()))
}

fn to_table(items: &[Value], metadata: Map<String, Value>, query: &Query) -> Value {
    let include = query.get("includeObject").unwrap_or("Metadata");
    let rows: Vec<Value> = items
        .iter()
        .map(|object| {
            let mut row =
                json!({"cells": [meta_str(object, "name"), age(meta_str(object, "creationTimestamp"))]});
            match include {
                "None" => {}
                "Object" => row["object"] = object.clone(),
                _ => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
                    })
                }
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [
            {
                "name": "Name",
                "type": "string",
                "format": "name",
                "description": "Name must be unique within a namespace. Is required when creating resources, \
                    although some resources may allow a client to request the generation of an appropriate \
                    name automatically. Name is primarily intended for creation idempotence and \
                    configuration definition. Cannot be updated.",
                "priority": 0
            },
            {
                "name": "Age",
                "type": "string",
                "format": "",
                "description": "CreationTimestamp is a timestamp representing the server time when this \
                    object was created.",
                "priority": 0
            }
        ],
        "rows": rows,
    })
}

/// kubectl's human-readable age of a creation timestamp, "<unknown>" without one.
fn age(creation: &str) -> String {
    let Ok(ts) = creation.parse::<k8s_openapi::jiff::Timestamp>() else {
        return "<unknown>".to_string();
    };
    let secs = k8s_openapi::jiff::Timestamp::now().duration_since(ts).as_secs();
    human_duration(secs)
}

fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    let (minutes, hours, days) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if minutes < 10 {
        match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        }
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        }
    } else if hours < 24 * 365 * 2 {
        format!("{days}d")
    } else if hours < 24 * 365 * 8 {
        match days % 365 {
            0 => format!("{}y", days / 365),
            d => format!("{}y{d}d", days / 365),
        }
    } else {
        format!("{}y", days / 365)
    }
}

// ---------------------------------------------------------------------------------------------
// Selectors

#[derive(Debug, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

impl LabelReq {
    fn matches(&self, object: &Value) -> bool {
        let label = |k: &str| {
            object
                .get("metadata")
                .and_then(|m| m.get("labels"))
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
        };
        match self {
            LabelReq::Eq(k, v) => label(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => label(k) != Some(v.as_str()),
            LabelReq::Exists(k) => label(k).is_some(),
            LabelReq::NotExists(k) => label(k).is_none(),
            LabelReq::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
        }
    }
}

fn valid_key(k: &str) -> bool {
    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn valid_value(v: &str) -> bool {
    v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn parse_label_selector(selector: &str) -> Result<Vec<LabelReq>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&selector[start..]);
    let bad = |part: &str| format!("unable to parse requirement: invalid label selector: {part:?}");
    let mut reqs = Vec::new();
    for part in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        let req = if let Some(key) = part.strip_prefix('!') {
            LabelReq::NotExists(key.trim().to_string())
        } else if let Some(open) = part.find('(') {
            let Some(inner) = part[open + 1..].strip_suffix(')') else { return Err(bad(part)) };
            let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
            let mut head = part[..open].split_whitespace();
            let (Some(key), Some(op), None) = (head.next(), head.next(), head.next()) else {
                return Err(bad(part));
            };
            if values.iter().any(|v| !valid_value(v)) {
                return Err(bad(part));
            }
            match op {
                "in" => LabelReq::In(key.to_string(), values),
                "notin" => LabelReq::NotIn(key.to_string(), values),
                _ => return Err(bad(part)),
            }
        } else if let Some((k, v)) = part.split_once("!=") {
            LabelReq::NotEq(k.trim().to_string(), v.trim().to_string())
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
        } else {
            LabelReq::Exists(part.to_string())
        };
        let (key, value) = match &req {
            LabelReq::Eq(k, v) | LabelReq::NotEq(k, v) => (k, Some(v)),
            LabelReq::Exists(k) | LabelReq::NotExists(k) | LabelReq::In(k, _) | LabelReq::NotIn(k, _) => {
                (k, None)
            }
        };
        if !valid_key(key) || value.is_some_and(|v| !valid_value(v)) {
            return Err(bad(part));
        }
        reqs.push(req);
    }
    Ok(reqs)
}

#[derive(Debug)]
struct FieldReq {
    field: String,
    value: String,
    equal: bool,
}

impl FieldReq {
    fn matches(&self, namespace: &str, name: &str) -> bool {
        let actual = if self.field == "metadata.name" { name } else { namespace };
        (actual == self.value) == self.equal
    }
}

fn parse_field_selector(selector: &str) -> Result<Vec<FieldReq>, String> {
    let mut reqs = Vec::new();
    for part in selector.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (field, value, equal) = if let Some((f, v)) = part.split_once("!=") {
            (f, v, false)
        } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            (f, v, true)
        } else {
            return Err(format!("invalid selector: '{selector}'; can't understand '{part}'"));
        };
        let field = field.trim();
        if field != "metadata.name" && field != "metadata.namespace" {
            return Err(format!("field label not supported: {field}"));
        }
        reqs.push(FieldReq { field: field.to_string(), value: value.trim().to_string(), equal });
    }
    Ok(reqs)
}
