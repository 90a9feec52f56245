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
