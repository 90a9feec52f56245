//! Is the directory rendered the repository root? A render that finds no Flux Kustomization, or
//! one rooted in a subdirectory of a git repository (whose paths Flux resolves from the
//! repository's root), must say so and how to fix it instead of passing on nothing.

use super::Render;
use crate::git;
use std::path::{Path, PathBuf};

/// What every Flux Kustomization manifest mentions.
const FLUX_KUSTOMIZE_GROUP: &str = "kustomize.toolkit.fluxcd.io";

/// Why a render with no cluster has nothing to plan, and what to try instead. `rev` is the
/// revision rendered (`None`: the working tree); `shown` names `dir` in the message.
pub fn nothing_found(dir: &Path, shown: &str, rev: Option<&str>, render: &Render) -> String {
    let mut message = if render.unreachable.is_empty() {
        format!("no Flux Kustomization or Argo CD Application under {shown}; is this the repository root?")
    } else {
        format!(
            "no Flux Kustomization under {shown} renders from this repository: the {} found use sources that \
             are not local. If a cluster syncs this repository from those sources (a Flux Operator sync, an \
             artifact CI pushes), declare its directory in .fluxplan.yaml (`roots: [{{path: clusters/prod}}]`, \
             and `sources:` for other sources that hold this repository: docs/flux-operator.md); map sources \
             of other repositories with --source NAMESPACE/NAME=DIR",
            render.unreachable.len()
        )
    };
    if let Some(hint) = subdirectory_hint(dir, rev) {
        message.push('\n');
        message.push_str(&hint);
    }
    message
}

/// When `dir` is a bare repository, which has no working tree to render: that, and the revision
/// to name instead (the branch its HEAD points to, when it has commits).
pub fn bare_repository(dir: &Path) -> Option<String> {
    if !git::is_bare_repository(dir) {
        return None;
    }
    let suggestion = match git::current_branch(dir).filter(|b| git::resolve_commit(dir, b).is_ok()) {
        Some(branch) => format!("--rev {branch} (the branch its HEAD points to)"),
        None => "--rev BRANCH (a branch, tag or commit)".to_string(),
    };
    Some(format!(
        "{} is a bare git repository: it has no working tree to render; name a revision: {suggestion}",
        dir.display()
    ))
}

/// When `dir` is a subdirectory of a git repository whose files hold Flux Kustomizations: a
/// sentence naming the repository's root to use instead.
pub fn subdirectory_hint(dir: &Path, rev: Option<&str>) -> Option<String> {
    let top = flux_repository_above(dir, rev)?;
    Some(format!(
        "{} is a subdirectory of the git repository at {}, which has Flux Kustomizations (Flux reads paths \
         from the repository's root): try --repo {}",
        dir.display(),
        top.display(),
        top.display()
    ))
}

/// The top of the git work tree `dir` lies below, when Flux Kustomizations are in it.
fn flux_repository_above(dir: &Path, rev: Option<&str>) -> Option<PathBuf> {
    let top = git::enclosing_work_tree(dir)?;
    git::yaml_mentions(&top, rev, FLUX_KUSTOMIZE_GROUP).then_some(top)
}

/// True when some Kustomization of `render` failed because its path does not exist: the mark of
/// a render rooted below the repository's root.
pub fn has_missing_paths(render: &Render) -> bool {
    render.kustomizations().any(|(_, k)| k.error.as_ref().is_some_and(|e| e.code == "path-not-found"))
}
