//! Argo CD against a live cluster (the fake API server): Applications' `status.resources` are
//! the inventory, argocd-cm's tracking method decides what an Application owns, and nothing but
//! GET requests is ever sent.

use crate::argocd::fleet;
use crate::fake_kube::FakeKube;
use crate::fixture::edit;
use crate::fixture::{changes_of, fluxplan_bin, kustomization_in, plan_json};
use crate::kube_view::{assert_only_gets, plan_kube, read};
use serde_json::{json, Value};

const INSTANCE: &str = "app.kubernetes.io/instance";

pub(crate) fn crd(kind: &str, plural: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.argoproj.io")},
        "spec": {"group": "argoproj.io", "scope": "Namespaced", "names": {"kind": kind, "plural": plural},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true}]}})
}

/// An object Argo CD applied for `app` (tracked by label, as argocd-cm below says).
fn tracked(api_version: &str, kind: &str, namespace: &str, name: &str, app: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": {INSTANCE: app}}})
}

/// A `status.resources` entry.
fn resource(group: &str, kind: &str, namespace: &str, name: &str, requires_pruning: bool) -> Value {
    let mut entry = json!({"group": group, "version": "v1", "kind": kind, "namespace": namespace, "name": name,
        "status": if requires_pruning { "OutOfSync" } else { "Synced" }});
    if requires_pruning {
        entry["requiresPruning"] = json!(true);
    }
    entry
}

/// The live Application of `file` as the base revision (`HEAD~1`) defines it, with `resources` as its
/// status, and `finalizers` as the cluster has them.
fn application(repo: &crate::fixture::Repo, file: &str, resources: Vec<Value>, finalizers: Value) -> Value {
    let text = repo.git(&["show", &format!("HEAD~1:{file}")]);
    let mut app = fluxplan::yaml::parse_documents(&text).unwrap().remove(0);
    app["metadata"]["finalizers"] = finalizers;
    if app["metadata"]["name"] != "root" {
        app["metadata"]["labels"] = json!({INSTANCE: "root"});
    }
    app["status"] = json!({"resources": resources, "sync": {"status": "Synced"}});
    app
}

/// The cluster after Argo CD synced the base, and what changed in it since.
fn cluster(repo: &crate::fixture::Repo) -> Vec<Value> {
    let finalizer = json!(["resources-finalizer.argocd.argoproj.io"]);
    // As Argo CD applied the base, with the replicas an autoscaler moved since: ignoreDifferences
    // says Argo CD does not compare them.
    let base = repo.render(Some("HEAD~1"));
    let rendered =
        base.find("argocd/guestbook").unwrap().objects.iter().find(|o| o.object["kind"] == "Deployment");
    let mut deployment = rendered.unwrap().object.as_ref().clone();
    deployment["metadata"]["labels"][INSTANCE] = json!("guestbook");
    deployment["spec"]["replicas"] = json!(7);
    let mut extraneous = tracked("v1", "ConfigMap", "legacy", "notes", "legacy");
    extraneous["metadata"]["annotations"] = json!({"argocd.argoproj.io/compare-options": "IgnoreExtraneous"});
    let mut untracked = tracked("v1", "ConfigMap", "shop", "handmade", "shop");
    untracked["metadata"]["labels"] = json!({});
    let mut objects = vec![
        crd("Application", "applications"),
        crd("ApplicationSet", "applicationsets"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm", "namespace": "argocd"},
            "data": {"application.resourceTrackingMethod": "label"}}),
        application(
            repo,
            "apps/guestbook.yaml",
            vec![
                resource("apps", "Deployment", "guestbook", "guestbook", false),
                resource("", "Service", "guestbook", "guestbook", false),
                resource("", "PersistentVolumeClaim", "guestbook", "guestbook-data", false),
                resource("", "ConfigMap", "guestbook", "old-config", true),
            ],
            finalizer.clone(),
        ),
        deployment,
        tracked("v1", "Service", "guestbook", "guestbook", "guestbook"),
        tracked("v1", "PersistentVolumeClaim", "guestbook", "guestbook-data", "guestbook"),
        tracked("v1", "ConfigMap", "guestbook", "old-config", "guestbook"),
        // Git gives legacy no finalizer; someone added one in the cluster, and the cluster's wins.
        application(
            repo,
            "apps/legacy.yaml",
            vec![
                resource("", "ConfigMap", "legacy", "legacy-settings", false),
                resource("apps", "Deployment", "legacy", "legacy-web", false),
                resource("", "ConfigMap", "legacy", "notes", true),
            ],
            finalizer.clone(),
        ),
        tracked("v1", "ConfigMap", "legacy", "legacy-settings", "legacy"),
        tracked("apps/v1", "Deployment", "legacy", "legacy-web", "legacy"),
        extraneous,
        application(
            repo,
            "bootstrap/root.yaml",
            vec![
                resource("argoproj.io", "Application", "argocd", "guestbook", false),
                resource("argoproj.io", "Application", "argocd", "legacy", false),
                resource("argoproj.io", "Application", "argocd", "shop", false),
                resource("argoproj.io", "ApplicationSet", "argocd", "platform", false),
            ],
            finalizer.clone(),
        ),
        application(
            repo,
            "apps/shop.yaml",
            vec![
                resource("apps", "Deployment", "shop", "shop", false),
                resource("", "Service", "shop", "shop", false),
                resource("", "ConfigMap", "shop", "shop-settings", false),
                resource("", "ConfigMap", "shop", "handmade", true),
            ],
            json!([]),
        ),
        tracked("apps/v1", "Deployment", "shop", "shop", "shop"),
        tracked("v1", "Service", "shop", "shop", "shop"),
        tracked("v1", "ConfigMap", "shop", "shop-settings", "shop"),
        untracked,
    ];
    // What the ApplicationSet generated, owned by it, with what each deployed.
    for generated in &base.find("argocd/platform").unwrap().objects {
        let mut app = generated.object.as_ref().clone();
        let name = app["metadata"]["name"].as_str().unwrap().to_string();
        app["metadata"]["ownerReferences"] = json!([{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet", "name": "platform", "uid": "u1"}]);
        app["status"] = json!({"resources": [
            resource("apps", "Deployment", &name, &name, false),
            resource("", "Service", &name, &name, false),
        ]});
        objects.push(app);
        objects.push(tracked("apps/v1", "Deployment", &name, &name, &name));
        objects.push(tracked("v1", "Service", &name, &name, &name));
    }
    // The ApplicationSet itself, applied by root.
    let mut platform = base
        .object("argocd/root", "argocd_platform_argoproj.io_ApplicationSet")
        .unwrap()
        .object
        .as_ref()
        .clone();
    platform["metadata"]["labels"] = json!({INSTANCE: "root"});
    objects.push(platform);
    objects
}

#[test]
fn status_resources_are_the_inventory_and_the_tracking_label_decides_what_is_pruned() {
    let repo = fleet();
    edit(&repo, "apps/guestbook.yaml", "nginx:1.27", "nginx:1.28");
    repo.commit("bump guestbook");
    let fake = FakeKube::start(cluster(&repo));
    let (plan, code) = plan_kube(&repo, &fake, &[]);
    assert_only_gets(&fake);
    assert_eq!(code, 1, "{plan}");
    // What root and the ApplicationSet hold is what the cluster holds: nothing to create.
    assert_eq!(changes_of(&plan, "argocd/platform"), []);
    assert_eq!(changes_of(&plan, "argocd/worker"), []);
    let guestbook = kustomization_in(&plan, "argocd/guestbook");
    assert_eq!(guestbook["inventory_source"], "cluster");
    assert_eq!(
        changes_of(&plan, "argocd/guestbook"),
        [
            ("update".to_string(), "guestbook_guestbook_apps_Deployment".to_string()),
            ("delete".to_string(), "guestbook_old-config__ConfigMap".to_string()),
        ]
    );
    // Argo CD prunes it whether or not this merges: not this pull request's doing.
    assert_eq!(guestbook["changes"][1]["cause"], "stale");
    // The replicas an autoscaler moved are ignored by the Application: no drift.
    assert!(guestbook.get("drift").is_none(), "{}", guestbook["drift"]);
    // legacy does not prune: the extraneous ConfigMap stays, and says why it is not OutOfSync.
    let legacy = kustomization_in(&plan, "argocd/legacy");
    assert_eq!(
        changes_of(&plan, "argocd/legacy"),
        [("orphan".to_string(), "legacy_notes__ConfigMap".to_string())]
    );
    assert!(legacy["changes"][0]["reason"].as_str().unwrap().contains("IgnoreExtraneous"));
    // shop prunes, but the object no longer carries its tracking label: Argo CD leaves it.
    let shop = kustomization_in(&plan, "argocd/shop");
    assert_eq!(
        changes_of(&plan, "argocd/shop"),
        [("skip".to_string(), "shop_handmade__ConfigMap".to_string())]
    );
    assert!(shop["changes"][0]["reason"].as_str().unwrap().contains("label app.kubernetes.io/instance"));
}

#[test]
fn the_clusters_finalizer_decides_what_deleting_an_application_does() {
    let repo = fleet();
    repo.remove("apps/legacy.yaml");
    repo.commit("drop legacy");
    let offline = plan_json(&repo, "HEAD~1", "HEAD", &[]).0;
    assert_eq!(changes_of(&offline, "argocd/legacy")[0].0, "orphan", "Git's spec has no finalizer");
    let fake = FakeKube::start(cluster(&repo));
    let (plan, code) = plan_kube(&repo, &fake, &[]);
    assert_only_gets(&fake);
    assert_eq!(code, 2, "{plan}");
    assert_eq!(
        changes_of(&plan, "argocd/legacy"),
        [
            ("delete".to_string(), "legacy_legacy-web_apps_Deployment".to_string()),
            ("delete".to_string(), "legacy_legacy-settings__ConfigMap".to_string()),
            ("delete".to_string(), "legacy_notes__ConfigMap".to_string()),
        ]
    );
}

#[test]
fn the_snapshot_holds_applications_and_the_tracking_method_and_plans_alike() {
    let repo = fleet();
    edit(&repo, "apps/guestbook.yaml", "nginx:1.27", "nginx:1.28");
    repo.commit("bump guestbook");
    let fake = FakeKube::start(cluster(&repo));
    let (snapshot, _) = read(&fake);
    let reference = fluxplan::flux::KustomizationRef { namespace: "argocd".into(), name: "guestbook".into() };
    assert_eq!(snapshot.applications[&reference].inventory.len(), 4);
    assert_eq!(snapshot.applications[&reference].requires_pruning.len(), 1);
    assert_eq!(snapshot.tracking, fluxplan::argocd::tracking::TrackingMethod::Label(INSTANCE.into()));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snapshot.yaml");
    let out = std::process::Command::new(fluxplan_bin())
        .args(["snapshot", "--output"])
        .arg(&file)
        .env("KUBECONFIG", fake.kubeconfig(dir.path()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_only_gets(&fake);
    let (from_file, code) =
        plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", file.to_str().unwrap()]);
    let (live, live_code) = plan_kube(&repo, &fake, &[]);
    assert_eq!((code, &from_file["kustomizations"]), (live_code, &live["kustomizations"]));
}

#[test]
fn a_generated_application_dropped_live_is_deleted_with_what_it_deployed() {
    let repo = fleet();
    repo.remove("services/worker");
    repo.commit("retire the worker");
    let fake = FakeKube::start(cluster(&repo));
    let (plan, code) = plan_kube(&repo, &fake, &[]);
    assert_only_gets(&fake);
    assert_eq!(code, 2, "{plan}");
    assert_eq!(
        changes_of(&plan, "argocd/platform"),
        [("delete".to_string(), "argocd_worker_argoproj.io_Application".to_string())]
    );
    assert_eq!(
        changes_of(&plan, "argocd/worker"),
        [
            ("delete".to_string(), "worker_worker_apps_Deployment".to_string()),
            ("delete".to_string(), "worker_worker__Service".to_string()),
        ]
    );
    assert_eq!(kustomization_in(&plan, "argocd/worker")["inventory_source"], "cluster");
}

#[test]
fn drift_says_which_ignore_differences_rules_it_could_not_apply() {
    let repo = fleet();
    edit(
        &repo,
        "apps/guestbook.yaml",
        "      jsonPointers:\n        - /spec/replicas",
        "      jsonPointers:\n        - /spec/replicas\n      managedFieldsManagers:\n        - team-labeller",
    );
    repo.commit("leave the team label to the labeller");
    edit(&repo, "apps/guestbook.yaml", "nginx:1.27", "nginx:1.28");
    repo.commit("bump guestbook");
    // The labeller moved the Deployment's team: Argo CD ignores what it owns, but fluxplan cannot
    // tell which fields a manager owns, so the drift shows and says so.
    let mut objects = cluster(&repo);
    let deployment = objects
        .iter_mut()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "guestbook")
        .unwrap();
    deployment["metadata"]["labels"]["team"] = json!("platform");
    let fake = FakeKube::start(objects);
    let (plan, code) = plan_kube(&repo, &fake, &[]);
    assert_eq!(code, 1, "{plan}");
    let drift = &kustomization_in(&plan, "argocd/guestbook")["drift"][0];
    assert!(drift["diff"].as_str().unwrap().contains("team: platform"), "{drift}");
    assert_eq!(drift["ignore_rules_not_applied"], json!(["managedFieldsManagers team-labeller"]));
    let note =
        "not applied here, so what they leave alone may show above: managedFieldsManagers team-labeller";
    for format in ["markdown", "text"] {
        let shown = crate::kube_view::plan_kube_as(&repo, &fake, format);
        assert!(shown.contains(note), "{format}: {shown}");
    }
}

/// A 2.x cluster tracks by label without saying so: with `argocd-cm` silent or missing, a
/// label-tracked deletion must still be a deletion (a `skip` would let the plan pass).
#[test]
fn a_cluster_that_does_not_name_its_tracking_method_counts_the_label_too() {
    let repo = fleet();
    edit(&repo, "apps/guestbook.yaml", "nginx:1.27", "nginx:1.28");
    repo.commit("bump guestbook");
    let is_argocd_cm = |o: &Value| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "argocd-cm";
    let silent: Vec<Value> = cluster(&repo)
        .into_iter()
        .map(|mut o| {
            if is_argocd_cm(&o) {
                o["data"] = json!({});
            }
            o
        })
        .collect();
    let missing: Vec<Value> = cluster(&repo).into_iter().filter(|o| !is_argocd_cm(o)).collect();
    for (what, objects) in [("silent", silent), ("missing", missing)] {
        let fake = FakeKube::start(objects);
        let (plan, code) = plan_kube(&repo, &fake, &[]);
        assert_eq!(code, 1, "{what}: {plan}");
        assert_eq!(
            changes_of(&plan, "argocd/guestbook"),
            [
                ("update".to_string(), "guestbook_guestbook_apps_Deployment".to_string()),
                ("delete".to_string(), "guestbook_old-config__ConfigMap".to_string()),
            ],
            "{what}"
        );
        // Still no marker at all: Argo CD leaves it.
        assert_eq!(
            changes_of(&plan, "argocd/shop"),
            [("skip".to_string(), "shop_handmade__ConfigMap".to_string())],
            "{what}"
        );
    }
}
