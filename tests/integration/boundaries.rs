//! Module boundaries the design fixes: the CLI and the bot's jobs both call the planner and
//! neither imports the other; the planner imports neither.

use std::path::{Path, PathBuf};

/// (module directory, modules it must not import)
const RULES: &[(&str, &[&str])] =
    &[("src/cli", &["jobs"]), ("src/jobs", &["cli"]), ("src/planner", &["cli", "jobs", "service"])];

/// Lines of `text` that import or name `module` through a crate path: `crate::cli`,
/// `super::cli` (from a module's `mod.rs`, the crate root), `super::super::cli`, `fluxplan::cli`,
/// or `crate::{…, cli, …}`. No module under these directories is itself named `cli` or `jobs`.
fn imports_of(text: &str, module: &str) -> Vec<(usize, String)> {
    let direct = [format!("crate::{module}"), format!("super::{module}"), format!("fluxplan::{module}")];
    let names_module = |path: &str| {
        direct.iter().any(|prefix| {
            path.match_indices(prefix.as_str()).any(|(at, _)| {
                let next = path[at + prefix.len()..].chars().next();
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
    };
    let mut found = Vec::new();
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    for (n, line) in text.lines().enumerate() {
        if names_module(line) {
            found.push((n + 1, line.trim().to_string()));
        }
    }
    // `use crate::{a, cli::x};` may span lines: look inside every `crate::{…}` group.
    for root in ["crate::{", "fluxplan::{"] {
        for (at, _) in compact.match_indices(root) {
            let group = &compact[at + root.len()..];
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let top_level_first_segments = group[..end]
                .split([',', '{', '}'])
                .filter_map(|item| item.split("::").next())
                .any(|segment| segment == module);
            if top_level_first_segments {
                found.push((0, format!("{root}{}}}", &group[..end])));
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn cli_and_jobs_do_not_import_each_other_and_the_planner_imports_neither() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut violations = Vec::new();
    let mut scanned = 0;
    for (dir, forbidden) in RULES {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        assert!(!files.is_empty(), "no Rust file under {dir}: the rule checks nothing");
        for file in files {
            scanned += 1;
            let text = std::fs::read_to_string(&file).unwrap();
            for module in *forbidden {
                for (line, code) in imports_of(&text, module) {
                    let at = file.strip_prefix(root).unwrap_or(&file).display().to_string();
                    violations.push(format!("{at}:{line}: {dir} must not use {module}: {code}"));
                }
            }
        }
    }
    assert!(scanned >= 3, "scanned {scanned} files");
    assert!(violations.is_empty(), "module boundaries crossed:\n{}", violations.join("\n"));
}

#[test]
fn the_import_scan_finds_every_form_of_import() {
    for (text, module) in [
        ("use crate::cli::plan::PlanArgs;", "cli"),
        ("use super::super::cli::LimitArgs;", "cli"),
        ("use super::cli::serve::ServeArgs;", "cli"),
        ("let x = crate::jobs::Worker::new();", "jobs"),
        ("use crate::{\n    plan,\n    jobs::{Forges, Worker},\n};", "jobs"),
        ("use crate::{cli, plan};", "cli"),
    ] {
        assert!(!imports_of(text, module).is_empty(), "missed {module} in {text:?}");
    }
    for (text, module) in [
        ("use crate::client::Thing;", "cli"),
        ("use crate::{plan::{jobs_done}, render};", "jobs"),
        ("use crate::jobsite;", "jobs"),
    ] {
        assert!(imports_of(text, module).is_empty(), "false alarm for {module} in {text:?}");
    }
}
