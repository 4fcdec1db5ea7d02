//! GKE as the campaign sees it: the recording fake, each call yielding
//! to the runtime once before it answers (twice for an operation's wait),
//! as a call over the network does. Without it a reconcile on the fake
//! never waits, runs in one poll, and a SIGKILL "after N polls" could not
//! land between two calls.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use slicectl::cloud::CloudError;
use slicectl::cloud::api::GkeService;
use slicectl::resource::ClusterRef;
use slicectl::resource::gke::{self, NodePool, UpdateNodePoolRequest};

pub struct Yielding(pub Arc<dyn GkeService>);

async fn pause() {
    tokio::task::yield_now().await;
}

#[async_trait]
impl GkeService for Yielding {
    async fn list_node_pools(&self, c: &ClusterRef) -> Result<Vec<Arc<NodePool>>, CloudError> {
        pause().await;
        self.0.list_node_pools(c).await
    }
    async fn get_node_pool(&self, c: &ClusterRef, name: &str) -> Result<NodePool, CloudError> {
        pause().await;
        self.0.get_node_pool(c, name).await
    }
    async fn create_node_pool(
        &self,
        c: &ClusterRef,
        pool: &NodePool,
    ) -> Result<gke::Operation, CloudError> {
        pause().await;
        self.0.create_node_pool(c, pool).await
    }
    async fn update_node_pool(
        &self,
        c: &ClusterRef,
        req: &UpdateNodePoolRequest,
    ) -> Result<gke::Operation, CloudError> {
        pause().await;
        self.0.update_node_pool(c, req).await
    }
    async fn delete_node_pool(
        &self,
        c: &ClusterRef,
        name: &str,
    ) -> Result<gke::Operation, CloudError> {
        pause().await;
        self.0.delete_node_pool(c, name).await
    }
    async fn get_cluster(&self, c: &ClusterRef) -> Result<gke::ClusterAccess, CloudError> {
        pause().await;
        self.0.get_cluster(c).await
    }
    async fn list_clusters(&self, project: &str) -> Result<gke::ListClustersResponse, CloudError> {
        pause().await;
        self.0.list_clusters(project).await
    }
    async fn list_operations(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Vec<gke::Operation>, CloudError> {
        pause().await;
        self.0.list_operations(project, location).await
    }
    async fn get_operation(
        &self,
        project: &str,
        location: &str,
        name: &str,
    ) -> Result<gke::Operation, CloudError> {
        pause().await;
        self.0.get_operation(project, location, name).await
    }
    async fn wait_operation(
        &self,
        project: &str,
        location: &str,
        op: &gke::Operation,
        timeout: Duration,
    ) -> Result<gke::Operation, CloudError> {
        pause().await;
        pause().await;
        self.0.wait_operation(project, location, op, timeout).await
    }
}
