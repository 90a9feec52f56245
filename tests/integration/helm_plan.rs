//! HelmReleases planned as units of their own: their chart rendered with the real, pinned Helm
//! (scripts/fetch-helm.sh, run by the test script), then created, upgraded and uninstalled as
//! helm-controller does.

use crate::fixture::{
    alert_codes, fluxplan_bin, has_alert, helm, plan_cli, plan_json, sorted_changes, sorted_pairs, unit_in,
    Repo,
};
use serde_json::{json, Value};
use std::process::Command;

/// A chart written by hand: a StatefulSet with a claim template (its name from values), a
/// metrics Service, a ConfigMap Helm keeps, a Secret, a pre-upgrade hook and a CRD.
pub(crate) fn write_chart(
    repo: &Repo,
    dir: &str,
    version: &str,
    statefulset: &str,
    with_service: bool,
    with_kept: bool,
) {
    repo.write(&format!("{dir}/Chart.yaml"), &format!("apiVersion: v2\nname: db\nversion: {version}\n"));
    repo.write(&format!("{dir}/values.yaml"), &format!("name: {statefulset}\nreplicas: 1\n"));
    repo.write(
        &format!("{dir}/templates/statefulset.yaml"),
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: {{ .Values.name }}\nspec:\n  replicas: {{ .Values.replicas }}\n  \
         serviceName: {{ .Values.name }}\n  selector:\n    matchLabels: {app: db}\n  template:\n    metadata:\n      labels: {app: db}\n    \
         spec:\n      containers:\n      - name: db\n        image: postgres:17\n  volumeClaimTemplates:\n  - metadata:\n      name: data\n    \
         spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests: {storage: 1Gi}\n",
    );
    repo.write(
        &format!("{dir}/templates/secret.yaml"),
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-auth\nstringData:\n  password: chart-secret-value\n",
    );
    repo.write(
        &format!("{dir}/templates/hook.yaml"),
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: db-migrate\n  annotations:\n    helm.sh/hook: pre-upgrade\nspec:\n  \
         template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: m\n        image: busybox\n",
    );
    repo.write(
        &format!("{dir}/crds/backups.yaml"),
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: backups.db.example.com\nspec:\n  \
         group: db.example.com\n  names: {kind: Backup, plural: backups}\n  scope: Namespaced\n  versions: []\n",
    );
    let service = format!("{dir}/templates/service.yaml");
    if with_service {
        repo.write(
            &service,
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: db-metrics\nspec:\n  ports:\n  - port: 9187\n",
        );
    } else if repo.path().join(&service).exists() {
        repo.remove(&service);
    }
    let kept = format!("{dir}/templates/kept.yaml");
    if with_kept {
        repo.write(
            &kept,
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db-settings\n  annotations:\n    helm.sh/resource-policy: keep\n\
             data:\n  a: b\n",
        );
    } else if repo.path().join(&kept).exists() {
        repo.remove(&kept);
    }
}

/// The HelmRelease `data/db`, from the chart at `charts/db` of this repository.
pub(crate) const RELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: db
  namespace: data
spec:
  interval: 10m
  chart:
    spec:
      chart: ./charts/db
      sourceRef:
        kind: GitRepository
        name: flux-system
        namespace: flux-system
  values:
    replicas: 2
";

/// A cluster whose Kustomization `flux-system/db` applies the HelmRelease `data/db`.
pub(crate) fn fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/db.yaml", "db", "./apps/db", "");
    repo.write("apps/db/release.yaml", RELEASE);
    write_chart(&repo, "charts/db", "1.0.0", "db", true, true);
    repo.commit("base");
    repo
}

/// The release's values change (2 → 3 replicas), committed.
pub(crate) fn scale_up(repo: &Repo) {
    crate::fixture::edit(repo, "apps/db/release.yaml", "replicas: 2", "replicas: 3");
    repo.commit("three replicas");
}

/// A chart bump that renames the StatefulSet and drops a Service: Helm's upgrade deletes them
/// (the StatefulSet's claims orphaned), creates the new one, keeps what `keep` protects, and the
/// StatefulSet's deletion blocks the merge.
#[test]
fn a_chart_bump_plans_the_upgrades_deletions_and_creates_and_blocks() {
    let _ = helm(4);
    let repo = fleet();
    write_chart(&repo, "charts/db", "2.0.0", "db-v2", false, false);
    repo.commit("db 2.0.0");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "blocked: {plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["engine"], "helm");
    assert_eq!(release["parent"], "Kustomization flux-system/db");
    assert_eq!(release["chart"], "db 1.0.0 → 2.0.0");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[
            ("create", "data_db-v2_apps_StatefulSet"),
            ("delete", "data_db_apps_StatefulSet"),
            ("delete", "data_db-metrics__Service"),
            ("skip", "data_db-settings__ConfigMap"),
        ])
    );
    let kept = release["changes"].as_array().unwrap().iter().find(|c| c["action"] == "skip").unwrap();
    assert!(kept["reason"].as_str().unwrap().contains("helm.sh/resource-policy"), "{kept}");
    let notes = release["notes"].to_string();
    assert!(notes.contains("Job data/db-migrate on pre-upgrade"), "the hook is listed apart: {notes}");
    // The renamed StatefulSet's Pods start on new claims: data-loss, the deletion of a protected
    // kind beside it.
    assert!(has_alert(&plan, "danger", "data-loss"), "{:?}", alert_codes(&plan));
    let loss = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "data-loss").unwrap();
    assert_eq!(loss["related_codes"], serde_json::json!(["protected-kind-deletion"]), "{loss:#}");
    assert!(loss["message"].as_str().unwrap().contains("is replaced by StatefulSet data/db-v2"), "{loss:#}");
    // The chart's jump across major versions is listed once, and raises major-bump.
    assert_eq!(
        plan["versions"],
        serde_json::json!([{"kind": "chart", "name": "db", "from": "1.0.0", "to": "2.0.0", "major": true,
            "places": ["clusters/prod: HelmRelease data/db"]}])
    );
    assert!(has_alert(&plan, "warning", "major-bump"), "{:?}", alert_codes(&plan));
    // The Kustomization of the same namespace-less name is a unit of its own, unchanged.
    assert!(unit_in(&plan, "Kustomization", "flux-system/db")["changes"].as_array().unwrap().is_empty());

    // The comment groups the release's changes under it, its chart change in its heading.
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert!(markdown.contains("`HelmRelease data/db` · db 1.0.0 → 2.0.0"), "{markdown}");
    assert!(
        markdown.contains("<b>HelmRelease data/db</b> (clusters/prod) — db 1.0.0 → 2.0.0;"),
        "{markdown}"
    );
    assert!(!markdown.contains("chart-secret-value"), "a chart's Secret data never shows");
}

/// Values changed in the HelmRelease: the release's objects are updated with a diff.
#[test]
fn a_values_change_updates_the_releases_objects() {
    let _ = helm(4);
    let repo = fleet();
    scale_up(&repo);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["chart"], "db 1.0.0");
    assert_eq!(sorted_changes(release), sorted_pairs(&[("update", "data_db_apps_StatefulSet")]));
    let diff = release["changes"][0]["diff"].as_str().unwrap();
    assert!(diff.contains("-  replicas: 2") && diff.contains("+  replicas: 3"), "{diff}");
}

/// A HelmRelease removed: its finalizer uninstalls the release. Offline, what that deletes is
/// the base render's objects, but for what `keep` keeps and the chart's CRDs.
#[test]
fn a_removed_release_is_uninstalled_and_its_objects_listed_offline() {
    let _ = helm(4);
    let repo = fleet();
    repo.remove("apps/db/release.yaml");
    repo.write(
        "apps/db/placeholder.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n  namespace: data\n",
    );
    repo.commit("remove the release");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "removed");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[
            ("delete", "data_db-auth__Secret"),
            ("delete", "data_db-metrics__Service"),
            ("delete", "data_db_apps_StatefulSet"),
            ("skip", "_backups.db.example.com_apiextensions.k8s.io_CustomResourceDefinition"),
            ("skip", "data_db-settings__ConfigMap"),
        ])
    );
    let parent = unit_in(&plan, "Kustomization", "flux-system/db");
    let deletion = parent["changes"].as_array().unwrap().iter().find(|c| c["kind"] == "HelmRelease").unwrap();
    assert!(deletion["reason"].as_str().unwrap().contains("listed under HelmRelease data/db"), "{deletion}");
}

/// A chart fluxplan cannot have is `external` with a warning, and what names it is planned: a
/// changed HelmRelease never reads "no changes".
#[test]
fn a_chart_that_cannot_be_had_is_external_with_a_warning() {
    let _ = helm(4);
    let repo = fleet();
    let from_repository = RELEASE.replace("chart: ./charts/db", "chart: db\n      version: 1.x").replace(
        "kind: GitRepository\n        name: flux-system",
        "kind: HelmRepository\n        name: charts",
    );
    repo.write("apps/db/release.yaml", &from_repository);
    repo.commit("from a Helm repository");
    scale_up(&repo);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "changes, never no-changes: {plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external");
    assert!(has_alert(&plan, "warning", "chart-unavailable"), "{:?}", alert_codes(&plan));

    // Given by hand, the same chart renders: as a directory, and as the archive `helm package` makes.
    let dir = repo.path().join("charts/db");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[&format!("--chart=data/db={}", dir.display())]);
    let by_dir = unit_in(&plan, "HelmRelease", "data/db").clone();
    assert!(
        has_alert(&plan, "info", "source-pinned"),
        "the plan says the chart is pinned: {:?}",
        alert_codes(&plan)
    );
    assert_eq!(sorted_changes(&by_dir), sorted_pairs(&[("update", "data_db_apps_StatefulSet")]));
    let packaged = tempfile::tempdir().unwrap();
    let out = Command::new(helm(4).program())
        .arg("package")
        .arg(&dir)
        .arg("-d")
        .arg(packaged.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let archive = packaged.path().join("db-1.0.0.tgz");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[&format!("--chart=data/db={}", archive.display())]);
    assert_eq!(unit_in(&plan, "HelmRelease", "data/db")["changes"], by_dir["changes"]);
}

/// What `fluxplan build` shows of a release is what `helm template` prints for the same chart
/// and values, with helm-controller's labels, the release's namespace, and Secret data masked.
#[test]
fn built_objects_are_what_helm_template_prints() {
    let repo = fleet();
    let unit =
        built_as_helm_prints(&repo, &[], &repo.path().join("charts/db"), "replicas: 2\n", ("db", "data"));
    assert_eq!(unit["helm"]["hooks"], json!(["Job data/db-migrate on pre-upgrade"]));
}

/// `fluxplan build --format json` of `repo` with `extra` flags: its first cluster's HelmRelease
/// unit.
pub(crate) fn built_release(repo: &Repo, extra: &[&str]) -> Value {
    let out = Command::new(fluxplan_bin())
        .args(["build", "--no-cache", "--format", "json", "--repo"])
        .arg(repo.path())
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let render: Value = serde_json::from_slice(&out.stdout).unwrap();
    render["clusters"][0]["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == "HelmRelease")
        .unwrap_or_else(|| panic!("no HelmRelease unit: {render:#}"))
        .clone()
}
/// Asserts that what `fluxplan build` (with `extra` flags) shows of the one HelmRelease of `repo`
/// is what `helm template` prints for `chart` (a directory or an archive) with `values`, as
/// `release` in `namespace`, with the controller's labels and the release's namespace, Secret
/// data masked. Returns the release's unit as built.
pub(crate) fn built_as_helm_prints(
    repo: &Repo,
    extra: &[&str],
    chart: &std::path::Path,
    values: &str,
    (release, namespace): (&str, &str),
) -> Value {
    let unit = built_release(repo, extra);
    assert_eq!(unit["status"], "rendered", "{unit:#}");
    let mut built: Vec<Value> =
        unit["objects"].as_array().unwrap().iter().map(|o| o["manifest"].clone()).collect();
    let values_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(values_file.path(), values).unwrap();
    let printed = Command::new(helm(4).program())
        .args(["template", release])
        .arg(chart)
        .args(["--namespace", namespace, "--include-crds", "--values"])
        .arg(values_file.path())
        .output()
        .unwrap();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let printed = fluxplan::render::helm::split_release(&String::from_utf8(printed.stdout).unwrap()).unwrap();
    let mut expected: Vec<Value> = printed.crds;
    for mut object in printed.objects {
        let meta = object["metadata"].as_object_mut().unwrap();
        meta.entry("namespace").or_insert(json!(namespace));
        let labels = meta.entry("labels").or_insert(json!({}));
        labels["helm.toolkit.fluxcd.io/name"] = json!(release);
        labels["helm.toolkit.fluxcd.io/namespace"] = json!(namespace);
        expected.push(object);
    }
    let key = |o: &Value| format!("{}/{}", o["kind"], o["metadata"]["name"]);
    built.sort_by_key(key);
    expected.sort_by_key(key);
    // Secret data is masked in what fluxplan shows: the same keys, no value.
    for (built, expected) in built.iter().zip(expected.iter_mut()).filter(|(b, _)| b["kind"] == "Secret") {
        for field in ["data", "stringData"] {
            if let Some(values) = expected[field].as_object() {
                for (key, value) in values {
                    assert_ne!(&built[field][key], value, "Secret {field}.{key} shows");
                }
                expected[field] = built[field].clone();
            }
        }
    }
    assert_eq!(built, expected);
    unit
}

/// `valuesFrom` in order: a ConfigMap of the render (its whole document), a Secret of the cluster
/// at a `targetPath`, then `spec.values`. What the Secret gives the chart never shows: not in the
/// plan, its diffs, nor the render.
#[test]
fn values_from_config_maps_and_secrets_with_target_paths_and_secrets_masked() {
    let helm = helm(4);
    let repo = fleet();
    repo.write(
        "charts/db/templates/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db-config\ndata:\n  password: {{ .Values.auth.password | quote }}\n  \
         encoded: {{ .Values.auth.password | b64enc | quote }}\n  tier: {{ .Values.tier | quote }}\n  port: {{ .Values.port | quote }}\n  \
         double: {{ .Values.auth.password | b64enc | b64enc | quote }}\n  spaced: {{ .Values.auth.password | splitList \"\" | join \" \" | quote }}\n\
         ---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: named-{{ .Values.auth.password | lower }}\n",
    );
    repo.write(
        "charts/db/values.yaml",
        "name: db\nreplicas: 1\nauth: {password: none}\ntier: free\nport: 1\n",
    );
    repo.write(
        "apps/db/values.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db-values\n  namespace: data\ndata:\n  values.yaml: |\n    tier: gold\n    port: 5432\n",
    );
    repo.commit("values");
    insert_before_values(
        &repo,
        "  valuesFrom:\n  - kind: ConfigMap\n    name: db-values\n  - kind: Secret\n    name: db-auth\n    valuesKey: password\n    \
         targetPath: auth.password\n  values:\n",
    );
    repo.commit("values from");
    let snapshot = tempfile::NamedTempFile::new().unwrap();
    // "s3cr3t-from-the-cluster" in base64.
    std::fs::write(
        snapshot.path(),
        "kind: ClusterSnapshot\nsecrets:\n- metadata: {name: db-auth, namespace: data}\n  data: {password: czNjcjN0LWZyb20tdGhlLWNsdXN0ZXI=}\n",
    )
    .unwrap();
    let snapshot_arg = ["--cluster-snapshot", snapshot.path().to_str().unwrap()];
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &snapshot_arg);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    let config = release["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "db-config")
        .unwrap_or_else(|| panic!("{release:#}"));
    let diff = config["diff"].as_str().unwrap();
    assert!(diff.contains("+  tier: gold") && diff.contains("+  port: '5432'"), "{diff}");
    // Shown as a render that never saw the Secret's value renders it: whatever the templates do.
    assert!(diff.contains("password: (masked)") && diff.contains("encoded: KG1hc2tlZCk="), "{diff}");
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &snapshot_arg);
    let build = Command::new(fluxplan_bin())
        .args(["build", "--no-cache", "--format", "yaml", "--cluster-snapshot"])
        .arg(snapshot.path())
        .arg("--repo")
        .arg(repo.path())
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
    let built = String::from_utf8_lossy(&build.stdout);
    assert!(built.contains("password: (masked)"), "{built}");
    use base64::Engine as _;
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let secret = "s3cr3t-from-the-cluster";
    let forms = [
        secret.to_string(),
        b64(secret),
        b64(&b64(secret)),
        secret.chars().map(String::from).collect::<Vec<_>>().join(" "),
    ];
    for output in [plan.to_string(), markdown, built.into_owned()] {
        for form in &forms {
            assert!(!output.contains(form.as_str()), "the Secret's value leaked as {form}: {output}");
        }
    }
    // An object named from the Secret's value: listed by the masked name, planned by the real one.
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert!(release["changes"].to_string().contains("named-(masked)"), "{release:#}");

    // Offline, the Secret is the cluster's: the release is external with the reason, never guessed.
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external");
    assert!(release["notes"].to_string().contains("Secret data/db-auth"), "{release}");
    let _ = helm;
}

/// A pull request that branches on a Secret's value (an object, a failure, a label from its first
/// letter) learns nothing: the plan is the same whatever the Secret holds, because the chart is
/// only ever rendered with the Secret's values masked.
#[test]
fn a_plan_is_the_same_whatever_a_secret_holds() {
    let _ = helm(4);
    let repo = fleet();
    insert_before_values(
        &repo,
        "  valuesFrom:\n  - kind: Secret\n    name: db-auth\n    valuesKey: password\n    targetPath: auth.password\n  values:\n",
    );
    repo.commit("values from a Secret");
    repo.write(
        "charts/db/templates/guess.yaml",
        "{{- if hasPrefix \"h\" .Values.auth.password }}\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
         metadata:\n  name: guessed\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n\
         subjects: [{kind: ServiceAccount, name: default, namespace: data}]\n{{- end }}\n---\napiVersion: v1\nkind: ConfigMap\n\
         metadata:\n  name: first-letter\n  labels:\n    first: {{ .Values.auth.password | trunc 1 | quote }}\n    \
         gate: {{ .Values.auth.gate | default \"shut\" | quote }}\n\
         {{- if hasPrefix \"hu\" .Values.auth.password }}{{ fail \"guessed\" }}{{ end }}\n",
    );
    repo.commit("guess");
    let plan_with = |password: &str| {
        use base64::Engine as _;
        let snapshot = tempfile::NamedTempFile::new().unwrap();
        let encoded = base64::engine::general_purpose::STANDARD.encode(password);
        std::fs::write(
            snapshot.path(),
            format!("kind: ClusterSnapshot\nsecrets:\n- metadata: {{name: db-auth, namespace: data}}\n  data: {{password: {encoded}}}\n"),
        )
        .unwrap();
        let (mut plan, code) =
            plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", snapshot.path().to_str().unwrap()]);
        plan.as_object_mut()
            .unwrap()
            .retain(|key, _| !key.contains("duration") && !key.contains("elapsed") && key != "timings");
        (plan, code)
    };
    let (guessed, code) = plan_with("hunter2");
    let (missed, missed_code) = plan_with("xylophone");
    // Nor is the value parsed: a comma in it sets nothing else.
    let (parsed, parsed_code) = plan_with("x,auth.gate=open");
    assert_eq!((parsed_code, &parsed), (missed_code, &missed), "a Secret's value shaped the values");
    let release = unit_in(&guessed, "HelmRelease", "data/db");
    assert_eq!(release["status"], "changed", "{release:#}");
    assert!(release["changes"].to_string().contains("first-letter"), "{release:#}");
    assert_eq!((code, &guessed), (missed_code, &missed), "the plan depends on the Secret's value");
}

/// A snapshot file holds the Secrets the cluster's Flux objects read when it was taken, not every
/// Secret: one a pull request names that the file lacks may exist, so the release is external
/// (only the cluster knows), never "does not exist: helm-controller fails the release".
#[test]
fn a_secret_a_snapshot_file_lacks_is_the_clusters_not_missing() {
    let _ = helm(4);
    let repo = fleet();
    insert_before_values(
        &repo,
        "  valuesFrom:\n  - kind: Secret\n    name: db-auth\n    valuesKey: password\n    targetPath: auth.password\n  values:\n",
    );
    repo.commit("values from a Secret");
    let plan_with = |secrets: &str| {
        let snapshot = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(snapshot.path(), format!("kind: ClusterSnapshot\nsecrets:{secrets}\n")).unwrap();
        plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", snapshot.path().to_str().unwrap()])
    };
    let (plan, code) = plan_with(" []");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external", "{release:#}");
    assert!(release["notes"].to_string().contains("only the cluster holds"), "{release:#}");
    assert!(!has_alert(&plan, "danger", "build-failed"), "{:#}", plan["alerts"]);
    assert_eq!(code, 1);
    // The near miss: the Secret in the file is read (masked).
    let (plan, _) =
        plan_with("\n- metadata: {name: db-auth, namespace: data}\n  data: {password: aHVudGVyMg==}");
    assert_eq!(unit_in(&plan, "HelmRelease", "data/db")["status"], "unchanged", "rendered: {plan:#}");
}

/// `postRenderers` run through kustomize after the chart renders, before the controller's
/// labels: an inline patch with its target, and an image override.
#[test]
fn post_renderers_patch_the_release_as_helm_controller_does() {
    let _ = helm(4);
    let repo = fleet();
    insert_before_values(
        &repo,
        "  postRenderers:\n  - kustomize:\n      patches:\n      - target: {kind: StatefulSet, name: db}\n        patch: |\n          \
         - op: replace\n            path: /spec/replicas\n            value: 5\n      images:\n      - name: postgres\n        newTag: \"18\"\n  values:\n",
    );
    repo.commit("post-render");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(sorted_changes(release), sorted_pairs(&[("update", "data_db_apps_StatefulSet")]));
    let diff = release["changes"][0]["diff"].as_str().unwrap();
    for line in
        ["-  replicas: 2", "+  replicas: 5", "-      - image: postgres:17", "+      - image: postgres:18"]
    {
        assert!(diff.contains(line), "{line} not in {diff}");
    }
    // The controller's labels come after: still on the patched object.
    assert!(!diff.contains("helm.toolkit.fluxcd.io/name"), "labels unchanged: {diff}");
}

/// The release's spec with `fields` (ending in `  values:\n`) written in place of its
/// `  values:` line.
pub(crate) fn insert_before_values(repo: &Repo, fields: &str) {
    crate::fixture::edit(repo, "apps/db/release.yaml", "  values:\n", fields);
}

/// A post-renderer dropping the `helm.sh/hook` annotation of the chart's object KIND/NAME,
/// committed.
fn unhook(repo: &Repo, kind: &str, name: &str) {
    insert_before_values(
        repo,
        &format!(
            "  postRenderers:\n  - kustomize:\n      patches:\n      - target: {{kind: {kind}, name: {name}}}\n        \
             patch: |\n          - op: remove\n            path: /metadata/annotations/helm.sh~1hook\n  values:\n"
        ),
    );
    repo.commit(&format!("unhook {kind} {name}"));
}

/// Helm 4 post-renders a release's hooks with its manifest and sorts them after: a patch that
/// drops the hook annotation makes the Job part of the release. Helm 3 post-renders the manifest
/// only, so there the Job stays a hook.
#[test]
fn helm_4_post_renders_hooks_and_helm_3_does_not() {
    let _ = (helm(4), helm(3));
    let repo = fleet();
    unhook(&repo, "Job", "db-migrate");
    let job = "data_db-migrate_batch_Job";
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(sorted_changes(release), sorted_pairs(&[("create", job)]), "{release:#}");
    assert!(!release.to_string().contains("on pre-upgrade"), "no hook left: {release:#}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.yaml"), "kind: ClusterSnapshot\n").unwrap();
    let file = dir.path().join("clusters.yaml");
    std::fs::write(&file, "clusters:\n  clusters/prod: {snapshot: empty.yaml, helmVersion: 3}\n").unwrap();
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--clusters", file.to_str().unwrap()]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "unchanged", "the Job is still a hook: {release:#}");
}

/// Helm 4 post-renders a chart's test hooks too: a patch that drops `helm.sh/hook: test` makes
/// the Pod part of the release, and the plan shows it created (a remote chart's test Pod can be
/// turned into anything this way).
#[test]
fn a_post_renderer_that_unhooks_a_test_pod_shows_the_pod() {
    let _ = helm(4);
    let repo = fleet();
    repo.write(
        "charts/db/templates/tests/smoke.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: db-smoke\n  annotations:\n    helm.sh/hook: test\nspec:\n  \
         containers:\n  - name: smoke\n    image: busybox\n",
    );
    repo.commit("a test hook");
    unhook(&repo, "Pod", "db-smoke");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(sorted_changes(release), sorted_pairs(&[("create", "data_db-smoke__Pod")]), "{release:#}");
}

/// With Helm's storage read, the upgrade starts from the release the cluster has: what it holds
/// and the new chart no longer renders is deleted (here an object the base render never had),
/// and a release Helm left failed is a warning.
#[test]
fn the_upgrade_starts_from_the_release_in_helms_storage() {
    let _ = helm(4);
    let repo = fleet();
    scale_up(&repo);
    let snapshot = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        snapshot.path(),
        "kind: ClusterSnapshot\nhelmReleases:\n- {name: db, namespace: data, storageNamespace: data, version: 4, \
         status: failed, objects: [data_db_apps_StatefulSet, data_db-metrics__Service, data_db-auth__Secret, \
         data_old-job_batch_Job], kept: [data_db-settings__ConfigMap]}\n",
    )
    .unwrap();
    let (plan, _) =
        plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", snapshot.path().to_str().unwrap()]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["release_status"], "failed");
    assert_eq!(release["inventory_source"], "cluster");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[
            // The chart's CRDs are not in the stored manifest; an upgrade (upgrade.crds: Skip by
            // default) leaves them alone.
            ("skip", "_backups.db.example.com_apiextensions.k8s.io_CustomResourceDefinition"),
            ("delete", "data_old-job_batch_Job"),
            ("update", "data_db_apps_StatefulSet"),
        ])
    );
    let crd = release["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "CustomResourceDefinition")
        .unwrap();
    assert!(crd["reason"].as_str().unwrap().contains("upgrade.crds is Skip"), "{crd}");
    assert!(has_alert(&plan, "warning", "helm-release-stuck"), "{:?}", alert_codes(&plan));

    // An installed release renders as an upgrade (`.Release.IsUpgrade`), one Helm has no record
    // of as an install.
    repo.write(
        "charts/db/templates/mode.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mode\ndata:\n  upgrade: {{ .Release.IsUpgrade | quote }}\n",
    );
    repo.commit("mode");
    let mode = |extra: &[&str]| {
        let out = Command::new(fluxplan_bin())
            .args(["build", "--no-cache", "--format", "json", "--repo"])
            .arg(repo.path())
            .args(extra)
            .output()
            .unwrap();
        let render: Value = serde_json::from_slice(&out.stdout).unwrap();
        let text = render.to_string();
        ["\"upgrade\":\"true\"", "\"upgrade\":\"false\""]
            .iter()
            .find(|m| text.contains(*m))
            .map(|m| m.to_string())
    };
    assert_eq!(
        mode(&["--cluster-snapshot", snapshot.path().to_str().unwrap()]).as_deref(),
        Some("\"upgrade\":\"true\"")
    );
    assert_eq!(mode(&[]).as_deref(), Some("\"upgrade\":\"false\""));
}

/// Offline, a plan takes its base revision for what is installed: a release the base has renders
/// as an upgrade on both sides (so `.Release.IsUpgrade` changes nothing by itself), and a release
/// the pull request adds renders as an install.
#[test]
fn offline_the_base_revisions_releases_render_as_upgrades() {
    let _ = helm(4);
    let repo = fleet();
    repo.write(
        "charts/db/templates/mode.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  \
         name: {{ .Release.Name }}-{{ if .Release.IsUpgrade }}upgrade{{ else }}install{{ end }}\ndata:\n  \
         replicas: {{ .Values.replicas | quote }}\n",
    );
    repo.commit("mode");
    scale_up(&repo);
    repo.write("apps/db/second.yaml", &RELEASE.replace("name: db\n  namespace", "name: db2\n  namespace"));
    repo.commit("a second release");
    let (plan, _) = plan_json(&repo, "HEAD~2", "HEAD", &[]);
    let modes = |release: &str| -> Vec<(String, String)> {
        let unit = unit_in(&plan, "HelmRelease", release);
        sorted_changes(unit)
            .into_iter()
            .filter(|(_, id)| id.ends_with("install__ConfigMap") || id.ends_with("upgrade__ConfigMap"))
            .collect()
    };
    assert_eq!(modes("data/db"), sorted_pairs(&[("update", "data_db-upgrade__ConfigMap")]));
    assert_eq!(modes("data/db2"), sorted_pairs(&[("create", "data_db2-install__ConfigMap")]));
}

/// A clusters file names the Helm each cluster's helm-controller runs (3 for Flux 2.7 and older)
/// and its Kubernetes version: charts see them, as they would there.
#[test]
fn a_clusters_file_chooses_each_clusters_helm_and_kubernetes_version() {
    let _ = (helm(4), helm(3));
    let repo = fleet();
    repo.write(
        "charts/db/templates/capabilities.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: helm-{{ .Capabilities.HelmVersion.Version | replace \".\" \"-\" }}-kube-{{ .Capabilities.KubeVersion.Minor }}\n",
    );
    repo.commit("capabilities");
    scale_up(&repo);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.yaml"), "kind: ClusterSnapshot\n").unwrap();
    let file = dir.path().join("clusters.yaml");
    std::fs::write(
        &file,
        "clusters:\n  clusters/prod: {snapshot: empty.yaml, helmVersion: 3, kubeVersion: v1.31.0}\n",
    )
    .unwrap();
    let (plan, _) = plan_json(&repo, "HEAD~2", "HEAD", &["--clusters", file.to_str().unwrap()]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    let ids: Vec<String> = release["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert!(ids.contains(&"data_helm-v3-17-2-kube-31__ConfigMap".to_string()), "{ids:?}");
    // Without it: Helm 4 and Helm's own default Kubernetes.
    let (plan, _) = plan_json(&repo, "HEAD~2", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert!(release["changes"].to_string().contains("data_helm-v4-1-4-kube-"), "{release}");
}

/// A live cluster (the fake Kubernetes API) whose Kustomization `flux-system/db` applies
/// `release`, and which holds the Secret `data/db-auth` ("live-s3cr3t-value").
fn live_cluster(release: Value) -> crate::fake_kube::FakeKube {
    let mut live_release = release;
    live_release["metadata"]["labels"] = json!({"kustomize.toolkit.fluxcd.io/name": "db", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"});
    crate::fake_kube::FakeKube::start(vec![
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "helmreleases.helm.toolkit.fluxcd.io"},
            "spec": {"group": "helm.toolkit.fluxcd.io", "scope": "Namespaced",
                "names": {"kind": "HelmRelease", "plural": "helmreleases", "singular": "helmrelease"},
                "versions": [{"name": "v2", "served": true, "storage": true}]}}),
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "db", "namespace": "flux-system"},
            "spec": {"interval": "10m", "path": "./apps/db", "prune": true, "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
            "status": {"inventory": {"entries": [{"id": "data_db_helm.toolkit.fluxcd.io_HelmRelease", "v": "v2"}]}}}),
        live_release,
        // "live-s3cr3t-value" in base64.
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-auth", "namespace": "data"},
            "data": {"password": "bGl2ZS1zM2NyM3QtdmFsdWU="}}),
    ])
}

/// `spec.valuesFrom` of the Secret `db-auth`'s password, before `values:`.
const SECRET_PASSWORD: &str =
    "  valuesFrom:\n  - kind: Secret\n    name: db-auth\n    valuesKey: password\n    targetPath: password\n  values:\n";

/// The HelmRelease of `repo` as committed.
fn release_object(repo: &Repo) -> Value {
    serde_norway::from_str(&std::fs::read_to_string(repo.path().join("apps/db/release.yaml")).unwrap())
        .unwrap()
}

/// `fluxplan plan --kube --read-secrets` of the last commit against `fake`, as JSON text.
fn plan_live(repo: &Repo, fake: &crate::fake_kube::FakeKube) -> String {
    plan_live_with(repo, fake, &[])
}

/// `plan_live` with `extra` flags.
fn plan_live_with(repo: &Repo, fake: &crate::fake_kube::FakeKube, extra: &[&str]) -> String {
    plan_kube(repo, fake, &[&["--read-secrets"], extra].concat())
}

/// `fluxplan plan --kube` of the last commit against `fake`, with `flags`, as JSON text.
pub(crate) fn plan_kube(repo: &Repo, fake: &crate::fake_kube::FakeKube, flags: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(fluxplan_bin())
        .args([
            "plan",
            "--no-cache",
            "--kube",
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
            "--format",
            "json",
            "--repo",
        ])
        .arg(repo.path())
        .args(flags)
        .env("KUBECONFIG", fake.kubeconfig(dir.path()))
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// The operator may bound the namespaces whose Secrets fluxplan reads (`--secret-namespaces`):
/// a Secret outside them is not asked for, even one a live HelmRelease takes values from, and the
/// release says why. The near miss, the same cluster without the bound, reads it:
/// a_live_cluster_gives_secret_values_and_its_kubernetes_version.
#[test]
fn secrets_outside_the_allowed_namespaces_are_never_read() {
    let _ = helm(4);
    let repo = fleet();
    insert_before_values(&repo, SECRET_PASSWORD);
    repo.commit("values from a Secret");
    scale_up(&repo);
    let release = release_object(&repo);
    let fake = live_cluster(release);
    let text = plan_live_with(&repo, &fake, &["--secret-namespaces", "flux-system,apps"]);
    let plan: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external", "{release:#}");
    assert!(release["notes"].to_string().contains("--secret-namespaces flux-system,apps"), "{release:#}");
    let asked = fake.requests();
    assert!(asked.iter().all(|(_, path)| !path.contains("/namespaces/data/secrets")), "read: {asked:?}");
}

/// A pull request may name any Secret in `valuesFrom`: only those the cluster's own Flux objects
/// already read are read for it. The live HelmRelease reads none: the Secret is not even asked for.
#[test]
fn a_pull_request_cannot_read_a_secret_no_live_flux_object_reads() {
    let _ = helm(4);
    let repo = fleet();
    let release = release_object(&repo);
    insert_before_values(&repo, SECRET_PASSWORD);
    repo.commit("values from a Secret");
    let fake = live_cluster(release);
    let text = plan_live(&repo, &fake);
    let plan: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external", "{release:#}");
    assert!(
        release["notes"].to_string().contains("no HelmRelease in the cluster takes values from it"),
        "{release:#}"
    );
    let asked = fake.requests();
    assert!(asked.iter().all(|(_, path)| !path.contains("secrets/db-auth")), "read: {asked:?}");
    // The near miss, a Secret the live HelmRelease reads: a_live_cluster_gives_secret_values_and_its_kubernetes_version.
}

/// Read live (`--kube --read-secrets`, GET only): the Secret a live HelmRelease takes values
/// from, and the server's version for `.Capabilities`. The Secret's value never shows.
#[test]
fn a_live_cluster_gives_secret_values_and_its_kubernetes_version() {
    let _ = helm(4);
    let repo = fleet();
    repo.write(
        "charts/db/templates/auth.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: auth-kube-{{ .Capabilities.KubeVersion.Minor }}\ndata:\n  \
         password: {{ .Values.password | quote }}\n  replicas: {{ .Values.replicas | quote }}\n",
    );
    insert_before_values(&repo, SECRET_PASSWORD);
    repo.commit("values from a Secret");
    scale_up(&repo);
    let release = release_object(&repo);
    let fake = live_cluster(release);
    let text = plan_live(&repo, &fake);
    assert!(
        !text.contains("live-s3cr3t-value") && !text.contains("bGl2ZS1zM2NyM3QtdmFsdWU="),
        "leaked: {text}"
    );
    let plan: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let release = unit_in(&plan, "HelmRelease", "data/db");
    let auth = release["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "ConfigMap" && c["name"].as_str().unwrap().starts_with("auth"))
        .unwrap_or_else(|| panic!("{release:#}"));
    assert_eq!(auth["name"], "auth-kube-33", "the server's version: {auth}");
    // Helm's storage was read and holds no such release: an install, every object created.
    assert_eq!(auth["action"], "create", "{auth}");
    assert!(fake.requests().iter().all(|(method, _)| method == "GET"));
    // The live HelmRelease reads it, so it is read for the pull request.
    assert!(
        fake.requests().iter().any(|(_, path)| path.contains("secrets/db-auth")),
        "{:?}",
        fake.requests()
    );
}

/// A chart an ArtifactGenerator builds from this repository (Flux 2.7's ExternalArtifact
/// `chartRef`): rendered from the artifact the generator makes at each revision.
#[test]
fn a_chart_from_an_artifact_generator_is_planned() {
    let _ = helm(4);
    let repo = fleet();
    repo.write(
        "clusters/prod/charts-generator.yaml",
        "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata:\n  name: charts\n  namespace: flux-system\n\
         spec:\n  sources:\n    - alias: repo\n      kind: GitRepository\n      name: flux-system\n  artifacts:\n    - name: db-chart\n      \
         copy:\n        - from: \"@repo/charts/db/**\"\n          to: \"@artifact/db/\"\n",
    );
    let by_artifact = RELEASE.replace(
        "  chart:\n    spec:\n      chart: ./charts/db\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n",
        "  chartRef:\n    kind: ExternalArtifact\n    name: db-chart\n    namespace: flux-system\n",
    );
    assert_ne!(by_artifact, RELEASE);
    repo.write("apps/db/release.yaml", &by_artifact);
    repo.commit("the chart as an artifact");
    write_chart(&repo, "charts/db", "2.0.0", "db-v2", true, true);
    repo.commit("db 2.0.0");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["chart"], "db 1.0.0 → 2.0.0", "{release:#}");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[("create", "data_db-v2_apps_StatefulSet"), ("delete", "data_db_apps_StatefulSet")])
    );
}

/// helm-controller loads a chart from an ExternalArtifact with Helm's archive loader (source-watcher
/// packs the generated tree as an archive): a template the chart's `.helmignore` lists and a
/// dot-file template are installed, so they are planned. The near miss: the same chart from the
/// GitRepository is a directory (source-controller's directory loader), where both stay out. A
/// chart copied to the artifact's root is refused by the controller's loader, and so here.
#[test]
fn a_generated_chart_is_loaded_as_the_archive_it_is() {
    let _ = helm(4);
    let repo = fleet();
    repo.write("charts/db/.helmignore", "templates/listed.yaml\n");
    repo.write("charts/db/templates/listed.yaml", &crate::helm_archive::binding("listed"));
    repo.write("charts/db/templates/.dot.yaml", &crate::helm_archive::binding("dot"));
    repo.commit("templates only an archive loader reads");
    let bindings = |unit: &Value| -> Vec<String> {
        let mut names: Vec<String> = unit["objects"]
            .as_array()
            .unwrap_or_else(|| panic!("{unit:#}"))
            .iter()
            .filter(|o| o["manifest"]["kind"] == "ClusterRoleBinding")
            .map(|o| o["manifest"]["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    assert_eq!(bindings(&built_release(&repo, &[])), Vec::<String>::new(), "a directory chart");

    let generator = |to: &str| {
        format!(
            "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata:\n  name: charts\n  namespace: flux-system\n\
             spec:\n  sources:\n    - alias: repo\n      kind: GitRepository\n      name: flux-system\n  artifacts:\n    - name: db-chart\n      \
             copy:\n        - from: \"@repo/charts/db/**\"\n          to: \"{to}\"\n"
        )
    };
    repo.write("clusters/prod/charts-generator.yaml", &generator("@artifact/db/"));
    let by_artifact = RELEASE.replace(
        "  chart:\n    spec:\n      chart: ./charts/db\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n",
        "  chartRef:\n    kind: ExternalArtifact\n    name: db-chart\n    namespace: flux-system\n",
    );
    repo.write("apps/db/release.yaml", &by_artifact);
    repo.commit("the chart as an artifact");
    assert_eq!(bindings(&built_release(&repo, &[])), ["dot", "listed"]);
    // The oracle: the chart directory packed as an artifact by GNU tar, and `helm template` of it.
    let packed = tempfile::tempdir().unwrap();
    let archive = packed.path().join("artifact.tgz");
    let tar = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(repo.path().join("charts"))
        .arg("db")
        .status()
        .unwrap();
    assert!(tar.success());
    let printed = crate::helm_archive::helm_prints(&archive);
    assert!(
        printed.contains(&"ClusterRoleBinding/dot".to_string())
            && printed.contains(&"ClusterRoleBinding/listed".to_string()),
        "{printed:?}"
    );

    repo.write("clusters/prod/charts-generator.yaml", &generator("@artifact/"));
    repo.commit("the chart at the artifact's root");
    let out = Command::new(fluxplan_bin())
        .args(["build", "--no-cache", "--format", "json", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("outside the chart's directory") && text.contains("@artifact/db-chart/"), "{text}");
}

/// The cluster runs another chart version than base and head both render (the source moved
/// outside Git: a range resolved anew against an index, a tag pushed again): the release says
/// helm-controller upgrades at its next reconcile whatever the merge, and that this upgrade is
/// not among the changes. The near miss: the cluster runs the version both sides render.
#[test]
fn a_chart_version_moved_outside_git_is_said() {
    let _ = helm(4);
    let repo = fleet();
    scale_up(&repo);
    let release = release_object(&repo);
    let note_with_installed = |version: &str| -> String {
        let mut live = release.clone();
        live["status"] = json!({"storageNamespace": "data", "history": [
            {"name": "db", "namespace": "data", "version": 3, "chartName": "db", "chartVersion": version}]});
        let snapshot = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(snapshot.path(), json!({"kind": "ClusterSnapshot", "objects": [live]}).to_string())
            .unwrap();
        let (plan, _) =
            plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", snapshot.path().to_str().unwrap()]);
        unit_in(&plan, "HelmRelease", "data/db")["notes"].to_string()
    };
    let notes = note_with_installed("0.9.0");
    assert!(
        notes.contains("the cluster runs chart db 0.9.0, and its source gives db 1.0.0 now")
            && notes.contains("not among this plan's changes"),
        "{notes}"
    );
    assert!(!note_with_installed("1.0.0").contains("the cluster runs chart"));
    assert!(!note_with_installed("1.0.0+0123456789ab").contains("the cluster runs chart"));
}

/// With its drift detection on, helm-controller puts back what was changed by hand on every
/// reconcile: a live object that differs from the release shows as drift the merge reverts,
/// without the paths its `ignore` rules name. Without it (or with `warn`), helm-controller leaves
/// drift alone, and none is shown.
#[test]
fn drift_shows_where_helm_controllers_drift_detection_puts_it_back() {
    let _ = helm(4);
    let repo = fleet();
    insert_before_values(
        &repo,
        "  driftDetection:\n    mode: enabled\n    ignore:\n    - paths: [/spec/replicas]\n      target: {kind: StatefulSet}\n  values:\n",
    );
    repo.commit("drift detection");
    let rendered = repo.render(Some("HEAD"));
    let mut live = rendered
        .object("clusters/prod", "data_db_apps_StatefulSet")
        .expect("rendered")
        .object
        .as_ref()
        .clone();
    live["spec"]["replicas"] = json!(9);
    live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("postgres:16-by-hand");
    let snapshot = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(snapshot.path(), json!({"kind": "ClusterSnapshot", "objects": [live]}).to_string())
        .unwrap();
    scale_up(&repo);
    let drift_of = |plan: &Value| unit_in(plan, "HelmRelease", "data/db")["drift"].clone();

    let (plan, _) =
        plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", snapshot.path().to_str().unwrap()]);
    let drift = drift_of(&plan);
    assert_eq!(drift[0]["display"], "StatefulSet data/db", "{drift:#}");
    let diff = drift[0]["diff"].as_str().unwrap();
    assert!(
        diff.contains("-      - image: postgres:16-by-hand") && diff.contains("+      - image: postgres:17"),
        "{diff}"
    );
    assert!(!diff.contains("replicas"), "helm-controller ignores /spec/replicas: {diff}");

    crate::fixture::edit(&repo, "apps/db/release.yaml", "mode: enabled", "mode: warn");
    repo.commit("drift detection warns only");
    let (plan, _) =
        plan_json(&repo, "HEAD~2", "HEAD", &["--cluster-snapshot", snapshot.path().to_str().unwrap()]);
    assert!(drift_of(&plan).is_null(), "{:#}", drift_of(&plan));
}

/// Attack: the chart moves its CRD from `templates/` to `crds/`. Helm's upgrade deletes what the
/// old manifest holds and the new one lacks, and `crds/` are never in a manifest: the CRD and
/// every custom resource of it are deleted, and the merge is blocked. Near miss: a CRD in
/// `crds/` on both sides is left alone by a values change.
#[test]
fn a_crd_moved_from_templates_to_crds_is_deleted_by_the_upgrade() {
    let _ = helm(4);
    let crd = "charts/db/crds/backups.yaml";
    let repo = fleet();
    let text = std::fs::read_to_string(repo.path().join(crd)).unwrap();
    repo.remove(crd);
    repo.write("charts/db/templates/backups-crd.yaml", &text);
    repo.commit("the CRD as a template");
    repo.remove("charts/db/templates/backups-crd.yaml");
    repo.write(crd, &text);
    repo.commit("the CRD back in crds/");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    let id = "_backups.db.example.com_apiextensions.k8s.io_CustomResourceDefinition";
    assert!(sorted_changes(release).contains(&("delete".to_string(), id.to_string())), "{release:#}");
    assert!(alert_codes(&plan).iter().any(|(s, _)| s == "danger"), "{:?}", alert_codes(&plan));

    let repo = fleet();
    scale_up(&repo);
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert!(!sorted_changes(release).iter().any(|(action, c)| c == id && action == "delete"), "{release:#}");
}
