//! Where kustomize's Go library (c-shared, from the `pykustomize` wheel) is found, and which
//! binary hosts it. `scripts/fetch-kustomize-lib.sh` fetches the pinned wheel with pip, checks its
//! sha256 and installs the library at `default_path()`.

use std::path::PathBuf;

/// Points at the library; `off` turns it off (the kustomize binary is used).
pub const LIB_ENV: &str = "FLUXPLAN_KUSTOMIZE_LIB";
pub const FILE_NAME: &str = "libpykustomize-0.1.4.so";

/// The sha256 of the pinned library (`lib_sha256` in `scripts/fetch-kustomize-lib.sh`).
pub const PINNED_SHA256: &str = "cd8f48b55a9fd7292a45bed20800581067026db985056a4e1605ab477b924230";

/// Refuses a library at the default place that is not the pinned one (replaced or damaged since
/// the fetch script checked it). A library named by `FLUXPLAN_KUSTOMIZE_LIB` is the operator's
/// choice and is not checked.
pub fn check_pinned(path: &std::path::Path) -> Result<(), String> {
    use sha2::{Digest, Sha256};
    use std::collections::HashMap;
    use std::sync::Mutex;
    // Hashed once per process and path: every plan makes a renderer.
    static HASHED: Mutex<Option<HashMap<PathBuf, Result<String, String>>>> = Mutex::new(None);
    let mut hashed = HASHED.lock().unwrap_or_else(|e| e.into_inner());
    let found = hashed
        .get_or_insert_with(HashMap::new)
        .entry(path.to_path_buf())
        .or_insert_with(|| {
            let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Ok(hex::encode(Sha256::digest(&bytes)))
        })
        .clone()?;
    if found == PINNED_SHA256 {
        Ok(())
    } else {
        Err(format!(
            "{} is not the pinned library (sha256 {found}, expected {PINNED_SHA256}): run \
             scripts/fetch-kustomize-lib.sh again",
            path.display()
        ))
    }
}

/// Where the fetch script installs the library: `$XDG_CACHE_HOME/fluxplan/lib/`, else
/// `~/.cache/fluxplan/lib/`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(default_path_under(&base))
}

/// Where the library sits under a cache directory.
pub fn default_path_under(cache: &std::path::Path) -> PathBuf {
    cache.join("fluxplan/lib").join(FILE_NAME)
}

/// What the environment asks for.
pub enum Choice {
    /// `FLUXPLAN_KUSTOMIZE_LIB` names it: it must work.
    Explicit(PathBuf),
    /// The default place, if the fetch script put it there.
    Default(Option<PathBuf>),
    Off,
}

pub fn choice() -> Choice {
    match std::env::var_os(LIB_ENV).filter(|v| !v.is_empty()) {
        Some(v) if v == "off" => Choice::Off,
        Some(v) => Choice::Explicit(PathBuf::from(v)),
        None => Choice::Default(default_path()),
    }
}

/// The fluxplan binary that hosts workers: this process's own executable, or (when this is a
/// test harness or another program linking the crate) the `fluxplan` built beside it.
pub fn worker_program() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    if me.file_name().is_some_and(|n| n == "fluxplan") {
        return Some(me);
    }
    me.ancestors().skip(1).take(2).map(|dir| dir.join("fluxplan")).find(|p| p.is_file())
}

/// The `sigs.k8s.io/kustomize/api` version the library was built with, from the Go build
/// information embedded in it (`dep\tsigs.k8s.io/kustomize/api\tv0.21.3\t…`); read once per
/// process and path. The library reports only its wrapper's version.
pub fn kustomize_api_version(path: &std::path::Path) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static SEEN: Mutex<Option<HashMap<PathBuf, Option<String>>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let seen = seen.get_or_insert_with(HashMap::new);
    if let Some(version) = seen.get(path) {
        return version.clone();
    }
    let version = std::fs::read(path).ok().and_then(|bytes| {
        let needle = b"\tsigs.k8s.io/kustomize/api\t";
        let at = memchr::memmem::find(&bytes, needle)? + needle.len();
        let rest = &bytes[at..bytes.len().min(at + 64)];
        let end = rest.iter().position(|b| !(b.is_ascii_alphanumeric() || b"._-+".contains(b)))?;
        String::from_utf8(rest[..end].to_vec()).ok()
    });
    seen.insert(path.to_path_buf(), version.clone());
    version
}
