//! Which forge repositories an agent may read the bot's stored runs of: those the operator keeps
//! a checkout of inside the allowed directories (`--allow`, `--mcp-allow`), a checkout whose
//! remote names the repository. The same directories that bound `plan` bound `runs`: a token
//! holder reads nothing of a repository the operator did not put there.

use super::allowed_repository;
use std::path::{Path, PathBuf};

/// Directories looked at in all: the allowed ones are the operator's, but a huge one must not
/// make every `runs` slow.
const MAX_ENTRIES: usize = 4096;

/// The checkout inside `allowed` of the forge repository `repository` (`owner/name`,
/// `group/sub/project`): the allowed directory itself, one of its entries or one two deep
/// (`DIR/owner/name`) whose git remote names it. Forge names are compared without case, as
/// GitHub and GitLab resolve them.
pub(super) fn checkout_of(allowed: &[PathBuf], hint: &str, repository: &str) -> Result<PathBuf, String> {
    if allowed.is_empty() {
        return Err(format!(
            "this server reads the runs of no repository: the operator starts {hint} for a directory holding a \
             checkout of it"
        ));
    }
    let wanted = repository.to_ascii_lowercase();
    let inside = |path: &Path| allowed.iter().any(|dir| path.starts_with(dir));
    for candidate in candidates(allowed) {
        // Inside once links are resolved (a link leading out names nothing), then its remotes
        // (one `git config`), then, for the one that names it, the same guards as `plan`: what
        // git reads stays inside the allowed directories.
        let Some(real) = std::fs::canonicalize(&candidate).ok().filter(|real| inside(real)) else { continue };
        if !remote_urls(&real).iter().filter_map(|url| named_repository(url)).any(|named| named == wanted) {
            continue;
        }
        if let Ok(real) = allowed_repository(allowed, hint, &real.to_string_lossy()) {
            return Ok(real);
        }
    }
    // One answer whether or not the bot holds runs of it: a caller learns nothing.
    let dirs: Vec<String> = allowed.iter().map(|d| d.display().to_string()).collect();
    Err(format!(
        "repository {repository} has no checkout in the directories this server may plan ({}): its runs are not \
         served. The operator keeps a checkout of it there (a git remote naming it), with {hint}",
        dirs.join(", ")
    ))
}

/// Directories that look like repositories: each allowed directory, its entries and theirs.
fn candidates(allowed: &[PathBuf]) -> Vec<PathBuf> {
    let looks_like_repo = |dir: &Path| dir.join(".git").exists() || dir.join("HEAD").is_file();
    let entries = |dir: &Path| -> Vec<PathBuf> {
        let Ok(read) = std::fs::read_dir(dir) else { return Vec::new() };
        let mut found: Vec<PathBuf> =
            read.flatten().take(MAX_ENTRIES).map(|e| e.path()).filter(|p| p.is_dir()).collect();
        found.sort();
        found
    };
    let mut found = Vec::new();
    let mut seen = 0;
    for dir in allowed {
        found.push(dir.clone());
        for child in entries(dir) {
            seen += 1;
            if seen > MAX_ENTRIES {
                break;
            }
            if looks_like_repo(&child) {
                found.push(child);
            } else {
                let grandchildren = entries(&child);
                seen += grandchildren.len();
                found.extend(grandchildren);
            }
        }
    }
    found.retain(|dir| looks_like_repo(dir));
    found
}

/// The URLs of the repository's remotes.
fn remote_urls(repo: &Path) -> Vec<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["config", "--get-regexp", r"^remote\..*\.url$"])
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .output();
    let Ok(out) = out else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_once(' ').map(|(_, url)| url.trim().to_string()))
        .collect()
}

/// The forge repository a remote URL names, lower case: `https://host/acme/fleet.git`,
/// `ssh://git@host:22/acme/fleet`, `git@host:acme/fleet.git` → `acme/fleet`. None for a local
/// path, which names no forge repository.
fn named_repository(url: &str) -> Option<String> {
    let path = match url.split_once("://") {
        Some((scheme, rest)) if scheme != "file" => rest.split_once('/')?.1,
        Some(_) => return None,
        // scp-like `[user@]host:path`; a local path has a `/` before any `:`.
        None => match url.split_once(':') {
            Some((host, path)) if !host.is_empty() && !host.contains('/') => path,
            _ => return None,
        },
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    (!path.is_empty()).then(|| path.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HINT: &str = "`fluxplan serve` with --mcp-allow DIR";

    fn git(dir: &Path, args: &[&str]) {
        let status = std::process::Command::new("git").arg("-C").arg(dir).args(args).status().unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn remote_urls_name_their_forge_repository() {
        for (url, named) in [
            ("https://github.com/acme/fleet.git", Some("acme/fleet")),
            ("https://github.com/Acme/Fleet/", Some("acme/fleet")),
            ("ssh://git@gitlab.example:2222/group/sub/project.git", Some("group/sub/project")),
            ("git@github.com:acme/fleet.git", Some("acme/fleet")),
            ("/srv/mirrors/acme/fleet", None),
            ("file:///srv/acme/fleet", None),
            ("./acme:fleet", None),
            ("https://github.com", None),
        ] {
            assert_eq!(named_repository(url).as_deref(), named, "{url}");
        }
    }

    /// Attack: the runs of a repository with no checkout in the allowed directories, one whose
    /// name extends an allowed one, one whose checkout is reached by a link leading outside, or
    /// any when nothing is allowed. Near miss: the checkout inside (two deep, `DIR/owner/name`)
    /// permits its repository, whatever the case of its name.
    #[test]
    fn runs_are_read_only_for_repositories_checked_out_in_the_allowed_directories() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let allowed_dir = root.path().join("fleets");
        let fleet = allowed_dir.join("acme/fleet");
        std::fs::create_dir_all(&fleet).unwrap();
        git(&fleet, &["init", "-q"]);
        git(&fleet, &["remote", "add", "origin", "git@github.com:acme/fleet.git"]);
        git(outside.path(), &["init", "-q"]);
        git(outside.path(), &["remote", "add", "origin", "https://github.com/acme/secret.git"]);
        std::os::unix::fs::symlink(outside.path(), allowed_dir.join("acme/secret")).unwrap();
        let allowed = vec![std::fs::canonicalize(&allowed_dir).unwrap()];

        let found = checkout_of(&allowed, HINT, "acme/fleet").unwrap();
        assert_eq!(found, std::fs::canonicalize(&fleet).unwrap());
        assert!(checkout_of(&allowed, HINT, "ACME/Fleet").is_ok());
        for refused in ["acme/secret", "acme/fleet-evil", "acme", "acme/fleet/x", "acme/fleet/../secret", ""]
        {
            let why = checkout_of(&allowed, HINT, refused).unwrap_err();
            assert!(why.contains("no checkout") && why.contains("--mcp-allow"), "{refused}: {why}");
        }
        let none = checkout_of(&[], HINT, "acme/fleet").unwrap_err();
        assert!(none.contains("no repository") && none.contains("--mcp-allow"), "{none}");
    }
}
