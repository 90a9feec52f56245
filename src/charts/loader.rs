//! A chart archive read as helm-controller reads it: Helm's archive loader
//! (`pkg/chart/loader/archive/archive.go` `LoadArchiveFiles`, then `pkg/chart/v2/loader/load.go`
//! `LoadFiles`), which helm-controller calls on every chart artifact
//! (`internal/loader/artifact_url.go`). No `.helmignore`, no default ignore rule; the first path
//! component of every entry is dropped whatever it is, and a name holding `\` is split on `\`.
//! fluxplan never unpacks such an archive: `helm template` reads the archive itself, and what
//! fluxplan reads of it (its `Chart.yaml`, values files, vendored subcharts) it reads here, by the
//! names the loader gives. Where the chart must change (values files, version, dependencies),
//! only those entries are rewritten; every other entry is copied byte for byte.

use super::helmignore::Rules;
use serde_json::Value;
use std::io::Read;
use std::ops::Range;

/// fluxplan's own bounds (resource bounds, below Helm's 100 MiB): what an archive may unpack to
/// and how many entries it may hold.
pub const MAX_LOADED_BYTES: u64 = 64 << 20;
pub const MAX_ENTRIES: usize = 20_000;
/// The tar stream (file data plus headers and padding).
const MAX_STREAM_BYTES: u64 = MAX_LOADED_BYTES + (MAX_ENTRIES as u64) * 2048;
/// Helm's bound on one file (`MaxDecompressedFileSize`).
const MAX_FILE_BYTES: u64 = 5 << 20;
const BLOCK: usize = 512;

/// Why an archive is not read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// Helm's loader refuses it too: the controller fails to load the chart.
    #[error("{0}")]
    Refused(String),
    /// Over one of fluxplan's resource bounds.
    #[error("{0}")]
    Limit(String),
}

/// One file of the archive.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The name in the tar header.
    pub raw: String,
    /// The name the archive loader gives it (`templates/x.yaml`).
    pub loaded: String,
    data: Range<usize>,
    /// The bytes of the tar stream it occupies (extension headers, header, data, padding).
    segment: Range<usize>,
}

/// A chart archive read into memory (the decompressed tar stream, bounded).
pub struct ChartArchive {
    stream: Vec<u8>,
    entries: Vec<Entry>,
}

impl std::fmt::Debug for ChartArchive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChartArchive").field("entries", &self.entries).finish()
    }
}

/// How fluxplan changes a chart where the controller renders another than the archive holds.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// A new `values.yaml` (HelmChart `valuesFiles`, as source-controller packages them).
    pub values_yaml: Option<Vec<u8>>,
    /// A new `version` in `Chart.yaml` (`.Chart.Version`).
    pub version: Option<String>,
    /// Dependencies to leave out of `Chart.yaml`/`requirements.yaml` (declared, not vendored).
    pub drop_dependencies: Vec<String>,
}

impl ChartArchive {
    /// Reads a gzip-compressed chart archive as Helm's archive loader reads it.
    pub fn read(compressed: &[u8]) -> Result<Self, LoadError> {
        let refused = |why: String| LoadError::Refused(format!("the chart archive cannot be loaded: {why}"));
        // Go's gzip reader reads concatenated members, as MultiGzDecoder does.
        let mut stream = Vec::new();
        flate2::read::MultiGzDecoder::new(compressed)
            .take(MAX_STREAM_BYTES + 1)
            .read_to_end(&mut stream)
            .map_err(|e| refused(format!("not a gzip stream ({e})")))?;
        if stream.len() as u64 > MAX_STREAM_BYTES {
            return Err(LoadError::Limit(format!(
                "the chart archive unpacks to more than {} MiB",
                MAX_STREAM_BYTES >> 20
            )));
        }
        let mut entries = Vec::new();
        let mut loaded_bytes: u64 = 0;
        let mut end = 0usize;
        let mut tar = tar::Archive::new(&stream[..]);
        let iter = tar.entries().map_err(|e| refused(format!("not a tar archive ({e})")))?;
        for (count, entry) in iter.enumerate() {
            if count >= MAX_ENTRIES {
                return Err(LoadError::Limit(format!(
                    "the chart archive holds more than {MAX_ENTRIES} entries"
                )));
            }
            let entry = entry.map_err(|e| refused(format!("damaged ({e})")))?;
            let header = entry.header();
            let kind = header.entry_type();
            let size = entry.size();
            let start = end;
            let data_at = entry.raw_file_position() as usize;
            let padded = (size as usize).div_ceil(BLOCK) * BLOCK;
            end = data_at + padded;
            let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let mode = header.mode().unwrap_or(0);
            // Go's `FileInfo().IsDir()`: the type, or the mode's directory bits; an old-style
            // regular entry whose name ends in `/` is a directory too.
            let is_dir = kind.is_dir()
                || mode & 0o170000 == 0o040000
                || (kind == tar::EntryType::Regular && header.as_bytes()[156] == 0 && raw.ends_with('/'));
            // Extension headers reach us only when the tar reader did not apply them (an old
            // magic): Go's reader applies them anyway, so the names would differ. A directory's
            // declared size is data Go's reader never reads but ours skips: what it hides, Go
            // reads as entries.
            if kind.is_pax_local_extensions() || kind.is_gnu_longname() || kind.is_gnu_longlink() {
                return Err(refused(format!("{raw:?} is an extension header its reader would not apply")));
            }
            if kind.is_dir() && size > 0 {
                return Err(refused(format!("{raw:?} declares data its type cannot have")));
            }
            if is_dir || kind.is_pax_global_extensions() {
                continue;
            }
            let loaded = loaded_name(&raw).map_err(&refused)?;
            if size > MAX_FILE_BYTES {
                return Err(refused(format!("{raw:?} is larger than Helm's bound of 5 MiB per file")));
            }
            // Links, devices and fifos have no data in Go's reader: a declared size is unread.
            let header_only = kind.is_hard_link()
                || kind.is_symlink()
                || kind.is_character_special()
                || kind.is_block_special()
                || kind.is_fifo();
            if header_only && size > 0 {
                return Err(refused(format!("{raw:?} declares data its type cannot have")));
            }
            loaded_bytes += size;
            if loaded_bytes > MAX_LOADED_BYTES {
                return Err(LoadError::Limit(format!(
                    "the chart unpacks to more than {} MiB",
                    MAX_LOADED_BYTES >> 20
                )));
            }
            let data_end = data_at + size as usize;
            if data_end > stream.len() {
                return Err(refused(format!("{raw:?} is cut short")));
            }
            entries.push(Entry {
                raw,
                loaded,
                data: data_at..data_end,
                segment: start..end.min(stream.len()),
            });
        }
        // Go's reader ends at two zero blocks; one zero block followed by anything else is damage.
        let block = |at: usize| stream.get(at..at + BLOCK);
        if let (Some(first), Some(second)) = (block(end), block(end + BLOCK)) {
            if first.iter().all(|b| *b == 0) && second.iter().any(|b| *b != 0) {
                return Err(refused("damaged (data after its end)".into()));
            }
        }
        if entries.is_empty() {
            return Err(refused("no files in it".into()));
        }
        Ok(ChartArchive { stream, entries })
    }

    /// The files, in archive order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// A file's content as the loader keeps it (a UTF-8 byte order mark dropped).
    pub fn data(&self, entry: &Entry) -> &[u8] {
        let data = &self.stream[entry.data.clone()];
        data.strip_prefix(&[0xEF, 0xBB, 0xBF][..]).unwrap_or(data)
    }

    /// The last file the loader names `name` (the one that wins, as for `values.yaml`).
    pub fn last(&self, name: &str) -> Option<&[u8]> {
        self.entries.iter().rev().find(|e| e.loaded == name).map(|e| self.data(e))
    }

    /// A file of the chart's `.Files` (not `templates/`, `charts/` or the chart's own files), the
    /// first of that name, as source-controller looks up `valuesFiles` in a fetched chart.
    pub fn chart_file(&self, name: &str) -> Option<&[u8]> {
        const SPECIAL: &[&str] =
            &["Chart.yaml", "Chart.lock", "values.yaml", "values.schema.json", "requirements.lock"];
        if SPECIAL.contains(&name) || name.starts_with("templates/") || name.starts_with("charts/") {
            return None;
        }
        self.entries.iter().find(|e| e.loaded == name).map(|e| self.data(e))
    }

    /// The chart's metadata: every `Chart.yaml` the loader finds, read in order into one (later
    /// keys over earlier ones); `requirements.yaml` supplies `dependencies` as for Helm 2 charts.
    pub fn metadata(&self) -> Result<Value, String> {
        let mut merged = serde_json::Map::new();
        let mut found = false;
        for entry in self.entries.iter().filter(|e| e.loaded == "Chart.yaml") {
            found = true;
            if let Value::Object(fields) = parse(self.data(entry)).map_err(|e| format!("Chart.yaml: {e}"))? {
                merged.extend(fields);
            }
        }
        if !found {
            return Err("the chart archive holds no Chart.yaml".into());
        }
        if let Some(entry) = self.entries.iter().rev().find(|e| e.loaded == "requirements.yaml") {
            if let Ok(Value::Object(fields)) = parse(self.data(entry)) {
                merged.extend(fields.into_iter().filter(|(k, _)| k == "dependencies"));
            }
        }
        Ok(Value::Object(merged))
    }

    /// The names (`Chart.yaml` `name`) of the subcharts vendored under `charts/`, as `LoadFiles`
    /// finds them: directories holding a `Chart.yaml`, and archives.
    pub fn vendored(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for entry in &self.entries {
            let Some(rest) = entry.loaded.strip_prefix("charts/") else { continue };
            let (cname, inner) = rest.split_once('/').unwrap_or((rest, ""));
            if cname.starts_with(['_', '.']) || entry.loaded.ends_with(".prov") {
                continue;
            }
            if cname.ends_with(".tgz") && inner.is_empty() {
                let name = ChartArchive::read(self.data(entry))
                    .ok()
                    .and_then(|sub| sub.metadata().ok())
                    .and_then(|m| m["name"].as_str().map(str::to_string));
                names.extend(name);
            } else if inner == "Chart.yaml" && seen.insert(cname.to_string()) {
                names.extend(
                    parse(self.data(entry)).ok().and_then(|m| m["name"].as_str().map(str::to_string)),
                );
            }
        }
        names
    }

    /// Dependencies the chart declares and does not vendor: `helm template` refuses the chart
    /// (`CheckDependencies`); helm-controller, which never checks, installs it without them.
    pub fn unvendored_dependencies(&self) -> Vec<String> {
        let Ok(metadata) = self.metadata() else { return Vec::new() };
        let vendored = self.vendored();
        metadata["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["name"].as_str())
            .filter(|name| !vendored.iter().any(|v| v == name))
            .map(str::to_string)
            .collect()
    }

    /// Where Helm's directory loader (`helm template DIR` of the archive unpacked) would read
    /// the archive otherwise than the archive loader: each entry named, with why.
    pub fn loader_differences(&self) -> Vec<String> {
        let chart_yaml = self.entries.iter().find(|e| e.loaded == "Chart.yaml");
        let top =
            chart_yaml.or(self.entries.first()).map(|e| e.raw.split('/').next().unwrap_or("").to_string());
        let top = top.unwrap_or_default();
        let helmignore =
            self.entries.iter().find(|e| e.raw == format!("{top}/.helmignore")).map(|e| self.data(e));
        let rules = Rules::for_chart(helmignore);
        let mut differences = Vec::new();
        if let Err(why) = &rules {
            differences.push(format!("the directory loader would refuse the chart ({why})"));
        }
        for entry in &self.entries {
            let (raw, loaded) = (&entry.raw, &entry.loaded);
            let why = if raw.contains('\\') {
                format!("its name holds `\\`; the archive loader reads it as {loaded}")
            } else if raw.split('/').next() != Some(top.as_str()) {
                format!(
                    "it lies outside the chart's directory {top}/; the archive loader reads it as {loaded}"
                )
            } else if rules.as_ref().is_ok_and(|r| r.ignores_file(raw.split_once('/').map_or("", |(_, r)| r)))
            {
                format!(
                    "the directory loader leaves it out (.helmignore or Helm's default templates/.?*); the archive \
                     loader reads it as {loaded}"
                )
            } else {
                continue;
            };
            differences.push(format!("{raw:?}: {why}"));
        }
        differences
    }

    /// The archive with `changes` made: the entries they concern rewritten, every other entry
    /// copied byte for byte (gzip-compressed).
    pub fn rewrite(&self, changes: &Changes) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(self.stream.len());
        let last_values = self.entries.iter().rposition(|e| e.loaded == "values.yaml");
        let last_chart = self.entries.iter().rposition(|e| e.loaded == "Chart.yaml");
        for (n, entry) in self.entries.iter().enumerate() {
            let replaced: Option<Vec<u8>> = match entry.loaded.as_str() {
                "values.yaml" if changes.values_yaml.is_some() => {
                    if Some(n) != last_values {
                        continue; // an earlier values.yaml loses to the last one anyway
                    }
                    changes.values_yaml.clone()
                }
                "Chart.yaml" | "requirements.yaml" => {
                    let version = changes.version.as_deref().filter(|_| entry.loaded == "Chart.yaml");
                    self.edited_metadata(entry, version, Some(n) == last_chart, &changes.drop_dependencies)?
                }
                _ => None,
            };
            match replaced {
                Some(data) => push_entry(&mut out, &entry.raw, &data),
                None => out.extend_from_slice(&self.stream[entry.segment.clone()]),
            }
        }
        if let (Some(values), None) = (&changes.values_yaml, last_values) {
            // No values.yaml: one beside the Chart.yaml (any first component would do).
            let name = last_chart
                .map(|n| &self.entries[n])
                .and_then(|e| e.raw.strip_suffix("Chart.yaml"))
                .map_or_else(|| "chart/values.yaml".to_string(), |prefix| format!("{prefix}values.yaml"));
            push_entry(&mut out, &name, values);
        }
        out.extend_from_slice(&[0; 2 * BLOCK]);
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut encoder, &out).map_err(|e| e.to_string())?;
        encoder.finish().map_err(|e| e.to_string())
    }

    /// A `Chart.yaml` or `requirements.yaml` with its version set or dependencies dropped;
    /// `None` when it stays as it is.
    fn edited_metadata(
        &self,
        entry: &Entry,
        version: Option<&str>,
        last_chart: bool,
        drop: &[String],
    ) -> Result<Option<Vec<u8>>, String> {
        let Ok(Value::Object(mut fields)) = parse(self.data(entry)) else { return Ok(None) };
        let mut changed = false;
        if let Some(version) = version {
            if last_chart || fields.contains_key("version") {
                fields.insert("version".into(), Value::String(version.to_string()));
                changed = true;
            }
        }
        if let Some(Value::Array(dependencies)) = fields.get_mut("dependencies") {
            let before = dependencies.len();
            dependencies.retain(|d| !d["name"].as_str().is_some_and(|name| drop.iter().any(|n| n == name)));
            changed |= dependencies.len() != before;
        }
        Ok(changed.then(|| crate::yaml::to_yaml(&Value::Object(fields)).into_bytes()))
    }
}

/// The first YAML document of `data`.
fn parse(data: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(data).map_err(|_| "not UTF-8".to_string())?;
    Ok(crate::yaml::parse_documents(text)?.into_iter().next().unwrap_or(Value::Null))
}

/// The name Helm's archive loader gives the entry `raw`, or why it refuses it.
pub fn loaded_name(raw: &str) -> Result<String, String> {
    let delimiter = if raw.contains('\\') { '\\' } else { '/' };
    let parts: Vec<&str> = raw.split(delimiter).collect();
    let joined = parts[1..].join("/");
    if joined.starts_with('/') {
        return Err(format!("{raw:?} is an absolute path"));
    }
    let name = clean(&joined);
    if name == "." {
        return Err(format!("{raw:?} lies outside the chart's directory"));
    }
    if name.starts_with("..") {
        return Err(format!("{raw:?} refers to a parent directory"));
    }
    let bytes = name.as_bytes();
    if bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && bytes[2] == b'/' {
        return Err(format!("{raw:?} is named as a drive path"));
    }
    if parts[0] == "Chart.yaml" {
        return Err("its Chart.yaml is not in the chart's directory".into());
    }
    Ok(name)
}

/// Go's `path.Clean` of a relative path.
pub(crate) fn clean(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for element in path.split('/') {
        match element {
            "" | "." => {}
            ".." if kept.last().is_some_and(|last| *last != "..") => {
                kept.pop();
            }
            other => kept.push(other),
        }
    }
    if kept.is_empty() {
        ".".into()
    } else {
        kept.join("/")
    }
}

/// Appends a regular file named `name` (any length, any characters: a pax `path` record
/// carries it) holding `data`.
fn push_entry(out: &mut Vec<u8>, name: &str, data: &[u8]) {
    let record = pax_record("path", name);
    push_header(out, b"PaxHeader", tar::EntryType::XHeader, record.len() as u64);
    push_data(out, record.as_bytes());
    let short: Vec<u8> = name.bytes().take(99).collect();
    push_header(out, &short, tar::EntryType::Regular, data.len() as u64);
    push_data(out, data);
}

fn push_header(out: &mut Vec<u8>, name: &[u8], kind: tar::EntryType, size: u64) {
    let mut header = tar::Header::new_ustar();
    if let Some(ustar) = header.as_ustar_mut() {
        ustar.name[..name.len()].copy_from_slice(name);
    }
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    out.extend_from_slice(header.as_bytes());
}

fn push_data(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
}

/// A pax record: its length (counting itself), the key, the value.
fn pax_record(key: &str, value: &str) -> String {
    let body = format!(" {key}={value}\n");
    let mut length = body.len() + 1;
    while format!("{length}{body}").len() != length {
        length += 1;
    }
    format!("{length}{body}")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A gzip tar stream of `(name, body)` regular files, names written as given (GNU long
    /// names where they do not fit).
    pub(crate) fn archive(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, body) in entries {
            push_entry(&mut out, name, body);
        }
        out.extend_from_slice(&[0; 1024]);
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), Default::default());
        std::io::Write::write_all(&mut encoder, &out).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn names_are_loaded_as_helm_loads_them() {
        for (raw, expected) in [
            ("app/templates/a.yaml", Ok("templates/a.yaml")),
            ("other/templates/z.yaml", Ok("templates/z.yaml")),
            ("app/x\\templates\\y.yaml", Ok("templates/y.yaml")),
            ("a\\b/c\\d", Ok("b/c/d")),
            ("app/templates/./b.yaml", Ok("templates/b.yaml")),
            ("app/templates/../c.yaml", Ok("c.yaml")),
            ("app/../../etc/passwd", Err("parent directory")),
            ("app//etc/passwd", Err("absolute path")),
            ("README", Err("outside the chart's directory")),
            ("app/c:/x", Err("drive path")),
            ("app/..hidden", Err("parent directory")),
        ] {
            match (loaded_name(raw), expected) {
                (Ok(name), Ok(expected)) => assert_eq!(name, expected, "{raw}"),
                (Err(why), Err(expected)) => assert!(why.contains(expected), "{raw}: {why}"),
                (got, expected) => panic!("{raw}: {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn hidden_entries_are_loaded_and_named_as_differences() {
        let bytes = archive(&[
            ("app/Chart.yaml", b"apiVersion: v2\nname: app\nversion: 1.0.0\n"),
            ("app/.helmignore", b"listed.yaml\n"),
            ("app/templates/listed.yaml", b"kind: A\n"),
            ("app/templates/.dot.yaml", b"kind: B\n"),
            ("app/x\\templates\\slash.yaml", b"kind: C\n"),
            ("other/templates/z.yaml", b"kind: D\n"),
            ("app/templates/plain.yaml", b"kind: E\n"),
        ]);
        let chart = ChartArchive::read(&bytes).unwrap();
        let loaded: Vec<&str> = chart.entries().iter().map(|e| e.loaded.as_str()).collect();
        assert_eq!(
            loaded,
            [
                "Chart.yaml",
                ".helmignore",
                "templates/listed.yaml",
                "templates/.dot.yaml",
                "templates/slash.yaml",
                "templates/z.yaml",
                "templates/plain.yaml"
            ]
        );
        let differences = chart.loader_differences().join("\n");
        for named in ["listed.yaml", ".dot.yaml", "slash.yaml", "other/templates/z.yaml"] {
            assert!(differences.contains(named), "{named}: {differences}");
        }
        assert!(!differences.contains("plain.yaml"), "{differences}");
        assert_eq!(chart.loader_differences().len(), 4);
    }

    #[test]
    fn a_rewrite_changes_only_the_entries_it_concerns() {
        let bytes = archive(&[
            ("app/Chart.yaml", b"apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: db\n  version: 1.x\n  repository: https://example.com\n- name: sub\n  version: 1.x\n"),
            ("app/values.yaml", b"a: 1\n"),
            ("app/templates/.dot.yaml", b"kind: B\n"),
            ("app/charts/sub/Chart.yaml", b"name: sub\nversion: 1.0.0\n"),
        ]);
        let chart = ChartArchive::read(&bytes).unwrap();
        assert_eq!(chart.unvendored_dependencies(), ["db"]);
        let changes = Changes {
            values_yaml: Some(b"b: 2\n".to_vec()),
            version: Some("1.0.0+0123456789ab".into()),
            drop_dependencies: vec!["db".into()],
        };
        let rewritten = ChartArchive::read(&chart.rewrite(&changes).unwrap()).unwrap();
        let raw: Vec<&str> = rewritten.entries().iter().map(|e| e.raw.as_str()).collect();
        assert_eq!(
            raw,
            ["app/Chart.yaml", "app/values.yaml", "app/templates/.dot.yaml", "app/charts/sub/Chart.yaml"]
        );
        assert_eq!(rewritten.last("values.yaml").unwrap(), b"b: 2\n");
        assert_eq!(rewritten.last("templates/.dot.yaml").unwrap(), b"kind: B\n");
        let metadata = rewritten.metadata().unwrap();
        assert_eq!(metadata["version"], "1.0.0+0123456789ab");
        assert_eq!(metadata["dependencies"].as_array().unwrap().len(), 1);
        assert!(rewritten.unvendored_dependencies().is_empty());
    }

    /// Entries where Go's reader and ours part ways: a directory that declares data (Go reads
    /// none, so what hides in it is an entry to Go), and an extension header under an old magic
    /// (Go applies it, ours yields it as an entry). Refused; a plain directory is not.
    #[test]
    fn entries_go_reads_otherwise_are_refused() {
        let gzip = |raw: &[u8]| {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), Default::default());
            std::io::Write::write_all(&mut encoder, raw).unwrap();
            encoder.finish().unwrap()
        };
        let hidden = {
            let mut inner = Vec::new();
            push_entry(&mut inner, "app/templates/crb.yaml", b"kind: ClusterRoleBinding\n");
            inner
        };
        let mut raw = Vec::new();
        push_entry(&mut raw, "app/Chart.yaml", b"name: app\nversion: 1.0.0\n");
        push_header(&mut raw, b"app/templates/", tar::EntryType::Directory, hidden.len() as u64);
        raw.extend_from_slice(&hidden);
        raw.extend_from_slice(&[0; 1024]);
        let error = ChartArchive::read(&gzip(&raw)).unwrap_err();
        assert!(error.to_string().contains("declares data its type cannot have"), "{error}");

        let mut raw = Vec::new();
        push_entry(&mut raw, "app/Chart.yaml", b"name: app\nversion: 1.0.0\n");
        let record = pax_record("path", "app/templates/evil.yaml");
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..9].copy_from_slice(b"PaxHeader");
        header.set_entry_type(tar::EntryType::XHeader);
        header.set_size(record.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        raw.extend_from_slice(header.as_bytes());
        push_data(&mut raw, record.as_bytes());
        push_entry(&mut raw, "app/README", b"hello\n");
        raw.extend_from_slice(&[0; 1024]);
        let error = ChartArchive::read(&gzip(&raw)).unwrap_err();
        assert!(error.to_string().contains("extension header"), "{error}");

        let mut raw = Vec::new();
        push_entry(&mut raw, "app/Chart.yaml", b"name: app\nversion: 1.0.0\n");
        push_header(&mut raw, b"app/templates/", tar::EntryType::Directory, 0);
        raw.extend_from_slice(&[0; 1024]);
        assert!(ChartArchive::read(&gzip(&raw)).is_ok());
    }

    #[test]
    fn bounds_and_damage_are_clear_errors() {
        let big = vec![b'a'; (MAX_FILE_BYTES + 1) as usize];
        let error = ChartArchive::read(&archive(&[("app/Chart.yaml", b"name: a\n"), ("app/big", &big)]));
        assert!(matches!(error, Err(LoadError::Refused(ref why)) if why.contains("5 MiB")), "{error:?}");
        assert!(matches!(ChartArchive::read(b"not gzip"), Err(LoadError::Refused(_))));
        let error = ChartArchive::read(&archive(&[("app/../../x", b"")])).unwrap_err();
        assert!(error.to_string().contains("parent directory"), "{error}");
    }
}
