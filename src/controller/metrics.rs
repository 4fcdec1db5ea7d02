//! The controller's Prometheus metrics (`/metrics`, OpenMetrics text).
//!
//! Names follow Prometheus conventions: prefix `slicectl_`, base units
//! (seconds), `_total` on counters, labels of bounded cardinality (no slice
//! names, no messages, never a credential).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// The cycle's outcome code (`no_changes`, `applied`, `failed`, …).
    pub result: String,
}

/// `condition` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConditionLabel {
    /// `Ready`, `Reconciling` or `Stalled`.
    pub condition: String,
}

/// `code` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    /// Stable refusal code.
    pub code: String,
}

/// `target` label: a Target's name (bounded: the Targets in the specs).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabel {
    /// The Target's `metadata.name`.
    pub target: String,
}

/// Labels of a cloud request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `container` or `compute`.
    pub api: String,
    /// The API method id without the API (`projects.locations.clusters.nodePools.create`).
    pub method: String,
    /// HTTP status code, or `transport` when no response came.
    pub code: String,
}

type HistogramFamily = Family<ResultLabel, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // 0.1 s … ~55 min.
    Histogram::new(exponential_buckets(0.1, 2.0, 16))
}

/// Every metric, registered once.
#[derive(Clone)]
pub struct Metrics {
    /// `slicectl_reconcile_cycles_total{result}`.
    pub cycles: Family<ResultLabel, Counter>,
    /// `slicectl_reconcile_duration_seconds{result}`.
    pub duration: HistogramFamily,
    /// `slicectl_slices{condition}`.
    pub slices: Family<ConditionLabel, Gauge>,
    /// `slicectl_cloud_requests_total{api,method,code}`.
    pub cloud_requests: Family<RequestLabels, Counter>,
    /// `slicectl_operations_in_flight`.
    pub in_flight: Gauge,
    /// `slicectl_refused_actions_total{code}`.
    pub refused: Family<CodeLabel, Counter>,
    /// `slicectl_spec_last_good_age_seconds`.
    pub last_good_age: Gauge<f64, AtomicU64>,
    /// `slicectl_capacity_unavailable_total`.
    pub capacity_unavailable: Counter,
    /// `slicectl_capacity_held_slices`.
    pub capacity_held: Gauge,
    /// `slicectl_leader`.
    pub leader: Gauge,
    /// `slicectl_shards_held`: shard Leases this replica holds (with
    /// `--shards` N > 1; with one shard, 1 while leading).
    pub shards_held: Gauge,
    /// `slicectl_shards`: the configured number of shards.
    pub shards: Gauge,
    /// `slicectl_other_mode_waiting`: 1 while this replica waits for a
    /// controller of the other mode (`--shards 1` beside `--shards N`).
    pub other_mode_waiting: Gauge,
    /// `slicectl_target_unobserved{target}`.
    pub target_unobserved: Family<TargetLabel, Gauge>,
    /// `slicectl_held_steps{code}`: steps held by a disruption policy in
    /// the last cycle (busy slice replicas), by code.
    pub held: Family<CodeLabel, Gauge>,
    registry: Arc<Registry>,
}

impl Metrics {
    /// A fresh registry with every metric.
    pub fn new() -> Metrics {
        let mut r = Registry::with_prefix("slicectl");
        let cycles = Family::<ResultLabel, Counter>::default();
        r.register(
            "reconcile_cycles",
            "Reconcile cycles run by the leader, by result",
            cycles.clone(),
        );
        let duration: HistogramFamily = Family::new_with_constructor(duration_histogram);
        r.register_with_unit(
            "reconcile_duration",
            "Duration of reconcile cycles, by result",
            Unit::Seconds,
            duration.clone(),
        );
        let slices = Family::<ConditionLabel, Gauge>::default();
        r.register(
            "slices",
            "Slices by the condition of their status object (Ready, Reconciling, Stalled) after the last cycle",
            slices.clone(),
        );
        let cloud_requests = Family::<RequestLabels, Counter>::default();
        r.register(
            "cloud_requests",
            "HTTP requests sent to Google Cloud APIs, by API, method and response code",
            cloud_requests.clone(),
        );
        let in_flight = Gauge::default();
        r.register(
            "operations_in_flight",
            "Apply steps running now (a step waiting on a long-running cloud operation counts)",
            in_flight.clone(),
        );
        let refused = Family::<CodeLabel, Counter>::default();
        r.register(
            "refused_actions",
            "Destructive actions (or whole plans) refused by a safety rail, by code",
            refused.clone(),
        );
        let last_good_age = Gauge::<f64, AtomicU64>::default();
        r.register_with_unit(
            "spec_last_good_age",
            "Time since every spec file was last valid (0 while they all are)",
            Unit::Seconds,
            last_good_age.clone(),
        );
        let capacity_unavailable = Counter::default();
        r.register(
            "capacity_unavailable",
            "Stockouts and full reservations met by apply steps or found in the plan",
            capacity_unavailable.clone(),
        );
        let capacity_held = Gauge::default();
        r.register(
            "capacity_held_slices",
            "Slices whose creates and replacements are held back by capacity backoff",
            capacity_held.clone(),
        );
        let leader = Gauge::default();
        r.register(
            "leader",
            "1 while this replica holds the leader Lease (sharded: any shard Lease), else 0",
            leader.clone(),
        );
        let shards_held = Gauge::default();
        r.register(
            "shards_held",
            "Shard Leases this replica holds (one shard: 1 while it leads)",
            shards_held.clone(),
        );
        let shards = Gauge::default();
        r.register(
            "shards",
            "Number of shards the fleet is split into (--shards)",
            shards.clone(),
        );
        let other_mode_waiting = Gauge::default();
        r.register(
            "other_mode_waiting",
            "1 while this replica runs no cycle because a controller of the other mode (--shards 1 beside --shards N) writes the Targets, else 0",
            other_mode_waiting.clone(),
        );
        let target_unobserved = Family::<TargetLabel, Gauge>::default();
        r.register(
            "target_unobserved",
            "1 for each Target that could not be observed in the last cycle (its slices got no action), 0 for each that was",
            target_unobserved.clone(),
        );
        let held = Family::<CodeLabel, Gauge>::default();
        r.register(
            "held_steps",
            "Steps that destroy a busy slice replica's capacity, held by its disruption policy in the last cycle, by code (busy, do_not_disrupt, outside_window, budget, busy_unknown)",
            held.clone(),
        );
        Metrics {
            held,
            cycles,
            duration,
            slices,
            cloud_requests,
            in_flight,
            refused,
            last_good_age,
            capacity_unavailable,
            capacity_held,
            leader,
            shards_held,
            shards,
            other_mode_waiting,
            target_unobserved,
            registry: Arc::new(r),
        }
    }

    /// Records a finished cycle.
    pub fn cycle(&self, result: &str, seconds: f64) {
        let l = ResultLabel {
            result: result.to_string(),
        };
        self.cycles.get_or_create(&l).inc();
        self.duration.get_or_create(&l).observe(seconds);
    }

    /// Counts a refusal.
    pub fn refused(&self, code: &str) {
        self.refused
            .get_or_create(&CodeLabel {
                code: code.to_string(),
            })
            .inc();
    }

    /// Sets the held steps of the last cycle per code (codes not held this
    /// cycle drop to 0).
    pub fn set_held(&self, held: &[crate::plan::workload::Held]) {
        for code in [
            "busy",
            "do_not_disrupt",
            "outside_window",
            "budget",
            "busy_unknown",
        ] {
            let n = held.iter().filter(|h| h.code == code).count();
            self.held
                .get_or_create(&CodeLabel {
                    code: code.to_string(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Sets the slices per condition (every condition is always present).
    pub fn set_slices(&self, ready: i64, reconciling: i64, stalled: i64) {
        for (c, n) in [
            ("Ready", ready),
            ("Reconciling", reconciling),
            ("Stalled", stalled),
        ] {
            self.slices
                .get_or_create(&ConditionLabel {
                    condition: c.to_string(),
                })
                .set(n);
        }
    }

    /// Sets `slicectl_target_unobserved`: one series per Target in force,
    /// 1 for those not observed; Targets gone from the specs are dropped.
    pub fn set_targets<'a>(
        &self,
        targets: impl IntoIterator<Item = &'a String>,
        unobserved: &std::collections::BTreeSet<&str>,
    ) {
        self.target_unobserved.clear();
        for t in targets {
            self.target_unobserved
                .get_or_create(&TargetLabel { target: t.clone() })
                .set(i64::from(unobserved.contains(t.as_str())));
        }
    }

    /// Counts one HTTP exchange with Google (`api_method` is the full method
    /// id, `container.projects.…`).
    pub fn cloud_request(&self, api_method: &str, code: &str) {
        let (api, method) = api_method
            .split_once('.')
            .unwrap_or(("unknown", api_method));
        self.cloud_requests
            .get_or_create(&RequestLabels {
                api: api.to_string(),
                method: method.to_string(),
                code: code.to_string(),
            })
            .inc();
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut s = String::new();
        prometheus_client::encoding::text::encode(&mut s, &self.registry)?;
        Ok(s)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Counts apply steps in flight around another progress reporter.
pub struct CountingProgress {
    inner: Arc<dyn crate::apply::Progress>,
    gauge: Gauge,
}

impl CountingProgress {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn crate::apply::Progress>, gauge: Gauge) -> Self {
        CountingProgress { inner, gauge }
    }
}

impl crate::apply::Progress for CountingProgress {
    fn started(&self, key: &str, what: &str) {
        self.gauge.inc();
        self.inner.started(key, what);
    }

    fn finished(
        &self,
        key: &str,
        what: &str,
        result: Result<(), &str>,
        elapsed: std::time::Duration,
    ) {
        self.gauge.dec();
        self.inner.finished(key, what, result, elapsed);
    }

    fn replacement(&self, replica: &str, left: usize) {
        self.inner.replacement(replica, left);
    }
}

#[cfg(test)]
#[path = "metrics/tests.rs"]
mod tests;
