#![cfg(test)]
use super::*;
use std::time::{Duration, Instant};

#[test]
fn reads_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    std::fs::write(&p, b"hello").unwrap();
    assert_eq!(read_regular(&p, 5).unwrap(), b"hello");
    assert!(matches!(
        read_regular(&p, 4),
        Err(BoundedReadError::TooLarge { limit: 4 })
    ));
    assert!(matches!(
        read_regular(&dir.path().join("missing"), 4),
        Err(BoundedReadError::NotFound)
    ));
}

#[test]
fn refuses_a_fifo_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fifo");
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let start = Instant::now();
    let e = read_regular(&p, 1024).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "blocked on a FIFO"
    );
    assert!(e.to_string().contains("FIFO"), "{e}");
}

#[test]
fn refuses_devices_and_directories() {
    let e = read_regular(Path::new("/dev/zero"), 1024).unwrap_err();
    assert!(e.to_string().contains("character device"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let e = read_regular(dir.path(), 1024).unwrap_err();
    assert!(e.to_string().contains("directory"), "{e}");
}
