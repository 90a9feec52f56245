//! GitHub and GitLab behind one interface: webhooks in, comments, statuses, permissions and
//! reactions out. Calls are retried on transient failures and rate limits (honouring
//! `Retry-After`), with backoff from `backon`.

pub mod checks;
pub mod gate;
pub mod github;
pub mod gitlab;
pub mod roles;
pub mod webhook;

use backon::{ExponentialBuilder, Retryable};
use roles::Role;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Longest wait for a rate limit inside one call; longer ones reschedule the job instead.
pub(crate) const MAX_INLINE_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    GitHub,
    GitLab,
}

impl ForgeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "github",
            ForgeKind::GitLab => "gitlab",
        }
    }

    /// The forge's name, for people.
    pub fn name(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "GitHub",
            ForgeKind::GitLab => "GitLab",
        }
    }

    /// What the forge calls a pull request.
    pub fn pull_noun(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "pull request",
            ForgeKind::GitLab => "merge request",
        }
    }

    /// The page of pull request `number` of the repository at `web_url`.
    pub fn pull_page(self, web_url: &str, number: i64) -> String {
        match self {
            ForgeKind::GitHub => format!("{web_url}/pull/{number}"),
            ForgeKind::GitLab => format!("{web_url}/-/merge_requests/{number}"),
        }
    }

    /// The page of commit `sha` of the repository at `web_url`.
    pub fn commit_page(self, web_url: &str, sha: &str) -> String {
        match self {
            ForgeKind::GitHub => format!("{web_url}/commit/{sha}"),
            ForgeKind::GitLab => format!("{web_url}/-/commit/{sha}"),
        }
    }

    /// The forge named `name` as the store records it.
    pub fn from_name(name: &str) -> Option<ForgeKind> {
        match name {
            "github" => Some(ForgeKind::GitHub),
            "gitlab" => Some(ForgeKind::GitLab),
            _ => None,
        }
    }
}

/// A repository as a webhook names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoInfo {
    pub forge: ForgeKind,
    /// `owner/name` (GitHub) or `group/project` (GitLab).
    pub full_name: String,
    /// GitLab's numeric project id.
    pub project_id: Option<u64>,
    /// From the signed payload: `repository.clone_url` or `project.git_http_url`.
    pub clone_url: String,
    /// The GitHub App installation the event came through.
    pub installation_id: Option<u64>,
    /// The repository's page on the forge (`repository.html_url`, `project.web_url`), http(s)
    /// only; absent from jobs queued before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_url: Option<String>,
}

/// A repository's web address as the payload gives it, if it is a plain http(s) URL: no user
/// or password, query or fragment (it becomes links on run pages).
pub fn web_url(raw: Option<&str>) -> Option<String> {
    let url = url::Url::parse(raw?).ok()?;
    let plain = matches!(url.scheme(), "http" | "https")
        && url.host().is_some()
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none();
    plain.then(|| url.as_str().trim_end_matches('/').to_string())
}

/// A comment (GitLab: a note) as the forge lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub id: u64,
    pub body: String,
    /// Login (GitHub) or user id (GitLab).
    pub author: String,
    /// When it was last written, by the forge's clock (ms since the epoch).
    pub updated_at: Option<i64>,
}

/// A pull/merge request as the forge reports it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullInfo {
    pub number: u64,
    pub head_sha: String,
    pub base_ref: String,
    pub open: bool,
    /// The head lives in another repository (a fork).
    pub is_fork: bool,
    /// The branch the head is on (in the fork, for a fork).
    pub head_ref: Option<String>,
    /// Who opened it: login (GitHub) or username (GitLab), and GitLab's user id.
    pub author: Option<String>,
    pub author_id: Option<u64>,
}

impl PullInfo {
    /// True when the comment author opened this pull request.
    pub fn opened_by(&self, user: &str, user_id: Option<u64>) -> bool {
        self.author.as_deref().is_some_and(|a| a.eq_ignore_ascii_case(user))
            || (self.author_id.is_some() && self.author_id == user_id)
    }
}

/// Commit status states, mapped to each forge's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusState {
    Pending,
    Success,
    Failure,
    Error,
}

/// The answer to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    Accepted,
    Refused,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ForgeError {
    #[error("rate limited by the forge{}", .0.map(|d| format!(" (retry after {}s)", d.as_secs())).unwrap_or_default())]
    RateLimited(Option<Duration>),
    #[error("the forge failed: {0}")]
    Transient(String),
    #[error("not found: {0}")]
    NotFound(String),
    /// The forge refused the token (401, bad credentials): only the operator can fix it.
    #[error("the forge refused fluxplan's token: {0}")]
    Unauthorized(String),
    #[error("the forge refused the request: {0}")]
    Permanent(String),
}

impl ForgeError {
    /// The label of this failure in metrics.
    pub fn label(&self) -> &'static str {
        match self {
            ForgeError::RateLimited(_) => "rate_limited",
            ForgeError::Transient(_) => "transient",
            ForgeError::NotFound(_) => "not_found",
            ForgeError::Unauthorized(_) => "unauthorized",
            ForgeError::Permanent(_) => "permanent",
        }
    }

    pub(crate) fn retryable(&self) -> bool {
        match self {
            ForgeError::RateLimited(wait) => wait.is_none_or(|w| w <= MAX_INLINE_WAIT),
            ForgeError::Transient(_) => true,
            _ => false,
        }
    }

    /// From an HTTP status and body: 429 (and GitHub's 403 rate limits) are rate limits, 5xx
    /// transient, 404 not found, 401 (and a 403 saying bad credentials) a refused token, the rest
    /// permanent.
    pub fn from_status(status: u16, retry_after: Option<Duration>, body: &str) -> Self {
        let message = format!("HTTP {status}: {}", body.chars().take(300).collect::<String>());
        match status {
            429 => ForgeError::RateLimited(retry_after),
            403 if body.to_lowercase().contains("rate limit") => ForgeError::RateLimited(retry_after),
            401 => ForgeError::Unauthorized(message),
            403 if body.to_lowercase().contains("bad credentials") => ForgeError::Unauthorized(message),
            404 => ForgeError::NotFound(message),
            500..=599 => ForgeError::Transient(message),
            _ => ForgeError::Permanent(message),
        }
    }
}

/// Runs a forge call with retries: transient errors and short rate limits are retried with
/// exponential backoff; a rate limit's own `Retry-After` wins when it is longer.
pub async fn with_retries<T, F, Fut>(what: &str, call: F) -> Result<T, ForgeError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ForgeError>>,
{
    with_retries_when(what, call, ForgeError::retryable).await
}

/// Like [`with_retries`], retrying only the errors `when` accepts.
pub(crate) async fn with_retries_when<T, F, Fut>(
    what: &str,
    call: F,
    when: impl FnMut(&ForgeError) -> bool,
) -> Result<T, ForgeError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ForgeError>>,
{
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(10))
        .with_max_times(4)
        .with_jitter();
    call.retry(backoff)
        .when(when)
        .adjust(|error, delay| match error {
            ForgeError::RateLimited(Some(wait)) => Some(delay.map_or(*wait, |d| d.max(*wait))),
            _ => delay,
        })
        .notify(|error, delay| tracing::warn!(%error, ?delay, "{what}: retrying"))
        .await
}

/// A forge client.
pub enum ForgeClient {
    GitHub(github::GitHub),
    GitLab(gitlab::GitLab),
}

impl ForgeClient {
    /// How calls to this forge are made (deadlines, retries, the rate-limit pause), and what
    /// they taught about it.
    pub fn gate(&self) -> &std::sync::Arc<gate::Gate> {
        match self {
            ForgeClient::GitHub(c) => c.gate(),
            ForgeClient::GitLab(c) => c.gate(),
        }
    }

    /// The token git fetches `repo` with, if any.
    pub async fn git_token(
        &self,
        repo: &RepoInfo,
        configured: Option<&str>,
    ) -> Result<Option<String>, ForgeError> {
        match self {
            ForgeClient::GitHub(c) => {
                self.gate().call("installation token", || c.git_token(repo, configured)).await
            }
            ForgeClient::GitLab(_) => Ok(configured.map(str::to_string)),
        }
    }

    pub async fn pull(&self, repo: &RepoInfo, number: u64) -> Result<PullInfo, ForgeError> {
        match self {
            ForgeClient::GitHub(c) => self.gate().call("get pull request", || c.pull(repo, number)).await,
            ForgeClient::GitLab(c) => self.gate().call("get merge request", || c.pull(repo, number)).await,
        }
    }

    /// The open pull requests of a repository, into `base` only when given.
    pub async fn open_pulls(&self, repo: &RepoInfo, base: Option<&str>) -> Result<Vec<PullInfo>, ForgeError> {
        match self {
            ForgeClient::GitHub(c) => {
                self.gate().call("list pull requests", || c.open_pulls(repo, base)).await
            }
            ForgeClient::GitLab(c) => {
                self.gate().call("list merge requests", || c.open_pulls(repo, base)).await
            }
        }
    }

    /// Sets the `fluxplan` status of `sha`; GitLab also takes the branch it is on (`git_ref`),
    /// without which it picks one that may not hold the commit.
    pub async fn set_status(
        &self,
        repo: &RepoInfo,
        sha: &str,
        git_ref: Option<&str>,
        state: StatusState,
        description: &str,
        target_url: Option<&str>,
    ) -> Result<(), ForgeError> {
        // Forges cap descriptions (GitHub at 140 characters).
        let description: String = description.chars().take(139).collect();
        match self {
            ForgeClient::GitHub(c) => {
                self.gate()
                    .call("set status", || c.set_status(repo, sha, state, &description, target_url))
                    .await
            }
            ForgeClient::GitLab(c) => {
                let set = || c.set_status(repo, sha, git_ref, state, &description, target_url);
                self.gate().call("set status", set).await
            }
        }
    }

    /// The verdict on `sha`: the commit status and, on GitHub as the checks mode says, the
    /// `fluxplan` check run (with `check`'s plan and annotations; written by job `job`). A
    /// repository that refuses check runs gets the status instead, whatever the mode.
    #[allow(clippy::too_many_arguments)]
    pub async fn set_verdict(
        &self,
        repo: &RepoInfo,
        sha: &str,
        git_ref: Option<&str>,
        state: StatusState,
        description: &str,
        target_url: Option<&str>,
        check: Option<&checks::CheckOutput>,
        job: Option<i64>,
    ) -> Result<(), ForgeError> {
        let ForgeClient::GitHub(c) = self else {
            return self.set_status(repo, sha, git_ref, state, description, target_url).await;
        };
        let mode = c.checks();
        if mode == checks::ChecksMode::Status || !c.checks_allowed(repo) {
            return self.set_status(repo, sha, git_ref, state, description, target_url).await;
        }
        let run = checks::CheckRun {
            sha,
            state: checks::CheckState::of_status(state),
            title: description,
            output: check,
            details_url: target_url,
            external_id: job.map(|j| j.to_string()),
        };
        let checked = match c.write_check_run(repo, &run).await {
            Ok(()) => true,
            Err(checks::CheckError::Refused(why)) => {
                c.checks_were_refused(repo, &why);
                false
            }
            Err(checks::CheckError::Forge(e)) => return Err(e),
        };
        if checked && mode == checks::ChecksMode::CheckRun {
            return Ok(());
        }
        match self.set_status(repo, sha, git_ref, state, description, target_url).await {
            // The check run carries the verdict where the status is refused (a fork's commit).
            Err(ForgeError::NotFound(_)) if checked => Ok(()),
            other => other,
        }
    }

    /// Completes the check runs job `job` left in progress on `sha` (it was superseded).
    pub async fn cancel_check_runs(&self, repo: &RepoInfo, sha: &str, job: i64) -> Result<usize, ForgeError> {
        let ForgeClient::GitHub(c) = self else { return Ok(0) };
        if c.checks() == checks::ChecksMode::Status || !c.checks_allowed(repo) {
            return Ok(0);
        }
        match c.cancel_check_runs(repo, sha, &job.to_string()).await {
            Ok(n) => Ok(n),
            Err(checks::CheckError::Refused(why)) => {
                c.checks_were_refused(repo, &why);
                Ok(0)
            }
            Err(checks::CheckError::Forge(e)) => Err(e),
        }
    }

    /// fluxplan's own comments on a pull request that carry `marker`, oldest first (a comment of
    /// someone else that starts with the marker is never touched).
    pub async fn marked_comments(
        &self,
        repo: &RepoInfo,
        number: u64,
        marker: &str,
    ) -> Result<Vec<Comment>, ForgeError> {
        let (all, me) = match self {
            ForgeClient::GitHub(c) => (
                self.gate().call("list comments", || c.comments(repo, number)).await?,
                self.gate().call("read own login", || c.login(repo)).await?,
            ),
            ForgeClient::GitLab(c) => (
                self.gate().call("list notes", || c.comments(repo, number)).await?,
                self.gate().call("read own user", || c.user_id()).await?.to_string(),
            ),
        };
        Ok(all.into_iter().filter(|c| c.author == me && c.body.starts_with(marker)).collect())
    }

    pub async fn create_comment(&self, repo: &RepoInfo, number: u64, body: &str) -> Result<u64, ForgeError> {
        match self {
            ForgeClient::GitHub(c) => {
                self.gate().call("create comment", || c.create_comment(repo, number, body)).await
            }
            ForgeClient::GitLab(c) => {
                self.gate().call("create note", || c.create_comment(repo, number, body)).await
            }
        }
    }

    pub async fn update_comment(
        &self,
        repo: &RepoInfo,
        number: u64,
        id: u64,
        body: &str,
    ) -> Result<(), ForgeError> {
        match self {
            ForgeClient::GitHub(c) => {
                self.gate().call("update comment", || c.update_comment(repo, id, body)).await
            }
            ForgeClient::GitLab(c) => {
                self.gate().call("update note", || c.update_comment(repo, number, id, body)).await
            }
        }
    }

    pub async fn delete_comment(&self, repo: &RepoInfo, number: u64, id: u64) -> Result<(), ForgeError> {
        match self {
            ForgeClient::GitHub(c) => self.gate().call("delete comment", || c.delete_comment(repo, id)).await,
            ForgeClient::GitLab(c) => {
                self.gate().call("delete note", || c.delete_comment(repo, number, id)).await
            }
        }
    }

    /// True when a comment's author is fluxplan itself (the token's user, the App's bot, the
    /// GitLab token's user), whatever the payload says about the author's type: the bot's own
    /// comments echo pull request content and are never commands.
    pub async fn is_self(
        &self,
        repo: &RepoInfo,
        author: &str,
        author_id: Option<u64>,
    ) -> Result<bool, ForgeError> {
        match self {
            ForgeClient::GitHub(c) => {
                let me = self.gate().call("read own login", || c.login(repo)).await?;
                Ok(author.eq_ignore_ascii_case(&me))
            }
            ForgeClient::GitLab(c) => {
                let me = self.gate().call("read own user", || c.user_id()).await?;
                Ok(author_id == Some(me))
            }
        }
    }

    /// Who the bot is on this forge (the login it comments as), asked of the forge.
    pub async fn identity(&self) -> Result<String, ForgeError> {
        match self {
            // The token's user or the App's bot: no repository is needed to ask.
            ForgeClient::GitHub(c) => {
                let any = RepoInfo {
                    forge: ForgeKind::GitHub,
                    full_name: String::new(),
                    project_id: None,
                    clone_url: String::new(),
                    installation_id: None,
                    web_url: None,
                };
                self.gate().call("read own login", || c.login(&any)).await
            }
            ForgeClient::GitLab(c) => {
                let id = self.gate().call("read own user", || c.user_id()).await?;
                Ok(format!("user id {id}"))
            }
        }
    }

    /// What `user` may do in the repository (checked through the forge API, never the payload).
    pub async fn role_of(
        &self,
        repo: &RepoInfo,
        user: &str,
        user_id: Option<u64>,
    ) -> Result<Role, ForgeError> {
        match self {
            ForgeClient::GitHub(c) => self.gate().call("read permission", || c.role_of(repo, user)).await,
            ForgeClient::GitLab(c) => self.gate().call("read membership", || c.role_of(repo, user_id)).await,
        }
    }

    pub async fn react(
        &self,
        repo: &RepoInfo,
        number: u64,
        comment_id: u64,
        reaction: Reaction,
    ) -> Result<(), ForgeError> {
        match self {
            ForgeClient::GitHub(c) => self.gate().call("react", || c.react(repo, comment_id, reaction)).await,
            ForgeClient::GitLab(c) => {
                self.gate().call("award emoji", || c.react(repo, number, comment_id, reaction)).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn web_urls_are_plain_http_addresses() {
        assert_eq!(
            web_url(Some("https://github.com/acme/fleet/")).as_deref(),
            Some("https://github.com/acme/fleet")
        );
        for refused in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://user:pw@github.com/acme/fleet",
            "https://github.com/acme/fleet?x=1",
            "https://github.com/acme/fleet#x",
            "not a url",
        ] {
            assert_eq!(web_url(Some(refused)), None, "{refused}");
        }
        let (github, gitlab) = (ForgeKind::GitHub, ForgeKind::GitLab);
        assert_eq!(github.pull_page("https://github.com/a/b", 7), "https://github.com/a/b/pull/7");
        assert_eq!(
            gitlab.pull_page("https://gl.example/g/p", 7),
            "https://gl.example/g/p/-/merge_requests/7"
        );
        assert_eq!(
            gitlab.commit_page("https://gl.example/g/p", "abc"),
            "https://gl.example/g/p/-/commit/abc"
        );
    }

    #[test]
    fn classifies_statuses() {
        assert!(matches!(ForgeError::from_status(429, None, ""), ForgeError::RateLimited(None)));
        assert!(matches!(
            ForgeError::from_status(403, None, "API rate limit exceeded"),
            ForgeError::RateLimited(_)
        ));
        assert!(matches!(
            ForgeError::from_status(403, None, "Resource not accessible"),
            ForgeError::Permanent(_)
        ));
        assert!(matches!(ForgeError::from_status(502, None, ""), ForgeError::Transient(_)));
        assert!(matches!(ForgeError::from_status(404, None, ""), ForgeError::NotFound(_)));
        assert!(matches!(ForgeError::from_status(401, None, "Bad credentials"), ForgeError::Unauthorized(_)));
        assert!(matches!(
            ForgeError::from_status(403, None, r#"{"message":"Bad credentials"}"#),
            ForgeError::Unauthorized(_)
        ));
    }

    #[tokio::test]
    async fn retries_transient_failures_and_not_permanent_ones() {
        let calls = AtomicUsize::new(0);
        let result = with_retries("test", || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(ForgeError::Transient("boom".into())),
                1 => Err(ForgeError::RateLimited(Some(Duration::from_millis(10)))),
                _ => Ok(7),
            }
        })
        .await;
        assert_eq!(result.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let calls = AtomicUsize::new(0);
        let result: Result<(), _> = with_retries("test", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(ForgeError::Permanent("no".into()))
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
