//! fluxplan: what Flux will create, change and delete if a pull request merges.

pub mod cli;
pub mod cluster;
pub mod flux;
pub mod git;
pub mod paths;
pub mod plan;
pub mod render;
pub mod report;
pub mod yaml;
