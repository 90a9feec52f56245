//! A per-repository cache of bare mirrors, updated with `git fetch` (authenticated with the forge
//! token, which never reaches a URL, a log or a message). Works with `file://` URLs too, for
//! tests and air-gapped mirrors.

use anyhow::{bail, Context, Result};
use base64::Engine;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// Credentials for fetching over HTTPS.
#[derive(Clone)]
pub struct GitAuth {
    pub user: &'static str,
    pub token: String,
}

impl GitAuth {
    /// The forge's token, with the user name git authenticates with next to it.
    pub fn for_forge(forge: crate::forge::ForgeKind, token: String) -> Self {
        let user = match forge {
            crate::forge::ForgeKind::GitHub => "x-access-token",
            crate::forge::ForgeKind::GitLab => "oauth2",
        };
        GitAuth { user, token }
    }
}

pub use super::mirror_heal::heal_all;

pub struct Mirrors {
    dir: PathBuf,
    locks: Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>,
}

impl Mirrors {
    pub fn new(dir: PathBuf) -> Self {
        Mirrors { dir, locks: Mutex::default() }
    }

    /// The mirror of `clone_url`, fetched so that every commit of `wanted` is present (blocking).
    /// `refspecs` are fetched besides the branches (`+refs/pull/*/head:refs/pull/*/head`: the forge
    /// keeps the heads of pull requests, from forks too, in the base repository).
    /// Where the mirror of `clone_url` lives (it may not exist yet).
    pub fn path(&self, clone_url: &str) -> PathBuf {
        let key = hex::encode(&Sha256::digest(clone_url.as_bytes())[..12]);
        self.dir.join(format!("{key}.git"))
    }

    pub fn fetch(
        &self,
        clone_url: &str,
        refspecs: &[&str],
        wanted: &[&str],
        auth: Option<&GitAuth>,
    ) -> Result<PathBuf> {
        let path = self.path(clone_url);
        let lock =
            self.locks.lock().unwrap_or_else(|e| e.into_inner()).entry(path.clone()).or_default().clone();
        let _guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let Err(first) = self.fetch_locked(&path, clone_url, refspecs, wanted, auth) else { return Ok(path) };
        // A killed fetch may have left lock files: once they are stale, try again.
        if super::mirror_heal::remove_stale_locks(&path, super::mirror_heal::LOCK_GRACE).is_empty()
            && !first.is::<FetchFailed>()
        {
            return Err(first);
        }
        let Err(second) = self.fetch_locked(&path, clone_url, refspecs, wanted, auth) else {
            return Ok(path);
        };
        // Failing twice while the remote answers: the mirror is broken (corrupt), not the forge.
        let remote_answers =
            second.is::<FetchFailed>() && branch_tip(clone_url, "fluxplan-probe", auth).is_ok();
        if !remote_answers {
            return Err(second);
        }
        super::mirror_heal::move_aside(&path)
            .with_context(|| format!("cannot move {} aside", path.display()))?;
        self.fetch_locked(&path, clone_url, refspecs, wanted, auth)?;
        Ok(path)
    }

    /// One fetch into the mirror (created when missing); the caller holds its lock.
    fn fetch_locked(
        &self,
        path: &Path,
        clone_url: &str,
        refspecs: &[&str],
        wanted: &[&str],
        auth: Option<&GitAuth>,
    ) -> Result<()> {
        let path = path.to_path_buf();
        if !path.join("HEAD").exists() {
            std::fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
            // A mirror whose creation was cut short fails here: it is made anew.
            let init = |args: &[&str]| git(&path, None, args).map_err(|e| FetchFailed(format!("{e:#}")));
            init(&["init", "--quiet", "--bare"])?;
            init(&["remote", "add", "origin", clone_url])?;
        }
        let auth = auth.filter(|_| clone_url.starts_with("http"));
        // Tags too, as Argo CD resolves a `targetRevision` naming one against the remote's tags;
        // a tag moved or deleted upstream is moved or deleted here (forced, pruned).
        let mut args = vec![
            "fetch",
            "--quiet",
            "--prune",
            "--no-tags",
            "origin",
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        ];
        args.extend(refspecs);
        git(&path, auth, &args)
            .map_err(|e| FetchFailed(format!("{e:#}")))
            .with_context(|| format!("cannot fetch {}", crate::git::redact_url(clone_url)))?;
        for sha in wanted {
            if has_commit(&path, sha) {
                continue;
            }
            // Commits only reachable from other refs: ask for them by id.
            let _ = git(&path, auth, &["fetch", "--quiet", "origin", sha]);
            if !has_commit(&path, sha) {
                bail!("commit {sha} is not in {} (force-pushed away?)", crate::git::redact_url(clone_url));
            }
        }
        Ok(())
    }
}

/// `git fetch` itself failed (not a commit missing after it).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct FetchFailed(String);

/// The commit `branch` points at on the remote (`git ls-remote`: nothing is fetched), if the
/// branch exists.
pub fn branch_tip(clone_url: &str, branch: &str, auth: Option<&GitAuth>) -> Result<Option<String>> {
    let auth = auth.filter(|_| clone_url.starts_with("http"));
    let reference = format!("refs/heads/{branch}");
    let out = command(auth)
        .args(["ls-remote", "--", clone_url, &reference])
        .output()
        .context("cannot run git (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "cannot list the branches of {}: {}",
            crate::git::redact_url(clone_url),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().next().map(str::to_string))
}

/// The first parent of `sha` in `mirror` (the base tip a merge, squash or fast-forward landed on);
/// `None` for a root commit.
pub fn first_parent(mirror: &Path, sha: &str) -> Result<Option<String>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(mirror)
        .args(["rev-list", "--parents", "-n", "1", sha, "--"])
        .stdin(Stdio::null())
        .output()
        .context("cannot run git (is it installed?)")?;
    if !out.status.success() {
        bail!("cannot read the parents of {sha}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().nth(1).map(str::to_string))
}

/// The base branch tip a pull request landed on, from its merge commit `merge` and its head
/// `head`: a merge commit's first parent; for a squash or rebase merge, the first commit down the
/// first-parent chain that is not one of the pull request's own commits replayed (recognised by
/// patch id). `None` for a fast-forward (the merge is the head: nothing tells) or a root commit.
pub fn landed_on(mirror: &Path, merge: &str, head: &str) -> Result<Option<String>> {
    if !crate::git::is_commit_id(merge) {
        bail!("{merge:?} is not a commit id");
    }
    if merge == head {
        return Ok(None);
    }
    if !crate::git::is_commit_id(head) {
        return first_parent(mirror, merge);
    }
    // `<merge> <parent>...`, read once: a merge commit has two parents or more.
    let parents = output(mirror, &["rev-list", "--parents", "-n", "1", merge, "--"])?;
    let parents: Vec<&str> = parents.split_whitespace().skip(1).collect();
    let Some(parent) = parents.first().map(|p| p.to_string()) else { return Ok(None) };
    if parents.len() > 1 {
        return Ok(Some(parent));
    }
    // The pull request's own commits, since it forked from the base. merge-base exits 1 when
    // there is no common history (none are its own); any other failure is an error.
    let base = Command::new("git")
        .arg("-C")
        .arg(mirror)
        .args(["merge-base", head, merge])
        .stdin(Stdio::null())
        .output()
        .context("cannot run git (is it installed?)")?;
    match base.status.code() {
        Some(0) => {}
        Some(1) if base.stderr.is_empty() => return Ok(Some(parent)),
        _ => bail!("git merge-base failed: {}", String::from_utf8_lossy(&base.stderr).trim()),
    }
    let fork = String::from_utf8_lossy(&base.stdout);
    let fork = fork.trim();
    let own = patch_ids(mirror, &["--no-merges", &format!("{fork}..{head}")])?;
    if own.is_empty() {
        return Ok(Some(parent));
    }
    let limit = (own.len() + 1).to_string();
    let chain = output(mirror, &["rev-list", "--first-parent", "-n", &limit, &parent, "--"])?;
    let replayed = patch_ids(mirror, &["--first-parent", "-n", &limit, &parent])?;
    let replayed: std::collections::HashMap<String, String> =
        replayed.into_iter().map(|(patch, commit)| (commit, patch)).collect();
    let own: std::collections::HashSet<String> = own.into_iter().map(|(patch, _)| patch).collect();
    Ok(chain
        .lines()
        .find(|commit| replayed.get(*commit).is_none_or(|patch| !own.contains(patch)))
        .map(str::to_string)
        .or(Some(parent)))
}

/// (patch id, commit) of the commits `git log` lists with `args`.
fn patch_ids(mirror: &Path, args: &[&str]) -> Result<Vec<(String, String)>> {
    let mut log = Command::new("git");
    log.arg("-C").arg(mirror).args(["log", "-p", "--format=commit %H"]).args(args).arg("--");
    let patches = log.stdin(Stdio::null()).output().context("cannot run git (is it installed?)")?;
    if !patches.status.success() {
        bail!("git log failed: {}", String::from_utf8_lossy(&patches.stderr).trim());
    }
    let mut child = Command::new("git")
        .arg("-C")
        .arg(mirror)
        .args(["patch-id", "--stable"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run git patch-id")?;
    let mut stdin = child.stdin.take().context("git patch-id has no stdin")?;
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &patches.stdout));
    let out = child.wait_with_output().context("git patch-id failed")?;
    let _ = writer.join();
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_once(' ').map(|(p, c)| (p.to_string(), c.to_string())))
        .collect())
}

fn output(repo: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run git (is it installed?)")?;
    if !out.status.success() {
        bail!("git {} failed: {}", args.first().unwrap_or(&""), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True when `ancestor` is `descendant` or one of its ancestors; false when either is unknown.
pub fn is_ancestor(mirror: &Path, ancestor: &str, descendant: &str) -> bool {
    has_commit(mirror, descendant)
        && Command::new("git")
            .arg("-C")
            .arg(mirror)
            .args(["merge-base", "--is-ancestor", ancestor, descendant])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

pub fn has_commit(repo: &Path, sha: &str) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["cat-file", "-e", &format!("{sha}^{{commit}}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Below this many bytes a second for `STALL_SECS`, an HTTP fetch is given up (a hung server
/// would hold a worker forever); `GIT_HTTP_LOW_SPEED_LIMIT`/`_TIME` in the environment win.
const STALL_BYTES_PER_SEC: u32 = 1000;
const STALL_SECS: u32 = 60;

/// git, never prompting, giving up on a stalled transfer, authenticated with `auth` when given.
fn command(auth: Option<&GitAuth>) -> Command {
    let mut cmd = Command::new("git");
    cmd.env("GIT_TERMINAL_PROMPT", "0").stdin(Stdio::null());
    cmd.arg("-c").arg(format!("http.lowSpeedLimit={STALL_BYTES_PER_SEC}"));
    cmd.arg("-c").arg(format!("http.lowSpeedTime={STALL_SECS}"));
    if let Some(auth) = auth {
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", auth.user, auth.token));
        // Passed through the environment, not the command line, so it never shows in `ps`.
        cmd.env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "http.extraHeader")
            .env("GIT_CONFIG_VALUE_0", format!("Authorization: Basic {basic}"));
    }
    cmd
}

fn git(repo: &Path, auth: Option<&GitAuth>, args: &[&str]) -> Result<()> {
    let out =
        command(auth).arg("-C").arg(repo).args(args).output().context("cannot run git (is it installed?)")?;
    if !out.status.success() {
        bail!("git {} failed: {}", args.first().unwrap_or(&""), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    #[test]
    fn mirrors_a_local_repository_and_finds_commits_off_the_branches() {
        let (upstream, url) = upstream();
        let up = upstream.path();
        run(up, &["checkout", "-qb", "feature"]);
        let feature = commit_upstream(up, "2");
        let cache = tempfile::tempdir().unwrap();
        let mirrors = Mirrors::new(cache.path().to_path_buf());
        let path = mirrors.fetch(&url, &[], &[&feature], None).unwrap();
        assert!(has_commit(&path, &feature));
        assert_eq!(run(&path, &["remote", "get-url", "origin"]), url);
        // A second fetch reuses the mirror; tags come along (Argo CD pins resolve against them),
        // and one moved upstream moves here.
        run(up, &["tag", "v1", &feature]);
        assert_eq!(mirrors.fetch(&url, &[], &[&feature], None).unwrap(), path);
        assert_eq!(run(&path, &["rev-parse", "v1^{commit}"]), feature);
        run(up, &["tag", "-f", "v1", "main"]);
        mirrors.fetch(&url, &[], &[], None).unwrap();
        assert_eq!(run(&path, &["rev-parse", "v1^{commit}"]), run(up, &["rev-parse", "main"]));
        let missing = "0123456789012345678901234567890123456789";
        let error = mirrors.fetch(&url, &[], &[missing], None).unwrap_err();
        assert!(error.to_string().contains(missing), "{error}");
    }

    /// A repository upstream with one commit on `main`; returns it and its URL.
    fn upstream() -> (tempfile::TempDir, String) {
        let upstream = tempfile::tempdir().unwrap();
        let up = upstream.path();
        run(up, &["init", "-q", "-b", "main"]);
        std::fs::write(up.join("a"), "1").unwrap();
        run(up, &["-c", "user.email=a@b", "-c", "user.name=n", "add", "a"]);
        run(up, &["-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "one"]);
        let url = format!("file://{}", up.display());
        (upstream, url)
    }

    fn commit_upstream(up: &Path, text: &str) -> String {
        std::fs::write(up.join("a"), text).unwrap();
        run(up, &["-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qam", text]);
        run(up, &["rev-parse", "HEAD"])
    }

    #[test]
    fn a_lock_left_by_a_killed_fetch_does_not_fail_the_next_one() {
        let (upstream, url) = upstream();
        let cache = tempfile::tempdir().unwrap();
        let mirrors = Mirrors::new(cache.path().to_path_buf());
        let path = mirrors.fetch(&url, &[], &[], None).unwrap();
        // As a fetch killed while it updated `main` leaves it, some time ago.
        let lock = path.join("refs/heads/main.lock");
        std::fs::File::create(&lock)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(600))
            .unwrap();
        let moved = commit_upstream(upstream.path(), "2");
        let out = Command::new("git")
            .arg("-C")
            .arg(&path)
            .args(["fetch", "-q", "origin", "+refs/heads/*:refs/heads/*"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "the lock fails a plain fetch: the test plants what it means to");
        assert_eq!(mirrors.fetch(&url, &[], &[&moved], None).unwrap(), path);
        assert_eq!(run(&path, &["rev-parse", "main"]), moved);
        assert!(!lock.exists());
    }

    #[test]
    fn a_mirror_that_stays_broken_is_cloned_anew() {
        let (upstream, url) = upstream();
        let cache = tempfile::tempdir().unwrap();
        let mirrors = Mirrors::new(cache.path().to_path_buf());
        let path = mirrors.fetch(&url, &[], &[], None).unwrap();
        std::fs::remove_dir_all(path.join("objects")).unwrap();
        let moved = commit_upstream(upstream.path(), "2");
        assert_eq!(mirrors.fetch(&url, &[], &[&moved], None).unwrap(), path);
        assert!(has_commit(&path, &moved));
        // Near miss: a remote that does not answer leaves the mirror where it is.
        let gone = format!("file://{}/nowhere", cache.path().display());
        let kept = mirrors.fetch(&gone, &[], &[], None);
        assert!(kept.is_err());
        assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 2, "no mirror moved aside or lost");
    }

    #[test]
    fn the_base_a_pull_request_landed_on_is_found_for_merges_squashes_and_rebases() {
        let up = tempfile::tempdir().unwrap();
        let up = up.path();
        let git = |args: &[&str]| run(up, &[&["-c", "user.email=a@b", "-c", "user.name=n"], args].concat());
        let commit = |file: &str, text: &str, message: &str| {
            std::fs::write(up.join(file), text).unwrap();
            git(&["add", "-A"]);
            git(&["commit", "-qm", message]);
            git(&["rev-parse", "HEAD"])
        };
        git(&["init", "-q", "-b", "main"]);
        commit("base", "0", "base");
        git(&["checkout", "-qb", "feature"]);
        commit("a", "1", "one");
        let head = commit("b", "2", "two");
        git(&["checkout", "-q", "main"]);
        let tip = commit("other", "3", "someone else");
        // A merge commit.
        git(&["merge", "-q", "--no-ff", "-m", "merge", "feature"]);
        let merged = git(&["rev-parse", "HEAD"]);
        assert_eq!(landed_on(up, &merged, &head).unwrap().as_deref(), Some(tip.as_str()));
        // A squash.
        git(&["reset", "-q", "--hard", &tip]);
        git(&["merge", "-q", "--squash", "feature"]);
        git(&["commit", "-qm", "squash"]);
        let squashed = git(&["rev-parse", "HEAD"]);
        assert_eq!(landed_on(up, &squashed, &head).unwrap().as_deref(), Some(tip.as_str()));
        // A rebase: both commits replayed on the tip.
        git(&["reset", "-q", "--hard", &tip]);
        git(&["cherry-pick", &format!("{tip}..{head}")]);
        let rebased = git(&["rev-parse", "HEAD"]);
        assert_eq!(landed_on(up, &rebased, &head).unwrap().as_deref(), Some(tip.as_str()));
        // A fast-forward tells nothing.
        assert_eq!(landed_on(up, &head, &head).unwrap(), None);
        // Only commit ids reach git.
        assert!(landed_on(up, "--output=/tmp/x", &head).is_err());
        assert_eq!(landed_on(up, &rebased, "--all").unwrap(), first_parent(up, &rebased).unwrap());
        // A head with no history in common: the merge's first parent.
        git(&["checkout", "-q", "--orphan", "lone"]);
        let lone = commit("lone", "4", "lone");
        git(&["checkout", "-q", "main"]);
        assert_eq!(landed_on(up, &rebased, &lone).unwrap(), first_parent(up, &rebased).unwrap());
        // A head the mirror lacks is an error, not a base.
        let missing = "0123456789abcdef0123456789abcdef01234567";
        assert!(landed_on(up, &rebased, missing).is_err());
    }

    #[test]
    fn a_fetch_from_a_server_that_never_answers_is_given_up() {
        // A server that accepts connections and never says a word.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/fleet.git", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let held: Vec<_> = listener.incoming().map_while(Result::ok).collect();
            drop(held);
        });
        // The stall window shortened (the later `-c` wins); the speed limit is `command`'s own:
        // without it git waits forever.
        let mut child = command(None)
            .args(["-c", "http.lowSpeedTime=1", "ls-remote", &url])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        use wait_timeout::ChildExt;
        let status = child.wait_timeout(std::time::Duration::from_secs(90)).unwrap();
        if status.is_none() {
            let _ = child.kill();
        }
        assert!(status.is_some_and(|s| !s.success()), "git still waits on a server that never answers");
    }

    #[test]
    fn credentials_never_show_in_messages() {
        assert_eq!(
            crate::git::redact_url("https://x-access-token:secret@github.com/o/r.git"),
            "https://github.com/o/r.git"
        );
    }
}
