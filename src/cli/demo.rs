//! `fluxplan demo`: the plan of the outage fluxplan exists to prevent, on the example fleet built
//! into the binary. Needs git and kustomize; no cluster, no forge, no database.

use crate::planner;
use anyhow::{Context, Result};
use clap::Args;
use include_dir::{include_dir, Dir};
use std::path::Path;
use std::process::Command;

static FLEET: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/examples/fleet");

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the demo repository in this directory (new or empty) instead of a temporary one.
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
}

/// Prints the plan; exits 0 when the demo ran (the plan itself is blocked).
pub fn run(args: DemoArgs) -> Result<u8> {
    let temp = tempfile::tempdir()?;
    let repo = args.dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    if let Some(dir) = &args.dir {
        refuse_non_empty(dir)?;
    }
    std::fs::create_dir_all(&repo).with_context(|| format!("cannot create {}", repo.display()))?;
    FLEET.extract(&repo).context("cannot write the example fleet")?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    commit(&repo, "example fleet")?;
    // The outage: the production apps Kustomization pointed at a directory that holds nothing.
    let apps = repo.join("clusters/production/apps.yaml");
    let text = std::fs::read_to_string(&apps)?;
    std::fs::write(&apps, text.replace("path: ./apps/production", "path: ./apps/empty"))?;
    std::fs::create_dir_all(repo.join("apps/empty"))?;
    std::fs::write(repo.join("apps/empty/README.md"), "Nothing here yet.\n")?;
    commit(&repo, "point production apps at apps/empty")?;
    if !crate::console::quiet() {
        eprintln!(
            "Demo: a pull request points the production `apps` Kustomization at an empty directory \
             (repository: {}).\n",
            repo.display()
        );
    }
    let plan = planner::plan(&planner::Request::new(&repo, "HEAD~1", "HEAD"));
    super::write_out(&crate::report::text(&plan, crate::console::color_stdout()))?;
    if !crate::console::quiet() {
        eprintln!(
            "\nverdict: {} (`fluxplan plan` would exit {})",
            plan.verdict.as_str(),
            plan.verdict.exit_code()
        );
    }
    Ok(if plan.error.is_some() { super::EXIT_FAILED } else { 0 })
}

/// The demo writes a repository and commits into it: never over someone's files.
fn refuse_non_empty(dir: &Path) -> Result<()> {
    anyhow::ensure!(
        !dir.is_file(),
        "{} is a file: pick a new or empty directory for the demo",
        dir.display()
    );
    let occupied = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_some(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    anyhow::ensure!(
        !occupied,
        "{} is not empty: the demo writes a git repository there; pick a new or empty directory",
        dir.display()
    );
    Ok(())
}

fn git(repo: &Path, args: &[&str]) -> Result<()> {
    let status = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "-c",
            "user.name=fluxplan demo",
            "-c",
            "user.email=demo@fluxplan.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .status()
        .context("cannot run git (is it installed?)")?;
    anyhow::ensure!(status.success(), "git {} failed", args.join(" "));
    Ok(())
}

fn commit(repo: &Path, message: &str) -> Result<()> {
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-q", "-m", message])
}
