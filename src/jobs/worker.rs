//! A worker: claims jobs, keeps their lease alive, does them, and records the outcome. `step`
//! does one job, so tests can drive a worker by hand.

use super::fairness::SlowLane;
use super::fence::{ForgeWrite, Said, Scope};
use super::mirror::{self, GitAuth, Mirrors};
use super::{help_text, plan_payload, CommandRequest, JobPayload};
use crate::cancel::{CancelReason, CancelToken};
use crate::forge::checks::CheckOutput;
use crate::forge::roles::{CommandRoles, Role};
use crate::forge::webhook::Command;
use crate::forge::{ForgeClient, ForgeError, ForgeKind, PullInfo, Reaction, RepoInfo, StatusState};
use crate::plan::{Plan, Severity, Verdict};
use crate::planner;
use crate::report;
use crate::server::metrics::Metrics;
use crate::store::{now_ms, Job, RunOutcome, Store};
use anyhow::Result;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

/// The forges the bot can answer on, with the tokens git fetches with.
#[derive(Default)]
pub struct Forges {
    pub github: Option<(ForgeClient, Option<String>)>,
    pub gitlab: Option<(ForgeClient, Option<String>)>,
}

impl Forges {
    pub fn get(&self, kind: ForgeKind) -> Option<&(ForgeClient, Option<String>)> {
        match kind {
            ForgeKind::GitHub => self.github.as_ref(),
            ForgeKind::GitLab => self.gitlab.as_ref(),
        }
    }
}

/// What every worker shares.
#[derive(Clone)]
pub struct WorkerConfig {
    pub data_dir: PathBuf,
    /// Base URL of this service, for links to full plans (`/runs/{id}`).
    pub public_url: Option<String>,
    pub allow_forks: bool,
    /// A running job whose worker has not renewed its lease this long is taken over.
    pub lease: Duration,
    pub max_attempts: i64,
    /// How plans read the cluster (offline, snapshot file, live, several clusters).
    pub clusters: planner::Clusters,
    /// Maximum characters of one comment.
    pub comment_limit: usize,
    /// What one plan may ask for (sizes, times).
    pub limits: planner::Limits,
    /// How HelmReleases are rendered and where charts may be fetched from.
    pub helm: planner::HelmSettings,
    /// The role each command needs.
    pub roles: CommandRoles,
    /// At most one reply (refusal or help) per user and pull request in this window.
    pub reply_window: Duration,
    /// Cancelled when the service shuts down: every running plan stops (its kustomize
    /// processes are killed) and its job goes back to the queue.
    pub shutdown: CancelToken,
    /// Watching rollouts after merges.
    pub followup: super::FollowupConfig,
}

/// How often a running plan checks that no newer push superseded it.
const SUPERSEDED_CHECK: Duration = Duration::from_secs(2);

pub struct Worker {
    pub id: String,
    pub(super) store: Store,
    pub(super) forges: Arc<Forges>,
    pub(super) mirrors: Arc<Mirrors>,
    pub(super) config: Arc<WorkerConfig>,
    pub(super) metrics: Arc<Metrics>,
    /// Shared by the replica's workers: how many may run plans of slow pull requests at once.
    slow_lane: SlowLane,
    /// Outages seen, for the catch-up (`super::recovery`).
    pub(super) recovery: Arc<super::recovery::Recovery>,
}

/// Why a job did not finish.
pub(super) enum JobError {
    /// Try again later (transient failure, rate limit).
    Retry(String, Option<Duration>),
    /// Give up.
    Fatal(String),
    /// Not done yet (a rollout still under way, or a cluster that did not answer this time,
    /// with why): look again after this long. Waiting uses up no attempt.
    Wait(Duration, Option<String>),
    /// The service shut down mid-job: back to the queue at once, using up no attempt (not the
    /// job's fault); its run is `cancelled`.
    Stopped(String),
}

impl From<ForgeError> for JobError {
    fn from(error: ForgeError) -> Self {
        match &error {
            ForgeError::RateLimited(wait) => JobError::Retry(error.to_string(), *wait),
            ForgeError::Transient(_) => JobError::Retry(error.to_string(), None),
            _ => JobError::Fatal(error.to_string()),
        }
    }
}

impl From<anyhow::Error> for JobError {
    fn from(error: anyhow::Error) -> Self {
        JobError::Retry(format!("{error:#}"), None)
    }
}

impl Worker {
    pub fn new(
        id: String,
        store: Store,
        forges: Arc<Forges>,
        mirrors: Arc<Mirrors>,
        config: Arc<WorkerConfig>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Worker {
            id,
            store,
            forges,
            mirrors,
            config,
            metrics,
            slow_lane: SlowLane::for_workers(1),
            recovery: Arc::default(),
        }
    }

    /// The worker shares `lane` with the replica's other workers.
    pub fn sharing_slow_lane(mut self, lane: SlowLane) -> Self {
        self.slow_lane = lane;
        self
    }

    /// Shares the service's record of outages (and its policy for retrying later).
    pub fn with_recovery(mut self, recovery: Arc<super::recovery::Recovery>) -> Self {
        self.recovery = recovery;
        self
    }

    /// Claims and does one job; `false` when the queue had nothing due.
    pub async fn step(&self) -> Result<bool> {
        let place = self.slow_lane.try_enter();
        let Some(job) = self.store.claim(&self.id, place.is_some()).await? else { return Ok(false) };
        let _place = super::fairness::keep_place_for(&self.store, &job, place).await;
        let span = tracing::info_span!("job", id = job.id, kind = %job.kind, repo = %job.repo, pr = job.pr_number, sha = %job.head_sha);
        self.run_claimed(job).instrument(span).await;
        Ok(true)
    }

    /// Works until `stop` is set; a running job is finished first.
    pub async fn run(self, stop: tokio::sync::watch::Receiver<bool>) {
        while !*stop.borrow() {
            let claimed = self.step().await;
            match &claimed {
                Ok(_) => self.recovery.database_answered(),
                Err(_) => self.recovery.database_failed(),
            }
            match claimed {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(worker = %self.id, error = %format!("{e:#}"), "claiming a job failed")
                }
            }
            let mut stop = stop.clone();
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(300)) => {}
                _ = stop.changed() => {}
            }
        }
    }

    async fn run_claimed(&self, job: Job) {
        // Renew the lease while the job runs, so other workers leave it alone; a job that is
        // lost (superseded by a newer push, or taken over) is cancelled at once.
        let cancel = self.config.shutdown.child();
        let heartbeat = {
            let store = self.store.clone();
            let (id, worker) = (job.id, self.id.clone());
            let every = (self.config.lease / 3).min(SUPERSEDED_CHECK);
            let cancel = cancel.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if let Ok(false) = store.heartbeat(id, &worker).await {
                        tracing::warn!(job = id, "lost the job (superseded or taken over): it will not post");
                        cancel.cancel(CancelReason::Superseded);
                        return;
                    }
                }
            })
        };
        let result = match serde_json::from_str::<JobPayload>(&job.payload) {
            Ok(payload) => self.perform(&job, payload, &cancel).await,
            Err(e) => Err(JobError::Fatal(format!("unreadable job payload: {e}"))),
        };
        heartbeat.abort();
        // Retries used up by a transient failure: retried later, not given up (`retry_later`).
        let result = match result {
            Err(JobError::Retry(error, wait)) if job.attempts >= self.config.max_attempts => {
                match self.retry_later(&job, &error).await {
                    Ok(true) => return,
                    Ok(false) => Err(JobError::Retry(error, wait)),
                    Err(e) => {
                        tracing::error!(error = %format!("{e:#}"), "cannot schedule the job's retry");
                        return;
                    }
                }
            }
            other => other,
        };
        let outcome = match result {
            Ok(()) => self.store.finish_job(job.id, &self.id, "done", now_ms(), None).await,
            Err(JobError::Stopped(why)) => {
                tracing::info!(%why, "back to the queue");
                self.store.requeue_poll(job.id, &self.id, now_ms(), Some(&why)).await
            }
            Err(JobError::Wait(wait, why)) => {
                tracing::debug!(
                    ?wait,
                    polls = job.polls,
                    why = why.as_deref().unwrap_or("under way"),
                    "not yet: looking again later"
                );
                self.store
                    .requeue_poll(job.id, &self.id, now_ms() + wait.as_millis() as i64, why.as_deref())
                    .await
            }
            Err(JobError::Retry(error, wait)) if job.attempts < self.config.max_attempts => {
                let backoff = wait.unwrap_or_else(|| {
                    Duration::from_secs(2u64.saturating_pow(job.attempts as u32).min(300))
                });
                tracing::warn!(%error, retry_in = ?backoff, attempt = job.attempts, "job will be retried");
                self.store
                    .finish_job(
                        job.id,
                        &self.id,
                        "queued",
                        now_ms() + backoff.as_millis() as i64,
                        Some(&error),
                    )
                    .await
            }
            Err(JobError::Retry(error, _)) | Err(JobError::Fatal(error)) => {
                tracing::error!(%error, attempts = job.attempts, "job failed");
                match serde_json::from_str::<JobPayload>(&job.payload) {
                    Ok(JobPayload::Followup(_)) => self.give_up_followup(&job, &error).await,
                    Ok(JobPayload::Merged { repo, number, base_ref, head_sha, merge_sha }) => {
                        let merged =
                            super::merged::MergedPull { repo, number, base_ref, head_sha, merge_sha };
                        if let Err(JobError::Retry(e, _) | JobError::Fatal(e)) =
                            self.record_failed_merge(&job, &merged, &error).await
                        {
                            tracing::error!(error = %e, "cannot record the failed merge");
                        }
                    }
                    _ => {}
                }
                self.metrics.job_failed(&job.kind);
                self.report_failure(&job, &error).await;
                self.store.finish_job(job.id, &self.id, "failed", now_ms(), Some(&error)).await
            }
        };
        if let Err(e) = outcome {
            tracing::error!(error = %format!("{e:#}"), "recording the job outcome failed");
        }
    }

    /// A plan that gives up says so on the commit: a status left `pending` would block the merge
    /// without a reason.
    /// A superseded job (or one taken over) says nothing: the newer job speaks for the head.
    async fn report_failure(&self, job: &Job, error: &str) {
        let (repo, head_sha, scope) = match serde_json::from_str::<JobPayload>(&job.payload) {
            Ok(JobPayload::Plan { repo, head_sha, number, .. }) => (repo, head_sha, Scope::Pull(number)),
            Ok(JobPayload::MergeGroup { repo, head_sha, .. }) => {
                let scope = Scope::Group(head_sha.clone());
                (repo, head_sha, scope)
            }
            _ => return,
        };
        let Some((forge, _)) = self.forges.get(repo.forge) else { return };
        let description = format!("fluxplan failed: {error}");
        let failed = ForgeWrite::status(&head_sha, None, StatusState::Error, &description, None);
        match self.writer(job, forge, &repo).write(&scope, &failed).await {
            Ok(Said::Posted) => {}
            Ok(Said::Silenced) => tracing::info!("superseded: its failure is not posted"),
            Err(e) => tracing::warn!(error = %e, "cannot report the failure on the commit"),
        }
    }

    pub(super) fn forge(&self, repo: &RepoInfo) -> Result<&(ForgeClient, Option<String>), JobError> {
        self.forges.get(repo.forge).ok_or_else(|| {
            JobError::Fatal(format!(
                "no {} credentials configured: cannot answer on {}",
                repo.forge.as_str(),
                repo.full_name
            ))
        })
    }

    pub(super) fn count_forge_error<T>(
        &self,
        repo: &RepoInfo,
        result: Result<T, ForgeError>,
    ) -> Result<T, ForgeError> {
        if let Err(e) = &result {
            self.metrics.forge_error(repo.forge, e);
        }
        result
    }

    async fn perform(&self, job: &Job, payload: JobPayload, cancel: &CancelToken) -> Result<(), JobError> {
        match payload {
            JobPayload::Plan { repo, number, base_ref, head_sha, trigger, .. } => {
                let target = PlanTarget { repo, number, base_ref, head_sha, head_ref: None, trigger };
                self.plan(job, target, cancel).await
            }
            // Enqueueing it superseded the pull request's plans: nothing left to do.
            JobPayload::Closed { .. } => Ok(()),
            JobPayload::Merged { repo, number, base_ref, head_sha, merge_sha } => {
                let merged = super::merged::MergedPull { repo, number, base_ref, head_sha, merge_sha };
                self.merged(job, merged, cancel).await
            }
            JobPayload::MergeGroup { repo, base_ref, base_sha, head_sha, head_ref } => {
                let group = super::merged::MergeGroup { repo, base_ref, base_sha, head_sha, head_ref };
                self.merge_group(job, group, cancel).await
            }
            JobPayload::Followup(target) => self.followup(job, target).await,
            JobPayload::Command(request) => self.command(job, request).await,
            JobPayload::Replan { repo, branch } => {
                let (forge, _) = self.forge(&repo)?;
                let pulls = self.count_forge_error(&repo, forge.open_pulls(&repo, Some(&branch)).await)?;
                let jobs: Vec<_> = pulls
                    .into_iter()
                    .filter(|p| self.unplannable(p).is_none())
                    .map(|p| plan_payload(&repo, &p, "base-push").to_job())
                    .collect();
                self.store.enqueue(&jobs).await?;
                Ok(())
            }
        }
    }

    /// True while this worker still holds the job: not superseded by a newer push, not taken
    /// over by another worker after a lost lease.
    async fn still_current(&self, job: &Job) -> Result<bool, JobError> {
        Ok(self.store.holds(job.id, &self.id).await?)
    }

    async fn plan(&self, job: &Job, mut target: PlanTarget, cancel: &CancelToken) -> Result<(), JobError> {
        let (forge, token) = self.forge(&target.repo)?;
        // The forge, not the order in which deliveries arrive, says which head is current: a
        // late delivery for an older head plans the pull request as it is now.
        let pull = self.count_forge_error(&target.repo, forge.pull(&target.repo, target.number).await)?;
        if let Some(why) = self.unplannable(&pull) {
            tracing::info!(why, "not planned");
            return Ok(());
        }
        if pull.head_sha != target.head_sha || pull.base_ref != target.base_ref {
            tracing::info!(
                delivered = %target.head_sha,
                current = %pull.head_sha,
                base = %pull.base_ref,
                "the delivery is stale: planning the pull request as it is now"
            );
            target.head_sha = pull.head_sha;
            target.base_ref = pull.base_ref;
        }
        target.head_ref = pull.head_ref;
        let repo = &target.repo;
        let started = Instant::now();
        let (run_id, page_token) = self
            .store
            .start_run(
                Some(job.id),
                repo.forge.as_str(),
                &repo.full_name,
                target.number as i64,
                &target.base_ref,
                &target.head_sha,
                &target.trigger,
                repo.web_url.as_deref(),
            )
            .await?;
        let run_url = self.run_url(run_id, page_token.as_str());
        let result = self
            .plan_run(job, &target, forge, token.clone(), run_id, run_url.as_deref(), started, cancel)
            .await;
        if let Err(error) = &result {
            let _ = self.store.finish_run(run_id, &super::closed_runs::outcome_of_error(error)).await;
        }
        self.cancel_superseded_check_runs(job, forge, repo, &target.head_sha).await;
        result
    }

    /// A job superseded after it opened its check run completes it (as cancelled): the newer
    /// job's run speaks for the pull request, and none stays in progress for good.
    pub(super) async fn cancel_superseded_check_runs(
        &self,
        job: &Job,
        forge: &ForgeClient,
        repo: &RepoInfo,
        sha: &str,
    ) {
        let status = self.store.job_status(job.id).await.ok().flatten();
        if status.as_deref() != Some("superseded") {
            return;
        }
        match forge.cancel_check_runs(repo, sha, job.id).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(n, sha, "superseded: its check runs are completed as cancelled"),
            Err(e) => tracing::warn!(error = %e, sha, "cannot complete the check run of a superseded plan"),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn plan_run(
        &self,
        job: &Job,
        target: &PlanTarget,
        forge: &ForgeClient,
        token: Option<String>,
        run_id: i64,
        run_url: Option<&str>,
        started: Instant,
        cancel: &CancelToken,
    ) -> Result<(), JobError> {
        let repo = &target.repo;
        let mut timings = BTreeMap::new();
        let writer = self.writer(job, forge, repo);
        let scope = Scope::Pull(target.number);
        let head_ref = target.head_ref.as_deref();
        let planning = "planning what Flux will do…";
        let pending = ForgeWrite::status(&target.head_sha, head_ref, StatusState::Pending, planning, run_url);
        // A forge that will not take a status on this head (GitLab, a fork's commit) still gets the
        // plan, with a word on why no status blocks the merge.
        let status_refused = match writer.write(&scope, &pending).await {
            Ok(Said::Posted) => false,
            Ok(Said::Silenced) => return self.finish_silenced(run_id).await,
            Err(super::fence::FenceError::Forge(ForgeError::NotFound(_))) => true,
            Err(e) => return Err(e.into()),
        };

        // Fetch base and head into the mirror.
        let phase = Instant::now();
        let mirrors = self.mirrors.clone();
        let refspec = match repo.forge {
            ForgeKind::GitHub => "+refs/pull/*/head:refs/pull/*/head",
            ForgeKind::GitLab => "+refs/merge-requests/*/head:refs/merge-requests/*/head",
        };
        let token = self.count_forge_error(repo, forge.git_token(repo, token.as_deref()).await)?;
        let auth = token.map(|token| GitAuth::for_forge(repo.forge, token));
        let (clone_url, head, fetch_auth) = (repo.clone_url.clone(), target.head_sha.clone(), auth.clone());
        let mirror = tokio::task::spawn_blocking(move || {
            mirrors.fetch(&clone_url, &[refspec], &[head.as_str()], fetch_auth.as_ref())
        })
        .await
        .map_err(|e| JobError::Fatal(e.to_string()))??;
        timings.insert("fetch_ms", phase.elapsed().as_millis() as u64);

        // Plan the merge: the head against the current tip of the base branch.
        let phase = Instant::now();
        let base_rev = format!("refs/heads/{}", target.base_ref);
        let plan = self.plan_revisions(mirror, repo, &base_rev, &target.head_sha, cancel).await?;
        timings.insert("plan_ms", phase.elapsed().as_millis() as u64);
        super::fairness::record_plan_time(&self.store, repo, target.number, &plan, cancel).await;
        self.count_plan(repo.forge, &plan, cancel, phase.elapsed());

        if !self.still_current(job).await? {
            tracing::info!("this worker lost the job (superseded, or taken over): not posting it");
            self.finish_lost(job, run_id, &plan, &timings).await?;
            return Ok(());
        }
        // Whatever the deliveries said, a plan of anything but the current head, base branch and
        // base tip never posts; the current one is planned instead. Nor does one that a newer
        // plan of the pull request has already overtaken.
        let now = self.count_forge_error(repo, forge.pull(repo, target.number).await)?;
        let (url, branch) = (repo.clone_url.clone(), target.base_ref.clone());
        let tip = tokio::task::spawn_blocking(move || mirror::branch_tip(&url, &branch, auth.as_ref()))
            .await
            .map_err(|e| JobError::Fatal(e.to_string()))??;
        let key = (repo.forge.as_str(), repo.full_name.as_str(), target.number as i64);
        if self.store.newer_run_done(key.0, key.1, key.2, run_id).await? {
            tracing::info!("a newer plan of this pull request is posted already: not posting");
            self.finish_superseded(run_id, &plan, &timings).await?;
            return Ok(());
        }
        let base_moved = tip.is_some() && plan.base.commit.is_some() && tip != plan.base.commit;
        if now.head_sha != target.head_sha || now.base_ref != target.base_ref || base_moved {
            tracing::info!(current = %now.head_sha, base_moved, "the pull request moved while planning: not posting");
            self.finish_superseded(run_id, &plan, &timings).await?;
            if self.unplannable(&now).is_none() {
                self.store.enqueue(&[plan_payload(repo, &now, "moved").to_job()]).await?;
            }
            return Ok(());
        }

        // An approval of this head holds only for the plan it approved.
        let digest = plan.digest();
        let approval = self
            .store
            .approval(repo.forge.as_str(), &repo.full_name, target.number as i64, &target.head_sha)
            .await?;
        let (approved_by, voided_by) = match approval {
            Some(a) if a.plan_digest.as_deref() == Some(digest.as_str()) => (Some(a.approved_by), None),
            Some(a) => (None, Some(a.approved_by)),
            None => (None, None),
        };
        let phase = Instant::now();
        let approver = self.config.roles.approve;
        let approve = match approver {
            Role::Anyone => "anyone comments `/fluxplan approve`".to_string(),
            role => format!("someone with {} comments `/fluxplan approve`", role.describe(repo.forge)),
        };
        let approve = format!(
            "{approve} on this {}: the approval holds for this plan of {}",
            repo.forge.pull_noun(),
            short(&target.head_sha)
        );
        let mut comment = report::markdown_with_approval(&plan, &approve, repo.forge.pull_noun());
        if let Some(url) = run_url {
            comment.push_str(&format!("\n\n{}({url})\n", super::RUN_PAGE_LINK));
        }
        // A re-plan of a head whose plan was posted says why it differs (base moved, cluster changed).
        let previous = self.store.latest_run(key.0, key.1, key.2, &target.head_sha).await?;
        if let Some(line) = super::stale::changed_line(previous.as_ref(), &plan, &digest, &target.base_ref) {
            comment.push_str(&line);
        }
        if let Some(user) = &approved_by {
            comment.push_str(&format!("\n✅ Approved by @{user} for {}.\n", short(&target.head_sha)));
        }
        if let (Some(user), Verdict::Blocked) = (&voided_by, plan.verdict) {
            comment.push_str(&format!(
                "\n⚠️ The approval by @{user} no longer applies: this plan of {} differs from the one approved. \
                 Review it and approve again if it is still wanted.\n",
                short(&target.head_sha)
            ));
        }
        if status_refused {
            comment.push_str(&format!(
                "\n⚠️ {} refused a commit status on {} (its head lives in a fork): no `fluxplan` status \
                 blocks this merge; read the plan above before merging.\n",
                repo.forge.name(),
                short(&target.head_sha)
            ));
        }
        let sticky = ForgeWrite::Comment { number: target.number, markdown: comment.clone() };
        if writer.write(&scope, &sticky).await? == Said::Silenced {
            self.finish_superseded(run_id, &plan, &timings).await?;
            return Ok(());
        }
        if !status_refused {
            let (state, description) = status_of(&plan, approved_by.as_deref());
            let last = ForgeWrite::status(&target.head_sha, head_ref, state, &description, run_url)
                .with_check(CheckOutput::of_plan(&plan, &comment));
            if writer.write(&scope, &last).await? == Said::Silenced {
                self.finish_superseded(run_id, &plan, &timings).await?;
                return Ok(());
            }
        }
        timings.insert("forge_ms", phase.elapsed().as_millis() as u64);
        timings.insert("total_ms", started.elapsed().as_millis() as u64);

        let mut outcome = outcome_of(&plan, &timings);
        outcome.plan_digest = Some(digest);
        outcome.comment = Some(comment);
        outcome.approved_by = approved_by;
        outcome.status = "done".into();
        self.store.finish_run(run_id, &outcome).await?;
        tracing::info!(verdict = ?plan.verdict, ms = started.elapsed().as_millis() as u64, "planned");
        Ok(())
    }

    /// Records a plan that will not be posted: something newer took its place.
    async fn finish_superseded(
        &self,
        run_id: i64,
        plan: &Plan,
        timings: &BTreeMap<&str, u64>,
    ) -> Result<(), JobError> {
        let outcome = RunOutcome { status: "superseded".into(), ..outcome_of(plan, timings) };
        Ok(self.store.finish_run(run_id, &outcome).await?)
    }

    /// The link to a run's page: only those who can read the pull request see its token.
    pub(super) fn run_url(&self, id: i64, page_token: &str) -> Option<String> {
        let base = self.config.public_url.as_ref()?;
        Some(format!("{}/runs/{id}?token={page_token}", base.trim_end_matches('/')))
    }

    /// The planner request for a merge of `head` into `base` in `mirror`.
    pub(super) fn plan_request(&self, mirror: PathBuf, base: &str, head: &str) -> planner::Request {
        let mut request = planner::Request::new(mirror, base, head);
        request.clusters = self.config.clusters.clone();
        request.limits = self.config.limits;
        request.render.cache_dir = Some(self.config.data_dir.join("cache"));
        request.render.helm = self.config.helm.clone();
        request
    }

    fn unplannable(&self, pull: &PullInfo) -> Option<&'static str> {
        super::unplannable(pull, self.config.allow_forks)
    }

    /// Answers a command that is not carried out: a 👎, and why (at most one reply per user and
    /// pull request per window, so nobody can make the bot spam a pull request).
    async fn refuse(&self, forge: &ForgeClient, c: &CommandRequest, why: &str) -> Result<(), JobError> {
        let repo = &c.repo;
        self.count_forge_error(repo, forge.react(repo, c.number, c.comment_id, Reaction::Refused).await)?;
        self.reply(forge, c, &format!("@{}: {why}", c.author)).await
    }

    /// A comment answering `c`, unless its author got one in the last reply window.
    async fn reply(&self, forge: &ForgeClient, c: &CommandRequest, text: &str) -> Result<(), JobError> {
        let repo = &c.repo;
        let window = self.config.reply_window.as_millis() as i64;
        let key = (repo.forge.as_str(), repo.full_name.as_str(), c.number as i64);
        if !self.store.claim_reply(key.0, key.1, key.2, &c.author, window).await? {
            tracing::info!(user = %c.author, "replied to this user recently: reacting only");
            return Ok(());
        }
        self.count_forge_error(repo, forge.create_comment(repo, c.number, text).await)?;
        Ok(())
    }

    /// A 👍 on the command's comment.
    async fn accept(&self, forge: &ForgeClient, c: &CommandRequest) -> Result<(), JobError> {
        let reacted = forge.react(&c.repo, c.number, c.comment_id, Reaction::Accepted).await;
        self.count_forge_error(&c.repo, reacted)?;
        Ok(())
    }

    async fn command(&self, job: &Job, c: CommandRequest) -> Result<(), JobError> {
        let repo = &c.repo;
        let (forge, _) = self.forge(repo)?;
        if self.count_forge_error(repo, forge.is_self(repo, &c.author, c.author_id).await)? {
            tracing::info!(user = %c.author, "a comment of fluxplan's own: never a command");
            return Ok(());
        }
        let roles = &self.config.roles;
        let (word, needed) = match c.command {
            Command::Approve => ("approve", roles.approve),
            Command::Plan => ("plan", roles.plan),
            Command::Help | Command::Unknown => ("help", roles.help),
        };
        if needed > Role::Anyone {
            let role = self.count_forge_error(repo, forge.role_of(repo, &c.author, c.author_id).await)?;
            if role < needed {
                tracing::warn!(user = %c.author, ?role, ?needed, command = word, "command refused: permission");
                let mut why = format!(
                    "`/fluxplan {word}` needs {} on {}.",
                    needed.describe(repo.forge),
                    repo.full_name
                );
                if c.command == Command::Approve {
                    why.push_str(" The plan stays blocked.");
                }
                return self.refuse(forge, &c, &why).await;
            }
        }
        match c.command {
            Command::Help | Command::Unknown => {
                self.reply(forge, &c, &help_text(repo.forge, roles)).await?;
                self.accept(forge, &c).await?;
            }
            Command::Plan => {
                let pull = self.count_forge_error(repo, forge.pull(repo, c.number).await)?;
                if let Some(why) = self.unplannable(&pull) {
                    return self.refuse(forge, &c, why).await;
                }
                self.store.enqueue(&[plan_payload(repo, &pull, "command").to_job()]).await?;
                self.accept(forge, &c).await?;
            }
            Command::Approve => self.approve(job, forge, &c).await?,
        }
        Ok(())
    }

    /// Approves the plan the author saw: the one posted for the current head before the comment
    /// was written. The approval holds while re-plans of that head say the same (same digest).
    async fn approve(&self, job: &Job, forge: &ForgeClient, c: &CommandRequest) -> Result<(), JobError> {
        let repo = &c.repo;
        let pull = self.count_forge_error(repo, forge.pull(repo, c.number).await)?;
        let key = (repo.forge.as_str(), repo.full_name.as_str(), c.number as i64);
        let head = short(&pull.head_sha);
        let noun = repo.forge.pull_noun();
        if pull.opened_by(&c.author, c.author_id) {
            let why =
                format!("the author of a {noun} cannot approve its plan; someone else with the role must.");
            return self.refuse(forge, c, &why).await;
        }
        if self.store.plan_pending(key.0, key.1, key.2).await? {
            let why =
                format!("a new plan of this {noun} is being made; read it and approve once it is posted.");
            return self.refuse(forge, c, &why).await;
        }
        let Some(run) = self.store.latest_run(key.0, key.1, key.2, &pull.head_sha).await? else {
            let why = format!("the plan of the current head {head} is not posted yet; approve once it is.");
            return self.refuse(forge, c, &why).await;
        };
        if run.verdict.as_deref() != Some("blocked") {
            let why = match run.verdict.as_deref() {
                Some("failed") => {
                    format!("the plan of {head} could not be made; a plan that failed cannot be approved.")
                }
                _ => format!("the plan of {head} is not blocked: there is nothing to approve."),
            };
            return self.refuse(forge, c, &why).await;
        }
        // When the plan now shown was posted, by the forge's clock (the same clock that dates the
        // approval); the bot's own record only when the forge does not say.
        let sticky =
            self.count_forge_error(repo, forge.marked_comments(repo, c.number, report::split::MARKER).await)?;
        let posted_at = sticky
            .iter()
            .filter_map(|comment| comment.updated_at)
            .max()
            .or(run.finished_at)
            .unwrap_or(i64::MAX);
        if c.created_at.is_none_or(|written| written < posted_at) {
            let why = format!(
                "this approval was written before the plan now shown for {head} was posted; read that plan \
                 and approve again if it is still wanted."
            );
            return self.refuse(forge, c, &why).await;
        }
        self.store
            .approve(key.0, key.1, key.2, &run.head_sha, &c.author, run.id, run.plan_digest.as_deref())
            .await?;
        tracing::info!(user = %c.author, sha = %run.head_sha, run = run.id, "plan approved");
        self.accept(forge, c).await?;
        let url = self.run_url(run.id, run.page_token.as_deref().unwrap_or(""));
        let description =
            format!("approved by {} ({})", c.author, run.verdict.as_deref().unwrap_or("planned"));
        let (head_ref, url) = (pull.head_ref.as_deref(), url.as_deref());
        let approved = ForgeWrite::status(&run.head_sha, head_ref, StatusState::Success, &description, url);
        // A plan queued after the command speaks for the pull request: it shows the approval
        // itself when its plan is the one approved.
        if self.writer(job, forge, repo).write(&Scope::Pull(c.number), &approved).await? == Said::Silenced {
            return Ok(());
        }
        let reply = format!(
            "Approved by @{} for {head}: the `fluxplan` status passes for this commit while its plan stays as \
             approved. A new push, or a re-plan that changes the plan, needs a new approval.",
            c.author
        );
        self.count_forge_error(repo, forge.create_comment(repo, c.number, &reply).await)?;
        Ok(())
    }
}

struct PlanTarget {
    repo: RepoInfo,
    number: u64,
    base_ref: String,
    head_sha: String,
    /// The branch of the head, as the forge says now.
    head_ref: Option<String>,
    trigger: String,
}

pub(super) fn short(sha: &str) -> &str {
    sha.get(..8).unwrap_or(sha)
}

/// The commit status for a plan: blocked plans fail (naming why) unless approved.
pub(super) fn status_of(plan: &Plan, approved_by: Option<&str>) -> (StatusState, String) {
    let s = &plan.summary;
    match plan.verdict {
        Verdict::NoChanges => (StatusState::Success, "no changes".into()),
        Verdict::Changes => (
            StatusState::Success,
            format!("{} to create, {} to update, {} to delete", s.create, s.update, s.delete),
        ),
        Verdict::Blocked => {
            let dangers: Vec<String> = plan
                .alerts
                .iter()
                .filter(|a| a.severity == Severity::Danger)
                .map(|a| {
                    format!(
                        "{}{}",
                        a.code,
                        a.kustomization.as_ref().map(|k| format!(" on {k}")).unwrap_or_default()
                    )
                })
                .collect();
            let reason = match dangers.len() {
                0 => "blocked".to_string(),
                1 => format!("blocked: {}", dangers[0]),
                n => format!("blocked: {} (+{} more)", dangers[0], n - 1),
            };
            match approved_by {
                Some(user) => (StatusState::Success, format!("approved by {user}; {reason}")),
                None => (StatusState::Failure, reason),
            }
        }
        Verdict::Failed => (
            StatusState::Error,
            format!("could not plan: {}", plan.error.as_deref().unwrap_or("unknown error")),
        ),
    }
}

pub(super) fn outcome_of(plan: &Plan, timings: &BTreeMap<&str, u64>) -> RunOutcome {
    RunOutcome {
        status: String::new(),
        base_sha: plan.base.commit.clone(),
        verdict: Some(plan.verdict.as_str().to_string()),
        counts: Some(json!(plan.summary).to_string()),
        alerts: Some(json!(plan.alerts).to_string()),
        timings: Some(json!(timings).to_string()),
        plan_json: Some(report::json(plan)),
        comment: None,
        plan_digest: None,
        error: plan.error.clone(),
        approved_by: None,
        // What the merge is expected to do, for the comparison with the rollout.
        prediction: Some(json!(crate::plan::actual::Prediction::of(plan)).to_string()),
        ..Default::default()
    }
}
