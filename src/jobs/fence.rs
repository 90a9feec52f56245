//! Forge writes bound to the job that makes them: a pull request's commit status and sticky
//! comment (a merge queue group's status) show what its newest job says, never an older one.
//!
//! Checking "am I still the newest?" before a call is not enough: the call itself can wait
//! (a rate limit, a slow forge) while a newer push is planned and posted, and then land last.
//! So every write is recorded in the database, numbered per channel, before it is posted, and
//! only while its job is still the newest there (`Store::record_write`): a superseded job writes
//! nothing. After posting, the writer reads the channel's latest number; when a newer write was
//! recorded meanwhile, its own may have landed after it, so it posts that newest write again.
//! Whatever the interleaving, the last write to land is followed by a check that finds it is the
//! newest, or repeats the newest after it.

use super::worker::{JobError, Worker};
use crate::forge::checks::CheckOutput;
use crate::forge::{ForgeClient, ForgeError, RepoInfo, StatusState};
use crate::report;
use crate::server::metrics::Metrics;
use crate::store::{Channel, Job, Rivals, Store};
use serde::{Deserialize, Serialize};

/// How many newer writes one writer repeats after its own before it leaves the rest to their
/// writers (each checks after its own post too).
const MAX_REPEATS: usize = 5;

/// What a job writes on the forge, as recorded (a writer that raced it may post it again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "write", rename_all = "kebab-case")]
pub(super) enum ForgeWrite {
    /// The `fluxplan` commit status of `sha` (on GitLab, of the branch `git_ref`).
    Status {
        sha: String,
        git_ref: Option<String>,
        state: StatusState,
        description: String,
        target_url: Option<String>,
        /// On GitHub, the plan and annotations of the `fluxplan` check run that says the same.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        check: Option<CheckOutput>,
        /// The job that wrote it (the check run's `external_id`), set when it is recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job: Option<i64>,
    },
    /// The sticky plan comment of pull request `number`.
    Comment { number: u64, markdown: String },
}

impl ForgeWrite {
    pub(super) fn status(
        sha: &str,
        git_ref: Option<&str>,
        state: StatusState,
        description: &str,
        target_url: Option<&str>,
    ) -> Self {
        ForgeWrite::Status {
            sha: sha.to_string(),
            git_ref: git_ref.map(str::to_string),
            state,
            description: description.to_string(),
            target_url: target_url.map(str::to_string),
            check: None,
            job: None,
        }
    }

    /// The same status, with the plan and annotations its check run shows.
    pub(super) fn with_check(mut self, output: CheckOutput) -> Self {
        if let ForgeWrite::Status { check, .. } = &mut self {
            *check = Some(output);
        }
        self
    }

    /// The same write, as job `id` makes it.
    fn by_job(mut self, id: i64) -> Self {
        if let ForgeWrite::Status { job, .. } = &mut self {
            *job = Some(id);
        }
        self
    }

    fn channel_kind(&self) -> &'static str {
        match self {
            ForgeWrite::Status { .. } => "status",
            ForgeWrite::Comment { .. } => "comment",
        }
    }
}

/// Whose voice a write is: a pull request's, or a merge queue group's (by its head commit).
pub(super) enum Scope {
    Pull(u64),
    Group(String),
}

/// What became of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Said {
    Posted,
    /// A newer job speaks for the pull request (or this one lost its job): nothing was written.
    Silenced,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum FenceError {
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Store(#[from] anyhow::Error),
}

impl From<FenceError> for JobError {
    fn from(error: FenceError) -> Self {
        match error {
            FenceError::Forge(e) => e.into(),
            FenceError::Store(e) => e.into(),
        }
    }
}

/// One job's writes on one repository.
pub(super) struct Writer<'a> {
    pub store: &'a Store,
    pub forge: &'a ForgeClient,
    pub metrics: &'a Metrics,
    pub repo: &'a RepoInfo,
    pub job_id: i64,
    /// The worker that holds the job; none for a job given up (no one holds it any more).
    pub holder: Option<&'a str>,
    /// Maximum characters of one comment.
    pub comment_limit: usize,
}

impl Writer<'_> {
    /// Posts `write` if the job is still the newest of `scope`, then makes sure a newer write
    /// recorded meanwhile is the one the forge shows last.
    pub(super) async fn write(&self, scope: &Scope, write: &ForgeWrite) -> Result<Said, FenceError> {
        let channel = self.channel(scope, write);
        let write = &write.clone().by_job(self.job_id);
        let body = serde_json::to_string(write).map_err(anyhow::Error::from)?;
        let Some(mut posted) = self.store.record_write(self.job_id, self.holder, &channel, &body).await?
        else {
            tracing::info!(channel = %channel.name, "a newer job speaks for this pull request: not writing");
            return Ok(Said::Silenced);
        };
        self.post(write).await?;
        for _ in 0..MAX_REPEATS {
            let Some((latest, body)) = self.store.latest_write(&channel).await? else { break };
            if latest == posted {
                break;
            }
            // Ours may have landed after it: the newest goes last.
            tracing::info!(channel = %channel.name, ours = posted, latest, "a newer write was made meanwhile: repeating it");
            let newest: ForgeWrite = serde_json::from_str(&body).map_err(anyhow::Error::from)?;
            self.post(&newest).await?;
            posted = latest;
        }
        Ok(Said::Posted)
    }

    fn channel(&self, scope: &Scope, write: &ForgeWrite) -> Channel {
        let (name, rivals) = match scope {
            Scope::Pull(number) => (format!("pull/{number}"), Rivals::Plans { pr_number: *number as i64 }),
            Scope::Group(sha) => (format!("group/{sha}"), Rivals::Groups { head_sha: sha.clone() }),
        };
        Channel {
            forge: self.repo.forge.as_str().to_string(),
            repo: self.repo.full_name.clone(),
            name: format!("{name}/{}", write.channel_kind()),
            rivals,
        }
    }

    async fn post(&self, write: &ForgeWrite) -> Result<(), ForgeError> {
        let result = match write {
            ForgeWrite::Status { sha, git_ref, state, description, target_url, check, job } => {
                let (git_ref, url) = (git_ref.as_deref(), target_url.as_deref());
                let forge = self.forge;
                forge
                    .set_verdict(self.repo, sha, git_ref, *state, description, url, check.as_ref(), *job)
                    .await
            }
            ForgeWrite::Comment { number, markdown } => self.post_comment(*number, markdown).await,
        };
        if let Err(e) = &result {
            // A status a forge refuses on a fork's commit is an answer, not an API failure.
            if !matches!((write, e), (ForgeWrite::Status { .. }, ForgeError::NotFound(_))) {
                self.metrics.forge_error(self.repo.forge, e);
            }
        }
        result
    }

    /// One sticky comment (several when the plan is over the size limit): existing parts are
    /// updated in place, missing ones created, surplus ones from a longer earlier plan deleted.
    async fn post_comment(&self, number: u64, markdown: &str) -> Result<(), ForgeError> {
        let (forge, repo) = (self.forge, self.repo);
        let parts = report::split::split(markdown, self.comment_limit);
        let existing = forge.marked_comments(repo, number, report::split::MARKER).await?;
        for (index, part) in parts.iter().enumerate() {
            match existing.get(index) {
                Some(comment) if comment.body == *part => {}
                Some(comment) => forge.update_comment(repo, number, comment.id, part).await?,
                None => drop(forge.create_comment(repo, number, part).await?),
            }
        }
        for comment in existing.iter().skip(parts.len()) {
            forge.delete_comment(repo, number, comment.id).await?;
        }
        Ok(())
    }
}

impl Worker {
    /// The writer of `job`, held by this worker.
    pub(super) fn writer<'a>(&'a self, job: &Job, forge: &'a ForgeClient, repo: &'a RepoInfo) -> Writer<'a> {
        Writer {
            store: &self.store,
            forge,
            metrics: &self.metrics,
            repo,
            job_id: job.id,
            holder: Some(&self.id),
            comment_limit: self.config.comment_limit,
        }
    }
}
