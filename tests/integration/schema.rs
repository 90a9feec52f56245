//! The plan JSON's schema: `docs/plan.schema.json` is generated from the types, and every golden
//! plan of the tests validates against it.

use std::path::{Path, PathBuf};

const SCHEMA_FILE: &str = "docs/plan.schema.json";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn generated() -> String {
    serde_json::to_string_pretty(&fluxplan::plan::json_schema()).unwrap() + "\n"
}

#[test]
fn the_schema_in_docs_is_the_one_the_types_generate() {
    let path = root().join(SCHEMA_FILE);
    if std::env::var_os("FLUXPLAN_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, generated()).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == generated(),
        "{SCHEMA_FILE} is not what the plan's types generate: run FLUXPLAN_UPDATE_SCHEMA=1 cargo nextest run \
         --test integration schema:: and commit the file (and raise plan::SCHEMA_VERSION if a key changed meaning \
         or went away)"
    );
}

/// The body of an insta snapshot (after its `---` header).
fn snapshot_body(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("---\n")?;
    Some(&rest[rest.find("\n---\n")? + 5..])
}

fn golden_plans() -> Vec<(PathBuf, serde_json::Value)> {
    let dir = root().join("tests/integration/snapshots");
    let mut plans = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let Some(body) = snapshot_body(&text) else { continue };
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
            if value.get("schemaVersion").is_some() {
                plans.push((path, value));
            }
        }
    }
    plans.sort_by(|a, b| a.0.cmp(&b.0));
    plans
}

/// The schema with every object closed to the keys the types give it: the goldens must hold no
/// key added behind the types' back (a hand-made `json!`). The published schema stays open.
fn strict_schema() -> serde_json::Value {
    fn close(schema: &mut serde_json::Value) {
        match schema {
            serde_json::Value::Object(map) => {
                if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                    map.insert("additionalProperties".into(), false.into());
                }
                map.values_mut().for_each(close);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(close),
            _ => {}
        }
    }
    let mut schema = fluxplan::plan::json_schema();
    close(&mut schema);
    schema
}

#[test]
fn every_golden_plan_matches_the_schema() {
    let schema = strict_schema();
    let validator = jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema");
    let plans = golden_plans();
    // The goldens of plan, trust, roots, cascades and scopes tests: a vacuous pass is a failure.
    assert!(plans.len() >= 10, "only {} golden plans found", plans.len());
    for (path, plan) in &plans {
        assert_eq!(plan["schemaVersion"], fluxplan::plan::SCHEMA_VERSION, "{}", path.display());
        let errors: Vec<String> =
            validator.iter_errors(plan).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "{} does not match the schema:\n{}", path.display(), errors.join("\n"));
    }
}

#[test]
fn the_schema_refuses_a_plan_with_a_key_the_types_do_not_have() {
    let schema = strict_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let (_, mut plan) = golden_plans().into_iter().next().expect("a golden plan");
    assert!(validator.is_valid(&plan));
    plan["kustomizations"][0]["surprise"] = serde_json::json!(1);
    assert!(!validator.is_valid(&plan), "an unknown key passes");
    plan["kustomizations"][0].as_object_mut().unwrap().remove("surprise");
    plan["verdict"] = serde_json::json!("maybe");
    assert!(!validator.is_valid(&plan), "an unknown verdict passes");
}
