//! Runs no worker will close: their job was superseded while its worker was gone (a crash, a
//! kill), so no one finishes them and the reclaim, which takes over running jobs only, never
//! sees them.

use super::{now_ms, Store};
use anyhow::Result;

/// Why such a run is `superseded`.
const SUPERSEDED_WHILE_STOPPED: &str =
    "superseded by a newer plan while its worker was stopped; the newer plan speaks for the pull request";

impl Store {
    /// Closes the runs left `running` by jobs superseded whose worker has not renewed their lease
    /// since `cutoff` (ms): a live worker notices within a heartbeat and closes its run itself.
    pub(super) async fn close_runs_of_superseded(&self, cutoff: i64) -> Result<u64> {
        Ok(sqlx::query(
            "UPDATE runs SET status = 'superseded', finished_at = $1, error = $2 WHERE status = 'running' \
             AND job_id IN (SELECT id FROM jobs WHERE status = 'superseded' AND heartbeat_at < $3)",
        )
        .bind(now_ms())
        .bind(SUPERSEDED_WHILE_STOPPED)
        .bind(cutoff)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }
}
