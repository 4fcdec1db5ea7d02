//! A spec directory: every `*.yaml` / `*.yml` file under it, recursively.
//!
//! Works with a git checkout and with a mounted ConfigMap, whose layout is
//!
//! ```text
//! dir/
//!   ..2026_01_01_00_00_00.123/   real files (hidden)
//!   ..data -> ..2026_01_01_00_00_00.123
//!   slices.yaml -> ..data/slices.yaml
//! ```
//!
//! Kubernetes updates such a mount by writing a new timestamped directory,
//! swapping `..data` to it atomically, then adding and removing the keys'
//! symlinks and deleting the old directory. Reading the keys' symlinks one by
//! one would resolve `..data` once per file, so a read that spans an update
//! could mix versions (a slice moved from one file to another would be seen
//! twice, or not at all — and then planned as a delete). So a directory that
//! holds a `..data` symlink is read as one version: `..data` is resolved once,
//! the files are listed and read from that timestamped directory (shown as
//! `dir/key`), and `..data` is checked again afterwards; if it moved, the
//! whole directory is read again (at most [`MAX_READ_ATTEMPTS`] times).
//!
//! Which entries are spec files is [`super::entries::classify`]'s rule, the
//! same as for the ConfigMap API; entries it skips with a reason are listed
//! in [`Listing::skipped`]. Symlinks are followed, and a directory reached
//! twice (a symlink loop) is read once.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::SourceError;
use super::bounded::{BoundedReadError, read_regular_with_meta};
use super::entries::{Entry, Listing, Skipped, classify};
use super::stamp::Stamper;
use crate::spec::{MAX_FILE_BYTES, SourceFile};

/// The symlink through which a mounted ConfigMap (Kubernetes' atomic writer)
/// names its current version.
pub const DATA_LINK: &str = "..data";

/// Reads of a directory attempted before giving up because a mounted
/// ConfigMap in it kept changing during the read.
pub const MAX_READ_ATTEMPTS: usize = 5;

/// Reads every spec file under `dir` (recursively, sorted by path, symlinks
/// followed; see [`super::entries`] for which entries are spec files).
/// Paths are shown relative to the current directory when possible. An
/// empty directory gives an empty list. Each mounted ConfigMap under `dir`
/// is read as one consistent version.
pub fn read_dir(dir: &Path) -> Result<Vec<SourceFile>, SourceError> {
    list_dir(dir).map(|l| l.files)
}

/// [`read_dir`], with the entries skipped with a reason (near-misses such
/// as `x.yaml.bak`), which callers report.
pub fn list_dir(dir: &Path) -> Result<Listing, SourceError> {
    read_dir_with(dir, &mut |_| {})
}

/// [`read_dir`], calling `after_file` after each file is read (with the path
/// it is shown as): tests use it to change the directory mid-read.
fn read_dir_with(dir: &Path, after_file: &mut dyn FnMut(&Path)) -> Result<Listing, SourceError> {
    let meta = fs::metadata(dir).map_err(|source| SourceError::opening(dir, source))?;
    if !meta.is_dir() {
        return Err(SourceError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    let cwd = std::env::current_dir().ok();
    let mut changed = dir.to_path_buf();
    for attempt in 1..=MAX_READ_ATTEMPTS {
        match read_once(dir, cwd.as_deref(), after_file) {
            Ok(listing) => {
                tracing::debug!(dir = %dir.display(), files = listing.files.len(), skipped = listing.skipped.len(), attempt, "read spec directory");
                return Ok(listing);
            }
            Err(Attempt::Failed(err)) => return Err(err),
            Err(Attempt::Changed(mount)) => {
                tracing::info!(
                    dir = %mount.display(),
                    attempt,
                    "mounted ConfigMap changed while it was read; reading it again"
                );
                changed = mount;
            }
        }
    }
    Err(SourceError::KeptChanging {
        path: changed,
        attempts: MAX_READ_ATTEMPTS,
    })
}

/// Why one read attempt gave no result.
enum Attempt {
    /// A mounted ConfigMap (this directory) moved to a new version during the
    /// read: the attempt may have mixed versions, read again.
    Changed(PathBuf),
    /// A real error.
    Failed(SourceError),
}

/// A mounted ConfigMap seen during a walk: its directory and the `..data`
/// target its files were read from.
struct Mount {
    dir: PathBuf,
    version: PathBuf,
}

/// A spec file found by the walk.
struct Found {
    /// Where it is read from (inside a ConfigMap's timestamped directory).
    real: PathBuf,
    /// How it is shown (`dir/key`).
    shown: PathBuf,
}

#[derive(Default)]
struct Walk {
    files: Vec<Found>,
    skipped: Vec<Skipped>,
    mounts: Vec<Mount>,
    visited: BTreeSet<PathBuf>,
}

fn read_once(
    dir: &Path,
    cwd: Option<&Path>,
    after_file: &mut dyn FnMut(&Path),
) -> Result<Listing, Attempt> {
    let mut w = Walk::default();
    let result = walk(dir, dir, &mut w).and_then(|()| {
        w.files.sort_by(|a, b| a.shown.cmp(&b.shown));
        let mut files = Vec::with_capacity(w.files.len());
        let mut stamp = Stamper::new();
        for found in &w.files {
            let (text, meta) = read_text(&found.real, &found.shown)?;
            let shown = display_path(&found.shown, cwd);
            tracing::trace!(path = %shown.display(), bytes = text.len(), "read spec file");
            stamp.file(&shown, &text, Some(&meta));
            after_file(&shown);
            files.push(SourceFile { path: shown, text });
        }
        let mut skipped: Vec<Skipped> = std::mem::take(&mut w.skipped)
            .into_iter()
            .map(|s| Skipped {
                path: display_path(&s.path, cwd),
                reason: s.reason,
            })
            .collect();
        skipped.sort();
        Ok(Listing {
            files,
            skipped,
            stamp: stamp.finish(),
        })
    });
    // Checked even after an error: Kubernetes deletes the old version's
    // directory once `..data` has moved, which a read of it sees as missing
    // files.
    for m in &w.mounts {
        if data_link(&m.dir).ok().flatten().as_ref() != Some(&m.version) {
            return Err(Attempt::Changed(m.dir.clone()));
        }
    }
    result.map_err(Attempt::Failed)
}

/// The target of `dir/..data` when it is a symlink (`dir` is a mounted
/// ConfigMap), `None` when there is no such symlink.
fn data_link(dir: &Path) -> Result<Option<PathBuf>, SourceError> {
    let link = dir.join(DATA_LINK);
    let unreadable = |source| SourceError::Unreadable {
        path: link.clone(),
        source,
    };
    match fs::symlink_metadata(&link) {
        Ok(m) if m.file_type().is_symlink() => fs::read_link(&link).map(Some).map_err(unreadable),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(unreadable(e)),
    }
}

/// Collects the spec files under `dir` (shown as under `shown`).
fn walk(dir: &Path, shown: &Path, w: &mut Walk) -> Result<(), SourceError> {
    let canonical = fs::canonicalize(dir).map_err(|source| SourceError::Unreadable {
        path: dir.to_path_buf(),
        source,
    })?;
    if !w.visited.insert(canonical) {
        return Ok(());
    }
    match data_link(dir)? {
        // A mounted ConfigMap: its keys are the files of the version `..data`
        // names now, read from there (not through the keys' symlinks, each of
        // which would resolve `..data` again).
        Some(version) => {
            let data = dir.join(&version);
            tracing::trace!(dir = %dir.display(), version = %version.display(), "mounted ConfigMap");
            w.mounts.push(Mount {
                dir: dir.to_path_buf(),
                version,
            });
            walk_entries(&data, shown, w)
        }
        None => walk_entries(dir, shown, w),
    }
}

/// Collects the spec files among `dir`'s entries (a plain directory, or a
/// mounted ConfigMap's data directory: the same rule for both).
fn walk_entries(dir: &Path, shown: &Path, w: &mut Walk) -> Result<(), SourceError> {
    let unreadable = |source| SourceError::Unreadable {
        path: dir.to_path_buf(),
        source,
    };
    let entries = fs::read_dir(dir).map_err(unreadable)?;
    for entry in entries {
        let entry = entry.map_err(unreadable)?;
        let name = entry.file_name();
        let lossy = name.to_string_lossy();
        let path = entry.path();
        // Follows symlinks; a dangling symlink named as a spec file is an
        // unreadable spec file.
        let meta = fs::metadata(&path);
        match classify(&lossy, meta.as_ref().is_ok_and(fs::Metadata::is_dir)) {
            Entry::Dir => walk(&path, &shown.join(&name), w)?,
            Entry::Spec => {
                let meta = meta.map_err(|source| SourceError::Unreadable {
                    path: shown.join(&name),
                    source,
                })?;
                if !meta.is_file() {
                    // Never opened (opening a FIFO blocks), never skipped (a
                    // spec file that is silently left out could prune its
                    // slices).
                    return Err(SourceError::NotRegularFile {
                        kind: special_kind(&path, &meta),
                        path: shown.join(&name),
                    });
                }
                w.files.push(Found {
                    real: path,
                    shown: shown.join(&name),
                });
            }
            Entry::Skipped(reason) => w.skipped.push(Skipped {
                path: shown.join(&name),
                reason,
            }),
            Entry::Other | Entry::Internal => {}
        }
    }
    Ok(())
}

/// What a non-regular, non-directory entry is ("a FIFO (named pipe)", …),
/// and where it points when it is a symlink.
fn special_kind(path: &Path, meta: &fs::Metadata) -> String {
    let kind = super::bounded::kind_of(meta.file_type());
    match fs::read_link(path) {
        Ok(target) => format!("a symlink to {kind} ({})", crate::spec::ShownPath(&target)),
        Err(_) => kind.to_string(),
    }
}

/// Reads `path`, with the metadata of what was read; errors name `shown`.
fn read_text(path: &Path, shown: &Path) -> Result<(String, fs::Metadata), SourceError> {
    let limit = u64::try_from(MAX_FILE_BYTES).unwrap_or(u64::MAX);
    let (bytes, meta) = read_regular_with_meta(path, limit).map_err(|e| match e {
        BoundedReadError::NotFound => SourceError::Unreadable {
            path: shown.to_path_buf(),
            source: std::io::ErrorKind::NotFound.into(),
        },
        BoundedReadError::Io(source) => SourceError::Unreadable {
            path: shown.to_path_buf(),
            source,
        },
        BoundedReadError::TooLarge { .. } => SourceError::TooLarge {
            path: shown.to_path_buf(),
            limit: MAX_FILE_BYTES,
        },
        // Replaced by a special file since the walk looked at it.
        BoundedReadError::NotRegular { kind } => SourceError::NotRegularFile {
            path: shown.to_path_buf(),
            kind: kind.to_string(),
        },
    })?;
    let text = String::from_utf8(bytes).map_err(|e| SourceError::NotUtf8 {
        path: shown.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })?;
    Ok((text, meta))
}

/// `path` relative to `cwd` when it lies under it.
pub(crate) fn display_path(path: &Path, cwd: Option<&Path>) -> PathBuf {
    if path.is_absolute()
        && let Some(cwd) = cwd
        && let Ok(rel) = path.strip_prefix(cwd)
    {
        return rel.to_path_buf();
    }
    path.strip_prefix("./").unwrap_or(path).to_path_buf()
}

#[cfg(test)]
#[path = "dir/tests.rs"]
mod tests;
