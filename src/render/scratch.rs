//! fluxplan's own directories inside an exported tree: the shadows kustomize builds in (see
//! `build::Builder::run`). A shadow must sit beside the directory it stands for (kustomize
//! resolves `../` from it), so it lives inside the tree, under a name no export can hold: it
//! starts with a byte that is never UTF-8, and exports refuse every path that is not UTF-8
//! (`git::tree_entries`, `source::copy_tree`). Walkers skip such names knowing they skip nothing
//! of the repository's, so no name a pull request can write is ever passed over as fluxplan's.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The byte every shadow name starts with: never part of a UTF-8 text.
const NOT_UTF8: u8 = 0xff;

/// The name of the `n`th shadow this process creates.
pub fn shadow_name(n: u64) -> OsString {
    let mut name = vec![NOT_UTF8];
    name.extend_from_slice(format!(".fluxplan-build-{}-{n}", std::process::id()).as_bytes());
    OsString::from_vec(name)
}

/// True for a name fluxplan created inside an export; false for every name an export holds.
pub fn is_fluxplan_scratch(name: &OsStr) -> bool {
    std::str::from_utf8(name.as_bytes()).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadows_are_fluxplans_and_no_utf8_name_is() {
        assert!(is_fluxplan_scratch(&shadow_name(7)));
        for name in
            [".fluxplan-build-1-2", ".fluxplan-build-x", "\u{FFFD}.fluxplan-build-1-2", ".git", "a.yaml"]
        {
            assert!(!is_fluxplan_scratch(OsStr::new(name)), "{name}");
        }
    }
}
