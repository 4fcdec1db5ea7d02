//! Per slice replica status: what `slicectl status` shows and what
//! reconciliation reports. One row per slice replica, read from the
//! replica's primary resource (a node pool for GKE), plus owned resources no
//! longer in the specs.

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;

use crate::plan::{Inventory, Kind, Owners, claims, render_fleet_at, replica_indices, stems};
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
    /// Live state: the resource's status, MISSING, ORPHANED, or NOT OWNED
    /// (a resource slicectl does not own sits under the slice's name).
    pub state: String,
    /// `N/H`: the node count a running pool reports, against the hosts the
    /// slice needs; `?/H` when the cloud reports none (provisioning, error).
    /// Not node readiness.
    pub nodes: String,
    /// Last error, if any.
    pub last_error: String,
}

/// Builds the rows.
pub fn rows(fleet: &Fleet, inv: &Inventory, kinds: &[&dyn Kind]) -> Vec<Row> {
    let owners = Owners::of(fleet);
    let mut out = Vec::new();
    let primary: Vec<&dyn Kind> = kinds.iter().copied().filter(|k| k.is_primary()).collect();
    // The replicas the planner keeps (working ones first after a scale-down).
    let indices = replica_indices(fleet, inv, kinds);
    // A declared rename's replicas keep their old resource names.
    let stems = stems(fleet, inv, kinds, &indices);
    for d in render_fleet_at(fleet, &primary, &indices, &stems) {
        let (Some(slice), Some(kind)) = (
            fleet.slices.get(&d.owner.slice),
            primary.iter().find(|k| k.id() == d.id.kind),
        ) else {
            continue;
        };
        let hosts = slice.shape.hosts;
        let live = inv
            .live(d.id.kind)
            .iter()
            .find(|l| l.scope == d.id.scope && kind.name(&l.body) == d.id.name);
        let own = live.and_then(|l| kind.ownership(&l.body));
        let ours = owners.owns(&d.id.scope, own.as_ref())
            && own.as_ref().is_some_and(|o| {
                claims(fleet, slice, o, &d.id.scope) && o.replica == d.owner.replica
            });
        let (state, nodes, mut last_error) = match live {
            None => ("MISSING".to_string(), format!("0/{hosts}"), String::new()),
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
                (r.state, r.nodes, r.error)
            }
        };
        if last_error.is_empty()
            && let Some(op) = inv.last_error(d.id.kind, &d.id.scope, &d.id.name)
        {
            last_error = op.error.clone().unwrap_or_default();
        }
        // A self-managed slice's nodes come from its Nodes, not its MIG.
        let mut nodes = nodes;
        let mut state = state;
        for nk in kinds.iter().filter(|k| k.reports_nodes()) {
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
                if last_error.is_empty() {
                    last_error = format!("not joined: {}", why.split(". ").next().unwrap_or(why));
                }
                continue;
            }
            let live = inv
                .live(nk.id())
                .iter()
                .find(|l| l.scope == want.id.scope && nk.name(&l.body) == want.id.name);
            match live {
                Some(l) => {
                    let r = nk.report(&l.body, hosts);
                    nodes = r.nodes;
                    if !r.state.is_empty() {
                        state = format!("{state}, {}", r.state);
                    }
                    if last_error.is_empty() {
                        last_error = r.error;
                    }
                }
                None => nodes = format!("0/{hosts} ready"),
            }
        }
        out.push(Row {
            slice: d.owner.slice.clone(),
            replica: d.owner.replica,
            node_pool: d.id.name.clone(),
            backend: slice.spec.backend.as_str().to_string(),
            accelerator: slice.spec.accelerator.clone(),
            topology: slice.shape.topology.clone(),
            state,
            nodes,
            last_error,
        });
    }
    // Owned but no longer desired.
    for kind in &primary {
        for l in inv.live(kind.id()) {
            let own = kind.ownership(&l.body);
            let Some(o) = own.filter(|o| owners.owns(&l.scope, Some(o))) else {
                continue;
            };
            let desired = fleet
                .claimant(&o.slice)
                .filter(|s| claims(fleet, s, &o, &l.scope))
                .is_some_and(|s| o.replica < s.spec.replicas);
            if desired {
                continue;
            }
            let r = kind.report(&l.body, 0);
            out.push(Row {
                slice: o.slice.clone(),
                replica: o.replica,
                node_pool: kind.name(&l.body),
                backend: String::new(),
                accelerator: String::new(),
                topology: String::new(),
                state: format!("ORPHANED ({})", r.state),
                nodes: r.nodes.split('/').next().unwrap_or("?").to_string(),
                last_error: if o.prevent_destroy {
                    "not in the specs, protected by preventDestroy: apply refuses to delete it"
                        .into()
                } else {
                    "not in the specs: the next apply deletes it".into()
                },
            });
        }
    }
    out
}

/// Renders the rows as a table.
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
            r.slice.clone(),
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
