//! A ResourceSet's input sets, combined as the operator combines them: its inline `inputs`
//! first, then each provider of `inputsFrom` (by namespace and name), flattened or permuted.
//!
//! A provider's inputs are what the cluster's operator exported (`status.exportedInputs`), read
//! from the live cluster; offline, a `Static` provider's come from its spec and a dynamic one's
//! (branches, pull requests, tags: only the operator in the cluster asks the forge) are unknown.

use crate::flux::resourceset::{
    input_id, normalize_key, InputStrategy, ProviderRef, ResourceSet, GROUP, KIND, PROVIDER_KIND,
    STATIC_PROVIDER,
};
use crate::plan::label_selector::LabelSelector;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The operator refuses more permutations than this.
const MAX_PERMUTATIONS: u64 = 10_000;

/// Where providers are found.
pub struct Providers<'a> {
    /// Providers applied next to the ResourceSet (its parent's render), as rendered.
    pub rendered: &'a [Value],
    /// Providers the live cluster holds, with their status; `None` offline.
    pub live: Option<&'a [Value]>,
}

/// The combined input sets, or why only the cluster knows them.
#[derive(Debug, Clone, PartialEq)]
pub enum Combined {
    Known { sets: Vec<Value>, notes: Vec<String> },
    Unknown(String),
}

/// One provider's inputs as the operator gets them.
struct ProviderInputs {
    namespace: String,
    name: String,
    inputs: Vec<Map<String, Value>>,
}

/// The input sets of `set` (each carries `provider`, and an `id` where the operator gives one).
pub fn combine(set: &ResourceSet, providers: &Providers) -> Result<Combined, String> {
    let mut notes = Vec::new();
    let mut found: BTreeMap<(String, String), ProviderInputs> = BTreeMap::new();
    for reference in &set.inputs_from {
        let matching = select(reference, &set.namespace, providers)?;
        if matching.is_empty() {
            if let ProviderRef::Name(name) = reference {
                if providers.live.is_some() {
                    return Err(format!("failed to get provider {}/{name}: not found", set.namespace));
                }
                return Ok(Combined::Unknown(format!(
                    "its input provider {}/{name} is neither in this repository nor read from a cluster",
                    set.namespace
                )));
            }
        }
        for (rendered, live) in matching {
            let provider = inputs_of(rendered, live, &mut notes)?;
            match provider {
                Ok(provider) => {
                    found.insert((provider.namespace.clone(), provider.name.clone()), provider);
                }
                Err(unknown) => return Ok(Combined::Unknown(unknown)),
            }
        }
    }
    // A selector matches no provider offline only for want of the cluster's.
    if providers.live.is_none() && set.inputs_from.iter().any(|r| matches!(r, ProviderRef::Selector(_))) {
        notes.push(
            "its inputsFrom selector is matched against the providers in this repository only (no cluster read)"
                .into(),
        );
    }
    let own = ProviderInputs {
        namespace: set.namespace.clone(),
        name: set.name.clone(),
        inputs: set.inputs.clone(),
    };
    let mut all = vec![(KIND, own)];
    all.extend(found.into_values().map(|p| (PROVIDER_KIND, p)));
    let with_provider: Vec<(String, Vec<Map<String, Value>>)> = all
        .into_iter()
        .map(|(kind, p)| {
            let provider = json!({
                "apiVersion": format!("{GROUP}/v1"),
                "kind": kind,
                "name": p.name,
                "namespace": p.namespace,
            });
            let inputs = p
                .inputs
                .into_iter()
                .map(|mut input| {
                    input.insert("provider".into(), provider.clone());
                    input
                })
                .collect();
            (p.name, inputs)
        })
        .collect();
    let sets = match set.strategy {
        InputStrategy::Flatten => {
            with_provider.into_iter().flat_map(|(_, inputs)| inputs).map(Value::Object).collect()
        }
        InputStrategy::Permute { include_empty_providers } => {
            permute(with_provider, include_empty_providers)?
        }
    };
    Ok(Combined::Known { sets, notes })
}

/// A provider as rendered from the repository and as the live cluster holds it.
type Sides<'p> = (Option<&'p Value>, Option<&'p Value>);

/// The providers a reference names in the ResourceSet's namespace.
fn select<'p>(
    reference: &ProviderRef,
    namespace: &str,
    providers: &'p Providers,
) -> Result<Vec<Sides<'p>>, String> {
    let matches = |object: &Value| -> Result<bool, String> {
        let meta = &object["metadata"];
        if meta["namespace"].as_str().unwrap_or(namespace) != namespace {
            return Ok(false);
        }
        Ok(match reference {
            ProviderRef::Name(name) => meta["name"] == name.as_str(),
            ProviderRef::Selector(selector) => {
                let selector =
                    LabelSelector::parse(selector).map_err(|e| format!("failed to parse selector: {e}"))?;
                let labels = meta["labels"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect();
                selector.matches(&labels)
            }
        })
    };
    let mut by_name: BTreeMap<String, Sides> = BTreeMap::new();
    for object in providers.rendered.iter().filter(|o| crate::flux::resourceset::is_input_provider(o)) {
        if matches(object)? {
            by_name.entry(object["metadata"]["name"].as_str().unwrap_or("").to_string()).or_default().0 =
                Some(object);
        }
    }
    for object in providers.live.into_iter().flatten() {
        if matches(object)? {
            by_name.entry(object["metadata"]["name"].as_str().unwrap_or("").to_string()).or_default().1 =
                Some(object);
        }
    }
    Ok(by_name.into_values().collect())
}

/// A provider's inputs: the live cluster's export, else a Static provider's spec, else unknown
/// (`Err` holds why).
fn inputs_of(
    rendered: Option<&Value>,
    live: Option<&Value>,
    notes: &mut Vec<String>,
) -> Result<Result<ProviderInputs, String>, String> {
    let object = rendered.or(live).expect("one side holds the provider");
    let meta = &object["metadata"];
    let namespace = meta["namespace"].as_str().unwrap_or("").to_string();
    let name = meta["name"].as_str().unwrap_or("").to_string();
    let shown = format!("{namespace}/{name}");
    let kind = object["spec"]["type"].as_str().unwrap_or("");
    let maps = |value: &Value| -> Vec<Map<String, Value>> {
        value.as_array().into_iter().flatten().filter_map(|i| i.as_object().cloned()).collect()
    };
    if kind == STATIC_PROVIDER {
        let mut defaults = object["spec"]["defaultValues"].as_object().cloned().unwrap_or_default();
        // Its id is the adler32 of the provider's UID (whatever defaultValues say): only the
        // cluster's object has one.
        match live.and_then(|l| l["metadata"]["uid"].as_str()) {
            Some(uid) => {
                defaults.insert("id".into(), Value::String(input_id(uid)));
            }
            None => {
                defaults.remove("id");
                notes.push(format!(
                    "the Static input provider {shown} has no id offline (the adler32 of its UID in the cluster)"
                ))
            }
        }
        return Ok(Ok(ProviderInputs { namespace, name, inputs: vec![defaults] }));
    }
    let Some(live) = live else {
        let why = if rendered.is_some() {
            format!(
                "its input provider {shown} ({kind}) exports inputs only the operator in the cluster resolves: what \
                 it generates is unknown offline (plan with --kube or a snapshot)"
            )
        } else {
            format!("its input provider {shown} is not read")
        };
        return Ok(Err(why));
    };
    if rendered.is_some_and(|r| r["spec"] != live["spec"]) {
        notes.push(format!(
            "the input provider {shown} changes with this merge: planned with the inputs it exports now"
        ));
    }
    Ok(Ok(ProviderInputs { namespace, name, inputs: maps(&live["status"]["exportedInputs"]) }))
}

/// The operator's permutation: one input set of every provider (empty ones skipped unless
/// `include_empty`), scoped by the provider's normalized name, with the id of the choice.
fn permute(
    providers: Vec<(String, Vec<Map<String, Value>>)>,
    include_empty: bool,
) -> Result<Vec<Value>, String> {
    let mut scoped: Vec<(String, Vec<Map<String, Value>>)> = Vec::new();
    let mut expected: u64 = 1;
    for (name, inputs) in providers {
        if !include_empty && inputs.is_empty() {
            continue;
        }
        expected = expected.saturating_mul(inputs.len() as u64);
        if expected > MAX_PERMUTATIONS {
            return Err(format!(
                "adding provider '{name}' with {} inputs would exceed the maximum allowed permutations. max: \
                 {MAX_PERMUTATIONS}, got: {expected}",
                inputs.len()
            ));
        }
        let key = normalize_key(&name);
        if key.is_empty() {
            return Err(format!("normalized provider name is empty: '{name}'"));
        }
        scoped.push((key, inputs));
    }
    if scoped.is_empty() || scoped.iter().any(|(_, inputs)| inputs.is_empty()) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut choice = vec![0usize; scoped.len()];
    loop {
        let mut set = Map::new();
        let mut id = Vec::new();
        for (i, (key, inputs)) in scoped.iter().enumerate() {
            set.insert(key.clone(), Value::Object(inputs[choice[i]].clone()));
            id.push(format!("{key}={}", choice[i]));
        }
        set.insert("id".into(), Value::String(input_id(&id.join("/"))));
        out.push(Value::Object(set));
        // The last provider turns fastest, as the operator's backtracking does.
        let mut i = scoped.len();
        loop {
            if i == 0 {
                return Ok(out);
            }
            i -= 1;
            choice[i] += 1;
            if choice[i] < scoped[i].1.len() {
                break;
            }
            choice[i] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(spec: Value) -> ResourceSet {
        ResourceSet::parse(&json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "ResourceSet",
            "metadata": {"name": "apps", "namespace": "flux-system"}, "spec": spec}))
        .unwrap()
    }

    fn provider(name: &str, kind: &str, extra: Value) -> Value {
        let mut object = json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "ResourceSetInputProvider",
            "metadata": {"name": name, "namespace": "flux-system", "labels": {"team": "a"}},
            "spec": {"type": kind}});
        if let (Some(o), Some(e)) = (object.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                if k == "spec" {
                    o["spec"].as_object_mut().unwrap().extend(v.as_object().unwrap().clone());
                } else {
                    o.insert(k.clone(), v.clone());
                }
            }
        }
        object
    }

    fn known(combined: Combined) -> Vec<Value> {
        match combined {
            Combined::Known { sets, .. } => sets,
            Combined::Unknown(why) => panic!("unknown: {why}"),
        }
    }

    #[test]
    fn inline_inputs_carry_their_provider() {
        let sets = known(
            combine(
                &set(json!({"inputs": [{"tenant": "a"}, {"tenant": "b"}]})),
                &Providers { rendered: &[], live: None },
            )
            .unwrap(),
        );
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[1]["tenant"], "b");
        assert_eq!(
            sets[0]["provider"],
            json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "ResourceSet", "name": "apps", "namespace": "flux-system"})
        );
    }

    #[test]
    fn live_exported_inputs_drive_a_dynamic_provider_and_offline_it_is_unknown() {
        let rendered = [provider("prs", "GitHubPullRequest", json!({}))];
        let live = [provider(
            "prs",
            "GitHubPullRequest",
            json!({"status": {"exportedInputs": [{"id": "1", "branch": "fix"}]}}),
        )];
        let spec = json!({"inputsFrom": [{"name": "prs"}]});
        let sets = known(
            combine(&set(spec.clone()), &Providers { rendered: &rendered, live: Some(&live) }).unwrap(),
        );
        assert_eq!(sets.len(), 1);
        assert_eq!(sets[0]["branch"], "fix");
        assert_eq!(sets[0]["provider"]["kind"], "ResourceSetInputProvider");
        let offline = combine(&set(spec), &Providers { rendered: &rendered, live: None }).unwrap();
        assert!(matches!(offline, Combined::Unknown(why) if why.contains("unknown offline")));
    }

    #[test]
    fn a_static_provider_is_its_default_values_with_the_id_of_its_uid() {
        let rendered = [provider("defaults", "Static", json!({"spec": {"defaultValues": {"env": "prod"}}}))];
        let live = [provider(
            "defaults",
            "Static",
            json!({"metadata": {"name": "defaults", "namespace": "flux-system", "uid": "u-1", "labels": {"team": "a"}}}),
        )];
        let spec = json!({"inputsFrom": [{"selector": {"matchLabels": {"team": "a"}}}]});
        let sets = known(
            combine(&set(spec.clone()), &Providers { rendered: &rendered, live: Some(&live) }).unwrap(),
        );
        assert_eq!(sets[0]["env"], "prod");
        assert_eq!(sets[0]["id"], input_id("u-1"));
        let sets = known(combine(&set(spec), &Providers { rendered: &rendered, live: None }).unwrap());
        assert!(sets[0].get("id").is_none());
    }

    #[test]
    fn permutations_scope_each_provider_and_turn_the_last_fastest() {
        let rendered = [provider("envs", "Static", json!({"spec": {"defaultValues": {"env": "prod"}}}))];
        let spec = json!({"inputStrategy": {"name": "Permute"}, "inputs": [{"t": "a"}, {"t": "b"}], "inputsFrom": [{"name": "envs"}]});
        let sets = known(combine(&set(spec), &Providers { rendered: &rendered, live: None }).unwrap());
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0]["apps"]["t"], "a");
        assert_eq!(sets[0]["envs"]["env"], "prod");
        assert_eq!(sets[1]["apps"]["t"], "b");
        assert_eq!(sets[0]["id"], input_id("apps=0/envs=0"));
        assert_eq!(sets[1]["id"], input_id("apps=1/envs=0"));
    }

    #[test]
    fn a_named_provider_missing_from_the_cluster_fails_as_the_operator_does() {
        let error = combine(
            &set(json!({"inputsFrom": [{"name": "gone"}]})),
            &Providers { rendered: &[], live: Some(&[]) },
        );
        assert!(error.unwrap_err().contains("failed to get provider flux-system/gone"));
    }
}
