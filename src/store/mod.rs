//! Durable state with sqlx: webhook deliveries, the job queue, runs and approvals. PostgreSQL in
//! production (several replicas share one queue through `FOR UPDATE SKIP LOCKED`); an embedded
//! SQLite file when no database is configured. Times are Unix milliseconds.

mod fair;

use crate::plan::actual::Followup;
use anyhow::{Context, Result};
use serde::Serialize;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use std::time::{SystemTime, UNIX_EPOCH};

mod recovery;
mod retention;
pub use retention::Pruned;
mod forge_writes;
mod runs_closed;
pub use forge_writes::{Channel, Rivals};

static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The embedded database's file in the data directory.
pub const SQLITE_FILE: &str = "fluxplan.db";

/// Why a job failed when its process died during every attempt (a crash, an abort, killed for
/// memory): the resync does not plan that head again.
pub const WORKER_DIED: &str = "the planner process stopped during every attempt";

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// Why a pool could not connect. The pool retries until its acquire timeout and then says only
/// "pool timed out"; one direct attempt tells the real cause ("connection refused", a wrong
/// password, an unknown host).
async fn connect_failure_cause(url: &str, error: sqlx::Error) -> anyhow::Error {
    use sqlx::Connection;
    if !matches!(error, sqlx::Error::PoolTimedOut) {
        return error.into();
    }
    match tokio::time::timeout(std::time::Duration::from_secs(3), sqlx::AnyConnection::connect(url)).await {
        Ok(Err(cause)) => cause.into(),
        Ok(Ok(_)) => error.into(),
        Err(_) => anyhow::anyhow!("the database did not answer within 6 seconds"),
    }
}

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
}

/// A job to enqueue.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub kind: String,
    pub forge: String,
    pub repo: String,
    pub pr_number: i64,
    pub head_sha: String,
    pub payload: String,
    /// A plan for a new head supersedes queued and running plans of older heads of the pull request.
    pub supersedes_older_heads: bool,
    /// Skip when a plan of this very head is already queued (a redundant event).
    pub dedupe_same_head: bool,
    /// A job with this key exists once, whatever its status: duplicates collapse into it.
    pub dedupe_key: Option<String>,
    /// Who opened the pull request (a plan's): workers are shared fairly across authors too.
    pub author: Option<String>,
}

/// A claimed job.
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    pub id: i64,
    pub kind: String,
    pub forge: String,
    pub repo: String,
    pub pr_number: i64,
    pub head_sha: String,
    pub payload: String,
    pub attempts: i64,
    /// How often the job answered "not yet" (a follow-up waiting for the controller).
    pub polls: i64,
}

/// What taking over expired jobs did.
#[derive(Debug, Clone, Default)]
pub struct Reclaimed {
    /// Jobs back in the queue.
    pub requeued: u64,
    /// Jobs that used every attempt: failed.
    pub gave_up: Vec<Job>,
}

/// What enqueueing did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// The delivery id was seen before: nothing done.
    Duplicate,
    Jobs {
        queued: usize,
        superseded: u64,
    },
}

/// A run as stored.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub id: i64,
    pub job_id: Option<i64>,
    pub forge: String,
    pub repo: String,
    pub pr_number: i64,
    pub base_ref: String,
    pub base_sha: Option<String>,
    pub head_sha: String,
    pub trigger: String,
    pub status: String,
    pub verdict: Option<String>,
    pub counts: Option<String>,
    pub alerts: Option<String>,
    pub timings: Option<String>,
    pub plan_json: Option<String>,
    pub comment: Option<String>,
    pub error: Option<String>,
    pub approved_by: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub plan_digest: Option<String>,
    /// The secret that opens this run's page (links in comments carry it).
    pub page_token: Option<String>,
    /// Bumped by every follow-up write (optimistic concurrency).
    pub version: i64,
    /// A merge's run: the commit the pull request merged as.
    pub merge_sha: Option<String>,
    /// JSON list of notes (`stale-plan: ...`).
    pub notes: Option<String>,
    /// JSON of the plan's prediction per Kustomization (`plan::actual::Prediction`).
    pub prediction: Option<String>,
    /// JSON of the rollout follow-up (`plan::actual::Followup`).
    pub followup: Option<String>,
    /// exact, differs, failed or timeout, once the follow-up is complete.
    pub followup_outcome: Option<String>,
    /// The repository's page on the forge, for links (none on runs recorded before it was kept).
    pub web_url: Option<String>,
}

/// The parts of a merge run its follow-ups read.
#[derive(Debug, Clone)]
pub struct RunFollowup {
    pub id: i64,
    pub prediction: Option<String>,
    pub followup: Option<String>,
    pub notes: Option<String>,
}

/// The outcome of a run, stored when it finishes.
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    pub status: String,
    pub base_sha: Option<String>,
    pub verdict: Option<String>,
    pub counts: Option<String>,
    pub alerts: Option<String>,
    pub timings: Option<String>,
    pub plan_json: Option<String>,
    pub comment: Option<String>,
    pub error: Option<String>,
    pub approved_by: Option<String>,
    /// Digest of the plan's content (changes and alerts) an approval binds to.
    pub plan_digest: Option<String>,
    pub merge_sha: Option<String>,
    pub notes: Option<String>,
    pub prediction: Option<String>,
    pub followup: Option<String>,
}

/// An approval of one head commit, bound to the content of the plan it approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub approved_by: String,
    pub run_id: Option<i64>,
    pub plan_digest: Option<String>,
}

/// 128 random bits, hex: unguessable.
fn random_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for a run token: {e}"))?;
    Ok(hex::encode(bytes))
}

/// Conflicting writes one follow-up update survives before it gives up (and its job retries).
const MAX_CAS_ATTEMPTS: usize = 50;

/// A random wait of up to 1 ms per lost race so far (at most 25 ms).
fn cas_backoff(lost: usize) -> std::time::Duration {
    let mut byte = [0u8; 1];
    let _ = getrandom::fill(&mut byte);
    let ceiling = (lost as u64).min(25) * 1000;
    std::time::Duration::from_micros(ceiling * u64::from(byte[0]) / 255)
}

/// Replies (refusals, help) one pull request gets at most per reply window, from all users.
const MAX_REPLIES_PER_PULL: i64 = 5;

/// Why a run is `abandoned`.
const ABANDONED: &str = "the worker stopped before finishing; the job was taken over";

const RUN_COLUMNS: &str =
    "id, job_id, forge, repo, pr_number, base_ref, base_sha, head_sha, trigger, status, \
    verdict, counts, alerts, timings, plan_json, comment, error, approved_by, created_at, finished_at, \
    plan_digest, page_token, version, merge_sha, notes, prediction, followup, followup_outcome, web_url";

fn run_row(row: &AnyRow) -> Result<RunRow, sqlx::Error> {
    Ok(RunRow {
        id: row.try_get("id")?,
        job_id: row.try_get("job_id")?,
        forge: row.try_get("forge")?,
        repo: row.try_get("repo")?,
        pr_number: row.try_get("pr_number")?,
        base_ref: row.try_get("base_ref")?,
        base_sha: row.try_get("base_sha")?,
        head_sha: row.try_get("head_sha")?,
        trigger: row.try_get("trigger")?,
        status: row.try_get("status")?,
        verdict: row.try_get("verdict")?,
        counts: row.try_get("counts")?,
        alerts: row.try_get("alerts")?,
        timings: row.try_get("timings")?,
        plan_json: row.try_get("plan_json")?,
        comment: row.try_get("comment")?,
        error: row.try_get("error")?,
        approved_by: row.try_get("approved_by")?,
        plan_digest: row.try_get("plan_digest")?,
        page_token: row.try_get("page_token")?,
        created_at: row.try_get("created_at")?,
        finished_at: row.try_get("finished_at")?,
        version: row.try_get("version")?,
        merge_sha: row.try_get("merge_sha")?,
        notes: row.try_get("notes")?,
        prediction: row.try_get("prediction")?,
        followup: row.try_get("followup")?,
        followup_outcome: row.try_get("followup_outcome")?,
        web_url: row.try_get("web_url")?,
    })
}

fn job_row(row: &AnyRow) -> Result<Job, sqlx::Error> {
    Ok(Job {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        forge: row.try_get("forge")?,
        repo: row.try_get("repo")?,
        pr_number: row.try_get("pr_number")?,
        head_sha: row.try_get("head_sha")?,
        payload: row.try_get("payload")?,
        attempts: row.try_get("attempts")?,
        polls: row.try_get("polls")?,
    })
}

impl Store {
    /// Connects to `url` (`postgres://...` or `sqlite://...`).
    pub async fn connect(url: &str) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("postgres") {
            Backend::Postgres
        } else if url.starts_with("sqlite") {
            Backend::Sqlite
        } else {
            anyhow::bail!("DATABASE_URL must start with postgres:// or sqlite:// (got {})", redact(url));
        };
        // A database that does not answer fails a request in seconds (a webhook gets its 503
        // before the forge's own timeout; it does not redeliver it, the catch-up resync finds
        // what it asked for), not after sqlx's default 30 s.
        let mut options = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 1 } else { 10 })
            .acquire_timeout(std::time::Duration::from_secs(3));
        if backend == Backend::Sqlite {
            options = options.after_connect(|conn, _| {
                Box::pin(async move {
                    sqlx::query("PRAGMA journal_mode = WAL").execute(&mut *conn).await?;
                    sqlx::query("PRAGMA busy_timeout = 5000").execute(&mut *conn).await?;
                    Ok(())
                })
            });
        }
        let pool = match options.connect(url).await {
            Ok(pool) => pool,
            Err(error) => {
                let cause = connect_failure_cause(url, error).await;
                return Err(cause).with_context(|| format!("cannot connect to the database {}", redact(url)));
            }
        };
        Ok(Store { pool, backend })
    }

    /// The embedded default: a SQLite file in `data_dir`.
    pub fn default_url(data_dir: &std::path::Path) -> String {
        format!("sqlite://{}?mode=rwc", data_dir.join(SQLITE_FILE).display())
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Applies pending migrations.
    pub async fn migrate(&self) -> Result<()> {
        let migrator = match self.backend {
            Backend::Postgres => &POSTGRES_MIGRATIONS,
            Backend::Sqlite => &SQLITE_MIGRATIONS,
        };
        migrator.run(&self.pool).await.context("database migrations failed")
    }

    /// True when the database answers.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Records a delivery and enqueues its jobs in one transaction; a delivery seen before is a
    /// no-op.
    pub async fn record_delivery(
        &self,
        forge: &str,
        delivery_id: &str,
        event: &str,
        repo: &str,
        jobs: &[NewJob],
    ) -> Result<Enqueued> {
        let mut tx = self.pool.begin().await?;
        let now = now_ms();
        let inserted = sqlx::query(
            "INSERT INTO events (forge, delivery_id, event, repo, received_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (forge, delivery_id) DO NOTHING",
        )
        .bind(forge)
        .bind(delivery_id)
        .bind(event)
        .bind(repo)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted == 0 {
            return Ok(Enqueued::Duplicate);
        }
        let (queued, superseded) = enqueue_in(&mut tx, jobs, now).await?;
        tx.commit().await?;
        Ok(Enqueued::Jobs { queued, superseded })
    }

    /// Enqueues jobs not tied to a webhook delivery (commands, re-plans after a push).
    pub async fn enqueue(&self, jobs: &[NewJob]) -> Result<Enqueued> {
        let mut tx = self.pool.begin().await?;
        let (queued, superseded) = enqueue_in(&mut tx, jobs, now_ms()).await?;
        tx.commit().await?;
        Ok(Enqueued::Jobs { queued, superseded })
    }

    /// Claims a due job for `worker`, if any, fairly across pull requests (`fair`); the plans of
    /// pull requests that keep running out of time only when `take_slow`. On PostgreSQL
    /// concurrent workers skip rows another holds (`FOR UPDATE SKIP LOCKED`); SQLite serializes
    /// writers.
    pub async fn claim(&self, worker: &str, take_slow: bool) -> Result<Option<Job>> {
        let now = now_ms();
        let sql = format!(
            "UPDATE jobs SET status = 'running', locked_by = $1, heartbeat_at = $2, attempts = attempts + 1, \
             updated_at = $2 WHERE id = ({}) \
             RETURNING id, kind, forge, repo, pr_number, head_sha, payload, attempts, polls",
            fair::next_due_job(self.backend, take_slow)
        );
        let row =
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(worker).bind(now).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(job_row).transpose()?)
    }

    /// Keeps a running job's lease alive; `false` when the job is no longer this worker's (its
    /// lease expired and another worker took it, or a newer push superseded it).
    pub async fn heartbeat(&self, id: i64, worker: &str) -> Result<bool> {
        let renewed = sqlx::query(
            "UPDATE jobs SET heartbeat_at = $1 WHERE id = $2 AND locked_by = $3 AND status = 'running'",
        )
        .bind(now_ms())
        .bind(id)
        .bind(worker)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(renewed == 1)
    }

    /// Sets a running job's final or next state (`done`, `failed`, `queued` to retry later).
    pub async fn finish_job(
        &self,
        id: i64,
        worker: &str,
        status: &str,
        run_after: i64,
        error: Option<&str>,
    ) -> Result<()> {
        self.set_job_state(id, worker, (status, run_after, error), false).await
    }

    /// Sets a running job's next state; `fresh_attempts` counts its attempts anew (a retry
    /// later). Retried through a database blip: a job left `running` would wait out its lease.
    async fn set_job_state(
        &self,
        id: i64,
        worker: &str,
        (status, run_after, error): (&str, i64, Option<&str>),
        fresh_attempts: bool,
    ) -> Result<()> {
        let attempts = if fresh_attempts { "0" } else { "attempts" };
        let sql = format!(
            "UPDATE jobs SET status = $1, run_after = $2, last_error = $3, locked_by = NULL, updated_at = $4, \
             attempts = {attempts} WHERE id = $5 AND locked_by = $6 AND status = 'running'"
        );
        recovery::surviving_a_blip("recording a job's outcome", || {
            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(status)
                .bind(run_after)
                .bind(error)
                .bind(now_ms())
                .bind(id)
                .bind(worker)
                .execute(&self.pool)
        })
        .await?;
        Ok(())
    }

    /// Jobs this server instance's workers hold go back to the queue (shutdown after the grace
    /// period).
    pub async fn release_running(&self, instance: &str) -> Result<u64> {
        let released = sqlx::query(
            "UPDATE jobs SET status = 'queued', locked_by = NULL, updated_at = $1 \
             WHERE status = 'running' AND locked_by LIKE $2",
        )
        .bind(now_ms())
        .bind(format!("{instance}-%"))
        .execute(&self.pool)
        .await?
        .rows_affected();
        self.abandon_stopped_runs().await?;
        Ok(released)
    }

    /// True while `worker` still holds the job (not superseded, not taken over).
    pub async fn holds(&self, id: i64, worker: &str) -> Result<bool> {
        let row = sqlx::query("SELECT status, locked_by FROM jobs WHERE id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await?;
        let status: String = row.try_get("status")?;
        let holder: Option<String> = row.try_get("locked_by")?;
        Ok(status == "running" && holder.as_deref() == Some(worker))
    }

    /// Running jobs whose lease expired (their worker died) go back to the queue, or fail when
    /// they have used every attempt (a job that kills its worker must not loop forever); so do
    /// the jobs of workers matching `dead_workers` (`LIKE`: a dead earlier process of this
    /// replica), whatever their lease. Returns how many went back, and the jobs given up (for
    /// `jobs::gave_up` to report; each to one caller only).
    pub async fn reclaim_expired(
        &self,
        lease_ms: i64,
        max_attempts: i64,
        dead_workers: Option<&str>,
    ) -> Result<Reclaimed> {
        let (now, cutoff) = (now_ms(), now_ms() - lease_ms);
        let failed = sqlx::query(
            "UPDATE jobs SET status = 'failed', locked_by = NULL, updated_at = $1, last_error = $4 \
             WHERE status = 'running' AND (heartbeat_at < $2 OR locked_by LIKE $5) AND attempts >= $3 \
             RETURNING id, kind, forge, repo, pr_number, head_sha, payload, attempts, polls",
        )
        .bind(now)
        .bind(cutoff)
        .bind(max_attempts)
        .bind(WORKER_DIED)
        .bind(dead_workers)
        .fetch_all(&self.pool)
        .await?;
        let gave_up = failed.iter().map(job_row).collect::<Result<Vec<_>, _>>()?;
        let requeued = sqlx::query(
            "UPDATE jobs SET status = 'queued', locked_by = NULL, updated_at = $1 \
             WHERE status = 'running' AND (heartbeat_at < $2 OR locked_by LIKE $3)",
        )
        .bind(now)
        .bind(cutoff)
        .bind(dead_workers)
        .execute(&self.pool)
        .await?
        .rows_affected();
        self.abandon_stopped_runs().await?;
        self.close_runs_of_superseded(cutoff).await?;
        Ok(Reclaimed { requeued, gave_up })
    }

    /// The runs a job given up left `running` are `failed`, with why; returns how many.
    pub async fn fail_stopped_runs(&self, job_id: i64, error: &str) -> Result<u64> {
        Ok(sqlx::query(
            "UPDATE runs SET status = 'failed', finished_at = $1, error = $2 WHERE job_id = $3 \
             AND status IN ('running', 'abandoned') AND id = (SELECT MAX(id) FROM runs WHERE job_id = $3)",
        )
        .bind(now_ms())
        .bind(error)
        .bind(job_id)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// True when a plan of this head of the pull request was given up because its process died
    /// during every attempt: planning it again would only kill the bot again.
    pub async fn gave_up_on(&self, forge: &str, repo: &str, pr_number: i64, head_sha: &str) -> Result<bool> {
        let row = sqlx::query(
            "SELECT 1 AS gave_up FROM jobs WHERE forge = $1 AND repo = $2 AND pr_number = $3 AND kind = 'plan' \
             AND head_sha = $4 AND status = 'failed' AND last_error = $5 LIMIT 1",
        )
        .bind(forge)
        .bind(repo)
        .bind(pr_number)
        .bind(head_sha)
        .bind(WORKER_DIED)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
    }

    /// Runs whose job was taken from its worker (a dead replica, a shutdown) are `abandoned`:
    /// no run stays `running` forever.
    async fn abandon_stopped_runs(&self) -> Result<u64> {
        Ok(sqlx::query(
            "UPDATE runs SET status = 'abandoned', finished_at = $1, \
             error = $2 WHERE status = 'running' AND job_id IN (SELECT id FROM jobs WHERE status IN ('queued', 'failed'))",
        )
        .bind(now_ms())
        .bind(ABANDONED)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// The job payloads that last named each repository the bot has heard of (the repository is
    /// read from them: its clone URL, installation, project id).
    pub async fn seen_repositories(&self) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT payload FROM jobs WHERE id IN (SELECT MAX(id) FROM jobs GROUP BY forge, repo) ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(|r| r.try_get("payload")).collect::<Result<_, _>>()?)
    }

    /// True when a run of the pull request started after `run_id` has already posted.
    pub async fn newer_run_done(&self, forge: &str, repo: &str, pr_number: i64, run_id: i64) -> Result<bool> {
        let row = sqlx::query(
            "SELECT 1 AS newer FROM runs WHERE forge = $1 AND repo = $2 AND pr_number = $3 AND id > $4 \
             AND status = 'done' LIMIT 1",
        )
        .bind(forge)
        .bind(repo)
        .bind(pr_number)
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
    }

    /// True while a plan of the pull request is queued or being made (a running job whose plan
    /// is already posted and recorded is only finishing).
    pub async fn plan_pending(&self, forge: &str, repo: &str, pr_number: i64) -> Result<bool> {
        let row = sqlx::query(
            "SELECT 1 AS pending FROM jobs WHERE forge = $1 AND repo = $2 AND pr_number = $3 AND kind = 'plan' \
             AND (status = 'queued' OR (status = 'running' AND NOT EXISTS \
             (SELECT 1 FROM runs WHERE runs.job_id = jobs.id AND runs.status = 'done'))) LIMIT 1",
        )
        .bind(forge)
        .bind(repo)
        .bind(pr_number)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
    }

    /// The jobs of one pull request, oldest first: (kind, head sha, status, attempts).
    pub async fn jobs_of(
        &self,
        forge: &str,
        repo: &str,
        pr_number: i64,
    ) -> Result<Vec<(String, String, String, i64)>> {
        let rows = sqlx::query(
            "SELECT kind, head_sha, status, attempts FROM jobs WHERE forge = $1 AND repo = $2 AND pr_number = $3 ORDER BY id",
        )
        .bind(forge)
        .bind(repo)
        .bind(pr_number)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((r.try_get("kind")?, r.try_get("head_sha")?, r.try_get("status")?, r.try_get("attempts")?))
            })
            .collect()
    }

    /// Webhook deliveries recorded.
    pub async fn delivery_count(&self) -> Result<i64> {
        Ok(sqlx::query("SELECT COUNT(*) AS n FROM events").fetch_one(&self.pool).await?.try_get("n")?)
    }

    /// Jobs per status.
    pub async fn job_counts(&self) -> Result<Vec<(String, i64)>> {
        let rows = sqlx::query("SELECT status, COUNT(*) AS n FROM jobs GROUP BY status")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok((r.try_get("status")?, r.try_get("n")?))).collect()
    }

    /// Starts a run; returns its id.
    #[allow(clippy::too_many_arguments)]
    pub async fn start_run(
        &self,
        job_id: Option<i64>,
        forge: &str,
        repo: &str,
        pr_number: i64,
        base_ref: &str,
        head_sha: &str,
        trigger: &str,
        web_url: Option<&str>,
    ) -> Result<(i64, String)> {
        let token = random_token()?;
        // A new attempt of a job: whatever its earlier attempt left running was abandoned.
        sqlx::query(
            "UPDATE runs SET status = 'abandoned', finished_at = $1, \
             error = $2 WHERE job_id = $3 AND status = 'running'",
        )
        .bind(now_ms())
        .bind(ABANDONED)
        .bind(job_id)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query(
            "INSERT INTO runs (job_id, forge, repo, pr_number, base_ref, head_sha, trigger, status, created_at, \
             page_token, web_url) VALUES ($1, $2, $3, $4, $5, $6, $7, 'running', $8, $9, $10) RETURNING id",
        )
        .bind(job_id)
        .bind(forge)
        .bind(repo)
        .bind(pr_number)
        .bind(base_ref)
        .bind(head_sha)
        .bind(trigger)
        .bind(now_ms())
        .bind(&token)
        .bind(web_url)
        .fetch_one(&self.pool)
        .await?;
        Ok((row.try_get("id")?, token))
    }

    /// Records a run's result (one job owns a run until then: its follow-ups are queued only
    /// after). It moves the version, so a follow-up write that read the run before loses its
    /// race and reads it again.
    pub async fn finish_run(&self, id: i64, outcome: &RunOutcome) -> Result<()> {
        sqlx::query(
            "UPDATE runs SET status = $1, base_sha = $2, verdict = $3, counts = $4, alerts = $5, timings = $6, \
             plan_json = $7, comment = $8, error = $9, approved_by = $10, finished_at = $11, plan_digest = $12, \
             merge_sha = $13, notes = $14, prediction = $15, followup = $16, version = version + 1 WHERE id = $17",
        )
        .bind(&outcome.status)
        .bind(&outcome.base_sha)
        .bind(&outcome.verdict)
        .bind(&outcome.counts)
        .bind(&outcome.alerts)
        .bind(&outcome.timings)
        .bind(&outcome.plan_json)
        .bind(&outcome.comment)
        .bind(&outcome.error)
        .bind(&outcome.approved_by)
        .bind(now_ms())
        .bind(&outcome.plan_digest)
        .bind(&outcome.merge_sha)
        .bind(&outcome.notes)
        .bind(&outcome.prediction)
        .bind(&outcome.followup)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Runs, newest first.
    pub async fn runs(&self, limit: i64, offset: i64) -> Result<Vec<RunRow>> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY id DESC LIMIT $1 OFFSET $2");
        let rows =
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(limit).bind(offset).fetch_all(&self.pool).await?;
        Ok(rows.iter().map(run_row).collect::<Result<_, _>>()?)
    }

    pub async fn run(&self, id: i64) -> Result<Option<RunRow>> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(run_row).transpose()?)
    }

    /// The runs of one pull request, oldest first.
    pub async fn runs_of(&self, forge: &str, repo: &str, pr_number: i64) -> Result<Vec<RunRow>> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE forge = $1 AND repo = $2 AND pr_number = $3 ORDER BY id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(forge)
            .bind(repo)
            .bind(pr_number)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(run_row).collect::<Result<_, _>>()?)
    }

    /// The latest finished run of a pull request at `head_sha`.
    pub async fn latest_run(
        &self,
        forge: &str,
        repo: &str,
        pr_number: i64,
        head_sha: &str,
    ) -> Result<Option<RunRow>> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE forge = $1 AND repo = $2 AND pr_number = $3 AND head_sha = $4 \
             AND finished_at IS NOT NULL AND status = 'done' ORDER BY id DESC LIMIT 1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(forge)
            .bind(repo)
            .bind(pr_number)
            .bind(head_sha)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(run_row).transpose()?)
    }

    /// The run recording the merge of a pull request as `merge_sha`, if one was made.
    pub async fn merge_run(
        &self,
        forge: &str,
        repo: &str,
        pr_number: i64,
        merge_sha: &str,
    ) -> Result<Option<RunRow>> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE forge = $1 AND repo = $2 AND pr_number = $3 AND merge_sha = $4 \
             AND status = 'done' ORDER BY id DESC LIMIT 1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(forge)
            .bind(repo)
            .bind(pr_number)
            .bind(merge_sha)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(run_row).transpose()?)
    }

    /// What a follow-up reads of its run on every poll: the prediction, the follow-up and the
    /// notes, not the whole run (its plan JSON can be large).
    pub async fn run_followup(&self, id: i64) -> Result<Option<RunFollowup>> {
        let row = sqlx::query("SELECT id, prediction, followup, notes FROM runs WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(RunFollowup {
            id: row.try_get("id")?,
            prediction: row.try_get("prediction")?,
            followup: row.try_get("followup")?,
            notes: row.try_get("notes")?,
        }))
    }

    /// A running job that answered "not yet" waits until `run_after`; the wait is no failed
    /// attempt, but it counts in the job's `polls` (its own backoff).
    pub async fn requeue_poll(&self, id: i64, worker: &str, run_after: i64, why: Option<&str>) -> Result<()> {
        recovery::surviving_a_blip("recording a job's next poll", || {
            sqlx::query(
                "UPDATE jobs SET status = 'queued', run_after = $1, attempts = attempts - 1, polls = polls + 1, \
                 last_error = $5, locked_by = NULL, updated_at = $2 WHERE id = $3 AND locked_by = $4 AND status = 'running'",
            )
            .bind(run_after)
            .bind(now_ms())
            .bind(id)
            .bind(worker)
            .bind(why)
            .execute(&self.pool)
        })
        .await?;
        Ok(())
    }

    /// Changes a run's follow-up with optimistic concurrency: read it with its version, apply
    /// `change`, write it only if the version is still the one read; a writer that lost the race
    /// reads again and re-applies, so no replica overwrites another's result. Returns what
    /// `change` returned on the write that stuck.
    pub async fn update_followup<T>(
        &self,
        run_id: i64,
        mut change: impl FnMut(&mut Followup) -> T,
    ) -> Result<T> {
        for attempt in 0..MAX_CAS_ATTEMPTS {
            if attempt > 0 {
                // Losers spread out before reading again, so a crowd of writers does not collide
                // round after round.
                tokio::time::sleep(cas_backoff(attempt)).await;
            }
            let row = sqlx::query("SELECT version, followup FROM runs WHERE id = $1")
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await?
                .with_context(|| format!("run {run_id} does not exist"))?;
            let version: i64 = row.try_get("version")?;
            let text: Option<String> = row.try_get("followup")?;
            let mut followup: Followup = match text {
                Some(text) => serde_json::from_str(&text).context("unreadable follow-up in the run")?,
                None => anyhow::bail!("run {run_id} has no follow-up"),
            };
            let answer = change(&mut followup);
            let written = sqlx::query(
                "UPDATE runs SET followup = $1, followup_outcome = $2, version = version + 1 \
                 WHERE id = $3 AND version = $4",
            )
            .bind(serde_json::to_string(&followup)?)
            .bind(followup.outcome.map(|o| o.as_str()))
            .bind(run_id)
            .bind(version)
            .execute(&self.pool)
            .await?
            .rows_affected();
            if written == 1 {
                return Ok(answer);
            }
            tracing::debug!(run = run_id, version, "another writer updated the run first: reading it again");
        }
        anyhow::bail!("run {run_id}: {MAX_CAS_ATTEMPTS} conflicting writes in a row")
    }

    /// Records an approval of `head_sha`, bound to the run it approves and that plan's digest; the
    /// run approved names its approver (its page shows who).
    #[allow(clippy::too_many_arguments)]
    pub async fn approve(
        &self,
        forge: &str,
        repo: &str,
        pr_number: i64,
        head_sha: &str,
        user: &str,
        run_id: i64,
        plan_digest: Option<&str>,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO approvals (forge, repo, pr_number, head_sha, approved_by, approved_at, run_id, plan_digest) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(forge)
        .bind(repo)
        .bind(pr_number)
        .bind(head_sha)
        .bind(user)
        .bind(now_ms())
        .bind(run_id)
        .bind(plan_digest)
        .execute(&mut *tx)
        .await?;
        // A write like any follow-up's: it moves the version, so one that read the run before
        // reads it again.
        sqlx::query("UPDATE runs SET approved_by = $1, version = version + 1 WHERE id = $2")
            .bind(user)
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The latest approval of this head of the pull request, if any.
    pub async fn approval(
        &self,
        forge: &str,
        repo: &str,
        pr_number: i64,
        head_sha: &str,
    ) -> Result<Option<Approval>> {
        let row = sqlx::query(
            "SELECT approved_by, run_id, plan_digest FROM approvals WHERE forge = $1 AND repo = $2 \
             AND pr_number = $3 AND head_sha = $4 ORDER BY id DESC LIMIT 1",
        )
        .bind(forge)
        .bind(repo)
        .bind(pr_number)
        .bind(head_sha)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(Approval {
            approved_by: row.try_get("approved_by")?,
            run_id: row.try_get("run_id")?,
            plan_digest: row.try_get("plan_digest")?,
        }))
    }

    /// True when `user` may get a reply on this pull request now (none in the last `window_ms`);
    /// the reply is then recorded. Keeps anyone from making the bot spam a pull request.
    pub async fn claim_reply(
        &self,
        forge: &str,
        repo: &str,
        pr_number: i64,
        user: &str,
        window_ms: i64,
    ) -> Result<bool> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let recent = sqlx::query(
            "SELECT 1 AS recent FROM replies WHERE forge = $1 AND repo = $2 AND pr_number = $3 AND username = $4 \
             AND replied_at > $5 LIMIT 1",
        )
        .bind(forge)
        .bind(repo)
        .bind(pr_number)
        .bind(user)
        .bind(now - window_ms)
        .fetch_optional(&mut *tx)
        .await?;
        // Nor more than a few replies on one pull request, whoever asks (sockpuppets).
        let on_pull: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM replies WHERE forge = $1 AND repo = $2 AND pr_number = $3 AND replied_at > $4",
        )
        .bind(forge)
        .bind(repo)
        .bind(pr_number)
        .bind(now - window_ms)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        if recent.is_some() || on_pull >= MAX_REPLIES_PER_PULL {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO replies (forge, repo, pr_number, username, replied_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(forge)
        .bind(repo)
        .bind(pr_number)
        .bind(user)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// Inserts jobs: a plan of a new head supersedes plans of older heads of its pull request, and a
/// plan of a head already queued is not queued twice. Returns (queued, superseded).
async fn enqueue_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    jobs: &[NewJob],
    now: i64,
) -> Result<(usize, u64)> {
    let mut queued = 0;
    let mut superseded = 0;
    for job in jobs {
        if job.supersedes_older_heads {
            superseded += sqlx::query(
                "UPDATE jobs SET status = 'superseded', updated_at = $1 WHERE forge = $2 AND repo = $3 \
                     AND pr_number = $4 AND kind = 'plan' AND status IN ('queued', 'running') AND head_sha <> $5",
            )
            .bind(now)
            .bind(&job.forge)
            .bind(&job.repo)
            .bind(job.pr_number)
            .bind(&job.head_sha)
            .execute(&mut **tx)
            .await?
            .rows_affected();
        }
        if job.dedupe_same_head {
            let existing: i64 = sqlx::query(
                "SELECT COUNT(*) AS n FROM jobs WHERE forge = $1 AND repo = $2 AND pr_number = $3 \
                     AND kind = $4 AND head_sha = $5 AND status = 'queued'",
            )
            .bind(&job.forge)
            .bind(&job.repo)
            .bind(job.pr_number)
            .bind(&job.kind)
            .bind(&job.head_sha)
            .fetch_one(&mut **tx)
            .await?
            .try_get("n")?;
            if existing > 0 {
                continue;
            }
        }
        // A keyed job that exists already (any status) is this one: the duplicate collapses.
        let inserted = sqlx::query(
            "INSERT INTO jobs (kind, forge, repo, pr_number, head_sha, payload, status, attempts, run_after, \
                 created_at, updated_at, dedupe_key, author) VALUES ($1, $2, $3, $4, $5, $6, 'queued', 0, $7, $7, $7, $8, $9) \
                 ON CONFLICT DO NOTHING",
        )
        .bind(&job.kind)
        .bind(&job.forge)
        .bind(&job.repo)
        .bind(job.pr_number)
        .bind(&job.head_sha)
        .bind(&job.payload)
        .bind(now)
        .bind(&job.dedupe_key)
        .bind(&job.author)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        queued += inserted as usize;
    }
    Ok((queued, superseded))
}

/// A database URL without its password, for messages.
pub fn redact(url: &str) -> String {
    crate::git::redact_url(url)
}
