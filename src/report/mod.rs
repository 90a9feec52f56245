//! Reports of a plan: markdown (for pull request comments), compact text (for terminals, coloured
//! on a TTY) and JSON (for machines). Templates live in `templates/` and are loaded once.

pub mod split;

use crate::plan::{Action, Alert, KustomizationPlan, KustomizationStatus, Plan, Severity, Verdict};
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
        env
    })
}

/// The markdown comment.
pub fn markdown(plan: &Plan) -> String {
    render("plan.md", plan, false)
}

/// The compact terminal report; `color` adds ANSI colours.
pub fn text(plan: &Plan, color: bool) -> String {
    render("plan.txt", plan, color)
}

/// The plan as pretty JSON.
pub fn json(plan: &Plan) -> String {
    serde_json::to_string_pretty(plan).expect("plans serialize") + "\n"
}

fn render(template: &str, plan: &Plan, color: bool) -> String {
    let context = minijinja::Value::from_serialize(view(plan, color));
    environment()
        .get_template(template)
        .and_then(|t| t.render(context))
        .unwrap_or_else(|e| format!("fluxplan could not render its report: {e}\n"))
}

/// Escapes text from repositories and tools so it cannot open HTML, mention people or break
/// the layout.
fn escape_markdown(text: String) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('@', "@\u{200b}")
        .replace('`', "'")
        .replace('|', "\\|")
        .replace('\n', " ")
}

/// Text for inside a code span: no backticks or newlines to end it, no bare `|` to split a table
/// cell (HTML is not interpreted inside code spans).
fn code_span(text: String) -> String {
    text.replace('`', "'").replace('|', "\\|").replace('\n', " ")
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
    let mut parts = Vec::new();
    for (n, what) in [
        (counts.create, "to create"),
        (counts.update, "to update"),
        (counts.delete, "to delete"),
        (counts.orphan, "to orphan"),
        (counts.skip, "skipped"),
    ] {
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

fn status_label(status: KustomizationStatus) -> &'static str {
    match status {
        KustomizationStatus::Added => "added",
        KustomizationStatus::Removed => "removed",
        KustomizationStatus::Failed => "render fails",
        KustomizationStatus::Suspended => "suspended",
        KustomizationStatus::External => "external",
        KustomizationStatus::Changed | KustomizationStatus::Unchanged => "",
    }
}

fn alerts_of<'a>(plan: &'a Plan, k: &KustomizationPlan) -> Vec<&'a Alert> {
    plan.alerts
        .iter()
        .filter(|a| {
            a.cluster.as_deref() == Some(k.cluster.as_str())
                && a.kustomization.as_deref() == Some(&k.reference())
        })
        .collect()
}

/// What a reader should see of a Kustomization: it changes, fails or has alerts.
fn noteworthy(plan: &Plan, k: &KustomizationPlan) -> bool {
    k.status != KustomizationStatus::Unchanged || !k.changes.is_empty() || !alerts_of(plan, k).is_empty()
}

/// " (abcdef12)": the first characters of a commit, for reading.
fn short(commit: &Option<String>) -> String {
    commit.as_ref().map(|c| format!(" ({})", c.chars().take(8).collect::<String>())).unwrap_or_default()
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
    let mut headline = count_phrase(&plan.summary);
    if dangers > 0 {
        headline.push_str(&format!("; {dangers} dangerous alert(s) block the merge"));
    }
    if plan.verdict == Verdict::Failed {
        headline = "the plan could not be made".into();
    }
    let visible: Vec<&KustomizationPlan> =
        plan.kustomizations.iter().filter(|k| noteworthy(plan, k)).collect();
    let rows: Vec<Value> = visible
        .iter()
        .map(|k| {
            let codes: Vec<String> =
                alerts_of(plan, k).iter().map(|a| format!("{} {}", severity_icon(a.severity).0, a.code)).collect();
            json!({
                "cluster": k.cluster, "reference": k.reference(),
                "status_suffix": match status_label(k.status) { "" => String::new(), label => format!(" *{label}*") },
                "create": k.counts.create, "update": k.counts.update, "delete": k.counts.delete,
                "alerts": codes.join(", "),
            })
        })
        .collect();
    let alerts: Vec<Value> = plan
        .alerts
        .iter()
        .map(|a| {
            let (icon, style) = severity_icon(a.severity);
            let mut objects: Vec<String> = a.objects.iter().take(MAX_LISTED_OBJECTS).cloned().collect();
            if a.objects.len() > MAX_LISTED_OBJECTS {
                objects.push(format!("… and {} more (see the plan below)", a.objects.len() - MAX_LISTED_OBJECTS));
            }
            json!({
                "icon": icon, "style": style, "severity": a.severity, "code": a.code,
                "kustomization": a.kustomization, "cluster": a.cluster, "message": a.message, "objects": objects,
            })
        })
        .collect();
    let sections: Vec<Value> = visible
        .iter()
        .map(|k| {
            let mut summary = count_phrase(&k.counts);
            if let label @ ("added" | "removed" | "render fails" | "suspended" | "external") = status_label(k.status) {
                summary = format!("{label}; {summary}");
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
                    let reason = match (&c.cascade_from, &c.reason) {
                        (Some(from), Some(why)) if c.action != Action::Delete => {
                            Some(format!("cascade from {from}: {why}"))
                        }
                        (Some(from), _) => Some(format!("cascade from {from}")),
                        (None, why) => why.clone(),
                    };
                    json!({
                        "action": c.action.as_str(), "display": c.display_name(),
                        "reason_suffix": reason.map(|r| format!(" — {r}")).unwrap_or_default(),
                        "symbol": symbol, "style": style, "diff": c.diff, "hidden_changes": c.hidden_changes,
                        "diff_lines": c.diff.as_deref().map(|d| d.lines().collect::<Vec<_>>()).unwrap_or_default(),
                    })
                })
                .collect();
            json!({
                "reference": k.reference(), "cluster": k.cluster, "summary": summary, "notes": k.notes,
                "error": k.error.as_ref().map(|e| e.message.clone()), "changes": changes, "unchanged": k.counts.unchanged,
            })
        })
        .collect();
    json!({
        "plan": plan,
        "color": color,
        "verdict": {"icon": icon, "title": title, "style": style},
        "headline": headline,
        "base_short": short(&plan.base.commit),
        "head_short": short(&plan.head.commit),
        "rows": rows,
        "unchanged_count": plan.kustomizations.len() - visible.len(),
        "alerts": alerts,
        "sections": sections,
    })
}
