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

/// JobSet `ml/NAME`, with one replicatedJob `slice` of 4 Jobs
/// (`NAME-slice-0` … `NAME-slice-3`).
fn jobset(name: &str) -> ObservedJobSet {
    ObservedJobSet {
        namespace: "ml".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        jobs: (0..4).map(|i| format!("{name}-slice-{i}")).collect(),
        ..ObservedJobSet::default()
    }
}

/// The pool of Job `job` of JobSet `ml/JOBSET`.
fn pool(jobset: &str, job: &str) -> String {
    pool_name("ml", jobset, job).unwrap()
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
        owner_job: Some(job.to_string()),
        tpu_error: None,
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
fn pool_names_hash_the_namespace_and_the_job() {
    let name = pool_name("ml", "train", "train-slice-0").unwrap();
    assert!(name.starts_with("train-"), "{name}");
    assert_eq!(name.len(), "train-".len() + 16);
    // Another namespace, or another Job: another pool.
    assert_ne!(pool_name("web", "train", "train-slice-0").unwrap(), name);
    assert_ne!(pool_name("ml", "train", "train-slice-1").unwrap(), name);
    let long = "a-very-long-jobset-name-for-a-big-training-run";
    let name = pool_name("ml", long, &format!("{long}-slice-0")).unwrap();
    assert!(name.starts_with(&long[..23]) && name.len() <= 40, "{name}");
    // GKE refuses these, so slicectl says why instead of sending them.
    assert!(
        pool_name("ml", "9lives", "9lives-s-0")
            .unwrap_err()
            .contains("rename the JobSet")
    );
    assert!(pool_name("ml", "a.b", "a.b-s-0").is_err());
    // A slice name per Target: the same pool in two clusters is two slices.
    assert_ne!(slice_name("east", "p"), slice_name("west", "p"));
    assert!(slice_name("east", "p").starts_with("p-"));
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
        s.spec.node_pool_name.as_deref(),
        Some(pool("train", "train-slice-0").as_str())
    );
    assert_eq!(s.name, slice_name("train", &pool("train", "train-slice-0")));
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
        slice: "held-abcde-0".into(),
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
        slice: slice_name("train", pool),
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
    assert!(d.is_released("train", &slice_name("train", "train-abcde")));
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
    // No watch says when those pods go (a deleted JobSet's pods terminate
    // for their grace period): the controller looks again soon.
    assert_eq!(d.release_due, Some(at(5_030)));
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
    let p = pool("gone", "gone-slice-0");
    let l = [live("gone", &p)];
    let stamped = with_nodes(vec![node(&p, &[(RELEASED_AT, "2000")], Vec::new())]);
    // Long past the first one's grace: kept, and the stamp goes, so that
    // the second one's end starts a grace period of its own.
    let d = derive(&f, &views(obs), &l, &stamped, at(9_000));
    assert!(d.released.is_empty(), "{d:?}");
    assert!(d.kept[0].why.starts_with("active"), "{:?}", d.kept);
    assert_eq!(d.marks.len(), 1);
    assert_eq!(d.marks[0].at, None);
    assert_eq!(d.marks[0].nodes, [format!("{p}-node")]);
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
    let pool = pool("train", "train-slice-0");
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

/// Two workload-enabled Targets, `east` and `west`, each on its own
/// cluster.
fn two_clusters() -> (Fleet, KubeRef, KubeRef) {
    let text = |name: &str| {
        format!(
            "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {{name: {name}}}\nspec:\n  project: example-project\n  zone: us-central1-b\n  ownerId: platform\n  gke: {{location: us-central1, name: {name}}}\n"
        )
    };
    let mut f = crate::spec::load(&[
        SourceFile {
            path: "east.yaml".into(),
            text: text("east"),
        },
        SourceFile {
            path: "west.yaml".into(),
            text: text("west"),
        },
    ])
    .unwrap();
    for t in f.targets.values_mut() {
        t.spec.workloads = Some(policy(vec![any_rule()]));
    }
    let k = |name: &str| {
        KubeRef::gke(&ClusterRef {
            project: "example-project".into(),
            location: "us-central1".into(),
            name: name.into(),
        })
    };
    (f, k("east"), k("west"))
}

#[test]
fn the_same_jobset_in_two_clusters_gets_a_slice_in_each_released_on_its_own_end() {
    let (f, east, west) = two_clusters();
    let pending = Observed {
        jobsets: vec![jobset("train")],
        pending: vec![leader("train", "train-slice-0", "2x4", 8)],
    };
    let views = DemandViews::from([
        (east.clone(), DemandView::Seen(pending.clone())),
        (west.clone(), DemandView::Seen(pending)),
    ]);
    let d = derive(&f, &views, &[], &no_nodes(), at(1_000));
    // One slice per cluster, each its own fleet entry, both on the same pool name.
    let p = pool("train", "train-slice-0");
    let got: Vec<(&str, &str, Option<&str>)> = d
        .slices
        .iter()
        .map(|s| {
            (
                s.spec.target.as_str(),
                s.name.as_str(),
                s.spec.node_pool_name.as_deref(),
            )
        })
        .collect();
    let (se, sw) = (slice_name("east", &p), slice_name("west", &p));
    assert_eq!(
        got,
        [
            ("east", se.as_str(), Some(p.as_str())),
            ("west", sw.as_str(), Some(p.as_str()))
        ]
    );
    let fleet = d.extend(&f);
    assert_eq!(fleet.slices.len(), 2, "both in the fleet, not one");
    // The JobSet ends in east only: east's slice goes after its grace,
    // west's stays for its running JobSet.
    let mut done = jobset("train");
    done.ended = Some(Ended {
        condition: "Completed".into(),
        at: at(1_000),
    });
    let views = DemandViews::from([
        (
            east.clone(),
            DemandView::Seen(Observed {
                jobsets: vec![done],
                pending: Vec::new(),
            }),
        ),
        (
            west.clone(),
            DemandView::Seen(Observed {
                jobsets: vec![jobset("train")],
                pending: Vec::new(),
            }),
        ),
    ]);
    let live_in = |target: &str| LiveSlice {
        target: target.into(),
        slice: slice_name(target, &p),
        pool: p.clone(),
        origin: Origin {
            namespace: "ml".into(),
            jobset: "train".into(),
            uid: "uid-train".into(),
            job_key: job_key("train-slice-0"),
        },
        chips: 8,
    };
    let nodes = Workloads {
        observed_at: None,
        clusters: BTreeMap::from([
            (
                east,
                ClusterWorkloads::Seen(vec![node(&p, &[], Vec::new())]),
            ),
            (
                west,
                ClusterWorkloads::Seen(vec![node(&p, &[], Vec::new())]),
            ),
        ]),
        simulated: false,
    };
    let d = derive(
        &f,
        &views,
        &[live_in("east"), live_in("west")],
        &nodes,
        at(2_000),
    );
    assert!(d.is_released("east", &se), "{:?}", d.released);
    assert!(!d.is_released("west", &sw), "{:?}", d.released);
    assert_eq!(d.released.len(), 1);
    assert!(d.kept_of("west", &sw).unwrap().why.starts_with("active"));
}

/// tpu-provisioner's pool name, `<first 34 of the JobSet>-<first 5 of the
/// job-key>`, with the job-key `hash("<ns>/<job>")`.
fn old_pool_name(ns: &str, jobset: &str, job: &str) -> String {
    use sha2::{Digest, Sha256};
    let key = hex::encode(Sha256::digest(format!("{ns}/{job}").as_bytes()));
    format!("{}-{}", &jobset[..jobset.len().min(34)], &key[..5])
}

#[test]
fn a_tenant_searching_for_a_job_key_collision_gets_nothing_of_the_victims() {
    // The victim: ml/train's Job train-slice-0 runs on its pool.
    let f = fleet(policy(vec![any_rule()]));
    let victim_pool = pool("train", "train-slice-0");
    let victim = live("train", &victim_pool);
    // The attacker, in namespace evil, searches (as in 2 s of Python) a
    // replicatedJob name whose Job's 5-digit job-key prefix collides with
    // the victim's: under tpu-provisioner's names both would ask for the
    // same pool.
    let target = old_pool_name("ml", "train", "train-slice-0");
    let rj = (0u32..5_000_000)
        .map(|i| format!("r{i}"))
        .find(|rj| old_pool_name("evil", "train", &format!("train-{rj}-0")) == target)
        .expect("a 20-bit collision is found by search");
    let job = format!("train-{rj}-0");
    let mut evil_js = jobset("train");
    evil_js.namespace = "evil".into();
    evil_js.uid = "uid-evil".into();
    evil_js.jobs = vec![job.clone()];
    let mut evil = leader("train", &job, "2x4", 8);
    evil.namespace = "evil".into();
    // The victim's JobSet runs; nothing of it is pending.
    let obs = Observed {
        jobsets: vec![jobset("train"), evil_js],
        pending: vec![evil.clone()],
    };
    let nodes = with_nodes(vec![node(&victim_pool, &[], Vec::new())]);
    let d = derive(
        &f,
        &views(obs.clone()),
        std::slice::from_ref(&victim),
        &nodes,
        at(1_000),
    );
    // slicectl's names hash the namespace and 64 bits of the Job: the
    // attacker asks for a pool of its own, and the victim's is untouched.
    let [s] = d.slices.as_slice() else {
        panic!("{:?}", d.slices)
    };
    assert_ne!(s.spec.node_pool_name.as_deref(), Some(victim_pool.as_str()));
    assert_eq!(s.workload.as_ref().unwrap().namespace, "evil");
    assert!(d.released.is_empty());
    assert!(d.kept[0].why.starts_with("active"), "{:?}", d.kept);
    // Even a pool name that did collide (here: the victim's pool given the
    // attacker's name) is refused, with an Event on the asking JobSet, and
    // the victim's slice is neither asked for, relabelled nor released.
    let mut taken = victim.clone();
    taken.pool = pool_name("evil", "train", &job).unwrap();
    taken.slice = slice_name("train", &taken.pool);
    let nodes = with_nodes(vec![node(&taken.pool, &[], Vec::new())]);
    let d = derive(&f, &views(obs), &[taken], &nodes, at(1_000));
    assert!(d.slices.is_empty(), "{:?}", d.slices);
    assert_eq!(d.refused.len(), 1);
    assert_eq!(d.refused[0].code, "name_taken");
    assert_eq!(d.refused[0].namespace, "evil");
    assert!(
        d.refused[0].message.contains("belongs to jobset ml/train"),
        "{}",
        d.refused[0].message
    );
    assert!(d.released.is_empty());
    assert!(d.kept[0].why.starts_with("active"), "{:?}", d.kept);
}

#[test]
fn a_pod_that_claims_a_jobset_it_is_not_owned_by_asks_for_nothing() {
    let f = fleet(policy(vec![any_rule()]));
    // A bare pod with the JobSet's labels: no Job owns it.
    let mut bare = leader("train", "train-slice-0", "2x4", 8);
    bare.owner_job = None;
    // A pod owned by a Job the JobSet's spec does not name.
    let mut stray = leader("train", "train-other-0", "2x4", 8);
    stray.name = "stray".into();
    // A pod of another JobSet incarnation (its uid label is not this one's).
    let mut stale = leader("train", "train-slice-1", "2x4", 8);
    stale
        .labels
        .insert(keys::JOBSET_UID.into(), "uid-old".into());
    let obs = Observed {
        jobsets: vec![jobset("train")],
        pending: vec![bare, stray, stale],
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(1_000));
    assert!(d.slices.is_empty(), "{:?}", d.slices);
    assert!(d.refused.is_empty(), "{:?}", d.refused);
    assert!(
        d.skipped[0]
            .why
            .contains("not owned by a Job of the JobSet")
            || d.skipped[0].why.contains("uid"),
        "{:?}",
        d.skipped
    );
}

#[test]
fn a_bad_request_is_refused_on_its_own_and_git_and_other_jobsets_go_on() {
    // A git slice adopted with nodePoolName equal to the JobSet's pool.
    let mut f = fleet(policy(vec![any_rule()]));
    let p = pool("train", "train-slice-0");
    let git = crate::spec::load(&[
        SourceFile {
            path: "t.yaml".into(),
            text: TARGET.into(),
        },
        SourceFile {
            path: "s.yaml".into(),
            text: format!(
                "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: adopted}}\nspec: {{target: train, backend: gke, accelerator: tpu-v6e-slice, topology: 2x4, nodePoolName: {p}}}\n"
            ),
        },
    ])
    .unwrap();
    f.slices = git.slices;
    let obs = Observed {
        jobsets: vec![jobset("train"), jobset("other")],
        pending: vec![
            leader("train", "train-slice-0", "2x4", 8),
            leader("other", "other-slice-0", "2x4", 8),
        ],
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(1_000));
    assert_eq!(d.refused.len(), 1, "{:?}", d.refused);
    assert_eq!(
        (d.refused[0].jobset.as_str(), d.refused[0].code),
        ("train", "name_taken")
    );
    assert!(d.refused[0].message.contains("git slice adopted"));
    let [s] = d.slices.as_slice() else {
        panic!("{:?}", d.slices)
    };
    assert_eq!(s.workload.as_ref().unwrap().jobset, "other");
    // The plan has both the git slice and the other JobSet's, and no
    // name collision between them.
    let fleet = d.extend(&f);
    assert_eq!(fleet.slices.len(), 2);
}

#[test]
fn a_jobsets_slices_are_admitted_all_together_or_not_at_all() {
    // maxChips 24 admits 3 of a 4-slice JobSet's 8-chip slices: none.
    let rule = WorkloadRule {
        max_chips: Some(24),
        ..any_rule()
    };
    let f = fleet(policy(vec![rule]));
    let four = Observed {
        jobsets: vec![jobset("multi")],
        pending: (0..4)
            .map(|i| leader("multi", &format!("multi-slice-{i}"), "2x4", 8))
            .collect(),
    };
    let d = derive(&f, &views(four.clone()), &[], &no_nodes(), at(1_000));
    assert!(d.slices.is_empty(), "{:?}", d.slices);
    assert_eq!(d.refused.len(), 4);
    assert!(d.refused.iter().all(|r| r.code == "max_chips"));
    assert!(d.refused[0].message.contains("32 chips in 4 slice(s)"));
    // A rule refusing one of them (spot, not allowed) refuses them all.
    let f = fleet(policy(vec![WorkloadRule::default()]));
    let mut one_spot = four;
    one_spot.pending[2]
        .node_selector
        .insert(keys::SPOT.into(), "true".into());
    let d = derive(&f, &views(one_spot), &[], &no_nodes(), at(1_000));
    assert!(d.slices.is_empty(), "{:?}", d.slices);
    let codes: Vec<&str> = d.refused.iter().map(|r| r.code).collect();
    assert_eq!(codes, ["capacity"; 4]);
    assert!(
        d.refused[0]
            .message
            .contains("another slice of this JobSet"),
        "{}",
        d.refused[0].message
    );
}

#[test]
fn a_resubmitted_jobset_with_fewer_jobs_does_not_keep_the_old_slices() {
    let f = fleet(policy(vec![any_rule()]));
    let pools: Vec<String> = (0..4)
        .map(|i| pool("train", &format!("train-slice-{i}")))
        .collect();
    let l: Vec<LiveSlice> = pools.iter().map(|p| live("train", p)).collect();
    // Deleted and submitted again under its name with 2 Jobs (a new uid).
    let mut again = jobset("train");
    again.uid = "uid-second".into();
    again.jobs.truncate(2);
    let obs = Observed {
        jobsets: vec![again],
        pending: Vec::new(),
    };
    let nodes = with_nodes(pools.iter().map(|p| node(p, &[], Vec::new())).collect());
    let d = derive(&f, &views(obs.clone()), &l, &nodes, at(1_000));
    // Jobs 0 and 1 are the new JobSet's: kept for it.
    let kept: Vec<(&str, &str)> = d
        .kept
        .iter()
        .map(|k| (k.pool.as_str(), k.why.split(':').next().unwrap()))
        .collect();
    assert_eq!(
        kept,
        [
            (pools[0].as_str(), "active"),
            (pools[1].as_str(), "active"),
            (pools[2].as_str(), "grace"),
            (pools[3].as_str(), "grace"),
        ]
    );
    // Jobs 2 and 3 are no one's: their grace starts now, and they go.
    assert_eq!(d.marks.iter().filter(|m| m.at == Some(1_000)).count(), 2);
    let stamped = with_nodes(
        pools
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let l: &[(&str, &str)] = if i >= 2 {
                    &[(RELEASED_AT, "1000")]
                } else {
                    &[]
                };
                node(p, l, Vec::new())
            })
            .collect(),
    );
    let d = derive(&f, &views(obs), &l, &stamped, at(1_120));
    let gone: Vec<&str> = d.released.iter().map(|r| r.pool.as_str()).collect();
    assert_eq!(gone, [pools[2].as_str(), pools[3].as_str()]);
}

#[test]
fn a_suspended_jobset_loses_its_slices_after_the_grace_and_asks_again_on_resume() {
    let f = fleet(policy(vec![any_rule()]));
    let p = pool("train", "train-slice-0");
    let l = [live("train", &p)];
    let nodes = with_nodes(vec![node(&p, &[], Vec::new())]);
    let mut suspended = jobset("train");
    suspended.suspended = Some(at(1_000));
    let obs = Observed {
        jobsets: vec![suspended],
        pending: Vec::new(),
    };
    let d = derive(&f, &views(obs.clone()), &l, &nodes, at(1_060));
    assert!(d.released.is_empty());
    assert!(d.kept[0].why.contains("suspended"), "{:?}", d.kept);
    assert_eq!(d.release_due, Some(at(1_120)));
    let d = derive(&f, &views(obs), &l, &nodes, at(1_120));
    assert_eq!(d.released.len(), 1, "{:?}", d.kept);
    assert!(d.released[0].why.contains("suspended"));
    // Resumed: its leader pending again asks for the slice again.
    let obs = Observed {
        jobsets: vec![jobset("train")],
        pending: vec![leader("train", "train-slice-0", "2x4", 8)],
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(2_000));
    assert_eq!(d.slices.len(), 1);
}

#[test]
fn tpu_requests_are_kubernetes_quantities_and_too_many_are_refused() {
    use crate::observe::demand::tpu_chips;
    assert_eq!(tpu_chips("8"), Ok(8));
    assert_eq!(tpu_chips("4000m"), Ok(4));
    assert!(
        tpu_chips("1k")
            .unwrap_err()
            .contains("more than any TPU host")
    );
    assert!(tpu_chips("100k").is_err());
    assert!(tpu_chips("1e3").is_err());
    assert!(tpu_chips("1500m").unwrap_err().contains("whole number"));
    assert!(tpu_chips("lots").is_err());
    // Such a pod is refused with why, not ignored.
    let f = fleet(policy(vec![any_rule()]));
    let mut p = leader("big", "big-slice-0", "2x4", 1);
    p.tpu_error = Some(tpu_chips("1k").unwrap_err());
    let obs = Observed {
        jobsets: vec![jobset("big")],
        pending: vec![p],
    };
    let d = derive(&f, &views(obs), &[], &no_nodes(), at(1_000));
    assert_eq!(d.refused[0].code, "shape");
    assert!(d.refused[0].message.contains("1k"));
}
