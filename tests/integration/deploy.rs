//! The manifests in deploy/kubernetes: they build with the real kustomize, and the role they grant
//! is read-only.

use fluxplan::render::kustomize::Kustomize;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

fn manifests() -> Vec<Value> {
    built("deploy/kubernetes")
}

fn built(directory: &str) -> Vec<Value> {
    let kustomize = Kustomize::detect(Duration::from_secs(60)).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join(directory);
    let output = kustomize
        .build(&dir, root, &fluxplan::cancel::CancelToken::new())
        .unwrap_or_else(|e| panic!("{directory} does not build: {e}"));
    fluxplan::yaml::parse_documents(&output).unwrap()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn the_cluster_role_only_gets_and_lists() {
    let objects = manifests();
    let role = find(&objects, "ClusterRole");
    let verbs: std::collections::BTreeSet<&str> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["verbs"].as_array().unwrap())
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(verbs, ["get", "list"].into_iter().collect());
    let binding = find(&objects, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["name"], "fluxplan");
    assert_eq!(binding["subjects"][0]["namespace"], "fluxplan");
}

/// Whether a ClusterRole's rules let it get or list Secrets.
fn reads_secrets(role: &Value) -> bool {
    role["rules"].as_array().unwrap().iter().any(|rule| {
        let has = |field: &str, value: &str| {
            rule[field].as_array().is_some_and(|list| list.iter().any(|v| v == value || v == "*"))
        };
        has("apiGroups", "") && has("resources", "secrets")
    })
}

#[test]
fn by_default_no_secret_is_readable_and_the_component_opts_in() {
    let objects = manifests();
    let roles: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "ClusterRole").collect();
    assert_eq!(roles.len(), 1);
    assert!(!reads_secrets(roles[0]), "the default role reads Secrets: {:#}", roles[0]);
    let wide = built("deploy/kubernetes-read-everything");
    let everything = wide
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "fluxplan-read-everything")
        .expect("the component adds its role");
    assert!(reads_secrets(everything));
    let binding = wide
        .iter()
        .find(|o| o["kind"] == "ClusterRoleBinding" && o["roleRef"]["name"] == "fluxplan-read-everything")
        .expect("and binds it");
    assert_eq!(binding["subjects"][0]["namespace"], "fluxplan");
}

#[test]
fn the_deployment_runs_the_bot_with_its_service_account_and_secret_references() {
    let objects = manifests();
    let deployment = find(&objects, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "fluxplan");
    let container = &pod["containers"][0];
    assert_eq!(container["args"][0], "serve");
    let env: Vec<&str> =
        container["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    for name in [
        "DATABASE_URL",
        "FLUXPLAN_GITHUB_TOKEN",
        "FLUXPLAN_GITHUB_WEBHOOK_SECRET",
        "FLUXPLAN_GITLAB_URL",
        "FLUXPLAN_GITLAB_TOKEN",
        "FLUXPLAN_GITLAB_WEBHOOK_TOKEN",
    ] {
        assert!(env.contains(&name), "{name} missing");
    }
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(find(&objects, "Service")["spec"]["ports"][0]["targetPort"], "http");
}

/// With the secret-files component, the GitHub secrets come from the mounted Secret's files: no
/// environment variable holds them.
#[test]
fn the_secret_files_component_reads_the_github_secrets_from_mounted_files() {
    let objects = built("deploy/kubernetes-secret-files");
    let pod = &find(&objects, "Deployment")["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let env: std::collections::BTreeMap<&str, &Value> =
        container["env"].as_array().unwrap().iter().map(|e| (e["name"].as_str().unwrap(), e)).collect();
    assert!(
        !env.contains_key("FLUXPLAN_GITHUB_TOKEN") && !env.contains_key("FLUXPLAN_GITHUB_WEBHOOK_SECRET")
    );
    assert_eq!(env["FLUXPLAN_GITHUB_TOKEN_FILE"]["value"], "/etc/fluxplan/secrets/github-token");
    assert_eq!(
        env["FLUXPLAN_GITHUB_WEBHOOK_SECRET_FILE"]["value"],
        "/etc/fluxplan/secrets/github-webhook-secret"
    );
    let mounts = container["volumeMounts"].as_array().unwrap();
    assert!(mounts.iter().any(|m| m["name"] == "secrets"
        && m["mountPath"] == "/etc/fluxplan/secrets"
        && m["readOnly"] == true));
    let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "secrets").unwrap();
    assert_eq!(volume["secret"]["secretName"], "fluxplan");
    // The other settings stay as they were.
    assert!(env.contains_key("DATABASE_URL") && env.contains_key("FLUXPLAN_GITLAB_TOKEN"));
}
