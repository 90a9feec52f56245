//! What Argo CD reads, exactly: the revision each source and git generator names, every manifest
//! file of a directory source (dot-files too), and no silent pass on files only units fluxplan
//! does not render read.

use crate::argocd::fleet;
use crate::fixture::{alert_codes, changes_of, edit, has_alert, plan_cli, plan_json, Repo};
use serde_json::Value;

fn pair(action: &str, id: &str) -> (String, String) {
    (action.to_string(), id.to_string())
}

const PRIVILEGED_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: miner
spec:
  hostPID: true
  containers:
    - name: miner
      image: evil/miner
      securityContext:
        privileged: true
";

/// A branch `evil` of the fleet (from its base commit) with `change` applied, then back on main.
fn evil_branch(repo: &Repo, change: impl FnOnce(&Repo)) {
    repo.git(&["checkout", "-q", "-b", "evil"]);
    change(repo);
    repo.commit("evil");
    repo.git(&["checkout", "-q", "main"]);
}

#[test]
fn a_target_revision_pin_plans_what_the_pinned_branch_holds_and_blocks() {
    let repo = fleet();
    evil_branch(&repo, |repo| {
        repo.remove("workloads/shop");
        repo.write("workloads/shop/pod.yaml", PRIVILEGED_POD);
    });
    edit(&repo, "apps/shop.yaml", "targetRevision: main", "targetRevision: evil");
    repo.commit("pin shop to evil");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert!(has_alert(&plan, "danger", "source-ref-pinned"), "{:?}", alert_codes(&plan));
    let shop = changes_of(&plan, "argocd/shop");
    assert!(shop.contains(&pair("create", "shop_miner__Pod")), "{shop:?}");
    // What the pin drops is pruned: Argo CD syncs the pinned tree.
    assert!(shop.iter().any(|(action, id)| action == "delete" && id.contains("shop-settings")), "{shop:?}");
}

#[test]
fn a_target_revision_naming_a_tag_or_commit_renders_it_and_a_range_is_external() {
    let repo = fleet();
    repo.git(&["tag", "v1.0.0"]);
    evil_branch(&repo, |repo| {
        repo.write("workloads/shop/pod.yaml", PRIVILEGED_POD);
    });
    let evil = repo.git(&["rev-parse", "evil"]).trim().to_string();
    let render = |revision: &str| {
        edit(&repo, "apps/shop.yaml", "targetRevision: main", &format!("targetRevision: '{revision}'"));
        repo.commit(revision);
        let render = repo.render(Some("HEAD"));
        repo.git(&["revert", "--no-edit", "HEAD"]);
        render
    };
    let ids = |r: &fluxplan::render::Render| r.find("argocd/shop").unwrap().ids();
    let pinned = render(&evil);
    assert!(ids(&pinned).contains(&"shop_miner__Pod".to_string()), "{:?}", ids(&pinned));
    let tagged = render("v1.0.0");
    assert!(
        !ids(&tagged).contains(&"shop_miner__Pod".to_string()),
        "the tag is the base: {:?}",
        ids(&tagged)
    );
    assert!(!ids(&tagged).is_empty());
    let short = render(&evil[..10]);
    assert!(ids(&short).contains(&"shop_miner__Pod".to_string()), "a truncated commit id is a commit");
    for unresolvable in [">=1.0.0", "no-such-branch", "-c", "evil~1", "HEAD@{1}"] {
        let render = render(unresolvable);
        let shop = render.find("argocd/shop").unwrap();
        assert_eq!(shop.status, fluxplan::render::Status::External, "{unresolvable}: {:?}", shop.ids());
        assert!(
            shop.warnings.iter().any(|w| w.contains("targetRevision")),
            "{unresolvable}: {:?}",
            shop.warnings
        );
    }
}

#[test]
fn an_applicationset_generator_revision_plans_what_that_branch_generates() {
    let repo = fleet();
    evil_branch(&repo, |repo| {
        repo.write("services/miner/pod.yaml", PRIVILEGED_POD);
    });
    edit(&repo, "apps/platform.yaml", "revision: main", "revision: evil");
    repo.commit("generate from evil");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert!(has_alert(&plan, "danger", "source-ref-pinned"), "{:?}", alert_codes(&plan));
    let platform = changes_of(&plan, "argocd/platform");
    assert!(platform.contains(&pair("create", "argocd_miner_argoproj.io_Application")), "{platform:?}");

    // The template's targetRevision: the generated Applications render that branch.
    let repo = fleet();
    evil_branch(&repo, |repo| {
        repo.write("services/api/pod.yaml", PRIVILEGED_POD);
    });
    edit(&repo, "apps/platform.yaml", "        targetRevision: main", "        targetRevision: evil");
    repo.commit("template pins evil");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    assert!(has_alert(&plan, "danger", "source-ref-pinned"), "{:?}", alert_codes(&plan));
    assert!(changes_of(&plan, "argocd/api").contains(&pair("create", "api_miner__Pod")));
}

#[test]
fn a_dot_file_of_a_directory_source_is_planned() {
    let repo = fleet();
    repo.write(
        "workloads/legacy/.backdoor.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: backdoor
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
  - kind: ServiceAccount
    name: default
    namespace: legacy
",
    );
    repo.write(
        "workloads/legacy/.hidden/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hidden\n",
    );
    repo.commit("dot files");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    let legacy = changes_of(&plan, "argocd/legacy");
    assert!(
        legacy.contains(&pair("create", "_backdoor_rbac.authorization.k8s.io_ClusterRoleBinding")),
        "{legacy:?}"
    );
    assert!(
        legacy.contains(&pair("create", "legacy_hidden__ConfigMap")),
        "recurse reads dot-directories: {legacy:?}"
    );
}

#[test]
fn directory_include_exclude_and_recurse_match_as_the_repo_server_matches() {
    let repo = fleet();
    let cm = |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n");
    repo.write("workloads/globs/top.yaml", &cm("top"));
    repo.write("workloads/globs/sub/deep.yaml", &cm("deep"));
    repo.write("workloads/globs/sub/skip.yml", &cm("skipped"));
    repo.write("workloads/globs/marked.yaml", &format!("# +argocd:skip-file-rendering\n{}", cm("marked")));
    repo.write("workloads/globs/values.yaml", "replicas: 3\nimage: web\n");
    repo.write("workloads/globs/lib.libsonnet", "{}");
    let app = |name: &str, directory: &str| {
        application(name, "workloads/globs", "globs", &format!("    directory:\n{directory}\n"))
    };
    // `*` crosses `/` (no separators); `**/*.yaml` needs a `/`; an exclude wins; a glob that
    // does not compile matches nothing.
    repo.write("apps/globs-star.yaml", &app("globs-star", "      recurse: true\n      include: '*.yaml'"));
    repo.write("apps/globs-deep.yaml", &app("globs-deep", "      recurse: true\n      include: '**/*.yaml'"));
    repo.write(
        "apps/globs-exclude.yaml",
        &app(
            "globs-exclude",
            "      recurse: true\n      include: '{top,sub/*}.y*ml'\n      exclude: 'sub/skip*'",
        ),
    );
    repo.write("apps/globs-flat.yaml", &app("globs-flat", "      recurse: false"));
    repo.write("apps/globs-broken.yaml", &app("globs-broken", "      recurse: true\n      include: '[top'"));
    repo.commit("globs");
    let render = repo.render(Some("HEAD"));
    let ids = |name: &str| render.find(&format!("argocd/{name}")).unwrap().ids();
    assert_eq!(ids("globs-star"), ["globs_deep__ConfigMap", "globs_top__ConfigMap"]);
    assert_eq!(ids("globs-deep"), ["globs_deep__ConfigMap"]);
    assert_eq!(ids("globs-exclude"), ["globs_deep__ConfigMap", "globs_top__ConfigMap"]);
    assert_eq!(ids("globs-flat"), ["globs_top__ConfigMap"], "values.yaml is not a manifest: ignored");
    assert_eq!(ids("globs-broken"), Vec::<String>::new());
}

/// The fleet plus an Application of `kind` (a Helm chart or a Jsonnet directory) at `path`.
fn fleet_with_external_app(name: &str, path: &str, files: &[(&str, &str)]) -> Repo {
    let repo = fleet();
    for (file, text) in files {
        repo.write(&format!("{path}/{file}"), text);
    }
    repo.write(&format!("apps/{name}.yaml"), &application(name, path, name, ""));
    repo.commit("base");
    repo
}

/// (file, units that read it as `Kind namespace/name`) of the plan's unplanned changes.
pub(crate) fn unplanned(plan: &Value) -> Vec<(String, Vec<String>)> {
    plan["unplanned_changes"]
        .as_array()
        .unwrap_or_else(|| panic!("no unplanned_changes: {plan:#}"))
        .iter()
        .map(|u| {
            let units = u["read_by"].as_array().unwrap().iter();
            let units =
                units.map(|r| format!("{} {}/{}", r["kind"], r["namespace"], r["name"]).replace('"', ""));
            (u["file"].as_str().unwrap().to_string(), units.collect())
        })
        .collect()
}

/// A Helm chart in this repository is rendered as the repo-server renders it: an edit of its
/// templates is planned, not left to a warning.
#[test]
fn an_argo_helm_chart_edit_is_planned() {
    let repo = fleet_with_external_app(
        "charts",
        "charts/web",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n"),
            ("values.yaml", "greeting: hello\n"),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-web\ndata:\n  greeting: {{ .Values.greeting }}\n",
            ),
        ],
    );
    repo.write("charts/web/values.yaml", "greeting: bonjour\n");
    repo.commit("edit the chart");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(plan["verdict"], "changes", "{plan:#}");
    assert_eq!(code, 1);
    let app = crate::fixture::kustomization_in(&plan, "argocd/charts");
    assert_eq!(app["status"], "changed", "{app:#}");
    let change = &app["changes"][0];
    assert_eq!((change["action"].as_str(), change["name"].as_str()), (Some("update"), Some("charts-web")));
    assert!(change["diff"].as_str().unwrap().contains("+  greeting: bonjour"), "{change}");
    assert!(unplanned(&plan).is_empty(), "{:?}", unplanned(&plan));
    let (markdown, _) = plan_cli(&repo, "HEAD~1", "HEAD", "markdown", &[]);
    insta::assert_snapshot!("argo_reach_helm_chart_edit_markdown", markdown);
}

#[test]
fn a_jsonnet_app_is_external_and_its_edit_is_a_change() {
    let repo = fleet_with_external_app(
        "jsonnet",
        "workloads/jsonnet",
        &[("app.jsonnet", "{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'j' } }\n")],
    );
    // Never a failing root: the plan of the unchanged fleet is not blocked by it.
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_ne!(code, 2, "{:?}", alert_codes(&plan));
    assert!(!alert_codes(&plan).iter().any(|(_, code)| code == "root-failed" || code == "build-failed"));
    let jsonnet = crate::fixture::kustomization_in(&plan, "argocd/jsonnet");
    assert_eq!(jsonnet["status"], "external", "{jsonnet:#}");
    repo.write(
        "workloads/jsonnet/app.jsonnet",
        "{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'k' } }\n",
    );
    repo.commit("edit jsonnet");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((plan["verdict"].as_str(), code), (Some("changes"), 1), "{plan:#}");
    assert_eq!(
        unplanned(&plan),
        [("workloads/jsonnet/app.jsonnet".to_string(), vec!["Application argocd/jsonnet".to_string()])]
    );
}

/// A Flux Kustomization on an OCIRepository this repository does not declare as itself, at a
/// directory of this repository (`./tenants`): the artifact is built elsewhere, so it reads none
/// of this repository's files; the changed file is listed as read by no unit, no warning. Near
/// miss: the fleet declares the OCIRepository as this repository's `./tenants` (CI pushes it,
/// `sources:` in .fluxplan.yaml): it is rendered from here and the change is planned, while a
/// file outside `tenants/` is still read by no unit.
#[test]
fn a_flux_kustomization_on_an_oci_source_reads_its_path_here_only_when_declared() {
    let edited = |declared: bool| {
        let repo = Repo::bootstrap("prod");
        // Declared, the artifact is `./tenants` and the Kustomization reads its top; undeclared,
        // the path has the directory's name, as an artifact built elsewhere may.
        let path = if declared { "./" } else { "./tenants" };
        repo.kustomization_of(
            "clusters/prod/tenants.yaml",
            "tenants",
            path,
            ("OCIRepository", "tenants"),
            "",
        );
        if declared {
            repo.write(
                ".fluxplan.yaml",
                "sources:\n- kind: OCIRepository\n  name: tenants\n  namespace: flux-system\n  path: tenants\n",
            );
        }
        repo.config_map("tenants/team-a.yaml", "team-a", "team-a");
        repo.commit("base");
        repo.config_map("tenants/team-a.yaml", "team-a-renamed", "team-a");
        // Outside the declared artifact's directory: read by no unit either way.
        repo.write("docs/notes.md", "notes\n");
        repo.commit("edit tenants");
        plan_json(&repo, "HEAD~1", "HEAD", &[])
    };
    let unread = |files: &[&str]| -> Vec<(String, Vec<String>)> {
        files.iter().map(|file| (file.to_string(), Vec::new())).collect()
    };
    let (plan, code) = edited(false);
    assert_eq!((plan["verdict"].as_str(), code), (Some("no-changes"), 0), "{plan:#}");
    assert!(!has_alert(&plan, "warning", "unplanned-change"), "{:?}", alert_codes(&plan));
    assert_eq!(unplanned(&plan), unread(&["docs/notes.md", "tenants/team-a.yaml"]));
    insta::assert_snapshot!(
        "argo_reach_oci_tenants_json",
        serde_json::to_string_pretty(&plan["unplanned_changes"]).unwrap()
    );

    let (plan, code) = edited(true);
    assert_eq!((plan["verdict"].as_str(), code), (Some("changes"), 1), "{plan:#}");
    // The Kustomization reads the top of the artifact, which is `tenants/` here, not the whole
    // repository.
    assert_eq!(unplanned(&plan), unread(&["docs/notes.md"]), "{plan:#}");
    assert!(plan.to_string().contains("team-a-renamed"), "{plan:#}");
}

#[test]
fn a_readme_only_change_stays_no_changes_but_is_listed() {
    let repo = fleet();
    repo.write("README.md", "# the fleet\n");
    repo.commit("docs");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((plan["verdict"].as_str(), code), (Some("no-changes"), 0), "{plan:#}");
    assert_eq!(unplanned(&plan), [("README.md".to_string(), Vec::<String>::new())]);
    assert!(!has_alert(&plan, "warning", "unplanned-change"));
    // A file a planned Application reads is planned, not listed.
    edit(&repo, "workloads/shop/shop.yaml", "apiVersion", "# a comment\napiVersion");
    repo.write("docs/notes.md", "notes\n");
    repo.commit("more docs");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((plan["verdict"].as_str(), code), (Some("no-changes"), 0), "{plan:#}");
    assert_eq!(unplanned(&plan), [("docs/notes.md".to_string(), Vec::<String>::new())]);
}

/// Exports leave symlinks out (Flux never archives them), but the repo-server follows a symlinked
/// manifest inside the repository: a pull request adding one under an Argo CD directory source
/// plans what it leads to, and so does one that changes only what it leads to. One leading out
/// of the repository fails the Application, as the repo-server refuses it.
#[test]
fn a_symlinked_manifest_is_planned_as_the_repo_server_reads_it() {
    let repo = fleet();
    repo.write("elsewhere/binding.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: linked\n");
    repo.commit("a manifest outside any app");
    std::os::unix::fs::symlink(
        "../../elsewhere/binding.yaml",
        repo.path().join("workloads/legacy/linked.yaml"),
    )
    .unwrap();
    repo.commit("a symlink into the legacy app");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 1, "{plan:#}");
    assert!(
        changes_of(&plan, "argocd/legacy").contains(&pair("create", "legacy_linked__ConfigMap")),
        "{plan:#}"
    );

    // A later pull request changes only what the symlink points to.
    repo.write(
        "elsewhere/binding.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: backdoor\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\n",
    );
    repo.commit("the symlink's target becomes a cluster-admin binding");
    let (plan, _) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    let legacy = changes_of(&plan, "argocd/legacy");
    assert!(
        legacy.contains(&pair("create", "_backdoor_rbac.authorization.k8s.io_ClusterRoleBinding")),
        "{legacy:?}"
    );
    // The legacy Application does not prune: the ConfigMap it no longer renders is orphaned.
    assert!(legacy.contains(&pair("orphan", "legacy_linked__ConfigMap")), "{legacy:?}");
    assert_eq!(plan["unplanned_changes"], serde_json::json!([]), "{plan:#}");

    // Out of the repository: refused, as the repo-server refuses it.
    std::os::unix::fs::symlink("../../../../etc/passwd", repo.path().join("workloads/legacy/out.yaml"))
        .unwrap();
    repo.commit("a symlink out of the repository");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{plan:#}");
    let legacy = fluxplan_unit(&plan, "argocd/legacy");
    assert!(legacy["error"]["message"].as_str().unwrap().contains("out of the repository"), "{legacy}");
}

fn fluxplan_unit<'a>(plan: &'a Value, reference: &str) -> &'a Value {
    crate::fixture::kustomization_in(plan, reference)
}

/// A revision this repository cannot resolve hides what will sync: the unit is not planned, and
/// the plan says so as a warning (`unknown-revision`), never as an info note.
#[test]
fn an_unresolvable_target_revision_is_a_warning() {
    let repo = fleet();
    edit(&repo, "apps/shop.yaml", "targetRevision: main", "targetRevision: '>=1.0.0'");
    repo.commit("a semver range");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "the revision changed: source-ref-pinned blocks; {plan:#}");
    assert!(has_alert(&plan, "warning", "unknown-revision"), "{:?}", alert_codes(&plan));
    assert!(!has_alert(&plan, "info", "external-source"), "{:?}", alert_codes(&plan));
}

/// Applications each rendering the next (app of apps of apps ...), 150 deep: stopped at
/// fluxplan's nesting limit with a `source-limit`.
#[test]
fn a_chain_of_applications_deeper_than_the_limit_is_a_source_limit() {
    const DEPTH: usize = 150;
    let repo = fleet();
    let app = |i: usize| application(&format!("a{i}"), &format!("chain/a{i}"), "chain", "");
    repo.write("apps/chain.yaml", &app(0));
    for i in 0..DEPTH {
        repo.write(&format!("chain/a{i}/next.yaml"), &app(i + 1));
    }
    repo.commit("a chain of Applications");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!(code, 2, "{:?}", alert_codes(&plan));
    let limit = plan["alerts"].as_array().unwrap().iter().find(|a| a["code"] == "source-limit");
    let limit = limit.unwrap_or_else(|| panic!("{:?}", alert_codes(&plan)));
    assert!(limit["message"].as_str().unwrap().contains("nest more than 100 levels"), "{limit}");
}

/// An Application the pull request adds that reads another branch: what it syncs after the merge
/// is whatever that branch holds then, so the plan warns (`pinned-revision`); one reading the
/// branch merged into does not.
#[test]
fn a_new_application_reading_another_branch_is_a_warning() {
    let repo = fleet();
    evil_branch(&repo, |repo| {
        repo.write("workloads/shop/pod.yaml", PRIVILEGED_POD);
    });
    repo.git(&["checkout", "-q", "-b", "change"]);
    let shop = std::fs::read_to_string(repo.path().join("apps/shop.yaml")).unwrap();
    let copy = |name: &str, revision: &str| {
        shop.replace("name: shop", &format!("name: {name}"))
            .replace("targetRevision: main", &format!("targetRevision: {revision}"))
    };
    repo.write("apps/pinned.yaml", &copy("pinned", "evil"));
    repo.write("apps/follows.yaml", &copy("follows", "main"));
    repo.commit("two new Applications");
    let (plan, code) = plan_json(&repo, "main", "change", &[]);
    assert_ne!(code, 0, "{plan:#}");
    let pinned: Vec<&Value> =
        plan["alerts"].as_array().unwrap().iter().filter(|a| a["code"] == "pinned-revision").collect();
    assert_eq!(pinned.len(), 1, "{:?}", alert_codes(&plan));
    assert_eq!(pinned[0]["severity"], "warning");
    assert_eq!(pinned[0]["kustomization"], "argocd/pinned", "{}", pinned[0]);
}

#[test]
fn a_hostile_nested_brace_include_fails_the_unit_and_never_crashes_the_planner() {
    let repo = fleet();
    // 1,000,000 `{`: parsing it recursively overflowed the stack (exit 134).
    let hostile = "{".repeat(1_000_000);
    edit(&repo, "apps/legacy.yaml", "exclude: '*.md'", &format!("include: '{hostile}'"));
    repo.commit("hostile include");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    // Over fluxplan's limit, not a guess: what the repo-server reads is not known here.
    assert!(has_alert(&plan, "danger", "source-limit"), "{:?}", alert_codes(&plan));
    assert_eq!((plan["verdict"].as_str(), code), (Some("blocked"), 2));
    let render = repo.render(Some("HEAD"));
    let message = crate::fixture::error_of(&render, "argocd/legacy", "source-limit");
    assert!(message.contains("directory.include") && message.contains("4096"), "{message}");

    // Brace alternatives still match, nested ones too.
    let repo = fleet();
    edit(&repo, "apps/legacy.yaml", "exclude: '*.md'", "include: '{{nothing,*deploy*},{x,y}}.yaml'");
    repo.commit("brace include");
    let render = repo.render(Some("HEAD"));
    let ids = render.find("argocd/legacy").unwrap().ids();
    assert!(!ids.is_empty() && ids.iter().all(|id| id.ends_with("_Deployment")), "{ids:?}");
}

#[test]
fn an_applicationset_directory_exclude_matches_as_go_path_match() {
    let repo = fleet();
    repo.write(
        "services/team/api/service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: api\nspec:\n  ports:\n    - port: 8080\n",
    );
    edit(
        &repo,
        "apps/platform.yaml",
        "          - path: services/*\n",
        "          - path: services/*/*\n          - path: services/*-old\n            exclude: true\n",
    );
    repo.commit("nested layout");
    // `services/*-old` does not match `services/team/evil-old` (`*` stops at `/`): Argo CD
    // generates `evil-old`.
    repo.write("services/team/evil-old/pod.yaml", PRIVILEGED_POD);
    repo.commit("evil");
    let (plan, code) = plan_json(&repo, "HEAD~1", "HEAD", &[]);
    assert_eq!((plan["verdict"].as_str(), code), (Some("changes"), 1), "{plan:#}");
    let platform = changes_of(&plan, "argocd/platform");
    assert!(platform.contains(&pair("create", "argocd_evil-old_argoproj.io_Application")), "{platform:?}");
    assert!(
        changes_of(&plan, "argocd/evil-old").contains(&pair("create", "evil-old_miner__Pod")),
        "{plan:#}"
    );

    // `services/*` names the directories right under services/, never deeper ones.
    let repo = fleet();
    repo.write("services/api/extra/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n");
    repo.commit("a sub-directory");
    let render = repo.render(Some("HEAD"));
    assert!(render.find("argocd/extra").is_none(), "services/* does not reach services/api/extra");
}

/// An Application of this repository named `name` reading `path`, deploying to `namespace`;
/// `source` is more of its `spec.source` (lines indented by four spaces, each ending a line).
fn application(name: &str, path: &str, namespace: &str, source: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\n\
         spec:\n  project: default\n  source:\n    repoURL: https://github.com/acme/argocd-fleet.git\n    \
         targetRevision: main\n    path: {path}\n{source}  destination:\n    server: https://kubernetes.default.svc\n    \
         namespace: {namespace}\n"
    )
}
