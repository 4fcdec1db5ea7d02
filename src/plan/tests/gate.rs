//! Issue 35: one gate for every destructive step, and what cannot be seen
//! counts as busy. Each test fails on the code before the gate.

use super::*;
use crate::plan::workload::{BoundPod, ClusterWorkloads, HostNode, Workloads};
use crate::resource::KubeRef;

const THURSDAY: &str = "2026-11-26T05:00:00Z";

fn pod(name: &str) -> BoundPod {
    BoundPod {
        namespace: "ml".into(),
        name: name.into(),
        owner: Some("jobset ml/train".into()),
        do_not_disrupt: false,
    }
}

fn train(name: &str) -> ClusterRef {
    ClusterRef {
        name: name.into(),
        ..cluster()
    }
}

/// A Node of GKE pool `pool` with `pods`.
fn node(pool: &str, pods: Vec<BoundPod>) -> HostNode {
    HostNode {
        name: format!("{pool}-node-0"),
        labels: [(
            crate::plan::workload::GKE_NODEPOOL.to_string(),
            pool.to_string(),
        )]
        .into(),
        pods,
        ..HostNode::default()
    }
}

/// What was read of the clusters, outside `--sim`.
fn seen(clusters: Vec<(ClusterRef, ClusterWorkloads)>) -> Workloads {
    Workloads {
        observed_at: Some(THURSDAY.parse().unwrap()),
        clusters: clusters
            .into_iter()
            .map(|(c, w)| (KubeRef::gke(&c), w))
            .collect(),
        simulated: false,
    }
}

fn held(p: &Plan) -> Vec<(String, &'static str)> {
    p.held.iter().map(|h| (h.address.clone(), h.code)).collect()
}

fn deletes(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter(|a| a.action == ActionKind::Delete)
        .map(|a| a.address())
        .collect()
}

/// Case 1: `gke.name` changed `train` → `train2` while the slice's Job
/// runs in `train`. The old pool is deleted as moved only once its
/// cluster's Pods (listed although no Target names it) show it idle;
/// busy, it is held by its policy; not listed, it is busy-unknown.
#[test]
fn a_moved_pool_is_deleted_only_when_its_old_cluster_shows_it_idle() {
    let f = fleet(vec![v6e("zz", 1)]);
    let mut inv = converged(&f).inventory();
    let moved = on_cluster(f, "train2");
    let opts = PlanOptions::default();
    // Busy in the old cluster: held (whenBusy: wait), the new pool created.
    inv.workloads = seen(vec![
        (
            train("train"),
            ClusterWorkloads::Seen(vec![node("zz-0", vec![pod("job-0")])]),
        ),
        (train("train2"), ClusterWorkloads::Seen(Vec::new())),
    ]);
    let p = super::super::plan(&moved, &inv, &all_kinds(), &opts).unwrap();
    assert_eq!(
        held(&p),
        vec![("slice.zz[0].node_pool".to_string(), "busy")],
        "{:?}",
        kinds(&p)
    );
    assert!(p.held[0].reason.contains("moved"), "{}", p.held[0].reason);
    assert!(deletes(&p).is_empty(), "{:?}", kinds(&p));
    assert!(
        p.actions
            .iter()
            .any(|a| a.action == ActionKind::Create && a.id.scope.to_string().contains("train2"))
    );
    // The old cluster's Pods not listed (nothing known): busy-unknown, never idle.
    inv.workloads = seen(vec![(train("train2"), ClusterWorkloads::Seen(Vec::new()))]);
    let p = super::super::plan(&moved, &inv, &all_kinds(), &opts).unwrap();
    assert_eq!(
        held(&p),
        vec![("slice.zz[0].node_pool".to_string(), "busy_unknown")]
    );
    assert!(
        p.held[0].message.contains("clusters/train")
            || p.held[0].message.contains("us-central1/train"),
        "{}",
        p.held[0].message
    );
    // Idle in the old cluster: deleted as moved.
    inv.workloads = seen(vec![
        (
            train("train"),
            ClusterWorkloads::Seen(vec![node("zz-0", Vec::new())]),
        ),
        (train("train2"), ClusterWorkloads::Seen(Vec::new())),
    ]);
    let p = super::super::plan(&moved, &inv, &all_kinds(), &opts).unwrap();
    assert!(p.held.is_empty(), "{:?}", held(&p));
    assert_eq!(deletes(&p), vec!["slice.zz[0].node_pool".to_string()]);
}

/// Case 2: a cluster whose Kubernetes API slicectl deliberately does not
/// read (deferred: a loopback endpoint with no Google token) is not idle
/// outside `--sim`: the replacement of its pool is held as busy-unknown,
/// and only `destroy --disrupt` lets its delete go. Under `--sim` nothing
/// real runs, and the replacement goes ahead as before.
#[test]
fn a_deferred_cluster_is_busy_unknown_outside_sim() {
    let f = fleet(vec![v6e("zz", 1)]);
    let mut inv = converged(&f).inventory();
    inv.deferred.insert(
        Scope::Kube(KubeRef::gke(&cluster())),
        "slicectl sends no Google credentials to this Google API endpoint".into(),
    );
    inv.workloads = seen(Vec::new());
    let mut spot = f.clone();
    spot.slices.insert(
        "zz".into(),
        slice("zz", "tpu-v6e-slice", "1x1", 1, CapacityType::Spot),
    );
    let opts = PlanOptions {
        max_destroy: 100,
        ..PlanOptions::default()
    };
    let p = super::super::plan(&spot, &inv, &all_kinds(), &opts).unwrap();
    assert_eq!(
        held(&p),
        vec![("slice.zz[0].node_pool".to_string(), "busy_unknown")]
    );
    assert!(
        p.held[0].message.contains("no Google credentials"),
        "{}",
        p.held[0].message
    );
    assert!(p.actions.is_empty(), "{:?}", kinds(&p));
    // destroy holds it too; --disrupt is the explicit override.
    let p = super::super::plan_destroy_with(&f, &inv, &all_kinds(), &opts).unwrap();
    assert_eq!(held(&p).len(), 1);
    let p = super::super::plan_destroy_with(
        &f,
        &inv,
        &all_kinds(),
        &PlanOptions {
            disrupt: true,
            ..opts
        },
    )
    .unwrap();
    assert!(p.held.is_empty());
    assert_eq!(deletes(&p), vec!["slice.zz[0].node_pool".to_string()]);
    // Under --sim nothing real runs: the replacement goes ahead.
    inv.workloads.simulated = true;
    let p = super::super::plan(&spot, &inv, &all_kinds(), &opts).unwrap();
    assert!(p.held.is_empty());
    assert_eq!(
        kinds(&p),
        vec![("slice.zz[0].node_pool".to_string(), ActionKind::Replace)]
    );
}

/// Case 6: 2 → 1 replicas with replica 1 busy and replica 0 idle: the idle
/// one goes, the busy one is kept, and the reason says so.
#[test]
fn a_scale_down_removes_the_idle_replica_and_keeps_the_busy_one() {
    let two = fleet(vec![v6e("rep", 2)]);
    let mut inv = converged(&two).inventory();
    inv.workloads = seen(vec![(
        cluster(),
        ClusterWorkloads::Seen(vec![
            node("rep-0", Vec::new()),
            node("rep-1", vec![pod("job-1")]),
        ]),
    )]);
    let one = fleet(vec![v6e("rep", 1)]);
    let p = super::super::plan(&one, &inv, &all_kinds(), &PlanOptions::default()).unwrap();
    assert!(p.held.is_empty(), "{:?}", held(&p));
    assert_eq!(deletes(&p), vec!["slice.rep[0].node_pool".to_string()]);
    let why = p.actions[0].reason_text();
    assert!(
        why.contains("the busy replicas, then the working ones, are kept first: 1"),
        "{why}"
    );
    // Both busy: the highest index goes, through the gate (held: wait).
    inv.workloads = seen(vec![(
        cluster(),
        ClusterWorkloads::Seen(vec![
            node("rep-0", vec![pod("job-0")]),
            node("rep-1", vec![pod("job-1")]),
        ]),
    )]);
    let p = super::super::plan(&one, &inv, &all_kinds(), &PlanOptions::default()).unwrap();
    assert_eq!(
        held(&p),
        vec![("slice.rep[1].node_pool".to_string(), "busy")]
    );
}

/// Every step kind of a plan reaches the gate: a replace, a delete (gone
/// from the specs), a move, a scale-down, each held when its replica is
/// busy under `whenBusy: wait`, and each named by [`Step::of`].
#[test]
fn every_planned_step_kind_asks_the_gate() {
    use crate::plan::consent::Step;
    let f = fleet(vec![v6e("a", 2), v6e("b", 1)]);
    let mut inv = converged(&f).inventory();
    let busy = |pools: &[&str]| {
        seen(vec![(
            cluster(),
            ClusterWorkloads::Seen(pools.iter().map(|p| node(p, vec![pod("j")])).collect()),
        )])
    };
    inv.workloads = busy(&["a-0", "a-1", "b-0"]);
    let cases: Vec<(Fleet, Step)> = vec![
        // a reshaped: replaced.
        (
            fleet(vec![
                slice("a", "tpu-v6e-slice", "1x1", 2, CapacityType::Spot),
                v6e("b", 1),
            ]),
            Step::Replace,
        ),
        // b gone from the specs: deleted.
        (fleet(vec![v6e("a", 2)]), Step::Delete),
        // a scaled down to 1 (both busy: the highest index goes).
        (fleet(vec![v6e("a", 1), v6e("b", 1)]), Step::ScaleDown),
    ];
    for (next, step) in cases {
        let p = super::super::plan(&next, &inv, &all_kinds(), &PlanOptions::default()).unwrap();
        assert!(!p.held.is_empty(), "{step:?}: {:?}", kinds(&p));
        assert!(p.held.iter().all(|h| h.code == "busy"), "{step:?}");
        let idle = {
            let mut i = inv.clone();
            i.workloads = busy(&[]);
            i
        };
        let p = super::super::plan(&next, &idle, &all_kinds(), &PlanOptions::default()).unwrap();
        assert!(p.held.is_empty(), "{step:?}");
        assert!(
            p.actions.iter().any(|a| Step::of(a) == Some(step)),
            "{step:?}: {:?}",
            kinds(&p)
        );
    }
    // Moved: the Target's cluster changed.
    let moved = on_cluster(f.clone(), "train2");
    let mut w = busy(&["a-0", "a-1", "b-0"]);
    w.clusters.insert(
        KubeRef::gke(&train("train2")),
        ClusterWorkloads::Seen(Vec::new()),
    );
    inv.workloads = w;
    let p = super::super::plan(&moved, &inv, &all_kinds(), &PlanOptions::default()).unwrap();
    assert_eq!(p.held.len(), 3, "{:?}", held(&p));
    inv.workloads = seen(vec![
        (cluster(), ClusterWorkloads::Seen(Vec::new())),
        (train("train2"), ClusterWorkloads::Seen(Vec::new())),
    ]);
    let p = super::super::plan(&moved, &inv, &all_kinds(), &PlanOptions::default()).unwrap();
    assert!(p.actions.iter().any(|a| Step::of(a) == Some(Step::Moved)));
}

/// Case 10: a workload policy carries its source stamp (the Target) in
/// its description as a pool and a MIG do, so another spec source that
/// applies the same ownerId never prunes it, nor takes it with
/// `previousNames`.
#[test]
fn a_workload_policy_carries_its_source_stamp_and_another_source_leaves_it() {
    let iron = || slice("iron", "tpu7x", "2x2x2", 1, CapacityType::OnDemand);
    let b = fleet(vec![iron()]);
    let rendered = render_fleet(&b, &all_kinds());
    let policy = rendered
        .iter()
        .find(|d| d.id.kind == workload_policy::KIND)
        .expect("a tpu7x slice has a workload policy");
    let p = kind::body_as::<ResourcePolicy>(&policy.body).unwrap();
    assert!(
        p.description
            .as_deref()
            .is_some_and(|d| d.contains(" target=train-c")),
        "{:?}",
        p.description
    );
    // Source B made the policy, its pool create failed: only the policy lives.
    let mut live = converged(&b);
    live.node_pools.clear();
    // Source A: same ownerId, other Target names, no slice iron.
    let mut a = fleet(vec![v6e("tiny", 1)]);
    for (name, t) in std::mem::take(&mut a.targets) {
        let mut t = t;
        t.name = format!("a-{name}");
        a.targets.insert(t.name.clone(), t);
    }
    for s in a.slices.values_mut() {
        s.spec.target = format!("a-{}", s.spec.target);
    }
    let p = plan(&a, &live, &PlanOptions::default()).unwrap();
    assert!(
        !p.actions
            .iter()
            .any(|x| x.id.kind == workload_policy::KIND && x.action == ActionKind::Delete),
        "{:?}",
        kinds(&p)
    );
    assert!(
        p.refused
            .iter()
            .any(|r| r.code == "other_source" && r.kind == "workload_policy"),
        "{:?}",
        p.refused
    );
    // previousNames: [iron] in A's slice takes nothing of B's.
    let mut renamed = a.clone();
    let mut gamma = slice("gamma", "tpu7x", "2x2x2", 1, CapacityType::OnDemand);
    gamma.spec.target = "a-train-c".into();
    gamma.spec.previous_names = vec!["iron".into()];
    renamed.slices.insert("gamma".into(), gamma);
    let p = plan(&renamed, &live, &PlanOptions::default()).unwrap();
    assert!(
        p.actions.iter().all(|x| x.id.name != policy.id.name),
        "{:?}",
        kinds(&p)
    );
}
