#![cfg(test)]
//! The event scan's field index ([`super::parse`]): one path buffer for the
//! whole file, cut back as collections end, so these check that a sibling
//! after a nested mapping or sequence, and a document after another, are
//! indexed at their own paths.

use super::SourceFile;
use super::parse::{Document, parse_file};

/// The documents of `text`, which has no problem.
fn documents(text: &str) -> Vec<Document> {
    let file = SourceFile {
        path: "f.yaml".into(),
        text: text.into(),
    };
    let parsed = parse_file(&file);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    parsed.documents
}

const FIRST: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata:
  name: a
spec:
  taints:
    - key: k0
      effect: NoSchedule
    - key: k1
      value: v1
      effect: NoExecute
  nodeLabels:
    example.com/team: ml
    \"quoted.key\": x
  target: t
  backend: gke
  accelerator: tpu-v5p-slice
  topology: 2x2x2
";

const SECOND: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {name: b}
spec: {target: t, backend: gke, accelerator: tpu-v5p-slice, topology: 2x2x4}
";

#[test]
fn siblings_after_nested_collections_are_indexed_at_their_own_paths() {
    let docs = documents(&format!("{FIRST}---\n{SECOND}"));
    let [a, b] = docs.as_slice() else {
        panic!("two documents expected: {}", docs.len());
    };
    let f = &a.fields;
    assert_eq!(at(&f.key(&["metadata", "name"])), (4, 3));
    assert_eq!(at(&f.value(&["metadata", "name"])), (4, 9));
    assert_eq!(at(&f.value(&["spec", "taints"])), (7, 5));
    assert_eq!(at(&f.value(&["spec", "taints", "0", "key"])), (7, 12));
    assert_eq!(at(&f.key(&["spec", "taints", "0", "effect"])), (8, 7));
    assert_eq!(at(&f.value(&["spec", "taints", "1"])), (9, 7));
    assert_eq!(at(&f.value(&["spec", "taints", "1", "value"])), (10, 14));
    assert_eq!(at(&f.value(&["spec", "taints", "1", "effect"])), (11, 15));
    // After a sequence of mappings and a mapping: the next keys of `spec`.
    assert_eq!(at(&f.key(&["spec", "nodeLabels"])), (12, 3));
    assert_eq!(
        at(&f.value(&["spec", "nodeLabels", "example.com/team"])),
        (13, 23)
    );
    assert_eq!(at(&f.key(&["spec", "nodeLabels", "quoted.key"])), (14, 5));
    assert_eq!(at(&f.value(&["spec", "target"])), (15, 11));
    assert_eq!(at(&f.value(&["spec", "topology"])), (18, 13));
    // The second document (flow style) starts its paths afresh.
    let g = &b.fields;
    assert_eq!(at(&g.value(&["metadata", "name"])), (22, 18));
    assert_eq!(at(&g.value(&["spec", "topology"])), (23, 71));
    assert_eq!(at(&g.key(&["spec", "target"])), (23, 8));
}

#[test]
fn a_path_not_indexed_falls_back_to_its_nearest_parent() {
    let docs = documents(FIRST);
    let f = &docs[0].fields;
    // No third taint: the taints' sequence.
    assert_eq!(at(&f.value(&["spec", "taints", "2", "key"])), (7, 5));
    // No such key under a taint: that taint.
    assert_eq!(at(&f.value(&["spec", "taints", "1", "nope"])), (9, 7));
    // Nothing under `nope` at all: the document start.
    assert_eq!(at(&f.value(&["nope", "deeper"])), (1, 1));
    // A key is looked up whole, never by a prefix of it: the mapping's key.
    assert_eq!(at(&f.key(&["spec", "nodeLabels", "quoted"])), (12, 3));
}

/// Line and column.
fn at(loc: &super::Location) -> (usize, usize) {
    (loc.line, loc.column)
}
