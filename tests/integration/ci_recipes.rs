//! The CI recipes run as each CI runs them: `action.yml`'s steps with the environment GitHub
//! Actions gives them, the GitLab template's job script with GitLab's merge request variables,
//! both on a shallow clone of a real repository, with this build of fluxplan on PATH.

use crate::fixture::{fluxplan_bin, Repo};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const APP: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.26\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  ports:\n  - port: 80\n";

pub(crate) fn source_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fleet and a pull request on it: `outage` points `apps` at an empty directory (blocked),
/// else it bumps an image (changes). Returns the repository (the forge's) and the base commit.
pub(crate) fn pull_request(outage: bool) -> (Repo, String) {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/shop.yaml", APP);
    repo.mkdir("empty").write("empty/.keep", "");
    let base = repo.commit("base");
    if outage {
        crate::fixture::edit(&repo, "clusters/prod/apps.yaml", "path: ./apps", "path: ./empty");
    } else {
        crate::fixture::edit(&repo, "apps/shop.yaml", "nginx:1.26", "nginx:1.27");
    }
    repo.commit("the pull request");
    (repo, base)
}

/// What CI checks out: the pull request's head alone (actions/checkout's `fetch-depth: 1`).
pub(crate) fn shallow_checkout(repo: &Repo, into: &Path) {
    let url = format!("file://{}", repo.path().display());
    let out = Command::new("git").args(["clone", "-q", "--depth", "1", &url]).arg(into).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// PATH with this build of fluxplan first.
pub(crate) fn path_with_fluxplan(more: &[&Path]) -> String {
    let mut dirs: Vec<PathBuf> = vec![fluxplan_bin().parent().unwrap().to_path_buf()];
    dirs.extend(more.iter().map(|p| p.to_path_buf()));
    dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(dirs).unwrap().into_string().unwrap()
}

pub(crate) fn parse_yaml(file: &str) -> Value {
    let text = std::fs::read_to_string(source_root().join(file)).unwrap();
    let mut docs = fluxplan::yaml::parse_documents(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(docs.len(), 1, "{file}: one document");
    docs.remove(0)
}

/// `key=value` lines (GITHUB_OUTPUT, a dotenv report).
pub(crate) fn key_values(file: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(crate) fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Every `${{ expression }}` in `text`.
fn expressions(text: &str) -> Vec<String> {
    text.split("${{")
        .skip(1)
        .filter_map(|rest| rest.split_once("}}"))
        .map(|(e, _)| e.trim().to_string())
        .collect()
}

/// Where scripts/test.sh installs the pinned Helm and kustomize's library: the tool cache of the
/// runner the tests play, so that the action's installs find them in place.
pub(crate) fn tool_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"))
}

/// A composite action run as the runner runs its `run` steps: expressions substituted (only the
/// plain context lookups the action uses: anything else fails the test), `shell: bash` as
/// `bash --noprofile --norc -eo pipefail`, each step's outputs read from its GITHUB_OUTPUT, what
/// a step appends to GITHUB_ENV in the environment of the steps after it.
pub(crate) struct ActionRun {
    action: Value,
    context: BTreeMap<String, String>,
    workspace: PathBuf,
    temp: tempfile::TempDir,
    summary: PathBuf,
    /// The runner's tool cache.
    pub(crate) tool_cache: PathBuf,
    /// The PATH the steps see.
    pub(crate) path: String,
    /// More environment for every step (HOME, say).
    pub(crate) env: Vec<(String, String)>,
}

impl ActionRun {
    pub(crate) fn new(workspace: &Path, inputs: &[(&str, &str)], github: &[(&str, &str)]) -> Self {
        let action = parse_yaml("action.yml");
        let temp = tempfile::tempdir().unwrap();
        // A pull_request event of a workflow that uses the action from its own checkout
        // (`uses: ./`: no action repository or ref), unless the test says otherwise.
        let mut context: BTreeMap<String, String> = [
            ("github.action_repository", ""),
            ("github.action_ref", ""),
            ("github.base_ref", "main"),
            ("github.event.pull_request.base.sha", ""),
        ]
        .into_iter()
        .chain(github.iter().copied())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        context.insert("github.action_path".into(), source_root().display().to_string());
        context.insert("runner.temp".into(), temp.path().display().to_string());
        let given: BTreeMap<&str, &str> = inputs.iter().copied().collect();
        let mut run = ActionRun {
            action,
            context,
            workspace: workspace.to_path_buf(),
            summary: temp.path().join("summary.md"),
            temp,
            tool_cache: tool_cache(),
            path: path_with_fluxplan(&[]),
            env: Vec::new(),
        };
        for (name, spec) in run.action["inputs"].as_object().unwrap().clone() {
            let value = match given.get(name.as_str()) {
                Some(value) => value.to_string(),
                None => run.eval(spec["default"].as_str().unwrap_or("")),
            };
            run.context.insert(format!("inputs.{name}"), value);
        }
        assert!(given.keys().all(|name| run.context.contains_key(&format!("inputs.{name}"))), "{given:?}");
        run
    }

    fn eval(&self, text: &str) -> String {
        let mut result = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${{") {
            result.push_str(&rest[..start]);
            let (expression, after) = rest[start + 3..].split_once("}}").expect("an unclosed ${{");
            let expression = expression.trim();
            let value =
                self.context.get(expression).unwrap_or_else(|| panic!("action.yml: unknown `{expression}`"));
            result.push_str(value);
            rest = after;
        }
        result + rest
    }

    /// Runs the `run` step `id`; its outputs join the context as `steps.<id>.outputs.*`.
    pub(crate) fn step(&mut self, id: &str) -> Output {
        let step = self.action["runs"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("action.yml has no step {id}"))
            .clone();
        assert_eq!(step["shell"], "bash", "{id}");
        let script = self.temp.path().join(format!("{id}.sh"));
        std::fs::write(&script, self.eval(step["run"].as_str().unwrap())).unwrap();
        let outputs = self.temp.path().join(format!("{id}.output"));
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"]).arg(&script).current_dir(&self.workspace);
        let job_env = self.temp.path().join("env");
        cmd.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_ACTION_PATH", source_root())
            .env("GITHUB_WORKSPACE", &self.workspace)
            .env("GITHUB_OUTPUT", &outputs)
            .env("GITHUB_STEP_SUMMARY", &self.summary)
            .env("GITHUB_PATH", self.temp.path().join("path"))
            .env("GITHUB_ENV", &job_env)
            .env("RUNNER_TEMP", self.temp.path())
            .env("RUNNER_TOOL_CACHE", &self.tool_cache)
            .env("PATH", &self.path)
            .env("FLUXPLAN_CACHE_DIR", self.temp.path().join("cache"));
        cmd.envs(self.env.iter().cloned()).envs(key_values(&job_env));
        for (name, value) in step["env"].as_object().into_iter().flatten() {
            cmd.env(name, self.eval(value.as_str().unwrap()));
        }
        let out = cmd.output().unwrap();
        for (key, value) in key_values(&outputs) {
            self.context.insert(format!("steps.{id}.outputs.{key}"), value);
        }
        out
    }

    pub(crate) fn output(&self, name: &str) -> String {
        self.eval(self.action["outputs"][name]["value"].as_str().unwrap())
    }
}

fn github_pull_request(
    repo: &Repo,
    base: &str,
    inputs: &[(&str, &str)],
) -> (ActionRun, Output, tempfile::TempDir) {
    let checkout = tempfile::tempdir().unwrap();
    shallow_checkout(repo, checkout.path());
    let mut run = ActionRun::new(checkout.path(), inputs, &[("github.event.pull_request.base.sha", base)]);
    let install = run.step("install");
    assert!(install.status.success(), "{}", text(&install));
    assert_eq!(
        run.context["steps.install.outputs.bin"],
        fluxplan_bin().display().to_string(),
        "the fluxplan on PATH is used"
    );
    let renderers = run.step("renderers");
    assert!(renderers.status.success(), "{}", text(&renderers));
    let plan = run.step("plan");
    (run, plan, checkout)
}

#[test]
fn github_action_blocks_a_pull_request_that_empties_a_cluster() {
    let (repo, base) = pull_request(true);
    let (run, out, _checkout) = github_pull_request(&repo, &base, &[]);
    let log = text(&out);
    assert_eq!(out.status.code(), Some(2), "fluxplan's own exit status: {log}");
    assert!(log.contains("is not in this shallow clone: fetching it"), "{log}");
    assert!(log.contains("fluxplan: BLOCKED"), "the text plan is in the log: {log}");

    assert_eq!(run.output("verdict"), "blocked");
    assert_eq!(run.output("exit-code"), "2");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(run.output("json")).unwrap()).unwrap();
    assert_eq!(plan["verdict"], "blocked");
    assert_eq!(plan["base"]["commit"], base.as_str());
    assert!(crate::fixture::has_alert(&plan, "danger", "empty-render"), "{plan:#}");

    let markdown = std::fs::read_to_string(run.output("markdown")).unwrap();
    assert!(markdown.starts_with("<!-- fluxplan -->"), "{markdown}");
    assert!(markdown.contains("empty-render"), "{markdown}");
    assert_eq!(
        std::fs::read_to_string(&run.summary).unwrap(),
        markdown,
        "the job summary is the markdown plan"
    );

    // The upload step keeps exactly the files the plan step wrote.
    let upload =
        run.action["runs"]["steps"].as_array().unwrap().iter().find(|s| s["uses"].is_string()).unwrap();
    assert!(upload["uses"].as_str().unwrap().starts_with("actions/upload-artifact@"));
    assert_eq!(run.eval(upload["with"]["name"].as_str().unwrap()), "fluxplan-plan");
    let paths: Vec<String> =
        run.eval(upload["with"]["path"].as_str().unwrap()).lines().map(str::to_string).collect();
    assert_eq!(paths, vec![run.output("json"), run.output("markdown")]);
}

#[test]
fn github_action_passes_changes_unless_told_to_fail_on_them() {
    let (repo, base) = pull_request(false);
    let (run, out, _checkout) = github_pull_request(&repo, &base, &[]);
    assert_eq!(out.status.code(), Some(0), "changes pass the default gate: {}", text(&out));
    assert_eq!(run.output("verdict"), "changes");
    assert_eq!(run.output("exit-code"), "1");
    assert!(std::fs::read_to_string(&run.summary).unwrap().contains("<!-- fluxplan -->"));

    // fail-on and args reach the script: the same pull request fails on `changes`.
    let out_dir = tempfile::tempdir().unwrap();
    let out_dir = out_dir.path().join("report");
    let (run, out, _checkout) = github_pull_request(
        &repo,
        &base,
        &[("fail-on", "changes"), ("args", "--no-cache --jobs 1"), ("output-dir", out_dir.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(run.output("json"), out_dir.join("plan.json").display().to_string());
    assert_eq!(key_values(&out_dir.join("fluxplan.env"))["FLUXPLAN_VERDICT"], "changes");
}

#[test]
fn action_yml_declares_what_it_uses_and_runs_scripts_that_exist() {
    let action = parse_yaml("action.yml");
    assert_eq!(action["runs"]["using"], "composite");
    let inputs = action["inputs"].as_object().unwrap();
    let steps = action["runs"]["steps"].as_array().unwrap();
    let ids: Vec<&str> = steps.iter().filter_map(|s| s["id"].as_str()).collect();
    let scripts =
        ["examples/ci/install.sh", "examples/ci/install-renderers.sh", "examples/ci/fluxplan-ci.sh"]
            .map(|script| std::fs::read_to_string(source_root().join(script)).unwrap())
            .concat();

    let text = std::fs::read_to_string(source_root().join("action.yml")).unwrap();
    for expression in expressions(&text) {
        // `if:` conditions are the runner's; each lookup in them is checked like any other.
        for word in expression.split(|c: char| !(c.is_alphanumeric() || "._-".contains(c))) {
            if let Some(input) = word.strip_prefix("inputs.") {
                assert!(inputs.contains_key(input), "action.yml uses undeclared input {input}");
            } else if let Some(rest) = word.strip_prefix("steps.") {
                let id = rest.split('.').next().unwrap();
                assert!(ids.contains(&id), "action.yml reads the outputs of no step {id}");
            }
        }
    }
    for (name, spec) in inputs {
        assert!(spec["description"].is_string(), "input {name} has no description");
        assert!(text.contains(&format!("inputs.{name} ")), "input {name} is declared and never used");
    }
    for step in steps.iter().filter(|s| s["run"].is_string()) {
        let run = step["run"].as_str().unwrap();
        let script = run.split("$GITHUB_ACTION_PATH/").nth(1).and_then(|s| s.split('"').next()).unwrap();
        let path = source_root().join(script);
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert!(mode & 0o111 != 0, "{script} is not executable");
        // Every setting the step passes is one a script reads.
        for name in step["env"].as_object().unwrap().keys() {
            assert!(
                scripts.contains(&format!("${{{name}")) || scripts.contains(&format!("${name}")),
                "no script reads {name}"
            );
        }
    }
}

#[test]
fn gitlab_template_runs_the_same_script_in_a_merge_request_pipeline() {
    let template = parse_yaml("examples/ci/gitlab-ci.yml");
    let job = &template["fluxplan"];
    assert_eq!(job["rules"][0]["if"], "$CI_PIPELINE_SOURCE == \"merge_request_event\"");
    let (repo, base) = pull_request(true);
    let checkout = tempfile::tempdir().unwrap();
    shallow_checkout(&repo, checkout.path());

    // GitLab's variables for a merge request pipeline, then the job's; the image holds the
    // script and fluxplan on PATH.
    let mut cmd = Command::new("sh");
    let script: Vec<&str> = job["script"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    cmd.arg("-ec").arg(script.join("\n")).current_dir(checkout.path());
    cmd.env("GITLAB_CI", "true")
        .env("CI", "true")
        .env("CI_PIPELINE_SOURCE", "merge_request_event")
        .env("CI_PROJECT_DIR", checkout.path())
        .env("CI_MERGE_REQUEST_DIFF_BASE_SHA", &base)
        .env("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "main")
        .env("FLUXPLAN_CACHE_DIR", checkout.path().join(".cache"))
        .env("PATH", path_with_fluxplan(&[&source_root().join("examples/ci")]));
    for (name, value) in job["variables"].as_object().unwrap() {
        cmd.env(name, value.as_str().unwrap());
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    // Every artifact the job keeps is there, and the dotenv report says the verdict.
    let artifacts = &job["artifacts"];
    assert_eq!(artifacts["when"], "always", "a blocked plan is kept above all");
    for path in artifacts["paths"].as_array().unwrap() {
        assert!(checkout.path().join(path.as_str().unwrap()).is_file(), "no artifact {path}");
    }
    let dotenv = key_values(&checkout.path().join(artifacts["reports"]["dotenv"].as_str().unwrap()));
    assert_eq!(dotenv["FLUXPLAN_VERDICT"], "blocked");
    assert_eq!(dotenv["FLUXPLAN_EXIT_CODE"], "2");
    let plan: Value = serde_json::from_str(
        &std::fs::read_to_string(checkout.path().join("fluxplan-report/plan.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(plan["verdict"], "blocked");
    assert_eq!(plan["base"]["commit"], base.as_str(), "the merge request's diff base");
    // The Code Quality report GitLab reads: a finding for each of the plan's alerts at least.
    let report = checkout.path().join(artifacts["reports"]["codequality"].as_str().unwrap());
    let findings: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let alerts = plan["alerts"].as_array().unwrap().len();
    assert!(alerts > 0 && findings.as_array().unwrap().len() >= alerts, "{findings:#}");
}

/// Runs examples/ci/fluxplan-ci.sh in `dir` with `env`.
fn ci_script(dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg(source_root().join("examples/ci/fluxplan-ci.sh"))
        .current_dir(dir)
        .env("PATH", path_with_fluxplan(&[]));
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.output().unwrap()
}

#[test]
fn the_script_fails_when_fluxplan_makes_no_plan_whatever_its_exit_status() {
    let repo = Repo::new("git@github.com:acme/fleet.git");
    let head = repo.commit("empty");
    let out = ci_script(repo.path(), &[("FLUXPLAN_CI_BASE", &head), ("FLUXPLAN_CI_ARGS", "--no-such-flag")]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("unexpected argument '--no-such-flag'"), "{}", text(&out));
    assert_eq!(key_values(&repo.path().join("fluxplan-report/fluxplan.env"))["FLUXPLAN_VERDICT"], "failed");

    // A fluxplan that exits 2 (blocked) without writing a plan: failed, never blocked.
    let stand_in = repo.path().join("stand-in");
    std::fs::write(&stand_in, "#!/bin/sh\nexit 2\n").unwrap();
    std::fs::set_permissions(&stand_in, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bin = stand_in.to_str().unwrap();
    let out = ci_script(repo.path(), &[("FLUXPLAN_CI_BASE", &head), ("FLUXPLAN_BIN", bin)]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("fluxplan made no plan (exit status 2"), "{}", text(&out));
    assert_eq!(key_values(&repo.path().join("fluxplan-report/fluxplan.env"))["FLUXPLAN_VERDICT"], "failed");

    // Outside a pull or merge request there is no base to plan against.
    let out = ci_script(repo.path(), &[]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out).contains("set FLUXPLAN_CI_BASE"), "{}", text(&out));
    let out = ci_script(repo.path(), &[("FLUXPLAN_CI_BASE", &head), ("FLUXPLAN_CI_FAIL_ON", "danger")]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out).contains("expected changes, blocked, failed or never"), "{}", text(&out));
}

/// A stand-in fluxplan (install.sh only asks for its version), and its SHA-256.
fn stand_in_binary(dir: &Path) -> (PathBuf, String) {
    let file = dir.join("fluxplan");
    std::fs::write(&file, "#!/bin/sh\necho 'fluxplan 9.9.9 (stand-in)'\n").unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = Command::new("sha256sum").arg(&file).output().unwrap();
    (file, String::from_utf8_lossy(&out.stdout).split(' ').next().unwrap().to_string())
}

fn install(env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("sh");
    // A PATH without fluxplan: what a fresh runner has.
    cmd.arg(source_root().join("examples/ci/install.sh")).env("PATH", "/usr/bin:/bin");
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.output().unwrap()
}

#[test]
fn install_script_downloads_a_binary_only_with_the_right_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let (binary, sha256) = stand_in_binary(dir.path());
    let url = format!("file://{}", binary.display());
    let target = dir.path().join("tools");
    let github_path = dir.path().join("github_path");
    let run = |sha: &str| {
        install(&[
            ("FLUXPLAN_CI_BINARY_URL", url.as_str()),
            ("FLUXPLAN_CI_BINARY_SHA256", sha),
            ("FLUXPLAN_CI_INSTALL_DIR", target.to_str().unwrap()),
            ("GITHUB_PATH", github_path.to_str().unwrap()),
        ])
    };

    let out = run(&"0".repeat(64));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains(&format!("has SHA-256 {sha256}, not the 0000")), "{}", text(&out));
    assert!(!target.join("bin/fluxplan").exists(), "a binary that fails its checksum is not installed");

    let out = run(&sha256);
    assert!(out.status.success(), "{}", text(&out));
    let installed = target.join("bin/fluxplan");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), installed.display().to_string());
    assert!(text(&out).contains("using fluxplan 9.9.9 (stand-in)"), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(&github_path).unwrap().trim(),
        target.join("bin").display().to_string()
    );

    // Nothing to install from: says what to set.
    let out = install(&[("FLUXPLAN_CI_INSTALL_DIR", target.to_str().unwrap())]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out).contains("set FLUXPLAN_CI_BINARY_URL"), "{}", text(&out));
}

/// An Argo CD repository shaped like argoproj/argocd-example-apps: the default branch is
/// `master`, and the root Application and the Application it applies track it by name. A pull
/// request (branch `pr`) bumps an image. Returns the repository and the base commit.
fn argo_cd_on_master() -> (Repo, String) {
    let repo = Repo::new("https://github.com/acme/gitops.git");
    repo.git(&["symbolic-ref", "HEAD", "refs/heads/master"]);
    let application = |name: &str, path: &str, namespace: &str| {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\n\
             spec:\n  project: default\n  source:\n    repoURL: https://github.com/acme/gitops.git\n    \
             targetRevision: master\n    path: {path}\n  destination:\n    server: https://kubernetes.default.svc\n    \
             namespace: {namespace}\n"
        )
    };
    repo.write("bootstrap/root.yaml", &application("root", "apps", "argocd"));
    repo.write("apps/shop.yaml", &application("shop", "workloads/shop", "shop"));
    repo.write("workloads/shop/shop.yaml", APP);
    let base = repo.commit("base");
    repo.git(&["checkout", "-q", "-b", "pr"]);
    crate::fixture::edit(&repo, "workloads/shop/shop.yaml", "nginx:1.26", "nginx:1.27");
    repo.commit("the pull request");
    repo.git(&["checkout", "-q", "master"]);
    (repo, base)
}

/// The pull request's head alone, as CI checks it out: `master` is not in the clone.
fn shallow_checkout_of_pr(repo: &Repo, into: &Path) {
    let url = format!("file://{}", repo.path().display());
    let out = Command::new("git")
        .args(["clone", "-q", "--depth", "1", "--branch", "pr", &url])
        .arg(into)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn ci_plans_against_the_branch_merged_into_so_applications_tracking_it_by_name_resolve() {
    let (repo, base) = argo_cd_on_master();
    // The clone's origin is a path: the Applications' repoURL is this repository all the same.
    let this_repo = ("FLUXPLAN_CI_ARGS", "--repo-url https://github.com/acme/gitops.git");
    let plan_of = |dir: &Path| -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join("fluxplan-report/plan.json")).unwrap())
            .unwrap()
    };

    // The near miss: the base commit alone (the action's default before) names no branch, and
    // `master` is nowhere in the clone.
    let checkout = tempfile::tempdir().unwrap();
    shallow_checkout_of_pr(&repo, checkout.path());
    let out = ci_script(
        checkout.path(),
        &[("FLUXPLAN_CI_BASE", &base), ("FLUXPLAN_CI_FAIL_ON", "never"), this_repo],
    );
    assert!(out.status.success(), "{}", text(&out));
    let plan = plan_of(checkout.path());
    assert!(plan.to_string().contains("no branch, tag or commit 'master'"), "{plan:#}");

    // GitHub (what the action passes), and GitLab's variables of a merge request pipeline: the
    // branch by name, at the base commit.
    let github = [("GITHUB_BASE_REF", "master"), ("FLUXPLAN_CI_BASE_COMMIT", base.as_str()), this_repo];
    let gitlab = [
        ("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "master"),
        ("CI_MERGE_REQUEST_DIFF_BASE_SHA", base.as_str()),
        this_repo,
    ];
    for forge in [&github[..], &gitlab[..]] {
        let checkout = tempfile::tempdir().unwrap();
        shallow_checkout_of_pr(&repo, checkout.path());
        let out = ci_script(checkout.path(), forge);
        let log = text(&out);
        assert_eq!(out.status.code(), Some(0), "changes pass: {log}");
        assert!(log.contains(&format!("the base {base} is not in this shallow clone: fetching it")), "{log}");
        let plan = plan_of(checkout.path());
        assert_eq!(plan["verdict"], "changes", "{plan:#}");
        assert!(!plan.to_string().contains("no branch, tag or commit"), "{plan:#}");
        assert_eq!(plan["base"]["commit"], base.as_str(), "the diff is from the base commit");
        assert_eq!(plan["base"]["rev"], "origin/master", "{:#}", plan["base"]);
        let shop = crate::fixture::changes_of(&plan, "argocd/shop");
        assert!(shop.contains(&("update".to_string(), "shop_web_apps_Deployment".to_string())), "{shop:?}");
    }

    // The branch moved on since the pull request's base: the plan still compares with the base
    // commit the forge names (a full clone whose origin/master is ahead).
    let ahead = repo.commit("master moves on");
    let checkout = tempfile::tempdir().unwrap();
    let url = format!("file://{}", repo.path().display());
    let out = Command::new("git")
        .args(["clone", "-q", "--branch", "pr", &url])
        .arg(checkout.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = ci_script(checkout.path(), &github);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan = plan_of(checkout.path());
    assert_eq!(plan["base"]["commit"], base.as_str(), "not {ahead}");

    // Names a forge would never send are refused before git sees them.
    for (name, value, says) in [
        ("GITHUB_BASE_REF", "--upload-pack=touch owned", "not a branch name git accepts"),
        ("GITHUB_BASE_REF", "master..HEAD", "not a branch name git accepts"),
        ("FLUXPLAN_CI_BASE_COMMIT", "HEAD~1", "not a full commit id"),
    ] {
        let mut env = vec![("GITHUB_BASE_REF", "master"), ("FLUXPLAN_CI_BASE_COMMIT", base.as_str())];
        env.retain(|(n, _)| *n != name);
        env.push((name, value));
        let out = ci_script(checkout.path(), &env);
        assert_eq!(out.status.code(), Some(3), "{value}: {}", text(&out));
        assert!(text(&out).contains(says), "{value}: {}", text(&out));
    }
    assert!(!checkout.path().join("owned").exists());
}
