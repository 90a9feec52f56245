//! Fixture repositories built by the tests with real git.

use fluxplan::render::{Render, RenderOptions, Renderer};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    /// An empty repository whose `origin` remote is `remote`.
    pub fn new(remote: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.email", "test@example.com"]);
        repo.git(&["config", "user.name", "test"]);
        repo.git(&["config", "commit.gpgsign", "false"]);
        repo.git(&["remote", "add", "origin", remote]);
        repo
    }

    /// A repository with the flux bootstrap layout for one cluster at `clusters/<name>`.
    pub fn bootstrap(cluster: &str) -> Self {
        let repo = Repo::new("git@github.com:acme/fleet.git");
        repo.add_bootstrap(cluster);
        repo
    }

    pub fn add_bootstrap(&self, cluster: &str) -> &Self {
        self.write(
            &format!("clusters/{cluster}/flux-system/gotk-sync.yaml"),
            &format!(
                r#"apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m
  url: ssh://git@github.com/acme/fleet
  ref:
    branch: main
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m
  path: ./clusters/{cluster}
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
"#
            ),
        );
        self.write(
            &format!("clusters/{cluster}/flux-system/kustomization.yaml"),
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- gotk-sync.yaml\n",
        );
        self
    }

    /// Writes a Flux Kustomization manifest named `name` in flux-system; `extra` is more spec YAML
    /// indented by two spaces.
    pub fn kustomization(&self, file: &str, name: &str, path: &str, extra: &str) -> &Self {
        self.kustomization_of(file, name, path, ("GitRepository", "flux-system"), extra)
    }

    /// Like `kustomization`, with another source (kind, name).
    pub fn kustomization_of(
        &self,
        file: &str,
        name: &str,
        path: &str,
        source: (&str, &str),
        extra: &str,
    ) -> &Self {
        let (source_kind, source_name) = source;
        let extra = extra.lines().map(|l| format!("  {l}\n")).collect::<String>();
        self.write(
            file,
            &format!(
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: {source_kind}\n    name: {source_name}\n{extra}"
            ),
        )
    }

    /// Writes a HelmRelease `namespace/name` whose chart is the directory `chart` of this
    /// repository (the GitRepository `flux-system`).
    pub fn helm_release(&self, file: &str, name: &str, namespace: &str, chart: &str) -> &Self {
        self.write(
            file,
            &format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
                 spec:\n  interval: 10m\n  chart:\n    spec:\n      chart: {chart}\n      sourceRef:\n        \
                 kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n"
            ),
        )
    }

    pub fn config_map(&self, file: &str, name: &str, namespace: &str) -> &Self {
        self.write(
            file,
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  key: value\n"),
        )
    }

    pub fn write(&self, path: &str, content: &str) -> &Self {
        let full = self.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
        self
    }

    pub fn mkdir(&self, path: &str) -> &Self {
        std::fs::create_dir_all(self.path().join(path)).unwrap();
        self
    }

    pub fn remove(&self, path: &str) -> &Self {
        let full = self.path().join(path);
        if full.is_dir() {
            std::fs::remove_dir_all(full).unwrap();
        } else {
            std::fs::remove_file(full).unwrap();
        }
        self
    }

    /// Commits everything; returns the commit id.
    pub fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"]).trim().to_string()
    }

    pub fn git(&self, args: &[&str]) -> String {
        // Fixed dates make commit ids, and so golden files, reproducible.
        let out = Command::new("git")
            .arg("-C")
            .arg(self.path())
            .args(args)
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn options(&self, rev: Option<&str>) -> RenderOptions {
        let mut opts = RenderOptions::new(self.path());
        opts.rev = rev.map(str::to_string);
        opts.kustomize_timeout = Duration::from_secs(60);
        opts
    }

    pub fn render(&self, rev: Option<&str>) -> Render {
        render_with(&self.options(rev))
    }
}

pub fn render_with(opts: &RenderOptions) -> Render {
    Renderer::new(opts.kustomize_timeout, None).unwrap().render(opts).unwrap()
}

/// Runs `fluxplan plan` through the binary; returns stdout and the exit code.
pub fn plan_cli(repo: &Repo, base: &str, head: &str, format: &str, extra: &[&str]) -> (String, i32) {
    let out = Command::new(fluxplan_bin())
        .args(["plan", "--no-cache", "--base", base, "--head", head, "--format", format, "--repo"])
        .arg(repo.path())
        .args(extra)
        // No test but the image check's asks a registry about images: on a machine with a network
        // the fixtures' `nginx:1.27` would reach Docker Hub (tests/integration/image_check.rs).
        .env("FLUXPLAN_NO_IMAGE_CHECK", "true")
        .output()
        .unwrap();
    (String::from_utf8(out.stdout).unwrap(), out.status.code().unwrap())
}

/// `fluxplan plan --format json`, parsed; returns the plan and the exit code.
pub fn plan_json(repo: &Repo, base: &str, head: &str, extra: &[&str]) -> (serde_json::Value, i32) {
    let (stdout, code) = plan_cli(repo, base, head, "json", extra);
    (serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}")), code)
}

pub fn fluxplan_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fluxplan"))
}

/// Asserts a Kustomization failed with `code`; returns its message.
pub fn error_of(render: &Render, reference: &str, code: &str) -> String {
    let k = render.find(reference).unwrap_or_else(|| panic!("{reference} not rendered"));
    let error = k.error.as_ref().unwrap_or_else(|| panic!("{reference} did not fail: {:?}", k.ids()));
    assert_eq!(error.code, code, "{}", error.message);
    error.message.clone()
}

/// Waits until `done` holds (polling), failing after `timeout` with what was awaited.
pub fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How long tests wait for a state before giving up (a bound, not an expectation).
pub const WAIT: Duration = Duration::from_secs(90);

/// A stand-in kustomize in `dir`: it answers `version`, then runs `build` (shell) for builds.
/// The only way to hold a build deterministically.
pub fn stand_in_kustomize(dir: &Path, build: &str) -> PathBuf {
    let script = dir.join("kustomize");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nif [ \"$1\" = version ]; then echo v5.5.0; exit 0; fi\n{build}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script
}

/// True while a process whose command line contains `needle` runs.
pub fn process_running(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(needle))
    })
}

/// The plan entry (JSON) of the Kustomization `namespace/name`.
pub fn kustomization_in<'a>(plan: &'a serde_json::Value, reference: &str) -> &'a serde_json::Value {
    plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| {
            format!("{}/{}", k["namespace"].as_str().unwrap(), k["name"].as_str().unwrap()) == reference
        })
        .unwrap_or_else(|| panic!("{reference} not in the plan: {plan:#}"))
}

/// (action, id) of every change of the Kustomization `namespace/name`.
pub fn changes_of(plan: &serde_json::Value, reference: &str) -> Vec<(String, String)> {
    kustomization_in(plan, reference)["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["action"].as_str().unwrap().to_string(), c["id"].as_str().unwrap().to_string()))
        .collect()
}

/// Every entry of the render cache under `dir`, as (key, text), read with SQLite itself: a
/// search of the database's raw pages could miss a value split across two pages.
pub fn cache_entries(dir: &Path) -> Vec<(String, String)> {
    let path = dir.join(fluxplan::render::cache::DATABASE);
    let db = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut query = db.prepare("SELECT key, value FROM entries ORDER BY key").unwrap();
    let rows = query.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

/// Removes the render cache's entries under `dir` whose text `matches`.
pub fn remove_cache_entries(dir: &Path, matches: impl Fn(&str) -> bool) {
    let db = rusqlite::Connection::open(dir.join(fluxplan::render::cache::DATABASE)).unwrap();
    for (key, text) in cache_entries(dir) {
        if matches(&text) {
            db.execute("DELETE FROM entries WHERE key = ?1", [key]).unwrap();
        }
    }
}

/// Rewrites a file of the repository: `from` (which it must hold) becomes `to`.
pub fn edit(repo: &Repo, file: &str, from: &str, to: &str) {
    let text = std::fs::read_to_string(repo.path().join(file)).unwrap();
    assert!(text.contains(from), "{file} holds no {from:?}");
    repo.write(file, &text.replace(from, to));
}

/// (severity, code) of every alert of a plan.
pub fn alert_codes(plan: &serde_json::Value) -> Vec<(String, String)> {
    plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["severity"].as_str().unwrap().to_string(), a["code"].as_str().unwrap().to_string()))
        .collect()
}

/// True when the plan has an alert `code` of `severity`.
pub fn has_alert(plan: &serde_json::Value, severity: &str, code: &str) -> bool {
    alert_codes(plan).contains(&(severity.to_string(), code.to_string()))
}

/// A server on loopback that must never be asked anything.
pub struct Canary(std::net::TcpListener);

impl Canary {
    pub fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Canary(listener)
    }

    pub fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.0.local_addr().unwrap().port())
    }

    /// Called once the plan has exited: a connection it made would be waiting in the backlog.
    pub fn assert_untouched(&self) {
        match self.0.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok((_, peer)) => panic!("the canary server was contacted from {peer}"),
            Err(e) => panic!("canary accept failed: {e}"),
        }
    }
}

/// The pinned Helm of `major` (scripts/fetch-helm.sh installs it): a test needing it fails
/// without it.
pub fn helm(major: u8) -> fluxplan::render::helm::Helm {
    fluxplan::render::helm::Helm::detect(major)
        .unwrap_or_else(|e| panic!("this test needs Helm v{major}: {e}"))
}

/// The plan entry of the unit `kind namespace/name`.
pub fn unit_in<'a>(plan: &'a serde_json::Value, kind: &str, reference: &str) -> &'a serde_json::Value {
    plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| {
            k["kind"] == kind
                && format!("{}/{}", k["namespace"].as_str().unwrap(), k["name"].as_str().unwrap())
                    == reference
        })
        .unwrap_or_else(|| panic!("{kind} {reference} not in the plan: {plan:#}"))
}

/// (action, id) of every change of a plan entry, sorted.
pub fn sorted_changes(unit: &serde_json::Value) -> Vec<(String, String)> {
    let mut changes: Vec<(String, String)> = unit["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["action"].as_str().unwrap().to_string(), c["id"].as_str().unwrap().to_string()))
        .collect();
    changes.sort();
    changes
}

/// `expected` as sorted (action, id) pairs, to compare with `sorted_changes`.
pub fn sorted_pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> =
        expected.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    pairs.sort();
    pairs
}
