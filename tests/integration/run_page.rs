//! The run page as people read it: a real `fluxplan serve` plans a hostile pull request, and
//! Debian's chromium loads the page. The plan must render (a table, coloured diff lines,
//! collapsible sections) with nothing of the pull request run as markup, no Secret value, and no
//! token but the run's own.

use crate::bot::{file_url, final_status, github_env, jobs_done, pull_request, store, Bot, REPO};
use crate::fake_github::FakeGitHub;
use crate::fixture::{plan_cli, wait_for, Repo, WAIT};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Planted in the Secret's values, base and head: never on a page.
const SECRET_VALUES: [&str; 2] = ["planted-old-secret-4f1c", "planted-new-secret-9a2e"];
const RUNS_TOKEN: &str = "index-secret-7d3a";
/// Names the pull request gives a Kustomization and a ConfigMap, and a value it sets.
const HOSTILE_KUSTOMIZATION: &str = "<img src=x onerror=alert(2)>";
const HOSTILE_OBJECT: &str = "<script>alert(1)</script>";

/// A fleet whose head renames nothing but changes a ConfigMap value (to markup), rotates a
/// Secret's password and adds a ConfigMap named like a script tag, all in a Kustomization whose
/// name is an image tag. Returns the repository (on `change`), base and head.
fn hostile_fleet() -> (Repo, String, String) {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", &format!("\"{HOSTILE_KUSTOMIZATION}\""), "./apps", "");
    let settings = |mode: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  mode: {mode}\n  keep: same\n")
    };
    let secret = |password: &str| {
        format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: default\nstringData:\n  password: {password}\n")
    };
    repo.write("apps/settings.yaml", &settings("old"));
    repo.write("apps/secret.yaml", &secret(SECRET_VALUES[0]));
    let base = repo.commit("base");
    repo.git(&["checkout", "-q", "-b", "change"]);
    repo.write("apps/settings.yaml", &settings(&format!("\"{HOSTILE_OBJECT}\"")));
    repo.write("apps/secret.yaml", &secret(SECRET_VALUES[1]));
    repo.write(
        "apps/hostile.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"{HOSTILE_OBJECT}\"\n  namespace: default\ndata:\n  key: value\n"),
    );
    let head = repo.commit("head");
    (repo, base, head)
}

/// Debian's chromium. Missing, the test fails saying how to get it: a browser test that passes
/// without a browser tests nothing.
fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|dir| dir.join("chromium")).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!(
            "chromium is not installed: this test loads the run page in a real browser. \
             Install Debian's chromium (apt-get install chromium; scripts/test.sh does it as root)."
        )
    })
}

/// Loads `url` in headless chromium with `args` (`--dump-dom`, `--screenshot=...`); returns
/// stdout and stderr, failing on a non-zero exit.
fn browse(url: &str, args: &[String]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .args(["--enable-logging=stderr", "--window-size=1280,1600"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .output()
        .expect("chromium runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    eprintln!("chromium {args:?}: {} ms", started.elapsed().as_millis());
    assert!(out.status.success(), "chromium failed ({}) on {url}:\n{stderr}", out.status);
    // The policy refusing something of the page's own (its style sheet) shows in the console.
    assert!(!stderr.contains("Content Security Policy"), "the page broke its own policy:\n{stderr}");
    (stdout, stderr)
}

fn dump_dom(url: &str) -> String {
    let (dom, _) = browse(url, &["--dump-dom".to_string()]);
    assert!(dom.contains("</html>"), "no DOM from {url}: {dom}");
    dom
}

/// What no page may hold: the pull request's markup as markup, a Secret value, `tokens`.
fn assert_nothing_leaks(dom: &str, tokens: &[&str]) {
    for element in ["<script", "<img", "<iframe", "<object", "<embed", "onerror=\""] {
        assert!(!dom.contains(element), "{element} in the page:\n{dom}");
    }
    for value in SECRET_VALUES {
        assert!(!dom.contains(value), "a Secret value is on the page:\n{dom}");
    }
    for token in tokens {
        assert!(!dom.contains(token), "token {token} is on the page:\n{dom}");
    }
}

#[test]
fn the_run_page_shows_a_hostile_plan_safely_in_a_browser() {
    chromium();
    let github = FakeGitHub::start();
    let (repo, base, head) = hostile_fleet();
    github.add_pull(REPO, 7, &head, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_RUNS_TOKEN", RUNS_TOKEN.into()));
    let bot = Bot::start(data.path(), &env);
    let mut body = pull_request("opened", &repo, 7, &head, &base);
    body["repository"]["html_url"] = "https://github.com/acme/fleet".into();
    assert_eq!(bot.github("pull_request", "run-page-1", &body), 202);
    github.wait_until("the plan's status", || final_status(&github, &head).is_some());
    wait_for("the plan job", WAIT, || jobs_done(data.path(), "github", REPO, 7, "plan") == 1);
    let (runtime, store) = store(data.path());
    let run = runtime.block_on(store.runs_of("github", REPO, 7)).unwrap().remove(0);
    assert_eq!(run.verdict.as_deref(), Some("changes"), "{:?}", run.error);
    let token = run.page_token.clone().unwrap();
    // Another run, newer: its token must not show on this run's page.
    let (other_id, other_token) =
        runtime.block_on(store.start_run(None, "github", REPO, 8, "main", &base, "command", None)).unwrap();
    let page_url = format!("{}/runs/{}?token={token}", bot.url, run.id);

    let response = reqwest::blocking::get(&page_url).unwrap();
    assert_eq!(response.status(), 200);
    let policy = response.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(policy.starts_with("default-src 'none'; style-src 'sha256-"), "{policy}");
    assert_eq!(response.headers()["referrer-policy"], "no-referrer");
    let source = response.text().unwrap();
    assert_nothing_leaks(&source, &[&other_token, RUNS_TOKEN]);

    let dom = dump_dom(&page_url);
    assert_nothing_leaks(&dom, &[&other_token, RUNS_TOKEN]);
    // The plan is HTML: its table, its collapsible section named (as text) by the hostile
    // Kustomization, its diff lines marked, the hostile names and value shown as text.
    assert!(dom.contains("<th class=\"left\">Cluster</th>"), "{dom}");
    assert!(dom.contains("<td class=\"right\">2</td>"), "{dom}");
    assert!(dom.contains("<details><summary><b>flux-system/&lt;img src=x onerror=alert(2)&gt;</b>"), "{dom}");
    assert!(dom.contains("<span class=\"diff-del\">-  mode: old</span>"), "{dom}");
    assert!(
        dom.contains("<span class=\"diff-add\">+  mode: &lt;script&gt;alert(1)&lt;/script&gt;</span>"),
        "{dom}"
    );
    assert!(dom.contains("<code>ConfigMap default/&lt;script&gt;alert(1)&lt;/script&gt;</code>"), "{dom}");
    assert!(dom.contains("Secret stringData.password changed (value hidden)"), "{dom}");
    // What the run was: times, trigger, links to the pull request, the commit and plan.json.
    assert!(dom.contains("<time datetime=\""), "{dom}");
    assert!(dom.contains("a pull request webhook"), "{dom}");
    assert!(dom.contains("href=\"https://github.com/acme/fleet/pull/7\""), "{dom}");
    assert!(dom.contains(&format!("href=\"https://github.com/acme/fleet/commit/{head}\"")), "{dom}");
    assert!(dom.contains(&format!("href=\"/runs/{}/plan.json?token={token}\"", run.id)), "{dom}");
    // The posted comment links to this page; shown on it, that link would be the page itself.
    assert!(
        run.comment.as_deref().is_some_and(|c| c.contains("[Full plan and run history](")),
        "{:?}",
        run.comment
    );
    assert!(!dom.contains("Full plan and run history"), "{dom}");
    assert!(!dom.contains(&format!("/runs/{}?token=", run.id)), "{dom}");
    // Each alert once: in the posted plan, not again in a list of its own beside it.
    assert!(!dom.contains("<h2>Alerts</h2>"), "{dom}");
    // Who approved the plan, once someone has: the run approved names them.
    assert!(!dom.contains("Approved by"), "{dom}");
    runtime
        .block_on(store.approve(
            "github",
            REPO,
            7,
            &head,
            "octo-reviewer",
            run.id,
            run.plan_digest.as_deref(),
        ))
        .unwrap();
    let dom = dump_dom(&page_url);
    assert!(dom.contains("<dt>Approved by</dt><dd>octo-reviewer</dd>"), "{dom}");

    // Opened with the index credential, the page still names only the run's own token.
    let dom = dump_dom(&format!("{}/runs/{}?token={RUNS_TOKEN}", bot.url, run.id));
    assert_nothing_leaks(&dom, &[&other_token, RUNS_TOKEN]);
    assert!(dom.contains(&format!("plan.json?token={token}")), "{dom}");

    // It renders: a screenshot, without a console error from the policy.
    let shot = data.path().join("run.png");
    browse(&page_url, &[format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{} bytes", png.len());
    if let Some(keep) = std::env::var_os("FLUXPLAN_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, Path::new(&keep)).unwrap();
    }

    // The index, one run a page, newest first, with controls to page on.
    let index = dump_dom(&format!("{}/runs?token={RUNS_TOKEN}&per_page=1", bot.url));
    assert_nothing_leaks(&index, &[]);
    assert!(index.contains(&format!("href=\"/runs/{other_id}?token={other_token}\"")), "{index}");
    assert!(!index.contains(&format!("/runs/{}?token", run.id)), "{index}");
    assert!(
        index.contains(&format!("href=\"/runs?page=2&amp;per_page=1&amp;token={RUNS_TOKEN}\" rel=\"next\"")),
        "{index}"
    );
    let older = dump_dom(&format!("{}/runs?token={RUNS_TOKEN}&per_page=1&page=2", bot.url));
    assert!(older.contains(&format!("href=\"/runs/{}?token={token}\"", run.id)), "{older}");
    assert!(older.contains("rel=\"prev\"") && !older.contains("rel=\"next\""), "{older}");
    // A page size past the bound is the bound.
    let (status, all) = bot.get(&format!("/runs?token={RUNS_TOKEN}&per_page=100000"));
    assert_eq!(status, 200);
    assert!(all.contains("<b>200</b>"), "{all}");
}

/// The HTML of a fixed plan, golden: what the run page shows of the hostile fleet's plan.
#[test]
fn the_plan_html_of_a_fixed_plan_is_golden() {
    let (repo, _, _) = hostile_fleet();
    let (markdown, code) = plan_cli(&repo, "main", "change", "markdown", &[]);
    assert_eq!(code, 1, "{markdown}");
    let html = fluxplan::report::html::markdown_to_html(&markdown);
    for value in SECRET_VALUES {
        assert!(!html.contains(value), "{html}");
    }
    insta::assert_snapshot!("run_page_plan_html", html);
}
