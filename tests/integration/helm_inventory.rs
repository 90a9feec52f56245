//! What uninstalling a removed HelmRelease deletes, known without reading a Secret: the live
//! HelmRelease's `status.inventory` (helm-controller v1.5.0 and later) lists the release's objects
//! and its chart's crds/ CRDs; their live metadata says what `keep` keeps and which CRDs Helm never
//! deletes. With `--read-secrets` a readable record in Helm's storage is the truth instead: it is
//! what the uninstall deletes.

use crate::fake_kube::FakeKube;
use crate::fixture::{alert_codes, fluxplan_bin, helm, sorted_changes, sorted_pairs, unit_in, Repo};
use crate::helm_plan::{fleet, RELEASE};
use serde_json::{json, Value};
use std::process::Command;

/// The release's objects as helm-controller leaves them: its origin label, and (for what Helm
/// installed from templates) the release annotations.
fn installed(api_version: &str, kind: &str, namespace: &str, name: &str, from_templates: bool) -> Value {
    let mut object = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "labels": {"helm.toolkit.fluxcd.io/name": "db",
            "helm.toolkit.fluxcd.io/namespace": "data"}}});
    if !namespace.is_empty() {
        object["metadata"]["namespace"] = json!(namespace);
    }
    if from_templates {
        object["metadata"]["annotations"] =
            json!({"meta.helm.sh/release-name": "db", "meta.helm.sh/release-namespace": "data"});
    } else {
        object["metadata"].as_object_mut().unwrap().remove("labels");
    }
    object
}

/// What the live HelmRelease's inventory lists: the base render's objects (but the hook), an
/// object only the cluster has (`old-cron`), and three CRDs: `backups` of the chart's crds/,
/// `widgets` from a crds/ the base render does not know (no Helm mark on it) and `gadgets` from
/// templates (marked: its uninstall deletes it).
const LISTED: &[&str] = &[
    "data_db_apps_StatefulSet",
    "data_db-auth__Secret",
    "data_db-metrics__Service",
    "data_db-settings__ConfigMap",
    "data_old-cron_batch_CronJob",
    "_backups.db.example.com_apiextensions.k8s.io_CustomResourceDefinition",
    "_widgets.db.example.com_apiextensions.k8s.io_CustomResourceDefinition",
    "_gadgets.db.example.com_apiextensions.k8s.io_CustomResourceDefinition",
];

/// A cluster whose Kustomization `flux-system/db` applies the HelmRelease `data/db` (with
/// `inventory` as its `status.inventory`, or none) and whose Helm storage holds release `db`
/// with a manifest of one ConfigMap `legacy`.
fn cluster(inventory: Option<&[&str]>) -> FakeKube {
    cluster_with(inventory, true)
}

/// The same cluster, Helm's storage Secret of `db` there (`stored`) or not.
fn cluster_with(inventory: Option<&[&str]>, stored: bool) -> FakeKube {
    let mut status = json!({"storageNamespace": "data",
        "history": [{"name": "db", "namespace": "data", "version": 1, "chartName": "db", "chartVersion": "1.0.0"}]});
    if let Some(ids) = inventory {
        status["inventory"] =
            json!({"entries": ids.iter().map(|id| json!({"id": id, "v": "v1"})).collect::<Vec<_>>()});
    }
    let mut release: Value = serde_norway::from_str(RELEASE).unwrap();
    release["metadata"]["labels"] = json!({"kustomize.toolkit.fluxcd.io/name": "db", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"});
    release["status"] = status;
    let mut kept = installed("v1", "ConfigMap", "data", "db-settings", true);
    kept["metadata"]["annotations"]["helm.sh/resource-policy"] = json!("keep");
    let crd = |name: &str, from_templates: bool| {
        installed("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", name, from_templates)
    };
    let mut objects = vec![
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "helmreleases.helm.toolkit.fluxcd.io"},
            "spec": {"group": "helm.toolkit.fluxcd.io", "scope": "Namespaced",
                "names": {"kind": "HelmRelease", "plural": "helmreleases", "singular": "helmrelease"},
                "versions": [{"name": "v2", "served": true, "storage": true}]}}),
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "db", "namespace": "flux-system"},
            "spec": {"interval": "10m", "path": "./apps/db", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
            "status": {"inventory": {"entries": [{"id": "data_db_helm.toolkit.fluxcd.io_HelmRelease", "v": "v2"}]}}}),
        release,
        installed("apps/v1", "StatefulSet", "data", "db", true),
        installed("v1", "Service", "data", "db-metrics", true),
        installed("batch/v1", "CronJob", "data", "old-cron", true),
        installed("v1", "Secret", "data", "db-auth", true),
        kept,
        crd("backups.db.example.com", false),
        crd("widgets.db.example.com", false),
        crd("gadgets.db.example.com", true),
    ];
    if stored {
        objects.push(storage_secret(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: legacy\n  namespace: data\n",
        ));
    }
    FakeKube::start(objects)
}

/// Helm's storage Secret of release `db` (revision 1) holding `manifest`: `data.release` is
/// base64 of Helm's base64(gzip(JSON)).
fn storage_secret(manifest: &str) -> Value {
    let record = json!({"name": "db", "namespace": "data", "version": 1,
        "info": {"status": "deployed"}, "chart": {"metadata": {"name": "db", "version": "1.0.0"}},
        "manifest": manifest});
    json!({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": "sh.helm.release.v1.db.v1", "namespace": "data",
            "labels": {"owner": "helm", "name": "db", "status": "deployed", "version": "1"}},
        "data": {"release": crate::cascades::storage_value(&serde_json::to_vec(&record).unwrap())}})
}

/// The fleet with its HelmRelease removed, committed.
fn removed() -> Repo {
    let repo = fleet();
    repo.remove("apps/db/release.yaml");
    repo.write(
        "apps/db/placeholder.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n  namespace: data\n",
    );
    repo.commit("remove the release");
    repo
}

/// `fluxplan plan --kube` of the last commit against `fake`, with `extra` flags.
fn plan_live(repo: &Repo, fake: &FakeKube, extra: &[&str]) -> Value {
    let text = crate::helm_plan::plan_kube(repo, fake, extra);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn removed_alert(plan: &Value) -> String {
    let alert = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "helmrelease-removed");
    let alert = alert.unwrap_or_else(|| panic!("no helmrelease-removed: {:?}", alert_codes(plan)));
    alert["message"].as_str().unwrap().to_string()
}

/// Requests for Secrets (a list or a get), by path.
fn secret_requests(fake: &FakeKube) -> Vec<String> {
    fake.requests().into_iter().map(|(_, path)| path).filter(|p| p.contains("/secrets")).collect()
}

/// The least-privilege default: no `--read-secrets`, no Secret asked for, and still the whole
/// uninstall from the HelmRelease's inventory, but what `keep` keeps and the crds/ CRDs (known
/// by the chart's render, or by the live CRD lacking Helm's mark). Near miss: the CRD Helm
/// installed from templates is deleted.
#[test]
fn an_uninstall_is_listed_from_the_status_inventory_without_secrets() {
    let _ = helm(4);
    let repo = removed();
    let fake = cluster(Some(LISTED));
    let plan = plan_live(&repo, &fake, &[]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[
            ("delete", "data_db_apps_StatefulSet"),
            ("delete", "data_db-auth__Secret"),
            ("delete", "data_db-metrics__Service"),
            ("delete", "data_old-cron_batch_CronJob"),
            ("delete", "_gadgets.db.example.com_apiextensions.k8s.io_CustomResourceDefinition"),
            ("skip", "data_db-settings__ConfigMap"),
            ("skip", "_backups.db.example.com_apiextensions.k8s.io_CustomResourceDefinition"),
            ("skip", "_widgets.db.example.com_apiextensions.k8s.io_CustomResourceDefinition"),
        ]),
        "{release:#}"
    );
    let message = removed_alert(&plan);
    assert!(message.contains("deletes 5 objects (from the HelmRelease's status.inventory)"), "{message}");
    assert_eq!(secret_requests(&fake), Vec::<String>::new());
    // A snapshot file of the same cluster plans the same uninstall.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snapshot.yaml");
    let status = Command::new(fluxplan_bin())
        .args(["snapshot", "-o"])
        .arg(&file)
        .env("KUBECONFIG", fake.kubeconfig(dir.path()))
        .status()
        .unwrap();
    assert!(status.success());
    let offline =
        crate::fixture::plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", file.to_str().unwrap()]).0;
    assert_eq!(sorted_changes(unit_in(&offline, "HelmRelease", "data/db")), sorted_changes(release));
    // The inventory's objects were listed by helm-controller's label, not one by one.
    let asked: Vec<String> = fake.requests().into_iter().map(|(_, path)| path).collect();
    assert!(
        asked.iter().any(|p| p.contains("/namespaces/data/cronjobs") && p.contains("helm.toolkit.fluxcd.io")),
        "{asked:#?}"
    );
}

/// Attack on the plan's truth: a HelmRelease whose `status.inventory` (here eight objects) is not
/// what Helm's storage records (one ConfigMap `legacy`). An uninstall deletes the manifest of the
/// release's latest storage record (helm/helm `pkg/action/uninstall.go`, run by helm-controller's
/// `internal/action/uninstall.go`), so with `--read-secrets` the storage is the truth and the note
/// says so. Near misses: without `--read-secrets`, or with it and no record in the storage, the
/// status.inventory stands in (and says so); without either, Helm's storage or the base render.
#[test]
fn with_read_secrets_a_readable_storage_record_wins_over_the_status_inventory() {
    let _ = helm(4);
    let repo = removed();
    let fake = cluster(Some(LISTED));
    let plan = plan_live(&repo, &fake, &["--read-secrets"]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(sorted_changes(release), sorted_pairs(&[("delete", "data_legacy__ConfigMap")]), "{release:#}");
    let message = removed_alert(&plan);
    assert!(message.contains("deletes 1 object (from Helm's storage)"), "{message}");
    let storage: Vec<String> = secret_requests(&fake).into_iter().filter(|p| p.contains("owner")).collect();
    assert_eq!(storage.len(), 1, "{storage:?}");

    // Near miss: no --read-secrets, the same cluster: status.inventory, and no Secret asked for.
    let fake = cluster(Some(LISTED));
    let plan = plan_live(&repo, &fake, &[]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert!(release["changes"].to_string().contains("data_old-cron_batch_CronJob"), "{release:#}");
    assert!(!release["changes"].to_string().contains("legacy"), "{release:#}");
    assert!(removed_alert(&plan).contains("from the HelmRelease's status.inventory"));
    assert_eq!(secret_requests(&fake), Vec::<String>::new());

    // Near miss: --read-secrets, but Helm's storage holds no record of the release: the
    // status.inventory still stands in.
    let fake = cluster_with(Some(LISTED), false);
    let plan = plan_live(&repo, &fake, &["--read-secrets"]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert!(release["changes"].to_string().contains("data_old-cron_batch_CronJob"), "{release:#}");
    assert!(
        removed_alert(&plan).contains("from the HelmRelease's status.inventory"),
        "{}",
        removed_alert(&plan)
    );

    // No status.inventory: Helm's storage with --read-secrets.
    let fake = cluster(None);
    let plan = plan_live(&repo, &fake, &["--read-secrets"]);
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(sorted_changes(release), sorted_pairs(&[("delete", "data_legacy__ConfigMap")]), "{release:#}");
    let message = removed_alert(&plan);
    assert!(message.contains("deletes 1 object (from Helm's storage)"), "{message}");

    // Without the inventory and without --read-secrets: the base render, and the alert says so.
    let fake = cluster(None);
    let plan = plan_live(&repo, &fake, &[]);
    assert!(removed_alert(&plan).contains("(from the base render)"), "{}", removed_alert(&plan));
    assert_eq!(secret_requests(&fake), Vec::<String>::new());
}

/// A HelmRelease the base revision does not render as a unit (its chart cannot be had) is still
/// uninstalled as its live inventory says, under the Kustomization that deletes it.
#[test]
fn an_unrendered_release_is_uninstalled_as_its_inventory_says() {
    let _ = helm(4);
    let repo = fleet();
    crate::fixture::edit(&repo, "apps/db/release.yaml", "chart: ./charts/db", "chart: ./charts/missing");
    repo.commit("a chart that is not there");
    repo.remove("apps/db/release.yaml");
    repo.write(
        "apps/db/placeholder.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n  namespace: data\n",
    );
    repo.commit("remove the release");
    let fake = cluster(Some(LISTED));
    let plan = plan_live(&repo, &fake, &[]);
    let text = plan.to_string();
    assert!(text.contains("data_old-cron_batch_CronJob"), "{plan:#}");
    assert!(text.contains("from the HelmRelease's status.inventory"), "{plan:#}");
    assert_eq!(secret_requests(&fake), Vec::<String>::new());
}
