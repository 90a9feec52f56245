//! Which of Argo CD's repository Secrets gives the credentials for a `repoURL`, as its
//! repository database picks them (util/db/repository_secrets.go): Secrets of Argo CD's namespace
//! labelled `argocd.argoproj.io/secret-type: repository` name one repository by its URL;
//! `repo-creds` Secrets are templates whose URL is a prefix. A repository Secret of the same URL
//! (the Application's project first, else one with no project) wins when it holds credentials;
//! otherwise the template with the longest matching prefix does.
//!
//! One deliberate difference: Argo CD matches a template by plain string prefix, so
//! `https://charts.example.com` also matches `https://charts.example.com.evil.net/`. Here a
//! prefix matches only on a path boundary (the whole URL, or followed by `/`): a pull request
//! may point a source anywhere, and a template's credentials must never reach another host (nor
//! another port, nor a user-info trick). Where Argo CD would send them and fluxplan does not,
//! the fetch is refused and the Application is reported external, never planned as unchanged.

use std::collections::BTreeMap;

/// The label that says what an Argo CD Secret is.
pub const SECRET_TYPE_LABEL: &str = "argocd.argoproj.io/secret-type";
/// The label selector of the Secrets read here (one list).
pub const SELECTOR: &str = "argocd.argoproj.io/secret-type in (repository,repo-creds)";

/// Fields that make Argo CD take a Secret as holding credentials (`Repository.HasCredentials`).
const CREDENTIAL_FIELDS: &[&str] = &[
    "username",
    "password",
    "bearerToken",
    "sshPrivateKey",
    "tlsClientCertData",
    "githubAppPrivateKey",
    "azureServicePrincipalClientSecret",
];

/// One repository or credential-template Secret, its values decoded. Never shown: `Debug`
/// names it only.
#[derive(Clone, PartialEq, Eq)]
pub struct RepositorySecret {
    /// `namespace/name`.
    pub name: String,
    /// A `repo-creds` template (its URL a prefix), else a `repository`.
    pub template: bool,
    values: BTreeMap<String, String>,
}

impl std::fmt::Debug for RepositorySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RepositorySecret({}, values hidden)", self.name)
    }
}

/// What a matching Secret gives a Helm chart fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Login<'a> {
    Basic {
        username: &'a str,
        password: &'a str,
    },
    /// Credentials of a kind fluxplan does not send (a client certificate, a bearer token, a
    /// cloud identity): the field that says so.
    Unsupported(&'static str),
}

impl RepositorySecret {
    /// A Secret as the cluster lists it (`secret_type` its label's value), `values` decoded.
    /// `None` for a Secret of another type.
    pub fn new(name: String, secret_type: &str, values: BTreeMap<String, String>) -> Option<Self> {
        let template = match secret_type {
            "repository" => false,
            "repo-creds" => true,
            _ => return None,
        };
        Some(RepositorySecret { name, template, values })
    }

    fn value(&self, key: &str) -> &str {
        self.values.get(key).map(String::as_str).unwrap_or("")
    }

    fn url(&self) -> &str {
        self.value("url")
    }

    fn has_credentials(&self) -> bool {
        CREDENTIAL_FIELDS.iter().any(|field| !self.value(field).is_empty())
            || self.value("useAzureWorkloadIdentity") == "true"
    }

    /// What it gives a Helm fetch: username and password, else the kind it holds.
    pub fn login(&self) -> Login<'_> {
        let (username, password) = (self.value("username"), self.value("password"));
        if !username.is_empty() || !password.is_empty() {
            return Login::Basic { username, password };
        }
        let other = CREDENTIAL_FIELDS.iter().find(|field| !self.value(field).is_empty());
        Login::Unsupported(other.copied().unwrap_or("useAzureWorkloadIdentity"))
    }
}

/// The Secret whose credentials Argo CD uses for `repo_url` in `project`, if any holds some.
pub fn find<'a>(
    secrets: &'a [RepositorySecret],
    repo_url: &str,
    project: &str,
) -> Option<&'a RepositorySecret> {
    let wanted = normalize(repo_url);
    if wanted.is_empty() {
        return None;
    }
    let repositories = || secrets.iter().filter(|s| !s.template && normalize(s.url()) == wanted);
    let repository = repositories()
        .find(|s| s.value("project") == project)
        .or_else(|| repositories().find(|s| s.value("project").is_empty()));
    if let Some(repository) = repository.filter(|r| r.has_credentials()) {
        return Some(repository);
    }
    // A repository Secret without credentials inherits a template's.
    secrets
        .iter()
        .filter(|s| s.template && s.has_credentials())
        .filter(|s| is_prefix_on_path_boundary(&normalize(s.url()), &wanted))
        .max_by_key(|s| normalize(s.url()).len())
}

/// A URL as Argo CD compares repository URLs: trimmed, lower-cased, without a `.git` suffix.
fn normalize(url: &str) -> String {
    let url = url.trim().to_ascii_lowercase();
    url.strip_suffix(".git").map(str::to_string).unwrap_or(url)
}

/// True when `url` is `prefix`, or continues it after a `/`.
fn is_prefix_on_path_boundary(prefix: &str, url: &str) -> bool {
    if prefix.is_empty() {
        return false;
    }
    match url.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || prefix.ends_with('/') || rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(name: &str, kind: &str, pairs: &[(&str, &str)]) -> RepositorySecret {
        let values = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        RepositorySecret::new(format!("argocd/{name}"), kind, values).unwrap()
    }

    fn found<'a>(secrets: &'a [RepositorySecret], url: &str) -> Option<&'a str> {
        find(secrets, url, "default").map(|s| s.name.as_str())
    }

    #[test]
    fn a_template_never_matches_another_host_that_merely_starts_like_it() {
        let secrets = [secret(
            "charts",
            "repo-creds",
            &[("url", "https://charts.example.com"), ("username", "u"), ("password", "p")],
        )];
        for hostile in [
            "https://charts.example.com.evil.net/",
            "https://charts.example.com.evil.net",
            "https://charts.example.com@evil.net/charts",
            "https://charts.example.com:8443/charts",
            "https://charts.example.community/charts",
            "http://charts.example.com/charts",
            "oci://charts.example.com/charts",
        ] {
            assert_eq!(found(&secrets, hostile), None, "{hostile}");
        }
        assert_eq!(found(&secrets, "https://charts.example.com/stable"), Some("argocd/charts"));
        assert_eq!(found(&secrets, "https://charts.example.com"), Some("argocd/charts"));
        assert_eq!(found(&secrets, "HTTPS://Charts.Example.com/stable"), Some("argocd/charts"));
    }

    #[test]
    fn a_template_on_a_path_matches_below_that_path_only() {
        let secrets = [secret(
            "team",
            "repo-creds",
            &[("url", "https://charts.example.com/team/"), ("username", "u"), ("password", "p")],
        )];
        assert_eq!(found(&secrets, "https://charts.example.com/team/stable"), Some("argocd/team"));
        assert_eq!(found(&secrets, "https://charts.example.com/team-b/stable"), None);
        let without_slash = [secret(
            "team",
            "repo-creds",
            &[("url", "https://charts.example.com/team"), ("username", "u"), ("password", "p")],
        )];
        assert_eq!(found(&without_slash, "https://charts.example.com/team-b"), None);
        assert_eq!(found(&without_slash, "https://charts.example.com/team/x"), Some("argocd/team"));
    }

    #[test]
    fn the_longest_template_wins_and_a_repository_of_the_exact_url_wins_over_templates() {
        fn with(url: &str) -> [(&str, &str); 3] {
            [("url", url), ("username", "u"), ("password", "p")]
        }
        let mut secrets = vec![
            secret("host", "repo-creds", &with("https://charts.example.com")),
            secret("team", "repo-creds", &with("https://charts.example.com/team")),
        ];
        assert_eq!(found(&secrets, "https://charts.example.com/team/stable"), Some("argocd/team"));
        assert_eq!(found(&secrets, "https://charts.example.com/other"), Some("argocd/host"));
        secrets.push(secret("exact", "repository", &with("https://charts.example.com/team/stable.git")));
        assert_eq!(found(&secrets, "https://charts.example.com/team/stable"), Some("argocd/exact"));
        // A repository Secret without credentials inherits the template's.
        secrets.pop();
        secrets.push(secret("bare", "repository", &[("url", "https://charts.example.com/team/stable")]));
        assert_eq!(found(&secrets, "https://charts.example.com/team/stable"), Some("argocd/team"));
    }

    #[test]
    fn a_repository_scoped_to_another_project_is_not_used() {
        let secrets = [
            secret(
                "theirs",
                "repository",
                &[
                    ("url", "https://charts.example.com"),
                    ("project", "payments"),
                    ("username", "a"),
                    ("password", "b"),
                ],
            ),
            secret(
                "shared",
                "repository",
                &[("url", "https://charts.example.com"), ("username", "c"), ("password", "d")],
            ),
        ];
        assert_eq!(find(&secrets, "https://charts.example.com", "default").unwrap().name, "argocd/shared");
        assert_eq!(find(&secrets, "https://charts.example.com", "payments").unwrap().name, "argocd/theirs");
        assert_eq!(find(&secrets[..1], "https://charts.example.com", "default"), None);
    }

    #[test]
    fn registries_without_a_scheme_match_by_host_and_path() {
        let secrets = [secret(
            "registry",
            "repository",
            &[
                ("url", "registry.example.com/charts"),
                ("enableOCI", "true"),
                ("username", "u"),
                ("password", "p"),
            ],
        )];
        assert_eq!(found(&secrets, "registry.example.com/charts"), Some("argocd/registry"));
        assert_eq!(found(&secrets, "registry.example.com.evil.net/charts"), None);
    }

    #[test]
    fn logins_and_what_is_not_sent() {
        let basic =
            secret("a", "repository", &[("url", "u"), ("username", "reader"), ("password", "s3cret")]);
        assert_eq!(basic.login(), Login::Basic { username: "reader", password: "s3cret" });
        let tls = secret("b", "repository", &[("url", "u"), ("tlsClientCertData", "PEM")]);
        assert_eq!(tls.login(), Login::Unsupported("tlsClientCertData"));
        assert!(RepositorySecret::new("argocd/c".into(), "cluster", BTreeMap::new()).is_none());
        let shown = format!("{basic:?}");
        assert!(!shown.contains("s3cret") && !shown.contains("reader"), "{shown}");
    }
}
