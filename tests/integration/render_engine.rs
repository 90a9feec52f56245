//! The render engine against real git and real kustomize.

use crate::fixture::{cache_entries, error_of, remove_cache_entries, render_with, Repo};
use fluxplan::cluster::snapshot::ClusterSnapshot;
use fluxplan::render::{Renderer, Status};
use std::sync::Arc;
use std::time::Duration;

fn ids(render: &fluxplan::render::Render, reference: &str) -> Vec<String> {
    render.find(reference).unwrap_or_else(|| panic!("{reference} missing")).ids()
}

#[test]
fn bootstrap_root_renders_itself_and_its_children() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/a.yaml", "a", "default");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    assert_eq!(render.clusters.len(), 1);
    assert_eq!(render.clusters[0].name, "clusters/prod");
    assert_eq!(render.clusters[0].root.to_string(), "flux-system/flux-system");
    assert_eq!(
        ids(&render, "flux-system/flux-system"),
        vec![
            "flux-system_apps_kustomize.toolkit.fluxcd.io_Kustomization",
            "flux-system_flux-system_kustomize.toolkit.fluxcd.io_Kustomization",
            "flux-system_flux-system_source.toolkit.fluxcd.io_GitRepository",
        ]
    );
    assert_eq!(ids(&render, "flux-system/apps"), vec!["default_a__ConfigMap"]);
    let apps = render.find("flux-system/apps").unwrap();
    assert_eq!(apps.parent.as_ref().unwrap().to_string(), "flux-system/flux-system");
    assert_eq!(apps.file.as_deref(), Some("clusters/prod/apps.yaml"));
    assert!(render.unreachable.is_empty(), "{:?}", render.unreachable);
}

#[test]
fn reads_a_revision_without_touching_the_checkout() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/a.yaml", "old", "default");
    let first = repo.commit("one");
    repo.config_map("apps/a.yaml", "new", "default");
    repo.commit("two");
    repo.config_map("apps/a.yaml", "uncommitted", "default");
    let status_before = repo.git(&["status", "--porcelain"]);

    assert_eq!(ids(&repo.render(Some(&first)), "flux-system/apps"), vec!["default_old__ConfigMap"]);
    assert_eq!(ids(&repo.render(Some("HEAD")), "flux-system/apps"), vec!["default_new__ConfigMap"]);
    assert_eq!(ids(&repo.render(None), "flux-system/apps"), vec!["default_uncommitted__ConfigMap"]);
    assert_eq!(repo.git(&["status", "--porcelain"]), status_before);
    assert!(std::fs::read_to_string(repo.path().join("apps/a.yaml")).unwrap().contains("uncommitted"));
    assert_eq!(repo.render(Some(&first)).revision.as_deref(), Some(first.as_str()));
}

#[test]
fn unknown_revision_is_a_clear_error() {
    let repo = Repo::bootstrap("prod");
    repo.commit("init");
    let err = Renderer::new(Duration::from_secs(30), None)
        .unwrap()
        .render(&repo.options(Some("no-such-branch")))
        .unwrap_err();
    assert!(format!("{err:#}").contains("no-such-branch"), "{err:#}");
}

#[test]
fn two_clusters_in_one_repository_stay_apart() {
    let repo = Repo::bootstrap("staging");
    repo.add_bootstrap("production");
    repo.kustomization("clusters/staging/apps.yaml", "apps", "./apps/staging", "");
    repo.kustomization("clusters/production/apps.yaml", "apps", "./apps/production", "");
    repo.config_map("apps/staging/c.yaml", "staging-only", "default");
    repo.config_map("apps/production/c.yaml", "production-only", "default");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    let names: Vec<&str> = render.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["clusters/production", "clusters/staging"]);
    let apps_of = |cluster: usize| {
        render.clusters[cluster].kustomizations.iter().find(|k| k.name == "apps").unwrap().ids()
    };
    assert_eq!(apps_of(0), vec!["default_production-only__ConfigMap"]);
    assert_eq!(apps_of(1), vec!["default_staging-only__ConfigMap"]);
}

#[test]
fn git_repository_matching_a_remote_denotes_this_repository() {
    // No flux-system source: a GitRepository named "fleet" whose https URL is the ssh remote.
    let repo = Repo::new("git@github.com:acme/fleet.git");
    repo.write(
        "clusters/dev/source.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: fleet\n  namespace: flux-system\nspec:\n  url: https://github.com/acme/fleet.git\n",
    );
    repo.write(
        "clusters/dev/apps.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  path: ./apps\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: fleet\n",
    );
    repo.write(
        "clusters/dev/other.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: other\n  namespace: flux-system\nspec:\n  path: ./\n  sourceRef:\n    kind: GitRepository\n    name: somebody-elses\n",
    );
    repo.config_map("apps/a.yaml", "a", "default");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    // With no bootstrap root in the repository, every Kustomization nothing produces is a root.
    assert_eq!(ids(&render, "flux-system/apps"), vec!["default_a__ConfigMap"]);
    // A Kustomization of a source that is not this repository is not a root; nothing reaches it.
    assert_eq!(render.unreachable.len(), 1);
    assert_eq!(render.unreachable[0].name, "other");
}

#[test]
fn sources_mapped_to_directories_are_rendered_others_are_external() {
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
    repo.kustomization_of("clusters/prod/external.yaml", "external", "./", ("OCIRepository", "charts"), "");
    repo.commit("init");
    let mut opts = repo.options(Some("HEAD"));
    opts.sources.insert("flux-system/platform".into(), other.path().to_path_buf());
    let render = render_with(&opts);
    assert_eq!(ids(&render, "flux-system/platform"), vec!["platform_from-platform__ConfigMap"]);
    let external = render.find("flux-system/external").unwrap();
    assert_eq!(external.status, Status::External);
    assert!(external.objects.is_empty());

    let unmapped = repo.render(Some("HEAD"));
    assert_eq!(unmapped.find("flux-system/platform").unwrap().status, Status::External);
}

/// A GitRepository of this repository whose artifact also holds other repositories
/// (`spec.include`) or its submodules (`spec.recurseSubmodules`) is more than this repository:
/// rendering it from this repository alone would plan what Flux does not apply.
#[test]
fn a_source_that_adds_to_this_repository_is_not_rendered_as_this_repository_alone() {
    let repo = Repo::bootstrap("prod");
    for (name, extra) in [
        ("with-include", "  include:\n  - repository:\n      name: platform\n    toPath: apps\n"),
        ("with-submodules", "  recurseSubmodules: true\n"),
        ("plain", ""),
    ] {
        repo.write(
            &format!("clusters/prod/{name}-source.yaml"),
            &format!(
                "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: {name}\n  \
                 namespace: flux-system\nspec:\n  url: ssh://git@github.com/acme/fleet\n{extra}"
            ),
        );
        repo.kustomization_of(
            &format!("clusters/prod/{name}.yaml"),
            name,
            "./apps",
            ("GitRepository", name),
            "",
        );
    }
    repo.config_map("apps/cm.yaml", "app", "default");
    // A plain definition of the same name, read later, never clears what the first one adds.
    repo.write(
        "zz/decoy.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: with-include\n  \
         namespace: flux-system\nspec:\n  url: ssh://git@github.com/acme/fleet\n",
    );
    repo.commit("sources");
    let render = repo.render(Some("HEAD"));
    assert_eq!(ids(&render, "flux-system/plain"), vec!["default_app__ConfigMap"]);
    for (name, adds) in
        [("with-include", "spec.include adds platform"), ("with-submodules", "spec.recurseSubmodules")]
    {
        let k = render.find(&format!("flux-system/{name}")).unwrap();
        assert_eq!(k.status, Status::External, "{name}");
        assert!(k.objects.is_empty(), "{name}");
        assert!(
            k.warnings.iter().any(|w| w.contains(adds) && w.contains("not planned")),
            "{name}: {:?}",
            k.warnings
        );
    }
}

/// What a patch gives a GitRepository counts, not only its file as written: a pull request that
/// patches `spec.include` onto a source of this repository gets a blocking alert, not a plan
/// of this repository alone.
#[test]
fn a_source_patched_to_add_content_is_not_planned_and_the_merge_is_blocked() {
    let repo = Repo::bootstrap("prod");
    repo.write(
        "clusters/prod/sources/patched.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: patched\n  \
         namespace: flux-system\nspec:\n  url: ssh://git@github.com/acme/fleet\n",
    );
    repo.write("clusters/prod/sources/kustomization.yaml", "resources: [patched.yaml]\n");
    repo.kustomization_of("clusters/prod/apps.yaml", "apps", "./apps", ("GitRepository", "patched"), "");
    repo.config_map("apps/cm.yaml", "app", "default");
    repo.commit("base");
    repo.write(
        "clusters/prod/sources/kustomization.yaml",
        "resources: [patched.yaml]\npatches:\n- target: {kind: GitRepository, name: patched}\n  patch: |-\n    \
         - op: add\n      path: /spec/include\n      value: [{repository: {name: platform}, toPath: apps}]\n",
    );
    repo.commit("include another repository's artifact");
    let render = repo.render(Some("HEAD"));
    let apps = render.find("flux-system/apps").unwrap();
    assert_eq!(apps.status, Status::External);
    assert!(apps.warnings.iter().any(|w| w.contains("spec.include adds platform")), "{:?}", apps.warnings);
    let (plan, code) = crate::fixture::plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let codes: Vec<&str> =
        plan["alerts"].as_array().unwrap().iter().map(|a| a["code"].as_str().unwrap()).collect();
    assert!(codes.contains(&"source-adds-content"), "{codes:?}");
}

/// A pull request that pins this repository's source to a commit (or tag) makes Flux apply that
/// revision, whatever the tree it shows: blocked, by name.
#[test]
fn a_pull_request_that_pins_the_source_revision_is_blocked() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "app", "default");
    let base = repo.commit("base");
    let sync = "clusters/prod/flux-system/gotk-sync.yaml";
    crate::fixture::edit(&repo, sync, "    branch: main", &format!("    commit: {base}"));
    repo.commit("pin the source");
    let (plan, code) = crate::fixture::plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let pinned = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "source-ref-pinned");
    let message =
        pinned.unwrap_or_else(|| panic!("no source-ref-pinned alert: {plan:#}"))["message"].as_str().unwrap();
    assert!(
        message
            .contains(&format!("GitRepository flux-system/flux-system now pins spec.ref to commit {base}")),
        "{message}"
    );
    // A source pinned already, moved to another tag: the plan was never of the branch; no alert.
    crate::fixture::edit(&repo, sync, &format!("    commit: {base}"), "    tag: v2");
    repo.commit("another pin");
    let (plan, _) = crate::fixture::plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(plan["alerts"].as_array().unwrap().iter().all(|a| a["code"] != "source-ref-pinned"), "{plan:#}");
}

#[test]
fn unreachable_kustomization_files_are_listed() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("archive/old-app.yaml", "old-app", "./old", "");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    assert_eq!(render.unreachable.len(), 1);
    assert_eq!(render.unreachable[0].file, "archive/old-app.yaml");
    assert!(render.find("flux-system/old-app").is_none());
}

#[test]
fn flux_operator_instance_is_a_root() {
    let repo = Repo::new("https://github.com/acme/fleet");
    repo.write(
        "flux-instance.yaml",
        "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\nspec:\n  sync:\n    kind: GitRepository\n    url: https://github.com/acme/fleet\n    ref: refs/heads/main\n    path: clusters/edge\n",
    );
    repo.kustomization("clusters/edge/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/a.yaml", "a", "default");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    assert_eq!(render.clusters.len(), 1);
    assert_eq!(render.clusters[0].name, "clusters/edge");
    assert_eq!(ids(&render, "flux-system/apps"), vec!["default_a__ConfigMap"]);
}

#[test]
fn outage_empty_directory_renders_zero_objects_and_missing_directory_fails() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps-empty", "");
    repo.kustomization("clusters/prod/infra.yaml", "infra", "./does-not-exist", "");
    repo.kustomization("clusters/prod/other.yaml", "other", "./other", "");
    repo.mkdir("apps-empty");
    repo.write("apps-empty/README.md", "nothing to see\n");
    repo.config_map("other/c.yaml", "c", "default");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    let apps = render.find("flux-system/apps").unwrap();
    assert_eq!(apps.status, Status::Rendered);
    assert!(apps.objects.is_empty());
    let message = error_of(&render, "flux-system/infra", "path-not-found");
    assert!(
        message.contains("kustomization path not found") && message.contains("./does-not-exist"),
        "{message}"
    );
    // The other Kustomizations still render.
    assert_eq!(ids(&render, "flux-system/other"), vec!["default_c__ConfigMap"]);
}

#[test]
fn path_cannot_escape_the_source() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "../../../../apps", "");
    repo.config_map("apps/a.yaml", "a", "default");
    repo.commit("init");
    // `..` is clamped at the source root, as the controller's secure join does.
    assert_eq!(ids(&repo.render(Some("HEAD")), "flux-system/apps"), vec!["default_a__ConfigMap"]);
}

#[test]
fn generated_kustomization_follows_the_controller_rules() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/a.yaml", "a", "default");
    repo.config_map("apps/nested/deeper/b.yml", "b", "default");
    repo.config_map("apps/ignored.json", "json-is-not-read", "default");
    repo.config_map("apps/upper.YAML", "case-sensitive", "default");
    // A sub-directory with a kustomization is one resource: only what it lists is built.
    repo.write("apps/kustomized/kustomization.yaml", "resources:\n- listed.yaml\n");
    repo.config_map("apps/kustomized/listed.yaml", "listed", "default");
    repo.config_map("apps/kustomized/unlisted.yaml", "unlisted", "default");
    repo.write("apps/empty.yaml", "---\n# just a comment\n");
    repo.write(
        "apps/list.yaml",
        "apiVersion: v1\nkind: ConfigMapList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: from-list\n    namespace: default\n",
    );
    repo.commit("init");
    assert_eq!(
        ids(&repo.render(Some("HEAD")), "flux-system/apps"),
        vec![
            "default_a__ConfigMap",
            "default_b__ConfigMap",
            "default_from-list__ConfigMap",
            "default_listed__ConfigMap"
        ]
    );
}

#[test]
fn yaml_that_is_not_kubernetes_fails_only_its_kustomization() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.kustomization("clusters/prod/good.yaml", "good", "./good", "");
    repo.config_map("apps/a.yaml", "a", "default");
    repo.write("apps/values.yaml", "replicaCount: 2\nimage: nginx\n");
    repo.config_map("good/g.yaml", "g", "default");
    repo.write("bad/broken.yaml", "a: [1, 2\n");
    repo.kustomization("clusters/prod/bad.yaml", "bad", "./bad", "");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    let message = error_of(&render, "flux-system/apps", "invalid-source");
    assert!(message.contains("apps/values.yaml") && message.contains("missing kind"), "{message}");
    let message = error_of(&render, "flux-system/bad", "invalid-source");
    assert!(message.contains("bad/broken.yaml"), "{message}");
    assert_eq!(ids(&render, "flux-system/good"), vec!["default_g__ConfigMap"]);
}

#[test]
fn kustomize_failure_is_recorded_with_kustomize_message() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/kustomization.yaml", "resources:\n- cm.yaml\npatches:\n- path: patch.yaml\n");
    repo.config_map("apps/cm.yaml", "present", "default");
    repo.write(
        "apps/patch.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: absent-target\ndata:\n  k: v\n",
    );
    repo.commit("init");
    let message = error_of(&repo.render(Some("HEAD")), "flux-system/apps", "kustomize-failed");
    assert!(message.contains("absent-target"), "{message}");
    assert!(!message.contains("fluxplan-build"), "scratch names leak: {message}");
}

#[test]
fn a_missing_reference_is_named() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/kustomization.yaml", "resources:\n- missing.yaml\n");
    repo.commit("init");
    let message = error_of(&repo.render(Some("HEAD")), "flux-system/apps", "invalid-source");
    assert!(message.contains("'missing.yaml'") && message.contains("does not exist"), "{message}");
}

#[test]
fn spec_overrides_are_layered_onto_the_kustomization() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization(
        "clusters/prod/apps.yaml",
        "apps",
        "./apps",
        r#"targetNamespace: team-a
namePrefix: pre-
nameSuffix: -suf
images:
- name: nginx
  newTag: "1.27"
patches:
- patch: |
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: any
      labels:
        patched: "yes"
  target:
    kind: Deployment
components:
- ../components/extra
- ../components/missing
ignoreMissingComponents: true
commonMetadata:
  labels:
    team: a
  annotations:
    owner: platform"#,
    );
    repo.write(
        "apps/kustomization.yaml",
        "resources:\n- deploy.yaml\nnamePrefix: original-\nimages:\n- name: nginx\n  newName: registry.local/nginx\n  newTag: '1.25'\n",
    );
    repo.write(
        "apps/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.20\n",
    );
    repo.write(
        "components/extra/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n- cm.yaml\n",
    );
    repo.write("components/extra/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    assert_eq!(render.find("flux-system/apps").unwrap().error, None);
    assert_eq!(
        ids(&render, "flux-system/apps"),
        vec!["team-a_pre-extra-suf__ConfigMap", "team-a_pre-web-suf_apps_Deployment"]
    );
    let k = render.find("flux-system/apps").unwrap();
    let deploy = &k.objects.iter().find(|o| o.object["kind"] == "Deployment").unwrap().object;
    assert_eq!(deploy["spec"]["template"]["spec"]["containers"][0]["image"], "registry.local/nginx:1.27");
    assert_eq!(deploy["metadata"]["labels"]["patched"], "yes");
    assert_eq!(deploy["metadata"]["labels"]["team"], "a");
    assert_eq!(deploy["metadata"]["annotations"]["owner"], "platform");
    assert_eq!(deploy["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"], "apps");
    assert!(deploy["metadata"]["annotations"].get("config.kubernetes.io/origin").is_none());
}

#[test]
fn missing_component_fails_without_ignore_missing_components() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "components:\n- ../components/missing");
    repo.config_map("apps/a.yaml", "a", "default");
    repo.commit("init");
    let message = error_of(&repo.render(Some("HEAD")), "flux-system/apps", "invalid-source");
    assert!(message.contains("../components/missing"), "{message}");
}

#[test]
fn v1beta2_strategic_merge_and_json6902_patches() {
    let repo = Repo::bootstrap("prod");
    repo.write(
        "clusters/prod/apps.yaml",
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1beta2
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
  patchesStrategicMerge:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: a
      namespace: default
    data:
      merged: "true"
  patchesJson6902:
  - target:
      version: v1
      kind: ConfigMap
      name: a
    patch:
    - op: add
      path: /data/json
      value: "6902"
"#,
    );
    repo.config_map("apps/a.yaml", "a", "default");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    let data = &render.find("flux-system/apps").unwrap().objects[0].object["data"];
    assert_eq!(data["merged"], "true");
    assert_eq!(data["json"], "6902");
    assert_eq!(data["key"], "value");
}

#[test]
fn nesting_three_levels_uses_the_rendered_spec_of_each_child() {
    let repo = Repo::bootstrap("prod");
    // Level 1 (apps) patches every Kustomization it renders: the child's path is rewritten.
    repo.kustomization(
        "clusters/prod/apps.yaml",
        "apps",
        "./tenants",
        "patches:\n- patch: |\n    - op: replace\n      path: /spec/path\n      value: ./tenants-patched/team\n  target:\n    kind: Kustomization\n    group: kustomize.toolkit.fluxcd.io",
    );
    // Level 2 as written points at ./wrong; the patch sends it to ./tenants-patched/team.
    repo.kustomization(
        "tenants/team.yaml",
        "team",
        "./wrong",
        "postBuild:\n  substitute:\n    leaf_path: ./leaf",
    );
    repo.config_map("wrong/w.yaml", "wrong", "default");
    // Level 3 is produced by level 2, with its path substituted by level 2's postBuild.
    repo.kustomization("tenants-patched/team/leaf.yaml", "leaf", "${leaf_path}", "");
    repo.config_map("leaf/l.yaml", "leaf-object", "default");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    let team = render.find("flux-system/team").unwrap();
    assert_eq!(team.path, "./tenants-patched/team");
    assert_eq!(team.parent.as_ref().unwrap().to_string(), "flux-system/apps");
    assert_eq!(
        ids(&render, "flux-system/team"),
        vec!["flux-system_leaf_kustomize.toolkit.fluxcd.io_Kustomization"]
    );
    let leaf = render.find("flux-system/leaf").unwrap();
    assert_eq!(leaf.path, "./leaf");
    assert_eq!(leaf.parent.as_ref().unwrap().to_string(), "flux-system/team");
    assert_eq!(leaf.ids(), vec!["default_leaf-object__ConfigMap"]);
}

#[test]
fn cycles_are_detected_and_reported() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/a.yaml", "a", "./a", "");
    repo.kustomization("a/b.yaml", "b", "./b", "");
    repo.kustomization("b/a.yaml", "a", "./a", "");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    let message = error_of(&render, "flux-system/b", "cycle");
    assert!(message.contains("flux-system/a → flux-system/b → flux-system/a"), "{message}");
}

#[test]
fn cluster_scoped_kinds_lose_their_namespace_and_crds_decide_scope_across_kustomizations() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/crds.yaml", "crds", "./crds", "");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write(
        "crds/widgets.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: Cluster\n  names:\n    kind: Widget\n    plural: widgets\n  versions: []\n",
    );
    repo.write(
        "apps/objects.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: ignored\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n  namespace: also-ignored\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: system:team-reader\n",
    );
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    assert_eq!(
        ids(&render, "flux-system/apps"),
        vec![
            "_system__team-reader_rbac.authorization.k8s.io_ClusterRole",
            "_team__Namespace",
            "_w_example.com_Widget"
        ]
    );
    assert_eq!(
        ids(&render, "flux-system/crds"),
        vec!["_widgets.example.com_apiextensions.k8s.io_CustomResourceDefinition"]
    );
}

#[test]
fn namespaced_object_without_namespace_fails_like_the_apply() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nowhere\n");
    repo.commit("init");
    let message = error_of(&repo.render(Some("HEAD")), "flux-system/apps", "apply-would-fail");
    assert!(message.contains("ConfigMap/nowhere namespace not specified"), "{message}");
}

#[test]
fn sourceignore_and_spec_ignore_filter_the_artifact() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/a.yaml", "a", "default");
    repo.write("apps/.sourceignore", "drafts/\n");
    repo.write("apps/drafts/broken.yaml", "not: kubernetes\n");
    repo.write(".github/workflows/ci.yaml", "on: push\n");
    repo.commit("init");
    assert_eq!(ids(&repo.render(Some("HEAD")), "flux-system/apps"), vec!["default_a__ConfigMap"]);

    // spec.ignore on the GitRepository applies too.
    let sync = std::fs::read_to_string(repo.path().join("clusters/prod/flux-system/gotk-sync.yaml")).unwrap();
    repo.write(
        "clusters/prod/flux-system/gotk-sync.yaml",
        &sync.replace("  interval: 1m\n", "  interval: 1m\n  ignore: |\n    apps/a.yaml\n"),
    );
    repo.config_map("apps/b.yaml", "b", "default");
    repo.commit("ignore a");
    assert_eq!(ids(&repo.render(Some("HEAD")), "flux-system/apps"), vec!["default_b__ConfigMap"]);
}

#[test]
fn symlinks_are_never_followed_out_of_the_repository() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/a.yaml", "a", "default");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("stolen.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stolen\n  namespace: default\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path().join("stolen.yaml"), repo.path().join("apps/stolen.yaml"))
        .unwrap();
    std::os::unix::fs::symlink(outside.path(), repo.path().join("apps/linked-dir")).unwrap();
    repo.commit("init");
    for rev in [Some("HEAD"), None] {
        let render = repo.render(rev);
        assert_eq!(ids(&render, "flux-system/apps"), vec!["default_a__ConfigMap"], "{rev:?}");
        assert!(
            render.warnings.iter().any(|w| w.contains("apps/stolen.yaml") && w.contains("symlink")),
            "{:?}",
            render.warnings
        );
    }
}

#[test]
fn references_outside_the_source_are_refused() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/kustomization.yaml", "resources:\n- /etc/passwd\n");
    repo.commit("init");
    let message = error_of(&repo.render(Some("HEAD")), "flux-system/apps", "invalid-source");
    assert!(message.contains("outside the source"), "{message}");
}

#[test]
fn remote_bases_are_reported_never_fetched() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/kustomization.yaml", "resources:\n- ../base\n");
    repo.write("base/kustomization.yaml", "resources:\n- https://github.com/acme/remote//deploy?ref=v1\n");
    repo.commit("init");
    let message = error_of(&repo.render(Some("HEAD")), "flux-system/apps", "remote-base");
    assert!(message.contains("https://github.com/acme/remote") && message.contains("base"), "{message}");
}

#[test]
fn exec_plugins_never_run() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    let marker = tempfile::tempdir().unwrap();
    let marker_file = marker.path().join("pwned");
    repo.write("apps/kustomization.yaml", "resources:\n- cm.yaml\ngenerators:\n- gen.yaml\n");
    repo.config_map("apps/cm.yaml", "a", "default");
    repo.write(
        "apps/gen.yaml",
        &format!(
            "apiVersion: example.com/v1\nkind: Evil\nmetadata:\n  name: evil\n  annotations:\n    config.kubernetes.io/function: |\n      exec:\n        path: /bin/sh\n        args: [\"-c\", \"touch {}\"]\n",
            marker_file.display()
        ),
    );
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    assert!(!marker_file.exists(), "an exec plugin ran");
    error_of(&render, "flux-system/apps", "kustomize-failed");
}

#[test]
fn oversized_files_are_left_out_and_reported_as_a_source_limit() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/a.yaml", "a", "default");
    repo.write("apps/huge.yaml", &format!("# {}\n", "x".repeat(4096)));
    repo.commit("init");
    let mut opts = repo.options(Some("HEAD"));
    opts.limits.max_file_size = 2048;
    let render = render_with(&opts);
    assert_eq!(ids(&render, "flux-system/apps"), vec!["default_a__ConfigMap"]);
    assert_eq!(render.source_limits.len(), 1, "{:?}", render.source_limits);
    assert!(render.source_limits[0].contains("apps/huge.yaml"), "{:?}", render.source_limits);
}

fn substitution_repo(extra_spec: &str, manifest: &str) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", extra_spec);
    repo.write("apps/cm.yaml", manifest);
    repo.commit("init");
    repo
}

const CM_WITH_VARS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: default\ndata:\n  region: ${region}\n  tier: ${tier:=standard}\n  literal: $${region}\n  bare: $region\n";

#[test]
fn substitution_from_inline_values() {
    let repo = substitution_repo("postBuild:\n  substitute:\n    region: eu-west-1", CM_WITH_VARS);
    let render = repo.render(Some("HEAD"));
    let data = &render.find("flux-system/apps").unwrap().objects[0].object["data"];
    assert_eq!(data["region"], "eu-west-1");
    assert_eq!(data["tier"], "standard");
    assert_eq!(data["literal"], "${region}");
    assert_eq!(data["bare"], "$region");
}

#[test]
fn substitution_strict_mode_is_a_switch() {
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: default\ndata:\n  x: \"[${undefined_var}]\"\n";
    let repo = substitution_repo("postBuild:\n  substitute:\n    region: eu", manifest);
    let message = error_of(&repo.render(Some("HEAD")), "flux-system/apps", "substitution-failed");
    assert!(message.contains("undefined_var") && message.contains("ConfigMap/default/cm"), "{message}");
    let mut opts = repo.options(Some("HEAD"));
    opts.strict_substitution = false;
    let render = render_with(&opts);
    assert_eq!(render.find("flux-system/apps").unwrap().objects[0].object["data"]["x"], "[]");
}

#[test]
fn substitution_is_skipped_without_variables_or_when_disabled() {
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: default\ndata:\n  x: ${anything}\n";
    // postBuild with no variables at all: the controller does not substitute.
    let repo = substitution_repo("postBuild: {}", manifest);
    let render = repo.render(Some("HEAD"));
    assert_eq!(render.find("flux-system/apps").unwrap().objects[0].object["data"]["x"], "${anything}");
    // substitute: disabled on the object.
    let disabled = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: default\n  annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  x: ${anything}\n";
    let repo = substitution_repo("postBuild:\n  substitute:\n    a: b", disabled);
    let render = repo.render(Some("HEAD"));
    assert_eq!(render.find("flux-system/apps").unwrap().objects[0].object["data"]["x"], "${anything}");
}

#[test]
fn substitute_from_offline_leaves_placeholders_with_a_warning() {
    let repo = substitution_repo(
        "postBuild:\n  substitute:\n    tier: gold\n  substituteFrom:\n  - kind: ConfigMap\n    name: cluster-vars",
        CM_WITH_VARS,
    );
    let render = repo.render(Some("HEAD"));
    let k = render.find("flux-system/apps").unwrap();
    assert_eq!(k.status, Status::Rendered);
    assert_eq!(k.objects[0].object["data"]["region"], "${region}");
    assert_eq!(k.objects[0].object["data"]["tier"], "gold");
    assert_eq!(k.unresolved_variables, vec!["region"]);
    assert!(k.warnings.iter().any(|w| w.contains("${region}")), "{:?}", k.warnings);
}

#[test]
fn substitute_from_a_snapshot_and_secret_values_are_masked() {
    let repo = substitution_repo(
        "postBuild:\n  substituteFrom:\n  - kind: ConfigMap\n    name: cluster-vars\n  - kind: Secret\n    name: cluster-secrets\n  - kind: ConfigMap\n    name: absent\n    optional: true",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: default\ndata:\n  region: ${region}\n  dsn: postgres://app:${db_password}@db\n",
    );
    let snapshot = ClusterSnapshot::parse(
        "kind: ClusterSnapshot\nconfigMaps:\n- metadata: {name: cluster-vars, namespace: flux-system}\n  data: {region: us-east-2}\nsecrets:\n- metadata: {name: cluster-secrets, namespace: flux-system}\n  data: {db_password: czNjcjN0LXZhbHVl}\n",
    )
    .unwrap();
    let mut opts = repo.options(Some("HEAD"));
    opts.values = Arc::new(snapshot);
    let render = render_with(&opts);
    let k = render.find("flux-system/apps").unwrap();
    assert_eq!(k.objects[0].object["data"]["region"], "us-east-2");
    assert_eq!(k.objects[0].object["data"]["dsn"], "postgres://app:(masked:db_password)@db");
    let everything = serde_json::to_string(&render).unwrap();
    assert!(!everything.contains("s3cr3t-value"), "a secret value reached the output");
}

/// Everything the on-disk cache holds, as text: its entries and its files' bytes.
fn cache_contents(dir: &std::path::Path) -> Vec<String> {
    let files = std::fs::read_dir(dir).unwrap().flatten().map(|e| std::fs::read(e.path()).unwrap());
    let files = files.map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    cache_entries(dir).into_iter().map(|(_, text)| text).chain(files).collect()
}

#[test]
fn finished_renders_are_cached_per_values_and_never_hold_secret_values() {
    let cluster = |region: &str| {
        ClusterSnapshot::parse(&format!(
            "kind: ClusterSnapshot\nconfigMaps:\n- metadata: {{name: cluster-vars, namespace: flux-system}}\n  data: {{region: {region}}}\n\
             secrets:\n- metadata: {{name: cluster-secrets, namespace: flux-system}}\n  data: {{db_password: czNjcjN0LXZhbHVl}}\n"
        ))
        .unwrap()
    };
    let cache_dir = tempfile::tempdir().unwrap();
    let render = |repo: &Repo, region: &str| {
        let mut opts = repo.options(Some("HEAD"));
        opts.values = Arc::new(cluster(region));
        Renderer::new(Duration::from_secs(60), Some(cache_dir.path().to_path_buf()))
            .unwrap()
            .render(&opts)
            .unwrap()
    };
    let from_config_map = "postBuild:\n  substituteFrom:\n  - kind: ConfigMap\n    name: cluster-vars";
    let repo = substitution_repo(from_config_map, CM_WITH_VARS);
    let cold = render(&repo, "us-east-2");
    // The finished render is kept (kustomize's own output holds the placeholder).
    assert!(cache_contents(cache_dir.path()).iter().any(|entry| entry.contains("us-east-2")));
    let warm = render(&repo, "us-east-2");
    let objects = |render: &fluxplan::render::Render| {
        let k = render.find("flux-system/apps").unwrap();
        k.objects.iter().map(|o| (o.object.clone(), o.digest.clone(), o.origin.clone())).collect::<Vec<_>>()
    };
    assert_eq!(objects(&warm), objects(&cold));
    assert_eq!(warm.stats.builds - warm.stats.cache_hits, 0, "{:?}", warm.stats);
    // Other values, same build: substituted again, never the cached render of other values.
    let other = render(&repo, "eu-west-1");
    assert_eq!(other.find("flux-system/apps").unwrap().objects[0].object["data"]["region"], "eu-west-1");

    // Values from a Secret: the render is never written down (a nested Kustomization keeps its
    // real manifest, the Secret's value in it, beside the masked one).
    let from_secret = "postBuild:\n  substituteFrom:\n  - kind: Secret\n    name: cluster-secrets";
    let child = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: child\n  namespace: flux-system\n\
                 spec:\n  interval: 1h\n  path: ./child\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n\
                 \x20 postBuild:\n    substitute:\n      dsn: postgres://app:${db_password}@db\n";
    let repo = substitution_repo(from_secret, child);
    let masked = render(&repo, "us-east-2");
    let shown = &masked.find("flux-system/apps").unwrap().objects[0];
    assert_eq!(
        shown.object["spec"]["postBuild"]["substitute"]["dsn"],
        "postgres://app:(masked:db_password)@db"
    );
    assert!(shown.real.as_ref().unwrap().to_string().contains("s3cr3t-value"));
    assert!(!cache_contents(cache_dir.path()).iter().any(|entry| entry.contains("s3cr3t-value")));
}

#[test]
fn substitute_from_missing_in_snapshot_fails_unless_optional() {
    let repo = substitution_repo(
        "postBuild:\n  substituteFrom:\n  - kind: ConfigMap\n    name: not-there",
        CM_WITH_VARS,
    );
    let mut opts = repo.options(Some("HEAD"));
    opts.values = Arc::new(ClusterSnapshot::parse("kind: ClusterSnapshot\n").unwrap());
    let message = error_of(&render_with(&opts), "flux-system/apps", "substitution-failed");
    assert!(message.contains("ConfigMap/flux-system/not-there"), "{message}");
}

#[test]
fn cache_reruns_kustomize_only_for_what_changed() {
    let repo = Repo::bootstrap("prod");
    for i in 0..4 {
        repo.kustomization(
            &format!("clusters/prod/app{i}.yaml"),
            &format!("app{i}"),
            &format!("./apps/app{i}"),
            "",
        );
        repo.config_map(&format!("apps/app{i}/cm.yaml"), &format!("cm{i}"), "default");
    }
    let base = repo.commit("base");
    repo.config_map("apps/app2/cm.yaml", "cm2-changed", "default");
    let head = repo.commit("head");
    let cache_dir = tempfile::tempdir().unwrap();
    let renderer = || Renderer::new(Duration::from_secs(60), Some(cache_dir.path().to_path_buf())).unwrap();

    let runs = |stats: &fluxplan::render::RenderStats| stats.builds - stats.cache_hits;
    let cold = renderer().render(&repo.options(Some(&base))).unwrap();
    assert_eq!(runs(&cold.stats), 5, "one kustomize run per Kustomization: {:?}", cold.stats);
    // A new process (a new renderer) reads the on-disk cache: everything of base hits.
    let warm = renderer().render(&repo.options(Some(&base))).unwrap();
    assert_eq!(runs(&warm.stats), 0, "{:?}", warm.stats);
    // Head differs in one Kustomization: exactly that one misses.
    let changed = renderer().render(&repo.options(Some(&head))).unwrap();
    assert_eq!(runs(&changed.stats), 1, "{:?}", changed.stats);
    assert_eq!(changed.find("flux-system/app2").unwrap().ids(), vec!["default_cm2-changed__ConfigMap"]);
}

/// A build whose inputs git says are unchanged skips reading them; when its output is gone from
/// the cache, kustomize still runs only after the inputs are checked (and nested kustomization
/// files rewritten as parsed), and builds the same objects.
#[test]
fn builds_known_by_git_ids_are_checked_before_kustomize_runs_again() {
    let repo = Repo::bootstrap("prod");
    for app in ["a", "b"] {
        repo.kustomization(&format!("clusters/prod/{app}.yaml"), app, &format!("./apps/{app}"), "");
        repo.write(&format!("apps/{app}/kustomization.yaml"), "resources: [../base, cm.yaml]\n");
        repo.config_map(&format!("apps/{app}/cm.yaml"), &format!("cm-{app}"), "default");
    }
    // Flow style and a comment: the check rewrites it before kustomize reads it.
    repo.write(
        "apps/base/kustomization.yaml",
        "# shared\n{resources: [ns.yaml], commonLabels: {tier: base}}\n",
    );
    repo.write("apps/base/ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shared\n");
    repo.commit("fleet");
    let cache_dir = tempfile::tempdir().unwrap();
    let render = || {
        let renderer = Renderer::new(Duration::from_secs(60), Some(cache_dir.path().to_path_buf())).unwrap();
        renderer.render(&repo.options(Some("HEAD"))).unwrap()
    };
    let objects = |render: &fluxplan::render::Render| -> Vec<(String, Vec<serde_json::Value>)> {
        render
            .kustomizations()
            .map(|(_, k)| {
                (k.name.clone(), k.objects.iter().map(|o| serde_json::Value::clone(&o.object)).collect())
            })
            .collect()
    };
    let cold = render();
    // Keep only the records of inputs by git id: every output is gone.
    let is_record = |text: &str| {
        serde_json::from_str::<serde_json::Value>(text)
            .is_ok_and(|v| v.get("ids").is_some() && v.get("key").is_some())
    };
    remove_cache_entries(cache_dir.path(), |text| !is_record(text));
    let entries = cache_entries(cache_dir.path());
    assert_eq!(entries.len(), 3, "one record per Kustomization");
    assert!(entries.iter().all(|(_, text)| is_record(text)));
    let again = render();
    assert_eq!(again.stats.builds - again.stats.cache_hits, 3, "{:?}", again.stats);
    assert_eq!(objects(&again), objects(&cold));
    assert!(again.kustomizations().all(|(_, k)| k.status == Status::Rendered));
}

#[test]
fn finished_renders_known_by_git_ids_skip_preparing_the_build_until_an_input_changes() {
    let repo = Repo::bootstrap("prod");
    for app in ["a", "b"] {
        repo.kustomization(&format!("clusters/prod/{app}.yaml"), app, &format!("./apps/{app}"), "");
        repo.write(&format!("apps/{app}/kustomization.yaml"), "resources: [cm.yaml]\n");
        repo.config_map(&format!("apps/{app}/cm.yaml"), &format!("cm-{app}"), "default");
    }
    repo.commit("fleet");
    let cache_dir = tempfile::tempdir().unwrap();
    let render = || {
        let renderer = Renderer::new(Duration::from_secs(60), Some(cache_dir.path().to_path_buf())).unwrap();
        renderer.render(&repo.options(Some("HEAD"))).unwrap()
    };
    let cold = render();
    // Without the records of the builds' inputs, only the finished renders' records by git id
    // can answer: they do, for every Kustomization, and nothing is built.
    let before = cache_entries(cache_dir.path()).len();
    remove_cache_entries(cache_dir.path(), |text| {
        serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.get("key").is_some())
    });
    assert_eq!(cache_entries(cache_dir.path()).len(), before - 3, "one record per Kustomization");
    let warm = render();
    assert_eq!(warm.stats.builds, warm.stats.cache_hits, "{:?}", warm.stats);
    assert_eq!(warm.find("flux-system/a").unwrap().ids(), cold.find("flux-system/a").unwrap().ids());
    // One input changes: that Kustomization is built again and shows it; the other is not.
    repo.config_map("apps/a/cm.yaml", "cm-a-renamed", "default");
    repo.commit("rename a's ConfigMap");
    let changed = render();
    assert_eq!(changed.stats.builds - changed.stats.cache_hits, 1, "{:?}", changed.stats);
    assert_eq!(changed.find("flux-system/a").unwrap().ids(), ["default_cm-a-renamed__ConfigMap"]);
    assert_eq!(changed.find("flux-system/b").unwrap().ids(), ["default_cm-b__ConfigMap"]);
}

/// The same inputs by git id are not the same tree when the ignore rules change: a
/// `.sourceignore` that leaves an input out fails the build as Flux would, never a cached success.
#[test]
fn a_changed_sourceignore_is_never_answered_from_inputs_known_by_git_ids() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/app.yaml", "app", "./apps/app", "");
    repo.write("apps/app/kustomization.yaml", "resources: [cm.yaml]\n");
    repo.config_map("apps/app/cm.yaml", "cm", "default");
    repo.commit("app");
    let cache_dir = tempfile::tempdir().unwrap();
    let render = || {
        let renderer = Renderer::new(Duration::from_secs(60), Some(cache_dir.path().to_path_buf())).unwrap();
        renderer.render(&repo.options(Some("HEAD"))).unwrap()
    };
    assert_eq!(render().find("flux-system/app").unwrap().status, Status::Rendered);
    repo.write(".sourceignore", "apps/app/cm.yaml\n");
    repo.commit("ignore the ConfigMap");
    let ignored = render();
    let app = ignored.find("flux-system/app").unwrap();
    assert_eq!(app.status, Status::Failed, "{:?}", app.objects);
}

#[test]
fn kustomize_timeout_is_an_error_on_the_kustomization() {
    // A stand-in kustomize that hangs: the only way to exercise the timeout deterministically.
    let bin = tempfile::tempdir().unwrap();
    let script = crate::fixture::stand_in_kustomize(bin.path(), "sleep 30");
    let repo = Repo::bootstrap("prod");
    repo.commit("init");
    let mut opts = repo.options(Some("HEAD"));
    opts.kustomize_timeout = Duration::from_secs(1);
    let renderer = Renderer::with_kustomize(script.to_str().unwrap(), opts.kustomize_timeout).unwrap();
    let render = renderer.render(&opts).unwrap();
    // Without a successful build of the root, nothing is known to be a root but the fallback.
    let failed: Vec<_> = render.kustomizations().filter(|(_, k)| k.error.is_some()).collect();
    assert!(!failed.is_empty());
    for (_, k) in failed {
        let error = k.error.as_ref().unwrap();
        assert_eq!(error.code, "source-limit", "{}", error.message);
        assert!(error.message.contains("timed out"), "{}", error.message);
    }
}

#[test]
fn values_a_parent_substitutes_from_a_secret_stay_masked_in_its_children() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization(
        "clusters/prod/apps.yaml",
        "apps",
        "./apps",
        "postBuild:\n  substituteFrom:\n  - kind: Secret\n    name: creds",
    );
    // The parent hands the Secret's value to its child as an inline variable.
    repo.write(
        "apps/child.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: child\n  namespace: flux-system\nspec:\n  path: ./child\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  postBuild:\n    substitute:\n      password: ${password}\n",
    );
    repo.write(
        "child/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: uses-password\n  namespace: default\ndata:\n  dsn: postgres://app:${password}@db\n",
    );
    repo.commit("init");
    let snapshot = ClusterSnapshot::parse(
        "kind: ClusterSnapshot\nsecrets:\n- metadata: {name: creds, namespace: flux-system}\n  data: {password: aW5oZXJpdGVkLXNlY3JldA==}\n",
    )
    .unwrap();
    let mut opts = repo.options(Some("HEAD"));
    opts.values = Arc::new(snapshot);
    let render = render_with(&opts);
    let child = render.find("flux-system/child").unwrap();
    assert_eq!(child.status, Status::Rendered, "{:?}", child.error);
    assert_eq!(child.objects[0].object["data"]["dsn"], "postgres://app:(masked:password)@db");
    let everything = serde_json::to_string(&render).unwrap();
    assert!(!everything.contains("inherited-secret"), "a secret value reached the output");
}

#[test]
fn a_kustomization_at_the_source_root_renders_in_the_sandbox() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/everything.yaml", "everything", "./", "");
    repo.write(
        "kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- root-cm.yaml\n",
    );
    repo.config_map("root-cm.yaml", "at-root", "default");
    repo.commit("init");
    let render = repo.render(Some("HEAD"));
    let everything = render.find("flux-system/everything").unwrap();
    assert!(everything.error.is_none(), "{:?}", everything.error);
    assert_eq!(everything.ids(), vec!["default_at-root__ConfigMap"]);
}

/// Every file and directory under `dir` with its content (directories: none), sorted.
fn listing(dir: &std::path::Path) -> Vec<(String, Option<Vec<u8>>)> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, Option<Vec<u8>>)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().to_string_lossy().to_string();
            if entry.file_type().unwrap().is_dir() {
                out.push((relative, None));
                walk(root, &path, out);
            } else {
                out.push((relative, Some(std::fs::read(&path).unwrap())));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn a_kept_export_holds_exactly_the_commit_it_was_brought_to() {
    use fluxplan::render::source::{kept_trees, ExportedSource, SourceLimits};
    let repo = Repo::bootstrap("prod");
    repo.write("a/keep.yaml", "kind: Kustomization\napiVersion: kustomize.toolkit.fluxcd.io/v1\n");
    repo.write("a/change.yaml", "x: 1\n");
    repo.write("gone/deep/file.yaml", "x: 1\n");
    repo.write("swap", "a file first\n");
    // A directory holding nothing written: only a file over the size limit.
    repo.write("huge/only.yaml", &"y".repeat(4096));
    let first = repo.commit("first");
    repo.write("a/change.yaml", "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n");
    repo.remove("gone");
    repo.remove("swap");
    repo.write("swap/inside.yaml", "now a directory\n");
    repo.write("new/dir/file.yaml", "x: 2\n");
    repo.write("big.yaml", &"x".repeat(2048));
    repo.remove("huge");
    std::os::unix::fs::symlink("../a/keep.yaml", repo.path().join("new/link.yaml")).unwrap();
    let second = repo.commit("second");
    let limits = SourceLimits { max_file_size: 1024, ..SourceLimits::default() };
    let same = |kept: &ExportedSource, fresh: &ExportedSource| {
        assert!(kept.tree(None).unwrap().to_string_lossy().contains("kept"), "the kept tree was used");
        assert_eq!(listing(&kept.tree(None).unwrap()), listing(&fresh.tree(None).unwrap()));
        let sorted = |e: &ExportedSource| {
            let mut m = e.flux_manifests.clone();
            m.sort();
            m
        };
        assert_eq!(sorted(kept), sorted(fresh));
        assert_eq!((&kept.oversized, &kept.warnings), (&fresh.oversized, &fresh.warnings));
        assert_eq!(
            kept.tree_ids(&kept.tree(None).unwrap()).unwrap().ids,
            fresh.tree_ids(&fresh.tree(None).unwrap()).unwrap().ids
        );
    };
    drop(ExportedSource::export_keeping(repo.path(), Some(&first), limits, true).unwrap());
    assert_eq!(kept_trees(repo.path(), &limits).len(), 1, "the first export is kept");
    let kept = ExportedSource::export_keeping(repo.path(), Some(&second), limits, true).unwrap();
    assert!(kept_trees(repo.path(), &limits).is_empty(), "taken while in use");
    same(&kept, &ExportedSource::export(repo.path(), Some(&second), limits).unwrap());
    drop(kept);
    // Back to the first commit, from the second's tree.
    let back = ExportedSource::export_keeping(repo.path(), Some(&first), limits, true).unwrap();
    same(&back, &ExportedSource::export(repo.path(), Some(&first), limits).unwrap());
    drop(back);
    // A kept tree whose state cannot be read is never trusted: it is exported afresh.
    let slot = kept_trees(repo.path(), &limits).pop().unwrap();
    std::fs::write(slot.join("state.json"), "{not json").unwrap();
    std::fs::write(slot.join("tree/a/keep.yaml"), "tampered\n").unwrap();
    let rebuilt = ExportedSource::export_keeping(repo.path(), Some(&second), limits, true).unwrap();
    same(&rebuilt, &ExportedSource::export(repo.path(), Some(&second), limits).unwrap());
}

/// A commit can hold tree entries named `..` (git accepts them unless fsck runs): bringing a kept
/// tree forward to it must never write outside the tree. git's archive refuses the path.
#[test]
fn a_tree_entry_named_dot_dot_never_leads_a_kept_export_out_of_its_tree() {
    use fluxplan::render::source::{kept_trees, ExportedSource, SourceLimits};
    let repo = Repo::bootstrap("prod");
    let first = repo.commit("first");
    let git = |args: &[&str], input: &str| {
        let mut child = std::process::Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let blob = git(&["hash-object", "-w", "--stdin"], "pwned\n");
    let mut tree = git(&["mktree"], &format!("100644 blob {blob}\tpwned.txt\n"));
    for _ in 0..4 {
        tree = git(&["mktree"], &format!("040000 tree {tree}\t..\n"));
    }
    // The hostile directory beside everything the first commit holds.
    let mut listing = git(&["ls-tree", &first], "");
    listing.push_str(&format!("\n040000 tree {tree}\tx\n"));
    let root = git(&["mktree"], &listing);
    let hostile = git(&["commit-tree", &root, "-p", &first, "-m", "hostile"], "");
    let limits = SourceLimits::default();
    drop(ExportedSource::export_keeping(repo.path(), Some(&first), limits, true).unwrap());
    let slot = kept_trees(repo.path(), &limits).pop().expect("the first export is kept");
    // The kept tree is not brought forward; the fresh export fails, saying why.
    let Err(error) = ExportedSource::export_keeping(repo.path(), Some(&hostile), limits, true) else {
        panic!("the hostile commit was exported");
    };
    assert!(format!("{error:#}").contains("holds a path git does not check out: \"x/..\""), "{error:#}");
    let scratch = slot.parent().and_then(std::path::Path::parent).unwrap();
    let mut written = Vec::new();
    find_named(scratch, "pwned.txt", 6, &mut written);
    assert!(written.is_empty(), "written outside the tree: {written:?}");
}

fn find_named(dir: &std::path::Path, name: &str, depth: usize, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_name() == name {
            found.push(path);
        } else if depth > 0 && entry.file_type().is_ok_and(|t| t.is_dir()) {
            find_named(&path, name, depth - 1, found);
        }
    }
}
