//! What a chart's templates ask of the cluster, found by reading them: `lookup` (helm-controller's
//! Helm answers it from the API server, `helm template` with an empty map: Helm's
//! `pkg/engine/lookup_func.go` and `pkg/engine/engine.go`) and `.Capabilities` (the cluster's
//! discovery for the controller, Helm's built-ins for `helm template` unless told).
//!
//! A textual scan of Go template actions (`{{ … }}`, `{{- … -}}`), pure: it takes the chart's
//! files as (path, text) pairs, wherever they come from. Inside an action it skips comments and
//! string literals (a string that holds a template, as `tpl` takes it, is scanned in turn), and
//! it takes `lookup` only as a function name: not `.Values.lookup`, `$lookup` or `lookupTable`.

use serde_json::Value;
use std::collections::BTreeSet;

/// What the templates of a chart (and its subcharts) call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateCalls {
    /// The files whose actions call `lookup` (chart-relative paths; `values` for the release's
    /// values, when a template passes strings through `tpl`).
    pub lookup: BTreeSet<String>,
    /// The files whose actions read `.Capabilities` (its Kubernetes version or API versions).
    pub capabilities: BTreeSet<String>,
}

/// What one text's actions call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Calls {
    lookup: bool,
    capabilities: bool,
    tpl: bool,
}

impl Calls {
    fn add(&mut self, other: Calls) {
        self.lookup |= other.lookup;
        self.capabilities |= other.capabilities;
        self.tpl |= other.tpl;
    }
}

/// How deep strings holding templates are scanned (a string in a string in a string …).
const MAX_DEPTH: usize = 4;

/// Scans a chart's files: its templates and its subcharts' (`templates/…`,
/// `charts/NAME/templates/…`). Values files (the charts' `values.yaml`) and the release's own
/// `values` count only when a template calls `tpl`, which renders a string as a template.
pub fn scan<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>, values: &Value) -> TemplateCalls {
    ChartCalls::of(files).with_values(values)
}

/// What a chart's own files call, whatever the values: learned once per chart.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChartCalls {
    /// Templates that call `lookup`, and those that read `.Capabilities`.
    lookup: BTreeSet<String>,
    capabilities: BTreeSet<String>,
    /// Some template calls `tpl`.
    tpl: bool,
    /// Values files whose strings call `lookup` (counted only through `tpl`).
    values_lookup: BTreeSet<String>,
}

impl ChartCalls {
    /// What the templates and values files among `files` call.
    pub fn of<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut found = ChartCalls::default();
        for (path, text) in files {
            if is_values_file(path) {
                found.values_file(path, text);
                continue;
            }
            if !is_template(path) {
                continue;
            }
            let calls = scan_text(text, 0);
            found.tpl |= calls.tpl;
            if calls.lookup {
                found.lookup.insert(path.to_string());
            }
            if calls.capabilities {
                found.capabilities.insert(path.to_string());
            }
        }
        found
    }

    /// The values file `path` is (now) `text`: a `values.yaml` fluxplan writes in place of the
    /// chart's.
    pub fn values_file(&mut self, path: &str, text: &str) {
        self.values_lookup.remove(path);
        if scan_text(text, 0).lookup {
            self.values_lookup.insert(path.to_string());
        }
    }

    /// What a render with the release's `values` calls.
    pub fn with_values(&self, values: &Value) -> TemplateCalls {
        let mut found =
            TemplateCalls { lookup: self.lookup.clone(), capabilities: self.capabilities.clone() };
        if self.tpl {
            found.lookup.extend(self.values_lookup.iter().cloned());
            if strings_of(values).any(|text| scan_text(text, 0).lookup) {
                found.lookup.insert("values".to_string());
            }
        }
        found
    }
}

/// `templates/x.yaml`, `charts/db/templates/_helpers.tpl`, `charts/a/charts/b/templates/y`.
fn is_template(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let mut at = 0;
    while parts.get(at) == Some(&"charts") && parts.len() > at + 2 {
        at += 2;
    }
    parts.get(at) == Some(&"templates") && parts.len() > at + 1
}

/// `values.yaml`, `charts/db/values.yaml`.
fn is_values_file(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let mut at = 0;
    while parts.get(at) == Some(&"charts") && parts.len() > at + 2 {
        at += 2;
    }
    parts.get(at) == Some(&"values.yaml") && parts.len() == at + 1
}

/// Every string (and key) of a values document.
fn strings_of(value: &Value) -> Box<dyn Iterator<Item = &str> + '_> {
    match value {
        Value::String(text) => Box::new(std::iter::once(text.as_str())),
        Value::Array(items) => Box::new(items.iter().flat_map(strings_of)),
        Value::Object(map) => {
            Box::new(map.iter().flat_map(|(k, v)| std::iter::once(k.as_str()).chain(strings_of(v))))
        }
        _ => Box::new(std::iter::empty()),
    }
}

/// What the actions of a template text call.
fn scan_text(text: &str, depth: usize) -> Calls {
    let mut calls = Calls::default();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let (action, after) = read_action(&rest[start + 2..], depth, &mut calls);
        calls.add(words(&action));
        rest = after;
    }
    calls
}

/// The code of one action (strings and comments blanked, so what they hold is no call), and the
/// text after it. Strings that hold `{{` are scanned as templates, up to `MAX_DEPTH`.
fn read_action<'t>(text: &'t str, depth: usize, calls: &mut Calls) -> (String, &'t str) {
    let mut code = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '}' if text[at..].starts_with("}}") => return (code, &text[at + 2..]),
            '/' if text[at..].starts_with("/*") => {
                let end = text[at + 2..].find("*/").map_or(text.len(), |e| at + 2 + e + 2);
                while chars.peek().is_some_and(|(i, _)| *i < end) {
                    chars.next();
                }
                code.push(' ');
            }
            '"' | '`' | '\'' => {
                let mut literal = String::new();
                let mut escaped = false;
                for (_, d) in chars.by_ref() {
                    if c != '`' && escaped {
                        literal.push(d);
                        escaped = false;
                    } else if c != '`' && d == '\\' {
                        escaped = true;
                    } else if d == c {
                        break;
                    } else {
                        literal.push(d);
                    }
                }
                if literal.contains("{{") && depth < MAX_DEPTH {
                    calls.add(scan_text(&literal, depth + 1));
                }
                code.push(' ');
            }
            other => code.push(other),
        }
    }
    // Never closed: Helm fails to parse it; read what there is.
    (code, "")
}

/// The calls in an action's code: `lookup` and `tpl` as function names, `.Capabilities` as a
/// field (its `HelmVersion` alone asks nothing of the cluster).
fn words(code: &str) -> Calls {
    let mut calls = Calls::default();
    let bytes = code.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut at = 0;
    while at < bytes.len() {
        if !is_word(bytes[at]) {
            at += 1;
            continue;
        }
        let start = at;
        while at < bytes.len() && is_word(bytes[at]) {
            at += 1;
        }
        let word = &code[start..at];
        let before = start.checked_sub(1).map(|i| bytes[i]);
        let function = !matches!(before, Some(b'.' | b'$'));
        match word {
            "lookup" if function => calls.lookup = true,
            "tpl" if function => calls.tpl = true,
            "Capabilities"
                if before == Some(b'.')
                    && from_the_top(bytes, start - 1)
                    && !code[at..].starts_with(".HelmVersion") =>
            {
                calls.capabilities = true
            }
            _ => {}
        }
    }
    calls
}

/// True when the field chain ending at the `.` at `dot` starts at the context (`.Capabilities`)
/// or a variable (`$.Capabilities`, `$root.Capabilities`), not at another field
/// (`.Values.Capabilities`).
fn from_the_top(bytes: &[u8], dot: usize) -> bool {
    let mut start = dot;
    while start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || matches!(bytes[start - 1], b'_' | b'.')) {
        start -= 1;
    }
    start == dot || (start > 0 && bytes[start - 1] == b'$')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn calls(template: &str) -> TemplateCalls {
        scan([("templates/x.yaml", template)], &json!({}))
    }

    fn looks_up(template: &str) -> bool {
        !calls(template).lookup.is_empty()
    }

    #[test]
    fn lookup_is_found_in_every_form_of_action() {
        for template in [
            r#"{{ lookup "v1" "Secret" "ns" "name" }}"#,
            "{{- $s := lookup \"v1\" \"Secret\" .Release.Namespace \"x\" -}}",
            r#"{{ (lookup "v1" "ConfigMap" "ns" "c").data.key }}"#,
            r#"{{ if (lookup "v1" "Namespace" "" "prod") }}yes{{ end }}"#,
            "{{ \"v1\" | lookup \"Secret\" \"ns\" }}",
            "{{\nlookup\n\"v1\" \"Secret\" \"\" \"\"\n}}",
            // A template in a string, as `tpl` renders it.
            r#"{{ tpl "{{ lookup \"v1\" \"Secret\" \"a\" \"b\" }}" . }}"#,
        ] {
            assert!(looks_up(template), "{template}");
        }
    }

    #[test]
    fn near_misses_are_not_lookup() {
        for template in [
            "{{ .Values.lookupTable }}",
            "{{ .Values.lookup }}",
            "{{ $lookup := 1 }}{{ $lookup }}",
            r#"{{ include "lookup" . }}"#,
            r#"{{ printf "lookup" }}"#,
            "{{/* lookup the secret */}}",
            "{{- /* lookup */ -}}",
            "lookup outside any action",
            "# lookup in a YAML comment\nkey: {{ .Values.x }}",
            "{{ lookupTable }}",
            "{{ mylookup 1 }}",
        ] {
            assert!(!looks_up(template), "{template}");
        }
    }

    #[test]
    fn only_templates_of_the_chart_and_its_subcharts_count() {
        let call = r#"{{ lookup "v1" "Secret" "a" "b" }}"#;
        let found = scan(
            [
                ("templates/a.yaml", call),
                ("charts/db/templates/_helpers.tpl", call),
                ("charts/db/charts/x/templates/y.yaml", call),
                ("README.md", call),
                ("files/lookup.txt", call),
                ("charts/db/README.md", call),
            ],
            &json!({}),
        );
        let paths: Vec<&str> = found.lookup.iter().map(String::as_str).collect();
        assert_eq!(
            paths,
            ["charts/db/charts/x/templates/y.yaml", "charts/db/templates/_helpers.tpl", "templates/a.yaml"]
        );
    }

    #[test]
    fn values_count_only_through_tpl() {
        let values_file = "extra: '{{ lookup \"v1\" \"Secret\" \"a\" \"b\" }}'\n";
        let release_values = json!({"extra": "{{ (lookup \"v1\" \"Secret\" \"a\" \"b\").data }}"});
        let plain = [("templates/a.yaml", "{{ .Values.extra }}"), ("values.yaml", values_file)];
        assert!(scan(plain, &release_values).lookup.is_empty());
        let tpl = [("templates/a.yaml", "{{ tpl .Values.extra . }}"), ("values.yaml", values_file)];
        let found = scan(tpl, &release_values);
        let paths: Vec<&str> = found.lookup.iter().map(String::as_str).collect();
        assert_eq!(paths, ["values", "values.yaml"]);
        // A value named lookupTable is no call.
        assert!(scan([("templates/a.yaml", "{{ tpl .Values.x . }}")], &json!({"lookupTable": {"a": 1}}))
            .lookup
            .is_empty());
    }

    #[test]
    fn capabilities_but_not_helm_version() {
        assert!(!calls("{{ .Capabilities.KubeVersion.Minor }}").capabilities.is_empty());
        assert!(!calls(r#"{{ if .Capabilities.APIVersions.Has "policy/v1" }}{{ end }}"#)
            .capabilities
            .is_empty());
        assert!(!calls("{{ $.Capabilities.KubeVersion }}").capabilities.is_empty());
        assert!(calls("{{ .Capabilities.HelmVersion.Version }}").capabilities.is_empty());
        assert!(!calls("{{ $root.Capabilities.APIVersions }}").capabilities.is_empty());
        assert!(calls("{{ .Values.Capabilities }}").capabilities.is_empty(), "a value named so");
        assert!(calls("Capabilities outside {{ .Values.x }}").capabilities.is_empty());
        assert!(calls(r#"{{ ".Capabilities" }}"#).capabilities.is_empty());
    }

    #[test]
    fn unclosed_actions_and_strings_do_not_panic() {
        for template in
            ["{{ lookup", "{{ \"unterminated", "{{ `raw", "{{ /* open", "{{", "}}{{}}", "{{ 'é' }}"]
        {
            let _ = calls(template);
        }
        assert!(looks_up("{{ lookup"));
    }
}
