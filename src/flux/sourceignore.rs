//! Which files of a source reach the artifact: `.sourceignore` files (each scoped to its own
//! directory), `spec.ignore`, and source-controller's defaults.

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use std::path::{Path, PathBuf};

const VCS_DEFAULTS: &[&str] = &[".git/", ".gitignore", ".gitmodules", ".gitattributes"];
/// Dropped as soon as any pattern is given, by a `.sourceignore` file or `spec.ignore`.
const OTHER_DEFAULTS: &[&str] = &[
    "*.jpg",
    "*.jpeg",
    "*.gif",
    "*.png",
    "*.wmv",
    "*.flv",
    "*.tar.gz",
    "*.zip",
    ".github/",
    ".circleci/",
    ".travis.yml",
    ".gitlab-ci.yml",
    "appveyor.yml",
    ".drone.yml",
    "cloudbuild.yaml",
    "codeship-services.yml",
    "codeship-steps.yml",
    "**/.goreleaser.yml",
    "**/.sops.yaml",
    "**/.flux.yaml",
];
pub const SOURCEIGNORE_FILE: &str = ".sourceignore";

/// The ignore rules of one source tree.
pub struct SourceIgnore {
    /// Matchers in precedence order (later wins), each with the directory it is scoped to.
    layers: Vec<(PathBuf, Gitignore)>,
}

fn build(root: &Path, lines: impl IntoIterator<Item = String>) -> Gitignore {
    let mut builder = GitignoreBuilder::new(root);
    for line in lines {
        // A malformed pattern is skipped, as git does.
        let _ = builder.add_line(None, &line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

impl SourceIgnore {
    /// Reads every `.sourceignore` under `root` and combines them with `spec_ignore`.
    pub fn load(root: &Path, spec_ignore: Option<&str>) -> std::io::Result<Self> {
        let mut files = Vec::new();
        collect_sourceignore_files(root, &mut files)?;
        files.sort();
        let spec_lines: Vec<String> = spec_ignore.map(lines).unwrap_or_default();
        let mut file_layers = Vec::new();
        for file in files {
            let dir = file.parent().unwrap_or(root).to_path_buf();
            let patterns = lines(&std::fs::read_to_string(&file).unwrap_or_default());
            file_layers.push((dir.clone(), patterns));
        }
        let any_pattern = !spec_lines.is_empty() || file_layers.iter().any(|(_, p)| !p.is_empty());
        let mut defaults: Vec<String> = VCS_DEFAULTS.iter().map(|s| s.to_string()).collect();
        if !any_pattern {
            defaults.extend(OTHER_DEFAULTS.iter().map(|s| s.to_string()));
        }
        let mut layers = vec![(root.to_path_buf(), build(root, defaults))];
        for (dir, patterns) in file_layers {
            layers.push((dir.clone(), build(&dir, patterns)));
        }
        layers.push((root.to_path_buf(), build(root, spec_lines)));
        Ok(SourceIgnore { layers })
    }

    /// source-controller's default rules alone (VCS files, images, archives, CI files), which
    /// source-watcher applies when it archives a generated artifact (no `.sourceignore` read).
    pub fn defaults(root: &Path) -> Self {
        let defaults = VCS_DEFAULTS.iter().chain(OTHER_DEFAULTS).map(|s| s.to_string());
        SourceIgnore { layers: vec![(root.to_path_buf(), build(root, defaults))] }
    }

    /// True when `path` (absolute, under the root) is left out of the artifact.
    pub fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        let mut ignored = false;
        for (dir, matcher) in &self.layers {
            if !path.starts_with(dir) {
                continue;
            }
            match matcher.matched(path, is_dir) {
                Match::Ignore(_) => ignored = true,
                Match::Whitelist(_) => ignored = false,
                Match::None => {}
            }
        }
        ignored
    }
}

/// Non-empty, non-comment lines of an ignore file.
fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

fn collect_sourceignore_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file_type = entry.file_type()?;
        if file_type.is_dir() && entry.file_name() != ".git" {
            collect_sourceignore_files(&entry.path(), out)?;
        } else if file_type.is_file() && entry.file_name() == SOURCEIGNORE_FILE {
            out.push(entry.path());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        dir
    }

    #[test]
    fn defaults_apply_without_patterns() {
        let dir = tree(&[("a.yaml", "")]);
        let rules = SourceIgnore::load(dir.path(), None).unwrap();
        assert!(rules.is_ignored(&dir.path().join("logo.png"), false));
        assert!(rules.is_ignored(&dir.path().join(".github"), true));
        assert!(rules.is_ignored(&dir.path().join("x/.sops.yaml"), false));
        assert!(!rules.is_ignored(&dir.path().join("a.yaml"), false));
    }

    #[test]
    fn any_pattern_drops_non_vcs_defaults() {
        let dir = tree(&[(".sourceignore", "secret/\n")]);
        let rules = SourceIgnore::load(dir.path(), None).unwrap();
        assert!(!rules.is_ignored(&dir.path().join("logo.png"), false));
        assert!(rules.is_ignored(&dir.path().join(".gitignore"), false));
        assert!(rules.is_ignored(&dir.path().join("secret"), true));
    }

    #[test]
    fn nested_sourceignore_is_scoped_to_its_directory() {
        let dir = tree(&[("apps/.sourceignore", "values.yaml\n")]);
        let rules = SourceIgnore::load(dir.path(), None).unwrap();
        assert!(rules.is_ignored(&dir.path().join("apps/values.yaml"), false));
        assert!(rules.is_ignored(&dir.path().join("apps/x/values.yaml"), false));
        assert!(!rules.is_ignored(&dir.path().join("values.yaml"), false));
    }

    #[test]
    fn spec_ignore_wins_over_sourceignore() {
        let dir = tree(&[(".sourceignore", "*.yaml\n")]);
        let rules = SourceIgnore::load(dir.path(), Some("!keep.yaml\n")).unwrap();
        assert!(rules.is_ignored(&dir.path().join("drop.yaml"), false));
        assert!(!rules.is_ignored(&dir.path().join("keep.yaml"), false));
    }
}
