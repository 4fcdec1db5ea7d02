//! An apply killed with SIGKILL at a random point, then run again, converges
//! with no duplicate and no leaked resource: all state is on the resources.

mod common;

use std::time::Duration;

use common::*;
use rand::{Rng, SeedableRng};
use slicectl::sim::FaultConfig;

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
