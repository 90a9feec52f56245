//! What deleting a StatefulSet or a claim does to data: Kubernetes keeps the claims a
//! StatefulSet's `volumeClaimTemplates` made unless `persistentVolumeClaimRetentionPolicy.whenDeleted`
//! is `Delete`, a StatefulSet created in its place under another name starts its Pods on new,
//! empty claims of its own, and a claim created in place of a deleted one (renamed) starts empty.

use super::{Action, Change, KustomizationPlan};
use crate::render::Render;
use serde_json::Value;

/// One line per StatefulSet among `deletes` whose claims' data is lost or left behind, and per
/// claim renamed (one claim created in the namespace of a deleted one).
pub fn statefulset_losses(
    deletes: &[&Change],
    plans: &[KustomizationPlan],
    cluster: &str,
    base: &Render,
    head: &Render,
) -> Vec<String> {
    let created: Vec<&Change> = plans
        .iter()
        .filter(|p| p.cluster == cluster)
        .flat_map(|p| &p.changes)
        .filter(|c| c.action == Action::Create && c.kind == "StatefulSet")
        .collect();
    let mut losses = Vec::new();
    for deleted in deletes.iter().filter(|c| c.kind == "StatefulSet") {
        let Some(before) = base.object(cluster, &deleted.id) else { continue };
        let templates = claim_templates(&before.object);
        if templates.is_empty() {
            continue;
        }
        let claims = |statefulset: &str| {
            templates.iter().map(|t| format!("{t}-{statefulset}-N")).collect::<Vec<_>>().join(", ")
        };
        let deleted_with_it =
            before.object["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete";
        let fate = if deleted_with_it {
            "are deleted with it (persistentVolumeClaimRetentionPolicy.whenDeleted: Delete)"
        } else {
            "are left behind, no longer used"
        };
        // Another StatefulSet in its namespace, created with a claim template of the same name:
        // its replacement.
        // Not the same StatefulSet created again (a Helm release reinstalled): its Pods come back
        // on the same claims.
        let replacement = created.iter().find(|c| {
            c.id != deleted.id
                && c.namespace == deleted.namespace
                && head
                    .object(cluster, &c.id)
                    .is_some_and(|o| claim_templates(&o.object).iter().any(|t| templates.contains(t)))
        });
        let line = match replacement {
            Some(new) => format!(
                "{} is replaced by {}, whose Pods start on new, empty claims ({}); the claims of {} ({}) {fate}",
                deleted.display_name(),
                new.display_name(),
                claims(&new.name),
                deleted.name,
                claims(&deleted.name)
            ),
            None if deleted_with_it => format!("{}: its claims ({}) {fate}", deleted.display_name(), claims(&deleted.name)),
            None => continue,
        };
        losses.push(line);
    }
    // A claim renamed: deleted, and another created in its namespace.
    for deleted in deletes.iter().filter(|c| c.kind == "PersistentVolumeClaim") {
        let created_claims: Vec<&Change> = plans
            .iter()
            .filter(|p| p.cluster == cluster)
            .flat_map(|p| &p.changes)
            .filter(|c| {
                c.action == Action::Create
                    && c.kind == "PersistentVolumeClaim"
                    && c.namespace == deleted.namespace
            })
            .collect();
        if let [new] = created_claims.as_slice() {
            losses.push(format!(
                "{} is replaced by {}, which starts empty: what the workload stored goes with the deleted claim",
                deleted.display_name(),
                new.display_name()
            ));
        }
    }
    losses
}

fn claim_templates(statefulset: &Value) -> Vec<String> {
    statefulset["spec"]["volumeClaimTemplates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}
