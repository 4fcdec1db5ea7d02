//! Where spec files come from. I/O lives here; parsing and validation are
//! [`crate::spec`]'s job.
//!
//! [`dir`] reads a directory (a git checkout or a mounted ConfigMap);
//! [`entries`] is the one rule for which entries of any source are specs.

pub mod bounded;
pub mod dir;
pub mod entries;
pub mod git;
pub mod last_good;
pub mod stamp;

use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::spec::{self, Diagnostic, Fleet, ShownPath};

pub use dir::{list_dir, read_dir};
pub use entries::{Listing, Skipped};

/// Why a spec source could not be read.
#[derive(Debug, Error)]
pub enum SourceError {
    /// The directory does not exist.
    #[error("spec directory {} does not exist", ShownPath(.path))]
    Missing {
        /// The directory.
        path: PathBuf,
    },
    /// The path exists but is not a directory.
    #[error("{} is not a directory; expected a directory of *.yaml spec files", ShownPath(.path))]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", ShownPath(.path))]
    Unreadable {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not UTF-8 text.
    #[error("{} is not UTF-8 text (invalid byte at offset {offset}); spec files must be UTF-8", ShownPath(.path))]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// An entry named like a spec file (`*.yaml` / `*.yml`) is not a regular
    /// file or a directory (a FIFO, socket or device, or a symlink to one).
    /// It is not read (opening a FIFO blocks) and not skipped either: a spec
    /// file left out silently could prune its slices.
    #[error(
        "{} is {kind}, not a regular file; spec files must be regular files (or symlinks to them): \
         remove it, replace it with the spec file it stands for, or rename it so that it does not end in .yaml or .yml",
        ShownPath(.path)
    )]
    NotRegularFile {
        /// The entry.
        path: PathBuf,
        /// What it is, e.g. "a FIFO (named pipe)".
        kind: String,
    },
    /// A mounted ConfigMap moved to a new version during every read attempt,
    /// so no consistent version could be read.
    #[error(
        "{} kept changing while it was read ({attempts} attempts: its `..data` link moved to a new version each time); \
         no consistent version of the specs could be read, so nothing was planned from a mix of versions; try again once the ConfigMap update settles",
        ShownPath(.path)
    )]
    KeptChanging {
        /// The mounted ConfigMap's directory.
        path: PathBuf,
        /// Read attempts made.
        attempts: usize,
    },
    /// `--git-ref`: the repository, the revision or DIR in its tree could
    /// not be read; the message says which and what to do.
    #[error("{} {message}", ShownPath(.path))]
    Git {
        /// The spec directory (or the entry of the tree).
        path: PathBuf,
        /// What went wrong, and what to do.
        message: String,
    },
    /// A file is larger than [`spec::MAX_FILE_BYTES`].
    #[error("{} is larger than {limit} bytes (4 MiB); split it into several files", ShownPath(.path))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: usize,
    },
}

impl SourceError {
    /// The spec directory `dir` could not be opened: [`SourceError::Missing`]
    /// when it does not exist, [`SourceError::Unreadable`] otherwise.
    pub(crate) fn opening(dir: &std::path::Path, source: std::io::Error) -> SourceError {
        if source.kind() == std::io::ErrorKind::NotFound {
            SourceError::Missing {
                path: dir.to_path_buf(),
            }
        } else {
            SourceError::Unreadable {
                path: dir.to_path_buf(),
                source,
            }
        }
    }
}

/// Why specs could not be loaded: the source could not be read, or the specs
/// are invalid.
#[derive(Debug)]
pub enum LoadError {
    /// The source could not be read.
    Source(SourceError),
    /// The specs are invalid: every problem, sorted by location.
    Invalid(Vec<Diagnostic>),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Source(err) => write!(f, "{err}"),
            LoadError::Invalid(diagnostics) => {
                write!(f, "{}", spec::report_lines(diagnostics).join("\n"))
            }
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Source(err) => Some(err),
            LoadError::Invalid(_) => None,
        }
    }
}

impl From<SourceError> for LoadError {
    fn from(err: SourceError) -> Self {
        LoadError::Source(err)
    }
}

/// Reads and validates every spec file under `dir`. An empty directory gives
/// an empty fleet with `files == 0` (callers decide whether that may prune).
pub fn load_dir(dir: &Path) -> Result<Fleet, LoadError> {
    let files = read_dir(dir)?;
    spec::load(&files).map_err(LoadError::Invalid)
}
