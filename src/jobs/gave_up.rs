//! Jobs given up because their process died during every attempt (a crash, an abort, the
//! kernel killing it for memory): a pull request whose plan kills the bot gets a `failure`
//! status that says so, and its run is recorded, instead of `pending` for good. The resync
//! leaves that head alone (`Store::gave_up_on`); a new push gets its own attempts.

use super::fence::{ForgeWrite, Said, Scope, Writer};
use super::{Forges, JobPayload};
use crate::forge::StatusState;
use crate::server::metrics::Metrics;
use crate::store::{Job, RunOutcome, Store, WORKER_DIED};

/// Says on each plan's commit why it will not be planned, and records its run.
pub async fn report(store: &Store, forges: &Forges, metrics: &Metrics, jobs: &[Job]) {
    for job in jobs {
        let reason = format!("{WORKER_DIED} ({} attempts)", job.attempts);
        tracing::error!(job = job.id, kind = %job.kind, repo = %job.repo, pr = job.pr_number, sha = %job.head_sha, "{reason}: given up");
        metrics.job_failed(&job.kind);
        let Ok(payload) = serde_json::from_str::<JobPayload>(&job.payload) else { continue };
        let (repo, number, base_ref, head_sha, scope) = match payload {
            JobPayload::Plan { repo, number, base_ref, head_sha, .. } => {
                (repo, number, base_ref, head_sha, Scope::Pull(number))
            }
            JobPayload::MergeGroup { repo, base_ref, head_sha, .. } => {
                let scope = Scope::Group(head_sha.clone());
                (repo, 0, base_ref, head_sha, scope)
            }
            _ => continue,
        };
        if let Err(e) = record_run(store, job, number, &base_ref, repo.web_url.as_deref(), &reason).await {
            tracing::warn!(job = job.id, error = %format!("{e:#}"), "cannot record the run of a job given up");
        }
        let Some((forge, _)) = forges.get(repo.forge) else { continue };
        let description = format!("could not be planned: {reason}");
        let failure = ForgeWrite::status(&head_sha, None, StatusState::Failure, &description, None);
        // No one holds a job given up; a newer plan of the pull request speaks for it instead.
        let writer = Writer {
            store,
            forge,
            metrics,
            repo: &repo,
            job_id: job.id,
            holder: None,
            comment_limit: usize::MAX,
        };
        match writer.write(&scope, &failure).await {
            Ok(Said::Posted) => {}
            Ok(Said::Silenced) => {
                tracing::info!(job = job.id, "a newer plan speaks for it: not posted");
                // Its check run, if it opened one, is completed all the same.
                if let Err(e) = forge.cancel_check_runs(&repo, &head_sha, job.id).await {
                    tracing::warn!(job = job.id, error = %e, "cannot complete the check run of a job given up");
                }
            }
            Err(e) => {
                tracing::warn!(job = job.id, error = %e, "cannot say on the commit that its plan was given up")
            }
        }
    }
}

/// The run the last attempt started is marked failed; one is recorded if it died before that.
async fn record_run(
    store: &Store,
    job: &Job,
    number: u64,
    base_ref: &str,
    web_url: Option<&str>,
    reason: &str,
) -> anyhow::Result<()> {
    if store.fail_stopped_runs(job.id, reason).await? > 0 {
        return Ok(());
    }
    let (run, _) = store
        .start_run(
            Some(job.id),
            &job.forge,
            &job.repo,
            number as i64,
            base_ref,
            &job.head_sha,
            "given-up",
            web_url,
        )
        .await?;
    let outcome =
        RunOutcome { status: "failed".into(), error: Some(reason.to_string()), ..Default::default() };
    store.finish_run(run, &outcome).await
}
