//! Reports of a plan: markdown (for pull request comments), compact text (for terminals, coloured
//! on a TTY) and JSON (for machines). Templates live in `templates/` and are loaded once.

pub mod code_quality;
pub mod followup;
pub mod html;
pub mod split;
mod way_out;

use crate::flux::ObjectId;
use crate::plan::{
    Action, Alert, Cause, Change, KustomizationPlan, KustomizationStatus, Plan, ReleaseFate, Severity,
    Verdict,
};
use crate::render::UnitKind;
use crate::words::count as plural;
use minijinja::{Environment, State};
use serde_json::{json, Value};
use std::sync::OnceLock;

/// Objects listed per alert before "and N more".
const MAX_LISTED_OBJECTS: usize = 100;

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.add_template("plan.md", include_str!("../../templates/plan.md.j2")).expect("plan.md.j2 parses");
        env.add_template("plan.txt", include_str!("../../templates/plan.txt.j2"))
            .expect("plan.txt.j2 parses");
        env.add_filter("md", escape_markdown);
        env.add_filter("code", code_span);
        env.add_filter("fenced", fenced);
        env.add_filter("paint", paint);
        env.add_filter("diff_style", diff_style);
        env.add_filter("wrap", wrap);
        env.add_filter("count", |n: usize, one: String, many: String| plural(n, &one, &many));
        env
    })
}

/// What the reports call a pull request unless a forge names it otherwise.
pub const PULL_REQUEST: &str = "pull request";

/// The markdown comment.
pub fn markdown(plan: &Plan) -> String {
    render("plan.md", plan, false, None, PULL_REQUEST)
}

/// The markdown comment the bot posts: a blocked plan also says who may approve it and how
/// (`approve`, e.g. "someone with write access comments `/fluxplan approve`"), and the comment
/// speaks of pull requests in the forge's words (`pull_noun`: "merge request" on GitLab).
pub fn markdown_with_approval(plan: &Plan, approve: &str, pull_noun: &str) -> String {
    render("plan.md", plan, false, Some(approve), pull_noun)
}

/// The compact terminal report; `color` adds ANSI colours.
pub fn text(plan: &Plan, color: bool) -> String {
    render("plan.txt", plan, color, None, PULL_REQUEST)
}

/// `text` in a forge's words: "pull request" becomes `pull_noun`, and "PR" its initials
/// ("merge request", "MR"). GitHub's words are fluxplan's own.
pub fn in_forge_words(text: &str, pull_noun: &str) -> String {
    if pull_noun == PULL_REQUEST {
        return text.to_string();
    }
    let mut capitalized = pull_noun.to_string();
    if let Some(first) = capitalized.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    text.replace(PULL_REQUEST, pull_noun)
        .replace("Pull request", &capitalized)
        .replace("this PR", &format!("this {}", initials(pull_noun)))
}

/// "PR" for "pull request", "MR" for "merge request".
fn initials(noun: &str) -> String {
    noun.split(' ').filter_map(|w| w.chars().next()).collect::<String>().to_uppercase()
}

/// Every string of the report's context in the forge's words (see `in_forge_words`).
fn reword(value: &mut Value, pull_noun: &str) {
    match value {
        Value::String(text) => *text = in_forge_words(text, pull_noun),
        Value::Array(items) => items.iter_mut().for_each(|v| reword(v, pull_noun)),
        Value::Object(map) => map.values_mut().for_each(|v| reword(v, pull_noun)),
        _ => {}
    }
}

/// The plan as pretty JSON.
pub use code_quality::code_quality;

pub fn json(plan: &Plan) -> String {
    serde_json::to_string_pretty(plan).expect("plans serialize") + "\n"
}

fn render(template: &str, plan: &Plan, color: bool, approve: Option<&str>, pull_noun: &str) -> String {
    let mut view = view(plan, color);
    view["unblock"] = json!(way_out::unblock(plan, approve));
    view["pull"] = json!(pull_noun);
    view["pr"] = json!(initials(pull_noun));
    if pull_noun != PULL_REQUEST {
        reword(&mut view, pull_noun);
    }
    without_control_characters(&mut view);
    let context = minijinja::Value::from_serialize(view);
    environment()
        .get_template(template)
        .and_then(|t| t.render(context))
        .unwrap_or_else(|e| format!("fluxplan could not render its report: {e}\n"))
}

/// Escapes text from pull requests, repositories and clusters for markdown (see `escape_markdown`).
pub fn escape(text: &str) -> String {
    escape_markdown(text.to_string())
}

/// Escapes text from repositories and tools so it cannot open HTML, mention people or break
/// the layout.
fn escape_markdown(text: String) -> String {
    // Backslash first (so text cannot escape our escapes), then the brackets every link, image
    // and reference link needs.
    text.replace('\\', "\\\\")
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('@', "@\u{200b}")
        .replace('`', "'")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// Text from repositories and clusters must not drive a terminal (escape sequences) or end a
/// line where the report does not (carriage returns): control characters other than newlines and
/// tabs become `?`.
fn without_control_characters(value: &mut Value) {
    match value {
        Value::String(text) if text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') => {
            *text = text
                .chars()
                .map(|c| if c.is_control() && c != '\n' && c != '\t' { '?' } else { c })
                .collect();
        }
        Value::Array(items) => items.iter_mut().for_each(without_control_characters),
        Value::Object(map) => map.values_mut().for_each(without_control_characters),
        _ => {}
    }
}

/// Text for inside a code span: no backticks or newlines to end it, no bare `|` to split a table
/// cell (HTML is not interpreted inside code spans).
fn code_span(text: String) -> String {
    text.replace('`', "'").replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// A fenced code block longer than any backtick run inside, so content cannot close it.
fn fenced(text: String, lang: String) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = text.trim_end_matches('\n');
    format!("{fence}{lang}\n{body}\n{fence}")
}

fn paint(state: &State, text: String, style: String) -> String {
    if !state.lookup("color").is_some_and(|c| c.is_true()) {
        return text;
    }
    let code = match style.as_str() {
        "red" => "31",
        "green" => "32",
        "yellow" => "33",
        "cyan" => "36",
        "bold" => "1",
        "dim" => "2",
        _ => return text,
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Width the text report's long lines wrap at, for terminals and CI logs alike.
const TEXT_WIDTH: usize = 100;

/// A long line of prose (an alert, a note) on several lines: the first opens with `first`, the
/// others with `rest`. Words are never broken: an id or a path longer than a line stays whole.
/// Colour codes take no width.
fn wrap(text: String, first: String, rest: String) -> String {
    let options = textwrap::Options::new(TEXT_WIDTH)
        .initial_indent(&first)
        .subsequent_indent(&rest)
        .break_words(false)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    textwrap::fill(&text, options)
}

fn diff_style(line: String) -> &'static str {
    if line.starts_with("+++") || line.starts_with("---") {
        "bold"
    } else if line.starts_with('+') {
        "green"
    } else if line.starts_with('-') {
        "red"
    } else if line.starts_with("@@") {
        "cyan"
    } else {
        ""
    }
}

fn severity_icon(severity: Severity) -> (&'static str, &'static str) {
    match severity {
        Severity::Danger => ("🛑", "red"),
        Severity::Warning => ("⚠️", "yellow"),
        Severity::Info => ("ℹ️", "cyan"),
    }
}

fn count_phrase(counts: &crate::plan::Counts) -> String {
    phrase(counts, format!("{} to delete", counts.delete))
}

/// The plan's headline: deletions split by cause when not all are this pull request's own.
fn headline_counts(plan: &Plan) -> String {
    let causes = &plan.deletions;
    if causes.cascade + causes.stale == 0 {
        return count_phrase(&plan.summary);
    }
    let mut deletes = Vec::new();
    if causes.pull_request > 0 {
        deletes.push(format!("{} caused by this PR", plural(causes.pull_request, "deletion", "deletions")));
    }
    if causes.cascade > 0 {
        deletes.push(format!("{} by cascade", plural(causes.cascade, "deletion", "deletions")));
    }
    if causes.stale > 0 {
        deletes.push(format!(
            "{} Flux would prune anyway",
            plural(causes.stale, "stale entry", "stale entries")
        ));
    }
    phrase(&plan.summary, deletes.join(", "))
}

/// "1 to create, 2 to update, DELETES, ..." for the counts that are not zero.
fn phrase(counts: &crate::plan::Counts, deletes: String) -> String {
    let mut parts = Vec::new();
    for (n, what) in [(counts.create, "to create"), (counts.update, "to update")] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    if counts.delete > 0 {
        parts.push(deletes);
    }
    for (n, what) in [(counts.orphan, "to orphan"), (counts.skip, "skipped")] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    if parts.is_empty() {
        "no changes".to_string()
    } else {
        parts.join(", ")
    }
}

fn status_label(k: &KustomizationPlan) -> &'static str {
    match k.status {
        KustomizationStatus::Added => "added",
        // A HelmRelease no longer in Git that nothing deletes, or whose release stays installed:
        // the plan says so, and so does its label.
        KustomizationStatus::Removed if k.kind == UnitKind::HelmRelease => match &k.release_fate {
            Some(ReleaseFate::Orphaned(_)) => "release kept",
            None if !k.changes.iter().any(|c| c.action == Action::Delete) => "not deleted",
            _ => "removed",
        },
        KustomizationStatus::Removed => "removed",
        KustomizationStatus::Failed => "render fails",
        KustomizationStatus::Suspended => "suspended",
        KustomizationStatus::External => "external",
        KustomizationStatus::Changed | KustomizationStatus::Unchanged => "",
    }
}

/// The alerts about a unit that are this plan's news (not standing ones, see `way_out::standing`).
fn alerts_of<'a>(plan: &'a Plan, k: &KustomizationPlan) -> Vec<&'a Alert> {
    plan.alerts
        .iter()
        .filter(|a| !way_out::standing(plan, a))
        .filter(|a| {
            a.cluster.as_deref() == Some(k.cluster.as_str())
                && a.kustomization.as_deref() == Some(&k.reference())
        })
        .collect()
}

/// What a reader should see of a Kustomization: it changes, fails or has alerts.
/// A HelmRelease whose chart fluxplan cannot have, or a ResourceSet whose inputs only the cluster
/// knows, is shown when this merge changes it (its `chart-unavailable` or `resourceset-unknown`
/// alert), not on every plan.
fn noteworthy(plan: &Plan, k: &KustomizationPlan) -> bool {
    let quiet_release = matches!(k.kind, UnitKind::HelmRelease | UnitKind::ResourceSet)
        && k.status == KustomizationStatus::External;
    (k.status != KustomizationStatus::Unchanged && !quiet_release)
        || !k.changes.is_empty()
        || !alerts_of(plan, k).is_empty()
}

/// Why a change happens, as its line in the plan reads.
fn reason(change: &Change) -> Option<String> {
    let why = change.reason.clone();
    match (change.cause, &change.cascade_from) {
        (Some(Cause::Cascade), Some(from)) => Some(
            why.map(|w| format!("cascade from {from}: {w}"))
                .unwrap_or_else(|| format!("cascade from {from}")),
        ),
        (Some(Cause::PullRequest), _) if change.action == Action::Delete => {
            Some(why.map(|w| format!("caused by this PR: {w}")).unwrap_or_else(|| "caused by this PR".into()))
        }
        _ => why,
    }
}

/// An inventory id as people read it: `Kind namespace/name`.
fn readable(id: &str) -> String {
    ObjectId::parse(id).map(|i| i.display_name()).unwrap_or_else(|| id.to_string())
}

/// " (abcdef12)": the first characters of a commit, for reading.
fn short(commit: &Option<String>) -> String {
    commit.as_ref().map(|c| format!(" ({})", c.chars().take(8).collect::<String>())).unwrap_or_default()
}

/// "1 dangerous alert blocks the merge".
fn blocks(dangers: usize) -> String {
    format!("{} the merge", plural(dangers, "dangerous alert blocks", "dangerous alerts block"))
}

/// The dangerous alerts by code and cluster, each once: `roots-changed (clusters/prod)`.
fn blocking_alerts(plan: &Plan) -> String {
    let mut named: Vec<String> = Vec::new();
    for alert in plan.alerts.iter().filter(|a| a.severity == Severity::Danger) {
        let name = match &alert.cluster {
            Some(cluster) => format!("{} ({cluster})", alert.code),
            None => alert.code.clone(),
        };
        if !named.contains(&name) {
            named.push(name);
        }
    }
    const SHOWN: usize = 3;
    let more = named.len().saturating_sub(SHOWN);
    named.truncate(SHOWN);
    if more > 0 {
        named.push(format!("{more} more"));
    }
    named.join(", ")
}

/// The template context.
fn view(plan: &Plan, color: bool) -> Value {
    let (icon, title, style) = match plan.verdict {
        Verdict::NoChanges => ("✅", "no changes", "green"),
        Verdict::Changes => ("📝", "changes", "yellow"),
        Verdict::Blocked => ("🛑", "blocked", "red"),
        Verdict::Failed => ("⚠️", "could not plan", "red"),
    };
    let dangers = plan.alerts.iter().filter(|a| a.severity == Severity::Danger).count();
    let mut headline = headline_counts(plan);
    let unplanned = plan.unplanned_changes.iter().filter(|u| !u.read_by.is_empty()).count();
    if unplanned > 0 {
        headline.push_str(&format!(
            "; {} read by what fluxplan does not render",
            plural(unplanned, "changed file", "changed files")
        ));
    }
    // Releases whose chart fluxplan could not see: their changes are in no count above.
    let unseen = plan.alerts.iter().filter(|a| a.code == "chart-unavailable").count();
    if unseen > 0 {
        headline.push_str(&format!(
            "; {} whose chart fluxplan could not have or render",
            plural(unseen, "release", "releases")
        ));
    }
    if dangers > 0 && headline == "no changes" {
        // Nothing counted is no "no changes": say what blocks, and where.
        headline = format!("{}: {}; no object change is counted", blocks(dangers), blocking_alerts(plan));
    } else if dangers > 0 {
        headline.push_str(&format!("; {}", blocks(dangers)));
    }
    if plan.verdict == Verdict::Failed {
        headline = "the plan could not be made".into();
    }
    let visible: Vec<&KustomizationPlan> =
        plan.kustomizations.iter().filter(|k| noteworthy(plan, k)).collect();
    let rows: Vec<Value> = visible
        .iter()
        .map(|k| {
            // Each code once, counted: a change to twenty Jobs is not twenty cells' worth.
            let mut codes: Vec<(String, usize)> = Vec::new();
            for alert in alerts_of(plan, k) {
                let code = format!("{} {}", severity_icon(alert.severity).0, alert.code);
                match codes.iter_mut().find(|(c, _)| *c == code) {
                    Some((_, n)) => *n += 1,
                    None => codes.push((code, 1)),
                }
            }
            let codes: Vec<String> = codes
                .into_iter()
                .map(|(code, n)| if n > 1 { format!("{code} ×{n}") } else { code })
                .collect();
            json!({
                "cluster": k.cluster, "reference": k.reference(),
                "status_suffix": format!("{}{}", match (k.base_unknown, status_label(k)) { (true, _) => " *base unknown*".to_string(), (_, "") => String::new(), (_, label) => format!(" *{label}*") },
                    k.chart.as_ref().map(|c| format!(" · {c}")).unwrap_or_default()),
                "create": k.counts.create, "update": k.counts.update, "delete": k.counts.delete,
                "alerts": codes.join(", "),
            })
        })
        .collect();
    // A finding's alert is listed once, among the review findings; a version change's, in its table.
    let (standing, news): (Vec<&Alert>, Vec<&Alert>) =
        plan.alerts.iter().filter(|a| !a.shown_elsewhere).partition(|a| way_out::standing(plan, a));
    let alert_view = |alerts: Vec<&Alert>| -> Vec<Value> {
        alerts.into_iter().map(|a| {
            let (icon, style) = severity_icon(a.severity);
            let mut objects: Vec<String> = a.objects.iter().take(MAX_LISTED_OBJECTS).map(|id| readable(id)).collect();
            if a.objects.len() > MAX_LISTED_OBJECTS {
                objects.push(format!("… and {} more (see the plan below)", a.objects.len() - MAX_LISTED_OBJECTS));
            }
            json!({
                "icon": icon, "style": style, "severity": a.severity, "code": a.code,
                "kustomization": a.kustomization, "cluster": a.cluster, "message": a.message, "objects": objects,
                "object_count": plural(a.objects.len(), "object", "objects"),
                // The plan's cause is shown once, under the verdict.
                "cause": a.cause.as_ref().filter(|c| Some(*c) != plan.cause.as_ref()),
            })
        }).collect()
    };
    let sections: Vec<Value> = visible
        .iter()
        .map(|k| {
            let mut summary = count_phrase(&k.counts);
            if let label @ ("added" | "removed" | "release kept" | "not deleted" | "render fails" | "suspended" | "external") = status_label(k) {
                summary = format!("{label}; {summary}");
            }
            if k.base_unknown {
                summary = format!("base unknown; {} at head, not compared", plural(k.desired.len(), "object", "objects"));
            }
            let changes: Vec<Value> = k
                .changes
                .iter()
                .map(|c| {
                    let (symbol, style) = match c.action {
                        Action::Create => ("+", "green"),
                        Action::Update => ("~", "yellow"),
                        Action::Delete => ("-", "red"),
                        Action::Skip => ("=", "dim"),
                        Action::Orphan => ("?", "yellow"),
                    };
                    json!({
                        "action": c.action.as_str(), "display": c.display_name(),
                        "reason_suffix": reason(c).map(|r| format!(" — {r}")).unwrap_or_default(),
                        "takes_with_it": c.takes_with_it,
                        "drifted": k.drift.iter().any(|d| d.id == c.id),
                        "symbol": symbol, "style": style, "diff": c.diff, "hidden_changes": c.hidden_changes,
                        "diff_lines": c.diff.as_deref().map(|d| d.lines().collect::<Vec<_>>()).unwrap_or_default(),
                    })
                })
                .collect();
            if let Some(chart) = &k.chart {
                summary = format!("{chart}; {summary}");
            }
            json!({
                "reference": k.reference(), "cluster": k.cluster, "summary": summary, "notes": k.notes,
                "error": k.error.as_ref().map(|e| e.message.clone()), "changes": changes, "unchanged": k.counts.unchanged,
            })
        })
        .collect();
    let drift: Vec<Value> = plan
        .kustomizations
        .iter()
        .flat_map(|k| k.drift.iter().map(move |d| (k, d)))
        .map(|(k, d)| {
            json!({
                "display": d.display, "reference": k.reference(), "cluster": k.cluster,
                "diff": d.diff, "diff_lines": d.diff.lines().collect::<Vec<_>>(),
                "after_merge": d.after_merge,
                "after_merge_lines": d.after_merge.as_deref().map(|t| t.lines().collect::<Vec<_>>()).unwrap_or_default(),
                // Rules are the pull request's text: one line each, whatever it holds.
                "ignore_rules_not_applied": d.ignore_rules_not_applied.join("; ").replace(['\n', '\r'], " "),
            })
        })
        .collect();
    json!({
        "plan": plan,
        "color": color,
        "cause": plan.cause,
        "drift": drift,
        "drift_controller": drift_controller(plan),
        "verdict": {"icon": icon, "title": title, "style": style},
        "headline": headline,
        "base_short": short(&plan.base.commit),
        "head_short": short(&plan.head.commit),
        "rows": rows,
        "unchanged_count": plan.kustomizations.len() - visible.len(),
        "unit": unit_heading(plan),
        "units": units_heading(plan),
        "alerts": alert_view(news),
        "findings": findings_view(plan),
        "standing": alert_view(standing),
        "sections": sections,
    })
}

/// The review findings grouped by severity, most severe first: each once, on one line.
fn findings_view(plan: &Plan) -> Vec<Value> {
    let mut groups: Vec<Value> = Vec::new();
    for severity in [Severity::Danger, Severity::Warning, Severity::Info] {
        let items: Vec<Value> = plan
            .findings
            .iter()
            .filter(|f| f.severity == severity)
            .map(|f| {
                json!({
                    "code": f.code, "display": readable(&f.object), "path": f.path, "unit": f.unit,
                    "cluster": f.cluster, "message": f.message,
                })
            })
            .collect();
        if items.is_empty() {
            continue;
        }
        let (icon, style) = severity_icon(severity);
        groups.push(json!({"severity": severity, "icon": icon, "style": style, "items": items}));
    }
    groups
}

/// Who puts drift back: Flux, Argo CD, or each its own.
fn drift_controller(plan: &Plan) -> &'static str {
    let controllers: std::collections::BTreeSet<&str> =
        plan.kustomizations.iter().filter(|k| !k.drift.is_empty()).map(|k| k.controller()).collect();
    match controllers.len() {
        1 => controllers.into_iter().next().unwrap_or("Flux"),
        _ => "each controller",
    }
}

/// The plural of `unit_heading`.
fn units_heading(plan: &Plan) -> &'static str {
    match unit_heading(plan) {
        "Kustomization / Application" => "Kustomizations / Applications",
        "Application" => "Applications",
        _ => "Kustomizations",
    }
}

/// What the plan's units are called: `Kustomization`, `Application`, or both.
fn unit_heading(plan: &Plan) -> &'static str {
    let engines: std::collections::BTreeSet<crate::render::Engine> =
        plan.kustomizations.iter().map(|k| k.engine).collect();
    match (engines.contains(&crate::render::Engine::Flux), engines.contains(&crate::render::Engine::ArgoCd)) {
        (true, true) => "Kustomization / Application",
        (false, true) => "Application",
        _ => "Kustomization",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A removed HelmRelease is labelled by what becomes of it, as its plan says.
    #[test]
    fn a_removed_release_is_labelled_by_what_becomes_of_it() {
        let removed = |kind: UnitKind, fate: Option<ReleaseFate>| KustomizationPlan {
            cluster: "prod".into(),
            engine: kind.engine(),
            kind,
            namespace: "data".into(),
            name: "db".into(),
            status: KustomizationStatus::Removed,
            path: None,
            changes: Vec::new(),
            counts: Default::default(),
            inventory_size: 0,
            inventory_source: crate::plan::InventorySource::None,
            error: None,
            drift: Vec::new(),
            notes: Vec::new(),
            desired: Vec::new(),
            unmanaged: Vec::new(),
            parent: None,
            chart: None,
            release_status: None,
            base_unknown: false,
            release_fate: fate,
        };
        let release = UnitKind::HelmRelease;
        assert_eq!(
            status_label(&removed(release, Some(ReleaseFate::Orphaned("kept".into())))),
            "release kept"
        );
        assert_eq!(status_label(&removed(release, None)), "not deleted");
        assert_eq!(status_label(&removed(release, Some(ReleaseFate::Uninstalled("gone".into())))), "removed");
        assert_eq!(status_label(&removed(UnitKind::Kustomization, None)), "removed");
    }

    #[test]
    fn gitlab_speaks_of_merge_requests_and_github_as_before() {
        let text = "in a pull request of its own; 2 deletions caused by this PR; Pull request #4";
        assert_eq!(
            in_forge_words(text, "merge request"),
            "in a merge request of its own; 2 deletions caused by this MR; Merge request #4"
        );
        assert_eq!(in_forge_words(text, PULL_REQUEST), text);
    }

    #[test]
    fn long_lines_wrap_at_words_and_never_inside_one() {
        let id = format!("apps/{}", "x".repeat(120));
        let line = format!("WARNING code: {} then {id} and more", "word ".repeat(30).trim_end());
        let wrapped = wrap(line.clone(), String::new(), "    ".into());
        let lines: Vec<&str> = wrapped.lines().collect();
        assert!(lines.len() > 2, "{wrapped}");
        assert!(lines[1..].iter().all(|l| l.starts_with("    ")), "{wrapped}");
        assert!(lines.iter().all(|l| l.chars().count() <= TEXT_WIDTH || l.trim() == id), "{wrapped}");
        assert_eq!(
            wrapped.split_whitespace().collect::<Vec<_>>(),
            line.split_whitespace().collect::<Vec<_>>()
        );
        // A short line is left as it is.
        assert_eq!(wrap("INFO x: y".into(), "  ".into(), "    ".into()), "  INFO x: y");
    }

    #[test]
    fn repository_text_cannot_open_links_images_or_html() {
        let shown = escape_markdown("./x [login](https://evil) ![](https://evil/t.png) <b> @team \\[".into());
        assert_eq!(
            shown,
            "./x \\[login\\](https://evil) !\\[\\](https://evil/t.png) &lt;b&gt; @\u{200b}team \\\\\\["
        );
        assert_eq!(escape_markdown("a\r# heading\nb".into()), "a # heading b");
        assert_eq!(code_span("a\rb|c`".into()), "a b\\|c'");
    }

    #[test]
    fn control_characters_never_reach_a_report() {
        let mut view = json!({"a": ["ok\n\tline", "\u{1b}[2Jgone\r"], "b": {"c": "\u{7}"}});
        without_control_characters(&mut view);
        assert_eq!(view, json!({"a": ["ok\n\tline", "?[2Jgone?"], "b": {"c": "?"}}));
    }
}
