//! Argo CD Helm sources from a private Helm repository: the chart is fetched with the
//! credentials of Argo CD's repository Secrets, read from its namespace in the live cluster
//! (`--kube --read-secrets`, GET and LIST only) and never from what a pull request renders; a
//! credential template's URL never matches another host; without the credentials the Application
//! is external and says what to give.

use crate::argo_helm::root_application;
use crate::fake_kube::FakeKube;
use crate::fixture::{plan_json, sorted_changes, sorted_pairs, unit_in, Repo};
use crate::helm_fetch::{package, Static};
use crate::kube_view::{assert_only_gets, plan_as};
use base64::Engine as _;
use serde_json::{json, Value};

const REMOTE: &str = "https://github.com/acme/argo-private-charts.git";
const USERNAME: &str = "argo-reader";
const PASSWORD: &str = "hunter2-argo-only";

pub(crate) fn encode(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The `Authorization` header HTTP Basic authentication sends for `username:password`.
pub(crate) fn basic(username: &str, password: &str) -> String {
    format!("Basic {}", encode(&format!("{username}:{password}")))
}

/// A private Helm repository serving chart `db` 1.0.0 (StatefulSet `db`) and 1.1.0 (`db-v11`).
fn private_repository() -> (Static, tempfile::TempDir) {
    private_repository_for(USERNAME, PASSWORD)
}

/// The same, opened by `username` and `password`.
pub(crate) fn private_repository_for(username: &str, password: &str) -> (Static, tempfile::TempDir) {
    let packages = tempfile::tempdir().unwrap();
    package(packages.path(), "1.0.0", "db");
    package(packages.path(), "1.1.0", "db-v11");
    (Static::private_repository(packages.path(), Some(basic(username, password))), packages)
}

/// An Argo CD repository Secret (`secret_type` repository or repo-creds) as the cluster has it.
pub(crate) fn argocd_secret(
    secret_type: &str,
    name: &str,
    url: &str,
    username: &str,
    password: &str,
) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": "argocd",
            "labels": {"argocd.argoproj.io/secret-type": secret_type}},
        "data": {"type": encode("helm"), "url": encode(url), "username": encode(username), "password": encode(password)}})
}

pub(crate) fn application(repo_url: &str, version: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: db\n  namespace: argocd\nspec:\n  project: default\n  \
         source:\n    repoURL: {repo_url}\n    chart: db\n    targetRevision: {version}\n  destination:\n    \
         server: https://kubernetes.default.svc\n    namespace: data\n  syncPolicy:\n    automated: {{prune: true}}\n"
    )
}

/// An app-of-apps `apps` (a directory of this repository) whose Application `db` is chart `db`
/// 1.0.0 of `repo_url`; committed as the base.
pub(crate) fn fleet(repo_url: &str) -> Repo {
    let repo = Repo::new(REMOTE);
    repo.write("root.yaml", &root_application(REMOTE));
    repo.write("apps/db.yaml", &application(repo_url, "1.0.0"));
    repo.commit("base");
    repo
}

/// `fluxplan plan` of HEAD~1..HEAD against `fake`: the JSON plan, and stdout with stderr.
pub(crate) fn plan_live(repo: &Repo, fake: &FakeKube, extra: &[&str]) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr, _) = plan_as(repo, &fake.kubeconfig(dir.path()), "json", extra);
    let plan = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    (plan, format!("{stdout}\n{stderr}"))
}

fn assert_external_for_want_of_credentials(plan: &Value, what_to_give: &str) {
    let app = unit_in(plan, "Application", "argocd/db");
    assert_eq!(app["status"], "external", "{app:#}");
    let notes = app.to_string();
    assert!(notes.contains("wants credentials") && notes.contains(what_to_give), "{app:#}");
    assert_ne!(plan["verdict"], "no-changes", "{plan:#}");
}

/// With the live cluster's repository Secret the chart bump is planned; without `--read-secrets`
/// or without a cluster the Application is external and says to plan with both.
#[test]
fn a_private_helm_repository_is_read_with_argo_cds_repository_credentials() {
    let (server, _packages) = private_repository();
    let repo_url = format!("{}/charts", server.url());
    let repo = fleet(&repo_url);
    repo.write("apps/db.yaml", &application(&repo_url, "1.1.0"));
    repo.commit("db 1.1.0");
    let fake =
        FakeKube::start(vec![argocd_secret("repository", "private-charts", &repo_url, USERNAME, PASSWORD)]);
    let host = server.host();
    let access = ["--chart-hosts", &host, "--insecure-registry", &host];

    let (plan, output) = plan_live(&repo, &fake, &[&access[..], &["--read-secrets"]].concat());
    for secret in [PASSWORD.to_string(), encode(PASSWORD), basic(USERNAME, PASSWORD)] {
        assert!(!output.contains(&secret), "a credential shows: {output}");
    }
    // The live cluster has no such Application yet: what its sync creates.
    let app = unit_in(&plan, "Application", "argocd/db");
    assert_eq!(sorted_changes(app), sorted_pairs(&[("create", "data_db-v11_apps_StatefulSet")]), "{app:#}");
    let sent = server.authorizations();
    assert!(!sent.is_empty() && sent.iter().all(|a| *a == basic(USERNAME, PASSWORD)), "{sent:?}");
    assert_only_gets(&fake);
    assert!(
        fake.requests().iter().any(|(_, path)| path.contains("/namespaces/argocd/secrets")
            && path.contains("argocd.argoproj.io%2Fsecret-type")),
        "one labelled list of Argo CD's Secrets: {:?}",
        fake.requests()
    );

    // The same cluster without --read-secrets: the Secret is not read, the chart is not had.
    let (plan, _) = plan_live(&repo, &fake, &access);
    assert_external_for_want_of_credentials(&plan, "--read-secrets");
    // No cluster at all.
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &access);
    assert_external_for_want_of_credentials(&plan, "plan with a cluster and --read-secrets");
    let sent = server.authorizations();
    assert!(sent.iter().all(|a| *a == basic(USERNAME, PASSWORD)), "{sent:?}");
}

/// A pull request points a Helm source at another host whose URL starts with a credential
/// template's URL (Argo CD's own prefix match would take it): the template's credentials are
/// never sent there, though the operator allows both hosts.
#[test]
fn a_credential_template_never_sends_its_credentials_to_another_host() {
    let (trusted, _packages) = private_repository();
    let (other, _other_packages) = private_repository();
    // `http://127.0.0.1:A@127.0.0.1:B/charts` starts with the template's `http://127.0.0.1:A`,
    // but its host is B (what precedes `@` is user information).
    let hostile = format!("http://127.0.0.1:{}@{}/charts", trusted.port, other.host());
    let repo = fleet(&format!("{}/charts", trusted.url()));
    repo.write("apps/db.yaml", &application(&hostile, "1.1.0"));
    repo.commit("db from elsewhere");
    let fake =
        FakeKube::start(vec![argocd_secret("repo-creds", "all-charts", &trusted.url(), USERNAME, PASSWORD)]);
    let (trusted_host, other_host) = (trusted.host(), other.host());
    let hosts = format!("{trusted_host},{other_host}");
    let extra = ["--read-secrets", "--chart-hosts", &hosts, "--insecure-registry", &hosts];
    let (plan, output) = plan_live(&repo, &fake, &extra);
    assert!(other.authorizations().is_empty(), "sent to another host: {:?}", other.authorizations());
    assert!(!other.asked().is_empty(), "the other host was asked (anonymously)");
    assert!(!output.contains(PASSWORD), "{output}");
    assert_external_for_want_of_credentials(&plan, "none of Argo CD's repository or repo-creds Secrets");
}

/// A pull request adds its own `repository` Secret for the private repository: never read. Without
/// a cluster nothing is sent; with one, only the live cluster's credentials are.
#[test]
fn a_pull_request_cannot_bring_its_own_repository_secret() {
    let (server, _packages) = private_repository();
    let repo_url = format!("{}/charts", server.url());
    let repo = fleet(&repo_url);
    repo.write("apps/db.yaml", &application(&repo_url, "1.1.0"));
    // An exact repository Secret would win over the cluster's template, were it read.
    repo.write(
        "apps/credentials.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: pr-charts\n  namespace: argocd\n  labels:\n    \
             argocd.argoproj.io/secret-type: repository\nstringData:\n  type: helm\n  url: {repo_url}\n  \
             username: pr-user\n  password: pr-password\n"
        ),
    );
    repo.commit("db 1.1.0, with credentials of its own");
    let host = server.host();
    let access = ["--chart-hosts", &host, "--insecure-registry", &host];

    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &access);
    assert_external_for_want_of_credentials(&plan, "--read-secrets");
    assert!(server.authorizations().is_empty(), "{:?}", server.authorizations());

    let fake =
        FakeKube::start(vec![argocd_secret("repo-creds", "all-charts", &server.url(), USERNAME, PASSWORD)]);
    let (plan, _) = plan_live(&repo, &fake, &[&access[..], &["--read-secrets"]].concat());
    let app = unit_in(&plan, "Application", "argocd/db");
    assert_eq!(sorted_changes(app), sorted_pairs(&[("create", "data_db-v11_apps_StatefulSet")]), "{app:#}");
    let sent = server.authorizations();
    assert!(!sent.is_empty() && sent.iter().all(|a| *a == basic(USERNAME, PASSWORD)), "{sent:?}");
}
