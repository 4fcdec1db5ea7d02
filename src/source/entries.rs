//! Which entries of a spec source are spec files: one rule for a plain
//! directory, a mounted ConfigMap and the ConfigMap API alike (and for any
//! source added later), so that two readers of the same files never see two
//! different fleets.
//!
//! The rule, by entry name:
//!
//! - A file whose name ends in `.yaml` or `.yml`, in any case (`x.YAML`,
//!   `y.Yml`), is a spec file, hidden (`.gamma.yaml`) or not.
//! - Names starting with `..` are the kubelet's own (`..data`,
//!   `..<timestamp>`): never read, never reported (one named like a spec
//!   file, `..x.yaml`, is reported). A ConfigMap key cannot start with `..`
//!   (the API rejects it), so no spec can be named so.
//! - Version-control directories (`.git`, `.hg`, `.svn`, `.bzr`, `.jj`) are
//!   not walked and not reported.
//! - Other hidden directories (`.github`, `.vscode`, …) are not walked, and
//!   are reported: they hold tools' YAML, not specs. A ConfigMap has no
//!   directories, so this cannot make a ConfigMap and a checkout disagree.
//! - Near-misses are not read, and are reported with the reason: a name
//!   that holds `.yaml` / `.yml` but ends otherwise (`x.yaml.bak`, `x.yaml~`,
//!   `x.yaml.orig`, `.x.yaml.swp`), a spec name followed by whitespace,
//!   `*.json`, Emacs lock files (`.#x.yaml`) and macOS metadata (`._x.yaml`).
//! - Any other name (`README.md`, `kubeconfig`) is not a spec and is not
//!   reported.
//!
//! Hidden spec files are read rather than skipped because reading fails
//! safe: a file read by mistake is at worst an invalid file, which refuses
//! the plan with a located error, while a spec skipped by mistake is a
//! fleet without its slices, which plans their deletion.

use std::fmt;
use std::path::PathBuf;

use crate::spec::ShownPath;

/// What an entry of a spec source is, by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A spec file: read.
    Spec,
    /// A directory to walk (plain directories only).
    Dir,
    /// Not read, and said so: why.
    Skipped(String),
    /// Not a spec, and nothing to say (`README.md`).
    Other,
    /// The kubelet's `..data` / `..<timestamp>` entries, and VCS directories.
    Internal,
}

/// Version-control directories: never walked, never reported.
const VCS_DIRS: &[&str] = &[".git", ".hg", ".svn", ".bzr", ".jj"];

/// Whether `name` ends in `.yaml` or `.yml`, in any case.
fn has_spec_extension(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".yaml") || lower.ends_with(".yml")
}

/// Classifies the entry `name` (a file name or a ConfigMap key; `dir`: it is
/// a directory, after following symlinks).
pub fn classify(name: &str, dir: bool) -> Entry {
    if name.starts_with("..") {
        let lower = name.to_ascii_lowercase();
        return if !dir && (lower.contains(".yaml") || lower.contains(".yml")) {
            Entry::Skipped(
                "names starting with '..' belong to the kubelet's ConfigMap mounts (and no ConfigMap key may start so); rename it"
                    .to_string(),
            )
        } else {
            Entry::Internal
        };
    }
    if dir {
        return if VCS_DIRS.contains(&name) {
            Entry::Internal
        } else if name.starts_with('.') {
            Entry::Skipped(
                "a hidden directory: not searched for specs (it holds tools' files, e.g. .github); move spec files out of it"
                    .to_string(),
            )
        } else {
            Entry::Dir
        };
    }
    let lower = name.to_ascii_lowercase();
    if name.starts_with(".#") {
        return skipped_if_yaml(&lower, "an editor's lock file");
    }
    if name.starts_with("._") {
        return skipped_if_yaml(&lower, "macOS metadata (AppleDouble)");
    }
    if has_spec_extension(name) {
        return Entry::Spec;
    }
    let trimmed = name.trim_end();
    if trimmed.len() < name.len() && has_spec_extension(trimmed) {
        return Entry::Skipped(
            "the name ends in whitespace after .yaml/.yml; rename it without the trailing whitespace to have it read"
                .to_string(),
        );
    }
    let yaml = lower.rfind(".yaml").map(|at| (at, 5));
    let yml = lower.rfind(".yml").map(|at| (at, 4));
    if let Some((at, ext)) = yaml.max(yml) {
        let tail: String = name[at + ext..].chars().take(16).collect();
        return Entry::Skipped(format!(
            "the name ends in {tail:?} after .yaml/.yml (a backup, swap or disabled copy?); only names ending in .yaml or .yml are read"
        ));
    }
    if lower.ends_with(".json") {
        return Entry::Skipped(
            "JSON files are not read; spec files are YAML (*.yaml, *.yml)".to_string(),
        );
    }
    Entry::Other
}

fn skipped_if_yaml(lower: &str, what: &str) -> Entry {
    if lower.contains(".yaml") || lower.contains(".yml") {
        Entry::Skipped(format!("{what}, not a spec file"))
    } else {
        Entry::Other
    }
}

/// An entry that was not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Skipped {
    /// The entry as shown to the user.
    pub path: PathBuf,
    /// Why it was not read.
    pub reason: String,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} was not read as a spec file: {}",
            ShownPath(&self.path),
            self.reason
        )
    }
}

/// The spec files of a source, and the entries it skipped with a reason.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    /// The spec files, sorted by path.
    pub files: Vec<crate::spec::SourceFile>,
    /// The entries not read, sorted by path.
    pub skipped: Vec<Skipped>,
    /// What this read saw, to tell it from another read
    /// ([`super::stamp`]); empty for sources that do not stamp.
    pub stamp: super::stamp::Stamp,
}

#[cfg(test)]
#[path = "entries/tests.rs"]
mod tests;
