//! GitLab's Code Quality report (a subset of the CodeClimate issue format: a JSON array of
//! findings with `description`, `check_name`, `fingerprint`, `severity`, `location.path` and
//! `location.lines.begin`), shown in the merge request widget and, on GitLab Ultimate, on the
//! diff's lines. One finding per location of each alert; an alert without one is placed by the
//! rule of docs/locations.md: its unit's defining file, else its cluster's directory, else the
//! policy file `.fluxplan.yaml`. docs/locations.md says more.

use crate::plan::{unit_key, Alert, Plan, Severity, SourceLocation};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Where an alert about the whole repository is placed: the policy that rates it.
pub const POLICY_FILE: &str = ".fluxplan.yaml";

#[derive(Debug, Serialize)]
struct Finding {
    description: String,
    check_name: String,
    fingerprint: String,
    severity: &'static str,
    location: Location,
}

#[derive(Debug, Serialize)]
struct Location {
    path: String,
    lines: Lines,
}

#[derive(Debug, Serialize)]
struct Lines {
    begin: u32,
}

/// The report of `plan`, as GitLab reads it.
pub fn code_quality(plan: &Plan) -> String {
    let mut findings = Vec::new();
    // How often a finding's identity was seen: a second one of the same identity gets its own
    // fingerprint, the same on every run.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for alert in &plan.alerts {
        for location in places(plan, alert) {
            let identity = identity(alert, &location.path);
            let n = seen.entry(identity.clone()).or_default();
            *n += 1;
            let fingerprint = fingerprint(&format!("{identity}\0{n}"));
            findings.push(Finding {
                description: description(alert),
                check_name: format!("fluxplan/{}", alert.code),
                fingerprint,
                severity: severity(alert.severity),
                location: Location { path: location.path, lines: Lines { begin: location.line.max(1) } },
            });
        }
    }
    serde_json::to_string_pretty(&findings).expect("findings serialize") + "\n"
}

/// GitLab's scale: a danger blocks the merge.
fn severity(severity: Severity) -> &'static str {
    match severity {
        Severity::Danger => "blocker",
        Severity::Warning => "major",
        Severity::Info => "info",
    }
}

/// The alert's lines, else the one place the fallback rule gives.
fn places(plan: &Plan, alert: &Alert) -> Vec<SourceLocation> {
    if !alert.locations.is_empty() {
        return alert.locations.clone();
    }
    let unit_file = match (&alert.cluster, &alert.kustomization) {
        (Some(cluster), Some(unit)) => plan.unit_files.get(&unit_key(cluster, unit)).cloned(),
        _ => None,
    };
    let cluster_dir = alert.cluster.clone().filter(|c| crate::paths::is_plain_path(c));
    let path = unit_file.or(cluster_dir).unwrap_or_else(|| POLICY_FILE.to_string());
    vec![SourceLocation { path, line: 1 }]
}

/// What the finding is, whatever the run: its code, cluster, unit, objects and file; not its
/// message (counts in it change) nor its line (edits above it move it).
fn identity(alert: &Alert, path: &str) -> String {
    let mut objects = alert.objects.clone();
    objects.sort();
    [
        alert.code.as_str(),
        alert.cluster.as_deref().unwrap_or(""),
        alert.kustomization.as_deref().unwrap_or(""),
        path,
        &objects.join(","),
    ]
    .join("\0")
}

fn fingerprint(identity: &str) -> String {
    hex::encode(Sha256::digest(identity.as_bytes()))[..32].to_string()
}

fn description(alert: &Alert) -> String {
    let mut text = match (&alert.kustomization, &alert.cluster) {
        (Some(unit), Some(cluster)) => format!("{unit} ({cluster}): {}", alert.message),
        (None, Some(cluster)) => format!("{cluster}: {}", alert.message),
        _ => alert.message.clone(),
    };
    if let Some(cause) = &alert.cause {
        text.push_str(&format!(" (cause: {cause})"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(code: &str, locations: Vec<SourceLocation>) -> Alert {
        let policy = crate::plan::Policy::default();
        let mut alert = policy
            .alert(
                code,
                "clusters/prod",
                Some("flux-system/apps".into()),
                "a message".into(),
                vec!["a".into()],
            )
            .unwrap();
        alert.locations = locations;
        alert
    }

    fn plan_of(alerts: Vec<Alert>) -> Plan {
        let revision = crate::plan::Revision { rev: "main".into(), commit: None };
        let mut plan = Plan::failed(revision.clone(), revision, String::new());
        plan.alerts = alerts;
        plan
    }

    #[test]
    fn every_location_is_a_finding_and_fingerprints_are_stable_and_distinct() {
        let at = |path: &str, line| SourceLocation { path: path.into(), line };
        let mut plan = plan_of(vec![
            alert("empty-render", vec![at("clusters/prod/apps.yaml", 8), at("apps/kustomization.yaml", 4)]),
            alert("mass-deletion", vec![at("clusters/prod/apps.yaml", 8)]),
            alert("stale-inventory", vec![]),
            alert("stale-inventory", vec![]),
        ]);
        plan.unit_files
            .insert(unit_key("clusters/prod", "flux-system/apps"), "clusters/prod/apps.yaml".into());
        let report: serde_json::Value = serde_json::from_str(&code_quality(&plan)).unwrap();
        let findings = report.as_array().unwrap();
        assert_eq!(findings.len(), 5);
        let places: Vec<(String, u64)> = findings
            .iter()
            .map(|f| {
                (
                    f["location"]["path"].as_str().unwrap().into(),
                    f["location"]["lines"]["begin"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(places[1], ("apps/kustomization.yaml".into(), 4));
        assert_eq!(places[3], ("clusters/prod/apps.yaml".into(), 1), "no location: the unit's file");
        assert_eq!(findings[0]["severity"], "blocker");
        assert_eq!(findings[3]["severity"], "major");
        assert_eq!(findings[0]["check_name"], "fluxplan/empty-render");
        let prints: std::collections::BTreeSet<&str> =
            findings.iter().map(|f| f["fingerprint"].as_str().unwrap()).collect();
        assert_eq!(prints.len(), 5, "distinct, the two alike included");
        // The same finding after an edit moved its line and changed its counts: the same print.
        let mut moved = plan.clone();
        moved.alerts[0].locations[0].line = 12;
        moved.alerts[0].message = "another count".into();
        let again: serde_json::Value = serde_json::from_str(&code_quality(&moved)).unwrap();
        assert_eq!(again[0]["fingerprint"], findings[0]["fingerprint"]);
        // Without a unit file: the cluster's directory; without a cluster: the policy file.
        let mut general = plan_of(vec![alert("stale-inventory", vec![])]);
        general
            .alerts
            .push(crate::plan::Policy::default().general_alert("policy-changed", "x".into()).unwrap());
        let report: serde_json::Value = serde_json::from_str(&code_quality(&general)).unwrap();
        assert_eq!(report[0]["location"]["path"], "clusters/prod");
        assert_eq!(report[1]["location"]["path"], POLICY_FILE);
    }
}
