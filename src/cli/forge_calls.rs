//! `serve`'s flags for how it calls the forges: deadlines, and how long a refused token is borne
//! before the bot says it is not ready.

use crate::forge::gate::{Deadlines, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, DEFAULT_UNREADY_AFTER};
use crate::service::ForgeCallSettings;
use clap::Args;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ForgeCallArgs {
    /// Seconds to open a connection to a forge's API (GitHub; GitLab's calls are bounded by
    /// --forge-timeout-secs alone).
    #[arg(long, env = "FLUXPLAN_FORGE_CONNECT_TIMEOUT", default_value_t = DEFAULT_CONNECT_TIMEOUT.as_secs())]
    pub forge_connect_timeout_secs: u64,
    /// Seconds one forge API request may take, answer included; past it the call fails as
    /// transient and its job is retried with backoff, the worker taking other jobs meanwhile.
    #[arg(long, env = "FLUXPLAN_FORGE_TIMEOUT", default_value_t = DEFAULT_TIMEOUT.as_secs())]
    pub forge_timeout_secs: u64,
    /// Seconds a forge may keep refusing the token (401, bad credentials) before `/readyz`
    /// answers 503.
    #[arg(long, env = "FLUXPLAN_FORGE_UNREADY_AFTER_SECS", default_value_t = DEFAULT_UNREADY_AFTER.as_secs())]
    pub forge_unready_after_secs: u64,
}

impl ForgeCallArgs {
    pub fn settings(&self) -> ForgeCallSettings {
        // A zero deadline would fail every call: a second at least.
        let secs = |s: u64| Duration::from_secs(s.max(1));
        ForgeCallSettings {
            deadlines: Deadlines {
                connect: secs(self.forge_connect_timeout_secs),
                total: secs(self.forge_timeout_secs),
            },
            unready_after: Duration::from_secs(self.forge_unready_after_secs),
        }
    }
}
