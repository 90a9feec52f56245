//! API versions Kubernetes has stopped serving, by the release that removed them, after the
//! upstream deprecation guide (kubernetes.io/docs/reference/using-api/deprecation-guide, the
//! "Removed APIs by release" sections). An object written with one of them is refused by a
//! cluster of that release or later.

/// One removal: `group/version` (`v1beta1` for the core group), the kinds it covered (every kind
/// of that version when empty), the release that removed it, and what to use instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removal {
    pub api_version: &'static str,
    pub kinds: &'static [&'static str],
    pub removed_in: (u32, u32),
    pub replacement: &'static str,
}

const fn removal(
    api_version: &'static str,
    kinds: &'static [&'static str],
    removed_in: (u32, u32),
    replacement: &'static str,
) -> Removal {
    Removal { api_version, kinds, removed_in, replacement }
}

const WORKLOADS: &[&str] = &["DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"];

pub const REMOVALS: &[Removal] = &[
    // v1.16
    removal("extensions/v1beta1", WORKLOADS, (1, 16), "apps/v1"),
    removal("apps/v1beta1", &[], (1, 16), "apps/v1"),
    removal("apps/v1beta2", &[], (1, 16), "apps/v1"),
    removal("extensions/v1beta1", &["NetworkPolicy"], (1, 16), "networking.k8s.io/v1"),
    removal(
        "extensions/v1beta1",
        &["PodSecurityPolicy"],
        (1, 16),
        "policy/v1beta1 (itself removed in v1.25)",
    ),
    // v1.22
    removal("admissionregistration.k8s.io/v1beta1", &[], (1, 22), "admissionregistration.k8s.io/v1"),
    removal("apiextensions.k8s.io/v1beta1", &[], (1, 22), "apiextensions.k8s.io/v1"),
    removal("apiregistration.k8s.io/v1beta1", &[], (1, 22), "apiregistration.k8s.io/v1"),
    removal("authentication.k8s.io/v1beta1", &[], (1, 22), "authentication.k8s.io/v1"),
    removal("authorization.k8s.io/v1beta1", &[], (1, 22), "authorization.k8s.io/v1"),
    removal("certificates.k8s.io/v1beta1", &[], (1, 22), "certificates.k8s.io/v1"),
    removal("coordination.k8s.io/v1beta1", &[], (1, 22), "coordination.k8s.io/v1"),
    removal("extensions/v1beta1", &["Ingress"], (1, 22), "networking.k8s.io/v1"),
    removal("networking.k8s.io/v1beta1", &["Ingress", "IngressClass"], (1, 22), "networking.k8s.io/v1"),
    removal("rbac.authorization.k8s.io/v1beta1", &[], (1, 22), "rbac.authorization.k8s.io/v1"),
    removal("scheduling.k8s.io/v1beta1", &[], (1, 22), "scheduling.k8s.io/v1"),
    removal(
        "storage.k8s.io/v1beta1",
        &["CSIDriver", "CSINode", "StorageClass", "VolumeAttachment"],
        (1, 22),
        "storage.k8s.io/v1",
    ),
    // v1.25
    removal("batch/v1beta1", &["CronJob"], (1, 25), "batch/v1"),
    removal("discovery.k8s.io/v1beta1", &["EndpointSlice"], (1, 25), "discovery.k8s.io/v1"),
    removal("events.k8s.io/v1beta1", &["Event"], (1, 25), "events.k8s.io/v1"),
    removal("autoscaling/v2beta1", &["HorizontalPodAutoscaler"], (1, 25), "autoscaling/v2"),
    removal("policy/v1beta1", &["PodDisruptionBudget"], (1, 25), "policy/v1"),
    removal("policy/v1beta1", &["PodSecurityPolicy"], (1, 25), "nothing: Pod Security Admission replaces it"),
    removal("node.k8s.io/v1beta1", &["RuntimeClass"], (1, 25), "node.k8s.io/v1"),
    // v1.26
    removal("flowcontrol.apiserver.k8s.io/v1beta1", &[], (1, 26), "flowcontrol.apiserver.k8s.io/v1"),
    removal("autoscaling/v2beta2", &["HorizontalPodAutoscaler"], (1, 26), "autoscaling/v2"),
    // v1.27
    removal("storage.k8s.io/v1beta1", &["CSIStorageCapacity"], (1, 27), "storage.k8s.io/v1"),
    // v1.29
    removal("flowcontrol.apiserver.k8s.io/v1beta2", &[], (1, 29), "flowcontrol.apiserver.k8s.io/v1"),
    // v1.32
    removal("flowcontrol.apiserver.k8s.io/v1beta3", &[], (1, 32), "flowcontrol.apiserver.k8s.io/v1"),
];

/// `(major, minor)` of a Kubernetes version as clusters and flags write it: `v1.33.2`, `1.33`,
/// `v1.30.4-eks-a737599`, `v1.29.1+k3s1`.
pub fn minor_version(version: &str) -> Option<(u32, u32)> {
    let version = version.trim().trim_start_matches('v');
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts.next()?.chars().take_while(char::is_ascii_digit).collect();
    Some((major, minor.parse().ok()?))
}

/// The removal that makes a cluster of `cluster` (major, minor) refuse `kind` in `api_version`.
pub fn removed(api_version: &str, kind: &str, cluster: (u32, u32)) -> Option<&'static Removal> {
    REMOVALS.iter().find(|r| {
        r.api_version == api_version
            && (r.kinds.is_empty() || r.kinds.contains(&kind))
            && cluster >= r.removed_in
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_as_clusters_report_them() {
        assert_eq!(minor_version("v1.33.2"), Some((1, 33)));
        assert_eq!(minor_version("1.29"), Some((1, 29)));
        assert_eq!(minor_version("v1.30.4-eks-a737599"), Some((1, 30)));
        assert_eq!(minor_version("v1.28+k3s1"), Some((1, 28)));
        assert_eq!(minor_version("latest"), None);
    }

    #[test]
    fn a_removed_version_is_refused_from_its_release_on() {
        let ingress = removed("extensions/v1beta1", "Ingress", (1, 33)).unwrap();
        assert_eq!((ingress.removed_in, ingress.replacement), ((1, 22), "networking.k8s.io/v1"));
        assert!(removed("extensions/v1beta1", "Ingress", (1, 21)).is_none(), "still served before 1.22");
        assert_eq!(removed("batch/v1beta1", "CronJob", (1, 25)).unwrap().removed_in, (1, 25));
        assert!(removed("batch/v1beta1", "CronJob", (1, 24)).is_none());
        // A group version removed whole covers every kind; a served version none.
        assert!(removed("rbac.authorization.k8s.io/v1beta1", "ClusterRoleBinding", (1, 22)).is_some());
        assert!(removed("networking.k8s.io/v1", "Ingress", (1, 33)).is_none());
        assert!(removed("apps/v1", "Deployment", (1, 33)).is_none());
        // extensions/v1beta1 went kind by kind.
        assert_eq!(removed("extensions/v1beta1", "Deployment", (1, 16)).unwrap().replacement, "apps/v1");
        assert!(removed("extensions/v1beta1", "Ingress", (1, 16)).is_none());
    }
}
