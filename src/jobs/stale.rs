//! Stale plans on open pull requests: a re-plan of a head whose plan was already posted says,
//! when it differs, what changed under it (the base branch moved, or the cluster changed), so
//! reviewers know why the plan they read is not the one shown now.

use super::worker::short;
use crate::plan::Plan;
use crate::store::RunRow;

/// The "plan changed since the last review" line, when `plan` (digest `digest`) differs from the
/// plan last posted for the same head.
pub(super) fn changed_line(
    previous: Option<&RunRow>,
    plan: &Plan,
    digest: &str,
    base_ref: &str,
) -> Option<String> {
    let previous = previous?;
    if previous.plan_digest.as_deref() == Some(digest) || previous.plan_digest.is_none() {
        return None;
    }
    let reason = match (&previous.base_sha, &plan.base.commit) {
        (Some(before), Some(now)) if before != now => format!(
            "the base branch {} moved from {} to {}",
            crate::report::escape(base_ref),
            short(before),
            short(now)
        ),
        _ => {
            "what the cluster holds changed (its inventories or live objects are not what the last plan read)"
                .into()
        }
    };
    let verdict = match previous.verdict.as_deref() {
        Some(before) if before != plan.verdict.as_str() => {
            format!(" (verdict {} → {})", crate::report::escape(before), plan.verdict.as_str())
        }
        _ => String::new(),
    };
    Some(format!(
        "\n🔄 **The plan changed since the last one posted for {}** because {reason}{verdict}: review it again.\n",
        short(&previous.head_sha)
    ))
}
