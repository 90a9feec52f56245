//! What fluxplan writes is its user's alone: run page tokens live in the database, pull
//! requests' content in the mirrors and exports. Other local users read none of it.

use anyhow::{Context, Result};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Files and directories this process creates from now on are owner-only (umask 077), its
/// children's too (git writing mirrors, exports written by tools).
pub fn restrict_new_files() {
    // SAFETY: umask only sets the process's file mode mask and cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Creates `dir` (and missing parents) owner-only, or makes an existing one so: an older
/// fluxplan created its data directory 0755.
pub fn owner_only_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot make {} owner-only", dir.display()))
}

/// Makes `file` owner-only (0600), creating it empty when missing.
pub fn owner_only_file(file: &Path) -> Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(file)
        .with_context(|| format!("cannot create {}", file.display()))?;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} owner-only", file.display()))
}

/// Makes what exists of `paths` owner-only (files 0600, directories 0700), leaving the missing.
pub fn tighten_existing<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Result<()> {
    for path in paths {
        let Ok(meta) = std::fs::symlink_metadata(path) else { continue };
        let mode = if meta.is_dir() {
            0o700
        } else if meta.is_file() {
            0o600
        } else {
            continue; // a symlink's own mode means nothing; never follow it
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot make {} owner-only", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o777
    }

    #[test]
    fn directories_and_files_become_owner_only_whether_new_or_not() {
        let root = tempfile::tempdir().unwrap();
        let new = root.path().join("a/b");
        owner_only_dir(&new).unwrap();
        assert_eq!(mode(&new), 0o700);
        let old = root.path().join("old");
        std::fs::create_dir(&old).unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
        owner_only_dir(&old).unwrap();
        assert_eq!(mode(&old), 0o700);
        let file = old.join("db");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        owner_only_file(&file).unwrap();
        assert_eq!((mode(&file), std::fs::read_to_string(&file).unwrap().as_str()), (0o600, "x"));
        let other = old.join("wal");
        std::fs::write(&other, "").unwrap();
        tighten_existing([other.as_path(), root.path().join("missing").as_path()]).unwrap();
        assert_eq!(mode(&other), 0o600);
    }
}
