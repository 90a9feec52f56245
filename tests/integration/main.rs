//! Integration tests: real git repositories, real kustomize. One binary shares one build.

mod fixture;
mod plan;
mod render_cli;
mod render_engine;
