//! A slice's disruption policy, resolved: the slice's own `disruption`
//! over its Target's, over the defaults; and whether a time falls in one of
//! its windows (cron with a time zone, from `croner` and `jiff`). Pure:
//! the time is passed in.

use std::str::FromStr;
use std::time::Duration;

use croner::Cron;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::model::{Disruption, DisruptionWindow, WhenBusy};
use super::validate::parse_duration;

/// Default `drainTimeout`.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Shortest `drainTimeout`.
pub const MIN_DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest `drainTimeout`.
pub const MAX_DRAIN_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);
/// Longest window `duration`.
pub const MAX_WINDOW: Duration = Duration::from_secs(31 * 24 * 3600);

/// A pod annotation that blocks even a drain (Karpenter's convention,
/// `karpenter.sh/do-not-disrupt`, under slicectl's prefix).
pub const DO_NOT_DISRUPT: &str = "slicectl.dev/do-not-disrupt";
/// Karpenter's own annotation, honoured too.
pub const KARPENTER_DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// The Node label slicectl puts on a slice replica's Nodes when it starts
/// draining them (Unix seconds): the drain's start survives a restart.
pub const DRAINING_SINCE: &str = "slicectl.dev/draining-since";
/// The Node label (`"true"`) slicectl sets in the same write that cordons a
/// Node: the cordon is slicectl's. A Node cordoned already (by a person,
/// by another tool) does not get it, and slicectl never lifts its cordon.
pub const CORDONED_BY_SLICECTL: &str = "slicectl.dev/cordoned";

/// A window, parsed.
#[derive(Debug, Clone)]
pub struct Window {
    /// The schedule as written.
    pub schedule: String,
    cron: Cron,
    /// The zone it is read in.
    pub zone: TimeZone,
    /// The zone's name.
    pub zone_name: String,
    /// How long it stays open.
    pub duration: Duration,
}

impl PartialEq for Window {
    fn eq(&self, o: &Window) -> bool {
        self.schedule == o.schedule && self.zone_name == o.zone_name && self.duration == o.duration
    }
}

impl Window {
    /// Parses a window; the error says which field is wrong and what is expected.
    pub fn parse(w: &DisruptionWindow) -> Result<Window, (&'static str, String)> {
        let fields = w.schedule.split_whitespace().count();
        if fields != 5 {
            return Err((
                "schedule",
                format!(
                    "schedule {:?} has {fields} field(s); expected a five-field cron expression \
                     (minute hour day-of-month month day-of-week), e.g. \"0 2 * * SAT\"",
                    w.schedule
                ),
            ));
        }
        let cron = Cron::from_str(&w.schedule).map_err(|e| {
            (
                "schedule",
                format!(
                    "schedule {:?} is not a cron expression ({e}); expected e.g. \"0 2 * * SAT\"",
                    w.schedule
                ),
            )
        })?;
        let zone_name = w.time_zone.clone().unwrap_or_else(|| "UTC".to_owned());
        let zone = TimeZone::get(&zone_name).map_err(|_| {
            (
                "timeZone",
                format!(
                    "timeZone {zone_name:?} is not a known IANA time zone; expected e.g. Europe/Berlin or UTC"
                ),
            )
        })?;
        let duration =
            parse_duration(&w.duration).map_err(|p| ("duration", format!("duration {p}")))?;
        if duration > MAX_WINDOW {
            return Err((
                "duration",
                format!("duration {:?} is longer than 31 days", w.duration),
            ));
        }
        Ok(Window {
            schedule: w.schedule.clone(),
            cron,
            zone,
            zone_name,
            duration,
        })
    }

    /// Whether `now` is inside the window: a start of the schedule lies in
    /// `(now - duration, now]`.
    pub fn contains(&self, now: Timestamp) -> bool {
        let Ok(d) = SignedDuration::try_from(self.duration) else {
            return false;
        };
        let Ok(from) = now.checked_sub(d) else {
            return false;
        };
        let from = from.to_zoned(self.zone.clone());
        match self.cron.find_next_occurrence(&from, false) {
            Ok(start) => start.timestamp() <= now,
            Err(_) => false,
        }
    }

    /// The next time the window opens after `now`, if the schedule has one.
    pub fn next_open(&self, now: Timestamp) -> Option<Timestamp> {
        let z = now.to_zoned(self.zone.clone());
        self.cron
            .find_next_occurrence(&z, false)
            .ok()
            .map(|t| t.timestamp())
    }

    /// `"0 2 * * SAT" Europe/Berlin for 6h`.
    pub fn describe(&self) -> String {
        format!(
            "{:?} {} for {}",
            self.schedule,
            self.zone_name,
            humantime_secs(self.duration)
        )
    }
}

fn humantime_secs(d: Duration) -> String {
    SignedDuration::try_from(d)
        .map(|s| format!("{s:#}"))
        .unwrap_or_else(|_| format!("{}s", d.as_secs()))
}

/// A slice's disruption policy, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// What to do with a busy replica.
    pub when_busy: WhenBusy,
    /// How long a drain may take.
    pub drain_timeout: Duration,
    /// When busy replicas may be disrupted (empty: any time).
    pub windows: Vec<Window>,
    /// The Target's budget of busy replicas disrupted at once.
    pub budget: Option<u32>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            when_busy: WhenBusy::Wait,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            windows: Vec::new(),
            budget: None,
        }
    }
}

impl Policy {
    /// The slice's policy over its Target's (validated specs: a field that
    /// does not parse falls back to the default, never to "disrupt").
    pub fn resolve(target: Option<&Disruption>, slice: Option<&Disruption>) -> Policy {
        let pick = |f: fn(&Disruption) -> bool| slice.filter(|s| f(s)).or(target.filter(|t| f(t)));
        let when_busy = pick(|d| d.when_busy.is_some())
            .and_then(|d| d.when_busy)
            .unwrap_or_default();
        let drain_timeout = pick(|d| d.drain_timeout.is_some())
            .and_then(|d| d.drain_timeout.as_deref())
            .and_then(|t| parse_duration(t).ok())
            .unwrap_or(DEFAULT_DRAIN_TIMEOUT);
        let windows = pick(|d| d.windows.is_some())
            .and_then(|d| d.windows.as_ref())
            .map(|ws| ws.iter().filter_map(|w| Window::parse(w).ok()).collect())
            .unwrap_or_default();
        Policy {
            when_busy,
            drain_timeout,
            windows,
            budget: target.and_then(|t| t.budget),
        }
    }

    /// Whether busy replicas may be disrupted at `now`.
    pub fn in_window(&self, now: Timestamp) -> bool {
        self.windows.is_empty() || self.windows.iter().any(|w| w.contains(now))
    }

    /// The next time a window opens after `now`.
    pub fn next_window(&self, now: Timestamp) -> Option<Timestamp> {
        self.windows.iter().filter_map(|w| w.next_open(now)).min()
    }
}

#[cfg(test)]
#[path = "disruption/tests.rs"]
mod tests;
