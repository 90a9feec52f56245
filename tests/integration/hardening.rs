//! A pull request cannot crash or starve the bot: deep renders do not overflow a stack, a plan
//! that kills its process is given up after `--max-attempts`, unverified webhook bodies and idle
//! connections cannot lock signed deliveries and `/healthz` out, the data directory is
//! owner-only, and what a dead process leaves behind (workers, exports) goes.

use crate::bot::{
    connect_from, file_url, final_status, fleet, github_env, hanging_kustomize, metric, pull_request, push,
    raw_connection, read_until_closed, refused, store, Bot, REPO,
};
use crate::fake_github::FakeGitHub;
use crate::fixture::{fluxplan_bin, process_running, wait_for, Repo, WAIT};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const MIB: u64 = 1024 * 1024;

/// A repository whose `apps` Kustomization's path starts a chain of `depth` kustomizations, each
/// listing the next as its only resource; base is the bootstrap alone.
fn nested_chain(depth: usize) -> (Repo, String, String) {
    let repo = Repo::bootstrap("prod");
    repo.write("clusters/prod/.keep", "");
    let base = repo.commit("base");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./chain/0", "");
    for level in 0..depth {
        repo.write(
            &format!("chain/{level}/kustomization.yaml"),
            &format!("resources:\n- ../{}\n", level + 1),
        );
    }
    repo.write(&format!("chain/{depth}/kustomization.yaml"), "resources:\n- settings.yaml\n");
    repo.config_map(&format!("chain/{depth}/settings.yaml"), "settings", "default");
    let head = repo.commit("a deep chain");
    (repo, base, head)
}

#[test]
fn a_chain_of_two_thousand_nested_kustomizations_crashes_neither_build_nor_plan() {
    let (repo, base, head) = nested_chain(2000);
    let path = repo.path().to_str().unwrap();
    let runs = [
        ("build", fluxplan_cmd(&["build", "--repo", path, "--rev", &head, "--format", "ids"]), 0..=1),
        ("plan", fluxplan_cmd(&["plan", "--repo", path, "--base", &base, "--head", &head]), 0..=3),
    ];
    for (what, mut command, exits) in runs {
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Killed by a signal (the abort of a stack overflow) has no exit code.
        let code =
            out.status.code().unwrap_or_else(|| panic!("{what} was killed: {:?}\n{stderr}", out.status));
        assert!(exits.contains(&code), "{what} exited {code}\n{stderr}");
        assert!(!stderr.contains("overflowed its stack"), "{what}: {stderr}");
    }
}

fn fluxplan_cmd(args: &[&str]) -> Command {
    let mut command = Command::new(fluxplan_bin());
    command.args(args).stdin(Stdio::null());
    command
}

/// Lines of the bot's log (all its processes) that contain `needle`.
fn log_lines(data_dir: &Path, needle: &str) -> usize {
    std::fs::read_to_string(data_dir.join("bot.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

#[test]
fn a_plan_that_kills_serve_fails_after_max_attempts_and_is_not_queued_again() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    repo.write("apps/hang", "");
    let head = push(&repo, "stuck", None);
    github.add_pull(REPO, 71, &head, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    let marker = format!("3600.{}71", std::process::id());
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_KUSTOMIZE", hanging_kustomize(data.path(), &marker)));
    // Long enough that a loaded machine still renews it in time (a lease lost to load would
    // count as an attempt of its own).
    env.push(("FLUXPLAN_JOB_LEASE_SECS", "3".into()));
    env.push(("FLUXPLAN_MAX_ATTEMPTS", "2".into()));
    env.push(("FLUXPLAN_WORKERS", "1".into()));
    // No resync while the attempts die: it would queue a second plan of the head being planned.
    env.push(("FLUXPLAN_RESYNC_SECS", "0".into()));
    let mut bot = Bot::start(data.path(), &env);
    assert_eq!(bot.github("pull_request", "c1", &pull_request("opened", &repo, 71, &head, &base)), 202);
    let (runtime, store) = store(data.path());
    let jobs = || runtime.block_on(store.jobs_of("github", REPO, 71)).unwrap();
    let runs = || runtime.block_on(store.runs_of("github", REPO, 71)).unwrap();
    // Each attempt dies mid-plan (as a stack overflow would abort the process); a new process
    // takes the job over once its lease expires. On a loaded machine a lease can also run out
    // under a live process, which then plans again itself: that is an attempt too, so an attempt
    // may be under way already, or the last one given up, when the test looks.
    for attempt in 1..=2 {
        wait_for(&format!("attempt {attempt} to be planning, or the job given up"), WAIT, || {
            let (jobs, runs) = (jobs(), runs());
            let [(_, _, status, attempts)] = &jobs[..] else { return false };
            let planning = status == "running"
                && *attempts >= attempt
                && runs.last().is_some_and(|r| r.status == "running");
            planning || status == "failed"
        });
        bot.kill();
        bot = Bot::start(data.path(), &env);
    }
    github.wait_until("the failure status", || final_status(&github, &head).is_some());
    let status = final_status(&github, &head).unwrap();
    assert_eq!(status["state"], "failure", "{status}");
    assert!(status["description"].as_str().unwrap().starts_with("could not be planned"), "{status}");
    let recorded = runs();
    let statuses: Vec<&str> = recorded.iter().map(|r| r.status.as_str()).collect();
    let (last, earlier) = statuses.split_last().unwrap();
    assert_eq!((*last, earlier.iter().all(|s| *s == "abandoned")), ("failed", true), "{statuses:?}");
    let error = recorded.last().unwrap().error.as_deref().unwrap_or("");
    assert!(error.contains("2 attempts"), "{error}");
    // A process with the resync on: two passes queue nothing, the head used up its attempts.
    bot.kill();
    env.push(("FLUXPLAN_RESYNC_SECS", "1".into()));
    let _bot = Bot::start(data.path(), &env);
    let passes = log_lines(data.path(), "resync pass done");
    wait_for("two more resync passes", WAIT, || log_lines(data.path(), "resync pass done") >= passes + 2);
    let jobs = jobs();
    assert_eq!(jobs.len(), 1, "queued again: {jobs:?}");
    assert_eq!(jobs[0].2, "failed");
    // Its kustomize died with each process that ran it.
    wait_for("the hanging kustomize processes to die with their parents", WAIT, || !process_running(&marker));
}

/// True once the server answered on `stream` or closed it (nothing is read).
fn answered(stream: &std::net::TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let seen = match stream.peek(&mut [0u8; 1]) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).unwrap();
    seen
}

#[test]
fn slow_unsigned_bodies_from_one_client_leave_room_for_signed_deliveries() {
    // The bodies are held for their share alone, not cut for their pace.
    let (_github, _data, bot) = patient_bot(false, &[]);
    // One client announces 64 MiB of unsigned bodies and sends them a byte at a time.
    let sizes = [25 * MIB, 25 * MIB, 14 * MIB];
    let slow: Vec<_> = sizes.iter().map(|size| attack("127.0.0.2", &bot, *size, 1)).collect();
    wait_for_held(&bot, &slow);
    // A correctly signed delivery from another client is answered.
    assert_eq!(bot.github("ping", "p1", &json!({"zen": "Keep it logically awesome.", "hook_id": 1})), 200);
    drop(slow);
}

/// An unsigned GitHub delivery from `ip` announcing `declared` bytes, of which `sent` are sent
/// (from a thread: the server may answer and close before taking them all).
struct Attack {
    stream: std::net::TcpStream,
    declared: u64,
    sent: u64,
    writer: Option<std::thread::JoinHandle<()>>,
}

fn attack(ip: &str, bot: &Bot, declared: u64, sent: u64) -> Attack {
    let headers = format!(
        "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\nX-GitHub-Event: ping\r\nContent-Length: {declared}\r\n\r\n"
    );
    let stream = connect_from(ip, bot, &headers);
    let mut writing = stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut writing, &vec![b'x'; sent as usize]);
    });
    Attack { stream, declared, sent, writer: Some(writer) }
}

impl Attack {
    fn written(&self) -> bool {
        self.writer.as_ref().is_none_or(std::thread::JoinHandle::is_finished)
    }
}

impl Drop for Attack {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// Waits until the bodies the server still reads are all sent and accounted for in
/// `fluxplan_webhook_unverified_bytes`: the bytes received (or, by a server that reserves what
/// a body announces, the bytes announced).
fn wait_for_held(bot: &Bot, attacks: &[Attack]) {
    wait_for("the attacking bodies to be held or refused", WAIT, || {
        let reading: Vec<_> = attacks.iter().filter(|a| !answered(&a.stream)).collect();
        let sent: u64 = reading.iter().map(|a| a.sent).sum();
        let declared: u64 = reading.iter().map(|a| a.declared).sum();
        let held = metric(bot, "fluxplan_webhook_unverified_bytes");
        reading.iter().all(|a| a.written()) && (held == Some(sent as f64) || held == Some(declared as f64))
    });
}

/// Signed pings from 127.0.0.1 while `attacks` are held: each must be answered 200.
fn signed_pings_answered(bot: &Bot, attacks: &[Attack], pings: usize) {
    wait_for_held(bot, attacks);
    for n in 0..pings {
        let delivery = format!("ping-{n}");
        let status =
            bot.github("ping", &delivery, &json!({"zen": "Keep it logically awesome.", "hook_id": 1}));
        assert_eq!(status, 200, "signed ping {n} while the attack holds");
    }
}

#[test]
fn two_clients_announcing_bodies_they_never_send_do_not_refuse_signed_deliveries() {
    // Nothing cuts the attack short: the bodies are held as long as the connections are open.
    let (_github, _data, bot) = patient_bot(false, &[]);
    let attacks: Vec<_> = ["127.0.0.2", "127.0.0.3"]
        .iter()
        .flat_map(|ip| [attack(ip, &bot, 25 * MIB, 0), attack(ip, &bot, 7 * MIB, 0)])
        .collect();
    signed_pings_answered(&bot, &attacks, 5);
}

#[test]
fn three_clients_sending_nothing_slowly_or_most_of_their_bodies_do_not_refuse_signed_deliveries() {
    let (_github, _data, bot) = patient_bot(false, &[]);
    // Each client: a 25 MiB body all but sent (then stalled), one barely begun, one never sent:
    // more than 64 MiB between them.
    let attacks: Vec<_> = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        .iter()
        .flat_map(|ip| {
            [
                attack(ip, &bot, 25 * MIB, 25 * MIB - 1),
                attack(ip, &bot, 4 * MIB, 1),
                attack(ip, &bot, 2 * MIB, 0),
            ]
        })
        .collect();
    signed_pings_answered(&bot, &attacks, 5);
    // A client beyond its share is refused: its own bodies, no one else's.
    let over = attack("127.0.0.2", &bot, 20 * MIB, 20 * MIB);
    wait_for("the client over its share to be refused", WAIT, || {
        refused(&bot, "client-share").is_some_and(|n| n >= 1.0)
    });
    drop(over);
    signed_pings_answered(&bot, &attacks, 1);
}

#[test]
fn a_body_sent_too_slowly_is_cut() {
    let (_github, _data, bot) = patient_bot(true, &[]);
    let mut trickle = raw_connection(
        &bot,
        "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: 1000000\r\n\r\n0123456789",
    );
    assert!(read_until_closed(&mut trickle).starts_with("HTTP/1.1 408"));
    assert!(refused(&bot, "too-slow").is_some_and(|n| n >= 1.0));
    assert_eq!(metric(&bot, "fluxplan_webhook_unverified_bytes"), Some(0.0));
}

#[test]
fn idle_connections_do_not_stop_healthz() {
    let (_github, _data, bot) = patient_bot(true, &[]);
    let address = bot.url.trim_start_matches("http://").to_string();
    // More idle connections than the cap (512), all accepted before the health check.
    let idle: Vec<_> = (0..600).map(|_| std::net::TcpStream::connect(&address).unwrap()).collect();
    assert_eq!(bot.get("/healthz"), (200, "ok".to_string()));
    // Some of them were closed to make room, oldest first. (Whether the newest is kept depends on
    // whether the server saw it idle before the cap was reached: not asserted.)
    assert!(idle.iter().take(10).any(answered), "no idle connection was closed");
}

/// `/healthz` asked `times` from 127.0.0.1, each on a new connection: how many answered `ok`.
fn healthz_answers(bot: &Bot, times: usize) -> usize {
    let client =
        reqwest::blocking::Client::builder().timeout(std::time::Duration::from_secs(10)).build().unwrap();
    (0..times)
        .filter(|_| {
            let answer = client.get(format!("{}/healthz", bot.url)).header("connection", "close").send();
            answer.is_ok_and(|a| a.status() == 200 && a.text().is_ok_and(|t| t == "ok"))
        })
        .count()
}

/// 560 connections from 127.0.0.4, each a webhook request waiting for a body that never
/// comes, held until the returned streams are dropped; once the server has taken or closed
/// them all (at least 560 - 512 closed at the cap).
fn waiting_for_bodies(bot: &Bot) -> Vec<std::net::TcpStream> {
    let waiting: Vec<_> = (0..560)
        .map(|_| {
            connect_from(
                "127.0.0.4",
                bot,
                "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: 1\r\n\r\n",
            )
        })
        .collect();
    // (Not asked of the server: a server locked by them would not answer.)
    wait_for("the connections over the cap to be closed", WAIT, || {
        waiting.iter().filter(|s| answered(s)).count() >= 560 - 512
    });
    waiting
}

/// A bot that waits for headers as long as an attacker takes and, unless `paced`, for bodies too
/// (no minimum rate); `extra` is more environment. Dropped in reverse: the bot first.
fn patient_bot(paced: bool, extra: &[(&'static str, &str)]) -> (FakeGitHub, tempfile::TempDir, Bot) {
    let github = FakeGitHub::start();
    let data = tempfile::tempdir().unwrap();
    let mut env = github_env(&github);
    env.push(("FLUXPLAN_HEADER_TIMEOUT_SECS", "600".into()));
    if !paced {
        env.push(("FLUXPLAN_MIN_BODY_RATE", "0".into()));
    }
    env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    let bot = Bot::start(data.path(), &env);
    (github, data, bot)
}

#[test]
fn one_client_waiting_for_bodies_on_many_connections_does_not_stop_healthz() {
    // The bodies are waited for as long as the connections are open.
    let (_github, _data, bot) = patient_bot(false, &[]);
    let waiting = waiting_for_bodies(&bot);
    assert_eq!(healthz_answers(&bot, 10), 10);
    // Beyond its own cap (an eighth of 512), the client's connections were closed.
    wait_for("all but 64 of the client's connections to be closed", WAIT, || {
        waiting.iter().filter(|s| answered(s)).count() >= 560 - 64
    });
}

#[test]
fn at_the_cap_the_client_holding_the_most_connections_makes_room() {
    // No per-client cap: the one at the global cap keeps /healthz answering.
    let (_github, _data, bot) = patient_bot(false, &[("FLUXPLAN_MAX_CONNECTIONS_PER_CLIENT", "512")]);
    let _waiting = waiting_for_bodies(&bot);
    assert_eq!(healthz_answers(&bot, 10), 10);
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode()
        & 0o777
}

#[test]
fn the_data_directory_database_and_mirrors_are_owner_only() {
    let github = FakeGitHub::start();
    let (repo, base) = fleet();
    let head = push(&repo, "renamed", None);
    github.add_pull(REPO, 72, &head, "change", "main", &base, &file_url(&repo));
    let data = tempfile::tempdir().unwrap();
    // A data directory an older fluxplan left open to every local user.
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bot = Bot::start(data.path(), &github_env(&github));
    assert_eq!(bot.github("pull_request", "m1", &pull_request("opened", &repo, 72, &head, &base)), 202);
    github.wait_until("the plan", || final_status(&github, &head).is_some());
    assert_eq!(mode(data.path()), 0o700, "the data directory");
    let database: Vec<PathBuf> = ["fluxplan.db", "fluxplan.db-wal", "fluxplan.db-shm"]
        .iter()
        .map(|name| data.path().join(name))
        .filter(|path| path.exists())
        .collect();
    assert!(database.len() >= 2, "the database and its write-ahead log: {database:?}");
    for file in database {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    let mirrors = data.path().join("mirrors");
    assert_eq!(mode(&mirrors), 0o700, "the mirrors directory");
    let each: Vec<_> = std::fs::read_dir(&mirrors).unwrap().flatten().map(|e| e.path()).collect();
    assert!(!each.is_empty());
    for mirror in each {
        assert_eq!(mode(&mirror) & 0o077, 0, "{}", mirror.display());
    }
}

/// The exports (`fluxplan-src-*`) in `scratch`.
fn exports(scratch: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(scratch)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("fluxplan-src-")))
        .collect();
    found.sort();
    found
}

/// Kills, by pid, every process whose command line holds `marker` (a test's own sleeps).
fn kill_marked(marker: &str) {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[test]
fn exports_of_dead_processes_are_removed_and_those_of_live_ones_kept() {
    let scratch = tempfile::tempdir().unwrap();
    let (repo, _) = fleet();
    repo.write("apps/hang", "");
    let marker = format!("3600.{}73", std::process::id());
    let kustomize = hanging_kustomize(scratch.path(), &marker);
    let hanging_build = || {
        fluxplan_cmd(&["build", "--repo", repo.path().to_str().unwrap()])
            .env("FLUXPLAN_WORKDIR", scratch.path())
            .env("FLUXPLAN_KUSTOMIZE", &kustomize)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // A build killed mid-render leaves its export behind.
    let mut dead = hanging_build();
    wait_for("the first export", WAIT, || exports(scratch.path()).len() == 1);
    let left = exports(scratch.path()).remove(0);
    dead.kill().unwrap();
    dead.wait().unwrap();
    // The next process removes it as it starts, then renders from an export of its own, which
    // is owner-only.
    let mut alive = hanging_build();
    wait_for("the second export", WAIT, || exports(scratch.path()).iter().any(|p| *p != left));
    let live = exports(scratch.path()).into_iter().find(|p| *p != left).unwrap();
    let left_gone = !left.exists();
    let live_mode = mode(&live);
    // A third process starts while the second renders: the second's export stays.
    let (plain, _) = fleet();
    let third = fluxplan_cmd(&["build", "--repo", plain.path().to_str().unwrap()])
        .env("FLUXPLAN_WORKDIR", scratch.path())
        .output()
        .unwrap();
    assert!(third.status.success(), "{}", String::from_utf8_lossy(&third.stderr));
    let live_kept = live.exists();
    alive.kill().unwrap();
    alive.wait().unwrap();
    kill_marked(&marker);
    assert!(left_gone, "the dead build's export {} is still there", left.display());
    assert_eq!(live_mode, 0o700, "{}", live.display());
    assert!(live_kept, "the live build's export {} was removed", live.display());
}
