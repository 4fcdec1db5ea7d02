//! One observation lists each GKE location's operations once, however many
//! of its clusters it observes: a wrapper around the GKE service that
//! memoises [`GkeService::list_operations_shared`] for the life of one
//! observation (a fresh one per observation, so nothing goes stale).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::OnceCell;

use crate::cloud::{CloudError, GkeService};
use crate::resource::ClusterRef;
use crate::resource::gke::{self, NodePool, UpdateNodePoolRequest};

type Listing = Arc<OnceCell<Arc<Vec<gke::Operation>>>>;

/// The GKE service with operations listed once per location.
pub(crate) struct SharedListings {
    inner: Arc<dyn GkeService>,
    operations: Mutex<HashMap<(String, String), Listing>>,
}

impl SharedListings {
    pub(crate) fn new(inner: Arc<dyn GkeService>) -> SharedListings {
        SharedListings {
            inner,
            operations: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl GkeService for SharedListings {
    async fn list_node_pools(
        &self,
        cluster: &ClusterRef,
    ) -> Result<Vec<Arc<NodePool>>, CloudError> {
        self.inner.list_node_pools(cluster).await
    }
    async fn get_node_pool(
        &self,
        cluster: &ClusterRef,
        name: &str,
    ) -> Result<NodePool, CloudError> {
        self.inner.get_node_pool(cluster, name).await
    }
    async fn create_node_pool(
        &self,
        cluster: &ClusterRef,
        pool: &NodePool,
    ) -> Result<gke::Operation, CloudError> {
        self.inner.create_node_pool(cluster, pool).await
    }
    async fn update_node_pool(
        &self,
        cluster: &ClusterRef,
        req: &UpdateNodePoolRequest,
    ) -> Result<gke::Operation, CloudError> {
        self.inner.update_node_pool(cluster, req).await
    }
    async fn delete_node_pool(
        &self,
        cluster: &ClusterRef,
        name: &str,
    ) -> Result<gke::Operation, CloudError> {
        self.inner.delete_node_pool(cluster, name).await
    }
    async fn list_clusters(&self, project: &str) -> Result<gke::ListClustersResponse, CloudError> {
        self.inner.list_clusters(project).await
    }
    async fn get_cluster(&self, cluster: &ClusterRef) -> Result<gke::ClusterAccess, CloudError> {
        self.inner.get_cluster(cluster).await
    }
    async fn list_operations(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Vec<gke::Operation>, CloudError> {
        self.inner.list_operations(project, location).await
    }
    async fn list_operations_shared(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Arc<Vec<gke::Operation>>, CloudError> {
        let cell = {
            let mut m = self.operations.lock().unwrap_or_else(|e| e.into_inner());
            m.entry((project.to_string(), location.to_string()))
                .or_default()
                .clone()
        };
        // Concurrent callers for one location wait for the one list; a failed
        // list is not remembered (the observation fails anyway).
        cell.get_or_try_init(|| self.inner.list_operations_shared(project, location))
            .await
            .cloned()
    }
    async fn get_operation(
        &self,
        project: &str,
        location: &str,
        name: &str,
    ) -> Result<gke::Operation, CloudError> {
        self.inner.get_operation(project, location, name).await
    }
    async fn wait_operation(
        &self,
        project: &str,
        location: &str,
        op: &gke::Operation,
        timeout: Duration,
    ) -> Result<gke::Operation, CloudError> {
        self.inner
            .wait_operation(project, location, op, timeout)
            .await
    }
}

#[cfg(test)]
#[path = "shared/tests.rs"]
mod tests;
