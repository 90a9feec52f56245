//! Names fluxplan gives its own scratch entries inside exported trees.

use std::ffi::OsStr;

/// True for a name of fluxplan's own scratch (a shadow directory): only names that are not
/// valid UTF-8, which exports refuse, so no repository name is ever one.
pub fn is_fluxplan_scratch(name: &OsStr) -> bool {
    name.to_str().is_none()
}
