//! Runs the real kustomize the way the controller configures it (load restrictions off, no
//! plugins), confined by the sandbox, with a time and an output limit, and killed at once when
//! its plan is cancelled: kustomize's Go library in sandboxed worker processes (see `pool`) when
//! it is installed, else a `kustomize build` (or `kubectl kustomize`) process per build.
//! `library`: where the library is; `worker`: the worker process and its frames; `pool`: the
//! parent's pool of workers.

pub mod inline;
pub mod library;
mod pool;
pub(in crate::render) mod unit;
pub mod worker;

use crate::cancel::{CancelReason, CancelToken};
use crate::sandbox::{self, Confinement};
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use self::library::Choice;
use self::pool::WorkerPool;
use super::confined::{self, Limits};

/// The environment variable that chooses the kustomize binary.
pub const KUSTOMIZE_ENV: &str = "FLUXPLAN_KUSTOMIZE";

/// A real build takes milliseconds; kustomize needs over a minute only for a pathological input
/// (100,000 keys in one ConfigMap take it 80 s).
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

#[derive(Debug, Clone)]
pub struct Kustomize {
    engine: Engine,
    /// The kustomize version (and what runs it), part of every cache key and of every plan.
    pub version: String,
    pub timeout: Duration,
    /// The most output one build may print (a hostile kustomization can multiply its input).
    pub max_output: u64,
    /// Confine kustomize with Landlock where the kernel offers it.
    pub landlock: bool,
    /// The memory limit of each kustomize process or worker (bytes, `--max-render-memory`).
    pub memory_limit: u64,
}

#[derive(Debug, Clone)]
enum Engine {
    /// A process per build. The program is resolved to an absolute path (the sandbox must allow
    /// exactly it).
    Binary { program: PathBuf, subcommand: &'static str },
    /// The library, in a pool of sandboxed workers.
    Library(Arc<WorkerPool>),
}

/// Why a build gave no output.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    /// kustomize's own message.
    #[error("{0}")]
    Failed(String),
    /// Over the time or output limit.
    #[error("{0}")]
    Limit(String),
    #[error("stopped: {0}")]
    Cancelled(CancelReason),
}

impl Kustomize {
    /// Finds kustomize: `$FLUXPLAN_KUSTOMIZE` when set (and then only it: an explicit choice
    /// that does not work is an error, never a silent fallback), else the library
    /// (`$FLUXPLAN_KUSTOMIZE_LIB`, which must then work, else its default place), else
    /// `kustomize`, else `kubectl kustomize` (the fallback is announced once).
    pub fn detect(timeout: Duration) -> Result<Self> {
        if let Some(chosen) = std::env::var_os(KUSTOMIZE_ENV).filter(|v| !v.is_empty()) {
            let chosen = chosen.to_string_lossy().into_owned();
            return Self::at(&chosen, timeout).map_err(|e| {
                anyhow::anyhow!("{KUSTOMIZE_ENV}={chosen} does not work ({e:#}): point it at a kustomize or kubectl binary, or unset it")
            });
        }
        let fallback = match library::choice() {
            Choice::Explicit(path) => {
                return Self::library(&path, timeout).map_err(|e| {
                    anyhow::anyhow!(
                        "{}={} does not work ({e:#}): run scripts/fetch-kustomize-lib.sh, or set it to `off`",
                        library::LIB_ENV,
                        path.display()
                    )
                })
            }
            // The default place holds what the fetch script installed: only the pinned library.
            Choice::Default(Some(path)) if path.is_file() => match library::check_pinned(&path) {
                Err(why) => Some(Fallback::Unusable(path, why)),
                Ok(()) => match Self::library(&path, timeout) {
                    Ok(found) => return Ok(found),
                    Err(e) => Some(Fallback::Unusable(path, format!("{e:#}"))),
                },
            },
            Choice::Default(path) => Some(Fallback::Missing(path)),
            Choice::Off => None,
        };
        let found = ["kustomize", "kubectl"].into_iter().find_map(|program| Self::at(program, timeout).ok());
        if let Some(fallback) = fallback {
            fallback.announce(found.as_ref());
        }
        found.ok_or_else(|| {
            anyhow::anyhow!(
                "kustomize not found: install the `kustomize` binary or `kubectl` (which embeds it), \
                 or point FLUXPLAN_KUSTOMIZE at one"
            )
        })
    }

    /// The kustomize at `program` (a `kubectl` binary is used as `kubectl kustomize`).
    pub fn at(program: &str, timeout: Duration) -> Result<Self> {
        let subcommand = if program.ends_with("kubectl") { "kustomize" } else { "build" };
        let Some(resolved) = sandbox::resolve_program(program) else {
            bail!("{program} not found");
        };
        match version_of(&resolved, subcommand) {
            Some(version) => Ok(Kustomize {
                engine: Engine::Binary { program: resolved, subcommand },
                version: format!("{program} {version}"),
                timeout,
                max_output: super::source::DEFAULT_MAX_TOTAL_BYTES,
                landlock: true,
                memory_limit: sandbox::DEFAULT_MEMORY_LIMIT,
            }),
            None => bail!("{program} is not a working kustomize (`{program} version` failed)"),
        }
    }

    /// kustomize's library at `path`, run in workers of the fluxplan binary.
    pub fn library(path: &Path, timeout: Duration) -> Result<Self> {
        let program = library::worker_program()
            .ok_or_else(|| anyhow::anyhow!("cannot find the fluxplan binary to run kustomize workers"))?;
        Self::library_in(&program, path, timeout)
    }

    /// kustomize's library at `path`, run in workers started as `program kustomize-worker`.
    pub fn library_in(program: &Path, path: &Path, timeout: Duration) -> Result<Self> {
        anyhow::ensure!(path.is_file(), "{} does not exist", path.display());
        let path = std::path::absolute(path)?;
        let pool = WorkerPool::start(program, &path, true)?;
        Ok(Kustomize {
            version: format!(
                "kustomize library {} ({})",
                library::kustomize_api_version(&path).unwrap_or_else(|| "of unknown version".into()),
                pool.version
            ),
            engine: Engine::Library(Arc::new(pool)),
            timeout,
            max_output: super::source::DEFAULT_MAX_TOTAL_BYTES,
            landlock: true,
            memory_limit: sandbox::DEFAULT_MEMORY_LIMIT,
        })
    }

    /// True when builds run in library workers.
    pub fn is_library(&self) -> bool {
        matches!(self.engine, Engine::Library(_))
    }

    /// Builds the kustomization in `dir`, reading nothing outside `readable` (the source root).
    pub fn build(&self, dir: &Path, readable: &Path, cancel: &CancelToken) -> Result<String, BuildError> {
        cancel.check().map_err(BuildError::Cancelled)?;
        let (program, subcommand) = match &self.engine {
            Engine::Binary { program, subcommand } => (program, *subcommand),
            Engine::Library(pool) => {
                let limits = pool::BuildLimits {
                    timeout: self.timeout,
                    max_output: self.max_output,
                    memory: self.memory_limit,
                };
                return pool.build(dir, readable, self.landlock, &limits, cancel);
            }
        };
        let mut cmd = Command::new(program);
        cmd.arg(subcommand).arg(dir).args(["--load-restrictor", "LoadRestrictionsNone"]);
        let confinement = Confinement {
            readable: readable.to_path_buf(),
            program: program.clone(),
            landlock: self.landlock,
            libraries: Vec::new(),
            also_readable: Vec::new(),
            writable: Vec::new(),
            env: Vec::new(),
            go_runtime: false,
            memory: self.memory_limit,
        };
        let limits = Limits {
            timeout: self.timeout,
            max_output: self.max_output,
            tool: "kustomize build",
            timeout_setting: "--kustomize-timeout",
        };
        match confined::run(cmd, &confinement, None, &limits, cancel) {
            Ok(out) => String::from_utf8(out)
                .map_err(|_| BuildError::Failed("kustomize printed output that is not UTF-8".into())),
            Err(BuildError::Failed(stderr)) => Err(BuildError::Failed(clean_error(&stderr))),
            Err(other) => Err(other),
        }
    }
}

/// Why builds do not run in the library at its default place.
enum Fallback {
    /// Not installed there (`None`: no cache directory to look in).
    Missing(Option<PathBuf>),
    /// There, but not the pinned library, or it does not start.
    Unusable(PathBuf, String),
}

impl Fallback {
    /// Says once per process, as one plain line on stderr, that builds run the slower binary,
    /// why (a missing library, one that is not the pinned one, a worker that did not start or
    /// that the sandbox refused) and how to get the library.
    fn announce(&self, found: Option<&Kustomize>) {
        static ONCE: OnceLock<()> = OnceLock::new();
        ONCE.get_or_init(|| {
            crate::console::note(&self.line(found));
            if let Fallback::Missing(_) = self {
                crate::console::detail(&format!(
                    "{}=/path/to/{} uses a library elsewhere; {}=off uses the binary without this note",
                    library::LIB_ENV,
                    library::FILE_NAME,
                    library::LIB_ENV
                ));
            }
            tracing::debug!(line = %self.line(found), "kustomize library not used");
        });
    }

    fn line(&self, found: Option<&Kustomize>) -> String {
        let what = match self {
            Fallback::Missing(Some(path)) => format!("kustomize library not found at {}", path.display()),
            Fallback::Missing(None) => {
                "kustomize library not found (no $XDG_CACHE_HOME or $HOME to look in)".to_string()
            }
            Fallback::Unusable(path, why) => {
                // One line, however many a worker printed.
                let why: Vec<&str> = why.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
                format!("kustomize library at {} cannot be used ({})", path.display(), why.join("; "))
            }
        };
        let using = match found.map(|k| &k.engine) {
            Some(Engine::Binary { program, subcommand }) => {
                let name = program
                    .file_name()
                    .map_or_else(|| program.display().to_string(), |n| n.to_string_lossy().into_owned());
                format!("`{name} {subcommand}`")
            }
            _ => "the kustomize binary".to_string(),
        };
        format!(
            "{what}; using {using} (slower): run scripts/fetch-kustomize-lib.sh or set {}",
            library::LIB_ENV
        )
    }
}

fn version_of(program: &Path, subcommand: &str) -> Option<String> {
    let args: &[&str] = if subcommand == "build" { &["version"] } else { &["version", "--client"] };
    let out = Command::new(program).args(args).stdin(Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let version = if subcommand == "build" {
        text.trim().to_string()
    } else {
        text.lines().find_map(|l| l.strip_prefix("Kustomize Version:"))?.trim().to_string()
    };
    Some(version)
}

/// kustomize's message without klog prefixes.
fn clean_error(stderr: &str) -> String {
    let text = stderr
        .lines()
        .map(|l| match l.find("] ") {
            Some(i) if l.starts_with(['E', 'W', 'I']) => &l[i + 2..],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let text = text.trim().trim_start_matches("Error: ");
    // kubectl logs structured: `"command failed" err="<message>"`.
    match text.split_once("err=\"") {
        Some((_, quoted)) => {
            let inner = quoted.strip_suffix('"').unwrap_or(quoted);
            serde_json::from_str::<String>(&format!("\"{inner}\"")).unwrap_or_else(|_| inner.to_string())
        }
        None => text.to_string(),
    }
}
