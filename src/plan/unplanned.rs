//! Every file a pull request changes is accounted for: reached by a unit fluxplan planned, read
//! by a unit it did not render (`external`: another source, a Helm, Jsonnet or plugin source),
//! or read by none. A change only external units read would otherwise plan "no changes": it is
//! a `warning` and the verdict is at least `changes`.

use super::{Alert, Policy};
use crate::argocd::reads::{covers, repo_path};
use crate::render::{Render, RenderedKustomization, Status, UnitKind};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A changed file no planned unit accounts for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct UnplannedChange {
    /// The repository path.
    pub file: String,
    /// The units not rendered that read it; empty when no unit reads it (a README).
    pub read_by: Vec<UnitRef>,
    /// Why a file under the path of a planned Kustomization is not read by it (an ignore rule, a
    /// name the generated kustomization skips).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A unit of a plan, by cluster, kind and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
pub struct UnitRef {
    pub cluster: String,
    pub kind: UnitKind,
    pub namespace: String,
    pub name: String,
}

impl UnitRef {
    fn label(&self) -> String {
        format!("{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// What a unit reads in this repository. A Flux unit reads files here only when its source is
/// rendered from this repository's files (this repository's GitRepository, a source a sync or
/// `.fluxplan.yaml` declares as it, its paths then under the directory the artifact holds). One
/// of another repository or of an OCI artifact or Bucket not declared as this repository reads
/// nothing here, whatever its path: a path names a directory of an artifact built elsewhere
/// (flux2-multi-tenancy's kyverno manifests at `./`, an upstream artifact's `./config`), and a
/// directory of this repository it shares a name with is a coincidence. A fleet whose CI pushes a
/// directory of it as an artifact declares that source (`sources:` with its `path`): then it is
/// rendered from here, and read here.
pub(super) fn reads(render: &Render, unit: &RenderedKustomization) -> Vec<String> {
    if let Some(argo) = &unit.argocd {
        return argo.reads.clone();
    }
    let key = format!("{}/{}", unit.source.namespace, unit.source.name);
    let Some(artifact) =
        render.this_repo_artifacts.get(&key).filter(|artifact| artifact.kinds.contains(&unit.source.kind))
    else {
        return Vec::new();
    };
    // The artifact's paths, as paths of this repository.
    let here = |path: &str| -> Option<String> {
        let path = repo_path(path)?;
        Some(match (artifact.dir.as_str(), path.as_str()) {
            ("", _) => path,
            (dir, "" | ".") => dir.to_string(),
            (dir, _) => format!("{dir}/{path}"),
        })
    };
    // A HelmRelease reads its chart and values files when they are in this repository.
    if let Some(helm) = &unit.helm {
        return if matches!(unit.source.kind.as_str(), "GitRepository" | "Bucket") {
            helm.reads.iter().filter_map(|path| here(path)).collect()
        } else {
            Vec::new()
        };
    }
    // A path substituted from Secrets is shown masked: it reads somewhere below what precedes the
    // first masked value.
    let path = match unit.path.find("(masked:") {
        Some(at) => &unit.path[..unit.path[..at].rfind('/').map_or(0, |slash| slash + 1)],
        None => unit.path.as_str(),
    };
    here(path).into_iter().collect()
}

/// The changed files that no planned unit accounts for, from both renders.
/// `symlinks`: the changed files that are symbolic links at head (exports leave them out: Flux
/// never archives them; Argo CD units render what they lead to).
pub fn account(
    changed: &[String],
    symlinks: &BTreeSet<String>,
    base: &Render,
    head: &Render,
) -> Vec<UnplannedChange> {
    let mut external: Vec<(UnitRef, Vec<String>)> = Vec::new();
    let mut argo_rendered: Vec<(UnitRef, Vec<String>)> = Vec::new();
    let mut reached: Vec<String> = Vec::new();
    let mut origins: BTreeSet<&str> = BTreeSet::new();
    for render in [base, head] {
        for (cluster, unit) in render.kustomizations() {
            let read = reads(render, unit);
            let reference = UnitRef {
                cluster: cluster.name.clone(),
                kind: unit.kind,
                namespace: unit.namespace.clone(),
                name: unit.name.clone(),
            };
            if unit.status == Status::External {
                external.push((reference, read));
            } else {
                if unit.argocd.is_some() {
                    argo_rendered.push((reference, read.clone()));
                }
                reached.extend(read);
            }
            origins.extend(unit.objects.iter().filter_map(|o| o.origin.as_deref()));
            origins.extend(unit.file.as_deref());
        }
    }
    let mut unplanned = Vec::new();
    for file in changed {
        let readers = |units: &[(UnitRef, Vec<String>)]| -> Vec<UnitRef> {
            units
                .iter()
                .filter(|(_, read)| read.iter().any(|r| covers(r, file)))
                .map(|(u, _)| u.clone())
                .collect()
        };
        let read_by: BTreeSet<UnitRef> = readers(&external).into_iter().collect();
        let mut why = head.not_read.get(file).or_else(|| base.not_read.get(file)).cloned();
        // A symlink: Argo CD's repo-server follows it (and fluxplan renders it as the repo-server
        // reads it); Flux never archives it.
        if symlinks.contains(file) && readers(&argo_rendered).is_empty() {
            why = Some("a symlink: Flux never archives symlinks, so it never reads it".to_string());
        }
        let read_by_builds = [base, head].iter().any(|r| r.read_by_builds.contains(file));
        let planned = origins.contains(file.as_str())
            || read_by_builds
            || (why.is_none() && reached.iter().any(|r| covers(r, file)));
        if read_by.is_empty() && planned {
            continue;
        }
        // Left out of the artifact by the source's ignore rules at base and at head (a pull
        // request cannot hide its own files by adding a rule), and under no path: Flux never
        // reads it, and it says nothing a reader needs (CI files, docs).
        if read_by.is_empty() && why.is_none() && [base, head].iter().all(|r| r.ignored.contains(file)) {
            continue;
        }
        unplanned.push(UnplannedChange { file: file.clone(), read_by: read_by.into_iter().collect(), why });
    }
    unplanned
}

/// One `unplanned-change` warning per unit not rendered whose files the pull request changes.
pub fn alerts(policy: &Policy, unplanned: &[UnplannedChange]) -> Vec<Alert> {
    let mut by_unit: BTreeMap<&UnitRef, Vec<&str>> = BTreeMap::new();
    for change in unplanned {
        for unit in &change.read_by {
            by_unit.entry(unit).or_default().push(&change.file);
        }
    }
    by_unit
        .into_iter()
        .filter_map(|(unit, files)| {
            let message = format!(
                "{} reads what fluxplan does not render and this pull request changes it: {}; what it applies \
                 after the merge is not in this plan: review those files yourself",
                unit.label(),
                files.join(", ")
            );
            let reference = Some(format!("{}/{}", unit.namespace, unit.name));
            policy.alert("unplanned-change", &unit.cluster, reference, message, Vec::new())
        })
        .collect()
}
