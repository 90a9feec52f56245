//! A revision the repository does not hold, explained: a shallow clone says so and how to fetch
//! more, a mistyped name gets the nearest branch and tag names. git's own "Needed a single
//! revision" says neither.

use std::path::Path;

/// The revision `rev` names no object of `repo`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("revision '{rev}' is not in {repo}{why}")]
pub struct UnknownRevision {
    pub rev: String,
    pub repo: String,
    /// What follows the repository: the cause and the fix.
    why: String,
}

/// At most this many names are suggested.
const MAX_SUGGESTIONS: usize = 3;
/// How alike a name must be to be suggested (Jaro-Winkler; clap suggests from 0.7 on).
const MIN_SIMILARITY: f64 = 0.8;

impl UnknownRevision {
    /// Why `rev` did not resolve in `repo`, when the cause is that no object is named so; `None`
    /// when it is something else (not a repository, an object that is not a commit).
    pub(super) fn diagnose(repo: &Path, rev: &str) -> Option<Self> {
        if !is_repository(repo) || names_an_object(repo, rev) {
            return None;
        }
        let why = if is_shallow(repo) {
            format!(", a shallow clone that holds only part of the history: {}", shallow_fix(rev))
        } else {
            absent(repo, rev)
        };
        let repo = std::path::absolute(repo).unwrap_or_else(|_| repo.to_path_buf());
        Some(UnknownRevision { rev: rev.to_string(), repo: repo.display().to_string(), why })
    }
}

/// How to get `rev` into a shallow clone.
fn shallow_fix(rev: &str) -> String {
    let fetch = if is_ancestry(rev) {
        "fetch more of it (`git fetch --deepen=N`, N commits further back)".to_string()
    } else {
        let name = rev.strip_prefix("origin/").unwrap_or(rev);
        format!("fetch that revision (`git fetch --depth=1 origin {name}`)")
    };
    format!(
        "{fetch}, or clone the whole history (GitHub Actions: `fetch-depth: 0` in actions/checkout; \
         GitLab CI: `GIT_DEPTH: 0`)"
    )
}

/// Why `rev` is absent from a repository holding its whole history.
fn absent(repo: &Path, rev: &str) -> String {
    if super::is_commit_id(rev) {
        return format!(": no commit has that id here; fetch it (`git fetch origin {rev}`)");
    }
    let name = name_part(rev);
    if name != rev && names_an_object(repo, name) {
        return format!(": {name} has no such ancestor");
    }
    let mut why = ": no branch, tag or commit is named so".to_string();
    let suggestions = nearest_names(repo, name);
    if !suggestions.is_empty() {
        let quoted: Vec<String> = suggestions.iter().map(|s| format!("'{s}'")).collect();
        why.push_str(&format!("; did you mean {}?", quoted.join(" or ")));
    }
    why
}

/// `HEAD~1`, `main^2`, `main@{1}`: a revision reached from a name.
fn is_ancestry(rev: &str) -> bool {
    rev.contains(['~', '^', '@'])
}

/// The name a revision starts from (`main` of `main~2`).
fn name_part(rev: &str) -> &str {
    rev.split(['~', '^', '@']).next().unwrap_or(rev)
}

/// The branch, remote-tracking branch and tag names nearest to `name`, most alike first.
fn nearest_names(repo: &Path, name: &str) -> Vec<String> {
    let Ok(refs) = super::refs(repo) else { return Vec::new() };
    let mut scored: Vec<(f64, String)> = refs
        .into_iter()
        .filter_map(|(full, _)| short_name(&full).map(str::to_string))
        .filter(|short| !short.ends_with("/HEAD"))
        .map(|short| (strsim::jaro_winkler(name, &short), short))
        .filter(|(score, _)| *score >= MIN_SIMILARITY)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(MAX_SUGGESTIONS).map(|(_, short)| short).collect()
}

/// `main` of `refs/heads/main`, `origin/main` of `refs/remotes/origin/main`, `v1` of `refs/tags/v1`.
fn short_name(full: &str) -> Option<&str> {
    ["refs/heads/", "refs/remotes/", "refs/tags/"].iter().find_map(|prefix| full.strip_prefix(prefix))
}

fn is_repository(repo: &Path) -> bool {
    succeeds(repo, &["rev-parse", "--git-dir"])
}

/// True when `rev` names an object the repository holds (a tree or a blob too: those fail for
/// another reason). `^{object}`: a full commit id alone passes `--verify` unread.
fn names_an_object(repo: &Path, rev: &str) -> bool {
    succeeds(repo, &["rev-parse", "--verify", "--quiet", "--end-of-options", &format!("{rev}^{{object}}")])
}

fn is_shallow(repo: &Path) -> bool {
    let mut cmd = super::git(repo);
    cmd.args(["rev-parse", "--is-shallow-repository"]).stderr(std::process::Stdio::null());
    cmd.output().is_ok_and(|out| out.status.success() && out.stdout.starts_with(b"true"))
}

fn succeeds(repo: &Path, args: &[&str]) -> bool {
    let mut cmd = super::git(repo);
    cmd.args(args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    cmd.status().is_ok_and(|status| status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestry_and_names() {
        assert!(is_ancestry("HEAD~1") && is_ancestry("main^2") && is_ancestry("main@{1}"));
        assert!(!is_ancestry("origin/main"));
        assert_eq!(name_part("main~2"), "main");
        assert_eq!(name_part("origin/main"), "origin/main");
        assert_eq!(short_name("refs/remotes/origin/main"), Some("origin/main"));
        assert_eq!(short_name("refs/notes/x"), None);
    }

    #[test]
    fn shallow_fix_names_the_fetch_for_each_kind_of_revision() {
        assert!(shallow_fix("HEAD~1").contains("git fetch --deepen=N"));
        assert!(shallow_fix("origin/main").contains("git fetch --depth=1 origin main`"));
        assert!(shallow_fix("0123").contains("fetch-depth: 0"));
    }
}
