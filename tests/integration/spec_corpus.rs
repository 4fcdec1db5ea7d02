//! The spec corpus: every invalid case yields exactly the diagnostics its
//! files announce (`# expect: LINE:COL message-substring` comment lines, one
//! per expected diagnostic in that file), never a panic; every valid case, the
//! committed `specs/` fleet and every `examples/*` directory load cleanly.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use slicectl::source::{self, LoadError, SourceError};
use slicectl::spec::{self, Diagnostic, SourceFile};

const INVALID: &str = "tests/corpus/invalid";
const VALID: &str = "tests/corpus/valid";

#[derive(Debug)]
struct Expectation {
    file: PathBuf,
    line: usize,
    column: usize,
    substring: String,
}

fn expectations(files: &[SourceFile]) -> Vec<Expectation> {
    let mut out = Vec::new();
    for file in files {
        for line in file.text.lines() {
            let Some(rest) = line.trim_start().strip_prefix("# expect:") else {
                continue;
            };
            let rest = rest.trim();
            let (pos, substring) = rest
                .split_once(' ')
                .unwrap_or_else(|| panic!("{}: bad expect line {line:?}", file.path.display()));
            let (l, c) = pos
                .split_once(':')
                .unwrap_or_else(|| panic!("{}: bad position in {line:?}", file.path.display()));
            out.push(Expectation {
                file: file.path.clone(),
                line: l.parse().expect("line number"),
                column: c.parse().expect("column number"),
                substring: substring.to_string(),
            });
        }
    }
    out
}

fn matches(d: &Diagnostic, e: &Expectation) -> bool {
    d.location.file == e.file
        && d.location.line == e.line
        && d.location.column == e.column
        && d.message.contains(&e.substring)
}

/// A corpus case: one file, or a directory read through `source::read_dir`.
fn case_files(path: &Path) -> Vec<SourceFile> {
    if path.is_dir() {
        source::read_dir(path).expect("read corpus directory")
    } else {
        vec![SourceFile {
            path: path.to_path_buf(),
            text: fs::read_to_string(path).expect("read corpus file"),
        }]
    }
}

fn cases(dir: &str) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = fs::read_dir(dir)
        .expect("corpus directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no cases in {dir}");
    cases
}

#[test]
fn invalid_corpus_reports_exactly_the_expected_diagnostics() {
    let mut failures = Vec::new();
    for case in cases(INVALID) {
        let files = case_files(&case);
        let expected = expectations(&files);
        assert!(
            !expected.is_empty(),
            "{}: no `# expect:` lines",
            case.display()
        );
        let started = Instant::now();
        let diagnostics = match spec::load(&files) {
            Ok(fleet) => {
                failures.push(format!(
                    "{}: loaded without errors ({} slices)",
                    case.display(),
                    fleet.slices.len()
                ));
                continue;
            }
            Err(d) => d,
        };
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{}: took {:?}",
            case.display(),
            started.elapsed()
        );
        let mut sorted = diagnostics.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            diagnostics,
            "{}: diagnostics sorted",
            case.display()
        );
        for e in &expected {
            if !diagnostics.iter().any(|d| matches(d, e)) {
                failures.push(format!(
                    "{}: expected {}:{}:{} containing {:?}; got:\n  {}",
                    case.display(),
                    e.file.display(),
                    e.line,
                    e.column,
                    e.substring,
                    diagnostics
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("\n  ")
                ));
            }
        }
        for d in &diagnostics {
            if !expected.iter().any(|e| matches(d, e)) {
                failures.push(format!("{}: unexpected diagnostic {d}", case.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn huge_file_is_refused_with_a_located_error() {
    let mut text = String::from(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: big\n  annotations:\n",
    );
    let mut i = 0;
    while text.len() <= spec::MAX_FILE_BYTES {
        text.push_str(&format!("    k{i}: \"{}\"\n", "x".repeat(100)));
        i += 1;
    }
    let file = SourceFile {
        path: PathBuf::from("huge.yaml"),
        text,
    };
    let diagnostics = spec::load(&[file]).expect_err("huge file refused");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let d = &diagnostics[0];
    assert_eq!(d.to_string().split(": ").next(), Some("huge.yaml:1:1"));
    assert!(d.message.contains("at most 4194304 bytes"), "{d}");

    // Through a directory, the file is not even read in full.
    let tmp = tempfile::tempdir().expect("tempdir");
    let big = fs::File::create(tmp.path().join("big.yaml")).expect("create");
    big.set_len(64 * 1024 * 1024).expect("sparse file");
    match source::load_dir(tmp.path()) {
        Err(LoadError::Source(SourceError::TooLarge { path, .. })) => {
            assert!(path.ends_with("big.yaml"));
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn random_bytes_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let alphabet = b"ab:- \n\t[]{}&*!|>'\"#%@`,?0123456789\x00\x7f";
    for round in 0..300 {
        let len = rng.random_range(0..400);
        let bytes: Vec<u8> = if round % 2 == 0 {
            (0..len).map(|_| rng.random()).collect()
        } else {
            (0..len)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect()
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let file = SourceFile {
            path: PathBuf::from("fuzz.yaml"),
            text,
        };
        if let Err(diagnostics) = spec::load(&[file]) {
            for d in diagnostics {
                assert_eq!(d.location.file, PathBuf::from("fuzz.yaml"));
                assert!(d.location.line >= 1 && d.location.column >= 1, "{d}");
            }
        }
    }
}

#[test]
fn binary_file_in_a_directory_is_a_source_error_naming_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    fs::write(
        tmp.path().join("blob.yaml"),
        [0x89, b'P', b'N', b'G', 0xff, 0x00],
    )
    .expect("write");
    let err = source::load_dir(tmp.path()).expect_err("binary refused");
    assert!(err.to_string().contains("blob.yaml"), "{err}");
    assert!(err.to_string().contains("not UTF-8"), "{err}");
}

#[test]
fn valid_corpus_loads_cleanly() {
    for case in cases(VALID) {
        let files = case_files(&case);
        if let Err(diagnostics) = spec::load(&files) {
            panic!(
                "{}:\n{}",
                case.display(),
                diagnostics
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}

/// An example's spec directory: its `specs/` when it has one (beside files
/// that are not slicectl specs, such as `examples/jobset/jobsets/`), else
/// the example's directory itself.
fn example_specs(dir: &Path) -> PathBuf {
    let specs = dir.join("specs");
    if specs.is_dir() {
        specs
    } else {
        dir.to_path_buf()
    }
}

fn assert_loads(dir: &Path) -> spec::Fleet {
    match source::load_dir(dir) {
        Ok(fleet) => {
            assert!(fleet.files > 0, "{}: no files", dir.display());
            assert!(!fleet.slices.is_empty(), "{}: no slices", dir.display());
            fleet
        }
        Err(err) => panic!("{}:\n{err}", dir.display()),
    }
}

#[test]
fn committed_specs_load_cleanly() {
    let fleet = assert_loads(Path::new("specs"));
    // One Target per zone (each TPU generation is offered only in some
    // zones), and a self-managed kubeadm cluster.
    assert_eq!(fleet.targets.len(), 5);
    assert!(fleet.slices.len() >= 8, "{:?}", fleet.slices.keys());
    for s in fleet.slices.values() {
        let t = fleet.target_of(s).expect("target");
        assert!(
            s.shape.generation.offered_in(&t.spec.zone) && !t.spec.allow_unlisted_zone,
            "{} in {}",
            s.name,
            t.spec.zone
        );
    }
    let pretrain = &fleet.slices["llm-pretrain-v5p"];
    assert_eq!(pretrain.spec.replicas, 2);
    assert_eq!(pretrain.shape.hosts, 16);
    assert_eq!(pretrain.operation_timeout, Duration::from_secs(90 * 60));
    assert!(pretrain.location.file.starts_with("specs/teams/llm"));
    assert!(fleet.slices["llm-serve-v6e"].spec.lifecycle.prevent_destroy);
    let kubeadm = &fleet.slices["research-kubeadm-v6e"];
    assert_eq!(kubeadm.spec.backend, spec::model::Backend::Gce);
    assert_eq!(kubeadm.shape.hosts, 1);
    let target = fleet.target_of(kubeadm).expect("target");
    assert_eq!(
        target
            .spec
            .gce
            .as_ref()
            .map(|g| g.control_plane_endpoint.as_str()),
        Some("10.128.0.2:6443")
    );
}

#[test]
fn every_example_loads_cleanly() {
    let mut dirs: Vec<PathBuf> = fs::read_dir("examples")
        .expect("examples/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 14, "{dirs:?}");
    let gce = dirs
        .iter()
        .filter(|d| d.to_string_lossy().contains("/gce-"))
        .count();
    assert!(gce >= 7, "a GCE example per feature: {dirs:?}");
    for dir in dirs {
        assert_loads(&example_specs(&dir));
        assert!(
            dir.join("README.md").is_file(),
            "{}: README.md",
            dir.display()
        );
    }
}

/// Every spec file names the committed schema with the right relative path.
#[test]
fn spec_files_point_at_the_schema() {
    let mut dirs = vec![PathBuf::from("specs"), PathBuf::from("deploy/specs")];
    dirs.extend(
        fs::read_dir("examples")
            .expect("examples/")
            .map(|e| example_specs(&e.expect("entry").path())),
    );
    for dir in dirs {
        for file in source::read_dir(&dir).expect("read") {
            let first = file.text.lines().next().unwrap_or_default();
            let schema = first
                .strip_prefix("# yaml-language-server: $schema=")
                .unwrap_or_else(|| panic!("{}: first line {first:?}", file.path.display()));
            let parent = file.path.parent().expect("parent");
            let target = parent.join(schema);
            assert!(
                target.is_file(),
                "{}: {schema} does not resolve ({})",
                file.path.display(),
                target.display()
            );
            assert!(target.ends_with("schemas/slicectl.v1alpha1.schema.json"));
        }
    }
}
