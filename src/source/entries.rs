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
mod tests {
    use super::*;

    fn skipped(name: &str) -> String {
        match classify(name, false) {
            Entry::Skipped(reason) => reason,
            other => panic!("{name:?}: expected Skipped, got {other:?}"),
        }
    }

    #[test]
    fn spec_names_in_any_case_and_hidden_ones_are_specs() {
        for name in [
            "a.yaml",
            "b.yml",
            "x.YAML",
            "y.Yml",
            "z.yAmL",
            ".gamma.yaml",
            ".G.YML",
        ] {
            assert_eq!(classify(name, false), Entry::Spec, "{name}");
        }
    }

    #[test]
    fn kubelet_internals_and_vcs_dirs_are_internal() {
        for (name, dir) in [
            ("..data", false),
            ("..data", true),
            ("..2026_01_01_00_00_00.123456789", true),
            ("..data_tmp", false),
            (".git", true),
            (".hg", true),
            (".svn", true),
        ] {
            assert_eq!(classify(name, dir), Entry::Internal, "{name}");
        }
    }

    #[test]
    fn near_misses_are_skipped_with_a_reason() {
        for (name, want) in [
            ("z.yaml.bak", "\".bak\""),
            ("z.yaml~", "\"~\""),
            ("z.yml.orig", "\".orig\""),
            (".z.yaml.swp", "\".swp\""),
            ("s.YAML.off", "\".off\""),
            ("z.yaml ", "whitespace"),
            ("z.yml\t", "whitespace"),
            ("z.json", "JSON"),
            (".#z.yaml", "lock file"),
            ("..z.yaml", "kubelet"),
            ("._z.yaml", "macOS"),
        ] {
            let reason = skipped(name);
            assert!(reason.contains(want), "{name:?}: {want} in {reason}");
        }
    }

    #[test]
    fn other_names_are_neither_read_nor_reported() {
        for name in ["README.md", "kubeconfig", "Makefile", ".gitignore", "yaml"] {
            assert_eq!(classify(name, false), Entry::Other, "{name}");
        }
        assert_eq!(classify(".#notes", false), Entry::Other);
    }

    #[test]
    fn directories_are_walked_unless_hidden() {
        assert_eq!(classify("teams", true), Entry::Dir);
        assert_eq!(classify("x.yaml", true), Entry::Dir);
        assert!(
            matches!(classify(".github", true), Entry::Skipped(r) if r.contains("hidden directory"))
        );
    }

    #[test]
    fn a_skipped_entry_is_shown_escaped() {
        let s = Skipped {
            path: PathBuf::from("specs/a\nx.yaml:9:13: forged\u{1b}[31m.bak"),
            reason: "r".to_string(),
        };
        let shown = s.to_string();
        assert!(
            !shown.contains('\n') && !shown.contains('\u{1b}'),
            "{shown:?}"
        );
        assert!(shown.contains("a\\nx.yaml"), "{shown}");
    }

    /// The same names give the same spec files and the same skipped entries
    /// through the plain directory reader, the mounted-ConfigMap reader and
    /// the ConfigMap API.
    #[cfg(unix)]
    #[test]
    fn every_source_reads_the_same_entries() {
        use std::collections::BTreeMap;
        use std::os::unix::fs::symlink;

        use crate::controller::configmap::Snapshot;

        const NAMES: &[&str] = &[
            "a.yaml",
            ".gamma.yaml",
            "x.YAML",
            "y.Yml",
            "z.yaml.bak",
            "z.yaml~",
            "z.json",
            "README.md",
        ];
        /// (file name, text) of each spec file; (file name, reason) of each
        /// skipped entry.
        type Named = Vec<(String, String)>;
        fn names(listing: &Listing) -> (Named, Named) {
            let name = |p: &std::path::Path| p.file_name().unwrap().to_string_lossy().into_owned();
            (
                listing
                    .files
                    .iter()
                    .map(|f| (name(&f.path), f.text.clone()))
                    .collect(),
                listing
                    .skipped
                    .iter()
                    .map(|s| (name(&s.path), s.reason.clone()))
                    .collect(),
            )
        }

        let plain = tempfile::tempdir().unwrap();
        for n in NAMES {
            std::fs::write(plain.path().join(n), n).unwrap();
        }
        let from_dir = names(&crate::source::list_dir(plain.path()).unwrap());

        let mount = tempfile::tempdir().unwrap();
        let version = mount.path().join("..2026_01_01_00_00_00.1");
        std::fs::create_dir(&version).unwrap();
        for n in NAMES {
            std::fs::write(version.join(n), n).unwrap();
            symlink(format!("..data/{n}"), mount.path().join(n)).unwrap();
        }
        symlink("..2026_01_01_00_00_00.1", mount.path().join("..data")).unwrap();
        let from_mount = names(&crate::source::list_dir(mount.path()).unwrap());

        let api = Snapshot::Data(
            NAMES
                .iter()
                .map(|n| ((*n).to_string(), n.as_bytes().to_vec()))
                .collect::<BTreeMap<_, _>>(),
        );
        let from_api = names(&api.files("specs").unwrap().unwrap());

        let specs: Vec<_> = from_dir.0.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(specs, vec![".gamma.yaml", "a.yaml", "x.YAML", "y.Yml"]);
        let skipped: Vec<_> = from_dir.1.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(skipped, vec!["z.json", "z.yaml.bak", "z.yaml~"]);
        assert_eq!(from_mount, from_dir, "mounted ConfigMap vs plain directory");
        assert_eq!(from_api, from_dir, "ConfigMap API vs plain directory");
    }
}
