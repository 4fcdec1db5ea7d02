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
mod tests {
    use super::*;

    fn stamp_of(dir: &Path) -> Stamp {
        crate::source::list_dir(dir).unwrap().stamp
    }

    #[test]
    fn content_paths_and_rewrites_with_the_same_bytes_change_the_stamp() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("a.yaml"), "a: 1\n").unwrap();
        let s1 = stamp_of(d);
        assert_eq!(s1, stamp_of(d), "two reads of nothing changed");
        assert_eq!(s1.as_str().len(), 64);

        std::fs::write(d.join("a.yaml"), "a: 2\n").unwrap();
        let s2 = stamp_of(d);
        assert_ne!(s1, s2, "content");

        // The same bytes again, after a truncation to zero: the change
        // time moved (filesystems with coarse times: the inode or size of
        // the intermediate state is not seen, but ctime is at least as
        // fine as mtime, and the sleep outlasts a coarse tick).
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(d.join("a.yaml"), "").unwrap();
        std::fs::write(d.join("a.yaml"), "a: 2\n").unwrap();
        assert_ne!(s2, stamp_of(d), "rewritten with the same bytes");

        let s3 = stamp_of(d);
        std::fs::rename(d.join("a.yaml"), d.join("b.yaml")).unwrap();
        assert_ne!(s3, stamp_of(d), "renamed");
    }

    #[test]
    fn lengths_keep_different_lists_apart() {
        let mut a = Stamper::new();
        a.file(Path::new("ab"), "c", None);
        let mut b = Stamper::new();
        b.file(Path::new("a"), "bc", None);
        assert_ne!(a.finish(), b.finish());
        assert_eq!(Stamp::of_id("0123456789abcdef").short(), "0123456789ab");
    }
}
