//! Parsing one spec file into located documents.
//!
//! A file holds any number of YAML documents (`---` separated), each with
//! `apiVersion` / `kind` / `metadata` / `spec`. Parsing happens in two steps:
//!
//! 1. One pass over the YAML event stream (the parser serde-saphyr uses,
//!    `granit-parser`) finds where each document starts and ends and builds a
//!    [`FieldIndex`]: the line/column of every key and value by path, so that
//!    semantic errors can point at the offending field. This pass never expands
//!    aliases, so it is linear in the size of the file.
//! 2. Each document's text is deserialized on its own with serde-saphyr (with
//!    budgets against alias bombs and deep nesting) into the model types, so a
//!    type error in one document does not hide problems in the next one.
//!
//! Every problem is a [`Diagnostic`] with `file:line:column`. Nothing here
//! panics, whatever the input.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Span};
use serde_saphyr::{DuplicateKeyPolicy, MessageFormatter, UserMessageFormatter};

use super::model::{API_VERSION, Metadata, SliceSpec, TargetSpec};
use super::{Diagnostic, Location, SourceFile};

/// Largest spec file read (4 MiB). Larger files are refused with a diagnostic.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// Deepest nesting of YAML collections accepted in a document.
pub const MAX_DEPTH: usize = 64;

/// Paths deeper than this are not indexed (lookups fall back to a parent).
const MAX_INDEX_DEPTH: usize = 16;

/// Most nodes (scalars and collections) in one document.
const MAX_NODES: usize = 100_000;

/// Most YAML nodes (scalars, collections, aliases) in one file. The event
/// scan indexes every node's location, so this bounds the memory a file
/// can take whatever its shape (`x: [a,a,…]` packs a node in 2 bytes): at
/// most about 30 MB. A file of 1,000 slices has about 31,000. (serde-saphyr's
/// own [`serde_saphyr::Budget`] bounds each document's deserialization, but
/// the location index is built by this scan, before that.)
pub const MAX_FILE_NODES: usize = 100_000;

/// Most YAML documents in one file (each costs its index even when empty).
pub const MAX_FILE_DOCUMENTS: usize = 10_000;

/// Most alias references in one document.
const MAX_ALIASES: usize = 1_000;

/// Most events replayed from aliases in one document (alias bombs).
const MAX_REPLAYED_EVENTS: usize = 100_000;

/// The document kinds this release reads.
pub const KINDS: &[&str] = &["Target", "Slice"];

/// Separator of path segments in [`FieldIndex`] keys (cannot occur in a
/// plain YAML key).
const PATH_SEP: char = '\u{1f}';

/// The spec of one document, typed by its `kind`.
// A document lives only while its file is validated, and nearly all of a
// large fleet's documents are Slices: boxing the larger Target would add an
// allocation to each for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentSpec {
    /// `kind: Target`.
    Target(TargetSpec),
    /// `kind: Slice`.
    Slice(SliceSpec),
}

impl DocumentSpec {
    /// The document's `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            DocumentSpec::Target(_) => "Target",
            DocumentSpec::Slice(_) => "Slice",
        }
    }
}

/// One well-formed document: it has the right `apiVersion`, a known `kind`,
/// and its `metadata` and `spec` have the right shape. Semantic checks are
/// [`crate::spec::validate`]'s job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// `metadata`.
    pub metadata: Metadata,
    /// `spec`, typed by `kind`.
    pub spec: DocumentSpec,
    /// Where the document's content starts.
    pub location: Location,
    /// Locations of the document's keys and values.
    pub fields: FieldIndex,
}

/// The outcome of parsing one file: the well-formed documents and the
/// problems found (a file can have both).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedFile {
    /// Well-formed documents, in file order.
    pub documents: Vec<Document>,
    /// Problems, in file order.
    pub diagnostics: Vec<Diagnostic>,
    /// Names of `Target` documents that could not be read (so references to
    /// them are not reported as dangling on top of the real problem).
    pub broken_targets: Vec<String>,
    /// Whether some document could not be read and its kind or name is
    /// unknown (a syntax error, an unknown kind...).
    pub unknown_broken: bool,
}

/// Where a key and its value are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FieldLoc {
    key: Option<(usize, usize)>,
    value: Option<(usize, usize)>,
}

/// Locations of a document's keys and values by path (`["spec", "topology"]`,
/// `["spec", "taints", "0", "key"]`). Lookups of a path that is not indexed
/// fall back to its nearest indexed parent, then to the document start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldIndex {
    file: std::path::PathBuf,
    start: (usize, usize),
    entries: HashMap<String, FieldLoc>,
}

impl FieldIndex {
    fn new(file: &Path, start: (usize, usize)) -> Self {
        FieldIndex {
            file: file.to_path_buf(),
            start,
            entries: HashMap::new(),
        }
    }

    fn location(&self, (line, column): (usize, usize)) -> Location {
        Location {
            file: self.file.clone(),
            line,
            column,
        }
    }

    fn lookup(&self, path: &[&str], key: bool) -> Location {
        // The whole path joined once; each parent is a prefix of it.
        let joined = join(path);
        let mut end = joined.len();
        let mut len = path.len();
        while len > 0 {
            let prefix = joined.get(..end).unwrap_or_default();
            // The next parent ends before this path's last segment and its separator.
            end = end.saturating_sub(path[len - 1].len() + PATH_SEP.len_utf8());
            if let Some(found) = self.entries.get(prefix) {
                let pos = if key {
                    found.key.or(found.value)
                } else {
                    found.value.or(found.key)
                };
                if let Some(pos) = pos {
                    return self.location(pos);
                }
            }
            len -= 1;
        }
        self.location(self.start)
    }

    /// Where the value at `path` is (or its nearest indexed parent).
    pub fn value(&self, path: &[&str]) -> Location {
        self.lookup(path, false)
    }

    /// Where the key of the entry at `path` is (or its nearest indexed parent).
    pub fn key(&self, path: &[&str]) -> Location {
        self.lookup(path, true)
    }

    /// The entry whose key (`Some(true)`) or value (`Some(false)`) is at
    /// `at`, as path segments; the shortest path wins.
    fn entry_at(&self, at: (usize, usize)) -> Option<(Vec<String>, bool)> {
        self.entries
            .iter()
            .filter_map(|(path, loc)| {
                let segs = || path.split(PATH_SEP).map(str::to_string).collect::<Vec<_>>();
                if loc.key == Some(at) {
                    Some((segs(), true))
                } else if loc.value == Some(at) {
                    Some((segs(), false))
                } else {
                    None
                }
            })
            .min_by_key(|(segs, _)| segs.len())
    }

    /// Places a deserialization error at `at` in context: prefixes the
    /// message with the path of the mapping or value concerned and moves a
    /// "missing field" error to the mapping that lacks the field.
    fn explain(&self, at: Location, message: String) -> Diagnostic {
        let Some((path, is_key)) = self.entry_at((at.line, at.column)) else {
            return Diagnostic {
                location: at,
                message,
            };
        };
        // The mapping concerned: a key's parent, or the value itself.
        let owner: Vec<&str> = if is_key {
            path[..path.len().saturating_sub(1)]
                .iter()
                .map(String::as_str)
                .collect()
        } else {
            path.iter().map(String::as_str).collect()
        };
        let location = if message.starts_with("missing field") {
            if owner.is_empty() {
                self.start()
            } else {
                self.key(&owner)
            }
        } else {
            at
        };
        let message = if owner.is_empty() {
            message
        } else {
            format!("{}: {message}", owner.join("."))
        };
        Diagnostic { location, message }
    }

    /// Where the document starts.
    pub fn start(&self) -> Location {
        self.location(self.start)
    }
}

fn join(path: &[&str]) -> String {
    let mut out = String::new();
    for (i, seg) in path.iter().enumerate() {
        if i > 0 {
            out.push(PATH_SEP);
        }
        out.push_str(seg);
    }
    out
}

/// A document as found by the event scan.
#[derive(Debug)]
struct ScannedDoc {
    /// First line of the document's text (1-based); its `---` line if explicit.
    first_line: usize,
    /// Line after the document's last line (1-based, exclusive), if known.
    end_line: Option<usize>,
    /// The root node: where, and what.
    root: Option<(usize, usize, RootKind)>,
    fields: FieldIndex,
    /// `apiVersion` value, when a scalar.
    api_version: Option<String>,
    /// `kind` value, when a scalar.
    kind: Option<String>,
    /// `metadata.name` value, when a scalar.
    name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RootKind {
    Mapping,
    Sequence,
    Null,
    Scalar,
}

/// Where a collection being scanned is indexed: its path's length in
/// [`Scanner::path`] (bytes) and its depth (segments).
#[derive(Debug, Clone, Copy)]
struct Indexed {
    len: usize,
    depth: usize,
}

/// A collection being scanned. `at` is `None` when it is not indexed.
#[derive(Debug)]
enum Frame {
    /// A mapping. `key` is `None` while a key is expected, `Some(true)`
    /// while the value of an indexed key is expected (the key is on
    /// [`Scanner::path`]), `Some(false)` while the value of a key that
    /// cannot be indexed is expected.
    Map {
        at: Option<Indexed>,
        key: Option<bool>,
    },
    /// A sequence and the index of its next item.
    Seq { at: Option<Indexed>, next: usize },
}

fn pos(span: &Span) -> (usize, usize) {
    (span.start.line().max(1), span.start.col() + 1)
}

fn is_null_scalar(value: &str, style: ScalarStyle) -> bool {
    style == ScalarStyle::Plain && matches!(value, "" | "~" | "null" | "Null" | "NULL")
}

/// Event scan state over one file.
struct Scanner<'a> {
    file: &'a Path,
    docs: Vec<ScannedDoc>,
    stack: Vec<Frame>,
    /// The path of the node being read, segments joined by [`PATH_SEP`]
    /// (one buffer for the whole scan: a segment is appended when a key or
    /// an item is reached and cut off when its value is complete).
    path: String,
    /// Nodes seen in the file so far.
    nodes: usize,
}

enum NodeEvent<'e> {
    Scalar(&'e str, ScalarStyle),
    Start(bool),
    Alias,
}

impl Scanner<'_> {
    fn doc(&mut self) -> Option<&mut ScannedDoc> {
        self.docs.last_mut()
    }

    /// Appends a segment to the path of a collection indexed at `parent`;
    /// `None` when the child is too deep to be indexed.
    fn descend(
        &mut self,
        parent: Option<Indexed>,
        segment: &dyn std::fmt::Display,
    ) -> Option<Indexed> {
        let parent = parent.filter(|p| p.depth < MAX_INDEX_DEPTH)?;
        self.path.truncate(parent.len);
        if parent.depth > 0 {
            self.path.push(PATH_SEP);
        }
        // Writing into a String cannot fail.
        let _ = std::fmt::Write::write_fmt(&mut self.path, format_args!("{segment}"));
        Some(Indexed {
            len: self.path.len(),
            depth: parent.depth + 1,
        })
    }

    /// A node has been fully read: advance its parent.
    fn complete(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Map { key, .. }) => {
                *key = match key {
                    None => Some(false),
                    Some(_) => None,
                };
            }
            Some(Frame::Seq { next, .. }) => *next += 1,
            None => {}
        }
    }

    /// Records where the node at the current path is.
    fn record(&mut self, at: (usize, usize), is_key: bool) {
        if self.path.is_empty() {
            return;
        }
        let Some(doc) = self.docs.last_mut() else {
            return;
        };
        let entry = match doc.fields.entries.get_mut(self.path.as_str()) {
            Some(entry) => entry,
            None => doc
                .fields
                .entries
                .entry(self.path.clone())
                .or_insert(FieldLoc {
                    key: None,
                    value: None,
                }),
        };
        if is_key {
            entry.key.get_or_insert(at);
        } else {
            entry.value.get_or_insert(at);
        }
    }

    fn node(&mut self, event: NodeEvent<'_>, span: &Span) -> Result<(), Diagnostic> {
        let at = pos(span);
        self.nodes += 1;
        if self.nodes > MAX_FILE_NODES {
            return Err(self.too_many(
                at,
                format!(
                    "more than {MAX_FILE_NODES} YAML nodes (values, keys and collections) in this file; \
                     no spec file needs that many: split it into several files"
                ),
            ));
        }
        let (indexed, is_key) = match self.stack.last() {
            None => {
                let kind = match event {
                    NodeEvent::Start(true) => RootKind::Mapping,
                    NodeEvent::Start(false) => RootKind::Sequence,
                    NodeEvent::Scalar(v, style) if is_null_scalar(v, style) => RootKind::Null,
                    NodeEvent::Scalar(..) | NodeEvent::Alias => RootKind::Scalar,
                };
                if let Some(doc) = self.doc() {
                    doc.root = Some((at.0, at.1, kind));
                    doc.fields.start = at;
                }
                self.path.clear();
                (Some(Indexed { len: 0, depth: 0 }), false)
            }
            Some(&Frame::Map {
                at: parent,
                key: None,
            }) => {
                // This node is a key.
                if let (NodeEvent::Scalar(text, _), Some(_)) = (&event, parent) {
                    let indexed = self.descend(parent, text).is_some();
                    if indexed {
                        self.record(at, true);
                    }
                    if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
                        *key = Some(indexed);
                    }
                    return Ok(());
                }
                (None, true)
            }
            Some(&Frame::Map {
                at: parent,
                key: Some(indexed),
            }) => (
                parent.filter(|_| indexed).map(|p| Indexed {
                    len: self.path.len(),
                    depth: p.depth + 1,
                }),
                false,
            ),
            Some(&Frame::Seq { at: parent, next }) => (self.descend(parent, &next), false),
        };
        if !is_key && indexed.is_some() {
            self.record(at, false);
            if let NodeEvent::Scalar(text, _) = &event {
                let field = match self.path.as_str() {
                    "apiVersion" => Some(0),
                    "kind" => Some(1),
                    "metadata\u{1f}name" => Some(2),
                    _ => None,
                };
                if let (Some(field), Some(doc)) = (field, self.docs.last_mut()) {
                    let text = Some((*text).to_string());
                    match field {
                        0 => doc.api_version = text,
                        1 => doc.kind = text,
                        _ => doc.name = text,
                    }
                }
            }
        }
        match event {
            NodeEvent::Start(is_map) => {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(self.too_many(
                        at,
                        format!(
                            "YAML nesting is deeper than {MAX_DEPTH} levels; spec documents are much flatter"
                        ),
                    ));
                }
                self.stack.push(if is_map {
                    Frame::Map {
                        at: indexed,
                        key: None,
                    }
                } else {
                    Frame::Seq {
                        at: indexed,
                        next: 0,
                    }
                });
            }
            NodeEvent::Scalar(..) | NodeEvent::Alias => {
                if self.stack.is_empty() {
                    return Ok(());
                }
                self.complete();
            }
        }
        Ok(())
    }

    /// A limit exceeded at `at`.
    fn too_many(&self, (line, column): (usize, usize), message: String) -> Diagnostic {
        Diagnostic {
            location: Location {
                file: self.file.to_path_buf(),
                line,
                column,
            },
            message,
        }
    }

    fn end_collection(&mut self) {
        self.stack.pop();
        self.complete();
    }
}

/// Scans the event stream: documents, their extents and field locations.
fn scan(file: &Path, text: &str) -> Result<Vec<ScannedDoc>, Diagnostic> {
    let mut scanner = Scanner {
        file,
        docs: Vec::new(),
        stack: Vec::new(),
        path: String::new(),
        nodes: 0,
    };
    for item in Parser::new_from_str(text) {
        let (event, span) = match item {
            Ok(pair) => pair,
            Err(err) => {
                let marker = err.marker();
                return Err(Diagnostic {
                    location: Location {
                        file: file.to_path_buf(),
                        line: marker.line().max(1),
                        column: marker.col() + 1,
                    },
                    message: format!("invalid YAML: {}", err.info()),
                });
            }
        };
        match event {
            Event::DocumentStart(..) => {
                let (line, col) = pos(&span);
                if scanner.docs.len() >= MAX_FILE_DOCUMENTS {
                    return Err(scanner.too_many(
                        (line, col),
                        format!(
                            "more than {MAX_FILE_DOCUMENTS} YAML documents in this file; split it into several files"
                        ),
                    ));
                }
                scanner.stack.clear();
                scanner.docs.push(ScannedDoc {
                    first_line: line,
                    end_line: None,
                    root: None,
                    fields: FieldIndex::new(file, (line, col)),
                    api_version: None,
                    kind: None,
                    name: None,
                });
            }
            Event::DocumentEnd => {
                // An explicit `...` ends the document's text on its line.
                if span.end.index() > span.start.index()
                    && let Some(doc) = scanner.doc()
                {
                    doc.end_line = Some(span.start.line() + 1);
                }
            }
            Event::Scalar(value, style, _, _) => {
                scanner.node(NodeEvent::Scalar(&value, style), &span)?;
            }
            Event::MappingStart(..) => scanner.node(NodeEvent::Start(true), &span)?,
            Event::SequenceStart(..) => scanner.node(NodeEvent::Start(false), &span)?,
            Event::Alias(_) | Event::UnresolvedAlias(_) => {
                scanner.node(NodeEvent::Alias, &span)?;
            }
            Event::MappingEnd | Event::SequenceEnd => scanner.end_collection(),
            _ => {}
        }
    }
    Ok(scanner.docs)
}

/// Byte offset of the start of each line (index 0 is line 1).
fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(
        text.bytes()
            .enumerate()
            .filter(|(_, b)| *b == b'\n')
            .map(|(i, _)| i + 1),
    );
    starts
}

/// The envelope of a document whose spec type is known.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Envelope<S> {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    metadata: Metadata,
    spec: S,
}

fn saphyr_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.max_nodes = MAX_NODES;
    budget.max_aliases = MAX_ALIASES;
    budget.max_anchors = MAX_ALIASES;
    budget.max_documents = 1;
    let mut alias_limits = serde_saphyr::options::AliasLimits::default();
    alias_limits.max_total_replayed_events = MAX_REPLAYED_EVENTS;
    alias_limits.max_replay_stack_depth = 16;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits = alias_limits;
    options.duplicate_keys = DuplicateKeyPolicy::Error;
    options.with_snippet = false;
    options.crop_radius = 0;
    options
}

/// The message of a serde-saphyr error, without its location suffix.
fn error_message(err: &serde_saphyr::Error) -> String {
    let mut err = err.without_snippet();
    while let serde_saphyr::Error::AliasError { error, .. } = err {
        err = error.without_snippet();
    }
    let msg = UserMessageFormatter.format_message(err);
    // Never let control characters from the input reach a terminal.
    super::escape_controls(&msg).into_owned()
}

fn deserialize_envelope<S: DeserializeOwned>(
    file: &Path,
    text: &str,
    line_offset: usize,
    doc_start: Location,
    fields: &FieldIndex,
) -> Result<Envelope<S>, Diagnostic> {
    serde_saphyr::from_str_with_options::<Envelope<S>>(text, saphyr_options()).map_err(|err| {
        let location = match err.location() {
            Some(loc) if loc.line() > 0 => Location {
                file: file.to_path_buf(),
                line: usize::try_from(loc.line()).unwrap_or(usize::MAX) + line_offset,
                column: usize::try_from(loc.column()).unwrap_or(1).max(1),
            },
            _ => doc_start,
        };
        fields.explain(location, error_message(&err))
    })
}

/// Parses one spec file. Never panics; every problem is a located diagnostic.
pub fn parse_file(file: &SourceFile) -> ParsedFile {
    let path = file.path.as_path();
    let mut out = ParsedFile::default();
    let at = |line: usize, column: usize| Location {
        file: path.to_path_buf(),
        line,
        column,
    };
    if file.text.len() > MAX_FILE_BYTES {
        out.diagnostics.push(Diagnostic {
            location: at(1, 1),
            message: format!(
                "file is {} bytes; spec files may be at most {} bytes (4 MiB): split it into several files",
                file.text.len(),
                MAX_FILE_BYTES
            ),
        });
        out.unknown_broken = true;
        return out;
    }
    let mut docs = match scan(path, &file.text) {
        Ok(docs) => docs,
        Err(diag) => {
            out.diagnostics.push(diag);
            out.unknown_broken = true;
            return out;
        }
    };
    let starts = line_starts(&file.text);
    let offset_of = |line: usize| -> usize {
        starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(file.text.len())
    };
    for i in 0..docs.len() {
        let errors_before = out.diagnostics.len();
        parse_document(&mut out, path, &file.text, &mut docs, i, &offset_of);
        let Some(doc) = docs.get(i) else {
            break;
        };
        if out.diagnostics.len() > errors_before {
            match (doc.kind.as_deref(), &doc.name) {
                (Some("Slice"), _) => {}
                (Some("Target"), Some(name)) => out.broken_targets.push(name.clone()),
                _ => out.unknown_broken = true,
            }
        }
    }
    out
}

/// Reads document `i` of `docs` into `out` (a document or a diagnostic).
fn parse_document(
    out: &mut ParsedFile,
    path: &Path,
    full_text: &str,
    docs: &mut [ScannedDoc],
    i: usize,
    offset_of: &dyn Fn(usize) -> usize,
) {
    let next_first_line = docs.get(i + 1).map(|next| next.first_line);
    let Some(doc) = docs.get_mut(i) else {
        return;
    };
    let Some((root_line, root_col, root_kind)) = doc.root else {
        return;
    };
    {
        let doc_start = Location {
            file: path.to_path_buf(),
            line: root_line,
            column: root_col,
        };
        match root_kind {
            RootKind::Null => return,
            RootKind::Mapping => {}
            RootKind::Scalar | RootKind::Sequence => {
                out.diagnostics.push(Diagnostic {
                    location: doc_start,
                    message:
                        "a spec document must be a mapping with apiVersion, kind, metadata and spec"
                            .into(),
                });
                return;
            }
        }
        let fields = &doc.fields;
        match doc.api_version.as_deref() {
            Some(API_VERSION) => {}
            Some(other) => {
                out.diagnostics.push(Diagnostic {
                    location: fields.value(&["apiVersion"]),
                    message: format!("unsupported apiVersion {other:?}; expected {API_VERSION:?}"),
                });
                return;
            }
            None => {
                let message = if fields.entries.contains_key("apiVersion") {
                    format!("apiVersion must be a string; expected {API_VERSION:?}")
                } else {
                    format!("missing field `apiVersion`; expected `apiVersion: {API_VERSION}`")
                };
                out.diagnostics.push(Diagnostic {
                    location: fields.value(&["apiVersion"]),
                    message,
                });
                return;
            }
        }
        let kind = match doc.kind.as_deref() {
            Some(k @ ("Target" | "Slice")) => k,
            other => {
                let message = match other {
                    Some(k) => format!("unknown kind {k:?}; expected one of: {}", KINDS.join(", ")),
                    None if fields.entries.contains_key("kind") => {
                        format!(
                            "kind must be a string; expected one of: {}",
                            KINDS.join(", ")
                        )
                    }
                    None => format!(
                        "missing field `kind`; expected one of: {}",
                        KINDS.join(", ")
                    ),
                };
                out.diagnostics.push(Diagnostic {
                    location: fields.value(&["kind"]),
                    message,
                });
                return;
            }
        };
        let begin = offset_of(doc.first_line);
        let end = match (doc.end_line, next_first_line) {
            (Some(end), Some(next)) => offset_of(end.min(next)),
            (Some(end), None) => offset_of(end),
            (None, Some(next)) => offset_of(next),
            (None, None) => full_text.len(),
        };
        let text = full_text.get(begin..end.max(begin)).unwrap_or("");
        let line_offset = doc.first_line.saturating_sub(1);
        let parsed = if kind == "Target" {
            deserialize_envelope::<TargetSpec>(path, text, line_offset, doc_start.clone(), fields)
                .map(|e| (e.metadata, DocumentSpec::Target(e.spec)))
        } else {
            deserialize_envelope::<SliceSpec>(path, text, line_offset, doc_start.clone(), fields)
                .map(|e| (e.metadata, DocumentSpec::Slice(e.spec)))
        };
        match parsed {
            Ok((metadata, spec)) => out.documents.push(Document {
                metadata,
                spec,
                location: doc_start,
                // Moved out: the scan's index is not read again.
                fields: std::mem::replace(&mut doc.fields, FieldIndex::new(Path::new(""), (0, 0))),
            }),
            Err(diag) => out.diagnostics.push(diag),
        }
    }
}

#[cfg(test)]
#[path = "parse/tests.rs"]
mod tests;
