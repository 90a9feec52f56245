//! A Kustomization's rollout, read-only: one GET of the Kustomization (no watch), parsed into the
//! revisions the controller reached, its Ready condition and its inventory. Reads of one cluster
//! are bounded (a semaphore per cluster), however many follow-ups run at once.

use super::kube::KubeError;
use crate::flux::KUSTOMIZE_GROUP;
use crate::plan::actual::Condition;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::Client;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// What the controller says of one Kustomization.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KustomizationState {
    /// `status.lastAppliedRevision`, e.g. `main@sha1:0123…`.
    pub last_applied: Option<String>,
    pub last_attempted: Option<String>,
    pub ready: Option<Condition>,
    /// `status.inventory.entries[].id`, sorted; `None` without an inventory.
    pub inventory: Option<Vec<String>>,
    /// Its deletion has started (a finalizer is pruning its inventory).
    pub deleting: bool,
}

impl KustomizationState {
    pub fn from_object(object: &Value) -> Self {
        let status = &object["status"];
        let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        let ready =
            status["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Ready").map(|c| {
                Condition {
                    status: text(&c["status"]).unwrap_or_default(),
                    reason: text(&c["reason"]).unwrap_or_default(),
                    message: text(&c["message"]).unwrap_or_default(),
                }
            });
        let inventory = status["inventory"]["entries"].as_array().map(|entries| {
            let mut ids: Vec<String> = entries.iter().filter_map(|e| text(&e["id"])).collect();
            ids.sort();
            ids.dedup();
            ids
        });
        KustomizationState {
            last_applied: text(&status["lastAppliedRevision"]),
            last_attempted: text(&status["lastAttemptedRevision"]),
            ready,
            inventory,
            deleting: object["metadata"]["deletionTimestamp"].is_string(),
        }
    }

    /// True when the Ready condition is False (the last attempt failed).
    pub fn failed(&self) -> bool {
        self.ready.as_ref().is_some_and(|c| c.status == "False")
    }
}

/// The commit a Flux revision names: `main@sha1:abc…` (Flux 2), `main/abc…` (older controllers),
/// `sha1:abc…`, or a bare commit.
pub fn revision_commit(revision: &str) -> &str {
    let tail = revision.rsplit_once('@').map_or(revision, |(_, t)| t);
    let tail = tail.rsplit_once(':').map_or(tail, |(_, t)| t);
    tail.rsplit_once('/').map_or(tail, |(_, t)| t)
}

/// A cluster's Kustomizations, read with at most `max_in_flight` requests at once.
pub struct RolloutReader {
    client: Client,
    resource: Mutex<Option<ApiResource>>,
    reads: Semaphore,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    requests: AtomicUsize,
}

impl RolloutReader {
    pub fn new(client: Client, max_in_flight: usize) -> Self {
        RolloutReader {
            client,
            resource: Mutex::new(None),
            reads: Semaphore::new(max_in_flight.max(1)),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
        }
    }

    /// The most requests this reader had in flight at once.
    pub fn peak_in_flight(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    pub fn request_count(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }

    /// The served Kustomization resource (v1, else an older served version), found once.
    async fn resource(&self) -> Result<ApiResource, KubeError> {
        if let Some(resource) = self.resource.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(resource);
        }
        let discovery = kube::Discovery::new(self.client.clone())
            .filter(&[KUSTOMIZE_GROUP])
            .run()
            .await
            .map_err(|e| KubeError::Unreachable(format!("discovery of {KUSTOMIZE_GROUP}: {e}")))?;
        let (resource, _) =
            discovery.get(KUSTOMIZE_GROUP).and_then(|g| g.recommended_kind("Kustomization")).ok_or_else(
                || KubeError::Api(format!("the cluster serves no {KUSTOMIZE_GROUP} Kustomizations")),
            )?;
        *self.resource.lock().unwrap_or_else(|e| e.into_inner()) = Some(resource.clone());
        Ok(resource)
    }

    /// Every Kustomization's inventory ids, by `namespace/name` (a paginated list, no watch).
    pub async fn inventories(&self) -> Result<BTreeMap<String, Vec<String>>, KubeError> {
        let resource = self.resource().await?;
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let mut inventories = BTreeMap::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = kube::api::ListParams::default().limit(500);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let page = {
                let _permit =
                    self.reads.acquire().await.map_err(|e| KubeError::Unreachable(e.to_string()))?;
                self.requests.fetch_add(1, Ordering::Relaxed);
                api.list(&params).await.map_err(|e| match e {
                    kube::Error::Api(status) if status.code == 403 => {
                        KubeError::Forbidden(format!("cannot list Kustomizations: {}", status.message))
                    }
                    other => KubeError::Unreachable(format!("cannot list Kustomizations: {other}")),
                })?
            };
            for object in page.items {
                let key = format!(
                    "{}/{}",
                    object.metadata.namespace.as_deref().unwrap_or(""),
                    object.metadata.name.as_deref().unwrap_or("")
                );
                let state =
                    KustomizationState::from_object(&serde_json::to_value(object).unwrap_or_default());
                inventories.insert(key, state.inventory.unwrap_or_default());
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(inventories);
            }
        }
    }

    /// One GET of Kustomization `namespace/name`; `None` when it is not in the cluster.
    pub async fn kustomization(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<KustomizationState>, KubeError> {
        let resource = self.resource().await?;
        let _permit = self.reads.acquire().await.map_err(|e| KubeError::Unreachable(e.to_string()))?;
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        self.requests.fetch_add(1, Ordering::Relaxed);
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, &resource);
        let answer = api.get_opt(name).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        match answer {
            Ok(object) => {
                Ok(object
                    .map(|o| KustomizationState::from_object(&serde_json::to_value(o).unwrap_or_default())))
            }
            Err(kube::Error::Api(status)) if status.code == 403 => Err(KubeError::Forbidden(format!(
                "cannot get Kustomization {namespace}/{name} (the role needs `get` on it): {}",
                status.message
            ))),
            Err(kube::Error::Api(status)) => Err(KubeError::Api(format!(
                "cannot get Kustomization {namespace}/{name}: {} ({})",
                status.message, status.code
            ))),
            Err(other) => {
                Err(KubeError::Unreachable(format!("cannot get Kustomization {namespace}/{name}: {other}")))
            }
        }
    }
}

/// One reader per cluster (kube context; "" for the default one), shared by a replica's workers.
#[derive(Default)]
pub struct RolloutReaders {
    readers: Mutex<BTreeMap<String, Arc<RolloutReader>>>,
    max_in_flight: usize,
}

impl RolloutReaders {
    pub fn new(max_in_flight: usize) -> Self {
        RolloutReaders { readers: Mutex::default(), max_in_flight: max_in_flight.max(1) }
    }

    /// Uses `reader` for `cluster` (tests hand in a client of a fake API server).
    pub fn insert(&self, cluster: &str, reader: Arc<RolloutReader>) {
        self.readers.lock().unwrap_or_else(|e| e.into_inner()).insert(cluster.to_string(), reader);
    }

    /// The reader of `cluster` (a kube context; "" for the current one or in-cluster).
    pub async fn get(&self, cluster: &str) -> Result<Arc<RolloutReader>, KubeError> {
        if let Some(reader) = self.readers.lock().unwrap_or_else(|e| e.into_inner()).get(cluster) {
            return Ok(reader.clone());
        }
        let client = super::kube::client((!cluster.is_empty()).then_some(cluster)).await?;
        let reader = Arc::new(RolloutReader::new(client, self.max_in_flight));
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        Ok(readers.entry(cluster.to_string()).or_insert(reader).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn revisions_name_their_commit_in_every_format() {
        assert_eq!(revision_commit("main@sha1:0123abc"), "0123abc");
        assert_eq!(revision_commit("refs/heads/main@sha1:0123abc"), "0123abc");
        assert_eq!(revision_commit("main/0123abc"), "0123abc");
        assert_eq!(revision_commit("sha1:0123abc"), "0123abc");
        assert_eq!(revision_commit("0123abc"), "0123abc");
    }

    #[test]
    fn the_status_gives_revisions_ready_and_a_sorted_inventory() {
        let state = KustomizationState::from_object(&json!({
            "metadata": {"name": "apps"},
            "status": {
                "lastAppliedRevision": "main@sha1:aaa",
                "lastAttemptedRevision": "main@sha1:bbb",
                "conditions": [
                    {"type": "Reconciling", "status": "True"},
                    {"type": "Ready", "status": "False", "reason": "BuildFailed", "message": "kustomize build failed"}
                ],
                "inventory": {"entries": [{"id": "b_x__ConfigMap", "v": "v1"}, {"id": "a_y__ConfigMap", "v": "v1"}]}
            }
        }));
        assert_eq!(state.last_applied.as_deref(), Some("main@sha1:aaa"));
        assert_eq!(state.last_attempted.as_deref(), Some("main@sha1:bbb"));
        assert!(state.failed());
        assert_eq!(state.ready.unwrap().reason, "BuildFailed");
        assert_eq!(state.inventory.unwrap(), vec!["a_y__ConfigMap", "b_x__ConfigMap"]);
        let bare = KustomizationState::from_object(&json!({"metadata": {"name": "apps"}}));
        assert_eq!(bare, KustomizationState::default());
    }
}
