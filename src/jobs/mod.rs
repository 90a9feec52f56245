//! The durable work: what each webhook asks for (jobs), and the workers that claim jobs from the
//! database, plan, and answer on the forge. A job survives crashes (its lease expires and another
//! worker takes it), is superseded by a newer push, and is retried with backoff on failures.

pub mod mirror;
mod worker;

pub use worker::{Forges, Worker, WorkerConfig};

use crate::forge::webhook::{Command, Event};
use crate::forge::RepoInfo;
use crate::store::NewJob;
use serde::{Deserialize, Serialize};

/// What a job does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum JobPayload {
    /// Plan one head of a pull request and answer with a comment and a status.
    Plan { repo: RepoInfo, number: u64, base_ref: String, head_sha: String, trigger: String },
    /// A `/fluxplan` command from a comment.
    Command {
        repo: RepoInfo,
        number: u64,
        comment_id: u64,
        author: String,
        author_id: Option<u64>,
        command: Command,
    },
    /// A push to a base branch: the plans of its open pull requests are stale.
    Replan { repo: RepoInfo, branch: String },
    /// A closed pull request: its queued and running plans are superseded.
    Closed { repo: RepoInfo, number: u64 },
}

impl JobPayload {
    pub fn kind(&self) -> &'static str {
        match self {
            JobPayload::Plan { .. } => "plan",
            JobPayload::Command { .. } => "command",
            JobPayload::Replan { .. } => "replan",
            JobPayload::Closed { .. } => "closed",
        }
    }

    /// The queue row for this payload.
    pub fn to_job(&self) -> NewJob {
        let (repo, number, head_sha) = match self {
            JobPayload::Plan { repo, number, head_sha, .. } => (repo, *number, head_sha.clone()),
            JobPayload::Command { repo, number, .. } => (repo, *number, String::new()),
            JobPayload::Replan { repo, .. } => (repo, 0, String::new()),
            JobPayload::Closed { repo, number } => (repo, *number, String::new()),
        };
        let is_plan = matches!(self, JobPayload::Plan { .. });
        let supersedes = is_plan || matches!(self, JobPayload::Closed { .. });
        let forced = matches!(self, JobPayload::Plan { trigger, .. } if trigger == "command");
        NewJob {
            kind: self.kind().to_string(),
            forge: repo.forge.as_str().to_string(),
            repo: repo.full_name.clone(),
            pr_number: number as i64,
            head_sha,
            payload: serde_json::to_string(self).expect("payloads serialize"),
            supersedes_older_heads: supersedes,
            dedupe_same_head: is_plan && !forced,
        }
    }
}

/// The jobs an event asks for (none for events fluxplan ignores).
pub fn jobs_for(event: &Event, allow_forks: bool) -> Result<Vec<JobPayload>, String> {
    Ok(match event {
        Event::Pull(pull) if pull.closed => {
            vec![JobPayload::Closed { repo: pull.repo.clone(), number: pull.number }]
        }
        Event::Pull(pull) if pull.from_fork && !allow_forks => {
            return Err("pull requests from forks are not planned (FLUXPLAN_ALLOW_FORKS is off)".into())
        }
        Event::Pull(pull) => vec![JobPayload::Plan {
            repo: pull.repo.clone(),
            number: pull.number,
            base_ref: pull.base_ref.clone(),
            head_sha: pull.head_sha.clone(),
            trigger: "pull-request".into(),
        }],
        Event::Comment(comment) if comment.author_is_bot => Vec::new(),
        Event::Comment(comment) => match crate::forge::webhook::parse_command(&comment.body) {
            Some(command) => vec![JobPayload::Command {
                repo: comment.repo.clone(),
                number: comment.number,
                comment_id: comment.comment_id,
                author: comment.author.clone(),
                author_id: comment.author_id,
                command,
            }],
            None => Vec::new(),
        },
        Event::Push(push) => {
            vec![JobPayload::Replan { repo: push.repo.clone(), branch: push.branch.clone() }]
        }
        Event::Ignored(_) => Vec::new(),
    })
}

/// The answer to `/fluxplan help`.
pub const HELP: &str = "**fluxplan** commands (in a comment on the pull request):\n\n\
- `/fluxplan plan`: plan again\n\
- `/fluxplan approve`: accept a blocked plan for the current head commit (needs write, maintain or admin \
  permission; a new push needs a new approval)\n\
- `/fluxplan help`: this message";
