//! ExternalArtifacts that an ArtifactGenerator in the repository builds from local sources,
//! materialised as source trees kustomize can build (Flux 2.7's source-watcher layout).
//!
//! The ExternalArtifact a generator makes is named after `spec.artifacts[].name` and lives in
//! the generator's namespace (source-watcher `internal/controller/artifactgenerator_controller.go`);
//! kustomize-controller reads it like any source (`sourceRef.kind: ExternalArtifact`, namespace
//! defaulting to the Kustomization's). A generator's sources are the artifacts of other sources,
//! so a GitRepository of this repository contributes its ignore-filtered tree.
//!
//! Each artifact is built once per render into its own temporary directory (`<dir>/artifact`),
//! so kustomize's sandbox, confined to the tree it builds (or the tree's parent for a path at the
//! root), sees that artifact and nothing else.

mod copy;

use super::source::{scratch_dir, SourceLimits};
use super::RenderError;
use crate::flux::artifact_generator::{is_artifact_generator, ArtifactGenerator, Strategy};
use crate::flux::SourceRef;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub const KIND: &str = "ExternalArtifact";

/// What fluxplan can say about an ExternalArtifact.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// Built from local sources: the tree.
    Tree(PathBuf),
    /// Not buildable here (a remote source, an unsupported feature): why, for the plan.
    Unavailable(String),
}

/// An ArtifactGenerator manifest found in the repository.
struct Found {
    file: String,
    namespace: String,
    name: String,
    /// The names of the artifacts it declares, read even when the rest is invalid.
    artifact_names: Vec<String>,
    generator: Result<ArtifactGenerator, String>,
}

/// Looks up the tree of a source that is not an ExternalArtifact.
pub type LocalTree<'a> = dyn Fn(&SourceRef) -> Result<Option<PathBuf>, RenderError> + 'a;

type Slot = Arc<OnceLock<Result<Resolved, RenderError>>>;

/// The generators of one revision and the artifacts built from them so far.
pub struct Generators {
    found: Vec<Found>,
    limits: SourceLimits,
    workdir: OnceLock<Result<tempfile::TempDir, String>>,
    built: Mutex<BTreeMap<(String, String), Slot>>,
    counter: AtomicUsize,
}

impl Generators {
    /// Every ArtifactGenerator in the YAML files under `root` (the revision's filtered tree).
    pub fn discover(root: &Path, yaml_files: &[PathBuf], limits: SourceLimits) -> Self {
        let mut found = Vec::new();
        for file in yaml_files {
            let Ok(text) = std::fs::read_to_string(file) else { continue };
            if !text.contains(crate::flux::artifact_generator::EXTENSIONS_GROUP) {
                continue;
            }
            let Ok(docs) = crate::yaml::parse_documents(&text) else { continue };
            for doc in docs.iter().filter(|d| is_artifact_generator(d)) {
                let meta = &doc["metadata"];
                found.push(Found {
                    file: crate::paths::relative(root, file),
                    namespace: meta["namespace"].as_str().unwrap_or("flux-system").to_string(),
                    name: meta["name"].as_str().unwrap_or("").to_string(),
                    artifact_names: doc["spec"]["artifacts"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|a| a["name"].as_str().map(str::to_string))
                        .collect(),
                    generator: ArtifactGenerator::from_value(doc, "flux-system"),
                });
            }
        }
        found.sort_by(|a, b| (&a.file, &a.namespace, &a.name).cmp(&(&b.file, &b.namespace, &b.name)));
        Generators {
            found,
            limits,
            workdir: OnceLock::new(),
            built: Mutex::default(),
            counter: AtomicUsize::new(0),
        }
    }

    /// The tree of `source` (an ExternalArtifact) for a Kustomization defined in `near`: built
    /// from local sources, unavailable with the reason, or an error in the generator.
    pub fn resolve(
        &self,
        source: &SourceRef,
        near: Option<&str>,
        local: &LocalTree,
    ) -> Result<Resolved, RenderError> {
        // Cycles are refused before anything is built: two threads building the two ends of a
        // cycle would wait for each other.
        self.check_acyclic(source, near, &mut Vec::new())?;
        self.resolve_in(source, near, local)
    }

    fn check_acyclic(
        &self,
        source: &SourceRef,
        near: Option<&str>,
        stack: &mut Vec<String>,
    ) -> Result<(), RenderError> {
        let key = format!("ExternalArtifact {}/{}", source.namespace, source.name);
        if stack.contains(&key) {
            stack.push(key);
            return Err(RenderError::InvalidSource(format!(
                "ArtifactGenerators build these ExternalArtifacts from each other: {}",
                stack.join(" → ")
            )));
        }
        let Ok(Found { file, generator: Ok(generator), .. }) = self.producer(source, near) else {
            return Ok(());
        };
        stack.push(key);
        for s in generator.sources.iter().filter(|s| s.kind == KIND) {
            let next =
                SourceRef { kind: s.kind.clone(), namespace: s.namespace.clone(), name: s.name.clone() };
            self.check_acyclic(&next, Some(file), stack)?;
        }
        stack.pop();
        Ok(())
    }

    fn resolve_in(
        &self,
        source: &SourceRef,
        near: Option<&str>,
        local: &LocalTree,
    ) -> Result<Resolved, RenderError> {
        let key = format!("{}/{}", source.namespace, source.name);
        let found = match self.producer(source, near) {
            Ok(found) => found,
            Err(reason) => return Ok(Resolved::Unavailable(reason)),
        };
        let generator = found.generator.as_ref().map_err(|e| RenderError::InvalidSource(e.clone()))?;
        if generator.path_pattern.is_some() {
            return Ok(Resolved::Unavailable(format!(
                "its ArtifactGenerator {} uses spec.pathPattern, which fluxplan does not render",
                generator.reference()
            )));
        }
        let slot: Slot = self
            .built
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((key.clone(), found.file.clone()))
            .or_default()
            .clone();
        slot.get_or_init(|| self.build(generator, &found.file, &source.name, local)).clone()
    }

    /// The generator that makes `source`: the one whose file is nearest to the Kustomization's
    /// (a fleet defines one generator per cluster directory, all with the same names).
    fn producer(&self, source: &SourceRef, near: Option<&str>) -> Result<&Found, String> {
        let candidates: Vec<&Found> = self
            .found
            .iter()
            .filter(|f| f.namespace == source.namespace && f.artifact_names.contains(&source.name))
            .collect();
        let closeness = |f: &Found| near.map_or(0, |n| common_dirs(&f.file, n));
        let best = candidates.iter().map(|f| closeness(f)).max();
        let nearest: Vec<&Found> = candidates.into_iter().filter(|f| Some(closeness(f)) == best).collect();
        match nearest.as_slice() {
            [] if self.found.iter().any(|f| f.namespace == source.namespace && f.generator.as_ref().is_ok_and(|g| g.path_pattern.is_some())) => {
                Err("no ArtifactGenerator in this repository names it (one uses spec.pathPattern, which fluxplan does not render)".into())
            }
            [] => Err("no ArtifactGenerator in this repository produces it".into()),
            [one] => Ok(one),
            [first, rest @ ..] if rest.iter().all(|f| f.generator == first.generator) => Ok(first),
            many => Err(format!(
                "ArtifactGenerators in {} all produce it and none is nearer to the Kustomization",
                many.iter().map(|f| f.file.as_str()).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    fn build(
        &self,
        generator: &ArtifactGenerator,
        file: &str,
        name: &str,
        local: &LocalTree,
    ) -> Result<Resolved, RenderError> {
        let me = format!("ArtifactGenerator {} ({file}), artifact {name}", generator.reference());
        let artifact = generator.artifacts.iter().find(|a| a.name == name).expect("the producer declares it");
        if let Some(op) = artifact.copy.iter().find(|op| op.strategy == Strategy::Extract) {
            return Ok(Resolved::Unavailable(format!(
                "its {me} extracts tarballs (copy from '{}', strategy Extract), which fluxplan does not render",
                op.from_raw
            )));
        }
        // The tree of every source the copy operations read.
        let mut trees: BTreeMap<&str, PathBuf> = BTreeMap::new();
        for op in &artifact.copy {
            if trees.contains_key(op.alias.as_str()) {
                continue;
            }
            let source = generator.sources.iter().find(|s| s.alias == op.alias).expect("aliases are checked");
            let reference = SourceRef {
                kind: source.kind.clone(),
                namespace: source.namespace.clone(),
                name: source.name.clone(),
            };
            let tree = if source.kind == KIND {
                match self.resolve_in(&reference, Some(file), local)? {
                    Resolved::Tree(tree) => Some(tree),
                    Resolved::Unavailable(why) => {
                        return Ok(Resolved::Unavailable(format!(
                            "its {me} reads {reference}, which is not built: {why}"
                        )))
                    }
                }
            } else {
                local(&reference)?
            };
            let Some(tree) = tree else {
                return Ok(Resolved::Unavailable(format!(
                    "its {me} reads {reference}, which is not in this repository (map it with --source {}/{}=DIR)",
                    reference.namespace, reference.name
                )));
            };
            trees.insert(&op.alias, tree);
        }
        let fail = |e: RenderError| match e {
            RenderError::InvalidSource(m) => RenderError::InvalidSource(format!("{me}: {m}")),
            RenderError::Limit(m) => RenderError::Limit(format!("{me}: {m}")),
            other => other,
        };
        let dir = self.fresh_dir().map_err(|e| RenderError::InvalidSource(format!("{me}: {e}")))?;
        let mut budget = copy::Budget::new(self.limits);
        for op in &artifact.copy {
            copy::apply(op, &trees[op.alias.as_str()], &dir, &mut budget).map_err(|e| {
                fail(match e {
                    RenderError::InvalidSource(m) => RenderError::InvalidSource(format!(
                        "copy from '{}' to '{}': {m}",
                        op.from_raw, op.to_raw
                    )),
                    other => other,
                })
            })?;
        }
        Ok(Resolved::Tree(dir))
    }

    /// A new empty directory for one artifact, alone in its parent (the sandbox may read the parent).
    fn fresh_dir(&self) -> Result<PathBuf, String> {
        let workdir = self.workdir.get_or_init(|| {
            let scratch = scratch_dir(&self.limits);
            tempfile::Builder::new()
                .prefix("fluxplan-artifacts-")
                .tempdir_in(&scratch)
                .map_err(|e| format!("cannot create a scratch directory in {}: {e}", scratch.display()))
        });
        let workdir = workdir.as_ref().map_err(Clone::clone)?;
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let dir = workdir.path().join(n.to_string()).join("artifact");
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(dir)
    }
}

/// How many leading directories two repository paths share.
fn common_dirs(a: &str, b: &str) -> usize {
    let dirs = |p: &str| -> Vec<String> {
        let mut parts: Vec<String> = p.split('/').map(str::to_string).collect();
        parts.pop();
        parts
    };
    dirs(a).iter().zip(dirs(b).iter()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_generator_wins() {
        assert_eq!(common_dirs("clusters/prod/artifacts.yaml", "clusters/prod/apps.yaml"), 2);
        assert_eq!(common_dirs("clusters/staging/artifacts.yaml", "clusters/prod/apps.yaml"), 1);
        assert_eq!(common_dirs("artifacts.yaml", "clusters/prod/apps.yaml"), 0);
    }
}
