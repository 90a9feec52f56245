//! What `helm template` prints, split as Helm stores a release: the manifest (the objects an
//! install or upgrade applies and an upgrade prunes), hooks (run around it, never in the
//! manifest) and test hooks (run only by `helm test`, never by helm-controller's install).

use serde_json::Value;

/// The annotation that makes an object a hook.
pub const HOOK_ANNOTATION: &str = "helm.sh/hook";
/// The annotation that keeps an object when its release no longer renders it.
pub const RESOURCE_POLICY_ANNOTATION: &str = "helm.sh/resource-policy";

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Release {
    /// The chart's `crds/` (when asked for): installed before the manifest, never upgraded,
    /// never deleted by Helm, and not post-rendered.
    pub crds: Vec<Value>,
    /// The objects of the release's manifest, in Helm's order.
    pub objects: Vec<Value>,
    /// Hooks other than tests, with their phases (`pre-install,pre-upgrade`).
    pub hooks: Vec<(String, Value)>,
    /// Test hooks: run only by `helm test`, listed nowhere in a plan (counted). Kept, as Helm 4
    /// post-renders them with the rest: a patch can make one part of the release.
    pub tests: Vec<Value>,
}

/// Splits what `helm template` prints into CRDs, manifest, hooks and tests. Each document follows
/// a `# Source: CHART/PATH` line; CRDs are those from a chart's (or a subchart's) `crds/`.
pub fn split_release(printed: &str) -> Result<Release, String> {
    let mut release = Release::default();
    for chunk in printed.split("\n---") {
        let from_crds = chunk
            .lines()
            .find_map(|line| line.strip_prefix("# Source: "))
            .is_some_and(|source| is_crd_file(source.trim()));
        for document in crate::yaml::parse_documents(chunk)?.into_iter().filter(|d| d.is_object()) {
            if from_crds {
                release.crds.push(document);
            } else {
                release.sort(document);
            }
        }
    }
    Ok(release)
}

impl Release {
    /// Puts a templated document where Helm puts it: the manifest, a hook, or a test (counted).
    pub fn sort(&mut self, document: Value) {
        match hook_phases(&document) {
            None => self.objects.push(document),
            Some(phases) if phases.split(',').any(|p| p.trim().starts_with("test")) => {
                self.tests.push(document)
            }
            Some(phases) => self.hooks.push((phases, document)),
        }
    }
}

/// `web/crds/x.yaml`, `web/charts/db/crds/x.yaml`; not `web/templates/crds/x.yaml`.
fn is_crd_file(source: &str) -> bool {
    let parts: Vec<&str> = source.split('/').collect();
    let mut at = 1;
    while parts.get(at) == Some(&"charts") {
        at += 2;
    }
    parts.get(at) == Some(&"crds")
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

    fn printed(documents: &[(&str, Value)]) -> String {
        documents
            .iter()
            .map(|(source, d)| format!("---\n# Source: {source}\n{}", crate::yaml::to_yaml(d)))
            .collect()
    }

    #[test]
    fn crds_hooks_and_tests_are_not_part_of_the_manifest() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "w"}});
        let release = split_release(&printed(&[
            ("web/crds/w.yaml", crd.clone()),
            ("web/charts/db/crds/w.yaml", crd.clone()),
            ("web/templates/crds/app.yaml", annotated("app", json!({}))),
            (
                "web/templates/migrate.yaml",
                annotated("migrate", json!({HOOK_ANNOTATION: "pre-install,pre-upgrade"})),
            ),
            ("web/templates/tests/smoke.yaml", annotated("smoke", json!({HOOK_ANNOTATION: "test"}))),
            (
                "web/templates/tests/legacy.yaml",
                annotated("legacy-smoke", json!({HOOK_ANNOTATION: "test-success"})),
            ),
        ]))
        .unwrap();
        assert_eq!(release.crds, vec![crd.clone(), crd]);
        assert_eq!(release.objects, vec![annotated("app", json!({}))]);
        assert_eq!(release.hooks.len(), 1);
        assert_eq!(release.hooks[0].0, "pre-install,pre-upgrade");
        assert_eq!(release.tests.len(), 2);
    }

    #[test]
    fn only_keep_keeps() {
        assert!(is_kept(&annotated("a", json!({RESOURCE_POLICY_ANNOTATION: "keep"}))));
        assert!(!is_kept(&annotated("a", json!({RESOURCE_POLICY_ANNOTATION: "delete"}))));
        assert!(!is_kept(&annotated("a", json!({}))));
    }
}
