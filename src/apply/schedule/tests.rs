#![cfg(test)]
use std::time::Duration;

use super::*;

/// Whether `send` in `scope` completes at once.
async fn sends_now(s: &Scheduler, scope: &str) -> Option<SendPermit> {
    tokio::time::timeout(Duration::from_millis(20), s.send(scope))
        .await
        .ok()
}

#[tokio::test]
async fn until_the_quota_is_known_one_write_at_a_time_per_scope() {
    let s = Scheduler::new(16);
    let first = sends_now(&s, "a").await.unwrap();
    // A second write in the same scope waits for the first answer …
    assert!(sends_now(&s, "a").await.is_none());
    // … another scope does not.
    let other = sends_now(&s, "b").await.unwrap();
    drop(other);
    // Accepted: its operation runs, and the next write may go.
    let _op = first.accepted();
    let second = sends_now(&s, "a").await.unwrap();
    let _op2 = second.accepted();
    assert_eq!(s.ours_running("a"), 2);
}

#[tokio::test]
async fn a_learned_quota_holds_writes_until_an_operation_finishes() {
    let s = Scheduler::new(16);
    let mut ops = Vec::new();
    for _ in 0..2 {
        ops.push(sends_now(&s, "c").await.unwrap().accepted());
    }
    // The third is refused: quota 2, both slots ours.
    let third = sends_now(&s, "c").await.unwrap();
    assert_eq!(third.rejected(&s, Rejection::Quota(Some(2))), 0);
    assert_eq!(s.rejected_writes(), 1);
    assert_eq!(s.learned_quotas().get("c"), Some(&2));
    // Nothing is sent blindly while both run …
    let waiting = tokio::spawn({
        let s = Arc::new(s);
        let s2 = s.clone();
        async move {
            let p = s2.send("c").await;
            drop(p);
            s
        }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!waiting.is_finished());
    // … and the waiting write goes as soon as one of them finishes.
    ops.pop();
    let s = tokio::time::timeout(Duration::from_secs(1), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.ours_running("c"), 1);
}

#[tokio::test]
async fn foreign_operations_hold_slots_until_they_finish() {
    let s = Scheduler::new(16);
    let op = sends_now(&s, "c").await.unwrap().accepted();
    // Quota 3 with one of ours running: two slots are someone else's.
    let p = sends_now(&s, "c").await.unwrap();
    assert_eq!(p.rejected(&s, Rejection::Quota(Some(3))), 2);
    assert!(sends_now(&s, "c").await.is_none());
    s.foreign_finished("c");
    let p = sends_now(&s, "c").await.unwrap();
    drop(p);
    drop(op);
}

#[tokio::test]
async fn a_cluster_level_operation_blocks_every_write() {
    let s = Scheduler::new(16);
    let blocked = s.block("c");
    assert!(sends_now(&s, "c").await.is_none());
    drop(blocked);
    assert!(sends_now(&s, "c").await.is_some());
}

#[tokio::test]
async fn parallelism_bounds_requests_in_flight_across_scopes() {
    let s = Scheduler::new(1);
    let a = sends_now(&s, "a").await.unwrap();
    assert!(sends_now(&s, "b").await.is_none());
    drop(a);
    assert!(sends_now(&s, "b").await.is_some());
}
