//! `fluxplan mcp`: the plan of a branch for agents, over the Model Context Protocol on stdio
//! (src/mcp). Standard output carries the protocol only; messages go to standard error.

use super::plan::LiveArgs;
use super::{HelmArgs, LimitArgs};
use crate::planner::{RenderSettings, DEFAULT_PLAN_TIMEOUT_SECS};
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// A directory whose git repositories agents may plan (repeatable; default: the current
    /// directory). A repository outside all of them, symbolic links resolved, is refused.
    #[arg(long = "allow", value_name = "DIR")]
    pub allow: Vec<PathBuf>,
    #[command(flatten)]
    pub helm: HelmArgs,
    #[command(flatten)]
    pub cluster: LiveArgs,
    /// Cluster snapshot file every plan reads (see docs/live-cluster.md).
    #[arg(long, env = "FLUXPLAN_CLUSTER_SNAPSHOT")]
    pub cluster_snapshot: Option<PathBuf>,
    /// Where rendered outputs are cached across plans (default: as `plan`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Do not keep a cache on disk.
    #[arg(long)]
    pub no_cache: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Seconds one plan may take.
    #[arg(long, default_value_t = DEFAULT_PLAN_TIMEOUT_SECS)]
    pub plan_timeout: u64,
    /// The bot's database (postgres://… or sqlite://…), read by the `runs` tool; without it
    /// `runs` says so.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// A file holding the database URL (a mounted Secret), instead of --database-url.
    #[arg(long, env = "DATABASE_URL_FILE", value_name = "FILE")]
    pub database_url_file: Option<PathBuf>,
}

pub fn run(args: McpArgs) -> Result<u8> {
    let database_url =
        super::secret_file::DATABASE_URL.read(args.database_url, args.database_url_file.as_deref())?;
    let dirs = if args.allow.is_empty() { vec![PathBuf::from(".")] } else { args.allow.clone() };
    let allowed = dirs
        .iter()
        .map(|dir| std::fs::canonicalize(dir).with_context(|| format!("--allow {}", dir.display())))
        .collect::<Result<Vec<_>>>()?;
    let cache_dir = super::cache_dir(args.cache_dir.as_ref(), args.no_cache);
    // A long-lived server, like `serve`: a tag's answer is asked again after a few minutes.
    let mut helm = args.helm.settings();
    helm.fetch.image_cache = crate::charts::images::Cache::serving();
    let settings = crate::mcp::Settings {
        allowed,
        allow_hint: "`fluxplan mcp` with --allow DIR",
        clusters: args.cluster.clusters(args.cluster_snapshot.as_ref()),
        render: RenderSettings { cache_dir, helm, ..Default::default() },
        limits: super::plan::limits(&args.limits, args.plan_timeout),
        database_url,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the MCP server's runtime")?;
    runtime.block_on(crate::mcp::serve_stdio(settings))?;
    Ok(0)
}
