//! The parent's side of the kustomize workers: a small pool of long-lived, sandboxed worker
//! processes, each confined to one readable directory (an export of the source), reused across
//! builds of that directory, and killed (with its process group) on timeout, cancellation or any
//! protocol failure. A worker that dies fails only the build it was running.

use super::worker::{self, BUILD, ERROR, HELLO, OUTPUT};
use super::BuildError;
use crate::cancel::{kill_group, CancelToken};
use crate::render::confined;
use crate::sandbox::Confinement;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a new worker may take to load the library and say hello.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The Go runtime's settings in a worker (see `spawn`; `bench/library-floor.py` uses the same).
/// The most of a dead worker's stderr quoted in the build's error.
const STDERR_TAIL: u64 = 2048;
/// The most of a dead worker's stderr read for the Go runtime's last words (a fatal error is
/// followed by every goroutine's stack: about 15 KiB).
const LAST_WORDS: u64 = 256 * 1024;
/// How long a worker whose output ended may take to exit: its exit status and peak memory say
/// whether its memory limit ended it.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// What one build may take.
pub struct BuildLimits {
    pub timeout: Duration,
    pub max_output: u64,
    /// The worker's memory limit (bytes).
    pub memory: u64,
}

pub struct WorkerPool {
    /// The fluxplan binary (started as `fluxplan kustomize-worker LIBRARY`).
    program: PathBuf,
    library: PathBuf,
    /// The library's kustomize version, as its worker reports it.
    pub version: String,
    idle: Mutex<Vec<Worker>>,
    max_idle: usize,
    /// Started on a stamp's word, without a probe worker (see `start`).
    vouched: bool,
    /// Why a worker the stamp vouched for did not start: the run's later builds fail at once
    /// with it instead of trying again (see `failed_start`).
    start_failed: std::sync::OnceLock<String>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WorkerPool({}, {})", self.library.display(), self.version)
    }
}

/// Why a request got no answer.
enum Failure {
    TimedOut,
    TooLarge(u64),
    /// EOF, a broken pipe or a malformed frame: the worker died or misbehaved.
    Broken(String),
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    /// The worker's stderr (an unnamed file): quoted when it dies.
    log: File,
    readable: PathBuf,
    landlock: bool,
    /// The memory limit it runs under (bytes).
    memory: u64,
    /// Reaped: its pid (and group id) may belong to another process now, never signalled again.
    reaped: bool,
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

impl WorkerPool {
    /// Starts one worker to check that the library loads, and learns its version (once per
    /// library and program: a stamp beside the library remembers it).
    pub fn start(program: &Path, library: &Path, landlock: bool) -> anyhow::Result<Self> {
        let mut pool = WorkerPool {
            program: program.to_path_buf(),
            library: library.to_path_buf(),
            version: String::new(),
            idle: Mutex::default(),
            max_idle: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2),
            vouched: false,
            start_failed: std::sync::OnceLock::new(),
        };
        if let Some(version) = super::library::known_worker_version(library, program) {
            pool.version = version;
            pool.vouched = true;
            return Ok(pool);
        }
        // The probe may read nothing but the library's own directory.
        let probe_root = library.parent().unwrap_or(Path::new("/nonexistent"));
        let (worker, version) = pool
            .spawn(probe_root, landlock, crate::sandbox::DEFAULT_MEMORY_LIMIT, Instant::now() + START_TIMEOUT)
            .map_err(|e| anyhow::anyhow!("the kustomize library {} does not work: {e}", library.display()))?;
        drop(worker);
        super::library::remember_worker_version(library, program, &version);
        pool.version = version;
        Ok(pool)
    }

    /// Builds `dir` in a worker that can read only `readable`.
    pub fn build(
        &self,
        dir: &Path,
        readable: &Path,
        landlock: bool,
        limits: &BuildLimits,
        cancel: &CancelToken,
    ) -> Result<String, BuildError> {
        cancel.check().map_err(BuildError::Cancelled)?;
        let (timeout, max_output) = (limits.timeout, limits.max_output);
        let deadline = Instant::now() + timeout;
        let mut worker = match self.take_idle(readable, landlock, limits.memory) {
            Some(worker) => worker,
            None => {
                if let Some(why) = self.start_failed.get() {
                    return Err(BuildError::Failed(why.clone()));
                }
                let launched = self.launch(readable, landlock, limits.memory)?;
                // Running out of a build deadline shorter than the start timeout says nothing of
                // the library.
                let start_deadline = Instant::now() + START_TIMEOUT;
                match launched.greet(deadline.min(start_deadline)) {
                    Ok((worker, _)) => worker,
                    Err(error @ BuildError::Limit(_)) if deadline < start_deadline => return Err(error),
                    // Its memory limit, not the library, stopped it.
                    Err(error) if confined::is_out_of_memory(&error) => return Err(error),
                    Err(error) => return Err(self.failed_start(error)),
                }
            }
        };
        let tracked = cancel.track(worker.child.id() as i32);
        let answer = worker.request(dir, deadline, max_output);
        drop(tracked);
        if let Err(reason) = cancel.check() {
            return Err(BuildError::Cancelled(reason));
        }
        match answer {
            Ok((tag, payload)) => {
                self.give_back(worker);
                if tag == OUTPUT {
                    String::from_utf8(payload)
                        .map_err(|_| BuildError::Failed("kustomize printed output that is not UTF-8".into()))
                } else {
                    // Read as the caller reads the shadow's name it may hold (which is not UTF-8).
                    let text = String::from_utf8_lossy(&payload);
                    Err(BuildError::Failed(library_error(&text)))
                }
            }
            // The worker is dropped (killed) below: it may still be busy or half-way through a reply.
            Err(Failure::TimedOut) => Err(BuildError::Limit(format!(
                "kustomize build timed out after {}s (--kustomize-timeout)",
                timeout.as_secs()
            ))),
            Err(Failure::TooLarge(limit)) => Err(BuildError::Limit(format!(
                "kustomize printed more than {limit} bytes: the build is not used"
            ))),
            Err(Failure::Broken(why)) => Err(worker.died(&why)),
        }
    }

    /// A worker the stamp vouched for started but did not say hello (it died or timed out): the stamp
    /// is forgotten, so the next run probes the library and falls back to the kustomize binary
    /// if it still fails, and this run's later builds fail at once with the same words.
    fn failed_start(&self, error: BuildError) -> BuildError {
        match error {
            BuildError::Failed(why) | BuildError::Limit(why) if self.vouched => {
                super::library::forget_worker_version(&self.library);
                let why = self.start_failed.get_or_init(|| {
                    format!(
                        "{why} (the kustomize library worked here before; the next run checks it again and \
                         falls back to the kustomize binary if it still fails)"
                    )
                });
                BuildError::Failed(why.clone())
            }
            other => other,
        }
    }

    fn take_idle(&self, readable: &Path, landlock: bool, memory: u64) -> Option<Worker> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        // Workers of deleted exports, or that died while idle, are of no more use.
        idle.retain_mut(|w| w.readable.exists() && w.alive());
        let at = idle
            .iter()
            .position(|w| w.readable == readable && w.landlock == landlock && w.memory == memory)?;
        Some(idle.swap_remove(at))
    }

    fn give_back(&self, worker: Worker) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.push(worker);
        if idle.len() > self.max_idle {
            idle.remove(0); // the longest idle goes (killed on drop)
        }
    }

    /// Starts a worker confined to `readable` and waits for its hello.
    fn spawn(
        &self,
        readable: &Path,
        landlock: bool,
        memory: u64,
        deadline: Instant,
    ) -> Result<(Worker, String), BuildError> {
        self.launch(readable, landlock, memory)?.greet(deadline)
    }

    /// Starts a worker confined to `readable`. What fails here (a scratch file, the sandbox's
    /// rules, the process table) is not the library's doing.
    fn launch(&self, readable: &Path, landlock: bool, memory: u64) -> Result<Worker, BuildError> {
        let failed = |what: &str, e: &dyn std::fmt::Display| BuildError::Failed(format!("{what}: {e}"));
        let log = tempfile::tempfile().map_err(|e| failed("cannot start a kustomize worker", &e))?;
        let mut cmd = Command::new(&self.program);
        cmd.arg(worker::SUBCOMMAND)
            .arg(&self.library)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log.try_clone().map_err(|e| failed("cannot start a kustomize worker", &e))?);
        let confinement = Confinement {
            readable: readable.to_path_buf(),
            program: self.program.clone(),
            landlock,
            libraries: vec![self.library.clone()],
            also_readable: Vec::new(),
            writable: Vec::new(),
            env: Vec::new(),
            go_runtime: true,
            memory,
        };
        confinement.apply(&mut cmd).map_err(|e| BuildError::Failed(e.to_string()))?;
        // mimalloc (the worker's allocator) would reserve a 1 GiB arena, writable, up front: under
        // the memory limit that reservation took what Go's heap then lacked (measured:
        // docs/security.md). The worker itself allocates little.
        cmd.env("MIMALLOC_ARENA_RESERVE", "0");
        // Kept for later builds: started by a thread that outlives this render's.
        let mut child = crate::sandbox::spawn_lasting(cmd)
            .map_err(|e| failed(&format!("cannot run {}", self.program.display()), &e))?;
        let (stdin, stdout) = (child.stdin.take().expect("piped"), child.stdout.take().expect("piped"));
        Ok(Worker {
            child,
            stdin,
            stdout,
            log,
            readable: readable.to_path_buf(),
            landlock,
            memory,
            reaped: false,
        })
    }
}

impl Worker {
    /// Waits for a new worker's hello (its library loaded) and its version.
    fn greet(mut self, deadline: Instant) -> Result<(Worker, String), BuildError> {
        match self.read_frame(deadline, 4096) {
            Ok((HELLO, version)) => Ok((self, String::from_utf8_lossy(&version).trim().to_string())),
            Ok((tag, _)) => Err(self.died(&format!("it greeted with frame {tag}"))),
            Err(Failure::TimedOut) => {
                Err(BuildError::Limit("the kustomize worker did not start in time".into()))
            }
            Err(Failure::TooLarge(_)) => Err(self.died("its greeting was too long")),
            Err(Failure::Broken(why)) => Err(self.died(&why)),
        }
    }

    fn alive(&mut self) -> bool {
        match self.child.try_wait() {
            Ok(None) => true,
            Ok(Some(_)) => {
                self.reaped = true;
                false
            }
            Err(_) => false,
        }
    }

    /// Kills the worker's process group (a live or zombie worker still owns its group id) and
    /// reaps it; returns how it ended.
    fn kill(&mut self) -> Option<std::process::ExitStatus> {
        if self.reaped {
            return None;
        }
        kill_group(self.child.id() as i32);
        self.reaped = true;
        self.child.wait().ok()
    }

    fn request(&mut self, dir: &Path, deadline: Instant, max_output: u64) -> Result<(u8, Vec<u8>), Failure> {
        worker::write_frame(&mut self.stdin, BUILD, dir.as_os_str().as_bytes())
            .map_err(|e| Failure::Broken(format!("it stopped reading requests ({e})")))?;
        match self.read_frame(deadline, max_output)? {
            (tag @ (OUTPUT | ERROR), payload) => Ok((tag, payload)),
            (tag, _) => Err(Failure::Broken(format!("it answered with an unknown frame {tag}"))),
        }
    }

    fn read_frame(&mut self, deadline: Instant, limit: u64) -> Result<(u8, Vec<u8>), Failure> {
        let mut reader = TimedReader { from: &mut self.stdout, deadline, timed_out: false };
        let broken = |r: &TimedReader, e: std::io::Error| {
            if r.timed_out {
                Failure::TimedOut
            } else {
                Failure::Broken(format!("its output ended ({e})"))
            }
        };
        let (tag, len) = worker::read_header(&mut reader).map_err(|e| broken(&reader, e))?;
        if len > limit {
            return Err(Failure::TooLarge(limit));
        }
        let mut payload = Vec::with_capacity(len.min(64 * 1024 * 1024) as usize);
        (&mut reader).take(len).read_to_end(&mut payload).map_err(|e| broken(&reader, e))?;
        if (payload.len() as u64) < len {
            return Err(Failure::Broken("its output ended mid-answer".into()));
        }
        Ok((tag, payload))
    }

    /// Ends the worker and says why the build got no answer: over its memory limit when it
    /// died of that (a `source-limit`), else its exit and its last words.
    fn died(&mut self, why: &str) -> BuildError {
        // A worker whose output ended is exiting: reaped as it ends, its status and peak are
        // its own, not those of the kill below.
        let ended = if self.reaped {
            None
        } else {
            confined::wait_measured(&mut self.child, EXIT_GRACE).ok().flatten()
        };
        let status = match &ended {
            Some(ended) => {
                self.reaped = true;
                Some(ended.status)
            }
            None => self.kill(),
        };
        if let Some(ended) = &ended {
            let last_words = self.stderr_tail(LAST_WORDS);
            if crate::sandbox::ran_out_of_memory(ended.status, &last_words, ended.peak_rss, self.memory) {
                return confined::out_of_memory("kustomize build", self.memory, ended.peak_rss);
            }
        }
        let status = status.map(|s| format!(" ({s})")).unwrap_or_default();
        let tail = self.stderr_tail(STDERR_TAIL);
        let tail = tail.trim();
        let mut message = format!("the kustomize worker died during this build{status}: {why}");
        if !tail.is_empty() {
            message.push_str(&format!("; it said: {tail}"));
        }
        BuildError::Failed(message)
    }

    /// The last `bytes` of what the worker printed on stderr.
    fn stderr_tail(&mut self, bytes: u64) -> String {
        let size = self.log.seek(SeekFrom::End(0)).unwrap_or(0);
        let _ = self.log.seek(SeekFrom::Start(size.saturating_sub(bytes)));
        let mut tail = Vec::new();
        let _ = (&mut self.log).take(bytes).read_to_end(&mut tail);
        String::from_utf8_lossy(&tail).into_owned()
    }
}

/// Reads from a pipe, giving up at `deadline`.
struct TimedReader<'a> {
    from: &'a mut ChildStdout,
    deadline: Instant,
    timed_out: bool,
}

impl Read for TimedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.timed_out = true;
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            let mut fd = libc::pollfd { fd: self.from.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut fd, 1, ms) };
            if ready < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error);
            }
            if ready > 0 {
                // Readable or hung up: read says which (data, or 0 at EOF).
                return self.from.read(buf);
            }
        }
    }
}

/// The library's error as the binary's would read: the library wraps it in its own "kustomize
/// build failed: ", which `RenderError::Kustomize` says already.
fn library_error(text: &str) -> String {
    let text = text.trim().trim_start_matches("Error: ");
    text.strip_prefix("kustomize build failed: ").unwrap_or(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_s_own_prefix_is_dropped_once() {
        let wrapped = "kustomize build failed: replace operation does not apply: doc is missing path";
        assert_eq!(library_error(wrapped), "replace operation does not apply: doc is missing path");
        // Near miss: a message that only mentions the words keeps them.
        let said = "accumulating resources: kustomize build failed: in a remote base";
        assert_eq!(library_error(&format!("Error: {said}\n")), said);
    }

    fn test_limits() -> BuildLimits {
        BuildLimits {
            timeout: Duration::from_secs(60),
            max_output: 1024,
            memory: crate::sandbox::DEFAULT_MEMORY_LIMIT,
        }
    }

    /// A pool of the worker `script` (a shell script), started on a stamp's word, without a
    /// probe worker; with the library and the program.
    fn vouched_pool(dir: &Path, script: &str) -> (WorkerPool, PathBuf, PathBuf) {
        let (lib, program) = (dir.join("lib.so"), dir.join("fluxplan"));
        std::fs::write(&lib, b"\x7fELF...").unwrap();
        std::fs::write(&program, format!("#!/bin/sh\n{script}")).unwrap();
        std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        super::super::library::remember_worker_version(&lib, &program, "pykustomize-v0.1.4");
        let pool = WorkerPool::start(&program, &lib, false).expect("started on the stamp's word");
        assert_eq!(pool.version, "pykustomize-v0.1.4");
        (pool, lib, program)
    }

    #[test]
    fn a_worker_that_cannot_even_be_launched_says_nothing_of_the_library() {
        let dir = tempfile::tempdir().unwrap();
        let (pool, lib, program) = vouched_pool(dir.path(), "");
        // The sandbox cannot be set up for a directory that is gone: no worker ever started.
        let gone = dir.path().join("gone");
        let error = pool
            .build(&gone, &gone, true, &test_limits(), &CancelToken::new())
            .expect_err("nothing to confine the worker to");
        assert!(!error.to_string().contains("checks it again"), "{error}");
        assert_eq!(
            super::super::library::known_worker_version(&lib, &program).as_deref(),
            Some("pykustomize-v0.1.4")
        );
    }

    #[test]
    fn a_vouched_worker_that_cannot_start_fails_its_build_and_the_stamp_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let (pool, lib, program) = vouched_pool(dir.path(), "echo 'cannot load the library' >&2\nexit 3\n");
        let error = pool
            .build(dir.path(), dir.path(), false, &test_limits(), &CancelToken::new())
            .expect_err("the worker cannot start");
        let message = error.to_string();
        assert!(message.contains("cannot load the library"), "{message}");
        assert!(message.contains("checks it again"), "{message}");
        assert_eq!(super::super::library::known_worker_version(&lib, &program), None);
        // The run's next build fails at once with the same words, without starting a worker
        // (the program is gone: a start would fail in other words).
        std::fs::remove_file(&program).unwrap();
        let again = pool
            .build(dir.path(), dir.path(), false, &test_limits(), &CancelToken::new())
            .expect_err("the run's builds fail");
        assert_eq!(again.to_string(), message);
    }

    /// True while `pid` runs (a zombie has stopped running).
    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit(") ").next().is_some_and(|rest| !rest.starts_with('Z')))
    }

    /// Not a test: the parent process of `a_worker_dies_with_its_parent`, which kills it. It
    /// starts a worker that would sleep for an hour, says its pid and waits.
    #[test]
    #[ignore = "run by a_worker_dies_with_its_parent"]
    fn worker_parent_for_test() {
        let Some(dir) = std::env::var_os("FLUXPLAN_TEST_WORKER_PARENT") else { return };
        let dir = PathBuf::from(dir);
        let (pool, _, _) = vouched_pool(&dir, "exec sleep 3601\n");
        let worker = pool.launch(&dir, false, crate::sandbox::DEFAULT_MEMORY_LIMIT).expect("a worker starts");
        println!("worker {}", worker.child.id());
        loop {
            std::thread::park();
        }
    }

    #[test]
    fn a_worker_dies_with_its_parent() {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let mut parent = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "render::kustomize::pool::tests::worker_parent_for_test",
                "--ignored",
                "--nocapture",
            ])
            .env("FLUXPLAN_TEST_WORKER_PARENT", dir.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = std::io::BufReader::new(parent.stdout.take().unwrap()).lines();
        let pid: u32 = lines
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("worker ")?.trim().parse().ok())
            .expect("the parent says its worker's pid");
        assert!(running(pid));
        parent.kill().unwrap();
        parent.wait().unwrap();
        // The harness bounds this wait: a worker that outlives its parent hangs the test.
        while running(pid) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_worker_inherits_no_descriptor_but_its_pipes() {
        let dir = tempfile::tempdir().unwrap();
        let (pool, _, _) = vouched_pool(dir.path(), "exec sleep 3602\n");
        let marker = dir.path().join("inherited");
        let file = File::create(&marker).unwrap();
        // Without CLOEXEC, as a descriptor the planner inherited from its own parent is.
        // SAFETY: dup of a descriptor this test owns; the copy is closed below.
        let inherited = unsafe { libc::dup(file.as_raw_fd()) };
        assert!(inherited > 2);
        let launched = pool.launch(dir.path(), false, crate::sandbox::DEFAULT_MEMORY_LIMIT);
        // SAFETY: closes the copy made above, once.
        unsafe { libc::close(inherited) };
        let worker = launched.expect("a worker starts");
        let open: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{}/fd", worker.child.id()))
            .unwrap()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .collect();
        assert!(open.len() >= 3, "{open:?}");
        assert!(!open.contains(&marker), "the worker holds {}: {open:?}", marker.display());
    }

    /// The benchmark's floor is kustomize's cost under the same collector as the workers'.
    #[test]
    fn the_library_floor_benchmark_runs_go_as_the_workers_do() {
        let floor = include_str!("../../../bench/library-floor.py");
        for (name, value) in crate::sandbox::GO_RUNTIME_ENV {
            assert!(
                floor.contains(&format!("\"{name}\": \"{value}\"")),
                "bench/library-floor.py lacks {name}={value}"
            );
        }
    }
}
