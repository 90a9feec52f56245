//! What catching up after an outage reads and writes: a job's age (a job is retried later only
//! up to a maximum age) and the jobs waiting for their forge to answer again.

use super::{now_ms, Store};
use anyhow::Result;
use backon::{ExponentialBuilder, Retryable};
use sqlx::Row;
use std::time::Duration;

/// Runs a write that must not be lost to a database blip (a job's outcome: lost, the job would
/// stay `running` until its lease expires), retrying for about a minute.
pub(super) async fn surviving_a_blip<T, F, Fut>(what: &str, write: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(10))
        .with_max_times(10)
        .with_jitter();
    write
        .retry(backoff)
        .when(|e| !matches!(e, sqlx::Error::RowNotFound | sqlx::Error::ColumnNotFound(_)))
        .notify(|error, delay| tracing::warn!(%error, ?delay, "{what}: the database failed, retrying"))
        .await
}

impl Store {
    /// When the job was queued (ms since the epoch), if it exists.
    pub async fn job_created_at(&self, id: i64) -> Result<Option<i64>> {
        let row = sqlx::query("SELECT created_at FROM jobs WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| row.try_get("created_at")).transpose()?)
    }

    /// A running job whose attempts a transient failure used up goes back to the queue until
    /// `run_after`, its attempts counted anew for the next round.
    pub async fn requeue_later(&self, id: i64, worker: &str, run_after: i64, error: &str) -> Result<()> {
        self.set_job_state(id, worker, ("queued", run_after, Some(error)), true).await
    }

    /// The forge answers again: its queued jobs waiting to retry a failure are due now (follow-ups
    /// keep their own pace: they wait for a cluster, not the forge). Returns how many.
    pub async fn wake_retrying(&self, forge: &str) -> Result<u64> {
        let now = now_ms();
        Ok(sqlx::query(
            "UPDATE jobs SET run_after = $1, updated_at = $1 WHERE forge = $2 AND status = 'queued' \
             AND run_after > $1 AND last_error IS NOT NULL AND kind <> 'followup'",
        )
        .bind(now)
        .bind(forge)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }
}
