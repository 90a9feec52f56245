//! Flux Operator fleets shaped like controlplaneio-fluxcd/d2-fleet: each cluster's FluxInstance
//! syncs the OCIRepository CI pushes this repository to, a `tenants` Kustomization reads the
//! same artifact, and tenants are ResourceSets.

use crate::fixture::{alert_codes, changes_of, plan_json, Repo};
use serde_json::Value;

const REMOTE: &str = "https://github.com/acme/d2-fleet";

/// A cluster directory as d2-fleet writes one: the FluxInstance syncing `oci://…/d2-fleet`, the
/// runtime-info ConfigMap, and the `tenants` Kustomization reading the same artifact.
pub fn add_cluster(repo: &Repo, cluster: &str) {
    repo.write(
        &format!("clusters/{cluster}/flux-system/flux-instance.yaml"),
        &format!(
            "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\nspec:\n  distribution:\n    version: \"2.x\"\n    registry: ghcr.io/fluxcd\n  sync:\n    kind: OCIRepository\n    url: oci://ghcr.io/acme/d2-fleet\n    ref: latest-stable\n    path: clusters/{cluster}\n    pullSecret: ghcr-auth\n"
        ),
    );
    repo.write(
        &format!("clusters/{cluster}/flux-system/runtime-info.yaml"),
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flux-runtime-info\n  namespace: flux-system\ndata:\n  ENVIRONMENT: {cluster}\n"
        ),
    );
    repo.write(
        &format!("clusters/{cluster}/flux-system/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- flux-instance.yaml\n- runtime-info.yaml\n",
    );
    repo.write(
        &format!("clusters/{cluster}/tenants.yaml"),
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: tenants\n  namespace: flux-system\nspec:\n  interval: 12h\n  path: ./tenants\n  prune: true\n  sourceRef:\n    kind: OCIRepository\n    name: flux-system\n",
    );
}

/// Two clusters and a `tenants/` directory of plain objects.
fn fleet() -> Repo {
    let repo = Repo::new(REMOTE);
    for cluster in ["prod-eu", "staging"] {
        add_cluster(&repo, cluster);
    }
    repo.write(
        "tenants/frontend.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: frontend\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: frontend\ndata:\n  replicas: \"2\"\n",
    );
    repo.commit("fleet");
    repo
}

fn cluster_names(plan: &Value) -> Vec<String> {
    let mut names: Vec<String> = plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["cluster"].as_str().unwrap().to_string())
        .collect();
    names.dedup();
    names
}

#[test]
fn the_oci_repository_a_flux_instance_syncs_is_this_repository() {
    let repo = fleet();
    let render = repo.render(Some("HEAD"));
    let names: Vec<&str> = render.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["clusters/prod-eu", "clusters/staging"]);
    for cluster in &render.clusters {
        let tenants = cluster.kustomizations.iter().find(|k| k.name == "tenants").expect("tenants reached");
        assert_eq!(tenants.status, fluxplan::render::Status::Rendered, "{:?}", tenants.warnings);
        assert_eq!(tenants.ids(), vec!["_frontend__Namespace", "frontend_settings__ConfigMap"]);
    }

    // A commit touching only tenants/ changes both clusters.
    crate::fixture::edit(&repo, "tenants/frontend.yaml", "replicas: \"2\"", "replicas: \"3\"");
    repo.commit("scale frontend");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", alert_codes(&plan));
    assert_eq!(plan["verdict"], "changes");
    assert_eq!(cluster_names(&plan), vec!["clusters/prod-eu", "clusters/staging"]);
    assert_eq!(
        changes_of(&plan, "flux-system/tenants"),
        vec![("update".to_string(), "frontend_settings__ConfigMap".to_string())]
    );
}

#[test]
fn a_cluster_the_pull_request_adds_is_planned_as_new() {
    let repo = fleet();
    add_cluster(&repo, "prod-us");
    repo.commit("add prod-us");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", plan["alerts"]);
    assert!(alert_codes(&plan).iter().all(|(_, code)| code != "roots-changed" && code != "root-failed"));
    let new: Vec<&Value> = plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["cluster"] == "clusters/prod-us")
        .collect();
    assert_eq!(new.len(), 2, "{new:#?}");
    assert!(new.iter().all(|k| k["status"] == "added"), "{new:#?}");
}

#[test]
fn a_declared_root_whose_directory_the_pull_request_adds_is_a_new_cluster() {
    let repo = fleet();
    repo.write(".fluxplan.yaml", "roots:\n- path: clusters/prod-eu\n- path: clusters/prod-us\n");
    repo.commit("declare prod-us ahead");
    add_cluster(&repo, "prod-us");
    repo.commit("add prod-us");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", plan["alerts"]);
    assert!(alert_codes(&plan).iter().all(|(_, code)| code != "root-failed"), "{:?}", plan["alerts"]);
    assert_eq!(cluster_names(&plan), vec!["clusters/prod-eu", "clusters/prod-us"]);
    // Declared without a source, the root syncs the OCIRepository the instance at that path names.
    let tenants = plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["cluster"] == "clusters/prod-us" && k["name"] == "tenants")
        .expect("prod-us tenants planned");
    assert_eq!(tenants["status"], "added", "{tenants:#}");
}

#[test]
fn fluxplan_yaml_maps_a_source_to_a_directory_of_this_repository() {
    let repo = fleet();
    // CI pushes ./apps as its own artifact; a tenant Kustomization reads it.
    repo.write(
        "tenants/apps.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  interval: 5m\n  url: oci://ghcr.io/acme/d2-apps\n  ref:\n    tag: latest\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./frontend\n  prune: true\n  sourceRef:\n    kind: OCIRepository\n    name: apps\n",
    );
    repo.write(
        "apps/frontend/deploy.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: frontend\ndata:\n  a: b\n",
    );
    repo.commit("apps artifact");
    let render = repo.render(Some("HEAD"));
    let apps = render.find("flux-system/apps").unwrap();
    assert_eq!(apps.status, fluxplan::render::Status::External, "unmapped: not this repository");

    repo.write(".fluxplan.yaml", "sources:\n- kind: OCIRepository\n  name: apps\n  path: apps\n");
    repo.commit("map the apps artifact");
    let mut opts = repo.options(Some("HEAD"));
    opts.declared_sources =
        fluxplan::plan::Policy::parse("sources:\n- kind: OCIRepository\n  name: apps\n  path: apps\n")
            .unwrap()
            .sources;
    let render = crate::fixture::render_with(&opts);
    let apps = render.find("flux-system/apps").unwrap();
    assert_eq!(apps.status, fluxplan::render::Status::Rendered, "{:?} {:?}", apps.error, apps.warnings);
    assert_eq!(apps.ids(), vec!["frontend_web__ConfigMap"]);
    // Origins are named from the repository's top, as every other file.
    assert_eq!(apps.objects[0].origin.as_deref(), Some("apps/frontend/deploy.yaml"));

    // The plan reads the mapping from the base revision's .fluxplan.yaml.
    crate::fixture::edit(&repo, "apps/frontend/deploy.yaml", "a: b", "a: c");
    repo.commit("change the app");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", plan["alerts"]);
    assert_eq!(
        changes_of(&plan, "flux-system/apps"),
        vec![("update".to_string(), "frontend_web__ConfigMap".to_string())]
    );
}

#[test]
fn fluxplan_yaml_refuses_sources_that_cannot_be_this_repository() {
    let parse = |text: &str| fluxplan::plan::Policy::parse(text).unwrap_err();
    assert!(
        parse("sources:\n- kind: HelmRepository\n  name: x\n").contains("kind 'HelmRepository' cannot hold")
    );
    assert!(parse("sources:\n- kind: OCIRepository\n  name: x\n  path: ../elsewhere\n")
        .contains("inside the repository"));
    assert!(
        parse("sources:\n- kind: OCIRepository\n  name: x\n  path: /etc\n").contains("inside the repository")
    );
    assert!(
        parse("sources:\n- kind: Bucket\n  name: x\n- kind: Bucket\n  name: x\n").contains("declared twice")
    );
    assert!(parse("roots:\n- path: clusters/a\n  source:\n    kind: HelmChart\n    name: x\n")
        .contains("cannot hold"));
}
