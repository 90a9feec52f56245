//! Which files a Kustomization's path includes, read from kustomization files without running
//! kustomize: a parent whose build fails still claims its children (they are never mistaken for
//! roots), and files other kustomizations use as patches are never "unreachable".

use crate::flux::generator::{kustomization_file, KUSTOMIZATION_FILES};
use crate::paths;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Directories visited per call at most, and how deep references and directories nest: bounds
/// for hostile trees, far above real fleets.
const MAX_DIRECTORIES: usize = 20_000;
const MAX_DEPTH: usize = 100;

/// A kustomization file parsed as YAML; `None` when it is not YAML.
fn parse(file: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(file).ok()?;
    crate::yaml::parse_documents(&text).ok()?.into_iter().next()
}

/// Joins an entry of a kustomization file in `dir` onto the tree, `..` stopping at `root`.
fn resolve(root: &Path, dir: &Path, entry: &str) -> PathBuf {
    let rel = paths::relative(root, dir);
    paths::secure_join(root, &format!("{rel}/{entry}"))
}

/// Every file (relative to `root`) that the Kustomization path `path` includes: the entries of
/// its kustomization file followed recursively, or, without one, every YAML file below it as the
/// controller generates it; then the files of the Kustomization's own `components` (relative to
/// its path, as the controller adds them).
pub fn included_files(root: &Path, path: &str, components: &[String]) -> BTreeSet<String> {
    let mut walk = Walk { root, files: BTreeSet::new(), visited: BTreeSet::new() };
    let start = paths::secure_join(root, path);
    if start.is_dir() {
        if kustomization_file(&start).is_some() {
            walk.kustomize(&start, 0);
        } else {
            walk.generated(&start, 0);
        }
        for component in components {
            walk.kustomize(&resolve(root, &start, component), 0);
        }
    }
    walk.files
}

struct Walk<'a> {
    root: &'a Path,
    files: BTreeSet<String>,
    visited: BTreeSet<PathBuf>,
}

impl Walk<'_> {
    /// A directory with a kustomization file: its resources, bases and components.
    fn kustomize(&mut self, dir: &Path, depth: usize) {
        if depth > MAX_DEPTH
            || self.visited.len() >= MAX_DIRECTORIES
            || !self.visited.insert(dir.to_path_buf())
        {
            return;
        }
        let Some(document) = kustomization_file(dir).and_then(|f| parse(&f)) else { return };
        for key in ["resources", "bases", "components"] {
            for entry in document[key].as_array().into_iter().flatten().filter_map(|e| e.as_str()) {
                let target = resolve(self.root, dir, entry);
                if target.is_file() {
                    self.files.insert(paths::relative(self.root, &target));
                } else if target.is_dir() {
                    self.kustomize(&target, depth + 1);
                }
            }
        }
    }

    /// A directory without one: YAML files recursively; a sub-directory holding a kustomization
    /// file is one resource.
    fn generated(&mut self, dir: &Path, depth: usize) {
        if depth > MAX_DEPTH
            || self.visited.len() >= MAX_DIRECTORIES
            || !self.visited.insert(dir.to_path_buf())
        {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut entries: Vec<_> =
            entries.flatten().filter(|e| !crate::render::is_fluxplan_scratch(&e.file_name())).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => {
                    if kustomization_file(&path).is_some() {
                        self.kustomize(&path, depth + 1);
                    } else {
                        self.generated(&path, depth + 1);
                    }
                }
                Ok(t) if t.is_file() => {
                    let name = entry.file_name();
                    let name = name.to_string_lossy();
                    if name.ends_with(".yaml") || name.ends_with(".yml") {
                        self.files.insert(paths::relative(self.root, &path));
                    }
                }
                _ => {}
            }
        }
    }
}

/// Files (relative to `root`) that kustomization files among `files` use as patches:
/// `patches[].path`, `patchesStrategicMerge[]`, `patchesJson6902[].path`.
pub fn patch_files(root: &Path, files: &[PathBuf]) -> BTreeSet<String> {
    let mut patches = BTreeSet::new();
    for file in files {
        let is_kustomization = file
            .file_name()
            .is_some_and(|n| KUSTOMIZATION_FILES.iter().any(|k| n == std::ffi::OsStr::new(k)));
        let (true, Some(dir)) = (is_kustomization, file.parent()) else { continue };
        let Some(document) = parse(file) else { continue };
        let by_path = ["patches", "patchesJson6902"]
            .iter()
            .flat_map(|key| document[*key].as_array().into_iter().flatten())
            .filter_map(|p| p["path"].as_str());
        // A strategic merge entry is a file name or an inline patch (which holds a newline).
        let strategic = document["patchesStrategicMerge"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str())
            .filter(|p| !p.contains('\n'));
        for entry in by_path.chain(strategic) {
            let target = resolve(root, dir, entry);
            if target.is_file() {
                patches.insert(paths::relative(root, &target));
            }
        }
    }
    patches
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        dir
    }

    #[test]
    fn follows_kustomization_files_and_generated_directories() {
        let dir = tree(&[
            ("kubernetes/flux/cluster/ks.yaml", "kind: Kustomization\n"),
            (
                "kubernetes/apps/default/kustomization.yaml",
                "resources:\n- ./radarr/ks.yaml\n- ../../../escape/x.yaml\n- https://example.com/remote\n",
            ),
            ("kubernetes/apps/default/radarr/ks.yaml", "kind: Kustomization\n"),
            ("kubernetes/apps/default/sonarr/ks.yaml", "kind: Kustomization\n"),
            ("kubernetes/apps/network/kustomization.yaml", "resources: [nginx]\n"),
            ("kubernetes/apps/network/nginx/kustomization.yaml", "resources: [ks.yaml]\n"),
            ("kubernetes/apps/network/nginx/ks.yaml", "kind: Kustomization\n"),
            ("kubernetes/apps/notes.txt", "x"),
            ("escape/x.yaml", "kind: ConfigMap\n"),
        ]);
        let files = included_files(dir.path(), "./kubernetes/apps", &[]);
        let expected = [
            "escape/x.yaml",
            "kubernetes/apps/default/radarr/ks.yaml",
            "kubernetes/apps/network/nginx/ks.yaml",
        ];
        assert_eq!(files.iter().map(String::as_str).collect::<Vec<_>>(), expected);
        // A commented-out entry is not included; a missing path includes nothing.
        assert!(!files.contains("kubernetes/apps/default/sonarr/ks.yaml"));
        assert!(included_files(dir.path(), "does/not/exist", &[]).is_empty());
        assert_eq!(included_files(dir.path(), "../../kubernetes/flux/cluster", &[]).len(), 1);
    }

    #[test]
    fn a_hostile_chain_of_references_ends() {
        let files: Vec<(String, String)> = (0..300)
            .map(|i| (format!("d{i}/kustomization.yaml"), format!("resources: [../d{}, x.yaml]\n", i + 1)))
            .collect();
        let mut files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
        files.push(("d0/x.yaml", "kind: ConfigMap\n"));
        let dir = tree(&files);
        assert_eq!(included_files(dir.path(), "d0", &[]).len(), 1);
    }

    #[test]
    fn the_kustomizations_own_components_count_relative_to_its_path() {
        let dir = tree(&[
            ("apps/radarr/app/kustomization.yaml", "resources: [hr.yaml]\n"),
            ("apps/radarr/app/hr.yaml", "kind: HelmRelease\n"),
            ("components/volsync/kustomization.yaml", "kind: Component\nresources: [pvc.yaml]\n"),
            ("components/volsync/pvc.yaml", "kind: PersistentVolumeClaim\n"),
        ]);
        let files = included_files(dir.path(), "apps/radarr/app", &["../../../components/volsync".into()]);
        assert_eq!(
            files.iter().map(String::as_str).collect::<Vec<_>>(),
            ["apps/radarr/app/hr.yaml", "components/volsync/pvc.yaml"]
        );
    }

    #[test]
    fn cycles_and_garbage_end() {
        let dir = tree(&[
            ("a/kustomization.yaml", "resources: [../b]\n"),
            ("b/kustomization.yaml", "resources: [../a, {x: 1}, 7]\n"),
            ("c/kustomization.yaml", ": not yaml : [\n"),
        ]);
        assert!(included_files(dir.path(), "a", &[]).is_empty());
        assert!(included_files(dir.path(), "c", &[]).is_empty());
    }

    #[test]
    fn finds_patch_files_of_every_form() {
        let dir = tree(&[
            (
                "tenants/staging/kustomization.yaml",
                "resources: [../base]\npatches:\n- path: dev-team-patch.yaml\n- patch: |\n    inline: true\n",
            ),
            ("tenants/staging/dev-team-patch.yaml", "kind: Kustomization\n"),
            (
                "tenants/prod/kustomization.yaml",
                "patchesStrategicMerge:\n- sm.yaml\n- |\n  kind: X\npatchesJson6902:\n- path: json.yaml\n",
            ),
            ("tenants/prod/sm.yaml", "kind: Kustomization\n"),
            ("tenants/prod/json.yaml", "- op: add\n"),
        ]);
        let files: Vec<PathBuf> = ["tenants/staging/kustomization.yaml", "tenants/prod/kustomization.yaml"]
            .iter()
            .map(|f| dir.path().join(f))
            .collect();
        let patches = patch_files(dir.path(), &files);
        assert_eq!(
            patches.iter().map(String::as_str).collect::<Vec<_>>(),
            ["tenants/prod/json.yaml", "tenants/prod/sm.yaml", "tenants/staging/dev-team-patch.yaml"]
        );
    }
}
