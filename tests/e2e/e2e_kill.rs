//! An apply killed with SIGKILL at a random point, then run again, converges
//! with no duplicate and no leaked resource: all state is on the resources.

use crate::common;

use std::time::Duration;

use common::*;
use rand::{Rng, SeedableRng};
use slicectl_sim::FaultConfig;

#[tokio::test(flavor = "multi_thread")]
async fn killed_apply_resumes_without_duplicates_or_leaks() {
    let llm = (
        "llm.yaml",
        slice_yaml("llm", "tpu-v5p-slice", "2x2x2", 3, ""),
    );
    let iron = ("iron.yaml", slice_yaml("iron", "tpu7x", "2x2x2", 2, ""));
    let mut waits = 0;
    for seed in 0..12u64 {
        // Even seeds: node pools only (nothing else keeps a resumed apply busy,
        // so a missed in-flight operation shows). Odd seeds: with tpu7x
        // workload policies ordered before their pools.
        let (files, want_pools, want_policies, creates, inserts) = if seed % 2 == 0 {
            (
                vec![llm.clone()],
                vec!["llm-0", "llm-1", "llm-2"],
                vec![],
                3,
                0,
            )
        } else {
            (
                vec![llm.clone(), iron.clone()],
                vec!["iron-0", "iron-1", "llm-0", "llm-1", "llm-2"],
                vec!["iron-0-wp", "iron-1-wp"],
                5,
                2,
            )
        };
        let sim = sim(Duration::from_millis(800), seed, FaultConfig::default()).await;
        let dir = spec_dir(&files);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        // Kill the first apply (and, on odd seeds, a second one) at a random point.
        for _ in 0..(1 + seed % 2) {
            let mut child = tokio::process::Command::new(bin())
                .args(["apply", dir.path().to_str().unwrap(), "--auto-approve"])
                .env("SLICECTL_API_ENDPOINT", sim.base_url())
                .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            tokio::time::sleep(Duration::from_millis(rng.random_range(20..500))).await;
            child.start_kill().unwrap(); // SIGKILL
            let _ = child.wait().await;
        }
        // Run again: it must find the killed run's operations in the cloud,
        // wait for them (never duplicate them), and finish converged.
        let o = apply(&sim, dir.path()).await;
        assert!(o.status.success(), "seed {seed}: {}", text(&o));
        let stdout = String::from_utf8_lossy(&o.stdout).to_string();
        if let Some(n) = stdout
            .split(" waited on")
            .next()
            .and_then(|head| head.rsplit(", ").next())
            .and_then(|n| n.trim().parse::<u32>().ok())
        {
            waits += n;
        }
        assert!(
            !stdout.contains("PROVISIONING") && !stdout.contains("STOPPING"),
            "seed {seed}: the resumed apply returned before in-flight operations finished:\n{stdout}"
        );
        let o = slicectl(
            &sim,
            &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
        )
        .await;
        assert_eq!(o.status.code(), Some(0), "seed {seed}: {}", text(&o));
        assert_eq!(pool_names(&sim).await, want_pools, "seed {seed}");
        assert_eq!(policy_names(&sim).await, want_policies, "seed {seed}");
        // Exactly one create per resource across all runs: a resumed apply
        // never re-sends a create whose operation the killed one started,
        // and nothing was deleted.
        let stats = sim.stats();
        let count = |m: &str| stats.by_method.get(m).copied().unwrap_or(0);
        let stats_text = format!("seed {seed}: {stats:?}");
        assert_eq!(
            count("container.projects.locations.clusters.nodePools.create"),
            creates,
            "{stats_text}"
        );
        assert_eq!(
            count("compute.resourcePolicies.insert"),
            inserts,
            "{stats_text}"
        );
        assert_eq!(
            count("container.projects.locations.clusters.nodePools.delete"),
            0,
            "{stats_text}"
        );
        sim.shutdown().await;
    }
    assert!(
        waits > 0,
        "no resumed apply waited on an in-flight operation: the kills missed every operation"
    );
}

/// `apply` of `dir` started, read until its stderr has a line containing
/// `needle` (a step in flight); returns the child, the rest of its stderr
/// and everything it said up to that point.
async fn apply_until(
    sim: &slicectl_sim::SimHandle,
    dir: &std::path::Path,
    extra: &[&str],
    needle: &str,
) -> (
    tokio::process::Child,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
    String,
) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(bin())
        .args(["apply", dir.to_str().unwrap(), "--auto-approve"])
        .args(extra)
        .env("SLICECTL_API_ENDPOINT", sim.base_url())
        .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            seen.push_str(&l);
            seen.push('\n');
            if l.contains(needle) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "never saw {needle:?}:\n{seen}");
    (child, lines, seen)
}

fn interrupt(child: &tokio::process::Child) {
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
}

/// Ctrl-C during `apply` stops gracefully, as Terraform does: the step in
/// flight finishes, no new step starts, the rest is reported as not run
/// (exit 1, "run again"), and the next apply creates only what is left.
/// A second Ctrl-C exits at once with 130, and the next apply still
/// converges with no duplicate.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_during_apply_finishes_the_step_in_flight_and_a_second_stops_at_once() {
    use tokio::io::AsyncReadExt;
    let sim = sim(Duration::from_secs(2), 3, FaultConfig::default()).await;
    let dir = spec_dir(&[("iron.yaml", slice_yaml("iron", "tpu7x", "2x2x2", 1, ""))]);

    let (mut child, mut lines, mut err) = apply_until(
        &sim,
        dir.path(),
        &[],
        "slice.iron[0].workload_policy: creating ...",
    )
    .await;
    interrupt(&child);
    while let Some(l) = lines.next_line().await.unwrap() {
        err.push_str(&l);
        err.push('\n');
    }
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("exits after the step in flight")
        .unwrap();
    let all = format!("--- stdout\n{out}\n--- stderr\n{err}");
    assert_eq!(status.code(), Some(1), "{all}");
    assert!(
        err.contains("Interrupt received: no new step starts"),
        "{all}"
    );
    assert!(
        err.contains("slice.iron[0].workload_policy: creating done"),
        "{all}"
    );
    assert!(
        out.contains("not run: slice.iron[0].node_pool: creating never ran: a stop was requested"),
        "{all}"
    );
    assert!(out.contains("Run `slicectl apply` again"), "{all}");
    assert_eq!(policy_names(&sim).await, ["iron-0-wp"]);
    assert!(pool_names(&sim).await.is_empty(), "{all}");

    // The next apply: only the pool.
    let o = apply(&sim, dir.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await, ["iron-0"]);

    // Twice: stops at once (130) while the replacement's first step (the
    // old pool's delete) is in flight; the next apply finds that delete's
    // operation, waits for it and converges with no duplicate.
    let dir2 = spec_dir(&[("iron.yaml", slice_yaml("iron", "tpu7x", "2x2x4", 1, ""))]);
    // A replacement: the pool's delete is the first step.
    let (mut child, _lines, seen) = apply_until(
        &sim,
        dir2.path(),
        &[],
        "slice.iron[0].node_pool: deleting ...",
    )
    .await;
    assert!(seen.contains("deleting ..."), "{seen}");
    interrupt(&child);
    tokio::time::sleep(Duration::from_millis(200)).await;
    interrupt(&child);
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .expect("exits at once on the second interrupt")
        .unwrap();
    assert_eq!(status.code(), Some(130), "{seen}");
    let o = apply(&sim, dir2.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(pool_names(&sim).await, ["iron-0"]);
    let stats = sim.stats();
    assert_eq!(
        stats.by_method["container.projects.locations.clusters.nodePools.create"], 2,
        "the first pool and its replacement, once each: {stats:?}"
    );
}

/// The rest of a child's stderr (until it closes) and all its stdout.
async fn rest_of(
    child: &mut tokio::process::Child,
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
    err: &mut String,
) -> String {
    use tokio::io::AsyncReadExt;
    let read = async {
        while let Some(l) = lines.next_line().await.unwrap() {
            err.push_str(&l);
            err.push('\n');
        }
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        out
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("the apply ends")
}

/// The live node pools by name: (name, status, machine type).
async fn pools_by_name(sim: &slicectl_sim::SimHandle) -> Vec<(String, String, String)> {
    let mut v: Vec<(String, String, String)> = node_pools(sim)
        .await
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["status"].as_str().unwrap_or_default().to_string(),
                p["config"]["machineType"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Issue 24: one Ctrl-C during a roll-out (`--max-replacements 1`, slow
/// operations) while rep-0's old pool is being deleted: rep-0's create
/// still runs (a replacement is one unit for a graceful stop), rep-1 is
/// left untouched and reported not run, no replica is left without
/// capacity, and the next apply converges. A second Ctrl-C during a
/// replacement exits 130 at once and names what it leaves: the delete in
/// flight, and the replica without capacity until the next apply.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_during_a_replacement_finishes_it_and_a_second_names_what_it_leaves() {
    let sim = sim(Duration::from_millis(10), 5, FaultConfig::default()).await;
    let spec =
        |topo: &str| spec_dir(&[("rep.yaml", slice_yaml("rep", "tpu-v6e-slice", topo, 2, ""))]);
    // One host each, of 4 and of 8 chips.
    let (small, big) = (spec("2x2"), spec("2x4"));
    let o = apply(&sim, small.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    let running = |name: &str, topo: &str| {
        let machine = match topo {
            "2x2" => "ct6e-standard-4t",
            _ => "ct6e-standard-8t",
        };
        (name.to_string(), "RUNNING".to_string(), machine.to_string())
    };
    assert_eq!(
        pools_by_name(&sim).await,
        [running("rep-0", "2x2"), running("rep-1", "2x2")]
    );

    // One Ctrl-C while rep-0's delete is in flight.
    sim.set_latency(Duration::from_secs(2));
    let (mut child, mut lines, mut err) = apply_until(
        &sim,
        big.path(),
        &["--max-replacements", "1"],
        "slice.rep[0].node_pool: deleting ...",
    )
    .await;
    interrupt(&child);
    let out = rest_of(&mut child, &mut lines, &mut err).await;
    let status = child.wait().await.unwrap();
    let all = format!("--- stdout\n{out}\n--- stderr\n{err}");
    assert_eq!(status.code(), Some(1), "{all}");
    assert!(
        err.contains("Interrupt received: no new step starts"),
        "{all}"
    );
    assert!(
        err.contains("slice.rep[0].node_pool: creating done"),
        "rep-0's create runs after the stop: {all}"
    );
    assert!(
        out.contains("not run: slice.rep[1].node_pool: deleting never ran: a stop was requested"),
        "{all}"
    );
    assert!(!out.contains("replaced but not recreated"), "{all}");
    assert_eq!(
        pools_by_name(&sim).await,
        [running("rep-0", "2x4"), running("rep-1", "2x2")],
        "rep-0 replaced with the new shape, rep-1 untouched: {all}"
    );

    // The next apply converges.
    sim.set_latency(Duration::from_millis(10));
    let o = apply(&sim, big.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        pools_by_name(&sim).await,
        [running("rep-0", "2x4"), running("rep-1", "2x4")]
    );

    // Twice, during the next roll-out's first delete: 130 at once, and it
    // says that rep-0 has no capacity until the next apply.
    sim.set_latency(Duration::from_secs(2));
    let (mut child, mut lines, mut err) = apply_until(
        &sim,
        small.path(),
        &["--max-replacements", "1"],
        "slice.rep[0].node_pool: deleting ...",
    )
    .await;
    interrupt(&child);
    tokio::time::sleep(Duration::from_millis(200)).await;
    interrupt(&child);
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .expect("exits at once on the second interrupt")
        .unwrap();
    let out = rest_of(&mut child, &mut lines, &mut err).await;
    let all = format!("--- stdout\n{out}\n--- stderr\n{err}");
    assert_eq!(status.code(), Some(130), "{all}");
    assert!(err.contains("Second interrupt: stopping now."), "{all}");
    assert!(
        err.contains("slice.rep[0].node_pool: deleting (in flight: an operation already sent goes on in the cloud)"),
        "{all}"
    );
    assert!(
        err.contains("slice.rep[0] has no capacity until the next `slicectl apply` creates it"),
        "{all}"
    );
    assert!(
        !err.contains("slice.rep[1]"),
        "rep-1 was never started: {all}"
    );
    sim.set_latency(Duration::from_millis(10));
    let o = apply(&sim, small.path()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        pools_by_name(&sim).await,
        [running("rep-0", "2x2"), running("rep-1", "2x2")]
    );
    sim.shutdown().await;
}
