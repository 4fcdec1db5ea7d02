use super::*;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

const NOW: &str = "2026-12-02T04:00:00Z";

fn lease(name: &str, holder: &str, renewed_secs_ago: i64) -> Lease {
    let now: jiff::Timestamp = NOW.parse().unwrap();
    Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(
                now - jiff::SignedDuration::from_secs(renewed_secs_ago),
            )),
            ..Default::default()
        }),
    }
}

fn now() -> jiff::Timestamp {
    NOW.parse().unwrap()
}

/// Issue 35, case 12: a leader and a sharded replica each see the other.
#[test]
fn each_mode_sees_the_others_live_lease() {
    let leader = lease("slicectl", "one", 2);
    let shard = lease("slicectl-1", "sharded-a", 2);
    let member = lease("slicectl-member-sharded-a", "sharded-a", 2);
    // A sharded replica waits for a live leader.
    let why = other_mode(
        &[leader.clone(), shard.clone()],
        "slicectl",
        2,
        "sharded-a",
        now(),
    )
    .unwrap();
    assert!(why.contains("slicectl (held by one)"), "{why}");
    assert!(why.contains("--shards 1 leads"), "{why}");
    // A leader waits for a live shard Lease, not for a membership Lease.
    let why = other_mode(
        &[leader.clone(), shard.clone()],
        "slicectl",
        1,
        "one",
        now(),
    )
    .unwrap();
    assert!(why.contains("slicectl-1 (held by sharded-a)"), "{why}");
    assert_eq!(
        other_mode(&[leader.clone(), member], "slicectl", 1, "one", now()),
        None
    );
    // Each mode's own Leases are not "another mode".
    assert_eq!(
        other_mode(std::slice::from_ref(&leader), "slicectl", 1, "one", now()),
        None
    );
    assert_eq!(
        other_mode(
            std::slice::from_ref(&shard),
            "slicectl",
            2,
            "sharded-a",
            now()
        ),
        None
    );
}

#[test]
fn an_expired_or_unheld_lease_or_another_controllers_is_no_writer() {
    let expired = lease("slicectl", "one", 60);
    assert_eq!(other_mode(&[expired], "slicectl", 2, "x", now()), None);
    let mut free = lease("slicectl-0", "", 1);
    assert_eq!(
        other_mode(std::slice::from_ref(&free), "slicectl", 1, "x", now()),
        None
    );
    free.spec = None;
    assert_eq!(other_mode(&[free], "slicectl", 1, "x", now()), None);
    // Another controller's Leases in the namespace: `other`, `slicectl-x`,
    // `slicectlx-0`, `slicectl-0-1`.
    let others = [
        lease("other", "o", 1),
        lease("slicectl-x", "o", 1),
        lease("slicectlx-0", "o", 1),
        lease("slicectl-0-1", "o", 1),
    ];
    assert_eq!(other_mode(&others, "slicectl", 1, "x", now()), None);
    assert_eq!(other_mode(&others, "slicectl", 3, "x", now()), None);
}
