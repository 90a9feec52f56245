//! Which due job a free worker takes, so that no pull request or author holds every worker:
//! round-robin across authors and pull requests (the job whose author, then whose pull request,
//! has the fewest jobs running goes first, then the oldest), and the plans of pull requests whose plans keep running out of time behind
//! everyone else's. Their record (`slow_pulls`) lives here too.

use super::{now_ms, Backend, Store};
use anyhow::Result;
use sqlx::Row;

/// The id of the job a worker claims next; `$2` is now. Without `take_slow` the plans of slow
/// pull requests are left for a worker that may take them.
pub(super) fn next_due_job(backend: Backend, take_slow: bool) -> String {
    // On PostgreSQL concurrent workers skip rows another is claiming; the outer join's side is
    // not locked (it cannot be, and need not be).
    let lock = match backend {
        Backend::Postgres => " FOR UPDATE OF j SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let slow = if take_slow { "" } else { " AND s.strikes IS NULL" };
    format!(
        "SELECT j.id FROM jobs j LEFT JOIN slow_pulls s ON j.kind = 'plan' AND s.forge = j.forge \
         AND s.repo = j.repo AND s.pr_number = j.pr_number \
         WHERE j.status = 'queued' AND j.run_after <= $2{slow} \
         ORDER BY COALESCE(s.strikes, 0), \
         (SELECT COUNT(*) FROM jobs a WHERE a.forge = j.forge AND a.author = j.author AND a.status = 'running'), \
         (SELECT COUNT(*) FROM jobs r WHERE r.forge = j.forge AND r.repo = j.repo \
         AND r.pr_number = j.pr_number AND r.status = 'running'), j.id LIMIT 1{lock}"
    )
}

impl Store {
    /// Records how a plan of a pull request ended: out of time (one more strike: its next plans
    /// wait behind others) or in time (it is treated like any other again).
    pub async fn record_plan_time(
        &self,
        forge: &str,
        repo: &str,
        pr_number: i64,
        ran_out_of_time: bool,
    ) -> Result<()> {
        if ran_out_of_time {
            sqlx::query(
                "INSERT INTO slow_pulls (forge, repo, pr_number, strikes, updated_at) VALUES ($1, $2, $3, 1, $4) \
                 ON CONFLICT (forge, repo, pr_number) DO UPDATE SET strikes = slow_pulls.strikes + 1, updated_at = $4",
            )
            .bind(forge)
            .bind(repo)
            .bind(pr_number)
            .bind(now_ms())
            .execute(&self.pool)
            .await?;
        } else {
            sqlx::query("DELETE FROM slow_pulls WHERE forge = $1 AND repo = $2 AND pr_number = $3")
                .bind(forge)
                .bind(repo)
                .bind(pr_number)
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// How many plans in a row of the pull request ran out of time (0: none, or it is fine again).
    pub async fn slow_strikes(&self, forge: &str, repo: &str, pr_number: i64) -> Result<i64> {
        let row =
            sqlx::query("SELECT strikes FROM slow_pulls WHERE forge = $1 AND repo = $2 AND pr_number = $3")
                .bind(forge)
                .bind(repo)
                .bind(pr_number)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|r| r.try_get("strikes")).transpose()?.unwrap_or(0))
    }
}
