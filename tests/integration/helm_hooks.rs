//! What a chart does beyond its manifest, planned with the real, pinned Helm: the hooks an
//! install or upgrade runs (changes of the release, reviewed like any object), the post-render
//! strategy that decides whether they are post-rendered, and the templates whose output the
//! cluster decides (`lookup`, `.Capabilities`). Each attack beside a near miss that must not fire.

use crate::fixture::{
    alert_codes, edit, has_alert, helm, plan_cli, plan_json, sorted_changes, unit_in, Repo,
};
use serde_json::{json, Value};

/// The HelmRelease `apps/web`, from the chart at `charts/web` of this repository.
const RELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: web
  namespace: apps
spec:
  interval: 10m
  chart:
    spec:
      chart: ./charts/web
      sourceRef:
        kind: GitRepository
        name: flux-system
        namespace: flux-system
  values:
    replicas: 2
";

/// A hook binding cluster-admin to the default ServiceAccount, run after every install and
/// upgrade, and a privileged hostPID Job beside it.
const GRANT: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: web-grant
  annotations:
    helm.sh/hook: post-install,post-upgrade
    helm.sh/hook-delete-policy: hook-succeeded
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
- kind: ServiceAccount
  name: default
  namespace: {{ .Release.Namespace }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: web-node-setup
  annotations:
    helm.sh/hook: post-install,post-upgrade
spec:
  template:
    spec:
      hostPID: true
      restartPolicy: Never
      containers:
      - name: setup
        image: busybox
        securityContext:
          privileged: true
";

/// A cluster whose Kustomization `flux-system/web` applies the HelmRelease `apps/web`, whose
/// chart renders a Deployment and a pre-upgrade migration hook.
fn fleet(release: &str) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/web.yaml", "web", "./apps/web", "");
    repo.write("apps/web/release.yaml", release);
    repo.write("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n");
    repo.write("charts/web/values.yaml", "replicas: 1\n");
    repo.write(
        "charts/web/templates/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {{ .Values.replicas }}\n  \
         selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      \
         containers:\n      - name: web\n        image: nginx:1.27\n",
    );
    repo.write(
        "charts/web/templates/migrate.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: web-migrate\n  annotations:\n    helm.sh/hook: pre-upgrade\n\
         spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: m\n        image: busybox\n",
    );
    repo.commit("base");
    repo
}

fn change<'a>(unit: &'a Value, id: &str) -> Option<&'a Value> {
    unit["changes"].as_array().unwrap().iter().find(|c| c["id"] == id)
}

fn findings_of(plan: &Value, code: &str) -> Vec<String> {
    plan["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .map(|f| f["object"].as_str().unwrap().to_string())
        .collect()
}

const BINDING: &str = "_web-grant_rbac.authorization.k8s.io_ClusterRoleBinding";
const NODE_JOB: &str = "apps_web-node-setup_batch_Job";

/// What `helm template` itself prints as hooks of the chart at HEAD: the oracle for which
/// documents are hooks and on which events.
fn helm_template_hooks(repo: &Repo) -> Vec<(String, String)> {
    let helm = helm(4);
    let out = std::process::Command::new(helm.program())
        .args(["template", "web", "--namespace", "apps"])
        .arg(repo.path().join("charts/web"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut hooks: Vec<(String, String)> = String::from_utf8(out.stdout)
        .unwrap()
        .split("\n---")
        .flat_map(|doc| fluxplan::yaml::parse_documents(doc).unwrap_or_default())
        .filter_map(|doc| {
            let events = doc["metadata"]["annotations"]["helm.sh/hook"].as_str()?.to_string();
            Some((doc["metadata"]["name"].as_str()?.to_string(), events))
        })
        .collect();
    hooks.sort();
    hooks
}

/// The attack: the pull request adds, to the chart only, a post-install,post-upgrade hook binding
/// cluster-admin and a privileged hostPID Job. Both are planned as creates marked as hooks, the
/// review finds the privilege, and the plan is not `no-changes`, though the release's manifest
/// does not change at all.
#[test]
fn a_new_hook_binding_cluster_admin_is_planned_and_reviewed() {
    let repo = fleet(RELEASE);
    repo.write("charts/web/templates/grant.yaml", GRANT);
    repo.commit("a hook");
    assert_eq!(
        helm_template_hooks(&repo),
        vec![
            ("web-grant".to_string(), "post-install,post-upgrade".to_string()),
            ("web-migrate".to_string(), "pre-upgrade".to_string()),
            ("web-node-setup".to_string(), "post-install,post-upgrade".to_string()),
        ],
        "helm template prints them as hooks"
    );
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(plan["verdict"], "changes", "{plan:#}");
    assert_eq!(code, 1);
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    assert_eq!(release["status"], "changed", "{release:#}");
    assert_eq!(
        sorted_changes(release),
        vec![("create".to_string(), BINDING.to_string()), ("create".to_string(), NODE_JOB.to_string())]
    );
    let binding = change(release, BINDING).unwrap();
    assert_eq!(
        binding["hook"],
        json!({"events": ["post-install", "post-upgrade"], "deletePolicy": "hook-succeeded"}),
        "{binding:#}"
    );
    assert_eq!(change(release, NODE_JOB).unwrap()["hook"]["deletePolicy"], "before-hook-creation");
    assert_eq!(release["counts"]["create"], 2);
    assert_eq!(findings_of(&plan, "privilege"), vec![BINDING.to_string(), NODE_JOB.to_string()], "{plan:#}");
    assert!(has_alert(&plan, "warning", "privilege"), "{:?}", alert_codes(&plan));
    let messages = plan["findings"].to_string();
    assert!(messages.contains("binds ClusterRole cluster-admin"), "{messages}");
    // The comment lists the hooks as what they are.
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert!(
        markdown.contains("Helm hook on post-install, post-upgrade (delete policy hook-succeeded)"),
        "{markdown}"
    );

    // A policy that rates privilege as danger blocks it, like any other object's.
    repo.write(".fluxplan.yaml", "alerts:\n  privilege: danger\n");
    repo.commit("strict policy");
    edit(&repo, "charts/web/templates/grant.yaml", "name: web-grant", "name: web-grant-2");
    repo.commit("another binding");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((plan["verdict"].as_str(), code), (Some("blocked"), 2), "{plan:#}");
}

/// Hooks planted for later: a `pre-delete` binding to cluster-admin (and a hostPID Job) run only when the release
/// is uninstalled, but this merge puts it in place, so it is planned now (a create marked as a
/// hook on pre-delete) and reviewed. Near miss: under `spec.uninstall.disableHooks` it never runs,
/// and it is no change.
#[test]
fn a_delete_hook_planted_for_a_later_uninstall_is_reviewed_now() {
    let repo = fleet(RELEASE);
    repo.write("charts/web/templates/grant.yaml", &GRANT.replace("post-install,post-upgrade", "pre-delete"));
    repo.commit("a delete hook");
    assert!(
        helm_template_hooks(&repo).contains(&("web-grant".to_string(), "pre-delete".to_string())),
        "helm template prints it as a hook"
    );
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((plan["verdict"].as_str(), code), (Some("changes"), 1), "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    let binding = change(release, BINDING).unwrap_or_else(|| panic!("{release:#}"));
    assert_eq!(binding["action"], "create");
    assert_eq!(binding["hook"]["events"], json!(["pre-delete"]), "{binding:#}");
    assert!(
        binding["reason"].as_str().unwrap().contains("the uninstall of the release runs it"),
        "{binding:#}"
    );
    // The hostPID Job of the same file is planted on pre-delete too.
    assert_eq!(findings_of(&plan, "privilege"), vec![BINDING.to_string(), NODE_JOB.to_string()], "{plan:#}");

    edit(
        &repo,
        "apps/web/release.yaml",
        "  interval: 10m\n",
        "  interval: 10m\n  uninstall:\n    disableHooks: true\n",
    );
    repo.commit("no uninstall hooks");
    let (plan, _) = plan_json(&repo, "HEAD~2", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    assert!(change(release, BINDING).is_none(), "{release:#}");
    assert!(findings_of(&plan, "privilege").is_empty(), "{plan:#}");
    assert!(release["notes"].to_string().contains("web-grant"), "{release:#}");
}

/// A decoy under the same name: a benign test hook named like the binding that runs. The one
/// that runs is reviewed, whatever else shares its name.
#[test]
fn a_hook_cannot_hide_behind_another_of_the_same_name() {
    let repo = fleet(RELEASE);
    repo.write("charts/web/templates/grant.yaml", GRANT);
    repo.write(
        "charts/web/templates/tests/decoy.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: web-grant\n  \
         annotations:\n    helm.sh/hook: test\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  \
         name: view\nsubjects:\n- kind: ServiceAccount\n  name: default\n  namespace: apps\n",
    );
    repo.commit("a hook and its decoy");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(findings_of(&plan, "privilege").contains(&BINDING.to_string()), "{plan:#}");
}

/// A hook planted while disabled, then enabled by a later pull request: its first run is a
/// change, reviewed then. Near miss: a hook that ran before and runs again unchanged is none.
#[test]
fn a_hook_planted_while_disabled_is_reviewed_when_it_first_runs() {
    let repo = fleet(RELEASE);
    edit(
        &repo,
        "apps/web/release.yaml",
        "  interval: 10m\n",
        "  interval: 10m\n  upgrade:\n    disableHooks: true\n",
    );
    repo.write("charts/web/templates/grant.yaml", GRANT);
    repo.commit("a hook that does not run");
    edit(&repo, "apps/web/release.yaml", "  upgrade:\n    disableHooks: true\n", "");
    repo.commit("hooks run again");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    assert_eq!(change(release, BINDING).map(|c| c["action"].clone()), Some(json!("create")), "{release:#}");
    assert!(findings_of(&plan, "privilege").contains(&BINDING.to_string()), "{plan:#}");
}

/// Near misses: a hook the base already runs, unchanged, is no change (an unrelated values
/// change plans only the Deployment); the same new hook under `spec.upgrade.disableHooks` does
/// not run, is no change, and the plan says why.
#[test]
fn an_unchanged_hook_or_a_disabled_one_is_no_change() {
    let repo = fleet(RELEASE);
    repo.write("charts/web/templates/grant.yaml", GRANT);
    repo.commit("the hooks at base");
    edit(&repo, "apps/web/release.yaml", "replicas: 2", "replicas: 3");
    repo.commit("three replicas");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    assert_eq!(sorted_changes(release), vec![("update".to_string(), "apps_web_apps_Deployment".to_string())]);
    assert!(findings_of(&plan, "privilege").is_empty(), "{plan:#}");
    let notes = release["notes"].to_string();
    assert!(
        notes.contains("ClusterRoleBinding web-grant on post-install, post-upgrade"),
        "still runs: {notes}"
    );

    let disabled = RELEASE.replace("  values:\n", "  upgrade:\n    disableHooks: true\n  values:\n");
    let repo = fleet(&disabled);
    repo.write("charts/web/templates/grant.yaml", GRANT);
    repo.commit("a hook the upgrade does not run");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    assert!(sorted_changes(release).is_empty(), "{release:#}");
    assert!(findings_of(&plan, "privilege").is_empty(), "{plan:#}");
    assert!(release["notes"].to_string().contains("spec.upgrade.disableHooks is true"), "{release:#}");
    assert_eq!((plan["verdict"].as_str(), code), (Some("no-changes"), 0), "{plan:#}");

    // A test hook runs only with spec.test.enable.
    let repo = fleet(RELEASE);
    repo.write(
        "charts/web/templates/tests/smoke.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-smoke\n  annotations:\n    helm.sh/hook: test\nspec:\n  \
         containers:\n  - name: smoke\n    image: busybox\n",
    );
    repo.commit("a test hook");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    assert!(sorted_changes(release).is_empty(), "{release:#}");
    assert!(
        release["notes"].to_string().contains("test hooks run only with spec.test.enable"),
        "{release:#}"
    );
    edit(&repo, "apps/web/release.yaml", "  values:\n", "  test:\n    enable: true\n  values:\n");
    repo.commit("tests on");
    let (plan, _) = plan_json(&repo, "HEAD~2", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    assert_eq!(sorted_changes(release), vec![("create".to_string(), "apps_web-smoke__Pod".to_string())]);
    assert_eq!(change(release, "apps_web-smoke__Pod").unwrap()["hook"]["events"], json!(["test"]));
}

/// `spec.postRenderStrategy`: `combined` (the default) post-renders the hooks with the manifest
/// (they carry the controller's labels), `nohooks` leaves them as the chart renders them (the
/// hook changes: its labels go), `separate` post-renders them on their own (no change).
#[test]
fn the_post_render_strategy_decides_whether_hooks_are_post_rendered() {
    let _ = helm(4);
    let labelled =
        RELEASE.replace("  values:\n", "  commonMetadata:\n    labels:\n      team: shop\n  values:\n");
    let repo = fleet(&labelled);
    let strategy = |value: &str| {
        let text = labelled.replace("  values:\n", &format!("  postRenderStrategy: {value}\n  values:\n"));
        repo.write("apps/web/release.yaml", &text);
        repo.commit(value);
    };
    strategy("nohooks");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    let migrate = "apps_web-migrate_batch_Job";
    assert_eq!(sorted_changes(release), vec![("update".to_string(), migrate.to_string())], "{release:#}");
    let diff = change(release, migrate).unwrap()["diff"].as_str().unwrap().to_string();
    for line in ["-    helm.toolkit.fluxcd.io/name: web", "-    team: shop"] {
        assert!(diff.contains(line), "{line} not in {diff}");
    }
    // The Deployment is post-rendered under every strategy.
    assert!(change(release, "apps_web_apps_Deployment").is_none());

    strategy("separate");
    let (plan, _) = plan_json(&repo, "HEAD~2", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    assert!(sorted_changes(release).is_empty(), "separate post-renders hooks as combined does: {release:#}");
}

/// A chart whose template calls `lookup` is named (warning `chart-lookup`), and a change to what
/// the release is rendered from is never `no-changes`, even where both renders agree (the branch
/// changed only runs when the API server answers). Near misses: a value named `lookupTable`, and
/// the same kind of change in a chart without `lookup`.
#[test]
fn lookup_is_named_and_its_release_never_reads_no_changes() {
    let _ = helm(4);
    let guarded = |name: &str| {
        format!(
            "{{{{- if {name} }}}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-extra\ndata:\n  a: b\n{{{{- end }}}}\n"
        )
    };
    let repo = fleet(RELEASE);
    repo.write(
        "charts/web/templates/extra.yaml",
        &guarded("(lookup \"v1\" \"Secret\" .Release.Namespace \"web-tls\")"),
    );
    repo.commit("lookup");
    edit(&repo, "charts/web/templates/extra.yaml", "a: b", "a: c");
    repo.commit("change under lookup");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(has_alert(&plan, "warning", "chart-lookup"), "{:?}", alert_codes(&plan));
    let alert = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "chart-lookup").unwrap();
    let message = alert["message"].as_str().unwrap();
    assert!(message.contains("calls lookup (templates/extra.yaml)"), "{message}");
    assert_eq!(alert["kustomization"], "HelmRelease apps/web");
    assert_eq!((plan["verdict"].as_str(), code), (Some("changes"), 1), "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "apps/web");
    assert_eq!(release["status"], "changed");
    assert!(sorted_changes(release).is_empty(), "nothing renders differently offline: {release:#}");

    // Near miss: no lookup, only a value named lookupTable; the same change is no change.
    let repo = fleet(&RELEASE.replace("replicas: 2\n", "replicas: 2\n    lookupTable: {}\n"));
    repo.write("charts/web/templates/extra.yaml", &guarded(".Values.lookupTable.enabled"));
    repo.commit("no lookup");
    edit(&repo, "charts/web/templates/extra.yaml", "a: b", "a: c");
    repo.commit("change under a value");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(!alert_codes(&plan).iter().any(|(_, c)| c == "chart-lookup"), "{:?}", alert_codes(&plan));
    assert_eq!((plan["verdict"].as_str(), code), (Some("no-changes"), 0), "{plan:#}");
}

/// `.Capabilities` read with no Kubernetes version known: the warning names Helm's built-in
/// version as the assumption. Near miss: `--kube-version` given.
#[test]
fn capabilities_without_a_kube_version_are_an_assumption() {
    let _ = helm(4);
    let repo = fleet(RELEASE);
    repo.write(
        "charts/web/templates/pdb.yaml",
        "{{- if .Capabilities.APIVersions.Has \"policy/v1\" }}\napiVersion: policy/v1\nkind: PodDisruptionBudget\n\
         metadata:\n  name: web\nspec:\n  minAvailable: 1\n  selector:\n    matchLabels: {app: web}\n{{- end }}\n",
    );
    repo.commit("a PDB where the cluster serves policy/v1");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let alert = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "capabilities-assumed");
    let message = alert.unwrap_or_else(|| panic!("{:?}", alert_codes(&plan)))["message"].as_str().unwrap();
    assert!(message.contains("reads .Capabilities (templates/pdb.yaml)"), "{message}");
    assert!(message.contains("Helm v4.1.4's built-in Kubernetes version"), "{message}");
    assert_eq!(alert.unwrap()["severity"], "warning");

    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--kube-version", "v1.31.0"]);
    assert!(!alert_codes(&plan).iter().any(|(_, c)| c == "capabilities-assumed"), "{:?}", alert_codes(&plan));
}
