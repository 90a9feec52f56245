//! `api-removed`: objects the merge creates or updates in an API version the cluster does not
//! serve, by the Kubernetes release named for it or by its discovery.

use crate::fixture::{alert_codes, plan_json, Repo};
use serde_json::Value;

const INGRESS: &str = "apiVersion: {API}\nkind: Ingress\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  rules:\n  - host: shop.example\n";

/// A fleet whose pull request adds an Ingress in `api_version` (and `extra` files).
fn with_ingress(api_version: &str, extra: &[(&str, &str)]) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.write("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n");
    repo.commit("base");
    repo.write("apps/ingress.yaml", &INGRESS.replace("{API}", api_version));
    for (path, text) in extra {
        repo.write(path, text);
    }
    repo.commit("add an ingress");
    repo
}

fn api_removed(plan: &Value) -> Option<&Value> {
    plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "api-removed")
}

#[test]
fn a_removed_ingress_version_blocks_on_a_cluster_of_a_later_release() {
    let repo = with_ingress("extensions/v1beta1", &[]);
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--kube-version", "v1.33.1"]);
    assert_eq!(code, 2, "{:?}", alert_codes(&plan));
    let alert = api_removed(&plan).expect("api-removed raised");
    assert_eq!(alert["severity"], "danger");
    assert_eq!(alert["kustomization"], "flux-system/apps");
    let message = alert["message"].as_str().unwrap();
    assert!(
        message.contains("Ingress shop/web extensions/v1beta1, which Kubernetes v1.22 removed")
            && message.contains("use networking.k8s.io/v1"),
        "{message}"
    );
    assert_eq!(alert["objects"][0], "shop_web_extensions_Ingress");

    // Near misses: the same version on a cluster that still serves it, and the served version.
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &["--kube-version", "1.21"]);
    assert_eq!((code, api_removed(&plan)), (1, None), "{:?}", alert_codes(&plan));
    let served = with_ingress("networking.k8s.io/v1", &[]);
    let (plan, code) = plan_json(&served, "HEAD~1", "HEAD", &["--kube-version", "v1.33.1"]);
    assert_eq!((code, api_removed(&plan)), (1, None), "{:?}", alert_codes(&plan));
    // Without a version named for the cluster and no cluster read, nothing is guessed.
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert!(api_removed(&plan).is_none());
}

#[test]
fn a_group_version_the_read_cluster_does_not_serve_blocks_unless_the_merge_defines_it() {
    let widget =
        "apiVersion: widgets.example.io/v1\nkind: Widget\nmetadata:\n  name: blue\n  namespace: shop\n";
    let repo = with_ingress("networking.k8s.io/v1", &[("apps/widget.yaml", widget)]);
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("cluster.yaml");
    std::fs::write(
        &snapshot,
        "apiVersion: fluxplan.dev/v1alpha1\nkind: ClusterSnapshot\nkubeVersion: v1.33.1\napiVersions: [v1, apps/v1, networking.k8s.io/v1, apiextensions.k8s.io/v1, kustomize.toolkit.fluxcd.io/v1, source.toolkit.fluxcd.io/v1]\nnamespaces: [shop]\n",
    )
    .unwrap();
    let args = ["--cluster-snapshot", snapshot.to_str().unwrap()];
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &args);
    assert_eq!(code, 2, "{:?}", alert_codes(&plan));
    let message = api_removed(&plan).expect("api-removed raised")["message"].as_str().unwrap().to_string();
    assert!(message.contains("widgets.example.io/v1, which the cluster does not serve"), "{message}");
    assert!(!message.contains("Ingress"), "the served Ingress is not named: {message}");

    // The same merge bringing the CRD that serves it: nothing to say.
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.widgets.example.io\nspec:\n  group: widgets.example.io\n  names:\n    kind: Widget\n    plural: widgets\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n";
    let repo = with_ingress("networking.k8s.io/v1", &[("apps/widget.yaml", widget), ("apps/crd.yaml", crd)]);
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &args);
    assert!(api_removed(&plan).is_none(), "{:#}", plan["alerts"]);
}
