//! AppProjects (argoproj.io/v1alpha1): which source repositories and destinations the
//! Applications of a project may use. Argo CD's controller checks them before it renders
//! anything and refuses an Application they do not permit (an InvalidSpecError condition): it
//! then applies nothing. The rules are Argo CD's (`IsSourcePermitted`, `isDestinationMatched`):
//! - `sourceRepos`: globs over normalized URLs with `/` as a separator (`*` permits every
//!   repository); a pattern with a leading `!` denies, and one denial wins over any permission.
//! - `destinations`: `server` or `name`, and `namespace`, globs without separators; `!` denies.
//!
//! Argo CD resolves a destination `name` to a server (and a server to its name) through its
//! cluster Secrets, which fluxplan does not read: only the in-cluster destination is known both
//! ways. When a project's rules need the side fluxplan does not know, the answer is
//! [`Permission::Unknown`], never a guess.

use super::application::{Application, Destination};
use super::glob::{Glob, TooComplex};
use super::text;
use serde_json::Value;
use std::collections::BTreeMap;

/// The project of an Application that names none, and the one Argo CD creates permitting all.
pub const DEFAULT_PROJECT: &str = "default";
/// The cluster Argo CD runs in, by name and by server.
const IN_CLUSTER_NAME: &str = "in-cluster";
const IN_CLUSTER_SERVER: &str = "https://kubernetes.default.svc";

/// One entry of `spec.destinations` (an absent field is the empty pattern, matching nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DestinationRule {
    pub server: String,
    pub name: String,
    pub namespace: String,
}

/// The parts of an AppProject that decide whether Argo CD syncs an Application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppProject {
    pub name: String,
    pub source_repos: Vec<String>,
    pub destinations: Vec<DestinationRule>,
    /// `permitOnlyProjectScopedClusters`: destinations must also be clusters scoped to the
    /// project (cluster Secrets fluxplan does not read).
    pub only_project_scoped_clusters: bool,
}

impl AppProject {
    /// Reads an AppProject manifest; `None` without a name.
    pub fn from_value(obj: &Value) -> Option<Self> {
        let name = text(&obj["metadata"], "name").filter(|n| !n.is_empty())?;
        let spec = &obj["spec"];
        let strings = |value: &Value| -> Vec<String> {
            value.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
        };
        let destinations = spec["destinations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| DestinationRule {
                server: text(d, "server").unwrap_or_default(),
                name: text(d, "name").unwrap_or_default(),
                namespace: text(d, "namespace").unwrap_or_default(),
            })
            .collect();
        Some(AppProject {
            name,
            source_repos: strings(&spec["sourceRepos"]),
            destinations,
            only_project_scoped_clusters: spec["permitOnlyProjectScopedClusters"] == Value::Bool(true),
        })
    }

    /// The `default` project as Argo CD creates it when the cluster holds none: everything.
    fn permit_all(name: &str) -> Self {
        AppProject {
            name: name.to_string(),
            source_repos: vec!["*".into()],
            destinations: vec![DestinationRule {
                server: "*".into(),
                name: "*".into(),
                namespace: "*".into(),
            }],
            only_project_scoped_clusters: false,
        }
    }

    /// Whether an Application of this project may read `repo_url`.
    pub fn permits_source(&self, repo_url: &str) -> Result<bool, TooComplex> {
        let wanted = normalize_git_url(repo_url);
        let mut permitted = false;
        for pattern in &self.source_repos {
            let pattern = match pattern.strip_prefix('!') {
                Some(denied) => format!("!{}", normalize_git_url(denied)),
                None => normalize_git_url(pattern),
            };
            if glob_match(&pattern, &wanted, Some('/'))? {
                permitted = true;
            } else if is_deny(&pattern) {
                return Ok(false);
            }
        }
        Ok(permitted)
    }

    /// Whether the resolved destination matches the project's destinations.
    fn permits_destination(&self, target: &Target) -> Result<bool, TooComplex> {
        let side = |value: &Option<String>, pattern: &str| match value {
            Some(value) => glob_match(pattern, value, None),
            None => Ok(false),
        };
        let mut permitted = false;
        for rule in &self.destinations {
            let name = side(&target.name, &rule.name)?;
            let server = side(&target.server, &rule.server)?;
            let namespace = glob_match(&rule.namespace, &target.namespace, None)?;
            if (server || name) && namespace {
                permitted = true;
            } else if (!name && is_deny(&rule.name)) || (!server && is_deny(&rule.server)) && namespace {
                // The precedence is Argo CD's: a denied name refuses whatever the namespace.
                return Ok(false);
            } else if !namespace && is_deny(&rule.namespace) && server {
                return Ok(false);
            }
        }
        Ok(permitted)
    }
}

/// The AppProjects of Argo CD's namespace, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppProjects(BTreeMap<String, AppProject>);

impl AppProjects {
    pub fn new(projects: impl IntoIterator<Item = AppProject>) -> Self {
        AppProjects(projects.into_iter().map(|p| (p.name.clone(), p)).collect())
    }

    /// A project by name; `default` permits everything unless the cluster defines it.
    pub fn get(&self, name: &str) -> Option<AppProject> {
        match self.0.get(name) {
            Some(project) => Some(project.clone()),
            None if name == DEFAULT_PROJECT => Some(AppProject::permit_all(DEFAULT_PROJECT)),
            None => None,
        }
    }
}

/// What Argo CD does with an Application, as its project decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    Permitted,
    /// Argo CD refuses it; its conditions' messages.
    Refused(Vec<String>),
    /// Only what fluxplan does not read would tell; why.
    Unknown(String),
}

/// Whether the project of `app` permits every source and the destination.
pub fn check(app: &Application, projects: &AppProjects) -> Permission {
    let name = if app.project.is_empty() { DEFAULT_PROJECT } else { app.project.as_str() };
    let Some(project) = projects.get(name) else {
        return Permission::Refused(vec![format!(
            "Application referencing project {name} which does not exist"
        )]);
    };
    match refusals(app, &project) {
        Ok(refusals) if refusals.is_empty() => Permission::Permitted,
        Ok(refusals) => Permission::Refused(refusals),
        Err(why) => Permission::Unknown(why),
    }
}

/// Argo CD's messages for what the project does not permit; `Err` when fluxplan cannot tell.
fn refusals(app: &Application, project: &AppProject) -> Result<Vec<String>, String> {
    let too_complex = |e: TooComplex| format!("a pattern of AppProject {}: {e}", project.name);
    let mut refusals = Vec::new();
    for source in &app.sources {
        if !project.permits_source(&source.repo_url).map_err(too_complex)? {
            refusals.push(format!(
                "application repo {} is not permitted in project '{}'",
                crate::git::redact_url(&source.repo_url),
                project.name
            ));
        }
    }
    let target = match Target::resolve(&app.destination) {
        Ok(target) => target,
        Err(refusal) => {
            refusals.push(refusal);
            return Ok(refusals);
        }
    };
    if let Some(unknown) = target.unknown_side(project) {
        return Err(unknown);
    }
    if !project.permits_destination(&target).map_err(too_complex)? {
        let shown = app.destination.name.as_deref().or(target.server.as_deref()).unwrap_or("");
        refusals.push(format!(
            "application destination server '{shown}' and namespace '{}' do not match any of the allowed \
             destinations in project '{}'",
            target.namespace, project.name
        ));
    } else if project.only_project_scoped_clusters {
        return Err(format!(
            "AppProject {} permits only its own clusters, which Argo CD's cluster Secrets name and fluxplan \
             does not read",
            project.name
        ));
    }
    Ok(refusals)
}

/// The destination cluster as Argo CD resolves it: `None` for the side only its cluster Secrets
/// know.
struct Target {
    server: Option<String>,
    name: Option<String>,
    namespace: String,
}

impl Target {
    /// `Err` with Argo CD's message when it cannot resolve the destination at all.
    fn resolve(destination: &Destination) -> Result<Self, String> {
        let namespace = destination.namespace.clone().unwrap_or_default();
        let (server, name) = match (&destination.server, &destination.name) {
            (Some(server), Some(name)) => {
                return Err(format!(
                    "application destination can't have both name and server defined: {name} {server}"
                ))
            }
            (Some(server), None) => {
                let server = server.trim_end_matches('/').to_string();
                let name = (server == IN_CLUSTER_SERVER).then(|| IN_CLUSTER_NAME.to_string());
                (Some(server), name)
            }
            (None, Some(name)) => {
                let server = (name == IN_CLUSTER_NAME).then(|| IN_CLUSTER_SERVER.to_string());
                (server, Some(name.clone()))
            }
            (None, None) => return Err("Destination server missing from app spec".into()),
        };
        Ok(Target { server, name, namespace })
    }

    /// Why the project's answer is not known: a rule matches on the side not resolved.
    fn unknown_side(&self, project: &AppProject) -> Option<String> {
        let (missing, known, uses_missing): (&str, &str, fn(&DestinationRule) -> bool) =
            match (&self.server, &self.name) {
                (None, Some(name)) => ("server", name, |r| !r.server.is_empty()),
                (Some(server), None) => ("name", server, |r| !r.name.is_empty()),
                _ => return None,
            };
        project.destinations.iter().any(uses_missing).then(|| {
            format!(
                "AppProject {} matches destinations by cluster {missing}, and the {missing} of cluster {known} is \
                 in Argo CD's cluster Secrets, which fluxplan does not read",
                project.name
            )
        })
    }
}

/// Argo CD's `globMatch`: `!` negates when allowed, `*` matches everything, a pattern that does
/// not compile matches nothing.
fn glob_match(pattern: &str, value: &str, separator: Option<char>) -> Result<bool, TooComplex> {
    if let Some(denied) = pattern.strip_prefix('!') {
        return Ok(!compiled_match(denied, value, separator)?);
    }
    Ok(pattern == "*" || compiled_match(pattern, value, separator)?)
}

fn compiled_match(pattern: &str, value: &str, separator: Option<char>) -> Result<bool, TooComplex> {
    let glob = match separator {
        Some(separator) => Glob::with_separator(pattern, separator)?,
        None => Glob::new(pattern)?,
    };
    Ok(glob.is_some_and(|g| g.is_match(value)))
}

fn is_deny(pattern: &str) -> bool {
    pattern.starts_with('!')
}

/// A repository URL as Argo CD compares it with `sourceRepos` (its `NormalizeGitURL`): lower
/// case, `user@host:path` as `user@host/path`, no `ssh://` scheme, no `.git` suffix. Unlike
/// `argocd::normalize_repo_url` the scheme and user stay: patterns may name them.
pub fn normalize_git_url(url: &str) -> String {
    let mut repo = url.trim().to_lowercase();
    if is_ssh_url(&repo) && !repo.starts_with("ssh://") {
        repo = format!("ssh://{}", repo.replacen(':', "/", 1));
    }
    let repo = repo.strip_suffix(".git").unwrap_or(&repo);
    repo.strip_prefix("ssh://").unwrap_or(repo).to_string()
}

/// `[ssh://]user@rest`, the user without `/` or `:` and the rest without `@` (Argo CD's test).
fn is_ssh_url(url: &str) -> bool {
    let rest = url.strip_prefix("ssh://").unwrap_or(url);
    match rest.split_once('@') {
        Some((user, host_and_path)) => {
            !user.contains(['/', ':']) && !host_and_path.is_empty() && !host_and_path.contains('@')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn project(spec: Value) -> AppProjects {
        let manifest = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
            "metadata": {"name": "team-b", "namespace": "argocd"}, "spec": spec});
        AppProjects::new(AppProject::from_value(&manifest))
    }

    fn app(project: &str, repo: &str, destination: Value) -> Application {
        let manifest = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "web", "namespace": "argocd"},
            "spec": {"project": project, "source": {"repoURL": repo, "chart": "web", "targetRevision": "1.0.0"},
                     "destination": destination}});
        Application::from_value(&manifest, "argocd").expect("an Application")
    }

    fn in_cluster(namespace: &str) -> Value {
        json!({"server": "https://kubernetes.default.svc", "namespace": namespace})
    }

    #[test]
    fn a_repository_the_project_does_not_list_is_refused_in_argo_cds_words() {
        let projects = project(json!({"sourceRepos": ["https://charts.team-b.example/*"],
            "destinations": [{"server": "*", "namespace": "team-b"}]}));
        let refused =
            check(&app("team-b", "https://charts.private.example/x", in_cluster("team-b")), &projects);
        assert_eq!(
            refused,
            Permission::Refused(vec![
                "application repo https://charts.private.example/x is not permitted in project 'team-b'"
                    .into()
            ])
        );
        let permitted = app("team-b", "https://charts.team-b.example/web", in_cluster("team-b"));
        assert_eq!(check(&permitted, &projects), Permission::Permitted);
    }

    #[test]
    fn source_globs_stop_at_slashes_and_compare_normalized_urls() {
        let projects = project(json!({"sourceRepos": ["https://github.com/Org/*"],
            "destinations": [{"server": "*", "namespace": "*"}]}));
        let repo = |url: &str| projects.get("team-b").unwrap().permits_source(url).unwrap();
        assert!(repo("https://github.com/org/app.git"), "case and .git ignored");
        assert!(!repo("https://github.com/org/app/nested"), "`*` stops at /");
        assert!(!repo("http://github.com/org/app"), "the scheme is part of the URL");
        assert_eq!(normalize_git_url("git@GitHub.com:org/app.git"), "git@github.com/org/app");
        assert_eq!(normalize_git_url("ssh://git@github.com/org/app"), "git@github.com/org/app");
    }

    #[test]
    fn a_denial_wins_and_a_star_permits() {
        let projects = project(json!({"sourceRepos": ["*", "!https://charts.private.example/*"],
            "destinations": [{"server": "*", "namespace": "*"}]}));
        let denied = app("team-b", "https://charts.private.example/x", in_cluster("web"));
        assert!(matches!(check(&denied, &projects), Permission::Refused(_)));
        let other = app("team-b", "https://charts.public.example/x", in_cluster("web"));
        assert_eq!(check(&other, &projects), Permission::Permitted);
    }

    #[test]
    fn destinations_match_server_or_name_and_namespace_and_denials_win() {
        let projects = project(json!({"sourceRepos": ["*"], "destinations": [
            {"server": "https://kubernetes.default.svc", "namespace": "team-*"},
            {"server": "*", "namespace": "!kube-system"}]}));
        let allowed = app("team-b", "https://x.example/r", in_cluster("team-b"));
        assert_eq!(check(&allowed, &projects), Permission::Permitted);
        let by_name =
            app("team-b", "https://x.example/r", json!({"name": "in-cluster", "namespace": "team-b"}));
        assert_eq!(check(&by_name, &projects), Permission::Permitted, "in-cluster is known both ways");
        let system = app("team-b", "https://x.example/r", in_cluster("kube-system"));
        assert_eq!(
            check(&system, &projects),
            Permission::Refused(vec!["application destination server 'https://kubernetes.default.svc' and \
                 namespace 'kube-system' do not match any of the allowed destinations in project 'team-b'"
                .into()])
        );
    }

    #[test]
    fn a_cluster_named_by_what_fluxplan_cannot_resolve_is_unknown() {
        let projects = project(json!({"sourceRepos": ["*"],
            "destinations": [{"server": "https://prod.example", "namespace": "*"}]}));
        let named = app("team-b", "https://x.example/r", json!({"name": "prod", "namespace": "web"}));
        assert!(
            matches!(check(&named, &projects), Permission::Unknown(why) if why.contains("cluster server"))
        );
        let by_name =
            project(json!({"sourceRepos": ["*"], "destinations": [{"name": "prod", "namespace": "*"}]}));
        assert_eq!(check(&named, &by_name), Permission::Permitted, "a rule by name needs no server");
    }

    #[test]
    fn projects_are_found_by_name_and_default_permits_all_unless_defined() {
        let projects =
            project(json!({"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}]}));
        let unknown = app("team-c", "https://x.example/r", in_cluster("web"));
        assert_eq!(
            check(&unknown, &projects),
            Permission::Refused(vec!["Application referencing project team-c which does not exist".into()])
        );
        assert_eq!(
            check(&app("", "https://x.example/r", in_cluster("web")), &projects),
            Permission::Permitted
        );
        let strict_default =
            AppProjects::new(AppProject::from_value(&json!({"metadata": {"name": "default"},
            "spec": {"sourceRepos": ["https://only.example/*"]}})));
        assert!(matches!(
            check(&app("default", "https://x.example/r", in_cluster("web")), &strict_default),
            Permission::Refused(r) if r.len() == 2
        ));
    }

    #[test]
    fn both_or_neither_destination_field_is_refused_as_argo_cd_does() {
        let projects = AppProjects::default();
        let both =
            app("", "https://x.example/r", json!({"name": "a", "server": "https://b", "namespace": "n"}));
        assert!(
            matches!(check(&both, &projects), Permission::Refused(r) if r[0].contains("both name and server"))
        );
        let neither = app("", "https://x.example/r", json!({"namespace": "n"}));
        assert!(
            matches!(check(&neither, &projects), Permission::Refused(r) if r[0].contains("server missing"))
        );
    }
}
