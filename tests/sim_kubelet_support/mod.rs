//! Shared by tests/controlplane/bootstrap_script.rs and tests/controlplane/sim_kubelet.rs: the real
//! control plane (`scripts/k8s-testenv.sh up`), bootstrap tokens minted in
//! it, and a simulated VM's metadata.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Config};
use slicectl::kube::{BootstrapToken, TokenSpec, ca_cert_hash, config_from_kubeconfig};
use slicectl_sim::metadata::VmMetadata;

pub const WAIT: Duration = Duration::from_secs(60);

fn hint() -> &'static str {
    "start the test control plane first: scripts/k8s-testbin.sh && \
     eval \"$(scripts/k8s-testenv.sh up)\" (or run scripts/test.sh)"
}

pub struct Cluster {
    pub client: Client,
    pub config: Config,
}

/// The test control plane; panics (fails the test) when it is not there.
pub async fn cluster() -> Cluster {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig = match std::env::var_os("SLICECTL_TEST_KUBECONFIG") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!("SLICECTL_TEST_KUBECONFIG is not set; {}", hint()),
    };
    let config = config_from_kubeconfig(&kubeconfig, None)
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", hint()));
    let client = Client::try_from(config.clone()).expect("client");
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => panic!("API server unreachable: {e}; {}", hint()),
        Err(_) => panic!("API server did not answer in 10s; {}", hint()),
    }
    Cluster { client, config }
}

pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// `HOST:PORT` of the API server, what slicectl writes as
/// `kubeadm-api-endpoint`.
pub fn api_endpoint(config: &Config) -> String {
    config
        .cluster_url
        .authority()
        .expect("cluster URL authority")
        .as_str()
        .to_owned()
}

/// The CA pin slicectl computes, from `kube-system/kube-root-ca.crt`.
pub async fn ca_hash(client: &Client) -> String {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .get("kube-root-ca.crt")
        .await
        .expect("get kube-root-ca.crt");
    let pem = cm
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .expect("ca.crt");
    ca_cert_hash(&pem).expect("CA hash")
}

/// Creates a node-join bootstrap token Secret expiring at `expiration`.
pub async fn mint_token(client: &Client, expiration: jiff::Timestamp) -> BootstrapToken {
    let token = BootstrapToken::generate();
    Api::<Secret>::namespaced(client.clone(), "kube-system")
        .create(
            &PostParams::default(),
            &token.to_secret(&TokenSpec::node_join(expiration)),
        )
        .await
        .expect("create bootstrap token secret");
    token
}

pub async fn delete_token(client: &Client, token: &BootstrapToken) {
    let _ = Api::<Secret>::namespaced(client.clone(), "kube-system")
        .delete(&token.secret_name(), &DeleteParams::default())
        .await;
}

pub fn in_one_hour() -> jiff::Timestamp {
    jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)
}

/// Waits until the bootstrap signer has signed cluster-info for the token.
pub async fn wait_for_signature(client: &Client, token: &BootstrapToken) {
    let key = format!("jws-kubeconfig-{}", token.id());
    let api = Api::<ConfigMap>::namespaced(client.clone(), "kube-public");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let cm = api.get("cluster-info").await.expect("get cluster-info");
        if cm.data.unwrap_or_default().contains_key(&key) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "bootstrap signer did not sign cluster-info for {key}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A VM's metadata with the instance template's keys.
pub fn vm_metadata(name: &str, template: &[(&str, &str)]) -> VmMetadata {
    VmMetadata {
        project_id: "example-project".to_owned(),
        numeric_project_id: "123456789012".to_owned(),
        zone: "us-central1-a".to_owned(),
        name: name.to_owned(),
        id: "8123456789012345678".to_owned(),
        machine_type: "ct5p-hightpu-4t".to_owned(),
        attributes: template
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
    }
}

/// The real kubeadm binary (`SLICECTL_TEST_KUBEADM`, else
/// `scripts/k8s-testbin.sh dir`).
pub fn kubeadm_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("SLICECTL_TEST_KUBEADM").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/k8s-testbin.sh");
    let out = std::process::Command::new(&script)
        .arg("dir")
        .output()
        .expect("run scripts/k8s-testbin.sh dir");
    let dir = String::from_utf8(out.stdout).expect("utf8");
    let kubeadm = PathBuf::from(dir.trim()).join("kubeadm");
    assert!(
        kubeadm.is_file(),
        "{} missing; run scripts/k8s-testbin.sh",
        kubeadm.display()
    );
    kubeadm
}
