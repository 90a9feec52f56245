//! Retention (issue 34, point 9): runs, deliveries and finished jobs older than the retention
//! age are deleted, each pull request's latest run and each repository's latest job kept, on real
//! PostgreSQL and on the embedded SQLite file, which is compacted after.

use crate::bot::{github_env, postgres_database, Bot};
use crate::fake_github::FakeGitHub;
use crate::fixture::{wait_for, WAIT};
use fluxplan::store::{NewJob, Pruned, RunOutcome, Store};
use std::time::Duration;

const DAY_MS: i64 = 86_400_000;
const KEEP: Duration = Duration::from_secs(90 * 86_400);

fn job(repo: &str, number: i64, sha: &str) -> NewJob {
    NewJob {
        kind: "plan".into(),
        forge: "github".into(),
        repo: repo.into(),
        pr_number: number,
        head_sha: sha.into(),
        payload: format!(
            r#"{{"type":"closed","repo":{{"forge":"github","full_name":"{repo}","clone_url":"file:///x"}},"number":{number}}}"#
        ),
        supersedes_older_heads: false,
        dedupe_same_head: false,
        dedupe_key: None,
        author: None,
    }
}

/// What the test made, by name.
struct Made {
    runs: Vec<(&'static str, i64)>,
    jobs: Vec<(&'static str, i64)>,
}

/// Runs, deliveries and jobs of two pull requests and two repositories, some of them dated
/// `age_days` back.
async fn populate(store: &Store, url: &str) -> Made {
    let mut runs = Vec::new();
    for (name, number) in [("pr1-old", 1), ("pr1-old-latest", 1), ("pr2-old", 2), ("pr2-recent", 2)] {
        let (id, _) = store
            .start_run(None, "github", "acme/fleet", number, "main", name, "pull-request", None)
            .await
            .unwrap();
        store.finish_run(id, &RunOutcome { status: "done".into(), ..Default::default() }).await.unwrap();
        runs.push((name, id));
    }
    for (delivery, repo) in [("old-delivery", "acme/fleet"), ("recent-delivery", "acme/fleet")] {
        store.record_delivery("github", delivery, "pull_request", repo, &[]).await.unwrap();
    }
    let mut jobs = Vec::new();
    for (name, repo, number) in [
        ("old-done", "acme/fleet", 1),
        ("old-queued", "acme/fleet", 2),
        ("recent-done", "acme/fleet", 3),
        ("other-repo-latest", "acme/other", 1),
    ] {
        store.enqueue(&[job(repo, number, name)]).await.unwrap();
    }
    // Each job but the queued one is done.
    while let Some(claimed) = store.claim("test-worker", true).await.unwrap() {
        let status = if claimed.head_sha == "old-queued" { "queued" } else { "done" };
        store.finish_job(claimed.id, "test-worker", status, i64::MAX, None).await.unwrap();
        // A queued job due in the far future is not claimed again.
        jobs.push((name_of(&claimed.head_sha), claimed.id));
    }
    let db = sqlx::AnyPool::connect(url).await.unwrap();
    let long_ago = fluxplan::store::now_ms() - 200 * DAY_MS;
    for (name, id) in &runs {
        if name.contains("old") {
            sqlx::query("UPDATE runs SET created_at = $1 WHERE id = $2")
                .bind(long_ago)
                .bind(*id)
                .execute(&db)
                .await
                .unwrap();
        }
    }
    sqlx::query("UPDATE events SET received_at = $1 WHERE delivery_id = 'old-delivery'")
        .bind(long_ago)
        .execute(&db)
        .await
        .unwrap();
    sqlx::query("UPDATE jobs SET updated_at = $1, created_at = $1 WHERE head_sha <> 'recent-done'")
        .bind(long_ago)
        .execute(&db)
        .await
        .unwrap();
    // The last forge writes and slow-plan strikes of an idle pull request, and of an active one.
    for (number, at) in [(1, long_ago), (3, fluxplan::store::now_ms())] {
        sqlx::query(
            "INSERT INTO forge_writes (forge, repo, channel, seq, job_id, body, written_at) \
             VALUES ('github', 'acme/fleet', $1, 1, 0, '{}', $2)",
        )
        .bind(format!("status:{number}"))
        .bind(at)
        .execute(&db)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO slow_pulls (forge, repo, pr_number, strikes, updated_at) VALUES ('github', 'acme/fleet', $1, 1, $2)",
        )
        .bind(number)
        .bind(at)
        .execute(&db)
        .await
        .unwrap();
    }
    db.close().await;
    Made { runs, jobs }
}

fn name_of(sha: &str) -> &'static str {
    ["old-done", "old-queued", "recent-done", "other-repo-latest"].into_iter().find(|n| *n == sha).unwrap()
}

async fn left(store: &Store, made: &Made) -> (Vec<&'static str>, Vec<&'static str>, i64) {
    let mut runs = Vec::new();
    for (name, id) in &made.runs {
        if store.run(*id).await.unwrap().is_some() {
            runs.push(*name);
        }
    }
    let mut jobs = Vec::new();
    for (repo, number) in [("acme/fleet", 1), ("acme/fleet", 2), ("acme/fleet", 3), ("acme/other", 1)] {
        for (_, sha, _, _) in store.jobs_of("github", repo, number).await.unwrap() {
            jobs.push(name_of(&sha));
        }
    }
    jobs.sort();
    (runs, jobs, store.delivery_count().await.unwrap())
}

fn prunes_old_rows_and_keeps_the_latest(url: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let store = Store::connect(url).await.unwrap();
        store.migrate().await.unwrap();
        let made = populate(&store, url).await;
        assert_eq!(made.jobs.len(), 4);
        let pruned = store.prune(KEEP).await.unwrap();
        assert_eq!(pruned, Pruned { runs: 2, events: 1, jobs: 1, replies: 0, bookkeeping: 2 });
        let (runs, jobs, deliveries) = left(&store, &made).await;
        // Each pull request's latest run stays, old or not; recent ones stay.
        assert_eq!(runs, ["pr1-old-latest", "pr2-recent"]);
        // Queued jobs are never pruned; a repository's latest job stays (the resync knows the
        // repositories from them).
        assert_eq!(jobs, ["old-queued", "other-repo-latest", "recent-done"]);
        assert_eq!(deliveries, 1);
        // Nothing more to prune.
        assert_eq!(store.prune(KEEP).await.unwrap().total(), 0);
        store.compact().await.unwrap();
    });
}

#[test]
fn pruning_on_postgres_keeps_each_pull_requests_latest_run() {
    let database = postgres_database();
    prunes_old_rows_and_keeps_the_latest(&database.url);
}

#[test]
fn pruning_on_sqlite_keeps_each_pull_requests_latest_run_and_compacts() {
    let data = tempfile::tempdir().unwrap();
    let url = Store::default_url(data.path());
    prunes_old_rows_and_keeps_the_latest(&url);
    // Compacted: no free pages left in the file.
    let db = rusqlite::Connection::open(data.path().join("fluxplan.db")).unwrap();
    let free: i64 = db.query_row("PRAGMA freelist_count", [], |row| row.get(0)).unwrap();
    assert_eq!(free, 0);
}

#[test]
fn serve_prunes_at_start_and_a_retention_of_zero_keeps_everything() {
    let data = tempfile::tempdir().unwrap();
    let url = Store::default_url(data.path());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (store, made) = runtime.block_on(async {
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        let made = populate(&store, &url).await;
        (store, made)
    });
    let github = FakeGitHub::start();
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_RESYNC_SECS", "0".into()));
    env.push(("FLUXPLAN_WORKERS", "0".into()));
    // Near miss: 0 keeps everything.
    env.push(("FLUXPLAN_RETENTION_DAYS", "0".into()));
    let mut bot = Bot::start(data.path(), &env);
    assert_eq!(bot.get("/healthz").0, 200);
    bot.kill();
    let (runs, _, deliveries) = runtime.block_on(left(&store, &made));
    assert_eq!((runs.len(), deliveries), (4, 2));
    env.pop();
    let _bot = Bot::start(data.path(), &env);
    wait_for("the prune at start", WAIT, || runtime.block_on(left(&store, &made)).0.len() == 2);
    let (runs, jobs, deliveries) = runtime.block_on(left(&store, &made));
    assert_eq!(runs, ["pr1-old-latest", "pr2-recent"]);
    assert_eq!(jobs, ["old-queued", "other-repo-latest", "recent-done"]);
    assert_eq!(deliveries, 1);
}
