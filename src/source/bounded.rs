//! Reading a file some untrusted input names (a spec's kubeconfig, a saved
//! plan): only a regular file, only up to a size cap.
//!
//! `std::fs::read` on such a path is a trap: a FIFO blocks `open` for ever,
//! `/dev/zero` or `/dev/urandom` grow without end, a directory or socket
//! gives a confusing error. So the file is opened without blocking
//! (`O_NONBLOCK`: opening a FIFO with no writer returns at once), checked on
//! the open descriptor (no race with a rename between a check and the open)
//! to be a regular file no larger than the cap, and read through a
//! [`std::io::Read::take`] of one byte more than the cap, so a file that grows
//! while it is read is refused too.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use thiserror::Error;

/// Why a bounded read failed. The messages never quote the file's content.
#[derive(Debug, Error)]
pub enum BoundedReadError {
    /// No such file.
    #[error("no such file")]
    NotFound,
    /// Not a regular file.
    #[error(
        "it is {kind}, not a regular file; slicectl reads only regular files (or symlinks to them) here"
    )]
    NotRegular {
        /// What it is instead.
        kind: &'static str,
    },
    /// Over the cap.
    #[error("it is larger than the {limit}-byte limit")]
    TooLarge {
        /// The cap.
        limit: u64,
    },
    /// Any other I/O error (permissions, …): said once (its text, and its
    /// own causes as its source), not once as the message and again as
    /// the source.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What a non-regular file is, in words.
pub(crate) fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// The bytes of the regular file at `path`, at most `limit` of them.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, BoundedReadError> {
    read_regular_with_meta(path, limit).map(|(bytes, _)| bytes)
}

/// [`read_regular`], with the metadata of the descriptor that was read
/// (its size and times are the file's as read, not a later rename's).
pub fn read_regular_with_meta(
    path: &Path,
    limit: u64,
) -> Result<(Vec<u8>, std::fs::Metadata), BoundedReadError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BoundedReadError::NotFound,
            _ => BoundedReadError::Io(e),
        })?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(BoundedReadError::NotRegular {
            kind: kind_of(meta.file_type()),
        });
    }
    if meta.len() > limit {
        return Err(BoundedReadError::TooLarge { limit });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Err(BoundedReadError::TooLarge { limit });
    }
    Ok((bytes, meta))
}

#[cfg(test)]
#[path = "bounded/tests.rs"]
mod tests;
