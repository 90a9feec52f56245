//! The periodic prune (`Store::prune`): at start, then every few hours, what is older than the
//! retention age goes; the embedded database is compacted after a prune that deleted something,
//! at a quiet time (no job running; else at a later pass).

use crate::store::Store;
use std::time::Duration;

/// Between prunes.
const EVERY: Duration = Duration::from_secs(6 * 3600);
/// While jobs run, how long a compaction waits before it looks again.
const QUIET_CHECK: Duration = Duration::from_secs(60);
/// How often it looks for a quiet time before leaving it to the next prune.
const QUIET_TRIES: u32 = 30;

/// Prunes what is older than `keep` until `stop` is set.
pub async fn run(store: Store, keep: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        match store.prune(keep).await {
            Ok(pruned) => {
                tracing::info!(
                    runs = pruned.runs,
                    events = pruned.events,
                    jobs = pruned.jobs,
                    replies = pruned.replies,
                    bookkeeping = pruned.bookkeeping,
                    "retention: pruned what is older than {} days",
                    keep.as_secs() / 86_400
                );
                if pruned.total() > 0 {
                    compact_when_quiet(&store, &mut stop).await;
                }
            }
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "retention: cannot prune"),
        }
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}

async fn compact_when_quiet(store: &Store, stop: &mut tokio::sync::watch::Receiver<bool>) {
    for _ in 0..QUIET_TRIES {
        match store.any_job_running().await {
            Ok(false) => {
                match store.compact().await {
                    Ok(()) => tracing::info!("retention: the database is compacted"),
                    Err(e) => tracing::warn!(error = %format!("{e:#}"), "retention: cannot compact"),
                }
                return;
            }
            Ok(true) => {}
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "retention: cannot compact");
                return;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(QUIET_CHECK) => {}
            _ = stop.changed() => return,
        }
    }
}
