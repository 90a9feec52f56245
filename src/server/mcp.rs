//! `/mcp`: the MCP server (src/mcp) over streamable HTTP, for agents holding the MCP token. The
//! token is checked before anything of the request is read; without one configured the route
//! answers 404.

use super::{header, AppState};
use crate::forge::webhook::tokens_equal;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// What `/mcp` needs: the token that opens it and the MCP service.
#[derive(Clone)]
pub struct Endpoint {
    pub token: Arc<String>,
    pub service: crate::mcp::http::Service,
}

pub async fn mcp(State(state): State<AppState>, request: Request) -> Response {
    let Some(endpoint) = &state.mcp else {
        return (StatusCode::NOT_FOUND, "MCP is off: set FLUXPLAN_MCP_TOKEN to serve it").into_response();
    };
    let bearer = header(request.headers(), "authorization").and_then(|h| h.strip_prefix("Bearer "));
    if !bearer.is_some_and(|token| tokens_equal(&endpoint.token, token)) {
        tracing::warn!("MCP request refused: missing or wrong token");
        return (
            StatusCode::UNAUTHORIZED,
            [("www-authenticate", "Bearer")],
            "MCP needs its token: Authorization: Bearer <token>",
        )
            .into_response();
    }
    endpoint.service.handle(request).await.map(axum::body::Body::new)
}
