//! GitHub check runs: the `fluxplan` check on a head commit, carrying the verdict (its conclusion),
//! the plan (its summary) and annotations on the lines that cause each alert. Shared by `serve`
//! (as a GitHub App) and `fluxplan plan --github-check-run` (with the Actions token).
//!
//! GitHub's documented rules (docs.github.com/en/rest/checks/runs): only GitHub Apps (the
//! Actions token included) may write check runs, with `checks: write`; `output.summary` and
//! `output.text` hold at most 65,535 characters each; at most 50 annotations per request: more go
//! in further updates, which append to the ones already there. So annotations are only ever sent
//! with a completed state, and a completed run is never updated with annotations again: a write
//! that finds its run completed creates a new one (GitHub shows the newest run of a name), and
//! repeating a write never doubles its annotations.
//!
//! Requests go through the client's raw calls, as every other GitHub call does (status codes and
//! rate-limit headers stay visible); octocrab's typed checks builder would hide them.

use super::github::{GitHub, Method};
use super::{ForgeError, RepoInfo, StatusState};
use crate::plan::{Plan, Severity};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The check's name: branch protection and rulesets can require it.
pub const CHECK_NAME: &str = "fluxplan";
/// GitHub's limit on annotations in one create or update request.
pub const MAX_ANNOTATIONS_PER_REQUEST: usize = 50;
/// GitHub's limit on `output.summary` and `output.text`.
pub const MAX_OUTPUT_CHARS: usize = 65_535;
/// GitHub's limits on an annotation's `title` and `message` (64 KB; kept well under).
const MAX_TITLE_CHARS: usize = 255;
const MAX_MESSAGE_CHARS: usize = 8_000;
/// GitHub's limit on `output.title`.
const MAX_OUTPUT_TITLE_CHARS: usize = 255;

/// Where the GitHub verdict goes: the commit status, the check run, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ChecksMode {
    /// Both as a GitHub App, the status only with a token (tokens of users cannot write checks).
    #[default]
    Auto,
    /// The `fluxplan` commit status only.
    Status,
    /// The commit status and the `fluxplan` check run.
    Both,
    /// The check run only (make it the required check); the status when check runs are refused.
    CheckRun,
}

/// An annotation's level, as GitHub names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnnotationLevel {
    Notice,
    Warning,
    Failure,
}

/// A finding on one line of a file of the head revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotation {
    pub path: String,
    pub line: u32,
    pub level: AnnotationLevel,
    pub title: String,
    pub message: String,
}

impl Annotation {
    /// As the API takes it: plain data (GitHub shows `title` and `message` as text, not markdown).
    fn to_json(&self) -> Value {
        json!({
            "path": self.path,
            "start_line": self.line,
            "end_line": self.line,
            "annotation_level": self.level,
            "title": cut(&self.title, MAX_TITLE_CHARS),
            "message": cut(&self.message, MAX_MESSAGE_CHARS),
        })
    }
}

/// What a check run shows beyond its state and title: the plan and its annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOutput {
    /// The plan's markdown (the comment): the first part is the summary, the second the text.
    pub markdown: String,
    pub annotations: Vec<Annotation>,
}

impl CheckOutput {
    /// The plan as `markdown` says it, with an annotation for every location of every alert:
    /// danger → failure, warning → warning, info → notice. Duplicates (one line, one code) go.
    pub fn of_plan(plan: &Plan, markdown: &str) -> Self {
        let mut annotations: Vec<Annotation> = Vec::new();
        for alert in &plan.alerts {
            let level = match alert.severity {
                Severity::Danger => AnnotationLevel::Failure,
                Severity::Warning => AnnotationLevel::Warning,
                Severity::Info => AnnotationLevel::Notice,
            };
            for location in &alert.locations {
                let Some(path) = annotation_path(&location.path) else { continue };
                let title = match &alert.kustomization {
                    Some(k) => format!("fluxplan {}: {} on {k}", severity_word(alert.severity), alert.code),
                    None => format!("fluxplan {}: {}", severity_word(alert.severity), alert.code),
                };
                let annotation = Annotation {
                    path,
                    line: location.line.max(1),
                    level,
                    title,
                    message: alert.message.clone(),
                };
                if !annotations.contains(&annotation) {
                    annotations.push(annotation);
                }
            }
        }
        // The most severe first: if GitHub keeps only some, it keeps those.
        annotations.sort_by_key(|a| std::cmp::Reverse(a.level));
        CheckOutput { markdown: markdown.to_string(), annotations }
    }
}

/// A check run's title for a plan: the verdict and what makes it.
pub fn verdict_title(plan: &Plan) -> String {
    let s = &plan.summary;
    match plan.verdict {
        crate::plan::Verdict::NoChanges => "no changes".into(),
        crate::plan::Verdict::Changes => {
            format!("{} to create, {} to update, {} to delete", s.create, s.update, s.delete)
        }
        crate::plan::Verdict::Blocked => {
            let dangers: Vec<&str> = plan
                .alerts
                .iter()
                .filter(|a| a.severity == Severity::Danger)
                .map(|a| a.code.as_str())
                .collect();
            match dangers.as_slice() {
                [] => "blocked".into(),
                [one] => format!("blocked: {one}"),
                [first, rest @ ..] => format!("blocked: {first} (+{} more)", rest.len()),
            }
        }
        crate::plan::Verdict::Failed => {
            format!("could not plan: {}", plan.error.as_deref().unwrap_or("unknown error"))
        }
    }
}

fn severity_word(severity: Severity) -> &'static str {
    match severity {
        Severity::Danger => "danger",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

/// A location's path as an annotation may carry it: relative, `/`-separated, no `..`, no control
/// characters (the planner makes them so; this holds whatever it is given).
fn annotation_path(path: &str) -> Option<String> {
    let path = path.trim_start_matches("./");
    let plain = !path.is_empty()
        && !path.starts_with('/')
        && !path.chars().any(char::is_control)
        && path.split('/').all(|part| !part.is_empty() && part != "." && part != "..");
    plain.then(|| path.to_string())
}

/// A check run's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckState {
    InProgress,
    Completed(Conclusion),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conclusion {
    Success,
    Failure,
    Cancelled,
}

impl Conclusion {
    fn as_str(self) -> &'static str {
        match self {
            Conclusion::Success => "success",
            Conclusion::Failure => "failure",
            Conclusion::Cancelled => "cancelled",
        }
    }
}

impl CheckState {
    /// The state that says what a commit status says: pending is in progress; a failed plan
    /// (`error`) fails the check like a blocked one: `action_required` would promise an action
    /// on fluxplan's site, where there is none to take (the fix is in the pull request).
    pub fn of_status(state: StatusState) -> Self {
        match state {
            StatusState::Pending => CheckState::InProgress,
            StatusState::Success => CheckState::Completed(Conclusion::Success),
            StatusState::Failure | StatusState::Error => CheckState::Completed(Conclusion::Failure),
        }
    }
}

/// One write of the check run of a commit.
#[derive(Debug, Clone)]
pub struct CheckRun<'a> {
    pub sha: &'a str,
    pub state: CheckState,
    pub title: &'a str,
    pub output: Option<&'a CheckOutput>,
    pub details_url: Option<&'a str>,
    /// The job that writes it: a job superseded later completes only its own runs.
    pub external_id: Option<String>,
}

impl CheckRun<'_> {
    /// `output.summary` and `output.text`: the plan split like the comment, in two parts at most
    /// (what does not fit is on the run page and in the comment).
    fn summary_and_text(&self) -> (String, Option<String>) {
        let Some(output) = self.output.filter(|o| !o.markdown.is_empty()) else {
            let mut summary = self.title.to_string();
            if let Some(url) = self.details_url {
                summary.push_str(&format!("\n\n[The plan on fluxplan's run page]({url})"));
            }
            return (cut(&summary, MAX_OUTPUT_CHARS), None);
        };
        let mut parts = crate::report::split::split(&output.markdown, MAX_OUTPUT_CHARS).into_iter();
        let summary = parts.next().unwrap_or_default();
        let text = parts.next().map(|second| {
            if parts.next().is_some() {
                let more = "\n\n_The rest of the plan is in the pull request's comments._";
                format!("{}{more}", cut(&second, MAX_OUTPUT_CHARS - more.len()))
            } else {
                second
            }
        });
        (cut(&summary, MAX_OUTPUT_CHARS), text.map(|t| cut(&t, MAX_OUTPUT_CHARS)))
    }

    fn annotations(&self) -> &[Annotation] {
        match (self.state, self.output) {
            (CheckState::Completed(_), Some(output)) => &output.annotations,
            _ => &[],
        }
    }

    /// The body of the create (or first update) request, with the first batch of annotations.
    fn body(&self, create: bool) -> Value {
        let (summary, text) = self.summary_and_text();
        let mut output = json!({"title": cut(self.title, MAX_OUTPUT_TITLE_CHARS), "summary": summary});
        if let Some(text) = text {
            output["text"] = json!(text);
        }
        let first: Vec<Value> =
            self.annotations().iter().take(MAX_ANNOTATIONS_PER_REQUEST).map(Annotation::to_json).collect();
        if !first.is_empty() {
            output["annotations"] = json!(first);
        }
        let mut body = json!({"output": output});
        if create {
            body["name"] = json!(CHECK_NAME);
            body["head_sha"] = json!(self.sha);
        }
        match self.state {
            CheckState::InProgress => body["status"] = json!("in_progress"),
            CheckState::Completed(conclusion) => {
                body["status"] = json!("completed");
                body["conclusion"] = json!(conclusion.as_str());
                body["completed_at"] = json!(now_rfc3339());
            }
        }
        if let Some(url) = self.details_url {
            body["details_url"] = json!(url);
        }
        if let Some(id) = &self.external_id {
            body["external_id"] = json!(id);
        }
        body
    }

    /// The bodies of the updates that append the annotations past the first batch.
    fn more_annotations(&self) -> Vec<Value> {
        let title = cut(self.title, MAX_OUTPUT_TITLE_CHARS);
        let (summary, text) = self.summary_and_text();
        self.annotations()
            .chunks(MAX_ANNOTATIONS_PER_REQUEST)
            .skip(1)
            .map(|batch| {
                let mut output = json!({
                    "title": title,
                    "summary": summary,
                    "annotations": batch.iter().map(Annotation::to_json).collect::<Vec<_>>(),
                });
                if let Some(text) = &text {
                    output["text"] = json!(text);
                }
                json!({"output": output})
            })
            .collect()
    }
}

/// A check run of fluxplan's on a commit, as the list endpoint shows it.
#[derive(Debug, Clone)]
struct Existing {
    id: u64,
    completed: bool,
    external_id: Option<String>,
}

impl GitHub {
    /// Writes the check run of `run.sha`: updates fluxplan's newest run there while it is not
    /// completed, creates one otherwise; then appends the annotations past the first 50.
    /// `Refused` when the token may not write checks (403, or 404 from a GitHub without them).
    pub async fn write_check_run(&self, repo: &RepoInfo, run: &CheckRun<'_>) -> Result<(), CheckError> {
        let existing = self.check_runs(repo, run.sha).await?;
        match existing.first().filter(|e| !e.completed) {
            Some(open) => {
                let path = format!("/repos/{}/check-runs/{}", repo.full_name, open.id);
                self.checks_call(repo, Method::Patch, &path, run.body(false)).await?;
                self.append_annotations(repo, run, open.id).await
            }
            None => self.create_check_run(repo, run).await,
        }
    }

    /// Creates a new check run for `run`, with all its annotations.
    pub async fn create_check_run(&self, repo: &RepoInfo, run: &CheckRun<'_>) -> Result<(), CheckError> {
        let path = format!("/repos/{}/check-runs", repo.full_name);
        let created = self.checks_call(repo, Method::Post, &path, run.body(true)).await?;
        let id = created["id"]
            .as_u64()
            .ok_or_else(|| ForgeError::Permanent("created check run has no id".into()))?;
        self.append_annotations(repo, run, id).await
    }

    /// The annotations past the first batch, 50 per update (each update appends).
    async fn append_annotations(
        &self,
        repo: &RepoInfo,
        run: &CheckRun<'_>,
        id: u64,
    ) -> Result<(), CheckError> {
        let path = format!("/repos/{}/check-runs/{id}", repo.full_name);
        for body in run.more_annotations() {
            self.checks_call(repo, Method::Patch, &path, body).await?;
        }
        Ok(())
    }

    /// Completes, as cancelled, the runs on `sha` that job `external_id` left in progress (its
    /// job was superseded): no check run stays in progress for good. Returns how many.
    pub async fn cancel_check_runs(
        &self,
        repo: &RepoInfo,
        sha: &str,
        external_id: &str,
    ) -> Result<usize, CheckError> {
        let open: Vec<Existing> = self
            .check_runs(repo, sha)
            .await?
            .into_iter()
            .filter(|e| !e.completed && e.external_id.as_deref() == Some(external_id))
            .collect();
        for run in &open {
            let body = json!({
                "status": "completed",
                "conclusion": "cancelled",
                "completed_at": now_rfc3339(),
                "output": {
                    "title": "superseded: a newer plan speaks for this pull request",
                    "summary": "A newer push (or a newer plan of the same commit) took this plan's place; its check run says what fluxplan found.",
                },
            });
            let path = format!("/repos/{}/check-runs/{}", repo.full_name, run.id);
            self.checks_call(repo, Method::Patch, &path, body).await?;
        }
        Ok(open.len())
    }

    /// fluxplan's check runs on `sha`, newest first (this App's only, when running as one).
    async fn check_runs(&self, repo: &RepoInfo, sha: &str) -> Result<Vec<Existing>, CheckError> {
        let mut path = format!(
            "/repos/{}/commits/{sha}/check-runs?check_name={CHECK_NAME}&filter=all&per_page=100",
            repo.full_name
        );
        if let Some(app_id) = self.app_id() {
            path.push_str(&format!("&app_id={app_id}"));
        }
        let answer = self.checks_call(repo, Method::Get, &path, Value::Null).await?;
        let mut runs: Vec<(String, Existing)> = answer["check_runs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["name"] == CHECK_NAME)
            .filter_map(|r| {
                let started = r["started_at"].as_str().unwrap_or_default().to_string();
                let existing = Existing {
                    id: r["id"].as_u64()?,
                    completed: r["status"] == "completed",
                    external_id: r["external_id"].as_str().map(str::to_string),
                };
                Some((started, existing))
            })
            .collect();
        // Newest first: by start, then by id (GitHub's ids grow).
        runs.sort_by(|(a, x), (b, y)| b.cmp(a).then(y.id.cmp(&x.id)));
        Ok(runs.into_iter().map(|(_, e)| e).collect())
    }

    /// One checks call through the client's gate (deadline, retries, rate-limit pause).
    async fn checks_call(
        &self,
        repo: &RepoInfo,
        method: Method,
        path: &str,
        body: Value,
    ) -> Result<Value, CheckError> {
        let body = (!body.is_null()).then_some(body);
        let answer = self.gate().call("check run", || self.send(repo, method, path, body.clone())).await?;
        match answer {
            Ok(value) => Ok(value),
            // Without `checks: write` (or a GitHub without checks).
            Err((403 | 404, text)) => Err(CheckError::Refused(format!("HTTP 403/404: {}", cut(&text, 300)))),
            Err((status, text)) => Err(CheckError::Forge(ForgeError::from_status(status, None, &text))),
        }
    }
}

/// Why a check run was not written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CheckError {
    /// The token may not write check runs: the commit status speaks instead.
    #[error("GitHub refused to write check runs (the token needs `checks: write`): {0}")]
    Refused(String),
    #[error(transparent)]
    Forge(#[from] ForgeError),
}

/// `text` cut to `max` characters.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotation(n: usize) -> Annotation {
        Annotation {
            path: format!("apps/{n}.yaml"),
            line: n as u32 + 1,
            level: AnnotationLevel::Warning,
            title: "t".into(),
            message: "m".into(),
        }
    }

    #[test]
    fn annotations_go_fifty_per_request_and_only_with_a_completed_state() {
        let output = CheckOutput { markdown: "plan".into(), annotations: (0..121).map(annotation).collect() };
        let run = CheckRun {
            sha: "abc",
            state: CheckState::Completed(Conclusion::Failure),
            title: "blocked",
            output: Some(&output),
            details_url: None,
            external_id: Some("7".into()),
        };
        let first = run.body(true);
        assert_eq!(first["output"]["annotations"].as_array().unwrap().len(), 50);
        assert_eq!(first["conclusion"], "failure");
        assert_eq!(first["name"], CHECK_NAME);
        let more = run.more_annotations();
        let sizes: Vec<usize> =
            more.iter().map(|b| b["output"]["annotations"].as_array().unwrap().len()).collect();
        assert_eq!(sizes, [50, 21]);
        assert!(more.iter().all(|b| b.get("conclusion").is_none() && b["output"]["summary"] == "plan"));
        let pending = CheckRun { state: CheckState::InProgress, ..run };
        assert!(pending.body(false)["output"].get("annotations").is_none());
        assert!(pending.more_annotations().is_empty());
    }

    #[test]
    fn a_long_plan_is_split_into_summary_and_text() {
        let markdown = format!("{}\n", "line of the plan\n".repeat(9000));
        let output = CheckOutput { markdown, annotations: vec![] };
        let run = CheckRun {
            sha: "abc",
            state: CheckState::Completed(Conclusion::Success),
            title: "changes",
            output: Some(&output),
            details_url: None,
            external_id: None,
        };
        let (summary, text) = run.summary_and_text();
        assert!(summary.chars().count() <= MAX_OUTPUT_CHARS);
        let text = text.expect("a second part");
        assert!(text.chars().count() <= MAX_OUTPUT_CHARS);
        assert!(summary.contains("part 1 of"), "{}", &summary[..200]);
    }

    #[test]
    fn odd_paths_are_data_and_escaping_paths_are_dropped() {
        assert_eq!(annotation_path("apps/a b/ü\"<x>.yaml").as_deref(), Some("apps/a b/ü\"<x>.yaml"));
        assert_eq!(annotation_path("./apps/x.yaml").as_deref(), Some("apps/x.yaml"));
        for refused in ["/etc/passwd", "../x.yaml", "apps/../../x", "a\nb", "", "apps//x"] {
            assert_eq!(annotation_path(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn a_failed_plan_fails_the_check() {
        assert_eq!(CheckState::of_status(StatusState::Error), CheckState::Completed(Conclusion::Failure));
        assert_eq!(CheckState::of_status(StatusState::Pending), CheckState::InProgress);
    }
}
