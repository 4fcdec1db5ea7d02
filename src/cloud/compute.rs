//! Compute Engine (compute v1): resource (workload) policies, instance
//! templates, managed instance groups, instances (metadata, guest
//! attributes) and zone / region / global operations.
//!
//! Built from generic pieces — a [`ComputeScope`] (global / region / zone),
//! paged `list`, `get`, and `write` (which adds a `requestId` that stays the
//! same across retries) — so instance templates, MIGs, instances and
//! `setMetadata` are thin wrappers over the same calls.

use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::Inner;
use super::endpoints::segment;
use super::error::CloudError;
use super::http::{Access, Request};
use crate::resource::compute::{
    GuestAttributeEntry, GuestAttributes, Instance, InstanceGroupManager,
    InstanceGroupManagerAggregatedList, InstanceGroupManagerPatch, InstanceManagedByIgmError,
    InstanceTemplate, ListTimeSeriesResponse, ManagedInstance, ManagedInstanceList, Metadata,
    Operation, QuotaInfo, RecreateInstancesRequest, Region, Reservation, ResourcePolicy,
    TimeSeries,
};
use crate::resource::{ProjectRef, ZoneRef};

/// Where a compute resource or operation lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ComputeScope {
    /// `projects/P/global/...`
    Global,
    /// `projects/P/regions/R/...`
    Region(String),
    /// `projects/P/zones/Z/...`
    Zone(String),
}

impl ComputeScope {
    /// The scope of an operation: from its `zone` or `region` URL, else global.
    pub fn of_operation(op: &Operation) -> ComputeScope {
        if let Some(z) = op.zone.as_deref().filter(|z| !z.is_empty()) {
            ComputeScope::Zone(last_segment(z).to_string())
        } else if let Some(r) = op.region.as_deref().filter(|r| !r.is_empty()) {
            ComputeScope::Region(last_segment(r).to_string())
        } else {
            ComputeScope::Global
        }
    }

    /// `global`, `regions/R` or `zones/Z`.
    fn path(&self) -> Result<String, CloudError> {
        Ok(match self {
            ComputeScope::Global => "global".to_string(),
            ComputeScope::Region(r) => format!("regions/{}", segment("region", r)?),
            ComputeScope::Zone(z) => format!("zones/{}", segment("zone", z)?),
        })
    }

    /// The operations collection of this scope: its list and get methods.
    fn operations_collection(&self) -> (&'static str, &'static str) {
        match self {
            ComputeScope::Global => (
                "compute.globalOperations.list",
                "compute.globalOperations.get",
            ),
            ComputeScope::Region(_) => (
                "compute.regionOperations.list",
                "compute.regionOperations.get",
            ),
            ComputeScope::Zone(_) => ("compute.zoneOperations.list", "compute.zoneOperations.get"),
        }
    }
}

/// One page of a compute list (`items`, `nextPageToken`); its fields are
/// checked against `ResourcePolicyList`/`OperationList` in the tests below.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", bound(deserialize = "T: DeserializeOwned"))]
struct Page<T> {
    #[serde(default)]
    items: Vec<T>,
    #[serde(default)]
    next_page_token: Option<String>,
}

/// Compute calls; get one with [`super::CloudClient::compute`].
#[derive(Clone, Copy)]
pub struct ComputeApi<'a> {
    inner: &'a Inner,
}

impl<'a> ComputeApi<'a> {
    pub(crate) fn new(inner: &'a Inner) -> ComputeApi<'a> {
        ComputeApi { inner }
    }

    /// `{compute}projects/P/{scope}/{collection}[/{name}]`.
    fn url(
        &self,
        project: &str,
        scope: &ComputeScope,
        collection: &str,
        name: Option<&str>,
    ) -> Result<String, CloudError> {
        let mut path = format!(
            "projects/{}/{}/{collection}",
            segment("project", project)?,
            scope.path()?
        );
        if let Some(name) = name {
            path.push('/');
            path.push_str(segment("name", name)?);
        }
        Ok(self.inner.endpoints.compute_url(&path))
    }

    /// GET one resource.
    async fn get<T: DeserializeOwned + Send + 'static>(
        &self,
        api_method: &'static str,
        url: String,
    ) -> Result<T, CloudError> {
        self.inner
            .call(&Request::new(Method::GET, api_method, url))
            .await
    }

    /// GET every page of a list (`maxResults` = the client's page size).
    async fn list<T: DeserializeOwned + Send + 'static>(
        &self,
        api_method: &'static str,
        url: String,
        filter: Option<&str>,
    ) -> Result<Vec<T>, CloudError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        let mut seen_tokens = std::collections::HashSet::new();
        loop {
            let mut req = Request::new(Method::GET, api_method, url.clone())
                .query("maxResults", self.inner.page_size.to_string());
            if let Some(f) = filter {
                req = req.query("filter", f);
            }
            if let Some(t) = &token {
                req = req.query("pageToken", t.clone());
            }
            let page: Page<T> = self.inner.call(&req).await?;
            out.extend(page.items);
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) => {
                    if !seen_tokens.insert(next.clone()) {
                        return Err(CloudError::InvalidInput(format!(
                            "{api_method}: server repeated page token {next:?}"
                        )));
                    }
                    token = Some(next);
                }
                None => return Ok(out),
            }
        }
    }

    /// A mutating call that returns an `Operation`, with a `requestId` that
    /// stays the same across retries so the server runs it at most once.
    async fn write<B: Serialize + ?Sized>(
        &self,
        method: Method,
        api_method: &'static str,
        url: String,
        body: Option<&B>,
    ) -> Result<Operation, CloudError> {
        let mut req = Request::new(method, api_method, url);
        if let Some(b) = body {
            req = req.json(b)?;
        }
        self.inner.call(&req.with_request_id()).await
    }

    /// All resource policies of a region (follows `nextPageToken`).
    pub async fn list_resource_policies(
        &self,
        project: &str,
        region: &str,
    ) -> Result<Vec<ResourcePolicy>, CloudError> {
        let scope = ComputeScope::Region(region.to_string());
        let url = self.url(project, &scope, "resourcePolicies", None)?;
        self.list("compute.resourcePolicies.list", url, None).await
    }

    /// One resource policy.
    pub async fn get_resource_policy(
        &self,
        project: &str,
        region: &str,
        name: &str,
    ) -> Result<ResourcePolicy, CloudError> {
        let scope = ComputeScope::Region(region.to_string());
        let url = self.url(project, &scope, "resourcePolicies", Some(name))?;
        self.get("compute.resourcePolicies.get", url).await
    }

    /// Starts creating a resource policy (a regional operation).
    pub async fn insert_resource_policy(
        &self,
        project: &str,
        region: &str,
        policy: &ResourcePolicy,
    ) -> Result<Operation, CloudError> {
        segment("resource policy", &policy.name)?;
        let scope = ComputeScope::Region(region.to_string());
        let url = self.url(project, &scope, "resourcePolicies", None)?;
        self.write(
            Method::POST,
            "compute.resourcePolicies.insert",
            url,
            Some(policy),
        )
        .await
    }

    /// Starts deleting a resource policy (a regional operation).
    pub async fn delete_resource_policy(
        &self,
        project: &str,
        region: &str,
        name: &str,
    ) -> Result<Operation, CloudError> {
        let scope = ComputeScope::Region(region.to_string());
        let url = self.url(project, &scope, "resourcePolicies", Some(name))?;
        self.write::<()>(Method::DELETE, "compute.resourcePolicies.delete", url, None)
            .await
    }

    /// Operations of a region; with `only_running`, those not DONE (filter
    /// `status != DONE`, applied again client-side in case the server ignores it).
    pub async fn list_region_operations(
        &self,
        project: &str,
        region: &str,
        only_running: bool,
    ) -> Result<Vec<Operation>, CloudError> {
        let scope = ComputeScope::Region(region.to_string());
        let url = self.url(project, &scope, "operations", None)?;
        let filter = only_running.then_some("status != DONE");
        let mut ops: Vec<Operation> = self
            .list("compute.regionOperations.list", url, filter)
            .await?;
        if only_running {
            ops.retain(|op| op.status != "DONE");
        }
        Ok(ops)
    }

    // ---- instance templates (global) ----------------------------------

    /// All instance templates of a project (follows `nextPageToken`).
    pub async fn list_instance_templates(
        &self,
        project: &ProjectRef,
    ) -> Result<Vec<InstanceTemplate>, CloudError> {
        let url = self.url(
            &project.project,
            &ComputeScope::Global,
            "instanceTemplates",
            None,
        )?;
        self.list("compute.instanceTemplates.list", url, None).await
    }

    /// One instance template, by URL (any host) or
    /// `projects/P/global/instanceTemplates/N` (a bring-your-own template).
    pub async fn get_instance_template(&self, link: &str) -> Result<InstanceTemplate, CloudError> {
        let (project, name) = template_of_link(link)?;
        let url = self.url(
            &project,
            &ComputeScope::Global,
            "instanceTemplates",
            Some(&name),
        )?;
        self.get("compute.instanceTemplates.get", url).await
    }

    /// Starts creating an instance template (a global operation).
    pub async fn insert_instance_template(
        &self,
        project: &ProjectRef,
        template: &InstanceTemplate,
    ) -> Result<Operation, CloudError> {
        segment("instance template", &template.name)?;
        let url = self.url(
            &project.project,
            &ComputeScope::Global,
            "instanceTemplates",
            None,
        )?;
        self.write(
            Method::POST,
            "compute.instanceTemplates.insert",
            url,
            Some(template),
        )
        .await
    }

    /// Starts deleting an instance template (a global operation).
    pub async fn delete_instance_template(
        &self,
        project: &ProjectRef,
        name: &str,
    ) -> Result<Operation, CloudError> {
        let url = self.url(
            &project.project,
            &ComputeScope::Global,
            "instanceTemplates",
            Some(name),
        )?;
        self.write::<()>(
            Method::DELETE,
            "compute.instanceTemplates.delete",
            url,
            None,
        )
        .await
    }

    // ---- managed instance groups (zonal) --------------------------------

    fn zone_url(
        &self,
        zone: &ZoneRef,
        collection: &str,
        name: Option<&str>,
    ) -> Result<String, CloudError> {
        self.url(
            &zone.project,
            &ComputeScope::Zone(zone.zone.clone()),
            collection,
            name,
        )
    }

    /// All MIGs of a zone (follows `nextPageToken`).
    pub async fn list_instance_group_managers(
        &self,
        zone: &ZoneRef,
    ) -> Result<Vec<InstanceGroupManager>, CloudError> {
        let url = self.zone_url(zone, "instanceGroupManagers", None)?;
        self.list("compute.instanceGroupManagers.list", url, None)
            .await
    }

    /// Every MIG of a project, with its zone
    /// (`instanceGroupManagers.aggregatedList`, following `nextPageToken`),
    /// and the scopes GCE could not list (`unreachables`).
    pub async fn list_instance_group_managers_aggregated(
        &self,
        project: &str,
    ) -> Result<(Vec<(String, InstanceGroupManager)>, Vec<String>), CloudError> {
        const METHOD: &str = "compute.instanceGroupManagers.aggregatedList";
        let url = self.inner.endpoints.compute_url(&format!(
            "projects/{}/aggregated/instanceGroupManagers",
            segment("project", project)?
        ));
        let mut out = Vec::new();
        let mut unreachable = Vec::new();
        let mut token: Option<String> = None;
        let mut seen_tokens = std::collections::HashSet::new();
        loop {
            let mut req = Request::new(Method::GET, METHOD, url.clone())
                .query("maxResults", self.inner.page_size.to_string());
            if let Some(t) = &token {
                req = req.query("pageToken", t.clone());
            }
            let page: InstanceGroupManagerAggregatedList = self.inner.call(&req).await?;
            for (scope, list) in page.items {
                let Some(zone) = scope.strip_prefix("zones/") else {
                    continue;
                };
                out.extend(
                    list.instance_group_managers
                        .into_iter()
                        .map(|m| (zone.to_string(), m)),
                );
            }
            unreachable.extend(page.unreachables);
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) => {
                    if !seen_tokens.insert(next.clone()) {
                        return Err(CloudError::InvalidInput(format!(
                            "{METHOD}: server repeated page token {next:?}"
                        )));
                    }
                    token = Some(next);
                }
                None => return Ok((out, unreachable)),
            }
        }
    }

    /// Starts creating a MIG (a zonal operation, DONE once the group exists,
    /// before its VMs do).
    pub async fn insert_instance_group_manager(
        &self,
        zone: &ZoneRef,
        mig: &InstanceGroupManager,
    ) -> Result<Operation, CloudError> {
        segment("instance group manager", &mig.name)?;
        let url = self.zone_url(zone, "instanceGroupManagers", None)?;
        self.write(
            Method::POST,
            "compute.instanceGroupManagers.insert",
            url,
            Some(mig),
        )
        .await
    }

    /// One MIG (its current `fingerprint` included).
    pub async fn get_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
    ) -> Result<InstanceGroupManager, CloudError> {
        let url = self.zone_url(zone, "instanceGroupManagers", Some(name))?;
        self.get("compute.instanceGroupManagers.get", url).await
    }

    /// Patches a MIG (`PATCH …/instanceGroupManagers/M`, a JSON merge
    /// patch; a zonal operation). `patch.fingerprint` must be the group's
    /// current one: a stale or missing one is HTTP 412 `conditionNotMet`
    /// ([`CloudError::is_stale_fingerprint`]): read the group again and retry.
    pub async fn patch_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
        patch: &InstanceGroupManagerPatch,
    ) -> Result<Operation, CloudError> {
        let url = self.zone_url(zone, "instanceGroupManagers", Some(name))?;
        self.write(
            Method::PATCH,
            "compute.instanceGroupManagers.patch",
            url,
            Some(patch),
        )
        .await
    }

    /// Starts deleting a MIG and its VMs (a zonal operation).
    pub async fn delete_instance_group_manager(
        &self,
        zone: &ZoneRef,
        name: &str,
    ) -> Result<Operation, CloudError> {
        let url = self.zone_url(zone, "instanceGroupManagers", Some(name))?;
        self.write::<()>(
            Method::DELETE,
            "compute.instanceGroupManagers.delete",
            url,
            None,
        )
        .await
    }

    /// Starts recreating VMs of a MIG (`POST …/recreateInstances`, a zonal
    /// operation DONE once they are flagged): each VM is deleted and made
    /// again under its name from the group's template.
    pub async fn recreate_instances(
        &self,
        zone: &ZoneRef,
        mig: &str,
        instances: &[String],
    ) -> Result<Operation, CloudError> {
        segment("instance group manager", mig)?;
        let url = format!(
            "{}/recreateInstances",
            self.zone_url(zone, "instanceGroupManagers", Some(mig))?
        );
        let body = RecreateInstancesRequest {
            instances: instances
                .iter()
                .map(|i| format!("zones/{}/instances/{i}", zone.zone))
                .collect(),
        };
        self.write(
            Method::POST,
            "compute.instanceGroupManagers.recreateInstances",
            url,
            Some(&body),
        )
        .await
    }

    /// The VMs of a MIG (`POST …/listManagedInstances`, a read; follows
    /// `nextPageToken` when the group pages its answer).
    pub async fn list_managed_instances(
        &self,
        zone: &ZoneRef,
        mig: &str,
    ) -> Result<Vec<ManagedInstance>, CloudError> {
        const METHOD: &str = "compute.instanceGroupManagers.listManagedInstances";
        let url = format!(
            "{}/listManagedInstances",
            self.zone_url(zone, "instanceGroupManagers", Some(mig))?
        );
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        loop {
            let mut req = Request::new(Method::POST, METHOD, url.clone())
                .access(Access::Read)
                .query("maxResults", self.inner.page_size.to_string());
            if let Some(t) = &token {
                req = req.query("pageToken", t.clone());
            }
            let page: ManagedInstanceList = self.inner.call(&req).await?;
            out.extend(page.managed_instances);
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) if seen.insert(next.clone()) => token = Some(next),
                Some(next) => {
                    return Err(CloudError::InvalidInput(format!(
                        "{METHOD}: server repeated page token {next:?}"
                    )));
                }
                None => return Ok(out),
            }
        }
    }

    /// The errors a MIG met creating or deleting its VMs (`listErrors`,
    /// e.g. `ZONE_RESOURCE_POOL_EXHAUSTED`).
    pub async fn list_mig_errors(
        &self,
        zone: &ZoneRef,
        mig: &str,
    ) -> Result<Vec<InstanceManagedByIgmError>, CloudError> {
        let url = format!(
            "{}/listErrors",
            self.zone_url(zone, "instanceGroupManagers", Some(mig))?
        );
        // `InstanceGroupManagersListErrorsResponse` has the `items` /
        // `nextPageToken` shape of every list (checked in the tests below).
        self.list("compute.instanceGroupManagers.listErrors", url, None)
            .await
    }

    // ---- quotas and reservations (read by the preflight) ---------------------

    /// A region, with its quotas (`regions.get`; needs `compute.regions.get`).
    pub async fn get_region(&self, project: &str, region: &str) -> Result<Region, CloudError> {
        let url = self.inner.endpoints.compute_url(&format!(
            "projects/{}/regions/{}",
            segment("project", project)?,
            segment("region", region)?
        ));
        self.get("compute.regions.get", url).await
    }

    /// One Compute Engine quota of the Cloud Quotas API
    /// (`projects.locations.services.quotaInfos.get`; needs
    /// `cloudquotas.quotas.get`, in `roles/cloudquotas.viewer`): the limits
    /// of the quotas `regions.get` does not list (TPU v5p, v6e, TPU7x).
    pub async fn get_quota_info(
        &self,
        project: &str,
        quota_id: &str,
    ) -> Result<QuotaInfo, CloudError> {
        let url = self.inner.endpoints.cloudquotas_url(&format!(
            "projects/{}/locations/global/services/compute.googleapis.com/quotaInfos/{}",
            segment("project", project)?,
            segment("quota id", quota_id)?
        ));
        self.get(
            "cloudquotas.projects.locations.services.quotaInfos.get",
            url,
        )
        .await
    }

    /// The time series of Cloud Monitoring matching `filter` over the ten
    /// minutes before now (`projects.timeSeries.list`, every page; needs
    /// `monitoring.timeSeries.list`, in `roles/monitoring.viewer`): the usage
    /// of the quotas Cloud Quotas gives only the limits of.
    pub async fn list_time_series(
        &self,
        project: &str,
        filter: &str,
    ) -> Result<Vec<TimeSeries>, CloudError> {
        const METHOD: &str = "monitoring.projects.timeSeries.list";
        let url = self.inner.endpoints.monitoring_url(&format!(
            "projects/{}/timeSeries",
            segment("project", project)?
        ));
        let end = jiff::Timestamp::now();
        let start = end
            .checked_sub(jiff::SignedDuration::from_mins(10))
            .unwrap_or(end);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        let mut seen_tokens = std::collections::HashSet::new();
        loop {
            let mut req = Request::new(Method::GET, METHOD, url.clone())
                .query("filter", filter)
                .query("interval.endTime", end.to_string())
                .query("interval.startTime", start.to_string());
            if let Some(t) = &token {
                req = req.query("pageToken", t.clone());
            }
            let page: ListTimeSeriesResponse = self.inner.call(&req).await?;
            out.extend(page.time_series);
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) if seen_tokens.insert(next.clone()) => token = Some(next),
                Some(next) => {
                    return Err(CloudError::InvalidInput(format!(
                        "{METHOD}: server repeated page token {next:?}"
                    )));
                }
                None => return Ok(out),
            }
        }
    }

    /// One specific reservation (`reservations.get`; needs
    /// `compute.reservations.get`).
    pub async fn get_reservation(
        &self,
        zone: &ZoneRef,
        name: &str,
    ) -> Result<Reservation, CloudError> {
        let url = self.zone_url(zone, "reservations", Some(name))?;
        self.get("compute.reservations.get", url).await
    }

    // ---- instances ----------------------------------------------------------

    /// All VMs of a zone (follows `nextPageToken`).
    pub async fn list_instances(&self, zone: &ZoneRef) -> Result<Vec<Instance>, CloudError> {
        let url = self.zone_url(zone, "instances", None)?;
        self.list("compute.instances.list", url, None).await
    }

    /// One VM.
    pub async fn get_instance(&self, zone: &ZoneRef, name: &str) -> Result<Instance, CloudError> {
        let url = self.zone_url(zone, "instances", Some(name))?;
        self.get("compute.instances.get", url).await
    }

    /// Replaces a VM's metadata items; `metadata.fingerprint` must be the
    /// VM's current one. A stale one is HTTP 412 `conditionNotMet`
    /// ([`CloudError::is_stale_fingerprint`]): read the VM again and retry.
    pub async fn set_instance_metadata(
        &self,
        zone: &ZoneRef,
        name: &str,
        metadata: &Metadata,
    ) -> Result<Operation, CloudError> {
        let url = format!(
            "{}/setMetadata",
            self.zone_url(zone, "instances", Some(name))?
        );
        self.write(
            Method::POST,
            "compute.instances.setMetadata",
            url,
            Some(metadata),
        )
        .await
    }

    /// The guest attributes a VM wrote under `query_path` (`NS/` or
    /// `NS/KEY`). None written yet (HTTP 404) is an empty list.
    pub async fn get_guest_attributes(
        &self,
        zone: &ZoneRef,
        instance: &str,
        query_path: &str,
    ) -> Result<Vec<GuestAttributeEntry>, CloudError> {
        let url = format!(
            "{}/getGuestAttributes",
            self.zone_url(zone, "instances", Some(instance))?
        );
        let req = Request::new(Method::GET, "compute.instances.getGuestAttributes", url)
            .query("queryPath", query_path);
        match self.inner.call::<GuestAttributes>(&req).await {
            Ok(g) => Ok(g.query_value.map(|v| v.items).unwrap_or_default()),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    // ---- operations ---------------------------------------------------------

    /// Every operation of a zone.
    pub async fn list_zone_operations(&self, zone: &ZoneRef) -> Result<Vec<Operation>, CloudError> {
        let url = self.zone_url(zone, "operations", None)?;
        self.list("compute.zoneOperations.list", url, None).await
    }

    /// Every global operation of a project.
    pub async fn list_global_operations(
        &self,
        project: &ProjectRef,
    ) -> Result<Vec<Operation>, CloudError> {
        let url = self.url(&project.project, &ComputeScope::Global, "operations", None)?;
        self.list("compute.globalOperations.list", url, None).await
    }

    /// Reads an operation again (`{zone,region,global}Operations.get`).
    pub async fn get_operation(&self, op: &Operation) -> Result<Operation, CloudError> {
        let (project, scope) = operation_location(op)?;
        let (_, get_method) = scope.operations_collection();
        let url = self.url(&project, &scope, "operations", Some(&op.name))?;
        self.get(get_method, url).await
    }

    /// Waits until `op` is DONE, through the client's shared poller: one
    /// `{zone,region,global}Operations.list` of the operation's scope per
    /// tick serves every waiter there (narrowed by a `filter` on the names
    /// waited on, [`waiting_filter`]; every page followed), each tick within
    /// a tenth of the youngest waiter's age (see [`super::poll_delay`]); an
    /// operation missing from the list is read with `get`. A DONE operation
    /// with errors is [`CloudError::OperationFailed`] for this operation
    /// only; not DONE within `timeout` is [`CloudError::Timeout`].
    pub async fn wait_operation(
        &self,
        op: &Operation,
        timeout: Duration,
    ) -> Result<Operation, CloudError> {
        if op.status == "DONE" {
            return operation_result(op.clone());
        }
        let (project, scope) = operation_location(op)?;
        let (list_method, _) = scope.operations_collection();
        let collection = self.url(&project, &scope, "operations", None)?;
        let key = format!("projects/{project}/{}", scope.path()?);
        tracing::debug!(operation = %op.name, location = %key, "waiting for compute operation");
        let wait = self.inner.compute_ops.wait(
            &key,
            op,
            &self.inner.poll,
            |waiting| {
                let url = collection.clone();
                async move {
                    let filter = waiting_filter(&waiting);
                    self.list(list_method, url, filter.as_deref()).await
                }
            },
            || self.get_operation(op),
        );
        let done =
            tokio::time::timeout(timeout, wait)
                .await
                .map_err(|_| CloudError::Timeout {
                    operation: op.name.clone(),
                    after: timeout,
                })??;
        operation_result(done)
    }
}

/// The `filter` of an operations list that keeps only the operations
/// waited on: `name eq "a|b"`, Compute's regular-expression form ("the
/// literal value is interpreted as a regular expression using GoogleRE2
/// library syntax. The literal value must match the entire field", the
/// `filter` parameter of `zoneOperations.list` in the Compute v1 discovery
/// document, <https://cloud.google.com/compute/docs/reference/rest/v1/zoneOperations/list>).
/// `None` (list everything) when a name is not a plain operation name or the
/// filter would make the URL long; the list is paged either way.
fn waiting_filter(names: &[String]) -> Option<String> {
    const MAX_FILTER: usize = 2000;
    let plain = |n: &String| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if names.is_empty() || !names.iter().all(plain) {
        return None;
    }
    let filter = format!("name eq \"{}\"", names.join("|"));
    (filter.len() <= MAX_FILTER).then_some(filter)
}

/// The project (from `selfLink`, else `targetLink`) and scope of an operation.
fn operation_location(op: &Operation) -> Result<(String, ComputeScope), CloudError> {
    segment("operation", &op.name)?;
    let project = [op.self_link.as_deref(), op.target_link.as_deref()]
        .into_iter()
        .flatten()
        .find_map(project_of_link)
        .ok_or_else(|| {
            CloudError::InvalidInput(format!(
                "operation {:?} has no selfLink or targetLink naming its project",
                op.name
            ))
        })?;
    Ok((project.to_string(), ComputeScope::of_operation(op)))
}

/// `(project, name)` of an instance template link: a full URL (any host
/// and version) or `projects/P/global/instanceTemplates/N`.
fn template_of_link(link: &str) -> Result<(String, String), CloudError> {
    let path = link
        .find("projects/")
        .map(|i| &link[i..])
        .unwrap_or_default()
        .trim_end_matches('/');
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", p, "global", "instanceTemplates", n] if !p.is_empty() && !n.is_empty() => {
            Ok(((*p).to_string(), (*n).to_string()))
        }
        _ => Err(CloudError::InvalidInput(format!(
            "{link:?} is not a global instance template (expected a URL or \
             projects/P/global/instanceTemplates/NAME)"
        ))),
    }
}

/// `P` from `…/projects/P/…`.
fn project_of_link(link: &str) -> Option<&str> {
    let mut parts = link.split('/');
    parts.find(|p| *p == "projects")?;
    parts.next().filter(|p| !p.is_empty())
}

fn last_segment(s: &str) -> &str {
    s.trim_end_matches('/').rsplit('/').next().unwrap_or(s)
}

/// Judges a finished compute operation: `Ok` unless it has `error.errors[]`
/// (code such as `ZONE_RESOURCE_POOL_EXHAUSTED`) or an
/// `httpErrorStatusCode` ≥ 400, which become [`CloudError::OperationFailed`].
pub fn operation_result(op: Operation) -> Result<Operation, CloudError> {
    if let Some(err) = op.error.as_ref().filter(|e| !e.errors.is_empty()) {
        let code = err.errors[0].code.clone();
        let message = err
            .errors
            .iter()
            .map(|e| {
                if e.code.is_empty() || e.code == code {
                    e.message.clone()
                } else {
                    format!("{}: {}", e.code, e.message)
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(CloudError::OperationFailed {
            operation: op.name,
            code,
            message,
        });
    }
    if let Some(status) = op.http_error_status_code.filter(|s| *s >= 400) {
        return Err(CloudError::OperationFailed {
            operation: op.name,
            code: format!("HTTP_{status}"),
            message: op.http_error_message.unwrap_or_default(),
        });
    }
    Ok(op)
}

#[cfg(test)]
#[path = "compute/tests.rs"]
mod tests;
