//! The review of every change (issue 26): what a diff shows without saying what follows. Each
//! code has a head that triggers it and a near miss that must not.

use crate::fixture::{edit, plan_json, Repo};
use crate::trust::{cluster_after, live_object, write_snapshot};
use serde_json::{json, Value};

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.26\n";

/// A cluster `prod` whose Kustomization `apps` (with `spec`, more spec YAML) applies `files`,
/// committed with the base policy `policy`.
fn fleet(spec: &str, policy: Option<&str>, files: &[(&str, &str)]) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", spec);
    repo.write("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n");
    for (file, text) in files {
        repo.write(file, text);
    }
    if let Some(policy) = policy {
        repo.write(".fluxplan.yaml", policy);
    }
    repo.commit("base");
    repo
}

/// (severity, code, object, path) of every finding.
fn findings(plan: &Value) -> Vec<(String, String, String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    plan["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("findings is a list: {plan:#}"))
        .iter()
        .map(|f| (text(&f["severity"]), text(&f["code"]), text(&f["object"]), text(&f["path"])))
        .collect()
}

fn finding(severity: &str, code: &str, object: &str, path: &str) -> (String, String, String, String) {
    (severity.into(), code.into(), object.into(), path.into())
}

/// The message of the only finding, and of its alert.
fn only_message(plan: &Value) -> (String, String) {
    let list = plan["findings"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{plan:#}");
    let code = &list[0]["code"];
    let alerts: Vec<&Value> =
        plan["alerts"].as_array().unwrap().iter().filter(|a| a["code"] == *code).collect();
    assert_eq!(alerts.len(), 1, "one alert per finding: {plan:#}");
    (list[0]["message"].as_str().unwrap().into(), alerts[0]["message"].as_str().unwrap().into())
}

fn plan_head(repo: &Repo, extra: &[&str]) -> (Value, i32) {
    plan_json(repo, "HEAD~1", "HEAD", extra)
}

/// The plan of one edit: `file` written as `before` in the fleet, then as `after`.
fn plan_of_edit(file: &str, before: &str, after: &str) -> Value {
    let repo = fleet("", None, &[(file, before)]);
    repo.write(file, after);
    repo.commit(&format!("edit {file}"));
    plan_head(&repo, &[]).0
}

#[test]
fn a_deployment_selector_change_blocks_and_the_template_beside_it_is_not_a_finding() {
    let repo = fleet("", None, &[("apps/web.yaml", DEPLOYMENT)]);
    repo.write(
        "apps/web.yaml",
        &DEPLOYMENT.replace("app: web", "app: web2").replace("nginx:1.26", "nginx:1.27"),
    );
    repo.commit("relabel web");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert_eq!(plan["verdict"], "blocked");
    assert_eq!(
        findings(&plan),
        [finding("danger", "immutable-field", "shop_web_apps_Deployment", "spec.selector")]
    );
    let (message, alert) = only_message(&plan);
    assert!(message.contains("a selector cannot change"), "{message}");
    assert!(
        message.contains("Kustomization flux-system/apps stops applying (and pruning) until this is fixed"),
        "{message}"
    );
    assert!(alert.starts_with("Deployment shop/web spec.selector: "), "{alert}");
    let alert = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "immutable-field").unwrap();
    assert_eq!(alert["severity"], "danger");
    assert_eq!(alert["kustomization"], "flux-system/apps");
    assert_eq!(alert["objects"], json!(["shop_web_apps_Deployment"]));
    assert_eq!(alert["cause"], "apps/web.yaml: Deployment shop/web spec.selector");

    // The template alone changes in place.
    let repo = fleet("", None, &[("apps/web.yaml", DEPLOYMENT)]);
    repo.write("apps/web.yaml", &DEPLOYMENT.replace("nginx:1.26", "nginx:1.27"));
    repo.commit("bump");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 1, "{plan:#}");
    assert_eq!(plan["findings"], json!([]));
}

#[test]
fn the_base_policy_rates_an_immutable_field_change() {
    let policy = "alerts:\n  immutable-field: warning\n";
    let repo = fleet("", Some(policy), &[("apps/web.yaml", DEPLOYMENT)]);
    repo.write("apps/web.yaml", &DEPLOYMENT.replace("app: web", "app: web2"));
    repo.commit("relabel web");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 1, "{plan:#}");
    assert_eq!(
        findings(&plan),
        [finding("warning", "immutable-field", "shop_web_apps_Deployment", "spec.selector")]
    );

    let repo = fleet("", Some("alerts:\n  immutable-field: off\n"), &[("apps/web.yaml", DEPLOYMENT)]);
    repo.write("apps/web.yaml", &DEPLOYMENT.replace("app: web", "app: web2"));
    repo.commit("relabel web");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 1, "{plan:#}");
    assert_eq!(plan["findings"], json!([]), "off: neither a finding nor an alert");
    assert!(plan["alerts"].as_array().unwrap().iter().all(|a| a["code"] != "immutable-field"));
}

#[test]
fn alert_rules_rate_a_code_in_one_namespace_kind_or_cluster() {
    // Two Deployments relabelled, one in a namespace whose workloads are recreated by hand.
    let batch = DEPLOYMENT.replace("namespace: shop", "namespace: batch");
    let files = [
        ("apps/web.yaml", DEPLOYMENT.to_string()),
        (
            "apps/batch.yaml",
            format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: batch\n---\n{batch}"),
        ),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    let relabel = |repo: &Repo| {
        repo.write("apps/web.yaml", &DEPLOYMENT.replace("app: web", "app: web2"));
        repo.write("apps/batch.yaml", &files[1].1.replace("app: web", "app: web2"));
        repo.commit("relabel both");
    };
    let policy = "alertRules:\n- code: immutable-field\n  namespace: batch\n  severity: info\n";
    let repo = fleet("", Some(policy), &files);
    relabel(&repo);
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 2, "shop's change still blocks: {plan:#}");
    assert_eq!(
        findings(&plan),
        [
            finding("danger", "immutable-field", "shop_web_apps_Deployment", "spec.selector"),
            finding("info", "immutable-field", "batch_web_apps_Deployment", "spec.selector"),
        ]
    );

    // By kind and cluster, the last rule that matches winning; another cluster's rule never does.
    let policy = "alertRules:\n- code: immutable-field\n  kind: Deployment\n  severity: warning\n- code: immutable-field\n  cluster: clusters/staging\n  severity: off\n";
    let repo = fleet("", Some(policy), &files);
    relabel(&repo);
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 1, "{plan:#}");
    assert!(findings(&plan).iter().all(|f| f.0 == "warning"), "{:?}", findings(&plan));
    let policy = "alertRules:\n- code: immutable-field\n  cluster: clusters/prod\n  severity: off\n";
    let repo = fleet("", Some(policy), &files);
    relabel(&repo);
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(plan["findings"], json!([]));

    // A rule naming a code fluxplan does not have is left out with a warning, as `alerts:` are.
    let repo = fleet("", Some("alertRules:\n- code: immutable-feild\n  severity: off\n"), &files);
    relabel(&repo);
    let (plan, _) = plan_head(&repo, &[]);
    let invalid = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "policy-invalid");
    assert!(
        invalid.is_some_and(|a| a["message"].as_str().unwrap().contains("immutable-feild")),
        "{:#}",
        plan["alerts"]
    );
}

#[test]
fn forced_immutable_changes_are_recreated() {
    let repo = fleet("force: true", None, &[("apps/web.yaml", DEPLOYMENT)]);
    repo.write("apps/web.yaml", &DEPLOYMENT.replace("app: web", "app: web2"));
    repo.commit("relabel web");
    let (plan, _) = plan_head(&repo, &[]);
    let (message, _) = only_message(&plan);
    assert!(message.contains("force: true on Kustomization flux-system/apps"), "{message}");
    assert!(message.contains("recreated") && message.contains("its Pods go with it"), "{message}");

    let annotated = DEPLOYMENT.replace(
        "  namespace: shop\n",
        "  namespace: shop\n  annotations:\n    kustomize.toolkit.fluxcd.io/force: Enabled\n",
    );
    let plan = plan_of_edit("apps/web.yaml", &annotated, &annotated.replace("app: web", "app: web2"));
    let (message, _) = only_message(&plan);
    assert!(message.contains("kustomize.toolkit.fluxcd.io/force: Enabled"), "{message}");
    assert!(message.contains("recreated"), "{message}");
}

const CLAIM: &str = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: shop\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: fast\n  resources:\n    requests:\n      storage: 10Gi\n";

#[test]
fn a_claim_that_shrinks_or_changes_class_is_immutable() {
    let repo = fleet("", None, &[("apps/claim.yaml", CLAIM)]);
    repo.write("apps/claim.yaml", &CLAIM.replace("10Gi", "5120Mi"));
    repo.commit("shrink");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 2, "{plan:#}");
    let path = "spec.resources.requests.storage";
    assert_eq!(
        findings(&plan),
        [finding("danger", "immutable-field", "shop_data__PersistentVolumeClaim", path)]
    );
    let (message, _) = only_message(&plan);
    assert!(message.contains("shrinks from 10Gi to 5120Mi"), "{message}");

    let plan = plan_of_edit("apps/claim.yaml", CLAIM, &CLAIM.replace("10Gi", "20Gi").replace("fast", "slow"));
    let path = "spec.storageClassName";
    assert_eq!(
        findings(&plan),
        [finding("danger", "immutable-field", "shop_data__PersistentVolumeClaim", path)]
    );

    // Growing alone is a change the API server makes.
    let repo = fleet("", None, &[("apps/claim.yaml", CLAIM)]);
    repo.write("apps/claim.yaml", &CLAIM.replace("10Gi", "11Gi"));
    repo.commit("grow");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!((code, plan["findings"].clone()), (1, json!([])), "{plan:#}");
}

#[test]
fn an_immutable_secret_whose_data_changes_names_keys_never_values() {
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: shop\nimmutable: true\ndata:\n  password: aHVudGVyMg==\n  user: YWRtaW4=\n";
    let repo = fleet("", None, &[("apps/secret.yaml", secret)]);
    repo.write("apps/secret.yaml", &secret.replace("aHVudGVyMg==", "Y29ycmVjdGhvcnNl"));
    repo.commit("rotate");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert_eq!(findings(&plan), [finding("danger", "immutable-field", "shop_creds__Secret", "data")]);
    let (message, _) = only_message(&plan);
    assert!(message.contains("key password; values hidden"), "{message}");
    for format in ["json", "markdown", "text"] {
        let (out, _) = crate::fixture::plan_cli(&repo, "HEAD~1", "HEAD", format, &[]);
        for value in ["aHVudGVyMg", "hunter2", "Y29ycmVjdGhvcnNl", "correcthorse"] {
            assert!(!out.contains(value), "{format} shows a Secret value {value}:\n{out}");
        }
    }

    // A Secret that is not immutable changes in place.
    let mutable = secret.replace("immutable: true\n", "");
    let plan =
        plan_of_edit("apps/secret.yaml", &mutable, &mutable.replace("aHVudGVyMg==", "Y29ycmVjdGhvcnNl"));
    assert_eq!(plan["findings"], json!([]));
}

const STATEFUL_SET: &str = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\n  namespace: shop\nspec:\n  serviceName: db\n  replicas: 1\n  selector:\n    matchLabels:\n      app: db\n  template:\n    metadata:\n      labels:\n        app: db\n    spec:\n      containers:\n      - name: db\n        image: postgres:16\n  volumeClaimTemplates:\n  - metadata:\n      name: data\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests:\n          storage: 10Gi\n";

#[test]
fn a_statefulset_changes_only_its_mutable_fields_in_place() {
    let repo = fleet("", None, &[("apps/db.yaml", STATEFUL_SET)]);
    repo.write(
        "apps/db.yaml",
        &STATEFUL_SET
            .replace("storage: 10Gi", "storage: 20Gi")
            .replace("serviceName: db", "serviceName: db-headless"),
    );
    repo.commit("more storage, another service");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 2, "{plan:#}");
    let object = "shop_db_apps_StatefulSet";
    assert_eq!(
        findings(&plan),
        [
            finding("danger", "immutable-field", object, "spec.serviceName"),
            finding("danger", "immutable-field", object, "spec.volumeClaimTemplates"),
        ]
    );

    let repo = fleet("", None, &[("apps/db.yaml", STATEFUL_SET)]);
    let mutable = STATEFUL_SET
        .replace("replicas: 1", "replicas: 3\n  minReadySeconds: 10\n  updateStrategy:\n    type: OnDelete")
        .replace("postgres:16", "postgres:17");
    repo.write("apps/db.yaml", &mutable);
    repo.commit("scale, upgrade");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!((code, plan["findings"].clone()), (1, json!([])), "{plan:#}");
}

const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  ports:\n  - port: 80\n";
const JOB: &str = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: shop\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: migrate\n        image: migrate:1\n";

/// Base renders a Service and a Job; the cluster holds them as the API server keeps them: a
/// clusterIP allocated, the Job's selector and template labels generated.
fn live_fleet() -> (Repo, Value) {
    let repo = fleet("", None, &[("apps/web.yaml", SERVICE), ("apps/job.yaml", JOB)]);
    let mut cluster = cluster_after(&repo, "HEAD");
    let service = live_object(&mut cluster, "Service", "web");
    service["spec"]["clusterIP"] = json!("10.0.0.10");
    service["spec"]["clusterIPs"] = json!(["10.0.0.10"]);
    service["spec"]["type"] = json!("ClusterIP");
    let job = live_object(&mut cluster, "Job", "migrate");
    let generated = json!({"batch.kubernetes.io/controller-uid": "1234", "job-name": "migrate"});
    job["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "1234"}});
    job["spec"]["template"]["metadata"] = json!({"labels": generated});
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
    (repo, cluster)
}

#[test]
fn against_the_live_cluster_only_what_the_manifest_sets_is_compared() {
    // The Service's allocated clusterIP and the Job's generated labels are not changes.
    let (repo, cluster) = live_fleet();
    repo.write("apps/web.yaml", &SERVICE.replace("port: 80", "port: 8080"));
    repo.write(
        "apps/job.yaml",
        &JOB.replace("  namespace: shop\n", "  namespace: shop\n  labels:\n    team: data\n"),
    );
    repo.commit("another port, a label");
    let snapshot = write_snapshot(&repo, &cluster);
    let (plan, code) = plan_head(&repo, &["--cluster-snapshot", &snapshot]);
    assert_eq!((code, plan["findings"].clone()), (1, json!([])), "{plan:#}");

    // A clusterIP set apart from the allocated one, and a new image for the Job, are.
    let (repo, cluster) = live_fleet();
    repo.write("apps/web.yaml", &SERVICE.replace("spec:\n", "spec:\n  clusterIP: 10.0.0.20\n"));
    repo.write("apps/job.yaml", &JOB.replace("migrate:1", "migrate:2"));
    repo.commit("pin the address, next migration");
    let snapshot = write_snapshot(&repo, &cluster);
    let (plan, code) = plan_head(&repo, &["--cluster-snapshot", &snapshot]);
    assert_eq!(code, 2, "{plan:#}");
    assert_eq!(
        findings(&plan),
        [
            finding("danger", "immutable-field", "shop_migrate_batch_Job", "spec.template"),
            finding("danger", "immutable-field", "shop_web__Service", "spec.clusterIP"),
        ]
    );
    let messages: Vec<&str> =
        plan["findings"].as_array().unwrap().iter().map(|f| f["message"].as_str().unwrap()).collect();
    assert!(messages[1].contains("changes from 10.0.0.10 to 10.0.0.20"), "{}", messages[1]);

    // A Job the cluster no longer holds (its TTL deleted it) is created anew: nothing refuses it.
    let (repo, mut cluster) = live_fleet();
    cluster["objects"].as_array_mut().unwrap().retain(|o| o["kind"] != "Job");
    repo.write("apps/job.yaml", &JOB.replace("migrate:1", "migrate:2"));
    repo.commit("next migration");
    let snapshot = write_snapshot(&repo, &cluster);
    let (plan, code) = plan_head(&repo, &["--cluster-snapshot", &snapshot]);
    assert_eq!((code, plan["findings"].clone()), (1, json!([])), "{plan:#}");
}

#[test]
fn a_binding_changes_its_role_only_by_being_recreated() {
    let binding = "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: readers\n  namespace: shop\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: view\nsubjects:\n- kind: Group\n  name: readers\n  apiGroup: rbac.authorization.k8s.io\n";
    let plan = plan_of_edit("apps/binding.yaml", binding, &binding.replace("name: view", "name: edit"));
    let object = "shop_readers_rbac.authorization.k8s.io_RoleBinding";
    assert_eq!(findings(&plan), [finding("danger", "immutable-field", object, "roleRef")]);
    let (message, _) = only_message(&plan);
    assert!(message.contains("from ClusterRole view to ClusterRole edit"), "{message}");
}

const APPS_KUSTOMIZATION: &str = "flux-system_apps_kustomize.toolkit.fluxcd.io_Kustomization";

#[test]
fn force_switched_on_and_durations_flux_rejects_are_flux_semantics() {
    let repo = fleet("", None, &[("apps/web.yaml", DEPLOYMENT)]);
    edit(&repo, "clusters/prod/apps.yaml", "interval: 10m", "interval: 1d\n  force: true");
    repo.commit("force, daily");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 1, "{plan:#}");
    assert_eq!(
        findings(&plan),
        [
            finding("warning", "flux-semantics", APPS_KUSTOMIZATION, "spec.force"),
            finding("warning", "flux-semantics", APPS_KUSTOMIZATION, "spec.interval"),
        ]
    );
    let list = plan["findings"].as_array().unwrap();
    assert_eq!(list[0]["unit"], "Kustomization flux-system/flux-system", "the unit that applies it");
    assert!(list[0]["message"].as_str().unwrap().contains("deletes and recreates"), "{plan:#}");
    let message = list[1]["message"].as_str().unwrap();
    assert!(message.contains("1d is not a duration") && message.contains("rejects"), "{message}");

    let repo = fleet("", None, &[("apps/web.yaml", DEPLOYMENT)]);
    edit(&repo, "clusters/prod/apps.yaml", "interval: 10m", "interval: 0s");
    repo.commit("never");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(findings(&plan), [finding("warning", "flux-semantics", APPS_KUSTOMIZATION, "spec.interval")]);
    let (message, _) = only_message(&plan);
    assert!(message.contains("never reconciles this Kustomization on a schedule"), "{message}");

    // Durations the API accepts and the controller honours say nothing.
    let repo = fleet("force: true", None, &[("apps/web.yaml", DEPLOYMENT)]);
    edit(
        &repo,
        "clusters/prod/apps.yaml",
        "interval: 10m",
        "interval: 1h30m\n  retryInterval: 2m\n  timeout: 5s",
    );
    repo.commit("slower");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!((code, plan["findings"].clone()), (1, json!([])), "{plan:#}");
}

const HELM_RELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: flux-system\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: podinfo\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n";

#[test]
fn a_helm_release_suspended_or_resumed_is_suspend_changed() {
    let plan = plan_of_edit("apps/podinfo.yaml", HELM_RELEASE, &format!("{HELM_RELEASE}  suspend: true\n"));
    let object = "flux-system_podinfo_helm.toolkit.fluxcd.io_HelmRelease";
    assert_eq!(findings(&plan), [finding("warning", "suspend-changed", object, "spec.suspend")]);
    let (message, _) = only_message(&plan);
    assert!(message.starts_with("suspended: helm-controller stops"), "{message}");

    let repo = fleet("", None, &[("apps/podinfo.yaml", &format!("{HELM_RELEASE}  suspend: true\n"))]);
    repo.write("apps/podinfo.yaml", HELM_RELEASE);
    repo.commit("resume podinfo");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(findings(&plan), [finding("warning", "suspend-changed", object, "spec.suspend")]);
    let (message, _) = only_message(&plan);
    assert!(message.starts_with("resumed:"), "{message}");
}

#[test]
fn changes_under_a_kustomization_that_stays_suspended_are_flux_semantics() {
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: shop\ndata:\n  mode: slow\n";
    let repo = fleet("suspend: true", None, &[("apps/settings.yaml", config)]);
    repo.write("apps/settings.yaml", &config.replace("slow", "fast"));
    repo.commit("faster");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(findings(&plan), [finding("warning", "flux-semantics", APPS_KUSTOMIZATION, "spec.suspend")]);
    let (message, _) = only_message(&plan);
    assert!(message.contains("(1 updated): Flux applies none of it until it is resumed"), "{message}");
    assert_eq!(plan["findings"][0]["unit"], "Kustomization flux-system/apps");

    // Nothing under it changes: nothing to say.
    let repo = fleet("suspend: true", None, &[("apps/settings.yaml", config)]);
    repo.write("README.md", "# fleet\n");
    repo.commit("docs");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(plan["findings"], json!([]), "{plan:#}");
}

fn cluster_role_binding(role: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: ops\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {role}\nsubjects:\n- kind: ServiceAccount\n  name: ops\n  namespace: shop\n"
    )
}

#[test]
fn a_binding_to_an_all_powerful_role_is_privilege() {
    let repo = fleet("", None, &[("apps/web.yaml", DEPLOYMENT)]);
    repo.write("apps/ops.yaml", &cluster_role_binding("cluster-admin"));
    repo.commit("ops");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 1, "a warning: {plan:#}");
    let object = "_ops_rbac.authorization.k8s.io_ClusterRoleBinding";
    assert_eq!(findings(&plan), [finding("warning", "privilege", object, "roleRef")]);
    let (message, _) = only_message(&plan);
    assert!(message.contains("binds ClusterRole cluster-admin"), "{message}");
    assert!(message.contains("cluster-wide to ServiceAccount shop/ops"), "{message}");

    // A role of the same render whose rules hold wildcards.
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: ops-all\nrules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: [get, list]\n";
    let repo = fleet("", None, &[("apps/role.yaml", role)]);
    repo.write("apps/ops.yaml", &cluster_role_binding("ops-all"));
    repo.commit("ops");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(findings(&plan), [finding("warning", "privilege", object, "roleRef")]);
    let (message, _) = only_message(&plan);
    assert!(
        message.contains("binds ClusterRole ops-all (whose rules grant every resource (*)) cluster-wide"),
        "{message}"
    );

    // A harmless role: nothing.
    let repo = fleet("", None, &[("apps/web.yaml", DEPLOYMENT)]);
    repo.write("apps/ops.yaml", &cluster_role_binding("view"));
    repo.commit("ops");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(plan["findings"], json!([]), "{plan:#}");
}

#[test]
fn rules_gaining_wildcards_or_secrets_are_privilege() {
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: app\n  namespace: shop\nrules:\n- apiGroups: ['']\n  resources: [configmaps]\n  verbs: [get, list]\n";
    let plan = plan_of_edit("apps/role.yaml", role, &role.replace("[configmaps]", "[configmaps, secrets]"));
    let object = "shop_app_rbac.authorization.k8s.io_Role";
    assert_eq!(findings(&plan), [finding("warning", "privilege", object, "rules")]);
    let (message, _) = only_message(&plan);
    assert_eq!(message, "its rules now grant access to Secrets");

    // More of what it already had: nothing new.
    let plan = plan_of_edit("apps/role.yaml", role, &role.replace("[get, list]", "[get, list, watch]"));
    assert_eq!(plan["findings"], json!([]), "{plan:#}");
}

#[test]
fn pods_gaining_the_host_or_root_are_privilege() {
    let repo = fleet("", None, &[("apps/web.yaml", DEPLOYMENT)]);
    let privileged = DEPLOYMENT.replace(
        "        image: nginx:1.26\n",
        "        image: nginx:1.26\n        securityContext:\n          privileged: true\n",
    );
    repo.write("apps/web.yaml", &privileged);
    repo.commit("privileged");
    let (plan, _) = plan_head(&repo, &[]);
    let path = "spec.template.spec.containers[web].securityContext.privileged";
    assert_eq!(findings(&plan), [finding("warning", "privilege", "shop_web_apps_Deployment", path)]);

    // Several at once: one finding on the Pod spec, naming each.
    let repo = fleet("", None, &[("apps/web.yaml", DEPLOYMENT)]);
    let host = DEPLOYMENT.replace(
        "    spec:\n      containers:\n",
        "    spec:\n      hostNetwork: true\n      volumes:\n      - name: root\n        hostPath:\n          path: /\n      containers:\n",
    );
    repo.write("apps/web.yaml", &host);
    repo.commit("host");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(
        findings(&plan),
        [finding("warning", "privilege", "shop_web_apps_Deployment", "spec.template.spec")]
    );
    let (message, _) = only_message(&plan);
    assert_eq!(message, "its Pods gain hostNetwork: true, hostPath volume root (/)");

    // Already privileged, image bumped: nothing new.
    let plan = plan_of_edit("apps/web.yaml", &privileged, &privileged.replace("nginx:1.26", "nginx:1.27"));
    assert_eq!(plan["findings"], json!([]), "{plan:#}");
}

#[test]
fn a_namespace_whose_pod_security_is_lowered_is_privilege() {
    let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels:\n    pod-security.kubernetes.io/enforce: restricted\n";
    let plan = plan_of_edit("apps/namespace.yaml", namespace, &namespace.replace("restricted", "baseline"));
    let path = "metadata.labels.pod-security.kubernetes.io/enforce";
    assert_eq!(findings(&plan), [finding("warning", "privilege", "_shop__Namespace", path)]);
    let (message, _) = only_message(&plan);
    assert!(message.contains("lowered from restricted to baseline"), "{message}");

    // Raised: nothing.
    let repo = fleet("", None, &[("apps/namespace.yaml", &namespace.replace("restricted", "baseline"))]);
    repo.write("apps/namespace.yaml", namespace);
    repo.commit("tighten");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(plan["findings"], json!([]), "{plan:#}");
}

#[test]
fn the_comment_lists_each_finding_once_under_the_verdict() {
    let repo = fleet("", None, &[("apps/web.yaml", DEPLOYMENT)]);
    repo.write("apps/web.yaml", &DEPLOYMENT.replace("app: web", "app: web2"));
    repo.write("apps/ops.yaml", &cluster_role_binding("cluster-admin"));
    repo.commit("relabel web, ops");
    let (markdown, code) = crate::fixture::plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert_eq!(code, 2, "{markdown}");
    let findings_at = markdown.find("#### Review findings").expect("a findings list");
    assert!(
        findings_at < markdown.find("| Cluster |").unwrap(),
        "under the verdict, above the table:\n{markdown}"
    );
    assert!(markdown.find("🛑 **danger**").unwrap() < markdown.find("⚠️ **warning**").unwrap(), "{markdown}");
    assert_eq!(markdown.matches("spec.selector").count(), 2, "the cause line and the finding:\n{markdown}");
    assert_eq!(markdown.matches("binds ClusterRole cluster-admin").count(), 1, "{markdown}");
    assert!(!markdown.contains("### Alerts"), "every alert is a finding, listed once:\n{markdown}");
    assert!(markdown.contains("`alerts: {immutable-field: warning}`"), "how to unblock:\n{markdown}");
    insta::assert_snapshot!("findings_selector_and_admin_markdown", markdown);

    let (text, _) = crate::fixture::plan_cli(&repo, "HEAD~1", "HEAD", "text", &[]);
    assert!(text.contains("review findings:\n  DANGER immutable-field Deployment shop/web spec.selector in Kustomization flux-system/apps (clusters/prod): "), "{text}");
    assert_eq!(text.matches("binds ClusterRole cluster-admin").count(), 1, "{text}");
}

#[test]
fn a_statefulset_recreated_without_its_claim_templates_is_data_loss() {
    let renamed = |text: &str| {
        text.replace("  - metadata:\n      name: data\n", "  - metadata:\n      name: storage\n")
    };
    let retained = STATEFUL_SET.replace("replicas: 1", "replicas: 3");
    let repo = fleet("force: true", None, &[("apps/db.yaml", &retained)]);
    repo.write("apps/db.yaml", &renamed(&retained));
    repo.commit("rename the claim template");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 2, "{plan:#}");
    let (object, path) = ("shop_db_apps_StatefulSet", "spec.volumeClaimTemplates");
    assert_eq!(
        findings(&plan),
        [finding("danger", "data-loss", object, path), finding("danger", "immutable-field", object, path)]
    );
    let message = plan["findings"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("its Pods start on new, empty claims (storage-db-0 … storage-db-2)"),
        "{message}"
    );
    assert!(message.contains("the claims data-db-0 … data-db-2 are left behind"), "{message}");

    // Deleted with the old StatefulSet under whenDeleted: Delete.
    let deleting = STATEFUL_SET.replace(
        "  serviceName: db\n",
        "  serviceName: db\n  persistentVolumeClaimRetentionPolicy:\n    whenDeleted: Delete\n",
    );
    let repo = fleet("force: true", None, &[("apps/db.yaml", &deleting)]);
    repo.write("apps/db.yaml", &renamed(&deleting));
    repo.commit("rename the claim template");
    let (plan, _) = plan_head(&repo, &[]);
    let message = plan["findings"][0]["message"].as_str().unwrap();
    assert!(message.contains("data-db-0 are deleted with the old StatefulSet"), "{message}");

    // Not forced: the apply fails, nothing is recreated, no data is lost (yet).
    let plan = plan_of_edit("apps/db.yaml", STATEFUL_SET, &renamed(STATEFUL_SET));
    assert_eq!(findings(&plan), [finding("danger", "immutable-field", object, path)]);
}

fn statefulset(name: &str, retention: &str, templates: bool) -> String {
    let claims = if templates {
        "  volumeClaimTemplates:\n  - metadata:\n      name: data\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests:\n          storage: 1Gi\n"
    } else {
        ""
    };
    format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  serviceName: db\n{retention}  selector:\n    matchLabels:\n      app: db\n  template:\n    metadata:\n      labels:\n        app: db\n    spec:\n      containers:\n      - name: db\n        image: postgres:16\n{claims}"
    )
}

fn deletion_alert(plan: &Value) -> &Value {
    plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kustomization"] == "flux-system/apps" && a["severity"] == "danger")
        .unwrap_or_else(|| panic!("a dangerous alert for the deletion: {:#}", plan["alerts"]))
}

#[test]
fn a_statefulset_renamed_or_deleted_with_its_claims_is_data_loss() {
    // Renamed: the new name's Pods start on new, empty claims; the old claims stay behind.
    let repo = fleet("", None, &[("apps/db.yaml", &statefulset("db", "", true))]);
    repo.write("apps/db.yaml", &statefulset("db-v2", "", true));
    repo.commit("rename db");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 2, "{plan:#}");
    let alert = deletion_alert(&plan);
    assert_eq!(alert["code"], "data-loss", "{alert:#}");
    assert_eq!(alert["related_codes"], json!(["protected-kind-deletion"]));
    let message = alert["message"].as_str().unwrap();
    assert!(
        message.contains(
            "StatefulSet shop/db is replaced by StatefulSet shop/db-v2, whose Pods start on new, empty claims \
             (data-db-v2-N); the claims of db (data-db-N) are left behind, no longer used"
        ),
        "{message}"
    );

    // Deleted under whenDeleted: Delete: its claims go with it.
    let retention = "  persistentVolumeClaimRetentionPolicy:\n    whenDeleted: Delete\n";
    let repo = fleet("", None, &[("apps/db.yaml", &statefulset("db", retention, true))]);
    repo.remove("apps/db.yaml");
    repo.commit("drop db");
    let (plan, _) = plan_head(&repo, &[]);
    let alert = deletion_alert(&plan);
    assert_eq!(alert["code"], "data-loss", "{alert:#}");
    assert!(
        alert["message"].as_str().unwrap().contains("its claims (data-db-N) are deleted with it"),
        "{alert:#}"
    );

    // Near misses: deleted keeping its claims, or with no claims at all: a protected deletion only.
    for (retention, templates) in [("", true), (retention, false)] {
        let repo = fleet("", None, &[("apps/db.yaml", &statefulset("db", retention, templates))]);
        repo.remove("apps/db.yaml");
        repo.commit("drop db");
        let (plan, _) = plan_head(&repo, &[]);
        let alert = deletion_alert(&plan);
        assert_eq!(alert["code"], "protected-kind-deletion", "{alert:#}");
        assert!(!alert["message"].as_str().unwrap().contains("claims ("), "{alert:#}");
    }
}

fn crd(versions: &[(&str, bool)]) -> String {
    let versions: String = versions
        .iter()
        .map(|(name, storage)| {
            format!("  - name: {name}\n    served: true\n    storage: {storage}\n    schema:\n      openAPIV3Schema:\n        type: object\n")
        })
        .collect();
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.io\nspec:\n  group: example.io\n  names:\n    kind: Widget\n    plural: widgets\n  scope: Namespaced\n  versions:\n{versions}"
    )
}

#[test]
fn a_definition_dropping_its_stored_version_is_data_loss_and_adding_one_is_not() {
    let repo = fleet("", None, &[("apps/crd.yaml", &crd(&[("v1alpha1", true)]))]);
    // The new version becomes the storage one and the old one goes: refused while objects are
    // stored in it.
    repo.write("apps/crd.yaml", &crd(&[("v1", true)]));
    repo.commit("v1 only");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert_eq!(
        findings(&plan),
        [finding(
            "danger",
            "data-loss",
            "_widgets.example.io_apiextensions.k8s.io_CustomResourceDefinition",
            "spec.versions"
        )]
    );
    let (message, _) = only_message(&plan);
    assert!(
        message.contains("drops version v1alpha1") && message.contains("status.storedVersions"),
        "{message}"
    );

    // Near miss: v1 added beside it and made the storage version, v1alpha1 kept.
    let repo = fleet("", None, &[("apps/crd.yaml", &crd(&[("v1alpha1", true)]))]);
    repo.write("apps/crd.yaml", &crd(&[("v1alpha1", false), ("v1", true)]));
    repo.commit("add v1");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!((code, plan["findings"].clone()), (1, json!([])), "{plan:#}");
}

#[test]
fn a_renamed_claim_is_data_loss() {
    let claim = |name: &str| {
        format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n")
    };
    let repo = fleet("", None, &[("apps/claim.yaml", &claim("uploads"))]);
    repo.write("apps/claim.yaml", &claim("uploads-v2"));
    repo.commit("rename the claim");
    let (plan, code) = plan_head(&repo, &[]);
    assert_eq!(code, 2, "{plan:#}");
    let alert = deletion_alert(&plan);
    assert_eq!(alert["code"], "data-loss", "{alert:#}");
    assert!(
        alert["message"].as_str().unwrap().contains(
            "PersistentVolumeClaim shop/uploads is replaced by PersistentVolumeClaim shop/uploads-v2, which starts empty"
        ),
        "{alert:#}"
    );
    // Near miss: a claim deleted with nothing in its place is a protected deletion only.
    let repo = fleet("", None, &[("apps/claim.yaml", &claim("uploads"))]);
    repo.remove("apps/claim.yaml");
    repo.commit("drop the claim");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(deletion_alert(&plan)["code"], "protected-kind-deletion");
}

#[test]
fn a_volumes_source_and_a_services_primary_family_cannot_change() {
    let volume = |path: &str, capacity: &str| {
        format!("apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: archive\nspec:\n  capacity:\n    storage: {capacity}\n  accessModes: [ReadWriteOnce]\n  nfs:\n    server: nas.lan\n    path: {path}\n")
    };
    let service = |families: &str| {
        format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  ipFamilyPolicy: PreferDualStack\n  ipFamilies: {families}\n  ports:\n  - port: 80\n")
    };
    let files = [("apps/pv.yaml", volume("/exports/a", "1Gi")), ("apps/svc.yaml", service("[IPv4]"))];
    let files: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    let repo = fleet("", None, &files);
    repo.write("apps/pv.yaml", &volume("/exports/b", "1Gi"));
    repo.write("apps/svc.yaml", &service("[IPv6, IPv4]"));
    repo.commit("move the volume, IPv6 first");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(
        findings(&plan),
        [
            finding("danger", "immutable-field", "_archive__PersistentVolume", "spec.nfs"),
            finding("danger", "immutable-field", "shop_web__Service", "spec.ipFamilies.0"),
        ]
    );
    // Near misses: a second family added, a volume's capacity grown.
    let repo = fleet("", None, &files);
    repo.write("apps/pv.yaml", &volume("/exports/a", "2Gi"));
    repo.write("apps/svc.yaml", &service("[IPv4, IPv6]"));
    repo.commit("grow, dual-stack");
    let (plan, _) = plan_head(&repo, &[]);
    assert_eq!(plan["findings"], json!([]), "{:#}", plan["findings"]);
}
