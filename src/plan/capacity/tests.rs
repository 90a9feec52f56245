use super::*;
use serde_json::json;

fn pod_of(spec: Value) -> Resources {
    let mut reader = Reader { display: "Pod x/y", unreadable: Vec::new(), notes: Vec::new() };
    let r = reader.pod(&spec);
    assert!(reader.unreadable.is_empty(), "{:?}", reader.unreadable);
    r
}

#[test]
fn init_containers_reserve_their_largest_and_sidecars_add() {
    // Kubernetes' own example: init 200Mi and 150Mi, apps 120Mi + 140Mi: max(200, 260) = 260Mi.
    let r = pod_of(json!({
        "initContainers": [
            {"name": "a", "resources": {"requests": {"memory": "200Mi"}}},
            {"name": "b", "resources": {"requests": {"memory": "150Mi"}}},
        ],
        "containers": [
            {"name": "c", "resources": {"requests": {"memory": "120Mi"}, "limits": {"memory": "1Gi"}}},
            {"name": "d", "resources": {"requests": {"memory": "140Mi"}, "limits": {"memory": "1Gi"}}},
        ],
    }));
    assert_eq!(r.memory_request_bytes, 260 << 20);
    assert_eq!(r.memory_limit_bytes, None, "an init container without a limit leaves the pod unbounded");
    // A sidecar (restartPolicy Always) runs on: it adds to the apps, and to the init containers
    // started after it.
    let r = pod_of(json!({
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}}},
            {"name": "migrate", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}},
        ],
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}}],
    }));
    assert_eq!(r.cpu_request_millicores, 2100, "max(500 + 100, 2000 + 100)");
    assert_eq!(r.cpu_limit_millicores, Some(2100));
}

#[test]
fn a_limit_alone_is_the_request_and_overhead_adds() {
    let r = pod_of(json!({
        "overhead": {"cpu": "250m", "memory": "120Mi"},
        "containers": [{"name": "app", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}],
    }));
    assert_eq!(r.cpu_request_millicores, 1250);
    assert_eq!(r.cpu_limit_millicores, Some(1250));
    assert_eq!(r.memory_request_bytes, (1 << 30) + (120 << 20));
}

#[test]
fn pod_level_resources_replace_the_containers() {
    let r = pod_of(json!({
        "resources": {"requests": {"cpu": "3"}, "limits": {"memory": "4Gi"}},
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
    }));
    assert_eq!(r.cpu_request_millicores, 3000);
    assert_eq!(r.cpu_limit_millicores, None);
    assert_eq!(r.memory_request_bytes, 1 << 30);
    assert_eq!(r.memory_limit_bytes, Some(4 << 30));
}

fn ids(objects: &[Value]) -> BTreeMap<ObjectId, &Value> {
    objects.iter().map(|o| (crate::cluster::snapshot::live_id(o).unwrap(), o)).collect()
}

#[test]
fn hostile_figures_are_noted_not_counted_and_never_overflow() {
    let objects = [
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "huge", "namespace": "a"},
               "spec": {"replicas": 2147483647, "template": {"spec": {"containers": [
                   {"name": "c", "resources": {"requests": {"cpu": "1e999999999", "memory": "8Ei"}}}]}}}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad", "namespace": "a"},
               "spec": {"replicas": "3", "template": {"spec": {"containers": [
                   {"name": "c", "resources": {"requests": {"cpu": "-1", "memory": "lots"}}}]}}}}),
    ];
    let tally = tally(&ids(&objects), None);
    let a = &tally["a"];
    assert_eq!(a.side.total.cpu_request_millicores, u64::MAX, "saturates: above any maximum");
    assert_eq!(a.side.total.memory_request_bytes, u64::MAX);
    assert_eq!(a.side.unreadable.len(), 3, "{:?}", a.side.unreadable);
    assert!(a.notes.iter().any(|n| n.contains("2^63-1")), "{:?}", a.notes);
}

#[test]
fn replicas_default_daemonsets_go_per_node_and_autoscalers_count_their_minimum() {
    let container = json!([{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]);
    let objects = [
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "one", "namespace": "a"},
               "spec": {"template": {"spec": {"containers": container}}}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "scaled", "namespace": "a"},
               "spec": {"replicas": 9, "template": {"spec": {"containers": container}}}}),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "scaled", "namespace": "a"},
               "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "scaled"},
                        "minReplicas": 3, "maxReplicas": 10}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "a"},
               "spec": {"template": {"spec": {"containers": container}}}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "a"},
               "spec": {"replicas": 2, "template": {"spec": {"containers": container}},
                        "volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": "10Gi"}}}}]}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "a"},
               "spec": {"resources": {"requests": {"storage": "5Gi"}}}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": "a"},
               "spec": {"template": {"spec": {"containers": container}}}}),
    ];
    let unknown = tally(&ids(&objects), None);
    let a = &unknown["a"].side;
    // 1 (default) + 3 (the autoscaler's minimum, not 9) + 2 replicas; the Job is not counted.
    assert_eq!(a.total.cpu_request_millicores, 6 * 100);
    assert_eq!(a.total.memory_request_bytes, 6 * (64 << 20));
    assert_eq!(a.total.cpu_limit_millicores, None);
    assert_eq!(a.per_node.cpu_request_millicores, 100);
    assert_eq!(a.total.storage_bytes, 2 * (10 << 30) + (5 << 30));
    assert!(unknown["a"].notes.iter().any(|n| n.contains("between 3 and 10")));
    let known = tally(&ids(&objects), Some(4));
    assert_eq!(known["a"].side.total.cpu_request_millicores, 10 * 100);
    assert!(known["a"].side.per_node.is_zero());
}

#[test]
fn the_policy_reads_quantities_and_refuses_hostile_ones() {
    let policy = Policy::parse("capacity:\n  maxRequestIncrease:\n    cpu: 4\n    memory: 8Gi\n").unwrap();
    assert_eq!(policy.capacity_max_increase.cpu_millicores, Some(4000));
    assert_eq!(policy.capacity_max_increase.memory_bytes, Some(8 << 30));
    for bad in ["cpu: 1e99999", "memory: -1Gi", "memory: lots", "cpu: [1]"] {
        let error = Policy::parse(&format!("capacity:\n  maxRequestIncrease:\n    {bad}\n")).unwrap_err();
        assert!(error.contains("capacity.maxRequestIncrease"), "{bad}: {error}");
    }
}

fn namespace(before_cpu: u64, after_cpu: u64, unreadable: Vec<String>) -> Capacity {
    let side =
        |cpu| Side { total: Resources { cpu_request_millicores: cpu, ..Resources::ZERO }, ..Side::default() };
    vec![ClusterCapacity {
        cluster: "clusters/prod".into(),
        nodes: None,
        namespaces: vec![NamespaceCapacity {
            namespace: "apps".into(),
            before: side(before_cpu),
            after: Side { unreadable, ..side(after_cpu) },
            notes: Vec::new(),
        }],
    }]
}

#[test]
fn the_alert_fires_above_the_maximum_and_not_at_it() {
    let policy = Policy::parse("capacity:\n  maxRequestIncrease:\n    cpu: 4\n").unwrap();
    // Near miss: exactly 4 cores more.
    assert!(alerts(&policy, &[], &namespace(1000, 5000, Vec::new())).is_empty());
    // One millicore above.
    let fired = alerts(&policy, &[], &namespace(1000, 5001, Vec::new()));
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].code, CODE);
    assert_eq!(fired[0].severity, super::super::Severity::Danger);
    assert!(fired[0].message.contains("4.001"), "{}", fired[0].message);
    // A decrease never fires; unreadable figures fire when a maximum is set.
    assert!(alerts(&policy, &[], &namespace(9000, 1000, Vec::new())).is_empty());
    assert_eq!(alerts(&policy, &[], &namespace(1000, 1000, vec!["x".into()])).len(), 1);
    // Without a maximum, nothing is checked.
    assert!(alerts(&Policy::default(), &[], &namespace(0, u64::MAX, vec!["x".into()])).is_empty());
}
