//! Finished renders (substituted, labelled, masked) cached by their build's key and everything
//! post-build reads: an unchanged Kustomization skips post-build as well as kustomize. Never kept
//! when values came from Secrets: those must not reach the disk.

use super::postbuild::{Finished, Variables};
use super::{RealName, RenderedObject};
use crate::flux::Kustomization;
use crate::yaml;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// Changes whenever what an entry holds changes, so old entries are never misread.
const FORMAT: &str = "fluxplan-finished-v1";

/// The cache key of the finished render of a build; `None` when it must not be cached.
pub fn key(build_key: &str, spec: &Kustomization, vars: &Variables, strict: bool) -> Option<String> {
    if !vars.secret_names.is_empty() {
        return None;
    }
    let inputs = json!([FORMAT, build_key, spec.raw, vars.values, vars.unknown_sources, strict]);
    Some(hex::encode(Sha256::digest(yaml::canonical_json(&inputs).as_bytes())))
}

/// The same for warm records.
const WARM_FORMAT: &str = "fluxplan-warm-v1";

/// Where the finished render of `spec` with `vars` from a tree salted `salt` is recorded with
/// git's ids of its build's inputs (see `Warm`); `None` when it must not be cached.
pub fn warm_key(
    kustomize: &str,
    salt: &str,
    spec: &Kustomization,
    vars: &Variables,
    strict: bool,
) -> Option<String> {
    if !vars.secret_names.is_empty() {
        return None;
    }
    let inputs = json!([WARM_FORMAT, kustomize, salt, spec.raw, vars.values, vars.unknown_sources, strict]);
    Some(hex::encode(Sha256::digest(yaml::canonical_json(&inputs).as_bytes())))
}

/// A finished render found by its inputs' git ids: while none changed, the render is the one
/// under `finished`, and the build need not even be prepared.
#[derive(Serialize, Deserialize)]
pub struct Warm {
    pub ids: BTreeMap<String, String>,
    pub finished: String,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    objects: Vec<Object>,
    unresolved: BTreeSet<String>,
}

#[derive(Serialize, Deserialize)]
struct Object {
    object: Value,
    origin: Option<String>,
    digest: String,
    secret_digests: BTreeMap<String, String>,
    real: Option<Value>,
    real_name: Option<RealName>,
    holds_secret_values: bool,
}

pub fn encode(finished: &Finished) -> String {
    let objects = finished
        .objects
        .iter()
        .map(|o| Object {
            object: o.object.clone(),
            origin: o.origin.clone(),
            digest: o.digest.clone(),
            secret_digests: o.secret_digests.clone(),
            real: o.real.clone(),
            real_name: o.real_name.clone(),
            holds_secret_values: o.holds_secret_values,
        })
        .collect();
    let entry = Entry { objects, unresolved: finished.unresolved.clone() };
    serde_json::to_string(&entry).expect("JSON values serialize")
}

/// The finished render an entry holds; `None` when it is not one.
pub fn decode(text: &str) -> Option<Finished> {
    let entry: Entry = serde_json::from_str(text).ok()?;
    let objects = entry
        .objects
        .into_iter()
        .map(|o| RenderedObject {
            shown_id: None,
            id: None,
            real_name: o.real_name,
            origin: o.origin,
            object: o.object,
            digest: o.digest,
            secret_digests: o.secret_digests,
            real: o.real,
            holds_secret_values: o.holds_secret_values,
        })
        .collect();
    Some(Finished { objects, unresolved: entry.unresolved })
}
