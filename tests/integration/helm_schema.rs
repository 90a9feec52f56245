//! A chart's values schema that refers to the network is validated by helm-controller, online,
//! and never by fluxplan, offline: the release renders without validation and says so, and a
//! pull request that does not touch it is not blocked by it. A schema fluxplan can read (only
//! within itself) is still validated, and values that violate it still fail the release.

use crate::fixture::{alert_codes, helm, plan_json, unit_in, Repo};

/// A release `apps/web` of the chart at `charts/web`, whose schema is `schema`, and a
/// Kustomization of plain ConfigMaps beside it (`other/config.yaml`).
fn fleet(schema: &str, release_spec_extra: &str) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.kustomization("clusters/prod/other.yaml", "other", "./other", "");
    repo.write("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n");
    repo.write("charts/web/values.yaml", "replicas: 1\n");
    repo.write("charts/web/values.schema.json", schema);
    repo.write(
        "charts/web/templates/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  replicas: {{ .Values.replicas | quote }}\n",
    );
    repo.write(
        "apps/web.yaml",
        &format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  \
             interval: 10m\n  chart:\n    spec:\n      chart: ./charts/web\n      sourceRef:\n        kind: GitRepository\n        \
             name: flux-system\n        namespace: flux-system\n{release_spec_extra}  values:\n    replicas: 2\n"
        ),
    );
    repo.write(
        "other/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: apps\ndata:\n  a: b\n",
    );
    repo.commit("base");
    repo
}

/// A `$ref` to a closed port of loopback: online or offline, fetching it fails, so a plan that
/// validated this schema would fail the release.
const REMOTE_SCHEMA: &str =
    r#"{"type": "object", "properties": {"replicas": {"$ref": "http://127.0.0.1:9/replicas.schema.json"}}}"#;

#[test]
fn a_schema_with_a_remote_ref_does_not_block_an_unrelated_pull_request() {
    let helm = helm(4);
    let repo = fleet(REMOTE_SCHEMA, "");
    // Helm itself fails on this schema: validating it is what fluxplan must not do.
    let values = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(values.path(), "replicas: 2\n").unwrap();
    let validated = std::process::Command::new(helm.program())
        .args(["template", "web"])
        .arg(repo.path().join("charts/web"))
        .arg("--values")
        .arg(values.path())
        .output()
        .unwrap();
    assert!(!validated.status.success(), "helm validated a schema it cannot fetch");

    crate::fixture::edit(&repo, "other/config.yaml", "a: b", "a: c");
    repo.commit("an unrelated change");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "changes, not blocked: {:?} {plan:#}", alert_codes(&plan));
    let web = unit_in(&plan, "HelmRelease", "apps/web");
    assert!(web["error"].is_null(), "{web:#}");
    let notes = web["notes"].to_string();
    assert!(
        notes.contains("http://127.0.0.1:9/replicas.schema.json") && notes.contains("without validating"),
        "the release says its schema was not validated: {notes}"
    );
    assert_eq!(unit_in(&plan, "Kustomization", "flux-system/other")["changes"][0]["action"], "update");
}

/// The near miss: a schema of its own that the values violate still fails the release; and
/// `disableSchemaValidation` of the action helm-controller takes (here an upgrade) turns it off.
#[test]
fn a_local_schema_the_values_violate_still_fails_the_release_unless_disabled() {
    let _ = helm(4);
    let local = r##"{"type": "object", "properties": {"replicas": {"$ref": "#/definitions/count"}},
        "definitions": {"count": {"type": "integer", "maximum": 3}}}"##;
    let repo = fleet(local, "");
    crate::fixture::edit(&repo, "apps/web.yaml", "replicas: 2", "replicas: 5");
    repo.commit("too many replicas");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "blocked: {plan:#}");
    let web = unit_in(&plan, "HelmRelease", "apps/web");
    assert!(web["error"]["message"].as_str().is_some_and(|m| m.contains("maximum")), "{web:#}");

    // The base installs the release, so the head is an upgrade: the install's switch does not
    // apply to it, the upgrade's does.
    for (action, blocked) in [("install", true), ("upgrade", false)] {
        let disabled = fleet(local, &format!("  {action}:\n    disableSchemaValidation: true\n"));
        crate::fixture::edit(&disabled, "apps/web.yaml", "replicas: 2", "replicas: 5");
        disabled.commit("too many replicas, unvalidated");
        let (plan, code) = plan_json(&disabled, "HEAD~1", "HEAD", &[]);
        let web = unit_in(&plan, "HelmRelease", "apps/web");
        assert_eq!(code, if blocked { 2 } else { 1 }, "{action}: {plan:#}");
        assert_eq!(web["error"].is_null(), !blocked, "{action}: {web:#}");
    }
    let disabled = fleet(local, "  upgrade:\n    disableSchemaValidation: true\n");
    crate::fixture::edit(&disabled, "apps/web.yaml", "replicas: 2", "replicas: 5");
    disabled.commit("too many replicas, unvalidated");
    let (plan, _) = plan_json(&disabled, "HEAD~1", "HEAD", &[]);
    let web = unit_in(&plan, "HelmRelease", "apps/web");
    assert!(web["changes"][0]["diff"].as_str().is_some_and(|d| d.contains("+  replicas: '5'")), "{web:#}");
}
