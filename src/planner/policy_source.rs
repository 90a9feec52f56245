//! Where a plan's policy comes from: a file the operator names, else the BASE revision's
//! `.fluxplan.yaml` (a pull request must not loosen its own gate), else the built-in defaults.

use crate::git;
use crate::plan::policy::{read_policy_file, POLICY_FILE};
use crate::plan::{Alert, Policy};
use crate::render::Render;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default)]
pub enum PolicySource {
    /// The base revision's `.fluxplan.yaml`, else the defaults.
    #[default]
    BaseRevision,
    /// This file, whatever the repository says.
    File(PathBuf),
}

impl PolicySource {
    /// The policy, where it came from (for the report), and alerts about it (`policy-invalid`,
    /// `policy-changed`).
    pub fn load(&self, repo: &Path, base: &Render, head: &Render) -> Result<(Policy, String, Vec<Alert>)> {
        let PolicySource::File(path) = self else { return from_base_revision(repo, base, head) };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read policy {}", path.display()))?;
        let policy = Policy::parse(&text).map_err(|e| anyhow::anyhow!("policy {}: {e}", path.display()))?;
        let alerts = left_out(&policy, &path.display().to_string());
        Ok((policy, path.display().to_string(), alerts))
    }
}

impl PolicySource {
    /// The policy as far as rendering needs it, read before rendering; a policy that cannot be
    /// read declares nothing (loading it afterwards reports why).
    pub fn before_render(&self, repo: &Path, base: &str) -> Option<Policy> {
        match self {
            PolicySource::File(path) => {
                std::fs::read_to_string(path).ok().and_then(|t| Policy::parse(&t).ok())
            }
            PolicySource::BaseRevision => read_policy_file(repo, Some(base)).ok(),
        }
    }
}

fn from_base_revision(repo: &Path, base: &Render, head: &Render) -> Result<(Policy, String, Vec<Alert>)> {
    let at = |render: &Render| -> Result<Option<String>> {
        match &render.revision {
            Some(commit) => git::show_file(repo, commit, POLICY_FILE),
            None => Ok(None),
        }
    };
    let base_text = at(base)?;
    let head_text = at(head)?;
    let mut alerts = Vec::new();
    let (policy, source) = match &base_text {
        None => (Policy::default(), "built-in defaults".to_string()),
        Some(text) => match Policy::parse(text) {
            Ok(policy) => {
                alerts.extend(left_out(&policy, &format!("{POLICY_FILE} at base")));
                (policy, format!("{POLICY_FILE} at base"))
            }
            Err(e) => {
                alerts.extend(Policy::default().general_alert(
                    "policy-invalid",
                    format!("{POLICY_FILE} at base is invalid ({e}); the built-in defaults apply"),
                ));
                (Policy::default(), "built-in defaults (base policy invalid)".to_string())
            }
        },
    };
    if head_text != base_text {
        alerts.extend(policy.general_alert(
            "policy-changed",
            format!(
                "this pull request changes {POLICY_FILE}: the change takes effect after the merge; this plan \
                 uses the base revision's policy"
            ),
        ));
    }
    Ok((policy, source, alerts))
}

/// A `policy-invalid` warning for each part of the policy file that was left out (a typo).
fn left_out(policy: &Policy, file: &str) -> Vec<Alert> {
    policy
        .warnings
        .iter()
        .filter_map(|warning| policy.general_alert("policy-invalid", format!("{file}: {warning}")))
        .collect()
}
