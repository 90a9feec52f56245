//! OpenKruise ResourceDistribution (`apps.kruise.io`, cluster-scoped): a fan-out cascade like a
//! Namespace. Kruise copies `spec.resource` (a Secret or ConfigMap) into every namespace the
//! targets select, each copy owned by the distribution (a controller owner reference). It deletes
//! its copies from namespaces no longer selected; Kubernetes garbage-collects every copy when the
//! distribution is deleted. A copy is rewritten only when the resource changes outside `metadata`.

use super::compute::{new_change, ClusterView, Live};
use super::label_selector::{LabelSelector, Labels};
use super::{Action, Cause, Change, KustomizationPlan};
use crate::flux::ObjectId;
use crate::render::postbuild::MASK;
use crate::render::Status;
use crate::render::UnitRef;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

pub(super) const KRUISE_GROUP: &str = "apps.kruise.io";
pub(super) const DISTRIBUTION_KIND: &str = "ResourceDistribution";
/// Kruise never distributes into these, whatever the targets say.
const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public"];
/// Where the render keeps the digests of a distributed Secret's values.
const DIGEST_PREFIX: &str = "spec.resource.";

/// The object a distribution copies.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Resource {
    kind: String,
    name: String,
    /// The resource without `metadata` and `status` (what decides a rewrite), values masked.
    content: Value,
    /// Digest of each Secret value (`data.KEY`); `None` when the values are not known.
    digests: Option<BTreeMap<String, String>>,
}

impl Resource {
    fn id(&self, namespace: &str) -> ObjectId {
        ObjectId::new(namespace, &self.name, "", &self.kind)
    }

    /// What changed between two versions of the same resource: `None` when nothing did, else the
    /// hidden changes to list (Secret keys whose value changed).
    fn changes_since(&self, before: &Resource) -> Option<Vec<String>> {
        let values_known = self.digests.is_some() && before.digests.is_some();
        let comparable = |r: &Resource| {
            let mut content = r.content.clone();
            if !values_known {
                if let Some(map) = content.as_object_mut() {
                    map.remove("data");
                    map.remove("stringData");
                }
            }
            content
        };
        let mut hidden = Vec::new();
        if let (Some(after), Some(prior)) = (&self.digests, &before.digests) {
            let keys: BTreeSet<&String> = after.keys().chain(prior.keys()).collect();
            hidden = keys
                .into_iter()
                .filter(|k| after.get(*k) != prior.get(*k))
                .map(|k| format!("Secret {k} changed (value hidden)"))
                .collect();
        }
        (comparable(self) != comparable(before) || !hidden.is_empty()).then_some(hidden)
    }
}

/// Which namespaces a distribution targets.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Targets {
    all: bool,
    included: BTreeSet<String>,
    excluded: BTreeSet<String>,
    selector: LabelSelector,
}

impl Targets {
    /// The selected namespaces among `namespaces`, as Kruise selects them: `allNamespaces`, else
    /// the included ones; plus (without `allNamespaces`) those a non-empty label selector
    /// matches; minus the excluded and the system namespaces. Second: included namespaces not in
    /// `namespaces`.
    fn select(&self, namespaces: &BTreeMap<String, Labels>) -> (BTreeSet<String>, BTreeSet<String>) {
        let mut chosen: BTreeSet<String> =
            if self.all { namespaces.keys().cloned().collect() } else { self.included.clone() };
        if !self.all && !self.selector.is_empty() {
            chosen
                .extend(namespaces.iter().filter(|(_, l)| self.selector.matches(l)).map(|(n, _)| n.clone()));
        }
        chosen.retain(|n| !self.excluded.contains(n) && !SYSTEM_NAMESPACES.contains(&n.as_str()));
        let missing = chosen.iter().filter(|n| !namespaces.contains_key(*n)).cloned().collect();
        chosen.retain(|n| namespaces.contains_key(n));
        (chosen, missing)
    }
}

/// A ResourceDistribution as its manifest asks.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Distribution {
    pub name: String,
    resource: Resource,
    targets: Targets,
}

fn names(list: &Value) -> BTreeSet<String> {
    list["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["name"].as_str().map(str::to_string))
        .collect()
}

impl Distribution {
    /// Reads a manifest: a rendered one (Secret values masked) with the render's digests of the
    /// masked values, or a live one (`rendered: None`), whose Secret values are unknown when it
    /// was read without them. An error says why Kruise refuses it.
    pub(super) fn parse(
        manifest: &Value,
        rendered: Option<&BTreeMap<String, String>>,
    ) -> Result<Self, String> {
        let name = manifest["metadata"]["name"].as_str().unwrap_or("").to_string();
        let resource = &manifest["spec"]["resource"];
        let kind = resource["kind"].as_str().unwrap_or("");
        if resource["apiVersion"] != "v1" || !matches!(kind, "Secret" | "ConfigMap") {
            return Err("its resource is not a v1 Secret or ConfigMap, which Kruise refuses".into());
        }
        let resource_name = resource["metadata"]["name"].as_str().filter(|n| !n.is_empty());
        let resource_name = resource_name.ok_or("its resource has no metadata.name")?.to_string();
        let targets = &manifest["spec"]["targets"];
        // v1alpha1 names the selector namespaceLabelSelector, v1beta1 namespaceSelector.
        let selector = match &targets["namespaceLabelSelector"] {
            Value::Null => &targets["namespaceSelector"],
            selector => selector,
        };
        let selector =
            LabelSelector::parse(selector).map_err(|e| format!("invalid namespace selector: {e}"))?;
        let mut content = resource.clone();
        if let Some(map) = content.as_object_mut() {
            map.remove("metadata");
            map.remove("status");
        }
        let digests =
            if kind == "Secret" { secret_digests(&mut content, rendered) } else { Some(BTreeMap::new()) };
        Ok(Distribution {
            name,
            resource: Resource { kind: kind.to_string(), name: resource_name, content, digests },
            targets: Targets {
                all: targets["allNamespaces"].as_bool().unwrap_or(false),
                included: names(&targets["includedNamespaces"]),
                excluded: names(&targets["excludedNamespaces"]),
                selector,
            },
        })
    }
}

/// Digests of a Secret's values, masking any still in `secret`; `None` when they are unknown.
fn secret_digests(
    secret: &mut Value,
    rendered: Option<&BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    let mut digests = BTreeMap::new();
    let mut any_field = false;
    for field in ["data", "stringData"] {
        let Some(map) = secret.get_mut(field).and_then(Value::as_object_mut) else { continue };
        any_field = true;
        for (key, value) in map.iter_mut() {
            let path = format!("{field}.{key}");
            let digest =
                match (rendered.and_then(|d| d.get(&format!("{DIGEST_PREFIX}{path}"))), value.as_str()) {
                    (Some(digest), _) => digest.clone(),
                    (None, Some(text)) if text != MASK => hex::encode(Sha256::digest(text.as_bytes())),
                    (None, Some(_)) => return None,
                    (None, None) => hex::encode(Sha256::digest(value.to_string().as_bytes())),
                };
            digests.insert(path, digest);
            *value = Value::String(MASK.into());
        }
    }
    // A live Secret read without its values has neither field: what it holds is unknown.
    (any_field || rendered.is_some()).then_some(digests)
}

/// The namespaces a distribution chooses from, before and after the merge.
pub(super) struct Namespaces<'a> {
    pub before: &'a BTreeMap<String, Labels>,
    pub after: &'a BTreeMap<String, Labels>,
    /// True when the lists are the cluster's (not only what the renders name).
    pub complete: bool,
    /// Namespaces the plan deletes: their copies go with them.
    pub deleted: &'a BTreeSet<String>,
}

/// The copies a distribution creates, rewrites and deletes when it goes from `before` (what the
/// cluster runs; `None`: absent) to `after` (`None`: deleted).
pub(super) fn copy_changes(
    before: Option<&Distribution>,
    after: Option<&Distribution>,
    namespaces: &Namespaces,
) -> Vec<Change> {
    let Some(name) = after.or(before).map(|d| d.name.clone()) else { return Vec::new() };
    let cascade = format!("{DISTRIBUTION_KIND} {name}");
    let (was, _) = before.map(|d| d.targets.select(namespaces.before)).unwrap_or_default();
    let (will, missing) = after.map(|d| d.targets.select(namespaces.after)).unwrap_or_default();
    let mut changes = Vec::new();
    let mut push = |action: Action, id: ObjectId, reason: String, hidden: Vec<String>| {
        let mut change = new_change(action, &id);
        change.cause = Some(Cause::Cascade);
        change.cascade_from = Some(cascade.clone());
        change.reason = Some(reason);
        change.hidden_changes = hidden;
        changes.push(change);
    };
    let same_object = matches!((before, after), (Some(b), Some(a))
        if b.resource.kind == a.resource.kind && b.resource.name == a.resource.name);
    if let Some(b) = before.filter(|_| !same_object) {
        for namespace in was.iter().filter(|n| !namespaces.deleted.contains(*n)) {
            let id = b.resource.id(namespace);
            match after {
                None => push(
                    Action::Delete,
                    id,
                    format!("{cascade} is deleted: Kubernetes garbage-collects the copies it owns"),
                    Vec::new(),
                ),
                // Kruise cleans up only copies named like the current resource: the old ones stay
                // (owned, until the distribution is deleted).
                Some(a) => push(
                    Action::Skip,
                    id,
                    format!(
                        "the distribution now copies {}/{} instead: this old copy stays until {cascade} is deleted",
                        a.resource.kind, a.resource.name
                    ),
                    Vec::new(),
                ),
            }
        }
    }
    let Some(a) = after else { return changes };
    for namespace in &will {
        let id = a.resource.id(namespace);
        match before.filter(|_| same_object && was.contains(namespace)) {
            None => push(
                Action::Create,
                id,
                format!("namespace {namespace} is targeted: copied into it"),
                Vec::new(),
            ),
            Some(b) => {
                if let Some(hidden) = a.resource.changes_since(&b.resource) {
                    push(Action::Update, id, format!("the distributed {} changed", a.resource.kind), hidden);
                }
            }
        }
    }
    for namespace in &missing {
        if namespaces.complete {
            push(
                Action::Skip,
                a.resource.id(namespace),
                format!("namespace {namespace} does not exist: Kruise reports it and copies nothing there"),
                Vec::new(),
            );
        } else {
            push(
                Action::Create,
                a.resource.id(namespace),
                format!("namespace {namespace} is targeted: copied into it"),
                Vec::new(),
            );
        }
    }
    if same_object {
        for namespace in was.difference(&will).filter(|n| !namespaces.deleted.contains(*n)) {
            push(
                Action::Delete,
                a.resource.id(namespace),
                format!("namespace {namespace} is no longer targeted: Kruise deletes its copy"),
                Vec::new(),
            );
        }
    }
    changes
}

fn labels_of(manifest: &Value) -> Labels {
    manifest["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

fn is_distribution(id: &ObjectId) -> bool {
    id.group == KRUISE_GROUP && id.kind == DISTRIBUTION_KIND
}

fn is_namespace(id: &ObjectId) -> bool {
    id.group.is_empty() && id.kind == "Namespace"
}

impl ClusterView<'_> {
    /// Adds the copies of every ResourceDistribution the merge creates, changes or deletes (or
    /// whose target namespaces' labels it changes) to the plan of the Kustomization that owns it.
    pub(super) fn cascade_distributions(&self, plans: &mut [KustomizationPlan]) {
        let mut ids: BTreeSet<&ObjectId> =
            self.inventory_owner.keys().chain(self.head_owner.keys()).collect();
        ids.retain(|id| is_distribution(id));
        if ids.is_empty() {
            return;
        }
        let deleted: BTreeSet<String> = plans
            .iter()
            .flat_map(|p| &p.changes)
            .filter(|c| c.action == Action::Delete && c.kind == "Namespace")
            .filter_map(|c| ObjectId::parse(&c.id).filter(is_namespace).map(|id| id.name))
            .collect();
        let (before, complete) = self.namespaces_now();
        let after = self.namespaces_after(&before, &deleted, complete);
        let namespaces = Namespaces { before: &before, after: &after, complete, deleted: &deleted };
        for id in ids {
            let id_text = id.to_string();
            // The Kustomization whose plan deletes it, else the one applying it after the merge,
            // else the one holding it now.
            let deleter = plans
                .iter()
                .position(|p| p.changes.iter().any(|c| c.id == id_text && c.action == Action::Delete));
            let current = self.inventory_owner.get(id).map(|owner| self.distribution_now(owner, id));
            let desired = match (deleter, self.head_owner.get(id)) {
                (Some(_), _) => None,
                (None, Some(owner)) => Some(self.distribution_at_head(owner, id)),
                (None, None) => current.clone(),
            };
            let owner = self.head_owner.get(id).or_else(|| self.inventory_owner.get(id));
            let Some(index) =
                deleter.or_else(|| owner.and_then(|o| plans.iter().position(|p| is_plan_of(p, o))))
            else {
                continue;
            };
            if let Some(Err(why)) = &desired {
                // Said where the merge touches it; an untouched broken one is not this plan's news.
                if !plans[index].changes.iter().any(|c| c.id == id_text) {
                    continue;
                }
                plans[index].notes.push(format!(
                    "{DISTRIBUTION_KIND} {}: {why}: Kruise distributes and cleans up nothing for it",
                    id.name
                ));
                continue;
            }
            let current = current.and_then(Result::ok);
            let desired = desired.and_then(Result::ok);
            let mut changes = copy_changes(current.as_ref(), desired.as_ref(), &namespaces);
            for change in &mut changes {
                self.mark_conflict(change);
            }
            if changes.is_empty() {
                continue;
            }
            if !complete {
                plans[index].notes.push(format!(
                    "{DISTRIBUTION_KIND} {}: the cluster's namespaces are unknown (offline, or a snapshot without \
                     them), so its targets are chosen among those the renders define or use",
                    id.name
                ));
            }
            plans[index].changes.extend(changes);
        }
    }

    /// A copy whose name Flux itself applies in that namespace is not the distribution's: Kruise
    /// reports a conflict and neither overwrites nor deletes it.
    fn mark_conflict(&self, change: &mut Change) {
        let Some(id) = ObjectId::parse(&change.id) else { return };
        if let Some(flux_owner) = self.head_owner.get(&id).or_else(|| self.inventory_owner.get(&id)) {
            change.action = Action::Skip;
            change.hidden_changes.clear();
            change.reason = Some(format!(
                "Kustomization {flux_owner} applies this object: Kruise reports a conflict and leaves it alone"
            ));
        }
    }

    /// The distribution the cluster runs: the base render's manifest, else the live object.
    fn distribution_now(&self, owner: &UnitRef, id: &ObjectId) -> Result<Distribution, String> {
        if let Some(object) = self.base_object(owner, id) {
            return Distribution::parse(&object.object, Some(&object.secret_digests));
        }
        match self.live_object(id) {
            Live::Present(object) => Distribution::parse(object, None),
            _ => Err("its manifest is unknown".into()),
        }
    }

    fn distribution_at_head(&self, owner: &UnitRef, id: &ObjectId) -> Result<Distribution, String> {
        let object = self.head.get(owner).and_then(|k| k.objects.iter().find(|o| o.id.as_ref() == Some(id)));
        match object {
            Some(object) => Distribution::parse(&object.object, Some(&object.secret_digests)),
            None => Err("its manifest is unknown".into()),
        }
    }

    /// The namespaces now, with their labels: the cluster's when a snapshot lists them, else
    /// those the base render defines or puts objects in. True when they are the cluster's.
    fn namespaces_now(&self) -> (BTreeMap<String, Labels>, bool) {
        if let Some(live) = self.live.filter(|s| !s.namespace_labels.is_empty()) {
            return (live.namespace_labels.clone(), true);
        }
        let mut namespaces = BTreeMap::new();
        for k in self.base.values().filter(|k| k.status == Status::Rendered) {
            for object in &k.objects {
                let Some(id) = &object.id else { continue };
                if is_namespace(id) {
                    namespaces.insert(id.name.clone(), labels_of(&object.object));
                } else if !id.namespace.is_empty() {
                    namespaces.entry(id.namespace.clone()).or_default();
                }
            }
        }
        (namespaces, false)
    }

    /// The namespaces after the merge: without those it deletes, with the Namespaces the head
    /// applies (their labels as applied: keys the base manifest set and the head drops go away).
    fn namespaces_after(
        &self,
        now: &BTreeMap<String, Labels>,
        deleted: &BTreeSet<String>,
        complete: bool,
    ) -> BTreeMap<String, Labels> {
        let mut after = now.clone();
        after.retain(|name, _| !deleted.contains(name));
        for (owner, k) in &self.head {
            if k.status != Status::Rendered || k.spec.as_ref().is_some_and(|s| s.suspend) {
                continue;
            }
            for object in &k.objects {
                let Some(id) = &object.id else { continue };
                if is_namespace(id) {
                    let head_labels = labels_of(&object.object);
                    let base_labels =
                        self.base_object(owner, id).map(|b| labels_of(&b.object)).unwrap_or_default();
                    let labels = after.entry(id.name.clone()).or_default();
                    labels.retain(|key, _| !base_labels.contains_key(key) || head_labels.contains_key(key));
                    labels.extend(head_labels);
                } else if !complete && !id.namespace.is_empty() {
                    after.entry(id.namespace.clone()).or_default();
                }
            }
        }
        after
    }
}

fn is_plan_of(plan: &KustomizationPlan, reference: &UnitRef) -> bool {
    plan.unit_ref() == *reference
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// team-a (team=a, tier=web), team-b (team=b), tools (no labels), kube-system (team=a).
    fn cluster() -> BTreeMap<String, Labels> {
        [
            ("team-a", labels(&[("team", "a"), ("tier", "web")])),
            ("team-b", labels(&[("team", "b")])),
            ("tools", labels(&[])),
            ("kube-system", labels(&[("team", "a")])),
        ]
        .into_iter()
        .map(|(n, l)| (n.to_string(), l))
        .collect()
    }

    fn distribution(targets: Value) -> Distribution {
        distribution_of(
            targets,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"},
            "data": {"a": "1"}}),
        )
    }

    fn distribution_of(targets: Value, resource: Value) -> Distribution {
        let manifest = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "ResourceDistribution",
            "metadata": {"name": "dist"}, "spec": {"resource": resource, "targets": targets}});
        Distribution::parse(&manifest, Some(&BTreeMap::new())).unwrap()
    }

    fn selected(targets: Value) -> Vec<String> {
        distribution(targets).targets.select(&cluster()).0.into_iter().collect()
    }

    #[test]
    fn all_namespaces_minus_excluded_and_system_ones() {
        assert_eq!(selected(json!({"allNamespaces": true})), ["team-a", "team-b", "tools"]);
        assert_eq!(
            selected(json!({"allNamespaces": true, "excludedNamespaces": {"list": [{"name": "tools"}]}})),
            ["team-a", "team-b"]
        );
    }

    #[test]
    fn included_namespaces_and_the_label_selector_add_up() {
        assert_eq!(
            selected(json!({"includedNamespaces": {"list": [{"name": "tools"}, {"name": "kube-system"}]}})),
            ["tools"]
        );
        let both = json!({"includedNamespaces": {"list": [{"name": "tools"}]},
            "namespaceLabelSelector": {"matchLabels": {"team": "a"}}});
        assert_eq!(selected(both), ["team-a", "tools"]);
        let (_, missing) = distribution(json!({"includedNamespaces": {"list": [{"name": "gone"}]}}))
            .targets
            .select(&cluster());
        assert_eq!(missing.into_iter().collect::<Vec<_>>(), ["gone"]);
    }

    #[test]
    fn label_selector_expressions() {
        let with = |expression: Value| {
            selected(json!({"namespaceLabelSelector": {"matchExpressions": [expression]}}))
        };
        assert_eq!(
            with(json!({"key": "team", "operator": "In", "values": ["a", "b"]})),
            ["team-a", "team-b"]
        );
        assert_eq!(with(json!({"key": "team", "operator": "NotIn", "values": ["a"]})), ["team-b", "tools"]);
        assert_eq!(with(json!({"key": "tier", "operator": "Exists"})), ["team-a"]);
        assert_eq!(with(json!({"key": "team", "operator": "DoesNotExist"})), ["tools"]);
        // v1beta1 spells the field namespaceSelector.
        assert_eq!(selected(json!({"namespaceSelector": {"matchLabels": {"team": "b"}}})), ["team-b"]);
        // An empty selector selects nothing (Kruise ignores it), not everything.
        assert!(selected(json!({"namespaceLabelSelector": {}})).is_empty());
    }

    #[test]
    fn invalid_distributions_are_refused() {
        let manifest = |resource: Value, targets: Value| json!({"metadata": {"name": "d"}, "spec": {"resource": resource, "targets": targets}});
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let empty = BTreeMap::new();
        let none = Some(&empty);
        assert!(Distribution::parse(
            &manifest(
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "x"}}),
                json!({})
            ),
            none
        )
        .is_err());
        assert!(Distribution::parse(
            &manifest(json!({"apiVersion": "v1", "kind": "ConfigMap"}), json!({})),
            none
        )
        .is_err());
        let bad_selector =
            json!({"namespaceLabelSelector": {"matchExpressions": [{"key": "a", "operator": "Equals"}]}});
        assert!(Distribution::parse(&manifest(cm, bad_selector), none).is_err());
    }

    fn changes(before: Option<&Distribution>, after: Option<&Distribution>) -> Vec<(Action, String)> {
        let now = cluster();
        let namespaces = Namespaces { before: &now, after: &now, complete: true, deleted: &BTreeSet::new() };
        copy_changes(before, after, &namespaces).into_iter().map(|c| (c.action, c.id)).collect()
    }

    #[test]
    fn a_new_distribution_creates_copies_and_a_deleted_one_loses_them() {
        let d = distribution(json!({"namespaceLabelSelector": {"matchLabels": {"team": "a"}}}));
        assert_eq!(changes(None, Some(&d)), [(Action::Create, "team-a_shared__ConfigMap".to_string())]);
        let removed = copy_changes(
            Some(&d),
            None,
            &Namespaces { before: &cluster(), after: &cluster(), complete: true, deleted: &BTreeSet::new() },
        );
        assert_eq!(removed.len(), 1);
        assert_eq!((removed[0].action, removed[0].id.as_str()), (Action::Delete, "team-a_shared__ConfigMap"));
        assert_eq!(removed[0].cascade_from.as_deref(), Some("ResourceDistribution dist"));
    }

    #[test]
    fn retargeting_creates_and_deletes_and_a_resource_change_updates() {
        let a = distribution(json!({"namespaceLabelSelector": {"matchLabels": {"team": "a"}}}));
        let b = distribution(json!({"namespaceLabelSelector": {"matchExpressions": [
            {"key": "team", "operator": "In", "values": ["b"]}]}}));
        assert_eq!(
            changes(Some(&a), Some(&b)),
            [
                (Action::Create, "team-b_shared__ConfigMap".into()),
                (Action::Delete, "team-a_shared__ConfigMap".into())
            ]
        );
        assert!(changes(Some(&a), Some(&a)).is_empty());
        let changed = distribution_of(
            json!({"namespaceLabelSelector": {"matchLabels": {"team": "a"}}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"a": "2"}}),
        );
        assert_eq!(changes(Some(&a), Some(&changed)), [(Action::Update, "team-a_shared__ConfigMap".into())]);
        // A metadata-only change does not rewrite copies.
        let relabelled = distribution_of(
            json!({"namespaceLabelSelector": {"matchLabels": {"team": "a"}}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared", "labels": {"x": "y"}},
                "data": {"a": "1"}}),
        );
        assert!(changes(Some(&a), Some(&relabelled)).is_empty());
    }

    #[test]
    fn secret_copies_show_changed_keys_never_values() {
        let secret = |digest: &str| {
            let manifest = json!({"metadata": {"name": "dist"}, "spec": {
                "resource": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                    "data": {"token": MASK, "user": MASK}},
                "targets": {"includedNamespaces": {"list": [{"name": "tools"}]}}}});
            let digests = [
                ("spec.resource.data.token".to_string(), digest.to_string()),
                ("spec.resource.data.user".to_string(), "same".to_string()),
            ]
            .into();
            Distribution::parse(&manifest, Some(&digests)).unwrap()
        };
        let now = cluster();
        let namespaces = Namespaces { before: &now, after: &now, complete: true, deleted: &BTreeSet::new() };
        let out = copy_changes(Some(&secret("old")), Some(&secret("new")), &namespaces);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].action, out[0].id.as_str()), (Action::Update, "tools_creds__Secret"));
        assert_eq!(out[0].hidden_changes, ["Secret data.token changed (value hidden)"]);
        assert!(out[0].diff.is_none());
        // Values given in clear (a live object read with values) are masked and digested.
        let clear = json!({"metadata": {"name": "dist"}, "spec": {"resource": {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds"}, "data": {"token": "aHVudGVyMg=="}}, "targets": {"allNamespaces": true}}});
        let parsed = Distribution::parse(&clear, None).unwrap();
        assert!(!parsed.resource.content.to_string().contains("aHVudGVyMg"));
        assert!(parsed.resource.digests.is_some());
        // A live object read without values: unknown, so no update is claimed from it.
        let stripped = json!({"metadata": {"name": "dist"}, "spec": {"resource": {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds"}, "type": "Opaque"}, "targets": {"allNamespaces": true}}});
        assert!(Distribution::parse(&stripped, None).unwrap().resource.digests.is_none());
    }

    #[test]
    fn copies_in_deleted_or_missing_namespaces() {
        let d =
            distribution(json!({"allNamespaces": true, "includedNamespaces": {"list": [{"name": "new"}]}}));
        let now = cluster();
        let deleted: BTreeSet<String> = ["tools".to_string()].into();
        let namespaces = Namespaces { before: &now, after: &now, complete: true, deleted: &deleted };
        let gone: Vec<_> = copy_changes(Some(&d), None, &namespaces).into_iter().map(|c| c.id).collect();
        assert_eq!(
            gone,
            ["team-a_shared__ConfigMap", "team-b_shared__ConfigMap"],
            "the Namespace deletion covers tools"
        );
        let listed = distribution(json!({"includedNamespaces": {"list": [{"name": "new"}]}}));
        assert_eq!(changes(None, Some(&listed)), [(Action::Skip, "new_shared__ConfigMap".into())]);
    }
}
