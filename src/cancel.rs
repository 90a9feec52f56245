//! Stopping a plan from outside: a newer push superseded it, it ran out of time, or the service
//! is shutting down. Cancelling kills every process the plan started at once (their whole
//! process groups); the render checks the token between builds.

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

/// Why a plan was stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelReason {
    /// A newer push (or a closed pull request) made this plan pointless.
    Superseded,
    /// The service is shutting down.
    ShuttingDown,
    /// The whole plan took longer than its limit.
    TimedOut(Duration),
    /// Whoever asked for it went away (an MCP client that disconnected or cancelled).
    Abandoned,
}

impl std::fmt::Display for CancelReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CancelReason::Superseded => write!(f, "superseded by a newer plan"),
            CancelReason::ShuttingDown => write!(f, "the service is shutting down"),
            CancelReason::Abandoned => write!(f, "whoever asked for it went away"),
            CancelReason::TimedOut(limit) => {
                write!(f, "the plan took longer than its {}s limit (--plan-timeout)", limit.as_secs())
            }
        }
    }
}

/// A cancellation shared by everything one plan does; cheap to clone.
#[derive(Clone, Default)]
pub struct CancelToken(Arc<Inner>);

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CancelToken({:?})", self.reason())
    }
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    reason: Option<CancelReason>,
    /// Process groups of the kustomize processes running for this token.
    groups: BTreeSet<i32>,
    children: Vec<Weak<Inner>>,
}

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    /// A token cancelled with this one (a job's token under the service's shutdown token).
    pub fn child(&self) -> CancelToken {
        let child = CancelToken::new();
        let mut state = self.lock();
        match &state.reason {
            Some(reason) => child.cancel(reason.clone()),
            None => {
                state.children.retain(|c| c.strong_count() > 0);
                state.children.push(Arc::downgrade(&child.0));
            }
        }
        child
    }

    /// Cancels (the first reason wins) and kills every process group running for the token.
    pub fn cancel(&self, reason: CancelReason) {
        let (groups, children) = {
            let mut state = self.lock();
            if state.reason.is_some() {
                return;
            }
            state.reason = Some(reason.clone());
            (std::mem::take(&mut state.groups), std::mem::take(&mut state.children))
        };
        self.0.changed.notify_all();
        for group in groups {
            kill_group(group);
        }
        for child in children.iter().filter_map(Weak::upgrade) {
            CancelToken(child).cancel(reason.clone());
        }
    }

    pub fn reason(&self) -> Option<CancelReason> {
        self.lock().reason.clone()
    }

    pub fn check(&self) -> Result<(), CancelReason> {
        self.reason().map_or(Ok(()), Err)
    }

    /// Kills process group `group` when the token is cancelled, until the guard is dropped. A
    /// group registered after cancellation is killed at once.
    pub fn track(&self, group: i32) -> TrackedGroup {
        let mut state = self.lock();
        if state.reason.is_some() {
            drop(state);
            kill_group(group);
        } else {
            state.groups.insert(group);
        }
        TrackedGroup { token: self.clone(), group }
    }

    /// Cancels the token with `TimedOut` once `limit` has passed, unless the guard is dropped
    /// first (the plan finished).
    pub fn deadline(&self, limit: Duration) -> Deadline {
        let finished = Arc::new((Mutex::new(false), Condvar::new()));
        let token = self.clone();
        let watch = finished.clone();
        std::thread::spawn(move || {
            let (lock, done) = &*watch;
            let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (guard, waited) = done
                .wait_timeout_while(guard, limit, |finished| !*finished)
                .unwrap_or_else(|e| e.into_inner());
            if waited.timed_out() && !*guard {
                token.cancel(CancelReason::TimedOut(limit));
            }
        });
        Deadline { finished }
    }

    /// Blocks until the token is cancelled or `timeout` passes; returns the reason if cancelled.
    pub fn wait(&self, timeout: Duration) -> Option<CancelReason> {
        let state = self.lock();
        let (state, _) = self
            .0
            .changed
            .wait_timeout_while(state, timeout, |s| s.reason.is_none())
            .unwrap_or_else(|e| e.into_inner());
        state.reason.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Removes a process group from its token when dropped (the process was reaped).
pub struct TrackedGroup {
    token: CancelToken,
    group: i32,
}

impl Drop for TrackedGroup {
    fn drop(&mut self) {
        self.token.lock().groups.remove(&self.group);
    }
}

/// Ends a deadline's watch when dropped.
pub struct Deadline {
    finished: Arc<(Mutex<bool>, Condvar)>,
}

impl Drop for Deadline {
    fn drop(&mut self) {
        let (lock, done) = &*self.finished;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        done.notify_all();
    }
}

/// SIGKILL to a whole process group: kustomize and anything it started.
pub fn kill_group(group: i32) {
    if group > 1 {
        // SAFETY: killpg has no memory effects; a group that is gone yields ESRCH, ignored.
        unsafe {
            libc::killpg(group, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_follow_their_parent_and_keep_the_first_reason() {
        let root = CancelToken::new();
        let job = root.child();
        assert_eq!(job.check(), Ok(()));
        root.cancel(CancelReason::ShuttingDown);
        assert_eq!(job.reason(), Some(CancelReason::ShuttingDown));
        job.cancel(CancelReason::Superseded);
        assert_eq!(job.reason(), Some(CancelReason::ShuttingDown));
        assert_eq!(root.child().reason(), Some(CancelReason::ShuttingDown));
    }

    #[test]
    fn a_deadline_cancels_unless_finished_first() {
        let token = CancelToken::new();
        drop(token.deadline(Duration::from_secs(3600)));
        assert_eq!(token.reason(), None);
        let _deadline = token.deadline(Duration::from_millis(1));
        assert_eq!(
            token.wait(Duration::from_secs(600)),
            Some(CancelReason::TimedOut(Duration::from_millis(1)))
        );
    }
}
