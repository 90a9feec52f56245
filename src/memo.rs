//! Answers by key, each computed once even when asked from several threads at the same time
//! (base and head of a plan render side by side): later askers wait for the first.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

pub struct Memo<K, V>(Mutex<BTreeMap<K, Arc<OnceLock<V>>>>);

impl<K: Ord + Clone, V: Clone> Memo<K, V> {
    pub fn get(&self, key: &K, compute: impl FnOnce() -> V) -> V {
        let cell = self.0.lock().unwrap_or_else(|e| e.into_inner()).entry(key.clone()).or_default().clone();
        cell.get_or_init(compute).clone()
    }
}

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Memo(Mutex::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn concurrent_askers_share_one_computation() {
        let memo: Memo<&str, usize> = Memo::default();
        let runs = AtomicUsize::new(0);
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    barrier.wait();
                    memo.get(&"key", || runs.fetch_add(1, Ordering::SeqCst) + 41)
                });
            }
        });
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(memo.get(&"key", || 0), 41);
    }
}
