//! Pull requests written to hurt the planner: each tries to read the planner's environment or
//! files, reach its network, or exhaust it. Every one must be refused by name, and nothing of
//! the planner's (its environment, /etc/passwd) may reach the plan, its errors or the cache.

use crate::fixture::{
    cache_entries, fluxplan_bin, process_running, stand_in_kustomize, wait_for, Canary, Repo, WAIT,
};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Planted in the planner's environment as its secrets; must never come out.
const CANARY: &str = "fluxplan-canary-5b7e0c";
/// The first line of /etc/passwd on any Linux.
const PASSWD: &str = "root:x:0:0";

/// A fleet whose `apps` Kustomization (path ./apps) the hostile head rewrites.
struct Hostile {
    repo: Repo,
    base: String,
    head: String,
}

fn hostile(files: &[(&str, &str)]) -> Hostile {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.config_map("apps/cm.yaml", "app", "default");
    let base = repo.commit("base");
    for (path, content) in files {
        repo.write(path, content);
    }
    let head = repo.commit("hostile head");
    Hostile { repo, base, head }
}

/// `../` enough times to climb out of any scratch directory.
fn climb() -> String {
    "../".repeat(14)
}

struct Outcome {
    plan: Value,
    stdout: String,
    stderr: String,
    code: i32,
    cache: tempfile::TempDir,
}

impl Hostile {
    /// `fluxplan plan --format json` with the planner's secrets in its environment.
    fn plan(&self, extra: &[&str]) -> Outcome {
        self.plan_with_env(extra, &[])
    }

    /// Planned with a new cache, again with that cache warm, and without a cache: a cache never
    /// answers for another tree, so the three plans are the same (the first is returned). Plans
    /// stopped by their time limit are planned once.
    fn plan_with_env(&self, extra: &[&str], env: &[(&str, &str)]) -> Outcome {
        let cache = tempfile::tempdir().unwrap();
        let cache_dir = cache.path().to_str().unwrap().to_string();
        let cached = ["--cache-dir", &cache_dir];
        let outcome = self.plan_once(&[&cached[..], extra].concat(), env, cache);
        if !extra.iter().any(|a| a.contains("timeout")) {
            let warm = self.plan_once(&[&cached[..], extra].concat(), env, tempfile::tempdir().unwrap());
            let uncached =
                self.plan_once(&[&["--no-cache"][..], extra].concat(), env, tempfile::tempdir().unwrap());
            for (run, other) in [("warm", &warm), ("--no-cache", &uncached)] {
                assert_eq!(
                    (other.code, &other.plan),
                    (outcome.code, &outcome.plan),
                    "the plan with a {run} cache differs from the first"
                );
            }
        }
        outcome
    }

    fn plan_once(&self, args: &[&str], env: &[(&str, &str)], cache: tempfile::TempDir) -> Outcome {
        let out = Command::new(fluxplan_bin())
            .args(["plan", "--format", "json", "--base", &self.base, "--head", &self.head, "--repo"])
            .arg(self.repo.path())
            .args(args)
            .env("FLUXPLAN_GITHUB_TOKEN", CANARY)
            .env("FLUXPLAN_GITHUB_WEBHOOK_SECRET", CANARY)
            .env("DATABASE_URL", format!("postgres://fluxplan:{CANARY}@db/fluxplan"))
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let plan = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        Outcome {
            plan,
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into(),
            code: out.status.code().unwrap(),
            cache,
        }
    }
}

impl Outcome {
    /// Nothing of the planner's reached the output, its errors or the cache.
    fn assert_nothing_leaked(&self) {
        for (what, text) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            assert!(!text.contains(CANARY), "the planner's environment reached {what}:\n{text}");
            assert!(!text.contains(PASSWD), "/etc/passwd reached {what}:\n{text}");
        }
        let files = walk(self.cache.path()).into_iter().map(|entry| {
            (
                entry.display().to_string(),
                String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned(),
            )
        });
        let entries =
            cache_entries(self.cache.path()).into_iter().map(|(key, text)| (format!("entry {key}"), text));
        for (entry, text) in files.chain(entries) {
            assert!(!text.contains(CANARY), "the planner's environment reached the cache: {entry}");
            assert!(!text.contains(PASSWD), "/etc/passwd reached the cache: {entry}");
        }
    }

    /// The error of `flux-system/apps`: its code and message.
    fn apps_error(&self) -> (String, String) {
        let apps = self.plan["kustomizations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == "apps")
            .unwrap_or_else(|| panic!("apps not in the plan: {}", self.stdout));
        let error = &apps["error"];
        assert!(error.is_object(), "apps did not fail: {apps}");
        (error["code"].as_str().unwrap().into(), error["message"].as_str().unwrap().into())
    }

    /// Refused as `code`, naming `reference`, with the merge blocked.
    fn assert_refused(&self, code: &str, reference: &str) {
        assert!(matches!(self.code, 2 | 3), "exit {}: {}", self.code, self.stdout);
        let (actual, message) = self.apps_error();
        assert_eq!(actual, code, "{message}");
        assert!(message.contains(reference), "the message does not name '{reference}': {message}");
        self.assert_nothing_leaked();
    }

    fn alerts(&self, code: &str) -> Vec<&Value> {
        self.plan["alerts"].as_array().unwrap().iter().filter(|a| a["code"] == code).collect()
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

fn kustomization(body: &str) -> String {
    format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- cm.yaml\n{body}")
}

#[test]
fn a_generator_reading_the_planners_environment_is_refused() {
    let reference = format!("{}proc/self/environ", climb());
    let h = hostile(&[(
        "apps/kustomization.yaml",
        &kustomization(&format!(
            "configMapGenerator:\n- name: leak\n  namespace: default\n  files:\n  - environ={reference}\n"
        )),
    )]);
    h.plan(&[]).assert_refused("invalid-source", &reference);
}

#[test]
fn a_resource_outside_the_source_is_refused() {
    let reference = format!("{}etc/passwd", climb());
    let h = hostile(&[("apps/kustomization.yaml", &kustomization(&format!("- {reference}\n")))]);
    h.plan(&[]).assert_refused("invalid-source", &reference);
}

#[test]
fn absolute_paths_and_case_tricks_are_refused() {
    // kustomize matches field names without regard to case.
    let h = hostile(&[(
        "apps/kustomization.yaml",
        &kustomization(
            "SecretGenerator:\n- name: leak\n  namespace: default\n  Envs:\n  - /proc/self/environ\n",
        ),
    )]);
    h.plan(&[]).assert_refused("invalid-source", "/proc/self/environ");
}

#[test]
fn a_nested_kustomization_cannot_leave_the_source_either() {
    let reference = format!("{}etc/passwd", climb());
    let h = hostile(&[
        ("apps/kustomization.yaml", &kustomization("- ../base\n")),
        (
            "base/kustomization.yaml",
            &format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nconfigMapGenerator:\n- name: leak\n  namespace: default\n  files: [{reference}]\n"),
        ),
    ]);
    h.plan(&[]).assert_refused("invalid-source", &reference);
}

#[test]
fn plugin_configurations_cannot_name_files_outside_the_source() {
    // A transformer configuration file whose builtin PatchTransformer reads /etc/passwd...
    let h = hostile(&[
        ("apps/kustomization.yaml", &kustomization("transformers:\n- patcher.yaml\n")),
        (
            "apps/patcher.yaml",
            "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: patcher\npath: /etc/passwd\ntarget:\n  kind: ConfigMap\n",
        ),
    ]);
    h.plan(&[]).assert_refused("invalid-source", "/etc/passwd");
    // ...and an inline generator configuration reading the environment.
    let h = hostile(&[(
        "apps/kustomization.yaml",
        &kustomization(&format!(
            "generators:\n- |\n  apiVersion: builtin\n  kind: ConfigMapGenerator\n  metadata:\n    name: leak\n  files:\n  - {}proc/self/environ\n",
            climb()
        )),
    )]);
    h.plan(&[]).assert_refused("invalid-source", "proc/self/environ");
}

#[test]
fn urls_in_any_field_are_refused_and_never_fetched() {
    let canary = Canary::start();
    let fields = [
        format!(
            "configMapGenerator:\n- name: fetched\n  namespace: default\n  files:\n  - plan.json={}\n",
            canary.url("runs/1/plan.json")
        ),
        format!("transformers:\n- {}\n", canary.url("transformer.yaml")),
        format!("patches:\n- path: {}\n", canary.url("patch.yaml")),
        format!("openapi:\n  path: {}\n", canary.url("schema.json")),
    ];
    for body in fields {
        let h = hostile(&[("apps/kustomization.yaml", &kustomization(&body))]);
        h.plan(&[]).assert_refused("remote-base", &canary.url(""));
    }
    canary.assert_untouched();
}

#[test]
fn an_oversized_manifest_is_a_source_limit_alert_not_no_changes() {
    // No kustomization.yaml: the generated one lists every manifest, and the big one is lost.
    let big = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  namespace: default\ndata:\n  blob: {}\n",
        "x".repeat(11 * 1024 * 1024)
    );
    let h = hostile(&[("apps/big.yaml", &big)]);
    let outcome = h.plan(&[]);
    assert_eq!(outcome.code, 2, "{}", outcome.stdout);
    assert_eq!(outcome.plan["verdict"], "blocked");
    let alerts = outcome.alerts("source-limit");
    assert_eq!(alerts.len(), 1, "{:?}", outcome.plan["alerts"]);
    assert_eq!(alerts[0]["severity"], "danger");
    assert!(alerts[0]["message"].as_str().unwrap().contains("apps/big.yaml"), "{}", alerts[0]);
}

#[test]
fn a_source_over_its_total_limits_is_not_rendered() {
    let h = hostile(&[("apps/padding.yaml", &format!("# {}\n", "x".repeat(64 * 1024)))]);
    for (flag, figure) in [("--max-source-bytes=65536", "65536 bytes"), ("--max-source-files=4", "4 files")] {
        let outcome = h.plan(&[flag]);
        assert_eq!(outcome.code, 3, "{}", outcome.stdout);
        assert_eq!(outcome.plan["verdict"], "failed");
        let alerts = outcome.alerts("source-limit");
        assert_eq!(alerts.len(), 1, "{:?}", outcome.plan["alerts"]);
        assert!(alerts[0]["message"].as_str().unwrap().contains(figure), "{}", alerts[0]);
    }
}

#[test]
fn a_plan_over_its_time_limit_is_stopped_and_its_kustomize_killed() {
    // A stand-in kustomize that never finishes: the one way to hold a build deterministically.
    let bin = tempfile::tempdir().unwrap();
    let marker = format!("3600.{}", std::process::id());
    let script = stand_in_kustomize(bin.path(), &format!("exec sleep {marker}"));
    let h = hostile(&[(
        "apps/other.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: default\n",
    )]);
    let outcome =
        h.plan_with_env(&["--plan-timeout", "2"], &[("FLUXPLAN_KUSTOMIZE", script.to_str().unwrap())]);
    assert_eq!(outcome.code, 3, "{}", outcome.stdout);
    let alerts = outcome.alerts("source-limit");
    assert_eq!(alerts.len(), 1, "{:?}", outcome.plan["alerts"]);
    assert!(alerts[0]["message"].as_str().unwrap().contains("--plan-timeout"), "{}", alerts[0]);
    wait_for("the stand-in kustomize to be gone", WAIT, || !process_running(&marker));
}

#[test]
fn cache_entries_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let h = hostile(&[(
        "apps/other.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: default\n",
    )]);
    let outcome = h.plan(&[]);
    assert_eq!(outcome.code, 1, "{}", outcome.stdout);
    let entries = walk(outcome.cache.path());
    assert!(!cache_entries(outcome.cache.path()).is_empty(), "nothing was cached");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(outcome.cache.path()), 0o700);
    for entry in entries {
        assert_eq!(mode(&entry), 0o600, "{}", entry.display());
    }
}

/// Ways past a naive reference check, found by review: each must still be refused by name.
#[test]
fn references_hidden_from_a_naive_check_are_refused() {
    let generator = |files: &str| {
        format!("apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: leak\n  namespace: default\nfiles:\n- {files}\n")
    };
    // (what, files of the head, expected code, what the message must name)
    type Case = (&'static str, Vec<(String, String)>, &'static str, &'static str);
    let cases: Vec<Case> = vec![
        (
            "a field name Go folds to `files` (long s)",
            vec![("apps/kustomization.yaml".into(), kustomization("configMapGenerator:\n- name: leak\n  namespace: default\n  file\u{17f}: [key=/usr/lib/os-release]\n"))],
            "invalid-source",
            "ASCII",
        ),
        (
            "a generator directory whose kustomization patches its configuration",
            vec![
                ("apps/kustomization.yaml".into(), kustomization("generators:\n- gen\n")),
                ("apps/gen/kustomization.yaml".into(), "resources:\n- cmgen.yaml\npatches:\n- target:\n    kind: ConfigMapGenerator\n  patch: |\n    - op: replace\n      path: /files/0\n      value: key=/usr/lib/os-release\n".into()),
                ("apps/gen/cmgen.yaml".into(), generator("key=ok.txt")),
                ("apps/ok.txt".into(), "ok\n".into()),
            ],
            "invalid-source",
            "may only list resources",
        ),
        (
            "a YAML tag in a nested kustomization",
            vec![
                ("apps/kustomization.yaml".into(), kustomization("- sub\n")),
                ("apps/sub/kustomization.yaml".into(), "configMapGenerator:\n- name: leak\n  namespace: default\n  files: [!!binary a2V5PS91c3IvbGliLy9vcy1yZWxlYXNl]\n".into()),
            ],
            "invalid-source",
            "a2V5PS91c3IvbGliLy9vcy1yZWxlYXNl",
        ),
        (
            "a one-line inline plugin configuration",
            vec![("apps/kustomization.yaml".into(), kustomization("generators:\n- '{apiVersion: builtin, kind: ConfigMapGenerator, metadata: {name: leak, namespace: default}, files: [/usr/lib/os-release]}'\n"))],
            "invalid-source",
            "/usr/lib/os-release",
        ),
        (
            "a plugin configuration whose file is named from another directory",
            vec![
                ("apps/kustomization.yaml".into(), kustomization("transformers:\n- deep/down/patcher.yaml\n")),
                ("apps/deep/down/patcher.yaml".into(), format!("apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: p\npath: {}etc/passwd\ntarget:\n  kind: ConfigMap\n", "../".repeat(3))),
                ("apps/deep/etc/passwd".into(), "a decoy that exists only relative to the configuration\n".into()),
            ],
            "invalid-source",
            "etc/passwd",
        ),
        (
            "an entry kustomize reads as a path where a naive check sees inline objects",
            vec![
                ("apps/kustomization.yaml".into(), kustomization("generators:\n- \"a: 1\\n\"\n")),
                ("apps/a: 1\n".into(), generator("/etc/passwd")),
            ],
            "invalid-source",
            "neither a plain path nor inline objects",
        ),
        (
            "a plugin configuration wrapped in a List",
            vec![
                ("apps/kustomization.yaml".into(), kustomization("generators:\n- wrapped.yaml\n")),
                ("apps/wrapped.yaml".into(), format!("apiVersion: v1\nkind: List\nitems:\n- {}", generator("/etc/passwd").replace('\n', "\n  "))),
            ],
            "invalid-source",
            "/etc/passwd",
        ),
        (
            "a plugin configuration checked first from a deeper kustomization",
            vec![
                ("apps/kustomization.yaml".into(), kustomization("- d1/d2\ngenerators:\n- gen.yaml\n")),
                ("apps/d1/d2/kustomization.yaml".into(), "generators:\n- ../../gen.yaml\n".into()),
                ("apps/gen.yaml".into(), generator("key=../../x")),
                ("apps/x".into(), "exists only relative to the deeper kustomization\n".into()),
            ],
            "invalid-source",
            "../../x",
        ),
        (
            "a local directory named like a remote repository",
            vec![
                ("apps/kustomization.yaml".into(), kustomization("- GitHub.com/acme/x\n")),
                ("apps/GitHub.com/acme/x/kustomization.yaml".into(), "resources: []\n".into()),
            ],
            "remote-base",
            "GitHub.com/acme/x",
        ),
        (
            "a URL with a space, backed by a local path of the same spelling",
            vec![
                ("apps/kustomization.yaml".into(), kustomization("- http://127.0.0.1:9/a b.yaml\nconfigMapGenerator:\n- name: f\n  namespace: default\n  files:\n  - k=http://127.0.0.1:9/a b.yaml\n")),
                ("apps/http:/127.0.0.1:9/a b.yaml".into(), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: decoy\n".into()),
            ],
            "remote-base",
            "a b.yaml",
        ),
        (
            "an inline patch kustomize would also read as a path out of the source",
            vec![("apps/kustomization.yaml".into(), kustomization(&format!("patchesStrategicMerge:\n- \"kind: X\\nb: {}etc/passwd\"\n", "../".repeat(14))))],
            "invalid-source",
            "inline objects but also names a path",
        ),
        (
            "an inline generator whose text names an existing configuration file",
            vec![
                ("apps/kustomization.yaml".into(), kustomization("generators:\n- \"kind: X\\n\"\n")),
                ("apps/apiVersion: builtin\nkind: X\n".into(), generator("/etc/hostname")),
                ("apps/kind: X\n".into(), generator("/etc/hostname")),
            ],
            "invalid-source",
            "inline objects but also names a path",
        ),
        (
            "a builtin whose file field is named otherwise (ValueAddTransformer.targetFilePath)",
            vec![
                ("apps/kustomization.yaml".into(), kustomization("transformers:\n- va.yaml\n")),
                ("apps/va.yaml".into(), "apiVersion: builtin\nkind: ValueAddTransformer\nmetadata:\n  name: va\nvalue: x\ntargetFilePath: http://127.0.0.1:9/targets.yaml\n".into()),
            ],
            "remote-base",
            "ValueAddTransformer.targetfilepath",
        ),
        (
            "a remote base spelled so that no URL check sees it",
            vec![("apps/kustomization.yaml".into(), kustomization("- GitHub.com/acme/x\n- me@127.0.0.1:acme/x\n"))],
            "remote-base",
            "GitHub.com/acme/x",
        ),
    ];
    for (what, files, code, named) in cases {
        let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
        let outcome = hostile(&files).plan(&[]);
        let (actual, message) = outcome.apps_error();
        assert_eq!(actual, code, "{what}: {message}");
        assert!(message.contains(named), "{what}: the message does not name '{named}': {message}");
        assert!(!outcome.stdout.contains("PRETTY_NAME"), "{what}: /usr/lib/os-release leaked");
        outcome.assert_nothing_leaked();
    }
}

/// What the check must not refuse: ordinary kustomizations that look a little like the above.
#[test]
fn legitimate_kustomizations_still_render() {
    let h = hostile(&[
        ("apps/kustomization.yaml", &kustomization("generators:\n- gen.yaml\npatchesStrategicMerge:\n- '{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"app\", \"namespace\": \"default\", \"annotations\": {\"docs\": \"https://example.com\"}}}'\n")),
        ("apps/gen.yaml", "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: nginx\n  namespace: default\nfiles:\n- nginx.conf\n"),
        ("apps/nginx.conf", "server { add_header X-Frame-Options: DENY; }\n"),
    ]);
    check_renders(h);
    // A file whose name holds `@` is a file, not a remote repository.
    let h = hostile(&[
        ("apps/kustomization.yaml", &kustomization("- alertmanager@prod.yaml\n")),
        (
            "apps/alertmanager@prod.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: am\n  namespace: default\n",
        ),
    ]);
    check_renders(h);
    // Label names that differ only in case are data, and a builtin patch given inline is content.
    let h = hostile(&[
        ("apps/kustomization.yaml", &kustomization("commonAnnotations:\n  Team: a\n  team: b\ntransformers:\n- psm.yaml\n")),
        ("apps/psm.yaml", "apiVersion: builtin\nkind: PatchStrategicMergeTransformer\nmetadata:\n  name: psm\npaths:\n- '{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"app\", \"namespace\": \"default\", \"labels\": {\"patched\": \"yes\"}}}'\n"),
    ]);
    check_renders(h);
}

/// The head renders `apps` without an error.
fn check_renders(h: Hostile) {
    let outcome = h.plan(&[]);
    assert_eq!(outcome.code, 1, "{}", outcome.stdout);
    let apps =
        outcome.plan["kustomizations"].as_array().unwrap().iter().find(|k| k["name"] == "apps").unwrap();
    assert!(apps["error"].is_null(), "{apps}");
}

/// Flux clones the repository: `.gitattributes` means nothing to it. `git archive` would leave
/// out what `export-ignore` names and rewrite what `export-subst` names, so a pull request could
/// hide an object from its own plan.
#[test]
fn gitattributes_never_hide_a_file_from_the_plan() {
    let backdoor = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: backdoor\n\
                    roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\n\
                    subjects:\n- kind: User\n  name: mallory\n  apiGroup: rbac.authorization.k8s.io\n";
    let stamped = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stamped\n  namespace: default\n\
                   data:\n  commit: $Format:%H$\n";
    let h = hostile(&[
        (".gitattributes", "apps/backdoor.yaml export-ignore\napps/stamped.yaml export-subst filter=upper\n"),
        ("apps/backdoor.yaml", backdoor),
        ("apps/stamped.yaml", stamped),
    ]);
    // A filter the repository's configuration defines (as git-crypt's does): a clone without it
    // holds the blob, and so does the export.
    h.repo.git(&["config", "filter.upper.smudge", "tr a-z A-Z"]);
    assert_nothing_hidden(
        &h,
        &["_backdoor_rbac.authorization.k8s.io_ClusterRoleBinding", "default_stamped__ConfigMap"],
    );
    // The file as committed, not as an archive rewrites it.
    let cache = tempfile::tempdir().unwrap();
    for extra in [&["--no-cache"][..], &["--cache-dir", cache.path().to_str().unwrap()]] {
        let out = Command::new(fluxplan_bin())
            .args(["build", "--format", "json", "--rev", &h.head, "--repo"])
            .arg(h.repo.path())
            .args(extra)
            .output()
            .unwrap();
        let render: Value = serde_json::from_slice(&out.stdout).unwrap();
        let objects = render.pointer("/clusters/0/kustomizations").unwrap().as_array().unwrap().iter();
        let objects = objects.flat_map(|k| k["objects"].as_array().unwrap());
        let stamped = objects.map(|o| &o["manifest"]).find(|o| o["metadata"]["name"] == "stamped").unwrap();
        assert_eq!(stamped["data"]["commit"], "$Format:%H$", "{extra:?}");
    }
}

/// A `.gitattributes` deep in the tree applies to an archive as the top one does.
#[test]
fn a_nested_gitattributes_never_hides_a_directory_from_the_plan() {
    let h = hostile(&[
        ("apps/nested/.gitattributes", "* export-ignore\n"),
        (
            "apps/nested/extra.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nested\n  namespace: default\n",
        ),
    ]);
    assert_nothing_hidden(&h, &["default_nested__ConfigMap"]);
}

/// The plan creates exactly `created` in `apps`: planned twice, so the second plan brings forward
/// the exports the first kept (where Landlock lets exports be kept).
fn assert_nothing_hidden(h: &Hostile, created: &[&str]) {
    for run in ["fresh", "kept"] {
        let outcome = h.plan(&[]);
        assert_eq!(outcome.code, 1, "{run}: {}", outcome.stdout);
        let apps =
            outcome.plan["kustomizations"].as_array().unwrap().iter().find(|k| k["name"] == "apps").unwrap();
        let changes = apps["changes"].as_array().unwrap().iter();
        let actual: Vec<&str> =
            changes.filter(|c| c["action"] == "create").map(|c| c["id"].as_str().unwrap()).collect();
        assert_eq!(actual, created, "{run}");
    }
}

/// Two file names that read alike once their bytes are decoded lossily (`\xff` and U+FFFD):
/// written by name, one would replace the other. A path that is not UTF-8 is refused by name.
#[test]
fn a_file_name_that_is_not_utf8_is_refused_not_merged_with_another() {
    use std::os::unix::ffi::OsStrExt;
    let h = hostile(&[
        (".gitattributes", "*.txt text\n"),
        (
            "apps/x\u{FFFD}.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hidden\n  namespace: default\n",
        ),
    ]);
    let odd = h.repo.path().join(std::ffi::OsStr::from_bytes(b"apps/x\xff.yaml"));
    std::fs::write(&odd, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: decoy\n  namespace: default\n")
        .unwrap();
    let head = h.repo.commit("a name that is not UTF-8");
    let h = Hostile { repo: h.repo, base: h.base, head };
    let outcome = h.plan(&[]);
    assert_eq!(outcome.code, 3, "{}", outcome.stdout);
    assert!(outcome.stdout.contains("not UTF-8"), "{}", outcome.stdout);
    // A failed plan still names the commits it was asked for (the bot's resync compares them).
    assert_eq!(outcome.plan["base"]["commit"], h.base.as_str());
    assert_eq!(outcome.plan["head"]["commit"], h.head.as_str());
}

/// fluxplan's own scratch names once were skipped wherever they appeared: a pull request naming
/// its manifests so hid them. The controller's generator skips no name.
#[test]
fn manifests_named_like_fluxplans_scratch_are_planned() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: sneaky\n  namespace: default\n\
               spec:\n  hostPID: true\n  containers:\n  - name: x\n    image: busybox\n";
    let binding = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: backdoor\n\
                   roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\n\
                   subjects:\n- kind: User\n  name: mallory\n  apiGroup: rbac.authorization.k8s.io\n";
    let h = hostile(&[
        ("apps/.fluxplan-build-pod.yaml", pod),
        ("apps/.fluxplan-build-x/evil.yaml", binding),
        ("apps/.fluxplan-build-1-0/.hidden.yaml", &pod.replace("sneaky", "dotted")),
    ]);
    assert_nothing_hidden(
        &h,
        &[
            "_backdoor_rbac.authorization.k8s.io_ClusterRoleBinding",
            "default_dotted__Pod",
            "default_sneaky__Pod",
        ],
    );
}

/// kustomize refuses a directory holding more than one kustomization file, so the controller
/// fails the build. The cache once keyed such a directory by the one file it picked, and the head
/// was served the base's build.
#[test]
fn a_directory_with_two_kustomization_files_fails_cached_or_not() {
    let evil = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: evil\n  namespace: default\n";
    let second =
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- evil.yaml\n";
    for (dir, parent) in [("apps", None), ("apps/nested", Some("apps/kustomization.yaml"))] {
        let repo = Repo::bootstrap("prod");
        repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
        repo.config_map(&format!("{dir}/cm.yaml"), "app", "default");
        repo.write(&format!("{dir}/kustomization.yaml"), &kustomization(""));
        if let Some(parent) = parent {
            repo.write(
                parent,
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- nested\n",
            );
        }
        let base = repo.commit("base");
        repo.write(&format!("{dir}/evil.yaml"), evil);
        repo.write(&format!("{dir}/kustomization.yml"), second);
        let head = repo.commit("a second kustomization file");
        let h = Hostile { repo, base, head };
        // Planned cold, warm and without the cache (see `plan_with_env`).
        let outcome = h.plan(&[]);
        outcome.assert_refused("invalid-source", "Found multiple kustomization files under");
        let (_, message) = outcome.apps_error();
        assert!(message.contains(dir), "{dir}: {message}");
    }
}

/// A chain of kustomizations, each the only resource of the one before, 5,000 deep: following it
/// by recursion once overflowed the planner's stack (the CLI exited 134, the bot aborted). It is
/// over fluxplan's documented nesting limit: that Kustomization is a `source-limit`, the plan is
/// made and blocked.
#[test]
fn a_chain_of_kustomizations_deeper_than_the_limit_is_a_source_limit_not_a_crash() {
    const DEPTH: usize = 5_000;
    let mut files =
        vec![("apps/kustomization.yaml".to_string(), "resources:\n- cm.yaml\n- ../chain/k0\n".to_string())];
    for i in 0..DEPTH {
        let next = if i + 1 < DEPTH { format!("../k{}", i + 1) } else { "deep.yaml".into() };
        files.push((format!("chain/k{i}/kustomization.yaml"), format!("resources:\n- {next}\n")));
    }
    files.push((
        format!("chain/k{}/deep.yaml", DEPTH - 1),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\n  namespace: default\n".into(),
    ));
    let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    let outcome = hostile(&files).plan(&[]);
    outcome.assert_refused("source-limit", "nest more than 100 levels");
    assert_eq!(outcome.code, 2, "{}", outcome.stdout);
}

/// Flux Kustomizations each applying the next, 150 deep: the walk stops at fluxplan's nesting
/// limit with a `source-limit`, instead of following a pull request's chain for as long as it is.
#[test]
fn a_chain_of_flux_kustomizations_deeper_than_the_limit_is_a_source_limit() {
    const DEPTH: usize = 150;
    let next = |i: usize| {
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: k{i}\n  namespace: flux-system\n\
             spec:\n  interval: 10m\n  path: ./chain/k{i}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
        )
    };
    let mut files = vec![("apps/next.yaml".to_string(), next(0))];
    for i in 0..DEPTH {
        files.push((format!("chain/k{i}/next.yaml"), next(i + 1)));
    }
    files.push((
        format!("chain/k{DEPTH}/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\n  namespace: default\n".into(),
    ));
    let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    let outcome = hostile(&files).plan(&[]);
    assert_eq!(outcome.code, 2, "{}", outcome.stdout);
    let limits = outcome.alerts("source-limit");
    assert_eq!(limits.len(), 1, "{limits:?}");
    assert!(limits[0]["message"].as_str().unwrap().contains("nest more than 100 levels"), "{}", limits[0]);
    outcome.assert_nothing_leaked();
}
