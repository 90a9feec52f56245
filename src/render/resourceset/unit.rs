//! A ResourceSet as the Flux Operator builds it: its templates for every input set, read from
//! the providers applied beside it (and above it) or the cluster's.

use crate::flux::{self, KustomizationRef};
use crate::render::build::{BuiltObject, MAX_NESTING};
use crate::render::engine::{Engine, Node, PendingSet};
use crate::render::postbuild;
use crate::render::{ErrorReport, RenderError, RenderOptions, RenderedKustomization, Status, UnitKind};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Objects all the ResourceSets of one walk may generate (each may generate ResourceSets).
const MAX_GENERATED_OBJECTS: usize = 200_000;

/// Expands ResourceSets for one walk.
pub(in crate::render) struct ResourceSetEngine<'a> {
    pub opts: &'a RenderOptions,
    /// Objects ResourceSets generated so far in this walk.
    pub generated: AtomicUsize,
}

impl Engine for ResourceSetEngine<'_> {
    /// A ResourceSet as the Flux Operator builds it: its templates for every input set, with the
    /// Kustomizations and ResourceSets it generates to render next.
    type Unit = PendingSet;

    fn render(&self, node: &Node, set: &PendingSet) -> RenderedKustomization {
        let meta = &set.manifest["metadata"];
        let reference = KustomizationRef {
            namespace: meta["namespace"].as_str().unwrap_or("").to_string(),
            name: meta["name"].as_str().unwrap_or("").to_string(),
        };
        let no_source =
            flux::SourceRef { kind: String::new(), name: String::new(), namespace: String::new() };
        let mut record = RenderedKustomization::new(
            UnitKind::ResourceSet,
            reference.clone(),
            String::new(),
            no_source,
            node.parent.clone(),
            node.file.clone(),
        );
        let mut unit = super::ResourceSetUnit {
            disabled: flux::resourceset::disabled_by(&set.manifest, flux::resourceset::RECONCILE_ANNOTATION),
            ..Default::default()
        };
        if node.ancestors.len() >= MAX_NESTING {
            record.status = Status::Failed;
            record.error = Some(ErrorReport::from(&RenderError::Limit(format!(
                "units nest more than {} levels deep: over fluxplan's limit, so this one is not planned",
                MAX_NESTING
            ))));
            return record;
        }
        if set.holds_secret_values || set.secret_providers {
            record.status = Status::External;
            let what =
                if set.holds_secret_values { "its spec" } else { "an input provider applied beside it" };
            record.warnings.push(format!(
                "{what} holds values substituted from a Secret: not expanded, so they cannot show in its objects"
            ));
            record.resourceset = Some(Box::new(unit));
            return record;
        }
        let live = self.opts.input_providers.as_deref().map(Vec::as_slice);
        let providers = super::Providers { rendered: &set.providers, live };
        if let Err(reason) = self.opts.cancel.check() {
            record.status = Status::Failed;
            record.error = Some(ErrorReport::from(&RenderError::Cancelled(reason)));
            return record;
        }
        match super::expand(&set.manifest, &providers) {
            Err(error) => {
                record.status = Status::Failed;
                record.error = Some(ErrorReport::from(&match error {
                    super::ExpandError::Invalid(why) => {
                        RenderError::Template(format!("this ResourceSet is not built: {why}"))
                    }
                    super::ExpandError::Limit(why) => {
                        RenderError::Limit(format!("this ResourceSet is not planned: {why}"))
                    }
                }));
            }
            Ok(super::Expansion::Unknown(why)) => {
                record.status = Status::External;
                record.warnings.push(why);
            }
            Ok(super::Expansion::Built { objects, .. })
                if self.generated.fetch_add(objects.len(), Ordering::Relaxed) + objects.len()
                    > MAX_GENERATED_OBJECTS =>
            {
                record.status = Status::Failed;
                record.error = Some(ErrorReport::from(&RenderError::Limit(format!(
                    "ResourceSets generate more than {MAX_GENERATED_OBJECTS} objects in this render: over fluxplan's \
                     limit, so this one is not planned"
                ))));
            }
            Ok(super::Expansion::Built { objects, input_sets, notes }) => {
                record.warnings.extend(notes);
                unit.input_sets = Some(input_sets);
                let mut built = Vec::with_capacity(objects.len());
                for (object, input) in objects {
                    let meta = &object["metadata"];
                    let (kind, namespace, name) = (
                        object["kind"].as_str().unwrap_or(""),
                        meta["namespace"].as_str().unwrap_or(""),
                        meta["name"].as_str().unwrap_or(""),
                    );
                    if let Some(from) = meta["annotations"][flux::resourceset::COPY_FROM_ANNOTATION].as_str()
                    {
                        unit.copied_from.insert(from.to_string());
                    }
                    if let Some(input) = input {
                        unit.inputs.insert(super::ResourceSetUnit::object_key(kind, namespace, name), input);
                    }
                    built.push(BuiltObject { object, origin: node.file.clone() });
                }
                record.objects = postbuild::plain(built);
            }
        }
        record.resourceset = Some(Box::new(unit));
        record
    }
}
