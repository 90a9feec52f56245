//! The capacity a merge adds: a fixture whose figures this test works out by hand from the
//! literal values it writes (not through fluxplan's quantity code), the table in the comment,
//! `capacity.maxRequestIncrease` at and just above the increase, hostile quantities.

use crate::fixture::{alert_codes, has_alert, plan_cli, plan_json, Repo};
use serde_json::json;

const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;

/// A Deployment `web`: `replicas` (None: left out), an init container and an app container.
fn web(replicas: Option<u32>, app_cpu: &str, app_memory: &str) -> String {
    let replicas = replicas.map(|r| format!("  replicas: {r}\n")).unwrap_or_default();
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n{replicas}  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      initContainers:\n      - name: migrate\n        image: migrate:1\n        resources:\n          requests: {{cpu: 1500m, memory: 64Mi}}\n          limits: {{cpu: 2, memory: 128Mi}}\n      containers:\n      - name: app\n        image: web:1\n        resources:\n          requests: {{cpu: {app_cpu}, memory: {app_memory}}}\n          limits: {{cpu: 1, memory: 1Gi}}\n      - name: proxy\n        image: proxy:1\n        resources:\n          limits: {{cpu: 100m, memory: 0.125Gi}}\n"
    )
}

const DATABASE: &str = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\n  namespace: shop\nspec:\n  replicas: 3\n  serviceName: db\n  selector:\n    matchLabels: {app: db}\n  template:\n    metadata:\n      labels: {app: db}\n    spec:\n      containers:\n      - name: db\n        image: postgres:17\n        resources:\n          requests: {cpu: \"0.5\", memory: 2G}\n  volumeClaimTemplates:\n  - metadata:\n      name: data\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests: {storage: 10Gi}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: uploads\n  namespace: shop\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests: {storage: 5e9}\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\n  namespace: shop\nspec:\n  selector:\n    matchLabels: {app: agent}\n  template:\n    metadata:\n      labels: {app: agent}\n    spec:\n      containers:\n      - name: agent\n        image: agent:1\n        resources:\n          requests: {cpu: 50m, memory: 32Mi}\n          limits: {cpu: 50m, memory: 32Mi}\n";

/// Base: `web` with replicas left out (1), app 250m/256Mi. Head: `web` with 4 replicas, app
/// 0.75 cores and 1Gi, and a database, a claim and a DaemonSet.
fn repo() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n");
    repo.write("apps/web.yaml", &web(None, "250m", "256Mi"));
    repo.write(
        "apps/untouched.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: quiet\n  namespace: other\nspec:\n  selector:\n    matchLabels: {app: quiet}\n  template:\n    metadata:\n      labels: {app: quiet}\n    spec:\n      containers:\n      - name: quiet\n        image: quiet:1\n        resources:\n          requests: {cpu: 7, memory: 7Gi}\n",
    );
    repo.commit("base");
    repo.write("apps/web.yaml", &web(Some(4), "0.75", "1Gi"));
    repo.write("apps/db.yaml", DATABASE);
    repo.commit("scale web, add a database");
    repo
}

/// The figures this test expects, worked out by hand from the literals above. A pod's request is
/// max(sum of app containers, largest init container); a limit alone is the request.
struct Expected {
    cpu_m: u64,
    memory: u64,
    cpu_limit_m: Option<u64>,
    memory_limit: Option<u64>,
    storage: u64,
}

fn base_expected() -> Expected {
    // web × 1: cpu max(250 + 100, 1500) = 1500m; memory max(256Mi + 128Mi, 64Mi) = 384Mi;
    // limits max(1000 + 100, 2000) = 2000m, max(1Gi + 128Mi, 128Mi).
    Expected {
        cpu_m: 1500,
        memory: 384 * MI,
        cpu_limit_m: Some(2000),
        memory_limit: Some(GI + 128 * MI),
        storage: 0,
    }
}

fn head_expected(nodes: Option<u64>) -> Expected {
    // web × 4: cpu max(750 + 100, 1500) = 1500m each; memory max(1Gi + 128Mi, 64Mi) each.
    let web_cpu = 4 * 1500;
    let web_memory = 4 * (GI + 128 * MI);
    // db × 3: 500m and 2G (decimal) each, no limits: unbounded; 3 claims of 10Gi; uploads 5e9.
    let db_cpu = 3 * 500;
    let db_memory = 3 * 2_000_000_000;
    let storage = 3 * 10 * GI + 5_000_000_000;
    // agent: 50m and 32Mi per node, counted on each node when the count is known.
    let per_node = nodes.unwrap_or(0);
    Expected {
        cpu_m: web_cpu + db_cpu + per_node * 50,
        memory: web_memory + db_memory + per_node * 32 * MI,
        cpu_limit_m: None,
        memory_limit: None,
        storage,
    }
}

fn assert_side(side: &serde_json::Value, expected: &Expected) {
    assert_eq!(
        side["total"],
        json!({
            "cpuRequestMillicores": expected.cpu_m, "memoryRequestBytes": expected.memory,
            "cpuLimitMillicores": expected.cpu_limit_m, "memoryLimitBytes": expected.memory_limit,
            "storageBytes": expected.storage,
        }),
        "{side:#}"
    );
}

#[test]
fn the_capacity_of_a_fixture_matches_the_figures_worked_out_by_hand() {
    let repo = repo();
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", alert_codes(&plan));
    let clusters = plan["capacity"].as_array().expect("a capacity key");
    assert_eq!(clusters.len(), 1, "{:#}", plan["capacity"]);
    assert_eq!(clusters[0]["cluster"], "clusters/prod");
    assert_eq!(clusters[0]["nodes"], json!(null), "no cluster read: the node count is unknown");
    let namespaces = clusters[0]["namespaces"].as_array().unwrap();
    assert_eq!(namespaces.len(), 1, "only the namespace that changes: {namespaces:#?}");
    let shop = &namespaces[0];
    assert_eq!(shop["namespace"], "shop");
    assert_side(&shop["before"], &base_expected());
    assert_side(&shop["after"], &head_expected(None));
    assert_eq!(
        shop["after"]["perNode"],
        json!({"cpuRequestMillicores": 50, "memoryRequestBytes": 32 * MI, "cpuLimitMillicores": 50,
               "memoryLimitBytes": 32 * MI, "storageBytes": 0})
    );
    assert!(shop["before"].get("perNode").is_none(), "{:#}", shop["before"]);
    // No policy maximum: no alert.
    assert!(!alert_codes(&plan).iter().any(|(_, code)| code == "capacity-increase"));

    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    let table = &markdown[markdown.find("### Capacity").expect("a capacity table")..];
    let table = &table[..table.find("\n\n###").unwrap_or(table.len())];
    insta::assert_snapshot!("capacity_table_markdown", table);
    let (text, _) = plan_cli(&repo, "HEAD~1", "HEAD", "text", &["--color", "never"]);
    assert!(text.contains("capacity clusters/prod shop: cpu requests 1.5 → 7.5 + 50m/node"), "{text}");
}

#[test]
fn daemonsets_count_on_every_node_a_snapshot_records() {
    let repo = repo();
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("snapshot.yaml");
    std::fs::write(
        &snapshot,
        "apiVersion: fluxplan.dev/v1alpha1\nkind: ClusterSnapshot\nnodeCount: 4\nkustomizations: []\n",
    )
    .unwrap();
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", snapshot.to_str().unwrap()]);
    let cluster = &plan["capacity"][0];
    assert_eq!(cluster["nodes"], 4, "{:#}", plan["capacity"]);
    assert_side(&cluster["namespaces"][0]["after"], &head_expected(Some(4)));
    assert!(cluster["namespaces"][0]["after"].get("perNode").is_none());
}

fn policy(dir: &tempfile::TempDir, cpu: &str, memory: &str) -> String {
    let file = dir.path().join(format!("policy-{cpu}-{memory}.yaml"));
    std::fs::write(
        &file,
        format!("capacity:\n  maxRequestIncrease:\n    cpu: \"{cpu}\"\n    memory: {memory}\n"),
    )
    .unwrap();
    file.to_str().unwrap().to_string()
}

#[test]
fn max_request_increase_blocks_above_the_increase_and_not_at_it() {
    let repo = repo();
    let dir = tempfile::tempdir().unwrap();
    // The increase, by hand (DaemonSets on an unknown node count count once).
    let (before, after) = (base_expected(), head_expected(Some(1)));
    let cpu_rise = after.cpu_m - before.cpu_m; // 6050m
    let memory_rise = after.memory - before.memory;
    assert_eq!(cpu_rise, 6050);
    // Near miss: exactly the increase is allowed.
    let at = policy(&dir, &format!("{cpu_rise}m"), &memory_rise.to_string());
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--policy", &at]);
    assert_eq!(code, 1, "at the maximum: not blocked {:?}", alert_codes(&plan));
    assert!(!has_alert(&plan, "danger", "capacity-increase"));
    // One millicore less is exceeded.
    let below = policy(&dir, &format!("{}m", cpu_rise - 1), &memory_rise.to_string());
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--policy", &below]);
    assert_eq!(code, 2, "{:?}", alert_codes(&plan));
    let alert = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "capacity-increase").unwrap();
    assert_eq!(alert["severity"], "danger");
    assert_eq!(alert["cluster"], "clusters/prod");
    let message = alert["message"].as_str().unwrap();
    assert!(message.contains("namespace shop: CPU requests rise by 6.05 (above 6.049)"), "{message}");
    assert!(!message.contains("memory requests rise"), "memory is at its maximum: {message}");
    let objects: Vec<&str> =
        alert["objects"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()).collect();
    assert_eq!(
        objects,
        [
            "shop_agent_apps_DaemonSet",
            "shop_db_apps_StatefulSet",
            "shop_uploads__PersistentVolumeClaim",
            "shop_web_apps_Deployment"
        ]
    );
    // One byte less of memory too.
    let both = policy(&dir, &format!("{}m", cpu_rise - 1), &(memory_rise - 1).to_string());
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--policy", &both]);
    let alert = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "capacity-increase").unwrap();
    assert!(alert["message"].as_str().unwrap().contains("memory requests rise by"), "{alert:#}");
}

#[test]
fn hostile_quantities_neither_crash_nor_slip_under_the_maximum() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n");
    repo.write("apps/web.yaml", &web(Some(1), "250m", "256Mi"));
    repo.commit("base");
    // A huge exponent, an overflowing product, and a quantity that is none.
    repo.write("apps/web.yaml", &web(Some(2147483647), "\"1e999999999\"", "9Ei"));
    repo.write(
        "apps/bad.yaml",
        &web(Some(1), "lots", "-1Gi").replace("name: web", "name: bad").replace("app: web", "app: bad"),
    );
    repo.commit("hostile");
    let dir = tempfile::tempdir().unwrap();
    let at = policy(&dir, "1000", "1Ei");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--policy", &at]);
    assert_eq!(code, 2, "{:?}", alert_codes(&plan));
    let shop = &plan["capacity"][0]["namespaces"][0];
    assert_eq!(shop["after"]["total"]["cpuRequestMillicores"], u64::MAX, "saturated: {shop:#}");
    let unreadable: Vec<&str> =
        shop["after"]["unreadable"].as_array().unwrap().iter().map(|u| u.as_str().unwrap()).collect();
    assert_eq!(unreadable.len(), 2, "{unreadable:?}");
    assert!(unreadable.iter().any(|u| u.contains("'lots' is not a Kubernetes quantity")), "{unreadable:?}");
    assert!(unreadable.iter().any(|u| u.contains("'-1Gi' is negative")), "{unreadable:?}");
    assert!(
        shop["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("counted at 2^63-1")),
        "{shop:#}"
    );
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &["--policy", &at]);
    assert!(markdown.contains("### Capacity") && markdown.contains("not counted"), "{markdown}");
}

#[test]
fn a_merge_that_changes_no_figure_has_no_table() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n");
    repo.write("apps/web.yaml", &web(None, "250m", "256Mi"));
    repo.commit("base");
    // The same figures written otherwise (1 replica said out loud, 0.25 cores, 268435456 bytes).
    repo.write("apps/web.yaml", &web(Some(1), "\"0.25\"", "268435456"));
    repo.commit("same figures");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1);
    assert!(plan.get("capacity").is_none(), "{:#}", plan["capacity"]);
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert!(!markdown.contains("### Capacity"), "{markdown}");
}
