//! What a `targetRevision` (or a git generator's `revision`) names in this repository, as the
//! repo-server resolves it (`ls-remote`): `HEAD` or nothing is the default branch; a full or short
//! ref name is that branch or tag; hexadecimal is a commit; a semver range is the highest tag
//! in it. The name is written by the pull request: it never reaches git but as a commit id that
//! is hexadecimal only, and refs are matched here, by equality.

/// How a revision resolves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The tree being planned: `HEAD`, nothing, or the branch the plan merges into.
    Planned,
    /// A branch or tag of this repository, at this commit.
    Ref { name: String, commit: String },
    /// Hexadecimal: a commit id, possibly truncated, for git to find.
    Commit(String),
    /// Not resolvable here: why.
    Unresolvable(String),
}

/// A ref of the repository: its full name (`refs/heads/main`) and the commit it points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub name: String,
    pub commit: String,
}

/// The name the repo-server compares a revision with: the ref's short name, where the
/// planner's remote-tracking branches (`refs/remotes/origin/x`) stand for the remote's branches.
fn short_name(full: &str) -> Option<&str> {
    if let Some(branch) = full.strip_prefix("refs/heads/") {
        return Some(branch);
    }
    if let Some(tag) = full.strip_prefix("refs/tags/") {
        return Some(tag);
    }
    let (_remote, branch) = full.strip_prefix("refs/remotes/")?.split_once('/')?;
    (branch != "HEAD").then_some(branch)
}

/// Whether `revision` is the branch the plan merges into.
fn is_planned_branch(revision: &str, planned_branch: Option<&str>) -> bool {
    planned_branch.is_some_and(|b| revision == b || revision.strip_prefix("refs/heads/") == Some(b))
}

/// A semver constraint the repo-server resolves against the tags (`>=1.0`, `1.*`, `~1.2`,
/// `^1`): not a plain version, which is a tag name like any other.
fn is_semver_range(revision: &str) -> bool {
    let version = revision.strip_prefix('v').unwrap_or(revision);
    let has_operator =
        revision.chars().any(|c| matches!(c, '*' | '^' | '~' | '>' | '<' | '=' | '|' | ' ' | ','));
    let wildcard_part = version.split('.').skip(1).any(|p| p == "x" || p == "X");
    let leading_digit = version.chars().next().is_some_and(|c| c.is_ascii_digit());
    has_operator || (leading_digit && wildcard_part)
}

/// Resolves `revision` against the repository's `refs`; `planned_branch` is the branch the plan
/// merges into.
pub fn resolve(revision: Option<&str>, planned_branch: Option<&str>, refs: &[Ref]) -> Resolved {
    let revision = revision.map(str::trim).unwrap_or("");
    if revision.is_empty() || revision == "HEAD" || is_planned_branch(revision, planned_branch) {
        return Resolved::Planned;
    }
    if revision.starts_with('-') {
        return Resolved::Unresolvable(format!("'{revision}' is not a revision name (it starts with '-')"));
    }
    let hex = revision.chars().all(|c| c.is_ascii_hexdigit());
    if hex && matches!(revision.len(), 40 | 64) {
        return Resolved::Commit(revision.to_ascii_lowercase());
    }
    // Branches before tags, as `ls-remote` lists them; then remote-tracking branches.
    let rank = |r: &Ref| match r.name.split('/').nth(1) {
        Some("heads") => 0,
        Some("tags") => 1,
        _ => 2,
    };
    let mut candidates: Vec<&Ref> =
        refs.iter().filter(|r| r.name == revision || short_name(&r.name) == Some(revision)).collect();
    candidates.sort_by_key(|r| (rank(r), r.name.clone()));
    if let Some(found) = candidates.first() {
        return Resolved::Ref { name: found.name.clone(), commit: found.commit.clone() };
    }
    if is_semver_range(revision) {
        return Resolved::Unresolvable(format!(
            "'{revision}' is a semver range: the tag Argo CD picks depends on the remote's tags"
        ));
    }
    if hex && (7..40).contains(&revision.len()) {
        return Resolved::Commit(revision.to_ascii_lowercase());
    }
    Resolved::Unresolvable(format!("no branch, tag or commit '{revision}' in this repository"))
}

/// The revision as the plan compares it: `HEAD` and nothing are one.
pub fn normalized(revision: Option<&str>) -> &str {
    match revision.map(str::trim) {
        None | Some("") => "HEAD",
        Some(r) => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs() -> Vec<Ref> {
        let r = |name: &str, commit: &str| Ref { name: name.into(), commit: commit.into() };
        vec![
            r("refs/heads/main", "m"),
            r("refs/heads/evil", "e"),
            r("refs/remotes/origin/release", "r"),
            r("refs/remotes/origin/HEAD", "m"),
            r("refs/tags/v1.0.0", "t"),
            r("refs/tags/evil", "te"),
        ]
    }

    #[test]
    fn resolves_as_the_repo_server_does() {
        let at = |rev: &str| resolve(Some(rev), Some("main"), &refs());
        assert_eq!(resolve(None, Some("main"), &refs()), Resolved::Planned);
        assert_eq!(at(""), Resolved::Planned);
        assert_eq!(at("HEAD"), Resolved::Planned);
        assert_eq!(at("main"), Resolved::Planned);
        assert_eq!(at("refs/heads/main"), Resolved::Planned);
        assert_eq!(
            at("evil"),
            Resolved::Ref { name: "refs/heads/evil".into(), commit: "e".into() },
            "branch first"
        );
        assert_eq!(
            at("refs/tags/evil"),
            Resolved::Ref { name: "refs/tags/evil".into(), commit: "te".into() }
        );
        assert_eq!(at("v1.0.0"), Resolved::Ref { name: "refs/tags/v1.0.0".into(), commit: "t".into() });
        assert_eq!(
            at("release"),
            Resolved::Ref { name: "refs/remotes/origin/release".into(), commit: "r".into() }
        );
        assert_eq!(at(&"a".repeat(40)), Resolved::Commit("a".repeat(40)));
        assert_eq!(at("ABCDEF1"), Resolved::Commit("abcdef1".into()));
        for unresolvable in
            ["-c", "--upload-pack=x", ">=1.0.0", "1.x", "~1.2", "evil~1", "main^", "HEAD@{1}", ":/x"]
        {
            assert!(matches!(at(unresolvable), Resolved::Unresolvable(_)), "{unresolvable}");
        }
        // Without a known planned branch, `main` is a branch like any other.
        assert_eq!(
            resolve(Some("main"), None, &refs()),
            Resolved::Ref { name: "refs/heads/main".into(), commit: "m".into() }
        );
    }
}
