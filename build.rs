//! Names the commit fluxplan is built from (`--version`, `fluxplan_build_info`): `$FLUXPLAN_COMMIT`
//! when set (an image build, whose context leaves `.git` out), else git's, else `unknown` (a crate
//! download).

fn main() {
    // One word: it becomes a compiler environment variable.
    let given = std::env::var("FLUXPLAN_COMMIT")
        .ok()
        .filter(|c| !c.is_empty() && c != "unknown" && c.bytes().all(|b| b.is_ascii_alphanumeric()));
    let commit = given.or_else(from_git).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=FLUXPLAN_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=FLUXPLAN_COMMIT");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
}

fn from_git() -> Option<String> {
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|text| text.trim().to_string())
        .filter(|commit| !commit.is_empty())
}
