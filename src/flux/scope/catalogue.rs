//! The scopes of widely used CRDs, as their projects define them (`spec.scope` of the
//! CustomResourceDefinition, or the kubebuilder marker of the Go type). Used only when neither
//! the cluster, the render nor the repository's `crdScopes` says: a kustomization's `namespace:`
//! stamps a namespace on kinds kustomize does not know, while the API server gives a cluster-
//! scoped object none, and its inventory id none.

use super::Scope::{self, Cluster, Namespaced};

pub const CATALOGUE: &[(&str, &str, Scope)] = &[
    // cert-manager
    ("cert-manager.io", "ClusterIssuer", Cluster), // cert-manager/cert-manager deploy/crds/cert-manager.io_clusterissuers.yaml
    ("cert-manager.io", "Issuer", Namespaced), // cert-manager/cert-manager deploy/crds/cert-manager.io_issuers.yaml
    ("cert-manager.io", "Certificate", Namespaced), // cert-manager/cert-manager deploy/crds/cert-manager.io_certificates.yaml
];
