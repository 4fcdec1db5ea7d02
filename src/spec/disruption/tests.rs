#![cfg(test)]
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
