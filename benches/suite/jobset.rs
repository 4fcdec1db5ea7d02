//! The workload source under the controller: a pending JobSet on the real
//! test control plane (kube-scheduler, the JobSet controller v0.12.0,
//! hollow TPU nodes of a simulated GKE cluster linked to it). Two rows:
//! the time from the leader pod's `PodScheduled=False/Unschedulable`
//! condition (its `lastTransitionTime`) to the node-pool create request
//! reaching the simulator, against the brief's 2 s; and the time from the
//! JobSet's end (its terminal condition's time + `gracePeriod`) to the
//! delete request. Without a control plane (`SLICECTL_TEST_KUBECONFIG`,
//! `SLICECTL_TEST_KUBEMARK`, `SLICECTL_TEST_JOBSET`) the rows say
//! *skipped*.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use slicectl_sim::link::GkeLink;
use slicectl_sim::{FaultConfig, SimConfig, Simulator};

use super::{Bench, SLICECTL, secs};

const CREATE_ROW: &str = "jobset: Unschedulable leader → create request";
const DELETE_ROW: &str = "jobset: end + grace → delete request";
/// The brief's target for the create request (§8).
const CREATE_TARGET: Duration = Duration::from_secs(2);
/// The Target's `gracePeriod`.
const GRACE: Duration = Duration::from_secs(2);
/// The release's target: the cycle that keeps a slice for its grace asks
/// for the next at the grace's end (docs/workloads.md), so what is left is
/// that cycle, and up to a second the Kubernetes time read here loses.
const DELETE_TARGET: Duration = Duration::from_secs(2);
/// The controller's default `--settle`: a `--dir` controller holds every step
/// that destroys capacity until its spec files have been unchanged this
/// long, counted from its first read at start (docs/controller.md). The
/// JobSet is ended only once that is over, so that the release row times
/// the grace and the cycle, not the start-up hold.
const SETTLE: Duration = Duration::from_secs(10);
const CLUSTER: &str = "projects/bench-project/locations/us-central1/clusters/bench-js";
const WAIT: Duration = Duration::from_secs(90);
const POOL_CREATE: &str = "container.projects.locations.clusters.nodePools.create";
const POOL_DELETE: &str = "container.projects.locations.clusters.nodePools.delete";

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn skip_both(b: &mut Bench, why: &str) {
    b.report.skipped(CREATE_ROW, why);
    b.report.skipped(DELETE_ROW, why);
}

/// A Kubernetes time (whole seconds) as a system time.
fn system_time(t: jiff::Timestamp) -> Option<SystemTime> {
    let since = Duration::try_from(t.duration_since(jiff::Timestamp::UNIX_EPOCH)).ok()?;
    Some(SystemTime::UNIX_EPOCH + since)
}

/// A `metav1.Time` in JSON (`"2026-11-26T12:00:01Z"`) as a system time.
fn k8s_time(v: &Value) -> Option<SystemTime> {
    system_time(v.as_str()?.parse().ok()?)
}

/// How long after `from` `to` came (zero when it came first).
fn after(to: SystemTime, from: SystemTime) -> Duration {
    to.duration_since(from).unwrap_or_default()
}

/// Polls the in-process simulator's counter of `method` (no request, no
/// lock held long) until it is past `before`; the moment it was seen.
async fn request_seen(
    sim: &slicectl_sim::SimHandle,
    method: &str,
    before: u64,
) -> Option<SystemTime> {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if sim.stats().by_method.get(method).copied().unwrap_or(0) > before {
            return Some(SystemTime::now());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

fn jobsets(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "jobset.x-k8s.io",
        "v1alpha2",
        "JobSet",
    ));
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// One v6e 2x2 Job of one pod (4 chips), kept to this run's Nodes by
/// `bench-run: RUN`; the fields JobSet's webhook would default are set
/// (the test plane runs it without webhooks).
fn jobset(name: &str, run: &str) -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "successPolicy": {"operator": "All"},
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
            "network": {"enableDNSHostnames": true, "publishNotReadyAddresses": true},
            "replicatedJobs": [{
                "name": "slice",
                "replicas": 1,
                "template": {"spec": {
                    "completionMode": "Indexed",
                    "parallelism": 1,
                    "completions": 1,
                    "backoffLimit": 0,
                    "podReplacementPolicy": "Failed",
                    "template": {"spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": {
                            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                            "cloud.google.com/gke-tpu-topology": "2x2",
                            "bench-run": run,
                        },
                        "tolerations": [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}],
                        "containers": [{
                            "name": "train",
                            "image": "registry.invalid/train:1",
                            "resources": {
                                "requests": {"google.com/tpu": "4"},
                                "limits": {"google.com/tpu": "4"},
                            },
                        }],
                    }},
                }},
            }],
        },
    })
}

fn specs(dir: &Path, kubeconfig: &Path, ns: &str, run: &str) {
    std::fs::create_dir_all(dir).expect("spec directory");
    let text = format!(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {{name: train}}\nspec:\n  project: bench-project\n  zone: us-central1-b\n  ownerId: bench-js\n  gke:\n    location: us-central1\n    name: bench-js\n    kubeApi: {{kubeconfig: {kc:?}}}\n  workloads:\n    enabled: true\n    gracePeriod: {grace}s\n    rules:\n      - namespaces: [{ns}]\n        accelerators: [tpu-v6e-slice]\n        maxChips: 8\n        labels: {{bench-run: {run}}}\n",
        kc = kubeconfig.display().to_string(),
        grace = GRACE.as_secs(),
    );
    std::fs::write(dir.join("target.yaml"), text).expect("spec file");
}

/// The leader pod's `PodScheduled=False/Unschedulable` transition time.
async fn unschedulable_at(client: &Client, ns: &str) -> Option<SystemTime> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        for p in pods.list(&ListParams::default()).await.ok()?.items {
            let cond = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
            if let Some(c) = cond
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
                && let Some(t) = &c.last_transition_time
            {
                return system_time(t.0);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The name of the JobSet's pod once it runs.
async fn running_pod(client: &Client, ns: &str) -> Option<String> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        for p in pods.list(&ListParams::default()).await.ok()?.items {
            if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
                return Some(p.name_any());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The time of the JobSet's `Failed=True` condition.
async fn failed_at(client: &Client, ns: &str, name: &str) -> Option<SystemTime> {
    let api = jobsets(client, ns);
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        let js = api.get(name).await.ok()?;
        let failed = js.data["status"]["conditions"].as_array().and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == "Failed" && c["status"] == "True")
                .cloned()
        });
        if let Some(c) = failed {
            return k8s_time(&c["lastTransitionTime"]);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// A free loopback port for the controller's probes and metrics.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(18_080)
}

/// Waits until `log` holds `needle`.
async fn logged(log: &Path, needle: &str) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if std::fs::read_to_string(log).is_ok_and(|t| t.contains(needle)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// What one run measured.
struct Measured {
    create: Option<Duration>,
    delete: Option<Duration>,
    problem: Option<String>,
}

pub(crate) fn jobset_scenario(b: &mut Bench) {
    println!(
        "\n== jobset: a pending JobSet's slice under the controller (real scheduler and JobSet controller)"
    );
    let (Some(kc), Some(kubemark)) = (
        env_path("SLICECTL_TEST_KUBECONFIG"),
        env_path("SLICECTL_TEST_KUBEMARK"),
    ) else {
        skip_both(
            b,
            "no control plane: run under eval \"$(scripts/k8s-testenv.sh up)\"",
        );
        return;
    };
    if env_path("SLICECTL_TEST_JOBSET").is_none() {
        skip_both(b, "the control plane runs no JobSet controller");
        return;
    }
    let dir = b.work.join("jobset");
    let log = b.logs.join("jobset-controller.log");
    let m = b.rt.block_on(measure(&kc, &kubemark, &dir, &log));
    if let Some(p) = &m.problem {
        b.report
            .note(format!("jobset: {p}; controller log {}", log.display()));
    }
    match m.create {
        Some(d) => {
            let ratio = d.as_secs_f64() / CREATE_TARGET.as_secs_f64();
            println!("  Unschedulable → create request: {}", secs(d));
            b.report.row(
                CREATE_ROW,
                secs(d),
                format!("target {}", secs(CREATE_TARGET)),
                Some(ratio),
                "< 1",
                Some(ratio < 1.0),
            );
        }
        None => b.report.skipped(CREATE_ROW, "no create request seen"),
    }
    match m.delete {
        Some(d) => {
            let ratio = d.as_secs_f64() / DELETE_TARGET.as_secs_f64();
            println!("  end + grace → delete request: {}", secs(d));
            b.report.row(
                DELETE_ROW,
                secs(d),
                format!(
                    "target {} (gracePeriod {})",
                    secs(DELETE_TARGET),
                    secs(GRACE)
                ),
                Some(ratio),
                "< 1",
                Some(ratio < 1.0),
            );
        }
        None => b.report.skipped(DELETE_ROW, "no delete request seen"),
    }
    b.report.note(
        "jobset: the Kubernetes times read (lastTransitionTime) have whole seconds, truncated: each \
         jobset row may read up to 1 s long",
    );
}

async fn measure(kc: &Path, kubemark: &Path, dir: &Path, log: &Path) -> Measured {
    let mut m = Measured {
        create: None,
        delete: None,
        problem: None,
    };
    let config = match slicectl::kube::config_from_kubeconfig(kc, None).await {
        Ok(c) => c,
        Err(e) => {
            m.problem = Some(format!("cannot read the kubeconfig: {e}"));
            return m;
        }
    };
    let Ok(client) = Client::try_from(config) else {
        m.problem = Some("cannot build a client".into());
        return m;
    };
    let sim = match Simulator::start(
        SimConfig {
            clusters: vec![CLUSTER.to_string()],
            operation_latency: Duration::from_millis(200),
            seed: 1,
            faults: FaultConfig::default(),
        },
        "127.0.0.1:0".parse().expect("loopback address"),
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            m.problem = Some(format!("the simulator did not start: {e:#}"));
            return m;
        }
    };
    if let Err(e) = sim.link_gke(CLUSTER, GkeLink::new(kc, kubemark)).await {
        m.problem = Some(format!("cannot link the simulated cluster: {e:#}"));
        sim.shutdown().await;
        return m;
    }
    let suffix = format!("{:08x}", rand::random::<u32>());
    let ns = format!("slicectl-bench-js-{suffix}");
    let run = format!("r{suffix}");
    let namespaces = Api::<Namespace>::all(client.clone());
    let created = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a namespace"),
        )
        .await;
    if let Err(e) = created {
        m.problem = Some(format!("cannot create namespace {ns}: {e}"));
        sim.shutdown().await;
        return m;
    }
    specs(dir, kc, &ns, &run);
    // The controller writes SliceStatus objects: their CRD, as deploy/ has it.
    let crd = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/crd-slicestatus.yaml");
    let applied = std::process::Command::new("kubectl")
        .args([
            "apply",
            "--server-side",
            "--field-manager=slicectl-bench",
            "-f",
            crd,
        ])
        .env("KUBECONFIG", kc)
        .output();
    if !applied.is_ok_and(|o| o.status.success()) {
        println!(
            "  jobset: could not apply {crd} with kubectl; the controller's SliceStatus writes fail"
        );
    }
    let out = std::fs::File::create(log).expect("controller log file");
    let child = tokio::process::Command::new(SLICECTL)
        .args([
            "controller",
            "--namespace",
            &ns,
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
            "--lease-duration",
            "4s",
            "--dir",
            &dir.display().to_string(),
            "--resync",
            "10m",
            "--trust-kubeconfig",
            &kc.display().to_string(),
        ])
        .env("SLICECTL_API_ENDPOINT", sim.base_url())
        .env("KUBECONFIG", kc)
        .env("POD_NAME", "bench-jsctl")
        .env("NO_COLOR", "1")
        .env_remove("SLICECTL_LOG")
        .env_remove("POD_NAMESPACE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(out)
        .kill_on_drop(true)
        .spawn();
    let spawned = tokio::time::Instant::now();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            m.problem = Some(format!("cannot start slicectl controller: {e}"));
            sim.shutdown().await;
            return m;
        }
    };
    m.problem = run_jobset(&client, &sim, &ns, &run, log, spawned, &mut m)
        .await
        .err();
    let _ = child.start_kill();
    let _ = child.wait().await;
    let _ = namespaces.delete(&ns, &DeleteParams::background()).await;
    sim.shutdown().await;
    m
}

async fn run_jobset(
    client: &Client,
    sim: &slicectl_sim::SimHandle,
    ns: &str,
    run: &str,
    log: &Path,
    spawned: tokio::time::Instant,
    m: &mut Measured,
) -> Result<(), String> {
    if !logged(log, "watching pending TPU pods and JobSets").await {
        return Err("the controller never watched the cluster's pods and JobSets".into());
    }
    let name = format!("bench-{run}");
    let object: DynamicObject =
        serde_json::from_value(jobset(&name, run)).map_err(|e| format!("the JobSet: {e}"))?;
    jobsets(client, ns)
        .create(&PostParams::default(), &object)
        .await
        .map_err(|e| format!("cannot create the JobSet: {e}"))?;
    let (unschedulable, create) = tokio::join!(
        unschedulable_at(client, ns),
        request_seen(sim, POOL_CREATE, 0)
    );
    let unschedulable = unschedulable.ok_or("the leader pod never became Unschedulable")?;
    let create = create.ok_or("no node pool create request")?;
    m.create = Some(after(create, unschedulable));
    let pod = running_pod(client, ns)
        .await
        .ok_or("the JobSet's pod never ran on its slice")?;
    // Past the controller's start-up settle period (see [`SETTLE`]).
    tokio::time::sleep_until(spawned + SETTLE + Duration::from_secs(1)).await;
    // Its pod fails (the hollow kubelet enforces the deadline): the
    // JobSet (backoffLimit 0, no failure policy) Fails.
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch(
            &pod,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"activeDeadlineSeconds": 1}})),
        )
        .await
        .map_err(|e| format!("cannot end the pod: {e}"))?;
    let (ended, delete) = tokio::join!(
        failed_at(client, ns, &name),
        request_seen(sim, POOL_DELETE, 0)
    );
    let ended = ended.ok_or("the JobSet never Failed")?;
    let delete = delete.ok_or("no node pool delete request")?;
    m.delete = Some(after(delete, ended + GRACE));
    Ok(())
}
