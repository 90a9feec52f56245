//! The live cluster view against the fake API server: inventories (v1 and v1beta1), batched and
//! paginated reads, 403s, a dead server, blast radius, drift, and nothing but GET requests.

use crate::fake_kube::FakeKube;
use crate::fixture::{fluxplan_bin, Repo};
use fluxplan::cluster::kube::{KubeCluster, KubeOptions};
use fluxplan::cluster::snapshot::ClusterSnapshot;
use fluxplan::flux::ObjectId;
use serde_json::{json, Value};
use std::process::Command;

const OWNER: &str = "apps";

fn labels(owner: &str) -> Value {
    json!({"kustomize.toolkit.fluxcd.io/name": owner, "kustomize.toolkit.fluxcd.io/namespace": "flux-system"})
}

/// A live object applied by kustomize-controller for `owner`.
fn live(api_version: &str, kind: &str, namespace: &str, name: &str, owner: &str, body: Value) -> Value {
    let mut object = json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "labels": labels(owner), "uid": format!("uid-{name}"), "resourceVersion": "7"},
    });
    if !namespace.is_empty() {
        object["metadata"]["namespace"] = json!(namespace);
    }
    if let (Some(target), Some(body)) = (object.as_object_mut(), body.as_object()) {
        for (k, v) in body {
            target.insert(k.clone(), v.clone());
        }
    }
    object
}

fn kustomization(api_version: &str, name: &str, path: &str, status: Value) -> Value {
    json!({
        "apiVersion": format!("kustomize.toolkit.fluxcd.io/{api_version}"), "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "10m", "path": path, "prune": true, "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": status,
    })
}

fn inventory(ids: &[&str]) -> Value {
    json!({"inventory": {"entries": ids.iter().map(|id| json!({"id": id, "v": "v1"})).collect::<Vec<_>>()}})
}

const WEB: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.26\n";

/// The repository: root flux-system and `apps` rendering a Namespace and a Deployment.
fn repo() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/web.yaml", WEB);
    repo.commit("base");
    repo
}

/// The cluster as Flux left it after applying the base, plus what an operator changed since.
fn cluster_objects() -> Vec<Value> {
    let deployment_fields = json!({"f:metadata": {"f:labels": {}}, "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {
        "f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}});
    vec![
        kustomization(
            "v1",
            OWNER,
            "./apps",
            inventory(&[
                "_shop__Namespace",
                "shop_web_apps_Deployment",
                "shop_stale__ConfigMap",
                "shop_keep-me__ConfigMap",
            ]),
        ),
        live("v1", "Namespace", "", "shop", OWNER, json!({})),
        live(
            "apps/v1",
            "Deployment",
            "shop",
            "web",
            OWNER,
            json!({
                "spec": {"replicas": 5, "progressDeadlineSeconds": 600,
                    "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.26", "imagePullPolicy": "IfNotPresent"}]}}},
                "status": {"readyReplicas": 5},
            }),
        ),
        live("v1", "ConfigMap", "shop", "stale", OWNER, json!({"data": {"a": "1"}})),
        {
            let mut object = live("v1", "ConfigMap", "shop", "keep-me", OWNER, json!({}));
            object["metadata"]["annotations"] = json!({"kustomize.toolkit.fluxcd.io/prune": "disabled"});
            object
        },
        // Not Flux's: what lives in the Namespace besides.
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "shop"}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-2", "namespace": "shop"}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "shop"}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-data"},
            "spec": {"claimRef": {"namespace": "shop", "name": "data"}, "persistentVolumeReclaimPolicy": "Delete"}}),
    ]
    .into_iter()
    .map(|mut o| {
        if o["kind"] == "Deployment" {
            o["metadata"]["managedFields"] = json!([
                {"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": deployment_fields},
                {"manager": "kubectl-scale", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]);
        }
        o
    })
    .collect()
}

pub(crate) fn read(fake: &FakeKube) -> (ClusterSnapshot, usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let config = kube::Config::new(fake.url().parse().unwrap());
        fluxplan::tls::install_crypto_provider();
        let client = kube::Client::try_from(config).unwrap();
        let cluster = KubeCluster::with_client(client, KubeOptions::default()).await.unwrap();
        (cluster.snapshot().await.unwrap(), cluster.request_count())
    })
}

pub(crate) fn assert_only_gets(fake: &FakeKube) {
    let others: Vec<_> = fake.requests().into_iter().filter(|(method, _)| method != "GET").collect();
    assert!(others.is_empty(), "requests other than GET: {others:?}");
}

fn ids(snapshot: &ClusterSnapshot, name: &str) -> Vec<String> {
    let reference = fluxplan::flux::KustomizationRef { namespace: "flux-system".into(), name: name.into() };
    snapshot.kustomizations[&reference].inventory.iter().map(ToString::to_string).collect()
}

/// `fluxplan plan --kube` through the binary against the fake; returns the JSON plan and exit code.
pub(crate) fn plan_kube(repo: &Repo, fake: &FakeKube, extra: &[&str]) -> (Value, i32) {
    let dir = tempfile::tempdir().unwrap();
    plan_with_kubeconfig(repo, &fake.kubeconfig(dir.path()), extra)
}

/// Like `plan_kube`, with any kubeconfig.
fn plan_with_kubeconfig(repo: &Repo, kubeconfig: &std::path::Path, extra: &[&str]) -> (Value, i32) {
    let (stdout, stderr, code) = plan_as(repo, kubeconfig, "json", extra);
    let plan = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    (plan, code)
}

/// The plan of `HEAD~1..HEAD` against the fake API server, in `format`.
pub(crate) fn plan_kube_as(repo: &Repo, fake: &FakeKube, format: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    plan_as(repo, &fake.kubeconfig(dir.path()), format, &[]).0
}

/// stdout, stderr and exit code of `fluxplan plan --kube` in `format`.
pub(crate) fn plan_as(
    repo: &Repo,
    kubeconfig: &std::path::Path,
    format: &str,
    extra: &[&str],
) -> (String, String, i32) {
    let out = Command::new(fluxplan_bin())
        .args([
            "plan",
            "--no-cache",
            "--kube",
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
            "--format",
            format,
            "--repo",
        ])
        .arg(repo.path())
        .args(extra)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (String::from_utf8(out.stdout).unwrap(), stderr, out.status.code().unwrap())
}

fn changes_of(plan: &Value, name: &str) -> Vec<(String, String)> {
    plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == name)
        .unwrap_or_else(|| panic!("{name} not planned"))["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["action"].as_str().unwrap().to_string(), c["id"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn reads_v1_inventories_and_live_objects_with_gets_only() {
    let fake = FakeKube::start(cluster_objects());
    let (snapshot, requests) = read(&fake);
    assert_eq!(
        ids(&snapshot, OWNER),
        vec![
            "_shop__Namespace",
            "shop_keep-me__ConfigMap",
            "shop_stale__ConfigMap",
            "shop_web_apps_Deployment"
        ]
    );
    let deployment = &snapshot.objects[&ObjectId::new("shop", "web", "apps", "Deployment")];
    assert_eq!(deployment["spec"]["replicas"], 5);
    assert!(snapshot.namespaces.contains("shop"));
    assert!(snapshot.warnings.is_empty(), "{:?}", snapshot.warnings);
    assert!(requests <= 8, "{requests} requests for 4 objects of 3 kinds");
    assert_only_gets(&fake);
    // The snapshot file written from the cluster reads back the same.
    let again = ClusterSnapshot::parse(&snapshot.to_yaml()).unwrap();
    assert_eq!(ids(&again, OWNER), ids(&snapshot, OWNER));
}

#[test]
fn v1beta1_inventories_are_found_through_owner_labels() {
    let mut objects = cluster_objects();
    objects[0] = kustomization(
        "v1beta1",
        OWNER,
        "./apps",
        json!({"snapshot": {"checksum": "abc", "entries": [
            {"namespace": "shop", "kinds": {"apps/v1, Kind=Deployment": "Deployment", "v1, Kind=ConfigMap": "ConfigMap"}},
            {"namespace": "", "kinds": {"v1, Kind=Namespace": "Namespace"}}]}}),
    );
    objects.push(live("v1", "ConfigMap", "shop", "someone-elses", "infra", json!({})));
    let fake = FakeKube::start(objects);
    let (snapshot, _) = read(&fake);
    assert_eq!(
        ids(&snapshot, OWNER),
        vec![
            "_shop__Namespace",
            "shop_keep-me__ConfigMap",
            "shop_stale__ConfigMap",
            "shop_web_apps_Deployment"
        ]
    );
    assert_only_gets(&fake);
}

#[test]
fn thousands_of_objects_cost_one_paginated_list_per_kind_and_namespace() {
    let names: Vec<String> = (0..1200).map(|i| format!("cm-{i:04}")).collect();
    let ids: Vec<String> = names.iter().map(|n| format!("bulk_{n}__ConfigMap")).collect();
    let mut objects = vec![kustomization(
        "v1",
        "bulk",
        "./bulk",
        inventory(&ids.iter().map(String::as_str).collect::<Vec<_>>()),
    )];
    objects.extend(
        names.iter().map(|n| live("v1", "ConfigMap", "bulk", n, "bulk", json!({"data": {"k": "v"}}))),
    );
    let fake = FakeKube::start(objects);
    let (snapshot, requests) = read(&fake);
    assert_eq!(snapshot.objects.len(), 1200);
    let config_map_lists = fake
        .requests()
        .iter()
        .filter(|(_, path)| path.starts_with("/api/v1/namespaces/bulk/configmaps?"))
        .count();
    assert_eq!(config_map_lists, 3, "1,200 objects in pages of 500");
    assert!(requests < 10, "{requests} requests");
    assert_only_gets(&fake);
}

#[test]
fn a_forbidden_kind_is_named_and_planned_as_unknown() {
    let fake = FakeKube::start(cluster_objects());
    fake.forbid("list", "apps", "deployments");
    let (snapshot, _) = read(&fake);
    assert!(
        snapshot.warnings.iter().any(|w| w.contains("deployments.apps") && w.contains("list")),
        "{:?}",
        snapshot.warnings
    );
    assert!(snapshot.is_unreadable(&ObjectId::new("shop", "web", "apps", "Deployment")));
    let repo = repo();
    repo.write("apps/web.yaml", &WEB.replace("nginx:1.26", "nginx:1.27"));
    repo.commit("bump");
    let (plan, _) = plan_kube(&repo, &fake, &[]);
    let warnings: Vec<&str> = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["code"] == "cluster-read-incomplete")
        .map(|a| a["message"].as_str().unwrap())
        .collect();
    assert!(warnings.iter().any(|m| m.contains("deployments.apps")), "{warnings:?}");
    assert_only_gets(&fake);
}

#[test]
fn a_dead_cluster_gives_a_degraded_offline_plan() {
    let repo = repo();
    repo.write("apps/web.yaml", &WEB.replace("nginx:1.26", "nginx:1.27"));
    repo.commit("bump");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = {
        let fake = FakeKube::start(Vec::new());
        fake.kubeconfig(dir.path())
        // dropped here: nothing listens on that port any more
    };
    let (plan, code) = plan_with_kubeconfig(&repo, &kubeconfig, &[]);
    assert_eq!(code, 1, "offline, the image bump is a change");
    assert!(plan["degraded"].as_str().unwrap().contains("unreachable"), "{}", plan["degraded"]);
    assert_eq!(plan["alerts"][0]["code"], "cluster-unreachable");
    assert_eq!(
        changes_of(&plan, "apps"),
        vec![("update".to_string(), "shop_web_apps_Deployment".to_string())]
    );
}

#[test]
fn live_inventory_drives_the_prune_set_with_drift_and_skips() {
    let fake = FakeKube::start(cluster_objects());
    let repo = repo();
    repo.write("apps/web.yaml", &WEB.replace("nginx:1.26", "nginx:1.27"));
    repo.commit("bump");
    let (plan, code) = plan_kube(&repo, &fake, &[]);
    assert_eq!(code, 1);
    // The stale entry only the cluster knows is deleted; the protected one is skipped.
    assert_eq!(
        changes_of(&plan, OWNER),
        vec![
            ("update".to_string(), "shop_web_apps_Deployment".to_string()),
            ("delete".to_string(), "shop_stale__ConfigMap".to_string()),
            ("skip".to_string(), "shop_keep-me__ConfigMap".to_string()),
        ]
    );
    let apps = plan["kustomizations"].as_array().unwrap().iter().find(|k| k["name"] == OWNER).unwrap();
    assert_eq!(apps["inventory_source"], "cluster");
    // The stale entry is not this pull request's doing, and says so.
    let stale = apps["changes"].as_array().unwrap().iter().find(|c| c["action"] == "delete").unwrap();
    assert_eq!(stale["cause"], "stale");
    assert_eq!(plan["deletions"], json!({"pull-request": 0, "cascade": 0, "stale": 1}));
    // What the PR changes (base → head), apart from the drift that was there before it (live →
    // base), and what the merge does to the live object (live → head).
    let change = apps["changes"].as_array().unwrap().iter().find(|c| c["action"] == "update").unwrap();
    let pr = change["diff"].as_str().unwrap();
    assert!(pr.contains("-      - image: nginx:1.26") && !pr.contains("replicas"), "{pr}");
    let drift = apps["drift"][0]["diff"].as_str().unwrap();
    assert!(drift.starts_with("--- live\n+++ base\n"), "{drift}");
    assert!(drift.contains("-  replicas: 5\n+  replicas: 2\n") && !drift.contains("nginx:1.27"), "{drift}");
    assert!(!drift.contains("imagePullPolicy") && !drift.contains("progressDeadlineSeconds"), "{drift}");
    let after = apps["drift"][0]["after_merge"].as_str().unwrap();
    assert!(
        after.starts_with("--- live\n+++ head\n")
            && after.contains("replicas: 2")
            && after.contains("nginx:1.27"),
        "{after}"
    );
    assert_only_gets(&fake);
}

#[test]
fn deleting_a_namespace_shows_its_blast_radius() {
    let fake = FakeKube::start(cluster_objects());
    let repo = repo();
    repo.write("apps/web.yaml", "");
    repo.config_map("apps/other.yaml", "other", "default");
    repo.commit("remove the shop");
    let (plan, code) = plan_kube(&repo, &fake, &[]);
    assert_eq!(code, 2);
    let radius = &plan["blast_radius"]["clusters/prod"];
    assert_eq!(radius["namespaces"]["shop"]["Pod"], 2);
    assert_eq!(radius["namespaces"]["shop"]["PersistentVolumeClaim"], 1);
    // One cause, one alert: the deletion of the shop, with what goes with it and the data lost.
    let alerts = plan["alerts"].as_array().unwrap();
    let danger: Vec<&Value> = alerts.iter().filter(|a| a["severity"] == "danger").collect();
    assert_eq!(danger.len(), 1, "{alerts:?}");
    assert_eq!(danger[0]["code"], "data-loss");
    assert!(danger[0]["related_codes"].as_array().unwrap().contains(&json!("protected-kind-deletion")));
    let message = danger[0]["message"].as_str().unwrap();
    assert!(message.contains("2 Pod") && message.contains("claim shop/data"), "{message}");
    let namespace = plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|k| k["changes"].as_array().unwrap())
        .find(|c| c["kind"] == "Namespace" && c["action"] == "delete")
        .unwrap_or_else(|| panic!("{:#}", plan["kustomizations"]));
    let takes = namespace["takes_with_it"].as_array().unwrap();
    assert!(takes[0].as_str().unwrap().contains("2 Pod"), "{takes:?}");
    assert!(takes[1].as_str().unwrap().contains("claim shop/data"), "{takes:?}");
    assert_only_gets(&fake);
}

#[test]
fn snapshot_command_writes_the_file_and_omits_secret_values() {
    let mut objects = cluster_objects();
    objects[0]["spec"]["postBuild"] = json!({"substituteFrom": [
        {"kind": "ConfigMap", "name": "vars"}, {"kind": "Secret", "name": "creds"}]});
    objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "vars", "namespace": "flux-system"}, "data": {"region": "eu"}}));
    objects.push(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "flux-system"}, "data": {"password": "c3VwZXItc2VjcmV0"}}));
    let fake = FakeKube::start(objects);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake.kubeconfig(dir.path());
    let output = dir.path().join("snapshot.yaml");
    let out = Command::new(fluxplan_bin())
        .args(["snapshot", "--read-secrets", "--cluster", "clusters/prod", "-o"])
        .arg(&output)
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&output).unwrap();
    assert!(
        !text.contains("c3VwZXItc2VjcmV0") && !text.contains("super-secret"),
        "a secret value was written"
    );
    let snapshot = ClusterSnapshot::parse(&text).unwrap();
    assert_eq!(snapshot.cluster.as_deref(), Some("clusters/prod"));
    use fluxplan::cluster::{Lookup, SubstitutionSource};
    assert_eq!(
        snapshot.lookup("ConfigMap", "flux-system", "vars"),
        Lookup::Found([("region".into(), "eu".into())].into())
    );
    assert_eq!(snapshot.lookup("Secret", "flux-system", "creds"), Lookup::Unknown);
    assert_only_gets(&fake);
}

#[test]
fn each_cluster_root_is_planned_against_its_own_cluster() {
    let repo = Repo::bootstrap("staging");
    repo.add_bootstrap("production");
    repo.kustomization("clusters/staging/apps.yaml", "apps", "./apps", "");
    repo.kustomization("clusters/production/apps.yaml", "apps", "./apps", "");
    repo.write("apps/web.yaml", WEB);
    repo.commit("base");
    repo.commit("head");
    let production = FakeKube::start(cluster_objects());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = production.kubeconfig(dir.path());
    let staging_snapshot = dir.path().join("staging.yaml");
    std::fs::write(
        &staging_snapshot,
        "kind: ClusterSnapshot\nkustomizations:\n- apiVersion: kustomize.toolkit.fluxcd.io/v1\n  kind: Kustomization\n  metadata: {name: apps, namespace: flux-system}\n  spec: {path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}\n  status: {inventory: {entries: [{id: shop_only-in-staging__ConfigMap, v: v1}, {id: _shop__Namespace, v: v1}, {id: shop_web_apps_Deployment, v: v1}]}}\n",
    )
    .unwrap();
    let clusters = dir.path().join("clusters.yaml");
    std::fs::write(
        &clusters,
        "clusters:\n  clusters/production:\n    context: fake\n  clusters/staging:\n    snapshot: staging.yaml\n",
    )
    .unwrap();
    let out = Command::new(fluxplan_bin())
        .args(["plan", "--no-cache", "--base", "HEAD~1", "--head", "HEAD", "--format", "json", "--clusters"])
        .arg(&clusters)
        .arg("--repo")
        .arg(repo.path())
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let deletes = |cluster: &str| -> Vec<String> {
        plan["kustomizations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["cluster"] == cluster && k["name"] == "apps")
            .flat_map(|k| k["changes"].as_array().unwrap().iter())
            .filter(|c| c["action"] == "delete")
            .map(|c| c["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(deletes("clusters/production"), vec!["shop_stale__ConfigMap"]);
    assert_eq!(deletes("clusters/staging"), vec!["shop_only-in-staging__ConfigMap"]);
    assert_only_gets(&production);
}

#[test]
fn the_clusters_crds_decide_the_scope_of_custom_resources_the_repository_does_not_define() {
    let mut objects = cluster_objects();
    objects.push(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster", "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}
    }));
    let fake = FakeKube::start(objects);
    let repo = repo();
    repo.write(
        "apps/widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: shop\n",
    );
    repo.commit("add a widget");
    let (plan, _) = plan_kube(&repo, &fake, &[]);
    assert!(changes_of(&plan, OWNER).contains(&("create".to_string(), "_w_example.com_Widget".to_string())));
}

/// Without `--read-secrets`, fluxplan never lists or gets a Secret: not those in inventories,
/// not those substituteFrom names. Their live state is unknown, and the snapshot says why.
#[test]
fn without_read_secrets_no_secret_is_ever_requested() {
    let mut objects = cluster_objects();
    objects[0]["status"]["inventory"]["entries"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "shop_db-password__Secret", "v": "v1"}));
    objects[0]["spec"]["postBuild"] = json!({"substituteFrom": [{"kind": "Secret", "name": "creds"}]});
    objects.push(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-password", "namespace": "shop",
        "labels": {"kustomize.toolkit.fluxcd.io/name": OWNER, "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
        "data": {"password": "c3VwZXItc2VjcmV0"}}));
    objects.push(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "flux-system"}, "data": {"password": "c3VwZXItc2VjcmV0"}}));
    let fake = FakeKube::start(objects);
    let (snapshot, _) = read(&fake);
    let secret_requests: Vec<String> =
        fake.requests().into_iter().map(|(_, path)| path).filter(|path| path.contains("secrets")).collect();
    assert!(secret_requests.is_empty(), "{secret_requests:?}");
    assert!(snapshot.unreadable.contains(&(String::new(), "Secret".to_string(), "shop".to_string())));
    assert!(
        snapshot.warnings.iter().any(|w| w.contains("not read (no --read-secrets)")),
        "{:?}",
        snapshot.warnings
    );

    // With --read-secrets, the inventory's Secret is read (its values dropped).
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let snapshot = runtime.block_on(async {
        let config = kube::Config::new(fake.url().parse().unwrap());
        fluxplan::tls::install_crypto_provider();
        let client = kube::Client::try_from(config).unwrap();
        let options = KubeOptions { read_secrets: true, ..KubeOptions::default() };
        KubeCluster::with_client(client, options).await.unwrap().snapshot().await.unwrap()
    });
    let id = fluxplan::flux::ObjectId::parse("shop_db-password__Secret").unwrap();
    assert!(snapshot.objects.contains_key(&id));
    assert!(!serde_json::to_string(&snapshot.objects[&id]).unwrap().contains("c3VwZXItc2VjcmV0"));
    assert_only_gets(&fake);
}
