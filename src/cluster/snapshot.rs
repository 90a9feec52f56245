//! The cluster snapshot file: what fluxplan knows of a cluster without talking to it. The format
//! is documented in docs/live-cluster.md; `fluxplan snapshot` writes it from a live cluster.
//!
//! ```yaml
//! apiVersion: fluxplan.dev/v1alpha1
//! kind: ClusterSnapshot
//! cluster: clusters/production      # optional: the repository root it describes
//! kustomizations: []                # Flux Kustomizations with spec and status
//! applications: []                  # Argo CD Applications with spec and status.resources
//! argocd: {trackingMethod: annotation, instanceLabelKey: app.kubernetes.io/instance}
//! objects: []                       # live metadata of inventory objects
//! namespaces: []                    # names, or {metadata: {name, labels}}
//! customResourceDefinitions: []     # {group, kind, scope}
//! configMaps: []                    # substituteFrom sources
//! secrets: []                       # data absent when values were left out
//! helmReleases: []                  # what uninstalling each live HelmRelease's release deletes
//! resourceSets: []                  # Flux Operator ResourceSets with status.inventory
//! resourceSetInputProviders: []     # input providers with status.exportedInputs
//! ```

use super::helm_storage::StoredReleaseSummary;
use super::{Lookup, SubstitutionSource};
use crate::argocd::tracking::TrackingMethod;
use crate::flux::control::{OWNER_NAMESPACE_LABEL, OWNER_NAME_LABEL};
use crate::flux::scope::Scope;
use crate::flux::{self, Kustomization, KustomizationRef, ObjectId};
use anyhow::{Context, Result};
use base64::Engine;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Key = (String, String);

/// A Kustomization as the cluster has it: its spec and what its inventory says it owns.
#[derive(Debug, Clone)]
pub struct LiveKustomization {
    pub spec: Kustomization,
    pub inventory: Vec<ObjectId>,
}

/// An Argo CD Application as the cluster has it: its spec and the resources its status lists.
#[derive(Debug, Clone)]
pub struct LiveApplication {
    pub application: crate::argocd::Application,
    /// `status.resources`: what the Application manages now.
    pub inventory: Vec<ObjectId>,
    /// Those marked `requiresPruning`: Git no longer holds them.
    pub requires_pruning: BTreeSet<ObjectId>,
}

#[derive(Debug, Default, Clone)]
pub struct ClusterSnapshot {
    /// The repository root (cluster) this snapshot describes; `None` applies to every root.
    pub cluster: Option<String>,
    pub kustomizations: BTreeMap<KustomizationRef, LiveKustomization>,
    pub applications: BTreeMap<KustomizationRef, LiveApplication>,
    /// How Argo CD tells which Application an object belongs to (argocd-cm).
    pub tracking: crate::argocd::tracking::TrackingMethod,
    /// Live metadata (apiVersion, kind, metadata) by inventory id.
    pub objects: BTreeMap<ObjectId, Value>,
    pub namespaces: BTreeSet<String>,
    /// Labels of each namespace (empty when the file lists names only).
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Helm releases read from their storage, by (storage namespace, release name); `None` when
    /// the storage was not read (no `--read-secrets`, or a file without `helmReleases`).
    pub helm_releases: Option<BTreeMap<Key, StoredReleaseSummary>>,
    /// (group, kind) → scope of the CRDs the cluster serves.
    pub crds: BTreeMap<(String, String), Scope>,
    /// The inventory of each live ResourceSet; `None` when they were not read.
    pub resource_sets: Option<BTreeMap<KustomizationRef, Vec<ObjectId>>>,
    /// The live ResourceSetInputProviders with their exported inputs; `None` when not read.
    pub input_providers: Option<std::sync::Arc<Vec<Value>>>,
    /// The server's Kubernetes version (`v1.33.2`) and the group versions it serves, for charts'
    /// `.Capabilities`.
    pub kube_version: Option<String>,
    pub api_versions: Vec<String>,
    /// How many nodes the cluster has (`nodeCount`): DaemonSets run a pod on each.
    pub nodes: Option<u64>,
    /// (group, kind, namespace) the reader was not allowed to list: what lives there is unknown.
    pub unreadable: BTreeSet<(String, String, String)>,
    /// What went wrong while reading (403s, pages that expired), for the report.
    pub warnings: Vec<String>,
    config_maps: BTreeMap<Key, Value>,
    secrets: BTreeMap<Key, Value>,
    /// Read from a live cluster: the Secrets (namespace, name) its HelmReleases take values from
    /// (`valuesFrom`), whether they exist or not; the only Secrets a chart's values are read from.
    pub readable_secrets: BTreeSet<Key>,
    /// Read from a live cluster: the Secrets its Kustomizations substitute from
    /// (`postBuild.substituteFrom`); with `readable_secrets`, the only Secrets looked up for a
    /// render.
    pub substitution_secrets: BTreeSet<Key>,
    /// The document as read, to write it back.
    document: Value,
}

fn key_of(obj: &Value) -> Option<Key> {
    let meta = &obj["metadata"];
    Some((meta["namespace"].as_str().unwrap_or("default").to_string(), meta["name"].as_str()?.to_string()))
}

fn list<'a>(doc: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    doc.get(field).and_then(Value::as_array).into_iter().flatten()
}

fn index(doc: &Value, field: &str) -> BTreeMap<Key, Value> {
    list(doc, field).filter_map(|obj| Some((key_of(obj)?, obj.clone()))).collect()
}

/// The inventory id of a live object (the API never gives cluster-scoped objects a namespace).
pub fn live_id(object: &Value) -> Option<ObjectId> {
    let (group, _) = flux::split_api_version(object["apiVersion"].as_str()?);
    let meta = &object["metadata"];
    Some(ObjectId::new(
        meta["namespace"].as_str().unwrap_or(""),
        meta["name"].as_str()?,
        group,
        object["kind"].as_str()?,
    ))
}

impl ClusterSnapshot {
    /// What charts rendered for this cluster see: its Kubernetes version and API versions (unless
    /// given already), and whether each release is installed (an upgrade renders as one); and
    /// the inputs its ResourceSets' providers export.
    pub fn apply_to_charts(&self, opts: &mut crate::render::RenderOptions) {
        if opts.kube_version.is_none() {
            opts.kube_version = self.kube_version.clone();
        }
        opts.api_versions = self.api_versions.clone();
        opts.input_providers = self.input_providers.clone();
        if let Some(read) = &self.helm_releases {
            let installed = read
                .iter()
                .filter(|(_, stored)| stored.status != "uninstalled")
                .map(|(key, _)| key.clone())
                .collect();
            opts.installed_releases =
                crate::render::helm::installed::Installed::Stored(std::sync::Arc::new(installed));
        }
    }

    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read cluster snapshot {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("cluster snapshot {} is not valid", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let doc =
            crate::yaml::parse_documents(text).map_err(anyhow::Error::msg)?.pop().unwrap_or(Value::Null);
        Self::from_document(doc)
    }

    /// The snapshot as a YAML document (the file format).
    pub fn to_yaml(&self) -> String {
        crate::yaml::to_yaml(&self.document)
    }

    /// Records the repository root this snapshot describes.
    pub fn set_cluster(&mut self, root: &str) {
        self.cluster = Some(root.to_string());
        self.document["cluster"] = Value::String(root.to_string());
    }

    /// True when objects of this kind in this namespace could not be read.
    pub fn is_unreadable(&self, id: &ObjectId) -> bool {
        self.unreadable.contains(&(id.group.clone(), id.kind.clone(), id.namespace.clone()))
    }

    /// Reads the document form (what the file holds and what the cluster reader builds).
    pub fn from_document(doc: Value) -> Result<Self> {
        anyhow::ensure!(
            doc.get("kind").and_then(Value::as_str) == Some("ClusterSnapshot"),
            "expected a document of kind ClusterSnapshot"
        );
        let mut snapshot = ClusterSnapshot {
            cluster: doc["cluster"].as_str().map(str::to_string),
            config_maps: index(&doc, "configMaps"),
            secrets: index(&doc, "secrets"),
            namespaces: list(&doc, "namespaces")
                .filter_map(|n| n.as_str().or_else(|| n["metadata"]["name"].as_str()).map(str::to_string))
                .collect(),
            unreadable: list(&doc, "unreadable")
                .map(|u| {
                    let field = |k: &str| u[k].as_str().unwrap_or("").to_string();
                    (field("group"), field("kind"), field("namespace"))
                })
                .collect(),
            warnings: list(&doc, "warnings").filter_map(|w| w.as_str().map(str::to_string)).collect(),
            ..Default::default()
        };
        for namespace in list(&doc, "namespaces") {
            let Some(name) = namespace.as_str().or_else(|| namespace["metadata"]["name"].as_str()) else {
                continue;
            };
            let labels = namespace["metadata"]["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect();
            snapshot.namespace_labels.insert(name.to_string(), labels);
        }
        if let Some(releases) = doc.get("helmReleases").and_then(Value::as_array) {
            let mut read = BTreeMap::new();
            for (index, entry) in releases.iter().enumerate() {
                match serde_json::from_value::<StoredReleaseSummary>(entry.clone()) {
                    Ok(release) => {
                        read.insert((release.storage_namespace.clone(), release.name.clone()), release);
                    }
                    Err(_) => snapshot
                        .warnings
                        .push(format!("helmReleases[{index}] is not a release summary: ignored")),
                }
            }
            snapshot.helm_releases = Some(read);
        }
        if let Some(sets) = doc.get("resourceSets").and_then(Value::as_array) {
            let mut read = BTreeMap::new();
            for set in sets {
                let meta = &set["metadata"];
                let (Some(namespace), Some(name)) = (meta["namespace"].as_str(), meta["name"].as_str())
                else {
                    continue;
                };
                let inventory = set["status"]["inventory"]["entries"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e["id"].as_str().and_then(ObjectId::parse))
                    .collect();
                read.insert(KustomizationRef { namespace: namespace.into(), name: name.into() }, inventory);
            }
            snapshot.resource_sets = Some(read);
        }
        if let Some(providers) = doc.get("resourceSetInputProviders").and_then(Value::as_array) {
            snapshot.input_providers = Some(std::sync::Arc::new(providers.clone()));
        }
        for object in list(&doc, "objects") {
            if let Some(id) = live_id(object) {
                snapshot.objects.insert(id, object.clone());
            }
        }
        snapshot.kube_version = doc["kubeVersion"].as_str().filter(|v| !v.is_empty()).map(str::to_string);
        // A count the cluster reader wrote; a hand-written file may say anything: only a whole
        // number reads.
        snapshot.nodes = doc["nodeCount"].as_u64();
        snapshot.api_versions =
            list(&doc, "apiVersions").filter_map(|v| v.as_str()).map(str::to_string).collect();
        for crd in list(&doc, "customResourceDefinitions") {
            // Either {group, kind, scope} or a CustomResourceDefinition manifest.
            let spec = if crd.get("spec").is_some() { &crd["spec"] } else { crd };
            let kind = spec["kind"].as_str().or_else(|| spec["names"]["kind"].as_str());
            if let (Some(group), Some(kind)) = (spec["group"].as_str(), kind) {
                let scope = if spec["scope"] == "Cluster" { Scope::Cluster } else { Scope::Namespaced };
                snapshot.crds.insert((group.to_string(), kind.to_string()), scope);
            }
        }
        let settings = &doc["argocd"];
        if settings.is_object() {
            let method = settings["trackingMethod"].as_str().unwrap_or("");
            snapshot.tracking = TrackingMethod::parse(method, settings["instanceLabelKey"].as_str())
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "argocd.trackingMethod {method:?} is not annotation, label or annotation+label"
                    )
                })?;
        }
        for manifest in list(&doc, "applications") {
            // One Application fluxplan cannot read (a newer source kind) must not hide the others.
            let application = match crate::argocd::Application::from_value(manifest, "argocd") {
                Ok(application) => application,
                Err(e) => {
                    snapshot.warnings.push(format!("applications: {e}: left out, planned as unknown"));
                    continue;
                }
            };
            let mut inventory = Vec::new();
            let mut requires_pruning = BTreeSet::new();
            for resource in list(&manifest["status"], "resources") {
                let field = |k: &str| resource[k].as_str().unwrap_or("");
                if field("name").is_empty() || field("kind").is_empty() {
                    continue;
                }
                let id = ObjectId::new(field("namespace"), field("name"), field("group"), field("kind"));
                if resource["requiresPruning"] == Value::Bool(true) {
                    requires_pruning.insert(id.clone());
                }
                inventory.push(id);
            }
            inventory.sort();
            inventory.dedup();
            let reference =
                KustomizationRef { namespace: application.namespace.clone(), name: application.name.clone() };
            snapshot
                .applications
                .insert(reference, LiveApplication { application, inventory, requires_pruning });
        }
        for manifest in list(&doc, "kustomizations") {
            let spec = Kustomization::from_value(manifest, "flux-system")
                .map_err(|e| anyhow::anyhow!("kustomizations: {e}"))?;
            let inventory = snapshot.inventory_of(manifest, &spec);
            snapshot.kustomizations.insert(spec.reference(), LiveKustomization { spec, inventory });
        }
        snapshot.document = doc;
        Ok(snapshot)
    }

    /// True when this snapshot describes the cluster rooted at `cluster`.
    pub fn applies_to(&self, cluster: &str) -> bool {
        self.cluster.as_deref().is_none_or(|c| c.trim_matches('/').trim_start_matches("./") == cluster)
    }

    /// The inventory: v1/v1beta2 `status.inventory.entries`, or for v1beta1 `status.snapshot` the
    /// objects of the listed kinds and namespaces that carry this Kustomization's owner labels
    /// (the way the old controller found them).
    fn inventory_of(&self, manifest: &Value, spec: &Kustomization) -> Vec<ObjectId> {
        let status = &manifest["status"];
        if let Some(entries) = status["inventory"]["entries"].as_array() {
            let mut ids: Vec<ObjectId> =
                entries.iter().filter_map(|e| ObjectId::parse(e["id"].as_str()?)).collect();
            ids.sort();
            return ids;
        }
        let Some(entries) = status["snapshot"]["entries"].as_array() else { return Vec::new() };
        let mut kinds: BTreeSet<(String, String, String)> = BTreeSet::new();
        for entry in entries {
            let namespace = entry["namespace"].as_str().unwrap_or("").to_string();
            for key in entry["kinds"].as_object().into_iter().flat_map(|m| m.keys()) {
                // "apps/v1, Kind=Deployment" or "v1, Kind=ConfigMap"
                let Some((api, kind)) = key.split_once(", Kind=") else { continue };
                let group = flux::split_api_version(api).0.to_string();
                kinds.insert((namespace.clone(), group, kind.to_string()));
            }
        }
        self.objects
            .iter()
            .filter(|(id, object)| {
                let labels = &object["metadata"]["labels"];
                labels[OWNER_NAME_LABEL] == spec.name.as_str()
                    && labels[OWNER_NAMESPACE_LABEL] == spec.namespace.as_str()
                    && kinds.contains(&(id.namespace.clone(), id.group.clone(), id.kind.clone()))
            })
            .map(|(id, _)| id.clone())
            .collect()
    }
}

fn string_values(map: Option<&Value>, decode: bool) -> BTreeMap<String, String> {
    let engine = base64::engine::general_purpose::STANDARD;
    map.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let text = v.as_str()?;
            let value =
                if decode { String::from_utf8(engine.decode(text).ok()?).ok()? } else { text.to_string() };
            Some((k.clone(), value))
        })
        .collect()
}

/// A Secret's values, decoded (`data`, then `stringData` over it).
pub(crate) fn secret_values(secret: &Value) -> BTreeMap<String, String> {
    let mut values = string_values(secret.get("data"), true);
    values.extend(string_values(secret.get("stringData"), false));
    values
}

impl SubstitutionSource for ClusterSnapshot {
    fn lookup(&self, kind: &str, namespace: &str, name: &str) -> Lookup {
        let key = (namespace.to_string(), name.to_string());
        match kind {
            "ConfigMap" => match self.config_maps.get(&key) {
                Some(cm) => Lookup::Found(string_values(cm.get("data"), false)),
                None => Lookup::NotFound,
            },
            "Secret" => match self.secrets.get(&key) {
                Some(s) if s.get("data").is_none() && s.get("stringData").is_none() => Lookup::Unknown,
                Some(s) => Lookup::Found(secret_values(s)),
                // A snapshot holds the Secrets the cluster's Flux objects read when it was taken,
                // not every Secret: one a pull request names may well exist.
                None => Lookup::Unknown,
            },
            _ => Lookup::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_config_maps_and_decodes_secrets() {
        let snap = ClusterSnapshot::parse(
            "kind: ClusterSnapshot\nconfigMaps:\n- metadata: {namespace: flux-system, name: vars}\n  data: {a: '1'}\n\
             secrets:\n- metadata: {namespace: flux-system, name: s}\n  data: {pw: aHVudGVyMg==}\n\
             - metadata: {namespace: flux-system, name: hidden}\n",
        )
        .unwrap();
        assert_eq!(
            snap.lookup("ConfigMap", "flux-system", "vars"),
            Lookup::Found([("a".into(), "1".into())].into())
        );
        assert_eq!(
            snap.lookup("Secret", "flux-system", "s"),
            Lookup::Found([("pw".into(), "hunter2".into())].into())
        );
        assert_eq!(snap.lookup("Secret", "flux-system", "hidden"), Lookup::Unknown);
        assert_eq!(snap.lookup("Secret", "flux-system", "not-in-the-file"), Lookup::Unknown);
        assert_eq!(snap.lookup("ConfigMap", "flux-system", "nope"), Lookup::NotFound);
    }

    #[test]
    fn namespaces_are_names_or_objects_with_labels() {
        let snap = ClusterSnapshot::parse(
            "kind: ClusterSnapshot\nnamespaces:\n- plain\n- metadata: {name: team-a, labels: {team: a}}\n",
        )
        .unwrap();
        assert_eq!(snap.namespaces, ["plain".to_string(), "team-a".to_string()].into());
        assert!(snap.namespace_labels["plain"].is_empty());
        assert_eq!(snap.namespace_labels["team-a"]["team"], "a");
        assert!(snap.helm_releases.is_none(), "no helmReleases: the storage was not read");
    }

    #[test]
    fn reads_helm_release_summaries() {
        let snap = ClusterSnapshot::parse(
            "kind: ClusterSnapshot\nhelmReleases:\n- {name: web, namespace: apps, storageNamespace: flux-system, \
             version: 2, objects: [apps_web_apps_Deployment]}\n- nonsense\n",
        )
        .unwrap();
        let releases = snap.helm_releases.as_ref().unwrap();
        let web = &releases[&("flux-system".to_string(), "web".to_string())];
        assert_eq!((web.version, web.objects.len()), (2, 1));
        assert_eq!(snap.warnings.len(), 1, "{:?}", snap.warnings);
    }

    #[test]
    fn rejects_other_documents() {
        assert!(ClusterSnapshot::parse("kind: ConfigMap\n").is_err());
    }

    fn with_status(api_version: &str, status: &str, objects: &str) -> String {
        format!(
            "kind: ClusterSnapshot\nkustomizations:\n- apiVersion: kustomize.toolkit.fluxcd.io/{api_version}\n  kind: Kustomization\n  metadata: {{name: apps, namespace: flux-system}}\n  spec: {{path: ./apps, prune: true, sourceRef: {{kind: GitRepository, name: flux-system}}}}\n  status:\n{status}objects:\n{objects}"
        )
    }

    #[test]
    fn reads_v1_inventories() {
        let text = with_status(
            "v1",
            "    inventory:\n      entries:\n      - {id: default_a__ConfigMap, v: v1}\n      - {id: _apps__Namespace, v: v1}\n",
            "",
        );
        let snap = ClusterSnapshot::parse(&text).unwrap();
        let live =
            &snap.kustomizations[&KustomizationRef { namespace: "flux-system".into(), name: "apps".into() }];
        assert!(live.spec.prune);
        let ids: Vec<String> = live.inventory.iter().map(|i| i.to_string()).collect();
        assert_eq!(ids, vec!["_apps__Namespace", "default_a__ConfigMap"]);
    }

    #[test]
    fn reads_v1beta1_snapshots_through_owner_labels() {
        let owner = |name: &str| {
            format!("{{kustomize.toolkit.fluxcd.io/name: {name}, kustomize.toolkit.fluxcd.io/namespace: flux-system}}")
        };
        let objects = format!(
            "- {{apiVersion: apps/v1, kind: Deployment, metadata: {{name: web, namespace: default, labels: {}}}}}\n\
             - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: other-owner, namespace: default, labels: {}}}}}\n\
             - {{apiVersion: v1, kind: Secret, metadata: {{name: unlisted-kind, namespace: default, labels: {}}}}}\n",
            owner("apps"),
            owner("infra"),
            owner("apps")
        );
        let text = with_status(
            "v1beta1",
            "    snapshot:\n      checksum: abc\n      entries:\n      - namespace: default\n        kinds: {\"apps/v1, Kind=Deployment\": Deployment, \"v1, Kind=ConfigMap\": ConfigMap}\n",
            &objects,
        );
        let snap = ClusterSnapshot::parse(&text).unwrap();
        let live = snap.kustomizations.values().next().unwrap();
        let ids: Vec<String> = live.inventory.iter().map(|i| i.to_string()).collect();
        assert_eq!(ids, vec!["default_web_apps_Deployment"]);
    }
}
