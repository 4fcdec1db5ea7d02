//! An apply killed with SIGKILL at a random point, then run again, converges
//! with no duplicate and no leaked resource: all state is on the resources.

mod common;

use std::time::Duration;

use common::*;
use rand::{Rng, SeedableRng};
use slicectl::sim::FaultConfig;

#[tokio::test(flavor = "multi_thread")]
async fn killed_apply_resumes_without_duplicates_or_leaks() {
    let files = vec![
        (
            "llm.yaml",
            slice_yaml("llm", "tpu-v5p-slice", "2x2x2", 3, ""),
        ),
        ("iron.yaml", slice_yaml("iron", "tpu7x", "2x2x2", 2, "")),
    ];
    let want_pools = vec!["iron-0", "iron-1", "llm-0", "llm-1", "llm-2"];
    let want_policies = vec!["iron-0-wp", "iron-1-wp"];
    for seed in 0..12u64 {
        let sim = sim(Duration::from_millis(150), seed, FaultConfig::default()).await;
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
            tokio::time::sleep(Duration::from_millis(rng.random_range(20..600))).await;
            child.start_kill().unwrap(); // SIGKILL
            let _ = child.wait().await;
        }
        // Run again until converged: must never create a duplicate.
        let o = apply(&sim, dir.path()).await;
        assert!(o.status.success(), "seed {seed}: {}", text(&o));
        let o = slicectl(
            &sim,
            &["plan", dir.path().to_str().unwrap(), "--detailed-exitcode"],
        )
        .await;
        assert_eq!(o.status.code(), Some(0), "seed {seed}: {}", text(&o));
        assert_eq!(pool_names(&sim).await, want_pools, "seed {seed}");
        assert_eq!(policy_names(&sim).await, want_policies, "seed {seed}");
        let stats = sim.stats();
        let creates = stats
            .by_method
            .get("container.projects.locations.clusters.nodePools.create")
            .copied()
            .unwrap_or(0);
        let conflicts = stats.by_method.get("conflict").copied().unwrap_or(0);
        assert!(creates >= 5, "seed {seed}: {stats:?} {conflicts}");
        sim.shutdown().await;
    }
}
