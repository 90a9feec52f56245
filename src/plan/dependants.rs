//! Kustomizations that stay but will fail to reconcile because of what this merge deletes: the
//! Kustomizations they depend on (`dependsOn`), the Namespaces their objects live in, the CRDs
//! their objects are instances of.

use super::{blast, causes, Action, Alert, KustomizationPlan, KustomizationStatus, Policy};
use crate::flux::{KustomizationRef, ObjectId};
use crate::render::Render;
use std::collections::{BTreeMap, BTreeSet};

/// One `dependency-deleted` warning per Kustomization that will fail to reconcile.
pub fn alerts(policy: &Policy, plans: &[KustomizationPlan], base: &Render, head: &Render) -> Vec<Alert> {
    let deleted_kustomizations: BTreeSet<(String, KustomizationRef)> =
        causes::deleted_kustomizations(plans).into_iter().collect();
    let mut namespaces = BTreeSet::new();
    let mut crds: BTreeMap<(String, (String, String)), String> = BTreeMap::new();
    for plan in plans {
        for change in plan.changes.iter().filter(|c| c.action == Action::Delete) {
            if change.id.ends_with("__Namespace") {
                namespaces.insert((plan.cluster.clone(), change.name.clone()));
            } else if change.kind == "CustomResourceDefinition" {
                if let Some(kind) = blast::crd_kind(base, head, &plan.cluster, &change.id) {
                    crds.insert((plan.cluster.clone(), kind), change.name.clone());
                }
            }
        }
    }
    let mut alerts = Vec::new();
    for plan in plans.iter().filter(|p| stays(p)) {
        let Some(k) = head.unit(&plan.cluster, &plan.unit_ref()) else { continue };
        let mut reasons = Vec::new();
        for dependency in depends_on(k.spec.as_ref().map(|s| &s.raw), &plan.namespace) {
            if deleted_kustomizations.contains(&(plan.cluster.clone(), dependency.clone())) {
                reasons.push(format!(
                    "it depends on Kustomization {dependency} (dependsOn), which this merge deletes"
                ));
            }
        }
        let ids: Vec<&ObjectId> = k.objects.iter().filter_map(|o| o.id.as_ref()).collect();
        let mut in_namespace: BTreeMap<&str, usize> = BTreeMap::new();
        let mut of_crd: BTreeMap<&str, usize> = BTreeMap::new();
        for id in &ids {
            if namespaces.contains(&(plan.cluster.clone(), id.namespace.clone())) {
                *in_namespace.entry(id.namespace.as_str()).or_default() += 1;
            }
            if let Some(crd) = crds.get(&(plan.cluster.clone(), (id.group.clone(), id.kind.clone()))) {
                *of_crd.entry(crd.as_str()).or_default() += 1;
            }
        }
        for (namespace, n) in in_namespace {
            reasons.push(format!(
                "it applies {} into Namespace {namespace}, which this merge deletes: its apply fails \
                 while the Namespace terminates and once it is gone",
                crate::words::count(n, "object", "objects")
            ));
        }
        for (crd, n) in of_crd {
            reasons.push(format!(
                "it applies {} of CustomResourceDefinition {crd}, which this merge deletes: \
                 their kind is no longer served",
                crate::words::count(n, "custom resource", "custom resources")
            ));
        }
        if !reasons.is_empty() {
            alerts.extend(policy.alert(
                "dependency-deleted",
                &plan.cluster,
                Some(plan.reference()),
                format!("will fail to reconcile: {}", reasons.join("; ")),
                Vec::new(),
            ));
        }
    }
    alerts
}

/// A Kustomization that still reconciles after the merge.
fn stays(plan: &KustomizationPlan) -> bool {
    matches!(
        plan.status,
        KustomizationStatus::Changed | KustomizationStatus::Unchanged | KustomizationStatus::Added
    )
}

/// `spec.dependsOn` of a Kustomization manifest; a dependency's namespace defaults to its own.
fn depends_on(raw: Option<&serde_json::Value>, namespace: &str) -> Vec<KustomizationRef> {
    raw.and_then(|r| r["spec"]["dependsOn"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|d| {
            Some(KustomizationRef {
                namespace: d["namespace"].as_str().unwrap_or(namespace).to_string(),
                name: d["name"].as_str()?.to_string(),
            })
        })
        .collect()
}
