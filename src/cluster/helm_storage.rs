//! Helm's release storage: Secrets of type `helm.sh/release.v1` named
//! `sh.helm.release.v1.<release>.v<N>`, labelled `owner=helm,name=<release>,version=<N>`, whose
//! `data.release` is base64(gzip(JSON release)) — base64 again on the wire, as every Secret value.
//!
//! Storage content is both secret (chart values) and hostile (anyone who can write a Secret can
//! plant one): decoding is bounded, errors never quote content, and nothing leaves this module
//! but the kinds, namespaces and names of the objects the release's manifest holds.

use base64::Engine;
use serde::{Deserialize, Serialize};
use std::io::Read;

/// The `type` of Helm's storage Secrets.
pub const STORAGE_SECRET_TYPE: &str = "helm.sh/release.v1";
/// A decompressed release record bigger than this is refused (a real one is at most a few MiB:
/// its compressed form must fit the 1 MiB object limit).
pub const MAX_RELEASE_BYTES: u64 = 16 << 20;
/// The encoded value bigger than this is refused before decoding.
const MAX_ENCODED_BYTES: usize = 4 << 20;
/// Objects listed per release at most.
pub const MAX_OBJECTS: usize = 5_000;

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b, 0x08];

/// Why a storage Secret could not be read. Messages say what is wrong, never what is inside.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("the Secret has no `release` data")]
    Missing,
    #[error("the release data is not valid base64")]
    NotBase64,
    #[error("the release record is larger than {} MiB decompressed: refused", MAX_RELEASE_BYTES >> 20)]
    TooLarge,
    #[error("the release data is not valid gzip")]
    NotGzip,
    #[error("the release record is not the JSON Helm writes")]
    NotJson,
    #[error(
        "document {0} of the release manifest is not valid YAML: Helm cannot uninstall it cleanly either"
    )]
    InvalidManifest(usize),
    #[error("the release manifest holds more than {MAX_OBJECTS} objects: refused")]
    TooManyObjects,
}

/// One object of a release manifest, as far as uninstalling it matters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestObject {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// As written; Helm puts namespaced objects without one in the release namespace.
    pub namespace: Option<String>,
    /// The `helm.sh/resource-policy` annotation: Helm deletes only objects without it.
    pub resource_policy: Option<String>,
}

/// What a storage Secret says about its release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRelease {
    pub name: String,
    pub namespace: String,
    pub version: i64,
    pub status: String,
    pub objects: Vec<ManifestObject>,
    /// Hooks that run on uninstall (`pre-delete`, `post-delete`).
    pub delete_hooks: usize,
}

#[derive(Deserialize)]
struct StoredRelease {
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    version: i64,
    #[serde(default)]
    info: StoredInfo,
    #[serde(default)]
    manifest: String,
    #[serde(default)]
    hooks: Vec<StoredHook>,
}

#[derive(Deserialize, Default)]
struct StoredInfo {
    #[serde(default)]
    status: String,
}

#[derive(Deserialize)]
struct StoredHook {
    #[serde(default)]
    events: Vec<String>,
}

#[derive(Deserialize)]
struct Head {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: Option<HeadMetadata>,
}

#[derive(Deserialize)]
struct HeadMetadata {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    annotations: Option<std::collections::BTreeMap<String, serde_norway::Value>>,
}

/// Decodes a storage Secret's `data.release` exactly as the API returns it (base64 of Helm's
/// base64 text).
pub fn decode_secret_value(value: &str) -> Result<DecodedRelease, DecodeError> {
    if value.len() > MAX_ENCODED_BYTES {
        return Err(DecodeError::TooLarge);
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let helm_text = engine.decode(value.trim()).map_err(|_| DecodeError::NotBase64)?;
    decode_release(&helm_text)
}

/// Decodes Helm's own encoding: base64 text of a gzip stream (or, from before Helm compressed,
/// of the JSON itself).
pub fn decode_release(helm_text: &[u8]) -> Result<DecodedRelease, DecodeError> {
    let engine = base64::engine::general_purpose::STANDARD;
    let compressed = engine.decode(helm_text.trim_ascii()).map_err(|_| DecodeError::NotBase64)?;
    let json = if compressed.starts_with(GZIP_MAGIC) {
        let mut json = Vec::new();
        // Reading one byte past the bound tells a record at the limit from a bomb.
        flate2::read::MultiGzDecoder::new(compressed.as_slice())
            .take(MAX_RELEASE_BYTES + 1)
            .read_to_end(&mut json)
            .map_err(|_| DecodeError::NotGzip)?;
        json
    } else {
        compressed
    };
    if json.len() as u64 > MAX_RELEASE_BYTES {
        return Err(DecodeError::TooLarge);
    }
    let stored: StoredRelease = serde_json::from_slice(&json).map_err(|_| DecodeError::NotJson)?;
    let delete_hooks = stored
        .hooks
        .iter()
        .filter(|h| h.events.iter().any(|e| e == "pre-delete" || e == "post-delete"))
        .count();
    Ok(DecodedRelease {
        objects: manifest_objects(&stored.manifest)?,
        name: stored.name,
        namespace: stored.namespace,
        version: stored.version,
        status: stored.info.status,
        delete_hooks,
    })
}

/// The objects of a multi-document manifest, cut on `---` lines as Kubernetes cuts it.
pub fn manifest_objects(manifest: &str) -> Result<Vec<ManifestObject>, DecodeError> {
    let mut objects = Vec::new();
    for (index, document) in crate::yaml::split_stream(manifest).into_iter().enumerate() {
        if document.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
            continue;
        }
        let head: Option<Head> =
            serde_norway::from_str(document).map_err(|_| DecodeError::InvalidManifest(index + 1))?;
        let Some(head) = head else { continue };
        let metadata =
            head.metadata.unwrap_or(HeadMetadata { name: None, namespace: None, annotations: None });
        let (Some(kind), Some(name)) = (head.kind.filter(|k| !k.is_empty()), metadata.name) else {
            continue;
        };
        if objects.len() == MAX_OBJECTS {
            return Err(DecodeError::TooManyObjects);
        }
        let resource_policy = metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("helm.sh/resource-policy"))
            .map(|v| v.as_str().unwrap_or("").to_string());
        objects.push(ManifestObject {
            api_version: head.api_version.unwrap_or_default(),
            kind,
            name,
            namespace: metadata.namespace.filter(|n| !n.is_empty()),
            resource_policy,
        });
    }
    Ok(objects)
}

/// True when Helm keeps an object with this `helm.sh/resource-policy` on uninstall: Helm deletes
/// only objects without the annotation (`keep`, and any other value, are left in place).
pub fn kept_by_policy(policy: Option<&str>) -> bool {
    policy.is_some()
}

/// A release as the snapshot file records it: what uninstalling it deletes, by inventory id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredReleaseSummary {
    pub name: String,
    /// The release namespace.
    pub namespace: String,
    pub storage_namespace: String,
    #[serde(default)]
    pub version: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Inventory ids of what uninstalling deletes.
    #[serde(default)]
    pub objects: Vec<String>,
    /// Inventory ids of objects the `helm.sh/resource-policy` annotation keeps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delete_hooks: usize,
    /// Why the storage could not be read (never its content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use std::io::Write;

    /// A storage Secret's `data.release` as the API returns it, around `json`.
    pub fn encode(json: &[u8]) -> String {
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(json).unwrap();
        let engine = base64::engine::general_purpose::STANDARD;
        engine.encode(engine.encode(gz.finish().unwrap()))
    }

    const MANIFEST: &str = "---\n# Source: app/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\ndata:\n  level: debug-secretish\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: other\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  annotations:\n    helm.sh/resource-policy: keep\n---\n# empty template\n";

    fn release_json(manifest: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "name": "app", "namespace": "apps", "version": 3, "info": {"status": "deployed"},
            "config": {"password": "hunter2"}, "manifest": manifest,
            "hooks": [{"name": "cleanup", "events": ["pre-delete"]}, {"name": "migrate", "events": ["pre-upgrade"]}],
        }))
        .unwrap()
    }

    #[test]
    fn decodes_a_release_to_its_objects() {
        let release = decode_secret_value(&encode(&release_json(MANIFEST))).unwrap();
        assert_eq!((release.name.as_str(), release.namespace.as_str(), release.version), ("app", "apps", 3));
        assert_eq!(release.status, "deployed");
        assert_eq!(release.delete_hooks, 1);
        let names: Vec<_> = release.objects.iter().map(|o| (o.kind.as_str(), o.name.as_str())).collect();
        assert_eq!(
            names,
            [("ConfigMap", "app-config"), ("Deployment", "app"), ("PersistentVolumeClaim", "data")]
        );
        assert_eq!(release.objects[1].namespace.as_deref(), Some("other"));
        assert!(kept_by_policy(release.objects[2].resource_policy.as_deref()));
        assert!(!kept_by_policy(release.objects[0].resource_policy.as_deref()));
    }

    #[test]
    fn reads_uncompressed_legacy_records() {
        let engine = base64::engine::general_purpose::STANDARD;
        let value = engine.encode(engine.encode(release_json(MANIFEST)));
        assert_eq!(decode_secret_value(&value).unwrap().objects.len(), 3);
    }

    #[test]
    fn a_gzip_bomb_is_refused_without_inflating_it_all() {
        // 64 MiB of zeros compress to ~64 KiB.
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            gz.write_all(&zeros).unwrap();
        }
        let engine = base64::engine::general_purpose::STANDARD;
        let value = engine.encode(engine.encode(gz.finish().unwrap()));
        assert_eq!(decode_secret_value(&value), Err(DecodeError::TooLarge));
    }

    #[test]
    fn malformed_storage_gives_errors_that_quote_nothing() {
        let engine = base64::engine::general_purpose::STANDARD;
        let cases = [
            ("not base64 hunter2!".to_string(), DecodeError::NotBase64),
            (engine.encode("hunter2 is not base64!"), DecodeError::NotBase64),
            (engine.encode(engine.encode([0x1f, 0x8b, 0x08, 1, 2, 3])), DecodeError::NotGzip),
            (encode(b"{\"name\": \"hunter2\""), DecodeError::NotJson),
            (encode(b"\"hunter2\""), DecodeError::NotJson),
            (encode(&release_json("kind: [hunter2\n")), DecodeError::InvalidManifest(1)),
        ];
        for (value, expected) in cases {
            let error = decode_secret_value(&value).unwrap_err();
            assert_eq!(error, expected);
            assert!(!error.to_string().contains("hunter2"));
        }
    }

    #[test]
    fn separators_may_carry_comments() {
        let objects =
            manifest_objects("kind: A\nmetadata: {name: a}\n--- # next\nkind: B\nmetadata: {name: b}\n---\n")
                .unwrap();
        let kinds: Vec<&str> = objects.iter().map(|o| o.kind.as_str()).collect();
        assert_eq!(kinds, ["A", "B"]);
    }

    #[test]
    fn too_many_objects_are_refused() {
        let manifest = "---\nkind: ConfigMap\nmetadata: {name: x}\n".repeat(MAX_OBJECTS + 1);
        assert_eq!(manifest_objects(&manifest), Err(DecodeError::TooManyObjects));
    }

    #[test]
    fn any_resource_policy_value_keeps_the_object() {
        let objects = manifest_objects(
            "kind: Secret\nmetadata:\n  name: s\n  annotations: {helm.sh/resource-policy: Keep }\n",
        )
        .unwrap();
        assert!(kept_by_policy(objects[0].resource_policy.as_deref()));
    }
}
