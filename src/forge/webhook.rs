//! Webhooks: verification (GitHub's HMAC-SHA256 signature, GitLab's shared token, both compared
//! in constant time, several secrets accepted for rotation) and parsing into the events fluxplan
//! acts on. Parsing is lenient about fields it does not need and strict about the ones it does.

use super::{ForgeKind, RepoInfo};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// True when `signature` (the `X-Hub-Signature-256` header, `sha256=<hex>`) is the HMAC of `body`
/// under one of `secrets`.
pub fn verify_github_signature(secrets: &[String], body: &[u8], signature: Option<&str>) -> bool {
    let mut check = GithubSignature::new(secrets, signature);
    check.update(body);
    check.verify()
}

/// A GitHub signature computed as the body streams in (under each secret), so a body need not be
/// held whole, nor read back, to be found unsigned.
pub struct GithubSignature {
    expected: Option<Vec<u8>>,
    macs: Vec<HmacSha256>,
}

impl GithubSignature {
    /// The check of `signature` (the `X-Hub-Signature-256` header) under `secrets`.
    pub fn new(secrets: &[String], signature: Option<&str>) -> Self {
        let expected = signature
            .and_then(|s| s.strip_prefix("sha256="))
            .and_then(|hex_digest| hex::decode(hex_digest.trim()).ok());
        let macs = match expected {
            Some(_) => secrets
                .iter()
                .filter(|s| !s.is_empty())
                .filter_map(|secret| HmacSha256::new_from_slice(secret.as_bytes()).ok())
                .collect(),
            None => Vec::new(),
        };
        GithubSignature { expected, macs }
    }

    pub fn update(&mut self, chunk: &[u8]) {
        for mac in &mut self.macs {
            mac.update(chunk);
        }
    }

    /// True when the body seen is signed by one of the secrets (compared in constant time).
    pub fn verify(self) -> bool {
        let Some(expected) = self.expected else { return false };
        self.macs.into_iter().any(|mac| mac.verify_slice(&expected).is_ok())
    }
}

/// The `X-Hub-Signature-256` header value for `body` under `secret` (for tests and tools).
pub fn github_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// True when `token` (the `X-Gitlab-Token` header) is one of `tokens`, compared in constant time.
pub fn verify_gitlab_token(tokens: &[String], token: Option<&str>) -> bool {
    let Some(token) = token else { return false };
    tokens.iter().filter(|t| !t.is_empty()).any(|expected| tokens_equal(expected, token))
}

/// Compares two secrets in constant time, whatever their lengths (through MACs of both).
pub fn tokens_equal(expected: &str, given: &str) -> bool {
    let digest = |value: &str| {
        let mut mac = HmacSha256::new_from_slice(b"fluxplan-token").expect("any key length");
        mac.update(value.as_bytes());
        mac
    };
    let tag = digest(expected).finalize().into_bytes();
    !expected.is_empty() && digest(given).verify_slice(&tag).is_ok()
}

/// What a pull request event asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullEvent {
    pub repo: RepoInfo,
    pub number: u64,
    pub head_sha: String,
    pub base_ref: String,
    /// The head lives in another repository (a fork): its content is untrusted.
    pub from_fork: bool,
    pub closed: bool,
    /// Closed by merging, as the commit `merge_sha` on the base branch (when the forge says it).
    pub merged: bool,
    pub merge_sha: Option<String>,
    /// Who opened it (`jobs::author_key`: a GitHub login, GitLab's `id:N`), when the payload says.
    pub author: Option<String>,
}

/// A GitHub merge queue asks for checks of a merge group: the queued pull requests merged onto
/// the base, as they will land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeGroupEvent {
    pub repo: RepoInfo,
    pub head_sha: String,
    /// `refs/heads/gh-readonly-queue/main/pr-12-…`.
    pub head_ref: String,
    pub base_sha: String,
    /// The branch merged into, without `refs/heads/`.
    pub base_ref: String,
}

/// A comment on a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentEvent {
    pub repo: RepoInfo,
    pub number: u64,
    pub comment_id: u64,
    pub author: String,
    /// GitLab users are looked up by id.
    pub author_id: Option<u64>,
    pub body: String,
    pub author_is_bot: bool,
    /// When the comment was created, by the forge's clock (ms since the epoch).
    pub created_at: Option<i64>,
}

/// A push to a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushEvent {
    pub repo: RepoInfo,
    pub branch: String,
    pub after: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Pull(PullEvent),
    Comment(CommentEvent),
    Push(PushEvent),
    MergeGroup(MergeGroupEvent),
    /// Acknowledged and ignored, with why.
    Ignored(String),
}

#[derive(Debug, thiserror::Error)]
#[error("malformed {forge} {event} payload: {reason}")]
pub struct ParseError {
    pub forge: &'static str,
    pub event: String,
    pub reason: String,
}

fn text(value: &Value, pointer: &str) -> Option<String> {
    value.pointer(pointer).and_then(|v| v.as_str()).map(str::to_string)
}

fn number(value: &Value, pointer: &str) -> Option<u64> {
    value.pointer(pointer).and_then(Value::as_u64)
}

struct Fields<'a> {
    forge: &'static str,
    event: &'a str,
    body: &'a Value,
}

impl Fields<'_> {
    fn text(&self, pointer: &str) -> Result<String, ParseError> {
        text(self.body, pointer).ok_or_else(|| self.missing(pointer))
    }

    fn number(&self, pointer: &str) -> Result<u64, ParseError> {
        number(self.body, pointer).ok_or_else(|| self.missing(pointer))
    }

    fn missing(&self, pointer: &str) -> ParseError {
        ParseError { forge: self.forge, event: self.event.to_string(), reason: format!("no {pointer}") }
    }
}

fn parse_json(forge: &'static str, event: &str, body: &[u8]) -> Result<Value, ParseError> {
    serde_json::from_slice(body).map_err(|e| ParseError {
        forge,
        event: event.to_string(),
        reason: e.to_string(),
    })
}

/// The events fluxplan reads, named as their header names them (`X-GitHub-Event`,
/// `X-Gitlab-Event`); any other is ignored. The parsers match on these, and the metrics
/// pre-create a series for each.
pub mod event {
    pub const PING: &str = "ping";
    pub const PULL_REQUEST: &str = "pull_request";
    pub const ISSUE_COMMENT: &str = "issue_comment";
    pub const PUSH: &str = "push";
    pub const MERGE_GROUP: &str = "merge_group";
    pub const MERGE_REQUEST_HOOK: &str = "Merge Request Hook";
    pub const NOTE_HOOK: &str = "Note Hook";
    pub const PUSH_HOOK: &str = "Push Hook";
}

/// Every GitHub event [`parse_github`] reads.
pub const GITHUB_EVENTS: [&str; 5] =
    [event::PING, event::PULL_REQUEST, event::ISSUE_COMMENT, event::PUSH, event::MERGE_GROUP];
/// Every GitLab event [`parse_gitlab`] reads.
pub const GITLAB_EVENTS: [&str; 3] = [event::MERGE_REQUEST_HOOK, event::NOTE_HOOK, event::PUSH_HOOK];

/// Parses a GitHub webhook (`X-GitHub-Event` header `event`).
pub fn parse_github(event: &str, body: &[u8]) -> Result<Event, ParseError> {
    let value = parse_json("github", event, body)?;
    let f = Fields { forge: "github", event, body: &value };
    let repo = |f: &Fields| -> Result<RepoInfo, ParseError> {
        Ok(RepoInfo {
            forge: ForgeKind::GitHub,
            full_name: f.text("/repository/full_name")?,
            project_id: None,
            clone_url: f.text("/repository/clone_url")?,
            installation_id: number(f.body, "/installation/id"),
            web_url: super::web_url(text(f.body, "/repository/html_url").as_deref()),
        })
    };
    match event {
        event::PING => Ok(Event::Ignored("ping".into())),
        event::PULL_REQUEST => {
            let action = f.text("/action")?;
            let closed = action == "closed";
            // A pull request edited to merge into another base is planned again.
            let retargeted = action == "edited" && value.pointer("/changes/base").is_some();
            if !closed
                && !retargeted
                && !matches!(action.as_str(), "opened" | "synchronize" | "reopened" | "ready_for_review")
            {
                return Ok(Event::Ignored(format!("pull_request action {action}")));
            }
            let repo = repo(&f)?;
            let head_repo = text(&value, "/pull_request/head/repo/full_name");
            // A deleted fork leaves no head repository: still a fork.
            let from_fork = head_repo.as_deref() != Some(repo.full_name.as_str());
            let merged =
                closed && value.pointer("/pull_request/merged").and_then(Value::as_bool) == Some(true);
            Ok(Event::Pull(PullEvent {
                number: f.number("/pull_request/number")?,
                head_sha: f.text("/pull_request/head/sha")?,
                base_ref: f.text("/pull_request/base/ref")?,
                from_fork,
                closed,
                merged,
                merge_sha: text(&value, "/pull_request/merge_commit_sha")
                    .filter(|_| merged)
                    .filter(|s| crate::git::is_commit_id(s)),
                author: crate::jobs::author_key(text(&value, "/pull_request/user/login").as_deref(), None),
                repo,
            }))
        }
        event::ISSUE_COMMENT => {
            if f.text("/action")? != "created" {
                return Ok(Event::Ignored("issue_comment not created".into()));
            }
            if value.pointer("/issue/pull_request").is_none() {
                return Ok(Event::Ignored("comment on an issue, not a pull request".into()));
            }
            Ok(Event::Comment(CommentEvent {
                repo: repo(&f)?,
                number: f.number("/issue/number")?,
                comment_id: f.number("/comment/id")?,
                author: f.text("/comment/user/login")?,
                author_id: number(&value, "/comment/user/id"),
                body: f.text("/comment/body")?,
                author_is_bot: text(&value, "/comment/user/type").as_deref() == Some("Bot"),
                created_at: text(&value, "/comment/created_at").as_deref().and_then(timestamp_ms),
            }))
        }
        event::PUSH => {
            let reference = f.text("/ref")?;
            let Some(branch) = reference.strip_prefix("refs/heads/") else {
                return Ok(Event::Ignored(format!("push to {reference}")));
            };
            if value.pointer("/deleted").and_then(Value::as_bool) == Some(true) {
                return Ok(Event::Ignored("branch deleted".into()));
            }
            Ok(Event::Push(PushEvent {
                repo: repo(&f)?,
                branch: branch.to_string(),
                after: f.text("/after")?,
            }))
        }
        event::MERGE_GROUP => {
            let action = f.text("/action")?;
            if action != "checks_requested" {
                return Ok(Event::Ignored(format!("merge_group action {action}")));
            }
            let head_sha = f.text("/merge_group/head_sha")?;
            let base_sha = f.text("/merge_group/base_sha")?;
            if !crate::git::is_commit_id(&head_sha) || !crate::git::is_commit_id(&base_sha) {
                return Err(f.missing("/merge_group/head_sha (a commit id)"));
            }
            let base_ref = f.text("/merge_group/base_ref")?;
            Ok(Event::MergeGroup(MergeGroupEvent {
                repo: repo(&f)?,
                head_sha,
                head_ref: f.text("/merge_group/head_ref")?,
                base_sha,
                base_ref: base_ref.strip_prefix("refs/heads/").unwrap_or(&base_ref).to_string(),
            }))
        }
        other => Ok(Event::Ignored(format!("event {other}"))),
    }
}

/// Parses a GitLab webhook (`X-Gitlab-Event` header `event`).
pub fn parse_gitlab(event: &str, body: &[u8]) -> Result<Event, ParseError> {
    let value = parse_json("gitlab", event, body)?;
    let f = Fields { forge: "gitlab", event, body: &value };
    let repo = |f: &Fields| -> Result<RepoInfo, ParseError> {
        Ok(RepoInfo {
            forge: ForgeKind::GitLab,
            full_name: f.text("/project/path_with_namespace")?,
            project_id: Some(f.number("/project/id")?),
            clone_url: f.text("/project/git_http_url")?,
            installation_id: None,
            web_url: super::web_url(text(f.body, "/project/web_url").as_deref()),
        })
    };
    match event {
        event::MERGE_REQUEST_HOOK => {
            let action = text(&value, "/object_attributes/action").unwrap_or_default();
            let closed = matches!(action.as_str(), "close" | "merge");
            if !closed && !matches!(action.as_str(), "open" | "reopen" | "update" | "") {
                return Ok(Event::Ignored(format!("merge request action {action}")));
            }
            // An update without new commits (title, labels) does not change the plan; a new
            // target branch does.
            let retargeted = value.pointer("/changes/target_branch").is_some();
            if action == "update" && value.pointer("/object_attributes/oldrev").is_none() && !retargeted {
                return Ok(Event::Ignored("merge request update without new commits".into()));
            }
            let repo = repo(&f)?;
            let source = number(&value, "/object_attributes/source_project_id");
            let target = number(&value, "/object_attributes/target_project_id");
            let fork = source.is_some() && target.is_some() && source != target;
            let merged = action == "merge";
            let head_sha = f.text("/object_attributes/last_commit/id")?;
            // A fast-forward merge makes no commit of its own: the head is what landed.
            let merge_sha = ["/object_attributes/merge_commit_sha", "/object_attributes/squash_commit_sha"]
                .iter()
                .find_map(|p| text(&value, p).filter(|s| crate::git::is_commit_id(s)))
                .or_else(|| Some(head_sha.clone()).filter(|s| crate::git::is_commit_id(s)))
                .filter(|_| merged);
            Ok(Event::Pull(PullEvent {
                number: f.number("/object_attributes/iid")?,
                head_sha,
                base_ref: f.text("/object_attributes/target_branch")?,
                from_fork: fork,
                closed,
                merged,
                merge_sha,
                author: crate::jobs::author_key(
                    None,
                    value.pointer("/object_attributes/author_id").and_then(Value::as_u64),
                ),
                repo,
            }))
        }
        event::NOTE_HOOK => {
            if text(&value, "/object_attributes/noteable_type").as_deref() != Some("MergeRequest") {
                return Ok(Event::Ignored("note on something other than a merge request".into()));
            }
            // Only new notes are commands: an edited one would run again, for a later head. Some
            // GitLab versions sent edits without an action; a note updated after it was created
            // is an edit too.
            if let Some(action) = text(&value, "/object_attributes/action").filter(|a| a != "create") {
                return Ok(Event::Ignored(format!("note action {action}")));
            }
            let created = text(&value, "/object_attributes/created_at");
            let updated = text(&value, "/object_attributes/updated_at");
            if created.is_some() && updated.is_some() && created != updated {
                return Ok(Event::Ignored("an edited note".into()));
            }
            Ok(Event::Comment(CommentEvent {
                repo: repo(&f)?,
                number: f.number("/merge_request/iid")?,
                comment_id: f.number("/object_attributes/id")?,
                author: f.text("/user/username")?,
                author_id: number(&value, "/user/id"),
                body: f.text("/object_attributes/note")?,
                author_is_bot: value.pointer("/user/bot").and_then(Value::as_bool).unwrap_or(false),
                created_at: text(&value, "/object_attributes/created_at").as_deref().and_then(timestamp_ms),
            }))
        }
        event::PUSH_HOOK => {
            let reference = f.text("/ref")?;
            let Some(branch) = reference.strip_prefix("refs/heads/") else {
                return Ok(Event::Ignored(format!("push to {reference}")));
            };
            let after = f.text("/after")?;
            if after.chars().all(|c| c == '0') {
                return Ok(Event::Ignored("branch deleted".into()));
            }
            Ok(Event::Push(PushEvent { repo: repo(&f)?, branch: branch.to_string(), after }))
        }
        other => Ok(Event::Ignored(format!("event {other}"))),
    }
}

/// A forge timestamp in ms since the epoch: RFC 3339 (GitHub, newer GitLab) or GitLab's
/// `2015-05-17 18:21:36 UTC`.
pub fn timestamp_ms(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp_millis()).or_else(|| {
        chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S UTC")
            .ok()
            .map(|t| t.and_utc().timestamp_millis())
    })
}

/// A command in a comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Command {
    Plan,
    Approve,
    Help,
    Unknown,
}

/// The first command of a comment: a line of a top-level paragraph, as markdown renders it, that
/// starts with `/fluxplan`. Code (fenced, indented, inline), quotes, lists, tables, HTML and HTML
/// comments never hold a command, so an example, a quote or text the bot echoes from a pull
/// request is never obeyed. Parsing is CommonMark's, so what counts is what readers see.
pub fn parse_command(body: &str) -> Option<Command> {
    use pulldown_cmark::{Event, Parser, Tag, TagEnd};
    let mut depth = 0usize;
    let mut in_top_paragraph = false;
    let mut line = String::new();
    let mut lines = Vec::new();
    for event in Parser::new(body) {
        match event {
            Event::Start(Tag::Paragraph) if depth == 0 => in_top_paragraph = true,
            Event::Start(_) => depth += 1,
            Event::End(TagEnd::Paragraph) if in_top_paragraph && depth == 0 => {
                in_top_paragraph = false;
                lines.push(std::mem::take(&mut line));
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Text(text) if in_top_paragraph && depth == 0 => line.push_str(&text),
            Event::SoftBreak | Event::HardBreak if in_top_paragraph => lines.push(std::mem::take(&mut line)),
            // Inline code, HTML and the like break a line's claim to be a command.
            _ if in_top_paragraph => line.push('\u{0}'),
            _ => {}
        }
    }
    lines.iter().find_map(|line| {
        let mut words = line.split([' ', '\t']);
        if words.next() != Some("/fluxplan") {
            return None;
        }
        Some(match words.find(|w| !w.is_empty()) {
            Some("plan") => Command::Plan,
            Some("approve") => Command::Approve,
            Some("help") | None => Command::Help,
            Some(_) => Command::Unknown,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_listed_is_read_and_any_other_ignored() {
        let ignored = |result: Result<Event, ParseError>, name: &str| matches!(result, Ok(Event::Ignored(why)) if why == format!("event {name}"));
        for name in GITHUB_EVENTS {
            assert!(!ignored(parse_github(name, b"{}"), name), "{name}");
        }
        for name in GITLAB_EVENTS {
            assert!(!ignored(parse_gitlab(name, b"{}"), name), "{name}");
        }
        assert!(ignored(parse_github("check_run", b"{}"), "check_run"));
        assert!(ignored(parse_gitlab("Pipeline Hook", b"{}"), "Pipeline Hook"));
    }

    fn fixture(path: &str) -> Vec<u8> {
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(path))
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn github_signatures_rotate_and_reject_forgeries() {
        let body = br#"{"zen":"hi"}"#;
        let signature = github_signature("new-secret", body);
        let secrets = vec!["old-secret".to_string(), "new-secret".to_string()];
        assert!(verify_github_signature(&secrets, body, Some(&signature)));
        assert!(!verify_github_signature(&secrets, b"{\"zen\":\"ho\"}", Some(&signature)));
        assert!(!verify_github_signature(&secrets, body, Some("sha256=00")));
        assert!(!verify_github_signature(&secrets, body, None));
        assert!(!verify_github_signature(&[String::new()], body, Some(&github_signature("", body))));
    }

    #[test]
    fn gitlab_tokens_compare_exactly() {
        let tokens = vec!["t1".to_string(), "t2".to_string()];
        assert!(verify_gitlab_token(&tokens, Some("t2")));
        assert!(!verify_gitlab_token(&tokens, Some("t3")));
        assert!(!verify_gitlab_token(&tokens, Some("t")));
        assert!(!verify_gitlab_token(&tokens, None));
    }

    #[test]
    fn parses_real_github_pull_request_bodies() {
        for (file, closed) in [
            ("github-webhooks/pull_request-opened.json", false),
            ("github-webhooks/pull_request-synchronize.json", false),
            ("github-webhooks/pull_request-reopened.json", false),
            ("github-webhooks/pull_request-closed.json", true),
        ] {
            let Event::Pull(pull) = parse_github("pull_request", &fixture(file)).unwrap() else {
                panic!("{file}")
            };
            assert_eq!(pull.repo.full_name, "Codertocat/Hello-World", "{file}");
            assert_eq!(pull.repo.clone_url, "https://github.com/Codertocat/Hello-World.git");
            assert_eq!(pull.repo.web_url.as_deref(), Some("https://github.com/Codertocat/Hello-World"));
            assert_eq!(pull.head_sha.len(), 40);
            assert_eq!(pull.closed, closed, "{file}");
            assert!(!pull.from_fork);
            // Who opened it, for fair queues (the login, without case).
            assert_eq!(pull.author.as_deref(), Some("codertocat"), "{file}");
        }
    }

    #[test]
    fn github_comments_on_issues_pushes_to_tags_and_pings_are_ignored() {
        assert!(matches!(
            parse_github("issue_comment", &fixture("github-webhooks/issue_comment-created.json")),
            Ok(Event::Ignored(_))
        ));
        assert!(matches!(parse_github("push", &fixture("github-webhooks/push.json")), Ok(Event::Ignored(_))));
        assert!(matches!(parse_github("ping", &fixture("github-webhooks/ping.json")), Ok(Event::Ignored(_))));
        assert!(matches!(parse_github("check_run", b"{}"), Ok(Event::Ignored(_))));
        assert!(parse_github("pull_request", b"not json").is_err());
        assert!(parse_github("pull_request", br#"{"action":"opened"}"#).is_err());
    }

    #[test]
    fn parses_github_pull_request_comments() {
        let mut body: Value =
            serde_json::from_slice(&fixture("github-webhooks/issue_comment-created.json")).unwrap();
        body["issue"]["pull_request"] =
            serde_json::json!({"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1"});
        body["comment"]["body"] = "/fluxplan approve".into();
        let Event::Comment(comment) = parse_github("issue_comment", body.to_string().as_bytes()).unwrap()
        else {
            panic!()
        };
        assert_eq!((comment.number, comment.author.as_str()), (1, "Codertocat"));
        assert_eq!(parse_command(&comment.body), Some(Command::Approve));
        assert!(!comment.author_is_bot);
    }

    #[test]
    fn parses_real_gitlab_bodies() {
        let Event::Pull(pull) =
            parse_gitlab("Merge Request Hook", &fixture("gitlab-webhooks/merge_request.json")).unwrap()
        else {
            panic!()
        };
        assert_eq!(pull.repo.full_name, "gitlabhq/gitlab-test");
        assert_eq!(pull.repo.project_id, Some(1));
        assert_eq!(pull.repo.clone_url, "http://example.com/gitlabhq/gitlab-test.git");
        assert_eq!(pull.repo.web_url.as_deref(), Some("http://example.com/gitlabhq/gitlab-test"));
        assert_eq!(
            (pull.number, pull.head_sha.as_str(), pull.base_ref.as_str()),
            (1, "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", "master")
        );
        // GitLab's hook names the author by id only (its `user` is who triggered the event).
        assert_eq!(pull.author.as_deref(), Some("id:51"));
        let Event::Comment(note) =
            parse_gitlab("Note Hook", &fixture("gitlab-webhooks/note_merge_request.json")).unwrap()
        else {
            panic!()
        };
        assert_eq!((note.number, note.author.as_str(), note.author_id), (1, "root", Some(1)));
        assert_eq!(note.created_at, Some(1_431_886_896_000), "2015-05-17 18:21:36 UTC");
        assert_eq!(parse_command(&note.body), None);
        let Event::Push(push) = parse_gitlab("Push Hook", &fixture("gitlab-webhooks/push.json")).unwrap()
        else {
            panic!()
        };
        assert_eq!((push.branch.as_str(), push.repo.full_name.as_str()), ("master", "mike/diaspora"));
        assert!(matches!(parse_gitlab("Pipeline Hook", b"{}"), Ok(Event::Ignored(_))));
    }

    #[test]
    fn commands() {
        assert_eq!(parse_command("LGTM\n/fluxplan plan\n"), Some(Command::Plan));
        assert_eq!(parse_command("/fluxplan"), Some(Command::Help));
        assert_eq!(parse_command("  /fluxplan approve"), Some(Command::Approve));
        assert_eq!(parse_command("/fluxplan frobnicate"), Some(Command::Unknown));
        assert_eq!(parse_command("/fluxplanner plan"), None);
        assert_eq!(parse_command("no command"), None);
    }

    #[test]
    fn commands_in_code_and_quotes_are_not_commands() {
        assert_eq!(parse_command("```\n/fluxplan approve\n```"), None);
        assert_eq!(parse_command("~~~~yaml\npath: x\n/fluxplan approve\n~~~\n/still code\n"), None);
        assert_eq!(parse_command("    /fluxplan approve"), None);
        assert_eq!(parse_command("\t/fluxplan approve"), None);
        assert_eq!(parse_command("> /fluxplan approve"), None);
        assert_eq!(parse_command("see `/fluxplan approve`"), None);
        assert_eq!(parse_command("```\ncode\n```\n/fluxplan plan"), Some(Command::Plan));
        // What a reader sees as code, quote, list, comment or HTML is never a command.
        for hidden in [
            "```\n```yaml\n/fluxplan approve\n```",
            "x\r```\n/fluxplan approve\n```",
            " \t/fluxplan approve",
            "- item\n  ```\n  /fluxplan approve\n  ```",
            "> quoted\n/fluxplan approve",
            "<!--\n/fluxplan approve\n-->",
            "<pre>\n/fluxplan approve\n</pre>",
            "- /fluxplan approve",
            "| a |\n|---|\n| /fluxplan approve |",
            "`/fluxplan` approve",
        ] {
            assert_eq!(parse_command(hidden), None, "{hidden:?}");
        }
        assert_eq!(parse_command("LGTM.\n\n/fluxplan approve\n"), Some(Command::Approve));
    }

    #[test]
    fn edited_notes_are_not_commands() {
        let mut body: Value =
            serde_json::from_slice(&fixture("gitlab-webhooks/note_merge_request.json")).unwrap();
        body["object_attributes"]["note"] = "/fluxplan approve".into();
        body["object_attributes"]["action"] = "update".into();
        assert!(matches!(parse_gitlab("Note Hook", body.to_string().as_bytes()), Ok(Event::Ignored(_))));
        body["object_attributes"]["action"] = "create".into();
        assert!(matches!(parse_gitlab("Note Hook", body.to_string().as_bytes()), Ok(Event::Comment(_))));
        // Versions that sent edits without an action: updated after it was created.
        body["object_attributes"].as_object_mut().unwrap().remove("action");
        body["object_attributes"]["updated_at"] = "2015-05-18 09:00:00 UTC".into();
        assert!(matches!(parse_gitlab("Note Hook", body.to_string().as_bytes()), Ok(Event::Ignored(_))));
    }

    #[test]
    fn a_merged_pull_request_names_its_merge_commit() {
        let mut body: Value =
            serde_json::from_slice(&fixture("github-webhooks/pull_request-closed.json")).unwrap();
        let Event::Pull(closed) = parse_github("pull_request", body.to_string().as_bytes()).unwrap() else {
            panic!()
        };
        assert!(closed.closed && !closed.merged && closed.merge_sha.is_none(), "closed without merging");
        body["pull_request"]["merged"] = true.into();
        let Event::Pull(merged) = parse_github("pull_request", body.to_string().as_bytes()).unwrap() else {
            panic!()
        };
        assert!(merged.merged);
        assert_eq!(merged.merge_sha.as_deref(), Some("c4295bd74fb0f4fda03689c3df3f2803b658fd85"));
        // A merge commit that is not a commit id is not used as one.
        body["pull_request"]["merge_commit_sha"] = "main; rm -rf /".into();
        let Event::Pull(hostile) = parse_github("pull_request", body.to_string().as_bytes()).unwrap() else {
            panic!()
        };
        assert_eq!(hostile.merge_sha, None);

        let mut hook: Value = serde_json::from_slice(&fixture("gitlab-webhooks/merge_request.json")).unwrap();
        hook["object_attributes"]["action"] = "merge".into();
        let Event::Pull(gitlab) = parse_gitlab("Merge Request Hook", hook.to_string().as_bytes()).unwrap()
        else {
            panic!()
        };
        assert!(gitlab.closed && gitlab.merged);
        assert_eq!(
            gitlab.merge_sha.as_deref(),
            Some("da1560886d4f094c3e6c9ef40349f7d38b5d27d7"),
            "fast-forward"
        );
        hook["object_attributes"]["merge_commit_sha"] = "0123456789abcdef0123456789abcdef01234567".into();
        let Event::Pull(gitlab) = parse_gitlab("Merge Request Hook", hook.to_string().as_bytes()).unwrap()
        else {
            panic!()
        };
        assert_eq!(gitlab.merge_sha.as_deref(), Some("0123456789abcdef0123456789abcdef01234567"));
    }

    #[test]
    fn merge_group_checks_are_parsed_and_other_actions_ignored() {
        let mut body: Value = serde_json::from_slice(&fixture("github-webhooks/push.json")).unwrap();
        body["action"] = "checks_requested".into();
        body["merge_group"] = serde_json::json!({
            "head_sha": "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
            "head_ref": "refs/heads/gh-readonly-queue/main/pr-12-f95f852bd8fca8fcc58a9a2d6c842781e32a215e",
            "base_sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e",
            "base_ref": "refs/heads/main",
        });
        let Event::MergeGroup(group) = parse_github("merge_group", body.to_string().as_bytes()).unwrap()
        else {
            panic!()
        };
        assert_eq!(group.head_sha, "ec26c3e57ca3a959ca5aad62de7213c562f8c821");
        assert_eq!(group.base_ref, "main");
        body["action"] = "destroyed".into();
        assert!(matches!(parse_github("merge_group", body.to_string().as_bytes()), Ok(Event::Ignored(_))));
        body["action"] = "checks_requested".into();
        body["merge_group"]["head_sha"] = "not-a-sha".into();
        assert!(parse_github("merge_group", body.to_string().as_bytes()).is_err());
    }
}
