//! The HTTP service: webhooks in (verified, parsed, recorded and queued; the answer comes at once),
//! health, readiness, metrics, and the run history pages.

pub mod budget;
pub mod listen;
pub mod mcp;
pub mod metrics;
pub mod pages;

use crate::forge::webhook::{self, Event, ParseError};
use crate::forge::ForgeKind;
use crate::jobs::jobs_for;
use crate::store::{Enqueued, Store};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use metrics::{Metrics, Refusal};
use serde_json::json;
use std::sync::Arc;

/// Largest webhook body accepted (GitHub caps payloads at 25 MB).
pub const MAX_WEBHOOK_BYTES: usize = 25 * 1024 * 1024;
/// How long a webhook may wait on the database before it is answered 503 (GitHub gives up
/// after 10 s and never redelivers).
const DATABASE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(4);
/// Most bytes of webhook bodies held at once before their signature is checked (received bytes,
/// in memory up to `budget::SPOOL_ABOVE` per body, spooled to the data directory past it):
/// unsigned bodies cannot fill the disk, whatever their number.
pub const DEFAULT_MAX_UNVERIFIED_BYTES: usize = 1024 * 1024 * 1024;
/// Most of those one client (peer address) may hold: room for one largest body, and more; it
/// takes 32 clients to fill the default budget.
pub const DEFAULT_UNVERIFIED_BYTES_PER_CLIENT: usize = 32 * 1024 * 1024;
/// Bytes per second a webhook body must average after `budget::RATE_GRACE`: 25 MiB takes 100 s
/// at this rate (GitHub sends it in well under a second), and a slow sender gives back its share
/// in seconds.
pub const DEFAULT_MIN_BODY_RATE: u64 = 256 * 1024;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub metrics: Arc<Metrics>,
    pub github_secrets: Arc<Vec<String>>,
    pub gitlab_tokens: Arc<Vec<String>>,
    pub allow_forks: bool,
    /// Bytes of unverified webhook bodies that may be held at once, and per client.
    pub unverified: Arc<budget::UnverifiedBudget>,
    /// Where bodies too large to keep in memory are spooled while they are read.
    pub spool: budget::Spool,
    /// Time a client has to send a webhook body.
    pub body_timeout: std::time::Duration,
    /// Bytes per second a webhook body must average after a short grace (0: no minimum).
    pub min_body_rate: u64,
    /// The credential that opens the run index (and every run page); without it the index is off.
    pub runs_token: Option<Arc<String>>,
    /// Forges not answering yet (the bot has not learned who it is there): not ready.
    pub forges_unready: Arc<std::sync::Mutex<Vec<String>>>,
    /// No forge is configured: plans could not be posted anywhere, so never ready.
    pub no_forge: bool,
    /// Told when a delivery is refused for the database: the bot catches up once it answers.
    pub recovery: Arc<crate::jobs::recovery::Recovery>,
    /// Whether the forges still take the bot's token.
    pub token_watch: TokenWatch,
    /// `/mcp` and its token; `None`: off (404).
    pub mcp: Option<mcp::Endpoint>,
}

/// The forge clients' view of the token: a forge that has refused it this long makes the bot
/// unready (nothing it plans can be posted until an operator replaces the token).
#[derive(Clone, Default)]
pub struct TokenWatch {
    pub gates: Vec<Arc<crate::forge::gate::Gate>>,
    pub unready_after: std::time::Duration,
}

impl TokenWatch {
    /// Why the bot is not ready, if a forge has refused the token for too long.
    fn refused(&self) -> Option<String> {
        let refused: Vec<String> = self
            .gates
            .iter()
            .filter_map(|gate| {
                let long = gate.token_refused_for().filter(|d| *d >= self.unready_after)?;
                let forge = gate.forge();
                let setting = match forge {
                    ForgeKind::GitHub => "FLUXPLAN_GITHUB_TOKEN (or the GitHub App's key)",
                    ForgeKind::GitLab => "FLUXPLAN_GITLAB_TOKEN",
                };
                Some(format!(
                    "{} has refused the token for {}s (HTTP 401): replace {setting}",
                    forge.name(),
                    long.as_secs()
                ))
            })
            .collect();
        (!refused.is_empty()).then(|| refused.join("; "))
    }
}

impl AppState {
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        github_secrets: Vec<String>,
        gitlab_tokens: Vec<String>,
        allow_forks: bool,
    ) -> Self {
        AppState {
            store,
            metrics: metrics.clone(),
            github_secrets: Arc::new(github_secrets.into_iter().filter(|s| !s.is_empty()).collect()),
            gitlab_tokens: Arc::new(gitlab_tokens.into_iter().filter(|s| !s.is_empty()).collect()),
            allow_forks,
            unverified: budget::UnverifiedBudget::new(
                DEFAULT_MAX_UNVERIFIED_BYTES,
                DEFAULT_UNVERIFIED_BYTES_PER_CLIENT,
                metrics.unverified_bytes.clone(),
            ),
            spool: budget::Spool(std::env::temp_dir()),
            body_timeout: std::time::Duration::from_secs(10),
            min_body_rate: DEFAULT_MIN_BODY_RATE,
            runs_token: None,
            forges_unready: Arc::default(),
            no_forge: false,
            recovery: Arc::default(),
            token_watch: TokenWatch::default(),
            mcp: None,
        }
    }
}

/// Every route: webhooks, health, readiness, metrics, the run pages and MCP.
pub fn router(state: AppState) -> Router {
    routes(true).with_state(state)
}

/// The main listener's routes when `/metrics` has a listener of its own ([`metrics_router`]):
/// every route but `/metrics`, which answers 404 there.
pub fn router_without_metrics(state: AppState) -> Router {
    routes(false).with_state(state)
}

/// `/metrics` alone, for a listener of its own (`--metrics-listen`).
pub fn metrics_router(state: AppState) -> Router {
    Router::new().route("/metrics", get(metrics_page)).with_state(state)
}

fn routes(with_metrics: bool) -> Router<AppState> {
    let routes = Router::new()
        .route("/webhooks/github", post(github_webhook))
        .route("/webhooks/gitlab", post(gitlab_webhook))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/mcp", any(mcp::mcp));
    let routes = if with_metrics { routes.route("/metrics", get(metrics_page)) } else { routes };
    routes.merge(pages::routes()).layer(DefaultBodyLimit::max(MAX_WEBHOOK_BYTES))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn refuse(
    state: &AppState,
    forge: ForgeKind,
    reason: Refusal,
    status: StatusCode,
    message: &str,
) -> Response {
    state.metrics.refused(forge, reason);
    tracing::warn!(forge = forge.as_str(), reason = reason.as_str(), "webhook refused: {message}");
    (status, Json(json!({"error": message}))).into_response()
}

async fn github_webhook(State(state): State<AppState>, request: Request) -> Response {
    // The signature is computed as the body comes: an unsigned body is never read back.
    let mut check = webhook::GithubSignature::new(
        &state.github_secrets,
        header(request.headers(), "x-hub-signature-256"),
    );
    let (headers, received) =
        match read_body(&state, ForgeKind::GitHub, request, false, |chunk| check.update(chunk)).await {
            Ok(read) => read,
            Err(refused) => return refused,
        };
    if !check.verify() {
        return refuse(
            &state,
            ForgeKind::GitHub,
            Refusal::Signature,
            StatusCode::UNAUTHORIZED,
            "missing or invalid X-Hub-Signature-256",
        );
    }
    let body = match in_memory(&state, ForgeKind::GitHub, received).await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let event = header(&headers, "x-github-event").unwrap_or("").to_string();
    let delivery = header(&headers, "x-github-delivery").map(str::to_string);
    accept(&state, ForgeKind::GitHub, &event, delivery, &body, webhook::parse_github(&event, &body)).await
}

async fn gitlab_webhook(State(state): State<AppState>, request: Request) -> Response {
    // GitLab's token is a header: checked before a byte of the body is read.
    if !webhook::verify_gitlab_token(&state.gitlab_tokens, header(request.headers(), "x-gitlab-token")) {
        return refuse(
            &state,
            ForgeKind::GitLab,
            Refusal::Token,
            StatusCode::UNAUTHORIZED,
            "missing or invalid X-Gitlab-Token",
        );
    }
    let (headers, received) = match read_body(&state, ForgeKind::GitLab, request, true, |_| ()).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let body = match in_memory(&state, ForgeKind::GitLab, received).await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let event = header(&headers, "x-gitlab-event").unwrap_or("").to_string();
    let delivery = header(&headers, "x-gitlab-event-uuid")
        .or_else(|| header(&headers, "x-gitlab-webhook-uuid"))
        .map(str::to_string);
    accept(&state, ForgeKind::GitLab, &event, delivery, &body, webhook::parse_gitlab(&event, &body)).await
}

/// A verified body, read back when it was spooled.
async fn in_memory(
    state: &AppState,
    forge: ForgeKind,
    received: budget::Received,
) -> Result<Bytes, Response> {
    received.into_bytes().await.map_err(|e| {
        tracing::error!(error = %e, "cannot read a spooled webhook body back");
        refuse(state, forge, Refusal::Spool, StatusCode::SERVICE_UNAVAILABLE, "the body cannot be read back")
    })
}

/// 503 with a hint to come back later.
fn busy(state: &AppState, forge: ForgeKind, reason: Refusal, message: &str) -> Response {
    let mut busy = refuse(state, forge, reason, StatusCode::SERVICE_UNAVAILABLE, message);
    busy.headers_mut().insert("retry-after", axum::http::HeaderValue::from_static("5"));
    busy
}

/// Reads a webhook body within the size and time limits, at the minimum rate, showing each chunk
/// to `each`. A body not yet verified must say its length, and each chunk of it must fit in what
/// is left of the unverified budget and of its client's share: charged as received, so announcing
/// a body holds nothing until its bytes come.
async fn read_body(
    state: &AppState,
    forge: ForgeKind,
    request: Request,
    verified: bool,
    each: impl FnMut(&[u8]),
) -> Result<(HeaderMap, budget::Received), Response> {
    let (parts, body) = request.into_parts();
    // Without a peer (a router driven in-process), every request is one client.
    let peer = parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |info| info.0.ip());
    let length = header(&parts.headers, "content-length").and_then(|l| l.parse::<usize>().ok());
    if length.is_some_and(|l| l > MAX_WEBHOOK_BYTES) {
        return Err(refuse(
            state,
            forge,
            Refusal::TooLarge,
            StatusCode::PAYLOAD_TOO_LARGE,
            "the body is over 25 MiB",
        ));
    }
    if !verified && length.is_none() {
        return Err(refuse(
            state,
            forge,
            Refusal::NoLength,
            StatusCode::LENGTH_REQUIRED,
            "Content-Length is required",
        ));
    }
    let share = (!verified).then(|| state.unverified.share(peer));
    let pace = budget::Pace { deadline: state.body_timeout, min_rate: state.min_body_rate };
    match budget::read(body, MAX_WEBHOOK_BYTES, pace, share, &state.spool, each).await {
        Ok(received) => Ok((parts.headers, received)),
        Err(budget::ReadError::TooLarge) => Err(refuse(
            state,
            forge,
            Refusal::TooLarge,
            StatusCode::PAYLOAD_TOO_LARGE,
            "the body is over 25 MiB or broken",
        )),
        Err(error @ budget::ReadError::TimedOut) => {
            Err(refuse(state, forge, Refusal::Timeout, StatusCode::REQUEST_TIMEOUT, &error.to_string()))
        }
        Err(error @ budget::ReadError::TooSlow) => {
            Err(refuse(state, forge, Refusal::TooSlow, StatusCode::REQUEST_TIMEOUT, &error.to_string()))
        }
        Err(budget::ReadError::NoRoom(no_room)) => {
            let reason = match no_room {
                budget::NoRoom::ClientShare => Refusal::ClientShare,
                budget::NoRoom::Total => Refusal::Busy,
            };
            Err(busy(state, forge, reason, &no_room.to_string()))
        }
        Err(error @ budget::ReadError::Spool) => Err(busy(state, forge, Refusal::Spool, &error.to_string())),
    }
}

/// Records the delivery and queues its jobs, then answers at once.
async fn accept(
    state: &AppState,
    forge: ForgeKind,
    event_name: &str,
    delivery: Option<String>,
    body: &[u8],
    parsed: Result<Event, ParseError>,
) -> Response {
    let event = match parsed {
        Ok(event) => event,
        Err(e) => return refuse(state, forge, Refusal::Payload, StatusCode::BAD_REQUEST, &e.to_string()),
    };
    state.metrics.received(forge, event_name);
    let payloads = match jobs_for(&event, state.allow_forks) {
        Ok(payloads) => payloads,
        Err(reason) => return (StatusCode::OK, Json(json!({"ignored": reason}))).into_response(),
    };
    if payloads.is_empty() {
        let reason = match &event {
            Event::Ignored(why) => why.clone(),
            _ => "nothing to do".into(),
        };
        return (StatusCode::OK, Json(json!({"ignored": reason}))).into_response();
    }
    let repo = match &event {
        Event::Pull(p) => p.repo.full_name.clone(),
        Event::Comment(c) => c.repo.full_name.clone(),
        Event::Push(p) => p.repo.full_name.clone(),
        Event::MergeGroup(g) => g.repo.full_name.clone(),
        Event::Ignored(_) => String::new(),
    };
    // Without a delivery id, the body itself identifies the delivery.
    let delivery = delivery.unwrap_or_else(|| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(body)));
    let jobs: Vec<_> = payloads.iter().map(|p| p.to_job()).collect();
    // A database that hangs mid-query must not hold the answer past the forge's own timeout.
    let recorded = tokio::time::timeout(
        DATABASE_DEADLINE,
        state.store.record_delivery(forge.as_str(), &delivery, event_name, &repo, &jobs),
    )
    .await
    .unwrap_or_else(|_| {
        Err(anyhow::anyhow!("the database did not answer in {}s", DATABASE_DEADLINE.as_secs()))
    });
    match recorded {
        Ok(Enqueued::Duplicate) => (StatusCode::OK, Json(json!({"duplicate": delivery}))).into_response(),
        Ok(Enqueued::Jobs { queued, superseded }) => {
            tracing::info!(
                forge = forge.as_str(),
                repo,
                event = event_name,
                delivery,
                queued,
                superseded,
                "webhook queued"
            );
            (StatusCode::ACCEPTED, Json(json!({"queued": queued, "superseded": superseded}))).into_response()
        }
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "cannot record a webhook");
            // The forge does not redeliver on its own: once the database answers again, the
            // resync catches up with the open pull requests (`jobs::recovery`).
            state.recovery.database_failed();
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"error": "the database is unavailable"})))
                .into_response()
        }
    }
}

/// Why a bot without a forge is not ready (`/readyz`, and the log at start).
pub const NO_FORGE: &str = "no forge configured: set FLUXPLAN_GITHUB_TOKEN (or FLUXPLAN_GITHUB_APP_ID and \
                            FLUXPLAN_GITHUB_APP_PRIVATE_KEY) or FLUXPLAN_GITLAB_TOKEN: plans cannot be posted";

async fn readyz(State(state): State<AppState>) -> Response {
    if state.no_forge {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {NO_FORGE}\n")).into_response();
    }
    let unready = state.forges_unready.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if !unready.is_empty() {
        let message =
            format!("not answering yet (the bot does not know who it is there): {}", unready.join(", "));
        return (StatusCode::SERVICE_UNAVAILABLE, message).into_response();
    }
    if let Some(refused) = state.token_watch.refused() {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {refused}\n")).into_response();
    }
    match state.store.ping().await {
        Ok(()) => {
            (StatusCode::OK, format!("ready\nsandbox: {}\n", crate::sandbox::status().detail)).into_response()
        }
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("database unreachable: {e}")).into_response(),
    }
}

async fn metrics_page(State(state): State<AppState>) -> Response {
    if let Ok(counts) = state.store.job_counts().await {
        state.metrics.set_jobs(&counts);
    }
    ([("content-type", "text/plain; version=0.0.4")], state.metrics.render()).into_response()
}
