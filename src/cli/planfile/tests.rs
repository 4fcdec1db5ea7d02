#![cfg(test)]
//! Unit tests of saved plans (`plan --out FILE`, `apply FILE`).

use super::*;
use crate::plan::{PlanMode, Summary};

fn sample() -> (Plan, Vec<SourceFile>) {
    let plan = Plan {
        observed_fingerprint: "f".into(),
        mode: PlanMode::Apply,
        actions: vec![],
        unmanaged: vec![],
        unjoined: vec![],
        refused: vec![],
        held: vec![],
        released: vec![],
        deferred: vec![],
        unobserved: vec![],
        undiscovered: vec![],
        renames: vec![],
        demand: Default::default(),
        preflight: Default::default(),
        summary: Summary::default(),
    };
    let specs = vec![SourceFile {
        path: "specs/a.yaml".into(),
        text: "kind: Slice\n".into(),
    }];
    (plan, specs)
}

const OPTS: SavedOptions = SavedOptions {
    max_destroy: 3,
    allow_empty_source: false,
    allow_unverified_delete: false,
};

#[test]
fn round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.json");
    let (plan, specs) = sample();
    save(&path, &plan, &specs, OPTS).unwrap();
    let saved = load(&path).unwrap();
    assert_eq!(saved.effect, plan.effect());
    assert_eq!(saved.observed_fingerprint, "f");
    assert_eq!(saved.specs, specs);
    assert_eq!(saved.options, OPTS);
}

/// Issue 20: an adopt or release plan file carries its command, sealed
/// by the digest with the rest.
#[test]
fn a_saved_command_round_trips_and_is_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.json");
    let (plan, specs) = sample();
    let cmd = SavedCommand::Adopt {
        target: "train".into(),
        names: vec!["a-0".into()],
    };
    save_command(&path, &plan, &specs, OPTS, Some(cmd.clone())).unwrap();
    assert_eq!(load(&path).unwrap().command, Some(cmd));
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = dir.path().join("edited.json");
    std::fs::write(&edited, text.replace("\"a-0\"", "\"b-0\"")).unwrap();
    assert!(
        load(&edited)
            .unwrap_err()
            .to_string()
            .contains("was edited")
    );
    // A plain plan says no command, as files saved before it existed.
    save(&path, &plan, &specs, OPTS).unwrap();
    assert_eq!(load(&path).unwrap().command, None);
    assert!(!std::fs::read_to_string(&path).unwrap().contains("command"));
}

#[test]
fn an_edited_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.json");
    let (plan, specs) = sample();
    save(&path, &plan, &specs, OPTS).unwrap();
    for (from, to) in [
        ("\"max_destroy\": 3", "\"max_destroy\": 300"),
        ("kind: Slice", "kind: Target"),
        ("\"mode\": \"apply\"", "\"mode\": \"destroy\""),
    ] {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{text}");
        let edited = dir.path().join("edited.json");
        std::fs::write(&edited, text.replace(from, to)).unwrap();
        let err = load(&edited).unwrap_err().to_string();
        assert!(err.contains("was edited"), "{from}: {err}");
    }
}

#[test]
fn an_old_or_foreign_file_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.json");
    std::fs::write(&path, r#"{"kind":"slicectl-plan","format_version":1}"#).unwrap();
    let err = load(&path).unwrap_err().to_string();
    assert!(err.contains("slicectl plan DIR --out"), "{err}");
    std::fs::write(&path, "not json").unwrap();
    assert!(load(&path).is_err());
}

/// `load`'s error, failing the test if it blocks (a FIFO opened for
/// reading blocks until a writer comes).
fn load_error_within_10s(path: &Path) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(
            load(&path)
                .map(|_| ())
                .map_err(|e| crate::error::chain_anyhow(&e)),
        );
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("load blocked")
        .unwrap_err()
}

#[test]
fn a_plan_file_is_read_only_as_a_bounded_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(u64::try_from(MAX_PLAN_FILE_BYTES).unwrap() + 1)
        .unwrap();
    let err = load_error_within_10s(&big);
    assert!(
        err.contains("big.json")
            && err.contains(&format!("larger than the {MAX_PLAN_FILE_BYTES}-byte limit")),
        "{err}"
    );
    let err = load_error_within_10s(Path::new("/dev/zero"));
    assert!(err.contains("not a regular file"), "{err}");
    let fifo = dir.path().join("fifo.json");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo(1) from coreutils");
    assert!(status.success());
    let err = load_error_within_10s(&fifo);
    assert!(
        err.contains("fifo.json") && err.contains("not a regular file"),
        "{err}"
    );
}
