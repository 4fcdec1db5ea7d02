//! Deterministic fault injection: one ChaCha8 draw per API request (in
//! arrival order) decides 429 / 503, one draw per node pool or MIG create
//! decides a stockout (or a listed zone always stocks out), and an optional token bucket limits writes per second.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// GKE's default per-cluster quota of concurrent operations: "Too many
/// operations: cluster \"c\" hits the concurrent operations quota 5, please
/// try again later." (hashicorp/terraform-provider-google#15205, #15579). The
/// number is not fixed across clusters and time (AI-Hypercomputer/xpk#1068
/// starts up to 100 node pool creates at once), so it is settable.
pub const DEFAULT_OPERATION_QUOTA: u32 = 5;

/// The simulator's rules that can be switched off, and the faults it
/// injects. All rates are probabilities in `[0, 1]`. `Default` enforces GKE's
/// concurrency rules and injects no fault.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultConfig {
    /// GKE's concurrency rules, on unless switched off: one operation per
    /// node pool at a time, a cluster-level operation excludes every other
    /// write (400 FAILED_PRECONDITION "Cluster is running incompatible
    /// operation …"), and at most `operation_quota` operations run on a
    /// cluster at once (429 RESOURCE_EXHAUSTED "Too many operations …").
    pub concurrency_rules: bool,
    /// Concurrent operations allowed per cluster (with `concurrency_rules`).
    pub operation_quota: u32,
    /// Probability that any API request gets 429 RESOURCE_EXHAUSTED (rateLimitExceeded).
    pub rate_429: f64,
    /// Probability that any API request gets 503 UNAVAILABLE.
    pub rate_503: f64,
    /// Probability that a node pool create operation ends in a GCE stockout,
    /// and that a MIG create stocks out (its VMs cannot be created).
    pub stockout_rate: f64,
    /// Writes per second (token bucket, burst of one second); excess writes get 429.
    pub write_rate_limit: Option<f64>,
    /// How a stocked-out node pool create ends (see [`StockoutStatus`]).
    pub stockout_status: StockoutStatus,
    /// Specific reservations that exist, by
    /// `projects/P/zones/Z/reservations/NAME`, with their size in VMs (hosts).
    /// A node pool create that consumes a reservation (`SPECIFIC_RESERVATION`)
    /// gets 404 when it does not exist here and 429 when it lacks room for
    /// the pool's nodes (`sim::tpu_rules`).
    pub reservations: BTreeMap<String, u32>,
    /// Zones where every MIG create meets a stockout (deterministic, for
    /// tests): the MIG exists but no VM is created, and `listErrors`,
    /// `listManagedInstances` and the MIG's status report
    /// `ZONE_RESOURCE_POOL_EXHAUSTED` until the zone is removed from this
    /// list, when the MIG's retry succeeds.
    pub stockout_zones: Vec<String>,
    /// Zones short of capacity, with how many VMs of a MIG they can still
    /// create (deterministic, for tests): a MIG there needing more meets a
    /// stockout. An INDIVIDUAL MIG creates that many and keeps retrying the
    /// rest ("the MIG creates as many instances as possible with the
    /// available capacity", Compute Engine, *About bulk mode*); a BULK one
    /// creates none until all fit. Removing the zone ends it.
    pub zone_vm_limits: BTreeMap<String, u32>,
    /// Whether a simulated VM that reaches RUNNING starts its node agent
    /// (`sim::kubelet`): the startup script, `kubeadm join` and a kubelet
    /// against the cluster its metadata names.
    pub node_agents: bool,
    /// Regional TPU quotas, by `REGION/METRIC` (e.g.
    /// `us-central1/TPU_V5P`, `us-central1/TPUS_PER_TPU_FAMILY/CT6E`), in
    /// chips, the same in every project. A metric not listed is not limited:
    /// `regions.get` does not report it and Cloud Quotas gives it `-1`.
    /// `regions.get` reports the v4 and v5e ones, Cloud Quotas'
    /// `quotaInfos` the others. Usage follows the live node pools and TPU
    /// VMs (`sim::quotas`).
    pub quotas: BTreeMap<String, u64>,
    /// Discovery method ids (e.g. `compute.regions.get`) the caller lacks
    /// the permission for, or `cloudquotas.quotas.get` (Cloud Quotas'
    /// reads): answered 403 PERMISSION_DENIED (`sim::quotas`).
    pub denied_methods: Vec<String>,
    /// Milliseconds from a flex-start node pool turning RUNNING (with 0
    /// nodes) to its capacity arriving: the cluster autoscaler's scale-up
    /// of the whole slice (0 → N at once, a TPU slice being atomic), whose
    /// nodes then register. A queued-provisioning pool never gets nodes
    /// here (see `sim::gke::capacity_of`).
    pub flex_start_delay_ms: u64,
}

/// How a node pool create that meets a stockout ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StockoutStatus {
    /// The create operation fails (`error` and a `GCE_STOCKOUT` condition)
    /// and the pool is left in `ERROR`.
    #[default]
    #[serde(rename = "ERROR")]
    Error,
    /// The create operation ends `DONE` without `error`, with the
    /// `GCE_STOCKOUT` condition in its `clusterConditions`, and the pool
    /// stays `RUNNING_WITH_ERROR` while GKE keeps retrying.
    #[serde(rename = "RUNNING_WITH_ERROR")]
    RunningWithError,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            concurrency_rules: true,
            operation_quota: DEFAULT_OPERATION_QUOTA,
            rate_429: 0.0,
            rate_503: 0.0,
            stockout_rate: 0.0,
            write_rate_limit: None,
            stockout_status: StockoutStatus::Error,
            reservations: BTreeMap::new(),
            stockout_zones: Vec::new(),
            zone_vm_limits: BTreeMap::new(),
            node_agents: true,
            quotas: BTreeMap::new(),
            denied_methods: Vec::new(),
            flex_start_delay_ms: 0,
        }
    }
}

/// What the per-request draw decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestFault {
    None,
    RateLimited,
    Unavailable,
}

/// The seeded fault state.
#[derive(Debug)]
pub(crate) struct Faults {
    pub config: FaultConfig,
    rng: ChaCha8Rng,
    bucket: Option<TokenBucket>,
}

impl Faults {
    pub fn new(config: FaultConfig, seed: u64) -> Self {
        let bucket = config.write_rate_limit.map(TokenBucket::new);
        Self {
            config,
            rng: ChaCha8Rng::seed_from_u64(seed),
            bucket,
        }
    }

    /// Replaces the configuration (keeps the random stream position).
    pub fn set(&mut self, config: FaultConfig) {
        self.bucket = config.write_rate_limit.map(TokenBucket::new);
        self.config = config;
    }

    /// Exactly one draw per API request, whatever the rates.
    pub fn draw_request(&mut self) -> RequestFault {
        let u: f64 = self.rng.random();
        if u < self.config.rate_429 {
            RequestFault::RateLimited
        } else if u < self.config.rate_429 + self.config.rate_503 {
            RequestFault::Unavailable
        } else {
            RequestFault::None
        }
    }

    /// Whether a MIG create in `zone` meets a stockout: always in
    /// `stockout_zones`, else one draw against `stockout_rate` (exactly one
    /// draw per MIG create outside those zones).
    pub fn draw_mig_stockout(&mut self, zone: &str) -> bool {
        if self.config.stockout_zones.iter().any(|z| z == zone) {
            return true;
        }
        self.draw_stockout()
    }

    /// Exactly one draw per node pool create.
    pub fn draw_stockout(&mut self) -> bool {
        let u: f64 = self.rng.random();
        u < self.config.stockout_rate
    }

    /// Takes a write token; false when the write rate limit is exceeded.
    pub fn take_write_token(&mut self, now: Instant) -> bool {
        match &mut self.bucket {
            Some(b) => b.take(now),
            None => true,
        }
    }
}

/// A token bucket refilled at `rate` tokens/second, holding at most
/// `max(rate, 1)` tokens.
#[derive(Debug)]
struct TokenBucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    fn new(rate: f64) -> Self {
        let capacity = rate.max(1.0);
        Self {
            rate: rate.max(0.0),
            capacity,
            tokens: capacity,
            last: None,
        }
    }

    fn take(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + dt * self.rate).min(self.capacity);
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_decisions() {
        let cfg = FaultConfig {
            rate_429: 0.3,
            rate_503: 0.2,
            ..Default::default()
        };
        let mut a = Faults::new(cfg.clone(), 7);
        let mut b = Faults::new(cfg, 7);
        let da: Vec<_> = (0..64).map(|_| a.draw_request()).collect();
        let db: Vec<_> = (0..64).map(|_| b.draw_request()).collect();
        assert_eq!(da, db);
        assert!(da.contains(&RequestFault::RateLimited));
        assert!(da.contains(&RequestFault::Unavailable));
        assert!(da.contains(&RequestFault::None));
    }

    #[test]
    fn bucket_limits_burst_then_refills() {
        let mut f = Faults::new(
            FaultConfig {
                write_rate_limit: Some(2.0),
                ..Default::default()
            },
            1,
        );
        let t0 = Instant::now();
        assert!(f.take_write_token(t0));
        assert!(f.take_write_token(t0));
        assert!(!f.take_write_token(t0));
        assert!(f.take_write_token(t0 + std::time::Duration::from_millis(600)));
    }
}
