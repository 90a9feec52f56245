//! `fluxplan snapshot`: the live cluster, read with get and list only, written as a snapshot file.

use crate::cluster::kube::{KubeCluster, KubeOptions};
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// The kubeconfig context to read (default: the current one; KUBECONFIG honoured; in-cluster
    /// configuration when there is no kubeconfig).
    #[arg(long)]
    pub context: Option<String>,
    /// Write the snapshot here (default: standard output).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Read the Secrets postBuild.substituteFrom and valuesFrom name, and those of the live chart
    /// sources' secretRef and certSecretRef (their keys are recorded, not their values).
    #[arg(long)]
    pub read_secrets: bool,
    /// Keep those Secrets' values in the file (it then holds secrets: protect it).
    #[arg(long)]
    pub include_secret_values: bool,
    /// Read Secrets only in these namespaces (comma-separated; default: every namespace the Flux
    /// objects name).
    #[arg(long, value_delimiter = ',')]
    pub secret_namespaces: Vec<String>,
    /// Record the repository root this cluster runs, e.g. clusters/production.
    #[arg(long)]
    pub cluster: Option<String>,
}

pub fn run(args: SnapshotArgs) -> Result<u8> {
    let options = KubeOptions {
        context: args.context.clone(),
        read_secrets: args.read_secrets || args.include_secret_values,
        include_secret_values: args.include_secret_values,
        secret_namespaces: args.secret_namespaces.clone(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (snapshot, requests) = runtime.block_on(async {
        let cluster = tokio::time::timeout(Duration::from_secs(30), KubeCluster::connect(options))
            .await
            .map_err(|_| anyhow::anyhow!("the cluster did not answer within 30s"))??;
        let snapshot = cluster.snapshot().await?;
        Ok::<_, anyhow::Error>((snapshot, cluster.request_count()))
    })?;
    let mut snapshot = snapshot;
    if let Some(root) = &args.cluster {
        snapshot.set_cluster(root);
    }
    let text = snapshot.to_yaml();
    match &args.output {
        Some(path) => write_atomically(path, &text)?,
        None => super::write_out(&text)?,
    }
    for warning in &snapshot.warnings {
        crate::console::warning(warning);
    }
    if !crate::console::quiet() {
        eprintln!(
            "read {} Kustomizations and {} live objects in {requests} requests",
            snapshot.kustomizations.len(),
            snapshot.objects.len()
        );
    }
    Ok(0)
}

/// Writes through a temporary file renamed into place: a crash never leaves half a snapshot.
fn write_atomically(path: &std::path::Path, text: &str) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let mut file =
        tempfile::NamedTempFile::new_in(dir).with_context(|| format!("cannot write in {}", dir.display()))?;
    file.write_all(text.as_bytes())?;
    file.persist(path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
