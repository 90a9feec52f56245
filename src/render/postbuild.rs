//! What the controller does to each built object: postBuild substitution, owner labels, then
//! commonMetadata. Values that come from Secrets are masked in everything fluxplan shows.

use super::build::BuiltObject;
use super::{RenderError, RenderedObject, SecretTemplate};
use crate::cluster::{Lookup, SubstitutionSource};
use crate::flux::control::{OWNER_NAMESPACE_LABEL, OWNER_NAME_LABEL, SUBSTITUTE_KEY};
use crate::flux::envsubst::{self, Undefined};
use crate::flux::{Kustomization, KustomizationRef};
use crate::yaml;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What replaces Secret data in everything fluxplan prints.
pub const MASK: &str = "***";

/// The variables of one Kustomization.
#[derive(Debug, Default, Clone)]
pub struct Variables {
    pub values: BTreeMap<String, String>,
    /// Variables whose value came from a Secret.
    pub secret_names: BTreeSet<String>,
    /// `substituteFrom` sources only the cluster knows (`Kind/namespace/name`).
    pub unknown_sources: Vec<String>,
}

/// Collects the variables: `substituteFrom` in order (later wins), then inline `substitute`.
/// `inherited_secrets` names inline `substitute` variables whose values a parent substituted from
/// a Secret: they stay secret here too.
pub fn resolve_variables(
    spec: &Kustomization,
    source: &dyn SubstitutionSource,
    inherited_secrets: &BTreeSet<String>,
) -> Result<Variables, RenderError> {
    let mut vars = Variables::default();
    let Some(post_build) = &spec.post_build else {
        return Ok(vars);
    };
    for reference in &post_build.substitute_from {
        let described = format!("{}/{}/{}", reference.kind, spec.namespace, reference.name);
        if reference.kind != "ConfigMap" && reference.kind != "Secret" {
            return Err(RenderError::Substitution(format!(
                "substituteFrom kind '{}' of {described} is not supported (ConfigMap or Secret)",
                reference.kind
            )));
        }
        // A Secret only the pull request names is the cluster's to resolve, never read for it.
        let refused = reference.kind == "Secret"
            && source.substitution_secret_refused(&spec.namespace, &reference.name);
        let found = if refused {
            Lookup::Unknown
        } else {
            source.lookup(&reference.kind, &spec.namespace, &reference.name)
        };
        match found {
            Lookup::Found(data) => {
                for (name, value) in data {
                    check_name(&name, &described)?;
                    if reference.kind == "Secret" {
                        vars.secret_names.insert(name.clone());
                    } else {
                        vars.secret_names.remove(&name);
                    }
                    vars.values.insert(name, value.replace('\n', ""));
                }
            }
            Lookup::NotFound if reference.optional => {}
            Lookup::NotFound => {
                return Err(RenderError::Substitution(format!(
                    "substituteFrom {described} not found in the cluster; create it or mark it optional"
                )))
            }
            Lookup::Unknown => vars.unknown_sources.push(described),
        }
    }
    for (name, value) in &post_build.substitute {
        check_name(name, "spec.postBuild.substitute")?;
        if inherited_secrets.contains(name) {
            vars.secret_names.insert(name.clone());
        } else {
            vars.secret_names.remove(name);
        }
        vars.values.insert(name.clone(), value.replace('\n', ""));
    }
    Ok(vars)
}

fn check_name(name: &str, source: &str) -> Result<(), RenderError> {
    if envsubst::is_valid_variable_name(name) {
        Ok(())
    } else {
        Err(RenderError::Substitution(format!(
            "'{name}' from {source}: var name is invalid, must match '^[_[:alpha:]][_[:alpha:][:digit:]]*$'"
        )))
    }
}

/// The result of post-processing one Kustomization's objects.
pub struct Finished {
    pub objects: Vec<RenderedObject>,
    /// Variables left as `${...}` because only the cluster knows them.
    pub unresolved: BTreeSet<String>,
}

/// Applies substitution, owner labels and commonMetadata to every built object.
pub fn finish(
    built: Vec<BuiltObject>,
    spec: &Kustomization,
    vars: &Variables,
    strict: bool,
) -> Result<Finished, RenderError> {
    let substitutes = spec.post_build.is_some()
        && (!vars.values.is_empty() || spec.substitute_always || !vars.unknown_sources.is_empty());
    let on_undefined = if !vars.unknown_sources.is_empty() {
        Undefined::Keep
    } else if strict {
        Undefined::Error
    } else {
        Undefined::Empty
    };
    let masked_values: BTreeMap<String, String> = vars
        .values
        .iter()
        .map(|(k, v)| {
            let shown = if vars.secret_names.contains(k) { format!("(masked:{k})") } else { v.clone() };
            (k.clone(), shown)
        })
        .collect();
    // A placeholder left for a Secret only the cluster knows stands for a secret: the live object
    // holds its value, so the object is never compared with the cluster (drift would show it).
    let unknown_secret = vars.unknown_sources.iter().any(|source| source.starts_with("Secret/"));
    let owner = spec.reference();
    let mut unresolved = BTreeSet::new();
    let mut objects = Vec::with_capacity(built.len());
    let mut writer = yaml::DocumentWriter::default();
    for BuiltObject { object, origin } in built {
        let mut kept = BTreeSet::new();
        let substituted = substitutes && mentions_dollar(&object) && !substitution_disabled(&object);
        let secrets = substituted && !vars.secret_names.is_empty();
        // Which parts take values from Secrets is read from the template alone (`SecretTemplate`).
        let refs = if secrets { SecretRefs::of(&object, &vars.secret_names) } else { SecretRefs::default() };
        let (shown, real_substitute) = if substituted {
            let text = writer.to_yaml(&object);
            let real = substitute_object(&text, &vars.values, on_undefined, &object, &mut kept);
            if secrets {
                let shown =
                    substitute_object(&text, &masked_values, on_undefined, &object, &mut BTreeSet::new())?;
                // A Secret's value that breaks the YAML it lands in (a quote, a newline): whether it
                // does is the value's to tell, so the plan goes on with the masked object.
                let real_substitute =
                    real.ok().and_then(|real| real.pointer("/spec/postBuild/substitute").cloned());
                (shown, real_substitute)
            } else {
                (real?, None)
            }
        } else {
            (object, None)
        };
        let keeps_secret_placeholder = unknown_secret && !kept.is_empty();
        unresolved.extend(kept);
        let shown = label(shown, &owner, spec);
        // Compared as shown, values from Secrets masked: whether an object changes must not
        // depend on a Secret's value (`${password:0:1}` would tell its first letter).
        let digest = digest(&shown);
        // A distributed Secret's values are secrets too: its drift must not be shown either.
        let holds_secret_values = refs.any || distributes_secret(&shown) || keeps_secret_placeholder;
        let is_child = crate::flux::is_flux_kustomization(&shown);
        // A child is reconciled with the values of its own `substitute` (its grandchildren's
        // objects are masked where they use them); every other field as shown.
        let real =
            real_substitute.filter(|_| is_child && !refs.template.substitutes.is_empty()).map(|substitute| {
                let mut child = shown.clone();
                child["spec"]["postBuild"]["substitute"] = substitute;
                child
            });
        let (object, secret_digests) = mask_secret_data(shown);
        objects.push(RenderedObject {
            id: None,
            // Its Kustomization is not planned: the inventory holds the real name.
            named_from_secret: refs.identity,
            secret_template: if is_child { refs.template } else { SecretTemplate::default() },
            real,
            object: Arc::new(object),
            origin,
            digest,
            secret_digests,
            holds_secret_values,
        });
    }
    Ok(Finished { objects, unresolved })
}

/// Objects as built, with nothing substituted or added (Argo CD applies what it renders): Secret
/// data masked, digests taken.
pub fn plain(built: Vec<BuiltObject>) -> Vec<RenderedObject> {
    built
        .into_iter()
        .map(|BuiltObject { object, origin }| {
            let digest = digest(&object);
            let holds_secret_values = distributes_secret(&object);
            let (shown, secret_digests) = mask_secret_data(object);
            RenderedObject {
                id: None,
                named_from_secret: false,
                secret_template: SecretTemplate::default(),
                real: None,
                object: Arc::new(shown),
                origin,
                digest,
                secret_digests,
                holds_secret_values,
            }
        })
        .collect()
}

/// A manifest's namespace and name, as its inventory id takes them.
/// Which parts of an object's template use variables substituted from Secrets.
#[derive(Default)]
struct SecretRefs {
    /// Anywhere.
    any: bool,
    /// Its name or namespace.
    identity: bool,
    template: SecretTemplate,
}

impl SecretRefs {
    fn of(template: &Value, secrets: &BTreeSet<String>) -> Self {
        let uses =
            |value: &Value| referenced_variables(&value.to_string()).any(|name| secrets.contains(name));
        let meta = &template["metadata"];
        let spec = template["spec"].as_object();
        let mut refs = SecretRefs {
            any: uses(template),
            identity: uses(&meta["name"]) || uses(&meta["namespace"]),
            template: SecretTemplate::default(),
        };
        for (field, value) in spec.into_iter().flatten() {
            if field == "postBuild" {
                let substitute = value["substitute"].as_object();
                refs.template.substitutes = substitute
                    .into_iter()
                    .flatten()
                    .filter(|(_, v)| uses(v))
                    .map(|(k, _)| k.clone())
                    .collect();
                let mut rest = value.clone();
                rest.as_object_mut().map(|post_build| post_build.remove("substitute"));
                if uses(&rest) {
                    refs.template.spec_fields.push(format!("spec.{field}"));
                }
            } else if uses(value) {
                refs.template.spec_fields.push(format!("spec.{field}"));
            }
        }
        refs
    }
}

/// The names of the variables `${NAME}`, `${#NAME}`, `${NAME:-…}` in `text`, nested ones
/// included; an escaped `$${NAME}` counts too (a false "uses" only hides more).
fn referenced_variables(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("${").filter_map(move |(at, _)| {
        let rest = &text[at + 2..];
        let rest = rest.strip_prefix('#').unwrap_or(rest);
        let end = rest.find(|c: char| c != '_' && !c.is_ascii_alphanumeric()).unwrap_or(rest.len());
        (end > 0).then(|| &rest[..end])
    })
}

/// True when some key or string of the manifest holds a `$`: otherwise substitution is a no-op.
fn mentions_dollar(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('$'),
        Value::Array(items) => items.iter().any(mentions_dollar),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('$') || mentions_dollar(v)),
        _ => false,
    }
}

fn substitution_disabled(object: &Value) -> bool {
    let meta = &object["metadata"];
    ["labels", "annotations"].iter().any(|f| meta[f][SUBSTITUTE_KEY].as_str() == Some("disabled"))
}

fn substitute_object(
    text: &str,
    values: &BTreeMap<String, String>,
    on_undefined: Undefined,
    original: &Value,
    unresolved: &mut BTreeSet<String>,
) -> Result<Value, RenderError> {
    let what = describe(original);
    let out = envsubst::substitute(text, values, on_undefined)
        .map_err(|e| RenderError::Substitution(format!("{what}: variable substitution failed: {e}")))?;
    unresolved.extend(out.unresolved);
    let mut docs = yaml::parse_documents(&out.text).map_err(|_| {
        // The parser's message could quote a substituted value: never show it.
        RenderError::Substitution(format!("{what}: the YAML is not valid after variable substitution"))
    })?;
    match (docs.pop(), docs.is_empty()) {
        (Some(doc), true) => Ok(doc),
        _ => Err(RenderError::Substitution(format!(
            "{what}: variable substitution did not produce exactly one object"
        ))),
    }
}

/// `Kind/namespace/name` of a manifest, for messages.
pub fn describe(object: &Value) -> String {
    let meta = &object["metadata"];
    let kind = object["kind"].as_str().unwrap_or("?");
    let name = meta["name"].as_str().unwrap_or("?");
    match meta["namespace"].as_str() {
        Some(ns) => format!("{kind}/{ns}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// Owner labels, then commonMetadata (which may overwrite them, as in the controller).
fn label(mut object: Value, owner: &KustomizationRef, spec: &Kustomization) -> Value {
    let Some(obj) = object.as_object_mut() else {
        return object;
    };
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    set(meta, "labels", OWNER_NAME_LABEL, &owner.name);
    set(meta, "labels", OWNER_NAMESPACE_LABEL, &owner.namespace);
    if let Some(common) = &spec.common_metadata {
        for (k, v) in &common.labels {
            set(meta, "labels", k, v);
        }
        for (k, v) in &common.annotations {
            set(meta, "annotations", k, v);
        }
    }
    object
}

fn set(meta: &mut Value, field: &str, key: &str, value: &str) {
    if !meta.is_object() {
        *meta = json!({});
    }
    let map = meta.as_object_mut().expect("just made an object").entry(field).or_insert_with(|| json!({}));
    if !map.is_object() {
        *map = json!({});
    }
    map[key] = json!(value);
}

pub(crate) fn digest(value: &Value) -> String {
    hex::encode(Sha256::digest(yaml::canonical_json(value).as_bytes()))
}

/// Replaces the values of a Secret's `data` and `stringData` with a mask; returns a digest per
/// key so changes can be detected without showing values. The Secret an OpenKruise
/// ResourceDistribution embeds (`spec.resource`) is masked the same way, its keys prefixed
/// `spec.resource.`.
fn mask_secret_data(mut object: Value) -> (Value, BTreeMap<String, String>) {
    let mut digests = BTreeMap::new();
    if object["kind"] == "Secret" && object["apiVersion"] == "v1" {
        mask_values(&mut object, "", &mut digests);
    } else if distributes_secret(&object) {
        mask_values(&mut object["spec"]["resource"], "spec.resource.", &mut digests);
    }
    (object, digests)
}

fn mask_values(secret: &mut Value, prefix: &str, digests: &mut BTreeMap<String, String>) {
    for field in ["data", "stringData"] {
        if let Some(map) = secret.get_mut(field).and_then(Value::as_object_mut) {
            for (key, value) in map.iter_mut() {
                let text = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
                digests
                    .insert(format!("{prefix}{field}.{key}"), hex::encode(Sha256::digest(text.as_bytes())));
                *value = json!(MASK);
            }
        }
    }
}

/// True for an OpenKruise ResourceDistribution whose resource is a Secret.
pub fn distributes_secret(object: &Value) -> bool {
    let (group, _) = crate::flux::split_api_version(object["apiVersion"].as_str().unwrap_or(""));
    group == "apps.kruise.io"
        && object["kind"] == "ResourceDistribution"
        && object["spec"]["resource"]["kind"] == "Secret"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Offline;

    fn spec(post_build: Value) -> Kustomization {
        Kustomization::from_value(
            &json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": "apps", "namespace": "flux-system"},
                "spec": {"sourceRef": {"kind": "GitRepository", "name": "flux-system"}, "postBuild": post_build,
                         "commonMetadata": {"labels": {"team": "a"}}},
            }),
            "flux-system",
        )
        .unwrap()
    }

    fn built(object: Value) -> Vec<BuiltObject> {
        vec![BuiltObject { object, origin: None }]
    }

    struct Fixed(Lookup);
    impl SubstitutionSource for Fixed {
        fn lookup(&self, kind: &str, _: &str, _: &str) -> Lookup {
            match (&self.0, kind) {
                (Lookup::Found(_), "Secret") => self.0.clone(),
                _ => Lookup::NotFound,
            }
        }
    }

    #[test]
    fn substitutes_labels_and_adds_common_metadata_last() {
        let spec = spec(json!({"substitute": {"env": "prod"}}));
        let vars = resolve_variables(&spec, &Offline, &BTreeSet::new()).unwrap();
        let out = finish(
            built(json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c-${env}"}})),
            &spec,
            &vars,
            true,
        )
        .unwrap();
        let obj = &out.objects[0].object;
        assert_eq!(obj["metadata"]["name"], "c-prod");
        assert_eq!(obj["metadata"]["labels"][OWNER_NAME_LABEL], "apps");
        assert_eq!(obj["metadata"]["labels"][OWNER_NAMESPACE_LABEL], "flux-system");
        assert_eq!(obj["metadata"]["labels"]["team"], "a");
    }

    #[test]
    fn disabled_objects_are_left_alone() {
        let spec = spec(json!({"substitute": {"env": "prod"}}));
        let vars = resolve_variables(&spec, &Offline, &BTreeSet::new()).unwrap();
        let object = json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "c-${env}", "annotations": {SUBSTITUTE_KEY: "disabled"}}});
        let out = finish(built(object), &spec, &vars, true).unwrap();
        assert_eq!(out.objects[0].object["metadata"]["name"], "c-${env}");
    }

    #[test]
    fn unknown_sources_keep_placeholders_instead_of_failing() {
        let spec = spec(json!({"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]}));
        let vars = resolve_variables(&spec, &Offline, &BTreeSet::new()).unwrap();
        assert_eq!(vars.unknown_sources, vec!["ConfigMap/flux-system/cluster-vars"]);
        let out = finish(
            built(json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c-${cluster}"}})),
            &spec,
            &vars,
            true,
        )
        .unwrap();
        assert_eq!(out.objects[0].object["metadata"]["name"], "c-${cluster}");
        assert!(out.unresolved.contains("cluster"));
    }

    #[test]
    fn a_placeholder_for_a_secret_only_the_cluster_knows_marks_the_object_secret() {
        let spec = spec(json!({"substituteFrom": [{"kind": "Secret", "name": "db"}]}));
        let vars = resolve_variables(&spec, &Offline, &BTreeSet::new()).unwrap();
        let with_placeholder = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"},
            "data": {"password": "${DB_PASSWORD}"}});
        let plain =
            json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "d"}, "data": {"a": "1"}});
        let out = finish(built(with_placeholder), &spec, &vars, true).unwrap();
        // The live object holds the value: it must never be compared, so never shown as drift.
        assert!(out.objects[0].holds_secret_values);
        let out = finish(built(plain), &spec, &vars, true).unwrap();
        assert!(!out.objects[0].holds_secret_values);
    }

    /// Whether a Secret's value breaks the YAML it is substituted into is the value's to tell: the
    /// build goes on with the masked object, whatever the value.
    #[test]
    fn a_secret_value_that_breaks_the_yaml_fails_nothing_and_tells_nothing() {
        let spec = spec(json!({"substituteFrom": [{"kind": "Secret", "name": "creds"}]}));
        let object = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c-${password}"},
            "data": {"probe": "${password}", "first": "${password:0:1}"}});
        let outcome = |value: &str| {
            let source = Fixed(Lookup::Found([("password".to_string(), value.to_string())].into()));
            let vars = resolve_variables(&spec, &source, &BTreeSet::new()).unwrap();
            let out = finish(built(object.clone()), &spec, &vars, true).expect("no failure from a value");
            let o = &out.objects[0];
            (o.object.clone(), o.digest.clone(), o.named_from_secret, o.holds_secret_values)
        };
        let breaking = outcome("[unclosed");
        let near_miss = outcome("closed");
        // A value whose first letter is the mask's: the substring is the same either way.
        let like_the_mask = outcome("(masked");
        assert_eq!(breaking, near_miss);
        assert_eq!(like_the_mask, near_miss);
        assert!(breaking.2 && breaking.3, "named from a Secret, holding its value");
    }

    /// Which parts of a child Kustomization come from Secrets is read from its template: the same
    /// answer whatever the values, breaking or not.
    #[test]
    fn what_a_child_takes_from_secrets_is_read_from_its_template() {
        let spec = spec(
            json!({"substituteFrom": [{"kind": "Secret", "name": "creds"}], "substitute": {"env": "prod"}}),
        );
        let child = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "child", "namespace": "flux-system"},
            "spec": {"path": "./tenants/${password:0:1}", "interval": "${env}", "prune": true,
                     "postBuild": {"substitute": {"db": "${password}", "env": "${env}"}}}});
        let template = |value: &str| {
            let source = Fixed(Lookup::Found([("password".to_string(), value.to_string())].into()));
            let vars = resolve_variables(&spec, &source, &BTreeSet::new()).unwrap();
            let out = finish(built(child.clone()), &spec, &vars, true).unwrap();
            out.objects[0].secret_template.clone()
        };
        let expected = SecretTemplate {
            spec_fields: vec!["spec.path".to_string()],
            substitutes: BTreeSet::from(["db".to_string()]),
        };
        for value in ["hunter2", "[unclosed", "(masked"] {
            assert_eq!(template(value), expected, "{value}");
        }
    }

    #[test]
    fn secret_values_never_reach_the_shown_object() {
        let spec = spec(json!({"substituteFrom": [{"kind": "Secret", "name": "creds"}]}));
        let source = Fixed(Lookup::Found([("password".to_string(), "hunter2\n".to_string())].into()));
        let vars = resolve_variables(&spec, &source, &BTreeSet::new()).unwrap();
        assert_eq!(vars.values["password"], "hunter2", "newlines are stripped");
        let object = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"},
            "data": {"url": "postgres://app:${password}@db"}});
        let out = finish(built(object.clone()), &spec, &vars, true).unwrap();
        let shown = out.objects[0].object.to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("(masked:password)"));
        // Nothing compared depends on the value: another one gives the same digest.
        let other = Fixed(Lookup::Found([("password".to_string(), "other".to_string())].into()));
        let vars2 = resolve_variables(&spec, &other, &BTreeSet::new()).unwrap();
        let out2 = finish(built(object), &spec, &vars2, true).unwrap();
        assert_eq!(out.objects[0].digest, out2.objects[0].digest);
        assert_eq!(out.objects[0].object, out2.objects[0].object);
    }

    #[test]
    fn a_distributed_secret_is_masked() {
        let rd = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "ResourceDistribution",
            "metadata": {"name": "creds"},
            "spec": {"resource": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                "data": {"token": "c2VjcmV0"}, "stringData": {"pw": "hunter2"}}, "targets": {"allNamespaces": true}}});
        let obj =
            finish(built(rd), &spec(json!(null)), &Variables::default(), true).unwrap().objects.remove(0);
        let shown = obj.object.to_string();
        assert!(!shown.contains("c2VjcmV0") && !shown.contains("hunter2"), "{shown}");
        assert_eq!(obj.secret_digests.len(), 2);
        assert!(obj.secret_digests.contains_key("spec.resource.data.token"));
        assert!(obj.holds_secret_values, "its drift must stay hidden");
    }

    #[test]
    fn secret_data_is_masked() {
        let spec = spec(Value::Null);
        let object = json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s"},
            "data": {"token": "c2VjcmV0"}, "stringData": {"pw": "plain"}});
        let out = finish(built(object), &spec, &Variables::default(), true).unwrap();
        let obj = &out.objects[0];
        assert_eq!(obj.object["data"]["token"], MASK);
        assert_eq!(obj.object["stringData"]["pw"], MASK);
        assert_eq!(obj.secret_digests.len(), 2);
    }

    #[test]
    fn strict_mode_fails_on_undefined_and_names_the_object() {
        let spec = spec(json!({"substitute": {"a": "1"}}));
        let vars = resolve_variables(&spec, &Offline, &BTreeSet::new()).unwrap();
        let object = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c-${missing}"}});
        let err = finish(built(object.clone()), &spec, &vars, true).err().unwrap();
        assert!(err.to_string().contains("missing"), "{err}");
        let out = finish(built(object), &spec, &vars, false).unwrap();
        assert_eq!(out.objects[0].object["metadata"]["name"], "c-");
    }

    #[test]
    fn invalid_variable_names_are_rejected() {
        let spec = spec(json!({"substitute": {"bad-name": "1"}}));
        assert!(resolve_variables(&spec, &Offline, &BTreeSet::new()).is_err());
    }
}
