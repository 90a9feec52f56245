//! What the binary says besides its output, through the real binary: the global `--color`,
//! `--quiet` and `--verbose` flags, the progress line, byte sizes with units, bare repositories
//! and `--repo` below a work tree's top.

use crate::fixture::{fluxplan_bin, Repo};
use std::path::Path;
use std::process::Command;

/// Runs the binary with a clean colour and log environment plus `env`; returns stdout, stderr
/// and the exit code.
pub(crate) fn run(args: &[&str], env: &[(&str, &str)]) -> (String, String, i32) {
    run_in(None, args, env)
}

fn run_in(dir: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> (String, String, i32) {
    let mut cmd = Command::new(fluxplan_bin());
    cmd.args(args)
        .env_remove("FLUXPLAN_COLOR")
        .env_remove("NO_COLOR")
        .env_remove("FLUXPLAN_LOG")
        .envs(env.iter().copied());
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let out = cmd.output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (text(out.stdout), text(out.stderr), out.status.code().unwrap())
}

/// A fleet whose head changes a ConfigMap and adds a Kustomization file no root reaches (a
/// warning on stderr).
fn changed_fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "settings", "default");
    repo.commit("base");
    repo.config_map("apps/cm.yaml", "renamed", "default");
    repo.kustomization("stray/ks.yaml", "stray", "./apps", "");
    repo.commit("head");
    repo
}

fn plan_text<'a>(repo: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["plan", "--no-cache", "--base", "HEAD~1", "--head", "HEAD", "--repo", repo];
    args.extend(extra);
    args
}

const ESC: &str = "\x1b[";

#[test]
fn color_flag_and_env_decide_the_colour_of_the_plan_text() {
    let repo = changed_fleet();
    let dir = repo.path().to_str().unwrap();
    // A pipe is not a terminal: no colour unless asked.
    let (plain, stderr, code) = run(&plan_text(dir, &[]), &[]);
    assert_eq!(code, 1, "{plain}\n{stderr}");
    assert!(!plain.contains(ESC), "{plain}");
    let (forced, _, _) = run(&plan_text(dir, &["--color", "always"]), &[]);
    assert!(forced.contains(ESC), "{forced}");
    // The environment's choice, and the flag over it; an explicit choice wins over NO_COLOR.
    let (by_env, _, _) = run(&plan_text(dir, &[]), &[("FLUXPLAN_COLOR", "always")]);
    assert!(by_env.contains(ESC), "{by_env}");
    let (flag_wins, _, _) = run(&plan_text(dir, &["--color=never"]), &[("FLUXPLAN_COLOR", "always")]);
    assert!(!flag_wins.contains(ESC), "{flag_wins}");
    let (no_color, _, _) = run(&plan_text(dir, &["--color", "always"]), &[("NO_COLOR", "1")]);
    assert!(no_color.contains(ESC), "{no_color}");
    let (bad, stderr, code) = run(&plan_text(dir, &["--color", "sometimes"]), &[]);
    assert_eq!(code, 3, "{bad}{stderr}");
    assert!(stderr.contains("auto") && stderr.contains("always") && stderr.contains("never"), "{stderr}");
}

#[test]
fn quiet_leaves_only_errors_on_stderr_and_verbose_says_more() {
    let repo = changed_fleet();
    let dir = repo.path().to_str().unwrap();
    let build = |extra: &[&str]| {
        let mut args = vec!["build", "--no-cache", "--format", "ids", "--repo", dir];
        args.extend(extra);
        run(&args, &[])
    };
    let (ids, stderr, code) = build(&[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("warning: stray/ks.yaml: Kustomization stray is not reached"), "{stderr}");
    // Global: before or after the subcommand, long or short.
    for quiet in [&["-q"][..], &["--quiet"]] {
        let (quiet_ids, quiet_err, quiet_code) = build(quiet);
        assert_eq!((quiet_code, quiet_err.as_str()), (0, ""), "{quiet:?}");
        assert_eq!(quiet_ids, ids, "the output is the same");
    }
    let (_, stderr, code) = run(&["-q", "build", "--no-cache", "--repo", dir], &[]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    // Errors are still said.
    let missing = repo.path().join("no-such-dir");
    let (_, stderr, code) = run(&["build", "-q", "--repo", missing.to_str().unwrap()], &[]);
    assert_eq!(code, 3);
    assert!(stderr.starts_with("error: "), "{stderr}");
    let (_, stderr, code) = run(
        &["plan", "-q", "--format", "json", "--base", "no-such-rev", "--head", "HEAD", "--repo", dir],
        &[],
    );
    assert_eq!(code, 3);
    assert!(stderr.contains("error: ") && stderr.contains("no-such-rev"), "{stderr}");

    // -v: fluxplan's own info logs; -vv: its debug logs; added to FLUXPLAN_LOG.
    let (_, stderr, code) = build(&["-v"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("render finished"), "{stderr}");
    assert!(!stderr.contains("DEBUG"), "{stderr}");
    let (_, stderr, _) = build(&["-vv"]);
    assert!(stderr.contains("DEBUG"), "{stderr}");
    let (_, stderr, _) =
        run(&["build", "--no-cache", "--format", "ids", "--repo", dir], &[("FLUXPLAN_LOG", "info")]);
    assert!(stderr.contains("render finished"), "FLUXPLAN_LOG still works: {stderr}");
    // Logs on stderr are coloured only when asked.
    assert!(!stderr.contains(ESC), "{stderr}");
    let (_, stderr, _) = build(&["-v", "--color", "always"]);
    assert!(stderr.contains(ESC), "{stderr}");

    // Both at once is a usage error.
    let (_, stderr, code) = build(&["-q", "-v"]);
    assert_eq!(code, 3);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn every_command_takes_the_global_flags() {
    for command in ["build", "plan", "snapshot", "serve", "migrate", "demo"] {
        let (help, stderr, code) = run(&[command, "--help"], &[]);
        assert_eq!(code, 0, "{command}: {stderr}");
        for flag in ["--color <COLOR>", "-q, --quiet", "-v, --verbose...", "FLUXPLAN_COLOR"] {
            assert!(help.contains(flag), "{command} --help lacks {flag}:\n{help}");
        }
    }
}

/// Runs `fluxplan ARGS` on a terminal (`script` gives it one), its stdout thrown away; returns
/// what it drew on the terminal.
pub(crate) fn on_a_terminal(args: &[&str]) -> String {
    let quoted: Vec<String> = std::iter::once(fluxplan_bin().display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    let out = Command::new("script")
        .args(["-qec", &format!("{} >/dev/null", quoted.join(" ")), "/dev/null"])
        .env_remove("FLUXPLAN_LOG")
        .output()
        .expect("script (util-linux) runs a command on a terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_progress_line_names_base_and_head_on_a_terminal_and_is_never_in_a_pipe() {
    let repo = changed_fleet();
    let dir = repo.path().to_str().unwrap();
    let args = plan_text(dir, &["--format", "json"]);
    // A pipe (a CI log): not a character of progress.
    let (_, stderr, _) = run(&args, &[]);
    assert!(!stderr.contains("rendering") && !stderr.contains('\r') && !stderr.contains(ESC), "{stderr:?}");
    // A terminal: one line, each revision named with its count and total.
    let drawn = on_a_terminal(&args);
    let last = drawn
        .split(['\r', '\n'])
        .rfind(|line| line.contains("rendering base"))
        .unwrap_or_else(|| panic!("no progress line: {drawn:?}"));
    // (Lines drawn in a burst may be skipped: the counts reached vary, the totals do not.)
    assert!(last.contains("/2, head ") && last.contains("/3 Kustomizations"), "{drawn:?}");
    // The line is cleared when the renders end.
    assert!(drawn.trim_end().ends_with("\x1b[2K"), "{drawn:?}");
    // --quiet: none.
    let mut quiet = args.clone();
    quiet.push("-q");
    let drawn = on_a_terminal(&quiet);
    assert!(!drawn.contains("rendering"), "{drawn:?}");
    // `build` renders one revision: not labelled.
    let drawn = on_a_terminal(&["build", "--no-cache", "--repo", dir]);
    assert!(drawn.split('\r').any(|line| line.contains("/3 Kustomizations")), "{drawn:?}");
    assert!(drawn.contains("rendering ") && !drawn.contains("base") && !drawn.contains("head"), "{drawn:?}");
}

#[test]
fn byte_sizes_take_units_on_the_command_line_and_in_the_environment() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "settings", "default");
    // 1,500 bytes: over 1KiB and 1kB, under 2KiB.
    repo.write("apps/big.txt", &"x".repeat(1500));
    repo.commit("init");
    let dir = repo.path().to_str().unwrap();
    let build = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["build", "--no-cache", "--format", "ids", "--repo", dir];
        args.extend(extra);
        run(&args, env)
    };
    let left_out = |stderr: &str| stderr.contains("source-limit") && stderr.contains("big.txt");
    for (extra, env) in [
        (&["--max-file-size", "1KiB"][..], &[][..]),
        (&["--max-file-size=1kB"], &[]),
        (&["--max-file-size", "1024"], &[]),
        (&[], &[("FLUXPLAN_MAX_FILE_SIZE", "1 KiB")]),
        (&[], &[("FLUXPLAN_MAX_FILE_SIZE", "0.001MiB")]),
    ] {
        let (_, stderr, code) = build(extra, env);
        assert_eq!(code, 1, "{extra:?} {env:?}: {stderr}");
        assert!(left_out(&stderr), "{extra:?} {env:?}: {stderr}");
    }
    for (extra, env) in
        [(&["--max-file-size", "2KiB"][..], &[][..]), (&[], &[("FLUXPLAN_MAX_FILE_SIZE", "2Ki")])]
    {
        let (_, stderr, code) = build(extra, env);
        assert_eq!(code, 0, "{extra:?} {env:?}: {stderr}");
        assert!(!left_out(&stderr), "{stderr}");
    }
    let (_, stderr, code) = build(&["--max-source-bytes", "1KiB"], &[]);
    assert_eq!(code, 3, "{stderr}");
    // A size that is not one: the forms accepted, for every flag and variable that takes one.
    for (extra, env) in [
        (&["--max-file-size", "10XB"][..], &[][..]),
        (&["--max-source-bytes", "lots"], &[]),
        (&[], &[("FLUXPLAN_MAX_SOURCE_BYTES", "-1")]),
    ] {
        let (_, stderr, code) = build(extra, env);
        assert_eq!(code, 3, "{extra:?} {env:?}: {stderr}");
        assert!(
            stderr.contains(
                "is not a size: expected a number of bytes (1048576) or one with a unit: 512KiB, 10MiB, 1GiB"
            ),
            "{stderr}"
        );
    }
    for flag in ["--max-unverified-bytes", "--max-unverified-bytes-per-client", "--min-body-rate"] {
        let (_, stderr, code) = run(&["serve", flag, "12 parsecs"], &[]);
        assert_eq!(code, 3, "{flag}: {stderr}");
        assert!(stderr.contains("is not a size"), "{flag}: {stderr}");
    }
    // Defaults are shown in units.
    let (help, _, _) = run(&["serve", "--help"], &[]);
    for default in
        ["[default: 10MiB]", "[default: 512MiB]", "[default: 1GiB]", "[default: 32MiB]", "[default: 256KiB]"]
    {
        assert!(help.contains(default), "{default}: {help}");
    }
}

#[test]
fn a_bare_repository_without_rev_is_named_so_with_the_revision_to_give() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "settings", "default");
    repo.commit("init");
    repo.git(&["branch", "-m", "trunk"]);
    let scratch = tempfile::tempdir().unwrap();
    let bare = scratch.path().join("fleet.git");
    let status =
        Command::new("git").args(["clone", "-q", "--bare"]).arg(repo.path()).arg(&bare).status().unwrap();
    assert!(status.success());
    let shown = bare.to_str().unwrap();
    let (stdout, stderr, code) = run(&["build", "--no-cache", "--repo", shown], &[]);
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "error: {shown} is a bare git repository: it has no working tree to render; name a revision: --rev \
             trunk (the branch its HEAD points to)\n"
        )
    );
    // Named, it renders.
    let (ids, stderr, code) =
        run(&["build", "--no-cache", "--format", "ids", "--rev", "trunk", "--repo", shown], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(ids.contains("# flux-system/apps"), "{ids}");
    // One with no commit yet: no branch to name.
    let empty = scratch.path().join("empty.git");
    assert!(Command::new("git").args(["init", "-q", "--bare"]).arg(&empty).status().unwrap().success());
    let (_, stderr, code) = run(&["build", "--repo", empty.to_str().unwrap()], &[]);
    assert_eq!(code, 3);
    assert!(stderr.contains("is a bare git repository") && stderr.contains("--rev BRANCH"), "{stderr}");
}

/// A repository laid out as many homelabs are: the bootstrap root includes `kubernetes/apps`,
/// whose apps each have a Kustomization with a path from the repository's root.
fn homelab() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./kubernetes/apps", "");
    repo.kustomization(
        "kubernetes/apps/default/echo/ks.yaml",
        "echo",
        "./kubernetes/apps/default/echo/app",
        "",
    );
    repo.write(
        "kubernetes/apps/default/echo/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ks.yaml\n",
    );
    repo.write(
        "kubernetes/apps/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- default/echo\n",
    );
    repo.config_map("kubernetes/apps/default/echo/app/cm.yaml", "echo", "default");
    repo.commit("base");
    repo.config_map("kubernetes/apps/default/echo/app/cm.yaml", "echo-renamed", "default");
    repo.commit("head");
    repo
}

#[test]
fn repo_below_the_top_is_refused_alike_by_build_and_plan_with_the_hint_alone() {
    let repo = homelab();
    let top = std::fs::canonicalize(repo.path()).unwrap();
    // Kept exports and the disk cache on, as users run it: every run says the same.
    let (cache, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = [("FLUXPLAN_WORKDIR", work.path().to_str().unwrap())];
    let cache_dir = cache.path().to_str().unwrap();
    let hint = format!(
        "kubernetes/apps is a subdirectory of the git repository at {top}: Flux reads a Kustomization's path \
         from the repository's root, and the path of flux-system/echo (./kubernetes/apps/default/echo/app) is \
         there, not under kubernetes/apps: try --repo {top}",
        top = top.display()
    );
    let in_top = |args: &[&str]| run_in(Some(repo.path()), args, &env);
    for round in 0..2 {
        let plan = [
            "plan",
            "--cache-dir",
            cache_dir,
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
            "--repo",
            "kubernetes/apps",
        ];
        let (stdout, stderr, code) = in_top(&[&plan[..], &["--format", "json"]].concat());
        assert_eq!(code, 3, "round {round}: {stdout}\n{stderr}");
        let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(json["verdict"], "failed");
        assert_eq!(json["error"], hint.as_str(), "round {round}");
        assert_eq!(json["alerts"], serde_json::json!([]), "round {round}");
        assert_eq!(stderr, format!("error: {hint}\n"), "round {round}");
        // The text report says it and nothing else.
        let (text, _, code) = in_top(&plan);
        assert_eq!(code, 3);
        assert_eq!(
            text,
            format!("fluxplan: COULD NOT PLAN — the plan could not be made\n{hint}\n"),
            "round {round}"
        );
        for rev in [None, Some("HEAD"), Some("HEAD~1")] {
            let mut build = vec!["build", "--cache-dir", cache_dir, "--repo", "kubernetes/apps"];
            build.extend(rev.iter().flat_map(|rev| ["--rev", *rev]));
            let (stdout, stderr, code) = in_top(&build);
            assert_eq!((code, stdout.as_str()), (3, ""), "{rev:?}: {stderr}");
            assert_eq!(stderr, format!("error: {hint}\n"), "{rev:?}");
        }
    }
    // From the top, the same plans.
    let (stdout, stderr, code) =
        in_top(&["plan", "--cache-dir", cache_dir, "--base", "HEAD~1", "--head", "HEAD"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("echo-renamed"), "{stdout}");
}

#[test]
fn a_fleet_in_a_subdirectory_of_a_repository_plans_from_there_every_time() {
    // A fleet whose paths are its own directory's (an artifact of that directory): rendered from
    // there, at any revision, with or without kept exports, as the same tree.
    let repo = Repo::new("git@github.com:acme/monorepo.git");
    repo.write("README.md", "the monorepo\n");
    repo.kustomization("fleet/clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("fleet/apps/cm.yaml", "settings", "default");
    repo.config_map("apps/cm.yaml", "outside-the-fleet", "default");
    repo.commit("base");
    repo.config_map("fleet/apps/cm.yaml", "renamed", "default");
    repo.write("README.md", "the monorepo, changed\n");
    repo.config_map("apps/cm.yaml", "outside-the-fleet-changed", "default");
    repo.commit("head");
    let fleet = repo.path().join("fleet");
    let (cache, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = [("FLUXPLAN_WORKDIR", work.path().to_str().unwrap())];
    let plan = |extra: &[&str]| {
        let mut args = vec!["plan", "--format", "json", "--base", "HEAD~1", "--head", "HEAD", "--repo"];
        args.push(fleet.to_str().unwrap());
        args.extend(extra);
        let (stdout, stderr, code) = run(&args, &env);
        assert_eq!(code, 1, "{stdout}\n{stderr}");
        let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let mut changes: Vec<String> = plan["kustomizations"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|k| k["changes"].as_array().unwrap())
            .map(|c| format!("{} {}", c["action"], c["id"]))
            .collect();
        changes.sort();
        (changes, plan)
    };
    let expected = vec![
        "\"create\" \"default_renamed__ConfigMap\"".to_string(),
        "\"delete\" \"default_settings__ConfigMap\"".to_string(),
    ];
    let cache_dir = cache.path().to_str().unwrap();
    for round in 0..3 {
        let (changes, plan) = plan(&["--cache-dir", cache_dir]);
        assert_eq!(changes, expected, "round {round}: {plan}");
        // Files outside the fleet are not the fleet's changes.
        assert!(!plan.to_string().contains("README.md"), "round {round}: {plan}");
    }
    assert_eq!(plan(&["--no-cache"]).0, expected);
}
