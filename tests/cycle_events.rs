//! The reconcile cycle's decisions (held, refused, deferred) are `tracing`
//! events that JSON logs carry, with their fields, under the `cycle` span;
//! and the `cycle finished` line names the outcome. In-process (the library
//! cycle on the recording fake cloud), with no binary spawned. A test binary
//! of its own with one test: the subscriber is the process's global one,
//! so no other test's thread races the callsites' interest cache.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slicectl::apply::{ApplyOptions, Progress};
use slicectl::cloud::Cloud;
use slicectl::cloud::fake::{FakeCloud, Fault};
use slicectl::controller::capacity::{CapacityTracker, RetryPolicy};
use slicectl::cycle::{Connect, CycleEnd, CycleSink, CycleState, DirSource, run_cycle};
use slicectl::engine::ReconcileOptions;
use slicectl::plan::{PlanMode, PlanOptions};
use slicectl::resource::ClusterRef;
use slicectl::resource::gke::NodePool;
use slicectl::spec::Fleet;
use slicectl::watch::{LOG_TARGET, Trigger};

const TARGET: &str = "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: t\nspec:\n  project: unit-project\n  zone: us-central1-b\n  ownerId: unit\n  gke:\n    location: us-central1\n    name: c\n";

const GCE_TARGET: &str = "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: kubeadm\nspec:\n  project: unit-project\n  zone: us-central1-b\n  ownerId: unit\n  gce:\n    controlPlaneEndpoint: 10.128.0.2:6443\n    kubeApi:\n      kubeconfig: /nonexistent/kubeconfig\n  nodeDefaults:\n    serviceAccount: tpu@unit-project.iam.gserviceaccount.com\n";

const GCE_SLICE: &str = "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: vm\nspec:\n  target: kubeadm\n  backend: gce\n  accelerator: tpu-v6e-slice\n  topology: 2x2\n  gce:\n    image: projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-v6e\n    bootstrap: {kubeadm: {kubernetesVersion: \"1.35\"}}\n";

fn slice(name: &str, topology: &str) -> String {
    format!(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: {name}\nspec:\n  target: t\n  backend: gke\n  accelerator: tpu-v6e-slice\n  topology: {topology}\n"
    )
}

struct FakeConnect(Cloud);

impl Connect for FakeConnect {
    async fn cloud(&mut self, _: &Fleet) -> anyhow::Result<Cloud> {
        Ok(self.0.clone())
    }
}

struct Quiet;
impl Progress for Quiet {
    fn started(&self, _: &str, _: &str) {}
    fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
}

struct Silent;
impl CycleSink for Silent {
    fn progress(&mut self) -> Arc<dyn Progress> {
        Arc::new(Quiet)
    }
    async fn finished(&mut self, _: &CycleEnd<'_>) {}
}

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn held_refused_and_deferred_decisions_are_json_events() {
    let buf = Buf::default();
    let w = buf.clone();
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(tracing_subscriber::EnvFilter::new(format!(
            "warn,{LOG_TARGET}=info"
        )))
        .with_writer(move || w.clone())
        .init();

    let fake = FakeCloud::new();
    // Held: big's create stocks out, and the next cycle is inside its
    // backoff (big's offering differs from b's: the cache is per offering).
    fake.fail_next("create_node_pool", Fault::Stockout);
    // Refused: b's pool name is taken by a pool slicectl does not own.
    fake.seed_pool(
        &ClusterRef {
            project: "unit-project".into(),
            location: "us-central1".into(),
            name: "c".into(),
        },
        NodePool {
            name: "b-0".into(),
            ..Default::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("t.yaml", TARGET.to_string()),
        ("big.yaml", slice("big", "2x2")),
        ("b.yaml", slice("b", "1x1")),
        ("k.yaml", GCE_TARGET.to_string()),
        ("vm.yaml", GCE_SLICE.to_string()),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let source = DirSource {
        dir: dir.path().to_path_buf(),
    };
    let opts = ReconcileOptions {
        mode: PlanMode::Apply,
        plan: PlanOptions::default(),
        apply: ApplyOptions::default(),
    };
    let mut state = CycleState::new(opts, Arc::new(AtomicBool::new(false))).with_capacity(
        CapacityTracker::new(RetryPolicy {
            cache_ttl: Duration::from_secs(60),
            initial: Duration::from_secs(60),
            max: Duration::from_secs(600),
        }),
    );
    // Deferred: under --sim a self-managed cluster is never reached.
    let mut conn = FakeConnect(Cloud {
        sim_defers_kube: true,
        unread_idle: false,
        ..fake.cloud()
    });
    let mut codes = Vec::new();
    for trigger in [Trigger::Start, Trigger::Resync] {
        let o = run_cycle(&mut state, &source, &mut conn, &mut Silent, trigger).await;
        codes.push(o.code());
    }
    assert_eq!(codes, ["refused", "refused"]);

    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let all = |decision: &str| -> Vec<&serde_json::Value> {
        events
            .iter()
            .filter(|e| e["fields"]["decision"] == decision)
            .collect()
    };
    // big, and vm (a GCE slice of the same offering) with it.
    let held = all("held");
    let held_slices: Vec<&str> = held
        .iter()
        .map(|e| e["fields"]["slice"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(held_slices, ["big", "vm"], "{text}");
    assert!(
        held.iter().all(|e| e["span"]["trigger"] == "resync"),
        "only in the second cycle\n{text}"
    );
    assert_eq!(held[0]["fields"]["target"], "t");
    assert_eq!(held[0]["fields"]["code"], "stockout");
    assert_eq!(held[0]["span"]["name"], "cycle");
    assert_eq!(held[1]["fields"]["target"], "kubeadm");
    let refused = all("refused");
    assert_eq!(refused.len(), 2, "once a cycle\n{text}");
    assert_eq!(refused[0]["fields"]["slice"], "b");
    assert_eq!(refused[0]["fields"]["target"], "t");
    assert_eq!(refused[0]["fields"]["code"], "name_taken");
    assert_eq!(refused[0]["level"], "WARN");
    // The self-managed cluster's API and the GKE cluster's API (its Nodes:
    // readiness), once a cycle each.
    let deferred = all("deferred");
    assert_eq!(deferred.len(), 4, "once a cycle each\n{text}");
    assert_eq!(deferred[0]["fields"]["target"], "kubeadm");
    assert_eq!(deferred[0]["fields"]["code"], "not_observed");
    assert_eq!(deferred[1]["fields"]["target"], "t");
    assert_eq!(deferred[1]["fields"]["code"], "not_observed");
    let finished: BTreeMap<String, String> = events
        .iter()
        .filter(|e| e["fields"]["message"] == "cycle finished")
        .map(|e| {
            (
                e["fields"]["trigger"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                e["fields"]["outcome"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        finished,
        BTreeMap::from([
            ("resync".to_string(), "refused".to_string()),
            ("start".to_string(), "refused".to_string()),
        ])
    );
}
