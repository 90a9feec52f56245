//! The MCP server over streamable HTTP, for `serve` to mount at `/mcp` behind its bearer token
//! (src/server/mcp.rs). Stateless: every POST is answered on its own, in JSON, so no session
//! outlives a request and replicas need share nothing.

use super::{Server, Settings};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

/// Largest request body: a tool call names a repository, two revisions and an object.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

pub type Service = StreamableHttpService<Server, LocalSessionManager>;

/// The service answering MCP requests with one [`Server`]: its one-plan-at-a-time turn is shared
/// by every request.
pub fn service(settings: Settings) -> Service {
    let server = Server::new(settings);
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(MAX_REQUEST_BYTES)
        // The Host check guards servers without credentials against DNS rebinding, which takes a
        // browser: every request here needs the token, which a browser's page does not have, and
        // any request carrying an `Origin` (what browsers add) is refused. Agents reach `serve`
        // by names the operator chooses (Service, Ingress), so the Host is not checked.
        .disable_allowed_hosts()
        .enforce_origin_validation();
    StreamableHttpService::new(move || Ok(server.clone()), Default::default(), config)
}
