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
    let before = generation(previous).unwrap_or(plan.generation);
    let reason = match (&previous.base_sha, &plan.base.commit) {
        _ if before < plan.generation => format!(
            "fluxplan was upgraded and plans the same commits more truly now (generation {before} → {})",
            plan.generation
        ),
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

/// The `generation` of the plan a run holds (plans before the field existed are 1); `None`
/// when the run holds no plan.
pub(super) fn generation(run: &RunRow) -> Option<u64> {
    // Only the one field is read: the rest of a large plan is skipped, not built.
    #[derive(serde::Deserialize)]
    struct Generation {
        generation: Option<u64>,
    }
    let plan: Generation = serde_json::from_str(run.plan_json.as_deref()?).ok()?;
    Some(plan.generation.unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Revision;

    fn plan(base_commit: &str) -> Plan {
        let revision = |commit: &str| Revision { rev: "refs/heads/main".into(), commit: Some(commit.into()) };
        Plan::failed(revision(base_commit), revision("h"), "boom".into())
    }

    fn previous(base_sha: &str, digest: &str) -> RunRow {
        RunRow {
            id: 1,
            job_id: None,
            forge: "github".into(),
            repo: "acme/fleet".into(),
            pr_number: 1,
            base_ref: "main".into(),
            base_sha: Some(base_sha.into()),
            head_sha: "0123456789abcdef".into(),
            trigger: "pull-request".into(),
            status: "done".into(),
            verdict: Some("changes".into()),
            counts: None,
            alerts: None,
            timings: None,
            plan_json: None,
            comment: None,
            error: None,
            approved_by: None,
            created_at: 0,
            finished_at: Some(1),
            plan_digest: Some(digest.into()),
            page_token: None,
            version: 0,
            merge_sha: None,
            notes: None,
            prediction: None,
            followup: None,
            followup_outcome: None,
            web_url: None,
        }
    }

    #[test]
    fn a_changed_plan_says_why_and_an_unchanged_one_says_nothing() {
        let now = plan("bbbbbbbbbbbb");
        let digest = now.digest();
        assert_eq!(changed_line(None, &now, &digest, "main"), None, "a first plan");
        assert_eq!(changed_line(Some(&previous("aaaaaaaaaaaa", &digest)), &now, &digest, "main"), None);
        let moved = changed_line(Some(&previous("aaaaaaaaaaaa", "other")), &now, &digest, "ma<b>in").unwrap();
        assert!(moved.contains("The plan changed since the last one posted for 01234567"), "{moved}");
        assert!(moved.contains("the base branch ma&lt;b&gt;in moved from aaaaaaaa to bbbbbbbb"), "{moved}");
        assert!(moved.contains("(verdict changes → failed)"), "{moved}");
        let cluster = changed_line(Some(&previous("bbbbbbbbbbbb", "other")), &now, &digest, "main").unwrap();
        assert!(cluster.contains("what the cluster holds changed"), "{cluster}");
        let mut older = previous("bbbbbbbbbbbb", "other");
        older.plan_json = Some(r#"{"verdict": "changes"}"#.into());
        let upgraded = changed_line(Some(&older), &now, &digest, "main").unwrap();
        let expected = format!(
            "fluxplan was upgraded and plans the same commits more truly now (generation 1 → {})",
            crate::plan::GENERATION
        );
        assert!(upgraded.contains(&expected), "{upgraded}");
    }
}
