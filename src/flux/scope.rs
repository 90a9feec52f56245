//! Which kinds are cluster-scoped: the inventory id of a cluster-scoped object has no namespace,
//! whatever its manifest says.

use std::collections::BTreeMap;

mod catalogue;
use catalogue::CATALOGUE;

/// Built-in cluster-scoped kinds, as (group, kind).
const BUILTIN_CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("policy", "PodSecurityPolicy"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("storagemigration.k8s.io", "StorageVersionMigration"),
    ("internal.apiserver.k8s.io", "StorageVersion"),
    ("authentication.k8s.io", "TokenReview"),
    ("authentication.k8s.io", "SelfSubjectReview"),
    ("authorization.k8s.io", "SubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectRulesReview"),
];

/// Built-in namespaced groups: any kind in them that is not listed above is namespaced.
const BUILTIN_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "storage.k8s.io",
    "resource.k8s.io",
];

/// True for API groups Kubernetes itself serves (not defined by CRDs).
pub fn is_builtin_group(group: &str) -> bool {
    BUILTIN_GROUPS.contains(&group) || group.ends_with(".k8s.io") || group == "v1"
}

/// The (group, kind) a CustomResourceDefinition manifest defines.
pub fn crd_defines(crd: &serde_json::Value) -> Option<(String, String)> {
    let spec = &crd["spec"];
    Some((spec["group"].as_str()?.to_string(), spec["names"]["kind"].as_str()?.to_string()))
}

/// Scope of an object kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
    /// Neither built in nor defined by a known CRD.
    Unknown,
}

/// Scope knowledge, most trusted first: the built-in kinds, what the cluster serves (discovery or
/// a snapshot), CRDs in the render, scopes the repository declares (`crdScopes` in
/// `.fluxplan.yaml`), then the catalogue of widely used CRDs.
#[derive(Debug, Clone, Default)]
pub struct ScopeMap {
    served: BTreeMap<(String, String), Scope>,
    rendered: BTreeMap<(String, String), Scope>,
    declared: BTreeMap<(String, String), Scope>,
}

impl ScopeMap {
    /// Records a CustomResourceDefinition manifest of the render (ignored when it is not one).
    pub fn learn_crd(&mut self, crd: &serde_json::Value) {
        let Some(kind) = crd_defines(crd) else { return };
        let scope = match crd["spec"]["scope"].as_str() {
            Some("Cluster") => Scope::Cluster,
            _ => Scope::Namespaced,
        };
        self.rendered.insert(kind, scope);
    }

    /// Records the scope the cluster serves a kind with (a cluster snapshot, discovery).
    pub fn learn(&mut self, group: &str, kind: &str, scope: Scope) {
        self.served.insert((group.to_string(), kind.to_string()), scope);
    }

    /// Records a scope the repository declares for a kind.
    pub fn declare(&mut self, group: &str, kind: &str, scope: Scope) {
        self.declared.insert((group.to_string(), kind.to_string()), scope);
    }

    pub fn scope_of(&self, group: &str, kind: &str) -> Scope {
        if BUILTIN_CLUSTER_SCOPED.contains(&(group, kind)) {
            return Scope::Cluster;
        }
        let key = (group.to_string(), kind.to_string());
        for known in [&self.served, &self.rendered, &self.declared] {
            if let Some(scope) = known.get(&key) {
                return *scope;
            }
        }
        if let Some((_, _, scope)) = CATALOGUE.iter().find(|(g, k, _)| *g == group && *k == kind) {
            return *scope;
        }
        // Every Flux kind (Kustomization, GitRepository, HelmRelease, ...) is namespaced.
        if BUILTIN_GROUPS.contains(&group)
            || group.ends_with(".toolkit.fluxcd.io")
            || group == super::artifact_generator::EXTENSIONS_GROUP
        {
            return Scope::Namespaced;
        }
        Scope::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn knows_builtin_scopes() {
        let map = ScopeMap::default();
        assert_eq!(map.scope_of("", "Namespace"), Scope::Cluster);
        assert_eq!(map.scope_of("apps", "Deployment"), Scope::Namespaced);
        assert_eq!(map.scope_of("example.com", "Widget"), Scope::Unknown);
    }

    #[test]
    fn the_cluster_beats_the_render_which_beats_declarations_which_beat_the_catalogue() {
        let mut map = ScopeMap::default();
        assert_eq!(map.scope_of("cert-manager.io", "ClusterIssuer"), Scope::Cluster, "catalogue");
        map.declare("cert-manager.io", "ClusterIssuer", Scope::Namespaced);
        assert_eq!(map.scope_of("cert-manager.io", "ClusterIssuer"), Scope::Namespaced, "declared");
        map.learn_crd(&json!({"spec": {"group": "cert-manager.io", "scope": "Cluster", "names": {"kind": "ClusterIssuer"}}}));
        assert_eq!(map.scope_of("cert-manager.io", "ClusterIssuer"), Scope::Cluster, "rendered CRD");
        map.learn("cert-manager.io", "ClusterIssuer", Scope::Namespaced);
        assert_eq!(map.scope_of("cert-manager.io", "ClusterIssuer"), Scope::Namespaced, "served");
        // The catalogue never overrides a built-in kind.
        map.learn("", "Namespace", Scope::Namespaced);
        assert_eq!(map.scope_of("", "Namespace"), Scope::Cluster);
    }

    #[test]
    fn learns_scope_from_crd() {
        let mut map = ScopeMap::default();
        map.learn_crd(
            &json!({"spec": {"group": "example.com", "scope": "Cluster", "names": {"kind": "Widget"}}}),
        );
        assert_eq!(map.scope_of("example.com", "Widget"), Scope::Cluster);
    }
}
