//! Stamps the git commit the binary is built from into `slicectl --version`
//! (`SLICECTL_BUILD_COMMIT`, `SLICECTL_BUILD_COMMIT_DATE`), as ripgrep's
//! build script does: `git rev-parse` when the source is a git checkout and
//! git is installed. A build from a tarball (no `.git`, or no git) still
//! works: the packager may set `SLICECTL_BUILD_COMMIT` (and
//! `SLICECTL_BUILD_COMMIT_DATE`) in the environment, else the commit reads
//! `unknown`. No crate: vergen and its kin would add a dependency tree (or a
//! second gix) to learn two strings.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=SLICECTL_BUILD_COMMIT");
    println!("cargo:rerun-if-env-changed=SLICECTL_BUILD_COMMIT_DATE");
    let from_env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    // Only this package's own repository: never a git repository that
    // merely encloses an unpacked tarball.
    let ours = git(&["-C", &manifest, "rev-parse", "--show-toplevel"])
        .is_some_and(|top| Path::new(&top) == Path::new(&manifest));
    let (commit, date) = if ours {
        // Rebuild when HEAD moves: HEAD itself, the branch's ref, packed refs.
        for p in ["HEAD", "packed-refs"] {
            if let Some(f) = git(&["-C", &manifest, "rev-parse", "--git-path", p]) {
                println!(
                    "cargo:rerun-if-changed={}",
                    PathBuf::from(&manifest).join(f).display()
                );
            }
        }
        if let Some(r) = git(&["-C", &manifest, "symbolic-ref", "-q", "HEAD"])
            && let Some(f) = git(&["-C", &manifest, "rev-parse", "--git-path", &r])
        {
            println!(
                "cargo:rerun-if-changed={}",
                PathBuf::from(&manifest).join(f).display()
            );
        }
        (
            git(&["-C", &manifest, "rev-parse", "--short=12", "HEAD"]),
            git(&["-C", &manifest, "log", "-1", "--format=%cs", "HEAD"]),
        )
    } else {
        (None, None)
    };
    let commit = from_env("SLICECTL_BUILD_COMMIT")
        .or(commit)
        .unwrap_or_else(|| "unknown".into());
    let date = from_env("SLICECTL_BUILD_COMMIT_DATE").or(date);
    let version = match date {
        Some(d) => format!("commit {commit}, {d}"),
        None => format!("commit {commit}"),
    };
    println!("cargo:rustc-env=SLICECTL_BUILD_VERSION={version}");
}
