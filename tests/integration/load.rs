//! The load run `bench/load.sh` drives: the real `fluxplan serve` against the fake GitHub, many
//! pull requests each delivered several times (opened, its redelivery, a push and a second
//! delivery of that push), from several senders at once. It measures and does not judge, so the
//! suite skips it; the script writes its figures to `bench/out/load.md`.

use crate::bot::{
    file_url, final_status, fleet, github_env, postgres_database, pull_request, Bot, REPO, SECRET,
};
use crate::fake_github::FakeGitHub;
use crate::fixture::wait_for;
use fluxplan::forge::webhook::github_signature;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Senders posting deliveries at once.
const SENDERS: usize = 8;
/// The longest the run waits for the last final status.
const LONGEST: Duration = Duration::from_secs(1800);

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// (action, head, delivery id, pull request number) of one delivery.
type Delivery = (&'static str, String, String, u64);

#[test]
#[ignore = "a benchmark, not a check: bench/load.sh runs it"]
fn load_run() {
    let out = std::env::var("FLUXPLAN_LOAD_OUT").expect("FLUXPLAN_LOAD_OUT: the file bench/load.sh reads");
    let pulls = setting("FLUXPLAN_LOAD_PULLS", 40) as u64;
    let workers = setting("FLUXPLAN_LOAD_WORKERS", 2);
    let postgres = std::env::var("FLUXPLAN_LOAD_DATABASE").is_ok_and(|d| d == "postgres");
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    // Two heads per pull request: the one it is opened with and the one pushed later.
    let heads: Vec<(u64, String, String)> = (1..=pulls)
        .map(|n| {
            let number = 100 + n;
            repo.config_map("apps/settings.yaml", &format!("pr{number}-a"), "default");
            let first = repo.commit(&format!("pr{number} first"));
            repo.config_map("apps/settings.yaml", &format!("pr{number}-b"), "default");
            let second = repo.commit(&format!("pr{number} second"));
            github.add_pull(REPO, number, &first, "change", "main", &base, &file_url(&repo));
            (number, first, second)
        })
        .collect();
    let data = tempfile::tempdir().unwrap();
    let database = postgres.then(postgres_database);
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_RESYNC_SECS", "0".into()));
    env.push(("FLUXPLAN_WORKERS", workers.to_string()));
    if let Some(database) = &database {
        env.push(("DATABASE_URL", database.url.clone()));
    }
    let bot = Bot::start(data.path(), &env);
    let opened: Vec<Delivery> = heads
        .iter()
        .flat_map(|(n, first, _)| {
            let id = format!("open-{n}");
            // GitHub redelivers (a timeout on its side, a manual redelivery): the same id.
            [("opened", first.clone(), id.clone(), *n), ("opened", first.clone(), id, *n)]
        })
        .collect();
    let pushed: Vec<Delivery> = heads
        .iter()
        .flat_map(|(n, _, second)| {
            // The push, and a second delivery of it (another event id, the same head).
            [
                ("synchronize", second.clone(), format!("push-{n}"), *n),
                ("synchronize", second.clone(), format!("push-{n}-again"), *n),
            ]
        })
        .collect();
    let latencies = Mutex::new(Vec::new());
    let accepted = AtomicUsize::new(0);
    let send = |deliveries: &[Delivery]| {
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..SENDERS {
                scope.spawn(|| {
                    // One client per sender, as a forge keeps its connections: only the round
                    // trip of each delivery is timed.
                    let client = reqwest::blocking::Client::new();
                    while let Some((action, head, id, number)) =
                        deliveries.get(next.fetch_add(1, Ordering::SeqCst))
                    {
                        let body = pull_request(action, &repo, *number, head, &base).to_string();
                        let request = client
                            .post(format!("{}/webhooks/github", bot.url))
                            .header("x-github-event", "pull_request")
                            .header("x-github-delivery", id.as_str())
                            .header("x-hub-signature-256", github_signature(SECRET, body.as_bytes()))
                            .body(body);
                        let started = Instant::now();
                        let status = request.send().unwrap().status().as_u16();
                        latencies.lock().unwrap().push(started.elapsed());
                        if status == 200 || status == 202 {
                            accepted.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
    };
    let started = Instant::now();
    send(&opened);
    // The pushes land while the first plans run.
    for (number, _, second) in &heads {
        github.set_head(REPO, *number, second);
    }
    send(&pushed);
    wait_for("every pull request's final status on its last head", LONGEST, || {
        heads.iter().all(|(_, _, second)| final_status(&github, second).is_some())
    });
    let last_final = started.elapsed();
    let peak_rss_kib = peak_rss_kib(bot.child.id());
    let pending_left = heads.iter().filter(|(_, first, _)| final_status(&github, first).is_none()).count();
    let mut latencies = latencies.into_inner().unwrap();
    latencies.sort();
    let percentile = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
    let sent = opened.len() + pushed.len();
    let statuses = github.requests().iter().filter(|(m, p)| m == "POST" && p.contains("/statuses/")).count();
    let figures = format!(
        "| figure | value |\n|---|---|\n\
         | pull requests × deliveries | {pulls} × 4 (opened, its redelivery, a push, a second delivery of the push) from {SENDERS} senders |\n\
         | database, workers | {}, {workers} |\n\
         | deliveries accepted | {} of {sent} |\n\
         | webhook latency p50 / p95 / max | {:.1} ms / {:.1} ms / {:.1} ms |\n\
         | time to the last final status | {:.1} s |\n\
         | commit statuses posted | {statuses} |\n\
         | first heads left without a final status (superseded before posting) | {pending_left} of {pulls} |\n\
         | peak memory of serve (VmHWM) | {:.1} MiB |\n",
        if postgres { "PostgreSQL" } else { "embedded SQLite" },
        accepted.load(Ordering::SeqCst),
        percentile(50).as_secs_f64() * 1000.0,
        percentile(95).as_secs_f64() * 1000.0,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1000.0,
        last_final.as_secs_f64(),
        peak_rss_kib as f64 / 1024.0,
    );
    std::fs::write(&out, figures).unwrap();
}

/// The peak resident memory of a process (its own, without children), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
