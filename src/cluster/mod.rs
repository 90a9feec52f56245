//! Read-only knowledge of a cluster. For now: the snapshot file, and the values that
//! `postBuild.substituteFrom` reads.

pub mod helm_storage;
pub mod kube;
pub mod removed_apis;
pub mod rollout;
pub mod snapshot;

use std::collections::BTreeMap;

/// The answer to "what does ConfigMap/Secret ns/name hold?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Found(BTreeMap<String, String>),
    NotFound,
    /// Only the cluster knows (offline, or Secret values left out of a snapshot).
    Unknown,
}

/// Where substitution values come from.
pub trait SubstitutionSource: Send + Sync {
    fn lookup(&self, kind: &str, namespace: &str, name: &str) -> Lookup;

    /// True when the Secret `namespace/name` is not read for a Kustomization's `substituteFrom`
    /// (a live cluster reads only those its own Flux objects read).
    fn substitution_secret_refused(&self, _namespace: &str, _name: &str) -> bool {
        false
    }

    /// Why the Secret `namespace/name` is not read for a HelmRelease's values (`None`: it may be).
    /// A snapshot holds only the Secrets the cluster's Flux objects read anyway.
    fn values_secret_refused(&self, _namespace: &str, _name: &str) -> Option<String> {
        None
    }

    /// Argo CD's repository and credential-template Secrets, from its namespace in a live cluster
    /// (never from what a render holds: a pull request could write its own); `Err` says why only
    /// the cluster knows them.
    fn argocd_repository_secrets(
        &self,
    ) -> Result<std::sync::Arc<Vec<crate::argocd::repository_credentials::RepositorySecret>>, String> {
        Err("Argo CD's repository credentials are Secrets only the live cluster holds (plan with a cluster and \
             --read-secrets)"
            .into())
    }

    /// The AppProjects of Argo CD's namespace in a live cluster; `None` when there is none to
    /// read (offline, a snapshot): projects are then not checked. `Err` says why they could not
    /// be read.
    fn argocd_projects(&self) -> Option<Result<std::sync::Arc<crate::argocd::project::AppProjects>, String>> {
        None
    }
}

/// No cluster: every value is unknown.
pub struct Offline;

impl SubstitutionSource for Offline {
    fn lookup(&self, _: &str, _: &str, _: &str) -> Lookup {
        Lookup::Unknown
    }
}

/// What Kubernetes deletes along with what the plan deletes.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct BlastRadius {
    /// Namespace → kind → number of objects in it.
    pub namespaces: BTreeMap<String, BTreeMap<String, usize>>,
    /// CRD name → number of its custom resources.
    pub custom_resources: BTreeMap<String, usize>,
    /// Claims whose data is deleted with them.
    pub data_loss: Vec<DataLoss>,
    pub warnings: Vec<String>,
}

/// A claim whose volume Kubernetes deletes with it (reclaim policy `Delete`): its data is lost.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema)]
pub struct DataLoss {
    pub namespace: String,
    pub claim: String,
    pub volume: String,
}

impl std::fmt::Display for DataLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "claim {}/{}: its volume {} is reclaimed with Delete",
            self.namespace, self.claim, self.volume
        )
    }
}
