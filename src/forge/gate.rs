//! How every call to one forge is made: each attempt has a deadline, transient failures are
//! retried with backoff, a rate limit pauses the whole client until its reset (every call waits
//! on that one pause instead of each job trying again), and whether the forge still accepts the
//! token is watched for `/readyz`.

use super::{with_retries_when, ForgeError, ForgeKind, MAX_INLINE_WAIT};
use prometheus::IntCounterVec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Default time to open a connection to a forge.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time one forge request may take, from sending it to its whole answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time a forge may keep refusing the token before the bot says it is not ready.
pub const DEFAULT_UNREADY_AFTER: Duration = Duration::from_secs(300);
/// How long a rate limit without a stated reset pauses the client.
const UNSTATED_RATE_LIMIT_PAUSE: Duration = Duration::from_secs(1);

/// The deadlines of forge calls.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// To open a connection (GitHub; GitLab's client has no such setting, so there the total
    /// deadline bounds connecting too).
    pub connect: Duration,
    /// For one request and its whole answer.
    pub total: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines { connect: DEFAULT_CONNECT_TIMEOUT, total: DEFAULT_TIMEOUT }
    }
}

/// The counters an operator reads (`fluxplan_forge_*`), owned by the metrics.
#[derive(Clone)]
pub struct CallCounters {
    /// Failed attempts that are tried again (inline or by the job's retry), by `forge`, `kind`.
    pub retries: IntCounterVec,
    /// Rate-limit answers, by `forge`.
    pub rate_limits: IntCounterVec,
    /// Calls held back by the client's rate-limit pause instead of sent, by `forge`.
    pub held: IntCounterVec,
}

/// `kind` of `fluxplan_forge_retries_total`.
pub const RETRY_KINDS: [&str; 3] = ["rate_limited", "transient", "timeout"];

/// The call policy and shared state of one forge client.
pub struct Gate {
    forge: ForgeKind,
    deadlines: Deadlines,
    /// Until when the forge asked the whole client to wait (a rate limit's reset).
    paused_until: Mutex<Option<tokio::time::Instant>>,
    /// Since when every answer has refused the token (401, bad credentials); `None` once one
    /// accepted it.
    refused_since: Mutex<Option<Instant>>,
    counters: OnceLock<CallCounters>,
}

impl Gate {
    pub fn new(forge: ForgeKind, deadlines: Deadlines) -> Self {
        Gate {
            forge,
            deadlines,
            paused_until: Mutex::new(None),
            refused_since: Mutex::new(None),
            counters: OnceLock::new(),
        }
    }

    pub fn forge(&self) -> ForgeKind {
        self.forge
    }

    /// Counts into these from now on (set once; the metrics are made after the clients).
    pub fn count_into(&self, counters: CallCounters) {
        let _ = self.counters.set(counters);
    }

    /// How long the forge has refused the token, if every answer since then refused it.
    pub fn token_refused_for(&self) -> Option<Duration> {
        lock(&self.refused_since).map(|since| since.elapsed())
    }

    /// Runs one forge call: waits out the client's pause first, bounds each attempt by the
    /// deadline, retries transient failures and short rate limits with backoff. An attempt that
    /// hit the deadline is not retried here (that would hold the worker again): it fails as
    /// transient, and the job is retried with its own backoff while the worker takes others.
    pub async fn call<T, F, Fut>(&self, what: &str, mut call: F) -> Result<T, ForgeError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ForgeError>>,
    {
        let timed_out = AtomicBool::new(false);
        let timed_out = &timed_out;
        let attempt = || {
            let request = call();
            async move {
                self.wait_out_pause().await?;
                let result = match tokio::time::timeout(self.deadlines.total, request).await {
                    Ok(result) => result,
                    Err(_) => {
                        timed_out.store(true, Ordering::Relaxed);
                        tracing::warn!(
                            forge = self.forge.as_str(),
                            "{what}: the forge did not answer within {}s",
                            self.deadlines.total.as_secs_f32()
                        );
                        Err(ForgeError::Transient(format!(
                            "{what}: {} did not answer within {}s",
                            self.forge.name(),
                            self.deadlines.total.as_secs_f32()
                        )))
                    }
                };
                self.observe(&result, timed_out.load(Ordering::Relaxed));
                result
            }
        };
        with_retries_when(what, attempt, |error| error.retryable() && !timed_out.load(Ordering::Relaxed))
            .await
    }

    /// Waits until the client's rate-limit pause is over; a pause longer than a job should wait
    /// in place fails at once (nothing is sent), so the job is rescheduled after the reset.
    async fn wait_out_pause(&self) -> Result<(), ForgeError> {
        let now = tokio::time::Instant::now();
        let left = lock(&self.paused_until).and_then(|until| until.checked_duration_since(now));
        let Some(left) = left.filter(|left| !left.is_zero()) else { return Ok(()) };
        if let Some(counters) = self.counters.get() {
            counters.held.with_label_values(&[self.forge.as_str()]).inc();
        }
        if left > MAX_INLINE_WAIT {
            return Err(ForgeError::RateLimited(Some(left)));
        }
        tracing::debug!(forge = self.forge.as_str(), wait = ?left, "waiting out the forge's rate limit");
        tokio::time::sleep(left).await;
        Ok(())
    }

    /// Learns from an answer: a rate limit pauses the client, a refused token starts (or keeps)
    /// the refusal, any other answer of the forge ends it.
    fn observe<T>(&self, result: &Result<T, ForgeError>, timed_out: bool) {
        let forge = self.forge.as_str();
        let retried = |kind: &str| {
            if let Some(counters) = self.counters.get() {
                counters.retries.with_label_values(&[forge, kind]).inc();
            }
        };
        match result {
            Err(ForgeError::Unauthorized(_)) => {
                lock(&self.refused_since).get_or_insert_with(Instant::now);
            }
            Err(ForgeError::RateLimited(wait)) => {
                let until = tokio::time::Instant::now() + wait.unwrap_or(UNSTATED_RATE_LIMIT_PAUSE);
                let mut paused = lock(&self.paused_until);
                *paused = Some(paused.map_or(until, |p| p.max(until)));
                drop(paused);
                tracing::warn!(forge, wait = ?wait, "rate limited: every call to this forge waits for the reset");
                if let Some(counters) = self.counters.get() {
                    counters.rate_limits.with_label_values(&[forge]).inc();
                }
                retried("rate_limited");
            }
            Err(ForgeError::Transient(_)) => retried(if timed_out { "timeout" } else { "transient" }),
            // The forge answered a request it authenticated: it takes the token.
            Ok(_) | Err(ForgeError::NotFound(_) | ForgeError::Permanent(_)) => {
                *lock(&self.refused_since) = None;
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn gate(total: Duration) -> Gate {
        Gate::new(ForgeKind::GitHub, Deadlines { connect: Duration::from_secs(1), total })
    }

    #[tokio::test]
    async fn a_call_that_does_not_answer_fails_at_the_deadline_and_is_not_retried_in_place() {
        let gate = gate(Duration::from_secs(1));
        let calls = AtomicUsize::new(0);
        let result: Result<(), _> = gate
            .call("hang", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                std::future::pending().await
            })
            .await;
        assert!(matches!(&result, Err(ForgeError::Transient(m)) if m.contains("did not answer within 1s")));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // A slow answer within the deadline is an answer.
        let gate = self::gate(Duration::from_secs(60));
        let answer = gate
            .call("slow", || async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok(7)
            })
            .await;
        assert_eq!(answer.unwrap(), 7);
    }

    #[tokio::test]
    async fn a_rate_limit_pauses_every_call_until_its_reset() {
        let gate = gate(Duration::from_secs(60));
        let limit = || async { Err::<(), _>(ForgeError::RateLimited(Some(Duration::from_secs(3600)))) };
        assert!(gate.call("limited", limit).await.is_err());
        // Another call is not sent while the pause lasts: its job is rescheduled after it.
        let sent = AtomicUsize::new(0);
        let held = gate
            .call("other", || async {
                sent.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .await;
        assert!(matches!(held, Err(ForgeError::RateLimited(Some(wait))) if wait > MAX_INLINE_WAIT));
        assert_eq!(sent.load(Ordering::SeqCst), 0);
        // A short pause is waited out in place, then the call goes.
        let gate = self::gate(Duration::from_secs(60));
        *lock(&gate.paused_until) = Some(tokio::time::Instant::now() + Duration::from_millis(300));
        let started = tokio::time::Instant::now();
        gate.call("after", || async { Ok(()) }).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(300));
    }

    #[test]
    fn a_refused_token_is_remembered_until_the_forge_takes_one() {
        let gate = gate(Duration::from_secs(60));
        let answer = |result: Result<(), ForgeError>| gate.observe(&result, false);
        assert_eq!(gate.token_refused_for(), None);
        answer(Err(ForgeError::Unauthorized("HTTP 401".into())));
        assert!(gate.token_refused_for().is_some());
        // What says nothing of the token (no answer, a proxy's 502) keeps the refusal.
        answer(Err(ForgeError::Transient("HTTP 502".into())));
        gate.observe(&Err::<(), _>(ForgeError::Transient("no answer".into())), true);
        assert!(gate.token_refused_for().is_some());
        // A refusal of what was asked (422) answers an accepted token.
        answer(Err(ForgeError::Permanent("HTTP 422".into())));
        assert_eq!(gate.token_refused_for(), None);
        answer(Err(ForgeError::Unauthorized("HTTP 401".into())));
        answer(Ok(()));
        assert_eq!(gate.token_refused_for(), None);
    }
}
