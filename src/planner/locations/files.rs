//! The files of one commit that locations may name, read from git's objects, never from a work
//! tree: a path is read only when it is a plain file of the commit (no symbolic link, no
//! directory, nothing outside the repository), spelled without `.` or `..` components, and no
//! larger than [`MAX_FILE_BYTES`]. What a pull request puts there is hostile: it is parsed with
//! `yaml_lines`' bounds and only ever pointed at.

use crate::paths::is_plain_path;
use crate::yaml_lines::{self, Node};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::rc::Rc;

/// Larger files are not read for locations (a manifest is a few kilobytes; Flux's own artifact
/// limit is far larger, but pointing at a line never needs more).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The parsed files of one commit, read once each.
pub struct Files<'a> {
    repo: &'a Path,
    commit: Option<&'a str>,
    read: BTreeMap<String, Option<Rc<Vec<Node>>>>,
}

impl<'a> Files<'a> {
    /// `commit`: a full commit id; `None` reads nothing.
    pub fn new(repo: &'a Path, commit: Option<&'a str>) -> Self {
        Files { repo, commit: commit.filter(|c| crate::git::is_commit_id(c)), read: BTreeMap::new() }
    }

    /// The YAML documents of `path`, `None` when it cannot be read (see the module's rules).
    pub fn documents(&mut self, path: &str) -> Option<Rc<Vec<Node>>> {
        if let Some(done) = self.read.get(path) {
            return done.clone();
        }
        let text = self.commit.filter(|_| is_plain_path(path)).and_then(|c| read_blob(self.repo, c, path));
        let documents = text.map(|text| Rc::new(yaml_lines::documents(&text).0));
        self.read.insert(path.to_string(), documents.clone());
        documents
    }
}

/// The text of `path` at `commit` when it is a plain file within the bound.
fn read_blob(repo: &Path, commit: &str, path: &str) -> Option<String> {
    // `ls-tree` names the entry itself: its mode says a file from a link, its size is known
    // before anything is read. Pathspecs are literal: `:(glob)*` is a file name like any other.
    let mut cmd = crate::git::git_command(repo);
    cmd.args(["--literal-pathspecs", "ls-tree", "-l", "-z", commit, "--"]).arg(path).stderr(Stdio::null());
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let entries: Vec<&[u8]> = out.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()).collect();
    let [entry] = entries.as_slice() else { return None };
    let entry = std::str::from_utf8(entry).ok()?;
    let (meta, listed) = entry.split_once('\t')?;
    let fields: Vec<&str> = meta.split_whitespace().collect();
    let [mode, kind, object, size] = fields.as_slice() else { return None };
    // Below a work tree's top, git lists the path as given, relative to the repository directory.
    if listed != path || !matches!(*mode, "100644" | "100755") || *kind != "blob" {
        return None;
    }
    if size.parse::<u64>().ok()? > MAX_FILE_BYTES || !object.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut cmd = crate::git::git_command(repo);
    cmd.args(["cat-file", "blob", object]).stderr(Stdio::null());
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    String::from_utf8(out.stdout).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Links, files over the bound, paths that leave the repository and pathspec magic are
    /// never read; a name that only looks odd is.
    #[test]
    fn only_plain_files_of_the_commit_within_the_bound_are_read() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("repo");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(outer.path().join("outside.yaml"), "secret: 1\n").unwrap();
        git(&dir, &["init", "-q"]);
        std::fs::write(dir.join("a.yaml"), "a: 1\n").unwrap();
        std::fs::create_dir(dir.join("..sub")).unwrap();
        std::fs::write(dir.join("..sub/b.yaml"), "b: 2\n").unwrap();
        std::os::unix::fs::symlink("a.yaml", dir.join("link.yaml")).unwrap();
        std::os::unix::fs::symlink("../outside.yaml", dir.join("out.yaml")).unwrap();
        std::fs::write(dir.join("big.yaml"), format!("c: \"{}\"\n", "x".repeat(MAX_FILE_BYTES as usize)))
            .unwrap();
        git(&dir, &["add", "-A"]);
        git(&dir, &["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "files"]);
        let commit = git(&dir, &["rev-parse", "HEAD"]);
        let mut files = Files::new(&dir, Some(&commit));
        assert!(files.documents("a.yaml").is_some());
        assert!(files.documents("..sub/b.yaml").is_some(), "the near miss");
        for refused in
            ["link.yaml", "out.yaml", "big.yaml", "../outside.yaml", "*.yaml", ":(glob)*.yaml", "..sub"]
        {
            assert!(files.documents(refused).is_none(), "{refused}");
        }
        // Not a commit id: nothing is read.
        assert!(Files::new(&dir, Some("HEAD")).documents("a.yaml").is_none());
    }
}
