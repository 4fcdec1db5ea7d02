//! A simulated GKE cluster linked to a real Kubernetes API server.
//!
//! Unlinked, a simulated cluster has node pools but no Nodes. Linked (an
//! explicit choice: [`crate::SimHandle::link_gke`], `slicectl sim
//! --link-gke`; never under `--sim`), it plays what GKE does on the cluster's
//! side:
//!
//! - `clusters.get` returns the API server's address as `endpoint` and its
//!   CA as `masterAuth.clusterCaCertificate` (base64 of the PEM), the two
//!   fields `gcloud container clusters get-credentials` reads;
//! - a node pool that turns RUNNING registers one Node per VM, each a
//!   kubemark hollow node (`kubemark --morph=kubelet`: the real kubelet with
//!   a fake container runtime, what Kubernetes' own scalability tests run)
//!   with GKE's node labels, the TPU taint and `google.com/tpu` capacity;
//! - a deleted pool's hollow nodes are stopped and their Nodes deleted.
//!
//! A hollow node is a process of about 80 MiB. The Nodes of one pool are
//! bounded by [`GkeLink::max_nodes_per_pool`]: a bigger pool registers none
//! and says so in the log (tests use 1 and 2 host slices). Every hollow node
//! is killed when its pool goes, when the simulator shuts down or is
//! dropped, and (`PR_SET_PDEATHSIG`) when the thread that started it ends.

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

use super::gke::{ClusterRef, tpu_shape};
use super::state::Inner;

/// Hollow nodes one pool may start unless told otherwise.
pub const DEFAULT_MAX_NODES_PER_POOL: u32 = 4;

/// The TPU taint GKE puts on every TPU node ("GKE adds the
/// `google.com/tpu=present:NoSchedule` taint to TPU nodes", GKE "Deploy TPU
/// workloads in GKE Standard",
/// <https://cloud.google.com/kubernetes-engine/docs/how-to/tpus>; tolerated
/// by tpu-provisioner's and xpk's pods).
pub const TPU_TAINT: &str = "google.com/tpu=present:NoSchedule";

/// How a simulated GKE cluster reaches its real API server.
#[derive(Debug, Clone)]
pub struct GkeLink {
    /// A kubeconfig of the API server (its current context): the hollow
    /// kubelets authenticate with it, and its server and CA are what
    /// `clusters.get` reports.
    pub kubeconfig: PathBuf,
    /// The `kubemark` binary (`scripts/k8s-testbin.sh` builds it;
    /// `SLICECTL_TEST_KUBEMARK`).
    pub kubemark: PathBuf,
    /// Most hollow nodes one pool starts (a pool of more VMs starts none).
    pub max_nodes_per_pool: u32,
    /// Keep each hollow kubelet's log as `DIR/NODE.log`; by default the
    /// logs are in the temp dir and removed with the node.
    pub log_dir: Option<PathBuf>,
}

impl GkeLink {
    /// A link through `kubeconfig` with `kubemark`, the default bound and
    /// no kept logs.
    pub fn new(kubeconfig: impl Into<PathBuf>, kubemark: impl Into<PathBuf>) -> GkeLink {
        GkeLink {
            kubeconfig: kubeconfig.into(),
            kubemark: kubemark.into(),
            max_nodes_per_pool: DEFAULT_MAX_NODES_PER_POOL,
            log_dir: None,
        }
    }
}

/// A linked cluster: the link, what `clusters.get` reports, and a client to
/// delete Nodes with.
pub(crate) struct Linked {
    pub cfg: GkeLink,
    /// `HOST[:PORT]` of the API server (no scheme, as GKE's `endpoint`).
    pub endpoint: String,
    /// Base64 of the CA's PEM, as `masterAuth.clusterCaCertificate`.
    pub ca_certificate: String,
    pub client: kube::Client,
    /// The node selectors of the cluster's pending, unscheduled pods that
    /// select flex-start nodes, read every [`PENDING_POLL`] by a task that
    /// ends with the link: the demand GKE's cluster autoscaler scales a
    /// flex-start pool up for ([`flex_demand_fits`]).
    pub pending_flex: Arc<Mutex<Vec<BTreeMap<String, String>>>>,
}

/// How often a linked cluster's pending flex-start pods are read.
pub(crate) const PENDING_POLL: std::time::Duration = std::time::Duration::from_millis(300);

/// The label GKE puts on flex-start nodes, which pods select ("Run a small
/// batch workload with TPUs and flex-start",
/// <https://cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training-tpu>).
const FLEX_START_LABEL: &str = "cloud.google.com/gke-flex-start";

/// Reads the pending, unscheduled pods selecting flex-start nodes into
/// `into` until the link is dropped (only this task holds `into` then).
async fn poll_pending_flex(client: kube::Client, into: Arc<Mutex<Vec<BTreeMap<String, String>>>>) {
    let pods: Api<Pod> = Api::all(client);
    let params = ListParams::default().fields("status.phase=Pending");
    while Arc::strong_count(&into) > 1 {
        match pods.list(&params).await {
            Ok(list) => {
                let demand: Vec<BTreeMap<String, String>> = list
                    .items
                    .into_iter()
                    .filter_map(|p| p.spec)
                    .filter(|s| s.node_name.is_none())
                    .filter_map(|s| s.node_selector)
                    .filter(|sel| sel.get(FLEX_START_LABEL).map(String::as_str) == Some("true"))
                    .collect();
                if let Ok(mut g) = into.lock() {
                    *g = demand;
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "sim: cannot list the linked cluster's pending pods")
            }
        }
        tokio::time::sleep(PENDING_POLL).await;
    }
}

/// Whether GKE's cluster autoscaler would scale the flex-start pool
/// `pool_key` up now: `None` when its cluster is not linked (no pods to
/// judge, and no Node to start either); otherwise whether a pending,
/// unscheduled pod selects flex-start nodes and every label it selects is
/// one the pool's nodes would have. The autoscaler adds nodes only for
/// pending pods that fit them ("Cluster autoscaler",
/// <https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-autoscaler>:
/// "If Pods are unschedulable because there are not enough nodes in the
/// node pool, cluster autoscaler adds nodes"), so a flex-start pool nobody
/// waits for stays at 0.
pub(crate) fn flex_demand_fits(inner: &Inner, pool_key: &str) -> Option<bool> {
    let (cluster_key, _) = pool_key.split_once("/nodePools/")?;
    let link = inner.links.get(cluster_key)?;
    let c = ClusterRef::parse(cluster_key)?;
    let spec = &inner.pools.get(pool_key)?.spec;
    let zone = spec
        .get("locations")
        .and_then(Value::as_array)
        .and_then(|z| z.first())
        .and_then(Value::as_str)
        .unwrap_or_default();
    let labels = node_shape(inner, &c, spec, zone).labels;
    let demand = link.pending_flex.lock().ok()?;
    Some(
        demand
            .iter()
            .any(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v))),
    )
}

impl std::fmt::Debug for Linked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Linked")
            .field("cfg", &self.cfg)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Linked {
    /// Reads the kubeconfig and checks the API server answers.
    pub async fn connect(cfg: GkeLink) -> anyhow::Result<Linked> {
        let path = &cfg.kubeconfig;
        if !cfg.kubemark.is_file() {
            anyhow::bail!(
                "kubemark not found at {}: build it with scripts/k8s-testbin.sh (SLICECTL_TEST_KUBEMARK names it)",
                cfg.kubemark.display()
            );
        }
        let kc = Kubeconfig::read_from(path)
            .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
        let context_name = kc
            .current_context
            .clone()
            .with_context(|| format!("kubeconfig {} has no current-context", path.display()))?;
        let cluster_name = kc
            .contexts
            .iter()
            .find(|c| c.name == context_name)
            .and_then(|c| c.context.as_ref())
            .map(|c| c.cluster.clone())
            .with_context(|| {
                format!(
                    "kubeconfig {}: context {context_name:?} is not defined",
                    path.display()
                )
            })?;
        let cluster = kc
            .clusters
            .iter()
            .find(|c| c.name == cluster_name)
            .and_then(|c| c.cluster.clone())
            .with_context(|| {
                format!(
                    "kubeconfig {}: cluster {cluster_name:?} is not defined",
                    path.display()
                )
            })?;
        let server = cluster.server.clone().with_context(|| {
            format!(
                "kubeconfig {}: cluster {cluster_name:?} has no server",
                path.display()
            )
        })?;
        let endpoint = endpoint_of(&server).with_context(|| {
            format!(
                "kubeconfig {}: server {server:?} is not https://HOST[:PORT]",
                path.display()
            )
        })?;
        let ca_pem = match (
            &cluster.certificate_authority_data,
            &cluster.certificate_authority,
        ) {
            (Some(data), _) => STANDARD.decode(data.trim()).with_context(|| {
                format!(
                    "kubeconfig {}: certificate-authority-data is not base64",
                    path.display()
                )
            })?,
            (None, Some(file)) => std::fs::read(file)
                .with_context(|| format!("reading the CA file {file} the kubeconfig names"))?,
            (None, None) => anyhow::bail!(
                "kubeconfig {}: cluster {cluster_name:?} names no CA (GKE always has one)",
                path.display()
            ),
        };
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading the kubeconfig {}", path.display()))?;
        let client = kube::Client::try_from(config)
            .with_context(|| format!("a client for the kubeconfig {}", path.display()))?;
        client.apiserver_version().await.with_context(|| {
            format!(
                "the API server {server} (kubeconfig {}) does not answer",
                path.display()
            )
        })?;
        let pending_flex = Arc::default();
        tokio::spawn(poll_pending_flex(client.clone(), Arc::clone(&pending_flex)));
        Ok(Linked {
            cfg,
            endpoint,
            ca_certificate: STANDARD.encode(ca_pem),
            client,
            pending_flex,
        })
    }

    /// The `clusters.get` fields a linked cluster has: `endpoint`, the CA,
    /// and the same address as the public and private endpoint (one API
    /// server stands for both).
    pub fn cluster_fields(&self) -> Value {
        json!({
            "endpoint": self.endpoint,
            "masterAuth": {"clusterCaCertificate": self.ca_certificate},
            "privateClusterConfig": {
                "privateEndpoint": self.endpoint,
                "publicEndpoint": self.endpoint,
            },
            "controlPlaneEndpointsConfig": {
                "ipEndpointsConfig": {
                    "enabled": true,
                    "enablePublicEndpoint": true,
                    "publicEndpoint": self.endpoint,
                    "privateEndpoint": self.endpoint,
                }
            },
        })
    }
}

/// `https://HOST[:PORT][/]` → `HOST[:PORT]` (`:443` dropped: GKE's
/// `endpoint` is a bare IP address for port 443; a test API server on
/// another port keeps it, and `https://{endpoint}` still reaches it).
fn endpoint_of(server: &str) -> Option<String> {
    let url = url::Url::parse(server).ok()?;
    if url.scheme() != "https" {
        return None;
    }
    let host = url.host_str()?;
    Some(match url.port() {
        Some(p) if p != 443 => format!("{host}:{p}"),
        _ => host.to_string(),
    })
}

/// One hollow node: a `kubemark --morph=kubelet` process. Dropping it kills
/// the process and removes its files (its Node object stays: see
/// [`delete_nodes`]).
#[derive(Debug)]
pub(crate) struct HollowNode {
    pub name: String,
    /// What the Node was registered (or last updated) with.
    shape: NodeShape,
    child: Child,
    log: PathBuf,
    keep_log: bool,
}

impl Drop for HollowNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The hollow kubelet makes its root dir in /tmp and says so in its
        // log ("Using /tmp/hollow-kubelet.N as root dir for hollow-kubelet").
        if let Some(root) = root_dir_in_log(&self.log) {
            let _ = std::fs::remove_dir_all(root);
        }
        if !self.keep_log {
            let _ = std::fs::remove_file(&self.log);
        }
        tracing::debug!(node = %self.name, "sim: hollow node stopped");
    }
}

fn root_dir_in_log(log: &Path) -> Option<PathBuf> {
    let file = std::fs::File::open(log).ok()?;
    std::io::BufReader::new(file)
        .lines()
        .take(200)
        .map_while(Result::ok)
        .find_map(|line| {
            let rest = line.split("Using ").nth(1)?;
            let dir = rest.split(" as root dir").next()?;
            dir.starts_with("/tmp/hollow-kubelet.")
                .then(|| PathBuf::from(dir))
        })
}

/// What one Node of a pool registers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeShape {
    pub labels: BTreeMap<String, String>,
    /// `KEY=VALUE:Effect`.
    pub taints: Vec<String>,
    /// `google.com/tpu` chips (0: not a TPU node).
    pub chips: u32,
}

/// GKE's taint effect enum → Kubernetes' effect name.
fn k8s_effect(effect: &str) -> &str {
    match effect {
        "NO_EXECUTE" => "NoExecute",
        "PREFER_NO_SCHEDULE" => "PreferNoSchedule",
        _ => "NoSchedule",
    }
}

/// The single-host topology of a TPU machine type (GKE labels single-host
/// nodes with it too: `ct5lp-hightpu-4t` → `2x2`, `ct5p-hightpu-4t` →
/// `2x2x1`; "Plan TPUs in GKE", single-host tables).
fn single_host_topology(m: &crate::tpu::MachineType) -> String {
    let three_d = matches!(
        m.generation.topologies,
        crate::tpu::Topologies::Cubes { .. }
    );
    match (m.chips_per_vm, three_d) {
        (1, false) => "1x1".into(),
        (8, false) => "2x4".into(),
        (_, false) => "2x2".into(),
        (1, true) => "1x1x1".into(),
        (_, true) => "2x2x1".into(),
    }
}

/// The labels, taints and chips GKE gives a node of `pool` in `zone`: the
/// pool's own `config.labels` and `config.taints`, and the labels GKE sets
/// (`cloud.google.com/gke-nodepool`; for TPU machine types
/// `cloud.google.com/gke-tpu-accelerator`, `gke-tpu-topology` and
/// `gke-accelerator-count`, as GKE's "Plan TPUs in GKE" node selectors and
/// tpu-provisioner read them; `cloud.google.com/gke-spot` for Spot VMs;
/// the well-known instance-type, zone and region labels) plus the TPU
/// taint [`TPU_TAINT`].
pub(crate) fn node_shape(inner: &Inner, c: &ClusterRef, pool: &Value, zone: &str) -> NodeShape {
    let mut labels = BTreeMap::new();
    let config = pool.get("config");
    if let Some(user) = config
        .and_then(|c| c.get("labels"))
        .and_then(Value::as_object)
    {
        for (k, v) in user {
            if let Some(v) = v.as_str() {
                labels.insert(k.clone(), v.to_string());
            }
        }
    }
    let name = pool.get("name").and_then(Value::as_str).unwrap_or_default();
    labels.insert("cloud.google.com/gke-nodepool".into(), name.into());
    let machine = config
        .and_then(|c| c.get("machineType"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    labels.insert("node.kubernetes.io/instance-type".into(), machine.into());
    labels.insert("topology.kubernetes.io/zone".into(), zone.into());
    labels.insert(
        "topology.kubernetes.io/region".into(),
        crate::tpu::region_of(zone).into(),
    );
    let spot = config
        .and_then(|c| c.get("spot"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if spot {
        labels.insert("cloud.google.com/gke-spot".into(), "true".into());
    }
    // Flex-start nodes carry the label flex-start pods select ("Run a small
    // batch workload with TPUs and flex-start": `nodeSelector:
    // cloud.google.com/gke-flex-start: "true"`,
    // cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training-tpu).
    let flex = config
        .and_then(|c| c.get("flexStart"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if flex {
        labels.insert("cloud.google.com/gke-flex-start".into(), "true".into());
    }
    let mut taints: Vec<String> = config
        .and_then(|c| c.get("taints"))
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .filter_map(|t| {
                    let key = t.get("key")?.as_str()?;
                    let value = t.get("value").and_then(Value::as_str).unwrap_or_default();
                    let effect = k8s_effect(t.get("effect")?.as_str()?);
                    Some(format!("{key}={value}:{effect}"))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut chips = 0;
    if let Some(m) = crate::tpu::machine_type(machine) {
        chips = m.chips_per_vm;
        let topology = pool
            .as_object()
            .and_then(|p| tpu_shape(inner, c, p))
            .map(|(t, _)| t)
            .unwrap_or_else(|| single_host_topology(&m));
        labels.insert(
            "cloud.google.com/gke-tpu-accelerator".into(),
            m.generation.accelerator.into(),
        );
        labels.insert("cloud.google.com/gke-tpu-topology".into(), topology);
        labels.insert(
            "cloud.google.com/gke-accelerator-count".into(),
            chips.to_string(),
        );
        if !taints.iter().any(|t| t.starts_with("google.com/tpu=")) {
            taints.push(TPU_TAINT.into());
        }
    }
    NodeShape {
        labels,
        taints,
        chips,
    }
}

/// GCE instance names are at most 63 characters
/// (<https://cloud.google.com/compute/docs/naming-resources>).
const MAX_NAME: usize = 63;

/// A node name as GKE names them: the pool's instance group base name and a
/// 4-character suffix, `gke-CLUSTER-POOL-HASH-xxxx` (e.g.
/// `gke-pvpnm-testing-default-pool-453ec1a4-nrs9`, dotmesh-io/dotmesh#541;
/// GKE truncates long cluster names in it, kubernetes/ingress-gce#1623).
/// `digest` is the hash the pool's `instanceGroupUrls` carry.
pub(crate) fn node_name(cluster: &str, pool: &str, digest: &str, suffix: &str) -> String {
    let tail = format!("-{digest}-{suffix}");
    let mut head = format!("gke-{cluster}-{pool}");
    head.truncate(MAX_NAME - tail.len());
    format!("{}{tail}", head.trim_end_matches('-'))
}

/// Four characters `[a-z0-9]` from `n`.
pub(crate) fn suffix(mut n: u64) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut s = String::with_capacity(4);
    for _ in 0..4 {
        let i = usize::try_from(n % 36).unwrap_or(0);
        s.push(char::from(ALPHABET.get(i).copied().unwrap_or(b'x')));
        n /= 36;
    }
    s
}

/// Starts one hollow node.
fn spawn(link: &Linked, name: &str, shape: &NodeShape) -> anyhow::Result<HollowNode> {
    let (log, keep_log) = match &link.cfg.log_dir {
        Some(dir) => (dir.join(format!("{name}.log")), true),
        None => (
            std::env::temp_dir().join(format!(
                "slicectl-sim-hollow-{}-{name}.log",
                std::process::id()
            )),
            false,
        ),
    };
    let out = std::fs::File::create(&log)
        .with_context(|| format!("creating the hollow node log {}", log.display()))?;
    let err = out
        .try_clone()
        .with_context(|| format!("opening the hollow node log {}", log.display()))?;
    let labels: Vec<String> = shape
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut cmd = Command::new(&link.cfg.kubemark);
    cmd.arg("--morph=kubelet")
        .arg(format!("--name={name}"))
        .arg(format!("--kubeconfig={}", link.cfg.kubeconfig.display()))
        .args([
            "--kubelet-port=0",
            "--kubelet-read-only-port=0",
            "--use-host-image-service=false",
        ])
        .arg(format!("--node-labels={}", labels.join(",")));
    if shape.chips > 0 {
        cmd.arg(format!(
            "--extended-resources={}={}",
            crate::kubelet::TPU_RESOURCE,
            shape.chips
        ));
    }
    if !shape.taints.is_empty() {
        cmd.arg(format!("--register-with-taints={}", shape.taints.join(",")));
    }
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    die_with_parent(&mut cmd);
    let child = cmd.spawn().with_context(|| {
        format!(
            "starting the hollow node {name} ({})",
            link.cfg.kubemark.display()
        )
    })?;
    tracing::info!(node = %name, pid = child.id(), "sim: hollow node started");
    Ok(HollowNode {
        name: name.to_string(),
        shape: shape.clone(),
        child,
        log,
        keep_log,
    })
}

/// The child gets SIGKILL when the thread that started it ends, so a
/// simulator killed outright leaves no hollow node behind.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no
    // memory of the parent; it is all the closure does between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

/// Starts `per_zone` hollow nodes in each zone of a pool (that just turned
/// RUNNING, or whose flex-start capacity arrived), when its cluster is
/// linked.
pub(crate) fn start_pool_nodes(inner: &mut Inner, pool_key: &str, per_zone: i64) {
    let Some((cluster_key, pool_name)) = pool_key.split_once("/nodePools/") else {
        return;
    };
    let Some(link) = inner.links.get(cluster_key).cloned() else {
        return;
    };
    let Some(c) = ClusterRef::parse(cluster_key) else {
        return;
    };
    let Some(spec) = inner.pools.get(pool_key).map(|r| r.spec.clone()) else {
        return;
    };
    let per_zone = per_zone.max(0);
    let zones: Vec<String> = spec
        .get("locations")
        .and_then(Value::as_array)
        .map(|z| {
            z.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let total = per_zone.saturating_mul(i64::try_from(zones.len()).unwrap_or(i64::MAX));
    if total > i64::from(link.cfg.max_nodes_per_pool) {
        tracing::error!(
            pool = %pool_key,
            nodes = total,
            max = link.cfg.max_nodes_per_pool,
            "sim: the linked pool has more VMs than hollow nodes allowed per pool; none is started \
             (each is a kubelet process of about 80 MiB): use a smaller topology or raise the bound"
        );
        return;
    }
    let digest = super::gke::pool_digest(pool_key);
    let mut nodes = Vec::new();
    for zone in &zones {
        let shape = node_shape(inner, &c, &spec, zone);
        for _ in 0..per_zone {
            // Not from the seeded stream: simulators that share one API
            // server (parallel tests) must not pick the same Node names.
            let name = node_name(&c.cluster, pool_name, &digest, &suffix(rand::random()));
            match spawn(&link, &name, &shape) {
                Ok(n) => nodes.push(n),
                Err(e) => {
                    tracing::error!(pool = %pool_key, error = format!("{e:#}"), "sim: cannot start a hollow node")
                }
            }
        }
    }
    inner
        .hollow
        .entry(pool_key.to_string())
        .or_default()
        .extend(nodes);
}

/// Follows a pool's label and taint update on its Nodes, as GKE applies
/// an updated node pool's labels and taints to its existing nodes ("Update
/// node labels and node taints of existing node pools",
/// <https://cloud.google.com/kubernetes-engine/docs/how-to/update-existing-nodepools>):
/// labels and taints the pool no longer has are removed, new ones set; what
/// the kubelet or the node-lifecycle controller put there is kept.
pub(crate) fn update_pool_nodes(inner: &mut Inner, pool_key: &str) {
    let Some((cluster_key, _)) = pool_key.split_once("/nodePools/") else {
        return;
    };
    let (Some(link), Some(c), Some(spec)) = (
        inner.links.get(cluster_key).cloned(),
        ClusterRef::parse(cluster_key),
        inner.pools.get(pool_key).map(|r| r.spec.clone()),
    ) else {
        return;
    };
    let mut changes = Vec::new();
    let shapes: Vec<(String, NodeShape)> = inner
        .hollow
        .get(pool_key)
        .map(|nodes| {
            nodes
                .iter()
                .map(|n| {
                    let zone = n
                        .shape
                        .labels
                        .get("topology.kubernetes.io/zone")
                        .cloned()
                        .unwrap_or_default();
                    (n.name.clone(), node_shape(inner, &c, &spec, &zone))
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(nodes) = inner.hollow.get_mut(pool_key) {
        for n in nodes.iter_mut() {
            let Some((_, new)) = shapes.iter().find(|(name, _)| *name == n.name) else {
                continue;
            };
            if *new != n.shape {
                changes.push((n.name.clone(), n.shape.clone(), new.clone()));
                n.shape = new.clone();
            }
        }
    }
    if changes.is_empty() {
        return;
    }
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        let client = link.client.clone();
        rt.spawn(async move {
            for (name, old, new) in changes {
                if let Err(e) = patch_node(&client, &name, &old, &new).await {
                    tracing::warn!(node = %name, error = %e, "sim: cannot update a hollow node's labels and taints");
                }
            }
        });
    }
}

/// `KEY=VALUE:Effect` → a Taint as the API has it.
fn parse_taint(t: &str) -> Option<Value> {
    let (kv, effect) = t.rsplit_once(':')?;
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    let mut taint = json!({"key": key, "effect": effect});
    if !value.is_empty() {
        taint["value"] = json!(value);
    }
    Some(taint)
}

async fn patch_node(
    client: &kube::Client,
    name: &str,
    old: &NodeShape,
    new: &NodeShape,
) -> Result<(), kube::Error> {
    let api = Api::<Node>::all(client.clone());
    let node = api.get(name).await?;
    let mut labels = serde_json::Map::new();
    for k in old.labels.keys().filter(|k| !new.labels.contains_key(*k)) {
        labels.insert(k.clone(), Value::Null);
    }
    for (k, v) in &new.labels {
        labels.insert(k.clone(), json!(v));
    }
    let old_taints: Vec<Value> = old.taints.iter().filter_map(|t| parse_taint(t)).collect();
    let same = |a: &Value, b: &Value| a["key"] == b["key"] && a["effect"] == b["effect"];
    let mut taints: Vec<Value> = node
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .iter()
        .filter_map(|t| serde_json::to_value(t).ok())
        .filter(|t| !old_taints.iter().any(|o| same(o, t)))
        .collect();
    taints.extend(new.taints.iter().filter_map(|t| parse_taint(t)));
    let patch = json!({
        "metadata": {"labels": labels, "resourceVersion": node.metadata.resource_version},
        "spec": {"taints": taints},
    });
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Stops the hollow nodes of a deleted pool and deletes their Nodes (in the
/// background: the API server is awaited, the simulator's lock is not held).
pub(crate) fn stop_pool_nodes(inner: &mut Inner, pool_key: &str) {
    let Some(nodes) = inner.hollow.remove(pool_key) else {
        return;
    };
    let Some((cluster_key, _)) = pool_key.split_once("/nodePools/") else {
        return;
    };
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    drop(nodes);
    let Some(link) = inner.links.get(cluster_key).cloned() else {
        return;
    };
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        let client = link.client.clone();
        rt.spawn(async move { delete_nodes(&client, &names).await });
    }
}

/// Deletes Nodes by name (a missing one is fine); failures are logged.
pub(crate) async fn delete_nodes(client: &kube::Client, names: &[String]) {
    let api = Api::<Node>::all(client.clone());
    for name in names {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => tracing::debug!(node = %name, "sim: Node deleted"),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "sim: cannot delete the Node of a stopped hollow node")
            }
        }
    }
}

#[cfg(test)]
#[path = "link/tests.rs"]
mod tests;
