//! What catching up after an outage reads and writes: a job's age (a job is retried later only
//! up to a maximum age) and the jobs waiting for their forge to answer again.

use super::{now_ms, Store};
use anyhow::Result;
use sqlx::Row;

impl Store {
    /// When the job was queued (ms since the epoch), if it exists.
    pub async fn job_created_at(&self, id: i64) -> Result<Option<i64>> {
        let row = sqlx::query("SELECT created_at FROM jobs WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| row.try_get("created_at")).transpose()?)
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
