//! Hosts that failed are asked once: a fleet whose releases name a registry fluxplan cannot reach
//! (offline, air-gapped) costs one attempt per host, not one per release; every release still
//! says the host's real failure and how to supply its chart; a host that answers is never
//! poisoned by one that did not; and `serve`, which plans many pull requests, asks again once
//! the failure is forgotten (a clock the test moves, no sleeping).

use crate::fixture::{helm, plan_json, unit_in, Repo};
use crate::helm_fetch::{package, Static};
use fluxplan::charts::failed_hosts::{Clock, FailedHosts};
use fluxplan::charts::fetch::{Access, FetchError, Fetcher, Presented};
use fluxplan::charts::hosts::HostPolicy;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A host on loopback that accepts connections and closes them unanswered, counting them.
struct DeadHost {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl DeadHost {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        DeadHost { port, connections }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A HelmRepository `name` at `url` and a HelmRelease `name` of its chart `db`, in namespace
/// `data`, with `replicas`.
fn release_from(name: &str, url: &str, replicas: u32) -> String {
    release_in("data", name, url, replicas)
}

/// The same in `namespace`.
fn release_in(namespace: &str, name: &str, url: &str, replicas: u32) -> String {
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  \
         url: {url}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
         spec:\n  interval: 10m\n  chart:\n    spec:\n      chart: db\n      sourceRef:\n        kind: HelmRepository\n        \
         name: {name}\n  values:\n    replicas: {replicas}\n"
    )
}

const DEAD_RELEASES: usize = 6;

/// Six releases whose repositories (six URLs) are on one dead host, and two that name the same
/// chart of a live host at the same address (another port): a values change to each, planned.
#[test]
fn a_dead_host_is_asked_once_per_plan_and_poisons_no_other_host() {
    let _ = helm(4);
    let dead = DeadHost::start();
    let packages = tempfile::tempdir().unwrap();
    package(packages.path(), "1.0.0", "db");
    let live = Static::repository(packages.path());
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    let write = |replicas| {
        for n in 0..DEAD_RELEASES {
            let url = format!("http://{}/repository-{n}", dead.host());
            repo.write(&format!("apps/dead-{n}.yaml"), &release_from(&format!("dead-{n}"), &url, replicas));
        }
        for namespace in ["data", "more-data"] {
            let release = release_in(namespace, "live", &format!("{}/charts", live.url()), replicas);
            repo.write(&format!("apps/live-{namespace}.yaml"), &release);
        }
    };
    write(2);
    repo.commit("base");
    write(3);
    repo.commit("three replicas");
    let (dead_host, live_host) = (dead.host(), live.host());
    let flags = ["--chart-hosts", dead_host.as_str(), "--chart-hosts", live_host.as_str()];
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &flags);

    // Base and head, six releases each: one connection.
    assert_eq!(dead.connections(), 1, "the dead host was asked once for the whole plan");
    let notes: Vec<String> = (0..DEAD_RELEASES)
        .map(|n| {
            let release = unit_in(&plan, "HelmRelease", &format!("data/dead-{n}"));
            assert_eq!(release["status"], "external", "{release:#}");
            release["notes"].to_string()
        })
        .collect();
    for note in &notes {
        // The real reason, and the ways to supply the chart.
        assert!(note.contains(&format!("{dead_host} failed: ")), "{note}");
        for way in ["--chart ", "--registry-mirror", "--chart-hosts"] {
            assert!(note.contains(way), "{way}: {note}");
        }
        // Whichever release asked first, each says the same of the host.
        let reason = |note: &str| {
            let said = note.split(&format!("{dead_host} failed: ")).nth(1)?;
            said.split("; give it with").next().map(str::to_string)
        };
        assert_eq!(reason(note), reason(&notes[0]));
    }
    // Near miss: the live host at the same address answers, and its releases are planned.
    for reference in ["data/live", "more-data/live"] {
        let release = unit_in(&plan, "HelmRelease", reference);
        assert_ne!(release["status"], "external", "{release:#}");
        assert!(!release["notes"].to_string().contains(&format!("{live_host} failed")), "{release:#}");
    }
    // The same chart of the same repository, for two releases on two sides: resolved and fetched
    // once.
    let asked = live.asked();
    for path in ["/charts/index.yaml", "/charts/db-1.0.0.tgz"] {
        assert_eq!(asked.iter().filter(|p| *p == path).count(), 1, "{path}: {asked:?}");
    }
}

/// Releases on hosts whose names do not resolve (`.invalid` never does): each says which host
/// and why, and how to supply the chart.
#[test]
fn releases_on_unresolvable_hosts_say_which_host_failed_and_why() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    let write = |replicas| {
        for n in 0..4 {
            let url = format!("https://charts-{}.fluxplan.invalid/stable", n % 2);
            repo.write(&format!("apps/r{n}.yaml"), &release_from(&format!("r{n}"), &url, replicas));
        }
    };
    write(2);
    repo.commit("base");
    write(3);
    repo.commit("three replicas");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    for n in 0..4 {
        let release = unit_in(&plan, "HelmRelease", &format!("data/r{n}"));
        assert_eq!(release["status"], "external", "{release:#}");
        let notes = release["notes"].to_string();
        let host = format!("charts-{}.fluxplan.invalid", n % 2);
        assert!(notes.contains(&format!("{host} failed: cannot resolve {host}")), "{notes}");
        assert!(notes.contains("--registry-mirror"), "{notes}");
    }
}

/// Fetches through `fluxplan::charts` of loopback hosts allowed exactly, remembering failures in
/// `failed_hosts`.
fn fetcher(hosts: &[String], failed_hosts: FailedHosts) -> Fetcher {
    let policy = HostPolicy::new([], hosts.iter().map(String::as_str), []).unwrap();
    let access =
        Access { hosts: policy, insecure: hosts.iter().cloned().collect(), timeout: None, failed_hosts };
    Fetcher::new(access).unwrap()
}

fn get(fetcher: &Fetcher, url: &str) -> Result<Vec<u8>, FetchError> {
    let target = fetcher.target(url).unwrap();
    fetcher.get(&target, None, Presented::nothing(), 1 << 20).map(|(body, _)| body)
}

/// In `serve` a failure is remembered for a minute: the host is asked again after it, not
/// before. Requests made at once while the host is first tried wait for that try.
#[test]
fn serve_asks_a_failed_host_again_once_its_failure_is_forgotten() {
    let dead = DeadHost::start();
    let live = Static::start(vec![("/index.yaml".into(), b"ok".to_vec())], Vec::new());
    let now = Arc::new(Mutex::new(Instant::now()));
    let clock: Clock = {
        let now = now.clone();
        Arc::new(move || *now.lock().unwrap())
    };
    let memory = fluxplan::charts::failed_hosts::SERVE_MEMORY;
    let fetcher = fetcher(&[dead.host(), live.host()], FailedHosts::expiring(memory, clock));
    let dead_url = |n: usize| format!("http://{}/charts-{n}/index.yaml", dead.host());

    // Eight requests at once, one connection; all told the same.
    let barrier = std::sync::Barrier::new(8);
    let errors: Vec<String> = std::thread::scope(|scope| {
        let asks: Vec<_> = (0..8)
            .map(|n| {
                let (fetcher, barrier, url) = (&fetcher, &barrier, dead_url(n));
                scope.spawn(move || {
                    barrier.wait();
                    get(fetcher, &url).unwrap_err()
                })
            })
            .collect();
        asks.into_iter().map(|ask| ask.join().unwrap().to_string()).collect()
    });
    assert_eq!(dead.connections(), 1);
    assert!(errors.iter().all(|e| *e == errors[0] && e.starts_with(&format!("{} failed: ", dead.host()))));
    assert!(matches!(get(&fetcher, &dead_url(9)), Err(FetchError::Unreachable { .. })));
    assert_eq!(dead.connections(), 1);
    // Near miss: another port of the same address answers.
    assert_eq!(get(&fetcher, &format!("{}/index.yaml", live.url())).unwrap(), b"ok");

    // Just before the minute ends: still remembered.
    *now.lock().unwrap() += memory - Duration::from_secs(1);
    assert!(get(&fetcher, &dead_url(10)).is_err());
    assert_eq!(dead.connections(), 1);
    // Once it ends: asked again (and remembered again).
    *now.lock().unwrap() += Duration::from_secs(1);
    assert!(get(&fetcher, &dead_url(11)).is_err());
    assert_eq!(dead.connections(), 2);
    assert!(get(&fetcher, &dead_url(12)).is_err());
    assert_eq!(dead.connections(), 2);
}

/// A name that does not resolve is remembered after one attempt: later chart requests to the host
/// stop before a client is made or the name is looked up again; another name is not.
#[test]
fn an_unresolvable_host_is_remembered_after_one_attempt() {
    let known = ["https://charts.fluxplan.invalid/stable", "https://other.fluxplan.invalid/stable"];
    let access = Access {
        hosts: HostPolicy::new(known, [], []).unwrap(),
        insecure: Default::default(),
        timeout: None,
        failed_hosts: FailedHosts::for_plan(),
    };
    let url = "https://charts.fluxplan.invalid/stable/index.yaml";
    assert!(access.remembered_failure(url, None).is_none(), "nothing failed yet");
    let error = get(&Fetcher::new(access.clone()).unwrap(), url).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("charts.fluxplan.invalid failed: cannot resolve charts.fluxplan.invalid"),
        "{error}"
    );
    // Another chart of the same host: told the same, from memory.
    let remembered = access.remembered_failure("https://charts.fluxplan.invalid/stable/db-1.0.0.tgz", None);
    assert_eq!(remembered, Some(error));
    // Near miss: another host.
    assert!(access.remembered_failure("https://other.fluxplan.invalid/stable/index.yaml", None).is_none());
}
