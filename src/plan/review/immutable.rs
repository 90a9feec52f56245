//! `immutable-field`: a change the API server refuses to make in place. The diff reads like any
//! other; what follows is not: the controller's apply fails and the unit stops applying, or, when
//! it forces, the object is deleted and created again (and what it held goes with it).

use super::{fields, forced_by, on_immutable_change, quantity, Candidate, Subject};
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::BTreeSet;

const CODE: &str = "immutable-field";

/// The StatefulSet spec fields an update may change; any other is refused. Source: Kubernetes'
/// StatefulSet update validation (`ValidateStatefulSetUpdate` in
/// pkg/apis/apps/validation/validation.go), whose error names them: "updates to statefulset spec
/// for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy',
/// 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are
/// forbidden" (Kubernetes 1.27 and later).
const STATEFULSET_MUTABLE: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

pub(super) fn check(subject: &Subject, found: &mut Vec<Candidate>) {
    // Nothing to refuse in an object the cluster does not hold yet.
    if subject.is_new() {
        return;
    }
    match (subject.id.group.as_str(), subject.id.kind.as_str()) {
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") => {
            changed_field(subject, &["spec", "selector"], "a selector cannot change", found)
        }
        ("apps", "StatefulSet") => statefulset(subject, found),
        ("", "Service") => service(subject, found),
        ("batch", "Job") => {
            changed_field(subject, &["spec", "selector"], "a Job's selector cannot change", found);
            // Offline, a Job that deletes itself when done may be gone already.
            let ttl = subject.before().and_then(|o| fields::at(o, &["spec", "ttlSecondsAfterFinished"]));
            let why = match ttl.filter(|_| subject.live.is_none()) {
                Some(ttl) => format!(
                    "a Job's Pod template cannot change (unless the Job is gone already: its \
                     ttlSecondsAfterFinished deletes it {} s after it finishes; plan against the cluster to know)",
                    fields::brief(ttl)
                ),
                None => "a Job's Pod template cannot change".into(),
            };
            changed_field(subject, &["spec", "template"], &why, found);
        }
        ("", "PersistentVolumeClaim") => claim(subject, found),
        ("", "PersistentVolume") => volume(subject, found),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding")
            if subject.changes(&["roleRef"]) =>
        {
            let role = |o: Option<&Value>| {
                o.and_then(|o| fields::at(o, &["roleRef"]))
                    .map(|r| format!("{} {}", fields::brief(&r["kind"]), fields::brief(&r["name"])))
                    .unwrap_or_else(|| "none".into())
            };
            let what = format!(
                "changes from {} to {}: a binding's role cannot change",
                role(subject.before()),
                role(Some(subject.after()))
            );
            push(subject, "roleRef", what, found);
        }
        ("", "Secret") => secret(subject, found),
        ("", "ConfigMap") => config_map(subject, found),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            set_field(subject, &["spec", "scope"], "a CustomResourceDefinition's scope cannot change", found);
            stored_versions_dropped(subject, found);
        }
        _ => {}
    }
}

/// A CustomResourceDefinition whose versions no longer include one objects may be stored in:
/// the live `status.storedVersions`, else the base's storage version (the API server lists every
/// version that was ever the storage one). The API server refuses such an update until the
/// objects are migrated and the version is taken out of `status.storedVersions`; recreated, the
/// definition takes every custom resource of it along: `data-loss`.
fn stored_versions_dropped(subject: &Subject, found: &mut Vec<Candidate>) {
    let names = |object: &Value, filter: fn(&Value) -> bool| -> BTreeSet<String> {
        object["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| filter(v))
            .filter_map(|v| v["name"].as_str().map(str::to_string))
            .collect()
    };
    let stored: BTreeSet<String> = match subject.live.and_then(|l| l["status"]["storedVersions"].as_array()) {
        Some(live) => live.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        None => subject.base.map(|b| names(&b.object, |v| v["storage"] == true)).unwrap_or_default(),
    };
    let kept = names(subject.after(), |_| true);
    let dropped: Vec<&String> = stored.iter().filter(|v| !kept.contains(*v)).collect();
    if dropped.is_empty() {
        return;
    }
    let then = on_immutable_change(subject, &recreation_loses(subject));
    let what = format!(
        "drops version {}, which objects may be stored in (status.storedVersions): the API server refuses \
         the update until they are migrated to a kept version and status.storedVersions no longer lists it; {then}",
        dropped.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
    );
    found.push(subject.finding("data-loss", "spec.versions", what));
}

/// A finding with what the controller then does.
fn push(subject: &Subject, path: &str, what: String, found: &mut Vec<Candidate>) {
    let then = on_immutable_change(subject, &recreation_loses(subject));
    found.push(subject.finding(CODE, path, format!("{what}; {then}")));
}

/// A field the pull request changes that cannot change.
fn changed_field(subject: &Subject, path: &[&str], why: &str, found: &mut Vec<Candidate>) {
    if !subject.changes(path) {
        return;
    }
    let describe = |o: Option<&Value>| {
        o.and_then(|o| fields::at(o, path)).map(fields::brief).unwrap_or_else(|| "(not set)".into())
    };
    let what = match path.last() {
        // A template is too long to quote: the diff shows it.
        Some(&"template") => format!("changes: {why}"),
        _ => format!(
            "changes from {} to {}: {why}",
            describe(subject.before()),
            describe(Some(subject.after()))
        ),
    };
    push(subject, &fields::dotted(path), what, found);
}

/// A field both sides set, to different values.
fn set_field(subject: &Subject, path: &[&str], why: &str, found: &mut Vec<Candidate>) {
    if let Some((before, after)) = subject.both_set_and_differ(path) {
        let what = format!("changes from {} to {}: {why}", fields::brief(before), fields::brief(after));
        push(subject, &fields::dotted(path), what, found);
    }
}

fn statefulset(subject: &Subject, found: &mut Vec<Candidate>) {
    let keys = |o: Option<&Value>| -> Vec<String> {
        o.and_then(|o| o["spec"].as_object()).map(|m| m.keys().cloned().collect()).unwrap_or_default()
    };
    let mut names: BTreeSet<String> = keys(Some(subject.after())).into_iter().collect();
    names.extend(keys(subject.base.map(|b| &*b.object)));
    for key in names.iter().filter(|k| !STATEFULSET_MUTABLE.contains(&k.as_str())) {
        let path = ["spec", key.as_str()];
        if !subject.changes(&path) {
            continue;
        }
        let what = match key.as_str() {
            "volumeClaimTemplates" => {
                let names = |o: Option<&Value>| -> Vec<String> {
                    o.and_then(|o| fields::at(o, &path))
                        .and_then(Value::as_array)
                        .map(|t| t.iter().map(|c| fields::brief(&c["metadata"]["name"])).collect())
                        .unwrap_or_default()
                };
                let (before, after) = (names(subject.before()), names(Some(subject.after())));
                claims_left_behind(subject, &before, &after, found);
                if before == after {
                    format!("a claim template changes ({})", after.join(", "))
                } else {
                    format!("claim templates change from [{}] to [{}]", before.join(", "), after.join(", "))
                }
            }
            _ => {
                let describe = |o: Option<&Value>| {
                    o.and_then(|o| fields::at(o, &path))
                        .map(fields::brief)
                        .unwrap_or_else(|| "(not set)".into())
                };
                format!("changes from {} to {}", describe(subject.before()), describe(Some(subject.after())))
            }
        };
        let what =
            format!("{what}: a StatefulSet's spec may change only in {}", STATEFULSET_MUTABLE.join(", "));
        push(subject, &fields::dotted(&path), what, found);
    }
}

/// A StatefulSet whose claim templates are renamed or removed, and that the controller will
/// recreate (forced): its Pods come back on new, empty claims, and the old ones are left behind,
/// or deleted with the old StatefulSet under `persistentVolumeClaimRetentionPolicy.whenDeleted:
/// Delete`. `data-loss`, as for a deleted claim whose volume is reclaimed.
fn claims_left_behind(subject: &Subject, before: &[String], after: &[String], found: &mut Vec<Candidate>) {
    let gone: Vec<&String> = before.iter().filter(|t| !after.contains(t)).collect();
    let Some(why) = forced_by(subject).filter(|_| !gone.is_empty()) else { return };
    let old = subject.before().unwrap_or(subject.after());
    let replicas = old["spec"]["replicas"].as_u64().unwrap_or(1);
    let set = &subject.id.name;
    let claims = |template: &str| match replicas {
        0 => format!("{template}-{set}-N"),
        1 => format!("{template}-{set}-0"),
        n => format!("{template}-{set}-0 … {template}-{set}-{}", n - 1),
    };
    let old_claims: Vec<String> = gone.iter().map(|t| claims(t)).collect();
    let new_claims: Vec<String> = after.iter().filter(|t| !before.contains(t)).map(|t| claims(t)).collect();
    let fate = if old["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete" {
        "are deleted with the old StatefulSet (persistentVolumeClaimRetentionPolicy.whenDeleted: Delete), their \
         data with them when their volumes are reclaimed with Delete"
    } else {
        "are left behind, mounted by nothing"
    };
    let new = match new_claims.is_empty() {
        true => "without them".to_string(),
        false => format!("on new, empty claims ({})", new_claims.join(", ")),
    };
    let message = format!(
        "{} {} {}, and the StatefulSet is recreated ({why}): its Pods start {new}, and the claims \
         {} {fate}",
        crate::words::agree(gone.len(), "claim template", "claim templates"),
        gone.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", "),
        crate::words::agree(gone.len(), "goes", "go"),
        old_claims.join(", ")
    );
    found.push(subject.finding("data-loss", "spec.volumeClaimTemplates", message));
}

fn service(subject: &Subject, found: &mut Vec<Candidate>) {
    let before = found.len();
    set_field(subject, &["spec", "clusterIP"], "a Service's clusterIP cannot change", found);
    if found.len() == before {
        set_field(subject, &["spec", "clusterIPs"], "a Service's clusterIPs cannot change", found);
    }
    // A second family may come and go (dual-stack); the primary one never changes.
    set_field(subject, &["spec", "ipFamilies", "0"], "a Service's primary IP family cannot change", found);
}

/// The volume sources a PersistentVolume may name: whichever it has is fixed at creation.
const VOLUME_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

fn volume(subject: &Subject, found: &mut Vec<Candidate>) {
    for source in VOLUME_SOURCES {
        changed_field(
            subject,
            &["spec", source],
            "a PersistentVolume's source cannot change after creation",
            found,
        );
    }
    set_field(subject, &["spec", "volumeMode"], "a PersistentVolume's volumeMode cannot change", found);
}

fn claim(subject: &Subject, found: &mut Vec<Candidate>) {
    for (field, why) in [
        ("storageClassName", "a claim's storage class cannot change"),
        ("volumeName", "a claim's volume cannot change"),
        ("accessModes", "a claim's access modes cannot change"),
        ("volumeMode", "a claim's volume mode cannot change"),
    ] {
        set_field(subject, &["spec", field], why, found);
    }
    let path = ["spec", "resources", "requests", "storage"];
    if let Some((before, after)) = subject.both_set_and_differ(&path) {
        // Only a quantity read for sure is compared: an unusual form is not guessed at.
        if quantity::compare(after, before) == Some(Ordering::Less) {
            let what = format!(
                "shrinks from {} to {}: a claim can grow, never shrink",
                fields::brief(before),
                fields::brief(after)
            );
            push(subject, &fields::dotted(&path), what, found);
        }
    }
}

/// True when the object was immutable before the merge (`immutable: true`).
fn was_immutable(subject: &Subject) -> bool {
    subject.before().is_some_and(|o| o["immutable"] == true)
}

/// An immutable Secret whose data changes: named by key, never by value.
fn secret(subject: &Subject, found: &mut Vec<Candidate>) {
    if !was_immutable(subject) {
        return;
    }
    if subject.after()["immutable"] != true {
        push(subject, "immutable", "is switched off: an immutable Secret stays immutable".into(), found);
    }
    // The live Secret's values are never read: the renders' digests per key say what changes.
    let Some(base) = subject.base else { return };
    let (before, after) = (&base.secret_digests, &subject.after.secret_digests);
    let keys: BTreeSet<&str> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| k.split_once('.').map_or(k.as_str(), |(_, key)| key))
        .collect();
    if !keys.is_empty() {
        let keys: Vec<&str> = keys.into_iter().collect();
        let what = format!(
            "changes ({} {}; values hidden) while the Secret is immutable: its data cannot change",
            crate::words::agree(keys.len(), "key", "keys"),
            keys.join(", ")
        );
        push(subject, "data", what, found);
    }
}

/// An immutable ConfigMap whose data changes, named by key.
fn config_map(subject: &Subject, found: &mut Vec<Candidate>) {
    if !was_immutable(subject) {
        return;
    }
    if subject.after()["immutable"] != true {
        push(subject, "immutable", "is switched off: an immutable ConfigMap stays immutable".into(), found);
    }
    for field in ["data", "binaryData"] {
        let keys = |o: Option<&Value>| -> Vec<String> {
            o.and_then(|o| o[field].as_object()).map(|m| m.keys().cloned().collect()).unwrap_or_default()
        };
        let mut names: BTreeSet<String> = keys(Some(subject.after())).into_iter().collect();
        names.extend(keys(subject.before()));
        let changed: Vec<&str> =
            names.iter().map(String::as_str).filter(|k| subject.changes(&[field, k])).collect();
        if !changed.is_empty() {
            let what = format!(
                "changes ({} {}) while the ConfigMap is immutable: its data cannot change",
                crate::words::agree(changed.len(), "key", "keys"),
                changed.join(", ")
            );
            push(subject, field, what, found);
        }
    }
}

/// What deleting and creating the object again costs, by kind.
fn recreation_loses(subject: &Subject) -> String {
    match subject.id.kind.as_str() {
        "Deployment" | "ReplicaSet" | "DaemonSet" => {
            "its Pods go with it and start again (an outage until the new ones are ready)".into()
        }
        "StatefulSet" => {
            let deletes_claims = subject.before().is_some_and(|o| {
                o["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
            });
            if deletes_claims {
                "its Pods go with it and start again (an outage), and its claims are deleted with it \
                 (persistentVolumeClaimRetentionPolicy.whenDeleted: Delete): the data of volumes reclaimed \
                 with Delete is lost"
                    .into()
            } else {
                "its Pods go with it and start again (an outage); its claims are kept".into()
            }
        }
        "Service" => "clients that hold its old clusterIP lose it, and a LoadBalancer gets a new external \
                      address"
            .into(),
        "Job" => "it runs again from the start".into(),
        "PersistentVolumeClaim" => {
            "the claim comes back empty: its volume is released, and deleted with its \
                                    data when its reclaim policy is Delete"
                .into()
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            "the permissions it grants are gone until it is created again".into()
        }
        "Secret" | "ConfigMap" => "Pods that mount it keep the old data until they restart".into(),
        "CustomResourceDefinition" => {
            "deleting a CustomResourceDefinition deletes every custom resource of it".into()
        }
        _ => "whatever the cluster added to it is lost".into(),
    }
}
