//! No silent pass: a plan or build that finds nothing to plan fails (exit 3) and says what to fix;
//! an explicit kustomize that does not work is an error; roots no cluster covers are flagged;
//! names substituted from Secrets match the inventory and stay masked. Plus the CLI papercuts:
//! `demo --dir`, `migrate`, `--help`.

use crate::fixture::{alert_codes, fluxplan_bin, has_alert, kustomization_in, plan_json, Repo};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs the binary; returns stdout, stderr and the exit code.
fn run(args: &[&str], env: &[(&str, &str)], dir: Option<&Path>) -> (String, String, i32) {
    let mut cmd = Command::new(fluxplan_bin());
    cmd.args(args).envs(env.iter().copied());
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let out = cmd.output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (text(out.stdout), text(out.stderr), out.status.code().unwrap())
}

fn plan_args<'a>(repo: &'a str, format: &'a str) -> Vec<&'a str> {
    vec!["plan", "--no-cache", "--base", "HEAD~1", "--head", "HEAD", "--format", format, "--repo", repo]
}

/// A git repository with YAML but no Flux Kustomization.
fn repo_without_kustomizations() -> Repo {
    let repo = Repo::new("git@github.com:acme/not-flux.git");
    repo.write("deploy/app.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n");
    repo.commit("base");
    repo.write("README.md", "not a Flux repository\n");
    repo.commit("head");
    repo
}

#[test]
fn plan_without_any_kustomization_fails_with_exit_3_and_says_so() {
    let repo = repo_without_kustomizations();
    let dir = repo.path().to_str().unwrap();
    let (stdout, stderr, code) = run(&plan_args(dir, "json"), &[], None);
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(plan["verdict"], "failed");
    let expected =
        format!("no Flux Kustomization or Argo CD Application under {dir}; is this the repository root?");
    assert!(plan["error"].as_str().unwrap().contains(&expected), "{}", plan["error"]);
    assert!(stderr.contains(&expected), "{stderr}");
    // Not a subdirectory of anything: no hint to follow.
    assert!(!stderr.contains("try --repo"), "{stderr}");
    let (text, _, code) = run(&plan_args(dir, "text"), &[], None);
    assert_eq!(code, 3, "{text}");
}

#[test]
fn build_without_any_kustomization_fails_with_exit_3_and_says_so() {
    let repo = repo_without_kustomizations();
    let dir = repo.path().to_str().unwrap();
    for rev in [None, Some("HEAD")] {
        let mut args = vec!["build", "--no-cache", "--format", "ids", "--repo", dir];
        args.extend(rev.iter().flat_map(|rev| ["--rev", *rev]));
        let (stdout, stderr, code) = run(&args, &[], None);
        assert_eq!(code, 3, "{rev:?}: {stdout}\n{stderr}");
        assert_eq!(stdout, "", "nothing rendered, nothing printed");
        assert!(
            stderr.contains(&format!(
                "no Flux Kustomization or Argo CD Application under {dir}; is this the repository root?"
            )),
            "{stderr}"
        );
        // An Argo CD repository whose root Application is kept elsewhere: how to declare one.
        assert!(stderr.contains("commit that Application here") && stderr.contains("--repo-url"), "{stderr}");
    }
}

#[test]
fn a_subdirectory_without_kustomizations_names_the_repository_root_to_use() {
    let repo = Repo::bootstrap("prod");
    repo.write("docs/notes.yaml", "title: notes\n");
    repo.commit("base");
    repo.write("docs/more.yaml", "title: more\n");
    repo.commit("head");
    let subdir = repo.path().join("docs");
    let top = std::fs::canonicalize(repo.path()).unwrap();
    let (stdout, stderr, code) = run(&plan_args(subdir.to_str().unwrap(), "json"), &[], None);
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    let error = plan["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("no Flux Kustomization or Argo CD Application under {}", subdir.display())),
        "{error}"
    );
    let hint = format!(
        "is a subdirectory of the git repository at {}, which has Flux Kustomizations",
        top.display()
    );
    assert!(error.contains(&hint), "{error}");
    assert!(error.contains(&format!("try --repo {}", top.display())), "{error}");
}

#[test]
fn a_subdirectory_whose_paths_are_at_the_top_fails_with_the_hint_alone() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "cm", "default");
    repo.commit("base");
    repo.commit("head");
    let subdir = repo.path().join("clusters");
    let top = std::fs::canonicalize(repo.path()).unwrap();
    let (stdout, stderr, code) = run(&plan_args(subdir.to_str().unwrap(), "json"), &[], None);
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    let plan: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(plan["verdict"], "failed");
    let error = plan["error"].as_str().unwrap();
    assert!(error.contains(&format!("try --repo {}", top.display())), "{error}");
    // No alert of a render that started in the wrong place (paths missing, roots failing).
    assert_eq!(plan["alerts"], serde_json::json!([]), "{plan}");
    // At the root the same repository plans.
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 0, "{plan}");
    assert!(plan["error"].is_null(), "{plan}");
}

#[test]
fn kustomizations_only_at_base_are_a_plan_that_removes_them_not_a_failure() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "cm", "default");
    repo.commit("base");
    repo.remove("clusters").remove("apps").write("README.md", "emptied\n");
    repo.commit("head");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_ne!(plan["verdict"], "failed", "{plan}");
    assert!(plan["error"].is_null(), "{plan}");
    assert_ne!(code, 3);
    assert!(!plan["kustomizations"].as_array().unwrap().is_empty(), "{plan}");
}

#[test]
fn an_explicit_fluxplan_kustomize_that_does_not_work_fails_the_plan() {
    let repo = Repo::bootstrap("prod");
    repo.commit("base");
    repo.commit("head");
    let dir = repo.path().to_str().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("no-such-kustomize");
    let not_a_program = scratch.path().join("kustomize.txt");
    std::fs::write(&not_a_program, "not a program").unwrap();
    for chosen in [&missing, &not_a_program] {
        let chosen = chosen.to_str().unwrap();
        let (stdout, stderr, code) = run(&plan_args(dir, "json"), &[("FLUXPLAN_KUSTOMIZE", chosen)], None);
        assert_eq!(code, 3, "{chosen}: {stdout}\n{stderr}");
        let plan: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(plan["verdict"], "failed");
        let error = plan["error"].as_str().unwrap();
        assert!(error.contains(&format!("FLUXPLAN_KUSTOMIZE={chosen} does not work")), "{error}");
        assert!(error.contains("unset it"), "{error}");
    }
}

#[test]
fn roots_missing_from_the_clusters_file_are_flagged_as_planned_offline() {
    let repo = Repo::bootstrap("prod");
    repo.add_bootstrap("staging");
    repo.commit("base");
    repo.commit("head");
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("prod.yaml"), "kind: ClusterSnapshot\n").unwrap();
    let clusters = files.path().join("clusters.yaml");
    std::fs::write(&clusters, "clusters:\n  clusters/prod:\n    snapshot: prod.yaml\n").unwrap();
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--clusters", clusters.to_str().unwrap()]);
    assert_ne!(code, 3, "{plan}");
    let uncovered: Vec<&Value> =
        plan["alerts"].as_array().unwrap().iter().filter(|a| a["code"] == "cluster-not-covered").collect();
    assert_eq!(uncovered.len(), 1, "only staging is missing: {}", plan["alerts"]);
    let alert = uncovered[0];
    assert_eq!(alert["severity"], "warning");
    assert_eq!(alert["cluster"], "clusters/staging");
    let message = alert["message"].as_str().unwrap();
    assert!(message.contains("planned offline"), "{message}");
    assert!(message.contains(&clusters.display().to_string()), "{message}");
    assert!(message.contains("add `clusters/staging:`"), "{message}");
}

/// The value a Secret gives `SUFFIX`; it must never be printed.
const SECRET: &str = "zq7secretvalue";

/// A cluster whose Secret `suffix` holds SECRET and whose `apps` inventory holds the object named
/// with it.
const SECRET_SNAPSHOT: &str = "\
kind: ClusterSnapshot
kustomizations:
- apiVersion: kustomize.toolkit.fluxcd.io/v1
  kind: Kustomization
  metadata: {name: flux-system, namespace: flux-system}
  spec: {path: ./clusters/prod, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}
  status:
    inventory:
      entries:
      - {id: flux-system_apps_kustomize.toolkit.fluxcd.io_Kustomization, v: v1}
      - {id: flux-system_flux-system_kustomize.toolkit.fluxcd.io_Kustomization, v: v1}
      - {id: flux-system_flux-system_source.toolkit.fluxcd.io_GitRepository, v: v1}
- apiVersion: kustomize.toolkit.fluxcd.io/v1
  kind: Kustomization
  metadata: {name: apps, namespace: flux-system}
  spec: {path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}
  status:
    inventory:
      entries:
      - {id: default_app-zq7secretvalue__ConfigMap, v: v1}
secrets:
- metadata: {name: suffix, namespace: flux-system}
  data: {SUFFIX: enE3c2VjcmV0dmFsdWU=}
";

fn secret_named_repo() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization(
        "clusters/prod/apps.yaml",
        "apps",
        "./apps",
        "postBuild:\n  substituteFrom:\n  - kind: Secret\n    name: suffix",
    );
    let config_map = |color: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-${{SUFFIX}}\n  namespace: default\ndata:\n  color: {color}\n")
    };
    repo.write("apps/app.yaml", &config_map("blue"));
    repo.commit("base");
    repo.write("apps/app.yaml", &config_map("green"));
    repo.commit("head");
    repo
}

/// The plan of HEAD~1..HEAD against `snapshot` with the Secret `suffix` holding `value` instead
/// of SECRET, its timings left out; and every output format's text.
fn plan_with_suffix(repo: &Repo, snapshot: &str, value: &str) -> (Value, Vec<String>) {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(value);
    let files = tempfile::tempdir().unwrap();
    let path = files.path().join("snapshot.yaml");
    std::fs::write(&path, snapshot.replace("enE3c2VjcmV0dmFsdWU=", &encoded)).unwrap();
    let dir = repo.path().to_str().unwrap();
    let mut outputs = Vec::new();
    let mut plan = Value::Null;
    for format in ["json", "markdown", "text"] {
        let (stdout, stderr, _) = run(
            &[plan_args(dir, format), vec!["--cluster-snapshot", path.to_str().unwrap()]].concat(),
            &[],
            None,
        );
        if format == "json" {
            plan = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
        }
        outputs.push(format!("{stdout}\n{stderr}"));
    }
    plan.as_object_mut().unwrap().retain(|key, _| !key.contains("duration") && key != "timings");
    (plan, outputs)
}

/// A Kustomization that names objects from a Secret is not planned: matched with the cluster's
/// inventory on their real names, whether an object is updated or created and another deleted
/// would tell the value (`${SUFFIX:0:1}` against a name the inventory holds). The plan is the same
/// whatever the Secret holds, and never shows the value, though the inventory holds it.
#[test]
fn a_kustomization_naming_objects_from_a_secret_is_not_planned_and_tells_nothing() {
    let repo = secret_named_repo();
    let (plan, outputs) = plan_with_suffix(&repo, SECRET_SNAPSHOT, SECRET);
    for output in &outputs {
        assert!(!output.contains(SECRET), "the secret shows:\n{output}");
    }
    let apps = kustomization_in(&plan, "flux-system/apps");
    assert_eq!(apps["status"], "external", "{apps:#}");
    assert!(apps["notes"].to_string().contains("come from Secrets it substitutes"), "{apps:#}");
    // It names objects from the Secret at base too, and the pull request changes only its files.
    assert!(has_alert(&plan, "warning", "unplanned-change"), "{:#}", plan["alerts"]);
    assert!(!has_alert(&plan, "danger", "secret-spec"), "{:#}", plan["alerts"]);
    let (other, _) = plan_with_suffix(&repo, SECRET_SNAPSHOT, "another-value");
    assert_eq!(plan, other, "the plan depends on the Secret's value");
    // Where the pull request is the one to name an object from the Secret, it blocks, the same
    // whatever the Secret holds.
    repo.write(
        "apps/app.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: default\n",
    );
    repo.commit("name nothing from the Secret");
    repo.write(
        "apps/probe.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe-${SUFFIX:0:1}\n  namespace: default\n",
    );
    repo.commit("the probe");
    let (plan, outputs) = plan_with_suffix(&repo, SECRET_SNAPSHOT, SECRET);
    assert!(has_alert(&plan, "danger", "secret-spec"), "{:#}", plan["alerts"]);
    assert_eq!(plan["verdict"], "blocked");
    for output in &outputs {
        assert!(!output.contains(SECRET), "the secret shows:\n{output}");
    }
    let (other, _) = plan_with_suffix(&repo, SECRET_SNAPSHOT, "another-value");
    assert_eq!(plan, other, "the plan depends on the Secret's value");
}

/// A child Kustomization named from a Secret is an object named from it: its parent is not
/// planned, and nothing shows the value.
#[test]
fn a_kustomization_named_from_a_secret_is_not_planned_and_tells_nothing() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization(
        "clusters/prod/apps.yaml",
        "apps",
        "./apps",
        "postBuild:\n  substituteFrom:\n  - kind: Secret\n    name: suffix",
    );
    repo.kustomization("apps/child.yaml", "child-${SUFFIX}", "./child", "");
    repo.config_map("child/cm.yaml", "cm", "default");
    repo.commit("base");
    repo.config_map("child/cm2.yaml", "cm2", "default");
    repo.commit("head");
    let snapshot = "kind: ClusterSnapshot\nsecrets:\n- metadata: {name: suffix, namespace: flux-system}\n  data: {SUFFIX: enE3c2VjcmV0dmFsdWU=}\n";
    let (plan, outputs) = plan_with_suffix(&repo, snapshot, SECRET);
    for output in &outputs {
        assert!(!output.contains(SECRET), "the secret shows:\n{output}");
    }
    assert_eq!(kustomization_in(&plan, "flux-system/apps")["status"], "external", "{plan:#}");
    let (other, _) = plan_with_suffix(&repo, snapshot, "another-value");
    assert_eq!(plan, other, "the plan depends on the Secret's value");
    let dir = repo.path().to_str().unwrap();
    let files = tempfile::tempdir().unwrap();
    let path = files.path().join("snapshot.yaml");
    std::fs::write(&path, snapshot).unwrap();
    for format in ["ids", "json", "yaml"] {
        let args = ["build", "--no-cache", "--rev", "HEAD", "--format", format, "--cluster-snapshot"];
        let (stdout, stderr, _) =
            run(&[&args[..], &[path.to_str().unwrap(), "--repo", dir]].concat(), &[], None);
        assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET), "build {format}:\n{stdout}\n{stderr}");
    }
}

#[test]
fn demo_refuses_a_directory_that_is_not_empty() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine\n").unwrap();
    let (_, stderr, code) = run(&["demo", "--dir", dir.path().to_str().unwrap()], &[], None);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("is not empty") && stderr.contains("pick a new or empty directory"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("notes.txt")], "the demo wrote into it");
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(), "mine\n");
}

#[test]
fn demo_prints_the_verdict_as_the_json_plan_spells_it() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("demo");
    let (_, stderr, code) = run(&["demo", "--dir", dir.to_str().unwrap()], &[("NO_COLOR", "1")], None);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("verdict: blocked (`fluxplan plan` would exit 2)"), "{stderr}");
    assert!(!stderr.contains("Blocked"), "{stderr}");
}

#[test]
fn migrate_without_a_database_says_what_to_pass_and_creates_nothing() {
    let cwd = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(fluxplan_bin());
    cmd.arg("migrate").current_dir(cwd.path()).env_remove("DATABASE_URL").env_remove("FLUXPLAN_DATA_DIR");
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("--database-url") && stderr.contains("--data-dir"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(cwd.path()).unwrap().count(),
        0,
        "migrate created files in the working directory"
    );
}

#[test]
fn migrate_against_a_closed_port_names_the_cause() {
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("postgres://fluxplan@127.0.0.1:{port}/fluxplan");
    let cwd = tempfile::tempdir().unwrap();
    let (_, stderr, code) = run(&["migrate", "--database-url", &url], &[], Some(cwd.path()));
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.to_lowercase().contains("connection refused"), "the cause is hidden: {stderr}");
    assert!(!stderr.contains("pool timed out"), "{stderr}");
    assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0, "migrate created a data directory");
}

#[test]
fn help_lists_formats_and_exit_codes() {
    let (plan, _, code) = run(&["plan", "--help"], &[], None);
    assert_eq!(code, 0);
    for needed in [
        "markdown",
        "json",
        "text",
        "Exit codes:",
        "0  no changes",
        "1  changes",
        "2  blocked by policy",
        "3  could not plan",
    ] {
        assert!(plan.contains(needed), "plan --help lacks {needed:?}:\n{plan}");
    }
    let (build, _, code) = run(&["build", "--help"], &[], None);
    assert_eq!(code, 0);
    for needed in [
        "yaml",
        "json",
        "ids",
        "Exit codes:",
        "0  every Kustomization rendered",
        "3  the repository could not be rendered",
    ] {
        assert!(build.contains(needed), "build --help lacks {needed:?}:\n{build}");
    }
}

/// A child Kustomization whose `path` its parent substitutes from a Secret is never rendered:
/// which directory renders (or fails) would tell the value, one guess per directory. Moved by
/// the pull request, it blocks (`secret-spec`) the same way whether the directory it now names
/// exists or not; left alone, it is a standing note. Files below its path are unplanned changes.
#[test]
fn a_path_substituted_from_a_secret_is_never_rendered_and_tells_nothing() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization(
        "clusters/prod/apps.yaml",
        "apps",
        "./apps",
        "postBuild:\n  substituteFrom:\n  - kind: Secret\n    name: suffix",
    );
    // The child's path holds the Secret's value: ./tenants/zq7secretvalue.
    repo.kustomization("apps/child.yaml", "child", "./tenants/${SUFFIX}", "");
    repo.config_map(&format!("tenants/{SECRET}/cm.yaml"), "cm", "default");
    repo.commit("base");
    // Probes: a path that exists for the right value, one that exists for no value.
    repo.kustomization("apps/child.yaml", "child", "./tenants/${SUFFIX}-v2", "");
    repo.config_map(&format!("tenants/{SECRET}-v2/cm.yaml"), "cm", "default");
    repo.config_map("tenants/wrong-guess-v2/cm.yaml", "cm", "default");
    let exists = repo.commit("moved to a directory that exists");
    repo.git(&["reset", "-q", "--hard", "HEAD~1"]);
    repo.kustomization("apps/child.yaml", "child", "./tenants/${SUFFIX}-v2", "");
    repo.config_map(&format!("tenants/{SECRET}-v3/cm.yaml"), "cm", "default");
    repo.config_map("tenants/wrong-guess-v2/cm.yaml", "cm", "default");
    let missing = repo.commit("moved to a directory that does not exist");
    let files = tempfile::tempdir().unwrap();
    let snapshot = files.path().join("snapshot.yaml");
    std::fs::write(
        &snapshot,
        format!(
            "kind: ClusterSnapshot\nkustomizations:\n- apiVersion: kustomize.toolkit.fluxcd.io/v1\n  kind: Kustomization\n  \
             metadata: {{name: child, namespace: flux-system}}\n  spec: {{path: ./tenants/{SECRET}, prune: true, \
             sourceRef: {{kind: GitRepository, name: flux-system}}}}\n  status:\n    inventory:\n      entries:\n      \
             - {{id: default_cm__ConfigMap, v: v1}}\n- apiVersion: kustomize.toolkit.fluxcd.io/v1\n  kind: Kustomization\n  \
             metadata: {{name: apps, namespace: flux-system}}\n  spec: {{path: ./apps, prune: true, \
             sourceRef: {{kind: GitRepository, name: flux-system}}}}\n  status:\n    inventory:\n      entries:\n      \
             - {{id: flux-system_child_kustomize.toolkit.fluxcd.io_Kustomization, v: v1}}\nsecrets:\n- metadata: {{name: suffix, namespace: flux-system}}\n  \
             data: {{SUFFIX: enE3c2VjcmV0dmFsdWU=}}\n"
        ),
    )
    .unwrap();
    let dir = repo.path().to_str().unwrap();
    let snapshot = snapshot.to_str().unwrap();
    let plan_of = |head: &str, format: &str| {
        let args = ["plan", "--no-cache", "--base", "HEAD~1", "--head", head, "--format", format];
        let (stdout, stderr, code) =
            run(&[&args[..], &["--repo", dir, "--cluster-snapshot", snapshot]].concat(), &[], None);
        // The files the pull request itself names may hold the value; nothing else may.
        let others = without_files(
            &stdout,
            &[&format!("tenants/{SECRET}-v2/cm.yaml"), &format!("tenants/{SECRET}-v3/cm.yaml")],
        );
        assert!(
            !others.contains(SECRET) && !stderr.contains(SECRET),
            "plan of {head} as {format} shows the secret:\n{stdout}\n{stderr}"
        );
        (stdout, code)
    };
    let shape = |head: &str| {
        let (text, code) = plan_of(head, "json");
        let plan: Value = serde_json::from_str(&text).unwrap();
        let child = kustomization_in(&plan, "flux-system/child").clone();
        (code, alert_codes(&plan), child["status"].clone(), child["changes"].clone())
    };
    let (code, codes, status, changes) = shape(&exists);
    assert_eq!(code, 2, "{codes:?}");
    assert!(codes.contains(&("danger".into(), "secret-spec".into())), "{codes:?}");
    assert!(codes.contains(&("warning".into(), "unplanned-change".into())), "{codes:?}");
    assert_eq!(status, "external");
    assert_eq!(changes, serde_json::json!([]), "nothing of it is planned");
    assert_eq!(
        shape(&missing),
        (code, codes, status, changes),
        "the plan tells whether the directory exists"
    );
    let (text, _) = plan_of(&exists, "json");
    let plan: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(kustomization_in(&plan, "flux-system/child")["path"], "./tenants/(masked:SUFFIX)-v2");
    for format in ["markdown", "text"] {
        let (shown, _) = plan_of(&exists, format);
        assert!(shown.contains("secret-spec"), "{format}: {shown}");
    }
    // The near miss: a pull request that leaves the child alone gets a standing note, no danger.
    repo.git(&["reset", "-q", "--hard", "HEAD~1"]);
    repo.config_map("apps/other.yaml", "other", "default");
    repo.commit("unrelated");
    let (text, code) = plan_of("HEAD", "json");
    let plan: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(code, 1, "{text}");
    assert!(has_alert(&plan, "info", "external-source"), "{:#}", plan["alerts"]);
    assert!(!has_alert(&plan, "danger", "secret-spec"));
}

/// `text` without the repository files the pull request itself names (they may hold anything).
fn without_files(text: &str, files: &[&str]) -> String {
    files.iter().fold(text.to_string(), |text, file| text.replace(file, "<a file of the pull request>"))
}

/// The child is not rendered (its path comes from a Secret): the file it would fail on is an
/// unplanned change, and nothing quotes the value.
#[test]
fn a_failing_build_under_a_path_from_a_secret_never_quotes_the_value() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization(
        "clusters/prod/apps.yaml",
        "apps",
        "./apps",
        "postBuild:\n  substituteFrom:\n  - kind: Secret\n    name: suffix",
    );
    repo.kustomization("apps/child.yaml", "child", "./tenants/${SUFFIX}", "");
    repo.config_map(&format!("tenants/{SECRET}/cm.yaml"), "cm", "default");
    repo.commit("base");
    // YAML that is not a Kubernetes object fails the generated kustomization, naming the file.
    repo.write(&format!("tenants/{SECRET}/values.yaml"), "replicas: 3\n");
    repo.commit("a values file where Flux reads manifests");
    let files = tempfile::tempdir().unwrap();
    let snapshot = files.path().join("snapshot.yaml");
    std::fs::write(
        &snapshot,
        "kind: ClusterSnapshot\nsecrets:\n- metadata: {name: suffix, namespace: flux-system}\n  data: {SUFFIX: enE3c2VjcmV0dmFsdWU=}\n",
    )
    .unwrap();
    let dir = repo.path().to_str().unwrap();
    for format in ["json", "markdown", "text"] {
        let args = [plan_args(dir, format), vec!["--cluster-snapshot", snapshot.to_str().unwrap()]].concat();
        let (stdout, stderr, _) = run(&args, &[], None);
        assert!(stdout.contains("values.yaml"), "plan {format}: the change is reported: {stdout}\n{stderr}");
        let others = without_files(&stdout, &[&format!("tenants/{SECRET}/values.yaml")]);
        assert!(
            !others.contains(SECRET) && !stderr.contains(SECRET),
            "plan {format} shows the secret:\n{stdout}\n{stderr}"
        );
    }
}

#[test]
fn roots_a_named_snapshot_does_not_describe_are_flagged_as_planned_offline() {
    let repo = Repo::bootstrap("prod");
    repo.add_bootstrap("staging");
    repo.commit("base");
    repo.commit("head");
    let files = tempfile::tempdir().unwrap();
    // As `fluxplan snapshot --cluster clusters/prod` writes it.
    let snapshot = files.path().join("prod.yaml");
    std::fs::write(&snapshot, "kind: ClusterSnapshot\ncluster: clusters/prod\n").unwrap();
    let (plan, code) =
        plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", snapshot.to_str().unwrap()]);
    assert_ne!(code, 3, "{plan}");
    let uncovered: Vec<&Value> =
        plan["alerts"].as_array().unwrap().iter().filter(|a| a["code"] == "cluster-not-covered").collect();
    assert_eq!(uncovered.len(), 1, "only staging is not described: {}", plan["alerts"]);
    assert_eq!(uncovered[0]["cluster"], "clusters/staging");
    let message = uncovered[0]["message"].as_str().unwrap();
    assert!(message.contains("planned offline") && message.contains("prod.yaml"), "{message}");
    // A snapshot naming no cluster describes every one.
    std::fs::write(&snapshot, "kind: ClusterSnapshot\n").unwrap();
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", snapshot.to_str().unwrap()]);
    assert!(
        !plan["alerts"].as_array().unwrap().iter().any(|a| a["code"] == "cluster-not-covered"),
        "{plan:#}"
    );
}

/// A pull request may name any Secret in a Kustomization's `substituteFrom`: against a live
/// cluster only the Secrets the cluster's own Flux objects read are read. One only the pull
/// request names is never asked for; its variables stay the cluster's to resolve.
#[test]
fn a_pull_request_cannot_read_a_secret_no_live_kustomization_substitutes_from() {
    let substitute_from =
        |secret: &str| format!("postBuild:\n  substituteFrom:\n  - kind: Secret\n    name: {secret}");
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", &substitute_from("live-vars"));
    repo.write(
        "apps/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: default\ndata:\n  password: ${password}\n",
    );
    repo.commit("base");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", &substitute_from("pr-named"));
    repo.commit("substitute from another Secret");
    let secret = |name: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "flux-system"},
            "data": {"password": "aHVudGVyMg=="}})
    };
    let fake = crate::fake_kube::FakeKube::start(vec![
        serde_json::json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system"},
            "spec": {"interval": "10m", "path": "./apps", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
                "postBuild": {"substituteFrom": [{"kind": "Secret", "name": "live-vars"}]}},
            "status": {"inventory": {"entries": [{"id": "default_cm__ConfigMap", "v": "v1"}]}}}),
        secret("live-vars"),
        secret("pr-named"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake.kubeconfig(dir.path());
    let repo_dir = repo.path().to_str().unwrap();
    let args = [plan_args(repo_dir, "json"), vec!["--kube", "--read-secrets"]].concat();
    let (stdout, stderr, _) = run(&args, &[("KUBECONFIG", kubeconfig.to_str().unwrap())], None);
    let plan: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let asked = fake.requests();
    assert!(asked.iter().all(|(_, path)| !path.contains("secrets/pr-named")), "read: {asked:?}");
    // The near miss: the Secret the live Kustomization substitutes from is read.
    assert!(asked.iter().any(|(_, path)| path.contains("secrets/live-vars")), "not read: {asked:?}");
    assert!(has_alert(&plan, "warning", "unresolved-substitution"), "{:#}", plan["alerts"]);
    assert!(!stdout.contains("hunter2"), "{stdout}");
}
