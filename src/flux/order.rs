//! The order the controller applies objects in (and prunes them in reverse): Namespaces and CRDs
//! first, then cluster-wide and configuration kinds, workloads, and custom resources last.

/// Kinds in apply order; anything else (custom resources) comes after them.
const APPLY_ORDER: &[&str] = &[
    "CustomResourceDefinition",
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// Position of a kind in apply order (custom resources last).
pub fn apply_rank(kind: &str) -> usize {
    APPLY_ORDER.iter().position(|k| *k == kind).unwrap_or(APPLY_ORDER.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_and_crds_come_first_custom_resources_last() {
        assert!(apply_rank("CustomResourceDefinition") < apply_rank("Namespace"));
        assert!(apply_rank("Namespace") < apply_rank("Deployment"));
        assert!(apply_rank("Deployment") < apply_rank("Widget"));
    }
}
