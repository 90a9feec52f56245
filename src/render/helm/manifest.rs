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
/// a `# Source: CHART/PATH` line; CRDs are those from a chart's (or a subchart's) `crds/`. The
/// stream is cut as Kubernetes cuts the release's manifest when Helm applies it: a document keeps
/// its last line break, the end of a block scalar that ends a template.
pub fn split_release(printed: &str) -> Result<Release, String> {
    let mut release = Release::default();
    for chunk in crate::yaml::split_stream(printed) {
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
    /// Puts a templated document where Helm's manifest sorter puts it
    /// (`pkg/release/v1/util/manifest_sorter.go`): the manifest, a hook, or a test hook. A
    /// document naming an event Helm does not know is dropped, as Helm drops it.
    pub fn sort(&mut self, document: Value) {
        let Some(phases) = hook_phases(&document) else {
            self.objects.push(document);
            return;
        };
        match hook_events(&phases) {
            None => {}
            Some(events) if events.iter().all(|e| e == TEST_EVENT) => self.tests.push(document),
            Some(events) => self.hooks.push((events.join(","), document)),
        }
    }
}

/// Every event Helm runs hooks on (`pkg/release/v1/hook.go`).
pub const HOOK_EVENTS: &[&str] = &[
    "pre-install",
    "post-install",
    "pre-delete",
    "post-delete",
    "pre-upgrade",
    "post-upgrade",
    "pre-rollback",
    "post-rollback",
    TEST_EVENT,
];
/// The event of `helm test`.
pub const TEST_EVENT: &str = "test";
/// The annotation naming when Helm deletes a hook.
pub const HOOK_DELETE_ANNOTATION: &str = "helm.sh/hook-delete-policy";
/// The delete policy Helm gives a hook that names none (`hookSetDeletePolicy`).
pub const DEFAULT_DELETE_POLICY: &str = "before-hook-creation";

/// The events of a `helm.sh/hook` annotation as Helm reads them: comma-separated, trimmed,
/// lower-cased, `test-success` read as `test`; `None` when one is unknown (Helm skips the hook).
pub fn hook_events(phases: &str) -> Option<Vec<String>> {
    phases
        .split(',')
        .map(|event| match event.trim().to_lowercase().as_str() {
            "test-success" => Some(TEST_EVENT.to_string()),
            known if HOOK_EVENTS.contains(&known) => Some(known.to_string()),
            _ => None,
        })
        .collect()
}

/// A hook's `helm.sh/hook-delete-policy`, as Helm reads it (split, trimmed, lower-cased); Helm
/// applies `before-hook-creation` when it names none.
pub fn delete_policies(hook: &Value) -> Vec<String> {
    hook["metadata"]["annotations"][HOOK_DELETE_ANNOTATION]
        .as_str()
        .into_iter()
        .flat_map(|text| text.split(','))
        .map(|policy| policy.trim().to_lowercase())
        .filter(|policy| !policy.is_empty())
        .collect()
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
    fn hook_events_are_read_as_helm_reads_them() {
        assert_eq!(
            hook_events(" Pre-Install , post-upgrade"),
            Some(vec!["pre-install".into(), "post-upgrade".into()])
        );
        assert_eq!(hook_events("test-success"), Some(vec!["test".into()]));
        // One unknown event and Helm skips the whole hook; an empty annotation is unknown too.
        assert_eq!(hook_events("pre-install,pre-sync"), None);
        assert_eq!(hook_events(""), None);
        let mut release = Release::default();
        release.sort(annotated("odd", json!({HOOK_ANNOTATION: "post-install,nonsense"})));
        release.sort(annotated("both", json!({HOOK_ANNOTATION: "test,post-install"})));
        assert!(release.objects.is_empty() && release.tests.is_empty(), "{release:?}");
        assert_eq!(release.hooks.len(), 1, "a hook that is also a test runs on install: {release:?}");
        assert_eq!(release.hooks[0].0, "test,post-install");
        let policy = annotated("p", json!({HOOK_DELETE_ANNOTATION: " Hook-Succeeded,before-hook-creation "}));
        assert_eq!(delete_policies(&policy), vec!["hook-succeeded", "before-hook-creation"]);
        assert!(delete_policies(&annotated("q", json!({}))).is_empty());
    }

    #[test]
    fn only_keep_keeps() {
        assert!(is_kept(&annotated("a", json!({RESOURCE_POLICY_ANNOTATION: "keep"}))));
        assert!(!is_kept(&annotated("a", json!({RESOURCE_POLICY_ANNOTATION: "delete"}))));
        assert!(!is_kept(&annotated("a", json!({}))));
    }
}
