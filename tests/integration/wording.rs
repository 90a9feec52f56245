//! What failing inputs read like in every output format: no message says the same words twice
//! in a row ("kustomize build failed: kustomize build failed"), and the progress line on a
//! terminal ends at its total, failed Kustomizations counted.

use crate::cli_output::on_a_terminal;
use crate::fixture::{fluxplan_bin, Repo};
use std::process::Command;

/// A fleet whose Kustomizations fail every way a build can: kustomize itself (a patch that does
/// not apply), a missing resource, a missing path, a chart template (a required value), a chart
/// whose Chart.yaml is not YAML; one renders. The base policy is not YAML either.
fn failing_fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    let kustomization = |name: &str, path: &str| {
        repo.kustomization(&format!("clusters/prod/{name}.yaml"), name, path, "");
    };
    kustomization("good", "./apps/good");
    kustomization("patch", "./apps/patch");
    kustomization("missing", "./apps/missing");
    kustomization("nowhere", "./apps/nowhere");
    kustomization("charts", "./apps/charts");
    repo.config_map("apps/good/settings.yaml", "good", "default");
    repo.config_map("apps/patch/settings.yaml", "patched", "default");
    repo.write(
        "apps/patch/kustomization.yaml",
        "resources:\n- settings.yaml\npatches:\n- target: {kind: ConfigMap}\n  patch: |-\n    - op: replace\n      \
         path: /data/nope/deeper\n      value: x\n",
    );
    repo.write("apps/missing/kustomization.yaml", "resources:\n- missing.yaml\n");
    for (chart, chart_yaml) in
        [("required", "apiVersion: v2\nname: required\nversion: 0.1.0\n"), ("broken", "name: [\n")]
    {
        repo.write(
            &format!("apps/charts/{chart}.yaml"),
            &format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {chart}\n  namespace: \
                 default\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: ./charts/{chart}\n      sourceRef:\n        \
                 kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n"
            ),
        );
        repo.write(&format!("charts/{chart}/Chart.yaml"), chart_yaml);
    }
    repo.write(
        "charts/required/templates/settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: required\ndata:\n  a: {{ required \"value x is required\" .Values.x }}\n",
    );
    repo.write(".fluxplan.yaml", "alerts: [oops\n");
    repo.commit("base");
    repo.git(&["checkout", "-q", "-b", "change"]);
    repo.config_map("apps/good/settings.yaml", "good", "other");
    repo.write("apps/missing/kustomization.yaml", "resources:\n- missing.yaml\n- gone.yaml\n");
    repo.commit("change");
    repo
}

/// Runs fluxplan with `args`; returns stdout and stderr.
fn run(repo: &Repo, args: &[&str]) -> (String, String) {
    let out = Command::new(fluxplan_bin())
        .args(args)
        .arg("--no-cache")
        .arg("--repo")
        .arg(repo.path())
        .output()
        .unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (text(out.stdout), text(out.stderr))
}

/// The first phrase of three or more words said twice back to back, case and punctuation aside;
/// numbers and symbols are no words (a table's `| 0 | 0 | 0 |`).
fn doubled_phrase(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
        .filter(|w| w.chars().any(char::is_alphabetic))
        .collect();
    (3..=words.len() / 2).find_map(|n| {
        words.windows(2 * n).find(|pair| pair[..n] == pair[n..]).map(|pair| pair[..n].join(" "))
    })
}

/// Each message of a JSON document: its strings, one at a time.
fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

fn assert_said_once(what: &str, text: &str) {
    assert_eq!(doubled_phrase(text), None, "{what} repeats itself:\n{text}");
}

#[test]
fn wording_a_doubled_phrase_is_found_and_a_near_miss_is_not() {
    assert_eq!(
        doubled_phrase("error: kustomize build failed: kustomize build\n    failed: replace operation")
            .as_deref(),
        Some("kustomize build failed")
    );
    assert_eq!(
        doubled_phrase("cannot read policy: Cannot read policy x").as_deref(),
        Some("cannot read policy")
    );
    // Near misses: two words twice, the same words apart, and a table of numbers.
    assert_eq!(doubled_phrase("build failed: build failed at line 3"), None);
    assert_eq!(doubled_phrase("kustomize build failed: replace kustomize build failed"), None);
    assert_eq!(doubled_phrase("| a | 0 | 0 | 0 | 0 | 0 | 0 |"), None);
}

#[test]
fn wording_failing_builds_say_each_failure_once_in_every_format() {
    let repo = failing_fleet();
    let mut seen = String::new();
    let build = |format| vec!["build", "--rev", "change", "--format", format];
    let plan = |format| vec!["plan", "--base", "main", "--head", "change", "--format", format];
    let runs = [build("json"), build("yaml"), build("ids"), plan("text"), plan("markdown"), plan("json")];
    for args in runs {
        let (stdout, stderr) = run(&repo, &args);
        let what = args.join(" ");
        assert_said_once(&format!("{what} (stderr)"), &stderr);
        if args.last() == Some(&"json") {
            let mut messages = Vec::new();
            strings(&serde_json::from_str(&stdout).unwrap(), &mut messages);
            messages.iter().for_each(|m| assert_said_once(&what, m));
        } else {
            assert_said_once(&what, &stdout);
        }
        seen.push_str(&stdout);
        seen.push_str(&stderr);
    }
    // Each failure was met, and helm's advice to pass it --debug, which no reader can, is gone.
    for failure in [
        "doc is missing path: /data/nope/deeper",
        "'missing.yaml'",
        "'./apps/nowhere'",
        "value x is required",
        "cannot load Chart.yaml",
        ".fluxplan.yaml at base is invalid",
    ] {
        assert!(seen.contains(failure), "{failure} not reported:\n{seen}");
    }
    assert!(!seen.contains("--debug"), "{seen}");

    // A plan that cannot start (a revision git does not have, a policy file that is a
    // directory) says why once.
    for (args, why) in [
        (&["plan", "--base", "nosuch", "--head", "change", "--format", "text"][..], "revision 'nosuch'"),
        (&["plan", "--base", "main", "--head", "change", "--policy", "/"][..], "cannot read policy /"),
        (&["build", "--rev", "nosuch"][..], "revision 'nosuch'"),
    ] {
        let (stdout, stderr) = run(&repo, args);
        let said = format!("{stdout}\n{stderr}");
        assert!(said.contains(why), "{said}");
        assert_said_once(&args.join(" "), &said);
    }
}

/// The progress lines a terminal was shown: `(done, total)` of each `rendering N/M
/// Kustomizations`, in order.
fn progress_lines(screen: &str) -> Vec<(usize, usize)> {
    let line = regex::Regex::new(r"rendering (\d+)/(\d+) Kustomizations").unwrap();
    line.captures_iter(screen).map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap())).collect()
}

#[test]
fn wording_the_progress_line_on_a_terminal_ends_at_its_total_failures_counted() {
    let repo = failing_fleet();
    let screen =
        on_a_terminal(&["build", "--no-cache", "--rev", "change", "--repo", repo.path().to_str().unwrap()]);
    let lines = progress_lines(&screen);
    // flux-system, good, patch, missing, nowhere, charts: three of them fail, and count.
    assert_eq!(lines.last(), Some(&(6, 6)), "{screen:?}");
    assert!(lines.iter().all(|&(done, total)| done <= total && total <= 6), "{lines:?}");
}
