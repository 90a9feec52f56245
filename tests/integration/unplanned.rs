//! The changed files a plan accounts for: no false readers (a Kustomization of another source
//! reads none of this repository's files), no file both planned and listed as read by no unit
//! (a base reached with `../`, a file an ArtifactGenerator copies), and no file the source's
//! ignore rules leave out of the artifact. Shapes from fluxcd/flux2-multi-tenancy (its kyverno
//! Kustomization of an OCI artifact at `path: ./`) and flux2-kustomize-helm-example.

use crate::argo_reach::unplanned;
use crate::fixture::{alert_codes, has_alert, plan_json, Repo};

fn unread(files: &[&str]) -> Vec<(String, Vec<String>)> {
    files.iter().map(|f| (f.to_string(), Vec::new())).collect()
}

/// A cluster whose apps overlay reaches its base with `../base`, beside `extra` in its directory.
fn fleet(extra: &str) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps/prod", "");
    repo.write("apps/base/kustomization.yaml", "resources:\n- cm.yaml\n");
    repo.config_map("apps/base/cm.yaml", "settings", "default");
    repo.write("apps/prod/kustomization.yaml", "resources:\n- ../base\n");
    if !extra.is_empty() {
        repo.write("clusters/prod/extra.yaml", extra);
    }
    repo.write("README.md", "fleet\n");
    repo.write(".github/workflows/ci.yml", "on: push\n");
    repo.commit("fleet");
    repo
}

const KYVERNO_OCI: &str = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: kyverno\n  \
    namespace: flux-system\nspec:\n  interval: 10m\n  url: oci://ghcr.io/kyverno/manifests/kyverno\n  ref:\n    tag: v1.12.0\n\
    ---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: kyverno\n  namespace: \
    flux-system\nspec:\n  interval: 10m\n  path: ./\n  prune: true\n  sourceRef:\n    kind: OCIRepository\n    name: kyverno\n";

#[test]
fn a_kustomization_of_an_external_oci_artifact_at_the_top_reads_none_of_this_repository() {
    let repo = fleet(KYVERNO_OCI);
    repo.write("README.md", "fleet, now documented\n");
    repo.write("apps/base/notes.txt", "not named by any kustomization\n");
    repo.commit("docs");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(!has_alert(&plan, "warning", "unplanned-change"), "{:?}", alert_codes(&plan));
    assert_eq!(unplanned(&plan), unread(&["README.md", "apps/base/notes.txt"]));
}

/// The near misses: a Kustomization at `path: ./` of a source that is this repository (and more:
/// `spec.include`, so it is not rendered) still reads every file of it; one of an OCI artifact
/// the fleet declares as a directory of this repository (CI pushes it) reads that directory
/// (argo_reach.rs).
#[test]
fn a_kustomization_of_this_repository_at_the_top_still_reads_every_file() {
    let this_repo_and_more = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: fleet\n  \
        namespace: flux-system\nspec:\n  interval: 10m\n  url: ssh://git@github.com/acme/fleet\n  ref:\n    branch: main\n  \
        include:\n  - repository:\n      name: shared\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n\
        metadata:\n  name: everything\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./\n  prune: true\n  \
        sourceRef:\n    kind: GitRepository\n    name: fleet\n";
    let repo = fleet(this_repo_and_more);
    repo.write("README.md", "fleet, now documented\n");
    repo.commit("docs");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(has_alert(&plan, "warning", "unplanned-change"), "{:?}", alert_codes(&plan));
    assert_eq!(
        unplanned(&plan),
        [("README.md".to_string(), vec!["Kustomization flux-system/everything".to_string()])]
    );
}

/// flux2-multi-tenancy's shape: kyverno from an OCI artifact built elsewhere, here at a
/// directory of it (`./config`), and a tenant's Kustomization of the tenant's own repository at
/// `./deploy/staging`. This repository happens to have both directories: its files there are
/// read by neither (no `unplanned-change`, listed as read by no unit).
const TENANTS_ELSEWHERE: &str = "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  \
    name: kyverno\n  namespace: flux-system\nspec:\n  interval: 10m\n  url: oci://ghcr.io/kyverno/manifests/kyverno\n  \
    ref:\n    tag: v1.12.0\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  \
    name: kyverno\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./config\n  prune: true\n  sourceRef:\n    \
    kind: OCIRepository\n    name: kyverno\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\n\
    metadata:\n  name: dev-team\n  namespace: apps\nspec:\n  interval: 1m\n  url: https://github.com/acme/dev-team\n  \
    ref:\n    branch: main\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  \
    name: dev-team\n  namespace: apps\nspec:\n  interval: 5m\n  path: ./deploy/staging\n  prune: true\n  \
    serviceAccountName: dev-team\n  sourceRef:\n    kind: GitRepository\n    name: dev-team\n";

#[test]
fn kustomizations_of_another_repository_or_an_oci_artifact_read_none_of_this_one_at_any_path() {
    let repo = fleet(TENANTS_ELSEWHERE);
    repo.write("config/policy.yaml", "kind: Notes\n");
    repo.write("deploy/staging/app.yaml", "kind: Notes\n");
    repo.commit("directories named as theirs");
    repo.write("config/policy.yaml", "kind: Notes\nedited: true\n");
    repo.write("deploy/staging/app.yaml", "kind: Notes\nedited: true\n");
    repo.commit("edit them");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(!has_alert(&plan, "warning", "unplanned-change"), "{:?}", alert_codes(&plan));
    assert_eq!(unplanned(&plan), unread(&["config/policy.yaml", "deploy/staging/app.yaml"]));
    assert_eq!((plan["verdict"].as_str(), code), (Some("no-changes"), 0), "{plan:#}");
}

/// The near miss: the tenant's GitRepository is this repository (its URL is this checkout's
/// remote) but with more than it (`spec.include`, so it is not rendered): its path reads here,
/// and a change there is an `unplanned-change` naming it.
#[test]
fn a_kustomization_of_this_repository_not_rendered_still_reads_its_path() {
    let this_repo = TENANTS_ELSEWHERE.replace(
        "url: https://github.com/acme/dev-team\n  ref:\n    branch: main\n",
        "url: ssh://git@github.com/acme/fleet\n  ref:\n    branch: main\n  include:\n  - repository:\n      name: shared\n",
    );
    assert_ne!(this_repo, TENANTS_ELSEWHERE);
    let repo = fleet(&this_repo);
    repo.write("deploy/staging/app.yaml", "kind: Notes\n");
    repo.commit("the tenant's directory");
    repo.write("deploy/staging/app.yaml", "kind: Notes\nedited: true\n");
    repo.commit("edit it");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(has_alert(&plan, "warning", "unplanned-change"), "{:?}", alert_codes(&plan));
    assert_eq!(
        unplanned(&plan),
        [("deploy/staging/app.yaml".to_string(), vec!["Kustomization apps/dev-team".to_string()])]
    );
}

#[test]
fn a_base_reached_with_dotdot_is_planned_and_not_listed_as_read_by_no_unit() {
    let repo = fleet("");
    repo.write("apps/base/kustomization.yaml", "resources:\n- cm.yaml\nnamePrefix: prod-\n");
    // The near miss: a file of the base no kustomization names.
    repo.write("apps/base/draft.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: draft\n");
    repo.commit("prefix the base");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    assert_eq!(unplanned(&plan), unread(&["apps/base/draft.yaml"]));
}

/// An ArtifactGenerator copies the apps into an artifact; the Kustomization of the artifact reads
/// its overlay, which reaches the base: both are this repository's files, planned.
#[test]
fn a_file_an_artifact_generator_copies_is_planned_and_not_listed() {
    let repo = Repo::bootstrap("prod");
    repo.write(
        "clusters/prod/artifacts.yaml",
        "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata:\n  name: apps\n  namespace: \
         flux-system\nspec:\n  sources:\n    - alias: fleet\n      kind: GitRepository\n      name: flux-system\n  \
         artifacts:\n    - name: apps\n      originRevision: \"@fleet\"\n      copy:\n        - from: \"@fleet/apps/**\"\n          \
         to: \"@artifact/\"\n",
    );
    repo.kustomization_of("clusters/prod/apps.yaml", "apps", "./prod", ("ExternalArtifact", "apps"), "");
    repo.write("apps/base/kustomization.yaml", "resources:\n- cm.yaml\n");
    repo.config_map("apps/base/cm.yaml", "settings", "default");
    repo.write("apps/prod/kustomization.yaml", "resources:\n- ../base\n");
    repo.commit("fleet of artifacts");
    repo.write("apps/base/kustomization.yaml", "resources:\n- cm.yaml\nnamePrefix: prod-\n");
    // The near miss: a file no generator copies.
    repo.write("docs/apps.yaml", "kind: Notes\n");
    repo.commit("prefix the base");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    let apps = crate::fixture::changes_of(&plan, "flux-system/apps");
    assert!(apps.iter().any(|(action, id)| action == "create" && id.contains("prod-settings")), "{apps:?}");
    assert_eq!(unplanned(&plan), unread(&["docs/apps.yaml"]));
}

#[test]
fn files_the_source_ignore_rules_leave_out_are_not_listed() {
    let repo = fleet("");
    repo.write(".github/workflows/ci.yml", "on: pull_request\n");
    repo.write("logo.png", "not really a picture\n");
    repo.write("README.md", "fleet, now documented\n");
    repo.commit("CI and docs");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    // source-controller's defaults leave out .github/ and images; a README is in the artifact.
    assert_eq!(unplanned(&plan), unread(&["README.md"]));
}

/// The near misses: any `.sourceignore` pattern drops those defaults (so `.github/` is in the
/// artifact again), and a rule the pull request itself adds hides nothing of it.
#[test]
fn only_the_rules_of_both_revisions_leave_a_file_out() {
    let repo = fleet("");
    repo.write(".sourceignore", "*.md\n");
    repo.commit("ignore docs");
    repo.write(".github/workflows/ci.yml", "on: pull_request\n");
    repo.write("README.md", "fleet, now documented\n");
    repo.write(".sourceignore", "*.md\nnotes/\n");
    repo.write("notes/todo.txt", "hidden by a rule of this pull request\n");
    repo.commit("CI, docs and notes");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(unplanned(&plan), unread(&[".github/workflows/ci.yml", ".sourceignore", "notes/todo.txt"]));
}
