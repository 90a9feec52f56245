//! Lexical path handling that never leaves a root: the controller's secure join.

use std::path::{Component, Path, PathBuf};

/// True for a repository path as git names a file, safe to name in a report: relative, `/`-separated, no empty, `.` or `..`
/// component, no NUL or backslash.
pub fn is_plain_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 4096
        && !path.contains(['\0', '\\'])
        && path.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Joins `path` onto `root` the way a chroot would: `..` stops at the root, absolute paths are
/// taken relative to it. No symlinks exist in the trees fluxplan builds, so this is exact.
pub fn secure_join(root: &Path, path: &str) -> PathBuf {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::ParentDir => {
                parts.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    parts.iter().fold(root.to_path_buf(), |acc, part| acc.join(part))
}

/// Resolves `.` and `..` lexically; `None` when the path climbs above its first component.
pub fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// True when `path` resolves inside `root`.
pub fn is_within(root: &Path, path: &Path) -> bool {
    normalize(path).is_some_and(|p| p.starts_with(root))
}

/// True when `path` resolves inside `root` and exists.
pub fn exists_within(root: &Path, path: &Path) -> bool {
    normalize(path).is_some_and(|p| p.starts_with(root) && p.exists())
}

/// `path` relative to `root` with `/` separators ("." for the root itself).
pub fn relative(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.to_string_lossy().replace('\\', "/"),
        Err(_) => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_join_clamps_at_the_root() {
        let root = Path::new("/src");
        assert_eq!(secure_join(root, "./apps/prod"), Path::new("/src/apps/prod"));
        assert_eq!(secure_join(root, "../../etc/passwd"), Path::new("/src/etc/passwd"));
        assert_eq!(secure_join(root, "/abs/x"), Path::new("/src/abs/x"));
        assert_eq!(secure_join(root, ""), Path::new("/src"));
    }

    #[test]
    fn within_rejects_escapes() {
        let root = Path::new("/src");
        assert!(is_within(root, Path::new("/src/a/../b")));
        assert!(!is_within(root, Path::new("/src/a/../../etc")));
    }

    #[test]
    fn only_plain_relative_paths() {
        for bad in ["", "/etc/passwd", "../x.yaml", "a/../../x", "a//b", "./a.yaml", "a/./b", "a\\b", "a\0b"]
        {
            assert!(!is_plain_path(bad), "{bad:?}");
        }
        for good in ["a.yaml", "clusters/prod/apps.yaml", "..a/b..", ".fluxplan.yaml"] {
            assert!(is_plain_path(good), "{good:?}");
        }
    }
}
