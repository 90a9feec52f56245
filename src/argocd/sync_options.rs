//! Sync options: the Application's `syncPolicy.syncOptions`, each object's
//! `argocd.argoproj.io/sync-options` annotation, and sync hooks.

use serde_json::Value;

pub const SYNC_OPTIONS_ANNOTATION: &str = "argocd.argoproj.io/sync-options";
pub const HOOK_ANNOTATION: &str = "argocd.argoproj.io/hook";
pub const HELM_HOOK_ANNOTATION: &str = "helm.sh/hook";
pub const COMPARE_OPTIONS_ANNOTATION: &str = "argocd.argoproj.io/compare-options";

/// The options of `syncPolicy.syncOptions` fluxplan acts on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppSyncOptions {
    /// `CreateNamespace=true`: the destination namespace is created when missing.
    pub create_namespace: bool,
    /// `PruneLast=true`: prunes after every other resource is applied and healthy.
    pub prune_last: bool,
}

impl AppSyncOptions {
    pub fn parse(options: Option<&Value>) -> Self {
        let mut parsed = AppSyncOptions::default();
        for option in options.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            match option.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                Some(("CreateNamespace", v)) => parsed.create_namespace = v.eq_ignore_ascii_case("true"),
                Some(("PruneLast", v)) => parsed.prune_last = v.eq_ignore_ascii_case("true"),
                _ => {}
            }
        }
        parsed
    }
}

/// What an object's sync options say about pruning or deleting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    Allowed,
    /// `=false`: never.
    Never,
    /// `=confirm`: only once someone confirms.
    Confirm,
}

/// The sync options of one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectOptions {
    /// `Prune=`: when Git stops holding it.
    pub prune: Removal,
    /// `Delete=`: when its Application is deleted.
    pub delete: Removal,
    pub prune_last: bool,
}

impl ObjectOptions {
    /// Reads `argocd.argoproj.io/sync-options` (comma-separated `Key=value`).
    pub fn of(metadata: &Value) -> Self {
        let mut options =
            ObjectOptions { prune: Removal::Allowed, delete: Removal::Allowed, prune_last: false };
        let text = metadata["annotations"][SYNC_OPTIONS_ANNOTATION].as_str().unwrap_or("");
        for option in text.split(',') {
            let Some((key, value)) = option.split_once('=') else { continue };
            let removal = match value.trim() {
                v if v.eq_ignore_ascii_case("false") => Removal::Never,
                v if v.eq_ignore_ascii_case("confirm") => Removal::Confirm,
                _ => Removal::Allowed,
            };
            match key.trim() {
                "Prune" => options.prune = removal,
                "Delete" => options.delete = removal,
                "PruneLast" => options.prune_last = value.trim().eq_ignore_ascii_case("true"),
                _ => {}
            }
        }
        options
    }

    /// Why Argo CD does not prune it, if it does not.
    pub fn prune_exemption(&self) -> Option<&'static str> {
        match self.prune {
            Removal::Allowed => None,
            Removal::Never => {
                Some("marked argocd.argoproj.io/sync-options: Prune=false: Argo CD never prunes it")
            }
            Removal::Confirm => Some(
                "marked argocd.argoproj.io/sync-options: Prune=confirm: pruned only once someone confirms it",
            ),
        }
    }

    /// Why deleting its Application leaves it, if it does.
    pub fn delete_exemption(&self) -> Option<&'static str> {
        match self.delete {
            Removal::Allowed => None,
            Removal::Never => Some("marked argocd.argoproj.io/sync-options: Delete=false: kept when its Application goes"),
            Removal::Confirm => Some(
                "marked argocd.argoproj.io/sync-options: Delete=confirm: deleted only once someone confirms it",
            ),
        }
    }
}

/// True when an object's compare options make it ignored when extraneous.
pub fn ignore_extraneous(metadata: &Value) -> bool {
    metadata["annotations"][COMPARE_OPTIONS_ANNOTATION]
        .as_str()
        .is_some_and(|o| o.split(',').any(|opt| opt.trim() == "IgnoreExtraneous"))
}

/// The phases an object runs in as a hook (`PreSync`, `Sync`, `PostSync`, `SyncFail`,
/// `PostDelete`, `Skip`), Helm hooks mapped as Argo CD maps them; `None` when it is a managed
/// resource.
pub fn hook_phases(metadata: &Value) -> Option<Vec<String>> {
    let annotations = &metadata["annotations"];
    if let Some(hooks) = annotations[HOOK_ANNOTATION].as_str() {
        let phases: Vec<String> =
            hooks.split(',').map(str::trim).filter(|p| !p.is_empty()).map(str::to_string).collect();
        return (!phases.is_empty()).then_some(phases);
    }
    let helm = annotations[HELM_HOOK_ANNOTATION].as_str()?;
    let mut phases: Vec<String> = helm
        .split(',')
        .filter_map(|hook| match hook.trim() {
            // crd-install is not a hook to Argo CD: the CRD is a resource like any other.
            "pre-install" | "pre-upgrade" => Some("PreSync"),
            "post-install" | "post-upgrade" => Some("PostSync"),
            "post-delete" => Some("PostDelete"),
            _ => None,
        })
        .map(str::to_string)
        .collect();
    phases.dedup();
    (!phases.is_empty()).then_some(phases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(options: &str) -> Value {
        json!({"annotations": {SYNC_OPTIONS_ANNOTATION: options}})
    }

    #[test]
    fn object_options_are_read_from_the_annotation() {
        let o = ObjectOptions::of(&meta("Prune=false, Delete=false,PruneLast=true"));
        assert_eq!((o.prune, o.delete, o.prune_last), (Removal::Never, Removal::Never, true));
        assert!(o.prune_exemption().unwrap().contains("Prune=false"));
        assert!(o.delete_exemption().unwrap().contains("Delete=false"));
        let o = ObjectOptions::of(&meta("Prune=confirm,Replace=true"));
        assert_eq!((o.prune, o.delete), (Removal::Confirm, Removal::Allowed));
        let o = ObjectOptions::of(&json!({}));
        assert_eq!(o.prune_exemption(), None);
        assert_eq!(o.delete_exemption(), None);
    }

    #[test]
    fn app_options() {
        let o = AppSyncOptions::parse(Some(&json!([
            "CreateNamespace=true",
            "PruneLast=true",
            "PrunePropagationPolicy=background"
        ])));
        assert!(o.create_namespace && o.prune_last);
        assert_eq!(AppSyncOptions::parse(Some(&json!(["CreateNamespace=false"]))), AppSyncOptions::default());
    }

    #[test]
    fn hooks_argo_and_helm() {
        let hook = |annotations: Value| hook_phases(&json!({"annotations": annotations}));
        assert_eq!(
            hook(json!({HOOK_ANNOTATION: "PreSync,PostSync"})),
            Some(vec!["PreSync".into(), "PostSync".into()])
        );
        assert_eq!(
            hook(json!({HELM_HOOK_ANNOTATION: "pre-install,pre-upgrade"})),
            Some(vec!["PreSync".into()])
        );
        assert_eq!(
            hook(json!({HELM_HOOK_ANNOTATION: "test"})),
            None,
            "helm test hooks are not run by a sync"
        );
        assert_eq!(hook(json!({})), None);
        assert!(ignore_extraneous(&json!({"annotations": {COMPARE_OPTIONS_ANNOTATION: "IgnoreExtraneous"}})));
        assert_eq!(
            hook(json!({HELM_HOOK_ANNOTATION: "crd-install"})),
            None,
            "a CRD is a resource to Argo CD"
        );
    }
}
