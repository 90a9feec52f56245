//! The follow-up comment on a merged pull request: "applied as planned", or how the rollout
//! differed from the plan, with the Ready conditions. Everything from the cluster (names, ids,
//! revisions, the controller's messages) is escaped like the plan's text.

use super::escape;
use crate::flux::ObjectId;
use crate::plan::actual::{Followup, KustomizationResult, Outcome};
use std::fmt::Write;

/// Ids listed per kind of difference; the rest are counted.
const MAX_LISTED: usize = 20;
/// Characters of a controller message shown.
const MAX_MESSAGE: usize = 400;

/// The first line of run `run_id`'s follow-up comment (how a retry finds it posted).
pub fn marker(run_id: i64) -> String {
    format!("<!-- fluxplan-followup run={run_id} -->")
}

/// The comment for a complete follow-up, at most `limit` characters.
pub fn markdown(run_id: i64, followup: &Followup, notes: &[String], limit: usize) -> String {
    let outcome = followup.outcome.unwrap_or_else(|| followup.overall());
    let revision = short(&followup.revision);
    let mut out = format!("{}\n", marker(run_id));
    let headline = match outcome {
        Outcome::Exact => format!("✅ **fluxplan: applied as planned.** Every watched Kustomization reached {revision} and its inventory is what the plan said."),
        Outcome::Differs => format!("⚠️ **fluxplan: the rollout of {revision} differs from the plan.**"),
        Outcome::Failed => format!("❌ **fluxplan: a Kustomization failed to reconcile {revision}.**"),
        Outcome::Timeout => format!("⏱️ **fluxplan: not every Kustomization reached {revision} in time.**"),
    };
    let _ = writeln!(out, "{headline}\n");
    for note in notes {
        let _ = writeln!(out, "> {}\n", escape(note));
    }
    let _ = writeln!(out, "| Kustomization | Cluster | Result | Ready |\n|---|---|---|---|");
    for result in followup.results.values() {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            escape(&result.reference()),
            escape(if result.cluster.is_empty() { "-" } else { &result.cluster }),
            outcome_word(result.outcome),
            ready(result)
        );
    }
    for result in followup.results.values().filter(|r| r.outcome != Outcome::Exact) {
        let _ = writeln!(out, "\n**{}**", escape(&result.reference()));
        if let Some(revision) = &result.revision {
            let _ = writeln!(out, "- revision: {}", escape(revision));
        }
        if let Some(c) = result.ready.as_ref().filter(|c| !c.message.is_empty()) {
            let message: String = c.message.chars().take(MAX_MESSAGE).collect();
            let _ = writeln!(out, "- controller: {}", escape(&message));
        }
        list(&mut out, "predicted created, not in the inventory", &result.not_created);
        list(&mut out, "predicted deleted, still in the inventory (a missed prune)", &result.not_deleted);
        list(&mut out, "in the inventory, not predicted", &result.unexpected);
        list(&mut out, "predicted to stay, gone from the inventory", &result.missing);
        for note in &result.notes {
            let _ = writeln!(out, "- {}", escape(note));
        }
    }
    if out.chars().count() > limit {
        let mut cut: String = out.chars().take(limit.saturating_sub(80)).collect();
        cut.push_str("\n\n… (cut to the comment size limit; the run record holds every difference)\n");
        return cut;
    }
    out
}

fn list(out: &mut String, what: &str, ids: &[String]) {
    if ids.is_empty() {
        return;
    }
    let shown: Vec<String> = ids.iter().take(MAX_LISTED).map(|id| escape(&display(id))).collect();
    let more = ids.len().saturating_sub(MAX_LISTED);
    let tail = if more > 0 { format!(" (+{more} more)") } else { String::new() };
    let _ = writeln!(out, "- {what}: {}{tail}", shown.join(", "));
}

/// `Kind ns/name` for an inventory id, the id itself when it does not parse.
fn display(id: &str) -> String {
    ObjectId::parse(id).map(|o| o.display_name()).unwrap_or_else(|| id.to_string())
}

fn outcome_word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Exact => "as planned",
        Outcome::Differs => "differs",
        Outcome::Failed => "failed",
        Outcome::Timeout => "timed out",
    }
}

fn ready(result: &KustomizationResult) -> String {
    match &result.ready {
        Some(c) if c.reason.is_empty() => escape(&c.status),
        Some(c) => format!("{} ({})", escape(&c.status), escape(&c.reason)),
        None => "-".into(),
    }
}

fn short(sha: &str) -> String {
    escape(sha.get(..8).unwrap_or(sha))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::actual::{compare, Condition, Observed, PredictedKustomization};

    fn followup(observed: Observed) -> Followup {
        let predicted = PredictedKustomization {
            cluster: "prod".into(),
            namespace: "flux-system".into(),
            name: "apps<script>".into(),
            status: "changed".into(),
            desired: vec!["default_a__ConfigMap".into()],
            create: vec![],
            delete: vec!["default_@admin__ConfigMap".into()],
            orphan: vec![],
            unmanaged: vec![],
        };
        let mut followup = Followup::new("0123456789abcdef", vec![predicted.key()]);
        followup.record(&predicted.key(), compare(&predicted, &observed));
        followup
    }

    #[test]
    fn exact_says_applied_as_planned() {
        let f = followup(Observed::Applied {
            revision: "main@sha1:0123456789abcdef".into(),
            inventory: Some(vec!["default_a__ConfigMap".into()]),
            ready: Some(Condition {
                status: "True".into(),
                reason: "ReconciliationSucceeded".into(),
                message: String::new(),
            }),
        });
        let text = markdown(7, &f, &[], 65_000);
        assert!(text.starts_with("<!-- fluxplan-followup run=7 -->\n"));
        assert!(text.contains("applied as planned"), "{text}");
        assert!(!text.contains("<script>"), "cluster names are escaped: {text}");
    }

    #[test]
    fn differences_name_the_objects_escaped_and_the_controller_message() {
        let f = followup(Observed::Applied {
            revision: "main@sha1:0123456789abcdef".into(),
            inventory: Some(vec!["default_a__ConfigMap".into(), "default_@admin__ConfigMap".into()]),
            ready: None,
        });
        let text = markdown(7, &f, &["stale-plan: the base moved".into()], 65_000);
        assert!(text.contains("a missed prune"), "{text}");
        assert!(text.contains("ConfigMap default/@\u{200b}admin"), "mentions are defused: {text}");
        assert!(text.contains("> stale-plan: the base moved"), "{text}");
        let failed = followup(Observed::Failed {
            revision: "main@sha1:0123".into(),
            ready: Some(Condition {
                status: "False".into(),
                reason: "BuildFailed".into(),
                message: "[x](http://evil) failed".into(),
            }),
        });
        let text = markdown(7, &failed, &[], 65_000);
        assert!(text.contains("failed to reconcile") && text.contains("False (BuildFailed)"), "{text}");
        assert!(text.contains("\\[x\\](http://evil)"), "no links from the cluster: {text}");
        assert!(markdown(7, &failed, &[], 200).chars().count() <= 200);
    }
}
