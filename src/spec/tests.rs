#![cfg(test)]
use super::*;

#[test]
fn a_file_name_cannot_forge_a_line_or_reach_the_terminal() {
    let d = Diagnostic {
        location: Location {
            file: PathBuf::from("specs/a\nx.yaml:9:13: forged\u{1b}[31m\u{202e}.yaml"),
            line: 1,
            column: 2,
        },
        message: "bad \u{7}".to_string(),
    };
    let shown = d.to_string();
    assert_eq!(shown.lines().count(), 1, "{shown:?}");
    assert_eq!(escape_controls("a\u{2028}b\rc"), "a\\u{2028}b\\rc");
    for c in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!shown.contains(c), "{c:?} in {shown:?}");
    }
    assert!(
        shown.starts_with("specs/a\\nx.yaml:9:13: forged\\u{1b}[31m\\u{202e}.yaml:1:2: bad \\u{7}"),
        "{shown}"
    );
    assert_eq!(escape_controls("plain/ü.yaml"), "plain/ü.yaml");
}

fn diag(file: &str, line: usize) -> Diagnostic {
    Diagnostic {
        location: Location {
            file: PathBuf::from(file),
            line,
            column: 1,
        },
        message: "bad".to_string(),
    }
}

#[test]
fn diagnostics_are_capped_per_file_and_in_all() {
    let few: Vec<_> = (1..=3).map(|l| diag("a.yaml", l)).collect();
    assert_eq!(
        report_lines(&few),
        vec!["a.yaml:1:1: bad", "a.yaml:2:1: bad", "a.yaml:3:1: bad"]
    );
    let one_file: Vec<_> = (1..=690_000).map(|l| diag("a.yaml", l)).collect();
    let lines = report_lines(&one_file);
    assert_eq!(lines.len(), MAX_DIAGNOSTICS_PER_FILE + 1);
    assert_eq!(lines[MAX_DIAGNOSTICS_PER_FILE - 1], "a.yaml:50:1: bad");
    assert_eq!(
        lines[MAX_DIAGNOSTICS_PER_FILE],
        "a.yaml: … and 689950 more problem(s) in this file"
    );
    let many_files: Vec<_> = (0..10)
        .flat_map(|f| (1..=60).map(move |l| diag(&format!("f{f}.yaml"), l)))
        .collect();
    let lines = report_lines(&many_files);
    assert_eq!(lines.len(), MAX_DIAGNOSTICS + 10 + 1, "{lines:#?}");
    assert_eq!(lines[MAX_DIAGNOSTICS - 1], "f3.yaml:50:1: bad");
    assert_eq!(
        lines[MAX_DIAGNOSTICS],
        "f0.yaml: … and 10 more problem(s) in this file"
    );
    assert_eq!(lines.last().unwrap(), "… and 300 more problem(s)");
}

#[test]
fn long_quoted_values_are_shortened() {
    let long = "x".repeat(500);
    let msg = format!("zone {long:?} is not a zone; project {:?} too", "p\"q");
    let short = shorten_quoted(&msg);
    assert!(short.len() < MAX_QUOTED_CHARS + 100, "{short}");
    assert!(
        short.starts_with(&format!(
            "zone \"{}…\" (500 characters) is not a zone",
            "x".repeat(MAX_QUOTED_CHARS)
        )),
        "{short}"
    );
    assert!(short.ends_with("project \"p\\\"q\" too"), "{short}");
    let exact = format!("v {:?}", "y".repeat(MAX_QUOTED_CHARS));
    assert_eq!(shorten_quoted(&exact), exact);
    // An unterminated quote is left as it is.
    let open = format!("v \"{}", "z".repeat(200));
    assert_eq!(shorten_quoted(&open), open);
    // A cut never ends on a backslash that would escape the closing quote.
    let escapes = format!("v {:?}", format!("a{}", "\n".repeat(MAX_QUOTED_CHARS)));
    let cut = shorten_quoted(&escapes);
    assert!(cut.contains("\\n…\" ("), "{cut}");
}
