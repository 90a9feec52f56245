//! The release a user consumes and how the action gets it: .github/workflows/release.yml and
//! action.yml validated against SchemaStore's schemas (check-jsonschema) and their shell with
//! shellcheck; scripts/release.sh's files served on loopback laid out like a GitHub release, and
//! examples/ci/install.sh installing from there (checked, cached, a tampered download refused, a
//! missing release built from source); the pinned Helm the action installs, on a runner without
//! one. Each tool a test drives is required: scripts/test.sh installs them.

use crate::ci_recipes::{key_values, parse_yaml, shallow_checkout, source_root, text, tool_cache, ActionRun};
use crate::helm_fetch::Static;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The commit the stand-in release binary says it was built from.
const BUILT_FROM: &str = "0123456789ab";

/// `name` on PATH, or the test fails saying how to get it.
fn tool(name: &str, install: &str) -> PathBuf {
    let out = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output().unwrap();
    let found = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!found.is_empty(), "this test needs {name}: {install} (scripts/test.sh installs it)");
    PathBuf::from(found)
}

fn write_executable(file: &Path, text: &str) {
    std::fs::write(file, text).unwrap();
    std::fs::set_permissions(file, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// Every `run:` block of a workflow's jobs, or of a composite action's steps.
fn run_blocks(doc: &Value) -> Vec<String> {
    let steps = doc["jobs"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(_, job)| job["steps"].as_array().cloned().unwrap_or_default())
        .chain(doc["runs"]["steps"].as_array().cloned().unwrap_or_default());
    steps.filter_map(|step| step["run"].as_str().map(str::to_string)).collect()
}

fn workflows() -> Vec<PathBuf> {
    let dir = source_root().join(".github/workflows");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .collect();
    found.sort();
    assert!(!found.is_empty(), "no workflow in {}", dir.display());
    found
}

#[test]
fn the_workflows_and_the_action_validate_against_schemastores_schemas() {
    let checker = tool("check-jsonschema", "pip install check-jsonschema");
    let validate = |schema: &str, file: &Path| -> Output {
        Command::new(&checker).args(["--builtin-schema", schema]).arg(file).output().unwrap()
    };
    for workflow in workflows() {
        let out = validate("vendor.github-workflows", &workflow);
        assert!(out.status.success(), "{}: {}", workflow.display(), text(&out));
    }
    let action = source_root().join("action.yml");
    let out = validate("vendor.github-actions", &action);
    assert!(out.status.success(), "{}", text(&out));

    // Near misses the schemas must catch: a misspelt key, a composite step without its shell.
    let dir = tempfile::tempdir().unwrap();
    let release = std::fs::read_to_string(source_root().join(".github/workflows/release.yml")).unwrap();
    let typo = dir.path().join("typo.yml");
    std::fs::write(&typo, release.replacen("\npermissions:", "\npermission:", 1)).unwrap();
    let out = validate("vendor.github-workflows", &typo);
    assert!(!out.status.success() && text(&out).contains("'permission' was unexpected"), "{}", text(&out));
    let shell_less = dir.path().join("action.yml");
    let action_text = std::fs::read_to_string(&action).unwrap();
    std::fs::write(&shell_less, action_text.replace("      shell: bash\n", "")).unwrap();
    assert!(!validate("vendor.github-actions", &shell_less).status.success());
}

#[test]
fn the_shell_the_release_the_action_and_the_ci_scripts_run_passes_shellcheck() {
    let shellcheck = tool("shellcheck", "apt-get install shellcheck");
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = [
        "examples/ci/install.sh",
        "examples/ci/install-renderers.sh",
        "examples/ci/fluxplan-ci.sh",
        "scripts/release.sh",
    ]
    .iter()
    .map(|f| source_root().join(f))
    .collect();
    // Each `run:` block as the runner runs it: `shell: bash` (the default on Linux runners).
    let mut documents: Vec<(String, Value)> = vec![("action".into(), parse_yaml("action.yml"))];
    for workflow in workflows() {
        let relative = workflow.strip_prefix(source_root()).unwrap().to_string_lossy().to_string();
        documents.push((workflow.file_stem().unwrap().to_string_lossy().into(), parse_yaml(&relative)));
    }
    for (name, doc) in &documents {
        let blocks = run_blocks(doc);
        assert!(!blocks.is_empty(), "{name} runs nothing");
        for (i, block) in blocks.iter().enumerate() {
            assert!(
                !block.contains("${{"),
                "{name}: inputs reach the shell through env, never spliced: {block}"
            );
            let file = dir.path().join(format!("{name}-{i}.sh"));
            std::fs::write(&file, format!("#!/usr/bin/env bash\nset -eo pipefail\n{block}")).unwrap();
            files.push(file);
        }
    }
    let out = Command::new(&shellcheck).args(&files).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));

    // The near miss: a path split on blanks.
    let unquoted = dir.path().join("unquoted.sh");
    std::fs::write(&unquoted, "#!/usr/bin/env bash\necho \"bin=x\" >>$GITHUB_OUTPUT\n").unwrap();
    let out = Command::new(&shellcheck).arg(&unquoted).output().unwrap();
    assert!(!out.status.success() && text(&out).contains("SC2086"), "{}", text(&out));
}

#[test]
fn the_release_workflow_builds_both_architectures_and_publishes_what_the_action_installs() {
    let workflow = parse_yaml(".github/workflows/release.yml");
    assert_eq!(workflow["on"], json!({"push": {"tags": ["v*"]}}));
    assert_eq!(workflow["permissions"], json!({"contents": "read"}), "least privilege but where needed");
    let matrix = workflow["jobs"]["binaries"]["strategy"]["matrix"]["include"].as_array().unwrap();
    let arches: Vec<&str> = matrix.iter().map(|m| m["arch"].as_str().unwrap()).collect();
    assert_eq!(arches, ["amd64", "arm64"]);
    let publish = &workflow["jobs"]["publish"];
    assert_eq!(publish["permissions"], json!({"contents": "write", "packages": "write"}));
    let runs = run_blocks(&json!({"jobs": {"publish": publish}})).concat();
    for arch in arches {
        assert!(runs.contains(&format!("linux-{arch}=artifacts/fluxplan-linux-{arch}/fluxplan")), "{arch}");
    }
    for needed in [
        "scripts/release.sh",
        "scripts/build-image.sh",
        "buildah --storage-driver vfs push",
        "gh release create",
    ] {
        assert!(runs.contains(needed), "the publish job runs no {needed}");
    }
}

/// A stand-in fluxplan that says it is this version, built from `commit` (install.sh only asks
/// for its version).
fn stand_in(dir: &Path, commit: &str) -> PathBuf {
    let file = dir.join(format!("fluxplan-{commit}"));
    write_executable(&file, &format!("#!/bin/sh\necho 'fluxplan {VERSION} (commit {commit})'\n"));
    file
}

/// scripts/release.sh run with `args`.
fn release_sh(args: &[String]) -> Output {
    Command::new(source_root().join("scripts/release.sh")).args(args).output().unwrap()
}

/// The files of release `v{VERSION}` of `binary` (both architectures), as scripts/release.sh
/// lays them out, in `dir/dist`.
fn release_files(dir: &Path, binary: &Path) -> PathBuf {
    let out = dir.join("dist");
    let args = [
        "--tag".into(),
        format!("v{VERSION}"),
        "--out".into(),
        out.display().to_string(),
        "--image".into(),
        format!("ghcr.io/acme/fluxplan:{VERSION}"),
        format!("linux-amd64={}", binary.display()),
        format!("linux-arm64={}", binary.display()),
    ];
    let run = release_sh(&args);
    assert!(run.status.success(), "{}", text(&run));
    out
}

/// A loopback server laid out like GitHub's releases of acme/fluxplan: each file at
/// /acme/fluxplan/releases/download/TAG/FILE redirects to where it is stored, as github.com does.
fn github_releases(tag: &str, files: &Path) -> Static {
    let mut stored = Vec::new();
    let mut redirects = Vec::new();
    for entry in std::fs::read_dir(files).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().to_string();
        stored.push((format!("/storage/{tag}/{name}"), std::fs::read(entry.path()).unwrap()));
        redirects.push((
            format!("/acme/fluxplan/releases/download/{tag}/{name}"),
            format!("/storage/{tag}/{name}"),
        ));
    }
    Static::start(stored, redirects)
}

/// The runner's architecture, as release files name it.
fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no release binary for {other}"),
    }
}

/// A runner that uses the action as acme/fluxplan@REF: the action's files at
/// .../_actions/acme/fluxplan/REF, its tool cache, and a cargo that records how it was run and
/// "builds" a stand-in.
struct Runner {
    dir: tempfile::TempDir,
    action_path: PathBuf,
}

impl Runner {
    fn new(reference: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let action_path = dir.path().join("_actions/acme/fluxplan").join(reference);
        std::fs::create_dir_all(&action_path).unwrap();
        std::fs::copy(source_root().join("Cargo.toml"), action_path.join("Cargo.toml")).unwrap();
        let built = stand_in(dir.path(), "b0000000000b");
        let cargo = dir.path().join("cargo");
        write_executable(
            &cargo,
            &format!(
                "#!/bin/sh\nprintf '%s\\n' \"$PWD $*\" >>{log}\nwhile [ $# -gt 0 ]; do\n  case $1 in --root) root=$2; shift 2 ;; *) shift ;; esac\ndone\n\
                 mkdir -p \"$root/bin\" && cp {built} \"$root/bin/fluxplan\"\n",
                log = dir.path().join("cargo.log").display(),
                built = built.display()
            ),
        );
        Runner { dir, action_path }
    }

    fn tool_cache(&self) -> PathBuf {
        self.dir.path().join("tool-cache")
    }

    /// What the stand-in cargo was asked, one line per run (`DIR ARGS`).
    fn cargo_runs(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.dir.path().join("cargo.log")).unwrap_or_default();
        log.lines().map(str::to_string).collect()
    }

    /// examples/ci/install.sh as the action's install step runs it, with no fluxplan on PATH,
    /// downloading from `server`.
    fn install(&self, server: &Static, env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new("sh");
        cmd.arg(source_root().join("examples/ci/install.sh"))
            .env("PATH", "/usr/bin:/bin")
            .env("RUNNER_TEMP", self.dir.path())
            .env("RUNNER_TOOL_CACHE", self.tool_cache())
            .env("GITHUB_PATH", self.dir.path().join("github_path"))
            .env("FLUXPLAN_CI_SOURCE", &self.action_path)
            .env("FLUXPLAN_CI_RELEASE_URL", format!("{}/acme/fluxplan/releases/download", server.url()))
            .env("FLUXPLAN_CI_CARGO", self.dir.path().join("cargo"))
            // The action's context is empty on some runners: install.sh reads the action's path.
            .env_remove("FLUXPLAN_CI_RELEASE_REPO")
            .env_remove("FLUXPLAN_CI_RELEASE_REF")
            .env_remove("FLUXPLAN_CI_BINARY_URL");
        cmd.envs(env.iter().copied());
        cmd.output().unwrap()
    }

    /// Where install.sh puts what it builds.
    fn built(&self) -> PathBuf {
        self.dir.path().join("fluxplan/bin/fluxplan")
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_action_installs_the_release_of_its_ref_checked_against_sha256sums_and_cached() {
    let files = tempfile::tempdir().unwrap();
    let dist = release_files(files.path(), &stand_in(files.path(), BUILT_FROM));
    let tag = format!("v{VERSION}");
    let server = github_releases(&tag, &dist);
    let runner = Runner::new(&tag);

    let out = runner.install(&server, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let cached = runner.tool_cache().join("fluxplan").join(VERSION).join(arch());
    assert_eq!(stdout(&out), cached.join("fluxplan").display().to_string());
    assert!(
        text(&out).contains(&format!("using fluxplan {VERSION} (commit {BUILT_FROM})")),
        "{}",
        text(&out)
    );
    assert!(cached.with_extension("complete").is_file(), "marked complete, as actions/tool-cache does");
    let asked = server.asked();
    for file in ["SHA256SUMS".to_string(), format!("fluxplan-{tag}-linux-{}.tar.gz", arch())] {
        assert!(asked.contains(&format!("/acme/fluxplan/releases/download/{tag}/{file}")), "{asked:?}");
        assert!(asked.contains(&format!("/storage/{tag}/{file}")), "the redirect is followed: {asked:?}");
    }
    assert_eq!(
        std::fs::read_to_string(runner.dir.path().join("github_path")).unwrap().trim(),
        cached.display().to_string()
    );
    assert!(runner.cargo_runs().is_empty(), "nothing is built");

    // The next job on this runner finds it in the tool cache: nothing is downloaded.
    let out = runner.install(&server, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(stdout(&out), cached.join("fluxplan").display().to_string());
    assert_eq!(server.asked().len(), asked.len(), "{:?}", server.asked());

    // Pinned by commit: the release of the version in the action's Cargo.toml, when it was built
    // from that commit...
    let pinned = format!("{BUILT_FROM}{}", "0".repeat(28));
    let by_commit = Runner::new(&pinned);
    let out = by_commit.install(&server, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout(&out).starts_with(&by_commit.tool_cache().display().to_string()), "{}", text(&out));
    // ...and built from source when it was not.
    let other = Runner::new(&"f".repeat(40));
    let out = other.install(&server, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("built from commit {BUILT_FROM}, not {}", "f".repeat(40))),
        "{}",
        text(&out)
    );
    assert_eq!(stdout(&out), other.built().display().to_string());
    assert_eq!(other.cargo_runs().len(), 1);
}

#[test]
fn a_release_whose_checksum_does_not_match_is_refused_and_never_replaced_by_a_build() {
    let files = tempfile::tempdir().unwrap();
    let dist = release_files(files.path(), &stand_in(files.path(), BUILT_FROM));
    // The asset swapped for another binary's: SHA256SUMS still lists the original.
    let other = tempfile::tempdir().unwrap();
    let evil = release_files(other.path(), &stand_in(other.path(), "e0000000000e"));
    let asset = format!("fluxplan-v{VERSION}-linux-{}.tar.gz", arch());
    std::fs::copy(evil.join(&asset), dist.join(&asset)).unwrap();
    let server = github_releases(&format!("v{VERSION}"), &dist);
    let runner = Runner::new(&format!("v{VERSION}"));

    let out = runner.install(&server, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains(&format!("{asset} has SHA-256 ")), "{}", text(&out));
    assert!(text(&out).contains("its release's SHA256SUMS lists: not installed"), "{}", text(&out));
    assert_eq!(stdout(&out), "", "no binary is named");
    let cached = runner.tool_cache().join("fluxplan").join(VERSION);
    assert!(
        !cached.join(arch()).join("fluxplan").exists()
            && !cached.join(format!("{}.complete", arch())).exists()
    );
    assert!(runner.cargo_runs().is_empty(), "a tampered download is never replaced by a build");
}

#[test]
fn without_a_matching_release_the_action_builds_its_own_source() {
    let server = Static::start(Vec::new(), Vec::new());
    // No release of this tag (404), and a ref that is no tag at all (nothing is asked).
    for (reference, says) in
        [("v9.9.9", "acme/fluxplan has no release v9.9.9"), ("main", "not a release tag")]
    {
        let runner = Runner::new(reference);
        let asked = server.asked().len();
        let out = runner.install(&server, &[]);
        assert!(out.status.success(), "{reference}: {}", text(&out));
        assert!(text(&out).contains(says), "{reference}: {}", text(&out));
        assert!(text(&out).contains("no release matches: building fluxplan from"), "{}", text(&out));
        assert_eq!(stdout(&out), runner.built().display().to_string());
        assert_eq!(
            runner.cargo_runs(),
            [format!(
                "{} install --quiet --locked --root {} --path . --bin fluxplan",
                runner.action_path.display(),
                runner.dir.path().join("fluxplan").display()
            )],
            "built from the action's own tree, Cargo.lock's versions"
        );
        if reference == "main" {
            assert_eq!(server.asked().len(), asked, "{:?}", server.asked());
        }
    }
}

#[test]
fn release_sh_lays_out_checked_reproducible_files_for_the_crates_version_only() {
    let dir = tempfile::tempdir().unwrap();
    let binary = stand_in(dir.path(), BUILT_FROM);
    let dist = release_files(dir.path(), &binary);
    let tag = format!("v{VERSION}");
    let mut names: Vec<String> =
        std::fs::read_dir(&dist).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "SHA256SUMS".to_string(),
            format!("fluxplan-{tag}-linux-amd64.tar.gz"),
            format!("fluxplan-{tag}-linux-arm64.tar.gz"),
            "gitlab-ci.yml".into()
        ]
    );
    let check = Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(&dist)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check));
    assert_eq!(String::from_utf8_lossy(&check.stdout).lines().count(), 3, "every other file is listed");
    let listing = Command::new("tar")
        .args(["-tvzf"])
        .arg(dist.join(format!("fluxplan-{tag}-linux-amd64.tar.gz")))
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout).to_string();
    assert!(listing.starts_with("-rwxr-xr-x 0/0") && listing.trim_end().ends_with(" fluxplan"), "{listing}");

    // The same binary, the same archive.
    let again = tempfile::tempdir().unwrap();
    let second = release_files(again.path(), &binary);
    let sums = |d: &Path| std::fs::read_to_string(d.join("SHA256SUMS")).unwrap();
    assert_eq!(sums(&dist), sums(&second));

    // The GitLab template of the release runs the release's image; nothing else differs.
    let template = std::fs::read_to_string(source_root().join("examples/ci/gitlab-ci.yml")).unwrap();
    let released = std::fs::read_to_string(dist.join("gitlab-ci.yml")).unwrap();
    let differing: Vec<(&str, &str)> =
        template.lines().zip(released.lines()).filter(|(a, b)| a != b).collect();
    assert_eq!(differing.len(), 1, "{differing:?}");
    assert_eq!(differing[0].1, format!("    FLUXPLAN_IMAGE: ghcr.io/acme/fluxplan:{VERSION}"));

    // A tag that is not the crate's version, an image name that is not one, an unknown platform.
    for (args, says) in [
        (vec!["--tag", "v9.9.9"], "is not v"),
        (vec!["--tag", &tag, "--image", "x; rm -rf /"], "is not an image name"),
    ] {
        let out_dir = dir.path().join(format!("out-{}", says.len()));
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.extend([
            "--out".into(),
            out_dir.display().to_string(),
            format!("linux-amd64={}", binary.display()),
        ]);
        let out = release_sh(&all);
        assert!(!out.status.success() && text(&out).contains(says), "{args:?}: {}", text(&out));
    }
    let out = release_sh(&[format!("windows-amd64={}", binary.display())]);
    assert!(!out.status.success() && text(&out).contains("unknown argument"), "{}", text(&out));
}

#[test]
fn the_gitlab_template_runs_the_image_the_project_publishes_for_this_version() {
    let template = parse_yaml("examples/ci/gitlab-ci.yml");
    let deploy = parse_yaml("deploy/kubernetes/kustomization.yaml");
    let image = &deploy["images"][0];
    assert_eq!(image["newTag"], VERSION, "deploy/kubernetes runs this version");
    assert_eq!(
        template["fluxplan"]["variables"]["FLUXPLAN_IMAGE"],
        format!("{}:{VERSION}", image["newName"].as_str().unwrap()),
        "the template runs the image deploy/kubernetes does"
    );
}

#[test]
fn the_action_renders_helm_releases_on_a_runner_without_helm() {
    let repo = crate::helm_plan::fleet();
    let base = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    crate::helm_plan::scale_up(&repo);
    // A runner whose user has no cache of fluxplan's and no helm on PATH.
    let home = tempfile::tempdir().unwrap();
    let run_action = |steps: &[&str]| -> (Value, String, tempfile::TempDir) {
        let checkout = tempfile::tempdir().unwrap();
        shallow_checkout(&repo, checkout.path());
        let mut run = ActionRun::new(checkout.path(), &[], &[("github.event.pull_request.base.sha", &base)]);
        run.env = vec![
            ("HOME".into(), home.path().display().to_string()),
            ("XDG_CACHE_HOME".into(), String::new()),
        ];
        let no_helm =
            Command::new("sh").arg("-c").arg("command -v helm").env("PATH", &run.path).output().unwrap();
        assert!(!no_helm.status.success(), "helm is on PATH: {}", text(&no_helm));
        let mut log = String::new();
        for step in steps {
            let out = run.step(step);
            log += &text(&out);
            assert!(out.status.success(), "{step}: {log}");
        }
        let env = std::fs::read_to_string(run.output("json")).unwrap();
        (serde_json::from_str(&env).unwrap(), log, checkout)
    };

    // The near miss: without the action's install, the HelmRelease is not rendered and the plan
    // says to run a script of fluxplan's tree.
    let (plan, _, _checkout) = run_action(&["install", "plan"]);
    assert!(plan.to_string().contains("scripts/fetch-helm.sh"), "{plan:#}");

    let (plan, log, _checkout) = run_action(&["install", "renderers", "plan"]);
    assert!(!plan.to_string().contains("fetch-helm.sh"), "{plan:#}");
    let release = crate::fixture::unit_in(&plan, "HelmRelease", "data/db");
    let changes = crate::fixture::sorted_changes(release);
    assert!(changes.contains(&("update".to_string(), "data_db_apps_StatefulSet".to_string())), "{changes:?}");
    assert!(log.contains("Helm 4: "), "{log}");
}

#[test]
fn install_renderers_points_fluxplan_at_the_pinned_helm_and_library_and_refuses_unknown_versions() {
    let run = |helm: &str, github_env: &Path| -> Output {
        Command::new("sh")
            .arg(source_root().join("examples/ci/install-renderers.sh"))
            .env("RUNNER_TOOL_CACHE", tool_cache())
            .env("GITHUB_ENV", github_env)
            .env("FLUXPLAN_CI_HELM", helm)
            .output()
            .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let github_env = dir.path().join("env");
    let out = run("4 3", &github_env);
    assert!(out.status.success(), "{}", text(&out));
    let settings = key_values(&github_env);
    let helm_dir = tool_cache().join("fluxplan/helm");
    assert_eq!(settings["FLUXPLAN_HELM_DIR"], helm_dir.display().to_string());
    assert!(helm_dir.join("helm-v4.1.4").is_file() && helm_dir.join("helm-v3.17.2").is_file());
    if arch() == "amd64" {
        assert!(Path::new(&settings["FLUXPLAN_KUSTOMIZE_LIB"]).is_file(), "{settings:?}");
    }
    assert_eq!(stdout(&out), std::fs::read_to_string(&github_env).unwrap().trim(), "printed as appended");
    // The binary's own lookup finds what was installed (the action's plan step sees this env).
    let version = Command::new(crate::fixture::fluxplan_bin())
        .arg("--version")
        .env("HOME", dir.path())
        .env_remove("XDG_CACHE_HOME")
        .envs(settings.iter())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).contains("helm v4: v4.1.4"), "{}", text(&version));

    let none = dir.path().join("none");
    assert!(run("none", &none).status.success());
    assert!(!key_values(&none).contains_key("FLUXPLAN_HELM_DIR"));
    let out = run("5", &dir.path().join("five"));
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out).contains("expected 4, 3, \"4 3\" or none"), "{}", text(&out));
}
