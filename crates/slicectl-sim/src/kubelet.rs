//! A simulated VM's node agent: what the startup script, `kubeadm join` and
//! the kubelet do, against a real Kubernetes API server, through HTTP only.
//!
//! 1. Long-poll the VM's metadata server (`instance/attributes/?recursive=true
//!    &wait_for_change=true&last_etag=…`) until `kubeadm-join-token`,
//!    `kubeadm-api-endpoint` and `kubeadm-ca-hash` are present, reporting
//!    `slicectl/bootstrap` guest attributes as the startup script does.
//! 2. Bootstrap-token discovery, as kubeadm does it
//!    (kubernetes/kubernetes `cmd/kubeadm/app/discovery/token/token.go`):
//!    read `kube-public/cluster-info` without credentials, verify the
//!    detached JWS `jws-kubeconfig-<token id>` (HS256 keyed with the token
//!    secret; `k8s.io/cluster-bootstrap/token/jws`) over its kubeconfig, then
//!    check that sha256(SubjectPublicKeyInfo) of its CA is the pinned hash.
//! 3. TLS bootstrap, as the kubelet does it (`pkg/kubelet/certificate/bootstrap`):
//!    a P-256 key and a CSR for `O=system:nodes, CN=system:node:<name>`,
//!    signer `kubernetes.io/kube-apiserver-client-kubelet`, usages digital
//!    signature + client auth, posted with the token; the real
//!    kube-controller-manager approves and signs it.
//! 4. As `system:node:<name>`, create its own Node (providerID
//!    `gce://PROJECT/ZONE/INSTANCE`, kubelet labels plus `kube-labels`, taints
//!    from `kube-taints`, `google.com/tpu` capacity = allocatable, Ready), and
//!    keep it alive: node status `lastHeartbeatTime` and a Lease in
//!    `kube-node-lease` every `heartbeat`.
//!
//! Errors are retried with backoff (the status says why); dropping the
//! handle stops the agent. The token never appears in logs or statuses.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Config};
use secrecy::SecretString;
use serde_json::{Value, json};
use sha2::Sha256;
use tracing::Instrument as _;

use crate::contract::{self as bootstrap, BootstrapStatus};
use crate::kubeadm::{BootstrapToken, ca_cert_hash};

/// What a VM's agent needs to know that it does not read from metadata.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The VM's metadata server (`GCE_METADATA_HOST`).
    pub metadata_host: SocketAddr,
    /// `google.com/tpu` chips the VM reports (capacity = allocatable).
    pub chips: u32,
    /// Node heartbeat interval.
    pub heartbeat: Duration,
}

/// A running agent; dropping it stops it (the VM is gone).
#[derive(Debug)]
pub struct AgentHandle {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the agent of one RUNNING VM.
pub fn spawn(cfg: AgentConfig) -> AgentHandle {
    // kube's rustls client needs a process-wide crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let task = tokio::spawn(async move {
        let agent = Agent::new(cfg);
        agent.run().await;
    });
    AgentHandle { task }
}

/// The extended resource TPU chips are advertised as.
pub const TPU_RESOURCE: &str = "google.com/tpu";
/// CPU, memory and pod capacity a simulated VM reports besides its chips.
const CPU: &str = "8";
const MEMORY: &str = "32Gi";
const PODS: &str = "110";
/// How long a TPU VM's lease is valid (the kubelet's default
/// `nodeLeaseDurationSeconds`).
const LEASE_SECONDS: i32 = 40;
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The metadata long-poll's `timeout_sec`, as guest-agent uses it.
const POLL_TIMEOUT_SEC: u64 = 60;
const CSR_WAIT: Duration = Duration::from_secs(60);

/// Why a join attempt failed. Never carries the token.
#[derive(Debug, thiserror::Error)]
enum JoinError {
    #[error("metadata server: {0}")]
    Metadata(String),
    #[error("metadata {0} is malformed")]
    Malformed(&'static str),
    #[error("cannot read kube-public/cluster-info from {endpoint}: {source}")]
    ClusterInfo {
        endpoint: String,
        #[source]
        source: kube::Error,
    },
    #[error("cluster-info is malformed: {0}")]
    ClusterInfoShape(String),
    #[error(
        "token rejected: cluster-info has no signature for token id {0} (unknown or expired token)"
    )]
    NoSignature(String),
    #[error(
        "token rejected: cluster-info's signature for token id {0} does not verify with the token"
    )]
    BadSignature(String),
    #[error(
        "CA hash mismatch: the cluster CA in cluster-info is {found}, kubeadm-ca-hash pins {pinned}"
    )]
    CaMismatch { found: String, pinned: String },
    #[error("cannot build a client for {0}: {1}")]
    Client(String, #[source] kube::Error),
    #[error("cannot create the node key or CSR: {0}")]
    Csr(#[from] rcgen::Error),
    #[error("token rejected by the API server when posting the CSR: {0}")]
    CsrPost(#[source] kube::Error),
    #[error("CSR {name}: {reason}")]
    CsrRefused { name: String, reason: String },
    #[error(
        "CSR {0} was not signed within {CSR_WAIT:?} (are the CSR approving and signing controllers running?)"
    )]
    CsrTimeout(String),
    #[error("CSR {0}: {1}")]
    CsrWatch(String, #[source] kube::Error),
    #[error("kube-labels: {0}")]
    Labels(String),
    #[error("kube-taints: {0}")]
    Taints(String),
    #[error("cannot register Node {0}: {1}")]
    Register(String, #[source] kube::Error),
}

/// The instance facts and template metadata the agent reads once.
#[derive(Debug, Clone)]
struct Instance {
    name: String,
    project: String,
    zone: String,
    machine_type: String,
}

/// The join values slicectl writes into the VM's metadata.
struct JoinValues {
    token: BootstrapToken,
    endpoint: String,
    ca_hash: String,
    labels: String,
    taints: String,
}

struct Agent {
    cfg: AgentConfig,
    http: reqwest::Client,
    base: String,
    etag: String,
}

impl Agent {
    fn new(cfg: AgentConfig) -> Agent {
        let base = format!("http://{}/computeMetadata/v1/", cfg.metadata_host);
        Agent {
            cfg,
            http: reqwest::Client::new(),
            base,
            etag: "NONE".to_owned(),
        }
    }

    async fn run(self) {
        let mut backoff = Backoff::new();
        let instance = loop {
            match self.instance().await {
                Ok(i) => break i,
                Err(e) => {
                    tracing::debug!(error = %e, "node agent: reading instance metadata");
                    backoff.sleep().await;
                }
            }
        };
        let span = tracing::info_span!("node_agent", instance = %instance.name);
        self.join_and_heartbeat(instance).instrument(span).await;
    }

    async fn join_and_heartbeat(mut self, instance: Instance) {
        let mut backoff = Backoff::new();
        let node_client = loop {
            let values = self.await_join_values().await;
            self.report(&BootstrapStatus::Joining).await;
            match self.join(&instance, &values).await {
                Ok(client) => break client,
                Err(e) => {
                    tracing::warn!(error = %e, "node agent: join failed; retrying");
                    self.report(&BootstrapStatus::Failed(format!("{e}; retrying")))
                        .await;
                    backoff.sleep().await;
                    // Try again with the values in force now, not only once
                    // they change: a token the bootstrap signer has not yet
                    // signed into cluster-info is signed seconds later, and
                    // kubeadm's token discovery retries the same token every
                    // 5 s (`DiscoveryRetryInterval`, kubernetes
                    // cmd/kubeadm/app/constants/constants.go, as
                    // cmd/kubeadm/app/discovery/token/token.go uses it) rather than
                    // waiting for new flags. Waiting for a metadata change
                    // here held such a VM back a whole long-poll (60 s).
                    self.etag = "NONE".to_owned();
                }
            }
        };
        tracing::info!("node agent: joined");
        self.report(&BootstrapStatus::Joined).await;
        heartbeat(&node_client, &instance.name, self.cfg.heartbeat).await;
    }

    async fn md_get(&self, path: &str) -> Result<Option<String>, JoinError> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .header("Metadata-Flavor", "Google")
            .send()
            .await
            .map_err(|e| JoinError::Metadata(format!("GET {path}: {e}")))?;
        match resp.status() {
            reqwest::StatusCode::OK => resp
                .text()
                .await
                .map(Some)
                .map_err(|e| JoinError::Metadata(format!("GET {path}: {e}"))),
            reqwest::StatusCode::NOT_FOUND => Ok(None),
            s => Err(JoinError::Metadata(format!("GET {path}: HTTP {s}"))),
        }
    }

    async fn md_required(&self, path: &str) -> Result<String, JoinError> {
        self.md_get(path)
            .await?
            .ok_or_else(|| JoinError::Metadata(format!("{path} is missing")))
    }

    async fn instance(&self) -> Result<Instance, JoinError> {
        let zone = self.md_required("instance/zone").await?;
        let machine_type = self.md_required("instance/machine-type").await?;
        Ok(Instance {
            name: self.md_required("instance/name").await?,
            project: self.md_required("project/project-id").await?,
            zone: zone.rsplit('/').next().unwrap_or_default().to_owned(),
            machine_type: machine_type
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned(),
        })
    }

    /// Writes `slicectl/bootstrap` (best effort, as the script does).
    async fn report(&self, status: &BootstrapStatus) {
        let url = format!(
            "{}instance/guest-attributes/{}",
            self.base,
            bootstrap::GUEST_BOOTSTRAP_PATH
        );
        let sent = self
            .http
            .put(url)
            .header("Metadata-Flavor", "Google")
            .body(status.to_string())
            .send()
            .await;
        if let Err(e) = sent.and_then(reqwest::Response::error_for_status) {
            tracing::debug!(error = %e, "node agent: writing guest attribute");
        }
    }

    /// Long-polls the attributes until the join values are present and
    /// well-formed (no fixed number of tries).
    async fn await_join_values(&mut self) -> JoinValues {
        let mut announced = false;
        let mut backoff = Backoff::new();
        loop {
            match self.poll_attributes().await {
                Ok(attrs) => {
                    backoff = Backoff::new();
                    match join_values(&attrs) {
                        Ok(Some(v)) => return v,
                        Ok(None) => {
                            if !announced {
                                self.report(&BootstrapStatus::WaitingForToken).await;
                                announced = true;
                            }
                        }
                        Err(e) => {
                            self.report(&BootstrapStatus::Failed(format!(
                                "{e}; waiting for a new value"
                            )))
                            .await;
                            announced = false;
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "node agent: metadata long-poll");
                    backoff.sleep().await;
                }
            }
        }
    }

    /// One long-poll: returns at once the first time (`last_etag=NONE`), then
    /// when the attributes change or after `timeout_sec`.
    async fn poll_attributes(&mut self) -> Result<BTreeMap<String, String>, JoinError> {
        let url = format!(
            "{}instance/attributes/?recursive=true&alt=json&wait_for_change=true&last_etag={}&timeout_sec={POLL_TIMEOUT_SEC}",
            self.base, self.etag
        );
        let err = |e: reqwest::Error| JoinError::Metadata(format!("attributes long-poll: {e}"));
        let resp = self
            .http
            .get(url)
            .header("Metadata-Flavor", "Google")
            .timeout(Duration::from_secs(POLL_TIMEOUT_SEC + 10))
            .send()
            .await
            .map_err(err)?
            .error_for_status()
            .map_err(err)?;
        if let Some(tag) = resp.headers().get("etag").and_then(|v| v.to_str().ok()) {
            self.etag = tag.to_owned();
        }
        resp.json().await.map_err(err)
    }

    /// Discovery, TLS bootstrap and registration; returns the node's client.
    async fn join(&self, instance: &Instance, v: &JoinValues) -> Result<Client, JoinError> {
        // What the kubelet checks of its flags before it starts.
        let labels = node_labels(instance, &v.labels)?;
        let taints = node_taints(&v.taints)?;
        let (server, ca_pem) = discover(&v.endpoint, &v.token, &v.ca_hash).await?;
        let ca_der = pem_to_der(&ca_pem)?;
        let mut base =
            Config::new(server.parse().map_err(|_| {
                JoinError::ClusterInfoShape(format!("server {server:?} is not a URL"))
            })?);
        base.root_cert = Some(ca_der);
        let bootstrap_client = Client::try_from(v.token.client_config(&base))
            .map_err(|e| JoinError::Client(server.clone(), e))?;
        let (cert_pem, key_pem) = tls_bootstrap(bootstrap_client, &instance.name).await?;
        let mut node_config = base;
        node_config.auth_info = kube::config::AuthInfo {
            client_certificate_data: Some(STANDARD.encode(cert_pem)),
            client_key_data: Some(SecretString::from(STANDARD.encode(key_pem))),
            ..kube::config::AuthInfo::default()
        };
        let client =
            Client::try_from(node_config).map_err(|e| JoinError::Client(server.clone(), e))?;
        register(&client, instance, &self.cfg, labels, taints).await?;
        Ok(client)
    }
}

/// Token, endpoint and hash from the attributes: `None` while any is
/// missing, an error when one is malformed.
fn join_values(attrs: &BTreeMap<String, String>) -> Result<Option<JoinValues>, JoinError> {
    let (Some(token), Some(endpoint), Some(ca_hash)) = (
        attrs.get(bootstrap::JOIN_TOKEN_KEY),
        attrs.get(bootstrap::API_ENDPOINT_KEY),
        attrs.get(bootstrap::CA_HASH_KEY),
    ) else {
        return Ok(None);
    };
    let token = BootstrapToken::parse(token)
        .map_err(|_| JoinError::Malformed(bootstrap::JOIN_TOKEN_KEY))?;
    let endpoint_ok = endpoint
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
    if !endpoint_ok {
        return Err(JoinError::Malformed(bootstrap::API_ENDPOINT_KEY));
    }
    let hash_ok = ca_hash.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    });
    if !hash_ok {
        return Err(JoinError::Malformed(bootstrap::CA_HASH_KEY));
    }
    Ok(Some(JoinValues {
        token,
        endpoint: endpoint.clone(),
        ca_hash: ca_hash.clone(),
        labels: attrs
            .get(bootstrap::KUBE_LABELS_KEY)
            .cloned()
            .unwrap_or_default(),
        taints: attrs
            .get(bootstrap::KUBE_TAINTS_KEY)
            .cloned()
            .unwrap_or_default(),
    }))
}

/// Verifies a detached JWS (`header..signature`, HS256 keyed with the token
/// secret, `kid` = token id) over `content`, as
/// `k8s.io/cluster-bootstrap/token/jws.DetachedTokenIsValid` does.
pub fn verify_detached_jws(jws: &str, content: &str, token_id: &str, secret: &str) -> bool {
    let mut parts = jws.split('.');
    let (Some(header_b64), Some(""), Some(sig_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Some(header) = URL_SAFE_NO_PAD
        .decode(header_b64)
        .ok()
        .and_then(|h| serde_json::from_slice::<Value>(&h).ok())
    else {
        return false;
    };
    if header["alg"] != "HS256" || header["kid"] != token_id {
        return false;
    }
    let Ok(sig) = URL_SAFE_NO_PAD.decode(sig_b64) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(header_b64.as_bytes());
    mac.update(b".");
    mac.update(URL_SAFE_NO_PAD.encode(content).as_bytes());
    mac.verify_slice(&sig).is_ok()
}

/// kubeadm's token discovery: returns the API server URL and CA PEM from a
/// verified, pinned `cluster-info`.
async fn discover(
    endpoint: &str,
    token: &BootstrapToken,
    pinned: &str,
) -> Result<(String, String), JoinError> {
    let url = format!("https://{endpoint}");
    let mut config = Config::new(
        url.parse()
            .map_err(|_| JoinError::Malformed(bootstrap::API_ENDPOINT_KEY))?,
    );
    // The first read is unauthenticated and does not trust the server yet:
    // the signature and the pin are what establish trust (kubeadm does the
    // same with an insecure client).
    config.accept_invalid_certs = true;
    let client = Client::try_from(config).map_err(|e| JoinError::Client(url.clone(), e))?;
    let cm = Api::<ConfigMap>::namespaced(client, "kube-public")
        .get("cluster-info")
        .await
        .map_err(|source| JoinError::ClusterInfo {
            endpoint: endpoint.to_owned(),
            source,
        })?;
    let data = cm.data.unwrap_or_default();
    let kubeconfig = data
        .get("kubeconfig")
        .ok_or_else(|| JoinError::ClusterInfoShape("no kubeconfig key".to_owned()))?;
    let full = token.expose();
    let secret = full.split_once('.').map(|(_, s)| s).unwrap_or_default();
    let jws = data
        .get(&format!("jws-kubeconfig-{}", token.id()))
        .ok_or_else(|| JoinError::NoSignature(token.id().to_owned()))?;
    if !verify_detached_jws(jws, kubeconfig, token.id(), secret) {
        return Err(JoinError::BadSignature(token.id().to_owned()));
    }
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig)
        .map_err(|e| JoinError::ClusterInfoShape(format!("kubeconfig: {e}")))?;
    let cluster = kc
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| JoinError::ClusterInfoShape("kubeconfig has no cluster".to_owned()))?;
    let ca_b64 = cluster
        .certificate_authority_data
        .ok_or_else(|| JoinError::ClusterInfoShape("no certificate-authority-data".to_owned()))?;
    let ca_pem = STANDARD
        .decode(ca_b64.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            JoinError::ClusterInfoShape("certificate-authority-data is not base64 PEM".to_owned())
        })?;
    let found =
        ca_cert_hash(&ca_pem).map_err(|e| JoinError::ClusterInfoShape(format!("CA: {e}")))?;
    if found != pinned {
        return Err(JoinError::CaMismatch {
            found,
            pinned: pinned.to_owned(),
        });
    }
    let server = cluster
        .server
        .ok_or_else(|| JoinError::ClusterInfoShape("kubeconfig has no server".to_owned()))?;
    Ok((server, ca_pem))
}

fn pem_to_der(pem: &str) -> Result<Vec<Vec<u8>>, JoinError> {
    use x509_cert::der::Encode;
    let certs = x509_cert::Certificate::load_pem_chain(pem.as_bytes())
        .map_err(|e| JoinError::ClusterInfoShape(format!("CA: {e}")))?;
    certs
        .iter()
        .map(|c| c.to_der())
        .collect::<Result<_, _>>()
        .map_err(|e| JoinError::ClusterInfoShape(format!("CA: {e}")))
}

/// The kubelet's TLS bootstrap: a CSR posted with the token, approved and
/// signed by the controller-manager. Returns (certificate PEM, key PEM).
async fn tls_bootstrap(client: Client, node: &str) -> Result<(Vec<u8>, String), JoinError> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("system:node:{node}"));
    let csr_pem = params.serialize_request(&key)?.pem()?;
    let csrs = Api::<CertificateSigningRequest>::all(client);
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some("node-csr-".to_owned()),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(csr_pem.into_bytes()),
            signer_name: "kubernetes.io/kube-apiserver-client-kubelet".to_owned(),
            // ECDSA key: no key encipherment (pkg/kubelet/certificate/bootstrap).
            usages: Some(vec![
                "digital signature".to_owned(),
                "client auth".to_owned(),
            ]),
            ..CertificateSigningRequestSpec::default()
        },
        ..CertificateSigningRequest::default()
    };
    let created = csrs
        .create(&PostParams::default(), &csr)
        .await
        .map_err(JoinError::CsrPost)?;
    let name = created.metadata.name.unwrap_or_default();
    let deadline = tokio::time::Instant::now() + CSR_WAIT;
    loop {
        let csr = csrs
            .get(&name)
            .await
            .map_err(|e| JoinError::CsrWatch(name.clone(), e))?;
        let status = csr.status.unwrap_or_default();
        for c in status.conditions.unwrap_or_default() {
            if matches!(c.type_.as_str(), "Denied" | "Failed") && c.status == "True" {
                return Err(JoinError::CsrRefused {
                    name,
                    reason: format!(
                        "{}: {}",
                        c.type_,
                        c.message.or(c.reason).unwrap_or_default()
                    ),
                });
            }
        }
        if let Some(cert) = status.certificate.filter(|c| !c.0.is_empty()) {
            return Ok((cert.0, key.serialize_pem()));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(JoinError::CsrTimeout(name));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The kubelet's own labels (`pkg/kubelet/kubelet_node_status.go`
/// `initialNode`) plus `kube-labels`.
fn node_labels(
    instance: &Instance,
    kube_labels: &str,
) -> Result<BTreeMap<String, String>, JoinError> {
    let region = instance
        .zone
        .rsplit_once('-')
        .map(|(r, _)| r)
        .unwrap_or(&instance.zone);
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", instance.name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
        (
            "node.kubernetes.io/instance-type",
            instance.machine_type.as_str(),
        ),
        ("topology.kubernetes.io/zone", instance.zone.as_str()),
        ("topology.kubernetes.io/region", region),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let extra =
        bootstrap::decode_labels(kube_labels).map_err(|e| JoinError::Labels(e.to_string()))?;
    // The kubelet refuses to start with --node-labels NodeRestriction would
    // reject ("unknown 'kubernetes.io' or 'k8s.io' labels").
    let refused: Vec<&str> = extra
        .keys()
        .filter(|k| !bootstrap::node_may_set_label(k))
        .map(String::as_str)
        .collect();
    if !refused.is_empty() {
        return Err(JoinError::Labels(format!(
            "labels a node may not set on itself: {}",
            refused.join(", ")
        )));
    }
    labels.extend(extra);
    Ok(labels)
}

fn now_time() -> Time {
    Time(jiff::Timestamp::now())
}

fn conditions() -> Vec<NodeCondition> {
    let now = now_time();
    let cond = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
    };
    vec![
        cond(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        cond(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        cond(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        cond(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        ),
    ]
}

fn capacity(chips: u32) -> BTreeMap<String, Quantity> {
    [
        ("cpu", CPU.to_owned()),
        ("memory", MEMORY.to_owned()),
        ("pods", PODS.to_owned()),
        (TPU_RESOURCE, chips.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), Quantity(v)))
    .collect()
}

/// `kube-taints` as Node taints.
fn node_taints(kube_taints: &str) -> Result<Vec<Taint>, JoinError> {
    Ok(bootstrap::decode_taints(kube_taints)
        .map_err(|e| JoinError::Taints(e.to_string()))?
        .into_iter()
        .map(|t| Taint {
            key: t.key,
            value: (!t.value.is_empty()).then_some(t.value),
            effect: t.effect.to_owned(),
            time_added: None,
        })
        .collect())
}

/// Creates the node's own Node (as the node) and its Lease.
async fn register(
    client: &Client,
    instance: &Instance,
    cfg: &AgentConfig,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
) -> Result<(), JoinError> {
    let kubelet_version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_default();
    let node = Node {
        metadata: ObjectMeta {
            name: Some(instance.name.clone()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(bootstrap::provider_id(
                &instance.project,
                &instance.zone,
                &instance.name,
            )),
            taints: (!taints.is_empty()).then_some(taints),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(capacity(cfg.chips)),
            allocatable: Some(capacity(cfg.chips)),
            conditions: Some(conditions()),
            addresses: Some(vec![NodeAddress {
                type_: "Hostname".to_owned(),
                address: instance.name.clone(),
            }]),
            node_info: Some(NodeSystemInfo {
                architecture: "amd64".to_owned(),
                operating_system: "linux".to_owned(),
                os_image: "slicectl simulated TPU VM".to_owned(),
                kubelet_version,
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    };
    let nodes = Api::<Node>::all(client.clone());
    let uid = match nodes.create(&PostParams::default(), &node).await {
        Ok(n) => n.metadata.uid,
        // Registered before (the agent restarted its join): the kubelet
        // then just updates its status.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let status = json!({ "status": node.status });
            nodes
                .patch_status(
                    &instance.name,
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await
                .map_err(|e| JoinError::Register(instance.name.clone(), e))?
                .metadata
                .uid
        }
        Err(e) => return Err(JoinError::Register(instance.name.clone(), e)),
    };
    let leases = Api::<Lease>::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(instance.name.clone()),
            // The kubelet makes its Node the Lease's owner, so deleting the
            // Node deletes the Lease (pkg/kubelet/nodelease.go).
            owner_references: uid.map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".to_owned(),
                    kind: "Node".to_owned(),
                    name: instance.name.clone(),
                    uid,
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(instance.name.clone()),
            lease_duration_seconds: Some(LEASE_SECONDS),
            renew_time: Some(MicroTime(jiff::Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    match leases.create(&PostParams::default(), &lease).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(JoinError::Register(instance.name.clone(), e)),
    }
}

/// Renews the Lease and the Ready condition's heartbeat forever.
async fn heartbeat(client: &Client, name: &str, every: Duration) {
    let nodes = Api::<Node>::all(client.clone());
    let leases = Api::<Lease>::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let renew = json!({ "spec": { "renewTime": MicroTime(jiff::Timestamp::now()) } });
        if let Err(e) = leases
            .patch(name, &PatchParams::default(), &Patch::Merge(&renew))
            .await
        {
            tracing::warn!(error = %e, "node agent: renewing the node lease");
        }
        // Conditions are a list keyed by type: a strategic merge updates
        // each one's heartbeat in place.
        let status = json!({ "status": { "conditions": conditions() } });
        if let Err(e) = nodes
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&status))
            .await
        {
            tracing::warn!(error = %e, "node agent: posting node status");
        }
    }
}

/// Exponential backoff with jitter: 0.5 s doubling to 15 s.
struct Backoff {
    next: Duration,
}

impl Backoff {
    fn new() -> Self {
        Backoff {
            next: Duration::from_millis(500),
        }
    }

    async fn sleep(&mut self) {
        let jitter = rand::random_range(0.8..1.2);
        tokio::time::sleep(self.next.mul_f64(jitter)).await;
        self.next = (self.next * 2).min(Duration::from_secs(15));
    }
}

#[cfg(test)]
#[path = "kubelet/tests.rs"]
mod tests;
