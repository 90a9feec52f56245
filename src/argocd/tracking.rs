//! Resource tracking: how Argo CD tells that a live object belongs to an Application
//! (argocd-cm `application.resourceTrackingMethod`).

use serde_json::Value;

pub const TRACKING_ID_ANNOTATION: &str = "argocd.argoproj.io/tracking-id";
pub const DEFAULT_INSTANCE_LABEL: &str = "app.kubernetes.io/instance";

/// The tracking method. Argo CD's default is `annotation` since 3.0 and was `label` before, so a
/// cluster that does not say (or cannot be read) may use either.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrackingMethod {
    /// Not configured or not known: either marker names the owner. Taking one default would
    /// skip every deletion the other version makes, and let a dangerous plan pass.
    Either(String),
    Annotation,
    /// The instance label (`application.instanceLabelKey`, default `app.kubernetes.io/instance`).
    Label(String),
    AnnotationAndLabel(String),
}

impl TrackingMethod {
    /// Reads `annotation`, `label` or `annotation+label`, with the instance label key.
    pub fn parse(method: &str, label_key: Option<&str>) -> Option<Self> {
        let label = label_key.filter(|k| !k.is_empty()).unwrap_or(DEFAULT_INSTANCE_LABEL).to_string();
        match method.trim() {
            "" => Some(TrackingMethod::Either(label)),
            "annotation" => Some(TrackingMethod::Annotation),
            "label" => Some(TrackingMethod::Label(label)),
            "annotation+label" => Some(TrackingMethod::AnnotationAndLabel(label)),
            _ => None,
        }
    }

    /// True when the live object's marker names the Application `app` (`installation`-less
    /// tracking ids name it `<namespace>_<name>` when Applications live outside Argo CD's own
    /// namespace).
    pub fn tracks(&self, metadata: &Value, app: &str, app_namespace: &str) -> bool {
        let by_annotation = || {
            metadata["annotations"][TRACKING_ID_ANNOTATION].as_str().is_some_and(|id| {
                let owner = id.split(':').next().unwrap_or("");
                owner == app || owner == format!("{app_namespace}_{app}")
            })
        };
        let by_label = |key: &str| metadata["labels"][key].as_str() == Some(app);
        match self {
            TrackingMethod::Annotation | TrackingMethod::AnnotationAndLabel(_) => by_annotation(),
            TrackingMethod::Label(key) => by_label(key),
            TrackingMethod::Either(key) => by_annotation() || by_label(key),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            TrackingMethod::Annotation => format!("annotation {TRACKING_ID_ANNOTATION}"),
            TrackingMethod::Label(key) => format!("label {key}"),
            TrackingMethod::AnnotationAndLabel(_) => format!("annotation {TRACKING_ID_ANNOTATION}"),
            TrackingMethod::Either(key) => format!("annotation {TRACKING_ID_ANNOTATION} or label {key}"),
        }
    }
}

impl Default for TrackingMethod {
    fn default() -> Self {
        TrackingMethod::Either(DEFAULT_INSTANCE_LABEL.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_belongs_to_the_app_its_marker_names() {
        let annotated = json!({"annotations": {TRACKING_ID_ANNOTATION: "web:apps/Deployment:web/web"}});
        let labelled = json!({"labels": {DEFAULT_INSTANCE_LABEL: "web"}});
        let annotation = TrackingMethod::parse("annotation", None).unwrap();
        assert!(annotation.tracks(&annotated, "web", "argocd"));
        assert!(!annotation.tracks(&annotated, "api", "argocd"));
        assert!(!annotation.tracks(&labelled, "web", "argocd"), "the label alone is not the annotation");
        let label = TrackingMethod::parse("label", None).unwrap();
        assert!(label.tracks(&labelled, "web", "argocd"));
        assert!(!label.tracks(&annotated, "web", "argocd"));
        let both = TrackingMethod::parse("annotation+label", Some("team/app")).unwrap();
        assert!(both.tracks(&annotated, "web", "argocd"), "annotation+label decides by the annotation");
        let namespaced = json!({"annotations": {TRACKING_ID_ANNOTATION: "team-a_web:/ConfigMap:web/c"}});
        assert!(annotation.tracks(&namespaced, "web", "team-a"));
        assert_eq!(TrackingMethod::parse("bogus", None), None);
        // A cluster that does not say: either marker counts, a marker naming another app does not.
        let unknown = TrackingMethod::default();
        assert!(unknown.tracks(&annotated, "web", "argocd") && unknown.tracks(&labelled, "web", "argocd"));
        assert!(!unknown.tracks(&labelled, "api", "argocd"));
        assert!(!unknown.tracks(&json!({}), "web", "argocd"));
        assert_eq!(
            TrackingMethod::parse("", Some("team/app")),
            Some(TrackingMethod::Either("team/app".into()))
        );
    }
}
