//! The capacity a merge adds: per cluster and namespace, the CPU and memory that pods request
//! and may use (limits), and the storage claims ask for, before (base) and after (head).
//!
//! Kubernetes' rules (docs/capacity.md cites them):
//! - a pod's effective request is `max(sum(app and sidecar containers), max over init containers
//!   of (that init container + the sidecars started before it))` plus `spec.overhead`, pod-level
//!   `spec.resources` replacing the containers' figures (kubernetes/kubernetes
//!   `staging/src/k8s.io/component-helpers/resource/helpers.go`, KEP-753);
//! - a container with a limit and no request requests its limit (API defaulting);
//! - a container without a limit is unbounded, and so is its pod's limit;
//! - `replicas` defaults to 1; a workload an HorizontalPodAutoscaler scales counts its
//!   `minReplicas` (what is always requested), with a note of its maximum;
//! - a DaemonSet runs one pod per node: times the node count where the cluster was read, else
//!   shown per node.

pub mod quantity;

use super::{Action, Alert, KustomizationPlan, KustomizationStatus, Policy};
use crate::flux::ObjectId;
use crate::render::{Render, RenderedObject};
use quantity::{format_bytes, format_cpu, QuantityError, Read};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The alert code for a namespace whose requests grow past `capacity.maxRequestIncrease`.
pub const CODE: &str = "capacity-increase";

/// What a namespace's pods request and may use, and its claims' storage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub cpu_request_millicores: u64,
    pub memory_request_bytes: u64,
    /// `null`: unbounded (some container has no CPU limit).
    pub cpu_limit_millicores: Option<u64>,
    /// `null`: unbounded (some container has no memory limit).
    pub memory_limit_bytes: Option<u64>,
    /// PersistentVolumeClaims' and StatefulSets' volumeClaimTemplates' requested storage.
    pub storage_bytes: u64,
}

impl Resources {
    fn add(&mut self, other: &Resources) {
        self.cpu_request_millicores =
            self.cpu_request_millicores.saturating_add(other.cpu_request_millicores);
        self.memory_request_bytes = self.memory_request_bytes.saturating_add(other.memory_request_bytes);
        self.cpu_limit_millicores = add_limit(self.cpu_limit_millicores, other.cpu_limit_millicores);
        self.memory_limit_bytes = add_limit(self.memory_limit_bytes, other.memory_limit_bytes);
        self.storage_bytes = self.storage_bytes.saturating_add(other.storage_bytes);
    }

    fn times(&self, n: u64) -> Resources {
        Resources {
            cpu_request_millicores: self.cpu_request_millicores.saturating_mul(n),
            memory_request_bytes: self.memory_request_bytes.saturating_mul(n),
            cpu_limit_millicores: self.cpu_limit_millicores.map(|v| v.saturating_mul(n)),
            memory_limit_bytes: self.memory_limit_bytes.map(|v| v.saturating_mul(n)),
            storage_bytes: self.storage_bytes.saturating_mul(n),
        }
    }

    fn is_zero(&self) -> bool {
        *self
            == Resources { cpu_limit_millicores: Some(0), memory_limit_bytes: Some(0), ..Default::default() }
    }

    const ZERO: Resources = Resources {
        cpu_request_millicores: 0,
        memory_request_bytes: 0,
        cpu_limit_millicores: Some(0),
        memory_limit_bytes: Some(0),
        storage_bytes: 0,
    };
}

fn add_limit(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.saturating_add(b?))
}

fn max_limit(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.max(b?))
}

/// One side (base or head) of a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// Everything counted: workloads × replicas, DaemonSets × nodes when the node count is known.
    pub total: Resources,
    /// DaemonSets' pods where the node count is not known: this much on every node, on top.
    #[serde(default = "zero", skip_serializing_if = "Resources::is_zero")]
    pub per_node: Resources,
    /// Quantities that could not be read (malformed, negative): the figures leave them out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

fn zero() -> Resources {
    Resources::ZERO
}

impl Default for Side {
    fn default() -> Self {
        Side { total: Resources::ZERO, per_node: Resources::ZERO, unreadable: Vec::new() }
    }
}

/// A namespace whose figures the merge changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NamespaceCapacity {
    pub namespace: String,
    pub before: Side,
    pub after: Side,
    /// How workloads were counted where it is a choice (an autoscaler's range, a capped quantity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A cluster's namespaces whose figures change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClusterCapacity {
    pub cluster: String,
    /// The node count read from the cluster (DaemonSets are counted on each); `null`: unknown,
    /// DaemonSets are shown per node.
    pub nodes: Option<u64>,
    pub namespaces: Vec<NamespaceCapacity>,
}

/// Per cluster, the namespaces whose capacity changes; empty when none does.
pub type Capacity = Vec<ClusterCapacity>;

/// The policy's `capacity.maxRequestIncrease`: the most a namespace's requests may grow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MaxIncrease {
    pub cpu_millicores: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub storage_bytes: Option<u64>,
}

impl MaxIncrease {
    /// Reads `{cpu: "4", memory: 8Gi, storage: 100Gi}` (each optional).
    pub fn parse(
        cpu: Option<&Value>,
        memory: Option<&Value>,
        storage: Option<&Value>,
    ) -> Result<Self, String> {
        let read = |value: Option<&Value>, scale: u32, key: &str| -> Result<Option<u64>, String> {
            let Some(value) = value else { return Ok(None) };
            let text = quantity_text(value).ok_or_else(|| {
                format!("capacity.maxRequestIncrease.{key}: not a quantity (e.g. \"4\", 8Gi)")
            })?;
            match quantity::parse(&text, scale) {
                Ok(Read::Exact(v)) => Ok(Some(v)),
                Ok(Read::Capped) => Err(format!(
                    "capacity.maxRequestIncrease.{key}: '{text}' is larger than Kubernetes represents"
                )),
                Err(e) => Err(format!("capacity.maxRequestIncrease.{key}: {e}")),
            }
        };
        Ok(MaxIncrease {
            cpu_millicores: read(cpu, 3, "cpu")?,
            memory_bytes: read(memory, 0, "memory")?,
            storage_bytes: read(storage, 0, "storage")?,
        })
    }

    fn is_set(&self) -> bool {
        self.cpu_millicores.is_some() || self.memory_bytes.is_some() || self.storage_bytes.is_some()
    }
}

/// A quantity as YAML gives it: a string, or a number (`cpu: 2`, `cpu: 0.5`).
fn quantity_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The capacity of both renders, per cluster and namespace, keeping the namespaces that change.
/// `nodes` gives a cluster's node count where it was read.
pub fn compute(
    plans: &[KustomizationPlan],
    base: &Render,
    head: &Render,
    nodes: &dyn Fn(&str) -> Option<u64>,
) -> Capacity {
    let clusters: BTreeSet<&str> =
        base.clusters.iter().chain(&head.clusters).map(|c| c.name.as_str()).collect();
    let mut out = Vec::new();
    for cluster in clusters {
        let node_count = nodes(cluster);
        let before = tally(&objects(base, cluster, None), node_count);
        let mut head_objects = objects(head, cluster, Some((plans, base)));
        // A unit gone at head that deletes nothing (a release kept with pruning off) leaves its
        // objects running.
        for plan in plans.iter().filter(|p| {
            p.cluster == cluster
                && p.status == KustomizationStatus::Removed
                && !p.changes.iter().any(|c| c.action == Action::Delete)
        }) {
            for object in base.unit(cluster, &plan.unit_ref()).into_iter().flat_map(|u| &u.objects) {
                if let Some(id) = &object.id {
                    head_objects.entry(id.clone()).or_insert(&object.object);
                }
            }
        }
        // What the plan leaves in place though the head does not render it (skipped, orphaned:
        // pruning off, a finalizer absent, an empty path refused) keeps running.
        let kept: BTreeSet<ObjectId> = plans
            .iter()
            .filter(|p| p.cluster == cluster)
            .flat_map(|p| &p.changes)
            .filter(|c| matches!(c.action, Action::Skip | Action::Orphan))
            .filter_map(|c| ObjectId::parse(&c.id))
            .collect();
        if !kept.is_empty() {
            for object in base.objects_of(cluster) {
                if let Some(id) = object.id.as_ref().filter(|id| kept.contains(*id)) {
                    head_objects.entry(id.clone()).or_insert(&object.object);
                }
            }
        }
        let after = tally(&head_objects, node_count);
        let namespaces: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
        let mut changed = Vec::new();
        for namespace in namespaces {
            let (b, a) = (before.get(namespace), after.get(namespace));
            let side = |t: Option<&Tally>| t.map(|t| t.side.clone()).unwrap_or_default();
            let (b_side, a_side) = (side(b), side(a));
            if b_side == a_side {
                continue;
            }
            let mut notes: Vec<String> = a.map(|t| t.notes.clone()).unwrap_or_default();
            notes.extend(b.map(|t| t.notes.clone()).unwrap_or_default());
            notes.sort();
            notes.dedup();
            changed.push(NamespaceCapacity {
                namespace: namespace.clone(),
                before: b_side,
                after: a_side,
                notes,
            });
        }
        if !changed.is_empty() {
            out.push(ClusterCapacity {
                cluster: cluster.to_string(),
                nodes: node_count,
                namespaces: changed,
            });
        }
    }
    out
}

/// The objects a side leaves in a cluster, one per id. On the head side, a unit Flux applies
/// nothing of (its render fails, it is suspended or not rendered) keeps what the base applied.
fn objects<'r>(
    render: &'r Render,
    cluster: &str,
    keep_base: Option<(&[KustomizationPlan], &'r Render)>,
) -> BTreeMap<ObjectId, &'r Value> {
    let mut found = BTreeMap::new();
    for (c, unit) in render.kustomizations().filter(|(c, _)| c.name == cluster) {
        let kept = keep_base.and_then(|(plans, base)| {
            let plan = plans.iter().find(|p| {
                p.cluster == c.name
                    && p.kind == unit.kind
                    && p.namespace == unit.namespace
                    && p.name == unit.name
            })?;
            let applies_nothing = matches!(
                plan.status,
                KustomizationStatus::Failed | KustomizationStatus::Suspended | KustomizationStatus::External
            );
            applies_nothing.then(|| base.unit(cluster, &plan.unit_ref()))?
        });
        let objects: &[RenderedObject] = match kept {
            Some(base_unit) => &base_unit.objects,
            None => &unit.objects,
        };
        for object in objects {
            if let Some(id) = &object.id {
                found.entry(id.clone()).or_insert(&*object.object);
            }
        }
    }
    found
}

#[derive(Default)]
struct Tally {
    side: Side,
    notes: Vec<String>,
}

/// Sums a side's objects per namespace.
fn tally(objects: &BTreeMap<ObjectId, &Value>, nodes: Option<u64>) -> BTreeMap<String, Tally> {
    let autoscaled = autoscalers(objects);
    let mut out: BTreeMap<String, Tally> = BTreeMap::new();
    for (id, object) in objects {
        let namespace = if id.namespace.is_empty() { "default" } else { id.namespace.as_str() };
        let display = crate::flux::id::display_name(&id.kind, namespace, &id.name);
        let mut read = Reader { display: &display, unreadable: Vec::new(), notes: Vec::new() };
        let (pod_spec, count) = match (id.group.as_str(), id.kind.as_str()) {
            ("apps", "Deployment" | "StatefulSet" | "ReplicaSet") | ("", "ReplicationController") => {
                let replicas =
                    match autoscaled.get(&(namespace.to_string(), id.kind.clone(), id.name.clone())) {
                        Some(hpa) => {
                            read.notes.push(format!(
                            "{display}: scaled by HorizontalPodAutoscaler {} between {} and {} replicas, \
                             counted at {}",
                            hpa.name, hpa.min, hpa.max, hpa.min
                        ));
                            Some(hpa.min)
                        }
                        None => read.replicas(&object["spec"]["replicas"]),
                    };
                (Some(&object["spec"]["template"]["spec"]), Count::Replicas(replicas.unwrap_or(0)))
            }
            ("apps", "DaemonSet") => (Some(&object["spec"]["template"]["spec"]), Count::PerNode),
            ("", "Pod") => (Some(&object["spec"]), Count::Replicas(1)),
            ("", "PersistentVolumeClaim") => (None, Count::Replicas(1)),
            _ => continue,
        };
        let mut each = pod_spec.map(|spec| read.pod(spec)).unwrap_or(Resources::ZERO);
        if id.kind == "PersistentVolumeClaim" {
            each.storage_bytes = read.storage(&object["spec"]);
        }
        let entry = out.entry(namespace.to_string()).or_default();
        match count {
            Count::Replicas(n) => {
                entry.side.total.add(&each.times(n));
                if id.kind == "StatefulSet" {
                    // Each replica gets its own claim from every template.
                    let claims: u64 = object["spec"]["volumeClaimTemplates"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|t| read.storage(&t["spec"]))
                        .fold(0, u64::saturating_add);
                    entry.side.total.storage_bytes =
                        entry.side.total.storage_bytes.saturating_add(claims.saturating_mul(n));
                }
            }
            Count::PerNode => match nodes {
                Some(nodes) => entry.side.total.add(&each.times(nodes)),
                None => entry.side.per_node.add(&each),
            },
        }
        entry.side.unreadable.extend(read.unreadable);
        entry.notes.extend(read.notes);
    }
    out
}

enum Count {
    Replicas(u64),
    PerNode,
}

struct Autoscaler {
    name: String,
    min: u64,
    max: u64,
}

/// The workloads HorizontalPodAutoscalers scale, by (namespace, kind, name).
fn autoscalers(objects: &BTreeMap<ObjectId, &Value>) -> BTreeMap<(String, String, String), Autoscaler> {
    let mut out = BTreeMap::new();
    for (id, hpa) in
        objects.iter().filter(|(id, _)| id.group == "autoscaling" && id.kind == "HorizontalPodAutoscaler")
    {
        let spec = &hpa["spec"];
        let (Some(kind), Some(name)) =
            (spec["scaleTargetRef"]["kind"].as_str(), spec["scaleTargetRef"]["name"].as_str())
        else {
            continue;
        };
        // minReplicas defaults to 1 (autoscaling/v2); maxReplicas is required.
        let min = spec["minReplicas"].as_u64().filter(|n| *n <= i32::MAX as u64).unwrap_or(1);
        let max = spec["maxReplicas"].as_u64().filter(|n| *n <= i32::MAX as u64).unwrap_or(min);
        let namespace = if id.namespace.is_empty() { "default" } else { id.namespace.as_str() };
        out.insert(
            (namespace.to_string(), kind.to_string(), name.to_string()),
            Autoscaler { name: id.name.clone(), min, max },
        );
    }
    out
}

/// Reads one object's figures, collecting what it cannot read.
struct Reader<'a> {
    display: &'a str,
    unreadable: Vec<String>,
    notes: Vec<String>,
}

#[derive(Clone, Copy)]
struct Figures {
    request: u64,
    /// `None`: unbounded.
    limit: Option<u64>,
}

const RESOURCES: [(&str, u32); 2] = [("cpu", 3), ("memory", 0)];

impl Reader<'_> {
    /// `replicas`: absent reads 1, as the API defaults it; `None` when invalid (the API refuses
    /// the object, so it adds nothing).
    fn replicas(&mut self, value: &Value) -> Option<u64> {
        match value {
            Value::Null => Some(1),
            v => match v.as_u64().filter(|n| *n <= i32::MAX as u64) {
                Some(n) => Some(n),
                None => {
                    self.unreadable.push(format!(
                        "{}: replicas {} is not a count from 0 to 2147483647 (Kubernetes refuses it)",
                        self.display,
                        shorten(&v.to_string())
                    ));
                    None
                }
            },
        }
    }

    /// A quantity of `resources[field][name]`, `None` when absent or unreadable.
    fn quantity(&mut self, list: &Value, name: &str, scale: u32, what: &str) -> Option<u64> {
        let value = list.get(name)?;
        let Some(text) = quantity_text(value) else {
            self.unreadable.push(format!("{}: {what} {name}: not a quantity", self.display));
            return None;
        };
        match quantity::parse(&text, scale) {
            Ok(Read::Exact(v)) => Some(v),
            Ok(Read::Capped) => {
                self.notes.push(format!(
                    "{}: {what} {name} '{}' exceeds what Kubernetes represents: counted at 2^63-1",
                    self.display,
                    shorten(&text)
                ));
                Some(quantity::MAX)
            }
            Err(e @ (QuantityError::Malformed(_) | QuantityError::Negative(_))) => {
                self.unreadable.push(format!("{}: {what} {name}: {e}", self.display));
                None
            }
        }
    }

    /// A container's request and limit of one resource; a limit without a request is the
    /// request too (API defaulting).
    fn container(&mut self, container: &Value, name: &str, scale: u32) -> Figures {
        let resources = &container["resources"];
        let limit = self.quantity(&resources["limits"], name, scale, "limit");
        let request = self.quantity(&resources["requests"], name, scale, "request");
        Figures { request: request.or(limit).unwrap_or(0), limit }
    }

    /// A pod's effective requests and limits (the formula above), no storage.
    fn pod(&mut self, spec: &Value) -> Resources {
        let mut result = Resources::ZERO;
        for (name, scale) in RESOURCES {
            let list = |key: &str| spec[key].as_array().cloned().unwrap_or_default();
            let mut sum = Figures { request: 0, limit: Some(0) };
            for container in list("containers") {
                let f = self.container(&container, name, scale);
                sum = Figures {
                    request: sum.request.saturating_add(f.request),
                    limit: add_limit(sum.limit, f.limit),
                };
            }
            let mut sidecars = Figures { request: 0, limit: Some(0) };
            let mut init = Figures { request: 0, limit: Some(0) };
            for container in list("initContainers") {
                let f = self.container(&container, name, scale);
                let running = if container["restartPolicy"].as_str() == Some("Always") {
                    // A sidecar runs on beside the app containers: it adds to them.
                    sum = Figures {
                        request: sum.request.saturating_add(f.request),
                        limit: add_limit(sum.limit, f.limit),
                    };
                    sidecars = Figures {
                        request: sidecars.request.saturating_add(f.request),
                        limit: add_limit(sidecars.limit, f.limit),
                    };
                    sidecars
                } else {
                    Figures {
                        request: f.request.saturating_add(sidecars.request),
                        limit: add_limit(f.limit, sidecars.limit),
                    }
                };
                init = Figures {
                    request: init.request.max(running.request),
                    limit: max_limit(init.limit, running.limit),
                };
            }
            let mut pod =
                Figures { request: sum.request.max(init.request), limit: max_limit(sum.limit, init.limit) };
            // Pod-level resources (PodLevelResources) replace the containers' figures.
            let pod_limit = self.quantity(&spec["resources"]["limits"], name, scale, "pod limit");
            let pod_request = self.quantity(&spec["resources"]["requests"], name, scale, "pod request");
            if let Some(limit) = pod_limit {
                pod.limit = Some(limit);
            }
            if let Some(request) = pod_request {
                pod.request = request;
            }
            // The runtime's overhead comes on top (a RuntimeClass sets it at admission; a
            // manifest may carry it).
            if let Some(overhead) = self.quantity(&spec["overhead"], name, scale, "overhead") {
                pod.request = pod.request.saturating_add(overhead);
                pod.limit = pod.limit.map(|l| l.saturating_add(overhead));
            }
            match name {
                "cpu" => {
                    (result.cpu_request_millicores, result.cpu_limit_millicores) = (pod.request, pod.limit)
                }
                _ => (result.memory_request_bytes, result.memory_limit_bytes) = (pod.request, pod.limit),
            }
        }
        result
    }

    /// A claim spec's requested storage.
    fn storage(&mut self, spec: &Value) -> u64 {
        self.quantity(&spec["resources"]["requests"], "storage", 0, "storage request").unwrap_or(0)
    }
}

fn shorten(text: &str) -> String {
    let mut cut: String = text.chars().take(24).collect();
    if text.chars().count() > 24 {
        cut.push('…');
    }
    cut
}

/// `capacity-increase` for every namespace whose requests grow past the policy's maximum, or
/// whose head figures cannot be read while a maximum is set. Strictly above: at the maximum is
/// allowed.
pub fn alerts(policy: &Policy, plans: &[KustomizationPlan], capacity: &Capacity) -> Vec<Alert> {
    let max = &policy.capacity_max_increase;
    if !max.is_set() {
        return Vec::new();
    }
    let mut alerts = Vec::new();
    for cluster in capacity {
        for ns in &cluster.namespaces {
            let rise = |after: u64, before: u64| after.saturating_sub(before);
            // DaemonSets on an unknown node count: counted on one node (the least they add).
            let (b, a) = (&ns.before, &ns.after);
            let cpu = rise(
                a.total.cpu_request_millicores.saturating_add(a.per_node.cpu_request_millicores),
                b.total.cpu_request_millicores.saturating_add(b.per_node.cpu_request_millicores),
            );
            let memory = rise(
                a.total.memory_request_bytes.saturating_add(a.per_node.memory_request_bytes),
                b.total.memory_request_bytes.saturating_add(b.per_node.memory_request_bytes),
            );
            let storage = rise(a.total.storage_bytes, b.total.storage_bytes);
            let mut over = Vec::new();
            if let Some(limit) = max.cpu_millicores.filter(|limit| cpu > *limit) {
                over.push(format!("CPU requests rise by {} (above {})", format_cpu(cpu), format_cpu(limit)));
            }
            if let Some(limit) = max.memory_bytes.filter(|limit| memory > *limit) {
                over.push(format!(
                    "memory requests rise by {} (above {})",
                    format_bytes(memory),
                    format_bytes(limit)
                ));
            }
            if let Some(limit) = max.storage_bytes.filter(|limit| storage > *limit) {
                over.push(format!(
                    "storage claims rise by {} (above {})",
                    format_bytes(storage),
                    format_bytes(limit)
                ));
            }
            if !a.unreadable.is_empty() {
                over.push(format!(
                    "the increase cannot be told, {} quantities cannot be read ({})",
                    a.unreadable.len(),
                    a.unreadable.first().map(String::as_str).unwrap_or_default()
                ));
            }
            if over.is_empty() {
                continue;
            }
            let objects = changed_workloads(plans, &cluster.cluster, &ns.namespace);
            alerts.extend(policy.alert(
                CODE,
                &cluster.cluster,
                None,
                format!(
                    "namespace {}: {}; capacity.maxRequestIncrease allows a namespace's requests to grow by at most {}",
                    ns.namespace,
                    over.join(", "),
                    describe(max)
                ),
                objects,
            ));
        }
    }
    alerts
}

/// The created and updated objects of a namespace that hold pods or claims: what the alert is
/// about (and what `alertRules` match by namespace or kind).
fn changed_workloads(plans: &[KustomizationPlan], cluster: &str, namespace: &str) -> Vec<String> {
    const KINDS: [&str; 7] = [
        "Deployment",
        "StatefulSet",
        "ReplicaSet",
        "DaemonSet",
        "ReplicationController",
        "Pod",
        "PersistentVolumeClaim",
    ];
    let mut ids: Vec<String> = plans
        .iter()
        .filter(|p| p.cluster == cluster)
        .flat_map(|p| &p.changes)
        .filter(|c| matches!(c.action, Action::Create | Action::Update))
        .filter(|c| KINDS.contains(&c.kind.as_str()) && c.namespace == namespace)
        .map(|c| c.id.clone())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

fn describe(max: &MaxIncrease) -> String {
    let mut parts = Vec::new();
    if let Some(cpu) = max.cpu_millicores {
        parts.push(format!("cpu {}", format_cpu(cpu)));
    }
    if let Some(memory) = max.memory_bytes {
        parts.push(format!("memory {}", format_bytes(memory)));
    }
    if let Some(storage) = max.storage_bytes {
        parts.push(format!("storage {}", format_bytes(storage)));
    }
    parts.join(", ")
}

/// One row of the reports' capacity table: each figure `before → after`, or one value when it
/// does not change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub cluster: String,
    pub namespace: String,
    pub cpu_requests: String,
    pub cpu_limits: String,
    pub memory_requests: String,
    pub memory_limits: String,
    pub storage: String,
}

/// The table rows, in order, and the notes under it.
pub fn rows(capacity: &Capacity) -> (Vec<Row>, Vec<String>) {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for cluster in capacity {
        for ns in &cluster.namespaces {
            let figure = |get: &dyn Fn(&Side) -> Option<Option<u64>>, format: fn(u64) -> String| {
                let show = |side: &Side| -> String {
                    let total =
                        get(side).map_or_else(|| "—".to_string(), |v| v.map_or("unbounded".into(), format));
                    let per_node = match get(&Side { total: side.per_node, ..Side::default() }) {
                        Some(Some(0)) | None => String::new(),
                        Some(Some(v)) => format!(" + {}/node", format(v)),
                        Some(None) => " + unbounded/node".to_string(),
                    };
                    format!("{total}{per_node}")
                };
                let (before, after) = (show(&ns.before), show(&ns.after));
                if before == after {
                    before
                } else {
                    format!("{before} → {after}")
                }
            };
            rows.push(Row {
                cluster: cluster.cluster.clone(),
                namespace: ns.namespace.clone(),
                cpu_requests: figure(&|s| Some(Some(s.total.cpu_request_millicores)), format_cpu),
                cpu_limits: figure(&|s| Some(s.total.cpu_limit_millicores), format_cpu),
                memory_requests: figure(&|s| Some(Some(s.total.memory_request_bytes)), format_bytes),
                memory_limits: figure(&|s| Some(s.total.memory_limit_bytes), format_bytes),
                storage: figure(&|s| Some(Some(s.total.storage_bytes)), format_bytes),
            });
            for unreadable in &ns.after.unreadable {
                notes.push(format!("{} {}: not counted: {unreadable}", cluster.cluster, ns.namespace));
            }
            for note in &ns.notes {
                notes.push(format!("{} {}: {note}", cluster.cluster, ns.namespace));
            }
        }
        if cluster.nodes.is_none()
            && cluster.namespaces.iter().any(|n| !n.after.per_node.is_zero() || !n.before.per_node.is_zero())
        {
            notes.push(format!(
                "{}: the node count is not known (no cluster read): DaemonSets are shown per node",
                cluster.cluster
            ));
        }
    }
    (rows, notes)
}

#[cfg(test)]
mod tests;
