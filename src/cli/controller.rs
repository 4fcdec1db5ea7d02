//! `slicectl controller`: the in-cluster loop. Specs from a ConfigMap (an
//! API watch) or a mounted directory; cycles through the same engine call
//! as `reconcile --watch`, single-flight, on each change and every resync;
//! only while this replica leads (a Lease); status objects after each
//! cycle; `/healthz`, `/readyz`, `/metrics`; capacity-aware retries.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_lease_manager::LeaseManagerBuilder;

use super::args::{Connection, ControllerArgs, Exec, Safety};
use super::{EXIT_ERROR, EXIT_OK, Session, print_report, progress};
use crate::apply::Failure;
use crate::apply::progress::Stoppable;
use crate::controller::capacity::{
    CapacityTracker, Hold, RetryPolicy, is_capacity_failure, offering_of,
};
use crate::controller::configmap::{self, Snapshot};
use crate::controller::metrics::{CountingProgress, Metrics};
use crate::controller::owner;
use crate::controller::server::{self, Health};
use crate::controller::{self as ctl_mod, invalid_slices};
use crate::engine::{self, Outcome, ReconcileError};
use crate::plan::{Plan, PlanError};
use crate::source::Listing;
use crate::source::SourceError;
use crate::source::last_good::LastGood;
use crate::spec::{Fleet, ShownPath};
use crate::status_object::{self, Cycle, CycleResult, StatusWriter};
use crate::watch::{self, LOG_TARGET, LoopEnd, LoopOptions, Trigger};

/// Default ConfigMap.
pub const DEFAULT_CONFIGMAP: &str = "slicectl-specs";

enum Source {
    Dir(PathBuf),
    ConfigMap {
        name: String,
        latest: tokio::sync::watch::Receiver<Option<Snapshot>>,
    },
}

impl Source {
    fn describe(&self) -> String {
        match self {
            Source::Dir(d) => ShownPath(d).to_string(),
            Source::ConfigMap { name, .. } => format!("ConfigMap {name}"),
        }
    }

    /// The files now; `Ok(None)` when the source is missing.
    fn files(&self) -> Result<Option<Listing>, SourceError> {
        match self {
            Source::Dir(d) => match crate::source::list_dir(d) {
                Ok(f) => Ok(Some(f)),
                Err(SourceError::Missing { .. }) => Ok(None),
                Err(e) => Err(e),
            },
            Source::ConfigMap { name, latest } => latest
                .borrow()
                .as_ref()
                .and_then(|s| s.files(name))
                .transpose(),
        }
    }
}

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
    let source = match &ctl.dir {
        Some(dir) => {
            watch::watch_dir(dir.clone(), ctl.debounce, tx)
                .context("cannot start the directory watcher thread")?;
            Source::Dir(dir.clone())
        }
        None => {
            let name = ctl
                .configmap
                .clone()
                .unwrap_or_else(|| DEFAULT_CONFIGMAP.to_string());
            let (ltx, lrx) = tokio::sync::watch::channel(None);
            let api = kube::Api::<ConfigMap>::namespaced(client.clone(), &namespace);
            tokio::spawn(configmap::watch(api, name.clone(), ltx, tx));
            Source::ConfigMap { name, latest: lrx }
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
    if let Source::ConfigMap { latest, .. } = &source {
        let mut latest = latest.clone();
        tokio::select! {
            _ = signals.recv() => return Ok(EXIT_OK),
            r = latest.wait_for(Option::is_some) => {
                r.context("the ConfigMap watch stopped before reading the ConfigMap")?;
            }
        }
    }
    health.ready.store(true, Ordering::Relaxed);

    let duration = ctl.lease_duration.as_secs().max(3);
    let manager = LeaseManagerBuilder::new(client.clone(), &ctl.lease_name)
        .with_namespace(&namespace)
        .with_identity(&identity)
        .with_duration(duration)
        .with_grace((duration / 3).max(1))
        .with_field_manager("slicectl")
        .build()
        .await
        .with_context(|| {
            format!(
                "cannot set up leader election on Lease {namespace}/{}",
                ctl.lease_name
            )
        })?;
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
        return Ok(EXIT_OK);
    }
    metrics.leader.set(1);
    tracing::info!(target: LOG_TARGET, lease = %ctl.lease_name, identity = %identity, "leading: reconciling");

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
    let state = Arc::new(tokio::sync::Mutex::new(Controller {
        source,
        last_good: LastGood::new(),
        last_fleet: Fleet::default(),
        session: None,
        conn,
        safety,
        exec,
        writer,
        capacity: CapacityTracker::new(RetryPolicy {
            cache_ttl: ctl.capacity_cache_ttl,
            initial: ctl.capacity_backoff,
            max: ctl.capacity_backoff_max,
        }),
        stall_after: ctl.stall_after,
        metrics: metrics.clone(),
        broken_since,
        stop,
    }));
    let opts = LoopOptions {
        resync: ctl.resync,
        grace: ctl.grace,
    };
    let s = state.clone();
    let cycles = watch::run(opts, changes, signals, move |trigger| {
        let s = s.clone();
        async move { s.lock().await.cycle(trigger).await }
    });
    let mut lost = leading.clone();
    let end = tokio::select! {
        end = cycles => end,
        _ = lost.wait_for(|l| !*l) => {
            metrics.leader.set(0);
            tracing::error!(target: LOG_TARGET, lease = %ctl.lease_name, "lost the leader Lease: stopping at once, writing nothing more; a standby takes over and continues from the live state");
            eprintln!("error: lost the leader Lease {namespace}/{}; exiting so that only the new leader writes", ctl.lease_name);
            // Exit now: in-flight requests and tasks are dropped with the
            // process, so nothing more is written by this replica.
            std::process::exit(i32::from(EXIT_ERROR));
        }
    };
    metrics.leader.set(0);
    drop(lost);
    drop(leading);
    // Closing the channel releases the Lease, so a standby takes over early.
    let _ = tokio::time::timeout(Duration::from_secs(5), lease_task).await;
    if let Some(session) = state.lock().await.session.take() {
        session.close().await;
    }
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

struct Controller {
    source: Source,
    last_good: LastGood,
    /// The last fleet in force (status objects keep reporting on it while
    /// the source is empty, missing or unusable).
    last_fleet: Fleet,
    session: Option<Session>,
    conn: Connection,
    safety: Safety,
    exec: Exec,
    writer: StatusWriter,
    capacity: CapacityTracker,
    stall_after: Duration,
    metrics: Metrics,
    broken_since: Arc<Mutex<Option<Instant>>>,
    /// Set at the first stop signal: no new step starts.
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Controller {
    async fn cycle(&mut self, trigger: Trigger) {
        let started = Instant::now();
        let outcome = self.reconcile_once().await;
        let elapsed = started.elapsed();
        self.metrics.cycle(outcome, elapsed.as_secs_f64());
        super::cycle::log_finished(trigger, outcome, elapsed);
    }

    fn set_broken(&self, broken: bool) {
        if let Ok(mut g) = self.broken_since.lock() {
            if broken {
                g.get_or_insert_with(Instant::now);
            } else {
                *g = None;
            }
        }
    }

    /// Status objects for the last fleet in force, and every other object
    /// there is, when the cycle stopped before planning (never deletes
    /// objects while nothing is known).
    async fn report_failed(&self, code: &str, message: &str) {
        let fleet = self.last_fleet.clone();
        self.write_status(
            &fleet,
            CycleResult::Failed { code, message },
            &BTreeMap::new(),
        )
        .await;
    }

    async fn write_status(
        &self,
        fleet: &Fleet,
        result: CycleResult<'_>,
        invalid: &BTreeMap<String, String>,
    ) {
        // What is there now decides what may go: without it nothing is
        // written this cycle rather than delete an object blind.
        let existing = match self.writer.existing().await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(target: LOG_TARGET, error = %e, "cannot read the status objects; they are written next cycle");
                return;
            }
        };
        let since = self.capacity.unavailable_since();
        let set = status_object::derive(&Cycle {
            fleet,
            result,
            invalid,
            unavailable_since: &since,
            stall_after: self.stall_after,
            now: Timestamp::now(),
            existing: &existing,
        });
        let (mut ready, mut reconciling, mut stalled) = (0, 0, 0);
        for o in &set.objects {
            let is = |t: &str| {
                o.status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == t && c.status == "True")
            };
            if is("Stalled") {
                stalled += 1;
            } else if is("Ready") {
                ready += 1;
            } else {
                reconciling += 1;
            }
        }
        self.metrics.set_slices(ready, reconciling, stalled);
        match self.writer.write(&set).await {
            Ok(sum) => {
                for e in &sum.event_errors {
                    tracing::warn!(target: LOG_TARGET, error = %e, "cannot record an Event");
                }
            }
            Err(e) => {
                tracing::warn!(target: LOG_TARGET, error = %e, "cannot write the status objects; retried next cycle");
            }
        }
    }

    /// One cycle; returns its outcome (a stable short code).
    async fn reconcile_once(&mut self) -> &'static str {
        let where_ = self.source.describe();
        let files = match self.source.files() {
            Ok(Some(listing)) => {
                super::report_skipped(&listing.skipped);
                listing.files
            }
            Ok(None) => {
                let m = format!(
                    "the spec source {where_} does not exist: nothing is planned and nothing is pruned until it is back"
                );
                eprintln!("refused: {m}");
                self.metrics.refused("source_missing");
                self.report_failed("source_missing", &m).await;
                return "source_missing";
            }
            Err(e) => {
                eprintln!(
                    "error: cannot read the specs from {where_}: {e}; nothing is planned this cycle"
                );
                return "source_error";
            }
        };
        let resolved = match self.last_good.resolve(&files) {
            Ok(r) => r,
            Err(u) => {
                super::print_diagnostics(&u.diagnostics);
                eprintln!(
                    "error: {} problem(s) in the specs of {where_}, and no valid fleet can be made from the files and their last good versions; nothing is planned or changed this cycle",
                    u.diagnostics.len()
                );
                self.set_broken(true);
                let m = u
                    .diagnostics
                    .first()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                self.report_failed("invalid_specs", &m).await;
                return "invalid_specs";
            }
        };
        self.set_broken(!resolved.clean());
        super::cycle::print_resolved(&resolved);
        let invalid = invalid_slices(&resolved);
        let fleet = resolved.fleet;
        if fleet.files == 0 && resolved.left_out.is_empty() && !self.safety.allow_empty_source {
            let m = format!(
                "no spec files (*.yaml, *.yml) in {where_}: an emptied ConfigMap or an empty checkout looks like this; nothing is planned and nothing is pruned while it is empty (use `slicectl destroy` to remove every slice)"
            );
            eprintln!("refused: {m}");
            self.metrics.refused("empty_source");
            self.report_failed("empty_source", &m).await;
            return "empty_source";
        }
        self.last_fleet = fleet.clone();
        let Some(cloud) = super::loop_cloud(&mut self.session, &self.conn, &fleet).await else {
            return "connect_failed";
        };
        let ropts = super::converge_options(&self.safety, &self.exec);

        // Capacity holds: slices not retried while backing off.
        let now = tokio::time::Instant::now();
        self.capacity.retain(&fleet, now);
        let mut holds: BTreeMap<String, Hold> = fleet
            .slices
            .values()
            .filter_map(|s| {
                let o = offering_of(&fleet, s);
                self.capacity
                    .hold(&s.name, o.as_ref(), now)
                    .map(|h| (s.name.clone(), h))
            })
            .collect();
        let mut left_out_actions = Vec::new();
        let mut found_in_plan = 0;
        let wall = Timestamp::now();
        let (capacity, fleet_ref, holds_ref) = (&mut self.capacity, &fleet, &mut holds);
        // A pool the cloud left in an error state after a stockout is the
        // same shortage as a failed create: counted, remembered, and the
        // slice held instead of replaced at once into the same stockout
        // (once: when its backoff is over, the replacement is the retry).
        let edit = |p: &mut Plan| {
            (left_out_actions, found_in_plan) =
                ctl_mod::hold_for_capacity(p, fleet_ref, capacity, holds_ref, now, wall);
        };

        let suspend_prune = !resolved.left_out.is_empty();
        let mut prune_suspended = false;
        let approve = |plan: &Plan| {
            super::cycle::approve_unless_pruning(plan, suspend_prune, &mut prune_suspended)
        };
        let progress = Arc::new(Stoppable::new(
            Arc::new(CountingProgress::new(
                progress(),
                self.metrics.in_flight.clone(),
            )),
            self.stop.clone(),
        ));
        let result = engine::reconcile_with(&fleet, &cloud, &ropts, edit, approve, progress).await;
        self.metrics
            .capacity_unavailable
            .inc_by(u64::try_from(found_in_plan).unwrap_or(u64::MAX));
        self.metrics
            .capacity_held
            .set(i64::try_from(holds.len()).unwrap_or(i64::MAX));
        let held: BTreeSet<String> = holds.keys().cloned().collect();
        for (name, h) in &holds {
            let mine: Vec<&String> = left_out_actions
                .iter()
                .filter(|a| a.contains(&format!("slice.{name}[")))
                .collect();
            eprintln!(
                "held: slice {name}: capacity unavailable ({}) since {}; its creates and replacements are left out of this cycle ({}), next try in {}s",
                h.offering,
                h.since,
                if mine.is_empty() {
                    "none planned".to_string()
                } else {
                    mine.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                h.retry_in.as_secs()
            );
        }
        let mut report = match result {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                let code = e.code();
                if let ReconcileError::Plan(p) = &e {
                    let n = match p {
                        PlanError::Multiple(v) => v.len(),
                        _ => 1,
                    };
                    for _ in 0..n {
                        self.metrics.refused(code);
                    }
                }
                let m = e.to_string();
                self.write_status(&fleet, CycleResult::Failed { code, message: &m }, &invalid)
                    .await;
                return code;
            }
        };
        for r in &report.plan.refused {
            self.metrics.refused(&r.code);
        }
        // Capacity bookkeeping: who met a shortage, who was tried and did not.
        for sr in &report.slices {
            let caps: Vec<&Failure> = sr
                .failed
                .iter()
                .filter(|f| is_capacity_failure(f.code))
                .collect();
            if let Some(first) = caps.first() {
                self.metrics.capacity_unavailable.inc_by(caps.len() as u64);
                if let Some(o) = fleet
                    .slices
                    .get(&sr.slice)
                    .and_then(|s| offering_of(&fleet, s))
                {
                    self.capacity
                        .record_failure(&sr.slice, o, &first.message, now, wall);
                }
            } else if !held.contains(&sr.slice) && sr.failed.is_empty() {
                self.capacity.record_success(&sr.slice);
            }
        }
        for name in fleet.slices.keys() {
            if !held.contains(name) && !report.slices.iter().any(|s| &s.slice == name) {
                self.capacity.record_success(name);
            }
        }
        // Held slices say so in their status: CapacityUnavailable.
        for (name, h) in &holds {
            let code = if h.offering.capacity.starts_with("reservation:") {
                "reservation_insufficient"
            } else {
                "stockout"
            };
            let f = Failure {
                address: format!("slice.{name}"),
                code,
                message: format!(
                    "capacity unavailable ({}) since {}: {}; creates and replacements held back, next try in {}s",
                    h.offering,
                    h.since,
                    h.message,
                    h.retry_in.as_secs()
                ),
            };
            match report.slices.iter_mut().find(|s| &s.slice == name) {
                Some(sr) => sr.failed.push(f),
                None => report.slices.push(engine::SliceReport {
                    slice: name.clone(),
                    failed: vec![f],
                    ..engine::SliceReport::default()
                }),
            }
        }
        report.slices.sort_by(|a, b| a.slice.cmp(&b.slice));
        let outcome = if report.outcome == Outcome::Declined {
            let why = format!(
                "this plan deletes resources, and {} file(s) in {where_} are invalid with no good version to stand for them; nothing is applied until they are fixed",
                resolved.left_out.len()
            );
            eprintln!("refused: {why}");
            // The slices whose deletes wait say so (Refused), whether or
            // not they are still in the specs.
            report.refuse_deletes("pruning_suspended", &why);
            if prune_suspended {
                "pruning_suspended"
            } else {
                "declined"
            }
        } else {
            let code = print_report(&report, &fleet, "reconcile");
            match (report.outcome, code) {
                _ if !holds.is_empty() && code == EXIT_OK => "capacity_held",
                (Outcome::NoChanges, EXIT_OK) => "no_changes",
                (_, EXIT_OK) => "applied",
                _ if !report.plan.refused.is_empty() => "refused",
                _ => "failed",
            }
        };
        self.write_status(&fleet, CycleResult::Report(&report), &invalid)
            .await;
        outcome
    }
}
