#![cfg(test)]
use super::*;

fn off(zone: &str) -> Offering {
    Offering {
        project: "p".into(),
        zone: zone.into(),
        machine_type: "ct5p-hightpu-4t".into(),
        capacity: "spot".into(),
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn backoff_doubles_from_30s_to_10min() {
    let t = CapacityTracker::new(RetryPolicy::default());
    let got: Vec<u64> = (1..=8).map(|n| t.backoff(n).as_secs()).collect();
    assert_eq!(got, vec![30, 60, 120, 240, 480, 600, 600, 600]);
    assert_eq!(t.backoff(u32::MAX), secs(600));
}

#[tokio::test(start_paused = true)]
async fn a_failed_slice_is_held_for_its_backoff_then_tried_again() {
    let mut t = CapacityTracker::new(RetryPolicy::default());
    let wall = Timestamp::UNIX_EPOCH;
    let o = off("us-east5-a");
    t.record_failure("a", o.clone(), "GCE_STOCKOUT", Instant::now(), wall);
    let h = t.hold("a", Some(&o), Instant::now()).expect("held");
    assert_eq!(h.retry_in, secs(30));
    assert_eq!(h.since, wall);
    tokio::time::advance(secs(29)).await;
    assert!(t.hold("a", Some(&o), Instant::now()).is_some());
    tokio::time::advance(secs(1)).await;
    assert!(
        t.hold("a", Some(&o), Instant::now()).is_none(),
        "retried after 30 s"
    );
    // It fails again: 60 s now, and `since` stays the first failure.
    let later = Timestamp::from_second(100).unwrap();
    t.record_failure("a", o.clone(), "GCE_STOCKOUT", Instant::now(), later);
    let h = t.hold("a", Some(&o), Instant::now()).expect("held");
    assert_eq!(h.retry_in, secs(60));
    assert_eq!(h.since, wall);
    assert_eq!(t.failures("a"), 2);
    // Success releases it and clears the offering.
    tokio::time::advance(secs(60)).await;
    t.record_success("a");
    assert!(t.hold("a", Some(&o), Instant::now()).is_none());
    assert!(!t.unavailable(&o, Instant::now()));
    assert!(t.unavailable_since().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_cache_holds_other_slices_of_the_same_offering_until_it_expires() {
    let mut t = CapacityTracker::new(RetryPolicy::default());
    let o = off("us-east5-a");
    t.record_failure(
        "a",
        o.clone(),
        "no capacity",
        Instant::now(),
        Timestamp::UNIX_EPOCH,
    );
    // b wants the same offering: held while cached (3 min).
    let h = t.hold("b", Some(&o), Instant::now()).expect("held");
    assert_eq!(h.retry_in, secs(180));
    assert_eq!(h.message, "no capacity");
    // c wants another zone: never held.
    assert!(
        t.hold("c", Some(&off("us-east5-b")), Instant::now())
            .is_none()
    );
    assert!(t.hold("c", None, Instant::now()).is_none());
    tokio::time::advance(secs(179)).await;
    assert!(t.unavailable(&o, Instant::now()));
    tokio::time::advance(secs(1)).await;
    assert!(!t.unavailable(&o, Instant::now()));
    assert!(t.hold("b", Some(&o), Instant::now()).is_none());
    // b never failed: only a counts as unavailable for status.
    assert_eq!(t.unavailable_since().keys().collect::<Vec<_>>(), vec!["a"]);
}

#[tokio::test(start_paused = true)]
async fn retain_forgets_departed_slices_and_expired_entries() {
    let mut t = CapacityTracker::new(RetryPolicy::default());
    let o = off("z");
    t.record_failure(
        "gone",
        o.clone(),
        "x",
        Instant::now(),
        Timestamp::UNIX_EPOCH,
    );
    tokio::time::advance(secs(181)).await;
    t.retain(&Fleet::default(), Instant::now());
    assert!(t.unavailable_since().is_empty());
    assert!(t.cache.is_empty());
}
