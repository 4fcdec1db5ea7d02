//! The GCP simulator: a real HTTP server speaking the GKE (container v1 and
//! v1beta1) and Compute Engine (compute v1/beta/alpha) REST wire format for
//! the subset slicectl uses, with long-running operations on a clock,
//! request-body validation against Google's discovery documents, seeded
//! fault injection and request counters.
//!
//! One port serves both APIs: container calls at `BASE/v1/…`, compute calls
//! at `BASE/compute/v1/…`. Admin endpoints for tests and users:
//!
//! | endpoint | effect |
//! | --- | --- |
//! | `GET /_sim/stats` | [`SimStats`] as JSON |
//! | `POST /_sim/reset-stats` | zero the counters |
//! | `POST /_sim/clusters` `{"name":"projects/P/locations/L/clusters/C"}` | register a GKE cluster |
//! | `PUT /_sim/faults` (a [`FaultConfig`] as JSON) | replace the rules and fault configuration (reservations, stockout mode included) |
//! | `POST /_sim/cluster-operations` `{"cluster":"projects/P/locations/L/clusters/C","seconds":N}` | start a cluster-level operation (an upgrade) that excludes node pool writes for N seconds |
//! | `GET /_sim/instances` | the simulated VMs: `[{"name","zone","project","status","metadataHost"}]` (`metadataHost` = the VM's metadata server, `HOST:PORT`, once it listens) |

mod aggregated;
mod compute;
pub mod contract;
pub mod discovery;
mod errors;
mod faults;
mod fields;
mod gce;
mod gke;
pub mod kubeadm;
pub mod kubelet;
mod labels;
pub mod link;
pub mod metadata;
mod monitoring;
mod operations;
mod quotas;
pub use operations::project_number;
mod routes;
mod server;
mod state;
mod stats;
pub mod tpu;
mod tpu_rules;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use faults::{DEFAULT_OPERATION_QUOTA, FaultConfig, StockoutStatus};
pub use stats::SimStats;

use server::Sim;

/// Operation latency `slicectl sim` uses unless told otherwise.
pub const DEFAULT_CLI_LATENCY: Duration = Duration::from_millis(200);

/// How to start a simulator. `Default` gives no clusters, zero latency,
/// seed 0 and no faults.
#[derive(Clone, Debug, Default)]
pub struct SimConfig {
    /// GKE clusters that exist, as `projects/P/locations/L/clusters/C`.
    pub clusters: Vec<String>,
    /// How long every operation stays RUNNING before it is DONE.
    pub operation_latency: Duration,
    /// Seed for fault decisions and generated ids.
    pub seed: u64,
    /// Faults to inject.
    pub faults: FaultConfig,
}

/// Entry point: starts simulators.
#[derive(Debug)]
pub struct Simulator;

impl Simulator {
    /// Binds `listen` (port 0 picks a free port) and serves in the background.
    pub async fn start(cfg: SimConfig, listen: SocketAddr) -> anyhow::Result<SimHandle> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding the simulator to {listen}"))?;
        let addr = listener
            .local_addr()
            .context("reading the simulator's bound address")?;
        let faults = faults::Faults::new(cfg.faults.clone(), cfg.seed);
        let inner = state::Inner::new(cfg.operation_latency, cfg.seed, faults);
        let sim = Arc::new(Sim::new(inner, addr));
        for c in &cfg.clusters {
            sim.add_cluster(c).map_err(anyhow::Error::msg)?;
        }
        let (tx, rx) = oneshot::channel::<()>();
        let app = server::router(sim.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await
        });
        let clock = spawn_clock(Arc::downgrade(&sim));
        tracing::info!(%addr, "GCP simulator started");
        Ok(SimHandle {
            sim,
            addr,
            shutdown: tx,
            task,
            clock,
        })
    }
}

/// A running simulator. Dropping it leaves the server running until the
/// runtime stops; call [`SimHandle::shutdown`] to stop it.
#[derive(Debug)]
pub struct SimHandle {
    sim: Arc<Sim>,
    addr: SocketAddr,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
    clock: JoinHandle<()>,
}

/// One simulated VM, as `GET /_sim/instances` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimInstance {
    /// VM name.
    pub name: String,
    /// Zone.
    pub zone: String,
    /// Project id.
    pub project: String,
    /// PROVISIONING, STAGING, RUNNING, STOPPING.
    pub status: String,
    /// Its metadata server (what `GCE_METADATA_HOST` is set to), once it listens.
    pub metadata_host: Option<String>,
}

/// How often the simulator's clock moves VMs along while no request comes.
const CLOCK_TICK: Duration = Duration::from_millis(50);

/// Advances the world on its own (VMs boot and start their node agents with
/// no request arriving); ends when the simulator is gone.
fn spawn_clock(sim: std::sync::Weak<Sim>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(CLOCK_TICK).await;
            let Some(sim) = sim.upgrade() else {
                return;
            };
            sim.tick();
        }
    })
}

impl SimHandle {
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> SimStats {
        self.sim.lock().stats.clone()
    }

    /// Zeroes the counters.
    pub fn reset_stats(&self) {
        self.sim.lock().stats = SimStats::default();
    }

    /// Replaces the fault configuration (the random stream continues).
    pub fn set_faults(&self, f: FaultConfig) {
        self.sim.lock().faults.set(f);
    }

    /// Sets the latency of the operations started from now on (a test sets
    /// a fleet up fast, then slows the operations it means to interrupt).
    pub fn set_latency(&self, latency: Duration) {
        self.sim.lock().latency = latency;
    }

    /// Starts a cluster-level operation (`UPGRADE_MASTER`) on `cluster`
    /// that runs for `duration`; returns the operation's name.
    pub fn start_cluster_operation(
        &self,
        cluster: &str,
        duration: Duration,
    ) -> anyhow::Result<String> {
        self.sim
            .start_cluster_operation(cluster, duration)
            .map_err(anyhow::Error::msg)
    }

    /// Registers a GKE cluster `projects/P/locations/L/clusters/C`.
    pub fn add_cluster(&self, name: &str) -> anyhow::Result<()> {
        self.sim.add_cluster(name).map_err(anyhow::Error::msg)
    }

    /// The simulated VMs (MIG members) and their metadata servers.
    pub fn instances(&self) -> Vec<SimInstance> {
        self.sim
            .instance_rows()
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect()
    }

    /// Writes a guest attribute `NS/KEY` as the VM `project/zone/instance`
    /// would (`PUT instance/guest-attributes/NS/KEY` on its metadata
    /// server); `instances.getGuestAttributes` serves it back.
    pub fn put_guest_attribute(
        &self,
        project: &str,
        zone: &str,
        instance: &str,
        path: &str,
        value: &str,
    ) -> anyhow::Result<()> {
        self.sim
            .put_guest_attribute(project, zone, instance, path, value)
            .map_err(anyhow::Error::msg)
    }

    /// Links the simulated cluster `cluster` (`projects/P/locations/L/clusters/C`,
    /// registered) to a real Kubernetes API server: `clusters.get` reports
    /// it, and its node pools register hollow nodes there from now on
    /// ([`link`]). Fails when the API server does not answer or kubemark is
    /// missing.
    pub async fn link_gke(&self, cluster: &str, link: link::GkeLink) -> anyhow::Result<()> {
        let kubeconfig = link.kubeconfig.display().to_string();
        let linked = link::Linked::connect(link).await.with_context(|| {
            format!("linking cluster {cluster} to the API server of {kubeconfig}")
        })?;
        self.sim
            .link(cluster, Arc::new(linked))
            .map_err(anyhow::Error::msg)?;
        tracing::info!(%cluster, %kubeconfig, "simulated GKE cluster linked to a real API server");
        Ok(())
    }

    /// Names of the hollow nodes running for `pool_key`
    /// (`projects/P/locations/L/clusters/C/nodePools/NP`).
    pub fn hollow_nodes(&self, pool_key: &str) -> Vec<String> {
        self.sim
            .lock()
            .hollow
            .get(pool_key)
            .map(|nodes| nodes.iter().map(|n| n.name.clone()).collect())
            .unwrap_or_default()
    }

    /// Stops accepting connections and waits for the server task. A linked
    /// cluster's hollow nodes are stopped and their Nodes deleted.
    pub async fn shutdown(self) {
        for (client, names) in self.sim.stop_hollow_nodes() {
            link::delete_nodes(&client, &names).await;
        }
        self.clock.abort();
        self.sim.drop_vms();
        let _ = self.shutdown.send(());
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "simulator server ended with an error"),
            Err(e) => tracing::warn!(error = %e, "simulator task failed"),
        }
    }
}

/// Runs a simulator until Ctrl-C (for `slicectl sim`).
pub async fn serve_forever(cfg: SimConfig, listen: SocketAddr) -> anyhow::Result<()> {
    serve_forever_linked(cfg, listen, Vec::new()).await
}

/// Runs a simulator until Ctrl-C, with clusters linked to real API servers
/// (`slicectl sim --link-gke CLUSTER=KUBECONFIG`); each linked cluster is
/// registered if it is not already.
pub async fn serve_forever_linked(
    cfg: SimConfig,
    listen: SocketAddr,
    links: Vec<(String, link::GkeLink)>,
) -> anyhow::Result<()> {
    let handle = Simulator::start(cfg, listen).await?;
    for (cluster, link) in links {
        handle.add_cluster(&cluster)?;
        if let Err(e) = handle.link_gke(&cluster, link).await {
            handle.shutdown().await;
            return Err(e);
        }
        println!("slicectl sim: cluster {cluster} is linked to a real Kubernetes API server");
    }
    println!("slicectl sim listening on {}", handle.base_url());
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    handle.shutdown().await;
    Ok(())
}
