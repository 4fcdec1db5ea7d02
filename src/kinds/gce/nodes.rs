//! The Nodes of a `gce` slice replica, as a kind: the Kubernetes side of a
//! self-managed slice. Desired: `hosts` Nodes, matched to the MIG's VMs by
//! providerID (`gce://PROJECT/ZONE/INSTANCE`), labelled and tainted, Ready
//! with `google.com/tpu` = chips per host, and no bootstrap token left.
//! Live: the Nodes carrying the slice replica's ownership labels (registered
//! with them through `kube-labels`), and its bootstrap-token Secrets.
//!
//! Creating or updating drives the pull-model bootstrap (see [`super::drive`]);
//! deleting cordons the Nodes (before the MIG goes), and the cleanup step,
//! after the MIG, template and policy are gone, deletes the Node objects and
//! the Secrets. Nodes registered under another generation (the MIG's hash)
//! belong to VMs being replaced: the group is replaced with them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::render::{self, NodeGroup};
use crate::kind::hash::FieldChange;
use crate::kind::ownership::{self, Ownership};
use crate::kind::{
    Body, Comparison, Desired, Kind, KindId, LiveState, RenderCtx, Scope, UpdateGroup,
};
use crate::kind::{LiveReport, body_as};

/// The kind's name.
pub const KIND: KindId = KindId("nodes");

/// Join VMs, wait for Ready, remove tokens.
pub const GROUP_JOIN: UpdateGroup = UpdateGroup("join");
/// Patch labels and taints onto joined Nodes.
pub const GROUP_LABELS: UpdateGroup = UpdateGroup("labels");
/// Recreate, through the MIG, the VMs that joined and whose Node is gone.
pub const GROUP_RECREATE_LOST: UpdateGroup = UpdateGroup("recreate_lost");

/// The Nodes kind.
#[derive(Debug, Clone, Copy)]
pub struct Nodes;

/// One observed Node, as the planner needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    /// Node name.
    pub name: String,
    /// `spec.providerID`.
    #[serde(default)]
    pub provider_id: String,
    /// `Ready=True`.
    #[serde(default)]
    pub ready: bool,
    /// `google.com/tpu` capacity.
    #[serde(default)]
    pub tpu_capacity: Option<u32>,
    /// `google.com/tpu` allocatable.
    #[serde(default)]
    pub tpu_allocatable: Option<u32>,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Taints, `key=value:Effect`.
    #[serde(default)]
    pub taints: Vec<String>,
    /// `spec.unschedulable` (cordoned).
    #[serde(default)]
    pub unschedulable: bool,
}

impl NodeView {
    /// Ready with `chips` TPU chips, capacity = allocatable (tpu-anchors §B.6).
    pub fn ready_with(&self, chips: u32) -> bool {
        self.ready && self.tpu_capacity == Some(chips) && self.tpu_allocatable == Some(chips)
    }
}

/// The live Nodes and bootstrap Secrets of one slice replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupLive {
    /// The group's name (its MIG's).
    pub name: String,
    /// Ownership read from the labels.
    pub owner: String,
    /// Slice.
    pub slice: String,
    /// Replica.
    pub replica: u32,
    /// The Nodes.
    #[serde(default)]
    pub nodes: Vec<NodeView>,
    /// Names of the replica's bootstrap-token Secrets (never their tokens).
    #[serde(default)]
    pub token_secrets: Vec<String>,
    /// Not on the wire: a MIG of the group's name is live and slicectl's
    /// no more (released): its Nodes, which keep the labels their VMs
    /// registered with, are not slicectl's either (`super::link`).
    #[serde(skip)]
    pub released: bool,
    /// Nodes that joined without slicectl's labels (a brought template's
    /// own startup script joined them), matched to a MIG's VMs by
    /// providerID (`super::link`): no owner yet. Labelled by `adopt` (a
    /// foreign MIG's) or by the next `apply` (slicectl's own MIG's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unlabelled: bool,
}

impl NodeGroupLive {
    /// Ownership, as the labels say (the protection stamp from any Node).
    pub fn ownership(&self) -> Ownership {
        let generation = self
            .nodes
            .iter()
            .find_map(|n| n.labels.get(ownership::SPEC_HASH).cloned());
        Ownership {
            owner: self.owner.clone(),
            slice: self.slice.clone(),
            replica: self.replica,
            target: None,
            spec_hash: generation,
            hash_version: Some(crate::kind::hash::HASH_VERSION.to_string()),
            prevent_destroy: self.nodes.iter().any(|n| {
                n.labels.get(ownership::PREVENT_DESTROY).map(String::as_str) == Some("true")
            }),
        }
    }
}

fn group(b: &Body) -> Option<&NodeGroupLive> {
    body_as::<NodeGroupLive>(b)
}

fn desired_group(b: &Body) -> Option<&NodeGroup> {
    body_as::<NodeGroup>(b)
}

/// How the live Nodes differ from the desired ones.
pub fn differences(
    want: &NodeGroup,
    live: &NodeGroupLive,
) -> (Vec<FieldChange>, BTreeSet<UpdateGroup>, bool) {
    let mut changes = Vec::new();
    let mut groups = BTreeSet::new();
    let ours: Vec<&NodeView> = live
        .nodes
        .iter()
        .filter(|n| n.provider_id.starts_with(&want.provider_id_prefix))
        .collect();
    // Another generation: the VMs these Nodes were are being replaced.
    let stale: Vec<&str> = ours
        .iter()
        .filter(|n| {
            n.labels
                .get(ownership::SPEC_HASH)
                .is_some_and(|h| h != &want.generation)
        })
        .map(|n| n.name.as_str())
        .collect();
    if !stale.is_empty() {
        changes.push(FieldChange {
            path: "nodes.generation".into(),
            before: Some(Value::from(stale.join(","))),
            after: Some(Value::from(want.generation.clone())),
            forces_replacement: true,
        });
        return (changes, groups, true);
    }
    let ready = ours.iter().filter(|n| n.ready_with(want.chips)).count();
    // A brought template's VMs join by its own startup script: slicectl
    // has no join to drive, so Nodes missing are no step of its own (the
    // plan notes them, [`Kind::unjoined`]); the Nodes there are labelled.
    if ready != want.hosts as usize && want.bootstrap {
        changes.push(FieldChange {
            path: "nodes.ready".into(),
            before: Some(Value::from(ready)),
            after: Some(Value::from(want.hosts)),
            forces_replacement: false,
        });
        groups.insert(GROUP_JOIN);
    }
    if !live.token_secrets.is_empty() {
        changes.push(FieldChange {
            path: "bootstrapTokens".into(),
            before: Some(Value::from(live.token_secrets.len())),
            after: Some(Value::from(0)),
            forces_replacement: false,
        });
        groups.insert(GROUP_JOIN);
    }
    let cordoned = ours.iter().filter(|n| n.unschedulable).count();
    if cordoned > 0 {
        changes.push(FieldChange {
            path: "nodes.unschedulable".into(),
            before: Some(Value::from(cordoned)),
            after: Some(Value::from(0)),
            forces_replacement: false,
        });
        groups.insert(GROUP_JOIN);
    }
    for n in &ours {
        for (k, v) in &want.labels {
            if n.labels.get(k) != Some(v) {
                changes.push(FieldChange {
                    path: format!("nodes[{}].labels[{k:?}]", n.name),
                    before: n.labels.get(k).cloned().map(Value::from),
                    after: Some(Value::from(v.clone())),
                    forces_replacement: false,
                });
                groups.insert(GROUP_LABELS);
            }
        }
        if !want.labels.contains_key(ownership::PREVENT_DESTROY)
            && n.labels.contains_key(ownership::PREVENT_DESTROY)
        {
            changes.push(FieldChange {
                path: format!("nodes[{}].labels[{:?}]", n.name, ownership::PREVENT_DESTROY),
                before: Some(Value::from("true")),
                after: None,
                forces_replacement: false,
            });
            groups.insert(GROUP_LABELS);
        }
        for t in &want.taints {
            if !n.taints.contains(t) {
                changes.push(FieldChange {
                    path: format!("nodes[{}].taints", n.name),
                    before: None,
                    after: Some(Value::from(t.clone())),
                    forces_replacement: false,
                });
                groups.insert(GROUP_LABELS);
            }
        }
    }
    (changes, groups, false)
}

/// What the plan says of a brought template's MIG whose VMs are not all
/// Ready Nodes: slicectl hands them no token (the template's own startup
/// script joins them), so no step of its own could make them join.
pub fn unjoined_note(want: &NodeGroup, ready: usize) -> String {
    format!(
        "unjoined: {ready} of {} VM(s) of MIG {} are Ready Nodes. Its instance template is brought \
         (gce.instanceTemplate): its own startup script joins the VMs, slicectl hands them no token, \
         so there is nothing to apply until they join; the next plan labels the Nodes that joined. \
         If they never do, check the template's startup script (`gcloud compute instances \
         get-serial-port-output`)",
        want.hosts, want.mig
    )
}

impl Kind for Nodes {
    fn scopes(&self, t: &crate::spec::Target) -> Vec<Scope> {
        super::kube_scope(t)
    }

    fn id(&self) -> KindId {
        KIND
    }

    fn noun(&self) -> &'static str {
        "nodes"
    }

    fn depends_on(&self) -> &'static [KindId] {
        &[super::mig::KIND, super::device_plugin::KIND]
    }

    fn lists_unmanaged(&self) -> bool {
        false
    }

    fn cleanup_after_dependencies(&self) -> bool {
        true
    }

    fn reports_nodes(&self) -> bool {
        true
    }

    fn replaced_with_dependencies(&self) -> bool {
        true
    }

    fn render(&self, ctx: RenderCtx<'_>) -> Vec<Desired> {
        let Some(r) = render::render(ctx.target, &ctx.stem_slice(), ctx.replica) else {
            return Vec::new();
        };
        // The group is named after the slice replica (`<slice>-<replica>`,
        // as its Nodes' labels say), also when its MIG has a name of its
        // own (`gce.migName`).
        let name = crate::kind::names::mig(ctx.stem, ctx.replica);
        vec![ctx.desired(KIND, Scope::Kube(r.kube), name, r.nodes)]
    }

    fn name(&self, live: &Body) -> String {
        group(live).map(|g| g.name.clone()).unwrap_or_default()
    }

    fn ownership(&self, live: &Body) -> Option<Ownership> {
        group(live)
            .filter(|g| !g.released && !g.unlabelled)
            .map(NodeGroupLive::ownership)
    }

    fn state(&self, _live: &Body) -> LiveState {
        LiveState::Ok
    }

    fn compare(&self, desired: &Desired, live: &Body) -> Comparison {
        let (Some(want), Some(l)) = (desired_group(&desired.body), group(live)) else {
            return Comparison::Equal;
        };
        let (changes, groups, replace) = differences(want, l);
        if replace {
            Comparison::Replace {
                changes,
                hash_only: false,
            }
        } else if groups.is_empty() {
            Comparison::Equal
        } else {
            Comparison::Update { changes, groups }
        }
    }

    fn recreate_lost_hosts(
        &self,
        desired: Option<&Body>,
        live: Option<&Body>,
    ) -> Option<UpdateGroup> {
        // A brought template's VMs report nothing to slicectl: one that
        // never joined is not told from one that lost its Node, so none is
        // recreated (the plan notes them, [`Kind::unjoined`]).
        if desired
            .and_then(desired_group)
            .is_some_and(|w| !w.bootstrap)
        {
            return None;
        }
        // A bootstrap token out means a join is under way: its VMs are not
        // known lost (the Secrets go once every Node of the replica joined).
        let joining = live
            .and_then(group)
            .is_some_and(|g| !g.token_secrets.is_empty());
        (!joining).then_some(GROUP_RECREATE_LOST)
    }

    fn unjoined(&self, desired: &Desired, live: Option<&Body>) -> Option<String> {
        let want = desired_group(&desired.body).filter(|w| !w.bootstrap)?;
        let ready = live.and_then(group).map_or(0, |g| {
            g.nodes
                .iter()
                .filter(|n| n.provider_id.starts_with(&want.provider_id_prefix))
                .filter(|n| n.ready_with(want.chips))
                .count()
        });
        (ready < want.hosts as usize).then(|| unjoined_note(want, ready))
    }

    fn stamped_hosts(&self, live: &Body) -> Option<u32> {
        group(live).map(|g| u32::try_from(g.nodes.len()).unwrap_or(u32::MAX))
    }

    fn lift_protection(&self, desired: &Desired, live: &Body) -> Option<(Body, Comparison)> {
        let (Some(want), Some(l)) = (desired_group(&desired.body), group(live)) else {
            return None;
        };
        // Lift the stamp only: keep the Nodes' generation as it is.
        let mut lifted = want.clone();
        lifted.labels.remove(ownership::PREVENT_DESTROY);
        lifted.generation = l.ownership().spec_hash.unwrap_or(lifted.generation);
        if let Some(h) = lifted.labels.get_mut(ownership::SPEC_HASH) {
            *h = lifted.generation.clone();
        }
        let changes = vec![FieldChange {
            path: format!("nodes.labels[{:?}]", ownership::PREVENT_DESTROY),
            before: Some(Value::from("true")),
            after: None,
            forces_replacement: false,
        }];
        Some((
            Arc::new(lifted) as Body,
            Comparison::Update {
                changes,
                groups: BTreeSet::from([GROUP_LABELS]),
            },
        ))
    }

    fn display_live(&self, live: &Body, _desired: Option<&Desired>) -> Value {
        serde_json::to_value(group(live)).unwrap_or(Value::Null)
    }

    fn parse(&self, json: Value) -> Result<Body, String> {
        serde_json::from_value::<NodeGroupLive>(json)
            .map(|g| Arc::new(g) as Body)
            .map_err(|e| e.to_string())
    }

    /// Readiness by the one rule of both backends
    /// ([`crate::kinds::readiness`]): the replica's Nodes (those of its
    /// VMs) Ready, with the accelerator and topology labels and
    /// `google.com/tpu` = chips per host.
    fn report_nodes(&self, live: Option<&Body>, desired: &Desired, hosts: u32) -> LiveReport {
        let Some(want) = desired_group(&desired.body) else {
            return match live {
                Some(l) => self.report(l, hosts),
                None => LiveReport::default(),
            };
        };
        let g = live.and_then(group);
        let nodes: Vec<&NodeView> = g
            .map(|g| {
                g.nodes
                    .iter()
                    .filter(|n| n.provider_id.starts_with(&want.provider_id_prefix))
                    .collect()
            })
            .unwrap_or_default();
        let expect = crate::kinds::readiness::Expect {
            hosts: want.hosts,
            chips: want.chips,
            labels: [render::LABEL_ACCELERATOR, render::LABEL_TOPOLOGY]
                .into_iter()
                .filter_map(|k| Some((k.to_string(), want.labels.get(k)?.clone())))
                .collect(),
        };
        let r = crate::kinds::readiness::judge(&nodes, &expect);
        let mut report = match live {
            Some(l) => self.report(l, hosts),
            None => LiveReport::default(),
        };
        report.nodes = match g {
            Some(_) => format!("{} ({} joined)", r.nodes_column(), nodes.len()),
            None => r.nodes_column(),
        };
        if report.error.is_empty() && !r.why.is_empty() && g.is_some() {
            report.error = format!("{}{}", crate::kinds::readiness::NOT_READY_PREFIX, r.why);
        }
        report
    }

    fn report(&self, live: &Body, hosts: u32) -> LiveReport {
        let Some(g) = group(live) else {
            return LiveReport::default();
        };
        let chips = g
            .nodes
            .iter()
            .filter_map(|n| n.labels.get(render::LABEL_ACCELERATOR_COUNT))
            .find_map(|c| c.parse().ok())
            .unwrap_or(0);
        let ready = g.nodes.iter().filter(|n| n.ready_with(chips)).count();
        LiveReport {
            state: if g.nodes.iter().any(|n| n.unschedulable) {
                "CORDONED".into()
            } else {
                String::new()
            },
            nodes: format!("{ready}/{hosts} ready ({} joined)", g.nodes.len()),
            error: if !g.token_secrets.is_empty() && (g.nodes.len() as u32) < hosts {
                format!(
                    "{} of {hosts} VM(s) have not joined and a bootstrap token is out; `slicectl apply` \
                     drives the join and shows each VM's own report",
                    hosts - g.nodes.len() as u32
                )
            } else {
                String::new()
            },
            topology: String::new(),
        }
    }
}
