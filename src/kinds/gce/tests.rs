#![cfg(test)]
//! Unit tests of the pure half of the `gce` kinds: rendering, the hash
//! chain, the Nodes comparison, brought templates, and how the planner and
//! the step graph order a self-managed slice.

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
    // On-demand: Compute Engine's BULK takes only reservation-bound and
    // flex-start templates, so INDIVIDUAL (slicectl keeps it all-or-nothing).
    assert_eq!(m.target_size_policy.as_ref().unwrap().mode, "INDIVIDUAL");
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
        // Observed Nodes are grouped by the slice replica their labels name.
        name: crate::kind::names::mig(&want.labels["slicectl.dev/slice"], 0),
        owner: "o".into(),
        slice: want.labels["slicectl.dev/slice"].clone(),
        replica: 0,
        nodes,
        token_secrets: vec![],
        released: false,
        unlabelled: false,
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
    // A brought template's MIG is BULK, which takes no SPOT or STANDARD one.
    let spot = check_brought_template(&template("SPOT", Some("STOP"), Some("TERMINATE")));
    assert_eq!(spot.len(), 1, "{spot:?}");
    assert!(spot[0].contains("cannot run in a BULK MIG"), "{spot:?}");
    assert!(
        check_brought_template(&template("FLEX_START", Some("DELETE"), Some("TERMINATE")))
            .is_empty()
    );
    assert!(
        check_brought_template(&template(
            "RESERVATION_BOUND",
            Some("DELETE"),
            Some("TERMINATE")
        ))
        .is_empty()
    );
    let p = check_brought_template(&template("SPOT", Some("DELETE"), Some("MIGRATE")));
    assert_eq!(p.len(), 3, "{p:?}");
    let mut n2 = template("FLEX_START", Some("DELETE"), Some("TERMINATE"));
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

#[test]
fn teardown_order_cordon_mig_template_policy_then_cleanup_then_device_plugin() {
    // Destroy a slice whose resources are all live.
    let f = fleet(&[slice("a", "4x4", "", "a")]);
    let r = replica(&f, "a");
    let mut inv = live_replica(&f, "a", 4, 1, as_written);
    inv.resources
        .entry(device_plugin::KIND)
        .or_default()
        .push(LiveResource {
            scope: Scope::Kube(r.kube.clone()),
            body: Arc::new(device_plugin::objects("img", "o").unwrap().daemon_set),
        });
    let kinds = crate::kinds::plan_kinds();
    let plan = plan::plan_destroy(&f, &inv, &kinds, 10).unwrap();
    assert!(plan.actions.iter().all(|a| a.action == ActionKind::Delete));
    let (order, s) = graph_order(&plan);
    let pos = |x: &str| {
        order
            .iter()
            .position(|o| o == x)
            .unwrap_or_else(|| panic!("{x} not in {order:?}"))
    };
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

/// The plan's steps in the order the graph runs them (`kind Op`), and
/// the steps.
fn graph_order(plan: &plan::Plan) -> (Vec<String>, Vec<steps::Step>) {
    let s = steps::expand(plan, |k| {
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
    (order, s)
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

/// A live replica of slice `name`: policy, template, its MIG with `running`
/// RUNNING VMs (its description as `describe` makes it), and `nodes` of its
/// Nodes (labelled as rendered).
fn live_replica(
    f: &Fleet,
    name: &str,
    running: i32,
    nodes: usize,
    describe: impl Fn(&str) -> String,
) -> Inventory {
    let r = replica(f, name);
    let mut inv = Inventory::default();
    let mut add = |kind, scope: Scope, body: Body| {
        inv.resources
            .entry(kind)
            .or_default()
            .push(LiveResource { scope, body });
    };
    if let Some(p) = r.policy.clone() {
        add(
            crate::kinds::workload_policy::KIND,
            Scope::Region(r.region.clone()),
            Arc::new(p),
        );
    }
    add(
        super::template::KIND,
        Scope::Global(r.project.clone()),
        Arc::new(r.template.clone().unwrap()),
    );
    let mut mig = r.mig.clone();
    mig.description = Some(describe(mig.description.as_deref().unwrap()));
    mig.status = Some(crate::resource::compute::InstanceGroupManagerStatus {
        is_stable: true,
        current_instance_statuses: Some(crate::resource::compute::InstanceStatusSummary {
            running: Some(running),
            ..Default::default()
        }),
        ..Default::default()
    });
    add(super::mig::KIND, Scope::Zone(r.zone.clone()), Arc::new(mig));
    let all: Vec<NodeView> = (0..nodes).map(|i| node(&r.nodes, i, true)).collect();
    // The cluster was read and nothing runs on its Nodes: idle, known.
    // (What was not read is busy; tests of that set `inv.workloads`.)
    inv.workloads = idle_cluster(&r.kube, &all);
    if nodes > 0 {
        add(
            super::nodes::KIND,
            Scope::Kube(r.kube.clone()),
            Arc::new(live(&r.nodes, all)),
        );
    }
    inv
}

/// `kube` read: these Nodes, no pod on any of them.
fn idle_cluster(kube: &KubeRef, nodes: &[NodeView]) -> plan::workload::Workloads {
    use crate::plan::workload::{ClusterWorkloads, HostNode, Workloads};
    let hosts = nodes
        .iter()
        .map(|n| HostNode {
            name: n.name.clone(),
            labels: n.labels.clone(),
            provider_id: n.provider_id.clone(),
            ..HostNode::default()
        })
        .collect();
    Workloads {
        observed_at: Some("2026-11-26T05:00:00Z".parse().unwrap()),
        clusters: [(kube.clone(), ClusterWorkloads::Seen(hosts))].into(),
        simulated: false,
    }
}

fn as_written(d: &str) -> String {
    d.to_string()
}

/// The description every MIG got before the stamp existed.
fn without_stamp(d: &str) -> String {
    d.replace(" prevent-destroy=true", "")
        .replace(" prevent-destroy=false", "")
}

/// A MIG description stamped `protected`, whatever it said.
fn stamped(protected: bool) -> impl Fn(&str) -> String {
    move |d| crate::plan::ownership::with_description_stamp(d, protected)
}

/// The action on the MIG of the slice under test (not `other`'s).
fn mig_action(p: &plan::Plan) -> Option<&plan::Action> {
    p.actions
        .iter()
        .find(|a| a.id.kind == super::mig::KIND && a.owner.slice != "other")
}

/// The live MIG of `inv` after `a` (an in-place MIG update) ran: its
/// description is the one the action sends.
fn apply_mig_update(inv: &mut Inventory, a: &plan::Action) {
    assert_eq!(a.action, ActionKind::Update, "{}", a.reason_text());
    let want = a
        .desired
        .as_ref()
        .and_then(plan::kind::body_as::<crate::resource::compute::InstanceGroupManager>)
        .and_then(|m| m.description.clone())
        .unwrap();
    let migs = inv.resources.get_mut(&super::mig::KIND).unwrap();
    let mut live =
        plan::kind::body_as::<crate::resource::compute::InstanceGroupManager>(&migs[0].body)
            .unwrap()
            .clone();
    live.description = Some(want);
    migs[0].body = Arc::new(live);
}

/// Every action on slice `name` is an in-place update (nothing replaced).
fn only_updates(p: &plan::Plan, name: &str) {
    let got: Vec<(String, ActionKind)> = p
        .actions
        .iter()
        .filter(|a| a.owner.slice == name)
        .map(|a| (a.address(), a.action))
        .collect();
    assert!(got.iter().all(|(_, a)| *a == ActionKind::Update), "{got:?}");
}

/// The live MIG's description, without its stamp.
fn live_unstamped(inv: &Inventory) -> String {
    let migs = &inv.resources[&super::mig::KIND];
    let m = plan::kind::body_as::<crate::resource::compute::InstanceGroupManager>(&migs[0].body)
        .unwrap();
    without_stamp(m.description.as_deref().unwrap())
}

fn live_stamp(inv: &Inventory) -> Option<bool> {
    let migs = &inv.resources[&super::mig::KIND];
    super::mig::recorded_stamp(
        plan::kind::body_as::<crate::resource::compute::InstanceGroupManager>(&migs[0].body)
            .unwrap(),
    )
}

fn refusals(p: &plan::Plan) -> Vec<(String, String)> {
    p.refused
        .iter()
        .map(|r| (r.address.clone(), r.code.clone()))
        .collect()
}

const PROTECTED: &str = "  lifecycle: {preventDestroy: true}\n";

#[test]
fn a_protected_slices_mig_carries_the_stamp_and_the_same_hash() {
    let open = replica(&fleet(&[slice("x", "4x4", "", "a")]), "x");
    let kept = replica(&fleet(&[slice("x", "4x4", PROTECTED, "a")]), "x");
    let d = kept.mig.description.clone().unwrap();
    assert!(d.ends_with(" prevent-destroy=true"), "{d}");
    let own = crate::plan::ownership::Ownership::from_description(&d).unwrap();
    assert!(own.prevent_destroy);
    // An unprotected slice's MIG says so: "recorded false" is told from
    // "never recorded" (a MIG made before the stamp existed).
    let o = open.mig.description.clone().unwrap();
    assert!(o.ends_with(" prevent-destroy=false"), "{o}");
    assert_eq!(super::mig::recorded_stamp(&open.mig), Some(false));
    // Protection is not a replacement-class field: the hash is the same.
    assert_eq!(without_stamp(&d), without_stamp(&o));
    // Only the MIG carries it: template and policy are as before.
    assert_eq!(kept.template, open.template);
    assert_eq!(kept.policy, open.policy);
}

#[test]
fn an_existing_mig_without_the_stamp_gets_it_in_place() {
    // A MIG created before the stamp existed says nothing: the next apply
    // writes what the spec says, in place (no replacement, same hash), so
    // every MIG soon says whether it is protected.
    let kinds = crate::kinds::plan_kinds();
    for (extra, want) in [(PROTECTED, "true"), ("", "false")] {
        let f = fleet(&[slice("x", "4x4", extra, "a")]);
        let mut inv = live_replica(&f, "x", 4, 4, without_stamp);
        let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
        assert!(p.refused.is_empty(), "{:?}", p.refused);
        let touched: Vec<(String, ActionKind)> = p
            .actions
            .iter()
            .filter(|a| a.id.kind != device_plugin::KIND)
            .map(|a| (a.address(), a.action))
            .collect();
        assert_eq!(
            touched,
            vec![("slice.x[0].mig".to_string(), ActionKind::Update)]
        );
        let a = mig_action(&p).unwrap();
        assert_eq!(a.reason.code(), "in_place_fields_changed");
        assert_eq!(
            a.groups.iter().map(|g| g.0).collect::<Vec<_>>(),
            vec!["description"]
        );
        assert_eq!(a.changes.len(), 1, "{:?}", a.changes);
        assert_eq!(a.changes[0].path, "description.prevent-destroy");
        assert_eq!(a.changes[0].before, None);
        assert_eq!(a.changes[0].after, Some(serde_json::Value::from(want)));
        // Once written, nothing more to do.
        apply_mig_update(&mut inv, a);
        let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
        assert!(
            p.actions.iter().all(|a| a.id.kind == device_plugin::KIND),
            "{:?}",
            p.actions.iter().map(|a| a.address()).collect::<Vec<_>>()
        );
    }
}

#[test]
fn protecting_a_slice_after_create_stamps_its_mig_in_place() {
    // Created unprotected (the MIG says `prevent-destroy=false`), then the
    // spec protects it: an in-place update writes the stamp, hash kept.
    let open = fleet(&[slice("x", "4x4", "", "a"), slice("other", "2x2", "", "a")]);
    let kept = fleet(&[
        slice("x", "4x4", PROTECTED, "a"),
        slice("other", "2x2", "", "a"),
    ]);
    let kinds = crate::kinds::plan_kinds();
    let mut inv = live_replica(&open, "x", 4, 4, as_written);
    assert_eq!(live_stamp(&inv), Some(false));
    let p = plan::plan(&kept, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    let a = mig_action(&p).unwrap();
    assert_eq!(a.action, ActionKind::Update);
    assert_eq!(a.reason.code(), "in_place_fields_changed");
    assert_eq!(
        (
            a.changes[0].path.as_str(),
            a.changes[0].before.clone(),
            a.changes[0].after.clone()
        ),
        (
            "description.prevent-destroy",
            Some(serde_json::Value::from("false")),
            Some(serde_json::Value::from("true"))
        )
    );
    // Nothing is replaced: the template and policy are untouched.
    only_updates(&p, "x");
    apply_mig_update(&mut inv, a);
    assert_eq!(live_stamp(&inv), Some(true));
    // The stamp written keeps the recorded hash.
    assert_eq!(
        live_unstamped(&inv),
        without_stamp(replica(&open, "x").mig.description.as_deref().unwrap())
    );

    // Then its YAML goes, and its Nodes (`kubectl delete nodes`): the MIG's
    // stamp refuses the destroy, VMs running or not.
    let mut gone = kept.clone();
    gone.slices.remove("x");
    for running in [4, 0] {
        let mut inv = live_replica(&open, "x", running, 0, stamped(true));
        let p = plan::plan(&gone, &inv, &kinds, &PlanOptions::default()).unwrap();
        assert!(p.actions.iter().all(|a| a.owner.slice != "x"));
        assert_eq!(
            refusals(&p),
            vec![
                ("slice.x[0].workload_policy".into(), "held_back".into()),
                ("slice.x[0].instance_template".into(), "held_back".into()),
                ("slice.x[0].mig".into(), "protected".into()),
            ]
        );
        // Not even --allow-unverified-delete: the protection is read.
        let opts = PlanOptions {
            allow_unverified_delete: true,
            ..PlanOptions::default()
        };
        let p = plan::plan(&gone, &inv, &kinds, &opts).unwrap();
        assert!(refusals(&p).contains(&("slice.x[0].mig".into(), "protected".into())));
        // Nor with every Node there, unstamped: the MIG's stamp protects.
        inv = live_replica(&open, "x", running, 4, stamped(true));
        let p = plan::plan(&gone, &inv, &kinds, &PlanOptions::default()).unwrap();
        assert!(refusals(&p).contains(&("slice.x[0].mig".into(), "protected".into())));
    }
}

#[test]
fn lifting_the_stamp_takes_two_applies_for_the_mig_as_for_its_nodes() {
    // Protected and live, then one commit unprotects it and changes its
    // topology: the first apply lifts the MIG's stamp (and the Nodes')
    // in place and refuses the replacement; the second replaces.
    let f = fleet(&[slice("x", "4x4", PROTECTED, "a")]);
    let open = fleet(&[slice("x", "4x8", "", "a")]);
    let kinds = crate::kinds::plan_kinds();
    for nodes in [0usize, 4] {
        let mut inv = live_replica(&f, "x", 4, nodes, as_written);
        let p = plan::plan(&open, &inv, &kinds, &PlanOptions::default()).unwrap();
        let a = mig_action(&p).unwrap();
        assert_eq!(a.action, ActionKind::Update);
        assert_eq!(a.reason.code(), "lift_protection");
        assert_eq!(a.changes[0].path, "description.prevent-destroy");
        assert_eq!(a.changes[0].after, Some(serde_json::Value::from("false")));
        let r = refusals(&p);
        assert!(
            r.contains(&("slice.x[0].mig".into(), "protected_live".into())),
            "{r:?}"
        );
        if nodes > 0 {
            assert!(
                r.contains(&("slice.x[0].nodes".into(), "protected_live".into())),
                "{r:?}"
            );
        }
        only_updates(&p, "x");
        // The lifted stamp keeps the MIG's recorded hash (it is not the
        // replacement's description).
        apply_mig_update(&mut inv, a);
        assert_eq!(live_stamp(&inv), Some(false));
        assert_eq!(
            live_unstamped(&inv),
            without_stamp(replica(&f, "x").mig.description.as_deref().unwrap())
        );
        if nodes == 0 {
            // Second apply: the replacement goes ahead.
            let p = plan::plan(&open, &inv, &kinds, &PlanOptions::default()).unwrap();
            assert!(p.refused.is_empty(), "{:?}", p.refused);
            assert_eq!(mig_action(&p).unwrap().action, ActionKind::Replace);
        }
    }

    // Unprotected with nothing else changed: one in-place update lifts it,
    // and then the YAML can go (and `destroy` destroys).
    let f2 = fleet(&[
        slice("x", "4x4", PROTECTED, "a"),
        slice("other", "2x2", "", "a"),
    ]);
    let open2 = fleet(&[slice("x", "4x4", "", "a"), slice("other", "2x2", "", "a")]);
    let mut inv = live_replica(&f2, "x", 4, 0, as_written);
    let mut gone = open2.clone();
    gone.slices.remove("x");
    let p = plan::plan(&gone, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(refusals(&p).contains(&("slice.x[0].mig".into(), "protected".into())));
    let p = plan::plan(&open2, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    apply_mig_update(&mut inv, mig_action(&p).unwrap());
    assert_eq!(live_stamp(&inv), Some(false));
    let p = plan::plan(&gone, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    assert_eq!(mig_action(&p).unwrap().action, ActionKind::Delete);
    let p = plan::plan_destroy(&open2, &inv, &kinds, 10).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
}

#[tokio::test]
async fn the_mig_kind_patches_its_stamp_with_the_live_fingerprint() {
    use crate::apply::KindExec;
    use crate::apply::schedule::Scheduler;
    use crate::cloud::fake::{FakeCloud, Fault};
    let open = fleet(&[slice("x", "4x4", "", "a")]);
    let kept = fleet(&[slice("x", "4x4", PROTECTED, "a")]);
    let r = replica(&open, "x");
    let fake = FakeCloud::new();
    let cloud = fake.cloud();
    let op = cloud
        .compute
        .insert_instance_group_manager(&r.zone, &r.mig)
        .await
        .unwrap();
    cloud
        .compute
        .wait_operation(&op, std::time::Duration::from_secs(5))
        .await
        .unwrap();
    let observe = |fake: &FakeCloud| {
        let mut inv = live_replica(&open, "x", 4, 4, as_written);
        inv.resources.get_mut(&super::mig::KIND).unwrap()[0].body =
            Arc::new(fake.migs(&r.zone)[0].clone());
        inv
    };
    let kinds = crate::kinds::plan_kinds();
    let p = plan::plan(&kept, &observe(&fake), &kinds, &PlanOptions::default()).unwrap();
    let a = mig_action(&p).unwrap().clone();
    assert_eq!(a.action, ActionKind::Update);
    // Someone changed the group after the plan: the first patch meets 412,
    // is retried once after a fresh get, and writes the stamp.
    fake.fail_next("patch_instance_group_manager", Fault::StaleFingerprint);
    let out = super::mig::Migs
        .execute(&cloud, &Scheduler::new(1), &a, StepOp::Update)
        .await;
    assert!(out.is_ok(), "{out:?}");
    assert_eq!(fake.calls_of("patch_instance_group_manager").len(), 2);
    assert_eq!(fake.calls_of("get_instance_group_manager").len(), 2);
    let live = &fake.migs(&r.zone)[0];
    assert_eq!(super::mig::recorded_stamp(live), Some(true));
    assert_eq!(
        without_stamp(live.description.as_deref().unwrap()),
        without_stamp(r.mig.description.as_deref().unwrap())
    );
    // Steady state: nothing more planned.
    let p = plan::plan(&kept, &observe(&fake), &kinds, &PlanOptions::default()).unwrap();
    assert!(mig_action(&p).is_none());
    // A second 412 is not retried again: the step fails with it.
    let p = plan::plan(&open, &observe(&fake), &kinds, &PlanOptions::default()).unwrap();
    let a = mig_action(&p).unwrap().clone();
    fake.fail_next("patch_instance_group_manager", Fault::StaleFingerprint);
    fake.fail_next("patch_instance_group_manager", Fault::StaleFingerprint);
    let out = super::mig::Migs
        .execute(&cloud, &Scheduler::new(1), &a, StepOp::Update)
        .await;
    assert!(
        matches!(&out, Err(crate::apply::ApplyError::Cloud(e)) if e.is_stale_fingerprint()),
        "{out:?}"
    );
    assert_eq!(
        super::mig::recorded_stamp(&fake.migs(&r.zone)[0]),
        Some(true)
    );
}

#[test]
fn a_protected_slice_whose_nodes_are_gone_is_refused_by_its_mig() {
    // Issue 23 item 2: the YAML moved away, then `kubectl delete nodes`.
    let f = fleet(&[
        slice("lsx", "4x4", PROTECTED, "a"),
        slice("other", "2x2", "", "a"),
    ]);
    let inv = live_replica(&f, "lsx", 4, 0, as_written);
    let mut gone = f.clone();
    gone.slices.remove("lsx");
    let kinds = crate::kinds::plan_kinds();
    let p = plan::plan(&gone, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(
        p.actions.iter().all(|a| a.owner.slice != "lsx"),
        "{:?}",
        p.actions.iter().map(|a| a.address()).collect::<Vec<_>>()
    );
    assert_eq!(
        refusals(&p),
        vec![
            ("slice.lsx[0].workload_policy".into(), "held_back".into()),
            ("slice.lsx[0].instance_template".into(), "held_back".into()),
            ("slice.lsx[0].mig".into(), "protected".into()),
        ]
    );
    // `destroy` refuses it too.
    let p = plan::plan_destroy(&f, &inv, &kinds, 10).unwrap();
    assert!(p.actions.iter().all(|a| a.owner.slice != "lsx"));
    assert!(refusals(&p).contains(&("slice.lsx[0].mig".into(), "protected".into())));
}

#[test]
fn a_protected_slice_is_refused_while_its_spec_protects_it() {
    let f = fleet(&[slice("x", "4x4", PROTECTED, "a")]);
    let inv = live_replica(&f, "x", 4, 0, as_written);
    let kinds = crate::kinds::plan_kinds();
    let kept = fleet(&[slice("x", "4x8", PROTECTED, "a")]);
    let p = plan::plan(&kept, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(refusals(&p).contains(&("slice.x[0].mig".into(), "protected".into())));
}

#[test]
fn a_mig_whose_protection_cannot_be_read_is_not_deleted_without_override() {
    // No stamp on the MIG (made before it existed), slice gone from the
    // specs, 4 VMs running and only 1 Node left (unstamped).
    let f = fleet(&[slice("lsx", "4x4", "", "a"), slice("other", "2x2", "", "a")]);
    let inv = live_replica(&f, "lsx", 4, 1, without_stamp);
    let mut gone = f.clone();
    gone.slices.remove("lsx");
    let kinds = crate::kinds::plan_kinds();
    let p = plan::plan(&gone, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.actions.iter().all(|a| a.owner.slice != "lsx"));
    assert!(
        refusals(&p).contains(&("slice.lsx[0].mig".into(), "protection_unknown".into())),
        "{:?}",
        p.refused
    );
    let msg = &p
        .refused
        .iter()
        .find(|r| r.code == "protection_unknown")
        .unwrap()
        .message;
    for want in [
        "lsx-0",
        "4 VM(s) run",
        "only 1 of their Nodes",
        "3 missing",
        "--allow-unverified-delete",
    ] {
        assert!(msg.contains(want), "{want:?} not in {msg}");
    }
    // The override deletes it.
    let opts = PlanOptions {
        allow_unverified_delete: true,
        ..PlanOptions::default()
    };
    let p = plan::plan(&gone, &inv, &kinds, &opts).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    assert!(
        p.actions
            .iter()
            .any(|a| a.id.kind == super::mig::KIND && a.action == ActionKind::Delete)
    );
    // Every running VM has its (unstamped) Node: the Nodes' word is read.
    let inv = live_replica(&f, "lsx", 4, 4, without_stamp);
    let p = plan::plan(&gone, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    // No VM running: nothing to lose.
    let inv = live_replica(&f, "lsx", 0, 0, without_stamp);
    let p = plan::plan(&gone, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
}

fn nodes_action(p: &plan::Plan) -> &plan::Action {
    p.actions
        .iter()
        .find(|a| a.id.kind == super::nodes::KIND)
        .expect("the Nodes are planned")
}

#[test]
fn running_vms_whose_nodes_are_gone_are_recreated_by_a_planned_step() {
    // 4 VMs RUNNING, their Nodes deleted, no join under way: the plan
    // offers recreating them through the MIG (reason node_lost), counted
    // against --max-destroy.
    let f = fleet(&[slice("x", "4x4", "", "a")]);
    let kinds = crate::kinds::plan_kinds();
    for (nodes, action) in [(0, ActionKind::Create), (2, ActionKind::Update)] {
        let inv = live_replica(&f, "x", 4, nodes, as_written);
        let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
        let a = nodes_action(&p);
        assert_eq!(a.action, action);
        assert_eq!(a.reason.code(), "node_lost", "{}", a.reason_text());
        assert!(a.groups.contains(&super::nodes::GROUP_RECREATE_LOST));
        let text = a.reason_text();
        assert!(text.contains("does not register it again"), "{text}");
        assert!(text.contains("recreateInstances"), "{text}");
        assert!(text.contains(&format!("({} at most)", 4 - nodes)), "{text}");
        // A disruption: counted against --max-destroy by the VMs it may recreate.
        let opts = PlanOptions {
            max_destroy: 3 - nodes,
            ..PlanOptions::default()
        };
        let err = plan::plan(&f, &inv, &kinds, &opts).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("would destroy or replace {} resources", 4 - nodes)),
            "{err}"
        );
    }
    // A join under way (a bootstrap token out): nothing is recreated, the
    // plan only says what a lost Node would need.
    let mut inv = live_replica(&f, "x", 4, 2, as_written);
    let g = inv.resources.get_mut(&super::nodes::KIND).unwrap();
    let mut live_group = plan::kind::body_as::<NodeGroupLive>(&g[0].body)
        .unwrap()
        .clone();
    live_group
        .token_secrets
        .push("bootstrap-token-abcdef".into());
    g[0].body = Arc::new(live_group);
    let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    let a = nodes_action(&p);
    assert_ne!(a.reason.code(), "node_lost");
    assert!(
        a.groups
            .iter()
            .all(|g| *g != super::nodes::GROUP_RECREATE_LOST)
    );
    let note = a
        .changes
        .iter()
        .find(|c| c.path == "nodes.missing")
        .unwrap_or_else(|| panic!("{:?}", a.changes));
    let text = note.after.as_ref().unwrap().as_str().unwrap();
    assert!(text.contains("does not register its Node again"), "{text}");
    assert!(
        text.contains("recreate-instances x-0 --instances=VM --zone=us-central1-b"),
        "{text}"
    );
    // Every VM has its Node: nothing said, nothing recreated.
    let inv = live_replica(&f, "x", 4, 4, as_written);
    let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(
        p.actions.iter().all(|a| a.reason.code() != "node_lost"
            && a.changes.iter().all(|c| c.path != "nodes.missing"))
    );
}

#[test]
fn a_migs_stamp_speaks_for_itself_whatever_its_nodes_say() {
    let f = fleet(&[
        slice("lsx", "4x4", PROTECTED, "a"),
        slice("other", "2x2", "", "a"),
    ]);
    let mut gone = f.clone();
    gone.slices.remove("lsx");
    let kinds = crate::kinds::plan_kinds();
    // The MIG says protected, its Nodes (one per VM) say nothing (lifted
    // by an older slicectl that did not patch MIGs): refused. Put the spec
    // back with `preventDestroy: false` and apply to lift it.
    let mut inv = live_replica(&f, "lsx", 4, 4, as_written);
    let g = inv.resources.get_mut(&super::nodes::KIND).unwrap();
    let mut lifted = plan::kind::body_as::<NodeGroupLive>(&g[0].body)
        .unwrap()
        .clone();
    for n in &mut lifted.nodes {
        n.labels.remove("slicectl.dev/prevent-destroy");
    }
    g[0].body = Arc::new(lifted);
    let p = plan::plan(&gone, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.actions.iter().all(|a| a.owner.slice != "lsx"));
    assert!(refusals(&p).contains(&("slice.lsx[0].mig".into(), "protected".into())));
    // The MIG says unprotected (recorded, not unknown) and its Nodes are
    // gone while its VMs run: the stamp is read, the slice is deleted.
    let inv = live_replica(&f, "lsx", 4, 0, stamped(false));
    let p = plan::plan(&gone, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    assert_eq!(mig_action(&p).unwrap().action, ActionKind::Delete);
}

/// Issue 24 item 5, self-managed: a Target whose zone changes leaves its MIG
/// in a zone no Target names. The observation finds that zone (one
/// `aggregatedList` per project), and the plan creates the replica in the
/// new zone and deletes the old MIG as moved, after the create.
#[test]
fn a_gce_target_whose_zone_changed_deletes_its_old_mig_as_moved() {
    let before = fleet(&[slice("z", "2x2", "", "a")]);
    let inv = live_replica(&before, "z", 1, 1, as_written);
    // The Target now in us-central1-a, with `slices`.
    let in_zone_a = |slices: String| {
        let text = format!(
            "{}{slices}",
            TARGET.replace(
                "zone: us-central1-b",
                "zone: us-central1-a\n  allowUnlistedZone: true"
            )
        );
        crate::spec::load(&[SourceFile {
            path: "specs/f.yaml".into(),
            text,
        }])
        .unwrap_or_else(|d| panic!("{d:?}"))
    };
    let after = in_zone_a(slice("z", "2x2", "", "a"));
    let old_zone = Scope::Zone(replica(&before, "z").zone);
    let all = crate::kinds::plan_kinds();
    let owners = plan::Owners::of(&after, &all);
    let own = plan::Owners::of(&before, &all);
    assert!(!owners.by_scope.contains_key(&old_zone));
    assert!(own.by_scope.contains_key(&old_zone));
    let kinds = crate::kinds::plan_kinds();
    let p = plan::plan(&after, &inv, &kinds, &PlanOptions::default()).unwrap();
    let migs: Vec<(ActionKind, String, String)> = p
        .actions
        .iter()
        .filter(|a| a.id.kind == super::mig::KIND)
        .map(|a| {
            (
                a.action,
                a.id.scope.to_string(),
                a.reason.code().to_string(),
            )
        })
        .collect();
    assert_eq!(
        migs,
        vec![
            (
                ActionKind::Create,
                "projects/proj-one/zones/us-central1-a".to_string(),
                "missing".to_string()
            ),
            (
                ActionKind::Delete,
                "projects/proj-one/zones/us-central1-b".to_string(),
                "moved".to_string()
            ),
        ],
        "{:#?}",
        p.actions
    );
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    // Moved, and its slice removed from the specs (another slice keeps the
    // fleet from looking empty): the MIG's stamp names Target `k`, which
    // the specs still declare, so the removal is deliberate and the MIG
    // goes (the gate asks: idle here).
    let after = in_zone_a(slice("other", "2x2", "", "a"));
    let p = plan::plan(&after, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.refused.is_empty(), "{:#?}", p.refused);
    assert!(
        p.actions
            .iter()
            .any(|a| a.action == ActionKind::Delete && a.owner.slice == "z"),
        "{:#?}",
        p.actions
    );
    // Removed together with its Slices (Target `k` gone, `k2` in its
    // place): refused, not pruned.
    let after = {
        let text = format!(
            "{}{}",
            TARGET
                .replace(
                    "zone: us-central1-b",
                    "zone: us-central1-a\n  allowUnlistedZone: true"
                )
                .replace("{name: k}", "{name: k2}"),
            slice("other", "2x2", "", "a").replace("target: k\n", "target: k2\n")
        );
        crate::spec::load(&[SourceFile {
            path: "specs/f.yaml".into(),
            text,
        }])
        .unwrap_or_else(|d| panic!("{d:?}"))
    };
    let p = plan::plan(&after, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(
        p.refused
            .iter()
            .any(|r| r.code == "target_removed" && r.name == "z-0"),
        "{:#?}",
        p.refused
    );
    assert!(
        !p.actions
            .iter()
            .any(|a| a.action == ActionKind::Delete && a.owner.slice == "z"),
        "{:#?}",
        p.actions
    );
}

#[test]
fn capacity_decides_the_mig_mode_bulk_only_where_compute_engine_takes_it() {
    let f = fleet(&[
        slice("od", "2x2", "", "a"),
        slice("sp", "2x2", "  capacity: {type: spot}\n", "a"),
        slice(
            "fs",
            "2x2",
            "  capacity: {type: flex-start, maxRunDuration: 24h}\n",
            "a",
        ),
        slice(
            "rs",
            "2x2",
            "  capacity: {type: reservation, reservation: {name: r1}}\n",
            "a",
        ),
    ]);
    let mode = |n: &str| {
        let r = replica(&f, n);
        let model = r
            .template
            .as_ref()
            .and_then(|t| t.properties.scheduling.as_ref())
            .and_then(|s| s.provisioning_model.clone())
            .unwrap_or_default();
        (r.mig.target_size_policy.unwrap().mode, model)
    };
    assert_eq!(mode("od"), ("INDIVIDUAL".into(), "STANDARD".into()));
    assert_eq!(mode("sp"), ("INDIVIDUAL".into(), "SPOT".into()));
    assert_eq!(mode("fs"), ("BULK".into(), "FLEX_START".into()));
    assert_eq!(mode("rs"), ("BULK".into(), "RESERVATION_BOUND".into()));
}

/// A live MIG of `target` VMs, `running` of them RUNNING.
fn live_mig(
    target: i32,
    running: i32,
    stable: bool,
) -> crate::resource::compute::InstanceGroupManager {
    use crate::resource::compute::{InstanceGroupManagerStatus, InstanceStatusSummary};
    crate::resource::compute::InstanceGroupManager {
        name: "s-0".into(),
        target_size: target,
        status: Some(InstanceGroupManagerStatus {
            is_stable: stable,
            current_instance_statuses: Some(InstanceStatusSummary {
                running: Some(running),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn a_mig_short_of_vms_with_a_stockout_is_not_ready_from_either_documented_field() {
    use super::mig::{creation_error, not_ready};
    use crate::resource::compute::{
        BulkInstanceOperation, IgmErrorDetail, LastProgressCheck, OperationError,
        OperationErrorItem,
    };
    // BULK: the bulk operation's last check.
    let mut bulk = live_mig(2, 0, false);
    if let Some(s) = bulk.status.as_mut() {
        s.bulk_instance_operation = Some(BulkInstanceOperation {
            in_progress: true,
            last_progress_check: Some(LastProgressCheck {
                timestamp: None,
                error: Some(OperationError {
                    errors: vec![OperationErrorItem {
                        code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
                        message: "no room".into(),
                    }],
                }),
            }),
        });
    }
    let n = not_ready(&bulk).expect("a BULK stockout is not ready");
    assert_eq!(n.code, "stockout");
    assert_eq!(
        n.message,
        "ZONE_RESOURCE_POOL_EXHAUSTED: no room (VMs 0/2 running; the MIG keeps retrying)"
    );
    // INDIVIDUAL: what observation read from `listErrors`.
    let mut individual = live_mig(2, 1, false);
    assert_eq!(not_ready(&individual), None, "creating, no reason yet");
    individual.list_error = Some(IgmErrorDetail {
        code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
        message: "no room".into(),
    });
    assert_eq!(
        creation_error(&individual).as_deref(),
        Some("ZONE_RESOURCE_POOL_EXHAUSTED: no room")
    );
    assert_eq!(not_ready(&individual).map(|n| n.code), Some("stockout"));
    // Compute's quota error: not ready for quota.
    individual.list_error = Some(IgmErrorDetail {
        code: "QUOTA_EXCEEDED".into(),
        message: "Quota 'TPU_V5P' exceeded. Limit: 8.0 in region us-central1.".into(),
    });
    assert_eq!(
        not_ready(&individual).map(|n| n.code),
        Some("quota_exceeded")
    );
    // Another error: not ready, under the MIG's own code.
    individual.list_error = Some(IgmErrorDetail {
        code: "INVALID_FIELD_VALUE".into(),
        message: "bad".into(),
    });
    assert_eq!(not_ready(&individual).map(|n| n.code), Some("mig_error"));
    // Every VM running, or stable: ready as far as the MIG says.
    let mut done = live_mig(2, 2, false);
    done.list_error = individual.list_error.clone();
    assert_eq!(not_ready(&done), None);
    let mut stable = bulk.clone();
    if let Some(s) = stable.status.as_mut() {
        s.is_stable = true;
    }
    assert_eq!(not_ready(&stable), None);
}

#[test]
fn the_engine_names_each_replica_known_not_to_become_ready_and_only_those() {
    use crate::plan::{PlanMode, ResourceId};
    let f = fleet(&[
        slice("a", "2x2", "  replicas: 2\n", "a"),
        slice("b", "2x2", "", "a"),
    ]);
    let kinds = crate::kinds::plan_kinds();
    let plan = plan::plan(&f, &Inventory::default(), &kinds, &PlanOptions::default()).unwrap();
    // Each replica's MIG as planned, live: a-0 in a stockout, a-1 and b-0 fine.
    let mut inv = Inventory::default();
    for a in plan
        .actions
        .iter()
        .filter(|a| a.id.kind == super::mig::KIND)
    {
        let mut m: crate::resource::compute::InstanceGroupManager = a
            .desired
            .as_ref()
            .and_then(crate::plan::kind::body_as)
            .cloned()
            .unwrap();
        let short = a.id.name == "a-0";
        let l = live_mig(1, if short { 0 } else { 1 }, !short);
        m.status = l.status;
        if short {
            m.list_error = Some(crate::resource::compute::IgmErrorDetail {
                code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
                message: "no room".into(),
            });
        }
        let ResourceId { scope, .. } = a.id.clone();
        inv.resources
            .entry(super::mig::KIND)
            .or_default()
            .push(LiveResource {
                scope,
                body: Arc::new(m) as Body,
            });
    }
    let got = crate::engine::not_ready(&f, &inv, PlanMode::Apply, None);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].address, "slice.a[0].mig");
    assert_eq!((got[0].slice.as_str(), got[0].replica), ("a", 0));
    assert_eq!(got[0].code, "stockout");
    assert!(
        got[0]
            .message
            .starts_with("ZONE_RESOURCE_POOL_EXHAUSTED: no room")
    );
    // Tearing down: nothing need become ready.
    assert!(crate::engine::not_ready(&f, &inv, PlanMode::Destroy, None).is_empty());
    // A replica whose own step failed is reported there, not twice.
    let failed = crate::apply::ApplyReport {
        failures: vec![crate::apply::Failure {
            address: "slice.a[0].nodes".into(),
            code: "stockout",
            message: "no room".into(),
        }],
        failed: vec![("slice.a[0].nodes".into(), "no room".into())],
        ..Default::default()
    };
    assert!(crate::engine::not_ready(&f, &inv, PlanMode::Apply, Some(&failed)).is_empty());
}

/// A brought template that does not exist: the MIG step fails with
/// `missing_template`, saying what to do, and the report names the step's
/// address once.
#[tokio::test]
async fn a_brought_template_that_does_not_exist_says_what_to_do() {
    use crate::cloud::fake::FakeCloud;
    let text = format!(
        "{TARGET}---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: byo}}\nspec:\n  target: k\n  backend: gce\n  accelerator: tpu-v6e-slice\n  topology: \"2x2\"\n  gce:\n    instanceTemplate: projects/proj-one/global/instanceTemplates/mine\n"
    );
    let f = crate::spec::load(&[SourceFile {
        path: "specs/f.yaml".into(),
        text,
    }])
    .unwrap_or_else(|d| panic!("{d:?}"));
    let fake = FakeCloud::new();
    let cloud = fake.cloud();
    let inv = crate::observe::observe(&cloud, &f, crate::kinds::REGISTRY).await;
    let p = plan::plan(
        &f,
        &inv,
        &crate::kinds::plan_kinds(),
        &PlanOptions::default(),
    )
    .unwrap();
    let r = crate::apply::execute(
        &cloud,
        crate::kinds::REGISTRY,
        &p,
        &crate::apply::ApplyOptions::default(),
        Arc::new(crate::apply::tests::Quiet),
    )
    .await;
    let f = r
        .failures
        .iter()
        .find(|f| f.address == "slice.byo[0].mig")
        .unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(f.code, super::MISSING_TEMPLATE);
    assert!(
        f.message
            .starts_with("instance template projects/proj-one/global/instanceTemplates/mine"),
        "{}",
        f.message
    );
    assert!(f.message.contains("Create it first"), "{}", f.message);
    assert!(!f.message.contains("slice.byo[0].mig"), "{}", f.message);
}

/// The live replica of slice `name` as another tool left it: the template
/// and policy described by someone else, the MIG described by `mig` (its
/// rendered description in, the live one out).
fn foreign_replica(f: &Fleet, name: &str, mig: impl Fn(&str) -> String) -> Inventory {
    let mut inv = live_replica(f, name, 4, 4, mig);
    for kind in [super::template::KIND, crate::kinds::workload_policy::KIND] {
        for l in inv.resources.entry(kind).or_default().iter_mut() {
            l.body = match (
                crate::kind::body_as::<InstanceTemplate>(&l.body),
                crate::kind::body_as::<crate::resource::compute::ResourcePolicy>(&l.body),
            ) {
                (Some(t), _) => Arc::new(InstanceTemplate {
                    description: Some("made by hand".into()),
                    ..t.clone()
                }),
                (_, Some(p)) => Arc::new(crate::resource::compute::ResourcePolicy {
                    description: Some("made by hand".into()),
                    ..p.clone()
                }),
                _ => continue,
            };
        }
    }
    super::link::link(&mut inv);
    inv
}

fn compute_actions(p: &plan::Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter(|a| {
            [
                super::mig::KIND,
                super::template::KIND,
                crate::kinds::workload_policy::KIND,
            ]
            .contains(&a.id.kind)
        })
        .map(|a| format!("{:?} {} {}", a.action, a.id.kind, a.id.name))
        .collect()
}

/// Issue 20: a MIG adopted with the `adopted=true` marker owns the
/// template and policy it uses by reference, whatever their (immutable)
/// descriptions say: a steady plan changes nothing, and destroying the
/// slice deletes MIG, template and policy, in that order.
#[test]
fn an_adopted_mig_owns_its_template_and_policy_and_tears_them_down_in_order() {
    let f = fleet(&[slice("a", "4x4", "", "a")]);
    let inv = foreign_replica(&f, "a", crate::plan::ownership::with_adopted);
    let kinds = crate::kinds::plan_kinds();
    let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert_eq!(compute_actions(&p), Vec::<String>::new());
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    let p = plan::plan_destroy(&f, &inv, &kinds, 10).unwrap();
    let (order, _) = graph_order(&p);
    let pos = |x: &str| order.iter().position(|o| o == x);
    let (m, t, w) = (
        pos("mig Delete"),
        pos("instance_template Delete"),
        pos("workload_policy Delete"),
    );
    assert!(m.is_some() && m < t && t < w, "{order:?}");
    // Without the marker the same template and policy are someone
    // else's: never deleted.
    let mut plain = live_replica(&f, "a", 4, 4, as_written);
    plain = {
        let mut i = foreign_replica(&f, "a", as_written);
        i.workloads = std::mem::take(&mut plain.workloads);
        i
    };
    let p = plan::plan_destroy(&f, &plain, &kinds, 10).unwrap();
    assert_eq!(compute_actions(&p), vec!["Delete mig a-0".to_string()]);
}

/// Issue 20: a released MIG (its description no longer slicectl's) takes
/// the template and policy it uses with it, although their descriptions
/// still name the slice: removing the Slice from the specs deletes
/// nothing, and a spec that still names it is refused, not recreated.
#[test]
fn a_released_migs_template_and_policy_are_not_slicectls() {
    let f = fleet(&[slice("a", "4x4", "", "a")]);
    let release = |d: &str| {
        let o = crate::plan::ownership::Ownership::from_description(d).unwrap();
        super::adopt::released_description(&o)
    };
    let mut inv = live_replica(&f, "a", 4, 4, release);
    super::link::link(&mut inv);
    let kinds = crate::kinds::plan_kinds();
    let empty = fleet(&[slice("b", "2x2", "", "a")]);
    let p = plan::plan(&empty, &inv, &kinds, &PlanOptions::default()).unwrap();
    // Not the MIG, its template, its policy, nor its Nodes.
    let touched: Vec<String> = p
        .actions
        .iter()
        .filter(|a| a.id.name.starts_with("a-0"))
        .map(|a| a.address())
        .collect();
    assert!(touched.is_empty(), "{touched:?}");
    let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(
        p.actions
            .iter()
            .all(|a| a.action != ActionKind::Delete && a.action != ActionKind::Replace),
        "{:?}",
        compute_actions(&p)
    );
    let codes: Vec<String> = refusals(&p).into_iter().map(|(_, c)| c).collect();
    assert!(codes.iter().any(|c| c == "name_taken"), "{codes:?}");
    // The cluster's device plugin still serves the released slice's Nodes:
    // destroying every slicectl slice there leaves it.
    let r = replica(&f, "a");
    let mut with_plugin = live_replica(&f, "a", 4, 4, release);
    with_plugin
        .resources
        .entry(device_plugin::KIND)
        .or_default()
        .push(LiveResource {
            scope: Scope::Kube(r.kube.clone()),
            body: Arc::new(device_plugin::objects("img", "o").unwrap().daemon_set),
        });
    super::link::link(&mut with_plugin);
    let p = plan::plan_destroy(&f, &with_plugin, &kinds, 10).unwrap();
    let deleted: Vec<String> = p.actions.iter().map(|a| a.address()).collect();
    assert!(deleted.is_empty(), "{deleted:?}");
    // Without the released slice it goes, as ever.
    let mut alone = Inventory::default();
    alone.resources.insert(
        device_plugin::KIND,
        with_plugin.live(device_plugin::KIND).to_vec(),
    );
    let p = plan::plan_destroy(&f, &alone, &kinds, 10).unwrap();
    assert_eq!(p.actions.len(), 1, "{:?}", compute_actions(&p));
}

/// `inv` with the proposals' resources (and what they hold) marked as
/// being adopted.
fn marked_for(inv: &Inventory, props: &[crate::plan::adopt::Proposal]) -> Inventory {
    let mut marked = inv.clone();
    marked.adopting = props
        .iter()
        .flat_map(|p| p.resources.iter().chain(&p.held))
        .cloned()
        .collect();
    marked
}

/// The adoption plan of `props` over `marked` ([`marked_for`]).
fn adoption_plan(
    f: &Fleet,
    marked: &Inventory,
    props: &[crate::plan::adopt::Proposal],
) -> plan::Plan {
    let kinds = crate::kinds::plan_kinds();
    let mut p = plan::plan(f, marked, &kinds, &PlanOptions::default()).unwrap();
    crate::plan::adopt::keep_adoptions(&mut p, props);
    p
}

/// Issue 20: `slicectl adopt` of a MIG whose template and policy were made
/// elsewhere plans one in-place change, the MIG's description; the release
/// plan of an adopted slice is one in-place change too, with no refusal
/// for its template and policy (they follow the MIG).
#[test]
fn adopting_and_releasing_a_mig_change_only_its_description() {
    use crate::plan::adopt::{self, Selection};
    let f = fleet(&[slice("a", "4x4", "", "a")]);
    let inv = foreign_replica(&f, "a", |_| "made by gcloud".to_string());
    let kinds = crate::kinds::plan_kinds();
    let target = &f.targets["k"];
    let (props, skipped) =
        adopt::propose(target, &inv, &kinds, &Selection::Names(vec!["a-0".into()]));
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(props.len(), 1);
    assert_eq!(
        props[0].held.len(),
        3,
        "template, policy, Nodes: {:?}",
        props[0].held
    );
    let marked = marked_for(&inv, &props);
    let p = adoption_plan(&f, &marked, &props);
    let why: Vec<&str> = p.refused.iter().map(|r| r.message.as_str()).collect();
    assert!(p.refused.is_empty(), "{why:?}");
    assert_eq!(compute_actions(&p), vec!["Update mig a-0".to_string()]);
    assert!(
        p.actions[0]
            .changes
            .iter()
            .all(|c| c.path.starts_with("description"))
    );
    // A template that differs from the spec refuses the adoption.
    let other = fleet(&[slice("a", "4x4", "", "b")]);
    let p = adoption_plan(&other, &marked, &props);
    let codes: Vec<String> = refusals(&p).into_iter().map(|(_, c)| c).collect();
    assert!(codes.iter().any(|c| c == "adopt_replace"), "{codes:?}");
    assert!(p.actions.is_empty(), "{:?}", compute_actions(&p));
    // Released: the MIG's description only.
    let adopted = foreign_replica(&f, "a", crate::plan::ownership::with_adopted);
    let mut p = plan::plan(&f, &adopted, &kinds, &PlanOptions::default()).unwrap();
    let chosen = std::collections::BTreeSet::from(["a".to_string()]);
    adopt::release(&mut p, &f, &adopted, &kinds, &chosen);
    assert!(p.refused.is_empty(), "{:?}", refusals(&p));
    assert_eq!(compute_actions(&p), vec!["Update mig a-0".to_string()]);
}

/// Issue 20: a MIG made outside slicectl with a template slicectl did not
/// render is described with that template brought (`gce.instanceTemplate`)
/// and its workload policy's topology; what cannot run as a brought
/// template's BULK MIG is the reason it is not adopted.
#[test]
fn a_foreign_mig_is_described_with_its_template_brought() {
    use crate::resource::compute::{Linked, ResourcePolicy, TargetSizePolicy, WorkloadPolicy};
    let f = fleet(&[slice("a", "4x4", "", "a")]);
    let target = &f.targets["k"];
    let mut t = template("FLEX_START", Some("DELETE"), Some("TERMINATE"));
    t.name = "tpl".into();
    t.properties.machine_type = "ct6e-standard-4t".into();
    let mut m = crate::resource::compute::InstanceGroupManager {
        name: "train-0".into(),
        instance_template: Some("https://compute.googleapis.com/compute/v1/projects/proj-one/global/instanceTemplates/tpl".into()),
        target_size: 4,
        target_size_policy: Some(TargetSizePolicy { mode: "BULK".into() }),
        linked: Some(Box::new(Linked {
            template: Some(t.clone()),
            policy: Some(ResourcePolicy {
                name: "train-0-wp".into(),
                workload_policy: Some(WorkloadPolicy {
                    kind: "HIGH_THROUGHPUT".into(),
                    accelerator_topology: Some("4x4".into()),
                    accelerator_topology_mode: None,
                }),
                ..Default::default()
            }),
        })),
        ..Default::default()
    };
    let a = super::adopt::adoptable(&m, target).unwrap();
    assert_eq!((a.slice.as_str(), a.replica), ("train", 0));
    let spec = a.spec.unwrap();
    assert_eq!(spec.topology, "4x4");
    assert_eq!(spec.accelerator, "tpu-v6e-slice");
    assert_eq!(
        spec.gce.unwrap().instance_template.as_deref(),
        Some("projects/proj-one/global/instanceTemplates/tpl")
    );
    m.target_size_policy = None;
    m.target_size = 2;
    let why = super::adopt::adoptable(&m, target)
        .unwrap()
        .spec
        .unwrap_err();
    assert!(why.iter().any(|w| w.contains("INDIVIDUAL mode")), "{why:?}");
    assert!(
        why.iter().any(|w| w.contains("target size is 2")),
        "{why:?}"
    );
    m.name = "train-mig-0a1b2c3d".into();
    let a = super::adopt::adoptable(&m, target).unwrap();
    assert!(a.manager.unwrap().contains("tpu-operator"));
    assert!(a.spec.is_err());
    // tpu-operator's MIG, BULK and of the right size, is its group's slice
    // under the names it has (a MIG and a policy cannot be renamed).
    m.target_size_policy = Some(TargetSizePolicy {
        mode: "BULK".into(),
    });
    m.target_size = 4;
    if let Some(p) = m.linked.as_mut().and_then(|l| l.policy.as_mut()) {
        p.name = "train-policy-0a1b2c3d".into();
    }
    let a = super::adopt::adoptable(&m, target).unwrap();
    assert_eq!((a.slice.as_str(), a.replica), ("train", 0));
    let g = a.spec.unwrap().gce.unwrap();
    assert_eq!(g.mig_name.as_deref(), Some("train-mig-0a1b2c3d"));
    assert_eq!(
        g.workload_policy_name.as_deref(),
        Some("train-policy-0a1b2c3d")
    );
    // Any other name: a slice of that name, the policy kept only when its
    // name is not the one slicectl would give it.
    m.name = "by-gcloud".into();
    if let Some(p) = m.linked.as_mut().and_then(|l| l.policy.as_mut()) {
        p.name = "by-gcloud-0-wp".into();
    }
    let a = super::adopt::adoptable(&m, target).unwrap();
    assert_eq!(a.slice, "by-gcloud");
    assert!(a.manager.is_none());
    let g = a.spec.unwrap().gce.unwrap();
    assert_eq!(g.mig_name.as_deref(), Some("by-gcloud"));
    assert_eq!(g.workload_policy_name, None);
}

/// A slice whose MIG and workload policy keep the names another tool gave
/// them (tpu-operator's).
fn pinned(name: &str, topo: &str, replicas: u32) -> String {
    slice(name, topo, &format!("  replicas: {replicas}\n"), "a").replace(
        "  gce:\n",
        "  gce:\n    migName: grp-mig-1a2b3c4d\n    workloadPolicyName: grp-policy-1a2b3c4d\n",
    )
}

/// Issue 20: a slice under pinned names (`gce.migName`,
/// `gce.workloadPolicyName`: an adopted tpu-operator MIG) renders, plans
/// and destroys its MIG and policy by those names; its MIG is told
/// slicectl's by the adoption marker, not by its name, and its Nodes are
/// still the slice replica's group.
#[test]
fn a_slice_under_pinned_names_is_planned_and_destroyed_by_them() {
    let f = fleet(&[pinned("grp", "4x4", 1)]);
    let r = replica(&f, "grp");
    assert_eq!(r.mig.name, "grp-mig-1a2b3c4d");
    assert_eq!(
        r.mig.base_instance_name.as_deref(),
        Some("grp-mig-1a2b3c4d")
    );
    assert_eq!(r.policy.as_ref().unwrap().name, "grp-policy-1a2b3c4d");
    assert!(
        r.mig
            .resource_policies
            .as_ref()
            .and_then(|p| p.workload_policy.as_deref())
            .unwrap()
            .ends_with("/resourcePolicies/grp-policy-1a2b3c4d")
    );
    let d = r.mig.description.clone().unwrap();
    assert!(crate::plan::ownership::description_adopted(&d), "{d}");
    assert!(super::mig::described_ownership(&d, "grp-mig-1a2b3c4d").is_some());
    // Without the marker, a description naming another replica than the
    // MIG's name is foreign, as ever.
    let plain = d.replace(" adopted=true", "");
    assert!(super::mig::described_ownership(&plain, "grp-mig-1a2b3c4d").is_none());
    assert!(super::mig::described_ownership(&plain, "grp-0").is_some());

    let mut inv = live_replica(&f, "grp", 4, 4, as_written);
    super::link::link(&mut inv);
    let kinds = crate::kinds::plan_kinds();
    let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    // (The cluster's device plugin is not part of this inventory.)
    let acted: Vec<String> = p
        .actions
        .iter()
        .filter(|a| a.id.kind != device_plugin::KIND)
        .map(|a| a.address())
        .collect();
    assert!(acted.is_empty(), "{acted:?}");
    assert!(p.refused.is_empty(), "{:?}", refusals(&p));
    let p = plan::plan_destroy(&f, &inv, &kinds, 10).unwrap();
    let mut deleted = compute_actions(&p);
    deleted.sort();
    assert_eq!(
        deleted,
        vec![
            "Delete instance_template grp-0-it".to_string(),
            "Delete mig grp-mig-1a2b3c4d".to_string(),
            "Delete workload_policy grp-policy-1a2b3c4d".to_string(),
        ]
    );
    assert!(
        p.actions
            .iter()
            .any(|a| a.id.kind == super::nodes::KIND && a.id.name == "grp-0"),
        "{:?}",
        p.actions.iter().map(|a| a.address()).collect::<Vec<_>>()
    );
    // Released, its Nodes go with it: removing the Slice deletes nothing.
    let release = |d: &str| {
        let o = crate::plan::ownership::Ownership::from_description(d).unwrap();
        super::adopt::released_description(&o)
    };
    let mut released = live_replica(&f, "grp", 4, 4, release);
    super::link::link(&mut released);
    let other = fleet(&[slice("b", "2x2", "", "a")]);
    let p = plan::plan(&other, &released, &kinds, &PlanOptions::default()).unwrap();
    let touched: Vec<String> = p
        .actions
        .iter()
        .filter(|a| a.owner.slice == "grp")
        .map(|a| a.address())
        .collect();
    assert!(touched.is_empty(), "{touched:?}");
}

/// Pinned names are for a slice's one replica, and a policy name for a
/// multi-host slice, each refused at its file:line:column otherwise.
#[test]
fn pinned_names_are_refused_where_they_cannot_hold() {
    let err = |text: String| {
        let d = crate::spec::load(&[SourceFile {
            path: "specs/f.yaml".into(),
            text: format!("{TARGET}{text}"),
        }])
        .unwrap_err();
        d.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let two = err(pinned("grp", "4x4", 2));
    assert!(
        two.contains("migName names the resource of a slice's one replica"),
        "{two}"
    );
    assert!(two.contains("workloadPolicyName names"), "{two}");
    assert!(two.contains("specs/f.yaml:"), "{two}");
    let single = err(pinned("grp", "2x2", 1));
    assert!(single.contains("a single-host slice"), "{single}");
    let bad = err(slice("grp", "4x4", "", "a").replace("  gce:\n", "  gce:\n    migName: Grp_1\n"));
    assert!(bad.contains("migName \"Grp_1\""), "{bad}");
    // Two slices may not pin the same MIG.
    let twice = err(format!(
        "{}{}",
        pinned("grp", "4x4", 1),
        pinned("other", "4x4", 1)
    ));
    assert!(twice.contains("MIG name collision"), "{twice}");
}

/// A brought template's slice (`gce.instanceTemplate`) with `hosts` VMs.
fn brought(name: &str) -> Fleet {
    let text = format!(
        "{TARGET}---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: {name}}}\nspec:\n  target: k\n  backend: gce\n  accelerator: tpu-v6e-slice\n  topology: \"4x4\"\n  gce:\n    instanceTemplate: projects/proj-one/global/instanceTemplates/mine\n"
    );
    crate::spec::load(&[SourceFile {
        path: "specs/f.yaml".into(),
        text,
    }])
    .unwrap_or_else(|d| panic!("{d:?}"))
}

/// The live MIG of slice `name` replica 0, as rendered, with its VMs
/// running (and nothing else).
fn live_mig_only(f: &Fleet, name: &str) -> Inventory {
    let r = replica(f, name);
    let mut inv = Inventory::default();
    let mut mig = r.mig.clone();
    mig.status = Some(crate::resource::compute::InstanceGroupManagerStatus {
        is_stable: true,
        current_instance_statuses: Some(crate::resource::compute::InstanceStatusSummary {
            running: Some(mig.target_size),
            ..Default::default()
        }),
        ..Default::default()
    });
    inv.resources
        .entry(super::mig::KIND)
        .or_default()
        .push(LiveResource {
            scope: Scope::Zone(r.zone.clone()),
            body: Arc::new(mig),
        });
    if let Some(p) = r.policy.clone() {
        inv.resources
            .entry(crate::kinds::workload_policy::KIND)
            .or_default()
            .push(LiveResource {
                scope: Scope::Region(r.region.clone()),
                body: Arc::new(p),
            });
    }
    inv.workloads = idle_cluster(&r.kube, &[]);
    inv
}

/// Issue 20: a brought template's MIG whose VMs have not joined shows no
/// Nodes step (none could succeed: slicectl hands them no token) but the
/// `unjoined` note, and the plan has no changes; a rendered template's
/// MIG (slicectl's own bootstrap) keeps its Nodes step, and so does a
/// brought template's MIG being created (its step waits for the join).
#[test]
fn a_brought_templates_unjoined_vms_are_a_note_not_a_step() {
    let kinds = crate::kinds::plan_kinds();
    let f = brought("byo");
    let inv = live_mig_only(&f, "byo");
    let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    let steps: Vec<String> = p.actions.iter().map(|a| a.address()).collect();
    assert!(
        !steps.iter().any(|s| s.ends_with(".nodes")),
        "no Nodes step: {steps:?}"
    );
    assert_eq!(p.unjoined.len(), 1, "{:?}", p.unjoined);
    assert_eq!(p.unjoined[0].name, "byo-0");
    assert!(
        p.unjoined[0]
            .note
            .starts_with("unjoined: 0 of 4 VM(s) of MIG byo-0"),
        "{}",
        p.unjoined[0].note
    );
    let human = crate::plan::human::render(&p, false);
    assert!(human.contains("Not joined"), "{human}");
    assert!(human.contains("unjoined: 0 of 4"), "{human}");
    // Every VM joined and Ready: nothing to note.
    let r = replica(&f, "byo");
    let mut joined = inv.clone();
    let all: Vec<NodeView> = (0..4).map(|i| node(&r.nodes, i, true)).collect();
    joined
        .resources
        .entry(super::nodes::KIND)
        .or_default()
        .push(LiveResource {
            scope: Scope::Kube(r.kube.clone()),
            body: Arc::new(live(&r.nodes, all.clone())),
        });
    let p = plan::plan(&f, &joined, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.unjoined.is_empty(), "{:?}", p.unjoined);
    // Two of four joined, one without its labels: a labels-only step (the
    // executor labels what is there and waits for nothing) and the note.
    let mut half = inv.clone();
    let mut two = all[..2].to_vec();
    two[1].labels.remove(render::LABEL_TOPOLOGY);
    half.resources
        .entry(super::nodes::KIND)
        .or_default()
        .push(LiveResource {
            scope: Scope::Kube(r.kube.clone()),
            body: Arc::new(live(&r.nodes, two)),
        });
    let p = plan::plan(&f, &half, &kinds, &PlanOptions::default()).unwrap();
    let nodes: Vec<&plan::Action> = p
        .actions
        .iter()
        .filter(|a| a.id.kind == super::nodes::KIND)
        .collect();
    assert_eq!(nodes.len(), 1, "{:?}", p.actions);
    assert_eq!(
        nodes[0].groups,
        std::collections::BTreeSet::from([super::nodes::GROUP_LABELS])
    );
    assert!(p.unjoined[0].note.starts_with("unjoined: 2 of 4"));
    // A rendered template: slicectl drives the join, the step stays.
    let own = fleet(&[slice("x", "4x4", "", "a")]);
    let p = plan::plan(
        &own,
        &live_mig_only(&own, "x"),
        &kinds,
        &PlanOptions::default(),
    )
    .unwrap();
    assert!(p.unjoined.is_empty(), "{:?}", p.unjoined);
    assert!(
        p.actions.iter().any(|a| a.id.kind == super::nodes::KIND),
        "{:?}",
        p.actions
    );
    // A brought template's MIG being created: its Nodes step waits for
    // the join the template causes, as before.
    let p = plan::plan(&f, &Inventory::default(), &kinds, &PlanOptions::default()).unwrap();
    assert!(p.unjoined.is_empty(), "{:?}", p.unjoined);
    assert!(
        p.actions
            .iter()
            .any(|a| a.id.kind == super::nodes::KIND && a.action == ActionKind::Create)
    );
}

/// Issue 20: the Nodes a foreign MIG's VMs joined with, unlabelled (its
/// template's own script joined them), are observed as that MIG's by
/// providerID (`<baseInstanceName>-xxxx`), adopted with it, and labelled by
/// the adoption's one in-place step (labels only: nothing waits); Nodes
/// of VMs no MIG has are left out.
#[test]
fn adopting_a_mig_labels_the_nodes_its_vms_joined_with() {
    use crate::plan::adopt::{self, Selection};
    let f = fleet(&[slice("a", "4x4", "", "a")]);
    let r = replica(&f, "a");
    let mut inv = live_replica(&f, "a", 4, 0, |_| "made by gcloud".to_string());
    let base = r.mig.base_instance_name.clone().unwrap();
    let mut strays: Vec<NodeView> = (0..4)
        .map(|i| NodeView {
            name: format!("n{i}"),
            provider_id: format!("{}{base}-ab{i:02}", r.nodes.provider_id_prefix),
            labels: Default::default(),
            ..node(&r.nodes, i, true)
        })
        .collect();
    strays.push(NodeView {
        name: "elsewhere".into(),
        provider_id: format!("{}other-abcd", r.nodes.provider_id_prefix),
        ..strays[0].clone()
    });
    inv.resources
        .entry(super::nodes::KIND)
        .or_default()
        .push(LiveResource {
            scope: Scope::Kube(r.kube.clone()),
            body: Arc::new(NodeGroupLive {
                name: String::new(),
                owner: String::new(),
                slice: String::new(),
                replica: 0,
                nodes: strays,
                token_secrets: vec![],
                released: false,
                unlabelled: true,
            }),
        });
    for kind in [super::template::KIND, crate::kinds::workload_policy::KIND] {
        for l in inv.resources.entry(kind).or_default().iter_mut() {
            if let Some(t) = crate::kind::body_as::<InstanceTemplate>(&l.body) {
                l.body = Arc::new(InstanceTemplate {
                    description: Some("made by hand".into()),
                    ..t.clone()
                });
            }
            if let Some(p) =
                crate::kind::body_as::<crate::resource::compute::ResourcePolicy>(&l.body)
            {
                l.body = Arc::new(crate::resource::compute::ResourcePolicy {
                    description: Some("made by hand".into()),
                    ..p.clone()
                });
            }
        }
    }
    super::link::link(&mut inv);
    let groups = inv.live(super::nodes::KIND);
    assert_eq!(groups.len(), 1, "the stray of no MIG is left out");
    let g = crate::kind::body_as::<NodeGroupLive>(&groups[0].body).unwrap();
    assert_eq!(
        (g.name.as_str(), g.nodes.len(), g.unlabelled),
        ("a-0", 4, true)
    );
    let kinds = crate::kinds::plan_kinds();
    // Adopting the MIG takes its Nodes with it and labels them in place.
    let (props, _) = adopt::propose(
        &f.targets["k"],
        &inv,
        &kinds,
        &Selection::Names(vec!["a-0".into()]),
    );
    assert!(props[0].held.iter().any(|h| h.kind == super::nodes::KIND));
    let marked = marked_for(&inv, &props);
    let p = adoption_plan(&f, &marked, &props);
    assert!(p.refused.is_empty(), "{:?}", refusals(&p));
    let steps: Vec<(String, ActionKind)> =
        p.actions.iter().map(|a| (a.address(), a.action)).collect();
    assert_eq!(
        steps,
        vec![
            ("slice.a[0].mig".to_string(), ActionKind::Update),
            ("slice.a[0].nodes".to_string(), ActionKind::Update),
        ]
    );
    let n = &p.actions[1];
    assert_eq!(
        n.groups,
        std::collections::BTreeSet::from([super::nodes::GROUP_LABELS])
    );
    assert!(
        n.changes
            .iter()
            .all(|c| c.path.starts_with("nodes[n") && c.path.contains("].labels[")),
        "{:?}",
        n.changes
    );
    // A label another tool set to another value refuses the adoption.
    let mut other = marked.clone();
    for l in other
        .resources
        .entry(super::nodes::KIND)
        .or_default()
        .iter_mut()
    {
        let mut g = crate::kind::body_as::<NodeGroupLive>(&l.body)
            .unwrap()
            .clone();
        g.nodes[0]
            .labels
            .insert(render::LABEL_TOPOLOGY.to_string(), "2x2".into());
        l.body = Arc::new(g);
    }
    let p = adoption_plan(&f, &other, &props);
    let codes: Vec<String> = refusals(&p).into_iter().map(|(_, c)| c).collect();
    assert!(codes.iter().any(|c| c == "adopt_changes"), "{codes:?}");
}

/// Issue 20: an adopted slice that brought the live template
/// (`gce.instanceTemplate`) and is changed to render its own replaces its
/// MIG with one on a template of its own, and the brought template, which
/// the adopted MIG made the slice's, is deleted after that MIG.
#[test]
fn a_brought_template_is_deleted_once_its_adopted_mig_is_replaced() {
    let f = fleet(&[slice("a", "4x4", "", "a")]);
    let mut inv = live_replica(&f, "a", 4, 4, crate::plan::ownership::with_adopted);
    for l in inv
        .resources
        .entry(super::template::KIND)
        .or_default()
        .iter_mut()
    {
        let t = crate::kind::body_as::<InstanceTemplate>(&l.body).unwrap();
        l.body = Arc::new(InstanceTemplate {
            name: "mine".into(),
            description: Some("made by hand".into()),
            ..t.clone()
        });
    }
    // The MIG as adopting it with the template brought recorded it.
    let mut adopted = replica(&brought("a"), "a").mig;
    adopted.description = adopted
        .description
        .as_deref()
        .map(crate::plan::ownership::with_adopted);
    for l in inv
        .resources
        .entry(super::mig::KIND)
        .or_default()
        .iter_mut()
    {
        let m = crate::kind::body_as::<crate::resource::compute::InstanceGroupManager>(&l.body)
            .unwrap();
        l.body = Arc::new(crate::resource::compute::InstanceGroupManager {
            status: m.status.clone(),
            ..adopted.clone()
        });
    }
    super::link::link(&mut inv);
    let kinds = crate::kinds::plan_kinds();
    let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.refused.is_empty(), "{:?}", refusals(&p));
    assert_eq!(
        compute_actions(&p),
        vec![
            "Create instance_template a-0-it".to_string(),
            "Delete instance_template mine".to_string(),
            "Replace mig a-0".to_string(),
        ]
    );
    let (order, steps) = graph_order(&p);
    let at = |kind: &str, op: StepOp, name: &str| {
        steps
            .iter()
            .find(|s| {
                let a = &p.actions[s.action];
                a.id.kind.as_str() == kind && s.op == op && a.id.name == name
            })
            .map(|s| s.id)
            .unwrap_or_else(|| panic!("{kind} {op:?} {name}: {order:?}"))
    };
    let pos = |id: usize| {
        let mut done: Vec<usize> = Vec::new();
        while done.len() < steps.len() {
            let next = steps
                .iter()
                .find(|st| !done.contains(&st.id) && st.deps.iter().all(|d| done.contains(d)))
                .unwrap();
            done.push(next.id);
        }
        done.iter().position(|d| *d == id).unwrap()
    };
    let (new_t, old_t) = (
        at("instance_template", StepOp::Create, "a-0-it"),
        at("instance_template", StepOp::Delete, "mine"),
    );
    let (mig_del, mig_new) = (
        at("mig", StepOp::Delete, "a-0"),
        at("mig", StepOp::Create, "a-0"),
    );
    assert!(steps[old_t].deps.contains(&mig_del), "{order:?} {steps:?}");
    assert!(pos(new_t) < pos(mig_new), "{order:?}");
    assert!(pos(mig_del) < pos(old_t), "{order:?}");
    // Replaced onto the same brought template (another topology): it
    // stays, the new MIG uses it.
    let same = brought("a");
    let p = plan::plan(&same, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(
        !compute_actions(&p)
            .iter()
            .any(|a| a.starts_with("Delete instance_template")),
        "{:?}",
        compute_actions(&p)
    );
}

/// Issue 35, case 3: after a zone move, the old MIG's Nodes are its own VMs'
/// (by providerID: its project and zone), not every Node of its slice
/// replica: a pod on the new MIG's Node neither holds the idle old MIG's
/// delete nor is drained with it.
#[test]
fn a_moved_migs_nodes_are_its_own_vms_not_its_replacements() {
    use crate::plan::workload::{BoundPod, ClusterWorkloads, HostNode, Workloads};
    let before = fleet(&[slice("z", "2x2", "", "a")]);
    let old = replica(&before, "z");
    let in_zone_a = |extra: &str| {
        let text = format!(
            "{}{}",
            TARGET.replace(
                "zone: us-central1-b",
                "zone: us-central1-a\n  allowUnlistedZone: true"
            ),
            slice("z", "2x2", extra, "a")
        );
        crate::spec::load(&[SourceFile {
            path: "specs/f.yaml".into(),
            text,
        }])
        .unwrap_or_else(|d| panic!("{d:?}"))
    };
    let kinds = crate::kinds::plan_kinds();
    for extra in ["", "  disruption: {whenBusy: drain}\n"] {
        let after = in_zone_a(extra);
        let new = replica(&after, "z");
        // The old MIG (zone b) and its replacement (zone a, created by an
        // earlier apply) both run; one Node each, labelled alike.
        let mut inv = live_replica(&before, "z", 1, 1, as_written);
        let fresh = live_replica(&after, "z", 1, 0, as_written);
        for l in fresh.live(super::mig::KIND) {
            inv.resources
                .entry(super::mig::KIND)
                .or_default()
                .push(l.clone());
        }
        let host = |name: &str, zone: &str, pods: Vec<BoundPod>| HostNode {
            name: name.into(),
            labels: old.nodes.labels.clone(),
            provider_id: format!("gce://proj-one/{zone}/z-0-{name}"),
            pods,
            ..HostNode::default()
        };
        let train = BoundPod {
            namespace: "ml".into(),
            name: "train-0".into(),
            owner: None,
            do_not_disrupt: false,
        };
        inv.workloads = Workloads {
            observed_at: Some("2026-11-28T02:00:00Z".parse().unwrap()),
            clusters: [(
                new.kube.clone(),
                ClusterWorkloads::Seen(vec![
                    host("oldb", "us-central1-b", vec![]),
                    host("newa", "us-central1-a", vec![train.clone()]),
                ]),
            )]
            .into(),
            simulated: false,
        };
        let p = plan::plan(&after, &inv, &kinds, &PlanOptions::default()).unwrap();
        assert!(p.held.is_empty(), "{extra}: {:#?}", p.held);
        let old_mig = p
            .actions
            .iter()
            .find(|a| {
                a.id.kind == super::mig::KIND
                    && a.action == ActionKind::Delete
                    && a.id.scope == Scope::Zone(old.zone.clone())
            })
            .unwrap_or_else(|| panic!("{extra}: {:#?}", p.actions));
        assert_eq!(old_mig.reason.code(), "moved");
        // Idle: no drain, and only its own Node is looked at again.
        assert!(old_mig.disruption.is_none(), "{:?}", old_mig.disruption);
        assert_eq!(
            old_mig.recheck,
            Some((new.kube.clone(), vec!["oldb".to_string()]))
        );
        assert!(
            !p.actions.iter().any(|a| a.id.kind == super::mig::KIND
                && a.id.scope == Scope::Zone(new.zone.clone())
                && a.action.is_destructive()),
            "{:#?}",
            p.actions
        );
    }
}
/// What was read of the cluster of slice `x`'s replica 0: its Nodes, the
/// first `busy` of them running a pod (outside `--sim`).
fn busy_nodes(r: &render::GceReplica, nodes: usize, busy: usize) -> plan::workload::Workloads {
    use crate::plan::ownership::{OWNER, REPLICA, SLICE};
    use crate::plan::workload::{BoundPod, ClusterWorkloads, HostNode};
    let hosts: Vec<HostNode> = (0..nodes)
        .map(|i| HostNode {
            name: format!("x-0-node-{i}"),
            labels: [
                (OWNER.to_string(), "o".to_string()),
                (SLICE.to_string(), "x".to_string()),
                (REPLICA.to_string(), "0".to_string()),
            ]
            .into(),
            pods: (i < busy)
                .then(|| BoundPod {
                    namespace: "ml".into(),
                    name: format!("train-{i}"),
                    owner: None,
                    do_not_disrupt: false,
                })
                .into_iter()
                .collect(),
            ..HostNode::default()
        })
        .collect();
    plan::workload::Workloads {
        observed_at: Some("2026-11-26T05:00:00Z".parse().unwrap()),
        clusters: [(r.kube.clone(), ClusterWorkloads::Seen(hosts))].into(),
        simulated: false,
    }
}

/// Issue 35 case 7: the `node_lost` recreate of a busy 2-host-of-4 slice
/// goes through the gate (held under the default `whenBusy: wait`), and
/// `destroy` keeps the cluster's device plugin while a slice of the
/// cluster remains, held or not.
#[test]
fn a_busy_replicas_lost_node_recreate_and_its_device_plugin_ask_the_gate() {
    let f = fleet(&[slice("x", "4x4", "", "a")]);
    let r = replica(&f, "x");
    let kinds = crate::kinds::plan_kinds();
    let mut inv = live_replica(&f, "x", 4, 2, as_written);
    inv.workloads = busy_nodes(&r, 2, 1);
    let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(
        p.actions.iter().all(|a| a.reason.code() != "node_lost"),
        "{:?}",
        p.actions.iter().map(|a| a.address()).collect::<Vec<_>>()
    );
    let h = p
        .held
        .iter()
        .find(|h| h.kind == "nodes")
        .unwrap_or_else(|| panic!("the recreate is held: {:?}", p.held));
    assert_eq!(h.code, "busy");
    assert!(h.reason.contains("recreate"), "{}", h.reason);
    // Idle: it goes ahead.
    inv.workloads = busy_nodes(&r, 2, 0);
    let p = plan::plan(&f, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(p.held.is_empty(), "{:?}", p.held);
    assert!(p.actions.iter().any(|a| a.reason.code() == "node_lost"));

    // destroy: the busy MIG is held, and so is the device plugin under it.
    let mut inv = live_replica(&f, "x", 4, 4, as_written);
    inv.resources
        .entry(device_plugin::KIND)
        .or_default()
        .push(LiveResource {
            scope: Scope::Kube(r.kube.clone()),
            body: Arc::new(device_plugin::objects("img", "o").unwrap().daemon_set),
        });
    inv.workloads = busy_nodes(&r, 4, 1);
    let p = plan::plan_destroy(&f, &inv, &kinds, 10).unwrap();
    assert!(
        p.actions.iter().all(|a| a.id.kind != device_plugin::KIND),
        "{:?}",
        p.actions.iter().map(|a| a.address()).collect::<Vec<_>>()
    );
    let dp = p
        .held
        .iter()
        .find(|h| h.kind == "device_plugin")
        .unwrap_or_else(|| panic!("{:?}", p.held));
    assert_eq!(dp.code, "in_use");
    assert!(dp.message.contains("x-0"), "{}", dp.message);
    // Nothing runs: everything goes, the device plugin last.
    inv.workloads = busy_nodes(&r, 4, 0);
    let p = plan::plan_destroy(&f, &inv, &kinds, 10).unwrap();
    assert!(p.held.is_empty(), "{:?}", p.held);
    assert!(p.actions.iter().any(|a| a.id.kind == device_plugin::KIND));
}

/// Slices `names` (4x4 v6e on `topo`) on the one brought template
/// `shared-tmpl`.
fn on_shared_template(names: &[&str], topo: &str) -> Fleet {
    let mut text = TARGET.to_string();
    for n in names {
        text.push_str(&format!(
            "---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: {n}}}\nspec:\n  target: k\n  backend: gce\n  accelerator: tpu-v6e-slice\n  topology: \"{topo}\"\n  gce:\n    instanceTemplate: projects/proj-one/global/instanceTemplates/shared-tmpl\n"
        ));
    }
    crate::spec::load(&[SourceFile {
        path: "specs/f.yaml".into(),
        text,
    }])
    .unwrap_or_else(|d| panic!("{d:?}"))
}

/// Issue 35 case 8: two adopted MIGs share the user's template
/// `shared-tmpl`. Removing one Slice deletes its MIG and never the
/// template the other still uses, nor while a step of the same plan (the
/// other MIG's replacement) will use it; once nothing names it, it goes.
#[test]
fn a_shared_brought_template_is_deleted_only_when_nothing_names_it() {
    let both = on_shared_template(&["a", "b"], "4x4");
    let kinds = crate::kinds::plan_kinds();
    let mut inv = Inventory::default();
    inv.workloads.simulated = true;
    // b's MIG first: a's is the last to mark the template as its own.
    for n in ["b", "a"] {
        let r = replica(&both, n);
        let mut m = r.mig.clone();
        m.description = m
            .description
            .as_deref()
            .map(crate::plan::ownership::with_adopted);
        m.status = Some(crate::resource::compute::InstanceGroupManagerStatus {
            is_stable: true,
            current_instance_statuses: Some(crate::resource::compute::InstanceStatusSummary {
                running: Some(m.target_size),
                ..Default::default()
            }),
            ..Default::default()
        });
        inv.resources
            .entry(super::mig::KIND)
            .or_default()
            .push(LiveResource {
                scope: Scope::Zone(r.zone.clone()),
                body: Arc::new(m),
            });
    }
    let own = fleet(&[slice("t", "4x4", "", "a")]);
    let t = replica(&own, "t").template.unwrap();
    inv.resources
        .entry(super::template::KIND)
        .or_default()
        .push(LiveResource {
            scope: Scope::Global(replica(&own, "t").project.clone()),
            body: Arc::new(InstanceTemplate {
                name: "shared-tmpl".into(),
                description: Some("made by hand".into()),
                ..t
            }),
        });
    super::link::link(&mut inv);
    let deletes_template = |p: &plan::Plan| {
        compute_actions(p)
            .iter()
            .any(|a| a == "Delete instance_template shared-tmpl")
    };
    // Slice a removed: its MIG goes, the template b uses stays.
    let only_b = on_shared_template(&["b"], "4x4");
    let p = plan::plan(&only_b, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(
        compute_actions(&p).contains(&"Delete mig a-0".to_string()),
        "{:?}",
        compute_actions(&p)
    );
    assert!(!deletes_template(&p), "{:?}", compute_actions(&p));
    // The same run replaces b's MIG (onto the same template): still kept.
    let reshaped = on_shared_template(&["b"], "4x8");
    let p = plan::plan(&reshaped, &inv, &kinds, &PlanOptions::default()).unwrap();
    assert!(
        compute_actions(&p).contains(&"Replace mig b-0".to_string()),
        "{:?}",
        compute_actions(&p)
    );
    assert!(!deletes_template(&p), "{:?}", compute_actions(&p));
    // destroy of both: nothing names it any more, it goes after the MIGs.
    let p = plan::plan_destroy(&both, &inv, &kinds, 10).unwrap();
    assert!(deletes_template(&p), "{:?}", compute_actions(&p));
}
