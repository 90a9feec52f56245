//! Objects that move between a Kustomization and a HelmRelease: the controllers do not hand them
//! over, so the move is a possible lasting deletion (`ownership-move-deletion`), named with both
//! owners and the safe way to move; objects the old owner keeps, and near misses (another
//! namespace or kind), are not.

use crate::fixture::{alert_codes, edit, helm, plan_json, sorted_changes, sorted_pairs, unit_in, Repo};
use serde_json::Value;

const CODE: &str = "ownership-move-deletion";
const MOVED: &str = "data_shared__ConfigMap";

/// The HelmRelease `data/web` (chart `charts/web` of this repository), applied with the
/// ConfigMaps of `apps/` by the Kustomization `flux-system/apps`.
fn fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.helm_release("apps/release.yaml", "web", "data", "./charts/web");
    repo.write("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n");
    repo.write(
        "charts/web/templates/app.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: b\n",
    );
    repo
}

/// A chart template of `kind` `shared`, in the release's namespace unless `namespace`.
fn chart_object(repo: &Repo, kind: &str, namespace: Option<&str>, annotations: &str) {
    let namespace = namespace.map(|n| format!("  namespace: {n}\n")).unwrap_or_default();
    repo.write(
        "charts/web/templates/shared.yaml",
        &format!("apiVersion: v1\nkind: {kind}\nmetadata:\n  name: shared\n{namespace}{annotations}data:\n  key: dmFsdWU=\n"),
    );
}

/// The Kustomization's ConfigMap `data/shared`, with `annotations` (indented metadata lines).
fn kustomization_object(repo: &Repo, annotations: &str) {
    repo.write(
        "apps/shared.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: data\n{annotations}data:\n  key: value\n"),
    );
}

fn ownership_alerts(plan: &Value) -> Vec<(String, String)> {
    alert_codes(plan).into_iter().filter(|(_, code)| code.starts_with("ownership-move")).collect()
}

/// The plan's one `ownership-move-deletion` warning says each of `words`.
fn assert_warning_says(plan: &Value, words: &[&str]) {
    assert_eq!(ownership_alerts(plan), vec![("warning".to_string(), CODE.to_string())]);
    let alerts = plan["alerts"].as_array().unwrap();
    let message = alerts.iter().find(|a| a["code"] == CODE).unwrap()["message"].as_str().unwrap();
    for words in words {
        assert!(message.contains(words), "{words:?} not in {message}");
    }
}

/// Kustomization → HelmRelease: helm-controller adopts the ConfigMap and kustomize-controller's
/// garbage collection may then delete it for good. The plan lists the deletion, and a warning
/// names the kind, both owners and the safe way.
#[test]
fn an_object_moving_from_a_kustomization_into_a_helm_release_may_be_deleted_for_good() {
    let _ = helm(4);
    let repo = fleet();
    kustomization_object(&repo, "");
    repo.commit("base");
    repo.remove("apps/shared.yaml");
    chart_object(&repo, "ConfigMap", None, "");
    repo.commit("move into the release");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let kustomization = unit_in(&plan, "Kustomization", "flux-system/apps");
    assert_eq!(sorted_changes(kustomization), sorted_pairs(&[("delete", MOVED)]), "{kustomization:#}");
    assert_eq!(kustomization["changes"][0]["moved_to"], "data/web");
    let release = unit_in(&plan, "HelmRelease", "data/web");
    assert_eq!(sorted_changes(release), sorted_pairs(&[("create", MOVED)]), "{release:#}");
    assert_eq!(release["changes"][0]["reason"], "moves here from Kustomization flux-system/apps");
    assert_warning_says(
        &plan,
        &[
            "ConfigMap data/shared moves from Kustomization flux-system/apps to HelmRelease data/web",
            "helm-controller adopts it",
            "first mark it `kustomize.toolkit.fluxcd.io/prune: disabled`",
        ],
    );
}

/// Near misses: what the Kustomization keeps (the object marked `prune: disabled`, or its
/// `prune: false`) is adopted and stays; the same name in another namespace, or of another
/// kind, is no move at all: a plain deletion.
#[test]
fn a_kept_object_or_another_namespace_or_kind_is_no_lasting_deletion() {
    let _ = helm(4);
    let disabled = "  annotations:\n    kustomize.toolkit.fluxcd.io/prune: disabled\n";
    let cases: [(&str, &str, Option<&str>, bool, &str); 4] = [
        ("prune: disabled", disabled, None, false, "skip"),
        ("prune: false", "", None, true, "orphan"),
        ("another namespace", "", Some("other"), false, "delete"),
        ("another kind", "", None, false, "delete"),
    ];
    for (case, annotations, namespace, prune_off, action) in cases {
        let repo = fleet();
        kustomization_object(&repo, annotations);
        if prune_off {
            edit(&repo, "clusters/prod/apps.yaml", "prune: true", "prune: false");
        }
        repo.commit("base");
        repo.remove("apps/shared.yaml");
        chart_object(&repo, if case == "another kind" { "Secret" } else { "ConfigMap" }, namespace, "");
        repo.commit("move into the release");
        let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
        let kustomization = unit_in(&plan, "Kustomization", "flux-system/apps");
        assert_eq!(
            sorted_changes(kustomization),
            sorted_pairs(&[(action, MOVED)]),
            "{case}: {kustomization:#}"
        );
        assert!(ownership_alerts(&plan).is_empty(), "{case}: {:#}", plan["alerts"]);
        let reason = kustomization["changes"][0]["reason"].as_str().unwrap_or_default();
        let moves = namespace.is_none() && case != "another kind";
        assert_eq!(reason.contains("; HelmRelease data/web takes it over"), moves, "{case}: {reason}");
    }
}

/// HelmRelease → Kustomization: Helm's upgrade deletes what leaves the release's manifest, also
/// after kustomize-controller applied it; `helm.sh/resource-policy: keep` prevents it.
#[test]
fn an_object_moving_from_a_helm_release_into_a_kustomization_may_be_deleted_by_the_upgrade() {
    let _ = helm(4);
    for keep in [false, true] {
        let repo = fleet();
        let annotations = if keep { "  annotations:\n    helm.sh/resource-policy: keep\n" } else { "" };
        chart_object(&repo, "ConfigMap", None, annotations);
        repo.commit("base");
        repo.remove("charts/web/templates/shared.yaml");
        kustomization_object(&repo, "");
        repo.commit("move out of the release");
        let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
        let release = unit_in(&plan, "HelmRelease", "data/web");
        let kustomization = unit_in(&plan, "Kustomization", "flux-system/apps");
        assert_eq!(sorted_changes(kustomization), sorted_pairs(&[("create", MOVED)]), "{kustomization:#}");
        assert_eq!(kustomization["changes"][0]["reason"], "moves here from HelmRelease data/web");
        if keep {
            assert_eq!(sorted_changes(release), sorted_pairs(&[("skip", MOVED)]), "{release:#}");
            assert!(ownership_alerts(&plan).is_empty(), "{:#}", plan["alerts"]);
            continue;
        }
        assert_eq!(sorted_changes(release), sorted_pairs(&[("delete", MOVED)]), "{release:#}");
        assert_eq!(release["changes"][0]["moved_to"], "flux-system/apps");
        assert_warning_says(
            &plan,
            &[
                "ConfigMap data/shared moves from HelmRelease data/web to Kustomization flux-system/apps",
                "Helm's upgrade deletes it",
                "first annotate it `helm.sh/resource-policy: keep`",
            ],
        );
    }
}
