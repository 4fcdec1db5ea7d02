//! Slice specs: the document model, the TPU catalogue, parsing with source
//! locations, and semantic validation. Pure: no I/O (files are read by
//! [`crate::source`]).

pub mod catalog;
pub mod model;
pub mod names;
pub mod parse;
pub mod schema;
pub mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
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
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
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
        write!(f, "{}: {}", self.location, self.message)
    }
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
}

impl Fleet {
    /// The target a slice refers to (validation guarantees it exists).
    pub fn target_of(&self, slice: &Slice) -> Option<&Target> {
        self.targets.get(&slice.spec.target)
    }
}
