//! `fluxplan serve` (the bot) and `fluxplan migrate`.

use super::plan::LiveArgs;
use super::LimitArgs;
use crate::cancel::{CancelReason, CancelToken};
use crate::forge::github::{GitHub, GitHubAuth};
use crate::forge::gitlab::GitLab;
use crate::forge::roles::{CommandRoles, Role};
use crate::forge::ForgeClient;
use crate::jobs::mirror::Mirrors;
use crate::jobs::resync::Resync;
use crate::jobs::{Forges, Worker, WorkerConfig};
use crate::server::listen::{self, ConnectionLimits};
use crate::server::metrics::Metrics;
use crate::server::{router, AppState};
use crate::store::Store;
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// postgres://… (production) or sqlite://…; default: an embedded SQLite file in the data directory.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Where the embedded database, git mirrors and the render cache live.
    #[arg(long, env = "FLUXPLAN_DATA_DIR", default_value = "fluxplan-data")]
    pub data_dir: PathBuf,
}

impl DatabaseArgs {
    fn create_data_dir(&self) -> Result<()> {
        std::fs::create_dir_all(&self.data_dir)
            .with_context(|| format!("cannot create the data directory {}", self.data_dir.display()))
    }

    async fn open(&self) -> Result<Store> {
        if self.database_url.is_none() {
            self.create_data_dir()?;
        }
        let url = self.database_url.clone().unwrap_or_else(|| Store::default_url(&self.data_dir));
        let store = Store::connect(&url).await?;
        store.migrate().await?;
        Ok(store)
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[arg(long, env = "FLUXPLAN_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: String,
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// This service's external URL, for links from comments and statuses to full plans.
    #[arg(long, env = "FLUXPLAN_PUBLIC_URL")]
    pub public_url: Option<String>,
    #[arg(long, env = "FLUXPLAN_GITHUB_API_URL", default_value = "https://api.github.com")]
    pub github_api_url: String,
    #[arg(long, env = "FLUXPLAN_GITHUB_TOKEN", hide_env_values = true)]
    pub github_token: Option<String>,
    /// GitHub App id (with the private key, instead of a token).
    #[arg(long, env = "FLUXPLAN_GITHUB_APP_ID")]
    pub github_app_id: Option<u64>,
    #[arg(long, env = "FLUXPLAN_GITHUB_APP_PRIVATE_KEY", hide_env_values = true)]
    pub github_app_private_key: Option<String>,
    /// Webhook secrets; several (comma-separated) while rotating.
    #[arg(long, env = "FLUXPLAN_GITHUB_WEBHOOK_SECRET", hide_env_values = true, value_delimiter = ',')]
    pub github_webhook_secret: Vec<String>,
    #[arg(long, env = "FLUXPLAN_GITLAB_URL", default_value = "https://gitlab.com")]
    pub gitlab_url: String,
    #[arg(long, env = "FLUXPLAN_GITLAB_TOKEN", hide_env_values = true)]
    pub gitlab_token: Option<String>,
    /// Webhook tokens; several (comma-separated) while rotating.
    #[arg(long, env = "FLUXPLAN_GITLAB_WEBHOOK_TOKEN", hide_env_values = true, value_delimiter = ',')]
    pub gitlab_webhook_token: Vec<String>,
    /// Jobs planned at once by this replica.
    #[arg(long, env = "FLUXPLAN_WORKERS", default_value_t = 2)]
    pub workers: usize,
    /// Plan pull requests from forks (their content is untrusted; off by default).
    #[arg(long, env = "FLUXPLAN_ALLOW_FORKS")]
    pub allow_forks: bool,
    /// A running job whose worker stopped renewing its lease this long ago is taken over.
    #[arg(long, env = "FLUXPLAN_JOB_LEASE_SECS", default_value_t = 300)]
    pub job_lease_secs: u64,
    /// Attempts before a failing job is given up.
    #[arg(long, env = "FLUXPLAN_MAX_ATTEMPTS", default_value_t = 5)]
    pub max_attempts: i64,
    /// On SIGTERM, how long running jobs may finish before they are released to the queue.
    #[arg(long, env = "FLUXPLAN_SHUTDOWN_GRACE_SECS", default_value_t = 60)]
    pub shutdown_grace_secs: u64,
    /// Characters per comment before the plan is split (GitHub allows 65,536).
    #[arg(long, env = "FLUXPLAN_COMMENT_LIMIT", default_value_t = crate::report::split::GITHUB_COMMENT_LIMIT)]
    pub comment_limit: usize,
    /// A cluster snapshot file every plan uses.
    #[arg(long, env = "FLUXPLAN_CLUSTER_SNAPSHOT")]
    pub cluster_snapshot: Option<PathBuf>,
    #[command(flatten)]
    pub live: LiveArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Who may approve a blocked plan (GitHub: read, write, maintain, admin; GitLab: Reporter,
    /// Developer, Maintainer, Owner; or anyone).
    #[arg(long, env = "FLUXPLAN_APPROVE_ROLE", value_enum, default_value = "write")]
    pub approve_role: Role,
    /// Who may ask for a new plan.
    #[arg(long, env = "FLUXPLAN_PLAN_ROLE", value_enum, default_value = "write")]
    pub plan_role: Role,
    /// Who gets an answer to `/fluxplan help`.
    #[arg(long, env = "FLUXPLAN_HELP_ROLE", value_enum, default_value = "anyone")]
    pub help_role: Role,
    /// Seconds in which one user gets at most one reply (a refusal or help) per pull request.
    #[arg(long, env = "FLUXPLAN_REPLY_WINDOW_SECS", default_value_t = 600)]
    pub reply_window_secs: u64,
    /// The credential that opens the run index `/runs` (`?token=` or `Authorization: Bearer`);
    /// without it the index is off. Each run page also opens with its own token, which the links
    /// in comments and statuses carry.
    #[arg(long, env = "FLUXPLAN_RUNS_TOKEN", hide_env_values = true)]
    pub runs_token: Option<String>,
    /// Open connections at once; more are closed at once (counted in
    /// `fluxplan_connections_refused_total`).
    #[arg(long, env = "FLUXPLAN_MAX_CONNECTIONS", default_value_t = 512)]
    pub max_connections: usize,
    /// Seconds a client has to send a request's headers (also closes idle connections), and a
    /// webhook its body.
    #[arg(long, env = "FLUXPLAN_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    pub header_timeout_secs: u64,
    /// Seconds between resync passes, which plan every open pull request whose head has no plan
    /// or whose base moved (webhooks get lost); 0 turns it off.
    #[arg(long, env = "FLUXPLAN_RESYNC_SECS", default_value_t = 600)]
    pub resync_secs: u64,
    /// Seconds one plan may take before it is stopped (a `source-limit` alert).
    #[arg(long, env = "FLUXPLAN_PLAN_TIMEOUT", default_value_t = crate::planner::DEFAULT_PLAN_TIMEOUT_SECS)]
    pub plan_timeout: u64,
}

/// `migrate` names its database: it never creates the embedded default where it happens to run.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// postgres://… (production) or sqlite://….
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Migrate the embedded SQLite file in this data directory (what `serve` uses without a
    /// database URL; its default is ./fluxplan-data).
    #[arg(long, env = "FLUXPLAN_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

pub fn migrate(args: MigrateArgs) -> Result<u8> {
    let database = match (args.database_url, args.data_dir) {
        (None, None) => anyhow::bail!(
            "no database given: pass --database-url postgres://… (or set DATABASE_URL), or --data-dir DIR \
             for the embedded SQLite file `serve` uses (its default is --data-dir fluxplan-data)"
        ),
        (database_url, data_dir) => DatabaseArgs {
            database_url,
            data_dir: data_dir.unwrap_or_else(|| PathBuf::from("fluxplan-data")),
        },
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let store = database.open().await?;
        eprintln!("database migrated ({:?})", store.backend());
        Ok(0)
    })
}

pub fn run(args: ServeArgs) -> Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(serve(args));
    // Renders were stopped by now; a blocking task still winding down must not hold the exit.
    runtime.shutdown_timeout(Duration::ZERO);
    result
}

/// At most how much of the shutdown grace period is kept for stopping renders.
const SHUTDOWN_LINGER: Duration = Duration::from_secs(2);

async fn forges(args: &ServeArgs) -> Result<Forges> {
    let mut forges = Forges::default();
    if let Some(token) = &args.github_token {
        let client = GitHub::new(&args.github_api_url, GitHubAuth::Token(token.clone()))?;
        forges.github = Some((ForgeClient::GitHub(client), Some(token.clone())));
    } else if let (Some(app_id), Some(key)) = (args.github_app_id, &args.github_app_private_key) {
        let client =
            GitHub::new(&args.github_api_url, GitHubAuth::App { app_id, private_key_pem: key.clone() })?;
        forges.github = Some((ForgeClient::GitHub(client), None));
    }
    if let Some(token) = &args.gitlab_token {
        let client = GitLab::new(&args.gitlab_url, token)?;
        forges.gitlab = Some((ForgeClient::GitLab(client), Some(token.clone())));
    }
    Ok(forges)
}

async fn serve(args: ServeArgs) -> Result<u8> {
    // Git mirrors and the render cache live there, whatever the database.
    args.database.create_data_dir()?;
    let store = args.database.open().await?;
    let forges = Arc::new(forges(&args).await?);
    if forges.github.is_none() && forges.gitlab.is_none() {
        tracing::warn!("neither FLUXPLAN_GITHUB_TOKEN (or a GitHub App) nor FLUXPLAN_GITLAB_TOKEN is set: plans cannot be posted");
    }
    if args.github_webhook_secret.iter().all(String::is_empty)
        && args.gitlab_webhook_token.iter().all(String::is_empty)
    {
        tracing::warn!("no webhook secret or token is set: every webhook will be refused");
    }
    let metrics = Arc::new(Metrics::new());
    crate::sandbox::announce();
    let shutdown = CancelToken::new();
    let lease = Duration::from_secs(args.job_lease_secs.max(1));
    let config = Arc::new(WorkerConfig {
        data_dir: args.database.data_dir.clone(),
        public_url: args.public_url.clone(),
        allow_forks: args.allow_forks,
        lease,
        max_attempts: args.max_attempts.max(1),
        clusters: args.live.clusters(args.cluster_snapshot.as_ref()),
        comment_limit: args.comment_limit,
        limits: super::plan::limits(&args.limits, args.plan_timeout),
        roles: CommandRoles { approve: args.approve_role, plan: args.plan_role, help: args.help_role },
        reply_window: Duration::from_secs(args.reply_window_secs),
        shutdown: shutdown.clone(),
    });
    let mirrors = Arc::new(Mirrors::new(args.database.data_dir.join("mirrors")));
    let reclaimed = store.reclaim_expired(lease.as_millis() as i64, args.max_attempts.max(1)).await?;
    if reclaimed > 0 {
        tracing::info!(reclaimed, "jobs of stopped workers are back in the queue");
    }

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let instance = format!("{}-{}", hostname(), std::process::id());
    let mut workers = Vec::new();
    // Zero workers makes a replica that only accepts webhooks.
    for n in 0..args.workers {
        let worker = Worker::new(
            format!("{instance}-{n}"),
            store.clone(),
            forges.clone(),
            mirrors.clone(),
            config.clone(),
            metrics.clone(),
        );
        workers.push(tokio::spawn(worker.run(stopped.clone())));
    }
    let resync = (args.workers > 0 && args.resync_secs > 0).then(|| {
        let resync = Resync::new(store.clone(), forges.clone(), args.allow_forks);
        tokio::spawn(resync.run(Duration::from_secs(args.resync_secs), stopped.clone()))
    });
    let reclaimer = {
        let store = store.clone();
        let max_attempts = args.max_attempts.max(1);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(lease / 2).await;
                if let Ok(n @ 1..) = store.reclaim_expired(lease.as_millis() as i64, max_attempts).await {
                    tracing::info!(reclaimed = n, "jobs of stopped workers are back in the queue");
                }
            }
        })
    };

    let refused_connections = metrics.connections_refused.clone();
    let mut state = AppState::new(
        store.clone(),
        metrics,
        args.github_webhook_secret.clone(),
        args.gitlab_webhook_token.clone(),
        args.allow_forks,
    );
    state.body_timeout = Duration::from_secs(args.header_timeout_secs.max(1));
    state.runs_token = args.runs_token.clone().filter(|t| !t.is_empty()).map(Arc::new);
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr()?;
    println!("fluxplan listening on http://{address}");
    let _ = std::io::stdout().flush();
    tracing::info!(%address, backend = ?store.backend(), workers = args.workers, "serving");
    learn_identities(forges.clone(), state.forges_unready.clone());
    let limits = ConnectionLimits {
        max_connections: args.max_connections.max(1),
        header_timeout: Duration::from_secs(args.header_timeout_secs.max(1)),
    };
    listen::serve(listener, router(state), limits, refused_connections, shutdown_signal()).await;

    // Finish running jobs, or release them to the queue when they take too long.
    tracing::info!("shutting down: finishing running jobs");
    let _ = stop.send(true);
    reclaimer.abort();
    if let Some(resync) = resync {
        resync.abort();
    }
    // Running jobs get most of the grace period to finish; then every render is stopped (its
    // kustomize processes killed) and the jobs release themselves, all within the period.
    let grace = Duration::from_secs(args.shutdown_grace_secs);
    let to_stop = SHUTDOWN_LINGER.min(grace / 2);
    let finished = tokio::time::timeout(grace - to_stop, futures::future::join_all(workers.iter_mut())).await;
    if finished.is_err() {
        shutdown.cancel(CancelReason::ShuttingDown);
        let running = workers.iter_mut().filter(|w| !w.is_finished());
        let _ = tokio::time::timeout(to_stop, futures::future::join_all(running)).await;
        for worker in &workers {
            worker.abort();
        }
        let released = store.release_running(&instance).await?;
        tracing::warn!(released, "running jobs released to the queue after {}s", grace.as_secs());
    }
    Ok(0)
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

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "fluxplan".into())
}
