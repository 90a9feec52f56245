//! An in-process, stateful fake of the GitLab REST API (v4) for end-to-end tests of the bot.
//!
//! It speaks the real wire format well enough for the `gitlab` crate: `GET /user` (called when a
//! client is built), projects, merge requests (get, list), merge request notes (list with
//! `page`/`per_page`, `x-next-page` and `Link` headers, newest first by default as GitLab does;
//! create, edit, delete), award emoji on notes, commit statuses (create, list) and project members.
//! Projects are addressed by numeric id or URL-encoded path (`group%2Fname`); POST/PUT bodies may
//! be form-urlencoded (what the `gitlab` crate sends) or JSON.
//!
//! Realistic refusals: a commit status may not go from pending to pending or from running to
//! pending/running for the same name and ref (400 "Cannot transition status via :enqueue from
//! :pending ..."), statuses on unknown commits (404), editing another user's note (403), notes over
//! 1,000,000 characters (400), requests without a token (401). `fail_next` and `rate_limit_next`
//! inject failures; a rate limit answers 429 `Retry later` (text/plain) with `Retry-After` and the
//! `RateLimit-*` headers, as GitLab's Rack::Attack does.
#![allow(dead_code)]

use crate::fake_github::{
    hang_or_delay, lock, merge, parse_pairs, rfc3339, stable_id, take_due, unix_now, Holds, Injected, Page,
    Recorded, Reply, Req, Server,
};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// The user id of the bot (the owner of the API token): `GET /user` answers it.
pub const BOT_USER_ID: u64 = 4242;
/// The username of the bot.
pub const BOT_USERNAME: &str = "fluxplan-bot";
/// The author of every merge request.
pub const MR_AUTHOR_ID: u64 = 7;
/// The username of the author of every merge request.
pub const MR_AUTHOR: &str = "contributor";

const MAX_NOTE_CHARS: usize = 1_000_000;
const STATES: [&str; 6] = ["pending", "running", "success", "failed", "canceled", "skipped"];

/// A running fake GitLab; dropping it shuts the server down.
pub struct FakeGitLab {
    server: Server,
    state: Arc<Mutex<Inner>>,
}

impl FakeGitLab {
    /// Starts the server on 127.0.0.1 port 0 in a background thread with its own tokio runtime.
    pub fn start() -> FakeGitLab {
        let state = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new().fallback(handle).with_state(state.clone());
        let server = Server::start("fake-gitlab", app);
        {
            let mut inner = lock(&state);
            inner.base = server.url();
            inner.users.insert(BOT_USER_ID, BOT_USERNAME.into());
            inner.users.insert(MR_AUTHOR_ID, MR_AUTHOR.into());
        }
        FakeGitLab { server, state }
    }

    /// Base URL, e.g. "http://127.0.0.1:41234".
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// "127.0.0.1:PORT": what `gitlab::GitlabBuilder::new` takes (with `.insecure()` for http).
    pub fn host(&self) -> String {
        self.server.addr().to_string()
    }

    /// Adds an opened merge request `iid` in `project` ("group/name", numeric id `project_id`),
    /// creating the project on first use.
    #[allow(clippy::too_many_arguments)]
    pub fn add_merge_request(
        &self,
        project: &str,
        project_id: u64,
        iid: u64,
        sha: &str,
        source_branch: &str,
        target_branch: &str,
        http_url_to_repo: &str,
    ) {
        let mut inner = self.lock();
        let now = unix_now();
        inner.projects.entry(project_id).or_insert_with(|| Project {
            id: project_id,
            path: project.into(),
            http_url_to_repo: http_url_to_repo.into(),
            created_at: now,
        });
        inner.commits.insert((project_id, sha.into()), source_branch.into());
        let id = inner.next_id();
        let mr = MergeRequest {
            id,
            sha: sha.into(),
            source_branch: source_branch.into(),
            target_branch: target_branch.into(),
            created_at: now,
            updated_at: now,
        };
        inner.merge_requests.insert((project_id, iid), mr);
    }

    /// Makes the project not know `sha` (as for a fork's commit): statuses on it are refused (404).
    pub fn forget_commit(&self, project: &str, sha: &str) {
        let mut inner = self.lock();
        let project_id = inner.project_id(project).expect("forget_commit: no such project");
        inner.commits.remove(&(project_id, sha.to_string()));
    }

    /// A new push to the merge request's source branch: its head becomes `sha`.
    pub fn set_head(&self, project: &str, iid: u64, sha: &str) {
        let mut inner = self.lock();
        let project_id = inner.project_id(project).expect("set_head: no such project");
        let mr = inner.merge_requests.get_mut(&(project_id, iid)).expect("set_head: no such merge request");
        mr.sha = sha.into();
        mr.updated_at = unix_now();
        let branch = mr.source_branch.clone();
        inner.commits.insert((project_id, sha.into()), branch);
    }

    /// Makes `user_id` (`username`) a member of `project` with `level`
    /// (10 guest, 20 reporter, 30 developer, 40 maintainer, 50 owner).
    pub fn set_access_level(&self, project: &str, user_id: u64, username: &str, level: u64) {
        let mut inner = self.lock();
        let project_id = inner.project_id(project).expect("set_access_level: no such project");
        inner.users.insert(user_id, username.into());
        inner.members.insert((project_id, user_id), level);
    }

    /// The live notes on the merge request, as (id, body), in creation order.
    pub fn notes(&self, project: &str, iid: u64) -> Vec<(u64, String)> {
        let inner = self.lock();
        let Some(project_id) = inner.project_id(project) else { return Vec::new() };
        inner
            .notes
            .iter()
            .filter(|n| n.project_id == project_id && n.iid == iid)
            .map(|n| (n.id, n.body.clone()))
            .collect()
    }

    /// Adds a note by a human (`user_id`, `username`) on the merge request and returns its id.
    pub fn add_note(&self, project: &str, iid: u64, user_id: u64, username: &str, body: &str) -> u64 {
        let mut inner = self.lock();
        let project_id = inner.project_id(project).expect("add_note: no such project");
        assert!(inner.merge_requests.contains_key(&(project_id, iid)), "add_note: no merge request !{iid}");
        inner.users.insert(user_id, username.into());
        inner.add_note(project_id, iid, user_id, body).id
    }

    /// Every status posted on `sha`, as the API returned it, in posting order.
    pub fn statuses(&self, project: &str, sha: &str) -> Vec<Value> {
        let inner = self.lock();
        let Some(project_id) = inner.project_id(project) else { return Vec::new() };
        inner
            .statuses
            .iter()
            .filter(|s| s.project_id == project_id && s.sha == sha)
            .map(|s| inner.status_json(s))
            .collect()
    }

    /// The award emoji names (`thumbsup`, `eyes`, ...) on a note, in creation order.
    pub fn award_emoji(&self, project: &str, iid: u64, note_id: u64) -> Vec<String> {
        let inner = self.lock();
        let Some(project_id) = inner.project_id(project) else { return Vec::new() };
        let note = inner.notes.iter().find(|n| n.project_id == project_id && n.iid == iid && n.id == note_id);
        let Some(note) = note else { return Vec::new() };
        inner.awards.iter().filter(|a| a.note_id == note.id).map(|a| a.name.clone()).collect()
    }

    /// Every request received so far: (HTTP method, path with query string).
    pub fn requests(&self) -> Vec<(String, String)> {
        self.lock().requests.iter().map(|r| (r.method.clone(), r.path.clone())).collect()
    }

    /// Every request received so far: (HTTP method, path with query string, body).
    pub fn requests_with_bodies(&self) -> Vec<(String, String, String)> {
        self.lock().requests.iter().map(|r| (r.method.clone(), r.path.clone(), r.body.clone())).collect()
    }

    /// The next `count` requests (any method and path, `GET /user` included) answer `status`
    /// with a JSON error body `{"message": "500 Internal Server Error"}`.
    pub fn fail_next(&self, status: u16, count: usize) {
        self.lock().injected.extend(std::iter::repeat_n((None, Injected::Fail(status)), count));
    }

    /// Like `fail_next`, for requests whose path contains `path` only.
    pub fn fail_next_on(&self, path: &str, status: u16, count: usize) {
        let injected = (Some(path.to_string()), Injected::Fail(status));
        self.lock().injected.extend(std::iter::repeat_n(injected, count));
    }

    /// The next `count` requests answer 429 "Retry later" with `Retry-After: retry_after_secs`.
    pub fn rate_limit_next(&self, count: usize, retry_after_secs: u64) {
        self.lock()
            .injected
            .extend(std::iter::repeat_n((None, Injected::RateLimit(retry_after_secs)), count));
    }

    /// The next `count` requests whose path contains `path` wait, unanswered, until
    /// `release_held`; then they are answered as usual.
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

    /// Requests that were received and never answered (`hang_next_on`) so far.
    pub fn hung(&self) -> usize {
        self.lock().hung
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
    projects: BTreeMap<u64, Project>,
    merge_requests: BTreeMap<(u64, u64), MergeRequest>,
    /// (project id, sha) of every known commit -> the branch it was pushed to.
    commits: BTreeMap<(u64, String), String>,
    users: BTreeMap<u64, String>,
    members: BTreeMap<(u64, u64), u64>,
    notes: Vec<Note>,
    awards: Vec<Award>,
    statuses: Vec<Status>,
    requests: Vec<Recorded>,
    /// Failures to inject, each for any request or for paths containing a text.
    injected: VecDeque<(Option<String>, Injected)>,
    /// Requests held back until the test lets them go.
    holds: Arc<Holds>,
    /// Requests left unanswered.
    hung: usize,
}

struct Project {
    id: u64,
    path: String,
    http_url_to_repo: String,
    created_at: u64,
}

struct MergeRequest {
    id: u64,
    sha: String,
    source_branch: String,
    target_branch: String,
    created_at: u64,
    updated_at: u64,
}

#[derive(Clone)]
struct Note {
    id: u64,
    project_id: u64,
    iid: u64,
    author_id: u64,
    body: String,
    created_at: u64,
    updated_at: u64,
}

struct Award {
    id: u64,
    note_id: u64,
    user_id: u64,
    name: String,
    created_at: u64,
}

struct Status {
    id: u64,
    project_id: u64,
    sha: String,
    git_ref: Option<String>,
    status: String,
    name: String,
    description: Option<String>,
    target_url: Option<String>,
    created_at: u64,
}

fn error(status: u16, message: &str) -> Reply {
    Reply::json(status, json!({ "message": message }))
}

fn not_found(what: &str) -> Reply {
    error(404, &format!("404 {what} Not Found"))
}

impl Inner {
    fn next_id(&mut self) -> u64 {
        self.last_id += 1;
        self.last_id
    }

    /// The id of a project given as a numeric id or a "group/name" path.
    fn project_id(&self, key: &str) -> Option<u64> {
        match key.parse::<u64>() {
            Ok(id) => self.projects.contains_key(&id).then_some(id),
            Err(_) => self.projects.values().find(|p| p.path == key).map(|p| p.id),
        }
    }

    fn add_note(&mut self, project_id: u64, iid: u64, author_id: u64, body: &str) -> Note {
        let now = unix_now();
        let note = Note {
            id: self.next_id(),
            project_id,
            iid,
            author_id,
            body: body.into(),
            created_at: now,
            updated_at: now,
        };
        self.notes.push(note.clone());
        note
    }

    fn route(&mut self, req: &Req) -> Reply {
        let segs: Vec<&str> = req.segs.iter().map(String::as_str).collect();
        match (req.method.as_str(), segs.as_slice()) {
            ("GET", ["api", "v4", "user"]) => Reply::json(200, self.current_user_json()),
            (_, ["api", "v4", "projects", project, rest @ ..]) => match self.project_id(project) {
                Some(project_id) => self.project_route(req, project_id, rest),
                None => not_found("Project"),
            },
            _ => Reply::json(404, json!({"error": "404 Not Found"})),
        }
    }

    fn project_route(&mut self, req: &Req, project_id: u64, rest: &[&str]) -> Reply {
        let number = |s: &str| s.parse::<u64>().ok();
        match (req.method.as_str(), rest) {
            ("GET", []) => Reply::json(200, self.project_json(project_id)),
            ("GET", ["merge_requests"]) => self.list_merge_requests(req, project_id),
            (_, ["merge_requests", iid, rest @ ..]) => {
                match number(iid).filter(|&i| self.merge_requests.contains_key(&(project_id, i))) {
                    Some(iid) => self.merge_request_route(req, project_id, iid, rest),
                    None => not_found(""),
                }
            }
            ("POST", ["statuses", sha]) => self.create_status(req, project_id, sha),
            ("GET", ["repository", "commits", sha, "statuses"]) => self.list_statuses(req, project_id, sha),
            ("GET", ["members", "all", user_id] | ["members", user_id]) => {
                match number(user_id)
                    .and_then(|u| self.members.get(&(project_id, u)).map(|level| (u, *level)))
                {
                    Some((user_id, level)) => Reply::json(200, self.member_json(user_id, level)),
                    None => not_found(""),
                }
            }
            _ => Reply::json(404, json!({"error": "404 Not Found"})),
        }
    }

    fn merge_request_route(&mut self, req: &Req, project_id: u64, iid: u64, rest: &[&str]) -> Reply {
        match (req.method.as_str(), rest) {
            ("GET", []) => Reply::json(200, self.merge_request_json(project_id, iid)),
            ("GET", ["notes"]) => self.list_notes(req, project_id, iid),
            ("POST", ["notes"]) => self.create_note(req, project_id, iid),
            (method, ["notes", note_id, rest @ ..]) => {
                let index = note_id.parse::<u64>().ok().and_then(|id| {
                    self.notes.iter().position(|n| n.project_id == project_id && n.iid == iid && n.id == id)
                });
                let Some(index) = index else { return not_found("Note") };
                match (method, rest) {
                    ("GET", []) => Reply::json(200, self.note_json(&self.notes[index])),
                    ("PUT", []) => self.edit_note(req, index),
                    ("DELETE", []) => {
                        let removed = self.notes.remove(index);
                        self.awards.retain(|a| a.note_id != removed.id);
                        Reply::empty(204)
                    }
                    ("GET", ["award_emoji"]) => {
                        let note_id = self.notes[index].id;
                        let all: Vec<&Award> = self.awards.iter().filter(|a| a.note_id == note_id).collect();
                        let page = Page::of(&all, &req.query, 20);
                        let body = page.items.iter().map(|a| self.award_json(a)).collect();
                        self.page_headers(&page, Reply::json(200, Value::Array(body)), req)
                    }
                    ("POST", ["award_emoji"]) => self.create_award(req, index),
                    _ => Reply::json(404, json!({"error": "404 Not Found"})),
                }
            }
            _ => Reply::json(404, json!({"error": "404 Not Found"})),
        }
    }

    // --- notes

    fn list_notes(&self, req: &Req, project_id: u64, iid: u64) -> Reply {
        let mut all: Vec<&Note> =
            self.notes.iter().filter(|n| n.project_id == project_id && n.iid == iid).collect();
        let by_updated = req.query_get("order_by") == Some("updated_at");
        all.sort_by_key(|n| (if by_updated { n.updated_at } else { n.created_at }, n.id));
        // GitLab lists notes newest first unless asked otherwise.
        if req.query_get("sort") != Some("asc") {
            all.reverse();
        }
        let page = Page::of(&all, &req.query, 20);
        let body = page.items.iter().map(|n| self.note_json(n)).collect();
        self.page_headers(&page, Reply::json(200, Value::Array(body)), req)
    }

    fn create_note(&mut self, req: &Req, project_id: u64, iid: u64) -> Reply {
        let body = match note_body(req) {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let note = self.add_note(project_id, iid, BOT_USER_ID, &body);
        Reply::json(201, self.note_json(&note))
    }

    fn edit_note(&mut self, req: &Req, index: usize) -> Reply {
        if self.notes[index].author_id != BOT_USER_ID {
            return error(403, "403 Forbidden");
        }
        let body = match note_body(req) {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let note = &mut self.notes[index];
        note.body = body;
        note.updated_at = unix_now();
        let note = note.clone();
        Reply::json(200, self.note_json(&note))
    }

    fn note_json(&self, n: &Note) -> Value {
        let mr_id = self.merge_requests.get(&(n.project_id, n.iid)).map_or(0, |mr| mr.id);
        json!({
            "id": n.id,
            "type": null,
            "body": n.body,
            "attachment": null,
            "author": self.user_json(n.author_id),
            "created_at": rfc3339(n.created_at, true),
            "updated_at": rfc3339(n.updated_at, true),
            "system": false,
            "noteable_id": mr_id,
            "noteable_type": "MergeRequest",
            "project_id": n.project_id,
            "noteable_iid": n.iid,
            "commit_id": null,
            "resolvable": false,
            "confidential": false,
            "internal": false,
            "imported": false,
            "imported_from": "none",
            "commands_changes": {},
        })
    }

    // --- award emoji

    fn create_award(&mut self, req: &Req, index: usize) -> Reply {
        let Some(name) = fields(req).remove("name").filter(|n| !n.is_empty()) else {
            return Reply::json(400, json!({"error": "name is missing"}));
        };
        let note_id = self.notes[index].id;
        if self.awards.iter().any(|a| a.note_id == note_id && a.user_id == BOT_USER_ID && a.name == name) {
            return not_found("Award Emoji Name has already been taken");
        }
        let award = Award { id: self.next_id(), note_id, user_id: BOT_USER_ID, name, created_at: unix_now() };
        let body = self.award_json(&award);
        self.awards.push(award);
        Reply::json(201, body)
    }

    fn award_json(&self, a: &Award) -> Value {
        json!({
            "id": a.id,
            "name": a.name,
            "user": self.user_json(a.user_id),
            "created_at": rfc3339(a.created_at, true),
            "updated_at": rfc3339(a.created_at, true),
            "awardable_id": a.note_id,
            "awardable_type": "Note",
        })
    }

    // --- commit statuses

    fn create_status(&mut self, req: &Req, project_id: u64, sha: &str) -> Reply {
        let mut fields = fields(req);
        let Some(state) = fields.remove("state") else {
            return Reply::json(400, json!({"error": "state is missing"}));
        };
        if !STATES.contains(&state.as_str()) {
            return Reply::json(400, json!({"error": "state does not have a valid value"}));
        }
        let Some(branch) = self.commits.get(&(project_id, sha.to_string())) else {
            return not_found("Commit");
        };
        let name =
            fields.remove("name").or_else(|| fields.remove("context")).unwrap_or_else(|| "default".into());
        let git_ref = fields.remove("ref").or_else(|| Some(branch.clone()));
        // A status still pending or running cannot be re-entered (GitLab's job state machine).
        let previous =
            self.statuses.iter().rev().find(|s| {
                s.project_id == project_id && s.sha == sha && s.name == name && s.git_ref == git_ref
            });
        if let Some(previous) = previous {
            let event = match state.as_str() {
                "pending" => "enqueue",
                "running" => "run",
                _ => "",
            };
            let refused = matches!(
                (previous.status.as_str(), state.as_str()),
                ("pending", "pending") | ("running", "pending" | "running")
            );
            if refused {
                let message = format!(
                    "Cannot transition status via :{event} from :{} (Reason(s): Status cannot transition via \"{event}\")",
                    previous.status
                );
                return error(400, &message);
            }
        }
        let status = Status {
            id: self.next_id(),
            project_id,
            sha: sha.into(),
            git_ref,
            status: state,
            name,
            description: fields.remove("description"),
            target_url: fields.remove("target_url"),
            created_at: unix_now(),
        };
        let body = self.status_json(&status);
        self.statuses.push(status);
        Reply::json(201, body)
    }

    fn list_statuses(&self, req: &Req, project_id: u64, sha: &str) -> Reply {
        let mut all: Vec<&Status> =
            self.statuses.iter().filter(|s| s.project_id == project_id && s.sha == sha).collect();
        if req.query_get("all") != Some("true") {
            // Only the latest status of each (name, ref).
            let mut latest: Vec<&Status> = Vec::new();
            for s in all.iter().rev() {
                if !latest.iter().any(|l| l.name == s.name && l.git_ref == s.git_ref) {
                    latest.push(s);
                }
            }
            latest.reverse();
            all = latest;
        }
        all.retain(|s| req.query_get("name").is_none_or(|n| n == s.name));
        all.retain(|s| req.query_get("ref").is_none_or(|r| Some(r) == s.git_ref.as_deref()));
        if req.query_get("sort") == Some("desc") {
            all.reverse();
        }
        let page = Page::of(&all, &req.query, 20);
        let body = page.items.iter().map(|s| self.status_json(s)).collect();
        self.page_headers(&page, Reply::json(200, Value::Array(body)), req)
    }

    fn status_json(&self, s: &Status) -> Value {
        let started = s.status != "pending";
        let finished = !["pending", "running"].contains(&s.status.as_str());
        let at = rfc3339(s.created_at, true);
        json!({
            "id": s.id,
            "sha": s.sha,
            "ref": s.git_ref,
            "status": s.status,
            "name": s.name,
            "target_url": s.target_url,
            "description": s.description,
            "created_at": at,
            "started_at": if started { json!(at) } else { Value::Null },
            "finished_at": if finished { json!(at) } else { Value::Null },
            "allow_failure": false,
            "coverage": null,
            "pipeline_id": stable_id(&format!("{}:{}", s.project_id, s.sha)),
            "author": self.user_json(BOT_USER_ID),
        })
    }

    // --- merge requests, projects, members, users

    fn list_merge_requests(&self, req: &Req, project_id: u64) -> Reply {
        let state = req.query_get("state").unwrap_or("all");
        let iids: Vec<u64> = self
            .merge_requests
            .iter()
            .rev()
            .filter(|((p, _), mr)| {
                *p == project_id
                    && (state == "opened" || state == "all")
                    && req.query_get("target_branch").is_none_or(|b| b == mr.target_branch)
                    && req.query_get("source_branch").is_none_or(|b| b == mr.source_branch)
            })
            .map(|((_, iid), _)| *iid)
            .collect();
        let page = Page::of(&iids, &req.query, 20);
        let body = page.items.iter().map(|iid| self.merge_request_json(project_id, *iid)).collect();
        self.page_headers(&page, Reply::json(200, Value::Array(body)), req)
    }

    fn merge_request_json(&self, project_id: u64, iid: u64) -> Value {
        let mr = &self.merge_requests[&(project_id, iid)];
        let path = &self.projects[&project_id].path;
        let notes = self.notes.iter().filter(|n| n.project_id == project_id && n.iid == iid).count();
        let mut json = json!({
            "id": mr.id,
            "iid": iid,
            "project_id": project_id,
            "title": format!("Merge request {iid}"),
            "description": "",
            "state": "opened",
            "created_at": rfc3339(mr.created_at, true),
            "updated_at": rfc3339(mr.updated_at, true),
            "merged_by": null,
            "merge_user": null,
            "merged_at": null,
            "closed_by": null,
            "closed_at": null,
            "target_branch": mr.target_branch,
            "source_branch": mr.source_branch,
            "user_notes_count": notes,
        });
        // Two halves: one `json!` this large exceeds the default macro recursion limit.
        merge(
            &mut json,
            json!({
                "upvotes": 0,
                "downvotes": 0,
                "author": self.user_json(MR_AUTHOR_ID),
                "assignees": [],
                "assignee": null,
                "reviewers": [],
                "source_project_id": project_id,
                "target_project_id": project_id,
                "labels": [],
                "draft": false,
                "work_in_progress": false,
                "milestone": null,
                "merge_when_pipeline_succeeds": false,
                "merge_status": "can_be_merged",
                "detailed_merge_status": "mergeable",
                "sha": mr.sha,
                "merge_commit_sha": null,
                "squash_commit_sha": null,
                "discussion_locked": null,
                "should_remove_source_branch": null,
                "force_remove_source_branch": false,
                "reference": format!("!{iid}"),
                "references": {"short": format!("!{iid}"), "relative": format!("!{iid}"), "full": format!("{path}!{iid}")},
                "web_url": format!("{}/{path}/-/merge_requests/{iid}", self.base),
                "time_stats": {"time_estimate": 0, "total_time_spent": 0, "human_time_estimate": null, "human_total_time_spent": null},
                "squash": false,
                "task_completion_status": {"count": 0, "completed_count": 0},
                "has_conflicts": false,
                "blocking_discussions_resolved": true,
                "diff_refs": {"base_sha": null, "head_sha": mr.sha, "start_sha": null},
            }),
        );
        json
    }

    fn project_json(&self, project_id: u64) -> Value {
        let p = &self.projects[&project_id];
        let (namespace, name) = p.path.rsplit_once('/').unwrap_or(("", &p.path));
        let host = self.base.trim_start_matches("http://");
        json!({
            "id": p.id,
            "description": null,
            "name": name,
            "name_with_namespace": p.path.replace('/', " / "),
            "path": name,
            "path_with_namespace": p.path,
            "created_at": rfc3339(p.created_at, true),
            "last_activity_at": rfc3339(p.created_at, true),
            "default_branch": "main",
            "visibility": "private",
            "ssh_url_to_repo": format!("git@{host}:{}.git", p.path),
            "http_url_to_repo": p.http_url_to_repo,
            "web_url": format!("{}/{}", self.base, p.path),
            "namespace": {
                "id": stable_id(namespace),
                "name": namespace,
                "path": namespace,
                "kind": "group",
                "full_path": namespace,
                "web_url": format!("{}/groups/{namespace}", self.base),
            },
            "archived": false,
            "empty_repo": false,
        })
    }

    fn member_json(&self, user_id: u64, level: u64) -> Value {
        let mut user = self.user_json(user_id);
        user["access_level"] = json!(level);
        user["created_at"] = json!(rfc3339(unix_now(), true));
        user["expires_at"] = Value::Null;
        user["membership_state"] = json!("active");
        user
    }

    fn current_user_json(&self) -> Value {
        let mut user = self.user_json(BOT_USER_ID);
        user["bot"] = json!(true);
        user["is_admin"] = json!(false);
        user
    }

    fn user_json(&self, id: u64) -> Value {
        let username = self.users.get(&id).cloned().unwrap_or_else(|| format!("user{id}"));
        json!({
            "id": id,
            "username": username,
            "name": username,
            "state": "active",
            "locked": false,
            "avatar_url": format!("{}/uploads/-/system/user/avatar/{id}/avatar.png", self.base),
            "web_url": format!("{}/{username}", self.base),
        })
    }

    /// GitLab's pagination headers: `x-page`, `x-per-page`, `x-total`, `x-total-pages`,
    /// `x-next-page`, `x-prev-page` and `Link`.
    fn page_headers<T: Clone>(&self, page: &Page<T>, reply: Reply, req: &Req) -> Reply {
        let next = if page.page < page.total_pages { (page.page + 1).to_string() } else { String::new() };
        let prev = if page.page > 1 { (page.page - 1).to_string() } else { String::new() };
        let reply = reply
            .header("x-page", &page.page.to_string())
            .header("x-per-page", &page.per_page.to_string())
            .header("x-total", &page.total.to_string())
            .header("x-total-pages", &page.total_pages.to_string())
            .header("x-next-page", &next)
            .header("x-prev-page", &prev);
        page.link_header(reply, &self.base, req)
    }
}

/// The fields of a form-urlencoded or JSON body.
fn fields(req: &Req) -> BTreeMap<String, String> {
    if req.content_type.starts_with("application/json") {
        let value: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
        let Some(object) = value.as_object() else { return BTreeMap::new() };
        object
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), String::from)))
            .collect()
    } else {
        parse_pairs(&req.body).into_iter().collect()
    }
}

/// The `body` of a note create or edit, or the 400 GitLab answers.
fn note_body(req: &Req) -> Result<String, Reply> {
    match fields(req).remove("body") {
        None => Err(Reply::json(400, json!({"error": "body is missing"}))),
        Some(b) if b.chars().count() > MAX_NOTE_CHARS => Err(Reply::json(
            400,
            json!({"message": {"note": ["is too long (maximum is 1000000 characters)"]}}),
        )),
        Some(b) => Ok(b),
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
    holds.pass(&req.path).await;
    let injected = {
        let mut inner = lock(&state);
        inner.requests.push(req.recorded());
        take_due(&mut inner.injected, &req.path)
    };
    let injected = hang_or_delay(injected, || lock(&state).hung += 1).await;
    let mut inner = lock(&state);
    let reply = match injected {
        Some(Injected::Fail(code)) => {
            let reason =
                StatusCode::from_u16(code).ok().and_then(|s| s.canonical_reason()).unwrap_or("Error");
            error(code, &format!("{code} {reason}"))
        }
        Some(Injected::RateLimit(secs)) => Reply::text(429, "Retry later\n")
            .header("retry-after", &secs.to_string())
            .header("ratelimit-name", "throttle_authenticated_api")
            .header("ratelimit-limit", "2000")
            .header("ratelimit-observed", "2001")
            .header("ratelimit-remaining", "0")
            .header("ratelimit-reset", &(unix_now() + secs).to_string()),
        None if !req.authorized => error(401, "401 Unauthorized"),
        None => inner.route(&req),
        Some(Injected::Hang | Injected::Slow(_)) => unreachable!("taken above"),
    };
    reply.into_response()
}
