//! YAML in and out: Kubernetes manifests as `serde_json::Value`, multi-document streams.

use serde::Deserialize;
use serde_json::Value;

/// Every non-empty document of a YAML stream.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, String> {
    let mut docs = Vec::new();
    for document in serde_norway::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| e.to_string())?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// The documents of a YAML stream cut as Kubernetes cuts a manifest (apimachinery
/// `pkg/util/yaml/decoder.go`, `YAMLReader.Read`) and kyaml reads a stream (`kio/byteio_reader.go`,
/// `splitDocuments`): before each line that starts with `---` followed by nothing, spaces or a
/// comment, that line dropped. A document keeps its last line break: it belongs to a block scalar
/// that ends the document (`key: |`), whose value ends with it.
pub fn split_stream(text: &str) -> Vec<&str> {
    let mut documents = Vec::new();
    let (mut start, mut offset) = (0, 0);
    for line in text.split_inclusive('\n') {
        let separator = line
            .strip_prefix("---")
            .map(str::trim)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('#'));
        if separator {
            documents.push(&text[start..offset]);
            start = offset + line.len();
        }
        offset += line.len();
    }
    documents.push(&text[start..]);
    documents
}

/// One value as a YAML document (without the leading `---`).
pub fn to_yaml(value: &Value) -> String {
    serde_norway::to_string(value).unwrap_or_else(|e| format!("# unprintable: {e}\n"))
}

/// Writes values one after another as YAML documents through one emitter: starting an emitter
/// costs more than emitting a small manifest, and a render emits thousands.
#[derive(Default)]
pub struct DocumentWriter {
    written: std::rc::Rc<std::cell::RefCell<Vec<u8>>>,
    serializer: Option<serde_norway::Serializer<Shared>>,
}

/// The emitter's output, readable while the emitter lives.
struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl DocumentWriter {
    /// `value` as one YAML document (after the first, it starts with `---`).
    pub fn to_yaml(&mut self, value: &Value) -> String {
        let written = self.written.clone();
        let serializer =
            self.serializer.get_or_insert_with(|| serde_norway::Serializer::new(Shared(written)));
        let emitted = serde::Serialize::serialize(value, &mut *serializer).and_then(|()| serializer.flush());
        let text = String::from_utf8(std::mem::take(&mut *self.written.borrow_mut()));
        match (emitted, text) {
            (Ok(()), Ok(text)) => text,
            // An emitter that failed mid-document is not reused.
            _ => {
                self.serializer = None;
                to_yaml(value)
            }
        }
    }
}

/// Several values as one YAML stream separated by `---`.
pub fn to_yaml_stream<'a>(values: impl IntoIterator<Item = &'a Value>) -> String {
    values.into_iter().map(to_yaml).collect::<Vec<_>>().join("---\n")
}

/// A JSON text of `value` with every object's keys sorted: equal manifests give equal text
/// whatever order their keys were written in.
pub fn canonical_json(value: &Value) -> String {
    sorted(value).to_string()
}

/// A copy of `value` with every object's keys in sorted order.
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k.clone(), sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_empty_documents() {
        let docs = parse_documents("---\na: 1\n---\n---\n# only a comment\n---\nb: [1, 2]\n").unwrap();
        assert_eq!(docs, vec![serde_json::json!({"a": 1}), serde_json::json!({"b": [1, 2]})]);
    }

    #[test]
    fn documents_written_through_one_emitter_read_back_one_by_one() {
        let values = [
            serde_json::json!({"kind": "ConfigMap", "data": {"a": "${x}", "b": "1"}}),
            serde_json::json!({"kind": "Service", "spec": {"ports": [{"port": 80}]}}),
            serde_json::json!({"text": "line one\nline two\n", "yes": "yes"}),
            serde_json::json!({"kept": "trailing lines\n\n\n"}),
            serde_json::json!({"after": "an open-ended document", "n": 1.5}),
        ];
        let mut writer = DocumentWriter::default();
        for value in &values {
            let text = writer.to_yaml(value);
            assert_eq!(parse_documents(&text).unwrap(), vec![value.clone()], "{text}");
        }
    }

    #[test]
    fn canonical_json_ignores_key_order() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": 2, "x": [3]}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": {"x": [3], "y": 2}, "b": 1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
    }

    #[test]
    fn a_stream_is_cut_on_separator_lines_and_each_document_keeps_its_last_line_break() {
        let stream = "---\na: |\n  x\n--- # next\nb: 1\n---\n---\nc: >\n  y\n  ---\n";
        assert_eq!(split_stream(stream), vec!["", "a: |\n  x\n", "b: 1\n", "", "c: >\n  y\n  ---\n"]);
        let values: Vec<Value> =
            split_stream(stream).into_iter().flat_map(|d| parse_documents(d).unwrap()).collect();
        assert_eq!(values[0], serde_json::json!({"a": "x\n"}));
        // Not separators: `----`, `---x`, a `---` inside a document.
        assert_eq!(split_stream("a: 1\n----\n---x\n"), vec!["a: 1\n----\n---x\n"]);
    }

    #[test]
    fn reports_malformed_yaml() {
        assert!(parse_documents("a: [1, 2\n").is_err());
    }
}
