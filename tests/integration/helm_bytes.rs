//! Byte-exact objects: a template that ends in a block scalar keeps the scalar's last line break,
//! as Helm and the API server keep it. Every object fluxplan renders for a HelmRelease (with and
//! without post-renderers) and an Argo CD Application is compared with what the pinned
//! `helm template` prints, read by another YAML parser (Debian's `yq`, PyYAML): for a HelmRelease
//! with a real Helm 4 post-renderer plugin running kustomize, as helm-controller always
//! post-renders (its origin labels are written by kustomize).

use crate::fixture::{helm, Repo};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Templates ending in each kind of scalar, two documents in one file, a template without a
/// final line break, and a near miss: an indented `---` inside a block scalar cuts nothing.
const TEMPLATES: &[(&str, &str)] = &[
    ("literal", "data:\n  conf: |\n    line one\n    --- not a separator\n    line two\n"),
    ("strip", "data:\n  conf: |-\n    no line break\n"),
    ("folded", "data:\n  conf: >\n    folded\n    words\n"),
    ("keep", "data:\n  conf: |+\n    kept\n\n\n"),
    ("plain", "data:\n  conf: plain value\n"),
    ("unterminated", "data:\n  conf: |\n    {{ .Values.last }}"),
];

/// A second file holding two documents: the first ends in a block scalar right before `---`.
const TWO_DOCUMENTS: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\ndata:\n  conf: |\n    before the separator\n\
---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: second\ndata:\n  conf: |\n    after it\n";

/// An object whose last value in kustomize's (sorted) key order is a `|+` scalar: Helm 4 trims
/// the document that ends in it.
const LAST: &str = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: last\nspec:\n  zz: |+\n    kept at the end\n\n\n  \
a: |+\n    kept inside\n\n\n";

/// The post-renderer both sides apply: a label on every ConfigMap.
const PATCH: &str = "- op: add\n  path: /metadata/labels\n  value: {patched: \"yes\"}\n";

fn write_chart(repo: &Repo, dir: &str) {
    repo.write(&format!("{dir}/Chart.yaml"), "apiVersion: v2\nname: bytes\nversion: 0.1.0\n");
    repo.write(&format!("{dir}/values.yaml"), "last: from values\n");
    for (name, data) in TEMPLATES {
        let head = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n");
        repo.write(&format!("{dir}/templates/{name}.yaml"), &format!("{head}{data}"));
    }
    repo.write(&format!("{dir}/templates/two.yaml"), TWO_DOCUMENTS);
    repo.write(&format!("{dir}/templates/last.yaml"), LAST);
}

/// A Helm 4 post-renderer plugin that runs `kubectl kustomize` (kustomize's `resMap.AsYaml`, as
/// helm-controller's post-renderers write), applying `PATCH` when `patched`.
fn post_renderer_plugin(plugins: &Path, patched: bool) {
    let dir = plugins.join("label-configmaps");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        "apiVersion: v1\nname: label-configmaps\nversion: 0.1.0\ntype: postrenderer/v1\nruntime: subprocess\n\
         runtimeConfig:\n  platformCommand:\n  - command: \"${HELM_PLUGIN_DIR}/render.sh\"\n",
    )
    .unwrap();
    let patch = PATCH.lines().map(|l| format!("    {l}\n")).collect::<String>();
    let patches = if patched {
        format!("patches:\n- target: {{kind: ConfigMap}}\n  patch: |\n{patch}")
    } else {
        String::new()
    };
    let script = format!(
        "#!/bin/sh\nset -e\nd=$(mktemp -d)\ncat > \"$d/all.yaml\"\ncat > \"$d/kustomization.yaml\" <<'EOF'\n\
         resources: [all.yaml]\n{patches}EOF\nkubectl kustomize \"$d\"\nrm -r \"$d\"\n"
    );
    let script_path = dir.join("render.sh");
    std::fs::write(&script_path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script_path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// How the oracle post-renders.
#[derive(Clone, Copy, PartialEq)]
enum PostRender {
    /// Not at all (Argo CD's `helm template`).
    No,
    /// kustomize without patches: what helm-controller's origin labels do to the text.
    Kustomize,
    /// kustomize applying `PATCH`.
    Patched,
}

/// What the pinned `helm template` prints, each document parsed by `yq`: objects by name.
fn oracle(chart: &Path, release: &str, namespace: &str, post_render: PostRender) -> BTreeMap<String, Value> {
    let helm = helm(4);
    let plugins = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(helm.program());
    cmd.args(["template", release]).arg(chart).args(["--namespace", namespace]);
    cmd.env("HOME", plugins.path()).env("HELM_PLUGINS", plugins.path());
    if post_render != PostRender::No {
        post_renderer_plugin(plugins.path(), post_render == PostRender::Patched);
        cmd.args(["--post-renderer", "label-configmaps"]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "helm template: {}", String::from_utf8_lossy(&out.stderr));
    let mut yq = Command::new("yq")
        .arg("-c")
        .arg(".")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("this test needs Debian's yq (apt-get install yq)");
    std::io::Write::write_all(&mut yq.stdin.take().unwrap(), &out.stdout).unwrap();
    let parsed = yq.wait_with_output().unwrap();
    assert!(parsed.status.success(), "yq failed on: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(parsed.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|document| document.is_object())
        .map(by_name)
        .collect()
}

/// The name and the parts a template writes: data, spec and labels.
fn by_name(object: Value) -> (String, Value) {
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let written =
        json!({"data": object["data"], "spec": object["spec"], "labels": object["metadata"]["labels"]});
    (name, written)
}

/// The ConfigMaps fluxplan renders for the unit `reference`, by name.
fn rendered(repo: &Repo, reference: &str) -> BTreeMap<String, Value> {
    let render = repo.render(Some("HEAD"));
    let unit = render.find(reference).unwrap_or_else(|| panic!("{reference} not rendered"));
    assert_eq!(unit.status, fluxplan::render::Status::Rendered, "{:?}", unit.error);
    unit.objects.iter().map(|o| by_name(serde_json::Value::clone(&o.object))).collect()
}

/// helm-controller's origin labels on each of the oracle's objects.
fn with_origin_labels(
    mut objects: BTreeMap<String, Value>,
    namespace: &str,
    name: &str,
) -> BTreeMap<String, Value> {
    for object in objects.values_mut() {
        if object["labels"].is_null() {
            object["labels"] = json!({});
        }
        object["labels"]["helm.toolkit.fluxcd.io/name"] = json!(name);
        object["labels"]["helm.toolkit.fluxcd.io/namespace"] = json!(namespace);
    }
    objects
}

/// A cluster whose Kustomization applies the HelmRelease `data/bytes` of the chart, with
/// `post_renderers` (spec lines), committed.
fn fleet(post_renderers: &str) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/bytes.yaml", "bytes", "./apps/bytes", "");
    write_chart(&repo, "charts/bytes");
    repo.write(
        "apps/bytes/release.yaml",
        &format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: bytes\n  namespace: data\nspec:\n  \
             interval: 10m\n  chart:\n    spec:\n      chart: ./charts/bytes\n      sourceRef:\n        kind: GitRepository\n        \
             name: flux-system\n        namespace: flux-system\n{post_renderers}"
        ),
    );
    repo.commit("base");
    repo
}

#[test]
fn block_scalars_that_end_a_template_keep_their_last_line_break_in_a_helm_release() {
    let _ = helm(4);
    let repo = fleet("");
    // helm-controller always post-renders (its origin labels, written by kustomize).
    let expected = oracle(&repo.path().join("charts/bytes"), "bytes", "data", PostRender::Kustomize);
    // The anchor of the comparison: Helm keeps the line break, cuts nothing at the indented
    // `---`; a file without a final line break has none, a `|+` keeps its blank lines but at the
    // end of a document.
    assert_eq!(expected["literal"]["data"]["conf"], "line one\n--- not a separator\nline two\n");
    assert_eq!(expected["first"]["data"]["conf"], "before the separator\n");
    assert_eq!(expected["unterminated"]["data"]["conf"], "from values");
    assert_eq!(expected["keep"]["data"]["conf"], "kept\n\n\n");
    assert_eq!(expected["last"]["spec"], json!({"a": "kept inside\n\n\n", "zz": "kept at the end\n"}));
    assert_eq!(expected.len(), TEMPLATES.len() + 3, "{expected:#?}");
    assert_eq!(rendered(&repo, "data/bytes"), with_origin_labels(expected, "data", "bytes"));
}

/// Helm 4 hands the post-renderer each template file read by kyaml and reads its output back
/// (docs/helm.md, "Byte-exact objects"): a template file without a final line break loses the
/// block scalar's, and a `|+` keeps its blank lines where kustomize's sorted keys move it off the
/// end of the document. fluxplan renders what the real Helm 4 prints with a real kustomize
/// post-renderer, every object alike.
#[test]
fn block_scalars_keep_their_last_line_break_through_a_kustomize_post_renderer() {
    let _ = helm(4);
    let patch = PATCH.lines().map(|l| format!("          {l}\n")).collect::<String>();
    let repo = fleet(&format!(
        "  postRenderers:\n  - kustomize:\n      patches:\n      - target: {{kind: ConfigMap}}\n        patch: |\n{patch}"
    ));
    let expected = oracle(&repo.path().join("charts/bytes"), "bytes", "data", PostRender::Patched);
    assert_eq!(expected["literal"]["labels"]["patched"], "yes", "post-rendered: {expected:#?}");
    // The anchors: what Helm 4 does around a post-renderer, unlike `helm template` alone.
    assert_eq!(expected["unterminated"]["data"]["conf"], "from values");
    assert_eq!(expected["keep"]["data"]["conf"], "kept\n\n\n");
    assert_eq!(expected["last"]["spec"]["zz"], "kept at the end\n", "{expected:#?}");
    assert_eq!(rendered(&repo, "data/bytes"), with_origin_labels(expected, "data", "bytes"));
}

#[test]
fn block_scalars_keep_their_last_line_break_in_an_argo_cd_application() {
    let _ = helm(4);
    const REMOTE: &str = "https://github.com/acme/bytes.git";
    let repo = Repo::new(REMOTE);
    write_chart(&repo, "charts/bytes");
    repo.write(
        "root.yaml",
        &format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: bytes\n  namespace: argocd\nspec:\n  \
             project: default\n  source:\n    repoURL: {REMOTE}\n    targetRevision: main\n    path: charts/bytes\n  \
             destination:\n    server: https://kubernetes.default.svc\n    namespace: apps\n"
        ),
    );
    repo.commit("base");
    let expected = oracle(&repo.path().join("charts/bytes"), "bytes", "apps", PostRender::No);
    // What `helm template` alone prints: a document trimmed, a template's end printed with one
    // line break.
    assert_eq!(expected["first"]["data"]["conf"], "before the separator\n");
    assert_eq!(expected["unterminated"]["data"]["conf"], "from values\n");
    assert_eq!(expected["keep"]["data"]["conf"], "kept\n");
    assert_eq!(rendered(&repo, "argocd/bytes"), expected);
}
