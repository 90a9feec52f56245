//! A pull request's commit status and sticky comment show what its newest job says. A job that
//! waited on the forge while a newer push was planned and posted writes nothing after it; a
//! write that was already on its way when a newer push came is followed by the newest one; a
//! superseded job that fails posts no error; and no run is left `running` (issue 34, points 1
//! and 6). The same holds for an approval's status and a merge queue group's status. GitHub on
//! the embedded SQLite, GitLab on PostgreSQL.

use crate::bot::{
    comment, file_url, final_status, fleet, github_env, gitlab_env, hanging_kustomize, jobs_done,
    merge_request_hook, postgres_database, pull_request, push, store, Bot, REPO,
};
use crate::fake_github::FakeGitHub;
use crate::fake_gitlab::FakeGitLab;
use crate::fixture::{process_running, wait_for, Repo, WAIT};
use fluxplan::store::{RunRow, Store};
use serde_json::{json, Value};
use std::path::Path;

/// The states of fluxplan's statuses on `sha`, in posting order.
fn states(github: &FakeGitHub, sha: &str) -> Vec<String> {
    github
        .statuses(REPO, sha)
        .iter()
        .filter(|s| s["context"] == "fluxplan")
        .map(|s| s["state"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The runs of a pull request as the bot's embedded database holds them.
fn runs(data: &Path, number: i64) -> Vec<RunRow> {
    let (runtime, store) = store(data);
    runtime.block_on(store.runs_of("github", REPO, number)).unwrap()
}

/// True once the pull request has `count` runs and none is `running`.
fn runs_closed(runs: &[RunRow], count: usize) -> bool {
    runs.len() == count && runs.iter().all(|r| r.status != "running")
}

/// Two workers: one waits on the forge while the other plans the newer push.
fn two_workers(github: &FakeGitHub) -> Vec<(&'static str, String)> {
    let mut env = github_env(github);
    env.push(("FLUXPLAN_WORKERS", "2".into()));
    env
}

#[test]
fn a_plan_that_waited_on_the_forge_while_a_newer_push_was_posted_writes_nothing() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let first = push(&repo, "first", None);
    let second = push(&repo, "second", None);
    let other = push(&repo, "other", None);
    github.add_pull(REPO, 81, &first, "change", "main", &base, &file_url(&repo));
    github.add_pull(REPO, 82, &other, "change", "main", &base, &file_url(&repo));
    // The first job's look at the pull request is answered late (a rate limit waited out).
    github.hold_next_on("/pulls/81", 1);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &two_workers(&github));
    assert_eq!(bot.github("pull_request", "w1", &pull_request("opened", &repo, 81, &first, &base)), 202);
    wait_for("the first job to wait on the forge", WAIT, || github.held() == 1);
    github.set_head(REPO, 81, &second);
    assert_eq!(
        bot.github("pull_request", "w2", &pull_request("synchronize", &repo, 81, &second, &base)),
        202
    );
    github.wait_until("the newer job's final status", || final_status(&github, &second).is_some());
    github.release_held();
    // The late job wakes up, reads the current head and is told a newer job speaks for it.
    wait_for("both runs to be closed", WAIT, || runs_closed(&runs(data.path(), 81), 2));
    assert_eq!(states(&github, &second), ["pending", "success"], "the late job wrote after the newer one");
    assert_eq!(states(&github, &first), Vec::<String>::new());
    // The late job's run starts after the newer one's has ended.
    let statuses: Vec<String> = runs(data.path(), 81).into_iter().map(|r| r.status).collect();
    assert_eq!(statuses, ["done", "superseded"]);
    let sticky: Vec<_> =
        github.comments(REPO, 81).into_iter().filter(|(_, b)| b.starts_with("<!-- fluxplan -->")).collect();
    assert_eq!(sticky.len(), 1);
    assert!(sticky[0].1.contains(&second[..8]), "the comment shows the newest head: {}", sticky[0].1);

    // Near miss: a job answered late with no newer push still posts its plan.
    github.hold_next_on("/pulls/82", 1);
    assert_eq!(bot.github("pull_request", "w3", &pull_request("opened", &repo, 82, &other, &base)), 202);
    wait_for("the job to wait on the forge", WAIT, || github.held() == 1);
    github.release_held();
    github.wait_until("its final status", || final_status(&github, &other).is_some());
    assert_eq!(states(&github, &other), ["pending", "success"]);
    wait_for("its run to be closed", WAIT, || runs_closed(&runs(data.path(), 82), 1));
}

#[test]
fn a_status_on_its_way_when_a_newer_push_comes_is_followed_by_the_newest() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let first = push(&repo, "first", None);
    let second = push(&repo, "second", None);
    // The push came before its delivery: the first job plans the current head, and its
    // `pending` is slow to land, so the newer job plans and posts meanwhile.
    github.add_pull(REPO, 83, &second, "change", "main", &base, &file_url(&repo));
    github.hold_next_on(&format!("/statuses/{second}"), 1);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &two_workers(&github));
    assert_eq!(bot.github("pull_request", "r1", &pull_request("opened", &repo, 83, &first, &base)), 202);
    wait_for("the first job's pending status to be on its way", WAIT, || github.held() == 1);
    assert_eq!(
        bot.github("pull_request", "r2", &pull_request("synchronize", &repo, 83, &second, &base)),
        202
    );
    github
        .wait_until("the newer job's final status", || states(&github, &second).contains(&"success".into()));
    github.release_held();
    github.wait_until("the late pending to land", || states(&github, &second).len() >= 3);
    wait_for("both runs to be closed", WAIT, || runs_closed(&runs(data.path(), 83), 2));
    let states = states(&github, &second);
    assert_eq!(
        states.last().map(String::as_str),
        Some("success"),
        "an older job's pending is last: {states:?}"
    );
}

#[test]
fn a_superseded_plan_that_fails_posts_no_error() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let first = push(&repo, "first", None);
    let second = push(&repo, "second", None);
    github.add_pull(REPO, 84, &first, "change", "main", &base, &file_url(&repo));
    github.hold_next_on("/pulls/84", 1);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &two_workers(&github));
    assert_eq!(bot.github("pull_request", "f1", &pull_request("opened", &repo, 84, &first, &base)), 202);
    wait_for("the first job to wait on the forge", WAIT, || github.held() == 1);
    github.set_head(REPO, 84, &second);
    assert_eq!(
        bot.github("pull_request", "f2", &pull_request("synchronize", &repo, 84, &second, &base)),
        202
    );
    github.wait_until("the newer job's final status", || final_status(&github, &second).is_some());
    // The late answer is a failure the job cannot retry.
    github.fail_next_on("/pulls/84", 404, 1);
    github.release_held();
    let silenced = || {
        std::fs::read_to_string(data.path().join("bot.log"))
            .unwrap_or_default()
            .contains("superseded: its failure is not posted")
    };
    wait_for("the failed job to post or keep silent", WAIT, || {
        silenced() || !states(&github, &first).is_empty()
    });
    assert_eq!(states(&github, &first), Vec::<String>::new(), "a superseded job posted its failure");
    assert_eq!(states(&github, &second), ["pending", "success"]);
    // Near miss: a job that is still the newest says why it failed.
    github.fail_next_on("/pulls/84", 404, 1);
    assert_eq!(bot.github("pull_request", "f3", &pull_request("reopened", &repo, 84, &second, &base)), 202);
    github.wait_until("the failure status", || states(&github, &second).len() == 3);
    assert_eq!(states(&github, &second)[2], "error");
}

#[test]
fn gitlab_a_plan_that_waited_while_a_newer_push_was_posted_writes_nothing() {
    let gitlab = FakeGitLab::start();
    let (repo, _base) = fleet();
    let first = push(&repo, "first", None);
    let second = push(&repo, "second", None);
    let project = "acme/fleet";
    gitlab.add_merge_request(project, 42, 1, &first, "change", "main", &file_url(&repo));
    let database = postgres_database();
    let mut env = gitlab_env(&gitlab.url());
    env.push(("DATABASE_URL", database.url.clone()));
    env.push(("FLUXPLAN_WORKERS", "2".into()));
    gitlab.hold_next_on("/merge_requests/1", 1);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &env);
    let deliver = |uuid: &str, head: &str| {
        let mut body = merge_request_hook(&repo, project, 1, head);
        body["object_attributes"]["action"] = json!("open");
        if head != first {
            body["object_attributes"]["action"] = json!("update");
            body["object_attributes"]["oldrev"] = json!(first);
        }
        bot.post(
            "/webhooks/gitlab",
            body.to_string(),
            &[
                ("x-gitlab-event", "Merge Request Hook".to_string()),
                ("x-gitlab-token", "gitlab-secret".to_string()),
                ("x-gitlab-event-uuid", uuid.to_string()),
            ],
        )
    };
    assert_eq!(deliver("g1", &first), 202);
    wait_for("the first job to wait on GitLab", WAIT, || gitlab.held() == 1);
    gitlab.set_head(project, 1, &second);
    assert_eq!(deliver("g2", &second), 202);
    let states = |sha: &str| -> Vec<String> {
        gitlab
            .statuses(project, sha)
            .iter()
            .map(|s: &Value| s["status"].as_str().unwrap_or("").to_string())
            .collect()
    };
    wait_for("the newer job's final status", WAIT, || states(&second).contains(&"success".to_string()));
    gitlab.release_held();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::connect(&database.url)).unwrap();
    let runs = || runtime.block_on(store.runs_of("gitlab", project, 1)).unwrap();
    wait_for("both runs to be closed", WAIT, || runs_closed(&runs(), 2));
    assert_eq!(states(&second), ["running", "success"], "the late job wrote after the newer one");
    assert_eq!(states(&first), Vec::<String>::new());
}

#[test]
fn a_run_whose_job_was_superseded_while_its_worker_was_down_is_closed() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    repo.write("apps/hang", "");
    let stuck = push(&repo, "stuck", None);
    repo.remove("apps/hang");
    let fixed = push(&repo, "fixed", None);
    github.add_pull(REPO, 85, &stuck, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let marker = format!("3600.{}85", std::process::id());
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_KUSTOMIZE", hanging_kustomize(data.path(), &marker)));
    // Long enough that the newer push comes while the dead worker's job still looks held.
    env.push(("FLUXPLAN_JOB_LEASE_SECS", "10".into()));
    let mut bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "d1", &pull_request("opened", &repo, 85, &stuck, &base)), 202);
    wait_for("the stuck build", WAIT, || process_running(&marker));
    bot.kill();
    github.set_head(REPO, 85, &fixed);
    let bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "d2", &pull_request("synchronize", &repo, 85, &fixed, &base)), 202);
    github.wait_until("the plan of the new head", || final_status(&github, &fixed).is_some());
    // The restarted replica takes its dead process's job back at once (a run of its own, which
    // the newer push then supersedes), or the newer push supersedes it first: two runs or three.
    wait_for("no run left running", WAIT, || {
        let runs = runs(data.path(), 85);
        runs.len() >= 2 && runs.iter().all(|r| r.status != "running")
    });
    let statuses: Vec<String> = runs(data.path(), 85).into_iter().map(|r| r.status).collect();
    assert!(["superseded", "abandoned"].contains(&statuses[0].as_str()), "{statuses:?}");
    assert!(statuses[1..statuses.len() - 1].iter().all(|s| s == "superseded"), "{statuses:?}");
    assert_eq!(statuses.last().map(String::as_str), Some("done"), "{statuses:?}");
}

/// A merge queue's `checks_requested` for the group of pull request `number` landing `head` on
/// `base`.
fn merge_group(repo: &Repo, base: &str, head: &str, number: u64) -> Value {
    let mut body: Value =
        serde_json::from_str(include_str!("../fixtures/github-webhooks/push.json")).unwrap();
    body["action"] = json!("checks_requested");
    body["repository"]["full_name"] = json!(REPO);
    body["repository"]["clone_url"] = json!(file_url(repo));
    body["merge_group"] = json!({
        "head_sha": head, "head_ref": format!("refs/heads/gh-readonly-queue/main/pr-{number}-{base}"),
        "base_sha": base, "base_ref": "refs/heads/main",
    });
    body
}

/// Descriptions of fluxplan's statuses on `sha`, in posting order.
fn descriptions(github: &FakeGitHub, sha: &str) -> Vec<String> {
    github
        .statuses(REPO, sha)
        .iter()
        .filter(|s| s["context"] == "fluxplan")
        .map(|s| s["description"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn an_approval_that_waited_on_the_forge_while_a_newer_plan_was_posted_writes_nothing() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "gone", Some("./empty"));
    let other = push(&repo, "gone-too", Some("./empty"));
    github.add_pull(REPO, 86, &head, "change", "main", &base, &file_url(&repo));
    github.add_pull(REPO, 87, &other, "change", "main", &base, &file_url(&repo));
    github.set_permission(REPO, "maintainer", "maintain");
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &two_workers(&github));
    for (number, sha, uuid) in [(86, &head, "a1"), (87, &other, "a2")] {
        assert_eq!(bot.github("pull_request", uuid, &pull_request("opened", &repo, number, sha, &base)), 202);
        github.wait_until("the blocked status", || final_status(&github, sha).is_some());
        // The run and its job are recorded after the status is set: wait for them too.
        wait_for("the plan job", WAIT, || jobs_done(data.path(), "github", REPO, number as i64, "plan") == 1);
        assert_eq!(states(&github, sha), ["pending", "failure"]);
    }
    let approve = |number: u64, uuid: &str| {
        let id = github.add_issue_comment(REPO, number, "maintainer", "/fluxplan approve");
        // The approval is recorded; its 👍 (the call before its status) is answered late.
        github.hold_next_on(&format!("/issues/comments/{id}/reactions"), 1);
        let body = comment(number, "maintainer", id, "/fluxplan approve", &repo);
        assert_eq!(bot.github("issue_comment", uuid, &body), 202);
        wait_for("the approval to wait on the forge", WAIT, || github.held() == 1);
    };
    let replied = |number: u64| {
        github.comments(REPO, number).iter().any(|(_, b)| b.starts_with("Approved by @maintainer"))
    };
    approve(86, "a3");
    // A plan queued after the command speaks for the pull request: it shows the approval.
    assert_eq!(bot.github("pull_request", "a4", &pull_request("reopened", &repo, 86, &head, &base)), 202);
    github.wait_until("the newer plan's final status", || states(&github, &head).len() == 4);
    github.release_held();
    wait_for("the approval's job", WAIT, || jobs_done(data.path(), "github", REPO, 86, "command") == 1);
    assert_eq!(states(&github, &head), ["pending", "failure", "pending", "success"]);
    let shown = descriptions(&github, &head);
    assert!(shown[3].starts_with("approved by maintainer; "), "the newer plan shows the approval: {shown:?}");
    assert!(!replied(86), "a superseded approval replied: {:?}", github.comments(REPO, 86));

    // Near miss: an approval answered late with no newer plan posts its status and its reply.
    approve(87, "a5");
    github.release_held();
    github.wait_until("the approval's reply", || replied(87));
    assert_eq!(states(&github, &other), ["pending", "failure", "success"]);
    let shown = descriptions(&github, &other);
    assert!(shown[2].starts_with("approved by maintainer ("), "{shown:?}");
}

#[test]
fn a_merge_group_plan_that_waited_while_a_newer_one_was_posted_writes_nothing() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    // Blocked groups: their plan asks the forge about the queued pull request's approval.
    let group = push(&repo, "gone", Some("./empty"));
    let other = push(&repo, "gone-too", Some("./empty"));
    github.add_commit(REPO, &group);
    github.add_commit(REPO, &other);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &two_workers(&github));
    let checks_requested = |uuid: &str, head: &str, number: u64| {
        assert_eq!(bot.github("merge_group", uuid, &merge_group(&repo, &base, head, number)), 202);
    };
    github.hold_next_on("/pulls/88", 1);
    checks_requested("g1", &group, 88);
    wait_for("the first group job to wait on the forge", WAIT, || github.held() == 1);
    // The checks are requested again: a newer job of the same group plans and posts.
    checks_requested("g2", &group, 88);
    github.wait_until("the newer job's final status", || final_status(&github, &group).is_some());
    github.release_held();
    wait_for("both runs to be closed", WAIT, || runs_closed(&runs(data.path(), 88), 2));
    assert_eq!(
        states(&github, &group),
        ["pending", "pending", "failure"],
        "the late job wrote after the newer one"
    );
    let statuses: Vec<String> = runs(data.path(), 88).into_iter().map(|r| r.status).collect();
    assert_eq!(statuses, ["superseded", "done"]);

    // Near miss: a group job answered late with no newer one still posts its status.
    github.hold_next_on("/pulls/89", 1);
    checks_requested("g3", &other, 89);
    wait_for("the group job to wait on the forge", WAIT, || github.held() == 1);
    github.release_held();
    github.wait_until("its final status", || final_status(&github, &other).is_some());
    assert_eq!(states(&github, &other), ["pending", "failure"]);
    wait_for("its run to be closed", WAIT, || runs_closed(&runs(data.path(), 89), 1));
    assert_eq!(runs(data.path(), 89)[0].status, "done");
}

#[test]
fn a_merge_group_job_retried_after_a_newer_one_posted_leaves_no_pending_status() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    // Blocked groups: their plan asks the forge about the queued pull request's approval.
    let group = push(&repo, "gone", Some("./empty"));
    let other = push(&repo, "gone-too", Some("./empty"));
    github.add_commit(REPO, &group);
    github.add_commit(REPO, &other);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &two_workers(&github));
    let checks_requested = |uuid: &str, head: &str, number: u64| {
        assert_eq!(bot.github("merge_group", uuid, &merge_group(&repo, &base, head, number)), 202);
    };
    let group_jobs_done = |number: i64| jobs_done(data.path(), "github", REPO, number, "merge-group");
    // Every answer to the first job fails (its retries inside the call too): the job is retried
    // later, after a newer job of the same group has posted.
    let failures = 5;
    github.hold_next_on("/pulls/90", 1);
    checks_requested("r1", &group, 90);
    wait_for("the first group job to wait on the forge", WAIT, || github.held() == 1);
    checks_requested("r2", &group, 90);
    github.wait_until("the newer job's final status", || final_status(&github, &group).is_some());
    github.fail_next_on("/pulls/90", 500, failures);
    github.release_held();
    wait_for("both group jobs to be done", WAIT, || group_jobs_done(90) == 2);
    assert_eq!(
        states(&github, &group),
        ["pending", "pending", "failure"],
        "the retried job's pending came after the newer job's final status"
    );
    wait_for("both runs to be closed", WAIT, || runs_closed(&runs(data.path(), 90), 2));

    // Near miss: a retried group job with no newer one posts its pending and its status again.
    github.fail_next_on("/pulls/91", 500, failures);
    checks_requested("r3", &other, 91);
    wait_for("the group job to be done", WAIT, || group_jobs_done(91) == 1);
    assert_eq!(states(&github, &other), ["pending", "pending", "failure"]);
    wait_for("its runs to be closed", WAIT, || runs_closed(&runs(data.path(), 91), 2));
    let statuses: Vec<String> = runs(data.path(), 91).into_iter().map(|r| r.status).collect();
    assert_eq!(statuses, ["failed", "done"]);
}
