//! The GKE node pool kind: one pool per GKE slice replica.
//!
//! Ownership lives in the pool's Kubernetes node labels
//! (`slicectl.dev/...`), `preventDestroy` too, so the live stamp can be
//! lifted in place. tpu-provisioner's pools are recognised by recomputing
//! its selective hash.

pub mod adopt;
mod exec;
pub mod fields;
pub mod nodes;
pub mod provisioner_hash;
pub mod render;

use std::sync::Arc;

use serde_json::Value;

use crate::kind::hash;
use crate::kind::ownership::{self, Ownership};
use crate::kind::{
    Body, Comparison, Desired, Kind, KindId, LiveState, RenderCtx, ResourceId, Scope, SliceRef,
};
use crate::kind::{LiveReport, body_as};
use crate::resource::ClusterRef;
use crate::resource::gke::NodePool;

use fields::{
    display_live_node_pool, in_place_changes, live_node_pool_projection, node_pool_projection,
};

/// The kind's name.
pub const KIND: KindId = KindId("node_pool");

/// The node pool kind.
#[derive(Debug, Clone, Copy)]
pub struct NodePools;

fn pool(b: &Body) -> Option<&NodePool> {
    body_as::<NodePool>(b)
}

fn desired_pool(d: &Desired) -> Option<&NodePool> {
    pool(&d.body)
}

impl Kind for NodePools {
    /// The GKE cluster, and its Kubernetes API (where the pools' Nodes
    /// are read: [`nodes::GkeNodes`]).
    fn scopes(&self, t: &crate::spec::Target) -> Vec<Scope> {
        let gke = t.spec.gke.as_ref();
        gke.map(|g| {
            Scope::Cluster(crate::resource::ClusterRef {
                project: t.spec.project.clone(),
                location: g.location.clone(),
                name: g.name.clone(),
            })
        })
        .into_iter()
        .chain(nodes::kube_scope(t))
        .collect()
    }

    fn id(&self) -> KindId {
        KIND
    }

    fn noun(&self) -> &'static str {
        "node pool"
    }

    fn depends_on(&self) -> &'static [KindId] {
        &[crate::kinds::workload_policy::KIND]
    }

    fn is_primary(&self) -> bool {
        true
    }

    fn render(&self, ctx: RenderCtx<'_>) -> Vec<Desired> {
        let (Some(gke), Some(np)) = (
            ctx.target.spec.gke.as_ref(),
            render::node_pool(ctx.target, ctx.slice, ctx.replica, ctx.stem),
        ) else {
            return Vec::new();
        };
        let cluster = ClusterRef {
            project: ctx.target.spec.project.clone(),
            location: gke.location.clone(),
            name: gke.name.clone(),
        };
        vec![Desired {
            id: ResourceId {
                scope: Scope::Cluster(cluster),
                kind: KIND,
                name: np.name.clone(),
            },
            owner: SliceRef {
                slice: ctx.slice.name.clone(),
                replica: ctx.replica,
            },
            owner_id: ctx.target.spec.owner_id.clone(),
            body: Arc::new(np),
            prevent_destroy: ctx.slice.spec.lifecycle.prevent_destroy,
            timeout: ctx.slice.operation_timeout,
        }]
    }

    fn name(&self, live: &Body) -> String {
        pool(live).map(|p| p.name.clone()).unwrap_or_default()
    }

    fn ownership(&self, live: &Body) -> Option<Ownership> {
        pool(live)?
            .config
            .as_ref()
            .and_then(|c| Ownership::from_labels(&c.labels))
    }

    fn workload_slice(&self, live: &Body) -> Option<(crate::workload::Origin, u32)> {
        let p = pool(live)?;
        let c = p.config.as_ref()?;
        let origin = crate::workload::Origin::from_labels(&c.labels)?;
        let per_host = crate::spec::catalog::generation_of_machine_type(&c.machine_type)
            .and_then(|g| g.machine_types.iter().find(|m| m.name == c.machine_type))
            .map_or(0, |m| m.chips_per_host);
        let hosts = p
            .autoscaling
            .as_ref()
            .filter(|a| a.enabled)
            .and_then(|a| a.max_node_count.or(a.total_max_node_count))
            .or(p.initial_node_count)
            .unwrap_or(0);
        Some((origin, per_host * u32::try_from(hosts).unwrap_or(0)))
    }

    fn adoptable(
        &self,
        live: &Body,
        target: &crate::spec::Target,
    ) -> Option<crate::kind::Adoptable> {
        adopt::adoptable(pool(live)?, target)
    }

    fn unprotect(&self, live: &Body) -> Option<(Body, Comparison)> {
        let l = pool(live)?;
        let mut out = l.clone();
        out.config
            .as_mut()?
            .labels
            .remove(ownership::PREVENT_DESTROY)?;
        let (changes, groups) = in_place_changes(l, &out);
        Some((Arc::new(out), Comparison::Update { changes, groups }))
    }

    fn unlabel(&self, live: &Body) -> Option<(Body, Comparison)> {
        let l = pool(live)?;
        let released = adopt::without_ownership(l);
        let (changes, groups) = in_place_changes(l, &released);
        if changes.is_empty() {
            return None;
        }
        Some((Arc::new(released), Comparison::Update { changes, groups }))
    }

    fn state(&self, live: &Body) -> LiveState {
        let Some(p) = pool(live) else {
            return LiveState::Error {
                status: "UNKNOWN".into(),
                detail: "not a node pool".into(),
            };
        };
        let detail = || {
            p.conditions
                .iter()
                .filter_map(|c| c.code.clone().or(c.message.clone()))
                .chain(p.status_message.clone())
                .collect::<Vec<_>>()
                .join("; ")
        };
        match p.status.as_deref() {
            Some("STOPPING") => LiveState::Stopping,
            Some("ERROR") => LiveState::Error {
                status: "ERROR".into(),
                detail: detail(),
            },
            // Some of the pool's nodes failed (a stockout GKE keeps retrying,
            // say). A TPU slice is all-or-nothing ("If GKE cannot deploy one
            // node in the slice, no nodes in the slice are deployed",
            // About TPUs in GKE), so a partly running pool is not a working
            // slice: it is replaced like an ERROR pool, once no operation
            // runs on it.
            Some("RUNNING_WITH_ERROR") => LiveState::Error {
                status: "RUNNING_WITH_ERROR".into(),
                detail: format!(
                    "a TPU slice is all-or-nothing, so a pool with failed nodes is not a working slice: {}",
                    detail()
                ),
            },
            _ => LiveState::Ok,
        }
    }

    fn compare(&self, desired: &Desired, live: &Body) -> Comparison {
        let (Some(d), Some(l)) = (desired_pool(desired), pool(live)) else {
            return Comparison::Equal;
        };
        let desired_proj = node_pool_projection(d);
        let live_proj = live_node_pool_projection(l, &desired_proj);
        let replacement = hash::diff(&live_proj, &desired_proj, true);
        let (in_place, groups) = in_place_changes(l, d);
        let own = self.ownership(live);
        if hash::stale(own.as_ref(), &hash::spec_hash(&desired_proj), &replacement) {
            let hash_only = replacement.is_empty();
            let mut changes = replacement;
            changes.extend(in_place);
            return Comparison::Replace { changes, hash_only };
        }
        if in_place.is_empty() {
            Comparison::Equal
        } else {
            Comparison::Update {
                changes: in_place,
                groups,
            }
        }
    }

    fn display_live(&self, live: &Body, desired: Option<&Desired>) -> Value {
        match pool(live) {
            Some(l) => display_live_node_pool(l, desired.and_then(desired_pool)),
            None => Value::Null,
        }
    }

    fn unmanaged_note(&self, live: &Body) -> String {
        let Some(c) = pool(live).and_then(|p| p.config.as_ref()) else {
            return "not created by slicectl".to_string();
        };
        let l = &c.labels;
        if let Some(p) = pool(live)
            && let Some(verdict) = adopt::provisioner_verdict(p)
        {
            // Its selective hash recomputed from the live pool: a match
            // means the pool is as tpu-provisioner made it (adoptable).
            return match (
                verdict,
                l.contains_key(provisioner_hash::TPU_PROVISIONER_HASH_LABEL),
            ) {
                (Err(why), _) => format!("created by tpu-provisioner, {why}"),
                (Ok(()), true) => {
                    "created by tpu-provisioner (its node-pool hash verifies)".to_string()
                }
                (Ok(()), false) => "created by tpu-provisioner (no node-pool hash)".to_string(),
            };
        }
        match Ownership::from_labels(l) {
            Some(o) => format!("owned by another slicectl owner id {:?}", o.owner),
            None => "not created by slicectl".to_string(),
        }
    }

    /// The fields a person edits (topology, machine type, capacity) before
    /// derived ones (node count).
    fn replacement_rank(&self, path: &str) -> usize {
        const ORDER: &[&str] = &[
            "placementPolicy.tpuTopology",
            "config.machineType",
            "placementPolicy",
            "config.spot",
            "config.reservationAffinity",
            "config.flexStart",
            "locations",
        ];
        ORDER
            .iter()
            .position(|p| path.starts_with(p))
            .unwrap_or(ORDER.len())
    }

    fn owner_relabels_in_place(&self) -> bool {
        // The owner is a node label (`config.labels`), updated in place.
        true
    }

    fn reclaim_hint(&self, d: &Desired, live: &Body) -> String {
        let labels = pool(live)
            .and_then(|p| p.config.as_ref())
            .map(|c| &c.labels);
        if labels.and_then(Ownership::from_labels).is_some() {
            // Another owner's: not ours to take.
            return String::new();
        }
        let has = |k: &str| labels.is_some_and(|l| l.contains_key(k));
        let looks_ours = [
            ownership::MANAGED_BY,
            ownership::OWNER,
            ownership::SLICE,
            ownership::REPLICA,
            ownership::SPEC_HASH,
        ]
        .iter()
        .any(|k| has(k));
        format!(
            ". If it is this slice's pool and lost its slicectl labels (`gcloud container node-pools update \
             --node-labels` replaces them all){}, put these labels back and apply again: \
             {}=slicectl, {}={}, {}={}, {}={} (slicectl then compares it field by field and re-stamps it). \
             `slicectl adopt DIR --target TARGET --name {}` does this for you, after showing that only \
             labels change (also for a pool released with `slicectl release`)",
            if looks_ours {
                ": it still has some of them"
            } else {
                ""
            },
            ownership::MANAGED_BY,
            ownership::OWNER,
            d.owner_id,
            ownership::SLICE,
            d.owner.slice,
            ownership::REPLICA,
            d.owner.replica,
            d.id.name
        )
    }

    fn error_recovery_hint(&self, id: &ResourceId, status: &str) -> String {
        let Scope::Cluster(c) = &id.scope else {
            return String::new();
        };
        format!(
            ". It stays in {status} until then. To recover it, either lift the protection and apply twice, \
             or delete it yourself (`gcloud container node-pools delete {} --cluster {} --location {} --project {}`) \
             and apply to create it again",
            id.name, c.name, c.location, c.project
        )
    }

    fn lift_protection(&self, desired: &Desired, live: &Body) -> Option<(Body, Comparison)> {
        let (d, l) = (desired_pool(desired)?, pool(live)?);
        // The desired pool with the live pool's hash labels: an update that
        // changes labels, taints and protection but not the recorded hash,
        // so the replacement it defers is still seen by the next plan.
        let mut out = d.clone();
        let live_labels = l.config.as_ref().map(|c| &c.labels);
        if let Some(cfg) = out.config.as_mut() {
            for k in [ownership::SPEC_HASH, ownership::HASH_VERSION] {
                match live_labels.and_then(|x| x.get(k)) {
                    Some(v) => cfg.labels.insert(k.to_string(), v.clone()),
                    None => cfg.labels.remove(k),
                };
            }
        }
        let (changes, groups) = in_place_changes(l, &out);
        Some((Arc::new(out), Comparison::Update { changes, groups }))
    }

    /// A node pool's Nodes: in its cluster's Kubernetes API
    /// ([`crate::resource::KubeRef::gke`]), labelled by GKE with the pool's name.
    fn hosts(
        &self,
        id: &crate::kind::ResourceId,
        _own: &Ownership,
        _kube: Option<&crate::resource::KubeRef>,
    ) -> Option<crate::kind::Hosts> {
        let Scope::Cluster(c) = &id.scope else {
            return None;
        };
        Some(crate::kind::Hosts {
            kube: Some(crate::resource::KubeRef::gke(c)),
            selector: [(crate::kind::GKE_NODEPOOL.to_owned(), id.name.clone())]
                .into_iter()
                .collect(),
            provider_id_prefix: None,
        })
    }

    fn parse(&self, json: Value) -> Result<Body, String> {
        serde_json::from_value::<NodePool>(json)
            .map(|p| Arc::new(p) as Body)
            .map_err(|e| e.to_string())
    }

    fn report(&self, live: &Body, hosts: u32) -> LiveReport {
        let Some(p) = pool(live) else {
            return LiveReport::default();
        };
        let state = p.status.clone().unwrap_or_else(|| "UNKNOWN".to_string());
        // The live pool's own shape: a pool waiting to be replaced is shown
        // as it is (a live 2x4 pool has 2 hosts, whatever the spec now says).
        let topology = p
            .placement_policy
            .as_ref()
            .and_then(|pp| pp.tpu_topology.clone())
            .unwrap_or_default();
        let hosts = p
            .config
            .as_ref()
            .and_then(|c| {
                let g = crate::spec::catalog::generation_of_machine_type(&c.machine_type)?;
                let m = g.machine_types.iter().find(|m| m.name == c.machine_type)?;
                let chips = crate::spec::catalog::chips(&topology);
                (m.chips_per_host > 0 && chips > 0).then(|| chips.div_ceil(m.chips_per_host))
            })
            // A single-host pool has no topology to count hosts from: the
            // slice's hosts, or, for a pool no spec sizes (`hosts` 0: a
            // workload slice kept for its running JobSet), its own size.
            .or_else(|| {
                (hosts == 0)
                    .then(|| p.initial_node_count.and_then(|n| u32::try_from(n).ok()))
                    .flatten()
            })
            .unwrap_or(hosts);
        // GKE reports no node count for a pool that is not running; the
        // count of a running pool is its size, not node readiness.
        // A RUNNING_WITH_ERROR pool's size is what it asked for, not what runs.
        let nodes = match (state.as_str(), p.initial_node_count) {
            ("RUNNING" | "RECONCILING", Some(n)) => format!("{n}/{hosts}"),
            _ => format!("?/{hosts}"),
        };
        let mut error = p
            .conditions
            .iter()
            .filter_map(|c| c.message.clone().or(c.code.clone()))
            .collect::<Vec<_>>()
            .join("; ");
        if error.is_empty()
            && matches!(state.as_str(), "ERROR" | "RUNNING_WITH_ERROR")
            && let Some(m) = &p.status_message
        {
            error = m.clone();
        }
        LiveReport {
            state,
            nodes,
            error,
            topology,
        }
    }

    fn fingerprint_view(&self, live: &Body) -> Value {
        let Some(p) = pool(live) else {
            return Value::Null;
        };
        let mut p = p.clone();
        // Output-only fields that change without anyone acting.
        p.status_message = None;
        p.conditions.clear();
        p.version = None;
        serde_json::to_value(&p).unwrap_or(Value::Null)
    }
}
