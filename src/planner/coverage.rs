//! What the request covers and what it does not: a repository with nothing to plan, roots no
//! cluster in the clusters file stands for, roots fluxplan had to assume, a repository rendered
//! from a subdirectory whose paths are read from the top.

use super::{Clusters, Request};
use crate::cluster::snapshot::ClusterSnapshot;
use crate::plan::{Alert, Policy};
use crate::render::{repo_root, Render};
use std::collections::BTreeSet;

/// The failure of a plan rendered from a directory below the repository's top, whose paths Flux
/// reads from the top (see `repo_root::rendered_below_top`).
pub fn rendered_below_top(request: &Request, base: &Render, head: &Render) -> Option<String> {
    repo_root::rendered_below_top(&request.repo, Some(&request.head), head)
        .or_else(|| repo_root::rendered_below_top(&request.repo, base.revision.as_deref(), base))
}

/// The failure of a plan whose revisions both hold no cluster.
pub fn nothing_to_plan(request: &Request, head: &Render) -> String {
    let shown = request.repo_name.clone().unwrap_or_else(|| request.repo.display().to_string());
    repo_root::nothing_found(&request.repo, &shown, Some(&request.head), head)
}

/// Warnings about what the request leaves uncovered.
pub fn alerts(
    request: &Request,
    listed_roots: &BTreeSet<String>,
    snapshots: &[ClusterSnapshot],
    policy: &Policy,
    base: &Render,
    head: &Render,
) -> Vec<Alert> {
    let mut alerts = Vec::new();
    let roots: BTreeSet<&str> = base.clusters.iter().chain(&head.clusters).map(|c| c.name.as_str()).collect();
    if let Clusters::Snapshot(file) = &request.clusters {
        // A snapshot that names its cluster (`fluxplan snapshot --cluster`) describes that one only.
        for root in roots.iter().filter(|root| !snapshots.iter().any(|s| s.applies_to(root))) {
            alerts.extend(policy.alert(
                "cluster-not-covered",
                root,
                None,
                format!(
                    "the cluster snapshot {} describes another cluster: cluster {root} is planned offline, the \
                     base render standing for its inventories; plan it with its own snapshot (--clusters maps \
                     each root to one)",
                    file.display()
                ),
                Vec::new(),
            ));
        }
    }
    if let Clusters::PerRoot { file, .. } = &request.clusters {
        for root in roots.into_iter().filter(|root| !listed_roots.contains(*root)) {
            alerts.extend(policy.alert(
                "cluster-not-covered",
                root,
                None,
                format!(
                    "cluster {root} is not in the clusters file {}: it is planned offline, the base render \
                     standing for its inventories; add `{root}:` with a `context` or a `snapshot` to the file",
                    file.display()
                ),
                Vec::new(),
            ));
        }
    }
    alerts.extend(assumed_roots(policy, base, head));
    alerts
}

/// A cluster whose root fluxplan took by the fallback: the plan says so, and how to declare it.
/// Head's root when head has the cluster, else base's; never a phantom (a child one side no
/// longer includes).
fn assumed_roots(policy: &Policy, base: &Render, head: &Render) -> Vec<Alert> {
    let (base, head) = crate::plan::without_phantom_roots(base, head);
    let base_only = base.clusters.iter().filter(|b| head.clusters.iter().all(|h| h.name != b.name));
    head.clusters
        .iter()
        .chain(base_only)
        .filter_map(|cluster| {
            let message = crate::render::roots::assumed(cluster)?;
            policy.alert("roots-assumed", &cluster.name, Some(cluster.root.to_string()), message, Vec::new())
        })
        .collect()
}
