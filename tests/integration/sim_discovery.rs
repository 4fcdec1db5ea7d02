//! The embedded discovery documents cannot drift from the shared originals:
//! container v1 is a byte-for-byte copy, compute v1 is exactly what
//! `scripts/prune-discovery.py` produces from the full document.

use std::path::{Path, PathBuf};
use std::process::Command;

fn shared_discovery() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    [
        root.join("../shared/gcp-discovery"),
        root.join("../../shared/gcp-discovery"),
    ]
    .into_iter()
    .find(|p| p.join("compute-v1.json").is_file())
}

#[test]
fn embedded_discovery_documents_match_their_sources() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let embedded_compute = std::fs::read_to_string(
        root.join("crates/slicectl-sim/src/discovery/compute-v1-pruned.json"),
    )
    .unwrap();
    assert_eq!(embedded_compute, slicectl_sim::discovery::COMPUTE_V1_PRUNED);
    let doc = slicectl_sim::discovery::compute().unwrap();
    assert!(doc.method("compute.resourcePolicies.insert").is_some());
    assert_eq!(
        slicectl_sim::discovery::container().unwrap().revision(),
        "20261027"
    );

    // Only when the shared originals are present (they are not shipped).
    let Some(shared) = shared_discovery() else {
        return;
    };
    let original = std::fs::read(shared.join("container-v1.json")).unwrap();
    let copy =
        std::fs::read(root.join("crates/slicectl-sim/src/discovery/container-v1.json")).unwrap();
    assert!(
        original == copy,
        "crates/slicectl-sim/src/discovery/container-v1.json differs from {}",
        shared.display()
    );

    let out = tempfile::NamedTempFile::new().unwrap();
    let status = Command::new("python3")
        .arg(root.join("scripts/prune-discovery.py"))
        .arg(shared.join("compute-v1.json"))
        .arg(out.path())
        .status()
        .expect("python3 runs scripts/prune-discovery.py");
    assert!(status.success());
    let fresh = std::fs::read_to_string(out.path()).unwrap();
    assert!(
        fresh == embedded_compute,
        "crates/slicectl-sim/src/discovery/compute-v1-pruned.json is stale: rerun scripts/prune-discovery.py"
    );
}
