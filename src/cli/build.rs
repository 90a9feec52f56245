//! `fluxplan build`: print what every reachable Kustomization renders to.

use super::RenderArgs;
use crate::render::{repo_root, Render, Status};
use crate::yaml;
use clap::{Args, ValueEnum};

/// `build --help`: what the exit code says.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  every Kustomization rendered
  1  at least one failed (its error is in the output), or a file was left out for its size
  3  the repository could not be rendered at all (no Flux Kustomization, unknown revision,
     no kustomize, a source over its limits, ...), or Kustomizations exist and none rendered
     for want of local sources (map them with --source)";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BuildFormat {
    /// The manifests, each Kustomization introduced by comments.
    Yaml,
    /// The whole render: clusters, Kustomizations with status, errors, warnings and objects.
    Json,
    /// Per Kustomization a `# NAMESPACE/NAME` line, then its inventory ids, sorted.
    Ids,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub render: RenderArgs,
    /// A git revision to render (default: the working tree, uncommitted changes included).
    #[arg(long)]
    pub rev: Option<String>,
    /// What to print.
    #[arg(long, value_enum, default_value = "yaml")]
    pub format: BuildFormat,
}

/// Exit 0 when every Kustomization rendered, 1 when some failed or a file was left out, 3 when
/// Kustomizations exist and none rendered for want of local sources.
pub fn run(args: BuildArgs) -> anyhow::Result<u8> {
    // A bare repository holds revisions, not files: without --rev there is nothing to read.
    if args.rev.is_none() {
        if let Some(bare) = repo_root::bare_repository(&args.render.repo) {
            anyhow::bail!(bare);
        }
    }
    let snapshot = args.render.snapshot()?;
    let mut opts = args.render.options(args.rev.clone(), snapshot.as_ref());
    // What the policy declares for rendering; an invalid policy is a warning, as in `plan`.
    let policy = crate::plan::policy::read_policy_file(&args.render.repo, args.rev.as_deref())
        .unwrap_or_else(|e| {
            crate::console::warning(&format!("{e:#}; rendering without its crdScopes and roots"));
            Default::default()
        });
    for warning in &policy.warnings {
        crate::console::warning(&format!("{}: {warning}", crate::plan::policy::POLICY_FILE));
    }
    opts.declared_scopes = policy.crd_scopes;
    opts.declared_roots = policy.roots;
    opts.declared_sources = policy.sources;
    let renderer = crate::render::Renderer::new(opts.kustomize_timeout, args.render.cache_dir())?
        .with_memory_limit(opts.memory_limit);
    let render = renderer.render(&opts)?;
    // Nothing rendered is no success: a wrong --repo must not pass silently.
    if render.clusters.is_empty() {
        let repo = &args.render.repo;
        anyhow::bail!(repo_root::nothing_found(
            repo,
            &repo.display().to_string(),
            args.rev.as_deref(),
            &render
        ));
    }
    // Rendered from a directory below the repository's top, whose paths Flux reads from the
    // top: that, and nothing else, is what to say.
    if let Some(hint) = repo_root::rendered_below_top(&args.render.repo, args.rev.as_deref(), &render) {
        anyhow::bail!(hint);
    }
    let text = match args.format {
        BuildFormat::Json => serde_json::to_string_pretty(&render)? + "\n",
        BuildFormat::Yaml => format_yaml(&render),
        BuildFormat::Ids => format_ids(&render),
    };
    super::write_out(&text)?;
    let nothing_rendered = render.nothing_rendered();
    if !matches!(args.format, BuildFormat::Json) {
        for line in warning_lines(&render) {
            // What the error below lists is said there, once.
            if nothing_rendered.as_ref().is_some_and(|reason| reason.contains(&format!("- {line}"))) {
                continue;
            }
            crate::console::warning(&line);
        }
    }
    // The output names each failure; redirected to a file or a program, stderr names them too
    // (when none rendered, the error below lists them).
    if nothing_rendered.is_none() && !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        for line in error_lines(&render) {
            eprintln!("error: {line}");
        }
    }
    // Kustomizations exist and none rendered: the empty output must not pass for a success.
    if let Some(reason) = nothing_rendered {
        eprintln!("error: {reason}");
        return Ok(3);
    }
    let failed = render.clusters.iter().flat_map(|c| &c.kustomizations).any(|k| k.status == Status::Failed);
    // A file left out for its size makes the render differ from what Flux reads: not a success.
    let code = u8::from(failed || !render.source_limits.is_empty());
    // The process ends here: freeing every object one by one took a tenth of a warm build.
    std::mem::forget(render);
    Ok(code)
}

/// Warnings of the whole render, one line each, for stderr; a line clusters share is said once.
fn warning_lines(render: &Render) -> Vec<String> {
    let mut lines = render.warnings.clone();
    // What was assumed first: the roots every other line depends on.
    lines.splice(0..0, render.clusters.iter().filter_map(crate::render::roots::assumed));
    lines.extend(render.source_limits.iter().map(|breach| format!("source-limit: {breach}")));
    for k in render.clusters.iter().flat_map(|c| &c.kustomizations) {
        lines.extend(k.warnings.iter().map(|w| format!("{}/{}: {w}", k.namespace, k.name)));
    }
    lines.extend(
        render
            .unreachable
            .iter()
            .map(|u| format!("{}: Kustomization {} is not reached from any root", u.file, u.name)),
    );
    let mut seen = std::collections::BTreeSet::new();
    lines.retain(|line| seen.insert(line.clone()));
    lines
}

/// Each unit that failed to render, with why, one line each (`cluster` named when several).
fn error_lines(render: &Render) -> Vec<String> {
    let many = render.clusters.len() > 1;
    render
        .clusters
        .iter()
        .flat_map(|c| c.kustomizations.iter().map(move |k| (c, k)))
        .filter_map(|(c, k)| {
            let error = k.error.as_ref()?;
            let cluster = if many { format!(" ({})", c.name) } else { String::new() };
            Some(format!(
                "{} {}/{}{cluster}: {}",
                k.kind.as_str(),
                k.namespace,
                k.name,
                one_line(&error.described())
            ))
        })
        .collect()
}

/// Per Kustomization: a `# NAMESPACE/NAME` line, then its inventory ids, sorted; errors under
/// their Kustomization as `! code: message`. With several clusters, each opens with `## cluster: NAME`.
pub fn format_ids(render: &Render) -> String {
    let mut out = String::new();
    let many = render.clusters.len() > 1;
    for cluster in &render.clusters {
        if many {
            out.push_str(&format!("## cluster: {}\n", cluster.name));
        }
        for k in &cluster.kustomizations {
            out.push_str(&format!("# {}/{}\n", k.namespace, k.name));
            match (&k.error, k.status) {
                (Some(error), _) => {
                    out.push_str(&format!("! {}: {}\n", error.code, one_line(&error.message)))
                }
                // Its own reason (a chart not fetched, another repository), else the source's.
                (None, Status::External) => out.push_str(&format!(
                    "! external: {}\n",
                    k.warnings
                        .first()
                        .map_or_else(|| format!("source {} is not local", k.source), |w| one_line(w))
                )),
                _ => {}
            }
            for id in k.ids() {
                out.push_str(&id);
                out.push('\n');
            }
        }
    }
    out
}

fn one_line(text: &str) -> String {
    text.lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

/// Every object as one YAML stream, each Kustomization introduced by comments.
pub fn format_yaml(render: &Render) -> String {
    let mut out = String::new();
    for cluster in &render.clusters {
        for k in &cluster.kustomizations {
            out.push_str(&format!(
                "# cluster: {}\n# Kustomization {}/{} (path {}): {}\n",
                cluster.name,
                k.namespace,
                k.name,
                k.path,
                match k.status {
                    Status::Rendered => format!("{} objects", k.objects.len()),
                    Status::Failed => "failed".into(),
                    Status::External => "external source, not rendered".into(),
                }
            ));
            if let Some(error) = &k.error {
                for line in error.message.lines() {
                    out.push_str(&format!("# error: {line}\n"));
                }
            }
            for object in &k.objects {
                out.push_str("---\n");
                out.push_str(&yaml::to_yaml(&object.object));
            }
            out.push_str("---\n");
        }
    }
    out
}
