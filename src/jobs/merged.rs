//! Merge time: the plan of what merged, and merge queue groups.
//!
//! A merged pull request's run records the plan that was current for its head; when the base
//! moved since that plan, the merge commit is planned again (against its first parent, the base
//! it landed on) and a `stale-plan` note says how the two differ. The run then holds the
//! prediction the rollout follow-ups compare the cluster with.

use super::fence::{ForgeWrite, Said, Scope};
use super::mirror::{self, GitAuth};
use super::worker::{outcome_of, short, status_of, JobError, Worker};
use super::{FollowupTarget, JobPayload};
use crate::cancel::{CancelReason, CancelToken};
use crate::forge::checks::CheckOutput;
use crate::forge::{ForgeClient, ForgeError, ForgeKind, RepoInfo, StatusState};
use crate::plan::actual::{Followup, Prediction};
use crate::plan::{Plan, Verdict};
use crate::planner;
use crate::report;
use crate::store::{now_ms, Job, RunOutcome};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

pub(super) struct MergedPull {
    pub repo: RepoInfo,
    pub number: u64,
    pub base_ref: String,
    pub head_sha: String,
    pub merge_sha: String,
}

pub(super) struct MergeGroup {
    pub repo: RepoInfo,
    pub base_ref: String,
    pub base_sha: String,
    pub head_sha: String,
    pub head_ref: String,
}

/// The prediction a merge run carries, and where it came from.
struct MergePlan {
    outcome: RunOutcome,
    prediction: Prediction,
    notes: Vec<String>,
}

impl Worker {
    pub(super) async fn merged(
        &self,
        job: &Job,
        m: MergedPull,
        cancel: &CancelToken,
    ) -> Result<(), JobError> {
        let repo = &m.repo;
        let key = (repo.forge.as_str(), repo.full_name.as_str(), m.number as i64);
        // A retried merge job finds its run: it only (re)queues the follow-ups, which collapse.
        if let Some(run) = self.store.merge_run(key.0, key.1, key.2, &m.merge_sha).await? {
            // A stored prediction that does not read watches nothing: said, not silent.
            let prediction = match run.prediction.as_deref().map(serde_json::from_str::<Prediction>) {
                Some(Ok(prediction)) => prediction,
                Some(Err(e)) => {
                    tracing::warn!(run = run.id, error = %e, "stored prediction unreadable: no follow-ups");
                    Prediction::default()
                }
                None => Prediction::default(),
            };
            return self.enqueue_followups(&m, run.id, &prediction).await;
        }
        let (forge, token) = self.forge(repo)?;
        let mirror = self.fetch(forge, repo, token.clone(), &[&m.merge_sha]).await?;
        let (path, merge, head) = (mirror.clone(), m.merge_sha.clone(), m.head_sha.clone());
        let landed_on = tokio::task::spawn_blocking(move || mirror::landed_on(&path, &merge, &head))
            .await
            .map_err(|e| JobError::Fatal(e.to_string()))?
            .map_err(|e| JobError::Fatal(format!("{e:#}")))?;
        let current = self.store.latest_run(key.0, key.1, key.2, &m.head_sha).await?;
        // A fast-forward is the head itself: it landed on the base its plan was made against.
        let landed_on = match (&landed_on, &current) {
            (None, Some(run)) if m.merge_sha == m.head_sha => run.base_sha.clone(),
            _ => landed_on,
        };
        let reusable = current.as_ref().filter(|run| {
            run.prediction.is_some()
                && run.plan_json.is_some()
                && run.base_sha.is_some()
                && run.base_sha == landed_on
        });
        let merge_plan = match reusable {
            Some(run) => MergePlan {
                outcome: RunOutcome {
                    base_sha: run.base_sha.clone(),
                    verdict: run.verdict.clone(),
                    counts: run.counts.clone(),
                    alerts: run.alerts.clone(),
                    plan_json: run.plan_json.clone(),
                    plan_digest: run.plan_digest.clone(),
                    approved_by: run.approved_by.clone(),
                    ..Default::default()
                },
                prediction: run
                    .prediction
                    .as_deref()
                    .and_then(|p| serde_json::from_str(p).ok())
                    .unwrap_or_default(),
                notes: Vec::new(),
            },
            None => {
                let (path, merge) = (mirror.clone(), m.merge_sha.clone());
                let fallback = || async move {
                    // A fast-forward never planned: its parent is the best guess of the base.
                    tokio::task::spawn_blocking(move || mirror::first_parent(&path, &merge))
                        .await
                        .ok()?
                        .ok()?
                };
                let base = match landed_on.clone() {
                    Some(base) => base,
                    None => match fallback().await {
                        Some(parent) => parent,
                        None => {
                            let error =
                                format!("{} has no parent: there is no base to plan it against", m.merge_sha);
                            return self.record_failed_merge(job, &m, &error).await;
                        }
                    },
                };
                let mut plan = self.plan_revisions(mirror, repo, &base, &m.merge_sha, cancel).await?;
                // Planned at a commit of the base branch: named as the branch, like the plan it is
                // compared with (the digest binds the branch, not its tip).
                plan.base.rev = format!("refs/heads/{}", m.base_ref);
                let mut notes = Vec::new();
                match &current {
                    Some(run) if run.plan_digest.as_deref() != Some(plan.digest().as_str()) => notes.push(format!(
                        "stale-plan: the plan shown for {} was made against base {}; the base moved to {} before \
                         the merge, and the plan of the merge commit {} differs ({}; it said {})",
                        short(&m.head_sha),
                        run.base_sha.as_deref().map(short).unwrap_or("unknown"),
                        short(&base),
                        short(&m.merge_sha),
                        counts_line(&plan),
                        run.verdict.as_deref().unwrap_or("nothing"),
                    )),
                    Some(_) => {}
                    None => notes.push(format!(
                        "no plan of {} was posted before the merge: the merge commit {} was planned instead",
                        short(&m.head_sha),
                        short(&m.merge_sha)
                    )),
                }
                let mut outcome = outcome_of(&plan, &BTreeMap::new());
                outcome.plan_digest = Some(plan.digest());
                MergePlan { outcome, prediction: Prediction::of(&plan), notes }
            }
        };
        let watched = self.watched(&merge_plan.prediction);
        let run_id = self.start_merge_run(job, &m).await?;
        let prediction =
            serde_json::to_string(&merge_plan.prediction).map_err(|e| JobError::Fatal(e.to_string()))?;
        let followup = (!watched.is_empty())
            .then(|| Followup::new(&m.merge_sha, watched.keys().cloned().collect()))
            .map(|f| serde_json::to_string(&f).unwrap_or_default());
        let outcome = RunOutcome {
            status: "done".into(),
            base_sha: landed_on.clone().or(merge_plan.outcome.base_sha.clone()),
            merge_sha: Some(m.merge_sha.clone()),
            notes: Some(serde_json::to_string(&merge_plan.notes).unwrap_or_default()),
            prediction: Some(prediction),
            followup,
            ..merge_plan.outcome
        };
        self.store.finish_run(run_id, &outcome).await?;
        for note in &merge_plan.notes {
            tracing::info!(run = run_id, %note, "merge run note");
        }
        tracing::info!(run = run_id, watched = watched.len(), "merge recorded");
        self.enqueue_followups(&m, run_id, &merge_plan.prediction).await
    }

    /// The run that records a merge.
    async fn start_merge_run(&self, job: &Job, m: &MergedPull) -> Result<i64, JobError> {
        let repo = &m.repo;
        let (run_id, _) = self
            .store
            .start_run(
                Some(job.id),
                repo.forge.as_str(),
                &repo.full_name,
                m.number as i64,
                &m.base_ref,
                &m.head_sha,
                "merge",
                repo.web_url.as_deref(),
            )
            .await?;
        Ok(run_id)
    }

    /// A merge that cannot be planned is still recorded, with why (nothing is watched).
    pub(super) async fn record_failed_merge(
        &self,
        job: &Job,
        m: &MergedPull,
        error: &str,
    ) -> Result<(), JobError> {
        let repo = &m.repo;
        let key = (repo.forge.as_str(), repo.full_name.as_str(), m.number as i64);
        if self.store.merge_run(key.0, key.1, key.2, &m.merge_sha).await?.is_some() {
            return Ok(());
        }
        let run_id = self.start_merge_run(job, m).await?;
        let outcome = RunOutcome {
            status: "failed".into(),
            merge_sha: Some(m.merge_sha.clone()),
            error: Some(error.to_string()),
            ..Default::default()
        };
        self.store.finish_run(run_id, &outcome).await?;
        tracing::warn!(run = run_id, %error, "merge recorded without a plan");
        Ok(())
    }

    /// One follow-up per watched Kustomization; each collapses into an existing one of the same
    /// cluster, Kustomization and revision.
    async fn enqueue_followups(
        &self,
        m: &MergedPull,
        run_id: i64,
        prediction: &Prediction,
    ) -> Result<(), JobError> {
        let deadline_at = now_ms() + self.config.followup.deadline.as_millis() as i64;
        let jobs: Vec<_> = self
            .watched(prediction)
            .into_iter()
            .map(|(_, (k, context))| {
                JobPayload::Followup(FollowupTarget {
                    repo: m.repo.clone(),
                    number: m.number,
                    run_id,
                    root: k.cluster.clone(),
                    context,
                    namespace: k.namespace.clone(),
                    name: k.name.clone(),
                    revision: m.merge_sha.clone(),
                    deadline_at,
                })
                .to_job()
            })
            .collect();
        if !jobs.is_empty() {
            self.store.enqueue(&jobs).await?;
        }
        Ok(())
    }

    /// The affected Kustomizations of live clusters, by key, with the kube context that reaches
    /// each (snapshot files and offline roots cannot be watched).
    fn watched<'p>(
        &self,
        prediction: &'p Prediction,
    ) -> BTreeMap<String, (&'p crate::plan::actual::PredictedKustomization, String)> {
        let contexts = super::followup::live_contexts(&self.config.clusters);
        prediction
            .affected()
            .filter_map(|k| {
                let context = contexts.get(k.cluster.as_str()).or_else(|| contexts.get(""))?.clone()?;
                Some((k.key(), (k, context)))
            })
            .collect()
    }

    /// Plans a merge queue group as it will land (its base commit against its head) and sets the
    /// `fluxplan` status on the group's head: the queue merges only what passes.
    pub(super) async fn merge_group(
        &self,
        job: &Job,
        g: MergeGroup,
        cancel: &CancelToken,
    ) -> Result<(), JobError> {
        let repo = &g.repo;
        let (forge, token) = self.forge(repo)?;
        let scope = Scope::Group(g.head_sha.clone());
        let planning = "planning the merge group…";
        let pending = ForgeWrite::status(&g.head_sha, None, StatusState::Pending, planning, None);
        if self.writer(job, forge, repo).write(&scope, &pending).await? == Said::Silenced {
            return Ok(());
        }
        let mirror = self.fetch(forge, repo, token.clone(), &[&g.base_sha, &g.head_sha]).await?;
        let number = super::merge_group_pull(&g.head_ref).unwrap_or(0);
        let run = self
            .store
            .start_run(
                Some(job.id),
                repo.forge.as_str(),
                &repo.full_name,
                number as i64,
                &g.base_ref,
                &g.head_sha,
                "merge-group",
                repo.web_url.as_deref(),
            )
            .await?;
        let result = self.merge_group_run(job, &g, mirror, &run, cancel).await;
        // Whatever stops it, its run is closed with why.
        if let Err(error) = &result {
            let _ = self.store.finish_run(run.0, &super::closed_runs::outcome_of_error(error)).await;
        }
        self.cancel_superseded_check_runs(job, forge, repo, &g.head_sha).await;
        result
    }

    /// Plans the group and posts its status; records the run `(id, page token)`.
    async fn merge_group_run(
        &self,
        job: &Job,
        g: &MergeGroup,
        mirror: PathBuf,
        (run_id, page_token): &(i64, String),
        cancel: &CancelToken,
    ) -> Result<(), JobError> {
        let (repo, started) = (&g.repo, Instant::now());
        let (forge, _) = self.forge(repo)?;
        let number = super::merge_group_pull(&g.head_ref).unwrap_or(0);
        let mut plan = self.plan_revisions(mirror, repo, &g.base_sha, &g.head_sha, cancel).await?;
        // The group's base commit is its branch's tip: named as the branch, as pull request
        // plans are, so an approved plan and the group landing exactly it have one digest.
        plan.base.rev = format!("refs/heads/{}", g.base_ref);
        let approved_by = match (plan.verdict, number) {
            (Verdict::Blocked, 1..) => self.group_approval(repo, number, &plan.digest()).await?,
            _ => None,
        };
        let (state, description) = status_of(&plan, approved_by.as_deref());
        let url = self.run_url(*run_id, page_token);
        let markdown = report::markdown(&plan);
        let last = ForgeWrite::status(&g.head_sha, None, state, &description, url.as_deref())
            .with_check(CheckOutput::of_plan(&plan, &markdown));
        let said = self.writer(job, forge, repo).write(&Scope::Group(g.head_sha.clone()), &last).await?;
        let timings = BTreeMap::from([("total_ms", started.elapsed().as_millis() as u64)]);
        let status = if said == Said::Silenced { "superseded" } else { "done" };
        let outcome = RunOutcome {
            status: status.into(),
            plan_digest: Some(plan.digest()),
            ..outcome_of(&plan, &timings)
        };
        self.store.finish_run(*run_id, &outcome).await?;
        tracing::info!(verdict = ?plan.verdict, group = %g.head_sha, status, "merge group planned");
        Ok(())
    }

    /// Who approved this very plan (same digest) for the current head of pull request `number`:
    /// a group that lands exactly the approved plan passes; one that lands anything more fails.
    async fn group_approval(
        &self,
        repo: &RepoInfo,
        number: u64,
        digest: &str,
    ) -> Result<Option<String>, JobError> {
        let (forge, _) = self.forge(repo)?;
        let pull = match forge.pull(repo, number).await {
            // A queue branch naming no pull request the forge knows: nothing approved.
            Err(ForgeError::NotFound(_)) => return Ok(None),
            other => self.count_forge_error(repo, other)?,
        };
        let approval =
            self.store.approval(repo.forge.as_str(), &repo.full_name, number as i64, &pull.head_sha).await?;
        Ok(approval.filter(|a| a.plan_digest.as_deref() == Some(digest)).map(|a| a.approved_by))
    }

    /// Fetches `wanted` commits into the repository's mirror.
    async fn fetch(
        &self,
        forge: &ForgeClient,
        repo: &RepoInfo,
        token: Option<String>,
        wanted: &[&str],
    ) -> Result<PathBuf, JobError> {
        let token = self.count_forge_error(repo, forge.git_token(repo, token.as_deref()).await)?;
        let auth = token.map(|token| GitAuth::for_forge(repo.forge, token));
        let refspec = match repo.forge {
            ForgeKind::GitHub => "+refs/pull/*/head:refs/pull/*/head",
            ForgeKind::GitLab => "+refs/merge-requests/*/head:refs/merge-requests/*/head",
        };
        let (mirrors, url) = (self.mirrors.clone(), repo.clone_url.clone());
        let wanted: Vec<String> = wanted.iter().map(|s| s.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
            mirrors.fetch(&url, &[refspec], &wanted, auth.as_ref())
        })
        .await
        .map_err(|e| JobError::Fatal(e.to_string()))?
        .map_err(JobError::from)
    }

    /// Plans `head` against `base` in the mirror, with the configured clusters, off the async
    /// runtime. A plan cut short by a
    /// shutdown is retried at once: not the plan's fault (another replica, or this one restarted,
    /// plans it again).
    pub(super) async fn plan_revisions(
        &self,
        mirror: PathBuf,
        repo: &RepoInfo,
        base: &str,
        head: &str,
        cancel: &CancelToken,
    ) -> Result<Plan, JobError> {
        let mut request = self.plan_request(mirror, base, head);
        request.repo_name = Some(repo.full_name.clone());
        request.cancel = cancel.clone();
        let plan = tokio::task::spawn_blocking(move || planner::plan(&request))
            .await
            .map_err(|e| JobError::Fatal(e.to_string()))?;
        if cancel.reason() == Some(CancelReason::ShuttingDown) {
            return Err(JobError::Stopped("the service shut down while planning".into()));
        }
        Ok(plan)
    }
}

/// `2 to create, 1 to update, 0 to delete`.
fn counts_line(plan: &Plan) -> String {
    let s = &plan.summary;
    format!(
        "{} to create, {} to update, {} to delete; verdict {}",
        s.create,
        s.update,
        s.delete,
        plan.verdict.as_str()
    )
}
