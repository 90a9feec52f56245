//! One Kustomization built like the controller builds it: secure path join, the prepared
//! kustomization, then the real kustomize (or the cache).

use super::cache::RenderCache;
use super::kustomize::{BuildError, Kustomize};
use super::references::{self, Reference};
use super::source::TreeIds;
use super::RenderError;
use crate::cancel::CancelToken;
use crate::flux::generator;
use crate::flux::Kustomization;
use crate::paths;
use crate::yaml;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Changes whenever what the cache stores changes, so old entries are never misread.
/// v2: entries written before the sandbox existed are never read (they may hold what a hostile
/// build read from outside its source).
const CACHE_FORMAT: &str = "fluxplan-cache-v2-json";
const ORIGIN_ANNOTATION: &str = "config.kubernetes.io/origin";
/// The same for records of a build's inputs by git id.
/// v2: records of trees whose `.gitattributes` made their archive differ from their blobs (files
/// left out, rewritten) are never read.
const INPUTS_FORMAT: &str = "fluxplan-inputs-v2";
/// How deep kustomizations (and plugin configurations) may reference one another: far above real
/// fleets, and a bound on what a pull request can make the planner follow.
pub const MAX_NESTING: usize = 100;

/// One object as kustomize produced it, with the repository file it came from.
#[derive(Debug, Clone)]
pub struct BuiltObject {
    pub object: Value,
    pub origin: Option<String>,
}

pub struct Built {
    pub objects: Vec<BuiltObject>,
    pub cache_hit: bool,
}

/// A checked, prepared build (see `Builder::prepare`).
pub struct BuildRequest {
    root: PathBuf,
    dir: PathBuf,
    /// The kustomization kustomize reads.
    kustomization: String,
    /// The content hash of everything the build reads: its cache key.
    pub key: String,
    keep_origin_annotations: bool,
    /// The kustomization's references, when its key came from git's ids of its inputs: they are
    /// checked before kustomize runs.
    unchecked: Option<Vec<Reference>>,
    /// git's ids of everything the build reads (see `remember_inputs`), when git knows them all.
    pub input_ids: Option<BTreeMap<String, String>>,
    /// The files the build reads, relative to the root, when they were read to key it (else
    /// `input_ids` names them).
    pub inputs: Vec<String>,
}

/// True when every input has the same git id in `tree`.
pub fn unchanged(ids: &BTreeMap<String, String>, tree: &TreeIds) -> bool {
    ids.iter().all(|(path, id)| tree.ids.get(path) == Some(id))
}

/// The inputs of a checked build by git id, and its key (see `Builder::prepare`).
#[derive(serde::Serialize, serde::Deserialize)]
struct KnownInputs {
    key: String,
    ids: BTreeMap<String, String>,
}

/// What every build shares: the tool, the cache, and file hashes already computed.
pub struct Builder {
    pub kustomize: Kustomize,
    pub cache: RenderCache,
    /// Finished renders decoded once for both sides of a plan.
    pub decoded: super::finished::Decoded,
    file_hashes: Mutex<BTreeMap<PathBuf, String>>,
    /// The references of nested kustomization files already checked and rewritten, by file and
    /// whether a plugin declared them: a component many builds share is parsed once.
    nested: Mutex<HashMap<(PathBuf, bool), Vec<Reference>>>,
    resolver: references::Resolver,
    /// kustomize's outputs as printed, by cache key, for builds whose output is not cached (their
    /// finished renders are): another Kustomization of the same build reads them here.
    printed: Mutex<HashMap<String, Arc<String>>>,
    shadow_counter: AtomicU64,
    /// Cache keys being built: a second build of the same inputs waits for the first and reads
    /// its result from the cache, so kustomize runs once per key.
    in_flight: Mutex<HashSet<String>>,
    /// Builds that failed, by key: the same inputs fail the same way, so builds waiting on a
    /// failed one share its error instead of running (and timing out) again one after another.
    failed: Mutex<HashMap<String, RenderError>>,
    built: Condvar,
}

impl Builder {
    pub fn new(kustomize: Kustomize, cache: RenderCache) -> Self {
        Builder {
            kustomize,
            cache,
            decoded: super::finished::Decoded::new(true),
            file_hashes: Mutex::default(),
            nested: Mutex::default(),
            resolver: references::Resolver::default(),
            printed: Mutex::default(),
            shadow_counter: AtomicU64::new(0),
            in_flight: Mutex::default(),
            failed: Mutex::default(),
            built: Condvar::new(),
        }
    }

    /// Checks and prepares the build of `spec` from the source tree at `root`: the kustomization
    /// kustomize will read, and the cache key of everything it reads.
    pub fn prepare(
        &self,
        root: &Path,
        spec: &Kustomization,
        tree: Option<&TreeIds>,
    ) -> Result<BuildRequest, RenderError> {
        let dir = paths::secure_join(root, &spec.path);
        if !dir.is_dir() {
            let what = if dir.exists() { "is not a directory" } else { "does not exist" };
            return Err(RenderError::PathNotFound(format!(
                "kustomization path not found: '{}' {what} in the source {}",
                spec.path, spec.source_ref
            )));
        }
        let layer = |obj: &mut serde_json::Map<String, Value>| generator::layer_spec(obj, &dir, root, spec);
        self.prepare_at(root, &dir, &layer, tree)
    }

    /// Checks and prepares the build of the kustomization in `dir` (an existing directory of
    /// `root`) with `layer`'s overrides: what `prepare` does for any controller.
    pub fn prepare_at(
        &self,
        root: &Path,
        dir: &Path,
        layer: &generator::Layer,
        tree: Option<&TreeIds>,
    ) -> Result<BuildRequest, RenderError> {
        let display = |p: &Path| paths::relative(root, p);
        let dir = dir.to_path_buf();
        let prepared = generator::prepare_with(&dir, &display, layer)
            .map_err(|e| RenderError::InvalidSource(e.to_string()))?;
        let mut document = prepared.document;
        let here = display(&dir);
        let top = references::of_kustomization(&document, &format!("the kustomization of {here}"), false)?;
        references::canonical_kustomization(&mut document);
        // Origin annotations tell which file each object came from (needed to find roots and
        // nested Kustomizations); they are removed again unless the kustomization asked for them.
        if !prepared.wants_origin_annotations {
            let meta = document
                .as_object_mut()
                .expect("kustomization is a mapping")
                .entry("buildMetadata")
                .or_insert_with(|| json!([]));
            if let Some(list) = meta.as_array_mut() {
                list.push(json!("originAnnotations"));
            }
        }
        let kustomization = yaml::to_yaml(&document);
        let mut request = BuildRequest {
            root: root.to_path_buf(),
            dir,
            kustomization,
            key: String::new(),
            keep_origin_annotations: prepared.wants_origin_annotations,
            unchecked: None,
            input_ids: None,
            inputs: Vec::new(),
        };
        let inputs_key = tree.map(|tree| self.inputs_key(&here, &request.kustomization, &tree.salt));
        // Inputs git says are unchanged since a checked build of this kustomization: its key,
        // without reading them. They are checked before kustomize ever runs on them (`objects`).
        if let Some(known) =
            inputs_key.as_deref().zip(tree).and_then(|(at, tree)| self.known_inputs(at, tree))
        {
            request.key = known.key;
            request.input_ids = Some(known.ids);
            request.unchecked = Some(top);
            return Ok(request);
        }
        let mut inputs = BTreeMap::new();
        self.collect_inputs(root, &request.dir, None, top, &mut inputs, &mut Vec::new(), 0)?;
        request.key = self.cache_key(&here, &request.kustomization, &inputs);
        if let Some((at, tree)) = inputs_key.as_deref().zip(tree) {
            request.input_ids = self.remember_inputs(at, tree, &here, &inputs, &request.key);
        }
        request.inputs = inputs.into_keys().collect();
        Ok(request)
    }

    fn inputs_key(&self, dir: &str, kustomization: &str, salt: &str) -> String {
        let mut hasher = Sha256::new();
        for part in [INPUTS_FORMAT, self.kustomize.version.as_str(), dir, kustomization, salt] {
            hasher.update(part.as_bytes());
            hasher.update([0]);
        }
        hex::encode(hasher.finalize())
    }

    /// The build recorded at `at`, if every input it lists has the same git id in `tree`.
    fn known_inputs(&self, at: &str, tree: &TreeIds) -> Option<KnownInputs> {
        let known: KnownInputs = serde_json::from_str(&self.cache.get(at)?).ok()?;
        unchanged(&known.ids, tree).then_some(known)
    }

    /// Records the git ids of a checked build's inputs: its files, its directory, and the
    /// directory of every kustomization file it read (their listings decide which file kustomize
    /// reads). Nothing is recorded when git does not know an input.
    fn remember_inputs(
        &self,
        at: &str,
        tree: &TreeIds,
        dir: &str,
        inputs: &BTreeMap<String, String>,
        key: &str,
    ) -> Option<BTreeMap<String, String>> {
        let mut paths: BTreeSet<&str> = inputs.keys().map(String::as_str).collect();
        paths.insert(if dir == "." { "" } else { dir });
        for file in inputs.keys() {
            let (parent, name) = file.rsplit_once('/').unwrap_or(("", file));
            if generator::KUSTOMIZATION_FILES.contains(&name) {
                paths.insert(parent);
            }
        }
        let ids: BTreeMap<String, String> = paths
            .into_iter()
            .map(|p| Some((p.to_string(), tree.ids.get(p)?.clone())))
            .collect::<Option<_>>()?;
        let known = KnownInputs { key: key.to_string(), ids };
        self.cache.put(at, Arc::new(serde_json::to_string(&known).expect("JSON strings serialize")));
        Some(known.ids)
    }

    /// The objects of a prepared build: from the cache, else from kustomize. kustomize's output
    /// is kept in memory, and on disk too when `keep_on_disk` (the caller keeps nothing of its
    /// own there: each file costs a create).
    pub fn objects(
        &self,
        request: &BuildRequest,
        keep_on_disk: bool,
        cancel: &CancelToken,
    ) -> Result<Built, RenderError> {
        let BuildRequest { root, dir, key, .. } = request;
        let _building = self.claim(key);
        if let Some(error) = self.failed.lock().unwrap_or_else(|e| e.into_inner()).get(key) {
            return Err(error.clone());
        }
        // An output kept in memory only is kept as printed (read again far less often than
        // built), and looked for first: the disk cache never holds it. The cache holds kustomize's
        // output as a JSON array: much faster to read back than YAML.
        let printed = self.printed.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned();
        let cached = match printed {
            Some(printed) => yaml::parse_documents(&printed).ok(),
            None => self.cache.get(key).and_then(|text| serde_json::from_str::<Vec<Value>>(&text).ok()),
        };
        let cache_hit = cached.is_some();
        let documents = match cached {
            Some(documents) => documents,
            None => {
                if let Some(top) = &request.unchecked {
                    // kustomize reads only what was checked (and rewritten as parsed).
                    self.collect_inputs(
                        root,
                        dir,
                        None,
                        top.clone(),
                        &mut BTreeMap::new(),
                        &mut Vec::new(),
                        0,
                    )?;
                }
                let output = self.run(root, dir, &request.kustomization, cancel).inspect_err(|error| {
                    // A cancelled build says nothing about its inputs.
                    if !matches!(error, RenderError::Cancelled(_)) {
                        self.failed
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(key.clone(), error.clone());
                    }
                })?;
                let documents = yaml::parse_documents(&output)
                    .map_err(|e| RenderError::Kustomize(format!("kustomize output is not YAML: {e}")))?;
                if keep_on_disk {
                    self.cache.put(
                        key,
                        Arc::new(serde_json::to_string(&documents).expect("JSON values serialize")),
                    );
                } else {
                    self.printed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(key.clone(), Arc::new(output));
                }
                documents
            }
        };
        let objects = documents
            .into_iter()
            .map(|mut object| {
                let origin = take_origin(&mut object, !request.keep_origin_annotations)
                    .and_then(|o| paths::normalize(&dir.join(o)))
                    .filter(|p| p.starts_with(root))
                    .map(|p| paths::relative(root, &p));
                BuiltObject { object, origin }
            })
            .collect();
        Ok(Built { objects, cache_hit })
    }

    /// Waits until no other build of `key` runs, then claims it until the guard is dropped.
    fn claim(&self, key: &str) -> Claim<'_> {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        while in_flight.contains(key) {
            in_flight = self.built.wait(in_flight).unwrap_or_else(|e| e.into_inner());
        }
        in_flight.insert(key.to_string());
        Claim { builder: self, key: key.to_string() }
    }

    fn cache_key(&self, dir: &str, kustomization: &str, inputs: &BTreeMap<String, String>) -> String {
        let mut hasher = Sha256::new();
        for part in [CACHE_FORMAT, self.kustomize.version.as_str(), dir, kustomization] {
            hasher.update(part.as_bytes());
            hasher.update([0]);
        }
        for (path, hash) in inputs {
            hasher.update(path.as_bytes());
            hasher.update([0]);
            hasher.update(hash.as_bytes());
        }
        hex::encode(hasher.finalize())
    }

    fn file_hash(&self, path: &Path) -> Result<String, RenderError> {
        if let Some(hash) = self.file_hashes.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
            return Ok(hash.clone());
        }
        let bytes = std::fs::read(path)
            .map_err(|e| RenderError::InvalidSource(format!("cannot read {}: {e}", path.display())))?;
        let hash = hex::encode(Sha256::digest(&bytes));
        // The first hash of a file wins: builds rewrite nested kustomization files (canonical
        // form), and a key must not change because another build read the file after that.
        let mut hashes = self.file_hashes.lock().unwrap_or_else(|e| e.into_inner());
        Ok(hashes.entry(path.to_path_buf()).or_insert(hash).clone())
    }

    /// Collects the content hash of every file a kustomization reads, following the
    /// kustomizations and plugin configurations it references, after checking every reference
    /// (see `references`). Nested kustomization files and plugin configuration files are
    /// rewritten as parsed, so kustomize reads exactly what was checked. The files a plugin
    /// configuration names are read from the directory of the kustomization that declared the
    /// plugin (`plugin_base`), wherever the configuration itself lives.
    #[allow(clippy::too_many_arguments)] // the walk's state, threaded through its recursion
    fn collect_inputs(
        &self,
        root: &Path,
        dir: &Path,
        plugin_base: Option<&Path>,
        refs: Vec<Reference>,
        inputs: &mut BTreeMap<String, String>,
        visiting: &mut Vec<(PathBuf, Option<PathBuf>)>,
        depth: usize,
    ) -> Result<(), RenderError> {
        let here = paths::relative(root, dir);
        if depth > MAX_NESTING {
            return Err(RenderError::Limit(format!(
                "kustomizations nest more than {MAX_NESTING} levels deep (at {here}): over fluxplan's limit, \
                 so the build is not planned"
            )));
        }
        for reference in refs {
            let local = references::check(root, dir, &reference, &here, &self.resolver)?;
            if local.inline {
                continue; // checked in place; its path names nothing
            }
            let target = local.path;
            // A plugin configuration is checked once per directory its files are read from.
            let base = local.plugin.then(|| plugin_base.unwrap_or(dir).to_path_buf());
            let key = (target.clone(), base.clone());
            if visiting.contains(&key) {
                continue;
            }
            visiting.push(key);
            if target.is_file() {
                let shown = paths::relative(root, &target);
                inputs.insert(shown.clone(), self.file_hash(&target)?);
                if local.plugin {
                    let configs = references::plugin_configs_in(&target, &shown)?;
                    let mut data = Vec::new();
                    for config in &configs {
                        data.extend(references::of_plugin_config(config, &shown)?);
                    }
                    references::rewrite(&target, &yaml::to_yaml_stream(&configs))?;
                    let base = base.as_deref().unwrap_or(dir);
                    self.collect_inputs(root, base, None, data, inputs, visiting, depth + 1)?;
                }
            } else if let Some(file) =
                generator::the_kustomization_file(&target, &|p| paths::relative(root, p))
                    .map_err(|e| RenderError::InvalidSource(e.to_string()))?
            {
                let shown = paths::relative(root, &file);
                inputs.insert(shown.clone(), self.file_hash(&file)?);
                let nested = self.nested_references(&file, &shown, local.plugin)?;
                self.collect_inputs(root, &target, base.as_deref(), nested, inputs, visiting, depth + 1)?;
            }
            // A directory without a kustomization file: kustomize refuses it, reading nothing.
        }
        Ok(())
    }

    /// The references of the nested kustomization `file`, which is rewritten as parsed (once per
    /// render: the rewritten text parses the same).
    fn nested_references(
        &self,
        file: &Path,
        shown: &str,
        plugin: bool,
    ) -> Result<Vec<Reference>, RenderError> {
        let memo = (file.to_path_buf(), plugin);
        if let Some(known) = self.nested.lock().unwrap_or_else(|e| e.into_inner()).get(&memo) {
            return Ok(known.clone());
        }
        let text = std::fs::read_to_string(file)
            .map_err(|e| RenderError::InvalidSource(format!("cannot read {shown}: {e}")))?;
        let mut document = match yaml::parse_documents(&text) {
            Ok(mut docs) if docs.len() <= 1 && docs.iter().all(Value::is_object) => {
                docs.pop().unwrap_or_else(|| json!({}))
            }
            Ok(_) => {
                return Err(RenderError::InvalidSource(format!(
                    "{shown} is not one YAML mapping, as a kustomization must be"
                )))
            }
            Err(e) => return Err(RenderError::InvalidSource(format!("{shown} is not valid YAML: {e}"))),
        };
        let nested = references::of_kustomization(&document, shown, plugin)?;
        references::canonical_kustomization(&mut document);
        references::rewrite(file, &yaml::to_yaml(&document))?;
        self.nested.lock().unwrap_or_else(|e| e.into_inner()).insert(memo, nested.clone());
        Ok(nested)
    }

    /// Runs kustomize on a shadow of `dir`: a sibling directory holding the prepared
    /// kustomization and symlinks to everything else in `dir`, so that builds of one directory
    /// with different overrides can run side by side without touching the tree.
    fn run(
        &self,
        root: &Path,
        dir: &Path,
        kustomization: &str,
        cancel: &CancelToken,
    ) -> Result<String, RenderError> {
        let parent = dir.parent().unwrap_or(root);
        let n = self.shadow_counter.fetch_add(1, Ordering::Relaxed);
        let shadow = parent.join(super::scratch::shadow_name(n));
        let io = |e: std::io::Error| RenderError::Kustomize(format!("cannot prepare the build: {e}"));
        std::fs::create_dir(&shadow).map_err(io)?;
        let result = (|| {
            for entry in std::fs::read_dir(dir).map_err(io)? {
                let entry = entry.map_err(io)?;
                let name = entry.file_name();
                // The directory's own kustomization is replaced by the prepared one (it held one
                // at most: `prepare` refused more); other shadows are not the directory's.
                if generator::KUSTOMIZATION_FILES.iter().any(|k| name == *k)
                    || super::is_fluxplan_scratch(&name)
                {
                    continue;
                }
                std::os::unix::fs::symlink(entry.path(), shadow.join(&name)).map_err(io)?;
            }
            std::fs::write(shadow.join("kustomization.yaml"), kustomization).map_err(io)?;
            // The shadow of the source root lies beside it, in the export's own directory.
            let readable = if dir == root { parent } else { root };
            self.kustomize.build(&shadow, readable, cancel).map_err(|error| match error {
                BuildError::Failed(message) => {
                    let shadow_name = shadow.file_name().unwrap_or_default().to_string_lossy().to_string();
                    let dir_name = dir.file_name().unwrap_or_default().to_string_lossy().to_string();
                    RenderError::Kustomize(
                        message.replace(&format!("{}/", root.display()), "").replace(&shadow_name, &dir_name),
                    )
                }
                BuildError::Limit(message) => RenderError::Limit(message),
                BuildError::Cancelled(reason) => RenderError::Cancelled(reason),
            })
        })();
        let _ = std::fs::remove_dir_all(&shadow);
        result
    }
}

/// A build of one cache key in progress (see `Builder::claim`).
struct Claim<'a> {
    builder: &'a Builder,
    key: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.builder.in_flight.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.key);
        self.builder.built.notify_all();
    }
}

/// Reads (and, when asked, removes) the origin annotation; returns the origin's path.
fn take_origin(object: &mut Value, remove: bool) -> Option<String> {
    let annotations = object.get_mut("metadata")?.get_mut("annotations")?.as_object_mut()?;
    let origin = annotations.get(ORIGIN_ANNOTATION)?.as_str()?.to_string();
    if remove {
        annotations.remove(ORIGIN_ANNOTATION);
        if annotations.is_empty() {
            object["metadata"].as_object_mut()?.remove("annotations");
        }
    }
    let parsed = yaml::parse_documents(&origin).ok()?.pop()?;
    parsed.get("path")?.as_str().map(str::to_string)
}
