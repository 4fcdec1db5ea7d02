//! A spec directory: every `*.yaml` / `*.yml` file under it, recursively.
//!
//! Works with a git checkout and with a mounted ConfigMap, whose layout is
//!
//! ```text
//! dir/
//!   ..2026_01_01_00_00_00.123/   real files (hidden)
//!   ..data -> ..2026_01_01_00_00_00.123
//!   slices.yaml -> ..data/slices.yaml
//! ```
//!
//! Entries whose name starts with `.` are skipped (hidden files, `.git`, and
//! the ConfigMap's `..data` / `..<timestamp>` internals, so each ConfigMap key
//! is read once, through its symlink), except symlinks to files (a ConfigMap
//! key may itself start with `.`). Symlinks are followed, and a directory
//! reached twice (a symlink loop) is read once.

use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::SourceError;
use crate::spec::{MAX_FILE_BYTES, SourceFile};

/// Reads every `*.yaml` / `*.yml` file under `dir` (recursively, sorted by
/// path, hidden entries skipped, symlinks followed). Paths are shown relative
/// to the current directory when possible. An empty directory gives an empty
/// list.
pub fn read_dir(dir: &Path) -> Result<Vec<SourceFile>, SourceError> {
    let meta = fs::metadata(dir).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            SourceError::Missing {
                path: dir.to_path_buf(),
            }
        } else {
            SourceError::Unreadable {
                path: dir.to_path_buf(),
                source,
            }
        }
    })?;
    if !meta.is_dir() {
        return Err(SourceError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    let mut paths = Vec::new();
    let mut visited = BTreeSet::new();
    walk(dir, &mut paths, &mut visited)?;
    paths.sort();
    let cwd = std::env::current_dir().ok();
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        let text = read_text(&path)?;
        let shown = display_path(&path, cwd.as_deref());
        tracing::trace!(path = %shown.display(), bytes = text.len(), "read spec file");
        files.push(SourceFile { path: shown, text });
    }
    tracing::debug!(dir = %dir.display(), files = files.len(), "read spec directory");
    Ok(files)
}

fn is_spec_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

fn walk(
    dir: &Path,
    out: &mut Vec<PathBuf>,
    visited: &mut BTreeSet<PathBuf>,
) -> Result<(), SourceError> {
    let unreadable = |source| SourceError::Unreadable {
        path: dir.to_path_buf(),
        source,
    };
    let canonical = fs::canonicalize(dir).map_err(unreadable)?;
    if !visited.insert(canonical) {
        return Ok(());
    }
    let entries = fs::read_dir(dir).map_err(unreadable)?;
    for entry in entries {
        let entry = entry.map_err(unreadable)?;
        let name = entry.file_name();
        let path = entry.path();
        if name.to_string_lossy().starts_with('.') && !is_symlink_to_file(&path) {
            continue;
        }
        // Follows symlinks; a dangling symlink is an unreadable entry.
        let meta = fs::metadata(&path).map_err(|source| SourceError::Unreadable {
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() {
            walk(&path, out, visited)?;
        } else if meta.is_file() && is_spec_file(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// Whether `path` is a symlink to a regular file: a ConfigMap key whose name
/// starts with `.` is such a symlink (its `..data` internals are not).
fn is_symlink_to_file(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
        && fs::metadata(path).is_ok_and(|m| m.is_file())
}

fn read_text(path: &Path) -> Result<String, SourceError> {
    let unreadable = |source| SourceError::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let file = fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_FILE_BYTES).unwrap_or(u64::MAX);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(SourceError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_FILE_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|e| SourceError::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// `path` relative to `cwd` when it lies under it.
fn display_path(path: &Path, cwd: Option<&Path>) -> PathBuf {
    if path.is_absolute()
        && let Some(cwd) = cwd
        && let Ok(rel) = path.strip_prefix(cwd)
    {
        return rel.to_path_buf();
    }
    path.strip_prefix("./").unwrap_or(path).to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn reads_yaml_recursively_sorted_skipping_hidden_and_others() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(&root.join("b.yaml"), "b");
        write(&root.join("a.yml"), "a");
        write(&root.join("teams/llm/c.yaml"), "c");
        write(&root.join("README.md"), "not a spec");
        write(&root.join(".hidden.yaml"), "hidden");
        write(&root.join(".git/config.yaml"), "hidden dir");
        let files = read_dir(root).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| f.path.strip_prefix(root).unwrap().to_path_buf())
            .collect();
        assert_eq!(
            names,
            vec![
                PathBuf::from("a.yml"),
                PathBuf::from("b.yaml"),
                PathBuf::from("teams/llm/c.yaml")
            ]
        );
        assert_eq!(files[2].text, "c");
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
}
