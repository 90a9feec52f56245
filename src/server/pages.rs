//! The run pages: the index of runs (newest first, paged) and one run's page with its plan as
//! HTML. What they show came from pull requests: the templates escape it, the plan's markdown
//! goes through `report::html`, and the Content-Security-Policy runs no script at all. Their
//! addresses carry tokens: no referrer leaves them, and no cache keeps them.

use super::{header, AppState};
use crate::forge::{webhook, ForgeKind};
use crate::store::RunRow;
use axum::extract::{Path, Query, State};
use axum::http::{header as names, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use minijinja::Environment;
use serde_json::{json, Value};
use std::sync::OnceLock;

/// The pages' one style sheet, inline: the policy allows it by its hash, and nothing else.
const CSS: &str = include_str!("../../templates/pages.css");

/// Runs per index page unless `per_page` says otherwise, the sizes offered, and the most allowed.
const DEFAULT_PER_PAGE: i64 = 50;
const PER_PAGE_CHOICES: [i64; 4] = [25, 50, 100, 200];
const MAX_PER_PAGE: i64 = 200;
/// Past this page number the offset would overflow; nobody pages that far.
const MAX_PAGE: i64 = 1_000_000_000;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/runs", get(runs_page))
        .route("/runs/{id}", get(run_page))
        .route("/runs/{id}/plan.json", get(run_json))
        .layer(axum::middleware::map_response(with_page_headers))
}

/// `default-src 'none'`: no script, frame, font, image or connection; only the sheet above.
fn content_security_policy() -> &'static str {
    static POLICY: OnceLock<String> = OnceLock::new();
    POLICY.get_or_init(|| {
        use base64::Engine;
        use sha2::Digest;
        let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(CSS));
        format!(
            "default-src 'none'; style-src 'sha256-{hash}'; base-uri 'none'; form-action 'none'; \
             frame-ancestors 'none'"
        )
    })
}

async fn with_page_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    if let Ok(policy) = HeaderValue::from_str(content_security_policy()) {
        headers.insert(names::CONTENT_SECURITY_POLICY, policy);
    }
    // Links to the forge must not carry the page's address (and its token) away.
    headers.insert(names::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(names::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(names::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn templates() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.add_template("runs.html", include_str!("../../templates/runs.html.j2"))
            .expect("runs.html.j2 parses");
        env.add_template("run.html", include_str!("../../templates/run.html.j2"))
            .expect("run.html.j2 parses");
        env
    })
}

fn page(template: &str, mut context: Value) -> Response {
    context["css"] = json!(CSS);
    match templates().get_template(template).and_then(|t| t.render(context)) {
        Ok(html) => Html(html).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render the page: {e}")).into_response(),
    }
}

#[derive(serde::Deserialize)]
struct RunsQuery {
    page: Option<i64>,
    per_page: Option<i64>,
    token: Option<String>,
}

#[derive(serde::Deserialize)]
struct RunQuery {
    token: Option<String>,
}

/// True when `given` (a query parameter or a bearer token) is the run index credential.
fn index_allowed(state: &AppState, headers: &HeaderMap, given: Option<&str>) -> bool {
    let Some(expected) = &state.runs_token else { return false };
    let bearer = header(headers, "authorization").and_then(|h| h.strip_prefix("Bearer "));
    [given, bearer].into_iter().flatten().any(|token| webhook::tokens_equal(expected, token))
}

/// A run page opens with its own token, or with the index credential.
fn run_allowed(state: &AppState, headers: &HeaderMap, run: &RunRow, given: Option<&str>) -> bool {
    let own = run
        .page_token
        .as_deref()
        .zip(given)
        .is_some_and(|(expected, token)| webhook::tokens_equal(expected, token));
    own || index_allowed(state, headers, given)
}

/// What a page without the right token answers: the same as a missing run, so ids tell nothing.
fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "no such run").into_response()
}

async fn runs_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<RunsQuery>,
) -> Response {
    if state.runs_token.is_none() {
        return (StatusCode::NOT_FOUND, "the run index is off: set FLUXPLAN_RUNS_TOKEN to open it")
            .into_response();
    }
    if !index_allowed(&state, &headers, query.token.as_deref()) {
        return (
            StatusCode::UNAUTHORIZED,
            "the run index needs its token (?token= or Authorization: Bearer)",
        )
            .into_response();
    }
    let number = query.page.unwrap_or(1).clamp(1, MAX_PAGE);
    let per_page = query.per_page.unwrap_or(DEFAULT_PER_PAGE).clamp(1, MAX_PER_PAGE);
    let offset = (number - 1) * per_page;
    // One more than shown: whether an older page exists.
    let mut runs = match state.store.runs(per_page + 1, offset).await {
        Ok(runs) => runs,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, format!("cannot read runs: {e}")).into_response(),
    };
    let older = runs.len() as i64 > per_page;
    runs.truncate(per_page as usize);
    // A token that came in the address goes on in the paging links; a bearer token stays out.
    let link = |page: i64, per_page: i64| index_link(page, per_page, query.token.as_deref());
    let sizes: Vec<Value> = PER_PAGE_CHOICES
        .iter()
        .map(|&size| json!({"per_page": size, "current": size == per_page, "link": link(1, size)}))
        .collect();
    page(
        "runs.html",
        json!({
            "runs": runs.iter().map(index_row).collect::<Vec<_>>(),
            "page": number,
            "first": offset + 1,
            "last": offset + runs.len() as i64,
            "previous": (number > 1).then(|| link(number - 1, per_page)),
            "next": older.then(|| link(number + 1, per_page)),
            "first_page": link(1, per_page),
            "sizes": sizes,
        }),
    )
}

fn index_link(page: i64, per_page: i64, token: Option<&str>) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("page", &page.to_string()).append_pair("per_page", &per_page.to_string());
    if let Some(token) = token {
        query.append_pair("token", token);
    }
    format!("/runs?{}", query.finish())
}

/// A run's line in the index: its link carries its own token.
fn index_row(run: &RunRow) -> Value {
    let links = Links::of(run);
    json!({
        "id": run.id,
        "token": run.page_token,
        "created": display_time(run.created_at),
        "created_iso": iso_time(run.created_at),
        "duration": run.finished_at.map(|end| duration(end - run.created_at)),
        "forge_name": links.forge.map_or(run.forge.as_str(), |f| f.name()),
        "repo": run.repo,
        "pr_number": run.pr_number,
        "pull_url": links.pull,
        "head_short": run.head_sha.get(..8).unwrap_or(&run.head_sha),
        "head_url": links.commit(&run.head_sha),
        "trigger": run.trigger,
        "status": run.status,
        "status_class": known_class(&run.status),
        "verdict": run.verdict,
        "verdict_class": run.verdict.as_deref().map_or("", known_class),
        "approved_by": run.approved_by,
    })
}

/// Links to the forge, when the run knows the repository's web address.
struct Links<'a> {
    forge: Option<ForgeKind>,
    web_url: Option<&'a str>,
    pull: Option<String>,
}

impl<'a> Links<'a> {
    fn of(run: &'a RunRow) -> Self {
        let forge = ForgeKind::from_name(&run.forge);
        let web_url = run.web_url.as_deref().filter(|_| forge.is_some());
        // A merge group that names no pull request is filed under 0.
        let pull =
            forge.zip(web_url).filter(|_| run.pr_number > 0).map(|(f, web)| f.pull_page(web, run.pr_number));
        Links { forge, web_url, pull }
    }

    fn commit(&self, sha: &str) -> Option<String> {
        let (forge, web) = self.forge.zip(self.web_url)?;
        crate::git::is_commit_id(sha).then(|| forge.commit_page(web, sha))
    }
}

/// A class for the page's style sheet, for the statuses and verdicts it knows.
fn known_class(word: &str) -> &'static str {
    match word {
        "no-changes" => "no-changes",
        "changes" => "changes",
        "blocked" => "blocked",
        "failed" => "failed",
        "abandoned" => "abandoned",
        "done" => "done",
        _ => "",
    }
}

/// What started a run, for people.
fn trigger_text(trigger: &str, pull_noun: &str) -> String {
    match trigger {
        "pull-request" => format!("a {pull_noun} webhook (opened, pushed to, reopened or retargeted)"),
        "command" => "a /fluxplan plan command".into(),
        "base-push" => "a push to the base branch".into(),
        "moved" => format!("the {pull_noun} moved while it was planned"),
        "resync" => "the resync (no current plan of this head)".into(),
        "cluster-changed" => "the resync (the cluster's inventory changed)".into(),
        "merge" => format!("the merge of the {pull_noun}"),
        "merge-group" => "a merge queue group".into(),
        "given-up" => "the planner process stopped during every attempt".into(),
        other => other.to_string(),
    }
}

fn iso_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

fn display_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

/// "850 ms", "12.3 s", "4 min 05 s", "1 h 02 min".
fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {:02} s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{} h {:02} min", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// What the run page shows of a run. Its plan.json link carries the run's own token, never the
/// one the page was opened with (which may be the index credential).
fn run_view(run: &RunRow) -> Value {
    let links = Links::of(run);
    let pull_noun = links.forge.map_or("pull request", |f| f.pull_noun());
    let plan_json_url = run.plan_json.as_ref().map(|_| match &run.page_token {
        Some(token) => format!("/runs/{}/plan.json?token={token}", run.id),
        None => format!("/runs/{}/plan.json", run.id),
    });
    json!({
        "id": run.id,
        "forge_name": links.forge.map_or(run.forge.as_str(), |f| f.name()),
        "repo": run.repo,
        "pr_number": run.pr_number,
        "pull_noun": pull_noun,
        "pull_url": links.pull,
        "base_ref": run.base_ref,
        "base_sha": run.base_sha,
        "base_url": run.base_sha.as_deref().and_then(|sha| links.commit(sha)),
        "head_sha": run.head_sha,
        "head_url": links.commit(&run.head_sha),
        "merge_sha": run.merge_sha,
        "merge_url": run.merge_sha.as_deref().and_then(|sha| links.commit(sha)),
        "trigger": run.trigger,
        "trigger_text": trigger_text(&run.trigger, pull_noun),
        "status": run.status,
        "verdict": run.verdict,
        "verdict_class": run.verdict.as_deref().map_or("", known_class),
        "approved_by": run.approved_by,
        "created": display_time(run.created_at),
        "created_iso": iso_time(run.created_at),
        "finished": run.finished_at.map(display_time),
        "finished_iso": run.finished_at.map(iso_time),
        "duration": run.finished_at.map(|end| duration(end - run.created_at)),
        "error": run.error.as_deref().map(|e| crate::report::in_forge_words(e, pull_noun)),
        "followup_outcome": run.followup_outcome,
        "plan_json_url": plan_json_url,
    })
}

/// The run `id` when this request may see it; else the answer to give (404 alike for a run that
/// does not exist and one the token does not open).
async fn allowed_run(
    state: &AppState,
    headers: &HeaderMap,
    id: i64,
    token: Option<&str>,
) -> Result<RunRow, Response> {
    match state.store.run(id).await {
        Ok(Some(run)) if run_allowed(state, headers, &run, token) => Ok(run),
        Ok(_) => Err(not_found()),
        Err(e) => Err((StatusCode::SERVICE_UNAVAILABLE, format!("cannot read the run: {e}")).into_response()),
    }
}

async fn run_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Query(query): Query<RunQuery>,
) -> Response {
    let run = match allowed_run(&state, &headers, id, query.token.as_deref()).await {
        Ok(run) => run,
        Err(answer) => return answer,
    };
    let parse = |text: &Option<String>| {
        text.as_deref().and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
    };
    let (alerts, counts, timings, notes) =
        (parse(&run.alerts), parse(&run.counts), parse(&run.timings), parse(&run.notes));
    let plan_html =
        run.comment.as_deref().map(|c| crate::report::html::markdown_to_html(&without_link_here(c)));
    let (capacity, capacity_notes) = stored_capacity(run.plan_json.as_deref());
    page(
        "run.html",
        json!({
            "run": run_view(&run), "alerts": alerts, "counts": counts, "timings": timings,
            "notes": notes, "plan_html": plan_html, "capacity": capacity, "capacity_notes": capacity_notes,
        }),
    )
}

/// The capacity table of a stored plan JSON, and its notes: nothing when the plan has none or
/// was stored by a fluxplan without it.
fn stored_capacity(plan_json: Option<&str>) -> (Vec<crate::plan::capacity::Row>, Vec<String>) {
    let capacity = plan_json
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .and_then(|plan| {
            serde_json::from_value::<crate::plan::capacity::Capacity>(plan["capacity"].clone()).ok()
        })
        .unwrap_or_default();
    crate::plan::capacity::rows(&capacity)
}

/// The posted comment without its link to the run page: on that page, the link would be itself.
/// Repository text in a comment has its brackets escaped, so only the bot's own line starts so.
fn without_link_here(comment: &str) -> String {
    comment
        .lines()
        .filter(|line| !line.starts_with(crate::jobs::RUN_PAGE_LINK))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn run_json(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Query(query): Query<RunQuery>,
) -> Response {
    match allowed_run(&state, &headers, id, query.token.as_deref()).await.map(|run| run.plan_json) {
        Ok(Some(plan)) => ([("content-type", "application/json")], plan).into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "this run has no plan").into_response(),
        Err(answer) => answer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_page_reads_the_stored_plans_capacity_and_tolerates_old_or_broken_json() {
        let side = |cpu: u64| {
            json!({"total": {"cpuRequestMillicores": cpu, "memoryRequestBytes": 0, "cpuLimitMillicores": null,
                             "memoryLimitBytes": 0, "storageBytes": 0}})
        };
        let plan = json!({"capacity": [{"cluster": "clusters/prod", "nodes": null, "namespaces": [
            {"namespace": "<shop>", "before": side(500), "after": side(2500), "notes": ["counted at 3"]}]}]});
        let (rows, notes) = stored_capacity(Some(&plan.to_string()));
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].namespace.as_str(), rows[0].cpu_requests.as_str()), ("<shop>", "500m → 2.5"));
        assert_eq!(notes, ["clusters/prod <shop>: counted at 3"]);
        let html = page(
            "run.html",
            json!({"run": {"id": 1}, "capacity": rows, "capacity_notes": notes, "plan_html": null}),
        );
        let body = futures::executor::block_on(axum::body::to_bytes(html.into_body(), usize::MAX)).unwrap();
        let body = String::from_utf8_lossy(&body);
        assert!(body.contains("<code>&lt;shop&gt;</code>") && !body.contains("<shop>"), "{body}");
        for stored in [None, Some("not json"), Some("{}"), Some(r#"{"capacity": 7}"#)] {
            assert_eq!(stored_capacity(stored), (Vec::new(), Vec::new()), "{stored:?}");
        }
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_345), "12.3 s");
        assert_eq!(duration(245_000), "4 min 05 s");
        assert_eq!(duration(3_720_000), "1 h 02 min");
        assert_eq!(duration(-5), "0 ms");
    }

    #[test]
    fn times_are_utc() {
        assert_eq!(display_time(1_700_000_000_123), "2023-11-14 22:13:20 UTC");
        assert_eq!(iso_time(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn paging_links_carry_only_a_token_given_in_the_address() {
        assert_eq!(index_link(2, 50, None), "/runs?page=2&per_page=50");
        assert_eq!(index_link(1, 25, Some("a b&c")), "/runs?page=1&per_page=25&token=a+b%26c");
    }

    #[test]
    fn the_policy_names_the_hash_of_the_style_sheet_and_allows_no_script() {
        let policy = content_security_policy();
        assert!(policy.starts_with("default-src 'none'; style-src 'sha256-"), "{policy}");
        assert!(!policy.contains("unsafe") && !policy.contains("script-src"), "{policy}");
    }
}
