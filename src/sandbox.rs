//! The second wall around code a pull request controls: kustomize runs with a cleared
//! environment, in its own process group, and (where the kernel offers Landlock) able to read
//! only the exported source and the system's programs and libraries, with no TCP and no signals
//! or abstract sockets outside its sandbox. The first wall is the reference check in
//! `render::build`; this one holds when that check is wrong. It also dies with the planner (a
//! build left running by a killed planner has no time limit) and holds no descriptor but its
//! pipes.

use landlock::{
    Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope, ABI,
};
use serde::Serialize;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The newest Landlock ABI fluxplan's rules were written and tested for.
const TESTED_ABI: ABI = ABI::V7;

/// System directories a dynamically linked kustomize or a wrapper script needs: programs and
/// shared libraries, nothing with secrets. `/etc`, `/proc`, `/home`, `/root`, `/var` and `/tmp`
/// stay out; a statically linked kustomize (the usual Go build) gets none of them.
const SYSTEM_DIRS: &[&str] =
    &["/bin", "/usr/bin", "/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/libexec"];
/// Files the dynamic loader reads.
const LOADER_FILES: &[&str] = &["/etc/ld.so.cache"];

/// The only environment kustomize gets: nothing of the planner's (tokens, webhook secrets, the
/// database URL) and dead proxies as a last resort on kernels without Landlock's TCP control.
const CHILD_ENV: &[(&str, &str)] = &[
    ("PATH", "/usr/bin:/bin"),
    ("HOME", "/nonexistent"),
    ("KUBECONFIG", "/dev/null"),
    ("HTTP_PROXY", "http://127.0.0.1:9"),
    ("HTTPS_PROXY", "http://127.0.0.1:9"),
    ("http_proxy", "http://127.0.0.1:9"),
    ("https_proxy", "http://127.0.0.1:9"),
    ("GIT_ALLOW_PROTOCOL", "none"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// What this kernel lets fluxplan enforce.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxStatus {
    /// The kernel's Landlock ABI (0: none).
    pub landlock_abi: i32,
    /// File access limited to the source (ABI 1+).
    pub filesystem: bool,
    /// TCP connect and bind refused (ABI 4+).
    pub network: bool,
    /// One line for logs and `/readyz`.
    pub detail: String,
}

/// The kernel's Landlock support, probed once.
pub fn status() -> &'static SandboxStatus {
    static STATUS: OnceLock<SandboxStatus> = OnceLock::new();
    STATUS.get_or_init(|| {
        let abi = landlock_abi();
        let detail = match abi {
            ..=0 => "Landlock unavailable on this kernel: kustomize runs with a cleared environment only; \
                     fluxplan relies on its reference check to keep reads inside the source"
                .to_string(),
            1..=3 => format!(
                "Landlock ABI {abi}: file access confined to the source; this kernel cannot refuse TCP \
                 (ABI 4+), so network access is stopped by the reference check and dead proxies only"
            ),
            _ => format!("Landlock ABI {abi}: file access confined to the source, no TCP"),
        };
        SandboxStatus { landlock_abi: abi, filesystem: abi >= 1, network: abi >= 4, detail }
    })
}

/// Says once, at start, how well renders are confined; loudly when not fully.
pub fn announce() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let s = status();
        if s.filesystem && s.network {
            tracing::info!(landlock_abi = s.landlock_abi, "sandbox: {}", s.detail);
        } else {
            tracing::warn!(landlock_abi = s.landlock_abi, "sandbox degraded: {}", s.detail);
        }
    });
}

fn landlock_abi() -> i32 {
    // SAFETY: landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION only returns a number.
    let version =
        unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    version.max(0) as i32
}

/// Keeps other processes of the same user (kustomize included) from reading this process's
/// memory and `/proc/<pid>/environ`, where the planner's secrets live.
pub fn harden_process() {
    // SAFETY: PR_SET_DUMPABLE takes an integer and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// How a kustomize process is confined.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// The directory the process may read (the exported source).
    pub readable: PathBuf,
    /// The program, resolved: it must stay executable inside the sandbox.
    pub program: PathBuf,
    /// Apply Landlock (tests turn it off to check the other measures alone).
    pub landlock: bool,
    /// Shared libraries the program loads at run time (the kustomize library of a worker):
    /// readable, nothing beside them.
    pub libraries: Vec<PathBuf>,
    /// Directories it may read beside `readable` (the plugin directory Helm looks in).
    pub also_readable: Vec<PathBuf>,
    /// Directories it may create directories and files in (a fresh one per run: the cache
    /// Helm insists on making before it runs a plugin).
    pub writable: Vec<PathBuf>,
    /// Variables set after the environment is cleared (Helm hands its own to its plugins).
    pub env: Vec<(String, String)>,
    /// A Go program with a small heap: its collector tuned (`GO_RUNTIME_ENV`).
    pub go_runtime: bool,
    /// The most memory the process may map for its data (bytes, `RLIMIT_DATA`): see
    /// `DEFAULT_MEMORY_LIMIT`.
    pub memory: u64,
}

/// The memory limit of every helm and kustomize process (and kustomize worker) by default:
/// `--max-render-memory`. A plan renders its base and head at once, each with a job per core,
/// so a 2-core machine runs four at a time: 3 GiB at most, 1 GiB of a 4 GiB machine left to the
/// planner. A 2.7 MB bundle of CRDs took kustomize 420 MiB (measured: docs/security.md, "Memory
/// of a render"): this leaves it room.
pub const DEFAULT_MEMORY_LIMIT: u64 = 768 * 1024 * 1024;
/// Below this a kustomize worker cannot even start (its Go runtime, thread stacks and the
/// library take about 125 MiB of data before the first build).
pub const MIN_MEMORY_LIMIT: u64 = 256 * 1024 * 1024;

/// How the memory limit is named in messages: `512 MiB`.
pub fn describe_memory(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes.is_multiple_of(1024 * MIB) {
        format!("{} GiB", bytes / (1024 * MIB))
    } else if bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Go's soft memory limit for a process under the hard `limit`: its collector works hard
/// before the hard limit fails an allocation (a render near the limit still succeeds), never
/// above the `GO_RUNTIME_ENV` tuning.
fn go_soft_limit(limit: u64) -> String {
    format!("{}MiB", (limit / 4 * 3).min(1024 * 1024 * 1024) / (1024 * 1024))
}

/// Go's collector for kustomize's workers and Helm: their heaps are small, so the default
/// (GOGC=100) collects every few MB and took a third of a kustomize build's time and a quarter of
/// a `helm template`'s; the soft limit makes it collect hard again near 1 GiB. GOGC=800 saved a
/// tenth of the synthetic fleet's kustomize CPU but nothing on the homelab fleet, whose workers
/// grew from about 60 to 90 MiB (kustomize's OpenAPI schema is a large live heap to multiply).
pub const GO_RUNTIME_ENV: &[(&str, &str)] = &[("GOGC", "400"), ("GOMEMLIMIT", "1GiB")];

impl Confinement {
    /// Makes `cmd` run confined: cleared environment, own process group, killed when the
    /// thread that starts it ends (see `spawn_lasting`), no inherited descriptors, and Landlock.
    pub fn apply(&self, cmd: &mut Command) -> std::io::Result<()> {
        cmd.env_clear().envs(CHILD_ENV.iter().copied()).process_group(0);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if self.go_runtime {
            cmd.envs(GO_RUNTIME_ENV.iter().copied());
        }
        // Every Go program (a kustomize or kubectl binary too) collects before its hard limit.
        cmd.env("GOMEMLIMIT", go_soft_limit(self.memory));
        let parent = std::process::id() as libc::pid_t;
        let memory = data_limit(self.memory);
        // SAFETY: between fork and exec only async-signal-safe syscalls run (prctl, getppid,
        // setrlimit, close_range or fcntl), on values computed before the fork; nothing allocates.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The planner died before the prctl: no signal will ever come.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                // Soft and hard alike: the process cannot raise it again.
                if libc::setrlimit(libc::RLIMIT_DATA, &memory) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                close_inherited_on_exec();
                Ok(())
            });
        }
        if !self.landlock || !status().filesystem {
            return Ok(());
        }
        let ruleset =
            self.ruleset().map_err(|e| std::io::Error::other(format!("cannot prepare the sandbox: {e}")))?;
        let mut ruleset = Some(ruleset);
        // SAFETY: between fork and exec only restrict_self runs: two syscalls (prctl and
        // landlock_restrict_self) on a ruleset prepared before the fork, no allocation.
        unsafe {
            cmd.pre_exec(move || match ruleset.take() {
                Some(ruleset) => {
                    ruleset.restrict_self().map(drop).map_err(|_| std::io::Error::last_os_error())
                }
                None => Ok(()),
            });
        }
        Ok(())
    }

    fn ruleset(&self) -> anyhow::Result<RulesetCreated> {
        let read_dir = AccessFs::ReadFile | AccessFs::ReadDir;
        let run_file = AccessFs::ReadFile | AccessFs::Execute;
        let mut ruleset = Ruleset::default()
            .handle_access(AccessFs::from_all(TESTED_ABI))?
            .handle_access(AccessNet::from_all(TESTED_ABI))?
            .scope(Scope::from_all(TESTED_ABI))?
            .create()?
            .add_rule(PathBeneath::new(PathFd::new(&self.readable)?, read_dir))?
            .add_rule(PathBeneath::new(PathFd::new(&self.program)?, run_file))?;
        for library in &self.libraries {
            ruleset = ruleset.add_rule(PathBeneath::new(PathFd::new(library)?, run_file))?;
        }
        for dir in &self.also_readable {
            ruleset = ruleset.add_rule(PathBeneath::new(PathFd::new(dir)?, read_dir))?;
        }
        let write = read_dir | AccessFs::MakeDir | AccessFs::MakeReg | AccessFs::WriteFile;
        for dir in &self.writable {
            ruleset = ruleset.add_rule(PathBeneath::new(PathFd::new(dir)?, write))?;
        }
        // A program it runs (a Helm plugin) may be dynamically linked where the program is not.
        if std::iter::once(&self.program).chain(&self.libraries).any(|p| needs_system_files(p)) {
            for dir in SYSTEM_DIRS.iter().map(Path::new).filter(|d| d.is_dir()) {
                let system = PathBeneath::new(PathFd::new(dir)?, AccessFs::from_read(TESTED_ABI));
                ruleset = ruleset.add_rule(system)?;
            }
            for file in LOADER_FILES.iter().map(Path::new).filter(|f| f.is_file()) {
                ruleset = ruleset.add_rule(PathBeneath::new(PathFd::new(file)?, AccessFs::ReadFile))?;
            }
        }
        Ok(ruleset.add_rule(PathBeneath::new(
            PathFd::new("/dev/null")?,
            AccessFs::ReadFile | AccessFs::WriteFile,
        ))?)
    }
}

/// The `RLIMIT_DATA` a child gets for `limit`: never above the hard limit this process has
/// (an unprivileged process cannot raise it).
fn data_limit(limit: u64) -> libc::rlimit {
    let mut inherited = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_DATA, &mut inherited) } != 0 {
        inherited.rlim_max = libc::RLIM_INFINITY;
    }
    let limit = (limit as libc::rlim_t).min(inherited.rlim_max);
    libc::rlimit { rlim_cur: limit, rlim_max: limit }
}

/// True when a confined process that ended with `status` (not killed by fluxplan) and printed
/// `stderr` ran out of memory: its memory limit refused an allocation, or the kernel killed it
/// (`SIGKILL` is what its out-of-memory killer sends). Go's runtime says `fatal error: …out of
/// memory…` (or cannot start a thread) and exits 2; Rust (a kustomize worker) says `memory
/// allocation of N bytes failed` and aborts. Helm and kustomize report a template's or a build's
/// own error with exit code 1, so a chart's `fail` message cannot pass for one.
///
/// Go's runtime also dies of a memory fault when its limit refuses it: not every allocation it
/// makes for itself is checked. The green-tea collector (Go 1.25+, default from 1.26) takes the
/// ring of a span queue from `sysAlloc` (`runtime/mgcmark_greenteagc.go`, `newSpanSPMC`), which
/// returns nil when `mmap` fails (`runtime/mem_linux.go`, `sysAllocOS`), and the next write to the
/// ring faults near address 0: `SIGSEGV: segmentation violation … addr=0x0` and every goroutine's
/// stack, or (nothing printed) a death by `SIGSEGV`. A genuine crash looks the same, so a fault
/// counts only when the process held at least half its limit resident (`peak`, from the kernel's
/// accounting of the reaped process: a build over its limit holds two thirds of it, measured in
/// docs/security.md); a Go panic (`panic: …`, a nil map or pointer of the program's own) never does.
pub fn ran_out_of_memory(
    status: std::process::ExitStatus,
    stderr: &str,
    peak: Option<u64>,
    limit: u64,
) -> bool {
    use std::os::unix::process::ExitStatusExt;
    let says = |marker: &dyn Fn(&str) -> bool| stderr.lines().any(|line| marker(line.trim_end()));
    let refused = match (status.code(), status.signal()) {
        (_, Some(libc::SIGKILL)) => true,
        (Some(2), _) => says(&go_out_of_memory),
        (_, Some(libc::SIGABRT)) => says(&|l| {
            go_out_of_memory(l)
                || (l.starts_with("memory allocation of ") && l.ends_with(" bytes failed"))
                || l.starts_with("runtime/cgo: pthread_create failed")
        }),
        _ => false,
    };
    refused || (died_of_a_memory_fault(status, stderr) && peak.is_some_and(|peak| peak >= limit / 2))
}

/// Killed by a memory fault (`SIGSEGV`, `SIGBUS`), or Go's runtime reporting one as it dies
/// (exit 2, or a signal where it runs as a library), not a Go panic.
fn died_of_a_memory_fault(status: std::process::ExitStatus, stderr: &str) -> bool {
    use std::os::unix::process::ExitStatusExt;
    if stderr.lines().any(|line| line.starts_with("panic: ")) {
        return false;
    }
    if matches!(status.signal(), Some(libc::SIGSEGV | libc::SIGBUS)) {
        return true;
    }
    // On the system stack (the collector's workers) Go prints the signal and every goroutine; on
    // a goroutine's own stack inside the runtime, `unexpected signal during runtime execution`.
    let reported = stderr.lines().any(|line| {
        line.starts_with("SIGSEGV: segmentation violation")
            || line.starts_with("SIGBUS: bus error")
            || line.starts_with("fatal error: unexpected signal during runtime execution")
    });
    reported && (status.code() == Some(2) || status.signal().is_some())
}

/// Go's words when its memory limit refuses the heap or a thread, in a program (which exits 2)
/// or a library (which aborts).
fn go_out_of_memory(line: &str) -> bool {
    (line.starts_with("fatal error: ")
        && (line.contains("out of memory") || line.contains("cannot allocate memory")))
        || line.starts_with("runtime: out of memory")
        || line.starts_with("runtime: failed to create new OS thread")
}

/// Marks every descriptor from 3 up close-on-exec, in a child between fork and exec: the pipes
/// the child needs are already its 0, 1 and 2, and std's own descriptors are close-on-exec
/// anyway; what the planner inherited without the flag (a socket, a log file) stays behind.
fn close_inherited_on_exec() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range and fcntl only change descriptor flags.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC)
            == 0
        {
            return;
        }
        // Kernels before 5.11: one by one, up to the descriptor limit.
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        let highest = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(1 << 20) as libc::c_int
        } else {
            1024
        };
        for fd in 3..highest {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

/// Starts `cmd` from one thread that lives as long as the process. A confined process is killed
/// when the *thread* that started it ends (that is what `PR_SET_PDEATHSIG` watches), so a
/// worker kept for later builds must not be started by a render's thread, which ends with the
/// render.
pub fn spawn_lasting(cmd: Command) -> std::io::Result<std::process::Child> {
    type Request = (Command, std::sync::mpsc::SyncSender<std::io::Result<std::process::Child>>);
    static SPAWNER: OnceLock<Option<std::sync::mpsc::Sender<Request>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, received) = std::sync::mpsc::channel::<Request>();
        let thread = std::thread::Builder::new().name("fluxplan-spawner".into()).spawn(move || {
            for (mut cmd, answer) in received {
                let _ = answer.send(cmd.spawn());
            }
        });
        thread.ok().map(|_| requests)
    });
    let Some(spawner) = spawner else {
        return Err(std::io::Error::other("the thread that starts workers could not be started"));
    };
    let (answer, answered) = std::sync::mpsc::sync_channel(1);
    spawner
        .send((cmd, answer))
        .map_err(|_| std::io::Error::other("the thread that starts workers is gone"))?;
    answered.recv().map_err(|_| std::io::Error::other("the thread that starts workers is gone"))?
}

/// `program` as an absolute path: searched in `PATH` when it has no slash. Symlinks are kept
/// (a multi-call binary reads its name from them); the sandbox allows the file they lead to.
pub fn resolve_program(program: &str) -> Option<PathBuf> {
    let found = if program.contains('/') {
        Some(PathBuf::from(program))
    } else {
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    }?;
    std::path::absolute(found).ok().filter(|p| p.is_file())
}

/// True when `program` needs more than itself to run: a script (its interpreter) or a
/// dynamically linked ELF binary (the loader and libraries). Unknown formats count as needing.
fn needs_system_files(program: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    const PT_INTERP: u32 = 3;
    let read = || -> std::io::Result<bool> {
        let mut file = std::fs::File::open(program)?;
        let mut head = [0u8; 64];
        file.read_exact(&mut head)?;
        // Only 64-bit little-endian ELF is read; anything else gets the system directories.
        if &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
            return Ok(true);
        }
        let phoff = u64::from_le_bytes(head[0x20..0x28].try_into().expect("8 bytes"));
        let entry_size = u16::from_le_bytes([head[0x36], head[0x37]]) as usize;
        let entries = u16::from_le_bytes([head[0x38], head[0x39]]) as usize;
        let mut table = vec![0u8; entry_size * entries];
        file.seek(SeekFrom::Start(phoff))?;
        file.read_exact(&mut table)?;
        Ok(table.chunks(entry_size.max(4)).any(|entry| {
            entry.len() >= 4 && u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]) == PT_INTERP
        }))
    };
    read().unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_runtimes_own_words_at_its_own_exit_are_out_of_memory() {
        use std::os::unix::process::ExitStatusExt;
        use std::process::ExitStatus;
        let exited = |code: i32| ExitStatus::from_raw(code << 8);
        let killed = |signal: i32| ExitStatus::from_raw(signal);
        // Helm (Go) over its limit, and the worker's Go library and Rust code.
        let ran_out_of_memory = |status, stderr| ran_out_of_memory(status, stderr, None, 256 << 20);
        let go = "fatal error: out of memory allocating heap arena metadata\n\nruntime stack:\n";
        assert!(ran_out_of_memory(exited(2), go));
        let library =
            "# Warning: 'commonLabels' is deprecated\nfatal error: runtime: cannot allocate memory\n";
        assert!(ran_out_of_memory(killed(libc::SIGABRT), library));
        assert!(ran_out_of_memory(killed(libc::SIGABRT), "memory allocation of 143 bytes failed\n"));
        assert!(ran_out_of_memory(killed(libc::SIGKILL), ""));
        // A chart's `fail` prints what it likes, and helm exits 1; a Go panic is not a breach.
        let fail = "Error: execution error at (c/templates/x.yaml:1:3): \nfatal error: out of memory\n";
        assert!(!ran_out_of_memory(exited(1), fail));
        assert!(!ran_out_of_memory(exited(2), "panic: assignment to entry in nil map\n"));
        assert!(!ran_out_of_memory(killed(libc::SIGABRT), "kustomize said: out of memory\n"));
    }

    /// Go's collector writing to a span queue `sysAlloc` could not map (the kustomize worker's
    /// library, over its limit): a fault, as the runtime reports it or with nothing said. Near
    /// misses: the same fault far below the limit, or with no peak known; a Go panic on a nil
    /// pointer near the limit; a chart's `fail` that prints the words and exits 1.
    #[test]
    fn a_memory_fault_is_out_of_memory_only_near_the_limit() {
        use std::os::unix::process::ExitStatusExt;
        use std::process::ExitStatus;
        let exited = |code: i32| ExitStatus::from_raw(code << 8);
        let killed = |signal: i32| ExitStatus::from_raw(signal);
        let limit: u64 = 256 << 20;
        let (near, far) = (Some(170u64 << 20), Some(12u64 << 20));
        let fault = "SIGSEGV: segmentation violation\nPC=0x7f353ac60adc m=0 sigcode=1 addr=0x0\n\ngoroutine 0 gp=0x7f                      m=0 [idle]:\nruntime.(*spanQueue).tryDrain(0x7f3500000400?, 0x7f353ac6880f?, 0x3a7fe658?)\n";
        for status in [killed(libc::SIGQUIT), killed(libc::SIGABRT), killed(libc::SIGSEGV), exited(2)] {
            assert!(ran_out_of_memory(status, fault, near, limit), "{status:?}");
            assert!(!ran_out_of_memory(status, fault, far, limit), "{status:?}");
            assert!(!ran_out_of_memory(status, fault, None, limit), "{status:?}");
        }
        let in_runtime =
            "fatal error: unexpected signal during runtime execution\n[signal SIGSEGV: segmentation \
                          violation code=0x1 addr=0x8 pc=0x4a1b2c]\n";
        assert!(ran_out_of_memory(exited(2), in_runtime, near, limit));
        assert!(!ran_out_of_memory(exited(2), in_runtime, far, limit));
        assert!(ran_out_of_memory(killed(libc::SIGSEGV), "", near, limit));
        assert!(ran_out_of_memory(killed(libc::SIGBUS), "", near, limit));
        assert!(!ran_out_of_memory(killed(libc::SIGSEGV), "", far, limit));
        let panic =
            "panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: \
                     segmentation violation code=0x1 addr=0x0 pc=0x4a1b2c]\n";
        assert!(!ran_out_of_memory(exited(2), panic, near, limit));
        assert!(!ran_out_of_memory(killed(libc::SIGSEGV), panic, near, limit));
        let fail = "Error: execution error at (c/templates/x.yaml:1:3): SIGSEGV: segmentation violation\n";
        assert!(!ran_out_of_memory(exited(1), fail, near, limit));
        assert!(!ran_out_of_memory(exited(1), "SIGSEGV: segmentation violation\n", near, limit));
    }

    /// A real process that dies of a segmentation fault holding a few MiB, as the planner
    /// measures it: a crash, not the limit.
    #[test]
    fn a_real_crash_far_below_the_limit_is_not_out_of_memory() {
        let mut child = std::process::Command::new("sh").args(["-c", "kill -SEGV $$"]).spawn().unwrap();
        let ended = crate::render::confined::wait_measured(&mut child, std::time::Duration::from_secs(60))
            .unwrap()
            .expect("sh ends");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(ended.status.signal(), Some(libc::SIGSEGV));
        let limit = 256 << 20;
        assert!(ended.peak_rss.is_some_and(|peak| peak < limit / 2), "{:?}", ended.peak_rss);
        assert!(!ran_out_of_memory(ended.status, "", ended.peak_rss, limit));
    }

    #[test]
    fn only_dynamic_programs_and_scripts_get_the_system_directories() {
        let script = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(script.path(), "#!/bin/sh\n").unwrap();
        assert!(needs_system_files(script.path()));
        // git is dynamically linked on every Linux this runs on; a static ELF needs nothing.
        let git = resolve_program("git").expect("git is needed for this test");
        assert!(needs_system_files(&git), "{}", git.display());
        let kubectl = resolve_program("kubectl").expect("kubectl is needed for this test");
        // glibc's ldd (always there on Debian) says whether the loader is needed.
        let described = std::process::Command::new("ldd")
            .arg(&kubectl)
            .output()
            .expect("ldd is needed to tell whether kubectl is statically linked");
        let text = String::from_utf8_lossy(&described.stdout) + String::from_utf8_lossy(&described.stderr);
        let statically = text.contains("not a dynamic executable") || text.contains("statically linked");
        assert_eq!(needs_system_files(&kubectl), !statically, "{}", kubectl.display());
    }
}
