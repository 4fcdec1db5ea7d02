//! `slicectl controller`: the in-cluster loop. Specs from a ConfigMap (an
//! API watch) or a mounted directory; the same library cycle
//! ([`crate::cycle::run_cycle`]) as `reconcile --watch`, single-flight, on
//! each change and every resync; only while this replica leads (a Lease);
//! status objects after each cycle; `/healthz`, `/readyz`, `/metrics`;
//! capacity-aware retries. This file only wires them.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::sync::{mpsc, watch as tokio_watch};

use super::args::{Connection, ControllerArgs, Exec, Safety};
use super::cycle::{LoopConnect, TerminalSink, Wording};
use super::{EXIT_ERROR, EXIT_OK};
use crate::controller as ctl_mod;
use crate::controller::capacity::{CapacityTracker, RetryPolicy};
use crate::controller::configmap;
use crate::controller::metrics::Metrics;
use crate::controller::owner;
use crate::controller::server::{self, Health};
use crate::controller::shard::{HeldShards, ShardConfig, ShardEvent, ShardScope, Shards};
use crate::controller::sink::ControllerSink;
use crate::cycle::{
    AnySource, ConfigMapSetSource, ConfigMapSource, CycleState, DirSource, GitSource, SpecSource,
    run_cycle,
};
use crate::source::git::GitRef;
use crate::status_object::StatusWriter;
use crate::watch::{self, LOG_TARGET, LoopEnd, LoopOptions, Trigger};

/// Default ConfigMap.
pub const DEFAULT_CONFIGMAP: &str = "slicectl-specs";

/// `slicectl controller`.
pub(super) async fn run(
    ctl: ControllerArgs,
    conn: Connection,
    safety: Safety,
    exec: Exec,
) -> Result<u8> {
    if conn.sim {
        // The controller's whole job is writing to its cluster (a Lease,
        // SliceStatus objects, Events); under --sim nothing real is written.
        anyhow::bail!(
            "slicectl controller does not take --sim: it writes a Lease, status objects and Events to \
             its cluster, and --sim promises that nothing real is touched. To run the controller \
             against the simulator, start `slicectl sim --listen ADDR` and pass `--api-endpoint \
             http://ADDR` (its Google side is then simulated; its cluster is the real one it runs in)"
        );
    }
    let namespace = ctl_mod::namespace(ctl.namespace.as_deref());
    let identity = ctl_mod::identity();
    let metrics = Metrics::new();
    {
        let m = metrics.clone();
        crate::cloud::set_request_observer(Box::new(move |method, code| {
            m.cloud_request(method, code);
        }));
    }
    let health = Arc::new(Health {
        ready: std::sync::atomic::AtomicBool::new(false),
        waiting: Mutex::new(None),
        metrics: metrics.clone(),
    });
    let bound = server::serve(ctl.listen, health.clone())
        .await
        .with_context(|| {
            format!(
                "cannot serve /healthz, /readyz and /metrics on {}",
                ctl.listen
            )
        })?;
    let client = kube::Client::try_default().await.context(
        "cannot configure the Kubernetes client (in-cluster service account, or KUBECONFIG)",
    )?;
    // The owner of the status objects, read once: a Deployment that cannot
    // be read stops the controller here, before it leads or writes anything.
    let owner = match &ctl.owner_deployment {
        Some(name) => {
            let api = kube::Api::<Deployment>::namespaced(client.clone(), &namespace);
            let r = owner::resolve(&api, &namespace, name, owner::RETRY).await?;
            tracing::info!(
                target: LOG_TARGET,
                namespace = %namespace,
                deployment = %r.name,
                uid = %r.uid,
                "the status objects are owned by this Deployment (deleting it garbage-collects them)"
            );
            Some(r)
        }
        None => None,
    };
    let (mut signals, stop) =
        watch::forward_signals().context("cannot listen for SIGINT and SIGTERM")?;
    let (tx, changes) = tokio::sync::mpsc::unbounded_channel();
    // Workload-driven slices: a pending leader pod or an ended JobSet runs a
    // cycle at once (docs/workloads.md), through the same channel.
    let wake = tx.clone();
    let source = match (&ctl.dir, &ctl.git_ref) {
        (Some(dir), Some(reference)) => {
            let git = GitRef {
                dir: dir.clone(),
                reference: reference.clone(),
            };
            watch::watch_git(git.clone(), watch::GIT_POLL, tx)
                .context("cannot start the revision watcher thread")?;
            AnySource::Git(GitSource { git })
        }
        (Some(dir), None) => {
            watch::watch_dir(dir.clone(), ctl.debounce, tx)
                .context("cannot start the directory watcher thread")?;
            AnySource::Dir(DirSource { dir: dir.clone() })
        }
        (None, _) if ctl.configmap_selector.is_some() => {
            let selector = ctl.configmap_selector.clone().unwrap_or_default();
            let (ltx, lrx) = tokio::sync::watch::channel(None);
            let api = kube::Api::<ConfigMap>::namespaced(client.clone(), &namespace);
            tokio::spawn(configmap::watch_selected(api, selector.clone(), ltx, tx));
            AnySource::ConfigMaps(ConfigMapSetSource {
                selector,
                latest: lrx,
            })
        }
        (None, _) => {
            let name = ctl
                .configmap
                .clone()
                .unwrap_or_else(|| DEFAULT_CONFIGMAP.to_string());
            let (ltx, lrx) = tokio::sync::watch::channel(None);
            let api = kube::Api::<ConfigMap>::namespaced(client.clone(), &namespace);
            tokio::spawn(configmap::watch(api, name.clone(), ltx, tx));
            AnySource::ConfigMap(ConfigMapSource { name, latest: lrx })
        }
    };
    tracing::info!(
        target: LOG_TARGET,
        namespace = %namespace,
        identity = %identity,
        source = %source.describe(),
        listen = %bound,
        "slicectl controller starting"
    );
    // Ready once the specs were read once.
    if let AnySource::ConfigMap(ConfigMapSource { latest, .. }) = &source {
        let mut latest = latest.clone();
        tokio::select! {
            _ = signals.recv() => return Ok(EXIT_OK),
            r = latest.wait_for(Option::is_some) => {
                r.context("the ConfigMap watch stopped before reading the ConfigMap")?;
            }
        }
    }
    if let AnySource::ConfigMaps(ConfigMapSetSource { latest, selector }) = &source {
        let mut latest = latest.clone();
        tokio::select! {
            _ = signals.recv() => return Ok(EXIT_OK),
            r = latest.wait_for(Option::is_some) => {
                r.with_context(|| format!(
                    "the ConfigMap watch stopped before listing the ConfigMaps matching {selector}"
                ))?;
            }
        }
    }
    health.ready.store(true, Ordering::Relaxed);

    metrics.shards.set(i64::from(ctl.shards));
    let (gate, mut lease) = if ctl.shards > 1 {
        // Sharded: no waiting; cycles run while any shard is held.
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        let (etx, erx) = tokio::sync::mpsc::unbounded_channel();
        let shards = Shards::start(
            client.clone(),
            ShardConfig {
                namespace: namespace.clone(),
                lease_name: ctl.lease_name.clone(),
                identity: identity.clone(),
                shards: ctl.shards,
                duration: ctl.lease_duration,
            },
            gate.clone(),
            etx,
        );
        tracing::info!(target: LOG_TARGET, shards = ctl.shards, lease = %ctl.lease_name, "sharded: reconciling the Targets of the shard Leases this replica holds");
        (Some(gate), Lease::Sharded(shards, erx))
    } else {
        match lead(&client, &ctl, &namespace, &identity, &mut signals).await? {
            Some(l) => {
                metrics.leader.set(1);
                metrics.shards_held.set(1);
                (None, l)
            }
            None => return Ok(EXIT_OK),
        }
    };

    let broken_since: Arc<Mutex<Option<Instant>>> = Arc::default();
    {
        let (b, m) = (broken_since.clone(), metrics.clone());
        tokio::spawn(async move {
            loop {
                let age = b
                    .lock()
                    .ok()
                    .and_then(|g| *g)
                    .map_or(0.0, |t| t.elapsed().as_secs_f64());
                m.last_good_age.set(age);
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
    }
    let mut writer = StatusWriter::new(client.clone(), &namespace, Some(identity.clone()));
    if let Some(owner) = owner {
        writer = writer.with_owner(owner);
    }
    let cycles = CycleState::new(super::converge_options(&safety, &exec), stop)
        .with_settle(ctl.settle)
        .with_capacity(CapacityTracker::new(RetryPolicy {
            cache_ttl: ctl.capacity_cache_ttl,
            initial: ctl.capacity_backoff,
            max: ctl.capacity_backoff_max,
        }));
    let sink = ControllerSink {
        printer: TerminalSink {
            wording: Wording::Controller(source.describe()),
        },
        metrics: metrics.clone(),
        status: writer,
        stall_after: ctl.stall_after,
        broken_since,
    };
    let state = Arc::new(tokio::sync::Mutex::new(Controller {
        source,
        sink,
        connect: LoopConnect::new(conn),
        state: cycles,
        wake: wake.clone(),
        watched: std::collections::BTreeSet::new(),
    }));
    let opts = LoopOptions {
        resync: ctl.resync,
        grace: ctl.grace,
    };
    let s = state.clone();
    let scoped = lease.scoped(ctl.shards, gate, metrics.clone());
    // One writer per Target across modes: a leader (`--shards 1`) and
    // sharded replicas hold different Leases, so each looks at the other
    // mode's before every cycle, once its own is held.
    let other_mode = Arc::new(ctl_mod::mode::Watcher {
        client: client.clone(),
        namespace: namespace.clone(),
        lease_name: ctl.lease_name.clone(),
        shards: ctl.shards,
        identity: identity.clone(),
        metrics: metrics.clone(),
        health: health.clone(),
        wake: wake.clone(),
        tick: (ctl.lease_duration / 4).max(Duration::from_millis(500)),
        again: Arc::default(),
    });
    let mode = other_mode.clone();
    let cycles = watch::run(opts, changes, signals, move |trigger| {
        let (s, scoped, other_mode) = (s.clone(), scoped.clone(), other_mode.clone());
        async move {
            // Sharded: the gate is held for the whole cycle, so a shard is
            // released only between cycles; no shard held, no cycle.
            let (_cycle, scope) = match scoped {
                Some(sc) => match sc.enter().await {
                    Some(x) => x,
                    None => return None,
                },
                None => (None, None),
            };
            if !other_mode.may_run().await {
                return None;
            }
            let mut c = s.lock().await;
            if scope.is_some() {
                c.state.set_scope(scope.clone());
                c.sink.status.set_scope(scope);
            }
            c.cycle(trigger).await
        }
    });
    let end = tokio::select! {
        end = cycles => end,
        what = lease.lost(&wake, &metrics, &mode) => {
            metrics.leader.set(0);
            metrics.shards_held.set(0);
            tracing::error!(target: LOG_TARGET, lease = %what, "lost a Lease this replica writes under: stopping at once, writing nothing more; another replica takes over and continues from the live state");
            eprintln!("error: lost {what} in namespace {namespace}; exiting so that only its new holder writes");
            // Exit now: in-flight requests and tasks are dropped with the
            // process, so nothing more is written by this replica.
            std::process::exit(i32::from(EXIT_ERROR));
        }
    };
    metrics.leader.set(0);
    metrics.shards_held.set(0);
    // Releasing the Lease(s) lets another replica take over early.
    lease.release().await;
    state.lock().await.connect.close().await;
    Ok(match end {
        LoopEnd::Stopped => {
            tracing::info!(target: LOG_TARGET, "stopped");
            EXIT_OK
        }
        LoopEnd::Abandoned => {
            eprintln!(
                "error: the in-flight cycle was abandoned; operations it started go on in the cloud, and the next leader observes them and continues from the live state"
            );
            EXIT_ERROR
        }
    })
}

/// What this replica writes under: the leader Lease, or shard Leases.
enum Lease {
    /// One leader (`--shards 1`): its Lease flag and the manager's task.
    Leader(
        String,
        tokio_watch::Receiver<bool>,
        tokio::task::JoinHandle<
            std::result::Result<
                kube_lease_manager::LeaseManager,
                kube_lease_manager::LeaseManagerError,
            >,
        >,
    ),
    /// Sharded: the coordinator and its events.
    Sharded(Shards, mpsc::UnboundedReceiver<ShardEvent>),
}

/// What a sharded cycle needs: the held shards and the gate.
#[derive(Clone)]
struct Scoped {
    shards: u32,
    held: HeldShards,
    gate: Arc<tokio::sync::Mutex<()>>,
    metrics: Metrics,
}

impl Scoped {
    /// Enters a cycle: the gate, and the scope of the shards held now;
    /// `None` (no cycle) while none is held.
    async fn enter(
        &self,
    ) -> Option<(Option<tokio::sync::OwnedMutexGuard<()>>, Option<ShardScope>)> {
        let guard = self.gate.clone().lock_owned().await;
        let held = self.held.get();
        self.metrics
            .shards_held
            .set(i64::try_from(held.len()).unwrap_or(i64::MAX));
        self.metrics.leader.set(i64::from(!held.is_empty()));
        if held.is_empty() {
            tracing::debug!(target: LOG_TARGET, "no shard held: no cycle");
            return None;
        }
        Some((
            Some(guard),
            Some(ShardScope {
                shards: self.shards,
                held,
            }),
        ))
    }
}

impl Lease {
    /// The sharded cycle's scope, when sharded.
    fn scoped(
        &self,
        shards: u32,
        gate: Option<Arc<tokio::sync::Mutex<()>>>,
        metrics: Metrics,
    ) -> Option<Scoped> {
        match (self, gate) {
            (Lease::Sharded(s, _), Some(gate)) => Some(Scoped {
                shards,
                held: s.held(),
                gate,
                metrics,
            }),
            _ => None,
        }
    }

    /// Resolves with the Lease (`the leader Lease NAME`, `the shard Lease
    /// NAME`) when a Lease this replica writes under is lost; meanwhile (sharded) each acquired shard runs a cycle.
    async fn lost(
        &mut self,
        wake: &tokio::sync::mpsc::UnboundedSender<()>,
        metrics: &Metrics,
        other_mode: &ctl_mod::mode::Watcher,
    ) -> String {
        match self {
            Lease::Leader(name, rx, _) => {
                let _ = rx.wait_for(|l| !*l).await;
                format!("the leader Lease {name}")
            }
            Lease::Sharded(s, events) => loop {
                match events.recv().await {
                    Some(ShardEvent::Acquired(_)) => {
                        let n = s.held().get().len();
                        metrics
                            .shards_held
                            .set(i64::try_from(n).unwrap_or(i64::MAX));
                        metrics.leader.set(1);
                        let _ = wake.send(());
                    }
                    // Released: the gauges say so at once, not at the next
                    // cycle (a replica holding nothing runs none).
                    Some(ShardEvent::Released(_)) => {
                        let n = s.held().get().len();
                        metrics
                            .shards_held
                            .set(i64::try_from(n).unwrap_or(i64::MAX));
                        metrics.leader.set(i64::from(n > 0));
                    }
                    // The coordinator holds no shard while a leader runs:
                    // said as the cycle's look says it.
                    Some(ShardEvent::OtherMode(why)) => {
                        other_mode.say(why);
                    }
                    Some(ShardEvent::Lost(k)) => {
                        return format!("the shard Lease {}", s.lease_name(k));
                    }
                    None => std::future::pending::<()>().await,
                }
            },
        }
    }

    /// Releases the Lease(s) (a clean stop).
    async fn release(self) {
        match self {
            Lease::Leader(_, rx, task) => {
                // Closing the channel releases the Lease.
                drop(rx);
                let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
            }
            Lease::Sharded(s, _) => s.stop().await,
        }
    }
}

/// Waits until this replica holds the leader Lease (`--shards 1`); `None`
/// when stopped first.
async fn lead(
    client: &kube::Client,
    ctl: &ControllerArgs,
    namespace: &str,
    identity: &str,
    signals: &mut mpsc::UnboundedReceiver<()>,
) -> Result<Option<Lease>> {
    let manager = crate::controller::lease::manager(
        client,
        namespace,
        &ctl.lease_name,
        identity,
        ctl.lease_duration,
    )
    .await
    .context("cannot set up leader election")?;
    let (mut leading, lease_task) = manager.watch().await;
    tracing::info!(target: LOG_TARGET, lease = %ctl.lease_name, "standing by until this replica holds the leader Lease");
    let became_leader = tokio::select! {
        _ = signals.recv() => false,
        r = leading.wait_for(|l| *l) => {
            r.context("leader election stopped")?;
            true
        }
    };
    if !became_leader {
        drop(leading);
        let _ = tokio::time::timeout(Duration::from_secs(5), lease_task).await;
        return Ok(None);
    }
    tracing::info!(target: LOG_TARGET, lease = %ctl.lease_name, identity = %identity, "leading: reconciling");
    Ok(Some(Lease::Leader(
        ctl.lease_name.clone(),
        leading,
        lease_task,
    )))
}

/// Starts the watches of pending pods and JobSets in the clusters of the
/// fleet's workload-enabled Targets not watched yet (a watch that cannot
/// start is tried again after the next cycle; the resync still runs).
async fn watch_workloads(
    fleet: &crate::spec::Fleet,
    connect: &mut LoopConnect,
    wake: &tokio::sync::mpsc::UnboundedSender<()>,
    watched: &mut std::collections::BTreeSet<crate::resource::KubeRef>,
) {
    use crate::cycle::Connect;
    let todo: Vec<_> = crate::observe::demand_clusters(fleet)
        .into_iter()
        .filter(|k| !watched.contains(k))
        .collect();
    if todo.is_empty() {
        return;
    }
    let Ok(cloud) = connect.cloud(fleet).await else {
        return;
    };
    for k in todo {
        if cloud.kube.deferred(&k).is_some() {
            continue;
        }
        match cloud.kube.watch_workloads(&k, wake.clone()).await {
            Ok(()) => {
                tracing::info!(target: LOG_TARGET, cluster = %k.endpoint, "watching pending TPU pods and JobSets: a pending leader pod or an ended JobSet runs a cycle at once");
                watched.insert(k);
            }
            Err(e) => {
                tracing::warn!(target: LOG_TARGET, cluster = %k.endpoint, error = %e, "cannot watch pending pods and JobSets; the resync still picks them up, and the watch is tried again after the next cycle");
            }
        }
    }
}

/// The controller's wiring: its source, its sink (the printer, metrics
/// and status objects) and connection, and what the library cycle keeps
/// between cycles.
struct Controller {
    source: AnySource,
    sink: ControllerSink<TerminalSink, StatusWriter>,
    connect: LoopConnect,
    state: CycleState,
    /// Sends a cycle trigger (workload watches).
    wake: tokio::sync::mpsc::UnboundedSender<()>,
    /// Clusters whose pending pods and JobSets are watched.
    watched: std::collections::BTreeSet<crate::resource::KubeRef>,
}

impl Controller {
    /// One cycle; when it held steps for a `--dir` or `--configmap-selector`
    /// source to settle, the time to run the next.
    async fn cycle(&mut self, trigger: Trigger) -> Option<(tokio::time::Instant, Trigger)> {
        let Controller {
            source,
            sink,
            connect,
            state,
            wake,
            watched,
        } = self;
        run_cycle(state, source, connect, sink, trigger).await;
        watch_workloads(state.last_fleet(), connect, wake, watched).await;
        state.wake_at()
    }
}
