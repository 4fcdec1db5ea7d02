#![cfg(test)]
//! Unit tests of `--sim-quota` parsing.

use super::sim_quotas;

/// `--sim-quota` takes a metric, or a family quota's `TPUS_PER_TPU_FAMILY/FAMILY`.
#[test]
fn sim_quota_flags_take_metrics_and_family_quotas() {
    let got = sim_quotas(&[
        "us-central1/TPU_V5P=64".to_string(),
        "us-east5/TPUS_PER_TPU_FAMILY/CT6E=32".to_string(),
    ])
    .unwrap();
    assert_eq!(got["us-central1/TPU_V5P"], 64);
    assert_eq!(got["us-east5/TPUS_PER_TPU_FAMILY/CT6E"], 32);
    for bad in [
        "us-central1/TPU_V5P/X=1",
        "us-central1/TPUS_PER_TPU_FAMILY/=1",
        "us-central1=1",
        "us-central1/TPU_V5P=lots",
    ] {
        let e = sim_quotas(&[bad.to_string()]).unwrap_err().to_string();
        assert!(e.contains("expected REGION/METRIC=LIMIT"), "{bad}: {e}");
    }
}
