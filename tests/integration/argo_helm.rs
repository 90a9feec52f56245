//! Argo CD Helm sources, rendered with the same Helm as HelmReleases: an app-of-apps that is
//! itself a chart (the shape of argoproj/argocd-example-apps' `apps/`), apps that are charts of
//! this repository with value files, `$ref` values of a multi-source Application, parameters,
//! and a chart whose dependencies are not vendored (external, as the repo-server fetches them).

use crate::fixture::{alert_codes, changes_of, edit, helm, plan_json, Repo};

const REMOTE: &str = "https://github.com/acme/argo-charts.git";

const APPLICATIONS_TEMPLATE: &str = r#"{{- range .Values.applications }}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: {{ .name }}
  namespace: argocd
  finalizers: [resources-finalizer.argocd.argoproj.io]
spec:
  project: default
  destination:
    server: https://kubernetes.default.svc
    namespace: {{ .name }}
  syncPolicy:
    automated: {prune: true}
  {{- if .sources }}
  sources:
{{ toYaml .sources | indent 4 }}
  {{- else }}
  source:
    repoURL: {{ $.Values.repoURL }}
    targetRevision: main
    path: {{ .path }}
    {{- with .helm }}
    helm:
{{ toYaml . | indent 6 }}
    {{- end }}
  {{- end }}
{{- end }}
"#;

const GUESTBOOK_DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-guestbook
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels: {app: guestbook}
  template:
    metadata:
      labels: {app: guestbook}
    spec:
      containers:
      - name: guestbook
        image: \"guestbook:{{ .Values.tag }}\"
";

/// The root Application `argocd/apps`: the path `apps` of `remote` at `main`, synced with prune.
pub(crate) fn root_application(remote: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: apps\n  namespace: argocd\nspec:\n  \
         project: default\n  source:\n    repoURL: {remote}\n    targetRevision: main\n    path: apps\n  destination:\n    \
         server: https://kubernetes.default.svc\n    namespace: argocd\n  syncPolicy:\n    automated: {{prune: true}}\n"
    )
}

fn fleet() -> Repo {
    let repo = Repo::new(REMOTE);
    repo.write("root.yaml", &root_application(REMOTE));
    repo.write("apps/Chart.yaml", "apiVersion: v2\nname: applications\nversion: 0.1.0\n");
    repo.write("apps/templates/applications.yaml", APPLICATIONS_TEMPLATE);
    repo.write(
        "apps/values.yaml",
        &format!(
            "repoURL: {REMOTE}\napplications:\n- name: guestbook\n  path: guestbook\n  helm:\n    releaseName: gb\n    \
             valueFiles: [values-production.yaml]\n    parameters:\n    - {{name: tag, value: \"1.2\", forceString: true}}\n\
             - name: shared\n  sources:\n  - {{repoURL: {REMOTE}, targetRevision: main, path: guestbook, helm: {{valueFiles: [$values/env/shared.yaml]}}}}\n  \
             - {{repoURL: {REMOTE}, targetRevision: main, ref: values}}\n\
             - name: deps\n  path: deps\n"
        ),
    );
    repo.write("guestbook/Chart.yaml", "apiVersion: v2\nname: guestbook\nversion: 0.1.0\n");
    repo.write("guestbook/values.yaml", "replicaCount: 1\ntag: latest\n");
    repo.write("guestbook/values-production.yaml", "replicaCount: 3\n");
    repo.write("guestbook/templates/deployment.yaml", GUESTBOOK_DEPLOYMENT);
    repo.write("env/shared.yaml", "replicaCount: 5\n");
    repo.write(
        "deps/Chart.yaml",
        "apiVersion: v2\nname: deps\nversion: 0.1.0\ndependencies:\n- name: redis\n  version: 1.x\n  repository: https://charts.example.com\n",
    );
    repo.write("deps/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deps\n");
    repo.commit("base");
    repo
}

#[test]
fn an_app_of_apps_chart_and_its_chart_apps_are_rendered_as_the_repo_server_renders_them() {
    let _ = helm(4);
    let repo = fleet();
    let render = repo.render(Some("HEAD"));
    let ids =
        |reference: &str| render.find(reference).unwrap_or_else(|| panic!("{reference} not rendered")).ids();
    // The app-of-apps chart renders the Applications.
    assert_eq!(
        ids("argocd/apps"),
        [
            "argocd_deps_argoproj.io_Application",
            "argocd_guestbook_argoproj.io_Application",
            "argocd_shared_argoproj.io_Application"
        ]
    );
    // releaseName, a value file of the chart and a forced-string parameter.
    let guestbook = render.find("argocd/guestbook").unwrap();
    let deployment = &guestbook.objects.iter().find(|o| o.object["kind"] == "Deployment").unwrap().object;
    assert_eq!(deployment["metadata"]["name"], "gb-guestbook");
    assert_eq!(deployment["metadata"]["namespace"], "guestbook");
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(deployment["spec"]["template"]["spec"]["containers"][0]["image"], "guestbook:1.2");
    // The release is named after the Application; values come from the `$values` source.
    let shared = render.find("argocd/shared").unwrap();
    let deployment = &shared.objects.iter().find(|o| o.object["kind"] == "Deployment").unwrap().object;
    assert_eq!(deployment["metadata"]["name"], "shared-guestbook");
    assert_eq!(deployment["spec"]["replicas"], 5);
    // Dependencies the repo-server would fetch: external, with the reason.
    let deps = render.find("argocd/deps").unwrap();
    assert_eq!(deps.status, fluxplan::render::Status::External, "{:?}", deps.error);
    assert!(deps.warnings[0].contains("charts/"), "{:?}", deps.warnings);
}

#[test]
fn a_value_file_change_plans_the_charts_update() {
    let _ = helm(4);
    let repo = fleet();
    edit(&repo, "env/shared.yaml", "replicaCount: 5", "replicaCount: 7");
    repo.commit("more replicas");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{:?}", alert_codes(&plan));
    assert_eq!(
        changes_of(&plan, "argocd/shared"),
        [("update".to_string(), "shared_shared-guestbook_apps_Deployment".to_string())]
    );
    assert!(changes_of(&plan, "argocd/guestbook").is_empty());
}
