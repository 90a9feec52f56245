//! The bot as one process: the store, the forges, the workers, the resync and the HTTP listener,
//! started together and stopped together. `fluxplan serve` fills a [`ServiceConfig`] and runs it.

use crate::cancel::{CancelReason, CancelToken};
use crate::forge::github::{GitHub, GitHubAuth};
use crate::forge::gitlab::GitLab;
use crate::forge::roles::CommandRoles;
use crate::forge::ForgeClient;
use crate::jobs::instance::Instance;
use crate::jobs::mirror::Mirrors;
/// How jobs whose retries an outage used up are retried later (set by `serve`'s flags).
pub use crate::jobs::recovery::RetryLater;
use crate::jobs::resync::Resync;
use crate::jobs::{Forges, SlowLane, Worker, WorkerConfig};
use crate::planner;
use crate::server::listen::{self, ConnectionLimits};
use crate::server::metrics::Metrics;
use crate::server::{metrics_router, router, router_without_metrics, AppState};
use crate::store::Store;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Everything the bot is configured with.
pub struct ServiceConfig {
    /// Address to listen on, e.g. `0.0.0.0:8080`.
    pub listen: String,
    /// Where `/metrics` is served apart, e.g. `0.0.0.0:9090`; then not on `listen`. `None`:
    /// on `listen`.
    pub metrics_listen: Option<String>,
    /// `postgres://…` or `sqlite://…`; `None`: the embedded SQLite file in `data_dir`.
    pub database_url: Option<String>,
    /// Git mirrors, the render cache and the embedded database.
    pub data_dir: PathBuf,
    /// This service's external URL, for links from comments and statuses to full plans.
    pub public_url: Option<String>,
    pub github_api_url: String,
    pub github_token: Option<String>,
    /// A GitHub App (id, private key PEM) instead of a token.
    pub github_app: Option<(u64, String)>,
    /// Where the GitHub verdict goes: commit status, check run, or both.
    pub github_checks: crate::forge::checks::ChecksMode,
    pub github_webhook_secrets: Vec<String>,
    pub gitlab_url: String,
    pub gitlab_token: Option<String>,
    pub gitlab_webhook_tokens: Vec<String>,
    /// Deadlines of forge calls, and when a refused token makes the bot unready.
    pub forge_calls: ForgeCallSettings,
    /// Jobs planned at once by this replica (0: it only queues).
    pub workers: usize,
    pub allow_forks: bool,
    pub job_lease: Duration,
    pub max_attempts: i64,
    pub shutdown_grace: Duration,
    pub comment_limit: usize,
    pub clusters: planner::Clusters,
    pub limits: planner::Limits,
    /// How HelmReleases are rendered and where charts may be fetched from.
    pub helm: planner::HelmSettings,
    pub roles: CommandRoles,
    pub reply_window: Duration,
    pub runs_token: Option<String>,
    /// `/mcp`: its token and the directories whose repositories agents may plan; `None`: off.
    pub mcp: Option<McpConfig>,
    pub max_connections: usize,
    /// Connections one client may hold; `None`: an eighth of `max_connections`.
    pub max_connections_per_client: Option<usize>,
    pub header_timeout: Duration,
    /// Bytes of unverified webhook bodies held at once (memory and spool), and by one client.
    pub unverified_bytes: usize,
    pub unverified_bytes_per_client: usize,
    /// Bytes per second a webhook body must average after a short grace (0: no minimum).
    pub min_body_rate: u64,
    /// Between resync passes; zero turns the resync off.
    pub resync: Duration,
    /// Watching rollouts after merges.
    pub followup: FollowupSettings,
    /// How jobs whose retries an outage used up are retried later.
    pub retry_later: crate::jobs::recovery::RetryLater,
    /// What is older is pruned from the database; zero keeps everything.
    pub retention: Duration,
}

/// MCP over HTTP inside the bot.
pub struct McpConfig {
    pub token: String,
    /// Directories whose repositories may be planned; none: every repository is refused.
    pub allowed: Vec<PathBuf>,
}

/// How the forges are called.
#[derive(Debug, Clone, Copy)]
pub struct ForgeCallSettings {
    pub deadlines: crate::forge::gate::Deadlines,
    /// A forge refusing the token this long makes `/readyz` answer 503.
    pub unready_after: Duration,
}

/// How rollouts are watched after merges.
#[derive(Debug, Clone)]
pub struct FollowupSettings {
    pub deadline: Duration,
    pub poll_min: Duration,
    pub poll_max: Duration,
    pub reads_per_cluster: usize,
}

pub use crate::jobs::DEFAULT_READS_PER_CLUSTER as DEFAULT_FOLLOWUP_READS_PER_CLUSTER;

/// Runs the bot until SIGTERM or SIGINT.
pub fn run(config: ServiceConfig) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(serve(config));
    // Renders were stopped by now; a blocking task still winding down must not hold the exit.
    runtime.shutdown_timeout(Duration::ZERO);
    result
}

/// The data directory is owner-only, whatever made it: the database holds every run's page
/// token, the mirrors every pull request's content.
fn create_data_dir(data_dir: &Path) -> Result<()> {
    crate::private_files::owner_only_dir(data_dir).context("the data directory")
}

/// The mirrors' directory and each mirror owner-only (mirrors an older fluxplan made were not).
fn private_mirrors(dir: &Path) -> Result<()> {
    crate::private_files::owner_only_dir(dir)?;
    let mirrors: Vec<PathBuf> = std::fs::read_dir(dir)?.flatten().map(|entry| entry.path()).collect();
    crate::private_files::tighten_existing(mirrors.iter().map(PathBuf::as_path))
}

/// Opens the store and applies its migrations: `database_url`, else the embedded SQLite file in
/// `data_dir` (created when missing).
pub async fn open_store(database_url: Option<&str>, data_dir: &Path) -> Result<Store> {
    let url = match database_url {
        Some(url) => url.to_string(),
        None => {
            create_data_dir(data_dir)?;
            // Owner-only before SQLite opens it: its -wal and -shm files take the same mode.
            let file = data_dir.join(crate::store::SQLITE_FILE);
            crate::private_files::owner_only_file(&file)?;
            let journals =
                ["-wal", "-shm"].map(|suffix| PathBuf::from(format!("{}{suffix}", file.display())));
            crate::private_files::tighten_existing(journals.iter().map(PathBuf::as_path))?;
            Store::default_url(data_dir)
        }
    };
    let store = Store::connect(&url).await?;
    store.migrate().await?;
    Ok(store)
}

/// At most how much of the shutdown grace period is kept for stopping renders.
const SHUTDOWN_LINGER: Duration = Duration::from_secs(2);

/// The forges configured; an empty token or key (a Secret's missing key) configures none.
async fn forges(config: &ServiceConfig) -> Result<Forges> {
    let mut forges = Forges::default();
    let set = |value: &Option<String>| value.clone().filter(|v| !v.trim().is_empty());
    if let Some(token) = &set(&config.github_token) {
        let auth = GitHubAuth::Token(token.clone());
        let client = GitHub::with_deadlines(&config.github_api_url, auth, config.forge_calls.deadlines)?
            .with_checks(config.github_checks);
        forges.github = Some((ForgeClient::GitHub(client), Some(token.clone())));
    } else if let Some((app_id, key)) = config.github_app.as_ref().filter(|(_, key)| !key.trim().is_empty()) {
        let auth = GitHubAuth::App { app_id: *app_id, private_key_pem: key.clone() };
        let client = GitHub::with_deadlines(&config.github_api_url, auth, config.forge_calls.deadlines)?
            .with_checks(config.github_checks);
        forges.github = Some((ForgeClient::GitHub(client), None));
    }
    if let Some(token) = &set(&config.gitlab_token) {
        let client = GitLab::with_deadlines(&config.gitlab_url, token, config.forge_calls.deadlines)?;
        forges.gitlab = Some((ForgeClient::GitLab(client), Some(token.clone())));
    }
    Ok(forges)
}

/// The call gates of the configured forges (what they count and learn about each forge).
fn gates(forges: &Forges) -> Vec<Arc<crate::forge::gate::Gate>> {
    [crate::forge::ForgeKind::GitHub, crate::forge::ForgeKind::GitLab]
        .into_iter()
        .filter_map(|kind| forges.get(kind).map(|(forge, _)| forge.gate().clone()))
        .collect()
}

async fn serve(config: ServiceConfig) -> Result<()> {
    // Everything the bot writes (mirrors, cache, exports) is its user's alone; what a crashed
    // bot left in the scratch directory goes.
    crate::private_files::restrict_new_files();
    crate::render::leftovers::remove_dead_exports();
    // Git mirrors and the render cache live there, whatever the database.
    create_data_dir(&config.data_dir)?;
    private_mirrors(&config.data_dir.join("mirrors"))?;
    // What a git killed mid-fetch left behind would fail every later fetch of its repository.
    let mirrors_dir = config.data_dir.join("mirrors");
    tokio::task::spawn_blocking(move || crate::jobs::mirror::heal_all(&mirrors_dir)).await?;
    let store = open_store(config.database_url.as_deref(), &config.data_dir).await?;
    let forges = Arc::new(forges(&config).await?);
    let no_forge = forges.github.is_none() && forges.gitlab.is_none();
    if no_forge {
        tracing::error!("{}; /readyz answers 503", crate::server::NO_FORGE);
    }
    if config.github_webhook_secrets.iter().all(String::is_empty)
        && config.gitlab_webhook_tokens.iter().all(String::is_empty)
    {
        tracing::warn!("no webhook secret or token is set: every webhook will be refused");
    }
    let metrics = Arc::new(Metrics::new());
    for gate in gates(&forges) {
        gate.count_into(metrics.forge_call_counters());
    }
    // The engines renders will use, named once at start (finding them takes a moment).
    let helm_major = config.helm.major;
    let (kustomize, helm) = tokio::task::spawn_blocking(move || {
        let kustomize = crate::render::kustomize::Kustomize::detect(Duration::from_secs(30))
            .map(|k| k.version)
            .unwrap_or_else(|_| "none".into());
        let helm = crate::render::helm::Helm::detect(helm_major)
            .map(|h| h.version)
            .unwrap_or_else(|_| "none".into());
        (kustomize, helm)
    })
    .await?;
    metrics.set_build_info(&kustomize, &helm);
    crate::sandbox::announce();
    let shutdown = CancelToken::new();
    let lease = config.job_lease.max(Duration::from_secs(1));
    let max_attempts = config.max_attempts.max(1);
    // One reader per cluster, shared by the follow-ups and the resync: reads in flight stay bounded.
    let readers = Arc::new(crate::cluster::rollout::RolloutReaders::new(config.followup.reads_per_cluster));
    let worker_config = Arc::new(WorkerConfig {
        data_dir: config.data_dir.clone(),
        public_url: config.public_url.clone(),
        allow_forks: config.allow_forks,
        lease,
        max_attempts,
        clusters: config.clusters.clone(),
        comment_limit: config.comment_limit,
        limits: config.limits,
        helm: config.helm.clone(),
        roles: config.roles,
        reply_window: config.reply_window,
        shutdown: shutdown.clone(),
        followup: crate::jobs::FollowupConfig {
            deadline: config.followup.deadline,
            poll_min: config.followup.poll_min,
            poll_max: config.followup.poll_max,
            readers: readers.clone(),
        },
    });
    let mirrors = Arc::new(Mirrors::new(config.data_dir.join("mirrors")));
    // The jobs a dead earlier process of this replica held are taken back at once; those of
    // other replicas once their lease expires.
    let instance = Instance::of_data_dir(&config.data_dir)?;
    let own_dead = instance.inherited.then(|| instance.workers_pattern());
    tracing::info!(instance = %instance.id, inherited = instance.inherited, "this replica's workers are {}-N", instance.id);
    reclaim(&store, &forges, &metrics, lease, max_attempts, own_dead.as_deref()).await?;

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    let slow_lane = SlowLane::for_workers(config.workers);
    let recovery = Arc::new(crate::jobs::recovery::Recovery::new(config.retry_later));
    // Zero workers makes a replica that only accepts webhooks.
    for n in 0..config.workers {
        let worker = Worker::new(
            format!("{}-{n}", instance.id),
            store.clone(),
            forges.clone(),
            mirrors.clone(),
            worker_config.clone(),
            metrics.clone(),
        )
        .sharing_slow_lane(slow_lane.clone())
        .with_recovery(recovery.clone());
        workers.push(tokio::spawn(worker.run(stopped.clone())));
    }
    let resync = (config.workers > 0 && !config.resync.is_zero()).then(|| {
        let resync = Resync::new(store.clone(), forges.clone(), config.allow_forks)
            .watching_clusters(crate::jobs::watched_contexts(&config.clusters), readers.clone())
            .recovering_with(recovery.clone());
        tokio::spawn(resync.run(config.resync, stopped.clone()))
    });
    let retention = (!config.retention.is_zero())
        .then(|| tokio::spawn(crate::jobs::retention::run(store.clone(), config.retention, stopped.clone())));
    let reclaimer = {
        let (store, forges, metrics) = (store.clone(), forges.clone(), metrics.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(lease / 2).await;
                if let Err(e) = reclaim(&store, &forges, &metrics, lease, max_attempts, None).await {
                    tracing::warn!(error = %format!("{e:#}"), "cannot take over the jobs of stopped workers");
                }
            }
        })
    };

    let refused_connections = metrics.connections_refused.clone();
    let mut state = AppState::new(
        store.clone(),
        metrics,
        config.github_webhook_secrets.clone(),
        config.gitlab_webhook_tokens.clone(),
        config.allow_forks,
    );
    state.body_timeout = config.header_timeout.max(Duration::from_secs(1));
    state.min_body_rate = config.min_body_rate;
    state.spool = crate::server::budget::Spool(config.data_dir.clone());
    state.unverified = crate::server::budget::UnverifiedBudget::new(
        config.unverified_bytes.max(crate::server::MAX_WEBHOOK_BYTES),
        config.unverified_bytes_per_client,
        state.metrics.unverified_bytes.clone(),
    );
    state.runs_token = config.runs_token.clone().filter(|t| !t.is_empty()).map(Arc::new);
    state.mcp = mcp_endpoint(&config)?;
    state.no_forge = no_forge;
    state.recovery = recovery.clone();
    state.token_watch =
        crate::server::TokenWatch { gates: gates(&forges), unready_after: config.forge_calls.unready_after };
    let limits = ConnectionLimits {
        max_connections: config.max_connections.max(1),
        max_connections_per_client: config
            .max_connections_per_client
            .unwrap_or(config.max_connections / 8)
            .clamp(1, config.max_connections.max(1)),
        header_timeout: config.header_timeout.max(Duration::from_secs(1)),
    };
    // Both listeners stop on the same signal.
    let (stopping, stop_serving) = tokio::sync::watch::channel(false);
    // `/metrics` on its own listener, with the same limits (its own connections: a flood of the
    // webhook port does not keep the scraper out), and then not on the main one.
    let metrics_server = match config.metrics_listen.as_deref().filter(|a| !a.is_empty()) {
        Some(metrics_listen) => {
            let listener = tokio::net::TcpListener::bind(metrics_listen)
                .await
                .with_context(|| format!("cannot listen on {metrics_listen} (--metrics-listen)"))?;
            let address = listener.local_addr()?;
            println!("fluxplan metrics listening on http://{address}");
            tracing::info!(%address, "serving /metrics");
            let mut stop = stop_serving.clone();
            let stopped = async move {
                let _ = stop.wait_for(|stopping| *stopping).await;
            };
            let app = metrics_router(state.clone());
            Some(tokio::spawn(listen::serve(listener, app, limits, refused_connections.clone(), stopped)))
        }
        None => None,
    };
    let app =
        if metrics_server.is_some() { router_without_metrics(state.clone()) } else { router(state.clone()) };
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let address = listener.local_addr()?;
    println!("fluxplan listening on http://{address}");
    let _ = std::io::stdout().flush();
    tracing::info!(%address, backend = ?store.backend(), workers = config.workers, "serving");
    learn_identities(forges.clone(), state.forges_unready.clone());
    let stopped = async move {
        shutdown_signal().await;
        let _ = stopping.send(true);
    };
    listen::serve(listener, app, limits, refused_connections, stopped).await;
    if let Some(metrics_server) = metrics_server {
        let _ = metrics_server.await;
    }

    // Finish running jobs, or release them to the queue when they take too long.
    tracing::info!("shutting down: finishing running jobs");
    let _ = stop.send(true);
    reclaimer.abort();
    if let Some(resync) = resync {
        resync.abort();
    }
    if let Some(retention) = retention {
        retention.abort();
    }
    // Running jobs get most of the grace period to finish; then every render is stopped (its
    // kustomize processes killed) and the jobs release themselves, all within the period.
    let grace = config.shutdown_grace;
    let to_stop = SHUTDOWN_LINGER.min(grace / 2);
    let finished = tokio::time::timeout(grace - to_stop, futures::future::join_all(workers.iter_mut())).await;
    if finished.is_err() {
        shutdown.cancel(CancelReason::ShuttingDown);
        let running = workers.iter_mut().filter(|w| !w.is_finished());
        let _ = tokio::time::timeout(to_stop, futures::future::join_all(running)).await;
        for worker in &workers {
            worker.abort();
        }
        let released = store.release_running(&instance.id).await?;
        tracing::warn!(released, "running jobs released to the queue after {}s", grace.as_secs());
    }
    Ok(())
}

/// `/mcp` as the bot serves it: its clusters, charts, limits and database, the operator's
/// directories; `None` without a token.
fn mcp_endpoint(config: &ServiceConfig) -> Result<Option<crate::server::mcp::Endpoint>> {
    let Some(mcp) = config.mcp.as_ref().filter(|mcp| !mcp.token.is_empty()) else { return Ok(None) };
    let allowed = mcp
        .allowed
        .iter()
        .map(|dir| std::fs::canonicalize(dir).with_context(|| format!("--mcp-allow {}", dir.display())))
        .collect::<Result<Vec<_>>>()?;
    let database_url = config.database_url.clone().unwrap_or_else(|| Store::default_url(&config.data_dir));
    let settings = crate::mcp::Settings {
        allowed,
        allow_hint: "`fluxplan serve` with --mcp-allow DIR",
        clusters: config.clusters.clone(),
        render: planner::RenderSettings {
            cache_dir: Some(config.data_dir.join("cache")),
            helm: config.helm.clone(),
            ..Default::default()
        },
        limits: config.limits,
        database_url: Some(database_url),
    };
    Ok(Some(crate::server::mcp::Endpoint {
        token: Arc::new(mcp.token.clone()),
        service: crate::mcp::http::service(settings),
    }))
}

/// Takes over the jobs of workers that stopped (their lease expired, or they were this replica's
/// and matched `dead_workers`): back to the queue, or, when their process died during every
/// attempt, given up and reported as such.
async fn reclaim(
    store: &Store,
    forges: &crate::jobs::Forges,
    metrics: &Metrics,
    lease: Duration,
    max_attempts: i64,
    dead_workers: Option<&str>,
) -> Result<()> {
    let reclaimed = store.reclaim_expired(lease.as_millis() as i64, max_attempts, dead_workers).await?;
    if reclaimed.requeued > 0 {
        tracing::info!(reclaimed = reclaimed.requeued, "jobs of stopped workers are back in the queue");
    }
    crate::jobs::gave_up::report(store, forges, metrics, &reclaimed.gave_up).await;
    Ok(())
}

/// Learns who the bot is on each forge (so it never obeys itself), retrying with backoff while
/// a forge is down; until then `/readyz` says which forge does not answer.
fn learn_identities(forges: Arc<Forges>, unready: Arc<std::sync::Mutex<Vec<String>>>) {
    let kinds = [crate::forge::ForgeKind::GitHub, crate::forge::ForgeKind::GitLab];
    for kind in kinds.into_iter().filter(|k| forges.get(*k).is_some()) {
        unready.lock().unwrap_or_else(|e| e.into_inner()).push(kind.as_str().to_string());
        let (forges, unready) = (forges.clone(), unready.clone());
        tokio::spawn(async move {
            let mut wait = Duration::from_secs(1);
            loop {
                let Some((forge, _)) = forges.get(kind) else { return };
                match forge.identity().await {
                    Ok(me) => {
                        tracing::info!(forge = kind.as_str(), identity = %me, "the bot comments as this identity");
                        unready.lock().unwrap_or_else(|e| e.into_inner()).retain(|k| k != kind.as_str());
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(forge = kind.as_str(), error = %e, retry_in = ?wait, "forge not answering")
                    }
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(60));
            }
        });
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}
