//! Every helm and kustomize process runs under a memory limit (`--max-render-memory`): a chart or
//! a kustomization that eats memory ends as a `source-limit` of its unit, the process held under
//! the limit, and the other units render. Each attack runs fluxplan itself under a looser limit
//! (`GUARD`): should fluxplan's own limit not hold, the process grows to the guard, far over
//! what the test allows, and the test fails instead of exhausting the machine.

use crate::fixture::{fluxplan_bin, helm, unit_in, Repo};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The limit the attacks run under.
const LIMIT_MIB: u64 = 256;
/// The limit fluxplan runs under (and its children, if its own limit failed).
const GUARD: u64 = 3 << 30;

/// `fluxplan plan` of `repo` (HEAD~1 → HEAD) with every render under `LIMIT_MIB`, fluxplan
/// itself under `GUARD`: the plan and the exit code.
fn plan_under_limit(repo: &Repo) -> (Value, i32) {
    let mut cmd = Command::new(fluxplan_bin());
    cmd.args(["plan", "--no-cache", "--base", "HEAD~1", "--head", "HEAD", "--format", "json"])
        .arg(format!("--max-render-memory={LIMIT_MIB}MiB"))
        .arg("--repo")
        .arg(repo.path());
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let guard = libc::rlimit { rlim_cur: GUARD, rlim_max: GUARD };
            if libc::setrlimit(libc::RLIMIT_DATA, &guard) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let plan = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (plan, out.status.code().unwrap())
}

/// The `source-limit` alert of the unit `reference` (as alerts name it: `NS/NAME` for a
/// Kustomization, `HelmRelease NS/NAME`): its message.
fn source_limit_of(plan: &Value, reference: &str) -> String {
    let alert = plan["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| {
            a["code"] == "source-limit" && a["kustomization"].as_str().is_some_and(|k| k.ends_with(reference))
        })
        .unwrap_or_else(|| panic!("no source-limit for {reference}: {:#}", plan["alerts"]));
    assert_eq!(alert["severity"], "danger", "{alert:#}");
    alert["message"].as_str().unwrap().to_string()
}

/// The peak the message reports (`it held up to N MiB resident`), asserted to be the limit's
/// doing: at most the limit and the program's own code (helm's 60 MB binary, the worker's
/// library, mapped from their files and not counted by the limit), and at least half the limit,
/// so the process was pushing against the limit, not failing early for another reason.
fn assert_held_under_the_limit(message: &str) {
    assert!(
        message.contains(&format!("over its limit of {LIMIT_MIB} MiB (--max-render-memory)")),
        "{message}"
    );
    let peak: u64 = message
        .split("it held up to ")
        .nth(1)
        .and_then(|rest| rest.split(" MiB").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no peak in: {message}"));
    assert!(peak <= LIMIT_MIB + 128, "the process grew past its limit to {peak} MiB: {message}");
    assert!(peak >= LIMIT_MIB / 2, "the process stopped at {peak} MiB, far below its limit: {message}");
}

/// A chart whose template doubles a string forty times (a terabyte): `source-limit` naming the
/// release and the limit, helm held under it. Beside it an ordinary release, under the same
/// limit, renders and is planned.
#[test]
fn a_template_that_doubles_a_string_is_a_source_limit_held_under_the_limit() {
    let _ = helm(4);
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    for name in ["web", "bomb"] {
        repo.write(
            &format!("charts/{name}/Chart.yaml"),
            &format!("apiVersion: v2\nname: {name}\nversion: 1.0.0\n"),
        );
        repo.write(
            &format!("apps/{name}.yaml"),
            &format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {name}\n  namespace: apps\n\
                 spec:\n  interval: 10m\n  chart:\n    spec:\n      chart: ./charts/{name}\n      sourceRef:\n        \
                 kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n  values:\n    replicas: 1\n"
            ),
        );
    }
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {{ .Values.replicas }}\n  \
                      selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      \
                      containers:\n      - name: web\n        image: nginx\n";
    repo.write("charts/web/templates/deployment.yaml", deployment);
    repo.write(
        "charts/bomb/templates/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n",
    );
    repo.commit("base");
    repo.write(
        "charts/bomb/templates/config.yaml",
        "{{ $s := \"x\" }}{{ range until 40 }}{{ $s = print $s $s }}{{ end }}apiVersion: v1\nkind: ConfigMap\n\
         metadata:\n  name: bomb\ndata:\n  s: {{ $s | quote }}\n",
    );
    crate::fixture::edit(&repo, "apps/web.yaml", "replicas: 1", "replicas: 2");
    repo.commit("a doubling template, and one more replica");

    let (plan, code) = plan_under_limit(&repo);
    assert_eq!(code, 2, "blocked: {plan:#}");
    let message = source_limit_of(&plan, "HelmRelease apps/bomb");
    assert!(message.contains("helm template ran out of memory"), "{message}");
    assert_held_under_the_limit(&message);
    // The near miss: the ordinary release, under the same limit, is planned.
    let web = unit_in(&plan, "HelmRelease", "apps/web");
    assert_eq!(web["status"], "changed", "{web:#}");
    assert!(web["error"].is_null(), "{web:#}");
    assert_eq!(web["changes"][0]["id"], "apps_web_apps_Deployment", "{web:#}");
}

/// Writes at `dir` a kustomization whose ConfigMap, generated from a 4 MiB file, is included
/// sixteen times through two levels of four overlays (64 MiB printed, about 1 GiB in kustomize).
fn write_multiplied_config_map(repo: &Repo, dir: &str) {
    let line = format!("{}\n", "0123456789abcdef".repeat(64));
    repo.write(&format!("{dir}/base/data.txt"), &line.repeat(4096));
    repo.write(
        &format!("{dir}/base/kustomization.yaml"),
        "configMapGenerator:\n- name: blob\n  files: [data.txt]\n",
    );
    let mut below = vec!["base".to_string()];
    // Three levels of four: 64 copies of 4 MiB, more than the limit holds whatever the GC does.
    for level in 0..3 {
        let names: Vec<String> = (0..4).map(|i| format!("l{level}{i}")).collect();
        for name in &names {
            let resources: String = below.iter().map(|b| format!("- ../{b}\n")).collect();
            repo.write(
                &format!("{dir}/{name}/kustomization.yaml"),
                &format!("resources:\n{resources}namePrefix: {name}-\n"),
            );
        }
        below = names;
    }
    let resources: String = below.iter().map(|b| format!("- {b}\n")).collect();
    repo.write(&format!("{dir}/kustomization.yaml"), &format!("resources:\n{resources}"));
}

/// A kustomization that multiplies a generated ConfigMap: `source-limit` naming the
/// Kustomization and the limit, kustomize held under it. Beside it an ordinary Kustomization,
/// under the same limit, is planned.
#[test]
fn a_kustomization_that_multiplies_a_config_map_is_a_source_limit_held_under_the_limit() {
    let repo = Repo::bootstrap("prod");
    repo.kustomization("clusters/prod/apps.yaml", "apps", "./apps", "");
    repo.kustomization("clusters/prod/blob.yaml", "blob", "./blob", "");
    repo.write(
        "apps/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: apps\ndata:\n  a: b\n",
    );
    repo.write(
        "blob/config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blob\n  namespace: apps\n",
    );
    repo.commit("base");
    repo.remove("blob/config.yaml");
    write_multiplied_config_map(&repo, "blob");
    crate::fixture::edit(&repo, "apps/config.yaml", "a: b", "a: c");
    repo.commit("a multiplied ConfigMap, and one value changed");

    let (plan, code) = plan_under_limit(&repo);
    assert_eq!(code, 2, "blocked: {plan:#}");
    let message = source_limit_of(&plan, "flux-system/blob");
    assert!(message.contains("kustomize build ran out of memory"), "{message}");
    assert_held_under_the_limit(&message);
    let apps = crate::fixture::kustomization_in(&plan, "flux-system/apps");
    assert!(apps["error"].is_null(), "{apps:#}");
    assert_eq!(apps["changes"][0]["id"], "apps_app__ConfigMap", "{apps:#}");
}

/// A kustomize that ran out of memory fails that build only: the next build of the same
/// kustomize (a new worker, for the library) succeeds. For the library's workers and for the
/// `kubectl kustomize` fallback alike.
#[test]
fn kustomize_out_of_memory_fails_one_build_and_the_next_succeeds() {
    use fluxplan::render::kustomize::{BuildError, Kustomize};
    let repo = Repo::new("git@github.com:acme/fleet.git");
    write_multiplied_config_map(&repo, "blob");
    repo.write("small/kustomization.yaml", "configMapGenerator:\n- name: small\n  literals: [a=b]\n");
    let library = fluxplan::render::kustomize::library::default_path()
        .filter(|path| path.is_file())
        .expect("this test needs the kustomize library: run scripts/fetch-kustomize-lib.sh");
    let timeout = std::time::Duration::from_secs(120);
    let engines = [
        Kustomize::library_in(&fluxplan_bin(), &library, timeout).unwrap(),
        Kustomize::at("kubectl", timeout).expect("this test needs kubectl"),
    ];
    let cancel = fluxplan::cancel::CancelToken::new();
    for mut kustomize in engines {
        kustomize.memory_limit = LIMIT_MIB << 20;
        let root = repo.path();
        match kustomize.build(&root.join("blob"), root, &cancel) {
            Err(BuildError::Limit(message)) => {
                assert!(
                    message.contains("kustomize build ran out of memory"),
                    "{}: {message}",
                    kustomize.version
                );
                assert_held_under_the_limit(&message);
            }
            // Never the output itself in the message: it is hundreds of MiB.
            other => panic!("{}: {:?}", kustomize.version, other.map(|yaml| yaml.len())),
        }
        let small = kustomize.build(&root.join("small"), root, &cancel);
        assert!(
            small.as_ref().is_ok_and(|yaml| yaml.contains("name: small")),
            "{}: {small:?}",
            kustomize.version
        );
    }
}
