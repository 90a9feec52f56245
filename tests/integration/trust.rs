//! Plans a reviewer can trust: the pull request's changes apart from drift and stale entries,
//! one alert per cause, dependants that will fail. Golden markdown and JSON per scenario; the
//! cluster is a snapshot of what Flux left after applying the base revision, then changed.

use crate::fixture::{plan_cli, plan_json, Repo};
use serde_json::{json, Value};

/// The cluster as Flux leaves it after applying `rev`: every Kustomization with its inventory,
/// every object as applied, its fields owned by kustomize-controller.
pub(crate) fn cluster_after(repo: &Repo, rev: &str) -> Value {
    let render = repo.render(Some(rev));
    let mut kustomizations = Vec::new();
    let mut objects = Vec::new();
    for k in render.clusters.iter().flat_map(|c| &c.kustomizations) {
        let spec = k.spec.as_ref().expect("rendered Kustomizations have a spec");
        let ids: Vec<String> =
            k.objects.iter().filter_map(|o| o.id.as_ref()).map(|i| i.to_string()).collect();
        kustomizations.push(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": k.name, "namespace": k.namespace},
            "spec": spec.raw["spec"],
            "status": {"inventory": {"entries": ids.iter().map(|id| json!({"id": id, "v": "v1"})).collect::<Vec<_>>()}},
        }));
        for object in &k.objects {
            let mut live = serde_json::Value::clone(&object.object);
            if object.id.as_ref().is_some_and(|id| id.namespace.is_empty()) {
                // The API server keeps no namespace on a cluster-scoped object.
                live["metadata"].as_object_mut().unwrap().remove("namespace");
            }
            let fields = owned_fields(&live);
            live["metadata"]["uid"] = json!(format!("uid-{}", live["metadata"]["name"].as_str().unwrap()));
            live["metadata"]["managedFields"] =
                json!([{"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": fields}]);
            objects.push(live);
        }
    }
    json!({"apiVersion": "fluxplan.dev/v1alpha1", "kind": "ClusterSnapshot", "kustomizations": kustomizations, "objects": objects})
}

/// The fieldsV1 tree of everything an applied manifest sets (lists owned whole).
fn owned_fields(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "name" | "namespace"))
                .map(|(k, v)| (format!("f:{k}"), owned_fields(v)))
                .collect(),
        ),
        _ => json!({}),
    }
}

pub(crate) fn live_object<'a>(cluster: &'a mut Value, kind: &str, name: &str) -> &'a mut Value {
    cluster["objects"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} is not in the cluster"))
}

fn inventory_of<'a>(cluster: &'a mut Value, name: &str) -> &'a mut Vec<Value> {
    cluster["kustomizations"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|k| k["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("Kustomization {name} is not in the cluster"))["status"]["inventory"]
        ["entries"]
        .as_array_mut()
        .unwrap()
}

/// Adds an object Flux applied for `owner` to the cluster and its inventory.
fn add_owned(cluster: &mut Value, owner: &str, id: &str, object: Value) {
    inventory_of(cluster, owner).push(json!({"id": id, "v": "v1"}));
    cluster["objects"].as_array_mut().unwrap().push(object);
}

fn owner_labels(owner: &str) -> Value {
    json!({"kustomize.toolkit.fluxcd.io/name": owner, "kustomize.toolkit.fluxcd.io/namespace": "flux-system"})
}

pub(crate) fn write_snapshot(repo: &Repo, cluster: &Value) -> String {
    let path = repo.path().join("cluster.json");
    std::fs::write(&path, serde_json::to_string_pretty(cluster).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

/// The plan as JSON (exit code checked) and as markdown, with commit ids for stable goldens.
fn plan_both(repo: &Repo, snapshot: Option<&str>, expected_exit: i32) -> (Value, String, String) {
    let extra: Vec<&str> = snapshot.map(|s| vec!["--cluster-snapshot", s]).unwrap_or_default();
    let (plan, code) = plan_json(repo, "HEAD~1", "HEAD", &extra);
    assert_eq!(code, expected_exit, "{plan:#}");
    let (markdown, _) = plan_cli(repo, "HEAD~1", "HEAD", "markdown", &extra);
    let (json_text, _) = plan_cli(repo, "HEAD~1", "HEAD", "json", &extra);
    (plan, markdown, json_text)
}

fn codes(plan: &Value) -> Vec<String> {
    plan["alerts"].as_array().unwrap().iter().map(|a| format!("{} {}", a["severity"], a["code"])).collect()
}

fn kustomization<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["kustomizations"].as_array().unwrap().iter().find(|k| k["name"] == name).unwrap()
}

const SHOP: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.26\n        ports:\n        - containerPort: 8080\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  ports:\n  - port: 80\n    targetPort: 8080\n";

fn shop_fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/shop.yaml", SHOP);
    repo.write("README.md", "# fleet\n");
    repo.commit("base");
    repo
}

#[test]
fn readme_only_pull_request_against_stale_entries_says_they_are_not_its_doing() {
    let repo = shop_fleet();
    let mut cluster = cluster_after(&repo, "HEAD");
    // Objects an older revision applied: still in the inventory, no longer in the base render.
    for (id, kind, name) in [
        ("shop_old-config__ConfigMap", "ConfigMap", "old-config"),
        ("shop_legacy__Service", "Service", "legacy"),
    ] {
        let object = json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "shop", "labels": owner_labels("apps")}});
        add_owned(&mut cluster, "apps", id, object);
    }
    repo.write("README.md", "# fleet\n\nHow we run it.\n");
    repo.commit("docs");
    let snapshot = write_snapshot(&repo, &cluster);
    let (plan, markdown, json_text) = plan_both(&repo, Some(&snapshot), 1);
    assert_eq!(plan["deletions"], json!({"pull-request": 0, "cascade": 0, "stale": 2}));
    assert_eq!(codes(&plan), vec!["\"warning\" \"stale-inventory\""]);
    assert!(markdown.contains("2 stale entries Flux would prune anyway"), "{markdown}");
    assert!(
        plan["kustomizations"].as_array().unwrap().iter().all(|k| k["drift"].is_null()),
        "no drift: {plan:#}"
    );
    insta::assert_snapshot!("trust_readme_only_stale_markdown", markdown);
    insta::assert_snapshot!("trust_readme_only_stale_json", json_text);
}

#[test]
fn image_bump_against_a_drifted_deployment_keeps_change_and_drift_apart() {
    let repo = shop_fleet();
    let mut cluster = cluster_after(&repo, "HEAD");
    let web = live_object(&mut cluster, "Deployment", "web");
    // Someone scaled it by hand; the server and another controller added their own fields.
    web["spec"]["replicas"] = json!(5);
    web["spec"]["progressDeadlineSeconds"] = json!(600);
    web["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
    web["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = json!("TCP");
    web["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "mesh-proxy", "image": "proxy:1"}));
    repo.write("apps/shop.yaml", &SHOP.replace("nginx:1.26", "nginx:1.27"));
    repo.commit("bump");
    let snapshot = write_snapshot(&repo, &cluster);
    let (plan, markdown, json_text) = plan_both(&repo, Some(&snapshot), 1);
    let apps = kustomization(&plan, "apps");
    let change = &apps["changes"][0];
    assert_eq!(change["action"], "update");
    let pr = change["diff"].as_str().unwrap();
    assert!(
        pr.contains("-      - image: nginx:1.26\n+      - image: nginx:1.27\n") && !pr.contains("replicas"),
        "{pr}"
    );
    let drift = &apps["drift"][0];
    let before = drift["diff"].as_str().unwrap();
    assert!(before.contains("-  replicas: 5\n+  replicas: 2\n") && !before.contains("image"), "{before}");
    assert!(!before.contains("mesh-proxy") && !before.contains("protocol"), "not ours: {before}");
    let after = drift["after_merge"].as_str().unwrap();
    assert!(after.contains("replicas: 2") && after.contains("+      - image: nginx:1.27"), "{after}");
    assert_eq!(apps["drift"].as_array().unwrap().len(), 1, "the Service has not drifted");
    assert!(markdown.contains("### Drift this merge will revert"), "{markdown}");
    insta::assert_snapshot!("trust_image_bump_drift_markdown", markdown);
    insta::assert_snapshot!("trust_image_bump_drift_json", json_text);
}

const RBAC: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\nrules:\n- apiGroups: [\"\"]\n  resources: [pods, services]\n  verbs: [get, list, watch]\n- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get]\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: clusterissuers.cert-manager.io\nspec:\n  group: cert-manager.io\n  names:\n    kind: ClusterIssuer\n    plural: clusterissuers\n  scope: Cluster\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n---\napiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata:\n  name: letsencrypt\nspec:\n  acme:\n    server: https://acme.example/directory\n";

#[test]
fn cluster_role_and_cluster_scoped_resources_show_no_drift() {
    let repo = Repo::bootstrap("prod");
    // targetNamespace puts a namespace on every object kustomize does not know is cluster-scoped.
    repo.kustomization("clusters/prod/team.yaml", "team-a", "./team-a", "targetNamespace: team-a");
    repo.write("team-a/rbac.yaml", RBAC);
    repo.write("README.md", "# fleet\n");
    repo.commit("base");
    let cluster = cluster_after(&repo, "HEAD");
    repo.write("README.md", "# fleet\n\nTeam A.\n");
    repo.commit("docs");
    let snapshot = write_snapshot(&repo, &cluster);
    let (plan, markdown, json_text) = plan_both(&repo, Some(&snapshot), 0);
    assert_eq!(plan["verdict"], "no-changes");
    let team = kustomization(&plan, "team-a");
    assert!(team["drift"].is_null(), "no false drift: {team:#}");
    assert!(!markdown.contains("namespace: team-a"), "{markdown}");
    insta::assert_snapshot!("trust_cluster_role_no_drift_markdown", markdown);
    insta::assert_snapshot!("trust_cluster_role_no_drift_json", json_text);
}

#[test]
fn empty_path_with_prune_disabled_objects_keeps_the_alert_consistent_with_the_plan() {
    let repo = shop_fleet();
    repo.write("apps/settings.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  mode: live\n");
    repo.commit("base with settings");
    let mut cluster = cluster_after(&repo, "HEAD");
    // Marked by hand on the live objects: Flux never deletes them.
    for (kind, name) in [("ConfigMap", "settings"), ("Service", "web")] {
        live_object(&mut cluster, kind, name)["metadata"]["annotations"] =
            json!({"kustomize.toolkit.fluxcd.io/prune": "disabled"});
    }
    repo.mkdir("empty").write("empty/.keep", "");
    let apps = std::fs::read_to_string(repo.path().join("clusters/prod/apps.yaml")).unwrap();
    repo.write("clusters/prod/apps.yaml", &apps.replace("path: ./apps", "path: ./empty"));
    repo.commit("the outage");
    let snapshot = write_snapshot(&repo, &cluster);
    let (plan, markdown, json_text) = plan_both(&repo, Some(&snapshot), 2);
    assert_eq!(codes(&plan), vec!["\"danger\" \"empty-render\""]);
    let alert = &plan["alerts"][0];
    let message = alert["message"].as_str().unwrap();
    // The alert says what the plan decided: the ConfigMap is kept, the Service goes with its Namespace.
    assert!(message.contains("keeps 1: ConfigMap default/settings"), "{message}");
    assert!(
        message.contains("with them go 1 kept by Flux but deleted by Kubernetes with their Namespace"),
        "{message}"
    );
    assert!(
        !alert["objects"].as_array().unwrap().contains(&json!("default_settings__ConfigMap")),
        "{alert:#}"
    );
    let changes = kustomization(&plan, "apps")["changes"].as_array().unwrap().clone();
    let fate =
        |id: &str| changes.iter().find(|c| c["id"] == id).map(|c| (c["action"].clone(), c["cause"].clone()));
    assert_eq!(fate("default_settings__ConfigMap"), Some((json!("skip"), Value::Null)));
    assert_eq!(fate("shop_web__Service"), Some((json!("delete"), json!("cascade"))));
    assert_eq!(
        plan["cause"],
        "clusters/prod/apps.yaml: Kustomization flux-system/apps path ./apps → ./empty"
    );
    insta::assert_snapshot!("trust_empty_path_prune_disabled_markdown", markdown);
    insta::assert_snapshot!("trust_empty_path_prune_disabled_json", json_text);
}

#[test]
fn namespace_deletion_warns_the_kustomizations_that_will_fail() {
    let repo = shop_fleet();
    repo.kustomization(
        "clusters/prod/shop-config.yaml",
        "shop-config",
        "./shop-config",
        "dependsOn:\n- name: apps",
    );
    repo.config_map("shop-config/settings.yaml", "settings", "shop");
    repo.kustomization("clusters/prod/other.yaml", "other", "./other", "");
    repo.config_map("other/cm.yaml", "unrelated", "default");
    repo.commit("base with dependants");
    repo.remove("clusters/prod/apps.yaml");
    repo.commit("retire the shop app");
    let (plan, markdown, json_text) = plan_both(&repo, None, 2);
    let warnings: Vec<&Value> =
        plan["alerts"].as_array().unwrap().iter().filter(|a| a["code"] == "dependency-deleted").collect();
    assert_eq!(warnings.len(), 1, "only shop-config depends on what goes: {:#}", plan["alerts"]);
    assert_eq!(warnings[0]["kustomization"], "flux-system/shop-config");
    let message = warnings[0]["message"].as_str().unwrap();
    assert!(message.contains("depends on Kustomization flux-system/apps"), "{message}");
    assert!(message.contains("1 object into Namespace shop"), "{message}");
    let removed: Vec<&Value> =
        plan["alerts"].as_array().unwrap().iter().filter(|a| a["severity"] == "danger").collect();
    assert_eq!(removed.len(), 1, "{:#}", plan["alerts"]);
    assert_eq!(removed[0]["kustomization"], "flux-system/apps");
    assert!(
        !markdown.contains("unreachable-kustomization"),
        "a removed Kustomization is not also unreachable"
    );
    insta::assert_snapshot!("trust_namespace_dependants_markdown", markdown);
    insta::assert_snapshot!("trust_namespace_dependants_json", json_text);
}
