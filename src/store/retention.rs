//! Retention: runs, webhook deliveries and finished jobs older than the retention age are
//! deleted, keeping each pull request's latest run (its page, its approval binding and the
//! resync's memory of its plan) and each repository's latest job (the resync learns the
//! repositories it knows from them). The embedded SQLite file is compacted after a prune; on
//! PostgreSQL autovacuum reclaims the space.

use super::{now_ms, Backend, Store};
use anyhow::Result;
use std::time::Duration;

/// What one prune deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub runs: u64,
    pub events: u64,
    pub jobs: u64,
    pub replies: u64,
    /// Records of pull requests idle that long: their last forge writes, their slow-plan strikes.
    pub bookkeeping: u64,
}

impl Pruned {
    pub fn total(&self) -> u64 {
        self.runs + self.events + self.jobs + self.replies + self.bookkeeping
    }
}

impl Store {
    /// Deletes what is older than `keep` (see the module); queued and running jobs are never
    /// deleted, whatever their age.
    pub async fn prune(&self, keep: Duration) -> Result<Pruned> {
        let cutoff = now_ms() - keep.as_millis() as i64;
        let runs = sqlx::query(
            "DELETE FROM runs WHERE created_at < $1 AND id NOT IN \
             (SELECT MAX(id) FROM runs GROUP BY forge, repo, pr_number)",
        )
        .bind(cutoff)
        .execute(&self.pool)
        .await?
        .rows_affected();
        let events = sqlx::query("DELETE FROM events WHERE received_at < $1")
            .bind(cutoff)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let jobs = sqlx::query(
            "DELETE FROM jobs WHERE updated_at < $1 AND status NOT IN ('queued', 'running') AND id NOT IN \
             (SELECT MAX(id) FROM jobs GROUP BY forge, repo)",
        )
        .bind(cutoff)
        .execute(&self.pool)
        .await?
        .rows_affected();
        let replies = sqlx::query("DELETE FROM replies WHERE replied_at < $1")
            .bind(cutoff)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let mut bookkeeping = 0;
        for sql in
            ["DELETE FROM forge_writes WHERE written_at < $1", "DELETE FROM slow_pulls WHERE updated_at < $1"]
        {
            bookkeeping += sqlx::query(sql).bind(cutoff).execute(&self.pool).await?.rows_affected();
        }
        Ok(Pruned { runs, events, jobs, replies, bookkeeping })
    }

    /// Gives the space of deleted rows back to the file system (SQLite: `VACUUM`, then the
    /// write-ahead log truncated); nothing on PostgreSQL. `VACUUM` rewrites the file and holds the
    /// only connection meanwhile: call it at a quiet time.
    pub async fn compact(&self) -> Result<()> {
        if self.backend == Backend::Sqlite {
            sqlx::query("VACUUM").execute(&self.pool).await?;
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&self.pool).await?;
        }
        Ok(())
    }

    /// True while some job is being worked on (then it is no quiet time to compact).
    pub async fn any_job_running(&self) -> Result<bool> {
        let row = sqlx::query("SELECT 1 AS running FROM jobs WHERE status = 'running' LIMIT 1")
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }
}
