//! Plan vs actual: what a merge's plan predicted for each Kustomization, what the controller then
//! did, and how the two differ. Pure: the follow-up job reads the cluster, this module judges.

use super::{Action, Cause, KustomizationStatus, Plan};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What a plan predicts the controller does, per Kustomization (stored with the run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub kustomizations: Vec<PredictedKustomization>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictedKustomization {
    /// The repository root (cluster) it belongs to.
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    /// As the plan says it: unchanged, changed, added, removed, failed, suspended, external.
    pub status: String,
    /// Inventory ids the head render desires: the inventory expected after the merge.
    pub desired: Vec<String>,
    pub create: Vec<String>,
    /// Pruned by this Kustomization (cascades by Kubernetes are not its inventory's business).
    pub delete: Vec<String>,
    /// Dropped from the inventory, kept in the cluster (prune off).
    pub orphan: Vec<String>,
    /// Desired but never applied (`ssa: Ignore`, `reconcile: disabled`): in the inventory or not.
    #[serde(default)]
    pub unmanaged: Vec<String>,
}

impl PredictedKustomization {
    /// `cluster/namespace/name`: one follow-up per key and revision.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.cluster, self.namespace, self.name)
    }

    pub fn reference(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// True when the merge is predicted to do something to it: only those are watched.
    pub fn affected(&self) -> bool {
        matches!(self.status.as_str(), "changed" | "added" | "removed" | "failed")
            || !(self.create.is_empty() && self.delete.is_empty() && self.orphan.is_empty())
    }
}

fn status_word(status: KustomizationStatus) -> String {
    serde_json::to_value(status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

impl Prediction {
    pub fn of(plan: &Plan) -> Self {
        let mut kustomizations: Vec<PredictedKustomization> = plan
            .kustomizations
            .iter()
            // The follow-up reads Kustomization and Application inventories; Helm releases have none.
            .filter(|k| k.kind != crate::render::UnitKind::HelmRelease)
            .map(|k| {
                let ids = |keep: &dyn Fn(&super::Change) -> bool| {
                    let set: BTreeSet<String> =
                        k.changes.iter().filter(|c| keep(c)).map(|c| c.id.clone()).collect();
                    set.into_iter().collect::<Vec<_>>()
                };
                PredictedKustomization {
                    cluster: k.cluster.clone(),
                    namespace: k.namespace.clone(),
                    name: k.name.clone(),
                    status: status_word(k.status),
                    desired: k.desired.clone(),
                    create: ids(&|c| c.action == Action::Create),
                    delete: ids(&|c| c.action == Action::Delete && c.cause != Some(Cause::Cascade)),
                    orphan: ids(&|c| c.action == Action::Orphan),
                    unmanaged: k.unmanaged.clone(),
                }
            })
            .collect();
        kustomizations.sort_by_key(|k| k.key());
        Prediction { kustomizations }
    }

    pub fn affected(&self) -> impl Iterator<Item = &PredictedKustomization> {
        self.kustomizations.iter().filter(|k| k.affected())
    }
}

/// A Kustomization's `Ready` condition, as the controller wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// What the follow-up saw in the cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// The controller applied the merge's revision (or a later one). `inventory`: `None` when the
    /// Kustomization keeps none (v1beta1, or no inventory yet).
    Applied { revision: String, inventory: Option<Vec<String>>, ready: Option<Condition> },
    /// It attempted the revision and failed (Ready=False).
    Failed { revision: String, ready: Option<Condition> },
    /// The Kustomization is no longer in the cluster.
    Gone,
    /// It did not reach the revision before the deadline.
    TimedOut { last_applied: Option<String>, ready: Option<Condition> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Exact,
    Timeout,
    Differs,
    Failed,
}

impl Outcome {
    /// The `outcome` label of `fluxplan_prediction_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Exact => "exact",
            Outcome::Differs => "differs",
            Outcome::Failed => "failed",
            Outcome::Timeout => "timeout",
        }
    }
}

/// How one Kustomization's rollout compares with its prediction. Lists are sorted inventory ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KustomizationResult {
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    pub outcome: Outcome,
    /// The revision the controller reached (applied or attempted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<Condition>,
    /// Predicted created, not in the inventory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_created: Vec<String>,
    /// Predicted deleted (or orphaned), still in the inventory: a missed prune.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_deleted: Vec<String>,
    /// In the inventory, not predicted there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unexpected: Vec<String>,
    /// Predicted to stay (unchanged or updated), gone from the inventory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl KustomizationResult {
    pub fn reference(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

fn sorted(set: BTreeSet<&String>) -> Vec<String> {
    set.into_iter().cloned().collect()
}

/// How a prediction names an object whose real id holds a value substituted from a Secret: its
/// hash (see `hashed_id`), never the value. Plans no longer match such objects (their
/// Kustomization is not planned), but predictions stored by earlier versions still hold them.
const HASHED: &str = "sha256:";
/// What a shown name holds in place of a value substituted from a Secret (`render::postbuild`).
const MASKED: &str = "(masked:";

/// The form a prediction stores for a real id that holds a Secret's value.
pub fn hashed_id(id: &str) -> String {
    use sha2::{Digest, Sha256};
    format!("{HASHED}{}", hex::encode(Sha256::digest(id.as_bytes())))
}

/// Objects named from Secret values: compared by hash, counted, never listed (the cluster's
/// names would show the values; `compare` withholds the controller's message too).
fn compare_masked(result: &mut KustomizationResult, predicted: &PredictedKustomization) {
    // A masked create is judged by its hashed desired id (below, as missing when absent).
    result.not_created.retain(|id| !id.contains(MASKED));
    let before = result.missing.len();
    result.missing.retain(|id| !id.starts_with(HASHED));
    let differing = before - result.missing.len();
    let unexpected = std::mem::take(&mut result.unexpected).len();
    let unchecked = predicted.delete.iter().chain(&predicted.orphan).filter(|id| id.contains(MASKED)).count();
    result.not_deleted.retain(|id| !id.contains(MASKED));
    if differing + unexpected > 0 {
        result.outcome = Outcome::Differs;
        result.notes.push(format!(
            "names from Secret values: {} not as planned, {} in \
             the inventory the plan did not expect (not listed)",
            crate::words::count(differing, "predicted object", "predicted objects"),
            crate::words::count(unexpected, "object", "objects")
        ));
    }
    if unchecked > 0 {
        result.notes.push(format!(
            "{} to remove named from Secret values not checked",
            crate::words::count(unchecked, "object", "objects")
        ));
    }
}

/// Judges one Kustomization's rollout against its prediction.
pub fn compare(predicted: &PredictedKustomization, observed: &Observed) -> KustomizationResult {
    let mut result = KustomizationResult {
        cluster: predicted.cluster.clone(),
        namespace: predicted.namespace.clone(),
        name: predicted.name.clone(),
        outcome: Outcome::Exact,
        revision: None,
        ready: None,
        not_created: Vec::new(),
        not_deleted: Vec::new(),
        unexpected: Vec::new(),
        missing: Vec::new(),
        notes: Vec::new(),
    };
    let masked = predicted.desired.iter().chain(&predicted.unmanaged).any(|id| id.starts_with(HASHED))
        || predicted
            .create
            .iter()
            .chain(&predicted.delete)
            .chain(&predicted.orphan)
            .any(|id| id.contains(MASKED));
    let predicted_removed = predicted.status == "removed";
    let predicted_failed = predicted.status == "failed";
    match observed {
        Observed::Gone if predicted_removed => {}
        Observed::Gone => {
            result.outcome = Outcome::Differs;
            result.notes.push("the Kustomization is gone from the cluster; the plan kept it".into());
        }
        Observed::TimedOut { last_applied, ready } => {
            result.outcome = Outcome::Timeout;
            result.revision = last_applied.clone();
            result.ready = ready.clone();
        }
        Observed::Failed { revision, ready } => {
            result.outcome = Outcome::Failed;
            result.revision = Some(revision.clone());
            result.ready = ready.clone();
            if predicted_failed {
                result.notes.push("the plan predicted this failure (its render fails)".into());
            }
        }
        Observed::Applied { revision, inventory, ready } => {
            result.revision = Some(revision.clone());
            result.ready = ready.clone();
            if predicted_removed {
                result
                    .notes
                    .push("the plan removed this Kustomization; the controller still reconciles it".into());
            }
            if predicted_failed {
                result.notes.push("the plan predicted its render fails; the controller applied it".into());
            }
            match inventory {
                None if !predicted.desired.is_empty() || !predicted.create.is_empty() => {
                    result.notes.push("it keeps no inventory: its objects cannot be compared".into());
                }
                None => {}
                Some(inventory) => {
                    let hashed: Vec<String> = match masked {
                        // An id the prediction holds only hashed is matched by its hash.
                        true => inventory
                            .iter()
                            .map(|id| {
                                let plain =
                                    predicted.desired.contains(id) || predicted.unmanaged.contains(id);
                                if plain {
                                    id.clone()
                                } else {
                                    hashed_id(id)
                                }
                            })
                            .collect(),
                        false => inventory.clone(),
                    };
                    let inventory: BTreeSet<&String> = hashed.iter().collect();
                    let create: BTreeSet<&String> = predicted.create.iter().collect();
                    let desired: BTreeSet<&String> = predicted.desired.iter().collect();
                    let leaving: BTreeSet<&String> =
                        predicted.delete.iter().chain(&predicted.orphan).collect();
                    let unmanaged: BTreeSet<&String> = predicted.unmanaged.iter().collect();
                    result.not_created = sorted(
                        create
                            .iter()
                            .filter(|id| !inventory.contains(*id) && !unmanaged.contains(*id))
                            .copied()
                            .collect(),
                    );
                    result.not_deleted = sorted(leaving.intersection(&inventory).copied().collect());
                    result.unexpected = sorted(
                        inventory
                            .iter()
                            .filter(|id| !desired.contains(*id) && !leaving.contains(*id))
                            .filter(|id| !unmanaged.contains(*id))
                            .copied()
                            .collect(),
                    );
                    result.missing = sorted(
                        desired
                            .iter()
                            .filter(|id| !create.contains(*id) && !inventory.contains(*id))
                            .filter(|id| !unmanaged.contains(*id))
                            .copied()
                            .collect(),
                    );
                }
            }
            if masked {
                compare_masked(&mut result, predicted);
            }
            let differs = !(result.not_created.is_empty()
                && result.not_deleted.is_empty()
                && result.unexpected.is_empty()
                && result.missing.is_empty())
                || predicted_removed
                || predicted_failed;
            if differs {
                result.outcome = Outcome::Differs;
            }
        }
    }
    if let Some(ready) = result.ready.as_mut().filter(|r| masked && !r.message.is_empty()) {
        ready.message = "(withheld: this Kustomization names objects from Secret values)".into();
    }
    result
}

/// A merge's follow-up as stored in its run: the Kustomizations watched, each one's result, and
/// the outcome once every one has answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Followup {
    /// The merge commit watched for.
    pub revision: String,
    /// Keys (`cluster/namespace/name`) of the watched Kustomizations, sorted.
    pub expected: Vec<String>,
    #[serde(default)]
    pub results: BTreeMap<String, KustomizationResult>,
    /// Set by the write that recorded the last result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The key whose result completed the follow-up: its job alone posts the comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_by: Option<String>,
    /// The follow-up comment is posted.
    #[serde(default)]
    pub commented: bool,
}

impl Followup {
    pub fn new(revision: &str, mut expected: Vec<String>) -> Self {
        expected.sort();
        expected.dedup();
        Followup { revision: revision.to_string(), expected, ..Default::default() }
    }

    /// Records one Kustomization's result (a later answer for the same key replaces an earlier
    /// one until the outcome is set). True when this record completed the follow-up.
    pub fn record(&mut self, key: &str, result: KustomizationResult) -> bool {
        if self.outcome.is_some() || !self.expected.iter().any(|k| k == key) {
            return false;
        }
        self.results.insert(key.to_string(), result);
        if self.expected.iter().all(|k| self.results.contains_key(k)) {
            self.outcome = Some(self.overall());
            self.completed_by = Some(key.to_string());
            return true;
        }
        false
    }

    /// The worst result: failed, then differs, then timeout, then exact.
    pub fn overall(&self) -> Outcome {
        self.results.values().map(|r| r.outcome).max().unwrap_or(Outcome::Exact)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn predicted() -> PredictedKustomization {
        PredictedKustomization {
            cluster: "prod".into(),
            namespace: "flux-system".into(),
            name: "apps".into(),
            status: "changed".into(),
            desired: vec!["default_kept__ConfigMap".into(), "default_new__ConfigMap".into()],
            create: vec!["default_new__ConfigMap".into()],
            delete: vec!["default_old__ConfigMap".into()],
            orphan: Vec::new(),
            unmanaged: Vec::new(),
        }
    }

    fn applied(ids: &[&str]) -> Observed {
        Observed::Applied {
            revision: "main@sha1:abc".into(),
            inventory: Some(ids.iter().map(|s| s.to_string()).collect()),
            ready: None,
        }
    }

    /// `default_app-s3cr3t__ConfigMap` is named from a Secret's value: the prediction holds it
    /// hashed (as earlier versions stored it), the plan's lists show it masked.
    fn predicted_with_a_secret_name() -> PredictedKustomization {
        PredictedKustomization {
            desired: vec!["default_kept__ConfigMap".into(), hashed_id("default_app-s3cr3t__ConfigMap")],
            create: vec!["default_app-(masked:SUFFIX)__ConfigMap".into()],
            delete: vec!["default_old-(masked:SUFFIX)__ConfigMap".into()],
            ..predicted()
        }
    }

    #[test]
    fn names_from_secret_values_are_matched_by_hash_and_never_shown() {
        let ready = Condition {
            status: "True".into(),
            reason: "ReconciliationSucceeded".into(),
            message: "applied default/app-s3cr3t".into(),
        };
        let exact = Observed::Applied {
            revision: "main@sha1:abc".into(),
            inventory: Some(vec!["default_kept__ConfigMap".into(), "default_app-s3cr3t__ConfigMap".into()]),
            ready: Some(ready.clone()),
        };
        let result = compare(&predicted_with_a_secret_name(), &exact);
        assert_eq!(result.outcome, Outcome::Exact, "{result:?}");
        assert!(!format!("{result:?}").contains("s3cr3t"), "{result:?}");
        // An object the plan did not expect, named from the value too: counted, not listed.
        let surprise = Observed::Applied {
            revision: "main@sha1:abc".into(),
            inventory: Some(vec![
                "default_kept__ConfigMap".into(),
                "default_app-s3cr3t__ConfigMap".into(),
                "default_extra-s3cr3t__ConfigMap".into(),
            ]),
            ready: Some(ready),
        };
        let result = compare(&predicted_with_a_secret_name(), &surprise);
        assert_eq!(result.outcome, Outcome::Differs);
        assert!(result.unexpected.is_empty());
        assert!(result.notes.iter().any(|n| n.contains("1 object in the inventory")), "{:?}", result.notes);
        assert!(!format!("{result:?}").contains("s3cr3t"), "{result:?}");
    }

    #[test]
    fn the_inventory_the_plan_predicted_is_exact() {
        let result = compare(&predicted(), &applied(&["default_new__ConfigMap", "default_kept__ConfigMap"]));
        assert_eq!(result.outcome, Outcome::Exact);
        assert!(result.not_created.is_empty() && result.not_deleted.is_empty());
    }

    #[test]
    fn an_object_predicted_deleted_still_in_the_inventory_is_a_missed_prune() {
        let observed =
            applied(&["default_kept__ConfigMap", "default_new__ConfigMap", "default_old__ConfigMap"]);
        let result = compare(&predicted(), &observed);
        assert_eq!(result.outcome, Outcome::Differs);
        assert_eq!(result.not_deleted, vec!["default_old__ConfigMap"]);
        assert!(result.unexpected.is_empty(), "a missed prune is not also unexpected");
    }

    #[test]
    fn objects_not_created_unexpected_and_missing_are_each_named() {
        let result = compare(&predicted(), &applied(&["default_surprise__Secret"]));
        assert_eq!(result.outcome, Outcome::Differs);
        assert_eq!(result.not_created, vec!["default_new__ConfigMap"]);
        assert_eq!(result.unexpected, vec!["default_surprise__Secret"]);
        assert_eq!(result.missing, vec!["default_kept__ConfigMap"]);
    }

    #[test]
    fn objects_flux_never_applies_are_neither_missing_nor_unexpected() {
        let ignored = "default_ignored__ConfigMap".to_string();
        let predicted = PredictedKustomization {
            desired: vec!["default_kept__ConfigMap".into(), "default_new__ConfigMap".into(), ignored.clone()],
            create: vec!["default_new__ConfigMap".into(), ignored.clone()],
            unmanaged: vec![ignored.clone()],
            ..predicted()
        };
        let without = compare(&predicted, &applied(&["default_new__ConfigMap", "default_kept__ConfigMap"]));
        assert_eq!(without.outcome, Outcome::Exact, "{without:?}");
        let with =
            compare(&predicted, &applied(&["default_new__ConfigMap", "default_kept__ConfigMap", &ignored]));
        assert_eq!(with.outcome, Outcome::Exact, "{with:?}");
    }

    #[test]
    fn a_failed_reconcile_fails_and_a_late_one_times_out() {
        let ready =
            Condition { status: "False".into(), reason: "BuildFailed".into(), message: "boom".into() };
        let failed = compare(
            &predicted(),
            &Observed::Failed { revision: "main@sha1:abc".into(), ready: Some(ready.clone()) },
        );
        assert_eq!((failed.outcome, failed.ready), (Outcome::Failed, Some(ready)));
        let late = compare(&predicted(), &Observed::TimedOut { last_applied: None, ready: None });
        assert_eq!(late.outcome, Outcome::Timeout);
    }

    #[test]
    fn a_removed_kustomization_that_is_gone_is_exact() {
        let removed = PredictedKustomization { status: "removed".into(), ..predicted() };
        assert_eq!(compare(&removed, &Observed::Gone).outcome, Outcome::Exact);
        assert_eq!(compare(&predicted(), &Observed::Gone).outcome, Outcome::Differs);
    }

    #[test]
    fn the_followup_completes_once_with_the_worst_outcome() {
        let mut followup =
            Followup::new("abc", vec!["prod/b/y".into(), "prod/a/x".into(), "prod/a/x".into()]);
        assert_eq!(followup.expected, vec!["prod/a/x", "prod/b/y"]);
        let exact = compare(&predicted(), &applied(&["default_new__ConfigMap", "default_kept__ConfigMap"]));
        let late = compare(&predicted(), &Observed::TimedOut { last_applied: None, ready: None });
        assert!(!followup.record("prod/a/x", exact.clone()));
        assert!(!followup.record("prod/elsewhere/z", exact.clone()), "unknown keys are ignored");
        assert!(followup.record("prod/b/y", late));
        assert_eq!(followup.outcome, Some(Outcome::Timeout));
        assert_eq!(followup.completed_by.as_deref(), Some("prod/b/y"));
        assert!(!followup.record("prod/b/y", exact), "a completed follow-up does not change");
        assert_eq!(followup.overall(), Outcome::Timeout);
    }
}
