//! Chart archives rendered as helm-controller loads them (Helm's archive loader): what an
//! archive hides from a render of its unpacked directory is planned, and said; a remote chart's
//! undeclared subcharts are left out rather than fetched; a chart from an OCIRepository carries
//! the artifact's digest in `.Chart.Version`. The archives are built here with the tar crate
//! (`helm package` would never write the hostile names) and checked against `helm template` of
//! the archive itself.

use crate::fixture::{alert_codes, has_alert, helm, plan_json, unit_in};
use crate::helm_fetch::{fleet, release_manifest, Registry, Static};
use crate::helm_plan::built_release;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// A gzip tar archive of regular files, each name written into the header as given.
fn archive(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), Default::default()));
    for (name, body) in entries {
        let mut header = tar::Header::new_gnu();
        header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(body.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append(&header, body.as_bytes()).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

pub(crate) fn binding(name: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {name}\nroleRef:\n  \
         apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: \
         ServiceAccount\n  name: default\n  namespace: data\n"
    )
}

const CONFIG_MAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\ndata:\n  replicas: \"{{ .Values.replicas }}\"\n";

/// A normal chart `db` of `version`: one ConfigMap, a `.helmignore` naming nothing it holds.
fn normal_chart(version: &str) -> Vec<u8> {
    archive(&[
        ("db/Chart.yaml", &format!("apiVersion: v2\nname: db\nversion: {version}\n")),
        ("db/values.yaml", "replicas: 1\n"),
        ("db/.helmignore", "*.swp\n.git/\n"),
        ("db/templates/_helpers.tpl", "{{- define \"db.name\" -}}db{{- end -}}\n"),
        ("db/templates/configmap.yaml", CONFIG_MAP),
    ])
}

/// The chart `db` of `version` hiding a ClusterRoleBinding to cluster-admin four ways.
fn hiding_chart(version: &str) -> Vec<u8> {
    archive(&[
        ("db/Chart.yaml", &format!("apiVersion: v2\nname: db\nversion: {version}\n")),
        ("db/values.yaml", "replicas: 1\n"),
        ("db/.helmignore", "listed.yaml\n"),
        ("db/templates/configmap.yaml", CONFIG_MAP),
        ("db/templates/listed.yaml", &binding("listed")),
        ("db/templates/.dot.yaml", &binding("dot")),
        ("db/x\\templates\\slash.yaml", &binding("slash")),
        ("other/templates/z.yaml", &binding("other")),
    ])
}

/// `helm template` of the archive itself (the oracle): the names of the objects it prints.
pub(crate) fn helm_prints(archive: &Path) -> Vec<String> {
    let out = Command::new(helm(4).program())
        .args(["template", "db"])
        .arg(archive)
        .args(["--namespace", "data"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let release = fluxplan::render::helm::split_release(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let mut names: Vec<String> = release
        .objects
        .iter()
        .map(|o| format!("{}/{}", o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap()))
        .collect();
    names.sort();
    names
}

fn repository_sources(url: &str) -> String {
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: data\nspec:\n  url: {url}/charts\n"
    )
}

fn template(version: &str) -> String {
    format!(
        "  chart:\n    spec:\n      chart: db\n      version: \"{version}\"\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n"
    )
}

fn created(release: &Value) -> Vec<String> {
    let mut ids: Vec<String> = release["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] == "create")
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

fn archive_alert(plan: &Value) -> Option<String> {
    plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["code"] == "chart-archive-hidden")
        .map(|a| a["message"].as_str().unwrap().to_string())
}

/// A chart bump to an archive that hides four ClusterRoleBindings from a render of its unpacked
/// directory: each is planned (Helm's archive loader installs it), and the release names them.
/// A values change on a normal archive (the near miss) carries no such warning.
#[test]
fn a_served_archive_hiding_templates_is_planned_with_them_and_a_warning() {
    let packages = tempfile::tempdir().unwrap();
    std::fs::write(packages.path().join("db-1.0.0.tgz"), normal_chart("1.0.0")).unwrap();
    std::fs::write(packages.path().join("db-2.0.0.tgz"), hiding_chart("2.0.0")).unwrap();
    // The oracle: the archive loader prints all four; a render of the unpacked chart, none.
    let hidden = [
        "ClusterRoleBinding/dot",
        "ClusterRoleBinding/listed",
        "ClusterRoleBinding/other",
        "ClusterRoleBinding/slash",
    ];
    let printed = helm_prints(&packages.path().join("db-2.0.0.tgz"));
    for name in hidden {
        assert!(printed.contains(&name.to_string()), "{name} not in {printed:?}");
    }
    let unpacked = tempfile::tempdir().unwrap();
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(packages.path().join("db-2.0.0.tgz"))
        .arg("-C")
        .arg(unpacked.path())
        .status()
        .unwrap();
    assert!(untar.success());
    assert_eq!(helm_prints(&unpacked.path().join("db")), ["ConfigMap/db"]);

    let server = Static::repository(packages.path());
    let host = server.host();
    let repo = fleet(&repository_sources(&server.url()), &template("1.0.0"));
    repo.write(
        "apps/db/release.yaml",
        &release_manifest(&template("1.0.0")).replace("replicas: 2", "replicas: 3"),
    );
    repo.commit("three replicas");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--chart-hosts", &host]);
    assert_eq!(archive_alert(&plan), None, "{:?}", alert_codes(&plan));
    assert_eq!(unit_in(&plan, "HelmRelease", "data/db")["status"], "changed", "{plan:#}");

    repo.write("apps/db/release.yaml", &release_manifest(&template("2.0.0")));
    repo.commit("db 2.0.0");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--chart-hosts", &host]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    let bindings: Vec<String> =
        created(release).into_iter().filter(|id| id.ends_with("_ClusterRoleBinding")).collect();
    assert_eq!(
        bindings,
        [
            "_dot_rbac.authorization.k8s.io_ClusterRoleBinding",
            "_listed_rbac.authorization.k8s.io_ClusterRoleBinding",
            "_other_rbac.authorization.k8s.io_ClusterRoleBinding",
            "_slash_rbac.authorization.k8s.io_ClusterRoleBinding"
        ],
        "{release:#}"
    );
    assert!(has_alert(&plan, "warning", "chart-archive-hidden"), "{:?}", alert_codes(&plan));
    let message = archive_alert(&plan).unwrap();
    for entry in [
        "db/templates/listed.yaml",
        "db/templates/.dot.yaml",
        "db/x\\\\templates\\\\slash.yaml",
        "other/templates/z.yaml",
    ] {
        assert!(message.contains(entry), "{entry} not named: {message}");
    }
    assert!(!message.contains("configmap.yaml"), "{message}");
}

/// A chart from a Helm repository declaring a dependency it does not vendor: `helm template`
/// refuses it, helm-controller installs it without that subchart. Planned without it, and the
/// dependency's repository is never asked for it; the vendored subchart is rendered.
#[test]
fn a_remote_chart_declaring_an_unvendored_dependency_renders_without_it() {
    let packages = tempfile::tempdir().unwrap();
    crate::helm_fetch::package(packages.path(), "1.0.0", "dependency");
    let server = Static::repository(packages.path());
    let declared = format!(
        "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: db\n  version: 1.x\n  repository: {}/charts\n\
         - name: sub\n  version: 0.1.0\n",
        server.url()
    );
    let chart = archive(&[
        ("app/Chart.yaml", &declared),
        ("app/templates/app.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"),
        ("app/charts/sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"),
        ("app/charts/sub/templates/sub.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sub\n"),
    ]);
    let app = packages.path().join("app-1.0.0.tgz");
    std::fs::write(&app, &chart).unwrap();
    // The oracle: helm template refuses the archive for its missing subchart.
    let out = Command::new(helm(4).program()).args(["template", "app"]).arg(&app).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing in charts/"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = Static::repository(packages.path());
    let host = server.host();
    let with_chart = |name: &str| {
        format!(
            "  chart:\n    spec:\n      chart: {name}\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n"
        )
    };
    let repo = fleet(&repository_sources(&server.url()), &with_chart("db"));
    repo.write("apps/db/release.yaml", &release_manifest(&with_chart("app")));
    repo.commit("app");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--chart-hosts", &host]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "changed", "{release:#}");
    let ids = created(release);
    assert_eq!(ids, ["data_app__ConfigMap", "data_sub__ConfigMap"], "{release:#}");
    // The base's chart db-1.0.0 is fetched for the base; the dependency's archive never for head.
    let asked = server.asked();
    assert_eq!(asked.iter().filter(|p| p.ends_with("db-1.0.0.tgz")).count(), 1, "{asked:?}");
}

/// A chartRef to an OCIRepository: helm-controller sets `.Chart.Version` to the chart's version
/// with the first 12 hex digits of the artifact's digest; through a HelmChart (HelmRepository of
/// type oci) it stays as the chart says.
#[test]
fn a_chart_ref_to_an_oci_repository_renders_its_version_with_the_digest() {
    let registry = Registry::start();
    let packages = tempfile::tempdir().unwrap();
    let labelled = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n  labels:\n    helm.sh/chart: {{ printf \"%s-%s\" .Chart.Name .Chart.Version | replace \"+\" \"_\" }}\n";
    let chart = archive(&[
        ("db/Chart.yaml", "apiVersion: v2\nname: db\nversion: 1.0.0\n"),
        ("db/templates/configmap.yaml", labelled),
    ]);
    let path = packages.path().join("db-1.0.0.tgz");
    std::fs::write(&path, chart).unwrap();
    let digest = registry.push(&path);
    let host = registry.host();
    let access = ["--chart-hosts", host.as_str(), "--insecure-registry", host.as_str()];
    let oci_repository = format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: db\n  namespace: data\nspec:\n  \
         url: oci://{host}/charts/db\n  ref:\n    tag: 1.0.0\n  layerSelector:\n    mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip\n    operation: copy\n---\n\
         apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: data\nspec:\n  \
         type: oci\n  url: oci://{host}/charts\n"
    );
    let label_of = |chart: &str| -> String {
        let repo = fleet(&oci_repository, chart);
        let unit = built_release(&repo, &access);
        assert_eq!(unit["status"], "rendered", "{unit:#}");
        unit["objects"][0]["manifest"]["metadata"]["labels"]["helm.sh/chart"].as_str().unwrap().to_string()
    };
    let short = &digest.trim_start_matches("sha256:")[..12];
    assert_eq!(label_of("  chartRef:\n    kind: OCIRepository\n    name: db\n"), format!("db-1.0.0_{short}"));
    assert_eq!(label_of(&template("1.0.0")), "db-1.0.0");
}

/// A `.tgz` at a GitRepository chart path is an archive (source-controller copies it as is): its
/// hidden templates are planned and named.
#[test]
fn a_packaged_chart_in_the_repository_is_loaded_as_an_archive() {
    let from_git = "  chart:\n    spec:\n      chart: ./charts/db-2.0.0.tgz\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n";
    let repo = fleet("", &template("1.0.0").replace("HelmRepository", "GitRepository"));
    std::fs::create_dir_all(repo.path().join("charts")).unwrap();
    std::fs::write(repo.path().join("charts/db-2.0.0.tgz"), hiding_chart("2.0.0")).unwrap();
    repo.write("apps/db/release.yaml", &release_manifest(from_git));
    repo.commit("db from the repository");
    // The base's chart came from another repository (unknown offline): what the head renders is
    // read from a build of it.
    let unit = built_release(&repo, &[]);
    let kinds: Vec<&str> =
        unit["objects"].as_array().unwrap().iter().filter_map(|o| o["manifest"]["kind"].as_str()).collect();
    assert_eq!(kinds.len(), 5, "a ConfigMap and four ClusterRoleBindings: {unit:#}");
    assert_eq!(kinds.iter().filter(|k| **k == "ClusterRoleBinding").count(), 4, "{unit:#}");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let message = archive_alert(&plan).unwrap_or_else(|| panic!("{:?}", alert_codes(&plan)));
    assert!(message.contains("other/templates/z.yaml"), "{message}");
}

/// HelmChart `valuesFiles` of a fetched chart replace its values.yaml, as source-controller
/// re-packages it; the rewritten archive keeps what only the archive loader reads (a
/// `templates/.x.yaml`), so values files cannot make a hidden template vanish.
#[test]
fn values_files_of_a_fetched_archive_keep_its_archive_semantics() {
    let packages = tempfile::tempdir().unwrap();
    let tiered =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tier\ndata:\n  tier: {{ .Values.tier }}\n";
    let chart = archive(&[
        ("db/Chart.yaml", "apiVersion: v2\nname: db\nversion: 1.0.0\n"),
        ("db/values.yaml", "tier: dev\n"),
        ("db/prod.yaml", "tier: prod\n"),
        ("db/templates/tier.yaml", tiered),
        ("db/templates/.dot.yaml", &binding("dot")),
    ]);
    std::fs::write(packages.path().join("db-1.0.0.tgz"), chart).unwrap();
    let server = Static::repository(packages.path());
    let with_files = "  chart:\n    spec:\n      chart: db\n      valuesFiles: [values.yaml, prod.yaml]\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n";
    let repo = fleet(&repository_sources(&server.url()), with_files);
    let unit = built_release(&repo, &["--chart-hosts", &server.host()]);
    assert_eq!(unit["status"], "rendered", "{unit:#}");
    let objects: Vec<&Value> = unit["objects"].as_array().unwrap().iter().map(|o| &o["manifest"]).collect();
    let tier = objects.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    assert_eq!(tier["data"]["tier"], "prod", "{unit:#}");
    assert!(
        objects.iter().any(|o| o["kind"] == "ClusterRoleBinding" && o["metadata"]["name"] == "dot"),
        "{unit:#}"
    );
}
