//! End to end, issue 35: one gate for every destructive step, where what
//! cannot be seen counts as busy. Simulated GKE clusters are linked to the
//! real test control plane, so the node pools `slicectl apply` creates
//! register kubemark hollow Nodes and the real kube-scheduler places the
//! test's pods on them; each test counts the pods killed without consent
//! (0) and the capacity lost (0).
//!
//! Case 1: a Target's `gke.name` changed (`train` → `train2`) while its
//! slice runs a pod: the old pool, in a cluster no Target names any more,
//! is held (its Pods are listed there), and deleted once the pod is done.
//! Case 2: the same cluster read without a Google token (a loopback
//! endpoint: deferred) is busy-unknown: a replacement is held.

use crate::common::*;
use crate::sim_gke_support::{
    client, link, release_pod, submit, succeed_pod, tpu_pod, unique, wait_pool_nodes, wait_running,
};

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use serde_json::Value;
use slicectl_sim::SimHandle;

const ACCELERATOR: &str = "tpu-v5-lite-podslice";
const TOPOLOGY: &str = "2x2";
const TRAIN2: &str = "projects/example-project/locations/us-central1/clusters/train2";

struct Bed {
    sim: SimHandle,
    client: Client,
    dir: tempfile::TempDir,
    ns: String,
    token: String,
    id: String,
}

impl Bed {
    async fn new(prefix: &str, seed: u64) -> Bed {
        let client = client().await;
        let sim = sim(Duration::from_millis(100), seed, Default::default()).await;
        link(&sim, CLUSTER).await;
        link(&sim, TRAIN2).await;
        let ns = crate::common::k8s::namespace(&client, prefix).await;
        let token = match std::env::var("SLICECTL_TEST_GKE_TOKEN_FILE") {
            Ok(p) if !p.is_empty() => p,
            _ => panic!(
                "SLICECTL_TEST_GKE_TOKEN_FILE is not set; {}",
                crate::common::k8s::hint()
            ),
        };
        let bed = Bed {
            sim,
            client,
            dir: tempfile::tempdir().unwrap(),
            ns,
            token,
            id: unique(prefix),
        };
        bed.target("train");
        bed.slice(false);
        bed
    }

    fn target(&self, cluster: &str) {
        put(
            self.dir.path(),
            "target.yaml",
            &format!(
                "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: gate\nspec:\n  \
                 project: example-project\n  zone: us-central1-a\n  ownerId: e2e-gate-{}\n  gke:\n    \
                 location: us-central1\n    name: {cluster}\n",
                self.id
            ),
        );
    }

    fn slice(&self, spot: bool) {
        let capacity = if spot {
            "  capacity:\n    type: spot\n"
        } else {
            ""
        };
        put(
            self.dir.path(),
            "slice.yaml",
            &format!(
                "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: {}\nspec:\n  \
                 target: gate\n  backend: gke\n  accelerator: {ACCELERATOR}\n  topology: \"{TOPOLOGY}\"\n  \
                 replicas: 1\n{capacity}",
                self.id
            ),
        );
    }

    fn pool(&self) -> String {
        format!("{}-0", self.id)
    }

    /// `slicectl VERB DIR [--access-token-file TOKEN] MORE`.
    async fn run(&self, verb: &str, token: bool, more: &[&str]) -> std::process::Output {
        let mut args = vec![verb, self.dir.path().to_str().unwrap()];
        if token {
            args.extend(["--access-token-file", self.token.as_str()]);
        }
        args.extend_from_slice(more);
        // Not `common::slicectl`: no `--unread-clusters-idle`, so a cluster
        // whose Pods are not read is busy-unknown, as for a user.
        tokio::process::Command::new(bin())
            .args(&args)
            .env("SLICECTL_API_ENDPOINT", self.sim.base_url())
            .env_remove("SLICECTL_UNREAD_CLUSTERS_IDLE")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap()
    }

    async fn plan_json(&self, token: bool) -> Value {
        let o = self
            .run("plan", token, &["--output", "json", "--detailed-exitcode"])
            .await;
        assert!(matches!(o.status.code(), Some(0 | 2)), "{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
    }

    /// A pod placed by the scheduler on the slice's one Node, running.
    async fn run_pod(&self, name: &str) -> String {
        let nodes = wait_pool_nodes(&self.client, &self.pool(), 1).await;
        let node = nodes[0].metadata.name.clone().unwrap();
        let mut p = tpu_pod(name, &self.pool(), ACCELERATOR, TOPOLOGY, 4);
        if let Some(s) = p.spec.as_mut() {
            s.termination_grace_period_seconds = Some(2);
        }
        submit(&self.client, &self.ns, &p).await;
        let running = wait_running(&self.client, &self.ns, name).await;
        let bound = running.spec.and_then(|s| s.node_name).expect("bound");
        assert_eq!(
            bound, node,
            "the scheduler placed {name} on the slice's Node"
        );
        bound
    }

    /// Pods of the test killed without consent: not running any more, or
    /// deleted, while the test did not end them.
    async fn killed(&self, names: &[&str]) -> usize {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let mut n = 0;
        for name in names {
            let p = api.get_opt(name).await.unwrap();
            let alive = p.is_some_and(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.status.and_then(|s| s.phase).as_deref() == Some("Running")
            });
            n += usize::from(!alive);
        }
        n
    }

    /// The pools named like the slice's in `cluster`.
    async fn pools_in(&self, cluster: &str) -> Vec<Value> {
        let url = format!("{}/v1/{cluster}/nodePools", self.sim.base_url());
        let v: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
        v["nodePools"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p["name"] == self.pool().as_str())
            .collect()
    }

    async fn done(self) {
        crate::common::k8s::kubectl(&["delete", "namespace", &self.ns, "--wait=false"]);
        self.sim.shutdown().await;
    }
}

fn held_codes(plan: &Value) -> Vec<String> {
    plan["held"]
        .as_array()
        .map(|h| {
            h.iter()
                .map(|h| h["code"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_target_pointed_at_another_cluster_keeps_its_busy_pool_until_the_job_ends() {
    let bed = Bed::new("gate-move", 351).await;
    let o = bed.run("apply", true, &["--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    bed.run_pod("job-0").await;
    // gke.name train → train2, default policy (whenBusy: wait).
    bed.target("train2");
    let plan = bed.plan_json(true).await;
    assert_eq!(held_codes(&plan), vec!["busy"], "{plan:#}");
    assert!(
        plan["held"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("moved")),
        "{plan:#}"
    );
    let o = bed.run("apply", true, &["--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("held [busy]"), "{}", text(&o));
    // destroy without --disrupt holds it too.
    let o = bed.run("destroy", true, &["--auto-approve"]).await;
    assert!(text(&o).contains("held [busy]"), "{}", text(&o));
    assert_eq!(
        bed.killed(&["job-0"]).await,
        0,
        "pods killed without consent"
    );
    assert_eq!(bed.pools_in(CLUSTER).await.len(), 1, "capacity lost");
    // The job ends: the next apply deletes the old pool as moved.
    succeed_pod(&bed.client, &bed.ns, "job-0").await;
    release_pod(&bed.client, &bed.ns, "job-0").await;
    let o = bed.run("apply", true, &["--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(bed.pools_in(CLUSTER).await.is_empty(), "{}", text(&o));
    assert_eq!(bed.pools_in(TRAIN2).await.len(), 1);
    bed.done().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_read_without_a_token_is_busy_unknown_and_nothing_is_replaced() {
    let bed = Bed::new("gate-unknown", 352).await;
    let o = bed.run("apply", true, &["--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    bed.run_pod("job-0").await;
    // The change that replaces the pool, planned and applied with no
    // Google token: the cluster's Kubernetes API is deferred.
    bed.slice(true);
    let plan = bed.plan_json(false).await;
    assert_eq!(held_codes(&plan), vec!["busy_unknown"], "{plan:#}");
    let o = bed.run("apply", false, &["--auto-approve"]).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("held [busy_unknown]"), "{}", text(&o));
    assert_eq!(
        bed.killed(&["job-0"]).await,
        0,
        "pods killed without consent"
    );
    let pools = bed.pools_in(CLUSTER).await;
    assert_eq!(pools.len(), 1);
    assert_ne!(pools[0]["config"]["spot"], true, "not replaced");
    // With the token the pod is seen: held as busy (whenBusy: wait).
    let plan = bed.plan_json(true).await;
    assert_eq!(held_codes(&plan), vec!["busy"], "{plan:#}");
    bed.done().await;
}
