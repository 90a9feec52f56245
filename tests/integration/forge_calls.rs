//! How the bot calls a forge that hangs, answers slowly, rate-limits or refuses the token: every
//! call has a deadline and frees its worker, a rate limit pauses the whole client until its
//! reset, a refused token makes the bot unready, and each is counted for the operator.

use crate::bot::{
    file_url, final_status, fleet, github_env, gitlab_env, merge_request_hook, metric, pull_request, push,
    store, Bot, REPO,
};
use crate::fake_github::FakeGitHub;
use crate::fake_gitlab::FakeGitLab;
use crate::fixture::{wait_for, WAIT};
use std::path::Path;
use std::time::Duration;

/// A bot with no resync (it calls the forge only for the webhooks the test sends).
fn quiet(data: &Path, args: &[&str], mut env: Vec<(&'static str, String)>) -> Bot {
    env.push(("FLUXPLAN_RESYNC_SECS", "0".into()));
    Bot::start_with(data, args, &env)
}

fn metric_of(bot: &Bot, series: &str) -> f64 {
    metric(bot, series).unwrap_or_else(|| panic!("no /metrics page for {series}"))
}

/// (status, attempts) of the jobs of a pull request, oldest first.
fn jobs(data: &Path, forge: &str, repo: &str, number: i64) -> Vec<(String, i64)> {
    let (runtime, store) = store(data);
    let jobs = runtime.block_on(store.jobs_of(forge, repo, number)).unwrap();
    jobs.into_iter().map(|(_, _, status, attempts)| (status, attempts)).collect()
}

fn gitlab_final_state(gitlab: &FakeGitLab, project: &str, sha: &str) -> Option<String> {
    gitlab
        .statuses(project, sha)
        .into_iter()
        .rev()
        .map(|s| s["status"].as_str().unwrap_or("").to_string())
        .find(|s| s != "running" && s != "pending")
}

#[test]
fn a_hung_status_call_frees_its_only_worker_and_the_plan_posts_once_github_answers() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 31, &head, "change", "main", &base, &file_url(&repo));
    github.add_pull(REPO, 32, &head, "change", "main", &base, &file_url(&repo));
    // The first status post is never answered.
    github.hang_next_on("/statuses/", 1);
    let data = tempfile::tempdir().unwrap();
    let bot = quiet(data.path(), &["--workers", "1", "--forge-timeout-secs", "2"], github_env(&github));
    assert_eq!(bot.github("pull_request", "h31", &pull_request("opened", &repo, 31, &head, &base)), 202);
    wait_for("the status call to hang", WAIT, || github.hung() == 1);
    // The only worker is on the hung call: another pull request is planned only if it is freed.
    assert_eq!(bot.github("pull_request", "h32", &pull_request("opened", &repo, 32, &head, &base)), 202);
    wait_for("both plans posted", WAIT, || {
        [31, 32]
            .iter()
            .all(|n| github.comments(REPO, *n).iter().any(|(_, body)| body.starts_with("<!-- fluxplan -->")))
            && final_status(&github, &head).is_some()
    });
    wait_for("both jobs done", WAIT, || {
        [31, 32].iter().all(|n| jobs(data.path(), "github", REPO, *n).iter().all(|(s, _)| s == "done"))
    });
    assert_eq!(github.hung(), 1, "the hung request was never answered: the plan went on without it");
    assert_eq!(final_status(&github, &head).unwrap()["state"], "success");
    let (_, attempts) = jobs(data.path(), "github", REPO, 31).remove(0);
    assert!(attempts >= 2, "the job whose call hung was retried: {attempts}");
    let timeouts = metric_of(&bot, "fluxplan_forge_retries_total{forge=\"github\",kind=\"timeout\"}");
    assert!(timeouts >= 1.0, "{timeouts}");
}

#[test]
fn a_slow_answer_within_the_deadline_is_waited_for_and_not_sent_again() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 33, &head, "change", "main", &base, &file_url(&repo));
    github.answer_slowly_on("/statuses/", 1, Duration::from_secs(1));
    let data = tempfile::tempdir().unwrap();
    let bot = quiet(data.path(), &["--forge-timeout-secs", "60"], github_env(&github));
    assert_eq!(bot.github("pull_request", "s33", &pull_request("opened", &repo, 33, &head, &base)), 202);
    github.wait_until("the final status", || final_status(&github, &head).is_some());
    assert_eq!(final_status(&github, &head).unwrap()["state"], "success");
    let posts = github.requests().iter().filter(|(m, p)| m == "POST" && p.contains("/statuses/")).count();
    assert_eq!(posts, 2, "pending then final, each sent once");
    wait_for("the job done", WAIT, || jobs(data.path(), "github", REPO, 33)[0].0 == "done");
    assert_eq!(jobs(data.path(), "github", REPO, 33), [("done".to_string(), 1)], "done at the first attempt");
    let timeouts = metric_of(&bot, "fluxplan_forge_retries_total{forge=\"github\",kind=\"timeout\"}");
    assert_eq!(timeouts, 0.0);
}

#[test]
fn a_hung_gitlab_status_call_times_out_and_the_merge_request_still_gets_its_status() {
    let gitlab = FakeGitLab::start();
    let (repo, _base) = fleet();
    let head = push(&repo, "renamed", None);
    let project = "acme/fleet";
    gitlab.add_merge_request(project, 42, 3, &head, "change", "main", &file_url(&repo));
    // The `running` status post (POST …/statuses/SHA) is never answered.
    gitlab.hang_next_on("/statuses/", 1);
    let data = tempfile::tempdir().unwrap();
    let bot = quiet(data.path(), &["--workers", "1", "--forge-timeout-secs", "2"], gitlab_env(&gitlab.url()));
    assert_eq!(bot.gitlab("Merge Request Hook", "g3", &merge_request_hook(&repo, project, 3, &head)), 202);
    wait_for("the final status", WAIT, || gitlab_final_state(&gitlab, project, &head).is_some());
    assert_eq!(gitlab_final_state(&gitlab, project, &head).as_deref(), Some("success"));
    assert_eq!(gitlab.hung(), 1);
    let timeouts = metric_of(&bot, "fluxplan_forge_retries_total{forge=\"gitlab\",kind=\"timeout\"}");
    assert!(timeouts >= 1.0, "{timeouts}");
}

#[test]
fn a_rate_limit_pauses_every_call_to_that_forge_until_its_reset_and_no_other_forge() {
    let github = FakeGitHub::start();
    let gitlab = FakeGitLab::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 34, &head, "change", "main", &base, &file_url(&repo));
    github.add_pull(REPO, 35, &head, "change", "main", &base, &file_url(&repo));
    let project = "acme/fleet";
    gitlab.add_merge_request(project, 42, 4, &head, "change", "main", &file_url(&repo));
    // GitHub's limit resets in an hour.
    github.rate_limit_next_on("/statuses/", 1, 3600);
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.extend(gitlab_env(&gitlab.url()));
    let bot = quiet(data.path(), &[], env);
    // Both identities learned: from now on only the jobs call the forges.
    wait_for("ready", WAIT, || bot.get("/readyz").0 == 200);
    assert_eq!(bot.github("pull_request", "r34", &pull_request("opened", &repo, 34, &head, &base)), 202);
    wait_for("the first job to be put off", WAIT, || {
        jobs(data.path(), "github", REPO, 34) == [("queued".to_string(), 1)]
    });
    let sent_before = github.requests().len();
    assert_eq!(
        github.requests().last().map(|(m, p)| (m.as_str(), p.contains("/statuses/"))),
        Some(("POST", true))
    );
    // Another pull request's job does not try GitHub again: it waits for the reset too.
    assert_eq!(bot.github("pull_request", "r35", &pull_request("opened", &repo, 35, &head, &base)), 202);
    wait_for("the second job to be put off", WAIT, || {
        jobs(data.path(), "github", REPO, 35) == [("queued".to_string(), 1)]
    });
    // Near miss: GitLab is not GitHub; its merge request is planned and posted meanwhile.
    assert_eq!(bot.gitlab("Merge Request Hook", "r4", &merge_request_hook(&repo, project, 4, &head)), 202);
    wait_for("the GitLab status", WAIT, || gitlab_final_state(&gitlab, project, &head).is_some());
    assert_eq!(gitlab_final_state(&gitlab, project, &head).as_deref(), Some("success"));
    assert_eq!(github.requests().len(), sent_before, "nothing was sent to GitHub before its reset");
    assert_eq!(metric_of(&bot, "fluxplan_forge_rate_limits_total{forge=\"github\"}"), 1.0);
    assert_eq!(metric_of(&bot, "fluxplan_forge_held_calls_total{forge=\"github\"}"), 1.0);
    assert_eq!(metric_of(&bot, "fluxplan_forge_rate_limits_total{forge=\"gitlab\"}"), 0.0);
    assert_eq!(metric_of(&bot, "fluxplan_forge_held_calls_total{forge=\"gitlab\"}"), 0.0);
}

#[test]
fn a_forge_refusing_the_token_makes_the_bot_unready_until_it_takes_it_again() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    for number in 36..=38 {
        github.add_pull(REPO, number, &head, "change", "main", &base, &file_url(&repo));
    }
    let data = tempfile::tempdir().unwrap();
    // Unready at the first refusal, so that the test waits on states, not on time.
    let bot = quiet(data.path(), &["--forge-unready-after-secs", "0"], github_env(&github));
    wait_for("ready", WAIT, || bot.get("/readyz").0 == 200);
    // Near miss: a 403 about one repository is no refused token.
    github.fail_next_on("/pulls/36", 403, 1);
    assert_eq!(bot.github("pull_request", "t36", &pull_request("opened", &repo, 36, &head, &base)), 202);
    wait_for("the refused job", WAIT, || {
        jobs(data.path(), "github", REPO, 36) == [("failed".to_string(), 1)]
    });
    assert_eq!(bot.get("/readyz").0, 200);
    // The token is revoked.
    github.refuse_token(true);
    assert_eq!(bot.github("pull_request", "t37", &pull_request("opened", &repo, 37, &head, &base)), 202);
    wait_for("the job of a refused token", WAIT, || {
        jobs(data.path(), "github", REPO, 37) == [("failed".to_string(), 1)]
    });
    let (status, why) = bot.get("/readyz");
    assert_eq!(status, 503, "{why}");
    assert!(why.contains("GitHub has refused the token") && why.contains("FLUXPLAN_GITHUB_TOKEN"), "{why}");
    assert!(
        metric_of(&bot, "fluxplan_forge_api_errors_total{forge=\"github\",kind=\"unauthorized\"}") >= 1.0
    );
    // A new token: the next call GitHub accepts makes the bot ready again.
    github.refuse_token(false);
    assert_eq!(bot.github("pull_request", "t38", &pull_request("opened", &repo, 38, &head, &base)), 202);
    wait_for("the plan with the new token", WAIT, || {
        jobs(data.path(), "github", REPO, 38) == [("done".to_string(), 1)]
    });
    assert_eq!(bot.get("/readyz").0, 200);
}
