//! `fluxplan plan`: what merging head into base will create, change and delete. Turns the
//! arguments into a planner request and prints the plan.

use super::{LimitArgs, RenderArgs};
use crate::cluster::kube::KubeOptions;
use crate::planner::{self, Clusters, PolicySource, DEFAULT_PLAN_TIMEOUT_SECS};
use crate::report;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

/// `plan --help`: what the exit code says.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  no changes
  1  changes
  2  blocked by policy (a danger alert)
  3  could not plan (the plan, with verdict `failed` and the reason, is still printed)";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PlanFormat {
    /// A pull request comment (what the bot posts).
    Markdown,
    /// The plan itself, for machines (keys in docs/plan.md, schema in docs/plan.schema.json).
    Json,
    /// Compact, coloured on a terminal (--color, FLUXPLAN_COLOR and NO_COLOR decide).
    Text,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub render: RenderArgs,
    /// The revision the pull request merges into (its policy applies).
    #[arg(long)]
    pub base: String,
    /// The revision being merged.
    #[arg(long)]
    pub head: String,
    /// How to print the plan.
    #[arg(long, value_enum, default_value = "text")]
    pub format: PlanFormat,
    /// Also write the plan in FORMAT to FILE (repeatable): one plan, several reports, as CI
    /// keeps the JSON and shows the markdown.
    #[arg(long, value_name = "FORMAT=FILE", value_parser = parse_out)]
    pub out: Vec<(PlanFormat, PathBuf)>,
    /// Also write GitLab's Code Quality report (CodeClimate JSON) to FILE: each alert on the lines
    /// that cause it (docs/locations.md).
    #[arg(long, value_name = "FILE")]
    pub code_quality: Option<PathBuf>,
    /// A policy file to use instead of the base revision's .fluxplan.yaml.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    #[command(flatten)]
    pub cluster: LiveArgs,
    /// Seconds the whole plan may take; then its kustomize processes are killed and the plan
    /// fails with a `source-limit` alert.
    #[arg(long, default_value_t = DEFAULT_PLAN_TIMEOUT_SECS)]
    pub plan_timeout: u64,
    #[command(flatten)]
    pub check_run: super::check_run::CheckRunArgs,
}

/// How to reach live clusters (read-only: get and list only).
#[derive(Debug, Clone, Args, Default)]
pub struct LiveArgs {
    /// Plan against the live cluster (KUBECONFIG, or in-cluster): its inventories are the truth.
    #[arg(long, conflicts_with = "cluster_snapshot")]
    pub kube: bool,
    /// The kubeconfig context to read (with --kube or `snapshot`; default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    /// Also read Secrets: those postBuild.substituteFrom and valuesFrom name, Helm's release
    /// storage, chart sources' secretRef and certSecretRef, and Argo CD's repository credentials
    /// for Helm sources (values are never printed).
    #[arg(long)]
    pub read_secrets: bool,
    /// With --read-secrets, read Secrets only in these namespaces (comma-separated; default:
    /// every namespace the Flux objects name).
    #[arg(long, value_delimiter = ',', env = "FLUXPLAN_SECRET_NAMESPACES")]
    pub secret_namespaces: Vec<String>,
    /// A file mapping each cluster root of the repository to a kube context or a snapshot file.
    #[arg(long, conflicts_with_all = ["kube", "cluster_snapshot"])]
    pub clusters: Option<PathBuf>,
}

impl LiveArgs {
    pub fn kube_options(&self) -> KubeOptions {
        KubeOptions {
            context: self.context.clone(),
            read_secrets: self.read_secrets,
            include_secret_values: false,
            secret_namespaces: self.secret_namespaces.clone(),
        }
    }

    /// Where cluster knowledge comes from: the clusters file, else the live cluster, else the
    /// snapshot file, else nowhere (offline).
    pub fn clusters(&self, snapshot: Option<&PathBuf>) -> Clusters {
        if let Some(file) = &self.clusters {
            Clusters::PerRoot { file: file.clone(), kube: self.kube_options() }
        } else if self.kube {
            Clusters::Live(self.kube_options())
        } else if let Some(path) = snapshot {
            Clusters::Snapshot(path.clone())
        } else {
            Clusters::Offline
        }
    }
}

impl PlanArgs {
    /// The planner request these arguments ask for.
    pub fn request(&self) -> planner::Request {
        planner::Request {
            repo: self.render.repo.clone(),
            repo_name: None,
            base: self.base.clone(),
            head: self.head.clone(),
            clusters: self.cluster.clusters(self.render.cluster_snapshot.as_ref()),
            policy: self.policy.clone().map_or(PolicySource::BaseRevision, PolicySource::File),
            render: self.render.settings(),
            limits: limits(&self.render.limits, self.plan_timeout),
            cancel: Default::default(),
        }
    }
}

/// The planner's limits from the command line's.
pub fn limits(args: &LimitArgs, plan_timeout_secs: u64) -> planner::Limits {
    planner::Limits {
        kustomize_timeout: args.kustomize_timeout(),
        render_memory: args.max_render_memory.bytes(),
        source: args.source_limits(),
        plan_timeout: Duration::from_secs(plan_timeout_secs.max(1)),
    }
}

/// Exit 0 no changes, 1 changes, 2 blocked by policy, 3 could not plan.
pub fn run(args: PlanArgs) -> Result<u8> {
    let plan = planner::plan(&args.request());
    // The files first: a reader of standard output that leaves early must not lose them.
    for (format, file) in &args.out {
        std::fs::write(file, report_in(&plan, *format, false))
            .with_context(|| format!("cannot write the plan to {}", file.display()))?;
    }
    if let Some(file) = &args.code_quality {
        std::fs::write(file, report::code_quality(&plan))
            .with_context(|| format!("cannot write the Code Quality report to {}", file.display()))?;
    }
    if args.check_run.github_check_run {
        super::check_run::post(&plan, &report::markdown(&plan), &args.check_run)?;
    }
    super::write_out(&report_in(&plan, args.format, crate::console::color_stdout()))?;
    if let Some(error) = plan.error.as_ref().filter(|_| !report_is_read(args.format)) {
        eprintln!("error: {error}");
    }
    Ok(plan.verdict.exit_code())
}

fn report_in(plan: &crate::plan::Plan, format: PlanFormat, color: bool) -> String {
    match format {
        PlanFormat::Json => report::json(plan),
        PlanFormat::Markdown => report::markdown(plan),
        PlanFormat::Text => report::text(plan, color),
    }
}

/// True when the report on standard output is read where it is printed (a terminal, or text on a
/// pipe: a CI log), so its error needs no second telling on stderr. JSON and markdown go to
/// machines and files, and so does text redirected to a file.
fn report_is_read(format: PlanFormat) -> bool {
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    if stdout.is_terminal() {
        return true;
    }
    let to_file = || {
        let fd = stdout.as_fd().try_clone_to_owned().ok()?;
        std::fs::File::from(fd).metadata().ok().map(|meta| meta.is_file())
    };
    matches!(format, PlanFormat::Text) && to_file() == Some(false)
}

/// `--out FORMAT=FILE`.
fn parse_out(text: &str) -> Result<(PlanFormat, PathBuf), String> {
    let (format, file) = text.split_once('=').ok_or("expected FORMAT=FILE (markdown, json or text)")?;
    let format = PlanFormat::from_str(format, true)
        .map_err(|_| format!("unknown format '{format}': expected markdown, json or text"))?;
    if file.is_empty() {
        return Err("expected FORMAT=FILE: the file is missing".into());
    }
    Ok((format, PathBuf::from(file)))
}
