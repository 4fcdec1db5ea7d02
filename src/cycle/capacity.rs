//! The capacity part of a cycle (the controller's): which slices are held
//! back before planning, what each hold left out, the bookkeeping after
//! applying, and the failure a held slice reports.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use super::HeldSlice;
use crate::apply::Failure;
use crate::controller::capacity::{CapacityTracker, Hold, is_capacity_failure, offering_of};
use crate::engine::{self, SliceReport};
use crate::spec::Fleet;

/// The slices held back at the start of a cycle (backing off after a
/// shortage); none without a tracker.
pub(super) fn initial_holds(
    tracker: Option<&mut CapacityTracker>,
    fleet: &Fleet,
    now: tokio::time::Instant,
) -> BTreeMap<String, Hold> {
    let Some(t) = tracker else {
        return BTreeMap::new();
    };
    t.retain(fleet, now);
    fleet
        .slices
        .values()
        .filter_map(|s| {
            let o = offering_of(fleet, s);
            t.hold(&s.name, o.as_ref(), now)
                .map(|h| (s.name.clone(), h))
        })
        .collect()
}

/// Each hold with the plan actions it left out.
pub(super) fn held_slices(holds: BTreeMap<String, Hold>, left_out: &[String]) -> Vec<HeldSlice> {
    holds
        .into_iter()
        .map(|(slice, hold)| {
            let prefix = format!("slice.{slice}[");
            HeldSlice {
                left_out: left_out
                    .iter()
                    .filter(|a| a.contains(&prefix))
                    .cloned()
                    .collect(),
                slice,
                hold,
            }
        })
        .collect()
}

/// Capacity bookkeeping after a cycle applied: a slice that met a shortage
/// is recorded as failed, one tried without failure (or with nothing to
/// do) as succeeded. Returns the shortages met.
pub(super) fn record(
    tracker: Option<&mut CapacityTracker>,
    fleet: &Fleet,
    report: &engine::Report,
    held: &[HeldSlice],
    now: tokio::time::Instant,
    wall: Timestamp,
) -> u64 {
    let held: BTreeSet<&str> = held.iter().map(|h| h.slice.as_str()).collect();
    let mut met = 0u64;
    let mut tracker = tracker;
    for sr in &report.slices {
        let caps: Vec<&Failure> = sr
            .failed
            .iter()
            .filter(|f| is_capacity_failure(f.code))
            .collect();
        if let Some(first) = caps.first() {
            met = met.saturating_add(caps.len() as u64);
            if let (Some(t), Some(o)) = (
                tracker.as_deref_mut(),
                fleet
                    .slices
                    .get(&sr.slice)
                    .and_then(|s| offering_of(fleet, s)),
            ) {
                t.record_failure(&sr.slice, o, &first.message, now, wall);
            }
        } else if !held.contains(sr.slice.as_str())
            && sr.failed.is_empty()
            && let Some(t) = tracker.as_deref_mut()
        {
            t.record_success(&sr.slice);
        }
    }
    if let Some(t) = tracker {
        for name in fleet.slices.keys() {
            if !held.contains(name.as_str()) && !report.slices.iter().any(|s| &s.slice == name) {
                t.record_success(name);
            }
        }
    }
    met
}

/// Held slices say so in their report (their status: CapacityUnavailable).
pub(super) fn report_holds(slices: &mut Vec<SliceReport>, held: &[HeldSlice]) {
    for h in held {
        let f = Failure {
            address: format!("slice.{}", h.slice),
            code: h.code(),
            message: format!(
                "capacity unavailable ({}) since {}: {}; creates and replacements held back, next try in {}s",
                h.hold.offering,
                h.hold.since,
                h.hold.message,
                h.hold.retry_in.as_secs()
            ),
        };
        match slices.iter_mut().find(|s| s.slice == h.slice) {
            Some(sr) => sr.failed.push(f),
            None => slices.push(SliceReport {
                slice: h.slice.clone(),
                failed: vec![f],
                ..SliceReport::default()
            }),
        }
    }
    slices.sort_by(|a, b| a.slice.cmp(&b.slice));
}
