//! Prometheus metrics: webhooks received and refused, jobs by status, plan durations, forge API
//! errors.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    pub webhooks_received: IntCounterVec,
    pub webhooks_refused: IntCounterVec,
    pub jobs: IntGaugeVec,
    pub jobs_failed: IntCounterVec,
    pub plan_duration: HistogramVec,
    pub forge_errors: IntCounterVec,
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
        let forge_errors = counter("fluxplan_forge_api_errors_total", "Forge API errors", &["forge", "kind"]);
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
        Metrics {
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
            forge_errors,
            predictions,
        }
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
