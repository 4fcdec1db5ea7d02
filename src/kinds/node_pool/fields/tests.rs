#![cfg(test)]
//! Unit tests of the node pool's field classification.

use super::*;
use crate::plan::hash::{diff, spec_hash};
use crate::resource::gke::{NodeConfig, PlacementPolicy};

fn pool(machine: &str, topo: &str) -> NodePool {
    NodePool {
        name: "p".into(),
        config: Some(NodeConfig {
            machine_type: machine.into(),
            labels: [("team".to_string(), "a".to_string())]
                .into_iter()
                .collect(),
            ..Default::default()
        }),
        initial_node_count: Some(2),
        locations: vec!["us-central1-a".into()],
        placement_policy: Some(PlacementPolicy {
            kind: Some("COMPACT".into()),
            tpu_topology: Some(topo.into()),
            policy_name: None,
        }),
        ..Default::default()
    }
}

#[test]
fn labels_do_not_change_the_hash() {
    let a = pool("ct5p-hightpu-4t", "2x2x2");
    let mut b = a.clone();
    if let Some(c) = b.config.as_mut() {
        c.labels.insert("other".into(), "x".into());
    }
    assert_eq!(
        spec_hash(&node_pool_projection(&a)),
        spec_hash(&node_pool_projection(&b))
    );
}

#[test]
fn topology_changes_the_hash_and_is_located() {
    let a = node_pool_projection(&pool("ct5p-hightpu-4t", "2x2x2"));
    let b = node_pool_projection(&pool("ct5p-hightpu-4t", "2x2x4"));
    assert_ne!(spec_hash(&a), spec_hash(&b));
    let d = diff(&a, &b, true);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].path, "placementPolicy.tpuTopology");
}

#[test]
fn server_defaults_are_ignored_unless_desired() {
    let desired = pool("ct5p-hightpu-4t", "2x2x2");
    let mut live = desired.clone();
    if let Some(c) = live.config.as_mut() {
        c.disk_size_gb = Some(100);
        c.image_type = Some("COS_CONTAINERD".into());
        c.oauth_scopes = vec!["https://www.googleapis.com/auth/devstorage.read_only".into()];
    }
    let d = node_pool_projection(&desired);
    assert_eq!(live_node_pool_projection(&live, &d), d);
}

/// Every field of a pool set, so that each replacement field projects.
fn full_pool() -> NodePool {
    let json = serde_json::json!({
        "name": "p",
        "config": {
            "machineType": "ct5p-hightpu-4t",
            "labels": {"team": "a", "slicectl.dev/owner": "o"},
            "resourceLabels": {"cost": "x"},
            "taints": [{"key": "k", "value": "v", "effect": "NO_SCHEDULE"}],
            "spot": true,
            "flexStart": true,
            "maxRunDuration": "3600s",
            "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name", "values": ["r"]},
            "serviceAccount": "sa@p.iam.gserviceaccount.com",
            "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
            "tags": ["t"],
            "diskType": "pd-balanced",
            "diskSizeGb": 100,
            "shieldedInstanceConfig": {"enableSecureBoot": true, "enableIntegrityMonitoring": true},
            "imageType": "COS_CONTAINERD",
            "metadata": {"m": "1"}
        },
        "initialNodeCount": 2,
        "locations": ["us-central1-a"],
        "placementPolicy": {"type": "COMPACT", "tpuTopology": "2x2x2", "policyName": "wp"},
        "queuedProvisioning": {"enabled": true},
        "autoscaling": {"enabled": true, "totalMinNodeCount": 0, "totalMaxNodeCount": 2, "minNodeCount": 0, "maxNodeCount": 2, "locationPolicy": "ANY"},
        "management": {"autoUpgrade": true, "autoRepair": true},
        "maxPodsConstraint": {"maxPodsPerNode": 110},
        "upgradeSettings": {"maxSurge": 1, "maxUnavailable": 0},
        "networkConfig": {"additionalNodeNetworkConfigs": [{"network": "n", "subnetwork": "s"}]},
        "status": "RUNNING",
        "statusMessage": "m",
        "conditions": [{"code": "GCE_STOCKOUT", "message": "m"}],
        "selfLink": "https://x",
        "etag": "e",
        "version": "1.33",
        "instanceGroupUrls": ["https://ig"]
    });
    serde_json::from_value(json).unwrap()
}

#[test]
fn the_replacement_view_projects_as_the_whole_pool() {
    let whole = |np: &NodePool| {
        project(
            &serde_json::to_value(np).unwrap(),
            NODE_POOL_REPLACEMENT_FIELDS,
        )
    };
    let full = full_pool();
    // The test pool reaches every replacement field: a field added to
    // the list must be set here, and then in the view, or this fails.
    let p = whole(&full);
    for f in NODE_POOL_REPLACEMENT_FIELDS {
        assert!(
            p.keys().any(|k| k == f || k.starts_with(&format!("{f}."))),
            "{f} is not set in full_pool(): {p:?}"
        );
    }
    assert_eq!(node_pool_projection(&full), p);
    let plain = pool("ct5p-hightpu-4t", "2x2x2");
    assert_eq!(node_pool_projection(&plain), whole(&plain));
    assert_eq!(
        node_pool_projection(&NodePool::default()),
        whole(&NodePool::default())
    );
}

/// Golden vector: pinned so that an accidental change of the hash
/// function (which would replace every live slice) fails this test. A
/// deliberate change must bump HASH_VERSION and update this vector.
#[test]
fn golden_hash_vector() {
    let p = node_pool_projection(&pool("ct5p-hightpu-4t", "2x2x2"));
    assert_eq!(
        serde_json::to_string(&p).unwrap(),
        r#"{"config.machineType":"ct5p-hightpu-4t","initialNodeCount":2,"locations":["us-central1-a"],"placementPolicy.tpuTopology":"2x2x2","placementPolicy.type":"COMPACT"}"#
    );
    assert_eq!(spec_hash(&p), "d0f69f0d45161c5d");
}
