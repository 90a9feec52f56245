//! Cascades beyond Flux: the copies an OpenKruise ResourceDistribution makes, and what
//! helm-controller's uninstall of a deleted HelmRelease deletes, planned offline, from a snapshot
//! file and against the fake cluster; Secret values and Helm release payloads never shown.

use crate::fake_kube::FakeKube;
use crate::fixture::{fluxplan_bin, plan_cli, plan_json, Repo};
use base64::Engine;
use serde_json::{json, Value};
use std::io::Write;
use std::process::Command;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

// ---------------------------------------------------------------------------------------------
// ResourceDistribution

const OLD_PASSWORD: &str = "registry-password-before-7f3a";
const NEW_PASSWORD: &str = "registry-password-after-91c4";

const NAMESPACES: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n  labels: {tier: shared, team: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n  labels: {tier: shared, team: b}\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-c\n  labels: {tier: shared, team: c}\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: tools\n";

const DISTRIBUTION_CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: resourcedistributions.apps.kruise.io\nspec:\n  group: apps.kruise.io\n  scope: Cluster\n  names:\n    kind: ResourceDistribution\n    plural: resourcedistributions\n    singular: resourcedistribution\n  versions:\n  - name: v1alpha1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n";

/// A distribution of Secret `regcred` holding `password`, with `targets` (YAML, 4 spaces in).
fn distribution(password: &str, targets: &str) -> String {
    let config =
        B64.encode(format!("{{\"auths\":{{\"registry.example.com\":{{\"password\":\"{password}\"}}}}}}"));
    format!(
        "apiVersion: apps.kruise.io/v1alpha1\nkind: ResourceDistribution\nmetadata:\n  name: registry-credentials\n\
         spec:\n  resource:\n    apiVersion: v1\n    kind: Secret\n    metadata:\n      name: regcred\n    \
         type: kubernetes.io/dockerconfigjson\n    data:\n      .dockerconfigjson: {config}\n  targets:\n{targets}"
    )
}

const EVERY_SHARED_NAMESPACE: &str =
    "    namespaceLabelSelector:\n      matchLabels:\n        tier: shared\n";
const TEAM_A_ONLY: &str =
    "    namespaceLabelSelector:\n      matchExpressions:\n      - {key: team, operator: In, values: [a]}\n";

/// Base: the distribution copies into every `tier: shared` namespace (team-a, team-b, team-c).
/// Head: its selector matches team a only, and the password changes.
fn distribution_repo() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/infra.yaml", "infra", "./infra", "");
    repo.kustomization("clusters/prod/shared.yaml", "shared", "./shared", "");
    repo.write("infra/namespaces.yaml", NAMESPACES);
    repo.write("infra/crd.yaml", DISTRIBUTION_CRD);
    repo.write("shared/registry.yaml", &distribution(OLD_PASSWORD, EVERY_SHARED_NAMESPACE));
    repo.commit("distribute the registry credentials");
    repo.write("shared/registry.yaml", &distribution(NEW_PASSWORD, TEAM_A_ONLY));
    repo.commit("only team a, new password");
    repo
}

fn plan_of<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == name)
        .unwrap_or_else(|| panic!("{name} not planned: {plan}"))
}

fn changes(plan: &Value, name: &str) -> Vec<(String, String)> {
    plan_of(plan, name)["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["action"].as_str().unwrap().to_string(), c["id"].as_str().unwrap().to_string()))
        .collect()
}

/// (action, id) of the changes of the HelmRelease unit `name`.
fn release_changes(plan: &Value, name: &str) -> Vec<(String, String)> {
    let release = plan["kustomizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == "HelmRelease" && k["name"] == name)
        .unwrap_or_else(|| panic!("HelmRelease {name} not planned: {plan}"));
    release["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["action"].as_str().unwrap().to_string(), c["id"].as_str().unwrap().to_string()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// Asserts none of `secrets` (nor their base64) appears in `output`.
fn assert_hidden(output: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!output.contains(secret), "{secret} leaked:\n{output}");
        assert!(!output.contains(&B64.encode(secret)), "{secret} leaked in base64:\n{output}");
    }
}

#[test]
fn a_selector_that_stops_matching_two_namespaces_deletes_two_copies() {
    let repo = distribution_repo();
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan}");
    assert_eq!(
        changes(&plan, "shared"),
        pairs(&[
            ("update", "team-a_regcred__Secret"),
            ("update", "_registry-credentials_apps.kruise.io_ResourceDistribution"),
            ("delete", "team-b_regcred__Secret"),
            ("delete", "team-c_regcred__Secret"),
        ])
    );
    let shared = plan_of(&plan, "shared");
    let copies: Vec<&Value> =
        shared["changes"].as_array().unwrap().iter().filter(|c| c["kind"] == "Secret").collect();
    assert!(copies.iter().all(|c| c["cascade_from"] == "ResourceDistribution registry-credentials"));
    assert_eq!(copies[0]["hidden_changes"], json!(["Secret data..dockerconfigjson changed (value hidden)"]));
    assert!(copies[1]["reason"].as_str().unwrap().contains("team-b is no longer targeted"), "{}", copies[1]);
    assert!(shared["notes"][0].as_str().unwrap().contains("namespaces are unknown"), "{}", shared["notes"]);
    assert_eq!(plan["summary"]["delete"], 2);

    let json_text = serde_json::to_string_pretty(&plan).unwrap();
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    for output in [&json_text, &markdown] {
        assert_hidden(output, &[OLD_PASSWORD, NEW_PASSWORD]);
    }
    insta::assert_snapshot!("cascades_distribution_selector_markdown", markdown);
    insta::assert_snapshot!("cascades_distribution_selector_json", json_text);
}

/// A snapshot whose Kustomizations hold what the base renders, with `namespaces` as given.
fn distribution_snapshot(namespaces: &str) -> String {
    let kustomization = |name: &str, ids: &[&str]| {
        let entries: Vec<String> = ids.iter().map(|id| format!("{{id: {id}, v: v1}}")).collect();
        format!(
            "- apiVersion: kustomize.toolkit.fluxcd.io/v1\n  kind: Kustomization\n  metadata: {{name: {name}, namespace: flux-system}}\n  \
             spec: {{path: ./{name}, prune: true, sourceRef: {{kind: GitRepository, name: flux-system}}}}\n  \
             status: {{inventory: {{entries: [{}]}}}}\n",
            entries.join(", ")
        )
    };
    format!(
        "apiVersion: fluxplan.dev/v1alpha1\nkind: ClusterSnapshot\nkustomizations:\n{}{}namespaces:\n{namespaces}",
        kustomization(
            "infra",
            &[
                "_team-a__Namespace",
                "_team-b__Namespace",
                "_team-c__Namespace",
                "_tools__Namespace",
                "_resourcedistributions.apps.kruise.io_apiextensions.k8s.io_CustomResourceDefinition"
            ]
        ),
        kustomization("shared", &["_registry-credentials_apps.kruise.io_ResourceDistribution"]),
    )
}

#[test]
fn live_namespace_labels_decide_the_targets() {
    let repo = distribution_repo();
    // The cluster has one more shared namespace the repository does not define, and kube-system
    // carries the label too (Kruise never distributes there).
    let snapshot = distribution_snapshot(
        "- metadata: {name: team-a, labels: {tier: shared, team: a}}\n\
         - metadata: {name: team-b, labels: {tier: shared, team: b}}\n\
         - metadata: {name: team-c, labels: {tier: shared, team: c}}\n\
         - metadata: {name: team-d, labels: {tier: shared, team: d}}\n\
         - metadata: {name: kube-system, labels: {tier: shared}}\n- tools\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snapshot.yaml");
    std::fs::write(&file, snapshot).unwrap();
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", file.to_str().unwrap()]);
    assert_eq!(
        changes(&plan, "shared"),
        pairs(&[
            ("update", "team-a_regcred__Secret"),
            ("update", "_registry-credentials_apps.kruise.io_ResourceDistribution"),
            ("delete", "team-b_regcred__Secret"),
            ("delete", "team-c_regcred__Secret"),
            ("delete", "team-d_regcred__Secret"),
        ])
    );
    assert!(plan_of(&plan, "shared").get("notes").is_none(), "the namespaces are the cluster's");
}

/// The cluster as the base left it, with live namespace labels the repository does not set.
fn distribution_cluster() -> Vec<Value> {
    let namespace = |name: &str, labels: Value| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
    let mut distribution: Value =
        serde_norway::from_str(&distribution(OLD_PASSWORD, EVERY_SHARED_NAMESPACE)).unwrap();
    distribution["metadata"]["labels"] = owned_by("shared");
    let crd: Value = serde_norway::from_str(DISTRIBUTION_CRD).unwrap();
    vec![
        crd,
        live_kustomization(
            "infra",
            "./infra",
            &[
                "_team-a__Namespace",
                "_team-b__Namespace",
                "_team-c__Namespace",
                "_tools__Namespace",
                "_resourcedistributions.apps.kruise.io_apiextensions.k8s.io_CustomResourceDefinition",
            ],
        ),
        live_kustomization(
            "shared",
            "./shared",
            &["_registry-credentials_apps.kruise.io_ResourceDistribution"],
        ),
        distribution,
        namespace("team-a", json!({"tier": "shared", "team": "a"})),
        namespace("team-b", json!({"tier": "shared", "team": "b"})),
        // Someone relabelled team-c by hand: it is no longer shared, so it holds no copy now.
        namespace("team-c", json!({"team": "c"})),
        namespace("tools", json!({})),
        namespace("team-e", json!({"tier": "shared", "team": "e"})),
    ]
}

#[test]
fn against_the_live_cluster_its_namespace_labels_decide() {
    let repo = distribution_repo();
    let fake = FakeKube::start(distribution_cluster());
    let (json_text, _) = run_plan(&repo, &fake, "json", &[]);
    let plan: Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(
        changes(&plan, "shared"),
        pairs(&[
            ("update", "team-a_regcred__Secret"),
            ("update", "_registry-credentials_apps.kruise.io_ResourceDistribution"),
            ("delete", "team-b_regcred__Secret"),
            ("delete", "team-e_regcred__Secret"),
        ])
    );
    assert_hidden(&json_text, &[OLD_PASSWORD, NEW_PASSWORD]);
    assert_only_gets(&fake);

    // The snapshot file keeps the labels, and not the distributed Secret's values.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snapshot.yaml");
    let out = Command::new(fluxplan_bin())
        .args(["snapshot", "-o"])
        .arg(&file)
        .env("KUBECONFIG", fake.kubeconfig(dir.path()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&file).unwrap();
    assert_hidden(&text, &[OLD_PASSWORD]);
    assert!(!text.contains("helmReleases"), "storage read without --read-secrets: {text}");
    let (from_file, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", file.to_str().unwrap()]);
    assert_eq!(changes(&from_file, "shared"), changes(&plan, "shared"));
}

#[test]
fn a_new_distribution_creates_copies_and_its_removal_deletes_them() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/infra.yaml", "infra", "./infra", "");
    repo.kustomization("clusters/prod/shared.yaml", "shared", "./shared", "");
    repo.write("infra/namespaces.yaml", NAMESPACES);
    repo.write("infra/crd.yaml", DISTRIBUTION_CRD);
    repo.config_map("shared/placeholder.yaml", "placeholder", "tools");
    repo.commit("no distribution");
    let all_but_tools =
        "    allNamespaces: true\n    excludedNamespaces:\n      list:\n      - name: tools\n      - name: flux-system\n";
    repo.write("shared/registry.yaml", &distribution(OLD_PASSWORD, all_but_tools));
    repo.commit("distribute");
    repo.remove("shared/registry.yaml");
    repo.commit("stop distributing");

    let (created, _) = plan_json(&repo, "HEAD~2", "HEAD~1", &[]);
    assert_eq!(
        changes(&created, "shared"),
        pairs(&[
            ("create", "team-a_regcred__Secret"),
            ("create", "team-b_regcred__Secret"),
            ("create", "team-c_regcred__Secret"),
            ("create", "_registry-credentials_apps.kruise.io_ResourceDistribution"),
        ])
    );
    let (removed, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(
        changes(&removed, "shared"),
        pairs(&[
            ("delete", "_registry-credentials_apps.kruise.io_ResourceDistribution"),
            ("delete", "team-a_regcred__Secret"),
            ("delete", "team-b_regcred__Secret"),
            ("delete", "team-c_regcred__Secret"),
        ])
    );
    let copy = &plan_of(&removed, "shared")["changes"][1];
    assert_eq!(copy["kind"], "Secret");
    assert!(copy["reason"].as_str().unwrap().contains("garbage-collects"), "{copy}");
    for plan in [&created, &removed] {
        assert_hidden(&plan.to_string(), &[OLD_PASSWORD]);
    }
}

// ---------------------------------------------------------------------------------------------
// HelmRelease

/// Values inside the Helm release that must never be shown.
const CONFIG_MAP_VALUE: &str = "configmap-value-9c1e";
const SECRET_VALUE: &str = "secret-value-4d2b";
const CHART_VALUE: &str = "chart-values-password-1b7e";

const HELM_RELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: flux-system\nspec:\n  interval: 10m\n  releaseName: podinfo\n  targetNamespace: podinfo\n  chart:\n    spec:\n      chart: podinfo\n      version: 6.x\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n";

/// Base: `apps` applies the HelmRelease and a ConfigMap. Head: the HelmRelease file is removed.
fn helm_repo() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/podinfo.yaml", HELM_RELEASE);
    repo.config_map("apps/settings.yaml", "settings", "flux-system");
    repo.commit("install podinfo");
    repo.remove("apps/podinfo.yaml");
    repo.commit("remove podinfo");
    repo
}

fn manifest() -> String {
    format!(
        "---\n# Source: podinfo/templates/configmap.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo-config\n\
         data:\n  greeting: {CONFIG_MAP_VALUE}\n---\n# Source: podinfo/templates/secret.yaml\napiVersion: v1\nkind: Secret\n\
         metadata:\n  name: podinfo-token\nstringData:\n  token: {SECRET_VALUE}\n---\napiVersion: v1\nkind: Service\n\
         metadata:\n  name: podinfo\n  namespace: podinfo\nspec:\n  ports:\n  - port: 9898\n---\napiVersion: apps/v1\n\
         kind: Deployment\nmetadata:\n  name: podinfo\n  labels: {{app: podinfo}}\nspec:\n  replicas: 2\n---\n\
         apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: podinfo-cache\n  annotations:\n    \
         helm.sh/resource-policy: keep\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  \
         name: podinfo-reader\n"
    )
}

/// A storage Secret's `data.release`: base64 of Helm's base64(gzip(JSON)).
pub(crate) fn storage_value(json: &[u8]) -> String {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(json).unwrap();
    B64.encode(B64.encode(gz.finish().unwrap()))
}

fn storage_secret(release: &str, version: u32, status: &str, value: String) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": format!("sh.helm.release.v1.{release}.v{version}"), "namespace": "flux-system",
            "labels": {"owner": "helm", "name": release, "status": status, "version": version.to_string()}},
        "data": {"release": value},
    })
}

fn release_record(version: u32, status: &str, manifest: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "name": "podinfo", "namespace": "podinfo", "version": version,
        "info": {"status": status, "description": "Install complete"},
        "chart": {"metadata": {"name": "podinfo", "version": "6.7.0"}, "templates": []},
        "config": {"adminPassword": CHART_VALUE},
        "manifest": manifest,
        "hooks": [{"name": "podinfo-cleanup", "kind": "Job", "path": "podinfo/templates/cleanup.yaml",
            "manifest": format!("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: podinfo-cleanup\n# {CHART_VALUE}\n"),
            "events": ["pre-delete"]}],
    }))
    .unwrap()
}

fn owned_by(owner: &str) -> Value {
    json!({"kustomize.toolkit.fluxcd.io/name": owner, "kustomize.toolkit.fluxcd.io/namespace": "flux-system"})
}

fn live_kustomization(name: &str, path: &str, ids: &[&str]) -> Value {
    json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system", "labels": owned_by("flux-system")},
        "spec": {"interval": "10m", "path": path, "prune": true, "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {"inventory": {"entries": ids.iter().map(|id| json!({"id": id, "v": "v1"})).collect::<Vec<_>>()}},
    })
}

/// The cluster after the base was applied and podinfo installed (revision 2 current), with the
/// storage Secret of revision 2 replaced by `current` when given.
fn helm_cluster(current: Option<Value>) -> Vec<Value> {
    let mut helm_release: Value = serde_norway::from_str(HELM_RELEASE).unwrap();
    helm_release["metadata"]["labels"] = owned_by("apps");
    helm_release["status"] = json!({"storageNamespace": "flux-system",
        "history": [{"name": "podinfo", "namespace": "podinfo", "version": 2, "status": "deployed", "chartName": "podinfo"},
                    {"name": "podinfo", "namespace": "podinfo", "version": 1, "status": "superseded", "chartName": "podinfo"}]});
    let revision_1 = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo-old\n";
    vec![
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "helmreleases.helm.toolkit.fluxcd.io"},
            "spec": {"group": "helm.toolkit.fluxcd.io", "scope": "Namespaced",
                "names": {"kind": "HelmRelease", "plural": "helmreleases", "singular": "helmrelease"},
                "versions": [{"name": "v2", "served": true, "storage": true}]}}),
        live_kustomization(
            "flux-system",
            "./clusters/prod",
            &[
                "flux-system_apps_kustomize.toolkit.fluxcd.io_Kustomization",
                "flux-system_flux-system_kustomize.toolkit.fluxcd.io_Kustomization",
                "flux-system_flux-system_source.toolkit.fluxcd.io_GitRepository",
            ],
        ),
        live_kustomization(
            "apps",
            "./apps",
            &["flux-system_podinfo_helm.toolkit.fluxcd.io_HelmRelease", "flux-system_settings__ConfigMap"],
        ),
        helm_release,
        storage_secret(
            "podinfo",
            1,
            "superseded",
            storage_value(&release_record(1, "superseded", revision_1)),
        ),
        current.unwrap_or_else(|| {
            storage_secret(
                "podinfo",
                2,
                "deployed",
                storage_value(&release_record(2, "deployed", &manifest())),
            )
        }),
        // Another release in the same storage namespace: not this plan's business.
        storage_secret("other", 1, "deployed", storage_value(b"{\"name\": \"other\"}")),
    ]
}

fn run_plan(repo: &Repo, fake: &FakeKube, format: &str, extra: &[&str]) -> (String, i32) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(fluxplan_bin())
        .args([
            "plan",
            "--no-cache",
            "--kube",
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
            "--format",
            format,
            "--repo",
        ])
        .arg(repo.path())
        .args(extra)
        .env("KUBECONFIG", fake.kubeconfig(dir.path()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_hidden(&stderr, &[CONFIG_MAP_VALUE, SECRET_VALUE, CHART_VALUE]);
    (String::from_utf8(out.stdout).unwrap(), out.status.code().unwrap())
}

fn assert_only_gets(fake: &FakeKube) {
    let others: Vec<_> = fake.requests().into_iter().filter(|(method, _)| method != "GET").collect();
    assert!(others.is_empty(), "requests other than GET: {others:?}");
}

fn storage_lists(fake: &FakeKube) -> Vec<String> {
    fake.requests()
        .into_iter()
        .map(|(_, path)| path)
        .filter(|path| path.starts_with("/api/v1/namespaces/flux-system/secrets?"))
        .collect()
}

#[test]
fn removing_a_helm_release_lists_what_its_uninstall_deletes() {
    let repo = helm_repo();
    let fake = FakeKube::start(helm_cluster(None));
    let (json_text, code) = run_plan(&repo, &fake, "json", &["--read-secrets"]);
    let plan: Value = serde_json::from_str(&json_text).unwrap();
    // Removing one app uninstalls it: helmrelease-removed blocks, as kustomization-removed does.
    // It is not a mass deletion: its uninstall's objects count in the total, not in the share of
    // an inventory.
    assert_eq!(code, 2, "{json_text}");
    let removed = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "helmrelease-removed");
    let removed = removed.unwrap_or_else(|| panic!("{json_text}"));
    assert_eq!(removed["severity"], "danger");
    assert!(removed.get("related_codes").is_none(), "{removed}");
    assert!(
        removed["message"].as_str().unwrap().contains(
            "uninstalls Helm release podinfo/podinfo: deletes 5 objects (from Helm's storage), keeps 1 \
             (helm.sh/resource-policy: keep, the chart's crds/), runs 1 delete hook"
        ),
        "{removed}"
    );
    assert_eq!(
        changes(&plan, "apps"),
        pairs(&[("delete", "flux-system_podinfo_helm.toolkit.fluxcd.io_HelmRelease")])
    );
    // What the uninstall deletes is listed under the release, a unit of its own.
    assert_eq!(
        release_changes(&plan, "podinfo"),
        pairs(&[
            ("delete", "podinfo_podinfo_apps_Deployment"),
            ("delete", "podinfo_podinfo__Service"),
            ("delete", "podinfo_podinfo-token__Secret"),
            ("delete", "podinfo_podinfo-config__ConfigMap"),
            ("delete", "_podinfo-reader_rbac.authorization.k8s.io_ClusterRole"),
            ("skip", "podinfo_podinfo-cache__PersistentVolumeClaim"),
        ])
    );
    let apps = plan_of(&plan, "apps");
    let release =
        plan["kustomizations"].as_array().unwrap().iter().find(|k| k["kind"] == "HelmRelease").unwrap();
    let cascaded = release["changes"].as_array().unwrap();
    assert!(cascaded.iter().all(|c| c["cascade_from"] == "HelmRelease flux-system/podinfo"), "{release}");
    let helm_release =
        apps["changes"].as_array().unwrap().iter().find(|c| c["kind"] == "HelmRelease").unwrap();
    assert_eq!(
        helm_release["reason"],
        "no longer rendered (it came from apps/podinfo.yaml); uninstalls Helm release podinfo/podinfo (revision 2): \
         deletes 5 objects, keeps 1 (helm.sh/resource-policy), runs 1 delete hook");
    // One labelled list of the storage namespace, for this release only; nothing but GETs.
    let lists = storage_lists(&fake);
    assert_eq!(lists.len(), 1, "{lists:?}");
    let query = lists[0].split_once('?').unwrap().1;
    let selector = url::form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "labelSelector");
    assert_eq!(selector.unwrap().1, "owner=helm,name in (podinfo)");
    assert_only_gets(&fake);

    let (markdown, _) = run_plan(&repo, &fake, "markdown", &["--read-secrets"]);
    let payload = fake_payload();
    for output in [&json_text, &markdown] {
        assert_hidden(output, &[CONFIG_MAP_VALUE, SECRET_VALUE, CHART_VALUE]);
        assert!(!output.contains(&payload[..40]), "the storage payload leaked");
    }
    let pretty = serde_json::to_string_pretty(&plan).unwrap();
    insta::assert_snapshot!("cascades_helm_uninstall_markdown", markdown);
    insta::assert_snapshot!("cascades_helm_uninstall_json", pretty);
}

/// The encoded storage value of the current revision (to check it never shows).
fn fake_payload() -> String {
    storage_value(&release_record(2, "deployed", &manifest()))
}

#[test]
fn without_read_secrets_the_storage_is_not_read_and_the_plan_says_so() {
    let repo = helm_repo();
    let fake = FakeKube::start(helm_cluster(None));
    let (json_text, _) = run_plan(&repo, &fake, "json", &[]);
    let plan: Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(
        changes(&plan, "apps"),
        pairs(&[("delete", "flux-system_podinfo_helm.toolkit.fluxcd.io_HelmRelease")])
    );
    assert!(
        plan_of(&plan, "apps")["changes"][0]["reason"].as_str().unwrap().contains("plan with --read-secrets"),
        "{json_text}"
    );
    assert!(storage_lists(&fake).is_empty(), "Secrets read without --read-secrets");
}

#[test]
fn offline_the_uninstall_is_announced_with_unknown_contents() {
    let repo = helm_repo();
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    // Whatever it deletes, an uninstall blocks.
    assert_eq!(code, 2);
    let removed = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "helmrelease-removed");
    assert!(
        removed.is_some_and(|a| a["message"].as_str().unwrap().contains("what it deletes is unknown")),
        "{plan:#}"
    );
    assert_eq!(
        changes(&plan, "apps"),
        pairs(&[("delete", "flux-system_podinfo_helm.toolkit.fluxcd.io_HelmRelease")])
    );
    let apps = plan_of(&plan, "apps");
    assert_eq!(
        apps["changes"][0]["reason"],
        "no longer rendered (it came from apps/podinfo.yaml); uninstalls Helm release podinfo/podinfo (contents \
         unknown offline)"
    );
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    let line = "`HelmRelease flux-system/podinfo` — caused by this PR: no longer rendered (it came from \
                apps/podinfo.yaml); uninstalls Helm release podinfo/podinfo (contents unknown offline)";
    assert!(markdown.contains(line), "{markdown}");
}

#[test]
fn a_helm_release_deleted_with_its_kustomization_uninstalls_too() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/podinfo.yaml", HELM_RELEASE);
    repo.commit("install podinfo");
    repo.remove("clusters/prod/apps.yaml");
    repo.commit("remove the apps Kustomization");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let apps = plan_of(&plan, "apps");
    assert_eq!(apps["status"], "removed");
    let release = &apps["changes"][0];
    assert_eq!(release["action"], "delete");
    assert_eq!(release["cascade_from"], "Kustomization flux-system/apps");
    assert!(release["reason"].as_str().unwrap().contains("contents unknown offline"), "{release}");
    // The report lists a cascaded deletion by its origin, so a note says the uninstall.
    let note = "HelmRelease flux-system/podinfo is deleted: uninstalls Helm release podinfo/podinfo \
                (contents unknown offline)";
    assert!(apps["notes"].as_array().unwrap().iter().any(|n| n == note), "{}", apps["notes"]);
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    assert!(markdown.contains(note), "{markdown}");
}

#[test]
fn a_suspended_helm_release_is_deleted_without_uninstalling() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write(
        "apps/podinfo.yaml",
        &HELM_RELEASE.replace("  interval: 10m\n", "  interval: 10m\n  suspend: true\n"),
    );
    repo.config_map("apps/settings.yaml", "settings", "flux-system");
    repo.commit("install podinfo, suspended");
    repo.remove("apps/podinfo.yaml");
    repo.commit("remove podinfo");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let reason = plan_of(&plan, "apps")["changes"][0]["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("suspended") && reason.contains("stays installed"), "{reason}");
    assert_eq!(changes(&plan, "apps").len(), 1);
}

#[test]
fn the_snapshot_file_carries_release_contents_as_ids_only() {
    let fake = FakeKube::start(helm_cluster(None));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snapshot.yaml");
    let out = Command::new(fluxplan_bin())
        .args(["snapshot", "--read-secrets", "-o"])
        .arg(&file)
        .env("KUBECONFIG", fake.kubeconfig(dir.path()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&file).unwrap();
    assert_hidden(&text, &[CONFIG_MAP_VALUE, SECRET_VALUE, CHART_VALUE]);
    assert!(!text.contains(&fake_payload()[..40]), "the storage payload is in the file");
    assert!(text.contains("helmReleases:") && text.contains("podinfo_podinfo-token__Secret"), "{text}");

    // Planned offline from that file: the same cascade.
    let repo = helm_repo();
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", file.to_str().unwrap()]);
    let deleted: Vec<String> = changes(&plan, "apps")
        .into_iter()
        .chain(release_changes(&plan, "podinfo"))
        .filter(|(a, _)| a == "delete")
        .map(|(_, id)| id)
        .collect();
    assert_eq!(deleted.len(), 6, "{deleted:?}");
    assert!(deleted.contains(&"podinfo_podinfo_apps_Deployment".to_string()));
}

#[test]
fn hostile_storage_gives_a_warning_never_a_crash_or_its_content() {
    // 64 MiB of zeros around the secret: the decompression bound trips long before.
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    bomb.write_all(SECRET_VALUE.as_bytes()).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..64 {
        bomb.write_all(&zeros).unwrap();
    }
    let bomb = B64.encode(B64.encode(bomb.finish().unwrap()));
    for (value, error) in [
        (bomb, "larger than 16 MiB"),
        (B64.encode(format!("not base64 {SECRET_VALUE}")), "not valid base64"),
        (storage_value(format!("{{\"name\": \"{SECRET_VALUE}").as_bytes()), "not the JSON"),
        (
            storage_value(&release_record(2, "deployed", &format!("kind: [{SECRET_VALUE}\n"))),
            "not valid YAML",
        ),
    ] {
        let repo = helm_repo();
        let fake = FakeKube::start(helm_cluster(Some(storage_secret("podinfo", 2, "deployed", value))));
        let (json_text, code) = run_plan(&repo, &fake, "json", &["--read-secrets"]);
        assert_ne!(code, 3, "{json_text}");
        let plan: Value = serde_json::from_str(&json_text).unwrap();
        assert_eq!(
            changes(&plan, "apps"),
            pairs(&[("delete", "flux-system_podinfo_helm.toolkit.fluxcd.io_HelmRelease")]),
            "{error}"
        );
        let reason = plan_of(&plan, "apps")["changes"][0]["reason"].as_str().unwrap().to_string();
        assert!(reason.contains("what it deletes is unknown") && reason.contains(error), "{reason}");
        let warned = plan["alerts"].as_array().unwrap().iter().any(|a| {
            a["code"] == "cluster-read-incomplete" && a["message"].as_str().unwrap().contains(error)
        });
        assert!(warned, "{error}: {}", plan["alerts"]);
        assert_hidden(&json_text, &[SECRET_VALUE]);
    }
}

#[test]
fn storage_the_reader_may_not_list_is_named_and_left_unknown() {
    let repo = helm_repo();
    let fake = FakeKube::start(helm_cluster(None));
    fake.forbid("list", "", "secrets");
    let (json_text, _) = run_plan(&repo, &fake, "json", &["--read-secrets"]);
    let plan: Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(
        changes(&plan, "apps"),
        pairs(&[("delete", "flux-system_podinfo_helm.toolkit.fluxcd.io_HelmRelease")])
    );
    let reason = plan_of(&plan, "apps")["changes"][0]["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("its storage Secrets could not be listed"), "{reason}");
    let warned = plan["alerts"].as_array().unwrap().iter().any(|a| {
        a["code"] == "cluster-read-incomplete"
            && a["message"].as_str().unwrap().contains("cannot list secrets")
    });
    assert!(warned, "{}", plan["alerts"]);
}

#[test]
fn a_copy_flux_applies_itself_is_a_conflict_kruise_leaves_alone() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/infra.yaml", "infra", "./infra", "");
    repo.kustomization("clusters/prod/shared.yaml", "shared", "./shared", "");
    repo.write("infra/namespaces.yaml", NAMESPACES);
    repo.write("infra/crd.yaml", DISTRIBUTION_CRD);
    repo.write(
        "infra/team-b-regcred.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: regcred\n  namespace: team-b\nstringData:\n  x: y\n",
    );
    repo.config_map("shared/placeholder.yaml", "placeholder", "tools");
    repo.commit("no distribution");
    repo.write("shared/registry.yaml", &distribution(OLD_PASSWORD, EVERY_SHARED_NAMESPACE));
    repo.commit("distribute");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(
        changes(&plan, "shared"),
        pairs(&[
            ("create", "team-a_regcred__Secret"),
            ("create", "team-c_regcred__Secret"),
            ("create", "_registry-credentials_apps.kruise.io_ResourceDistribution"),
            ("skip", "team-b_regcred__Secret"),
        ])
    );
    let skip = plan_of(&plan, "shared")["changes"][3]["reason"].as_str().unwrap().to_string();
    assert!(skip.contains("Kustomization flux-system/infra applies this object"), "{skip}");
}

#[test]
fn an_invalid_distribution_changes_no_copy_and_says_why() {
    let repo = distribution_repo();
    let bad = "    namespaceLabelSelector:\n      matchExpressions:\n      - {key: team, operator: Equals, values: [a]}\n";
    repo.write("shared/registry.yaml", &distribution(NEW_PASSWORD, bad));
    repo.commit("a selector Kruise refuses");
    let (plan, _) = plan_json(&repo, "HEAD~2", "HEAD", &[]);
    assert_eq!(
        changes(&plan, "shared"),
        pairs(&[("update", "_registry-credentials_apps.kruise.io_ResourceDistribution")])
    );
    let note = plan_of(&plan, "shared")["notes"][0].as_str().unwrap().to_string();
    assert!(note.contains("invalid namespace selector") && note.contains("unknown operator"), "{note}");
}
