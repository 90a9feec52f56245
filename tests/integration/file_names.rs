//! A manifest added anywhere under a planned path is planned, whatever its name, unless the
//! controller leaves it out too. Property-tested over names a pull request could choose to hide
//! a file: dot-files, fluxplan's own prefixes, case and Unicode variants, the names Flux's default
//! source-ignore rules and kustomize treat specially.

use crate::fixture::{changes_of, plan_json, Repo};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::collections::BTreeSet;

/// Whole names Flux's default ignore rules leave out at any depth (source-controller's
/// `VCSPatterns` and `DefaultPatterns`, as gitignore patterns without a slash but the trailing one).
const IGNORED_ANYWHERE: &[&str] = &[
    ".gitignore",
    ".gitmodules",
    ".gitattributes",
    ".github",
    ".circleci",
    ".travis.yml",
    ".gitlab-ci.yml",
    "appveyor.yml",
    ".drone.yml",
    "cloudbuild.yaml",
    "codeship-services.yml",
    "codeship-steps.yml",
    ".goreleaser.yml",
    ".sops.yaml",
    ".flux.yaml",
];

/// The controller's own answer, written from its rules rather than from fluxplan's code: the
/// generated kustomization of a path lists every `.yaml`/`.yml` file below it (case-sensitive) of
/// the artifact, which holds every file but those the default ignore rules match.
fn controller_reads(components: &[String]) -> bool {
    let name = components.last().expect("a path has a name");
    (name.ends_with(".yaml") || name.ends_with(".yml"))
        && !components.iter().any(|c| IGNORED_ANYWHERE.contains(&c.as_str()))
}

/// One path component a pull request might choose.
fn component() -> impl Strategy<Value = String> {
    let prefix = prop::sample::select(vec![
        "",
        ".",
        "..",
        "_",
        "-",
        "~",
        ".fluxplan-build-",
        ".fluxplan-build-4242-0",
        ".FLUXPLAN-BUILD-",
        "fluxplan-src-",
        "\u{FFFD}.fluxplan-build-",
        ".kept-",
        "\u{202E}",
        "\u{200B}",
    ]);
    let stem = "[a-zA-Z0-9é\u{1F600}\u{301} ._-]{0,6}";
    let special = prop::sample::select(
        IGNORED_ANYWHERE
            .iter()
            .copied()
            .chain([
                "Kustomization.yaml",
                "KUSTOMIZATION.yml",
                "kustomization.json",
                "values.yaml",
                ".sourceignore.yaml",
            ])
            .collect::<Vec<_>>(),
    );
    prop_oneof![
        3 => (prefix, stem).prop_map(|(p, s)| format!("{p}{s}")),
        1 => special.prop_map(str::to_string),
    ]
}

/// A file name: a component with one of the endings that decide whether it is a manifest.
fn file_name() -> impl Strategy<Value = String> {
    let ending = prop::sample::select(vec![
        ".yaml",
        ".yml",
        ".YAML",
        ".Yml",
        ".yaml ",
        ".yaml~",
        ".yaml.bak",
        ".json",
        ".yml.j2",
        "",
    ]);
    prop_oneof![
        4 => (component(), ending).prop_map(|(c, e)| format!("{c}{e}")),
        1 => component(),
    ]
}

/// A path below the planned directory: up to two directories, then a file.
fn path() -> impl Strategy<Value = Vec<String>> {
    (prop::collection::vec(component(), 0..=2), file_name()).prop_map(|(mut dirs, file)| {
        dirs.push(file);
        dirs
    })
}

/// Names git itself refuses to check out (`.git` in any case, its NTFS spellings), names that
/// change what the directory is (a kustomization file) and components that are no names.
fn writable(components: &[String]) -> bool {
    components.iter().all(|c| {
        let folded = c.to_ascii_lowercase();
        let trimmed = folded.trim_end_matches(['.', ' ']);
        !matches!(c.as_str(), "" | "." | "..")
            && trimmed != ".git"
            && !folded.starts_with("git~")
            && !["kustomization.yaml", "kustomization.yml", "kustomization"].contains(&c.as_str())
            && c != ".sourceignore"
    })
}

/// Keeps paths that can all exist at once: no path is a directory of another.
fn compatible(paths: Vec<Vec<String>>) -> Vec<Vec<String>> {
    let mut kept: Vec<Vec<String>> = Vec::new();
    for path in paths.into_iter().filter(|p| writable(p)) {
        let clashes = kept.iter().any(|other| {
            let shared = path.len().min(other.len());
            path[..shared] == other[..shared]
        });
        if !clashes {
            kept.push(path);
        }
    }
    kept
}

#[test]
fn a_manifest_under_a_planned_path_is_planned_whatever_its_name() {
    let mut runner = TestRunner::new(Config { cases: 12, failure_persistence: None, ..Config::default() });
    let names = prop::collection::vec(path(), 1..12).prop_map(compatible);
    runner
        .run(&names, |paths| {
            check_names(&paths);
            Ok(())
        })
        .unwrap();
}

/// Some names every run tries, besides the generated ones.
#[test]
fn names_known_to_have_hidden_manifests_are_planned() {
    let paths: Vec<Vec<String>> = [
        ".fluxplan-build-pod.yaml",
        ".fluxplan-build-x/evil.yaml",
        ".hidden.yaml",
        ".hidden/dir.yml",
        "\u{FFFD}.fluxplan-build-1-0/x.yaml",
        "cloudbuild.yaml",
        "nested/.sops.yaml",
        ".github/workflow.yaml",
        "upper.YAML",
    ]
    .iter()
    .map(|p| p.split('/').map(str::to_string).collect())
    .collect();
    check_names(&paths);
}

/// Adds a ConfigMap under `apps/` at each path and plans: each is created exactly when the
/// controller reads its file, and listed with the reason when it does not.
fn check_names(paths: &[Vec<String>]) {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "app", "default");
    let base = repo.commit("base");
    let mut expected = BTreeSet::new();
    let mut left_out = BTreeSet::new();
    for (i, components) in paths.iter().enumerate() {
        let name = format!("named-{i}");
        let file = format!("apps/{}", components.join("/"));
        repo.config_map(&file, &name, "default");
        if controller_reads(components) {
            expected.insert(format!("default_{name}__ConfigMap"));
        } else {
            left_out.insert(file);
        }
    }
    let head = repo.commit("manifests with chosen names");
    let (plan, code) = plan_json(&repo, &base, &head, &[]);
    let created: BTreeSet<String> = changes_of(&plan, "flux-system/apps")
        .into_iter()
        .filter(|(action, _)| action == "create")
        .map(|(_, id)| id)
        .collect();
    assert_eq!(created, expected, "paths {paths:?}\n{plan:#}");
    // What the controller leaves out, the plan lists, saying why.
    let explained: BTreeSet<String> = plan["unplanned_changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["why"].as_str().is_some_and(|w| !w.is_empty()))
        .map(|u| u["file"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(explained, left_out, "paths {paths:?}\n{plan:#}");
    assert_eq!(code, if expected.is_empty() { 0 } else { 1 }, "paths {paths:?}\n{plan:#}");
}
