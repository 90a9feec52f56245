//! What Kubernetes deletes along with a deletion: everything in a Namespace, the instances of a
//! CRD, the volume of a claim reclaimed with `Delete`. Counted in the live cluster when one was
//! read, else what the repository's renders hold; never both, so nothing is counted twice.

use super::{Action, BlastRadius, Change, KustomizationPlan};
use crate::cluster::DataLoss;
use crate::flux::ObjectId;
use crate::render::Render;
use std::collections::{BTreeMap, BTreeSet};

/// Objects listed by name before "and N more".
const MAX_NAMED: usize = 10;

/// Fills in `takes_with_it` for every deleted Namespace, CRD and claim.
pub fn annotate(
    plans: &mut [KustomizationPlan],
    base: &Render,
    head: &Render,
    radius: &BTreeMap<String, BlastRadius>,
) {
    let deleted: BTreeSet<(String, String)> = plans
        .iter()
        .flat_map(|p| p.changes.iter().map(move |c| (p, c)))
        .filter(|(_, c)| c.action == Action::Delete)
        .map(|(p, c)| (p.cluster.clone(), c.id.clone()))
        .collect();
    for plan in plans.iter_mut() {
        let live = radius.get(&plan.cluster);
        let cluster = plan.cluster.clone();
        for change in plan.changes.iter_mut().filter(|c| c.action == Action::Delete) {
            let swept = || {
                swept_with(change, &cluster, base, head)
                    .into_iter()
                    .filter(|id| !deleted.contains(&(cluster.clone(), id.to_string())))
                    .collect::<Vec<_>>()
            };
            change.takes_with_it = match (change.kind.as_str(), change.id.ends_with("__Namespace")) {
                ("Namespace", true) => namespace_contents(change, live, swept()),
                ("CustomResourceDefinition", _) => custom_resources(change, live, swept()),
                _ => Vec::new(),
            };
            if let Some(live) = live {
                change.takes_with_it.extend(lost_data(change, live));
            }
        }
    }
}

fn namespace_contents(change: &Change, live: Option<&BlastRadius>, swept: Vec<ObjectId>) -> Vec<String> {
    if let Some(counts) = live.and_then(|r| r.namespaces.get(&change.name)) {
        let total: usize = counts.values().sum();
        if total == 0 {
            return vec!["nothing else: the cluster holds no other object in it".into()];
        }
        let kinds: Vec<String> = counts.iter().map(|(kind, n)| format!("{n} {kind}")).collect();
        let total = crate::words::count(total, "object", "objects");
        return vec![format!("everything in it: {total} in the cluster ({})", kinds.join(", "))];
    }
    vec![match swept.is_empty() {
        true => "everything in it (not counted: plan against the live cluster with --kube to count it)"
            .to_string(),
        false => format!(
            "everything in it: {} the repository puts there ({}), and whatever else the cluster holds there \
             (plan against the live cluster with --kube to count it)",
            crate::words::count(swept.len(), "more object", "more objects"),
            named(&swept)
        ),
    }]
}

fn custom_resources(change: &Change, live: Option<&BlastRadius>, swept: Vec<ObjectId>) -> Vec<String> {
    if let Some(n) = live.and_then(|r| r.custom_resources.get(&change.name)) {
        return vec![match n {
            1 => "its 1 custom resource in the cluster".to_string(),
            n => format!("all {n} of its custom resources in the cluster"),
        }];
    }
    vec![match swept.is_empty() {
        true => "every custom resource of it (not counted: plan against the live cluster with --kube to count \
                 them)"
            .to_string(),
        false => format!(
            "every custom resource of it: {} the repository holds ({}), and whatever others the cluster holds \
             (plan against the live cluster with --kube to count them)",
            swept.len(),
            named(&swept)
        ),
    }]
}

/// Claims whose volume goes with them: deleted directly, or inside a deleted Namespace.
fn lost_data(change: &Change, live: &BlastRadius) -> Vec<String> {
    lost_with(change, live).map(|loss| format!("the data of {loss}")).collect()
}

/// The claims whose data goes with this deletion: the claim itself, or every claim in a
/// deleted Namespace.
pub fn lost_with<'r>(change: &Change, live: &'r BlastRadius) -> impl Iterator<Item = &'r DataLoss> {
    let (kind, namespace, name) = (change.kind.clone(), change.namespace.clone(), change.name.clone());
    live.data_loss.iter().filter(move |loss| match kind.as_str() {
        "PersistentVolumeClaim" => loss.namespace == namespace && loss.claim == name,
        "Namespace" => loss.namespace == name,
        _ => false,
    })
}

fn named(ids: &[ObjectId]) -> String {
    let mut names: Vec<String> = ids.iter().take(MAX_NAMED).map(ObjectId::display_name).collect();
    if ids.len() > MAX_NAMED {
        names.push(format!("and {} more", ids.len() - MAX_NAMED));
    }
    names.join(", ")
}

/// Objects either render holds in a deleted Namespace, or of a deleted CRD's kind.
pub fn swept_with(change: &Change, cluster: &str, base: &Render, head: &Render) -> BTreeSet<ObjectId> {
    let objects = || [base, head].into_iter().flat_map(|r| r.objects_of(cluster));
    let matches: Box<dyn Fn(&ObjectId) -> bool> = match change.kind.as_str() {
        "Namespace" => Box::new(|id: &ObjectId| id.namespace == change.name),
        "CustomResourceDefinition" => match crd_kind(base, head, cluster, &change.id) {
            Some((group, kind)) => Box::new(move |id: &ObjectId| id.group == group && id.kind == kind),
            None => return BTreeSet::new(),
        },
        _ => return BTreeSet::new(),
    };
    objects().filter_map(|o| o.id.clone()).filter(|id| matches(id)).collect()
}

/// The (group, kind) a deleted CRD defines, from whichever render holds its manifest.
pub fn crd_kind(base: &Render, head: &Render, cluster: &str, id: &str) -> Option<(String, String)> {
    [base, head]
        .into_iter()
        .find_map(|r| r.object(cluster, id))
        .and_then(|o| crate::flux::scope::crd_defines(&o.object))
}
