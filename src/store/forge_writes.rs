//! The order of a pull request's forge writes (its commit status, its sticky comment): each is
//! recorded, numbered, before it is posted, and only while its job is the newest there. What a
//! writer does with the numbers is `jobs::fence`'s; this module only keeps them.

use super::{now_ms, Store};
use anyhow::Result;
use sqlx::Row;

/// Where a job's writes go, and which jobs outrank it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    pub forge: String,
    pub repo: String,
    /// `pull/12/status`, `pull/12/comment`, `group/<sha>/status`.
    pub name: String,
    pub rivals: Rivals,
}

/// The jobs that, when newer than a writer, silence it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rivals {
    /// Plans of the pull request (any head: the newest plan is the one that speaks for it).
    Plans { pr_number: i64 },
    /// Plans of the same merge queue group.
    Groups { head_sha: String },
}

impl Store {
    /// Records `body` as the latest write on `channel` and returns its number, if job `job_id` is
    /// still the newest there: held by `holder` (when given: a job given up is held by no one)
    /// and no rival job queued after it. `None` when it is not: it must write nothing.
    ///
    /// The row is written before the job is checked, in one transaction: a rival recording at
    /// the same time waits for it, so a number is never handed to a job that a rival already
    /// outranks.
    pub async fn record_write(
        &self,
        job_id: i64,
        holder: Option<&str>,
        channel: &Channel,
        body: &str,
    ) -> Result<Option<i64>> {
        let mut tx = self.pool.begin().await?;
        let seq: i64 = sqlx::query(
            "INSERT INTO forge_writes (forge, repo, channel, seq, job_id, body, written_at) \
             VALUES ($1, $2, $3, 1, $4, $5, $6) ON CONFLICT (forge, repo, channel) DO UPDATE \
             SET seq = forge_writes.seq + 1, job_id = excluded.job_id, body = excluded.body, \
             written_at = excluded.written_at RETURNING seq",
        )
        .bind(&channel.forge)
        .bind(&channel.repo)
        .bind(&channel.name)
        .bind(job_id)
        .bind(body)
        .bind(now_ms())
        .fetch_one(&mut *tx)
        .await?
        .try_get("seq")?;
        let job = sqlx::query("SELECT status, locked_by FROM jobs WHERE id = $1")
            .bind(job_id)
            .fetch_optional(&mut *tx)
            .await?;
        let held = match (job, holder) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(row), Some(holder)) => {
                let status: String = row.try_get("status")?;
                let locked_by: Option<String> = row.try_get("locked_by")?;
                status == "running" && locked_by.as_deref() == Some(holder)
            }
        };
        let outranked = match &channel.rivals {
            Rivals::Plans { pr_number } => sqlx::query(
                "SELECT 1 AS newer FROM jobs WHERE forge = $1 AND repo = $2 AND pr_number = $3 \
                 AND kind = 'plan' AND id > $4 LIMIT 1",
            )
            .bind(&channel.forge)
            .bind(&channel.repo)
            .bind(pr_number)
            .bind(job_id),
            Rivals::Groups { head_sha } => sqlx::query(
                "SELECT 1 AS newer FROM jobs WHERE forge = $1 AND repo = $2 AND head_sha = $3 \
                 AND kind = 'merge-group' AND id > $4 LIMIT 1",
            )
            .bind(&channel.forge)
            .bind(&channel.repo)
            .bind(head_sha)
            .bind(job_id),
        }
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
        if !held || outranked {
            tx.rollback().await?;
            return Ok(None);
        }
        tx.commit().await?;
        Ok(Some(seq))
    }

    /// The number and body of the latest write recorded on `channel`.
    pub async fn latest_write(&self, channel: &Channel) -> Result<Option<(i64, String)>> {
        let row =
            sqlx::query("SELECT seq, body FROM forge_writes WHERE forge = $1 AND repo = $2 AND channel = $3")
                .bind(&channel.forge)
                .bind(&channel.repo)
                .bind(&channel.name)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|row| Ok((row.try_get("seq")?, row.try_get("body")?))).transpose()
    }
}
