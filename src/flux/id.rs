//! Inventory ids exactly as kustomize-controller writes them: `<namespace>_<name>_<group>_<kind>`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One object as the inventory names it. Cluster-scoped objects have an empty namespace; the
/// core API group is the empty string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectId {
    pub namespace: String,
    pub name: String,
    pub group: String,
    pub kind: String,
}

impl ObjectId {
    pub fn new(namespace: &str, name: &str, group: &str, kind: &str) -> Self {
        ObjectId {
            namespace: namespace.to_string(),
            name: name.to_string(),
            group: group.to_string(),
            kind: kind.to_string(),
        }
    }

    /// Parses an inventory id. Namespace is what precedes the first `_`, kind what follows the
    /// last, group what follows the last `_` of the rest; the remaining name has `__` turned
    /// back into `:` (RBAC names such as `system:controller`).
    pub fn parse(id: &str) -> Option<Self> {
        let (namespace, rest) = id.split_once('_')?;
        let (rest, kind) = rest.rsplit_once('_')?;
        let (name, group) = rest.rsplit_once('_')?;
        if name.is_empty() || kind.is_empty() {
            return None;
        }
        Some(ObjectId::new(namespace, &name.replace("__", ":"), group, kind))
    }

    /// `Kind namespace/name` (or `Kind name` when cluster-scoped), as people read it.
    pub fn display_name(&self) -> String {
        display_name(&self.kind, &self.namespace, &self.name)
    }
}

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
pub fn display_name(kind: &str, namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}_{}_{}", self.namespace, self.name.replace(':', "__"), self.group, self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_namespaced_core_object() {
        let id = ObjectId::new("default", "podinfo", "", "Service");
        assert_eq!(id.to_string(), "default_podinfo__Service");
    }

    #[test]
    fn formats_cluster_scoped_object() {
        let id = ObjectId::new("", "apps", "", "Namespace");
        assert_eq!(id.to_string(), "_apps__Namespace");
    }

    #[test]
    fn round_trips_rbac_names_with_colons() {
        let id = ObjectId::new("", "system:aggregate-to-edit", "rbac.authorization.k8s.io", "ClusterRole");
        let text = id.to_string();
        assert_eq!(text, "_system__aggregate-to-edit_rbac.authorization.k8s.io_ClusterRole");
        assert_eq!(ObjectId::parse(&text), Some(id));
    }

    #[test]
    fn parses_names_containing_underscores() {
        let id = ObjectId::parse("apps_my_app_apps_Deployment").unwrap();
        assert_eq!(id, ObjectId::new("apps", "my_app", "apps", "Deployment"));
    }

    #[test]
    fn rejects_malformed_ids() {
        assert_eq!(ObjectId::parse("nonsense"), None);
        assert_eq!(ObjectId::parse("a_b"), None);
    }
}
