//! The Helm binary fluxplan renders charts with, and one `helm template` run: never `install`,
//! never a network call (the chart is on disk, dependencies vendored; the sandbox has no TCP),
//! values on standard input, the chart the only thing it may read.

use super::manifest::{split_release, Release};
use super::post_render;
use crate::cancel::CancelToken;
use crate::render::confined::{self, Limits};
use crate::render::kustomize::BuildError;
use crate::sandbox::{self, Confinement};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The environment variable that chooses the Helm binary.
pub const HELM_ENV: &str = "FLUXPLAN_HELM";
/// The pinned versions `scripts/fetch-helm.sh` installs, by major version.
const PINNED: &[(u8, &str)] = &[(4, "v4.1.4"), (3, "v3.17.2")];
/// A chart renders in a fraction of a second; only a pathological template needs a minute.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

/// Why no Helm could be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HelmError {
    #[error("{0}")]
    NotFound(String),
}

#[derive(Debug, Clone)]
pub struct Helm {
    program: PathBuf,
    /// `helm version` (`v4.1.4`): part of every cache key and shown in plans.
    pub version: String,
    pub timeout: Duration,
    pub max_output: u64,
    pub landlock: bool,
    /// The memory limit of each `helm template` (bytes, `--max-render-memory`).
    pub memory_limit: u64,
}

/// The most bytes of `--set` arguments given to helm (Linux allows 2 MiB for all arguments and
/// the environment, 128 KiB for one).
const MAX_INT64_ARGUMENTS_BYTES: usize = 512 << 10;
const MAX_ARGUMENT_BYTES: usize = 64 << 10;

/// One `helm template` of a chart on disk.
pub struct Template<'a> {
    /// The chart: a directory or a packaged archive.
    pub chart: &'a Path,
    /// The directory helm may read: the chart is inside it.
    pub readable: &'a Path,
    pub release: &'a str,
    pub namespace: &'a str,
    /// The values, merged as the controller merges them.
    pub values: &'a Value,
    /// `--set` assignments after them that make Go's `int64`s of `values` `int64`s again
    /// (`shared::int64_assignments`).
    pub int64s: &'a [String],
    /// `.Capabilities.KubeVersion` (`v1.33.0`); Helm's default when `None`.
    pub kube_version: Option<&'a str>,
    /// `.Capabilities.APIVersions` beyond Helm's built-in ones.
    pub api_versions: &'a [String],
    /// The chart's `crds/` among the objects (the controller's Create and CreateReplace).
    pub include_crds: bool,
    /// `.Release.IsUpgrade` rather than `.Release.IsInstall`.
    pub is_upgrade: bool,
    /// The values are not validated against the chart's `values.schema.json`.
    pub skip_schema_validation: bool,
    /// Helm 4 reads each template file through kyaml and writes it back, as it does around
    /// the post-renderer helm-controller always gives it (`post_render::KEEP_ENDS`).
    pub through_kyaml: bool,
}

impl Helm {
    /// Finds Helm `major`: `$FLUXPLAN_HELM` when set (and then only it: an explicit choice that
    /// does not work is an error), else the pinned binary `scripts/fetch-helm.sh` installs, else
    /// `helm` on the `PATH` when it is of that major version.
    pub fn detect(major: u8) -> Result<Self, HelmError> {
        if let Some(chosen) = std::env::var_os(HELM_ENV).filter(|v| !v.is_empty()) {
            let chosen = chosen.to_string_lossy().into_owned();
            return Self::at(&chosen).map_err(|why| {
                HelmError::NotFound(format!(
                    "{HELM_ENV}={chosen} does not work ({why}): point it at a helm binary, or unset it"
                ))
            });
        }
        let pinned = PINNED.iter().find(|(m, _)| *m == major).map(|(_, v)| *v);
        let installed = pinned.and_then(|version| default_dir().map(|d| d.join(format!("helm-{version}"))));
        for candidate in installed.iter().map(|p| p.display().to_string()).chain(["helm".to_string()]) {
            if let Ok(helm) = Self::at(&candidate) {
                if helm.major() == Some(major) {
                    return Ok(helm);
                }
            }
        }
        Err(HelmError::NotFound(format!(
            "no Helm v{major} found: run scripts/fetch-helm.sh{} or point {HELM_ENV} at one",
            if major == 4 { String::new() } else { format!(" {major}") }
        )))
    }

    /// The Helm at `program`.
    pub fn at(program: &str) -> Result<Self, String> {
        let resolved = sandbox::resolve_program(program).ok_or_else(|| format!("{program} not found"))?;
        let out = Command::new(&resolved)
            .args(["version", "--template", "{{.Version}}"])
            .env_clear()
            .env("HOME", "/nonexistent")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || !version.starts_with('v') {
            return Err(format!("{program} is not a working helm (`helm version` failed)"));
        }
        Ok(Helm {
            program: resolved,
            version,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            max_output: crate::render::source::DEFAULT_MAX_TOTAL_BYTES,
            landlock: true,
            memory_limit: sandbox::DEFAULT_MEMORY_LIMIT,
        })
    }

    /// The binary, resolved.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The major version (4 for `v4.1.4`).
    pub fn major(&self) -> Option<u8> {
        self.version.trim_start_matches('v').split('.').next()?.parse().ok()
    }

    /// Renders `template`: the release's manifest, hooks and tests.
    pub fn template(&self, template: &Template, cancel: &CancelToken) -> Result<Release, BuildError> {
        let mut cmd = Command::new(&self.program);
        cmd.arg("template").arg(template.release).arg(template.chart).args([
            "--namespace",
            template.namespace,
            "--values",
            "-",
        ]);
        // On the command line: bounded below the kernel's limits on one argument and on all.
        let length: usize = template.int64s.iter().map(|a| a.len() + 8).sum();
        if length > MAX_INT64_ARGUMENTS_BYTES || template.int64s.iter().any(|a| a.len() > MAX_ARGUMENT_BYTES)
        {
            return Err(BuildError::Limit(format!(
                "the values hold more numbers set with Helm's --set syntax than fluxplan passes to helm \
                 ({length} bytes of --set arguments; at most {MAX_INT64_ARGUMENTS_BYTES}, {MAX_ARGUMENT_BYTES} each)"
            )));
        }
        for assignment in template.int64s {
            cmd.args(["--set", assignment]);
        }
        if let Some(version) = template.kube_version {
            cmd.args(["--kube-version", version]);
        }
        for api in template.api_versions {
            cmd.args(["--api-versions", api]);
        }
        cmd.arg(if template.include_crds { "--include-crds" } else { "--skip-crds" });
        if template.is_upgrade {
            cmd.arg("--is-upgrade");
        }
        if template.skip_schema_validation {
            cmd.arg("--skip-schema-validation");
        }
        let mut confinement = Confinement {
            readable: template.readable.to_path_buf(),
            program: self.program.clone(),
            landlock: self.landlock,
            libraries: Vec::new(),
            also_readable: Vec::new(),
            writable: Vec::new(),
            env: Vec::new(),
            go_runtime: true,
            memory: self.memory_limit,
        };
        // Removed when the render ends.
        let _plugins = if template.through_kyaml {
            let plugin = post_render::KeepEnds::prepare().map_err(BuildError::Failed)?;
            cmd.args(["--post-renderer", post_render::PLUGIN_NAME]);
            confinement.also_readable.push(plugin.dir().to_path_buf());
            confinement.writable.push(plugin.cache().to_path_buf());
            confinement.libraries.push(plugin.program().to_path_buf());
            confinement.env.extend(plugin.env());
            Some(plugin)
        } else {
            None
        };
        let limits = Limits {
            timeout: self.timeout,
            max_output: self.max_output,
            tool: "helm template",
            timeout_setting: "--helm-timeout",
        };
        let values = serde_json::to_vec(template.values).expect("JSON values serialize");
        let out = confined::run(cmd, &confinement, Some(values), &limits, cancel).map_err(|e| match e {
            BuildError::Failed(stderr) => BuildError::Failed(helm_error(&stderr)),
            other => other,
        })?;
        let text = String::from_utf8(out)
            .map_err(|_| BuildError::Failed("helm printed output that is not UTF-8".into()))?;
        let mut release = split_release(&text)
            .map_err(|e| BuildError::Failed(format!("helm template printed what is not YAML: {e}")))?;
        if template.through_kyaml {
            let documents = release.objects.iter_mut().chain(release.hooks.iter_mut().map(|(_, hook)| hook));
            documents.chain(release.tests.iter_mut()).for_each(post_render::unmark);
        }
        Ok(release)
    }
}

/// Helm's error without its command line's framing: the "Error: " prefix, and the advice to run
/// it again with `--debug`, which a reader of the plan cannot act on.
fn helm_error(stderr: &str) -> String {
    let text = stderr.trim().trim_start_matches("Error: ");
    text.strip_suffix("Use --debug flag to render out invalid YAML").unwrap_or(text).trim_end().to_string()
}

/// Where `scripts/fetch-helm.sh` installs (`$FLUXPLAN_HELM_DIR`, else the user's cache).
fn default_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("FLUXPLAN_HELM_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("fluxplan/helm"))
}
