//! Catching up after a gap (issue 34, points 4 and 5): what the forge sent while `serve` was
//! down or its database was cut is planned soon after, not at the next periodic resync (set to an
//! hour here, so only the catch-up can have planned it); a forge outage longer than the retries
//! leaves an `error` status that says it will retry, and the job is retried once the forge
//! answers; lock files a killed git left in a mirror do not fail the next plan.

use crate::after_merge::ShowLog;
use crate::bot::{
    file_url, final_status, fleet, github_env, postgres_database, pull_request, push, sticky, store, Bot,
    CuttableProxy, REPO,
};
use crate::fake_github::FakeGitHub;
use crate::fixture::{wait_for, WAIT};
use fluxplan::store::Store;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The periodic resync never comes during a test: an hour.
fn without_periodic_resync(github: &FakeGitHub) -> Vec<(&'static str, String)> {
    let mut env = github_env(github);
    env.push(("FLUXPLAN_RESYNC_SECS", "3600".into()));
    env
}

#[test]
fn a_pull_request_opened_while_serve_was_down_is_planned_at_restart() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let first = push(&repo, "first", None);
    github.add_pull(REPO, 81, &first, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let env = without_periodic_resync(&github);
    let mut bot = Bot::start(data.path(), &env);
    let _log = ShowLog(data.path().join("bot.log"));
    assert_eq!(bot.github("pull_request", "s1", &pull_request("opened", &repo, 81, &first, &base)), 202);
    github.wait_until("the first plan", || final_status(&github, &first).is_some());
    // Killed once its job is recorded done (killed before, the restarted replica would take the
    // job back and plan it again, rightly).
    {
        let (runtime, store) = store(data.path());
        wait_for("the first job recorded done", WAIT, || {
            let jobs = runtime.block_on(store.jobs_of("github", REPO, 81)).unwrap();
            !jobs.is_empty() && jobs.iter().all(|(_, _, status, _)| status == "done")
        });
    }
    bot.kill();
    // While serve is down a pull request is opened: its delivery finds nobody, and GitHub does
    // not send it again.
    let missed = push(&repo, "missed", None);
    github.add_pull(REPO, 82, &missed, "change", "main", &base, &file_url(&repo));
    let _restarted = Bot::start(data.path(), &env);
    github.wait_until("the missed pull request's plan", || final_status(&github, &missed).is_some());
    assert_eq!(final_status(&github, &missed).unwrap()["state"], "success");
    let (runtime, store) = store(data.path());
    let runs = runtime.block_on(store.runs_of("github", REPO, 82)).unwrap();
    assert_eq!(runs.iter().map(|r| r.trigger.as_str()).collect::<Vec<_>>(), ["resync"]);
    // Near miss: the pull request already planned at its head is not planned again.
    let runs = runtime.block_on(store.runs_of("github", REPO, 81)).unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
}

#[test]
fn a_delivery_refused_while_the_database_was_cut_is_planned_once_it_answers() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 63, &head, "change", "main", &base, &file_url(&repo));
    let database = postgres_database();
    let proxy = CuttableProxy::start();
    let proxied = database.url.replace("127.0.0.1:5432", &format!("127.0.0.1:{}", proxy.port));
    let data = tempfile::tempdir().unwrap();
    let mut env = without_periodic_resync(&github);
    env.push(("DATABASE_URL", proxied));
    let bot = Bot::start(data.path(), &env);
    let _log = ShowLog(data.path().join("bot.log"));
    assert_eq!(bot.github("pull_request", "c1", &pull_request("opened", &repo, 63, &head, &base)), 202);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::connect(&database.url)).unwrap();
    let jobs = |number| runtime.block_on(store.jobs_of("github", REPO, number)).unwrap();
    wait_for("the first plan done", WAIT, || jobs(63).first().is_some_and(|job| job.2 == "done"));

    // Opened while the database is cut: its delivery is refused, and GitHub does not send it again.
    proxy.set_cut(true);
    github.add_pull(REPO, 64, &head, "change", "main", &base, &file_url(&repo));
    assert_eq!(bot.github("pull_request", "c2", &pull_request("opened", &repo, 64, &head, &base)), 503);
    proxy.set_cut(false);
    github.wait_until("the refused delivery's plan", || !sticky(&github, 64).is_empty());
    wait_for("the plan of 64 recorded", WAIT, || {
        runtime.block_on(store.runs_of("github", REPO, 64)).unwrap().iter().any(|r| r.status == "done")
    });
    // Near miss: the pull request planned before the cut is not planned again.
    let runs = runtime.block_on(store.runs_of("github", REPO, 63)).unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
}

#[test]
fn a_forge_outage_longer_than_the_retries_says_so_and_is_planned_when_the_forge_answers() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 85, &head, "change", "main", &base, &file_url(&repo));
    // Pull requests cannot be read, however often: a forge outage of minutes.
    github.outage_on("/pulls", 502);
    let data = tempfile::tempdir().unwrap();
    let mut env = without_periodic_resync(&github);
    env.push(("FLUXPLAN_MAX_ATTEMPTS", "2".into()));
    // The slow retry would come in an hour: only the forge answering again can wake the job.
    env.push(("FLUXPLAN_RETRY_LATER_SECS", "3600".into()));
    let bot = Bot::start(data.path(), &env);
    let _log = ShowLog(data.path().join("bot.log"));
    assert_eq!(bot.github("pull_request", "o1", &pull_request("opened", &repo, 85, &head, &base)), 202);
    let said = || {
        github.statuses(REPO, &head).into_iter().any(|s| {
            s["state"] == "error" && s["description"].as_str().is_some_and(|d| d.contains("will retry"))
        })
    };
    github.wait_until("an error status that says it will retry", said);
    let (runtime, store) = store(data.path());
    let jobs = || runtime.block_on(store.jobs_of("github", REPO, 85)).unwrap();
    wait_for("the job to leave its worker", WAIT, || jobs()[0].2 != "running");
    let jobs = jobs();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].2, "queued", "waiting to retry, not given up: {jobs:?}");
    github.end_outage();
    github.wait_until("the plan once the forge answers", || {
        final_status(&github, &head).is_some_and(|s| s["state"] == "success")
    });
    wait_for("the job done", WAIT, || {
        runtime.block_on(store.jobs_of("github", REPO, 85)).unwrap()[0].2 == "done"
    });
}

/// Near miss: a job older than `--retry-max-age-secs` is given up, as before, and says so.
#[test]
fn a_job_past_its_retry_age_is_given_up() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 87, &head, "change", "main", &base, &file_url(&repo));
    github.outage_on("/pulls", 502);
    let data = tempfile::tempdir().unwrap();
    let mut env = without_periodic_resync(&github);
    env.push(("FLUXPLAN_MAX_ATTEMPTS", "2".into()));
    env.push(("FLUXPLAN_RETRY_MAX_AGE_SECS", "0".into()));
    let bot = Bot::start(data.path(), &env);
    let _log = ShowLog(data.path().join("bot.log"));
    assert_eq!(bot.github("pull_request", "a1", &pull_request("opened", &repo, 87, &head, &base)), 202);
    github.wait_until("the failure status", || final_status(&github, &head).is_some());
    let status = final_status(&github, &head).unwrap();
    assert_eq!(status["state"], "error");
    assert!(status["description"].as_str().unwrap().starts_with("fluxplan failed"), "{status}");
    let (runtime, store) = store(data.path());
    wait_for("the job given up", WAIT, || {
        runtime.block_on(store.jobs_of("github", REPO, 87)).unwrap()[0].2 == "failed"
    });
}

/// The one mirror in the data directory.
fn the_mirror(data: &Path) -> PathBuf {
    let mirrors: Vec<PathBuf> =
        std::fs::read_dir(data.join("mirrors")).unwrap().map(|entry| entry.unwrap().path()).collect();
    assert_eq!(mirrors.len(), 1, "{mirrors:?}");
    mirrors.into_iter().next().unwrap()
}

fn plant(path: &Path, age: Duration) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::File::create(path).unwrap().set_modified(SystemTime::now() - age).unwrap();
}

#[test]
fn lock_files_a_killed_fetch_left_in_the_mirror_do_not_fail_the_next_plan() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let first = push(&repo, "first", None);
    github.add_pull(REPO, 86, &first, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let env = without_periodic_resync(&github);
    let mut bot = Bot::start(data.path(), &env);
    let _log = ShowLog(data.path().join("bot.log"));
    assert_eq!(bot.github("pull_request", "l1", &pull_request("opened", &repo, 86, &first, &base)), 202);
    github.wait_until("the first plan", || final_status(&github, &first).is_some());
    bot.kill();
    // What a fetch killed a while ago, and one killed just now, leave behind.
    let mirror = the_mirror(data.path());
    let old = Duration::from_secs(3600);
    let stale = [
        "packed-refs.lock",
        "shallow.lock",
        "config.lock",
        "objects/info/commit-graphs/commit-graph-chain.lock",
    ];
    for lock in stale {
        plant(&mirror.join(lock), old);
    }
    let just_now = mirror.join("refs/heads/change.lock");
    plant(&just_now, Duration::ZERO);
    let bot = Bot::start(data.path(), &env);
    let second = push(&repo, "second", None);
    github.set_head(REPO, 86, &second);
    assert_eq!(
        bot.github("pull_request", "l2", &pull_request("synchronize", &repo, 86, &second, &base)),
        202
    );
    github.wait_until("the plan of the new head", || final_status(&github, &second).is_some());
    let status = final_status(&github, &second).unwrap();
    assert_eq!(status["state"], "success", "{status}");
    for lock in stale {
        assert!(!mirror.join(lock).exists(), "{lock} left");
    }
    assert!(!just_now.exists());
    let (runtime, store) = store(data.path());
    let jobs = runtime.block_on(store.jobs_of("github", REPO, 86)).unwrap();
    assert_eq!(jobs.last().unwrap().3, 1, "planned at the first attempt: {jobs:?}");
}
