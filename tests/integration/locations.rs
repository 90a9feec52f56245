//! Alerts point at the lines of the pull request's changed files that cause them (issue 37,
//! point 2): exact paths and line numbers on real git repositories, hostile names first.

use crate::fixture::{edit, helm, plan_json, Repo};
use serde_json::{json, Value};

/// The alert of `code`, whichever its severity.
fn alert<'p>(plan: &'p Value, code: &str) -> &'p Value {
    plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["code"] == code)
        .unwrap_or_else(|| panic!("no {code} alert: {plan:#}"))
}

fn locations(plan: &Value, code: &str) -> Value {
    alert(plan, code).get("locations").cloned().unwrap_or(json!([]))
}

fn at(path: &str, line: u32) -> Value {
    json!({"path": path, "line": line})
}

/// Every location of every alert of a plan.
fn all_locations(plan: &Value) -> Vec<Value> {
    let alerts = plan["alerts"].as_array().unwrap();
    alerts.iter().flat_map(|a| a["locations"].as_array().cloned().unwrap_or_default()).collect()
}

/// A cluster `prod` whose Kustomization `apps` (clusters/prod/apps.yaml) applies `apps/`: a
/// Namespace and two ConfigMaps listed by a kustomization.yaml.
fn fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write(
        "apps/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- namespace.yaml\n- a.yaml\n- b.yaml\n",
    );
    repo.write("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n");
    repo.config_map("apps/a.yaml", "a", "shop");
    repo.config_map("apps/b.yaml", "b", "shop");
    repo.mkdir("empty").write("empty/README.md", "nothing to apply\n");
    repo.commit("base");
    repo
}

/// The hostile side first: a unit file named with `..`, through a symbolic link, too large to
/// read, or outside the repository is never named; a near miss (a dot-dot-looking directory
/// name, a file in a subdirectory) is still located.
#[test]
fn locations_only_name_changed_plain_files_inside_the_repository() {
    let repo = fleet();
    // The Kustomization moves to a file behind a symbolic link and its path empties: the link
    // is not read, and nothing outside the repository is named.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("apps.yaml"), "spec:\n  path: ./empty\n").unwrap();
    repo.remove("clusters/prod/apps.yaml");
    std::os::unix::fs::symlink(outside.path().join("apps.yaml"), repo.path().join("clusters/prod/apps.yaml"))
        .unwrap();
    repo.kustomization("clusters/prod/..apps/apps.yaml", "apps", "./empty", "");
    // A file over the bound in the same change.
    repo.write("clusters/prod/big/huge.yaml", &format!("# {}\n", "x".repeat(2 * 1024 * 1024)));
    repo.commit("hostile");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    for location in all_locations(&plan) {
        let path = location["path"].as_str().unwrap();
        assert!(!path.starts_with('/') && !path.split('/').any(|c| c == ".." || c == "."), "{location}");
        assert!(path != "clusters/prod/apps.yaml" && !path.contains("huge"), "{location}");
    }
    // The near miss: `..apps` is a directory name like any other, read and pointed at.
    assert_eq!(locations(&plan, "empty-render"), json!([at("clusters/prod/..apps/apps.yaml", 8)]));
}

/// A Kustomization's path pointed at a directory with nothing to apply: its `path:` line.
#[test]
fn an_emptied_path_points_at_the_path_line() {
    let repo = fleet();
    edit(&repo, "clusters/prod/apps.yaml", "path: ./apps", "path: ./empty");
    repo.commit("empty");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert_eq!(locations(&plan, "empty-render"), json!([at("clusters/prod/apps.yaml", 8)]));

    // A path that does not exist, in a file of several documents.
    let repo = fleet();
    let text = std::fs::read_to_string(repo.path().join("clusters/prod/apps.yaml")).unwrap();
    repo.write(
        "clusters/prod/apps.yaml",
        &format!(
            "{}---\n{}",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: flux-system\n",
            text.replace("./apps", "./missing")
        ),
    );
    repo.commit("missing");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert_eq!(locations(&plan, "path-not-found"), json!([at("clusters/prod/apps.yaml", 14)]));
}

/// A resource removed from a kustomization.yaml: the head line that took its place (the next
/// entry kept), and when it was the last, the line of the entry before it (wherever head moved it).
#[test]
fn a_removed_resource_points_at_the_line_that_took_its_place() {
    let repo = fleet();
    edit(&repo, "apps/kustomization.yaml", "- namespace.yaml\n", "");
    repo.commit("drop the namespace");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert_eq!(locations(&plan, "protected-kind-deletion"), json!([at("apps/kustomization.yaml", 4)]));

    // The near miss: the last entry removed points at the entry before it; a list emptied, at
    // its key.
    let repo = fleet();
    repo.write(".fluxplan.yaml", "massDeletion:\n  maxObjects: 0\n");
    repo.commit("any deletion is mass deletion");
    edit(&repo, "apps/kustomization.yaml", "- b.yaml\n", "");
    edit(&repo, "apps/kustomization.yaml", "- namespace.yaml\n- a.yaml\n", "- a.yaml\n- namespace.yaml\n");
    repo.commit("reorder and drop b");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert_eq!(locations(&plan, "mass-deletion"), json!([at("apps/kustomization.yaml", 4)]));
}

/// The line of a HelmRelease's values that changes an immutable field of what its chart renders.
#[test]
fn an_immutable_field_changed_by_values_points_at_the_values_line() {
    let _ = helm(4);
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/web.yaml", "web", "./apps/web", "");
    repo.write("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n");
    repo.write("charts/web/values.yaml", "app: web\n");
    repo.write(
        "charts/web/templates/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels: {app: {{ .Values.app }}}\n  \
         template:\n    metadata:\n      labels: {app: {{ .Values.app }}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.26\n",
    );
    let release = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: ./charts/web\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n  values:\n    replicas: 2\n    app: web\n";
    repo.write("apps/web/release.yaml", release);
    repo.commit("base");
    edit(&repo, "apps/web/release.yaml", "    app: web\n", "    app: shop-web\n");
    repo.commit("rename the app label");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert_eq!(locations(&plan, "immutable-field"), json!([at("apps/web/release.yaml", 17)]));
}

/// A plain manifest's immutable field: the changed line inside it, not the field's key.
#[test]
fn an_immutable_field_of_a_manifest_points_at_its_changed_line() {
    let repo = fleet();
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.26\n";
    repo.write("apps/web.yaml", deployment);
    edit(&repo, "apps/kustomization.yaml", "- b.yaml\n", "- b.yaml\n- web.yaml\n");
    repo.commit("web");
    edit(&repo, "apps/web.yaml", "app: web\n  template", "app: shop-web\n  template");
    repo.commit("selector");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert_eq!(locations(&plan, "immutable-field"), json!([at("apps/web.yaml", 9)]));
}

/// A major version bump: the line of the new tag (an image), the chart's version line.
#[test]
fn a_major_bump_points_at_the_new_version() {
    let repo = fleet();
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.26\n";
    repo.write("apps/web.yaml", deployment);
    edit(&repo, "apps/kustomization.yaml", "- b.yaml\n", "- b.yaml\n- web.yaml\n");
    repo.commit("web");
    edit(&repo, "apps/web.yaml", "nginx:1.26", "nginx:2.0");
    repo.commit("nginx 2");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(locations(&plan, "major-bump"), json!([at("apps/web.yaml", 17)]));

    // A tag set by kustomize's `images:` is pointed at where the pull request writes it.
    edit(&repo, "apps/web.yaml", "nginx:2.0", "nginx:3.0");
    repo.commit("nginx 3");
    edit(
        &repo,
        "apps/kustomization.yaml",
        "- web.yaml\n",
        "- web.yaml\nimages:\n- name: nginx\n  newTag: \"4.1\"\n",
    );
    repo.commit("nginx 4 by kustomize");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(locations(&plan, "major-bump"), json!([at("apps/kustomization.yaml", 10)]));
}

/// `check-jsonschema --schemafile` over `report` with the schema written from GitLab's
/// documentation: (passed, what it said).
fn validate_code_quality(report: &std::path::Path) -> (bool, String) {
    let found =
        std::process::Command::new("sh").arg("-c").arg("command -v check-jsonschema").output().unwrap();
    let checker = String::from_utf8_lossy(&found.stdout).trim().to_string();
    assert!(!checker.is_empty(), "this test needs check-jsonschema (scripts/test.sh installs it)");
    let schema = crate::ci_recipes::source_root().join("tests/fixtures/gitlab-code-quality.schema.json");
    let out =
        std::process::Command::new(checker).arg("--schemafile").arg(schema).arg(report).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

/// One `fluxplan plan` prints its plan and writes the Code Quality report: each alert on its
/// lines (or its unit's file), valid against GitLab's format, fingerprints unique and the same
/// on every run. A near miss (a severity GitLab does not know, a `./` path, no line) is refused
/// by the schema.
#[test]
fn the_code_quality_report_validates_against_gitlabs_format() {
    let repo = fleet();
    edit(&repo, "clusters/prod/apps.yaml", "path: ./apps", "path: ./empty");
    repo.commit("empty");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("code-quality.json");
    let flag = report.to_str().unwrap();
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--code-quality", flag]);
    assert_eq!(code, 2, "{plan:#}");
    let (valid, said) = validate_code_quality(&report);
    assert!(valid, "{said}");
    let text = std::fs::read_to_string(&report).unwrap();
    let findings: Value = serde_json::from_str(&text).unwrap();
    let findings = findings.as_array().unwrap();
    let empty = findings.iter().find(|f| f["check_name"] == "fluxplan/empty-render").unwrap();
    assert_eq!(empty["location"], json!({"path": "clusters/prod/apps.yaml", "lines": {"begin": 8}}));
    assert_eq!(empty["severity"], "blocker");
    let alerts = plan["alerts"].as_array().unwrap();
    let located: usize = alerts.iter().map(|a| a["locations"].as_array().map_or(1, |l| l.len().max(1))).sum();
    assert_eq!(findings.len(), located, "one finding per location, one per alert without: {text}");
    let prints: std::collections::BTreeSet<&str> =
        findings.iter().map(|f| f["fingerprint"].as_str().unwrap()).collect();
    assert_eq!(prints.len(), findings.len(), "fingerprints are unique: {text}");
    // The same plan again: the same report.
    let (_, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--code-quality", flag]);
    assert_eq!(std::fs::read_to_string(&report).unwrap(), text);

    // Near misses the schema must refuse.
    let first = findings[0].clone();
    let broken = |change: &dyn Fn(&mut Value)| {
        let mut finding = first.clone();
        change(&mut finding);
        let file = dir.path().join("broken.json");
        std::fs::write(&file, serde_json::to_string(&json!([finding])).unwrap()).unwrap();
        validate_code_quality(&file)
    };
    for (what, change) in [
        (
            "a severity GitLab does not know",
            &(|f: &mut Value| f["severity"] = json!("danger")) as &dyn Fn(&mut Value),
        ),
        ("a ./ path", &|f: &mut Value| f["location"]["path"] = json!("./clusters/prod/apps.yaml")),
        ("no line", &|f: &mut Value| f["location"] = json!({"path": "clusters/prod/apps.yaml"})),
        ("no fingerprint", &|f: &mut Value| {
            f.as_object_mut().unwrap().remove("fingerprint");
        }),
    ] {
        let (valid, said) = broken(change);
        assert!(!valid, "{what} passes: {said}");
    }
    // An object instead of the array GitLab reads.
    let file = dir.path().join("object.json");
    std::fs::write(&file, serde_json::to_string(&first).unwrap()).unwrap();
    assert!(!validate_code_quality(&file).0);
}
