//! The durable work: what each webhook asks for (jobs), and the workers that claim jobs from the
//! database, plan, and answer on the forge. A job survives crashes (its lease expires and another
//! worker takes it), is superseded by a newer push, and is retried with backoff on failures.

mod closed_runs;
mod fairness;
mod fence;
mod followup;
pub mod gave_up;
pub mod instance;
mod merged;
pub mod mirror;
mod mirror_heal;
pub mod recovery;
pub mod resync;
pub mod retention;
mod retry_later;
mod stale;
mod worker;

pub use fairness::SlowLane;
pub use followup::{watched_contexts, FollowupConfig, DEFAULT_READS_PER_CLUSTER};
pub use worker::{Forges, Worker, WorkerConfig};

use crate::forge::roles::{CommandRoles, Role};
use crate::forge::webhook::{Command, Event};
use crate::forge::{ForgeKind, RepoInfo};
use crate::store::NewJob;
use serde::{Deserialize, Serialize};

/// How the posted comment's link to its run page opens (the run page leaves that line out).
pub const RUN_PAGE_LINK: &str = "[Full plan and run history]";

/// What a job does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum JobPayload {
    /// Plan one head of a pull request and answer with a comment and a status.
    Plan {
        repo: RepoInfo,
        number: u64,
        base_ref: String,
        head_sha: String,
        trigger: String,
        /// Who opened it (`author_key`), when known: workers are shared fairly across authors.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        author: Option<String>,
    },
    /// A `/fluxplan` command from a comment.
    Command(CommandRequest),
    /// A push to a base branch: the plans of its open pull requests are stale.
    Replan { repo: RepoInfo, branch: String },
    /// A closed pull request: its queued and running plans are superseded.
    Closed { repo: RepoInfo, number: u64 },
    /// A merged pull request: record the plan of what merged (re-planned when the base moved)
    /// and start watching the rollout.
    Merged { repo: RepoInfo, number: u64, base_ref: String, head_sha: String, merge_sha: String },
    /// A merge queue's group: plan it as it will land and set the status on its head.
    MergeGroup { repo: RepoInfo, base_ref: String, base_sha: String, head_sha: String, head_ref: String },
    /// Watch one Kustomization of one cluster until it reaches `revision` (or the deadline), then
    /// compare it with the merge's prediction.
    Followup(FollowupTarget),
}

/// One Kustomization of one cluster to watch after a merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FollowupTarget {
    pub repo: RepoInfo,
    pub number: u64,
    /// The merge run the result goes into.
    pub run_id: i64,
    /// The repository root of the Kustomization (as the prediction names it).
    pub root: String,
    /// The kube context that reaches it ("" for the current one, or in-cluster).
    pub context: String,
    pub namespace: String,
    pub name: String,
    /// The merge commit.
    pub revision: String,
    /// Ms since the epoch: after it, a Kustomization that has not reached the revision is a timeout.
    pub deadline_at: i64,
}

impl FollowupTarget {
    /// The key of its prediction and result in the run (`root/namespace/name`).
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.root, self.namespace, self.name)
    }
}

impl JobPayload {
    pub fn kind(&self) -> &'static str {
        match self {
            JobPayload::Plan { .. } => "plan",
            JobPayload::Command { .. } => "command",
            JobPayload::Replan { .. } => "replan",
            JobPayload::Closed { .. } => "closed",
            JobPayload::Merged { .. } => "merged",
            JobPayload::MergeGroup { .. } => "merge-group",
            JobPayload::Followup(_) => "followup",
        }
    }

    /// The queue row for this payload.
    pub fn to_job(&self) -> NewJob {
        let (repo, number, head_sha) = match self {
            JobPayload::Plan { repo, number, head_sha, .. } => (repo, *number, head_sha.clone()),
            JobPayload::Command(c) => (&c.repo, c.number, String::new()),
            JobPayload::Replan { repo, .. } => (repo, 0, String::new()),
            JobPayload::Closed { repo, number } => (repo, *number, String::new()),
            JobPayload::Merged { repo, number, merge_sha, .. } => (repo, *number, merge_sha.clone()),
            JobPayload::MergeGroup { repo, head_sha, head_ref, .. } => {
                (repo, merge_group_pull(head_ref).unwrap_or(0), head_sha.clone())
            }
            JobPayload::Followup(f) => (&f.repo, f.number, f.revision.clone()),
        };
        // Keyed jobs exist once: a redelivered merge, or a follow-up of a Kustomization and
        // revision already watched, collapses into the first. A follow-up's key names the root
        // too: two roots read through one context each expect their own result in the run.
        let dedupe_key = match self {
            JobPayload::Merged { repo, number, merge_sha, .. } => {
                Some(format!("merged/{}/{}/{number}/{merge_sha}", repo.forge.as_str(), repo.full_name))
            }
            JobPayload::Followup(f) => Some(format!("followup/{}/{}/{}", f.context, f.key(), f.revision)),
            _ => None,
        };
        let is_group = matches!(self, JobPayload::MergeGroup { .. });
        let is_plan = matches!(self, JobPayload::Plan { .. });
        let supersedes = is_plan || matches!(self, JobPayload::Closed { .. });
        NewJob {
            kind: self.kind().to_string(),
            forge: repo.forge.as_str().to_string(),
            repo: repo.full_name.clone(),
            pr_number: number as i64,
            head_sha,
            payload: serde_json::to_string(self).expect("payloads serialize"),
            supersedes_older_heads: supersedes,
            // A plan of a head already waiting in the queue is redundant, asked for or not.
            dedupe_same_head: is_plan || is_group,
            dedupe_key,
            author: match self {
                JobPayload::Plan { author, .. } => author.clone(),
                _ => None,
            },
        }
    }
}

/// The pull request a merge queue branch was made for (`gh-readonly-queue/main/pr-12-<sha>`: the
/// last one of its group).
pub fn merge_group_pull(head_ref: &str) -> Option<u64> {
    let tail = head_ref.rsplit('/').next()?.strip_prefix("pr-")?;
    tail.split('-').next()?.parse().ok()
}

/// A command from a newly created comment, and who wrote it when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandRequest {
    pub repo: RepoInfo,
    pub number: u64,
    pub comment_id: u64,
    pub author: String,
    /// GitLab users are looked up by id.
    pub author_id: Option<u64>,
    /// When the forge says the comment was created (ms since the epoch): an approval counts only
    /// for a plan posted before it.
    #[serde(default)]
    pub created_at: Option<i64>,
    pub command: Command,
}

/// Why a pull request is not planned, if it is not.
pub fn unplannable(pull: &crate::forge::PullInfo, allow_forks: bool) -> Option<&'static str> {
    if !pull.open {
        Some("it is closed: nothing to plan.")
    } else if pull.is_fork && !allow_forks {
        Some("its head lives in a fork, and forks are not planned here (an administrator can allow them).")
    } else {
        None
    }
}

/// The plan job for a pull request as the forge shows it now.
pub fn plan_payload(repo: &RepoInfo, pull: &crate::forge::PullInfo, trigger: &str) -> JobPayload {
    JobPayload::Plan {
        repo: repo.clone(),
        number: pull.number,
        base_ref: pull.base_ref.clone(),
        head_sha: pull.head_sha.clone(),
        trigger: trigger.to_string(),
        author: author_key(pull.author.as_deref(), pull.author_id),
    }
}

/// One name per author whatever told it: GitLab's user id (`id:N`) when known (webhooks give only
/// that), else the login, compared without case.
pub fn author_key(login: Option<&str>, id: Option<u64>) -> Option<String> {
    id.map(|id| format!("id:{id}")).or_else(|| login.map(str::to_lowercase))
}

/// The jobs an event asks for (none for events fluxplan ignores).
pub fn jobs_for(event: &Event, allow_forks: bool) -> Result<Vec<JobPayload>, String> {
    Ok(match event {
        Event::Pull(pull) if pull.closed => {
            let mut jobs = vec![JobPayload::Closed { repo: pull.repo.clone(), number: pull.number }];
            if let (true, Some(merge_sha)) = (pull.merged, &pull.merge_sha) {
                jobs.push(JobPayload::Merged {
                    repo: pull.repo.clone(),
                    number: pull.number,
                    base_ref: pull.base_ref.clone(),
                    head_sha: pull.head_sha.clone(),
                    merge_sha: merge_sha.clone(),
                });
            }
            jobs
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
            author: pull.author.clone(),
        }],
        Event::Comment(comment) if comment.author_is_bot => Vec::new(),
        Event::Comment(comment) => match crate::forge::webhook::parse_command(&comment.body) {
            Some(command) => vec![JobPayload::Command(CommandRequest {
                repo: comment.repo.clone(),
                number: comment.number,
                comment_id: comment.comment_id,
                author: comment.author.clone(),
                author_id: comment.author_id,
                created_at: comment.created_at,
                command,
            })],
            None => Vec::new(),
        },
        Event::Push(push) => {
            vec![JobPayload::Replan { repo: push.repo.clone(), branch: push.branch.clone() }]
        }
        Event::MergeGroup(group) => vec![JobPayload::MergeGroup {
            repo: group.repo.clone(),
            base_ref: group.base_ref.clone(),
            base_sha: group.base_sha.clone(),
            head_sha: group.head_sha.clone(),
            head_ref: group.head_ref.clone(),
        }],
        Event::Ignored(_) => Vec::new(),
    })
}

/// The answer to `/fluxplan help`, in the forge's words.
pub fn help_text(forge: ForgeKind, roles: &CommandRoles) -> String {
    let pull = forge.pull_noun();
    let needs = |role: Role| match role {
        Role::Anyone => String::new(),
        role => format!(" (needs {})", role.describe(forge)),
    };
    format!(
        "**fluxplan** commands (a line of their own in a comment on the {pull}, outside code and quotes):\n\n\
         - `/fluxplan plan`: plan again{}\n\
         - `/fluxplan approve`: accept the blocked plan shown for the current head commit{}; it holds for that \
         commit while a re-plan says the same, and a new push or a changed plan needs a new approval\n\
         - `/fluxplan help`: this message{}",
        needs(roles.plan),
        needs(roles.approve),
        needs(roles.help),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fluxplan_jobs_failed_total` pre-creates a series per kind: the kinds are exactly the
    /// payloads' serde tags, and each payload's `kind` is its tag.
    #[test]
    fn the_metrics_know_every_job_kind() {
        let unknown = serde_json::from_value::<JobPayload>(serde_json::json!({"type": "?"})).unwrap_err();
        let expected = unknown.to_string();
        let tags: Vec<&str> = expected.split('`').skip(3).step_by(2).collect();
        assert_eq!(tags, crate::server::metrics::JOB_KINDS, "{expected}");
        let repo = RepoInfo {
            forge: ForgeKind::GitLab,
            full_name: "acme/fleet".into(),
            project_id: Some(1),
            clone_url: "https://gitlab.example/acme/fleet.git".into(),
            installation_id: None,
            web_url: None,
        };
        let (text, sha) = (String::new(), "abc".to_string());
        let every = [
            JobPayload::Plan {
                repo: repo.clone(),
                number: 1,
                base_ref: text.clone(),
                head_sha: sha.clone(),
                trigger: text.clone(),
                author: Some("id:7".into()),
            },
            JobPayload::Command(CommandRequest {
                repo: repo.clone(),
                number: 1,
                comment_id: 1,
                author: text.clone(),
                author_id: None,
                created_at: None,
                command: Command::Help,
            }),
            JobPayload::Replan { repo: repo.clone(), branch: text.clone() },
            JobPayload::Closed { repo: repo.clone(), number: 1 },
            JobPayload::Merged {
                repo: repo.clone(),
                number: 1,
                base_ref: text.clone(),
                head_sha: sha.clone(),
                merge_sha: sha.clone(),
            },
            JobPayload::MergeGroup {
                repo: repo.clone(),
                base_ref: text.clone(),
                base_sha: sha.clone(),
                head_sha: sha.clone(),
                head_ref: text.clone(),
            },
            JobPayload::Followup(FollowupTarget {
                repo,
                number: 1,
                run_id: 1,
                root: text.clone(),
                context: text.clone(),
                namespace: text.clone(),
                name: text,
                revision: sha,
                deadline_at: 0,
            }),
        ];
        for payload in &every {
            let tag = serde_json::to_value(payload).unwrap()["type"].clone();
            assert_eq!(payload.kind(), tag, "{payload:?}");
        }
        assert_eq!(every.len(), tags.len());
    }

    #[test]
    fn merge_queue_branches_name_their_pull_request() {
        assert_eq!(
            merge_group_pull(
                "refs/heads/gh-readonly-queue/main/pr-12-f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
            ),
            Some(12)
        );
        assert_eq!(merge_group_pull("refs/heads/gh-readonly-queue/release/x/pr-7-abc"), Some(7));
        assert_eq!(merge_group_pull("refs/heads/main"), None);
        assert_eq!(merge_group_pull("refs/heads/gh-readonly-queue/main/pr-x-abc"), None);
    }

    #[test]
    fn follow_ups_collapse_per_root_kustomization_and_revision() {
        let target = |root: &str, revision: &str| {
            JobPayload::Followup(FollowupTarget {
                repo: RepoInfo {
                    forge: crate::forge::ForgeKind::GitHub,
                    full_name: "acme/fleet".into(),
                    project_id: None,
                    clone_url: "https://github.com/acme/fleet.git".into(),
                    installation_id: None,
                    web_url: None,
                },
                number: 7,
                run_id: 1,
                root: root.into(),
                context: "prod".into(),
                namespace: "flux-system".into(),
                name: "apps".into(),
                revision: revision.into(),
                deadline_at: 0,
            })
            .to_job()
            .dedupe_key
        };
        assert_eq!(target("clusters/a", "abc"), target("clusters/a", "abc"));
        // Two roots read through one context each get their own follow-up (and result).
        assert_ne!(target("clusters/a", "abc"), target("clusters/b", "abc"));
        assert_ne!(target("clusters/a", "abc"), target("clusters/a", "def"));
    }
}
