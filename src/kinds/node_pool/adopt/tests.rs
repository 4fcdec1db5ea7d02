#![cfg(test)]
//! Unit tests of adopting a node pool.

use super::*;

#[test]
fn pool_names_split_into_slice_and_replica() {
    assert_eq!(split_name("llm-0"), Some(("llm".into(), 0)));
    assert_eq!(split_name("train-np-12"), Some(("train-np".into(), 12)));
    assert_eq!(split_name("llm-01"), None);
    assert_eq!(split_name("pool"), None);
}

const TARGET: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: train}
spec: {project: proj-a1, zone: us-central1-b, ownerId: team, gke: {location: us-central1, name: c}}
";

fn live(name: &str, labels: &[(&str, &str)], extra: serde_json::Value) -> NodePool {
    let mut v = serde_json::json!({
        "name": name, "initialNodeCount": 1, "locations": ["us-central1-b"], "status": "RUNNING",
        "config": {"machineType": "ct6e-standard-4t",
            "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
            "taints": [{"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"},
                       {"key": "team", "value": "a", "effect": "NO_EXECUTE"}],
            "shieldedInstanceConfig": {"enableSecureBoot": true, "enableIntegrityMonitoring": true}},
        "management": {"autoUpgrade": false, "autoRepair": true},
        "maxPodsConstraint": {"maxPodsPerNode": "15"},
        "upgradeSettings": {"maxSurge": 1},
    });
    if let (Some(o), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
    serde_json::from_value(v).unwrap()
}

/// Adds a live resource to an inventory.
fn add(
    inv: &mut crate::plan::Inventory,
    kind: crate::kind::KindId,
    scope: &crate::kind::Scope,
    body: crate::kind::Body,
) {
    inv.resources
        .entry(kind)
        .or_default()
        .push(crate::kind::LiveResource {
            scope: scope.clone(),
            body,
        });
}

fn target() -> Target {
    let files = vec![crate::spec::SourceFile {
        path: "t.yaml".into(),
        text: TARGET.into(),
    }];
    crate::spec::load(&files).unwrap().targets["train"].clone()
}

/// The spec writer's output, pinned: a live pool becomes exactly this
/// file, which validates, and planning it against the live pool (being
/// adopted) changes nothing but ownership labels.
#[test]
fn a_live_pool_becomes_a_spec_file_whose_plan_only_stamps_ownership() {
    use crate::plan::adopt::{Proposal, Selection, keep_adoptions, propose, spec_file};
    use crate::plan::{ActionKind, Inventory, LiveResource, PlanOptions};
    let p = live(
        "gcloud-made-0",
        &[("team", "a"), ("cloud.google.com/gke-nodepool", "x")],
        serde_json::json!({}),
    );
    let t = target();
    let a = adoptable(&p, &t).unwrap();
    assert_eq!(
        (a.slice.as_str(), a.replica, a.manager.as_deref()),
        ("gcloud-made", 0, None)
    );
    let spec = a.spec.clone().unwrap();
    let scope = crate::kind::Scope::Cluster(crate::resource::ClusterRef {
        project: "proj-a1".into(),
        location: "us-central1".into(),
        name: "c".into(),
    });
    let id = crate::kind::ResourceId {
        scope: scope.clone(),
        kind: super::super::KIND,
        name: p.name.clone(),
    };
    let file = spec_file("gcloud-made", &spec, std::slice::from_ref(&id)).unwrap();
    assert_eq!(
            file,
            "# Written by `slicectl adopt` from the live node_pool gcloud-made-0 in projects/proj-a1/locations/us-central1/clusters/c.
# Review it and commit it; `slicectl plan` then shows no changes.
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata:
  name: gcloud-made
spec:
  target: train
  backend: gke
  accelerator: tpu-v6e-slice
  topology: 2x2
  machineType: ct6e-standard-4t
  replicas: 1
  nodeLabels:
    team: a
  taints:
  - key: team
    value: a
    effect: NoExecute
"
        );
    let files = vec![
        crate::spec::SourceFile {
            path: "t.yaml".into(),
            text: TARGET.into(),
        },
        crate::spec::SourceFile {
            path: "a.yaml".into(),
            text: file,
        },
    ];
    let fleet = crate::spec::load(&files).unwrap();
    let mut inv = Inventory::default();
    inv.resources
        .entry(super::super::KIND)
        .or_default()
        .push(LiveResource {
            scope,
            body: std::sync::Arc::new(p.clone()),
        });
    let kinds = crate::engine::kinds();
    let (props, skipped): (Vec<Proposal>, _) = propose(&t, &inv, &kinds, &Selection::All);
    assert!(skipped.is_empty(), "{skipped:?}");
    inv.adopting = props.iter().flat_map(|p| p.resources.clone()).collect();
    let mut plan = crate::plan::plan(&fleet, &inv, &kinds, &PlanOptions::default()).unwrap();
    keep_adoptions(&mut plan, &props);
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    assert_eq!(plan.actions.len(), 1);
    let act = &plan.actions[0];
    assert_eq!(act.action, ActionKind::Update);
    assert_eq!(act.reason.code(), "adopt");
    assert!(
        act.changes.iter().all(|c| c.path.contains("slicectl")),
        "{:?}",
        act.changes
    );
    assert!(
        act.changes
            .iter()
            .any(|c| c.path == "config.labels[\"slicectl.dev/managed-by\"]")
    );

    // The same pool with auto-upgrade on would be replaced: refused.
    let up = live(
        "gcloud-made-0",
        &[("team", "a")],
        serde_json::json!({"management": {"autoUpgrade": true}}),
    );
    inv.resources.insert(
        super::super::KIND,
        vec![LiveResource {
            scope: id.scope.clone(),
            body: std::sync::Arc::new(up),
        }],
    );
    let mut plan = crate::plan::plan(&fleet, &inv, &kinds, &PlanOptions::default()).unwrap();
    keep_adoptions(&mut plan, &props);
    assert!(plan.actions.is_empty());
    assert_eq!(plan.refused[0].code, "adopt_replace", "{:?}", plan.refused);
    assert!(
        plan.refused[0].message.contains("management.autoUpgrade"),
        "{}",
        plan.refused[0].message
    );
}

/// Issue 20: a tpu7x multi-host pool placed by a workload policy made
/// outside slicectl is adopted with the policy (linked on observation,
/// `kinds::gce::link`): the topology is the policy's, and the plan only
/// stamps the pool's labels; the policy gets no change of its own.
#[test]
fn a_pool_placed_by_a_workload_policy_is_adopted_with_it() {
    use crate::plan::adopt::{Selection, keep_adoptions, propose, spec_file};
    use crate::plan::{Inventory, PlanOptions};
    use crate::resource::compute::{ResourcePolicy, WorkloadPolicy};
    let mut p = live(
        "ironwood-0",
        &[("team", "a")],
        serde_json::json!({"initialNodeCount": 2, "locations": ["us-central1-c"],
                "placementPolicy": {"policyName": "ironwood-0-wp"}}),
    );
    if let Some(c) = p.config.as_mut() {
        c.machine_type = "tpu7x-standard-4t".into();
    }
    let policy = ResourcePolicy {
        name: "ironwood-0-wp".into(),
        description: Some("made by a script".into()),
        region: Some("us-central1".into()),
        workload_policy: Some(WorkloadPolicy {
            kind: "HIGH_THROUGHPUT".into(),
            accelerator_topology: Some("2x2x2".into()),
            accelerator_topology_mode: None,
        }),
        ..Default::default()
    };
    let scope = crate::kind::Scope::Cluster(crate::resource::ClusterRef {
        project: "proj-a1".into(),
        location: "us-central1".into(),
        name: "c".into(),
    });
    let region = crate::kind::Scope::Region(crate::resource::RegionRef {
        project: "proj-a1".into(),
        region: "us-central1".into(),
    });
    let mut inv = Inventory::default();
    add(&mut inv, super::super::KIND, &scope, std::sync::Arc::new(p));
    add(
        &mut inv,
        crate::kinds::workload_policy::KIND,
        &region,
        std::sync::Arc::new(policy),
    );
    crate::kinds::gce::link::link(&mut inv);
    // TPU7x is offered in us-central1-c.
    let target_c = TARGET.replace("us-central1-b", "us-central1-c");
    let t = crate::spec::load(&[crate::spec::SourceFile {
        path: "t.yaml".into(),
        text: target_c.clone(),
    }])
    .unwrap()
    .targets["train"]
        .clone();
    let kinds = crate::engine::kinds();
    let (props, skipped) = propose(&t, &inv, &kinds, &Selection::All);
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(props[0].held.len(), 1, "{:?}", props[0].held);
    let spec = props[0].spec.clone().unwrap();
    assert_eq!(
        (spec.accelerator.as_str(), spec.topology.as_str()),
        ("tpu7x", "2x2x2")
    );
    let file = spec_file("ironwood", &spec, &props[0].resources).unwrap();
    let fleet = crate::spec::load(&[
        crate::spec::SourceFile {
            path: "t.yaml".into(),
            text: target_c,
        },
        crate::spec::SourceFile {
            path: "a.yaml".into(),
            text: file,
        },
    ])
    .unwrap();
    inv.adopting = props
        .iter()
        .flat_map(|p| p.resources.iter().chain(&p.held).cloned())
        .collect();
    let mut plan = crate::plan::plan(&fleet, &inv, &kinds, &PlanOptions::default()).unwrap();
    keep_adoptions(&mut plan, &props);
    let why: Vec<&str> = plan.refused.iter().map(|r| r.message.as_str()).collect();
    assert!(why.is_empty(), "{why:?}");
    let acted: Vec<&str> = plan.actions.iter().map(|a| a.id.kind.as_str()).collect();
    assert_eq!(acted, vec!["node_pool"]);
    // Without the policy observed, the pool is not described.
    inv.resources.remove(&crate::kinds::workload_policy::KIND);
    let mut bare = inv.clone();
    for l in bare
        .resources
        .entry(super::super::KIND)
        .or_default()
        .iter_mut()
    {
        let mut p = crate::kind::body_as::<NodePool>(&l.body).unwrap().clone();
        p.linked_policy = None;
        l.body = std::sync::Arc::new(p);
    }
    let (props, _) = propose(&t, &bare, &kinds, &Selection::All);
    let why = props[0].spec.clone().unwrap_err();
    assert!(
        why.iter()
            .any(|w| w.contains("ironwood-0-wp was not observed")),
        "{why:?}"
    );
}

#[test]
fn other_tools_are_recognised_and_odd_names_keep_theirs() {
    let t = target();
    let tf = live("tf-0", &[], serde_json::json!({}));
    let mut tf = tf;
    if let Some(c) = tf.config.as_mut() {
        c.resource_labels
            .insert(TERRAFORM_LABEL.into(), "true".into());
    }
    assert!(
        adoptable(&tf, &t)
            .unwrap()
            .manager
            .unwrap()
            .contains("terraform state rm")
    );
    let xpk = live("c-np-0", &[], serde_json::json!({}));
    assert!(
        adoptable(&xpk, &t)
            .unwrap()
            .manager
            .unwrap()
            .contains("xpk")
    );
    // tpu-provisioner's pool, with a hash that does not verify.
    let tp = live(
        "js-abcde",
        &[
            (TPU_PROVISIONER_MANAGER_LABEL, "tpu-provisioner"),
            (TPU_PROVISIONER_HASH_LABEL, "nope"),
        ],
        serde_json::json!({}),
    );
    let a = adoptable(&tp, &t).unwrap();
    assert_eq!((a.slice.as_str(), a.replica), ("js-abcde", 0));
    assert!(a.manager.unwrap().contains("tpu-provisioner"));
    assert_eq!(
        a.handoff,
        vec![
            TPU_PROVISIONER_MANAGER_LABEL.to_string(),
            TPU_PROVISIONER_HASH_LABEL.to_string()
        ]
    );
    let why = a.spec.unwrap_err();
    assert!(
        why[0].contains("created by tpu-provisioner, changed since"),
        "{why:?}"
    );
    // Without the hash it is adoptable, under its own name.
    let tp = live(
        "js-abcde",
        &[(TPU_PROVISIONER_MANAGER_LABEL, "tpu-provisioner")],
        serde_json::json!({}),
    );
    let spec = adoptable(&tp, &t).unwrap().spec.unwrap();
    assert_eq!(spec.node_pool_name.as_deref(), Some("js-abcde"));
    assert!(spec.node_labels.is_empty());
    // Another zone is not this Target's.
    let mut far = live("far-0", &[], serde_json::json!({}));
    far.locations = vec!["us-central1-a".into()];
    assert!(adoptable(&far, &t).is_none());
}

/// `release` of an owned pool: one in-place update that removes
/// exactly slicectl's labels; a protected slice is refused.
#[test]
fn release_removes_only_slicectl_labels_and_refuses_a_protected_slice() {
    use crate::plan::{ActionKind, Inventory, PlanOptions};
    let files = vec![crate::spec::SourceFile {
        path: "t.yaml".into(),
        text: format!(
            "{TARGET}---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: a}}\nspec: {{target: train, backend: gke, accelerator: tpu-v6e-slice, topology: 2x2}}\n"
        ),
    }];
    let fleet = crate::spec::load(&files).unwrap();
    let kinds = crate::engine::kinds();
    let scope = crate::kind::Scope::Cluster(crate::resource::ClusterRef {
        project: "proj-a1".into(),
        location: "us-central1".into(),
        name: "c".into(),
    });
    let own = |protected: bool| crate::kind::ownership::Ownership {
        owner: "team".into(),
        slice: "a".into(),
        replica: 0,
        target: Some("train".into()),
        spec_hash: Some("h".into()),
        hash_version: Some("v1".into()),
        prevent_destroy: protected,
    };
    let mut p = live("a-0", &[("team", "x")], serde_json::json!({}));
    let released: std::collections::BTreeSet<String> = ["a".to_string()].into();
    let plan_for = |p: &NodePool| {
        let mut inv = Inventory::default();
        add(
            &mut inv,
            super::super::KIND,
            &scope,
            std::sync::Arc::new(p.clone()),
        );
        let mut plan = crate::plan::plan(&fleet, &inv, &kinds, &PlanOptions::default()).unwrap();
        crate::plan::adopt::release(&mut plan, &fleet, &inv, &kinds, &released);
        plan
    };
    if let Some(c) = p.config.as_mut() {
        c.labels.extend(own(false).to_labels());
        c.resource_labels
            .insert("slicectl-owner".into(), "team".into());
    }
    let plan = plan_for(&p);
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    assert_eq!(plan.actions.len(), 1);
    let a = &plan.actions[0];
    assert_eq!((a.action, a.reason.code()), (ActionKind::Update, "release"));
    let paths: Vec<&str> = a.changes.iter().map(|c| c.path.as_str()).collect();
    assert!(paths.iter().all(|p| p.contains("slicectl")), "{paths:?}");
    assert!(
        paths.contains(&"config.labels[\"slicectl.dev/owner\"]"),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"config.resourceLabels[\"slicectl-owner\"]"),
        "{paths:?}"
    );
    assert!(a.changes.iter().all(|c| c.after.is_none()));
    // Protected: refused, nothing planned.
    if let Some(c) = p.config.as_mut() {
        c.labels.extend(own(true).to_labels());
    }
    let plan = plan_for(&p);
    assert!(plan.actions.is_empty());
    assert_eq!(plan.refused[0].code, "protected");
}

/// Pools `x-0`, `x-1` of one shape are one slice of two replicas; a
/// lone `x-1` is refused (slicectl would create `x-0`).
#[test]
fn replicas_are_grouped_from_zero() {
    use crate::plan::adopt::{Selection, propose};
    use crate::plan::{Inventory, LiveResource};
    let t = target();
    let kinds = crate::engine::kinds();
    let scope = crate::kind::Scope::Cluster(crate::resource::ClusterRef {
        project: "proj-a1".into(),
        location: "us-central1".into(),
        name: "c".into(),
    });
    let inv_of = |names: &[&str]| {
        let mut inv = Inventory::default();
        for n in names {
            inv.resources
                .entry(super::super::KIND)
                .or_default()
                .push(LiveResource {
                    scope: scope.clone(),
                    body: std::sync::Arc::new(live(n, &[], serde_json::json!({}))),
                });
        }
        inv
    };
    let (props, _) = propose(&t, &inv_of(&["x-1", "x-0"]), &kinds, &Selection::All);
    assert_eq!(props.len(), 1);
    let names: Vec<&str> = props[0].resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["x-0", "x-1"]);
    assert_eq!(props[0].spec.as_ref().unwrap().replicas, 2);
    let (props, _) = propose(&t, &inv_of(&["x-1"]), &kinds, &Selection::All);
    let why = props[0].spec.as_ref().unwrap_err();
    assert!(
        why[0].contains("replica 0 is not adopted with it"),
        "{why:?}"
    );
    // By name: one not there is said, not skipped silently.
    let (props, skipped) = propose(
        &t,
        &inv_of(&["x-0"]),
        &kinds,
        &Selection::Names(vec!["x-0".into(), "nope".into()]),
    );
    assert_eq!(props.len(), 1);
    assert!(
        skipped[0].contains("\"nope\": no such node pool"),
        "{skipped:?}"
    );
}

#[test]
fn durations_read_as_a_person_writes_them() {
    assert_eq!(friendly("259200s"), "72h");
    assert_eq!(friendly("600s"), "10m");
    assert_eq!(friendly("61s"), "61s");
}
