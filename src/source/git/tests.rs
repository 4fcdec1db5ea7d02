#![cfg(test)]
use super::*;
use std::process::Command;

/// Runs the `git` CLI in `dir` (the test's own; slicectl never does).
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn repo() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path();
    git(r, &["init", "-q"]);
    write(&r.join("specs/a.yaml"), "a: 1\n");
    write(&r.join("specs/team/b.yml"), "b: 1\n");
    write(&r.join("specs/README.md"), "not a spec\n");
    write(&r.join("specs/old.yaml.bak"), "backup\n");
    write(&r.join("other/c.yaml"), "elsewhere\n");
    git(r, &["add", "."]);
    git(r, &["commit", "-q", "-m", "one"]);
    tmp
}

fn at(dir: &Path, reference: &str) -> GitRef {
    GitRef {
        dir: dir.to_path_buf(),
        reference: reference.to_string(),
    }
}

fn names(l: &Listing, root: &Path) -> Vec<String> {
    l.files
        .iter()
        .map(|f| {
            f.path
                .strip_prefix(root)
                .unwrap_or(&f.path)
                .display()
                .to_string()
        })
        .collect()
}

#[test]
fn reads_the_committed_tree_of_the_directory_not_its_working_files() {
    let tmp = repo();
    let specs = tmp.path().join("specs");
    let rev = read(&at(&specs, "HEAD")).unwrap();
    assert_eq!(names(&rev.listing, &specs), ["a.yaml", "team/b.yml"]);
    assert_eq!(rev.listing.files[0].text, "a: 1\n");
    assert!(rev.listing.files[0].path.ends_with("specs/a.yaml"));
    let skipped: Vec<String> = rev
        .listing
        .skipped
        .iter()
        .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(skipped, ["old.yaml.bak"]);
    assert_eq!(rev.commit.len(), 40);
    assert_eq!(resolve(&at(&specs, "HEAD")).unwrap(), rev.commit);
    assert_eq!(resolve(&at(&specs, "main")).unwrap(), rev.commit);
    assert_eq!(resolve(&at(&specs, &rev.commit)).unwrap(), rev.commit);

    // Working files half written, uncommitted: not read.
    write(&specs.join("a.yaml"), "a: [");
    std::fs::remove_file(specs.join("team/b.yml")).unwrap();
    let again = read(&at(&specs, "HEAD")).unwrap();
    assert_eq!(again.listing, rev.listing, "the same tree, the same stamp");

    // Committed: read, a new stamp; a change elsewhere keeps the stamp.
    git(tmp.path(), &["add", "-A"]);
    git(tmp.path(), &["commit", "-q", "-m", "two"]);
    let two = read(&at(&specs, "HEAD")).unwrap();
    assert_eq!(names(&two.listing, &specs), ["a.yaml"]);
    assert_ne!(two.listing.stamp, rev.listing.stamp);
    write(&tmp.path().join("other/c.yaml"), "changed\n");
    git(tmp.path(), &["commit", "-q", "-am", "three"]);
    let three = read(&at(&specs, "HEAD")).unwrap();
    assert_ne!(three.commit, two.commit);
    assert_eq!(
        three.listing.stamp, two.listing.stamp,
        "DIR's tree is unchanged"
    );
    // An old revision by its id; revision expressions are not taken
    // (a reference or a full commit id only).
    assert_eq!(read(&at(&specs, &rev.commit)).unwrap().listing, rev.listing);
    assert!(read(&at(&specs, "HEAD~1")).is_err());
}

#[test]
fn errors_are_located_and_say_what_to_do() {
    let plain = tempfile::tempdir().unwrap();
    let e = read(&at(plain.path(), "HEAD")).unwrap_err().to_string();
    assert!(e.contains("is not inside a git repository"), "{e}");
    assert!(e.contains("drop --git-ref"), "{e}");

    let tmp = repo();
    let specs = tmp.path().join("specs");
    let e = read(&at(&specs, "nope")).unwrap_err().to_string();
    assert!(e.contains("the revision \"nope\" is not known"), "{e}");
    assert!(e.contains("origin/main"), "{e}");

    std::fs::create_dir(tmp.path().join("new")).unwrap();
    let e = read(&at(&tmp.path().join("new"), "HEAD"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not in commit"), "{e}");
    assert!(e.contains("commit the directory"), "{e}");

    assert!(matches!(
        read(&at(&tmp.path().join("missing"), "HEAD")),
        Err(SourceError::Missing { .. })
    ));

    // A symlink named like a spec file in the commit: an error, not
    // followed.
    std::os::unix::fs::symlink("/etc/hostname", specs.join("link.yaml")).unwrap();
    git(tmp.path(), &["add", "."]);
    git(tmp.path(), &["commit", "-q", "-m", "link"]);
    let e = read(&at(&specs, "HEAD")).unwrap_err();
    assert!(matches!(e, SourceError::NotRegularFile { .. }), "{e}");
    assert!(e.to_string().contains("not followed"), "{e}");
}

/// A repository whose own config asks `git` to run commands (an
/// fsmonitor hook, a smudge filter on every file, a pager, hooks):
/// reading it runs none of them.
#[test]
fn a_repositorys_config_runs_no_command() {
    let tmp = repo();
    let r = tmp.path();
    let marker = r.join("ran");
    let script = r.join("evil.sh");
    write(
        &script,
        &format!("#!/bin/sh\ntouch {}\ncat\n", marker.display()),
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let s = script.display().to_string();
    for (k, v) in [
        ("core.fsmonitor", s.as_str()),
        ("core.pager", s.as_str()),
        ("core.hooksPath", r.to_str().unwrap()),
        ("filter.evil.smudge", s.as_str()),
        ("filter.evil.clean", s.as_str()),
        ("filter.evil.process", s.as_str()),
        ("diff.external", s.as_str()),
    ] {
        git(r, &["config", k, v]);
    }
    write(&r.join(".gitattributes"), "* filter=evil\n");
    for hook in ["post-checkout", "pre-commit", "reference-transaction"] {
        std::fs::copy(&script, r.join(".git/hooks").join(hook)).unwrap();
    }
    let specs = r.join("specs");
    let rev = read(&at(&specs, "HEAD")).unwrap();
    assert_eq!(rev.listing.files.len(), 2);
    resolve(&at(&specs, "main")).unwrap();
    assert!(
        !marker.exists(),
        "a command from the repository's config ran"
    );
}
