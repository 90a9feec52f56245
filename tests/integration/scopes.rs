//! Scopes like the API server's: a cluster-scoped custom kind under a namespaced kustomization
//! gets no namespace in its id, from the catalogue, the repository's `crdScopes`, or the
//! cluster's CRDs; the missing-CRD warning is printed once per kind.

use crate::fixture::{fluxplan_bin, plan_cli, plan_json, Repo};
use serde_json::json;
use std::process::Command;

/// `infrastructure/` sets `namespace: cert-manager` on everything, ClusterIssuers included.
fn fleet_with_cluster_scoped_custom_kinds() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/infrastructure.yaml", "infrastructure", "./infrastructure", "");
    repo.write(
        "infrastructure/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: cert-manager\nresources:\n- issuers.yaml\n- pools.yaml\n",
    );
    repo.write(
        "infrastructure/issuers.yaml",
        "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata:\n  name: letsencrypt-production\nspec:\n  acme:\n    server: https://acme.example/directory\n---\napiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: wildcard\nspec:\n  secretName: wildcard-tls\n",
    );
    repo.write(
        "infrastructure/pools.yaml",
        "apiVersion: pools.example.io/v1\nkind: AddressPool\nmetadata:\n  name: lan\nspec:\n  cidr: 10.0.0.0/24\n",
    );
    repo.write("README.md", "# fleet\n");
    repo.commit("base");
    repo
}

fn build_ids(repo: &Repo, extra: &[&str]) -> (String, String) {
    let out = Command::new(fluxplan_bin())
        .args(["build", "--no-cache", "--format", "ids", "--repo"])
        .arg(repo.path())
        .args(extra)
        .output()
        .unwrap();
    (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn catalogued_cluster_scoped_kinds_get_no_namespace_and_unknown_kinds_are_warned_once() {
    let repo = fleet_with_cluster_scoped_custom_kinds();
    repo.kustomization("clusters/prod/more.yaml", "more-pools", "./more", "");
    repo.write(
        "more/pool.yaml",
        "apiVersion: pools.example.io/v1\nkind: AddressPool\nmetadata:\n  name: wan\n  namespace: default\n",
    );
    repo.commit("two Kustomizations with the unknown kind");
    let (ids, stderr) = build_ids(&repo, &[]);
    assert!(ids.contains("\n_letsencrypt-production_cert-manager.io_ClusterIssuer\n"), "{ids}");
    assert!(ids.contains("\ncert-manager_wildcard_cert-manager.io_Certificate\n"), "{ids}");
    // Nothing says what an AddressPool is: the manifest's namespace stands, and one warning says so.
    assert!(ids.contains("\ncert-manager_lan_pools.example.io_AddressPool\n"), "{ids}");
    assert_eq!(
        stderr.matches("no CustomResourceDefinition found for AddressPool.pools.example.io").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("crdScopes"), "the warning says how to fix it: {stderr}");
}

#[test]
fn the_repository_declares_scopes_and_build_reads_the_snapshot_crds() {
    let repo = fleet_with_cluster_scoped_custom_kinds();
    repo.write(".fluxplan.yaml", "crdScopes:\n  AddressPool.pools.example.io: Cluster\n");
    repo.commit("declare the pool's scope");
    let (ids, stderr) = build_ids(&repo, &["--rev", "HEAD"]);
    assert!(ids.contains("\n_lan_pools.example.io_AddressPool\n"), "{ids}");
    assert!(!stderr.contains("no CustomResourceDefinition found"), "{stderr}");

    // A cluster that serves ClusterIssuer as namespaced (a made-up CRD) beats the catalogue.
    let snapshot = repo.path().join("cluster.yaml");
    std::fs::write(
        &snapshot,
        "kind: ClusterSnapshot\ncustomResourceDefinitions:\n- {group: cert-manager.io, kind: ClusterIssuer, scope: Namespaced}\n",
    )
    .unwrap();
    let (ids, _) = build_ids(&repo, &["--rev", "HEAD", "--cluster-snapshot", snapshot.to_str().unwrap()]);
    assert!(ids.contains("\ncert-manager_letsencrypt-production_cert-manager.io_ClusterIssuer\n"), "{ids}");
}

#[test]
fn no_op_pull_request_against_the_real_inventory_plans_no_changes() {
    let repo = fleet_with_cluster_scoped_custom_kinds();
    repo.write(".fluxplan.yaml", "crdScopes:\n  AddressPool.pools.example.io: Cluster\n");
    repo.commit("declare the pool's scope");
    // The inventory as kustomize-controller writes it, with the ids the API server gives, and a
    // snapshot that knows no CRD scopes.
    let owner = json!({"kustomize.toolkit.fluxcd.io/name": "infrastructure", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"});
    let ids = [
        "_letsencrypt-production_cert-manager.io_ClusterIssuer",
        "cert-manager_wildcard_cert-manager.io_Certificate",
        "_lan_pools.example.io_AddressPool",
    ];
    let root_ids = [
        "flux-system_flux-system_kustomize.toolkit.fluxcd.io_Kustomization",
        "flux-system_infrastructure_kustomize.toolkit.fluxcd.io_Kustomization",
        "flux-system_flux-system_source.toolkit.fluxcd.io_GitRepository",
    ];
    let kustomization = |name: &str, path: &str, ids: &[&str]| {
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "flux-system"},
            "spec": {"path": path, "prune": true, "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
            "status": {"inventory": {"entries": ids.iter().map(|id| json!({"id": id, "v": "v1"})).collect::<Vec<_>>()}}})
    };
    let objects: Vec<serde_json::Value> = [
        ("cert-manager.io/v1", "ClusterIssuer", None, "letsencrypt-production"),
        ("cert-manager.io/v1", "Certificate", Some("cert-manager"), "wildcard"),
        ("pools.example.io/v1", "AddressPool", None, "lan"),
    ]
    .iter()
    .map(|(api, kind, ns, name)| {
        let mut meta = json!({"name": name, "labels": owner});
        if let Some(ns) = ns {
            meta["namespace"] = json!(ns);
        }
        json!({"apiVersion": api, "kind": kind, "metadata": meta})
    })
    .collect();
    let snapshot = json!({"kind": "ClusterSnapshot", "kustomizations": [
        kustomization("flux-system", "./clusters/prod", &root_ids),
        kustomization("infrastructure", "./infrastructure", &ids)], "objects": objects});
    let path = repo.path().join("cluster.json");
    std::fs::write(&path, snapshot.to_string()).unwrap();
    repo.write("README.md", "# fleet\n\nNothing that Flux reads.\n");
    repo.commit("docs");
    let extra = ["--cluster-snapshot", path.to_str().unwrap()];
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &extra);
    assert_eq!(plan["verdict"], "no-changes", "{plan:#}");
    assert_eq!(code, 0);
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &extra);
    insta::assert_snapshot!("scopes_no_op_real_inventory_markdown", markdown);
    let (json_text, _) = plan_cli(&repo, "HEAD~1", "HEAD", "json", &extra);
    insta::assert_snapshot!("scopes_no_op_real_inventory_json", json_text);
}
