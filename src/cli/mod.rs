//! The command line: `build`, `plan`, `snapshot`, `serve`, `migrate`, `demo` and `completion`.

mod build;
pub mod bytes;
pub mod check_run;
mod completion;
mod demo;
mod forge_calls;
mod mcp;
pub mod plan;
mod secret_file;
mod serve;
mod snapshot;

use clap::{Args, Parser, Subcommand};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::snapshot::ClusterSnapshot;
use crate::console::{self, ColorChoice};
use crate::planner::{HelmSettings, RenderSettings, DEFAULT_KUSTOMIZE_TIMEOUT_SECS};
use crate::render::cache::RenderCache;
use crate::render::{source, RenderOptions};
use bytes::ByteSize;

/// The version with the engines a render would use, for `--version`: the kustomize found and each
/// Helm, or why there is none.
pub fn long_version() -> String {
    let kustomize = match crate::render::kustomize::Kustomize::detect(std::time::Duration::from_secs(30)) {
        Ok(kustomize) => kustomize.version,
        Err(e) => format!("none ({e:#})"),
    };
    let helm = |major: u8| match crate::render::helm::Helm::detect(major) {
        Ok(helm) => helm.version.clone(),
        Err(e) => format!("none ({e})"),
    };
    format!("{VERSION}\nkustomize: {kustomize}\nhelm v4: {}\nhelm v3: {}", helm(4), helm(3))
}

/// Exit code when the command could not do its job at all.
pub const EXIT_FAILED: u8 = 3;

/// `0.1.0 (commit 1a2b3c4d5e6f)`: what `-V` prints; `--version` adds the engines found.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("FLUXPLAN_COMMIT"), ")");

#[derive(Debug, Parser)]
#[command(
    name = "fluxplan",
    version = VERSION,
    about = "What Flux will create, change and delete if a pull request merges"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub global: GlobalArgs,
}

/// What every command says on stderr besides its output.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Colour the output and logs: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, global = true, value_enum, env = "FLUXPLAN_COLOR", default_value = "auto")]
    pub color: ColorChoice,
    /// No progress, notes, warnings or hints on stderr; errors are still printed.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// More detail on stderr (repeatable: -v says why, -vv debugs, -vvv traces); adds to
    /// FLUXPLAN_LOG.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl GlobalArgs {
    pub fn settings(&self) -> console::Settings {
        console::Settings { quiet: self.quiet, verbose: self.verbose, color: self.color }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render every Kustomization reachable from the repository's roots, as kustomize-controller would.
    #[command(after_help = build::EXIT_CODES_HELP)]
    Build(Box<build::BuildArgs>),
    /// Plan a merge: what Flux will create, change and delete, with policy alerts and a verdict.
    #[command(after_help = plan::EXIT_CODES_HELP)]
    Plan(Box<plan::PlanArgs>),
    /// Read a live cluster (get and list only) into a snapshot file for offline plans.
    Snapshot(snapshot::SnapshotArgs),
    /// Run the bot: webhooks, durable jobs, plan comments and merge-blocking statuses.
    Serve(Box<serve::ServeArgs>),
    /// Apply the database migrations (`serve` also does at start).
    Migrate(serve::MigrateArgs),
    /// Plan the outage fluxplan exists to prevent, on the example fleet built into the binary.
    Demo(demo::DemoArgs),
    /// Serve plans to agents over the Model Context Protocol (stdio): read-only tools `plan`,
    /// `explain` and `runs`.
    Mcp(Box<mcp::McpArgs>),
    /// Print the completion script for a shell (bash, zsh, fish, elvish, powershell).
    #[command(after_help = completion::INSTALL_HELP)]
    Completion(completion::CompletionArgs),
}

/// Options shared by every command that renders a repository.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The Flux repository (a git checkout).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Map another source to a local directory: NAMESPACE/NAME=DIR (repeatable). DIR's working
    /// tree is pinned: `plan` uses the same tree for base and head (the plan notes it).
    #[arg(long = "source", value_name = "NAMESPACE/NAME=DIR", value_parser = parse_source)]
    pub sources: Vec<(String, PathBuf)>,
    #[command(flatten)]
    pub helm: HelmArgs,
    /// Another URL of this repository (repeatable): Argo CD Applications whose repoURL is one
    /// of them, or one of the repository's git remotes, are rendered from it.
    #[arg(long = "repo-url", value_name = "URL", env = "FLUXPLAN_REPO_URL", value_delimiter = ',')]
    pub repo_urls: Vec<String>,
    /// Cluster snapshot file: values for postBuild.substituteFrom (see docs/live-cluster.md).
    #[arg(long, env = "FLUXPLAN_CLUSTER_SNAPSHOT")]
    pub cluster_snapshot: Option<PathBuf>,
    /// Substitute undefined variables with "" instead of failing (controllers before 1.9).
    #[arg(long)]
    pub no_strict_substitution: bool,
    /// Parallel kustomize builds (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Where rendered outputs are cached across runs (default: $FLUXPLAN_CACHE_DIR, else
    /// $XDG_CACHE_HOME/fluxplan, else ~/.cache/fluxplan).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Do not keep a cache on disk.
    #[arg(long)]
    pub no_cache: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// How HelmReleases are rendered and where their charts may come from (`build`, `plan`, `serve`).
#[derive(Debug, Clone, Args)]
pub struct HelmArgs {
    /// The chart of the HelmRelease NAMESPACE/NAME: a chart directory or a packaged .tgz
    /// (repeatable), used at base and head whatever the HelmRelease names.
    #[arg(long = "chart", value_name = "NAMESPACE/NAME=DIR|TGZ", value_parser = parse_chart)]
    pub charts: Vec<(String, PathBuf)>,
    /// The Helm major version helm-controller runs: 4 (Flux 2.8 and later) or 3 (Flux 2.7 and
    /// earlier).
    #[arg(long, env = "FLUXPLAN_HELM_VERSION", default_value_t = 4, value_parser = clap::value_parser!(u8).range(3..=4))]
    pub helm_version: u8,
    /// Hosts charts may be fetched from besides those the base revision's sources use: `host`
    /// or `host:port` (comma-separated or repeated). A loopback, private, link-local or metadata
    /// address is fetched from only when its exact `host:port` is listed.
    #[arg(
        long = "chart-hosts",
        value_name = "HOST[:PORT]",
        env = "FLUXPLAN_CHART_HOSTS",
        value_delimiter = ',',
        value_parser = parse_chart_host
    )]
    pub chart_hosts: Vec<String>,
    /// Fetch from MIRROR what names HOST, keeping the path (repeatable): for OCI registries and
    /// Helm repositories alike. A mirror is trusted; it allows no new host.
    #[arg(
        long = "registry-mirror",
        value_name = "HOST=MIRROR",
        env = "FLUXPLAN_REGISTRY_MIRRORS",
        value_delimiter = ',',
        value_parser = parse_registry_mirror
    )]
    pub registry_mirrors: Vec<String>,
    /// Reach HOST:PORT over plain HTTP, whatever the URL says (repeatable): a loopback mirror or
    /// a test registry.
    #[arg(
        long = "insecure-registry",
        value_name = "HOST:PORT",
        env = "FLUXPLAN_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    pub insecure_registries: Vec<String>,
    /// Fetch no chart: HelmReleases whose chart is in a Helm repository or OCI registry are
    /// `external`.
    #[arg(long, env = "FLUXPLAN_NO_CHART_FETCH")]
    pub no_chart_fetch: bool,
    /// Ask no registry whether the container images a pull request brings exist (no
    /// `image-missing` nor `image-unchecked` alert).
    #[arg(long, env = "FLUXPLAN_NO_IMAGE_CHECK")]
    pub no_image_check: bool,
    /// The Kubernetes version charts see as `.Capabilities.KubeVersion` (`v1.33.0`); default:
    /// the live cluster's when one is read, else Helm's built-in default.
    #[arg(long, env = "FLUXPLAN_KUBE_VERSION", value_name = "VERSION")]
    pub kube_version: Option<String>,
}

impl HelmArgs {
    pub fn settings(&self) -> HelmSettings {
        HelmSettings {
            charts: self.charts.iter().cloned().collect::<BTreeMap<_, _>>(),
            major: self.helm_version,
            kube_version: self.kube_version.clone(),
            fetch: crate::charts::Settings {
                allowed_hosts: self.chart_hosts.clone(),
                mirrors: self.registry_mirrors.clone(),
                insecure: self.insecure_registries.clone(),
                known_urls: None,
                offline: self.no_chart_fetch,
                failed_hosts: Default::default(),
                no_image_check: self.no_image_check,
                image_cache: Default::default(),
            },
        }
    }
}

/// How much work a repository may ask for: every breach is a `source-limit` alert.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// Seconds one kustomize build may take.
    #[arg(long, env = "FLUXPLAN_KUSTOMIZE_TIMEOUT", default_value_t = DEFAULT_KUSTOMIZE_TIMEOUT_SECS)]
    pub kustomize_timeout: u64,
    /// Files larger than this are left out of the source (each one is a `source-limit` alert):
    /// bytes, or with a unit (512KiB, 10MiB, 10MB).
    #[arg(long, env = "FLUXPLAN_MAX_FILE_SIZE", value_name = "SIZE", default_value_t = ByteSize(source::DEFAULT_MAX_FILE_SIZE))]
    pub max_file_size: ByteSize,
    /// A source larger than this in all is not rendered: bytes, or with a unit (512MiB, 1GiB).
    #[arg(long, env = "FLUXPLAN_MAX_SOURCE_BYTES", value_name = "SIZE", default_value_t = ByteSize(source::DEFAULT_MAX_TOTAL_BYTES))]
    pub max_source_bytes: ByteSize,
    /// A source with more files than this is not rendered.
    #[arg(long, env = "FLUXPLAN_MAX_SOURCE_FILES", default_value_t = source::DEFAULT_MAX_FILES)]
    pub max_source_files: u64,
    /// The memory each helm and kustomize process may take (its data, `RLIMIT_DATA`); over it the
    /// unit is a `source-limit`: bytes, or with a unit (768MiB, 1GiB); at least 256MiB.
    #[arg(long, env = "FLUXPLAN_MAX_RENDER_MEMORY", value_name = "SIZE", value_parser = parse_render_memory, default_value_t = ByteSize(crate::sandbox::DEFAULT_MEMORY_LIMIT))]
    pub max_render_memory: ByteSize,
}

impl LimitArgs {
    pub fn kustomize_timeout(&self) -> Duration {
        Duration::from_secs(self.kustomize_timeout.max(1))
    }

    pub fn source_limits(&self) -> source::SourceLimits {
        source::SourceLimits {
            max_file_size: self.max_file_size.bytes(),
            max_total_bytes: self.max_source_bytes.bytes(),
            max_files: self.max_source_files,
        }
    }
}

fn parse_render_memory(text: &str) -> Result<ByteSize, String> {
    let size: ByteSize = text.parse()?;
    if size.bytes() < crate::sandbox::MIN_MEMORY_LIMIT {
        return Err(format!(
            "at least {}: a kustomize worker needs about 125 MiB before its first build",
            crate::sandbox::describe_memory(crate::sandbox::MIN_MEMORY_LIMIT)
        ));
    }
    Ok(size)
}

fn parse_source(text: &str) -> Result<(String, PathBuf), String> {
    let (key, dir) = text.split_once('=').ok_or("expected NAMESPACE/NAME=DIR")?;
    let (ns, name) = key.split_once('/').ok_or("expected NAMESPACE/NAME=DIR")?;
    if ns.is_empty() || name.is_empty() || dir.is_empty() {
        return Err("expected NAMESPACE/NAME=DIR".into());
    }
    Ok((key.to_string(), PathBuf::from(dir)))
}

fn parse_chart_host(text: &str) -> Result<String, String> {
    crate::charts::hosts::HostPolicy::new([], [text], []).map(|_| text.to_string())
}

fn parse_registry_mirror(text: &str) -> Result<String, String> {
    crate::charts::hosts::HostPolicy::new([], [], [text]).map(|_| text.to_string())
}

fn parse_chart(text: &str) -> Result<(String, PathBuf), String> {
    parse_source(text).map_err(|_| "expected NAMESPACE/NAME=DIR or NAMESPACE/NAME=CHART.tgz".to_string())
}

impl RenderArgs {
    /// The cluster snapshot given with `--cluster-snapshot`, read once.
    pub fn snapshot(&self) -> anyhow::Result<Option<Arc<ClusterSnapshot>>> {
        self.cluster_snapshot.as_deref().map(|path| ClusterSnapshot::load(path).map(Arc::new)).transpose()
    }

    /// How to render, for the planner.
    pub fn settings(&self) -> RenderSettings {
        RenderSettings {
            sources: self.sources.iter().cloned().collect::<BTreeMap<_, _>>(),
            repo_urls: self.repo_urls.clone(),
            helm: self.helm.settings(),
            strict_substitution: !self.no_strict_substitution,
            jobs: self.jobs,
            cache_dir: self.cache_dir(),
            progress: !console::quiet(),
            ..Default::default()
        }
    }

    /// Render options for `rev`; substitution values come from `snapshot` when there is one.
    pub fn options(&self, rev: Option<String>, snapshot: Option<&Arc<ClusterSnapshot>>) -> RenderOptions {
        let settings = self.settings();
        let mut opts = RenderOptions::new(&self.repo);
        opts.rev = rev;
        opts.sources = settings.sources;
        opts.repo_urls = settings.repo_urls;
        settings.helm.apply(&mut opts);
        opts.keep_exports = settings.cache_dir.is_some();
        if let Some(snapshot) = snapshot {
            opts.values = snapshot.clone();
            opts.known_scopes = snapshot
                .crds
                .iter()
                .map(|((group, kind), scope)| (group.clone(), kind.clone(), *scope))
                .collect();
            snapshot.apply_to_charts(&mut opts);
        }
        opts.strict_substitution = settings.strict_substitution;
        if let Some(jobs) = settings.jobs {
            opts.jobs = jobs.max(1);
        }
        opts.kustomize_timeout = self.limits.kustomize_timeout();
        opts.memory_limit = self.limits.max_render_memory.bytes();
        opts.limits = self.limits.source_limits();
        opts.progress = crate::render::progress::Board::for_terminal()
            .filter(|_| settings.progress)
            .map(|board| board.lane(""));
        opts
    }

    pub fn cache_dir(&self) -> Option<PathBuf> {
        cache_dir(self.cache_dir.as_ref(), self.no_cache)
    }
}

/// The render cache `--cache-dir` and `--no-cache` ask for: none, the given one, or the default.
fn cache_dir(given: Option<&PathBuf>, no_cache: bool) -> Option<PathBuf> {
    if no_cache {
        None
    } else {
        given.cloned().or_else(RenderCache::default_dir)
    }
}

/// What `build` and `plan` set up before they export anything: exports owner-only, deleted
/// by a detached process, and those a dead fluxplan left removed.
fn start_rendering() {
    crate::private_files::restrict_new_files();
    crate::render::source::delete_exports_detached();
    crate::render::leftovers::remove_dead_exports();
}

/// The command's output went to a reader that left (`| head`).
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct OutputClosed;

/// Exit status for a closed output: what a shell shows for a process ended by SIGPIPE.
const EXIT_OUTPUT_CLOSED: u8 = 141;

/// Writes the command's output to standard output; a reader that went away ends the command
/// quietly (`OutputClosed`), as `kubectl` ends, instead of a panic or an error.
pub(crate) fn write_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(OutputClosed.into()),
        other => Ok(other?),
    }
}

pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Build(args) => {
            start_rendering();
            // The render may nest deeply: on a thread whose stack holds it (`plan` does the same).
            crate::stack::on_render_stack("fluxplan-build", || build::run(*args))
                .unwrap_or_else(|e| Err(anyhow::anyhow!("cannot start the build's thread: {e}")))
        }
        Command::Plan(args) => {
            start_rendering();
            plan::run(*args)
        }
        Command::Demo(args) => demo::run(args),
        Command::Mcp(args) => {
            start_rendering();
            mcp::run(*args)
        }
        Command::Completion(args) => completion::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Serve(args) => serve::run(*args),
        Command::Migrate(args) => serve::migrate(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) if error.is::<OutputClosed>() => ExitCode::from(EXIT_OUTPUT_CLOSED),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}
