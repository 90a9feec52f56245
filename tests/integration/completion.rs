//! `fluxplan completion SHELL` through the real binary: every shell gets a script naming the
//! commands, and bash parses its script and completes with it.

use crate::fixture::fluxplan_bin;
use std::process::Command;

fn script(shell: &str) -> String {
    let out = Command::new(fluxplan_bin()).args(["completion", shell]).output().unwrap();
    assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_shell_gets_a_script_naming_the_commands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = script(shell);
        for command in ["build", "plan", "snapshot", "serve", "migrate", "demo", "completion"] {
            assert!(script.contains(command), "the {shell} script does not name `{command}`:\n{script}");
        }
        // fish names long flags without their dashes (`-l cluster-snapshot`).
        assert!(script.contains("cluster-snapshot"), "the {shell} script names no flag");
    }
    let out = Command::new(fluxplan_bin()).args(["completion", "tcsh"]).output().unwrap();
    // Usage errors exit 3, as every command's do.
    assert_eq!(out.status.code(), Some(3), "an unknown shell is a usage error");
}

/// What bash completes `words` (the last one being typed) to, with the script loaded.
fn bash_completes(script_path: &std::path::Path, words: &[&str]) -> Vec<String> {
    let words_list = words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" ");
    let current = words.last().unwrap();
    let previous = words[words.len() - 2];
    let program = format!(
        "source '{}'\nCOMP_WORDS=({words_list})\nCOMP_CWORD={}\n_fluxplan fluxplan '{current}' '{previous}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script_path.display(),
        words.len() - 1,
    );
    let out = Command::new("bash").args(["--norc", "--noprofile", "-c", &program]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn bash_parses_its_script_and_completes_commands_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fluxplan.bash");
    std::fs::write(&path, script("bash")).unwrap();
    let parsed = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(parsed.status.success(), "bash -n: {}", String::from_utf8_lossy(&parsed.stderr));
    assert_eq!(bash_completes(&path, &["fluxplan", "pl"]), ["plan"]);
    assert!(bash_completes(&path, &["fluxplan", "plan", "--ba"]).contains(&"--base".to_string()));
    assert_eq!(bash_completes(&path, &["fluxplan", "completion", "fi"]), ["fish"]);
}
