//! Hosts that gave no answer, remembered so that a plan asks each of them once. Offline or
//! air-gapped, a fleet whose releases name registries fluxplan cannot reach would otherwise wait
//! out a resolution or connection failure per release (68 releases on 10 hosts: 68 waits, not
//! 10). A failure is remembered for the plan, or for a short time in `serve`, which plans many
//! pull requests and must see a registry that came back. While the first request to a host is in
//! flight, other requests to it wait for its outcome instead of failing the same way beside it.
//!
//! A host is remembered with the scheme, port and TLS settings it was asked with: a source's CA or
//! client certificate may be what failed, and says nothing of a request made without it.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long `serve` remembers a failed host.
pub const SERVE_MEMORY: Duration = Duration::from_secs(60);

/// The time now; injectable, so that tests move it instead of sleeping.
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The hosts that failed, shared by every clone (every fetch of a plan, or of a `serve` process).
#[derive(Clone)]
pub struct FailedHosts(Arc<Shared>);

struct Shared {
    /// How long a failure is remembered; `None`: as long as the memory lives (one plan).
    memory: Option<Duration>,
    clock: Clock,
    hosts: Mutex<HashMap<String, Arc<Host>>>,
}

#[derive(Default)]
struct Host {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
enum State {
    #[default]
    Untried,
    /// A first request is in flight.
    Trying,
    Answered,
    Failed {
        at: Instant,
        message: String,
    },
}

/// Why a host is not asked: it failed, with this message (host-level: no URL in it, so every
/// release that needed the host says the same, whichever asked first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFailed {
    pub host: String,
    pub message: String,
}

impl Default for FailedHosts {
    fn default() -> Self {
        Self::for_plan()
    }
}

impl std::fmt::Debug for FailedHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailedHosts").field("memory", &self.0.memory).finish_non_exhaustive()
    }
}

impl FailedHosts {
    /// Failures remembered as long as this memory lives: one plan.
    pub fn for_plan() -> Self {
        Self::new(None, Arc::new(Instant::now))
    }

    /// Failures remembered for `SERVE_MEMORY`.
    pub fn serving() -> Self {
        Self::expiring(SERVE_MEMORY, Arc::new(Instant::now))
    }

    /// Failures remembered for `memory`, as `clock` tells the time.
    pub fn expiring(memory: Duration, clock: Clock) -> Self {
        Self::new(Some(memory), clock)
    }

    fn new(memory: Option<Duration>, clock: Clock) -> Self {
        FailedHosts(Arc::new(Shared { memory, clock, hosts: Mutex::default() }))
    }

    /// Leave to send a request to `key` (scheme, host, port and TLS settings; `host` is what a
    /// message names), or the failure it is remembered for. Waits while a first request to it is
    /// in flight.
    pub fn contact(&self, key: &str, host: &str) -> Result<Contact, HostFailed> {
        let entry = lock(&self.0.hosts).entry(key.to_string()).or_default().clone();
        let mut state = lock(&entry.state);
        let first = loop {
            match &*state {
                State::Trying => state = entry.changed.wait(state).unwrap_or_else(|e| e.into_inner()),
                State::Answered => break false,
                State::Failed { at, message } if !self.expired(*at) => {
                    return Err(HostFailed { host: host.to_string(), message: message.clone() })
                }
                State::Untried | State::Failed { .. } => {
                    *state = State::Trying;
                    break true;
                }
            }
        };
        drop(state);
        Ok(Contact { shared: self.clone(), shown: host.to_string(), host: entry, first, settled: false })
    }

    /// The failure `key` is remembered for, if any (without waiting for a request in flight).
    pub fn remembered(&self, key: &str, host: &str) -> Option<HostFailed> {
        let entry = lock(&self.0.hosts).get(key)?.clone();
        let state = lock(&entry.state);
        match &*state {
            State::Failed { at, message } if !self.expired(*at) => {
                Some(HostFailed { host: host.to_string(), message: message.clone() })
            }
            _ => None,
        }
    }

    fn expired(&self, at: Instant) -> bool {
        self.0.memory.is_some_and(|memory| (self.0.clock)().saturating_duration_since(at) >= memory)
    }
}

/// One request's leave to reach a host; says how it went. Dropped unsettled (the request never
/// reached the host: a refused address, an error on this side), it leaves the host untried.
pub struct Contact {
    shared: FailedHosts,
    /// The host as messages name it.
    shown: String,
    host: Arc<Host>,
    first: bool,
    settled: bool,
}

impl Contact {
    /// The host answered (any HTTP status): it is reachable.
    pub fn answered(&mut self) {
        self.settle(State::Answered);
    }

    /// The host gave no answer: remembered with `message` (which names no URL: every request
    /// to the host is told the same).
    pub fn failed(&mut self, message: String) -> HostFailed {
        let at = (self.shared.0.clock)();
        self.settle(State::Failed { at, message: message.clone() });
        HostFailed { host: self.shown.clone(), message }
    }

    fn settle(&mut self, outcome: State) {
        self.settled = true;
        *lock(&self.host.state) = outcome;
        self.host.changed.notify_all();
    }
}

impl Drop for Contact {
    fn drop(&mut self) {
        if !self.settled && self.first {
            self.settle(State::Untried);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
