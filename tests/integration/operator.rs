//! Flux Operator fleets shaped like controlplaneio-fluxcd/d2-fleet: each cluster's FluxInstance
//! syncs the OCIRepository CI pushes this repository to, a `tenants` Kustomization reads the
//! same artifact, and tenants are ResourceSets.

use crate::fixture::{alert_codes, changes_of, plan_json, Repo};
use serde_json::{json, Value};

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

/// A tenant Kustomization reading podinfo's own repository: external, whatever this one holds.
fn with_podinfo(repo: &Repo) {
    repo.write(
        "tenants/podinfo.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: podinfo\n  namespace: podinfo\nspec:\n  interval: 5m\n  url: https://github.com/stefanprodan/podinfo\n  ref:\n    branch: master\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: podinfo\n  namespace: podinfo\nspec:\n  interval: 1h\n  path: ./kustomize\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: podinfo\n",
    );
}

fn podinfo_status(plan: &Value, cluster: &str) -> String {
    let unit = plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["cluster"] == cluster && k["name"] == "podinfo")
        .unwrap_or_else(|| panic!("podinfo planned in {cluster}: {plan:#}"));
    unit["status"].as_str().unwrap().to_string()
}

#[test]
fn a_flux_instance_the_pull_request_adds_cannot_make_another_source_this_repository() {
    let repo = fleet();
    with_podinfo(&repo);
    repo.commit("podinfo tenant");
    // The attack: a new FluxInstance names podinfo's source as its sync, and a decoy directory
    // here holds what the plan should show in place of podinfo's real tree.
    repo.write(
        "clusters/decoy/flux-instance.yaml",
        "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: podinfo\nspec:\n  distribution:\n    version: \"2.x\"\n  sync:\n    kind: GitRepository\n    name: podinfo\n    url: https://github.com/stefanprodan/podinfo\n    ref: refs/heads/master\n    path: clusters/decoy\n",
    );
    repo.write(
        "kustomize/decoy.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: decoy\n  namespace: podinfo\ndata:\n  a: b\n",
    );
    repo.commit("claim podinfo");
    // The same revision built alone trusts its own syncs (nothing is compared there)...
    let alone = repo.render(Some("HEAD"));
    assert_eq!(alone.find("podinfo/podinfo").unwrap().status, fluxplan::render::Status::Rendered);
    // ...but planned as a pull request, podinfo stays another repository everywhere.
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    for cluster in ["clusters/prod-eu", "clusters/staging"] {
        assert_eq!(podinfo_status(&plan, cluster), "external", "{cluster}");
    }
    let text = plan.to_string();
    assert!(!text.contains("podinfo_decoy__ConfigMap"), "the decoy is never planned: {plan:#}");
    assert!(text.contains("which the base revision does not have this way"), "{plan:#}");
}

#[test]
fn a_sync_pointed_at_another_source_is_a_danger_and_not_planned_as_this_repository() {
    let repo = fleet();
    crate::fixture::edit(
        &repo,
        "clusters/staging/flux-system/flux-instance.yaml",
        "oci://ghcr.io/acme/d2-fleet",
        "oci://ghcr.io/someone/else",
    );
    repo.commit("staging syncs another artifact");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{:?}", alert_codes(&plan));
    let alert = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["code"] == "sync-changed")
        .unwrap_or_else(|| panic!("sync-changed raised: {:#}", plan["alerts"]));
    assert_eq!(alert["severity"], "danger");
    assert_eq!(alert["cluster"], "clusters/staging");
    let message = alert["message"].as_str().unwrap();
    assert!(
        message.contains("oci://ghcr.io/someone/else") && message.contains("oci://ghcr.io/acme/d2-fleet"),
        "{message}"
    );
    // prod-eu, untouched, raises nothing of the kind.
    assert_eq!(alert_codes(&plan).iter().filter(|(_, code)| code == "sync-changed").count(), 1);
    // Staging's root reads the other artifact: not planned, and nothing of its tenants is
    // guessed deleted; prod-eu still renders from this repository though its sync has the same name.
    let staging: Vec<&Value> = plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["cluster"] == "clusters/staging")
        .collect();
    let root = staging.iter().find(|k| k["name"] == "flux-system").unwrap();
    assert_eq!(root["status"], "external", "{root:#}");
    let tenants = staging.iter().find(|k| k["name"] == "tenants").unwrap();
    assert_eq!(tenants["changes"].as_array().map(Vec::len), Some(0), "{tenants:#}");
    assert!(tenants["notes"][0].as_str().unwrap().contains("whether it still produces"), "{tenants:#}");
    let render = repo.render(Some("HEAD~1"));
    assert!(render
        .clusters
        .iter()
        .all(|c| c.kustomizations.iter().all(|k| k.status == fluxplan::render::Status::Rendered)));
    assert!(plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["cluster"] == "clusters/prod-eu")
        .all(|k| k["status"] == "unchanged"));
}

#[test]
fn a_sync_whose_ref_or_patches_change_or_that_is_declared_is_still_judged_by_the_base() {
    let file = "clusters/staging/flux-system/flux-instance.yaml";
    let sync_changed = |repo: &Repo| {
        let (plan, code) = plan_json(repo, "HEAD~1", "HEAD", &[]);
        let alert = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "sync-changed").cloned();
        (code, alert.map(|a| a["message"].as_str().unwrap().to_string()))
    };
    // Another ref: the operator fetches another artifact.
    let repo = fleet();
    crate::fixture::edit(&repo, file, "ref: latest-stable", "ref: pr-1234");
    repo.commit("staging follows a pull request's artifact");
    let (code, message) = sync_changed(&repo);
    assert_eq!(code, 2);
    assert!(message.unwrap().contains("its ref is now 'pr-1234' (it was 'latest-stable')"));
    // Instance patches that rewrite the sync's source.
    let repo = fleet();
    crate::fixture::edit(
        &repo,
        file,
        "  sync:\n",
        "  kustomize:\n    patches:\n    - target:\n        kind: OCIRepository\n      patch: |\n        - op: replace\n          path: /spec/url\n          value: oci://ghcr.io/someone/else\n  sync:\n",
    );
    repo.commit("patch the sync source");
    let (code, message) = sync_changed(&repo);
    assert_eq!(code, 2);
    assert!(message.unwrap().contains("kustomize.patches changed"));
    // An empty kind selects every kind, as kustomize reads a target: such a patch re-points the
    // generated Kustomization, so it is part of the sync's identity.
    let repo = fleet();
    crate::fixture::edit(
        &repo,
        file,
        "  sync:\n",
        "  kustomize:\n    patches:\n    - target:\n        kind: \"\"\n        name: flux-system\n      patch: |\n        - op: replace\n          path: /spec/path\n          value: ./empty\n  sync:\n",
    );
    repo.commit("an empty kind");
    let (code, message) = sync_changed(&repo);
    assert_eq!(code, 2);
    assert!(message.unwrap().contains("kustomize.patches changed"));
    // A source .fluxplan.yaml declares is this repository only as the base syncs it: its URL
    // changed is still a sync change.
    let repo = fleet();
    repo.write(".fluxplan.yaml", "sources:\n- kind: OCIRepository\n  name: flux-system\n");
    repo.commit("declare the fleet's artifact");
    crate::fixture::edit(&repo, file, "oci://ghcr.io/acme/d2-fleet", "oci://ghcr.io/someone/else");
    repo.commit("re-point staging");
    let (code, message) = sync_changed(&repo);
    assert_eq!(code, 2);
    assert!(message.unwrap().contains("at base it synced OCIRepository from oci://ghcr.io/acme/d2-fleet"));
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

/// The tenants ResourceSet of d2-fleet, trimmed: per tenant a Namespace, a ServiceAccount, a
/// RoleBinding, and an OCIRepository with a Kustomization of the tenant's apps.
fn tenants_resourceset(tenants: &[&str], role: &str) -> String {
    let inputs: String = tenants.iter().map(|t| format!("  - tenant: \"{t}\"\n    tag: latest\n")).collect();
    format!(
        "apiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSet\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  inputs:\n{inputs}  resources:\n    - apiVersion: v1\n      kind: Namespace\n      metadata:\n        name: << inputs.tenant >>\n        labels:\n          toolkit.fluxcd.io/role: tenant\n    - apiVersion: v1\n      kind: ServiceAccount\n      metadata:\n        name: flux\n        namespace: << inputs.tenant >>\n    - apiVersion: rbac.authorization.k8s.io/v1\n      kind: RoleBinding\n      metadata:\n        name: flux\n        namespace: << inputs.tenant >>\n      roleRef:\n        apiGroup: rbac.authorization.k8s.io\n        kind: ClusterRole\n        name: {role}\n      subjects:\n        - kind: ServiceAccount\n          name: flux\n          namespace: << inputs.tenant >>\n    - apiVersion: v1\n      kind: PersistentVolumeClaim\n      metadata:\n        name: data\n        namespace: << inputs.tenant >>\n      spec:\n        accessModes: [ReadWriteOnce]\n        resources:\n          requests:\n            storage: 1Gi\n    - apiVersion: source.toolkit.fluxcd.io/v1\n      kind: OCIRepository\n      metadata:\n        name: apps\n        namespace: << inputs.tenant >>\n      spec:\n        interval: 5m\n        url: \"oci://ghcr.io/acme/d2-apps/<< inputs.tenant >>\"\n        ref:\n          tag: << inputs.tag >>\n    - apiVersion: kustomize.toolkit.fluxcd.io/v1\n      kind: Kustomization\n      metadata:\n        name: apps\n        namespace: << inputs.tenant >>\n      spec:\n        interval: 30m\n        sourceRef:\n          kind: OCIRepository\n          name: apps\n        path: ./production\n        prune: true\n"
    )
}

/// The fleet with its tenants as a ResourceSet (the tenants/ directory holds only it).
fn tenant_fleet(tenants: &[&str]) -> Repo {
    let repo = Repo::new(REMOTE);
    add_cluster(&repo, "prod-eu");
    repo.write("tenants/apps.yaml", &tenants_resourceset(tenants, "admin"));
    repo.commit("tenants");
    repo
}

fn unit<'a>(plan: &'a Value, kind: &str, reference: &str) -> &'a Value {
    crate::fixture::unit_in(plan, kind, reference)
}

#[test]
fn a_template_change_plans_the_updated_object_of_every_tenant() {
    let repo = tenant_fleet(&["frontend", "backend"]);
    let render = repo.render(Some("HEAD"));
    let set = render
        .unit(
            "clusters/prod-eu",
            &fluxplan::render::UnitRef::new(fluxplan::render::UnitKind::ResourceSet, "flux-system", "apps"),
        )
        .expect("the ResourceSet is a unit");
    assert_eq!(set.status, fluxplan::render::Status::Rendered, "{:?} {:?}", set.error, set.warnings);
    assert_eq!(set.parent.as_ref().map(|p| p.to_string()).as_deref(), Some("flux-system/tenants"));
    assert_eq!(set.objects.len(), 12);
    let labels = &set.objects[0].object["metadata"]["labels"];
    assert_eq!(labels["resourceset.fluxcd.controlplane.io/name"], "apps");
    // The Kustomizations it generates are walked: their source is another repository's.
    let tenant_apps = render.find("frontend/apps").expect("the tenant's Kustomization is reached");
    assert_eq!(tenant_apps.status, fluxplan::render::Status::External);

    crate::fixture::edit(&repo, "tenants/apps.yaml", "name: admin", "name: edit");
    repo.commit("tenants may only edit");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    // A binding's roleRef cannot change in place: the operator's apply would fail.
    assert_eq!(code, 2, "{:?}", plan["alerts"]);
    let refused: Vec<(&str, &str)> = plan["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["code"].as_str().unwrap(), f["object"].as_str().unwrap()))
        .collect();
    assert_eq!(
        refused,
        [
            ("immutable-field", "backend_flux_rbac.authorization.k8s.io_RoleBinding"),
            ("immutable-field", "frontend_flux_rbac.authorization.k8s.io_RoleBinding"),
        ]
    );
    let set = unit(&plan, "ResourceSet", "flux-system/apps");
    assert_eq!(set["engine"], "resourceset");
    assert_eq!(
        crate::fixture::sorted_changes(set),
        crate::fixture::sorted_pairs(&[
            ("update", "backend_flux_rbac.authorization.k8s.io_RoleBinding"),
            ("update", "frontend_flux_rbac.authorization.k8s.io_RoleBinding"),
        ])
    );
    let (markdown, _) = crate::fixture::plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    insta::assert_snapshot!("operator_template_change_markdown", markdown);
}

#[test]
fn removing_a_tenants_input_deletes_its_namespace_and_everything_in_it_and_blocks() {
    let repo = tenant_fleet(&["frontend", "backend"]);
    repo.write("tenants/apps.yaml", &tenants_resourceset(&["frontend"], "admin"));
    repo.commit("offboard backend");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{:?}", plan["alerts"]);
    let set = unit(&plan, "ResourceSet", "flux-system/apps");
    let deleted: Vec<(String, String)> = crate::fixture::sorted_changes(set);
    assert_eq!(
        deleted,
        crate::fixture::sorted_pairs(&[
            ("delete", "_backend__Namespace"),
            ("delete", "backend_apps_kustomize.toolkit.fluxcd.io_Kustomization"),
            ("delete", "backend_apps_source.toolkit.fluxcd.io_OCIRepository"),
            ("delete", "backend_data__PersistentVolumeClaim"),
            ("delete", "backend_flux__ServiceAccount"),
            ("delete", "backend_flux_rbac.authorization.k8s.io_RoleBinding"),
        ])
    );
    let reasons: Vec<&str> =
        set["changes"].as_array().unwrap().iter().filter_map(|c| c["reason"].as_str()).collect();
    // The manifest reaches the operator through kustomize, which sorts the input's keys.
    assert!(
        reasons.iter().filter(|r| r.contains("input removed: tag=latest, tenant=backend")).count() == 6,
        "{:#}",
        set["changes"]
    );
    let codes = alert_codes(&plan);
    assert!(codes.contains(&("danger".to_string(), "protected-kind-deletion".to_string())), "{codes:?}");
}

#[test]
fn an_offline_dynamic_provider_is_unknown_with_a_warning_never_no_changes() {
    let repo = Repo::new(REMOTE);
    add_cluster(&repo, "prod-eu");
    repo.write(
        "tenants/previews.yaml",
        "apiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSetInputProvider\nmetadata:\n  name: prs\n  namespace: flux-system\nspec:\n  type: GitHubPullRequest\n  url: https://github.com/acme/app\n---\napiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSet\nmetadata:\n  name: previews\n  namespace: flux-system\nspec:\n  inputsFrom:\n  - name: prs\n  resources:\n  - apiVersion: v1\n    kind: Namespace\n    metadata:\n      name: preview-<< inputs.id >>\n",
    );
    repo.commit("previews");
    crate::fixture::edit(&repo, "tenants/previews.yaml", "name: preview-", "name: pr-");
    repo.commit("rename previews");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_ne!(plan["verdict"], "no-changes");
    assert_eq!(code, 1, "{:?}", plan["alerts"]);
    let set = unit(&plan, "ResourceSet", "flux-system/previews");
    assert_eq!(set["status"], "external", "{set:#}");
    assert!(
        alert_codes(&plan).contains(&("warning".to_string(), "resourceset-unknown".to_string())),
        "{:?}",
        plan["alerts"]
    );
    let message =
        plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "resourceset-unknown").unwrap();
    assert!(message["message"].as_str().unwrap().contains("unknown offline"), "{message:#}");
}

#[test]
fn an_unsupported_template_function_fails_the_resourceset_by_name() {
    let repo = tenant_fleet(&["frontend"]);
    crate::fixture::edit(
        &repo,
        "tenants/apps.yaml",
        "name: << inputs.tenant >>\n        labels",
        "name: << inputs.tenant | toDate \"2006\" >>\n        labels",
    );
    repo.commit("a function fluxplan does not render");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{:?}", plan["alerts"]);
    let set = unit(&plan, "ResourceSet", "flux-system/apps");
    assert_eq!(set["status"], "failed");
    assert_eq!(set["error"]["code"], "template-failed");
    assert!(set["error"]["message"].as_str().unwrap().contains("calls toDate"), "{set:#}");
}

/// Read live (`--kube`, GET only): the inputs a GitHubPullRequest provider exports drive the
/// expansion, and the live ResourceSet's inventory says what the operator prunes.
#[test]
fn a_providers_live_exported_inputs_drive_the_expansion() {
    use crate::fake_kube::FakeKube;
    let repo = Repo::new(REMOTE);
    add_cluster(&repo, "prod-eu");
    let previews = |name_prefix: &str| {
        format!("apiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSetInputProvider\nmetadata:\n  name: prs\n  namespace: flux-system\nspec:\n  type: GitHubPullRequest\n  url: https://github.com/acme/app\n---\napiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSet\nmetadata:\n  name: previews\n  namespace: flux-system\nspec:\n  inputsFrom:\n  - name: prs\n  resources:\n  - apiVersion: v1\n    kind: Namespace\n    metadata:\n      name: {name_prefix}-<< inputs.id >>\n      labels:\n        branch: << inputs.branch | slugify >>\n")
    };
    repo.write("tenants/previews.yaml", &previews("preview"));
    repo.commit("previews");
    repo.write("tenants/previews.yaml", &previews("pr"));
    repo.commit("rename previews");
    let crd = |kind: &str, plural: &str| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.fluxcd.controlplane.io")},
            "spec": {"group": "fluxcd.controlplane.io", "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
                "versions": [{"name": "v1", "served": true, "storage": true}]}})
    };
    let owned = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {
        "resourceset.fluxcd.controlplane.io/name": "previews", "resourceset.fluxcd.controlplane.io/namespace": "flux-system"}}})
    };
    let fake = FakeKube::start(vec![
        crd("ResourceSetInputProvider", "resourcesetinputproviders"),
        crd("ResourceSet", "resourcesets"),
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "tenants", "namespace": "flux-system"},
            "spec": {"interval": "10m", "path": "./tenants", "prune": true, "sourceRef": {"kind": "OCIRepository", "name": "flux-system"}},
            "status": {"inventory": {"entries": []}}}),
        json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "ResourceSetInputProvider",
            "metadata": {"name": "prs", "namespace": "flux-system", "uid": "8d3c"},
            "spec": {"type": "GitHubPullRequest", "url": "https://github.com/acme/app"},
            "status": {"exportedInputs": [
                {"id": "101", "branch": "Fix/Login", "sha": "abc"},
                {"id": "102", "branch": "feat/search", "sha": "def"}]}}),
        json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "ResourceSet",
            "metadata": {"name": "previews", "namespace": "flux-system"},
            "spec": {}, "status": {"inventory": {"entries": [
                {"id": "_preview-101__Namespace", "v": "v1"},
                {"id": "_preview-99__Namespace", "v": "v1"}]}}}),
        owned("preview-101"),
        owned("preview-99"),
    ]);
    let (plan, _) = crate::kube_view::plan_kube(&repo, &fake, &[]);
    let dir = tempfile::tempdir().unwrap();
    let set = unit(&plan, "ResourceSet", "flux-system/previews");
    assert_eq!(set["inventory_source"], "cluster", "{set:#}");
    assert_eq!(
        crate::fixture::sorted_changes(set),
        crate::fixture::sorted_pairs(&[
            ("create", "_pr-101__Namespace"),
            ("create", "_pr-102__Namespace"),
            ("delete", "_preview-101__Namespace"),
            ("delete", "_preview-99__Namespace"),
        ])
    );
    // A snapshot keeps the exported inputs for offline renders (slugify of the branch).
    let snapshot = dir.path().join("snapshot.yaml");
    let out = std::process::Command::new(crate::fixture::fluxplan_bin())
        .args(["snapshot", "-o"])
        .arg(&snapshot)
        .env("KUBECONFIG", fake.kubeconfig(dir.path()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = std::process::Command::new(crate::fixture::fluxplan_bin())
        .args(["build", "--no-cache", "--format", "yaml", "--cluster-snapshot"])
        .arg(&snapshot)
        .arg("--repo")
        .arg(repo.path())
        .output()
        .unwrap();
    let built = String::from_utf8(out.stdout).unwrap();
    assert!(built.contains("branch: fix-login") && built.contains("name: pr-102"), "{built}");
    assert!(!alert_codes(&plan).iter().any(|(_, c)| c == "resourceset-unknown"), "{:?}", plan["alerts"]);
}

/// A ResourceSet that stamps out a HelmRelease per tenant: each release is a unit below the
/// ResourceSet, rendered from the chart in this repository with the tenant's values.
#[test]
fn helm_releases_a_resourceset_generates_are_rendered_below_it() {
    let _ = crate::fixture::helm(4);
    let repo = Repo::new(REMOTE);
    add_cluster(&repo, "prod-eu");
    // Charts come from a GitRepository (a HelmChart's source): the instance syncs one.
    crate::fixture::edit(
        &repo,
        "clusters/prod-eu/flux-system/flux-instance.yaml",
        "kind: OCIRepository\n    url: oci://ghcr.io/acme/d2-fleet",
        "kind: GitRepository\n    url: https://github.com/acme/d2-fleet",
    );
    crate::fixture::edit(
        &repo,
        "clusters/prod-eu/tenants.yaml",
        "kind: OCIRepository",
        "kind: GitRepository",
    );
    repo.write("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n");
    repo.write(
        "charts/web/templates/settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\ndata:\n  replicas: {{ .Values.replicas | quote }}\n",
    );
    let set = |replicas: &str| {
        format!("apiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSet\nmetadata:\n  name: web\n  namespace: flux-system\nspec:\n  inputs:\n  - tenant: frontend\n  - tenant: backend\n  resources:\n  - apiVersion: helm.toolkit.fluxcd.io/v2\n    kind: HelmRelease\n    metadata:\n      name: web\n      namespace: << inputs.tenant >>\n    spec:\n      interval: 1h\n      chart:\n        spec:\n          chart: ./charts/web\n          sourceRef:\n            kind: GitRepository\n            name: flux-system\n            namespace: flux-system\n      values:\n        replicas: {replicas}\n")
    };
    repo.write("tenants/web.yaml", &set("2"));
    repo.commit("web per tenant");
    repo.write("tenants/web.yaml", &set("3"));
    repo.commit("three replicas");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", plan["alerts"]);
    for tenant in ["frontend", "backend"] {
        let release = unit(&plan, "HelmRelease", &format!("{tenant}/web"));
        assert_eq!(release["parent"], "ResourceSet flux-system/web", "{release:#}");
        assert_eq!(
            crate::fixture::sorted_changes(release),
            vec![("update".to_string(), format!("{tenant}_web-settings__ConfigMap"))]
        );
    }
}

/// Without a FluxInstance in the repository (the operator installed by Terraform), nothing says
/// the OCIRepository is this repository: the error names `.fluxplan.yaml` roots first, once, and
/// declaring the root with its source plans the cluster.
#[test]
fn roots_that_cannot_be_found_point_to_fluxplan_yaml_first() {
    let repo = fleet();
    repo.remove("clusters/prod-eu/flux-system");
    repo.remove("clusters/staging");
    repo.commit("the instance lives in Terraform");
    let out = std::process::Command::new(crate::fixture::fluxplan_bin())
        .args(["build", "--no-cache", "--format", "ids", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let fluxplan_yaml = stderr.find(".fluxplan.yaml").expect("names .fluxplan.yaml");
    let source_flag = stderr.find("--source").expect("names --source for other repositories");
    assert!(fluxplan_yaml < source_flag, "{stderr}");
    assert_eq!(stderr.matches("renders from this repository").count(), 1, "said once: {stderr}");

    repo.write(
        ".fluxplan.yaml",
        "roots:\n- path: clusters/prod-eu\n  source: {kind: OCIRepository, name: flux-system}\n",
    );
    repo.commit("declare the root");
    crate::fixture::edit(&repo, "tenants/frontend.yaml", "replicas: \"2\"", "replicas: \"4\"");
    repo.commit("scale");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", plan["alerts"]);
    assert_eq!(
        changes_of(&plan, "flux-system/tenants"),
        vec![("update".to_string(), "frontend_settings__ConfigMap".to_string())]
    );
}

/// Deleting a ResourceSet deletes everything it generated (the operator's finalizer), unless its
/// reconciliation is disabled; what the operator copies in (`copyFrom`) is named, never read.
#[test]
fn deleting_a_resourceset_deletes_what_it_generated_unless_disabled() {
    let repo = tenant_fleet(&["frontend"]);
    let copied = tenants_resourceset(&["frontend"], "admin").replace(
        "    - apiVersion: v1\n      kind: ServiceAccount\n      metadata:\n        name: flux\n",
        "    - apiVersion: v1\n      kind: ServiceAccount\n      metadata:\n        name: flux\n        annotations:\n          fluxcd.controlplane.io/copyFrom: flux-system/registry\n",
    );
    repo.write("tenants/apps.yaml", &copied);
    repo.commit("copy the registry credentials");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let notes = unit(&plan, "ResourceSet", "flux-system/apps")["notes"].to_string();
    assert!(notes.contains("copies data from flux-system/registry"), "{notes}");

    repo.write(
        "tenants/other.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  namespace: flux-system\n",
    );
    repo.remove("tenants/apps.yaml");
    repo.commit("remove the tenants");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{:?}", plan["alerts"]);
    let set = unit(&plan, "ResourceSet", "flux-system/apps");
    assert_eq!(set["status"], "removed");
    let deleted: Vec<(String, String)> = crate::fixture::sorted_changes(set);
    assert_eq!(deleted.len(), 6, "{set:#}");
    assert!(deleted.iter().all(|(action, _)| action == "delete"), "{deleted:?}");

    // Disabled, the finalizer deletes nothing.
    repo.git(&["revert", "--no-edit", "HEAD"]);
    crate::fixture::edit(
        &repo,
        "tenants/apps.yaml",
        "  name: apps\n  namespace: flux-system\nspec:",
        "  name: apps\n  namespace: flux-system\n  annotations:\n    fluxcd.controlplane.io/reconcile: disabled\nspec:",
    );
    repo.commit("disable the tenants");
    repo.remove("tenants/apps.yaml");
    repo.commit("remove the disabled tenants");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let set = unit(&plan, "ResourceSet", "flux-system/apps");
    assert!(set["changes"].as_array().unwrap().iter().all(|c| c["action"] != "delete"), "{set:#}");
}

#[test]
fn the_bootstrap_repository_pointed_elsewhere_is_a_sync_change() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write(
        "apps/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n",
    );
    repo.commit("base");
    crate::fixture::edit(
        &repo,
        "clusters/prod/flux-system/gotk-sync.yaml",
        "ssh://git@github.com/acme/fleet",
        "ssh://git@github.com/someone/else",
    );
    repo.commit("re-point the cluster");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{:?}", alert_codes(&plan));
    let alert = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "sync-changed").unwrap();
    assert!(
        alert["message"].as_str().unwrap().contains(
            "GitRepository flux-system/flux-system now points at ssh://github.com/someone/else (it pointed at \
             ssh://github.com/acme/fleet)"
        ),
        "{alert:#}"
    );
}

/// The operator applies a FluxInstance's `kustomize.patches` to everything it generates, the
/// Kustomization of its sync included: a patch there (here a `postBuild` substitution) is how
/// the cluster's root renders. Patches for its controllers find nothing in the root; a patch
/// that cannot apply fails the root with the reason.
#[test]
fn a_flux_instances_patches_shape_the_root_it_generates() {
    let repo = fleet();
    let instance = "clusters/prod-eu/flux-system/flux-instance.yaml";
    crate::fixture::edit(
        &repo,
        instance,
        "  sync:\n",
        "  kustomize:\n    patches:\n    - target: {kind: Deployment}\n      patch: |\n        - op: add\n          \
         path: /spec/template/spec/nodeSelector\n          value: {role: flux}\n    - target: {kind: Kustomization}\n      \
         patch: |\n        - op: add\n          path: /spec/postBuild\n          value:\n            substitute: {REGION: eu-west-1}\n  sync:\n",
    );
    crate::fixture::edit(
        &repo,
        "clusters/prod-eu/flux-system/runtime-info.yaml",
        "ENVIRONMENT: prod-eu\n",
        "ENVIRONMENT: prod-eu\n  REGION: ${REGION}\n",
    );
    repo.commit("instance patches");
    let render = repo.render(Some("HEAD"));
    let runtime_info = render
        .object("clusters/prod-eu", "flux-system_flux-runtime-info__ConfigMap")
        .expect("the runtime info is rendered");
    assert_eq!(runtime_info.object["data"]["REGION"], "eu-west-1", "{:#}", runtime_info.object);
    let root =
        render.clusters.iter().find(|c| c.name == "clusters/prod-eu").unwrap().root_kustomization().unwrap();
    assert!(root.unresolved_variables.is_empty(), "{:?}", root.warnings);

    // Patches for the controllers alone leave the sync as the base has it: planned, no
    // sync-changed.
    crate::fixture::edit(&repo, instance, "value: {role: flux}", "value: {role: system}");
    repo.commit("the controllers move");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((code, &plan["verdict"]), (1, &json!("changes")), "{:?}", alert_codes(&plan));
    assert!(!plan.to_string().contains("sync-changed"), "{:?}", alert_codes(&plan));

    // A patch that points the root at another source: that source is not this repository, so
    // the root is external (base and head alike: the patch is in both).
    crate::fixture::edit(
        &repo,
        instance,
        "op: add\n          path: /spec/postBuild\n          value:\n            substitute: {REGION: eu-west-1}",
        "op: replace\n          path: /spec/sourceRef/name\n          value: elsewhere",
    );
    repo.commit("the root reads another source");
    let render = repo.render(Some("HEAD"));
    let root =
        render.clusters.iter().find(|c| c.name == "clusters/prod-eu").unwrap().root_kustomization().unwrap();
    assert_eq!(root.status, fluxplan::render::Status::External, "{:?}", root.error);
    assert!(root.warnings.iter().any(|w| w.contains("elsewhere")), "{:?}", root.warnings);
    crate::fixture::edit(
        &repo,
        instance,
        "op: replace\n          path: /spec/sourceRef/name\n          value: elsewhere",
        "op: add\n          path: /spec/postBuild\n          value:\n            substitute: {REGION: eu-west-1}",
    );
    repo.commit("back to this repository");

    // A patch that cannot apply: the root fails and says why.
    crate::fixture::edit(
        &repo,
        instance,
        "op: add\n          path: /spec/postBuild\n          value:\n            substitute: {REGION: eu-west-1}",
        "op: test\n          path: /spec/prune\n          value: false",
    );
    repo.commit("a patch that cannot apply");
    let render = repo.render(Some("HEAD"));
    let root =
        render.clusters.iter().find(|c| c.name == "clusters/prod-eu").unwrap().root_kustomization().unwrap();
    assert_eq!(root.status, fluxplan::render::Status::Failed);
    let message = &root.error.as_ref().unwrap().message;
    assert!(message.contains("kustomize.patches do not apply"), "{message}");
}
