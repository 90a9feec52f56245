//! Flux 2.7 ArtifactGenerator / ExternalArtifact: Kustomizations sourcing an artifact that a
//! generator in the repository builds from the repository are planned like any other; those
//! whose artifact cannot be built here are external with a warning; a revision where nothing
//! renders is a failed plan, never "no changes". Layout modelled on
//! fluxcd/flux2-kustomize-helm-example (clusters/production/artifacts.yaml there).

use crate::fixture::{changes_of, fluxplan_bin, kustomization_in, plan_cli, plan_json, Repo};
use fluxplan::render::Status;
use std::process::Command;

/// One output artifact per line of `copies`: (artifact name, copy operations as YAML flow list).
fn generator(source_kind: &str, source_name: &str, artifacts: &[(&str, &str)]) -> String {
    let mut out = format!(
        "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  sources:\n    - alias: monorepo\n      kind: {source_kind}\n      name: {source_name}\n  artifacts:\n"
    );
    for (name, copy) in artifacts {
        out.push_str(&format!(
            "    - name: {name}\n      originRevision: \"@monorepo\"\n      copy: {copy}\n"
        ));
    }
    out
}

const EXAMPLE_ARTIFACTS: &[(&str, &str)] = &[
    ("infrastructure", r#"[{from: "@monorepo/infrastructure/**", to: "@artifact/"}]"#),
    (
        "apps",
        r#"[{from: "@monorepo/apps/base/**", to: "@artifact/base/"}, {from: "@monorepo/apps/CLUSTER/**", to: "@artifact/CLUSTER/"}]"#,
    ),
];

fn deployment(name: &str, namespace: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n      - name: {name}\n        image: {image}\n"
    )
}

/// The apps and infrastructure of one cluster's generator and Kustomizations.
fn add_cluster(repo: &Repo, cluster: &str) {
    let artifacts: Vec<(&str, String)> =
        EXAMPLE_ARTIFACTS.iter().map(|(n, c)| (*n, c.replace("CLUSTER", cluster))).collect();
    let artifacts: Vec<(&str, &str)> = artifacts.iter().map(|(n, c)| (*n, c.as_str())).collect();
    repo.write(
        &format!("clusters/{cluster}/artifacts.yaml"),
        &generator("GitRepository", "flux-system", &artifacts),
    );
    repo.kustomization_of(
        &format!("clusters/{cluster}/infrastructure.yaml"),
        "infra-controllers",
        "./controllers",
        ("ExternalArtifact", "infrastructure"),
        "",
    );
    repo.kustomization_of(
        &format!("clusters/{cluster}/apps.yaml"),
        "apps",
        &format!("./{cluster}"),
        ("ExternalArtifact", "apps"),
        "dependsOn:\n  - name: infra-controllers",
    );
    repo.write(
        &format!("apps/{cluster}/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../base/podinfo\npatches:\n  - path: replicas.yaml\n",
    );
    repo.write(
        &format!("apps/{cluster}/replicas.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\n  namespace: podinfo\nspec:\n  replicas: 2\n",
    );
}

/// A one-cluster fleet in the example's layout: base apps, a production overlay, infrastructure.
fn fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    add_cluster(&repo, "prod");
    repo.write(
        "apps/base/podinfo/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - namespace.yaml\n  - deployment.yaml\n",
    );
    repo.write(
        "apps/base/podinfo/namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: podinfo\n",
    );
    repo.write(
        "apps/base/podinfo/deployment.yaml",
        &deployment("podinfo", "podinfo", "ghcr.io/stefanprodan/podinfo:6.7.0"),
    );
    repo.write(
        "infrastructure/controllers/namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: infra\n",
    );
    repo.write(
        "infrastructure/controllers/ingress-nginx.yaml",
        &deployment("ingress-nginx", "infra", "registry.k8s.io/ingress-nginx/controller:v1.12.0"),
    );
    repo.commit("fleet");
    repo
}

fn build(repo: &Repo, extra: &[&str]) -> (String, String, i32) {
    let out = Command::new(fluxplan_bin())
        .args(["build", "--no-cache", "--rev", "HEAD", "--format", "ids", "--repo"])
        .arg(repo.path())
        .args(extra)
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code().unwrap(),
    )
}

#[test]
fn kustomizations_of_generated_artifacts_render_from_the_repository() {
    let repo = fleet();
    let render = repo.render(Some("HEAD"));
    assert!(render.unreachable.is_empty(), "{:?}", render.unreachable);
    let apps = render.find("flux-system/apps").unwrap();
    assert_eq!(apps.status, Status::Rendered, "{:?} {:?}", apps.error, apps.warnings);
    // apps/prod reaches ../base/podinfo inside the artifact, as the controller builds it.
    assert_eq!(apps.ids(), ["_podinfo__Namespace", "podinfo_podinfo_apps_Deployment"]);
    let replicas = apps.objects.iter().find(|o| o.object["kind"] == "Deployment").unwrap();
    assert_eq!(replicas.object["spec"]["replicas"], 2);
    let infra = render.find("flux-system/infra-controllers").unwrap();
    assert_eq!(infra.ids(), ["_infra__Namespace", "infra_ingress-nginx_apps_Deployment"]);
    // The generator itself is an object the root applies; its scope is known.
    let root = render.find("flux-system/flux-system").unwrap();
    assert!(root
        .ids()
        .contains(&"flux-system_flux-system_source.extensions.fluxcd.io_ArtifactGenerator".to_string()));
    assert!(root.warnings.is_empty(), "{:?}", root.warnings);
}

#[test]
fn kustomizations_inside_an_artifact_are_reached_from_their_repository_files() {
    for bootstrapped in [true, false] {
        let repo = if bootstrapped { fleet() } else { unbootstrapped(("GitRepository", "flux-system")) };
        repo.kustomization("apps/prod/tenant.yaml", "tenant", "./tenants", "");
        repo.write(
            "apps/prod/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../base/podinfo\n  - tenant.yaml\npatches:\n  - path: replicas.yaml\n",
        );
        repo.config_map("tenants/team.yaml", "team", "default");
        repo.commit("a tenant Kustomization inside the apps artifact");
        let render = repo.render(Some("HEAD"));
        assert!(render.unreachable.is_empty(), "{:?}", render.unreachable);
        let tenants: Vec<_> =
            render.kustomizations().filter(|(_, k)| k.name == "tenant").map(|(_, k)| k).collect();
        assert_eq!(tenants.len(), 1, "reached once, from apps, never a root of its own");
        assert_eq!(tenants[0].file.as_deref(), Some("apps/prod/tenant.yaml"));
        assert_eq!(tenants[0].parent.as_ref().map(|p| p.to_string()).as_deref(), Some("flux-system/apps"));
        assert_eq!(tenants[0].ids(), ["default_team__ConfigMap"]);
    }
}

#[test]
fn an_app_change_through_the_generator_is_planned_not_no_changes() {
    let repo = fleet();
    repo.write(
        "apps/prod/replicas.yaml",
        &std::fs::read_to_string(repo.path().join("apps/prod/replicas.yaml"))
            .unwrap()
            .replace("replicas: 2", "replicas: 3"),
    );
    repo.remove("infrastructure/controllers/ingress-nginx.yaml");
    repo.write(
        "infrastructure/controllers/envoy-gateway.yaml",
        &deployment("envoy-gateway", "infra", "envoyproxy/gateway:v1.4.0"),
    );
    repo.commit("podinfo to 3 replicas; ingress-nginx replaced by envoy-gateway");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((plan["verdict"].as_str(), code), (Some("changes"), 1), "{plan:#}");
    assert_eq!(
        changes_of(&plan, "flux-system/apps"),
        [("update".to_string(), "podinfo_podinfo_apps_Deployment".to_string())]
    );
    assert_eq!(
        changes_of(&plan, "flux-system/infra-controllers"),
        [
            ("create".to_string(), "infra_envoy-gateway_apps_Deployment".to_string()),
            ("delete".to_string(), "infra_ingress-nginx_apps_Deployment".to_string()),
        ]
    );
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    insta::assert_snapshot!("artifacts_generator_change_markdown", markdown);
    let (json_text, _) = plan_cli(&repo, "HEAD~1", "HEAD", "json", &[]);
    insta::assert_snapshot!("artifacts_generator_change_json", json_text);
}

#[test]
fn a_change_to_the_generator_itself_is_planned() {
    let repo = fleet();
    // The production artifact now takes the staging overlay: what the cluster runs changes.
    repo.write(
        "apps/staging/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../base/podinfo\n",
    );
    let generator_file = repo.path().join("clusters/prod/artifacts.yaml");
    let text = std::fs::read_to_string(&generator_file).unwrap();
    repo.write(
        "clusters/prod/artifacts.yaml",
        &text.replace("@monorepo/apps/prod/**", "@monorepo/apps/staging/**"),
    );
    repo.commit("prod artifact from the staging overlay");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((plan["verdict"].as_str(), code), (Some("changes"), 1), "{plan:#}");
    assert_eq!(
        changes_of(&plan, "flux-system/apps"),
        [("update".to_string(), "podinfo_podinfo_apps_Deployment".to_string())]
    );
}

#[test]
fn each_cluster_takes_the_artifact_of_its_own_generator() {
    let repo = fleet();
    repo.add_bootstrap("staging");
    add_cluster(&repo, "staging");
    repo.write("apps/staging/replicas.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\n  namespace: podinfo\nspec:\n  replicas: 1\n");
    repo.commit("staging");
    let render = repo.render(Some("HEAD"));
    let replicas = |cluster: &str| {
        let (_, apps) = render
            .kustomizations()
            .find(|(c, k)| c.name == cluster && k.name == "apps")
            .unwrap_or_else(|| panic!("no apps in {cluster}"));
        apps.objects.iter().find(|o| o.object["kind"] == "Deployment").unwrap().object["spec"]["replicas"]
            .clone()
    };
    assert_eq!(replicas("clusters/prod"), 2);
    assert_eq!(replicas("clusters/staging"), 1);
}

#[test]
fn excludes_leave_files_and_directories_out() {
    let repo = fleet();
    repo.write(
        "apps/prod/extra.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: podinfo\n",
    );
    repo.write(
        "apps/raw/app.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\n  namespace: podinfo\n",
    );
    repo.write(
        "apps/raw/skip.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: skipped\n  namespace: podinfo\n",
    );
    // Not a Kubernetes object: it fails a generated kustomization unless excluded.
    repo.write("apps/raw/testdata/values.yaml", "replicaCount: 3\n");
    // The example's .sourceignore keeps CI files in the GitRepository's artifact; the generated
    // artifact is archived through the default rules, which leave them out.
    repo.write(".sourceignore", "/*\n!/apps/\n!/clusters/\n!/infrastructure/\n");
    repo.write("apps/raw/.gitlab-ci.yml", "stages: [test]\n");
    repo.write(
        "clusters/prod/artifacts.yaml",
        &generator(
            "GitRepository",
            "flux-system",
            &[("apps", r#"[{from: "@monorepo/apps/raw/**", to: "@artifact/raw/", exclude: ["skip.yaml", "**/testdata/**"]}]"#)],
        ),
    );
    repo.kustomization_of("clusters/prod/apps.yaml", "apps", "./raw", ("ExternalArtifact", "apps"), "");
    repo.remove("clusters/prod/infrastructure.yaml");
    repo.commit("raw apps");
    let render = repo.render(Some("HEAD"));
    let apps = render.find("flux-system/apps").unwrap();
    assert_eq!(apps.status, Status::Rendered, "{:?}", apps.error);
    assert_eq!(apps.ids(), ["podinfo_raw__ConfigMap"]);
}

#[test]
fn merge_deep_merges_yaml_and_overwrite_replaces() {
    let repo = fleet();
    let config = |data: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: podinfo\ndata:\n{data}")
    };
    repo.write("config/base/settings.yaml", &config("  color: blue\n  size: small\n"));
    repo.write("config/prod/settings.yaml", "data:\n  size: large\n");
    repo.write("config/prod/full.yaml", &config("  size: large\n"));
    repo.write(
        "clusters/prod/artifacts.yaml",
        &generator(
            "GitRepository",
            "flux-system",
            &[
                (
                    "merged",
                    r#"[{from: "@monorepo/config/base/settings.yaml", to: "@artifact/app/"}, {from: "@monorepo/config/prod/settings.yaml", to: "@artifact/app/settings.yaml", strategy: Merge}]"#,
                ),
                (
                    "overwritten",
                    r#"[{from: "@monorepo/config/base/settings.yaml", to: "@artifact/app/"}, {from: "@monorepo/config/prod/full.yaml", to: "@artifact/app/settings.yaml"}]"#,
                ),
            ],
        ),
    );
    repo.remove("clusters/prod/apps.yaml").remove("clusters/prod/infrastructure.yaml");
    repo.kustomization_of("clusters/prod/merged.yaml", "merged", "./app", ("ExternalArtifact", "merged"), "");
    repo.kustomization_of(
        "clusters/prod/overwritten.yaml",
        "overwritten",
        "./app",
        ("ExternalArtifact", "overwritten"),
        "",
    );
    repo.commit("merge");
    let render = repo.render(Some("HEAD"));
    let data = |name: &str| {
        let k = render.find(&format!("flux-system/{name}")).unwrap();
        assert_eq!(k.status, Status::Rendered, "{:?}", k.error);
        k.objects[0].object["data"].clone()
    };
    assert_eq!(data("merged"), serde_json::json!({"color": "blue", "size": "large"}));
    assert_eq!(data("overwritten"), serde_json::json!({"size": "large"}));
}

#[test]
fn a_path_pattern_generator_makes_one_artifact_per_app() {
    let repo = fleet();
    repo.write(
        "clusters/prod/per-app.yaml",
        "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata:\n  name: per-app\n  namespace: flux-system\nspec:\n  pathPattern: \"@monorepo/apps/base/{app}\"\n  sources:\n    - alias: monorepo\n      kind: GitRepository\n      name: flux-system\n  artifacts:\n    - name: \"app-{app}\"\n      copy:\n        - from: \"@monorepo/apps/base/{app}/**\"\n          to: \"@artifact/\"\n",
    );
    repo.kustomization_of(
        "clusters/prod/podinfo.yaml",
        "podinfo",
        "./",
        ("ExternalArtifact", "app-podinfo"),
        "",
    );
    repo.commit("one artifact per app");
    let render = repo.render(Some("HEAD"));
    let podinfo = render.find("flux-system/podinfo").unwrap();
    assert_eq!(podinfo.status, Status::Rendered, "{:?} {:?}", podinfo.error, podinfo.warnings);
    assert_eq!(podinfo.ids(), ["_podinfo__Namespace", "podinfo_podinfo_apps_Deployment"]);
    assert_eq!(podinfo.objects[0].origin.as_deref(), Some("apps/base/podinfo/namespace.yaml"));
}

#[test]
fn hostile_generator_paths_fail_the_kustomization_with_a_clear_error() {
    for (copy, says) in [
        (
            r#"[{from: "@monorepo/../../etc/**", to: "@artifact/"}]"#,
            "'from' '../../etc/**' climbs out with '..'; it must stay inside the source",
        ),
        (r#"[{from: "@monorepo/apps/**", to: "../x"}]"#, "'to' must read '@artifact/<path>'"),
        (
            r#"[{from: "@monorepo/apps/**", to: "@artifact/../../x"}]"#,
            "'to' '../../x' climbs out with '..'; it must stay inside the artifact",
        ),
        (r#"[{from: "@monorepo//etc/passwd", to: "@artifact/"}]"#, "'from' '/etc/passwd' is absolute"),
    ] {
        let repo = fleet();
        repo.write(
            "clusters/prod/artifacts.yaml",
            &generator("GitRepository", "flux-system", &[("apps", copy), ("infrastructure", copy)]),
        );
        repo.commit("hostile");
        let render = repo.render(Some("HEAD"));
        let apps = render.find("flux-system/apps").unwrap();
        assert_eq!(apps.status, Status::Failed, "{copy}");
        let error = apps.error.as_ref().unwrap();
        assert_eq!(error.code, "invalid-source");
        assert!(error.message.contains(says), "{copy}: {}", error.message);
        assert!(
            error.message.starts_with("ArtifactGenerator flux-system/flux-system: artifact apps: copy from"),
            "{}",
            error.message
        );
        assert!(error.message.ends_with("(in clusters/prod/artifacts.yaml)"), "{}", error.message);
        // The rest of the cluster is still rendered.
        assert_eq!(render.find("flux-system/flux-system").unwrap().status, Status::Rendered);
    }
}

#[test]
fn a_generator_reading_a_remote_source_is_external_with_a_warning() {
    let repo = fleet();
    repo.write(
        "clusters/prod/sources.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: platform\n  namespace: flux-system\nspec:\n  url: https://github.com/acme/platform\n  ref:\n    branch: main\n",
    );
    let text = std::fs::read_to_string(repo.path().join("clusters/prod/artifacts.yaml")).unwrap();
    repo.write(
        "clusters/prod/artifacts.yaml",
        &text.replace("name: flux-system\n  artifacts", "name: platform\n  artifacts"),
    );
    repo.commit("artifacts from the platform repository");
    let render = repo.render(Some("HEAD"));
    let apps = render.find("flux-system/apps").unwrap();
    assert_eq!(apps.status, Status::External);
    assert_eq!(
        apps.warnings,
        ["source ExternalArtifact/flux-system/apps is not built locally, so it is not planned: its ArtifactGenerator flux-system/flux-system \
          (clusters/prod/artifacts.yaml), artifact apps reads GitRepository/flux-system/platform, which is not in this \
          repository (map it with --source flux-system/platform=DIR); or map the artifact itself with --source \
          flux-system/apps=DIR"]
    );
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(kustomization_in(&plan, "flux-system/apps")["status"], "external");
    let warning = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["code"] == "external-artifact")
        .expect("an alert");
    assert_eq!(warning["severity"], "warning");
    assert_ne!(plan["verdict"], "no-changes", "{plan:#}");
    assert_ne!(code, 0);
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert!(markdown.contains("**external-artifact** `flux-system/apps`"), "{markdown}");
    insta::assert_snapshot!("artifacts_remote_source_markdown", markdown);

    // Mapped to a local checkout, the generator's source is read from there.
    let platform = tempfile::tempdir().unwrap();
    for (from, to) in [("apps", "apps"), ("infrastructure", "infrastructure")] {
        copy_dir(&repo.path().join(from), &platform.path().join(to));
    }
    let mapping = format!("flux-system/platform={}", platform.path().display());
    let (ids, stderr, code) = build(&repo, &["--source", &mapping]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        ids.contains("# flux-system/apps\n_podinfo__Namespace\npodinfo_podinfo_apps_Deployment\n"),
        "{ids}"
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// The example repository as it is published: no bootstrap manifests (gotk-sync.yaml is a
/// placeholder), every Kustomization sourcing an ExternalArtifact.
fn unbootstrapped(source: (&str, &str)) -> Repo {
    let repo = Repo::new("git@github.com:acme/fleet.git");
    repo.write(
        "clusters/prod/flux-system/gotk-sync.yaml",
        "# This file will be generated automatically by flux bootstrap.\n",
    );
    add_cluster(&repo, "prod");
    let text = generator(source.0, source.1, &[]);
    let current = std::fs::read_to_string(repo.path().join("clusters/prod/artifacts.yaml")).unwrap();
    let artifacts = current.split_once("  artifacts:\n").unwrap().1;
    repo.write("clusters/prod/artifacts.yaml", &format!("{text}{artifacts}"));
    repo.write(
        "apps/base/podinfo/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - deployment.yaml\n",
    );
    repo.write(
        "apps/base/podinfo/deployment.yaml",
        &deployment("podinfo", "podinfo", "ghcr.io/stefanprodan/podinfo:6.7.0"),
    );
    repo.write(
        "infrastructure/controllers/ingress-nginx.yaml",
        &deployment("ingress-nginx", "infra", "registry.k8s.io/ingress-nginx/controller:v1.12.0"),
    );
    repo.commit("fleet");
    repo.write(
        "apps/base/podinfo/deployment.yaml",
        &deployment("podinfo", "podinfo", "ghcr.io/stefanprodan/podinfo:6.8.0"),
    );
    repo.commit("podinfo 6.8.0");
    repo
}

#[test]
fn the_published_example_layout_renders_without_bootstrap_manifests() {
    let repo = unbootstrapped(("GitRepository", "flux-system"));
    let (ids, stderr, code) = build(&repo, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(ids.contains("# flux-system/apps\npodinfo_podinfo_apps_Deployment\n"), "{ids}");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((plan["verdict"].as_str(), code), (Some("changes"), 1), "{plan:#}");
    assert_eq!(
        changes_of(&plan, "flux-system/apps"),
        [("update".to_string(), "podinfo_podinfo_apps_Deployment".to_string())]
    );
}

#[test]
fn nothing_rendered_while_kustomizations_exist_is_a_failed_plan() {
    let repo = unbootstrapped(("OCIRepository", "monorepo"));
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((plan["verdict"].as_str(), code), (Some("failed"), 3), "{plan:#}");
    let error = plan["error"].as_str().unwrap();
    assert!(error.starts_with("nothing rendered: the repository defines 2 Kustomizations"), "{error}");
    assert!(error.contains("--source NAMESPACE/NAME=DIR"), "{error}");
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    insta::assert_snapshot!("artifacts_nothing_rendered_markdown", markdown);
    let (_, stderr, code) = build(&repo, &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("error: nothing rendered"), "{stderr}");
}

/// Generator `name` making artifact `makes` from `sources` ExternalArtifacts all named `from`
/// (distinct aliases), or from this repository when `from` is `None`.
fn chained_generator(name: &str, makes: &str, from: Option<&str>, sources: usize) -> String {
    let mut out = format!(
        "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  sources:\n"
    );
    match from {
        None => out.push_str("    - alias: s0\n      kind: GitRepository\n      name: flux-system\n"),
        Some(from) => {
            for i in 0..sources {
                out.push_str(&format!(
                    "    - alias: s{i}\n      kind: ExternalArtifact\n      name: {from}\n"
                ));
            }
        }
    }
    out.push_str(&format!(
        "  artifacts:\n    - name: {makes}\n      copy: [{{from: \"@s0/**\", to: \"@artifact/\"}}]\n"
    ));
    out
}

#[test]
fn generators_fanning_out_or_chaining_deep_are_refused_or_settled_without_exploding() {
    // Four levels, each listing the level below 300 times: 300^4 paths through the graph, each
    // explored once.
    let repo = Repo::bootstrap("prod");
    let mut generators = chained_generator("g0", "a0", None, 1);
    for level in 1..=4 {
        let below = format!("a{}", level - 1);
        generators.push_str("---\n");
        generators.push_str(&chained_generator(
            &format!("g{level}"),
            &format!("a{level}"),
            Some(&below),
            300,
        ));
    }
    repo.write("clusters/prod/artifacts.yaml", &generators);
    repo.kustomization_of("clusters/prod/apps.yaml", "apps", "./", ("ExternalArtifact", "a4"), "");
    repo.config_map("app/cm.yaml", "cm", "default");
    repo.commit("fan out");
    let render = repo.render(Some("HEAD"));
    let apps = render.find("flux-system/apps").unwrap();
    assert_eq!(apps.status, Status::Rendered, "{:?}", apps.error);

    // A chain deeper than anything real: a clear error, not a stack overflow.
    let repo = Repo::bootstrap("prod");
    let mut generators = chained_generator("g0", "a0", None, 1);
    for level in 1..=40 {
        generators.push_str("---\n");
        generators.push_str(&chained_generator(
            &format!("g{level}"),
            &format!("a{level}"),
            Some(&format!("a{}", level - 1)),
            1,
        ));
    }
    repo.write("clusters/prod/artifacts.yaml", &generators);
    repo.kustomization_of("clusters/prod/apps.yaml", "apps", "./", ("ExternalArtifact", "a40"), "");
    repo.commit("deep chain");
    let render = repo.render(Some("HEAD"));
    let apps = render.find("flux-system/apps").unwrap();
    assert_eq!(apps.status, Status::Failed);
    let message = &apps.error.as_ref().unwrap().message;
    assert!(message.contains("through a chain of more than 32 ExternalArtifacts"), "{message}");
}

#[test]
fn two_path_pattern_generators_in_one_file_are_each_tried() {
    let repo = fleet();
    let pattern = |name: &str, dir: &str, prefix: &str| {
        format!(
            "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  pathPattern: \"@monorepo/{dir}/{{x}}\"\n  sources:\n    - alias: monorepo\n      kind: GitRepository\n      name: flux-system\n  artifacts:\n    - name: \"{prefix}-{{x}}\"\n      copy:\n        - from: \"@monorepo/{dir}/{{x}}/**\"\n          to: \"@artifact/\"\n"
        )
    };
    repo.write(
        "clusters/prod/patterns.yaml",
        &format!("{}---\n{}", pattern("apps", "apps/base", "app"), pattern("infra", "extra", "infra")),
    );
    repo.config_map("extra/redis/cm.yaml", "redis", "default");
    // The first generator is tried for both; `infra-redis` is the second one's.
    repo.kustomization_of(
        "clusters/prod/podinfo.yaml",
        "podinfo",
        "./",
        ("ExternalArtifact", "app-podinfo"),
        "",
    );
    repo.kustomization_of("clusters/prod/redis.yaml", "redis", "./", ("ExternalArtifact", "infra-redis"), "");
    repo.commit("two pattern generators in one file");
    let render = repo.render(Some("HEAD"));
    for name in ["flux-system/podinfo", "flux-system/redis"] {
        let k = render.find(name).unwrap();
        assert_eq!(k.status, Status::Rendered, "{name}: {:?} {:?}", k.error, k.warnings);
    }
    assert_eq!(render.find("flux-system/redis").unwrap().ids(), ["default_redis__ConfigMap"]);
}

#[test]
fn all_artifacts_of_a_render_together_are_bounded() {
    let repo = Repo::bootstrap("prod");
    let mut generators = String::new();
    for i in 0..6 {
        // Each artifact copies the whole repository: within the limits alone, not all together.
        generators.push_str(&chained_generator(&format!("g{i}"), &format!("a{i}"), None, 1));
        generators.push_str("---\n");
        repo.kustomization_of(
            &format!("clusters/prod/k{i}.yaml"),
            &format!("k{i}"),
            "./app",
            ("ExternalArtifact", &format!("a{i}")),
            "",
        );
    }
    repo.write("clusters/prod/artifacts.yaml", &generators);
    for i in 0..40 {
        repo.config_map(&format!("app/cm{i}.yaml"), &format!("cm{i}"), "default");
    }
    repo.commit("six copies of everything");
    let mut opts = repo.options(Some("HEAD"));
    opts.limits.max_files = 60;
    let render = crate::fixture::render_with(&opts);
    let refused: Vec<String> = (0..6)
        .filter_map(|i| {
            render.find(&format!("flux-system/k{i}")).unwrap().error.as_ref().map(|e| e.message.clone())
        })
        .collect();
    assert!(!refused.is_empty(), "six whole copies passed a limit of four");
    assert!(
        refused.iter().all(|m| m.contains("the artifacts of this render would hold more than 240 files")),
        "{refused:?}"
    );
    // The first ones, within the total, are rendered.
    assert!((0..6).any(|i| render.find(&format!("flux-system/k{i}")).unwrap().status == Status::Rendered));
}
