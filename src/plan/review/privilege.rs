//! `privilege`: more power given to someone, which a diff shows as one more line among many. A
//! binding to an all-powerful role, rules that gain wildcards or the verbs that lead to more
//! (escalate, bind, impersonate) or reach Secrets, Pods that gain the host or root, a namespace
//! whose Pod Security enforcement is lowered. Only what the object gains is a finding: an
//! unchanged privileged DaemonSet says nothing new.

use super::{fields, Candidate, Subject};
use serde_json::Value;
use std::collections::BTreeSet;

const CODE: &str = "privilege";
const RBAC: &str = "rbac.authorization.k8s.io";
/// Built-in ClusterRoles that grant (nearly) everything.
const POWERFUL_ROLES: &[&str] = &["cluster-admin", "admin"];
/// The Pod Security levels, least restrictive first; no label enforces nothing.
const POD_SECURITY_LEVELS: &[&str] = &["privileged", "baseline", "restricted"];
const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";

pub(super) fn check(subject: &Subject, found: &mut Vec<Candidate>) {
    match (subject.id.group.as_str(), subject.id.kind.as_str()) {
        (RBAC, "RoleBinding" | "ClusterRoleBinding") => binding(subject, found),
        (RBAC, "Role" | "ClusterRole") => rules(subject, found),
        ("", "Namespace") => pod_security(subject, found),
        (group, kind) => {
            if let Some(path) = pod_spec_path(group, kind) {
                pod_spec(subject, path, found);
            }
        }
    }
}

/// A binding that is new, or whose role or subjects change, to a role that grants everything.
fn binding(subject: &Subject, found: &mut Vec<Candidate>) {
    let changed = subject.is_new() || subject.changes(&["roleRef"]) || subject.changes(&["subjects"]);
    if !changed {
        return;
    }
    let after = subject.after();
    let role_ref = &after["roleRef"];
    let (kind, name) = (role_ref["kind"].as_str().unwrap_or(""), role_ref["name"].as_str().unwrap_or(""));
    let why = if kind == "ClusterRole" && POWERFUL_ROLES.contains(&name) {
        format!("ClusterRole {name} (every verb on every resource)")
    } else {
        // A role of the same render with wildcard rules.
        let namespace = if kind == "Role" { subject.id.namespace.as_str() } else { "" };
        let role = crate::flux::ObjectId::new(namespace, name, RBAC, kind);
        let Some(rules) = subject.head_object(&role).map(|o| &o["rules"]) else { return };
        let wild: Vec<&str> =
            grants(rules).into_iter().filter(|g| g.starts_with("every")).collect::<Vec<_>>();
        if wild.is_empty() {
            return;
        }
        format!("{kind} {name} (whose rules grant {})", wild.join(" and "))
    };
    let subjects = subjects(&after["subjects"]);
    let verb = if subject.is_new() { "binds" } else { "now binds" };
    found.push(subject.finding(CODE, "roleRef", format!("{verb} {why}{} to {subjects}", scope_of(subject))));
}

/// ` cluster-wide` for a ClusterRoleBinding, ` in namespace NS` for a RoleBinding.
fn scope_of(subject: &Subject) -> String {
    match subject.id.kind.as_str() {
        "ClusterRoleBinding" => " cluster-wide".into(),
        _ => format!(" in namespace {}", subject.id.namespace),
    }
}

/// `ServiceAccount ns/name, User alice`: who a binding binds.
fn subjects(list: &Value) -> String {
    let items: Vec<String> = list
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|s| {
                    let name = fields::brief(&s["name"]);
                    match s["namespace"].as_str() {
                        Some(ns) => format!("{} {ns}/{name}", fields::brief(&s["kind"])),
                        None => format!("{} {name}", fields::brief(&s["kind"])),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    match items.len() {
        0 => "no subject".into(),
        1..=5 => items.join(", "),
        n => format!("{} and {} more", items[..5].join(", "), n - 5),
    }
}

/// What a role's rules grant of what matters: wildcards, the verbs that lead to more power, and
/// Secrets.
fn grants(rules: &Value) -> BTreeSet<&'static str> {
    let mut found = BTreeSet::new();
    let strings = |rule: &Value, key: &str| -> Vec<String> {
        rule[key]
            .as_array()
            .map(|v| v.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    for rule in rules.as_array().into_iter().flatten() {
        let (verbs, resources, groups) =
            (strings(rule, "verbs"), strings(rule, "resources"), strings(rule, "apiGroups"));
        let has = |list: &[String], item: &str| list.iter().any(|v| v == item);
        if has(&verbs, "*") {
            found.insert("every verb (*)");
        }
        if has(&resources, "*") {
            found.insert("every resource (*)");
        }
        for (verb, grant) in [("escalate", "escalate"), ("bind", "bind"), ("impersonate", "impersonate")] {
            if has(&verbs, verb) {
                found.insert(grant);
            }
        }
        if has(&resources, "secrets") && (has(&groups, "") || has(&groups, "*")) && !verbs.is_empty() {
            found.insert("access to Secrets");
        }
    }
    found
}

/// Rules of a Role or ClusterRole that gain what `grants` names.
fn rules(subject: &Subject, found: &mut Vec<Candidate>) {
    let before = subject.before().map(|o| grants(&o["rules"])).unwrap_or_default();
    let gained: Vec<&str> = grants(&subject.after()["rules"]).difference(&before).copied().collect();
    if gained.is_empty() {
        return;
    }
    let verb = if subject.is_new() { "grant" } else { "now grant" };
    found.push(subject.finding(CODE, "rules", format!("its rules {verb} {}", gained.join(", "))));
}

/// Where a kind keeps its Pod spec.
fn pod_spec_path(group: &str, kind: &str) -> Option<&'static [&'static str]> {
    match (group, kind) {
        ("", "Pod") => Some(&["spec"]),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") | ("batch", "Job") => {
            Some(&["spec", "template", "spec"])
        }
        ("batch", "CronJob") => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
        _ => None,
    }
}

/// What a Pod spec holds of the host or root: (field path, description).
fn pod_powers(spec: Option<&Value>, prefix: &str) -> BTreeSet<(String, String)> {
    let mut powers = BTreeSet::new();
    let Some(spec) = spec else { return powers };
    for field in ["hostPID", "hostNetwork", "hostIPC"] {
        if spec[field] == true {
            powers.insert((format!("{prefix}.{field}"), format!("{field}: true")));
        }
    }
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        if let Some(path) = volume["hostPath"]["path"].as_str() {
            let name = fields::brief(&volume["name"]);
            powers.insert((
                format!("{prefix}.volumes[{name}].hostPath"),
                format!("hostPath volume {name} ({path})"),
            ));
        }
    }
    if spec["securityContext"]["runAsUser"] == 0 {
        powers.insert((
            format!("{prefix}.securityContext.runAsUser"),
            "runAsUser: 0 (root) for every container".into(),
        ));
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in spec[list].as_array().into_iter().flatten() {
            let name = fields::brief(&container["name"]);
            let at = format!("{prefix}.{list}[{name}].securityContext");
            let context = &container["securityContext"];
            if context["privileged"] == true {
                powers.insert((format!("{at}.privileged"), format!("privileged container {name}")));
            }
            if context["runAsUser"] == 0 {
                powers.insert((
                    format!("{at}.runAsUser"),
                    format!("container {name} runs as root (runAsUser: 0)"),
                ));
            }
            for capability in context["capabilities"]["add"].as_array().into_iter().flatten() {
                let capability = fields::brief(capability);
                powers.insert((
                    format!("{at}.capabilities.add"),
                    format!("capability {capability} for container {name}"),
                ));
            }
        }
    }
    powers
}

/// A Pod template that gains the host or root.
fn pod_spec(subject: &Subject, path: &[&str], found: &mut Vec<Candidate>) {
    let prefix = fields::dotted(path);
    let before = pod_powers(subject.before().and_then(|o| fields::at(o, path)), &prefix);
    let after = pod_powers(fields::at(subject.after(), path), &prefix);
    let gained: Vec<&(String, String)> = after.difference(&before).collect();
    let (field, what) = match gained.as_slice() {
        [] => return,
        [(field, what)] => (field.clone(), what.clone()),
        many => (prefix.clone(), many.iter().map(|(_, what)| what.as_str()).collect::<Vec<_>>().join(", ")),
    };
    let verb = if subject.is_new() { "its Pods get" } else { "its Pods gain" };
    found.push(subject.finding(CODE, &field, format!("{verb} {what}")));
}

/// A namespace whose Pod Security enforcement is lowered (no label enforces nothing).
fn pod_security(subject: &Subject, found: &mut Vec<Candidate>) {
    let Some(before) = subject.before() else { return };
    let path = ["metadata", "labels", ENFORCE_LABEL];
    let level = |o: &Value| -> Option<usize> {
        match fields::at(o, &path) {
            None => Some(0),
            Some(value) => POD_SECURITY_LEVELS.iter().position(|l| Some(*l) == value.as_str()),
        }
    };
    let (Some(was), Some(now)) = (level(before), level(subject.after())) else { return };
    if now < was {
        found.push(subject.finding(
            CODE,
            &format!("metadata.labels.{ENFORCE_LABEL}"),
            format!(
                "Pod Security enforcement is lowered from {} to {}: Pods the namespace refused are now admitted",
                POD_SECURITY_LEVELS[was], POD_SECURITY_LEVELS[now]
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_grant_what_matters() {
        let rules = json!([
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind", "escalate"]},
            {"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]},
        ]);
        let found: Vec<&str> = grants(&rules).into_iter().collect();
        assert_eq!(found, ["access to Secrets", "bind", "escalate", "every resource (*)", "every verb (*)"]);
        let harmless = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]);
        assert!(grants(&harmless).is_empty());
    }

    #[test]
    fn pod_powers_name_the_field() {
        let spec = json!({"hostNetwork": true, "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            "containers": [{"name": "web", "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN"]}}}]});
        let powers: Vec<String> = pod_powers(Some(&spec), "spec").into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            powers,
            [
                "spec.containers[web].securityContext.capabilities.add",
                "spec.containers[web].securityContext.privileged",
                "spec.hostNetwork",
                "spec.volumes[root].hostPath",
            ]
        );
    }
}
