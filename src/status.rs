//! Per slice replica status: what `slicectl status` shows and what
//! reconciliation reports. One row per slice replica, read from the
//! replica's primary resource (a node pool for GKE), plus owned resources no
//! longer in the specs.

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;

use std::collections::BTreeSet;

use crate::plan::{
    Comparison, Inventory, Kind, LiveState, Owners, ResourceId, Scope, claims, render_fleet_at,
    replica_indices, stems,
};
use crate::spec::Fleet;

/// One row of the status table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// Slice name.
    pub slice: String,
    /// Replica index.
    pub replica: u32,
    /// Name of the replica's primary resource (the node pool).
    pub node_pool: String,
    /// `gke` or `gce`.
    pub backend: String,
    /// Accelerator.
    pub accelerator: String,
    /// Topology.
    pub topology: String,
    /// Live state: the resource's status, MISSING, ORPHANED, NOT OWNED (a
    /// resource slicectl does not own sits under the slice's name), or NOT
    /// OBSERVED (its Target could not be observed; the last error says why).
    pub state: String,
    /// `R/H ready`: the replica's Nodes ready for a TPU job (Ready, with
    /// the TPU labels and `google.com/tpu` = chips per host), read from its
    /// cluster's Kubernetes API, against the hosts the slice needs (a
    /// self-managed slice adds `(N joined)`); `?/H` when its Nodes were not
    /// read (`nodes_unobserved` says why).
    pub nodes: String,
    /// Why the replica's Nodes were not read (its cluster's Kubernetes API
    /// deferred: `--sim`, or no Google token for a GKE cluster's API);
    /// empty when they were. Readiness is then unknown, never assumed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub nodes_unobserved: String,
    /// Last error, if any.
    pub last_error: String,
    /// Project of the replica's primary resource.
    pub project: String,
    /// Cluster it is in: the GKE cluster's name, or for a self-managed
    /// slice its Target's control-plane endpoint.
    pub cluster: String,
    /// Location of the primary resource: the GKE cluster's region or zone,
    /// or the MIG's zone.
    pub location: String,
    /// The topology the live resource has, where it says (empty when none
    /// is live or the resource does not say).
    pub live_topology: String,
    /// What the next apply does to the live resource: `replace`, `update`,
    /// `create`, `delete`, or empty when it matches the specs.
    pub pending: String,
    /// Where the slice comes from: empty for the specs, `jobset NS/NAME`
    /// for a workload slice (docs/workloads.md).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// A workload slice's JobSet and phase (not serialised: `last_error`
    /// shows the phase, and the JobSet gets an Event per phase).
    #[serde(skip)]
    pub workload: Option<crate::workload::Standing>,
}

/// The state of a slice replica whose Target could not be observed.
pub const NOT_OBSERVED: &str = "NOT OBSERVED";

/// Project, cluster and location of a primary resource's scope (`cluster`
/// given for scopes that do not name one).
fn place(scope: &Scope, cluster: &str) -> (String, String, String) {
    match scope {
        Scope::Cluster(c) => (c.project.clone(), c.name.clone(), c.location.clone()),
        Scope::Zone(z) => (z.project.clone(), cluster.to_string(), z.zone.clone()),
        Scope::Region(r) => (r.project.clone(), cluster.to_string(), r.region.clone()),
        Scope::Global(g) => (g.project.clone(), cluster.to_string(), "global".into()),
        Scope::Kube(k) => (String::new(), k.endpoint.clone(), String::new()),
    }
}

/// Builds the rows.
pub fn rows(fleet: &Fleet, inv: &Inventory, kinds: &[&dyn Kind]) -> Vec<Row> {
    // Workload slices pending JobSets ask for are rows like any other; the
    // live ones nothing asks for now say whether they are kept or released.
    let demand = crate::plan::workload_demand(fleet, inv, kinds);
    let extended = demand.extend(fleet);
    let fleet = &extended;
    let owners = Owners::of(fleet, kinds);
    let mut out = Vec::new();
    let primary: Vec<&dyn Kind> = kinds.iter().copied().filter(|k| k.is_primary()).collect();
    // The replicas the planner keeps (working ones first after a scale-down).
    let indices = replica_indices(fleet, inv, kinds);
    // A declared rename's replicas keep their old resource names.
    let stems = stems(fleet, inv, kinds, &indices);
    let desired = render_fleet_at(fleet, &primary, &indices, &stems);
    let wanted: BTreeSet<&ResourceId> = desired.iter().map(|d| &d.id).collect();
    for d in &desired {
        let (Some(slice), Some(kind)) = (
            fleet.slices.get(&d.owner.slice),
            primary.iter().find(|k| k.id() == d.id.kind),
        ) else {
            continue;
        };
        let hosts = slice.shape.hosts;
        // Its Target could not be observed: nothing about it is known, and
        // nothing is done to it.
        if let Some((scope, why)) = fleet
            .target_of(slice)
            .filter(|_| !inv.unobserved.is_empty())
            .and_then(|t| {
                Owners::scopes_of(t, kinds)
                    .into_iter()
                    .find_map(|s| inv.unobserved.get(&s).map(|w| (s, w)))
            })
        {
            let (project, cluster, location) = place(&d.id.scope, "");
            out.push(Row {
                slice: d.owner.slice.clone(),
                replica: d.owner.replica,
                node_pool: d.id.name.clone(),
                backend: slice.spec.backend.as_str().to_string(),
                accelerator: slice.spec.accelerator.clone(),
                topology: slice.shape.topology.clone(),
                state: NOT_OBSERVED.to_string(),
                nodes: format!("?/{hosts}"),
                nodes_unobserved: format!("its Target {} could not be observed", slice.spec.target),
                last_error: format!(
                    "[{}] target {} could not be observed ({scope}): {}",
                    why.code, slice.spec.target, why.cause
                ),
                project,
                cluster,
                location,
                live_topology: String::new(),
                pending: String::new(),
                source: String::new(),
                workload: None,
            });
            continue;
        }
        let live = inv
            .live(d.id.kind)
            .iter()
            .find(|l| l.scope == d.id.scope && kind.name(&l.body) == d.id.name);
        let own = live.and_then(|l| kind.ownership(&l.body));
        let ours = owners.owns(&d.id.scope, own.as_ref())
            && own.as_ref().is_some_and(|o| {
                claims(fleet, kinds, slice, o, &d.id.scope) && o.replica == d.owner.replica
            });
        let mut live_topology = String::new();
        let mut pending = String::new();
        let live_primary = live.is_some() && ours;
        let (state, nodes, mut last_error) = match live {
            None => {
                pending = "create".into();
                ("MISSING".to_string(), format!("0/{hosts}"), String::new())
            }
            Some(_) if !ours => (
                "NOT OWNED".to_string(),
                format!("?/{hosts}"),
                format!(
                    "a {} slicectl does not own has this slice's name; `slicectl plan` says whose it is and what to do",
                    kind.noun()
                ),
            ),
            Some(l) => {
                let r = kind.report(&l.body, hosts);
                live_topology = r.topology;
                pending = match (kind.state(&l.body), kind.compare(d, &l.body)) {
                    (LiveState::Error { .. }, _) | (_, Comparison::Replace { .. }) => {
                        "replace".into()
                    }
                    (_, Comparison::Update { .. }) => "update".into(),
                    (_, Comparison::Equal) => String::new(),
                };
                (r.state, r.nodes, r.error)
            }
        };
        // What is live, and what is pending: `2x4 → 4x4 (pending replace)`.
        let want = &slice.shape.topology;
        let topology = match (pending.as_str(), live_topology.as_str()) {
            ("replace", "") => format!("{want} (pending replace)"),
            ("replace", now) if now != want => format!("{now} → {want} (pending replace)"),
            ("replace", _) => format!("{want} (pending replace)"),
            _ => want.clone(),
        };
        let (project, cluster, location) = place(
            &d.id.scope,
            fleet
                .target_of(slice)
                .and_then(|t| t.spec.gce.as_ref())
                .map(|g| g.control_plane_endpoint.as_str())
                .unwrap_or_default(),
        );
        if last_error.is_empty()
            && let Some(op) = inv.last_error(d.id.kind, &d.id.scope, &d.id.name)
        {
            last_error = op.error.clone().unwrap_or_default();
        }
        // A slice's nodes come from its Nodes (read in its cluster's
        // Kubernetes API), not from its node pool or MIG.
        let mut nodes = nodes;
        let mut state = state;
        let mut nodes_unobserved = String::new();
        // A resource slicectl does not own under the slice's name: its
        // Nodes are not this slice's.
        let not_ours = live.is_some() && !ours;
        for nk in kinds.iter().filter(|k| k.reports_nodes() && !not_ours) {
            let Some(want) = nk
                .render(crate::plan::RenderCtx {
                    target: match fleet.target_of(slice) {
                        Some(t) => t,
                        None => continue,
                    },
                    slice,
                    replica: d.owner.replica,
                    stem: stems
                        .get(&(slice.name.clone(), d.owner.replica))
                        .unwrap_or(&slice.name),
                })
                .into_iter()
                .next()
            else {
                continue;
            };
            if let Some(why) = inv.deferred.get(&want.id.scope) {
                nodes = format!("?/{hosts}");
                let first = why.split(". ").next().unwrap_or(why);
                nodes_unobserved = first.to_string();
                if last_error.is_empty() {
                    last_error = match slice.spec.backend {
                        crate::spec::model::Backend::Gce => format!("not joined: {first}"),
                        crate::spec::model::Backend::Gke => {
                            format!("readiness unknown, Nodes not read: {first}")
                        }
                    };
                }
                continue;
            }
            let live = inv
                .live(nk.id())
                .iter()
                .find(|l| l.scope == want.id.scope && nk.name(&l.body) == want.id.name);
            let r = nk.report_nodes(live.map(|l| &l.body), &want, hosts);
            nodes = r.nodes;
            if !r.state.is_empty() {
                state = format!("{state}, {}", r.state);
            }
            // A pool that is not there has no Nodes to explain.
            if last_error.is_empty() && live_primary {
                last_error = r.error;
            }
        }
        // A pending JobSet's slice: where it stands for the JobSet.
        let workload = slice
            .workload
            .as_ref()
            .map(|origin| crate::workload::Standing {
                origin: origin.clone(),
                phase: crate::workload::phase::asked(
                    &d.id.name,
                    &state,
                    &nodes,
                    &last_error,
                    slice.spec.capacity.kind == crate::spec::model::CapacityType::FlexStart,
                ),
            });
        if let Some(p) = workload.as_ref().and_then(|w| w.phase.as_ref())
            && p.reason != crate::workload::phase::READY
            && nodes_unobserved.is_empty()
        {
            last_error = p.message.clone();
        }
        out.push(Row {
            slice: d.owner.slice.clone(),
            replica: d.owner.replica,
            node_pool: d.id.name.clone(),
            backend: slice.spec.backend.as_str().to_string(),
            accelerator: slice.spec.accelerator.clone(),
            topology,
            state,
            nodes,
            nodes_unobserved,
            last_error,
            project,
            cluster,
            location,
            live_topology,
            pending,
            source: slice
                .workload
                .as_ref()
                .map(|o| format!("jobset {}", o.jobset_ref()))
                .unwrap_or_default(),
            workload,
        });
    }
    // Owned but no longer desired.
    for kind in &primary {
        for l in inv.live(kind.id()) {
            let own = kind.ownership(&l.body);
            // Left behind in a cluster no Target names any more (a Target
            // moved or removed): shown, never left unseen.
            let left = owners.left_behind(&l.scope, own.as_ref());
            let Some(o) = own.filter(|o| left || owners.owns(&l.scope, Some(o))) else {
                continue;
            };
            let id = ResourceId {
                scope: l.scope.clone(),
                kind: kind.id(),
                name: kind.name(&l.body),
            };
            if wanted.contains(&id) {
                continue;
            }
            let r = kind.report(&l.body, 0);
            if let Some((origin, _)) = kind.workload_slice(&l.body) {
                out.push(workload_row(
                    &demand,
                    &o,
                    &origin,
                    kind.name(&l.body),
                    &l.scope,
                    r,
                ));
                continue;
            }
            let moved_to = desired.iter().find(|d| {
                d.id.kind == kind.id() && d.owner.slice == o.slice && d.owner.replica == o.replica
            });
            let (project, cluster, location) = place(&l.scope, "");
            // Its slice's Target could not be observed: left untouched.
            let unseen = fleet
                .claimant(&o.slice)
                .filter(|_| !inv.unobserved.is_empty())
                .and_then(|s| {
                    let t = fleet.targets.get(&s.spec.target)?;
                    Owners::scopes_of(t, kinds)
                        .into_iter()
                        .find_map(|sc| inv.unobserved.get(&sc))
                        .map(|w| (t.name.clone(), w))
                });
            let last_error = match (moved_to, left) {
                _ if unseen.is_some() => unseen
                    .as_ref()
                    .map(|(t, w)| {
                        format!(
                            "[{}] its Target {t} could not be observed: left untouched until it is",
                            w.code
                        )
                    })
                    .unwrap_or_default(),
                _ if o.prevent_destroy => {
                    "not in the specs, protected by preventDestroy: apply refuses to delete it".into()
                }
                (Some(now), _) => format!(
                    "moved to {}: the next apply deletes this one once the new one is created",
                    now.id.scope
                ),
                (None, true) if !fleet.slices.contains_key(&o.slice) => {
                    "its Target and Slice left the specs: apply refuses to delete it (target_removed) \
                     without --allow-empty-source"
                        .into()
                }
                _ => "not in the specs: the next apply deletes it".into(),
            };
            out.push(Row {
                slice: o.slice.clone(),
                replica: o.replica,
                node_pool: kind.name(&l.body),
                backend: String::new(),
                accelerator: String::new(),
                state: format!("ORPHANED ({})", r.state),
                nodes: r.nodes.split('/').next().unwrap_or("?").to_string(),
                last_error,
                nodes_unobserved: String::new(),
                project,
                cluster,
                location,
                live_topology: r.topology.clone(),
                pending: if o.prevent_destroy || unseen.is_some() {
                    String::new()
                } else {
                    "delete".into()
                },
                topology: r.topology,
                source: String::new(),
                workload: None,
            });
        }
    }
    out
}

/// Renders the rows as a table.
/// The row of a live workload slice nothing pending asks for now: kept
/// (and why) or released by the next apply.
fn workload_row(
    demand: &crate::workload::Demand,
    o: &crate::plan::ownership::Ownership,
    origin: &crate::workload::Origin,
    pool: String,
    scope: &Scope,
    r: crate::plan::kind::LiveReport,
) -> Row {
    let (project, cluster, location) = place(scope, "");
    let target = o.target.as_deref().unwrap_or_default();
    let released = demand.release_of(target, &o.slice);
    let kept = demand.kept_of(target, &o.slice);
    let last_error = match (released, kept) {
        (Some(rel), _) => format!("released: {} (the next apply deletes it)", rel.why),
        (None, Some(k)) => format!("kept: {}", k.why),
        (None, None) => "kept: no run of the workload source decided its release (its Target's \
                         workloads are off or gone, or its JobSet's request was refused: see the plan)"
            .to_string(),
    };
    let phase = match (released, kept) {
        (None, Some(k)) => crate::workload::phase::kept(&pool, &r.state, &k.why),
        _ => None,
    };
    Row {
        slice: o.slice.clone(),
        replica: o.replica,
        node_pool: pool,
        backend: "gke".to_string(),
        accelerator: String::new(),
        // Kept for its running JobSet: its pool's size out of its hosts, as
        // a wanted slice's row says it (its SliceStatus is Ready from it).
        nodes: match kept {
            Some(k) if released.is_none() && k.why.starts_with("active") => r.nodes.clone(),
            _ => r.nodes.split('/').next().unwrap_or("?").to_string(),
        },
        state: r.state,
        nodes_unobserved: String::new(),
        last_error,
        project,
        cluster,
        location,
        live_topology: r.topology.clone(),
        pending: if released.is_some() {
            "delete".into()
        } else {
            String::new()
        },
        topology: r.topology,
        source: format!("jobset {}", origin.jobset_ref()),
        workload: Some(crate::workload::Standing {
            origin: origin.clone(),
            phase,
        }),
    }
}

pub fn table(rows: &[Row]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "SLICE",
        "REPLICA",
        "NODE POOL",
        "BACKEND",
        "ACCELERATOR",
        "TOPOLOGY",
        "STATE",
        "NODES",
        "LAST ERROR",
    ]);
    for r in rows {
        t.add_row(vec![
            if r.source.is_empty() {
                r.slice.clone()
            } else {
                format!("{} ({})", r.slice, r.source)
            },
            r.replica.to_string(),
            r.node_pool.clone(),
            r.backend.clone(),
            r.accelerator.clone(),
            r.topology.clone(),
            r.state.clone(),
            r.nodes.clone(),
            r.last_error.clone(),
        ]);
    }
    format!("{t}\n")
}
