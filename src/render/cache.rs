//! kustomize outputs cached by the content hash of everything a build reads: in memory for one
//! process (base and head of a plan share it) and optionally on disk across runs.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct RenderCache {
    memory: Mutex<HashMap<String, Arc<String>>>,
    disk: Option<PathBuf>,
    /// Entries go to disk on a thread of their own: on slow disks a file costs a millisecond,
    /// which builds should not wait for. Joined (everything written) when the cache drops.
    writer: Option<Writer>,
}

struct Writer {
    queue: std::sync::mpsc::Sender<(PathBuf, Arc<String>)>,
    thread: std::thread::JoinHandle<()>,
}

impl Drop for RenderCache {
    fn drop(&mut self) {
        if let Some(Writer { queue, thread }) = self.writer.take() {
            drop(queue);
            let _ = thread.join();
        }
    }
}

/// Written to a temporary file and renamed: a crash never leaves half an entry.
fn write_entry(dir: &std::path::Path, path: &std::path::Path, output: &str) {
    if let Ok(mut file) = tempfile::NamedTempFile::new_in(dir) {
        if file.write_all(output.as_bytes()).is_ok() {
            let _ = file.persist(path);
        }
    }
}

impl RenderCache {
    /// A cache that also persists under `dir` (created with owner-only permissions, since
    /// outputs may hold Secret manifests).
    pub fn new(dir: Option<PathBuf>) -> Self {
        let disk = dir.filter(|d| create_private_dir(d).is_ok());
        let writer = disk.clone().and_then(|dir| {
            let (queue, entries) = std::sync::mpsc::channel::<(PathBuf, Arc<String>)>();
            let thread = std::thread::Builder::new()
                .name("cache-writer".into())
                .spawn(move || {
                    for (path, output) in entries {
                        write_entry(&dir, &path, &output);
                    }
                })
                .ok()?;
            Some(Writer { queue, thread })
        });
        RenderCache { memory: Mutex::default(), disk, writer }
    }

    /// The default on-disk location: `$FLUXPLAN_CACHE_DIR`, else `$XDG_CACHE_HOME/fluxplan`,
    /// else `~/.cache/fluxplan`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("FLUXPLAN_CACHE_DIR") {
            return Some(PathBuf::from(dir));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("fluxplan"))
    }

    pub fn get(&self, key: &str) -> Option<Arc<String>> {
        if let Some(hit) = self.memory.lock().unwrap_or_else(|e| e.into_inner()).get(key) {
            return Some(hit.clone());
        }
        let text = std::fs::read_to_string(self.disk.as_ref()?.join(key)).ok()?;
        let text = Arc::new(text);
        self.memory.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), text.clone());
        Some(text)
    }

    pub fn put(&self, key: &str, output: Arc<String>) {
        if let Some(dir) = &self.disk {
            let queued =
                self.writer.as_ref().is_some_and(|w| w.queue.send((dir.join(key), output.clone())).is_ok());
            if !queued {
                write_entry(dir, &dir.join(key), &output);
            }
        }
        self.put_in_memory(key, output);
    }

    fn put_in_memory(&self, key: &str, output: Arc<String>) {
        self.memory.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), output);
    }
}

fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}
