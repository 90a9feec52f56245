//! The periodic resync (the informer pattern): webhooks get lost, the forge's list of open pull
//! requests does not. Each pass lists the open pull requests of every repository the bot has
//! heard of and queues a plan for each one whose current head has no plan, or whose plan was
//! made against a base that has moved since. Each pass also re-reads the inventories of the live
//! clusters: when they changed since the last pass, every open pull request is planned again (its
//! plan may be stale). Queued plans dedupe with those already waiting; a head whose plan was
//! given up after killing its process in every attempt is not planned again, nor is a pull
//! request whose plan is already queued or being made.
//!
//! Besides the periodic passes, the resync catches up (`super::recovery`): a pass at start, one
//! as soon as the database answers again after failing, and while a forge is down, probing passes
//! (5 s, doubling up to 5 min) until it answers; then its jobs waiting to retry are woken.

use super::mirror::{self, GitAuth};
use super::recovery::Recovery;
use super::{plan_payload, unplannable, Forges};
use crate::cluster::rollout::RolloutReaders;
use crate::forge::RepoInfo;
use crate::forge::{ForgeError, ForgeKind};
use crate::store::Store;
use anyhow::Result;
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A pause between repositories, to spread the forge calls of a pass.
const BETWEEN_REPOSITORIES: Duration = Duration::from_millis(200);
/// The first probe of a forge that went down, and the longest wait between probes.
const PROBE_MIN: Duration = Duration::from_secs(5);
const PROBE_MAX: Duration = Duration::from_secs(300);
/// A forge that goes down again this soon after it answered is flapping (it lists pull requests
/// but fails jobs): its probes keep slowing down instead of starting over.
const FLAPPING: Duration = Duration::from_secs(600);

pub struct Resync {
    store: Store,
    forges: Arc<Forges>,
    allow_forks: bool,
    clusters: Option<ClusterWatch>,
    recovery: Arc<Recovery>,
    /// A forge answered again during the last pass.
    recovered: std::sync::atomic::AtomicBool,
}

/// The live clusters re-read each pass, and the digest of their inventories the last pass saw.
struct ClusterWatch {
    contexts: Vec<String>,
    readers: Arc<RolloutReaders>,
    last: Mutex<Option<String>>,
}

impl Resync {
    pub fn new(store: Store, forges: Arc<Forges>, allow_forks: bool) -> Self {
        Resync {
            store,
            forges,
            allow_forks,
            clusters: None,
            recovery: Arc::default(),
            recovered: Default::default(),
        }
    }

    /// Shares the service's record of outages: the resync catches up after them.
    pub fn recovering_with(mut self, recovery: Arc<Recovery>) -> Self {
        self.recovery = recovery;
        self
    }

    /// Also re-read these clusters (kube contexts, "" for the current one) each pass.
    pub fn watching_clusters(mut self, contexts: Vec<String>, readers: Arc<RolloutReaders>) -> Self {
        if !contexts.is_empty() {
            self.clusters = Some(ClusterWatch { contexts, readers, last: Mutex::new(None) });
        }
        self
    }

    /// True when the clusters' inventories differ from the last pass's (never on the first pass,
    /// nor when a cluster cannot be read: that is no evidence of a change).
    async fn clusters_changed(&self) -> bool {
        let Some(watch) = &self.clusters else { return false };
        let mut hasher = Sha256::new();
        for context in &watch.contexts {
            let read = match watch.readers.get(context).await {
                Ok(reader) => reader.inventories().await,
                Err(e) => Err(e),
            };
            match read {
                Ok(inventories) => {
                    hasher.update(format!("{context}\n"));
                    for (kustomization, ids) in inventories {
                        hasher.update(format!("{kustomization}\n{}\n", ids.join("\n")));
                    }
                }
                Err(e) => {
                    tracing::warn!(context, error = %e, "resync: cannot re-read the cluster");
                    return false;
                }
            }
        }
        let digest = hex::encode(hasher.finalize());
        let previous = watch.last.lock().unwrap_or_else(|e| e.into_inner()).replace(digest.clone());
        previous.is_some_and(|p| p != digest)
    }

    /// A pass at once (catching up with what happened while the bot was down), then every
    /// `every` (±10%, so replicas spread out), at once when the database answers again, and
    /// probing while a forge is down, until `stop` is set.
    pub async fn run(self, every: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut probe = PROBE_MIN;
        let mut last_recovery: Option<Instant> = None;
        loop {
            self.logged_pass(&mut last_recovery).await;
            loop {
                let wait = if self.recovery.any_forge_down() { probe } else { jittered(every) };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = self.recovery.database_is_back() => {}
                    _ = self.recovery.forge_is_down() => {
                        let flapping = last_recovery.is_some_and(|at| at.elapsed() < FLAPPING);
                        probe = if flapping { (probe * 2).min(PROBE_MAX) } else { PROBE_MIN };
                        continue;
                    }
                    _ = stop.changed() => return,
                }
                break;
            }
            if self.recovery.any_forge_down() {
                probe = (probe * 2).min(PROBE_MAX);
            }
        }
    }

    async fn logged_pass(&self, last_recovery: &mut Option<Instant>) {
        match self.pass().await {
            Ok(queued) => tracing::info!(queued, "resync pass done"),
            Err(e) => {
                self.recovery.database_failed();
                tracing::warn!(error = %format!("{e:#}"), "resync pass failed")
            }
        }
        if self.recovered.swap(false, std::sync::atomic::Ordering::SeqCst) {
            *last_recovery = Some(Instant::now());
        }
    }

    /// One pass over every repository; returns how many plans it queued. A repository the forge
    /// cannot list is logged and skipped: the next pass tries again.
    pub async fn pass(&self) -> Result<usize> {
        let mut queued = 0;
        let cluster_changed = self.clusters_changed().await;
        if cluster_changed {
            tracing::info!("resync: the clusters' inventories changed: open pull requests are planned again");
        }
        for payload in self.store.seen_repositories().await? {
            let Some(repo) = serde_json::from_str::<serde_json::Value>(&payload)
                .ok()
                .and_then(|p| serde_json::from_value::<RepoInfo>(p["repo"].clone()).ok())
            else {
                continue;
            };
            match self.repository(&repo, cluster_changed).await {
                Ok(n) => queued += n,
                Err(e) => tracing::warn!(repo = %repo.full_name, error = %format!("{e:#}"), "cannot resync"),
            }
            tokio::time::sleep(BETWEEN_REPOSITORIES).await;
        }
        Ok(queued)
    }

    async fn repository(&self, repo: &RepoInfo, cluster_changed: bool) -> Result<usize> {
        let Some((forge, configured)) = self.forges.get(repo.forge) else { return Ok(0) };
        let pulls = match forge.open_pulls(repo, None).await {
            Ok(pulls) => {
                self.forge_answered(repo.forge).await;
                pulls
            }
            Err(e) => {
                if matches!(e, ForgeError::Transient(_) | ForgeError::RateLimited(_)) {
                    self.recovery.forge_failed(repo.forge);
                }
                return Err(e.into());
            }
        };
        let token = forge.git_token(repo, configured.as_deref()).await?;
        let auth = token.map(|token| GitAuth::for_forge(repo.forge, token));
        let mut jobs = Vec::new();
        for pull in pulls.iter().filter(|p| unplannable(p, self.allow_forks).is_none()) {
            let key = (repo.forge.as_str(), repo.full_name.as_str(), pull.number as i64);
            // Given up after killing its process in every attempt: another plan would only do the same.
            if self.store.gave_up_on(key.0, key.1, key.2, &pull.head_sha).await? {
                continue;
            }
            // A plan already queued or being made plans the pull request as it is now (the job
            // asks the forge for its head first): another would only plan it twice.
            if self.store.plan_pending(key.0, key.1, key.2).await? {
                continue;
            }
            let stale = match self.store.latest_run(key.0, key.1, key.2, &pull.head_sha).await? {
                None => true,
                Some(run) if of_an_older_generation(&run) => true,
                Some(run) => {
                    let (url, base, auth) = (repo.clone_url.clone(), pull.base_ref.clone(), auth.clone());
                    let tip =
                        tokio::task::spawn_blocking(move || mirror::branch_tip(&url, &base, auth.as_ref()))
                            .await??;
                    tip.is_some() && tip != run.base_sha
                }
            };
            if stale || cluster_changed {
                tracing::info!(repo = %repo.full_name, pr = pull.number, sha = %pull.head_sha, cluster_changed, "resync: plan missing or stale");
                let trigger = if stale { "resync" } else { "cluster-changed" };
                jobs.push(plan_payload(repo, pull, trigger).to_job());
            }
        }
        let queued = jobs.len();
        if !jobs.is_empty() {
            self.store.enqueue(&jobs).await?;
        }
        Ok(queued)
    }
}

impl Resync {
    /// After an outage, the jobs that wait to retry on this forge are due at once.
    async fn forge_answered(&self, kind: ForgeKind) {
        if !self.recovery.forge_answered(kind) {
            return;
        }
        self.recovered.store(true, std::sync::atomic::Ordering::SeqCst);
        match self.store.wake_retrying(kind.as_str()).await {
            Ok(woken) => tracing::info!(
                forge = kind.as_str(),
                woken,
                "the forge answers again: its waiting jobs are due"
            ),
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "cannot wake the jobs waiting for the forge"),
        }
    }
}

/// True when the run's plan was made by a fluxplan whose plans of the same commits may say
/// something else (see `plan::GENERATION`; plans before the field existed are generation 1). A
/// run without a plan is left to the other tests, or it would be planned again every pass.
fn of_an_older_generation(run: &crate::store::RunRow) -> bool {
    super::stale::generation(run).is_some_and(|g| g < crate::plan::GENERATION)
}

/// `every` ±10%.
fn jittered(every: Duration) -> Duration {
    let mut byte = [0u8; 1];
    let _ = getrandom::fill(&mut byte);
    let spread = every.as_millis() as f64 * 0.2 * (f64::from(byte[0]) / 255.0 - 0.5);
    Duration::from_millis((every.as_millis() as f64 + spread).max(1000.0) as u64)
}
