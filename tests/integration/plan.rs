//! `fluxplan plan` end to end: real git, real kustomize, golden reports, exit codes.

use crate::fixture::{alert_codes, changes_of, has_alert, kustomization_in, plan_cli, plan_json, Repo};
use serde_json::Value;

const NAMESPACE_AND_APP: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.26\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  ports:\n  - port: 80\n";

const DATABASE: &str = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\n  namespace: shop\nspec:\n  serviceName: db\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: db-data\n  namespace: shop\nspec:\n  accessModes: [ReadWriteOnce]\n";

/// A fleet with `apps` (a Namespace, an app, and a nested Kustomization `db` owning a database).
fn fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/shop.yaml", NAMESPACE_AND_APP);
    repo.kustomization("apps/db.yaml", "db", "./db", "");
    repo.write("db/db.yaml", DATABASE);
    repo.mkdir("empty").write("empty/.keep", "");
    repo.commit("base");
    repo
}

#[test]
fn outage_path_to_an_empty_directory_is_blocked_with_everything_pruned() {
    let repo = fleet();
    let apps = std::fs::read_to_string(repo.path().join("clusters/prod/apps.yaml")).unwrap();
    repo.write("clusters/prod/apps.yaml", &apps.replace("path: ./apps", "path: ./empty"));
    repo.commit("the outage");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    assert_eq!(plan["verdict"], "blocked");
    assert_eq!(
        changes_of(&plan, "flux-system/apps"),
        // In the order the controller prunes: custom resources, workloads, ..., Namespaces last.
        vec![
            ("delete".into(), "flux-system_db_kustomize.toolkit.fluxcd.io_Kustomization".into()),
            ("delete".into(), "shop_web_apps_Deployment".into()),
            ("delete".into(), "shop_web__Service".into()),
            ("delete".into(), "_shop__Namespace".into()),
        ]
    );
    // The nested Kustomization goes with it, and its finalizer takes the database.
    assert_eq!(kustomization_in(&plan, "flux-system/db")["status"], "removed");
    assert_eq!(
        changes_of(&plan, "flux-system/db"),
        vec![
            ("delete".into(), "shop_db_apps_StatefulSet".into()),
            ("delete".into(), "shop_db-data__PersistentVolumeClaim".into()),
        ]
    );
    // One cause, one alert: the empty render, naming every facet of what it brings about.
    assert_eq!(alert_codes(&plan), vec![("danger".to_string(), "empty-render".to_string())]);
    let alert = &plan["alerts"][0];
    assert_eq!(alert["related_codes"], serde_json::json!(["protected-kind-deletion", "mass-deletion"]));
    assert_eq!(alert["objects"].as_array().unwrap().len(), 6, "every deletion, listed once");
    assert_eq!(
        plan["cause"],
        "clusters/prod/apps.yaml: Kustomization flux-system/apps path ./apps → ./empty"
    );
    assert_eq!(plan["deletions"], serde_json::json!({"pull-request": 4, "cascade": 2, "stale": 0}));
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    insta::assert_snapshot!("plan_outage_markdown", markdown);
    let (text, _) = plan_cli(&repo, "HEAD~1", "HEAD", "text", &[]);
    insta::assert_snapshot!("plan_outage_text", text);
}

#[test]
fn path_to_a_missing_directory_is_blocked_and_prunes_nothing() {
    let repo = fleet();
    let apps = std::fs::read_to_string(repo.path().join("clusters/prod/apps.yaml")).unwrap();
    repo.write("clusters/prod/apps.yaml", &apps.replace("path: ./apps", "path: ./typo"));
    repo.commit("typo");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    assert!(has_alert(&plan, "danger", "path-not-found"));
    let apps = kustomization_in(&plan, "flux-system/apps");
    assert_eq!(apps["status"], "failed");
    assert!(apps["changes"].as_array().unwrap().is_empty(), "a failed render prunes nothing");
    // db is no longer produced, but its object is not deleted: apps fails, so nothing cascades.
    assert!(changes_of(&plan, "flux-system/db").is_empty());
    let total_deletes = plan["summary"]["delete"].as_u64().unwrap();
    assert_eq!(total_deletes, 0);
}

#[test]
fn removed_nested_kustomization_cascades_through_its_children() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.kustomization("apps/team.yaml", "team", "./team", "");
    repo.config_map("team/cm.yaml", "team-config", "team");
    repo.kustomization("team/db.yaml", "team-db", "./team-db", "");
    repo.write("team-db/db.yaml", DATABASE);
    repo.kustomization("apps/orphaning.yaml", "keeper", "./keeper", "deletionPolicy: Orphan");
    repo.config_map("apps/stays.yaml", "stays", "default");
    repo.config_map("keeper/cm.yaml", "kept", "default");
    repo.commit("base");
    repo.remove("apps/team.yaml").remove("apps/orphaning.yaml");
    repo.commit("remove team and keeper");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    assert_eq!(
        changes_of(&plan, "flux-system/apps"),
        vec![
            ("delete".into(), "flux-system_keeper_kustomize.toolkit.fluxcd.io_Kustomization".into()),
            ("delete".into(), "flux-system_team_kustomize.toolkit.fluxcd.io_Kustomization".into()),
        ]
    );
    assert_eq!(
        changes_of(&plan, "flux-system/team"),
        vec![
            ("delete".into(), "flux-system_team-db_kustomize.toolkit.fluxcd.io_Kustomization".into()),
            ("delete".into(), "team_team-config__ConfigMap".into()),
        ]
    );
    assert_eq!(
        changes_of(&plan, "flux-system/team-db"),
        vec![
            ("delete".into(), "shop_db_apps_StatefulSet".into()),
            ("delete".into(), "shop_db-data__PersistentVolumeClaim".into()),
        ]
    );
    let db_change = &kustomization_in(&plan, "flux-system/team-db")["changes"][0];
    assert_eq!(db_change["cascade_from"], "Kustomization flux-system/team-db");
    // deletionPolicy Orphan keeps what it applied.
    assert_eq!(
        changes_of(&plan, "flux-system/keeper"),
        vec![("orphan".into(), "default_kept__ConfigMap".into())]
    );
    let removed: Vec<&str> = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["code"] == "kustomization-removed")
        .map(|a| a["kustomization"].as_str().unwrap())
        .collect();
    // One cause: removing `team` takes `team-db` with it; one alert says both.
    assert_eq!(removed, vec!["flux-system/team"]);
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    insta::assert_snapshot!("plan_removed_nested_markdown", markdown);
}

const SNAPSHOT: &str = r#"apiVersion: fluxplan.dev/v1alpha1
kind: ClusterSnapshot
kustomizations:
- apiVersion: kustomize.toolkit.fluxcd.io/v1
  kind: Kustomization
  metadata: {name: apps, namespace: flux-system}
  spec: {path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}
  status:
    inventory:
      entries:
      - {id: default_kept__ConfigMap, v: v1}
      - {id: default_protected__ConfigMap, v: v1}
      - {id: default_reconcile-off__ConfigMap, v: v1}
      - {id: default_ssa-ignored__ConfigMap, v: v1}
      - {id: default_taken-over__ConfigMap, v: v1}
      - {id: default_stale__ConfigMap, v: v1}
      - {id: default_gone__ConfigMap, v: v1}
objects:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: kept, namespace: default, labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: flux-system}}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: protected, namespace: default, labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: flux-system}, annotations: {kustomize.toolkit.fluxcd.io/prune: disabled}}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: reconcile-off, namespace: default, labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: flux-system, kustomize.toolkit.fluxcd.io/reconcile: disabled}}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: ssa-ignored, namespace: default, labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: flux-system}, annotations: {kustomize.toolkit.fluxcd.io/ssa: Ignore}}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: taken-over, namespace: default, labels: {kustomize.toolkit.fluxcd.io/name: someone-else, kustomize.toolkit.fluxcd.io/namespace: flux-system}}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: stale, namespace: default, labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: flux-system}}}
"#;

#[test]
fn snapshot_inventory_is_the_truth_and_protected_or_foreign_objects_are_skipped() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/kept.yaml", "kept", "default");
    repo.commit("base");
    repo.commit("head");
    let snapshot = repo.path().join("snapshot.yaml");
    std::fs::write(&snapshot, SNAPSHOT).unwrap();
    let (plan, code) =
        plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", snapshot.to_str().unwrap()]);
    let apps = kustomization_in(&plan, "flux-system/apps");
    assert_eq!(apps["inventory_source"], "cluster");
    let by_id: std::collections::BTreeMap<String, (String, String)> = apps["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                (c["action"].as_str().unwrap().to_string(), c["reason"].as_str().unwrap_or("").to_string()),
            )
        })
        .collect();
    // The stale entry is deleted though the base render never had it.
    assert_eq!(by_id["default_stale__ConfigMap"].0, "delete");
    for (id, why) in [
        ("default_protected__ConfigMap", "prune: disabled"),
        ("default_reconcile-off__ConfigMap", "reconcile: disabled"),
        ("default_ssa-ignored__ConfigMap", "ssa: Ignore"),
        ("default_taken-over__ConfigMap", "owner labels"),
        ("default_gone__ConfigMap", "not found"),
    ] {
        assert_eq!(by_id[id].0, "skip", "{id}");
        assert!(by_id[id].1.contains(why), "{id}: {}", by_id[id].1);
    }
    assert!(!by_id.contains_key("default_kept__ConfigMap"), "kept is unchanged");
    assert_eq!(code, 1, "one deletion, under every threshold: changes, not blocked");
    let (text, _) =
        plan_cli(&repo, "HEAD~1", "HEAD", "text", &["--cluster-snapshot", snapshot.to_str().unwrap()]);
    insta::assert_snapshot!("plan_snapshot_skips_text", text);
}

#[test]
fn object_moving_between_kustomizations_is_a_move_with_a_warning() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/a.yaml", "a", "./a", "");
    repo.kustomization("clusters/prod/b.yaml", "b", "./b", "");
    repo.config_map("a/shared.yaml", "shared", "default");
    repo.config_map("a/stays.yaml", "stays", "default");
    repo.config_map("b/other.yaml", "other", "default");
    repo.commit("base");
    repo.remove("a/shared.yaml");
    repo.config_map("b/shared.yaml", "shared", "default");
    repo.commit("move");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    assert_eq!(changes_of(&plan, "flux-system/a"), vec![("skip".into(), "default_shared__ConfigMap".into())]);
    assert_eq!(
        changes_of(&plan, "flux-system/b"),
        vec![("create".into(), "default_shared__ConfigMap".into())]
    );
    assert_eq!(kustomization_in(&plan, "flux-system/b")["changes"][0]["moved_from"], "flux-system/a");
    assert_eq!(kustomization_in(&plan, "flux-system/a")["changes"][0]["moved_to"], "flux-system/b");
    assert!(has_alert(&plan, "warning", "ownership-move"));
}

#[test]
fn image_bump_is_a_change_not_blocked() {
    let repo = fleet();
    repo.write("apps/shop.yaml", &NAMESPACE_AND_APP.replace("nginx:1.26", "nginx:1.27"));
    repo.commit("bump nginx");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    assert_eq!(plan["verdict"], "changes");
    assert_eq!(
        changes_of(&plan, "flux-system/apps"),
        vec![("update".into(), "shop_web_apps_Deployment".into())]
    );
    let diff = kustomization_in(&plan, "flux-system/apps")["changes"][0]["diff"].as_str().unwrap();
    assert!(diff.contains("-      - image: nginx:1.26\n+      - image: nginx:1.27\n"), "{diff}");
    // Only the image bump, listed (info).
    assert_eq!(alert_codes(&plan), [("info".to_string(), "major-bump".to_string())]);
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    insta::assert_snapshot!("plan_image_bump_markdown", markdown);
}

#[test]
fn no_op_pull_request_exits_0() {
    let repo = fleet();
    repo.write("README.md", "docs only\n");
    repo.commit("docs");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 0);
    assert_eq!(plan["verdict"], "no-changes");
    assert!(plan["kustomizations"].as_array().unwrap().iter().all(|k| k["status"] == "unchanged"));
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    insta::assert_snapshot!("plan_no_op_markdown", markdown);
}

#[test]
fn pull_request_cannot_loosen_its_own_policy() {
    let repo = fleet();
    let apps = std::fs::read_to_string(repo.path().join("clusters/prod/apps.yaml")).unwrap();
    repo.write("clusters/prod/apps.yaml", &apps.replace("path: ./apps", "path: ./empty"));
    repo.write(
        ".fluxplan.yaml",
        "alerts:\n  empty-render: off\n  mass-deletion: off\n  protected-kind-deletion: off\n  kustomization-removed: off\n",
    );
    repo.commit("outage with a looser policy");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "the base policy (built-in defaults) applies");
    assert_eq!(plan["policy_source"], "built-in defaults");
    assert!(has_alert(&plan, "danger", "empty-render"));
    assert!(has_alert(&plan, "warning", "policy-changed"));

    // Once merged, the looser policy is the base one and governs the next pull request.
    repo.write("clusters/prod/apps.yaml", &apps);
    repo.commit("path back");
    repo.write("apps/shop.yaml", "");
    repo.commit("empty shop");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(plan["policy_source"], ".fluxplan.yaml at base");
    assert!(!has_alert(&plan, "danger", "empty-render"), "{:?}", alert_codes(&plan));
    assert_eq!(code, 1);
}

#[test]
fn explicit_policy_file_and_invalid_base_policy() {
    let repo = fleet();
    repo.write(".fluxplan.yaml", "alerts:\n  no-such-alert: off\n");
    repo.commit("broken policy");
    repo.write("apps/shop.yaml", &NAMESPACE_AND_APP.replace("nginx:1.26", "nginx:1.27"));
    repo.commit("bump");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    assert!(has_alert(&plan, "warning", "policy-invalid"));
    let strict = repo.path().join("strict.yaml");
    std::fs::write(&strict, "massDeletion:\n  maxObjects: 0\nalerts:\n  build-failed: danger\n").unwrap();
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--policy", strict.to_str().unwrap()]);
    assert_eq!(plan["policy_source"], strict.to_str().unwrap());
}

#[test]
fn suspended_and_prune_off_kustomizations() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/paused.yaml", "paused", "./paused", "");
    repo.kustomization("clusters/prod/loose.yaml", "loose", "./loose", "");
    repo.config_map("paused/a.yaml", "a", "default");
    repo.config_map("loose/b.yaml", "b", "default");
    repo.write("loose/README.md", "keeps the directory\n");
    repo.commit("base");
    let paused = std::fs::read_to_string(repo.path().join("clusters/prod/paused.yaml")).unwrap();
    repo.write("clusters/prod/paused.yaml", &format!("{paused}  suspend: true\n"));
    let loose = std::fs::read_to_string(repo.path().join("clusters/prod/loose.yaml")).unwrap();
    repo.write("clusters/prod/loose.yaml", &loose.replace("prune: true", "prune: false"));
    repo.remove("paused/a.yaml").remove("loose/b.yaml");
    repo.commit("suspend one, stop pruning the other, empty both");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(kustomization_in(&plan, "flux-system/paused")["status"], "suspended");
    assert!(changes_of(&plan, "flux-system/paused").is_empty());
    assert_eq!(
        changes_of(&plan, "flux-system/loose"),
        vec![("orphan".into(), "default_b__ConfigMap".into())]
    );
    assert!(has_alert(&plan, "warning", "suspend-changed"));
    assert!(has_alert(&plan, "warning", "prune-changed"));
}

#[test]
fn out_writes_the_same_plan_in_other_formats() {
    let repo = fleet();
    repo.write("apps/shop.yaml", &NAMESPACE_AND_APP.replace("nginx:1.26", "nginx:1.27"));
    repo.commit("bump");
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str| dir.path().join(name).display().to_string();
    let outs = [format!("json={}", file("plan.json")), format!("markdown={}", file("plan.md"))];
    let (json, code) = plan_cli(&repo, "HEAD~1", "HEAD", "json", &["--out", &outs[0], "--out", &outs[1]]);
    assert_eq!(code, 1);
    assert_eq!(std::fs::read_to_string(file("plan.json")).unwrap(), json);
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert_eq!(std::fs::read_to_string(file("plan.md")).unwrap(), markdown);

    // A report that cannot be written fails the command: CI must not pass without it.
    let out = std::process::Command::new(crate::fixture::fluxplan_bin())
        .args(["plan", "--no-cache", "--base", "HEAD~1", "--head", "HEAD", "--repo"])
        .arg(repo.path())
        .args(["--out", &format!("json={}", file("missing/plan.json"))])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("cannot write the plan to {}", file("missing/plan.json"))), "{stderr}");
}

#[test]
fn unknown_revision_exits_3_with_a_failed_plan() {
    let repo = fleet();
    let (plan, code) = plan_json(&repo, "HEAD", "no-such-branch", &[]);
    assert_eq!(code, 3);
    assert_eq!(plan["verdict"], "failed");
    assert!(plan["error"].as_str().unwrap().contains("no-such-branch"));
    let (markdown, code) = plan_cli(&repo, "HEAD", "no-such-branch", "markdown", &[]);
    assert_eq!(code, 3);
    assert!(markdown.contains("could not plan") && markdown.contains("no-such-branch"), "{markdown}");
}

#[test]
fn splitter_cuts_a_large_plan_into_valid_parts() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.kustomization("clusters/prod/more.yaml", "more", "./more", "");
    let many: String = (0..1500)
        .map(|i| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config-with-a-long-name-{i:05}\n  namespace: default\ndata:\n  key: value-{i}\n---\n"))
        .collect();
    repo.write("apps/many.yaml", &many);
    repo.write("more/many.yaml", &many.replace("config-with", "more-config-with").replace("value-", "v1-"));
    repo.commit("base");
    repo.write("apps/many.yaml", "");
    repo.write("more/many.yaml", &many.replace("config-with", "more-config-with").replace("value-", "v2-"));
    repo.commit("delete everything in apps, change everything in more");
    let (markdown, code) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert_eq!(code, 2);
    assert!(markdown.len() > 200_000, "the plan is {} bytes", markdown.len());
    let parts = fluxplan::report::split::split(&markdown, fluxplan::report::split::GITHUB_COMMENT_LIMIT);
    assert!(parts.len() >= 4, "{} parts", parts.len());
    for (i, part) in parts.iter().enumerate() {
        assert!(part.chars().count() <= 65_536, "part {i}: {} characters", part.chars().count());
        assert!(part.starts_with("<!-- fluxplan -->\n"));
        assert!(part.contains(&format!("part {} of {}", i + 1, parts.len())));
        let fences = part.lines().filter(|l| l.trim_start().starts_with("```")).count();
        assert_eq!(fences % 2, 0, "part {i} breaks a code block");
        assert_eq!(
            part.matches("<details>").count(),
            part.matches("</details>").count(),
            "part {i} breaks a <details> section"
        );
    }
    let joined = parts.concat();
    for i in [0, 777, 1499] {
        assert!(joined.contains(&format!("ConfigMap default/config-with-a-long-name-{i:05}")), "{i} lost");
        assert!(joined.contains(&format!("+  key: v2-{i}")), "diff {i} lost");
    }
}

#[test]
fn demo_plans_the_outage_on_the_embedded_fleet() {
    let out = std::process::Command::new(crate::fixture::fluxplan_bin()).arg("demo").output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("fluxplan: BLOCKED"), "{stdout}");
    assert!(stdout.contains("empty-render flux-system/apps (clusters/production)"), "{stdout}");
    assert!(stdout.contains("delete Namespace podinfo"), "{stdout}");
}

#[test]
fn secret_changes_are_reported_without_their_values() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    let secret = |value: &str| {
        format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: default\nstringData:\n  password: {value}\n  user: admin\n")
    };
    repo.write("apps/secret.yaml", &secret("old-very-secret-value"));
    repo.commit("base");
    repo.write("apps/secret.yaml", &secret("new-very-secret-value"));
    repo.commit("rotate");
    let (json, code) = plan_cli(&repo, "HEAD~1", "HEAD", "json", &[]);
    assert_eq!(code, 1);
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    let (text, _) = plan_cli(&repo, "HEAD~1", "HEAD", "text", &[]);
    for output in [&json, &markdown, &text] {
        assert!(!output.contains("very-secret-value"), "a secret value leaked:\n{output}");
    }
    let plan: Value = serde_json::from_str(&json).unwrap();
    let change = &kustomization_in(&plan, "flux-system/apps")["changes"][0];
    assert_eq!(change["action"], "update");
    assert_eq!(
        change["hidden_changes"],
        serde_json::json!(["Secret stringData.password changed (value hidden)"])
    );
    assert!(markdown.contains("Secret stringData.password changed (value hidden)"));
}

#[test]
fn offline_the_base_manifest_protects_objects_marked_prune_disabled() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/a.yaml", "a", "default");
    repo.write(
        "apps/ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: keep\n  annotations:\n    kustomize.toolkit.fluxcd.io/prune: disabled\n",
    );
    repo.commit("base");
    repo.remove("apps/ns.yaml");
    repo.commit("stop managing the namespace");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(changes_of(&plan, "flux-system/apps"), vec![("skip".into(), "_keep__Namespace".into())]);
    assert!(!has_alert(&plan, "danger", "protected-kind-deletion"));
    assert_eq!(code, 0, "nothing changes in the cluster");
}

/// The fleet, with a Kustomization `broken` whose build fails (a resource missing from its
/// directory) and one `remote` built from a remote base: both fail before any pull request.
fn fleet_with_failing_units() -> Repo {
    let repo = fleet();
    repo.kustomization("clusters/prod/broken.yaml", "broken", "./broken", "");
    repo.write("broken/kustomization.yaml", "resources:\n- missing.yaml\n- cm.yaml\n");
    repo.config_map("broken/cm.yaml", "cm", "default");
    repo.kustomization("clusters/prod/remote.yaml", "remote", "./remote", "");
    repo.write("remote/kustomization.yaml", "resources:\n- https://github.com/acme/bases//app?ref=v1\n");
    repo.commit("failing units");
    repo
}

#[test]
fn a_failure_that_is_not_the_pull_requests_is_a_standing_note_and_blocks_nothing() {
    let repo = fleet_with_failing_units();
    repo.write("apps/shop.yaml", &NAMESPACE_AND_APP.replace("nginx:1.26", "nginx:1.27"));
    repo.commit("an unrelated image bump");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(plan["verdict"], "changes", "{:#}", plan["alerts"]);
    assert_eq!(code, 1);
    let codes = alert_codes(&plan);
    assert_eq!(
        codes.iter().filter(|(severity, code)| severity == "warning" && code == "failing-before").count(),
        2,
        "{codes:?}"
    );
    assert!(!codes.iter().any(|(severity, _)| severity == "danger"), "{codes:?}");
    let remote = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kustomization"] == "flux-system/remote")
        .expect("the remote base's alert");
    let message = remote["message"].as_str().unwrap();
    assert!(message.contains("fluxplan could not plan it before this merge either"), "{message}");
    assert!(
        !message.contains("applies and prunes nothing"),
        "fluxplan's gap is not the controller's: {message}"
    );
    // Standing: said once, below the plan, not among this plan's news.
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    let (news, footer) = markdown.split_once("standing note").expect("a footer of standing notes");
    assert!(!news.contains("failing-before"), "{markdown}");
    assert!(footer.contains("failing-before"), "{markdown}");
}

#[test]
fn a_failing_unit_the_pull_request_touches_still_blocks() {
    // It changes a file the failing unit reads: still failing the same way, but its news.
    let repo = fleet_with_failing_units();
    repo.write(
        "broken/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm2\n  namespace: default\n",
    );
    repo.commit("edit a file of the broken unit");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{:#}", plan["alerts"]);
    assert!(has_alert(&plan, "danger", "build-failed"));
    assert!(
        has_alert(&plan, "warning", "failing-before"),
        "the remote unit is still not this pull request's"
    );
    // It changes the failing unit's own object.
    let repo = fleet_with_failing_units();
    let file = repo.path().join("clusters/prod/broken.yaml");
    let spec = std::fs::read_to_string(&file).unwrap();
    repo.write("clusters/prod/broken.yaml", &spec.replace("interval: 10m", "interval: 5m"));
    repo.commit("edit the broken unit");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{:#}", plan["alerts"]);
    assert!(has_alert(&plan, "danger", "build-failed"));
    // It breaks a unit that built before: a failure of its own.
    let repo = fleet_with_failing_units();
    repo.write("apps/kustomization.yaml", "resources:\n- shop.yaml\n- gone.yaml\n");
    repo.commit("break apps");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    let apps =
        plan["alerts"].as_array().unwrap().iter().find(|a| a["kustomization"] == "flux-system/apps").unwrap();
    assert_eq!((apps["severity"].as_str(), apps["code"].as_str()), (Some("danger"), Some("build-failed")));
}
