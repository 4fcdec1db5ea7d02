//! The narrow seam between slicectl and Google Cloud: one trait per API
//! family. Observation and execution only ever go through these. Two
//! implementations exist: the REST client ([`super::CloudClient`]) and the
//! in-memory recording fake (`fake::FakeCloud`, with the `test-support` feature) used by the
//! executor's unit tests.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{CloudClient, CloudError};
use crate::resource::compute::{
    self, GuestAttributeEntry, Instance, InstanceGroupManager, InstanceGroupManagerPatch,
    InstanceManagedByIgmError, InstanceTemplate, ManagedInstance, Metadata, QuotaInfo, Region,
    Reservation, ResourcePolicy, TimeSeries,
};
use crate::resource::gke::{self, NodePool, UpdateNodePoolRequest};
use crate::resource::{ClusterRef, ProjectRef, ZoneRef};

/// GKE (container v1): node pools and their operations.
#[async_trait]
pub trait GkeService: Send + Sync {
    /// Every node pool of a cluster.
    /// A cluster's node pools, each in its own `Arc` as it is decoded: the
    /// observation hands them to the planner as they are, with no copy.
    async fn list_node_pools(&self, cluster: &ClusterRef)
    -> Result<Vec<Arc<NodePool>>, CloudError>;
    /// One node pool.
    async fn get_node_pool(&self, cluster: &ClusterRef, name: &str)
    -> Result<NodePool, CloudError>;
    /// Starts creating a node pool.
    async fn create_node_pool(
        &self,
        cluster: &ClusterRef,
        pool: &NodePool,
    ) -> Result<gke::Operation, CloudError>;
    /// Starts an in-place update.
    async fn update_node_pool(
        &self,
        cluster: &ClusterRef,
        req: &UpdateNodePoolRequest,
    ) -> Result<gke::Operation, CloudError>;
    /// Starts deleting a node pool.
    async fn delete_node_pool(
        &self,
        cluster: &ClusterRef,
        name: &str,
    ) -> Result<gke::Operation, CloudError>;
    /// One cluster (`clusters.get`): its endpoints and CA, to reach its
    /// Kubernetes API. Services that cannot answer it say so.
    async fn get_cluster(&self, cluster: &ClusterRef) -> Result<gke::ClusterAccess, CloudError> {
        Err(CloudError::InvalidInput(format!(
            "this GKE service cannot read cluster {cluster} (clusters.get)"
        )))
    }
    /// Every GKE cluster of a project, in all its zones and regions
    /// (`clusters.list` with location `-`, one call).
    async fn list_clusters(&self, project: &str) -> Result<gke::ListClustersResponse, CloudError>;
    /// Operations of a location.
    async fn list_operations(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Vec<gke::Operation>, CloudError>;
    /// Operations of a location, shareable: an observation wraps the
    /// service so that each location is listed once, however many of its
    /// clusters are observed ([`crate::observe`]). By default, a fresh list.
    /// Observation reads only the unsettled ones
    /// ([`crate::cloud::gke::is_unsettled`]): an implementation may leave out
    /// the rest (the Google Cloud client does, as it decodes).
    async fn list_operations_shared(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Arc<Vec<gke::Operation>>, CloudError> {
        Ok(Arc::new(self.list_operations(project, location).await?))
    }
    /// One operation, as it is now.
    async fn get_operation(
        &self,
        project: &str,
        location: &str,
        name: &str,
    ) -> Result<gke::Operation, CloudError>;
    /// Waits until an operation is DONE; an error in it is a failure.
    async fn wait_operation(
        &self,
        project: &str,
        location: &str,
        op: &gke::Operation,
        timeout: Duration,
    ) -> Result<gke::Operation, CloudError>;
}

/// Compute Engine (compute v1): resource policies, instance templates,
/// managed instance groups, instances and their operations.
#[async_trait]
pub trait ComputeService: Send + Sync {
    /// Every resource policy of a region.
    async fn list_resource_policies(
        &self,
        project: &str,
        region: &str,
    ) -> Result<Vec<ResourcePolicy>, CloudError>;
    /// One resource policy.
    async fn get_resource_policy(
        &self,
        project: &str,
        region: &str,
        name: &str,
    ) -> Result<ResourcePolicy, CloudError>;
    /// Starts creating a resource policy.
    async fn insert_resource_policy(
        &self,
        project: &str,
        region: &str,
        policy: &ResourcePolicy,
    ) -> Result<compute::Operation, CloudError>;
    /// Starts deleting a resource policy.
    async fn delete_resource_policy(
        &self,
        project: &str,
        region: &str,
        name: &str,
    ) -> Result<compute::Operation, CloudError>;
    /// Operations of a region (only the running ones with `only_running`).
    async fn list_region_operations(
        &self,
        project: &str,
        region: &str,
        only_running: bool,
    ) -> Result<Vec<compute::Operation>, CloudError>;
    /// Waits until an operation is DONE; an error in it is a failure.
    async fn wait_operation(
        &self,
        op: &compute::Operation,
        timeout: Duration,
    ) -> Result<compute::Operation, CloudError>;
    /// Every instance template of a project.
    async fn list_instance_templates(
        &self,
        project: &ProjectRef,
    ) -> Result<Vec<InstanceTemplate>, CloudError>;
    /// One instance template, by URL or `projects/P/global/instanceTemplates/N`
    /// (a bring-your-own template).
    async fn get_instance_template(&self, link: &str) -> Result<InstanceTemplate, CloudError>;
    /// Starts creating an instance template (a global operation).
    async fn insert_instance_template(
        &self,
        project: &ProjectRef,
        template: &InstanceTemplate,
    ) -> Result<compute::Operation, CloudError>;
    /// Starts deleting an instance template (a global operation).
    async fn delete_instance_template(
        &self,
        project: &ProjectRef,
        name: &str,
    ) -> Result<compute::Operation, CloudError>;
    /// Every MIG of a zone.
    async fn list_instance_group_managers(
        &self,
        zone: &ZoneRef,
    ) -> Result<Vec<InstanceGroupManager>, CloudError>;
    /// Every MIG of a project with its zone, and the scopes GCE could not
    /// list (`instanceGroupManagers.aggregatedList`).
    async fn list_instance_group_managers_aggregated(
        &self,
        project: &str,
    ) -> Result<(Vec<(String, InstanceGroupManager)>, Vec<String>), CloudError>;
    /// Starts creating a MIG (a zonal operation).
    async fn insert_instance_group_manager(
        &self,
        zone: &ZoneRef,
        mig: &InstanceGroupManager,
    ) -> Result<compute::Operation, CloudError>;
    /// One MIG, with its current fingerprint.
    async fn get_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
    ) -> Result<InstanceGroupManager, CloudError>;
    /// Patches a MIG with its current fingerprint (a zonal operation); a
    /// stale or missing fingerprint is an error with
    /// [`CloudError::is_stale_fingerprint`].
    async fn patch_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
        patch: &InstanceGroupManagerPatch,
    ) -> Result<compute::Operation, CloudError>;
    /// Starts deleting a MIG and its VMs (a zonal operation).
    async fn delete_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
    ) -> Result<compute::Operation, CloudError>;
    /// Starts recreating VMs of a MIG from its template, each under its
    /// name (`instanceGroupManagers.recreateInstances`, a zonal operation).
    async fn recreate_instances(
        &self,
        zone: &ZoneRef,
        mig: &str,
        instances: &[String],
    ) -> Result<compute::Operation, CloudError>;
    /// The VMs of a MIG, existing or not yet.
    async fn list_managed_instances(
        &self,
        zone: &ZoneRef,
        mig: &str,
    ) -> Result<Vec<ManagedInstance>, CloudError>;
    /// The errors a MIG met creating its VMs (stockouts).
    async fn list_mig_errors(
        &self,
        zone: &ZoneRef,
        mig: &str,
    ) -> Result<Vec<InstanceManagedByIgmError>, CloudError>;
    /// Every VM of a zone.
    async fn list_instances(&self, zone: &ZoneRef) -> Result<Vec<Instance>, CloudError>;
    /// One VM.
    async fn get_instance(&self, zone: &ZoneRef, name: &str) -> Result<Instance, CloudError>;
    /// Replaces a VM's metadata (with its current fingerprint); a stale
    /// fingerprint is an error with [`CloudError::is_stale_fingerprint`].
    async fn set_instance_metadata(
        &self,
        zone: &ZoneRef,
        name: &str,
        metadata: &Metadata,
    ) -> Result<compute::Operation, CloudError>;
    /// The guest attributes a VM wrote under `query_path` (`NS/`); none yet
    /// is an empty list.
    async fn get_guest_attributes(
        &self,
        zone: &ZoneRef,
        instance: &str,
        query_path: &str,
    ) -> Result<Vec<GuestAttributeEntry>, CloudError>;
    /// Every operation of a zone.
    async fn list_zone_operations(
        &self,
        zone: &ZoneRef,
    ) -> Result<Vec<compute::Operation>, CloudError>;
    /// Every global operation of a project.
    async fn list_global_operations(
        &self,
        project: &ProjectRef,
    ) -> Result<Vec<compute::Operation>, CloudError>;

    /// A region with its quotas (the preflight's read).
    async fn get_region(&self, project: &str, region: &str) -> Result<Region, CloudError>;

    /// A specific reservation (the preflight's read).
    async fn get_reservation(&self, zone: &ZoneRef, name: &str) -> Result<Reservation, CloudError>;

    /// A Compute Engine quota from the Cloud Quotas API (the preflight's
    /// read of the TPU quotas `regions.get` does not list).
    async fn get_quota_info(&self, project: &str, quota_id: &str) -> Result<QuotaInfo, CloudError>;

    /// Cloud Monitoring's time series matching `filter` (the preflight's
    /// read of the usage of those quotas).
    async fn list_time_series(
        &self,
        project: &str,
        filter: &str,
    ) -> Result<Vec<TimeSeries>, CloudError>;
}

/// A handle on every API family (cheap to clone).
#[derive(Clone)]
pub struct Cloud {
    /// GKE.
    pub gke: Arc<dyn GkeService>,
    /// Compute Engine.
    pub compute: Arc<dyn ComputeService>,
    /// The Kubernetes API of self-managed clusters (the `gce` backend).
    pub kube: Arc<dyn crate::kube::KubeService>,
    /// `--sim`: no real Kubernetes API is reached. Every self-managed
    /// cluster's Kubernetes side is left out of the plan, said so, and never
    /// dialled (its kubeconfig is not even read). Never set against real
    /// Google Cloud.
    pub sim_defers_kube: bool,
    /// `--unread-clusters-idle`: the user declares that nothing runs in the
    /// clusters whose Pods are not read, so their replicas count as idle
    /// (as under `--sim`), not busy-unknown.
    pub unread_idle: bool,
}

impl Cloud {
    /// The same cloud, reaching self-managed clusters through `kube`.
    pub fn with_kube(self, kube: Arc<dyn crate::kube::KubeService>) -> Cloud {
        Cloud { kube, ..self }
    }

    /// `--sim`: the same cloud with no Kubernetes API at all, every
    /// self-managed cluster's Kubernetes side deferred.
    pub fn sealed_for_sim(self) -> Cloud {
        Cloud {
            kube: Arc::new(crate::kube::KubeClients::sealed()),
            sim_defers_kube: true,
            ..self
        }
    }
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud").finish_non_exhaustive()
    }
}

impl From<CloudClient> for Cloud {
    fn from(c: CloudClient) -> Cloud {
        let tokens = c.token_source();
        let shared = Arc::new(c);
        Cloud {
            gke: shared.clone(),
            compute: shared.clone(),
            // No self-managed cluster until the fleet names one; GKE
            // clusters' APIs through clusters.get and this client's token
            // once their Targets are added (`KubeClients::with_gke`).
            kube: Arc::new(
                crate::kube::KubeClients::new([])
                    .with_gke([], crate::kube::GkeLink::new(shared, tokens)),
            ),
            sim_defers_kube: false,
            unread_idle: false,
        }
    }
}

#[async_trait]
impl GkeService for CloudClient {
    async fn list_node_pools(
        &self,
        cluster: &ClusterRef,
    ) -> Result<Vec<Arc<NodePool>>, CloudError> {
        self.gke().list_node_pools(cluster).await
    }
    async fn get_node_pool(
        &self,
        cluster: &ClusterRef,
        name: &str,
    ) -> Result<NodePool, CloudError> {
        self.gke().get_node_pool(cluster, name).await
    }
    async fn create_node_pool(
        &self,
        cluster: &ClusterRef,
        pool: &NodePool,
    ) -> Result<gke::Operation, CloudError> {
        self.gke().create_node_pool(cluster, pool).await
    }
    async fn update_node_pool(
        &self,
        cluster: &ClusterRef,
        req: &UpdateNodePoolRequest,
    ) -> Result<gke::Operation, CloudError> {
        self.gke().update_node_pool(cluster, req).await
    }
    async fn delete_node_pool(
        &self,
        cluster: &ClusterRef,
        name: &str,
    ) -> Result<gke::Operation, CloudError> {
        self.gke().delete_node_pool(cluster, name).await
    }
    async fn list_clusters(&self, project: &str) -> Result<gke::ListClustersResponse, CloudError> {
        self.gke().list_clusters(project).await
    }
    async fn get_cluster(&self, cluster: &ClusterRef) -> Result<gke::ClusterAccess, CloudError> {
        self.gke().get_cluster(cluster).await
    }
    async fn list_operations(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Vec<gke::Operation>, CloudError> {
        self.gke().list_operations(project, location).await
    }
    /// Only what observation reads of the list (running operations and
    /// failed ones), kept as they are decoded.
    async fn list_operations_shared(
        &self,
        project: &str,
        location: &str,
    ) -> Result<Arc<Vec<gke::Operation>>, CloudError> {
        Ok(Arc::new(
            self.gke()
                .list_unsettled_operations(project, location)
                .await?,
        ))
    }
    async fn get_operation(
        &self,
        project: &str,
        location: &str,
        name: &str,
    ) -> Result<gke::Operation, CloudError> {
        self.gke().get_operation(project, location, name).await
    }
    async fn wait_operation(
        &self,
        project: &str,
        location: &str,
        op: &gke::Operation,
        timeout: Duration,
    ) -> Result<gke::Operation, CloudError> {
        self.gke()
            .wait_operation(project, location, op, timeout)
            .await
    }
}

#[async_trait]
impl ComputeService for CloudClient {
    async fn list_resource_policies(
        &self,
        project: &str,
        region: &str,
    ) -> Result<Vec<ResourcePolicy>, CloudError> {
        self.compute().list_resource_policies(project, region).await
    }
    async fn get_resource_policy(
        &self,
        project: &str,
        region: &str,
        name: &str,
    ) -> Result<ResourcePolicy, CloudError> {
        self.compute()
            .get_resource_policy(project, region, name)
            .await
    }
    async fn insert_resource_policy(
        &self,
        project: &str,
        region: &str,
        policy: &ResourcePolicy,
    ) -> Result<compute::Operation, CloudError> {
        self.compute()
            .insert_resource_policy(project, region, policy)
            .await
    }
    async fn delete_resource_policy(
        &self,
        project: &str,
        region: &str,
        name: &str,
    ) -> Result<compute::Operation, CloudError> {
        self.compute()
            .delete_resource_policy(project, region, name)
            .await
    }
    async fn list_region_operations(
        &self,
        project: &str,
        region: &str,
        only_running: bool,
    ) -> Result<Vec<compute::Operation>, CloudError> {
        self.compute()
            .list_region_operations(project, region, only_running)
            .await
    }
    async fn wait_operation(
        &self,
        op: &compute::Operation,
        timeout: Duration,
    ) -> Result<compute::Operation, CloudError> {
        self.compute().wait_operation(op, timeout).await
    }
    async fn list_instance_templates(
        &self,
        project: &ProjectRef,
    ) -> Result<Vec<InstanceTemplate>, CloudError> {
        self.compute().list_instance_templates(project).await
    }
    async fn get_instance_template(&self, link: &str) -> Result<InstanceTemplate, CloudError> {
        self.compute().get_instance_template(link).await
    }
    async fn insert_instance_template(
        &self,
        project: &ProjectRef,
        template: &InstanceTemplate,
    ) -> Result<compute::Operation, CloudError> {
        self.compute()
            .insert_instance_template(project, template)
            .await
    }
    async fn delete_instance_template(
        &self,
        project: &ProjectRef,
        name: &str,
    ) -> Result<compute::Operation, CloudError> {
        self.compute().delete_instance_template(project, name).await
    }
    async fn list_instance_group_managers(
        &self,
        zone: &ZoneRef,
    ) -> Result<Vec<InstanceGroupManager>, CloudError> {
        self.compute().list_instance_group_managers(zone).await
    }
    async fn list_instance_group_managers_aggregated(
        &self,
        project: &str,
    ) -> Result<(Vec<(String, InstanceGroupManager)>, Vec<String>), CloudError> {
        self.compute()
            .list_instance_group_managers_aggregated(project)
            .await
    }
    async fn insert_instance_group_manager(
        &self,
        zone: &ZoneRef,
        mig: &InstanceGroupManager,
    ) -> Result<compute::Operation, CloudError> {
        self.compute()
            .insert_instance_group_manager(zone, mig)
            .await
    }
    async fn get_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
    ) -> Result<InstanceGroupManager, CloudError> {
        self.compute().get_instance_group_manager(zone, name).await
    }
    async fn patch_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
        patch: &InstanceGroupManagerPatch,
    ) -> Result<compute::Operation, CloudError> {
        self.compute()
            .patch_instance_group_manager(zone, name, patch)
            .await
    }
    async fn delete_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
    ) -> Result<compute::Operation, CloudError> {
        self.compute()
            .delete_instance_group_manager(zone, name)
            .await
    }
    async fn recreate_instances(
        &self,
        zone: &ZoneRef,
        mig: &str,
        instances: &[String],
    ) -> Result<compute::Operation, CloudError> {
        self.compute()
            .recreate_instances(zone, mig, instances)
            .await
    }
    async fn list_managed_instances(
        &self,
        zone: &ZoneRef,
        mig: &str,
    ) -> Result<Vec<ManagedInstance>, CloudError> {
        self.compute().list_managed_instances(zone, mig).await
    }
    async fn list_mig_errors(
        &self,
        zone: &ZoneRef,
        mig: &str,
    ) -> Result<Vec<InstanceManagedByIgmError>, CloudError> {
        self.compute().list_mig_errors(zone, mig).await
    }
    async fn list_instances(&self, zone: &ZoneRef) -> Result<Vec<Instance>, CloudError> {
        self.compute().list_instances(zone).await
    }
    async fn get_instance(&self, zone: &ZoneRef, name: &str) -> Result<Instance, CloudError> {
        self.compute().get_instance(zone, name).await
    }
    async fn set_instance_metadata(
        &self,
        zone: &ZoneRef,
        name: &str,
        metadata: &Metadata,
    ) -> Result<compute::Operation, CloudError> {
        self.compute()
            .set_instance_metadata(zone, name, metadata)
            .await
    }
    async fn get_guest_attributes(
        &self,
        zone: &ZoneRef,
        instance: &str,
        query_path: &str,
    ) -> Result<Vec<GuestAttributeEntry>, CloudError> {
        self.compute()
            .get_guest_attributes(zone, instance, query_path)
            .await
    }
    async fn list_zone_operations(
        &self,
        zone: &ZoneRef,
    ) -> Result<Vec<compute::Operation>, CloudError> {
        self.compute().list_zone_operations(zone).await
    }
    async fn list_global_operations(
        &self,
        project: &ProjectRef,
    ) -> Result<Vec<compute::Operation>, CloudError> {
        self.compute().list_global_operations(project).await
    }
    async fn get_region(&self, project: &str, region: &str) -> Result<Region, CloudError> {
        self.compute().get_region(project, region).await
    }
    async fn get_reservation(&self, zone: &ZoneRef, name: &str) -> Result<Reservation, CloudError> {
        self.compute().get_reservation(zone, name).await
    }
    async fn get_quota_info(&self, project: &str, quota_id: &str) -> Result<QuotaInfo, CloudError> {
        self.compute().get_quota_info(project, quota_id).await
    }
    async fn list_time_series(
        &self,
        project: &str,
        filter: &str,
    ) -> Result<Vec<TimeSeries>, CloudError> {
        self.compute().list_time_series(project, filter).await
    }
}
