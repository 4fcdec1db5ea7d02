#![cfg(test)]
//! Unit and snapshot tests of the pure planner.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::*;
use crate::kinds::{node_pool, workload_policy};
use crate::resource::ClusterRef;
use crate::resource::compute::ResourcePolicy;
use crate::resource::gke::{self, NodePool, StatusCondition};
use crate::spec::model::{
    Backend, Capacity, CapacityType, GkeCluster, Lifecycle, NodeDefaults, SliceSpec, TargetSpec,
};
use crate::spec::{Location, Slice, Target, catalog};

fn loc() -> Location {
    Location {
        file: PathBuf::from("specs/x.yaml"),
        line: 1,
        column: 1,
    }
}

/// The target every TPU v6e slice uses: cluster `train` in us-central1,
/// zone us-central1-b (where Google offers v6e).
fn target() -> Target {
    target_in("train", "us-central1-b")
}

/// A target on the same cluster in `zone`.
fn target_in(name: &str, zone: &str) -> Target {
    Target {
        name: name.into(),
        spec: TargetSpec {
            project: "example-project".into(),
            zone: zone.into(),
            allow_unlisted_zone: false,
            owner_id: "platform".into(),
            gke: Some(GkeCluster {
                location: "us-central1".into(),
                name: "train".into(),
                kube_api: Default::default(),
            }),
            gce: None,
            node_defaults: NodeDefaults {
                service_account: Some("tpu-nodes@example-project.iam.gserviceaccount.com".into()),
                ..NodeDefaults::default()
            },
            previous_names: Vec::new(),
            workloads: None,
            disruption: None,
        },
        location: loc(),
    }
}

/// The target of a generation: one zone that offers it, on the one cluster
/// (v5p and v5e in us-central1-a, tpu7x in us-central1-c, v6e in
/// us-central1-b).
fn target_of(acc: &str) -> &'static str {
    match acc {
        "tpu-v5p-slice" | "tpu-v5-lite-podslice" => "train-a",
        "tpu7x" => "train-c",
        _ => "train",
    }
}

fn slice(name: &str, acc: &str, topo: &str, replicas: u32, cap: CapacityType) -> Slice {
    let spec = SliceSpec {
        target: target_of(acc).into(),
        backend: Backend::Gke,
        accelerator: acc.into(),
        topology: topo.into(),
        machine_type: None,
        replicas,
        capacity: Capacity {
            kind: cap,
            reservation: None,
            max_run_duration: None,
            queued: false,
        },
        node_labels: [("team".to_string(), "llm".to_string())]
            .into_iter()
            .collect(),
        taints: Vec::new(),
        lifecycle: Lifecycle::default(),
        gce: None,
        previous_names: Vec::new(),
        node_pool_name: None,
        disruption: None,
    };
    Slice {
        name: name.into(),
        shape: catalog::resolve(acc, topo, None).unwrap(),
        spec,
        operation_timeout: crate::spec::DEFAULT_OPERATION_TIMEOUT,
        location: loc(),
        workload: None,
    }
}

fn fleet(slices: Vec<Slice>) -> Fleet {
    Fleet {
        targets: BTreeMap::from([
            ("train".to_string(), target()),
            ("train-a".to_string(), target_in("train-a", "us-central1-a")),
            ("train-c".to_string(), target_in("train-c", "us-central1-c")),
        ]),
        slices: slices.into_iter().map(|s| (s.name.clone(), s)).collect(),
        files: 2,
        foreign: BTreeMap::new(),
        shard: None,
    }
}

fn standard_fleet() -> Fleet {
    fleet(vec![
        slice("llm", "tpu-v5p-slice", "2x2x2", 2, CapacityType::Spot),
        slice("iron", "tpu7x", "2x2x2", 1, CapacityType::OnDemand),
        slice("tiny", "tpu-v6e-slice", "1x1", 1, CapacityType::OnDemand),
    ])
}

fn cluster() -> ClusterRef {
    ClusterRef {
        project: "example-project".into(),
        location: "us-central1".into(),
        name: "train".into(),
    }
}

/// What GKE returns for a pool slicectl created: the body plus server defaults.
fn as_live(mut np: NodePool) -> NodePool {
    np.status = Some("RUNNING".into());
    np.version = Some("1.36.3-gke.100".into());
    if let Some(c) = np.config.as_mut() {
        c.image_type = Some("COS_CONTAINERD".into());
        c.disk_size_gb = Some(100);
        c.disk_type = Some("pd-balanced".into());
        c.metadata
            .insert("disable-legacy-endpoints".into(), "true".into());
        c.taints.push(gke::NodeTaint {
            key: "google.com/tpu".into(),
            value: "present".into(),
            effect: "NO_SCHEDULE".into(),
        });
    }
    np
}

fn live_policy(mut p: ResourcePolicy) -> ResourcePolicy {
    p.status = Some("READY".into());
    p.kind = Some("compute#resourcePolicy".into());
    p.id = Some("123".into());
    if let Some(w) = p.workload_policy.as_mut() {
        w.accelerator_topology_mode = Some("AUTO_CONNECT".into());
    }
    p
}

/// A typed, mutable inventory for tests; [`TestInv::inventory`] turns it
/// into the planner's.
#[derive(Debug, Clone, Default)]
struct TestInv {
    node_pools: Vec<NodePool>,
    policies: Vec<ResourcePolicy>,
    operations: Vec<gke::Operation>,
}

impl TestInv {
    fn inventory(&self) -> Inventory {
        let mut inv = Inventory::default();
        // Nothing runs in these tests' clusters (as under --sim): the tests
        // of the disruption policy set the workloads they read, and an
        // unread cluster outside --sim is busy-unknown.
        inv.workloads.simulated = true;
        let region = Scope::Region(crate::resource::RegionRef {
            project: "example-project".into(),
            region: "us-central1".into(),
        });
        for np in &self.node_pools {
            inv.resources
                .entry(node_pool::KIND)
                .or_default()
                .push(LiveResource {
                    scope: Scope::Cluster(cluster()),
                    body: std::sync::Arc::new(np.clone()),
                });
        }
        for p in &self.policies {
            inv.resources
                .entry(workload_policy::KIND)
                .or_default()
                .push(LiveResource {
                    scope: region.clone(),
                    body: std::sync::Arc::new(p.clone()),
                });
        }
        for op in &self.operations {
            let Some(target) = op.target_link.as_deref().and_then(|l| l.rsplit('/').next()) else {
                continue;
            };
            inv.operations
                .entry(node_pool::KIND)
                .or_default()
                .push(OperationRecord {
                    scope: Scope::Cluster(cluster()),
                    target: target.to_string(),
                    name: op.name.clone(),
                    operation_type: op.operation_type.clone(),
                    running: op.status != "DONE",
                    error: op.error.as_ref().map(|e| e.message.clone()),
                    end_time: op.end_time.clone(),
                });
        }
        inv
    }
}

fn all_kinds() -> Vec<&'static dyn Kind> {
    crate::kinds::plan_kinds()
}

fn plan(f: &Fleet, inv: &TestInv, opts: &PlanOptions) -> Result<Plan, PlanError> {
    super::plan(f, &inv.inventory(), &all_kinds(), opts)
}

fn plan_destroy(f: &Fleet, inv: &TestInv, max: usize) -> Result<Plan, PlanError> {
    super::plan_destroy(f, &inv.inventory(), &all_kinds(), max)
}

fn rendered_pools(f: &Fleet) -> Vec<NodePool> {
    render_fleet(f, &all_kinds())
        .into_iter()
        .filter_map(|d| kind::body_as::<NodePool>(&d.body).cloned())
        .collect()
}

/// The inventory after a perfect apply of `f`.
fn converged(f: &Fleet) -> TestInv {
    let mut inv = TestInv::default();
    for d in render_fleet(f, &all_kinds()) {
        if let Some(np) = kind::body_as::<NodePool>(&d.body) {
            inv.node_pools.push(as_live(np.clone()));
        }
        if let Some(p) = kind::body_as::<ResourcePolicy>(&d.body) {
            inv.policies.push(live_policy(p.clone()));
        }
    }
    inv
}

fn kinds(p: &Plan) -> Vec<(String, ActionKind)> {
    p.actions.iter().map(|a| (a.address(), a.action)).collect()
}

#[test]
fn create_from_empty_orders_policy_with_its_pool() {
    let p = plan(
        &standard_fleet(),
        &TestInv::default(),
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.summary.create, 5);
    assert_eq!(
        kinds(&p),
        vec![
            (
                "slice.iron[0].workload_policy".to_string(),
                ActionKind::Create
            ),
            ("slice.iron[0].node_pool".to_string(), ActionKind::Create),
            ("slice.llm[0].node_pool".to_string(), ActionKind::Create),
            ("slice.llm[1].node_pool".to_string(), ActionKind::Create),
            ("slice.tiny[0].node_pool".to_string(), ActionKind::Create),
        ]
    );
    insta::assert_snapshot!("create_from_empty", human::render(&p, false));
}

#[test]
fn converged_state_plans_nothing_despite_server_defaults() {
    let f = standard_fleet();
    let p = plan(&f, &converged(&f), &PlanOptions::default()).unwrap();
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
    assert!(!p.summary.has_changes());
    assert!(human::render(&p, false).contains("No changes."));
}

#[test]
fn label_change_is_an_in_place_update() {
    let f = standard_fleet();
    let inv = converged(&f);
    let mut f2 = f.clone();
    if let Some(s) = f2.slices.get_mut("tiny") {
        s.spec.node_labels.insert("team".into(), "research".into());
    }
    let p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.tiny[0].node_pool".to_string(), ActionKind::Update)]
    );
    assert_eq!(
        p.actions[0].reason_text(),
        "update in place because labels changed"
    );
    assert!(p.actions[0].changes.iter().all(|c| !c.forces_replacement));
    insta::assert_snapshot!("label_update", human::render(&p, false));
}

#[test]
fn topology_change_is_a_located_replacement() {
    let f = standard_fleet();
    let inv = converged(&f);
    let mut f2 = f.clone();
    f2.slices.insert(
        "llm".into(),
        slice("llm", "tpu-v5p-slice", "2x2x4", 2, CapacityType::Spot),
    );
    let p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            ("slice.llm[0].node_pool".to_string(), ActionKind::Replace),
            ("slice.llm[1].node_pool".to_string(), ActionKind::Replace),
        ]
    );
    let a = &p.actions[0];
    assert_eq!(
        a.reason_text(),
        "replace because placementPolicy.tpuTopology \"2x2x2\" → \"2x2x4\" forces replacement (and 1 more field)"
    );
    assert!(
        a.changes
            .iter()
            .any(|c| c.path == "placementPolicy.tpuTopology" && c.forces_replacement)
    );
    insta::assert_snapshot!("topology_replace", human::render(&p, false));
}

#[test]
fn removed_slice_is_deleted_pool_before_policy() {
    let f = standard_fleet();
    let inv = converged(&f);
    let mut f2 = f.clone();
    f2.slices.remove("iron");
    let p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            (
                "slice.iron[0].workload_policy".to_string(),
                ActionKind::Delete
            ),
            ("slice.iron[0].node_pool".to_string(), ActionKind::Delete),
        ]
    );
    assert_eq!(
        p.actions[1].reason_text(),
        "delete because slice iron is no longer in the specs"
    );
}

#[test]
fn fewer_replicas_delete_the_extra_ones() {
    let f = standard_fleet();
    let inv = converged(&f);
    let mut f2 = f.clone();
    if let Some(s) = f2.slices.get_mut("llm") {
        s.spec.replicas = 1;
    }
    let p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.llm[1].node_pool".to_string(), ActionKind::Delete)]
    );
    assert!(p.actions[0].reason_text().contains("replicas: 1"));
}

#[test]
fn unmanaged_pools_are_listed_and_never_touched() {
    let f = standard_fleet();
    let mut inv = converged(&f);
    let foreign = NodePool {
        name: "default-pool".into(),
        status: Some("RUNNING".into()),
        ..Default::default()
    };
    // A pool exactly as tpu-provisioner creates it: the reference's vector
    // (tpu-anchors §A.7, checked against the Go program's output).
    let mut labels: BTreeMap<String, String> = [
        ("google.com/nodepool-manager", "tpu-provisioner"),
        ("google.com/tpu-provisioner-jobset-name", "jobset-test"),
        ("google.com/tpu-provisioner-jobset-namespace", "default"),
        ("google.com/tpu-provisioner-parent-kind", "job"),
        (
            "google.com/tpu-provisioner-parent-name",
            "jobset-test-job-1-0",
        ),
        ("google.com/tpu-provisioner-parent-namespace", "default"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    labels.insert(
        "google.com/tpu-provisioner-nodepool-hash".into(),
        "67d4bf97d".into(),
    );
    let mut provisioned = foreign.clone();
    provisioned.name = "jobset-abc".into();
    provisioned.config = Some(gke::NodeConfig {
        machine_type: "ct5p-hightpu-4t".into(),
        labels: labels.clone().into_iter().collect(),
        ..Default::default()
    });
    let mut modified = provisioned.clone();
    modified.name = "jobset-def".into();
    if let Some(c) = modified.config.as_mut() {
        c.spot = true;
    }
    let pools = &mut inv.node_pools;
    pools.push(foreign);
    pools.push(provisioned);
    pools.push(modified);
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert!(p.actions.is_empty());
    assert_eq!(p.unmanaged.len(), 3);
    let note = |n: &str| {
        p.unmanaged
            .iter()
            .find(|u| u.name == n)
            .unwrap()
            .note
            .clone()
    };
    assert_eq!(note("default-pool"), "not created by slicectl");
    assert_eq!(
        note("jobset-abc"),
        "created by tpu-provisioner (its node-pool hash verifies)"
    );
    assert!(
        note("jobset-def").contains("changed since"),
        "{}",
        note("jobset-def")
    );
    // Without the slices the pools are still not ours to delete.
    let p = plan(
        &fleet(vec![]),
        &inv,
        &PlanOptions {
            allow_empty_source: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        p.actions
            .iter()
            .all(|a| a.id.name != "default-pool" && a.id.name != "jobset-abc")
    );
}

#[test]
fn another_owners_pools_are_unmanaged_and_a_name_collision_is_refused() {
    let f = standard_fleet();
    let mut inv = converged(&f);
    for np in &mut inv.node_pools {
        if let Some(c) = np.config.as_mut() {
            c.labels
                .insert(ownership::OWNER.into(), "someone-else".into());
        }
    }
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
    assert_eq!(p.refused.len(), 4, "{:#?}", p.refused);
    assert!(p.refused.iter().all(|r| r.code == "name_taken"));
    assert!(
        p.refused[0].message.contains("someone-else"),
        "{:?}",
        p.refused[0]
    );
    // Another owner's pool gets no hint to take it.
    assert!(!p.refused[0].message.contains("put these labels back"));
    assert_eq!(p.summary.refused, 4);
}

#[test]
fn prevent_destroy_stamped_on_live_survives_yaml_deletion() {
    let mut f = standard_fleet();
    if let Some(s) = f.slices.get_mut("tiny") {
        s.spec.lifecycle.prevent_destroy = true;
    }
    let inv = converged(&f);
    let live = &inv.node_pools;
    assert!(live.iter().any(|np| {
        np.config
            .as_ref()
            .unwrap()
            .labels
            .get(ownership::PREVENT_DESTROY)
            == Some(&"true".to_string())
    }));
    let refused = |p: &Plan| -> Vec<(String, ActionKind, String)> {
        p.refused
            .iter()
            .map(|r| (r.address.clone(), r.action, r.code.clone()))
            .collect()
    };
    let mut f2 = f.clone();
    f2.slices.remove("tiny");
    let p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
    assert_eq!(
        refused(&p),
        vec![(
            "slice.tiny[0].node_pool".to_string(),
            ActionKind::Delete,
            "protected".to_string()
        )]
    );
    assert!(p.refused[0].message.contains("would be destroyed"));
    // Replacing a protected slice is refused too.
    let mut f3 = f.clone();
    if let Some(s) = f3.slices.get_mut("tiny") {
        s.spec.capacity.kind = CapacityType::Spot;
    }
    let p = plan(&f3, &inv, &PlanOptions::default()).unwrap();
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
    assert_eq!(
        refused(&p),
        vec![(
            "slice.tiny[0].node_pool".to_string(),
            ActionKind::Replace,
            "protected".to_string()
        )]
    );
    // Destroy refuses as well, and tears down the rest.
    let p = plan_destroy(&f, &inv, usize::MAX).unwrap();
    assert_eq!(refused(&p).len(), 1);
    assert_eq!(p.summary.delete, 4);
}

#[test]
fn unprotecting_and_replacing_in_one_commit_takes_two_applies() {
    // Regression: `preventDestroy: false` in the same commit as a change that
    // forces replacement replaced the protected pool at once.
    let mut f = fleet(vec![slice(
        "tiny",
        "tpu-v6e-slice",
        "1x1",
        1,
        CapacityType::OnDemand,
    )]);
    if let Some(s) = f.slices.get_mut("tiny") {
        s.spec.lifecycle.prevent_destroy = true;
    }
    let inv = converged(&f);
    let mut f2 = f.clone();
    if let Some(s) = f2.slices.get_mut("tiny") {
        s.spec.lifecycle.prevent_destroy = false;
        s.spec.capacity.kind = CapacityType::Spot;
    }
    let p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.tiny[0].node_pool".to_string(), ActionKind::Update)],
        "first apply: lift the stamp in place, never replace"
    );
    assert_eq!(p.refused.len(), 1);
    assert_eq!(p.refused[0].code, "protected_live");
    assert!(
        p.refused[0].message.contains("apply again"),
        "{:?}",
        p.refused
    );
    let labels = &p.actions[0].desired.as_ref().unwrap().to_json()["config"]["labels"];
    assert!(labels.get(ownership::PREVENT_DESTROY).is_none(), "{labels}");
    // The recorded hash is kept, so the next plan still sees the replacement.
    let live_labels = &inv.node_pools[0].config.as_ref().unwrap().labels;
    assert_eq!(
        labels[ownership::SPEC_HASH],
        live_labels[&ownership::SPEC_HASH.to_string()].as_str()
    );
    // Second apply, once the stamp is gone: the replacement goes ahead.
    let mut inv2 = inv.clone();
    for np in &mut inv2.node_pools {
        np.config
            .as_mut()
            .unwrap()
            .labels
            .remove(ownership::PREVENT_DESTROY);
    }
    let p = plan(&f2, &inv2, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.tiny[0].node_pool".to_string(), ActionKind::Replace)]
    );
    assert!(p.refused.is_empty());
}

#[test]
fn a_refused_pool_holds_back_its_policy() {
    // tpu7x: the policy must not be replaced under a pool that stays.
    let mut f = fleet(vec![slice(
        "iron",
        "tpu7x",
        "2x2x2",
        1,
        CapacityType::OnDemand,
    )]);
    if let Some(s) = f.slices.get_mut("iron") {
        s.spec.lifecycle.prevent_destroy = true;
    }
    let inv = converged(&f);
    let mut f2 = f.clone();
    if let Some(s) = f2.slices.get_mut("iron") {
        s.shape = catalog::resolve("tpu7x", "2x2x4", None).unwrap();
        s.spec.topology = "2x2x4".into();
    }
    let p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
    let codes: Vec<(&str, &str)> = p
        .refused
        .iter()
        .map(|r| (r.address.as_str(), r.code.as_str()))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("slice.iron[0].workload_policy", "protected"),
            ("slice.iron[0].node_pool", "protected"),
        ]
    );
    // Unprotected in the same commit: the pool's stamp is lifted in place
    // and the policy's replacement waits with it.
    if let Some(s) = f2.slices.get_mut("iron") {
        s.spec.lifecycle.prevent_destroy = false;
    }
    let p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.iron[0].node_pool".to_string(), ActionKind::Update)]
    );
    let codes: Vec<(&str, &str)> = p
        .refused
        .iter()
        .map(|r| (r.address.as_str(), r.code.as_str()))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("slice.iron[0].workload_policy", "held_back"),
            ("slice.iron[0].node_pool", "protected_live"),
        ]
    );
}

#[test]
fn a_protected_slice_in_error_is_refused_while_the_rest_converges() {
    // Regression: the refusal failed the whole plan, so nothing was repaired.
    let mut f = standard_fleet();
    if let Some(s) = f.slices.get_mut("tiny") {
        s.spec.lifecycle.prevent_destroy = true;
    }
    let mut inv = converged(&f);
    for np in &mut inv.node_pools {
        if np.name == "tiny-0" || np.name == "llm-1" {
            np.status = Some("ERROR".into());
            np.conditions = vec![StatusCondition {
                code: Some("GCE_STOCKOUT".into()),
                message: Some("no capacity".into()),
                ..Default::default()
            }];
        }
    }
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.llm[1].node_pool".to_string(), ActionKind::Replace)]
    );
    assert_eq!(p.refused.len(), 1);
    let m = &p.refused[0].message;
    assert!(
        m.contains("ERROR") && m.contains("gcloud container node-pools delete tiny-0"),
        "{m}"
    );
}

#[test]
fn a_missing_spec_hash_is_restamped_in_place_not_replaced() {
    // Regression: `gcloud ... update --node-labels` dropped the hash label
    // and slicectl replaced a pool whose fields were all equal.
    let f = standard_fleet();
    let mut inv = converged(&f);
    for np in &mut inv.node_pools {
        np.config
            .as_mut()
            .unwrap()
            .labels
            .remove(ownership::SPEC_HASH);
    }
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(p.summary.replace, 0, "{:#?}", p.actions);
    assert_eq!(p.summary.update, 4);
    assert!(
        p.actions
            .iter()
            .all(|a| a.changes.iter().all(|c| c.path.contains("spec-hash")))
    );
    // With the hash gone and a field changed, it is a replacement.
    let mut f2 = f.clone();
    if let Some(s) = f2.slices.get_mut("tiny") {
        s.spec.capacity.kind = CapacityType::Spot;
    }
    let p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(p.summary.replace, 1);
}

#[test]
fn a_pool_without_ownership_labels_is_foreign_with_a_way_back() {
    let f = standard_fleet();
    let mut inv = converged(&f);
    for np in &mut inv.node_pools {
        if np.name == "tiny-0" {
            let l = &mut np.config.as_mut().unwrap().labels;
            l.remove(ownership::MANAGED_BY);
            l.remove(ownership::OWNER);
        }
    }
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert!(p.actions.is_empty());
    assert_eq!(p.refused.len(), 1);
    let m = &p.refused[0].message;
    assert!(m.contains("not created by slicectl"), "{m}");
    assert!(
        m.contains("slicectl.dev/managed-by=slicectl, slicectl.dev/owner=platform, slicectl.dev/slice=tiny, slicectl.dev/replica=0"),
        "{m}"
    );
    assert!(m.contains("still has some of them"), "{m}");
}

#[test]
fn a_slice_moved_to_another_target_says_so() {
    let f = fleet(vec![slice(
        "tiny",
        "tpu-v6e-slice",
        "1x1",
        1,
        CapacityType::OnDemand,
    )]);
    let inv = converged(&f);
    let mut f2 = f.clone();
    let mut t2 = target();
    t2.name = "serve".into();
    t2.spec.gke = Some(GkeCluster {
        location: "us-central1".into(),
        name: "serve".into(),
        kube_api: Default::default(),
    });
    f2.targets.insert("serve".into(), t2);
    f2.slices.get_mut("tiny").unwrap().spec.target = "serve".into();
    let p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    let del = p
        .actions
        .iter()
        .find(|a| a.action == ActionKind::Delete)
        .unwrap();
    assert!(del.reason_text().contains("moved"), "{}", del.reason_text());
    assert!(
        del.reason_text().contains("clusters/serve") && del.reason_text().contains("target serve"),
        "{}",
        del.reason_text()
    );
    assert!(
        !del.reason_text().contains("replicas:"),
        "{}",
        del.reason_text()
    );
}

#[test]
fn empty_source_never_prunes_without_override() {
    let f = standard_fleet();
    let inv = converged(&f);
    let empty = fleet(vec![]);
    let err = plan(
        &empty,
        &inv,
        &PlanOptions {
            max_destroy: 100,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::EmptySource { live: 5 }), "{err}");
    let p = plan(
        &empty,
        &inv,
        &PlanOptions {
            max_destroy: 100,
            allow_empty_source: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(p.summary.delete, 5);
}

#[test]
fn destructive_cap_is_enforced() {
    let f = standard_fleet();
    let inv = converged(&f);
    let err = plan(
        &fleet(vec![]),
        &inv,
        &PlanOptions {
            max_destroy: 3,
            allow_empty_source: true,
            ..Default::default()
        },
    )
    .unwrap_err();
    // Every kind counts: 4 node pools and iron's workload policy.
    assert_eq!(
        err,
        PlanError::TooManyDestructive {
            count: 5,
            max: 3,
            slices: vec![
                "iron[0]".to_string(),
                "llm[0]".to_string(),
                "llm[1]".to_string(),
                "tiny[0]".to_string()
            ],
        }
    );
    assert!(
        err.to_string().contains("slices affected: iron[0], llm[0]"),
        "{err}"
    );
}

#[test]
fn in_flight_operation_is_waited_on_not_duplicated() {
    let f = fleet(vec![slice(
        "tiny",
        "tpu-v6e-slice",
        "1x1",
        1,
        CapacityType::OnDemand,
    )]);
    let mut inv = converged(&f);
    let st = &mut inv;
    st.node_pools[0].status = Some("PROVISIONING".into());
    st.operations.push(gke::Operation {
        name: "operation-1".into(),
        operation_type: "CREATE_NODE_POOL".into(),
        status: "RUNNING".into(),
        target_link: Some(format!(
            "https://container.googleapis.com/v1/{}/nodePools/tiny-0",
            cluster().path()
        )),
        ..Default::default()
    });
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.tiny[0].node_pool".to_string(), ActionKind::Wait)]
    );
    assert_eq!(p.actions[0].operation.as_deref(), Some("operation-1"));
}

#[test]
fn pool_in_error_is_replaced() {
    let f = fleet(vec![slice(
        "tiny",
        "tpu-v6e-slice",
        "1x1",
        1,
        CapacityType::OnDemand,
    )]);
    let mut inv = converged(&f);
    let np = &mut inv.node_pools[0];
    np.status = Some("ERROR".into());
    np.conditions.push(StatusCondition {
        code: Some("GCE_STOCKOUT".into()),
        ..Default::default()
    });
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.tiny[0].node_pool".to_string(), ActionKind::Replace)]
    );
    assert!(
        p.actions[0]
            .reason_text()
            .contains("ERROR state (GCE_STOCKOUT)"),
        "{}",
        p.actions[0].reason_text()
    );
}

/// A pool GKE left RUNNING_WITH_ERROR (a stockout it keeps retrying) is not
/// a working TPU slice: it is waited for while an operation runs on it, then
/// replaced like an ERROR pool (with the same guards), the reason naming
/// its state and quoting its status message. It used to plan as healthy.
#[test]
fn pool_running_with_error_is_waited_for_then_replaced() {
    let f = fleet(vec![slice(
        "tiny",
        "tpu-v6e-slice",
        "2x4",
        1,
        CapacityType::OnDemand,
    )]);
    let mut inv = converged(&f);
    let np = &mut inv.node_pools[0];
    np.status = Some("RUNNING_WITH_ERROR".into());
    np.status_message =
        Some("Not all instances running in IGM: ZONE_RESOURCE_POOL_EXHAUSTED".into());
    np.conditions.push(StatusCondition {
        code: Some("GCE_STOCKOUT".into()),
        ..Default::default()
    });
    let mut running = inv.clone();
    running.operations.push(gke::Operation {
        name: "operation-7".into(),
        operation_type: "CREATE_NODE_POOL".into(),
        status: "RUNNING".into(),
        target_link: Some(format!(
            "https://container.googleapis.com/v1/{}/nodePools/tiny-0",
            cluster().path()
        )),
        ..Default::default()
    });
    let p = plan(&f, &running, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.tiny[0].node_pool".to_string(), ActionKind::Wait)]
    );
    assert_eq!(p.actions[0].operation.as_deref(), Some("operation-7"));

    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.tiny[0].node_pool".to_string(), ActionKind::Replace)]
    );
    let reason = p.actions[0].reason_text();
    assert_eq!(p.actions[0].reason.code(), "error_state");
    for want in [
        "replace because the node pool is in RUNNING_WITH_ERROR state",
        "a TPU slice is all-or-nothing",
        "GCE_STOCKOUT; Not all instances running in IGM: ZONE_RESOURCE_POOL_EXHAUSTED",
    ] {
        assert!(reason.contains(want), "{want:?} in {reason}");
    }
    // The same guards as for ERROR: protected, it is refused with the way out.
    let mut protected = f.clone();
    if let Some(s) = protected.slices.get_mut("tiny") {
        s.spec.lifecycle.prevent_destroy = true;
    }
    let p = plan(&protected, &inv, &PlanOptions::default()).unwrap();
    assert!(p.actions.is_empty(), "{:?}", kinds(&p));
    let m = &p.refused[0].message;
    assert!(
        m.contains("It stays in RUNNING_WITH_ERROR until then")
            && m.contains("gcloud container node-pools delete tiny-0"),
        "{m}"
    );
    // And it counts against --max-destroy.
    let err = plan(
        &f,
        &inv,
        &PlanOptions {
            max_destroy: 0,
            ..PlanOptions::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("--max-destroy=0"), "{err}");
}

#[test]
fn older_hash_version_is_restamped_in_place_not_replaced() {
    let f = fleet(vec![slice(
        "tiny",
        "tpu-v6e-slice",
        "1x1",
        1,
        CapacityType::OnDemand,
    )]);
    let mut inv = converged(&f);
    if let Some(c) = inv.node_pools[0].config.as_mut() {
        c.labels.insert(ownership::HASH_VERSION.into(), "v0".into());
        c.labels
            .insert(ownership::SPEC_HASH.into(), "something-else".into());
    }
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.tiny[0].node_pool".to_string(), ActionKind::Update)]
    );
}

#[test]
fn destroy_tears_down_everything_owned() {
    let f = standard_fleet();
    let p = plan_destroy(&f, &converged(&f), usize::MAX).unwrap();
    assert_eq!(p.summary.delete, 5);
    assert_eq!(p.mode, PlanMode::Destroy);
}

#[test]
fn plans_are_deterministic_and_json_is_stable() {
    let f = standard_fleet();
    let a = plan(&f, &TestInv::default(), &PlanOptions::default()).unwrap();
    let b = plan(&f, &TestInv::default(), &PlanOptions::default()).unwrap();
    assert_eq!(a.to_json(), b.to_json());
    let json = a.to_json();
    assert_eq!(json["summary"]["create"], 5);
    assert_eq!(json["actions"][0]["action"], "create");
    assert_eq!(json["actions"][0]["kind"], "workload_policy");
    assert_eq!(json["actions"][0]["reason_code"], "missing");
    // Every field of format version 1 is present.
    for key in [
        "format_version",
        "observed_fingerprint",
        "mode",
        "actions",
        "unmanaged",
        "summary",
    ] {
        assert!(json.get(key).is_some(), "{key}");
    }
    for key in [
        "action",
        "kind",
        "name",
        "address",
        "slice",
        "replica",
        "scope",
        "reason",
        "after",
        "timeout_secs",
    ] {
        assert!(json["actions"][0].get(key).is_some(), "{key}");
    }
}

#[test]
fn render_covers_every_capacity_model() {
    let mut reserved = slice("res", "tpu-v6e-slice", "4x4", 1, CapacityType::Reservation);
    reserved.spec.capacity.reservation = Some(crate::spec::model::Reservation {
        name: "r1".into(),
        project: Some("shared-project".into()),
    });
    let mut flex = slice("flex", "tpu-v6e-slice", "2x4", 1, CapacityType::FlexStart);
    flex.spec.capacity.max_run_duration = Some("72h".into());
    // Flex-start with GKE's queued provisioning: the same pool plus
    // `queuedProvisioning.enabled` (plain flex-start has none).
    let mut queued = slice("queued", "tpu-v6e-slice", "2x4", 1, CapacityType::FlexStart);
    queued.spec.capacity.queued = true;
    let f = fleet(vec![
        reserved,
        flex,
        queued,
        slice("spot", "tpu-v5p-slice", "2x2x1", 1, CapacityType::Spot),
    ]);
    let rendered: Vec<NodePool> = rendered_pools(&f);
    insta::assert_json_snapshot!("render_capacity_models", rendered);
}

#[test]
fn every_refusal_is_reported_not_just_the_first() {
    let mut f = standard_fleet();
    for s in f.slices.values_mut() {
        s.spec.lifecycle.prevent_destroy = true;
    }
    let inv = converged(&f);
    let p = plan(
        &fleet(vec![]),
        &inv,
        &PlanOptions {
            max_destroy: 100,
            allow_empty_source: true,
            ..Default::default()
        },
    )
    .unwrap();
    // 4 protected pools, and iron's policy held back with its pool.
    assert_eq!(p.refused.len(), 5, "{:#?}", p.refused);
    let text = human::render(&p, false);
    for pool in ["iron-0", "llm-0", "llm-1", "tiny-0"] {
        assert!(text.contains(&format!("({pool})")), "{text}");
    }
    assert!(
        text.contains("5 refused") || text.contains("5 refused change"),
        "{text}"
    );
}

#[test]
fn two_slices_rendering_the_same_pool_name_are_refused() {
    // Slice names are unique across the specs (validation), so only a
    // hand-built fleet gets here; the planner still refuses instead of
    // letting two slices fight over one node pool.
    let mut f = standard_fleet();
    let twin = slice("tiny", "tpu-v6e-slice", "2x2", 1, CapacityType::OnDemand);
    f.slices.insert("tiny-twin".into(), twin);
    let err = plan(&f, &TestInv::default(), &PlanOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("tiny-0"), "{text}");
    assert!(
        text.contains("both slice tiny replica 0 and slice tiny replica 0 render to this name"),
        "{text}"
    );
}

#[test]
fn ownership_guards_workload_policies_too() {
    // A policy of another owner under the desired name: refused, and its
    // pool (which would name it) is held back.
    let f = fleet(vec![slice(
        "iron",
        "tpu7x",
        "2x2x2",
        1,
        CapacityType::OnDemand,
    )]);
    let mut inv = converged(&f);
    inv.node_pools.clear();
    for p in &mut inv.policies {
        p.description = Some(
            p.description
                .clone()
                .unwrap()
                .replace("owner=platform", "owner=someone-else"),
        );
    }
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
    let codes: Vec<(&str, &str)> = p
        .refused
        .iter()
        .map(|r| (r.address.as_str(), r.code.as_str()))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("slice.iron[0].workload_policy", "name_taken"),
            ("slice.iron[0].node_pool", "held_back"),
        ]
    );
    assert!(
        p.refused[0].message.contains("someone-else"),
        "{}",
        p.refused[0].message
    );
    // Another owner's policies are never deleted either.
    let p = plan(
        &fleet(vec![]),
        &inv,
        &PlanOptions {
            max_destroy: 10,
            allow_empty_source: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
}

/// Issue 24: the empty-source guard per Target. Targets `train` (owner
/// platform) and `other` (owner other) share a cluster; the file with
/// train's Slices is lost in a merge while other's Slice stays, so the
/// fleet is not empty: train's live pool is still not pruned.
#[test]
fn a_target_with_no_slices_left_is_not_pruned_without_override() {
    let mut other = target_in("other", "us-central1-b");
    other.spec.owner_id = "other".into();
    let with_targets = |slices: Vec<Slice>| {
        let mut f = fleet(slices);
        f.targets.insert("other".into(), other.clone());
        f
    };
    let mut o = slice("o", "tpu-v6e-slice", "1x1", 1, CapacityType::OnDemand);
    o.spec.target = "other".into();
    let before = with_targets(vec![
        slice("tiny", "tpu-v6e-slice", "1x1", 1, CapacityType::OnDemand),
        o.clone(),
    ]);
    let inv = converged(&before);
    let after = with_targets(vec![o]);
    let opts = PlanOptions {
        max_destroy: 100,
        ..Default::default()
    };
    let p = plan(&after, &inv, &opts).unwrap();
    assert_eq!(p.summary.delete, 0, "{:?}", kinds(&p));
    assert_eq!(p.refused.len(), 1, "{:?}", p.refused);
    assert_eq!(p.refused[0].code, "empty_target");
    assert!(
        p.refused[0].message.contains("Target"),
        "{}",
        p.refused[0].message
    );
    assert!(
        p.refused[0].message.contains("--allow-empty-source"),
        "{}",
        p.refused[0].message
    );
    // With the override, or with one of train's Slices still in the specs,
    // the delete goes ahead.
    let p = plan(
        &after,
        &inv,
        &PlanOptions {
            allow_empty_source: true,
            ..opts
        },
    )
    .unwrap();
    assert_eq!(p.summary.delete, 1);
    let mut o2 = slice("o", "tpu-v6e-slice", "1x1", 1, CapacityType::OnDemand);
    o2.spec.target = "other".into();
    let kept = with_targets(vec![
        o2,
        slice("keep", "tpu-v6e-slice", "1x1", 1, CapacityType::OnDemand),
    ]);
    let p = plan(&kept, &inv, &opts).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    assert_eq!(p.summary.delete, 1, "{:?}", kinds(&p));
}

/// Issue 24: scale-down keeps the working replicas. `rep` has 3 replicas:
/// rep-0 stocked out (ERROR), rep-1 and rep-2 RUNNING. `replicas: 1` keeps
/// rep-1 and deletes the broken rep-0 and rep-2, where it used to delete
/// both working ones and replace the broken one.
#[test]
fn scale_down_drops_broken_replicas_first_and_keeps_working_ones() {
    let three = fleet(vec![slice(
        "rep",
        "tpu-v6e-slice",
        "2x2",
        3,
        CapacityType::OnDemand,
    )]);
    let mut inv = converged(&three);
    for np in &mut inv.node_pools {
        if np.name == "rep-0" {
            np.status = Some("ERROR".into());
        }
    }
    let one = fleet(vec![slice(
        "rep",
        "tpu-v6e-slice",
        "2x2",
        1,
        CapacityType::OnDemand,
    )]);
    let opts = PlanOptions {
        max_destroy: 100,
        ..Default::default()
    };
    let p = plan(&one, &inv, &opts).unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            ("slice.rep[0].node_pool".to_string(), ActionKind::Delete),
            ("slice.rep[2].node_pool".to_string(), ActionKind::Delete),
        ],
        "{:#?}",
        p.actions
    );
    let why = p.actions[0].reason_text();
    assert!(
        why.contains("the busy replicas, then the working ones, are kept first: 1"),
        "{why}"
    );
    // Converged on the kept replica, the plan is empty; growing again fills
    // the lowest free index.
    inv.node_pools.retain(|np| np.name == "rep-1");
    assert!(plan(&one, &inv, &opts).unwrap().actions.is_empty());
    let two = fleet(vec![slice(
        "rep",
        "tpu-v6e-slice",
        "2x2",
        2,
        CapacityType::OnDemand,
    )]);
    let p = plan(&two, &inv, &opts).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.rep[0].node_pool".to_string(), ActionKind::Create)]
    );
}

/// Issue 24: changing a Target's ownerId. Alone it is refused, and the
/// refusal now gives the lossless way; following it (the old Target stays
/// for one apply, the Slices point at a new Target with the new ownerId)
/// relabels the live pool in place, with no delete.
#[test]
fn an_owner_id_change_is_refused_with_the_lossless_way_which_relabels_in_place() {
    let before = fleet(vec![
        slice("tiny", "tpu-v6e-slice", "1x1", 1, CapacityType::OnDemand),
        slice("iron", "tpu7x", "2x2x2", 1, CapacityType::OnDemand),
    ]);
    let inv = converged(&before);
    let opts = PlanOptions {
        max_destroy: 100,
        ..Default::default()
    };
    // The ownerId changed on every Target.
    let mut changed = before.clone();
    for t in changed.targets.values_mut() {
        t.spec.owner_id = "platform-v2".into();
    }
    let p = plan(&changed, &inv, &opts).unwrap();
    assert_eq!(p.refused.len(), 3, "{:?}", p.refused);
    for r in &p.refused {
        assert_eq!(r.code, "name_taken");
        let m = &r.message;
        if r.kind == "node_pool" {
            assert!(m.contains("lossless way"), "{m}");
        } else {
            assert!(m.contains("for as long as it lives"), "{m}");
        }
        assert!(
            m.contains("\"platform\"") && m.contains("\"platform-v2\""),
            "{m}"
        );
    }
    // The lossless way: the old Targets stay, a new one takes the Slices.
    let mut both = before.clone();
    let mut t2 = target_in("train-v2", "us-central1-b");
    t2.spec.owner_id = "platform-v2".into();
    both.targets.insert("train-v2".into(), t2);
    let mut t3 = target_in("train-c-v2", "us-central1-c");
    t3.spec.owner_id = "platform-v2".into();
    both.targets.insert("train-c-v2".into(), t3);
    for s in both.slices.values_mut() {
        s.spec.target = if s.name == "iron" {
            "train-c-v2".into()
        } else {
            "train-v2".into()
        };
    }
    let p = plan(&both, &inv, &opts).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    // The pools are relabelled in place; the workload policy keeps its
    // recorded owner (the old Target must stay while it lives).
    assert_eq!(
        kinds(&p),
        vec![
            ("slice.iron[0].node_pool".to_string(), ActionKind::Update),
            ("slice.tiny[0].node_pool".to_string(), ActionKind::Update),
        ],
        "{:#?}",
        p.actions
    );
}

/// A one-chip v6e slice of `replicas` replicas, on demand.
fn v6e(name: &str, replicas: u32) -> Slice {
    slice(
        name,
        "tpu-v6e-slice",
        "1x1",
        replicas,
        CapacityType::OnDemand,
    )
}

/// Every Target of the test fleet moved to cluster `name` (same project).
/// `f` with every Target renamed `<name>-new` (its Slices following).
fn renamed_targets(mut f: Fleet) -> Fleet {
    let targets = std::mem::take(&mut f.targets);
    for (name, mut t) in targets {
        let new = format!("{name}-new");
        t.name = new.clone();
        f.targets.insert(new, t);
    }
    for s in f.slices.values_mut() {
        s.spec.target = format!("{}-new", s.spec.target);
    }
    f
}

fn on_cluster(mut f: Fleet, name: &str) -> Fleet {
    for t in f.targets.values_mut() {
        if let Some(g) = t.spec.gke.as_mut() {
            g.name = name.into();
        }
    }
    f
}

/// Issue 24 item 5: the Targets move from cluster `train` to `train2`. The
/// pools left in `train` (which no Target names any more) are deleted as
/// moved, not left running unseen.
#[test]
fn a_target_moved_to_another_cluster_deletes_its_old_pools_as_moved() {
    let f = fleet(vec![v6e("zz", 2)]);
    let inv = converged(&f);
    let moved = on_cluster(f, "train2");
    let p = plan(&moved, &inv, &PlanOptions::default()).unwrap();
    let train2 = |a: &Action| a.id.scope.to_string().contains("clusters/train2");
    let creates: Vec<&Action> = p
        .actions
        .iter()
        .filter(|a| a.action == ActionKind::Create)
        .collect();
    let deletes: Vec<&Action> = p
        .actions
        .iter()
        .filter(|a| a.action == ActionKind::Delete)
        .collect();
    assert_eq!(creates.len(), 2, "{:?}", kinds(&p));
    assert!(creates.iter().all(|a| train2(a)), "{:?}", kinds(&p));
    assert_eq!(deletes.len(), 2, "the old pools are seen: {:?}", kinds(&p));
    for d in &deletes {
        assert!(!train2(d), "{}", d.id.scope);
        assert!(matches!(d.reason, Reason::Moved { .. }), "{:?}", d.reason);
        assert!(
            d.reason_text().contains("clusters/train2"),
            "{}",
            d.reason_text()
        );
    }
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    assert!(p.unmanaged.is_empty(), "{:?}", p.unmanaged);
    let text = human::render(&p, false);
    assert!(text.contains("moved"), "{text}");
    // Once the new pools run and the old ones are gone: no changes.
    let inv2 = converged(&moved);
    let mut live = inv2.inventory();
    for l in live.resources.entry(node_pool::KIND).or_default() {
        l.scope = Scope::Cluster(ClusterRef {
            name: "train2".into(),
            ..cluster()
        });
    }
    let p = super::plan(&moved, &live, &all_kinds(), &PlanOptions::default()).unwrap();
    assert!(!p.summary.has_changes(), "{:?}", kinds(&p));
}

/// A protected slice moved with its Target, its protection lifted in the
/// same commit: the copy left behind still carries the live stamp, which no
/// desired body lifts (the slice is desired elsewhere). The first apply
/// lifts it in place (`protected_live`, the new copy held back with it so
/// nothing runs twice); the next deletes it as moved. Before, the refusal
/// said to apply twice and no apply ever lifted it (campaign seed
/// 0xc87fd24ffd6382ed, N15).
#[test]
fn a_moved_leftovers_protection_is_lifted_in_place_once_its_spec_lifts_it() {
    let protect = |mut f: Fleet, on: bool| {
        for s in f.slices.values_mut() {
            s.spec.lifecycle.prevent_destroy = on;
        }
        f
    };
    let before = protect(fleet(vec![v6e("zz", 1)]), true);
    let inv = converged(&before);
    let moved = protect(on_cluster(before, "train2"), false);
    let p = plan(&moved, &inv, &PlanOptions::default()).unwrap();
    let acts: Vec<(ActionKind, String, &str)> = p
        .actions
        .iter()
        .map(|a| (a.action, a.id.scope.to_string(), a.reason.code()))
        .collect();
    assert_eq!(acts.len(), 1, "{acts:?}");
    assert_eq!(acts[0].0, ActionKind::Update, "{acts:?}");
    assert_eq!(acts[0].2, "lift_protection", "{acts:?}");
    assert!(!acts[0].1.contains("train2"), "{acts:?}");
    let codes: Vec<&str> = p.refused.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(
        codes,
        vec!["protected_live", "held_back"],
        "{:?}",
        p.refused
    );
    assert!(
        p.refused[0].message.contains("apply again to delete it"),
        "{}",
        p.refused[0].message
    );
    // Once lifted: the new copy is created and the old one deleted as moved.
    let mut lifted = inv.inventory();
    for l in lifted.resources.entry(node_pool::KIND).or_default() {
        let mut np = kind::body_as::<NodePool>(&l.body).unwrap().clone();
        if let Some(c) = np.config.as_mut() {
            c.labels.remove(crate::plan::ownership::PREVENT_DESTROY);
        }
        l.body = std::sync::Arc::new(np);
    }
    let p = super::plan(&moved, &lifted, &all_kinds(), &PlanOptions::default()).unwrap();
    let acts: Vec<(ActionKind, &str)> = p
        .actions
        .iter()
        .map(|a| (a.action, a.reason.code()))
        .collect();
    assert!(acts.contains(&(ActionKind::Create, "missing")), "{acts:?}");
    assert!(acts.contains(&(ActionKind::Delete, "moved")), "{acts:?}");
    assert!(p.refused.is_empty(), "{:?}", p.refused);
}

/// A protected slice moved, its new copy already running and stamped: the
/// copy left behind, stamped too, is redundant. This apply lifts its stamp
/// (`protected_live`, saying why); the next deletes it as moved. With no
/// standing copy in the new place it stays refused `protected`.
#[test]
fn a_protected_leftover_is_lifted_when_its_protected_new_copy_runs() {
    let protect = |mut f: Fleet| {
        for s in f.slices.values_mut() {
            s.spec.lifecycle.prevent_destroy = true;
        }
        f
    };
    let before = protect(fleet(vec![v6e("zz", 1)]));
    let old = converged(&before);
    let moved = protect(on_cluster(before, "train2"));
    // Live: the old copy in train and the new one in train2, both stamped.
    let mut live = old.inventory();
    let mut new_copies = converged(&moved).inventory();
    for l in new_copies.resources.entry(node_pool::KIND).or_default() {
        l.scope = Scope::Cluster(ClusterRef {
            name: "train2".into(),
            ..cluster()
        });
    }
    let extra = new_copies
        .resources
        .remove(&node_pool::KIND)
        .unwrap_or_default();
    live.resources
        .entry(node_pool::KIND)
        .or_default()
        .extend(extra);
    let p = super::plan(&moved, &live, &all_kinds(), &PlanOptions::default()).unwrap();
    let acts: Vec<(ActionKind, &str, String)> = p
        .actions
        .iter()
        .map(|a| (a.action, a.reason.code(), a.id.scope.to_string()))
        .collect();
    assert_eq!(acts.len(), 1, "{acts:?}");
    assert_eq!(
        (acts[0].0, acts[0].1),
        (ActionKind::Update, "lift_protection"),
        "{acts:?}"
    );
    assert!(!acts[0].2.contains("train2"), "{acts:?}");
    assert_eq!(p.refused.len(), 1, "{:?}", p.refused);
    assert_eq!(p.refused[0].code, "protected_live");
    assert!(
        p.refused[0].message.contains("redundant"),
        "{}",
        p.refused[0].message
    );
    // No copy in the new place: the leftover stays protected, the create
    // waits (a person lifts the protection to move a protected slice).
    let p = super::plan(
        &moved,
        &old.inventory(),
        &all_kinds(),
        &PlanOptions::default(),
    )
    .unwrap();
    let codes: Vec<&str> = p.refused.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(codes, vec!["protected", "held_back"], "{:?}", p.refused);
    assert!(p.actions.is_empty(), "{:?}", kinds(&p));
}

/// Issue 24 item 5: a Target removed together with its Slices, while the
/// fleet keeps another Target in the project: its pools, in a cluster no
/// Target names, are refused (`target_removed`) unless the override is
/// given, and `destroy` of the remaining specs finds them too.
#[test]
fn a_target_removed_with_its_slices_is_refused_and_destroy_finds_its_pools() {
    let before = fleet(vec![v6e("zz", 2)]);
    let inv = converged(&before);
    // What is left: other Targets (new names), on cluster train2, with one
    // Slice. (A Target that keeps its name and moves is not removed: its
    // removed slices are deleted, through the gate.)
    let after = renamed_targets(on_cluster(fleet(vec![v6e("keep", 1)]), "train2"));
    let p = plan(&after, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(p.summary.delete, 0, "{:?}", kinds(&p));
    assert_eq!(p.refused.len(), 2, "{:?}", p.refused);
    for r in &p.refused {
        assert_eq!(r.code, "target_removed", "{r:?}");
        assert!(r.message.contains("--allow-empty-source"), "{}", r.message);
        assert!(r.message.contains("no Target names"), "{}", r.message);
    }
    assert!(!p.effect().to_string().is_empty());
    let p = plan(
        &after,
        &inv,
        &PlanOptions {
            allow_empty_source: true,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(p.summary.delete, 2, "{:?}", kinds(&p));
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    // Destroy sees them (this owner id's, in a project it names) and
    // refuses them: their stamp names a Target these specs do not declare,
    // which may be another source's (two sources can share an ownerId).
    let d = plan_destroy(&after, &inv, 10).unwrap();
    assert!(d.actions.is_empty(), "{:?}", kinds(&d));
    let refused: Vec<(&str, &str)> = d
        .refused
        .iter()
        .map(|r| (r.name.as_str(), r.code.as_str()))
        .collect();
    assert_eq!(
        refused,
        vec![("zz-0", "other_source"), ("zz-1", "other_source")],
        "{:?}",
        d.refused
    );
    // Under their Targets' old names (moved, not removed), destroy takes them.
    let moved = on_cluster(fleet(vec![v6e("keep", 1)]), "train2");
    let d = plan_destroy(&moved, &inv, 10).unwrap();
    let gone: Vec<String> = d.actions.iter().map(|a| a.id.name.clone()).collect();
    assert!(
        gone.contains(&"zz-0".to_string()) && gone.contains(&"zz-1".to_string()),
        "{gone:?}"
    );
}

/// Pools of another ownerId in a cluster no Target names are none of this
/// fleet's business: not deleted, not refused, not even listed.
#[test]
fn another_owners_pools_in_an_unnamed_cluster_are_left_alone() {
    let before = fleet(vec![v6e("zz", 1)]);
    let inv = converged(&before);
    let mut after = on_cluster(before, "train2");
    for t in after.targets.values_mut() {
        t.spec.owner_id = "someone-else".into();
    }
    let p = plan(&after, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(p.summary.delete, 0, "{:?}", kinds(&p));
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    assert!(p.unmanaged.is_empty(), "{:?}", p.unmanaged);
}

/// Issue 24 item 8: `status` shows what is live and what is pending. A live
/// 2x2x2 pool (2 hosts) with one node whose spec now says 2x2x4 (4 hosts)
/// is `2x2x2 → 2x2x4 (pending replace)`, its nodes judged from the Nodes
/// against the spec, and the row names its cluster and location.
#[test]
fn status_shows_the_live_topology_and_the_pending_replacement() {
    let f = fleet(vec![slice(
        "zz",
        "tpu-v5p-slice",
        "2x2x2",
        1,
        CapacityType::OnDemand,
    )]);
    let mut inv = converged(&f);
    inv.node_pools[0].initial_node_count = Some(1);
    let mut f2 = f.clone();
    let s = f2.slices.get_mut("zz").unwrap();
    s.spec.topology = "2x2x4".into();
    s.shape = catalog::resolve("tpu-v5p-slice", "2x2x4", None).unwrap();
    let rows = crate::status::rows(&f2, &inv.inventory(), &all_kinds());
    assert_eq!(rows.len(), 1, "{rows:#?}");
    let r = &rows[0];
    assert_eq!(r.topology, "2x2x2 → 2x2x4 (pending replace)", "{r:#?}");
    assert_eq!(r.live_topology, "2x2x2");
    assert_eq!(r.pending, "replace");
    assert_eq!(r.state, "RUNNING");
    // Readiness comes from the Nodes (none observed here), judged against
    // what the spec asks for.
    assert_eq!(r.nodes, "0/4 ready", "{r:#?}");
    assert!(
        r.last_error.contains("4 of 4 node(s) not registered"),
        "{r:#?}"
    );
    assert_eq!(
        (r.project.as_str(), r.cluster.as_str(), r.location.as_str()),
        ("example-project", "train", "us-central1")
    );
    // In sync: the desired topology, nothing pending.
    let rows = crate::status::rows(&f, &converged(&f).inventory(), &all_kinds());
    assert_eq!(rows[0].topology, "2x2x2");
    assert_eq!(rows[0].pending, "");
    assert_eq!(rows[0].nodes, "0/2 ready");
}

/// Issue 24 items 5 and 8: after a Target moved, `status` shows the pools
/// left in the old cluster, with that cluster, as moved.
#[test]
fn status_shows_pools_left_in_a_cluster_no_target_names() {
    let f = fleet(vec![v6e("zz", 2)]);
    let inv = converged(&f);
    let moved = on_cluster(f, "train2");
    let rows = crate::status::rows(&moved, &inv.inventory(), &all_kinds());
    let old: Vec<&crate::status::Row> = rows.iter().filter(|r| r.cluster == "train").collect();
    let new: Vec<&crate::status::Row> = rows.iter().filter(|r| r.cluster == "train2").collect();
    assert_eq!(old.len(), 2, "{rows:#?}");
    assert_eq!(new.len(), 2, "{rows:#?}");
    for r in &old {
        assert!(r.state.starts_with("ORPHANED"), "{r:#?}");
        assert!(r.last_error.contains("moved to"), "{r:#?}");
        assert_eq!(r.pending, "delete");
    }
    for r in &new {
        assert_eq!(r.state, "MISSING");
        assert_eq!(r.pending, "create");
    }
}

/// The old cluster is still named by a Target of another ownerId: the
/// moved Target's pools there are still this fleet's, deleted as moved, not
/// shown as someone else's.
#[test]
fn a_target_moved_off_a_cluster_another_owner_still_uses_takes_its_pools_along() {
    let mut other = target_in("other", "us-central1-b");
    other.spec.owner_id = "other".into();
    let before = fleet(vec![v6e("zz", 1)]);
    let inv = converged(&before);
    let mut after = on_cluster(before, "train2");
    after.targets.insert("other".into(), other);
    let p = plan(&after, &inv, &PlanOptions::default()).unwrap();
    let del: Vec<&Action> = p
        .actions
        .iter()
        .filter(|a| a.action == ActionKind::Delete)
        .collect();
    assert_eq!(del.len(), 1, "{:?}", kinds(&p));
    assert!(
        matches!(del[0].reason, Reason::Moved { .. }),
        "{:?}",
        del[0]
    );
    assert!(p.unmanaged.is_empty(), "{:?}", p.unmanaged);
}

/// `alpha` (2 replicas, and a tpu7x `beta` with a workload policy) as they
/// run, then renamed in the specs.
fn renamed(name: &str, from: &str, acc: &str, topo: &str, declare: bool) -> (Fleet, TestInv) {
    let before = fleet(vec![slice(from, acc, topo, 2, CapacityType::OnDemand)]);
    let inv = converged(&before);
    let mut s = slice(name, acc, topo, 2, CapacityType::OnDemand);
    if declare {
        s.spec.previous_names = vec![from.to_string()];
    }
    (fleet(vec![s]), inv)
}

#[test]
fn a_declared_rename_relabels_in_place_and_keeps_the_names() {
    for (acc, topo) in [("tpu-v6e-slice", "4x4"), ("tpu7x", "2x2x2")] {
        let (f, inv) = renamed("gamma", "alpha", acc, topo, true);
        let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
        assert_eq!(
            p.summary.create + p.summary.delete + p.summary.replace,
            0,
            "{acc}: {:?}",
            kinds(&p)
        );
        // Node pools are relabelled (an in-place update); workload
        // policies keep their immutable description and are not touched.
        let updates: Vec<(String, String, &str)> = p
            .actions
            .iter()
            .map(|a| (a.address(), a.id.name.clone(), a.reason.code()))
            .collect();
        assert_eq!(
            updates,
            vec![
                (
                    "slice.gamma[0].node_pool".into(),
                    "alpha-0".into(),
                    "renamed"
                ),
                (
                    "slice.gamma[1].node_pool".into(),
                    "alpha-1".into(),
                    "renamed"
                ),
            ],
            "{acc}"
        );
        assert!(p.actions.iter().all(|a| a.action == ActionKind::Update));
        let labels: Vec<&str> = p.actions[0]
            .changes
            .iter()
            .map(|c| c.path.as_str())
            .collect();
        assert!(
            labels.iter().any(|l| l.contains(ownership::SLICE)),
            "{labels:?}"
        );
        assert_eq!(p.renames.len(), 1);
        assert!(p.renames[0].declared);
        assert_eq!(
            (p.renames[0].from.as_str(), p.renames[0].to.as_str()),
            ("alpha", "gamma")
        );

        // Applied: the pools carry gamma's labels under their old names,
        // and the next plan is empty.
        let mut after = inv.clone();
        for np in after.node_pools.iter_mut() {
            let want = p
                .actions
                .iter()
                .find(|a| a.id.name == np.name)
                .and_then(|a| a.desired.as_ref())
                .and_then(kind::body_as::<NodePool>)
                .cloned()
                .unwrap();
            *np = as_live(want);
        }
        let again = plan(&f, &after, &PlanOptions::default()).unwrap();
        assert!(!again.summary.has_changes(), "{acc}: {:?}", kinds(&again));
        // Status reports the adopted pools as gamma's.
        let rows = crate::status::rows(&f, &after.inventory(), &all_kinds());
        let states: Vec<(String, String, String)> = rows
            .iter()
            .map(|r| (r.slice.clone(), r.node_pool.clone(), r.state.clone()))
            .collect();
        assert_eq!(
            states,
            vec![
                ("gamma".into(), "alpha-0".into(), "RUNNING".into()),
                ("gamma".into(), "alpha-1".into(), "RUNNING".into()),
            ],
            "{acc}"
        );
    }
}

#[test]
fn a_declared_rename_still_replaces_on_a_topology_change() {
    let (mut f, inv) = renamed("gamma", "alpha", "tpu-v6e-slice", "4x4", true);
    let s = f.slices.get_mut("gamma").unwrap();
    s.spec.topology = "2x4".into();
    s.shape = catalog::resolve("tpu-v6e-slice", "2x4", None).unwrap();
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    let got: Vec<(String, String, ActionKind)> = p
        .actions
        .iter()
        .map(|a| (a.address(), a.id.name.clone(), a.action))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "slice.gamma[0].node_pool".into(),
                "alpha-0".into(),
                ActionKind::Replace
            ),
            (
                "slice.gamma[1].node_pool".into(),
                "alpha-1".into(),
                ActionKind::Replace
            ),
        ]
    );
}

#[test]
fn an_undeclared_rename_is_named_and_creates_before_it_deletes() {
    let (f, inv) = renamed("gamma", "alpha", "tpu-v6e-slice", "4x4", false);
    let p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert_eq!((p.summary.create, p.summary.delete), (2, 2));
    assert_eq!(p.renames.len(), 1, "{:?}", p.renames);
    let r = &p.renames[0];
    assert!(!r.declared);
    assert!(
        r.message.contains("slice alpha looks renamed to gamma")
            && r.message.contains("previousNames: [alpha]"),
        "{}",
        r.message
    );
    assert_eq!(r.addresses.len(), 4);
    // The plan reads in the order it runs: gamma's creates, then alpha's deletes.
    assert_eq!(
        kinds(&p),
        vec![
            ("slice.gamma[0].node_pool".to_string(), ActionKind::Create),
            ("slice.gamma[1].node_pool".to_string(), ActionKind::Create),
            ("slice.alpha[0].node_pool".to_string(), ActionKind::Delete),
            ("slice.alpha[1].node_pool".to_string(), ActionKind::Delete),
        ]
    );
    let json = p.to_json();
    assert_eq!(json["renames"][0]["from"], "alpha");
    assert_eq!(json["renames"][0]["declared"], false);
    assert!(human::render(&p, false).contains("Looks renamed: slice alpha looks renamed to gamma"));

    // Every delete of alpha waits for gamma's creates.
    let steps = crate::apply::steps::expand(&p, |k| {
        crate::kinds::get(k).map_or(crate::apply::steps::KindInfo::default(), |x| {
            crate::apply::steps::KindInfo {
                depends_on: x.depends_on(),
                shared: x.shared(),
                cleanup: x.cleanup_after_dependencies(),
            }
        })
    });
    let creates: Vec<usize> = steps
        .iter()
        .filter(|s| p.actions[s.action].action == ActionKind::Create)
        .map(|s| s.id)
        .collect();
    for s in steps
        .iter()
        .filter(|s| p.actions[s.action].action == ActionKind::Delete)
        .filter(|s| s.op == crate::apply::StepOp::Delete)
    {
        for c in &creates {
            assert!(
                s.deps.contains(c),
                "delete step {s:?} does not wait for {c}"
            );
        }
    }
    // And each create of a node pool waits for the protection of every
    // node pool delete it pairs with to be read again (a guard step).
    let guards: Vec<usize> = steps
        .iter()
        .filter(|s| s.op == crate::apply::StepOp::Guard)
        .map(|s| s.id)
        .collect();
    assert!(!guards.is_empty(), "{steps:?}");
    for s in steps
        .iter()
        .filter(|s| s.op == crate::apply::StepOp::Create)
        .filter(|s| p.actions[s.action].id.kind == crate::kinds::node_pool::KIND)
    {
        assert!(
            guards.iter().any(|g| s.deps.contains(g)),
            "create step {s:?} waits for no guard"
        );
    }

    // A different shape is not a rename.
    let (mut f2, inv2) = renamed("gamma", "alpha", "tpu-v6e-slice", "4x4", false);
    let s = f2.slices.get_mut("gamma").unwrap();
    s.spec.topology = "2x4".into();
    s.shape = catalog::resolve("tpu-v6e-slice", "2x4", None).unwrap();
    let p2 = plan(&f2, &inv2, &PlanOptions::default()).unwrap();
    assert!(p2.renames.is_empty(), "{:?}", p2.renames);
}

/// Issue 24 item 7: source B's fleet on the same cluster and ownerId as the
/// test fleet (source A), with its own Target `team-b`.
fn fleet_b(slices: Vec<Slice>) -> Fleet {
    let t = Target {
        name: "team-b".into(),
        ..target()
    };
    Fleet {
        targets: BTreeMap::from([("team-b".to_string(), t)]),
        slices: slices
            .into_iter()
            .map(|mut s| {
                s.spec.target = "team-b".into();
                (s.name.clone(), s)
            })
            .collect(),
        files: 1,
        foreign: BTreeMap::new(),
        shard: None,
    }
}

/// Both sources' slices, converged.
fn two_sources(a: &Fleet, b: &Fleet) -> TestInv {
    let mut inv = converged(a);
    inv.node_pools.extend(converged(b).node_pools);
    inv
}

/// Issue 24 item 7: two spec sources apply one ownerId on one cluster.
/// Neither prunes the other's slices: each pool carries the Target that
/// wrote it, and a pool of a Target these specs do not declare is refused
/// (`other_source`), in a destroy too; the override deletes it in an apply.
#[test]
fn two_sources_with_one_owner_id_do_not_prune_each_other() {
    let a = fleet(vec![v6e("mine", 1)]);
    let b = fleet_b(vec![v6e("theirs", 2)]);
    let inv = two_sources(&a, &b);
    let labels = &inv
        .node_pools
        .last()
        .unwrap()
        .config
        .as_ref()
        .unwrap()
        .labels;
    assert_eq!(
        labels.get(ownership::TARGET).map(String::as_str),
        Some("team-b")
    );
    for (f, mine) in [(&a, "mine"), (&b, "theirs")] {
        let p = plan(f, &inv, &PlanOptions::default()).unwrap();
        assert!(!p.summary.has_changes(), "{mine}: {:?}", kinds(&p));
        assert!(!p.refused.is_empty(), "{mine}");
        for r in &p.refused {
            assert_eq!(r.code, "other_source", "{r:?}");
            assert_ne!(r.slice, mine, "{r:?}");
            assert!(r.message.contains("previousNames"), "{}", r.message);
            assert!(r.message.contains("its own ownerId"), "{}", r.message);
        }
    }
    let p = plan(&a, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(p.refused.len(), 2, "{:?}", p.refused);
    assert!(
        p.refused[0].message.contains("Target \"team-b\""),
        "{}",
        p.refused[0].message
    );
    // A destroy of A removes A's slices only.
    let d = plan_destroy(&a, &inv, 10).unwrap();
    let gone: Vec<String> = d.actions.iter().map(|a| a.id.name.clone()).collect();
    assert_eq!(gone, vec!["mine-0"], "{:?}", kinds(&d));
    assert_eq!(d.refused.len(), 2, "{:?}", d.refused);
    assert!(d.refused.iter().all(|r| r.code == "other_source"));
    // The override deletes them in an apply (a Target removed together
    // with its Slices looks the same).
    let opts = PlanOptions {
        allow_empty_source: true,
        ..PlanOptions::default()
    };
    let p = plan(&a, &inv, &opts).unwrap();
    assert_eq!(p.summary.delete, 2, "{:?}", kinds(&p));
    assert!(p.refused.is_empty(), "{:?}", p.refused);
}

/// A slice of the same name in both sources is refused, not fought over:
/// A's different shape would otherwise replace B's slice on every apply.
#[test]
fn a_slice_another_source_wrote_is_neither_replaced_nor_relabelled() {
    let b = fleet_b(vec![v6e("shared", 1)]);
    let inv = converged(&b);
    let mut s = v6e("shared", 1);
    s.spec.node_labels.insert("team".into(), "other".into());
    let a = fleet(vec![s]);
    let p = plan(&a, &inv, &PlanOptions::default()).unwrap();
    assert!(!p.summary.has_changes(), "{:?}", kinds(&p));
    assert_eq!(p.refused.len(), 1, "{:?}", p.refused);
    assert_eq!(p.refused[0].code, "other_source");
    assert_eq!(p.refused[0].slice, "shared");
}

/// The hand-over: a Target that lists `team-b` in `previousNames` takes its
/// slices over. A slice in the specs is relabelled in place (nothing is
/// deleted); one that is not is pruned as usual.
#[test]
fn previous_names_on_a_target_hands_another_sources_slices_over() {
    let b = fleet_b(vec![v6e("kept", 1), v6e("gone", 1)]);
    let inv = converged(&b);
    let mut a = fleet(vec![v6e("kept", 1)]);
    if let Some(t) = a.targets.get_mut("train") {
        t.spec.previous_names = vec!["team-b".into()];
    }
    let p = plan(&a, &inv, &PlanOptions::default()).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    assert_eq!(
        kinds(&p),
        vec![
            ("slice.gone[0].node_pool".to_string(), ActionKind::Delete),
            ("slice.kept[0].node_pool".to_string(), ActionKind::Update),
        ]
    );
    let relabel = p.actions.iter().find(|a| a.owner.slice == "kept").unwrap();
    assert_eq!(relabel.changes.len(), 1, "{:?}", relabel.changes);
    assert!(
        relabel.changes[0].path.contains("slicectl.dev/target"),
        "{:?}",
        relabel.changes
    );
    // Relabelled, the plan is empty.
    let p = plan(&a, &converged(&a), &PlanOptions::default()).unwrap();
    assert!(!p.summary.has_changes(), "{:?}", kinds(&p));
}

/// A pool made before the Target stamp existed is ours as it always was:
/// not relabelled for the stamp alone, pruned as before.
#[test]
fn a_pool_without_a_target_stamp_is_neither_relabelled_nor_refused() {
    let a = fleet(vec![v6e("old", 1), v6e("kept", 1)]);
    let mut inv = converged(&a);
    for np in &mut inv.node_pools {
        if let Some(c) = np.config.as_mut() {
            c.labels.remove(ownership::TARGET);
        }
    }
    let p = plan(&a, &inv, &PlanOptions::default()).unwrap();
    assert!(!p.summary.has_changes(), "{:?}", kinds(&p));
    let p = plan(&fleet(vec![v6e("kept", 1)]), &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.old[0].node_pool".to_string(), ActionKind::Delete)]
    );
    assert!(p.refused.is_empty(), "{:?}", p.refused);
}

/// A protected slice scaled down: the replica past `replicas` is refused,
/// and the advice works as written: with `replicas` kept and the
/// protection off, one apply lifts the stamp on every replica; then the
/// scale-down deletes.
#[test]
fn scaling_down_a_protected_slice_gives_advice_that_works() {
    let protect = |replicas: u32, on: bool| {
        let mut s = v6e("keep", replicas);
        s.spec.lifecycle.prevent_destroy = on;
        fleet(vec![s])
    };
    let inv = converged(&protect(2, true));
    let p = plan(&protect(1, true), &inv, &PlanOptions::default()).unwrap();
    assert_eq!(p.refused.len(), 1, "{:?}", p.refused);
    let msg = &p.refused[0].message;
    assert!(
        msg.contains("keep slice keep's `replicas` high enough"),
        "{msg}"
    );
    // Step one of the advice: replicas kept, protection off → lifted in place.
    let p = plan(&protect(2, false), &inv, &PlanOptions::default()).unwrap();
    assert_eq!(p.summary.update, 2, "{:?}", kinds(&p));
    let lifted = converged(&protect(2, false));
    // Step two: the scale-down deletes.
    let p = plan(&protect(1, false), &lifted, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.keep[1].node_pool".to_string(), ActionKind::Delete)]
    );
    assert!(p.refused.is_empty(), "{:?}", p.refused);
}

/// Issue 17 item 1: the standard fleet with Target `train-c` (slice
/// `iron`) moved to cluster `gone`, whose listing failed (deleted).
fn with_gone_cluster(mut f: Fleet) -> (Fleet, Scope, Unseen) {
    let gone = ClusterRef {
        name: "gone".into(),
        ..cluster()
    };
    if let Some(g) = f
        .targets
        .get_mut("train-c")
        .and_then(|t| t.spec.gke.as_mut())
    {
        g.name = "gone".into();
    }
    let why = Unseen {
        code: "target_not_found".into(),
        cause: "container.projects.locations.clusters.nodePools.list: HTTP 404 NOT_FOUND: Not found: projects/example-project/locations/us-central1/clusters/gone.".into(),
    };
    (f, Scope::Cluster(gone), why)
}

fn unobserving(inv: &TestInv, scope: &Scope, why: &Unseen) -> Inventory {
    let mut inv = inv.inventory();
    inv.unobserved.insert(scope.clone(), why.clone());
    inv
}

#[test]
fn an_unobserved_target_gets_no_action_and_the_others_plan_as_usual() {
    let (f, scope, why) = with_gone_cluster(standard_fleet());
    let inv = unobserving(&TestInv::default(), &scope, &why);
    let p = super::plan(&f, &inv, &all_kinds(), &PlanOptions::default()).unwrap();
    // llm (2 replicas) and tiny are created; iron gets nothing, not even
    // its workload policy in the region that was observed.
    assert!(
        p.actions.iter().all(|a| a.owner.slice != "iron"),
        "{:?}",
        kinds(&p)
    );
    assert!(
        p.actions.iter().any(|a| a.owner.slice == "llm")
            && p.actions.iter().any(|a| a.owner.slice == "tiny"),
        "{:?}",
        kinds(&p)
    );
    assert_eq!(p.unobserved.len(), 1, "{:?}", p.unobserved);
    let u = &p.unobserved[0];
    assert_eq!(
        (u.target.as_str(), &u.scope, u.why.code.as_str()),
        ("train-c", &scope, "target_not_found")
    );
    assert_eq!(u.slices, vec!["iron".to_string()]);
    assert_eq!(
        p.unobserved_slice("iron").map(|u| u.target.as_str()),
        Some("train-c")
    );
    assert!(p.unobserved_slice("llm").is_none());
    assert!(p.left_unobserved());
    assert_eq!(p.summary.unobserved, 1);
    // Human: the Target, its code, the cause once, and the slices.
    let text = human::render(&p, false);
    assert!(text.contains("Not observed"), "{text}");
    assert!(text.contains("target train-c"), "{text}");
    assert!(text.contains("[target_not_found]"), "{text}");
    assert_eq!(text.matches("clusters/gone.").count(), 1, "{text}");
    assert!(text.contains("slices not observed: iron"), "{text}");
    assert!(text.contains("1 slice(s) not observed."), "{text}");
    // JSON: published, stable.
    let json = p.to_json();
    assert_eq!(json["unobserved"][0]["target"], "train-c", "{json}");
    assert_eq!(json["unobserved"][0]["code"], "target_not_found", "{json}");
    assert_eq!(json["unobserved"][0]["slices"][0], "iron", "{json}");
    assert_eq!(json["summary"]["unobserved"], 1, "{json}");
}

#[test]
fn nothing_is_pruned_from_what_was_not_seen() {
    // Converged, then: iron's Target can no longer be observed, and llm and
    // iron2 (a tpu7x slice of Target train-a) are removed from the specs.
    let mut before = standard_fleet();
    let mut iron2 = slice("iron2", "tpu7x", "2x2x2", 1, CapacityType::OnDemand);
    iron2.spec.target = "train-a".into();
    before.slices.insert("iron2".into(), iron2);
    let live = converged(&before);
    let (mut f, scope, why) = with_gone_cluster(before);
    f.slices.remove("llm");
    f.slices.remove("iron2");
    let inv = unobserving(&live, &scope, &why);
    let p = super::plan(&f, &inv, &all_kinds(), &PlanOptions::default()).unwrap();
    // iron's live pool (in cluster train, which was observed) is not
    // deleted as moved, and its policy (in the shared region) is kept.
    assert!(
        p.actions.iter().all(|a| a.owner.slice != "iron"),
        "{:?}",
        kinds(&p)
    );
    // llm's pools, in a cluster no unobserved Target needs, are deleted.
    let llm: Vec<(String, ActionKind)> = kinds(&p)
        .into_iter()
        .filter(|(a, _)| a.starts_with("slice.llm"))
        .collect();
    assert_eq!(
        llm,
        vec![
            ("slice.llm[0].node_pool".to_string(), ActionKind::Delete),
            ("slice.llm[1].node_pool".to_string(), ActionKind::Delete),
        ],
        "llm's pools go (v5p pools carry their placement: no policy of their own)"
    );
    // iron2's pool names its (observed) Target and goes; so does its
    // workload policy, in the region the unobserved Target shares under the
    // same owner id: it carries its Target's stamp (`target=train-a`), so
    // it cannot be the unobserved Target's. (The executor deletes it after
    // the pool: deletes run in reverse dependency order.)
    let iron2: BTreeSet<(String, ActionKind)> = kinds(&p)
        .into_iter()
        .filter(|(a, _)| a.starts_with("slice.iron2"))
        .collect();
    assert_eq!(
        iron2,
        [
            (
                "slice.iron2[0].workload_policy".to_string(),
                ActionKind::Delete
            ),
            ("slice.iron2[0].node_pool".to_string(), ActionKind::Delete),
        ]
        .into()
    );
    // What was seen and left alone is counted on the Target: iron's pool
    // and workload policy.
    assert_eq!(p.unobserved[0].untouched, 2, "{:?}", p.unobserved);
    // The destroy cap counts what was observed only: 4 deletes fit a cap of 4.
    let capped = super::plan(
        &f,
        &inv,
        &all_kinds(),
        &PlanOptions {
            max_destroy: 4,
            ..PlanOptions::default()
        },
    );
    assert!(capped.is_ok(), "{capped:?}");
}

#[test]
fn destroy_leaves_an_unobserved_targets_resources_alone() {
    let before = standard_fleet();
    let live = converged(&before);
    let (f, scope, why) = with_gone_cluster(before);
    let inv = unobserving(&live, &scope, &why);
    let p = super::plan_destroy(&f, &inv, &all_kinds(), 100).unwrap();
    assert!(
        p.actions.iter().all(|a| a.owner.slice != "iron"),
        "{:?}",
        kinds(&p)
    );
    assert!(
        p.actions.iter().any(|a| a.owner.slice == "llm"),
        "{:?}",
        kinds(&p)
    );
    assert_eq!(p.unobserved.len(), 1);
}

#[test]
fn the_empty_source_guard_still_holds_with_an_unobserved_target() {
    let before = standard_fleet();
    let live = converged(&before);
    let (mut f, scope, why) = with_gone_cluster(before);
    f.slices.clear();
    let inv = unobserving(&live, &scope, &why);
    let e = super::plan(&f, &inv, &all_kinds(), &PlanOptions::default()).unwrap_err();
    assert!(matches!(e, PlanError::EmptySource { .. }), "{e:?}");
}

#[test]
fn what_a_slice_moved_away_from_an_unobserved_targets_scope_is_left() {
    // iron moves to an observed Target in another region and cluster,
    // while train-c (whose region iron's policy is in) cannot be observed.
    let before = standard_fleet();
    let live = converged(&before);
    let (mut f, scope, why) = with_gone_cluster(before);
    let mut east = target_in("east", "us-east5-a");
    if let Some(g) = east.spec.gke.as_mut() {
        g.location = "us-east5".into();
        g.name = "east".into();
    }
    f.targets.insert("east".into(), east);
    if let Some(s) = f.slices.get_mut("iron") {
        s.spec.target = "east".into();
    }
    let inv = unobserving(&live, &scope, &why);
    let p = super::plan(&f, &inv, &all_kinds(), &PlanOptions::default()).unwrap();
    let iron: Vec<(String, ActionKind, String)> = p
        .actions
        .iter()
        .filter(|a| a.owner.slice == "iron")
        .map(|a| (a.address(), a.action, a.id.scope.to_string()))
        .collect();
    // Created in east; its old policy, in the region the unobserved Target
    // needs, is not deleted (it names no Target: it may be train-c's).
    assert!(
        iron.iter()
            .all(|(_, a, s)| *a != ActionKind::Delete || !s.contains("regions/us-central1")),
        "{iron:?}"
    );
    assert!(
        iron.iter()
            .any(|(_, a, s)| *a == ActionKind::Create && s.contains("us-east5")),
        "{iron:?}"
    );
    assert!(p.unobserved[0].untouched >= 1, "{:?}", p.unobserved);
}

#[test]
fn a_protected_slice_is_not_created_while_a_scope_it_may_live_in_is_unread() {
    // The same move as above, but iron has `preventDestroy` and its old
    // cluster is the one that could not be read: a second copy in east
    // could never be pruned, so its create waits for every scope to read
    // (campaign seed 0xab6df2972a0f30d6, N2). llm and tiny plan as usual.
    let mut before = standard_fleet();
    if let Some(s) = before.slices.get_mut("iron") {
        s.spec.lifecycle.prevent_destroy = true;
    }
    let (mut f, scope, why) = with_gone_cluster(before);
    let mut east = target_in("east", "us-east5-a");
    if let Some(g) = east.spec.gke.as_mut() {
        g.location = "us-east5".into();
        g.name = "east".into();
    }
    f.targets.insert("east".into(), east);
    if let Some(s) = f.slices.get_mut("iron") {
        s.spec.target = "east".into();
    }
    let inv = unobserving(&TestInv::default(), &scope, &why);
    let p = super::plan(&f, &inv, &all_kinds(), &PlanOptions::default()).unwrap();
    assert!(
        p.actions
            .iter()
            .all(|a| a.owner.slice != "iron" || a.action != ActionKind::Create),
        "{:?}",
        kinds(&p)
    );
    let iron: Vec<(&str, &str)> = p
        .refused
        .iter()
        .filter(|r| r.slice == "iron")
        .map(|r| (r.name.as_str(), r.code.as_str()))
        .collect();
    assert!(
        iron.iter().any(|(_, c)| *c == "unread_scope"),
        "{:?}",
        p.refused
    );
    let r = p.refused.iter().find(|r| r.code == "unread_scope").unwrap();
    assert!(r.message.contains("clusters/gone"), "{}", r.message);
    assert!(
        p.actions.iter().any(|a| a.owner.slice == "llm")
            && p.actions.iter().any(|a| a.owner.slice == "tiny"),
        "{:?}",
        kinds(&p)
    );
    // A Kubernetes API left unread (deferred, as under --sim) holds no copy
    // of a node pool: the create goes on.
    let mut kube_unread = TestInv::default().inventory();
    kube_unread.deferred.insert(
        Scope::Kube(crate::resource::KubeRef::gke(&cluster())),
        "not reached".into(),
    );
    let p = super::plan(&f, &kube_unread, &all_kinds(), &PlanOptions::default()).unwrap();
    assert!(
        p.actions
            .iter()
            .any(|a| a.owner.slice == "iron" && a.action == ActionKind::Create),
        "{:?} {:?}",
        kinds(&p),
        p.refused
    );
    // Once every scope reads, it is created.
    let p = super::plan(
        &f,
        &TestInv::default().inventory(),
        &all_kinds(),
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(
        p.actions
            .iter()
            .any(|a| a.owner.slice == "iron" && a.action == ActionKind::Create),
        "{:?}",
        kinds(&p)
    );
    assert!(p.refused.is_empty(), "{:?}", p.refused);
}

/// Changes that respect running workloads: the planner's decisions from the
/// workload view, one per branch of the disruption policy.
mod respecting_workloads {
    use super::*;
    use crate::plan::workload::{BoundPod, ClusterWorkloads, DisruptHow, HostNode, Workloads};
    use crate::resource::KubeRef;
    use crate::spec::model::{Disruption, DisruptionWindow, WhenBusy};

    /// Thursday 2026-11-26 05:00 UTC.
    const THURSDAY: &str = "2026-11-26T05:00:00Z";

    fn pool_name(f: &Fleet, slice: &str, replica: u32) -> String {
        render_fleet(f, &all_kinds())
            .into_iter()
            .find(|d| {
                d.id.kind == node_pool::KIND && d.owner.slice == slice && d.owner.replica == replica
            })
            .map(|d| d.id.name)
            .unwrap()
    }

    fn pod(name: &str, do_not_disrupt: bool) -> BoundPod {
        BoundPod {
            namespace: "ml".into(),
            name: name.into(),
            owner: Some("jobset ml/train".into()),
            do_not_disrupt,
        }
    }

    /// The inventory of `inv`, with one Node per named pool carrying `pods`
    /// (a pool with no pods is idle), seen at `at`.
    fn with_pods(inv: &TestInv, pools: &[(&str, Vec<BoundPod>)], at: &str) -> Inventory {
        let mut i = inv.inventory();
        let nodes = pools
            .iter()
            .map(|(pool, pods)| HostNode {
                name: format!("{pool}-node-0"),
                labels: [(
                    crate::plan::workload::GKE_NODEPOOL.to_string(),
                    pool.to_string(),
                )]
                .into(),
                pods: pods.clone(),
                ..HostNode::default()
            })
            .collect();
        i.workloads = Workloads {
            observed_at: Some(at.parse().unwrap()),
            clusters: [(KubeRef::gke(&cluster()), ClusterWorkloads::Seen(nodes))].into(),
            simulated: false,
        };
        i
    }

    fn with_policy(mut f: Fleet, slice: &str, d: Disruption) -> Fleet {
        if let Some(s) = f.slices.get_mut(slice) {
            s.spec.disruption = Some(d);
        }
        f
    }

    fn policy(when: WhenBusy) -> Disruption {
        Disruption {
            when_busy: Some(when),
            ..Disruption::default()
        }
    }

    /// llm (2 replicas) re-shaped: both pools are replaced.
    fn reshaped(f: &Fleet) -> Fleet {
        let mut f2 = f.clone();
        let mut s = slice(
            "llm",
            "tpu-v5p-slice",
            "2x2x4",
            f.slices["llm"].spec.replicas,
            CapacityType::Spot,
        );
        s.spec.disruption = f.slices["llm"].spec.disruption.clone();
        f2.slices.insert("llm".into(), s);
        f2
    }

    fn run(f: &Fleet, inv: &Inventory, opts: &PlanOptions) -> Plan {
        super::super::plan(f, inv, &all_kinds(), opts).unwrap()
    }

    #[test]
    fn wait_holds_the_busy_replica_and_replaces_the_idle_one() {
        let f = standard_fleet();
        let inv = converged(&f);
        let busy = pool_name(&f, "llm", 0);
        let live = with_pods(&inv, &[(&busy, vec![pod("train-0", false)])], THURSDAY);
        let p = run(&reshaped(&f), &live, &PlanOptions::default());
        assert_eq!(
            kinds(&p),
            vec![("slice.llm[1].node_pool".to_string(), ActionKind::Replace)]
        );
        assert_eq!(p.held.len(), 1);
        let h = &p.held[0];
        assert_eq!(
            (h.address.as_str(), h.code),
            ("slice.llm[0].node_pool", "busy")
        );
        assert!(
            h.message.contains("ml/train-0 (jobset ml/train)"),
            "{}",
            h.message
        );
        assert!(h.message.contains("whenBusy: wait"), "{}", h.message);
        let json = p.to_json();
        assert_eq!(json["held"][0]["code"], "busy");
        assert_eq!(json["held"][0]["pods"][0]["name"], "train-0");
        assert_eq!(json["summary"]["held"], 1);
        let text = human::render(&p, false);
        assert!(text.contains("Held (busy slice replicas"), "{text}");
        assert!(text.contains("1 held (busy)"), "{text}");
        // Idle again: the replacement runs by itself, looking at the Nodes
        // once more right before the pool goes.
        let idle = with_pods(&inv, &[(&busy, vec![])], THURSDAY);
        let p = run(&reshaped(&f), &idle, &PlanOptions::default());
        assert_eq!(p.actions.len(), 2);
        assert!(p.held.is_empty());
        assert_eq!(
            p.actions[0].recheck,
            Some((KubeRef::gke(&cluster()), vec![format!("{busy}-node-0")]))
        );
        assert!(p.actions[0].disruption.is_none());
    }

    #[test]
    fn drain_plans_a_drain_of_the_busy_replicas_nodes() {
        let f = with_policy(standard_fleet(), "llm", policy(WhenBusy::Drain));
        let inv = converged(&f);
        let busy = pool_name(&f, "llm", 0);
        let live = with_pods(&inv, &[(&busy, vec![pod("train-0", false)])], THURSDAY);
        let p = run(&reshaped(&f), &live, &PlanOptions::default());
        assert!(p.held.is_empty());
        let a = &p.actions[0];
        let d = a.disruption.as_ref().expect("a drain");
        assert_eq!(d.how, DisruptHow::Drain);
        assert_eq!(d.nodes, vec![format!("{busy}-node-0")]);
        assert_eq!(d.kube, Some(KubeRef::gke(&cluster())));
        assert_eq!(d.drain_timeout_secs, 1800);
        assert!(p.actions[1].disruption.is_none(), "replica 1 is idle");
        assert_eq!(p.to_json()["actions"][0]["disruption"]["how"], "drain");
        let steps = crate::apply::steps::expand(&p, |_| crate::apply::steps::KindInfo::default());
        assert_eq!(steps[0].op, crate::apply::StepOp::Drain);
        assert_eq!(steps[1].op, crate::apply::StepOp::Delete);
        assert_eq!(steps[1].deps, vec![0]);
    }

    /// A drain started (its Node cordoned by slicectl and labelled), then
    /// `whenBusy` went back to `wait`: the step is held, and the Node is
    /// released so the running job can use it while it waits. While the
    /// drain goes ahead, the cordon stays.
    #[test]
    fn a_drain_whose_step_is_now_held_releases_its_nodes() {
        let f = with_policy(standard_fleet(), "llm", policy(WhenBusy::Drain));
        let inv = converged(&f);
        let busy = pool_name(&f, "llm", 0);
        let mut live = with_pods(&inv, &[(&busy, vec![pod("train-0", false)])], THURSDAY);
        for (_, c) in live.workloads.clusters.iter_mut() {
            if let ClusterWorkloads::Seen(nodes) = c {
                for n in nodes.iter_mut() {
                    n.cordoned = true;
                    n.draining_since = Some("2026-11-26T04:00:00Z".parse().unwrap());
                    n.labels.insert(
                        crate::spec::disruption::CORDONED_BY_SLICECTL.into(),
                        "true".into(),
                    );
                }
            }
        }
        let p = run(&reshaped(&f), &live, &PlanOptions::default());
        assert!(p.released.is_empty(), "the drain goes on: {:?}", p.released);
        let waiting = with_policy(reshaped(&f), "llm", policy(WhenBusy::Wait));
        let p = run(&waiting, &live, &PlanOptions::default());
        assert_eq!(p.held.len(), 1);
        assert_eq!(p.released.len(), 1, "{:?}", p.released);
        assert_eq!(p.released[0].nodes, vec![format!("{busy}-node-0")]);
        assert!(p.released[0].cordon_kept.is_empty());
        let text = human::render(&p, false);
        assert!(text.contains("they are uncordoned."), "{text}");
    }

    #[test]
    fn replace_goes_ahead_and_says_so() {
        let f = with_policy(standard_fleet(), "llm", policy(WhenBusy::Replace));
        let inv = converged(&f);
        let busy = pool_name(&f, "llm", 0);
        let live = with_pods(&inv, &[(&busy, vec![pod("train-0", false)])], THURSDAY);
        let p = run(&reshaped(&f), &live, &PlanOptions::default());
        assert!(p.held.is_empty());
        let d = p.actions[0].disruption.as_ref().expect("consent noted");
        assert_eq!(d.how, DisruptHow::Replace);
        let text = human::render(&p, false);
        assert!(
            text.contains("kills the running pods ml/train-0 (jobset ml/train) (whenBusy: replace"),
            "{text}"
        );
    }

    #[test]
    fn do_not_disrupt_blocks_even_a_drain_and_a_replace() {
        for when in [WhenBusy::Drain, WhenBusy::Replace] {
            let f = with_policy(standard_fleet(), "llm", policy(when));
            let inv = converged(&f);
            let busy = pool_name(&f, "llm", 0);
            let live = with_pods(
                &inv,
                &[(&busy, vec![pod("train-0", true), pod("train-1", false)])],
                THURSDAY,
            );
            let p = run(&reshaped(&f), &live, &PlanOptions::default());
            assert_eq!(p.held.len(), 1, "{when:?}");
            assert_eq!(p.held[0].code, "do_not_disrupt");
            assert!(
                p.held[0].message.contains("ml/train-0"),
                "{}",
                p.held[0].message
            );
        }
    }

    #[test]
    fn windows_are_read_in_their_time_zone() {
        let d = Disruption {
            when_busy: Some(WhenBusy::Drain),
            windows: Some(vec![DisruptionWindow {
                schedule: "0 2 * * SAT".into(),
                time_zone: Some("Europe/Berlin".into()),
                duration: "6h".into(),
            }]),
            ..Disruption::default()
        };
        let f = with_policy(standard_fleet(), "llm", d);
        let inv = converged(&f);
        let busy = pool_name(&f, "llm", 0);
        let pods = vec![pod("train-0", false)];
        // Thursday: outside; the next window is Saturday 02:00 Berlin (01:00 UTC).
        let p = run(
            &reshaped(&f),
            &with_pods(&inv, &[(&busy, pods.clone())], THURSDAY),
            &PlanOptions::default(),
        );
        assert_eq!(p.held.len(), 1);
        assert_eq!(p.held[0].code, "outside_window");
        assert!(
            p.held[0].message.contains("2026-11-28T01:00:00Z"),
            "{}",
            p.held[0].message
        );
        // Saturday 01:30 UTC is 02:30 in Berlin: inside (in UTC it would not be).
        let p = run(
            &reshaped(&f),
            &with_pods(&inv, &[(&busy, pods.clone())], "2026-11-28T01:30:00Z"),
            &PlanOptions::default(),
        );
        assert!(p.held.is_empty(), "{:?}", p.held);
        assert_eq!(
            p.actions[0].disruption.as_ref().map(|d| d.how),
            Some(DisruptHow::Drain)
        );
        // An idle replica is replaced outside the window too.
        let p = run(
            &reshaped(&f),
            &with_pods(&inv, &[(&busy, vec![])], THURSDAY),
            &PlanOptions::default(),
        );
        assert!(p.held.is_empty());
        assert_eq!(p.actions.len(), 2);
    }

    #[test]
    fn a_budget_of_one_disrupts_one_busy_replica_at_a_time() {
        let mut f = standard_fleet();
        if let Some(s) = f.slices.get_mut("llm") {
            s.spec.replicas = 3;
            s.spec.disruption = Some(policy(WhenBusy::Drain));
        }
        if let Some(t) = f.targets.get_mut("train-a") {
            t.spec.disruption = Some(Disruption {
                budget: Some(1),
                ..Disruption::default()
            });
        }
        let inv = converged(&f);
        let pools: Vec<String> = (0..3).map(|r| pool_name(&f, "llm", r)).collect();
        let busy: Vec<(&str, Vec<BoundPod>)> = pools
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_str(), vec![pod(&format!("w-{i}"), false)]))
            .collect();
        let p = run(
            &reshaped(&f),
            &with_pods(&inv, &busy, THURSDAY),
            &PlanOptions::default(),
        );
        assert_eq!(
            kinds(&p),
            vec![("slice.llm[0].node_pool".to_string(), ActionKind::Replace)]
        );
        assert_eq!(p.held.len(), 2);
        assert!(p.held.iter().all(|h| h.code == "budget"), "{:?}", p.held);
        assert!(
            p.held[0].message.contains("llm[0]"),
            "{}",
            p.held[0].message
        );
        // A restarted run sees replica 1 draining (the label on its Node):
        // it keeps the budget, the others wait.
        let mut live = with_pods(&inv, &busy, THURSDAY);
        if let Some(ClusterWorkloads::Seen(nodes)) = live.workloads.clusters.values_mut().next() {
            nodes[1].draining_since = Some("2026-11-26T04:50:00Z".parse().unwrap());
            nodes[1]
                .labels
                .insert(ownership::SLICE.into(), "llm".into());
            nodes[1]
                .labels
                .insert(ownership::REPLICA.into(), "1".into());
            nodes[1].cordoned = true;
        }
        let p = run(&reshaped(&f), &live, &PlanOptions::default());
        assert_eq!(
            kinds(&p),
            vec![("slice.llm[1].node_pool".to_string(), ActionKind::Replace)]
        );
        let d = p.actions[0].disruption.as_ref().unwrap();
        assert_eq!(
            d.draining_since.map(|t| t.to_string()).as_deref(),
            Some("2026-11-26T04:50:00Z")
        );
        assert_eq!(p.held.len(), 2);
    }

    #[test]
    fn a_held_slice_replaced_in_spec_again_is_planned_from_the_new_spec() {
        let f = standard_fleet();
        let inv = converged(&f);
        let busy = pool_name(&f, "llm", 0);
        let live = with_pods(&inv, &[(&busy, vec![pod("train-0", false)])], THURSDAY);
        let first = run(&reshaped(&f), &live, &PlanOptions::default());
        assert_eq!(first.held.len(), 1);
        // Changed again, to another shape: still one held replacement (to the
        // newest spec), nothing remembered from the first.
        let mut again = f.clone();
        again.slices.insert(
            "llm".into(),
            slice("llm", "tpu-v5p-slice", "2x4x4", 2, CapacityType::Spot),
        );
        let p = run(&again, &live, &PlanOptions::default());
        assert_eq!(p.held.len(), 1);
        assert!(p.held[0].reason.contains("2x4x4"), "{}", p.held[0].reason);
        // Changed back to what is live: nothing to hold, nothing to do.
        let p = run(&f, &live, &PlanOptions::default());
        assert!(p.held.is_empty() && p.actions.is_empty(), "{:?}", kinds(&p));
    }

    #[test]
    fn a_pool_in_error_with_pods_still_bound_is_busy() {
        let f = fleet(vec![slice(
            "tiny",
            "tpu-v6e-slice",
            "1x1",
            1,
            CapacityType::OnDemand,
        )]);
        let mut inv = converged(&f);
        inv.node_pools[0].status = Some("ERROR".into());
        let busy = pool_name(&f, "tiny", 0);
        let live = with_pods(&inv, &[(&busy, vec![pod("serve-0", false)])], THURSDAY);
        let p = run(&f, &live, &PlanOptions::default());
        assert!(p.actions.is_empty(), "{:?}", kinds(&p));
        assert_eq!(p.held.len(), 1);
        assert_eq!(p.held[0].code, "busy");
        assert!(p.held[0].reason.contains("ERROR"), "{}", p.held[0].reason);
    }

    #[test]
    fn an_unreadable_cluster_holds_destructive_steps_and_destroy_disrupt_overrides() {
        let f = standard_fleet();
        let inv = converged(&f);
        let mut live = with_pods(&inv, &[], THURSDAY);
        live.workloads.clusters.insert(
            KubeRef::gke(&cluster()),
            ClusterWorkloads::Unreadable("403 forbidden: list pods".into()),
        );
        let p = run(&reshaped(&f), &live, &PlanOptions::default());
        assert!(p.actions.is_empty(), "{:?}", kinds(&p));
        assert_eq!(p.held.len(), 2);
        assert!(p.held.iter().all(|h| h.code == "busy_unknown"));
        assert!(
            p.held[0].message.contains("403 forbidden"),
            "{}",
            p.held[0].message
        );
        // A label change is not destructive: it goes ahead.
        let mut relabel = f.clone();
        if let Some(s) = relabel.slices.get_mut("llm") {
            s.spec.node_labels.insert("tier".into(), "gold".into());
        }
        let p = run(&relabel, &live, &PlanOptions::default());
        assert!(p.held.is_empty());
        assert!(p.actions.iter().all(|a| a.action == ActionKind::Update));
        // destroy holds too, and --disrupt overrides, named in the plan.
        let p = super::super::plan_destroy_with(
            &f,
            &live,
            &all_kinds(),
            &PlanOptions {
                max_destroy: 100,
                ..PlanOptions::default()
            },
        )
        .unwrap();
        assert!(
            p.held
                .iter()
                .any(|h| h.message.contains("destroy --disrupt")),
            "{:?}",
            p.held
        );
        assert!(!p.actions.iter().any(|a| a.id.kind == node_pool::KIND));
        let p = super::super::plan_destroy_with(
            &f,
            &live,
            &all_kinds(),
            &PlanOptions {
                max_destroy: 100,
                disrupt: true,
                ..PlanOptions::default()
            },
        )
        .unwrap();
        assert!(p.held.is_empty());
        assert!(
            p.actions
                .iter()
                .filter(|a| a.id.kind == node_pool::KIND)
                .count()
                == 4
        );
    }

    #[test]
    fn destroy_holds_a_busy_replica_unless_disrupt() {
        let f = standard_fleet();
        let inv = converged(&f);
        let busy = pool_name(&f, "tiny", 0);
        let live = with_pods(&inv, &[(&busy, vec![pod("serve-0", false)])], THURSDAY);
        let opts = PlanOptions {
            max_destroy: 100,
            ..PlanOptions::default()
        };
        let p = super::super::plan_destroy_with(&f, &live, &all_kinds(), &opts).unwrap();
        assert_eq!(p.held.len(), 1);
        assert_eq!(p.held[0].address, "slice.tiny[0].node_pool");
        let p = super::super::plan_destroy_with(
            &f,
            &live,
            &all_kinds(),
            &PlanOptions {
                disrupt: true,
                ..opts
            },
        )
        .unwrap();
        assert!(p.held.is_empty());
        let a = p.actions.iter().find(|a| a.id.name == busy).unwrap();
        assert_eq!(
            a.disruption.as_ref().map(|d| d.how),
            Some(DisruptHow::Forced)
        );
        assert!(human::render(&p, false).contains("destroy --disrupt overrides the policy"));
    }
}

mod releasing_drains {
    use super::*;
    use crate::plan::workload::{ClusterWorkloads, HostNode, Workloads};
    use crate::resource::KubeRef;

    /// A Node of node pool `pool`, cordoned and labelled by a drain that
    /// started an hour before the observation.
    fn drained_node(name: &str, pool: &str) -> HostNode {
        HostNode {
            name: name.into(),
            labels: [(
                crate::plan::workload::GKE_NODEPOOL.to_string(),
                pool.to_string(),
            )]
            .into(),
            cordoned: true,
            draining_since: Some("2026-11-26T04:00:00Z".parse().unwrap()),
            pods: Vec::new(),
            ..HostNode::default()
        }
    }

    /// A drain started, then the spec went back to what is live: no step
    /// plans the drain any more, so its Nodes are uncordoned (and an idle
    /// replica whose delete is planned keeps its cordon until it goes).
    #[test]
    fn nodes_of_a_drain_no_longer_planned_are_released() {
        let f = standard_fleet();
        let inv = converged(&f);
        let pool = render_fleet(&f, &all_kinds())
            .into_iter()
            .find(|d| d.id.kind == node_pool::KIND && d.owner.slice == "tiny")
            .map(|d| d.id.name)
            .unwrap();
        let mut live = inv.inventory();
        live.workloads = Workloads {
            observed_at: Some("2026-11-26T05:00:00Z".parse().unwrap()),
            clusters: [(
                KubeRef::gke(&cluster()),
                ClusterWorkloads::Seen(vec![drained_node("tiny-node", &pool)]),
            )]
            .into(),
            simulated: false,
        };
        let p = super::super::plan(&f, &live, &all_kinds(), &PlanOptions::default()).unwrap();
        assert!(p.actions.is_empty());
        assert_eq!(p.released.len(), 1);
        assert_eq!(p.released[0].nodes, vec!["tiny-node".to_string()]);
        assert!(p.summary.has_changes(), "a release is a change");
        assert!(human::render(&p, false).contains("Released: Nodes tiny-node"));
        // Its delete planned: the cordon stays until the pool goes.
        let mut gone = f.clone();
        gone.slices.remove("tiny");
        let p = super::super::plan(&gone, &live, &all_kinds(), &PlanOptions::default()).unwrap();
        assert!(p.released.is_empty());
        assert!(
            p.actions
                .iter()
                .any(|a| a.id.name == pool && a.action == ActionKind::Delete)
        );
    }

    /// A shared cluster: another fleet (or tool) is draining a Node of a
    /// pool this fleet does not own. Its drain is its own: never released
    /// (found by `tests/e2e/e2e_scheduled.rs`, where parallel tests share
    /// one API server and one test's apply uncordoned another's drain).
    #[test]
    fn a_drain_on_someone_elses_node_is_never_released() {
        let f = standard_fleet();
        let inv = converged(&f);
        let mut live = inv.inventory();
        live.workloads = Workloads {
            observed_at: Some("2026-11-26T05:00:00Z".parse().unwrap()),
            clusters: [(
                KubeRef::gke(&cluster()),
                ClusterWorkloads::Seen(vec![
                    drained_node("theirs-node", "other-fleets-pool"),
                    drained_node("unlabelled-node", ""),
                ]),
            )]
            .into(),
            simulated: false,
        };
        let p = super::super::plan(&f, &live, &all_kinds(), &PlanOptions::default()).unwrap();
        assert!(p.released.is_empty(), "{:?}", p.released);
        assert!(!p.summary.has_changes());
    }
}

/// A workload slice of JobSet `ml/train`, as the workload source adds it.
fn workload_slice() -> Slice {
    let mut s = slice(
        "train-abcde",
        "tpu-v6e-slice",
        "2x2",
        1,
        CapacityType::OnDemand,
    );
    s.workload = Some(crate::workload::Origin {
        namespace: "ml".into(),
        jobset: "train".into(),
        uid: "uid-1".into(),
        job_key: "abcdef0123456789abcdef0123456789abcdef01".into(),
    });
    s
}

#[test]
fn a_workload_slice_is_pruned_only_by_the_workload_source() {
    use crate::plan::workload::{ClusterWorkloads, Workloads};
    use crate::workload::{DemandView, Ended, Observed, ObservedJobSet};
    let live = converged(&fleet(vec![workload_slice()]));
    assert_eq!(live.node_pools[0].name, "train-abcde");
    let opts = PlanOptions::default();
    // A git apply that does not name it (with workloads off): nothing is
    // pruned; with no git slice at all, no empty-source refusal either.
    let git = fleet(vec![slice(
        "git",
        "tpu-v6e-slice",
        "2x2",
        1,
        CapacityType::OnDemand,
    )]);
    let p = plan(&git, &live, &opts).unwrap();
    assert_eq!(
        kinds(&p),
        [("slice.git[0].node_pool".to_string(), ActionKind::Create)]
    );
    let p = plan(&fleet(vec![]), &live, &opts).unwrap();
    assert!(
        p.actions.is_empty() && p.refused.is_empty(),
        "{:?}",
        p.actions
    );
    // Workloads on and the JobSet ended an hour ago, its cluster read: the
    // workload source releases it, and the specs' emptiness does not stop
    // that (it is not a prune).
    let mut on = fleet(vec![]);
    on.targets.get_mut("train").unwrap().spec.workloads = Some(crate::spec::model::Workloads {
        enabled: true,
        grace_period: None,
        rules: vec![Default::default()],
    });
    let kube = crate::resource::KubeRef::gke(&cluster());
    let ended = jiff::Timestamp::from_second(1_000).unwrap();
    let mut inv = live.inventory();
    inv.demand.insert(
        kube.clone(),
        DemandView::Seen(Observed {
            jobsets: vec![ObservedJobSet {
                namespace: "ml".into(),
                name: "train".into(),
                uid: "uid-1".into(),
                ended: Some(Ended {
                    condition: "Completed".into(),
                    at: ended,
                }),
                ..ObservedJobSet::default()
            }],
            pending: Vec::new(),
        }),
    );
    inv.workloads = Workloads {
        observed_at: Some(jiff::Timestamp::from_second(1_000 + 3_600).unwrap()),
        clusters: BTreeMap::from([(kube.clone(), ClusterWorkloads::Seen(Vec::new()))]),
        simulated: false,
    };
    let p = super::plan(&on, &inv, &all_kinds(), &opts).unwrap();
    assert_eq!(
        kinds(&p),
        [(
            "slice.train-abcde[0].node_pool".to_string(),
            ActionKind::Delete
        )]
    );
    assert_eq!(p.actions[0].reason.code(), "workload_ended");
    assert!(
        p.actions[0]
            .reason_text()
            .contains("jobset ml/train Completed at 1970-01-01T00:16:40Z (gracePeriod 2m)"),
        "{}",
        p.actions[0].reason_text()
    );
    let shown = human::render(&p, false);
    assert!(
        shown.contains("Workload slices (asked for by pending JobSets):"),
        "{shown}"
    );
    assert!(
        shown.contains("  - train-abcde released: jobset ml/train Completed"),
        "{shown}"
    );
    let json = p.to_json();
    assert_eq!(
        json["workloads"]["released"][0]["pool"], "train-abcde",
        "{json:#}"
    );
    // The same, its cluster unread: nothing is released.
    inv.demand
        .insert(kube, DemandView::Unreadable("403 Forbidden".into()));
    let p = super::plan(&on, &inv, &all_kinds(), &opts).unwrap();
    assert!(p.actions.is_empty(), "{:?}", kinds(&p));
    assert!(p.demand.kept[0].why.starts_with("unobserved"));
}

/// Issue 21 (sharding): a replica plans only the Targets of its shards
/// (`ShardScope::cut`). The other Targets' slices share its cluster and
/// ownerId, yet nothing of theirs is deleted, replaced, relabelled or even
/// reported, with `--allow-empty-source` too, and whether or not their
/// capacity carries its Target's stamp: the cut knows the other replicas'
/// slices (`plan::elsewhere`). Every shard's cut of a converged fleet plans
/// no change at all.
#[test]
fn a_shards_cut_of_the_fleet_never_touches_the_other_shards_slices() {
    use crate::controller::shard::{ShardScope, shard_of};
    let full = standard_fleet();
    let inv = converged(&full);
    let mut unstamped = inv.clone();
    for np in &mut unstamped.node_pools {
        if let Some(c) = np.config.as_mut() {
            c.labels.remove(ownership::TARGET);
        }
    }
    // 3 shards: train, train-a and train-c each alone in one.
    let shards = 3;
    let of: BTreeMap<u32, &str> = full
        .targets
        .keys()
        .map(|t| (shard_of(t, shards), t.as_str()))
        .collect();
    assert_eq!(of.len(), 3, "one Target per shard: {of:?}");
    for allow_empty_source in [false, true] {
        let opts = PlanOptions {
            max_destroy: 100,
            allow_empty_source,
            ..Default::default()
        };
        for (k, t) in &of {
            let scope = ShardScope {
                shards,
                held: [*k].into_iter().collect(),
            };
            let (cut, others) = scope.cut(full.clone());
            assert_eq!(cut.targets.keys().collect::<Vec<_>>(), [t]);
            assert_eq!(cut.files, full.files);
            assert!(!others.is_empty() && others.iter().all(|s| !cut.slices.contains_key(s)));
            for inv in [&inv, &unstamped] {
                let p = plan(&cut, inv, &opts).unwrap();
                assert!(p.actions.is_empty(), "shard {k} ({t}): {:?}", kinds(&p));
                assert!(p.refused.is_empty(), "{:?}", p.refused);
            }
        }
    }
    // The whole fleet, unsharded, with the same inventory: nothing either;
    // and the cut with its record of the others removed would prune them
    // (what the record is for).
    let (mut cut, _) = ShardScope {
        shards,
        held: [shard_of("train", shards)].into_iter().collect(),
    }
    .cut(full.clone());
    let opts = PlanOptions {
        max_destroy: 100,
        ..Default::default()
    };
    assert!(plan(&full, &unstamped, &opts).unwrap().actions.is_empty());
    cut.shard = None;
    let p = plan(&cut, &unstamped, &opts).unwrap();
    assert!(p.summary.delete > 0, "{:?}", kinds(&p));
}

/// Issue 21 (sharding): a Target removed together with its Slices belongs
/// to no shard any more, yet each of its live resources is exactly one
/// replica's (`plan::elsewhere`): in a cluster other Targets of its ownerId
/// still name, the holder of the first of them by name; in a cluster no
/// Target names any more, the holder of the removed Target's own shard.
/// That replica alone reports them (refused, as unsharded, without
/// `--allow-empty-source`) or deletes them (with it); every other replica
/// plans nothing for them. A dependent in a scope the Targets still name
/// (a workload policy in the region) waits while its capacity is seen
/// anywhere, then is the first such Target's holder's.
#[test]
fn a_removed_targets_resources_are_exactly_one_replicas() {
    use crate::controller::shard::{ShardScope, shard_of};
    let shards = 3;
    // Each shard's plan of `removed` over `inv`: (actions, refusal codes).
    type Seen = Vec<(Vec<(String, ActionKind)>, BTreeSet<(String, String)>)>;
    let per_shard = |removed: &Fleet, inv: &Inventory, allow_empty_source: bool| -> Seen {
        let opts = PlanOptions {
            max_destroy: 100,
            allow_empty_source,
            ..Default::default()
        };
        (0..shards)
            .map(|k| {
                let (cut, _) = ShardScope {
                    shards,
                    held: [k].into_iter().collect(),
                }
                .cut(removed.clone());
                let p = super::plan(&cut, inv, &all_kinds(), &opts).unwrap();
                let mut acts = kinds(&p);
                acts.sort();
                let codes = p
                    .refused
                    .iter()
                    .map(|r| (r.address.clone(), r.code.clone()))
                    .collect();
                (acts, codes)
            })
            .collect()
    };
    let pool = "slice.iron[0].node_pool".to_string();
    let policy = "slice.iron[0].workload_policy".to_string();
    let (train, train_c) = (shard_of("train", shards), shard_of("train-c", shards));
    assert_ne!(train, train_c);
    for left_behind in [false, true] {
        let mut full = standard_fleet();
        if left_behind
            && let Some(g) = full
                .targets
                .get_mut("train-c")
                .and_then(|t| t.spec.gke.as_mut())
        {
            g.name = "serve".into();
        }
        let mut inv = converged(&full).inventory();
        if left_behind {
            for l in inv.resources.entry(node_pool::KIND).or_default() {
                if kind::body_as::<NodePool>(&l.body).is_some_and(|p| p.name.starts_with("iron")) {
                    l.scope = Scope::Cluster(ClusterRef {
                        name: "serve".into(),
                        ..cluster()
                    });
                }
            }
        }
        // train-c removed together with its slice iron (pool + policy).
        let mut removed = full.clone();
        removed.targets.remove("train-c");
        removed.slices.remove("iron");
        for allow in [false, true] {
            let seen = per_shard(&removed, &inv, allow);
            let what = format!("left behind {left_behind}, allow {allow}: {seen:?}");
            // Shared cluster: the holder of train (first by name) has the
            // pool and its policy (both stamped with train-c: another
            // source's once train-c is gone); left behind: train-c's shard
            // has the pool, and the policy waits (its pool is seen by all).
            let (owner, expect_acts, expect_refused): (u32, Vec<_>, BTreeSet<_>) =
                match (left_behind, allow) {
                    (false, true) => (
                        train,
                        vec![
                            (pool.clone(), ActionKind::Delete),
                            (policy.clone(), ActionKind::Delete),
                        ],
                        BTreeSet::new(),
                    ),
                    (false, false) => (
                        train,
                        vec![],
                        // The policy carries its Target's stamp too.
                        [
                            (pool.clone(), "other_source".to_string()),
                            (policy.clone(), "other_source".to_string()),
                        ]
                        .into(),
                    ),
                    (true, true) => (
                        train_c,
                        vec![(pool.clone(), ActionKind::Delete)],
                        BTreeSet::new(),
                    ),
                    (true, false) => (
                        train_c,
                        vec![],
                        [(pool.clone(), "target_removed".to_string())].into(),
                    ),
                };
            for (k, (acts, refused)) in seen.iter().enumerate() {
                if k == owner as usize {
                    assert_eq!((acts, refused), (&expect_acts, &expect_refused), "{what}");
                } else {
                    assert!(acts.is_empty() && refused.is_empty(), "shard {k}: {what}");
                }
            }
        }
        if left_behind {
            // The pool gone: its policy is train's holder's alone.
            inv.resources
                .entry(node_pool::KIND)
                .or_default()
                .retain(|l| {
                    !kind::body_as::<NodePool>(&l.body).is_some_and(|p| p.name.starts_with("iron"))
                });
            let seen = per_shard(&removed, &inv, true);
            for (k, (acts, refused)) in seen.iter().enumerate() {
                if k == train as usize {
                    assert_eq!(acts, &[(policy.clone(), ActionKind::Delete)], "{seen:?}");
                } else {
                    assert!(acts.is_empty() && refused.is_empty(), "shard {k}: {seen:?}");
                }
            }
        }
    }
}

/// Issue 21 (sharding): the clusters of the other shards' Targets are not
/// "left behind" (a cluster no Target names any more, whose pools an apply
/// with --allow-empty-source deletes): the cut keeps those Targets as
/// `foreign`, so their scopes are neither looked into nor pruned.
#[test]
fn the_other_shards_clusters_are_not_left_behind() {
    use crate::controller::shard::{ShardScope, shard_of};
    let mut full = standard_fleet();
    if let Some(t) = full.targets.get_mut("train-c")
        && let Some(g) = t.spec.gke.as_mut()
    {
        g.name = "serve".into();
    }
    let ks = all_kinds();
    let scope = ShardScope {
        shards: 3,
        held: [shard_of("train", 3)].into_iter().collect(),
    };
    let (cut, _) = scope.cut(full.clone());
    assert!(
        cut.foreign.contains_key("train-c"),
        "{:?}",
        cut.foreign.keys()
    );
    let serve = Owners::scopes_of(&full.targets["train-c"], &ks)
        .into_iter()
        .find(|s| matches!(s, Scope::Cluster(c) if c.name == "serve"))
        .unwrap();
    let own = Ownership {
        owner: "platform".into(),
        slice: "iron".into(),
        replica: 0,
        target: Some("train-c".into()),
        spec_hash: None,
        hash_version: None,
        prevent_destroy: false,
    };
    assert!(!Owners::of(&cut, &ks).left_behind(&serve, Some(&own)));
    // The same cut without the foreign Targets would look into it.
    let mut bare = cut.clone();
    bare.foreign.clear();
    assert!(Owners::of(&bare, &ks).left_behind(&serve, Some(&own)));
}

#[path = "preflight/tests.rs"]
mod preflight_tests;

#[path = "tests/gate.rs"]
mod gate;
