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

/// The pages a user reads: the README and docs/.
fn documentation() -> Vec<(String, String)> {
    let mut pages = vec![("README.md".to_string(), read("README.md"))];
    let mut docs: Vec<_> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    for path in docs {
        let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
        pages.push((name, std::fs::read_to_string(&path).unwrap()));
    }
    pages
}

/// Every `--long-flag` of every fluxplan command.
fn binary_flags() -> std::collections::BTreeSet<String> {
    use clap::CommandFactory;
    fn walk(command: &clap::Command, flags: &mut std::collections::BTreeSet<String>) {
        for arg in command.get_arguments() {
            if let Some(long) = arg.get_long() {
                flags.insert(format!("--{long}"));
            }
        }
        for sub in command.get_subcommands() {
            walk(sub, flags);
        }
    }
    // clap adds these when it builds the command.
    let mut flags: std::collections::BTreeSet<String> = ["--help", "--version"].map(String::from).into();
    walk(&fluxplan::cli::Cli::command(), &mut flags);
    flags
}

/// Flags the docs name that belong to other programs, with whose they are.
const OTHER_PROGRAMS_FLAGS: &[(&str, &str)] = &[
    ("--batch", "git cat-file"),
    ("--bench", "cargo bench"),
    ("--build-arg", "podman build"),
    ("--deepen", "git fetch"),
    ("--depth", "git fetch, git clone"),
    ("--digestfile", "buildah push"),
    ("--isolation", "buildah run"),
    ("--load-restrictor", "kustomize build"),
    ("--locked", "cargo"),
    ("--no-remote-bases", "kustomize-controller"),
    ("--path", "cargo install; flux push artifact"),
    ("--release", "cargo build"),
    ("--root", "buildah, scripts/build-image.sh"),
    ("--rootfs", "scripts/build-image.sh"),
    ("--runroot", "buildah, scripts/build-image.sh"),
    ("--set", "helm template"),
    ("--values", "helm template"),
    ("--set-file", "helm template"),
    ("--set-literal", "helm template"),
    ("--set-string", "helm template"),
    ("--short", "git rev-parse"),
    ("--skip-schema-validation", "helm template"),
    ("--storage-driver", "buildah"),
    ("--tag", "scripts/build-image.sh"),
];

/// The `--flags` a page names (in prose, code spans and blocks alike).
fn flags_named(text: &str) -> std::collections::BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut flags = std::collections::BTreeSet::new();
    let mut at = 0;
    while let Some(found) = text[at..].find("--") {
        let start = at + found;
        at = start + 2;
        let before = start.checked_sub(1).map(|i| bytes[i]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'/' || b == b'_') {
            continue;
        }
        let name: String = text[start + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let name = name.trim_end_matches('-');
        if name.len() > 1 && name.starts_with(|c: char| c.is_ascii_lowercase()) {
            flags.insert(format!("--{name}"));
        }
    }
    flags
}

#[test]
fn every_flag_the_docs_name_exists_and_every_flag_is_documented() {
    let flags = binary_flags();
    let others: std::collections::BTreeMap<&str, &str> = OTHER_PROGRAMS_FLAGS.iter().copied().collect();
    let mut unknown = Vec::new();
    let mut documented = std::collections::BTreeSet::new();
    for (page, text) in documentation() {
        for flag in flags_named(&text) {
            if flags.contains(&flag) {
                documented.insert(flag);
            } else if !others.contains_key(flag.as_str()) {
                unknown.push(format!("{page}: {flag}"));
            }
        }
    }
    assert!(unknown.is_empty(), "flags the docs name that fluxplan does not have (a typo, a removed flag, or another program's: add it to OTHER_PROGRAMS_FLAGS with its program):\n{}", unknown.join("\n"));
    let undocumented: Vec<&String> = flags
        .iter()
        .filter(|f| !documented.contains(*f) && !["--help", "--version"].contains(&f.as_str()))
        .collect();
    assert!(undocumented.is_empty(), "flags documented nowhere in README.md or docs/: {undocumented:?}");
    // Another program's flag that fluxplan also has would hide a typo of fluxplan's: keep them apart.
    let shared: Vec<&&str> = others.keys().filter(|f| flags.contains(**f)).collect();
    assert!(shared.is_empty(), "listed as another program's but fluxplan has them: {shared:?}");
}

#[test]
fn every_alert_code_is_in_the_docs_table_and_the_table_names_only_real_codes() {
    let codes: std::collections::BTreeSet<&str> =
        fluxplan::plan::policy::DEFAULT_SEVERITIES.iter().map(|(code, _)| *code).collect();
    let documented: Vec<String> =
        alert_table(&read("docs/policy.md")).into_iter().map(|(code, _)| code).collect();
    assert!(documented.len() >= 20, "the alerts table was not found: {documented:?}");
    let unknown: Vec<&String> = documented.iter().filter(|c| !codes.contains(c.as_str())).collect();
    assert!(unknown.is_empty(), "docs/policy.md lists codes fluxplan does not raise: {unknown:?}");
    let missing: Vec<&&str> = codes.iter().filter(|c| !documented.iter().any(|d| d == *c)).collect();
    assert!(missing.is_empty(), "alert codes missing from the table in docs/policy.md: {missing:?}");
}

/// The ```yaml blocks of a page.
fn yaml_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start()) {
            (None, fence) if fence.starts_with("```yaml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

#[test]
fn every_policy_example_parses_and_every_policy_key_is_documented() {
    let keys = fluxplan::plan::policy::file_keys();
    assert!(keys.contains("massDeletion.maxObjects") && keys.contains("roots.source.kind"), "{keys:?}");
    let top: std::collections::BTreeSet<&str> =
        keys.iter().filter(|k| !k.contains('.')).map(String::as_str).collect();
    let mut examples = 0;
    let mut all_text = String::new();
    for (page, text) in documentation() {
        all_text.push_str(&text);
        for block in yaml_blocks(&text) {
            // A block whose first key is a policy key is a `.fluxplan.yaml` example.
            let first = block.lines().find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
            let first_key = first.and_then(|l| l.split_once(':')).map(|(k, _)| k.trim()).unwrap_or("");
            if first.is_some_and(|l| !l.starts_with(' ')) && top.contains(first_key) {
                examples += 1;
                if let Err(e) = fluxplan::plan::Policy::parse(&block) {
                    panic!("a .fluxplan.yaml example in {page} does not parse: {e}\n{block}");
                }
            }
        }
    }
    assert!(examples >= 2, "only {examples} policy examples found");
    let undocumented: Vec<&String> = keys
        .iter()
        .filter(|key| {
            let last = key.rsplit('.').next().unwrap();
            !all_text.contains(&format!("{last}:")) && !all_text.contains(&format!("`{key}`"))
        })
        .collect();
    assert!(undocumented.is_empty(), ".fluxplan.yaml keys documented nowhere: {undocumented:?}");
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
    let plan_doc = alert_table(&read("docs/policy.md"));
    for (code, default) in fluxplan::plan::policy::DEFAULT_SEVERITIES {
        assert!(
            plan_doc.contains(&(code.to_string(), severity(default))),
            "docs/policy.md's alerts table lacks `{code}` ({}): {plan_doc:?}",
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

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (code blocks left out).
fn anchors(text: &str) -> std::collections::BTreeSet<String> {
    let mut in_code = false;
    let mut anchors = std::collections::BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            anchors.insert(anchor_of(line.trim_start_matches('#')));
        }
    }
    anchors
}

#[test]
fn every_link_between_the_pages_leads_to_a_file_and_heading_that_exist() {
    let pages = documentation();
    let mut broken = Vec::new();
    let mut links = 0;
    for (page, text) in &pages {
        let dir = Path::new(page).parent().unwrap_or(Path::new(""));
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let link = &rest[..end];
            if link.contains("://") || link.contains(' ') || link.starts_with("mailto:") {
                continue;
            }
            links += 1;
            let (file, anchor) = link.split_once('#').map_or((link, None), |(f, a)| (f, Some(a)));
            let target = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file).to_string_lossy().replace("docs/../", "")
            };
            let Ok(target_text) = std::fs::read_to_string(root().join(&target)) else {
                broken.push(format!("{page}: {link} (no such file)"));
                continue;
            };
            if let Some(anchor) = anchor.filter(|_| target.ends_with(".md")) {
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{page}: {link} (no such heading)"));
                }
            }
        }
    }
    assert!(links > 50, "only {links} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
