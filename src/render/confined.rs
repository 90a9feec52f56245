//! Runs one program a pull request's content feeds (kustomize, helm) confined by the sandbox,
//! with a time and an output limit, killed at once with its whole process group when its plan is
//! cancelled or a limit is reached.

use super::kustomize::BuildError;
use crate::cancel::CancelToken;
use crate::sandbox::Confinement;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// What one run may take, and how a breach is named in messages.
pub struct Limits<'a> {
    pub timeout: Duration,
    pub max_output: u64,
    /// The tool, as messages name it (`kustomize build`, `helm template`).
    pub tool: &'a str,
    /// The setting that raises the time limit (`--kustomize-timeout`).
    pub timeout_setting: &'a str,
}

/// Runs `cmd` confined, feeding it `stdin`; its standard output on success, else
/// `BuildError::Failed` with its standard error as printed (the caller cleans it).
pub fn run(
    mut cmd: Command,
    confinement: &Confinement,
    stdin: Option<Vec<u8>>,
    limits: &Limits,
    cancel: &CancelToken,
) -> Result<Vec<u8>, BuildError> {
    cancel.check().map_err(BuildError::Cancelled)?;
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    confinement.apply(&mut cmd).map_err(|e| BuildError::Failed(e.to_string()))?;
    let program = confinement.program.display().to_string();
    let mut child = cmd.spawn().map_err(|e| BuildError::Failed(format!("cannot run {program}: {e}")))?;
    let _tracked = cancel.track(child.id() as i32);
    let feeder = child.stdin.take().zip(stdin).map(|(mut pipe, input)| {
        // A program that exits without reading its input closes the pipe: not an error here.
        std::thread::spawn(move || drop(pipe.write_all(&input)))
    });
    let limit = limits.max_output;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || read_capped(stdout, limit));
    let err_reader = std::thread::spawn(move || read_capped(stderr, 1024 * 1024));
    let status = match child.wait_timeout(limits.timeout) {
        Ok(status) => status,
        Err(e) => return Err(BuildError::Failed(format!("waiting for {program} failed: {e}"))),
    };
    // Whatever happened, nothing of this run may outlive it (or hold its pipes open).
    crate::cancel::kill_group(child.id() as i32);
    let _ = child.wait();
    let (out, out_over) = out_reader.join().unwrap_or_default();
    let (err, _) = err_reader.join().unwrap_or_default();
    if let Some(feeder) = feeder {
        let _ = feeder.join();
    }
    cancel.check().map_err(BuildError::Cancelled)?;
    let Some(status) = status else {
        return Err(BuildError::Limit(format!(
            "{} timed out after {}s ({})",
            limits.tool,
            limits.timeout.as_secs(),
            limits.timeout_setting
        )));
    };
    if out_over {
        return Err(BuildError::Limit(format!(
            "{} printed more than {limit} bytes: the output is not used",
            limits.tool
        )));
    }
    if status.success() {
        Ok(out)
    } else {
        Err(BuildError::Failed(String::from_utf8_lossy(&err).into_owned()))
    }
}

/// Reads up to `limit` bytes; the flag says whether there was more (the rest is drained).
fn read_capped(mut from: impl Read, limit: u64) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let _ = (&mut from).take(limit).read_to_end(&mut buf);
    let over = std::io::copy(&mut from, &mut std::io::sink()).is_ok_and(|rest| rest > 0);
    (buf, over)
}
