//! `fluxplan mcp`: the plan of a branch for agents, over the Model Context Protocol (stdio, and
//! streamable HTTP inside `serve`: [`http`]).
//! Read-only tools: `plan` (the plan JSON and its markdown), `explain` (why one object is created,
//! changed or deleted) and `runs` (the bot's stored runs of a pull request, for a repository
//! checked out in the allowed directories: [`checkouts`]); the plan's JSON
//! schema as a resource. The operator decides, when starting it, which directories hold
//! repositories an agent may name and how clusters are read: an agent cannot widen either.

mod checkouts;
pub mod explain;
pub mod http;

use crate::cancel::{CancelReason, CancelToken};
use crate::planner::{self, Clusters, PolicySource, RenderSettings};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource, ResourceContents,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The plan's JSON schema, as docs/plan.schema.json holds it.
const SCHEMA_URI: &str = "fluxplan://plan.schema.json";
const SCHEMA: &str = include_str!("../../docs/plan.schema.json");

/// What the operator decided when starting the server.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Directories (canonical) whose repositories may be planned.
    pub allowed: Vec<PathBuf>,
    /// How the operator allows a directory, for the refusal: "`fluxplan mcp` with --allow DIR".
    pub allow_hint: &'static str,
    /// How clusters are read: the same for every plan.
    pub clusters: Clusters,
    pub render: RenderSettings,
    pub limits: planner::Limits,
    /// The bot's database, for `runs`.
    pub database_url: Option<String>,
}

#[derive(Clone)]
pub struct Server {
    settings: Arc<Settings>,
    /// One plan at a time: a plan takes the machine's cores.
    planning: Arc<tokio::sync::Semaphore>,
    /// The bot's database, connected on the first `runs`: one pool, never one per call.
    store: Arc<tokio::sync::OnceCell<crate::store::Store>>,
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct PlanParams {
    /// The repository: a git checkout inside a directory the server was started with (a path,
    /// absolute or relative to the first of them).
    pub repository: String,
    /// The revision the change merges into (branch, tag or commit); its policy applies.
    pub base: String,
    /// The revision being merged (branch, tag or commit).
    pub head: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct ExplainParams {
    #[serde(flatten)]
    pub plan: PlanParams,
    /// The object: its inventory id (`shop_web_apps_Deployment`), `Kind namespace/name`, or
    /// `Kind name` when cluster-scoped.
    pub object: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct RunsParams {
    /// `github` or `gitlab`.
    pub forge: String,
    /// The repository as the forge names it (`owner/name`, `group/project`).
    pub repository: String,
    /// The pull (merge) request's number.
    pub number: i64,
}

#[tool_router]
impl Server {
    pub fn new(settings: Settings) -> Self {
        Server {
            settings: Arc::new(settings),
            planning: Arc::new(tokio::sync::Semaphore::new(1)),
            store: Default::default(),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Plan a merge of a Flux (or Argo CD) GitOps repository: what merging head into base creates, \
                       changes and deletes, the policy alerts and the verdict (no-changes, changes, blocked, failed). \
                       Returns the plan as JSON (schema: resource fluxplan://plan.schema.json) and as the markdown \
                       comment the bot posts.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn plan(
        &self,
        Parameters(params): Parameters<PlanParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let plan = match self.make_plan(&params, &context).await {
            Ok(plan) => plan,
            Err(why) => return Ok(CallToolResult::error(vec![ContentBlock::text(why)])),
        };
        Ok(CallToolResult::success(vec![
            ContentBlock::text(crate::report::json(&plan)),
            ContentBlock::text(crate::report::markdown(&plan)),
        ]))
    }

    #[tool(
        description = "Explain why a merge creates, changes or deletes one object: its change in every unit, the \
                       chain of deletions it cascades from up to the pull request's own change, and the alerts \
                       naming it.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn explain(
        &self,
        Parameters(params): Parameters<ExplainParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let plan = match self.make_plan(&params.plan, &context).await {
            Ok(plan) => plan,
            Err(why) => return Ok(CallToolResult::error(vec![ContentBlock::text(why)])),
        };
        // CPU work on a large plan: off the runtime that also answers webhooks.
        let object = params.object;
        let explained = tokio::task::spawn_blocking(move || {
            let json: serde_json::Value = serde_json::from_str(&crate::report::json(&plan))?;
            Ok::<_, serde_json::Error>(explain::explain(&json, &object))
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("explain stopped: {e}"), None))?
        .map_err(|e| ErrorData::internal_error(format!("the plan is not JSON: {e}"), None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(explained.to_string())]))
    }

    #[tool(
        description = "The bot's stored runs of one pull (merge) request, oldest first: revisions, status, verdict, \
                       counts, alerts and who approved. Only for a repository the operator keeps a checkout of in \
                       the directories this server may plan. Needs the server started with --database-url.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn runs(&self, Parameters(params): Parameters<RunsParams>) -> Result<CallToolResult, ErrorData> {
        match self.stored_runs(&params).await {
            Ok(runs) => Ok(CallToolResult::success(vec![ContentBlock::text(runs.to_string())])),
            Err(why) => Ok(CallToolResult::error(vec![ContentBlock::text(why)])),
        }
    }
}

impl Server {
    /// The plan `params` ask for; stopped when the request is cancelled or dropped.
    async fn make_plan(
        &self,
        params: &PlanParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<crate::plan::Plan, String> {
        let repo = allowed_repository(&self.settings.allowed, self.settings.allow_hint, &params.repository)?;
        let (base, head) = (revision("base", &params.base)?, revision("head", &params.head)?);
        let request = planner::Request {
            repo,
            repo_name: None,
            base,
            head,
            clusters: self.settings.clusters.clone(),
            policy: PolicySource::BaseRevision,
            render: self.settings.render.clone(),
            limits: self.settings.limits,
            cancel: CancelToken::new(),
        };
        // A request dropped while it waits or plans (its client gone, or a cancellation) stops
        // its plan: its processes are killed and its turn comes free soon after.
        let mut abandoned = CancelOnDrop(Some(request.cancel.clone()));
        // The turn goes with the plan: a request dropped while it plans does not let another
        // plan start beside it before this one has stopped.
        let turn = wait_turn(&self.planning, context.ct.cancelled()).await?;
        let planning = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            planner::plan(&request)
        });
        let plan = tokio::select! {
            plan = planning => plan.map_err(|e| format!("the plan stopped: {e}")),
            () = context.ct.cancelled() => return Err("the request was cancelled: its plan is stopped".into()),
        };
        abandoned.0 = None;
        plan
    }

    async fn stored_runs(&self, params: &RunsParams) -> Result<serde_json::Value, String> {
        // Only of a repository the operator keeps a checkout of in the allowed directories: the
        // database holds the runs of every repository the bot serves. A scan of the operator's
        // directories and a few `git config`: off the runtime.
        let (allowed, repository) = (self.settings.allowed.clone(), params.repository.clone());
        let hint = self.settings.allow_hint;
        tokio::task::spawn_blocking(move || checkouts::checkout_of(&allowed, hint, &repository))
            .await
            .map_err(|e| format!("runs stopped: {e}"))??;
        let url = self.settings.database_url.as_deref().ok_or(
            "no database: start `fluxplan mcp` with --database-url (or DATABASE_URL), the bot's database",
        )?;
        let store = self
            .store
            .get_or_try_init(|| crate::store::Store::connect(url))
            .await
            .map_err(|e| format!("{e:#}"))?;
        let runs = store
            .runs_of(&params.forge, &params.repository, params.number)
            .await
            .map_err(|e| format!("cannot read the runs: {e:#}"))?;
        // Never the page token (it opens the run's page) nor the whole stored plan.
        Ok(runs
            .into_iter()
            .map(|run| {
                let parsed = |text: Option<String>| {
                    text.map(|t| serde_json::from_str::<serde_json::Value>(&t).unwrap_or(serde_json::Value::String(t)))
                };
                serde_json::json!({
                    "id": run.id, "forge": run.forge, "repository": run.repo, "number": run.pr_number,
                    "base_ref": run.base_ref, "base_sha": run.base_sha, "head_sha": run.head_sha,
                    "trigger": run.trigger, "status": run.status, "verdict": run.verdict,
                    "counts": parsed(run.counts), "alerts": parsed(run.alerts), "error": run.error,
                    "approved_by": run.approved_by, "created_at": run.created_at, "finished_at": run.finished_at,
                })
            })
            .collect())
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(Implementation::new("fluxplan", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "fluxplan plans merges of Flux and Argo CD GitOps repositories: call `plan` with a repository and \
                 two revisions before proposing a change, and `explain` for an object it deletes.",
            )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let schema = Resource::new(SCHEMA_URI, "plan.schema.json")
            .with_description("The JSON schema of the plan the `plan` tool returns")
            .with_mime_type("application/schema+json");
        Ok(ListResourcesResult::with_all_items(vec![schema]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != SCHEMA_URI {
            return Err(ErrorData::resource_not_found(format!("no resource {}", request.uri), None));
        }
        Ok(ReadResourceResult::new(vec![ResourceContents::text(SCHEMA, request.uri)]).into())
    }
}

/// The one-plan turn, unless the request is cancelled first (`cancelled` completes): a request
/// cancelled while it waits never starts a plan only to stop it, and cancelled requests queued
/// behind a long plan do not each take a turn after it.
async fn wait_turn(
    planning: &Arc<tokio::sync::Semaphore>,
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<tokio::sync::OwnedSemaphorePermit, String> {
    tokio::select! {
        // A turn free at once is taken even when the request is cancelled: the plan stops then.
        biased;
        turn = planning.clone().acquire_owned() => turn.map_err(|e| e.to_string()),
        () = cancelled => Err("the request was cancelled before its plan started".into()),
    }
}

/// Cancels a plan's token when dropped while armed: the request that made the plan is gone.
struct CancelOnDrop(Option<CancelToken>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel(CancelReason::Abandoned);
        }
    }
}

/// The repository `given` names, when it lies inside one of the `allowed` directories once every
/// symbolic link is resolved; `hint` says how the operator allows a directory.
fn allowed_repository(allowed: &[PathBuf], hint: &str, given: &str) -> Result<PathBuf, String> {
    let first = allowed.first().ok_or_else(|| {
        format!("this server plans no repository: the operator starts {hint} for each directory")
    })?;
    let path = Path::new(given);
    let joined = if path.is_absolute() { path.to_path_buf() } else { first.join(path) };
    let dirs: Vec<String> = allowed.iter().map(|d| d.display().to_string()).collect();
    let outside = || {
        format!(
            "repository {given} is outside the directories this server may plan ({}): the operator starts {hint} \
             for each",
            dirs.join(", ")
        )
    };
    // One answer for a path that is not there and one that is outside: a caller learns nothing
    // of the host's files.
    let real = std::fs::canonicalize(&joined).map_err(|_| outside())?;
    let inside = |path: &Path| allowed.iter().any(|dir| path.starts_with(dir));
    if !inside(&real) {
        return Err(outside());
    }
    // What git reads, not only the path: a `.git` file or link naming another directory, a
    // repository enclosing the allowed one, or borrowed objects (alternates) lead outside.
    let git_dirs = repository_dirs(&real).map_err(|why| format!("repository {given}: {why}"))?;
    if git_dirs.iter().all(|dir| inside(dir)) {
        Ok(real)
    } else {
        Err(outside())
    }
}

/// The directories git reads for the repository at `path`: its git directory, the common one and
/// its work tree (none when bare), canonical. Refuses a repository that borrows objects.
fn repository_dirs(path: &Path) -> Result<Vec<PathBuf>, String> {
    let git = |args: &[&str]| -> Result<Vec<String>, String> {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(path)
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .output()
            .map_err(|e| format!("cannot run git: {e}"))?;
        if !out.status.success() {
            return Err("not a git repository".into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect())
    };
    let facts = git(&["rev-parse", "--is-bare-repository", "--absolute-git-dir", "--git-common-dir"])?;
    let [bare, git_dir, common] = facts.as_slice() else { return Err("not a git repository".into()) };
    let canonical = |dir: &str| std::fs::canonicalize(path.join(dir)).map_err(|e| format!("{dir}: {e}"));
    let common = canonical(common)?;
    if common.join("objects/info/alternates").exists() {
        return Err("it borrows objects from another repository (objects/info/alternates): refused".into());
    }
    let mut dirs = vec![canonical(git_dir)?, common];
    if bare != "true" {
        let top = git(&["rev-parse", "--show-toplevel"])?;
        dirs.push(canonical(top.first().map(String::as_str).unwrap_or_default())?);
    }
    Ok(dirs)
}

/// A revision as git reads one: never an option (`--upload-pack=…`), never control characters.
fn revision(what: &str, given: &str) -> Result<String, String> {
    let valid = !given.is_empty()
        && given.len() <= 256
        && !given.starts_with('-')
        && !given.chars().any(|c| c.is_control() || c.is_whitespace());
    if valid {
        Ok(given.to_string())
    } else {
        Err(format!("{what} {given:?} is not a revision: give a branch, tag or commit"))
    }
}

/// Serves MCP on standard input and output until the client closes them.
pub async fn serve_stdio(settings: Settings) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let service = Server::new(settings).serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HINT: &str = "`fluxplan mcp` with --allow DIR";

    #[test]
    fn only_repositories_inside_the_allowed_directories_are_planned() {
        let allowed_repository = |allowed: &[PathBuf], given: &str| allowed_repository(allowed, HINT, given);
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let allowed = root.path().join("repos");
        std::fs::create_dir_all(allowed.join("fleet")).unwrap();
        let init = |dir: &Path| {
            assert!(std::process::Command::new("git")
                .arg("init")
                .arg("-q")
                .arg(dir)
                .status()
                .unwrap()
                .success())
        };
        init(&allowed.join("fleet"));
        init(outside.path());
        let allowed = vec![std::fs::canonicalize(&allowed).unwrap()];
        // Near miss: inside, by a relative or an absolute path.
        assert!(allowed_repository(&allowed, "fleet").is_ok());
        assert!(allowed_repository(&allowed, allowed[0].join("fleet").to_str().unwrap()).is_ok());
        // Outside: another directory, `..`, a symbolic link inside that points out, a prefix
        // that is not a parent (`repos-evil`).
        assert!(allowed_repository(&allowed, outside.path().to_str().unwrap()).is_err());
        assert!(allowed_repository(&allowed, "../").is_err());
        std::os::unix::fs::symlink(outside.path(), allowed[0].join("link")).unwrap();
        let refused = allowed_repository(&allowed, "link").unwrap_err();
        assert!(refused.contains("--allow"), "{refused}");
        std::fs::create_dir_all(root.path().join("repos-evil")).unwrap();
        assert!(allowed_repository(&allowed, root.path().join("repos-evil").to_str().unwrap()).is_err());
        // What git reads leads outside: a `.git` file naming another repository's git directory,
        // a plain directory inside an outside repository (git walks up), borrowed objects.
        let pointer = allowed[0].join("pointer");
        std::fs::create_dir_all(&pointer).unwrap();
        std::fs::write(pointer.join(".git"), format!("gitdir: {}\n", outside.path().join(".git").display()))
            .unwrap();
        assert!(allowed_repository(&allowed, "pointer").is_err());
        let nested = tempfile::tempdir().unwrap();
        init(nested.path());
        std::fs::create_dir_all(nested.path().join("apps")).unwrap();
        let inner = vec![std::fs::canonicalize(nested.path().join("apps")).unwrap()];
        assert!(allowed_repository(&inner, ".").is_err());
        let alternates = allowed[0].join("fleet/.git/objects/info/alternates");
        std::fs::create_dir_all(alternates.parent().unwrap()).unwrap();
        std::fs::write(&alternates, format!("{}\n", outside.path().join(".git/objects").display())).unwrap();
        assert!(allowed_repository(&allowed, "fleet").unwrap_err().contains("alternates"));
        // No directory allowed: every repository refused, saying how to allow one.
        let none = allowed_repository(&[], "fleet").unwrap_err();
        assert!(none.contains("plans no repository") && none.contains(HINT), "{none}");
    }

    #[test]
    fn a_plan_whose_request_is_dropped_is_cancelled_and_a_finished_one_is_not() {
        let token = CancelToken::new();
        drop(CancelOnDrop(Some(token.clone())));
        assert_eq!(token.reason(), Some(CancelReason::Abandoned));
        let finished = CancelToken::new();
        let mut guard = CancelOnDrop(Some(finished.clone()));
        guard.0 = None;
        drop(guard);
        assert_eq!(finished.reason(), None);
    }

    /// Attack: requests queued behind a long plan, then cancelled, each waiting for a turn to
    /// start a plan nobody wants. They stop waiting; near miss: one not cancelled gets the turn
    /// once the plan before it ends.
    #[tokio::test]
    async fn a_request_cancelled_while_it_waits_never_takes_the_turn() {
        let planning = Arc::new(tokio::sync::Semaphore::new(1));
        let running = planning.clone().acquire_owned().await.unwrap();
        let refused = wait_turn(&planning, std::future::ready(())).await.unwrap_err();
        assert!(refused.contains("cancelled before its plan started"), "{refused}");
        assert_eq!(planning.available_permits(), 0);
        let waiting = tokio::spawn({
            let planning = planning.clone();
            async move { wait_turn(&planning, std::future::pending()).await.map(drop) }
        });
        drop(running);
        assert_eq!(waiting.await.unwrap(), Ok(()));
        assert_eq!(planning.available_permits(), 1);
    }

    #[test]
    fn a_revision_is_never_an_option() {
        for bad in ["--upload-pack=touch /tmp/x", "-c", "", "main\n--x", "a b"] {
            assert!(revision("head", bad).is_err(), "{bad:?}");
        }
        for good in ["main", "origin/main", "HEAD~1", "v1.2.3", "0123abcd"] {
            assert_eq!(revision("head", good).unwrap(), good);
        }
    }
}
