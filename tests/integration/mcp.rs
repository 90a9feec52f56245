//! `fluxplan mcp`: a Model Context Protocol client speaking JSON-RPC over the server's standard
//! input and output, as agents do. The plan it returns is `fluxplan plan`'s; it refuses
//! repositories outside the directories it was started with, and never hands out a run's page
//! token.

use crate::fixture::{fluxplan_bin, Repo};
use fluxplan::store::{RunOutcome, Store};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A running `fluxplan mcp` and its pipes.
struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Client {
    /// Starts `fluxplan mcp` with `args` and completes the protocol's handshake.
    fn start(args: &[&str], env: &[(&str, &str)]) -> Client {
        let mut child = Command::new(fluxplan_bin())
            .arg("mcp")
            .args(args)
            .env_remove("DATABASE_URL")
            .env_remove("DATABASE_URL_FILE")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut client = Client { child, stdin, stdout, next_id: 1 };
        let info = client.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "fluxplan-test", "version": "1"}}),
        );
        assert_eq!(info["serverInfo"]["name"], "fluxplan", "{info:#}");
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and waits for its answer (skipping notifications): its `result`.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "the server closed its output");
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {line}"));
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message:#}");
                return message["result"].clone();
            }
        }
    }

    /// Calls a tool: (is an error, its text contents).
    fn tool(&mut self, name: &str, arguments: Value) -> (bool, Vec<String>) {
        let result = self.call("tools/call", json!({"name": name, "arguments": arguments}));
        tool_result(&result)
    }
}

/// A tool call's result: (is an error, its text contents).
pub(crate) fn tool_result(result: &Value) -> (bool, Vec<String>) {
    let texts = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect();
    (result["isError"] == true, texts)
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `plan` tool's answer over [`fleet`] is `fluxplan plan`'s, JSON and markdown.
pub(crate) fn assert_is_the_cli_plan(repo: &Repo, texts: &[String]) {
    let plan: Value = serde_json::from_str(&texts[0]).unwrap();
    let cli = Command::new(fluxplan_bin())
        .args(["plan", "--no-cache", "--base", "HEAD~1", "--head", "HEAD", "--format", "json", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    let expected: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(plan["verdict"], "blocked");
    assert_eq!(plan, expected);
    assert!(texts[1].contains("kustomization-removed"), "{}", texts[1]);
}

/// A fleet whose last commit removes the Kustomization `apps` (a Namespace and its Deployment).
pub(crate) fn fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write(
        "apps/app.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\napiVersion: apps/v1\nkind: Deployment\n\
         metadata:\n  name: web\n  namespace: shop\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    \
         metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1\n",
    );
    repo.commit("base");
    repo.remove("clusters/prod/apps.yaml");
    repo.commit("remove apps");
    repo
}

#[test]
fn an_agent_gets_the_plan_of_a_branch_and_why_an_object_is_deleted() {
    let repo = fleet();
    let cache = tempfile::tempdir().unwrap();
    let dir = repo.path().to_str().unwrap();
    let mut client = Client::start(&["--allow", dir, "--cache-dir", cache.path().to_str().unwrap()], &[]);

    let tools = client.call("tools/list", json!({}));
    let mut names: Vec<&str> =
        tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["explain", "plan", "runs"]);
    assert!(
        tools["tools"].as_array().unwrap().iter().all(|t| t["annotations"]["readOnlyHint"] == true),
        "{tools:#}"
    );

    // The plan is `fluxplan plan`'s, JSON and markdown.
    let (error, texts) = client.tool("plan", json!({"repository": ".", "base": "HEAD~1", "head": "HEAD"}));
    assert!(!error, "{texts:?}");
    assert_is_the_cli_plan(&repo, &texts);

    // Why the Deployment goes: the Kustomization the pull request removed.
    let (error, texts) = client.tool(
        "explain",
        json!({"repository": ".", "base": "HEAD~1", "head": "HEAD", "object": "Deployment shop/web"}),
    );
    assert!(!error, "{texts:?}");
    let explained: Value = serde_json::from_str(&texts[0]).unwrap();
    let change = &explained["changes"][0];
    assert_eq!(change["action"], "delete", "{explained:#}");
    let chain = change["cascades_from"].as_array().unwrap();
    let root = chain.last().unwrap_or(change);
    assert_eq!(root["cause"], "pull-request", "{explained:#}");

    // The schema is a resource.
    let schema = client.call("resources/read", json!({"uri": "fluxplan://plan.schema.json"}));
    let text = schema["contents"][0]["text"].as_str().unwrap();
    let committed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/plan.schema.json");
    assert_eq!(text, std::fs::read_to_string(committed).unwrap());

    // `runs` without a database says how to give one.
    let (error, texts) =
        client.tool("runs", json!({"forge": "github", "repository": "acme/fleet", "number": 1}));
    assert!(error && texts[0].contains("--database-url"), "{texts:?}");
}

/// Attack: an agent names a repository outside the allowed directories, directly or through a
/// symbolic link inside them, or a revision that is a git option. Each is refused and nothing
/// is planned; the near miss, the repository inside, is planned.
#[test]
fn repositories_outside_the_allowed_directories_and_option_revisions_are_refused() {
    let inside = fleet();
    let outside = fleet();
    std::os::unix::fs::symlink(outside.path(), inside.path().join("link")).unwrap();
    let mut client = Client::start(&["--allow", inside.path().to_str().unwrap(), "--no-cache"], &[]);
    for repository in [outside.path().to_str().unwrap(), "link", "../"] {
        let (error, texts) =
            client.tool("plan", json!({"repository": repository, "base": "HEAD~1", "head": "HEAD"}));
        assert!(error, "{repository}: {texts:?}");
        assert!(
            texts[0].contains("outside the directories") || texts[0].contains("cannot open"),
            "{texts:?}"
        );
    }
    let marker = inside.path().join("touched");
    let option = format!("--output={}", marker.display());
    let (error, texts) = client.tool("plan", json!({"repository": ".", "base": option, "head": "HEAD"}));
    assert!(error && texts[0].contains("is not a revision"), "{texts:?}");
    assert!(!marker.exists());
    let (error, texts) = client.tool("plan", json!({"repository": ".", "base": "HEAD~1", "head": "HEAD"}));
    assert!(!error, "{texts:?}");
}

/// The bot's runs of a pull request, from its database, for a repository checked out in an
/// allowed directory only; the page token that opens a run's page is never among them.
#[test]
fn runs_come_from_the_bots_database_without_their_page_tokens() {
    let data = tempfile::tempdir().unwrap();
    let url = Store::default_url(data.path());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let token = runtime.block_on(async {
        let store = Store::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        let (id, token) = store
            .start_run(None, "github", "acme/fleet", 7, "main", "abc123", "pull-request", None)
            .await
            .unwrap();
        let outcome = RunOutcome {
            status: "done".into(),
            verdict: Some("blocked".into()),
            approved_by: Some("alice".into()),
            ..Default::default()
        };
        store.finish_run(id, &outcome).await.unwrap();
        store
            .start_run(None, "github", "acme/other", 7, "main", "def456", "pull-request", None)
            .await
            .unwrap();
        token
    });
    let repo = fleet();
    let allow = repo.path().to_str().unwrap();
    let mut client = Client::start(&["--allow", allow, "--no-cache"], &[("DATABASE_URL", url.as_str())]);
    // Another repository the bot serves, with a run: no checkout of it is allowed.
    let (error, texts) =
        client.tool("runs", json!({"forge": "github", "repository": "acme/other", "number": 7}));
    assert!(error && texts[0].contains("no checkout") && !texts[0].contains("def456"), "{texts:?}");
    let (error, texts) =
        client.tool("runs", json!({"forge": "github", "repository": "acme/fleet", "number": 7}));
    assert!(!error, "{texts:?}");
    let runs: Value = serde_json::from_str(&texts[0]).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs:#}");
    assert_eq!(runs[0]["head_sha"], "abc123");
    assert_eq!(runs[0]["verdict"], "blocked");
    assert_eq!(runs[0]["approved_by"], "alice");
    assert!(!texts[0].contains(&token), "{}", texts[0]);
}

/// The command lines of every process now running that name `marker`.
fn processes_naming(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(bytes) = std::fs::read(entry.path().join("cmdline")) {
            let line = String::from_utf8_lossy(&bytes).replace('\0', " ");
            if line.contains(marker) {
                found.push(line);
            }
        }
    }
    found
}

/// An agent that cancels its request (`notifications/cancelled`) stops the plan: the `helm
/// template` it started, rendering a chart that would loop for hours, is killed, and the server
/// plans the next request. Without the cancellation, the helm process would run until the plan's
/// timeout, and this test would wait for it.
#[test]
fn a_cancelled_request_stops_its_plan_and_its_helm() {
    let _ = crate::fixture::helm(4);
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write(
        "apps/placeholder.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n  namespace: default\n",
    );
    repo.commit("base");
    repo.write("charts/spin/Chart.yaml", "apiVersion: v2\nname: spin\nversion: 1.0.0\n");
    repo.write(
        "charts/spin/templates/spin.yaml",
        "{{- range until 100000 }}{{- range until 100000 }}{{- end }}{{- end }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: spun\n",
    );
    repo.write(
        "apps/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: mcp-cancel-spinner\n  namespace: default\n\
         spec:\n  interval: 10m\n  chart:\n    spec:\n      chart: ./charts/spin\n      sourceRef:\n        kind: GitRepository\n        \
         name: flux-system\n        namespace: flux-system\n",
    );
    repo.commit("a release whose chart spins");
    let mut client = Client::start(&["--allow", repo.path().to_str().unwrap(), "--no-cache"], &[]);
    let id = client.next_id;
    client.next_id += 1;
    client.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "plan", "arguments": {"repository": ".", "base": "HEAD~1", "head": "HEAD"}}}));
    // Wait for the helm process, then cancel the request.
    while processes_naming("mcp-cancel-spinner").iter().all(|p| !p.contains("template")) {
        std::thread::yield_now();
    }
    client.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the agent changed its mind"}}));
    while processes_naming("mcp-cancel-spinner").iter().any(|p| p.contains("template")) {
        std::thread::yield_now();
    }
    // The server lives on and plans again.
    let tools = client.call("tools/list", json!({}));
    assert_eq!(tools["tools"].as_array().unwrap().len(), 3);
}
