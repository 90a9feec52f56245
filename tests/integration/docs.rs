//! The README and docs say what the binary does: the sample comment is the demo's, the example
//! policy parses, and the README stays a guide (at most 250 lines).

use crate::fixture::fluxplan_bin;
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Short commit ids (`(9acb135c)`) differ from run to run.
fn without_commits(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let candidate = &rest[open + 1..];
        let is_commit = candidate.len() > 8
            && candidate.as_bytes()[8] == b')'
            && candidate[..8].bytes().all(|b| b.is_ascii_hexdigit());
        out.push_str(&rest[..=open]);
        rest = if is_commit {
            out.push_str("COMMIT");
            &candidate[8..]
        } else {
            candidate
        };
    }
    out.push_str(rest);
    out
}

#[test]
fn the_readme_sample_comment_is_the_demos() {
    let readme = read("README.md");
    let start = readme.find("<!-- sample-comment -->\n").expect("the README marks its sample comment");
    let end = readme.find("<!-- /sample-comment -->").expect("and where it ends");
    // Quoted, as a comment reads in a thread.
    let quoted = &readme[start + "<!-- sample-comment -->\n".len()..end];
    let sample: String = quoted
        .lines()
        .map(|l| l.strip_prefix("> ").or_else(|| l.strip_prefix('>')).expect("every sample line is quoted"))
        .map(|l| format!("{l}\n"))
        .collect();
    let sample = without_commits(&sample);

    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("demo");
    let demo = Command::new(fluxplan_bin()).arg("demo").arg("--dir").arg(&repo).output().unwrap();
    assert!(demo.status.success(), "{}", String::from_utf8_lossy(&demo.stderr));
    let plan = Command::new(fluxplan_bin())
        .args(["plan", "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown", "--repo"])
        .arg(&repo)
        .output()
        .unwrap();
    assert_eq!(plan.status.code(), Some(2), "{}", String::from_utf8_lossy(&plan.stderr));
    let comment = without_commits(&String::from_utf8(plan.stdout).unwrap());

    // Every line of the sample, in order, is a line of the demo's comment (the README leaves
    // some sections out, never changes one).
    let mut lines = comment.lines();
    for wanted in sample.lines() {
        assert!(
            lines.any(|line| line == wanted),
            "the README's sample comment is not the demo's from this line on:\n{wanted}\n\nThe demo's comment:\n{comment}"
        );
    }
    assert!(
        sample.lines().count() > 20,
        "the sample shows the verdict, the table, the alerts and the way out"
    );
}

#[test]
fn the_example_policy_parses_and_changes_the_defaults() {
    let text = read("examples/.fluxplan.yaml");
    let policy =
        fluxplan::plan::Policy::parse(&text).unwrap_or_else(|e| panic!("examples/.fluxplan.yaml: {e}"));
    assert_ne!(policy, fluxplan::plan::Policy::default());
    // Its commented-out keys (`# roots:`, `# - path: …`) are real keys too.
    let looks_like_yaml = |line: &&str| {
        let key = line.trim_start().trim_start_matches("- ");
        key.split_once(':')
            .is_some_and(|(name, _)| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()))
            && key.starts_with(|c: char| c.is_ascii_lowercase())
    };
    let uncommented: String = text
        .lines()
        .map(|l| l.strip_prefix("# ").filter(looks_like_yaml).unwrap_or(l))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(uncommented.contains("\nroots:\n") && uncommented.contains("\nsources:\n"), "{uncommented}");
    fluxplan::plan::Policy::parse(&uncommented).unwrap_or_else(|e| panic!("uncommented: {e}\n{uncommented}"));
}

#[test]
fn the_readme_is_a_guide_of_at_most_250_lines() {
    let lines = read("README.md").lines().count();
    assert!(lines <= 250, "README.md has {lines} lines: move reference into docs/");
}

/// (code, default severity) of every row of the first alerts table in `text` (`| code | default |
/// when |`, several codes to a row allowed).
fn alert_table(text: &str) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    for line in text.lines().skip_while(|l| !l.starts_with("| code | default |")).skip(2) {
        let Some(cells) = line.strip_prefix('|') else { break };
        let cells: Vec<&str> = cells.split(" | ").map(str::trim).collect();
        for code in cells[0].split(", ") {
            rows.push((code.trim_matches('`').to_string(), cells[1].to_string()));
        }
    }
    rows
}

#[test]
fn every_alert_code_is_documented_with_its_default_severity() {
    let severity =
        |s: &fluxplan::plan::Severity| serde_json::to_value(s).unwrap().as_str().unwrap().to_string();
    let plan_doc = alert_table(&read("docs/plan.md"));
    for (code, default) in fluxplan::plan::policy::DEFAULT_SEVERITIES {
        assert!(
            plan_doc.contains(&(code.to_string(), severity(default))),
            "docs/plan.md's alerts table lacks `{code}` ({}): {plan_doc:?}",
            severity(default)
        );
    }
    let findings_doc = alert_table(&read("docs/findings.md"));
    for code in fluxplan::plan::review::CODES.iter().chain(&["suspend-changed"]) {
        let default = fluxplan::plan::policy::DEFAULT_SEVERITIES.iter().find(|(c, _)| c == code).unwrap().1;
        assert!(
            findings_doc.contains(&(code.to_string(), severity(&default))),
            "docs/findings.md lacks `{code}`: {findings_doc:?}"
        );
        assert!(
            read("docs/findings.md").contains(&format!("### `{code}` ({})", severity(&default))),
            "{code}"
        );
    }
}
