//! Walking a tree of repository content: depth first, entries in lexical order (the order of the
//! controllers' own walks), with an explicit stack, so no depth of directories a pull request
//! writes can exhaust a thread's stack, and never into fluxplan's own build shadows (see
//! `render::scratch`), which are no part of any source.

use std::fs::{DirEntry, FileType};
use std::path::{Path, PathBuf};

/// A directory or entry that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {error}", path.display())]
pub struct Unreadable {
    pub path: PathBuf,
    pub error: std::io::Error,
}

impl From<Unreadable> for std::io::Error {
    fn from(e: Unreadable) -> Self {
        std::io::Error::new(e.error.kind(), e.to_string())
    }
}

/// Whether to enter a directory just visited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Descend {
    Yes,
    No,
}

/// Visits every entry under `dir` (not `dir` itself); `visit` says whether to enter each
/// directory. An entry that cannot be read is an error, as is a directory that cannot be listed.
pub fn walk<E: From<Unreadable>>(
    dir: &Path,
    mut visit: impl FnMut(&DirEntry, FileType) -> Result<Descend, E>,
) -> Result<(), E> {
    let mut stack = vec![sorted(dir)?.into_iter()];
    while let Some(entries) = stack.last_mut() {
        let Some(entry) = entries.next() else {
            stack.pop();
            continue;
        };
        let file_type = entry.file_type().map_err(|error| Unreadable { path: entry.path(), error })?;
        if visit(&entry, file_type)? == Descend::Yes && file_type.is_dir() {
            stack.push(sorted(&entry.path())?.into_iter());
        }
    }
    Ok(())
}

fn sorted(dir: &Path) -> Result<Vec<DirEntry>, Unreadable> {
    let unreadable = |error| Unreadable { path: dir.to_path_buf(), error };
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        if !crate::render::is_fluxplan_scratch(&entry.file_name()) {
            entries.push(entry);
        }
    }
    entries.sort_by_key(DirEntry::file_name);
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_in_lexical_order_depth_first_and_deeper_than_any_stack() {
        let dir = tempfile::tempdir().unwrap();
        for file in ["b/x.yaml", "a.yaml", "b/a/y.yaml", "c.yaml"] {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let deep = dir.path().join("d/".repeat(1_500));
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("z.yaml"), "").unwrap();
        let shadow = dir.path().join(crate::render::scratch::shadow_name(1));
        std::fs::create_dir(&shadow).unwrap();
        std::fs::write(shadow.join("kustomization.yaml"), "").unwrap();
        let mut seen = Vec::new();
        walk::<Unreadable>(dir.path(), |entry, file_type| {
            if file_type.is_file() {
                seen.push(entry.path().strip_prefix(dir.path()).unwrap().display().to_string());
            }
            Ok(if entry.file_name() == "a" { Descend::No } else { Descend::Yes })
        })
        .unwrap();
        let deepest = format!("{}z.yaml", "d/".repeat(1_500));
        assert_eq!(seen, ["a.yaml", "b/x.yaml", "c.yaml", deepest.as_str()]);
    }
}
