//! Prometheus metrics: webhooks received and refused, jobs by status, plan durations, forge API
//! errors, predictions, and the process's own (`process_*`).
//!
//! Every labelled family is exported from the start, each combination of its label values at
//! zero: a family that appears only after its first event looks like a broken scrape, and
//! `rate()` or `increase()` miss that first event. The label values are closed sets, listed here
//! beside the metrics and taken by the methods that count, so what is pre-created and what is
//! counted cannot drift apart. One label is open: the `event` of
//! `fluxplan_webhooks_received_total` is the forge's event header, so an event fluxplan does not
//! act on (a webhook set to send more) is counted under its own name when it comes; the events
//! fluxplan acts on are pre-created.

mod process;

use crate::forge::webhook::{GITHUB_EVENTS, GITLAB_EVENTS};
use crate::forge::{ForgeError, ForgeKind};
use crate::plan::actual::Outcome;
use crate::plan::Verdict;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// `forge`: every forge.
pub const FORGES: [ForgeKind; 2] = [ForgeKind::GitHub, ForgeKind::GitLab];

/// `status` of `fluxplan_jobs`: every status a job row has.
pub const JOB_STATUSES: [&str; 5] = ["queued", "running", "done", "failed", "superseded"];

/// `kind` of `fluxplan_jobs_failed_total`: every `JobPayload::kind`.
pub const JOB_KINDS: [&str; 7] = ["plan", "command", "replan", "closed", "merged", "merge-group", "followup"];

/// `verdict` of `fluxplan_plan_duration_seconds`: every verdict.
pub const VERDICTS: [Verdict; 4] = [Verdict::NoChanges, Verdict::Changes, Verdict::Blocked, Verdict::Failed];

/// `reason` of `fluxplan_plans_cancelled_total`: why a plan was stopped before its end (not
/// the plan's fault, so not counted as failed).
pub const CANCEL_REASONS: [&str; 2] = ["superseded", "shutdown"];

/// `kind` of `fluxplan_forge_api_errors_total`: every `ForgeError::label`.
pub const FORGE_ERRORS: [&str; 5] = ["rate_limited", "transient", "not_found", "unauthorized", "permanent"];

/// `kind` of `fluxplan_forge_retries_total`: why a forge call is tried again.
pub use crate::forge::gate::RETRY_KINDS as FORGE_RETRY_KINDS;

/// `outcome` of `fluxplan_prediction_total`: every outcome.
pub const OUTCOMES: [Outcome; 4] = [Outcome::Exact, Outcome::Differs, Outcome::Failed, Outcome::Timeout];

/// `event` of `fluxplan_webhooks_received_total`, pre-created: the events fluxplan acts on.
pub fn events(forge: ForgeKind) -> &'static [&'static str] {
    match forge {
        ForgeKind::GitHub => &GITHUB_EVENTS,
        ForgeKind::GitLab => &GITLAB_EVENTS,
    }
}

/// `reason` of `fluxplan_webhooks_refused_total`: why a webhook was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No valid `X-Hub-Signature-256` (GitHub).
    Signature,
    /// No valid `X-Gitlab-Token` (GitLab).
    Token,
    /// The body is over the size limit (or broken).
    TooLarge,
    /// An unsigned body without `Content-Length`.
    NoLength,
    /// The body did not come in time.
    Timeout,
    /// The body came slower than the minimum rate.
    TooSlow,
    /// The client holds its share of the unverified budget.
    ClientShare,
    /// The unverified budget is spent.
    Busy,
    /// The body could not be spooled, or read back.
    Spool,
    /// The payload is not the event it says it is.
    Payload,
}

impl Refusal {
    pub const ALL: [Refusal; 10] = [
        Refusal::Signature,
        Refusal::Token,
        Refusal::TooLarge,
        Refusal::NoLength,
        Refusal::Timeout,
        Refusal::TooSlow,
        Refusal::ClientShare,
        Refusal::Busy,
        Refusal::Spool,
        Refusal::Payload,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Signature => "signature",
            Refusal::Token => "token",
            Refusal::TooLarge => "too-large",
            Refusal::NoLength => "no-length",
            Refusal::Timeout => "timeout",
            Refusal::TooSlow => "too-slow",
            Refusal::ClientShare => "client-share",
            Refusal::Busy => "busy",
            Refusal::Spool => "spool",
            Refusal::Payload => "payload",
        }
    }

    /// Whether a webhook from `forge` can be refused for it: GitHub signs its bodies, GitLab
    /// sends a token in a header, checked before a byte of the body is read, so a GitLab body
    /// is never held unverified (no length needed, no budget to share).
    pub fn applies_to(self, forge: ForgeKind) -> bool {
        match self {
            Refusal::Signature | Refusal::NoLength | Refusal::ClientShare | Refusal::Busy => {
                forge == ForgeKind::GitHub
            }
            Refusal::Token => forge == ForgeKind::GitLab,
            Refusal::TooLarge | Refusal::Timeout | Refusal::TooSlow | Refusal::Spool | Refusal::Payload => {
                true
            }
        }
    }
}

pub struct Metrics {
    registry: Registry,
    pub webhooks_received: IntCounterVec,
    pub webhooks_refused: IntCounterVec,
    pub jobs: IntGaugeVec,
    pub jobs_failed: IntCounterVec,
    pub plan_duration: HistogramVec,
    /// Plans stopped before their end, by why (`CANCEL_REASONS`).
    pub plans_cancelled: IntCounterVec,
    pub forge_errors: IntCounterVec,
    /// Forge call attempts that failed and are tried again, by kind (`fluxplan_forge_retries_total`).
    pub forge_retries: IntCounterVec,
    /// Rate-limit answers of a forge (`fluxplan_forge_rate_limits_total`).
    pub forge_rate_limits: IntCounterVec,
    /// Calls held back by a forge client's rate-limit pause (`fluxplan_forge_held_calls_total`).
    pub forge_held_calls: IntCounterVec,
    /// Merges whose rollout was compared with the plan, by outcome (exact, differs, failed,
    /// timeout).
    pub predictions: IntCounterVec,
    /// The kernel's Landlock ABI renders are confined with (0: none, renders are not confined).
    pub sandbox_landlock_abi: prometheus::IntGauge,
    /// Connections closed at once because the service holds as many as it may.
    pub connections_refused: prometheus::IntCounter,
    /// Bytes of webhook bodies being read before their signature is checked.
    pub unverified_bytes: prometheus::IntGauge,
    /// 1, labelled with the version, commit and the engines renders use.
    build_info: IntGaugeVec,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let metric = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry.register(Box::new(metric.clone())).expect("unique metric");
            metric
        };
        let webhooks_received =
            counter("fluxplan_webhooks_received_total", "Webhooks accepted", &["forge", "event"]);
        let webhooks_refused = counter(
            "fluxplan_webhooks_refused_total",
            "Webhooks refused (signature, token, payload)",
            &["forge", "reason"],
        );
        let jobs_failed = counter("fluxplan_jobs_failed_total", "Jobs that failed for good", &["kind"]);
        let plans_cancelled = counter(
            "fluxplan_plans_cancelled_total",
            "Plans stopped before their end (superseded by a newer push, or the service shut down)",
            &["forge", "reason"],
        );
        let forge_errors = counter("fluxplan_forge_api_errors_total", "Forge API errors", &["forge", "kind"]);
        let forge_retries = counter(
            "fluxplan_forge_retries_total",
            "Forge call attempts that failed and are tried again (in place, or by the job's retry)",
            &["forge", "kind"],
        );
        let forge_rate_limits =
            counter("fluxplan_forge_rate_limits_total", "Rate-limit answers of a forge", &["forge"]);
        let forge_held_calls = counter(
            "fluxplan_forge_held_calls_total",
            "Forge calls held back (waited, or their job rescheduled) while the forge's rate limit lasts",
            &["forge"],
        );
        let predictions = counter(
            "fluxplan_prediction_total",
            "Merges whose rollout was compared with their plan, by outcome",
            &["outcome"],
        );
        let jobs = IntGaugeVec::new(Opts::new("fluxplan_jobs", "Jobs by status"), &["status"])
            .expect("valid metric");
        registry.register(Box::new(jobs.clone())).expect("unique metric");
        let plan_duration = HistogramVec::new(
            HistogramOpts::new("fluxplan_plan_duration_seconds", "Time to plan a pull request")
                .buckets(vec![0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0]),
            &["forge", "verdict"],
        )
        .expect("valid metric");
        registry.register(Box::new(plan_duration.clone())).expect("unique metric");
        let gauge = |name: &str, help: &str| {
            let metric = prometheus::IntGauge::new(name, help).expect("valid metric");
            registry.register(Box::new(metric.clone())).expect("unique metric");
            metric
        };
        let sandbox_landlock_abi = gauge(
            "fluxplan_sandbox_landlock_abi",
            "Landlock ABI kustomize is confined with (0: no Landlock, reference checks only)",
        );
        sandbox_landlock_abi.set(crate::sandbox::status().landlock_abi as i64);
        let unverified_bytes = gauge(
            "fluxplan_webhook_unverified_bytes",
            "Bytes of webhook bodies being read before their signature is checked",
        );
        let connections_refused = prometheus::IntCounter::new(
            "fluxplan_connections_refused_total",
            "Connections closed at once: the service held --max-connections",
        )
        .expect("valid metric");
        registry.register(Box::new(connections_refused.clone())).expect("unique metric");
        let build_info = IntGaugeVec::new(
            Opts::new("fluxplan_build_info", "fluxplan's version, commit and rendering engines (always 1)"),
            &["version", "commit", "kustomize", "helm"],
        )
        .expect("valid metric");
        registry.register(Box::new(build_info.clone())).expect("unique metric");
        registry.register(Box::new(process::ProcessCollector::new())).expect("unique metric");
        let metrics = Metrics {
            build_info,
            sandbox_landlock_abi,
            unverified_bytes,
            connections_refused,
            registry,
            webhooks_received,
            webhooks_refused,
            jobs,
            jobs_failed,
            plan_duration,
            plans_cancelled,
            forge_errors,
            forge_retries,
            forge_rate_limits,
            forge_held_calls,
            predictions,
        };
        metrics.zero();
        metrics
    }

    /// Creates every series of every labelled family, at zero.
    fn zero(&self) {
        for forge in FORGES {
            for event in events(forge) {
                self.webhooks_received.with_label_values(&[forge.as_str(), event]);
            }
            for reason in Refusal::ALL.into_iter().filter(|r| r.applies_to(forge)) {
                self.webhooks_refused.with_label_values(&[forge.as_str(), reason.as_str()]);
            }
            for verdict in VERDICTS {
                self.plan_duration.with_label_values(&[forge.as_str(), verdict.as_str()]);
            }
            for reason in CANCEL_REASONS {
                self.plans_cancelled.with_label_values(&[forge.as_str(), reason]);
            }
            for kind in FORGE_ERRORS {
                self.forge_errors.with_label_values(&[forge.as_str(), kind]);
            }
            for kind in FORGE_RETRY_KINDS {
                self.forge_retries.with_label_values(&[forge.as_str(), kind]);
            }
            self.forge_rate_limits.with_label_values(&[forge.as_str()]);
            self.forge_held_calls.with_label_values(&[forge.as_str()]);
        }
        for status in JOB_STATUSES {
            self.jobs.with_label_values(&[status]);
        }
        for kind in JOB_KINDS {
            self.jobs_failed.with_label_values(&[kind]);
        }
        for outcome in OUTCOMES {
            self.predictions.with_label_values(&[outcome.as_str()]);
        }
    }

    /// A webhook accepted (verified and parsed); `event` is the forge's event header.
    pub fn received(&self, forge: ForgeKind, event: &str) {
        self.webhooks_received.with_label_values(&[forge.as_str(), event]).inc();
    }

    /// A webhook refused.
    pub fn refused(&self, forge: ForgeKind, reason: Refusal) {
        debug_assert!(reason.applies_to(forge), "{reason:?} is not pre-created for {forge:?}");
        self.webhooks_refused.with_label_values(&[forge.as_str(), reason.as_str()]).inc();
    }

    /// The jobs by status, as the store counts them (a status without jobs is 0).
    pub fn set_jobs(&self, counts: &[(String, i64)]) {
        for status in JOB_STATUSES {
            let n = counts.iter().find(|(s, _)| s == status).map_or(0, |(_, n)| *n);
            self.jobs.with_label_values(&[status]).set(n);
        }
    }

    /// A job of `kind` (`JobPayload::kind`, as the job row holds it) failed for good.
    pub fn job_failed(&self, kind: &str) {
        debug_assert!(JOB_KINDS.contains(&kind), "job kind {kind} is not in JOB_KINDS");
        self.jobs_failed.with_label_values(&[kind]).inc();
    }

    /// A plan finished with `verdict` after `seconds`.
    pub fn planned(&self, forge: ForgeKind, verdict: Verdict, seconds: f64) {
        self.plan_duration.with_label_values(&[forge.as_str(), verdict.as_str()]).observe(seconds);
    }

    /// A plan was stopped before its end for `reason` (one of `CANCEL_REASONS`).
    pub fn plan_cancelled(&self, forge: ForgeKind, reason: &str) {
        debug_assert!(CANCEL_REASONS.contains(&reason), "cancel reason {reason} is not in CANCEL_REASONS");
        self.plans_cancelled.with_label_values(&[forge.as_str(), reason]).inc();
    }

    /// A call to `forge`'s API failed.
    pub fn forge_error(&self, forge: ForgeKind, error: &ForgeError) {
        self.forge_errors.with_label_values(&[forge.as_str(), error.label()]).inc();
    }

    /// The counters the forge clients count their calls into.
    pub fn forge_call_counters(&self) -> crate::forge::gate::CallCounters {
        crate::forge::gate::CallCounters {
            retries: self.forge_retries.clone(),
            rate_limits: self.forge_rate_limits.clone(),
            held: self.forge_held_calls.clone(),
        }
    }

    /// A merge's rollout was compared with its plan.
    pub fn prediction(&self, outcome: Outcome) {
        self.predictions.with_label_values(&[outcome.as_str()]).inc();
    }

    /// Records what this build renders with (`fluxplan_build_info`).
    pub fn set_build_info(&self, kustomize: &str, helm: &str) {
        let labels = [env!("CARGO_PKG_VERSION"), env!("FLUXPLAN_COMMIT"), kustomize, helm];
        self.build_info.with_label_values(&labels).set(1);
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buffer);
        String::from_utf8(buffer).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each closed set holds every value of what it labels: a new variant fails to compile here
    /// until it is matched, and then the count tells whether the set has it too.
    #[test]
    fn the_closed_sets_hold_every_value() {
        let forges = FORGES.map(|f| match f {
            ForgeKind::GitHub | ForgeKind::GitLab => f.as_str(),
        });
        assert_eq!(forges, ["github", "gitlab"]);
        let verdicts = VERDICTS.map(|v| match v {
            Verdict::NoChanges | Verdict::Changes | Verdict::Blocked | Verdict::Failed => v.as_str(),
        });
        assert_eq!(verdicts, ["no-changes", "changes", "blocked", "failed"]);
        let outcomes = OUTCOMES.map(|o| match o {
            Outcome::Exact | Outcome::Differs | Outcome::Failed | Outcome::Timeout => o.as_str(),
        });
        assert_eq!(outcomes, ["exact", "differs", "failed", "timeout"]);
        let errors = |e: ForgeError| match e {
            ForgeError::RateLimited(_) | ForgeError::Transient(_) | ForgeError::NotFound(_) => e.label(),
            ForgeError::Unauthorized(_) | ForgeError::Permanent(_) => e.label(),
        };
        let every_error = [
            ForgeError::RateLimited(None),
            ForgeError::Transient(String::new()),
            ForgeError::NotFound(String::new()),
            ForgeError::Unauthorized(String::new()),
            ForgeError::Permanent(String::new()),
        ];
        assert_eq!(every_error.map(errors), FORGE_ERRORS);
        let refusals = Refusal::ALL.map(|r| match r {
            Refusal::Signature | Refusal::Token | Refusal::TooLarge | Refusal::NoLength => r.as_str(),
            Refusal::Timeout | Refusal::TooSlow | Refusal::ClientShare | Refusal::Busy => r.as_str(),
            Refusal::Spool | Refusal::Payload => r.as_str(),
        });
        let distinct: std::collections::BTreeSet<_> = refusals.iter().collect();
        assert_eq!(distinct.len(), Refusal::ALL.len());
    }

    #[test]
    fn every_labelled_series_is_exported_at_zero_before_any_event() {
        let page = Metrics::new().render();
        let series = |line: &str| page.lines().any(|l| l == line);
        assert!(
            series("fluxplan_webhooks_received_total{event=\"pull_request\",forge=\"github\"} 0"),
            "{page}"
        );
        assert!(series("fluxplan_webhooks_received_total{event=\"Note Hook\",forge=\"gitlab\"} 0"), "{page}");
        assert!(series("fluxplan_webhooks_refused_total{forge=\"github\",reason=\"signature\"} 0"), "{page}");
        assert!(series("fluxplan_webhooks_refused_total{forge=\"gitlab\",reason=\"token\"} 0"), "{page}");
        assert!(!page.contains("forge=\"gitlab\",reason=\"signature\""), "{page}");
        assert!(series("fluxplan_jobs{status=\"superseded\"} 0"), "{page}");
        assert!(series("fluxplan_jobs_failed_total{kind=\"merge-group\"} 0"), "{page}");
        assert!(
            series("fluxplan_plan_duration_seconds_count{forge=\"gitlab\",verdict=\"blocked\"} 0"),
            "{page}"
        );
        assert!(
            series("fluxplan_forge_api_errors_total{forge=\"github\",kind=\"rate_limited\"} 0"),
            "{page}"
        );
        assert!(series("fluxplan_prediction_total{outcome=\"timeout\"} 0"), "{page}");
        assert!(series("fluxplan_forge_retries_total{forge=\"gitlab\",kind=\"timeout\"} 0"), "{page}");
        assert!(series("fluxplan_forge_rate_limits_total{forge=\"github\"} 0"), "{page}");
        assert!(series("fluxplan_forge_held_calls_total{forge=\"github\"} 0"), "{page}");
        let received = page.lines().filter(|l| l.starts_with("fluxplan_webhooks_received_total{")).count();
        assert_eq!(received, GITHUB_EVENTS.len() + GITLAB_EVENTS.len());
        let refused = page.lines().filter(|l| l.starts_with("fluxplan_webhooks_refused_total{")).count();
        assert_eq!(refused, 9 + 6);
    }
}
