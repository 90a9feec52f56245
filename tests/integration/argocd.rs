//! Argo CD repositories end to end: the example fleet in `examples/argocd` planned through the
//! real CLI, real git and real kustomize, with golden plans for the shapes that cause outages.

use crate::fixture::{changes_of, edit, kustomization_in, plan_cli, plan_json, Repo};
use serde_json::{json, Value};
use std::path::Path;

const REMOTE: &str = "https://github.com/acme/argocd-fleet.git";

/// The example fleet committed as `base`, in a repository whose origin is the fleet's URL.
pub(crate) fn fleet() -> Repo {
    let repo = Repo::new(REMOTE);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/argocd");
    copy(&example, &example, &repo);
    repo.commit("base");
    repo
}

fn copy(root: &Path, dir: &Path, repo: &Repo) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            copy(root, &path, repo);
        } else {
            let relative = path.strip_prefix(root).unwrap().to_string_lossy().to_string();
            repo.write(&relative, &std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// The example fleet with the ApplicationSet's `syncPolicy` set to `policy` (one line), committed.
fn fleet_with_platform_policy(policy: &str) -> Repo {
    let repo = fleet();
    let with_policy = format!("  goTemplate: true\n  syncPolicy:\n    {policy}");
    edit(&repo, "apps/platform.yaml", "  goTemplate: true", &with_policy);
    repo.commit(policy);
    repo
}

fn alerts(plan: &Value) -> Vec<(String, String, String)> {
    let list = plan["alerts"].as_array().unwrap().iter();
    list.map(|a| {
        let text = |key: &str| a[key].as_str().unwrap_or("").to_string();
        (text("severity"), text("code"), text("kustomization"))
    })
    .collect()
}

fn pair(action: &str, id: &str) -> (String, String) {
    (action.to_string(), id.to_string())
}

/// The plan's JSON and markdown, checked against the golden markdown `name`.
fn planned(repo: &Repo, name: &str) -> (Value, i32) {
    let (plan, code) = plan_json(repo, "HEAD~1", "HEAD", &[]);
    let (markdown, markdown_code) = plan_cli(repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert_eq!(code, markdown_code);
    insta::assert_snapshot!(name, markdown);
    (plan, code)
}

#[test]
fn the_example_fleet_renders_every_application_with_argo_cds_rules() {
    let repo = fleet();
    let out = std::process::Command::new(crate::fixture::fluxplan_bin())
        .args(["build", "--no-cache", "--format", "ids", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    insta::assert_snapshot!("argocd_fleet_ids", String::from_utf8(out.stdout).unwrap());

    let render = repo.render(Some("HEAD"));
    let guestbook = render.find("argocd/guestbook").unwrap();
    let deployment = guestbook.objects.iter().find(|o| o.object["kind"] == "Deployment").unwrap();
    // The Application's kustomize overrides apply: image and common labels.
    assert_eq!(deployment.object["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27");
    assert_eq!(deployment.object["metadata"]["labels"]["team"], "web");
    // The destination namespace fills in what the manifests leave out.
    assert_eq!(deployment.object["metadata"]["namespace"], "guestbook");
    // The PreSync Job is a hook, not a managed resource.
    assert!(guestbook.objects.iter().all(|o| o.object["kind"] != "Job"));
    let hooks = &guestbook.argocd.as_ref().unwrap().hooks;
    assert_eq!(hooks.len(), 1);
    assert_eq!(
        (hooks[0].object.as_str(), hooks[0].phases.as_slice()),
        ("Job guestbook/guestbook-migrate", &["PreSync".to_string()][..])
    );
    // The directory source recurses and leaves out what its exclude names (README.md).
    let legacy = render.find("argocd/legacy").unwrap();
    assert_eq!(legacy.ids(), ["legacy_legacy-settings__ConfigMap", "legacy_legacy-web_apps_Deployment"]);
    // JSON files of a directory source are manifests too.
    assert!(render.find("argocd/shop").unwrap().ids().contains(&"shop_shop-settings__ConfigMap".to_string()));
    // The ApplicationSet's git directory generator made one Application per directory.
    assert_eq!(
        render.find("argocd/platform").unwrap().ids(),
        ["argocd_api_argoproj.io_Application", "argocd_worker_argoproj.io_Application"]
    );
    assert_eq!(render.clusters.len(), 1, "one root: the app-of-apps applied by hand");
}

#[test]
fn an_image_bump_updates_the_deployment_and_says_which_hook_runs() {
    let repo = fleet();
    edit(&repo, "apps/guestbook.yaml", "nginx:1.27", "nginx:1.28");
    repo.commit("bump guestbook");
    let (plan, code) = planned(&repo, "argocd_image_bump_markdown");
    assert_eq!(code, 1);
    assert_eq!(plan["verdict"], "changes");
    let guestbook = kustomization_in(&plan, "argocd/guestbook");
    assert_eq!(
        (guestbook["engine"].as_str(), guestbook["kind"].as_str()),
        (Some("argocd"), Some("Application"))
    );
    assert_eq!(
        changes_of(&plan, "argocd/guestbook"),
        [pair("update", "guestbook_guestbook_apps_Deployment")]
    );
    assert!(guestbook["changes"][0]["diff"].as_str().unwrap().contains("+      - image: nginx:1.28"));
    assert_eq!(
        guestbook["notes"],
        json!(["the sync runs a hook, not managed resources: Job guestbook/guestbook-migrate on PreSync"])
    );
    // The image bump is listed (info), nothing else.
    assert_eq!(alerts(&plan), [("info".to_string(), "major-bump".to_string(), String::new())]);
}

#[test]
fn an_emptied_path_with_prune_is_refused_by_allow_empty_and_still_blocks() {
    let repo = fleet();
    edit(&repo, "apps/shop.yaml", "path: workloads/shop", "path: workloads/nothing");
    repo.commit("the outage, Argo CD edition");
    let (plan, code) = planned(&repo, "argocd_path_emptied_refused_markdown");
    assert_eq!(code, 2);
    // Argo CD refuses the automated sync: nothing is deleted, and the plan does not pretend.
    assert_eq!(
        changes_of(&plan, "argocd/shop"),
        [
            pair("skip", "shop_shop-settings__ConfigMap"),
            pair("skip", "shop_shop__Service"),
            pair("skip", "shop_shop_apps_Deployment"),
        ]
    );
    assert_eq!(plan["summary"]["delete"], 0);
    assert!(kustomization_in(&plan, "argocd/shop")["changes"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("allowEmpty is false"));
    assert_eq!(alerts(&plan), [("danger".into(), "empty-render".into(), "argocd/shop".into())]);
    assert_eq!(
        plan["cause"],
        "apps/shop.yaml: Application argocd/shop path workloads/shop → workloads/nothing"
    );
}

#[test]
fn an_emptied_path_with_allow_empty_deletes_everything() {
    let repo = fleet();
    edit(&repo, "apps/shop.yaml", "path: workloads/shop", "path: workloads/nothing");
    edit(&repo, "apps/shop.yaml", "      selfHeal: true", "      selfHeal: true\n      allowEmpty: true");
    repo.commit("the outage, allowed");
    let (plan, code) = planned(&repo, "argocd_path_emptied_allow_empty_markdown");
    assert_eq!(code, 2);
    assert_eq!(
        changes_of(&plan, "argocd/shop"),
        [
            pair("delete", "shop_shop_apps_Deployment"),
            pair("delete", "shop_shop__Service"),
            pair("delete", "shop_shop-settings__ConfigMap"),
        ]
    );
    assert_eq!(alerts(&plan), [("danger".into(), "empty-render".into(), "argocd/shop".into())]);
}

#[test]
fn an_emptied_path_without_prune_leaves_everything_out_of_sync() {
    let repo = fleet();
    edit(&repo, "apps/legacy.yaml", "path: workloads/legacy", "path: workloads/nothing");
    repo.commit("legacy emptied");
    let (plan, code) = planned(&repo, "argocd_path_emptied_no_prune_markdown");
    assert_eq!(
        code, 2,
        "an empty render is dangerous whatever prune says: the next sync with prune deletes it"
    );
    assert_eq!(
        changes_of(&plan, "argocd/legacy"),
        [
            pair("orphan", "legacy_legacy-settings__ConfigMap"),
            pair("orphan", "legacy_legacy-web_apps_Deployment")
        ]
    );
    let legacy = kustomization_in(&plan, "argocd/legacy");
    assert!(legacy["changes"][0]["reason"].as_str().unwrap().contains("requires pruning"));
    assert!(legacy["notes"][0].as_str().unwrap().starts_with("manual sync"));
    assert_eq!(plan["summary"]["delete"], 0);
}

#[test]
fn removing_a_generated_directory_deletes_its_application_and_the_finalizer_its_resources() {
    let repo = fleet();
    repo.remove("services/worker");
    repo.commit("retire the worker");
    let (plan, code) = planned(&repo, "argocd_appset_directory_removed_markdown");
    assert_eq!(code, 2);
    assert_eq!(
        changes_of(&plan, "argocd/platform"),
        [pair("delete", "argocd_worker_argoproj.io_Application")]
    );
    let worker = kustomization_in(&plan, "argocd/worker");
    assert_eq!(worker["status"], "removed");
    assert_eq!(
        changes_of(&plan, "argocd/worker"),
        [pair("delete", "worker_worker_apps_Deployment"), pair("delete", "worker_worker__Service")]
    );
    assert_eq!(worker["changes"][0]["cascade_from"], "Application argocd/worker");
    assert_eq!(plan["deletions"], json!({"pull-request": 1, "cascade": 2, "stale": 0}));
    assert_eq!(
        plan["cause"],
        "ApplicationSet argocd/platform no longer generates Application argocd/worker (source path services/worker)"
    );
}

#[test]
fn a_generator_glob_that_stops_matching_deletes_every_generated_application() {
    let repo = fleet();
    edit(&repo, "apps/platform.yaml", "path: services/*", "path: service/*");
    repo.commit("typo");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    assert_eq!(plan["deletions"]["cascade"], 4, "both Applications' resources go with them");
    assert_eq!(alerts(&plan), [("danger".into(), "empty-render".into(), "argocd/platform".into())]);
    assert_eq!(
        plan["cause"],
        "apps/platform.yaml: ApplicationSet argocd/platform generators git services/* → git service/*"
    );
}

#[test]
fn preserve_resources_on_deletion_keeps_a_generated_applications_resources() {
    let repo = fleet_with_platform_policy("preserveResourcesOnDeletion: true");
    repo.remove("services/worker");
    repo.commit("retire the worker");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    assert_eq!(
        changes_of(&plan, "argocd/worker"),
        [pair("orphan", "worker_worker__Service"), pair("orphan", "worker_worker_apps_Deployment")]
    );
    let note = kustomization_in(&plan, "argocd/worker")["notes"][0].as_str().unwrap().to_string();
    assert!(note.contains("preserves resources on deletion"), "{note}");
}

#[test]
fn create_only_application_sets_never_delete_what_they_generated() {
    let repo = fleet_with_platform_policy("applicationsSync: create-only");
    repo.remove("services/worker");
    repo.commit("retire the worker");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    assert_eq!(
        changes_of(&plan, "argocd/platform"),
        [pair("orphan", "argocd_worker_argoproj.io_Application")]
    );
    assert_eq!(changes_of(&plan, "argocd/worker"), []);
    assert_eq!(plan["summary"]["delete"], 0);
}

#[test]
fn removing_an_application_with_the_finalizer_deletes_its_resources_but_delete_false() {
    let repo = fleet();
    repo.remove("apps/guestbook.yaml");
    repo.commit("drop guestbook");
    let (plan, code) = planned(&repo, "argocd_app_removed_finalizer_markdown");
    assert_eq!(code, 2);
    assert_eq!(
        changes_of(&plan, "argocd/guestbook"),
        [
            pair("delete", "guestbook_guestbook_apps_Deployment"),
            pair("delete", "guestbook_guestbook__Service"),
            pair("skip", "guestbook_guestbook-data__PersistentVolumeClaim"),
        ]
    );
    let claim = &kustomization_in(&plan, "argocd/guestbook")["changes"][2];
    assert!(claim["reason"].as_str().unwrap().contains("Delete=false"));
    assert_eq!(alerts(&plan), [("danger".into(), "kustomization-removed".into(), "argocd/guestbook".into())]);
}

#[test]
fn removing_an_application_without_the_finalizer_orphans_its_resources() {
    let repo = fleet();
    repo.remove("apps/legacy.yaml");
    repo.commit("drop legacy");
    let (plan, code) = planned(&repo, "argocd_app_removed_no_finalizer_markdown");
    assert_eq!(code, 1);
    assert_eq!(
        changes_of(&plan, "argocd/legacy"),
        [
            pair("orphan", "legacy_legacy-settings__ConfigMap"),
            pair("orphan", "legacy_legacy-web_apps_Deployment")
        ]
    );
    assert_eq!(plan["summary"]["delete"], 1, "only the Application object itself");
}

#[test]
fn a_new_generated_application_creates_its_namespace() {
    let repo = fleet();
    for file in ["deployment.yaml", "service.yaml"] {
        let text = std::fs::read_to_string(repo.path().join("services/api").join(file)).unwrap();
        repo.write(
            &format!("services/cache/{file}"),
            &text.replace(": api", ": cache").replace("acme/api", "acme/cache"),
        );
    }
    repo.commit("add cache");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    assert_eq!(kustomization_in(&plan, "argocd/cache")["status"], "added");
    assert_eq!(
        changes_of(&plan, "argocd/cache"),
        [
            pair("create", "_cache__Namespace"),
            pair("create", "cache_cache__Service"),
            pair("create", "cache_cache_apps_Deployment")
        ]
    );
}

#[test]
fn the_app_of_apps_emptied_is_caught() {
    let repo = fleet();
    edit(&repo, "bootstrap/root.yaml", "path: apps", "path: workloads/nothing");
    repo.commit("root emptied");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    assert!(alerts(&plan).contains(&("danger".into(), "empty-render".into(), "argocd/root".into())));
    // Argo CD refuses to empty the root (allowEmpty is false): no Application is deleted.
    assert_eq!(plan["summary"]["delete"], 0);
}

#[test]
fn sources_fluxplan_does_not_render_are_external_and_said_plainly() {
    let repo = fleet();
    edit(
        &repo,
        "apps/shop.yaml",
        "repoURL: https://github.com/acme/argocd-fleet\n",
        "repoURL: https://github.com/other/repo\n",
    );
    repo.write(
        "apps/monitoring.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: monitoring\n  namespace: argocd\nspec:\n  generators:\n  - clusters: {}\n  template:\n    metadata:\n      name: 'monitoring-{{name}}'\n    spec:\n      project: default\n      source:\n        repoURL: https://github.com/acme/argocd-fleet.git\n        path: services/api\n      destination:\n        server: '{{server}}'\n        namespace: monitoring\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: redis\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: https://charts.bitnami.com/bitnami\n    chart: redis\n    targetRevision: 19.0.0\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: redis\n",
    );
    repo.commit("external sources");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    // shop, re-pointed to another repository, blocks (`source-moved`); the new ones are notes.
    assert_eq!(code, 2);
    let moved: Vec<&serde_json::Value> =
        plan["alerts"].as_array().unwrap().iter().filter(|a| a["code"] == "source-moved").collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(
        (&moved[0]["severity"], &moved[0]["kustomization"]),
        (&json!("danger"), &json!("argocd/shop"))
    );
    assert!(moved[0]["message"].as_str().unwrap().contains("github.com/other/repo"), "{moved:?}");
    let external: Vec<(String, String)> = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["code"] == "external-source")
        .map(|a| {
            (a["kustomization"].as_str().unwrap().to_string(), a["message"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(external.len(), 2, "{external:?}");
    assert!(
        external[0].1.contains("clusters generator depends on state outside the repository"),
        "{external:?}"
    );
    assert!(external[1].1.contains("Helm chart redis"), "{external:?}");
    assert_eq!(kustomization_in(&plan, "argocd/shop")["status"], "external");
    // A repository URL given with --repo-url is this repository.
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--repo-url", "https://github.com/other/repo"]);
    assert_eq!(kustomization_in(&plan, "argocd/shop")["status"], "unchanged");
}

#[test]
fn a_hostile_path_never_leaves_the_repository() {
    let repo = fleet();
    edit(&repo, "apps/legacy.yaml", "path: workloads/legacy", "path: ../../../../../etc");
    edit(&repo, "apps/shop.yaml", "path: workloads/shop", "path: /proc/self");
    repo.commit("escape");
    let render = repo.render(Some("HEAD"));
    for app in ["argocd/legacy", "argocd/shop"] {
        let message = crate::fixture::error_of(&render, app, "path-not-found");
        assert!(message.contains("Argo CD cannot generate the manifests"), "{message}");
    }
    // Climbing out is refused, as Argo CD refuses it, not clamped to somewhere inside.
    let message = crate::fixture::error_of(&render, "argocd/legacy", "path-not-found");
    assert!(message.contains("leaves the repository"), "{message}");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "an Application that cannot render blocks, as a Kustomization does");
    assert!(alerts(&plan).contains(&("danger".into(), "path-not-found".into(), "argocd/legacy".into())));
    assert_eq!(plan["summary"]["delete"], 0, "a failed render prunes nothing");
}

#[test]
fn prune_last_objects_are_deleted_after_the_others() {
    let repo = fleet();
    edit(
        &repo,
        "workloads/shop/shop.yaml",
        "  name: shop\nspec:\n  replicas: 2",
        "  name: shop\n  annotations:\n    argocd.argoproj.io/sync-options: PruneLast=true\nspec:\n  replicas: 2",
    );
    repo.commit("prune the deployment last");
    repo.remove("workloads/shop/shop.yaml");
    repo.commit("retire the shop's workload");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    // Without PruneLast the Deployment would go first (deletions run in reverse apply order).
    assert_eq!(
        changes_of(&plan, "argocd/shop"),
        [pair("delete", "shop_shop__Service"), pair("delete", "shop_shop_apps_Deployment")]
    );
    let last = &kustomization_in(&plan, "argocd/shop")["changes"][1];
    assert!(
        last["reason"].as_str().unwrap().ends_with("once everything else is applied and healthy"),
        "{last}"
    );
}

#[test]
fn one_repository_can_hold_flux_and_argo_cd() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/settings.yaml", "settings", "default");
    repo.write(
        "argocd/root.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: git@github.com:acme/fleet.git\n    path: argocd/web\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: web\n  syncPolicy:\n    automated:\n      prune: true\n",
    );
    repo.config_map("argocd/web/settings.yaml", "web-settings", "web");
    repo.commit("base");
    repo.config_map("apps/settings.yaml", "settings-v2", "default");
    repo.config_map("argocd/web/settings.yaml", "web-settings-v2", "web");
    repo.commit("rename both");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    assert_eq!(kustomization_in(&plan, "flux-system/apps")["engine"], "flux");
    assert_eq!(kustomization_in(&plan, "argocd/web")["engine"], "argocd");
    assert_eq!(
        changes_of(&plan, "argocd/web"),
        [pair("create", "web_web-settings-v2__ConfigMap"), pair("delete", "web_web-settings__ConfigMap")]
    );
    assert_eq!(changes_of(&plan, "flux-system/apps").len(), 2);
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert!(markdown.contains("| Cluster | Kustomization / Application |"), "{markdown}");
}

#[test]
fn secret_values_of_an_application_never_reach_the_plan() {
    let repo = fleet();
    repo.write(
        "workloads/shop/credentials.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: shop-db\nstringData:\n  password: hunter2-base\n",
    );
    repo.commit("a secret in a directory source");
    repo.write(
        "workloads/shop/credentials.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: shop-db\nstringData:\n  password: hunter2-head\n",
    );
    repo.commit("rotate it");
    for format in ["json", "markdown", "text"] {
        let (out, code) = plan_cli(&repo, "HEAD~1", "HEAD", format, &[]);
        assert_eq!(code, 1, "{out}");
        assert!(!out.contains("hunter2"), "{format}: {out}");
    }
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let change = &kustomization_in(&plan, "argocd/shop")["changes"][0];
    assert_eq!(change["id"], "shop_shop-db__Secret");
    assert_eq!(change["hidden_changes"], json!(["Secret stringData.password changed (value hidden)"]));
}

#[test]
fn an_application_set_that_never_updates_keeps_what_it_generated() {
    let repo = fleet_with_platform_policy("applicationsSync: create-only");
    edit(
        &repo,
        "apps/platform.yaml",
        "        namespace: '{{ .path.basename }}'",
        "        namespace: 'svc-{{ .path.basename }}'",
    );
    repo.write("services/cache/config.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cache\n");
    repo.commit("move services to svc- namespaces");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    // The existing Applications keep their spec: nothing moves.
    assert_eq!(changes_of(&plan, "argocd/api"), []);
    assert_eq!(changes_of(&plan, "argocd/worker"), []);
    // A new one follows the new template.
    assert_eq!(
        changes_of(&plan, "argocd/platform"),
        [pair("create", "argocd_cache_argoproj.io_Application")]
    );
    assert_eq!(
        changes_of(&plan, "argocd/cache"),
        [pair("create", "_svc-cache__Namespace"), pair("create", "svc-cache_cache__ConfigMap")]
    );
}

#[test]
fn a_kept_application_stays_in_its_own_cluster() {
    // A second root (another cluster) whose create-only ApplicationSet generates Applications of
    // the same names, into namespaces of its own.
    let repo = fleet_with_platform_policy("applicationsSync: create-only");
    let staging = std::fs::read_to_string(repo.path().join("apps/platform.yaml"))
        .unwrap()
        .replace("name: platform", "name: staging-platform")
        .replace("namespace: '{{ .path.basename }}'", "namespace: 'staging-{{ .path.basename }}'")
        .replace("server: https://kubernetes.default.svc", "server: https://staging.example.com");
    repo.write("clusters/staging.yaml", &staging);
    repo.commit("a staging cluster");
    edit(
        &repo,
        "apps/platform.yaml",
        "        namespace: '{{ .path.basename }}'",
        "        namespace: 'svc-{{ .path.basename }}'",
    );
    repo.commit("move services to svc- namespaces");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    let changed: Vec<String> = plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| !k["changes"].as_array().unwrap().is_empty())
        .map(|k| {
            format!("{} {}/{}", k["cluster"].as_str().unwrap(), k["namespace"], k["name"]).replace('"', "")
        })
        .collect();
    // Only the ApplicationSet changes: the Applications keep their spec in both clusters.
    assert_eq!(changed, ["argocd/root argocd/root"]);
}

#[test]
fn a_malformed_manifest_in_a_directory_source_fails_its_application_only() {
    let repo = fleet();
    repo.write(
        "workloads/shop/broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: [not, a, mapping]\n",
    );
    repo.write(
        "workloads/legacy/child.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: 7\n",
    );
    repo.commit("broken manifests");
    let render = repo.render(Some("HEAD"));
    for app in ["argocd/shop", "argocd/legacy"] {
        let message = crate::fixture::error_of(&render, app, "invalid-source");
        assert!(message.contains("is not a Kubernetes object"), "{message}");
    }
    assert_eq!(render.find("argocd/guestbook").unwrap().status, fluxplan::render::Status::Rendered);
}

/// Argo CD names a hook by `generateName` anew on each sync; only hooks may go without a name.
#[test]
fn a_hook_named_by_generate_name_is_a_hook_and_a_resource_without_a_name_is_refused() {
    let repo = fleet();
    repo.write(
        "workloads/shop/smoke.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: smoke-\n  annotations:\n    \
         argocd.argoproj.io/hook: PostSync\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      \
         containers:\n      - name: smoke\n        image: busybox\n",
    );
    repo.commit("a smoke test hook");
    let render = repo.render(Some("HEAD"));
    let shop = render.find("argocd/shop").unwrap();
    assert_eq!(shop.status, fluxplan::render::Status::Rendered, "{:?}", shop.error);
    let hooks = &shop.argocd.as_ref().unwrap().hooks;
    assert!(
        hooks.iter().any(|h| h.object.ends_with("/smoke-") && h.phases == ["PostSync".to_string()]),
        "{:?}",
        hooks.iter().map(|h| &h.object).collect::<Vec<_>>()
    );
    // Neither a resource nor one whose Helm hook is crd-install (no hook to Argo CD) goes without
    // a name.
    for (what, annotations) in
        [("a resource", ""), ("a crd-install resource", "  annotations:\n    helm.sh/hook: crd-install\n")]
    {
        repo.write(
            "workloads/shop/unnamed.yaml",
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: x-\n{annotations}"),
        );
        repo.commit(&format!("{what} named by generateName"));
        let render = repo.render(Some("HEAD"));
        let message = crate::fixture::error_of(&render, "argocd/shop", "invalid-source");
        assert!(message.contains("generateName for a hook"), "{what}: {message}");
    }
}

#[test]
fn applications_only_a_cycle_renders_are_said_to_be_unreached() {
    let repo = fleet();
    let app = |name: &str, path: &str| {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: {REMOTE}\n    path: {path}\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: argocd\n"
        )
    };
    // a renders b's directory, b renders a's: no root reaches either.
    repo.write("loop/a/app.yaml", &app("loop-b", "loop/b"));
    repo.write("loop/b/app.yaml", &app("loop-a", "loop/a"));
    repo.commit("a loop");
    let render = repo.render(Some("HEAD"));
    assert!(render.find("argocd/loop-a").is_none() && render.find("argocd/loop-b").is_none());
    let unreached: Vec<&String> =
        render.warnings.iter().filter(|w| w.contains("not reached from any root")).collect();
    assert_eq!(unreached.len(), 2, "{:?}", render.warnings);
    assert!(unreached[0].starts_with("loop/a/app.yaml: Application argocd/loop-b"), "{unreached:?}");
}
