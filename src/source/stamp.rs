//! A [`Stamp`]: what one read of a spec source saw, so that two reads can be
//! told apart without keeping the files. Watch mode and the controller's
//! `--dir` mode hold destructive steps until the stamp has stayed the same
//! for a settle period ([`crate::cycle::settle`]).
//!
//! For a directory the stamp is a SHA-256 over every spec file read, in
//! order: its path as shown, its bytes, and the size, inode, modification
//! and change times of the descriptor that was read. The content alone
//! catches a half-written file whose bytes differ; the times catch a file
//! rewritten with the same bytes in between two reads (truncated to zero
//! bytes and refilled), and the change time cannot be set back by the
//! writer (`touch -d`, `rsync -t` and `cp -p` set only the modification
//! time). A file added, removed or renamed changes the list of paths.
//!
//! For a committed git tree ([`super::git`]) the stamp is the tree's object
//! id, which names its content exactly.

use std::path::Path;

use sha2::{Digest, Sha256};

/// What a read of a source saw (see the module documentation). Equal
/// stamps mean the same files with the same content (and, for a directory,
/// untouched since).
#[derive(Debug, Clone, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct Stamp(String);

impl Stamp {
    /// A stamp named by an id that already names the content (a git tree).
    pub fn of_id(id: impl Into<String>) -> Stamp {
        Stamp(id.into())
    }

    /// Its text (hex), for logs.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A short form for people (the first 12 characters).
    pub fn short(&self) -> &str {
        self.0.get(..12).unwrap_or(&self.0)
    }
}

/// Builds the stamp of a directory read, one file at a time.
pub struct Stamper(Sha256);

impl Default for Stamper {
    fn default() -> Self {
        Stamper::new()
    }
}

impl Stamper {
    /// An empty stamp.
    pub fn new() -> Stamper {
        Stamper(Sha256::new())
    }

    /// Adds one file: its shown path, its text and, when known, the
    /// metadata of what was read.
    pub fn file(&mut self, shown: &Path, text: &str, meta: Option<&std::fs::Metadata>) {
        let path = shown.as_os_str().as_encoded_bytes();
        // Lengths first, so that no two different lists hash alike.
        self.0.update((path.len() as u64).to_le_bytes());
        self.0.update(path);
        self.0.update((text.len() as u64).to_le_bytes());
        self.0.update(text.as_bytes());
        match meta {
            Some(m) => {
                use std::os::unix::fs::MetadataExt;
                self.0.update([1u8]);
                for n in [
                    m.size(),
                    m.ino(),
                    m.dev(),
                    m.mtime().cast_unsigned(),
                    m.mtime_nsec().cast_unsigned(),
                    m.ctime().cast_unsigned(),
                    m.ctime_nsec().cast_unsigned(),
                ] {
                    self.0.update(n.to_le_bytes());
                }
            }
            None => self.0.update([0u8]),
        }
    }

    /// The stamp.
    pub fn finish(self) -> Stamp {
        Stamp(hex::encode(self.0.finalize()))
    }
}

#[cfg(test)]
#[path = "stamp/tests.rs"]
mod tests;
