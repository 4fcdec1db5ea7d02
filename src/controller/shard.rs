//! Sharding (`slicectl controller --shards N`, N > 1): replicas share the
//! fleet by Target, one Lease per shard (docs/controller.md, "Sharding").
//!
//! - Each Target belongs to shard [`shard_of`]: a SHA-256 of its name,
//!   modulo N (a fixed hash, the same in every replica and release).
//! - Each replica renews a *membership* Lease (`<lease>-member-<identity>`,
//!   labelled [`CONTROLLER_LABEL`]); the live members are those whose Lease
//!   has not expired.
//! - [`assign`] decides, from the live members and each shard Lease's live
//!   holder, who should hold each shard: a live holder keeps its shards up
//!   to its fair quota (so a member leaving moves only its own shards), the
//!   rest go to the least-loaded members, ties broken by rendezvous hashing.
//! - A replica contends (kube-lease-manager) only for the shard Leases
//!   (`<lease>-<k>`) assigned to it, and releases a shard no longer assigned
//!   to it after its in-flight cycle. A shard Lease is never taken from a
//!   live holder: it is acquired when free or expired.
//!
//! Only Kubernetes' own Leases coordinate; nothing else is shared.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use tokio::sync::{mpsc, watch};

pub use crate::spec::shard::{ShardScope, shard_of, stable_hash};
use crate::watch::LOG_TARGET;

/// Label on the membership Leases: the name of the controller's Lease.
pub const CONTROLLER_LABEL: &str = "slicectl.dev/controller";
/// Label on the membership Leases: the member's number of shards.
pub const SHARDS_LABEL: &str = "slicectl.dev/shards";
/// Label on each SliceStatus written by a sharded controller: its shard.
pub const SHARD_LABEL: &str = "slicectl.dev/shard";
/// Field manager of the membership Leases (each replica applies only its
/// own membership Lease, with `force`).
const MANAGER: &str = "slicectl";

/// Rendezvous (highest random weight) score of `member` for `shard`.
fn score(member: &str, shard: u32) -> u64 {
    stable_hash(&[member, &shard.to_string()])
}

/// Who should hold each of `shards` shards, given the live `members` and
/// each shard's live holder (`holders`; a holder that is not a live member
/// counts as none). Deterministic; balanced (loads differ by at most one);
/// sticky: a live holder keeps its shards up to its quota, so a member
/// leaving moves only its own shards, and a member joining takes only the
/// shards the others shed to make room. Empty when there are no members.
pub fn assign(
    shards: u32,
    members: &BTreeSet<String>,
    holders: &BTreeMap<u32, String>,
) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    let m = u32::try_from(members.len()).unwrap_or(u32::MAX);
    if m == 0 {
        return out;
    }
    // What each live member holds now, best-scored first.
    let mut kept: BTreeMap<&str, Vec<u32>> = members.iter().map(|x| (x.as_str(), vec![])).collect();
    for (k, h) in holders.iter().filter(|(k, _)| **k < shards) {
        if let Some(v) = kept.get_mut(h.as_str()) {
            v.push(*k);
        }
    }
    for (h, v) in &mut kept {
        v.sort_by_key(|k| std::cmp::Reverse(score(h, *k)));
    }
    // Quotas: `shards % m` members get one more; those holding most first
    // (then by name), so that nobody sheds what a fair split lets it keep.
    let (floor, extra) = (shards / m, shards % m);
    let mut order: Vec<&str> = kept.keys().copied().collect();
    order.sort_by_key(|x| (std::cmp::Reverse(kept[x].len()), *x));
    let quota: BTreeMap<&str, u32> = order
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let more = u32::try_from(i).is_ok_and(|i| i < extra);
            (*x, floor + u32::from(more))
        })
        .collect();
    let mut load: BTreeMap<&str, u32> = BTreeMap::new();
    for (h, v) in &kept {
        let q = usize::try_from(quota[h]).unwrap_or(usize::MAX);
        for k in v.iter().take(q) {
            out.insert(*k, (*h).to_string());
        }
        load.insert(h, u32::try_from(v.len().min(q)).unwrap_or(u32::MAX));
    }
    // Free shards: to the least-loaded member under its quota, the best
    // rendezvous score breaking ties.
    for k in 0..shards {
        if out.contains_key(&k) {
            continue;
        }
        let pick = load
            .iter()
            .filter(|(x, l)| **l < quota[**x])
            .min_by_key(|(x, l)| (**l, std::cmp::Reverse(score(x, k))))
            .map(|(x, _)| *x);
        if let Some(x) = pick {
            out.insert(k, x.to_string());
            if let Some(l) = load.get_mut(x) {
                *l += 1;
            }
        }
    }
    out
}

/// The name of shard `k`'s Lease.
pub fn shard_lease(lease_name: &str, k: u32) -> String {
    format!("{lease_name}-{k}")
}

/// The name of `identity`'s membership Lease.
pub fn member_lease(lease_name: &str, identity: &str) -> String {
    format!("{lease_name}-member-{identity}")
}

/// What the coordinator reports to the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardEvent {
    /// Shard acquired: run a cycle.
    Acquired(u32),
    /// Shard Lease lost while this replica still meant to hold it: stop
    /// writing at once.
    Lost(u32),
    /// Shard Lease released after the in-flight cycle: assigned to another
    /// replica, or held off while a live member runs another N.
    Released(u32),
    /// A controller of the other mode (a leader, `--shards 1`) runs: why
    /// this replica holds no shard; `None` once it is gone.
    OtherMode(Option<String>),
}

/// Settings of the coordinator.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// Namespace of the Leases.
    pub namespace: String,
    /// The controller's Lease name: shard Leases are `<name>-<k>`.
    pub lease_name: String,
    /// This replica.
    pub identity: String,
    /// Number of shards.
    pub shards: u32,
    /// Lease duration of the membership and shard Leases.
    pub duration: Duration,
}

/// One shard Lease this replica contends for or holds.
struct Contender {
    held: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<
        std::result::Result<
            kube_lease_manager::LeaseManager,
            kube_lease_manager::LeaseManagerError,
        >,
    >,
    /// Reports acquisition and loss as they happen.
    watcher: tokio::task::JoinHandle<()>,
}

/// Each contended shard's "held" flag, shared with the controller.
type Registry = Arc<std::sync::Mutex<BTreeMap<u32, watch::Receiver<bool>>>>;

/// What the controller reads: the shards held now.
#[derive(Clone)]
pub struct HeldShards(Registry);

impl HeldShards {
    /// The shards held now.
    pub fn get(&self) -> BTreeSet<u32> {
        self.0
            .lock()
            .map(|r| {
                r.iter()
                    .filter(|(_, rx)| *rx.borrow())
                    .map(|(k, _)| *k)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The shards this replica holds, kept by a background task.
pub struct Shards {
    lease: String,
    registry: Registry,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Shards {
    /// Starts the coordinator. `gate` is held by the controller during a
    /// cycle: a shard is released only while it is free (after the
    /// in-flight cycle). Events go to `events`.
    pub fn start(
        client: kube::Client,
        cfg: ShardConfig,
        gate: Arc<tokio::sync::Mutex<()>>,
        events: mpsc::UnboundedSender<ShardEvent>,
    ) -> Shards {
        let registry = Registry::default();
        let lease = cfg.lease_name.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(coordinate(
            client,
            cfg,
            gate,
            events,
            registry.clone(),
            stopped,
        ));
        Shards {
            lease,
            registry,
            stop: Some(stop),
            task,
        }
    }

    /// The name of shard `k`'s Lease.
    pub fn lease_name(&self, k: u32) -> String {
        shard_lease(&self.lease, k)
    }

    /// The shards held, as they change.
    pub fn held(&self) -> HeldShards {
        HeldShards(self.registry.clone())
    }

    /// Releases every shard Lease and deletes the membership Lease (a clean
    /// stop: the others take over at once).
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.task).await;
    }
}

/// The coordinator loop: renew membership, observe, assign, contend or
/// release; every quarter of the lease duration (at least 500 ms).
async fn coordinate(
    client: kube::Client,
    cfg: ShardConfig,
    gate: Arc<tokio::sync::Mutex<()>>,
    events: mpsc::UnboundedSender<ShardEvent>,
    registry: Registry,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let api = Api::<Lease>::namespaced(client.clone(), &cfg.namespace);
    let tick = (cfg.duration / 4).max(Duration::from_millis(500));
    let mut contenders: BTreeMap<u32, Contender> = BTreeMap::new();
    // Shards being released (waiting for the in-flight cycle).
    let releasing: Arc<std::sync::Mutex<BTreeSet<u32>>> = Arc::default();
    let mut warned = false;
    let mut other: Option<String> = None;
    loop {
        match step(&api, &cfg).await {
            Ok((mine, now_other)) => {
                warned = false;
                if now_other != other {
                    other = now_other;
                    let _ = events.send(ShardEvent::OtherMode(other.clone()));
                }
                for k in &mine {
                    let busy = releasing.lock().map(|r| r.contains(k)).unwrap_or(true);
                    if contenders.contains_key(k) || busy {
                        continue;
                    }
                    match contend(&client, &cfg, *k, events.clone()).await {
                        Ok(c) => {
                            if let Ok(mut r) = registry.lock() {
                                r.insert(*k, c.held.clone());
                            }
                            contenders.insert(*k, c);
                        }
                        Err(e) => {
                            tracing::warn!(target: LOG_TARGET, shard = k, error = %format!("{e:#}"), "cannot contend for a shard Lease; tried again on the next tick");
                        }
                    }
                }
                let gone: Vec<u32> = contenders
                    .keys()
                    .filter(|k| !mine.contains(k))
                    .copied()
                    .collect();
                for k in gone {
                    let Some(c) = contenders.remove(&k) else {
                        continue;
                    };
                    // After the in-flight cycle: once the gate is ours, no
                    // cycle writes for this shard again. In a task of its
                    // own, so that membership keeps being renewed while a
                    // long cycle runs; not contended for again meanwhile.
                    if let Ok(mut r) = releasing.lock() {
                        r.insert(k);
                    }
                    let (gate, registry, releasing, events) = (
                        gate.clone(),
                        registry.clone(),
                        releasing.clone(),
                        events.clone(),
                    );
                    let lease = shard_lease(&cfg.lease_name, k);
                    tokio::spawn(async move {
                        let _cycle = gate.lock().await;
                        let was = *c.held.borrow();
                        release(&registry, k, c).await;
                        if was {
                            tracing::info!(target: LOG_TARGET, shard = k, lease = %lease, "released a shard Lease: another replica is assigned it");
                            let _ = events.send(ShardEvent::Released(k));
                        }
                        if let Ok(mut r) = releasing.lock() {
                            r.remove(&k);
                        }
                    });
                }
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(target: LOG_TARGET, error = %format!("{e:#}"), "cannot renew membership or list the Leases; the shards held are kept while their Leases are renewed");
                }
                warned = true;
            }
        }
        tokio::select! {
            _ = &mut stopped => break,
            _ = tokio::time::sleep(tick) => {}
        }
    }
    for (k, c) in std::mem::take(&mut contenders) {
        release(&registry, k, c).await;
    }
    let name = member_lease(&cfg.lease_name, &cfg.identity);
    if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
        tracing::warn!(target: LOG_TARGET, lease = %name, error = %e, "cannot delete the membership Lease; it expires within the lease duration");
    }
}

/// Stops reporting on shard `k` and drops every receiver of its flag (the
/// manager's task then releases the Lease if held), and waits for it.
async fn release(registry: &Registry, k: u32, c: Contender) {
    if let Ok(mut r) = registry.lock() {
        r.remove(&k);
    }
    let Contender {
        held,
        task,
        watcher,
    } = c;
    watcher.abort();
    let _ = watcher.await;
    drop(held);
    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
}

/// Starts contending for shard `k`'s Lease.
async fn contend(
    client: &kube::Client,
    cfg: &ShardConfig,
    k: u32,
    events: mpsc::UnboundedSender<ShardEvent>,
) -> Result<Contender> {
    let name = shard_lease(&cfg.lease_name, k);
    let manager =
        super::lease::manager(client, &cfg.namespace, &name, &cfg.identity, cfg.duration).await?;
    let (held, task) = manager.watch().await;
    let mut rx = held.clone();
    let watcher = tokio::spawn(async move {
        if rx.wait_for(|l| *l).await.is_err() {
            return;
        }
        let _ = events.send(ShardEvent::Acquired(k));
        // Lost: the flag drops, or the manager stopped while holding.
        let _ = rx.wait_for(|l| !*l).await;
        let _ = events.send(ShardEvent::Lost(k));
    });
    Ok(Contender {
        held,
        task,
        watcher,
    })
}

/// Whether the other-N warning for `member` was already logged (once per
/// member, not every tick).
fn split_warned(member: &str) -> bool {
    static SEEN: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());
    SEEN.lock()
        .map(|mut s| !s.insert(member.to_string()))
        .unwrap_or(true)
}

/// One tick: renews this replica's membership Lease, lists the Leases, and
/// returns the shards assigned to this replica, and why it holds none when
/// a controller of the other mode runs ([`super::mode`]).
async fn step(api: &Api<Lease>, cfg: &ShardConfig) -> Result<(BTreeSet<u32>, Option<String>)> {
    let me = member_lease(&cfg.lease_name, &cfg.identity);
    let secs = i32::try_from(cfg.duration.as_secs().max(3)).unwrap_or(i32::MAX);
    let body = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": me, "labels": {
            CONTROLLER_LABEL: cfg.lease_name,
            SHARDS_LABEL: cfg.shards.to_string(),
        }},
        "spec": {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": secs,
            "renewTime": MicroTime(jiff::Timestamp::now()),
        },
    });
    api.patch(
        &me,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .with_context(|| format!("cannot renew membership Lease {}/{me}", cfg.namespace))?;
    let leases = api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("cannot list the Leases in namespace {}", cfg.namespace))?;
    let now = jiff::Timestamp::now();
    let live = |l: &Lease| super::mode::live_holder(l, now);
    // A leader (`--shards 1`) runs: it writes every Target, so this replica
    // holds no shard until it is gone.
    if let Some(why) = super::mode::other_mode(
        &leases.items,
        &cfg.lease_name,
        cfg.shards,
        &cfg.identity,
        now,
    ) {
        return Ok((BTreeSet::new(), Some(why)));
    }
    let mut members = BTreeSet::new();
    let mut holders = BTreeMap::new();
    let shard_names: BTreeMap<String, u32> = (0..cfg.shards)
        .map(|k| (shard_lease(&cfg.lease_name, k), k))
        .collect();
    for l in &leases.items {
        let name = l.metadata.name.clone().unwrap_or_default();
        let ours = l
            .metadata
            .labels
            .as_ref()
            .and_then(|x| x.get(CONTROLLER_LABEL))
            .is_some_and(|v| *v == cfg.lease_name);
        if ours && name.starts_with(&format!("{}-member-", cfg.lease_name)) {
            let Some(m) = live(l) else { continue };
            let theirs = l.metadata.labels.as_ref().and_then(|x| x.get(SHARDS_LABEL));
            if theirs.map(String::as_str) != Some(cfg.shards.to_string().as_str()) {
                // Another N splits the fleet differently: the same shard
                // Lease would stand for other Targets. Hold nothing until
                // that member is gone (a rollout changing --shards).
                if !split_warned(&m) {
                    tracing::warn!(target: LOG_TARGET, member = %m, theirs = ?theirs, ours = cfg.shards, "a live replica runs with another --shards: holding no shard until it is gone");
                }
                return Ok((BTreeSet::new(), None));
            }
            members.insert(m);
        } else if let Some(k) = shard_names.get(&name)
            && let Some(h) = live(l)
        {
            holders.insert(*k, h);
        }
    }
    // This replica is a member even if the list raced its renewal.
    members.insert(cfg.identity.clone());
    Ok((
        assign(cfg.shards, &members, &holders)
            .into_iter()
            .filter(|(_, h)| *h == cfg.identity)
            .map(|(k, _)| k)
            .collect(),
        None,
    ))
}

#[cfg(test)]
mod tests;
