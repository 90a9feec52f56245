//! Runs no worker will close: their job was superseded while its worker was gone (a crash, a
//! kill), so no one finishes them and the reclaim, which takes over running jobs only, never
//! sees them. And what became of a job, for a worker closing the run of one it lost.

use super::{now_ms, Store};
use anyhow::Result;
use sqlx::Row;

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

    /// The status of job `id` (`None` when there is no such job).
    pub async fn job_status(&self, id: i64) -> Result<Option<String>> {
        let row =
            sqlx::query("SELECT status FROM jobs WHERE id = $1").bind(id).fetch_optional(&self.pool).await?;
        Ok(row.map(|row| row.try_get("status")).transpose()?)
    }
}
