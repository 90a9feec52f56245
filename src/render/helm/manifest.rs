//! What `helm template` prints, split as Helm stores a release: the manifest (the objects an
//! install or upgrade applies and an upgrade prunes), hooks (run around it, never in the
//! manifest) and test hooks (run only by `helm test`, never by helm-controller's install).

use serde_json::Value;

/// The annotation that makes an object a hook.
pub const HOOK_ANNOTATION: &str = "helm.sh/hook";
/// The annotation that keeps an object when its release no longer renders it.
pub const RESOURCE_POLICY_ANNOTATION: &str = "helm.sh/resource-policy";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Release {
    /// The objects of the release's manifest, in Helm's order.
    pub objects: Vec<Value>,
    /// Hooks other than tests, with their phases (`pre-install,pre-upgrade`).
    pub hooks: Vec<(String, Value)>,
    /// Test hooks: listed nowhere in a plan, counted.
    pub tests: usize,
}

/// Splits `helm template` output (already parsed) into manifest, hooks and tests.
pub fn split_release(documents: Vec<Value>) -> Release {
    let mut release = Release::default();
    for document in documents.into_iter().filter(|d| d.is_object()) {
        match hook_phases(&document) {
            None => release.objects.push(document),
            Some(phases) if phases.split(',').any(|p| p.trim().starts_with("test")) => release.tests += 1,
            Some(phases) => release.hooks.push((phases, document)),
        }
    }
    release
}

fn hook_phases(object: &Value) -> Option<String> {
    object["metadata"]["annotations"][HOOK_ANNOTATION].as_str().map(str::to_string)
}

/// True when the object stays installed after its release stops rendering it, or is uninstalled.
pub fn is_kept(object: &Value) -> bool {
    object["metadata"]["annotations"][RESOURCE_POLICY_ANNOTATION].as_str() == Some("keep")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn annotated(name: &str, annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations}})
    }

    #[test]
    fn hooks_and_tests_are_not_part_of_the_manifest() {
        let release = split_release(vec![
            annotated("app", json!({})),
            annotated("migrate", json!({HOOK_ANNOTATION: "pre-install,pre-upgrade"})),
            annotated("smoke", json!({HOOK_ANNOTATION: "test"})),
            annotated("legacy-smoke", json!({HOOK_ANNOTATION: "test-success"})),
            json!(null),
        ]);
        assert_eq!(release.objects, vec![annotated("app", json!({}))]);
        assert_eq!(release.hooks.len(), 1);
        assert_eq!(release.hooks[0].0, "pre-install,pre-upgrade");
        assert_eq!(release.tests, 2);
    }

    #[test]
    fn only_keep_keeps() {
        assert!(is_kept(&annotated("a", json!({RESOURCE_POLICY_ANNOTATION: "keep"}))));
        assert!(!is_kept(&annotated("a", json!({RESOURCE_POLICY_ANNOTATION: "delete"}))));
        assert!(!is_kept(&annotated("a", json!({}))));
    }
}
