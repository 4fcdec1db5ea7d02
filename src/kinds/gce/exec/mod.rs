//! The shell halves of the Kubernetes-side `gce` kinds: observing Nodes and
//! bootstrap Secrets, the pull-model bootstrap drive (its decisions in
//! [`decide`], its thin loop in `drive`), cordoning and cleanup, and
//! applying the device plugin.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;

use super::device_plugin::{self, DevicePluginBody, DevicePlugins};
use super::nodes::{self, NodeGroupLive, NodeView, Nodes};
use super::render::{NodeGroup, TPU_RESOURCE};
use crate::cloud::{Cloud, CloudError};
use crate::kind::ownership::{self, Ownership};
use crate::kind::{Action, KindId, Scope};
use crate::kind::{ApplyError, KindExec, Observed, StepOp, StepOutcome};
use crate::kube::{DevicePluginObjects, StoredToken};
use crate::resource::KubeRef;

pub mod decide;
mod drive;

pub use decide::{FAILING_GRACE, skew_problem};
pub use drive::{GUEST_QUERY, TOKEN_MIN_LEFT, TOKEN_TTL};

fn kube_of(a: &Action) -> Result<&KubeRef, ApplyError> {
    match &a.id.scope {
        Scope::Kube(k) => Ok(k),
        _ => Err(ApplyError::Scope(a.address())),
    }
}

/// A Node as the kinds read it (readiness, labels, taints, providerID).
pub fn view(n: &Node) -> NodeView {
    let status = n.status.as_ref();
    let qty =
        |m: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
            m.and_then(|m| m.get(TPU_RESOURCE))
                .and_then(|q| q.0.parse::<u32>().ok())
        };
    let spec = n.spec.as_ref();
    NodeView {
        name: n.metadata.name.clone().unwrap_or_default(),
        provider_id: spec.and_then(|s| s.provider_id.clone()).unwrap_or_default(),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        tpu_capacity: qty(status.and_then(|s| s.capacity.as_ref())),
        tpu_allocatable: qty(status.and_then(|s| s.allocatable.as_ref())),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .map(|t| match t.value.as_deref().unwrap_or_default() {
                        "" => format!("{}:{}", t.key, t.effect),
                        v => format!("{}={v}:{}", t.key, t.effect),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
    }
}

/// The label selector of one slice replica's bootstrap Secrets.
fn token_selector(o: &Ownership) -> String {
    format!(
        "{}={},{}={},{}={},{}={}",
        ownership::MANAGED_BY,
        ownership::MANAGER,
        ownership::OWNER,
        o.owner,
        ownership::SLICE,
        o.slice,
        ownership::REPLICA,
        o.replica
    )
}

/// Groups a cluster's Nodes and bootstrap Secrets by the slice replica
/// their labels name. Nodes of GCE VMs (providerID `gce://…`) with no
/// ownership labels are kept apart, in one unnamed group
/// ([`NodeGroupLive::unlabelled`]), for [`crate::kinds::gce::link`] to
/// match with the MIGs whose VMs they are.
pub fn group(nodes: &[Node], tokens: &[StoredToken]) -> Vec<NodeGroupLive> {
    let mut by: BTreeMap<(String, String, u32), NodeGroupLive> = BTreeMap::new();
    let mut strays = Vec::new();
    for n in nodes {
        let labels = n.metadata.labels.clone().unwrap_or_default();
        let Some(o) = Ownership::from_labels(&labels) else {
            let v = view(n);
            if v.provider_id.starts_with(GCE_PROVIDER) {
                strays.push(v);
            }
            continue;
        };
        let key = (o.owner.clone(), o.slice.clone(), o.replica);
        by.entry(key)
            .or_insert_with(|| empty_group(&o))
            .nodes
            .push(view(n));
    }
    for t in tokens {
        let Some(o) = Ownership::from_labels(&t.labels) else {
            continue;
        };
        let key = (o.owner.clone(), o.slice.clone(), o.replica);
        by.entry(key)
            .or_insert_with(|| empty_group(&o))
            .token_secrets
            .push(t.secret_name.clone());
    }
    let mut groups: Vec<NodeGroupLive> = by.into_values().collect();
    if !strays.is_empty() {
        groups.push(NodeGroupLive {
            name: String::new(),
            owner: String::new(),
            slice: String::new(),
            replica: 0,
            nodes: strays,
            token_secrets: Vec::new(),
            released: false,
            unlabelled: true,
        });
    }
    groups
}

/// The providerID scheme of a GCE VM's Node (`gce://PROJECT/ZONE/NAME`).
const GCE_PROVIDER: &str = "gce://";

fn empty_group(o: &Ownership) -> NodeGroupLive {
    NodeGroupLive {
        name: crate::kind::names::mig(&o.slice, o.replica),
        owner: o.owner.clone(),
        slice: o.slice.clone(),
        replica: o.replica,
        nodes: Vec::new(),
        token_secrets: Vec::new(),
        released: false,
        unlabelled: false,
    }
}

/// The live group of an action, as planned (delete / cleanup).
fn planned_group(a: &Action) -> Option<NodeGroupLive> {
    serde_json::from_value(a.before.clone()?).ok()
}

#[async_trait]
impl KindExec for Nodes {
    fn kind(&self) -> KindId {
        nodes::KIND
    }

    fn observes(&self, scope: &Scope) -> bool {
        // A self-managed cluster's API, not a GKE cluster's.
        matches!(scope, Scope::Kube(k) if k.gke_cluster().is_none())
    }

    async fn observe(&self, cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError> {
        let Scope::Kube(k) = scope else {
            return Ok(Observed::default());
        };
        let sel = format!("{}={}", ownership::MANAGED_BY, ownership::MANAGER);
        let (nodes, tokens) =
            tokio::try_join!(cloud.kube.nodes(k), cloud.kube.bootstrap_tokens(k, &sel))?;
        Ok(Observed::new(scope, group(&nodes, &tokens), Vec::new()))
    }

    async fn execute(
        &self,
        cloud: &Cloud,
        _sched: &crate::kind::Scheduler,
        a: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        let k = kube_of(a)?;
        match op {
            // Nodes carry no preventDestroy stamp of their own.
            StepOp::WaitInFlight | StepOp::Drain | StepOp::Guard => Ok(StepOutcome::Done),
            // Labels only: the Nodes are there; label them, wait for none.
            StepOp::Update
                if !a.groups.is_empty() && a.groups.iter().all(|g| *g == nodes::GROUP_LABELS) =>
            {
                let want = crate::kind::desired_body::<NodeGroup>(a)?;
                let names = planned_group(a)
                    .map(|g| g.nodes.into_iter().map(|n| n.name).collect())
                    .unwrap_or_default();
                drive::label_present(cloud, k, want, &names).await
            }
            StepOp::Create | StepOp::Update => {
                let want = crate::kind::desired_body::<NodeGroup>(a)?;
                drive::drive(cloud, a, k, want).await
            }
            StepOp::Delete => {
                // Cordon, before the VMs go.
                let Some(g) = planned_group(a) else {
                    return Ok(StepOutcome::Done);
                };
                for n in &g.nodes {
                    cloud.kube.cordon_node(k, &n.name).await?;
                }
                Ok(StepOutcome::Done)
            }
            StepOp::Cleanup => {
                let Some(g) = planned_group(a) else {
                    return Ok(StepOutcome::Done);
                };
                // Every Node of the replica now, not just those planned
                // (one may have registered since).
                let own = g.ownership();
                let live = group(
                    &cloud.kube.nodes(k).await?,
                    &cloud
                        .kube
                        .bootstrap_tokens(k, &token_selector(&own))
                        .await?,
                );
                let mine = live
                    .into_iter()
                    .find(|l| l.owner == g.owner && l.slice == g.slice && l.replica == g.replica);
                let (nodes, secrets) = match &mine {
                    Some(m) => (m.nodes.clone(), m.token_secrets.clone()),
                    None => (Vec::new(), Vec::new()),
                };
                for n in nodes {
                    cloud.kube.delete_node(k, &n.name).await?;
                }
                for s in secrets {
                    cloud
                        .kube
                        .delete_secret(
                            k,
                            crate::kube::bootstrap_token::BOOTSTRAP_TOKEN_NAMESPACE,
                            &s,
                        )
                        .await?;
                }
                Ok(StepOutcome::Done)
            }
        }
    }
}

fn objects_of(b: &DevicePluginBody) -> DevicePluginObjects {
    DevicePluginObjects {
        service_account: b.service_account.clone(),
        cluster_role: b.cluster_role.clone(),
        cluster_role_binding: b.cluster_role_binding.clone(),
        daemonset: b.daemon_set.clone(),
    }
}

#[async_trait]
impl KindExec for DevicePlugins {
    fn kind(&self) -> KindId {
        device_plugin::KIND
    }

    fn observes(&self, scope: &Scope) -> bool {
        // A self-managed cluster's API, not a GKE cluster's.
        matches!(scope, Scope::Kube(k) if k.gke_cluster().is_none())
    }

    async fn observe(&self, cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError> {
        let Scope::Kube(k) = scope else {
            return Ok(Observed::default());
        };
        let ds = cloud
            .kube
            .daemonset(k, device_plugin::NAMESPACE, device_plugin::NAME)
            .await?;
        Ok(Observed::new(scope, ds.into_iter().collect(), Vec::new()))
    }

    async fn execute(
        &self,
        cloud: &Cloud,
        _sched: &crate::kind::Scheduler,
        a: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        let k = kube_of(a)?;
        match op {
            StepOp::Create | StepOp::Update => {
                let b = crate::kind::desired_body::<DevicePluginBody>(a)?;
                cloud.kube.apply_device_plugin(k, &objects_of(b)).await?;
                Ok(StepOutcome::Done)
            }
            StepOp::Delete => {
                // Names are fixed: render the objects to name them.
                let Some(b) = device_plugin::objects("", "") else {
                    return Ok(StepOutcome::Done);
                };
                cloud.kube.delete_device_plugin(k, &objects_of(&b)).await?;
                Ok(StepOutcome::Done)
            }
            StepOp::WaitInFlight | StepOp::Cleanup | StepOp::Drain | StepOp::Guard => {
                Ok(StepOutcome::Done)
            }
        }
    }
}

#[cfg(test)]
mod tests;
