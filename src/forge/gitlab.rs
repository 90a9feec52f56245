//! GitLab through the `gitlab` crate: merge request notes, commit statuses, memberships and award
//! emoji. Endpoints the crate lacks (deleting a note, listing with filters) are small `Endpoint`
//! implementations of our own.

use super::roles::Role;
use super::webhook::timestamp_ms;
use super::{Comment, ForgeError, PullInfo, Reaction, RepoInfo, StatusState};
use gitlab::api::projects::members::AllProjectMember;
use gitlab::api::projects::merge_requests::notes::awards::CreateMergeRequestNoteAward;
use gitlab::api::projects::merge_requests::notes::{CreateMergeRequestNote, EditMergeRequestNote};
use gitlab::api::projects::repository::commits::{CommitStatusState, CreateCommitStatus};
use gitlab::api::{self, ApiError, AsyncQuery, Endpoint, Pageable, Pagination};
use gitlab::AsyncGitlab;
use serde_json::Value;
use std::borrow::Cow;
use std::time::Duration;

/// The commit status name branch protection (external status checks) can require.
pub const STATUS_NAME: &str = "fluxplan";
pub struct GitLab {
    /// Connected on first use: `serve` starts (and reports unready) while GitLab is down.
    client: tokio::sync::OnceCell<AsyncGitlab>,
    /// `host[:port][/sub/path]`: a GitLab under a sub-path keeps it.
    host: String,
    token: String,
    insecure: bool,
    /// The user id fluxplan writes notes as, learned once.
    user_id: tokio::sync::OnceCell<u64>,
    /// Deadlines, retries and the rate-limit pause. The crate builds its own HTTP client without
    /// a connect timeout, so the total deadline bounds connecting too.
    gate: std::sync::Arc<super::gate::Gate>,
}

/// An endpoint by method and path, for what the crate does not offer.
struct Raw {
    method: http::Method,
    path: String,
    params: Vec<(&'static str, String)>,
}

impl Endpoint for Raw {
    fn method(&self) -> http::Method {
        self.method.clone()
    }

    fn endpoint(&self) -> Cow<'static, str> {
        self.path.clone().into()
    }

    fn parameters(&self) -> api::QueryParams<'_> {
        let mut params = api::QueryParams::default();
        for (key, value) in &self.params {
            params.push(*key, value.as_str());
        }
        params
    }
}

impl Pageable for Raw {}

fn map_error<E: std::error::Error + Send + Sync + 'static>(error: ApiError<E>) -> ForgeError {
    let text = error.to_string();
    match &error {
        ApiError::GitlabRateLimited { .. } => ForgeError::RateLimited(None),
        ApiError::GitlabService { status, .. }
        | ApiError::GitlabWithStatus { status, .. }
        | ApiError::GitlabObjectWithStatus { status, .. }
        | ApiError::GitlabUnrecognizedWithStatus { status, .. } => {
            ForgeError::from_status(status.as_u16(), status_retry_after(status.as_u16()), &text)
        }
        ApiError::Client { .. } => ForgeError::Transient(text),
        _ => ForgeError::Permanent(text),
    }
}

/// GitLab's error types do not carry headers: back off a second before a retry after a 429.
fn status_retry_after(status: u16) -> Option<Duration> {
    (status == 429).then_some(Duration::from_secs(1))
}

fn project(repo: &RepoInfo) -> String {
    match repo.project_id {
        Some(id) => id.to_string(),
        None => url::form_urlencoded::byte_serialize(repo.full_name.as_bytes()).collect(),
    }
}

impl GitLab {
    /// `url` is the GitLab base URL (`https://gitlab.example.com`, or one under a sub-path,
    /// `https://example.com/gitlab`); plain http is allowed for tests and air-gapped mirrors.
    /// Nothing is sent until the first call.
    pub fn new(url: &str, token: &str) -> anyhow::Result<Self> {
        Self::with_deadlines(url, token, super::gate::Deadlines::default())
    }

    /// Like `new`, each call ending by `deadlines.total`.
    pub fn with_deadlines(url: &str, token: &str, deadlines: super::gate::Deadlines) -> anyhow::Result<Self> {
        let parsed = url::Url::parse(url).map_err(|e| anyhow::anyhow!("FLUXPLAN_GITLAB_URL {url}: {e}"))?;
        let mut host = match parsed.port() {
            Some(port) => format!("{}:{port}", parsed.host_str().unwrap_or_default()),
            None => parsed.host_str().unwrap_or_default().to_string(),
        };
        host.push_str(parsed.path().trim_end_matches('/'));
        Ok(GitLab {
            client: tokio::sync::OnceCell::new(),
            host,
            token: token.to_string(),
            insecure: parsed.scheme() == "http",
            user_id: tokio::sync::OnceCell::new(),
            gate: std::sync::Arc::new(super::gate::Gate::new(super::ForgeKind::GitLab, deadlines)),
        })
    }

    pub fn gate(&self) -> &std::sync::Arc<super::gate::Gate> {
        &self.gate
    }

    /// The connected client; a GitLab that cannot be reached is a transient error.
    async fn client(&self) -> Result<&AsyncGitlab, ForgeError> {
        self.client
            .get_or_try_init(|| async {
                let mut builder = gitlab::GitlabBuilder::new(self.host.as_str(), self.token.as_str());
                if self.insecure {
                    builder.insecure();
                }
                // Building asks GitLab who the token is: a refused token says so.
                builder.build_async().await.map_err(|e| match e {
                    gitlab::GitlabError::Api { source } => map_error(source),
                    e => ForgeError::Transient(format!("cannot reach GitLab: {e}")),
                })
            })
            .await
    }

    async fn raw(
        &self,
        method: http::Method,
        path: String,
        params: Vec<(&'static str, String)>,
    ) -> Result<Value, ForgeError> {
        let endpoint = Raw { method, path, params };
        match endpoint.method {
            http::Method::DELETE => {
                api::ignore(endpoint).query_async(self.client().await?).await.map(|_| Value::Null)
            }
            _ => endpoint.query_async(self.client().await?).await,
        }
        .map_err(map_error)
    }

    async fn all_pages(
        &self,
        path: String,
        params: Vec<(&'static str, String)>,
    ) -> Result<Vec<Value>, ForgeError> {
        let endpoint = Raw { method: http::Method::GET, path, params };
        api::paged(endpoint, Pagination::Limit(2000))
            .query_async(self.client().await?)
            .await
            .map_err(map_error)
    }

    pub async fn pull(&self, repo: &RepoInfo, iid: u64) -> Result<PullInfo, ForgeError> {
        let path = format!("projects/{}/merge_requests/{iid}", project(repo));
        let mr = self.raw(http::Method::GET, path, Vec::new()).await?;
        pull_info(&mr)
    }

    pub async fn open_pulls(&self, repo: &RepoInfo, base: Option<&str>) -> Result<Vec<PullInfo>, ForgeError> {
        let path = format!("projects/{}/merge_requests", project(repo));
        let mut params = vec![("state", "opened".to_string())];
        if let Some(base) = base {
            params.push(("target_branch", base.to_string()));
        }
        self.all_pages(path, params).await?.iter().map(pull_info).collect()
    }

    pub async fn set_status(
        &self,
        repo: &RepoInfo,
        sha: &str,
        git_ref: Option<&str>,
        state: StatusState,
        description: &str,
        target_url: Option<&str>,
    ) -> Result<(), ForgeError> {
        let state_is_running = state == StatusState::Pending;
        // GitLab's state machine has no `running` → `running` (a retried plan): a status that is
        // already running is left as it is.
        if state_is_running && self.latest_status(repo, sha, git_ref).await?.as_deref() == Some("running") {
            return Ok(());
        }
        let state = match state {
            StatusState::Pending => CommitStatusState::Running,
            StatusState::Success => CommitStatusState::Success,
            StatusState::Failure | StatusState::Error => CommitStatusState::Failed,
        };
        let mut builder = CreateCommitStatus::builder();
        builder.project(project(repo)).commit(sha).state(state).name(STATUS_NAME).description(description);
        if let Some(url) = target_url {
            builder.target_url(url);
        }
        if let Some(git_ref) = git_ref {
            builder.ref_(git_ref);
        }
        let endpoint = builder.build().map_err(|e| ForgeError::Permanent(e.to_string()))?;
        match api::ignore(endpoint).query_async(self.client().await?).await.map_err(map_error) {
            // Between the look and the post another replica set it running: so it is.
            Err(e) if state_is_running && e.to_string().contains("Cannot transition status") => Ok(()),
            result => result,
        }
    }

    /// The state of the latest `fluxplan` status of `sha` (on `git_ref`, when given).
    async fn latest_status(
        &self,
        repo: &RepoInfo,
        sha: &str,
        git_ref: Option<&str>,
    ) -> Result<Option<String>, ForgeError> {
        let path = format!("projects/{}/repository/commits/{sha}/statuses", project(repo));
        let mut params = vec![("name", STATUS_NAME.to_string())];
        if let Some(git_ref) = git_ref {
            params.push(("ref", git_ref.to_string()));
        }
        let statuses = self.all_pages(path, params).await?;
        // Newest first is not promised: take the highest id.
        Ok(statuses
            .iter()
            .max_by_key(|s| s["id"].as_u64().unwrap_or(0))
            .and_then(|s| s["status"].as_str().map(str::to_string)))
    }

    /// The id of the user fluxplan writes as.
    pub async fn user_id(&self) -> Result<u64, ForgeError> {
        let id = self
            .user_id
            .get_or_try_init(|| async {
                let user = self.raw(http::Method::GET, "user".into(), Vec::new()).await?;
                user["id"].as_u64().ok_or_else(|| ForgeError::Permanent("GitLab /user has no id".into()))
            })
            .await?;
        Ok(*id)
    }

    /// Notes of a merge request: (id, body, author id), oldest first.
    pub async fn comments(&self, repo: &RepoInfo, iid: u64) -> Result<Vec<Comment>, ForgeError> {
        let path = format!("projects/{}/merge_requests/{iid}/notes", project(repo));
        let params = vec![("sort", "asc".to_string()), ("order_by", "created_at".to_string())];
        Ok(self
            .all_pages(path, params)
            .await?
            .iter()
            .filter_map(|n| {
                Some(Comment {
                    id: n["id"].as_u64()?,
                    body: n["body"].as_str().unwrap_or("").to_string(),
                    author: n["author"]["id"].as_u64().map(|id| id.to_string()).unwrap_or_default(),
                    updated_at: n["updated_at"].as_str().and_then(timestamp_ms),
                })
            })
            .collect())
    }

    pub async fn create_comment(&self, repo: &RepoInfo, iid: u64, body: &str) -> Result<u64, ForgeError> {
        let endpoint = CreateMergeRequestNote::builder()
            .project(project(repo))
            .merge_request(iid)
            .body(body)
            .build()
            .map_err(|e| ForgeError::Permanent(e.to_string()))?;
        let note: Value = endpoint.query_async(self.client().await?).await.map_err(map_error)?;
        note["id"].as_u64().ok_or_else(|| ForgeError::Permanent("created note has no id".into()))
    }

    pub async fn update_comment(
        &self,
        repo: &RepoInfo,
        iid: u64,
        id: u64,
        body: &str,
    ) -> Result<(), ForgeError> {
        let endpoint = EditMergeRequestNote::builder()
            .project(project(repo))
            .merge_request(iid)
            .note(id)
            .body(body)
            .build()
            .map_err(|e| ForgeError::Permanent(e.to_string()))?;
        api::ignore(endpoint).query_async(self.client().await?).await.map_err(map_error)
    }

    pub async fn delete_comment(&self, repo: &RepoInfo, iid: u64, id: u64) -> Result<(), ForgeError> {
        let path = format!("projects/{}/merge_requests/{iid}/notes/{id}", project(repo));
        match self.raw(http::Method::DELETE, path, Vec::new()).await {
            Ok(_) | Err(ForgeError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub async fn role_of(&self, repo: &RepoInfo, user_id: Option<u64>) -> Result<Role, ForgeError> {
        let Some(user_id) = user_id else { return Ok(Role::Anyone) };
        let endpoint = AllProjectMember::builder()
            .project(project(repo))
            .user(user_id)
            .build()
            .map_err(|e| ForgeError::Permanent(e.to_string()))?;
        match endpoint.query_async(self.client().await?).await.map_err(map_error) {
            Ok(member) => {
                let member: Value = member;
                Ok(Role::from_gitlab(member["access_level"].as_u64().unwrap_or(0)))
            }
            Err(ForgeError::NotFound(_)) => Ok(Role::Anyone),
            Err(e) => Err(e),
        }
    }

    pub async fn react(
        &self,
        repo: &RepoInfo,
        iid: u64,
        note: u64,
        reaction: Reaction,
    ) -> Result<(), ForgeError> {
        let name = match reaction {
            Reaction::Accepted => "thumbsup",
            Reaction::Refused => "thumbsdown",
        };
        let endpoint = CreateMergeRequestNoteAward::builder()
            .project(project(repo))
            .merge_request(iid)
            .note(note)
            .name(name)
            .build()
            .map_err(|e| ForgeError::Permanent(e.to_string()))?;
        api::ignore(endpoint).query_async(self.client().await?).await.map_err(map_error)
    }
}

fn pull_info(mr: &Value) -> Result<PullInfo, ForgeError> {
    let field = |key: &str| {
        mr[key]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ForgeError::Permanent(format!("merge request without {key}")))
    };
    let fork =
        mr["source_project_id"].as_u64().is_some() && mr["source_project_id"] != mr["target_project_id"];
    Ok(PullInfo {
        number: mr["iid"]
            .as_u64()
            .ok_or_else(|| ForgeError::Permanent("merge request without iid".into()))?,
        head_sha: field("sha")?,
        base_ref: field("target_branch")?,
        head_ref: field("source_branch").ok(),
        author: mr.pointer("/author/username").and_then(Value::as_str).map(str::to_string),
        author_id: mr.pointer("/author/id").and_then(Value::as_u64),
        open: mr["state"] == "opened",
        is_fork: fork,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_gitlab_under_a_sub_path_keeps_it() {
        let gitlab = super::GitLab::new("https://example.com/gitlab/", "t").unwrap();
        assert_eq!(gitlab.host, "example.com/gitlab");
        let gitlab = super::GitLab::new("http://127.0.0.1:8080", "t").unwrap();
        assert_eq!((gitlab.host.as_str(), gitlab.insecure), ("127.0.0.1:8080", true));
    }
}
