//! The credentials an Argo CD Helm source is fetched with: Argo CD's repository Secrets of the
//! live cluster (`argocd::repository_credentials` picks one for the source's `repoURL`), never a
//! Secret a render holds. What the plan says when a chart wants credentials fluxplan lacks.

use crate::argocd::repository_credentials::{self, Login};
use crate::charts::fetch::{wants_credentials, Auth};
use crate::cluster::SubstitutionSource;

/// What a Helm source's chart is fetched with.
pub enum Credentials {
    /// A Secret of Argo CD's namespace (`namespace/name`) gives them.
    Found { secret: String, auth: Auth },
    /// No Secret of Argo CD's holds credentials for the URL: fetched anonymously, as Argo CD does.
    None,
    /// Only the cluster knows (no live cluster, no `--read-secrets`): fetched anonymously; why.
    Unknown(String),
}

impl Credentials {
    /// The credentials for the source `repo_url` of an Application of `project`; `Err` when the
    /// matching Secret holds credentials of a kind fluxplan does not send.
    pub fn of(cluster: &dyn SubstitutionSource, repo_url: &str, project: &str) -> Result<Self, String> {
        let secrets = match cluster.argocd_repository_secrets() {
            Ok(secrets) => secrets,
            Err(why) => return Ok(Credentials::Unknown(why)),
        };
        let Some(secret) = repository_credentials::find(&secrets, repo_url, project) else {
            return Ok(Credentials::None);
        };
        match secret.login() {
            Login::Basic { username, password } => Ok(Credentials::Found {
                secret: secret.name.clone(),
                auth: Auth::Basic { username: username.to_string(), password: password.to_string() },
            }),
            Login::Unsupported(field) => Err(format!(
                "Argo CD's Secret {} gives its credentials as {field}, which fluxplan does not send",
                secret.name
            )),
        }
    }

    pub fn auth(&self) -> Option<&Auth> {
        match self {
            Credentials::Found { auth, .. } => Some(auth),
            _ => None,
        }
    }

    /// Why the chart could not be had (`why`, the fetch's message), and when the server wants
    /// credentials, what would give them.
    pub fn explain(&self, why: &str) -> String {
        if !wants_credentials(why) {
            return why.to_string();
        }
        match self {
            Credentials::Found { secret, .. } => {
                format!("{why}: the repository refused the credentials of Argo CD's Secret {secret}")
            }
            Credentials::None => format!(
                "{why}: it wants credentials, and none of Argo CD's repository or repo-creds Secrets holds some for it"
            ),
            Credentials::Unknown(reason) => format!("{why}: it wants credentials; {reason}"),
        }
    }
}
