//! Turning a source tree into objects per Kustomization, as kustomize-controller would: the
//! kustomize runner, the cache, and the walk that follows nested Kustomizations.

mod argo;
mod artifacts;
pub mod build;
pub mod cache;
pub(crate) mod confined;
mod engine;
mod finished;
pub mod helm;
mod kept;
pub mod kustomize;
pub mod leftovers;
mod local_sources;
pub mod postbuild;
pub mod progress;
mod reach;
pub mod references;
pub mod repo_root;
pub mod resourceset;
pub mod roots;
pub mod scratch;
pub mod source;
mod walk;

pub use argo::{kept_applications, ArgoUnit, Hook, KeptApplication};
pub use helm::HelmUnit;
pub use kustomize::{library, worker};
pub use roots::{DeclaredRoot, DeclaredSource, RootKind, SourceName};
pub use scratch::is_fluxplan_scratch;
pub use walk::{render, Renderer};

use crate::cluster::SubstitutionSource;
use crate::flux::{Kustomization, KustomizationRef, ObjectId, SourceRef};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Why a Kustomization could not be rendered; the code names the failure for machines.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RenderError {
    #[error("{0}")]
    PathNotFound(String),
    #[error("{0}")]
    InvalidSource(String),
    #[error("{0}")]
    RemoteBase(String),
    #[error("kustomize build failed: {0}")]
    Kustomize(String),
    #[error("{0}")]
    Substitution(String),
    #[error("{0}")]
    InvalidSpec(String),
    #[error("{0}")]
    Cycle(String),
    #[error("{0}")]
    Apply(String),
    /// A ResourceSet's templates cannot be built as the Flux Operator builds them.
    #[error("{0}")]
    Template(String),
    /// Over a limit (time, output): never silent, always a `source-limit` alert.
    #[error("{0}")]
    Limit(String),
    /// The plan was stopped; the render is abandoned.
    #[error("render stopped: {0}")]
    Cancelled(crate::cancel::CancelReason),
}

impl RenderError {
    pub fn code(&self) -> &'static str {
        match self {
            RenderError::PathNotFound(_) => "path-not-found",
            RenderError::InvalidSource(_) => "invalid-source",
            RenderError::RemoteBase(_) => "remote-base",
            RenderError::Kustomize(_) => "kustomize-failed",
            RenderError::Substitution(_) => "substitution-failed",
            RenderError::InvalidSpec(_) => "invalid-spec",
            RenderError::Cycle(_) => "cycle",
            RenderError::Apply(_) => "apply-would-fail",
            RenderError::Template(_) => "template-failed",
            RenderError::Limit(_) => "source-limit",
            RenderError::Cancelled(_) => "cancelled",
        }
    }
}

impl From<crate::tree::Unreadable> for RenderError {
    fn from(e: crate::tree::Unreadable) -> Self {
        RenderError::InvalidSource(e.to_string())
    }
}

/// The error as reported.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ErrorReport {
    pub code: &'static str,
    pub message: String,
}

impl ErrorReport {
    /// `code: message` for prose, the code left out when the message opens saying it already
    /// (`kustomize-failed` and "kustomize build failed: ..."): no doubled prefix.
    pub fn described(&self) -> String {
        let opening = self.message.split(':').next().unwrap_or_default().to_lowercase();
        if self.code.split('-').all(|word| opening.contains(word)) {
            self.message.clone()
        } else {
            format!("{}: {}", self.code, self.message)
        }
    }
}

impl From<&RenderError> for ErrorReport {
    fn from(e: &RenderError) -> Self {
        ErrorReport { code: e.code(), message: e.to_string() }
    }
}

/// One object a Kustomization would apply.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedObject {
    /// The inventory id (known once the scope of every kind is known).
    pub id: Option<ObjectId>,
    /// True when values substituted from Secrets make its name or namespace: its Kustomization is
    /// not planned, since which of the cluster's objects it matches would tell the values.
    #[serde(skip)]
    pub named_from_secret: bool,
    /// The repository file the object came from, when kustomize says.
    pub origin: Option<String>,
    /// The manifest as shown: Secret data and values substituted from Secrets masked. Shared:
    /// a unit whose finished render base and head both read holds one copy (see
    /// `finished::Decoded`).
    #[serde(rename = "manifest", serialize_with = "shared_value")]
    pub object: Arc<Value>,
    /// Digest of the real manifest, to compare renders without showing secrets.
    #[serde(skip)]
    pub digest: String,
    /// Digest per Secret data key (`data.KEY`, `stringData.KEY`).
    #[serde(skip)]
    pub secret_digests: BTreeMap<String, String>,
    /// The real manifest of a nested Kustomization when it differs from the shown one.
    #[serde(skip)]
    pub real: Option<Value>,
    /// True when values substituted from Secrets were masked in the shown manifest.
    #[serde(skip)]
    pub holds_secret_values: bool,
    /// Of a nested Kustomization: what its template takes from Secrets.
    #[serde(skip)]
    pub secret_template: SecretTemplate,
}

fn shared_value<S: serde::Serializer>(value: &Arc<Value>, serializer: S) -> Result<S::Ok, S::Error> {
    value.as_ref().serialize(serializer)
}

/// What a nested Kustomization's template takes from variables its parent substitutes from
/// Secrets, read from the template and never from the values: a value that breaks the YAML, or
/// a substring that happens to equal the mask, must not change the answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretTemplate {
    /// Its spec's fields (`spec.path`) other than `postBuild.substitute`.
    pub spec_fields: Vec<String>,
    /// Its own `postBuild.substitute` variables.
    pub substitutes: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Rendered,
    Failed,
    /// Its source is not available locally: listed, not rendered.
    External,
}

/// What a unit of a plan is: the object whose controller applies and prunes its objects.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default, schemars::JsonSchema,
)]
pub enum UnitKind {
    /// A Flux Kustomization.
    #[default]
    Kustomization,
    /// An Argo CD Application.
    Application,
    /// An Argo CD ApplicationSet: its objects are the Applications it generates.
    ApplicationSet,
    /// A Flux HelmRelease: its objects are its chart's, as helm-controller installs them.
    HelmRelease,
    /// A Flux Operator ResourceSet: its objects are its templates rendered for every input.
    ResourceSet,
}

/// The GitOps engine whose rules a unit follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Flux,
    #[serde(rename = "argocd")]
    ArgoCd,
    /// helm-controller: a Helm release installed and upgraded from a chart.
    Helm,
    /// The Flux Operator: a ResourceSet's objects, applied and pruned by its inventory.
    #[serde(rename = "resourceset")]
    ResourceSet,
}

impl UnitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UnitKind::Kustomization => "Kustomization",
            UnitKind::Application => "Application",
            UnitKind::ApplicationSet => "ApplicationSet",
            UnitKind::HelmRelease => "HelmRelease",
            UnitKind::ResourceSet => "ResourceSet",
        }
    }

    /// The API group of the unit's own object.
    pub fn group(self) -> &'static str {
        match self {
            UnitKind::Kustomization => crate::flux::KUSTOMIZE_GROUP,
            UnitKind::Application | UnitKind::ApplicationSet => crate::argocd::GROUP,
            UnitKind::HelmRelease => crate::flux::helm::HELM_GROUP,
            UnitKind::ResourceSet => crate::flux::resourceset::GROUP,
        }
    }

    pub fn engine(self) -> Engine {
        match self {
            UnitKind::Kustomization => Engine::Flux,
            UnitKind::Application | UnitKind::ApplicationSet => Engine::ArgoCd,
            UnitKind::HelmRelease => Engine::Helm,
            UnitKind::ResourceSet => Engine::ResourceSet,
        }
    }
}

impl Engine {
    /// The controller that applies and prunes, as messages name it.
    pub fn controller(self) -> &'static str {
        match self {
            Engine::Flux => "Flux",
            Engine::ArgoCd => "Argo CD",
            Engine::Helm => "helm-controller",
            Engine::ResourceSet => "the Flux Operator",
        }
    }
}

/// A unit of a cluster: its kind, namespace and name (a Kustomization and a HelmRelease may share
/// a namespace and name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnitRef {
    // Field order is sort order: units sort by namespace and name, as plans always have.
    pub namespace: String,
    pub name: String,
    pub kind: UnitKind,
}

impl UnitRef {
    pub fn new(kind: UnitKind, namespace: &str, name: &str) -> Self {
        UnitRef { kind, namespace: namespace.to_string(), name: name.to_string() }
    }

    pub fn reference(&self) -> KustomizationRef {
        KustomizationRef { namespace: self.namespace.clone(), name: self.name.clone() }
    }

    /// `Kustomization ns/name`, `HelmRelease ns/name`.
    pub fn label(&self) -> String {
        format!("{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// `namespace/name`, as messages have always named units.
impl std::fmt::Display for UnitRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One Kustomization (or Argo CD Application) of a cluster and what it renders to.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedKustomization {
    pub namespace: String,
    pub name: String,
    pub kind: UnitKind,
    pub path: String,
    pub source: SourceRef,
    /// The Kustomization whose render produced this one (none for the root).
    pub parent: Option<KustomizationRef>,
    /// The repository file that defines it.
    pub file: Option<String>,
    pub status: Status,
    pub error: Option<ErrorReport>,
    pub warnings: Vec<String>,
    /// Variables left unresolved because only the cluster knows their value.
    pub unresolved_variables: Vec<String>,
    pub objects: Vec<RenderedObject>,
    /// The spec as rendered (the parent's patches and substitution applied).
    #[serde(skip)]
    pub spec: Option<Kustomization>,
    /// What Argo CD knows of an Application or ApplicationSet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argocd: Option<Box<ArgoUnit>>,
    /// Not planned because its source, a GitRepository of this repository, adds content from
    /// elsewhere: what it adds (`spec.include …`, `spec.recurseSubmodules …`).
    #[serde(skip)]
    pub source_adds: Option<String>,
    /// A Kustomization whose spec fields (`spec.path`) its parent substitutes from Secrets: not
    /// rendered (`external`), since what it renders would tell the values.
    #[serde(skip)]
    pub secret_spec: Option<String>,
    /// What helm-controller knows of a HelmRelease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub helm: Option<Box<helm::HelmUnit>>,
    /// What the Flux Operator knows of a ResourceSet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resourceset: Option<Box<resourceset::ResourceSetUnit>>,
}

impl RenderedKustomization {
    /// A unit about to be rendered: nothing rendered, no error yet.
    pub fn new(
        kind: UnitKind,
        reference: KustomizationRef,
        path: String,
        source: SourceRef,
        parent: Option<KustomizationRef>,
        file: Option<String>,
    ) -> Self {
        RenderedKustomization {
            namespace: reference.namespace,
            name: reference.name,
            kind,
            path,
            source,
            parent,
            file,
            status: Status::Rendered,
            error: None,
            warnings: Vec::new(),
            unresolved_variables: Vec::new(),
            objects: Vec::new(),
            spec: None,
            argocd: None,
            source_adds: None,
            secret_spec: None,
            helm: None,
            resourceset: None,
        }
    }

    pub fn reference(&self) -> KustomizationRef {
        KustomizationRef { namespace: self.namespace.clone(), name: self.name.clone() }
    }

    pub fn unit_ref(&self) -> UnitRef {
        UnitRef::new(self.kind, &self.namespace, &self.name)
    }

    /// True when its controller applies nothing and prunes nothing (a suspended Kustomization or
    /// HelmRelease).
    pub fn suspended(&self) -> bool {
        match (&self.helm, &self.resourceset) {
            (Some(helm), _) => helm.suspended,
            (None, Some(set)) => set.disabled,
            (None, None) => self.spec.as_ref().is_some_and(|s| s.suspend),
        }
    }

    /// True when what it no longer renders is deleted (a Helm upgrade always deletes what the
    /// new manifest no longer holds, but for `helm.sh/resource-policy: keep`).
    pub fn prunes(&self) -> bool {
        match (&self.argocd, &self.helm) {
            (Some(unit), _) => unit.prunes(),
            (None, Some(_)) => true,
            // The operator deletes what a ResourceSet no longer generates.
            (None, None) if self.resourceset.is_some() => true,
            (None, None) => self.spec.as_ref().is_some_and(|s| s.prune),
        }
    }

    /// `Kustomization ns/name`, `Application ns/name`.
    pub fn label(&self) -> String {
        format!("{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// The Kustomizations reached from one root: one cluster.
#[derive(Debug, Clone, Serialize)]
pub struct Cluster {
    /// The root's path (`clusters/production`), its declared name, or for a fallback root the
    /// directory of its file (see `roots::cluster_names`).
    pub name: String,
    pub root: KustomizationRef,
    /// How the root was found.
    pub found_by: RootKind,
    /// The file that declares the root, when one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_file: Option<String>,
    pub kustomizations: Vec<RenderedKustomization>,
}

impl Cluster {
    /// The root's own render.
    pub fn root_kustomization(&self) -> Option<&RenderedKustomization> {
        self.kustomizations.iter().find(|k| k.parent.is_none() && k.reference() == self.root)
    }
}

/// A Kustomization file that no root reaches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Unreachable {
    pub file: String,
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RenderStats {
    pub builds: usize,
    pub cache_hits: usize,
}

/// A source whose artifact is this repository's files (see `Render::this_repo_artifacts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThisRepoArtifact {
    /// The kinds that name it (`GitRepository`; an `OCIRepository` a sync or `.fluxplan.yaml` names).
    pub kinds: BTreeSet<String>,
    /// The directory of the repository the artifact holds: empty for the whole repository.
    pub dir: String,
}

/// Everything Flux would reconcile from a repository at one revision.
#[derive(Debug, Clone, Serialize)]
pub struct Render {
    pub revision: Option<String>,
    pub clusters: Vec<Cluster>,
    pub unreachable: Vec<Unreachable>,
    pub warnings: Vec<String>,
    /// Source limits this revision breached (files left out for their size): each is a
    /// `source-limit` alert, since what Flux would read is not what was rendered.
    pub source_limits: Vec<String>,
    /// The kustomize that built it: `kustomize library vX (pykustomize Y)` or the binary's name
    /// and version.
    pub kustomize: String,
    #[serde(skip)]
    pub stats: RenderStats,
    /// The GitRepositories (`namespace/name`) rendered as this repository.
    #[serde(skip)]
    pub this_repo_sources: BTreeSet<String>,
    /// The sources (`namespace/name`) rendered from this repository's files, a directory
    /// mapped with `--source` left out: the kinds that name each, and the directory of the
    /// repository its artifact holds.
    #[serde(skip)]
    pub this_repo_artifacts: BTreeMap<String, ThisRepoArtifact>,
    /// The Flux Operator syncs found, and those among them not taken for this repository (see
    /// `RenderOptions::base_syncs`).
    #[serde(skip)]
    pub syncs: Vec<roots::InstanceSync>,
    /// The Kubernetes version named for each cluster (`--kube-version`, a clusters file's
    /// `kubeVersion`), by cluster name; a read cluster's own version is in its snapshot.
    #[serde(skip)]
    pub kube_versions: BTreeMap<String, String>,
    #[serde(skip)]
    pub untrusted_syncs: Vec<roots::InstanceSync>,
    /// Files of `RenderOptions::explain` under the path of a Kustomization rendered from this
    /// repository that its controller never reads, with why (left out of the artifact by an
    /// ignore rule, not a manifest file of a generated kustomization).
    #[serde(skip)]
    pub not_read: BTreeMap<String, String>,
    /// Files of `RenderOptions::explain` outside the path of every Kustomization rendered from
    /// this repository that one's build reads all the same (`../base`, files an ArtifactGenerator
    /// copies into its artifact).
    #[serde(skip)]
    pub read_by_builds: BTreeSet<String>,
    /// Files of `RenderOptions::explain` that every source of this repository a rendered
    /// Kustomization reads leaves out of its artifact (`.github/`, `.sourceignore`, `spec.ignore`).
    #[serde(skip)]
    pub ignored: BTreeSet<String>,
    /// Where each unit sits, built on the first lookup (see `UnitIndex`).
    #[serde(skip)]
    pub units: UnitIndex,
}

/// Where each unit of a render sits, by cluster, namespace and name: a plan looks up units once
/// per unit and pass, and a scan each time made a plan of 2,000 Kustomizations quadratic. Built
/// on the first lookup; a clone indexes itself anew, and a render whose units were added or
/// removed since is scanned as before (`Render::units_named`).
#[derive(Default)]
pub struct UnitIndex(std::sync::OnceLock<Positions>);

struct Positions {
    /// The number of units of each cluster when indexed.
    shape: Vec<usize>,
    /// (cluster, namespace, name) → (cluster index, unit index), in render order.
    at: std::collections::HashMap<(String, String, String), Vec<(usize, usize)>>,
}

impl Clone for UnitIndex {
    fn clone(&self) -> Self {
        UnitIndex::default()
    }
}

impl std::fmt::Debug for UnitIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UnitIndex")
    }
}

impl Render {
    /// A render of these clusters and nothing else.
    #[cfg(test)]
    pub(crate) fn with_clusters(clusters: Vec<Cluster>) -> Render {
        Render {
            revision: None,
            clusters,
            unreachable: Vec::new(),
            warnings: Vec::new(),
            source_limits: Vec::new(),
            kustomize: String::new(),
            stats: Default::default(),
            this_repo_sources: Default::default(),
            this_repo_artifacts: Default::default(),
            syncs: Default::default(),
            kube_versions: Default::default(),
            untrusted_syncs: Default::default(),
            not_read: Default::default(),
            read_by_builds: Default::default(),
            ignored: Default::default(),
            units: Default::default(),
        }
    }

    /// The units of a cluster named `namespace/name` (a Kustomization and a HelmRelease may share
    /// it), in render order.
    fn units_named(&self, cluster: &str, namespace: &str, name: &str) -> Vec<&RenderedKustomization> {
        let shape = || self.clusters.iter().map(|c| c.kustomizations.len());
        let positions = self.units.0.get_or_init(|| {
            let mut at: std::collections::HashMap<_, Vec<_>> = Default::default();
            for (i, c) in self.clusters.iter().enumerate() {
                for (j, k) in c.kustomizations.iter().enumerate() {
                    at.entry((c.name.clone(), k.namespace.clone(), k.name.clone())).or_default().push((i, j));
                }
            }
            Positions { shape: shape().collect(), at }
        });
        let named = |c: &Cluster, k: &RenderedKustomization| {
            c.name == cluster && k.namespace == namespace && k.name == name
        };
        if !positions.shape.iter().copied().eq(shape()) {
            return self.kustomizations().filter(|(c, k)| named(c, k)).map(|(_, k)| k).collect();
        }
        let key = (cluster.to_string(), namespace.to_string(), name.to_string());
        let found = positions.at.get(&key).map(Vec::as_slice).unwrap_or_default();
        found
            .iter()
            .map(|&(i, j)| (&self.clusters[i], &self.clusters[i].kustomizations[j]))
            .filter(|(c, k)| named(c, k))
            .map(|(_, k)| k)
            .collect()
    }

    /// Every Kustomization of every cluster.
    pub fn kustomizations(&self) -> impl Iterator<Item = (&Cluster, &RenderedKustomization)> {
        self.clusters.iter().flat_map(|c| c.kustomizations.iter().map(move |k| (c, k)))
    }

    /// The Kustomization (or Argo CD unit) `namespace/name` of a cluster: never a HelmRelease,
    /// which may share its namespace and name.
    pub fn kustomization(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
    ) -> Option<&RenderedKustomization> {
        self.units_named(cluster, namespace, name).into_iter().find(|k| k.kind != UnitKind::HelmRelease)
    }

    /// The unit `unit` of a cluster.
    pub fn unit(&self, cluster: &str, unit: &UnitRef) -> Option<&RenderedKustomization> {
        self.units_named(cluster, &unit.namespace, &unit.name).into_iter().find(|k| k.kind == unit.kind)
    }

    /// Every object a cluster's Kustomizations render.
    pub fn objects_of<'r>(&'r self, cluster: &'r str) -> impl Iterator<Item = &'r RenderedObject> {
        self.clusters
            .iter()
            .filter(move |c| c.name == cluster)
            .flat_map(|c| &c.kustomizations)
            .flat_map(|k| &k.objects)
    }

    /// The object of a cluster with this inventory id.
    pub fn object<'r>(&'r self, cluster: &'r str, id: &str) -> Option<&'r RenderedObject> {
        let id = crate::flux::ObjectId::parse(id)?;
        self.objects_of(cluster).find(|o| o.id.as_ref() == Some(&id))
    }

    /// Why this render cannot stand for the revision: Kustomizations exist, none rendered, and
    /// some were not rendered for want of a local source (a render where all fail is judged by
    /// its failures). A plan of it would otherwise read "no changes".
    pub fn nothing_rendered(&self) -> Option<String> {
        let listed: Vec<&RenderedKustomization> = self.kustomizations().map(|(_, k)| k).collect();
        let unplanned = listed.iter().any(|k| k.status == Status::External) || !self.unreachable.is_empty();
        if listed.iter().any(|k| k.status == Status::Rendered) || !unplanned {
            return None;
        }
        let mut lines = vec![format!(
            "nothing rendered: the repository defines {} and fluxplan rendered none of them, so it cannot tell \
             what Flux would apply or prune:",
            crate::words::count(listed.len() + self.unreachable.len(), "Kustomization", "Kustomizations")
        )];
        for k in &listed {
            let why = match (&k.error, k.warnings.first()) {
                (Some(error), _) => error.message.lines().next().unwrap_or("").to_string(),
                (None, Some(warning)) => warning.clone(),
                (None, None) => "not rendered".into(),
            };
            lines.push(format!("- {}/{}: {why}", k.namespace, k.name));
        }
        for u in &self.unreachable {
            lines.push(format!(
                "- {}: Kustomization {} is not reached from any root (no root renders it and its source is not local)",
                u.file, u.name
            ));
        }
        lines.push(
            "If these sources are this repository (a Flux Operator sync, or an artifact CI pushes from it), say \
             so in .fluxplan.yaml: `roots: [{path: clusters/prod}]` for each cluster's directory, and \
             `sources: [{kind: OCIRepository, name: NAME, namespace: NS, path: DIR}]` for other sources that \
             hold it or a directory of it (docs/flux-operator.md). ExternalArtifacts: add the ArtifactGenerator \
             that builds them. Sources of other repositories: map them with --source NAMESPACE/NAME=DIR (one \
             tree for base and head)."
                .into(),
        );
        Some(lines.join("\n"))
    }

    /// The first Kustomization named `namespace/name`.
    pub fn find(&self, reference: &str) -> Option<&RenderedKustomization> {
        self.kustomizations().map(|(_, k)| k).find(|k| format!("{}/{}", k.namespace, k.name) == reference)
    }
}

impl RenderedKustomization {
    /// Inventory ids of the objects, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> =
            self.objects.iter().filter_map(|o| o.id.as_ref()).map(|i| i.to_string()).collect();
        ids.sort();
        ids
    }
}

/// How to render.
#[derive(Clone)]
pub struct RenderOptions {
    pub repo: PathBuf,
    /// A git revision; `None` renders the working tree.
    pub rev: Option<String>,
    /// Other sources mapped to local directories, keyed `namespace/name`.
    pub sources: BTreeMap<String, PathBuf>,
    pub values: Arc<dyn SubstitutionSource>,
    /// Scopes of kinds the cluster serves (group, kind, scope), for custom resources whose CRD is
    /// not in the repository.
    pub known_scopes: Vec<(String, String, crate::flux::scope::Scope)>,
    /// URLs that name the repository being rendered, besides its git remotes (Argo CD
    /// Applications whose `repoURL` is one of them are rendered from it).
    pub repo_urls: Vec<String>,
    /// The branch the plan merges into: an Argo CD `targetRevision` naming it reads the tree being
    /// rendered. `None`: the branch `rev` names, else the one checked out.
    pub planned_branch: Option<String>,
    /// The commits a plan compares (base and head): a `targetRevision` that resolves to one of
    /// them reads the tree being rendered, even where the branch merged into is not known (else
    /// the head render would read the base's tree and plan nothing).
    pub planned_commits: Vec<String>,
    /// Repository files (a pull request's changes) to explain when no Kustomization reads them
    /// although they lie under one's path (see `Render::not_read`).
    pub explain: Vec<String>,
    /// Roots declared in the base revision's `.fluxplan.yaml`: when given, the only roots.
    pub declared_roots: Option<Vec<DeclaredRoot>>,
    /// Sources the base revision's `.fluxplan.yaml` says are this repository (`sources:`).
    pub declared_sources: Vec<DeclaredSource>,
    /// The base revision's Flux Operator syncs, when a plan renders its head: a sync the pull
    /// request adds or points elsewhere is not taken for this repository. `None` trusts every
    /// sync of the revision (`build`).
    pub base_syncs: Option<Vec<roots::InstanceSync>>,
    /// The ResourceSetInputProviders the live cluster holds, with their exported inputs; `None`
    /// when no cluster was read.
    pub input_providers: Option<Arc<Vec<Value>>>,
    /// Bootstrap roots of the plan's base, rendered at head when head no longer declares them.
    pub carried_roots: Vec<roots::CarriedRoot>,
    /// Applications an ApplicationSet that never updates what it generated (`applicationsSync:
    /// create-only` or `create-delete`) keeps as the base revision generated them, by cluster,
    /// ApplicationSet and Application (see `argo::kept_applications`).
    pub kept_applications: BTreeMap<KeptApplication, Value>,
    /// Scopes the repository declares (`crdScopes` in the base revision's `.fluxplan.yaml`):
    /// below the cluster's and the render's CRDs, above the built-in catalogue.
    pub declared_scopes: Vec<(String, String, crate::flux::scope::Scope)>,
    /// Values of particular clusters (by root path), when each root has its own cluster.
    pub cluster_values: BTreeMap<String, Arc<dyn SubstitutionSource>>,
    /// Keep this export for the next one of the same repository, and start from the one an
    /// earlier export kept (see `kept`): set where an on-disk cache is.
    pub keep_exports: bool,
    /// Strict substitution (undefined variables fail), the controller's default since 1.9.
    pub strict_substitution: bool,
    /// Charts given for HelmReleases (`--chart NAMESPACE/NAME=DIR|TGZ`), keyed `namespace/name`.
    pub charts: BTreeMap<String, PathBuf>,
    /// The Helm major version helm-controller runs (4 since Flux 2.8, 3 before).
    pub helm_major: u8,
    /// Where charts may be fetched from.
    pub chart_settings: crate::charts::Settings,
    /// Which Helm releases are installed: a HelmRelease of one renders as an upgrade
    /// (`.Release.IsUpgrade`).
    pub installed_releases: helm::installed::Installed,
    /// Helm versions and capabilities of particular clusters (by root path), from a clusters file.
    pub cluster_helm: BTreeMap<String, crate::planner::ClusterHelm>,
    /// `.Capabilities` for charts: the cluster's Kubernetes version and extra API versions.
    pub kube_version: Option<String>,
    pub api_versions: Vec<String>,
    pub jobs: usize,
    pub kustomize_timeout: Duration,
    /// The memory limit of every helm and kustomize process (bytes, `--max-render-memory`).
    pub memory_limit: u64,
    pub limits: source::SourceLimits,
    /// This render's part of the progress line on a terminal (`None`: no line).
    pub progress: Option<progress::Lane>,
    /// Stops the render (and kills its kustomize processes) from outside.
    pub cancel: crate::cancel::CancelToken,
}

impl RenderOptions {
    pub fn new(repo: impl Into<PathBuf>) -> Self {
        RenderOptions {
            repo: repo.into(),
            rev: None,
            sources: BTreeMap::new(),
            repo_urls: Vec::new(),
            planned_branch: None,
            planned_commits: Vec::new(),
            explain: Vec::new(),
            keep_exports: false,
            values: Arc::new(crate::cluster::Offline),
            cluster_values: BTreeMap::new(),
            declared_roots: None,
            declared_sources: Vec::new(),
            base_syncs: None,
            input_providers: None,
            carried_roots: Vec::new(),
            kept_applications: BTreeMap::new(),
            known_scopes: Vec::new(),
            declared_scopes: Vec::new(),
            strict_substitution: true,
            charts: BTreeMap::new(),
            helm_major: 4,
            chart_settings: Default::default(),
            cluster_helm: BTreeMap::new(),
            installed_releases: Default::default(),
            kube_version: None,
            api_versions: Vec::new(),
            jobs: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2),
            kustomize_timeout: Duration::from_secs(kustomize::DEFAULT_TIMEOUT_SECS),
            memory_limit: crate::sandbox::DEFAULT_MEMORY_LIMIT,
            limits: source::SourceLimits::default(),
            progress: None,
            cancel: crate::cancel::CancelToken::new(),
        }
    }
}

#[cfg(test)]
mod unit_index_tests {
    use super::*;

    fn unit(kind: UnitKind, name: &str, path: &str) -> RenderedKustomization {
        let reference = KustomizationRef { namespace: "flux-system".into(), name: name.into() };
        let source =
            SourceRef { kind: "GitRepository".into(), namespace: "flux-system".into(), name: "fs".into() };
        RenderedKustomization::new(kind, reference, path.into(), source, None, None)
    }

    fn render(clusters: Vec<(&str, Vec<RenderedKustomization>)>) -> Render {
        let clusters = clusters
            .into_iter()
            .map(|(name, kustomizations)| Cluster {
                name: name.into(),
                root: kustomizations[0].reference(),
                found_by: RootKind::Bootstrap,
                root_file: None,
                kustomizations,
            })
            .collect();
        Render::with_clusters(clusters)
    }

    /// The answer of a scan through every unit, as lookups were made before the index.
    fn scanned<'r>(render: &'r Render, cluster: &str, unit: &UnitRef) -> Option<&'r RenderedKustomization> {
        render.kustomizations().find(|(c, k)| c.name == cluster && k.unit_ref() == *unit).map(|(_, k)| k)
    }

    #[test]
    fn lookups_answer_as_a_scan_does_before_and_after_the_units_change() {
        let (ks, hr) = (UnitKind::Kustomization, UnitKind::HelmRelease);
        let mut render = render(vec![
            ("a", vec![unit(ks, "root", "a"), unit(hr, "app", "release"), unit(ks, "app", "apps")]),
            // The same names in another cluster, and a unit listed twice (the first wins).
            ("b", vec![unit(ks, "root", "b"), unit(ks, "app", "first"), unit(ks, "app", "second")]),
        ]);
        let asked: Vec<(&str, UnitRef)> = ["a", "b", "c"]
            .into_iter()
            .flat_map(|c| {
                [ks, hr].into_iter().flat_map(move |kind| {
                    ["root", "app", "gone"].map(|name| (c, UnitRef::new(kind, "flux-system", name)))
                })
            })
            .collect();
        let check = |render: &Render| {
            for (cluster, unit) in &asked {
                let path = |k: Option<&RenderedKustomization>| k.map(|k| k.path.clone());
                assert_eq!(
                    path(render.unit(cluster, unit)),
                    path(scanned(render, cluster, unit)),
                    "{cluster} {unit:?}"
                );
                let not_release = render
                    .kustomizations()
                    .find(|(c, k)| c.name == *cluster && k.kind != hr && k.reference() == unit.reference());
                assert_eq!(
                    path(render.kustomization(cluster, &unit.namespace, &unit.name)),
                    path(not_release.map(|(_, k)| k))
                );
            }
        };
        check(&render);
        assert_eq!(render.unit("a", &UnitRef::new(hr, "flux-system", "app")).unwrap().path, "release");
        assert_eq!(render.kustomization("a", "flux-system", "app").unwrap().path, "apps");
        assert_eq!(render.kustomization("b", "flux-system", "app").unwrap().path, "first");
        // Units removed and added after the first lookup: answered from the units as they are.
        render.clusters[0].kustomizations.remove(2);
        render.clusters[1].kustomizations.insert(0, unit(ks, "app", "zeroth"));
        check(&render);
        assert!(render.kustomization("a", "flux-system", "app").is_none());
        assert_eq!(render.kustomization("b", "flux-system", "app").unwrap().path, "zeroth");
        let copy = render.clone();
        check(&copy);
    }
}
