//! How fluxplan finds a fleet's clusters, and plans that never list phantom roots. The layouts
//! are modelled on homelab fleets that install the Flux Operator with its `flux-instance` Helm
//! chart: the root exists only inside a HelmRelease's values, a parent Kustomization produces one
//! `ks.yaml` per app (listed in per-namespace kustomization files) and patches its children.

use crate::fixture::{alert_codes, plan_cli, plan_json, Repo};
use fluxplan::render::{Render, RootKind, Status};
use serde_json::Value;

const REMOTE: &str = "https://github.com/acme/home-ops";
const APPS: &str = "kubernetes/apps/default/kustomization.yaml";

/// A Flux Kustomization of one app, as homelab fleets write them: no namespace of its own (the
/// namespace's kustomization file sets it), the source named across namespaces.
fn app_ks(name: &str, path: &str, target_namespace: &str) -> String {
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\nspec:\n  interval: 1h\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n    namespace: flux-system\n  targetNamespace: {target_namespace}\n"
    )
}

/// The Flux Operator fleet: the `flux-instance` HelmRelease syncs `kubernetes/flux/cluster`,
/// whose `cluster-apps` renders `kubernetes/apps` and patches every child Kustomization.
fn operator_fleet() -> Repo {
    let repo = Repo::new(REMOTE);
    repo.write(
        "kubernetes/flux/cluster/ks.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: cluster-apps\n  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./kubernetes/apps\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n    namespace: flux-system\n  patches:\n  - patch: |-\n      apiVersion: kustomize.toolkit.fluxcd.io/v1\n      kind: Kustomization\n      metadata:\n        name: _\n      spec:\n        commonMetadata:\n          labels:\n            fleet.acme.dev/managed: \"true\"\n    target:\n      group: kustomize.toolkit.fluxcd.io\n      kind: Kustomization\n",
    );
    repo.write(
        "kubernetes/apps/flux-system/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: flux-system\nresources:\n- ./flux-instance/ks.yaml\n",
    );
    let mut instance_ks =
        app_ks("flux-instance", "./kubernetes/apps/flux-system/flux-instance/app", "flux-system");
    instance_ks = instance_ks.replace("prune: true", "prune: false");
    repo.write("kubernetes/apps/flux-system/flux-instance/ks.yaml", &instance_ks);
    repo.write(
        "kubernetes/apps/flux-system/flux-instance/app/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ./helmrelease.yaml\n- ./ocirepository.yaml\n",
    );
    repo.write(
        "kubernetes/apps/flux-system/flux-instance/app/ocirepository.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: flux-instance\nspec:\n  interval: 15m\n  ref:\n    tag: 0.58.1\n  url: oci://ghcr.io/controlplaneio-fluxcd/charts/flux-instance\n",
    );
    repo.write(
        "kubernetes/apps/flux-system/flux-instance/app/helmrelease.yaml",
        &helm_release("kubernetes/flux/cluster"),
    );
    repo.write(
        APPS,
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: default\nresources:\n- ./namespace.yaml\n- ./echo/ks.yaml\n- ./whoami/ks.yaml\n",
    );
    repo.write(
        "kubernetes/apps/default/namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n",
    );
    for app in ["echo", "whoami"] {
        repo.write(
            &format!("kubernetes/apps/default/{app}/ks.yaml"),
            &app_ks(app, &format!("./kubernetes/apps/default/{app}/app"), "default"),
        );
        repo.write(
            &format!("kubernetes/apps/default/{app}/app/service.yaml"),
            &format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: {app}\nspec:\n  ports:\n  - port: 80\n"
            ),
        );
        repo.write(
            &format!("kubernetes/apps/default/{app}/app/configmap.yaml"),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {app}-config\ndata:\n  greeting: hello\n"),
        );
    }
    repo
}

fn helm_release(sync_path: &str) -> String {
    format!(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: flux-instance\nspec:\n  chartRef:\n    kind: OCIRepository\n    name: flux-instance\n  interval: 1h\n  values:\n    instance:\n      cluster:\n        networkPolicy: false\n      sync:\n        kind: GitRepository\n        url: {REMOTE}\n        ref: refs/heads/main\n        path: {sync_path}\n        interval: 1h\n"
    )
}

fn statuses(plan: &Value) -> Vec<(String, String, String)> {
    plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["cluster"].as_str().unwrap().to_string(),
                format!("{}/{}", k["namespace"].as_str().unwrap(), k["name"].as_str().unwrap()),
                k["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn creates(plan: &Value) -> usize {
    plan["summary"]["create"].as_u64().unwrap() as usize
}

#[test]
fn the_flux_instance_helm_release_is_the_root() {
    let repo = operator_fleet();
    repo.commit("fleet");
    let render = repo.render(Some("HEAD"));
    assert_eq!(
        render.clusters.len(),
        1,
        "one cluster: {:?}",
        render.clusters.iter().map(|c| &c.name).collect::<Vec<_>>()
    );
    let cluster = &render.clusters[0];
    assert_eq!(cluster.name, "kubernetes/flux/cluster");
    assert_eq!(cluster.found_by, RootKind::FluxInstanceHelmRelease);
    // The operator names its source and Kustomization after the instance's namespace.
    assert_eq!(cluster.root.to_string(), "flux-system/flux-system");
    assert_eq!(
        cluster.root_file.as_deref(),
        Some("kubernetes/apps/flux-system/flux-instance/app/helmrelease.yaml")
    );
    let reached: Vec<String> = cluster.kustomizations.iter().map(|k| k.label()).collect();
    assert_eq!(
        reached,
        vec![
            "Kustomization default/echo",
            "Kustomization default/whoami",
            "Kustomization flux-system/cluster-apps",
            "Kustomization flux-system/flux-instance",
            // The instance's own HelmRelease is a unit too: its chart comes from a Helm repository.
            "HelmRelease flux-system/flux-instance",
            "Kustomization flux-system/flux-system",
        ]
    );
    assert!(render.unreachable.is_empty(), "{:?}", render.unreachable);
    // The parent's patch reached its children: the child is reconciled with the rendered spec.
    let echo = render.find("default/echo").unwrap();
    assert_eq!(echo.status, Status::Rendered, "{:?}", echo.error);
    assert!(echo.objects.iter().all(|o| o.object["metadata"]["labels"]["fleet.acme.dev/managed"] == "true"));
}

/// The file says nothing of the HelmRelease's namespace; the Kustomization that applies it puts
/// it in `flux-ops` (its target namespace), and the operator names the root after it. Only a
/// render tells, and the walk's render (the one build of that Kustomization) is the one that does.
#[test]
fn the_walks_render_decides_a_sync_its_file_does_not_show() {
    let repo = operator_fleet();
    let instance_ks = app_ks("flux-instance", "./kubernetes/apps/flux-system/flux-instance/app", "flux-ops");
    repo.write("kubernetes/apps/flux-system/flux-instance/ks.yaml", &instance_ks);
    repo.commit("fleet");
    let render = repo.render(Some("HEAD"));
    let roots: Vec<String> = render.clusters.iter().map(|c| c.root.to_string()).collect();
    assert_eq!(roots, ["flux-ops/flux-ops"]);
    // Kustomizations only: the instance's HelmRelease is a unit too.
    let reached: Vec<String> = render.clusters[0]
        .kustomizations
        .iter()
        .filter(|k| k.helm.is_none())
        .map(|k| k.reference().to_string())
        .collect();
    assert_eq!(
        reached,
        [
            "default/echo",
            "default/whoami",
            "flux-ops/flux-ops",
            "flux-system/cluster-apps",
            "flux-system/flux-instance"
        ]
    );
    // Its chart is an OCIRepository's, which fluxplan does not fetch: the release is external.
    assert!(render.kustomizations().all(|(_, k)| k.status == Status::Rendered || k.helm.is_some()));
    // One kustomize build per Kustomization, choosing the root twice notwithstanding.
    assert_eq!(render.stats.builds - render.stats.cache_hits, 5, "{:?}", render.stats);
}

#[test]
fn values_from_a_generated_config_map_declare_the_root() {
    let repo = operator_fleet();
    let dir = "kubernetes/apps/flux-system/flux-instance/app";
    // The values live in a file turned into a ConfigMap whose name kustomize suffixes with a hash
    // (and rewrites in the HelmRelease): only the render knows it.
    repo.write(
        &format!("{dir}/helmrelease.yaml"),
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: flux-instance\nspec:\n  chartRef:\n    kind: OCIRepository\n    name: flux-instance\n  interval: 1h\n  valuesFrom:\n  - kind: ConfigMap\n    name: flux-instance-values\n",
    );
    repo.write(
        &format!("{dir}/helm/values.yaml"),
        &format!("instance:\n  sync:\n    kind: GitRepository\n    url: {REMOTE}\n    ref: refs/heads/main\n    path: kubernetes/flux/cluster\n"),
    );
    repo.write(
        &format!("{dir}/helm/kustomizeconfig.yaml"),
        "nameReference:\n- kind: ConfigMap\n  version: v1\n  fieldSpecs:\n  - path: spec/valuesFrom/name\n    kind: HelmRelease\n",
    );
    repo.write(
        &format!("{dir}/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ./helmrelease.yaml\n- ./ocirepository.yaml\nconfigMapGenerator:\n- name: flux-instance-values\n  files:\n  - values.yaml=./helm/values.yaml\nconfigurations:\n- ./helm/kustomizeconfig.yaml\n",
    );
    repo.commit("values from a ConfigMap");
    let render = repo.render(Some("HEAD"));
    assert_eq!(render.clusters.len(), 1);
    assert_eq!(render.clusters[0].name, "kubernetes/flux/cluster");
    assert_eq!(render.clusters[0].found_by, RootKind::FluxInstanceHelmRelease);
    assert!(render.find("default/whoami").is_some());
}

/// Golden (a): an app's `ks.yaml` line commented out in its namespace's kustomization file.
#[test]
fn commenting_out_an_apps_ks_yaml_deletes_it_and_adds_no_root() {
    let repo = operator_fleet();
    repo.commit("fleet");
    let apps = std::fs::read_to_string(repo.path().join(APPS)).unwrap();
    repo.write(APPS, &apps.replace("- ./whoami/ks.yaml", "# - ./whoami/ks.yaml"));
    repo.commit("disable whoami");
    // The fleet's charts are on ghcr.io: the goldens must not depend on the network.
    let offline = ["--no-chart-fetch"];
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &offline);
    assert_eq!(code, 2, "a removed Kustomization takes its inventory: blocked");
    let listed = statuses(&plan);
    assert!(listed.iter().all(|(cluster, _, _)| cluster == "kubernetes/flux/cluster"), "{listed:?}");
    assert!(listed.iter().all(|(_, _, s)| s != "added"), "no phantom root: {listed:?}");
    assert!(listed.contains(&("kubernetes/flux/cluster".into(), "default/whoami".into(), "removed".into())));
    assert_eq!(creates(&plan), 0, "deletes only");
    assert_eq!(plan["summary"]["delete"], 3, "whoami's Kustomization object, its Service and ConfigMap");
    assert_eq!(alert_codes(&plan), vec![("danger".to_string(), "kustomization-removed".to_string())]);
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &offline);
    insta::assert_snapshot!("roots_commented_out_app_markdown", markdown);
    let (json_text, _) = plan_cli(&repo, "HEAD~1", "HEAD", "json", &offline);
    insta::assert_snapshot!("roots_commented_out_app_json", json_text);

    // Re-enabling it is creates only, with no phantom "removed" root.
    repo.write(APPS, &apps);
    repo.commit("enable whoami again");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    assert!(statuses(&plan).iter().all(|(_, _, s)| s != "removed"), "{:?}", statuses(&plan));
    assert_eq!(plan["summary"]["delete"], 0);
    assert_eq!(creates(&plan), 3);
}

/// Golden (b): the root fails to build at base (a manifest without a name in the sync path).
#[test]
fn a_root_failing_at_base_is_root_failed_and_nothing_else() {
    let repo = operator_fleet();
    repo.write("kubernetes/flux/cluster/broken.yaml", "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n");
    repo.commit("broken root");
    repo.remove("kubernetes/flux/cluster/broken.yaml");
    repo.commit("fix the root");
    let base = repo.render(Some("HEAD~1"));
    assert_eq!(base.clusters.len(), 1, "the root's children never become roots: {:?}", cluster_names(&base));
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    assert_eq!(alert_codes(&plan), vec![("danger".to_string(), "root-failed".to_string())]);
    assert_eq!(
        statuses(&plan),
        vec![("kubernetes/flux/cluster".into(), "flux-system/flux-system".into(), "failed".into())]
    );
    assert_eq!(creates(&plan), 0, "no phantom creates");
    assert_eq!(plan["summary"]["delete"], 0, "no phantom removals");
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    insta::assert_snapshot!("roots_base_root_failed_markdown", markdown);
    let (json_text, _) = plan_cli(&repo, "HEAD~1", "HEAD", "json", &[]);
    insta::assert_snapshot!("roots_base_root_failed_json", json_text);
}

fn cluster_names(render: &Render) -> Vec<&str> {
    render.clusters.iter().map(|c| c.name.as_str()).collect()
}

#[test]
fn without_a_declared_sync_a_parent_failing_to_build_still_claims_its_children() {
    // No bootstrap, no operator: the fallback. The parent's kustomization file names a file that
    // is missing at base, so its build fails there.
    let repo = Repo::new(REMOTE);
    repo.kustomization("clusters/home/apps.yaml", "apps", "./apps", "");
    repo.write("apps/kustomization.yaml", "resources:\n- ./a/ks.yaml\n- ./b/ks.yaml\n- ./missing.yaml\n");
    for app in ["a", "b"] {
        repo.kustomization(&format!("apps/{app}/ks.yaml"), app, &format!("./apps/{app}/app"), "");
        repo.config_map(&format!("apps/{app}/app/cm.yaml"), app, "default");
    }
    repo.commit("broken parent");
    repo.write("apps/kustomization.yaml", "resources:\n- ./a/ks.yaml\n- ./b/ks.yaml\n");
    repo.commit("fixed parent");
    let base = repo.render(Some("HEAD~1"));
    assert_eq!(cluster_names(&base), vec!["clusters/home"], "no phantom roots for a and b");
    assert_eq!(base.clusters[0].found_by, RootKind::Fallback);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    // The fallback is said, as a note.
    let codes = [("danger", "root-failed"), ("info", "roots-assumed")];
    assert_eq!(alert_codes(&plan), codes.map(|(s, c)| (s.to_string(), c.to_string())));
    assert_eq!(creates(&plan), 0);
}

#[test]
fn a_fallback_root_commented_out_is_a_deletion_not_a_new_root() {
    let repo = Repo::new(REMOTE);
    repo.kustomization("clusters/home/apps.yaml", "apps", "./apps", "");
    repo.write("apps/kustomization.yaml", "resources:\n- ./a/ks.yaml\n- ./b/ks.yaml\n");
    for app in ["a", "b"] {
        repo.kustomization(&format!("apps/{app}/ks.yaml"), app, &format!("./apps/{app}/app"), "");
        repo.config_map(&format!("apps/{app}/app/cm.yaml"), app, "default");
    }
    repo.commit("fleet");
    repo.write("apps/kustomization.yaml", "resources:\n- ./a/ks.yaml\n# - ./b/ks.yaml\n");
    repo.commit("disable b");
    // Alone, the head render cannot tell: b is not produced by anything there.
    assert_eq!(cluster_names(&repo.render(Some("HEAD"))), vec!["apps/b", "clusters/home"]);
    // The plan knows base produced it: a deletion, not a new cluster.
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(
        statuses(&plan),
        vec![
            ("clusters/home".into(), "flux-system/a".into(), "unchanged".into()),
            ("clusters/home".into(), "flux-system/apps".into(), "changed".into()),
            ("clusters/home".into(), "flux-system/b".into(), "removed".into()),
        ]
    );
    assert_eq!(creates(&plan), 0);
    // One cluster assumed, not a phantom second.
    let codes = [("danger", "kustomization-removed"), ("info", "roots-assumed")];
    assert_eq!(alert_codes(&plan), codes.map(|(s, c)| (s.to_string(), c.to_string())));
}

#[test]
fn a_changed_sync_path_is_roots_changed_not_a_cluster_swap() {
    let repo = operator_fleet();
    repo.commit("fleet");
    let moved = std::fs::read_to_string(repo.path().join("kubernetes/flux/cluster/ks.yaml")).unwrap();
    repo.remove("kubernetes/flux/cluster");
    repo.write("kubernetes/flux/main/ks.yaml", &moved);
    repo.write(
        "kubernetes/apps/flux-system/flux-instance/app/helmrelease.yaml",
        &helm_release("kubernetes/flux/main"),
    );
    repo.commit("move the sync path");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    let alerts = plan["alerts"].as_array().unwrap();
    let clusters: Vec<&str> = alerts.iter().map(|a| a["cluster"].as_str().unwrap()).collect();
    assert_eq!(clusters, vec!["kubernetes/flux/cluster", "kubernetes/flux/main"]);
    assert!(alerts.iter().all(|a| a["code"] == "roots-changed" && a["severity"] == "danger"), "{alerts:?}");
    assert!(
        alerts[0]["message"].as_str().unwrap().contains("head (no such cluster)"),
        "{}",
        alerts[0]["message"]
    );
    assert!(plan["kustomizations"].as_array().unwrap().is_empty());
    assert_eq!(creates(&plan), 0);
}

#[test]
fn placeholder_clusters_are_named_by_their_directory() {
    let repo = Repo::new(REMOTE);
    for cluster in ["production", "staging"] {
        repo.kustomization(
            &format!("clusters/{cluster}/apps.yaml"),
            "apps",
            &format!("./apps/{cluster}"),
            "",
        );
        repo.config_map(&format!("apps/{cluster}/cm.yaml"), cluster, "default");
    }
    repo.kustomization("clusters/staging/infra.yaml", "infra", "./infra", "");
    repo.config_map("infra/cm.yaml", "infra", "default");
    repo.commit("placeholders");
    let render = repo.render(Some("HEAD"));
    assert_eq!(
        cluster_names(&render),
        vec![
            "clusters/production",
            "clusters/staging (flux-system/apps)",
            "clusters/staging (flux-system/infra)"
        ]
    );
}

#[test]
fn roots_declared_in_fluxplan_yaml_are_the_only_roots() {
    let repo = Repo::new(REMOTE);
    for cluster in ["production", "staging"] {
        repo.kustomization(
            &format!("clusters/{cluster}/apps.yaml"),
            "apps",
            &format!("./apps/{cluster}"),
            "",
        );
        repo.config_map(&format!("apps/{cluster}/cm.yaml"), cluster, "default");
    }
    repo.write(".fluxplan.yaml", "roots:\n- path: clusters/production\n  name: production\n");
    repo.commit("declared");
    let out = std::process::Command::new(crate::fixture::fluxplan_bin())
        .args(["build", "--no-cache", "--format", "json", "--rev", "HEAD", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    let render: Value = serde_json::from_slice(&out.stdout).unwrap();
    let clusters = render["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1, "{clusters:#?}");
    assert_eq!(clusters[0]["name"], "production");
    assert_eq!(clusters[0]["found_by"], "declared");
    assert_eq!(clusters[0]["root"]["name"], "flux-system");
    let reached: Vec<&str> = clusters[0]["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(reached, vec!["apps", "flux-system"]);
    // Staging is not declared: its file is reported unreachable.
    assert_eq!(render["unreachable"][0]["file"], "clusters/staging/apps.yaml");

    // The plan uses the base revision's roots for both sides.
    repo.config_map("apps/production/cm2.yaml", "more", "default");
    repo.commit("more");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", plan["alerts"]);
    assert_eq!(
        statuses(&plan),
        vec![
            ("production".into(), "flux-system/apps".into(), "changed".into()),
            ("production".into(), "flux-system/flux-system".into(), "unchanged".into())
        ]
    );
}

#[test]
fn a_kustomization_used_as_a_patch_is_not_unreachable() {
    // A tenant's sync in a base, patched per environment by a file holding a Kustomization.
    let repo = Repo::bootstrap("staging");
    repo.kustomization("clusters/staging/tenants.yaml", "tenants", "./tenants/staging", "");
    repo.write(
        "tenants/base/dev-team/sync.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: dev-team\n  namespace: apps\nspec:\n  path: ./\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: dev-team\n",
    );
    repo.write("tenants/base/dev-team/kustomization.yaml", "resources:\n- sync.yaml\n");
    repo.write(
        "tenants/staging/kustomization.yaml",
        "resources:\n- ../base/dev-team\npatches:\n- path: dev-team-patch.yaml\n  target:\n    kind: Kustomization\n",
    );
    repo.write(
        "tenants/staging/dev-team-patch.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: dev-team\n  namespace: apps\nspec:\n  path: ./staging\n",
    );
    // A fragment no kustomization file names (a leftover patch) is not a Kustomization either.
    repo.write(
        "tenants/production/dev-team-patch.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: dev-team\n  namespace: apps\nspec:\n  path: ./production\n",
    );
    repo.commit("tenants");
    let render = repo.render(Some("HEAD"));
    assert!(render.unreachable.is_empty(), "{:?}", render.unreachable);
    let dev_team = render.find("apps/dev-team").unwrap();
    assert_eq!(dev_team.path, "./staging");
}

#[test]
fn a_pinned_source_is_said_in_the_plan() {
    let other = Repo::new("https://github.com/acme/platform");
    other.config_map("base/cm.yaml", "from-platform", "platform");
    let repo = Repo::bootstrap("prod");
    repo.kustomization_of(
        "clusters/prod/platform.yaml",
        "platform",
        "./base",
        ("GitRepository", "platform"),
        "",
    );
    repo.commit("one");
    repo.commit("two");
    let mapping = format!("flux-system/platform={}", other.path().display());
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--source", &mapping]);
    assert_eq!(code, 0);
    let alert = &plan["alerts"][0];
    assert_eq!((alert["severity"].as_str(), alert["code"].as_str()), (Some("info"), Some("source-pinned")));
    assert!(alert["message"].as_str().unwrap().contains("for base and head alike"), "{alert}");
}

#[test]
fn children_of_a_kustomization_failing_at_base_are_not_added() {
    // The root renders; `cluster-apps` below it fails at base (a missing file in a namespace's
    // kustomization file), so its children are unknown at base, not new.
    let repo = operator_fleet();
    let apps = std::fs::read_to_string(repo.path().join(APPS)).unwrap();
    repo.write(APPS, &format!("{apps}- ./missing.yaml\n"));
    repo.commit("broken namespace");
    repo.write(APPS, &apps);
    repo.commit("fixed namespace");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let listed = statuses(&plan);
    assert!(listed.iter().all(|(_, _, s)| s != "added" && s != "removed"), "{listed:?}");
    let codes = alert_codes(&plan);
    assert!(!codes.iter().any(|(_, c)| c == "root-failed" || c == "roots-changed"), "{codes:?}");
    let whoami = plan["kustomizations"].as_array().unwrap().iter().find(|k| k["name"] == "whoami").unwrap();
    assert!(
        whoami["notes"][0].as_str().unwrap().starts_with("flux-system/cluster-apps fails to build at base"),
        "{whoami:#}"
    );
}

#[test]
fn a_bootstrap_root_failing_at_head_stays_the_root() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "a", "default");
    repo.commit("fleet");
    repo.write("clusters/prod/broken.yaml", "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n");
    repo.commit("break the root");
    // Its build fails, yet its path still includes its own definition: still the bootstrap root,
    // and apps is still its child (no fallback root appears).
    let head = repo.render(Some("HEAD"));
    assert_eq!(cluster_names(&head), vec!["clusters/prod"]);
    assert_eq!(head.clusters[0].found_by, RootKind::Bootstrap);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    assert_eq!(alert_codes(&plan), vec![("danger".to_string(), "root-failed".to_string())]);
    assert!(plan["alerts"][0]["message"].as_str().unwrap().contains("fails to build at head"));
    assert_eq!(
        statuses(&plan),
        vec![("clusters/prod".into(), "flux-system/flux-system".into(), "failed".into())]
    );
    assert_eq!(plan["summary"]["delete"], 0, "nothing is pruned when the root fails");
}

#[test]
fn files_below_a_root_failing_at_head_are_not_unreachable() {
    let repo = operator_fleet();
    repo.commit("fleet");
    repo.write("kubernetes/flux/cluster/broken.yaml", "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n");
    repo.commit("break the root");
    // Every ks.yaml below the failing root is still claimed by it, however deep.
    assert!(repo.render(Some("HEAD")).unreachable.is_empty());
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(alert_codes(&plan), vec![("danger".to_string(), "root-failed".to_string())]);
}

#[test]
fn a_renamed_bootstrap_directory_fails_the_root_the_cluster_still_runs() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "a", "default");
    repo.commit("fleet");
    repo.remove("clusters/prod");
    repo.add_bootstrap("production");
    repo.kustomization("clusters/production/apps.yaml", "apps", "./apps", "");
    repo.commit("rename the cluster directory");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2);
    // The cluster's root object keeps syncing ./clusters/prod, which is gone: it fails, and
    // nothing is pruned. The new directory is a root no cluster runs yet.
    let alerts: Vec<(String, String)> = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["cluster"].as_str().unwrap().to_string(), a["code"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        alerts,
        vec![
            ("clusters/prod".to_string(), "root-failed".to_string()),
            ("clusters/production".to_string(), "roots-changed".to_string())
        ]
    );
    let failed = &plan["kustomizations"][0];
    assert_eq!(failed["error"]["code"], "path-not-found", "{failed:#}");
    assert_eq!(plan["summary"]["delete"], 0);
    assert_eq!(creates(&plan), 0);
}
