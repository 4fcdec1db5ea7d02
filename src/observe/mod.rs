//! Observing: one list per resource kind and location, never one get per
//! resource, concurrently. Produces the [`Inventory`] the planner diffs
//! against. Generic over the registered kinds: each kind's
//! [`crate::apply::KindExec::observe`] lists its own resources.

pub mod demand;
mod shared;
pub mod workloads;

use std::collections::{BTreeMap, BTreeSet};

use futures::future::{join_all, try_join_all};

use crate::apply::{KindExec, Observed, RegisteredKind};
use crate::cloud::{Cloud, CloudError};
use crate::plan::kind::KindId;
use crate::plan::{Inventory, Owners, Scope, Unseen};
use crate::resource::{ClusterRef, KubeRef, ZoneRef};
use crate::spec::Fleet;

/// The Kubernetes APIs of the GKE Targets with `workloads.enabled`: where
/// JobSets and pending TPU pods are listed.
pub fn demand_clusters(fleet: &Fleet) -> BTreeSet<crate::resource::KubeRef> {
    fleet
        .targets
        .values()
        .filter_map(demand_clusters_of)
        .collect()
}

/// The Kubernetes API of Target `t` when it has `workloads.enabled`.
pub fn demand_clusters_of(t: &crate::spec::Target) -> Option<crate::resource::KubeRef> {
    if !t.spec.workloads.as_ref().is_some_and(|w| w.enabled) {
        return None;
    }
    let g = t.spec.gke.as_ref()?;
    Some(crate::resource::KubeRef::gke(&ClusterRef {
        project: t.spec.project.clone(),
        location: g.location.clone(),
        name: g.name.clone(),
    }))
}

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
            Some((scope.clone(), deferred_why(cloud, k)?))
        })
        .collect()
}

/// Why a cluster's Kubernetes side is left out of this cycle, if it is
/// ([`deferred_scopes`]).
fn deferred_why(cloud: &Cloud, k: &KubeRef) -> Option<String> {
    if cloud.sim_defers_kube {
        let why = if k.gke_cluster().is_some() {
            "under --sim slicectl reaches no real Kubernetes API, whatever the Target's \
             gke.kubeApi names: the node pools are created in the simulator, but no Node is \
             read, so whether a slice is ready for a job is not known. To read a real cluster's \
             Nodes on purpose, run `slicectl sim --listen ADDR` and pass `--api-endpoint \
             http://ADDR` with a gke.kubeApi.kubeconfig instead of --sim"
        } else {
            "under --sim slicectl reaches no real Kubernetes API, whatever the Target's gce.kubeApi \
             names: the GCE resources are created in the simulator and their simulated VMs boot, but \
             nothing joins a cluster and no Node is read, labelled or deleted. To link the simulator to \
             a real cluster on purpose, run `slicectl sim --listen ADDR` and pass `--api-endpoint \
             http://ADDR` instead of --sim (scripts/gce-demo.sh does this)"
        };
        return Some(why.to_owned());
    }
    cloud.kube.deferred(k)
}

/// The Kubernetes APIs of the clusters no Target names that hold node
/// pools of this fleet (`left`): their Nodes and Pods are listed too, so a
/// pool left there (moved, or of a removed Target) is deleted only when
/// its replica is seen idle. Under `--sim` nothing real runs and they are
/// not listed; a cluster whose API slicectl does not reach is deferred
/// (its replicas busy-unknown).
fn left_behind_kubes(
    cloud: &Cloud,
    left: &[Scope],
    deferred: &mut BTreeMap<Scope, String>,
) -> Vec<KubeRef> {
    if cloud.sim_defers_kube {
        return Vec::new();
    }
    let mut out = Vec::new();
    for s in left {
        let Scope::Cluster(c) = s else {
            continue;
        };
        let k = KubeRef::gke(c);
        match deferred_why(cloud, &k) {
            Some(why) => {
                deferred.insert(Scope::Kube(k), why);
            }
            None => out.push(k),
        }
    }
    out
}

/// Left-behind discovery of one project that failed: logged, and kept
/// for the plan (nothing is pruned there this time).
type Undiscovered = BTreeMap<(String, &'static str), Unseen>;

/// Records (and logs) a project whose left-behind discovery failed for
/// `backend` (`gke`: node pools in clusters no Target names; `gce`: MIGs in
/// zones no Target names): nothing there is pruned this cycle.
fn undiscovered(failed: &mut Undiscovered, project: &str, backend: &'static str, e: &CloudError) {
    let why = unseen(e);
    let what = if backend == "gke" {
        "node pools this fleet left in clusters no Target names"
    } else {
        "MIGs this fleet left in zones no Target names"
    };
    tracing::warn!(
        project = %project,
        code = %why.code,
        cause = %why.cause,
        "cannot look for {what}: nothing there is pruned this cycle"
    );
    failed.insert((project.to_owned(), backend), why);
}

/// The GKE clusters no Target names that hold a node pool of this fleet:
/// one `clusters.list` (location `-`, every zone and region) per project a
/// GKE Target names. GKE embeds each cluster's node pools in the listing,
/// so a cluster is picked out from the owner labels with no further call;
/// only the picked ones are then listed in full. The old scope of a moved
/// or removed Target is found here: slicectl keeps no state file. Each
/// project on its own: a project whose listing fails is reported in the
/// second value, and the others go on.
async fn left_behind_clusters(cloud: &Cloud, owners: &Owners) -> (Vec<Scope>, Undiscovered) {
    let projects: Vec<&String> = owners.gke_projects.keys().collect();
    let listed = join_all(projects.iter().map(|p| cloud.gke.list_clusters(p))).await;
    let mut out = Vec::new();
    let mut failed = Undiscovered::new();
    for (project, resp) in projects.into_iter().zip(listed) {
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                undiscovered(&mut failed, project, "gke", &e);
                continue;
            }
        };
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
    (out, failed)
}

/// The zones no Target names that hold a MIG of this fleet: one
/// `instanceGroupManagers.aggregatedList` per project a self-managed
/// Target names (a MIG's ownership is in its description, so the listing
/// alone picks them out). The old zone of a Target whose zone changed, or
/// of a removed Target, is found here. Each project on its own, as
/// [`left_behind_clusters`].
async fn left_behind_zones(cloud: &Cloud, owners: &Owners) -> (Vec<Scope>, Undiscovered) {
    let projects: Vec<&String> = owners.gce_projects.keys().collect();
    let listed = join_all(
        projects
            .iter()
            .map(|p| cloud.compute.list_instance_group_managers_aggregated(p)),
    )
    .await;
    let mut out = BTreeSet::new();
    let mut failed = Undiscovered::new();
    for (project, listing) in projects.into_iter().zip(listed) {
        let (migs, unreachable) = match listing {
            Ok(l) => l,
            Err(e) => {
                undiscovered(&mut failed, project, "gce", &e);
                continue;
            }
        };
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
            let own = m
                .description
                .as_deref()
                .and_then(|d| crate::kinds::gce::mig::described_ownership(d, &m.name));
            if owners.left_behind(&scope, own.as_ref()) {
                tracing::info!(zone = %scope, "a zone no Target names holds MIGs of this fleet");
                out.insert(scope);
            }
        }
    }
    (out.into_iter().collect(), failed)
}

/// Why a listing failed, as a stable code and the cause: a deleted cluster
/// (404) is `target_not_found`; credentials that may not see the project,
/// or RBAC that denies the list (401, 403), `target_forbidden`; a
/// Kubernetes API with no usable kubeconfig or context,
/// `target_unconfigured`; anything else (connection refused, timeouts,
/// 5xx after retries) `target_unreachable`.
pub fn unseen(e: &CloudError) -> Unseen {
    use crate::kube::KubeError;
    let code = match e {
        e if e.is_not_found() => "target_not_found",
        CloudError::Kube(KubeError::NotFound { .. }) => "target_not_found",
        CloudError::Api {
            status: 401 | 403, ..
        } => "target_forbidden",
        CloudError::Api { code, .. } if code == "PERMISSION_DENIED" => "target_forbidden",
        CloudError::Kube(KubeError::Forbidden { .. }) => "target_forbidden",
        // A cluster's API that rejects slicectl's credentials (an expired or
        // foreign Google token, a kubeconfig's stale user).
        CloudError::Kube(KubeError::Api { status: 401, .. }) => "target_forbidden",
        CloudError::Kube(KubeError::Config { .. }) => "target_unconfigured",
        _ => "target_unreachable",
    };
    Unseen {
        code: code.to_owned(),
        cause: crate::error::chain(e),
    }
}

/// Every registered kind's listing of one scope: all of them or none (a
/// scope half observed is not observed).
async fn observe_scope(
    cloud: &Cloud,
    kinds: &[&dyn KindExec],
    scope: &Scope,
) -> Result<Vec<(KindId, Observed)>, CloudError> {
    try_join_all(
        kinds
            .iter()
            .filter(|k| k.observes(scope))
            .map(
                |k| async move { Ok::<_, CloudError>((k.kind(), k.observe(cloud, scope).await?)) },
            ),
    )
    .await
}

/// Observes every scope the fleet's targets name, with every registered
/// kind, and the GKE clusters (and zones) no Target names any more that
/// still hold resources of this fleet ([`left_behind_clusters`],
/// [`left_behind_zones`]).
///
/// Each scope on its own: a scope whose listing fails (a deleted cluster,
/// an unreachable Kubernetes API, a project the credentials cannot see) is
/// recorded in [`Inventory::unobserved`] with a code and the cause, and
/// every other scope is observed as usual; the planner then leaves every
/// Target that needs a failed scope alone. A project whose left-behind
/// discovery fails is recorded in [`Inventory::undiscovered`].
pub async fn observe(cloud: &Cloud, fleet: &Fleet, kinds: &[&dyn RegisteredKind]) -> Inventory {
    let plan_kinds: Vec<&dyn crate::plan::Kind> =
        kinds.iter().map(|k| *k as &dyn crate::plan::Kind).collect();
    let owners = Owners::of(fleet, &plan_kinds);
    // Each location's operations are listed once for all its clusters.
    let shared = Cloud {
        gke: std::sync::Arc::new(shared::SharedListings::new(cloud.gke.clone())),
        compute: cloud.compute.clone(),
        kube: cloud.kube.clone(),
        sim_defers_kube: cloud.sim_defers_kube,
        unread_idle: cloud.unread_idle,
    };
    let cloud = &shared;
    let deferred = deferred_scopes(cloud, &owners);
    let kinds: Vec<&dyn KindExec> = kinds.iter().map(|k| *k as &dyn KindExec).collect();
    let scopes: Vec<&Scope> = owners
        .scopes()
        .filter(|s| !deferred.contains_key(*s))
        .collect();
    let (named, (mut left, mut undiscovered), (zones, zones_failed)) = futures::join!(
        join_all(scopes.iter().map(|s| observe_scope(cloud, &kinds, s))),
        left_behind_clusters(cloud, &owners),
        left_behind_zones(cloud, &owners)
    );
    left.extend(zones);
    undiscovered.extend(zones_failed);
    let mut deferred = deferred;
    let extra = left_behind_kubes(cloud, &left, &mut deferred);
    let (mut workloads, demand) =
        workloads::observe(cloud, &owners, &deferred, &extra, &demand_clusters(fleet)).await;
    workloads.simulated = cloud.sim_defers_kube || cloud.unread_idle;
    let mut inv = Inventory {
        deferred,
        workloads,
        demand,
        ..Inventory::default()
    };
    let mut results = Vec::new();
    for (scope, r) in scopes.into_iter().zip(named) {
        match r {
            Ok(observed) => results.extend(observed),
            Err(e) => {
                let why = unseen(&e);
                tracing::warn!(
                    scope = %scope,
                    code = %why.code,
                    cause = %why.cause,
                    "cannot observe this scope: every Target that needs it is left alone this cycle (no action, nothing pruned)"
                );
                inv.unobserved.insert(scope.clone(), why);
            }
        }
    }
    // Clusters (and zones) no Target names that hold resources of this
    // fleet: observed in full (pools and their operations), so they are
    // planned like any other. One that fails is left alone, and said so.
    let wider = join_all(left.iter().map(|s| observe_scope(cloud, &kinds, s))).await;
    for (scope, r) in left.iter().zip(wider) {
        match r {
            Ok(observed) => results.extend(observed),
            Err(e) => {
                let mut why = unseen(&e);
                why.cause = format!("{scope}: {}", why.cause);
                let (project, backend) = match scope {
                    Scope::Zone(z) => (z.project.clone(), "gce"),
                    Scope::Cluster(c) => (c.project.clone(), "gke"),
                    other => (other.to_string(), "gke"),
                };
                tracing::warn!(
                    scope = %scope,
                    code = %why.code,
                    cause = %why.cause,
                    "cannot observe a scope that holds resources this fleet left behind: nothing there is pruned this cycle"
                );
                undiscovered.insert((project, backend), why);
            }
        }
    }
    inv.undiscovered = undiscovered;
    for (kind, observed) in results {
        inv.resources
            .entry(kind)
            .or_default()
            .extend(observed.resources);
        // Only what planning reads is kept: the running operations (waited
        // on, never written under) and those that finished with an error
        // (`status` shows the last). A location lists every recent DONE
        // operation, one per pool of a freshly made fleet.
        inv.operations.entry(kind).or_default().extend(
            observed
                .operations
                .into_iter()
                .filter(|o| o.running || o.error.is_some()),
        );
    }
    crate::kinds::gce::link::link(&mut inv);
    tracing::debug!(
        kinds = inv.resources.len(),
        resources = inv.resources.values().map(Vec::len).sum::<usize>(),
        unobserved = inv.unobserved.len(),
        "observed inventory"
    );
    inv
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
