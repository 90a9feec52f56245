//! Runs one program a pull request's content feeds (kustomize, helm) confined by the sandbox,
//! with a time, a memory and an output limit, killed at once with its whole process group when
//! its plan is cancelled or a limit is reached.

use super::kustomize::BuildError;
use crate::cancel::CancelToken;
use crate::sandbox::Confinement;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

/// The setting that raises the memory limit of every helm and kustomize process.
pub const MEMORY_SETTING: &str = "--max-render-memory";

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
    let waited = wait_measured(&mut child, limits.timeout);
    // Whatever happened, nothing of this run may outlive it (or hold its pipes open): a run that
    // ended had its group killed before it was reaped.
    if !matches!(waited, Ok(Some(_))) {
        crate::cancel::kill_group(child.id() as i32);
        let _ = child.wait();
    }
    let (out, out_over) = out_reader.join().unwrap_or_default();
    let (err, _) = err_reader.join().unwrap_or_default();
    if let Some(feeder) = feeder {
        let _ = feeder.join();
    }
    cancel.check().map_err(BuildError::Cancelled)?;
    let ended = match waited {
        Ok(ended) => ended,
        Err(e) => return Err(BuildError::Failed(format!("waiting for {program} failed: {e}"))),
    };
    let Some(Ended { status, peak_rss }) = ended else {
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
        return Ok(out);
    }
    let stderr = String::from_utf8_lossy(&err).into_owned();
    if crate::sandbox::ran_out_of_memory(status, &stderr, peak_rss, confinement.memory) {
        return Err(out_of_memory(limits.tool, confinement.memory, peak_rss));
    }
    Err(BuildError::Failed(stderr))
}

/// A run that ran out of memory, as the plan says it: the tool, its limit and the setting, and
/// the most it held (the kernel's count of its resident pages, its program's code included).
pub fn out_of_memory(tool: &str, limit: u64, peak_rss: Option<u64>) -> BuildError {
    let peak = peak_rss
        .map(|bytes| format!("; it held up to {} resident", describe_peak(bytes)))
        .unwrap_or_default();
    BuildError::Limit(format!(
        "{tool} {OUT_OF_MEMORY} {} ({MEMORY_SETTING}){peak}",
        crate::sandbox::describe_memory(limit)
    ))
}

/// True for the error `out_of_memory` makes.
pub fn is_out_of_memory(error: &BuildError) -> bool {
    matches!(error, BuildError::Limit(message) if message.contains(OUT_OF_MEMORY))
}

const OUT_OF_MEMORY: &str = "ran out of memory: over its limit of";

fn describe_peak(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1024 * 1024))
}

/// How a run ended, and the most memory it held.
pub struct Ended {
    pub status: ExitStatus,
    /// Peak resident set in bytes (`ru_maxrss`), when the kernel could say.
    pub peak_rss: Option<u64>,
}

/// Waits for `child` at most `timeout` (`None`: still running). Through a pidfd where the kernel
/// has them (5.3+), so the child is reaped with `wait4` and its peak memory is known; its process
/// group is killed first, while its id cannot yet be reused.
pub fn wait_measured(child: &mut Child, timeout: Duration) -> std::io::Result<Option<Ended>> {
    let pid = child.id() as libc::pid_t;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        let status = child.wait_timeout(timeout)?;
        if status.is_some() {
            crate::cancel::kill_group(pid);
        }
        return Ok(status.map(|status| Ended { status, peak_rss: None }));
    }
    // SAFETY: a descriptor just returned by the kernel, owned by nothing else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let mut fd = libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { libc::poll(&mut fd, 1, ms) };
        if ready > 0 {
            break;
        }
        if ready < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
    crate::cancel::kill_group(pid);
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value, which wait4 overwrites.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, writing its status and usage into the locals above.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if reaped != pid {
        return Err(std::io::Error::last_os_error());
    }
    let peak_rss = u64::try_from(usage.ru_maxrss).ok().map(|kib| kib * 1024);
    Ok(Some(Ended { status: ExitStatus::from_raw(status), peak_rss }))
}

/// Reads up to `limit` bytes; the flag says whether there was more (the rest is drained).
fn read_capped(mut from: impl Read, limit: u64) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let _ = (&mut from).take(limit).read_to_end(&mut buf);
    let over = std::io::copy(&mut from, &mut std::io::sink()).is_ok_and(|rest| rest > 0);
    (buf, over)
}
