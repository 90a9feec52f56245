//! Charts a HelmRelease names, fetched outside the sandbox: version resolution as
//! source-controller does it (`version`). The only module that will open network connections for
//! content a pull request names.

pub mod archive;
pub mod hosts;
pub mod version;
