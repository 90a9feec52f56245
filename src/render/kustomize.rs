//! Runs the real kustomize (`kustomize build`, else `kubectl kustomize`) the way the controller
//! configures it: load restrictions off, no plugins, and here also no network and a timeout.

use anyhow::{bail, Result};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// An address nothing listens on: any attempt to fetch a remote base fails at once.
const NO_NETWORK_PROXY: &str = "http://127.0.0.1:9";

#[derive(Debug, Clone)]
pub struct Kustomize {
    program: String,
    subcommand: &'static str,
    /// The kustomize version, part of every cache key.
    pub version: String,
    pub timeout: Duration,
}

impl Kustomize {
    /// Finds kustomize: `$FLUXPLAN_KUSTOMIZE`, then `kustomize`, then `kubectl kustomize`.
    pub fn detect(timeout: Duration) -> Result<Self> {
        let mut candidates: Vec<String> = Vec::new();
        if let Ok(path) = std::env::var("FLUXPLAN_KUSTOMIZE") {
            candidates.push(path);
        }
        candidates.push("kustomize".into());
        candidates.push("kubectl".into());
        for program in candidates {
            if let Ok(found) = Self::at(&program, timeout) {
                return Ok(found);
            }
        }
        bail!(
            "kustomize not found: install the `kustomize` binary or `kubectl` (which embeds it), \
             or point FLUXPLAN_KUSTOMIZE at one"
        )
    }

    /// The kustomize at `program` (a `kubectl` binary is used as `kubectl kustomize`).
    pub fn at(program: &str, timeout: Duration) -> Result<Self> {
        let subcommand = if program.ends_with("kubectl") { "kustomize" } else { "build" };
        match version_of(program, subcommand) {
            Some(version) => Ok(Kustomize { program: program.to_string(), subcommand, version, timeout }),
            None => bail!("{program} is not a working kustomize (`{program} version` failed)"),
        }
    }

    /// Builds the kustomization in `dir`; the error is kustomize's own message.
    pub fn build(&self, dir: &Path) -> Result<String, String> {
        let mut cmd = Command::new(&self.program);
        cmd.arg(self.subcommand)
            .arg(dir)
            .args(["--load-restrictor", "LoadRestrictionsNone"])
            .env("HTTP_PROXY", NO_NETWORK_PROXY)
            .env("HTTPS_PROXY", NO_NETWORK_PROXY)
            .env("http_proxy", NO_NETWORK_PROXY)
            .env("https_proxy", NO_NETWORK_PROXY)
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .env("GIT_ALLOW_PROTOCOL", "none")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("KUBECONFIG", "/dev/null")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| format!("cannot run {}: {e}", self.program))?;
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let out_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stdout.read_to_end(&mut buf);
            buf
        });
        let err_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            buf
        });
        let status = match child.wait_timeout(self.timeout) {
            Ok(Some(status)) => status,
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("kustomize build timed out after {}s", self.timeout.as_secs()));
            }
            Err(e) => return Err(format!("waiting for kustomize failed: {e}")),
        };
        let out = out_reader.join().unwrap_or_default();
        let err = err_reader.join().unwrap_or_default();
        if status.success() {
            String::from_utf8(out).map_err(|_| "kustomize printed output that is not UTF-8".to_string())
        } else {
            Err(clean_error(&String::from_utf8_lossy(&err)))
        }
    }
}

fn version_of(program: &str, subcommand: &str) -> Option<String> {
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
    Some(format!("{program} {version}"))
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
