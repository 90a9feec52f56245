//! An in-process, stateful fake of the GitHub REST API (v3) for end-to-end tests of the bot.
//!
//! It speaks the real wire format well enough for `octocrab`: issue comments (list with
//! `per_page`/`page` and a `Link` header, create, get, update, delete), comment reactions, commit
//! statuses (create, list, combined), collaborator permissions, pull requests (get, list) and
//! `/rate_limit`. Every request is recorded; `fail_next` and `rate_limit_next` inject failures.
//! Realistic refusals: comments over 65536 characters (422), statuses on unknown commits (422),
//! status descriptions over 140 characters (422), requests without `Authorization` (401).
//! Check runs (create, update, list for a ref, list annotations) as docs.github.com/en/rest/checks/runs
//! documents them: more than 50 annotations in one request, a summary over 65,535 characters or
//! a completed run without a conclusion are refused (422); updates append annotations;
//! `refuse_checks` answers 403 as for a token without `checks: write`.
//!
//! The bottom of the file holds the plumbing shared with `fake_gitlab` (server thread, clock,
//! query parsing, pagination, failure injection).
#![allow(dead_code)]

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// The login of the bot: every comment, status and reaction made through the API is its.
pub const BOT_LOGIN: &str = "fluxplan[bot]";
/// The login of the author of every pull request.
pub const PR_AUTHOR: &str = "contributor";

const DOCS: &str = "https://docs.github.com/rest";
const MAX_COMMENT_CHARS: usize = 65_536;
const MAX_STATUS_DESCRIPTION_CHARS: usize = 140;
const REACTIONS: [&str; 8] = ["+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"];

/// A running fake GitHub; dropping it shuts the server down.
pub struct FakeGitHub {
    server: Server,
    state: Arc<Mutex<Inner>>,
    answered: Arc<Answered>,
}

/// How many requests the fake has answered, and a signal on every answer: tests wait for the
/// state they expect, woken by each change instead of polling.
#[derive(Default)]
struct Answered {
    count: Mutex<u64>,
    changed: Condvar,
}

impl FakeGitHub {
    /// Starts the server on 127.0.0.1 port 0 in a background thread with its own tokio runtime.
    pub fn start() -> FakeGitHub {
        let state = Arc::new(Mutex::new(Inner::default()));
        let answered = Arc::new(Answered::default());
        let signal = answered.clone();
        let app = Router::new().fallback(handle).with_state(state.clone()).layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let signal = signal.clone();
                async move {
                    let response = next.run(request).await;
                    *lock(&signal.count) += 1;
                    signal.changed.notify_all();
                    response
                }
            },
        ));
        let server = Server::start("fake-github", app);
        lock(&state).base = server.url();
        FakeGitHub { server, state, answered }
    }

    /// Waits until `done` holds, checking it again after every request the fake answers; fails
    /// after `fixture::WAIT` (a bound, not an expectation) naming `what`.
    pub fn wait_until(&self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + crate::fixture::WAIT;
        loop {
            // Read before checking: an answer between the check and the wait is not missed.
            let seen = *lock(&self.answered.count);
            if done() {
                return;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let count = lock(&self.answered.count);
            let (count, waited) = self
                .answered
                .changed
                .wait_timeout_while(count, left, |count| *count == seen)
                .unwrap_or_else(|e| e.into_inner());
            drop(count);
            assert!(!waited.timed_out() || done(), "timed out waiting for {what}");
        }
    }

    /// Base URL, e.g. "http://127.0.0.1:41234" (what octocrab's `base_uri` takes).
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Adds an open pull request `number` in `repo` ("owner/name"). `clone_url` must be a URL
    /// (`file:///tmp/x/repo.git` works): octocrab parses it as one.
    #[allow(clippy::too_many_arguments)]
    pub fn add_pull(
        &self,
        repo: &str,
        number: u64,
        head_sha: &str,
        head_ref: &str,
        base_ref: &str,
        base_sha: &str,
        clone_url: &str,
    ) {
        assert!(clone_url.contains("://"), "clone_url must be a URL such as file:///path, got {clone_url:?}");
        let mut inner = self.lock();
        let id = inner.next_id();
        let now = unix_now();
        inner.shas.insert((repo.to_string(), head_sha.to_string()));
        inner.shas.insert((repo.to_string(), base_sha.to_string()));
        let pull = Pull {
            id,
            head_sha: head_sha.into(),
            head_ref: head_ref.into(),
            base_ref: base_ref.into(),
            base_sha: base_sha.into(),
            clone_url: clone_url.into(),
            created_at: now,
            updated_at: now,
        };
        inner.pulls.insert((repo.to_string(), number), pull);
    }

    /// A new push to the pull request's head branch: its head becomes `head_sha`.
    pub fn set_head(&self, repo: &str, number: u64, head_sha: &str) {
        let mut inner = self.lock();
        inner.shas.insert((repo.to_string(), head_sha.to_string()));
        let pull = inner.pulls.get_mut(&(repo.to_string(), number)).expect("set_head: no such pull request");
        pull.head_sha = head_sha.into();
        pull.updated_at = unix_now();
    }

    /// Makes `sha` a commit of `repo` (statuses are accepted on it), e.g. a merge queue group's head.
    pub fn add_commit(&self, repo: &str, sha: &str) {
        self.lock().shas.insert((repo.to_string(), sha.to_string()));
    }

    /// Sets `user`'s role on `repo`: admin, maintain, write, triage, read or none.
    /// Users never set are unknown to the permission endpoint (404).
    pub fn set_permission(&self, repo: &str, user: &str, permission: &str) {
        assert!(
            ["admin", "maintain", "write", "triage", "read", "none"].contains(&permission),
            "unknown permission {permission:?}"
        );
        self.lock().permissions.insert((repo.to_string(), user.to_string()), permission.to_string());
    }

    /// The live comments on the issue or pull request, as (id, body), in creation order.
    pub fn comments(&self, repo: &str, number: u64) -> Vec<(u64, String)> {
        let inner = self.lock();
        inner
            .comments
            .iter()
            .filter(|c| c.repo == repo && c.number == number)
            .map(|c| (c.id, c.body.clone()))
            .collect()
    }

    /// Every status posted on `sha`, as the API returned it, in posting order.
    pub fn statuses(&self, repo: &str, sha: &str) -> Vec<Value> {
        let inner = self.lock();
        inner
            .statuses
            .iter()
            .filter(|s| s.repo == repo && s.sha == sha)
            .map(|s| inner.status_json(s))
            .collect()
    }

    /// fluxplan's check runs on `sha`, oldest first, as the API shows them, each with its
    /// `annotations` (all, in the order they arrived) and `annotation_requests`.
    pub fn check_runs(&self, repo: &str, sha: &str) -> Vec<Value> {
        let inner = self.lock();
        inner
            .check_runs
            .iter()
            .filter(|c| c.repo == repo && c.head_sha == sha)
            .map(|c| {
                let mut run = inner.check_run_json(c);
                run["annotations"] = json!(c.annotations);
                run["annotation_requests"] = json!(c.annotation_requests);
                run
            })
            .collect()
    }

    /// While on, every check run request answers 403, as for a token without `checks: write`.
    pub fn refuse_checks(&self, refuse: bool) {
        self.lock().refuse_checks = refuse;
    }

    /// While set, an update that appends annotations to a run that already has some answers
    /// `status` (a forge failing in the middle of a long write).
    pub fn fail_annotation_appends(&self, status: Option<u16>) {
        self.lock().fail_appends = status;
    }

    /// The reactions (`+1`, `eyes`, ...) on a comment, in creation order.
    pub fn reactions(&self, repo: &str, comment_id: u64) -> Vec<String> {
        let inner = self.lock();
        inner
            .reactions
            .iter()
            .filter(|r| r.repo == repo && r.comment_id == comment_id)
            .map(|r| r.content.clone())
            .collect()
    }

    /// Adds a comment by a human `user` on the issue or pull request and returns its id.
    pub fn add_issue_comment(&self, repo: &str, number: u64, user: &str, body: &str) -> u64 {
        let mut inner = self.lock();
        assert!(
            inner.pulls.contains_key(&(repo.to_string(), number)),
            "add_issue_comment: no pull request {repo}#{number}"
        );
        inner.add_comment(repo, number, user, body).id
    }

    /// Every request received so far: (HTTP method, path with query string).
    pub fn requests(&self) -> Vec<(String, String)> {
        self.lock().requests.iter().map(|r| (r.method.clone(), r.path.clone())).collect()
    }

    /// (path with query, Authorization header) of every request so far.
    pub fn authorizations(&self) -> Vec<(String, String)> {
        self.lock().authorizations.clone()
    }

    /// Every request received so far: (HTTP method, path with query string, body).
    pub fn requests_with_bodies(&self) -> Vec<(String, String, String)> {
        self.lock().requests.iter().map(|r| (r.method.clone(), r.path.clone(), r.body.clone())).collect()
    }

    /// The next `count` requests (any method and path) answer `status` with a JSON error body.
    pub fn fail_next(&self, status: u16, count: usize) {
        let mut inner = self.lock();
        inner.injected.extend(std::iter::repeat_n((None, Injected::Fail(status)), count));
    }

    /// The next `count` requests answer 429 with `Retry-After: retry_after_secs`,
    /// `x-ratelimit-remaining: 0` and `x-ratelimit-reset`, as GitHub's rate limiter does.
    pub fn rate_limit_next(&self, count: usize, retry_after_secs: u64) {
        let mut inner = self.lock();
        inner.injected.extend(std::iter::repeat_n((None, Injected::RateLimit(retry_after_secs)), count));
    }

    /// Like `fail_next`, for requests whose path contains `path` only.
    pub fn fail_next_on(&self, path: &str, status: u16, count: usize) {
        let mut inner = self.lock();
        inner.injected.extend(std::iter::repeat_n((Some(path.to_string()), Injected::Fail(status)), count));
    }

    /// Like `rate_limit_next`, for requests whose path contains `path` only.
    pub fn rate_limit_next_on(&self, path: &str, count: usize, retry_after_secs: u64) {
        let mut inner = self.lock();
        let injected = (Some(path.to_string()), Injected::RateLimit(retry_after_secs));
        inner.injected.extend(std::iter::repeat_n(injected, count));
    }

    /// An outage until `end_outage`: every request whose path contains `path` answers `status`
    /// (however often it is retried), as a forge that is down for minutes.
    pub fn outage_on(&self, path: &str, status: u16) {
        self.lock().outage = Some((path.to_string(), status));
    }

    pub fn end_outage(&self) {
        self.lock().outage = None;
    }

    /// The next `count` requests whose path contains `path` wait, unanswered, until
    /// `release_held` (a forge that answers late: a rate limit waited out, a slow proxy); then
    /// they are answered as usual.
    pub fn hold_next_on(&self, path: &str, count: usize) {
        self.lock().holds.hold(path, count);
    }

    /// Answers every held request.
    pub fn release_held(&self) {
        self.lock().holds.release();
    }

    /// How many requests are being held now.
    pub fn held(&self) -> usize {
        self.lock().holds.held()
    }

    /// The next `count` requests whose path contains `path` are never answered (the connection
    /// stays open until the client gives up); later ones are answered as usual.
    pub fn hang_next_on(&self, path: &str, count: usize) {
        let injected = (Some(path.to_string()), Injected::Hang);
        self.lock().injected.extend(std::iter::repeat_n(injected, count));
    }

    /// The next `count` requests whose path contains `path` are answered after `delay`.
    pub fn answer_slowly_on(&self, path: &str, count: usize, delay: std::time::Duration) {
        let injected = (Some(path.to_string()), Injected::Slow(delay));
        self.lock().injected.extend(std::iter::repeat_n(injected, count));
    }

    /// While on, every request is refused as with a revoked token (401 `Bad credentials`).
    pub fn refuse_token(&self, refuse: bool) {
        self.lock().refuse_token = refuse;
    }

    /// Requests that were received and never answered (`hang_next_on`) so far.
    pub fn hung(&self) -> usize {
        self.lock().hung
    }

    /// When each request was received, in order, with its method and path.
    pub fn arrivals(&self) -> Vec<(std::time::Instant, String, String)> {
        self.lock().requests.iter().map(|r| (r.at, r.method.clone(), r.path.clone())).collect()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.state)
    }
}

// ---------------------------------------------------------------------------------------------
// State

#[derive(Default)]
struct Inner {
    base: String,
    last_id: u64,
    pulls: BTreeMap<(String, u64), Pull>,
    /// (repo, sha) of every commit the fake knows: pull heads (past ones too) and bases.
    shas: BTreeSet<(String, String)>,
    permissions: BTreeMap<(String, String), String>,
    comments: Vec<Comment>,
    statuses: Vec<Status>,
    check_runs: Vec<CheckRun>,
    /// Check runs answer 403 (a token without `checks: write`).
    refuse_checks: bool,
    /// Updates that append annotations to a run that has some answer this status.
    fail_appends: Option<u16>,
    reactions: Vec<Reaction>,
    requests: Vec<Recorded>,
    /// (path, Authorization header) of every request.
    authorizations: Vec<(String, String)>,
    /// Failures to inject, each for any request or for paths containing a text.
    injected: VecDeque<(Option<String>, Injected)>,
    /// While set, requests whose path contains the text answer the status.
    outage: Option<(String, u16)>,
    /// Requests held back until the test lets them go.
    holds: Arc<Holds>,
    /// Every request answers 401, as with a revoked token.
    refuse_token: bool,
    /// Requests left unanswered.
    hung: usize,
}

struct Pull {
    id: u64,
    head_sha: String,
    head_ref: String,
    base_ref: String,
    base_sha: String,
    clone_url: String,
    created_at: u64,
    updated_at: u64,
}

#[derive(Clone)]
struct Comment {
    id: u64,
    repo: String,
    number: u64,
    user: String,
    body: String,
    created_at: u64,
    updated_at: u64,
}

struct Status {
    id: u64,
    repo: String,
    sha: String,
    state: String,
    target_url: Value,
    description: Value,
    context: String,
    created_at: u64,
}

struct CheckRun {
    id: u64,
    repo: String,
    name: String,
    head_sha: String,
    status: String,
    conclusion: Value,
    external_id: Value,
    details_url: Value,
    title: Value,
    summary: Value,
    text: Value,
    annotations: Vec<Value>,
    /// How many requests carried annotations to it.
    annotation_requests: usize,
    started_at: u64,
}

struct Reaction {
    id: u64,
    repo: String,
    comment_id: u64,
    user: String,
    content: String,
    created_at: u64,
}

impl Inner {
    fn next_id(&mut self) -> u64 {
        self.last_id += 1;
        self.last_id
    }

    fn add_comment(&mut self, repo: &str, number: u64, user: &str, body: &str) -> Comment {
        let now = unix_now();
        let comment = Comment {
            id: self.next_id(),
            repo: repo.into(),
            number,
            user: user.into(),
            body: body.into(),
            created_at: now,
            updated_at: now,
        };
        self.comments.push(comment.clone());
        comment
    }

    fn route(&mut self, req: &Req) -> Reply {
        let segs: Vec<&str> = req.segs.iter().map(String::as_str).collect();
        match (req.method.as_str(), segs.as_slice()) {
            ("GET", ["rate_limit"]) => Reply::json(200, rate_limit_json()),
            // Who the token (or the App) is; the bot comments as BOT_LOGIN either way.
            ("GET", ["user"]) => Reply::json(200, json!({"login": BOT_LOGIN, "id": 4242, "type": "Bot"})),
            ("GET", ["app"]) => Reply::json(200, json!({"id": 4242, "slug": "fluxplan", "name": "fluxplan"})),
            // GitHub App installation tokens (the App authenticates with its JWT).
            ("POST", ["app", "installations", id, "access_tokens"]) => Reply::json(
                201,
                json!({"token": format!("ghs_installation_{id}"), "expires_at": "2099-01-01T00:00:00Z",
                       "permissions": {"pull_requests": "write", "statuses": "write"}, "repository_selection": "all"}),
            ),
            (_, ["repos", owner, name, rest @ ..]) => self.repo_route(req, &format!("{owner}/{name}"), rest),
            _ => not_found(),
        }
    }

    fn repo_route(&mut self, req: &Req, repo: &str, rest: &[&str]) -> Reply {
        match (req.method.as_str(), rest) {
            ("GET", ["issues", "comments", id]) => {
                self.with_comment(repo, id, |inner, c| Reply::json(200, inner.comment_json(c)))
            }
            ("PATCH" | "POST", ["issues", "comments", id]) => self.update_comment(req, repo, id),
            ("DELETE", ["issues", "comments", id]) => self.delete_comment(repo, id),
            ("GET", ["issues", "comments", id, "reactions"]) => self.list_reactions(req, repo, id),
            ("POST", ["issues", "comments", id, "reactions"]) => self.create_reaction(req, repo, id),
            ("GET", ["issues", number, "comments"]) => self.list_comments(req, repo, number),
            ("POST", ["issues", number, "comments"]) => self.create_comment(req, repo, number),
            ("POST", ["statuses", sha]) => self.create_status(req, repo, sha),
            ("GET", ["commits", sha, "statuses"] | ["statuses", sha]) => self.list_statuses(req, repo, sha),
            ("GET", ["commits", sha, "status"]) => self.combined_status(repo, sha),
            (_, ["check-runs", ..] | ["commits", _, "check-runs"]) if self.refuse_checks => Reply::json(
                403,
                json!({"message": "Resource not accessible by integration", "documentation_url": DOCS, "status": "403"}),
            ),
            ("POST", ["check-runs"]) => self.create_check_run(req, repo),
            ("PATCH", ["check-runs", id]) => self.update_check_run(req, repo, id),
            ("GET", ["check-runs", id, "annotations"]) => self.check_run_annotations(repo, id),
            ("GET", ["commits", sha, "check-runs"]) => self.list_check_runs(req, repo, sha),
            ("GET", ["collaborators", user, "permission"]) => self.permission(repo, user),
            ("GET", ["pulls"]) => self.list_pulls(req, repo),
            ("GET", ["pulls", number]) => match number.parse().ok().and_then(|n| self.pull_json(repo, n)) {
                Some(pull) => Reply::json(200, pull),
                None => not_found(),
            },
            _ => not_found(),
        }
    }

    // --- comments

    fn list_comments(&self, req: &Req, repo: &str, number: &str) -> Reply {
        let Some(number) = self.pull_number(repo, number) else { return not_found() };
        let all: Vec<&Comment> =
            self.comments.iter().filter(|c| c.repo == repo && c.number == number).collect();
        let page = Page::of(&all, &req.query, 30);
        let body = page.items.iter().map(|c| self.comment_json(c)).collect();
        page.link_header(Reply::json(200, Value::Array(body)), &self.base, req)
    }

    fn create_comment(&mut self, req: &Req, repo: &str, number: &str) -> Reply {
        let Some(number) = self.pull_number(repo, number) else { return not_found() };
        let body = match comment_body(req) {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let comment = self.add_comment(repo, number, BOT_LOGIN, &body);
        Reply::json(201, self.comment_json(&comment))
    }

    fn update_comment(&mut self, req: &Req, repo: &str, id: &str) -> Reply {
        let body = match comment_body(req) {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let Some(index) = self.comment_index(repo, id) else { return not_found() };
        let comment = &mut self.comments[index];
        comment.body = body;
        comment.updated_at = unix_now();
        let comment = comment.clone();
        Reply::json(200, self.comment_json(&comment))
    }

    fn delete_comment(&mut self, repo: &str, id: &str) -> Reply {
        let Some(index) = self.comment_index(repo, id) else { return not_found() };
        let removed = self.comments.remove(index);
        self.reactions.retain(|r| !(r.repo == repo && r.comment_id == removed.id));
        Reply::empty(204)
    }

    fn comment_index(&self, repo: &str, id: &str) -> Option<usize> {
        let id: u64 = id.parse().ok()?;
        self.comments.iter().position(|c| c.repo == repo && c.id == id)
    }

    fn with_comment(&self, repo: &str, id: &str, f: impl FnOnce(&Self, &Comment) -> Reply) -> Reply {
        match self.comment_index(repo, id) {
            Some(index) => f(self, &self.comments[index]),
            None => not_found(),
        }
    }

    /// The number of an existing pull request (every issue here is a pull request).
    fn pull_number(&self, repo: &str, number: &str) -> Option<u64> {
        let number: u64 = number.parse().ok()?;
        self.pulls.contains_key(&(repo.to_string(), number)).then_some(number)
    }

    fn comment_json(&self, c: &Comment) -> Value {
        let api = format!("{}/repos/{}", self.base, c.repo);
        let mut reactions =
            json!({"url": format!("{api}/issues/comments/{}/reactions", c.id), "total_count": 0});
        for content in REACTIONS {
            reactions[content] = json!(0);
        }
        for r in self.reactions.iter().filter(|r| r.repo == c.repo && r.comment_id == c.id) {
            reactions[r.content.as_str()] = json!(reactions[r.content.as_str()].as_u64().unwrap_or(0) + 1);
            reactions["total_count"] = json!(reactions["total_count"].as_u64().unwrap_or(0) + 1);
        }
        json!({
            "id": c.id,
            "node_id": format!("IC_{}", c.id),
            "url": format!("{api}/issues/comments/{}", c.id),
            "html_url": format!("https://github.com/{}/pull/{}#issuecomment-{}", c.repo, c.number, c.id),
            "issue_url": format!("{api}/issues/{}", c.number),
            "body": c.body,
            "user": self.user_json(&c.user),
            "created_at": rfc3339(c.created_at, false),
            "updated_at": rfc3339(c.updated_at, false),
            "author_association": self.association(&c.repo, &c.user),
            "performed_via_github_app": null,
            "reactions": reactions,
        })
    }

    /// GitHub's `author_association` of `user` on `repo`.
    fn association(&self, repo: &str, user: &str) -> &'static str {
        if user == PR_AUTHOR {
            return "CONTRIBUTOR";
        }
        match self.permissions.get(&(repo.to_string(), user.to_string())).map(String::as_str) {
            Some("admin") if repo.split('/').next() == Some(user) => "OWNER",
            Some("none") | None => "NONE",
            Some(_) => "COLLABORATOR",
        }
    }

    // --- reactions

    fn list_reactions(&self, req: &Req, repo: &str, id: &str) -> Reply {
        let Some(index) = self.comment_index(repo, id) else { return not_found() };
        let comment_id = self.comments[index].id;
        let content = req.query_get("content");
        let all: Vec<&Reaction> = self
            .reactions
            .iter()
            .filter(|r| {
                r.repo == repo && r.comment_id == comment_id && content.is_none_or(|c| c == r.content)
            })
            .collect();
        let page = Page::of(&all, &req.query, 30);
        let body = page.items.iter().map(|r| self.reaction_json(r)).collect();
        page.link_header(Reply::json(200, Value::Array(body)), &self.base, req)
    }

    fn create_reaction(&mut self, req: &Req, repo: &str, id: &str) -> Reply {
        let Some(index) = self.comment_index(repo, id) else { return not_found() };
        let comment_id = self.comments[index].id;
        let content = serde_json::from_str::<Value>(&req.body)
            .ok()
            .and_then(|v| v["content"].as_str().map(String::from));
        let Some(content) = content.filter(|c| REACTIONS.contains(&c.as_str())) else {
            return validation_failed("Reaction", "content", "content is not included in the list");
        };
        // Reacting twice with the same content returns the existing reaction with 200.
        if let Some(existing) = self.reactions.iter().find(|r| {
            r.repo == repo && r.comment_id == comment_id && r.user == BOT_LOGIN && r.content == content
        }) {
            return Reply::json(200, self.reaction_json(existing));
        }
        let reaction = Reaction {
            id: self.next_id(),
            repo: repo.into(),
            comment_id,
            user: BOT_LOGIN.into(),
            content,
            created_at: unix_now(),
        };
        let body = self.reaction_json(&reaction);
        self.reactions.push(reaction);
        Reply::json(201, body)
    }

    fn reaction_json(&self, r: &Reaction) -> Value {
        json!({
            "id": r.id,
            "node_id": format!("REA_{}", r.id),
            "user": self.user_json(&r.user),
            "content": r.content,
            "created_at": rfc3339(r.created_at, false),
        })
    }

    // --- statuses

    fn create_status(&mut self, req: &Req, repo: &str, sha: &str) -> Reply {
        let Ok(body) = serde_json::from_str::<Value>(&req.body) else {
            return Reply::json(
                400,
                json!({"message": "Problems parsing JSON", "documentation_url": DOCS, "status": "400"}),
            );
        };
        let state = body["state"].as_str().unwrap_or("");
        if !["error", "failure", "pending", "success"].contains(&state) {
            return validation_failed("Status", "state", "state is not included in the list");
        }
        if body["description"].as_str().is_some_and(|d| d.chars().count() > MAX_STATUS_DESCRIPTION_CHARS) {
            return validation_failed(
                "Status",
                "description",
                "description is too long (maximum is 140 characters)",
            );
        }
        if !self.shas.contains(&(repo.to_string(), sha.to_string())) {
            let message = format!("No commit found for SHA: {sha}");
            return Reply::json(422, json!({"message": message, "documentation_url": DOCS, "status": "422"}));
        }
        let status = Status {
            id: self.next_id(),
            repo: repo.into(),
            sha: sha.into(),
            state: state.into(),
            target_url: body["target_url"].clone(),
            description: body["description"].clone(),
            context: body["context"].as_str().unwrap_or("default").into(),
            created_at: unix_now(),
        };
        let json = self.status_json(&status);
        self.statuses.push(status);
        Reply::json(201, json)
    }

    /// Statuses of `sha`, newest first (as GitHub lists them).
    fn sha_statuses(&self, repo: &str, sha: &str) -> Vec<&Status> {
        self.statuses.iter().rev().filter(|s| s.repo == repo && s.sha == sha).collect()
    }

    fn list_statuses(&self, req: &Req, repo: &str, sha: &str) -> Reply {
        let all = self.sha_statuses(repo, sha);
        let page = Page::of(&all, &req.query, 30);
        let body = page.items.iter().map(|s| self.status_json(s)).collect();
        page.link_header(Reply::json(200, Value::Array(body)), &self.base, req)
    }

    fn combined_status(&self, repo: &str, sha: &str) -> Reply {
        let mut seen = BTreeSet::new();
        let latest: Vec<&Status> =
            self.sha_statuses(repo, sha).into_iter().filter(|s| seen.insert(s.context.clone())).collect();
        let state = if latest.iter().any(|s| s.state == "error" || s.state == "failure") {
            "failure"
        } else if latest.is_empty() || latest.iter().any(|s| s.state == "pending") {
            "pending"
        } else {
            "success"
        };
        let api = format!("{}/repos/{repo}", self.base);
        Reply::json(
            200,
            json!({
                "state": state,
                "sha": sha,
                "total_count": latest.len(),
                "statuses": latest.iter().map(|s| self.status_json(s)).collect::<Vec<_>>(),
                "commit_url": format!("{api}/commits/{sha}"),
                "url": format!("{api}/commits/{sha}/status"),
            }),
        )
    }

    fn status_json(&self, s: &Status) -> Value {
        json!({
            "url": format!("{}/repos/{}/statuses/{}", self.base, s.repo, s.sha),
            "avatar_url": "https://avatars.githubusercontent.com/in/1?v=4",
            "id": s.id,
            "node_id": format!("SC_{}", s.id),
            "state": s.state,
            "description": s.description,
            "target_url": s.target_url,
            "context": s.context,
            "created_at": rfc3339(s.created_at, false),
            "updated_at": rfc3339(s.created_at, false),
            "creator": self.user_json(BOT_LOGIN),
        })
    }

    // --- check runs

    fn create_check_run(&mut self, req: &Req, repo: &str) -> Reply {
        let body = match check_run_body(req) {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let (Some(name), Some(sha)) = (body["name"].as_str(), body["head_sha"].as_str()) else {
            return validation_failed("CheckRun", "name", "name and head_sha are required");
        };
        if !self.shas.contains(&(repo.to_string(), sha.to_string())) {
            return validation_failed("CheckRun", "head_sha", "No commit found for SHA");
        }
        let mut run = CheckRun {
            id: self.next_id(),
            repo: repo.into(),
            name: name.into(),
            head_sha: sha.into(),
            status: "queued".into(),
            conclusion: Value::Null,
            external_id: Value::Null,
            details_url: Value::Null,
            title: Value::Null,
            summary: Value::Null,
            text: Value::Null,
            annotations: Vec::new(),
            annotation_requests: 0,
            started_at: unix_now(),
        };
        apply_check_run(&mut run, &body);
        let json = self.check_run_json(&run);
        self.check_runs.push(run);
        Reply::json(201, json)
    }

    fn update_check_run(&mut self, req: &Req, repo: &str, id: &str) -> Reply {
        let body = match check_run_body(req) {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let id: u64 = id.parse().unwrap_or(0);
        let fail_appends = self.fail_appends;
        let Some(run) = self.check_runs.iter_mut().find(|c| c.repo == repo && c.id == id) else {
            return not_found();
        };
        let appends = body["output"]["annotations"].as_array().is_some_and(|a| !a.is_empty());
        if let Some(status) = fail_appends.filter(|_| appends && !run.annotations.is_empty()) {
            return Reply::json(status, json!({"message": "Server Error", "status": status.to_string()}));
        }
        apply_check_run(run, &body);
        let run = self.check_runs.iter().find(|c| c.id == id).expect("just updated");
        Reply::json(200, self.check_run_json(run))
    }

    fn list_check_runs(&self, req: &Req, repo: &str, sha: &str) -> Reply {
        let name = req.query_get("check_name");
        let mut runs: Vec<&CheckRun> = self
            .check_runs
            .iter()
            .rev()
            .filter(|c| c.repo == repo && c.head_sha == sha && name.is_none_or(|n| n == c.name))
            .collect();
        if req.query_get("filter") != Some("all") {
            let mut seen = BTreeSet::new();
            runs.retain(|c| seen.insert(c.name.clone()));
        }
        let page = Page::of(&runs, &req.query, 30);
        let items: Vec<Value> = page.items.iter().map(|c| self.check_run_json(c)).collect();
        Reply::json(200, json!({"total_count": runs.len(), "check_runs": items}))
    }

    fn check_run_annotations(&self, repo: &str, id: &str) -> Reply {
        let id: u64 = id.parse().unwrap_or(0);
        match self.check_runs.iter().find(|c| c.repo == repo && c.id == id) {
            Some(run) => Reply::json(200, json!(run.annotations)),
            None => not_found(),
        }
    }

    fn check_run_json(&self, c: &CheckRun) -> Value {
        let api = format!("{}/repos/{}", self.base, c.repo);
        json!({
            "id": c.id,
            "node_id": format!("CR_{}", c.id),
            "head_sha": c.head_sha,
            "external_id": c.external_id,
            "url": format!("{api}/check-runs/{}", c.id),
            "html_url": format!("https://github.com/{}/runs/{}", c.repo, c.id),
            "details_url": c.details_url,
            "status": c.status,
            "conclusion": c.conclusion,
            "started_at": rfc3339(c.started_at, false),
            "completed_at": if c.status == "completed" { json!(rfc3339(c.started_at, false)) } else { Value::Null },
            "output": {
                "title": c.title,
                "summary": c.summary,
                "text": c.text,
                "annotations_count": c.annotations.len(),
                "annotations_url": format!("{api}/check-runs/{}/annotations", c.id),
            },
            "name": c.name,
            "check_suite": {"id": 1},
            "app": {"id": 4242, "slug": "fluxplan", "name": "fluxplan"},
            "pull_requests": [],
        })
    }

    // --- collaborators

    fn permission(&self, repo: &str, user: &str) -> Reply {
        let Some(role) = self.permissions.get(&(repo.to_string(), user.to_string())) else {
            return not_found();
        };
        let rank = ["none", "read", "triage", "write", "maintain", "admin"]
            .iter()
            .position(|r| r == role)
            .unwrap_or(0);
        // The legacy `permission` maps maintain to write and triage to read.
        let legacy = match role.as_str() {
            "maintain" => "write",
            "triage" => "read",
            other => other,
        };
        let mut user_json = self.user_json(user);
        user_json["permissions"] = json!({"admin": rank >= 5, "maintain": rank >= 4, "push": rank >= 3, "triage": rank >= 2, "pull": rank >= 1});
        user_json["role_name"] = json!(role);
        Reply::json(200, json!({"permission": legacy, "role_name": role, "user": user_json}))
    }

    // --- pulls

    fn list_pulls(&self, req: &Req, repo: &str) -> Reply {
        let state = req.query_get("state").unwrap_or("open");
        let base = req.query_get("base");
        // `head` is "owner:ref".
        let head = req.query_get("head").map(|h| h.split_once(':').map_or(h, |(_, r)| r));
        let numbers: Vec<u64> = self
            .pulls
            .iter()
            .rev()
            .filter(|((r, _), p)| {
                r == repo
                    && (state == "open" || state == "all")
                    && base.is_none_or(|b| b == p.base_ref)
                    && head.is_none_or(|h| h == p.head_ref)
            })
            .map(|((_, n), _)| *n)
            .collect();
        let page = Page::of(&numbers, &req.query, 30);
        let body = page.items.iter().filter_map(|n| self.pull_json(repo, *n)).collect();
        page.link_header(Reply::json(200, Value::Array(body)), &self.base, req)
    }

    fn pull_json(&self, repo: &str, number: u64) -> Option<Value> {
        let p = self.pulls.get(&(repo.to_string(), number))?;
        let api = format!("{}/repos/{repo}", self.base);
        let html = format!("https://github.com/{repo}/pull/{number}");
        let owner = repo.split('/').next().unwrap_or(repo);
        let repo_json = self.repo_json(repo, &p.clone_url);
        let comments = self.comments.iter().filter(|c| c.repo == repo && c.number == number).count();
        let mut pull = json!({
            "url": format!("{api}/pulls/{number}"),
            "id": p.id,
            "node_id": format!("PR_{}", p.id),
            "html_url": html,
            "diff_url": format!("{html}.diff"),
            "patch_url": format!("{html}.patch"),
            "issue_url": format!("{api}/issues/{number}"),
            "commits_url": format!("{api}/pulls/{number}/commits"),
            "review_comments_url": format!("{api}/pulls/{number}/comments"),
            "review_comment_url": format!("{api}/pulls/comments{{/number}}"),
            "comments_url": format!("{api}/issues/{number}/comments"),
            "statuses_url": format!("{api}/statuses/{}", p.head_sha),
            "number": number,
            "state": "open",
            "locked": false,
            "title": format!("Pull request {number}"),
            "user": self.user_json(PR_AUTHOR),
            "body": null,
            "labels": [],
            "milestone": null,
            "active_lock_reason": null,
            "created_at": rfc3339(p.created_at, false),
            "updated_at": rfc3339(p.updated_at, false),
            "closed_at": null,
            "merged_at": null,
            "merge_commit_sha": null,
            "assignee": null,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
        });
        // Two halves: one `json!` this large exceeds the default macro recursion limit.
        merge(
            &mut pull,
            json!({
                "head": {
                    "label": format!("{owner}:{}", p.head_ref),
                    "ref": p.head_ref,
                    "sha": p.head_sha,
                    "user": self.user_json(owner),
                    "repo": repo_json,
                },
                "base": {
                    "label": format!("{owner}:{}", p.base_ref),
                    "ref": p.base_ref,
                    "sha": p.base_sha,
                    "user": self.user_json(owner),
                    "repo": repo_json,
                },
                "_links": {
                    "self": {"href": format!("{api}/pulls/{number}")},
                    "html": {"href": html},
                    "issue": {"href": format!("{api}/issues/{number}")},
                    "comments": {"href": format!("{api}/issues/{number}/comments")},
                    "statuses": {"href": format!("{api}/statuses/{}", p.head_sha)},
                },
                "author_association": "CONTRIBUTOR",
                "auto_merge": null,
                "draft": false,
                "merged": false,
                "mergeable": true,
                "rebaseable": true,
                "mergeable_state": "clean",
                "merged_by": null,
                "comments": comments,
                "review_comments": 0,
                "maintainer_can_modify": false,
                "commits": 1,
                "additions": 1,
                "deletions": 1,
                "changed_files": 1,
            }),
        );
        Some(pull)
    }

    fn repo_json(&self, repo: &str, clone_url: &str) -> Value {
        let (owner, name) = repo.split_once('/').unwrap_or((repo, repo));
        let id = stable_id(repo);
        json!({
            "id": id,
            "node_id": format!("R_{id}"),
            "name": name,
            "full_name": repo,
            "owner": self.user_json(owner),
            "private": false,
            "html_url": format!("https://github.com/{repo}"),
            "description": null,
            "fork": false,
            "url": format!("{}/repos/{repo}", self.base),
            "clone_url": clone_url,
            "ssh_url": format!("git@github.com:{repo}.git"),
            "default_branch": "main",
            "visibility": "public",
            "archived": false,
            "disabled": false,
        })
    }

    /// A GitHub user (`simple-user`); logins ending in "[bot]" are of type "Bot".
    fn user_json(&self, login: &str) -> Value {
        let id = stable_id(login);
        let api = format!("{}/users/{}", self.base, encode_component(login));
        let (kind, html) = match login.strip_suffix("[bot]") {
            Some(app) => ("Bot", format!("https://github.com/apps/{app}")),
            None => ("User", format!("https://github.com/{login}")),
        };
        json!({
            "login": login,
            "id": id,
            "node_id": format!("U_{id}"),
            "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
            "gravatar_id": "",
            "url": api,
            "html_url": html,
            "followers_url": format!("{api}/followers"),
            "following_url": format!("{api}/following{{/other_user}}"),
            "gists_url": format!("{api}/gists{{/gist_id}}"),
            "starred_url": format!("{api}/starred{{/owner}}{{/repo}}"),
            "subscriptions_url": format!("{api}/subscriptions"),
            "organizations_url": format!("{api}/orgs"),
            "repos_url": format!("{api}/repos"),
            "events_url": format!("{api}/events{{/privacy}}"),
            "received_events_url": format!("{api}/received_events"),
            "type": kind,
            "user_view_type": "public",
            "site_admin": false,
        })
    }
}

/// The `body` of a comment create or update, or the 422 GitHub answers.
fn comment_body(req: &Req) -> Result<String, Reply> {
    let body =
        serde_json::from_str::<Value>(&req.body).ok().and_then(|v| v["body"].as_str().map(String::from));
    match body {
        None => Err(validation_failed("IssueComment", "body", "body wasn't supplied")),
        Some(b) if b.chars().count() > MAX_COMMENT_CHARS => {
            Err(validation_failed("IssueComment", "body", "Body is too long (maximum is 65536 characters)"))
        }
        Some(b) => Ok(b),
    }
}

fn rate_limit_json() -> Value {
    let reset = unix_now() + 3600;
    let rate = |limit: u64| json!({"limit": limit, "used": 1, "remaining": limit - 1, "reset": reset});
    json!({
        "resources": {
            "core": rate(5000),
            "search": rate(30),
            "graphql": rate(5000),
            "integration_manifest": rate(5000),
            "code_search": rate(10),
        },
        "rate": rate(5000),
    })
}

fn not_found() -> Reply {
    Reply::json(404, json!({"message": "Not Found", "documentation_url": DOCS, "status": "404"}))
}

fn validation_failed(resource: &str, field: &str, message: &str) -> Reply {
    Reply::json(
        422,
        json!({
            "message": "Validation Failed",
            "errors": [{"resource": resource, "code": "custom", "field": field, "message": message}],
            "documentation_url": DOCS,
            "status": "422",
        }),
    )
}

/// GitHub's documented limits on check run output.
const MAX_CHECK_OUTPUT_CHARS: usize = 65_535;
const MAX_ANNOTATIONS_PER_REQUEST: usize = 50;

/// A create or update body, validated as GitHub does.
fn check_run_body(req: &Req) -> Result<Value, Reply> {
    let Ok(body) = serde_json::from_str::<Value>(&req.body) else {
        return Err(Reply::json(
            400,
            json!({"message": "Problems parsing JSON", "documentation_url": DOCS, "status": "400"}),
        ));
    };
    if let Some(status) = body.get("status") {
        if !["queued", "in_progress", "completed"].contains(&status.as_str().unwrap_or("")) {
            return Err(validation_failed("CheckRun", "status", "status is not included in the list"));
        }
        if status == "completed" && body["conclusion"].as_str().is_none() {
            return Err(validation_failed("CheckRun", "conclusion", "conclusion is required when completed"));
        }
    }
    if let Some(output) = body.get("output") {
        if output["title"].as_str().is_none() || output["summary"].as_str().is_none() {
            return Err(validation_failed("CheckRun", "output", "title and summary are required"));
        }
        for field in ["summary", "text"] {
            if output[field].as_str().is_some_and(|t| t.chars().count() > MAX_CHECK_OUTPUT_CHARS) {
                return Err(validation_failed(
                    "CheckRun",
                    field,
                    &format!("{field} is too long (maximum is 65535 characters)"),
                ));
            }
        }
        let annotations = output["annotations"].as_array().map(Vec::len).unwrap_or(0);
        if annotations > MAX_ANNOTATIONS_PER_REQUEST {
            return Err(validation_failed(
                "CheckRun",
                "annotations",
                "Only 50 annotations are allowed per request",
            ));
        }
        for a in output["annotations"].as_array().into_iter().flatten() {
            let valid = a["path"].as_str().is_some()
                && a["start_line"].as_u64().is_some()
                && a["end_line"].as_u64().is_some()
                && a["message"].as_str().is_some()
                && ["notice", "warning", "failure"].contains(&a["annotation_level"].as_str().unwrap_or(""));
            if !valid {
                return Err(validation_failed("CheckRun", "annotations", "invalid annotation"));
            }
        }
    }
    Ok(body)
}

/// Applies a validated body: updates replace what they name and append annotations.
fn apply_check_run(run: &mut CheckRun, body: &Value) {
    if let Some(status) = body["status"].as_str() {
        run.status = status.into();
    }
    for (field, slot) in [
        ("conclusion", &mut run.conclusion),
        ("external_id", &mut run.external_id),
        ("details_url", &mut run.details_url),
    ] {
        if let Some(value) = body.get(field) {
            *slot = value.clone();
        }
    }
    if body.get("conclusion").is_some() && body.get("status").is_none() {
        run.status = "completed".into();
    }
    if let Some(output) = body.get("output") {
        run.title = output["title"].clone();
        run.summary = output["summary"].clone();
        if output.get("text").is_some() {
            run.text = output["text"].clone();
        }
        if let Some(annotations) = output["annotations"].as_array().filter(|a| !a.is_empty()) {
            run.annotations.extend(annotations.iter().cloned());
            run.annotation_requests += 1;
        }
    }
}

async fn handle(
    State(state): State<Arc<Mutex<Inner>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req = Req::new(&method, &uri, &headers, &body);
    let holds = lock(&state).holds.clone();
    holds.pass(&req.path_and_query).await;
    let injected = {
        let mut inner = lock(&state);
        inner.requests.push(req.recorded());
        inner.authorizations.push((req.path_and_query.clone(), req.authorization.clone()));
        let down = inner
            .outage
            .as_ref()
            .filter(|(path, _)| req.path_and_query.contains(path.as_str()))
            .map(|(_, status)| *status);
        match down {
            Some(status) => Some(Injected::Fail(status)),
            None => take_due(&mut inner.injected, &req.path_and_query),
        }
    };
    let injected = hang_or_delay(injected, || lock(&state).hung += 1).await;
    let mut inner = lock(&state);
    let reply = match injected {
        Some(Injected::Fail(code)) => {
            let message =
                StatusCode::from_u16(code).ok().and_then(|s| s.canonical_reason()).unwrap_or("Error");
            Reply::json(
                code,
                json!({"message": message, "documentation_url": DOCS, "status": code.to_string()}),
            )
        }
        Some(Injected::RateLimit(secs)) => {
            let reset = unix_now() + secs;
            Reply::json(
                429,
                json!({
                    "message": "API rate limit exceeded for installation ID 1. If you reach out to GitHub Support \
                                for help, please include the request ID.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                    "status": "429",
                }),
            )
            .header("retry-after", &secs.to_string())
            .header("x-ratelimit-limit", "5000")
            .header("x-ratelimit-remaining", "0")
            .header("x-ratelimit-used", "5000")
            .header("x-ratelimit-reset", &reset.to_string())
            .header("x-ratelimit-resource", "core")
        }
        None if inner.refuse_token => Reply::json(
            401,
            json!({"message": "Bad credentials", "documentation_url": DOCS, "status": "401"}),
        ),
        None if !req.authorized && req.path != "/rate_limit" => Reply::json(
            401,
            json!({"message": "Requires authentication", "documentation_url": DOCS, "status": "401"}),
        ),
        None => inner.route(&req),
        Some(Injected::Hang | Injected::Slow(_)) => unreachable!("taken above"),
    };
    reply.into_response()
}

// ---------------------------------------------------------------------------------------------
// Plumbing shared with fake_gitlab

/// The server thread of a fake: axum on 127.0.0.1 port 0 with its own tokio runtime.
/// Dropping it shuts the server down.
pub(crate) struct Server {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves `app` in a background thread; returns once it is listening.
    pub(crate) fn start(name: &str, app: Router) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    let server = std::future::IntoFuture::into_future(axum::serve(listener, app));
                    tokio::select! {
                        result = server => result.expect("fake forge server failed"),
                        _ = rx => {}
                    }
                });
                rt.shutdown_timeout(std::time::Duration::from_secs(1));
            })
            .expect("spawn fake forge thread");
        Server { addr, shutdown: Some(tx), thread: Some(thread) }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub(crate) fn lock<T>(state: &Mutex<T>) -> MutexGuard<'_, T> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Requests held back until the test lets them go (`hold_next_on`).
pub(crate) struct Holds {
    /// (path text, how many more requests to hold).
    rules: Mutex<Vec<(String, usize)>>,
    held: std::sync::atomic::AtomicUsize,
    /// True while held requests may go.
    open: tokio::sync::watch::Sender<bool>,
}

impl Default for Holds {
    fn default() -> Self {
        Holds {
            rules: Mutex::default(),
            held: Default::default(),
            open: tokio::sync::watch::Sender::new(true),
        }
    }
}

impl Holds {
    pub(crate) fn hold(&self, path: &str, count: usize) {
        lock(&self.rules).push((path.to_string(), count));
        self.open.send_replace(false);
    }

    pub(crate) fn release(&self) {
        self.open.send_replace(true);
    }

    pub(crate) fn held(&self) -> usize {
        self.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits, when a rule holds `path`, until the requests are released.
    pub(crate) async fn pass(&self, path: &str) {
        let mut open = self.open.subscribe();
        let matched = {
            let mut rules = lock(&self.rules);
            let rule = rules.iter_mut().find(|(text, left)| *left > 0 && path.contains(text.as_str()));
            rule.map(|(_, left)| *left -= 1).is_some()
        };
        if !matched {
            return;
        }
        self.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _ = open.wait_for(|open| *open).await;
        self.held.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A response queued by `fail_next`, `rate_limit_next`, `hang_next_on` or `answer_slowly_on`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Injected {
    /// Answer this status with a JSON error body.
    Fail(u16),
    /// Answer 429 with `Retry-After` of this many seconds.
    RateLimit(u64),
    /// Never answer.
    Hang,
    /// Answer as usual, after this long.
    Slow(std::time::Duration),
}

/// The first injection queued for requests whose path contains its text (or for any request),
/// taken from the queue.
pub(crate) fn take_due(injected: &mut VecDeque<(Option<String>, Injected)>, path: &str) -> Option<Injected> {
    let due = injected.iter().position(|(on, _)| on.as_ref().is_none_or(|on| path.contains(on.as_str())))?;
    injected.remove(due).map(|(_, injected)| injected)
}

/// Plays a hang (never returns, after calling `hung`) or a slow answer's delay; what is left to
/// answer (`None`: answer as usual).
pub(crate) async fn hang_or_delay(injected: Option<Injected>, hung: impl FnOnce()) -> Option<Injected> {
    match injected {
        Some(Injected::Hang) => {
            hung();
            std::future::pending().await
        }
        Some(Injected::Slow(delay)) => {
            tokio::time::sleep(delay).await;
            None
        }
        other => other,
    }
}

/// One recorded request.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub method: String,
    pub path: String,
    pub body: String,
    /// When it was received.
    pub at: std::time::Instant,
}

/// A request, decoded for routing.
pub(crate) struct Req {
    pub method: String,
    /// The raw (still percent-encoded) path.
    pub path: String,
    pub path_and_query: String,
    /// The path's segments, percent-decoded.
    pub segs: Vec<String>,
    pub query: Vec<(String, String)>,
    pub body: String,
    pub content_type: String,
    /// Whether the request carries credentials (`Authorization` or GitLab's `PRIVATE-TOKEN`).
    pub authorized: bool,
    pub authorization: String,
}

impl Req {
    pub(crate) fn new(method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Req {
        let header = |name: header::HeaderName| {
            headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
        };
        Req {
            method: method.to_string(),
            path: uri.path().to_string(),
            path_and_query: uri
                .path_and_query()
                .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string()),
            segs: uri.path().split('/').filter(|s| !s.is_empty()).map(percent_decode).collect(),
            query: parse_pairs(uri.query().unwrap_or("")),
            body: String::from_utf8_lossy(body).into_owned(),
            content_type: header(header::CONTENT_TYPE),
            authorized: headers.contains_key(header::AUTHORIZATION) || headers.contains_key("private-token"),
            authorization: header(header::AUTHORIZATION),
        }
    }

    pub(crate) fn recorded(&self) -> Recorded {
        Recorded {
            method: self.method.clone(),
            path: self.path_and_query.clone(),
            body: self.body.clone(),
            at: std::time::Instant::now(),
        }
    }

    pub(crate) fn query_get(&self, key: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// A response under construction.
pub(crate) struct Reply {
    status: u16,
    body: Option<String>,
    content_type: &'static str,
    headers: Vec<(String, String)>,
}

impl Reply {
    pub(crate) fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            body: Some(body.to_string()),
            content_type: "application/json; charset=utf-8",
            headers: Vec::new(),
        }
    }

    pub(crate) fn text(status: u16, body: &str) -> Reply {
        Reply { status, body: Some(body.to_string()), content_type: "text/plain", headers: Vec::new() }
    }

    /// A response without a body, such as 204 No Content.
    pub(crate) fn empty(status: u16) -> Reply {
        Reply { status, body: None, content_type: "", headers: Vec::new() }
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = match self.body {
            Some(body) => {
                let mut response = (status, body).into_response();
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static(self.content_type));
                response
            }
            None => status.into_response(),
        };
        for (name, value) in self.headers {
            if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
                response.headers_mut().append(name, value);
            }
        }
        response
    }
}

/// One page of a list, cut by the `page` and `per_page` query parameters (per_page at most 100).
pub(crate) struct Page<T> {
    pub items: Vec<T>,
    pub page: usize,
    pub per_page: usize,
    pub total: usize,
    pub total_pages: usize,
}

impl<T: Clone> Page<T> {
    pub(crate) fn of(all: &[T], query: &[(String, String)], default_per_page: usize) -> Page<T> {
        let get = |key: &str| query.iter().find(|(k, _)| k == key).and_then(|(_, v)| v.parse::<usize>().ok());
        let per_page = get("per_page").filter(|&n| n > 0).unwrap_or(default_per_page).min(100);
        let page = get("page").filter(|&n| n > 0).unwrap_or(1);
        let start = (page - 1).saturating_mul(per_page).min(all.len());
        let end = (start + per_page).min(all.len());
        Page {
            items: all[start..end].to_vec(),
            page,
            per_page,
            total: all.len(),
            total_pages: all.len().div_ceil(per_page).max(1),
        }
    }

    /// Adds the `Link` header (next, last, first, prev) both GitHub and GitLab send.
    pub(crate) fn link_header(&self, reply: Reply, base: &str, req: &Req) -> Reply {
        let url = |page: usize| {
            let mut pairs: Vec<String> = req
                .query
                .iter()
                .filter(|(k, _)| k != "page" && k != "per_page")
                .map(|(k, v)| format!("{}={}", encode_component(k), encode_component(v)))
                .collect();
            pairs.push(format!("per_page={}", self.per_page));
            pairs.push(format!("page={page}"));
            format!("<{base}{}?{}>", req.path, pairs.join("&"))
        };
        let mut links = Vec::new();
        if self.page < self.total_pages {
            links.push(format!("{}; rel=\"next\"", url(self.page + 1)));
            links.push(format!("{}; rel=\"last\"", url(self.total_pages)));
        }
        if self.page > 1 {
            links.push(format!("{}; rel=\"first\"", url(1)));
            links.push(format!("{}; rel=\"prev\"", url(self.page - 1)));
        }
        if links.is_empty() {
            reply
        } else {
            reply.header("link", &links.join(", "))
        }
    }
}

/// Adds the fields of the object `more` to the object `value`.
pub(crate) fn merge(value: &mut Value, more: Value) {
    if let (Some(object), Value::Object(more)) = (value.as_object_mut(), more) {
        object.extend(more);
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// RFC 3339 in UTC: "2024-05-01T12:00:00Z", or "2024-05-01T12:00:00.000Z" with `millis`.
pub(crate) fn rfc3339(secs: u64, millis: bool) -> String {
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    let frac = if millis { ".000" } else { "" };
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{frac}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A stable positive id for a name (users and repositories have no other source of ids).
pub(crate) fn stable_id(name: &str) -> u64 {
    let hash =
        name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    hash % 90_000_000 + 10_000_000
}

/// `key=value&...` pairs, percent-decoded (query strings and form bodies).
pub(crate) fn parse_pairs(s: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(s.as_bytes()).into_owned().collect()
}

/// A percent-decoded path segment.
pub(crate) fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// Percent-encodes everything but unreserved characters (RFC 3986).
pub(crate) fn encode_component(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
