//! The simulator's world: clusters, node pools, resource policies,
//! instance templates, MIGs, VMs and operations, behind one mutex. Operations complete lazily: every request
//! first calls [`Inner::advance`], which finishes the operations whose
//! completion time has passed (in completion order) and applies their effects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::faults::Faults;
use super::gce::{self, MigRec, TemplateRec, VmRec};
use super::operations::{ComputeEffect, ComputeOp, GkeEffect, GkeOp};
use super::stats::SimStats;

/// A node pool as stored: the normalised request plus server defaults, and
/// its runtime status.
#[derive(Debug, Clone)]
pub(crate) struct PoolRec {
    /// `NodePool` JSON without status/selfLink/etag/instanceGroupUrls.
    pub spec: Value,
    /// PROVISIONING, RUNNING, RUNNING_WITH_ERROR, RECONCILING, STOPPING, ERROR.
    pub status: &'static str,
    pub status_message: Option<String>,
    pub conditions: Vec<Value>,
}

/// A resource policy as stored.
#[derive(Debug, Clone)]
pub(crate) struct PolicyRec {
    pub project: String,
    pub region: String,
    /// `ResourcePolicy` JSON without selfLink/region/status.
    pub spec: Value,
    /// CREATING, READY, DELETING.
    pub status: &'static str,
}

/// Everything mutable, behind `Sim::inner`.
#[derive(Debug)]
pub(crate) struct Inner {
    /// Known clusters by `projects/P/locations/L/clusters/C`.
    pub clusters: BTreeMap<String, jiff::Timestamp>,
    /// Node pools by `projects/P/locations/L/clusters/C/nodePools/NP`.
    pub pools: BTreeMap<String, PoolRec>,
    /// GKE operations in creation order.
    pub gke_ops: Vec<GkeOp>,
    /// Resource policies by `projects/P/regions/R/resourcePolicies/N`.
    pub policies: BTreeMap<String, PolicyRec>,
    /// Compute operations in creation order.
    pub compute_ops: Vec<ComputeOp>,
    /// Instance templates by `projects/P/global/instanceTemplates/N`.
    pub templates: BTreeMap<String, TemplateRec>,
    /// MIGs by `projects/P/zones/Z/instanceGroupManagers/N`.
    pub migs: BTreeMap<String, MigRec>,
    /// VMs by `projects/P/zones/Z/instances/N`.
    pub instances: BTreeMap<String, VmRec>,
    pub faults: Faults,
    pub stats: SimStats,
    /// Clusters linked to a real API server, by cluster key.
    pub links: BTreeMap<String, Arc<super::link::Linked>>,
    /// The hollow nodes of linked clusters' pools, by pool key.
    pub hollow: BTreeMap<String, Vec<super::link::HollowNode>>,
    pub latency: Duration,
    /// Flex-start pools waiting for their capacity, with when it arrives
    /// (`sim::gke::Capacity::FlexStart`).
    pub flex_due: Vec<(Instant, String)>,
    /// Separate stream for ids and names, so fault decisions depend only on
    /// the order of requests.
    ids: ChaCha8Rng,
}

impl Inner {
    pub fn new(latency: Duration, seed: u64, faults: Faults) -> Self {
        Self {
            clusters: BTreeMap::new(),
            pools: BTreeMap::new(),
            gke_ops: Vec::new(),
            policies: BTreeMap::new(),
            compute_ops: Vec::new(),
            templates: BTreeMap::new(),
            migs: BTreeMap::new(),
            instances: BTreeMap::new(),
            faults,
            stats: SimStats::default(),
            links: BTreeMap::new(),
            hollow: BTreeMap::new(),
            latency,
            flex_due: Vec::new(),
            ids: ChaCha8Rng::seed_from_u64(seed ^ 0x05ee_d1d5),
        }
    }

    /// A fresh operation name in Google's style: `operation-<millis>-<hex>`.
    pub fn op_name(&mut self) -> String {
        let millis = jiff::Timestamp::now().as_millisecond();
        let tail: u64 = self.ids.random();
        format!("operation-{millis}-{:08x}", tail & 0xffff_ffff)
    }

    /// A fresh numeric id (uint64 rendered as a string by callers).
    pub fn numeric_id(&mut self) -> u64 {
        self.ids
            .random_range(1_000_000_000_000_000_000..=u64::MAX / 2)
    }

    /// A fresh random number from the id stream (VM name suffixes,
    /// fingerprints).
    pub fn random_u64(&mut self) -> u64 {
        self.ids.random()
    }

    /// The RUNNING GKE operations on `cluster`.
    pub fn running_gke_ops<'a>(&'a self, cluster: &'a str) -> impl Iterator<Item = &'a GkeOp> {
        self.gke_ops
            .iter()
            .filter(move |op| !op.done && op.cluster == cluster)
    }

    /// Completes every operation whose time has come, oldest completion first.
    pub fn advance(&mut self, now: Instant) {
        let mut due: Vec<(Instant, bool, usize)> = Vec::new();
        for (i, op) in self.gke_ops.iter().enumerate() {
            if !op.done && op.timing.done_at <= now {
                due.push((op.timing.done_at, true, i));
            }
        }
        for (i, op) in self.compute_ops.iter().enumerate() {
            if !op.done && op.timing.done_at <= now {
                due.push((op.timing.done_at, false, i));
            }
        }
        due.sort_by_key(|(t, _, i)| (*t, *i));
        for (_, gke, i) in due {
            if gke {
                self.complete_gke(i);
            } else {
                self.complete_compute(i);
            }
        }
        gce::advance_vms(self, now);
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flex_due)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.flex_due = waiting;
        for (_, pool) in due {
            let Some(rec) = self.pools.get(&pool) else {
                continue;
            };
            if let super::gke::Capacity::FlexStart(per_zone) = super::gke::capacity_of(&rec.spec)
                && rec.status == "RUNNING"
            {
                // Capacity is there, but the autoscaler scales up only for
                // a pending pod that fits: look again until one does.
                if super::link::flex_demand_fits(self, &pool) == Some(false) {
                    self.flex_due.push((now + super::link::PENDING_POLL, pool));
                    continue;
                }
                tracing::debug!(pool = %pool, per_zone, "sim: flex-start capacity arrived");
                super::link::start_pool_nodes(self, &pool, per_zone);
            }
        }
    }

    fn complete_gke(&mut self, i: usize) {
        let Some(op) = self.gke_ops.get_mut(i) else {
            return;
        };
        op.done = true;
        let effect = op.effect.clone();
        self.apply_gke_effect(i, effect.clone());
        // A linked cluster's Nodes follow its pools.
        match effect {
            GkeEffect::Create { pool, .. } => {
                let Some(rec) = self.pools.get(&pool).filter(|r| r.status == "RUNNING") else {
                    return;
                };
                match super::gke::capacity_of(&rec.spec) {
                    super::gke::Capacity::Initial(per_zone) => {
                        super::link::start_pool_nodes(self, &pool, per_zone);
                    }
                    super::gke::Capacity::FlexStart(_) => {
                        let delay = Duration::from_millis(self.faults.config.flex_start_delay_ms);
                        let done_at = self
                            .gke_ops
                            .get(i)
                            .map_or_else(Instant::now, |op| op.timing.done_at);
                        self.flex_due.push((done_at + delay, pool));
                    }
                    super::gke::Capacity::Queued => {}
                }
            }
            GkeEffect::Delete { pool } => super::link::stop_pool_nodes(self, &pool),
            GkeEffect::Update { pool } => super::link::update_pool_nodes(self, &pool),
            _ => {}
        }
    }

    fn apply_gke_effect(&mut self, i: usize, effect: GkeEffect) {
        let Some(op) = self.gke_ops.get_mut(i) else {
            return;
        };
        match effect {
            GkeEffect::Create {
                pool,
                stockout,
                fails,
            } => {
                let Some(rec) = self.pools.get_mut(&pool) else {
                    return;
                };
                if rec.status != "PROVISIONING" {
                    return;
                }
                if let Some(message) = fails {
                    op.error = Some(super::operations::GkeOpError {
                        code: super::errors::rpc_code("FAILED_PRECONDITION"),
                        message: message.clone(),
                        conditions: Vec::new(),
                    });
                    rec.status = "ERROR";
                    rec.status_message = Some(message.clone());
                    rec.conditions = vec![json!({"message": message})];
                } else if stockout {
                    let zone = first_zone(&rec.spec);
                    let message = format!(
                        "Google Compute Engine: Not all instances running in IGM after {}s. \
                         Expected {}, running 0, transitioning 0. Current errors: [GCE_STOCKOUT]: \
                         Instance creation failed: ZONE_RESOURCE_POOL_EXHAUSTED: The zone \
                         'projects/{}/zones/{zone}' does not have enough resources available to \
                         fulfill the request. Try a different zone, or try again later.",
                        op.timing.latency.as_secs(),
                        rec.spec
                            .get("initialNodeCount")
                            .and_then(Value::as_i64)
                            .unwrap_or(1),
                        op.project,
                    );
                    let condition = json!({
                        "code": "GCE_STOCKOUT",
                        "message": message,
                        "canonicalCode": "RESOURCE_EXHAUSTED",
                    });
                    // Two ways GKE ends it. The create fails and the pool is
                    // left in ERROR; or the operation ends DONE with no
                    // `error` while the pool stays RUNNING_WITH_ERROR and
                    // GKE keeps retrying ("GCP behavior is to create a node
                    // pool in error state and keep waiting for resources":
                    // GoogleCloudPlatform/magic-modules#5225; terraform's
                    // "NodePool … was created in the error state
                    // \"RUNNING_WITH_ERROR\"" is raised after the create
                    // operation succeeded: hashicorp/terraform-provider-google#10823).
                    // The stockout stays reported in clusterConditions.
                    let running_with_error = self.faults.config.stockout_status
                        == super::faults::StockoutStatus::RunningWithError;
                    op.error = Some(super::operations::GkeOpError {
                        code: if running_with_error {
                            0
                        } else {
                            super::errors::rpc_code("RESOURCE_EXHAUSTED")
                        },
                        message: message.clone(),
                        conditions: vec![condition.clone()],
                    });
                    rec.status = if running_with_error {
                        "RUNNING_WITH_ERROR"
                    } else {
                        "ERROR"
                    };
                    rec.status_message = Some(message);
                    rec.conditions = vec![condition];
                } else {
                    rec.status = "RUNNING";
                }
            }
            GkeEffect::Delete { pool } => {
                self.pools.remove(&pool);
            }
            GkeEffect::Update { pool } => {
                if let Some(rec) = self.pools.get_mut(&pool)
                    && rec.status == "RECONCILING"
                {
                    rec.status = "RUNNING";
                }
            }
            GkeEffect::Cluster { .. } => {}
        }
    }

    fn complete_compute(&mut self, i: usize) {
        let Some(op) = self.compute_ops.get_mut(i) else {
            return;
        };
        op.done = true;
        let done_at = op.timing.done_at;
        match op.effect.clone() {
            ComputeEffect::TemplateReady { key } => gce::template_ready(self, &key),
            ComputeEffect::TemplateDelete { key } => gce::template_delete(self, &key),
            ComputeEffect::MigReady { key } => gce::mig_ready(self, &key, done_at),
            ComputeEffect::MigDelete { key } => gce::mig_delete(self, &key),
            ComputeEffect::MigRecreate { key, vms } => gce::mig_recreate(self, &key, &vms, done_at),
            ComputeEffect::Fail {
                code,
                message,
                http_status,
                http_message,
            } => {
                op.error = Some(super::operations::ComputeOpError {
                    code,
                    message,
                    http_status,
                    http_message,
                });
            }
            ComputeEffect::None => {}
            ComputeEffect::PolicyReady { key } => {
                if let Some(p) = self.policies.get_mut(&key) {
                    p.status = "READY";
                }
            }
            ComputeEffect::PolicyDelete { key } => {
                let in_use = self
                    .policies
                    .get(&key)
                    .and_then(|p| {
                        let name = p.spec.get("name")?.as_str()?.to_string();
                        policy_user(&self.pools, &p.project, &p.region, &name)
                    })
                    .or_else(|| {
                        // A MIG whose `resourcePolicies.workloadPolicy` names it.
                        self.migs
                            .iter()
                            .find(|(_, m)| m.policy.as_deref() == Some(key.as_str()))
                            .map(|(k, _)| k.clone())
                    });
                match in_use {
                    Some(user) => {
                        op.error = Some(super::operations::ComputeOpError {
                            code: "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE".into(),
                            message: format!(
                                "The resource_policy resource '{key}' is already being used by '{user}'"
                            ),
                            http_status: 400,
                            http_message: "BAD REQUEST".into(),
                        });
                        if let Some(p) = self.policies.get_mut(&key) {
                            p.status = "READY";
                        }
                    }
                    None => {
                        self.policies.remove(&key);
                    }
                }
            }
        }
    }
}

/// The first zone of a node pool (its `locations[0]`).
pub(crate) fn first_zone(pool: &Value) -> String {
    pool.get("locations")
        .and_then(|l| l.get(0))
        .and_then(Value::as_str)
        .unwrap_or("unknown-zone")
        .to_string()
}

/// The node pool (if any) whose `placementPolicy.policyName` names this
/// resource policy in the same project and region.
fn policy_user(
    pools: &BTreeMap<String, PoolRec>,
    project: &str,
    region: &str,
    name: &str,
) -> Option<String> {
    pools.iter().find_map(|(key, rec)| {
        let policy = rec.spec.pointer("/placementPolicy/policyName")?.as_str()?;
        let same_project = key.starts_with(&format!("projects/{project}/"));
        let same_region = first_zone(&rec.spec).starts_with(region);
        (policy == name && same_project && same_region).then(|| key.clone())
    })
}
