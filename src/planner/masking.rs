//! Masks the plan: it matched objects on their real inventory ids, and everything it shows
//! carries the masked names instead (see `render::masking`).

use crate::plan::{Alert, KustomizationPlan, Plan};
use crate::render::masking::Masks;
use crate::render::Render;

/// Replaces, in every text of the plan, each real name that came from a Secret by its masked form.
pub fn mask_plan(plan: &mut Plan, renders: &[&Render]) {
    let masks = Masks::of(renders);
    if !masks.is_empty() {
        apply(plan, &masks);
    }
}

fn apply(plan: &mut Plan, masks: &Masks) {
    let mask = |text: &mut String| *text = masks.apply(text);
    plan.kustomizations.iter_mut().for_each(|k| mask_kustomization(k, &mask));
    plan.alerts.iter_mut().for_each(|a| mask_alert(a, &mask));
    for finding in &mut plan.findings {
        for text in [
            &mut finding.cluster,
            &mut finding.unit,
            &mut finding.object,
            &mut finding.path,
            &mut finding.message,
        ] {
            mask(text);
        }
    }
    plan.degraded.iter_mut().for_each(mask);
    plan.error.iter_mut().for_each(mask);
    let radius = std::mem::take(&mut plan.blast_radius);
    for (mut cluster, mut radius) in radius {
        mask(&mut cluster);
        radius.namespaces =
            radius.namespaces.into_iter().map(|(mut ns, kinds)| (masked(&mut ns, &mask), kinds)).collect();
        radius.custom_resources =
            radius.custom_resources.into_iter().map(|(mut crd, n)| (masked(&mut crd, &mask), n)).collect();
        for loss in &mut radius.data_loss {
            for text in [&mut loss.namespace, &mut loss.claim, &mut loss.volume] {
                mask(text);
            }
        }
        radius.warnings.iter_mut().for_each(mask);
        plan.blast_radius.insert(cluster, radius);
    }
    for change in &mut plan.unplanned_changes {
        mask(&mut change.file);
        change.why.iter_mut().for_each(mask);
        for unit in &mut change.read_by {
            for text in [&mut unit.cluster, &mut unit.namespace, &mut unit.name] {
                mask(text);
            }
        }
    }
    plan.cause.iter_mut().for_each(mask);
    for text in [&mut plan.base.rev, &mut plan.head.rev, &mut plan.policy_source] {
        mask(text);
    }
    // Fail closed: a field this pass does not know (one added later) must never show a real name.
    // Each string value is checked as it reads (not the JSON text, where `\n` escapes hide a word
    // boundary and keys would match names).
    let shown = serde_json::to_value(&*plan).unwrap_or_default();
    if strings(&shown).any(|text| masks.apply(text) != text) {
        *plan = Plan::failed(
            plan.base.clone(),
            plan.head.clone(),
            "a name substituted from a Secret could not be masked everywhere in this plan, so the plan is \
             not shown (a fluxplan bug: please report it)"
                .into(),
        );
    }
}

/// Every string value in a JSON document.
fn strings(value: &serde_json::Value) -> Box<dyn Iterator<Item = &str> + '_> {
    match value {
        serde_json::Value::String(text) => Box::new(std::iter::once(text.as_str())),
        serde_json::Value::Array(items) => Box::new(items.iter().flat_map(strings)),
        serde_json::Value::Object(map) => {
            Box::new(map.iter().flat_map(|(key, v)| std::iter::once(key.as_str()).chain(strings(v))))
        }
        _ => Box::new(std::iter::empty()),
    }
}

fn masked(text: &mut String, mask: &impl Fn(&mut String)) -> String {
    mask(text);
    std::mem::take(text)
}

fn mask_kustomization(k: &mut KustomizationPlan, mask: &impl Fn(&mut String)) {
    // The prediction stored with the run keeps a real id that holds a Secret's value only as its
    // hash: the follow-up matches the cluster's inventory by it.
    for id in k.desired.iter_mut().chain(&mut k.unmanaged) {
        let mut shown = id.clone();
        mask(&mut shown);
        if shown != *id {
            *id = crate::plan::actual::hashed_id(id);
        }
    }
    mask(&mut k.cluster);
    mask(&mut k.namespace);
    mask(&mut k.name);
    k.path.iter_mut().for_each(mask);
    k.notes.iter_mut().for_each(mask);
    if let Some(error) = &mut k.error {
        mask(&mut error.message);
    }
    for change in &mut k.changes {
        for text in [&mut change.id, &mut change.namespace, &mut change.name] {
            mask(text);
        }
        for text in [
            &mut change.reason,
            &mut change.cascade_from,
            &mut change.moved_from,
            &mut change.moved_to,
            &mut change.diff,
        ] {
            text.iter_mut().for_each(mask);
        }
        change.hidden_changes.iter_mut().for_each(mask);
        change.takes_with_it.iter_mut().for_each(mask);
    }
    for drift in &mut k.drift {
        for text in [&mut drift.id, &mut drift.display, &mut drift.diff] {
            mask(text);
        }
        drift.after_merge.iter_mut().for_each(mask);
        drift.ignore_rules_not_applied.iter_mut().for_each(mask);
    }
}

fn mask_alert(alert: &mut Alert, mask: &impl Fn(&mut String)) {
    alert.cluster.iter_mut().for_each(mask);
    alert.kustomization.iter_mut().for_each(mask);
    mask(&mut alert.message);
    alert.objects.iter_mut().for_each(mask);
    alert.cause.iter_mut().for_each(mask);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Revision, Verdict};

    fn plan_showing(text: &str) -> Plan {
        let revision = |rev: &str| Revision { rev: rev.into(), commit: None };
        let mut plan = Plan::failed(revision("base"), revision("head"), format!("cannot read {text}"));
        plan.verdict = Verdict::Changes;
        plan.policy_source = "built-in defaults".into();
        plan
    }

    fn kustomization_plan() -> crate::plan::KustomizationPlan {
        use crate::plan::{Counts, InventorySource, KustomizationPlan, KustomizationStatus};
        KustomizationPlan {
            cluster: "prod".into(),
            engine: crate::render::Engine::Flux,
            kind: crate::render::UnitKind::Kustomization,
            namespace: "flux-system".into(),
            name: "apps".into(),
            status: KustomizationStatus::Changed,
            path: None,
            changes: Vec::new(),
            counts: Counts::default(),
            inventory_size: 0,
            inventory_source: InventorySource::Cluster,
            error: None,
            drift: Vec::new(),
            notes: Vec::new(),
            desired: Vec::new(),
            unmanaged: Vec::new(),
            parent: None,
            chart: None,
            release_status: None,
            base_unknown: false,
            release_fate: None,
        }
    }

    #[test]
    fn a_predicted_id_holding_a_secret_value_is_kept_only_as_its_hash() {
        let masks = Masks::from_pairs(&[("app-zq7secret", "app-(masked:SUFFIX)")]);
        let mut plan = plan_showing("nothing");
        let mut k = kustomization_plan();
        k.desired = vec!["default_app-zq7secret__ConfigMap".into(), "default_plain__ConfigMap".into()];
        k.unmanaged = vec!["default_app-zq7secret__ConfigMap".into()];
        plan.kustomizations.push(k);
        apply(&mut plan, &masks);
        let k = &plan.kustomizations[0];
        let hashed = crate::plan::actual::hashed_id("default_app-zq7secret__ConfigMap");
        assert_eq!(k.desired, [hashed.clone(), "default_plain__ConfigMap".to_string()]);
        assert_eq!(k.unmanaged, [hashed]);
    }

    #[test]
    fn drift_and_the_rules_it_could_not_apply_are_masked() {
        let masks = Masks::from_pairs(&[("app-zq7secret", "app-(masked:SUFFIX)")]);
        let mut plan = plan_showing("nothing");
        let mut k = kustomization_plan();
        k.drift.push(crate::plan::Drift {
            id: "default_app__ConfigMap".into(),
            display: "ConfigMap default/app".into(),
            diff: "-  name: app-zq7secret".into(),
            after_merge: None,
            ignore_rules_not_applied: vec!["managedFieldsManagers app-zq7secret".into()],
        });
        plan.kustomizations.push(k);
        apply(&mut plan, &masks);
        assert_eq!(plan.verdict, Verdict::Changes);
        let drift = &plan.kustomizations[0].drift[0];
        assert_eq!(drift.diff, "-  name: app-(masked:SUFFIX)");
        assert_eq!(drift.ignore_rules_not_applied, ["managedFieldsManagers app-(masked:SUFFIX)"]);
    }

    #[test]
    fn findings_are_masked() {
        let masks = Masks::from_pairs(&[("app-zq7secret", "app-(masked:SUFFIX)")]);
        let mut plan = plan_showing("nothing");
        plan.findings.push(crate::plan::review::Finding {
            code: "immutable-field".into(),
            severity: crate::plan::Severity::Danger,
            cluster: "prod".into(),
            unit: "Kustomization flux-system/app-zq7secret".into(),
            object: "shop_app-zq7secret_apps_Deployment".into(),
            path: "spec.selector".into(),
            message: "changes from {app: app-zq7secret} to {app: web}".into(),
        });
        apply(&mut plan, &masks);
        assert_eq!(plan.verdict, Verdict::Changes, "masked, not failed");
        let shown = serde_json::to_string(&plan.findings).unwrap();
        assert!(!shown.contains("zq7secret") && shown.contains("app-(masked:SUFFIX)"), "{shown}");
    }

    #[test]
    fn known_fields_are_masked() {
        let masks = Masks::from_pairs(&[("app-zq7secret", "app-(masked:SUFFIX)")]);
        let mut plan = plan_showing("ConfigMap default/app-zq7secret");
        apply(&mut plan, &masks);
        assert_eq!(plan.verdict, Verdict::Changes);
        assert_eq!(plan.error.as_deref(), Some("cannot read ConfigMap default/app-(masked:SUFFIX)"));
    }

    #[test]
    fn a_field_the_pass_does_not_know_fails_the_plan_instead_of_showing_the_name() {
        let masks = Masks::from_pairs(&[("app-zq7secret", "app-(masked:SUFFIX)")]);
        let mut plan = plan_showing("nothing");
        // An alert's `related_codes` stands for any field the explicit pass does not cover.
        let mut alert = Alert {
            severity: crate::plan::Severity::Warning,
            code: "build-failed".into(),
            cluster: None,
            kustomization: None,
            message: "fine".into(),
            objects: Vec::new(),
            related_codes: vec!["app-zq7secret".into()],
            cause: None,
            shown_elsewhere: false,
        };
        plan.alerts.push(alert.clone());
        apply(&mut plan, &masks);
        assert_eq!(plan.verdict, Verdict::Failed);
        let shown = serde_json::to_string(&plan).unwrap();
        assert!(!shown.contains("zq7secret"), "{shown}");
        // At the start of a line too (JSON writes the newline as `\n`, which hid the word).
        let mut plan = plan_showing("nothing");
        let mut multiline = alert.clone();
        multiline.related_codes = vec!["first line\napp-zq7secret".into()];
        plan.alerts.push(multiline);
        apply(&mut plan, &masks);
        assert_eq!(plan.verdict, Verdict::Failed);
        // The same plan without the unknown field is shown, masked.
        let mut plan = plan_showing("nothing");
        alert.related_codes.clear();
        alert.message = "app-zq7secret".into();
        plan.alerts.push(alert);
        plan.base.rev = "refs/heads/app-zq7secret".into();
        apply(&mut plan, &masks);
        assert_eq!(plan.verdict, Verdict::Changes);
        assert_eq!(plan.alerts[0].message, "app-(masked:SUFFIX)");
        assert_eq!(plan.base.rev, "refs/heads/app-(masked:SUFFIX)");
    }
}
