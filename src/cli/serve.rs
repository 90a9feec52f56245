//! `fluxplan serve` (the bot) and `fluxplan migrate`: their arguments, handed to `service`.

use super::bytes::ByteSize;
use super::plan::LiveArgs;
use super::LimitArgs;
use crate::forge::roles::{CommandRoles, Role};
use crate::service::{self, ServiceConfig};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Where `serve` keeps its data without --data-dir.
const DEFAULT_DATA_DIR: &str = "fluxplan-data";

#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// postgres://… (production) or sqlite://…; default: an embedded SQLite file in the data directory.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Where the embedded database, git mirrors and the render cache live.
    #[arg(long, env = "FLUXPLAN_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[arg(long, env = "FLUXPLAN_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: String,
    /// Serve `/metrics` on this address of its own (e.g. `0.0.0.0:9090`), and no longer on
    /// --listen (404 there): metrics off the port the webhooks come to. Default: `/metrics` on
    /// --listen.
    #[arg(long, env = "FLUXPLAN_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<String>,
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
    /// A running job whose worker stopped renewing its lease this long ago is taken over by
    /// another worker (workers renew it every few seconds while they plan). A restarted replica
    /// takes back its own jobs at once.
    #[arg(long, env = "FLUXPLAN_JOB_LEASE_SECS", default_value_t = 30)]
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
    pub forge_calls: super::forge_calls::ForgeCallArgs,
    #[command(flatten)]
    pub live: LiveArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub helm: super::HelmArgs,
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
    /// Open connections at once. At the cap the longest idle connection is closed to make room,
    /// else one of the client holding the most (requests waiting for their body included), or the
    /// new one when its client holds the most (counted in `fluxplan_connections_refused_total`).
    #[arg(long, env = "FLUXPLAN_MAX_CONNECTIONS", default_value_t = 512)]
    pub max_connections: usize,
    /// Open connections one client (peer address; an IPv6 /64) may hold; beyond, its longest idle
    /// one is closed, or the new one. Default: an eighth of --max-connections. Behind a proxy
    /// every client is the proxy: set it to --max-connections there.
    #[arg(long, env = "FLUXPLAN_MAX_CONNECTIONS_PER_CLIENT")]
    pub max_connections_per_client: Option<usize>,
    /// Seconds a client has to send a request's headers (also closes idle connections), and a
    /// webhook its body.
    #[arg(long, env = "FLUXPLAN_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    pub header_timeout_secs: u64,
    /// Bytes of unsigned webhook bodies received and not yet checked that may be held at once
    /// (past 64 KiB a body is spooled to an unnamed file in the data directory); more gets 503.
    /// At least 25 MiB. A number of bytes, or with a unit (1GiB, 512MiB, 500MB).
    #[arg(long, env = "FLUXPLAN_MAX_UNVERIFIED_BYTES", value_name = "SIZE", default_value_t = ByteSize(crate::server::DEFAULT_MAX_UNVERIFIED_BYTES as u64))]
    pub max_unverified_bytes: ByteSize,
    /// Of those, the bytes one client (peer address; an IPv6 /64) may hold; more gets 503.
    /// Behind a proxy every client is the proxy: set it to --max-unverified-bytes there.
    #[arg(long, env = "FLUXPLAN_MAX_UNVERIFIED_BYTES_PER_CLIENT", value_name = "SIZE", default_value_t = ByteSize(crate::server::DEFAULT_UNVERIFIED_BYTES_PER_CLIENT as u64))]
    pub max_unverified_bytes_per_client: ByteSize,
    /// Bytes per second a webhook body must average after its first 2 seconds, or it is cut
    /// (408): a number, or with a unit (256KiB); 0: no minimum.
    #[arg(long, env = "FLUXPLAN_MIN_BODY_RATE", value_name = "SIZE", default_value_t = ByteSize(crate::server::DEFAULT_MIN_BODY_RATE))]
    pub min_body_rate: ByteSize,
    /// Seconds between resync passes, which plan every open pull request whose head has no plan
    /// or whose base moved (webhooks get lost); 0 turns it off.
    #[arg(long, env = "FLUXPLAN_RESYNC_SECS", default_value_t = 600)]
    pub resync_secs: u64,
    /// Seconds a merged change may take to reach every affected Kustomization before its
    /// follow-up reports a timeout.
    #[arg(long, env = "FLUXPLAN_FOLLOWUP_DEADLINE_SECS", default_value_t = 1800)]
    pub followup_deadline_secs: u64,
    /// Milliseconds between the first two reads of a Kustomization during a rollout; the wait
    /// doubles after each read, up to --followup-poll-max-ms.
    #[arg(long, env = "FLUXPLAN_FOLLOWUP_POLL_MS", default_value_t = 10_000)]
    pub followup_poll_ms: u64,
    #[arg(long, env = "FLUXPLAN_FOLLOWUP_POLL_MAX_MS", default_value_t = 120_000)]
    pub followup_poll_max_ms: u64,
    /// Reads of one cluster in flight at once, across this replica's follow-ups.
    #[arg(long, env = "FLUXPLAN_FOLLOWUP_READS_PER_CLUSTER", default_value_t = service::DEFAULT_FOLLOWUP_READS_PER_CLUSTER)]
    pub followup_reads_per_cluster: usize,
    /// Seconds one plan may take before it is stopped (a `source-limit` alert).
    #[arg(long, env = "FLUXPLAN_PLAN_TIMEOUT", default_value_t = crate::planner::DEFAULT_PLAN_TIMEOUT_SECS)]
    pub plan_timeout: u64,
    /// A job whose --max-attempts a transient failure used up (a forge outage, a long rate limit)
    /// is retried after this many seconds (sooner once the forge answers again), with an `error`
    /// status saying so; 0: it fails at once.
    #[arg(long, env = "FLUXPLAN_RETRY_LATER_SECS", default_value_t = 300)]
    pub retry_later_secs: u64,
    /// A job retried later is given up once it is this many seconds old.
    #[arg(long, env = "FLUXPLAN_RETRY_MAX_AGE_SECS", default_value_t = 86_400)]
    pub retry_max_age_secs: u64,
    /// Runs, webhook deliveries and finished jobs older than this many days are deleted (each
    /// pull request's latest run is kept); 0 keeps everything.
    #[arg(long, env = "FLUXPLAN_RETENTION_DAYS", default_value_t = 90)]
    pub retention_days: u64,
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
    let (database_url, data_dir) = match (args.database_url, args.data_dir) {
        (None, None) => anyhow::bail!(
            "no database given: pass --database-url postgres://… (or set DATABASE_URL), or --data-dir DIR \
             for the embedded SQLite file `serve` uses (its default is --data-dir fluxplan-data)"
        ),
        (database_url, data_dir) => {
            (database_url, data_dir.unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)))
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let store = service::open_store(database_url.as_deref(), &data_dir).await?;
        eprintln!("database migrated ({:?})", store.backend());
        Ok(0)
    })
}

pub fn run(args: ServeArgs) -> Result<u8> {
    service::run(ServiceConfig {
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        database_url: args.database.database_url,
        data_dir: args.database.data_dir,
        public_url: args.public_url,
        github_api_url: args.github_api_url,
        github_token: args.github_token,
        github_app: args.github_app_id.zip(args.github_app_private_key),
        github_webhook_secrets: args.github_webhook_secret,
        gitlab_url: args.gitlab_url,
        gitlab_token: args.gitlab_token,
        gitlab_webhook_tokens: args.gitlab_webhook_token,
        forge_calls: args.forge_calls.settings(),
        workers: args.workers,
        allow_forks: args.allow_forks,
        job_lease: Duration::from_secs(args.job_lease_secs),
        max_attempts: args.max_attempts,
        shutdown_grace: Duration::from_secs(args.shutdown_grace_secs),
        comment_limit: args.comment_limit,
        clusters: args.live.clusters(args.cluster_snapshot.as_ref()),
        limits: super::plan::limits(&args.limits, args.plan_timeout),
        helm: {
            // Many plans, one memory: a failed host is asked again once it has been forgotten.
            let mut helm = args.helm.settings();
            helm.fetch.failed_hosts = crate::charts::failed_hosts::FailedHosts::serving();
            helm
        },
        roles: CommandRoles { approve: args.approve_role, plan: args.plan_role, help: args.help_role },
        reply_window: Duration::from_secs(args.reply_window_secs),
        runs_token: args.runs_token,
        max_connections: args.max_connections,
        max_connections_per_client: args.max_connections_per_client,
        header_timeout: Duration::from_secs(args.header_timeout_secs),
        unverified_bytes: args.max_unverified_bytes.as_usize(),
        unverified_bytes_per_client: args.max_unverified_bytes_per_client.as_usize(),
        min_body_rate: args.min_body_rate.bytes(),
        resync: Duration::from_secs(args.resync_secs),
        retry_later: service::RetryLater {
            every: Duration::from_secs(args.retry_later_secs),
            max_age: Duration::from_secs(args.retry_max_age_secs),
        },
        retention: Duration::from_secs(args.retention_days.saturating_mul(86_400)),
        followup: service::FollowupSettings {
            deadline: Duration::from_secs(args.followup_deadline_secs),
            poll_min: Duration::from_millis(args.followup_poll_ms),
            poll_max: Duration::from_millis(args.followup_poll_max_ms.max(args.followup_poll_ms)),
            reads_per_cluster: args.followup_reads_per_cluster,
        },
    })?;
    Ok(0)
}
