//! GitHub through octocrab (a token, or a GitHub App and its installations). Requests go through
//! octocrab's raw methods so that status codes and rate-limit headers stay visible.

use super::roles::Role;
use super::webhook::timestamp_ms;
use super::{Comment, ForgeError, PullInfo, Reaction, RepoInfo, StatusState};
use octocrab::models::{AppId, InstallationId};
use octocrab::Octocrab;
use serde_json::{json, Value};
use std::time::Duration;

/// The commit status context branch protection can require.
pub const STATUS_CONTEXT: &str = "fluxplan";
/// Pages of 100 read at most when listing.
const MAX_PAGES: usize = 20;

/// How fluxplan authenticates to GitHub.
pub enum GitHubAuth {
    Token(String),
    App { app_id: u64, private_key_pem: String },
}

pub struct GitHub {
    client: Octocrab,
    gate: std::sync::Arc<super::gate::Gate>,
    is_app: bool,
    /// The App's id, when running as one: its check runs are the ones it updates.
    app_id: Option<u64>,
    /// The login fluxplan comments as, learned once.
    login: tokio::sync::OnceCell<String>,
    /// Where the verdict goes (commit status, check run, both).
    checks: super::checks::ChecksMode,
    /// Repositories where GitHub refused check runs (no `checks: write`): said once, then the
    /// commit status only.
    checks_refused: std::sync::Mutex<std::collections::HashSet<String>>,
}

#[derive(Clone, Copy)]
pub(super) enum Method {
    Get,
    Post,
    Patch,
    Delete,
}

impl GitHub {
    pub fn new(api_url: &str, auth: GitHubAuth) -> anyhow::Result<Self> {
        Self::with_deadlines(api_url, auth, super::gate::Deadlines::default())
    }

    /// A client whose connections open within `deadlines.connect` and whose calls end by
    /// `deadlines.total` (each attempt, enforced by its gate).
    pub fn with_deadlines(
        api_url: &str,
        auth: GitHubAuth,
        deadlines: super::gate::Deadlines,
    ) -> anyhow::Result<Self> {
        // Retries are ours (they honour Retry-After); octocrab's would retry at once. The total
        // deadline is the gate's, around each whole call (a read timeout here would only bound
        // the gaps between bytes).
        let builder = Octocrab::builder()
            .base_uri(api_url)?
            .add_retry_config(octocrab::service::middleware::retry::RetryConfig::None)
            .set_connect_timeout(Some(deadlines.connect));
        let (builder, app_id) = match auth {
            GitHubAuth::Token(token) => (builder.personal_token(token), None),
            GitHubAuth::App { app_id, private_key_pem } => {
                let key = octocrab::EncodingKey::from_rsa_pem(private_key_pem.as_bytes()).map_err(|e| {
                    anyhow::anyhow!("FLUXPLAN_GITHUB_APP_PRIVATE_KEY is not an RSA PEM key: {e}")
                })?;
                (builder.app(AppId(app_id), key), Some(app_id))
            }
        };
        let gate = std::sync::Arc::new(super::gate::Gate::new(super::ForgeKind::GitHub, deadlines));
        Ok(GitHub {
            client: builder.build()?,
            gate,
            is_app: app_id.is_some(),
            app_id,
            login: tokio::sync::OnceCell::new(),
            checks: super::checks::ChecksMode::Auto,
            checks_refused: Default::default(),
        })
    }

    /// Sends the verdict to the commit status, the check run or both (`ChecksMode`).
    pub fn with_checks(mut self, mode: super::checks::ChecksMode) -> Self {
        self.checks = mode;
        self
    }

    /// Where the verdict goes, `Auto` resolved: check runs need a GitHub App.
    pub fn checks(&self) -> super::checks::ChecksMode {
        use super::checks::ChecksMode;
        match self.checks {
            ChecksMode::Auto if self.is_app => ChecksMode::Both,
            ChecksMode::Auto => ChecksMode::Status,
            mode => mode,
        }
    }

    pub(super) fn app_id(&self) -> Option<u64> {
        self.app_id
    }

    /// True while check runs were not refused on `repo`.
    pub(super) fn checks_allowed(&self, repo: &RepoInfo) -> bool {
        !self.checks_refused.lock().unwrap_or_else(|e| e.into_inner()).contains(&repo.full_name)
    }

    /// Remembers that `repo` refuses check runs; logs it the first time only.
    pub(super) fn checks_were_refused(&self, repo: &RepoInfo, why: &str) {
        let first =
            self.checks_refused.lock().unwrap_or_else(|e| e.into_inner()).insert(repo.full_name.clone());
        if first {
            tracing::warn!(repo = %repo.full_name, %why, "GitHub refuses check runs here (give the App `checks: write`): the commit status speaks instead");
        }
    }

    pub fn gate(&self) -> &std::sync::Arc<super::gate::Gate> {
        &self.gate
    }

    /// The client acting for `repo`: the App's installation when running as an App.
    fn client_for(&self, repo: &RepoInfo) -> Result<Octocrab, ForgeError> {
        if !self.is_app {
            return Ok(self.client.clone());
        }
        let installation = repo.installation_id.ok_or_else(|| {
            ForgeError::Permanent(format!("no GitHub App installation in the event for {}", repo.full_name))
        })?;
        self.client
            .installation(InstallationId(installation))
            .map_err(|e| ForgeError::Permanent(e.to_string()))
    }

    async fn request(
        &self,
        repo: &RepoInfo,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ForgeError> {
        match self.send(repo, method, path, body).await? {
            Ok(value) => Ok(value),
            Err((status, text)) => Err(ForgeError::from_status(status, None, &text)),
        }
    }

    /// One request: a refusal that is final (4xx that are neither a rate limit nor a refused
    /// token) comes back as its status and body, for callers that tell them apart.
    pub(super) async fn send(
        &self,
        repo: &RepoInfo,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Result<Value, (u16, String)>, ForgeError> {
        let client = self.client_for(repo)?;
        let response = match method {
            Method::Get => client._get(path).await,
            Method::Post => client._post(path, body.as_ref()).await,
            Method::Patch => client._patch(path, body.as_ref()).await,
            Method::Delete => client._delete(path, None::<&()>).await,
        }
        .map_err(|e| ForgeError::Transient(format!("{path}: {e}")))?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let text = client.body_to_string(response).await.map_err(|e| ForgeError::Transient(e.to_string()))?;
        if status >= 400 {
            return match ForgeError::from_status(status, retry_after, &text) {
                ForgeError::Permanent(_) | ForgeError::NotFound(_) => Ok(Err((status, text))),
                error => Err(error),
            };
        }
        if text.trim().is_empty() {
            return Ok(Ok(Value::Null));
        }
        serde_json::from_str(&text)
            .map(Ok)
            .map_err(|e| ForgeError::Permanent(format!("{path}: unexpected answer: {e}")))
    }

    /// All pages of a list endpoint.
    async fn list(&self, repo: &RepoInfo, path: &str) -> Result<Vec<Value>, ForgeError> {
        let mut items = Vec::new();
        for page in 1..=MAX_PAGES {
            let separator = if path.contains('?') { '&' } else { '?' };
            let answer = self
                .request(repo, Method::Get, &format!("{path}{separator}per_page=100&page={page}"), None)
                .await?;
            let batch = answer.as_array().cloned().unwrap_or_default();
            let done = batch.len() < 100;
            items.extend(batch);
            if done {
                break;
            }
        }
        Ok(items)
    }

    /// The token git fetches with: the configured token, or the installation's when running as an
    /// App (cached by octocrab until it nearly expires).
    pub async fn git_token(
        &self,
        repo: &RepoInfo,
        configured: Option<&str>,
    ) -> Result<Option<String>, ForgeError> {
        if !self.is_app {
            return Ok(configured.map(str::to_string));
        }
        use secrecy::ExposeSecret;
        let token = self
            .client_for(repo)?
            .installation_token()
            .await
            .map_err(|e| ForgeError::Transient(e.to_string()))?;
        Ok(Some(token.expose_secret().to_string()))
    }

    pub async fn pull(&self, repo: &RepoInfo, number: u64) -> Result<PullInfo, ForgeError> {
        let pull = self
            .request(repo, Method::Get, &format!("/repos/{}/pulls/{number}", repo.full_name), None)
            .await?;
        pull_info(repo, &pull)
    }

    pub async fn open_pulls(&self, repo: &RepoInfo, base: Option<&str>) -> Result<Vec<PullInfo>, ForgeError> {
        let mut path = format!("/repos/{}/pulls?state=open", repo.full_name);
        if let Some(base) = base {
            path.push_str(&format!("&base={}", urlencode(base)));
        }
        self.list(repo, &path).await?.iter().map(|p| pull_info(repo, p)).collect()
    }

    pub async fn set_status(
        &self,
        repo: &RepoInfo,
        sha: &str,
        state: StatusState,
        description: &str,
        target_url: Option<&str>,
    ) -> Result<(), ForgeError> {
        let state = match state {
            StatusState::Pending => "pending",
            StatusState::Success => "success",
            StatusState::Failure => "failure",
            StatusState::Error => "error",
        };
        let mut body = json!({"state": state, "description": description, "context": STATUS_CONTEXT});
        if let Some(url) = target_url {
            body["target_url"] = json!(url);
        }
        self.request(repo, Method::Post, &format!("/repos/{}/statuses/{sha}", repo.full_name), Some(body))
            .await?;
        Ok(())
    }

    /// Who fluxplan comments as: the token's user, or the App's bot (`<slug>[bot]`).
    pub async fn login(&self, repo: &RepoInfo) -> Result<String, ForgeError> {
        let login = self
            .login
            .get_or_try_init(|| async {
                if self.is_app {
                    let response =
                        self.client._get("/app").await.map_err(|e| ForgeError::Transient(e.to_string()))?;
                    let status = response.status().as_u16();
                    let text = self
                        .client
                        .body_to_string(response)
                        .await
                        .map_err(|e| ForgeError::Transient(e.to_string()))?;
                    if status >= 400 {
                        return Err(ForgeError::from_status(status, None, &text));
                    }
                    let app: Value =
                        serde_json::from_str(&text).map_err(|e| ForgeError::Permanent(e.to_string()))?;
                    Ok(format!("{}[bot]", app["slug"].as_str().unwrap_or_default()))
                } else {
                    let user = self.request(repo, Method::Get, "/user", None).await?;
                    Ok(user["login"].as_str().unwrap_or_default().to_string())
                }
            })
            .await?;
        Ok(login.clone())
    }

    /// Comments of a pull request: (id, body, author login), oldest first.
    pub async fn comments(&self, repo: &RepoInfo, number: u64) -> Result<Vec<Comment>, ForgeError> {
        let items = self.list(repo, &format!("/repos/{}/issues/{number}/comments", repo.full_name)).await?;
        Ok(items
            .iter()
            .filter_map(|c| {
                Some(Comment {
                    id: c["id"].as_u64()?,
                    body: c["body"].as_str().unwrap_or("").to_string(),
                    author: c["user"]["login"].as_str().unwrap_or_default().to_string(),
                    updated_at: c["updated_at"].as_str().and_then(timestamp_ms),
                })
            })
            .collect())
    }

    pub async fn create_comment(&self, repo: &RepoInfo, number: u64, body: &str) -> Result<u64, ForgeError> {
        let path = format!("/repos/{}/issues/{number}/comments", repo.full_name);
        let created = self.request(repo, Method::Post, &path, Some(json!({"body": body}))).await?;
        created["id"].as_u64().ok_or_else(|| ForgeError::Permanent("created comment has no id".into()))
    }

    pub async fn update_comment(&self, repo: &RepoInfo, id: u64, body: &str) -> Result<(), ForgeError> {
        let path = format!("/repos/{}/issues/comments/{id}", repo.full_name);
        self.request(repo, Method::Patch, &path, Some(json!({"body": body}))).await.map(drop)
    }

    pub async fn delete_comment(&self, repo: &RepoInfo, id: u64) -> Result<(), ForgeError> {
        let path = format!("/repos/{}/issues/comments/{id}", repo.full_name);
        match self.request(repo, Method::Delete, &path, None).await {
            Ok(_) | Err(ForgeError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub async fn role_of(&self, repo: &RepoInfo, user: &str) -> Result<Role, ForgeError> {
        let path = format!("/repos/{}/collaborators/{user}/permission", repo.full_name);
        match self.request(repo, Method::Get, &path, None).await {
            Ok(answer) => Ok(Role::from_github(answer["permission"].as_str(), answer["role_name"].as_str())),
            Err(ForgeError::NotFound(_)) => Ok(Role::Anyone),
            Err(e) => Err(e),
        }
    }

    pub async fn react(
        &self,
        repo: &RepoInfo,
        comment_id: u64,
        reaction: Reaction,
    ) -> Result<(), ForgeError> {
        let content = match reaction {
            Reaction::Accepted => "+1",
            Reaction::Refused => "-1",
        };
        let path = format!("/repos/{}/issues/comments/{comment_id}/reactions", repo.full_name);
        self.request(repo, Method::Post, &path, Some(json!({"content": content}))).await.map(drop)
    }
}

fn pull_info(repo: &RepoInfo, pull: &Value) -> Result<PullInfo, ForgeError> {
    let field = |pointer: &str| {
        pull.pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| ForgeError::Permanent(format!("pull request without {pointer}")))
    };
    // A deleted fork leaves no head repository: still a fork.
    let head_repo = pull.pointer("/head/repo/full_name").and_then(Value::as_str);
    Ok(PullInfo {
        number: pull["number"]
            .as_u64()
            .ok_or_else(|| ForgeError::Permanent("pull request without number".into()))?,
        head_sha: field("/head/sha")?,
        base_ref: field("/base/ref")?,
        head_ref: field("/head/ref").ok(),
        author: field("/user/login").ok(),
        author_id: None,
        open: pull["state"] == "open",
        is_fork: head_repo != Some(repo.full_name.as_str()),
    })
}

/// How long GitHub asks to wait: `Retry-After`, else the rate-limit reset when none remain.
fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(seconds) = header("retry-after").and_then(|v| v.trim().parse::<u64>().ok()) {
        return Some(Duration::from_secs(seconds));
    }
    if header("x-ratelimit-remaining") == Some("0") {
        let reset = header("x-ratelimit-reset")?.parse::<u64>().ok()?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
        return Some(Duration::from_secs(reset.saturating_sub(now).max(1)));
    }
    None
}

fn urlencode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
