//! Observing: one list per resource kind and location, never one get per
//! resource, concurrently. Produces the [`Inventory`] the planner diffs
//! against. Generic over the registered kinds: each kind's
//! [`crate::apply::KindExec::observe`] lists its own resources.

mod shared;
pub mod workloads;

use std::collections::{BTreeMap, BTreeSet};

use futures::future::try_join_all;

use crate::apply::{KindExec, RegisteredKind};
use crate::cloud::{Cloud, CloudError};
use crate::plan::{Inventory, Owners, Scope};
use crate::resource::{ClusterRef, ZoneRef};
use crate::spec::Fleet;

/// The GKE clusters a fleet's targets point at.
pub fn clusters(fleet: &Fleet) -> BTreeSet<ClusterRef> {
    fleet
        .targets
        .values()
        .filter_map(|t| {
            let g = t.spec.gke.as_ref()?;
            Some(ClusterRef {
                project: t.spec.project.clone(),
                location: g.location.clone(),
                name: g.name.clone(),
            })
        })
        .collect()
}

/// The clusters whose Kubernetes side is left out of this cycle, with why:
/// with `--sim` ([`Cloud::sim_defers_kube`]) every cluster's (its
/// Kubernetes API is never reached, not even to see whether it answers);
/// otherwise those the Kubernetes seam says it deliberately does not reach
/// ([`crate::kube::KubeService::deferred`]: a GKE cluster whose API would
/// need a Google token slicectl does not hold, talking to a simulator).
/// Never faked: their Nodes are not read, and readiness is unknown.
fn deferred_scopes(cloud: &Cloud, owners: &Owners) -> BTreeMap<Scope, String> {
    owners
        .scopes()
        .filter_map(|scope| {
            let Scope::Kube(k) = scope else {
                return None;
            };
            let why = if cloud.sim_defers_kube {
                if k.gke_cluster().is_some() {
                    "under --sim slicectl reaches no real Kubernetes API, whatever the Target's \
                     gke.kubeApi names: the node pools are created in the simulator, but no Node is \
                     read, so whether a slice is ready for a job is not known. To read a real cluster's \
                     Nodes on purpose, run `slicectl sim --listen ADDR` and pass `--api-endpoint \
                     http://ADDR` with a gke.kubeApi.kubeconfig instead of --sim"
                        .to_owned()
                } else {
                    "under --sim slicectl reaches no real Kubernetes API, whatever the Target's gce.kubeApi \
                     names: the GCE resources are created in the simulator and their simulated VMs boot, but \
                     nothing joins a cluster and no Node is read, labelled or deleted. To link the simulator to \
                     a real cluster on purpose, run `slicectl sim --listen ADDR` and pass `--api-endpoint \
                     http://ADDR` instead of --sim (scripts/gce-demo.sh does this)"
                        .to_owned()
                }
            } else {
                cloud.kube.deferred(k)?
            };
            Some((scope.clone(), why))
        })
        .collect()
}

/// The GKE clusters no Target names that hold a node pool of this fleet:
/// one `clusters.list` (location `-`, every zone and region) per project a
/// GKE Target names. GKE embeds each cluster's node pools in the listing,
/// so a cluster is picked out from the owner labels with no further call;
/// only the picked ones are then listed in full. The old scope of a moved
/// or removed Target is found here: slicectl keeps no state file.
async fn left_behind_clusters(cloud: &Cloud, owners: &Owners) -> Result<Vec<Scope>, CloudError> {
    let projects: Vec<&String> = owners.gke_projects.keys().collect();
    let listed = try_join_all(projects.iter().map(|p| cloud.gke.list_clusters(p))).await?;
    let mut out = Vec::new();
    for (project, resp) in projects.into_iter().zip(listed) {
        if !resp.missing_zones.is_empty() {
            tracing::warn!(
                project = %project,
                missing_zones = ?resp.missing_zones,
                "GKE could not list the clusters of some zones: node pools this fleet left there are not seen this cycle"
            );
        }
        for c in resp.clusters {
            let scope = Scope::Cluster(ClusterRef {
                project: project.clone(),
                location: c.location,
                name: c.name,
            });
            // A cluster a Target names is observed in full anyway.
            if owners.by_scope.contains_key(&scope) {
                continue;
            }
            let ours = c.node_pools.iter().any(|p| {
                let own = p
                    .config
                    .as_ref()
                    .and_then(|c| crate::plan::ownership::Ownership::from_labels(&c.labels));
                owners.left_behind(&scope, own.as_ref())
            });
            if ours {
                tracing::info!(cluster = %scope, "a cluster no Target names holds node pools of this fleet");
                out.push(scope);
            }
        }
    }
    Ok(out)
}

/// The zones no Target names that hold a MIG of this fleet: one
/// `instanceGroupManagers.aggregatedList` per project a self-managed
/// Target names (a MIG's ownership is in its description, so the listing
/// alone picks them out). The old zone of a Target whose zone changed, or
/// of a removed Target, is found here.
async fn left_behind_zones(cloud: &Cloud, owners: &Owners) -> Result<Vec<Scope>, CloudError> {
    let projects: Vec<&String> = owners.gce_projects.keys().collect();
    let listed = try_join_all(
        projects
            .iter()
            .map(|p| cloud.compute.list_instance_group_managers_aggregated(p)),
    )
    .await?;
    let mut out = BTreeSet::new();
    for (project, (migs, unreachable)) in projects.into_iter().zip(listed) {
        if !unreachable.is_empty() {
            tracing::warn!(
                project = %project,
                unreachable = ?unreachable,
                "GCE could not list the MIGs of some zones: MIGs this fleet left there are not seen this cycle"
            );
        }
        for (zone, m) in migs {
            let scope = Scope::Zone(ZoneRef {
                project: project.clone(),
                zone,
            });
            if owners.by_scope.contains_key(&scope) || out.contains(&scope) {
                continue;
            }
            let own = m.description.as_deref().and_then(|d| {
                crate::plan::ownership::Ownership::from_description_named(
                    d,
                    &m.name,
                    crate::spec::names::mig,
                )
            });
            if owners.left_behind(&scope, own.as_ref()) {
                tracing::info!(zone = %scope, "a zone no Target names holds MIGs of this fleet");
                out.insert(scope);
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// Observes every scope the fleet's targets name, with every registered
/// kind, and the GKE clusters no Target names any more that still hold
/// node pools of this fleet ([`left_behind_clusters`]).
pub async fn observe(
    cloud: &Cloud,
    fleet: &Fleet,
    kinds: &[&dyn RegisteredKind],
) -> Result<Inventory, CloudError> {
    let plan_kinds: Vec<&dyn crate::plan::Kind> =
        kinds.iter().map(|k| *k as &dyn crate::plan::Kind).collect();
    let owners = Owners::of(fleet, &plan_kinds);
    // Each location's operations are listed once for all its clusters.
    let shared = Cloud {
        gke: std::sync::Arc::new(shared::SharedListings::new(cloud.gke.clone())),
        compute: cloud.compute.clone(),
        kube: cloud.kube.clone(),
        sim_defers_kube: cloud.sim_defers_kube,
    };
    let cloud = &shared;
    let deferred = deferred_scopes(cloud, &owners);
    let kinds: Vec<&dyn KindExec> = kinds.iter().map(|k| *k as &dyn KindExec).collect();
    let deferred_ref = &deferred;
    let lists = kinds.iter().flat_map(|k| {
        owners
            .scopes()
            .filter(|s| k.observes(s) && !deferred_ref.contains_key(*s))
            .map(
                move |s| async move { Ok::<_, CloudError>((k.kind(), k.observe(cloud, s).await?)) },
            )
    });
    let (mut results, mut left, zones) = futures::try_join!(
        try_join_all(lists),
        left_behind_clusters(cloud, &owners),
        left_behind_zones(cloud, &owners)
    )?;
    left.extend(zones);
    // Clusters no Target names that hold pools of this fleet: observed in
    // full (pools and their operations), so they are planned like any other.
    let wider =
        kinds.iter().flat_map(|k| {
            left.iter().filter(|s| k.observes(s)).map(
            move |s| async move { Ok::<_, CloudError>((k.kind(), k.observe(cloud, s).await?)) },
        )
        });
    results.extend(try_join_all(wider).await?);
    let workloads = workloads::observe(cloud, &owners, &deferred).await;
    let mut inv = Inventory {
        deferred,
        workloads,
        ..Inventory::default()
    };
    for (kind, observed) in results {
        inv.resources
            .entry(kind)
            .or_default()
            .extend(observed.resources);
        inv.operations
            .entry(kind)
            .or_default()
            .extend(observed.operations);
    }
    tracing::debug!(
        kinds = inv.resources.len(),
        resources = inv.resources.values().map(Vec::len).sum::<usize>(),
        "observed inventory"
    );
    Ok(inv)
}
