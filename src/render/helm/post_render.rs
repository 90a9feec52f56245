//! What Helm 4 does to a release's text around the post-renderer helm-controller always gives
//! it (its origin labels: fluxcd/helm-controller `internal/postrender/build.go`), so that the
//! objects fluxplan plans are the ones the controller applies, parsed value for parsed value.
//!
//! Helm 4.1 (`pkg/action/action.go`, `renderResources`) reads each template file with kyaml
//! (`annotateAndMerge`: `kio.ParseAll`) and hands the post-renderer one stream; a block scalar
//! that ends a file without a final line break has none then, and a `|+` keeps its blank lines
//! (what `helm template` alone prints trims both). The post-renderer's output is read back with
//! kyaml and written per file (`splitAndDeannotate`), then cut and trimmed into documents
//! (`pkg/release/v1/util/manifest.go`, `SplitManifests`): the blank lines a `|+` keeps at the very
//! end of a document are lost there.
//!
//! fluxplan gets the first half from the pinned Helm itself: `helm template` runs with a
//! post-renderer plugin of its own (`KEEP_ENDS`, this executable) that gives the stream back with
//! a marker line after each document, so Helm's trimming cannot reach the documents' last values;
//! the markers are taken off after. The controller's own post-renderers are applied by fluxplan
//! (`release.rs`); the last of them writes every document with sorted keys (kustomize's
//! `resMap.AsYaml`), and `trim_document_end` then does what Helm's trimming does to that text.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The plugin's name (`helm template --post-renderer NAME`).
pub const PLUGIN_NAME: &str = "fluxplan-keep-ends";
/// The argument that makes this executable the plugin (`fluxplan helm-keep-ends`).
pub const SUBCOMMAND: &str = "helm-keep-ends";
/// The variable that names this executable to Helm's plugin runner.
const PROGRAM_ENV: &str = "FLUXPLAN_KEEP_ENDS_PROGRAM";
/// The top-level field marking a document's end: no Kubernetes object has it, and the API
/// server would refuse one that had.
pub const MARK_KEY: &str = "fluxplan.io/document-end";
const MARK_VALUE: &str = "end";

/// A plugin directory for one `helm template` run, and the cache directory Helm makes before it
/// loads a plugin (`internal/plugin/loader.go`: wazero's compilation cache), removed with it.
pub struct KeepEnds {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
    program: PathBuf,
}

impl KeepEnds {
    /// Writes the plugin: Helm runs this executable (`worker_program`: the fluxplan binary, also
    /// from a test harness) with `SUBCOMMAND`.
    pub fn prepare() -> Result<Self, String> {
        let program = crate::render::library::worker_program().filter(|p| p.is_file()).ok_or_else(|| {
            "fluxplan's own executable cannot be found (replaced while it ran?): restart fluxplan".to_string()
        })?;
        let temporary = |prefix: &str| {
            tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .map_err(|e| format!("cannot write Helm's post-renderer plugin: {e}"))
        };
        let (dir, cache) = (temporary("fluxplan-helm-plugins-")?, temporary("fluxplan-helm-cache-")?);
        let plugin = dir.path().join(PLUGIN_NAME);
        let manifest = format!(
            "apiVersion: v1\nname: {PLUGIN_NAME}\nversion: 0.1.0\ntype: postrenderer/v1\nruntime: subprocess\n\
             runtimeConfig:\n  platformCommand:\n  - command: \"${{{PROGRAM_ENV}}}\"\n    args: [\"{SUBCOMMAND}\"]\n"
        );
        std::fs::create_dir(&plugin)
            .and_then(|()| std::fs::write(plugin.join("plugin.yaml"), manifest))
            .map_err(|e| format!("cannot write Helm's post-renderer plugin: {e}"))?;
        Ok(KeepEnds { dir, cache, program })
    }

    /// The directory Helm finds the plugin in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The directory Helm may write its cache in.
    pub fn cache(&self) -> &Path {
        self.cache.path()
    }

    /// The executable Helm runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// What Helm needs in its environment to find and run the plugin.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("HELM_PLUGINS".into(), self.dir.path().display().to_string()),
            ("HELM_CACHE_HOME".into(), self.cache.path().display().to_string()),
            (PROGRAM_ENV.into(), self.program.display().to_string()),
        ]
    }
}

/// The plugin: the stream on standard input, marked (`mark_ends`), on standard output.
pub fn main() -> i32 {
    use std::io::{Read, Write};
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("fluxplan {SUBCOMMAND}: cannot read the manifests: {e}");
        return 1;
    }
    match std::io::stdout().write_all(mark_ends(&text).as_bytes()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("fluxplan {SUBCOMMAND}: {e}");
            1
        }
    }
}

/// kyaml's stream (`kio.StringAll`: documents separated by `---` lines, each a block mapping at
/// the margin, or a flow mapping `{…}`) with a `MARK_KEY` line after every block mapping, so its
/// last value is no longer at the end of the document when Helm trims it. A flow mapping ends in
/// `}`: nothing to keep.
pub fn mark_ends(stream: &str) -> String {
    let mut marked = String::with_capacity(stream.len() + stream.len() / 8);
    let mut document = String::new();
    let finish = |document: &mut String, marked: &mut String| {
        let first = document.lines().map(str::trim_start).find(|l| !l.is_empty() && !l.starts_with('#'));
        if first.is_some_and(|line| !line.starts_with('{')) {
            if !document.ends_with('\n') {
                document.push('\n');
            }
            document.push_str(&format!("{MARK_KEY}: {MARK_VALUE}\n"));
        }
        marked.push_str(document);
        document.clear();
    };
    for line in stream.split_inclusive('\n') {
        if line.trim_end() == "---" {
            finish(&mut document, &mut marked);
            marked.push_str(line);
        } else {
            document.push_str(line);
        }
    }
    finish(&mut document, &mut marked);
    marked
}

/// Takes the marker `mark_ends` put on a document off again.
pub fn unmark(document: &mut Value) {
    if let Some(map) = document.as_object_mut() {
        if map.get(MARK_KEY).and_then(Value::as_str) == Some(MARK_VALUE) {
            map.remove(MARK_KEY);
        }
    }
}

/// What Helm 4's trimming (`SplitManifests`) does to a document the controller's last
/// post-renderer wrote: kustomize's `resMap.AsYaml` (sigs.k8s.io/yaml `JSONToYAML`, go-yaml v2)
/// writes keys sorted (`go_yaml_key_order`) and a string with line breaks as a literal block
/// scalar when it can; when the document's last value is such a string ending in blank lines
/// (`|+`), trimming the document leaves it one line break.
pub fn trim_document_end(document: &mut Value) {
    let mut last = document;
    loop {
        last = match last {
            Value::Object(map) => match map.keys().max_by(|a, b| go_yaml_key_order(a, b)).cloned() {
                Some(key) => map.get_mut(&key).expect("a key of the map"),
                None => return,
            },
            Value::Array(items) => match items.last_mut() {
                Some(item) => item,
                None => return,
            },
            Value::String(text) => {
                let content = text.trim_end_matches('\n');
                if text.len() - content.len() >= 2 && !content.is_empty() && literal_block_allowed(text) {
                    text.truncate(content.len() + 1);
                }
                return;
            }
            _ => return,
        }
    }
}

/// Whether go-yaml's emitter may write `text` as a literal block scalar (its `analyze_scalar`):
/// not with a space before a line break, nor a character it cannot print as it is (a tab, a
/// control character, a byte order mark, a line break other than `\n`).
fn literal_block_allowed(text: &str) -> bool {
    let printable = |c: char| {
        matches!(c, '\n' | ' '..='~') || (c >= '\u{a0}' && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}'))
    };
    text.chars().all(printable) && !text.contains(" \n")
}

/// go-yaml v2's order of map keys (`sorter.go`, `keyList.Less`), which sigs.k8s.io/yaml writes:
/// letters by code point, any other character before a letter, runs of digits by their value.
pub fn go_yaml_key_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    for i in 0..a.len().min(b.len()) {
        if a[i] == b[i] {
            continue;
        }
        let (a_letter, b_letter) = (a[i].is_alphabetic(), b[i].is_alphabetic());
        if a_letter && b_letter {
            return a[i].cmp(&b[i]);
        }
        if a_letter || b_letter {
            return if b_letter { Ordering::Less } else { Ordering::Greater };
        }
        // Numbers: a run of digits read whole (a leading zero after other digits reads as more).
        let (mut a_number, mut b_number) = (0i64, 0i64);
        let zero = a[i] == '0' || b[i] == '0';
        if zero && a[..i].iter().rev().take_while(|c| c.is_numeric()).any(|c| *c != '0') {
            (a_number, b_number) = (1, 1);
        }
        let digits = |s: &[char], number: &mut i64| {
            let run = s[i..].iter().take_while(|c| c.is_numeric()).count();
            for c in &s[i..i + run] {
                *number = number.wrapping_mul(10).wrapping_add(c.to_digit(10).unwrap_or(0) as i64);
            }
            run
        };
        let (a_run, b_run) = (digits(&a, &mut a_number), digits(&b, &mut b_number));
        if a_number != b_number {
            return a_number.cmp(&b_number);
        }
        if a_run != b_run {
            return a_run.cmp(&b_run);
        }
        return a[i].cmp(&b[i]);
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_block_document_gets_a_marker_and_a_flow_one_none() {
        let stream = "a: |+\n  kept\n\n\n---\n{b: 1}\n---\n# head\nc: |-\n  x";
        let marked = mark_ends(stream);
        assert_eq!(
            marked,
            format!("a: |+\n  kept\n\n\n{MARK_KEY}: end\n---\n{{b: 1}}\n---\n# head\nc: |-\n  x\n{MARK_KEY}: end\n")
        );
        let mut documents = crate::yaml::parse_documents(&marked).unwrap();
        documents.iter_mut().for_each(unmark);
        assert_eq!(documents, vec![json!({"a": "kept\n\n\n"}), json!({"b": 1}), json!({"c": "x"})]);
        // Only fluxplan's own marker is taken off.
        let mut other = json!({MARK_KEY: "something else"});
        unmark(&mut other);
        assert_eq!(other, json!({MARK_KEY: "something else"}));
    }

    #[test]
    fn the_last_value_in_go_yamls_key_order_loses_its_blank_lines_when_printed_as_a_block() {
        let mut secret = json!({"kind": "Secret", "stringData": {"z": "kept\n\n\n", "a": "first\n\n"}});
        trim_document_end(&mut secret);
        assert_eq!(secret["stringData"], json!({"z": "kept\n", "a": "first\n\n"}));
        // Written double-quoted (a space before a line break, a tab): nothing trimmed.
        for text in ["x \n\n", "\ttab\n\n"] {
            let mut quoted = json!({"z": text});
            trim_document_end(&mut quoted);
            assert_eq!(quoted["z"], text);
        }
        let mut list = json!({"a": [{"b": " lead\n\n"}]});
        trim_document_end(&mut list);
        assert_eq!(list["a"][0]["b"], " lead\n");
        // Not the last value: kept as it is.
        let mut config = json!({"data": {"conf": "kept\n\n\n"}, "metadata": {"name": "x"}});
        trim_document_end(&mut config);
        assert_eq!(config["data"]["conf"], "kept\n\n\n");
    }

    #[test]
    fn keys_sort_as_go_yaml_sorts_them() {
        let mut keys = vec!["b", "a10", "a2", "B", "-x", "a", "a.b", "a02"];
        keys.sort_by(|a, b| go_yaml_key_order(a, b));
        assert_eq!(keys, vec!["-x", "B", "a", "a.b", "a2", "a02", "a10", "b"]);
    }
}
