//! `serve` and `migrate` read their secrets from files as Kubernetes mounts them, through the
//! flag or its environment variable; given both ways, or unreadable, they stop with a message
//! that names the setting and never the secret.

use crate::fixture::fluxplan_bin;
use std::process::Command;

const SECRET: &str = "zq7-not-to-be-shown";

fn run(args: &[&str], env: &[(&str, &str)]) -> (String, i32) {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(fluxplan_bin())
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("FLUXPLAN_GITHUB_TOKEN")
        .env("FLUXPLAN_DATA_DIR", data.path())
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (all, out.status.code().unwrap_or(-1))
}

#[test]
fn a_secret_given_as_value_and_file_or_an_unreadable_file_stops_serve_without_showing_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{SECRET}\n")).unwrap();
    let path = file.to_str().unwrap();
    let (output, code) =
        run(&["serve"], &[("FLUXPLAN_GITHUB_TOKEN", SECRET), ("FLUXPLAN_GITHUB_TOKEN_FILE", path)]);
    assert_eq!(code, 3, "{output}");
    assert!(
        output.contains(
            "--github-token (FLUXPLAN_GITHUB_TOKEN) and --github-token-file (FLUXPLAN_GITHUB_TOKEN_FILE) are both set"
        ),
        "{output}"
    );
    assert!(!output.contains(SECRET), "{output}");
    let missing = dir.path().join("missing");
    let (output, code) = run(&["serve", "--gitlab-token-file", missing.to_str().unwrap()], &[]);
    assert_eq!(code, 3, "{output}");
    assert!(output.contains("--gitlab-token-file (FLUXPLAN_GITLAB_TOKEN_FILE): cannot read"), "{output}");
}

/// The database URL from a file named by the environment: `migrate` migrates that database.
#[test]
fn migrate_reads_the_database_url_from_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fluxplan.db");
    let file = dir.path().join("database-url");
    std::fs::write(&file, format!("sqlite://{}?mode=rwc\n", db.display())).unwrap();
    let (output, code) = run(&["migrate"], &[("DATABASE_URL_FILE", file.to_str().unwrap())]);
    assert_eq!(code, 0, "{output}");
    assert!(db.is_file(), "{output}");
    // Both ways: refused.
    let (output, code) = run(
        &["migrate", "--database-url", "sqlite://x.db"],
        &[("DATABASE_URL_FILE", file.to_str().unwrap())],
    );
    assert_eq!(code, 3, "{output}");
    assert!(
        output.contains(
            "--database-url (DATABASE_URL) and --database-url-file (DATABASE_URL_FILE) are both set"
        ),
        "{output}"
    );
}
