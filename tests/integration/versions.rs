//! Version changes: images and charts the merge moves, each listed once with where, and a jump
//! across major versions raising `major-bump`.

use crate::fixture::{alert_codes, plan_cli, plan_json, Repo};
use serde_json::json;

fn deployment(name: &str, app: &str, sidecar: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: app\n        image: {app}\n      - name: proxy\n        image: {sidecar}\n"
    )
}

/// Two Kustomizations running the same images; the pull request bumps both.
fn fleet(app: &str, sidecar: &str) -> String {
    deployment("web", app, sidecar) + "---\n" + &deployment("worker", app, sidecar)
}

#[test]
fn image_bumps_are_listed_once_and_a_major_jump_is_a_warning() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n");
    let proxy = "registry.local:5000/mesh/proxy:1.4.0@sha256:1111111111111111111111111111111111111111111111111111111111111111";
    repo.write("apps/deployments.yaml", &fleet("ghcr.io/acme/shop:v1.9.2", proxy));
    repo.commit("base");
    let proxy_next = "registry.local:5000/mesh/proxy:1.5.0@sha256:2222222222222222222222222222222222222222222222222222222222222222";
    repo.write("apps/deployments.yaml", &fleet("ghcr.io/acme/shop:v2.0.0", proxy_next));
    repo.commit("bump");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", alert_codes(&plan));
    let places = json!(["clusters/prod: Deployment shop/web", "clusters/prod: Deployment shop/worker"]);
    assert_eq!(
        plan["versions"],
        json!([
            {"kind": "image", "name": "ghcr.io/acme/shop", "from": "v1.9.2", "to": "v2.0.0", "major": true, "places": places},
            {"kind": "image", "name": "registry.local:5000/mesh/proxy",
             "from": "1.4.0@sha256:1111111111111111111111111111111111111111111111111111111111111111",
             "to": "1.5.0@sha256:2222222222222222222222222222222222222222222222222222222222222222",
             "major": false, "places": places},
        ])
    );
    // Each is a major-bump alert: info, a warning across major versions.
    let bumps: Vec<(&str, &str)> = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["code"] == "major-bump")
        .map(|a| (a["severity"].as_str().unwrap(), a["message"].as_str().unwrap()))
        .collect();
    assert_eq!(bumps.len(), 2, "{:#}", plan["alerts"]);
    assert!(
        bumps
            .iter()
            .any(|(s, m)| *s == "warning" && m.contains("ghcr.io/acme/shop: v1.9.2 → v2.0.0, across")),
        "{bumps:?}"
    );
    assert!(bumps.iter().any(|(s, m)| *s == "info" && m.contains("mesh/proxy: 1.4.0@")), "{bumps:?}");

    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert!(!markdown.contains("**major-bump**"), "shown once, in the table: {markdown}");
    let table = &markdown[markdown.find("### Version changes").expect("a version table")..];
    let table = &table[..table.find("\n\n###").unwrap_or(table.len())];
    insta::assert_snapshot!("versions_table_markdown", table);
}

#[test]
fn an_unchanged_image_or_a_new_deployment_lists_no_version_change() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n");
    repo.write("apps/web.yaml", &deployment("web", "ghcr.io/acme/shop:v1.9.2", "proxy:1"));
    repo.commit("base");
    // A replica count changes and a new Deployment comes: no version moves.
    repo.write(
        "apps/web.yaml",
        &deployment("web", "ghcr.io/acme/shop:v1.9.2", "proxy:1")
            .replace("spec:\n  selector", "spec:\n  replicas: 3\n  selector"),
    );
    repo.write("apps/new.yaml", &deployment("new", "ghcr.io/acme/new:v3.0.0", "proxy:2"));
    repo.commit("scale and add");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", alert_codes(&plan));
    assert!(plan.get("versions").is_none(), "{:#}", plan["versions"]);
}
