//! `scripts/image.sh`, the image recipe users and CI run, on the slicectl
//! binary under test.

use std::path::Path;
use std::process::Command;

/// Build the image `localhost/slicectl:TAG` into the archive `out`; its
/// manifest digest (`sha256:…`).
pub fn build(tag: &str, out: &Path) -> String {
    let o = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/image.sh"))
        .args([
            "--binary",
            env!("CARGO_BIN_EXE_slicectl"),
            "--tag",
            tag,
            "--out",
        ])
        .arg(out)
        .output()
        .expect("scripts/image.sh runs");
    assert!(
        o.status.success(),
        "scripts/image.sh failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .expect("the digest on stdout")
        .to_string()
}
