//! Issue 21 (sharding): `slicectl controller --shards 6`, three replicas,
//! six Targets (each on its own cluster in the simulator) against the real
//! control plane. The replicas share the shards two each; every slice is
//! created exactly once; one replica is SIGKILLed while creates are in
//! flight, and its shards are taken over by the others with no duplicate
//! create; every SliceStatus converges, labelled with its shard.

use crate::common;
use crate::e2e_controller::{
    Replica, creates, set_specs, steal_lease, stop, wait_converged, wait_for,
};

use std::collections::BTreeMap;
use std::time::Duration;

use common::k8s::*;
use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use slicectl::controller::shard::shard_of;
use slicectl_sim::{FaultConfig, SimConfig, SimHandle, Simulator};

const TEAMS: [&str; 6] = ["team-a", "team-b", "team-c", "team-d", "team-e", "team-f"];

fn cluster(team: &str) -> String {
    format!("projects/example-project/locations/us-central1/clusters/{team}")
}

/// Target `team` on cluster `team` (v6e zone).
fn target(team: &str) -> String {
    format!(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: {team}\nspec:\n  project: example-project\n  zone: us-central1-b\n  ownerId: e2e\n  gke:\n    location: us-central1\n    name: {team}\n"
    )
}

/// Slice `name` (one v6e 1x1) on Target `team`.
fn slice(name: &str, team: &str) -> String {
    slice_yaml(name, "tpu-v6e-slice", "1x1", 1, "")
        .replace("target: train", &format!("target: {team}"))
}

/// Every node pool of the six clusters, `cluster/pool`, sorted.
async fn pools(sim: &SimHandle) -> Vec<String> {
    let mut out = Vec::new();
    for t in TEAMS {
        let url = format!("{}/v1/{}/nodePools", sim.base_url(), cluster(t));
        let v: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
        for p in v["nodePools"].as_array().cloned().unwrap_or_default() {
            out.push(format!("{t}/{}", p["name"].as_str().unwrap_or_default()));
        }
    }
    out.sort();
    out
}

/// The specs: each Target with `per` slices (`<team>-s<i>`).
fn specs(per: usize) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for t in TEAMS {
        let mut text = target(t);
        for i in 0..per {
            text.push_str("---\n");
            text.push_str(&slice(&format!("{t}-s{i}"), t));
        }
        files.push((format!("{t}.yaml"), text));
    }
    files
}

/// Writes the specs with `per` slices per Target into the ConfigMap.
async fn put(cms: &Api<ConfigMap>, per: usize) {
    let files = specs(per);
    let v: Vec<(&str, String)> = files.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    set_specs(cms, &v).await;
}

/// The simulator with the six Targets' clusters.
async fn six_clusters(latency: Duration) -> SimHandle {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Simulator::start(
        SimConfig {
            clusters: TEAMS.iter().map(|t| cluster(t)).collect(),
            operation_latency: latency,
            seed: 21,
            faults: FaultConfig::default(),
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

/// A namespace with no specs, a simulator and replica `name` with
/// `--shards 2`, once it holds both shards.
async fn holding_two(prefix: &str, name: &'static str) -> (String, SimHandle, Replica) {
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, prefix).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    set_specs(&cms, &[]).await;
    let sim = sim(Duration::from_millis(100), 1, FaultConfig::default()).await;
    let r = Replica::start_with(&sim, &ns, name, &["--shards", "2"]);
    wait_for("a replica to hold both shards", 30, &[&r], || async {
        held(&r).await == 2.0
    })
    .await;
    (ns, sim, r)
}

/// `LEASE=HOLDER` lines of every Lease in `ns`.
fn lease_holders(ns: &str) -> String {
    ok(&kubectl(&[
        "get",
        "leases",
        "-n",
        ns,
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.spec.holderIdentity}{\"\\n\"}{end}",
    ]))
}

async fn held(r: &Replica) -> f64 {
    r.metric("slicectl_shards_held ").await.unwrap_or(-1.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_share_six_targets_and_take_over_a_killed_ones_shards() {
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "shards").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let sim = six_clusters(Duration::from_millis(1500)).await;
    // One Target per shard (pinned by the unit test of the hash).
    let shard: BTreeMap<&str, u32> = TEAMS.iter().map(|t| (*t, shard_of(t, 6))).collect();
    assert_eq!(
        shard
            .values()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        6
    );
    put(&cms, 1).await;

    let args = ["--resync", "3s", "--shards", "6"];
    let started = tokio::time::Instant::now();
    let a = Replica::start_with(&sim, &ns, "shard-a", &args);
    let b = Replica::start_with(&sim, &ns, "shard-b", &args);
    let c = Replica::start_with(&sim, &ns, "shard-c", &args);
    let names: Vec<String> = TEAMS.iter().map(|t| format!("{t}-s0")).collect();
    let first: Vec<&str> = names.iter().map(String::as_str).collect();
    wait_for("six pools", 60, &[&a, &b, &c], || async {
        pools(&sim).await.len() == 6
    })
    .await;
    wait_converged(&ns, &first, &a).await;
    eprintln!(
        "six slices converged by three replicas in {:?}",
        started.elapsed()
    );
    // Fair: two shards each, once the membership settled.
    wait_for("two shards each", 30, &[&a, &b, &c], || async {
        held(&a).await == 2.0 && held(&b).await == 2.0 && held(&c).await == 2.0
    })
    .await;
    for r in [&a, &b, &c] {
        assert_eq!(
            r.metric("slicectl_leader ").await,
            Some(1.0),
            "{}",
            r.text()
        );
        assert_eq!(r.metric("slicectl_shards ").await, Some(6.0));
    }
    assert_eq!(creates(&sim), 6, "each slice created once");
    // Each status object carries its Target's shard.
    for t in TEAMS {
        let o = kubectl(&[
            "get",
            "-n",
            &ns,
            &format!("slicestatus/{t}-s0"),
            "-o",
            "jsonpath={.metadata.labels.slicectl\\.dev/shard}",
        ]);
        assert_eq!(ok(&o), shard[t].to_string(), "{t}");
    }

    // A second slice per Target; SIGKILL a once creates are in flight (the
    // operations take 1.5 s).
    put(&cms, 2).await;
    wait_for("the new creates", 60, &[&a, &b, &c], || async {
        creates(&sim) > 6
    })
    .await;
    let mut a = a;
    a.child.start_kill().unwrap();
    let _ = a.child.wait().await;
    let killed = tokio::time::Instant::now();
    wait_for("b and c to hold all six shards", 30, &[&b, &c], || async {
        held(&b).await + held(&c).await == 6.0
    })
    .await;
    let took = killed.elapsed();
    eprintln!("a's shards taken over in {took:?} (lease duration 4s)");
    // Membership and shard Leases expire together (4 s), then one
    // coordinator tick (1 s) and the acquisition.
    assert!(took <= Duration::from_secs(8), "took over in {took:?}");
    assert_eq!(held(&b).await, 3.0, "{}", b.text());
    let all: Vec<String> = TEAMS
        .iter()
        .flat_map(|t| [format!("{t}-s0"), format!("{t}-s1")])
        .collect();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    wait_for("twelve pools", 60, &[&b, &c], || async {
        pools(&sim).await.len() == 12
    })
    .await;
    wait_converged(&ns, &all, &b).await;
    assert_eq!(
        creates(&sim),
        12,
        "no duplicate create\n{}\n{}",
        b.text(),
        c.text()
    );
    let expected: Vec<String> = {
        let mut v: Vec<String> = TEAMS
            .iter()
            .flat_map(|t| [format!("{t}/{t}-s0-0"), format!("{t}/{t}-s1-0")])
            .collect();
        v.sort();
        v
    };
    assert_eq!(pools(&sim).await, expected, "no leak");
    // The shard Leases are held by b and c only.
    let leases = lease_holders(&ns);
    for k in 0..6 {
        let line = leases
            .lines()
            .find(|l| l.starts_with(&format!("slicectl-{k}=")))
            .unwrap_or_else(|| panic!("no Lease slicectl-{k} in\n{leases}"));
        assert!(
            line.ends_with("=shard-b") || line.ends_with("=shard-c"),
            "{line}"
        );
    }
    drop(b);
    drop(c);
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// A sharded replica whose shard Lease is taken by another holder (not
/// renewed in time, say) stops writing and exits non-zero at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_that_loses_a_shard_lease_exits_non_zero() {
    let (ns, _sim, mut a) = holding_two("shardlost", "shard-a").await;
    steal_lease(&ns, "slicectl-1", &mut a).await;
    assert!(
        a.text().contains("lost the shard Lease slicectl-1"),
        "{}",
        a.text()
    );
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

const DELETE: &str = "container.projects.locations.clusters.nodePools.delete";

fn deletes(sim: &SimHandle) -> u64 {
    sim.stats().by_method.get(DELETE).copied().unwrap_or(0)
}

/// Lines of `r`'s log refusing `slice`'s pool with `code`.
fn refusals(r: &Replica, slice: &str, code: &str) -> usize {
    r.text()
        .lines()
        .filter(|l| l.contains("change refused") && l.contains(slice) && l.contains(code))
        .count()
}

/// A Target removed together with its Slices belongs to no shard, yet its
/// node pool is exactly one replica's (the holder of the removed Target's
/// shard: its cluster is named by no Target any more): without
/// `--allow-empty-source` that replica alone reports it `target_removed`
/// and nothing is deleted (the guard as unsharded); with it, exactly one
/// delete is sent, though every replica sees the cluster.
#[tokio::test(flavor = "multi_thread")]
async fn a_removed_target_is_pruned_by_exactly_one_replica() {
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "shardrm").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let sim = six_clusters(Duration::from_millis(200)).await;
    put(&cms, 1).await;
    let args = ["--resync", "1s", "--shards", "6"];
    let a = Replica::start_with(&sim, &ns, "rm-a", &args);
    let b = Replica::start_with(&sim, &ns, "rm-b", &args);
    wait_for("six pools", 60, &[&a, &b], || async {
        pools(&sim).await.len() == 6
    })
    .await;
    wait_for("three shards each", 30, &[&a, &b], || async {
        held(&a).await == 3.0 && held(&b).await == 3.0
    })
    .await;
    // team-c's file (its Target and its Slice) is removed.
    let files: Vec<(String, String)> = specs(1)
        .into_iter()
        .filter(|(k, _)| k != "team-c.yaml")
        .collect();
    let v: Vec<(&str, String)> = files.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    set_specs(&cms, &v).await;
    wait_for("the refusal", 30, &[&a, &b], || async {
        refusals(&a, "team-c-s0", "target_removed") + refusals(&b, "team-c-s0", "target_removed")
            >= 2
    })
    .await;
    // A few more cycles of both (1 s resync).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (ra, rb) = (
        refusals(&a, "team-c-s0", "target_removed"),
        refusals(&b, "team-c-s0", "target_removed"),
    );
    assert!(
        (ra == 0) != (rb == 0),
        "exactly one replica reports it: a {ra}, b {rb}\n{}\n{}",
        a.text(),
        b.text()
    );
    assert_eq!(deletes(&sim), 0, "refused: nothing deleted");
    assert_eq!(pools(&sim).await.len(), 6);
    for r in [&a, &b] {
        assert_eq!(refusals(r, "team-c-s0", "other_source"), 0, "{}", r.text());
    }
    stop(a).await;
    stop(b).await;

    // The override: exactly one delete, by the holder of team-c's shard.
    let args = ["--resync", "1s", "--shards", "6", "--allow-empty-source"];
    let c = Replica::start_with(&sim, &ns, "rm-c", &args);
    let d = Replica::start_with(&sim, &ns, "rm-d", &args);
    wait_for("team-c's pool deleted", 60, &[&c, &d], || async {
        pools(&sim).await.len() == 5
    })
    .await;
    wait_for("both replicas holding shards", 30, &[&c, &d], || async {
        held(&c).await + held(&d).await == 6.0 && held(&c).await > 0.0 && held(&d).await > 0.0
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        deletes(&sim),
        1,
        "one delete for one pool\n{}\n{}",
        c.text(),
        d.text()
    );
    assert!(!pools(&sim).await.iter().any(|p| p.starts_with("team-c/")));
    assert_eq!(creates(&sim), 6, "nothing recreated");
    drop(c);
    drop(d);
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// A rollout that changes `--shards`: a replica started with `--shards 3`
/// while a live member runs `--shards 2` holds no shard (the same Lease
/// would stand for other Targets) and says so, and so does the old member;
/// once the old member is gone (a clean stop deletes its membership) the
/// new one takes all its shards.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_with_another_shard_count_holds_nothing_until_the_old_members_are_gone() {
    let (ns, sim, old) = holding_two("shardn", "n-old").await;
    let new = Replica::start_with(&sim, &ns, "n-new", &["--shards", "3"]);
    let says = |r: &Replica, theirs: &str| {
        r.text()
            .lines()
            .any(|l| l.contains("a live replica runs with another --shards") && l.contains(theirs))
    };
    wait_for("both to say so", 30, &[&old, &new], || async {
        says(&new, "n-old") && says(&old, "n-new")
    })
    .await;
    wait_for(
        "the old replica to release its shards",
        30,
        &[&old, &new],
        || async { held(&old).await == 0.0 },
    )
    .await;
    // Held off for a while: several coordinator ticks (1 s).
    for _ in 0..6 {
        assert_eq!(held(&new).await, 0.0, "{}", new.text());
        assert_eq!(held(&old).await, 0.0, "{}", old.text());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop(old).await;
    let gone = tokio::time::Instant::now();
    wait_for(
        "the new replica to hold all three shards",
        30,
        &[&new],
        || async { held(&new).await == 3.0 },
    )
    .await;
    eprintln!(
        "shards taken {:?} after the old member left",
        gone.elapsed()
    );
    let leases = lease_holders(&ns);
    for k in 0..3 {
        assert!(
            leases.lines().any(|l| l == format!("slicectl-{k}=n-new")),
            "{leases}"
        );
    }
    drop(new);
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Cycles `r` finished so far.
fn cycles_of(r: &Replica) -> usize {
    r.text().matches("cycle finished").count()
}

/// Whether `r` logged that it waits for a controller of the other mode.
fn waits(r: &Replica) -> bool {
    r.text()
        .contains("waiting for a controller of the other mode")
}

/// Issue 35, case 12: a leader (`--shards 1`, the leader Lease `slicectl`)
/// and a `--shards 2` replica (Leases `slicectl-0/1`) at once, as a rolling
/// update from `deploy/` to `deploy/sharding` (or back) runs them. In both
/// start orders exactly one of them writes: the one that came second (or
/// the sharded one, whichever) waits and says so (log, metric, `/readyz`),
/// every pool is created exactly once, and the other takes over once the
/// writer stops.
#[tokio::test(flavor = "multi_thread")]
async fn a_leader_and_a_sharded_replica_never_both_write() {
    for leader_first in [true, false] {
        let client = client().await;
        apply_crd();
        let ns = namespace(&client, if leader_first { "mode-l" } else { "mode-s" }).await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let sim = six_clusters(Duration::from_millis(300)).await;
        put(&cms, 1).await;
        let leader_args = ["--resync", "2s"];
        let sharded_args = ["--resync", "2s", "--shards", "2"];
        let (first, second) = if leader_first {
            let a = Replica::start_with(&sim, &ns, "mode-leader", &leader_args);
            wait_for("six pools by the leader", 60, &[&a], || async {
                pools(&sim).await.len() == 6
            })
            .await;
            let b = Replica::start_with(&sim, &ns, "mode-sharded", &sharded_args);
            (a, b)
        } else {
            let a = Replica::start_with(&sim, &ns, "mode-sharded", &sharded_args);
            wait_for("six pools by the sharded replica", 60, &[&a], || async {
                pools(&sim).await.len() == 6 && held(&a).await == 2.0
            })
            .await;
            let b = Replica::start_with(&sim, &ns, "mode-leader", &leader_args);
            (a, b)
        };
        let (leader, sharded) = if leader_first {
            (&first, &second)
        } else {
            (&second, &first)
        };
        // The sharded replica steps back in both orders: while the leader
        // Lease is live it holds no shard and says so.
        wait_for(
            "the sharded replica to wait",
            30,
            &[leader, sharded],
            || async {
                waits(sharded)
                    && held(sharded).await == 0.0
                    && sharded.metric("slicectl_other_mode_waiting ").await == Some(1.0)
            },
        )
        .await;
        if !leader_first {
            // The leader came second: it waited while the shard Leases
            // were held (unless the sharded replica released them before
            // its first look), then went on once they were released.
            wait_for(
                "the leader to reconcile",
                30,
                &[leader, sharded],
                || async {
                    leader.metric("slicectl_other_mode_waiting ").await == Some(0.0)
                        && leader.metric("slicectl_leader ").await == Some(1.0)
                        && (!waits(leader)
                            || leader
                                .text()
                                .contains("no controller of the other mode runs any more"))
                },
            )
            .await;
        }
        let (code, body) = sharded_readyz(sharded).await;
        assert_eq!(code, 200, "{body}");
        assert!(body.starts_with("ok, standing by: "), "{body}");
        assert!(body.contains("slicectl (held by mode-leader)"), "{body}");
        // One writer: more slices are created once each, by the leader;
        // the sharded replica runs no cycle.
        let sharded_cycles = cycles_of(sharded);
        put(&cms, 2).await;
        wait_for("twelve pools", 60, &[leader, sharded], || async {
            pools(&sim).await.len() == 12
        })
        .await;
        for _ in 0..6 {
            assert_eq!(held(sharded).await, 0.0, "{}", sharded.text());
            assert_eq!(
                sharded.metric("slicectl_leader ").await,
                Some(0.0),
                "{}",
                sharded.text()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert_eq!(cycles_of(sharded), sharded_cycles, "{}", sharded.text());
        assert_eq!(creates(&sim), 12, "each slice created once");
        // The leader stops: the sharded replica takes both shards.
        let (leader, sharded) = if leader_first {
            (first, second)
        } else {
            (second, first)
        };
        stop(leader).await;
        wait_for(
            "the sharded replica to hold both shards",
            30,
            &[&sharded],
            || async {
                held(&sharded).await == 2.0
                    && sharded.metric("slicectl_other_mode_waiting ").await == Some(0.0)
            },
        )
        .await;
        assert_eq!(creates(&sim), 12, "no duplicate create after the hand-over");
        stop(sharded).await;
        let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    }
}

/// `/readyz` of `r`.
async fn sharded_readyz(r: &Replica) -> (u16, String) {
    r.get("/readyz").await.unwrap_or((0, String::new()))
}
