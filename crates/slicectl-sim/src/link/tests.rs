#![cfg(test)]
use super::*;

#[test]
fn node_names_are_gke_style_and_fit_a_gce_name() {
    assert_eq!(
        node_name("train", "tpu-a", "453ec1a4", "nrs9"),
        "gke-train-tpu-a-453ec1a4-nrs9"
    );
    let long = node_name(&"c".repeat(40), &"p".repeat(40), "453ec1a4", "nrs9");
    assert_eq!(long.len(), MAX_NAME, "{long}");
    assert!(
        long.starts_with("gke-cccc") && long.ends_with("-453ec1a4-nrs9"),
        "{long}"
    );
    assert_eq!(suffix(0), "aaaa");
    assert!(suffix(u64::MAX).chars().all(|c| c.is_ascii_alphanumeric()));
}

#[test]
fn endpoints_are_host_and_port_without_scheme() {
    assert_eq!(
        endpoint_of("https://127.0.0.1:6443").as_deref(),
        Some("127.0.0.1:6443")
    );
    assert_eq!(
        endpoint_of("https://10.0.0.2/").as_deref(),
        Some("10.0.0.2")
    );
    assert_eq!(
        endpoint_of("https://10.0.0.2:443").as_deref(),
        Some("10.0.0.2")
    );
    assert_eq!(endpoint_of("http://10.0.0.2"), None);
}

#[test]
fn root_dir_is_read_from_the_kubelet_log() {
    let log =
        std::env::temp_dir().join(format!("slicectl-sim-link-test-{}.log", std::process::id()));
    std::fs::write(
            &log,
            "I1126 05:40:11 1 hollow_kubelet.go:150] Using /tmp/hollow-kubelet.9619307 as root dir for hollow-kubelet\n",
        )
        .unwrap();
    assert_eq!(
        root_dir_in_log(&log),
        Some(PathBuf::from("/tmp/hollow-kubelet.9619307"))
    );
    std::fs::remove_file(&log).unwrap();
}

fn inner() -> Inner {
    let faults = crate::faults::Faults::new(crate::FaultConfig::default(), 0);
    Inner::new(std::time::Duration::ZERO, 0, faults)
}

#[test]
fn tpu_nodes_get_gke_labels_the_tpu_taint_and_their_chips() {
    let c = ClusterRef::parse("projects/p/locations/us-central1/clusters/train").unwrap();
    let pool = json!({
        "name": "np",
        "config": {
            "machineType": "ct5p-hightpu-4t",
            "spot": true,
            "labels": {"team": "llm"},
            "taints": [{"key": "dedicated", "value": "llm", "effect": "NO_EXECUTE"}],
        },
        "placementPolicy": {"type": "COMPACT", "tpuTopology": "2x2x2"},
    });
    let shape = node_shape(&inner(), &c, &pool, "us-central1-a");
    let want: BTreeMap<String, String> = [
        ("team", "llm"),
        ("cloud.google.com/gke-nodepool", "np"),
        ("node.kubernetes.io/instance-type", "ct5p-hightpu-4t"),
        ("topology.kubernetes.io/zone", "us-central1-a"),
        ("topology.kubernetes.io/region", "us-central1"),
        ("cloud.google.com/gke-spot", "true"),
        ("cloud.google.com/gke-tpu-accelerator", "tpu-v5p-slice"),
        ("cloud.google.com/gke-tpu-topology", "2x2x2"),
        ("cloud.google.com/gke-accelerator-count", "4"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(shape.labels, want);
    assert_eq!(shape.taints, ["dedicated=llm:NoExecute", TPU_TAINT]);
    assert_eq!(shape.chips, 4);

    // Single-host: the machine type's own shape; a CPU pool: no TPU.
    let single = json!({"name": "s", "config": {"machineType": "ct5lp-hightpu-8t"}});
    let shape = node_shape(&inner(), &c, &single, "us-central1-a");
    assert_eq!(shape.labels["cloud.google.com/gke-tpu-topology"], "2x4");
    assert_eq!(shape.chips, 8);
    let cpu = json!({"name": "cpu", "config": {"machineType": "e2-standard-4"}});
    let shape = node_shape(&inner(), &c, &cpu, "us-central1-a");
    assert_eq!(shape.chips, 0);
    assert!(shape.taints.is_empty());
    assert!(
        !shape
            .labels
            .contains_key("cloud.google.com/gke-tpu-accelerator")
    );
}

#[tokio::test]
async fn a_flex_start_pool_scales_up_only_for_a_pending_pod_that_fits_it() {
    let cluster = "projects/p/locations/us-central1/clusters/train";
    let pool = format!("{cluster}/nodePools/f");
    let mut inner = inner();
    inner.pools.insert(
        pool.clone(),
        crate::state::PoolRec {
            spec: json!({
                "name": "f",
                "config": {"machineType": "ct6e-standard-4t", "flexStart": true},
                "initialNodeCount": 0,
                "locations": ["us-central1-b"],
                "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"},
                "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 4},
            }),
            status: "RUNNING",
            status_message: None,
            conditions: Vec::new(),
        },
    );
    // Not linked: no pods to judge.
    assert_eq!(flex_demand_fits(&inner, &pool), None);
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let pending_flex: Arc<Mutex<Vec<BTreeMap<String, String>>>> = Arc::default();
    inner.links.insert(
        cluster.to_string(),
        Arc::new(Linked {
            cfg: GkeLink::new("/nonexistent/kubeconfig", "/nonexistent/kubemark"),
            endpoint: "127.0.0.1:9".into(),
            ca_certificate: String::new(),
            client,
            pending_flex: Arc::clone(&pending_flex),
        }),
    );
    let selector = |topology: &str| {
        BTreeMap::from([
            (FLEX_START_LABEL.to_string(), "true".to_string()),
            (
                "cloud.google.com/gke-tpu-accelerator".to_string(),
                "tpu-v6e-slice".to_string(),
            ),
            (
                "cloud.google.com/gke-tpu-topology".to_string(),
                topology.to_string(),
            ),
        ])
    };
    // Nobody waits: no scale-up.
    assert_eq!(flex_demand_fits(&inner, &pool), Some(false));
    // A pod for another topology does not fit.
    *pending_flex.lock().unwrap() = vec![selector("2x2")];
    assert_eq!(flex_demand_fits(&inner, &pool), Some(false));
    // One that fits does.
    pending_flex.lock().unwrap().push(selector("4x4"));
    assert_eq!(flex_demand_fits(&inner, &pool), Some(true));
}

#[test]
fn flex_start_pools_get_their_label_and_scale_up_whole_queued_ones_never() {
    use crate::gke::{Capacity, capacity_of};
    let c = ClusterRef::parse("projects/p/locations/us-central1/clusters/train").unwrap();
    // Multi-host: the per-zone maximum, the whole slice at once.
    let mut flex = json!({
        "name": "f",
        "config": {"machineType": "ct6e-standard-4t", "flexStart": true},
        "initialNodeCount": 0,
        "locations": ["us-central1-b"],
        "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"},
        "autoscaling": {"enabled": true, "minNodeCount": 0, "maxNodeCount": 4},
    });
    assert_eq!(capacity_of(&flex), Capacity::FlexStart(4));
    let shape = node_shape(&inner(), &c, &flex, "us-central1-b");
    assert_eq!(shape.labels["cloud.google.com/gke-flex-start"], "true");
    // Single-host: the total maximum.
    let single = json!({
        "config": {"machineType": "ct6e-standard-4t", "flexStart": true},
        "initialNodeCount": 0,
        "locations": ["us-central1-b"],
        "autoscaling": {"enabled": true, "totalMinNodeCount": 0, "totalMaxNodeCount": 1},
    });
    assert_eq!(capacity_of(&single), Capacity::FlexStart(1));
    // Queued provisioning: only a ProvisioningRequest brings nodes.
    flex["queuedProvisioning"] = json!({"enabled": true});
    assert_eq!(capacity_of(&flex), Capacity::Queued);
    // Anything else: its initial count.
    let fixed = json!({"config": {"machineType": "ct6e-standard-4t"}, "initialNodeCount": 2});
    assert_eq!(capacity_of(&fixed), Capacity::Initial(2));
    let shape = node_shape(&inner(), &c, &fixed, "us-central1-b");
    assert!(!shape.labels.contains_key("cloud.google.com/gke-flex-start"));
}

#[test]
fn gke_taint_effects_map_to_kubernetes_effects() {
    assert_eq!(k8s_effect("NO_SCHEDULE"), "NoSchedule");
    assert_eq!(k8s_effect("PREFER_NO_SCHEDULE"), "PreferNoSchedule");
    assert_eq!(k8s_effect("NO_EXECUTE"), "NoExecute");
}
