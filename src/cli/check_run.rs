//! `fluxplan plan --github-check-run`: the plan as the `fluxplan` check run of the pull request's
//! head, posted from a GitHub Actions job with its token (`permissions: checks: write`). The
//! check-run code is the bot's (`forge::checks`).

use crate::forge::checks::{CheckOutput, CheckRun, CheckState, Conclusion};
use crate::forge::github::{GitHub, GitHubAuth};
use crate::forge::{ForgeKind, RepoInfo};
use crate::plan::{Plan, Verdict};
use anyhow::{bail, Context, Result};
use clap::Args;

#[derive(Debug, Clone, Args, Default)]
pub struct CheckRunArgs {
    /// Post the plan as the `fluxplan` check run of the head commit (in GitHub Actions, with
    /// GITHUB_TOKEN and `checks: write`; the repository from GITHUB_REPOSITORY, the commit from the
    /// event's pull request head, else GITHUB_SHA). docs/ci.md.
    #[arg(long, env = "FLUXPLAN_GITHUB_CHECK_RUN")]
    pub github_check_run: bool,
    /// The commit the check run is on, instead of the one the Actions event names.
    #[arg(long, env = "FLUXPLAN_GITHUB_CHECK_SHA", value_name = "SHA")]
    pub github_check_sha: Option<String>,
    /// GitHub's API for the check run (GitHub Enterprise: https://HOST/api/v3).
    #[arg(long, env = "GITHUB_API_URL", default_value = "https://api.github.com")]
    pub github_api_url: String,
}

/// Where and as whom the check run is written, from the Actions environment.
struct Target {
    token: String,
    repository: String,
    sha: String,
}

impl CheckRunArgs {
    fn target(&self) -> Result<Target> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let token = var("GITHUB_TOKEN")
            .context("--github-check-run needs GITHUB_TOKEN (in the workflow: `env: GITHUB_TOKEN: ${{ github.token }}`)")?;
        let repository =
            var("GITHUB_REPOSITORY").context("--github-check-run needs GITHUB_REPOSITORY (owner/name)")?;
        if repository.split('/').count() != 2 || repository.contains(char::is_whitespace) {
            bail!("GITHUB_REPOSITORY must be owner/name, not {repository:?}");
        }
        let sha = match &self.github_check_sha {
            Some(sha) => sha.clone(),
            None => event_head(var("GITHUB_EVENT_PATH"))
                .or_else(|| var("GITHUB_SHA"))
                .context("--github-check-run needs the head commit: GITHUB_EVENT_PATH, GITHUB_SHA or --github-check-sha")?,
        };
        if sha.len() < 7 || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
            bail!("the check run's commit must be a hexadecimal SHA, not {sha:?}");
        }
        Ok(Target { token, repository, sha })
    }
}

/// The pull request's head (or the merge group's) from the event payload: actions/checkout
/// checks out a merge commit, on which a check run would not show on the pull request.
fn event_head(path: Option<String>) -> Option<String> {
    let event: serde_json::Value = serde_json::from_slice(&std::fs::read(path?).ok()?).ok()?;
    ["/pull_request/head/sha", "/merge_group/head_sha"]
        .iter()
        .find_map(|pointer| event.pointer(pointer)?.as_str().map(str::to_string))
}

/// Posts `plan` as the check run: a new run each time (the job's own check run may bear the same
/// name and is never touched). A token without `checks: write` is told, not fatal: the step's
/// exit code stays the verdict's.
pub fn post(plan: &Plan, markdown: &str, args: &CheckRunArgs) -> Result<()> {
    let target = args.target()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // octocrab's client lives on the runtime it is made in.
    let client = {
        let _inside = runtime.enter();
        GitHub::new(&args.github_api_url, GitHubAuth::Token(target.token))?
    };
    let repo = RepoInfo {
        forge: ForgeKind::GitHub,
        full_name: target.repository,
        project_id: None,
        clone_url: String::new(),
        installation_id: None,
        web_url: None,
    };
    let output = CheckOutput::of_plan(plan, markdown);
    let conclusion = match plan.verdict {
        Verdict::NoChanges | Verdict::Changes => Conclusion::Success,
        Verdict::Blocked | Verdict::Failed => Conclusion::Failure,
    };
    let title = crate::forge::checks::verdict_title(plan);
    let run = CheckRun {
        sha: &target.sha,
        state: CheckState::Completed(conclusion),
        title: &title,
        output: Some(&output),
        details_url: None,
        external_id: None,
    };
    match runtime.block_on(client.create_check_run(&repo, &run)) {
        Ok(()) => {
            eprintln!(
                "fluxplan: check run posted on {} ({} annotations)",
                target.sha,
                output.annotations.len()
            );
            Ok(())
        }
        Err(crate::forge::checks::CheckError::Refused(why)) => {
            eprintln!(
                "warning: GitHub refused the check run ({why}); give the job `permissions: checks: write`"
            );
            Ok(())
        }
        Err(e) => Err(e).context("cannot post the check run"),
    }
}
