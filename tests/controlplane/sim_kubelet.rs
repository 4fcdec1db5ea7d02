//! The simulated node agent against the real control plane
//! (`scripts/k8s-testenv.sh up`): it waits for its join values in metadata,
//! does token discovery, gets a client certificate from a CSR the real
//! kube-controller-manager approves and signs, registers its own Node under
//! the real Node authorizer and NodeRestriction, and heartbeats.

use crate::sim_kubelet_support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams};
use sim_kubelet_support::*;
use slicectl::bootstrap;
use slicectl::kube::BootstrapToken;
use slicectl_sim::kubelet::{AgentConfig, spawn};
use slicectl_sim::metadata::{GuestAttributes, MetadataServer, VmMetadata};
use tokio::sync::watch;

const LABELS: &str = "cloud.google.com/gke-accelerator-count=4,cloud.google.com/gke-tpu-accelerator=tpu-v5p-slice,cloud.google.com/gke-tpu-topology=2x2x1,slicectl.dev/slice=train-a";
const TAINTS: &str = "google.com/tpu=present:NoSchedule";

struct Vm {
    _server: MetadataServer,
    tx: watch::Sender<VmMetadata>,
    guest: GuestAttributes,
    name: String,
    addr: std::net::SocketAddr,
}

async fn vm(labels: &str) -> Vm {
    let name = unique("agent");
    let md = vm_metadata(
        &name,
        &[
            (bootstrap::KUBERNETES_VERSION_KEY, "1.36"),
            (bootstrap::KUBE_LABELS_KEY, labels),
            (bootstrap::KUBE_TAINTS_KEY, TAINTS),
        ],
    );
    let (tx, rx) = watch::channel(md);
    let guest = GuestAttributes::default();
    let server = MetadataServer::start(rx, guest.clone()).await.unwrap();
    let addr = server.addr;
    Vm {
        _server: server,
        tx,
        guest,
        name,
        addr,
    }
}

impl Vm {
    fn write_join_values(&self, token: &BootstrapToken, endpoint: &str, hash: &str) {
        self.tx.send_modify(|m| {
            for (k, v) in [
                (bootstrap::JOIN_TOKEN_KEY, token.expose()),
                (bootstrap::API_ENDPOINT_KEY, endpoint.to_owned()),
                (bootstrap::CA_HASH_KEY, hash.to_owned()),
            ] {
                m.attributes.insert(k.to_owned(), v);
            }
        });
    }

    fn status(&self) -> Option<String> {
        self.guest
            .lock()
            .unwrap()
            .get(bootstrap::GUEST_BOOTSTRAP_PATH)
            .cloned()
    }

    async fn wait_status(&self, pred: impl Fn(&str) -> bool, what: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(s) = self.status().filter(|s| pred(s)) {
                return s;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "guest attribute never became {what} (is {:?})",
                self.status()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn agent_config(vm: &Vm) -> AgentConfig {
    AgentConfig {
        metadata_host: vm.addr,
        chips: 4,
        heartbeat: Duration::from_millis(500),
    }
}

async fn delete_node(client: &kube::Client, name: &str) {
    let _ = Api::<Node>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

#[tokio::test]
async fn agent_joins_and_its_node_is_ready_with_tpu_capacity() {
    let c = cluster().await;
    let vm = vm(LABELS).await;
    let agent = spawn(agent_config(&vm));
    vm.wait_status(|s| s == "waiting-for-token", "waiting-for-token")
        .await;

    let token = mint_token(&c.client, in_one_hour()).await;
    wait_for_signature(&c.client, &token).await;
    vm.write_join_values(&token, &api_endpoint(&c.config), &ca_hash(&c.client).await);
    vm.wait_status(|s| s == "joined", "joined").await;

    let nodes = Api::<Node>::all(c.client.clone());
    // kube-taints, once the node-lifecycle controller (scripts/k8s-testenv.sh
    // runs it) has lifted the `node.kubernetes.io/not-ready:NoSchedule` the
    // TaintNodesByCondition admission puts on every new Node: it does so
    // because the agent's Node is Ready and its Lease is renewed.
    let want = vec![(
        "google.com/tpu".to_owned(),
        Some("present".to_owned()),
        "NoSchedule".to_owned(),
    )];
    let deadline = tokio::time::Instant::now() + WAIT;
    let node = loop {
        let node = nodes.get(&vm.name).await.expect("the agent's Node");
        let mut taints: Vec<(String, Option<String>, String)> = node
            .spec
            .clone()
            .unwrap()
            .taints
            .unwrap_or_default()
            .into_iter()
            .map(|t| (t.key, t.value, t.effect))
            .collect();
        taints.sort();
        if taints == want {
            break node;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "taints {taints:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let spec = node.spec.clone().unwrap();
    assert_eq!(
        spec.provider_id.as_deref(),
        Some(format!("gce://example-project/us-central1-a/{}", vm.name).as_str())
    );
    let labels = node.metadata.labels.clone().unwrap_or_default();
    for (k, v) in [
        ("kubernetes.io/hostname", vm.name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("node.kubernetes.io/instance-type", "ct5p-hightpu-4t"),
        ("topology.kubernetes.io/zone", "us-central1-a"),
        ("topology.kubernetes.io/region", "us-central1"),
        ("cloud.google.com/gke-tpu-accelerator", "tpu-v5p-slice"),
        ("cloud.google.com/gke-tpu-topology", "2x2x1"),
        ("cloud.google.com/gke-accelerator-count", "4"),
        ("slicectl.dev/slice", "train-a"),
    ] {
        assert_eq!(labels.get(k).map(String::as_str), Some(v), "label {k}");
    }
    let status = node.status.clone().unwrap();
    for q in [&status.capacity, &status.allocatable] {
        assert_eq!(q.as_ref().unwrap()["google.com/tpu"].0, "4");
    }
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready condition");
    assert_eq!(ready.status, "True");
    let first_beat = ready.last_heartbeat_time.expect("heartbeat").0;

    // The node's identity came from the CSR the controller-manager signed:
    // its Node was created by system:node:<name> (NodeRestriction lets a
    // node create only itself), and the CSR is approved.
    let csrs =
        Api::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>::all(c.client.clone())
            .list(&Default::default())
            .await
            .unwrap();
    let mine = csrs
        .items
        .iter()
        .find(|csr| {
            csr.spec.username.as_deref() == Some(&token.user_name())
                && csr
                    .status
                    .as_ref()
                    .and_then(|s| s.certificate.as_ref())
                    .is_some()
        })
        .expect("a signed CSR requested by the bootstrap token");
    let approved = mine
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Approved" && c.status == "True")
        });
    assert!(approved);

    // Heartbeats: the Lease and lastHeartbeatTime move.
    let leases = Api::<Lease>::namespaced(c.client.clone(), "kube-node-lease");
    let lease = leases.get(&vm.name).await.expect("node lease");
    let renew0 = lease.spec.unwrap().renew_time.unwrap().0;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let renew1 = leases
        .get(&vm.name)
        .await
        .unwrap()
        .spec
        .unwrap()
        .renew_time
        .unwrap()
        .0;
    assert!(renew1 > renew0, "lease not renewed: {renew0} -> {renew1}");
    let beat1 = nodes
        .get(&vm.name)
        .await
        .unwrap()
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .last_heartbeat_time
        .unwrap()
        .0;
    assert!(beat1 > first_beat, "no heartbeat: {first_beat} -> {beat1}");

    // Dropping the handle stops the agent: the lease stops moving.
    drop(agent);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let stopped = leases.get(&vm.name).await.unwrap().spec.unwrap().renew_time;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        leases.get(&vm.name).await.unwrap().spec.unwrap().renew_time,
        stopped
    );

    delete_node(&c.client, &vm.name).await;
    delete_token(&c.client, &token).await;
}

#[tokio::test]
async fn agent_reports_a_wrong_ca_hash_and_recovers_when_fixed() {
    let c = cluster().await;
    let vm = vm(LABELS).await;
    let _agent = spawn(agent_config(&vm));
    let token = mint_token(&c.client, in_one_hour()).await;
    wait_for_signature(&c.client, &token).await;
    let endpoint = api_endpoint(&c.config);
    let right = ca_hash(&c.client).await;
    let wrong = format!("sha256:{}", "ab".repeat(32));
    vm.write_join_values(&token, &endpoint, &wrong);
    let status = vm.wait_status(|s| s.starts_with("failed:"), "failed").await;
    assert_eq!(
        status,
        format!(
            "failed: CA hash mismatch: the cluster CA in cluster-info is {right}, kubeadm-ca-hash pins {wrong}; retrying"
        )
    );
    assert!(
        Api::<Node>::all(c.client.clone())
            .get_opt(&vm.name)
            .await
            .unwrap()
            .is_none()
    );
    // slicectl corrects the metadata: the agent picks it up and joins.
    vm.write_join_values(&token, &endpoint, &right);
    vm.wait_status(|s| s == "joined", "joined").await;
    delete_node(&c.client, &vm.name).await;
    delete_token(&c.client, &token).await;
}

#[tokio::test]
async fn agent_reports_an_expired_token() {
    let c = cluster().await;
    let vm = vm(LABELS).await;
    let _agent = spawn(agent_config(&vm));
    let token = mint_token(
        &c.client,
        jiff::Timestamp::now() - jiff::SignedDuration::from_mins(10),
    )
    .await;
    vm.write_join_values(&token, &api_endpoint(&c.config), &ca_hash(&c.client).await);
    let status = vm.wait_status(|s| s.starts_with("failed:"), "failed").await;
    assert_eq!(
        status,
        format!(
            "failed: token rejected: cluster-info has no signature for token id {} (unknown or expired token); retrying",
            token.id()
        )
    );
    let secret = token.expose().split_once('.').unwrap().1.to_owned();
    assert!(!status.contains(&secret));
    delete_token(&c.client, &token).await;
}

#[tokio::test]
async fn agent_refuses_labels_a_node_may_not_set() {
    let c = cluster().await;
    let vm = vm("node-role.kubernetes.io/worker=,slicectl.dev/slice=x").await;
    let _agent = spawn(agent_config(&vm));
    let token = mint_token(&c.client, in_one_hour()).await;
    wait_for_signature(&c.client, &token).await;
    vm.write_join_values(&token, &api_endpoint(&c.config), &ca_hash(&c.client).await);
    let status = vm.wait_status(|s| s.starts_with("failed:"), "failed").await;
    assert_eq!(
        status,
        "failed: kube-labels: labels a node may not set on itself: node-role.kubernetes.io/worker; retrying"
    );
    delete_token(&c.client, &token).await;
}
