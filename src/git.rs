//! The git commands fluxplan needs: resolve a revision, export its tree, list remotes.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod unknown;
pub use unknown::UnknownRevision;

/// A git command run in `repo`, never prompting.
pub fn git_command(repo: &Path) -> Command {
    git(repo)
}

fn git(repo: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(repo).env("GIT_TERMINAL_PROMPT", "0").stdin(Stdio::null());
    cmd
}

fn output(mut cmd: Command, what: &str) -> Result<Vec<u8>> {
    let out = cmd.output().with_context(|| format!("cannot run git to {what} (is git installed?)"))?;
    if !out.status.success() {
        bail!("git could not {what}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(out.stdout)
}

/// True for a full hexadecimal commit id (SHA-1 or SHA-256): text from a payload or a cluster
/// reaches git as a commit only when it is one, never as something git could read as an option.
pub fn is_commit_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.chars().all(|c| c.is_ascii_hexdigit())
}

/// The full commit id of `rev`. A revision the repository does not hold is an
/// [`UnknownRevision`] that says why (a shallow clone, a mistyped name) and what to do.
pub fn resolve_commit(repo: &Path, rev: &str) -> Result<String> {
    let mut cmd = git(repo);
    cmd.args(["rev-parse", "--verify", "--end-of-options"]).arg(format!("{rev}^{{commit}}"));
    let out = cmd.output().context("cannot run git to resolve a revision (is git installed?)")?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    if let Some(unknown) = UnknownRevision::diagnose(repo, rev) {
        return Err(unknown.into());
    }
    bail!(
        "git could not resolve revision '{rev}' in {}: {}",
        repo.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// The repository's own attributes file (`info/attributes`), when it holds any: they apply to
/// every archive of it.
pub fn attributes_file(repo: &Path) -> Result<Option<PathBuf>> {
    use std::os::unix::ffi::OsStrExt;
    let mut cmd = git(repo);
    cmd.args(["rev-parse", "--git-path", "info/attributes"]);
    let out = output(cmd, "find the attributes file")?;
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(out.strip_suffix(b"\n").unwrap_or(&out)));
    let path = if path.is_absolute() { path } else { repo.join(path) };
    // Fails closed: a file that cannot be read may still hold attributes git reads.
    match std::fs::metadata(&path) {
        Ok(meta) => Ok((meta.len() > 0).then_some(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(_) => Ok(Some(path)),
    }
}

/// The id of the root tree of `commit`.
pub fn root_tree(repo: &Path, commit: &str) -> Result<String> {
    let mut cmd = git(repo);
    cmd.args(["rev-parse", "--verify", "--end-of-options"]).arg(format!("{commit}^{{tree}}"));
    let root = output(cmd, &format!("find the tree of {commit}"))?;
    Ok(String::from_utf8_lossy(&root).trim().to_string())
}

/// Where `repo` lies in its repository's tree, `/`-terminated (`kubernetes/apps/`): empty at a
/// work tree's top, in a bare repository, outside git, or when git fails.
pub fn prefix(repo: &Path) -> String {
    let mut cmd = git(repo);
    cmd.args(["rev-parse", "--show-prefix"]).stderr(Stdio::null());
    cmd.output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim_end_matches('\n').to_string())
        .unwrap_or_default()
}

/// The entries of a whole tree as `git archive` writes them when run at `prefix` (see
/// `prefix`): those below it, named from there.
pub fn entries_under(entries: Vec<TreeEntry>, prefix: &str) -> Vec<TreeEntry> {
    if prefix.is_empty() {
        return entries;
    }
    entries
        .into_iter()
        .filter_map(|mut entry| {
            let path = entry.path.strip_prefix(prefix)?.to_string();
            (!path.is_empty()).then(|| {
                entry.path = path;
                entry
            })
        })
        .collect()
}

/// git's id of the tree of `commit` at `prefix` (the root tree when it is empty).
pub fn tree_at(repo: &Path, commit: &str, prefix: &str) -> Result<String> {
    if prefix.is_empty() {
        return root_tree(repo, commit);
    }
    let mut cmd = git(repo);
    cmd.args(["rev-parse", "--verify", "--end-of-options"]).arg(format!("{commit}:{prefix}"));
    let tree = output(cmd, &format!("find the tree of {commit} at {prefix}"))?;
    Ok(String::from_utf8_lossy(&tree).trim().to_string())
}

/// One entry of `git ls-tree -r -t`.
pub struct TreeEntry {
    pub mode: String,
    /// `blob`, `tree` or `commit` (a submodule).
    pub kind: String,
    pub id: String,
    /// The blob's size, when asked for (0 for trees and submodules).
    pub size: u64,
    pub path: String,
}

/// Every blob and tree of `commit` (with blob sizes when `sizes`), in git's order: the order
/// `git archive` writes them. A path that is not UTF-8 is an error: read lossily, two names could
/// become one, and the export would hold one file where a clone holds two.
pub fn tree_entries(repo: &Path, commit: &str, sizes: bool) -> Result<Vec<TreeEntry>> {
    let mut cmd = git(repo);
    cmd.args(["ls-tree", "-r", "-t", "-z", "--full-tree"]);
    if sizes {
        cmd.arg("-l");
    }
    cmd.args(["--end-of-options", commit]);
    let listing = output(cmd, &format!("list the tree of {commit}"))?;
    let mut entries = Vec::new();
    for record in listing.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        // `<mode> <type> <id>[ <size>]\t<path>` (size `-` for trees)
        let Ok(text) = std::str::from_utf8(record) else {
            bail!(
                "{commit} holds a path that is not UTF-8 ({:?}): fluxplan cannot plan it; rename the file",
                String::from_utf8_lossy(record).split_once('\t').map_or("", |(_, path)| path)
            );
        };
        let Some((meta, path)) = text.split_once('\t') else { continue };
        let mut fields = meta.split_whitespace();
        let (Some(mode), Some(kind), Some(id)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        entries.push(TreeEntry {
            mode: mode.to_string(),
            kind: kind.to_string(),
            id: id.to_string(),
            size: fields.next().and_then(|s| s.parse().ok()).unwrap_or(0),
            path: path.to_string(),
        });
    }
    Ok(entries)
}

/// Streams the tree of `commit` as a tar archive into `consume` (never held in memory whole: a
/// hostile revision cannot exhaust it). The caller makes sure no `.gitattributes` applies (see
/// `attributes_file`); the user's and the system's attributes and line-ending settings are off
/// here, so the archive holds the committed blobs as a clone does.
pub fn archive_into<T>(
    repo: &Path,
    commit: &str,
    consume: impl FnOnce(&mut dyn Read) -> Result<T>,
) -> Result<T> {
    let mut child = git(repo)
        .env("GIT_ATTR_NOSYSTEM", "1")
        .args([
            "-c",
            "core.attributesFile=/dev/null",
            "-c",
            "core.autocrlf=false",
            "archive",
            "--format=tar",
            commit,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run git to export a revision (is git installed?)")?;
    let mut stdout = child.stdout.take().context("git archive has no output")?;
    let result = consume(&mut stdout);
    if result.is_ok() {
        // The archive's padding after the end marker: read it, or git dies of a broken pipe.
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    }
    drop(stdout);
    if result.is_err() {
        let _ = child.kill();
    }
    let output = child.wait_with_output()?;
    if result.is_ok() && !output.status.success() {
        bail!("git could not export revision {commit}: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    result
}

/// The content of `path` at `commit`, `None` when the file does not exist there.
pub fn show_file(repo: &Path, commit: &str, path: &str) -> Result<Option<String>> {
    let mut cmd = git(repo);
    cmd.args(["cat-file", "-e", &format!("{commit}:{path}")]).stderr(Stdio::null());
    if !cmd.status().context("cannot run git (is git installed?)")?.success() {
        return Ok(None);
    }
    let mut cmd = git(repo);
    cmd.args(["show", &format!("{commit}:{path}")]);
    let bytes = output(cmd, &format!("read {path} at {commit}"))?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// True when `path` (from the repository's root) is a file or directory of `commit`.
pub fn has_path(repo: &Path, commit: &str, path: &str) -> bool {
    let mut cmd = git(repo);
    cmd.args(["cat-file", "-e", "--end-of-options"]).arg(format!("{commit}:{path}")).stderr(Stdio::null());
    cmd.status().is_ok_and(|status| status.success())
}

/// When `dir` lies inside a git work tree below its top: that top directory. `None` at the top,
/// in a bare repository, outside git, or when git is missing.
pub fn enclosing_work_tree(dir: &Path) -> Option<std::path::PathBuf> {
    let mut cmd = git(dir);
    cmd.args(["rev-parse", "--show-prefix", "--show-toplevel"]).stderr(Stdio::null());
    let out = cmd.output().ok().filter(|out| out.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let prefix = lines.next()?.trim();
    let top = lines.next()?.trim();
    (!prefix.is_empty() && !top.is_empty()).then(|| std::path::PathBuf::from(top))
}

/// True when some YAML file of `repo` holds `needle`: at `rev` when given, else in the work tree
/// (untracked files included). Any failure answers `false`.
pub fn yaml_mentions(repo: &Path, rev: Option<&str>, needle: &str) -> bool {
    let commit = match rev.map(|rev| resolve_commit(repo, rev)).transpose() {
        Ok(commit) => commit,
        Err(_) => return false,
    };
    let mut cmd = git(repo);
    cmd.args(["grep", "-q", "-I", "-F", "-e", needle]);
    match &commit {
        Some(commit) => cmd.arg(commit),
        None => cmd.arg("--untracked"),
    };
    cmd.args(["--", "*.yaml", "*.yml"]).stdout(Stdio::null()).stderr(Stdio::null());
    cmd.status().is_ok_and(|status| status.success())
}

/// The lines matching `pattern` (an extended regular expression) of the YAML files at `commit`
/// that hold `needle`. Any failure answers nothing.
pub fn yaml_lines(repo: &Path, commit: &str, needle: &str, pattern: &str) -> Vec<String> {
    let mut cmd = git(repo);
    cmd.args(["grep", "-l", "-z", "-I", "-F", "-e", needle, commit, "--", "*.yaml", "*.yml"])
        .stderr(Stdio::null());
    let Ok(listed) = cmd.output() else { return Vec::new() };
    let prefix = format!("{commit}:");
    let files: Vec<String> = listed
        .stdout
        .split(|b| *b == 0)
        .filter_map(|f| std::str::from_utf8(f).ok())
        .filter_map(|f| f.strip_prefix(&prefix).map(str::to_string))
        .collect();
    let mut lines = Vec::new();
    for batch in files.chunks(500) {
        let mut cmd = git(repo);
        cmd.args(["grep", "-h", "-I", "-E", "-e", pattern, commit, "--"]).args(batch).stderr(Stdio::null());
        if let Ok(out) = cmd.output() {
            lines.extend(String::from_utf8_lossy(&out.stdout).lines().map(str::to_string));
        }
    }
    lines
}

/// Every branch, remote-tracking branch and tag of the repository with the commit it points at
/// (annotated tags peeled): (full name, commit id).
pub fn refs(repo: &Path) -> Result<Vec<(String, String)>> {
    let mut cmd = git(repo);
    cmd.args([
        "for-each-ref",
        "--format=%(refname)%00%(objectname)%00%(*objectname)",
        "refs/heads",
        "refs/remotes",
        "refs/tags",
    ]);
    let out = output(cmd, "list the repository's refs")?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\0');
            let (name, object, peeled) = (fields.next()?, fields.next()?, fields.next().unwrap_or(""));
            let commit = if peeled.is_empty() { object } else { peeled };
            Some((name.to_string(), commit.to_string()))
        })
        .collect())
}

/// The branch `rev` names (`main` for `main`, `refs/heads/main` or `origin/main`), if it names one.
pub fn branch_of(repo: &Path, rev: &str) -> Option<String> {
    // `rev-parse` echoes `--end-of-options` when it prints names: refused instead.
    if rev.starts_with('-') {
        return None;
    }
    let mut cmd = git(repo);
    cmd.args(["rev-parse", "--symbolic-full-name", rev]).stderr(Stdio::null());
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let full = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if let Some(branch) = full.strip_prefix("refs/heads/") {
        return Some(branch.to_string());
    }
    let (_remote, branch) = full.strip_prefix("refs/remotes/")?.split_once('/')?;
    (branch != "HEAD").then(|| branch.to_string())
}

/// The branch checked out in `repo` (a bare mirror: its default branch), if any.
pub fn current_branch(repo: &Path) -> Option<String> {
    let mut cmd = git(repo);
    cmd.args(["symbolic-ref", "-q", "--short", "HEAD"]).stderr(Stdio::null());
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|b| !b.is_empty())
}

/// True when `dir` is a bare repository (a mirror, a `.git` directory): it has no working tree.
pub fn is_bare_repository(dir: &Path) -> bool {
    let mut cmd = git(dir);
    cmd.args(["rev-parse", "--is-bare-repository"]).stderr(Stdio::null());
    cmd.output().ok().filter(|o| o.status.success()).is_some_and(|o| o.stdout.trim_ascii() == b"true")
}

/// The files `head` changes relative to `base` (both commits), renames as a deletion and an
/// addition, sorted; below a work tree's top, those under `repo`, named from there (as its
/// exports are).
pub fn changed_files(repo: &Path, base: &str, head: &str) -> Result<Vec<String>> {
    let mut cmd = git(repo);
    cmd.args([
        "diff",
        "--name-only",
        "--relative",
        "-z",
        "--no-renames",
        "--no-ext-diff",
        "--end-of-options",
    ]);
    cmd.args([base, head]);
    let out = output(cmd, &format!("list the files {head} changes"))?;
    let mut files: Vec<String> = out
        .split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// The paths among `files` that are symbolic links in `commit` (their targets are not read).
pub fn symlinks_among(
    repo: &Path,
    commit: &str,
    files: &[String],
) -> Result<std::collections::BTreeSet<String>> {
    let wanted: std::collections::BTreeSet<&str> = files.iter().map(String::as_str).collect();
    Ok(entries_under(tree_entries(repo, commit, false)?, &prefix(repo))
        .into_iter()
        .filter(|e| e.mode == "120000" && wanted.contains(e.path.as_str()))
        .map(|e| e.path)
        .collect())
}

/// Symbolic links git checks out, read no further: at most this many, targets this long.
const MAX_SYMLINKS: usize = 10_000;
const MAX_SYMLINK_TARGET: usize = 4096;
/// The target given for a link whose own is too long or not UTF-8: a path no file has, so the
/// link leads nowhere (as it does in a checkout).
pub const UNREADABLE_TARGET: &str = "\0unreadable symbolic link target";

/// Every symbolic link of `commit`: (path, target as written). Exports leave them out (Flux never
/// archives them), but Argo CD's repo-server follows those that stay in the repository.
pub fn symlinks(repo: &Path, commit: &str) -> Result<Vec<(String, String)>> {
    use std::io::{BufRead, Write};
    let links: Vec<TreeEntry> = entries_under(tree_entries(repo, commit, false)?, &prefix(repo))
        .into_iter()
        .filter(|e| e.mode == "120000")
        .take(MAX_SYMLINKS)
        .collect();
    if links.is_empty() {
        return Ok(Vec::new());
    }
    let mut child = git(repo)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run git to read symbolic links")?;
    let mut stdin = child.stdin.take().expect("piped");
    let ids: String = links.iter().map(|l| format!("{}\n", l.id)).collect();
    let writer = std::thread::spawn(move || stdin.write_all(ids.as_bytes()));
    let mut reader = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut found = Vec::new();
    for link in links {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        // `<id> blob <size>`, then the content and a newline.
        let Some(size) = header.split_whitespace().nth(2).and_then(|s| s.parse::<u64>().ok()) else {
            bail!("git could not read the symbolic link {}: {}", link.path, header.trim());
        };
        if size > MAX_SYMLINK_TARGET as u64 {
            // A hostile commit may store anything under a link's mode: never held in memory.
            std::io::copy(&mut (&mut reader).take(size + 1), &mut std::io::sink())?;
            found.push((link.path, UNREADABLE_TARGET.to_string()));
            continue;
        }
        let mut content = vec![0; size as usize + 1];
        reader.read_exact(&mut content)?;
        content.truncate(size as usize);
        let target = String::from_utf8(content).unwrap_or_else(|_| UNREADABLE_TARGET.to_string());
        found.push((link.path, target));
    }
    let _ = writer.join();
    let _ = child.wait();
    Ok(found)
}

/// Fetch URLs of every remote of the repository (empty when it is not a git repository).
pub fn remote_urls(repo: &Path) -> Vec<String> {
    let mut cmd = git(repo);
    cmd.args(["config", "--get-regexp", r"^remote\..*\.url$"]);
    cmd.stderr(Stdio::null());
    match cmd.output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' ').map(|(_, url)| url.trim().to_string()))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A URL without credentials (user, password, `password=` query parameters), for messages.
pub fn redact_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else { return url.to_string() };
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    let pairs: Vec<(String, String)> = parsed
        .query_pairs()
        .map(|(k, v)| {
            let secret = k.to_lowercase().contains("password") || k.to_lowercase().contains("token");
            (k.into_owned(), if secret { "***".to_string() } else { v.into_owned() })
        })
        .collect();
    if !pairs.is_empty() {
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

/// Reduces a git URL to `host/path` so ssh, scp-like and https forms of one repository compare
/// equal: `ssh://git@github.com/org/repo.git`, `git@github.com:org/repo` and
/// `https://github.com/org/repo` all give `github.com/org/repo`.
pub fn normalize_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    let without_scheme = match url.split_once("://") {
        Some((_, rest)) => rest.to_string(),
        // scp-like syntax: user@host:path
        None => match url.split_once(':') {
            Some((host, path)) if !host.contains('/') => format!("{host}/{path}"),
            _ => url.to_string(),
        },
    };
    let without_user = match without_scheme.split_once('@') {
        Some((user, rest)) if !user.contains('/') => rest.to_string(),
        _ => without_scheme,
    };
    let (host, path) = without_user.split_once('/').unwrap_or((&without_user, ""));
    let host = host.split(':').next().unwrap_or(host).to_lowercase();
    let path = path.trim_end_matches(".git").trim_matches('/');
    format!("{host}/{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_credentials() {
        assert_eq!(
            redact_url("postgres://app:pw@db:5432/x?sslmode=require&password=pw"),
            "postgres://db:5432/x?sslmode=require&password=***"
        );
        assert_eq!(redact_url("sqlite:///data/fluxplan.db?mode=rwc"), "sqlite:///data/fluxplan.db?mode=rwc");
    }

    #[test]
    fn ssh_and_https_forms_are_equal() {
        let forms = [
            "ssh://git@github.com/org/fleet.git",
            "git@github.com:org/fleet.git",
            "https://github.com/org/fleet",
            "https://user@GitHub.com/org/fleet.git/",
            "ssh://git@github.com:22/org/fleet",
        ];
        for form in forms {
            assert_eq!(normalize_url(form), "github.com/org/fleet", "{form}");
        }
        assert_ne!(normalize_url("https://github.com/org/other"), "github.com/org/fleet");
    }
}
