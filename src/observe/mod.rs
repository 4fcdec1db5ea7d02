//! Observing: one list per resource kind and location, never one get per
//! resource. Produces the [`Inventory`] the planner diffs against.

use std::collections::BTreeSet;

use futures::future::try_join_all;

use crate::cloud::{CloudClient, CloudError};
use crate::plan::Inventory;
use crate::plan::inventory::{ClusterState, RegionState};
use crate::resource::{ClusterRef, RegionRef};
use crate::spec::Fleet;

/// The clusters and regions a fleet's targets point at.
pub fn locations(fleet: &Fleet) -> (BTreeSet<ClusterRef>, BTreeSet<RegionRef>) {
    let s = crate::plan::scopes(fleet);
    (
        s.clusters.into_keys().collect(),
        s.regions.into_keys().collect(),
    )
}

async fn observe_cluster(
    client: &CloudClient,
    c: &ClusterRef,
) -> Result<(ClusterRef, ClusterState), CloudError> {
    let gke = client.gke();
    let (node_pools, operations) = tokio::try_join!(
        gke.list_node_pools(c),
        gke.list_operations(&c.project, &c.location)
    )?;
    // The location's operations, narrowed to this cluster's (GKE names the
    // project by number in operation links).
    let operations = operations
        .into_iter()
        .filter(|op| {
            op.target_link
                .as_deref()
                .is_some_and(|l| c.contains_link(l))
        })
        .collect();
    Ok((
        c.clone(),
        ClusterState {
            node_pools,
            operations,
        },
    ))
}

async fn observe_region(
    client: &CloudClient,
    r: &RegionRef,
) -> Result<(RegionRef, RegionState), CloudError> {
    let compute = client.compute();
    let (policies, operations) = tokio::try_join!(
        compute.list_resource_policies(&r.project, &r.region),
        compute.list_region_operations(&r.project, &r.region, true)
    )?;
    Ok((
        r.clone(),
        RegionState {
            policies,
            operations,
        },
    ))
}

/// Observes every cluster and region the fleet's targets name, concurrently.
pub async fn observe(client: &CloudClient, fleet: &Fleet) -> Result<Inventory, CloudError> {
    let (clusters, regions) = locations(fleet);
    let (cs, rs) = tokio::try_join!(
        try_join_all(clusters.iter().map(|c| observe_cluster(client, c))),
        try_join_all(regions.iter().map(|r| observe_region(client, r)))
    )?;
    tracing::debug!(
        clusters = cs.len(),
        regions = rs.len(),
        "observed inventory"
    );
    Ok(Inventory {
        clusters: cs.into_iter().collect(),
        regions: rs.into_iter().collect(),
    })
}
