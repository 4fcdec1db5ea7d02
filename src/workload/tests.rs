#![cfg(test)]

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::*;
use crate::plan::workload::{BoundPod, ClusterWorkloads, HostNode, Workloads};
use crate::resource::{ClusterRef, KubeRef};
use crate::spec::model::{WorkloadCapacity, WorkloadRule, Workloads as Policy};
use crate::spec::{Fleet, SourceFile};

const TARGET: &str = r#"
apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: train}
spec:
  project: example-project
  zone: us-central1-b
  ownerId: platform
  gke: {location: us-central1, name: train}
"#;

fn fleet(policy: Policy) -> Fleet {
    let mut f = crate::spec::load(&[SourceFile {
        path: "t.yaml".into(),
        text: TARGET.into(),
    }])
    .unwrap();
    f.targets.get_mut("train").unwrap().spec.workloads = Some(policy);
    f
}

fn policy(rules: Vec<WorkloadRule>) -> Policy {
    Policy {
        enabled: true,
        grace_period: Some("2m".into()),
        rules,
    }
}

fn any_rule() -> WorkloadRule {
    WorkloadRule {
        capacity: Some(vec![WorkloadCapacity::OnDemand, WorkloadCapacity::Spot]),
        ..WorkloadRule::default()
    }
}

fn kube() -> KubeRef {
    KubeRef::gke(&ClusterRef {
        project: "example-project".into(),
        location: "us-central1".into(),
        name: "train".into(),
    })
}

fn jobset(name: &str) -> ObservedJobSet {
    ObservedJobSet {
        namespace: "ml".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        ..ObservedJobSet::default()
    }
}

/// A 40-hex job-key per Job (JobSet writes sha1("<ns>/<job>"); any hash
/// of the same length names pools the same way).
fn job_key(job: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(format!("ml/{job}").as_bytes()))[..40].to_string()
}

fn leader(jobset: &str, job: &str, topo: &str, chips: u32) -> PendingPod {
    let mut meta = BTreeMap::new();
    meta.insert(keys::JOBSET_NAME.to_string(), jobset.to_string());
    meta.insert(keys::JOB_KEY.to_string(), job_key(job));
    meta.insert(keys::COMPLETION_INDEX.to_string(), "0".to_string());
    PendingPod {
        namespace: "ml".into(),
        name: format!("{job}-0-abcde"),
        labels: meta.clone(),
        annotations: meta,
        node_selector: BTreeMap::from([
            (keys::ACCELERATOR.to_string(), "tpu-v6e-slice".to_string()),
            (keys::TOPOLOGY.to_string(), topo.to_string()),
        ]),
        tpu_chips: chips,
        unschedulable: true,
        deleting: false,
    }
}

fn views(obs: Observed) -> DemandViews {
    DemandViews::from([(kube(), DemandView::Seen(obs))])
}

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

fn no_nodes() -> Workloads {
    Workloads {
        observed_at: Some(at(1_000)),
        clusters: BTreeMap::from([(kube(), ClusterWorkloads::Seen(Vec::new()))]),
        simulated: false,
    }
}

#[test]
fn pool_names_are_tpu_provisioners() {
    let key = job_key("train-slice-0");
    assert_eq!(
        pool_name("train", &key).unwrap(),
        format!("train-{}", &key[..5])
    );
    let long = "a-very-long-jobset-name-for-a-big-training-run";
    let name = pool_name(long, &key).unwrap();
    assert_eq!(name, format!("{}-{}", &long[..34], &key[..5]));
    assert!(name.len() <= 40);
    // GKE refuses these, so slicectl says why instead of sending them.
    assert!(
        pool_name("9lives", &key)
            .unwrap_err()
            .contains("rename the JobSet")
    );
    assert!(pool_name("a.b", &key).is_err());
    assert!(pool_name("train", "abc").is_err());
}

#[test]
fn a_pending_leader_gets_a_slice_shaped_like_slicectls_own() {
    let f = fleet(policy(vec![any_rule()]));
    let obs = Observed {
        jobsets: vec![jobset("train")],
        pending: vec![
            leader("train", "train-slice-0", "2x4", 8),
            // A worker (completion index 1) does not trigger anything.
            {
                let mut w = leader("train", "train-slice-0", "2x4", 8);
                w.annotations
                    .insert(keys::COMPLETION_INDEX.into(), "1".into());
                w.labels.insert(keys::COMPLETION_INDEX.into(), "1".into());
                w.name = "train-slice-0-1-xyz".into();
                w
            },
        ],
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(1_000));
    assert!(d.refused.is_empty(), "{:?}", d.refused);
    let [s] = d.slices.as_slice() else {
        panic!("one slice: {:?}", d.slices)
    };
    // v6e 2x4 with 8 chips per pod: one ct6e-standard-8t host, not
    // tpu-provisioner's ceil(8/4) = 2 (anchors A.17 item 4).
    assert_eq!(s.shape.machine_type, "ct6e-standard-8t");
    assert_eq!(s.shape.hosts, 1);
    let o = s.workload.as_ref().unwrap();
    assert_eq!(o.jobset_ref(), "ml/train");
    assert_eq!(
        s.name,
        pool_name("train", &job_key("train-slice-0")).unwrap()
    );
    // The same pod with 4 chips: two ct6e-standard-4t hosts.
    let obs = Observed {
        jobsets: vec![jobset("train")],
        pending: vec![leader("train", "train-slice-0", "2x4", 4)],
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(1_000));
    assert_eq!(d.slices[0].shape.hosts, 2);
    assert_eq!(d.slices[0].shape.machine_type, "ct6e-standard-4t");
}

#[test]
fn every_job_of_a_multislice_jobset_gets_its_own_slice() {
    let f = fleet(policy(vec![any_rule()]));
    let obs = Observed {
        jobsets: vec![jobset("multi")],
        pending: (0..3)
            .map(|i| leader("multi", &format!("multi-slice-{i}"), "2x2", 4))
            .collect(),
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(1_000));
    let names: std::collections::BTreeSet<&str> =
        d.slices.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn opt_outs_kueue_and_ended_jobsets_are_left_alone() {
    let f = fleet(policy(vec![any_rule()]));
    let mut opted = leader("a", "a-slice-0", "2x2", 4);
    opted.labels.insert(OPT_OUTS[0].into(), "true".into());
    let mut js_opted = jobset("b");
    js_opted
        .annotations
        .insert(OPT_OUTS[1].into(), "true".into());
    let mut kueue = leader("c", "c-slice-0", "2x2", 4);
    kueue
        .annotations
        .insert(keys::CONSUME_PROVISIONING_REQUEST.into(), "c-pr".into());
    let mut done = jobset("d");
    done.ended = Some(Ended {
        condition: "Completed".into(),
        at: at(900),
    });
    let mut scheduled = leader("e", "e-slice-0", "2x2", 4);
    scheduled.unschedulable = false;
    let obs = Observed {
        jobsets: vec![jobset("a"), js_opted, jobset("c"), done, jobset("e")],
        pending: vec![
            opted,
            leader("b", "b-slice-0", "2x2", 4),
            kueue,
            leader("d", "d-slice-0", "2x2", 4),
            scheduled,
        ],
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(1_000));
    assert!(d.slices.is_empty(), "{:?}", d.slices);
    let why: Vec<String> = d
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.jobset, s.why))
        .collect();
    assert_eq!(why.len(), 3, "{why:?}");
    assert!(why[0].starts_with("ml/a: opted out"), "{why:?}");
    assert!(why[1].starts_with("ml/b: opted out"), "{why:?}");
    assert!(why[2].contains("ProvisioningRequest"), "{why:?}");
}

#[test]
fn the_policy_refuses_with_a_reason() {
    let rule = WorkloadRule {
        namespaces: Some(vec!["ml".into()]),
        topologies: Some(vec!["2x2".into()]),
        max_chips: Some(8),
        ..WorkloadRule::default()
    };
    let f = fleet(policy(vec![rule]));
    let mut spot = leader("spot", "spot-slice-0", "2x2", 4);
    spot.node_selector.insert(keys::SPOT.into(), "true".into());
    let mut other_ns = leader("x", "x-slice-0", "2x2", 4);
    other_ns.namespace = "web".into();
    let mut x = jobset("x");
    x.namespace = "web".into();
    let obs = Observed {
        jobsets: vec![
            jobset("big"),
            jobset("spot"),
            x,
            jobset("ok"),
            jobset("over"),
        ],
        pending: vec![
            leader("big", "big-slice-0", "4x4", 4),
            spot,
            other_ns,
            leader("ok", "ok-slice-0", "2x2", 4),
        ],
    };
    // 4 chips already held in ml by a live slice: ok (4) fits, nothing more.
    let live = [LiveSlice {
        target: "train".into(),
        pool: "held-abcde".into(),
        origin: Origin {
            namespace: "ml".into(),
            jobset: "held".into(),
            uid: "u".into(),
            job_key: "abcde".into(),
        },
        chips: 4,
    }];
    let mut obs = obs;
    obs.jobsets.push(jobset("held"));
    obs.pending.push(leader("over", "over-slice-0", "2x2", 4));
    let d = derive(&f, &views(obs), &live, &no_nodes(), at(1_000));
    let codes: Vec<(&str, &str)> = d
        .refused
        .iter()
        .map(|r| (r.jobset.as_str(), r.code))
        .collect();
    assert_eq!(
        codes,
        [
            ("big", "topology"),
            ("over", "max_chips"),
            ("spot", "capacity"),
            ("x", "no_rule")
        ]
    );
    assert_eq!(d.slices.len(), 1);
    assert_eq!(d.slices[0].workload.as_ref().unwrap().jobset, "ok");
    assert!(
        d.refused[1].message.contains("maxChips 8"),
        "{}",
        d.refused[1].message
    );
}

fn live(jobset: &str, pool: &str) -> LiveSlice {
    LiveSlice {
        target: "train".into(),
        pool: pool.into(),
        origin: Origin {
            namespace: "ml".into(),
            jobset: jobset.into(),
            uid: format!("uid-{jobset}"),
            job_key: "k".into(),
        },
        chips: 8,
    }
}

fn node(pool: &str, labels: &[(&str, &str)], pods: Vec<BoundPod>) -> HostNode {
    let mut l: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.insert("cloud.google.com/gke-nodepool".into(), pool.into());
    HostNode {
        name: format!("{pool}-node"),
        labels: l,
        pods,
        ..HostNode::default()
    }
}

fn with_nodes(nodes: Vec<HostNode>) -> Workloads {
    Workloads {
        observed_at: None,
        clusters: BTreeMap::from([(kube(), ClusterWorkloads::Seen(nodes))]),
        simulated: false,
    }
}

#[test]
fn a_slice_outlives_its_jobset_by_the_grace_period_and_no_longer() {
    let f = fleet(policy(vec![any_rule()]));
    let mut done = jobset("train");
    done.ended = Some(Ended {
        condition: "Completed".into(),
        at: at(1_000),
    });
    let obs = Observed {
        jobsets: vec![done],
        pending: Vec::new(),
    };
    let nodes = with_nodes(vec![node("train-abcde", &[], Vec::new())]);
    let l = [live("train", "train-abcde")];
    let d = derive(&f, &views(obs.clone()), &l, &nodes, at(1_119));
    assert!(d.released.is_empty());
    assert!(
        d.kept[0]
            .why
            .starts_with("grace: jobset ml/train Completed 1m59s ago"),
        "{:?}",
        d.kept
    );
    // The cycle that keeps it asks for the next at the grace's end.
    assert_eq!(d.release_due, Some(at(1_120)));
    let d = derive(&f, &views(obs.clone()), &l, &nodes, at(1_120));
    assert_eq!(d.released.len(), 1, "{:?}", d.kept);
    assert!(d.is_released("train", "train-abcde"));
    assert_eq!(d.release_due, None, "nothing is left in its grace");
    // A pod still on it holds the release, whoever's it is.
    let busy = with_nodes(vec![node(
        "train-abcde",
        &[],
        vec![BoundPod {
            namespace: "ml".into(),
            name: "other-0".into(),
            owner: Some("jobset ml/other".into()),
            do_not_disrupt: false,
        }],
    )]);
    let d = derive(&f, &views(obs), &l, &busy, at(5_000));
    assert!(d.released.is_empty());
    assert!(d.kept[0].why.contains("ml/other-0"), "{:?}", d.kept);
}

#[test]
fn a_deleted_jobsets_grace_is_read_from_its_nodes_not_memory() {
    let f = fleet(policy(vec![any_rule()]));
    let obs = Observed::default();
    let l = [live("gone", "gone-abcde")];
    // First sight: the Nodes are stamped, the slice kept.
    let nodes = with_nodes(vec![node("gone-abcde", &[], Vec::new())]);
    let d = derive(&f, &views(obs.clone()), &l, &nodes, at(2_000));
    assert!(d.released.is_empty());
    assert_eq!(d.marks.len(), 1);
    assert_eq!(d.marks[0].at, Some(2_000));
    assert_eq!(d.release_due, Some(at(2_120)));
    // A later run (a restarted controller) reads the stamp back.
    let stamped = with_nodes(vec![node(
        "gone-abcde",
        &[(RELEASED_AT, "2000")],
        Vec::new(),
    )]);
    let d = derive(&f, &views(obs.clone()), &l, &stamped, at(2_060));
    assert!(d.released.is_empty() && d.marks.is_empty(), "{:?}", d);
    assert_eq!(d.release_due, Some(at(2_120)));
    let d = derive(&f, &views(obs.clone()), &l, &stamped, at(2_120));
    assert_eq!(d.released.len(), 1);
    // A pool with no Nodes has nothing to reuse: released at once.
    let d = derive(&f, &views(obs), &l, &with_nodes(Vec::new()), at(2_000));
    assert_eq!(d.released.len(), 1);
}

#[test]
fn a_jobset_back_under_its_name_keeps_its_slice_and_clears_the_stale_stamp() {
    let f = fleet(policy(vec![any_rule()]));
    // Submitted again (a new uid) after its first was seen gone.
    let mut again = jobset("gone");
    again.uid = "uid-second".into();
    let obs = Observed {
        jobsets: vec![again],
        ..Observed::default()
    };
    let l = [live("gone", "gone-abcde")];
    let stamped = with_nodes(vec![node(
        "gone-abcde",
        &[(RELEASED_AT, "2000")],
        Vec::new(),
    )]);
    // Long past the first one's grace: kept, and the stamp goes, so that
    // the second one's end starts a grace period of its own.
    let d = derive(&f, &views(obs), &l, &stamped, at(9_000));
    assert!(d.released.is_empty(), "{d:?}");
    assert!(d.kept[0].why.starts_with("active"), "{:?}", d.kept);
    assert_eq!(d.marks.len(), 1);
    assert_eq!(d.marks[0].at, None);
    assert_eq!(d.marks[0].nodes, ["gone-abcde-node"]);
}

#[test]
fn an_active_jobset_or_an_unread_cluster_keeps_its_slices() {
    let f = fleet(policy(vec![any_rule()]));
    let l = [live("train", "train-abcde")];
    let obs = Observed {
        jobsets: vec![jobset("train")],
        pending: Vec::new(),
    };
    let d = derive(&f, &views(obs), &l, &no_nodes(), at(9_999));
    assert!(d.released.is_empty());
    assert!(d.kept[0].why.starts_with("active"));
    let unread = DemandViews::from([(kube(), DemandView::Unreadable("403".into()))]);
    let d = derive(&f, &unread, &l, &no_nodes(), at(9_999));
    assert!(d.released.is_empty());
    assert!(d.kept[0].why.starts_with("unobserved"));
    // No view at all (a Target whose cluster was not listed): the same.
    let d = derive(&f, &DemandViews::new(), &l, &no_nodes(), at(9_999));
    assert!(d.released.is_empty() && d.kept.len() == 1);
}

#[test]
fn a_git_slice_wins_a_pool_name() {
    let mut f = fleet(policy(vec![any_rule()]));
    let key = job_key("train-slice-0");
    let pool = pool_name("train", &key).unwrap();
    let git = crate::spec::load(&[
        SourceFile {
            path: "t.yaml".into(),
            text: TARGET.into(),
        },
        SourceFile {
            path: "s.yaml".into(),
            text: format!(
                "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: {pool}}}\nspec: {{target: train, backend: gke, accelerator: tpu-v6e-slice, topology: 2x4}}\n"
            ),
        },
    ])
    .unwrap();
    f.slices = git.slices;
    let obs = Observed {
        jobsets: vec![jobset("train")],
        pending: vec![leader("train", "train-slice-0", "2x4", 8)],
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(1_000));
    assert!(d.slices.is_empty());
    assert_eq!(d.refused[0].code, "name_taken");
}

#[test]
fn a_chip_count_no_machine_type_has_is_refused_not_guessed() {
    // tpu-provisioner builds `ct6e-standard-<N>t` from any N (anchors A.17
    // item 5): 3 chips would become a machine type that does not exist.
    let f = fleet(policy(vec![any_rule()]));
    let obs = Observed {
        jobsets: vec![jobset("odd")],
        pending: vec![leader("odd", "odd-slice-0", "2x2", 3)],
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(1_000));
    assert!(d.slices.is_empty());
    assert_eq!(d.refused[0].code, "shape");
    assert!(
        d.refused[0]
            .message
            .contains("no tpu-v6e-slice machine type has 3 chips per host"),
        "{}",
        d.refused[0].message
    );
}

#[test]
fn two_capacity_selectors_at_once_are_refused() {
    let f = fleet(policy(vec![any_rule()]));
    let mut p = leader("both", "both-slice-0", "2x2", 4);
    p.node_selector.insert(keys::SPOT.into(), "true".into());
    p.node_selector.insert(keys::RESERVATION.into(), "r".into());
    let obs = Observed {
        jobsets: vec![jobset("both")],
        pending: vec![p],
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(1_000));
    assert_eq!(d.refused[0].code, "shape");
    assert!(d.refused[0].message.contains("more than one capacity type"));
}

#[test]
fn a_pending_jobsets_slice_goes_creating_waiting_ready() {
    use super::phase::{CREATING, READY, WAITING, asked, kept};
    let reason = |p: Option<Phase>| p.map(|p| p.reason);
    // Not there yet, or being created.
    assert_eq!(
        reason(asked("p", "MISSING", "0/1", "", false)),
        Some(CREATING)
    );
    assert_eq!(
        reason(asked("p", "PROVISIONING", "?/1", "", false)),
        Some(CREATING)
    );
    // Up, its nodes registering: still being created (on-demand)...
    assert_eq!(
        reason(asked("p", "RUNNING", "0/2 ready", "", false)),
        Some(CREATING)
    );
    // ...but a flex-start pool at 0 waits for GKE to find capacity.
    let flex = asked("p", "RUNNING", "0/2 ready", "", true).unwrap();
    assert_eq!(flex.reason, WAITING);
    assert!(flex.message.contains("flex-start"), "{}", flex.message);
    // A stockout (its backoff) waits for capacity, and says why.
    let out = asked("p", "ERROR", "?/1", "GCE_STOCKOUT: no room", false).unwrap();
    assert_eq!(out.reason, WAITING);
    assert!(
        out.message.contains("GCE_STOCKOUT: no room"),
        "{}",
        out.message
    );
    // Every node ready.
    assert_eq!(
        reason(asked("p", "RUNNING", "2/2 ready", "", true)),
        Some(READY)
    );
    // Nodes not read, or a state it cannot tell: no phase, nothing claimed.
    assert_eq!(asked("p", "RUNNING", "?/2", "", false), None);
    assert_eq!(asked("p", "NOT OWNED", "?/2", "", false), None);
    // Kept while its JobSet runs (its pods scheduled): ready; kept in its
    // grace period: no phase.
    assert_eq!(
        reason(kept("p", "RUNNING", "active: jobset ml/t has not ended")),
        Some(READY)
    );
    assert_eq!(
        kept("p", "RUNNING", "grace: jobset ml/t Completed 5s ago"),
        None
    );
}
