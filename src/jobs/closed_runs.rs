//! Every run ends with what became of it: `done`, `failed`, `superseded` (a newer job speaks for
//! the pull request), `cancelled` (the service shut down mid-plan) or `abandoned` (its worker
//! stopped and the job was taken over; see `Store::reclaim_expired`). A plan stopped before its
//! end is counted as cancelled, not as a failed plan.

use super::worker::{JobError, Worker};
use crate::cancel::{CancelReason, CancelToken};
use crate::forge::ForgeKind;
use crate::plan::Plan;
use crate::store::{Job, RunOutcome};
use std::collections::BTreeMap;
use std::time::Duration;

/// The outcome of a run whose job ended with `error`.
pub(super) fn outcome_of_error(error: &JobError) -> RunOutcome {
    let (status, why) = match error {
        JobError::Stopped(why) => ("cancelled", why.clone()),
        JobError::Retry(why, _) | JobError::Fatal(why) => ("failed", why.clone()),
        JobError::Wait(_, why) => ("failed", why.clone().unwrap_or_else(|| "not ready".into())),
    };
    RunOutcome { status: status.into(), error: Some(why), ..Default::default() }
}

/// Why a plan was stopped before its end, as `fluxplan_plans_cancelled_total` says it; `None`
/// when it ran to its end or ran out of its own time (that is the plan's failure).
fn cancel_label(cancel: &CancelToken) -> Option<&'static str> {
    match cancel.reason()? {
        CancelReason::Superseded => Some("superseded"),
        CancelReason::ShuttingDown => Some("shutdown"),
        CancelReason::Abandoned => Some("abandoned"),
        CancelReason::TimedOut(_) => None,
    }
}

impl Worker {
    /// Counts a finished plan: its duration by verdict, or a cancellation.
    pub(super) fn count_plan(&self, forge: ForgeKind, plan: &Plan, cancel: &CancelToken, took: Duration) {
        match cancel_label(cancel) {
            Some(reason) => self.metrics.plan_cancelled(forge, reason),
            None => self.metrics.planned(forge, plan.verdict, took.as_secs_f64()),
        }
    }

    /// Closes the run of a plan this worker no longer holds the job of: `superseded` when a newer
    /// push took its place, `abandoned` when the job was taken over (this worker's lease ran out,
    /// as on a loaded machine): another attempt plans it again, or the reclaim gave it up.
    pub(super) async fn finish_lost(
        &self,
        job: &Job,
        run_id: i64,
        plan: &Plan,
        timings: &BTreeMap<&str, u64>,
    ) -> Result<(), JobError> {
        let status = match self.store.job_status(job.id).await?.as_deref() {
            Some("superseded") => "superseded",
            // Given up by the reclaim, which closes the run itself, as `failed`, with why.
            Some("failed") => return Ok(()),
            _ => "abandoned",
        };
        let outcome = RunOutcome { status: status.into(), ..super::worker::outcome_of(plan, timings) };
        Ok(self.store.finish_run(run_id, &outcome).await?)
    }

    /// Closes the run of a job that lost its voice before planning: a newer job speaks for the
    /// pull request.
    pub(super) async fn finish_silenced(&self, run_id: i64) -> Result<(), JobError> {
        let outcome = RunOutcome {
            status: "superseded".into(),
            error: Some("a newer plan of this pull request took its place".into()),
            ..Default::default()
        };
        Ok(self.store.finish_run(run_id, &outcome).await?)
    }
}
