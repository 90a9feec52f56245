//! MCP over streamable HTTP inside `fluxplan serve` (`/mcp`): an agent with the MCP token gets
//! the plan of a branch, as over stdio; without the token, with a wrong one, or from a browser
//! page, nothing is planned; repositories outside --mcp-allow are refused; without a token
//! configured `/mcp` is not there.

use crate::bot::Bot;
use crate::mcp::{assert_is_the_cli_plan, fleet, tool_result};
use serde_json::{json, Value};

const TOKEN: &str = "mcp-token-7f3a9c";

/// A JSON-RPC POST to `/mcp` as the streamable HTTP transport sends one: (status, the answer's
/// JSON-RPC message when there is one).
fn post(bot: &Bot, token: Option<&str>, extra: &[(&str, &str)], body: String) -> (u16, Option<Value>) {
    let mut request = reqwest::blocking::Client::new()
        .post(format!("{}/mcp", bot.url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    let text = response.text().unwrap();
    // JSON, or an event stream whose `data:` line carries the message.
    let message = serde_json::from_str(&text).ok().or_else(|| {
        text.lines().filter_map(|l| l.strip_prefix("data:")).find_map(|d| serde_json::from_str(d.trim()).ok())
    });
    (status, message)
}

fn rpc(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn initialize() -> String {
    rpc(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "fluxplan-test", "version": "1"}}),
    )
}

/// Calls a tool with the token: (is an error, its text contents).
fn tool(bot: &Bot, name: &str, arguments: Value) -> (bool, Vec<String>) {
    let (status, message) =
        post(bot, Some(TOKEN), &[], rpc(2, "tools/call", json!({"name": name, "arguments": arguments})));
    let message = message.unwrap_or_else(|| panic!("{name}: HTTP {status} without a JSON-RPC answer"));
    assert_eq!(status, 200, "{message:#}");
    tool_result(&message["result"])
}

fn plan_call(repository: &str) -> String {
    rpc(
        2,
        "tools/call",
        json!({"name": "plan", "arguments": {"repository": repository, "base": "HEAD~1", "head": "HEAD"}}),
    )
}

/// Attack: requests without the token, with a wrong one, with one longer or shorter than it, in
/// another scheme, or from a browser page (an `Origin`) are refused before anything is planned
/// (the render cache a plan opens stays absent); a body past the bound is refused. Near miss:
/// the right token gets the plan `fluxplan plan` makes, and a repository outside --mcp-allow is
/// refused.
#[test]
fn an_agent_with_the_token_gets_the_plan_over_http_and_no_one_else_gets_anything() {
    let repo = fleet();
    let outside = fleet();
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start_with(
        data.path(),
        &["--mcp-allow", repo.path().to_str().unwrap()],
        &[("FLUXPLAN_MCP_TOKEN", TOKEN.to_string())],
    );
    let cache = data.path().join("cache");

    let shorter = &TOKEN[..TOKEN.len() - 1];
    let longer = format!("{TOKEN}0");
    let wrong_same_length = TOKEN.replace('7', "8");
    for token in [
        None,
        Some("wrong"),
        Some(wrong_same_length.as_str()),
        Some(shorter),
        Some(longer.as_str()),
        Some(""),
    ] {
        for body in [initialize(), plan_call(".")] {
            let (status, message) = post(&bot, token, &[], body);
            assert_eq!(status, 401, "{token:?}: {message:?}");
            assert!(message.is_none(), "{token:?}: {message:?}");
        }
    }
    let basic = format!("Basic {TOKEN}");
    let (status, _) = post(&bot, None, &[("authorization", basic.as_str())], plan_call("."));
    assert_eq!(status, 401);
    let (status, _) = post(&bot, Some(TOKEN), &[("origin", "https://evil.example")], plan_call("."));
    assert_eq!(status, 403);
    let padded = plan_call(&format!(".{}", "/.".repeat(40_000)));
    let (status, _) = post(&bot, Some(TOKEN), &[], padded);
    assert_eq!(status, 413);
    assert!(!cache.exists(), "a refused request made a plan");

    // The right token: the handshake, then the plan.
    let (status, message) = post(&bot, Some(TOKEN), &[], initialize());
    let info = message.unwrap();
    assert_eq!((status, &info["result"]["serverInfo"]["name"]), (200, &json!("fluxplan")), "{info:#}");
    let (error, texts) = tool(&bot, "plan", json!({"repository": ".", "base": "HEAD~1", "head": "HEAD"}));
    assert!(!error, "{texts:?}");
    assert_is_the_cli_plan(&repo, &texts);
    assert!(cache.exists(), "the plan did not go through the render cache: the check above proves nothing");

    // Outside --mcp-allow: refused, saying how the operator allows a directory.
    let (error, texts) = tool(
        &bot,
        "plan",
        json!({"repository": outside.path().to_str().unwrap(), "base": "HEAD~1", "head": "HEAD"}),
    );
    assert!(error && texts[0].contains("outside the directories"), "{texts:?}");
    assert!(texts[0].contains("--mcp-allow"), "{texts:?}");
}

/// Attack: a token holder asks `runs` for the stored runs of repositories the bot serves but
/// --mcp-allow does not hold a checkout of: another repository, one whose name extends the
/// allowed one, the allowed one's path with `..`. Each is refused, with the same words whether
/// or not runs exist. Near miss: the repository checked out in the --mcp-allow directory (its
/// remote names it) answers with its runs.
#[test]
fn runs_answer_only_for_repositories_checked_out_in_mcp_allow() {
    let repo = fleet();
    // Its origin: git@github.com:acme/fleet.git.
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start_with(
        data.path(),
        &["--mcp-allow", repo.path().to_str().unwrap()],
        &[("FLUXPLAN_MCP_TOKEN", TOKEN.to_string())],
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let store =
            fluxplan::store::Store::connect(&fluxplan::store::Store::default_url(data.path())).await.unwrap();
        for (repository, sha) in
            [("acme/fleet", "abc123"), ("acme/other", "def456"), ("acme/fleet-evil", "0badf00d")]
        {
            store.start_run(None, "github", repository, 7, "main", sha, "pull-request", None).await.unwrap();
        }
    });
    for refused in ["acme/other", "acme/fleet-evil", "acme/fleet/../other", "acme/nothing"] {
        let (error, texts) =
            tool(&bot, "runs", json!({"forge": "github", "repository": refused, "number": 7}));
        assert!(error, "{refused}: {texts:?}");
        assert!(texts[0].contains("no checkout") && texts[0].contains("--mcp-allow"), "{texts:?}");
        assert!(!texts[0].contains("def456") && !texts[0].contains("0badf00d"), "{texts:?}");
    }
    let (error, texts) =
        tool(&bot, "runs", json!({"forge": "github", "repository": "acme/fleet", "number": 7}));
    assert!(!error, "{texts:?}");
    let runs: Value = serde_json::from_str(&texts[0]).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs:#}");
    assert_eq!(runs[0]["head_sha"], "abc123");
}

/// Without a token configured `/mcp` is not served; with the token from a file and no
/// --mcp-allow, every repository is refused with what to do, for `plan` and `runs` alike.
#[test]
fn mcp_is_off_without_a_token_and_plans_nothing_without_mcp_allow() {
    let repo = fleet();
    let data = tempfile::tempdir().unwrap();
    let bot = Bot::start(data.path(), &[]);
    let (status, _) = post(&bot, Some(TOKEN), &[], initialize());
    assert_eq!(status, 404);
    drop(bot);

    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("mcp-token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let bot = Bot::start(data.path(), &[("FLUXPLAN_MCP_TOKEN_FILE", file.to_str().unwrap().to_string())]);
    let (error, texts) = tool(
        &bot,
        "plan",
        json!({"repository": repo.path().to_str().unwrap(), "base": "HEAD~1", "head": "HEAD"}),
    );
    assert!(error, "{texts:?}");
    assert!(texts[0].contains("plans no repository") && texts[0].contains("--mcp-allow"), "{texts:?}");
    let (error, texts) =
        tool(&bot, "runs", json!({"forge": "github", "repository": "acme/fleet", "number": 7}));
    assert!(error, "{texts:?}");
    assert!(texts[0].contains("runs of no repository") && texts[0].contains("--mcp-allow"), "{texts:?}");
}
