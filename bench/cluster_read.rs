//! Cluster read benchmark: an inventory of 5,000 objects over 50 kinds in 10 namespaces, served by
//! the fake API server of the tests. Reports requests and time; the read must cost
//! O(kinds × namespaces) requests, not O(objects). Run: `cargo bench --bench cluster_read`.

#[path = "../tests/integration/fake_kube.rs"]
mod fake_kube;

use fluxplan::cluster::kube::{KubeCluster, KubeOptions};
use serde_json::json;
use std::time::Instant;

const KINDS: usize = 50;
const NAMESPACES: usize = 10;
const PER_KIND_AND_NAMESPACE: usize = 10;

fn main() {
    let mut objects = Vec::new();
    let mut entries = Vec::new();
    for k in 0..KINDS {
        let kind = format!("Kind{k:02}");
        let plural = format!("kind{k:02}s");
        objects.push(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.bench.example.com")},
            "spec": {"group": "bench.example.com", "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
                "versions": [{"name": "v1", "served": true, "storage": true}]}
        }));
        for n in 0..NAMESPACES {
            for i in 0..PER_KIND_AND_NAMESPACE {
                let name = format!("obj-{i}");
                let namespace = format!("ns-{n}");
                entries
                    .push(json!({"id": format!("{namespace}_{name}_bench.example.com_{kind}"), "v": "v1"}));
                objects.push(json!({
                    "apiVersion": "bench.example.com/v1", "kind": kind,
                    "metadata": {"name": name, "namespace": namespace, "labels": {
                        "kustomize.toolkit.fluxcd.io/name": "bench", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
                    "spec": {"value": i}
                }));
            }
        }
    }
    let total = entries.len();
    objects.push(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "bench", "namespace": "flux-system"},
        "spec": {"path": "./", "prune": true, "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {"inventory": {"entries": entries}}
    }));
    let fake = fake_kube::FakeKube::start(objects);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let started = Instant::now();
    let (objects_read, requests) = runtime.block_on(async {
        fluxplan::tls::install_crypto_provider();
        let client = kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
        let cluster = KubeCluster::with_client(client, KubeOptions::default()).await.unwrap();
        let snapshot = cluster.snapshot().await.unwrap();
        (snapshot.objects.len(), cluster.request_count())
    });
    let elapsed = started.elapsed();
    let all_requests = fake.requests().len();
    let report = format!(
        "# Cluster read benchmark ({} cores)\n\n| inventory objects | kinds × namespaces | objects read | list/get requests | all requests incl. discovery | time |\n|---|---|---|---|---|---|\n| {total} | {KINDS} × {NAMESPACES} | {objects_read} | {requests} | {all_requests} | {:.2} s |\n",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        elapsed.as_secs_f64()
    );
    print!("{report}");
    let _ = std::fs::create_dir_all("bench/out");
    let _ = std::fs::write("bench/out/cluster.md", &report);
    assert_eq!(objects_read, total, "every inventory object is read");
    assert!(requests <= KINDS * NAMESPACES + 10, "{requests} requests: not O(kinds × namespaces)");
}
