//! Catching up after a gap. Neither GitHub nor GitLab redelivers a failed webhook on its own (and
//! GitLab disables a hook that answers 5xx for a while): what the forge sent while `serve` was
//! down, or while the database refused
//! deliveries (503), is only found again by listing the open pull requests. So the resync passes
//! at once at start, as soon as the database answers again after it failed, and as soon as a
//! forge answers again after an outage that used up a job's retries; such a job is not given up
//! but retried later (`retry_later`), and woken as soon as its forge answers.

use crate::forge::ForgeKind;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;

/// How a job whose retries were used up by a transient failure (a forge outage, a rate limit)
/// is retried later instead of being given up.
#[derive(Debug, Clone, Copy)]
pub struct RetryLater {
    /// Between such retries (zero: never; the job fails as before).
    pub every: Duration,
    /// A job older than this is given up (its commit gets an `error` status that says so).
    pub max_age: Duration,
}

impl Default for RetryLater {
    fn default() -> Self {
        RetryLater { every: Duration::from_secs(300), max_age: Duration::from_secs(24 * 3600) }
    }
}

/// What the bot knows about its outages, shared by the webhook handler, the workers and the
/// resync.
#[derive(Default)]
pub struct Recovery {
    pub retry_later: RetryLater,
    database_down: AtomicBool,
    forges_down: Mutex<BTreeSet<&'static str>>,
    database_back: Notify,
    forge_went_down: Notify,
}

impl Recovery {
    pub fn new(retry_later: RetryLater) -> Self {
        Recovery { retry_later, ..Default::default() }
    }

    /// The database failed a request (a delivery answered 503, a claim that failed).
    pub fn database_failed(&self) {
        if !self.database_down.swap(true, Ordering::SeqCst) {
            tracing::warn!("the database does not answer: the bot catches up once it does");
        }
    }

    /// The database answered: after a failure, the resync catches up at once.
    pub fn database_answered(&self) {
        if self.database_down.swap(false, Ordering::SeqCst) {
            tracing::info!("the database answers again: catching up with the open pull requests");
            self.database_back.notify_one();
        }
    }

    /// Resolves once the database answers again after a failure.
    pub async fn database_is_back(&self) {
        self.database_back.notified().await
    }

    /// A forge failed past its retries: the resync probes it until it answers.
    pub fn forge_failed(&self, kind: ForgeKind) {
        let inserted = self.forges().insert(kind.as_str());
        if inserted {
            tracing::warn!(forge = kind.as_str(), "the forge does not answer: probing it until it does");
            self.forge_went_down.notify_one();
        }
    }

    /// The forge answered; true when it was down (its waiting jobs are then woken).
    pub fn forge_answered(&self, kind: ForgeKind) -> bool {
        self.forges().remove(kind.as_str())
    }

    pub fn any_forge_down(&self) -> bool {
        !self.forges().is_empty()
    }

    /// Resolves when a forge goes down (the resync then probes it).
    pub async fn forge_is_down(&self) {
        self.forge_went_down.notified().await
    }

    fn forges(&self) -> std::sync::MutexGuard<'_, BTreeSet<&'static str>> {
        self.forges_down.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_failure_followed_by_an_answer_wakes_the_catch_up() {
        let recovery = Recovery::default();
        // Answers without a failure before wake nobody.
        recovery.database_answered();
        let woken = tokio::time::timeout(Duration::from_millis(50), recovery.database_is_back()).await;
        assert!(woken.is_err());
        recovery.database_failed();
        recovery.database_failed();
        recovery.database_answered();
        let woken = tokio::time::timeout(Duration::from_secs(5), recovery.database_is_back()).await;
        assert!(woken.is_ok());

        assert!(!recovery.forge_answered(ForgeKind::GitHub), "was not down");
        recovery.forge_failed(ForgeKind::GitHub);
        assert!(recovery.any_forge_down());
        assert!(!recovery.forge_answered(ForgeKind::GitLab));
        assert!(recovery.forge_answered(ForgeKind::GitHub));
        assert!(!recovery.any_forge_down());
    }
}
