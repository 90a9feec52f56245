//! `api-removed`: an object the merge creates or updates in an API version the cluster does not
//! serve. Its apply fails, and with it the whole unit's apply: nothing of the unit reaches the
//! cluster until the manifest moves to a served version.

use super::{Action, Alert, KustomizationPlan, Policy};
use crate::cluster::removed_apis;
use crate::cluster::snapshot::ClusterSnapshot;
use crate::render::Render;
use std::collections::BTreeSet;

/// One alert per unit, naming every object in a version the cluster does not serve: by the
/// release named for the cluster (a read cluster's own version, else `--kube-version` or the
/// clusters file) and the upstream removals, or by the read cluster's discovery.
pub fn alerts(
    policy: &Policy,
    plans: &[KustomizationPlan],
    head: &Render,
    snapshots: &[&ClusterSnapshot],
) -> Vec<Alert> {
    let mut alerts = Vec::new();
    // Versions the head's own CRDs define are served once they are applied: once per cluster.
    let mut defined_in: std::collections::BTreeMap<&str, BTreeSet<String>> = Default::default();
    for plan in plans {
        if !plan.changes.iter().any(|c| matches!(c.action, Action::Create | Action::Update)) {
            continue;
        }
        let snapshot = snapshots.iter().copied().find(|s| s.applies_to(&plan.cluster));
        let version = snapshot
            .and_then(|s| s.kube_version.clone())
            .or_else(|| head.kube_versions.get(&plan.cluster).cloned());
        let minor = version.as_deref().and_then(removed_apis::minor_version);
        let served: BTreeSet<&str> =
            snapshot.map(|s| s.api_versions.iter().map(String::as_str).collect()).unwrap_or_default();
        let defined =
            defined_in.entry(plan.cluster.as_str()).or_insert_with(|| crd_versions(head, &plan.cluster));
        let Some(unit) = head.unit(&plan.cluster, &plan.unit_ref()) else { continue };
        // By id once: a unit of many objects is not searched once per change.
        let objects: std::collections::HashMap<String, &crate::render::RenderedObject> =
            unit.objects.iter().filter_map(|o| Some((o.id.as_ref()?.to_string(), o))).collect();
        let mut found = Vec::new();
        for change in plan.changes.iter().filter(|c| matches!(c.action, Action::Create | Action::Update)) {
            let Some(object) = objects.get(&change.id) else { continue };
            let api_version = object.object["apiVersion"].as_str().unwrap_or("");
            let kind = object.object["kind"].as_str().unwrap_or("");
            let why = match minor.and_then(|m| removed_apis::removed(api_version, kind, m)) {
                Some(removal) => Some(format!(
                    "{} {api_version}, which Kubernetes v{}.{} removed (the cluster runs {}; use {})",
                    change.display_name(),
                    removal.removed_in.0,
                    removal.removed_in.1,
                    version.as_deref().unwrap_or("?"),
                    removal.replacement
                )),
                None if !served.is_empty()
                    && !served.contains(api_version)
                    && !defined.contains(api_version) =>
                {
                    Some(format!("{} {api_version}, which the cluster does not serve", change.display_name()))
                }
                None => None,
            };
            if let Some(why) = why {
                found.push((change.id.clone(), why));
            }
        }
        if found.is_empty() {
            continue;
        }
        let message = format!(
            "{}: the API server refuses them, so {} applies nothing of this {} until they use a served version",
            found.iter().map(|(_, why)| why.as_str()).collect::<Vec<_>>().join("; "),
            plan.controller(),
            plan.kind.as_str()
        );
        let ids = found.into_iter().map(|(id, _)| id).collect();
        alerts.extend(policy.alert("api-removed", &plan.cluster, Some(plan.reference()), message, ids));
    }
    alerts
}

/// `group/version` of every version the head render's CustomResourceDefinitions serve in a cluster.
fn crd_versions<'r>(head: &'r Render, cluster: &'r str) -> BTreeSet<String> {
    head.objects_of(cluster)
        .map(|o| &o.object)
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .flat_map(|crd| {
            let group = crd["spec"]["group"].as_str().unwrap_or("").to_string();
            crd["spec"]["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|v| v["served"] != false)
                .filter_map(move |v| Some(format!("{group}/{}", v["name"].as_str()?)))
                .collect::<Vec<_>>()
        })
        .collect()
}
