//! After a merge: watch one Kustomization of one cluster (read-only GETs, polled with backoff)
//! until the controller reaches the merge commit or the deadline passes, compare what it did
//! with the prediction, and record the result in the merge run. The write that completes the
//! run's follow-up counts the outcome; the follow-up comment is posted once, by whichever job
//! finds the run complete and not yet commented.
//!
//! The queue discipline is the controller pattern: one job per (cluster, Kustomization,
//! revision) (duplicates collapse on the job's key), its own exponential backoff between polls
//! and retries (kept in its row, so forgotten once it is done), and a bounded number of reads in
//! flight per cluster (`RolloutReaders`).

use super::worker::{JobError, Worker};
use super::FollowupTarget;
use crate::cluster::rollout::{revision_commit, KustomizationState, RolloutReaders};
use crate::forge::RepoInfo;
use crate::plan::actual::{compare, Followup, Observed, PredictedKustomization, Prediction};
use crate::planner::{self, Clusters};
use crate::report;
use crate::store::{now_ms, Job, RunFollowup};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How rollouts are watched.
#[derive(Clone)]
pub struct FollowupConfig {
    /// How long a Kustomization may take to reach the merge commit (default 30 minutes).
    pub deadline: Duration,
    /// The first wait between two reads of a Kustomization; it doubles up to `poll_max`.
    pub poll_min: Duration,
    pub poll_max: Duration,
    /// One reader per cluster, each with a bound on its reads in flight.
    pub readers: Arc<RolloutReaders>,
}

impl Default for FollowupConfig {
    fn default() -> Self {
        FollowupConfig {
            deadline: Duration::from_secs(30 * 60),
            poll_min: Duration::from_secs(10),
            poll_max: Duration::from_secs(120),
            readers: Arc::new(RolloutReaders::new(DEFAULT_READS_PER_CLUSTER)),
        }
    }
}

/// Reads of one cluster in flight at once, by default.
pub const DEFAULT_READS_PER_CLUSTER: usize = 4;

impl FollowupConfig {
    /// The wait after a job's `polls`-th "not yet": `poll_min` doubled each time, capped.
    pub fn backoff(&self, polls: i64) -> Duration {
        let factor = 2u32.saturating_pow(polls.clamp(0, 20) as u32);
        self.poll_min.saturating_mul(factor).min(self.poll_max)
    }
}

/// What one read says about the rollout.
enum Reading {
    Done(Observed),
    NotYet { last_applied: Option<String>, ready: Option<crate::plan::actual::Condition> },
}

impl Worker {
    pub(super) async fn followup(&self, job: &Job, target: FollowupTarget) -> Result<(), JobError> {
        let run = self.merge_run(target.run_id).await?;
        let followup = read_followup(&run)?;
        let key = target.key();
        if followup.outcome.is_some() || followup.results.contains_key(&key) {
            // Recorded already (a retry after a failed post): only the comment may be missing.
            return self.comment_once(&target.repo, target.number, target.run_id, &key).await;
        }
        let prediction: Prediction = run
            .prediction
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .ok_or_else(|| JobError::Fatal(format!("run {} holds no prediction", run.id)))?;
        let Some(predicted) = prediction.kustomizations.iter().find(|k| k.key() == key) else {
            return Err(JobError::Fatal(format!("run {} predicted nothing for {key}", run.id)));
        };
        // Names come from the repository: only a valid Kubernetes name reaches a request path.
        let (reading, unreadable) = if !(is_name(&target.namespace) && is_name(&target.name)) {
            let why = "its name is not a valid Kubernetes name: not read".to_string();
            (Reading::Done(Observed::Gone), Some(why))
        } else {
            // A cluster that does not answer (or forbids the read) is asked again with the same
            // backoff until the deadline: the follow-up then reports a timeout saying why.
            match self.read(&target).await {
                Ok(state) => (self.reading(&target, predicted, state).await, None),
                Err(error) => (Reading::NotYet { last_applied: None, ready: None }, Some(error)),
            }
        };
        let observed = match reading {
            Reading::Done(observed) => observed,
            Reading::NotYet { last_applied, ready } if now_ms() >= target.deadline_at => {
                Observed::TimedOut { last_applied, ready }
            }
            Reading::NotYet { .. } => {
                if let Some(error) = &unreadable {
                    tracing::warn!(%error, "cannot read the Kustomization: asking again later");
                }
                return Err(JobError::Wait(self.config.followup.backoff(job.polls), unreadable));
            }
        };
        let mut result = compare(predicted, &observed);
        if let Observed::TimedOut { .. } = observed {
            result.notes.push(format!(
                "did not reach {} within {}",
                super::worker::short(&target.revision),
                human(self.config.followup.deadline)
            ));
        }
        result.notes.extend(unreadable);
        if let Observed::Applied { revision, .. } | Observed::Failed { revision, .. } = &observed {
            if revision_commit(revision) != target.revision {
                result.notes.push(format!(
                    "the controller reached {revision}, a later revision: what merged after {} is in it too",
                    super::worker::short(&target.revision)
                ));
            }
        }
        let completed = self.store.update_followup(target.run_id, |f| f.record(&key, result.clone())).await?;
        tracing::info!(kustomization = %key, outcome = result.outcome.as_str(), completed, "rollout compared");
        if completed {
            let run = self.merge_run(target.run_id).await?;
            if let Some(outcome) = read_followup(&run)?.outcome {
                self.metrics.prediction(outcome);
            }
        }
        self.comment_once(&target.repo, target.number, target.run_id, &key).await
    }

    /// What the Kustomization's status says of the merge commit.
    async fn reading(
        &self,
        target: &FollowupTarget,
        predicted: &PredictedKustomization,
        state: Option<KustomizationState>,
    ) -> Reading {
        let Some(state) = state else {
            // Not there: removed as planned, or (a new one) not created yet.
            if predicted.status == "removed" {
                return Reading::Done(Observed::Gone);
            }
            return Reading::NotYet { last_applied: None, ready: None };
        };
        if predicted.status == "removed" || state.deleting {
            return Reading::NotYet { last_applied: state.last_applied, ready: state.ready };
        }
        if let Some(applied) = &state.last_applied {
            if self.reaches(&target.repo, applied, &target.revision).await {
                return Reading::Done(Observed::Applied {
                    revision: applied.clone(),
                    inventory: state.inventory.clone(),
                    ready: state.ready.clone(),
                });
            }
        }
        if let Some(attempted) = state.last_attempted.as_ref().filter(|_| state.failed()) {
            if self.reaches(&target.repo, attempted, &target.revision).await {
                return Reading::Done(Observed::Failed {
                    revision: attempted.clone(),
                    ready: state.ready.clone(),
                });
            }
        }
        Reading::NotYet { last_applied: state.last_applied, ready: state.ready }
    }

    /// True when the controller's `revision` is the merge commit or a later one (the merge
    /// commit is its ancestor in the repository's mirror).
    async fn reaches(&self, repo: &RepoInfo, revision: &str, merge: &str) -> bool {
        let commit = revision_commit(revision);
        if commit == merge {
            return true;
        }
        // The status is cluster data: only a commit id of the merge's kind reaches git (an OCI
        // artifact's sha256 digest is not a commit of a SHA-1 repository).
        if !crate::git::is_commit_id(commit) || commit.len() != merge.len() {
            return false;
        }
        // A commit the mirror holds (the base, still applied) is judged without fetching: only a
        // revision the mirror has never seen costs a token and a fetch.
        let (mirrors, url, commit, merge) =
            (self.mirrors.clone(), repo.clone_url.clone(), commit.to_string(), merge.to_string());
        let local = mirrors.path(&url);
        let (probe_commit, probe_merge) = (commit.clone(), merge.clone());
        let known = tokio::task::spawn_blocking(move || {
            let both = super::mirror::has_commit(&local, &probe_commit)
                && super::mirror::has_commit(&local, &probe_merge);
            both.then(|| super::mirror::is_ancestor(&local, &probe_merge, &probe_commit))
        })
        .await
        .ok()
        .flatten();
        if let Some(reached) = known {
            return reached;
        }
        // This replica's mirror may miss either commit (another replica recorded the merge).
        let auth = match self.forges.get(repo.forge) {
            Some((forge, token)) => forge
                .git_token(repo, token.as_deref())
                .await
                .ok()
                .flatten()
                .map(|t| super::mirror::GitAuth::for_forge(repo.forge, t)),
            None => None,
        };
        tokio::task::spawn_blocking(move || {
            let Ok(path) = mirrors.fetch(&url, &[], &[&commit, &merge], auth.as_ref()) else { return false };
            super::mirror::is_ancestor(&path, &merge, &commit)
        })
        .await
        .unwrap_or(false)
    }

    /// One read of the Kustomization, through its cluster's bounded reader.
    async fn read(&self, target: &FollowupTarget) -> Result<Option<KustomizationState>, String> {
        let reader = self.config.followup.readers.get(&target.context).await.map_err(|e| e.to_string())?;
        reader.kustomization(&target.namespace, &target.name).await.map_err(|e| e.to_string())
    }

    async fn merge_run(&self, id: i64) -> Result<RunFollowup, JobError> {
        self.store.run_followup(id).await?.ok_or_else(|| JobError::Fatal(format!("run {id} is gone")))
    }

    /// Posts the follow-up comment of a complete run once. Only the job whose result completed
    /// the run posts (one job per key, so never two at once); its retries find a comment already
    /// carrying the run's marker (a post whose record was lost) and take it for posted.
    async fn comment_once(
        &self,
        repo: &RepoInfo,
        number: u64,
        run_id: i64,
        key: &str,
    ) -> Result<(), JobError> {
        let run = self.merge_run(run_id).await?;
        let followup = read_followup(&run)?;
        if followup.outcome.is_none() || followup.commented || followup.completed_by.as_deref() != Some(key) {
            return Ok(());
        }
        let (forge, _) = self.forge(repo)?;
        let marker = report::followup::marker(run_id);
        let posted = self.count_forge_error(repo, forge.marked_comments(repo, number, &marker).await)?;
        if posted.is_empty() {
            let notes: Vec<String> =
                run.notes.as_deref().and_then(|n| serde_json::from_str(n).ok()).unwrap_or_default();
            let body = report::followup::markdown(run_id, &followup, &notes, self.config.comment_limit);
            self.count_forge_error(repo, forge.create_comment(repo, number, &body).await)?;
        }
        self.store.update_followup(run_id, |f| f.commented = true).await?;
        Ok(())
    }

    /// A follow-up that gives up for good (its cluster never answered) still completes its run:
    /// its Kustomization counts as a timeout, with why.
    pub(super) async fn give_up_followup(&self, job: &Job, error: &str) {
        let Ok(super::JobPayload::Followup(target)) = serde_json::from_str(&job.payload) else { return };
        let Ok(run) = self.merge_run(target.run_id).await else { return };
        let prediction: Option<Prediction> =
            run.prediction.as_deref().and_then(|p| serde_json::from_str(p).ok());
        let key = target.key();
        let Some(predicted) =
            prediction.as_ref().and_then(|p| p.kustomizations.iter().find(|k| k.key() == key))
        else {
            return;
        };
        let mut result = compare(predicted, &Observed::TimedOut { last_applied: None, ready: None });
        result.notes.push(format!("the cluster could not be read: {error}"));
        match self.store.update_followup(target.run_id, |f| f.record(&key, result.clone())).await {
            Ok(true) => {
                if let Ok(Ok(Some(outcome))) =
                    self.merge_run(target.run_id).await.map(|r| read_followup(&r).map(|f| f.outcome))
                {
                    self.metrics.prediction(outcome);
                }
                if let Err(JobError::Retry(e, _) | JobError::Fatal(e)) =
                    self.comment_once(&target.repo, target.number, target.run_id, &key).await
                {
                    tracing::warn!(error = %e, "cannot post the follow-up comment");
                }
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "cannot record the given-up follow-up"),
        }
    }
}

fn read_followup(run: &RunFollowup) -> Result<Followup, JobError> {
    run.followup
        .as_deref()
        .and_then(|f| serde_json::from_str(f).ok())
        .ok_or_else(|| JobError::Fatal(format!("run {} has no follow-up", run.id)))
}

/// Root → kube context of the clusters that can be watched ("" root: every root; `None`: a
/// root that is not live).
pub(super) fn live_contexts(clusters: &Clusters) -> BTreeMap<String, Option<String>> {
    match clusters {
        Clusters::Offline | Clusters::Snapshot(_) => BTreeMap::new(),
        Clusters::Live(options) => {
            BTreeMap::from([(String::new(), Some(options.context.clone().unwrap_or_default()))])
        }
        Clusters::PerRoot { file, kube } => match planner::read_clusters_file(file, kube) {
            Ok(roots) => roots
                .into_iter()
                .map(|(root, source)| {
                    let context = match source {
                        planner::ClusterSource::Live(options) => Some(options.context.unwrap_or_default()),
                        planner::ClusterSource::Snapshot(_) => None,
                    };
                    (root, context)
                })
                .collect(),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot read the clusters file: no rollout is watched");
                BTreeMap::new()
            }
        },
    }
}

/// The kube contexts of the live clusters (each once, sorted): what follow-ups and the resync read.
pub fn watched_contexts(clusters: &Clusters) -> Vec<String> {
    let contexts: std::collections::BTreeSet<String> =
        live_contexts(clusters).into_values().flatten().collect();
    contexts.into_iter().collect()
}

/// A Kubernetes object name or namespace (DNS-1123 subdomain).
fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// `30 min`, `45 s`.
fn human(d: Duration) -> String {
    if d.as_secs() >= 60 && d.as_secs().is_multiple_of(60) {
        format!("{} min", d.as_secs() / 60)
    } else if d.as_secs() > 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kubernetes_names_are_read() {
        assert!(is_name("flux-system") && is_name("apps.v2") && is_name("a"));
        for hostile in ["", "../secrets", "a/b", "Apps", "-a", "a-", "a?watch=1", &"a".repeat(254)] {
            assert!(!is_name(hostile), "{hostile}");
        }
    }

    #[test]
    fn polls_back_off_exponentially_up_to_the_cap() {
        let config = FollowupConfig {
            poll_min: Duration::from_secs(10),
            poll_max: Duration::from_secs(120),
            ..FollowupConfig::default()
        };
        let waits: Vec<u64> = (0..6).map(|n| config.backoff(n).as_secs()).collect();
        assert_eq!(waits, vec![10, 20, 40, 80, 120, 120]);
        assert_eq!(config.backoff(i64::MAX), Duration::from_secs(120));
    }
}
