//! GKE (container v1): node pools and operations.

use std::time::Duration;

use reqwest::Method;

use super::Inner;
use super::endpoints::segment;
use super::error::{CloudError, STOCKOUT_CODES, rpc_code_name};
use super::http::Request;
use crate::resource::gke::{
    ClusterAccess, CreateNodePoolRequest, ListClustersResponse, ListNodePoolsResponse,
    ListOperationsResponse, NodePool, Operation, UpdateNodePoolRequest,
};

pub use crate::resource::ClusterRef;

impl ClusterRef {
    /// A cluster reference.
    pub fn new(
        project: impl Into<String>,
        location: impl Into<String>,
        name: impl Into<String>,
    ) -> ClusterRef {
        ClusterRef {
            project: project.into(),
            location: location.into(),
            name: name.into(),
        }
    }

    /// Parses `projects/P/locations/L/clusters/C` (a leading `/` or a full
    /// `https://container.googleapis.com/v1/` URL prefix is accepted).
    pub fn parse(s: &str) -> Result<ClusterRef, CloudError> {
        let rest = s.find("projects/").map(|i| &s[i..]).unwrap_or(s);
        let parts: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
        match parts.as_slice() {
            ["projects", p, "locations" | "zones", l, "clusters", c]
                if !p.is_empty() && !l.is_empty() && !c.is_empty() =>
            {
                Ok(ClusterRef::new(*p, *l, *c))
            }
            _ => Err(CloudError::InvalidInput(format!(
                "{s:?} is not projects/PROJECT/locations/LOCATION/clusters/CLUSTER"
            ))),
        }
    }

    /// `projects/P/locations/L/clusters/C/nodePools/NAME`.
    pub fn node_pool_path(&self, name: &str) -> String {
        format!("{}/nodePools/{name}", self.path())
    }

    fn checked_path(&self) -> Result<String, CloudError> {
        segment("project", &self.project)?;
        segment("location", &self.location)?;
        segment("cluster", &self.name)?;
        Ok(self.path())
    }
}

/// `ListOperationsResponse` with only the operations observation reads
/// ([`GkeApi::list_unsettled_operations`]).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UnsettledOperations {
    #[serde(default, deserialize_with = "unsettled")]
    pub(crate) operations: Vec<Operation>,
}

/// Whether observation reads an operation: still running, or finished
/// with an error.
pub fn is_unsettled(op: &Operation) -> bool {
    op.status != "DONE" || op.error.is_some()
}

/// A list of operations, keeping only the [`is_unsettled`] ones as each is
/// decoded.
fn unsettled<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Operation>, D::Error> {
    struct Keep;
    impl<'de> serde::de::Visitor<'de> for Keep {
        type Value = Vec<Operation>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of operations")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(op) = seq.next_element::<Operation>()? {
                if is_unsettled(&op) {
                    out.push(op);
                }
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Keep)
}

/// The fields of `clusters.list` slicectl reads
/// ([`crate::resource::gke::ClusterSummary`]), as a partial-response
/// selection (https://cloud.google.com/apis/docs/system-parameters).
pub const LIST_CLUSTERS_FIELDS: &str =
    "clusters(name,location,nodePools(name,config/labels)),missingZones";

/// GKE calls; get one with [`super::CloudClient::gke`].
#[derive(Clone, Copy)]
pub struct GkeApi<'a> {
    inner: &'a Inner,
}

impl<'a> GkeApi<'a> {
    pub(crate) fn new(inner: &'a Inner) -> GkeApi<'a> {
        GkeApi { inner }
    }

    fn url(&self, path: &str) -> String {
        self.inner.endpoints.container_url(path)
    }

    /// Every GKE cluster of a project, in all zones and regions
    /// (`clusters.list` with location `-`; GKE does not page it). Zones GKE
    /// could not reach are in `missingZones`.
    pub async fn list_clusters(&self, project: &str) -> Result<ListClustersResponse, CloudError> {
        segment("project", project)?;
        let url = self.url(&format!("projects/{project}/locations/-/clusters"));
        let req = Request::new(
            Method::GET,
            "container.projects.locations.clusters.list",
            url,
        )
        // GKE embeds every node pool in full; only their names and labels
        // are read (whose they are), so ask for no more: a partial response
        // (the `fields` system parameter), about 1/15 of the bytes.
        .query("fields", LIST_CLUSTERS_FIELDS);
        self.inner.call(&req).await
    }

    /// One cluster (`clusters.get`), as far as reaching its Kubernetes API
    /// goes; a missing cluster is an error with [`CloudError::is_not_found`].
    pub async fn get_cluster(&self, cluster: &ClusterRef) -> Result<ClusterAccess, CloudError> {
        let req = Request::new(
            Method::GET,
            "container.projects.locations.clusters.get",
            self.url(&cluster.checked_path()?),
        );
        self.inner.call(&req).await
    }

    /// All node pools of a cluster (`nodePools.list`; GKE does not page it).
    pub async fn list_node_pools(
        &self,
        cluster: &ClusterRef,
    ) -> Result<Vec<std::sync::Arc<NodePool>>, CloudError> {
        let url = self.url(&format!("{}/nodePools", cluster.checked_path()?));
        let req = Request::new(
            Method::GET,
            "container.projects.locations.clusters.nodePools.list",
            url,
        );
        let resp: ListNodePoolsResponse = self.inner.call(&req).await?;
        Ok(resp.node_pools)
    }

    /// One node pool (`nodePools.get`); a missing pool is an error with
    /// [`CloudError::is_not_found`].
    pub async fn get_node_pool(
        &self,
        cluster: &ClusterRef,
        name: &str,
    ) -> Result<NodePool, CloudError> {
        let path = format!(
            "{}/nodePools/{}",
            cluster.checked_path()?,
            segment("node pool", name)?
        );
        let req = Request::new(
            Method::GET,
            "container.projects.locations.clusters.nodePools.get",
            self.url(&path),
        );
        self.inner.call(&req).await
    }

    /// Starts creating a node pool (`nodePools.create`). GKE has no request id:
    /// a retried create whose first attempt reached the server answers
    /// ALREADY_EXISTS, which the caller resolves by reading the pool.
    pub async fn create_node_pool(
        &self,
        cluster: &ClusterRef,
        pool: &NodePool,
    ) -> Result<Operation, CloudError> {
        let parent = cluster.checked_path()?;
        segment("node pool", &pool.name)?;
        let body = CreateNodePoolRequest {
            node_pool: pool.clone(),
            parent: parent.clone(),
        };
        let req = Request::new(
            Method::POST,
            "container.projects.locations.clusters.nodePools.create",
            self.url(&format!("{parent}/nodePools")),
        )
        .json(&body)?;
        self.inner.call(&req).await
    }

    /// Starts an in-place update (`nodePools.update`, `PUT v1/{name}`).
    /// `req.name` may be the full node pool name or just the pool's name; the
    /// full name is sent either way.
    pub async fn update_node_pool(
        &self,
        cluster: &ClusterRef,
        req: &UpdateNodePoolRequest,
    ) -> Result<Operation, CloudError> {
        let parent = cluster.checked_path()?;
        let full = if req.name.contains('/') {
            let prefix = format!("{parent}/nodePools/");
            match req.name.strip_prefix(&prefix) {
                Some(pool) => format!("{prefix}{}", segment("node pool", pool)?),
                None => {
                    return Err(CloudError::InvalidInput(format!(
                        "node pool {:?} is not in cluster {parent}",
                        req.name
                    )));
                }
            }
        } else {
            cluster.node_pool_path(segment("node pool", &req.name)?)
        };
        let body = UpdateNodePoolRequest {
            name: full.clone(),
            ..req.clone()
        };
        let request = Request::new(
            Method::PUT,
            "container.projects.locations.clusters.nodePools.update",
            self.url(&full),
        )
        .json(&body)?;
        self.inner.call(&request).await
    }

    /// Starts deleting a node pool (`nodePools.delete`).
    pub async fn delete_node_pool(
        &self,
        cluster: &ClusterRef,
        name: &str,
    ) -> Result<Operation, CloudError> {
        let path = format!(
            "{}/nodePools/{}",
            cluster.checked_path()?,
            segment("node pool", name)?
        );
        let req = Request::new(
            Method::DELETE,
            "container.projects.locations.clusters.nodePools.delete",
            self.url(&path),
        );
        self.inner.call(&req).await
    }

    /// `operations.list` of a location.
    fn list_operations_request(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Request, CloudError> {
        let path = format!(
            "projects/{}/locations/{}/operations",
            segment("project", project)?,
            segment("location", location)?
        );
        Ok(Request::new(
            Method::GET,
            "container.projects.locations.operations.list",
            self.url(&path),
        ))
    }

    /// Operations of a location (`operations.list`).
    pub async fn list_operations(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Vec<Operation>, CloudError> {
        let req = self.list_operations_request(project, location)?;
        let resp: ListOperationsResponse = self.inner.call(&req).await?;
        Ok(resp.operations)
    }

    /// The operations of a location that observation reads
    /// (`operations.list`): those still running and those that finished
    /// with an error. A location's list holds every operation GKE still
    /// remembers, nearly all DONE (10,000 for a 10,000-pool fleet just
    /// made); each is dropped as soon as it is decoded, so the list is
    /// never held whole.
    pub async fn list_unsettled_operations(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Vec<Operation>, CloudError> {
        let req = self.list_operations_request(project, location)?;
        let resp: UnsettledOperations = self.inner.call(&req).await?;
        Ok(resp.operations)
    }

    /// One operation (`operations.get`); `name` may be the short or full name.
    pub async fn get_operation(
        &self,
        project: &str,
        location: &str,
        name: &str,
    ) -> Result<Operation, CloudError> {
        let path = format!(
            "projects/{}/locations/{}/operations/{}",
            segment("project", project)?,
            segment("location", location)?,
            segment("operation", short_name(name))?
        );
        let req = Request::new(
            Method::GET,
            "container.projects.locations.operations.get",
            self.url(&path),
        );
        self.inner.call(&req).await
    }

    /// Waits until `op` is DONE, through the client's shared poller: one
    /// `operations.list` of the location per tick serves every waiter there,
    /// each tick within a tenth of the youngest waiter's age (within
    /// `PollPolicy`'s bounds, see [`super::poll_delay`]); an operation missing
    /// from the list is read with `operations.get`. A DONE operation with an
    /// `error` (or a stockout condition) is [`CloudError::OperationFailed`]
    /// for this operation only; not DONE within `timeout` is
    /// [`CloudError::Timeout`].
    pub async fn wait_operation(
        &self,
        project: &str,
        location: &str,
        op: &Operation,
        timeout: Duration,
    ) -> Result<Operation, CloudError> {
        let name = short_name(&op.name).to_string();
        let key = format!(
            "projects/{}/locations/{}",
            segment("project", project)?,
            segment("location", location)?
        );
        tracing::debug!(operation = %name, location = %key, "waiting for GKE operation");
        let wait = self.inner.gke_ops.wait(
            &key,
            op,
            &self.inner.poll,
            |_waiting| self.list_operations(project, location),
            || self.get_operation(project, location, &name),
        );
        let done =
            tokio::time::timeout(timeout, wait)
                .await
                .map_err(|_| CloudError::Timeout {
                    operation: name.clone(),
                    after: timeout,
                })??;
        operation_result(done)
    }
}

/// The last path segment of an operation name or URL.
fn short_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Judges a finished GKE operation: `Ok` unless it carries an `error` (or a
/// stockout condition), which becomes [`CloudError::OperationFailed`]. The
/// code is the most specific one available: a node pool condition code such
/// as `GCE_STOCKOUT`, else the `google.rpc.Code` name of `error.code`.
pub fn operation_result(op: Operation) -> Result<Operation, CloudError> {
    // GKE reports a create's stockout in `clusterConditions` (with
    // `nodepoolConditions` empty); older answers used `nodepoolConditions`.
    let conditions = || op.cluster_conditions.iter().chain(&op.nodepool_conditions);
    let condition = conditions().find(|c| c.code.as_deref().is_some_and(|code| !code.is_empty()));
    let stockout_condition = conditions().find(|c| {
        c.code
            .as_deref()
            .is_some_and(|c| STOCKOUT_CODES.contains(&c))
    });
    match (&op.error, stockout_condition) {
        (Some(err), _) => {
            let code = condition
                .and_then(|c| c.code.clone())
                .unwrap_or_else(|| rpc_code_name(err.code));
            let message = if err.message.is_empty() {
                condition
                    .and_then(|c| c.message.clone())
                    .or_else(|| op.detail.clone())
                    .unwrap_or_default()
            } else {
                err.message.clone()
            };
            Err(CloudError::OperationFailed {
                operation: op.name,
                code,
                message,
            })
        }
        (None, Some(cond)) => Err(CloudError::OperationFailed {
            operation: op.name.clone(),
            code: cond.code.clone().unwrap_or_default(),
            message: cond.message.clone().unwrap_or_default(),
        }),
        (None, None) => Ok(op),
    }
}

#[cfg(test)]
#[path = "gke/tests.rs"]
mod tests;
