//! After the merge, end to end with the worker driven by hand: a pull request is planned, merges
//! (a real merge commit in a real repository, the real `pull_request` closed webhook body), the
//! merge run records the plan, and the follow-up reads the fake Kubernetes API until the
//! Kustomization reaches the merge commit, then compares and comments on the fake GitHub.
//! The test moves the Kustomization's status between two steps of the worker: the delay of a
//! real rollout, without sleeping.

use crate::bot::postgres_database;
use crate::fake_github::FakeGitHub;
use crate::fake_kube::FakeKube;
use crate::fixture::Repo;
use fluxplan::cancel::CancelToken;
use fluxplan::cluster::kube::KubeOptions;
use fluxplan::cluster::rollout::{RolloutReader, RolloutReaders};
use fluxplan::forge::github::{GitHub, GitHubAuth};
use fluxplan::forge::webhook::{parse_github, Event};
use fluxplan::forge::ForgeClient;
use fluxplan::jobs::mirror::Mirrors;
use fluxplan::jobs::{jobs_for, FollowupConfig, FollowupTarget, JobPayload, Worker, WorkerConfig};
use fluxplan::plan::actual::{Followup, KustomizationResult, Outcome};
use fluxplan::planner;
use fluxplan::server::metrics::Metrics;
use fluxplan::store::{Enqueued, RunOutcome, RunRow, Store};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const REPO: &str = "acme/fleet";
const CONTEXT: &str = "fake";

/// A kube client of the fake API server (inside a runtime).
fn fake_client(kube: &FakeKube) -> kube::Client {
    fluxplan::tls::install_crypto_provider();
    kube::Client::try_from(kube::Config::new(kube.url().parse().unwrap())).unwrap()
}

fn file_url(repo: &Repo) -> String {
    format!("file://{}", repo.path().display())
}

/// `apps` renders ConfigMaps `settings` and `old` on main; the pull request (branch `change`)
/// deletes `old` and adds `new`.
struct Fleet {
    repo: Repo,
    base: String,
    head: String,
}

fn fleet() -> Fleet {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/settings.yaml", "settings", "default");
    repo.config_map("apps/old.yaml", "old", "default");
    let base = repo.commit("base");
    repo.git(&["checkout", "-q", "-b", "change"]);
    repo.remove("apps/old.yaml");
    // Unlike `old` (git would take it for a rename of `old` and conflict with its deletion).
    let data: String = (0..12).map(|i| format!("  key{i}: value-{i}-{}\n", "x".repeat(i))).collect();
    repo.write(
        "apps/new.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\n  namespace: default\ndata:\n{data}"
        ),
    );
    let head = repo.commit("replace old with new");
    repo.git(&["checkout", "-q", "main"]);
    Fleet { repo, base, head }
}

/// Merges `change` into main with a merge commit; returns it.
fn merge(repo: &Repo) -> String {
    repo.git(&["checkout", "-q", "main"]);
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo.path())
        .args(["merge", "--no-ff", "-m", "merge change", "change"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git merge: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    repo.git(&["rev-parse", "HEAD"]).trim().to_string()
}

fn apps(revision: &str, ids: &[&str], ready: Value, attempted: Option<&str>) -> Value {
    json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"},
        "spec": {"interval": "10m", "path": "./apps", "prune": true,
                 "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {
            "lastAppliedRevision": format!("main@sha1:{revision}"),
            "lastAttemptedRevision": format!("main@sha1:{}", attempted.unwrap_or(revision)),
            "conditions": [ready],
            "inventory": {"entries": ids.iter().map(|id| json!({"id": id, "v": "v1"})).collect::<Vec<_>>()},
        }
    })
}

fn ready_true() -> Value {
    json!({"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "message": "Applied revision"})
}

const SETTINGS: &str = "default_settings__ConfigMap";
const OLD: &str = "default_old__ConfigMap";
const NEW: &str = "default_new__ConfigMap";

/// A worker of one replica, with its store, the fake forge and the fake cluster.
struct Harness {
    runtime: tokio::runtime::Runtime,
    github: FakeGitHub,
    kube: FakeKube,
    store: Store,
    worker: Worker,
    metrics: Arc<Metrics>,
    forges: Arc<fluxplan::jobs::Forges>,
    readers: Arc<RolloutReaders>,
    config: Arc<WorkerConfig>,
    _data: tempfile::TempDir,
}

impl Harness {
    fn new(fleet: &Fleet, deadline: Duration) -> Harness {
        let kube = FakeKube::start(vec![apps(&fleet.base, &[SETTINGS, OLD], ready_true(), None)]);
        Harness::with(fleet, deadline, kube, None)
    }

    /// A replica on `database` (default: an embedded SQLite file) reading `kube`.
    fn with(fleet: &Fleet, deadline: Duration, kube: FakeKube, database: Option<&str>) -> Harness {
        let github = FakeGitHub::start();
        github.add_pull(REPO, 1, &fleet.head, "change", "main", &fleet.base, &file_url(&fleet.repo));
        let data = tempfile::tempdir().unwrap();
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let url = database.map(str::to_string).unwrap_or_else(|| Store::default_url(data.path()));
        let store = runtime.block_on(async {
            let store = Store::connect(&url).await.unwrap();
            store.migrate().await.unwrap();
            store
        });
        let readers = Arc::new(RolloutReaders::new(2));
        let client = runtime.block_on(async { fake_client(&kube) });
        readers.insert(CONTEXT, Arc::new(RolloutReader::new(client, 2)));
        let config = WorkerConfig {
            data_dir: data.path().to_path_buf(),
            public_url: None,
            allow_forks: false,
            lease: Duration::from_secs(300),
            max_attempts: 3,
            // Plans try the context and go offline (no kubeconfig here); follow-ups read the fake
            // through the reader handed in for the context.
            clusters: planner::Clusters::Live(KubeOptions {
                context: Some(CONTEXT.into()),
                ..Default::default()
            }),
            comment_limit: 65_536,
            limits: planner::Limits::default(),
            helm: Default::default(),
            roles: Default::default(),
            reply_window: Duration::from_secs(600),
            shutdown: CancelToken::new(),
            followup: FollowupConfig {
                deadline,
                poll_min: Duration::ZERO,
                poll_max: Duration::ZERO,
                readers: readers.clone(),
            },
        };
        let forge =
            runtime.block_on(async { GitHub::new(&github.url(), GitHubAuth::Token("test-token".into())) });
        let forges = fluxplan::jobs::Forges {
            github: Some((ForgeClient::GitHub(forge.unwrap()), Some("test-token".into()))),
            gitlab: None,
        };
        let metrics = Arc::new(Metrics::new());
        let forges = Arc::new(forges);
        let config = Arc::new(config);
        let worker = Worker::new(
            "replica-a-0".into(),
            store.clone(),
            forges.clone(),
            Arc::new(Mirrors::new(data.path().join("mirrors"))),
            config.clone(),
            metrics.clone(),
        );
        Harness { runtime, github, kube, store, worker, metrics, forges, readers, config, _data: data }
    }

    /// Another replica: its own connection pool to `database`, its own worker and metrics,
    /// the same forge and cluster.
    fn replica(&self, name: &str, database: &str) -> (Worker, Arc<Metrics>) {
        let store = self.runtime.block_on(Store::connect(database)).unwrap();
        let metrics = Arc::new(Metrics::new());
        let mirrors = Arc::new(Mirrors::new(self._data.path().join(format!("mirrors-{name}"))));
        let worker = Worker::new(
            format!("{name}-0"),
            store,
            self.forges.clone(),
            mirrors,
            self.config.clone(),
            metrics.clone(),
        );
        (worker, metrics)
    }

    /// Does the next due job; false when none was due.
    fn step(&self) -> bool {
        self.runtime.block_on(self.worker.step()).unwrap()
    }

    fn enqueue(&self, payloads: &[JobPayload]) -> Enqueued {
        let jobs: Vec<_> = payloads.iter().map(JobPayload::to_job).collect();
        self.runtime.block_on(self.store.enqueue(&jobs)).unwrap()
    }

    /// (kind, status, attempts) of the pull request's jobs, oldest first.
    fn jobs(&self) -> Vec<(String, String, i64)> {
        let jobs = self.runtime.block_on(self.store.jobs_of("github", REPO, 1)).unwrap();
        jobs.into_iter().map(|(kind, _, status, attempts)| (kind, status, attempts)).collect()
    }

    fn merge_run(&self) -> RunRow {
        let runs = self.runtime.block_on(self.store.runs_of("github", REPO, 1)).unwrap();
        let mut merges: Vec<RunRow> = runs.into_iter().filter(|r| r.trigger == "merge").collect();
        assert_eq!(merges.len(), 1, "one merge run");
        merges.remove(0)
    }

    fn followup_comments(&self) -> Vec<String> {
        let comments = self.github.comments(REPO, 1);
        comments
            .into_iter()
            .map(|(_, body)| body)
            .filter(|b| b.starts_with("<!-- fluxplan-followup"))
            .collect()
    }

    fn predictions(&self, outcome: &str) -> u64 {
        self.metrics.predictions.with_label_values(&[outcome]).get()
    }

    /// Plans the pull request, merges it, delivers the real `closed` webhook body, and runs the
    /// closed and merged jobs: a follow-up of `apps` is queued. Returns the merge commit.
    fn plan_and_merge(&self, fleet: &Fleet) -> String {
        self.enqueue(&[plan_payload(fleet)]);
        assert!(self.step(), "the plan job");
        let sticky = self.github.comments(REPO, 1);
        assert!(
            sticky.iter().any(|(_, b)| b.starts_with("<!-- fluxplan -->")),
            "the plan was posted: {sticky:?}"
        );
        let merge_sha = merge(&fleet.repo);
        let payloads = merged_event(fleet, &merge_sha);
        assert_eq!(payloads.len(), 2, "closed and merged: {payloads:?}");
        self.enqueue(&payloads);
        assert!(self.step() && self.step(), "the closed and merged jobs");
        let kinds: Vec<(String, String)> = self.jobs().into_iter().map(|(k, s, _)| (k, s)).collect();
        assert_eq!(
            kinds,
            [("plan", "done"), ("closed", "done"), ("merged", "done"), ("followup", "queued")]
                .map(|(k, s)| (k.to_string(), s.to_string()))
        );
        merge_sha
    }

    /// One follow-up read that finds the rollout still under way: the job waits, using up no
    /// attempt.
    fn poll_not_yet(&self) {
        assert!(self.step(), "the follow-up job");
        let followup = self.jobs().pop().unwrap();
        assert_eq!(followup, ("followup".to_string(), "queued".to_string(), 0), "waiting, no attempt used");
        assert!(self.followup_comments().is_empty());
    }
}

fn plan_payload(fleet: &Fleet) -> JobPayload {
    let repo = fluxplan::forge::RepoInfo {
        forge: fluxplan::forge::ForgeKind::GitHub,
        full_name: REPO.into(),
        project_id: None,
        clone_url: file_url(&fleet.repo),
        installation_id: None,
        web_url: None,
    };
    JobPayload::Plan {
        repo,
        number: 1,
        base_ref: "main".into(),
        head_sha: fleet.head.clone(),
        trigger: "pull-request".into(),
        author: None,
    }
}

/// The jobs the real `pull_request` closed (merged) webhook body asks for.
fn merged_event(fleet: &Fleet, merge_sha: &str) -> Vec<JobPayload> {
    let body = merged_body(fleet, merge_sha);
    let event = parse_github("pull_request", body.to_string().as_bytes()).unwrap();
    assert!(matches!(&event, Event::Pull(p) if p.merged));
    jobs_for(&event, false).unwrap()
}

/// A real `pull_request` webhook body (the `closed` one, merged) pointed at the fixture.
fn merged_body(fleet: &Fleet, merge_sha: &str) -> Value {
    let mut body: Value =
        serde_json::from_str(include_str!("../fixtures/github-webhooks/pull_request-closed.json")).unwrap();
    body["number"] = json!(1);
    body["repository"]["full_name"] = json!(REPO);
    body["repository"]["clone_url"] = json!(file_url(&fleet.repo));
    let pull = &mut body["pull_request"];
    pull["number"] = json!(1);
    pull["merged"] = json!(true);
    pull["merge_commit_sha"] = json!(merge_sha);
    pull["head"]["sha"] = json!(fleet.head);
    pull["head"]["ref"] = json!("change");
    pull["head"]["repo"]["full_name"] = json!(REPO);
    pull["base"]["ref"] = json!("main");
    pull["base"]["sha"] = json!(fleet.base);
    pull["base"]["repo"]["full_name"] = json!(REPO);
    body
}

fn followup_of(run: &RunRow) -> Followup {
    serde_json::from_str(run.followup.as_deref().expect("the merge run has a follow-up")).unwrap()
}

fn only_result(run: &RunRow) -> KustomizationResult {
    let followup = followup_of(run);
    assert_eq!(followup.results.len(), 1, "{followup:?}");
    followup.results.into_values().next().unwrap()
}

#[test]
fn after_merge_exact_rollout_says_applied_as_planned() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    let merge_sha = h.plan_and_merge(&fleet);
    let run = h.merge_run();
    assert_eq!(run.merge_sha.as_deref(), Some(merge_sha.as_str()));
    assert_eq!(run.notes.as_deref(), Some("[]"), "the plan of the head was current: no stale-plan note");
    h.poll_not_yet();
    // The controller reconciles the merge commit: `old` pruned, `new` created.
    h.kube.put(apps(&merge_sha, &[NEW, SETTINGS], ready_true(), None));
    assert!(h.step(), "the follow-up job again");
    assert!(!h.step(), "nothing left to do");
    let run = h.merge_run();
    assert_eq!(run.followup_outcome.as_deref(), Some("exact"));
    let result = only_result(&run);
    assert_eq!(
        (result.outcome, result.namespace.as_str(), result.name.as_str()),
        (Outcome::Exact, "flux-system", "apps")
    );
    let comments = h.followup_comments();
    assert_eq!(comments.len(), 1, "one follow-up comment: {comments:?}");
    assert!(comments[0].contains("applied as planned"), "{}", comments[0]);
    assert!(comments[0].contains("ReconciliationSucceeded"), "Ready conditions are shown: {}", comments[0]);
    let sticky: Vec<_> =
        h.github.comments(REPO, 1).into_iter().filter(|(_, b)| b.starts_with("<!-- fluxplan -->")).collect();
    assert_eq!(sticky.len(), 1, "the sticky plan comment is left alone");
    assert_eq!((h.predictions("exact"), h.predictions("differs")), (1, 0));
    assert!(h.metrics.render().contains("fluxplan_prediction_total{outcome=\"exact\"} 1"));
    // Read-only: the follow-up only ever sent GETs, and never asked to watch.
    let requests = h.kube.requests();
    assert!(requests.iter().all(|(method, path)| method == "GET" && !path.contains("watch")), "{requests:?}");
}

#[test]
fn after_merge_a_later_revision_counts_as_reached() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    let merge_sha = h.plan_and_merge(&fleet);
    h.poll_not_yet();
    // Another merge lands before the controller's next reconcile: it applies both at once.
    fleet.repo.write("docs.md", "later");
    let later = fleet.repo.commit("a later change");
    // A revision that merely differs (not a descendant of the merge) is not reached.
    h.kube.put(apps(&fleet.base.replace(|c: char| c != '0', "1"), &[NEW, SETTINGS], ready_true(), None));
    h.poll_not_yet();
    h.kube.put(apps(&later, &[NEW, SETTINGS], ready_true(), None));
    assert!(h.step());
    let run = h.merge_run();
    assert_eq!(run.followup_outcome.as_deref(), Some("exact"));
    let result = only_result(&run);
    assert!(result.notes.iter().any(|n| n.contains("a later revision")), "{:?}", result.notes);
    assert_ne!(later, merge_sha);
}

#[test]
fn after_merge_missed_prune_is_reported_as_a_difference() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    let merge_sha = h.plan_and_merge(&fleet);
    h.poll_not_yet();
    // Applied, but `old` is still in the inventory: the prune the plan predicted did not happen.
    h.kube.put(apps(&merge_sha, &[NEW, OLD, SETTINGS], ready_true(), None));
    assert!(h.step());
    let run = h.merge_run();
    assert_eq!(run.followup_outcome.as_deref(), Some("differs"));
    let result = only_result(&run);
    assert_eq!(result.not_deleted, vec![OLD.to_string()]);
    assert!(result.not_created.is_empty() && result.unexpected.is_empty() && result.missing.is_empty());
    let comments = h.followup_comments();
    assert_eq!(comments.len(), 1);
    assert!(comments[0].contains("differs from the plan"), "{}", comments[0]);
    assert!(comments[0].contains("a missed prune): ConfigMap default/old"), "{}", comments[0]);
    assert_eq!(h.predictions("differs"), 1);
}

#[test]
fn after_merge_failed_reconcile_shows_the_controller_message() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    let merge_sha = h.plan_and_merge(&fleet);
    h.poll_not_yet();
    // The controller attempted the merge commit and failed; the applied revision stays the base.
    let ready = json!({"type": "Ready", "status": "False", "reason": "ReconciliationFailed",
                       "message": "ConfigMap/default/new dry-run failed: <b>admission webhook</b> denied @team"});
    h.kube.put(apps(&fleet.base, &[OLD, SETTINGS], ready, Some(&merge_sha)));
    assert!(h.step());
    let run = h.merge_run();
    assert_eq!(run.followup_outcome.as_deref(), Some("failed"));
    let result = only_result(&run);
    assert_eq!(result.ready.as_ref().map(|c| c.reason.as_str()), Some("ReconciliationFailed"));
    let comment = &h.followup_comments()[0];
    assert!(comment.contains("failed to reconcile"), "{comment}");
    assert!(comment.contains("False (ReconciliationFailed)"), "{comment}");
    assert!(comment.contains("&lt;b&gt;admission webhook&lt;/b&gt;"), "cluster text is escaped: {comment}");
    assert!(comment.contains("@\u{200b}team"), "no mentions from cluster text: {comment}");
    assert_eq!(h.predictions("failed"), 1);
}

#[test]
fn after_merge_rollout_that_never_comes_times_out() {
    let fleet = fleet();
    // A deadline already passed when the follow-up first looks: no waiting in the test.
    let h = Harness::new(&fleet, Duration::ZERO);
    h.plan_and_merge(&fleet);
    assert!(h.step(), "the follow-up job");
    assert!(!h.step(), "a timeout is final");
    let run = h.merge_run();
    assert_eq!(run.followup_outcome.as_deref(), Some("timeout"));
    let result = only_result(&run);
    assert_eq!(result.revision.as_deref(), Some(format!("main@sha1:{}", fleet.base).as_str()));
    let comment = &h.followup_comments()[0];
    assert!(comment.contains("not every Kustomization reached"), "{comment}");
    assert!(comment.contains("timed out"), "{comment}");
    assert_eq!(h.predictions("timeout"), 1);
}

#[test]
fn after_merge_plan_gone_stale_is_replanned_against_the_merge_commit() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    h.enqueue(&[plan_payload(&fleet)]);
    assert!(h.step(), "the plan of the head, against the base as it was");
    // Another pull request merges first and removes `old` itself: the plan shown (delete `old`)
    // is no longer what this merge does.
    fleet.repo.git(&["checkout", "-q", "main"]);
    fleet.repo.remove("apps/old.yaml");
    let moved = fleet.repo.commit("someone else removes old");
    let merge_sha = merge(&fleet.repo);
    h.enqueue(&merged_event(&fleet, &merge_sha));
    assert!(h.step() && h.step(), "closed and merged");
    let run = h.merge_run();
    assert_eq!(run.base_sha.as_deref(), Some(moved.as_str()), "planned against the base it landed on");
    let notes: Vec<String> = serde_json::from_str(run.notes.as_deref().unwrap()).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with("stale-plan: "), "{notes:?}");
    assert!(notes[0].contains(&moved[..8]), "{notes:?}");
    // The prediction is the merge commit's: `new` created, nothing deleted.
    h.kube.put(apps(&merge_sha, &[NEW, SETTINGS], ready_true(), None));
    assert!(h.step(), "the follow-up");
    let run = h.merge_run();
    assert_eq!(run.followup_outcome.as_deref(), Some("exact"), "{:?}", run.followup);
    let comment = &h.followup_comments()[0];
    assert!(comment.contains("> stale-plan: "), "the note is in the follow-up comment: {comment}");
}

#[test]
fn after_merge_base_moved_without_changing_the_plan_adds_no_note() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    h.enqueue(&[plan_payload(&fleet)]);
    assert!(h.step(), "the plan of the head");
    fleet.repo.git(&["checkout", "-q", "main"]);
    fleet.repo.write("docs.md", "unrelated");
    let moved = fleet.repo.commit("an unrelated change");
    let merge_sha = merge(&fleet.repo);
    h.enqueue(&merged_event(&fleet, &merge_sha));
    assert!(h.step() && h.step(), "closed and merged");
    let run = h.merge_run();
    assert_eq!(run.base_sha.as_deref(), Some(moved.as_str()), "re-planned against the base it landed on");
    assert_eq!(run.notes.as_deref(), Some("[]"), "the same plan: nothing went stale");
}

#[test]
fn after_merge_a_merge_that_cannot_be_planned_is_still_recorded() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    // A "merge commit" with no parent (the repository's first commit): no base to plan against.
    h.enqueue(&merged_event(&fleet, &fleet.base));
    assert!(h.step() && h.step(), "closed and merged");
    assert!(!h.step(), "nothing to watch");
    let runs = h.runtime.block_on(h.store.runs_of("github", REPO, 1)).unwrap();
    let run = runs.iter().find(|r| r.trigger == "merge").expect("the merge is recorded");
    assert_eq!(run.status, "failed");
    assert_eq!(run.merge_sha.as_deref(), Some(fleet.base.as_str()));
    assert!(run.error.as_deref().unwrap().contains("has no parent"), "{:?}", run.error);
    assert!(h.followup_comments().is_empty());
}

#[test]
fn after_merge_a_fast_forward_keeps_the_plan_of_its_head() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    h.enqueue(&[plan_payload(&fleet)]);
    assert!(h.step(), "the plan of the head");
    // GitLab's fast-forward merge: the head itself lands; its event names it as the merge.
    fleet.repo.git(&["checkout", "-q", "main"]);
    fleet.repo.git(&["merge", "-q", "--ff-only", "change"]);
    h.enqueue(&merged_event(&fleet, &fleet.head));
    assert!(h.step() && h.step(), "closed and merged");
    let run = h.merge_run();
    assert_eq!(run.base_sha.as_deref(), Some(fleet.base.as_str()), "the base its plan was made against");
    assert_eq!(run.notes.as_deref(), Some("[]"));
    h.kube.put(apps(&fleet.head, &[NEW, SETTINGS], ready_true(), None));
    assert!(h.step(), "the follow-up");
    assert_eq!(h.merge_run().followup_outcome.as_deref(), Some("exact"));
}

#[test]
fn after_merge_duplicate_followups_collapse() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    let merge_sha = h.plan_and_merge(&fleet);
    let run = h.merge_run();
    // The merge webhook delivered again (a new delivery id): its merged job collapses into the
    // first, and so does a follow-up of the same cluster, Kustomization and revision.
    let again = merged_event(&fleet, &merge_sha);
    assert_eq!(
        h.enqueue(&again),
        Enqueued::Jobs { queued: 1, superseded: 0 },
        "only `closed` is queued again"
    );
    let duplicate = JobPayload::Followup(FollowupTarget {
        repo: match &again[0] {
            JobPayload::Closed { repo, .. } => repo.clone(),
            other => panic!("{other:?}"),
        },
        number: 1,
        run_id: run.id,
        root: "clusters/prod".into(),
        context: CONTEXT.into(),
        namespace: "flux-system".into(),
        name: "apps".into(),
        revision: merge_sha.clone(),
        deadline_at: 0,
    });
    assert_eq!(h.enqueue(&[duplicate.clone(), duplicate]), Enqueued::Jobs { queued: 0, superseded: 0 });
    while h.step() {
        if h.jobs().iter().all(|(kind, status, _)| kind != "followup" || status == "done") {
            break;
        }
        // The rollout completes on the second look.
        h.kube.put(apps(&merge_sha, &[NEW, SETTINGS], ready_true(), None));
    }
    let kinds: Vec<String> = h.jobs().into_iter().map(|(kind, _, _)| kind).collect();
    assert_eq!(kinds, ["plan", "closed", "merged", "followup", "closed"]);
    assert_eq!(h.merge_run().id, run.id, "still one merge run");
    assert_eq!(h.followup_comments().len(), 1);
    assert_eq!(h.predictions("exact"), 1);
}

#[test]
fn merge_group_is_planned_on_its_head_and_gets_the_status() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    // The merge queue's branch: main with the pull request merged, as it will land.
    let repo = &fleet.repo;
    let queue_branch = format!("gh-readonly-queue/main/pr-1-{}", fleet.base);
    repo.git(&["checkout", "-q", "-b", &queue_branch, "main"]);
    repo.git(&[
        "-c",
        "user.email=a@b",
        "-c",
        "user.name=n",
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "queue",
        "change",
    ]);
    let group_head = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    // A second group whose head points `apps` at an empty directory: blocked.
    repo.git(&["checkout", "-q", "-b", "gh-readonly-queue/main/pr-2-x", "main"]);
    repo.mkdir("empty").write("empty/.keep", "");
    let apps_file = std::fs::read_to_string(repo.path().join("clusters/prod/apps.yaml")).unwrap();
    repo.write("clusters/prod/apps.yaml", &apps_file.replace("path: ./apps", "path: ./empty"));
    let blocked_head = repo.commit("empty");
    repo.git(&["checkout", "-q", "main"]);
    for (head, branch) in
        [(&group_head, queue_branch.as_str()), (&blocked_head, "gh-readonly-queue/main/pr-2-x")]
    {
        h.github.add_commit(REPO, head);
        let mut body: Value =
            serde_json::from_str(include_str!("../fixtures/github-webhooks/push.json")).unwrap();
        body["action"] = json!("checks_requested");
        body["repository"]["full_name"] = json!(REPO);
        body["repository"]["clone_url"] = json!(file_url(repo));
        body["merge_group"] = json!({
            "head_sha": head, "head_ref": format!("refs/heads/{branch}"),
            "base_sha": fleet.base, "base_ref": "refs/heads/main",
            "head_commit": {"id": head, "message": "queue"},
        });
        let event = parse_github("merge_group", body.to_string().as_bytes()).unwrap();
        let jobs = jobs_for(&event, false).unwrap();
        assert_eq!(jobs.len(), 1);
        h.enqueue(&jobs);
        assert!(h.step(), "the merge group job");
    }
    let last = |sha: &str| h.github.statuses(REPO, sha).last().cloned().unwrap();
    let status = last(&group_head);
    assert_eq!(
        (status["state"].as_str(), status["context"].as_str()),
        (Some("success"), Some("fluxplan")),
        "{status}"
    );
    assert!(status["description"].as_str().unwrap().contains("1 to create"), "{status}");
    let blocked = last(&blocked_head);
    assert_eq!(blocked["state"], "failure", "{blocked}");
    assert!(blocked["description"].as_str().unwrap().starts_with("blocked"), "{blocked}");
    // Pull request 2 is that change alone; its blocked plan is approved. The group that lands
    // exactly that plan passes; approvals of anything else do not carry over.
    h.github.add_pull(REPO, 2, &blocked_head, "pr2", "main", &fleet.base, &file_url(repo));
    let mut pr2 = plan_payload(&fleet);
    if let JobPayload::Plan { number, head_sha, .. } = &mut pr2 {
        (*number, *head_sha) = (2, blocked_head.clone());
    }
    h.enqueue(&[pr2]);
    assert!(h.step(), "the plan of pull request 2");
    let run = h.runtime.block_on(h.store.latest_run("github", REPO, 2, &blocked_head)).unwrap().unwrap();
    assert_eq!(run.verdict.as_deref(), Some("blocked"));
    let digest = run.plan_digest.as_deref();
    h.runtime
        .block_on(h.store.approve("github", REPO, 2, &blocked_head, "reviewer", run.id, digest))
        .unwrap();
    let group = |head: &str, branch: &str| {
        let mut body: Value =
            serde_json::from_str(include_str!("../fixtures/github-webhooks/push.json")).unwrap();
        body["action"] = json!("checks_requested");
        body["repository"]["full_name"] = json!(REPO);
        body["repository"]["clone_url"] = json!(file_url(repo));
        body["merge_group"] = json!({
            "head_sha": head, "head_ref": format!("refs/heads/{branch}"),
            "base_sha": fleet.base, "base_ref": "refs/heads/main",
        });
        jobs_for(&parse_github("merge_group", body.to_string().as_bytes()).unwrap(), false).unwrap()
    };
    h.enqueue(&group(&blocked_head, "gh-readonly-queue/main/pr-2-x"));
    assert!(h.step(), "the group again");
    let approved = last(&blocked_head);
    assert_eq!(approved["state"], "success", "{approved}");
    assert!(approved["description"].as_str().unwrap().starts_with("approved by reviewer"), "{approved}");
    let runs = h.runtime.block_on(h.store.runs_of("github", REPO, 1)).unwrap();
    assert_eq!(runs.iter().filter(|r| r.trigger == "merge-group" && r.head_sha == group_head).count(), 1);
    assert!(
        h.followup_comments().is_empty() && h.github.comments(REPO, 1).is_empty(),
        "groups get statuses, not comments"
    );
}

#[test]
fn rollout_reads_in_flight_per_cluster_are_bounded() {
    let fleet = fleet();
    let kube = FakeKube::start(vec![apps(&fleet.base, &[SETTINGS], ready_true(), None)]);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    let reader = runtime.block_on(async { Arc::new(RolloutReader::new(fake_client(&kube), 2)) });
    let states = runtime.block_on(async {
        let reads = (0..16).map(|_| {
            let reader = reader.clone();
            tokio::spawn(async move { reader.kustomization("flux-system", "apps").await })
        });
        futures::future::join_all(reads).await
    });
    for state in states {
        let state = state.unwrap().unwrap().expect("apps is there");
        assert_eq!(state.inventory.unwrap(), vec![SETTINGS.to_string()]);
    }
    assert_eq!(reader.request_count(), 16);
    assert!(reader.peak_in_flight() <= 2, "peak {}", reader.peak_in_flight());
    let missing = runtime.block_on(reader.kustomization("flux-system", "nope")).unwrap();
    assert!(missing.is_none());
}

/// Two replicas (two connection pools to one PostgreSQL) record every Kustomization's result of
/// one run at once: each write compares and swaps the run's version, a loser reads again, and no
/// result is lost.
#[test]
fn two_replicas_racing_on_one_run_lose_no_update() {
    let database = postgres_database();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(async {
        let one = Store::connect(&database.url).await.unwrap();
        one.migrate().await.unwrap();
        let two = Store::connect(&database.url).await.unwrap();
        let keys: Vec<String> = (0..40).map(|i| format!("prod/flux-system/k{i:02}")).collect();
        let (run_id, _) =
            one.start_run(None, "github", REPO, 1, "main", "head", "merge", None).await.unwrap();
        let followup = Followup::new("abc", keys.clone());
        let outcome = RunOutcome {
            status: "done".into(),
            followup: Some(serde_json::to_string(&followup).unwrap()),
            ..Default::default()
        };
        one.finish_run(run_id, &outcome).await.unwrap();
        let attempts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let writes = keys.iter().enumerate().map(|(i, key)| {
            let store = if i % 2 == 0 { one.clone() } else { two.clone() };
            let (key, attempts) = (key.clone(), attempts.clone());
            tokio::spawn(async move {
                let (_, namespace_name) = key.split_once('/').unwrap();
                let (namespace, name) = namespace_name.split_once('/').unwrap();
                let result = KustomizationResult {
                    cluster: "prod".into(),
                    namespace: namespace.into(),
                    name: name.into(),
                    outcome: if name == "k07" { Outcome::Differs } else { Outcome::Exact },
                    revision: Some("main@sha1:abc".into()),
                    ready: None,
                    not_created: vec![],
                    not_deleted: vec![],
                    unexpected: vec![],
                    missing: vec![],
                    notes: vec![],
                };
                store
                    .update_followup(run_id, |f| {
                        attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        f.record(&key, result.clone())
                    })
                    .await
            })
        });
        let completed: Vec<bool> =
            futures::future::join_all(writes).await.into_iter().map(|r| r.unwrap().unwrap()).collect();
        assert_eq!(completed.iter().filter(|c| **c).count(), 1, "exactly one write completes the follow-up");
        let run = two.run(run_id).await.unwrap().unwrap();
        let followup = followup_of(&run);
        assert_eq!(followup.results.keys().cloned().collect::<Vec<_>>(), keys, "no result lost");
        assert_eq!(run.version, 41, "the run's own result, then one version per write that stuck");
        assert_eq!(run.followup_outcome.as_deref(), Some("differs"));
        eprintln!(
            "{} writes, {} attempts ({} lost a race and re-read)",
            keys.len(),
            attempts.load(std::sync::atomic::Ordering::SeqCst),
            attempts.load(std::sync::atomic::Ordering::SeqCst) - keys.len()
        );
    });
}

/// A cluster that forbids the read and a forge that fails: the follow-up keeps asking with
/// backoff, reports why when the deadline passes, and its comment is posted once the forge
/// answers again; nothing is lost or counted twice.
#[test]
fn after_merge_cluster_and_forge_errors_are_retried_without_losing_the_result() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::ZERO);
    h.plan_and_merge(&fleet);
    h.kube.forbid("get", "kustomize.toolkit.fluxcd.io", "kustomizations");
    // Every call of the first attempt (each retried inside the call) fails with a 502.
    h.github.fail_next_on("/issues/1/comments", 502, 5);
    assert!(h.step(), "the follow-up: recorded, but the comment could not be posted");
    let run = h.merge_run();
    assert_eq!(run.followup_outcome.as_deref(), Some("timeout"));
    let result = only_result(&run);
    assert!(result.notes.iter().any(|n| n.contains("forbidden")), "{:?}", result.notes);
    let (kind, status, attempts) = h.jobs().pop().unwrap();
    assert_eq!((kind.as_str(), status.as_str(), attempts), ("followup", "queued", 1), "retried later");
    assert!(h.followup_comments().is_empty());
    crate::fixture::wait_for("the retried follow-up to post its comment", crate::fixture::WAIT, || {
        h.step();
        !h.followup_comments().is_empty()
    });
    assert_eq!(h.followup_comments().len(), 1);
    assert!(h.followup_comments()[0].contains("forbidden"), "{}", h.followup_comments()[0]);
    assert_eq!(h.jobs().pop().unwrap().1, "done");
    assert_eq!(h.predictions("timeout"), 1, "counted once");
}

/// Point 5: a plan shown on an open pull request goes stale when the base branch moves or the
/// cluster changes under it; the resync notices both, plans again, and the comment says why the
/// plan changed.
#[test]
fn open_pull_requests_are_replanned_when_the_base_moves_or_the_cluster_changes() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    let resync = fluxplan::jobs::resync::Resync::new(h.store.clone(), h.forges.clone(), false)
        .watching_clusters(vec![CONTEXT.into()], h.readers.clone());
    let pass = || h.runtime.block_on(resync.pass()).unwrap();
    let sticky = || {
        let comments = h.github.comments(REPO, 1);
        comments.into_iter().map(|(_, b)| b).find(|b| b.starts_with("<!-- fluxplan -->")).unwrap()
    };
    h.enqueue(&[plan_payload(&fleet)]);
    assert!(h.step(), "the first plan");
    assert!(!sticky().contains("The plan changed"), "{}", sticky());
    assert_eq!(pass(), 0, "the plan is current; the first pass only learns the cluster");
    // The base branch moves: someone else removes `old`, so this pull request no longer deletes it.
    fleet.repo.git(&["checkout", "-q", "main"]);
    fleet.repo.remove("apps/old.yaml");
    let moved = fleet.repo.commit("someone else removes old");
    assert_eq!(pass(), 1, "the plan of a moved base is stale");
    assert!(h.step(), "the re-plan");
    let comment = sticky();
    assert!(comment.contains("The plan changed since the last one posted for"), "{comment}");
    assert!(comment.contains(&format!("moved from {} to {}", &fleet.base[..8], &moved[..8])), "{comment}");
    assert_eq!(pass(), 0, "planned against the new tip: current again");
    // The cluster changes under the pull request: an inventory is not what it was.
    h.kube.put(apps(&moved, &[SETTINGS], ready_true(), None));
    assert_eq!(pass(), 1, "the inventories changed");
    assert!(h.step());
    assert_eq!(pass(), 0, "nothing changed since");
    let runs = h.runtime.block_on(h.store.runs_of("github", REPO, 1)).unwrap();
    let triggers: Vec<&str> = runs.iter().map(|r| r.trigger.as_str()).collect();
    assert_eq!(triggers, ["pull-request", "resync", "cluster-changed"]);
    assert_eq!(h.github.comments(REPO, 1).len(), 1, "one sticky comment, updated in place");
}

/// A plan made by an older fluxplan, whose plans of the same commits may say something else (a
/// fix closed a way to hide files from a plan), is stale: the resync plans the pull request again.
#[test]
fn plans_of_an_older_generation_are_planned_again() {
    let fleet = fleet();
    let h = Harness::new(&fleet, Duration::from_secs(3600));
    let resync = fluxplan::jobs::resync::Resync::new(h.store.clone(), h.forges.clone(), false);
    let pass = || h.runtime.block_on(resync.pass()).unwrap();
    h.enqueue(&[plan_payload(&fleet)]);
    assert!(h.step(), "the first plan");
    assert_eq!(pass(), 0, "the plan is current");
    // As an older fluxplan stored it: without the field.
    let db = rusqlite::Connection::open(h._data.path().join("fluxplan.db")).unwrap();
    let stripped = db
        .execute(
            "UPDATE runs SET plan_json = json_remove(plan_json, '$.generation') WHERE plan_json IS NOT NULL",
            [],
        )
        .unwrap();
    assert_eq!(stripped, 1);
    assert_eq!(pass(), 1, "a plan of an older generation is stale");
    assert!(h.step(), "the re-plan");
    assert_eq!(pass(), 0, "current again");
    let runs = h.runtime.block_on(h.store.runs_of("github", REPO, 1)).unwrap();
    let plan: Value = serde_json::from_str(runs.last().unwrap().plan_json.as_deref().unwrap()).unwrap();
    assert_eq!(plan["generation"], fluxplan::plan::GENERATION);
}

/// The whole path through the real `fluxplan serve` process: signed webhooks in, the plan read
/// from the fake cluster with `--kube`, the merge, the follow-up polling the fake API server until
/// the Kustomization moves to the merge commit, the comment, and the metric.
#[test]
fn after_merge_through_the_bot_process_end_to_end() {
    let fleet = fleet();
    let github = FakeGitHub::start();
    github.add_pull(REPO, 1, &fleet.head, "change", "main", &fleet.base, &file_url(&fleet.repo));
    let kube = live_cluster(&fleet);
    let data = tempfile::tempdir().unwrap();
    let mut env = crate::bot::github_env(&github);
    env.push(("KUBECONFIG", kube.kubeconfig(data.path()).display().to_string()));
    env.push(("FLUXPLAN_FOLLOWUP_POLL_MS", "50".into()));
    env.push(("FLUXPLAN_FOLLOWUP_POLL_MAX_MS", "200".into()));
    let bot = crate::bot::Bot::start_with(data.path(), &["--kube"], &env);
    let log = data.path().join("bot.log");
    let _show_log_on_failure = ShowLog(log);
    let mut opened = merged_body(&fleet, "0000000000000000000000000000000000000000");
    opened["action"] = json!("opened");
    opened["pull_request"]["merged"] = json!(false);
    assert_eq!(bot.github("pull_request", "opened-1", &opened), 202);
    let comments = |marker: &str| -> Vec<String> {
        github.comments(REPO, 1).into_iter().map(|(_, b)| b).filter(|b| b.starts_with(marker)).collect()
    };
    crate::fixture::wait_for("the plan", crate::fixture::WAIT, || !comments("<!-- fluxplan -->").is_empty());
    let merge_sha = merge(&fleet.repo);
    let reads = || {
        kube.requests()
            .iter()
            .filter(|(_, path)| path.ends_with("/namespaces/flux-system/kustomizations/apps"))
            .count()
    };
    let before = reads();
    assert_eq!(bot.github("pull_request", "closed-1", &merged_body(&fleet, &merge_sha)), 202);
    crate::fixture::wait_for("the follow-up to read the Kustomization", crate::fixture::WAIT, || {
        reads() > before
    });
    assert!(comments("<!-- fluxplan-followup").is_empty(), "the rollout has not happened yet");
    kube.put(flux_system(&merge_sha));
    kube.put(apps(&merge_sha, &[NEW, SETTINGS], ready_true(), None));
    crate::fixture::wait_for("the follow-up comment", crate::fixture::WAIT, || {
        !comments("<!-- fluxplan-followup").is_empty()
    });
    let comment = &comments("<!-- fluxplan-followup")[0];
    assert!(comment.contains("applied as planned"), "{comment}");
    let (_, metrics) = bot.get("/metrics");
    assert!(metrics.contains("fluxplan_prediction_total{outcome=\"exact\"} 1"), "{metrics}");
    let requests = kube.requests();
    assert!(
        requests.iter().all(|(method, path)| method == "GET" && !path.contains("watch=")),
        "read-only: {requests:?}"
    );
}

/// Prints the bot's log when the test fails (the temporary directory goes with it).
pub(crate) struct ShowLog(pub(crate) std::path::PathBuf);

impl Drop for ShowLog {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("bot.log:\n{}", std::fs::read_to_string(&self.0).unwrap_or_default());
        }
    }
}

/// The root Kustomization, as Flux bootstrapped it: it owns the source and `apps`.
fn flux_system(revision: &str) -> Value {
    let mut root = apps(
        revision,
        &[
            "flux-system_apps_kustomize.toolkit.fluxcd.io_Kustomization",
            "flux-system_flux-system_kustomize.toolkit.fluxcd.io_Kustomization",
            "flux-system_flux-system_source.toolkit.fluxcd.io_GitRepository",
        ],
        ready_true(),
        None,
    );
    root["metadata"]["name"] = json!("flux-system");
    root["spec"]["path"] = json!("./clusters/prod");
    root
}

/// The cluster as Flux left it at the fleet's base: both Kustomizations, and the live ConfigMaps
/// `apps` owns.
fn live_cluster(fleet: &Fleet) -> FakeKube {
    let owned = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default", "labels": {
                   "kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
               "data": {"key": "value"}})
    };
    FakeKube::start(vec![
        flux_system(&fleet.base),
        apps(&fleet.base, &[SETTINGS, OLD], ready_true(), None),
        owned("settings"),
        owned("old"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
    ])
}

/// The same through the bot process on GitLab: Merge Request Hooks in (the merge named by its
/// `merge_commit_sha`), the follow-up as a note.
#[test]
fn after_merge_on_gitlab_through_the_bot_process() {
    let fleet = fleet();
    let gitlab = crate::fake_gitlab::FakeGitLab::start();
    let project = "acme/fleet";
    gitlab.add_merge_request(project, 42, 1, &fleet.head, "change", "main", &file_url(&fleet.repo));
    let kube = live_cluster(&fleet);
    let data = tempfile::tempdir().unwrap();
    let mut env = crate::bot::gitlab_env(&gitlab.url());
    env.push(("KUBECONFIG", kube.kubeconfig(data.path()).display().to_string()));
    env.push(("FLUXPLAN_FOLLOWUP_POLL_MS", "50".into()));
    env.push(("FLUXPLAN_FOLLOWUP_POLL_MAX_MS", "200".into()));
    let bot = crate::bot::Bot::start_with(data.path(), &["--kube"], &env);
    let _show_log_on_failure = ShowLog(data.path().join("bot.log"));
    let post = |body: &Value, uuid: &str| bot.gitlab("Merge Request Hook", uuid, body);
    let opened = crate::bot::merge_request_hook(&fleet.repo, project, 1, &fleet.head);
    assert_eq!(post(&opened, "open-1"), 202);
    let notes = |marker: &str| -> Vec<String> {
        gitlab.notes(project, 1).into_iter().map(|(_, b)| b).filter(|b| b.starts_with(marker)).collect()
    };
    crate::fixture::wait_for("the plan", crate::fixture::WAIT, || !notes("<!-- fluxplan -->").is_empty());
    let merge_sha = merge(&fleet.repo);
    let mut merged = opened.clone();
    merged["object_attributes"]["action"] = json!("merge");
    merged["object_attributes"]["state"] = json!("merged");
    merged["object_attributes"]["merge_commit_sha"] = json!(merge_sha);
    assert_eq!(post(&merged, "merge-1"), 202);
    // The controller has already applied the merge commit, with `old` left behind.
    kube.put(flux_system(&merge_sha));
    kube.put(apps(&merge_sha, &[NEW, OLD, SETTINGS], ready_true(), None));
    crate::fixture::wait_for("the follow-up note", crate::fixture::WAIT, || {
        !notes("<!-- fluxplan-followup").is_empty()
    });
    let note = &notes("<!-- fluxplan-followup")[0];
    assert!(note.contains("a missed prune): ConfigMap default/old"), "{note}");
    let (_, metrics) = bot.get("/metrics");
    assert!(metrics.contains("fluxplan_prediction_total{outcome=\"differs\"} 1"), "{metrics}");
}

/// Two replicas (two connection pools to one PostgreSQL, two workers) each take one of a merge's
/// two follow-ups at the same moment and write their result into the same run: both results are
/// kept, the outcome is counted once, and one comment is posted.
#[test]
fn two_replicas_on_postgres_share_the_followups_of_one_merge() {
    let database = postgres_database();
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.kustomization("clusters/prod/web.yaml", "web", "./web", "");
    repo.config_map("apps/settings.yaml", "settings", "default");
    repo.config_map("apps/old.yaml", "old", "default");
    repo.config_map("web/page.yaml", "page", "web");
    let base = repo.commit("base");
    repo.git(&["checkout", "-q", "-b", "change"]);
    repo.remove("apps/old.yaml");
    repo.remove("web/page.yaml");
    repo.write("web/landing.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: landing\n  namespace: web\ndata:\n  title: hello\n  colour: green\n  size: large\n");
    let head = repo.commit("both Kustomizations change");
    repo.git(&["checkout", "-q", "main"]);
    let fleet = Fleet { repo, base, head };
    let web = |revision: &str, ids: &[&str]| {
        let mut web = apps(revision, ids, ready_true(), None);
        web["metadata"]["name"] = json!("web");
        web["spec"]["path"] = json!("./web");
        web
    };
    let kube = FakeKube::start(vec![
        apps(&fleet.base, &[SETTINGS, OLD], ready_true(), None),
        web(&fleet.base, &["web_page__ConfigMap"]),
    ]);
    let h = Harness::with(&fleet, Duration::from_secs(3600), kube, Some(&database.url));
    let (other, other_metrics) = h.replica("replica-b", &database.url);
    h.enqueue(&[plan_payload(&fleet)]);
    assert!(h.step(), "the plan");
    let merge_sha = merge(&fleet.repo);
    h.enqueue(&merged_event(&fleet, &merge_sha));
    assert!(h.step() && h.step(), "closed and merged");
    let followups =
        h.jobs().iter().filter(|(kind, status, _)| kind == "followup" && status == "queued").count();
    assert_eq!(followups, 2, "{:?}", h.jobs());
    h.kube.put(apps(&merge_sha, &[SETTINGS], ready_true(), None));
    h.kube.put(web(&merge_sha, &["web_landing__ConfigMap"]));
    // Both replicas claim at once: each gets one follow-up (SKIP LOCKED), both write the run.
    let (a, b) = h.runtime.block_on(async { tokio::join!(h.worker.step(), other.step()) });
    assert!(a.unwrap() && b.unwrap(), "each replica did one follow-up");
    assert!(!h.step(), "nothing left");
    let run = h.merge_run();
    let followup = followup_of(&run);
    assert_eq!(followup.results.len(), 2, "no result lost: {followup:?}");
    assert!(followup.results.values().all(|r| r.outcome == Outcome::Exact), "{followup:?}");
    assert_eq!(run.followup_outcome.as_deref(), Some("exact"));
    assert_eq!(run.version, 4, "the merge's plan, two results and the comment flag, each written once");
    assert_eq!(h.followup_comments().len(), 1, "one comment");
    let counted = h.predictions("exact") + other_metrics.predictions.with_label_values(&["exact"]).get();
    assert_eq!(counted, 1, "counted once, by the replica that completed the run");
}
