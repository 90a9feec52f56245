//! Checks the fake API server against the real clients: the `kube` crate and `kubectl`.

use crate::fake_kube::FakeKube;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn configmap(ns: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "data": {"key": name},
    })
}

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false},
                {"name": "v1", "served": true, "storage": true},
                {"name": "v2", "served": false, "storage": false}
            ]
        }
    })
}

fn fixture() -> Vec<Value> {
    vec![
        configmap("default", "web-config", json!({"app": "web", "tier": "front"})),
        configmap("default", "api-config", json!({"app": "api", "tier": "back", "legacy": "true"})),
        configmap("default", "db-config", json!({"app": "db"})),
        configmap("other", "other-config", json!({"app": "web"})),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}}}
        }),
        json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system"},
            "spec": {"path": "./apps", "prune": true, "interval": "10m",
                     "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}
        }),
        crd(),
        json!({
            "apiVersion": "example.com/v1alpha1",
            "kind": "Widget",
            "metadata": {"name": "gizmo", "namespace": "default"},
            "spec": {"size": 3}
        }),
    ]
}

fn client(fake: &FakeKube) -> kube::Client {
    fluxplan::tls::install_crypto_provider();
    kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap()
}

fn api_error(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    items.iter().map(|o| o.meta().name.clone().unwrap()).collect()
}

// ------------------------------------------------------------------------------------------------
// kubectl

/// Runs the real kubectl (found on PATH; the test fails without it) against the fake.
fn kubectl(fake: &FakeKube, dir: &Path, args: &[&str]) -> std::process::Output {
    let program = fluxplan::sandbox::resolve_program("kubectl")
        .expect("kubectl is needed to check the fake API server against a real client; install it");
    let kubeconfig = fake.kubeconfig(dir);
    let output = Command::new(program)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(["--request-timeout", "20s"])
        .args(args)
        .env("HOME", dir)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kubectl");
    output
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn kubectl_get_names() {
    let fake = FakeKube::start(fixture());
    let dir = tempfile::tempdir().unwrap();
    let out = kubectl(&fake, dir.path(), &["get", "configmaps", "-n", "default", "-o", "name"]);
    assert!(out.status.success(), "kubectl failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout(&out), "configmap/api-config\nconfigmap/db-config\nconfigmap/web-config\n");
    let requests = fake.requests();
    assert!(
        requests.iter().any(|(m, p)| m == "GET" && p.starts_with("/api/v1/namespaces/default/configmaps")),
        "{requests:?}"
    );

    // The CRD-defined type through discovery, by short name, with a label selector.
    let out = kubectl(&fake, dir.path(), &["get", "wd", "-A", "-o", "name"]);
    assert!(out.status.success(), "kubectl failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout(&out), "widget.example.com/gizmo\n");
    let out = kubectl(&fake, dir.path(), &["get", "cm", "-A", "-l", "app=web", "-o", "name"]);
    assert!(out.status.success(), "kubectl failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout(&out), "configmap/web-config\nconfigmap/other-config\n");
}

#[test]
fn kubectl_table_output() {
    let mut objects = fixture();
    let created = k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_hours(50);
    objects.push(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "aged", "namespace": "default", "creationTimestamp": created.to_string()},
    }));
    let fake = FakeKube::start(objects);
    let dir = tempfile::tempdir().unwrap();
    let out = kubectl(&fake, dir.path(), &["get", "configmaps", "-n", "default"]);
    assert!(out.status.success(), "kubectl failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = stdout(&out);
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        lines,
        vec![
            vec!["NAME", "AGE"],
            vec!["aged", "2d2h"],
            vec!["api-config", "<unknown>"],
            vec!["db-config", "<unknown>"],
            vec!["web-config", "<unknown>"],
        ],
        "{text}"
    );

    // A single object, and the 404 and 403 errors as kubectl prints them.
    let out = kubectl(&fake, dir.path(), &["get", "deployment", "web", "-n", "default"]);
    assert!(out.status.success(), "kubectl failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout(&out).lines().nth(1).unwrap().starts_with("web "), "{}", stdout(&out));
    let out = kubectl(&fake, dir.path(), &["get", "configmap", "missing", "-n", "default"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Error from server (NotFound): configmaps \"missing\" not found"), "{stderr}");
    fake.forbid("list", "apps", "deployments");
    let out = kubectl(&fake, dir.path(), &["get", "deployments", "-n", "default"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "Error from server (Forbidden): deployments.apps is forbidden: User \
             \"system:serviceaccount:flux-system:fluxplan\" cannot list resource \"deployments\" in API \
             group \"apps\" in the namespace \"default\""
        ),
        "{stderr}"
    );
}

// ------------------------------------------------------------------------------------------------
// kube crate

#[tokio::test]
async fn kube_label_and_field_selectors() {
    let fake = FakeKube::start(fixture());
    let cms: Api<ConfigMap> = Api::namespaced(client(&fake), "default");
    let list = |selector: &'static str| {
        let cms = cms.clone();
        async move { names(&cms.list(&ListParams::default().labels(selector)).await.unwrap().items) }
    };
    assert_eq!(list("app=web").await, ["web-config"]);
    assert_eq!(list("app==api").await, ["api-config"]);
    assert_eq!(list("app!=web").await, ["api-config", "db-config"]);
    assert_eq!(list("tier").await, ["api-config", "web-config"]);
    assert_eq!(list("!tier").await, ["db-config"]);
    assert_eq!(list("app in (web, db)").await, ["db-config", "web-config"]);
    assert_eq!(list("app notin (web,db)").await, ["api-config"]);
    assert_eq!(list("tier,!legacy,app in (web,api)").await, ["web-config"]);
    assert_eq!(list("tier notin (front)").await, ["api-config", "db-config"]);

    let by_field = cms.list(&ListParams::default().fields("metadata.name=db-config")).await.unwrap();
    assert_eq!(names(&by_field.items), ["db-config"]);
    let all: Api<ConfigMap> = Api::all(client(&fake));
    let other = all.list(&ListParams::default().fields("metadata.namespace==other")).await.unwrap();
    assert_eq!(names(&other.items), ["other-config"]);
    let everywhere = all.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&everywhere.items), ["api-config", "db-config", "web-config", "other-config"]);

    let err = api_error(cms.list(&ListParams::default().labels("app in web")).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"), "{err:?}");
    let err = api_error(cms.list(&ListParams::default().fields("spec.x=1")).await.unwrap_err());
    assert_eq!(err.code, 400, "{err:?}");
}

#[tokio::test]
async fn kube_pagination() {
    let objects: Vec<Value> =
        (0..1200).map(|i| configmap("bulk", &format!("cm-{i:04}"), json!({"i": i.to_string()}))).collect();
    let fake = FakeKube::start(objects);
    let cms: Api<ConfigMap> = Api::namespaced(client(&fake), "bulk");
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(500);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = cms.list(&params).await.unwrap();
        pages.push((page.items.len(), page.metadata.remaining_item_count));
        seen.extend(names(&page.items));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
        assert!(pages.len() < 10, "pagination does not end");
    }
    assert_eq!(pages, [(500, Some(700)), (500, Some(200)), (200, None)]);
    let expected: Vec<String> = (0..1200).map(|i| format!("cm-{i:04}")).collect();
    assert_eq!(seen, expected);
    let continued = fake.requests().iter().filter(|(_, p)| p.contains("continue=")).count();
    assert_eq!(continued, 2);

    // Tokens: malformed, from another server, and expired all answer 410 Expired.
    let first = cms.list(&ListParams::default().limit(500)).await.unwrap();
    let token = first.metadata.continue_.unwrap();
    for bad in ["not-a-token", "e30"] {
        let err =
            api_error(cms.list(&ListParams::default().limit(500).continue_token(bad)).await.unwrap_err());
        assert_eq!((err.code, err.reason.as_str()), (410, "Expired"), "{err:?}");
    }
    let other =
        FakeKube::start((0..600).map(|i| configmap("bulk", &format!("cm-{i:04}"), json!({}))).collect());
    let other_cms: Api<ConfigMap> = Api::namespaced(client(&other), "bulk");
    let err = api_error(
        other_cms.list(&ListParams::default().limit(500).continue_token(&token)).await.unwrap_err(),
    );
    assert_eq!(err.code, 410, "{err:?}");
    assert!(cms.list(&ListParams::default().limit(500).continue_token(&token)).await.is_ok());
    fake.expire_continue_tokens();
    let err =
        api_error(cms.list(&ListParams::default().limit(500).continue_token(&token)).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (410, "Expired"), "{err:?}");
}

#[tokio::test]
async fn kube_errors() {
    let fake = FakeKube::start(fixture());
    let client = client(&fake);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    assert_eq!(names(&deployments.list(&ListParams::default()).await.unwrap().items), ["web"]);

    fake.forbid("list", "apps", "deployments");
    let err = api_error(deployments.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"), "{err:?}");
    assert_eq!(
        err.message,
        "deployments.apps is forbidden: User \"system:serviceaccount:flux-system:fluxplan\" cannot list \
         resource \"deployments\" in API group \"apps\" in the namespace \"default\""
    );
    let details = err.details.as_ref().unwrap();
    assert_eq!((details.group.as_str(), details.kind.as_str()), ("apps", "deployments"));
    let err =
        api_error(Api::<Deployment>::all(client.clone()).list(&ListParams::default()).await.unwrap_err());
    assert!(err.message.ends_with("in API group \"apps\" at the cluster scope"), "{}", err.message);
    // Only the verb that was forbidden.
    assert_eq!(deployments.get("web").await.unwrap().metadata.name.as_deref(), Some("web"));
    fake.forbid("get", "", "configmaps");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let err = api_error(cms.get("web-config").await.unwrap_err());
    assert_eq!(err.code, 403);
    assert!(err.message.starts_with("configmaps \"web-config\" is forbidden"), "{}", err.message);
    assert_eq!(cms.list(&ListParams::default()).await.unwrap().items.len(), 3);

    let err = api_error(deployments.get("missing").await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (404, "NotFound"), "{err:?}");
    assert_eq!(err.message, "deployments.apps \"missing\" not found");
    assert_eq!(err.details.as_ref().unwrap().name, "missing");

    let new = serde_json::from_value::<ConfigMap>(configmap("default", "new", json!({}))).unwrap();
    let err = api_error(cms.create(&PostParams::default(), &new).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (405, "MethodNotAllowed"), "{err:?}");
    let err = api_error(deployments.delete("web", &Default::default()).await.unwrap_err());
    assert_eq!(err.code, 405);
    let requests = fake.requests();
    assert!(
        requests.iter().any(|(m, p)| m == "POST" && p.starts_with("/api/v1/namespaces/default/configmaps")),
        "{requests:?}"
    );
    assert!(requests
        .iter()
        .any(|(m, p)| m == "DELETE" && p.starts_with("/apis/apps/v1/namespaces/default/deployments/web")));

    // An unknown resource or group version.
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("nope.io", "v1", "Thing"), "things");
    let err = api_error(
        Api::<DynamicObject>::all_with(client, &ar).list(&ListParams::default()).await.unwrap_err(),
    );
    assert_eq!(err.code, 404);
}

#[tokio::test]
async fn kube_discovery_and_versions() {
    let fake = FakeKube::start(fixture());
    let client = client(&fake);
    let discovery = kube::discovery::Discovery::new(client.clone()).run().await.unwrap();
    let groups: BTreeSet<&str> = discovery.groups().map(|g| g.name()).collect();
    for g in ["", "apps", "kustomize.toolkit.fluxcd.io", "source.toolkit.fluxcd.io", "example.com"] {
        assert!(groups.contains(g), "{g:?} missing from {groups:?}");
    }
    let ks = discovery.get("kustomize.toolkit.fluxcd.io").unwrap();
    assert_eq!(ks.versions().collect::<Vec<_>>(), ["v1", "v1beta2", "v1beta1"]);
    let example = discovery.get("example.com").unwrap();
    assert_eq!(example.versions().collect::<Vec<_>>(), ["v1", "v1alpha1"]);
    let (widget, caps) = example.recommended_kind("Widget").unwrap();
    assert_eq!((widget.plural.as_str(), widget.version.as_str()), ("widgets", "v1"));
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    let core = discovery.get("").unwrap();
    let (ns, caps) = core.recommended_kind("Namespace").unwrap();
    assert_eq!((ns.plural.as_str(), caps.scope), ("namespaces", kube::discovery::Scope::Cluster));

    // Stored at v1alpha1, served at every served version.
    let widgets =
        Api::<DynamicObject>::all_with(client.clone(), &widget).list(&ListParams::default()).await.unwrap();
    assert_eq!(widgets.items.len(), 1);
    assert_eq!(widgets.items[0].types.as_ref().unwrap().api_version, "example.com/v1");
    assert_eq!(widgets.items[0].data["spec"]["size"], 3);
    let old = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kustomize.toolkit.fluxcd.io", "v1beta2", "Kustomization"),
        "kustomizations",
    );
    let apps =
        Api::<DynamicObject>::namespaced_with(client.clone(), "flux-system", &old).get("apps").await.unwrap();
    assert_eq!(apps.types.unwrap().api_version, "kustomize.toolkit.fluxcd.io/v1beta2");
    // A version the CRD does not serve is not found.
    let v2 =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v2", "Widget"), "widgets");
    let err = api_error(
        Api::<DynamicObject>::all_with(client.clone(), &v2).list(&ListParams::default()).await.unwrap_err(),
    );
    assert_eq!(err.code, 404);

    // Raw shapes of /version and the list envelope.
    let info = client.apiserver_version().await.unwrap();
    assert_eq!((info.major.as_str(), info.minor.as_str(), info.git_version.as_str()), ("1", "33", "v1.33.0"));

    // put(): a new object and a CRD added while running.
    fake.put(configmap("default", "late", json!({"app": "late"})));
    fake.put(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.late.io"},
        "spec": {"group": "late.io", "scope": "Cluster",
                 "names": {"plural": "gadgets", "kind": "Gadget"},
                 "versions": [{"name": "v1beta1", "served": true, "storage": true}]}
    }));
    fake.put(json!({"apiVersion": "late.io/v1beta1", "kind": "Gadget", "metadata": {"name": "g1"}}));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let late = cms.list(&ListParams::default().labels("app=late")).await.unwrap();
    assert_eq!(names(&late.items), ["late"]);
    let discovery = kube::discovery::Discovery::new(client.clone()).run().await.unwrap();
    let (gadget, caps) = discovery.get("late.io").unwrap().recommended_kind("Gadget").unwrap();
    assert_eq!(caps.scope, kube::discovery::Scope::Cluster);
    let gadgets = Api::<DynamicObject>::all_with(client, &gadget).list(&ListParams::default()).await.unwrap();
    assert_eq!(gadgets.items.iter().map(|o| o.metadata.name.clone().unwrap()).collect::<Vec<_>>(), ["g1"]);
}
