//! kustomize workers run from fluxplan's own executable: installed under another name, or started
//! through a symlink, fluxplan still renders with the library (the test harness, which links the
//! crate, finds the built fluxplan beside it: `speed`).

use crate::fixture::fluxplan_bin;
use crate::speed::library_path;
use fluxplan::render::library;
use std::path::Path;
use std::process::Command;

#[test]
fn fluxplan_under_another_name_or_through_a_symlink_renders_with_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("gitops-planner");
    std::fs::copy(fluxplan_bin(), &renamed).unwrap();
    let link = dir.path().join("fp");
    std::os::unix::fs::symlink(&renamed, &link).unwrap();
    let fleet = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet");
    for program in [&renamed, &link] {
        // Named: the library must work, or the build fails (never a silent fallback).
        let out = Command::new(program)
            .args(["build", "--no-cache", "--format", "json", "--repo"])
            .arg(&fleet)
            .env(library::LIB_ENV, library_path())
            .env_remove("FLUXPLAN_KUSTOMIZE")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", program.display());
        let render: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(render["kustomize"], "kustomize library v0.21.3 (pykustomize-v0.1.4)", "{stderr}");
        assert!(!stderr.contains("kustomize library"), "{stderr}");
    }
}
