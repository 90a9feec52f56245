//! `fluxplan build` through the real binary: formats, exit codes, golden output.

use crate::fixture::{fluxplan_bin, Repo};
use std::process::Command;

fn golden_repo() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization(
        "clusters/prod/apps.yaml",
        "apps",
        "./apps",
        "postBuild:\n  substitute:\n    env: prod",
    );
    repo.kustomization("clusters/prod/broken.yaml", "broken", "./missing", "");
    repo.write(
        "apps/app.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: web\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-${env}\n  namespace: web\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: web\nstringData:\n  password: do-not-print-me\n",
    );
    repo.commit("init");
    repo
}

fn build(repo: &Repo, format: &str) -> (String, String, i32) {
    let out = Command::new(fluxplan_bin())
        .args(["build", "--no-cache", "--rev", "HEAD", "--format", format, "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code().unwrap(),
    )
}

#[test]
fn ids_format_is_golden_and_failures_exit_1() {
    let (stdout, _, code) = build(&golden_repo(), "ids");
    insta::assert_snapshot!("build_ids", stdout);
    assert_eq!(code, 1, "a failed Kustomization makes the exit code 1");
}

#[test]
fn yaml_format_is_golden_and_masks_secrets() {
    let (stdout, _, _) = build(&golden_repo(), "yaml");
    assert!(!stdout.contains("do-not-print-me"));
    insta::assert_snapshot!("build_yaml", stdout);
}

#[test]
fn json_format_carries_errors_and_never_secrets() {
    let (stdout, _, _) = build(&golden_repo(), "json");
    assert!(!stdout.contains("do-not-print-me"));
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let ks = json["clusters"][0]["kustomizations"].as_array().unwrap();
    let broken = ks.iter().find(|k| k["name"] == "broken").unwrap();
    assert_eq!(broken["status"], "failed");
    assert_eq!(broken["error"]["code"], "path-not-found");
    let apps = ks.iter().find(|k| k["name"] == "apps").unwrap();
    assert_eq!(apps["objects"].as_array().unwrap().len(), 3);
    assert_eq!(apps["objects"][0]["id"]["kind"], "Namespace");
}

#[test]
fn all_good_exits_0_and_a_missing_repository_exits_3() {
    let repo = Repo::bootstrap("prod");
    repo.commit("init");
    let (_, _, code) = build(&repo, "ids");
    assert_eq!(code, 0);
    let out = Command::new(fluxplan_bin())
        .args(["build", "--no-cache", "--repo", "/nonexistent/fluxplan-repo"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/fluxplan-repo"));
}

/// Output piped to a reader that leaves (`| head`) ends the command quietly, as kubectl ends: no
/// panic, no error message, the exit status a shell shows for SIGPIPE.
#[test]
fn a_closed_output_ends_build_and_plan_quietly() {
    let repo = golden_repo();
    repo.commit("base");
    repo.config_map("apps/extra.yaml", "extra", "default");
    repo.commit("head");
    let commands: [&[&str]; 2] = [
        &["build", "--format", "yaml", "--no-cache"],
        &["plan", "--base", "HEAD~1", "--head", "HEAD", "--no-cache"],
    ];
    for args in commands {
        let mut child = Command::new(fluxplan_bin())
            .args(args)
            .arg("--repo")
            .arg(repo.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader leaves before anything is written.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("error:"), "{args:?}: {stderr}");
    }
}

/// `--version` names the commit it was built from and the engines a render would use; `-V` the
/// commit alone, quickly.
#[test]
fn version_names_the_commit_and_the_engines() {
    let _ = crate::fixture::helm(4);
    let run = |flag: &str| {
        let out = std::process::Command::new(crate::fixture::fluxplan_bin()).arg(flag).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let head = String::from_utf8(head.stdout).unwrap().trim().to_string();
    let short = run("-V");
    assert_eq!(short.trim(), format!("fluxplan {} (commit {head})", env!("CARGO_PKG_VERSION")));
    let long = run("--version");
    assert!(long.starts_with(short.trim()), "{long}");
    assert!(long.contains("\nkustomize: ") && long.contains("\nhelm v4: v4."), "{long}");
}
