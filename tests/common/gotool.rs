//! Small committed Go programs the tests run (`tests/kstatus/`,
//! `testbin/promql/`), each built once per content of its directory into the
//! testbin cache (`SLICECTL_TESTBIN_CACHE`, default `~/.cache/slicectl-testbin`),
//! as the control-plane binaries are.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The program in `dir` (relative to the repository root), built as `name`
/// into `<cache>/<name>-<hash of go.mod, go.sum and the .go files>/<name>`.
/// Panics, saying what is missing, when Go or the Go module proxy is not there.
pub fn build(dir: &str, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<String> = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{dir}: {e}"))
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n == "go.mod" || n == "go.sum" || n.ends_with(".go"))
        .collect();
    files.sort();
    let mut h = Sha256::new();
    for f in &files {
        h.update(f.as_bytes());
        h.update([0]);
        h.update(std::fs::read(src.join(f)).unwrap_or_else(|e| panic!("{dir}/{f}: {e}")));
        h.update([0]);
    }
    let key = &hex::encode(h.finalize())[..16];
    let cache = std::env::var_os("SLICECTL_TESTBIN_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/slicectl-testbin")
        });
    let out = cache.join(format!("{name}-{key}"));
    let bin = out.join(name);
    if bin.is_file() {
        return bin;
    }
    std::fs::create_dir_all(&out).expect("cache dir");
    let tmp = out.join(format!("{name}.tmp.{}", std::process::id()));
    let o = Command::new("go")
        .args(["build", "-trimpath", "-o"])
        .arg(&tmp)
        .arg(".")
        .current_dir(&src)
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod")
        .output()
        .unwrap_or_else(|e| panic!("go is needed to build {dir} ({e})"));
    assert!(
        o.status.success(),
        "building {dir} failed (needs Go and the Go module proxy):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::rename(&tmp, &bin).unwrap_or_else(|e| panic!("install {}: {e}", bin.display()));
    bin
}
