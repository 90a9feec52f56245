//! Charts from an OCI registry that wants a login (Debian's `docker-registry` with htpasswd
//! authentication on loopback; the bcrypt entry made by `htpasswd` of Debian's apache2-utils): a
//! Flux OCIRepository with a `.dockerconfigjson` secretRef, a HelmRepository of `type: oci` with
//! a username and password, and an Argo CD Helm source with Argo CD's repository Secret, each
//! read from the live cluster (the fake Kubernetes API) with `--read-secrets` only. Wrong
//! credentials are said to be refused (HTTP 401, the registry named); no credential ever shows.

use crate::argo_helm_credentials::{application, argocd_secret, basic, encode};
use crate::fake_kube::FakeKube;
use crate::fixture::{has_alert, helm, sorted_changes, sorted_pairs, unit_in, Repo};
use crate::helm_fetch::{fleet, package, release_manifest, Registry};
use crate::helm_tls::{oci_repository, secret, CHART_REF};
use crate::kube_view::assert_only_gets;
use serde_json::{json, Value};
use std::process::Command;

const USERNAME: &str = "fleet-puller";
const PASSWORD: &str = "hunter2-oci-registry";
/// The name of the Secret a source's `secretRef` names.
const LOGIN: &str = "registry-login";

/// A registry that answers only `USERNAME` with `PASSWORD`, serving the chart `db` 1.0.0
/// (StatefulSet `db`) and 2.0.0 (StatefulSet `db-v2`) under `charts/`.
struct Locked {
    registry: Registry,
    packages: tempfile::TempDir,
    _htpasswd: tempfile::TempDir,
}

impl Locked {
    fn start() -> Locked {
        let _ = helm(4);
        let output =
            Command::new("htpasswd").args(["-Bbn", USERNAME, PASSWORD]).output().unwrap_or_else(|e| {
                panic!(
                    "this test needs htpasswd (apt-get install apache2-utils) for the registry's logins: {e}"
                )
            });
        assert!(output.status.success(), "htpasswd: {}", String::from_utf8_lossy(&output.stderr));
        let htpasswd = tempfile::tempdir().unwrap();
        let file = htpasswd.path().join("htpasswd");
        std::fs::write(&file, &output.stdout).unwrap();
        let registry = Registry::configured(
            "",
            &format!("auth:\n  htpasswd:\n    realm: fluxplan-test\n    path: {}\n", file.display()),
        );
        let packages = tempfile::tempdir().unwrap();
        for (version, statefulset) in [("1.0.0", "db"), ("2.0.0", "db-v2")] {
            registry.push_with(
                &package(packages.path(), version, statefulset),
                &["--plain-http", "--username", USERNAME, "--password", PASSWORD],
            );
        }
        // The registry does want the login: anonymous requests are refused with its challenge.
        let anonymous = reqwest::blocking::get(format!("http://{}/v2/charts/db/tags/list", registry.host()))
            .expect("the registry answers");
        assert_eq!(anonymous.status(), 401, "the registry serves without a login");
        let challenge = anonymous.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
        assert!(challenge.as_deref().is_some_and(|c| c.starts_with("Basic ")), "{challenge:?}");
        Locked { registry, packages, _htpasswd: htpasswd }
    }

    fn host(&self) -> String {
        self.registry.host()
    }

    /// What lets fluxplan fetch from it and send it credentials: plain HTTP on loopback.
    fn access(&self) -> Vec<String> {
        let host = self.host();
        ["--chart-hosts", &host, "--insecure-registry", &host].map(str::to_string).to_vec()
    }
}

/// `fluxplan plan --kube` of HEAD~1..HEAD against `fake` with `access` and `extra`.
fn plan_live(repo: &Repo, fake: &FakeKube, access: &[String], extra: &[&str]) -> (Value, String) {
    let flags: Vec<&str> = access.iter().map(String::as_str).chain(extra.iter().copied()).collect();
    crate::argo_helm_credentials::plan_live(repo, fake, &flags)
}

/// The Secret `data/registry-login` of `kubernetes.io/dockerconfigjson` type with a login for
/// `registry` (`host:port`), keyed as `docker login` writes it.
fn docker_config_secret(registry: &str, username: &str, password: &str) -> Value {
    let config = json!({"auths": {registry: {"auth": encode(&format!("{username}:{password}"))}}});
    let mut secret = secret(LOGIN, &[(".dockerconfigjson", &config.to_string())]);
    secret["type"] = json!("kubernetes.io/dockerconfigjson");
    secret
}

/// The Secret `data/registry-login` holding `username` and `password`.
fn login_secret(username: &str, password: &str) -> Value {
    secret(LOGIN, &[("username", username), ("password", password)])
}

/// An OCIRepository `data/db` of the registry's chart by `tag`, its secretRef `registry-login`.
fn oci_source(registry: &Locked, tag: &str) -> String {
    let url = format!("oci://{}/charts/db", registry.host());
    format!("{}  secretRef:\n    name: {LOGIN}\n", oci_repository(&url, tag, None))
}

/// A HelmRepository `data/charts` of `type: oci` on the registry, its secretRef `registry-login`.
fn helm_repository_source(registry: &Locked) -> String {
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: data\nspec:\n  \
         type: oci\n  url: oci://{}/charts\n  secretRef:\n    name: {LOGIN}\n",
        registry.host()
    )
}

/// A HelmRelease's chart `db` at `version` from the HelmRepository `charts`.
fn chart_template(version: &str) -> String {
    format!("  chart:\n    spec:\n      chart: db\n      version: \"{version}\"\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n")
}

/// A fleet whose HelmRelease `data/db` has chart 1.0.0 at HEAD~1 and 2.0.0 at HEAD through an
/// OCIRepository with a secretRef.
fn oci_repository_fleet(registry: &Locked) -> Repo {
    let repo = fleet(&oci_source(registry, "1.0.0"), CHART_REF);
    repo.write("apps/db/sources.yaml", &oci_source(registry, "2.0.0"));
    repo.commit("db 2.0.0");
    repo
}

/// The same through a HelmRepository of `type: oci` with a secretRef.
fn helm_repository_fleet(registry: &Locked) -> Repo {
    let repo = fleet(&helm_repository_source(registry), &chart_template("1.0.0"));
    repo.write("apps/db/release.yaml", &release_manifest(&chart_template("2.0.0")));
    repo.commit("db 2.0.0");
    repo
}

/// Nothing of the login shows: not the password, its base64, nor the Authorization header.
fn assert_never_shown(printed: &str, username: &str, password: &str) {
    for shown in [
        password.to_string(),
        encode(password),
        encode(&format!("{username}:{password}")),
        basic(username, password),
    ] {
        assert!(!printed.contains(&shown), "a credential shows ({shown}): {printed}");
    }
}

/// `repo`'s HelmRelease `data/db` (chart 1.0.0 → 2.0.0 from the locked registry, through a
/// source whose secretRef names `login`): with the live cluster's Secret the bump is planned and
/// the release is what `helm template` prints for the pushed archive; without `--read-secrets`
/// it is `external` and says what to give, never unchanged.
fn assert_planned_with_the_sources_login(repo: &Repo, registry: &Locked, login: Value) {
    let fake = FakeKube::start(vec![login.clone()]);
    let access = registry.access();

    let (plan, printed) = plan_live(repo, &fake, &access, &["--read-secrets"]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "changed", "{release:#}");
    assert_eq!(release["chart"], "db 1.0.0 → 2.0.0", "{release:#}");
    // The live cluster has no release installed yet: the head's objects are created.
    assert_eq!(sorted_changes(release), sorted_pairs(&[("create", "data_db-v2_apps_StatefulSet")]));
    assert_never_shown(&printed, USERNAME, PASSWORD);
    assert_only_gets(&fake);

    // What is rendered from the chart fetched with the login is what Helm prints for the pushed
    // archive (`build` reads the same Secret from a snapshot).
    let snapshot = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(snapshot.path(), json!({"kind": "ClusterSnapshot", "secrets": [login]}).to_string())
        .unwrap();
    let snapshot_flags = ["--cluster-snapshot", snapshot.path().to_str().unwrap()];
    let flags: Vec<&str> = access.iter().map(String::as_str).chain(snapshot_flags).collect();
    crate::helm_plan::built_as_helm_prints(
        repo,
        &flags,
        &registry.packages.path().join("db-2.0.0.tgz"),
        "replicas: 2\n",
        ("db", "data"),
    );

    // Without --read-secrets: not read, not fetched, and the reason says what to give.
    let asked_before = fake.requests().len();
    let (plan, _) = plan_live(repo, &fake, &access, &[]);
    assert_ne!(plan["verdict"], "no-changes", "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external", "{release:#}");
    let notes = release["notes"].to_string();
    for expected in [
        &format!("Secret data/{LOGIN} (spec.secretRef)"),
        "plan with a cluster and --read-secrets",
        "--chart data/db=DIR|TGZ",
    ] {
        assert!(notes.contains(expected), "{expected}: {notes}");
    }
    let asked = fake.requests().split_off(asked_before);
    assert!(
        !asked.iter().any(|(_, path)| path.contains("/secrets")),
        "a Secret read without --read-secrets: {asked:?}"
    );
}

/// An OCIRepository whose secretRef is a `kubernetes.io/dockerconfigjson` Secret with a login for
/// `127.0.0.1:PORT` (the port in the key, as `docker login` writes it).
#[test]
fn an_oci_repository_is_read_with_the_login_of_its_dockerconfigjson_secret() {
    let registry = Locked::start();
    let repo = oci_repository_fleet(&registry);
    let login = docker_config_secret(&registry.host(), USERNAME, PASSWORD);
    assert_planned_with_the_sources_login(&repo, &registry, login);
}

/// A HelmRepository of `type: oci` whose secretRef holds `username` and `password`; its chart
/// by version, from the registry's tags.
#[test]
fn an_oci_helm_repository_is_read_with_the_username_and_password_of_its_secret() {
    let registry = Locked::start();
    let repo = helm_repository_fleet(&registry);
    assert_planned_with_the_sources_login(&repo, &registry, login_secret(USERNAME, PASSWORD));
}

/// Wrong credentials, in either kind of Secret: the registry refuses them, the release is not
/// planned and says so (the registry, HTTP 401 and the Secret named), never unchanged; no
/// password shows, neither the wrong one sent nor the right one. A source without a secretRef
/// is told to want one.
#[test]
fn wrong_credentials_are_said_to_be_refused_and_never_shown() {
    let registry = Locked::start();
    const WRONG: &str = "hunter3-not-the-password";
    let registry_url = format!("http://{}/v2/charts/db/", registry.host());
    let refused = format!("the server refused the login of Secret data/{LOGIN} (spec.secretRef)");
    let anonymous = {
        let url = format!("oci://{}/charts/db", registry.host());
        let repo = fleet(&oci_repository(&url, "1.0.0", None), CHART_REF);
        repo.write("apps/db/sources.yaml", &oci_repository(&url, "2.0.0", None));
        repo.commit("db 2.0.0");
        repo
    };
    for (repo, login, expected) in [
        (
            oci_repository_fleet(&registry),
            docker_config_secret(&registry.host(), USERNAME, WRONG),
            refused.as_str(),
        ),
        (helm_repository_fleet(&registry), login_secret(USERNAME, WRONG), refused.as_str()),
        (anonymous, login_secret(USERNAME, PASSWORD), "it wants credentials, and its source gives no login"),
    ] {
        let fake = FakeKube::start(vec![login]);
        let (plan, printed) = plan_live(&repo, &fake, &registry.access(), &["--read-secrets"]);
        assert_ne!(plan["verdict"], "no-changes", "{plan:#}");
        let release = unit_in(&plan, "HelmRelease", "data/db");
        assert_eq!(release["status"], "external", "{release:#}");
        assert!(has_alert(&plan, "warning", "chart-unavailable"), "{plan:#}");
        let notes = release["notes"].to_string();
        for said in [registry_url.as_str(), "HTTP 401", expected] {
            assert!(notes.contains(said), "{said}: {notes}");
        }
        assert_never_shown(&printed, USERNAME, WRONG);
        assert_never_shown(&printed, USERNAME, PASSWORD);
    }
}

/// An Argo CD Application whose Helm source is the registry (`repoURL` without a scheme, as Argo
/// CD writes OCI Helm repositories, or with `oci://`), with Argo CD's `repository` Secret for it
/// (`enableOCI`) in the live cluster's Argo CD namespace: planned with `--read-secrets`; without,
/// external, saying so.
#[test]
fn an_argo_cd_helm_source_in_the_registry_is_read_with_argo_cds_repository_secret() {
    let registry = Locked::start();
    let access = registry.access();
    for repo_url in [format!("{}/charts", registry.host()), format!("oci://{}/charts", registry.host())] {
        let repo = crate::argo_helm_credentials::fleet(&repo_url);
        repo.write("apps/db.yaml", &application(&repo_url, "2.0.0"));
        repo.commit("db 2.0.0");
        let mut repository = argocd_secret("repository", "registry", &repo_url, USERNAME, PASSWORD);
        repository["data"]["enableOCI"] = json!(encode("true"));
        let fake = FakeKube::start(vec![repository]);

        let (plan, printed) = plan_live(&repo, &fake, &access, &["--read-secrets"]);
        let app = unit_in(&plan, "Application", "argocd/db");
        assert_eq!(
            sorted_changes(app),
            sorted_pairs(&[("create", "data_db-v2_apps_StatefulSet")]),
            "{repo_url}: {app:#}"
        );
        assert_never_shown(&printed, USERNAME, PASSWORD);
        assert_only_gets(&fake);

        let (plan, printed) = plan_live(&repo, &fake, &access, &[]);
        assert_ne!(plan["verdict"], "no-changes", "{plan:#}");
        let app = unit_in(&plan, "Application", "argocd/db");
        assert_eq!(app["status"], "external", "{app:#}");
        let notes = app.to_string();
        assert!(notes.contains("HTTP 401") && notes.contains("--read-secrets"), "{app:#}");
        assert_never_shown(&printed, USERNAME, PASSWORD);
    }
}
