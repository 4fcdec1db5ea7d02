//! Where spec files come from. I/O lives here; parsing and validation are
//! [`crate::spec`]'s job.
//!
//! [`dir`] reads a directory (a git checkout or a mounted ConfigMap);
//! [`entries`] is the one rule for which entries of any source are specs.

pub mod bounded;
pub mod dir;
pub mod entries;
pub mod last_good;

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
    /// A file is larger than [`spec::MAX_FILE_BYTES`].
    #[error("{} is larger than {limit} bytes (4 MiB); split it into several files", ShownPath(.path))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: usize,
    },
}

/// Why [`read_regular_file`] read nothing.
#[derive(Debug, Error)]
pub enum BoundedReadError {
    /// Opening, inspecting or reading it failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It is not a regular file (a FIFO, a device, a directory...).
    #[error("it is not a regular file")]
    NotRegular,
    /// It holds more than the limit.
    #[error("it is larger than {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

/// Reads `path` as a regular file of at most `limit` bytes: it is opened
/// without blocking (a FIFO would block a plain open), checked to be a
/// regular file on the open descriptor (no race with a rename), and at most
/// `limit + 1` bytes are read (so `/dev/zero` or a file growing meanwhile
/// cannot exhaust memory).
pub fn read_regular_file(path: &Path, limit: usize) -> Result<Vec<u8>, BoundedReadError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(BoundedReadError::NotRegular);
    }
    let mut bytes = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, cap), &mut bytes)?;
    if bytes.len() > limit {
        return Err(BoundedReadError::TooLarge { limit });
    }
    Ok(bytes)
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
