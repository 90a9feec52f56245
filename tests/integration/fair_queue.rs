//! Fair queues: workers are claimed round-robin across pull requests, and a pull request whose
//! plans keep running out of time waits behind the others and never holds every worker.

use crate::bot::{
    file_url, final_status, fleet, github_env, hanging_kustomize, postgres_database, pull_request, push, Bot,
    REPO,
};
use crate::fake_github::FakeGitHub;
use crate::fixture::{wait_for, WAIT};
use fluxplan::store::{Job, NewJob, Store};

/// A queued plan job of pull request `number` (never superseding or collapsing into another).
fn plan_job(number: i64, head: &str) -> NewJob {
    NewJob {
        kind: "plan".into(),
        forge: "github".into(),
        repo: REPO.into(),
        pr_number: number,
        head_sha: head.into(),
        payload: "{}".into(),
        supersedes_older_heads: false,
        dedupe_same_head: false,
        dedupe_key: None,
        author: None,
    }
}

/// The job a worker claims next (`None`: nothing it may take).
fn claim(runtime: &tokio::runtime::Runtime, store: &Store, take_slow: bool) -> Option<Job> {
    runtime.block_on(store.claim("w-0", take_slow)).unwrap()
}

/// Its pull request and head.
fn named(job: &Option<Job>) -> Option<(i64, &str)> {
    job.as_ref().map(|job| (job.pr_number, job.head_sha.as_str()))
}

fn enqueue(runtime: &tokio::runtime::Runtime, store: &Store, jobs: &[NewJob]) {
    runtime.block_on(store.enqueue(jobs)).unwrap();
}

fn finish(runtime: &tokio::runtime::Runtime, store: &Store, job: &Option<Job>) {
    let id = job.as_ref().expect("a claimed job").id;
    runtime.block_on(store.finish_job(id, "w-0", "done", 0, None)).unwrap();
}

/// A plan job of pull request `number` opened by `author`.
fn authored(number: i64, head: &str, author: &str) -> NewJob {
    NewJob { author: Some(author.into()), ..plan_job(number, head) }
}

/// One author's many pull requests do not hold every worker: with one of theirs running, another
/// author's newer plan goes first; a job without an author (a command) is nobody's.
fn claims_round_robin_across_authors(runtime: tokio::runtime::Runtime, store: Store) {
    runtime.block_on(store.migrate()).unwrap();
    enqueue(
        &runtime,
        &store,
        &[authored(1, "a1", "octocat"), authored(2, "a2", "octocat"), authored(3, "a3", "octocat")],
    );
    enqueue(&runtime, &store, &[authored(4, "b1", "hubot")]);
    assert_eq!(named(&claim(&runtime, &store, true)), Some((1, "a1")));
    assert_eq!(named(&claim(&runtime, &store, true)), Some((4, "b1")), "the other author's plan waits");
    // Near miss: both authors have one running: the oldest goes.
    assert_eq!(named(&claim(&runtime, &store, true)), Some((2, "a2")));
}

#[test]
fn claims_go_round_robin_across_authors_on_sqlite() {
    let data = tempfile::tempdir().unwrap();
    let url = Store::default_url(data.path());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::connect(&url)).unwrap();
    claims_round_robin_across_authors(runtime, store);
}

#[test]
fn claims_go_round_robin_across_authors_on_postgres() {
    let database = postgres_database();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::connect(&database.url)).unwrap();
    claims_round_robin_across_authors(runtime, store);
}

/// The claim order, on one backend.
fn claims_round_robin_and_slow_pull_requests_last(runtime: tokio::runtime::Runtime, store: Store) {
    runtime.block_on(store.migrate()).unwrap();
    // Pull request 1 queued two plans before pull request 2 queued one.
    enqueue(&runtime, &store, &[plan_job(1, "a1"), plan_job(1, "a2"), plan_job(2, "b1")]);
    let first = claim(&runtime, &store, true);
    assert_eq!(named(&first), Some((1, "a1")));
    // With 1's first plan running, 2's goes next, though 1's second is older.
    assert_eq!(named(&claim(&runtime, &store, true)), Some((2, "b1")));
    // Near miss: a pull request with nothing running is not held back: oldest first again.
    finish(&runtime, &store, &first);
    enqueue(&runtime, &store, &[plan_job(3, "c1")]);
    assert_eq!(named(&claim(&runtime, &store, true)), Some((1, "a2")));
    assert_eq!(named(&claim(&runtime, &store, true)), Some((3, "c1")));

    // Pull request 4's plan ran out of time: its next plan waits behind 5's newer one.
    runtime.block_on(store.record_plan_time("github", REPO, 4, true)).unwrap();
    enqueue(&runtime, &store, &[plan_job(4, "d1"), plan_job(5, "e1")]);
    assert_eq!(runtime.block_on(store.slow_strikes("github", REPO, 4)).unwrap(), 1);
    assert_eq!(named(&claim(&runtime, &store, true)), Some((5, "e1")));
    // A worker outside the slow lane leaves it; one in the lane takes it.
    assert_eq!(named(&claim(&runtime, &store, false)), None);
    let slow = claim(&runtime, &store, true);
    assert_eq!(named(&slow), Some((4, "d1")));
    finish(&runtime, &store, &slow);
    // Near miss: once a plan of it finishes in time, it is like any other again.
    runtime.block_on(store.record_plan_time("github", REPO, 4, false)).unwrap();
    enqueue(&runtime, &store, &[plan_job(4, "d2"), plan_job(6, "f1")]);
    assert_eq!(runtime.block_on(store.slow_strikes("github", REPO, 4)).unwrap(), 0);
    assert_eq!(named(&claim(&runtime, &store, false)), Some((4, "d2")));
}

#[test]
fn claims_go_round_robin_and_slow_pull_requests_last_on_sqlite() {
    let data = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::connect(&Store::default_url(data.path()))).unwrap();
    claims_round_robin_and_slow_pull_requests_last(runtime, store);
}

#[test]
fn claims_go_round_robin_and_slow_pull_requests_last_on_postgres() {
    let database = postgres_database();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::connect(&database.url)).unwrap();
    claims_round_robin_and_slow_pull_requests_last(runtime, store);
}

/// Two pull requests whose kustomizations hang until the plan timeout, and a one-object pull
/// request, on a bot with two workers (on `database`, or the embedded one).
fn a_quick_pull_request_is_not_stuck_behind_slow_ones(database: Option<&str>) {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    repo.write("apps/hang", "");
    let slow: [(u64, String); 2] = [(91, push(&repo, "slow-a", None)), (92, push(&repo, "slow-b", None))];
    repo.remove("apps/hang");
    let quick = push(&repo, "quick", None);
    for (number, head) in &slow {
        github.add_pull(REPO, *number, head, "change", "main", &base, &file_url(&repo));
    }
    github.add_pull(REPO, 93, &quick, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let marker = format!("3600.{}9", std::process::id());
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_KUSTOMIZE", hanging_kustomize(data.path(), &marker)));
    env.push(("FLUXPLAN_WORKERS", "2".into()));
    env.push(("FLUXPLAN_PLAN_TIMEOUT", "12".into()));
    env.push(("FLUXPLAN_RESYNC_SECS", "0".into()));
    if let Some(url) = database {
        env.push(("DATABASE_URL", url.to_string()));
    }
    let url = database.map(str::to_string).unwrap_or_else(|| Store::default_url(data.path()));
    let bot = Bot::start(data.path(), &env);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::connect(&url)).unwrap();
    let runs = |number: u64| runtime.block_on(store.runs_of("github", REPO, number as i64)).unwrap();
    let jobs = |number: u64| runtime.block_on(store.jobs_of("github", REPO, number as i64)).unwrap();

    // First plans: nothing says yet that they are slow; both run out of time.
    for (number, head) in &slow {
        let delivery = format!("first-{number}");
        assert_eq!(
            bot.github("pull_request", &delivery, &pull_request("opened", &repo, *number, head, &base)),
            202
        );
    }
    github.wait_until("both slow plans to time out", || {
        slow.iter().all(|(_, h)| final_status(&github, h).is_some())
    });
    for (_, head) in &slow {
        let status = final_status(&github, head).unwrap();
        assert!(
            status["description"].as_str().unwrap().contains("took longer than its 12s limit"),
            "{status}"
        );
    }
    wait_for("both first plans to be recorded", WAIT, || {
        slow.iter().all(|(n, _)| jobs(*n).iter().all(|(_, _, status, _)| status == "done"))
    });
    let first_round = slow.iter().flat_map(|(n, _)| runs(*n)).map(|r| r.id).max().unwrap();

    // Both are planned again (marked ready for review), then the quick one is opened.
    for (number, head) in &slow {
        let delivery = format!("again-{number}");
        let body = pull_request("ready_for_review", &repo, *number, head, &base);
        assert_eq!(bot.github("pull_request", &delivery, &body), 202);
    }
    wait_for("a slow plan to be made again", WAIT, || {
        slow.iter().flat_map(|(n, _)| runs(*n)).any(|r| r.id > first_round)
    });
    assert_eq!(bot.github("pull_request", "quick", &pull_request("opened", &repo, 93, &quick, &base)), 202);
    github.wait_until("the quick plan's final status", || final_status(&github, &quick).is_some());
    assert_eq!(final_status(&github, &quick).unwrap()["state"], "success");
    wait_for("the quick plan to be recorded", WAIT, || runs(93).iter().any(|r| r.status == "done"));
    let quick_run = runs(93).iter().find(|r| r.status == "done").unwrap().id;
    // The order of events: of the two slow plans asked for again, at most one started before the
    // quick plan; the other waited until the quick one had a worker.
    let started_before: Vec<i64> = slow
        .iter()
        .flat_map(|(n, _)| runs(*n))
        .map(|r| r.id)
        .filter(|id| *id > first_round && *id < quick_run)
        .collect();
    assert!(started_before.len() <= 1, "slow plans started before the quick one: {started_before:?}");
    // Near miss: the slow pull requests are not starved; each gets its second plan.
    wait_for("both second slow plans to be done", WAIT, || {
        slow.iter().all(|(n, _)| {
            let jobs = jobs(*n);
            jobs.len() == 2 && jobs.iter().all(|(_, _, status, _)| status == "done")
        })
    });
}

#[test]
fn a_quick_pull_request_is_planned_while_slow_ones_wait_their_turn_on_sqlite() {
    a_quick_pull_request_is_not_stuck_behind_slow_ones(None);
}

#[test]
fn a_quick_pull_request_is_planned_while_slow_ones_wait_their_turn_on_postgres() {
    let database = postgres_database();
    a_quick_pull_request_is_not_stuck_behind_slow_ones(Some(&database.url));
}
