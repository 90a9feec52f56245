//! Argo CD AppProjects read from the live cluster: an Application its project does not permit
//! (source repository, destination, or a project that does not exist) is refused as Argo CD
//! refuses it, before any chart is fetched, so a pull request cannot borrow another project's
//! repository credentials by naming that project.

use crate::argo_helm::root_application;
use crate::argo_helm_credentials::{argocd_secret, basic, encode, plan_live, private_repository_for};
use crate::argocd_live::crd;
use crate::fake_kube::FakeKube;
use crate::fixture::{sorted_changes, sorted_pairs, unit_in, Repo};
use crate::kube_view::assert_only_gets;
use serde_json::{json, Value};

const REMOTE: &str = "https://github.com/acme/argo-projects.git";
const TEAM_B_USER: &str = "team-b-reader";
const TEAM_B_PASSWORD: &str = "team-b-private-only";

/// AppProject `name` of Argo CD's namespace with these rules.
fn app_project(name: &str, source_repos: Value, destinations: Value) -> Value {
    json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {"sourceRepos": source_repos, "destinations": destinations}})
}

/// Application `argocd/charts` of `project`: chart `db` 1.1.0 of `repo_url` into `namespace`.
fn team_application(project: &str, repo_url: &str, namespace: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: charts\n  namespace: argocd\nspec:\n  \
         project: {project}\n  source:\n    repoURL: {repo_url}\n    chart: db\n    targetRevision: 1.1.0\n  \
         destination:\n    server: https://kubernetes.default.svc\n    namespace: {namespace}\n"
    )
}

/// An app-of-apps with no Application yet; the pull request adds `application`.
fn pull_request(application: &str) -> Repo {
    let repo = Repo::new(REMOTE);
    repo.write("root.yaml", &root_application(REMOTE));
    repo.write("apps/README.md", "Applications\n");
    repo.commit("base");
    repo.write("apps/charts.yaml", application);
    repo.commit("an Application");
    repo
}

/// The live cluster: Argo CD's CRDs, `projects`, and team-b's repository Secret for `repo_url`.
fn cluster(repo_url: &str, projects: Vec<Value>) -> FakeKube {
    let mut secret = argocd_secret("repository", "team-b-charts", repo_url, TEAM_B_USER, TEAM_B_PASSWORD);
    secret["data"]["project"] = json!(encode("team-b"));
    let mut objects = vec![crd("Application", "applications"), crd("AppProject", "appprojects"), secret];
    objects.extend(projects);
    FakeKube::start(objects)
}

fn assert_refused(plan: &Value, reasons: &[&str]) {
    let app = unit_in(plan, "Application", "argocd/charts");
    assert_eq!(app["status"], "failed", "{app:#}");
    let error = app["error"].to_string();
    for reason in reasons {
        assert!(error.contains(reason), "{reason} not in {app:#}");
    }
    assert_eq!(plan["verdict"], "blocked", "a refused Application blocks as a failed unit does: {plan:#}");
}

/// The attack: a pull request adds an Application in project team-b, whose repository Secret
/// opens a private chart, though team-b's AppProject permits neither that repository nor that
/// destination. Argo CD would refuse it; fluxplan says so and never sends team-b's credentials.
#[test]
fn an_application_its_project_does_not_permit_is_refused_before_any_chart_is_fetched() {
    let (server, _packages) = private_repository_for(TEAM_B_USER, TEAM_B_PASSWORD);
    let repo_url = format!("{}/charts", server.url());
    let repo = pull_request(&team_application("team-b", &repo_url, "payments"));
    let team_b = app_project(
        "team-b",
        json!(["https://github.com/acme/team-b-*"]),
        json!([{"server": "https://kubernetes.default.svc", "namespace": "team-b"}]),
    );
    let fake = cluster(&repo_url, vec![team_b]);
    let host = server.host();
    let extra = ["--read-secrets", "--chart-hosts", &host, "--insecure-registry", &host];

    let (plan, output) = plan_live(&repo, &fake, &extra);
    assert_refused(
        &plan,
        &[
            &format!("application repo {repo_url} is not permitted in project 'team-b'"),
            "application destination server 'https://kubernetes.default.svc' and namespace 'payments' do not \
             match any of the allowed destinations in project 'team-b'",
        ],
    );
    assert!(server.asked().is_empty(), "the chart server was asked: {:?}", server.asked());
    assert!(!server.authorizations().contains(&basic(TEAM_B_USER, TEAM_B_PASSWORD)));
    assert!(!output.contains(TEAM_B_PASSWORD), "{output}");
    assert_only_gets(&fake);
    assert!(
        fake.requests()
            .iter()
            .any(|(_, path)| path.starts_with("/apis/argoproj.io/v1alpha1/namespaces/argocd/appprojects")),
        "AppProjects are listed in Argo CD's namespace: {:?}",
        fake.requests()
    );
}

/// When team-b's project permits the repository (`*`) and the destination, its Application is
/// planned with team-b's credentials, as Argo CD syncs it.
#[test]
fn an_application_its_project_permits_renders_with_the_projects_credentials() {
    let (server, _packages) = private_repository_for(TEAM_B_USER, TEAM_B_PASSWORD);
    let repo_url = format!("{}/charts", server.url());
    let repo = pull_request(&team_application("team-b", &repo_url, "team-b"));
    let team_b = app_project(
        "team-b",
        json!(["*"]),
        json!([{"server": "https://kubernetes.default.svc", "namespace": "team-*"}]),
    );
    let fake = cluster(&repo_url, vec![team_b]);
    let host = server.host();
    let extra = ["--read-secrets", "--chart-hosts", &host, "--insecure-registry", &host];

    let (plan, _) = plan_live(&repo, &fake, &extra);
    let app = unit_in(&plan, "Application", "argocd/charts");
    assert_eq!(sorted_changes(app), sorted_pairs(&[("create", "team-b_db-v11_apps_StatefulSet")]), "{app:#}");
    let sent = server.authorizations();
    assert!(!sent.is_empty() && sent.iter().all(|a| *a == basic(TEAM_B_USER, TEAM_B_PASSWORD)), "{sent:?}");
}

/// A `!` pattern denies whatever else permits; a project the cluster does not hold refuses every
/// Application naming it. Neither needs `--read-secrets`: AppProjects are no Secrets.
#[test]
fn a_denial_wins_and_an_unknown_project_is_refused() {
    let (server, _packages) = private_repository_for(TEAM_B_USER, TEAM_B_PASSWORD);
    let repo_url = format!("{}/charts", server.url());
    let team_b = app_project(
        "team-b",
        json!(["*", format!("!{}/*", server.url())]),
        json!([{"server": "*", "namespace": "*"}]),
    );
    let host = server.host();
    let extra = ["--chart-hosts", &host, "--insecure-registry", &host];

    let denied = pull_request(&team_application("team-b", &repo_url, "team-b"));
    let fake = cluster(&repo_url, vec![team_b.clone()]);
    let (plan, _) = plan_live(&denied, &fake, &extra);
    assert_refused(&plan, &[&format!("application repo {repo_url} is not permitted in project 'team-b'")]);

    let unknown = pull_request(&team_application("team-c", &repo_url, "team-b"));
    let (plan, _) = plan_live(&unknown, &fake, &extra);
    assert_refused(&plan, &["Application referencing project team-c which does not exist"]);
    assert!(server.asked().is_empty(), "{:?}", server.asked());
    assert!(
        !fake.requests().iter().any(|(_, path)| path.contains("/secrets")),
        "no Secret is read without --read-secrets: {:?}",
        fake.requests()
    );
}
