//! The `fluxplan` check run on GitHub (issue 37, point 2): the verdict, the plan and annotations
//! on the lines that cause each alert. Against the fake GitHub, which records check runs and
//! refuses what GitHub refuses (more than 50 annotations in one request: 422).

use crate::bot::{
    file_url, final_status, fleet, github_env, hanging_kustomize, pull_request, push, Bot, REPO,
};
use crate::fake_github::FakeGitHub;
use crate::fixture::{process_running, wait_for, WAIT};
use fluxplan::forge::checks::{Annotation, AnnotationLevel, CheckOutput, ChecksMode};
use fluxplan::forge::gate::Deadlines;
use fluxplan::forge::github::{GitHub, GitHubAuth};
use fluxplan::forge::{ForgeClient, ForgeKind, RepoInfo, StatusState};
use serde_json::{json, Value};
use std::time::Duration;

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

fn client(github: &FakeGitHub, mode: ChecksMode) -> ForgeClient {
    let deadlines = Deadlines { connect: Duration::from_secs(5), total: Duration::from_secs(20) };
    let auth = GitHubAuth::Token("test-token".into());
    let client = RUNTIME.with(|runtime| {
        let _inside = runtime.enter();
        GitHub::with_deadlines(&github.url(), auth, deadlines).unwrap().with_checks(mode)
    });
    ForgeClient::GitHub(client)
}

fn repo() -> RepoInfo {
    RepoInfo {
        forge: ForgeKind::GitHub,
        full_name: REPO.into(),
        project_id: None,
        clone_url: String::new(),
        installation_id: None,
        web_url: None,
    }
}

fn annotations(count: usize) -> Vec<Annotation> {
    (0..count)
        .map(|n| Annotation {
            path: format!("apps/app-{n}/kustomization.yaml"),
            line: n as u32 + 1,
            level: if n % 2 == 0 { AnnotationLevel::Failure } else { AnnotationLevel::Warning },
            title: format!("fluxplan danger: code-{n}"),
            message: format!("message {n}"),
        })
        .collect()
}

thread_local! {
    /// One runtime per test thread: octocrab's client lives on the runtime it was made in.
    static RUNTIME: tokio::runtime::Runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    RUNTIME.with(|runtime| runtime.block_on(future))
}

/// The pending write, then the blocked verdict with `output`.
fn plan_blocked(forge: &ForgeClient, output: &CheckOutput) -> Result<(), fluxplan::forge::ForgeError> {
    block_on(async {
        forge.set_verdict(&repo(), SHA, None, StatusState::Pending, "planning…", None, None, Some(7)).await?;
        let blocked = "blocked: kustomization-empty";
        forge
            .set_verdict(&repo(), SHA, None, StatusState::Failure, blocked, None, Some(output), Some(7))
            .await
    })
}

fn annotation_lines(run: &Value) -> Vec<u64> {
    run["annotations"].as_array().unwrap().iter().map(|a| a["start_line"].as_u64().unwrap()).collect()
}

#[test]
fn more_than_fifty_annotations_arrive_in_several_requests_that_append() {
    let github = FakeGitHub::start();
    github.add_commit(REPO, SHA);
    let output =
        CheckOutput { markdown: "<!-- fluxplan -->\nthe plan".into(), annotations: annotations(121) };
    plan_blocked(&client(&github, ChecksMode::Both), &output).unwrap();
    let runs = github.check_runs(REPO, SHA);
    assert_eq!(runs.len(), 1, "the pending run is the one completed: {runs:#?}");
    let run = &runs[0];
    assert_eq!((run["status"].as_str(), run["conclusion"].as_str()), (Some("completed"), Some("failure")));
    assert_eq!(run["external_id"], "7");
    assert_eq!(run["output"]["title"], "blocked: kustomization-empty");
    assert_eq!(run["output"]["summary"], "<!-- fluxplan -->\nthe plan");
    assert_eq!(run["annotation_requests"], 3, "50 + 50 + 21");
    let mut lines = annotation_lines(run);
    lines.sort();
    assert_eq!(lines, (1..=121).collect::<Vec<u64>>(), "each annotation once");
    // Both: the status says the same.
    let states: Vec<_> = github.statuses(REPO, SHA).iter().map(|s| s["state"].clone()).collect();
    assert_eq!(states, [json!("pending"), json!("failure")]);

    // The fake refuses what GitHub refuses: 51 annotations in one request.
    let body = json!({"name": "fluxplan", "head_sha": SHA, "status": "completed", "conclusion": "success",
        "output": {"title": "t", "summary": "s", "annotations": (0..51).map(|n| json!({"path": "a", "start_line": n + 1,
        "end_line": n + 1, "annotation_level": "notice", "message": "m"})).collect::<Vec<_>>()}});
    let answer = reqwest::blocking::Client::new()
        .post(format!("{}/repos/{REPO}/check-runs", github.url()))
        .header("Authorization", "token t")
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 422);
    // Near miss: 50 pass.
    let mut fifty = body.clone();
    fifty["output"]["annotations"].as_array_mut().unwrap().pop();
    let answer = reqwest::blocking::Client::new()
        .post(format!("{}/repos/{REPO}/check-runs", github.url()))
        .header("Authorization", "token t")
        .json(&fifty)
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 201);
}

#[test]
fn a_token_without_checks_write_falls_back_to_the_status_and_asks_once() {
    let github = FakeGitHub::start();
    github.add_commit(REPO, SHA);
    github.refuse_checks(true);
    let forge = client(&github, ChecksMode::CheckRun);
    let output = CheckOutput { markdown: "plan".into(), annotations: annotations(3) };
    plan_blocked(&forge, &output).unwrap();
    let states: Vec<_> = github.statuses(REPO, SHA).iter().map(|s| s["state"].clone()).collect();
    assert_eq!(states, [json!("pending"), json!("failure")], "the status speaks instead");
    let asked = github.requests().iter().filter(|(_, path)| path.contains("check-runs")).count();
    assert_eq!(asked, 1, "refused once, not asked again");
    assert!(github.check_runs(REPO, SHA).is_empty());

    // Near miss: with checks allowed, check-run mode writes no status at all.
    let other = "89abcdef0123456789abcdef0123456789abcdef";
    github.add_commit(REPO, other);
    github.refuse_checks(false);
    let forge = client(&github, ChecksMode::CheckRun);
    block_on(forge.set_verdict(
        &repo(),
        other,
        None,
        StatusState::Success,
        "no changes",
        None,
        None,
        Some(1),
    ))
    .unwrap();
    assert!(github.statuses(REPO, other).is_empty());
    assert_eq!(github.check_runs(REPO, other)[0]["conclusion"], "success");
}

#[test]
fn a_forge_failing_mid_update_leaves_the_run_completed_on_the_next_try() {
    let github = FakeGitHub::start();
    github.add_commit(REPO, SHA);
    let forge = client(&github, ChecksMode::Both);
    let output = CheckOutput { markdown: "plan".into(), annotations: annotations(120) };
    github.fail_annotation_appends(Some(502));
    assert!(plan_blocked(&forge, &output).is_err(), "the append failed every retry");
    github.fail_annotation_appends(None);
    // The job's next attempt writes the same again.
    plan_blocked(&forge, &output).unwrap();
    let runs = github.check_runs(REPO, SHA);
    assert!(runs.iter().all(|r| r["status"] == "completed"), "a run left in progress: {runs:#?}");
    let newest = runs.last().unwrap();
    assert_eq!(newest["conclusion"], "failure");
    assert_eq!(annotation_lines(newest).len(), 120, "the newest run has every annotation, once");
}

#[test]
fn hostile_alert_text_and_odd_paths_reach_annotations_as_data_only() {
    let github = FakeGitHub::start();
    github.add_commit(REPO, SHA);
    let hostile = "<script>alert(1)</script> **bold** [x](javascript:alert(1)) @everyone ```";
    let path = "apps/we ird/ü\"<b>&amp;.yaml";
    let output = CheckOutput {
        markdown: "plan".into(),
        annotations: vec![Annotation {
            path: path.into(),
            line: 3,
            level: AnnotationLevel::Failure,
            title: format!("fluxplan danger: {hostile}"),
            message: hostile.into(),
        }],
    };
    plan_blocked(&client(&github, ChecksMode::Both), &output).unwrap();
    let run = &github.check_runs(REPO, SHA)[0];
    let annotation = &run["annotations"][0];
    assert_eq!(annotation["path"], path);
    assert_eq!(annotation["message"], hostile);
    assert_eq!(annotation["title"], format!("fluxplan danger: {hostile}"));
    assert_eq!((annotation["start_line"].as_u64(), annotation["end_line"].as_u64()), (Some(3), Some(3)));
    // The path is in the body only: every request went to fluxplan's own endpoints.
    for (_, request) in github.requests() {
        assert!(!request.contains("we%20ird") && !request.contains("we ird"), "{request}");
    }
}

#[test]
fn a_superseded_plan_completes_its_check_run() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    repo.write("apps/hang", "");
    let stuck = push(&repo, "stuck", None);
    repo.remove("apps/hang");
    let fixed = push(&repo, "fixed", None);
    github.add_pull(REPO, 31, &stuck, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let marker = format!("3600.{}3", std::process::id());
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_KUSTOMIZE", hanging_kustomize(data.path(), &marker)));
    env.push(("FLUXPLAN_GITHUB_CHECKS", "both".into()));
    let bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "c1", &pull_request("opened", &repo, 31, &stuck, &base)), 202);
    wait_for("the stuck build", WAIT, || process_running(&marker));
    let opened = github.check_runs(REPO, &stuck);
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0]["status"], "in_progress");
    github.set_head(REPO, 31, &fixed);
    assert_eq!(bot.github("pull_request", "c2", &pull_request("synchronize", &repo, 31, &fixed, &base)), 202);
    github.wait_until("the plan of the new head", || final_status(&github, &fixed).is_some());
    github.wait_until("the stuck run to be completed", || {
        github.check_runs(REPO, &stuck).iter().all(|r| r["status"] == "completed")
    });
    let stuck_runs = github.check_runs(REPO, &stuck);
    assert_eq!(stuck_runs[0]["conclusion"], "cancelled");
    // Near miss: the new head's run is its verdict, not cancelled.
    let fixed_runs = github.check_runs(REPO, &fixed);
    assert_eq!(fixed_runs.len(), 1, "{fixed_runs:#?}");
    assert_eq!(
        (fixed_runs[0]["status"].as_str(), fixed_runs[0]["conclusion"].as_str()),
        (Some("completed"), Some("success"))
    );
    let summary = fixed_runs[0]["output"]["summary"].as_str().unwrap();
    assert!(summary.starts_with("<!-- fluxplan -->"), "the plan is the summary: {summary}");
}

/// The Action's check run (`plan --github-check-run`, the Actions environment): a blocked plan
/// with three kinds of cause annotates the exact head lines of each; the run is on the pull
/// request's head from the event, not the merge commit actions/checkout makes.
#[test]
fn a_blocked_plans_annotations_point_at_the_lines_of_three_kinds_of_cause() {
    use crate::fixture::{edit, fluxplan_bin, Repo};
    let github = FakeGitHub::start();
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.kustomization("clusters/prod/other.yaml", "other", "./other", "");
    repo.write(
        "apps/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- namespace.yaml\n- a.yaml\n- web.yaml\n",
    );
    repo.write("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n");
    repo.config_map("apps/a.yaml", "a", "shop");
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.26\n";
    repo.write("apps/web.yaml", deployment);
    repo.config_map("other/settings.yaml", "settings", "default");
    repo.mkdir("empty").write("empty/README.md", "nothing to apply\n");
    repo.commit("base");
    edit(&repo, "apps/kustomization.yaml", "- namespace.yaml\n", "");
    edit(&repo, "apps/web.yaml", "app: web\n  template", "app: shop-web\n  template");
    edit(&repo, "clusters/prod/other.yaml", "path: ./other", "path: ./empty");
    let head = repo.commit("three causes");
    github.add_commit(REPO, &head);
    let event = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(event.path(), json!({"pull_request": {"head": {"sha": head}}}).to_string()).unwrap();
    let out = std::process::Command::new(fluxplan_bin())
        .args(["plan", "--no-cache", "--base", "HEAD~1", "--head", "HEAD", "--format", "json", "--repo"])
        .arg(repo.path())
        .args(["--github-check-run", "--github-api-url", &github.url()])
        .env("GITHUB_TOKEN", "ghs_actions")
        .env("GITHUB_REPOSITORY", REPO)
        .env("GITHUB_EVENT_PATH", event.path())
        .env("GITHUB_SHA", "ffffffffffffffffffffffffffffffffffffffff")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = github.check_runs(REPO, &head);
    assert_eq!(runs.len(), 1, "{}", String::from_utf8_lossy(&out.stderr));
    let run = &runs[0];
    assert_eq!((run["status"].as_str(), run["conclusion"].as_str()), (Some("completed"), Some("failure")));
    let mut found: Vec<(String, u64, String)> = run["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let (path, line) = (a["path"].as_str().unwrap(), a["start_line"].as_u64().unwrap());
            (path.to_string(), line, a["annotation_level"].as_str().unwrap().to_string())
        })
        .collect();
    found.sort();
    for expected in [
        ("apps/kustomization.yaml", 4), // the entry that took the removed namespace's place
        ("apps/web.yaml", 9),           // the changed selector (immutable)
        ("clusters/prod/other.yaml", 8), // the `path:` line that empties the Kustomization
    ] {
        assert!(
            found.iter().any(|(p, l, level)| (p.as_str(), *l) == expected && level == "failure"),
            "no failure annotation at {expected:?}: {found:?}\n{plan:#}"
        );
    }
    // Every location of the plan, and nothing else, is annotated.
    let mut from_plan: Vec<(String, u64)> = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| a["locations"].as_array().cloned().unwrap_or_default())
        .map(|l| (l["path"].as_str().unwrap().to_string(), l["line"].as_u64().unwrap()))
        .collect();
    from_plan.sort();
    from_plan.dedup();
    let mut annotated: Vec<(String, u64)> = found.iter().map(|(p, l, _)| (p.clone(), *l)).collect();
    annotated.dedup();
    assert_eq!(annotated, from_plan);
    // Near miss: nothing on the merge commit GITHUB_SHA names.
    assert!(github.check_runs(REPO, "ffffffffffffffffffffffffffffffffffffffff").is_empty());
}
