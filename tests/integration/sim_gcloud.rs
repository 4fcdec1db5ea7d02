//! The installed `gcloud` CLI — a client nobody here wrote — reads back what
//! was created through the simulator's HTTP API, and its own create/delete
//! requests pass the simulator's discovery validation.

use crate::sim_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sim_support::{CLUSTER, Client, GKE, start, tpu_pool};
use slicectl_sim::FaultConfig;

/// Runs gcloud against the simulator; returns stdout, panics with stderr on failure.
async fn gcloud(base: &str, config_dir: &Path, args: &[&str]) -> String {
    let which = Command::new("gcloud").arg("--version").output();
    if which.is_err() {
        panic!(
            "the gcloud CLI is not installed or not on PATH; this test drives the real gcloud \
             against the simulator and cannot run without it (install the Google Cloud SDK)"
        );
    }
    let mut cmd = Command::new("gcloud");
    cmd.args(args)
        .envs(crate::common::gcloud_env(base, config_dir, "proj1"));
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("gcloud runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "gcloud {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    stdout
}

fn names(list: &Value) -> Vec<String> {
    let mut n: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_reads_back_and_drives_the_simulator() {
    let sim = start(Duration::from_millis(200), 1, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let base = sim.base_url();
    let cfg = tempfile::tempdir().unwrap();

    // slicectl-style creates through the HTTP API.
    for name in ["tpu-a", "tpu-b"] {
        let (s, op) = c
            .post(&format!("{GKE}/clusters/c1/nodePools"), tpu_pool(name))
            .await;
        assert_eq!(s, 200, "{op}");
        let done = c.wait_gke(&op).await;
        assert!(done.get("error").is_none(), "{done}");
    }

    let loc = [
        "--cluster",
        "c1",
        "--location",
        "us-central2",
        "--format=json",
    ];
    let mut args = vec!["container", "node-pools", "list"];
    args.extend(loc);
    let list: Value = serde_json::from_str(&gcloud(&base, cfg.path(), &args).await).unwrap();
    assert_eq!(names(&list), ["tpu-a", "tpu-b"]);
    for p in list.as_array().unwrap() {
        assert_eq!(p["config"]["machineType"], "ct4p-hightpu-4t");
        assert_eq!(p["placementPolicy"]["type"], "COMPACT");
        assert_eq!(p["placementPolicy"]["tpuTopology"], "4x4x4");
        assert_eq!(p["config"]["labels"]["team"], "ml");
        assert_eq!(p["status"], "RUNNING");
    }

    let mut args = vec!["container", "node-pools", "describe", "tpu-a"];
    args.extend(loc);
    let desc: Value = serde_json::from_str(&gcloud(&base, cfg.path(), &args).await).unwrap();
    assert_eq!(desc["name"], "tpu-a");
    assert_eq!(desc["initialNodeCount"], 16);
    assert_eq!(desc["config"]["labels"]["slicectl.dev/slice"], "tpu-a");
    assert_eq!(desc["config"]["taints"][0]["effect"], "NO_SCHEDULE");
    assert_eq!(desc["maxPodsConstraint"]["maxPodsPerNode"], "32");

    // `clusters list` asks for location `-` (every zone and region), the
    // call slicectl makes to find pools a moved Target left behind.
    let args = ["container", "clusters", "list", "--format=json"];
    let list: Value = serde_json::from_str(&gcloud(&base, cfg.path(), &args).await).unwrap();
    assert_eq!(names(&list), ["c1"], "{list}");
    assert_eq!(list[0]["location"], "us-central2", "{list}");

    // gcloud's own create request passes validation and completes.
    let args = [
        "container",
        "node-pools",
        "create",
        "gc-pool",
        "--cluster=c1",
        "--location=us-central2",
        "--node-locations=us-central2-b",
        "--machine-type=ct4p-hightpu-4t",
        "--tpu-topology=4x4x4",
        "--placement-type=COMPACT",
        "--num-nodes=16",
        "--format=json",
    ];
    gcloud(&base, cfg.path(), &args).await;
    let (s, pool) = c.get(&format!("{GKE}/clusters/c1/nodePools/gc-pool")).await;
    assert_eq!(s, 200, "{pool}");
    assert_eq!(pool["placementPolicy"]["tpuTopology"], "4x4x4");
    assert_eq!(pool["initialNodeCount"], 16);
    assert_eq!(pool["status"], "RUNNING");

    // Compute workload policy: create, describe, list, delete.
    let args = [
        "compute",
        "resource-policies",
        "create",
        "workload-policy",
        "wp1",
        "--type=HIGH_THROUGHPUT",
        "--accelerator-topology=4x4x4",
        "--region=us-central2",
    ];
    gcloud(&base, cfg.path(), &args).await;
    let args = [
        "compute",
        "resource-policies",
        "describe",
        "wp1",
        "--region=us-central2",
        "--format=json",
    ];
    let wp: Value = serde_json::from_str(&gcloud(&base, cfg.path(), &args).await).unwrap();
    assert_eq!(wp["name"], "wp1");
    assert_eq!(wp["status"], "READY");
    assert_eq!(wp["workloadPolicy"]["type"], "HIGH_THROUGHPUT");
    assert_eq!(wp["workloadPolicy"]["acceleratorTopology"], "4x4x4");
    assert_eq!(
        wp["workloadPolicy"]["acceleratorTopologyMode"],
        "AUTO_CONNECT"
    );
    let args = ["compute", "resource-policies", "list", "--format=json"];
    let list: Value = serde_json::from_str(&gcloud(&base, cfg.path(), &args).await).unwrap();
    assert_eq!(names(&list), ["wp1"]);
    let args = [
        "compute",
        "resource-policies",
        "delete",
        "wp1",
        "--region=us-central2",
        "--quiet",
    ];
    gcloud(&base, cfg.path(), &args).await;
    let (s, _) = c
        .get("/compute/v1/projects/proj1/regions/us-central2/resourcePolicies/wp1")
        .await;
    assert_eq!(s, 404);

    let stats = sim.stats();
    assert_eq!(
        stats.by_method["container.projects.locations.clusters.nodePools.create"],
        3
    );
    assert_eq!(stats.by_method["compute.resourcePolicies.insert"], 1);
    assert_eq!(stats.by_method["compute.resourcePolicies.delete"], 1);
    assert!(CLUSTER.ends_with("/c1"));
    sim.shutdown().await;
}

/// gcloud reads back a self-managed GCE slice (template, BULK MIG, VMs)
/// made through the HTTP API, adds metadata with its own fingerprint round
/// trip, lists a stocked-out MIG's errors, and deletes the MIG and template.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_reads_back_instance_templates_migs_and_instances() {
    use serde_json::json;
    let sim = start(Duration::from_millis(100), 2, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let base = sim.base_url();
    let cfg = tempfile::tempdir().unwrap();
    let compute = "/compute/v1/projects/proj1";
    let zone = "us-central2-b";
    let wait = |op: Value| {
        let c = &c;
        async move {
            let link = op["selfLink"].as_str().unwrap().to_string();
            let path = link.strip_prefix(&c.base).unwrap().to_string();
            loop {
                let (s, done) = c.post(&format!("{path}/wait"), json!(null)).await;
                assert_eq!(s, 200, "{done}");
                if done["status"] == "DONE" {
                    assert!(done.get("error").is_none(), "{done}");
                    return;
                }
            }
        }
    };
    let (s, op) = c
        .post(
            &format!("{compute}/regions/us-central2/resourcePolicies"),
            json!({"name": "gwp", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "2x2x4"}}),
        )
        .await;
    assert_eq!(s, 200, "{op}");
    wait(op).await;
    let (s, op) = c
        .post(
            &format!("{compute}/global/instanceTemplates"),
            json!({"name": "gt", "properties": {
                "machineType": "ct4p-hightpu-4t",
                "labels": {"managed-by": "slicectl"},
                "metadata": {"items": [{"key": "startup-script", "value": "echo hi"}]},
                // BULK takes only reservation-bound or flex-start templates.
                "scheduling": {"onHostMaintenance": "TERMINATE", "provisioningModel": "FLEX_START",
                               "instanceTerminationAction": "DELETE", "maxRunDuration": {"seconds": "86400"}},
                "networkInterfaces": [{"subnetwork": "regions/us-central2/subnetworks/default"}]}}),
        )
        .await;
    assert_eq!(s, 200, "{op}");
    wait(op).await;
    let mig_body = |name: &str| {
        json!({"name": name, "instanceTemplate": "projects/proj1/global/instanceTemplates/gt",
               "targetSize": 4, "targetSizePolicy": {"mode": "BULK"},
               "resourcePolicies": {"workloadPolicy": "gwp"}})
    };
    let (s, op) = c
        .post(
            &format!("{compute}/zones/{zone}/instanceGroupManagers"),
            mig_body("gm"),
        )
        .await;
    assert_eq!(s, 200, "{op}");
    wait(op).await;
    let mut running = false;
    for _ in 0..200 {
        let (_, l) = c.get(&format!("{compute}/zones/{zone}/instances")).await;
        let items = l["items"].as_array().cloned().unwrap_or_default();
        if items.len() == 4 && items.iter().all(|v| v["status"] == "RUNNING") {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(running, "the MIG's VMs never ran");

    let t: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &[
                "compute",
                "instance-templates",
                "describe",
                "gt",
                "--format=json",
            ],
        )
        .await,
    )
    .unwrap();
    assert_eq!(t["name"], "gt");
    assert_eq!(t["properties"]["machineType"], "ct4p-hightpu-4t");
    assert_eq!(
        t["properties"]["scheduling"]["provisioningModel"],
        "FLEX_START"
    );

    let zone_flag = format!("--zone={zone}");
    let m: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &[
                "compute",
                "instance-groups",
                "managed",
                "describe",
                "gm",
                &zone_flag,
                "--format=json",
            ],
        )
        .await,
    )
    .unwrap();
    assert_eq!(m["name"], "gm");
    assert_eq!(m["targetSize"], 4);
    assert_eq!(m["status"]["isStable"], true, "{m}");
    assert!(
        m["resourcePolicies"]["workloadPolicy"]
            .as_str()
            .unwrap()
            .ends_with("/resourcePolicies/gwp")
    );

    let listed: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &[
                "compute",
                "instance-groups",
                "managed",
                "list-instances",
                "gm",
                &zone_flag,
                "--format=json",
            ],
        )
        .await,
    )
    .unwrap();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 4, "{listed:?}");
    assert!(
        listed.iter().all(|i| i["instanceStatus"] == "RUNNING"),
        "{listed:?}"
    );

    let zones_flag = format!("--zones={zone}");
    let vms: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &["compute", "instances", "list", &zones_flag, "--format=json"],
        )
        .await,
    )
    .unwrap();
    let mut vm_names = names(&vms);
    assert_eq!(vm_names.len(), 4);
    assert!(
        vm_names
            .iter()
            .all(|n| n.starts_with("gm-") && n.len() == 7),
        "{vm_names:?}"
    );
    // Without --zones gcloud uses aggregatedList.
    let all: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &["compute", "instances", "list", "--format=json"],
        )
        .await,
    )
    .unwrap();
    assert_eq!(names(&all), vm_names);

    // gcloud's list commands read every kind through aggregatedList
    // (`items` keyed by scope, NO_RESULTS_ON_PAGE warnings for the rest).
    let list = |args: &'static [&'static str]| {
        let cfg = cfg.path().to_path_buf();
        let base = base.clone();
        async move {
            let out = gcloud(&base, &cfg, args).await;
            serde_json::from_str::<Value>(&out).unwrap()
        }
    };
    let templates = list(&["compute", "instance-templates", "list", "--format=json"]).await;
    assert_eq!(names(&templates), ["gt"]);
    assert_eq!(templates[0]["properties"]["machineType"], "ct4p-hightpu-4t");
    let migs = list(&[
        "compute",
        "instance-groups",
        "managed",
        "list",
        "--format=json",
    ])
    .await;
    assert_eq!(names(&migs), ["gm"]);
    assert!(
        migs[0]["zone"]
            .as_str()
            .unwrap()
            .ends_with("/zones/us-central2-b"),
        "{migs}"
    );
    assert_eq!(migs[0]["targetSize"], 4);
    let policies = list(&["compute", "resource-policies", "list", "--format=json"]).await;
    assert_eq!(names(&policies), ["gwp"]);
    let ops = list(&["compute", "operations", "list", "--format=json"]).await;
    let ops = ops.as_array().unwrap();
    assert_eq!(ops.len(), 3, "{ops:?}");
    assert!(ops.iter().all(|o| o["status"] == "DONE"), "{ops:?}");
    // --filter (gcloud 528 filters these lists itself: its requests carry
    // no `filter`, as --log-http shows).
    let one = list(&[
        "compute",
        "instances",
        "list",
        "--filter=status=RUNNING",
        "--format=json",
    ])
    .await;
    assert_eq!(names(&one).len(), 4, "{one}");
    let none = list(&[
        "compute",
        "instance-templates",
        "list",
        "--filter=name=nothing",
        "--format=json",
    ])
    .await;
    assert_eq!(none, serde_json::json!([]));
    // gcloud's table output (the default format) names what it found.
    let table = gcloud(
        &base,
        cfg.path(),
        &["compute", "instance-groups", "managed", "list"],
    )
    .await;
    assert!(
        table.contains("gm") && table.contains("us-central2-b"),
        "{table}"
    );

    // gcloud's add-metadata: GET the instance, setMetadata with its fingerprint.
    let vm = vm_names.remove(0);
    gcloud(
        &base,
        cfg.path(),
        &[
            "compute",
            "instances",
            "add-metadata",
            &vm,
            &zone_flag,
            "--metadata=k2=v2",
        ],
    )
    .await;
    let (_, got) = c
        .get(&format!("{compute}/zones/{zone}/instances/{vm}"))
        .await;
    let items = got["metadata"]["items"].as_array().unwrap();
    assert!(
        items.iter().any(|i| i["key"] == "k2" && i["value"] == "v2"),
        "{got}"
    );
    assert!(items.iter().any(|i| i["key"] == "startup-script"), "{got}");

    // gcloud's own MIG create (GET zone, POST, wait, GET) passes validation
    // and completes. (Its template create GETs the image, which the
    // simulator does not serve, so the template is made through the API.)
    let (s, op) = c
        .post(
            &format!("{compute}/global/instanceTemplates"),
            json!({"name": "gct", "properties": {"machineType": "ct4p-hightpu-4t"}}),
        )
        .await;
    assert_eq!(s, 200, "{op}");
    wait(op).await;
    gcloud(
        &base,
        cfg.path(),
        &[
            "compute",
            "instance-groups",
            "managed",
            "create",
            "gcm",
            &zone_flag,
            "--template=gct",
            "--size=4",
            "--workload-policy=gwp",
        ],
    )
    .await;
    let (s, gcm) = c
        .get(&format!("{compute}/zones/{zone}/instanceGroupManagers/gcm"))
        .await;
    assert_eq!(s, 200, "{gcm}");
    assert_eq!(gcm["targetSize"], 4);
    assert!(
        gcm["instanceTemplate"]
            .as_str()
            .unwrap()
            .ends_with("/global/instanceTemplates/gct")
    );

    // A stocked-out BULK MIG: gcloud lists its errors.
    sim.set_faults(FaultConfig {
        stockout_zones: vec![zone.into()],
        ..FaultConfig::default()
    });
    let (s, op) = c
        .post(
            &format!("{compute}/zones/{zone}/instanceGroupManagers"),
            mig_body("gso"),
        )
        .await;
    assert_eq!(s, 200, "{op}");
    wait(op).await;
    let errors: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &[
                "compute",
                "instance-groups",
                "managed",
                "list-errors",
                "gso",
                &zone_flag,
                "--format=json",
            ],
        )
        .await,
    )
    .unwrap();
    let errors = errors.as_array().unwrap();
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert_eq!(errors[0]["error"]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED");

    // gcloud deletes the MIGs (listing autoscalers first), then the template.
    for mig in ["gm", "gso", "gcm"] {
        gcloud(
            &base,
            cfg.path(),
            &[
                "compute",
                "instance-groups",
                "managed",
                "delete",
                mig,
                &zone_flag,
                "--quiet",
            ],
        )
        .await;
    }
    let (_, l) = c.get(&format!("{compute}/zones/{zone}/instances")).await;
    assert!(l.get("items").is_none(), "{l}");
    // One at a time: a multi-resource delete goes through the batch
    // endpoint (gcp-api.md §2.7), which the simulator does not serve.
    for t in ["gt", "gct"] {
        gcloud(
            &base,
            cfg.path(),
            &["compute", "instance-templates", "delete", t, "--quiet"],
        )
        .await;
    }
    let (s, _) = c
        .get(&format!("{compute}/global/instanceTemplates/gt"))
        .await;
    assert_eq!(s, 404);
    let stats = sim.stats();
    assert_eq!(stats.by_method["compute.instanceGroupManagers.delete"], 3);
    assert!(stats.by_method["compute.autoscalers.list"] >= 1);
    sim.shutdown().await;
}

/// gcloud reads the quotas and reservations the preflight reads: `regions
/// describe` (quotas with their usage, after a Spot v4 pool of 64 chips),
/// `beta quotas info describe` (a v5p limit from Cloud Quotas),
/// `reservations describe` and `reservations list` (aggregated), with
/// `inUseCount`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_reads_quotas_and_reservations() {
    let faults = FaultConfig {
        quotas: [
            ("us-central2/PREEMPTIBLE_TPU_PODSLICE_V4".to_string(), 128),
            ("us-east5/TPU_V5P".to_string(), 64),
        ]
        .into(),
        reservations: [(
            "projects/proj1/zones/us-central2-b/reservations/r1".to_string(),
            8,
        )]
        .into(),
        ..FaultConfig::default()
    };
    let sim = start(Duration::from_millis(10), 1, faults).await;
    let c = Client::new(&sim);
    let base = sim.base_url();
    let cfg = tempfile::tempdir().unwrap();
    let (s, op) = c
        .post(&format!("{GKE}/clusters/c1/nodePools"), tpu_pool("tpu-a"))
        .await;
    assert_eq!(s, 200, "{op}");
    c.wait_gke(&op).await;
    let region: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &[
                "compute",
                "regions",
                "describe",
                "us-central2",
                "--format=json",
            ],
        )
        .await,
    )
    .unwrap();
    assert_eq!(
        region["quotas"],
        serde_json::json!([{"metric": "PREEMPTIBLE_TPU_PODSLICE_V4", "limit": 128.0, "usage": 64.0}])
    );
    let info: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &[
                "beta",
                "quotas",
                "info",
                "describe",
                "TPU-V5P-per-project-region",
                "--service=compute.googleapis.com",
                "--project=proj1",
                "--format=json",
            ],
        )
        .await,
    )
    .unwrap();
    assert_eq!(info["metric"], "compute.googleapis.com/tpu_v5p", "{info:#}");
    // `quotas info list` follows `nextPageToken` page by page.
    let list: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &[
                "beta",
                "quotas",
                "info",
                "list",
                "--service=compute.googleapis.com",
                "--project=proj1",
                "--page-size=2",
                "--format=json",
            ],
        )
        .await,
    )
    .unwrap();
    let ids: Vec<&str> = list
        .as_array()
        .map(|l| l.iter().filter_map(|q| q["quotaId"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids.len(), 5, "{list:#}");
    assert!(
        ids.contains(&"PREEMPTIBLE-TPU7X-per-project-region"),
        "{ids:?}"
    );
    assert!(
        sim.stats().by_method["cloudquotas.projects.locations.services.quotaInfos.list"] >= 3,
        "{:?}",
        sim.stats()
    );
    assert_eq!(
        info["dimensionsInfos"][0],
        serde_json::json!({"applicableLocations": ["us-east5"], "details": {"value": "64"},
                           "dimensions": {"region": "us-east5"}}),
        "{info:#}"
    );
    let r: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &[
                "compute",
                "reservations",
                "describe",
                "r1",
                "--zone",
                "us-central2-b",
                "--format=json",
            ],
        )
        .await,
    )
    .unwrap();
    assert_eq!(r["specificReservation"]["count"], "8");
    assert_eq!(r["specificReservation"]["inUseCount"], "0");
    let list: Value = serde_json::from_str(
        &gcloud(
            &base,
            cfg.path(),
            &["compute", "reservations", "list", "--format=json"],
        )
        .await,
    )
    .unwrap();
    assert_eq!(names(&list), ["r1"]);
    sim.shutdown().await;
}
