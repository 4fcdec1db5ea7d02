//! The controller's Leases on the real API server: two replicas racing for
//! the same free Lease (as every replica does at start-up, before the
//! membership settles) never both believe they hold it. Each applies under a
//! field manager of its own, so the API server refuses the second apply with
//! 409 Conflict (`slicectl::controller::lease`). Under one shared field
//! manager both applies succeeded and, until its next renewal, the first
//! replica wrote as holder beside the second (CI: a sharded replica exited
//! with "lost the shard Lease" seconds after start).

use std::time::Duration;

use crate::common::k8s::{client, namespace};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use slicectl::controller::lease;

/// Rounds run at once, each on a Lease of its own.
const ROUNDS: usize = 12;

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_racing_for_a_free_lease_never_both_hold_it() {
    let client = client().await;
    let ns = namespace(&client, "lease-race").await;
    let rounds = (0..ROUNDS).map(|round| {
        let (client, ns) = (client.clone(), ns.clone());
        tokio::spawn(async move { race(&client, &ns, &format!("race-{round}")).await })
    });
    for (round, r) in futures::future::join_all(rounds)
        .await
        .into_iter()
        .enumerate()
    {
        let holder = r.unwrap();
        assert!(
            holder == "replica-a" || holder == "replica-b",
            "round {round}: {holder}"
        );
    }
    let _ = crate::common::k8s::kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Two managers for `name`, started together; returns the one holder after
/// checking, every 10 ms for 2.5 s (past the first renewal, at 2 s), that
/// never both flags were up and that the Lease names the one whose flag is.
async fn race(client: &kube::Client, ns: &str, name: &str) -> String {
    let d = Duration::from_secs(3);
    let (a, b) = tokio::join!(
        lease::manager(client, ns, name, "replica-a", d),
        lease::manager(client, ns, name, "replica-b", d),
    );
    let ((a, ta), (b, tb)) = tokio::join!(a.unwrap().watch(), b.unwrap().watch());
    let start = tokio::time::Instant::now();
    let mut seen = (false, false);
    while start.elapsed() < Duration::from_millis(2500) {
        let (x, y) = (*a.borrow(), *b.borrow());
        assert!(
            !(x && y),
            "{name}: both replicas hold the Lease at {:?}",
            start.elapsed()
        );
        seen = (seen.0 || x, seen.1 || y);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (x, y) = (*a.borrow(), *b.borrow());
    assert!(
        x ^ y,
        "{name}: exactly one holds it at the end: a={x} b={y}"
    );
    // Whoever held it first still holds it: no hand-over happened.
    assert_eq!(seen, (x, y), "{name}: the Lease changed hands");
    let lease = Api::<Lease>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap();
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert_eq!(holder, if x { "replica-a" } else { "replica-b" }, "{name}");
    drop((a, b));
    ta.abort();
    tb.abort();
    holder
}
