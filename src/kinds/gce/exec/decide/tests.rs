//! The bootstrap's decisions, from hand-built passes: no cloud, no
//! cluster, no clock.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::*;

const PREFIX: &str = "gce://p/us-central1-b/";

fn want() -> NodeGroup {
    NodeGroup {
        mig: "s-0".into(),
        project: "p".into(),
        zone: "us-central1-b".into(),
        provider_id_prefix: PREFIX.into(),
        hosts: 2,
        chips: 4,
        labels: BTreeMap::from([
            ("slicectl.dev/managed-by".into(), "slicectl".into()),
            ("slicectl.dev/owner".into(), "o".into()),
            ("slicectl.dev/slice".into(), "s".into()),
            ("slicectl.dev/replica".into(), "0".into()),
            (
                "cloud.google.com/gke-tpu-accelerator".into(),
                "tpu-v6e-slice".into(),
            ),
        ]),
        taints: Vec::new(),
        generation: "g".into(),
        bootstrap: true,
        kubernetes_version: None,
        bootstrap_token: None,
        endpoint: "10.0.0.2:6443".into(),
    }
}

/// A Node of VM `vm`, labelled as the group wants, Ready with its chips or
/// not.
fn node(want: &NodeGroup, vm: &str, ready: bool) -> NodeView {
    NodeView {
        name: vm.into(),
        provider_id: format!("{PREFIX}{vm}"),
        ready,
        tpu_capacity: Some(4),
        tpu_allocatable: Some(4),
        labels: want.labels.clone(),
        taints: Vec::new(),
        unschedulable: false,
    }
}

fn probe(status: &str) -> Probe {
    Probe {
        status: Some(status.into()),
        holds_token: None,
    }
}

/// A pass 1 s into a drive of 60 s: VMs `a` and `b` RUNNING, no Node, no
/// report, nothing in hand, nothing learned.
fn seen<'a>(want: &'a NodeGroup, memory: &'a Memory) -> Seen<'a> {
    Seen {
        want,
        may_recreate: false,
        timeout: Duration::from_secs(60),
        elapsed: Duration::from_secs(1),
        vms: BTreeMap::from([
            ("a".into(), Some("RUNNING".into())),
            ("b".into(), Some("RUNNING".into())),
        ]),
        creation_error: None,
        nodes: Vec::new(),
        probes: BTreeMap::new(),
        has_token: false,
        has_ca_hash: false,
        memory,
    }
}

/// The same pass with a token and the CA hash in hand.
fn held<'a>(want: &'a NodeGroup, memory: &'a Memory) -> Seen<'a> {
    Seen {
        has_token: true,
        has_ca_hash: true,
        ..seen(want, memory)
    }
}

/// A VM that says it joined, its metadata holding a token or not.
fn joined(holds_token: bool) -> Probe {
    Probe {
        status: Some("joined".into()),
        holds_token: Some(holds_token),
    }
}

/// One VM's report in a pass.
fn at(vm: &str, p: Probe) -> BTreeMap<String, Probe> {
    BTreeMap::from([(vm.to_string(), p)])
}

fn hand_out(vm: &str) -> Move {
    Move::HandOut { vm: vm.into() }
}

fn remove(vm: &str) -> Move {
    Move::RemoveToken { vm: vm.into() }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_running_vm_without_a_node_gets_a_token_and_the_ca_hash_then_the_join_values() {
    let (w, m) = (want(), Memory::default());
    assert_eq!(
        decide(&seen(&w, &m)),
        vec![
            Move::FetchCaHash,
            Move::ObtainToken,
            hand_out("a"),
            hand_out("b"),
            Move::Wait(ms(500)),
        ]
    );
}

#[test]
fn a_token_and_ca_hash_in_hand_are_used_again_not_fetched() {
    let (w, m) = (want(), Memory::default());
    let s = Seen { ..held(&w, &m) };
    assert_eq!(
        decide(&s),
        vec![hand_out("a"), hand_out("b"), Move::Wait(ms(500))]
    );
}

#[test]
fn a_vm_that_is_not_running_gets_nothing() {
    let (w, m) = (want(), Memory::default());
    let mut s = seen(&w, &m);
    s.vms.insert("b".into(), Some("STAGING".into()));
    s.has_token = true;
    s.has_ca_hash = true;
    assert_eq!(decide(&s), vec![hand_out("a"), Move::Wait(ms(500))]);
    // None running at all, and no error: nothing to hand out, no token.
    s.vms.insert("a".into(), Some("PROVISIONING".into()));
    s.has_token = false;
    assert_eq!(decide(&s), vec![Move::Wait(ms(500))]);
}

#[test]
fn no_token_is_minted_once_every_running_vm_joined() {
    let (w, m) = (want(), Memory::default());
    let s = Seen {
        nodes: vec![node(&w, "a", false), node(&w, "b", false)],
        ..seen(&w, &m)
    };
    let moves = decide(&s);
    assert!(!moves.contains(&Move::ObtainToken), "{moves:?}");
    assert!(!moves.contains(&Move::FetchCaHash), "{moves:?}");
}

#[test]
fn the_token_leaves_a_vm_once_its_node_joined_and_only_once() {
    let w = want();
    let m = Memory::default();
    let s = Seen {
        nodes: vec![node(&w, "a", false)],
        ..held(&w, &m)
    };
    assert_eq!(
        decide(&s),
        vec![remove("a"), hand_out("b"), Move::Wait(ms(500))]
    );
    let m = Memory {
        cleaned: BTreeSet::from(["a".to_string()]),
        ..Memory::default()
    };
    let s = Seen { memory: &m, ..s };
    assert_eq!(decide(&s), vec![hand_out("b"), Move::Wait(ms(500))]);
}

#[test]
fn nodes_are_labelled_and_tainted_as_the_group_wants_and_only_when_they_differ() {
    let mut w = want();
    w.taints = vec!["google.com/tpu=present:NoSchedule".into()];
    let m = Memory::default();
    let mut a = node(&w, "a", false);
    a.labels.remove("cloud.google.com/gke-tpu-accelerator");
    a.labels
        .insert("slicectl.dev/prevent-destroy".into(), "true".into());
    a.taints = vec!["other=x:NoExecute".into()];
    let mut b = node(&w, "b", false);
    b.taints = w.taints.clone();
    let s = Seen {
        nodes: vec![a, b],
        ..seen(&w, &m)
    };
    let moves = decide(&s);
    assert_eq!(
        moves[0],
        Move::LabelNode {
            node: "a".into(),
            labels: BTreeMap::from([
                (
                    "cloud.google.com/gke-tpu-accelerator".into(),
                    Some("tpu-v6e-slice".into())
                ),
                // Not protected any more: the label goes.
                ("slicectl.dev/prevent-destroy".into(), None),
            ]),
            // The Node's own taints are kept.
            taints: Some(vec![
                "google.com/tpu=present:NoSchedule".into(),
                "other=x:NoExecute".into()
            ]),
        }
    );
    // b is as wanted: no patch.
    assert!(
        !moves
            .iter()
            .any(|m| matches!(m, Move::LabelNode { node, .. } if node == "b")),
        "{moves:?}"
    );
    // A protected group keeps the label on its Nodes.
    let mut w = want();
    w.labels
        .insert("slicectl.dev/prevent-destroy".into(), "true".into());
    let mut a = node(&w, "a", false);
    a.labels
        .insert("slicectl.dev/prevent-destroy".into(), "true".into());
    assert_eq!(label_move(&w, &a), None);
}

#[test]
fn every_node_ready_and_clean_finishes_after_reading_the_vms_once_more() {
    let w = want();
    let m = Memory {
        cleaned: BTreeSet::from(["a".to_string(), "b".to_string()]),
        ..Memory::default()
    };
    let s = Seen {
        nodes: vec![node(&w, "a", true), node(&w, "b", true)],
        ..seen(&w, &m)
    };
    assert_eq!(
        decide(&s),
        vec![
            Move::Finish {
                confirm: vec!["a".into(), "b".into()]
            },
            Move::Wait(ms(500)),
        ]
    );
    // This pass's removals count: the token leaves, then it finishes.
    let m = Memory::default();
    let s = Seen { memory: &m, ..s };
    assert_eq!(
        decide(&s),
        vec![
            remove("a"),
            remove("b"),
            Move::Finish {
                confirm: vec!["a".into(), "b".into()]
            },
            Move::Wait(ms(500)),
        ]
    );
}

#[test]
fn it_does_not_finish_while_a_node_is_not_ready_with_its_chips() {
    let w = want();
    let m = Memory::default();
    let mut b = node(&w, "b", true);
    b.tpu_allocatable = Some(0);
    let s = Seen {
        nodes: vec![node(&w, "a", true), b],
        ..seen(&w, &m)
    };
    assert_eq!(
        decide(&s),
        vec![remove("a"), remove("b"), Move::Wait(ms(500))]
    );
}

#[test]
fn a_brought_template_is_not_bootstrapped_only_labelled_and_waited_for() {
    let mut w = want();
    w.bootstrap = false;
    let m = Memory::default();
    let s = seen(&w, &m);
    assert_eq!(decide(&s), vec![Move::Wait(ms(500))]);
    let s = Seen {
        nodes: vec![node(&w, "a", true), node(&w, "b", true)],
        ..seen(&w, &m)
    };
    assert_eq!(
        decide(&s),
        vec![Move::Finish { confirm: vec![] }, Move::Wait(ms(500))]
    );
}

#[test]
fn the_wait_grows_with_the_drive_and_stops_at_the_deadline() {
    let (w, m) = (want(), Memory::default());
    let wait_at = |elapsed: Duration| {
        let s = Seen {
            elapsed,
            ..held(&w, &m)
        };
        decide(&s).pop()
    };
    assert_eq!(wait_at(ms(0)), Some(Move::Wait(ms(500))));
    assert_eq!(wait_at(ms(30_000)), Some(Move::Wait(ms(3_000))));
    assert_eq!(wait_at(ms(55_000)), Some(Move::Wait(ms(5_000))));
    assert_eq!(wait_at(ms(59_800)), Some(Move::Wait(ms(200))));
}

#[test]
fn past_the_deadline_it_times_out_saying_what_each_vm_without_a_node_said() {
    let w = want();
    let m = Memory {
        last_status: BTreeMap::from([("b".to_string(), "waiting-for-token".to_string())]),
        ..Memory::default()
    };
    let s = Seen {
        elapsed: Duration::from_secs(60),
        probes: at("a", probe("joining")),
        ..held(&w, &m)
    };
    assert_eq!(
        decide(&s),
        vec![
            hand_out("a"),
            hand_out("b"),
            Move::TimeOut {
                message:
                    "timed out after 60s: 2 of 2 VM(s) RUNNING, 0 node(s) joined, 0 Ready with 4 \
                          google.com/tpu; VM a says: joining; VM b says: waiting-for-token"
                        .into()
            },
        ]
    );
    // A timeout under a second waits a second; the message says the plan's.
    let s = Seen {
        timeout: Duration::ZERO,
        elapsed: ms(900),
        ..s
    };
    assert_eq!(decide(&s).pop(), Some(Move::Wait(ms(100))));
    let s = Seen {
        elapsed: ms(1_000),
        ..s
    };
    assert!(
        matches!(decide(&s).pop(), Some(Move::TimeOut { message }) if message.starts_with("timed out after 0ns: "))
    );
}

#[test]
fn a_bulk_stockout_fails_at_once_with_the_cloud_words_and_nothing_else() {
    let (w, m) = (want(), Memory::default());
    let err = (
        "ZONE_RESOURCE_POOL_EXHAUSTED".to_string(),
        "no capacity".to_string(),
    );
    // BULK: the MIG lists its VMs, none created yet, and says why.
    let s = Seen {
        vms: BTreeMap::from([("a".into(), None), ("b".into(), None)]),
        creation_error: Some(err.clone()),
        ..seen(&w, &m)
    };
    assert_eq!(
        decide(&s),
        vec![Move::FailStockout {
            code: err.0.clone(),
            message: err.1.clone()
        }]
    );
    // Every VM created: not a stockout, whatever an old attempt said.
    let s = Seen {
        creation_error: Some(err),
        ..seen(&w, &m)
    };
    assert!(
        !decide(&s)
            .iter()
            .any(|m| matches!(m, Move::FailStockout { .. }))
    );
}

#[test]
fn a_partial_individual_slice_is_a_stockout_that_says_how_many_vms_exist() {
    let (w, m) = (want(), Memory::default());
    let err = (
        "ZONE_RESOURCE_POOL_EXHAUSTED".to_string(),
        "no capacity".to_string(),
    );
    // INDIVIDUAL (on-demand, spot): one VM made, one not, and why.
    let s = Seen {
        vms: BTreeMap::from([("a".into(), None), ("b".into(), Some("RUNNING".into()))]),
        creation_error: Some(err.clone()),
        ..seen(&w, &m)
    };
    let moves = decide(&s);
    let [Move::FailStockout { code, message }] = &moves[..] else {
        panic!("{moves:?}");
    };
    assert_eq!(code, &err.0);
    assert!(
        message
            .starts_with("no capacity (1 of 2 VM(s) created: a partial TPU slice is not a slice"),
        "{message}"
    );
    // VMs not created yet and no error: still creating, wait.
    let s = Seen {
        creation_error: None,
        ..s
    };
    assert!(matches!(decide(&s).pop(), Some(Move::Wait(_))));
}

#[test]
fn a_vm_that_gave_up_fails_the_step_with_its_words() {
    let (w, m) = (want(), Memory::default());
    let s = Seen {
        probes: at("a", probe("failed: CA hash mismatch (attempt 5/5)")),
        ..seen(&w, &m)
    };
    assert_eq!(
        decide(&s),
        vec![
            Move::FetchCaHash,
            Move::ObtainToken,
            hand_out("a"),
            hand_out("b"),
            Move::FailBootstrap {
                message: "0 of 2 node(s) joined; VM a: failed: CA hash mismatch (attempt 5/5)"
                    .into()
            },
        ]
    );
}

#[test]
fn a_vm_that_keeps_failing_fails_the_step_after_the_grace_only() {
    let w = want();
    let failing = at("a", probe("failed: token rejected; retrying"));
    let fails = |m: &Memory, elapsed: Duration| {
        let s = Seen {
            elapsed,
            timeout: Duration::from_secs(600),
            probes: failing.clone(),
            ..held(&w, m)
        };
        decide(&s)
            .iter()
            .any(|m| matches!(m, Move::FailBootstrap { .. }))
    };
    // First seen failing now: it retries on its own.
    assert!(!fails(&Memory::default(), Duration::from_secs(200)));
    let m = Memory {
        failing_since: BTreeMap::from([("a".to_string(), Duration::from_secs(10))]),
        ..Memory::default()
    };
    assert!(!fails(&m, Duration::from_secs(69)));
    assert!(fails(&m, Duration::from_secs(70)));
}

#[test]
fn a_vm_that_lost_its_node_fails_the_step_unless_the_plan_offered_a_recreate() {
    let w = want();
    let m = Memory::default();
    let lost = joined(false);
    let s = Seen {
        probes: at("a", lost),
        ..held(&w, &m)
    };
    // No token for it (none makes its kubelet register again).
    assert_eq!(
        decide(&s),
        vec![
            hand_out("b"),
            Move::FailNodeLost {
                vms: vec!["a".into()]
            }
        ]
    );
    let s = Seen {
        may_recreate: true,
        ..s
    };
    assert_eq!(
        decide(&s),
        vec![
            hand_out("b"),
            Move::Recreate {
                vms: vec!["a".into()]
            },
            Move::Wait(ms(500))
        ]
    );
    // Once only.
    let m = Memory {
        recreated: BTreeSet::from(["a".to_string()]),
        ..Memory::default()
    };
    let s = Seen { memory: &m, ..s };
    assert!(matches!(
        decide(&s).pop(),
        Some(Move::FailNodeLost { vms }) if vms == ["a"]
    ));
}

#[test]
fn a_vm_that_says_it_joined_and_still_holds_its_token_has_not_lost_its_node() {
    let (w, m) = (want(), Memory::default());
    let s = Seen {
        probes: at("a", joined(true)),
        ..held(&w, &m)
    };
    assert_eq!(
        decide(&s),
        vec![hand_out("a"), hand_out("b"), Move::Wait(ms(500))]
    );
}

#[test]
fn memory_keeps_when_a_vm_began_failing_and_forgets_a_recreated_vm() {
    let mut m = Memory::default();
    m.note(
        &BTreeMap::from([
            ("a".to_string(), probe("failed: x; retrying")),
            ("b".to_string(), probe("joining")),
            ("c".to_string(), Probe::default()),
            ("d".to_string(), joined(false)),
        ]),
        Duration::from_secs(5),
    );
    m.note(
        &at("a", probe("failed: y; retrying")),
        Duration::from_secs(9),
    );
    assert_eq!(
        m.failing_since,
        BTreeMap::from([("a".to_string(), Duration::from_secs(5))])
    );
    assert_eq!(
        m.last_status,
        BTreeMap::from([
            ("a".to_string(), "failed: y; retrying".to_string()),
            ("b".to_string(), "joining".to_string()),
        ])
    );
    m.note(&at("a", probe("joining")), Duration::from_secs(12));
    assert!(m.failing_since.is_empty());
    m.cleaned.insert("a".into());
    m.recreated(&["a".to_string()]);
    assert!(!m.cleaned.contains("a") && !m.last_status.contains_key("a"));
    assert!(m.recreated.contains("a"));
}

#[test]
fn a_vm_gave_up_only_on_its_last_attempt() {
    assert!(gave_up("failed: x (attempt 5/5)"));
    assert!(!gave_up("failed: x (attempt 2/5)"));
    assert!(!gave_up("failed: x; retrying"));
    assert!(!gave_up("joined"));
}
