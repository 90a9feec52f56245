//! A base or head the repository does not hold: said once, with what to do about it.

use crate::fixture::{fluxplan_bin, plan_json, Repo};
use std::path::Path;
use std::process::{Command, Output};

/// A repository of three commits (no Flux content: an unknown revision fails before any render).
fn history() -> Repo {
    let repo = Repo::new("git@github.com:acme/fleet.git");
    for n in 1..=3 {
        repo.write("README.md", &format!("{n}\n"));
        repo.commit(&format!("commit {n}"));
    }
    repo
}

fn fluxplan_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(fluxplan_bin()).current_dir(dir).args(args).output().unwrap()
}

#[test]
fn a_shallow_clone_says_it_is_one_once_and_how_to_fetch_the_base() {
    let origin = history();
    let clone = tempfile::tempdir().unwrap();
    let url = format!("file://{}", origin.path().display());
    let cloned = Command::new("git").args(["clone", "-q", "--depth", "1", &url]).arg(clone.path()).status();
    assert!(cloned.unwrap().success());

    let out = fluxplan_in(clone.path(), &["plan", "--no-cache", "--base", "HEAD~1", "--head", "HEAD"]);
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let both = format!("{stdout}{stderr}");
    // Said once: a text report on a pipe (a CI log) is read there; stderr does not repeat it.
    assert_eq!(both.matches("is not in").count(), 1, "{both}");
    assert!(stdout.contains("base revision 'HEAD~1' is not in"), "{stdout}");
    for fix in ["a shallow clone", "git fetch --deepen=N", "fetch-depth: 0", "GIT_DEPTH: 0"] {
        assert!(stdout.contains(fix), "no {fix:?} in {stdout}");
    }
    assert!(!both.contains("Needed a single revision"), "{both}");

    // A commit id the clone lacks gets the fetch of that commit.
    let base = origin.git(&["rev-parse", "HEAD~2"]).trim().to_string();
    let out = fluxplan_in(clone.path(), &["plan", "--no-cache", "--base", &base, "--head", "HEAD"]);
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("`git fetch --depth=1 origin {base}`")), "{stdout}");
}

#[test]
fn a_mistyped_revision_gets_the_nearest_branch_and_tag_names() {
    let repo = history();
    repo.git(&["tag", "v1.0"]);
    repo.git(&["branch", "feature/login"]);

    let (plan, code) = plan_json(&repo, "mian", "feature/logn", &[]);
    assert_eq!(code, 3);
    assert_eq!(plan["verdict"], "failed");
    let error = plan["error"].as_str().unwrap();
    assert!(error.contains("base revision 'mian' is not in"), "{error}");
    assert!(error.contains("did you mean 'main'?"), "{error}");
    assert!(error.contains("head revision 'feature/logn' is not in"), "{error}");
    assert!(error.contains("did you mean 'feature/login'?"), "{error}");
    assert!(!error.contains("shallow"), "{error}");
    assert_eq!(plan["head"]["commit"], serde_json::Value::Null);

    // Nothing alike: no guess. An ancestor past the root: said so.
    let (plan, _) = plan_json(&repo, "HEAD~9", "zzzzzz", &[]);
    let error = plan["error"].as_str().unwrap();
    assert!(
        error.contains("base revision 'HEAD~9' is not in") && error.contains("HEAD has no such ancestor"),
        "{error}"
    );
    assert!(
        error.contains("no branch, tag or commit is named so") && !error.contains("did you mean"),
        "{error}"
    );

    // `build --rev` resolves through the same path.
    let out = fluxplan_in(repo.path(), &["build", "--no-cache", "--rev", "v1.1"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did you mean 'v1.0'?"), "{stderr}");
}
