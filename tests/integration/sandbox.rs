//! The sandbox alone, with the reference check bypassed: kustomize called directly on
//! kustomizations that read outside their source must fail, and with Landlock off the cleared
//! environment still holds. Each holds for both engines: the library's workers and the binary.

use fluxplan::cancel::CancelToken;
use fluxplan::render::kustomize::{BuildError, Kustomize};
use std::path::Path;
use std::time::Duration;

/// The library in its workers, then the kustomize binary.
fn engines() -> Vec<Kustomize> {
    let binary = ["kustomize", "kubectl"]
        .iter()
        .find_map(|p| Kustomize::at(p, Duration::from_secs(60)).ok())
        .expect("kustomize (or kubectl) is needed for these tests");
    vec![crate::speed::library_kustomize(), binary]
}

fn require_landlock() {
    let status = fluxplan::sandbox::status();
    assert!(
        status.filesystem && status.network,
        "these tests prove the Landlock sandbox, and this kernel does not offer it fully: {}",
        status.detail
    );
}

/// A source root holding `apps/kustomization.yaml` with `body` (and a ConfigMap).
fn source(body: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let apps = root.path().join("apps");
    std::fs::create_dir_all(&apps).unwrap();
    std::fs::write(
        apps.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: default\n",
    )
    .unwrap();
    std::fs::write(
        apps.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- cm.yaml\n{body}"
        ),
    )
    .unwrap();
    root
}

fn build(kustomize: &Kustomize, root: &Path) -> Result<String, BuildError> {
    kustomize.build(&root.join("apps"), root, &CancelToken::new())
}

#[test]
fn the_sandbox_alone_keeps_kustomize_inside_the_source() {
    require_landlock();
    for kustomize in engines() {
        the_sandbox_keeps_inside_the_source(&kustomize);
    }
}

fn the_sandbox_keeps_inside_the_source(kustomize: &Kustomize) {
    let kustomize = kustomize.clone();
    let inside = source("");
    assert!(
        build(&kustomize, inside.path()).unwrap().contains("name: app"),
        "a plain build works in the sandbox"
    );

    for body in [
        "- /etc/passwd\n".to_string(),
        format!("- {}etc/passwd\n", "../".repeat(14)),
        "configMapGenerator:\n- name: leak\n  namespace: default\n  files:\n  - /proc/self/environ\n".into(),
        format!(
            "configMapGenerator:\n- name: leak\n  namespace: default\n  files:\n  - /proc/{}/environ\n",
            std::process::id()
        ),
        "configMapGenerator:\n- name: leak\n  namespace: default\n  envs:\n  - /etc/hostname\n".into(),
    ] {
        let hostile = source(&body);
        match build(&kustomize, hostile.path()) {
            Ok(output) => panic!("the sandbox let kustomize read outside the source ({body}):\n{output}"),
            Err(BuildError::Failed(message)) => {
                assert!(!message.contains("root:x:0:0"), "{message}");
                assert!(!message.contains("PATH="), "{message}");
            }
            Err(other) => panic!("unexpected failure for {body}: {other:?}"),
        }
    }
}

#[test]
fn the_sandbox_alone_refuses_the_network() {
    require_landlock();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://127.0.0.1:{}/x", listener.local_addr().unwrap().port());
    let hostile = source(&format!(
        "configMapGenerator:\n- name: fetched\n  namespace: default\n  files:\n  - x={url}\n"
    ));
    for kustomize in engines() {
        let result = build(&kustomize, hostile.path());
        assert!(result.is_err(), "{} fetched {url}: {result:?}", kustomize.version);
        match listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("{} connected to loopback: {other:?}", kustomize.version),
        }
    }
}

#[test]
fn without_landlock_kustomize_still_sees_none_of_the_planners_environment() {
    for mut kustomize in engines() {
        kustomize.landlock = false;
        only_the_sandbox_environment(&kustomize);
    }
}

fn only_the_sandbox_environment(kustomize: &Kustomize) {
    let root = source(
        "configMapGenerator:\n- name: environ\n  namespace: default\n  files:\n  - /proc/self/environ\n",
    );
    let output = build(kustomize, root.path()).expect("without Landlock the read succeeds");
    let documents = fluxplan::yaml::parse_documents(&output).unwrap();
    let environ = documents
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"].as_str().unwrap().starts_with("environ"))
        .expect("the environ ConfigMap");
    let text = environ["data"]["environ"].as_str().unwrap();
    let mut names: Vec<&str> = text
        .split('\0')
        .filter(|v| !v.is_empty())
        .filter_map(|v| v.split_once('=').map(|(n, _)| n))
        .collect();
    names.sort();
    // Only what the sandbox sets (Go's soft memory limit for any Go program; for the library's
    // workers, the collector's tuning and their allocator's arena); the test process's own
    // environment (CARGO_*, HOME) is gone.
    let go_runtime: &[&str] = if kustomize.version.starts_with("kustomize library") {
        &["GOGC", "GOMEMLIMIT", "MIMALLOC_ARENA_RESERVE"]
    } else {
        &["GOMEMLIMIT"]
    };
    let mut expected = [
        "GIT_ALLOW_PROTOCOL",
        "GIT_TERMINAL_PROMPT",
        "HOME",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "KUBECONFIG",
        "PATH",
        "http_proxy",
        "https_proxy",
    ]
    .iter()
    .chain(go_runtime)
    .copied()
    .collect::<Vec<_>>();
    expected.sort();
    assert_eq!(names, expected, "{}", kustomize.version);
}

#[test]
fn cancelling_kills_a_running_build_at_once() {
    let bin = tempfile::tempdir().unwrap();
    let script = crate::fixture::stand_in_kustomize(bin.path(), "exec sleep 3600");
    let kustomize = Kustomize::at(script.to_str().unwrap(), Duration::from_secs(3600)).unwrap();
    let root = source("");
    let cancel = CancelToken::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || cancel.cancel(fluxplan::cancel::CancelReason::Superseded))
    };
    let result = kustomize.build(&root.path().join("apps"), root.path(), &cancel);
    canceller.join().unwrap();
    assert_eq!(result, Err(BuildError::Cancelled(fluxplan::cancel::CancelReason::Superseded)));
}
