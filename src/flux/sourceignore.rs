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
    /// Matchers in precedence order (later wins), each with the directory it is scoped to and
    /// where its patterns are written (for messages).
    layers: Vec<(PathBuf, Gitignore, String)>,
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
        let mut layers = vec![(root.to_path_buf(), build(root, defaults), DEFAULTS_ORIGIN.to_string())];
        for (dir, patterns) in file_layers {
            let origin = match dir.strip_prefix(root) {
                Ok(rel) if rel.as_os_str().is_empty() => SOURCEIGNORE_FILE.to_string(),
                Ok(rel) => format!("{}/{SOURCEIGNORE_FILE}", rel.display()),
                Err(_) => SOURCEIGNORE_FILE.to_string(),
            };
            layers.push((dir.clone(), build(&dir, patterns), origin));
        }
        layers.push((root.to_path_buf(), build(root, spec_lines), "the source's spec.ignore".into()));
        Ok(SourceIgnore { layers })
    }

    /// source-controller's default rules alone (VCS files, images, archives, CI files), which
    /// source-watcher applies when it archives a generated artifact (no `.sourceignore` read).
    pub fn defaults(root: &Path) -> Self {
        let defaults = VCS_DEFAULTS.iter().chain(OTHER_DEFAULTS).map(|s| s.to_string());
        SourceIgnore {
            layers: vec![(root.to_path_buf(), build(root, defaults), DEFAULTS_ORIGIN.to_string())],
        }
    }

    /// True when `path` (absolute, under the root) is left out of the artifact.
    pub fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        self.deciding_pattern(path, is_dir).is_some()
    }

    /// The pattern (and where it is written) that leaves `path` out, if one does.
    fn deciding_pattern(&self, path: &Path, is_dir: bool) -> Option<String> {
        let mut decided = None;
        for (dir, matcher, origin) in &self.layers {
            if !path.starts_with(dir) {
                continue;
            }
            match matcher.matched(path, is_dir) {
                Match::Ignore(glob) => decided = Some(format!("'{}' in {origin}", glob.original())),
                Match::Whitelist(_) => decided = None,
                Match::None => {}
            }
        }
        decided
    }

    /// Why the file `path` (absolute, under `root`) is not in the artifact, if it is not: the
    /// pattern that leaves it, or a directory above it, out.
    pub fn why_ignored(&self, root: &Path, path: &Path) -> Option<String> {
        let relative = path.strip_prefix(root).ok()?;
        let mut at = root.to_path_buf();
        let mut parts = relative.components().peekable();
        while let Some(part) = parts.next() {
            at.push(part);
            let is_dir = parts.peek().is_some();
            if let Some(pattern) = self.deciding_pattern(&at, is_dir) {
                let what =
                    if is_dir { format!("its directory {}", paths_shown(root, &at)) } else { "it".into() };
                return Some(format!("{what} is excluded from the source artifact by {pattern}"));
            }
        }
        None
    }
}

/// Where source-controller's built-in patterns come from, as messages say.
const DEFAULTS_ORIGIN: &str = "source-controller's default ignore rules";

fn paths_shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
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
    crate::tree::walk::<std::io::Error>(dir, |entry, file_type| {
        if file_type.is_file() && entry.file_name() == SOURCEIGNORE_FILE {
            out.push(entry.path());
        }
        Ok(if entry.file_name() == ".git" { crate::tree::Descend::No } else { crate::tree::Descend::Yes })
    })
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
    fn why_a_file_is_not_in_the_artifact_names_the_pattern_and_where_it_is_written() {
        let dir = tree(&[("apps/.sourceignore", "values.yaml\n"), ("apps/a.yaml", "")]);
        let rules = SourceIgnore::load(dir.path(), Some("*.bak\n")).unwrap();
        let why = |path: &str| rules.why_ignored(dir.path(), &dir.path().join(path));
        assert_eq!(
            why("apps/x/values.yaml").as_deref(),
            Some("it is excluded from the source artifact by 'values.yaml' in apps/.sourceignore")
        );
        assert_eq!(
            why("a.yaml.bak").as_deref(),
            Some("it is excluded from the source artifact by '*.bak' in the source's spec.ignore")
        );
        assert_eq!(why("apps/a.yaml"), None);
        let defaults = tree(&[("apps/a.yaml", "")]);
        let rules = SourceIgnore::load(defaults.path(), None).unwrap();
        assert_eq!(
            rules.why_ignored(defaults.path(), &defaults.path().join("apps/.github/ci.yaml")).as_deref(),
            Some("its directory apps/.github is excluded from the source artifact by '.github/' in source-controller's default ignore rules")
        );
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
