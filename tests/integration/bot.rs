//! The bot end to end: the real `fluxplan serve` process, real git repositories, real PostgreSQL
//! and SQLite, and stateful fake GitHub and GitLab API servers.

use crate::fake_github::FakeGitHub;
use crate::fake_github::{BOT_LOGIN, PR_AUTHOR};
use crate::fake_gitlab::{FakeGitLab, BOT_USERNAME, BOT_USER_ID};
use crate::fixture::{
    cache_entries, fluxplan_bin, process_running, stand_in_kustomize, wait_for, Repo, WAIT,
};
use fluxplan::forge::webhook::github_signature;
use fluxplan::store::Store;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) const SECRET: &str = "webhook-secret";
pub(crate) const REPO: &str = "acme/fleet";

/// A running `fluxplan serve`.
pub(crate) struct Bot {
    pub(crate) child: Child,
    pub(crate) url: String,
    /// Where `/metrics` is served apart (`--metrics-listen`), when it is.
    pub(crate) metrics_url: Option<String>,
}

impl Bot {
    pub(crate) fn start(data_dir: &Path, env: &[(&str, String)]) -> Bot {
        Bot::start_with(data_dir, &[], env)
    }

    /// Like `start`, with more arguments for `serve`.
    pub(crate) fn start_with(data_dir: &Path, args: &[&str], env: &[(&str, String)]) -> Bot {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(data_dir.join("bot.log")).unwrap();
        let mut child = Command::new(fluxplan_bin())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("FLUXPLAN_DATA_DIR", data_dir)
            .env("FLUXPLAN_LOG", "info,kube_client=off")
            .env_remove("DATABASE_URL")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The metrics listener, when there is one, is announced first.
                if let Some(url) = line.strip_prefix("fluxplan metrics listening on ") {
                    let _ = tx.send((true, url.to_string()));
                } else if let Some(url) = line.strip_prefix("fluxplan listening on ") {
                    let _ = tx.send((false, url.to_string()));
                }
            }
        });
        let mut metrics_url = None;
        let url = loop {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok((true, url)) => metrics_url = Some(url),
                Ok((false, url)) => break url,
                Err(_) => panic!(
                    "the bot did not start:\n{}",
                    std::fs::read_to_string(data_dir.join("bot.log")).unwrap_or_default()
                ),
            }
        };
        Bot { child, url, metrics_url }
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn get(&self, path: &str) -> (u16, String) {
        let response = reqwest::blocking::get(format!("{}{path}", self.url)).unwrap();
        (response.status().as_u16(), response.text().unwrap())
    }

    pub(crate) fn github(&self, event: &str, delivery: &str, body: &Value) -> u16 {
        let body = body.to_string();
        self.post(
            "/webhooks/github",
            body.clone(),
            &[
                ("x-github-event", event.to_string()),
                ("x-github-delivery", delivery.to_string()),
                ("x-hub-signature-256", github_signature(SECRET, body.as_bytes())),
            ],
        )
    }

    /// A GitLab webhook of `event` with the right token and event id `uuid`.
    pub(crate) fn gitlab(&self, event: &str, uuid: &str, body: &Value) -> u16 {
        self.post(
            "/webhooks/gitlab",
            body.to_string(),
            &[
                ("x-gitlab-event", event.to_string()),
                ("x-gitlab-token", "gitlab-secret".to_string()),
                ("x-gitlab-event-uuid", uuid.to_string()),
            ],
        )
    }

    pub(crate) fn post(&self, path: &str, body: String, headers: &[(&str, String)]) -> u16 {
        let mut request = reqwest::blocking::Client::new().post(format!("{}{path}", self.url)).body(body);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        request.send().unwrap().status().as_u16()
    }
}

impl Drop for Bot {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A fleet whose `apps` Kustomization renders one ConfigMap, on `main`; `change` branches off it.
pub(crate) fn fleet() -> (Repo, String) {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/settings.yaml", "settings", "default");
    repo.mkdir("empty").write("empty/.keep", "");
    let base = repo.commit("base");
    repo.git(&["checkout", "-q", "-b", "change"]);
    (repo, base)
}

/// A commit on the `change` branch: `apps` renders `content` (or its path moves to `path`).
pub(crate) fn push(repo: &Repo, name: &str, path: Option<&str>) -> String {
    repo.config_map("apps/settings.yaml", name, "default");
    if let Some(path) = path {
        let apps = std::fs::read_to_string(repo.path().join("clusters/prod/apps.yaml")).unwrap();
        repo.write("clusters/prod/apps.yaml", &apps.replace("path: ./apps", &format!("path: {path}")));
    }
    repo.commit(name)
}

pub(crate) fn file_url(repo: &Repo) -> String {
    format!("file://{}", repo.path().display())
}

/// A real pull_request webhook body, pointed at the fixture repository.
pub(crate) fn pull_request(action: &str, repo: &Repo, number: u64, head: &str, base: &str) -> Value {
    let mut body: Value =
        serde_json::from_str(include_str!("../fixtures/github-webhooks/pull_request-opened.json")).unwrap();
    body["action"] = json!(action);
    body["number"] = json!(number);
    body["repository"]["full_name"] = json!(REPO);
    body["repository"]["clone_url"] = json!(file_url(repo));
    let pull = &mut body["pull_request"];
    pull["number"] = json!(number);
    pull["head"]["sha"] = json!(head);
    pull["head"]["ref"] = json!("change");
    pull["head"]["repo"]["full_name"] = json!(REPO);
    pull["base"]["ref"] = json!("main");
    pull["base"]["sha"] = json!(base);
    pull["base"]["repo"]["full_name"] = json!(REPO);
    body
}

/// A real issue_comment webhook body for a pull request comment.
pub(crate) fn comment(number: u64, user: &str, id: u64, text: &str, repo: &Repo) -> Value {
    let mut body: Value =
        serde_json::from_str(include_str!("../fixtures/github-webhooks/issue_comment-created.json")).unwrap();
    body["repository"]["full_name"] = json!(REPO);
    body["repository"]["clone_url"] = json!(file_url(repo));
    body["issue"]["number"] = json!(number);
    body["issue"]["pull_request"] =
        json!({"url": format!("https://api.github.com/repos/{REPO}/pulls/{number}")});
    body["comment"]["id"] = json!(id);
    body["comment"]["body"] = json!(text);
    body["comment"]["user"]["login"] = json!(user);
    body["comment"]["user"]["type"] = json!("User");
    body["comment"]["created_at"] = json!(now_rfc3339());
    body
}

/// Now, as the forge writes timestamps.
fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    chrono::DateTime::from_timestamp(now.as_secs() as i64, now.subsec_nanos()).unwrap().to_rfc3339()
}

pub(crate) fn gitlab_env(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("FLUXPLAN_GITLAB_URL", url.to_string()),
        ("FLUXPLAN_GITLAB_TOKEN", "glpat-test".into()),
        ("FLUXPLAN_GITLAB_WEBHOOK_TOKEN", "gitlab-secret".into()),
    ]
}

/// A real Merge Request Hook body for merge request `iid` of project 42 at `head`.
pub(crate) fn merge_request_hook(repo: &Repo, project: &str, iid: u64, head: &str) -> Value {
    let mut body: Value =
        serde_json::from_str(include_str!("../fixtures/gitlab-webhooks/merge_request.json")).unwrap();
    body["project"]["id"] = json!(42);
    body["project"]["path_with_namespace"] = json!(project);
    body["project"]["git_http_url"] = json!(file_url(repo));
    body["object_attributes"]["iid"] = json!(iid);
    body["object_attributes"]["last_commit"]["id"] = json!(head);
    body["object_attributes"]["target_branch"] = json!("main");
    body["object_attributes"]["source_project_id"] = json!(42);
    body["object_attributes"]["target_project_id"] = json!(42);
    body
}

pub(crate) fn github_env(github: &FakeGitHub) -> Vec<(&'static str, String)> {
    vec![
        ("FLUXPLAN_GITHUB_API_URL", github.url()),
        ("FLUXPLAN_GITHUB_TOKEN", "test-token".into()),
        ("FLUXPLAN_GITHUB_WEBHOOK_SECRET", format!("old-secret,{SECRET}")),
        ("FLUXPLAN_PUBLIC_URL", "http://fluxplan.example".into()),
    ]
}

/// The last status fluxplan set on a commit, once it is final (not pending).
pub(crate) fn final_status(github: &FakeGitHub, sha: &str) -> Option<Value> {
    github
        .statuses(REPO, sha)
        .into_iter()
        .rev()
        .find(|s| s["context"] == "fluxplan")
        .filter(|s| s["state"] != "pending")
}

pub(crate) fn sticky(github: &FakeGitHub, number: u64) -> Vec<(u64, String)> {
    github
        .comments(REPO, number)
        .into_iter()
        .filter(|(_, body)| body.starts_with("<!-- fluxplan -->"))
        .collect()
}

pub(crate) fn store(data_dir: &Path) -> (tokio::runtime::Runtime, Store) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::connect(&Store::default_url(data_dir))).unwrap();
    (runtime, store)
}

#[test]
fn signed_pull_request_webhook_posts_a_sticky_comment_and_a_status() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 1, &head, "change", "main", &base, &file_url(&repo));
    // Someone else's comment that starts with the marker is never edited.
    let impostor = github.add_issue_comment(REPO, 1, "mallory", "<!-- fluxplan -->\nall fine, merge away");
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));

    let body = pull_request("opened", &repo, 1, &head, &base);
    assert_eq!(bot.github("pull_request", "delivery-1", &body), 202);
    github.wait_until("the final status", || final_status(&github, &head).is_some());
    let statuses = github.statuses(REPO, &head);
    assert_eq!(statuses[0]["state"], "pending");
    let last = final_status(&github, &head).unwrap();
    assert_eq!(last["state"], "success");
    assert_eq!(last["description"], "1 to create, 0 to update, 1 to delete");
    assert!(last["target_url"].as_str().unwrap().starts_with("http://fluxplan.example/runs/"));
    let comments: Vec<_> = sticky(&github, 1).into_iter().filter(|(id, _)| *id != impostor).collect();
    assert_eq!(comments.len(), 1);
    assert!(comments[0].1.contains("fluxplan: changes"), "{}", comments[0].1);
    assert!(comments[0].1.contains("[Full plan and run history](http://fluxplan.example/runs/"));
    let untouched = github.comments(REPO, 1).into_iter().find(|(id, _)| *id == impostor).unwrap();
    assert_eq!(untouched.1, "<!-- fluxplan -->\nall fine, merge away");

    // A redelivered webhook is not planned twice.
    assert_eq!(bot.github("pull_request", "delivery-1", &body), 200);
    // Unknown events and pings are acknowledged and ignored.
    assert_eq!(bot.github("ping", "delivery-ping", &json!({"zen": "hi"})), 200);
    assert_eq!(bot.github("deployment", "delivery-x", &json!({})), 200);
    // Deliveries are queued before they are answered: nothing more is queued now.
    let (runtime, store) = store(data.path());
    let jobs = runtime.block_on(store.jobs_of("github", REPO, 1)).unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    wait_for("the job to be done", WAIT, || {
        runtime.block_on(store.jobs_of("github", REPO, 1)).unwrap()[0].2 == "done"
    });
    let runs = runtime.block_on(store.runs_of("github", REPO, 1)).unwrap();
    assert_eq!(runs.len(), 1, "planned once");
    let run = &runs[0];
    assert_eq!((run.status.as_str(), run.verdict.as_deref()), ("done", Some("changes")));
    assert_eq!(run.head_sha, head);
    assert_eq!(run.base_sha.as_deref(), Some(base.as_str()));
    assert!(run.plan_json.as_deref().unwrap().contains("\"verdict\": \"changes\""));
    assert!(run.timings.as_deref().unwrap().contains("plan_ms"));

    // Operations pages.
    assert_eq!(bot.get("/healthz"), (200, "ok".to_string()));
    assert_eq!(bot.get("/readyz").0, 200);
    let (_, metrics) = bot.get("/metrics");
    assert!(
        metrics.contains("fluxplan_webhooks_received_total{event=\"pull_request\",forge=\"github\"} 2"),
        "{metrics}"
    );
    assert!(metrics.contains("fluxplan_jobs{status=\"done\"} 1"), "{metrics}");
    assert!(metrics.contains("fluxplan_plan_duration_seconds_count"), "{metrics}");
    let build_info = metrics.lines().find(|l| l.starts_with("fluxplan_build_info{")).expect("build info");
    assert!(
        build_info.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION")))
            && build_info.contains("kustomize=\"kustomize")
            && build_info.ends_with(" 1"),
        "{build_info}"
    );
    // The run page opens with the token its links carry, and only with it.
    let token = run.page_token.clone().expect("every run has a page token");
    assert!(last["target_url"].as_str().unwrap().ends_with(&format!("/runs/{}?token={token}", run.id)));
    let (status, page) = bot.get(&format!("/runs/{}?token={token}", run.id));
    assert_eq!(status, 200);
    // The plan as posted, without its link to this very page.
    assert!(!page.contains("Full plan") && page.contains("fluxplan: changes"), "{page}");
    assert_eq!(bot.get(&format!("/runs/{}/plan.json?token={token}", run.id)).0, 200);
    for guess in [
        format!("/runs/{}", run.id),
        format!("/runs/{}?token=0", run.id),
        format!("/runs/{}/plan.json", run.id),
    ] {
        assert_eq!(bot.get(&guess).0, 404, "{guess}");
    }
    assert_eq!(bot.get("/runs/999999").0, 404);
    // The index is off unless a credential is configured.
    assert_eq!(bot.get("/runs").0, 404);
}

#[test]
fn the_run_index_needs_its_credential() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 51, &head, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_RUNS_TOKEN", "index-secret".into()));
    let bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "i1", &pull_request("opened", &repo, 51, &head, &base)), 202);
    github.wait_until("the plan", || final_status(&github, &head).is_some());
    // The run and its job are recorded after the status is set: wait for them too.
    wait_for("the plan job", WAIT, || jobs_done(data.path(), "github", REPO, 51, "plan") == 1);
    assert_eq!(bot.get("/runs").0, 401);
    assert_eq!(bot.get("/runs?token=wrong").0, 401);
    let (status, page) = bot.get("/runs?token=index-secret");
    assert_eq!(status, 200);
    let (runtime, store) = store(data.path());
    let run = runtime.block_on(store.runs_of("github", REPO, 51)).unwrap().remove(0);
    let link = format!("/runs/{}?token={}", run.id, run.page_token.unwrap());
    assert!(page.contains(&link), "{page}");
    assert_eq!(bot.get(&link).0, 200);
    assert_eq!(bot.get(&format!("/runs/{}?token=index-secret", run.id)).0, 200);
}

#[test]
fn forged_or_unsigned_webhooks_are_refused_and_nothing_is_queued() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    let body = pull_request("opened", &repo, 1, &head, &base).to_string();
    let forged = github_signature("not-the-secret", body.as_bytes());
    let headers = |signature: Option<String>| {
        let mut headers =
            vec![("x-github-event", "pull_request".to_string()), ("x-github-delivery", "d".to_string())];
        if let Some(signature) = signature {
            headers.push(("x-hub-signature-256", signature));
        }
        headers
    };
    assert_eq!(bot.post("/webhooks/github", body.clone(), &headers(Some(forged))), 401);
    assert_eq!(bot.post("/webhooks/github", body.clone(), &headers(None)), 401);
    assert_eq!(
        bot.post("/webhooks/gitlab", body.clone(), &[("x-gitlab-event", "Merge Request Hook".into())]),
        401
    );
    // Signed, but not a payload fluxplan can read.
    let garbage = "{\"action\":\"opened\"}".to_string();
    let signed = github_signature(SECRET, garbage.as_bytes());
    assert_eq!(bot.post("/webhooks/github", garbage, &headers(Some(signed))), 400);
    // Bodies are size-limited: refused on their announced length, before a byte is read (a
    // client still sending would see its connection closed, so only the headers are sent).
    let mut huge = raw_connection(
        &bot,
        "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: 27262976\r\n\r\n",
    );
    assert!(read_until_closed(&mut huge).starts_with("HTTP/1.1 413"));
    let (runtime, store) = store(data.path());
    assert_eq!(runtime.block_on(store.delivery_count()).unwrap(), 0);
    assert!(runtime.block_on(store.job_counts()).unwrap().is_empty());
    let (_, metrics) = bot.get("/metrics");
    assert!(
        metrics.contains("fluxplan_webhooks_refused_total{forge=\"github\",reason=\"signature\"} 2"),
        "{metrics}"
    );
    // Only the bot's own question at start (who am I?) reached GitHub.
    let requests: Vec<_> = github.requests().into_iter().filter(|(_, path)| path != "/user").collect();
    assert!(requests.is_empty(), "a refused webhook reached GitHub: {requests:?}");
}

#[test]
fn a_new_push_supersedes_the_old_plan_and_updates_the_same_comment() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let first = push(&repo, "first", None);
    let second = push(&repo, "second", None);
    github.add_pull(REPO, 7, &second, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    // A replica without workers only queues.
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_WORKERS", "0".into()));
    let mut queue_only = Bot::start(data.path(), &env);
    assert_eq!(
        queue_only.github("pull_request", "d1", &pull_request("opened", &repo, 7, &first, &base)),
        202
    );
    assert_eq!(
        queue_only.github("pull_request", "d2", &pull_request("synchronize", &repo, 7, &second, &base)),
        202
    );
    queue_only.kill();
    {
        let (runtime, store) = store(data.path());
        let jobs = runtime.block_on(store.jobs_of("github", REPO, 7)).unwrap();
        let statuses: Vec<(&str, &str)> =
            jobs.iter().map(|(_, sha, status, _)| (sha.as_str(), status.as_str())).collect();
        assert_eq!(statuses, vec![(first.as_str(), "superseded"), (second.as_str(), "queued")]);
    }
    // Workers plan only the newest head.
    let bot = Bot::start(data.path(), &github_env(&github));
    github.wait_until("the plan of the second push", || final_status(&github, &second).is_some());
    assert!(github.statuses(REPO, &first).is_empty(), "the superseded head was never planned");
    let comments = sticky(&github, 7);
    assert_eq!(comments.len(), 1);
    let comment_id = comments[0].0;
    // A third push: the same comment is updated in place.
    let third = push(&repo, "third", None);
    github.set_head(REPO, 7, &third);
    assert_eq!(bot.github("pull_request", "d3", &pull_request("synchronize", &repo, 7, &third, &base)), 202);
    github.wait_until("the plan of the third push", || final_status(&github, &third).is_some());
    let comments = sticky(&github, 7);
    assert_eq!(comments.len(), 1, "one sticky comment");
    assert_eq!(comments[0].0, comment_id, "updated in place");
    assert!(comments[0].1.contains(&third[..8]), "{}", comments[0].1);
}

#[test]
fn blocked_plans_fail_the_status_until_someone_with_write_access_approves() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "gone", Some("./empty"));
    github.add_pull(REPO, 3, &head, "change", "main", &base, &file_url(&repo));
    github.set_permission(REPO, "reader", "read");
    github.set_permission(REPO, "maintainer", "maintain");
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    assert_eq!(bot.github("pull_request", "p1", &pull_request("opened", &repo, 3, &head, &base)), 202);
    github.wait_until("the blocked status", || final_status(&github, &head).is_some());
    // The run and its job are recorded after the status is set: wait for them too.
    wait_for("the plan job", WAIT, || jobs_done(data.path(), "github", REPO, 3, "plan") == 1);
    let status = final_status(&github, &head).unwrap();
    assert_eq!(status["state"], "failure");
    assert!(status["description"].as_str().unwrap().starts_with("blocked: "), "{status}");
    // The comment ends with the way out: who may approve, and the policy keys that rate it.
    let sticky =
        github.comments(REPO, 3).into_iter().map(|(_, body)| body).find(|b| b.contains("<!-- fluxplan -->"));
    let sticky = sticky.expect("the plan comment");
    let way_out = &sticky[sticky.find("### How to unblock").expect("a way out")..];
    assert!(
        way_out.contains(
            "someone with write, maintain or admin access comments `/fluxplan approve` on this pull request"
        ),
        "{way_out}"
    );
    assert!(way_out.contains(&format!("this plan of {}", &head[..8])), "{way_out}");
    assert!(way_out.contains("`alerts: {empty-render: warning}`"), "{way_out}");

    // Someone without write permission cannot approve.
    let refused_id = github.add_issue_comment(REPO, 3, "reader", "/fluxplan approve");
    assert_eq!(
        bot.github("issue_comment", "c1", &comment(3, "reader", refused_id, "/fluxplan approve", &repo)),
        202
    );
    // The reaction and the reply are two requests: wait for both.
    github.wait_until("the refusal", || {
        github.reactions(REPO, refused_id).contains(&"-1".to_string())
            && github
                .comments(REPO, 3)
                .iter()
                .any(|(_, b)| b.contains("@reader") && b.contains("needs write"))
    });
    assert_eq!(final_status(&github, &head).unwrap()["state"], "failure");

    // A maintainer can, for this head commit.
    let approve_id = github.add_issue_comment(REPO, 3, "maintainer", "/fluxplan approve");
    assert_eq!(
        bot.github("issue_comment", "c2", &comment(3, "maintainer", approve_id, "/fluxplan approve", &repo)),
        202
    );
    github
        .wait_until("the approval", || final_status(&github, &head).is_some_and(|s| s["state"] == "success"));
    assert!(final_status(&github, &head).unwrap()["description"]
        .as_str()
        .unwrap()
        .contains("approved by maintainer"));
    assert!(github.reactions(REPO, approve_id).contains(&"+1".to_string()));

    // A new push needs a new approval.
    let again = push(&repo, "still-gone", Some("./empty"));
    github.set_head(REPO, 3, &again);
    assert_eq!(bot.github("pull_request", "p2", &pull_request("synchronize", &repo, 3, &again, &base)), 202);
    github.wait_until("the new plan", || final_status(&github, &again).is_some());
    assert_eq!(final_status(&github, &again).unwrap()["state"], "failure");

    // Help, for anyone.
    let help_id = github.add_issue_comment(REPO, 3, "passerby", "/fluxplan help");
    assert_eq!(
        bot.github("issue_comment", "c3", &comment(3, "passerby", help_id, "/fluxplan help", &repo)),
        202
    );
    github.wait_until("the help", || {
        github.comments(REPO, 3).iter().any(|(_, b)| b.contains("/fluxplan approve`: accept"))
    });

    // Refused again within the reply window: a 👎, but no second reply to spam the pull request.
    let replies =
        |github: &FakeGitHub| github.comments(REPO, 3).iter().filter(|(_, b)| b.contains("@reader")).count();
    let commands_before = jobs_done(data.path(), "github", REPO, 3, "command");
    let again_id = github.add_issue_comment(REPO, 3, "reader", "/fluxplan approve");
    assert_eq!(
        bot.github("issue_comment", "c4", &comment(3, "reader", again_id, "/fluxplan approve", &repo)),
        202
    );
    // Its command job done, the 👎 is there and no reply will follow.
    wait_for("the second refusal", WAIT, || {
        jobs_done(data.path(), "github", REPO, 3, "command") > commands_before
            && github.reactions(REPO, again_id).contains(&"-1".to_string())
    });
    assert_eq!(replies(&github), 1, "a second reply within the window");
    // Asking for a plan needs write access too.
    let plan_id = github.add_issue_comment(REPO, 3, "passerby", "/fluxplan plan");
    assert_eq!(
        bot.github("issue_comment", "c5", &comment(3, "passerby", plan_id, "/fluxplan plan", &repo)),
        202
    );
    github.wait_until("the plan refusal", || github.reactions(REPO, plan_id).contains(&"-1".to_string()));
}

#[test]
fn github_errors_and_rate_limits_are_retried() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 4, &head, "change", "main", &base, &file_url(&repo));
    github.fail_next_on("/statuses/", 500, 1);
    github.rate_limit_next_on("/statuses/", 1, 1);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    assert_eq!(bot.github("pull_request", "r1", &pull_request("opened", &repo, 4, &head, &base)), 202);
    github.wait_until("the final status", || final_status(&github, &head).is_some());
    assert_eq!(final_status(&github, &head).unwrap()["state"], "success");
    let status_posts =
        github.requests().iter().filter(|(m, p)| m == "POST" && p.contains("/statuses/")).count();
    assert!(status_posts >= 4, "the failed and rate-limited posts were retried: {status_posts}");
    assert_eq!(sticky(&github, 4).len(), 1);
}

#[test]
fn a_job_cut_off_by_a_crash_is_completed_after_restart() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 5, &head, "change", "main", &base, &file_url(&repo));
    // The first status waits 5 s on a rate limit: the job is mid-flight when the server dies.
    github.rate_limit_next_on("/statuses/", 1, 5);
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_JOB_LEASE_SECS", "2".into()));
    let mut bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "k1", &pull_request("opened", &repo, 5, &head, &base)), 202);
    github.wait_until("the job to start", || github.requests().iter().any(|(_, p)| p.contains("/statuses/")));
    bot.kill();
    {
        let (runtime, store) = store(data.path());
        let jobs = runtime.block_on(store.jobs_of("github", REPO, 5)).unwrap();
        assert_eq!(jobs[0].2, "running", "killed mid-job");
    }
    let _restarted = Bot::start(data.path(), &env);
    let (runtime, store) = store(data.path());
    let job = || runtime.block_on(store.jobs_of("github", REPO, 5)).unwrap().remove(0);
    wait_for("the job to complete after restart", WAIT, || job().2 == "done");
    assert_eq!(job().3, 2, "taken over once its lease expired");
    assert_eq!(final_status(&github, &head).unwrap()["state"], "success");
    // The run the dead worker left behind is marked, not left `running` forever.
    let runs = runtime.block_on(store.runs_of("github", REPO, 5)).unwrap();
    let statuses: Vec<&str> = runs.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(statuses, ["abandoned", "done"]);
}

/// A database of the local PostgreSQL server for one test, dropped when the test ends.
pub(crate) struct PostgresDatabase {
    admin: String,
    name: String,
    pub(crate) url: String,
}

impl Drop for PostgresDatabase {
    fn drop(&mut self) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            if let Ok(pool) = sqlx::AnyPool::connect(&self.admin).await {
                let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
                let _ = sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&pool).await;
            }
        });
    }
}

pub(crate) fn postgres_database() -> PostgresDatabase {
    let admin = std::env::var("FLUXPLAN_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let name = format!(
        "fluxplan_test_{}_{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() % 1_000_000 + rand_suffix()
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(&admin)
            .await
            .expect("PostgreSQL on 127.0.0.1:5432 (scripts/test.sh starts it)");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&pool).await.unwrap();
    });
    let (base, _) = admin.rsplit_once('/').unwrap();
    let url = format!("{base}/{name}");
    PostgresDatabase { admin, name, url }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() % 1_000_000_000
}

#[test]
fn two_replicas_on_one_postgres_plan_each_job_exactly_once() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    let database = postgres_database();
    let pulls: Vec<u64> = (10..16).collect();
    for number in &pulls {
        github.add_pull(REPO, *number, &head, "change", "main", &base, &file_url(&repo));
    }
    let mut env = github_env(&github);
    env.push(("DATABASE_URL", database.url.clone()));
    env.push(("FLUXPLAN_WORKERS", "3".into()));
    // The deliveries alone: the pull requests are open before the replicas start, so a catch-up
    // pass at start would rightly plan them too, racing the deliveries.
    env.push(("FLUXPLAN_RESYNC_SECS", "0".into()));
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let bots = [Bot::start(one.path(), &env), Bot::start(two.path(), &env)];
    for (i, number) in pulls.iter().enumerate() {
        let bot = &bots[i % 2];
        assert_eq!(
            bot.github(
                "pull_request",
                &format!("pg-{number}"),
                &pull_request("opened", &repo, *number, &head, &base)
            ),
            202
        );
    }
    github.wait_until("every pull request planned", || {
        pulls
            .iter()
            .all(|n| github.comments(REPO, *n).iter().any(|(_, b)| b.starts_with("<!-- fluxplan -->")))
    });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::connect(&database.url)).unwrap();
    wait_for("every job to be done", WAIT, || {
        pulls.iter().all(|n| {
            let jobs = runtime.block_on(store.jobs_of("github", REPO, *n as i64)).unwrap();
            jobs.iter().all(|(_, _, status, _)| status == "done")
        })
    });
    for number in &pulls {
        let runs = runtime.block_on(store.runs_of("github", REPO, *number as i64)).unwrap();
        assert_eq!(runs.len(), 1, "pull request {number} planned {} times", runs.len());
        assert_eq!(sticky(&github, *number).len(), 1);
    }
    let planned_by: std::collections::BTreeSet<String> = pulls
        .iter()
        .flat_map(|n| runtime.block_on(store.jobs_of("github", REPO, *n as i64)).unwrap())
        .map(|(_, _, status, _)| status)
        .collect();
    assert_eq!(planned_by, ["done".to_string()].into());
}

#[test]
fn gitlab_merge_requests_get_a_note_and_a_commit_status() {
    let gitlab = FakeGitLab::start();
    let (repo, _base) = fleet();
    let head = push(&repo, "renamed", None);
    let project = "acme/fleet";
    gitlab.add_merge_request(project, 42, 1, &head, "change", "main", &file_url(&repo));
    gitlab.set_access_level(project, 7, "dev", 30);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &gitlab_env(&gitlab.url()));
    let body = merge_request_hook(&repo, project, 1, &head);
    let post = |token: &str, event: &str, body: &Value| {
        bot.post(
            "/webhooks/gitlab",
            body.to_string(),
            &[
                ("x-gitlab-event", event.to_string()),
                ("x-gitlab-token", token.to_string()),
                ("x-gitlab-event-uuid", format!("{event}-{}", body["object_attributes"]["id"])),
            ],
        )
    };
    assert_eq!(post("wrong", "Merge Request Hook", &body), 401);
    assert_eq!(post("gitlab-secret", "Merge Request Hook", &body), 202);
    let final_state = || {
        gitlab
            .statuses(project, &head)
            .into_iter()
            .rev()
            .map(|s| s["status"].as_str().or(s["state"].as_str()).unwrap_or("").to_string())
            .find(|s| s != "running" && s != "pending")
    };
    wait_for("the commit status", WAIT, || final_state().is_some());
    assert_eq!(final_state().as_deref(), Some("success"));
    let refs: Vec<Value> = gitlab.statuses(project, &head).iter().map(|s| s["ref"].clone()).collect();
    assert!(refs.iter().all(|r| r == "change"), "statuses name the merge request's branch: {refs:?}");
    // A retried plan posts `running` again, which GitLab's state machine refuses: it still ends
    // with a plan and a status.
    gitlab.fail_next_on("/notes", 500, 5);
    let mut retarget = body.clone();
    retarget["object_attributes"]["action"] = json!("update");
    retarget["object_attributes"]["id"] = json!(777);
    retarget["changes"] = json!({"target_branch": {"previous": "release", "current": "main"}});
    assert_eq!(post("gitlab-secret", "Merge Request Hook", &retarget), 202, "a new target branch re-plans");
    wait_for("the retried plan", WAIT, || jobs_done(data.path(), "gitlab", project, 1, "plan") == 2);
    assert_eq!(final_state().as_deref(), Some("success"));
    let running = gitlab.statuses(project, &head).iter().filter(|s| s["status"] == "running").count();
    assert_eq!(running, 2, "one `running` per plan: the retry did not post it again");
    let notes = gitlab.notes(project, 1);
    assert_eq!(notes.iter().filter(|(_, b)| b.starts_with("<!-- fluxplan -->")).count(), 1);
    // GitLab's words, everywhere in the note: merge request, MR.
    let plan_note = &notes.iter().find(|(_, b)| b.starts_with("<!-- fluxplan -->")).unwrap().1;
    assert!(plan_note.contains("caused by this MR"), "{plan_note}");
    assert!(!plan_note.contains("pull request") && !plan_note.contains(" PR"), "{plan_note}");
    // A note asking for help.
    let note_id = gitlab.add_note(project, 1, 7, "dev", "/fluxplan help");
    let mut note: Value =
        serde_json::from_str(include_str!("../fixtures/gitlab-webhooks/note_merge_request.json")).unwrap();
    note["project"]["id"] = json!(42);
    note["project"]["path_with_namespace"] = json!(project);
    note["project"]["git_http_url"] = json!(file_url(&repo));
    note["merge_request"]["iid"] = json!(1);
    note["object_attributes"]["id"] = json!(note_id);
    note["object_attributes"]["note"] = json!("/fluxplan help");
    note["user"]["id"] = json!(7);
    note["user"]["username"] = json!("dev");
    assert_eq!(post("gitlab-secret", "Note Hook", &note), 202);
    wait_for("the help note", WAIT, || {
        gitlab.notes(project, 1).iter().any(|(_, b)| b.contains("/fluxplan approve`"))
    });
    let helps = || gitlab.notes(project, 1).iter().filter(|(_, b)| b.contains("/fluxplan approve`")).count();
    // The bot's own note (GitLab's payload says nothing of bots) is never a command...
    let own_id = gitlab.add_note(project, 1, BOT_USER_ID, BOT_USERNAME, "/fluxplan help");
    note["object_attributes"]["id"] = json!(own_id);
    note["user"]["id"] = json!(BOT_USER_ID);
    note["user"]["username"] = json!(BOT_USERNAME);
    assert_eq!(post("gitlab-secret", "Note Hook", &note), 202);
    wait_for("the command job", WAIT, || jobs_done(data.path(), "gitlab", project, 1, "command") == 2);
    assert_eq!(helps(), 1, "the bot answered its own note");
    // ...and neither is an edited note.
    let edited_id = gitlab.add_note(project, 1, 7, "dev", "/fluxplan help");
    note["object_attributes"]["id"] = json!(edited_id);
    note["object_attributes"]["action"] = json!("update");
    note["user"]["id"] = json!(7);
    note["user"]["username"] = json!("dev");
    assert_eq!(post("gitlab-secret", "Note Hook", &note), 200);
    assert_eq!(jobs_done(data.path(), "gitlab", project, 1, "command"), 2, "an edited note queued a command");
}

/// How many jobs of `kind` of a pull request are done.
pub(crate) fn jobs_done(data_dir: &Path, forge: &str, repo: &str, number: i64, kind: &str) -> usize {
    let (runtime, store) = store(data_dir);
    let jobs = runtime.block_on(store.jobs_of(forge, repo, number)).unwrap();
    jobs.iter().filter(|(k, _, status, _)| k == kind && status == "done").count()
}

#[test]
fn the_bots_own_comments_and_commands_in_code_are_never_obeyed() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "gone", Some("./empty"));
    github.add_pull(REPO, 31, &head, "change", "main", &base, &file_url(&repo));
    github.set_permission(REPO, BOT_LOGIN, "admin");
    github.set_permission(REPO, "maintainer", "maintain");
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    assert_eq!(bot.github("pull_request", "o1", &pull_request("opened", &repo, 31, &head, &base)), 202);
    github.wait_until("the blocked status", || final_status(&github, &head).is_some());
    // The run and its job are recorded after the status is set: wait for them too.
    wait_for("the plan job", WAIT, || jobs_done(data.path(), "github", REPO, 31, "plan") == 1);
    // In token mode the bot is a machine user: its comments come back typed "User". One that
    // echoes a command (as an error block quoting a hostile path would) must not approve.
    let echoed = "<!-- fluxplan -->\n```\nerror: path ./x\n```\n/fluxplan approve\n";
    let own_id = github.add_issue_comment(REPO, 31, BOT_LOGIN, echoed);
    assert_eq!(bot.github("issue_comment", "o2", &comment(31, BOT_LOGIN, own_id, echoed, &repo)), 202);
    wait_for("the command job", WAIT, || jobs_done(data.path(), "github", REPO, 31, "command") == 1);
    assert_eq!(final_status(&github, &head).unwrap()["state"], "failure", "the bot approved itself");
    assert!(github.reactions(REPO, own_id).is_empty());
    // A command inside a code block, quoted, or in an edited comment is not queued at all.
    for (action, text) in [
        ("created", "```\n/fluxplan approve\n```"),
        ("created", "> /fluxplan approve"),
        ("edited", "/fluxplan approve"),
    ] {
        let id = github.add_issue_comment(REPO, 31, "maintainer", text);
        let mut body = comment(31, "maintainer", id, text, &repo);
        body["action"] = json!(action);
        assert_eq!(bot.github("issue_comment", &format!("o-{id}"), &body), 200, "{action}: {text}");
    }
    let (runtime, store) = store(data.path());
    let jobs = runtime.block_on(store.jobs_of("github", REPO, 31)).unwrap();
    assert_eq!(jobs.iter().filter(|(kind, ..)| kind == "command").count(), 1, "{jobs:?}");
    assert_eq!(final_status(&github, &head).unwrap()["state"], "failure");
}

#[test]
fn shuffled_deliveries_end_with_every_pull_request_showing_its_latest_head() {
    const PULLS: u64 = 200;
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let older = push(&repo, "older", None);
    let latest = push(&repo, "latest", None);
    for n in 1..=PULLS {
        github.add_pull(REPO, 100 + n, &latest, "change", "main", &base, &file_url(&repo));
    }
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    // Half the pull requests get the late delivery for the older head last.
    for n in 1..=PULLS {
        let number = 100 + n;
        let opened = pull_request("opened", &repo, number, &older, &base);
        let pushed = pull_request("synchronize", &repo, number, &latest, &base);
        let deliveries = if n % 2 == 0 {
            [("opened", opened), ("pushed", pushed)]
        } else {
            [("pushed", pushed), ("opened", opened)]
        };
        for (what, body) in deliveries {
            assert_eq!(bot.github("pull_request", &format!("{what}-{number}"), &body), 202);
        }
    }
    let showing_latest = |number: u64| sticky(&github, number).iter().any(|(_, b)| b.contains(&latest[..8]));
    wait_for("every pull request to show its latest head", WAIT * 3, || {
        (1..=PULLS).all(|n| showing_latest(100 + n))
    });
    assert!(github.statuses(REPO, &older).is_empty(), "a status was set on the older head");
    for n in 1..=PULLS {
        let comments = sticky(&github, 100 + n);
        assert_eq!(comments.len(), 1, "#{}", 100 + n);
        assert!(!comments[0].1.contains(&older[..8]), "#{} shows the older head", 100 + n);
    }
}

#[test]
fn pull_requests_from_forks_are_not_planned_by_default() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    let mut body = pull_request("opened", &repo, 8, &head, &base);
    body["pull_request"]["head"]["repo"]["full_name"] = json!("stranger/fleet");
    assert_eq!(bot.github("pull_request", "fork-1", &body), 200);
    let (runtime, store) = store(data.path());
    assert!(runtime.block_on(store.jobs_of("github", REPO, 8)).unwrap().is_empty());
}

#[test]
fn a_push_to_the_base_branch_replans_its_open_pull_requests() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 9, &head, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    let mut body: Value =
        serde_json::from_str(include_str!("../fixtures/github-webhooks/push.json")).unwrap();
    body["ref"] = json!("refs/heads/main");
    body["after"] = json!(base);
    body["deleted"] = json!(false);
    body["repository"]["full_name"] = json!(REPO);
    body["repository"]["clone_url"] = json!(file_url(&repo));
    assert_eq!(bot.github("push", "push-1", &body), 202);
    github.wait_until("the re-plan", || final_status(&github, &head).is_some());
    let (runtime, store) = store(data.path());
    let runs = runtime.block_on(store.runs_of("github", REPO, 9)).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].trigger, "base-push");
}

#[test]
fn shutdown_releases_a_job_that_does_not_finish_in_time() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 11, &head, "change", "main", &base, &file_url(&repo));
    github.rate_limit_next_on("/statuses/", 1, 8);
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_SHUTDOWN_GRACE_SECS", "1".into()));
    let mut bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "s1", &pull_request("opened", &repo, 11, &head, &base)), 202);
    github.wait_until("the job to start", || github.requests().iter().any(|(_, p)| p.contains("/statuses/")));
    let terminated = Command::new("kill").args(["-TERM", &bot.child.id().to_string()]).status().unwrap();
    assert!(terminated.success());
    let exit = bot.child.wait().unwrap();
    assert!(exit.success(), "graceful exit: {exit:?}");
    assert!(final_status(&github, &head).is_none(), "the job was waited for instead of released");
    let (runtime, store) = store(data.path());
    let jobs = runtime.block_on(store.jobs_of("github", REPO, 11)).unwrap();
    assert_eq!(jobs[0].2, "queued", "released for another worker");
}

#[test]
fn github_app_installations_authenticate_with_their_own_token() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 12, &head, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let key = data.path().join("app.pem");
    let generated = Command::new("openssl")
        .args(["genrsa", "-traditional", "-out"])
        .arg(&key)
        .arg("2048")
        .output()
        .unwrap();
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let env = vec![
        ("FLUXPLAN_GITHUB_API_URL", github.url()),
        ("FLUXPLAN_GITHUB_APP_ID", "4242".to_string()),
        ("FLUXPLAN_GITHUB_APP_PRIVATE_KEY", std::fs::read_to_string(&key).unwrap()),
        ("FLUXPLAN_GITHUB_WEBHOOK_SECRET", SECRET.to_string()),
    ];
    let bot = Bot::start(data.path(), &env);
    // The fixture's installation id is 1.
    assert_eq!(bot.github("pull_request", "app-1", &pull_request("opened", &repo, 12, &head, &base)), 202);
    github.wait_until("the final status", || final_status(&github, &head).is_some());
    let auth = github.authorizations();
    let token_request =
        auth.iter().find(|(path, _)| path.starts_with("/app/installations/1/access_tokens")).unwrap();
    assert!(
        token_request.1.starts_with("Bearer ey"),
        "the App authenticates with a JWT: {}",
        token_request.1
    );
    let status_request = auth.iter().find(|(path, _)| path.contains("/statuses/")).unwrap();
    assert!(status_request.1.contains("ghs_installation_1"), "{}", status_request.1);
}

#[test]
fn long_plans_are_split_and_surplus_parts_deleted_when_the_plan_shrinks() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    // Many objects change: the plan is longer than the (lowered) comment limit.
    let many: String = (0..120)
        .map(|i| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: many-{i:03}\n  namespace: default\ndata:\n  k: v\n---\n"))
        .collect();
    repo.write("apps/many.yaml", &many);
    let long = repo.commit("many");
    github.add_pull(REPO, 13, &long, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_COMMENT_LIMIT", "3000".into()));
    let bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "long", &pull_request("opened", &repo, 13, &long, &base)), 202);
    github.wait_until("the long plan", || final_status(&github, &long).is_some());
    let parts = sticky(&github, 13);
    assert!(parts.len() > 2, "{} parts", parts.len());
    for (i, (_, body)) in parts.iter().enumerate() {
        assert!(body.chars().count() <= 3000, "part {i} is {} long", body.chars().count());
        assert!(body.contains(&format!("part {} of {}", i + 1, parts.len())), "{body}");
    }
    // A shorter plan: one comment, the first part updated, the others deleted.
    repo.remove("apps/many.yaml");
    let short = repo.commit("fewer");
    github.set_head(REPO, 13, &short);
    assert_eq!(
        bot.github("pull_request", "short", &pull_request("synchronize", &repo, 13, &short, &base)),
        202
    );
    github.wait_until("the short plan", || final_status(&github, &short).is_some());
    let remaining = sticky(&github, 13);
    assert_eq!(remaining.len(), 1, "surplus parts deleted");
    assert_eq!(remaining[0].0, parts[0].0, "the first part is updated in place");
}

#[test]
fn a_plan_that_cannot_be_made_sets_an_error_status() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 14, &head, "change", "no-such-branch", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    let mut body = pull_request("opened", &repo, 14, &head, &base);
    body["pull_request"]["base"]["ref"] = json!("no-such-branch");
    assert_eq!(bot.github("pull_request", "e1", &body), 202);
    github.wait_until("the error status", || final_status(&github, &head).is_some());
    let status = final_status(&github, &head).unwrap();
    assert_eq!(status["state"], "error");
    assert!(status["description"].as_str().unwrap().contains("could not plan"), "{status}");
    let comment = &sticky(&github, 14)[0].1;
    assert!(comment.contains("could not plan") && comment.contains("no-such-branch"), "{comment}");
}

/// A stand-in kustomize that hangs on a path holding a file named `hang` and otherwise runs
/// the real one (`kubectl kustomize`); `marker` names its sleep in the process table.
pub(crate) fn hanging_kustomize(dir: &Path, marker: &str) -> String {
    let kubectl = fluxplan::sandbox::resolve_program("kubectl").expect("kubectl is needed for this test");
    let build = format!(
        "if [ -e \"$2/hang\" ]; then exec sleep {marker}; fi\nshift\nexec {} kustomize \"$@\"",
        kubectl.display()
    );
    stand_in_kustomize(dir, &build).to_str().unwrap().to_string()
}

#[test]
fn a_superseded_plan_is_stopped_and_its_kustomize_killed() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    repo.write("apps/hang", "");
    let stuck = push(&repo, "stuck", None);
    repo.remove("apps/hang");
    let fixed = push(&repo, "fixed", None);
    github.add_pull(REPO, 21, &stuck, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let marker = format!("3600.{}1", std::process::id());
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_KUSTOMIZE", hanging_kustomize(data.path(), &marker)));
    let bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "h1", &pull_request("opened", &repo, 21, &stuck, &base)), 202);
    wait_for("the stuck build", WAIT, || process_running(&marker));
    github.set_head(REPO, 21, &fixed);
    assert_eq!(bot.github("pull_request", "h2", &pull_request("synchronize", &repo, 21, &fixed, &base)), 202);
    wait_for("the stuck build to be killed", WAIT, || !process_running(&marker));
    github.wait_until("the plan of the new head", || final_status(&github, &fixed).is_some());
    let (runtime, store) = store(data.path());
    let runs = runtime.block_on(store.runs_of("github", REPO, 21)).unwrap();
    let stuck_run = runs.iter().find(|r| r.head_sha == stuck).expect("a run of the stuck head");
    wait_for("the stuck run to be recorded", WAIT, || {
        runtime
            .block_on(store.runs_of("github", REPO, 21))
            .unwrap()
            .iter()
            .any(|r| r.id == stuck_run.id && r.status == "superseded")
    });
    assert!(final_status(&github, &stuck).is_none(), "the superseded plan was posted");
    // Counted as cancelled, not as a failed plan.
    let cancelled = "fluxplan_plans_cancelled_total{forge=\"github\",reason=\"superseded\"}";
    wait_for("the cancelled plan to be counted", WAIT, || metric(&bot, cancelled) == Some(1.0));
    let failed = "fluxplan_plan_duration_seconds_count{forge=\"github\",verdict=\"failed\"}";
    assert_eq!(metric(&bot, failed), Some(0.0));
}

#[test]
fn shutdown_stops_running_renders_within_the_grace_period() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    repo.write("apps/hang", "");
    let stuck = push(&repo, "stuck", None);
    github.add_pull(REPO, 22, &stuck, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let marker = format!("3600.{}2", std::process::id());
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_KUSTOMIZE", hanging_kustomize(data.path(), &marker)));
    env.push(("FLUXPLAN_SHUTDOWN_GRACE_SECS", "1".into()));
    let mut bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "t1", &pull_request("opened", &repo, 22, &stuck, &base)), 202);
    wait_for("the stuck build", WAIT, || process_running(&marker));
    let terminated = Command::new("kill").args(["-TERM", &bot.child.id().to_string()]).status().unwrap();
    assert!(terminated.success());
    let exit = bot.child.wait().unwrap();
    assert!(exit.success(), "graceful exit: {exit:?}");
    assert!(!process_running(&marker), "a kustomize process outlived the bot");
    let (runtime, store) = store(data.path());
    let jobs = runtime.block_on(store.jobs_of("github", REPO, 22)).unwrap();
    assert_eq!(jobs[0].2, "queued", "released for another worker");
    // Its run is closed, and not as a failure: the plan was cut short, not wrong.
    let runs = runtime.block_on(store.runs_of("github", REPO, 22)).unwrap();
    let statuses: Vec<&str> = runs.iter().map(|r| r.status.as_str()).collect();
    assert!(matches!(statuses[..], ["cancelled"] | ["abandoned"]), "{statuses:?}");
    assert_eq!(jobs[0].3, 0, "a shutdown uses up no attempt");
}

#[test]
fn a_hostile_pull_request_leaks_nothing_into_the_comment_the_run_or_the_cache() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let reference = format!("{}proc/self/environ", "../".repeat(14));
    repo.write(
        "apps/kustomization.yaml",
        &format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- settings.yaml\nconfigMapGenerator:\n- name: leak\n  namespace: default\n  files:\n  - environ={reference}\n"
        ),
    );
    let head = repo.commit("leak the environment");
    github.add_pull(REPO, 23, &head, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    assert_eq!(bot.github("pull_request", "l1", &pull_request("opened", &repo, 23, &head, &base)), 202);
    github.wait_until("the plan", || final_status(&github, &head).is_some());
    // The run and its job are recorded after the status is set: wait for them too.
    wait_for("the plan job", WAIT, || jobs_done(data.path(), "github", REPO, 23, "plan") == 1);
    assert_eq!(final_status(&github, &head).unwrap()["state"], "failure");
    let comments = sticky(&github, 23);
    assert!(comments[0].1.contains("points outside the source"), "{}", comments[0].1);
    let (runtime, store) = store(data.path());
    let runs = runtime.block_on(store.runs_of("github", REPO, 23)).unwrap();
    let mut everything: Vec<String> = comments.into_iter().map(|(_, body)| body).collect();
    everything.extend(github.statuses(REPO, &head).iter().map(Value::to_string));
    for run in runs {
        everything.extend([run.plan_json, run.comment, run.error, run.alerts].into_iter().flatten());
    }
    let cache = data.path().join("cache");
    for entry in std::fs::read_dir(&cache).into_iter().flatten().flatten() {
        everything.push(String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap()).into_owned());
    }
    everything.extend(cache_entries(&cache).into_iter().map(|(_, text)| text));
    for text in &everything {
        for secret in ["test-token", SECRET, "root:x:0:0"] {
            assert!(!text.contains(secret), "'{secret}' leaked into: {text}");
        }
    }
}

#[test]
fn an_approval_binds_to_the_plan_its_author_saw() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "gone", Some("./empty"));
    github.add_pull(REPO, 41, &head, "change", "main", &base, &file_url(&repo));
    github.set_permission(REPO, "maintainer", "maintain");
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    assert_eq!(bot.github("pull_request", "a1", &pull_request("opened", &repo, 41, &head, &base)), 202);
    github.wait_until("the blocked status", || final_status(&github, &head).is_some());
    // The run and its job are recorded after the status is set: wait for them too.
    wait_for("the plan job", WAIT, || jobs_done(data.path(), "github", REPO, 41, "plan") == 1);

    // An approval written before the plan now shown was posted (delivered late) is refused.
    let stale_id = github.add_issue_comment(REPO, 41, "maintainer", "/fluxplan approve");
    let mut stale = comment(41, "maintainer", stale_id, "/fluxplan approve", &repo);
    stale["comment"]["created_at"] = json!("2020-01-01T00:00:00Z");
    assert_eq!(bot.github("issue_comment", "a2", &stale), 202);
    // The reaction and the reply are two requests: wait for both.
    github.wait_until("the refusal", || {
        github.reactions(REPO, stale_id).contains(&"-1".to_string())
            && github.comments(REPO, 41).iter().any(|(_, b)| b.contains("written before the plan"))
    });
    assert_eq!(final_status(&github, &head).unwrap()["state"], "failure");

    // The author of the pull request cannot approve its plan, whatever their role.
    github.set_permission(REPO, PR_AUTHOR, "admin");
    let own_id = github.add_issue_comment(REPO, 41, PR_AUTHOR, "/fluxplan approve");
    assert_eq!(
        bot.github("issue_comment", "a2b", &comment(41, PR_AUTHOR, own_id, "/fluxplan approve", &repo)),
        202
    );
    // The reaction and the reply are two requests: wait for both.
    github.wait_until("the author's refusal", || {
        github.reactions(REPO, own_id).contains(&"-1".to_string())
            && github.comments(REPO, 41).iter().any(|(_, b)| b.contains("cannot approve its plan"))
    });
    assert_eq!(final_status(&github, &head).unwrap()["state"], "failure");

    // A fresh one approves this plan.
    let approve_id = github.add_issue_comment(REPO, 41, "maintainer", "/fluxplan approve");
    let approve = comment(41, "maintainer", approve_id, "/fluxplan approve", &repo);
    assert_eq!(bot.github("issue_comment", "a3", &approve), 202);
    github
        .wait_until("the approval", || final_status(&github, &head).is_some_and(|s| s["state"] == "success"));

    // A re-plan of the same head that says the same keeps it...
    let replan_id = github.add_issue_comment(REPO, 41, "maintainer", "/fluxplan plan");
    assert_eq!(
        bot.github("issue_comment", "a4", &comment(41, "maintainer", replan_id, "/fluxplan plan", &repo)),
        202
    );
    let runs_done = || {
        let (runtime, store) = store(data.path());
        let runs = runtime.block_on(store.runs_of("github", REPO, 41)).unwrap();
        runs.iter().filter(|r| r.status == "done").count()
    };
    wait_for("the re-plan", WAIT, || runs_done() == 2);
    assert_eq!(final_status(&github, &head).unwrap()["state"], "success");

    // ...a base branch that moves so that the plan changes voids it.
    repo.git(&["checkout", "-q", "main"]);
    repo.config_map("apps/extra.yaml", "extra", "default");
    let moved = repo.commit("base moves");
    repo.git(&["checkout", "-q", "change"]);
    let mut body = pull_request("opened", &repo, 41, &head, &moved);
    body["ref"] = json!("refs/heads/main");
    body["after"] = json!(moved);
    body["repository"]["full_name"] = json!(REPO);
    assert_eq!(bot.github("push", "a5", &body), 202);
    wait_for("the plan against the moved base", WAIT, || runs_done() == 3);
    assert_eq!(final_status(&github, &head).unwrap()["state"], "failure", "a changed plan kept its approval");
    let sticky = sticky(&github, 41);
    assert!(sticky[0].1.contains("no longer applies"), "{}", sticky[0].1);
}

/// Sends raw bytes on a new connection to the bot.
pub(crate) fn raw_connection(bot: &Bot, bytes: &str) -> std::net::TcpStream {
    let address = bot.url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    std::io::Write::write_all(&mut stream, bytes.as_bytes()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
}

/// A connection to the bot from the loopback address `ip` (any of 127.0.0.0/8), sending `bytes`.
pub(crate) fn connect_from(ip: &str, bot: &Bot, bytes: &str) -> std::net::TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{ip}:0").parse().unwrap()).unwrap();
        socket.connect(bot.url.trim_start_matches("http://").parse().unwrap()).await.unwrap()
    });
    let mut stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    std::io::Write::write_all(&mut stream, bytes.as_bytes()).unwrap();
    stream
}

/// Everything the server sends until it closes the connection (or the wait bound passes).
pub(crate) fn read_until_closed(stream: &mut std::net::TcpStream) -> String {
    let mut answer = Vec::new();
    let _ = std::io::Read::read_to_end(stream, &mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// A value of the bot's metrics, once the page can be read.
pub(crate) fn metric(bot: &Bot, line_start: &str) -> Option<f64> {
    let page = reqwest::blocking::get(format!("{}/metrics", bot.url)).ok()?.text().ok()?;
    Some(
        page.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0),
    )
}

pub(crate) fn refused(bot: &Bot, reason: &str) -> Option<f64> {
    metric(bot, &format!("fluxplan_webhooks_refused_total{{forge=\"github\",reason=\"{reason}\"}}"))
}

#[test]
fn unsigned_bodies_in_flight_are_bounded() {
    let github = FakeGitHub::start();
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_HEADER_TIMEOUT_SECS", "600".into()));
    // Bodies that stall are held, not cut for their pace.
    env.push(("FLUXPLAN_MIN_BODY_RATE", "0".into()));
    env.push(("FLUXPLAN_MAX_UNVERIFIED_BYTES", (64 << 20).to_string()));
    let bot = Bot::start(data.path(), &env);
    // Bodies announced over 25 MiB are refused before a byte of them is read.
    let mut huge =
        raw_connection(&bot, "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nContent-Length: 26214401\r\n\r\n");
    assert!(read_until_closed(&mut huge).starts_with("HTTP/1.1 413"));
    // Announcing a body holds nothing: the bytes received are held.
    let announce = "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: 20971521\r\n\r\n";
    let sent = format!("{announce}{}", "x".repeat(20971520));
    // Three unsigned bodies of 20 MiB all but sent by three clients fill most of the budget...
    let holding: Vec<_> =
        ["127.0.0.2", "127.0.0.3", "127.0.0.4"].iter().map(|ip| connect_from(ip, &bot, &sent)).collect();
    wait_for("the three to hold their share", WAIT, || {
        metric(&bot, "fluxplan_webhook_unverified_bytes").is_some_and(|n| n == 3.0 * 20971520.0)
    });
    // ...so a fourth is told to come back later once it has sent what is left.
    let mut fourth = raw_connection(&bot, announce);
    let mut writing = fourth.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut writing, "x".repeat(20971520).as_bytes());
    });
    wait_for("the fourth to be refused", WAIT, || refused(&bot, "busy").is_some_and(|n| n >= 1.0));
    let _ = fourth.shutdown(std::net::Shutdown::Both);
    let _ = read_until_closed(&mut fourth);
    writer.join().unwrap();
    drop(holding);
    wait_for("the budget to be returned", WAIT, || {
        metric(&bot, "fluxplan_webhook_unverified_bytes") == Some(0.0)
    });
    assert!(refused(&bot, "too-large").is_some_and(|n| n >= 1.0));
    assert!(refused(&bot, "busy").is_some_and(|n| n >= 1.0));
}

#[test]
fn slow_clients_are_cut_off() {
    let github = FakeGitHub::start();
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_HEADER_TIMEOUT_SECS", "1".into()));
    let bot = Bot::start(data.path(), &env);
    // Headers never finished: the connection is closed without an answer.
    let mut slow = raw_connection(&bot, "GET /healthz HTTP/1.1\r\nHost:");
    assert_eq!(read_until_closed(&mut slow), "", "a slow client got an answer");
    // A body never sent: 408.
    let mut stalled = raw_connection(
        &bot,
        "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: 100\r\n\r\n",
    );
    assert!(read_until_closed(&mut stalled).starts_with("HTTP/1.1 408"));
    assert_eq!(bot.get("/healthz"), (200, "ok".to_string()));
    assert!(refused(&bot, "timeout").is_some_and(|n| n >= 1.0));
}

/// A TCP proxy to the local PostgreSQL that a test can cut, as a database outage would.
pub(crate) struct CuttableProxy {
    pub(crate) port: u16,
    cut: Arc<std::sync::atomic::AtomicBool>,
    open: Arc<Mutex<Vec<std::net::TcpStream>>>,
}

impl CuttableProxy {
    pub(crate) fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let (cut_flag, streams) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if cut_flag.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropped: the database is unreachable
                }
                let Ok(server) = std::net::TcpStream::connect("127.0.0.1:5432") else { continue };
                let mut kept = streams.lock().unwrap();
                kept.push(client.try_clone().unwrap());
                kept.push(server.try_clone().unwrap());
                for (mut from, mut to) in
                    [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        CuttableProxy { port, cut, open }
    }

    pub(crate) fn set_cut(&self, cut: bool) {
        self.cut.store(cut, std::sync::atomic::Ordering::SeqCst);
        if cut {
            for stream in self.open.lock().unwrap().drain(..) {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

#[test]
fn webhooks_lost_to_a_database_outage_are_recovered_by_the_resync() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 61, &head, "change", "main", &base, &file_url(&repo));
    github.add_pull(REPO, 62, &head, "change", "main", &base, &file_url(&repo));
    let database = postgres_database();
    let proxy = CuttableProxy::start();
    let proxied = database.url.replace("127.0.0.1:5432", &format!("127.0.0.1:{}", proxy.port));
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.push(("DATABASE_URL", proxied));
    env.push(("FLUXPLAN_RESYNC_SECS", "1".into()));
    let bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "d1", &pull_request("opened", &repo, 61, &head, &base)), 202);
    github.wait_until("the first plan", || !sticky(&github, 61).is_empty());

    // The database goes away: the webhook is refused (the forge would not redeliver it).
    proxy.set_cut(true);
    assert_eq!(bot.github("pull_request", "d2", &pull_request("opened", &repo, 62, &head, &base)), 503);
    proxy.set_cut(false);
    // The resync finds the pull request without a plan and plans it.
    github.wait_until("the resync to plan the missed pull request", || !sticky(&github, 62).is_empty());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::connect(&database.url)).unwrap();
    let runs = runtime.block_on(store.runs_of("github", REPO, 62)).unwrap();
    assert_eq!(runs[0].trigger, "resync");

    // A base branch that moves without a delivery: the resync re-plans against it.
    repo.git(&["checkout", "-q", "main"]);
    repo.config_map("apps/extra.yaml", "extra", "default");
    let moved = repo.commit("base moves quietly");
    repo.git(&["checkout", "-q", "change"]);
    wait_for("a plan against the moved base", WAIT, || {
        let runs = runtime.block_on(store.runs_of("github", REPO, 61)).unwrap();
        runs.iter().any(|r| r.status == "done" && r.base_sha.as_deref() == Some(moved.as_str()))
    });
}

#[test]
fn serve_starts_while_gitlab_is_down_and_says_it_is_not_ready() {
    // A port nothing listens on: the GitLab that is down.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &gitlab_env(&format!("http://127.0.0.1:{closed}/gitlab")));
    let (status, body) = bot.get("/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("gitlab"), "{body}");
    assert_eq!(bot.get("/healthz").0, 200);
}

#[test]
fn serve_without_a_forge_is_never_ready_and_says_what_to_set() {
    let data = tempfile::tempdir().unwrap();
    // A webhook secret but no token, no App, no GitLab token.
    let bot = Bot::start(
        data.path(),
        &[
            ("FLUXPLAN_GITHUB_WEBHOOK_SECRET", SECRET.to_string()),
            ("FLUXPLAN_GITHUB_TOKEN", String::new()),
            ("FLUXPLAN_GITLAB_TOKEN", String::new()),
        ],
    );
    let (status, body) = bot.get("/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("not ready: no forge configured: set FLUXPLAN_GITHUB_TOKEN"), "{body}");
    assert!(body.contains("FLUXPLAN_GITHUB_APP_ID") && body.contains("FLUXPLAN_GITLAB_TOKEN"), "{body}");
    // Alive all the same, and said once at start.
    assert_eq!(bot.get("/healthz").0, 200);
    let log = std::fs::read_to_string(data.path().join("bot.log")).unwrap();
    assert_eq!(log.matches("no forge configured: set FLUXPLAN_GITHUB_TOKEN").count(), 1, "{log}");
}

#[test]
fn only_a_blocked_plan_can_be_approved() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 71, &head, "change", "main", &base, &file_url(&repo));
    github.set_permission(REPO, "maintainer", "maintain");
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_WORKERS", "1".into()));
    let bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "n1", &pull_request("opened", &repo, 71, &head, &base)), 202);
    github.wait_until("the plan", || final_status(&github, &head).is_some());
    // The run and its job are recorded after the status is set: wait for them too.
    wait_for("the plan job", WAIT, || jobs_done(data.path(), "github", REPO, 71, "plan") == 1);
    // A plan with changes but no danger: nothing to approve.
    let id = github.add_issue_comment(REPO, 71, "maintainer", "/fluxplan approve");
    assert_eq!(
        bot.github("issue_comment", "n2", &comment(71, "maintainer", id, "/fluxplan approve", &repo)),
        202
    );
    // The reaction and the reply are two requests: wait for both.
    github.wait_until("the refusal", || {
        github.reactions(REPO, id).contains(&"-1".to_string())
            && github.comments(REPO, 71).iter().any(|(_, b)| b.contains("nothing to approve"))
    });
    let (runtime, store) = store(data.path());
    let approvals = runtime.block_on(store.approval("github", REPO, 71, &head)).unwrap();
    assert_eq!(approvals, None);
}

#[test]
fn no_approval_while_a_newer_plan_is_being_made() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "gone", Some("./empty"));
    github.add_pull(REPO, 72, &head, "change", "main", &base, &file_url(&repo));
    github.set_permission(REPO, "maintainer", "maintain");
    let data = tempfile::tempdir().unwrap();
    // Builds wait while the flag file exists (a stat outside the sandbox is allowed; reads are not).
    let flag = data.path().join("hold-builds");
    let kubectl = fluxplan::sandbox::resolve_program("kubectl").expect("kubectl is needed for this test");
    let build = format!(
        "while [ -e {} ]; do sleep 0.1; done\nshift\nexec {} kustomize \"$@\"",
        flag.display(),
        kubectl.display()
    );
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_KUSTOMIZE", stand_in_kustomize(data.path(), &build).to_str().unwrap().to_string()));
    let bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "w1", &pull_request("opened", &repo, 72, &head, &base)), 202);
    github.wait_until("the blocked plan", || final_status(&github, &head).is_some());
    // The run and its job are recorded after the status is set: wait for them too.
    wait_for("the plan job", WAIT, || jobs_done(data.path(), "github", REPO, 72, "plan") == 1);
    // A re-plan is asked for and held; an approval meanwhile would approve the old plan.
    std::fs::write(&flag, "").unwrap();
    std::fs::remove_dir_all(data.path().join("cache")).unwrap(); // so the re-plan runs kustomize
    let plan_id = github.add_issue_comment(REPO, 72, "maintainer", "/fluxplan plan");
    assert_eq!(
        bot.github("issue_comment", "w2", &comment(72, "maintainer", plan_id, "/fluxplan plan", &repo)),
        202
    );
    wait_for("the re-plan to start", WAIT, || {
        let (runtime, store) = store(data.path());
        let runs = runtime.block_on(store.runs_of("github", REPO, 72)).unwrap();
        runs.len() == 2 && runs[1].status == "running"
    });
    let approve_id = github.add_issue_comment(REPO, 72, "other-maintainer", "/fluxplan approve");
    github.set_permission(REPO, "other-maintainer", "maintain");
    let body = comment(72, "other-maintainer", approve_id, "/fluxplan approve", &repo);
    assert_eq!(bot.github("issue_comment", "w3", &body), 202);
    // The refusal is a reaction and a reply: wait for both.
    github.wait_until("the refusal", || {
        github.reactions(REPO, approve_id).contains(&"-1".to_string()) && github.comments(REPO, 72).len() > 3
    });
    let comments = github.comments(REPO, 72);
    let said = |text: &str| comments.iter().any(|(_, b)| b.contains(text));
    assert!(said("a new plan of this pull request is being made"), "{comments:?}");
    std::fs::remove_file(&flag).unwrap();
    wait_for("the re-plan", WAIT, || jobs_done(data.path(), "github", REPO, 72, "plan") == 2);
    assert_eq!(final_status(&github, &head).unwrap()["state"], "failure");
}

#[test]
fn a_merge_request_whose_head_takes_no_status_still_gets_its_plan() {
    let gitlab = FakeGitLab::start();
    let (repo, _base) = fleet();
    let head = push(&repo, "renamed", None);
    let project = "acme/fleet";
    gitlab.add_merge_request(project, 42, 3, &head, "change", "main", &file_url(&repo));
    gitlab.forget_commit(project, &head);
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &gitlab_env(&gitlab.url()));
    let body = merge_request_hook(&repo, project, 3, &head);
    let headers =
        [("x-gitlab-event", "Merge Request Hook".to_string()), ("x-gitlab-token", "gitlab-secret".into())];
    assert_eq!(bot.post("/webhooks/gitlab", body.to_string(), &headers), 202);
    wait_for("the note", WAIT, || {
        gitlab.notes(project, 3).iter().any(|(_, b)| b.starts_with("<!-- fluxplan -->"))
    });
    let notes = gitlab.notes(project, 3);
    let plan = notes.iter().find(|(_, b)| b.starts_with("<!-- fluxplan -->")).unwrap();
    assert!(plan.1.contains("GitLab refused a commit status"), "{}", plan.1);
    assert!(gitlab.statuses(project, &head).is_empty());
}

#[test]
fn an_argo_cd_repository_gets_the_same_comment_and_blocking_status() {
    let github = FakeGitHub::start();
    let repo = crate::argocd::fleet();
    // The Applications name the repository by the URL the bot fetches it from.
    for file in [
        "bootstrap/root.yaml",
        "apps/guestbook.yaml",
        "apps/legacy.yaml",
        "apps/shop.yaml",
        "apps/platform.yaml",
    ] {
        let text = std::fs::read_to_string(repo.path().join(file)).unwrap();
        let text = text
            .replace("https://github.com/acme/argocd-fleet.git", &file_url(&repo))
            .replace("git@github.com:acme/argocd-fleet.git", &file_url(&repo))
            .replace("https://github.com/acme/argocd-fleet", &file_url(&repo));
        repo.write(file, &text);
    }
    let base = repo.commit("repoURLs as the bot fetches them");
    repo.git(&["checkout", "-q", "-b", "change"]);
    crate::fixture::edit(&repo, "apps/shop.yaml", "path: workloads/shop", "path: workloads/nothing");
    let head = repo.commit("the outage, Argo CD edition");
    github.add_pull(REPO, 7, &head, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    assert_eq!(
        bot.github("pull_request", "delivery-argo", &pull_request("opened", &repo, 7, &head, &base)),
        202
    );
    github.wait_until("the final status", || final_status(&github, &head).is_some());
    assert_eq!(final_status(&github, &head).unwrap()["state"], "failure");
    let comments = sticky(&github, 7);
    assert_eq!(comments.len(), 1);
    let body = &comments[0].1;
    assert!(body.contains("fluxplan: blocked") && body.contains("| Cluster | Application |"), "{body}");
    assert!(body.contains("allowEmpty is false"), "{body}");
}

/// A pull request whose kustomizations nest 5,000 deep once overflowed the planner's stack and
/// aborted `serve` on every takeover. Now it is over the nesting limit: the bot lives, the plan is
/// blocked with `source-limit`, and the status is final.
#[test]
fn a_pull_request_nesting_kustomizations_too_deep_is_blocked_and_the_bot_lives() {
    const DEPTH: usize = 5_000;
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    repo.write("apps/kustomization.yaml", "resources:\n- settings.yaml\n- ../chain/k0\n");
    for i in 0..DEPTH {
        let next = if i + 1 < DEPTH { format!("../k{}", i + 1) } else { "deep.yaml".into() };
        repo.write(&format!("chain/k{i}/kustomization.yaml"), &format!("resources:\n- {next}\n"));
    }
    repo.config_map(&format!("chain/k{}/deep.yaml", DEPTH - 1), "deep", "default");
    let head = repo.commit("a chain 5,000 deep");
    github.add_pull(REPO, 1, &head, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    assert_eq!(
        bot.github("pull_request", "delivery-deep", &pull_request("opened", &repo, 1, &head, &base)),
        202
    );
    github.wait_until("the final status", || final_status(&github, &head).is_some());
    let last = final_status(&github, &head).unwrap();
    assert_eq!(last["state"], "failure", "{last}");
    // 5,000 changed files no unit reads are counted in the comment, listed in the JSON.
    let parts = sticky(&github, 1);
    assert_eq!(parts.len(), 1, "{parts:?}");
    let comment = &parts[0].1;
    assert!(comment.contains("and 4951 more"), "{comment}");
    assert!(comment.contains("source-limit") && comment.contains("nest more than 100 levels"), "{comment}");
    assert_eq!(bot.get("/healthz"), (200, "ok".to_string()));
}
