#![cfg(test)]
use super::*;

const TARGET: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: t}
spec: {project: unit-project, zone: us-central1-b, ownerId: unit, gke: {location: us-central1, name: c}}
";

fn slice(name: &str, topology: &str) -> String {
    format!(
        "apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {{name: {name}}}
spec: {{target: t, backend: gke, accelerator: tpu-v6e-slice, topology: {topology}, replicas: 1}}
"
    )
}

fn files(list: &[(&str, &str)]) -> Vec<SourceFile> {
    list.iter()
        .map(|(p, t)| SourceFile {
            path: PathBuf::from(p),
            text: (*t).to_string(),
        })
        .collect()
}

fn topology(r: &Resolved, slice: &str) -> Option<String> {
    r.fleet.slices.get(slice).map(|s| s.spec.topology.clone())
}

const BROKEN: &str = "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {name: a}\nspec: {target: t, backend: gke, accelerator: tpu-v6e-slice, topology: 9x9, replicas: 1}\n";

#[test]
fn a_broken_file_is_replaced_by_its_last_good_text_until_fixed() {
    let mut lg = LastGood::new();
    let a1 = slice("a", "2x2");
    let b = slice("b", "1x1");
    let r = lg
        .resolve(&files(&[
            ("t.yaml", TARGET),
            ("a.yaml", &a1),
            ("b.yaml", &b),
        ]))
        .unwrap();
    assert!(r.clean());
    assert_eq!(topology(&r, "a").as_deref(), Some("2x2"));

    // a.yaml breaks while b.yaml changes validly: a's last good version
    // stays in force, b's change goes ahead, a's error is located.
    let b2 = slice("b", "2x2");
    for _ in 0..2 {
        let r = lg
            .resolve(&files(&[
                ("t.yaml", TARGET),
                ("a.yaml", BROKEN),
                ("b.yaml", &b2),
            ]))
            .unwrap();
        assert_eq!(topology(&r, "a").as_deref(), Some("2x2"), "held");
        assert_eq!(topology(&r, "b").as_deref(), Some("2x2"), "b moved on");
        assert_eq!(r.held, vec![PathBuf::from("a.yaml")]);
        assert!(r.left_out.is_empty());
        assert!(!r.diagnostics.is_empty());
        assert!(
            r.diagnostics
                .iter()
                .all(|d| d.location.file == Path::new("a.yaml") && d.location.line == 4),
            "{:?}",
            r.diagnostics
        );
        assert!(r.diagnostics[0].to_string().starts_with("a.yaml:4:"));
    }
    assert_eq!(lg.get(Path::new("a.yaml")), Some(a1.as_str()));
    assert_eq!(lg.get(Path::new("b.yaml")), Some(b2.as_str()));

    // Fixed: the new text is in force and becomes the last good one.
    let a3 = slice("a", "2x4");
    let r = lg
        .resolve(&files(&[
            ("t.yaml", TARGET),
            ("a.yaml", &a3),
            ("b.yaml", &b2),
        ]))
        .unwrap();
    assert!(r.clean());
    assert_eq!(topology(&r, "a").as_deref(), Some("2x4"));
    assert_eq!(lg.get(Path::new("a.yaml")), Some(a3.as_str()));
}

#[test]
fn a_file_that_never_was_good_contributes_nothing_and_is_left_out() {
    let mut lg = LastGood::new();
    let b = slice("b", "1x1");
    let r = lg
        .resolve(&files(&[
            ("t.yaml", TARGET),
            ("a.yaml", BROKEN),
            ("b.yaml", &b),
        ]))
        .unwrap();
    assert!(!r.fleet.slices.contains_key("a"));
    assert!(r.fleet.slices.contains_key("b"));
    assert_eq!(r.left_out, vec![PathBuf::from("a.yaml")]);
    assert!(r.held.is_empty());
    assert_eq!(lg.get(Path::new("a.yaml")), None);
}

#[test]
fn a_deleted_file_is_a_deletion_and_forgotten() {
    let mut lg = LastGood::new();
    let a = slice("a", "2x2");
    lg.resolve(&files(&[("t.yaml", TARGET), ("a.yaml", &a)]))
        .unwrap();
    let r = lg.resolve(&files(&[("t.yaml", TARGET)])).unwrap();
    assert!(r.clean());
    assert!(r.fleet.slices.is_empty(), "its slices are pruned");
    assert_eq!(lg.get(Path::new("a.yaml")), None);
    // Back, broken: it never was good since its deletion.
    let r = lg
        .resolve(&files(&[("t.yaml", TARGET), ("a.yaml", BROKEN)]))
        .unwrap();
    assert_eq!(r.left_out, vec![PathBuf::from("a.yaml")]);
}

#[test]
fn a_valid_file_that_conflicts_with_a_held_version_is_held_too() {
    let mut lg = LastGood::new();
    let a = slice("a", "2x2");
    let c = slice("c", "1x1");
    lg.resolve(&files(&[
        ("t.yaml", TARGET),
        ("a.yaml", &a),
        ("c.yaml", &c),
    ]))
    .unwrap();
    // a.yaml breaks, and c.yaml now defines `a` too (the slice moved,
    // but its old file is broken, so its old definition stays): c.yaml
    // is held at its last good version rather than define `a` twice.
    let moved = format!("{}---\n{}", slice("a", "2x4"), slice("c", "1x1"));
    let r = lg
        .resolve(&files(&[
            ("t.yaml", TARGET),
            ("a.yaml", BROKEN),
            ("c.yaml", &moved),
        ]))
        .unwrap();
    assert_eq!(topology(&r, "a").as_deref(), Some("2x2"));
    assert_eq!(
        r.held,
        vec![PathBuf::from("a.yaml"), PathBuf::from("c.yaml")]
    );
    assert!(
        r.diagnostics
            .iter()
            .any(|d| d.location.file == Path::new("c.yaml")),
        "{:?}",
        r.diagnostics
    );
    assert_eq!(lg.get(Path::new("c.yaml")), Some(c.as_str()));
}

#[test]
fn a_broken_target_file_holds_its_targets_for_the_slices_that_use_them() {
    let mut lg = LastGood::new();
    let a = slice("a", "2x2");
    lg.resolve(&files(&[("t.yaml", TARGET), ("a.yaml", &a)]))
        .unwrap();
    let r = lg
        .resolve(&files(&[
            ("t.yaml", "kind: Target\nmetadata: {name: t"),
            ("a.yaml", &a),
        ]))
        .unwrap();
    assert_eq!(r.held, vec![PathBuf::from("t.yaml")]);
    assert!(r.fleet.targets.contains_key("t"));
    assert_eq!(topology(&r, "a").as_deref(), Some("2x2"));
}

#[test]
fn nothing_resolvable_is_an_error() {
    let mut lg = LastGood::new();
    // Only a file that never was good: an empty fleet, with it left out
    // (so nothing may be pruned).
    let r = lg.resolve(&files(&[("a.yaml", BROKEN)])).unwrap();
    assert_eq!(r.fleet.files, 0);
    assert_eq!(r.left_out, vec![PathBuf::from("a.yaml")]);
    // A held slice whose Target's file was deleted.
    let a = slice("a", "2x2");
    lg.resolve(&files(&[("t.yaml", TARGET), ("a.yaml", &a)]))
        .unwrap();
    let e = lg.resolve(&files(&[("a.yaml", BROKEN)])).unwrap_err();
    assert!(!e.diagnostics.is_empty());
}

/// The very same files resolve to the fleet they loaded to last time,
/// without parsing them again; any change (a text, a file gone, a file
/// added, a broken file) loads them afresh.
#[test]
fn the_same_files_reuse_their_fleet_and_any_change_loads_afresh() {
    let mut lg = LastGood::new();
    let (a, b) = (slice("a", "2x2"), slice("b", "1x1"));
    let set = files(&[("t.yaml", TARGET), ("a.yaml", &a), ("b.yaml", &b)]);
    let first = lg.resolve(&set).unwrap();
    assert!(lg.clean.is_some(), "a clean load is kept");
    // Marked, to tell the kept fleet from a fresh parse.
    if let Some(f) = lg.clean.as_mut() {
        f.files = 99;
    }
    let again = lg.resolve(&set).unwrap();
    assert_eq!(again.fleet.files, 99, "reused, not parsed again");
    assert!(again.clean() && again.files == set);
    assert_eq!(again.fleet.slices, first.fleet.slices);

    // A text changed: parsed again.
    let b2 = slice("b", "2x2");
    let r = lg
        .resolve(&files(&[
            ("t.yaml", TARGET),
            ("a.yaml", &a),
            ("b.yaml", &b2),
        ]))
        .unwrap();
    assert_eq!(r.fleet.files, 3);
    assert_eq!(topology(&r, "b").as_deref(), Some("2x2"));
    // A file gone: its slice is pruned, not reused.
    let r = lg
        .resolve(&files(&[("t.yaml", TARGET), ("a.yaml", &a)]))
        .unwrap();
    assert!(!r.fleet.slices.contains_key("b"));
    // A file added.
    let r = lg
        .resolve(&files(&[
            ("t.yaml", TARGET),
            ("a.yaml", &a),
            ("b.yaml", &b),
        ]))
        .unwrap();
    assert_eq!(topology(&r, "b").as_deref(), Some("1x1"));
    // A broken file: held at its last good text, and nothing kept to reuse
    // (the next resolve reports its diagnostics again).
    let broken = files(&[("t.yaml", TARGET), ("a.yaml", BROKEN), ("b.yaml", &b)]);
    let r = lg.resolve(&broken).unwrap();
    assert!(!r.clean());
    assert!(lg.clean.is_none());
    let r = lg.resolve(&broken).unwrap();
    assert!(!r.diagnostics.is_empty(), "reported until fixed");
}
