//! Finished renders (substituted, labelled, masked) cached by their build's key and everything
//! post-build reads: an unchanged Kustomization skips post-build as well as kustomize. Never kept
//! when values came from Secrets: those must not reach the disk.

use super::cache::RenderCache;
use super::postbuild::{Finished, Variables};
use super::RenderedObject;
use crate::flux::Kustomization;
use crate::yaml;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

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

/// The same for warm records (v2: as `INPUTS_FORMAT`'s v2).
const WARM_FORMAT: &str = "fluxplan-warm-v2";

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

/// Borrowed when written (a render's objects are not copied to be cached), owned when read.
#[derive(Serialize, Deserialize)]
struct Entry<'a> {
    objects: Vec<Object<'a>>,
    unresolved: Cow<'a, BTreeSet<String>>,
}

#[derive(Serialize, Deserialize)]
struct Object<'a> {
    object: Cow<'a, Value>,
    origin: Cow<'a, Option<String>>,
    digest: Cow<'a, str>,
    secret_digests: Cow<'a, BTreeMap<String, String>>,
    real: Cow<'a, Option<Value>>,
    // Never true in an entry (values from Secrets are never cached); kept for what reads it.
    #[serde(default)]
    named_from_secret: bool,
    holds_secret_values: bool,
}

pub fn encode(finished: &Finished) -> String {
    let objects = finished
        .objects
        .iter()
        .map(|o| Object {
            object: Cow::Borrowed(o.object.as_ref()),
            origin: Cow::Borrowed(&o.origin),
            digest: Cow::Borrowed(&o.digest),
            secret_digests: Cow::Borrowed(&o.secret_digests),
            real: Cow::Borrowed(&o.real),
            named_from_secret: o.named_from_secret,
            holds_secret_values: o.holds_secret_values,
        })
        .collect();
    let entry = Entry { objects, unresolved: Cow::Borrowed(&finished.unresolved) };
    serde_json::to_string(&entry).expect("JSON values serialize")
}

/// Finished renders decoded once per process, by key. A plan's base and head read the same
/// entry for every unit whose inputs are unchanged between them (most of a fleet): decoded once,
/// their objects share one manifest each (`RenderedObject::object` is an `Arc`), so the second
/// side costs neither the decode nor the memory of a second copy. A side that asks while the
/// other decodes waits for it. Entries are immutable (a key names its content), so a shared
/// decode is the decode the side would have made.
#[derive(Default)]
pub struct Decoded {
    sharing: bool,
    entries: Mutex<HashMap<String, Arc<DecodeOnce>>>,
}

/// One entry's decode: done once, by whichever side asks first (`None`: it could not be read).
type DecodeOnce = OnceLock<Option<Arc<Finished>>>;

impl Decoded {
    /// `sharing: false` decodes every read anew (the plan is the same either way; a test
    /// compares them).
    pub fn new(sharing: bool) -> Self {
        Decoded { sharing, entries: Mutex::default() }
    }

    /// The finished render under `key`, decoded once.
    pub fn get(&self, cache: &RenderCache, key: &str) -> Option<Finished> {
        if !self.sharing {
            return decode(&cache.get(key)?);
        }
        let cell = {
            let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries.entry(key.to_string()).or_default().clone()
        };
        let shared =
            cell.get_or_init(|| cache.get(key).and_then(|text| decode(&text)).map(Arc::new)).as_ref()?;
        Some(Finished { objects: shared.objects.clone(), unresolved: shared.unresolved.clone() })
    }
}

/// The finished render an entry holds; `None` when it is not one.
pub fn decode(text: &str) -> Option<Finished> {
    let entry: Entry = serde_json::from_str(text).ok()?;
    let objects = entry
        .objects
        .into_iter()
        .map(|o| RenderedObject {
            id: None,
            named_from_secret: o.named_from_secret,
            secret_template: Default::default(),
            origin: o.origin.into_owned(),
            object: std::sync::Arc::new(o.object.into_owned()),
            digest: o.digest.into_owned(),
            secret_digests: o.secret_digests.into_owned(),
            real: o.real.into_owned(),
            holds_secret_values: o.holds_secret_values,
        })
        .collect();
    Some(Finished { objects, unresolved: entry.unresolved.into_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_as_the_render_it_was_written_from() {
        let object = RenderedObject {
            id: None,
            named_from_secret: true,
            secret_template: Default::default(),
            origin: Some("apps/podinfo/secret.yaml".into()),
            object: json!({"kind": "Secret", "metadata": {"name": "shown"}, "data": {"k": "(masked)"}})
                .into(),
            digest: "d1".into(),
            secret_digests: BTreeMap::from([("data.k".into(), "d2".into())]),
            real: Some(json!({"kind": "Kustomization"})),
            holds_secret_values: true,
        };
        let finished = Finished { objects: vec![object.clone()], unresolved: BTreeSet::from(["X".into()]) };
        let read = decode(&encode(&finished)).expect("an entry");
        assert_eq!(read.unresolved, finished.unresolved);
        let [back] = &read.objects[..] else { panic!("one object") };
        assert_eq!(
            (
                back.named_from_secret,
                &back.origin,
                &back.object,
                &back.digest,
                &back.secret_digests,
                &back.real
            ),
            (
                object.named_from_secret,
                &object.origin,
                &object.object,
                &object.digest,
                &object.secret_digests,
                &object.real
            )
        );
        assert!(back.holds_secret_values);
        assert!(decode("{\"objects\": 1}").is_none());
    }

    #[test]
    fn a_shared_decode_gives_both_readers_one_manifest_and_the_same_render() {
        let object = RenderedObject {
            id: None,
            named_from_secret: false,
            secret_template: Default::default(),
            origin: Some("apps/a.yaml".into()),
            object: Arc::new(json!({"kind": "ConfigMap", "metadata": {"name": "a"}})),
            digest: "d".into(),
            secret_digests: BTreeMap::new(),
            real: None,
            holds_secret_values: false,
        };
        let cache = RenderCache::new(None);
        let finished = Finished { objects: vec![object], unresolved: BTreeSet::new() };
        cache.put("k", Arc::new(encode(&finished)));
        let manifest = |f: &Finished| f.objects[0].object.clone();
        for sharing in [true, false] {
            let decoded = Decoded::new(sharing);
            let (first, second) = (decoded.get(&cache, "k").unwrap(), decoded.get(&cache, "k").unwrap());
            assert_eq!(Arc::ptr_eq(&manifest(&first), &manifest(&second)), sharing);
            assert_eq!(
                (manifest(&first), &first.objects[0].digest),
                (manifest(&second), &second.objects[0].digest)
            );
            assert_eq!(*manifest(&first), *finished.objects[0].object);
            // An entry that is not there, or not a render, is none on every read.
            assert!(decoded.get(&cache, "missing").is_none() && decoded.get(&cache, "missing").is_none());
        }
    }
}
