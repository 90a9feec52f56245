//! The Helm engine: the real, pinned `helm` (installed by scripts/fetch-helm.sh, which the test
//! script runs), confined as kustomize is. What fluxplan renders is what `helm template` run
//! directly prints.

use fluxplan::cancel::CancelToken;
use fluxplan::render::helm::{split_release, Helm, Release, Template};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

use crate::fixture::helm;

/// A chart as `helm create` makes it, plus a CRD in `crds/` and a pre-upgrade hook.
fn chart(helm: &Helm, dir: &Path) -> std::path::PathBuf {
    let out = Command::new(helm.program())
        .arg("create")
        .arg(dir.join("web"))
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let chart = dir.join("web");
    std::fs::create_dir(chart.join("crds")).unwrap();
    std::fs::write(
        chart.join("crds/widgets.yaml"),
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n\
         spec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions: []\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/migrate.yaml"),
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}-migrate\n  annotations:\n    \
         helm.sh/hook: pre-upgrade\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      \
         - name: m\n        image: \"busybox:{{ .Capabilities.KubeVersion.Minor }}\"\n",
    )
    .unwrap();
    chart
}

/// `helm template` run directly, unconfined, values from a file.
fn direct(
    helm: &Helm,
    chart: &Path,
    (release, namespace): (&str, &str),
    values: &Value,
    flags: &[&str],
) -> Release {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), serde_json::to_string(values).unwrap()).unwrap();
    let out = Command::new(helm.program())
        .args(["template", release])
        .arg(chart)
        .args(["--namespace", namespace, "--values"])
        .arg(file.path())
        .args(flags)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    split_release(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

#[test]
fn the_engine_renders_what_helm_template_prints_directly() {
    for major in [4, 3] {
        let helm = helm(major);
        assert_eq!(helm.major(), Some(major), "{}", helm.version);
        let dir = tempfile::tempdir().unwrap();
        let chart = chart(&helm, dir.path());
        let values = json!({"replicaCount": 3, "service": {"port": 8080}});
        let apis = vec!["monitoring.coreos.com/v1".to_string()];
        for (include_crds, is_upgrade) in [(true, false), (false, true)] {
            let template = Template {
                chart: &chart,
                readable: dir.path(),
                release: "rel",
                namespace: "demo",
                values: &values,
                int64s: &[],
                kube_version: Some("v1.33.0"),
                api_versions: &apis,
                include_crds,
                is_upgrade,
                skip_schema_validation: false,
                // Helm 4's kyaml round trip (fluxplan's own post-renderer plugin, confined) changes
                // no value of these templates.
                through_kyaml: major == 4 && is_upgrade,
            };
            let rendered = helm.template(&template, &CancelToken::new()).unwrap();
            let mut flags = vec!["--kube-version", "v1.33.0", "--api-versions", "monitoring.coreos.com/v1"];
            flags.push(if include_crds { "--include-crds" } else { "--skip-crds" });
            if is_upgrade {
                flags.push("--is-upgrade");
            }
            assert_eq!(
                rendered,
                direct(&helm, &chart, ("rel", "demo"), &values, &flags),
                "helm {major} {flags:?}"
            );
            assert_eq!(rendered.crds.len(), usize::from(include_crds), "{:?}", rendered.crds);
            let kinds: Vec<&str> = rendered.objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
            assert!(kinds.contains(&"Deployment"), "{kinds:?}");
            let deployment = rendered.objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
            assert_eq!(deployment["spec"]["replicas"], 3);
            assert_eq!(rendered.hooks.len(), 1, "the migrate Job is a hook, not in the manifest");
            assert_eq!(
                rendered.hooks[0].1["spec"]["template"]["spec"]["containers"][0]["image"],
                "busybox:33"
            );
            assert_eq!(rendered.tests.len(), 1, "helm create's test-connection Pod");
        }
    }
}

/// The chart is all helm may read: a template cannot reach the planner's files or environment.
#[test]
fn a_chart_reads_nothing_outside_it_and_no_environment() {
    let helm = helm(4);
    let dir = tempfile::tempdir().unwrap();
    let chart = chart(&helm, dir.path());
    // Helm follows symlinks in a chart directory it loads: the sandbox must stop it.
    std::os::unix::fs::symlink("/etc/passwd", chart.join("passwd")).unwrap();
    std::fs::write(
        chart.join("templates/leak.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  passwd: {{ .Files.Get \"passwd\" | quote }}\n",
    )
    .unwrap();
    let template = Template {
        chart: &chart,
        readable: &chart,
        release: "rel",
        namespace: "demo",
        values: &json!({}),
        int64s: &[],
        kube_version: None,
        api_versions: &[],
        include_crds: false,
        is_upgrade: false,
        skip_schema_validation: false,
        through_kyaml: false,
    };
    match helm.template(&template, &CancelToken::new()) {
        Err(error) => assert!(!error.to_string().contains("root:x:0:0"), "{error}"),
        Ok(release) => {
            let leak = release.objects.iter().find(|o| o["metadata"]["name"] == "leak").unwrap();
            assert!(!leak["data"]["passwd"].as_str().unwrap_or("").contains("root:"), "{leak}");
        }
    }
}

/// A HelmRelease whose chart is a path of this repository, values from values files, a
/// ConfigMap of the render and the spec: its objects are what `helm template` prints for the
/// same chart and values, with the controller's labels.
#[test]
fn a_helm_release_renders_its_chart_with_the_controllers_values_and_labels() {
    use fluxplan::flux::helm::HelmReleaseSpec;
    use fluxplan::render::helm::release::{render, Inputs, NotRendered};
    let helm = helm(4);
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir(tree.path().join("charts")).unwrap();
    let chart = chart(&helm, &tree.path().join("charts"));
    std::fs::write(tree.path().join("charts/prod.yaml"), "replicaCount: 5\nservice:\n  port: 9090\n")
        .unwrap();
    let manifest = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "web", "namespace": "apps"},
        "spec": {"chart": {"spec": {"chart": "./charts/web", "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"},
                    "valuesFiles": ["charts/web/values.yaml", "charts/prod.yaml"]}},
                 "valuesFrom": [{"kind": "ConfigMap", "name": "web-values"}],
                 "values": {"service": {"port": 7070}},
                 "commonMetadata": {"labels": {"team": "a", "helm.toolkit.fluxcd.io/name": "spoofed"}}}});
    let spec = HelmReleaseSpec::parse(&manifest).unwrap();
    let config_map = json!({"data": {"values.yaml": "replicaCount: 4\nimage:\n  tag: \"1.2\"\n"}});
    let root = tree.path().to_path_buf();
    let inputs = Inputs {
        source_tree: &|source| (source.name == "flux-system").then(|| root.clone()),
        config_map: &|namespace, name| {
            (namespace == "apps" && name == "web-values").then(|| config_map.clone())
        },
        given_chart: None,
        source_object: &|_| None,
        cluster: &|_, _, _| fluxplan::cluster::Lookup::Unknown,
        values_secret_refused: &|_, _| None,
        kustomize: &|_, _| Err(fluxplan::render::kustomize::BuildError::Failed("no kustomize here".into())),
        templates: &|_, run| run(),
        upgrade: false,
        fetch: &|_, _| Err("no fetching here".into()),
        prepared: &fluxplan::render::helm::prepared::PreparedCharts::new(None),
        kube_version: None,
        api_versions: &[],
    };
    let rendered = render(&helm, &spec, "apps", "web", &inputs, &CancelToken::new()).unwrap();
    assert_eq!(rendered.chart.as_ref().map(|c| c.to_string()).as_deref(), Some("web 0.1.0"));
    let release = rendered.release;
    // The same chart with the same values, run directly: values files under the ConfigMap under the spec.
    let values = json!({"replicaCount": 4, "image": {"tag": "1.2"}, "service": {"port": 7070}});
    let mut expected = direct(&helm, &chart, ("web", "apps"), &values, &["--include-crds"]);
    for object in &mut expected.objects {
        let labels = object["metadata"].as_object_mut().unwrap().entry("labels").or_insert(json!({}));
        labels["team"] = json!("a");
        labels["helm.toolkit.fluxcd.io/name"] = json!("web");
        labels["helm.toolkit.fluxcd.io/namespace"] = json!("apps");
    }
    assert_eq!(release.objects, expected.objects);
    // CRDs from crds/ are installed as the chart has them: not post-rendered.
    assert_eq!(release.crds, expected.crds);
    assert_eq!(release.crds.len(), 1);
    let deployment = release.objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 4);

    // A chart fluxplan does not fetch yet is said so, never rendered as nothing.
    let mut by_ref = manifest.clone();
    by_ref["spec"]["chartRef"] = json!({"kind": "OCIRepository", "name": "web"});
    let spec = HelmReleaseSpec::parse(&by_ref).unwrap();
    match render(&helm, &spec, "apps", "web", &inputs, &CancelToken::new()) {
        Err(NotRendered::External(why)) => {
            assert!(why.contains("OCIRepository/apps/web is not in this render"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}
