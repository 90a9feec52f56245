//! Why a plan creates, changes or deletes one object: its changes in every unit, each with the
//! chain of deletions it cascades from (a Namespace, a HelmRelease's uninstall, a removed
//! Kustomization) up to the change the pull request made, and the alerts that name it. Read off
//! the plan's JSON (docs/plan.md), the contract other tools read too.

use serde_json::{json, Value};

/// How many cascade steps are followed: a chain longer than this is a cycle.
const MAX_CHAIN: usize = 32;

/// The explanation of `object` (an inventory id, `Kind namespace/name`, or `Kind name` for a
/// cluster-scoped object) in `plan`.
pub fn explain(plan: &Value, object: &str) -> Value {
    let object = object.trim();
    let units = plan["kustomizations"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut found = Vec::new();
    for unit in units {
        for change in changes(unit).filter(|c| names(c, object)) {
            found.push(json!({
                "unit": label(unit),
                "cluster": unit["cluster"],
                "action": change["action"],
                "reason": change["reason"],
                "cause": change["cause"],
                "moved_from": change["moved_from"],
                "moved_to": change["moved_to"],
                "cascades_from": chain(units, change),
                "alerts": alerts_naming(plan, change),
            }));
        }
    }
    if found.is_empty() {
        return json!({
            "object": object,
            "changes": [],
            "explanation": "the plan has no change of this object: both revisions render it alike, or neither renders \
                            it (give its inventory id, `Kind namespace/name`, or `Kind name` if cluster-scoped)",
        });
    }
    json!({"object": object, "changes": found, "plan_cause": plan["cause"]})
}

fn changes(unit: &Value) -> impl Iterator<Item = &Value> {
    unit["changes"].as_array().into_iter().flatten()
}

/// `Kind namespace/name` (or `Kind name`): how the plan names objects and units.
fn display(object: &Value) -> String {
    let (kind, namespace, name) = (
        object["kind"].as_str().unwrap_or(""),
        object["namespace"].as_str().unwrap_or(""),
        object["name"].as_str().unwrap_or(""),
    );
    if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}

fn label(unit: &Value) -> String {
    display(unit)
}

fn names(change: &Value, object: &str) -> bool {
    change["id"].as_str() == Some(object) || display(change) == object
}

/// The deletions `change` follows from, nearest first: each the change of the object named by
/// the previous one's `cascade_from`.
fn chain(units: &[Value], change: &Value) -> Vec<Value> {
    let mut steps = Vec::new();
    let mut next = change["cascade_from"].as_str().map(str::to_string);
    while let Some(name) = next.take() {
        if steps.len() == MAX_CHAIN {
            break;
        }
        let parent = units.iter().find_map(|unit| {
            let found =
                changes(unit).filter(|c| display(c) == name).max_by_key(|c| c["action"] == "delete")?;
            Some((unit, found))
        });
        match parent {
            Some((unit, found)) => {
                steps.push(json!({"object": name, "unit": label(unit), "action": found["action"],
                    "reason": found["reason"], "cause": found["cause"]}));
                next = found["cascade_from"].as_str().map(str::to_string);
            }
            None => steps.push(json!({"object": name})),
        }
    }
    steps
}

fn alerts_naming(plan: &Value, change: &Value) -> Vec<Value> {
    let id = &change["id"];
    plan["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["objects"].as_array().is_some_and(|objects| objects.contains(id)))
        .map(|a| json!({"severity": a["severity"], "code": a["code"], "message": a["message"], "cause": a["cause"]}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Value {
        json!({
            "cause": "clusters/prod/apps.yaml: Kustomization flux-system/apps removed",
            "kustomizations": [
                {"kind": "Kustomization", "namespace": "flux-system", "name": "root", "cluster": "clusters/prod",
                 "changes": [{"action": "delete", "id": "flux-system_apps_kustomize.toolkit.fluxcd.io_Kustomization",
                    "kind": "Kustomization", "namespace": "flux-system", "name": "apps",
                    "reason": "no longer rendered", "cause": "pull-request"}]},
                {"kind": "Kustomization", "namespace": "flux-system", "name": "apps", "cluster": "clusters/prod",
                 "changes": [
                    {"action": "delete", "id": "_shop__Namespace", "kind": "Namespace", "namespace": "", "name": "shop",
                     "cause": "cascade", "cascade_from": "Kustomization flux-system/apps"},
                    {"action": "delete", "id": "shop_web_apps_Deployment", "kind": "Deployment", "namespace": "shop",
                     "name": "web", "cause": "cascade", "cascade_from": "Namespace shop"}]}
            ],
            "alerts": [{"severity": "danger", "code": "kustomization-removed", "message": "is removed",
                "objects": ["shop_web_apps_Deployment"], "cause": "clusters/prod/apps.yaml"}]
        })
    }

    #[test]
    fn a_cascade_is_followed_to_the_pull_requests_change() {
        let plan = plan();
        for name in ["shop_web_apps_Deployment", "Deployment shop/web"] {
            let out = explain(&plan, name);
            let change = &out["changes"][0];
            assert_eq!(change["unit"], "Kustomization flux-system/apps");
            let chain: Vec<&str> = change["cascades_from"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["object"].as_str().unwrap())
                .collect();
            assert_eq!(chain, ["Namespace shop", "Kustomization flux-system/apps"]);
            assert_eq!(change["cascades_from"][1]["cause"], "pull-request");
            assert_eq!(change["alerts"][0]["code"], "kustomization-removed");
        }
        // A cluster-scoped object by `Kind name`; its own alerts are none.
        let out = explain(&plan, "Namespace shop");
        assert_eq!(out["changes"][0]["alerts"], json!([]));
    }

    #[test]
    fn an_object_the_plan_does_not_change_says_so_and_a_cycle_ends() {
        let plan = plan();
        assert_eq!(explain(&plan, "Deployment shop/api")["changes"], json!([]));
        let looped = json!({"kustomizations": [{"kind": "Kustomization", "namespace": "a", "name": "a", "changes": [
            {"action": "delete", "id": "x", "kind": "ConfigMap", "namespace": "a", "name": "x", "cascade_from": "ConfigMap a/y"},
            {"action": "delete", "id": "y", "kind": "ConfigMap", "namespace": "a", "name": "y", "cascade_from": "ConfigMap a/x"}]}]});
        let out = explain(&looped, "x");
        assert_eq!(out["changes"][0]["cascades_from"].as_array().unwrap().len(), MAX_CHAIN);
    }
}
