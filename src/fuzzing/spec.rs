//! Spec files: one file as bytes (`spec`), and the ConfigMap form the API
//! answers (`configmap`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::ConfigMap;

use crate::controller::configmap::{Selected, Snapshot, snapshot};
use crate::spec::parse::DocumentSpec;
use crate::spec::{Diagnostic, SourceFile, parse_file};

/// The lines of `text` as a YAML reader counts them: a line ends at `\r\n`,
/// `\r` or `\n` (YAML 1.2, production `b-break`).
fn yaml_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(['\r', '\n']) {
        lines.push(&rest[..at]);
        let width = if rest[at..].starts_with("\r\n") { 2 } else { 1 };
        rest = &rest[at + width..];
    }
    lines.push(rest);
    lines
}

/// Panics unless `d` names one of `files` and a line and column inside it
/// (column at most one past the line's last character: the end of a line
/// or of the file is a place too).
pub(super) fn assert_located(d: &Diagnostic, files: &[SourceFile]) {
    let loc = &d.location;
    let file = files
        .iter()
        .find(|f| f.path == loc.file)
        .unwrap_or_else(|| panic!("diagnostic names a file that was not read: {d}"));
    let lines = yaml_lines(&file.text);
    assert!(
        (1..=lines.len()).contains(&loc.line),
        "diagnostic line {} is outside the file's {} lines: {d}",
        loc.line,
        lines.len()
    );
    let width = lines[loc.line - 1].chars().count();
    assert!(
        (1..=width + 1).contains(&loc.column),
        "diagnostic column {} is outside line {} ({width} characters): {d}",
        loc.column,
        loc.line
    );
    // Rendering never panics either.
    let _ = d.to_string();
}

/// Loads `files` as one fleet and checks every diagnostic's place.
fn load_checked(files: &[SourceFile]) {
    for f in files {
        let parsed = parse_file(f);
        for d in &parsed.diagnostics {
            assert_located(d, files);
        }
        round_trip(f, &parsed.documents);
    }
    if let Err(diagnostics) = crate::spec::load(files) {
        assert!(
            !diagnostics.is_empty(),
            "a refused fleet says why (no diagnostic)"
        );
        for d in &diagnostics {
            assert_located(d, files);
        }
        let _ = crate::spec::report_lines(&diagnostics);
    }
}

/// The document `metadata` + `spec` written back as YAML.
fn document_yaml(doc: &crate::spec::parse::Document) -> String {
    let spec = match &doc.spec {
        DocumentSpec::Target(t) => serde_json::to_value(t),
        DocumentSpec::Slice(s) => serde_json::to_value(s),
    }
    // A fuzz invariant, not input handling: this panic is the finding the fuzzer reports.
    .expect("a spec serialises to JSON");
    let value = serde_json::json!({
        "apiVersion": crate::spec::model::API_VERSION,
        "kind": doc.spec.kind(),
        "metadata": doc.metadata,
        "spec": spec,
    });
    // A fuzz invariant, not input handling: this panic is the finding the fuzzer reports.
    serde_saphyr::to_string(&value).expect("a spec document serialises to YAML")
}

/// Every well-formed document written back as YAML (as such, and as
/// `slicectl adopt` writes a Slice) reads back as the same document.
fn round_trip(file: &SourceFile, documents: &[crate::spec::parse::Document]) {
    for doc in documents {
        let text = document_yaml(doc);
        let again = reparse(file, text);
        assert_eq!(again.metadata, doc.metadata, "metadata round trip");
        assert_eq!(again.spec, doc.spec, "spec round trip");
        if let DocumentSpec::Slice(s) = &doc.spec {
            let text = crate::plan::adopt::spec_file(&doc.metadata.name, s, &[])
                // A fuzz invariant, not input handling: this panic is the finding the fuzzer reports.
                .expect("adopt writes any Slice");
            let again = reparse(file, text);
            assert_eq!(
                again.spec, doc.spec,
                "a Slice as `slicectl adopt` writes it reads back the same"
            );
        }
    }
}

fn reparse(file: &SourceFile, text: String) -> crate::spec::parse::Document {
    let written = SourceFile {
        path: file.path.clone(),
        text,
    };
    let mut parsed = parse_file(&written);
    assert!(
        parsed.diagnostics.is_empty() && parsed.documents.len() == 1,
        "a document written back does not read back: {:?}\n{}",
        parsed.diagnostics,
        written.text
    );
    parsed.documents.remove(0)
}

/// Target `spec`: the bytes of one spec file (any number of documents).
/// Bytes that are not UTF-8 are refused by every source before parsing;
/// they are read here with replacement characters, to reach the parser.
pub fn spec(data: &[u8]) {
    let file = SourceFile {
        path: PathBuf::from("specs/fuzz.yaml"),
        text: String::from_utf8_lossy(data).into_owned(),
    };
    load_checked(std::slice::from_ref(&file));
}

/// Target `configmap`: a ConfigMap as the Kubernetes API answers it
/// (JSON), read as the controller reads `--configmap` (one) and
/// `--configmap-selector` (a set: here the same data under two names).
pub fn configmap(data: &[u8]) {
    let Ok(cm) = serde_json::from_slice::<ConfigMap>(data) else {
        return;
    };
    // A fuzz invariant, not input handling: this panic is the finding the fuzzer reports.
    let text = serde_json::to_vec(&cm).expect("a ConfigMap serialises");
    // A fuzz invariant, not input handling: this panic is the finding the fuzzer reports.
    let again: ConfigMap = serde_json::from_slice(&text).expect("a ConfigMap reads back");
    assert_eq!(again, cm, "ConfigMap round trip");
    let snap = snapshot(Some(cm));
    if let Some(Ok(listing)) = snap.files("specs") {
        load_checked(&listing.files);
    }
    let Snapshot::Data(data) = snap else {
        return;
    };
    let set = Selected(BTreeMap::from([
        ("team-a".to_string(), data.clone()),
        ("team-b".to_string(), data),
    ]));
    if let Some(Ok(listing)) = set.files() {
        for d in crate::spec::load(&listing.files).err().unwrap_or_default() {
            assert_located(&d, &listing.files);
        }
    }
}
