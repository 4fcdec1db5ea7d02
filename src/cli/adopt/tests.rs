use super::*;

/// Issue 35, case 9: adopted files written outside the spec directory are
/// refused (an apply of the directory would prune what was adopted).
#[test]
fn out_must_lie_in_the_spec_directory() {
    let root = tempfile::tempdir().unwrap();
    let specs = root.path().join("specs");
    std::fs::create_dir_all(specs.join("existing")).unwrap();
    assert!(out_within(&specs.join("adopted"), &specs));
    assert!(out_within(&specs.join("existing"), &specs));
    assert!(out_within(&specs.join("a/b/c"), &specs));
    assert!(out_within(&specs, &specs));
    assert!(!out_within(&root.path().join("elsewhere"), &specs));
    assert!(!out_within(&root.path().join("specs-adopted"), &specs));
    // A symlink into the directory counts as inside; one out of it does not.
    std::os::unix::fs::symlink(&specs, root.path().join("link")).unwrap();
    assert!(out_within(&root.path().join("link/adopted"), &specs));
    std::os::unix::fs::symlink(root.path(), specs.join("up")).unwrap();
    assert!(!out_within(&specs.join("up/elsewhere"), &specs));
}
