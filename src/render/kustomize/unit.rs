//! A Flux Kustomization as kustomize-controller builds it: its source's tree, kustomize (through
//! the build cache), then post-build substitution; a root that renders its own definition is
//! built again with that definition.

use super::inline;
use crate::flux::{is_flux_kustomization, Kustomization};
use crate::render::artifacts;
use crate::render::build::{self, Builder, MAX_NESTING};
use crate::render::engine::{Engine, Node};
use crate::render::finished;
use crate::render::local_sources::Sources;
use crate::render::postbuild::{self, Variables};
use crate::render::progress::Progress;
use crate::render::roots;
use crate::render::{
    ErrorReport, RenderError, RenderOptions, RenderedKustomization, RenderedObject, Status, UnitKind,
};
use crate::yaml;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;

/// How often a root that renders its own definition is re-rendered with that definition.
const ROOT_FIXPOINT_ROUNDS: usize = 3;

/// A Kustomization's objects and the variables left unresolved, or why it did not build.
pub(in crate::render) type Rendered = Result<(Vec<RenderedObject>, Vec<String>), RenderError>;

/// The repository files each Kustomization's build reads, by namespace and name (see
/// `Render::read_by_builds`).
pub(in crate::render) type BuildInputs = Mutex<BTreeMap<(String, String), BTreeSet<String>>>;

/// Renders Kustomizations for one walk.
pub(in crate::render) struct KustomizationEngine<'a> {
    pub builder: &'a Builder,
    pub opts: &'a RenderOptions,
    pub sources: &'a Sources<'a>,
    pub progress: &'a Progress,
    /// Results by identity and spec: a child whose rendered spec is the one written in its file
    /// reuses the render made while looking for roots.
    pub memo: &'a Mutex<BTreeMap<String, Rendered>>,
    pub inputs: &'a BuildInputs,
}

impl KustomizationEngine<'_> {
    /// Renders `spec` as a Kustomization of `cluster` (whose substitution values apply).
    /// `file` defines the Kustomization: it picks the nearest generator of an ExternalArtifact.
    pub(in crate::render) fn render_objects(
        &self,
        spec: &Kustomization,
        file: Option<&str>,
        cluster: &str,
        inherited_secrets: &BTreeSet<String>,
    ) -> Rendered {
        let values_of = if self.opts.cluster_values.contains_key(cluster) { cluster } else { "" };
        let root = self.sources.tree(&spec.source_ref, file)?.ok_or_else(|| {
            RenderError::InvalidSource(format!("source {} is not available locally", spec.source_ref))
        })?;
        let key = yaml::canonical_json(&serde_json::json!([
            values_of,
            spec.namespace,
            spec.name,
            spec.raw["spec"],
            root.to_string_lossy()
        ]));
        if let Some(hit) = self.memo.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return hit.clone();
        }
        let result = self.render_uncached(&root, spec, values_of, inherited_secrets);
        self.memo.lock().unwrap_or_else(|e| e.into_inner()).insert(key, result.clone());
        result
    }

    /// Builds and post-processes one spec: the objects and the variables left unresolved.
    fn render_uncached(
        &self,
        root: &Path,
        spec: &Kustomization,
        values_of: &str,
        inherited_secrets: &BTreeSet<String>,
    ) -> Rendered {
        let mut tick = self.progress.unit();
        let builder = self.builder;
        let tree = self.sources.this_repo.tree_ids(root);
        let values = self.opts.cluster_values.get(values_of).unwrap_or(&self.opts.values);
        let vars = postbuild::resolve_variables(spec, values.as_ref(), inherited_secrets);
        let strict = self.opts.strict_substitution;
        // Inputs git says are unchanged since this spec was finished with these values: the
        // finished render, without preparing the build.
        let warm_key = tree
            .as_ref()
            .zip(vars.as_ref().ok())
            .filter(|_| spec.source_ref.kind != artifacts::KIND)
            .and_then(|(tree, vars)| {
                finished::warm_key(&builder.kustomize.version, &tree.salt, spec, vars, strict)
            });
        let warm_hit = warm_key
            .as_ref()
            .and_then(|key| serde_json::from_str::<finished::Warm>(&builder.cache.get(key)?).ok())
            .filter(|warm| tree.as_ref().is_some_and(|tree| build::unchanged(&warm.ids, tree)))
            .and_then(|warm| Some((builder.decoded.get(&builder.cache, &warm.finished)?, warm.ids)));
        if let Some((hit, ids)) = warm_hit {
            self.record_inputs(root, spec, ids.keys());
            tick.built = Some(true);
            return Ok((hit.objects, hit.unresolved.into_iter().collect()));
        }
        let request = builder.prepare(root, spec, tree.as_ref())?;
        match &request.input_ids {
            Some(ids) => self.record_inputs(root, spec, ids.keys()),
            None => self.record_inputs(root, spec, request.inputs.iter()),
        }
        // An artifact's origins depend on its generator's layout, not only on the build.
        let finished_key = vars
            .as_ref()
            .ok()
            .filter(|_| spec.source_ref.kind != artifacts::KIND)
            .and_then(|vars| finished::key(&request.key, spec, vars, strict));
        let remember_warm = |finished_key: &str| {
            if let Some((key, ids)) = warm_key.as_deref().zip(request.input_ids.clone()) {
                let warm = finished::Warm { ids, finished: finished_key.to_string() };
                builder
                    .cache
                    .put(key, std::sync::Arc::new(serde_json::to_string(&warm).expect("JSON serializes")));
            }
        };
        if let Some(hit) = finished_key.as_ref().and_then(|key| builder.decoded.get(&builder.cache, key)) {
            remember_warm(finished_key.as_deref().unwrap_or_default());
            tick.built = Some(true);
            return Ok((hit.objects, hit.unresolved.into_iter().collect()));
        }
        // The finished render is what later runs read: kustomize's output goes to disk only when
        // that cannot be kept (values from Secrets).
        let mut built = builder.objects(&request, finished_key.is_none(), &self.opts.cancel)?;
        if spec.source_ref.kind == artifacts::KIND {
            for object in &mut built.objects {
                if let Some(file) = object.origin.as_deref().and_then(|o| self.sources.repo_origin(root, o)) {
                    object.origin = Some(file);
                }
            }
        } else if let Some(subpath) =
            self.sources.this_repo(&spec.source_ref).and_then(|r| r.subpath.as_deref())
        {
            // A directory of the repository as the artifact: its files are named from the top.
            for object in &mut built.objects {
                if let Some(origin) = &mut object.origin {
                    *origin = format!("{subpath}/{origin}");
                }
            }
        }
        tick.built = Some(built.cache_hit);
        let vars: Variables = vars?;
        let finished = postbuild::finish(built.objects, spec, &vars, strict)?;
        if let Some(key) = finished_key {
            builder.cache.put(&key, std::sync::Arc::new(finished::encode(&finished)));
            remember_warm(&key);
        }
        Ok((finished.objects, finished.unresolved.into_iter().collect()))
    }
}

impl KustomizationEngine<'_> {
    /// Records the inputs of the build of `spec` (paths relative to `root`) as repository files.
    fn record_inputs<'p>(&self, root: &Path, spec: &Kustomization, inputs: impl Iterator<Item = &'p String>) {
        let artifact = spec.source_ref.kind == artifacts::KIND;
        let files = inputs.filter_map(|input| match artifact {
            true => self.sources.repo_origin(root, input),
            false => self.sources.this_repo.repo_path(&root.join(input)),
        });
        let mut recorded = self.inputs.lock().unwrap_or_else(|e| e.into_inner());
        recorded.entry((spec.namespace.clone(), spec.name.clone())).or_default().extend(files);
    }

    /// The root the Flux Operator generates, with its FluxInstance's `kustomize.patches` applied
    /// as the operator applies them to all it generates. The patches for its controllers find
    /// nothing here: a targeted one matches nothing, and one without a target is left out unless
    /// it names a Kustomization.
    fn with_instance_patches(&self, spec: &Kustomization, patches: &str) -> Result<Kustomization, String> {
        let patches: Value = serde_json::from_str(patches).map_err(|e| e.to_string())?;
        let names_a_kustomization = |patch: &Value| {
            let body = patch.as_str().and_then(|text| yaml::parse_documents(text).ok());
            body.is_some_and(|docs| docs.iter().any(is_flux_kustomization))
        };
        let relevant: Vec<Value> = patches
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["target"].is_object() || names_a_kustomization(&p["patch"]))
            .cloned()
            .collect();
        if relevant.is_empty() {
            return Ok(spec.clone());
        }
        let build =
            |dir: &Path, readable: &Path| self.builder.kustomize.build(dir, readable, &self.opts.cancel);
        let objects =
            inline::apply(std::slice::from_ref(&spec.raw), &Value::Array(relevant), &Value::Null, &build)?;
        let patched =
            objects.iter().find(|o| is_flux_kustomization(o)).ok_or("the patches leave no Kustomization")?;
        Kustomization::from_value(patched, &spec.namespace).map_err(|e| e.to_string())
    }
}

impl Engine for KustomizationEngine<'_> {
    type Unit = Kustomization;

    fn render(&self, node: &Node, spec: &Kustomization) -> RenderedKustomization {
        let mut spec = spec.clone();
        let mut record = RenderedKustomization::new(
            UnitKind::Kustomization,
            spec.reference(),
            spec.path.clone(),
            spec.source_ref.clone(),
            node.parent.clone(),
            node.file.clone(),
        );
        if node.ancestors.len() >= MAX_NESTING {
            record.status = Status::Failed;
            record.error = Some(ErrorReport::from(&RenderError::Limit(format!(
                "Kustomizations nest more than {} levels deep (each applied by the one before): over fluxplan's \
                 limit, so this one is not planned",
                MAX_NESTING
            ))));
            record.spec = Some(spec);
            return record;
        }
        if let Some(fields) = &node.secret_spec {
            return secret_spec(
                record,
                spec,
                format!("its {fields} come from Secrets its parent substitutes"),
            );
        }
        // The root of an untrusted sync reads another source, though other clusters' syncs of the
        // same name may be this repository.
        let untrusted_root = node.is_root
            && self.sources.untrusted.iter().any(|sync| {
                sync.source_key() == spec.reference().to_string()
                    && roots::normalized_path(&sync.path) == roots::normalized_path(&spec.path)
            });
        // The operator's patches before its source is looked up: one may point the root at another
        // source (which sync it is, above, is as the operator names it).
        if !untrusted_root && !node.instance_patches.is_empty() {
            match self.with_instance_patches(&spec, &node.instance_patches) {
                Ok(patched) => {
                    record.path = patched.path.clone();
                    spec = patched;
                }
                Err(why) => {
                    record.status = Status::Failed;
                    record.error = Some(ErrorReport::from(&RenderError::InvalidSpec(format!(
                        "the FluxInstance's kustomize.patches do not apply to the Kustomization it generates: {why}"
                    ))));
                    record.spec = Some(spec);
                    return record;
                }
            }
        }
        if untrusted_root || matches!(self.sources.tree(&spec.source_ref, node.file.as_deref()), Ok(None)) {
            record.status = Status::External;
            record.warnings.push(self.sources.external_reason(&spec.source_ref, node.file.as_deref()));
            record.source_adds = self.sources.adds_of(&spec.source_ref).map(str::to_string);
            record.spec = Some(spec);
            return record;
        }
        let mut result =
            self.render_objects(&spec, node.file.as_deref(), &node.cluster_name, &node.inherited_secrets);
        // A root that renders its own definition is reconciled with that rendered definition.
        for _ in 0..ROOT_FIXPOINT_ROUNDS {
            let Ok((objects, _)) = &result else { break };
            if !node.is_root {
                break;
            }
            let own = objects.iter().find(|o| is_self(o, &spec, node.file.as_deref()));
            // A definition it substitutes from Secrets is not rendered: what renders would tell them.
            if let Some(fields) = own.and_then(crate::render::walk::secret_spec_fields) {
                let shown = own.and_then(|o| Kustomization::from_value(&o.object, &spec.namespace).ok());
                let why = format!("its {fields} come from Secrets it substitutes into its own definition");
                return secret_spec(record, shown.unwrap_or(spec), why);
            }
            // Reconciled with the real definition (inline values from Secrets substituted).
            let own = own.and_then(|o| {
                Kustomization::from_value(o.real.as_ref().unwrap_or(&o.object), &spec.namespace).ok()
            });
            match own {
                Some(own) if own.raw["spec"] != spec.raw["spec"] => {
                    record.path = own.path.clone();
                    spec = own;
                    result = self.render_objects(
                        &spec,
                        node.file.as_deref(),
                        &node.cluster_name,
                        &node.inherited_secrets,
                    );
                }
                _ => break,
            }
        }
        match result {
            Err(error) => {
                record.status = Status::Failed;
                record.error = Some(ErrorReport::from(&error));
            }
            Ok((objects, _)) if objects.iter().any(|o| o.named_from_secret) => {
                // Matched with the cluster on their real names, they would tell the values.
                let named = objects.iter().filter(|o| o.named_from_secret).count();
                let why = format!(
                    "the names or namespaces of {named} of its objects come from Secrets it substitutes"
                );
                return secret_spec(record, spec, why);
            }
            Ok((objects, unresolved)) => {
                if !unresolved.is_empty() {
                    record.warnings.push(format!(
                        "unresolved variables {} come from substituteFrom sources only the cluster knows; \
                         shown as written (give --cluster-snapshot to resolve them)",
                        unresolved.iter().map(|v| format!("${{{v}}}")).collect::<Vec<_>>().join(", ")
                    ));
                }
                record.unresolved_variables = unresolved;
                record.objects = objects;
            }
        }
        record.spec = Some(spec);
        record
    }
}

/// True when a rendered object is the definition of the Kustomization being rendered.
pub(in crate::render) fn is_self(object: &RenderedObject, spec: &Kustomization, file: Option<&str>) -> bool {
    is_flux_kustomization(&object.object)
        && object.object["metadata"]["name"] == spec.name.as_str()
        && (object.origin.as_deref() == file
            || object.object["metadata"]["namespace"] == spec.namespace.as_str())
}

/// A Kustomization that takes what it is from Secrets (`why`: its spec, or its objects' names):
/// not planned, since which path renders, what it renders or which of the cluster's objects it
/// matches would tell the values. `spec` is as shown (masked).
fn secret_spec(mut record: RenderedKustomization, spec: Kustomization, why: String) -> RenderedKustomization {
    record.status = Status::External;
    record.path = spec.path.clone();
    record.warnings.push(format!("{why}: what it renders would tell them, so it is not planned"));
    record.secret_spec = Some(why);
    record.spec = Some(spec);
    record
}
