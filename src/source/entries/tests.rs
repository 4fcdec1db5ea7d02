#![cfg(test)]
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
