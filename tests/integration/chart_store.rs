//! The chart store: a chart's archive is read once per digest, whatever the releases that use
//! it, and a warm plan (its `helm template` runs cached) reads and writes no chart at all.

use crate::fixture::Repo;
use crate::helm_fetch::{package, Static};
use fluxplan::render::{Renderer, Status};
use std::time::Duration;

const RELEASES: usize = 35;

/// `RELEASES` HelmReleases of one chart from an HTTP Helm repository, each with its own values.
fn fleet(url: &str) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    let mut files = vec!["sources.yaml".to_string()];
    repo.write(
        "apps/sources.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: data\nspec:\n  url: {url}/charts\n"
        ),
    );
    for n in 0..RELEASES {
        repo.write(
            &format!("apps/db-{n}.yaml"),
            &format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: db-{n}\n  namespace: data\nspec:\n  \
                 interval: 10m\n  chart:\n    spec:\n      chart: db\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n  \
                 values:\n    replicas: {}\n",
                n + 1
            ),
        );
        files.push(format!("db-{n}.yaml"));
    }
    let resources: String = files.iter().map(|f| format!("- {f}\n")).collect();
    repo.write("apps/kustomization.yaml", &format!("resources:\n{resources}"));
    repo.commit("base");
    repo
}

#[test]
fn releases_of_one_chart_read_it_once_cold_and_a_warm_render_reads_and_writes_none() {
    let packages = tempfile::tempdir().unwrap();
    package(packages.path(), "1.0.0", "db");
    let server = Static::repository(packages.path());
    let repo = fleet(&server.url());
    let cache = tempfile::tempdir().unwrap();
    let mut opts = repo.options(None);
    opts.chart_settings.allowed_hosts = vec![server.host()];
    let render = |renderer: &Renderer| {
        let render = renderer.render(&opts).unwrap();
        let releases: Vec<_> = render.clusters[0]
            .kustomizations
            .iter()
            .filter(|k| k.helm.is_some())
            .map(|k| (format!("{}/{}", k.namespace, k.name), k.status, k.objects.len()))
            .collect();
        assert_eq!(releases.len(), RELEASES, "{releases:?}");
        releases
    };
    let cold = Renderer::new(Duration::from_secs(60), Some(cache.path().to_path_buf())).unwrap();
    let first = render(&cold);
    assert!(
        first.iter().all(|(_, status, objects)| *status == Status::Rendered && *objects == 1),
        "{first:?}"
    );
    // Read once for its facts; its facts and the archive helm reads written once.
    assert_eq!(cold.chart_store_counts(), (2, 1));
    let listing = || -> Vec<_> {
        let mut names = parts(&cache.path().join("unpacked"));
        names.sort();
        names
    };
    let stored = listing();
    assert_eq!(stored.len(), 2, "{stored:?}");
    drop(cold);
    // Another process, the same cache: every `helm template` cached, no chart read or written.
    let warm = Renderer::new(Duration::from_secs(60), Some(cache.path().to_path_buf())).unwrap();
    assert_eq!(render(&warm), first);
    assert_eq!(warm.chart_store_counts(), (0, 0));
    assert_eq!(listing(), stored);
    // Near miss: without the store's directory (no cache), every process learns the chart again,
    // once.
    let uncached = Renderer::new(Duration::from_secs(60), None).unwrap();
    render(&uncached);
    assert_eq!(uncached.chart_store_counts(), (2, 1));
}

/// The parts of the store's entries (`DIGEST/PART`).
fn parts(root: &std::path::Path) -> Vec<String> {
    let mut parts = Vec::new();
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        for part in std::fs::read_dir(entry.path()).unwrap().flatten() {
            parts.push(format!("{name}/{}", part.file_name().to_string_lossy()));
        }
    }
    parts
}

/// Releases of a chart directory in the repository (a GitRepository path): the directory is
/// hashed and scanned once for all of them, each release rendered with its own values.
#[test]
fn releases_of_one_chart_directory_read_it_once() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    for chart in ["db", "cache"] {
        repo.write(
            &format!("charts/{chart}/Chart.yaml"),
            &format!("apiVersion: v2\nname: {chart}\nversion: 1.0.0\n"),
        );
        repo.write(
            &format!("charts/{chart}/templates/cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  replicas: \"{{ .Values.replicas }}\"\n",
        );
    }
    let mut files = Vec::new();
    for n in 0..RELEASES {
        // A near miss: the last release uses another chart directory, read once more.
        let chart = if n + 1 == RELEASES { "cache" } else { "db" };
        repo.write(
            &format!("apps/db-{n}.yaml"),
            &format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: db-{n}\n  namespace: data\nspec:\n  \
                 interval: 10m\n  chart:\n    spec:\n      chart: ./charts/{chart}\n      sourceRef:\n        kind: GitRepository\n        \
                 name: flux-system\n        namespace: flux-system\n  values:\n    replicas: {n}\n"
            ),
        );
        files.push(format!("- db-{n}.yaml\n"));
    }
    repo.write("apps/kustomization.yaml", &format!("resources:\n{}", files.concat()));
    repo.commit("base");
    let renderer = Renderer::new(Duration::from_secs(60), None).unwrap();
    let render = renderer.render(&repo.options(None)).unwrap();
    let replicas: Vec<_> = render.clusters[0]
        .kustomizations
        .iter()
        .filter(|k| k.helm.is_some())
        .map(|k| {
            assert_eq!(k.status, Status::Rendered, "{:?}", k.error);
            k.objects[0].object["data"]["replicas"].as_str().unwrap().to_string()
        })
        .collect();
    let mut expected: Vec<String> = (0..RELEASES).map(|n| n.to_string()).collect();
    let mut got = replicas.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    assert_eq!(renderer.chart_directories_read(), 2);
}
