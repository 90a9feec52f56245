//! `fluxplan plan`: what merging head into base will create, change and delete.

use super::cluster::{read_clusters_file, ClusterKnowledge, ClusterSource};
use super::RenderArgs;
use crate::cancel::CancelReason;
use crate::cluster::kube::KubeOptions;
use crate::git;
use crate::plan::policy::POLICY_FILE;
use crate::plan::{make_plan, Alert, Plan, PlanRequest, Policy, Revision};
use crate::render::source::SourceLimitExceeded;
use crate::render::{Render, RenderError, Renderer};
use crate::report;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PlanFormat {
    Markdown,
    Json,
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
    #[arg(long, value_enum, default_value = "text")]
    pub format: PlanFormat,
    /// A policy file to use instead of the base revision's .fluxplan.yaml.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    #[command(flatten)]
    pub cluster: LiveArgs,
    /// Seconds the whole plan may take; then its kustomize processes are killed and the plan
    /// fails with a `source-limit` alert.
    #[arg(long, default_value_t = DEFAULT_PLAN_TIMEOUT_SECS)]
    pub plan_timeout: u64,
}

/// Ten minutes: a real fleet plans in seconds; a plan this slow is an attack or a bug.
pub const DEFAULT_PLAN_TIMEOUT_SECS: u64 = 600;

/// How to reach live clusters (read-only: get and list only).
#[derive(Debug, Clone, Args, Default)]
pub struct LiveArgs {
    /// Plan against the live cluster (KUBECONFIG, or in-cluster): its inventories are the truth.
    #[arg(long, conflicts_with = "cluster_snapshot")]
    pub kube: bool,
    /// The kubeconfig context to read (with --kube or `snapshot`; default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    /// Also read the Secrets postBuild.substituteFrom names (values are never printed).
    #[arg(long)]
    pub read_secrets: bool,
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
        }
    }
}

/// Exit 0 no changes, 1 changes, 2 blocked by policy, 3 could not plan.
pub fn run(args: PlanArgs) -> Result<u8> {
    let plan = plan(&args);
    let text = match args.format {
        PlanFormat::Json => report::json(&plan),
        PlanFormat::Markdown => report::markdown(&plan),
        PlanFormat::Text => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            report::text(&plan, color)
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    if let Some(error) = &plan.error {
        eprintln!("error: {error}");
    }
    Ok(plan.verdict.exit_code())
}

/// The plan; a failure to make it is a plan with verdict `failed` (exit 3), never a crash. A
/// failure over a limit also carries a `source-limit` alert, so it is never mistaken for an
/// infrastructure hiccup.
pub fn plan(args: &PlanArgs) -> Plan {
    let revision = |rev: &str| Revision { rev: rev.to_string(), commit: None };
    let _deadline = args.render.cancel.deadline(Duration::from_secs(args.plan_timeout.max(1)));
    match try_plan(args) {
        Ok(plan) => plan,
        Err(error) => {
            let mut plan = Plan::failed(revision(&args.base), revision(&args.head), format!("{error:#}"));
            if let Some(limit) = limit_breach(&error) {
                plan.alerts.extend(Policy::default().general_alert("source-limit", limit));
            }
            plan
        }
    }
}

/// The limit an error is about, if it is about one.
fn limit_breach(error: &anyhow::Error) -> Option<String> {
    error.chain().find_map(|cause| {
        if let Some(exceeded) = cause.downcast_ref::<SourceLimitExceeded>() {
            return Some(exceeded.to_string());
        }
        match cause.downcast_ref::<RenderError>() {
            Some(RenderError::Cancelled(reason @ CancelReason::TimedOut(_))) => Some(reason.to_string()),
            _ => None,
        }
    })
}

fn try_plan(args: &PlanArgs) -> Result<Plan> {
    let mut sources = BTreeMap::new();
    if let Some(path) = &args.render.cluster_snapshot {
        sources.insert(String::new(), ClusterSource::Snapshot(path.clone()));
    }
    if args.cluster.kube {
        sources.insert(String::new(), ClusterSource::Live(args.cluster.kube_options()));
    }
    if let Some(file) = &args.cluster.clusters {
        sources.extend(read_clusters_file(file, &args.cluster.kube_options())?);
    }
    let knowledge = ClusterKnowledge::gather(sources)?;
    let renderer = Renderer::new(args.render.limits.kustomize_timeout(), args.render.cache_dir())?;
    // Scopes the repository declares: from the policy that applies (an invalid one is reported
    // once the policy is loaded).
    let declared_scopes = match &args.policy {
        Some(path) => std::fs::read_to_string(path).ok().and_then(|t| Policy::parse(&t).ok()),
        None => crate::plan::policy::read_policy_file(&args.render.repo, Some(&args.base)).ok(),
    }
    .map(|p| p.crd_scopes)
    .unwrap_or_default();
    let render = |rev: &str| -> Result<Render> {
        let mut opts = args.render.options(Some(rev.to_string()), None);
        opts.declared_scopes = declared_scopes.clone();
        if let Some(values) = &knowledge.values {
            opts.values = values.clone();
        }
        opts.cluster_values = knowledge.cluster_values.clone();
        opts.known_scopes = knowledge
            .snapshots
            .iter()
            .flat_map(|s| s.crds.iter().map(|((group, kind), scope)| (group.clone(), kind.clone(), *scope)))
            .collect();
        renderer.render(&opts).with_context(|| format!("cannot render revision {rev}"))
    };
    let base = render(&args.base)?;
    let head = render(&args.head)?;
    let (policy, policy_source, extra_alerts) = load_policy(args, &base, &head)?;
    let ask = |root: &str, ids: &[crate::flux::ObjectId]| knowledge.blast_radius(root, ids);
    let plan = make_plan(PlanRequest {
        base: &base,
        head: &head,
        base_rev: args.base.clone(),
        head_rev: args.head.clone(),
        snapshots: &knowledge.snapshots.iter().collect::<Vec<_>>(),
        blast_radius: knowledge.has_live().then_some(&ask as &crate::plan::BlastRadiusQuery),
        degraded: knowledge.degraded(),
        policy: &policy,
        policy_source,
        extra_alerts,
    });
    tracing::info!(requests = knowledge.request_count(), "cluster reads");
    Ok(plan)
}

/// The policy: `--policy FILE`, else the BASE revision's `.fluxplan.yaml` (a pull request must not
/// loosen its own gate), else the built-in defaults.
fn load_policy(args: &PlanArgs, base: &Render, head: &Render) -> Result<(Policy, String, Vec<Alert>)> {
    if let Some(path) = &args.policy {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read policy {}", path.display()))?;
        let policy = Policy::parse(&text).map_err(|e| anyhow::anyhow!("policy {}: {e}", path.display()))?;
        return Ok((policy, path.display().to_string(), Vec::new()));
    }
    let repo = &args.render.repo;
    let at = |render: &Render| -> Result<Option<String>> {
        match &render.revision {
            Some(commit) => git::show_file(repo, commit, POLICY_FILE),
            None => Ok(None),
        }
    };
    let base_text = at(base)?;
    let head_text = at(head)?;
    let mut alerts = Vec::new();
    let (policy, source) = match &base_text {
        None => (Policy::default(), "built-in defaults".to_string()),
        Some(text) => match Policy::parse(text) {
            Ok(policy) => (policy, format!("{POLICY_FILE} at base")),
            Err(e) => {
                alerts.extend(Policy::default().general_alert(
                    "policy-invalid",
                    format!("{POLICY_FILE} at base is invalid ({e}); the built-in defaults apply"),
                ));
                (Policy::default(), "built-in defaults (base policy invalid)".to_string())
            }
        },
    };
    if head_text != base_text {
        alerts.extend(policy.general_alert(
            "policy-changed",
            format!(
                "this pull request changes {POLICY_FILE}: the change takes effect after the merge; this plan \
                 uses the base revision's policy"
            ),
        ));
    }
    Ok((policy, source, alerts))
}
