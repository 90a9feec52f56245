//! The copy operations of one output artifact, applied to a fresh directory from local source
//! trees, the way source-watcher's builder (`internal/builder/builder.go`) applies them:
//! - a plain `from` that is a directory lands as `to/<its name>/` (the source root lands as `to`);
//! - a plain `from` that is a file lands as `to/<its name>` when `to` ends with `/` or is an
//!   existing directory, else as the file `to`;
//! - a glob is matched one path segment at a time as Go's `fs.Glob` does (`**` is `*` there);
//!   each match keeps its whole path under `to`, except that `dir/**` copies what is under `dir`;
//! - excludes drop files and whole directories; a glob that matches nothing, or only excluded
//!   files, is an error; Merge deep-merges YAML into an existing destination file.
//!
//! Files are hard-linked, never written through: Merge replaces the destination with a new file.

use crate::flux::artifact_generator::{self as ag, CopyOperation, Excludes, Strategy};
use crate::render::source::SourceLimits;
use crate::render::RenderError;
use crate::tree::Descend;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Counts what one artifact takes against the source limits (copies can multiply a source),
/// and records where each of its files came from.
pub struct Budget {
    limits: SourceLimits,
    files: u64,
    bytes: u64,
    /// Artifact path → the source file it holds (the last one written there).
    pub origins: BTreeMap<String, PathBuf>,
}

impl Budget {
    pub fn new(limits: SourceLimits) -> Self {
        Budget { limits, files: 0, bytes: 0, origins: BTreeMap::new() }
    }

    /// (files, bytes) taken so far.
    pub fn spent(&self) -> (u64, u64) {
        (self.files, self.bytes)
    }

    fn admit(&mut self, size: u64) -> Result<(), RenderError> {
        self.files += 1;
        self.bytes = self.bytes.saturating_add(size);
        if self.files > self.limits.max_files {
            return Err(RenderError::Limit(format!(
                "the artifact would hold more than {} files (--max-source-files); it is not rendered",
                self.limits.max_files
            )));
        }
        if self.bytes > self.limits.max_total_bytes {
            return Err(RenderError::Limit(format!(
                "the artifact would hold more than {} bytes (--max-source-bytes); it is not rendered",
                self.limits.max_total_bytes
            )));
        }
        Ok(())
    }
}

/// Why one operation failed, said in the user's terms (prefixed with the operation by the caller).
type Failed = RenderError;

fn invalid(message: String) -> Failed {
    RenderError::InvalidSource(message)
}

/// Applies one copy operation from the source tree `src` into the artifact tree `dest`.
pub fn apply(op: &CopyOperation, src: &Path, dest: &Path, budget: &mut Budget) -> Result<(), Failed> {
    let excludes = Excludes::new(&op.exclude).map_err(invalid)?;
    let copier = Copier { src, dest, excludes, strategy: op.strategy };
    if !op.is_glob() {
        let meta = plain_metadata(src, &op.pattern).ok_or_else(|| {
            invalid(format!("'{}' does not exist in source @{}", shown(&op.pattern), op.alias))
        })?;
        let name = op.pattern.rsplit('/').next().unwrap_or("");
        if meta.is_dir() {
            return copier.dir(&op.pattern, &ag::join(&op.to, name), &op.pattern, budget);
        }
        if !meta.is_file() {
            return Err(invalid(format!("'{}' in source @{} is not a regular file", op.pattern, op.alias)));
        }
        if copier.excludes.excludes(&op.pattern, "") {
            return Ok(());
        }
        let into_dir = op.to_is_dir || dest.join(&op.to).is_dir();
        let target = if into_dir { ag::join(&op.to, name) } else { op.to.clone() };
        return copier.file(&op.pattern, &target, true, budget);
    }
    let matches = glob(src, &op.pattern, budget.limits.max_files)?;
    if matches.is_empty() {
        return Err(invalid(format!("no files match '{}' in source @{}", op.pattern, op.alias)));
    }
    let base = ag::selection_root(&op.pattern);
    let kept: Vec<&String> = matches.iter().filter(|m| !copier.excludes.excludes(m, &base)).collect();
    if kept.is_empty() {
        return Err(invalid(format!(
            "every file matching '{}' in source @{} is excluded",
            op.pattern, op.alias
        )));
    }
    for matched in kept {
        let target = ag::glob_destination(&op.pattern, matched, &op.to);
        match plain_metadata(src, matched) {
            Some(meta) if meta.is_dir() => copier.dir(matched, &target, &base, budget)?,
            Some(meta) if meta.is_file() => copier.file(matched, &target, true, budget)?,
            _ => {}
        }
    }
    Ok(())
}

/// The metadata of `rel` under `src` when no part of the way is a symlink (a symlink itself is
/// returned as such, never followed).
fn plain_metadata(src: &Path, rel: &str) -> Option<std::fs::Metadata> {
    let mut path = src.to_path_buf();
    let mut meta = std::fs::symlink_metadata(&path).ok()?;
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        if meta.file_type().is_symlink() {
            return None;
        }
        path.push(part);
        meta = std::fs::symlink_metadata(&path).ok()?;
    }
    Some(meta)
}

fn shown(pattern: &str) -> &str {
    if pattern.is_empty() {
        "."
    } else {
        pattern
    }
}

/// The matches of a `from` glob, relative to `src`, sorted as Go's `fs.Glob` returns them.
fn glob(src: &Path, pattern: &str, max: u64) -> Result<Vec<String>, Failed> {
    let mut found = vec![String::new()];
    for segment in pattern.split('/') {
        let mut next = Vec::new();
        if ag::has_glob_chars(segment) {
            let matcher = ag::segment_matcher(segment)
                .map_err(|e| invalid(format!("invalid glob pattern '{pattern}': {e}")))?;
            for dir in &found {
                if !plain_metadata(src, dir).is_some_and(|m| m.is_dir()) {
                    continue;
                }
                let Ok(entries) = std::fs::read_dir(src.join(dir)) else { continue };
                let mut names: Vec<String> = entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink()))
                    // fluxplan's build shadows are no part of the source (see `render::scratch`).
                    .filter(|e| !crate::render::is_fluxplan_scratch(&e.file_name()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                next.extend(names.into_iter().filter(|n| matcher.is_match(n)).map(|n| ag::join(dir, &n)));
            }
        } else {
            next = found
                .iter()
                .map(|d| ag::join(d, segment))
                .filter(|p| plain_metadata(src, p).is_some_and(|m| !m.file_type().is_symlink()))
                .collect();
        }
        if next.len() as u64 > max {
            return Err(RenderError::Limit(format!(
                "'{pattern}' matches more than {max} entries (--max-source-files); it is not rendered"
            )));
        }
        found = next;
    }
    Ok(found)
}

struct Copier<'a> {
    src: &'a Path,
    dest: &'a Path,
    excludes: Excludes,
    strategy: Strategy,
}

impl Copier<'_> {
    /// Copies the tree under `from` to `to`, leaving out what the excludes match (paths are
    /// matched from the source root and from `base`). Merge does not apply inside directories.
    fn dir(&self, from: &str, to: &str, base: &str, budget: &mut Budget) -> Result<(), Failed> {
        let make_dir = |to: &str| {
            let target = self.dest.join(to);
            if target.is_file() {
                return Err(invalid(format!("cannot copy a directory over the file '{to}'")));
            }
            std::fs::create_dir_all(&target).map_err(|e| invalid(format!("cannot create '{to}': {e}")))
        };
        make_dir(to)?;
        let root = self.src.join(from);
        crate::tree::walk::<Failed>(&root, |entry, file_type| {
            let relative = crate::paths::relative(&root, &entry.path());
            let path = ag::join(from, &relative);
            if self.excludes.excludes(&path, base) {
                return Ok(Descend::No);
            }
            let target = ag::join(to, &relative);
            if file_type.is_dir() {
                make_dir(&target)?;
                return Ok(Descend::Yes);
            }
            // Source artifacts never hold symlinks (Flux does not archive them).
            if file_type.is_file() {
                self.file(&path, &target, false, budget)?;
            }
            Ok(Descend::No)
        })
    }

    /// Copies one file; with Merge (and `may_merge`) an existing destination is merged into.
    fn file(&self, from: &str, to: &str, may_merge: bool, budget: &mut Budget) -> Result<(), Failed> {
        let source = self.src.join(from);
        let target = self.dest.join(to);
        let size = std::fs::metadata(&source).map(|m| m.len()).unwrap_or(0);
        budget.admit(size)?;
        if target.is_dir() {
            return Err(invalid(format!("cannot copy file '{from}' over the directory '{to}'")));
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| invalid(format!("cannot create the directory of '{to}': {e}")))?;
        }
        let merged = if may_merge && self.strategy == Strategy::Merge && target.is_file() {
            Some(
                merge_files(&target, &source)
                    .map_err(|e| invalid(format!("cannot merge '{from}' into '{to}': {e}")))?,
            )
        } else {
            None
        };
        // Never write through an existing file: it may be a hard link into a source tree.
        if target.exists() {
            std::fs::remove_file(&target).map_err(|e| invalid(format!("cannot replace '{to}': {e}")))?;
        }
        let written = match merged {
            Some(text) => std::fs::write(&target, text),
            None => {
                std::fs::hard_link(&source, &target).or_else(|_| std::fs::copy(&source, &target).map(drop))
            }
        };
        written.map_err(|e| invalid(format!("cannot copy '{from}' to '{to}': {e}")))?;
        budget.origins.insert(to.to_string(), source);
        Ok(())
    }
}

/// The Merge strategy: every document of each file merged into one mapping, then the source's
/// over the destination's; written with sorted keys as the controller's YAML marshaller does.
fn merge_files(dest: &Path, source: &Path) -> Result<String, String> {
    let mut merged = read_merged(dest)?;
    ag::merge_values(&mut merged, read_merged(source)?);
    Ok(crate::yaml::to_yaml(&crate::yaml::sorted(&merged)))
}

fn read_merged(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut out = Value::Object(Default::default());
    for doc in crate::yaml::parse_documents(&text)? {
        if !doc.is_object() {
            return Err("a document is not a YAML mapping".into());
        }
        ag::merge_values(&mut out, doc);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flux::artifact_generator::ArtifactGenerator;
    use serde_json::json;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        dir
    }

    fn listing(dir: &Path) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                } else {
                    let rel = crate::paths::relative(dir, &e.path());
                    out.insert(rel, std::fs::read_to_string(e.path()).unwrap());
                }
            }
        }
        out
    }

    /// Runs the copy operations of one artifact over `src`; the files it made.
    fn run(src: &Path, copy: Value) -> Result<BTreeMap<String, String>, String> {
        let g = ArtifactGenerator::from_value(
            &json!({"metadata": {"name": "g", "namespace": "ns"}, "spec": {
                "sources": [{"alias": "src", "kind": "GitRepository", "name": "r"}],
                "artifacts": [{"name": "a", "copy": copy}]}}),
            "ns",
        )?;
        let out = tempfile::tempdir().unwrap();
        let mut budget = Budget::new(SourceLimits::default());
        for op in &g.artifacts[0].copy {
            apply(op, src, out.path(), &mut budget).map_err(|e| e.to_string())?;
        }
        Ok(listing(out.path()))
    }

    fn names(files: &BTreeMap<String, String>) -> Vec<&str> {
        files.keys().map(String::as_str).collect()
    }

    #[test]
    fn directories_globs_and_files_land_like_cp() {
        let src = tree(&[
            ("apps/base/p/a.yaml", "a"),
            ("apps/prod/k.yaml", "k"),
            ("apps/x.yaml", "x"),
            ("top.yaml", "t"),
        ]);
        let made = run(src.path(), json!([{"from": "@src/apps/base/**", "to": "@artifact/base/"}])).unwrap();
        assert_eq!(names(&made), ["base/p/a.yaml"]);
        let made = run(src.path(), json!([{"from": "@src/apps/prod", "to": "@artifact/out"}])).unwrap();
        assert_eq!(names(&made), ["out/prod/k.yaml"], "a plain directory lands under its own name");
        let made = run(src.path(), json!([{"from": "@src/apps/*.yaml", "to": "@artifact/m/"}])).unwrap();
        assert_eq!(names(&made), ["m/apps/x.yaml"], "a glob keeps the matched path; * does not descend");
        let made =
            run(src.path(), json!([{"from": "@src/top.yaml", "to": "@artifact/renamed.yaml"}])).unwrap();
        assert_eq!(names(&made), ["renamed.yaml"]);
        let made = run(src.path(), json!([{"from": "@src/", "to": "@artifact/"}])).unwrap();
        assert_eq!(made.len(), 4, "the source root copies everything: {made:?}");
    }

    #[test]
    fn later_operations_overwrite_and_excludes_drop() {
        let src = tree(&[
            ("one/c.yaml", "1"),
            ("one/d.yaml", "d"),
            ("two/c.yaml", "2"),
            ("two/README.md", "r"),
            ("two/testdata/t.yaml", "t"),
        ]);
        let made = run(
            src.path(),
            json!([
                {"from": "@src/one/**", "to": "@artifact/"},
                {"from": "@src/two/**", "to": "@artifact/", "exclude": ["*.md", "testdata/**"]},
            ]),
        )
        .unwrap();
        assert_eq!(made, BTreeMap::from([("c.yaml".into(), "2".into()), ("d.yaml".into(), "d".into())]));
    }

    #[test]
    fn merge_deep_merges_yaml_and_never_touches_the_source() {
        let src = tree(&[("base.yaml", "a:\n  b: 1\n  l: [1]\n"), ("prod.yaml", "a:\n  c: 2\n  l: [2]\n")]);
        let made = run(
            src.path(),
            json!([
                {"from": "@src/base.yaml", "to": "@artifact/values.yaml"},
                {"from": "@src/prod.yaml", "to": "@artifact/values.yaml", "strategy": "Merge"},
            ]),
        )
        .unwrap();
        assert_eq!(made["values.yaml"], "a:\n  b: 1\n  c: 2\n  l:\n  - 2\n");
        assert_eq!(std::fs::read_to_string(src.path().join("base.yaml")).unwrap(), "a:\n  b: 1\n  l: [1]\n");
    }

    #[test]
    fn says_what_is_wrong() {
        let src = tree(&[("apps/a.md", "a")]);
        let error = run(src.path(), json!([{"from": "@src/missing", "to": "@artifact/"}])).unwrap_err();
        assert!(error.contains("'missing' does not exist in source @src"), "{error}");
        let error = run(src.path(), json!([{"from": "@src/*.yaml", "to": "@artifact/"}])).unwrap_err();
        assert!(error.contains("no files match '*.yaml'"), "{error}");
        let error =
            run(src.path(), json!([{"from": "@src/apps/*", "to": "@artifact/", "exclude": ["*.md"]}]))
                .unwrap_err();
        assert!(error.contains("is excluded"), "{error}");
    }

    #[test]
    fn a_symlink_in_the_source_is_never_followed() {
        let src = tree(&[("apps/a.yaml", "a")]);
        std::os::unix::fs::symlink("/etc", src.path().join("apps/etc")).unwrap();
        let made = run(src.path(), json!([{"from": "@src/apps/**", "to": "@artifact/"}])).unwrap();
        assert_eq!(names(&made), ["a.yaml"]);
        let error = run(src.path(), json!([{"from": "@src/apps/etc", "to": "@artifact/"}])).unwrap_err();
        assert!(error.contains("is not a regular file"), "{error}");
    }

    #[test]
    fn copies_are_bounded() {
        let src = tree(&[("a.yaml", "a"), ("b.yaml", "b")]);
        let g = ArtifactGenerator::from_value(
            &json!({"metadata": {"name": "g"}, "spec": {
                "sources": [{"alias": "src", "kind": "GitRepository", "name": "r"}],
                "artifacts": [{"name": "a", "copy": [{"from": "@src/**", "to": "@artifact/"}]}]}}),
            "ns",
        )
        .unwrap();
        let out = tempfile::tempdir().unwrap();
        let mut budget = Budget::new(SourceLimits { max_files: 1, ..SourceLimits::default() });
        let error = apply(&g.artifacts[0].copy[0], src.path(), out.path(), &mut budget).unwrap_err();
        assert_eq!(error.code(), "source-limit", "{error}");
    }
}
