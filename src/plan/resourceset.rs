//! ResourceSets in a plan. A ResourceSet is a unit of its own (`plan_one` plans it like any
//! unit); what is the Flux Operator's is here: what a ResourceSet no longer generates is deleted
//! (its inventory), but for what carries `fluxcd.controlplane.io/prune: disabled`, and each such
//! deletion says why: an input removed, or templates that no longer generate it.

use super::compute::{ClusterView, Live, NOT_FOUND};
use super::{Action, Change};
use crate::flux::resourceset::{disabled_by, OWNER_NAMESPACE_LABEL, OWNER_NAME_LABEL, PRUNE_ANNOTATION};
use crate::flux::ObjectId;
use crate::render::resourceset::ResourceSetUnit;
use crate::render::UnitRef;

impl ClusterView<'_> {
    /// An object a ResourceSet generated at base and no longer generates.
    pub(super) fn resourceset_stale(&self, mut change: Change, owner: &UnitRef, id: &ObjectId) -> Change {
        let kept = |metadata_of: &serde_json::Value| disabled_by(metadata_of, PRUNE_ANNOTATION);
        match self.live_object(id) {
            Live::Missing => {
                change.action = Action::Skip;
                change.reason = Some(NOT_FOUND.into());
                return change;
            }
            Live::Present(object) if kept(object) => {
                change.action = Action::Skip;
                change.reason =
                    Some(format!("{PRUNE_ANNOTATION}: disabled: the Flux Operator never deletes it"));
                return change;
            }
            Live::Present(object)
                if object["metadata"]["labels"][OWNER_NAME_LABEL] != owner.name.as_str()
                    || object["metadata"]["labels"][OWNER_NAMESPACE_LABEL] != owner.namespace.as_str() =>
            {
                change.action = Action::Skip;
                change.reason = Some(format!(
                    "no longer carries the owner labels of ResourceSet {owner}: the Flux Operator leaves it alone"
                ));
                return change;
            }
            Live::Unknown if self.base_object(owner, id).is_some_and(|o| kept(&o.object)) => {
                change.action = Action::Skip;
                change.reason = Some(format!(
                    "{PRUNE_ANNOTATION}: disabled (in the base manifest): the Flux Operator never deletes it"
                ));
                return change;
            }
            _ => {}
        }
        if change.cascade_from.is_none() {
            change.reason = Some(self.why_no_longer_generated(owner, id));
        }
        change
    }

    /// `input removed: tenant=backend`, or the templates no longer generating it.
    fn why_no_longer_generated(&self, owner: &UnitRef, id: &ObjectId) -> String {
        let base = self.base.get(owner).and_then(|k| k.resourceset.as_deref());
        let head = self.head.get(owner).and_then(|k| k.resourceset.as_deref());
        let key = ResourceSetUnit::object_key(&id.kind, &id.namespace, &id.name);
        let input = base.and_then(|u| u.inputs.get(&key));
        let still_there = |input: &String| head.is_some_and(|u| u.inputs.values().any(|i| i == input));
        match input {
            Some(input) if !still_there(input) => format!("input removed: {input}"),
            Some(input) => format!("the templates no longer generate it for {input}"),
            None => "the templates no longer generate it".into(),
        }
    }
}
