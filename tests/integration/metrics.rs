//! `/metrics` of the real `fluxplan serve`: every labelled family at zero from the start, the
//! process's own metrics, and `--metrics-listen`.

use crate::bot::{github_env, Bot};
use crate::fake_github::FakeGitHub;
use fluxplan::server::metrics::{
    events, Refusal, CANCEL_REASONS, FORGES, FORGE_ERRORS, FORGE_RETRY_KINDS, JOB_KINDS, JOB_STATUSES,
    OUTCOMES, VERDICTS,
};
use std::collections::BTreeMap;

/// Each sample of an exposition page: `name{labels}` → value.
fn samples(page: &str) -> BTreeMap<String, f64> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn scrape(url: &str) -> (u16, String) {
    let response = reqwest::blocking::get(format!("{url}/metrics")).unwrap();
    (response.status().as_u16(), response.text().unwrap())
}

/// A bot that does nothing on its own (no resync) until a webhook comes.
fn quiet_bot(data: &std::path::Path, github: &FakeGitHub, args: &[&str]) -> Bot {
    let mut env = github_env(github);
    env.push(("FLUXPLAN_RESYNC_SECS", "0".into()));
    Bot::start_with(data, args, &env)
}

#[test]
fn every_labelled_family_is_exported_at_zero_before_any_event() {
    let github = FakeGitHub::start();
    let data = tempfile::tempdir().unwrap();
    let bot = quiet_bot(data.path(), &github, &[]);
    let (status, page) = bot.get("/metrics");
    assert_eq!(status, 200);
    let samples = samples(&page);
    let mut expected = Vec::new();
    for kind in FORGES {
        let forge = kind.as_str();
        for event in events(kind) {
            expected.push(format!("fluxplan_webhooks_received_total{{event=\"{event}\",forge=\"{forge}\"}}"));
        }
        for verdict in VERDICTS.map(|v| v.as_str()) {
            let labels = format!("{{forge=\"{forge}\",verdict=\"{verdict}\"}}");
            expected.push(format!("fluxplan_plan_duration_seconds_count{labels}"));
            expected.push(format!("fluxplan_plan_duration_seconds_sum{labels}"));
        }
        for reason in CANCEL_REASONS {
            expected.push(format!("fluxplan_plans_cancelled_total{{forge=\"{forge}\",reason=\"{reason}\"}}"));
        }
        for error in FORGE_ERRORS {
            expected.push(format!("fluxplan_forge_api_errors_total{{forge=\"{forge}\",kind=\"{error}\"}}"));
        }
        for retry in FORGE_RETRY_KINDS {
            expected.push(format!("fluxplan_forge_retries_total{{forge=\"{forge}\",kind=\"{retry}\"}}"));
        }
        expected.push(format!("fluxplan_forge_rate_limits_total{{forge=\"{forge}\"}}"));
        expected.push(format!("fluxplan_forge_held_calls_total{{forge=\"{forge}\"}}"));
        for reason in Refusal::ALL.into_iter().filter(|r| r.applies_to(kind)) {
            let reason = reason.as_str();
            expected
                .push(format!("fluxplan_webhooks_refused_total{{forge=\"{forge}\",reason=\"{reason}\"}}"));
        }
    }
    expected.extend(JOB_STATUSES.map(|s| format!("fluxplan_jobs{{status=\"{s}\"}}")));
    expected.extend(JOB_KINDS.map(|k| format!("fluxplan_jobs_failed_total{{kind=\"{k}\"}}")));
    expected.extend(OUTCOMES.map(|o| format!("fluxplan_prediction_total{{outcome=\"{}\"}}", o.as_str())));
    expected.push("fluxplan_connections_refused_total".into());
    expected.push("fluxplan_webhook_unverified_bytes".into());
    for series in &expected {
        assert_eq!(samples.get(series), Some(&0.0), "{series} is not at 0:\n{page}");
    }
    // The spellings the docs and dashboards use, among them.
    for series in [
        "fluxplan_webhooks_received_total{event=\"pull_request\",forge=\"github\"}",
        "fluxplan_webhooks_received_total{event=\"Merge Request Hook\",forge=\"gitlab\"}",
        "fluxplan_webhooks_refused_total{forge=\"github\",reason=\"signature\"}",
        "fluxplan_webhooks_refused_total{forge=\"gitlab\",reason=\"token\"}",
        "fluxplan_jobs_failed_total{kind=\"plan\"}",
        "fluxplan_plan_duration_seconds_count{forge=\"github\",verdict=\"blocked\"}",
        "fluxplan_forge_api_errors_total{forge=\"gitlab\",kind=\"rate_limited\"}",
        "fluxplan_forge_retries_total{forge=\"github\",kind=\"timeout\"}",
        "fluxplan_forge_rate_limits_total{forge=\"github\"}",
        "fluxplan_prediction_total{outcome=\"exact\"}",
    ] {
        assert!(expected.iter().any(|e| e == series), "{series}");
    }
    // Every labelled family's series are those, and no other.
    let labelled = [
        "fluxplan_webhooks_received_total{",
        "fluxplan_webhooks_refused_total{",
        "fluxplan_jobs{",
        "fluxplan_jobs_failed_total{",
        "fluxplan_plan_duration_seconds_count{",
        "fluxplan_forge_api_errors_total{",
        "fluxplan_forge_retries_total{",
        "fluxplan_forge_rate_limits_total{",
        "fluxplan_forge_held_calls_total{",
        "fluxplan_prediction_total{",
        "fluxplan_plans_cancelled_total{",
    ];
    let exported = samples.keys().filter(|s| labelled.iter().any(|family| s.starts_with(family))).count();
    let listed = expected.iter().filter(|s| labelled.iter().any(|family| s.starts_with(family))).count();
    assert_eq!(exported, listed, "{page}");
    assert_eq!(samples.keys().filter(|s| s.starts_with("fluxplan_build_info{")).count(), 1, "{page}");
}

#[test]
fn the_process_metrics_are_the_bots() {
    let github = FakeGitHub::start();
    let data = tempfile::tempdir().unwrap();
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let before = now();
    let bot = quiet_bot(data.path(), &github, &[]);
    let (_, page) = bot.get("/metrics");
    let read = samples(&page);
    let value = |name: &str| *read.get(name).unwrap_or_else(|| panic!("no {name}:\n{page}"));
    for family in [
        "process_cpu_seconds_total counter",
        "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge",
        "process_open_fds gauge",
        "process_max_fds gauge",
        "process_start_time_seconds gauge",
        "process_threads gauge",
    ] {
        assert!(page.contains(&format!("# TYPE {family}\n")), "{family}:\n{page}");
    }
    // The boot time is whole seconds: the start may read up to a second early.
    let started = value("process_start_time_seconds");
    assert!(started >= before.floor() - 1.0 && started <= now(), "started {started}, spawned at {before}");
    // A tokio runtime, a database pool and an HTTP listener take some memory, files and threads.
    assert!(value("process_resident_memory_bytes") > 4.0 * 1024.0 * 1024.0, "{page}");
    assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
    assert!(value("process_open_fds") >= 4.0, "{page}");
    assert!(value("process_max_fds") >= value("process_open_fds"), "{page}");
    assert!(value("process_threads") >= 2.0, "{page}");
    // Starting took well under a second of CPU: counted in whole seconds it would read 0.
    let cpu = value("process_cpu_seconds_total");
    assert!(cpu > 0.0, "{page}");
    // A counter: it never goes back.
    let (_, again) = bot.get("/metrics");
    assert!(samples(&again)["process_cpu_seconds_total"] >= cpu);
}

#[test]
fn metrics_listen_serves_metrics_on_their_own_port_and_not_on_the_webhooks_one() {
    let github = FakeGitHub::start();
    let data = tempfile::tempdir().unwrap();
    let bot = quiet_bot(data.path(), &github, &["--metrics-listen", "127.0.0.1:0"]);
    let metrics_url = bot.metrics_url.clone().expect("the metrics listener is announced");
    assert_ne!(metrics_url, bot.url);
    let (status, page) = scrape(&metrics_url);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("fluxplan_webhooks_refused_total{forge=\"github\",reason=\"signature\"} 0"),
        "{page}"
    );
    assert!(page.contains("# TYPE process_cpu_seconds_total counter"), "{page}");
    // The main port: no metrics, everything else as before.
    assert_eq!(bot.get("/metrics").0, 404);
    assert_eq!(bot.get("/healthz"), (200, "ok".to_string()));
    // The metrics port serves metrics alone.
    let health = reqwest::blocking::get(format!("{metrics_url}/healthz")).unwrap();
    assert_eq!(health.status().as_u16(), 404);
    // What the main port sees is counted on the metrics port: one registry.
    let body = "{}".to_string();
    let forged = bot.post(
        "/webhooks/github",
        body.clone(),
        &[
            ("x-github-event", "pull_request".into()),
            ("x-hub-signature-256", fluxplan::forge::webhook::github_signature("wrong", body.as_bytes())),
        ],
    );
    assert_eq!(forged, 401);
    let (_, page) = scrape(&metrics_url);
    assert!(
        page.contains("fluxplan_webhooks_refused_total{forge=\"github\",reason=\"signature\"} 1"),
        "{page}"
    );
    let signed = bot.github("ping", "delivery-1", &serde_json::json!({"zen": "hi"}));
    assert_eq!(signed, 200);
    let (_, page) = scrape(&metrics_url);
    assert!(page.contains("fluxplan_webhooks_received_total{event=\"ping\",forge=\"github\"} 1"), "{page}");
}
