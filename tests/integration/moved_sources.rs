//! Sources moved to another repository (`source-moved`): a Flux source whose URL now names a
//! host or repository the base never used, and a Kustomization re-pointed to a source of another
//! repository, block; another ref of the same repository, the same URL written otherwise, a new
//! source, and a Kustomization re-pointed to another source of this repository do not.

use crate::fixture::{alert_codes, has_alert, plan_json, Repo};

/// A source of `kind` at `location` (`url: …`, or a Bucket's `endpoint`/`bucketName` lines),
/// with `reference` under `spec`.
fn source(kind: &str, name: &str, location: &str, reference: &str) -> String {
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  \
         interval: 10m\n{location}{reference}"
    )
}

fn url(url: &str) -> String {
    format!("  url: {url}\n")
}

/// A fleet whose Kustomization `sources` applies `manifest` (at `apps/sources/sources.yaml`).
fn fleet(manifest: &str) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/sources.yaml", "sources", "./apps/sources", "");
    repo.write("apps/sources/sources.yaml", manifest);
    repo.commit("base");
    repo
}

/// The plan of the pull request that turns `base` into `head`: its exit code and whether it
/// has a `source-moved` danger.
fn moved(base: &str, head: &str) -> (i32, bool, String) {
    let repo = fleet(base);
    repo.write("apps/sources/sources.yaml", head);
    repo.commit("head");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    (code, has_alert(&plan, "danger", "source-moved"), format!("{:?}", alert_codes(&plan)))
}

#[test]
fn a_source_moved_to_a_repository_the_base_never_used_blocks() {
    let git_ref = "  ref:\n    branch: main\n";
    let tag = |t: &str| format!("  ref:\n    tag: {t}\n");
    for (kind, was, now, reference) in [
        (
            "GitRepository",
            url("https://github.com/acme/platform"),
            url("https://github.com/attacker/platform"),
            git_ref.to_string(),
        ),
        (
            "GitRepository",
            url("ssh://git@github.com/acme/platform"),
            url("ssh://git@git.attacker.example/acme/platform"),
            git_ref.to_string(),
        ),
        (
            "OCIRepository",
            url("oci://ghcr.io/acme/manifests/app"),
            url("oci://registry.attacker.example/acme/manifests/app"),
            tag("1.0.0"),
        ),
        (
            "OCIRepository",
            url("oci://127.0.0.1:5000/charts/db"),
            url("oci://127.0.0.1:5001/charts/db"),
            tag("1.0.0"),
        ),
        (
            "HelmRepository",
            url("https://charts.acme.example/stable"),
            url("https://charts.attacker.example/stable"),
            String::new(),
        ),
        (
            "Bucket",
            "  endpoint: minio.acme.example\n  bucketName: fleet\n".to_string(),
            "  endpoint: s3.attacker.example\n  bucketName: fleet\n".to_string(),
            String::new(),
        ),
    ] {
        let (code, danger, codes) =
            moved(&source(kind, "platform", &was, &reference), &source(kind, "platform", &now, &reference));
        assert!(danger, "{kind} {now}: {codes}");
        assert_eq!(code, 2, "{kind} {now}: blocked: {codes}");
    }
}

#[test]
fn a_source_that_stays_in_its_repository_or_is_new_does_not_fire() {
    let branch = |b: &str| format!("  ref:\n    branch: {b}\n");
    let platform =
        source("GitRepository", "platform", &url("https://github.com/acme/platform"), &branch("main"));
    // Another ref of the same repository.
    let (code, danger, codes) = moved(
        &platform,
        &source("GitRepository", "platform", &url("https://github.com/acme/platform"), &branch("v2")),
    );
    assert!(!danger && code == 1, "{codes}");
    // The same repository written otherwise: `.git`, a trailing slash, ssh, the host's case.
    for same in [
        "https://github.com/acme/platform.git",
        "https://github.com/acme/platform/",
        "ssh://git@github.com/acme/platform.git",
        "https://GitHub.com/acme/platform",
    ] {
        let (code, danger, codes) =
            moved(&platform, &source("GitRepository", "platform", &url(same), &branch("main")));
        assert!(!danger && code == 1, "{same}: {codes}");
    }
    // A new source to a new host: new, not moved.
    let added = format!(
        "{platform}---\n{}",
        source("GitRepository", "tools", &url("https://git.elsewhere.example/tools"), &branch("main"))
    );
    let (code, danger, codes) = moved(&platform, &added);
    assert!(!danger && code == 1, "{codes}");
    // Moved to a repository another source of the base already uses.
    let both = format!(
        "{platform}---\n{}",
        source("GitRepository", "tools", &url("https://github.com/acme/tools"), &branch("main"))
    );
    let swapped = format!(
        "{}---\n{}",
        source("GitRepository", "platform", &url("https://github.com/acme/tools"), &branch("main")),
        source("GitRepository", "tools", &url("https://github.com/acme/tools"), &branch("main"))
    );
    let (_, danger, codes) = moved(&both, &swapped);
    assert!(!danger, "{codes}");
}

/// A fleet with a Kustomization `web` of this repository and, at head, a GitRepository `other`
/// at `other_url` that `web` is re-pointed to.
fn repointed(other_url: &str) -> (serde_json::Value, i32) {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/web.yaml", "web", "./apps/web", "");
    repo.config_map("apps/web/web.yaml", "web", "default");
    repo.commit("base");
    repo.write(
        "clusters/prod/other.yaml",
        &source("GitRepository", "other", &url(other_url), "  ref:\n    branch: main\n"),
    );
    repo.kustomization_of("clusters/prod/web.yaml", "web", "./apps/web", ("GitRepository", "other"), "");
    repo.commit("web from another source");
    plan_json(&repo, "HEAD~1", "HEAD", &[])
}

#[test]
fn a_kustomization_repointed_to_another_repositorys_source_blocks() {
    let (plan, code) = repointed("https://github.com/attacker/fleet");
    assert_eq!(code, 2, "{plan:#}");
    let alert = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "source-moved");
    let alert = alert.unwrap_or_else(|| panic!("{:?}", alert_codes(&plan)));
    assert_eq!(alert["kustomization"], "flux-system/web");
    assert!(alert["message"].as_str().unwrap().contains("https://github.com/attacker/fleet"), "{alert:#}");
    assert!(!has_alert(&plan, "info", "external-source"), "a danger, never a note: {:?}", alert_codes(&plan));
}

#[test]
fn a_kustomization_repointed_to_another_source_of_this_repository_does_not_fire() {
    // The bootstrap's GitRepository names ssh://git@github.com/acme/fleet.
    let (plan, code) = repointed("git@github.com:acme/fleet.git");
    assert!(!has_alert(&plan, "danger", "source-moved"), "{:?}", alert_codes(&plan));
    assert_eq!(code, 1, "{plan:#}");
}
