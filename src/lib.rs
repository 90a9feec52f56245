//! fluxplan: what Flux will create, change and delete if a pull request merges.

pub mod argocd;
pub mod cancel;
pub mod charts;
pub mod cli;
pub mod cluster;
pub mod console;
pub mod flux;
pub mod forge;
pub mod git;
pub mod go_yaml;
pub mod jobs;
pub(crate) mod memo;
pub mod paths;
pub mod plan;
pub mod planner;
pub mod private_files;
pub mod render;
pub mod report;
pub mod sandbox;
pub mod server;
pub mod service;
pub mod stack;
pub mod store;
pub mod tls;
pub mod tree;
pub mod yaml;
