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
        format!(
            "no Flux Kustomization or Argo CD Application under {shown}; is this the repository root? If Argo CD \
             syncs it through a root Application kept elsewhere (applied by hand, or in another repository), \
             commit that Application here (bootstrap/root.yaml, its source's repoURL this repository, or another \
             URL of it given with --repo-url): fluxplan plans from the Applications the repository holds \
             (docs/argocd.md)"
        )
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

/// When `dir` lies below the top of a git work tree and a Kustomization of `render` fails because
/// its path is not under `dir` though it is there from the top: the render started in the wrong
/// place (Flux reads every path from the repository's root). The one thing to say, naming the
/// top to use instead. `rev` is the revision rendered (`None`: the working tree).
pub fn rendered_below_top(dir: &Path, rev: Option<&str>, render: &Render) -> Option<String> {
    let top = git::enclosing_work_tree(dir)?;
    let commit = match rev {
        Some(rev) => Some(git::resolve_commit(&top, rev).ok()?),
        None => None,
    };
    let (name, path) = render.kustomizations().find_map(|(_, k)| {
        k.error.as_ref().filter(|e| e.code == "path-not-found")?;
        let relative = crate::paths::normalize(Path::new(k.path.trim_start_matches('/')))?;
        let relative = relative.to_str()?;
        let at_top = match &commit {
            Some(commit) => git::has_path(&top, commit, relative),
            None => top.join(relative).exists(),
        };
        at_top.then(|| (format!("{}/{}", k.namespace, k.name), k.path.clone()))
    })?;
    Some(format!(
        "{} is a subdirectory of the git repository at {}: Flux reads a Kustomization's path from the \
         repository's root, and the path of {name} ({path}) is there, not under {}: try --repo {}",
        dir.display(),
        top.display(),
        dir.display(),
        top.display()
    ))
}
