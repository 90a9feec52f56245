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
    alerts.extend(other_branch_than_tracked(request, policy, base, head));
    alerts
}

/// A root Application that tracks a branch of this repository other than the one the plan
/// merges into: Argo CD syncs that branch, so the merge reaches the cluster only once that
/// branch holds it. Said, with the base to plan against instead.
fn other_branch_than_tracked(request: &Request, policy: &Policy, base: &Render, head: &Render) -> Vec<Alert> {
    use crate::argocd::revision::{resolve, Ref, Resolved};
    let roots: Vec<&crate::render::Cluster> =
        head.clusters.iter().filter(|c| c.found_by == crate::render::RootKind::ArgoCd).collect();
    if roots.is_empty() {
        return Vec::new();
    }
    // A base given as a commit names no branch to compare.
    let Some(merged_into) = crate::git::branch_of(&request.repo, &request.base) else { return Vec::new() };
    let ours: BTreeSet<String> = crate::git::remote_urls(&request.repo)
        .iter()
        .chain(&request.render.repo_urls)
        .map(|u| crate::argocd::normalize_repo_url(u))
        .collect();
    let refs: Vec<Ref> = crate::git::refs(&request.repo)
        .unwrap_or_default()
        .into_iter()
        .map(|(name, commit)| Ref { name, commit })
        .collect();
    let tracked_elsewhere = |revision: Option<&str>| match resolve(revision, Some(&merged_into), &refs) {
        // A branch whose tip is a commit planned reads what the plan read.
        Resolved::Ref { name, commit }
            if (name.starts_with("refs/heads/") || name.starts_with("refs/remotes/"))
                && [&base.revision, &head.revision]
                    .iter()
                    .all(|planned| planned.as_deref() != Some(commit.as_str())) =>
        {
            revision.map(|r| r.trim().trim_start_matches("refs/heads/").to_string())
        }
        _ => None,
    };
    roots
        .into_iter()
        .filter_map(|cluster| {
            let app = cluster.root_kustomization()?.argocd.as_ref()?.application.as_ref()?;
            let branch = app
                .sources
                .iter()
                .filter(|s| ours.contains(&crate::argocd::normalize_repo_url(&s.repo_url)))
                .find_map(|s| tracked_elsewhere(s.target_revision.as_deref()))?;
            policy.alert(
                "tracked-branch-differs",
                &cluster.name,
                Some(cluster.root.to_string()),
                format!(
                    "root Application {} tracks branch '{branch}' (targetRevision), and this plan merges into \
                     '{merged_into}': Argo CD syncs what '{branch}' holds, so this merge reaches the cluster only \
                     once '{branch}' has it; plan with --base {branch} to see what merging there changes",
                    cluster.root
                ),
                Vec::new(),
            )
        })
        .collect()
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
