//! Where each alert points: the lines of the pull request's changed files that cause it (an
//! alert's `locations`, which check-run annotations and Code Quality findings use). Read after
//! the plan is made, from the head commit's files (and the base commit's, to see what changed),
//! by the rules of docs/locations.md:
//!
//! - a unit's spec field the pull request changes (`spec.path` of a Kustomization pointed at a
//!   missing or empty directory, `spec.suspend`, `spec.prune`, ...): that field's line;
//! - a resource removed from a `kustomization.yaml`: the head line that took its place in the
//!   list (the next entry kept, else the one before, else the `resources:` key);
//! - a review finding: the changed lines of the field in the object's own file, or for an object
//!   a chart renders, the changed lines of its HelmRelease's `spec.values`;
//! - a version change: the changed line that holds the new version (an image, a tag, a chart
//!   version), else the HelmRelease's `spec.chart.spec.version`.
//!
//! A location only ever names a file the pull request changed, as git lists it: whatever a
//! render reports as a file name, nothing else (a path with `..`, a link, a file outside the
//! repository) can be named.

mod files;

pub use crate::paths::is_plain_path;
pub use files::MAX_FILE_BYTES;

use crate::flux::ObjectId;
use crate::plan::{Alert, KustomizationPlan, Plan, SourceLocation};
use crate::render::{Render, RenderedKustomization, UnitKind};
use crate::yaml_lines::{self, Node};
use files::Files;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Locations given to one alert at most (a removal of hundreds of objects points at its lines,
/// not at every one).
pub const MAX_LOCATIONS: usize = 20;
/// Objects of one alert whose files are looked at.
const MAX_OBJECTS: usize = 5_000;

/// What locations are read from.
pub struct Sources<'a> {
    pub repo: &'a Path,
    pub base_commit: Option<&'a str>,
    pub head_commit: Option<&'a str>,
    /// The files the pull request changes (relative to `repo`, as git lists them).
    pub changed: &'a [String],
    pub base: &'a Render,
    pub head: &'a Render,
}

/// Fills the `locations` of every alert of `plan` that has none, and `plan.unit_files`.
pub fn fill(plan: &mut Plan, sources: &Sources) {
    let mut locator = Locator {
        changed: sources.changed.iter().map(String::as_str).collect(),
        head_files: Files::new(sources.repo, sources.head_commit),
        base_files: Files::new(sources.repo, sources.base_commit),
        base: sources.base,
        head: sources.head,
        removals: None,
    };
    let alerts = std::mem::take(&mut plan.alerts);
    plan.alerts = alerts
        .into_iter()
        .map(|mut alert| {
            if alert.locations.is_empty() {
                alert.locations = locator.locate(&alert, plan);
            }
            alert
        })
        .collect();
    for unit in &plan.kustomizations {
        let file = [sources.head, sources.base]
            .into_iter()
            .find_map(|render| render.unit(&unit.cluster, &unit.unit_ref()).and_then(|k| k.file.clone()));
        if let Some(file) = file.filter(|f| is_plain_path(f)) {
            plan.unit_files.insert(crate::plan::unit_key(&unit.cluster, &unit.reference()), file);
        }
    }
}

/// An entry a `kustomization.yaml` no longer lists: what it named (from the repository's root)
/// and where its removal shows at head.
struct Removal {
    named: String,
    at: SourceLocation,
}

struct Locator<'a> {
    changed: BTreeSet<&'a str>,
    head_files: Files<'a>,
    base_files: Files<'a>,
    base: &'a Render,
    head: &'a Render,
    /// Read on the first alert that needs them.
    removals: Option<Vec<Removal>>,
}

impl Locator<'_> {
    fn locate(&mut self, alert: &Alert, plan: &Plan) -> Vec<SourceLocation> {
        let head = self.head;
        let unit = alert_plan(alert, plan).and_then(|p| head.unit(&p.cluster, &p.unit_ref()));
        let mut found = Vec::new();
        found.extend(self.spec_changes(alert));
        if let Some(unit) = unit {
            for field in fields_of(&alert.code) {
                found.extend(self.unit_field(unit, field));
            }
        }
        if alert.code == "major-bump" {
            found.extend(self.version_lines(alert, plan));
        }
        if crate::plan::review::CODES.contains(&alert.code.as_str()) && alert.shown_elsewhere {
            found.extend(self.finding_lines(alert, plan, unit));
        }
        if found.is_empty() {
            found.extend(self.removed_lines(alert, plan));
        }
        // Only lines of the changed files, each once, in file order.
        found.retain(|l| self.changed.contains(l.path.as_str()) && l.line > 0);
        found.sort();
        found.dedup();
        found.truncate(MAX_LOCATIONS);
        found
    }

    /// `spec.path` (or an Application's source path, an ApplicationSet's generators) of each unit
    /// whose change the alert's cause names (`FILE: Kustomization ns/name path OLD → NEW`).
    fn spec_changes(&mut self, alert: &Alert) -> Vec<SourceLocation> {
        let (Some(cause), Some(cluster)) = (&alert.cause, &alert.cluster) else { return Vec::new() };
        let mut changed_units = Vec::new();
        for after in self.head.clusters.iter().filter(|c| &c.name == cluster).flat_map(|c| &c.kustomizations)
        {
            let Some(before) = self.base.unit(cluster, &after.unit_ref()) else { continue };
            let what = if after.kind == UnitKind::ApplicationSet { "generators" } else { "path" };
            let text = format!("{} {what} {} → {}", after.label(), before.path, after.path);
            if before.path != after.path && cause.contains(&text) {
                changed_units.push(after);
            }
        }
        let mut found = Vec::new();
        for unit in changed_units {
            let field: &[&str] = match unit.kind {
                UnitKind::ApplicationSet => &["spec", "generators"],
                UnitKind::Application => &["spec", "source", "path"],
                _ => &["spec", "path"],
            };
            found.extend(self.field_line(unit, field));
        }
        found
    }

    /// The line of `field` of the unit's manifest in its file, when the pull request changes it.
    fn unit_field(&mut self, unit: &RenderedKustomization, field: &[&str]) -> Option<SourceLocation> {
        let file = unit.file.as_deref()?;
        let head_docs = self.head_files.documents(file)?;
        let manifest =
            yaml_lines::find_manifest(&head_docs, unit.kind.as_str(), Some(&unit.namespace), &unit.name)?;
        let after = yaml_lines::node_at(manifest, field);
        let base_docs = self.base_files.documents(file);
        let before = base_docs.as_deref().and_then(|docs| {
            yaml_lines::find_manifest(docs, unit.kind.as_str(), Some(&unit.namespace), &unit.name)
                .map(|m| yaml_lines::node_at(m, field))
        });
        let same = match (after, before) {
            (Some(a), Some(Some(b))) => a.same(b),
            (None, Some(None)) => true,
            _ => false,
        };
        if same {
            return None;
        }
        // A field removed: the deepest key still there.
        let line = yaml_lines::line_of(manifest, field)?;
        Some(SourceLocation { path: file.to_string(), line })
    }

    /// The line of `field` of the unit's manifest, changed or not (its cause says it changed).
    fn field_line(&mut self, unit: &RenderedKustomization, field: &[&str]) -> Option<SourceLocation> {
        let file = unit.file.as_deref()?;
        let docs = self.head_files.documents(file)?;
        let manifest =
            yaml_lines::find_manifest(&docs, unit.kind.as_str(), Some(&unit.namespace), &unit.name)?;
        let line = yaml_lines::line_of(manifest, field)?;
        Some(SourceLocation { path: file.to_string(), line })
    }

    /// The changed lines of a review finding's field: in the object's own file, else (an object a
    /// chart renders) in its HelmRelease's `spec.values`.
    fn finding_lines(
        &mut self,
        alert: &Alert,
        plan: &Plan,
        unit: Option<&RenderedKustomization>,
    ) -> Vec<SourceLocation> {
        let (Some(cluster), [object]) = (&alert.cluster, alert.objects.as_slice()) else { return Vec::new() };
        let Some(id) = ObjectId::parse(object) else { return Vec::new() };
        let display = id.display_name();
        let finding = plan.findings.iter().find(|f| {
            f.code == alert.code
                && &f.cluster == cluster
                && &f.object == object
                && alert.message.starts_with(&format!("{display} {}: ", f.path))
        });
        let Some(finding) = finding else { return Vec::new() };
        let field: Vec<&str> = finding.path.split('.').collect();
        let origin = self.head.object(cluster, object).and_then(|o| o.origin.clone());
        if let Some(file) = origin.filter(|f| self.changed.contains(f.as_str())) {
            let found = self.changed_lines(
                &file,
                (id.kind.as_str(), Some(id.namespace.as_str()), id.name.as_str()),
                &field,
            );
            if !found.is_empty() {
                return found;
            }
        }
        match unit.filter(|u| u.kind == UnitKind::HelmRelease) {
            Some(release) => match release.file.clone() {
                Some(file) => self.changed_lines(
                    &file,
                    ("HelmRelease", Some(&release.namespace), &release.name),
                    &["spec", "values"],
                ),
                None => Vec::new(),
            },
            None => Vec::new(),
        }
    }

    /// The lines of `field` of a manifest in `file` that differ from the base commit's file.
    fn changed_lines(
        &mut self,
        file: &str,
        (kind, namespace, name): (&str, Option<&str>, &str),
        field: &[&str],
    ) -> Vec<SourceLocation> {
        let Some(head_docs) = self.head_files.documents(file) else { return Vec::new() };
        let Some(manifest) = yaml_lines::find_manifest(&head_docs, kind, namespace, name) else {
            return Vec::new();
        };
        let base_docs = self.base_files.documents(file);
        let before =
            base_docs.as_deref().and_then(|docs| yaml_lines::find_manifest(docs, kind, namespace, name));
        let mut lines = Vec::new();
        match yaml_lines::node_at(manifest, field) {
            Some(after) => {
                after.changed_lines(before.map(|b| yaml_lines::node_at(b, field)).unwrap_or(None), &mut lines)
            }
            // Removed: the deepest key left.
            None => lines.extend(yaml_lines::line_of(manifest, field)),
        }
        lines.into_iter().map(|line| SourceLocation { path: file.to_string(), line }).collect()
    }

    /// A version change's new version where the pull request writes it: a changed line whose
    /// value is the new tag or version (an image reference, `newTag`, a chart's `version`, an
    /// OCIRepository's `tag`), else a HelmRelease's `spec.chart.spec.version`.
    fn version_lines(&mut self, alert: &Alert, plan: &Plan) -> Vec<SourceLocation> {
        let change = plan
            .versions
            .iter()
            .find(|c| alert.message.starts_with(&format!("{} {}: {} → {}", c.kind, c.name, c.from, c.to)));
        let Some(change) = change else { return Vec::new() };
        let to = change.to.as_str();
        let wanted = |value: &str| {
            value == to
                || value.strip_prefix('v') == Some(to)
                || value.ends_with(&format!(":{to}"))
                || value.ends_with(&format!("@{to}"))
        };
        let mut found = Vec::new();
        let files: Vec<String> = self.changed.iter().filter(|f| is_yaml(f)).map(|f| f.to_string()).collect();
        for file in files {
            let Some(head_docs) = self.head_files.documents(&file) else { continue };
            let base_docs = self.base_files.documents(&file);
            for (i, doc) in head_docs.iter().enumerate() {
                let before = base_docs.as_deref().and_then(|docs| counterpart(docs, doc, i));
                // A value is new where base had no such value in the same place.
                let mut old = Vec::new();
                if let Some(before) = before {
                    yaml_lines::scalars(before, "", &mut old);
                }
                let old: BTreeSet<(String, &str)> =
                    old.into_iter().map(|(place, value, _)| (place, value)).collect();
                let mut values = Vec::new();
                yaml_lines::scalars(doc, "", &mut values);
                found.extend(
                    values
                        .into_iter()
                        .filter(|(place, value, _)| wanted(value) && !old.contains(&(place.clone(), *value)))
                        .map(|(_, _, line)| SourceLocation { path: file.clone(), line }),
                );
            }
        }
        if found.is_empty() && change.kind == "chart" {
            for place in &change.places {
                let Some(unit) = place_unit(self.head, place) else { continue };
                found.extend(self.field_line(unit, &["spec", "chart", "spec", "version"]));
            }
        }
        found
    }

    /// For an alert about deletions: the lines where the pull request removes from a
    /// `kustomization.yaml` the files (or directories) its objects or its removed unit came from.
    fn removed_lines(&mut self, alert: &Alert, plan: &Plan) -> Vec<SourceLocation> {
        let Some(cluster) = alert.cluster.as_deref() else { return Vec::new() };
        let mut origins: BTreeSet<String> = alert
            .objects
            .iter()
            .take(MAX_OBJECTS)
            .filter_map(|id| self.base.object(cluster, id).and_then(|o| o.origin.clone()))
            .collect();
        // A removed unit: the file that defined it at base.
        let removed =
            alert_plan(alert, plan).filter(|p| p.status == crate::plan::KustomizationStatus::Removed);
        if let Some(removed) = removed {
            let file = self.base.unit(cluster, &removed.unit_ref()).and_then(|k| k.file.clone());
            origins.extend(file);
        }
        if origins.is_empty() {
            return Vec::new();
        }
        let removals = self.removals();
        let mut found = Vec::new();
        for removal in removals {
            let under = |origin: &String| {
                origin == &removal.named
                    || origin.strip_prefix(&removal.named).is_some_and(|rest| rest.starts_with('/'))
            };
            if origins.iter().any(under) {
                found.push(removal.at.clone());
            }
        }
        found
    }

    /// Every entry the pull request removes from the `resources` (or `components`) of a changed
    /// `kustomization.yaml`.
    fn removals(&mut self) -> &[Removal] {
        if self.removals.is_none() {
            let mut removals = Vec::new();
            let files: Vec<String> =
                self.changed.iter().filter(|f| is_kustomize_file(f)).map(|f| f.to_string()).collect();
            for file in files {
                let Some(head_docs) = self.head_files.documents(&file) else { continue };
                let Some(base_docs) = self.base_files.documents(&file) else { continue };
                let (Some(after), Some(before)) = (head_docs.first(), base_docs.first()) else { continue };
                let dir = file.rsplit_once('/').map_or("", |(dir, _)| dir);
                for key in ["resources", "components"] {
                    for (entry, line) in removed_entries(before, after, key) {
                        if let Some(named) = join(dir, &entry) {
                            removals.push(Removal { named, at: SourceLocation { path: file.clone(), line } });
                        }
                    }
                }
            }
            self.removals = Some(removals);
        }
        self.removals.as_deref().unwrap_or_default()
    }
}

/// The entries of `key` that `before` lists and `after` does not, each with the line of `after`
/// that shows its removal: the next entry kept, else the one before it, else the key (line 1 when
/// the key is gone).
fn removed_entries(before: &Node, after: &Node, key: &str) -> Vec<(String, u32)> {
    let list = |node: &Node| -> Vec<(String, u32)> {
        match node.get(key) {
            Some(Node::Sequence { items, .. }) => {
                items.iter().filter_map(|i| Some((i.scalar()?.to_string(), i.line()))).collect()
            }
            _ => Vec::new(),
        }
    };
    let (old, new) = (list(before), list(after));
    let kept: BTreeMap<&str, u32> = new.iter().map(|(entry, line)| (entry.as_str(), *line)).collect();
    let key_line = after.entry(key).map_or(1, |e| e.key_line);
    let mut removed = Vec::new();
    for (i, (entry, _)) in old.iter().enumerate() {
        if kept.contains_key(entry.as_str()) {
            continue;
        }
        let next = old[i + 1..].iter().find_map(|(e, _)| kept.get(e.as_str()).copied());
        let previous = old[..i].iter().rev().find_map(|(e, _)| kept.get(e.as_str()).copied());
        removed.push((entry.clone(), next.or(previous).unwrap_or(key_line)));
    }
    removed
}

/// `dir/entry` from the repository's root, `.` and `..` resolved; `None` for a URL or an entry
/// that leaves the repository.
fn join(dir: &str, entry: &str) -> Option<String> {
    if entry.contains("://") || entry.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in entry.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// The base document that stands for head's document `i`: the manifest of the same kind and
/// name, else the document at the same place.
fn counterpart<'d>(docs: &'d [Node], doc: &Node, i: usize) -> Option<&'d Node> {
    match (doc.manifest_field(None, "kind"), doc.manifest_field(Some("metadata"), "name")) {
        (Some(kind), Some(name)) => {
            yaml_lines::find_manifest(docs, kind, doc.manifest_field(Some("metadata"), "namespace"), name)
        }
        _ => docs.get(i),
    }
}

fn is_yaml(path: &str) -> bool {
    path.ends_with(".yaml") || path.ends_with(".yml")
}

fn is_kustomize_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(name, "kustomization.yaml" | "kustomization.yml" | "Kustomization")
}

/// The spec fields an alert code is about, on the unit the alert names.
fn fields_of(code: &str) -> &'static [&'static [&'static str]] {
    match code {
        "path-not-found" | "empty-render" => &[&["spec", "path"]],
        "prune-changed" => &[&["spec", "prune"]],
        "suspend-changed" => &[&["spec", "suspend"]],
        "target-namespace-changed" => &[&["spec", "targetNamespace"]],
        "release-target-changed" => {
            &[&["spec", "releaseName"], &["spec", "targetNamespace"], &["spec", "storageNamespace"]]
        }
        "release-cluster-changed" => &[&["spec", "kubeConfig"]],
        "dependency-deleted" => &[&["spec", "dependsOn"]],
        _ => &[],
    }
}

/// The plan of the unit an alert names.
fn alert_plan<'p>(alert: &Alert, plan: &'p Plan) -> Option<&'p KustomizationPlan> {
    let (cluster, reference) = (alert.cluster.as_deref()?, alert.kustomization.as_deref()?);
    plan.kustomizations.iter().find(|k| k.cluster == cluster && k.reference() == reference)
}

/// The unit of a version change's place: `cluster: HelmRelease ns/name`.
fn place_unit<'r>(render: &'r Render, place: &str) -> Option<&'r RenderedKustomization> {
    let (cluster, rest) = place.split_once(": ")?;
    let rest = rest.strip_prefix("HelmRelease ")?;
    let reference = rest.split(' ').next()?;
    let (namespace, name) = reference.split_once('/')?;
    render.unit(cluster, &crate::render::UnitRef::new(UnitKind::HelmRelease, namespace, name))
}
