//! Capacity-aware retries: the unavailable-capacity cache and per-slice
//! exponential backoff.
//!
//! A stockout or a full reservation (apply failure codes `stockout`,
//! `reservation_insufficient`) is remembered under the offering it hit,
//! (project, zone, machine type, capacity type), for a while (Karpenter's
//! unavailable-offerings cache keeps such entries for 3 minutes). The slice
//! that hit it is *held*: its creates and replacements are left out of the
//! next cycles' plans until its backoff (30 s, doubling up to 10 min) is
//! over, so it is not retried in a hot loop while every other slice keeps
//! converging. A slice that never tried but wants the same offering is held
//! while the offering is cached. A slice that is tried again and does not
//! hit the shortage is released.
//!
//! Time is [`tokio::time::Instant`] (paused in tests); `since` stamps are
//! wall-clock for the status objects.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;

use crate::spec::{Fleet, Slice};

/// Where capacity ran out: an offering.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Offering {
    /// Project the capacity is in (the reservation's project for a
    /// reservation, else the target's).
    pub project: String,
    /// Zone.
    pub zone: String,
    /// Machine type.
    pub machine_type: String,
    /// Capacity type as specs spell it (`spot`, `reservation:NAME`, …).
    pub capacity: String,
}

impl std::fmt::Display for Offering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} in {}/{}",
            self.capacity, self.machine_type, self.project, self.zone
        )
    }
}

/// The offering a slice asks for, `None` when its target is unknown.
pub fn offering_of(fleet: &Fleet, slice: &Slice) -> Option<Offering> {
    let t = fleet.target_of(slice)?;
    let cap = &slice.spec.capacity;
    let (project, capacity) = match &cap.reservation {
        Some(r) if cap.kind == crate::spec::model::CapacityType::Reservation => (
            r.project.clone().unwrap_or_else(|| t.spec.project.clone()),
            format!("reservation:{}", r.name),
        ),
        _ => (t.spec.project.clone(), cap.kind.as_str().to_string()),
    };
    Some(Offering {
        project,
        zone: t.spec.zone.clone(),
        machine_type: slice.shape.machine_type.to_string(),
        capacity,
    })
}

/// Whether an apply failure code means capacity is unavailable.
pub fn is_capacity_failure(code: &str) -> bool {
    matches!(code, "stockout" | "reservation_insufficient")
}

/// Timing of capacity-aware retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// How long an offering stays in the unavailable cache.
    pub cache_ttl: Duration,
    /// First backoff of a slice.
    pub initial: Duration,
    /// Longest backoff.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            cache_ttl: Duration::from_secs(180),
            initial: Duration::from_secs(30),
            max: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Clone)]
struct Backoff {
    failures: u32,
    retry_at: Instant,
    since: Timestamp,
    offering: Offering,
    message: String,
}

#[derive(Debug, Clone)]
struct Entry {
    expires: Instant,
    since: Timestamp,
    message: String,
}

/// Why a slice is held this cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The offering that is out of capacity.
    pub offering: Offering,
    /// When capacity became unavailable for this slice.
    pub since: Timestamp,
    /// How long until it is tried again.
    pub retry_in: Duration,
    /// The last error seen.
    pub message: String,
}

/// The unavailable-capacity cache and the per-slice backoff.
#[derive(Debug, Clone, Default)]
pub struct CapacityTracker {
    policy: RetryPolicy,
    cache: BTreeMap<Offering, Entry>,
    slices: BTreeMap<String, Backoff>,
}

impl CapacityTracker {
    /// An empty tracker.
    pub fn new(policy: RetryPolicy) -> Self {
        CapacityTracker {
            policy,
            ..CapacityTracker::default()
        }
    }

    /// The backoff after `failures` consecutive capacity failures.
    pub fn backoff(&self, failures: u32) -> Duration {
        let shift = failures.saturating_sub(1).min(20);
        self.policy
            .initial
            .saturating_mul(1u32 << shift)
            .min(self.policy.max)
    }

    /// Whether `offering` is cached as unavailable at `now`.
    pub fn unavailable(&self, offering: &Offering, now: Instant) -> bool {
        self.cache.get(offering).is_some_and(|e| now < e.expires)
    }

    /// Records that `slice` hit a capacity shortage on `offering`.
    pub fn record_failure(
        &mut self,
        slice: &str,
        offering: Offering,
        message: &str,
        now: Instant,
        wall: Timestamp,
    ) {
        let expires = now + self.policy.cache_ttl;
        let entry = self.cache.entry(offering.clone()).or_insert(Entry {
            expires,
            since: wall,
            message: message.to_string(),
        });
        entry.expires = expires;
        entry.message = message.to_string();
        let failures = self.slices.get(slice).map_or(0, |b| b.failures) + 1;
        let delay = self.backoff(failures);
        let since = self.slices.get(slice).map_or(wall, |b| b.since);
        self.slices.insert(
            slice.to_string(),
            Backoff {
                failures,
                retry_at: now + delay,
                since,
                offering,
                message: message.to_string(),
            },
        );
    }

    /// Records that `slice` was tried and did not hit a shortage: its
    /// backoff ends (and its offering is known to have capacity again).
    pub fn record_success(&mut self, slice: &str) {
        if let Some(b) = self.slices.remove(slice) {
            self.cache.remove(&b.offering);
        }
    }

    /// Forgets slices no longer in the specs and expired cache entries.
    pub fn retain(&mut self, fleet: &Fleet, now: Instant) {
        self.slices.retain(|s, _| fleet.slices.contains_key(s));
        self.cache.retain(|_, e| now < e.expires);
    }

    /// Whether `slice` (asking for `offering`) is held at `now`, and why.
    pub fn hold(&self, slice: &str, offering: Option<&Offering>, now: Instant) -> Option<Hold> {
        if let Some(b) = self.slices.get(slice) {
            // Its own backoff decides, even when the offering's entry expired.
            return (now < b.retry_at).then(|| Hold {
                offering: b.offering.clone(),
                since: b.since,
                retry_in: b.retry_at - now,
                message: b.message.clone(),
            });
        }
        let o = offering?;
        let e = self.cache.get(o).filter(|e| now < e.expires)?;
        Some(Hold {
            offering: o.clone(),
            since: e.since,
            retry_in: e.expires - now,
            message: e.message.clone(),
        })
    }

    /// Slices whose capacity is unavailable → since when (held now, or
    /// failed and not yet succeeded), for the status objects.
    pub fn unavailable_since(&self) -> BTreeMap<String, Timestamp> {
        self.slices
            .iter()
            .map(|(s, b)| (s.clone(), b.since))
            .collect()
    }

    /// When the first backoff still running ends (a slice is tried again
    /// then): the loop runs a cycle at that time, not at the next resync.
    pub fn next_retry(&self, now: Instant) -> Option<Instant> {
        self.slices
            .values()
            .map(|b| b.retry_at)
            .filter(|at| *at > now)
            .min()
    }

    /// Consecutive capacity failures of `slice`.
    pub fn failures(&self, slice: &str) -> u32 {
        self.slices.get(slice).map_or(0, |b| b.failures)
    }
}

#[cfg(test)]
#[path = "capacity/tests.rs"]
mod tests;
