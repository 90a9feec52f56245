//! The cluster snapshot file: what fluxplan knows of a cluster without talking to it.
//!
//! ```yaml
//! apiVersion: fluxplan.dev/v1alpha1
//! kind: ClusterSnapshot
//! configMaps: [ConfigMap manifests with data]
//! secrets: [Secret manifests; data base64 as in the API, absent when values were left out]
//! ```

use super::{Lookup, SubstitutionSource};
use anyhow::{Context, Result};
use base64::Engine;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

type Key = (String, String);

#[derive(Debug, Default, Clone)]
pub struct ClusterSnapshot {
    config_maps: BTreeMap<Key, Value>,
    secrets: BTreeMap<Key, Value>,
}

fn key_of(obj: &Value) -> Option<Key> {
    let meta = &obj["metadata"];
    Some((
        meta["namespace"].as_str().unwrap_or("default").to_string(),
        meta["name"].as_str()?.to_string(),
    ))
}

fn index(list: Option<&Value>) -> BTreeMap<Key, Value> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|obj| Some((key_of(obj)?, obj.clone())))
        .collect()
}

impl ClusterSnapshot {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read cluster snapshot {}", path.display()))?;
        Self::parse(&text)
            .with_context(|| format!("cluster snapshot {} is not valid", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let doc = crate::yaml::parse_documents(text)
            .map_err(anyhow::Error::msg)?
            .pop()
            .unwrap_or(Value::Null);
        anyhow::ensure!(
            doc.get("kind").and_then(Value::as_str) == Some("ClusterSnapshot"),
            "expected a document of kind ClusterSnapshot"
        );
        Ok(ClusterSnapshot {
            config_maps: index(doc.get("configMaps")),
            secrets: index(doc.get("secrets")),
        })
    }
}

fn string_values(map: Option<&Value>, decode: bool) -> BTreeMap<String, String> {
    let engine = base64::engine::general_purpose::STANDARD;
    map.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let text = v.as_str()?;
            let value = if decode {
                String::from_utf8(engine.decode(text).ok()?).ok()?
            } else {
                text.to_string()
            };
            Some((k.clone(), value))
        })
        .collect()
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
                Some(s) if s.get("data").is_none() && s.get("stringData").is_none() => {
                    Lookup::Unknown
                }
                Some(s) => {
                    let mut values = string_values(s.get("data"), true);
                    values.extend(string_values(s.get("stringData"), false));
                    Lookup::Found(values)
                }
                None => Lookup::NotFound,
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
        assert_eq!(
            snap.lookup("Secret", "flux-system", "hidden"),
            Lookup::Unknown
        );
        assert_eq!(
            snap.lookup("ConfigMap", "flux-system", "nope"),
            Lookup::NotFound
        );
    }

    #[test]
    fn rejects_other_documents() {
        assert!(ClusterSnapshot::parse("kind: ConfigMap\n").is_err());
    }
}
