//! Flux control labels and annotations (`kustomize.toolkit.fluxcd.io/*`).

use serde_json::Value;

pub const OWNER_NAME_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";
pub const OWNER_NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";
pub const SUBSTITUTE_KEY: &str = "kustomize.toolkit.fluxcd.io/substitute";
pub const RECONCILE_KEY: &str = "kustomize.toolkit.fluxcd.io/reconcile";
pub const SSA_KEY: &str = "kustomize.toolkit.fluxcd.io/ssa";
pub const PRUNE_KEY: &str = "kustomize.toolkit.fluxcd.io/prune";
pub const FORCE_KEY: &str = "kustomize.toolkit.fluxcd.io/force";

/// The value of a control key, read from labels or annotations (labels first).
pub fn control_value<'a>(metadata: &'a Value, key: &str) -> Option<&'a str> {
    ["labels", "annotations"].iter().find_map(|field| metadata.get(field)?.get(key)?.as_str())
}

/// True when a control key is set to `value`, compared case-insensitively as Flux does.
pub fn control_is(metadata: &Value, key: &str, value: &str) -> bool {
    control_value(metadata, key).is_some_and(|v| v.eq_ignore_ascii_case(value))
}

/// Why Flux leaves a live object alone when pruning, if it does.
pub fn prune_exemption(metadata: &Value) -> Option<&'static str> {
    if control_is(metadata, PRUNE_KEY, "disabled") {
        Some("marked kustomize.toolkit.fluxcd.io/prune: disabled")
    } else if control_is(metadata, RECONCILE_KEY, "disabled") {
        Some("marked kustomize.toolkit.fluxcd.io/reconcile: disabled")
    } else if control_is(metadata, SSA_KEY, "ignore") {
        Some("marked kustomize.toolkit.fluxcd.io/ssa: Ignore")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_labels_and_annotations_case_insensitively() {
        let meta = json!({"annotations": {PRUNE_KEY: "Disabled"}});
        assert!(control_is(&meta, PRUNE_KEY, "disabled"));
        assert_eq!(prune_exemption(&meta), Some("marked kustomize.toolkit.fluxcd.io/prune: disabled"));
        let meta = json!({"labels": {SSA_KEY: "IGNORE"}});
        assert!(prune_exemption(&meta).is_some());
        assert_eq!(prune_exemption(&json!({})), None);
    }
}
