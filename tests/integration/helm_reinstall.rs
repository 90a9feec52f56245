//! What helm-controller does to a Helm release beyond an upgrade, planned with the real, pinned
//! Helm: a release whose target (name, namespace, storage namespace, chart name) changes is
//! uninstalled and installed anew; one whose `kubeConfig` changes is left behind in its old
//! cluster; a removed HelmRelease's release is uninstalled, unless it is suspended or not pruned.

use crate::fixture::{
    alert_codes, edit, has_alert, helm, plan_cli, plan_json, sorted_changes, sorted_pairs, unit_in,
};
use crate::helm_plan::{fleet, insert_before_values, scale_up, RELEASE};
use serde_json::Value;

/// The alert of `code`, which the plan must hold.
fn alert<'a>(plan: &'a Value, code: &str) -> &'a Value {
    plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["code"] == code)
        .unwrap_or_else(|| panic!("no {code}: {:?}", alert_codes(plan)))
}

fn dangers(plan: &Value) -> Vec<String> {
    alert_codes(plan).into_iter().filter(|(s, _)| s == "danger").map(|(_, c)| c).collect()
}

/// The chart's objects as `helm template` prints them for release namespace `namespace`, but for
/// the CRD and the kept ConfigMap (an uninstall leaves both): what an uninstall deletes and an
/// install creates.
fn released(namespace: &str) -> Vec<String> {
    let mut ids: Vec<String> = ["db_apps_StatefulSet", "db-auth__Secret", "db-metrics__Service"]
        .iter()
        .map(|id| format!("{namespace}_{id}"))
        .collect();
    ids.sort();
    ids
}

/// `releaseName` changes: helm-controller uninstalls the old release and installs the new one,
/// so the StatefulSet is deleted and created again though its name stays: a protected kind
/// deleted, and the merge is blocked. A values change of the same release is an upgrade.
#[test]
fn a_renamed_release_is_uninstalled_and_installed_anew_and_blocks() {
    let _ = helm(4);
    let repo = fleet();
    insert_before_values(&repo, "  releaseName: db2\n  values:\n");
    repo.commit("rename the release");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "blocked: {plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    let mut expected: Vec<(String, String)> = released("data")
        .into_iter()
        .flat_map(|id| [("create".into(), id.clone()), ("delete".into(), id)])
        .collect();
    expected.sort();
    assert_eq!(sorted_changes(release), expected, "{release:#}");
    let target = alert(&plan, "release-target-changed");
    assert_eq!(target["severity"], "danger");
    let message = target["message"].as_str().unwrap();
    assert!(message.contains("release name db → db2"), "{message}");
    assert!(
        message.contains("uninstalls Helm release data/db") && message.contains("installs data/db2 anew"),
        "{message}"
    );
    assert!(message.contains("protected kinds among them: StatefulSet data/db"), "{message}");
    assert!(
        target["related_codes"].as_array().unwrap().contains(&"protected-kind-deletion".into()),
        "{target:#}"
    );
    // The same StatefulSet comes back on its own claims: no data-loss line for a replacement.
    assert!(!message.contains("is replaced by"), "{message}");
    assert_eq!(target["cause"], "apps/db/release.yaml: HelmRelease data/db release name db → db2");

    // Near miss: the same release's values change is an upgrade, with no uninstall.
    scale_up(&repo);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(sorted_changes(release), sorted_pairs(&[("update", "data_db_apps_StatefulSet")]));
    assert!(
        !alert_codes(&plan).iter().any(|(_, c)| c == "release-target-changed"),
        "{:?}",
        alert_codes(&plan)
    );
}

/// `targetNamespace` alone renames the default release (`[targetNamespace-]name`) and moves its
/// namespace: the old release is uninstalled, the kept ConfigMap stays where it was.
#[test]
fn a_target_namespace_change_reinstalls_the_release() {
    let _ = helm(4);
    let repo = fleet();
    insert_before_values(&repo, "  targetNamespace: data2\n  values:\n");
    repo.commit("another target namespace");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    let mut expected: Vec<(String, String)> =
        released("data").into_iter().map(|id| ("delete".into(), id)).collect();
    expected.extend(released("data2").into_iter().map(|id| ("create".into(), id)));
    expected.push(("create".into(), "data2_db-settings__ConfigMap".into()));
    expected.push(("skip".into(), "data_db-settings__ConfigMap".into()));
    expected.sort();
    assert_eq!(sorted_changes(release), expected, "{release:#}");
    let message = alert(&plan, "release-target-changed")["message"].as_str().unwrap().to_string();
    assert!(message.contains("release namespace data → data2"), "{message}");
    assert!(message.contains("installs data2/data2-db anew"), "{message}");
}

/// A chart renamed in its `Chart.yaml` reinstalls under the default `chartNameChangeStrategy`
/// (`Reinstall`); `InPlaceUpdate` upgrades instead.
#[test]
fn a_chart_name_change_reinstalls_unless_the_strategy_is_in_place() {
    let _ = helm(4);
    let repo = fleet();
    edit(&repo, "charts/db/Chart.yaml", "name: db\n", "name: database\n");
    repo.commit("rename the chart");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let message = alert(&plan, "release-target-changed")["message"].as_str().unwrap().to_string();
    assert!(message.contains("chart name db → database"), "{message}");
    let deleted: Vec<(String, String)> = sorted_changes(unit_in(&plan, "HelmRelease", "data/db"))
        .into_iter()
        .filter(|(a, _)| a == "delete")
        .collect();
    assert_eq!(
        deleted,
        released("data").into_iter().map(|id| ("delete".to_string(), id)).collect::<Vec<_>>()
    );

    // Near miss: with InPlaceUpdate, the rename is an upgrade that changes nothing here.
    let repo = fleet();
    insert_before_values(&repo, "  upgrade:\n    chartNameChangeStrategy: InPlaceUpdate\n  values:\n");
    repo.commit("in place");
    edit(&repo, "charts/db/Chart.yaml", "name: db\n", "name: database\n");
    repo.commit("rename the chart");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(
        !alert_codes(&plan).iter().any(|(_, c)| c == "release-target-changed"),
        "{:?}",
        alert_codes(&plan)
    );
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert!(
        sorted_changes(release).iter().all(|(action, _)| action != "delete"),
        "an upgrade deletes nothing here: {release:#}"
    );
}

/// `spec.kubeConfig` added, changed or removed sends the release to another cluster and leaves the
/// old one installed where it was: a danger naming both. The same kubeConfig on both sides is
/// not.
#[test]
fn a_kube_config_change_leaves_the_old_release_behind() {
    let _ = helm(4);
    let repo = fleet();
    insert_before_values(&repo, "  kubeConfig:\n    secretRef:\n      name: remote\n  values:\n");
    repo.commit("to the remote cluster");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let moved = alert(&plan, "release-cluster-changed");
    assert_eq!(moved["severity"], "danger");
    let message = moved["message"].as_str().unwrap();
    assert!(
        message.contains("installs the release in the cluster of kubeConfig Secret data/remote (key value)")
            && message.contains("it installed in the cluster helm-controller runs in stays there"),
        "{message}"
    );
    assert!(
        !alert_codes(&plan).iter().any(|(_, c)| c == "release-target-changed"),
        "{:?}",
        alert_codes(&plan)
    );

    // Another Secret: another cluster, both named.
    edit(&repo, "apps/db/release.yaml", "name: remote\n", "name: remote-eu\n");
    repo.commit("another remote cluster");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let message = alert(&plan, "release-cluster-changed")["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("Secret data/remote-eu") && message.contains("Secret data/remote (key value) stays"),
        "{message}"
    );

    assert!(!message.contains("uninstalls Helm release"), "the target stays: {message}");

    // A kubeConfig and a renamed release at once: should the new kubeConfig reach this cluster
    // after all, the rename uninstalls the old release here. The danger says so.
    edit(&repo, "apps/db/release.yaml", "name: remote-eu\n", "name: remote-us\n");
    insert_before_values(&repo, "  releaseName: db2\n  values:\n");
    repo.commit("another cluster and another name");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let message = alert(&plan, "release-cluster-changed")["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("release name db → db2 too")
            && message.contains("uninstalls Helm release data/db there"),
        "{message}"
    );

    // Near miss: the same kubeConfig, the values changed.
    scale_up(&repo);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    assert!(dangers(&plan).is_empty(), "{:?}", alert_codes(&plan));
}

/// A removed HelmRelease that its Kustomization prunes is uninstalled: `helmrelease-removed`
/// blocks, and the uninstall's deletions (from the base render offline) and delete hooks are
/// listed; what `keep` keeps and the chart's CRDs stay.
#[test]
fn a_removed_release_blocks_and_lists_its_uninstall_offline() {
    let _ = helm(4);
    let repo = fleet();
    repo.write(
        "charts/db/templates/cleanup.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: db-cleanup\n  annotations:\n    helm.sh/hook: pre-delete\nspec:\n  \
         template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n",
    );
    repo.commit("a delete hook");
    remove_release(&repo);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    let deleted: Vec<(String, String)> =
        sorted_changes(release).into_iter().filter(|(a, _)| a == "delete").collect();
    let mut expected: Vec<(String, String)> =
        released("data").into_iter().map(|id| ("delete".into(), id)).collect();
    expected.sort();
    assert_eq!(deleted, expected);
    let removed = alert(&plan, "helmrelease-removed");
    assert_eq!(removed["severity"], "danger");
    assert_eq!(removed["kustomization"], "HelmRelease data/db");
    assert_eq!(removed["cause"], "apps/db/release.yaml: HelmRelease data/db removed");
    let message = removed["message"].as_str().unwrap();
    assert!(
        message.contains("uninstalls Helm release data/db: deletes 3 objects (from the base render)"),
        "{message}"
    );
    assert!(message.contains("runs its delete hook Job data/db-cleanup on pre-delete"), "{message}");
    assert!(message.contains("protected kinds among them: StatefulSet data/db"), "{message}");

    // The base revision's policy rates it, as it rates kustomization-removed: turned off, the
    // StatefulSet's deletion still blocks.
    let repo = fleet();
    repo.write(".fluxplan.yaml", "alerts:\n  helmrelease-removed: off\n");
    repo.commit("policy");
    remove_release(&repo);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert!(!alert_codes(&plan).iter().any(|(_, c)| c == "helmrelease-removed"), "{:?}", alert_codes(&plan));
    assert!(has_alert(&plan, "danger", "protected-kind-deletion"), "{:?}", alert_codes(&plan));
}

/// The release's file removed, a placeholder left in its directory, committed.
fn remove_release(repo: &crate::fixture::Repo) {
    repo.remove("apps/db/release.yaml");
    repo.write(
        "apps/db/placeholder.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n  namespace: data\n",
    );
    repo.commit("remove the release");
}

/// A suspended HelmRelease removed is not uninstalled (the finalizer skips it), nor is one its
/// Kustomization does not prune: the release stays installed, a warning says so, nothing blocks.
#[test]
fn a_removed_release_that_is_suspended_or_not_pruned_is_orphaned() {
    let _ = helm(4);
    for (how, setup) in
        [("suspended", "suspend"), ("prune off", "prune-off"), ("prune: disabled", "prune-disabled")]
    {
        let repo = fleet();
        match setup {
            "suspend" => insert_before_values(&repo, "  suspend: true\n  values:\n"),
            "prune-off" => edit(&repo, "clusters/prod/db.yaml", "prune: true", "prune: false"),
            _ => edit(
                &repo,
                "apps/db/release.yaml",
                "  namespace: data\n",
                "  namespace: data\n  annotations:\n    kustomize.toolkit.fluxcd.io/prune: disabled\n",
            ),
        }
        repo.commit(how);
        remove_release(&repo);
        let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
        assert_eq!(code, 1, "{how}: not blocked: {plan:#}");
        assert!(dangers(&plan).is_empty(), "{how}: {:?}", alert_codes(&plan));
        let orphaned = alert(&plan, "helmrelease-orphaned");
        assert_eq!(orphaned["severity"], "warning", "{how}");
        let message = orphaned["message"].as_str().unwrap();
        assert!(message.contains("Helm release data/db stays installed"), "{how}: {message}");
        let release = unit_in(&plan, "HelmRelease", "data/db");
        assert!(
            sorted_changes(release).iter().all(|(action, _)| action != "delete"),
            "{how}: nothing deleted: {release:#}"
        );
    }
}

/// With the cluster read, the live HelmRelease says what is installed: its status names the
/// release, and its `status.inventory` what the uninstall deletes (here an object the base
/// render never had).
#[test]
fn with_the_cluster_read_the_live_status_and_inventory_decide() {
    let _ = helm(4);
    let repo = fleet();
    insert_before_values(&repo, "  releaseName: db2\n  values:\n");
    repo.commit("rename the release");
    let snapshot = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        snapshot.path(),
        format!(
            "kind: ClusterSnapshot\nkustomizations:\n- apiVersion: kustomize.toolkit.fluxcd.io/v1\n  kind: Kustomization\n  \
             metadata: {{name: db, namespace: flux-system}}\n  spec: {{path: ./apps/db, prune: true, sourceRef: {{kind: \
             GitRepository, name: flux-system}}}}\n  status:\n    inventory:\n      entries:\n      - {{id: \
             data_db_helm.toolkit.fluxcd.io_HelmRelease, v: v2}}\nobjects:\n- {}\n",
            serde_json::json!({
                "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": {"name": "db", "namespace": "data", "labels": {
                    "kustomize.toolkit.fluxcd.io/name": "db", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
                "spec": base_spec(),
                "status": {"storageNamespace": "data",
                    "history": [{"name": "db", "namespace": "data", "version": 3, "chartName": "db"}],
                    "inventory": {"entries": [
                        {"id": "data_db_apps_StatefulSet", "v": "v1"},
                        {"id": "data_old-cron_batch_CronJob", "v": "v1"}]}}
            })
        ),
    )
    .unwrap();
    let snapshot = snapshot.path().to_str().unwrap().to_string();
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", &snapshot]);
    assert_eq!(code, 2, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    let deleted: Vec<(String, String)> =
        sorted_changes(release).into_iter().filter(|(a, _)| a == "delete").collect();
    assert_eq!(
        deleted,
        sorted_pairs(&[("delete", "data_db_apps_StatefulSet"), ("delete", "data_old-cron_batch_CronJob")])
    );
    assert!(has_alert(&plan, "danger", "release-target-changed"), "{:?}", alert_codes(&plan));

    // The HelmRelease removed: its live inventory is what the uninstall deletes.
    remove_release(&repo);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", &snapshot]);
    assert_eq!(code, 2, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(
        sorted_changes(release),
        sorted_pairs(&[("delete", "data_db_apps_StatefulSet"), ("delete", "data_old-cron_batch_CronJob")])
    );
    let message = alert(&plan, "helmrelease-removed")["message"].as_str().unwrap().to_string();
    assert!(message.contains("from the HelmRelease's status.inventory"), "{message}");

    // The markdown comment says it too.
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &["--cluster-snapshot", &snapshot]);
    assert!(markdown.contains("helmrelease-removed"), "{markdown}");
}

/// The base spec of the HelmRelease, as the live object carries it.
fn base_spec() -> Value {
    fluxplan::yaml::parse_documents(RELEASE).unwrap().remove(0)["spec"].clone()
}

/// Attack: the release renamed while its chart moves to a repository fluxplan cannot fetch. The
/// install is not planned, but helm-controller uninstalls the old release before it renders the
/// new chart: the uninstall is planned and blocks. Near miss: the same move without the rename
/// is only `chart-unavailable`.
#[test]
fn a_rename_behind_an_unavailable_chart_still_plans_the_uninstall() {
    let _ = helm(4);
    let unreachable = |repo: &crate::fixture::Repo, fields: &str| {
        let text = RELEASE
            .replace("chart: ./charts/db", "chart: db\n      version: 1.x")
            .replace(
                "kind: GitRepository\n        name: flux-system",
                "kind: HelmRepository\n        name: charts",
            )
            .replace("  values:\n", &format!("{fields}  values:\n"));
        repo.write("apps/db/release.yaml", &text);
        repo.commit("from a Helm repository");
    };
    let repo = fleet();
    unreachable(&repo, "  releaseName: db2\n");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["status"], "external");
    let deleted: Vec<(String, String)> =
        sorted_changes(release).into_iter().filter(|(a, _)| a == "delete").collect();
    assert_eq!(
        deleted,
        released("data").into_iter().map(|id| ("delete".to_string(), id)).collect::<Vec<_>>()
    );
    assert!(has_alert(&plan, "danger", "release-target-changed"), "{:?}", alert_codes(&plan));

    let repo = fleet();
    unreachable(&repo, "");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    assert!(has_alert(&plan, "warning", "chart-unavailable"), "{:?}", alert_codes(&plan));
    assert!(dangers(&plan).is_empty(), "{:?}", alert_codes(&plan));
}

/// With Helm's storage read, the uninstall of a renamed release deletes what the old release's
/// record holds (here an object the base render never had), not what the new name finds there
/// (nothing).
#[test]
fn with_helms_storage_read_the_old_releases_record_is_uninstalled() {
    let _ = helm(4);
    let repo = fleet();
    insert_before_values(&repo, "  releaseName: db2\n  values:\n");
    repo.commit("rename the release");
    let snapshot = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        snapshot.path(),
        "kind: ClusterSnapshot\nhelmReleases:\n- {name: db, namespace: data, storageNamespace: data, version: 4, \
         status: deployed, objects: [data_db_apps_StatefulSet, data_db-metrics__Service, data_db-auth__Secret, \
         data_old-job_batch_Job], kept: [data_db-settings__ConfigMap]}\n",
    )
    .unwrap();
    let (plan, code) =
        plan_json(&repo, "HEAD~1", "HEAD", &["--cluster-snapshot", snapshot.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{plan:#}");
    let release = unit_in(&plan, "HelmRelease", "data/db");
    assert_eq!(release["inventory_source"], "cluster");
    let deleted: Vec<(String, String)> =
        sorted_changes(release).into_iter().filter(|(a, _)| a == "delete").collect();
    let mut expected: Vec<(String, String)> =
        released("data").into_iter().map(|id| ("delete".into(), id)).collect();
    expected.push(("delete".into(), "data_old-job_batch_Job".into()));
    expected.sort();
    assert_eq!(deleted, expected);
    assert!(has_alert(&plan, "danger", "release-target-changed"), "{:?}", alert_codes(&plan));
}
