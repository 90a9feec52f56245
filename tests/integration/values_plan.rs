//! Values a pull request writes, planned as the controllers build them: a `targetPath` value
//! holding Helm's `--set` syntax, a merge key in a `valuesFrom` document, Argo CD parameters with
//! commas and braces, and a merge key in an Argo CD values block. Each attack opens a chart's
//! gate (a ClusterRoleBinding to cluster-admin); each near miss must not. Where the question is
//! what Helm makes of the values, the pinned `helm template` answers it.

use crate::fixture::{helm, plan_json, sorted_changes, unit_in, Repo};
use std::process::Command;

/// A chart whose ClusterRoleBinding to cluster-admin exists only when `.Values.gate.open`.
fn write_gate_chart(repo: &Repo, dir: &str) {
    repo.write(&format!("{dir}/Chart.yaml"), "apiVersion: v2\nname: gate\nversion: 0.1.0\n");
    repo.write(&format!("{dir}/values.yaml"), "x: none\n");
    repo.write(
        &format!("{dir}/templates/config.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gate-config\ndata:\n  x: {{ .Values.x | toJson | quote }}\n",
    );
    repo.write(
        &format!("{dir}/templates/gate.yaml"),
        "{{- if .Values.gate }}{{- if .Values.gate.open }}\napiVersion: rbac.authorization.k8s.io/v1\n\
         kind: ClusterRoleBinding\nmetadata:\n  name: gate-admin\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  \
         kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: ServiceAccount\n  name: default\n  namespace: data\n\
         {{- end }}{{- end }}\n",
    );
    // Open only to an int64, which Helm's strvals makes and a values document never does.
    repo.write(
        &format!("{dir}/templates/int-gate.yaml"),
        "{{- if kindIs \"int64\" .Values.level }}\napiVersion: rbac.authorization.k8s.io/v1\n\
         kind: ClusterRoleBinding\nmetadata:\n  name: int-admin\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  \
         kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: ServiceAccount\n  name: default\n  namespace: data\n\
         {{- end }}\n",
    );
}

const INT_GATE: &str = "_int-admin_rbac.authorization.k8s.io_ClusterRoleBinding";

const GATE: &str = "_gate-admin_rbac.authorization.k8s.io_ClusterRoleBinding";

/// A HelmRelease `data/gate` whose values come from the ConfigMap `data/gate-values`.
fn flux_fleet(values_from: &str, config_map_data: &str) -> Repo {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/gate.yaml", "gate", "./apps/gate", "");
    write_gate_chart(&repo, "charts/gate");
    repo.write(
        "apps/gate/release.yaml",
        &format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: gate\n  namespace: data\nspec:\n  \
             interval: 10m\n  chart:\n    spec:\n      chart: ./charts/gate\n      sourceRef:\n        kind: GitRepository\n        \
             name: flux-system\n        namespace: flux-system\n  valuesFrom:\n{values_from}"
        ),
    );
    repo.write(
        "apps/gate/values.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gate-values\n  namespace: data\ndata:\n{config_map_data}"),
    );
    repo.commit("base");
    repo
}

/// The ConfigMap's data changed to `data`, committed; the release's planned changes.
fn plan_with_data(repo: &Repo, data: &str) -> Vec<(String, String)> {
    repo.write(
        "apps/gate/values.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gate-values\n  namespace: data\ndata:\n{data}"),
    );
    repo.commit("values");
    let (plan, _) = plan_json(repo, "HEAD~1", "HEAD", &[]);
    sorted_changes(unit_in(&plan, "HelmRelease", "data/gate"))
}

const TARGET_PATH: &str = "  - kind: ConfigMap\n    name: gate-values\n    valuesKey: x\n    targetPath: x\n";

#[test]
fn a_comma_in_a_target_path_value_opens_the_gate_and_the_plan_shows_it() {
    let _ = helm(4);
    let repo = flux_fleet(TARGET_PATH, "  x: plain\n");
    let changes = plan_with_data(&repo, "  x: plain,gate.open=true\n");
    assert!(changes.contains(&("create".to_string(), GATE.to_string())), "{changes:?}");
}

#[test]
fn an_escaped_comma_in_a_target_path_value_keeps_the_gate_shut() {
    let _ = helm(4);
    let repo = flux_fleet(TARGET_PATH, "  x: plain\n");
    let changes = plan_with_data(&repo, "  x: 'plain\\,gate.open=true'\n");
    assert!(!changes.iter().any(|(_, id)| id == GATE), "{changes:?}");
    assert!(
        changes.iter().any(|(action, id)| action == "update" && id.contains("gate-config")),
        "{changes:?}"
    );
}

#[test]
fn a_literal_target_path_keeps_the_comma_in_the_value() {
    let _ = helm(4);
    let literal = format!("{TARGET_PATH}    literal: true\n");
    let repo = flux_fleet(&literal, "  x: plain\n");
    let changes = plan_with_data(&repo, "  x: plain,gate.open=true\n");
    assert!(!changes.iter().any(|(_, id)| id == GATE), "{changes:?}");
}

/// `.Values` of `helm template -f FILE` of the gate chart: whether the pinned Helm opens the gate
/// for this values document.
fn helm_opens_the_gate(document: &str) -> bool {
    let repo = Repo::bootstrap("scratch");
    write_gate_chart(&repo, "chart");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), document).unwrap();
    let out = Command::new(helm(4).program())
        .args(["template", "r"])
        .arg(repo.path().join("chart"))
        .arg("-f")
        .arg(file.path())
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).contains("name: gate-admin")
}

const MERGED: &str = "open: &open {open: true}\ngate:\n  <<: *open\n";
const QUOTED: &str = "open: &open {open: true}\ngate:\n  \"<<\": *open\n";

#[test]
fn a_merge_key_in_a_values_from_document_is_planned_as_helm_reads_it() {
    assert!(helm_opens_the_gate(MERGED) && !helm_opens_the_gate(QUOTED));
    let document = "  - kind: ConfigMap\n    name: gate-values\n";
    let indent = |text: &str| text.lines().map(|l| format!("    {l}\n")).collect::<String>();
    let repo = flux_fleet(document, "  values.yaml: |\n    x: 1\n");
    let changes = plan_with_data(&repo, &format!("  values.yaml: |\n{}", indent(MERGED)));
    assert!(changes.contains(&("create".to_string(), GATE.to_string())), "{changes:?}");
    // Near miss: a quoted "<<" is a plain key, as Helm reads it.
    let repo = flux_fleet(document, "  values.yaml: |\n    x: 1\n");
    let changes = plan_with_data(&repo, &format!("  values.yaml: |\n{}", indent(QUOTED)));
    assert!(!changes.iter().any(|(_, id)| id == GATE), "{changes:?}");
}

const REMOTE: &str = "https://github.com/acme/argo-values.git";

/// Whether fluxplan renders the gate's binding for an Argo CD Application `argocd/gate` of the
/// chart `gate` with these `helm` fields (YAML lines, indented 6).
fn argo_opens_the_gate(helm_fields: &str) -> bool {
    argo_renders(helm_fields, "gate-admin")
}

/// Whether fluxplan renders the gate chart's object `name` for those `helm` fields.
fn argo_renders(helm_fields: &str, name: &str) -> bool {
    let repo = Repo::new(REMOTE);
    repo.write("root.yaml", &crate::argo_helm::root_application(REMOTE));
    write_gate_chart(&repo, "gate");
    repo.write(
        "apps/gate.yaml",
        &format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: gate\n  namespace: argocd\nspec:\n  \
             project: default\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: data\n  source:\n    \
             repoURL: {REMOTE}\n    targetRevision: main\n    path: gate\n    helm:\n{helm_fields}"
        ),
    );
    repo.commit("base");
    let render = repo.render(Some("HEAD"));
    let unit = render.find("argocd/gate").unwrap_or_else(|| panic!("argocd/gate not rendered"));
    assert_ne!(unit.status, fluxplan::render::Status::External, "{helm_fields}: {:?}", unit.warnings);
    assert!(
        unit.objects.iter().any(|o| o.object["metadata"]["name"] == "gate-config"),
        "{helm_fields}: {:?}",
        unit.error
    );
    unit.objects.iter().any(|o| o.object["metadata"]["name"] == name)
}

/// Whether the pinned Helm opens the gate for these `--set` arguments (the strings Argo CD's
/// `cleanSetParameters` builds, written out by hand from `util/helm/cmd.go`).
fn helm_set_opens_the_gate(args: &[&str]) -> bool {
    helm_set_opens(args, "gate-admin")
}

#[test]
fn argo_cd_parameters_are_escaped_as_the_repo_server_escapes_them() {
    // A comma in a value: Argo CD escapes it, so it is part of the value.
    assert!(!helm_set_opens_the_gate(&["--set", "x=plain\\,gate.open=true"]));
    assert!(!argo_opens_the_gate("      parameters:\n      - {name: x, value: 'plain,gate.open=true'}\n"));
    // A value in braces is left alone: a list, then more assignments.
    assert!(helm_set_opens_the_gate(&["--set", "x={a},gate.open=true,b={c}"]));
    assert!(argo_opens_the_gate("      parameters:\n      - {name: x, value: '{a},gate.open=true,b={c}'}\n"));
    // An escaped backslash before the comma: Argo CD does not escape that comma.
    assert!(helm_set_opens_the_gate(&["--set", "x=plain\\\\,gate.open=true"]));
    assert!(argo_opens_the_gate("      parameters:\n      - {name: x, value: 'plain\\\\,gate.open=true'}\n"));
    // The name is never escaped.
    assert!(argo_opens_the_gate("      parameters:\n      - {name: 'gate.open=true,x', value: '1'}\n"));
    // forceString: --set-string, the value a string ("true" is still truthy; "false" too).
    assert!(helm_set_opens_the_gate(&["--set-string", "gate.open=false"]));
    assert!(argo_opens_the_gate(
        "      parameters:\n      - {name: gate.open, value: 'false', forceString: true}\n"
    ));
    assert!(!argo_opens_the_gate("      parameters:\n      - {name: gate.open, value: 'false'}\n"));
}

#[test]
fn a_merge_key_in_an_argo_cd_values_block_is_planned_as_helm_reads_it() {
    assert!(helm_opens_the_gate(MERGED) && !helm_opens_the_gate(QUOTED));
    let block = |document: &str| {
        format!("      values: |\n{}", document.lines().map(|l| format!("        {l}\n")).collect::<String>())
    };
    assert!(argo_opens_the_gate(&block(MERGED)));
    assert!(!argo_opens_the_gate(&block(QUOTED)));
}

/// A number a `targetPath` sets is Go's `int64` for the controller (strvals), one in a values
/// document a `float64`: a chart that tells them apart is planned as the controller renders it.
/// The oracle is the pinned Helm: `--set level=1` opens the int64 gate, `-f` with `level: 1` not.
#[test]
fn a_target_path_number_is_an_int64_as_in_the_controller() {
    let _ = helm(4);
    assert!(helm_set_opens(&["--set", "level=1"], "int-admin"));
    assert!(!helm_set_opens(&["--set-json", "level=1"], "int-admin"));
    let level = "  - kind: ConfigMap\n    name: gate-values\n    valuesKey: level\n    targetPath: level\n";
    let repo = flux_fleet(level, "  level: none\n");
    let changes = plan_with_data(&repo, "  level: \"1\"\n");
    assert!(changes.contains(&("create".to_string(), INT_GATE.to_string())), "{changes:?}");
    // The near miss: the same number from a values document (valuesFrom without targetPath).
    let document = "  - kind: ConfigMap\n    name: gate-values\n    valuesKey: values.yaml\n";
    let repo = flux_fleet(document, "  values.yaml: \"x: a\"\n");
    let changes = plan_with_data(&repo, "  values.yaml: \"level: 1\"\n");
    assert!(!changes.iter().any(|(_, id)| id == INT_GATE), "{changes:?}");
    assert!(changes.iter().any(|(_, id)| id.contains("gate-config")) || changes.is_empty(), "{changes:?}");
}

/// Argo CD's parameters are `--set`: a number there is an `int64`; in `values` a `float64`.
#[test]
fn an_argo_cd_parameter_number_is_an_int64_as_in_the_repo_server() {
    let _ = helm(4);
    let opens = |fields: &str| argo_renders(fields, "int-admin");
    assert!(opens("      parameters:\n      - {name: level, value: '7'}\n"));
    assert!(!opens("      values: |\n        level: 7\n"));
    assert!(!opens("      parameters:\n      - {name: level, value: '7', forceString: true}\n"));
}

/// Whether the pinned Helm renders the object `name` of the gate chart for these arguments.
fn helm_set_opens(args: &[&str], name: &str) -> bool {
    let repo = Repo::bootstrap("scratch");
    write_gate_chart(&repo, "chart");
    let out = Command::new(helm(4).program())
        .args(["template", "r"])
        .arg(repo.path().join("chart"))
        .args(args)
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).contains(&format!("name: {name}"))
}

/// The `int64`s go to helm as `--set` arguments: a values text that makes more of them than a
/// command line holds is a `source-limit`, named, never a crash or a silent float. The near miss,
/// a thousand numbers, renders.
#[test]
fn too_many_set_numbers_are_a_source_limit() {
    let _ = helm(4);
    let list = |n: usize| (1..=n).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    let repo = flux_fleet(TARGET_PATH, "  x: plain\n");
    repo.write(
        "apps/gate/values.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gate-values\n  namespace: data\ndata:\n  x: '{{{}}}'\n",
            list(1000)
        ),
    );
    repo.commit("a thousand numbers");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(unit_in(&plan, "HelmRelease", "data/gate")["status"], "changed", "{plan:#}");
    assert!(!crate::fixture::alert_codes(&plan).iter().any(|(_, code)| code == "source-limit"), "{plan:#}");
    let changes = plan_with_data(&repo, &format!("  x: '{{{}}}'\n", list(60_000)));
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let release = unit_in(&plan, "HelmRelease", "data/gate");
    assert!(release["error"].to_string().contains("--set syntax"), "{release:#} {changes:?}");
    assert!(crate::fixture::alert_codes(&plan).iter().any(|(_, code)| code == "source-limit"), "{plan:#}");
}
