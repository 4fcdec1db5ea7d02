#![cfg(test)]
use super::*;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[test]
fn reads_yaml_recursively_sorted_hidden_files_too_but_not_hidden_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write(&root.join("b.yaml"), "b");
    write(&root.join("a.yml"), "a");
    write(&root.join("teams/llm/c.yaml"), "c");
    write(&root.join("README.md"), "not a spec");
    write(&root.join(".hidden.yaml"), "hidden");
    write(&root.join(".git/config.yaml"), "vcs dir");
    write(&root.join(".github/workflows/ci.yml"), "hidden dir");
    write(&root.join("teams/old.yaml.bak"), "backup");
    let listing = list_dir(root).unwrap();
    let rel = |p: &Path| p.strip_prefix(root).unwrap().to_path_buf();
    let names: Vec<_> = listing.files.iter().map(|f| rel(&f.path)).collect();
    assert_eq!(
        names,
        vec![
            PathBuf::from(".hidden.yaml"),
            PathBuf::from("a.yml"),
            PathBuf::from("b.yaml"),
            PathBuf::from("teams/llm/c.yaml")
        ]
    );
    assert_eq!(listing.files[3].text, "c");
    let skipped: Vec<_> = listing.skipped.iter().map(|s| rel(&s.path)).collect();
    assert_eq!(
        skipped,
        vec![
            PathBuf::from(".github"),
            PathBuf::from("teams/old.yaml.bak")
        ]
    );
}

#[cfg(unix)]
#[test]
fn configmap_layout_reads_each_key_once() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let ts = root.join("..2026_01_01_00_00_00.123456789");
    write(&ts.join("targets.yaml"), "t");
    write(&ts.join("slices.yaml"), "s");
    symlink("..2026_01_01_00_00_00.123456789", root.join("..data")).unwrap();
    symlink("..data/targets.yaml", root.join("targets.yaml")).unwrap();
    symlink("..data/slices.yaml", root.join("slices.yaml")).unwrap();
    write(&ts.join(".dot-key.yaml"), "d");
    symlink("..data/.dot-key.yaml", root.join(".dot-key.yaml")).unwrap();
    let files = read_dir(root).unwrap();
    let texts: Vec<_> = files.iter().map(|f| f.text.as_str()).collect();
    assert_eq!(texts, vec!["d", "s", "t"]);
    assert!(files[1].path.ends_with("slices.yaml"));
}

/// A mounted ConfigMap as Kubernetes' atomic writer lays it out: version
/// `n` in `..v<n>`, `..data` naming it, each key a symlink through `..data`.
/// Version `n` has keys `a.yaml` and `b.yaml`, each saying its version; the
/// one Slice is in `a.yaml` for even versions and in `b.yaml` for odd ones
/// (a slice moved between files by an update).
#[cfg(unix)]
mod configmap {
    use std::os::unix::fs::symlink;
    use std::path::Path;

    pub const KEYS: [&str; 2] = ["a.yaml", "b.yaml"];

    fn text(version: usize, key: &str) -> String {
        let slice_in_a = version.is_multiple_of(2);
        let has_slice = (key == "a.yaml") == slice_in_a;
        format!(
            "# version: {version}\n{}",
            if has_slice { "kind: Slice\n" } else { "" }
        )
    }

    fn write_version(root: &Path, version: usize) {
        let dir = root.join(format!("..v{version}"));
        std::fs::create_dir(&dir).unwrap();
        for key in KEYS {
            std::fs::write(dir.join(key), text(version, key)).unwrap();
        }
    }

    fn point_data_at(root: &Path, version: usize) {
        let tmp = root.join("..data_tmp");
        symlink(format!("..v{version}"), &tmp).unwrap();
        std::fs::rename(&tmp, root.join("..data")).unwrap();
    }

    /// A mount showing `version`.
    pub fn create(root: &Path, version: usize) {
        write_version(root, version);
        point_data_at(root, version);
        for key in KEYS {
            symlink(format!("..data/{key}"), root.join(key)).unwrap();
        }
    }

    /// Kubernetes' update from `from` to `from + 1`: write the new
    /// version, swap `..data` atomically, delete the old version.
    pub fn update(root: &Path, from: usize) {
        write_version(root, from + 1);
        point_data_at(root, from + 1);
        std::fs::remove_dir_all(root.join(format!("..v{from}"))).unwrap();
    }

    /// The version `files` show; panics unless they are one whole version
    /// with exactly one definition of the slice.
    pub fn consistent_version(files: &[crate::spec::SourceFile]) -> usize {
        assert_eq!(files.len(), 2, "{files:?}");
        let versions: std::collections::BTreeSet<_> = files
            .iter()
            .map(|f| f.text.lines().next().unwrap().to_string())
            .collect();
        assert_eq!(versions.len(), 1, "a torn read mixes versions: {files:?}");
        let slices = files
            .iter()
            .filter(|f| f.text.contains("kind: Slice"))
            .count();
        assert_eq!(
            slices, 1,
            "a torn read: the slice is defined {slices} times: {files:?}"
        );
        let v: usize = versions
            .first()
            .unwrap()
            .trim_start_matches("# version: ")
            .parse()
            .unwrap();
        for (f, key) in files.iter().zip(KEYS) {
            assert_eq!(f.text, text(v, key));
        }
        v
    }
}

/// An update that lands between the reads of two files (the slice moves
/// from one file to the other) never gives a mix: the read is retried and
/// gives the new version whole.
#[cfg(unix)]
#[test]
fn configmap_updated_mid_read_is_read_as_one_version() {
    for first in [0, 1] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        configmap::create(root, first);
        let mut updated = false;
        let files = read_dir_with(root, &mut |_| {
            if !updated {
                updated = true;
                configmap::update(root, first);
            }
        })
        .unwrap()
        .files;
        assert!(updated);
        assert_eq!(configmap::consistent_version(&files), first + 1);
        assert!(files[0].path.ends_with("a.yaml"), "{:?}", files[0].path);
        assert!(
            !files[0].path.to_string_lossy().contains("..v"),
            "shown as dir/key"
        );
    }
}

#[cfg(unix)]
#[test]
fn configmap_that_keeps_changing_is_an_error_after_bounded_attempts() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    configmap::create(root, 0);
    let mut version = 0;
    let mut files_read = 0;
    let err = read_dir_with(root, &mut |_| {
        files_read += 1;
        configmap::update(root, version);
        version += 1;
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            SourceError::KeptChanging {
                attempts: MAX_READ_ATTEMPTS,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(version, MAX_READ_ATTEMPTS);
    assert!(files_read <= 2 * MAX_READ_ATTEMPTS);
    let msg = err.to_string();
    assert!(msg.contains(&root.display().to_string()), "{msg}");
    assert!(
        msg.contains("kept changing") && msg.contains("try again"),
        "{msg}"
    );
}

/// A writer updating the mount as fast as it can while it is read many
/// times: every read that succeeds is one whole version with exactly one
/// definition of the slice; a read that cannot get one says so.
#[cfg(unix)]
#[test]
fn configmap_updated_concurrently_is_never_read_torn() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    configmap::create(&root, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let updates = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (root, stop, updates) = (root.clone(), stop.clone(), updates.clone());
        std::thread::spawn(move || {
            let mut v = 0;
            while !stop.load(Ordering::Relaxed) {
                configmap::update(&root, v);
                v += 1;
                updates.store(v, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        })
    };
    let (mut seen, mut kept_changing, mut reads) = ([0usize; 2], 0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // Read until the writer has updated the mount many times.
    while (reads < 300 || updates.load(Ordering::Relaxed) < 300)
        && std::time::Instant::now() < deadline
    {
        reads += 1;
        match read_dir(&root) {
            Ok(files) => seen[configmap::consistent_version(&files) % 2] += 1,
            Err(SourceError::KeptChanging { .. }) => kept_changing += 1,
            Err(e) => panic!("{e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let updates = updates.load(Ordering::Relaxed);
    assert!(updates >= 300, "the writer ran: {updates} updates");
    assert!(
        seen[0] > 0 && seen[1] > 0,
        "both versions read: {seen:?} of {reads} reads, {kept_changing} kept changing"
    );
}

#[cfg(unix)]
#[test]
fn configmap_mounted_below_the_directory_is_shown_as_dir_key() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let mount = root.join("team");
    fs::create_dir(&mount).unwrap();
    configmap::create(&mount, 3);
    write(&root.join("other.yaml"), "o");
    let files = read_dir(root).unwrap();
    let names: Vec<_> = files
        .iter()
        .map(|f| f.path.strip_prefix(root).unwrap().to_path_buf())
        .collect();
    assert_eq!(
        names,
        vec![
            PathBuf::from("other.yaml"),
            PathBuf::from("team/a.yaml"),
            PathBuf::from("team/b.yaml")
        ]
    );
    assert_eq!(configmap::consistent_version(&files[1..]), 3);
}

#[cfg(unix)]
#[test]
fn symlink_loop_is_read_once() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write(&root.join("sub/a.yaml"), "a");
    symlink("..", root.join("sub/loop")).unwrap();
    let files = read_dir(root).unwrap();
    assert_eq!(files.len(), 1);
}

/// Runs `read_dir` on another thread so that a regression that opens a
/// FIFO (which blocks) fails the test instead of hanging it.
fn read_dir_within_10s(dir: &Path) -> Result<Vec<SourceFile>, SourceError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(read_dir(&dir));
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("read_dir blocked (did it open a FIFO?)")
}

fn assert_not_regular(dir: &Path, name: &str, kind: &str) {
    let err = read_dir_within_10s(dir).unwrap_err();
    let msg = err.to_string();
    let SourceError::NotRegularFile { path, .. } = &err else {
        panic!("{name}: expected NotRegularFile, got {err:?}");
    };
    assert!(path.ends_with(name), "{msg}");
    assert!(msg.contains(&dir.join(name).display().to_string()), "{msg}");
    for want in [kind, "not a regular file", "remove it", "rename it"] {
        assert!(msg.contains(want), "{want:?} in {msg}");
    }
}

#[cfg(unix)]
#[test]
fn fifo_named_yaml_is_an_error_not_skipped_and_not_opened() {
    let tmp = tempfile::tempdir().unwrap();
    write(&tmp.path().join("a.yaml"), "a");
    let fifo = tmp.path().join("teams/pipe.yaml");
    fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo(1) from coreutils");
    assert!(status.success());
    assert_not_regular(tmp.path(), "teams/pipe.yaml", "a FIFO (named pipe)");
    // A FIFO that is not a spec file by name is none of our business.
    fs::rename(&fifo, tmp.path().join("teams/pipe")).unwrap();
    assert_eq!(read_dir_within_10s(tmp.path()).unwrap().len(), 1);
}

#[cfg(unix)]
#[test]
fn socket_named_yaml_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(tmp.path().join("s.yml")).unwrap();
    assert_not_regular(tmp.path(), "s.yml", "a socket");
}

#[cfg(unix)]
#[test]
fn symlink_to_a_device_named_yaml_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/null", tmp.path().join("x.yaml")).unwrap();
    assert_not_regular(
        tmp.path(),
        "x.yaml",
        "a symlink to a character device (/dev/null)",
    );
}

#[cfg(unix)]
#[test]
fn dangling_symlink_named_yaml_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("nowhere.yaml", tmp.path().join("x.yaml")).unwrap();
    let err = read_dir(tmp.path()).unwrap_err();
    assert!(matches!(err, SourceError::Unreadable { .. }), "{err}");
    assert!(err.to_string().contains("x.yaml"), "{err}");
}

#[test]
fn errors_name_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let err = read_dir(&missing).unwrap_err();
    assert!(matches!(err, SourceError::Missing { .. }));
    assert!(err.to_string().contains("nope"), "{err}");

    let file = tmp.path().join("file.yaml");
    write(&file, "x");
    let err = read_dir(&file).unwrap_err();
    assert!(matches!(err, SourceError::NotADirectory { .. }), "{err}");

    let dir = tmp.path().join("bin");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("bad.yaml"), b"name: \xff\xfe\n").unwrap();
    let err = read_dir(&dir).unwrap_err();
    assert!(
        matches!(err, SourceError::NotUtf8 { offset: 6, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("bad.yaml"), "{err}");
}

#[test]
fn too_large_file_is_refused_without_reading_it_all() {
    let tmp = tempfile::tempdir().unwrap();
    let file = fs::File::create(tmp.path().join("big.yaml")).unwrap();
    file.set_len(u64::try_from(MAX_FILE_BYTES).unwrap() + 10)
        .unwrap();
    let err = read_dir(tmp.path()).unwrap_err();
    assert!(matches!(err, SourceError::TooLarge { .. }), "{err}");
}

#[test]
fn empty_directory_is_empty_not_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(read_dir(tmp.path()).unwrap().is_empty());
    let fleet = super::super::load_dir(tmp.path()).unwrap();
    assert_eq!(fleet.files, 0);
    assert!(fleet.slices.is_empty() && fleet.targets.is_empty());
}

#[test]
fn display_path_is_relative_to_cwd() {
    let cwd = Path::new("/work/repo");
    assert_eq!(
        display_path(Path::new("/work/repo/specs/a.yaml"), Some(cwd)),
        PathBuf::from("specs/a.yaml")
    );
    assert_eq!(
        display_path(Path::new("/elsewhere/a.yaml"), Some(cwd)),
        PathBuf::from("/elsewhere/a.yaml")
    );
    assert_eq!(
        display_path(Path::new("./specs/a.yaml"), Some(cwd)),
        PathBuf::from("specs/a.yaml")
    );
}
