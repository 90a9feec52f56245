//! Where a plan's cluster knowledge comes from: snapshot files, live clusters (read-only), or
//! nothing (offline). A live cluster that cannot be read makes the plan degraded, never fails it.

use crate::cluster::kube::{KubeCluster, KubeOptions, LiveValues};
use crate::cluster::snapshot::ClusterSnapshot;
use crate::cluster::{BlastRadius, SubstitutionSource};
use crate::flux::ObjectId;
use crate::render::RenderOptions;
use anyhow::{Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long connecting to and discovering a cluster may take before the plan goes offline.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The `--clusters` file: each repository root mapped to a kube context or a snapshot file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClustersFile {
    clusters: BTreeMap<String, ClusterEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterEntry {
    context: Option<String>,
    snapshot: Option<PathBuf>,
    /// The Helm major version this cluster's helm-controller runs (3 for Flux 2.7 and older).
    #[serde(rename = "helmVersion")]
    helm_version: Option<u8>,
    /// `.Capabilities.KubeVersion` for this cluster's charts.
    #[serde(rename = "kubeVersion")]
    kube_version: Option<String>,
}

/// How one root's charts are rendered, when its clusters file entry says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterHelm {
    pub major: Option<u8>,
    pub kube_version: Option<String>,
}

fn clusters_file(path: &Path) -> Result<ClustersFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let doc = crate::yaml::parse_documents(&text).map_err(anyhow::Error::msg)?.pop().unwrap_or_default();
    serde_json::from_value(doc).with_context(|| format!("{} is not a clusters file", path.display()))
}

fn root_key(root: &str) -> String {
    root.trim_matches('/').trim_start_matches("./").to_string()
}

/// Reads the Helm settings of a `--clusters` file: root path → Helm version and capabilities.
pub fn read_cluster_helm(path: &Path) -> Result<BTreeMap<String, ClusterHelm>> {
    let mut helm = BTreeMap::new();
    for (root, entry) in clusters_file(path)?.clusters {
        if let Some(major) = entry.helm_version.filter(|m| !(3..=4).contains(m)) {
            anyhow::bail!("{}: cluster {root}: helmVersion {major} is not 3 or 4", path.display());
        }
        let settings = ClusterHelm { major: entry.helm_version, kube_version: entry.kube_version };
        if settings != ClusterHelm::default() {
            helm.insert(root_key(&root), settings);
        }
    }
    Ok(helm)
}

/// Where one root's cluster knowledge comes from.
#[derive(Debug, Clone)]
pub enum ClusterSource {
    Snapshot(PathBuf),
    Live(KubeOptions),
}

/// Reads a `--clusters` file: root path → source.
pub fn read_clusters_file(path: &Path, template: &KubeOptions) -> Result<BTreeMap<String, ClusterSource>> {
    let file = clusters_file(path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    file.clusters
        .into_iter()
        .map(|(root, entry)| {
            let root = root_key(&root);
            let source = match (entry.context, entry.snapshot) {
                (Some(context), None) => {
                    ClusterSource::Live(KubeOptions { context: Some(context), ..template.clone() })
                }
                (None, Some(snapshot)) => ClusterSource::Snapshot(base.join(snapshot)),
                _ => anyhow::bail!(
                    "{}: cluster {root} needs exactly one of `context` or `snapshot`",
                    path.display()
                ),
            };
            Ok((root, source))
        })
        .collect()
}

/// Everything the plan knows of its clusters.
pub struct ClusterKnowledge {
    pub snapshots: Vec<ClusterSnapshot>,
    /// Substitution values: the default, and per root.
    pub values: Option<Arc<dyn SubstitutionSource>>,
    pub cluster_values: BTreeMap<String, Arc<dyn SubstitutionSource>>,
    live: BTreeMap<String, Arc<KubeCluster>>,
    pub degraded: Vec<String>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl ClusterKnowledge {
    /// Gathers knowledge from `sources`, keyed by root ("" applies to every root).
    pub fn gather(sources: BTreeMap<String, ClusterSource>) -> Result<Self> {
        let mut knowledge = ClusterKnowledge {
            snapshots: Vec::new(),
            values: None,
            cluster_values: BTreeMap::new(),
            live: BTreeMap::new(),
            degraded: Vec::new(),
            runtime: None,
        };
        for (root, source) in sources {
            match source {
                ClusterSource::Snapshot(path) => {
                    let mut snapshot = ClusterSnapshot::load(&path)?;
                    if !root.is_empty() {
                        snapshot.set_cluster(&root);
                    }
                    knowledge.add_values(&root, Arc::new(snapshot.clone()));
                    knowledge.snapshots.push(snapshot);
                }
                ClusterSource::Live(options) => {
                    let runtime = knowledge.runtime()?;
                    let handle = runtime.handle().clone();
                    let read = runtime.block_on(async {
                        let cluster = tokio::time::timeout(CONNECT_TIMEOUT, KubeCluster::connect(options))
                            .await
                            .map_err(|_| format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()))?
                            .map_err(|e| e.to_string())?;
                        let snapshot = cluster.snapshot().await.map_err(|e| e.to_string())?;
                        Ok::<_, String>((cluster, snapshot))
                    });
                    match read {
                        Ok((cluster, mut snapshot)) => {
                            let cluster = Arc::new(cluster);
                            if !root.is_empty() {
                                snapshot.set_cluster(&root);
                            }
                            knowledge.add_values(
                                &root,
                                Arc::new(LiveValues::new(handle, cluster.clone(), &snapshot)),
                            );
                            knowledge.live.insert(root, cluster);
                            knowledge.snapshots.push(snapshot);
                        }
                        Err(reason) => {
                            let which =
                                if root.is_empty() { String::new() } else { format!("cluster {root}: ") };
                            knowledge.degraded.push(format!("{which}{reason}"));
                        }
                    }
                }
            }
        }
        Ok(knowledge)
    }

    /// Gives a render what the clusters know: substitution values (default and per root) and
    /// the scopes of the kinds they serve.
    pub fn apply_to(&self, opts: &mut RenderOptions) {
        if let Some(values) = &self.values {
            opts.values = values.clone();
        }
        opts.cluster_values = self.cluster_values.clone();
        opts.known_scopes = self
            .snapshots
            .iter()
            .flat_map(|s| s.crds.iter().map(|((group, kind), scope)| (group.clone(), kind.clone(), *scope)))
            .collect();
        // The cluster's version for charts, unless given by hand (one cluster: several may differ,
        // and a clusters file sets each).
        if let [snapshot] = self.snapshots.as_slice() {
            snapshot.apply_to_charts(opts);
        }
    }

    fn runtime(&mut self) -> Result<&tokio::runtime::Runtime> {
        if self.runtime.is_none() {
            self.runtime =
                Some(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?);
        }
        Ok(self.runtime.as_ref().expect("just built"))
    }

    fn add_values(&mut self, root: &str, values: Arc<dyn SubstitutionSource>) {
        if root.is_empty() {
            self.values = Some(values);
        } else {
            self.cluster_values.insert(root.to_string(), values);
        }
    }

    /// Why the plan is (partly) offline, if it is.
    pub fn degraded(&self) -> Option<String> {
        (!self.degraded.is_empty()).then(|| self.degraded.join("; "))
    }

    /// What Kubernetes deletes along with `ids` in the live cluster of `root`, when it is live.
    pub fn blast_radius(&self, root: &str, ids: &[ObjectId]) -> BlastRadius {
        let cluster = self.live.get(root).or_else(|| self.live.get(""));
        match (cluster, &self.runtime) {
            (Some(cluster), Some(runtime)) => runtime.block_on(cluster.blast_radius(ids)),
            _ => BlastRadius::default(),
        }
    }

    pub fn has_live(&self) -> bool {
        !self.live.is_empty()
    }

    /// Requests sent to live clusters (for benchmarks and logs).
    pub fn request_count(&self) -> usize {
        self.live.values().map(|c| c.request_count()).sum()
    }
}
