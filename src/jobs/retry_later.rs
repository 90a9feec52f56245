//! A job whose retries a transient failure used up (a forge outage longer than a minute, a long
//! rate limit) is not given up: its commit gets an `error` status that says it will be retried,
//! and the job waits `RetryLater::every` before its next attempt, or less when its forge answers
//! again (the resync wakes it). Only a job older than `RetryLater::max_age` is given up.

use super::fence::{ForgeWrite, Said, Scope};
use super::worker::Worker;
use super::JobPayload;
use crate::forge::{ForgeKind, StatusState};
use crate::store::{now_ms, Job};
use anyhow::Result;

impl Worker {
    /// Schedules `job` for a later attempt; false when it is not retried later (a follow-up,
    /// which has its own deadline, or a job past the maximum age): the caller gives it up.
    pub(super) async fn retry_later(&self, job: &Job, error: &str) -> Result<bool> {
        let policy = self.recovery.retry_later;
        if policy.every.is_zero() || job.kind == "followup" {
            return Ok(false);
        }
        let Some(created_at) = self.store.job_created_at(job.id).await? else { return Ok(false) };
        if now_ms() - created_at > policy.max_age.as_millis() as i64 {
            return Ok(false);
        }
        if let Some(kind) = ForgeKind::from_name(&job.forge) {
            self.recovery.forge_failed(kind);
        }
        let minutes = policy.every.as_secs().div_ceil(60).max(1);
        tracing::warn!(%error, retry_in_minutes = minutes, attempts = job.attempts, "job will be retried later");
        self.say_it_will_retry(job, error, minutes).await;
        let run_after = now_ms() + policy.every.as_millis() as i64;
        // Each later round gets its attempts anew: a process that dies in one of them is not
        // taken for one that died in every attempt.
        self.store.requeue_later(job.id, &self.id, run_after, error).await?;
        Ok(true)
    }

    /// An `error` status on the head a plan was for (if the forge takes it at all): a `pending`
    /// left alone would block the merge without a word. Written as every write of a job is
    /// (`super::fence`): a superseded job says nothing.
    async fn say_it_will_retry(&self, job: &Job, error: &str, minutes: u64) {
        let (repo, head_sha, scope) = match serde_json::from_str::<JobPayload>(&job.payload) {
            Ok(JobPayload::Plan { repo, head_sha, number, .. }) => (repo, head_sha, Scope::Pull(number)),
            Ok(JobPayload::MergeGroup { repo, head_sha, .. }) => {
                let scope = Scope::Group(head_sha.clone());
                (repo, head_sha, scope)
            }
            _ => return,
        };
        let Some((forge, _)) = self.forges.get(repo.forge) else { return };
        let description = will_retry_description(repo.forge, minutes, error);
        let status = ForgeWrite::status(&head_sha, None, StatusState::Error, &description, None);
        match self.writer(job, forge, &repo).write(&scope, &status).await {
            Ok(Said::Posted) => {}
            Ok(Said::Silenced) => tracing::info!("superseded: it does not say it will retry"),
            Err(e) => tracing::warn!(error = %e, "cannot say on the commit that its plan will be retried"),
        }
    }
}

/// What the commit status says while a plan waits to be retried (the forge cuts it at 140
/// characters: the promise comes first, the cause after).
fn will_retry_description(forge: ForgeKind, minutes: u64, error: &str) -> String {
    format!("fluxplan will retry within {minutes} min (sooner once {} answers): {error}", forge.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_says_it_will_retry_before_why() {
        let text = will_retry_description(ForgeKind::GitHub, 5, "the forge failed: HTTP 502: Bad Gateway");
        assert!(text.starts_with("fluxplan will retry within 5 min (sooner once GitHub answers)"), "{text}");
        assert!(text.chars().take(139).collect::<String>().contains("will retry"));
    }
}
