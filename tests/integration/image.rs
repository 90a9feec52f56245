//! fluxplan's container image, built here by `scripts/build-image.sh` with Debian's `buildah`
//! (vfs storage, chroot isolation; the test script installs it): the demo runs in it with only
//! what the image holds (git, kustomize's library), a HelmRelease renders with each of its Helms,
//! the GitLab template's job runs in it as GitLab's runner runs it, and it is configured as
//! `deploy/Containerfile` says.

use crate::ci_recipes::{key_values, parse_yaml, pull_request, shallow_checkout};
use crate::fixture::{edit, fluxplan_bin, sorted_changes, sorted_pairs, unit_in, Repo};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// buildah on a private storage under a temporary directory: tests never share images, and
/// what they leave (containers hold mounts) is removed on drop, failed test or not.
struct Buildah {
    dir: tempfile::TempDir,
}

impl Buildah {
    fn new() -> Self {
        let version = Command::new("buildah").arg("--version").output();
        assert!(
            version.is_ok_and(|out| out.status.success()),
            "buildah is not installed: this test builds fluxplan's image with it \
             (apt-get install buildah; scripts/test.sh installs it)"
        );
        Buildah { dir: tempfile::tempdir().unwrap() }
    }

    fn storage(&self) -> [PathBuf; 2] {
        [self.dir.path().join("root"), self.dir.path().join("runroot")]
    }

    fn command(&self) -> Command {
        let [root, runroot] = self.storage();
        let mut cmd = Command::new("buildah");
        cmd.args(["--storage-driver", "vfs", "--root"]).arg(root).arg("--runroot").arg(runroot);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().unwrap()
    }

    /// Runs buildah, which must succeed; returns its standard output.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "buildah {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `scripts/build-image.sh` with the fluxplan these tests run; returns the image's name.
    fn build_image(&self) -> String {
        let tag = "localhost/fluxplan-test:image";
        let [root, runroot] = self.storage();
        let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-image.sh"))
            .arg("--root")
            .arg(root)
            .arg("--runroot")
            .arg(runroot)
            .args(["--tag", tag])
            .arg(fluxplan_bin())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "scripts/build-image.sh failed: {stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), tag, "it prints the image's name; {stderr}");
        tag.to_string()
    }

    /// Runs `command` in `container`, isolated by chroot (no OCI runtime needed); returns
    /// stdout, stderr and the exit code.
    fn run_in(&self, container: &str, command: &[&str]) -> (String, String, Option<i32>) {
        self.run_in_with(&[], container, command)
    }

    /// `run_in` with more options for `buildah run` (`--user`, `--env`, `--volume`…).
    fn run_in_with(
        &self,
        options: &[String],
        container: &str,
        command: &[&str],
    ) -> (String, String, Option<i32>) {
        let mut args = vec!["run", "--isolation", "chroot"];
        args.extend(options.iter().map(String::as_str));
        args.extend([container, "--"]);
        args.extend(command);
        let out = self.run(&args);
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        (text(out.stdout), text(out.stderr), out.status.code())
    }
}

impl Drop for Buildah {
    fn drop(&mut self) {
        // Containers first (they hold the mounts), then images; the files go with the directory.
        let _ = self.run(&["rm", "--all"]);
        let _ = self.run(&["rmi", "--all", "--force"]);
    }
}

#[test]
fn the_image_runs_the_demo_with_its_own_git_kustomize_library_and_helm() {
    let buildah = Buildah::new();
    let image = buildah.build_image();
    let container = buildah.ok(&["from", &image]).trim().to_string();

    let (version, stderr, code) = buildah.run_in(&container, &["fluxplan", "--version"]);
    assert_eq!(code, Some(0), "fluxplan --version in the image: {stderr}");
    for engine in ["kustomize: kustomize library v", "helm v4: v4.", "helm v3: v3."] {
        assert!(version.contains(engine), "the image's fluxplan does not find {engine:?}: {version}{stderr}");
    }

    let (plan, stderr, code) = buildah.run_in(&container, &["fluxplan", "demo"]);
    // The demo exits 0 when it could plan; the plan it prints is blocked.
    assert_eq!(code, Some(0), "fluxplan demo in the image: {stderr}\n{plan}");
    for expected in [
        "fluxplan: BLOCKED — 1 to update, 4 to delete",
        "DANGER empty-render flux-system/apps (clusters/production)",
        "delete Namespace podinfo",
        "delete PersistentVolumeClaim podinfo/podinfo-cache",
    ] {
        assert!(plan.contains(expected), "the demo's plan lacks {expected:?}:\n{plan}\n{stderr}");
    }
    assert!(stderr.contains("verdict: blocked"), "{stderr}");
}

/// A cluster whose Kustomization applies the HelmRelease `web/site`, its chart in this
/// repository; then its values change.
fn helm_fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/site.yaml", "site", "./apps/site", "");
    repo.write(
        "apps/site/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: site\n  namespace: web\n\
         spec:\n  interval: 10m\n  chart:\n    spec:\n      chart: ./charts/site\n      sourceRef:\n        \
         kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n  values:\n    greeting: hello\n",
    );
    repo.write("charts/site/Chart.yaml", "apiVersion: v2\nname: site\nversion: 1.0.0\n");
    repo.write(
        "charts/site/templates/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: site\ndata:\n  greeting: {{ .Values.greeting }}\n",
    );
    repo.commit("base");
    edit(&repo, "apps/site/release.yaml", "greeting: hello", "greeting: bonjour");
    repo.commit("bonjour");
    repo
}

#[test]
fn the_image_renders_a_helm_release_with_each_of_its_helms() {
    let buildah = Buildah::new();
    let image = buildah.build_image();
    let container = buildah.ok(&["from", &image]).trim().to_string();
    let repo = helm_fleet();
    let fleet = "/home/fluxplan/fleet";
    buildah.ok(&["copy", "--chown", "65532:65532", &container, repo.path().to_str().unwrap(), fleet]);
    for major in ["4", "3"] {
        let command = ["fluxplan", "plan", "--helm-version", major, "--repo", fleet];
        let command = [&command[..], &["--base", "HEAD~1", "--head", "HEAD", "--format", "json"]].concat();
        let (stdout, stderr, code) = buildah.run_in(&container, &command);
        assert_eq!(code, Some(1), "Helm {major}: changes; {stderr}\n{stdout}");
        let plan: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
        let kustomize = plan["kustomize"].as_str().unwrap_or_default();
        assert!(kustomize.starts_with("kustomize library"), "rendered with {kustomize:?}");
        let release = unit_in(&plan, "HelmRelease", "web/site");
        assert_eq!(release["engine"], "helm", "{release:#}");
        assert_eq!(
            sorted_changes(release),
            sorted_pairs(&[("update", "web_site__ConfigMap")]),
            "Helm {major}"
        );
        let diff = release["changes"][0]["diff"].as_str().unwrap();
        assert!(diff.contains("+  greeting: bonjour"), "Helm {major}: {diff}");
    }
}

fn chmod(args: &[&str], path: &Path) {
    let out = Command::new("chmod").args(args).arg(path).output().unwrap();
    assert!(out.status.success(), "chmod {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The GitLab template's job in the image, as GitLab's runner runs it: its helper, as root with
/// umask 0000, checks the merge request out into the build directory (root's files, writable by
/// anyone, a shallow clone); then the image's `sh` runs the template's `script:` as the image's
/// user with GitLab's variables and the job's, its output going to a log file (as the Kubernetes
/// executor's does; `buildah run` loses a process's output now and then on a busy machine).
#[test]
fn the_gitlab_template_runs_in_the_image_on_a_checkout_the_runner_owns() {
    let template = parse_yaml("examples/ci/gitlab-ci.yml");
    let job = &template["fluxplan"];
    // The image's entrypoint is fluxplan: the job must reset it for the runner's shell.
    assert_eq!(job["image"]["name"], "$FLUXPLAN_IMAGE", "{job:#}");
    assert_eq!(job["image"]["entrypoint"], serde_json::json!([""]), "{job:#}");
    let script: Vec<&str> = job["script"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    let script = script.join("\n");

    let buildah = Buildah::new();
    let image = buildah.build_image();
    let container = buildah.ok(&["from", &image]).trim().to_string();

    let (forge, base) = pull_request(true);
    let builds = tempfile::tempdir().unwrap();
    let checkout = builds.path().join("fleet");
    shallow_checkout(&forge, &checkout);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&checkout).unwrap()), 0, "root's");
    chmod(&["-R", "a+rwX"], &checkout);
    let logs = builds.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    chmod(&["a+rwx"], &logs);
    // The checkout's origin, at the same path in the container: the base is fetched from it.
    chmod(&["-R", "a+rX"], forge.path());

    let project = "/builds/acme/fleet";
    let mut env: BTreeMap<String, String> = [
        ("GITLAB_CI", "true"),
        ("CI", "true"),
        ("CI_PIPELINE_SOURCE", "merge_request_event"),
        ("CI_PROJECT_DIR", project),
        ("CI_MERGE_REQUEST_DIFF_BASE_SHA", &base),
        ("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "main"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value.to_string()))
    .collect();
    for (name, value) in job["variables"].as_object().unwrap() {
        env.insert(name.clone(), value.as_str().unwrap().to_string());
    }
    env.insert("FLUXPLAN_IMAGE".into(), image.clone());
    // Runs `script` with the image's sh as the job's user; returns its exit status and output.
    let run = |name: &str, script: &str, more: &[(&str, &str)]| {
        let mut options: Vec<String> = vec![
            "--user".into(),
            "65532:65532".into(),
            "--volume".into(),
            format!("{}:{project}", checkout.display()),
            "--volume".into(),
            format!("{0}:{0}:ro", forge.path().display()),
            "--volume".into(),
            format!("{}:/logs", logs.display()),
            "--workingdir".into(),
            project.into(),
        ];
        let mut env = env.clone();
        env.extend(more.iter().map(|(name, value)| (name.to_string(), value.to_string())));
        for (name, value) in env {
            options.extend(["--env".to_string(), format!("{name}={value}")]);
        }
        let script = format!("exec >/logs/{name}.log 2>&1\n{script}");
        let (stdout, stderr, code) = buildah.run_in_with(&options, &container, &["/bin/sh", "-ec", &script]);
        let log = std::fs::read_to_string(logs.join(format!("{name}.log")))
            .unwrap_or_else(|e| panic!("{name}: no log ({e}): {stdout}{stderr}"));
        (code, format!("{log}{stdout}{stderr}"))
    };

    // The checkout is as the runner leaves it: git refuses it but for the image's /etc/gitconfig.
    let (code, log) = run("git", "git rev-parse HEAD", &[("GIT_CONFIG_NOSYSTEM", "1")]);
    assert_ne!(code, Some(0), "the checkout should be another user's: {log}");
    assert!(log.contains("detected dubious ownership"), "{log}");
    // The runner finds the job's user with `id` when it hands it the build directory
    // (FF_DISABLE_UMASK_FOR_DOCKER_EXECUTOR): an applet on PATH, not only in busybox's sh.
    let (_, stderr, code) =
        buildah.run_in_with(&["--user".into(), "65532:65532".into()], &container, &["id"]);
    assert_eq!(code, Some(0), "id: {stderr}");

    let (code, log) = run("job", &script, &[]);
    assert_eq!(code, Some(2), "blocked: fluxplan's own exit status; {log}");
    assert!(log.contains("is not in this shallow clone: fetching it"), "{log}");
    assert!(log.contains("fluxplan: BLOCKED"), "the text plan is in the job log: {log}");
    let artifacts = &job["artifacts"];
    for path in artifacts["paths"].as_array().unwrap() {
        let file = checkout.join(path.as_str().unwrap());
        let metadata = std::fs::metadata(&file).unwrap_or_else(|e| panic!("artifact {path}: {e}; {log}"));
        assert_eq!(
            std::os::unix::fs::MetadataExt::uid(&metadata),
            65532,
            "{path}: written by the job's user"
        );
    }
    let dotenv = key_values(&checkout.join(artifacts["reports"]["dotenv"].as_str().unwrap()));
    assert_eq!(dotenv["FLUXPLAN_VERDICT"], "blocked");
    assert_eq!(dotenv["FLUXPLAN_EXIT_CODE"], "2");
    let plan = std::fs::read_to_string(checkout.join("fluxplan-report/plan.json")).unwrap();
    let plan: Value = serde_json::from_str(&plan).unwrap();
    assert_eq!(plan["verdict"], "blocked");
    assert_eq!(plan["base"]["commit"], base.as_str(), "the merge request's diff base");

    // A report directory the job's user cannot write: said before any plan, and a failure.
    let (code, log) = run("unwritable", &script, &[("FLUXPLAN_CI_OUT_DIR", "/fluxplan-report")]);
    assert_eq!(code, Some(3), "{log}");
    assert!(log.contains("cannot write to /fluxplan-report as uid 65532"), "{log}");
}

#[test]
fn the_image_is_configured_as_the_containerfile_says() {
    let buildah = Buildah::new();
    let image = buildah.build_image();
    let inspected: Value =
        serde_json::from_str(&buildah.ok(&["inspect", "--type", "image", &image])).unwrap();
    let built = &inspected["OCIv1"]["config"];
    let file =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/Containerfile")).unwrap();
    let stage = Stage::last_of(&file);

    let env: BTreeSet<&str> = built["Env"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let declared_env: BTreeSet<&str> = stage.get("ENV").split_whitespace().collect();
    assert_eq!(env, declared_env, "ENV");
    assert_eq!(built["User"], stage.get("USER"), "USER");
    assert_eq!(built["WorkingDir"], stage.get("WORKDIR"), "WORKDIR");
    assert_eq!(built["Entrypoint"], serde_json::from_str::<Value>(stage.get("ENTRYPOINT")).unwrap());
    assert_eq!(built["Cmd"], serde_json::from_str::<Value>(stage.get("CMD")).unwrap());
    let ports: Vec<&String> = built["ExposedPorts"].as_object().unwrap().keys().collect();
    assert_eq!(ports, [&format!("{}/tcp", stage.get("EXPOSE"))], "EXPOSE");
    assert_eq!(stage.get("USER"), "65532:65532", "an unprivileged user");
}

/// The last stage of a Containerfile: continuation lines joined, comments dropped.
struct Stage(String);

impl Stage {
    fn last_of(file: &str) -> Self {
        let joined = file
            .lines()
            .filter(|line| !line.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
            .replace("\\\n", " ");
        Stage(joined.rsplit_once("\nFROM ").map_or(joined.as_str(), |(_, stage)| stage).to_string())
    }

    /// The arguments of `instruction`, which the stage must have.
    fn get(&self, instruction: &str) -> &str {
        let prefix = format!("{instruction} ");
        self.0
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(str::trim)
            .unwrap_or_else(|| panic!("deploy/Containerfile's last stage has no {instruction}"))
    }
}
