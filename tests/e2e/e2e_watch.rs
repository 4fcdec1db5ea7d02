//! End to end: `slicectl reconcile DIR --watch`, the real binary against the
//! simulator, driven by edits to the watched directory.

use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use slicectl_sim::{FaultConfig, SimHandle};

pub(crate) struct Watch {
    pub(crate) child: tokio::process::Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Watch {
    pub(crate) fn start(sim: &SimHandle, dir: &Path) -> Watch {
        Watch::start_with(sim, dir, &[])
    }

    /// [`Watch::start`] with more arguments (e.g. a short `--resync`).
    pub(crate) fn start_with(sim: &SimHandle, dir: &Path, more: &[&str]) -> Watch {
        let Piped {
            child,
            stdout,
            stderr,
        } = spawn_piped(
            tokio::process::Command::new(bin())
                .args([
                    "reconcile",
                    dir.to_str().unwrap(),
                    "--watch",
                    "--debounce",
                    "100ms",
                    "--grace",
                    "20s",
                ])
                .args(more)
                .env("SLICECTL_API_ENDPOINT", sim.base_url())
                .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
                .env("NO_COLOR", "1")
                .env_remove("SLICECTL_LOG"),
        );
        Watch {
            child,
            stdout,
            stderr,
        }
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub(crate) fn text(&self) -> String {
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            self.stdout.lock().unwrap(),
            self.stderr()
        )
    }

    /// Cycles finished so far.
    pub(crate) fn cycles(&self) -> usize {
        self.stderr().matches("cycle finished").count()
    }

    /// The (trigger, outcome) of each cycle finished so far, in order.
    pub(crate) fn finished(&self) -> Vec<(String, String)> {
        let field = |line: &str, key: &str| {
            line.split(&format!("{key}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_default()
                .to_string()
        };
        self.stderr()
            .lines()
            .filter(|l| l.contains("cycle finished"))
            .map(|l| (field(l, "trigger"), field(l, "outcome")))
            .collect()
    }

    /// Cycles finished so far with this trigger and outcome.
    pub(crate) fn count(&self, trigger: &str, outcome: &str) -> usize {
        self.finished()
            .iter()
            .filter(|(t, o)| t == trigger && o == outcome)
            .count()
    }

    /// Waits until `n` cycles have finished.
    pub(crate) async fn wait_cycles(&self, n: usize, what: &str) {
        self.wait(what, || async { self.cycles() >= n }).await;
    }

    pub(crate) async fn wait<F, Fut>(&self, what: &str, mut done: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !done().await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

pub(crate) async fn label(sim: &SimHandle, pool: &str, key: &str) -> Option<String> {
    node_pools(sim)
        .await
        .iter()
        .find(|p| p["name"] == pool)
        .and_then(|p| p["config"]["labels"][key].as_str().map(str::to_string))
}

/// Labels slice llm `team: llm` (an in-place update) and waits until its
/// pool has the label.
async fn relabel_llm(sim: &SimHandle, w: &Watch, d: &Path) {
    put(
        d,
        "llm.yaml",
        &slice_yaml(
            "llm",
            "tpu-v6e-slice",
            "2x2",
            1,
            "  nodeLabels:\n    team: llm\n",
        ),
    );
    w.wait("llm updated", || async {
        label(sim, "llm-0", "team").await.as_deref() == Some("llm")
    })
    .await;
}

fn tiny(team: &str) -> String {
    slice_yaml(
        "tiny",
        "tpu-v6e-slice",
        "1x1",
        1,
        &format!("  nodeLabels:\n    team: {team}\n"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_converges_on_changes_keeps_the_last_good_file_and_stops_on_sigterm() {
    let sim = sim(Duration::from_millis(50), 1, FaultConfig::default()).await;
    let dir = spec_dir(&[("tiny.yaml", tiny("a"))]);
    let d = dir.path();
    let w = Watch::start(&sim, d);

    // Start: the first cycle creates the pool.
    w.wait("the start cycle", || async {
        pool_names(&sim).await == ["tiny-0"] && w.cycles() >= 1
    })
    .await;
    assert!(w.stderr().contains("trigger=\"start\""), "{}", w.text());

    // A new file: its pool is created.
    put(
        d,
        "llm.yaml",
        &slice_yaml("llm", "tpu-v6e-slice", "2x2", 1, ""),
    );
    w.wait("llm created", || async {
        pool_names(&sim).await == ["llm-0", "tiny-0"]
    })
    .await;
    w.wait("the change cycle's line", || async {
        w.stderr().contains("trigger=\"change\"")
    })
    .await;

    // A near-miss is not read, and the cycle says so and why.
    std::fs::write(d.join("llm.yaml.bak"), "junk").unwrap();
    let skipped = format!(
        "warning: {} was not read as a spec file: the name ends in \".bak\"",
        d.join("llm.yaml.bak").display()
    );
    w.wait("the near-miss reported", || async {
        w.stderr().contains(&skipped)
    })
    .await;

    // An edit: updated in place.
    put(d, "tiny.yaml", &tiny("b"));
    w.wait("tiny updated", || async {
        label(&sim, "tiny-0", "team").await.as_deref() == Some("b")
    })
    .await;

    // Broken: the last good version stays in force, the located error is
    // printed every cycle, nothing is deleted or replaced.
    let n = w.cycles();
    let broken = tiny("c").replace("\"1x1\"", "\"9x9\"");
    put(d, "tiny.yaml", &broken);
    w.wait("the broken file reported", || async {
        w.stderr().contains(
            "is invalid (or valid only with a file that is); its last good version stays in force",
        )
    })
    .await;
    w.wait_cycles(n + 1, "the cycle with the broken file").await;
    let located = format!("{}:", d.join("tiny.yaml").display());
    let err = w.stderr();
    let line = err
        .lines()
        .find(|l| l.starts_with(&located) && l.contains("9x9"))
        .unwrap_or_else(|| panic!("a located error for tiny.yaml\n{}", w.text()));
    assert!(line.contains("valid topologies"), "{line}");
    // Another change elsewhere: another cycle, the error reported again.
    let n = w.cycles();
    relabel_llm(&sim, &w, d).await;
    w.wait_cycles(n + 1, "a cycle after the llm change").await;
    let reported = w
        .stderr()
        .lines()
        .filter(|l| l.starts_with(&located) && l.contains("9x9"))
        .count();
    assert!(
        reported >= 2,
        "reported every cycle: {reported}\n{}",
        w.text()
    );
    assert_eq!(pool_names(&sim).await, ["llm-0", "tiny-0"]);
    assert_eq!(label(&sim, "tiny-0", "team").await.as_deref(), Some("b"));

    // Fixed: converges to the fixed file.
    put(d, "tiny.yaml", &tiny("d"));
    w.wait("tiny fixed", || async {
        label(&sim, "tiny-0", "team").await.as_deref() == Some("d")
    })
    .await;

    // Every file deleted: refused by the empty-source guard, nothing deleted.
    let n = w.cycles();
    for f in ["target.yaml", "tiny.yaml", "llm.yaml"] {
        std::fs::remove_file(d.join(f)).unwrap();
    }
    w.wait("the empty source refused", || async {
        w.stderr().contains("empty_source")
    })
    .await;
    assert!(w.cycles() > n);
    assert!(
        w.stderr().contains("nothing is pruned while it is empty"),
        "{}",
        w.text()
    );
    assert_eq!(pool_names(&sim).await, ["llm-0", "tiny-0"]);

    // SIGTERM: exits cleanly.
    let pid = i32::try_from(w.child.id().unwrap()).unwrap();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let mut w = w;
    let status = tokio::time::timeout(Duration::from_secs(30), w.child.wait())
        .await
        .expect("exits after SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", w.text());
    assert_eq!(pool_names(&sim).await, ["llm-0", "tiny-0"]);
}

/// SIGTERM mid-apply: the step in flight (the workload policy's create)
/// finishes, no new step starts (the node pool is not created), the cycle
/// reports the rest as not run and the process exits 0 well inside the
/// grace period; the next run creates only what is left (no second policy).
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_mid_apply_finishes_the_step_in_flight_and_starts_no_new_one() {
    let sim = sim(Duration::from_secs(2), 7, FaultConfig::default()).await;
    let dir = spec_dir(&[("iron.yaml", slice_yaml("iron", "tpu7x", "2x2x2", 1, ""))]);
    let d = dir.path();
    let w = Watch::start(&sim, d);
    w.wait("the policy's create in flight", || async {
        w.stderr()
            .contains("slice.iron[0].workload_policy: creating ...")
    })
    .await;
    let pid = i32::try_from(w.child.id().unwrap()).unwrap();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let mut w = w;
    let started = std::time::Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(30), w.child.wait())
        .await
        .expect("exits after SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", w.text());
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the grace period (20s) was not needed: {:?}\n{}",
        started.elapsed(),
        w.text()
    );
    let err = w.stderr();
    assert!(
        err.contains("slice.iron[0].workload_policy: creating done"),
        "the step in flight finished\n{}",
        w.text()
    );
    assert!(
        err.contains("a stop was requested (SIGINT or SIGTERM) before it started"),
        "{}",
        w.text()
    );
    assert!(
        !err.contains("slice.iron[0].node_pool: creating"),
        "{}",
        w.text()
    );
    assert_eq!(policy_names(&sim).await, ["iron-0-wp"]);
    assert!(pool_names(&sim).await.is_empty());

    // The next run continues from the live state: only the pool is created.
    let out = apply(&sim, d).await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(pool_names(&sim).await, ["iron-0"]);
    assert_eq!(
        sim.stats().by_method["compute.resourcePolicies.insert"],
        1,
        "no second policy"
    );
}

pub(crate) const DELETE: &str = "container.projects.locations.clusters.nodePools.delete";
pub(crate) const CREATE: &str = "container.projects.locations.clusters.nodePools.create";

pub(crate) fn calls(sim: &SimHandle, method: &str) -> u64 {
    sim.stats().by_method.get(method).copied().unwrap_or(0)
}

/// Creates `dir` with `files` in one step (written next to it, then the
/// directory renamed into place), so that no cycle sees it half written.
pub(crate) fn create_dir_with(dir: &Path, files: &[(&str, &str)]) {
    let staging = dir.with_extension("staging");
    std::fs::create_dir(&staging).unwrap();
    for (name, text) in files {
        std::fs::write(staging.join(name), text).unwrap();
    }
    std::fs::rename(&staging, dir).unwrap();
}

/// A deleted file deletes its slice; a directory that is renamed away,
/// removed, or emptied never prunes (not on the change, not on a resync);
/// the watcher picks the directory up again when it comes back (the same
/// one renamed back, or a new one), and nothing is deleted or created then.
#[tokio::test(flavor = "multi_thread")]
async fn watch_prunes_a_deleted_file_but_never_a_vanished_or_emptied_directory() {
    let sim = sim(Duration::from_millis(50), 2, FaultConfig::default()).await;
    let parent = tempfile::tempdir().unwrap();
    let d = parent.path().join("specs");
    let away = parent.path().join("specs-away");
    let llm = slice_yaml("llm", "tpu-v6e-slice", "2x2", 1, "");
    create_dir_with(
        &d,
        &[
            ("target.yaml", TARGET),
            ("tiny.yaml", &tiny("a")),
            ("llm.yaml", &llm),
        ],
    );
    let w = Watch::start_with(&sim, &d, &["--resync", "2s", "--settle", "1s"]);
    w.wait("the start cycle", || async {
        pool_names(&sim).await == ["llm-0", "tiny-0"] && w.cycles() >= 1
    })
    .await;
    assert_eq!(calls(&sim, CREATE), 2);

    // (a) One slice's file deleted: that slice is deleted once the
    // directory has settled, the other stays.
    std::fs::remove_file(d.join("tiny.yaml")).unwrap();
    w.wait("tiny deleted", || async {
        pool_names(&sim).await == ["llm-0"]
    })
    .await;
    w.wait("the cycle that deleted tiny", || async {
        w.count("change", "settling") >= 1
            && (w.count("settle", "applied") + w.count("resync", "applied")) >= 1
    })
    .await;
    assert_eq!(calls(&sim, DELETE), 1, "{}", w.text());

    // (b) The directory renamed away: refused on the change and on every
    // resync, nothing deleted.
    std::fs::rename(&d, &away).unwrap();
    let missing = format!(
        "error: spec directory {} does not exist; waiting for it to come back (nothing is planned, nothing is pruned)",
        d.display()
    );
    w.wait("the vanished directory reported", || async {
        w.stderr().contains(&missing) && w.count("change", "source_missing") >= 1
    })
    .await;
    w.wait("a resync while it is away", || async {
        w.count("resync", "source_missing") >= 1
    })
    .await;
    assert_eq!(pool_names(&sim).await, ["llm-0"]);
    assert_eq!(calls(&sim, DELETE), 1, "{}", w.text());

    // (c) Renamed back: the watcher says it is back and a cycle runs at
    // once; nothing is deleted or created.
    let n = w.count("change", "no_changes");
    std::fs::rename(&away, &d).unwrap();
    w.wait("the directory back", || async {
        w.stderr().contains("the spec directory is back") && w.count("change", "no_changes") > n
    })
    .await;
    // Watched again: an edit in it is a change, and is applied.
    let n = w.finished().iter().filter(|(t, _)| t == "change").count();
    relabel_llm(&sim, &w, &d).await;
    w.wait("a change cycle after the edit", || async {
        w.finished().iter().filter(|(t, _)| t == "change").count() > n
    })
    .await;
    assert_eq!(pool_names(&sim).await, ["llm-0"]);
    assert_eq!(calls(&sim, DELETE), 1, "{}", w.text());
    assert_eq!(calls(&sim, CREATE), 2, "{}", w.text());

    // Removed, then a new directory with the same files: the same.
    let files: Vec<(String, String)> = ["target.yaml", "llm.yaml"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read_to_string(d.join(f)).unwrap()))
        .collect();
    let gone = w.count("resync", "source_missing");
    std::fs::remove_dir_all(&d).unwrap();
    w.wait("a resync while it is removed", || async {
        w.count("resync", "source_missing") > gone
    })
    .await;
    let back = w.stderr().matches("the spec directory is back").count();
    let n = w.count("change", "no_changes");
    let f: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    create_dir_with(&d, &f);
    w.wait("the new directory watched", || async {
        w.stderr().matches("the spec directory is back").count() > back
            && w.count("change", "no_changes") > n
    })
    .await;
    let n = w.count("change", "applied");
    put(&d, "llm.yaml", &llm);
    w.wait("llm's label removed", || async {
        label(&sim, "llm-0", "team").await.is_none() && w.count("change", "applied") > n
    })
    .await;
    assert_eq!(pool_names(&sim).await, ["llm-0"]);
    assert_eq!(calls(&sim, DELETE), 1, "{}", w.text());
    assert_eq!(calls(&sim, CREATE), 2, "{}", w.text());

    // (d) Emptied (the directory stays): refused on the change and on
    // every resync, nothing deleted.
    for f in ["target.yaml", "llm.yaml"] {
        std::fs::remove_file(d.join(f)).unwrap();
    }
    w.wait("the empty source refused", || async {
        w.count("change", "empty_source") >= 1
    })
    .await;
    let n = w.count("resync", "empty_source");
    w.wait("a resync while it is empty", || async {
        w.count("resync", "empty_source") > n
    })
    .await;
    assert!(
        w.stderr().contains(&format!(
            "refused: no spec files (*.yaml, *.yml) under {}",
            d.display()
        )),
        "{}",
        w.text()
    );
    assert_eq!(pool_names(&sim).await, ["llm-0"]);
    assert_eq!(calls(&sim, DELETE), 1, "{}", w.text());

    // Filled again: converges with nothing deleted or created.
    let n = w.count("change", "no_changes");
    put(&d, "target.yaml", TARGET);
    put(&d, "llm.yaml", &llm);
    w.wait("a clean cycle", || async {
        w.count("change", "no_changes") > n
    })
    .await;
    assert_eq!(pool_names(&sim).await, ["llm-0"]);
    assert_eq!(calls(&sim, DELETE), 1, "{}", w.text());
    assert_eq!(calls(&sim, CREATE), 2, "{}", w.text());
}
