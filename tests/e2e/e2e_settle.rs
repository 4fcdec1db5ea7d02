//! End to end: a half-written spec file never destroys anything
//! (`reconcile DIR --watch --settle`, and `--git-ref`), the real binary
//! against the simulator.
//!
//! Each test uses a short settle period (a few seconds) so that it stays
//! quick; what it asserts does not depend on timing beyond that: the calls
//! the simulator counted (no node pool delete or create that should not
//! be), and the outcome of each cycle (`settling` while steps are held).

use crate::common;
use crate::e2e_watch::{CREATE, DELETE, Watch, calls, create_dir_with, label};

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use slicectl_sim::FaultConfig;

/// Two slices in one file, `alpha` first and `beta` after `padding` bytes
/// of comments (so that a read cut anywhere in the padding is a valid file
/// with alpha only), beta labelled `team`.
fn two(padding: usize, team: &str) -> String {
    let alpha = slice_yaml("alpha", "tpu-v6e-slice", "1x1", 1, "");
    let beta = slice_yaml(
        "beta",
        "tpu-v6e-slice",
        "1x1",
        1,
        &format!("  nodeLabels:\n    team: {team}\n"),
    );
    let line = "# padding: a large spec file is written in more than one chunk\n";
    let pad = line.repeat(padding / line.len() + 1);
    format!("{alpha}{pad}---\n{beta}")
}

fn keep() -> String {
    slice_yaml("keep", "tpu-v6e-slice", "1x1", 1, "")
}

/// (a) `two.yaml` rewritten in place in two chunks 1.5 s apart (as `cat >
/// file`, `scp` or `rsync --inplace` do): the first chunk, a valid file
/// with alpha only, is read, and beta's deletion is held (`settling`); the
/// second completes the file, and once the period is over nothing is to be
/// done. Beta's pool is never deleted or created again.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_rewritten_in_place_in_two_chunks_never_deletes_the_second_slice() {
    let sim = sim(Duration::from_millis(50), 11, FaultConfig::default()).await;
    let text = two(64 * 1024, "a");
    let dir = spec_dir(&[("two.yaml", text.clone())]);
    let d = dir.path();
    let w = Watch::start_with(&sim, d, &["--settle", "3s"]);
    w.wait("the start cycle", || async {
        pool_names(&sim).await == ["alpha-0", "beta-0"] && w.cycles() >= 1
    })
    .await;
    assert_eq!(calls(&sim, CREATE), 2);

    // The rewrite: truncate, the first chunk (up to beta), 1.5 s, the rest.
    let cut = text.find("---\napiVersion").unwrap();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(d.join("two.yaml"))
        .unwrap();
    f.write_all(&text.as_bytes()[..cut]).unwrap();
    f.flush().unwrap();
    w.wait(
        "the half-written file read and beta's deletion held",
        || async { w.count("change", "settling") >= 1 },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let n = w.count("change", "no_changes");
    f.write_all(&text.as_bytes()[cut..]).unwrap();
    f.flush().unwrap();
    drop(f);
    // The whole file again: nothing to do, nothing held; and past the end
    // of the first chunk's period, still nothing deleted.
    w.wait("a clean cycle after the second chunk", || async {
        w.count("change", "no_changes") > n
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(pool_names(&sim).await, ["alpha-0", "beta-0"]);
    assert_eq!(calls(&sim, DELETE), 0, "{}", w.text());
    assert_eq!(calls(&sim, CREATE), 2, "{}", w.text());
    // The held step was shown, with its code and why.
    let err = w.stderr();
    assert!(
        err.contains("code=\"settling\"")
            && err.contains("steps held: the spec source is settling"),
        "{}",
        w.text()
    );
    let out = w.text();
    assert!(
        out.contains("delete slice.beta[0].node_pool (beta-0) waits: steps that destroy capacity run only once the specs have been unchanged for the settle period (3s)"),
        "{out}"
    );
}

/// (c) A file truncated to zero bytes (then refilled with the same bytes
/// 1 s later): its slices are not deleted; the rewrite with the same bytes
/// is a change too (its times moved), so the period starts again, and then
/// nothing is to be done.
#[tokio::test(flavor = "multi_thread")]
async fn a_file_truncated_to_zero_bytes_and_refilled_deletes_nothing() {
    let sim = sim(Duration::from_millis(50), 12, FaultConfig::default()).await;
    let text = two(0, "a");
    let dir = spec_dir(&[("two.yaml", text.clone()), ("keep.yaml", keep())]);
    let d = dir.path();
    let w = Watch::start_with(&sim, d, &["--settle", "3s"]);
    w.wait("the start cycle", || async {
        pool_names(&sim).await == ["alpha-0", "beta-0", "keep-0"] && w.cycles() >= 1
    })
    .await;

    std::fs::write(d.join("two.yaml"), "").unwrap();
    w.wait("the empty file read and the deletions held", || async {
        w.count("change", "settling") >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let n = w.count("change", "no_changes");
    std::fs::write(d.join("two.yaml"), &text).unwrap();
    w.wait("a clean cycle after the refill", || async {
        w.count("change", "no_changes") > n
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(pool_names(&sim).await, ["alpha-0", "beta-0", "keep-0"]);
    assert_eq!(calls(&sim, DELETE), 0, "{}", w.text());
    assert_eq!(calls(&sim, CREATE), 3, "{}", w.text());
    assert!(
        w.stderr()
            .contains("delete slice.alpha[0].node_pool (alpha-0) waits"),
        "{}",
        w.text()
    );
}

/// (d) A genuine removal is pruned once the period is over, by the cycle
/// the loop runs then (trigger `settle`): not before, and not much after.
/// (e) Creates are not delayed: with a settle period of 60 s, a new file's
/// slice is created at once, while the removal in the same change waits.
#[tokio::test(flavor = "multi_thread")]
async fn a_removal_is_pruned_after_the_settle_period_and_creates_do_not_wait() {
    let sim = sim(Duration::from_millis(50), 13, FaultConfig::default()).await;
    let dir = spec_dir(&[("two.yaml", two(0, "a")), ("keep.yaml", keep())]);
    let d = dir.path();
    let w = Watch::start_with(&sim, d, &["--settle", "3s", "--resync", "10m"]);
    w.wait("the start cycle", || async {
        pool_names(&sim).await == ["alpha-0", "beta-0", "keep-0"] && w.cycles() >= 1
    })
    .await;

    let removed = Instant::now();
    put(
        d,
        "two.yaml",
        &slice_yaml("alpha", "tpu-v6e-slice", "1x1", 1, ""),
    );
    w.wait("beta deleted", || async { calls(&sim, DELETE) == 1 })
        .await;
    let after = removed.elapsed();
    assert!(
        after >= Duration::from_secs(3),
        "deleted {after:?} after the removal: before the settle period\n{}",
        w.text()
    );
    assert!(
        after < Duration::from_secs(20),
        "deleted {after:?} after the removal\n{}",
        w.text()
    );
    w.wait("the settle cycle that deleted beta", || async {
        w.count("change", "settling") >= 1 && w.count("settle", "applied") >= 1
    })
    .await;
    assert_eq!(pool_names(&sim).await, ["alpha-0", "keep-0"]);
    drop(w);

    // (e) A long period: a create and a removal in one change.
    let sim = sim_e().await;
    let dir = spec_dir(&[("two.yaml", two(0, "a"))]);
    let d = dir.path();
    let w = Watch::start_with(&sim, d, &["--settle", "60s"]);
    let started = Instant::now();
    w.wait("created at start", || async {
        pool_names(&sim).await == ["alpha-0", "beta-0"]
    })
    .await;
    assert!(started.elapsed() < Duration::from_secs(30), "{}", w.text());
    let changed = Instant::now();
    put(
        d,
        "two.yaml",
        &slice_yaml("alpha", "tpu-v6e-slice", "1x1", 1, ""),
    );
    put(d, "keep.yaml", &keep());
    w.wait("keep created, beta held", || async {
        pool_names(&sim).await == ["alpha-0", "beta-0", "keep-0"]
            && w.count("change", "settling") >= 1
    })
    .await;
    assert!(
        changed.elapsed() < Duration::from_secs(30),
        "the create waited {:?}\n{}",
        changed.elapsed(),
        w.text()
    );
    assert_eq!(calls(&sim, DELETE), 0, "{}", w.text());
}

async fn sim_e() -> slicectl_sim::SimHandle {
    sim(Duration::from_millis(50), 14, FaultConfig::default()).await
}

/// Runs `git` in `dir` (the test's own: slicectl never runs git).
pub(crate) fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An "upstream" repository with the target and `two.yaml` (3 MiB, beta
/// after the padding) in `specs/`, and a clone of it, whose `specs/` is
/// the watched directory.
fn upstream_and_clone(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let up = root.join("upstream");
    std::fs::create_dir(&up).unwrap();
    create_dir_with(
        &up.join("specs"),
        &[("target.yaml", TARGET), ("two.yaml", &two(3 << 20, "a"))],
    );
    git(&up, &["init", "-q"]);
    git(&up, &["add", "."]);
    git(&up, &["commit", "-q", "-m", "two slices"]);
    let clone = root.join("clone");
    git(root, &["clone", "-q", "upstream", "clone"]);
    (up, clone)
}

/// (b) A `git pull` rewriting a large spec file (beta relabelled) and
/// adding a file: watching the working files, the pull is applied (the
/// label, the new slice) and nothing is deleted, whatever the watcher saw
/// of the rewrite; with `--git-ref HEAD`, the same pull is applied from
/// the commit, working files edited by hand (half a file, uncommitted) are
/// never read, and a removal committed and pulled is pruned at once (a
/// commit needs no settle period).
#[tokio::test(flavor = "multi_thread")]
async fn a_git_pull_of_a_large_file_deletes_nothing_with_or_without_git_ref() {
    for git_ref in [false, true] {
        let sim = sim(Duration::from_millis(50), 15, FaultConfig::default()).await;
        let tmp = tempfile::tempdir().unwrap();
        let (up, clone) = upstream_and_clone(tmp.path());
        let specs = clone.join("specs");
        let mut args = vec!["--settle", "3s"];
        if git_ref {
            args.extend(["--git-ref", "HEAD"]);
        }
        let w = Watch::start_with(&sim, &specs, &args);
        w.wait("the start cycle", || async {
            pool_names(&sim).await == ["alpha-0", "beta-0"] && w.cycles() >= 1
        })
        .await;
        if git_ref {
            assert!(
                w.stderr()
                    .contains("watching the revision of the spec directory"),
                "{}",
                w.text()
            );
        }

        // Upstream: beta relabelled in the large file, keep added; pulled.
        std::fs::write(up.join("specs/two.yaml"), two(3 << 20, "b")).unwrap();
        std::fs::write(up.join("specs/keep.yaml"), keep()).unwrap();
        git(&up, &["add", "."]);
        git(&up, &["commit", "-q", "-m", "relabel beta, add keep"]);
        git(&clone, &["pull", "-q", "--ff-only"]);
        w.wait("the pull applied", || async {
            label(&sim, "beta-0", "team").await.as_deref() == Some("b")
                && pool_names(&sim).await == ["alpha-0", "beta-0", "keep-0"]
        })
        .await;
        assert_eq!(calls(&sim, DELETE), 0, "git_ref={git_ref}\n{}", w.text());
        assert_eq!(calls(&sim, CREATE), 3, "git_ref={git_ref}\n{}", w.text());

        if !git_ref {
            continue;
        }
        // Working files are not read: half a file by hand, uncommitted.
        w.wait("the pull's cycle finished", || async {
            w.count("change", "applied") >= 1
        })
        .await;
        let n = w.cycles();
        let text = std::fs::read_to_string(specs.join("two.yaml")).unwrap();
        let cut = text.find("---\napiVersion").unwrap();
        std::fs::write(specs.join("two.yaml"), &text[..cut]).unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(w.cycles(), n, "no cycle for a working file\n{}", w.text());
        git(&clone, &["checkout", "--", "specs/two.yaml"]);

        // A removal committed upstream and pulled: pruned at once.
        git(&up, &["rm", "-q", "specs/keep.yaml"]);
        git(&up, &["commit", "-q", "-m", "remove keep"]);
        git(&clone, &["pull", "-q", "--ff-only"]);
        w.wait("keep deleted", || async {
            pool_names(&sim).await == ["alpha-0", "beta-0"]
        })
        .await;
        w.wait("the change cycle that deleted keep", || async {
            w.count("change", "applied") >= 2
        })
        .await;
        assert_eq!(w.count("change", "settling"), 0, "{}", w.text());
        assert_eq!(calls(&sim, DELETE), 1, "{}", w.text());
    }
}

/// `--git-ref` errors are located and say what to do: a directory outside
/// any repository, an unknown revision. Nothing is planned.
#[tokio::test(flavor = "multi_thread")]
async fn git_ref_errors_are_clear() {
    let sim = sim(Duration::from_millis(50), 16, FaultConfig::default()).await;
    let plain = spec_dir(&[("keep.yaml", keep())]);
    let p = plain.path().to_str().unwrap();
    let out = slicectl(&sim, &["reconcile", p, "--git-ref", "HEAD"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("is not inside a git repository"),
        "{}",
        text(&out)
    );

    let tmp = tempfile::tempdir().unwrap();
    let (_up, clone) = upstream_and_clone(tmp.path());
    let specs = clone.join("specs");
    let s = specs.to_str().unwrap();
    let out = slicectl(&sim, &["reconcile", s, "--git-ref", "no-such-branch"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the revision \"no-such-branch\" is not known"),
        "{}",
        text(&out)
    );
    assert!(pool_names(&sim).await.is_empty());

    // One-shot from the commit: working files edited by hand are not read.
    std::fs::write(specs.join("two.yaml"), "not: [valid").unwrap();
    let out = slicectl(&sim, &["reconcile", s, "--git-ref", "HEAD"]).await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(pool_names(&sim).await, ["alpha-0", "beta-0"]);

    // --settle 0 is refused, and says what to use instead.
    let out = slicectl(&sim, &["reconcile", s, "--watch", "--settle", "0s"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--git-ref"), "{}", text(&out));
}
