//! Unit tests of the pure half of the `gce` kinds: rendering, the hash
//! chain, the Nodes comparison, brought templates, and how the planner and
//! the step graph order a self-managed slice.
#![cfg(test)]

use std::sync::Arc;

use super::device_plugin;
use super::mig::check_brought_template;
use super::nodes::{NodeGroupLive, NodeView, differences};
use super::render::{self, NodeGroup};
use crate::apply::steps::{self, KindInfo, StepOp};
use crate::plan::{self, ActionKind, Body, Inventory, LiveResource, PlanOptions, Scope};
use crate::resource::KubeRef;
use crate::resource::compute::{InstanceTemplate, Scheduling};
use crate::spec::{Fleet, SourceFile};

const TARGET: &str = r#"apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: k}
spec:
  project: proj-one
  zone: us-central1-b
  ownerId: o
  gce:
    controlPlaneEndpoint: "10.0.0.2:6443"
    kubeApi: {kubeconfig: /nonexistent}
"#;

fn slice(name: &str, topo: &str, extra: &str, image: &str) -> String {
    format!(
        "---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: {name}}}\nspec:\n  target: k\n  backend: gce\n  accelerator: tpu-v6e-slice\n  topology: \"{topo}\"\n{extra}  gce:\n    image: projects/ubuntu-os-accelerator-images/global/images/img-{image}\n    bootstrap: {{kubeadm: {{kubernetesVersion: \"1.36\"}}}}\n"
    )
}

fn fleet(slices: &[String]) -> Fleet {
    let text = format!("{TARGET}{}", slices.concat());
    crate::spec::load(&[SourceFile {
        path: "specs/f.yaml".into(),
        text,
    }])
    .unwrap_or_else(|d| panic!("{d:?}"))
}

fn replica(f: &Fleet, name: &str) -> render::GceReplica {
    let s = &f.slices[name];
    render::render(f.target_of(s).unwrap(), s, 0).unwrap()
}

#[test]
fn multi_host_slice_renders_policy_template_and_bulk_mig() {
    let f = fleet(&[slice("big", "4x4", "", "a")]);
    let r = replica(&f, "big");
    let p = r
        .policy
        .as_ref()
        .expect("a multi-host slice has a workload policy");
    assert_eq!(p.name, "big-0-wp");
    assert_eq!(
        p.workload_policy
            .as_ref()
            .unwrap()
            .accelerator_topology
            .as_deref(),
        Some("4x4")
    );
    let t = r.template.as_ref().unwrap();
    assert_eq!(t.name, "big-0-it");
    assert_eq!(t.properties.machine_type, "ct6e-standard-4t");
    let md = t.properties.metadata.as_ref().unwrap();
    assert!(md.get("startup-script").unwrap().starts_with("#!"));
    assert_eq!(md.get("slicectl-kubernetes-version"), Some("1.36"));
    let labels = crate::bootstrap::decode_labels(md.get("kube-labels").unwrap()).unwrap();
    assert_eq!(
        labels["cloud.google.com/gke-tpu-accelerator"],
        "tpu-v6e-slice"
    );
    assert_eq!(labels["cloud.google.com/gke-tpu-topology"], "4x4");
    assert_eq!(labels["cloud.google.com/gke-accelerator-count"], "4");
    assert_eq!(labels["slicectl.dev/slice"], "big");
    // The generation is patched on after the join, never registered.
    assert!(!labels.contains_key("slicectl.dev/spec-hash"));
    let s = t.properties.scheduling.as_ref().unwrap();
    assert_eq!(s.on_host_maintenance.as_deref(), Some("TERMINATE"));
    assert_eq!(s.provisioning_model.as_deref(), Some("STANDARD"));
    // No value of the spec is pasted into the script.
    assert!(!md.get("startup-script").unwrap().contains("tpu-v6e-slice"));
    let m = &r.mig;
    assert_eq!(m.target_size, 4);
    assert_eq!(m.target_size_policy.as_ref().unwrap().mode, "BULK");
    assert_eq!(
        m.instance_template.as_deref(),
        Some("projects/proj-one/global/instanceTemplates/big-0-it")
    );
    assert_eq!(
        m.resource_policies
            .as_ref()
            .unwrap()
            .workload_policy
            .as_deref(),
        Some("projects/proj-one/regions/us-central1/resourcePolicies/big-0-wp")
    );
    assert_eq!(r.nodes.hosts, 4);
    assert_eq!(r.nodes.chips, 4);
    assert_eq!(r.nodes.provider_id_prefix, "gce://proj-one/us-central1-b/");
    assert_eq!(r.nodes.labels["slicectl.dev/spec-hash"], r.nodes.generation);
}

#[test]
fn single_host_slice_has_no_policy() {
    let f = fleet(&[slice("one", "2x2", "", "a")]);
    let r = replica(&f, "one");
    assert!(r.policy.is_none());
    assert!(r.mig.resource_policies.is_none());
    assert_eq!(r.mig.target_size, 1);
}

#[test]
fn capacity_models_map_to_gce_scheduling() {
    let spot = fleet(&[slice("s", "2x2", "  capacity: {type: spot}\n", "a")]);
    let s = replica(&spot, "s")
        .template
        .unwrap()
        .properties
        .scheduling
        .unwrap();
    assert_eq!(s.provisioning_model.as_deref(), Some("SPOT"));
    assert_eq!(s.instance_termination_action.as_deref(), Some("STOP"));
    let res = fleet(&[slice(
        "r",
        "2x2",
        "  capacity: {type: reservation, reservation: {name: tpu-res}}\n",
        "a",
    )]);
    let t = replica(&res, "r").template.unwrap();
    let s = t.properties.scheduling.unwrap();
    assert_eq!(s.provisioning_model.as_deref(), Some("RESERVATION_BOUND"));
    assert_eq!(s.instance_termination_action.as_deref(), Some("DELETE"));
    let aff = t.properties.reservation_affinity.unwrap();
    assert_eq!(aff.consume_reservation_type, "SPECIFIC_RESERVATION");
    assert_eq!(aff.values, vec!["tpu-res"]);
}

#[test]
fn the_hash_chain_replaces_the_whole_replica_on_a_template_change() {
    let a = replica(&fleet(&[slice("x", "4x4", "", "a")]), "x");
    let b = replica(&fleet(&[slice("x", "4x4", "", "b")]), "x");
    let hash = |d: &Option<String>| {
        crate::plan::ownership::Ownership::from_description(d.as_deref().unwrap())
            .unwrap()
            .spec_hash
    };
    assert_ne!(
        hash(&a.template.as_ref().unwrap().description),
        hash(&b.template.as_ref().unwrap().description)
    );
    assert_ne!(hash(&a.mig.description), hash(&b.mig.description));
    assert_ne!(a.nodes.generation, b.nodes.generation);
    // The policy does not depend on the image.
    assert_eq!(
        hash(&a.policy.as_ref().unwrap().description),
        hash(&b.policy.as_ref().unwrap().description)
    );
    // Rendering is deterministic.
    let again = replica(&fleet(&[slice("x", "4x4", "", "a")]), "x");
    assert_eq!(a.nodes, again.nodes);
}

fn node(want: &NodeGroup, i: usize, ready: bool) -> NodeView {
    NodeView {
        name: format!("{}-{i}", want.mig),
        provider_id: format!("{}{}-{i}", want.provider_id_prefix, want.mig),
        ready,
        tpu_capacity: Some(want.chips),
        tpu_allocatable: Some(want.chips),
        labels: want.labels.clone(),
        taints: want.taints.clone(),
        unschedulable: false,
    }
}

fn live(want: &NodeGroup, nodes: Vec<NodeView>) -> NodeGroupLive {
    NodeGroupLive {
        name: want.mig.clone(),
        owner: "o".into(),
        slice: want.labels["slicectl.dev/slice"].clone(),
        replica: 0,
        nodes,
        token_secrets: vec![],
    }
}

#[test]
fn nodes_compare_join_labels_tokens_and_generation() {
    let want = replica(&fleet(&[slice("x", "4x4", "", "a")]), "x").nodes;
    let all: Vec<NodeView> = (0..4).map(|i| node(&want, i, true)).collect();
    let (c, g, replace) = differences(&want, &live(&want, all.clone()));
    assert!(c.is_empty() && g.is_empty() && !replace, "{c:?}");

    let mut three = all.clone();
    three[3].ready = false;
    let (_, g, replace) = differences(&want, &live(&want, three));
    assert!(g.contains(&super::nodes::GROUP_JOIN) && !replace);

    let mut unlabelled = all.clone();
    unlabelled[0]
        .labels
        .remove("cloud.google.com/gke-tpu-topology");
    let (c, g, _) = differences(&want, &live(&want, unlabelled));
    assert!(g.contains(&super::nodes::GROUP_LABELS), "{c:?}");

    let mut with_token = live(&want, all.clone());
    with_token
        .token_secrets
        .push("bootstrap-token-abcdef".into());
    let (_, g, _) = differences(&want, &with_token);
    assert!(g.contains(&super::nodes::GROUP_JOIN));

    let mut old = all;
    old[1]
        .labels
        .insert("slicectl.dev/spec-hash".into(), "0000000000000000".into());
    let (_, _, replace) = differences(&want, &live(&want, old));
    assert!(
        replace,
        "Nodes of another generation are replaced with their VMs"
    );
}

fn template(model: &str, action: Option<&str>, maintenance: Option<&str>) -> InstanceTemplate {
    let mut t = InstanceTemplate::default();
    t.properties.machine_type = "ct6e-standard-4t".into();
    t.properties.scheduling = Some(Scheduling {
        provisioning_model: Some(model.into()),
        instance_termination_action: action.map(str::to_string),
        on_host_maintenance: maintenance.map(str::to_string),
        ..Default::default()
    });
    t
}

#[test]
fn brought_templates_are_checked_like_tpu_operator() {
    assert!(check_brought_template(&template("SPOT", Some("STOP"), Some("TERMINATE"))).is_empty());
    assert!(
        check_brought_template(&template(
            "RESERVATION_BOUND",
            Some("DELETE"),
            Some("TERMINATE")
        ))
        .is_empty()
    );
    let p = check_brought_template(&template("SPOT", Some("DELETE"), Some("MIGRATE")));
    assert_eq!(p.len(), 2, "{p:?}");
    let mut n2 = template("STANDARD", None, Some("TERMINATE"));
    n2.properties.machine_type = "n2-standard-4".into();
    assert_eq!(check_brought_template(&n2).len(), 1);
    let mut none = template("STANDARD", None, None);
    none.properties.scheduling = None;
    assert_eq!(check_brought_template(&none).len(), 1);
}

#[test]
fn one_device_plugin_per_cluster_and_the_whole_graph_is_planned() {
    let f = fleet(&[slice("a", "4x4", "", "a"), slice("b", "2x2", "", "a")]);
    let kinds = crate::kinds::plan_kinds();
    let plan = plan::plan(&f, &Inventory::default(), &kinds, &PlanOptions::default()).unwrap();
    let got: Vec<String> = plan
        .actions
        .iter()
        .map(|a| format!("{} {}", a.address(), a.id.name))
        .collect();
    assert_eq!(
        got,
        vec![
            "shared.device_plugin kube-system/tpu-device-plugin",
            "slice.a[0].workload_policy a-0-wp",
            "slice.a[0].instance_template a-0-it",
            "slice.a[0].mig a-0",
            "slice.a[0].nodes a-0",
            "slice.b[0].instance_template b-0-it",
            "slice.b[0].mig b-0",
            "slice.b[0].nodes b-0",
        ]
    );
    // Nothing in the plan carries a bootstrap token: tokens are minted
    // when the VMs run, never planned.
    let text = crate::plan::human::render(&plan, false);
    assert!(!text.contains("kubeadm-join-token"), "{text}");
}

#[test]
fn a_device_plugin_another_owner_manages_is_used_as_is() {
    let f = fleet(&[slice("a", "2x2", "", "a")]);
    let theirs = device_plugin::objects("img", "someone-else")
        .unwrap()
        .daemon_set;
    let mut inv = Inventory::default();
    inv.resources.insert(
        device_plugin::KIND,
        vec![LiveResource {
            scope: Scope::Kube(KubeRef {
                endpoint: "10.0.0.2:6443".into(),
            }),
            body: Arc::new(theirs) as Body,
        }],
    );
    let kinds = crate::kinds::plan_kinds();
    let plan = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    assert!(
        plan.actions
            .iter()
            .all(|a| a.id.kind != device_plugin::KIND)
    );
    assert_eq!(
        plan.unmanaged
            .iter()
            .filter(|u| u.note.contains("uses it as it is"))
            .count(),
        1,
        "{:?}",
        plan.unmanaged
    );
}

/// Every resource of replica `r` live as rendered, with `nodes` as its
/// Nodes, and the cluster's device plugin.
fn all_live(r: &render::GceReplica, nodes: Vec<NodeView>) -> Inventory {
    let kube = Scope::Kube(r.kube.clone());
    let mut inv = Inventory::default();
    let mut add = |kind, scope: Scope, body: Body| {
        inv.resources
            .entry(kind)
            .or_default()
            .push(LiveResource { scope, body });
    };
    if let Some(p) = &r.policy {
        add(
            crate::kinds::workload_policy::KIND,
            Scope::Region(r.region.clone()),
            Arc::new(p.clone()),
        );
    }
    if let Some(t) = &r.template {
        add(
            super::template::KIND,
            Scope::Global(r.project.clone()),
            Arc::new(t.clone()),
        );
    }
    add(
        super::mig::KIND,
        Scope::Zone(r.zone.clone()),
        Arc::new(r.mig.clone()),
    );
    add(
        super::nodes::KIND,
        kube.clone(),
        Arc::new(live(&r.nodes, nodes)),
    );
    add(
        device_plugin::KIND,
        kube,
        Arc::new(device_plugin::objects("img", "o").unwrap().daemon_set),
    );
    inv
}

#[test]
fn teardown_order_cordon_mig_template_policy_then_cleanup_then_device_plugin() {
    // Destroy a slice whose resources are all live.
    let f = fleet(&[slice("a", "4x4", "", "a")]);
    let r = replica(&f, "a");
    let inv = all_live(&r, vec![node(&r.nodes, 0, true)]);
    let kinds = crate::kinds::plan_kinds();
    let plan = plan::plan_destroy(&f, &inv, &kinds, 10).unwrap();
    assert!(plan.actions.iter().all(|a| a.action == ActionKind::Delete));
    let s = steps::expand(&plan, |k| {
        crate::kinds::get(k).map_or(KindInfo::default(), |x| KindInfo {
            depends_on: x.depends_on(),
            shared: x.shared(),
            cleanup: x.cleanup_after_dependencies(),
        })
    });
    // Topological order by running the graph.
    let mut done: Vec<usize> = Vec::new();
    while done.len() < s.len() {
        let next = s
            .iter()
            .find(|st| !done.contains(&st.id) && st.deps.iter().all(|d| done.contains(d)))
            .expect("the graph has no cycle");
        done.push(next.id);
    }
    let order: Vec<String> = done
        .iter()
        .map(|i| {
            let st = &s[*i];
            format!("{} {:?}", plan.actions[st.action].id.kind, st.op)
        })
        .collect();
    let pos = |x: &str| order.iter().position(|o| o == x).unwrap();
    assert!(pos("nodes Delete") < pos("mig Delete"), "{order:?}");
    assert!(
        pos("mig Delete") < pos("instance_template Delete"),
        "{order:?}"
    );
    assert!(
        pos("instance_template Delete") < pos("workload_policy Delete"),
        "{order:?}"
    );
    assert!(
        pos("workload_policy Delete") < pos("nodes Cleanup"),
        "{order:?}"
    );
    assert!(
        pos("nodes Cleanup") < pos("device_plugin Delete"),
        "{order:?}"
    );
    assert_eq!(s.iter().filter(|x| x.op == StepOp::Cleanup).count(), 1);
}

#[test]
fn nodes_of_vms_that_are_gone_go_with_a_mig_created_again() {
    // The Nodes are all Ready, but their MIG is missing (deleted out of
    // band): the MIG is created again and the old Nodes are replaced, so
    // the new VMs are bootstrapped and the stale Nodes cleaned up.
    let f = fleet(&[slice("a", "4x4", "", "a")]);
    let r = replica(&f, "a");
    let mut inv = Inventory::default();
    let all: Vec<NodeView> = (0..4).map(|i| node(&r.nodes, i, true)).collect();
    inv.resources.insert(
        super::nodes::KIND,
        vec![LiveResource {
            scope: Scope::Kube(r.kube.clone()),
            body: Arc::new(live(&r.nodes, all)),
        }],
    );
    let kinds = crate::kinds::plan_kinds();
    let plan = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    let nodes = plan
        .actions
        .iter()
        .find(|a| a.id.kind == super::nodes::KIND)
        .expect("the Nodes are planned");
    assert_eq!(nodes.action, ActionKind::Replace);
    assert_eq!(nodes.reason.code(), "dependency_replaced");
    assert!(
        nodes
            .reason_text()
            .contains("managed instance group is created again"),
        "{}",
        nodes.reason_text()
    );
    // With the MIG live and equal, the same Nodes plan nothing.
    inv.resources.insert(
        super::mig::KIND,
        vec![LiveResource {
            scope: Scope::Zone(r.zone.clone()),
            body: Arc::new(r.mig.clone()),
        }],
    );
    inv.resources.insert(
        super::template::KIND,
        vec![LiveResource {
            scope: Scope::Global(r.project.clone()),
            body: Arc::new(r.template.clone().unwrap()),
        }],
    );
    inv.resources.insert(
        crate::kinds::workload_policy::KIND,
        vec![LiveResource {
            scope: Scope::Region(r.region.clone()),
            body: Arc::new(r.policy.clone().unwrap()),
        }],
    );
    let plan = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(
        plan.actions
            .iter()
            .all(|a| a.id.kind == device_plugin::KIND),
        "{:?}",
        plan.actions.iter().map(|a| a.address()).collect::<Vec<_>>()
    );
}

#[test]
fn a_declared_rename_keeps_a_gce_slices_resources_as_they_are() {
    // Slice `a` live (policy, template, MIG, Nodes), then renamed to `b`
    // with `previousNames: [a]`: the compute resources keep their names and
    // immutable ownership, so `b` plans exactly what `a` would (nothing is
    // deleted or created), and without the declaration it would delete them.
    let f = fleet(&[slice("a", "4x4", "", "a")]);
    let r = replica(&f, "a");
    let nodes: Vec<NodeView> = (0..4).map(|i| node(&r.nodes, i, true)).collect();
    let inv = all_live(&r, nodes);
    let kinds = crate::kinds::plan_kinds();
    let shown = |p: &plan::Plan| -> Vec<(String, ActionKind, String)> {
        p.actions
            .iter()
            .map(|a| (a.id.name.clone(), a.action, a.reason.code().to_string()))
            .collect()
    };
    let same = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    let renamed = fleet(&[slice("b", "4x4", "  previousNames: [a]\n", "a")]);
    let p = plan::plan(&renamed, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert_eq!(shown(&p), shown(&same));
    assert!(
        p.actions.iter().all(|a| !matches!(
            a.action,
            ActionKind::Delete | ActionKind::Create | ActionKind::Replace
        )),
        "{:?}",
        shown(&p)
    );
    assert_eq!(p.renames.len(), 1);
    assert!(p.renames[0].declared && p.renames[0].message.contains("Keep `previousNames: [a]`"));
    let rows = crate::status::rows(&renamed, &inv, &kinds);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].slice.as_str(), rows[0].node_pool.as_str()),
        ("b", r.mig.name.as_str())
    );
    assert_ne!(rows[0].state, "NOT OWNED");

    let undeclared = fleet(&[slice("b", "4x4", "", "a")]);
    let p = plan::plan(&undeclared, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.actions.iter().any(|a| a.action == ActionKind::Delete));
}
