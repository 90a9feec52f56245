//! Integration tests: real git repositories, real kustomize. One binary shares one build.

mod after_merge;
mod argocd;
mod argocd_live;
mod artifacts;
mod bot;
mod boundaries;
mod cascades;
mod deploy;
mod fake_forge_selftest;
mod fake_github;
mod fake_gitlab;
mod fake_kube;
mod fake_kube_selftest;
mod fixture;
mod hardening;
mod hostile;
mod kube_view;
mod plan;
mod render_cli;
mod render_engine;
mod roots;
mod sandbox;
mod scopes;
mod silent_pass;
mod speed;
mod trust;
