#![cfg(test)]
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
