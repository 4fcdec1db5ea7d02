#![cfg(test)]
use super::*;

fn parse(text: &str) -> ParsedFile {
    parse_file(&SourceFile {
        path: "f.yaml".into(),
        text: text.into(),
    })
}

fn pos(loc: &Location) -> (usize, usize) {
    (loc.line, loc.column)
}

const SLICE: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata:
  name: s
spec:
  target: t
  backend: gke
  accelerator: tpu-v5p-slice
  topology: 2x2x2
  nodeLabels:
    example.com/team: ml
  taints:
    - key: a
      effect: NoSchedule
";

#[test]
fn field_index_points_at_keys_and_values_across_documents() {
    let text = format!("# leading comment\n---\n{SLICE}---\n\n# second\n{SLICE}");
    let parsed = parse(&text);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    assert_eq!(parsed.documents.len(), 2);
    let first = &parsed.documents[0];
    assert_eq!(pos(&first.location), (3, 1));
    assert_eq!(pos(&first.fields.value(&["spec", "topology"])), (11, 13));
    assert_eq!(pos(&first.fields.key(&["spec", "topology"])), (11, 3));
    assert_eq!(
        pos(&first
            .fields
            .key(&["spec", "nodeLabels", "example.com/team"])),
        (13, 5)
    );
    assert_eq!(
        pos(&first.fields.value(&["spec", "taints", "0", "key"])),
        (15, 12)
    );
    // Unindexed paths fall back to the nearest parent.
    assert_eq!(
        pos(&first.fields.value(&["spec", "capacity", "type"])),
        pos(&first.fields.value(&["spec"]))
    );
    let second = &parsed.documents[1];
    assert_eq!(pos(&second.location), (20, 1));
    assert_eq!(pos(&second.fields.value(&["spec", "topology"])), (28, 13));
}

#[test]
fn an_error_in_one_document_does_not_hide_the_next() {
    let bad = SLICE.replace("topology: 2x2x2", "topology: 2x2x2\n  replicas: many");
    let worse = SLICE.replace("  target: t\n", "  target: t\n  extra: 1\n");
    let text = format!("{bad}---\n{worse}---\n{SLICE}");
    let parsed = parse(&text);
    let lines: Vec<usize> = parsed.diagnostics.iter().map(|d| d.location.line).collect();
    assert_eq!(lines, vec![10, 23], "{:?}", parsed.diagnostics);
    assert!(parsed.diagnostics[0].message.starts_with("spec.replicas: "));
    assert!(
        parsed.diagnostics[1]
            .message
            .starts_with("spec: unknown field `extra`")
    );
    assert_eq!(parsed.documents.len(), 1);
    assert_eq!(parsed.documents[0].location.line, 33);
}

#[test]
fn document_end_markers_directives_and_empty_documents() {
    let text = format!("---\n...\n%YAML 1.2\n---\n{SLICE}...\n---\n# only a comment\n---\n");
    let parsed = parse(&text);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    assert_eq!(parsed.documents.len(), 1);
    assert_eq!(parsed.documents[0].location.line, 5);
    assert!(parse("").documents.is_empty() && parse("").diagnostics.is_empty());
    assert!(parse("# nothing\n").diagnostics.is_empty());
}

#[test]
fn crlf_and_bom_keep_line_numbers() {
    let text = format!("\u{feff}{}", SLICE.replace('\n', "\r\n"))
        .replace("topology: 2x2x2", "topology: [2]");
    let parsed = parse(&text);
    assert_eq!(parsed.diagnostics.len(), 1, "{:?}", parsed.diagnostics);
    assert_eq!(pos(&parsed.diagnostics[0].location), (9, 13));
}

#[test]
fn control_characters_never_reach_messages() {
    let text = SLICE.replace("  target: t\n", "  \"bad\\e[31mkey\": 1\n  target: t\n");
    let parsed = parse(&text);
    assert_eq!(parsed.diagnostics.len(), 1, "{:?}", parsed.diagnostics);
    let message = &parsed.diagnostics[0].message;
    assert!(!message.contains('\u{1b}'), "{message:?}");
    assert!(message.contains("\\u{1b}"), "{message:?}");
}

#[test]
fn deep_block_nesting_is_refused_without_overflow() {
    let mut text = String::from("apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n");
    for depth in 1..1000 {
        text.push_str(&" ".repeat(depth * 2));
        text.push_str("a:\n");
    }
    let parsed = parse(&text);
    assert_eq!(parsed.diagnostics.len(), 1);
    assert!(
        parsed.diagnostics[0].message.contains("nesting"),
        "{:?}",
        parsed.diagnostics
    );
    assert!(parsed.unknown_broken);

    let flow = format!("a: {}{}", "[".repeat(200_000), "]".repeat(200_000));
    let parsed = parse(&flow);
    assert_eq!(parsed.diagnostics.len(), 1, "{:?}", parsed.diagnostics);
}

#[test]
fn alias_replays_are_bounded() {
    // Aliases replaying a mapping into a typed map are expanded; a
    // bomb of them hits the budget instead of eating memory.
    let mut text = String::from(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: t\n  labels: &l0 {a: b}\n",
    );
    text.push_str("spec:\n  project: example-project\n  zone: us-central2-b\n  ownerId: o\n");
    text.push_str("  nodeDefaults:\n    resourceLabels: *l0\n");
    let parsed = parse(&text);
    assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
    match &parsed.documents[0].spec {
        DocumentSpec::Target(t) => assert_eq!(t.node_defaults.resource_labels["a"], "b"),
        other => panic!("{other:?}"),
    }

    let mut bomb = String::from(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: s\n  annotations: {k0: &a0 v}\n",
    );
    bomb.push_str(
        "spec:\n  target: t\n  backend: gke\n  accelerator: tpu7x\n  topology: 2x2x2\n  taints:\n",
    );
    // 2000 aliases, each a one-event replay: over the alias budget.
    for _ in 0..2000 {
        bomb.push_str("    - {key: *a0, effect: NoSchedule}\n");
    }
    let parsed = parse(&bomb);
    assert_eq!(parsed.diagnostics.len(), 1, "{:?}", parsed.diagnostics);
    assert!(parsed.diagnostics[0].location.line >= 1);
}

#[test]
fn broken_documents_are_remembered_for_reference_checks() {
    let target = "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: train\nspec:\n  zone: 5\n";
    let parsed = parse(target);
    assert_eq!(parsed.broken_targets, vec!["train".to_string()]);
    assert!(!parsed.unknown_broken);
    let parsed = parse("kind: Targte\n");
    assert!(parsed.unknown_broken);
    let parsed = parse("a: [\n");
    assert!(parsed.unknown_broken);
    assert_eq!(parsed.diagnostics.len(), 1);
}

#[test]
fn oversized_text_is_refused_at_line_one() {
    let parsed = parse(&"#".repeat(MAX_FILE_BYTES + 1));
    assert_eq!(parsed.diagnostics.len(), 1);
    assert_eq!(pos(&parsed.diagnostics[0].location), (1, 1));
}

/// `x: [a,a,…]`: 2 bytes a node, within the size limit.
fn dense_nodes() -> String {
    let mut text = String::from("x: [");
    text.push_str(&"a,".repeat(2_000_000));
    text.push_str("a]\n");
    assert!(text.len() <= MAX_FILE_BYTES);
    text
}

/// Empty documents, within the size limit.
fn empty_documents() -> String {
    let text = "---\n".repeat(1_000_000);
    assert!(text.len() <= MAX_FILE_BYTES);
    text
}

#[test]
fn a_file_of_too_many_nodes_is_refused_where_the_limit_is_passed() {
    let parsed = parse(&dense_nodes());
    assert_eq!(parsed.diagnostics.len(), 1, "{:?}", parsed.diagnostics);
    let d = &parsed.diagnostics[0];
    // The mapping, the key and the sequence are nodes 1 to 3; item k
    // (1-based) is node 3 + k, at column 5 + 2 (k - 1).
    let k = MAX_FILE_NODES + 1 - 3;
    assert_eq!(pos(&d.location), (1, 5 + 2 * (k - 1)));
    assert!(
        d.message
            .contains(&format!("more than {MAX_FILE_NODES} YAML nodes"))
            && d.message.contains("split it"),
        "{d}"
    );
    assert!(parsed.unknown_broken);
    // A file just under the limit is read.
    let mut ok = String::from("x: [");
    ok.push_str(&"a,".repeat(MAX_FILE_NODES - 4));
    ok.push_str("a]\n");
    let parsed = parse(&ok);
    assert!(
        parsed
            .diagnostics
            .iter()
            .all(|d| !d.message.contains("YAML nodes")),
        "{:?}",
        parsed.diagnostics.first()
    );
}

#[test]
fn a_file_of_too_many_documents_is_refused_where_the_limit_is_passed() {
    let parsed = parse(&empty_documents());
    assert_eq!(parsed.diagnostics.len(), 1, "{:?}", parsed.diagnostics);
    let d = &parsed.diagnostics[0];
    assert_eq!(pos(&d.location), (MAX_FILE_DOCUMENTS + 1, 1));
    assert!(
        d.message
            .contains(&format!("more than {MAX_FILE_DOCUMENTS} YAML documents")),
        "{d}"
    );
    let parsed = parse(&"---\n".repeat(MAX_FILE_DOCUMENTS));
    assert!(
        parsed.diagnostics.is_empty(),
        "{:?}",
        parsed.diagnostics.first()
    );
}

/// A line of /proc/self/status, in bytes.
fn proc_status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"));
    let kib: usize = line
        .trim_start_matches(field)
        .trim_start_matches(':')
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

const PEAK_CHILD: &str = "SLICECTL_TEST_PEAK_CHILD";

/// The peak memory that parsing `which` (a hostile file) adds, divided by
/// the file's size: measured in a child process (this test binary, run
/// for this one test), whose high-water mark is its own.
fn peak_ratio_in_child(which: &str) -> f64 {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "spec::parse::tests::peak_memory_of_refusing_hostile_files_is_a_small_multiple_of_their_size",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PEAK_CHILD, which)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ratio = stdout
        .lines()
        .find_map(|l| l.split_once("peak-ratio=").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no peak-ratio in {stdout}"));
    ratio.trim().parse().unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn peak_memory_of_refusing_hostile_files_is_a_small_multiple_of_their_size() {
    if let Ok(which) = std::env::var(PEAK_CHILD) {
        let text = if which == "nodes" {
            dense_nodes()
        } else {
            empty_documents()
        };
        let before = proc_status_bytes("VmRSS");
        let parsed = parse(&text);
        let peak = proc_status_bytes("VmHWM");
        assert_eq!(
            parsed.diagnostics.len(),
            1,
            "{:?}",
            parsed.diagnostics.first()
        );
        #[allow(clippy::cast_precision_loss)]
        let ratio = peak.saturating_sub(before) as f64 / text.len() as f64;
        println!("peak-ratio={ratio:.3}");
        return;
    }
    for which in ["nodes", "documents"] {
        let ratio = peak_ratio_in_child(which);
        println!("{which}: parse peak / file size = {ratio:.2}");
        // Before these limits: 131 (nodes) and 64 (documents).
        assert!(
            ratio < 8.0,
            "{which}: parsing took {ratio:.2} × the file's size"
        );
    }
}
