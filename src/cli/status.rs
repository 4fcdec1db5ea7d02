//! `slicectl status`: one row per slice replica with its live state.

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;

use crate::plan::Inventory;
use crate::plan::ownership::Ownership;
use crate::plan::render::render_fleet;
use crate::spec::Fleet;

/// One row of the status table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// Slice name.
    pub slice: String,
    /// Replica index.
    pub replica: u32,
    /// Node pool name.
    pub node_pool: String,
    /// `gke`.
    pub backend: String,
    /// Accelerator.
    pub accelerator: String,
    /// Topology.
    pub topology: String,
    /// Live state: the node pool status, MISSING, ORPHANED, or NOT OWNED
    /// (a pool slicectl does not own sits under the slice's name).
    pub state: String,
    /// `N/H`: the node count the pool reports while it runs, against the
    /// hosts the slice needs; `?/H` when GKE reports none (provisioning,
    /// error). Not node readiness: GKE Nodes are not read.
    pub nodes: String,
    /// Last error, if any.
    pub last_error: String,
}

/// Builds the rows.
pub fn rows(fleet: &Fleet, inv: &Inventory) -> Vec<Row> {
    let mut out = Vec::new();
    for d in render_fleet(fleet) {
        let Some(slice) = fleet.slices.get(&d.slice) else {
            continue;
        };
        let st = inv.clusters.get(&d.cluster);
        let live = st.and_then(|s| s.node_pools.iter().find(|p| p.name == d.node_pool.name));
        let mut last_error = live
            .map(|l| {
                l.conditions
                    .iter()
                    .filter_map(|c| c.message.clone().or(c.code.clone()))
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default();
        if last_error.is_empty()
            && let Some(op) = st.and_then(|s| s.last_error(&d.node_pool.name))
        {
            last_error = op
                .error
                .as_ref()
                .map(|e| e.message.clone())
                .unwrap_or_default();
        }
        let hosts = slice.shape.hosts;
        let owner = fleet.target_of(slice).map(|t| t.spec.owner_id.as_str());
        let ours = live.is_some_and(|l| {
            l.config
                .as_ref()
                .and_then(|c| Ownership::from_labels(&c.labels))
                .is_some_and(|o| {
                    Some(o.owner.as_str()) == owner && o.slice == d.slice && o.replica == d.replica
                })
        });
        let (state, nodes) = match live {
            None => ("MISSING".to_string(), format!("0/{hosts}")),
            Some(_) if !ours => {
                last_error = "a node pool slicectl does not own has this slice's name; \
                              `slicectl plan` says whose it is and what to do"
                    .to_string();
                ("NOT OWNED".to_string(), format!("?/{hosts}"))
            }
            Some(l) => {
                let status = l.status.clone().unwrap_or_else(|| "UNKNOWN".to_string());
                let nodes = match (status.as_str(), l.initial_node_count) {
                    ("RUNNING" | "RUNNING_WITH_ERROR" | "RECONCILING", Some(n)) => {
                        format!("{n}/{hosts}")
                    }
                    _ => format!("?/{hosts}"),
                };
                (status, nodes)
            }
        };
        out.push(Row {
            slice: d.slice.clone(),
            replica: d.replica,
            node_pool: d.node_pool.name.clone(),
            backend: slice.spec.backend.as_str().to_string(),
            accelerator: slice.spec.accelerator.clone(),
            topology: slice.shape.topology.clone(),
            state,
            nodes,
            last_error,
        });
    }
    // Owned but no longer desired.
    for st in inv.clusters.values() {
        for l in &st.node_pools {
            let Some(o) = l
                .config
                .as_ref()
                .and_then(|c| Ownership::from_labels(&c.labels))
            else {
                continue;
            };
            let desired = fleet
                .slices
                .get(&o.slice)
                .is_some_and(|s| o.replica < s.spec.replicas);
            if desired || !fleet.targets.values().any(|t| t.spec.owner_id == o.owner) {
                continue;
            }
            out.push(Row {
                slice: o.slice.clone(),
                replica: o.replica,
                node_pool: l.name.clone(),
                backend: "gke".into(),
                accelerator: String::new(),
                topology: l
                    .placement_policy
                    .as_ref()
                    .and_then(|p| p.tpu_topology.clone())
                    .unwrap_or_default(),
                state: format!("ORPHANED ({})", l.status.as_deref().unwrap_or("?")),
                nodes: match (l.status.as_deref(), l.initial_node_count) {
                    (Some("RUNNING" | "RUNNING_WITH_ERROR" | "RECONCILING"), Some(n)) => {
                        n.to_string()
                    }
                    _ => "?".to_string(),
                },
                last_error: "not in the specs: the next apply deletes it".into(),
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
