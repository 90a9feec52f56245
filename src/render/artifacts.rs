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
use crate::flux::artifact_generator::{
    is_artifact_generator, ArtifactGenerator, OutputArtifact, PathPattern, Strategy,
};
use crate::flux::sourceignore::SourceIgnore;
use crate::flux::SourceRef;
use crate::tree::Descend;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub const KIND: &str = "ExternalArtifact";
/// ExternalArtifacts built from ExternalArtifacts, at most this deep (real fleets use one or two).
const MAX_CHAIN: usize = 32;
/// All artifacts of one render together may hold this many sources' worth of files.
const ARTIFACTS_PER_SOURCE: u64 = 4;

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
    /// It expands `spec.pathPattern` (read even when the rest is invalid).
    path_pattern: bool,
    /// Annotated `source.extensions.fluxcd.io/reconcile: disabled`: its artifacts keep their
    /// last content, whatever the repository says now.
    disabled: bool,
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
    /// By artifact and the generator that makes it (two generators of one file are two makers).
    built: Mutex<BTreeMap<(String, String, String), Slot>>,
    /// Every file of every artifact built → the source file it was copied from.
    origins: Mutex<BTreeMap<PathBuf, PathBuf>>,
    /// (files, bytes) every artifact of this render holds: each is bounded by the source limits,
    /// and all of them together by `ARTIFACTS_PER_SOURCE` times those.
    spent: Mutex<(u64, u64)>,
    counter: AtomicUsize,
}

impl Generators {
    /// Every ArtifactGenerator in the YAML files under `root` (the revision's filtered tree).
    pub fn discover(root: &Path, files: &[(PathBuf, String)], limits: SourceLimits) -> Self {
        let mut found = Vec::new();
        for (file, text) in files {
            if !text.contains(crate::flux::artifact_generator::EXTENSIONS_GROUP) {
                continue;
            }
            let Ok(docs) = crate::yaml::parse_documents(text) else { continue };
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
                    path_pattern: doc["spec"]["pathPattern"].as_str().is_some_and(|p| !p.is_empty()),
                    disabled: meta["annotations"]["source.extensions.fluxcd.io/reconcile"]
                        .as_str()
                        .is_some_and(|v| v.eq_ignore_ascii_case("disabled")),
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
            origins: Mutex::default(),
            spent: Mutex::default(),
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
        self.check_acyclic(source, near, &mut Vec::new(), &mut BTreeSet::new())?;
        self.resolve_in(source, near, local)
    }

    /// A depth-first walk of what builds `source`; each (artifact, defining file) is explored
    /// once (`done`), so a generator listing one artifact a thousand times costs once, and chains
    /// are bounded so neither this walk nor the builds that follow it can exhaust the stack.
    fn check_acyclic(
        &self,
        source: &SourceRef,
        near: Option<&str>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<(String, Option<String>)>,
    ) -> Result<(), RenderError> {
        let key = format!("ExternalArtifact {}/{}", source.namespace, source.name);
        let visit = (key.clone(), near.map(str::to_string));
        if done.contains(&visit) {
            return Ok(());
        }
        if stack.contains(&key) {
            stack.push(key);
            return Err(RenderError::InvalidSource(format!(
                "ArtifactGenerators build these ExternalArtifacts from each other: {}",
                stack.join(" → ")
            )));
        }
        if stack.len() >= MAX_CHAIN {
            return Err(RenderError::InvalidSource(format!(
                "ArtifactGenerators build {key} through a chain of more than {MAX_CHAIN} ExternalArtifacts: refused"
            )));
        }
        stack.push(key);
        for found in self.producers(source, near).unwrap_or_default() {
            let Found { file, generator: Ok(generator), .. } = found else { continue };
            for s in generator.sources.iter().filter(|s| s.kind == KIND) {
                let next =
                    SourceRef { kind: s.kind.clone(), namespace: s.namespace.clone(), name: s.name.clone() };
                self.check_acyclic(&next, Some(file), stack, done)?;
            }
        }
        stack.pop();
        done.insert(visit);
        Ok(())
    }

    fn resolve_in(
        &self,
        source: &SourceRef,
        near: Option<&str>,
        local: &LocalTree,
    ) -> Result<Resolved, RenderError> {
        let candidates = match self.producers(source, near) {
            Ok(candidates) => candidates,
            Err(reason) => return Ok(Resolved::Unavailable(reason)),
        };
        // pathPattern generators are tried in turn until one makes an artifact of that name.
        let mut result = Ok(Resolved::Unavailable(String::new()));
        for found in candidates {
            result = self.resolve_from(found, source, local);
            if !(found.path_pattern && matches!(result, Ok(Resolved::Unavailable(_)))) {
                break;
            }
        }
        result
    }

    fn resolve_from(
        &self,
        found: &Found,
        source: &SourceRef,
        local: &LocalTree,
    ) -> Result<Resolved, RenderError> {
        let key = format!("{}/{}", source.namespace, source.name);
        if found.disabled {
            return Ok(Resolved::Unavailable(format!(
                "its ArtifactGenerator {}/{} ({}) has reconciliation disabled, so the artifact keeps whatever it \
                 held before",
                found.namespace, found.name, found.file
            )));
        }
        let generator = found
            .generator
            .as_ref()
            .map_err(|e| RenderError::InvalidSource(format!("{e} (in {})", found.file)))?;
        let slot: Slot = self
            .built
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((key.clone(), found.file.clone(), format!("{}/{}", found.namespace, found.name)))
            .or_default()
            .clone();
        slot.get_or_init(|| self.build(generator, &found.file, &source.name, local)).clone()
    }

    /// The generators that may make `source`: the one naming it whose file is nearest to the
    /// Kustomization's (a fleet defines one generator per cluster directory, all with the same
    /// names), else every pathPattern generator of its namespace, nearest first.
    fn producers(&self, source: &SourceRef, near: Option<&str>) -> Result<Vec<&Found>, String> {
        let candidates: Vec<&Found> = self
            .found
            .iter()
            .filter(|f| f.namespace == source.namespace && f.artifact_names.contains(&source.name))
            .collect();
        let closeness = |f: &Found| near.map_or(0, |n| common_dirs(&f.file, n));
        let best = candidates.iter().map(|f| closeness(f)).max();
        let nearest: Vec<&Found> = candidates.into_iter().filter(|f| Some(closeness(f)) == best).collect();
        match nearest.as_slice() {
            [] => {
                let mut patterns: Vec<&Found> =
                    self.found.iter().filter(|f| f.namespace == source.namespace && f.path_pattern).collect();
                patterns.sort_by_key(|f| std::cmp::Reverse(closeness(f)));
                if patterns.is_empty() {
                    Err("no ArtifactGenerator in this repository produces it".into())
                } else {
                    Ok(patterns)
                }
            }
            [one] => Ok(vec![*one]),
            [first, rest @ ..] if rest.iter().all(|f| f.generator == first.generator) => Ok(vec![*first]),
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
        let expanded;
        let artifact = match &generator.path_pattern {
            None => generator.artifacts.iter().find(|a| a.name == name).expect("the producer declares it"),
            Some(pattern) => match self.expand(generator, file, pattern, name, local)? {
                Ok(artifact) => {
                    expanded = artifact;
                    &expanded
                }
                Err(why) => return Ok(Resolved::Unavailable(why)),
            },
        };
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
            match self.source_tree(generator, &op.alias, file, local, &me)? {
                Ok(tree) => trees.insert(&op.alias, tree),
                Err(why) => return Ok(Resolved::Unavailable(why)),
            };
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
        // The controller archives the staged files through the default ignore rules.
        drop_ignored(&dir, &SourceIgnore::defaults(&dir))
            .map_err(|e| RenderError::InvalidSource(format!("{me}: cannot filter the artifact: {e}")))?;
        self.spend(budget.spent()).map_err(fail)?;
        let mut origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
        origins.extend(budget.origins.into_iter().map(|(rel, source)| (dir.join(rel), source)));
        Ok(Resolved::Tree(dir))
    }

    /// Adds an artifact's files and bytes to the render's total; refuses once the total is over
    /// `ARTIFACTS_PER_SOURCE` sources' worth (a thousand generators copying the whole repository
    /// each would otherwise exhaust the disk's inodes).
    fn spend(&self, (files, bytes): (u64, u64)) -> Result<(), RenderError> {
        let mut spent = self.spent.lock().unwrap_or_else(|e| e.into_inner());
        spent.0 = spent.0.saturating_add(files);
        spent.1 = spent.1.saturating_add(bytes);
        let max_files = self.limits.max_files.saturating_mul(ARTIFACTS_PER_SOURCE);
        let max_bytes = self.limits.max_total_bytes.saturating_mul(ARTIFACTS_PER_SOURCE);
        if spent.0 > max_files || spent.1 > max_bytes {
            return Err(RenderError::Limit(format!(
                "the artifacts of this render would hold more than {max_files} files or {max_bytes} bytes in all \
                 ({ARTIFACTS_PER_SOURCE} times --max-source-files and --max-source-bytes); it is not rendered"
            )));
        }
        Ok(())
    }

    /// The tree of the generator's source `alias`, or why it is not available.
    fn source_tree(
        &self,
        generator: &ArtifactGenerator,
        alias: &str,
        file: &str,
        local: &LocalTree,
        me: &str,
    ) -> Result<Result<PathBuf, String>, RenderError> {
        let source = generator.sources.iter().find(|s| s.alias == alias).expect("aliases are checked");
        let reference = SourceRef {
            kind: source.kind.clone(),
            namespace: source.namespace.clone(),
            name: source.name.clone(),
        };
        if source.kind == KIND {
            return Ok(match self.resolve_in(&reference, Some(file), local)? {
                Resolved::Tree(tree) => Ok(tree),
                Resolved::Unavailable(why) => {
                    Err(format!("its {me} reads {reference}, which is not built: {why}"))
                }
            });
        }
        Ok(local(&reference)?.ok_or_else(|| {
            format!(
                "its {me} reads {reference}, which is not in this repository (map it with --source {}/{}=DIR)",
                reference.namespace, reference.name
            )
        }))
    }

    /// The artifact named `name` that `spec.pathPattern` makes at this revision, or why none.
    fn expand(
        &self,
        generator: &ArtifactGenerator,
        file: &str,
        pattern: &str,
        name: &str,
        local: &LocalTree,
    ) -> Result<Result<OutputArtifact, String>, RenderError> {
        let me = format!("ArtifactGenerator {} ({file})", generator.reference());
        let invalid = |e: String| RenderError::InvalidSource(format!("{me}: pathPattern '{pattern}': {e}"));
        let parsed = PathPattern::parse(pattern).map_err(invalid)?;
        let tree = match self.source_tree(
            generator,
            &parsed.alias,
            file,
            local,
            &format!("{me}, artifact {name}"),
        )? {
            Ok(tree) => tree,
            Err(why) => return Ok(Err(why)),
        };
        let dirs = directories(&tree, self.limits.max_files).map_err(|e| match e {
            RenderError::Limit(limit) => RenderError::Limit(format!("{me}: {limit}")),
            other => other,
        })?;
        let mut made: BTreeMap<String, (String, OutputArtifact)> = BTreeMap::new();
        for dir in dirs {
            let Some(captures) = parsed.captures(&dir) else { continue };
            for artifact in
                generator.expand(&captures).map_err(|e| invalid(format!("directory {dir}: {e}")))?
            {
                if let Some((other, _)) = made.get(&artifact.name) {
                    return Err(invalid(format!(
                        "directories {other} and {dir} both make artifact {}",
                        artifact.name
                    )));
                }
                made.insert(artifact.name.clone(), (dir.clone(), artifact));
            }
        }
        Ok(made.remove(name).map(|(_, artifact)| artifact).ok_or_else(|| {
            format!("its {me} (pathPattern '{pattern}') makes no artifact named {name} at this revision")
        }))
    }

    /// The file a file of a built artifact was copied from, through artifacts built from
    /// artifacts; `None` for files that are no artifact's.
    pub fn source_of(&self, file: &Path) -> Option<PathBuf> {
        let origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
        let mut file = origins.get(file)?.clone();
        while let Some(next) = origins.get(&file) {
            file = next.clone();
        }
        Some(file)
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

/// Every directory under `root` (relative, sorted, symlinks not followed); an error names the
/// limit when there are more than `max`.
fn directories(root: &Path, max: u64) -> Result<Vec<String>, RenderError> {
    let mut out = Vec::new();
    crate::tree::walk::<RenderError>(root, |entry, file_type| {
        if !file_type.is_dir() {
            return Ok(Descend::No);
        }
        out.push(crate::paths::relative(root, &entry.path()));
        if out.len() as u64 > max {
            return Err(RenderError::Limit(format!(
                "the source holds more than {max} directories (--max-source-files)"
            )));
        }
        Ok(Descend::Yes)
    })?;
    Ok(out)
}

/// Removes what `rules` leave out of an archive.
fn drop_ignored(dir: &Path, rules: &SourceIgnore) -> std::io::Result<()> {
    crate::tree::walk::<std::io::Error>(dir, |entry, file_type| {
        let path = entry.path();
        if !rules.is_ignored(&path, file_type.is_dir()) {
            return Ok(Descend::Yes);
        }
        if file_type.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
        Ok(Descend::No)
    })
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

    /// Generators from `files` (path, YAML); the repository tree is `repo`.
    fn generators(files: &[(&str, &str)]) -> (tempfile::TempDir, Generators) {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
            paths.push((full, text.to_string()));
        }
        std::fs::write(dir.path().join("app.yaml"), "kind: ConfigMap\n").unwrap();
        let found = Generators::discover(dir.path(), &paths, SourceLimits::default());
        (dir, found)
    }

    fn generator(name: &str, source: (&str, &str), artifact: &str, extra: &str) -> String {
        format!(
            "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n{extra}  sources:\n  - alias: src\n    kind: {}\n    name: {}\n  artifacts:\n  - name: {artifact}\n    copy:\n    - from: \"@src/app.yaml\"\n      to: \"@artifact/\"\n",
            source.0, source.1
        )
    }

    fn artifact(name: &str) -> SourceRef {
        SourceRef { kind: KIND.into(), namespace: "flux-system".into(), name: name.into() }
    }

    fn resolve(
        found: &Generators,
        repo: &Path,
        name: &str,
        near: Option<&str>,
    ) -> Result<Resolved, RenderError> {
        let repo = repo.to_path_buf();
        found.resolve(&artifact(name), near, &|s: &SourceRef| {
            Ok((s.kind == "GitRepository").then(|| repo.clone()))
        })
    }

    #[test]
    fn builds_from_local_sources_and_through_other_artifacts() {
        let (dir, found) = generators(&[
            ("a.yaml", &generator("a", ("GitRepository", "flux-system"), "first", "")),
            ("b.yaml", &generator("b", ("ExternalArtifact", "first"), "second", "")),
        ]);
        let Ok(Resolved::Tree(tree)) = resolve(&found, dir.path(), "second", None) else { panic!() };
        assert!(tree.join("app.yaml").is_file());
        // The file is traced back to the repository through both artifacts.
        assert_eq!(found.source_of(&tree.join("app.yaml")), Some(dir.path().join("app.yaml")));
    }

    #[test]
    fn says_why_an_artifact_is_not_built() {
        let extract = generator("x", ("GitRepository", "flux-system"), "extract", "")
            .replace("to: \"@artifact/\"", "to: \"@artifact/\"\n      strategy: Extract");
        let (dir, found) = generators(&[
            ("remote.yaml", &generator("r", ("OCIRepository", "charts"), "remote", "")),
            (
                "pattern.yaml",
                &generator(
                    "p",
                    ("GitRepository", "flux-system"),
                    "{app}",
                    "  pathPattern: \"@src/apps/{app}\"\n",
                )
                .replace("- name: {app}", "- name: \"{app}\""),
            ),
            ("extract.yaml", &extract),
            (
                "disabled.yaml",
                &generator("d", ("GitRepository", "flux-system"), "frozen", "").replace(
                    "  namespace: flux-system\n",
                    "  namespace: flux-system\n  annotations:\n    source.extensions.fluxcd.io/reconcile: Disabled\n",
                ),
            ),
        ]);
        let why = |name: &str| match resolve(&found, dir.path(), name, None) {
            Ok(Resolved::Unavailable(why)) => why,
            other => panic!("{name}: {other:?}"),
        };
        assert!(
            why("remote").contains("reads OCIRepository/flux-system/charts, which is not in this repository")
        );
        assert!(why("extract").contains("strategy Extract"));
        assert!(why("frozen").contains("reconciliation disabled"), "{}", why("frozen"));
        assert!(
            why("podinfo").contains("(pathPattern '@src/apps/{app}') makes no artifact named podinfo"),
            "{}",
            why("podinfo")
        );
    }

    #[test]
    fn path_patterns_make_one_artifact_per_matching_directory() {
        let pattern = |name: &str, file: &str| {
            generator(
                name,
                ("GitRepository", "flux-system"),
                "\"{app}-app\"",
                "  pathPattern: \"@src/apps/{app}\"\n",
            )
            .replace("@src/app.yaml", &format!("@src/apps/{{app}}/{file}"))
        };
        let (dir, found) =
            generators(&[("p.yaml", &pattern("p", "cm.yaml")), ("q.yaml", &pattern("q", "other.yaml"))]);
        for (path, text) in
            [("apps/Podinfo/cm.yaml", "kind: ConfigMap\n"), ("apps/web/cm.yaml", "kind: Secret\n")]
        {
            std::fs::create_dir_all(dir.path().join(path).parent().unwrap()).unwrap();
            std::fs::write(dir.path().join(path), text).unwrap();
        }
        // Names take the capture lower-cased, paths as found; "q" (no other.yaml) is never needed.
        let Ok(Resolved::Tree(tree)) = resolve(&found, dir.path(), "podinfo-app", None) else { panic!() };
        assert_eq!(std::fs::read_to_string(tree.join("cm.yaml")).unwrap(), "kind: ConfigMap\n");
        let Ok(Resolved::Tree(web)) = resolve(&found, dir.path(), "web-app", None) else { panic!() };
        assert_eq!(std::fs::read_to_string(web.join("cm.yaml")).unwrap(), "kind: Secret\n");
    }

    #[test]
    fn cycles_and_ambiguity_are_refused() {
        let (dir, found) = generators(&[
            ("a.yaml", &generator("a", ("ExternalArtifact", "second"), "first", "")),
            ("b.yaml", &generator("b", ("ExternalArtifact", "first"), "second", "")),
            ("x/one.yaml", &generator("one", ("GitRepository", "flux-system"), "twin", "")),
            ("y/two.yaml", &generator("two", ("OCIRepository", "other"), "twin", "")),
        ]);
        let error = resolve(&found, dir.path(), "first", None).unwrap_err().to_string();
        assert!(error.contains("ExternalArtifact flux-system/first → ExternalArtifact flux-system/second → ExternalArtifact flux-system/first"), "{error}");
        let Ok(Resolved::Unavailable(why)) = resolve(&found, dir.path(), "twin", Some("z/k.yaml")) else {
            panic!()
        };
        assert!(why.contains("x/one.yaml, y/two.yaml all produce it"), "{why}");
        assert!(matches!(resolve(&found, dir.path(), "twin", Some("x/k.yaml")), Ok(Resolved::Tree(_))));
    }

    #[test]
    fn the_nearest_generator_wins() {
        assert_eq!(common_dirs("clusters/prod/artifacts.yaml", "clusters/prod/apps.yaml"), 2);
        assert_eq!(common_dirs("clusters/staging/artifacts.yaml", "clusters/prod/apps.yaml"), 1);
        assert_eq!(common_dirs("artifacts.yaml", "clusters/prod/apps.yaml"), 0);
    }
}
