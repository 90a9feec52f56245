//! Who this replica is, across restarts. The id is kept in the data directory: a replica that
//! restarts (after a crash, `kill -9`, a container restart) knows which jobs its dead
//! predecessor held and takes them back at once, instead of leaving their pull requests to wait
//! out the lease. A lock on the directory, held for the life of the process, keeps two live
//! processes from sharing the id: the kernel drops it when the process dies, however it dies.

use anyhow::{Context, Result};
use std::fs::File;
use std::path::Path;

/// The file in the data directory that keeps the id.
const ID_FILE: &str = "instance-id";
/// The file locked by the process that owns the id.
const LOCK_FILE: &str = "instance.lock";
/// Longer ids are not ours (a damaged file): a new one is made.
const MAX_ID_LEN: usize = 100;

/// This process's identity among the replicas sharing a queue. Workers are `{id}-{n}`.
pub struct Instance {
    pub id: String,
    /// True when the id is the data directory's own, so every job held under it belongs to a
    /// dead process of this replica; false for a second process on a directory already in use
    /// (its id is its own, and it takes nothing over at start).
    pub inherited: bool,
    /// Held while the process lives.
    _lock: Option<File>,
}

impl Instance {
    /// The identity kept in `data_dir` (made on the first start), or a fresh one when another
    /// live process holds it.
    pub fn of_data_dir(data_dir: &Path) -> Result<Instance> {
        let lock_path = data_dir.join(LOCK_FILE);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let id = new_id();
                tracing::warn!(
                    %id,
                    data_dir = %data_dir.display(),
                    "another fluxplan process uses this data directory: running under an id of this process's own"
                );
                return Ok(Instance { id, inherited: false, _lock: None });
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", lock_path.display()))
            }
        }
        let id_path = data_dir.join(ID_FILE);
        let kept = std::fs::read_to_string(&id_path).ok().map(|text| text.trim().to_string());
        let id = match kept.filter(|id| valid_id(id)) {
            Some(id) => id,
            None => {
                let id = new_id();
                std::fs::write(&id_path, format!("{id}\n"))
                    .with_context(|| format!("cannot write {}", id_path.display()))?;
                id
            }
        };
        Ok(Instance { id, inherited: true, _lock: Some(lock) })
    }

    /// The pattern (SQL `LIKE`) matching every worker of this instance: ids hold no `%` or `_`.
    pub fn workers_pattern(&self) -> String {
        format!("{}-%", self.id)
    }
}

/// Letters, digits, dots and dashes: safe in a `LIKE` pattern and in logs.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
}

/// `{hostname}-{random}`: the host for whoever reads the queue, the random part so that two
/// data directories on one host never share an id.
fn new_id() -> String {
    let mut bytes = [0u8; 6];
    let _ = getrandom::fill(&mut bytes);
    let host: String = hostname()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
        .take(MAX_ID_LEN - 20)
        .collect();
    let host = if host.is_empty() { "fluxplan".to_string() } else { host };
    format!("{host}-{}", hex::encode(bytes))
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "fluxplan".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarted_process_is_the_same_instance_and_a_second_live_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let first = Instance::of_data_dir(dir.path()).unwrap();
        assert!(first.inherited && valid_id(&first.id), "{}", first.id);
        // While the first lives, a second process on the directory gets an id of its own.
        let second = Instance::of_data_dir(dir.path()).unwrap();
        assert!(!second.inherited);
        assert_ne!(second.id, first.id);
        // Once the first is gone, the next process is it again.
        let id = first.id.clone();
        drop(first);
        let restarted = Instance::of_data_dir(dir.path()).unwrap();
        assert!(restarted.inherited);
        assert_eq!(restarted.id, id);
        assert_eq!(restarted.workers_pattern(), format!("{id}-%"));
    }

    #[test]
    fn a_damaged_id_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ID_FILE), "host_%-x\n").unwrap();
        let instance = Instance::of_data_dir(dir.path()).unwrap();
        assert!(valid_id(&instance.id) && instance.id != "host_%-x", "{}", instance.id);
        assert!(!valid_id("") && !valid_id(&"a".repeat(MAX_ID_LEN + 1)));
    }
}
