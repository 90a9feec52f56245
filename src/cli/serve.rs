//! `fluxplan serve` (the bot) and `fluxplan migrate`: their arguments, handed to `service`.

use super::bytes::ByteSize;
use super::plan::LiveArgs;
use super::secret_file;
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
    /// A file holding the database URL (a mounted Secret), instead of --database-url.
    #[arg(long, env = "DATABASE_URL_FILE", value_name = "FILE")]
    pub database_url_file: Option<PathBuf>,
    /// Where the embedded database, git mirrors and the render cache live.
    #[arg(long, env = "FLUXPLAN_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address webhooks, pages, `/healthz` and `/readyz` are served on.
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
    /// GitHub's API (GitHub Enterprise: https://HOST/api/v3).
    #[arg(long, env = "FLUXPLAN_GITHUB_API_URL", default_value = "https://api.github.com")]
    pub github_api_url: String,
    /// A GitHub token for comments and statuses.
    #[arg(long, env = "FLUXPLAN_GITHUB_TOKEN", hide_env_values = true)]
    pub github_token: Option<String>,
    /// A file holding the GitHub token (a mounted Secret), instead of --github-token.
    #[arg(long, env = "FLUXPLAN_GITHUB_TOKEN_FILE", value_name = "FILE")]
    pub github_token_file: Option<PathBuf>,
    /// GitHub App id (with the private key, instead of a token).
    #[arg(long, env = "FLUXPLAN_GITHUB_APP_ID")]
    pub github_app_id: Option<u64>,
    /// The GitHub App's private key (PEM).
    #[arg(long, env = "FLUXPLAN_GITHUB_APP_PRIVATE_KEY", hide_env_values = true)]
    pub github_app_private_key: Option<String>,
    /// A file holding the GitHub App's private key (PEM), instead of --github-app-private-key.
    #[arg(long, env = "FLUXPLAN_GITHUB_APP_PRIVATE_KEY_FILE", value_name = "FILE")]
    pub github_app_private_key_file: Option<PathBuf>,
    /// Where the GitHub verdict goes: `status` (the `fluxplan` commit status), `both` (and the
    /// `fluxplan` check run, with the plan and annotations), `check-run` (the check run only: make
    /// it the required check; the status where check runs are refused), `auto` (both as a GitHub
    /// App, the status with a token).
    #[arg(long, env = "FLUXPLAN_GITHUB_CHECKS", value_enum, default_value = "auto")]
    pub github_checks: crate::forge::checks::ChecksMode,
    /// Webhook secrets; several (comma-separated) while rotating.
    #[arg(long, env = "FLUXPLAN_GITHUB_WEBHOOK_SECRET", hide_env_values = true, value_delimiter = ',')]
    pub github_webhook_secret: Vec<String>,
    /// A file holding the webhook secrets (comma-separated or one per line), instead of
    /// --github-webhook-secret.
    #[arg(long, env = "FLUXPLAN_GITHUB_WEBHOOK_SECRET_FILE", value_name = "FILE")]
    pub github_webhook_secret_file: Option<PathBuf>,
    /// The GitLab instance.
    #[arg(long, env = "FLUXPLAN_GITLAB_URL", default_value = "https://gitlab.com")]
    pub gitlab_url: String,
    /// A GitLab token for notes and statuses.
    #[arg(long, env = "FLUXPLAN_GITLAB_TOKEN", hide_env_values = true)]
    pub gitlab_token: Option<String>,
    /// A file holding the GitLab token (a mounted Secret), instead of --gitlab-token.
    #[arg(long, env = "FLUXPLAN_GITLAB_TOKEN_FILE", value_name = "FILE")]
    pub gitlab_token_file: Option<PathBuf>,
    /// Webhook tokens; several (comma-separated) while rotating.
    #[arg(long, env = "FLUXPLAN_GITLAB_WEBHOOK_TOKEN", hide_env_values = true, value_delimiter = ',')]
    pub gitlab_webhook_token: Vec<String>,
    /// A file holding the webhook tokens (comma-separated or one per line), instead of
    /// --gitlab-webhook-token.
    #[arg(long, env = "FLUXPLAN_GITLAB_WEBHOOK_TOKEN_FILE", value_name = "FILE")]
    pub gitlab_webhook_token_file: Option<PathBuf>,
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
    /// A file holding the runs token, instead of --runs-token.
    #[arg(long, env = "FLUXPLAN_RUNS_TOKEN_FILE", value_name = "FILE")]
    pub runs_token_file: Option<PathBuf>,
    /// The credential agents send (`Authorization: Bearer`) to use MCP at `/mcp` (see
    /// docs/mcp.md); without it `/mcp` is off (404).
    #[arg(long, env = "FLUXPLAN_MCP_TOKEN", hide_env_values = true)]
    pub mcp_token: Option<String>,
    /// A file holding the MCP token, instead of --mcp-token.
    #[arg(long, env = "FLUXPLAN_MCP_TOKEN_FILE", value_name = "FILE")]
    pub mcp_token_file: Option<PathBuf>,
    /// A directory whose git repositories agents may plan over MCP (repeatable; no default:
    /// without it every repository is refused). Clusters and charts are read as for the bot.
    #[arg(long = "mcp-allow", value_name = "DIR")]
    pub mcp_allow: Vec<PathBuf>,
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
    /// The longest wait between two reads of a Kustomization during a rollout.
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
    /// A file holding the database URL (a mounted Secret), instead of --database-url.
    #[arg(long, env = "DATABASE_URL_FILE", value_name = "FILE")]
    pub database_url_file: Option<PathBuf>,
    /// Migrate the embedded SQLite file in this data directory (what `serve` uses without a
    /// database URL; its default is ./fluxplan-data).
    #[arg(long, env = "FLUXPLAN_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

pub fn migrate(args: MigrateArgs) -> Result<u8> {
    let database_url =
        secret_file::DATABASE_URL.read(args.database_url, args.database_url_file.as_deref())?;
    let (database_url, data_dir) = match (database_url, args.data_dir) {
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

/// The secret settings of `serve`, each given as a value or read from its file.
#[derive(Debug, PartialEq)]
struct Secrets {
    database_url: Option<String>,
    github_token: Option<String>,
    github_app_private_key: Option<String>,
    github_webhook_secrets: Vec<String>,
    gitlab_token: Option<String>,
    gitlab_webhook_tokens: Vec<String>,
    runs_token: Option<String>,
    mcp_token: Option<String>,
}

impl ServeArgs {
    /// Takes the secrets out of the arguments, reading the files given for them.
    fn secrets(&mut self) -> Result<Secrets> {
        use secret_file::*;
        Ok(Secrets {
            database_url: DATABASE_URL
                .read(self.database.database_url.take(), self.database.database_url_file.as_deref())?,
            github_token: GITHUB_TOKEN.read(self.github_token.take(), self.github_token_file.as_deref())?,
            github_app_private_key: GITHUB_APP_PRIVATE_KEY
                .read(self.github_app_private_key.take(), self.github_app_private_key_file.as_deref())?,
            github_webhook_secrets: GITHUB_WEBHOOK_SECRET.read_list(
                std::mem::take(&mut self.github_webhook_secret),
                self.github_webhook_secret_file.as_deref(),
            )?,
            gitlab_token: GITLAB_TOKEN.read(self.gitlab_token.take(), self.gitlab_token_file.as_deref())?,
            gitlab_webhook_tokens: GITLAB_WEBHOOK_TOKEN.read_list(
                std::mem::take(&mut self.gitlab_webhook_token),
                self.gitlab_webhook_token_file.as_deref(),
            )?,
            runs_token: RUNS_TOKEN.read(self.runs_token.take(), self.runs_token_file.as_deref())?,
            mcp_token: MCP_TOKEN.read(self.mcp_token.take(), self.mcp_token_file.as_deref())?,
        })
    }
}

pub fn run(mut args: ServeArgs) -> Result<u8> {
    let secrets = args.secrets()?;
    if !args.mcp_allow.is_empty() && secrets.mcp_token.as_deref().is_none_or(str::is_empty) {
        tracing::warn!("--mcp-allow is set but no MCP token (--mcp-token, FLUXPLAN_MCP_TOKEN or their file): /mcp is off");
    }
    service::run(ServiceConfig {
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        database_url: secrets.database_url,
        data_dir: args.database.data_dir,
        public_url: args.public_url,
        github_api_url: args.github_api_url,
        github_token: secrets.github_token,
        github_app: args.github_app_id.zip(secrets.github_app_private_key),
        github_checks: args.github_checks,
        github_webhook_secrets: secrets.github_webhook_secrets,
        gitlab_url: args.gitlab_url,
        gitlab_token: secrets.gitlab_token,
        gitlab_webhook_tokens: secrets.gitlab_webhook_tokens,
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
            helm.fetch.image_cache = crate::charts::images::Cache::serving();
            helm
        },
        roles: CommandRoles { approve: args.approve_role, plan: args.plan_role, help: args.help_role },
        reply_window: Duration::from_secs(args.reply_window_secs),
        runs_token: secrets.runs_token,
        mcp: secrets.mcp_token.map(|token| service::McpConfig { token, allowed: args.mcp_allow }),
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

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use clap::{CommandFactory, Parser};

    fn serve_args(args: &[&str]) -> super::ServeArgs {
        match Cli::try_parse_from([&["fluxplan", "serve"], args].concat()).unwrap().command {
            Command::Serve(args) => *args,
            _ => unreachable!("serve parses as serve"),
        }
    }

    #[test]
    fn every_secret_setting_reads_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_string()
        };
        let files = [
            ("--database-url-file", file("db", "postgres://u:p@db/fluxplan\n")),
            ("--github-token-file", file("gh", "ghp_token\n")),
            ("--github-app-private-key-file", file("key", "-----BEGIN KEY-----\nabc\n-----END KEY-----\n")),
            ("--github-webhook-secret-file", file("hook", "old\nnew\n")),
            ("--gitlab-token-file", file("gl", "glpat-token")),
            ("--gitlab-webhook-token-file", file("glhook", "one,two\n")),
            ("--runs-token-file", file("runs", "runs-token\n")),
            ("--mcp-token-file", file("mcp", "mcp-token\n")),
        ];
        let args: Vec<&str> = files.iter().flat_map(|(flag, path)| [*flag, path.as_str()]).collect();
        let secrets = serve_args(&args).secrets().unwrap();
        assert_eq!(
            secrets,
            super::Secrets {
                database_url: Some("postgres://u:p@db/fluxplan".into()),
                github_token: Some("ghp_token".into()),
                github_app_private_key: Some("-----BEGIN KEY-----\nabc\n-----END KEY-----".into()),
                github_webhook_secrets: vec!["old".into(), "new".into()],
                gitlab_token: Some("glpat-token".into()),
                gitlab_webhook_tokens: vec!["one".into(), "two".into()],
                runs_token: Some("runs-token".into()),
                mcp_token: Some("mcp-token".into()),
            }
        );
        // Each with its value too: refused, naming the setting, never the secret.
        for (flag, path) in &files {
            let value_flag = flag.trim_end_matches("-file");
            let error =
                serve_args(&[flag, path, value_flag, "zq7-secret"]).secrets().unwrap_err().to_string();
            assert!(error.starts_with(&format!("{value_flag} (")), "{error}");
            assert!(error.contains("are both set") && !error.contains("zq7-secret"), "{error}");
        }
    }

    #[test]
    fn serve_help_documents_every_flag() {
        let cli = Cli::command();
        let serve = cli.find_subcommand("serve").unwrap();
        let undocumented: Vec<String> = serve
            .get_arguments()
            .filter(|a| a.get_long().is_some() && a.get_help().is_none())
            .map(|a| format!("--{}", a.get_long().unwrap_or_default()))
            .collect();
        assert!(undocumented.is_empty(), "serve --help says nothing of {undocumented:?}");
    }
}
