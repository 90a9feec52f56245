//! The one interface through which the walk sees its engines: a unit in (a Kustomization or a
//! ResourceSet its parent applies), its record out (status, notes, the objects it applies). The
//! walk finds the units to render next among those objects; HelmReleases render after their
//! cluster's walk (`render/helm/`), as their values may come from anything the cluster applies.

use super::RenderedKustomization;
use crate::flux::{Kustomization, KustomizationRef};
use serde_json::Value;
use std::collections::BTreeSet;

/// Renders one kind of unit.
pub(super) trait Engine: Sync {
    /// What the engine renders (a Kustomization's spec, a ResourceSet as its parent applies it).
    type Unit;

    /// The unit's record, with the objects it applies. What a pull request wrote never makes it
    /// panic: a failure is the record's status and error.
    fn render(&self, node: &Node, unit: &Self::Unit) -> RenderedKustomization;
}

/// One unit waiting to be rendered: a Kustomization, or a ResourceSet.
#[derive(Clone)]
pub(super) struct Node {
    pub(super) cluster: usize,
    pub(super) cluster_name: String,
    /// Inline `substitute` variables whose values the parent substituted from Secrets.
    pub(super) inherited_secrets: BTreeSet<String>,
    /// The fields of its spec its parent substituted from Secrets (`spec.path`), when any but
    /// `postBuild.substitute`: it is not rendered, since what it renders would tell the values.
    pub(super) secret_spec: Option<String>,
    pub(super) unit: Pending,
    pub(super) parent: Option<KustomizationRef>,
    pub(super) file: Option<String>,
    pub(super) ancestors: Vec<KustomizationRef>,
    pub(super) is_root: bool,
    /// A root the Flux Operator generates: its FluxInstance's `kustomize.patches` (canonical
    /// JSON; empty when none).
    pub(super) instance_patches: String,
}

/// What a node renders.
#[derive(Clone)]
pub(super) enum Pending {
    Kustomization(Box<Kustomization>),
    ResourceSet(std::sync::Arc<PendingSet>),
}

/// A ResourceSet its parent applies.
pub(super) struct PendingSet {
    /// The manifest as the parent renders it (values from Secrets included).
    pub(super) manifest: Value,
    /// It holds values substituted from Secrets: its objects would show them.
    pub(super) holds_secret_values: bool,
    /// The input providers among the objects its parent applies (and its parent's parents').
    pub(super) providers: std::sync::Arc<Vec<Value>>,
    /// Some provider it may read holds values substituted from Secrets.
    pub(super) secret_providers: bool,
}

impl Node {
    pub(super) fn name(&self) -> String {
        match &self.unit {
            Pending::Kustomization(spec) => spec.name.clone(),
            Pending::ResourceSet(set) => set.manifest["metadata"]["name"].as_str().unwrap_or("").to_string(),
        }
    }
}
