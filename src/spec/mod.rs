//! Slice specs: the document model, the TPU catalogue, parsing with source
//! locations, and semantic validation. Pure: no I/O (files are read by
//! [`crate::source`]).

pub mod catalog;
pub mod disruption;
pub mod model;
pub mod names;
pub mod parse;
#[path = "parse_scan/tests.rs"]
mod parse_scan_tests;
pub mod schema;
pub mod shard;
pub mod validate;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use catalog::SliceShape;
pub use model::{SliceSpec, TargetSpec};
pub use parse::{MAX_FILE_BYTES, parse_file};
pub use schema::json_schema;
pub use validate::load;

/// One spec file's text, as read by a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path as shown to the user (relative to the spec directory's parent when possible).
    pub path: PathBuf,
    /// The file's text.
    pub text: String,
}

/// A place in a spec file (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// File.
    pub file: PathBuf,
    /// Line, 1-based.
    pub line: usize,
    /// Column, 1-based.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", ShownPath(&self.file), self.line, self.column)
    }
}

/// Whether `c` must not reach a terminal or a log line as itself: control
/// characters (a newline would forge a line, ESC a colour), the Unicode
/// line and paragraph separators, and the bidirectional overrides (which
/// reorder what is shown).
fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with its unsafe characters escaped as Rust's `escape_debug` writes
/// them (`\n`, `\u{1b}`), the way spec values are quoted in diagnostics.
/// Everything else is kept as it is.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe_char(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A path (a spec file, a ConfigMap key) as it is shown in diagnostics and
/// reports: [`escape_controls`] applied, so a file name cannot forge a
/// diagnostic line or send escape sequences to a terminal.
#[derive(Debug, Clone, Copy)]
pub struct ShownPath<'a>(pub &'a Path);

impl fmt::Display for ShownPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape_controls(&self.0.to_string_lossy()))
    }
}

/// Longest quoted value (in characters) echoed in a diagnostic; longer ones
/// are cut with an ellipsis. Long enough for any real resource URL or path
/// (a GCE self-link is about 100), short enough that a hostile value
/// cannot flood a terminal or a log.
pub const MAX_QUOTED_CHARS: usize = 160;

/// `message` with every double-quoted run (a value quoted as `{:?}` quotes
/// it, `\"` inside) longer than [`MAX_QUOTED_CHARS`] characters cut, with
/// an ellipsis and its full length.
pub fn shorten_quoted(message: &str) -> Cow<'_, str> {
    if message.len() <= MAX_QUOTED_CHARS {
        return Cow::Borrowed(message);
    }
    let chars: Vec<char> = message.chars().collect();
    let mut out = String::with_capacity(message.len().min(4096));
    let mut changed = false;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '"' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        // Find the closing quote, stepping over escapes.
        let mut j = i + 1;
        while j < chars.len() && chars[j] != '"' {
            j += if chars[j] == '\\' { 2 } else { 1 };
        }
        if j >= chars.len() {
            out.extend(&chars[i..]);
            break;
        }
        let inner = &chars[i + 1..j];
        out.push('"');
        if inner.len() > MAX_QUOTED_CHARS {
            let mut keep = &inner[..MAX_QUOTED_CHARS];
            // Never end on a lone backslash (it would escape the quote).
            while keep.last() == Some(&'\\') {
                keep = &keep[..keep.len() - 1];
            }
            out.extend(keep);
            out.push_str(&format!("…\" ({} characters)", inner.len()));
            changed = true;
        } else {
            out.extend(inner);
            out.push('"');
        }
        i = j + 1;
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(message)
    }
}

/// A problem in the specs: where, and what is expected.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Diagnostic {
    /// Where.
    pub location: Location,
    /// What is wrong and what is expected.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            self.location,
            escape_controls(&shorten_quoted(&self.message))
        )
    }
}

/// Most diagnostics printed for one file.
pub const MAX_DIAGNOSTICS_PER_FILE: usize = 50;

/// Most diagnostics printed in all.
pub const MAX_DIAGNOSTICS: usize = 200;

/// The lines that report `diagnostics`: at most
/// [`MAX_DIAGNOSTICS_PER_FILE`] per file and [`MAX_DIAGNOSTICS`] in all,
/// each cut said with how many more there are (a hostile file can give
/// hundreds of thousands).
pub fn report_lines(diagnostics: &[Diagnostic]) -> Vec<String> {
    let mut per_file: BTreeMap<&Path, usize> = BTreeMap::new();
    let mut lines = Vec::new();
    let mut past_total = 0;
    for d in diagnostics {
        let n = per_file.entry(&d.location.file).or_default();
        *n += 1;
        if *n > MAX_DIAGNOSTICS_PER_FILE {
            continue;
        }
        if lines.len() < MAX_DIAGNOSTICS {
            lines.push(d.to_string());
        } else {
            past_total += 1;
        }
    }
    let mut files_cut = 0;
    for (file, n) in per_file {
        let more = n.saturating_sub(MAX_DIAGNOSTICS_PER_FILE);
        if more == 0 {
            continue;
        }
        files_cut += 1;
        if files_cut <= MAX_DIAGNOSTICS_PER_FILE {
            lines.push(format!(
                "{}: … and {more} more problem(s) in this file",
                ShownPath(file)
            ));
        } else {
            past_total += more;
        }
    }
    if past_total > 0 {
        lines.push(format!("… and {past_total} more problem(s)"));
    }
    lines
}

/// A validated `Target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `metadata.name`.
    pub name: String,
    /// The spec.
    pub spec: TargetSpec,
    /// Where the document starts.
    pub location: Location,
}

/// A validated `Slice`, with its catalogue shape resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    /// `metadata.name`.
    pub name: String,
    /// The spec.
    pub spec: SliceSpec,
    /// Machine type, chips, hosts and placement from the catalogue.
    pub shape: SliceShape,
    /// Timeout for one long-running operation of this slice.
    pub operation_timeout: Duration,
    /// Where the document starts.
    pub location: Location,
    /// The JobSet and Job a workload-driven slice is for (`None`: a slice
    /// from the specs). See [`crate::workload`].
    pub workload: Option<crate::workload::Origin>,
}

/// Default timeout of one long-running operation (TPU node pools are slow).
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The whole validated desired state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fleet {
    /// Targets by name.
    pub targets: BTreeMap<String, Target>,
    /// Slices by name.
    pub slices: BTreeMap<String, Slice>,
    /// Number of spec files read (an empty source is refused before pruning).
    pub files: usize,
    /// Targets another replica plans (a sharded controller's cut of the
    /// fleet): not planned here, but their clusters and zones are not
    /// "left behind" either, so their slices are neither observed nor
    /// pruned by this replica. Empty outside sharding.
    pub foreign: BTreeMap<String, Target>,
    /// A sharded controller's cut: the shards this replica holds and the
    /// other replicas' Slices. The planner leaves their live resources
    /// alone, and those of a Target removed with its Slices unless this
    /// replica is the one that owns them (see `plan::elsewhere`). `None`
    /// outside sharding.
    pub shard: Option<shard::ShardCut>,
}

impl Fleet {
    /// The target a slice refers to (validation guarantees it exists).
    pub fn target_of(&self, slice: &Slice) -> Option<&Target> {
        self.targets.get(&slice.spec.target)
    }

    /// The slice whose live resources carry slice name `name`: the slice of
    /// that name, or the one that declares it in `previousNames` (a
    /// declared rename).
    pub fn claimant(&self, name: &str) -> Option<&Slice> {
        self.slices.get(name).or_else(|| {
            self.slices
                .values()
                .find(|s| s.spec.previous_names.iter().any(|p| p == name))
        })
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
