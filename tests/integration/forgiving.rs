//! Configuration that forgives: a typo in `.fluxplan.yaml` costs its key alone (a warning names
//! it and the nearest known key; the roots and the rest apply), and a HelmRelease the plan does
//! not delete is never labelled removed.

use crate::fixture::{edit, fluxplan_bin, has_alert, helm, plan_cli, plan_json, unit_in, Repo};
use std::process::Command;

/// Two clusters; the policy declares one of them the only root, beside a typo.
fn two_clusters_one_root(policy: &str) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.add_bootstrap("staging");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.kustomization("clusters/staging/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "settings", "default");
    repo.write(".fluxplan.yaml", policy);
    repo.commit("fleet");
    repo
}

const TYPO: &str = "roots:\n- path: clusters/prod\nmassDeletion:\n  maxObject: 1\n";

#[test]
fn a_typo_in_the_policy_file_drops_its_key_with_a_warning_and_keeps_the_roots() {
    let repo = two_clusters_one_root(TYPO);
    let out = Command::new(fluxplan_bin())
        .args(["build", "--no-cache", "--rev", "HEAD", "--format", "ids", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "warning: .fluxplan.yaml: unknown key 'massDeletion.maxObject' is left out (the nearest known key is \
             'massDeletion.maxObjects'); the rest of the file applies"
        ),
        "{stderr}"
    );
    // The declared root alone: one cluster's Kustomizations, not both.
    assert_eq!(stdout.matches("# flux-system/apps").count(), 1, "{stdout}");

    repo.config_map("apps/other.yaml", "other", "default");
    repo.commit("another ConfigMap");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    assert_eq!(plan["policy_source"], ".fluxplan.yaml at base", "{plan:#}");
    assert!(has_alert(&plan, "warning", "policy-invalid"), "{:#}", plan["alerts"]);
    let message = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["code"] == "policy-invalid")
        .and_then(|a| a["message"].as_str())
        .unwrap();
    assert!(message.starts_with(".fluxplan.yaml at base: unknown key 'massDeletion.maxObject'"), "{message}");
    let clusters: Vec<&str> =
        plan["kustomizations"].as_array().unwrap().iter().filter_map(|k| k["cluster"].as_str()).collect();
    assert!(clusters.iter().all(|c| *c == "clusters/prod"), "{clusters:?}");
}

/// The near miss: a file without typos warns of nothing, and an invalid value still invalidates
/// the file as before (the defaults apply, said once).
#[test]
fn a_policy_file_without_typos_warns_of_nothing() {
    let repo = two_clusters_one_root("roots:\n- path: clusters/prod\nmassDeletion:\n  maxObjects: 1\n");
    repo.config_map("apps/other.yaml", "other", "default");
    repo.commit("another ConfigMap");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(!has_alert(&plan, "warning", "policy-invalid"), "{:#}", plan["alerts"]);
    let repo = two_clusters_one_root("massDeletion:\n  maxObjects: many\n");
    repo.config_map("apps/other.yaml", "other", "default");
    repo.commit("another ConfigMap");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(plan["policy_source"], "built-in defaults (base policy invalid)", "{plan:#}");
}

/// A HelmRelease removed from Git whose Kustomization does not prune: its release stays installed,
/// as the plan says, and the table says so too ("release kept", never "removed").
#[test]
fn a_removed_release_the_plan_keeps_is_not_labelled_removed() {
    let _ = helm(4);
    let repo = crate::helm_plan::fleet();
    edit(&repo, "clusters/prod/db.yaml", "prune: true", "prune: false");
    repo.commit("prune off");
    repo.remove("apps/db/release.yaml");
    repo.config_map("apps/db/placeholder.yaml", "p", "data");
    repo.commit("remove the release");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "removed", "{release:#}");
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert!(markdown.contains("`HelmRelease data/db` *release kept*"), "{markdown}");
    assert!(!markdown.contains("*removed*"), "{markdown}");
    insta::assert_snapshot!("forgiving_release_kept_markdown", markdown);
    let (text, _) = plan_cli(&repo, "HEAD~1", "HEAD", "text", &[]);
    assert!(text.contains("release kept;") && !text.contains("removed;"), "{text}");

    // The near miss: pruned, the release is uninstalled, and removed it reads.
    let repo = crate::helm_plan::fleet();
    repo.remove("apps/db/release.yaml");
    repo.config_map("apps/db/placeholder.yaml", "p", "data");
    repo.commit("remove the release");
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert!(markdown.contains("`HelmRelease data/db` *removed*"), "{markdown}");
}
