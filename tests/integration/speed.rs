//! kustomize's library in sandboxed workers: it is installed and chosen, it builds what the
//! binary builds, a worker that crashes or hangs fails only its build, and kustomize runs once
//! per Kustomization and build inputs.

use crate::fixture::{self, Repo};
use fluxplan::cancel::{CancelReason, CancelToken};
use fluxplan::render::kustomize::{BuildError, Kustomize};
use fluxplan::render::{library, RenderOptions, Renderer, Status};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

/// The library as the suite expects it: installed by scripts/fetch-kustomize-lib.sh (which
/// scripts/test.sh runs first). Missing is a failure, never a skip.
pub fn library_path() -> PathBuf {
    let path = match library::choice() {
        library::Choice::Explicit(path) => Some(path),
        library::Choice::Default(path) => path,
        library::Choice::Off => None,
    };
    match path.filter(|p| p.is_file()) {
        Some(path) => path,
        None => panic!(
            "the kustomize library is expected and missing: run scripts/fetch-kustomize-lib.sh \
             (scripts/test.sh does), or point {} at it",
            library::LIB_ENV
        ),
    }
}

pub fn library_kustomize() -> Kustomize {
    Kustomize::library_in(&fixture::fluxplan_bin(), &library_path(), TIMEOUT)
        .unwrap_or_else(|e| panic!("the kustomize library does not work: {e:#}"))
}

fn binary_kustomize() -> Kustomize {
    ["kustomize", "kubectl"]
        .iter()
        .find_map(|p| Kustomize::at(p, TIMEOUT).ok())
        .expect("kustomize or kubectl is needed for these tests")
}

#[test]
fn the_library_is_installed_and_chosen_by_default() {
    library_path();
    let detected = Kustomize::detect(TIMEOUT).unwrap();
    assert!(detected.is_library(), "kustomize detected as {} instead of the library", detected.version);
    assert!(detected.version.starts_with("kustomize library v"), "{}", detected.version);
    assert_eq!(detected.version, "kustomize library v0.21.3 (pykustomize-v0.1.4)");
}

/// Every directory of the example fleet that has a kustomization, built both ways.
#[test]
fn the_library_builds_the_example_fleet_exactly_as_the_binary() {
    let fleet = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet");
    let (lib, bin) = (library_kustomize(), binary_kustomize());
    let mut dirs = Vec::new();
    collect_kustomization_dirs(&fleet, &mut dirs);
    assert!(dirs.len() >= 5, "{dirs:?}");
    for dir in &dirs {
        let cancel = CancelToken::new();
        let from_lib = lib.build(dir, &fleet, &cancel).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let from_bin = bin.build(dir, &fleet, &cancel).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert_eq!(from_lib, from_bin, "{} builds differently", dir.display());
    }

    // And every Kustomization the walk renders (prepared kustomizations, origins, nesting).
    let repo = Repo::new("git@github.com:acme/fleet.git");
    copy_dir(&fleet, repo.path());
    repo.commit("fleet");
    let opts = repo.options(Some("HEAD"));
    let by_lib = Renderer::from_kustomize(library_kustomize()).render(&opts).unwrap();
    let by_bin = Renderer::from_kustomize(binary_kustomize()).render(&opts).unwrap();
    assert!(by_lib.kustomize.starts_with("kustomize library"), "{}", by_lib.kustomize);
    let shown = |r: &fluxplan::render::Render| -> Vec<(String, String, Vec<serde_json::Value>)> {
        r.kustomizations()
            .map(|(c, k)| {
                assert_eq!(k.status, Status::Rendered, "{}/{}: {:?}", k.namespace, k.name, k.error);
                (
                    c.name.clone(),
                    format!("{}/{}", k.namespace, k.name),
                    k.objects.iter().map(|o| serde_json::Value::clone(&o.object)).collect(),
                )
            })
            .collect()
    };
    let (lib_shown, bin_shown) = (shown(&by_lib), shown(&by_bin));
    assert_eq!(lib_shown.len(), 6);
    assert_eq!(lib_shown, bin_shown);
}

fn collect_kustomization_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("kustomization.yaml").is_file() {
        out.push(dir.to_path_buf());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries.into_iter().filter(|p| p.is_dir()) {
        collect_kustomization_dirs(&path, out);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A stand-in worker in `dir`: greets like a worker, then runs `on_request` (shell) once the
/// first request's header has arrived.
fn stand_in_worker(dir: &Path, on_request: &str) -> PathBuf {
    let script = dir.join("worker");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf 'V\\000\\000\\000\\000\\000\\000\\000\\004fake'\nhead -c 9 >/dev/null\n{on_request}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script
}

/// A source root with `apps/` holding one ConfigMap.
fn source() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("apps")).unwrap();
    std::fs::write(
        root.path().join("apps/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- cm.yaml\n",
    )
    .unwrap();
    std::fs::write(
        root.path().join("apps/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: default\n",
    )
    .unwrap();
    root
}

#[test]
fn a_crashing_worker_fails_its_build_with_what_it_said() {
    let bin = tempfile::tempdir().unwrap();
    let script = stand_in_worker(bin.path(), "echo 'fatal error: unexpected signal' >&2\nexit 2");
    let kustomize = Kustomize::library_in(&script, &library_path(), TIMEOUT).unwrap();
    let root = source();
    let error = kustomize.build(&root.path().join("apps"), root.path(), &CancelToken::new()).unwrap_err();
    let BuildError::Failed(message) = error else { panic!("{error:?}") };
    assert!(message.contains("the kustomize worker died during this build"), "{message}");
    assert!(message.contains("exit status: 2"), "{message}");
    assert!(message.contains("fatal error: unexpected signal"), "{message}");
}

#[test]
fn a_hung_worker_is_killed_at_the_build_timeout() {
    let bin = tempfile::tempdir().unwrap();
    let script = stand_in_worker(bin.path(), "exec sleep 3600");
    let mut kustomize = Kustomize::library_in(&script, &library_path(), TIMEOUT).unwrap();
    kustomize.timeout = Duration::from_secs(1);
    let root = source();
    let error = kustomize.build(&root.path().join("apps"), root.path(), &CancelToken::new()).unwrap_err();
    let BuildError::Limit(message) = error else { panic!("{error:?}") };
    assert!(message.contains("timed out after 1s"), "{message}");
    assert!(!fixture::process_running(script.to_str().unwrap()), "the hung worker was left running");
}

#[test]
fn cancelling_kills_a_worker_in_the_middle_of_a_build() {
    let bin = tempfile::tempdir().unwrap();
    let mark = bin.path().join("building");
    let script = stand_in_worker(bin.path(), &format!("touch {}\nexec sleep 3600", mark.display()));
    let mut kustomize = Kustomize::library_in(&script, &library_path(), TIMEOUT).unwrap();
    kustomize.landlock = false; // the stand-in writes its mark
    let root = source();
    let cancel = CancelToken::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            fixture::wait_for("the worker to start the build", fixture::WAIT, || mark.exists());
            cancel.cancel(CancelReason::Superseded);
        })
    };
    let result = kustomize.build(&root.path().join("apps"), root.path(), &cancel);
    canceller.join().unwrap();
    assert_eq!(result, Err(BuildError::Cancelled(CancelReason::Superseded)));
}

/// A worker crashes in the middle of a build; the render goes on: that Kustomization fails with
/// the crash, every other renders.
#[test]
fn a_worker_crash_fails_one_kustomization_never_the_render() {
    let bin = tempfile::tempdir().unwrap();
    let mark = |name: &str| bin.path().join(name);
    let (started, armed, crashed) = (mark("started"), mark("armed"), mark("crashed"));
    let real = fixture::fluxplan_bin();
    let script = bin.path().join("worker");
    // The probe (confined: it may run nothing else) only waits for a greeting; then workers are
    // real ones, until the test arms the stand-in: the next worker started greets, takes a
    // request and dies.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nhello() {{ printf 'V\\000\\000\\000\\000\\000\\000\\000\\004fake'; }}\n\
             if [ -e {armed} ] && [ ! -e {crashed} ]; then\n\
             \x20 hello; head -c 9 >/dev/null; touch {crashed}; echo 'panic: boom' >&2; exit 2\nfi\n\
             if [ -e {started} ]; then exec {real} \"$@\"; fi\nhello\ncat >/dev/null\n",
            armed = armed.display(),
            crashed = crashed.display(),
            started = started.display(),
            real = real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut kustomize = Kustomize::library_in(&script, &library_path(), TIMEOUT).unwrap();
    kustomize.landlock = false; // the stand-in writes its mark
    std::fs::write(&started, "").unwrap();
    let repo = counted_fleet();
    let renderer = Renderer::from_kustomize(kustomize);
    let mut opts = repo.options(Some("HEAD"));
    opts.jobs = 1;
    assert!(renderer.render(&opts).unwrap().kustomizations().all(|(_, k)| k.status == Status::Rendered));
    // Only app `a` changes: its build is the only one to run, on a new worker (a new export).
    repo.write(
        "apps/a/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a2\n  namespace: default\n",
    );
    repo.commit("change a");
    std::fs::write(&armed, "").unwrap();
    let render = renderer.render(&opts).unwrap();
    assert!(crashed.exists(), "the stand-in never crashed");
    let failed: Vec<_> = render.kustomizations().filter(|(_, k)| k.status == Status::Failed).collect();
    assert_eq!(failed.iter().map(|(_, k)| k.name.as_str()).collect::<Vec<_>>(), ["a"]);
    let message = &failed[0].1.error.as_ref().unwrap().message;
    assert!(
        message.contains("the kustomize worker died during this build") && message.contains("panic: boom"),
        "{message}"
    );
    assert_eq!(render.kustomizations().filter(|(_, k)| k.status == Status::Rendered).count(), 4);
}

/// A bootstrap root, two apps, and two Kustomizations (one per cluster directory) that build the
/// same path with the same spec: five Kustomizations, four distinct builds.
fn counted_fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    let kustomization = |name: &str, path: &str| {
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\n\
             spec:\n  interval: 10m\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
        )
    };
    for app in ["a", "b"] {
        repo.write(&format!("clusters/prod/{app}.yaml"), &kustomization(app, &format!("./apps/{app}")));
        repo.write(
            &format!("apps/{app}/kustomization.yaml"),
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../base\n- cm.yaml\n",
        );
        repo.write(
            &format!("apps/{app}/cm.yaml"),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {app}\n  namespace: default\n"),
        );
    }
    repo.write("apps/base/kustomization.yaml", "resources:\n- ns.yaml\n");
    repo.write("apps/base/ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shared\n");
    repo.write("clusters/prod/shared.yaml", &kustomization("shared", "./apps/shared"));
    repo.write("clusters/prod/shared-again.yaml", &kustomization("shared-again", "./apps/shared"));
    repo.write(
        "apps/shared/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: default\n",
    );
    repo.commit("fleet");
    repo
}

#[test]
fn kustomize_runs_once_per_kustomization_and_build_inputs() {
    let repo = counted_fleet();
    let mut opts: RenderOptions = repo.options(Some("HEAD"));
    opts.jobs = 4; // parallel builds must not run the same inputs twice
    let renderer = Renderer::new(TIMEOUT, None).unwrap();
    let render = renderer.render(&opts).unwrap();
    assert_eq!(render.kustomizations().count(), 5);
    assert!(render.kustomizations().all(|(_, k)| k.status == Status::Rendered));
    // flux-system, a, b, and apps/shared once for both Kustomizations that build it.
    let runs = render.stats.builds - render.stats.cache_hits;
    assert_eq!(runs, 4, "{:?}", render.stats);
    // The same revision again (a plan's head equal to its base): nothing runs.
    let again = renderer.render(&opts).unwrap();
    assert_eq!(again.stats.builds - again.stats.cache_hits, 0, "{:?}", again.stats);
}

/// The homelab layout: `apps` patches every child Kustomization it renders (here with kustomize
/// patches of its own and a target namespace), so a child's spec as written builds differently
/// from the spec Flux applies. Only the applied spec is built.
#[test]
fn a_child_its_parent_patches_is_built_once_with_the_parents_patches() {
    let repo = Repo::bootstrap("prod");
    repo.write(
        "clusters/prod/apps.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\n\
         spec:\n  interval: 10m\n  path: ./apps\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n\
         \x20 patches:\n  - target:\n      kind: Kustomization\n    patch: |\n      apiVersion: kustomize.toolkit.fluxcd.io/v1\n\
         \x20     kind: Kustomization\n      metadata:\n        name: _\n      spec:\n        targetNamespace: patched\n\
         \x20       patches:\n        - target:\n            kind: ConfigMap\n          patch: |\n            - op: add\n\
         \x20             path: /metadata/labels\n              value: {patched: \"yes\"}\n",
    );
    repo.write("apps/kustomization.yaml", "resources:\n- a/ks.yaml\n- b/ks.yaml\n");
    for app in ["a", "b"] {
        repo.write(
            &format!("apps/{app}/ks.yaml"),
            &format!(
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {app}\n  namespace: flux-system\n\
                 spec:\n  interval: 10m\n  path: ./apps/{app}/app\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
            ),
        );
        repo.write(&format!("apps/{app}/app/kustomization.yaml"), "resources:\n- cm.yaml\n");
        repo.write(
            &format!("apps/{app}/app/cm.yaml"),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {app}\n"),
        );
    }
    repo.commit("patched children");
    let render = Renderer::new(TIMEOUT, None).unwrap().render(&repo.options(Some("HEAD"))).unwrap();
    let names: Vec<String> = render.kustomizations().map(|(_, k)| k.name.clone()).collect();
    assert_eq!(names, ["a", "apps", "b", "flux-system"]);
    assert!(render.kustomizations().all(|(_, k)| k.status == Status::Rendered));
    for app in ["a", "b"] {
        let built = &render.find(&format!("flux-system/{app}")).unwrap().objects[0].object;
        assert_eq!(built["metadata"]["namespace"], "patched", "{built}");
        assert_eq!(built["metadata"]["labels"]["patched"], "yes", "{built}");
    }
    assert_eq!(render.stats.builds - render.stats.cache_hits, 4, "{:?}", render.stats);
}

#[test]
fn an_answer_over_the_output_limit_is_refused_and_the_next_build_gets_a_new_worker() {
    let mut kustomize = library_kustomize();
    let root = source();
    let apps = root.path().join("apps");
    kustomize.max_output = 10;
    let error = kustomize.build(&apps, root.path(), &CancelToken::new()).unwrap_err();
    let BuildError::Limit(message) = error else { panic!("{error:?}") };
    assert!(message.contains("more than 10 bytes"), "{message}");
    kustomize.max_output = 1024 * 1024;
    let output = kustomize.build(&apps, root.path(), &CancelToken::new()).unwrap();
    assert!(output.contains("name: app"), "{output}");
}

#[test]
fn a_kustomize_error_from_the_library_is_kustomizes_message() {
    let kustomize = library_kustomize();
    let root = source();
    std::fs::write(
        root.path().join("apps/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- missing.yaml\n",
    )
    .unwrap();
    let error = kustomize.build(&root.path().join("apps"), root.path(), &CancelToken::new()).unwrap_err();
    let BuildError::Failed(message) = error else { panic!("{error:?}") };
    assert!(message.contains("missing.yaml"), "{message}");
    assert!(!message.contains("worker"), "a kustomize error is not a worker failure: {message}");
}

/// `fluxplan build` of the example fleet with `env`; returns stdout, stderr and the exit code.
fn build_cli(env: &[(&str, &str)]) -> (String, String, i32) {
    build_cli_with(&[], env)
}

/// `fluxplan build` of the example fleet with more arguments and `env`.
fn build_cli_with(args: &[&str], env: &[(&str, &str)]) -> (String, String, i32) {
    let fleet = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet");
    let out = std::process::Command::new(fixture::fluxplan_bin())
        .args(["build", "--no-cache", "--format", "json", "--repo"])
        .arg(&fleet)
        .args(args)
        .env_remove(library::LIB_ENV)
        .env_remove("FLUXPLAN_KUSTOMIZE")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (text(out.stdout), text(out.stderr), out.status.code().unwrap())
}

#[test]
fn without_the_library_the_binary_builds_and_says_why_once() {
    let empty = tempfile::tempdir().unwrap();
    let (stdout, stderr, code) = build_cli(&[("XDG_CACHE_HOME", empty.path().to_str().unwrap())]);
    assert_eq!(code, 0, "{stderr}");
    let render: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let engine = render["kustomize"].as_str().unwrap();
    assert!(!engine.starts_with("kustomize library"), "{engine}");
    // One plain line, no log timestamp or level; the render's JSON on stdout is untouched.
    let expected = format!(
        "fluxplan: kustomize library not found at {}; using `kubectl kustomize` (slower): run \
         scripts/fetch-kustomize-lib.sh or set FLUXPLAN_KUSTOMIZE_LIB\n",
        library::default_path_under(empty.path()).display()
    );
    assert_eq!(stderr, expected);
    assert!(!stdout.contains("kustomize library not found"), "{stdout}");
    // More only with -v; nothing with -q.
    let (_, verbose, code) = build_cli_with(&["-v"], &[("XDG_CACHE_HOME", empty.path().to_str().unwrap())]);
    assert_eq!(code, 0, "{verbose}");
    assert_eq!(verbose.matches("kustomize library not found").count(), 1, "{verbose}");
    assert!(verbose.contains("FLUXPLAN_KUSTOMIZE_LIB=off uses the binary without this note"), "{verbose}");
    let (_, quiet, code) =
        build_cli_with(&["--quiet"], &[("XDG_CACHE_HOME", empty.path().to_str().unwrap())]);
    assert_eq!((code, quiet.as_str()), (0, ""));
    // Once per process, though a plan renders two revisions.
    let repo = Repo::bootstrap("prod");
    repo.commit("base");
    repo.config_map("clusters/prod/cm.yaml", "cm", "default");
    repo.commit("head");
    let out = std::process::Command::new(fixture::fluxplan_bin())
        .args(["plan", "--no-cache", "--base", "HEAD~1", "--head", "HEAD", "--format", "json", "--repo"])
        .arg(repo.path())
        .env_remove(library::LIB_ENV)
        .env_remove("FLUXPLAN_KUSTOMIZE")
        .env("XDG_CACHE_HOME", empty.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.matches("kustomize library not found").count(), 1, "{stderr}");

    // Turned off: the binary, without a word.
    let (stdout, stderr, code) = build_cli(&[(library::LIB_ENV, "off")]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("kustomize library"), "{stderr}");
    assert!(!serde_json::from_str::<serde_json::Value>(&stdout).unwrap()["kustomize"]
        .as_str()
        .unwrap()
        .starts_with("kustomize library"));

    // Installed: the library, named in the render.
    let (stdout, stderr, code) = build_cli(&[(library::LIB_ENV, library_path().to_str().unwrap())]);
    assert_eq!(code, 0, "{stderr}");
    let render: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(render["kustomize"], "kustomize library v0.21.3 (pykustomize-v0.1.4)");
}

#[test]
fn a_named_library_that_does_not_work_is_an_error_never_a_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_library = dir.path().join("libpykustomize.so");
    std::fs::write(&not_a_library, "not an ELF file").unwrap();
    for path in [dir.path().join("missing.so"), not_a_library] {
        let (_, stderr, code) = build_cli(&[(library::LIB_ENV, path.to_str().unwrap())]);
        assert_eq!(code, 3, "{stderr}");
        assert!(
            stderr.contains(&format!("{}={} does not work", library::LIB_ENV, path.display())),
            "{stderr}"
        );
    }
}

#[test]
fn builds_waiting_on_a_failed_build_of_the_same_inputs_share_its_error() {
    let repo = counted_fleet();
    // `shared` and `shared-again` build the same inputs; the stand-in fails that build, naming
    // its own process, and runs the real kustomize for every other one.
    repo.write("apps/shared/fail", "");
    repo.commit("a build that fails");
    let bin = tempfile::tempdir().unwrap();
    let kubectl = fluxplan::sandbox::resolve_program("kubectl").expect("kubectl is needed for this test");
    let build = format!(
        "if [ -e \"$2/fail\" ]; then echo \"failed in process $$\" >&2; exit 1; fi\nshift\nexec {} kustomize \"$@\"",
        kubectl.display()
    );
    let script = fixture::stand_in_kustomize(bin.path(), &build);
    let mut opts: RenderOptions = repo.options(Some("HEAD"));
    opts.jobs = 4;
    let render = Renderer::with_kustomize(script.to_str().unwrap(), TIMEOUT).unwrap().render(&opts).unwrap();
    let error_of = |name: &str| {
        let k = render.find(&format!("flux-system/{name}")).unwrap();
        assert_eq!(k.status, Status::Failed, "{name}");
        k.error.as_ref().unwrap().message.clone()
    };
    let (first, second) = (error_of("shared"), error_of("shared-again"));
    assert!(first.contains("failed in process"), "{first}");
    // One run: the same process's error for both.
    assert_eq!(first, second);
}

#[test]
fn a_library_at_the_default_place_that_is_not_the_pinned_one_is_never_loaded() {
    // Something else where the fetch script puts the library: refused, the binary builds.
    let cache = tempfile::tempdir().unwrap();
    let lib = library::default_path_under(cache.path());
    std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
    std::fs::copy("/bin/true", &lib).unwrap();
    let (stdout, stderr, code) = build_cli(&[("XDG_CACHE_HOME", cache.path().to_str().unwrap())]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.starts_with(&format!("fluxplan: kustomize library at {} cannot be used (", lib.display())),
        "{stderr}"
    );
    // Why, on the same line, without -v.
    let note = stderr.lines().next().unwrap();
    assert!(note.contains("is not the pinned library") && note.contains("; using"), "{stderr}");
    let render: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(!render["kustomize"].as_str().unwrap().starts_with("kustomize library"), "{render:#}");
}

#[test]
fn the_fetch_script_and_the_binary_pin_the_same_library() {
    let script =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-kustomize-lib.sh"))
            .unwrap();
    assert!(script.contains(&format!("lib_sha256={}", library::PINNED_SHA256)), "{script}");
}

/// The probe that learns the library's version runs once per library and worker program: later
/// processes read it from the stamp beside the library, until either file changes.
#[test]
fn the_library_is_probed_once_per_library_and_program() {
    let dir = tempfile::tempdir().unwrap();
    let library = dir.path().join("libpykustomize.so");
    std::fs::copy(library_path(), &library).unwrap();
    // The probe may read only the library's directory: the switch that breaks it lies there.
    let broken = dir.path().join("broken");
    let script = dir.path().join("worker");
    let greeting = |version: &str| {
        format!(
            "#!/bin/sh
[ -e {} ] && exit 1
printf 'V\\000\\000\\000\\000\\000\\000\\000\\004{version}'
cat >/dev/null
",
            broken.display()
        )
    };
    let write_script = |text: String| {
        let _ = std::fs::remove_file(&script);
        std::fs::write(&script, text).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    write_script(greeting("fake"));
    let first = Kustomize::library_in(&script, &library, TIMEOUT).unwrap();
    assert!(first.version.ends_with("(fake)"), "{}", first.version);
    // A probe now would fail: the next start does not probe, it reads the stamp.
    std::fs::write(&broken, "").unwrap();
    let second = Kustomize::library_in(&script, &library, TIMEOUT).unwrap();
    assert_eq!(second.version, first.version);
    // Another worker program is probed again (and fails, being broken).
    write_script(greeting("fak2"));
    assert!(Kustomize::library_in(&script, &library, TIMEOUT).is_err());
    std::fs::remove_file(&broken).unwrap();
    let third = Kustomize::library_in(&script, &library, TIMEOUT).unwrap();
    assert!(third.version.ends_with("(fak2)"), "{}", third.version);
}

/// The allocator runs without transparent huge pages (see src/main.rs): mimalloc's own report of
/// its options at start-up names the option fluxplan sets, so a wrong option number shows here.
#[test]
fn the_allocator_runs_without_transparent_huge_pages() {
    let out = std::process::Command::new(fixture::fluxplan_bin())
        .arg("--version")
        .env("MIMALLOC_VERBOSE", "1")
        .output()
        .expect("fluxplan runs");
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(report.contains("option 'allow_thp': 0"), "{report}");
}
