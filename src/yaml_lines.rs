//! YAML read with the line of every node (saphyr-parser's events carry their position): where an
//! alert points in a file. Only for pointing: the meaning of a manifest is read elsewhere
//! (`yaml`, `go_yaml`). A stream of hostile text is bounded: nesting deeper than [`MAX_DEPTH`]
//! or more than [`MAX_NODES`] nodes stop the reading; aliases are never expanded.

use saphyr_parser::{Event, Parser};

/// Deeper than any manifest; a file nesting further is not read on.
pub const MAX_DEPTH: usize = 128;
/// Nodes read from one file, all documents together.
pub const MAX_NODES: usize = 500_000;

/// One node and the line (1-based) where it starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Scalar {
        value: String,
        line: u32,
    },
    Sequence {
        items: Vec<Node>,
        line: u32,
    },
    Mapping {
        entries: Vec<Entry>,
        line: u32,
    },
    /// `*anchor`: not followed.
    Alias {
        line: u32,
    },
}

/// A mapping's key (a scalar's text; `?` for a key that is a collection) and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub key_line: u32,
    pub value: Node,
}

impl Node {
    pub fn line(&self) -> u32 {
        match self {
            Node::Scalar { line, .. }
            | Node::Sequence { line, .. }
            | Node::Mapping { line, .. }
            | Node::Alias { line } => *line,
        }
    }

    /// The entry of `key` in a mapping (the last, as YAML readers keep).
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        match self {
            Node::Mapping { entries, .. } => entries.iter().rev().find(|e| e.key == key),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|e| &e.value)
    }

    pub fn scalar(&self) -> Option<&str> {
        match self {
            Node::Scalar { value, .. } => Some(value),
            _ => None,
        }
    }

    /// `metadata.name`, `metadata.namespace` and `kind` of a manifest.
    pub fn manifest_field(&self, section: Option<&str>, key: &str) -> Option<&str> {
        let node = match section {
            Some(section) => self.get(section)?,
            None => self,
        };
        node.get(key)?.scalar()
    }

    /// True when both hold the same content, wherever it sits.
    pub fn same(&self, other: &Node) -> bool {
        match (self, other) {
            (Node::Scalar { value: a, .. }, Node::Scalar { value: b, .. }) => a == b,
            (Node::Sequence { items: a, .. }, Node::Sequence { items: b, .. }) => {
                a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.same(b))
            }
            (Node::Mapping { entries: a, .. }, Node::Mapping { entries: b, .. }) => {
                a.len() == b.len()
                    && a.iter().all(|e| other.get(&e.key).is_some_and(|v| e.value.same(v)))
                    && b.iter().all(|e| self.entry(&e.key).is_some())
            }
            (Node::Alias { .. }, Node::Alias { .. }) => true,
            _ => false,
        }
    }

    /// The lines of what differs from `before` (`None`: all of it is new): the key line of each
    /// entry added or changed, the line of each item of a list that changed, at the deepest level
    /// where the difference is.
    pub fn changed_lines(&self, before: Option<&Node>, out: &mut Vec<u32>) {
        let Some(before) = before else {
            out.push(self.line());
            return;
        };
        match (self, before) {
            (Node::Mapping { entries, .. }, Node::Mapping { .. }) => {
                for entry in entries {
                    match before.get(&entry.key) {
                        Some(old) if entry.value.same(old) => {}
                        Some(old @ Node::Mapping { .. }) if matches!(entry.value, Node::Mapping { .. }) => {
                            entry.value.changed_lines(Some(old), out)
                        }
                        Some(old @ Node::Sequence { .. }) if matches!(entry.value, Node::Sequence { .. }) => {
                            entry.value.changed_lines(Some(old), out)
                        }
                        _ => out.push(entry.key_line),
                    }
                }
            }
            (Node::Sequence { items, line }, Node::Sequence { items: old, .. }) => {
                let before = out.len();
                for (i, item) in items.iter().enumerate() {
                    match old.get(i) {
                        Some(o) if item.same(o) => {}
                        Some(o) => item.changed_lines(Some(o), out),
                        None => out.push(item.line()),
                    }
                }
                // Items only removed: the list's own line.
                if out.len() == before && items.len() < old.len() {
                    out.push(*line);
                }
            }
            _ if self.same(before) => {}
            _ => out.push(self.line()),
        }
    }
}

/// Why a text was not read to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinesError {
    #[error("not YAML: {0}")]
    Syntax(String),
    #[error("nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("holds more than {MAX_NODES} nodes")]
    TooLarge,
}

/// The documents of a stream, each with its lines, as far as it reads; the error that stopped
/// the reading, if one did (the documents before it are complete and returned).
pub fn documents(text: &str) -> (Vec<Node>, Option<LinesError>) {
    let mut reader = Reader::default();
    for event in Parser::new_from_str(text) {
        let (event, span) = match event {
            Ok(event) => event,
            Err(e) => return (reader.documents, Some(LinesError::Syntax(e.to_string()))),
        };
        let line = u32::try_from(span.start.line()).unwrap_or(u32::MAX);
        if let Err(e) = reader.event(event, line) {
            return (reader.documents, Some(e));
        }
    }
    (reader.documents, None)
}

/// A collection being read.
enum Open {
    Sequence { items: Vec<Node>, line: u32 },
    Mapping { entries: Vec<Entry>, key: Option<(String, u32)>, line: u32 },
}

#[derive(Default)]
struct Reader {
    documents: Vec<Node>,
    open: Vec<Open>,
    /// The document's root, once read.
    root: Option<Node>,
    nodes: usize,
}

impl Reader {
    fn event(&mut self, event: Event, line: u32) -> Result<(), LinesError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(LinesError::TooLarge);
        }
        match event {
            Event::DocumentStart(_) => self.root = None,
            Event::DocumentEnd => {
                self.documents.extend(self.root.take());
                self.open.clear();
            }
            Event::Scalar(value, ..) => self.close(Node::Scalar { value: value.into_owned(), line }),
            Event::Alias(_) => self.close(Node::Alias { line }),
            Event::SequenceStart(..) => self.push(Open::Sequence { items: Vec::new(), line })?,
            Event::MappingStart(..) => self.push(Open::Mapping { entries: Vec::new(), key: None, line })?,
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.open.pop() {
                    Some(Open::Sequence { items, line }) => Node::Sequence { items, line },
                    Some(Open::Mapping { entries, line, .. }) => Node::Mapping { entries, line },
                    None => return Ok(()),
                };
                self.close(node);
            }
            Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
        }
        Ok(())
    }

    fn push(&mut self, open: Open) -> Result<(), LinesError> {
        if self.open.len() >= MAX_DEPTH {
            return Err(LinesError::TooDeep);
        }
        self.open.push(open);
        Ok(())
    }

    /// A complete node: a key, a value or an item of the collection it is in, or the root.
    fn close(&mut self, node: Node) {
        match self.open.last_mut() {
            None => self.root = Some(node),
            Some(Open::Sequence { items, .. }) => items.push(node),
            Some(Open::Mapping { entries, key, .. }) => match key.take() {
                None => {
                    let text = node.scalar().unwrap_or("?").to_string();
                    *key = Some((text, node.line()));
                }
                Some((key, key_line)) => entries.push(Entry { key, key_line, value: node }),
            },
        }
    }
}

/// The documents of `kind` named `name` (and in `namespace`, where the document says one).
pub fn find_manifest<'d>(
    documents: &'d [Node],
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Option<&'d Node> {
    let named = |d: &&Node| {
        d.manifest_field(None, "kind") == Some(kind)
            && d.manifest_field(Some("metadata"), "name") == Some(name)
    };
    let mut candidates = documents.iter().filter(named);
    let first = candidates.clone().next()?;
    let exact = |d: &&Node| match (d.manifest_field(Some("metadata"), "namespace"), namespace) {
        (Some(theirs), Some(ours)) => theirs == ours,
        _ => true,
    };
    Some(candidates.find(exact).unwrap_or(first))
}

/// The line of the deepest key of `path` the node holds (`spec`, `path`): the key line of the
/// last one found, `None` when not even the first is there.
pub fn line_of(node: &Node, path: &[&str]) -> Option<u32> {
    let mut here = node;
    let mut line = None;
    for key in path {
        match (here, key.parse::<usize>()) {
            (Node::Sequence { items, .. }, Ok(i)) if i < items.len() => {
                here = &items[i];
                line = Some(here.line());
            }
            _ => {
                let Some(entry) = here.entry(key) else { break };
                line = Some(entry.key_line);
                here = &entry.value;
            }
        }
    }
    line
}

/// The node at `path` (keys, and indexes of lists), when all of it is there.
pub fn node_at<'n>(node: &'n Node, path: &[&str]) -> Option<&'n Node> {
    let mut here = node;
    for key in path {
        here = match (here, key.parse::<usize>()) {
            (Node::Sequence { items, .. }, Ok(i)) => items.get(i)?,
            _ => here.get(key)?,
        };
    }
    Some(here)
}

/// Every scalar value under `node` with its place (`spec.template.spec.containers.0.image`) and
/// the line it sits on.
pub fn scalars<'n>(node: &'n Node, place: &str, out: &mut Vec<(String, &'n str, u32)>) {
    let inner = |key: &str| if place.is_empty() { key.to_string() } else { format!("{place}.{key}") };
    match node {
        Node::Scalar { value, line } => out.push((place.to_string(), value, *line)),
        Node::Sequence { items, .. } => {
            items.iter().enumerate().for_each(|(i, item)| scalars(item, &inner(&i.to_string()), out))
        }
        Node::Mapping { entries, .. } => entries.iter().for_each(|e| scalars(&e.value, &inner(&e.key), out)),
        Node::Alias { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_keys_in_every_document() {
        let text = "# a comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  interval: 1m\n  path: ./apps\n";
        let (docs, error) = documents(text);
        assert_eq!(error, None);
        assert_eq!(docs.len(), 2);
        let k = find_manifest(&docs, "Kustomization", Some("flux-system"), "apps").unwrap();
        assert_eq!(line_of(k, &["spec", "path"]), Some(13));
        assert_eq!(line_of(k, &["spec", "nothing"]), Some(11), "the deepest key there");
        assert_eq!(find_manifest(&docs, "Kustomization", Some("flux-system"), "other"), None);
    }

    #[test]
    fn changed_lines_are_the_deepest_differences() {
        let (before, _) =
            documents("values:\n  image:\n    tag: 1.0\n    pull: always\n  list:\n  - a\n  - b\n");
        let (after, _) = documents(
            "values:\n  image:\n    tag: 2.0\n    pull: always\n  list:\n  - a\n  - c\n  added: yes\n",
        );
        let mut lines = Vec::new();
        after[0].changed_lines(Some(&before[0]), &mut lines);
        assert_eq!(lines, vec![3, 7, 8]);
    }

    #[test]
    fn hostile_streams_stop_reading_without_harm() {
        let deep = "[".repeat(MAX_DEPTH + 10);
        assert_eq!(documents(&deep).1, Some(LinesError::TooDeep));
        // A billion laughs is a handful of nodes: aliases are never expanded.
        let laughs = "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n";
        let (docs, error) = documents(laughs);
        assert_eq!(error, None);
        assert_eq!(docs[0].get("d").map(|d| d.line()), Some(4));
        // Broken YAML keeps the documents before it.
        let (docs, error) = documents("a: 1\n---\nb: [\n");
        assert_eq!(docs.len(), 1);
        assert!(matches!(error, Some(LinesError::Syntax(_))));
    }
}
