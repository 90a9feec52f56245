//! The policy: which findings are alerts, how severe, and the thresholds. Read from the BASE
//! revision's `.fluxplan.yaml` so that a pull request cannot loosen its own gate.

use super::{
    causes, dependants, Alert, BlastRadius, KustomizationPlan, KustomizationStatus, Severity, Verdict,
};
use crate::flux::scope::Scope;
use crate::flux::KustomizationRef;
use crate::render::{DeclaredRoot, DeclaredSource, Render, Status};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// The file a repository's policy lives in.
pub const POLICY_FILE: &str = ".fluxplan.yaml";

/// The policy a revision's `.fluxplan.yaml` sets (the working tree's when `rev` is `None`), the
/// defaults when it has none.
pub fn read_policy_file(repo: &std::path::Path, rev: Option<&str>) -> anyhow::Result<Policy> {
    let text = match rev {
        Some(rev) => crate::git::show_file(repo, rev, POLICY_FILE)?,
        None => std::fs::read_to_string(repo.join(POLICY_FILE)).ok(),
    };
    match text {
        Some(text) => Policy::parse(&text).map_err(|e| anyhow::anyhow!("{POLICY_FILE}: {e}")),
        None => Ok(Policy::default()),
    }
}

/// Every alert code with its default severity.
pub const DEFAULT_SEVERITIES: &[(&str, Severity)] = &[
    ("path-not-found", Severity::Danger),
    ("empty-render", Severity::Danger),
    ("mass-deletion", Severity::Danger),
    ("protected-kind-deletion", Severity::Danger),
    ("build-failed", Severity::Danger),
    ("failing-before", Severity::Warning),
    ("kustomization-removed", Severity::Danger),
    ("helmrelease-removed", Severity::Danger),
    ("helmrelease-orphaned", Severity::Warning),
    ("release-target-changed", Severity::Danger),
    ("release-cluster-changed", Severity::Danger),
    ("data-loss", Severity::Danger),
    ("stale-inventory", Severity::Warning),
    ("dependency-deleted", Severity::Warning),
    ("source-limit", Severity::Danger),
    ("prune-changed", Severity::Warning),
    ("suspend-changed", Severity::Warning),
    ("target-namespace-changed", Severity::Warning),
    ("ownership-move", Severity::Warning),
    (super::ownership_moves::CODE, Severity::Warning),
    ("unreachable-kustomization", Severity::Warning),
    ("unresolved-substitution", Severity::Warning),
    ("policy-changed", Severity::Warning),
    ("policy-invalid", Severity::Warning),
    ("cluster-unreachable", Severity::Warning),
    ("cluster-read-incomplete", Severity::Warning),
    ("cluster-not-covered", Severity::Warning),
    ("repo-subdirectory", Severity::Warning),
    ("external-source", Severity::Info),
    ("unknown-revision", Severity::Warning),
    ("pinned-revision", Severity::Warning),
    ("unplanned-change", Severity::Warning),
    ("root-failed", Severity::Danger),
    ("roots-changed", Severity::Danger),
    ("roots-assumed", Severity::Info),
    ("tracked-branch-differs", Severity::Warning),
    ("source-pinned", Severity::Info),
    ("external-artifact", Severity::Warning),
    ("chart-unavailable", Severity::Warning),
    ("image-missing", Severity::Danger),
    ("image-unchecked", Severity::Warning),
    ("helm-release-stuck", Severity::Warning),
    ("chart-lookup", Severity::Warning),
    ("capabilities-assumed", Severity::Warning),
    ("chart-archive-hidden", Severity::Warning),
    ("resourceset-unknown", Severity::Warning),
    ("source-adds-content", Severity::Danger),
    ("source-ref-pinned", Severity::Danger),
    ("sync-changed", Severity::Danger),
    ("secret-spec", Severity::Danger),
    ("source-moved", Severity::Danger),
    ("api-removed", Severity::Danger),
    ("major-bump", Severity::Info),
    (super::capacity::CODE, Severity::Danger),
    // The review of every change (`review`).
    ("immutable-field", Severity::Danger),
    ("flux-semantics", Severity::Warning),
    ("privilege", Severity::Warning),
];

const DEFAULT_PROTECTED_KINDS: &[&str] =
    &["Namespace", "CustomResourceDefinition", "PersistentVolumeClaim", "PersistentVolume", "StatefulSet"];

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// `mass-deletion` when a Kustomization deletes more objects than this...
    pub max_deletions: usize,
    /// ...or more than this share (percent) of its inventory...
    pub max_deletion_percent: f64,
    /// ...counting the share only from this many deletions on (deleting 1 of 2 is not "mass").
    pub min_deletions_for_percent: usize,
    pub protected_kinds: BTreeSet<String>,
    /// Severity per alert code; `None` turns the alert off.
    pub severities: BTreeMap<String, Option<Severity>>,
    /// The repository's roots, when declared (`roots:`): the only roots then.
    pub roots: Option<Vec<DeclaredRoot>>,
    /// Sources that are this repository or a directory of it (`sources:`).
    pub sources: Vec<DeclaredSource>,
    /// Scopes of custom kinds whose CRD is neither in the repository nor in the catalogue:
    /// (group, kind, scope).
    pub crd_scopes: Vec<(String, String, Scope)>,
    /// Severities for a code in part of the fleet (`alertRules:`), the last that matches winning
    /// over `severities`.
    pub rules: Vec<AlertRule>,
    /// `capacity.maxRequestIncrease`: how much a namespace's requests may grow (`capacity-increase`
    /// above it); unset, nothing is checked.
    pub capacity_max_increase: super::capacity::MaxIncrease,
    /// What the file said that was left out (unknown keys and alert codes, each with the nearest
    /// known one): the rest of the file applies.
    pub warnings: Vec<String>,
}

/// A code rated otherwise where an alert is about one cluster, namespace or kind.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertRule {
    pub code: String,
    /// The cluster's name, as plans show it (`clusters/staging`).
    #[serde(default)]
    pub cluster: Option<String>,
    /// Every object the alert names lies in this namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Every object the alert names is of this kind.
    #[serde(default)]
    pub kind: Option<String>,
    /// danger, warning, info or off.
    pub severity: String,
}

impl AlertRule {
    /// True when the rule covers an alert of `code` in `cluster` about `objects` (inventory ids):
    /// a rule with a namespace or kind covers only alerts naming objects, all of them in it.
    fn covers(&self, code: &str, cluster: &str, objects: &[String]) -> bool {
        let ids: Vec<crate::flux::ObjectId> =
            objects.iter().filter_map(|id| crate::flux::ObjectId::parse(id)).collect();
        let every = |wanted: &Option<String>, field: fn(&crate::flux::ObjectId) -> &str| {
            wanted.as_deref().is_none_or(|w| {
                !ids.is_empty() && ids.len() == objects.len() && ids.iter().all(|id| field(id) == w)
            })
        };
        self.code == code
            && self.cluster.as_deref().is_none_or(|c| c.trim_matches('/') == cluster)
            && every(&self.namespace, |id| id.namespace.as_str())
            && every(&self.kind, |id| id.kind.as_str())
    }
}

fn parse_severity(text: &str, key: &str) -> Result<Option<Severity>, String> {
    match text {
        "danger" => Ok(Some(Severity::Danger)),
        "warning" => Ok(Some(Severity::Warning)),
        "info" => Ok(Some(Severity::Info)),
        "off" => Ok(None),
        other => Err(format!("{key}: '{other}' is not danger, warning, info or off")),
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_deletions: 10,
            max_deletion_percent: 30.0,
            min_deletions_for_percent: 3,
            protected_kinds: DEFAULT_PROTECTED_KINDS.iter().map(|k| k.to_string()).collect(),
            severities: DEFAULT_SEVERITIES.iter().map(|(c, s)| (c.to_string(), Some(*s))).collect(),
            roots: None,
            sources: Vec::new(),
            crd_scopes: Vec::new(),
            rules: Vec::new(),
            capacity_max_increase: Default::default(),
            warnings: Vec::new(),
        }
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PolicyFile {
    mass_deletion: Option<MassDeletionFile>,
    protected_kinds: Option<Vec<String>>,
    alerts: Option<BTreeMap<String, String>>,
    alert_rules: Option<Vec<AlertRule>>,
    roots: Option<Vec<DeclaredRoot>>,
    sources: Option<Vec<DeclaredSource>>,
    /// `Kind.group: Cluster | Namespaced`
    crd_scopes: Option<BTreeMap<String, String>>,
    capacity: Option<CapacityFile>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CapacityFile {
    /// The most one namespace's requests may grow in one merge, per cluster.
    max_request_increase: Option<MaxRequestIncreaseFile>,
}

/// Kubernetes quantities: `cpu: "4"`, `memory: 8Gi`, `storage: 100Gi`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct MaxRequestIncreaseFile {
    cpu: Option<serde_json::Value>,
    memory: Option<serde_json::Value>,
    storage: Option<serde_json::Value>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MassDeletionFile {
    max_objects: Option<usize>,
    max_percent: Option<f64>,
    min_objects_for_percent: Option<usize>,
}

/// Every key `.fluxplan.yaml` takes, nested ones as `parent.key` (`massDeletion.maxObjects`),
/// from the types that read it.
pub fn file_keys() -> std::collections::BTreeSet<String> {
    let schema = file_schema();
    let mut keys = std::collections::BTreeSet::new();
    collect_keys(schema, schema, "", &mut keys);
    keys
}

/// The JSON Schema of `.fluxplan.yaml`, from the types that read it.
fn file_schema() -> &'static serde_json::Value {
    static SCHEMA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::to_value(schemars::schema_for!(PolicyFile)).expect("schemas serialize"))
}

/// The property schemas an object of `schema` takes (through `$ref`s and the branches of an
/// `Option` or a flattened struct), and the schema of a list's items.
fn shape<'s>(
    root: &'s serde_json::Value,
    schema: &'s serde_json::Value,
    properties: &mut BTreeMap<&'s str, &'s serde_json::Value>,
    items: &mut Option<&'s serde_json::Value>,
) {
    if let Some(reference) = schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
        return shape(root, &root["$defs"][reference], properties, items);
    }
    for branch in ["anyOf", "oneOf", "allOf"].iter().filter_map(|k| schema[k].as_array()).flatten() {
        shape(root, branch, properties, items);
    }
    if schema["items"].is_object() {
        *items = Some(&schema["items"]);
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        properties.insert(name, property);
    }
}

/// The known name nearest `typed`, to say what a typo meant.
fn nearest<'k>(typed: &str, known: impl IntoIterator<Item = &'k str>) -> Option<&'k str> {
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(&typed.to_lowercase(), &k.to_lowercase()), k))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// Removes the keys of `value` that `.fluxplan.yaml` does not take (`at`: where `value` is), one
/// warning each naming it and the nearest known key: a typo must not cost the rest of the file.
fn drop_unknown_keys(
    value: &mut serde_json::Value,
    schema: &serde_json::Value,
    at: &str,
    warnings: &mut Vec<String>,
) {
    let root = file_schema();
    let (mut properties, mut items) = (BTreeMap::new(), None);
    shape(root, schema, &mut properties, &mut items);
    match value {
        serde_json::Value::Object(map) if !properties.is_empty() => {
            let unknown: Vec<String> =
                map.keys().filter(|k| !properties.contains_key(k.as_str())).cloned().collect();
            for key in unknown {
                map.remove(&key);
                let near = nearest(&key, properties.keys().copied()).unwrap_or_default();
                warnings.push(format!(
                    "unknown key '{at}{key}' is left out (the nearest known key is '{at}{near}'); the rest of the \
                     file applies"
                ));
            }
            for (key, inner) in map.iter_mut() {
                drop_unknown_keys(inner, properties[key.as_str()], &format!("{at}{key}."), warnings);
            }
        }
        serde_json::Value::Array(list) => {
            if let Some(items) = items {
                let parent = at.trim_end_matches('.');
                for (i, inner) in list.iter_mut().enumerate() {
                    drop_unknown_keys(inner, items, &format!("{parent}[{i}]."), warnings);
                }
            }
        }
        _ => {}
    }
}

/// Removes the alert codes fluxplan does not have from `alerts:` and `alertRules:`, one warning
/// each naming the nearest code.
fn drop_unknown_codes(file: &mut PolicyFile, warnings: &mut Vec<String>) {
    let known = || DEFAULT_SEVERITIES.iter().map(|(code, _)| *code);
    let is_known = |code: &str| known().any(|k| k == code);
    let mut unknown = |code: &str, at: String| {
        let near = nearest(code, known()).unwrap_or_default();
        warnings.push(format!(
            "{at}: unknown alert code '{code}' is left out (the nearest code is '{near}'); the rest of the file applies"
        ));
    };
    if let Some(alerts) = &mut file.alerts {
        alerts.retain(|code, _| {
            is_known(code) || {
                unknown(code, "alerts".into());
                false
            }
        });
    }
    if let Some(rules) = &mut file.alert_rules {
        let mut i = 0;
        rules.retain(|rule| {
            i += 1;
            is_known(&rule.code) || {
                unknown(&rule.code, format!("alertRules[{}]", i - 1));
                false
            }
        });
    }
}

fn collect_keys(
    root: &serde_json::Value,
    schema: &serde_json::Value,
    prefix: &str,
    keys: &mut std::collections::BTreeSet<String>,
) {
    let (mut properties, mut items) = (BTreeMap::new(), None);
    shape(root, schema, &mut properties, &mut items);
    if let Some(items) = items {
        collect_keys(root, items, prefix, keys);
    }
    for (name, property) in properties {
        let key = if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") };
        collect_keys(root, property, &key, keys);
        keys.insert(key);
    }
}

impl Policy {
    /// Reads a policy file; what it leaves out keeps its default.
    /// Unknown keys and alert codes are left out with a warning each (`warnings`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut warnings = Vec::new();
        let mut file: PolicyFile = match crate::yaml::parse_documents(text)?.pop() {
            Some(mut doc) => {
                drop_unknown_keys(&mut doc, file_schema(), "", &mut warnings);
                serde_json::from_value(doc).map_err(|e| e.to_string())?
            }
            None => return Ok(Policy::default()),
        };
        drop_unknown_codes(&mut file, &mut warnings);
        let mut policy = Policy { warnings, ..Policy::default() };
        if let Some(mass) = file.mass_deletion {
            policy.max_deletions = mass.max_objects.unwrap_or(policy.max_deletions);
            policy.max_deletion_percent = mass.max_percent.unwrap_or(policy.max_deletion_percent);
            policy.min_deletions_for_percent =
                mass.min_objects_for_percent.unwrap_or(policy.min_deletions_for_percent);
        }
        if let Some(kinds) = file.protected_kinds {
            policy.protected_kinds = kinds.into_iter().collect();
        }
        if let Some(roots) = file.roots {
            DeclaredRoot::validate(&roots)?;
            policy.roots = Some(roots);
        }
        if let Some(sources) = file.sources {
            DeclaredSource::validate(&sources)?;
            policy.sources = sources;
        }
        for (kind_group, scope) in file.crd_scopes.unwrap_or_default() {
            let (kind, group) = kind_group
                .split_once('.')
                .filter(|(kind, group)| !kind.is_empty() && !group.is_empty())
                .ok_or_else(|| {
                    format!(
                        "crdScopes: '{kind_group}' is not Kind.group (e.g. ClusterIssuer.cert-manager.io)"
                    )
                })?;
            let scope = match scope.as_str() {
                "Cluster" => Scope::Cluster,
                "Namespaced" => Scope::Namespaced,
                other => {
                    return Err(format!("crdScopes.{kind_group}: '{other}' is not Cluster or Namespaced"))
                }
            };
            policy.crd_scopes.push((group.to_string(), kind.to_string(), scope));
        }
        if let Some(max) = file.capacity.and_then(|c| c.max_request_increase) {
            policy.capacity_max_increase = super::capacity::MaxIncrease::parse(
                max.cpu.as_ref(),
                max.memory.as_ref(),
                max.storage.as_ref(),
            )?;
        }
        for (code, severity) in file.alerts.unwrap_or_default() {
            let severity = parse_severity(&severity, &format!("alerts.{code}"))?;
            policy.severities.insert(code, severity);
        }
        for (i, rule) in file.alert_rules.unwrap_or_default().into_iter().enumerate() {
            parse_severity(&rule.severity, &format!("alertRules[{i}].severity"))?;
            policy.rules.push(rule);
        }
        Ok(policy)
    }

    /// An alert with this policy's severity for its code, or `None` when the code is off.
    pub(crate) fn alert(
        &self,
        code: &str,
        cluster: &str,
        kustomization: Option<String>,
        message: String,
        objects: Vec<String>,
    ) -> Option<Alert> {
        let severity = self.severity_in(code, cluster, &objects)?;
        Some(Alert {
            severity,
            code: code.to_string(),
            cluster: (!cluster.is_empty()).then(|| cluster.to_string()),
            kustomization,
            message,
            objects,
            related_codes: Vec::new(),
            cause: None,
            locations: Vec::new(),
            shown_elsewhere: false,
            also_blocking: Vec::new(),
        })
    }

    /// The severity this policy gives a code; `None` when it is off.
    pub fn severity(&self, code: &str) -> Option<Severity> {
        self.severities.get(code).copied().unwrap_or(Some(Severity::Warning))
    }

    /// The severity of an alert of `code` in `cluster` about `objects`: the last `alertRules`
    /// entry that covers it, else the code's.
    pub fn severity_in(&self, code: &str, cluster: &str, objects: &[String]) -> Option<Severity> {
        match self.rules.iter().rev().find(|rule| rule.covers(code, cluster, objects)) {
            Some(rule) => parse_severity(&rule.severity, "").ok().flatten(),
            None => self.severity(code),
        }
    }

    /// An alert not tied to a cluster (policy notes), with this policy's severity.
    pub fn general_alert(&self, code: &str, message: String) -> Option<Alert> {
        self.alert(code, "", None, message, Vec::new())
    }
}

/// The alerts of a plan under `policy`, sorted by severity.
pub fn evaluate(
    policy: &Policy,
    plans: &[KustomizationPlan],
    base: &Render,
    head: &Render,
    blast_radius: &BTreeMap<String, BlastRadius>,
) -> Vec<Alert> {
    // A cluster whose root fails or changes has one alert saying so, and no other.
    let unplanned = super::roots::problems(base, head);
    let mut alerts = super::roots::alerts(policy, &unplanned);
    alerts.extend(super::roots::sync_alerts(policy, base, head));
    for plan in plans.iter().filter(|p| !unplanned.contains_key(&p.cluster)) {
        alerts.extend(plan_alerts(policy, plan, plans, base, head));
    }
    alerts.extend(causes::deletion_alerts(policy, plans, base, head, blast_radius));
    alerts.extend(dependants::alerts(policy, plans, base, head));
    for (cluster, radius) in blast_radius {
        for warning in &radius.warnings {
            alerts.extend(policy.alert(
                "cluster-read-incomplete",
                cluster,
                None,
                warning.clone(),
                Vec::new(),
            ));
        }
    }
    alerts.extend(source_ref_alerts(policy, base, head));
    alerts.extend(
        super::moved_sources::alerts(policy, base, head)
            .into_iter()
            .filter(|a| a.cluster.as_ref().is_none_or(|c| !unplanned.contains_key(c))),
    );
    alerts.extend(super::argo_revisions::alerts(policy, base, head));
    alerts.extend(
        spec_change_alerts(policy, base, head)
            .into_iter()
            .filter(|a| a.cluster.as_ref().is_none_or(|c| !unplanned.contains_key(c))),
    );
    // Files left out for their size: what Flux would read is not what was rendered.
    let mut breaches: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (revision, render) in [("head", head), ("base", base)] {
        for breach in &render.source_limits {
            breaches.entry(breach.as_str()).or_default().push(revision);
        }
    }
    for (breach, revisions) in breaches {
        alerts.extend(
            policy.general_alert("source-limit", format!("at {}: {breach}", revisions.join(" and "))),
        );
    }
    // A Kustomization this merge deletes is not also "no longer updated": the removal alert says it.
    let deleted: BTreeSet<KustomizationRef> =
        causes::deleted_kustomizations(plans).into_iter().map(|(_, k)| k).collect();
    let known: BTreeSet<&str> = base.unreachable.iter().map(|u| u.file.as_str()).collect();
    for unreachable in head.unreachable.iter().filter(|u| !known.contains(u.file.as_str())) {
        // A file without a namespace gets it from whatever rendered it at base.
        let rendered_before = base
            .kustomizations()
            .map(|(_, k)| k)
            .find(|k| k.file.as_deref() == Some(unreachable.file.as_str()) && k.name == unreachable.name);
        let reference = match (rendered_before, &unreachable.namespace) {
            (Some(k), None) => k.reference(),
            _ => KustomizationRef {
                namespace: unreachable.namespace.clone().unwrap_or_else(|| "flux-system".into()),
                name: unreachable.name.clone(),
            },
        };
        if deleted.contains(&reference) {
            continue;
        }
        alerts.extend(policy.alert(
            "unreachable-kustomization",
            "",
            Some(reference.to_string()),
            format!(
                "Kustomization {} in {} is not reached from any root: Flux will not apply it (if it runs in \
                 the cluster now, nothing updates it any more)",
                unreachable.name, unreachable.file
            ),
            Vec::new(),
        ));
    }
    sort(&mut alerts);
    alerts
}

/// A GitRepository rendered as this repository that followed a branch and whose `spec.ref` the
/// pull request changes: Flux then applies another revision (a pinned commit or tag, another
/// branch) than the tree this plan shows. A source pinned at base was never planned as what
/// Flux applies (its plans show the tree the next pin would take); moving its pin is not said.
fn source_ref_alerts(policy: &Policy, base: &Render, head: &Render) -> Vec<Alert> {
    let mut alerts = Vec::new();
    for (cluster, k) in head.kustomizations() {
        for object in &k.objects {
            let Some(id) = object.id.as_ref() else { continue };
            let key = format!("{}/{}", id.namespace, id.name);
            let ours = id.kind == "GitRepository" && id.group == crate::flux::SOURCE_GROUP;
            if !ours || !head.this_repo_sources.contains(&key) {
                continue;
            }
            // Wherever base defined it: the pull request may move it to another Kustomization.
            let Some(earlier) = base.object(&cluster.name, &id.to_string()) else { continue };
            // Pointed at another repository: Flux applies that one, not this revision.
            let url = |o: &serde_json::Value| o["spec"]["url"].as_str().unwrap_or("").to_string();
            let (url_was, url_now) = (url(&earlier.object), url(&object.object));
            if crate::git::normalize_url(&url_was) != crate::git::normalize_url(&url_now) {
                let message = format!(
                    "GitRepository {key} now points at {} (it pointed at {}): after the merge Flux applies that \
                     repository, which this plan does not show",
                    crate::git::redact_url(&url_now),
                    crate::git::redact_url(&url_was)
                );
                let reference = Some(k.reference().to_string());
                alerts.extend(policy.alert("sync-changed", &cluster.name, reference, message, Vec::new()));
            }
            let (was, now) = (&earlier.object["spec"]["ref"], &object.object["spec"]["ref"]);
            if was == now || pin_of(was).is_some() {
                continue;
            }
            let change = match pin_of(now) {
                Some(pin) => format!("now pins spec.ref to {pin} (it followed {})", describe_ref(was)),
                None => format!("now follows {} instead of {}", describe_ref(now), describe_ref(was)),
            };
            let message = format!(
                "GitRepository {key} {change}: Flux applies that revision, not what this merge leaves on the \
                 branch the plan was made against, so this plan does not show what Flux applies"
            );
            let reference = Some(k.reference().to_string());
            alerts.extend(policy.alert("source-ref-pinned", &cluster.name, reference, message, Vec::new()));
        }
    }
    alerts
}

/// What a `spec.ref` pins other than a branch (`tag v1`, `commit abc…`), if anything.
fn pin_of(reference: &serde_json::Value) -> Option<String> {
    ["tag", "semver", "name", "commit"]
        .iter()
        .find_map(|key| Some(format!("{key} {}", reference[*key].as_str().filter(|v| !v.is_empty())?)))
}

/// `branch main`, `tag v1`, … (the fields set), or `the default branch`.
fn describe_ref(reference: &serde_json::Value) -> String {
    let set: Vec<String> = ["branch", "tag", "semver", "name", "commit"]
        .iter()
        .filter_map(|key| Some(format!("{key} {}", reference[*key].as_str().filter(|v| !v.is_empty())?)))
        .collect();
    if set.is_empty() {
        "the default branch".into()
    } else {
        set.join(", ")
    }
}

/// Most severe first, then by cluster, Kustomization and code.
pub fn sort(alerts: &mut [Alert]) {
    alerts.sort_by(|a, b| {
        (a.severity, &a.cluster, &a.kustomization, &a.code).cmp(&(
            b.severity,
            &b.cluster,
            &b.kustomization,
            &b.code,
        ))
    });
}

/// The verdict: blocked on any danger alert, else changes or no changes.
pub fn verdict(plans: &[KustomizationPlan], alerts: &[Alert]) -> Verdict {
    if alerts.iter().any(|a| a.severity == Severity::Danger) {
        Verdict::Blocked
    } else if plans.iter().any(|p| {
        p.counts.any_change()
            || p.base_unknown
            || matches!(
                p.status,
                KustomizationStatus::Added | KustomizationStatus::Removed | KustomizationStatus::Changed
            )
    }) || alerts.iter().any(|a| a.code == "chart-unavailable")
    {
        // A chart fluxplan could not see may change anything: never "no changes".
        Verdict::Changes
    } else {
        Verdict::NoChanges
    }
}

/// A Kustomization's own alerts, deletions aside: a failing render, sources not planned,
/// unresolved variables, ownership moves.
fn plan_alerts(
    policy: &Policy,
    plan: &KustomizationPlan,
    plans: &[KustomizationPlan],
    base: &Render,
    head: &Render,
) -> Vec<Alert> {
    let reference = plan.reference();
    let alert = |code: &str, message: String, objects: Vec<String>| {
        policy.alert(code, &plan.cluster, Some(reference.clone()), message, objects)
    };
    let mut alerts = Vec::new();
    if let Some(error) = &plan.error {
        let code = match error.code {
            "path-not-found" | "source-limit" => error.code,
            _ => "build-failed",
        };
        // Over one of fluxplan's own limits, or built from a remote base fluxplan never fetches,
        // the controller may well apply it: unplanned, not failing.
        let consequence = if code == "source-limit" {
            "fluxplan cannot say what it applies or prunes: review it by hand".to_string()
        } else if error.code == "remote-base" {
            format!(
                "{} fetches remote bases (unless it runs with `--no-remote-bases`) and fluxplan does not: what \
                 it applies and prunes is not planned: review it by hand",
                plan.controller()
            )
        } else {
            format!(
                "{} fails to reconcile it and applies and prunes nothing until this is fixed",
                plan.controller()
            )
        };
        alerts.extend(alert(code, format!("{}. {consequence}.", error.message), Vec::new()).map(|mut a| {
            a.cause = causes::spec_change(plan, base, head);
            a
        }));
    }
    if let Some(k) = head.unit(&plan.cluster, &plan.unit_ref()) {
        if k.status == Status::External && k.source.kind == "ExternalArtifact" {
            // An ExternalArtifact usually comes from this repository: not building it is a gap.
            let why = k.warnings.iter().find(|w| w.starts_with(&format!("source {}", k.source)));
            alerts.extend(alert(
                "external-artifact",
                why.cloned()
                    .unwrap_or_else(|| format!("source {} is not built locally: not planned", k.source)),
                Vec::new(),
            ));
        } else if let Some(adds) = k.source_adds.as_ref().filter(|_| k.status == Status::External) {
            // Planned at base, not now: what the source adds (another repository, submodules) may
            // be anything, and nothing of it is shown.
            let planned_before =
                base.unit(&plan.cluster, &plan.unit_ref()).is_some_and(|b| b.status != Status::External);
            let code = if planned_before { "source-adds-content" } else { "external-source" };
            let message = format!(
                "source {} is this repository and more ({adds}): what Flux applies from it is not planned",
                k.source
            );
            alerts.extend(alert(code, message, Vec::new()));
        } else if k.status == Status::External && (k.helm.is_some() || k.resourceset.is_some()) {
            // A release whose chart cannot be had, a ResourceSet whose inputs only the cluster
            // knows: never passed as unchanged, but a warning when this merge changes or adds its
            // object (its status says it otherwise).
            let (code, consequence) = match k.helm {
                Some(_) => (
                    "chart-unavailable",
                    "what helm-controller installs, upgrades or deletes for it is not shown",
                ),
                None => (
                    "resourceset-unknown",
                    "what the Flux Operator creates, updates or deletes for it is not shown",
                ),
            };
            let changed =
                plan.own_object_action(plans, |a| matches!(a, super::Action::Create | super::Action::Update));
            // The chart may change with the HelmRelease object as it was: its source's tag, a
            // HelmChart's version, another repository.
            let asked =
                super::helm_release::asked_chart_change(base.unit(&plan.cluster, &plan.unit_ref()), Some(k));
            let why = k.warnings.first().map(String::as_str).unwrap_or("it could not be rendered");
            let message = match &asked {
                Some((before, after)) => format!(
                    "its chart changes ({}) and fluxplan could not have it: {why}; {consequence}",
                    super::helm_release::describe_change(before, after)
                ),
                None => format!("not planned: {why}; {consequence}"),
            };
            alerts.extend((changed || asked.is_some()).then(|| alert(code, message, Vec::new())).flatten());
        } else if let Some(why) = k.secret_spec.as_ref().filter(|_| k.status == Status::External) {
            // It takes what it is from Secrets: planning it would tell them. Changed by this merge,
            // or planned before it, what it applies and prunes after it is not shown: a danger;
            // else it stands as it was.
            let changed =
                plan.own_object_action(plans, |a| matches!(a, super::Action::Create | super::Action::Update));
            let planned_before =
                base.unit(&plan.cluster, &plan.unit_ref()).is_some_and(|b| b.status != Status::External);
            let (code, consequence) = if changed || planned_before {
                (
                    "secret-spec",
                    "this merge changes it (or makes it so), and what it applies and prunes after the merge is not \
                     shown: review it by hand",
                )
            } else {
                ("external-source", "this merge does not change it")
            };
            alerts.extend(alert(
                code,
                format!(
                    "{why}, so fluxplan does not plan it (what it renders would tell the values); {consequence}"
                ),
                Vec::new(),
            ));
        } else if let Some(moved) = (k.status == Status::External)
            .then(|| super::moved_sources::repointed(base, head, &plan.cluster, k))
            .flatten()
        {
            // Re-pointed to another repository: what it applies after the merge is not shown.
            alerts.extend(alert(super::moved_sources::CODE, moved, Vec::new()));
        } else if k.status == Status::External {
            // The unit says why: another repository and how to map it, a sync this pull request
            // changed; Argo CD's Helm, plugins, generators.
            let message = k
                .warnings
                .first()
                .cloned()
                .unwrap_or_else(|| format!("source {} is not in this repository: not planned", k.source));
            // A revision this repository cannot resolve hides what will sync: a warning.
            let code = if k.argocd.as_ref().is_some_and(|u| u.unknown_revision) {
                "unknown-revision"
            } else {
                "external-source"
            };
            alerts.extend(alert(code, message, Vec::new()));
        }
        let before = base.unit(&plan.cluster, &plan.unit_ref());
        if super::helm_release::base_unknown(before, Some(k)) {
            let why = before.map(super::helm_release::why_not_rendered).unwrap_or_default();
            let change = super::helm_release::asked_chart_change(before, Some(k))
                .map(|(b, a)| format!(" (its chart: {})", super::helm_release::describe_change(&b, &a)))
                .unwrap_or_default();
            alerts.extend(alert(
                "chart-unavailable",
                format!(
                    "base unknown{change}: its chart at base could not be had ({why}), so what this \
                     merge changes in the release cannot be told from the base render: {}",
                    if plan.base_unknown {
                        "its objects are not listed as creates"
                    } else {
                        "the objects it holds now are not compared with the head render"
                    }
                ),
                Vec::new(),
            ));
        }
        if let Some(helm) = k.helm.as_ref().filter(|h| !h.archive_differences.is_empty()) {
            alerts.extend(alert(
                "chart-archive-hidden",
                archive_hidden_message(&helm.archive_differences),
                Vec::new(),
            ));
        }
        if !k.unresolved_variables.is_empty() {
            alerts.extend(alert(
                "unresolved-substitution",
                format!(
                    "{} come from substituteFrom sources only the cluster knows; shown as written (plan with a \
                     cluster snapshot to resolve them)",
                    k.unresolved_variables.iter().map(|v| format!("${{{v}}}")).collect::<Vec<_>>().join(", ")
                ),
                Vec::new(),
            ));
        }
    }
    // What the cluster answers a chart and `helm template` does not.
    if let Some(helm) = head
        .unit(&plan.cluster, &plan.unit_ref())
        .filter(|k| k.status == Status::Rendered)
        .and_then(|k| k.helm.as_deref())
    {
        if !helm.lookup.is_empty() {
            alerts.extend(alert(
                "chart-lookup",
                format!(
                    "its chart calls lookup ({}): helm template answers lookup with an empty map, helm-controller's \
                     Helm with what the API server holds, so what the release installs cannot be planned exactly",
                    helm.lookup.join(", ")
                ),
                Vec::new(),
            ));
        }
        if !helm.capabilities_assumed.is_empty() {
            alerts.extend(alert(
                "capabilities-assumed",
                format!(
                    "its chart reads .Capabilities ({}) and no Kubernetes version is known (--kube-version, a \
                     clusters file's kubeVersion, or a read cluster): Helm {}'s built-in Kubernetes version and API \
                     versions stood for the cluster's",
                    helm.capabilities_assumed.join(", "),
                    helm.helm
                ),
                Vec::new(),
            ));
        }
    }
    // A release left installed by a HelmRelease removed from Git, or left behind in the cluster a
    // HelmRelease's kubeConfig no longer names.
    match &plan.release_fate {
        Some(super::ReleaseFate::Orphaned(what)) => {
            alerts.extend(alert("helmrelease-orphaned", what.clone(), Vec::new()));
        }
        Some(super::ReleaseFate::Moved { from, to, retargeted }) => {
            let mut message = format!(
                "spec.kubeConfig changes, so helm-controller installs the release in {to}, and the Helm release \
                 it installed in {from} stays there, managed by nothing (helm-controller compares only names \
                 and namespaces before it reinstalls; it never uninstalls from the old cluster)"
            );
            if let Some(retargeted) = retargeted {
                message.push_str(&format!("; and {retargeted}"));
            }
            alerts.extend(alert("release-cluster-changed", message, Vec::new()));
        }
        _ => {}
    }
    // A release Helm left failed or pending: the next upgrade starts from there.
    if let Some(status) =
        plan.release_status.as_deref().filter(|s| *s == "failed" || s.starts_with("pending-"))
    {
        alerts.extend(alert(
            "helm-release-stuck",
            format!(
                "Helm's storage says the release is {status}: helm-controller's next upgrade starts from a release \
                 that did not finish (its spec.upgrade.remediation decides whether it retries, rolls back or \
                 uninstalls); what the cluster holds may not be what the last revision installed"
            ),
            Vec::new(),
        ));
    }
    for change in plan.changes.iter().filter(|c| c.moved_to.is_some()) {
        if let Some(message) = super::ownership_moves::alert_message(change, &plan.unit_ref()) {
            alerts.extend(alert(super::ownership_moves::CODE, message, vec![change.id.clone()]));
            continue;
        }
        let to = change.moved_to.as_deref().unwrap_or("?");
        alerts.extend(alert(
            "ownership-move",
            format!(
                "{} moves from {reference} to {to}: if {reference} prunes before {to} applies, it is deleted and \
                 recreated",
                change.display_name(),
            ),
            vec![change.id.clone()],
        ));
    }
    alerts
}

/// What a chart archive holds that a render of its unpacked directory would not show: the
/// entries named (the first ten), since they are what a reviewer must read.
fn archive_hidden_message(differences: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut named = differences.iter().take(SHOWN).cloned().collect::<Vec<_>>().join("; ");
    if differences.len() > SHOWN {
        named.push_str(&format!("; and {} more", differences.len() - SHOWN));
    }
    format!(
        "its chart archive holds entries that helm-controller installs (Helm's archive loader reads them) but that \
         `helm template` of the unpacked chart would hide or read otherwise; they are planned as the controller \
         loads them: {named}"
    )
}

/// Warnings for behaviour switches a PR flips on a Kustomization that exists on both sides.
fn spec_change_alerts(policy: &Policy, base: &Render, head: &Render) -> Vec<Alert> {
    let mut alerts = Vec::new();
    for (cluster, k) in head.kustomizations() {
        let Some(after) = &k.spec else { continue };
        let before = base.kustomization(&cluster.name, &k.namespace, &k.name).and_then(|b| b.spec.as_ref());
        let Some(before) = before else { continue };
        let reference = KustomizationRef { namespace: k.namespace.clone(), name: k.name.clone() }.to_string();
        let mut push = |code: &str, message: String| {
            alerts.extend(policy.alert(code, &cluster.name, Some(reference.clone()), message, Vec::new()));
        };
        if before.prune != after.prune {
            push(
                "prune-changed",
                if after.prune {
                    "prune switched on: from now on objects removed from its path are deleted".into()
                } else {
                    "prune switched off: objects removed from its path are left in the cluster".into()
                },
            );
        }
        if before.suspend != after.suspend {
            push(
                "suspend-changed",
                if after.suspend {
                    "suspended: Flux stops applying and pruning it".into()
                } else {
                    "resumed: Flux applies (and prunes) everything it drifted from while suspended".into()
                },
            );
        }
        if before.target_namespace != after.target_namespace {
            push(
                "target-namespace-changed",
                format!(
                    "targetNamespace changes from {} to {}: every namespaced object moves (created anew, the old \
                     ones pruned)",
                    before.target_namespace.as_deref().unwrap_or("(none)"),
                    after.target_namespace.as_deref().unwrap_or("(none)")
                ),
            );
        }
    }
    alerts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_overrides_and_keeps_defaults() {
        let policy = Policy::parse(
            "massDeletion:\n  maxObjects: 50\nprotectedKinds: [Namespace]\nalerts:\n  build-failed: warning\n  ownership-move: off\n",
        )
        .unwrap();
        assert_eq!(policy.max_deletions, 50);
        assert_eq!(policy.max_deletion_percent, 30.0);
        assert_eq!(policy.protected_kinds.len(), 1);
        assert_eq!(policy.severities["build-failed"], Some(Severity::Warning));
        assert_eq!(policy.severities["ownership-move"], None);
        assert_eq!(policy.severities["empty-render"], Some(Severity::Danger));
    }

    #[test]
    fn parses_declared_roots() {
        let policy =
            Policy::parse("roots:\n- path: clusters/prod\n  name: production\n- path: clusters/staging\n")
                .unwrap();
        let roots = policy.roots.unwrap();
        assert_eq!(
            roots[0],
            DeclaredRoot { path: "clusters/prod".into(), name: Some("production".into()), source: None }
        );
        assert_eq!(roots[1].name, None);
        assert_eq!(policy.severities["root-failed"], Some(Severity::Danger));
        assert_eq!(policy.severities["roots-changed"], Some(Severity::Danger));
    }

    #[test]
    fn reads_declared_crd_scopes() {
        let policy =
            Policy::parse("crdScopes:\n  ClusterPool.example.io: Cluster\n  Widget.example.io: Namespaced\n")
                .unwrap();
        assert_eq!(
            policy.crd_scopes,
            vec![
                ("example.io".to_string(), "ClusterPool".to_string(), Scope::Cluster),
                ("example.io".to_string(), "Widget".to_string(), Scope::Namespaced)
            ]
        );
        assert!(Policy::parse("crdScopes:\n  Widget: Cluster\n").is_err());
        assert!(Policy::parse("crdScopes:\n  Widget.example.io: cluster\n").is_err());
    }

    #[test]
    fn rejects_invalid_values() {
        assert!(Policy::parse("alerts:\n  build-failed: fatal\n").is_err());
        assert!(Policy::parse("roots:\n- path: ''\n").is_err());
        assert!(Policy::parse("massDeletion:\n  maxObjects: many\n").is_err());
        assert_eq!(Policy::parse("").unwrap(), Policy::default());
    }

    #[test]
    fn a_typo_leaves_out_its_key_with_the_nearest_known_one_and_keeps_the_rest() {
        let policy = Policy::parse(
            "massDeletion:\n  maxObject: 5\n  maxPercent: 20\nroot:\n- path: clusters/x\nroots:\n- path: clusters/prod\n  \
             nmae: production\nsources:\n- kind: OCIRepository\n  name: apps\n  pth: apps\nalerts:\n  mass-delition: warning\n  \
             build-failed: warning\nalertRules:\n- code: empty-rendr\n  severity: info\n- code: empty-render\n  \
             severty: info\n  severity: warning\n",
        )
        .unwrap();
        // Unknown keys where they are found (the top level first), then unknown codes.
        assert_eq!(
            policy.warnings,
            [
                "unknown key 'root' is left out (the nearest known key is 'roots'); the rest of the file applies",
                "unknown key 'massDeletion.maxObject' is left out (the nearest known key is 'massDeletion.maxObjects'); \
                 the rest of the file applies",
                "unknown key 'alertRules[1].severty' is left out (the nearest known key is 'alertRules[1].severity'); \
                 the rest of the file applies",
                "unknown key 'roots[0].nmae' is left out (the nearest known key is 'roots[0].name'); the rest of the \
                 file applies",
                "unknown key 'sources[0].pth' is left out (the nearest known key is 'sources[0].path'); the rest of \
                 the file applies",
                "alerts: unknown alert code 'mass-delition' is left out (the nearest code is 'mass-deletion'); the \
                 rest of the file applies",
                "alertRules[0]: unknown alert code 'empty-rendr' is left out (the nearest code is 'empty-render'); the \
                 rest of the file applies",
            ]
        );
        // The rest applies: the roots above all.
        assert_eq!(policy.max_deletions, Policy::default().max_deletions);
        assert_eq!(policy.max_deletion_percent, 20.0);
        assert_eq!(
            policy.roots,
            Some(vec![DeclaredRoot { path: "clusters/prod".into(), name: None, source: None }])
        );
        assert_eq!(policy.sources.len(), 1);
        assert_eq!(policy.sources[0].path, None);
        assert_eq!(policy.severities["build-failed"], Some(Severity::Warning));
        assert_eq!(policy.severities["mass-deletion"], Some(Severity::Danger));
        assert_eq!(policy.rules.len(), 1);
        assert_eq!(policy.rules[0].severity, "warning");
        // Maps of free names keep every name: a CRD's kind is no typo.
        let scopes = Policy::parse("crdScopes:\n  Widget.example.io: Cluster\n").unwrap();
        assert!(scopes.warnings.is_empty(), "{:?}", scopes.warnings);
    }
}
