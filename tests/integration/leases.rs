//! Leases that follow the worker: a replica killed mid-plan and restarted takes its own job back
//! at once (not after the lease); a dead replica's job is taken over by a live one once the lease
//! expires, and a live one's never, however long its plan blocks.

use crate::bot::{
    file_url, final_status, fleet, github_env, hanging_kustomize, postgres_database, pull_request, push, Bot,
    REPO,
};
use crate::fake_github::FakeGitHub;
use crate::fixture::{process_running, stand_in_kustomize, wait_for, WAIT};
use fluxplan::store::Store;
use sqlx::Row;
use std::path::Path;

/// Replaces the stand-in kustomize in `dir` with one that renders as kustomize does (renamed
/// into place: a replica alive meanwhile never runs half a script).
fn stop_hanging(dir: &Path) {
    let kubectl = fluxplan::sandbox::resolve_program("kubectl").expect("kubectl is needed for this test");
    let staging = dir.join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let plain = stand_in_kustomize(&staging, &format!("shift\nexec {} kustomize \"$@\"", kubectl.display()));
    std::fs::rename(plain, dir.join("kustomize")).unwrap();
}

/// The one job of pull request `number`, as the queue holds it.
#[derive(Debug)]
struct Held {
    status: String,
    locked_by: Option<String>,
    attempts: i64,
    /// Claimed (`updated_at`) to last renewed (`heartbeat_at`), in ms.
    renewed_for: i64,
}

fn held(runtime: &tokio::runtime::Runtime, url: &str, number: i64) -> Held {
    sqlx::any::install_default_drivers();
    runtime.block_on(async {
        let pool = sqlx::AnyPool::connect(url).await.unwrap();
        let row = sqlx::query(
            "SELECT status, locked_by, attempts, heartbeat_at, updated_at FROM jobs WHERE pr_number = $1",
        )
        .bind(number)
        .fetch_one(&pool)
        .await
        .unwrap();
        let (claimed, renewed): (i64, Option<i64>) =
            (row.try_get("updated_at").unwrap(), row.try_get("heartbeat_at").unwrap());
        pool.close().await;
        Held {
            status: row.try_get("status").unwrap(),
            locked_by: row.try_get("locked_by").unwrap(),
            attempts: row.try_get("attempts").unwrap(),
            renewed_for: renewed.unwrap_or(claimed) - claimed,
        }
    })
}

fn instance_id(data_dir: &Path) -> String {
    std::fs::read_to_string(data_dir.join("instance-id")).unwrap().trim().to_string()
}

/// `fluxplan serve` (on `database`, or the embedded one) killed mid-plan and started again on
/// its data directory.
fn killed_mid_plan_and_restarted(database: Option<&str>) {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    repo.write("apps/hang", "");
    let head = push(&repo, "stuck-once", None);
    github.add_pull(REPO, 81, &head, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let marker = format!("3600.{}81{}", std::process::id(), database.is_some() as u8);
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_KUSTOMIZE", hanging_kustomize(data.path(), &marker)));
    // Ten minutes: the plan can only finish in this test if the restarted process takes the job
    // back without waiting for the lease.
    env.push(("FLUXPLAN_JOB_LEASE_SECS", "600".into()));
    env.push(("FLUXPLAN_WORKERS", "1".into()));
    // Nothing but the taken-back job may plan the head.
    env.push(("FLUXPLAN_RESYNC_SECS", "0".into()));
    if let Some(url) = database {
        env.push(("DATABASE_URL", url.to_string()));
    }
    let url = database.map(str::to_string).unwrap_or_else(|| Store::default_url(data.path()));
    let mut bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "l1", &pull_request("opened", &repo, 81, &head, &base)), 202);
    wait_for("the plan to be rendering", WAIT, || process_running(&marker));
    let id = instance_id(data.path());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let before = held(&runtime, &url, 81);
    assert_eq!((before.status.as_str(), before.attempts), ("running", 1), "{before:?}");
    assert_eq!(before.locked_by, Some(format!("{id}-0")));
    bot.kill();
    stop_hanging(data.path());
    let _restarted = Bot::start(data.path(), &env);
    assert_eq!(instance_id(data.path()), id, "the same replica");
    github.wait_until("the final status", || final_status(&github, &head).is_some());
    assert_eq!(final_status(&github, &head).unwrap()["state"], "success");
    let store = runtime.block_on(Store::connect(&url)).unwrap();
    let jobs = || runtime.block_on(store.jobs_of("github", REPO, 81)).unwrap();
    assert_eq!(jobs().len(), 1, "the job itself was taken back, not planned anew: {:?}", jobs());
    wait_for("the job to be done", WAIT, || jobs()[0].2 == "done");
    assert_eq!(jobs()[0].3, 2);
    let runs = runtime.block_on(store.runs_of("github", REPO, 81)).unwrap();
    let statuses: Vec<&str> = runs.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(statuses, ["abandoned", "done"]);
}

#[test]
fn serve_killed_mid_plan_and_restarted_takes_its_job_back_at_once() {
    killed_mid_plan_and_restarted(None);
}

#[test]
fn serve_killed_mid_plan_and_restarted_takes_its_job_back_at_once_on_postgres() {
    let database = postgres_database();
    killed_mid_plan_and_restarted(Some(&database.url));
}

#[test]
fn a_dead_replicas_job_is_taken_over_after_the_lease_and_a_live_ones_never() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    repo.write("apps/hang", "");
    let head = push(&repo, "stuck-on-one", None);
    github.add_pull(REPO, 82, &head, "change", "main", &base, &file_url(&repo));
    let database = postgres_database();
    let tools = tempfile::tempdir().unwrap();
    let marker = format!("3600.{}82", std::process::id());
    let lease_secs = 5;
    let mut env = github_env(&github);
    env.push(("DATABASE_URL", database.url.clone()));
    env.push(("FLUXPLAN_KUSTOMIZE", hanging_kustomize(tools.path(), &marker)));
    env.push(("FLUXPLAN_JOB_LEASE_SECS", lease_secs.to_string()));
    env.push(("FLUXPLAN_WORKERS", "1".into()));
    env.push(("FLUXPLAN_RESYNC_SECS", "0".into()));
    let (one_dir, two_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut one = Bot::start(one_dir.path(), &env);
    assert_eq!(one.github("pull_request", "r1", &pull_request("opened", &repo, 82, &head, &base)), 202);
    wait_for("replica one to be rendering", WAIT, || process_running(&marker));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let ones = Some(format!("{}-0", instance_id(one_dir.path())));
    // Replica two starts (taking back whatever its own dead processes held): the job is not its.
    let _two = Bot::start(two_dir.path(), &env);
    assert_ne!(instance_id(two_dir.path()), instance_id(one_dir.path()));
    let job = held(&runtime, &database.url, 82);
    assert_eq!((job.locked_by.clone(), job.attempts), (ones.clone(), 1), "{job:?}");
    // While one's planner blocks in kustomize, its heartbeat renews the lease well past its length:
    // a pass taking over expired jobs (as replica two runs them) finds none.
    let lease_ms = lease_secs * 1000;
    wait_for("the lease to be renewed past twice its length", WAIT, || {
        held(&runtime, &database.url, 82).renewed_for > 2 * lease_ms
    });
    let store = runtime.block_on(Store::connect(&database.url)).unwrap();
    let reclaimed = runtime.block_on(store.reclaim_expired(lease_ms, 5, None)).unwrap();
    assert_eq!(reclaimed.requeued, 0);
    let job = held(&runtime, &database.url, 82);
    assert_eq!((job.status.as_str(), job.locked_by.clone(), job.attempts), ("running", ones, 1), "{job:?}");
    // Replica one dies; replica two takes the job over once its lease expires and plans it.
    one.kill();
    stop_hanging(tools.path());
    github.wait_until("the final status", || final_status(&github, &head).is_some());
    assert_eq!(final_status(&github, &head).unwrap()["state"], "success");
    wait_for("the job to be done", WAIT, || held(&runtime, &database.url, 82).status == "done");
    assert_eq!(held(&runtime, &database.url, 82).attempts, 2);
    let runs = runtime.block_on(store.runs_of("github", REPO, 82)).unwrap();
    let statuses: Vec<&str> = runs.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(statuses, ["abandoned", "done"]);
}
