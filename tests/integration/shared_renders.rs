//! Base and head share the finished renders both read (decoded once, one copy of each manifest):
//! the plan must be the one each side would make on its own. Planned with sharing and without,
//! cold and warm, on a fleet with nested Kustomizations, a HelmRelease, objects moving between
//! units, an unchanged unit, and near misses whose files are unchanged but whose inputs are not
//! (a parent's substitution, a cluster snapshot's values).

use crate::fixture::{changes_of, helm, sorted_changes, sorted_pairs, unit_in, Repo};
use fluxplan::planner::{self, Clusters, Request};
use std::path::Path;

/// `flux-system/apps` applies the HelmRelease `data/web`, and the nested Kustomizations `team`
/// (substituted `${env}` by its parent's spec and `${region}` from the cluster's ConfigMap) and
/// `quiet` (nothing in it changes).
fn fleet() -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.helm_release("apps/release.yaml", "web", "data", "./charts/web");
    repo.write("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n");
    repo.write(
        "charts/web/templates/app.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: b\n",
    );
    repo.kustomization(
        "apps/team.yaml",
        "team",
        "./team",
        "postBuild:\n  substitute:\n    env: prod\n  substituteFrom:\n  - kind: ConfigMap\n    name: cluster-vars\n    optional: true\n",
    );
    repo.kustomization("apps/quiet.yaml", "quiet", "./quiet", "");
    repo.write(
        "team/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: team\n  namespace: data\ndata:\n  env: ${env}\n  region: ${region:=none}\n",
    );
    repo.config_map("team/hop.yaml", "hop", "data");
    repo.config_map("quiet/config.yaml", "quiet", "data");
    repo.config_map("apps/shared.yaml", "shared", "data");
    repo.commit("base");
    // Moves: `shared` into the release, `hop` from `team` up into `apps`; `team`'s files stay
    // as they are while its parent gives it another value.
    repo.remove("apps/shared.yaml");
    repo.write(
        "charts/web/templates/shared.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata:\n  key: value\n",
    );
    repo.remove("team/hop.yaml");
    repo.config_map("apps/hop.yaml", "hop", "data");
    crate::fixture::edit(&repo, "apps/team.yaml", "env: prod", "env: staging");
    repo.commit("head");
    repo
}

fn plan(repo: &Repo, cache: Option<&Path>, share: bool, clusters: &Clusters) -> String {
    let mut request = Request::new(repo.path(), "HEAD~1", "HEAD");
    request.render.cache_dir = cache.map(Path::to_path_buf);
    request.render.share_decodes = share;
    request.clusters = clusters.clone();
    fluxplan::report::json(&planner::plan(&request))
}

#[test]
fn sharing_base_and_heads_renders_changes_no_plan() {
    let _ = helm(4);
    let repo = fleet();
    let cache = tempfile::tempdir().unwrap();
    let offline = Clusters::Offline;
    // Cold without sharing (fills the cache), then warm with and without, and memory-only.
    let alone = plan(&repo, Some(cache.path()), false, &offline);
    let shared_warm = plan(&repo, Some(cache.path()), true, &offline);
    let alone_warm = plan(&repo, Some(cache.path()), false, &offline);
    let shared_memory = plan(&repo, None, true, &offline);
    assert_eq!(shared_warm, alone, "shared, warm");
    assert_eq!(alone_warm, alone, "alone, warm");
    assert_eq!(shared_memory, alone, "shared, memory only");

    let plan: serde_json::Value = serde_json::from_str(&alone).unwrap();
    assert_eq!(plan["verdict"], "changes", "{plan:#}");
    // The unchanged unit is planned unchanged; the near miss (same files, the parent's value
    // changed) is not taken for unchanged.
    assert_eq!(changes_of(&plan, "flux-system/quiet"), Vec::<(String, String)>::new());
    let team = unit_in(&plan, "Kustomization", "flux-system/team");
    let updated = sorted_changes(team);
    assert!(updated.contains(&("update".to_string(), "data_team__ConfigMap".to_string())), "{team:#}");
    // `hop` moves to the parent: no deletion, a move.
    assert!(updated.contains(&("skip".to_string(), "data_hop__ConfigMap".to_string())), "{team:#}");
    let release = unit_in(&plan, "HelmRelease", "data/web");
    assert_eq!(sorted_changes(release), sorted_pairs(&[("create", "data_shared__ConfigMap")]), "{release:#}");
    let apps = unit_in(&plan, "Kustomization", "flux-system/apps");
    let apps_changes = sorted_changes(apps);
    assert!(apps_changes.contains(&("create".to_string(), "data_hop__ConfigMap".to_string())), "{apps:#}");
    assert!(apps_changes.contains(&("delete".to_string(), "data_shared__ConfigMap".to_string())), "{apps:#}");
}

/// A cluster snapshot holding the ConfigMap `team` substitutes from: the unit's files are the
/// same as in the offline plan that filled the cache, its inputs are not; with sharing, without,
/// and without any cache, the plan is the same.
#[test]
fn a_cluster_snapshots_values_are_inputs_too() {
    let _ = helm(4);
    let repo = fleet();
    let snapshot = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        snapshot.path(),
        "apiVersion: fluxplan.dev/v1alpha1\nkind: ClusterSnapshot\nconfigMaps:\n- metadata: {namespace: flux-system, name: \
         cluster-vars}\n  data: {region: eu-west}\n",
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let offline = Clusters::Offline;
    let live = Clusters::Snapshot(snapshot.path().to_path_buf());
    // The offline plan fills the cache first: a snapshot's plan must not reuse its renders.
    let _ = plan(&repo, Some(cache.path()), true, &offline);
    let shared = plan(&repo, Some(cache.path()), true, &live);
    let alone = plan(&repo, Some(cache.path()), false, &live);
    let fresh = plan(&repo, None, false, &live);
    assert_eq!(shared, alone);
    // And the same as a plan that never saw the offline renders.
    assert_eq!(shared, fresh);
}
