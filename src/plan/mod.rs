//! The plan: what a merge will create, change and delete, with the alerts that can block it.
//! Pure computation over two renders and, when given, a cluster snapshot.

pub mod actual;
mod api_removed;
mod argo_revisions;
mod blast;
pub mod capacity;
mod causes;
mod claims;
mod compute;
mod dependants;
pub mod diff;
mod distribution;
mod failing_before;
mod fan_out;
mod helm_hooks;
mod helm_release;
pub mod images;
pub(crate) mod label_selector;
pub mod live_diff;
mod moved_sources;
mod ownership_moves;
pub mod policy;
mod release_target;
mod resourceset;
pub mod review;
mod roots;
pub mod unplanned;
pub mod versions;

pub use compute::compute;
pub use policy::Policy;
pub use roots::without_phantom_roots;

pub use crate::cluster::BlastRadius;
use crate::render::ErrorReport;
use serde::Serialize;

/// What Flux will do with one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Create,
    Update,
    Delete,
    /// In the inventory, not desired, yet kept (protected, no longer owned, moved, gone).
    Skip,
    /// Not desired and kept because pruning is off: Flux stops managing it.
    Orphan,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Skip => "skip",
            Action::Orphan => "orphan",
        }
    }
}

/// Why an object leaves the cluster (or Flux's hands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// This pull request stops rendering it (a file removed, a path changed, ...).
    PullRequest,
    /// In the cluster's inventory but not in the base render either: Flux prunes it on its next
    /// reconcile whether or not this merges.
    Stale,
    /// Deleted along with something else: a Kustomization's finalizer, a Namespace, a CRD.
    Cascade,
}

/// One object's fate.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Change {
    pub action: Action,
    /// The inventory id.
    pub id: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why it is deleted or orphaned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
    /// Deleted by Kubernetes or a finalizer because something else is deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cascade_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<String>,
    /// Unified diff of the desired state, base render → head render (updates only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Changes that cannot be shown, e.g. "Secret data key `password` changed (value hidden)".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hidden_changes: Vec<String>,
    /// What Kubernetes deletes along with this deletion (a Namespace's contents, a CRD's
    /// instances, a claim's volume).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub takes_with_it: Vec<String>,
    /// Set when the object is a Helm hook the release's install, upgrade or test runs: created
    /// by Helm around the release, not part of its manifest (never pruned with it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<HookRun>,
}

/// When Helm runs a hook and when it deletes it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct HookRun {
    /// Its events (`helm.sh/hook`): `pre-install`, `post-upgrade`, `test`, ...
    pub events: Vec<String>,
    /// Its `helm.sh/hook-delete-policy` (`before-hook-creation`, `hook-succeeded`,
    /// `hook-failed`, comma-separated); Helm applies `before-hook-creation` when none is given.
    #[serde(rename = "deletePolicy")]
    pub delete_policy: String,
}

impl Change {
    /// `Kind namespace/name`, as people read it.
    pub fn display_name(&self) -> String {
        crate::flux::id::display_name(&self.kind, &self.namespace, &self.name)
    }
}

/// Live state that already differs from the base render: the drift any reconcile reverts, this
/// merge's included. Known only with a cluster snapshot holding live objects.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Drift {
    pub id: String,
    pub display: String,
    /// Unified diff, live → base render: what differs before this pull request.
    pub diff: String,
    /// Unified diff, live → head render, when this pull request changes the object too: what
    /// the merge does to the live object, drift reverted and change applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_merge: Option<String>,
    /// Argo CD `ignoreDifferences` rules for the object that could not be applied to the diffs
    /// (jq beyond plain paths, managed-fields managers): what they leave alone may show.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignore_rules_not_applied: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum KustomizationStatus {
    Unchanged,
    Changed,
    /// New in this PR.
    Added,
    /// No longer produced by the head render.
    Removed,
    /// Its render fails: Flux applies and prunes nothing of it.
    Failed,
    /// Suspended at head: Flux applies and prunes nothing of it.
    Suspended,
    /// Its source is not local: not planned.
    External,
}

/// Where the inventory a plan compares with came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum InventorySource {
    /// The cluster snapshot (the truth).
    Cluster,
    /// Offline: the base render stands for the cluster.
    BaseRender,
    None,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Counts {
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub skip: usize,
    pub orphan: usize,
    pub unchanged: usize,
}

impl Counts {
    pub fn add(&mut self, action: Action) {
        match action {
            Action::Create => self.create += 1,
            Action::Update => self.update += 1,
            Action::Delete => self.delete += 1,
            Action::Skip => self.skip += 1,
            Action::Orphan => self.orphan += 1,
        }
    }

    pub fn merge(&mut self, other: &Counts) {
        self.create += other.create;
        self.update += other.update;
        self.delete += other.delete;
        self.skip += other.skip;
        self.orphan += other.orphan;
        self.unchanged += other.unchanged;
    }

    /// True when something in the cluster changes.
    pub fn any_change(&self) -> bool {
        self.create + self.update + self.delete + self.orphan > 0
    }
}

/// The plan of one Kustomization (or Argo CD Application).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct KustomizationPlan {
    /// The cluster (repository root) it belongs to.
    pub cluster: String,
    /// `flux` or `argocd`: whose rules the changes follow.
    pub engine: crate::render::Engine,
    /// `Kustomization`, `Application` or `ApplicationSet`.
    pub kind: crate::render::UnitKind,
    pub namespace: String,
    pub name: String,
    pub status: KustomizationStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The unit that applies it (`Kustomization ns/name` for a HelmRelease).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// A HelmRelease's chart: `podinfo 6.5.0`, or `podinfo 6.5.0 → 6.6.0` when this merge changes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart: Option<String>,
    /// A HelmRelease's release status as Helm's storage has it (`deployed`, `failed`,
    /// `pending-upgrade`), when the cluster was read with its storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release_status: Option<String>,
    /// A release whose base chart could not be had, planned offline: what it holds
    /// before the merge is unknown, so the objects its head renders are not listed as creates
    /// (its notes and a `chart-unavailable` alert say so).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub base_unknown: bool,
    pub changes: Vec<Change>,
    pub counts: Counts,
    pub inventory_size: usize,
    pub inventory_source: InventorySource,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReport>,
    /// Objects whose live state differs from the base render: drift this merge reverts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<Drift>,
    /// Notes for readers (why nothing happens, where a cascade comes from).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Inventory ids the head render desires, sorted: the inventory Flux should hold after the
    /// merge (what the follow-up compares the cluster with). Not part of the plan's JSON.
    #[serde(skip)]
    pub desired: Vec<String>,
    /// Of those, the ones marked `ssa: Ignore` or `reconcile: disabled`: never applied, so
    /// whether they are in the inventory after the merge says nothing about the plan.
    #[serde(skip)]
    pub unmanaged: Vec<String>,
    /// What becomes of a HelmRelease's Helm release beyond an upgrade, for its alert (its notes
    /// say it in the JSON).
    #[serde(skip)]
    pub release_fate: Option<ReleaseFate>,
}

/// What helm-controller does to a HelmRelease's Helm release beyond installing or upgrading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseFate {
    /// The HelmRelease is deleted and its finalizer uninstalls the release: what it does.
    Uninstalled(String),
    /// Its release target changes (`change`: `release name db → db2`): the release is
    /// uninstalled and installed anew, as `what` says.
    Reinstalled { change: String, what: String },
    /// The HelmRelease is no longer in Git, yet its release stays installed: why.
    Orphaned(String),
    /// `spec.kubeConfig` changes: the release is installed in another cluster and the old one is
    /// left there, unmanaged. `retargeted`: what else changes of its release target, which
    /// uninstalls the old release should the new kubeConfig reach the same cluster.
    Moved { from: String, to: String, retargeted: Option<String> },
}

impl KustomizationPlan {
    /// `namespace/name`; `HelmRelease namespace/name` for a release and `ResourceSet
    /// namespace/name` for a ResourceSet, which may share their namespace and name with a
    /// Kustomization.
    pub fn reference(&self) -> String {
        match self.kind {
            crate::render::UnitKind::HelmRelease | crate::render::UnitKind::ResourceSet => self.label(),
            _ => format!("{}/{}", self.namespace, self.name),
        }
    }

    pub fn unit_ref(&self) -> crate::render::UnitRef {
        crate::render::UnitRef::new(self.kind, &self.namespace, &self.name)
    }

    /// True when this merge takes an action `counts` on the unit's own object (its parent
    /// creates, updates or deletes it), in any unit of its cluster.
    pub(crate) fn own_object_action(
        &self,
        plans: &[KustomizationPlan],
        counts: impl Fn(Action) -> bool,
    ) -> bool {
        let id =
            crate::flux::ObjectId::new(&self.namespace, &self.name, self.kind.group(), self.kind.as_str())
                .to_string();
        plans
            .iter()
            .filter(|p| p.cluster == self.cluster)
            .flat_map(|p| &p.changes)
            .any(|c| c.id == id && counts(c.action))
    }

    /// `Kustomization ns/name`, `Application ns/name`: how messages name it.
    pub fn label(&self) -> String {
        format!("{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }

    /// The controller that applies and prunes it, as messages name it.
    pub fn controller(&self) -> &'static str {
        match self.kind {
            crate::render::UnitKind::ApplicationSet => "the ApplicationSet controller",
            _ => self.engine.controller(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    Danger,
    Warning,
    Info,
}

/// Something reviewers must see; `danger` blocks the merge.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Alert {
    pub severity: Severity,
    pub code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// `namespace/name` of the Kustomization concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kustomization: Option<String>,
    pub message: String,
    /// Inventory ids of the objects concerned.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<String>,
    /// Other codes that apply to the same cause (one alert per cause carries the most severe).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related_codes: Vec<String>,
    /// The change in the pull request that triggered it, as a diff line reads
    /// (`clusters/prod/apps.yaml: path ./apps → ./empty`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// The lines of the pull request's files that cause it: where check-run annotations and
    /// Code Quality findings point.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<SourceLocation>,
    /// True for an alert reports show elsewhere, once: a review finding's (among the findings), a
    /// version change's (in the version table).
    #[serde(skip)]
    pub shown_elsewhere: bool,
    /// Of `related_codes`, those the policy rates danger too: rated lower, this alert's code
    /// leaves them blocking (the way out names them all at once).
    #[serde(skip)]
    pub also_blocking: Vec<String>,
}

/// How `Plan::unit_files` keys a unit: its cluster and its reference (`KustomizationPlan::reference`).
pub fn unit_key(cluster: &str, reference: &str) -> String {
    format!("{cluster}\u{0}{reference}")
}

/// A line of a file of the pull request's head revision.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema)]
pub struct SourceLocation {
    /// Relative to the repository's root, `/`-separated.
    pub path: String,
    /// 1-based.
    pub line: u32,
}

/// Deletions counted by cause.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct DeletionCauses {
    pub pull_request: usize,
    pub cascade: usize,
    pub stale: usize,
}

impl DeletionCauses {
    fn count(plans: &[KustomizationPlan]) -> Self {
        let mut causes = DeletionCauses::default();
        for change in plans.iter().flat_map(|p| &p.changes).filter(|c| c.action == Action::Delete) {
            match change.cause.unwrap_or(Cause::PullRequest) {
                Cause::PullRequest => causes.pull_request += 1,
                Cause::Cascade => causes.cascade += 1,
                Cause::Stale => causes.stale += 1,
            }
        }
        causes
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    NoChanges,
    Changes,
    Blocked,
    Failed,
}

impl Verdict {
    /// As the JSON plan spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::NoChanges => "no-changes",
            Verdict::Changes => "changes",
            Verdict::Blocked => "blocked",
            Verdict::Failed => "failed",
        }
    }

    /// The CLI exit code: 0 no changes, 1 changes, 2 blocked, 3 could not plan.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::NoChanges => 0,
            Verdict::Changes => 1,
            Verdict::Blocked => 2,
            Verdict::Failed => 3,
        }
    }
}

/// One side of the comparison.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Revision {
    pub rev: String,
    pub commit: Option<String>,
}

/// Changes when a fix changes what a plan of the same commits says. 2: `.gitattributes`, file
/// names that are not UTF-8 and sources that add other repositories' content no longer hide
/// files from the plan, and a pull request that pins its source's revision is blocked. The bot plans again every open
/// pull request whose latest plan is of an older generation (its status may rest on what a
/// pull request hid). 3: Argo CD revisions are resolved (a pinned branch, tag or commit is
/// rendered, a change blocks), directory sources read dot-files, and changes only units fluxplan
/// does not render read are `changes`, not `no-changes`. 4: a Flux Operator sync the pull
/// request adds or points elsewhere no longer makes its source this repository. 5: every change
/// is reviewed (`review`): an immutable field changed blocks. 6: a FluxInstance's patches shape
/// the root it generates, Helm 4 post-renders hooks, and offline the base revision's Helm
/// releases render as upgrades. 7: a release's hooks that the pull request adds or changes are
/// changes of the release (counted and reviewed), a chart calling `lookup` makes a change of its
/// release never `no-changes`, and hooks are post-rendered as `spec.postRenderStrategy` says.
pub const GENERATION: u64 = 7;

/// The plan JSON's format (`schemaVersion`): raised when a key changes meaning or goes away; new
/// keys and new values of an enumeration (a unit kind, an alert code) do not raise it.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole plan.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Plan {
    #[serde(rename = "schemaVersion")]
    pub schema_version: u32,
    pub verdict: Verdict,
    pub base: Revision,
    pub head: Revision,
    pub summary: Counts,
    /// The deletions by cause: what this pull request deletes, what goes with it, and what Flux
    /// prunes anyway.
    pub deletions: DeletionCauses,
    /// The change that triggered the most severe alert: the first thing a reviewer reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    pub kustomizations: Vec<KustomizationPlan>,
    pub alerts: Vec<Alert>,
    /// What the review of every change found (an immutable field changed, more privilege, a Flux
    /// setting that does more than it says), most severe first: each is an alert too.
    pub findings: Vec<review::Finding>,
    /// Changed files no planned unit accounts for: those units fluxplan does not render read
    /// (with the units), and those no unit reads (a README).
    pub unplanned_changes: Vec<unplanned::UnplannedChange>,
    /// Container images and charts the merge moves to another version, each change once.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<versions::VersionChange>,
    /// Per cluster, the namespaces whose requests, limits or claimed storage the merge changes,
    /// before and after (docs/capacity.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity: capacity::Capacity,
    /// Where the policy came from (`built-in defaults`, `.fluxplan.yaml at base`, a file).
    pub policy_source: String,
    /// Set when the cluster could not be read: the plan is offline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
    /// Per cluster: what Kubernetes deletes along with the plan's deletions (live clusters only).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub blast_radius: std::collections::BTreeMap<String, BlastRadius>,
    /// When the plan could not be made: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The kustomize that rendered both revisions (its version decides the manifests' fidelity).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kustomize: Option<String>,
    /// The `GENERATION` of the fluxplan that made the plan.
    pub generation: u64,
    /// The file defining each unit (head's, else base's), keyed by `unit_key`: where a report
    /// places an alert that has no location (Code Quality). Not part of the plan's JSON.
    #[serde(skip)]
    pub unit_files: std::collections::BTreeMap<String, String>,
}

/// The JSON Schema of the plan JSON (`docs/plan.schema.json`), generated from these types as they
/// serialize. Objects are open: a later fluxplan may add keys without raising `SCHEMA_VERSION`.
pub fn json_schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().for_serialize().into_generator();
    serde_json::to_value(generator.into_root_schema_for::<Plan>()).expect("schemas serialize")
}

impl Plan {
    /// Digest of what the plan says will happen (verdict, changes, alerts, and the base branch it
    /// merges into; not the commits):
    /// an approval holds only while a re-plan says the same.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        // What the live cluster merely counts (Pods come and go, drift moves) is not what was
        // approved: the changes and the alerts' codes and objects are.
        let mut kustomizations = self.kustomizations.clone();
        for k in &mut kustomizations {
            k.drift.clear();
            for change in &mut k.changes {
                change.takes_with_it.clear();
            }
        }
        let alerts: Vec<_> = self
            .alerts
            .iter()
            .map(|a| serde_json::json!([a.severity, a.code, a.cluster, a.kustomization, a.objects]))
            .collect();
        let content = serde_json::json!({
            // An approval for one base (one environment's branch) is not one for another.
            "base": self.base.rev,
            "verdict": self.verdict,
            "kustomizations": kustomizations,
            "alerts": alerts,
        });
        hex::encode(Sha256::digest(crate::yaml::canonical_json(&content).as_bytes()))
    }

    /// A plan that could not be made (exit 3), with the reason.
    pub fn failed(base: Revision, head: Revision, error: String) -> Self {
        Plan {
            schema_version: SCHEMA_VERSION,
            verdict: Verdict::Failed,
            base,
            head,
            summary: Counts::default(),
            deletions: DeletionCauses::default(),
            cause: None,
            kustomizations: Vec::new(),
            alerts: Vec::new(),
            findings: Vec::new(),
            unplanned_changes: Vec::new(),
            versions: Vec::new(),
            capacity: Vec::new(),
            policy_source: String::new(),
            degraded: None,
            blast_radius: Default::default(),
            error: Some(error),
            kustomize: None,
            generation: GENERATION,
            unit_files: Default::default(),
        }
    }
}

/// "What does Kubernetes delete along with these objects in the cluster of this root?"
pub type BlastRadiusQuery<'a> = dyn Fn(&str, &[crate::flux::ObjectId]) -> BlastRadius + 'a;

/// Everything a plan is made from.
pub struct PlanRequest<'a> {
    pub base: &'a crate::render::Render,
    pub head: &'a crate::render::Render,
    pub base_rev: String,
    pub head_rev: String,
    /// Cluster snapshots (from files or read live), each for the roots it names or for all.
    pub snapshots: &'a [&'a crate::cluster::snapshot::ClusterSnapshot],
    /// Asks the live cluster of a root what Kubernetes deletes along with these objects.
    pub blast_radius: Option<&'a BlastRadiusQuery<'a>>,
    /// Why the cluster could not be read, when it could not: the plan is offline.
    pub degraded: Option<String>,
    pub policy: &'a Policy,
    pub policy_source: String,
    /// Alerts found before planning (about the policy itself).
    pub extra_alerts: Vec<Alert>,
    /// The files the pull request changes (head against base), sorted.
    pub changed_files: Vec<String>,
    /// Those of them that are symbolic links at head.
    pub changed_symlinks: std::collections::BTreeSet<String>,
}

/// Compares base and head, applies the policy and gives the verdict.
pub fn make_plan(request: PlanRequest) -> Plan {
    let (base, head) = roots::without_phantom_roots(request.base, request.head);
    let (base, head) = (base.as_ref(), head.as_ref());
    let inputs = compute::Inputs { base, head, snapshots: request.snapshots };
    let (mut kustomizations, candidates) = compute::compute_with_review(&inputs);
    let mut blast_radius = std::collections::BTreeMap::new();
    if let Some(ask) = request.blast_radius {
        let mut deleted: std::collections::BTreeMap<&str, Vec<crate::flux::ObjectId>> = Default::default();
        for plan in &kustomizations {
            for change in plan.changes.iter().filter(|c| c.action == Action::Delete) {
                if matches!(
                    change.kind.as_str(),
                    "Namespace" | "CustomResourceDefinition" | "PersistentVolumeClaim"
                ) {
                    if let Some(id) = crate::flux::ObjectId::parse(&change.id) {
                        deleted.entry(plan.cluster.as_str()).or_default().push(id);
                    }
                }
            }
        }
        for (cluster, ids) in deleted {
            blast_radius.insert(cluster.to_string(), ask(cluster, &ids));
        }
    }
    blast::annotate(&mut kustomizations, base, head, &blast_radius);
    let mut alerts = request.extra_alerts;
    if let Some(reason) = &request.degraded {
        alerts.extend(request.policy.general_alert(
            "cluster-unreachable",
            format!("planned offline, the base render standing for the cluster's inventory: {reason}"),
        ));
    }
    for snapshot in request.snapshots {
        for warning in &snapshot.warnings {
            alerts.extend(request.policy.general_alert("cluster-read-incomplete", warning.clone()));
        }
    }
    alerts.extend(policy::evaluate(request.policy, &kustomizations, base, head, &blast_radius));
    alerts.extend(argo_revisions::new_pins(request.policy, base, head, &request.base_rev));
    alerts.extend(api_removed::alerts(request.policy, &kustomizations, head, request.snapshots));
    let versions = versions::changes(&kustomizations, base, head);
    alerts.extend(versions::alerts(request.policy, &versions));
    let node_count =
        |cluster: &str| request.snapshots.iter().find(|s| s.applies_to(cluster)).and_then(|s| s.nodes);
    let capacity = capacity::compute(&kustomizations, base, head, &node_count);
    alerts.extend(capacity::alerts(request.policy, &kustomizations, &capacity));
    let unplanned_changes =
        unplanned::account(&request.changed_files, &request.changed_symlinks, request.base, request.head);
    alerts.extend(unplanned::alerts(request.policy, &unplanned_changes));
    failing_before::relabel(
        &mut alerts,
        request.policy,
        &kustomizations,
        (base, head),
        &request.changed_files,
    );
    let (findings, finding_alerts) = review::rate(request.policy, candidates);
    alerts.extend(finding_alerts);
    policy::sort(&mut alerts);
    let mut summary = Counts::default();
    for plan in &kustomizations {
        summary.merge(&plan.counts);
    }
    // A head where nothing rendered for want of sources would read "no changes": it is a failure.
    let nothing_rendered = request.head.nothing_rendered();
    Plan {
        schema_version: SCHEMA_VERSION,
        verdict: match policy::verdict(&kustomizations, &alerts) {
            _ if nothing_rendered.is_some() => Verdict::Failed,
            // What units fluxplan did not render read changed: something may change.
            Verdict::NoChanges if unplanned_changes.iter().any(|u| !u.read_by.is_empty()) => Verdict::Changes,
            verdict => verdict,
        },
        base: Revision { rev: request.base_rev, commit: request.base.revision.clone() },
        head: Revision { rev: request.head_rev, commit: request.head.revision.clone() },
        summary,
        deletions: DeletionCauses::count(&kustomizations),
        // The cause of the most severe alert that has one.
        cause: alerts.iter().find_map(|a| a.cause.clone()),
        kustomizations,
        alerts,
        findings,
        unplanned_changes,
        versions,
        capacity,
        policy_source: request.policy_source,
        degraded: request.degraded,
        blast_radius,
        error: nothing_rendered,
        kustomize: Some(request.head.kustomize.clone()),
        generation: GENERATION,
        unit_files: Default::default(),
    }
}

#[cfg(test)]
mod verdict_tests {
    use super::Verdict;

    #[test]
    fn as_str_spells_the_verdict_as_the_json_does() {
        for verdict in [Verdict::NoChanges, Verdict::Changes, Verdict::Blocked, Verdict::Failed] {
            assert_eq!(serde_json::to_value(verdict).unwrap(), verdict.as_str());
        }
    }
}
