//! No pull request holds every worker. The queue is claimed round-robin across pull requests
//! (`store::fair`); a pull request whose plans keep running out of time gets a strike per plan
//! that does, its plans then wait behind everyone else's, and a replica runs them on all but
//! one of its workers (the slow lane), so a one-object pull request is never stuck behind them.

use crate::cancel::{CancelReason, CancelToken};
use crate::forge::RepoInfo;
use crate::plan::Plan;
use crate::store::{Job, Store};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The workers of one replica that may run plans of slow pull requests at once.
#[derive(Clone)]
pub struct SlowLane(Arc<Semaphore>);

impl SlowLane {
    /// All but one of `workers` (a single worker runs everything).
    pub fn for_workers(workers: usize) -> SlowLane {
        SlowLane(Arc::new(Semaphore::new(workers.saturating_sub(1).max(1))))
    }

    /// A place in the lane, if one is free: a worker holding it may claim slow plans.
    pub(super) fn try_enter(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }
}

/// Keeps the lane's place only for a job of a slow pull request: other jobs give it back.
pub(super) async fn keep_place_for(
    store: &Store,
    job: &Job,
    place: Option<OwnedSemaphorePermit>,
) -> Option<OwnedSemaphorePermit> {
    let place = place?;
    if job.kind != "plan" {
        return None;
    }
    match store.slow_strikes(&job.forge, &job.repo, job.pr_number).await {
        Ok(0) => None,
        Ok(_) => Some(place),
        // Unknown: keep it, so the lane never runs over.
        Err(_) => Some(place),
    }
}

/// True when the plan stopped for time: the whole plan's limit (`--plan-timeout`) or one
/// build's (`--kustomize-timeout`, Helm's), each a `source-limit` alert.
pub(super) fn ran_out_of_time(plan: &Plan, cancel: &CancelToken) -> bool {
    matches!(cancel.reason(), Some(CancelReason::TimedOut(_)))
        || plan.alerts.iter().any(|alert| alert.code == "source-limit" && alert.message.contains("timed out"))
}

/// Records how a plan of the pull request ended, for the order of its next plans. A plan stopped
/// for another reason (superseded, shutting down) says nothing about its pull request's pace.
pub(super) async fn record_plan_time(
    store: &Store,
    repo: &RepoInfo,
    number: u64,
    plan: &Plan,
    cancel: &CancelToken,
) {
    let out_of_time = ran_out_of_time(plan, cancel);
    if !out_of_time && cancel.reason().is_some() {
        return;
    }
    let recorded =
        store.record_plan_time(repo.forge.as_str(), &repo.full_name, number as i64, out_of_time).await;
    match recorded {
        Ok(()) if out_of_time => {
            tracing::warn!("the plan ran out of time: this pull request's next plans wait behind others")
        }
        Ok(()) => {}
        Err(e) => tracing::warn!(error = %format!("{e:#}"), "cannot record the plan's pace"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Policy, Revision};
    use std::time::Duration;

    fn failed_plan(alert: Option<&str>) -> Plan {
        let revision = || Revision { rev: "main".into(), commit: None };
        let mut plan = Plan::failed(revision(), revision(), "it failed".into());
        if let Some(message) = alert {
            plan.alerts.extend(Policy::default().general_alert("source-limit", message.to_string()));
        }
        plan
    }

    #[test]
    fn only_plans_stopped_for_time_count_as_slow() {
        let token = CancelToken::new();
        let build = "at head: kustomize build timed out after 60s (--kustomize-timeout)";
        assert!(ran_out_of_time(&failed_plan(Some(build)), &token));
        // Over a size limit, or failed otherwise: fast, not slow.
        assert!(!ran_out_of_time(&failed_plan(Some("a file weighs more than 10 MiB")), &token));
        assert!(!ran_out_of_time(&failed_plan(None), &token));
        token.cancel(CancelReason::TimedOut(Duration::from_secs(600)));
        assert!(ran_out_of_time(&failed_plan(None), &token));
        let superseded = CancelToken::new();
        superseded.cancel(CancelReason::Superseded);
        assert!(!ran_out_of_time(&failed_plan(None), &superseded));
    }

    #[test]
    fn the_lane_keeps_one_worker_free() {
        assert_eq!(SlowLane::for_workers(2).0.available_permits(), 1);
        assert_eq!(SlowLane::for_workers(4).0.available_permits(), 3);
        // A single worker (or none) still runs slow plans.
        assert_eq!(SlowLane::for_workers(1).0.available_permits(), 1);
        assert_eq!(SlowLane::for_workers(0).0.available_permits(), 1);
        let lane = SlowLane::for_workers(2);
        let held = lane.try_enter();
        assert!(held.is_some() && lane.try_enter().is_none());
        drop(held);
        assert!(lane.try_enter().is_some());
    }
}
