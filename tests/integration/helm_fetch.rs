//! Charts fetched as source-controller fetches them: from a real OCI registry (Debian's
//! `docker-registry`, started here on loopback; the test script installs it) and from an HTTP
//! Helm repository, every URL a pull request writes checked first.

use crate::fixture::{
    alert_codes, has_alert, helm, plan_json, sorted_changes, sorted_pairs, unit_in, wait_for, Canary, Repo,
    WAIT,
};
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// A chart `db` of `version` whose StatefulSet is named `statefulset`, packaged into `out`.
pub(crate) fn package(out: &Path, version: &str, statefulset: &str) -> PathBuf {
    package_with(out, version, statefulset, &[])
}

/// The same, with more templates (`templates/NAME`, content).
fn package_with(out: &Path, version: &str, statefulset: &str, templates: &[(&str, &str)]) -> PathBuf {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("db");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(chart.join("Chart.yaml"), format!("apiVersion: v2\nname: db\nversion: {version}\n"))
        .unwrap();
    std::fs::write(chart.join("values.yaml"), "replicas: 1\n").unwrap();
    std::fs::write(
        chart.join("templates/statefulset.yaml"),
        format!(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: {statefulset}\nspec:\n  replicas: {{{{ .Values.replicas }}}}\n  \
             serviceName: db\n  selector:\n    matchLabels: {{app: db}}\n  template:\n    metadata:\n      labels: {{app: db}}\n    \
             spec:\n      containers:\n      - name: db\n        image: postgres:17\n"
        ),
    )
    .unwrap();
    for (name, content) in templates {
        std::fs::write(chart.join("templates").join(name), content).unwrap();
    }
    let output =
        Command::new(helm(4).program()).arg("package").arg(&chart).arg("-d").arg(out).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    out.join(format!("db-{version}.tgz"))
}

/// Debian's docker-registry serving on a free loopback port, stopped when dropped.
pub(crate) struct Registry {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    pub(crate) fn start() -> Self {
        Self::start_with("")
    }

    /// A registry whose `http:` section also holds `http_extra` (lines indented by two spaces,
    /// as under `http:`): TLS, client CAs.
    pub(crate) fn start_with(http_extra: &str) -> Self {
        Self::configured(http_extra, "")
    }

    /// The same, its configuration ending with the top-level `sections` (`auth:`, …).
    pub(crate) fn configured(http_extra: &str, sections: &str) -> Self {
        let program = which("docker-registry").unwrap_or_else(|| {
            panic!("this test needs Debian's docker-registry (apt-get install docker-registry)")
        });
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n{http_extra}{sections}",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new(program)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let registry = Registry { child, port, _dir: dir };
        wait_for("the registry to answer", WAIT, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        registry
    }

    pub(crate) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `helm push` of `archive` to `oci://HOST/charts`; returns the pushed digest.
    pub(crate) fn push(&self, archive: &Path) -> String {
        self.push_with(archive, &["--plain-http"])
    }

    /// The same, with `flags` for how to reach the registry (`--plain-http`, `--ca-file`, …).
    pub(crate) fn push_with(&self, archive: &Path, flags: &[&str]) -> String {
        let output = Command::new(helm(4).program())
            .arg("push")
            .arg(archive)
            .arg(format!("oci://{}/charts", self.host()))
            .args(flags)
            .env("HOME", tempfile::tempdir().unwrap().path())
            .output()
            .unwrap();
        let text =
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{text}");
        text.lines()
            .find_map(|line| line.strip_prefix("Digest: "))
            .unwrap_or_else(|| panic!("helm push printed no digest: {text}"))
            .trim()
            .to_string()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(program)).find(|p| p.is_file())
}

/// A static HTTP server on loopback: files by path, redirects by path; it records every path
/// asked for, and every `Authorization` header it was sent.
pub(crate) struct Static {
    pub(crate) port: u16,
    asked: Arc<Mutex<Vec<String>>>,
    authorizations: Arc<Mutex<Vec<String>>>,
}

impl Static {
    pub(crate) fn start(files: Vec<(String, Vec<u8>)>, redirects: Vec<(String, String)>) -> Self {
        Self::guarded(files, redirects, None)
    }

    /// A server that answers 401 to any request without the `Authorization` header `auth`.
    fn guarded(
        files: Vec<(String, Vec<u8>)>,
        redirects: Vec<(String, String)>,
        auth: Option<String>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let sent = authorizations.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                // The rest of the request head.
                let mut header = String::new();
                let mut authorized = auth.is_none();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    if let Some((_, value)) =
                        header.split_once(':').filter(|(name, _)| name.eq_ignore_ascii_case("authorization"))
                    {
                        sent.lock().unwrap().push(value.trim().to_string());
                        authorized |= auth.as_deref() == Some(value.trim());
                    }
                    header.clear();
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                log.lock().unwrap().push(path.clone());
                let mut stream = stream;
                let response = if !authorized {
                    b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
                } else if let Some((_, to)) = redirects.iter().find(|(p, _)| *p == path) {
                    format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").into_bytes()
                } else if let Some((_, body)) = files.iter().find(|(p, _)| *p == path) {
                    let mut response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    response.extend(body);
                    response
                } else {
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
                };
                let _ = stream.write_all(&response);
            }
        });
        Static { port, asked, authorizations }
    }

    /// A classic Helm repository at `/charts`: the archives in `packages`, indexed by `helm repo index`.
    pub(crate) fn repository(packages: &Path) -> Self {
        Self::private_repository(packages, None)
    }

    /// The same, answering only requests with the `Authorization` header `auth`.
    pub(crate) fn private_repository(packages: &Path, auth: Option<String>) -> Self {
        let index = Command::new(helm(4).program()).args(["repo", "index"]).arg(packages).output().unwrap();
        assert!(index.status.success(), "{}", String::from_utf8_lossy(&index.stderr));
        let files = std::fs::read_dir(packages)
            .unwrap()
            .flatten()
            .map(|e| {
                (format!("/charts/{}", e.file_name().to_string_lossy()), std::fs::read(e.path()).unwrap())
            })
            .collect();
        Static::guarded(files, Vec::new(), auth)
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }

    /// Every `Authorization` header sent to it.
    pub(crate) fn authorizations(&self) -> Vec<String> {
        self.authorizations.lock().unwrap().clone()
    }
}

/// A fleet whose Kustomization `flux-system/db` applies `sources` (Flux source manifests) and a
/// HelmRelease `data/db` whose chart part is `chart` (YAML under `spec:`).
pub(crate) fn fleet(sources: &str, chart: &str) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/db.yaml", "db", "./apps/db", "");
    repo.write("apps/db/sources.yaml", sources);
    repo.write("apps/db/release.yaml", &release_manifest(chart));
    repo.commit("base");
    repo
}

pub(crate) fn release_manifest(chart: &str) -> String {
    format!(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: db\n  namespace: data\nspec:\n  interval: 10m\n{chart}  values:\n    replicas: 2\n"
    )
}

/// An OCIRepository by tag, then by digest, and a HelmRepository of `type: oci` by range, all
/// from a real registry: a chart bump plans the rename.
#[test]
fn charts_come_from_an_oci_registry_by_tag_digest_and_range() {
    let registry = Registry::start();
    let packages = tempfile::tempdir().unwrap();
    registry.push(&package(packages.path(), "1.0.0", "db"));
    let digest = registry.push(&package(packages.path(), "2.0.0", "db-v2"));
    let host = registry.host();
    let access = ["--chart-hosts", &host, "--insecure-registry", &host];
    let oci_repository = |reference: &str| {
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: db\n  namespace: data\nspec:\n  \
             url: oci://{host}/charts/db\n  ref:\n    {reference}\n  layerSelector:\n    mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip\n    operation: copy\n"
        )
    };
    let chart_ref = "  chartRef:\n    kind: OCIRepository\n    name: db\n";
    let repo = fleet(&oci_repository("tag: 1.0.0"), chart_ref);
    repo.write("apps/db/sources.yaml", &oci_repository(&format!("digest: {digest}")));
    repo.commit("db 2.0.0 by digest");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &access);
    assert_eq!(code, 2, "the StatefulSet's deletion blocks: {plan:#}");
    // What fluxplan shows of the fetched chart is what Helm prints for the archive pushed.
    crate::helm_plan::built_as_helm_prints(
        &repo,
        &access,
        &packages.path().join("db-2.0.0.tgz"),
        "replicas: 2\n",
        ("db", "data"),
    );
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["chart"], "db 1.0.0 → 2.0.0", "{release:#}");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[("create", "data_db-v2_apps_StatefulSet"), ("delete", "data_db_apps_StatefulSet")])
    );

    // A HelmRepository of type oci, by range: the highest 1.x is 1.0.0, the highest 2.x 2.0.0.
    let helm_repository = format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: data\nspec:\n  \
         type: oci\n  url: oci://{host}/charts\n"
    );
    let template = |range: &str| {
        format!("  chart:\n    spec:\n      chart: db\n      version: \"{range}\"\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n")
    };
    let repo = fleet(&helm_repository, &template("1.x"));
    repo.write("apps/db/release.yaml", &release_manifest(&template(">=2.0.0 <3.0.0")));
    repo.commit("db 2.x");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &access);
    assert_eq!(unit_in(&plan, "HelmRelease", "data/db")["chart"], "db 1.0.0 → 2.0.0", "{plan:#}");
}

/// A classic Helm repository (index.yaml, relative archive URLs) with a semver range.
#[test]
fn charts_come_from_an_http_helm_repository_by_range() {
    let packages = tempfile::tempdir().unwrap();
    package(packages.path(), "1.0.0", "db");
    package(packages.path(), "1.1.0", "db-v11");
    package(packages.path(), "2.0.0", "db-v2");
    let server = Static::repository(packages.path());
    let sources = format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: data\nspec:\n  url: {}/charts\n",
        server.url()
    );
    let template = |range: &str| {
        format!("  chart:\n    spec:\n      chart: db\n      version: \"{range}\"\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n")
    };
    let repo = fleet(&sources, &template("~1.0"));
    repo.write("apps/db/release.yaml", &release_manifest(&template("1.x")));
    repo.commit("db 1.x");
    let host = format!("127.0.0.1:{}", server.port);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--chart-hosts", &host]);
    assert_eq!(code, 2, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["chart"], "db 1.0.0 → 1.1.0");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[("create", "data_db-v11_apps_StatefulSet"), ("delete", "data_db_apps_StatefulSet")])
    );
    // The index is read once per plan, each archive once.
    let asked = server.asked();
    assert_eq!(asked.iter().filter(|p| p.as_str() == "/charts/index.yaml").count(), 1, "{asked:?}");
    crate::helm_plan::built_as_helm_prints(
        &repo,
        &["--chart-hosts", &host],
        &packages.path().join("db-1.1.0.tgz"),
        "replicas: 2\n",
        ("db", "data"),
    );
}

/// A pull request that adds a HelmRepository on a new host, a loopback address its base names
/// without the operator allowing it, a metadata address, or a redirect to any of them: nothing
/// is fetched, the release is `external` with a warning, and the canary hears nothing.
#[test]
fn a_pull_request_cannot_make_fluxplan_fetch_from_a_new_or_internal_address() {
    let _ = helm(4);
    let canary = Canary::start();
    let template = "  chart:\n    spec:\n      chart: db\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n";
    let repository = |url: &str| {
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: data\nspec:\n  url: {url}\n"
        )
    };
    let redirect =
        Static::start(Vec::new(), vec![("/charts/index.yaml".into(), canary.url("charts/index.yaml"))]);
    let redirect_host = format!("127.0.0.1:{}", redirect.port);
    for (base_url, head_url, allowed, expected) in [
        // A host the base never used.
        ("https://charts.example.com/stable", canary.url("charts"), None, "not used by the base revision"),
        // A host the base uses, on loopback, not allowed by exact host and port.
        (
            format!("http://localhost:{}/charts", canary.port()).as_str(),
            format!("http://localhost:{}/charts", canary.port()),
            None,
            "loopback address",
        ),
        // A cloud metadata address the base uses.
        (
            "http://169.254.169.254/charts",
            "http://169.254.169.254/latest/charts".to_string(),
            None,
            "cloud metadata address",
        ),
        // An allowed server that redirects to the canary (same address, another port).
        (
            format!("{}/charts", redirect.url()).as_str(),
            format!("{}/charts", redirect.url()),
            Some(redirect_host.as_str()),
            "loopback address",
        ),
    ] {
        let repo = fleet(&repository(base_url), template);
        repo.write("apps/db/sources.yaml", &repository(&head_url));
        crate::fixture::edit(&repo, "apps/db/release.yaml", "replicas: 2", "replicas: 3");
        repo.commit("elsewhere");
        let extra: Vec<&str> = allowed.map(|host| vec!["--chart-hosts", host]).unwrap_or_default();
        let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &extra);
        // A HelmRepository moved to a repository the base never used blocks (`source-moved`).
        let moved = base_url != head_url;
        assert_eq!(has_alert(&plan, "danger", "source-moved"), moved, "{head_url}: {:?}", alert_codes(&plan));
        assert_eq!(code, if moved { 2 } else { 1 }, "changes, never no-changes: {plan:#}");
        let release = unit_in(&plan, "HelmRelease", "data/db");
        assert_eq!(release["status"], "external", "{release:#}");
        assert!(has_alert(&plan, "warning", "chart-unavailable"), "{:?}", alert_codes(&plan));
        let notes = release["notes"].to_string();
        assert!(notes.contains(expected), "{head_url}: {notes}");
        canary.assert_untouched();
    }
    assert_eq!(redirect.asked(), ["/charts/index.yaml"], "the redirect was asked, its target never");
}

/// An air-gapped cluster: the fleet names a public registry, the operator mirrors it on a
/// loopback address. The mirror replaces the host and keeps the path; it needs no allow-list.
#[test]
fn a_registry_mirror_serves_what_names_the_public_registry() {
    let registry = Registry::start();
    let packages = tempfile::tempdir().unwrap();
    registry.push(&package(packages.path(), "1.0.0", "db"));
    registry.push(&package(packages.path(), "2.0.0", "db-v2"));
    let oci_repository = |tag: &str| {
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: db\n  namespace: data\nspec:\n  \
             url: oci://registry.example.com/charts/db\n  ref:\n    tag: {tag}\n"
        )
    };
    let repo = fleet(&oci_repository("1.0.0"), "  chartRef:\n    kind: OCIRepository\n    name: db\n");
    repo.write("apps/db/sources.yaml", &oci_repository("2.0.0"));
    repo.commit("db 2.0.0");
    let mirror = format!("registry.example.com=http://{}", registry.host());
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--registry-mirror", &mirror]);
    assert_eq!(unit_in(&plan, "HelmRelease", "data/db")["chart"], "db 1.0.0 → 2.0.0", "{plan:#}");
    // Without the mirror, the public name is all there is: not fetched here, said so.
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(unit_in(&plan, "HelmRelease", "data/db")["status"], "external", "{plan:#}");
    assert_ne!(code, 0);
}

/// A chart of this repository whose dependencies are not vendored: one from a Helm repository
/// (the version Chart.lock pins), one a `file://` chart of the same source. Got as
/// source-controller gets them; the repository's host is one the base revision's charts name.
#[test]
fn a_charts_dependencies_are_got_as_source_controller_gets_them() {
    let packages = tempfile::tempdir().unwrap();
    package(packages.path(), "1.0.0", "db");
    package(packages.path(), "1.1.0", "db-v11");
    let server = Static::repository(packages.path());
    let repo = fleet("", "  chart:\n    spec:\n      chart: ./charts/app\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n");
    repo.write(
        "charts/app/Chart.yaml",
        &format!(
            "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: db\n  version: 1.x\n  repository: {}/charts\n\
             - name: common\n  version: 0.1.0\n  repository: file://../common\n",
            server.url()
        ),
    );
    repo.write("charts/app/Chart.lock", "dependencies:\n- name: db\n  version: 1.0.0\n");
    repo.write("charts/app/templates/app.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n");
    repo.write("charts/common/Chart.yaml", "apiVersion: v2\nname: common\nversion: 0.1.0\n");
    repo.write(
        "charts/common/templates/common.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: common\n",
    );
    repo.commit("an umbrella chart");
    // The lock moves to 1.1.0: the StatefulSet of the dependency is renamed.
    repo.write("charts/app/Chart.lock", "dependencies:\n- name: db\n  version: 1.1.0\n");
    repo.commit("db 1.1.0");
    let host = format!("127.0.0.1:{}", server.port);
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--chart-hosts", &host]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[("create", "data_db-v11_apps_StatefulSet"), ("delete", "data_db_apps_StatefulSet")]),
        "{release:#}"
    );
    // Both dependencies rendered: their objects are in the release at head.
    let (plan, _) = plan_json(&repo, "HEAD~2", "HEAD", &["--chart-hosts", &host]);
    let ids = unit_in(&plan, "HelmRelease", "data/db")["changes"].to_string();
    for id in ["data_app__ConfigMap", "data_common__ConfigMap", "data_db-v11_apps_StatefulSet"] {
        assert!(ids.contains(id), "{id} not in {ids}");
    }
    // The file:// dependency is read by the release: a change to it is planned, not unplanned.
    repo.write(
        "charts/common/templates/common.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: common\ndata:\n  a: b\n",
    );
    repo.commit("common changes");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--chart-hosts", &host]);
    assert_eq!(plan["unplanned_changes"], json!([]), "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(sorted_changes(release), sorted_pairs(&[("update", "data_common__ConfigMap")]));
}

/// A private Helm repository: its HelmRepository names a Secret with the credentials. Read from
/// the cluster (here its snapshot), sent to that repository's host only, never shown; without
/// them the release is external and says which Secret it needs.
#[test]
fn a_private_repository_is_read_with_its_sources_credentials() {
    let packages = tempfile::tempdir().unwrap();
    package(packages.path(), "1.0.0", "db");
    package(packages.path(), "1.1.0", "db-v11");
    // "fleet-reader:hunter2-private" in base64, as HTTP Basic authentication sends it.
    let server = Static::private_repository(
        packages.path(),
        Some("Basic ZmxlZXQtcmVhZGVyOmh1bnRlcjItcHJpdmF0ZQ==".into()),
    );
    let sources = format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: data\nspec:\n  \
         url: {}/charts\n  secretRef:\n    name: charts-auth\n",
        server.url()
    );
    let template = |version: &str| {
        format!("  chart:\n    spec:\n      chart: db\n      version: \"{version}\"\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n")
    };
    let repo = fleet(&sources, &template("1.0.0"));
    repo.write("apps/db/release.yaml", &release_manifest(&template("1.1.0")));
    repo.commit("db 1.1.0");
    let host = format!("127.0.0.1:{}", server.port);
    let snapshot = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        snapshot.path(),
        "kind: ClusterSnapshot\nsecrets:\n- metadata: {name: charts-auth, namespace: data}\n  \
         data: {username: ZmxlZXQtcmVhZGVy, password: aHVudGVyMi1wcml2YXRl}\n",
    )
    .unwrap();
    // Credentials go over https only, but to a registry the operator says speaks plain HTTP.
    let (plan, _) = plan_json(
        &repo,
        "HEAD~1",
        "HEAD",
        &["--chart-hosts", &host, "--cluster-snapshot", snapshot.path().to_str().unwrap()],
    );
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert!(release["notes"].to_string().contains("over https only"), "{release:#}");
    let with_cluster = [
        "--chart-hosts",
        &host,
        "--insecure-registry",
        &host,
        "--cluster-snapshot",
        snapshot.path().to_str().unwrap(),
    ];
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &with_cluster);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["chart"], "db 1.0.0 → 1.1.0", "{release:#}");
    assert!(!plan.to_string().contains("hunter2-private"), "the password never shows");
    // Offline: the Secret is the cluster's.
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--chart-hosts", &host]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external");
    assert!(release["notes"].to_string().contains("Secret data/charts-auth"), "{release:#}");
}

/// An OCIRepository of `host` asking for chart `db` by `tag`, as a chart (Helm layer).
fn oci_source(host: &str, tag: &str) -> String {
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: db\n  namespace: data\nspec:\n  \
         interval: 10m\n  url: oci://{host}/charts/db\n  ref:\n    tag: {tag}\n  layerSelector:\n    mediaType: \
         application/vnd.cncf.helm.chart.content.v1.tar+gzip\n    operation: copy\n"
    )
}

const CHART_REF: &str = "  chartRef:\n    kind: OCIRepository\n    name: db\n";

/// A chart bump through an OCIRepository tag, the HelmRelease object untouched: when the new
/// chart cannot be had (a registry refused as a loopback address, `--no-chart-fetch`, a registry
/// that no longer answers), the release warns `chart-unavailable` in the text, the markdown and
/// the JSON, the version change is in the version table, and the release is not among the
/// unchanged. The near miss, the registry allowed and up, plans the release's changes.
#[test]
fn an_unfetchable_chart_bump_through_an_oci_tag_warns_in_every_format() {
    let registry = Registry::start();
    let packages = tempfile::tempdir().unwrap();
    registry.push(&package(packages.path(), "1.0.0", "db"));
    registry.push(&package(packages.path(), "2.0.0", "db-v2"));
    let host = registry.host();
    let repo = fleet(&oci_source(&host, "1.0.0"), CHART_REF);
    repo.write("apps/db/sources.yaml", &oci_source(&host, "2.0.0"));
    repo.commit("db 2.0.0 by tag");
    let access = ["--chart-hosts", host.as_str(), "--insecure-registry", host.as_str()];

    // Near miss: fetched and planned, nothing unavailable.
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &access);
    assert!(!has_alert(&plan, "warning", "chart-unavailable"), "{:?}", alert_codes(&plan));
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["chart"], "db 1.0.0 → 2.0.0", "{release:#}");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[("create", "data_db-v2_apps_StatefulSet"), ("delete", "data_db_apps_StatefulSet")])
    );
    assert_eq!(code, 2, "the StatefulSet's deletion blocks");

    let refused: Vec<&str> = Vec::new();
    let no_fetch = [&access[..], &["--no-chart-fetch"]].concat();
    for (case, flags) in [("a loopback registry not allowed", refused), ("--no-chart-fetch", no_fetch)] {
        assert_unseen_bump(&repo, &flags, case);
    }
    // The registry gone: allowed, unreachable.
    drop(registry);
    assert_unseen_bump(&repo, &access, "an unreachable registry");
}

/// The plan of an unfetchable `db` 1.0.0 → 2.0.0 bump, in every format.
fn assert_unseen_bump(repo: &Repo, flags: &[&str], case: &str) {
    let (plan, code) = plan_json(repo, "HEAD~1", "HEAD", flags);
    assert_eq!(code, 1, "{case}: changes, never no-changes: {plan:#}");
    let alert = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["code"] == "chart-unavailable")
        .unwrap_or_else(|| panic!("{case}: no chart-unavailable in {:?}", alert_codes(&plan)));
    assert_eq!(alert["severity"], "warning");
    assert_eq!(alert["kustomization"], "HelmRelease data/db");
    assert!(alert["message"].as_str().unwrap().contains("db 1.0.0 → 2.0.0"), "{case}: {alert:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external", "{case}: {release:#}");
    assert_eq!(release["chart"], "db 1.0.0 → 2.0.0 (asked for, not rendered)", "{case}");
    let version = plan["versions"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["kind"] == "chart" && v["name"] == "db"))
        .unwrap_or_else(|| panic!("{case}: no chart in the version table: {plan:#}"));
    assert_eq!((&version["from"], &version["to"]), (&json!("1.0.0"), &json!("2.0.0")), "{case}");

    let (text, code) = crate::fixture::plan_cli(repo, "HEAD~1", "HEAD", "text", flags);
    assert_eq!(code, 1, "{case}: {text}");
    assert!(text.contains("WARNING chart-unavailable HelmRelease data/db"), "{case}: {text}");
    assert!(text.contains("chart db: 1.0.0 -> 2.0.0"), "{case}: the version table: {text}");
    assert!(text.contains("1 release whose chart fluxplan could not have or render"), "{case}: {text}");
    // Not among the unchanged: its own section says it is external.
    assert!(text.contains("HelmRelease data/db (clusters/prod) — db 1.0.0 → 2.0.0"), "{case}: {text}");
    assert!(text.contains("1 other Kustomization unchanged."), "{case}: only flux-system: {text}");

    let (markdown, _) = crate::fixture::plan_cli(repo, "HEAD~1", "HEAD", "markdown", flags);
    assert!(markdown.contains("**chart-unavailable** `HelmRelease data/db`"), "{case}: {markdown}");
    assert!(markdown.contains("| `db` | `1.0.0` | `2.0.0` |"), "{case}: the version table: {markdown}");
    assert!(markdown.contains("`HelmRelease data/db` *external*"), "{case}: {markdown}");
}

/// A release whose chart at base could not be had (its tag was never pushed) and whose chart
/// at head can: base unknown, said so, and its objects are not listed as creates. The review
/// still reads them: the head chart's new binding to cluster-admin is a `privilege` finding.
#[test]
fn a_release_whose_base_chart_could_not_be_had_is_base_unknown() {
    let registry = Registry::start();
    let packages = tempfile::tempdir().unwrap();
    let binding = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: db-admin\n\
                   roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\n\
                   subjects:\n- kind: ServiceAccount\n  name: db\n  namespace: data\n";
    let archive = package_with(packages.path(), "1.0.0", "db", &[("binding.yaml", binding)]);
    registry.push(&archive);
    let host = registry.host();
    let access = ["--chart-hosts", host.as_str(), "--insecure-registry", host.as_str()];
    let repo = fleet(&oci_source(&host, "0.9.0"), CHART_REF);
    repo.write("apps/db/sources.yaml", &oci_source(&host, "1.0.0"));
    repo.commit("db 1.0.0, a tag the registry has");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &access);
    assert_eq!(code, 1, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["base_unknown"], true, "{release:#}");
    assert_eq!(release["changes"], json!([]), "no list of creates: {release:#}");
    assert_eq!(plan["summary"]["create"], 0, "{plan:#}");
    assert!(release["notes"].to_string().contains("base unknown"), "{release:#}");
    let alert = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "chart-unavailable");
    let message = alert.map(|a| a["message"].to_string()).unwrap_or_default();
    assert!(message.contains("base unknown (its chart: db 0.9.0 → 1.0.0)"), "{:?}", alert_codes(&plan));
    let findings = plan["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["code"] == "privilege"
            && f["object"] == "_db-admin_rbac.authorization.k8s.io_ClusterRoleBinding"),
        "the review reads what is not listed: {findings:#?}"
    );
    let (text, _) = crate::fixture::plan_cli(&repo, "HEAD~1", "HEAD", "text", &access);
    assert!(
        text.contains("(asked for, not rendered); base unknown; 2 objects at head, not compared"),
        "{text}"
    );
    assert!(!text.contains("create StatefulSet data/db"), "{text}");
    // Near miss: the base chart at hand, the same bump is planned object by object.
    registry.push(&package(packages.path(), "0.9.0", "db-old"));
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &access);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert!(release.get("base_unknown").is_none(), "{release:#}");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[
            ("create", "_db-admin_rbac.authorization.k8s.io_ClusterRoleBinding"),
            ("create", "data_db_apps_StatefulSet"),
            ("delete", "data_db-old_apps_StatefulSet")
        ])
    );
    assert!(!has_alert(&plan, "warning", "chart-unavailable"), "{:?}", alert_codes(&plan));
}
