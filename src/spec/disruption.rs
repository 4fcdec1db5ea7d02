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
mod tests {
    use super::*;

    fn window(schedule: &str, zone: Option<&str>, duration: &str) -> Window {
        Window::parse(&DisruptionWindow {
            schedule: schedule.into(),
            time_zone: zone.map(Into::into),
            duration: duration.into(),
        })
        .expect("valid window")
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn a_window_is_read_in_its_time_zone() {
        // Saturday 2026-11-28, 02:00 in Berlin is 01:00 UTC (CET, +1).
        let w = window("0 2 * * SAT", Some("Europe/Berlin"), "6h");
        assert!(!w.contains(at("2026-11-28T00:59:00Z")));
        assert!(w.contains(at("2026-11-28T01:00:00Z")));
        assert!(w.contains(at("2026-11-28T06:59:00Z")));
        assert!(!w.contains(at("2026-11-28T07:00:00Z")));
        // The same schedule in UTC opens an hour later.
        let utc = window("0 2 * * SAT", None, "6h");
        assert!(!utc.contains(at("2026-11-28T01:30:00Z")));
        assert!(utc.contains(at("2026-11-28T02:00:00Z")));
        // In summer Berlin is +2.
        assert!(w.contains(at("2026-06-27T00:00:00Z")));
        assert_eq!(
            w.next_open(at("2026-11-26T05:00:00Z")),
            Some(at("2026-11-28T01:00:00Z"))
        );
    }

    #[test]
    fn bad_windows_name_the_field() {
        for (schedule, zone, duration, field) in [
            ("0 2 * *", None, "6h", "schedule"),
            ("0 25 * * *", None, "6h", "schedule"),
            ("0 2 * * SAT", Some("Mars/Olympus"), "6h", "timeZone"),
            ("0 2 * * SAT", None, "soon", "duration"),
            ("0 2 * * SAT", None, "800h", "duration"),
        ] {
            let e = Window::parse(&DisruptionWindow {
                schedule: schedule.into(),
                time_zone: zone.map(Into::into),
                duration: duration.into(),
            })
            .expect_err(schedule);
            assert_eq!(e.0, field, "{e:?}");
        }
    }

    #[test]
    fn the_slice_overrides_the_target_field_by_field() {
        let target = Disruption {
            when_busy: Some(WhenBusy::Drain),
            drain_timeout: Some("1h".into()),
            windows: None,
            budget: Some(1),
        };
        let slice = Disruption {
            when_busy: None,
            drain_timeout: Some("10m".into()),
            ..Disruption::default()
        };
        let p = Policy::resolve(Some(&target), Some(&slice));
        assert_eq!(p.when_busy, WhenBusy::Drain);
        assert_eq!(p.drain_timeout, Duration::from_secs(600));
        assert_eq!(p.budget, Some(1));
        assert!(p.in_window(at("2026-11-26T05:00:00Z")));
        let d = Policy::resolve(None, None);
        assert_eq!(d.when_busy, WhenBusy::Wait);
        assert_eq!(d.drain_timeout, DEFAULT_DRAIN_TIMEOUT);
    }

    const SPECS: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: train}
spec:
  project: unit-project
  zone: us-central1-b
  ownerId: unit
  gke: {location: us-central1, name: train}
  disruption:
    whenBusy: drain
    budget: 1
    windows:
      - schedule: \"0 2 * * SAT\"
        timeZone: Europe/Berlin
        duration: 6h
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {name: serve}
spec:
  target: train
  backend: gke
  accelerator: tpu-v6e-slice
  topology: 2x2
  disruption:
    drainTimeout: 10m
";

    fn load(text: &str) -> Result<crate::spec::Fleet, Vec<crate::spec::Diagnostic>> {
        crate::spec::load(&[crate::spec::SourceFile {
            path: "specs/fleet.yaml".into(),
            text: text.into(),
        }])
    }

    #[test]
    fn a_policy_validates_and_resolves_over_its_target() {
        let fleet = load(SPECS).expect("valid");
        let s = &fleet.slices["serve"];
        let t = fleet.target_of(s).expect("target");
        let p = Policy::resolve(t.spec.disruption.as_ref(), s.spec.disruption.as_ref());
        assert_eq!(p.when_busy, WhenBusy::Drain);
        assert_eq!(p.drain_timeout, Duration::from_secs(600));
        assert_eq!(p.budget, Some(1));
        assert_eq!(p.windows.len(), 1);
    }

    #[test]
    fn bad_policies_are_located() {
        for (from, to, line, want) in [
            ("drainTimeout: 10m", "drainTimeout: 10s", 26, "out of range"),
            (
                "drainTimeout: 10m",
                "budget: 2",
                26,
                "budget is a Target's setting",
            ),
            (
                "timeZone: Europe/Berlin",
                "timeZone: Berlin",
                14,
                "not a known IANA time zone",
            ),
            ("whenBusy: drain", "whenBusy: evict", 10, "whenBusy"),
        ] {
            let errs = load(&SPECS.replace(from, to)).expect_err(to);
            let shown: Vec<String> = errs.iter().map(ToString::to_string).collect();
            assert!(
                shown
                    .iter()
                    .any(|e| e.contains(want) && e.contains(&format!(":{line}:"))),
                "{to}: {shown:?}"
            );
        }
    }
}
