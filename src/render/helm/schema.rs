//! Whether a chart's values schemas need the network. Helm validates the values against the
//! chart's `values.schema.json` and each vendored subchart's, and its schema compiler loads
//! whatever a schema refers to: `http`/`https` URLs over the network, `file` URLs from disk, `urn`
//! through a resolver (helm/helm `pkg/chart/common/util/jsonschema.go`,
//! `ValidateAgainstSingleSchema`). helm-controller validates online; the sandbox has no network,
//! so such a chart is rendered with `--skip-schema-validation` and the release says so. Schemas
//! that refer only within themselves or to files are still validated, inside the sandbox.

use serde_json::Value;
use std::path::Path;

/// The most schema bytes read from one chart (its own and its subcharts').
const MAX_SCHEMA_BYTES: u64 = 16 * 1024 * 1024;
/// The deepest JSON walked, and the deepest subchart.
const MAX_DEPTH: usize = 256;
const MAX_SUBCHART_DEPTH: usize = 8;

/// The first schema of the chart at `chart` (a directory) that refers to the network: the
/// schema's path in the chart and the URL. Unreadable schemas are left to Helm, which reports them.
pub fn remote_reference(chart: &Path) -> Option<(String, String)> {
    let mut budget = MAX_SCHEMA_BYTES;
    if chart.is_file() {
        return in_archive(chart, "", &mut budget);
    }
    in_chart(chart, "", 0, &mut budget)
}

/// The same for a chart archive in memory.
pub fn remote_reference_in_archive(archive: &[u8]) -> Option<(String, String)> {
    let mut budget = MAX_SCHEMA_BYTES;
    in_archive_stream(archive, "", &mut budget)
}

fn in_chart(dir: &Path, prefix: &str, depth: usize, budget: &mut u64) -> Option<(String, String)> {
    let schema = dir.join("values.schema.json");
    if let Some(url) = read_bounded(&schema, budget).and_then(|text| remote_in_text(&text)) {
        return Some((format!("{prefix}values.schema.json"), url));
    }
    if depth >= MAX_SUBCHART_DEPTH {
        return None;
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir.join("charts")).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        // Subcharts vendored as directories; an archive's schemas are read from the archive.
        let found = if entry.file_type().is_ok_and(|t| t.is_dir()) {
            in_chart(&path, &format!("{prefix}charts/{name}/"), depth + 1, budget)
        } else if name.ends_with(".tgz") {
            in_archive(&path, &format!("{prefix}charts/{name}:"), budget)
        } else {
            None
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Every `values.schema.json` inside a chart archive (its subcharts' included).
fn in_archive(archive: &Path, prefix: &str, budget: &mut u64) -> Option<(String, String)> {
    in_archive_stream(std::fs::File::open(archive).ok()?, prefix, budget)
}

fn in_archive_stream(file: impl std::io::Read, prefix: &str, budget: &mut u64) -> Option<(String, String)> {
    use std::io::Read;
    // Every gzip member, as Go reads them (src/charts/archive.rs).
    let mut tar = tar::Archive::new(flate2::read::MultiGzDecoder::new(file));
    for entry in tar.entries().ok()? {
        let Ok(entry) = entry else { return None };
        let Ok(path) = entry.path().map(|p| p.to_string_lossy().into_owned()) else { continue };
        if !path.ends_with("values.schema.json") || entry.size() > *budget {
            continue;
        }
        *budget -= entry.size();
        let mut text = String::new();
        let size = entry.size();
        if entry.take(size).read_to_string(&mut text).is_err() {
            continue;
        }
        if let Some(url) = remote_in_text(&text) {
            return Some((format!("{prefix}{path}"), url));
        }
    }
    None
}

fn read_bounded(path: &Path, budget: &mut u64) -> Option<String> {
    let size = std::fs::metadata(path).ok().filter(|m| m.is_file())?.len();
    if size > *budget {
        return None;
    }
    *budget -= size;
    std::fs::read_to_string(path).ok()
}

fn remote_in_text(text: &str) -> Option<String> {
    let schema: Value = serde_json::from_str(text).ok()?;
    remote_in(&schema)
}

/// The first URL the schema would fetch: an absolute `http(s)` `$ref` (or `$dynamicRef`,
/// `$recursiveRef`), a relative one under an `http(s)` `$id` (resolved against it), or a
/// `$schema` that is not one of the drafts the compiler knows.
pub fn remote_in(schema: &Value) -> Option<String> {
    let mut stack = vec![(schema, false, 0usize)];
    while let Some((value, under_remote_id, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            // Deeper than any real schema: assume the worst rather than walk on.
            return Some("(a schema nested too deep to read)".into());
        }
        match value {
            Value::Object(map) => {
                let id_remote = map.get("$id").and_then(Value::as_str).is_some_and(is_http);
                let under = under_remote_id || id_remote;
                for key in ["$ref", "$dynamicRef", "$recursiveRef"] {
                    if let Some(reference) = map.get(key).and_then(Value::as_str) {
                        if is_http(reference) {
                            return Some(reference.to_string());
                        }
                        if under && !reference.starts_with('#') {
                            let id = map.get("$id").and_then(Value::as_str).unwrap_or("its $id");
                            return Some(format!("{reference} (relative to {id})"));
                        }
                    }
                }
                if let Some(meta) = map.get("$schema").and_then(Value::as_str) {
                    if is_http(meta) && !is_known_draft(meta) {
                        return Some(meta.to_string());
                    }
                }
                stack.extend(map.values().map(|v| (v, under, depth + 1)));
            }
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, under_remote_id, depth + 1))),
            _ => {}
        }
    }
    None
}

fn is_http(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// The JSON Schema drafts Helm's compiler carries with it (never fetched).
fn is_known_draft(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    let rest = lower.trim_start_matches("https://").trim_start_matches("http://");
    rest.starts_with("json-schema.org/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_what_the_compiler_would_fetch_is_remote() {
        let remote = |schema: Value| remote_in(&schema);
        assert_eq!(
            remote(json!({"properties": {"a": {"$ref": "https://example.com/a.json"}}})).as_deref(),
            Some("https://example.com/a.json")
        );
        assert_eq!(
            remote(json!({"items": [{"allOf": [{"$ref": "HTTP://Example.com/x#/y"}]}]})).as_deref(),
            Some("HTTP://Example.com/x#/y")
        );
        assert!(remote(
            json!({"$id": "https://example.com/root.json", "properties": {"a": {"$ref": "defs.json"}}})
        )
        .is_some_and(|u| u.contains("defs.json")));
        assert!(remote(json!({"$schema": "https://example.com/meta"})).is_some());
        // Near misses: local pointers, the known drafts, files, a URL that is only a value.
        assert_eq!(
            remote(json!({"$ref": "#/definitions/a", "definitions": {"a": {"type": "string"}}})),
            None
        );
        assert_eq!(remote(json!({"$schema": "http://json-schema.org/draft-07/schema#"})), None);
        assert_eq!(remote(json!({"$schema": "https://json-schema.org/draft/2020-12/schema"})), None);
        assert_eq!(remote(json!({"$ref": "file:///schemas/a.json"})), None);
        assert_eq!(remote(json!({"properties": {"url": {"default": "https://example.com"}}})), None);
        assert_eq!(remote(json!({"$id": "https://example.com/root.json", "$ref": "#/definitions/a"})), None);
    }

    #[test]
    fn a_nesting_too_deep_to_walk_counts_as_remote() {
        let mut schema = json!({"type": "string"});
        for _ in 0..(MAX_DEPTH + 2) {
            schema = json!({"items": schema});
        }
        assert!(remote_in(&schema).is_some());
    }

    #[test]
    fn subcharts_are_read_as_directories_and_archives() {
        let dir = tempfile::tempdir().unwrap();
        let chart = dir.path();
        std::fs::write(chart.join("values.schema.json"), r#"{"type": "object"}"#).unwrap();
        assert_eq!(remote_reference(chart), None);
        std::fs::create_dir_all(chart.join("charts/sub")).unwrap();
        std::fs::write(
            chart.join("charts/sub/values.schema.json"),
            r#"{"$ref": "https://example.com/s.json"}"#,
        )
        .unwrap();
        assert_eq!(
            remote_reference(chart),
            Some(("charts/sub/values.schema.json".into(), "https://example.com/s.json".into()))
        );
        std::fs::remove_dir_all(chart.join("charts/sub")).unwrap();
        let archive = std::fs::File::create(chart.join("charts/sub-1.0.0.tgz")).unwrap();
        let mut tar =
            tar::Builder::new(flate2::write::GzEncoder::new(archive, flate2::Compression::default()));
        let body = br#"{"properties": {"a": {"$ref": "http://example.com/a.json"}}}"#;
        let mut header = tar::Header::new_gnu();
        header.set_size(body.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, "sub/values.schema.json", &body[..]).unwrap();
        tar.into_inner().unwrap().finish().unwrap();
        assert_eq!(
            remote_reference(chart),
            Some(("charts/sub-1.0.0.tgz:sub/values.schema.json".into(), "http://example.com/a.json".into()))
        );
    }
}
