//! The workload view: per cluster, one list of Nodes and one list of
//! non-terminal Pods, joined by `spec.nodeName` into what the planner needs
//! to tell busy slice replicas from idle ones ([`Workloads`]). A cluster
//! that cannot be listed is recorded as unreadable (its replicas' busy
//! state is unknown, and their destructive steps are held), never as idle.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::cloud::Cloud;
use crate::kube::is_cordoned;
use crate::plan::workload::{BoundPod, ClusterWorkloads, HostNode, Workloads};
use crate::plan::{Owners, Scope};
use crate::resource::KubeRef;
use crate::spec::disruption::{DO_NOT_DISRUPT, DRAINING_SINCE, KARPENTER_DO_NOT_DISRUPT};
use crate::workload::{DemandView, DemandViews, Observed};

/// The annotation the kubelet puts on a static pod's mirror.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The label JobSet puts on its pods.
pub const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";

/// Lists Nodes and Pods of every cluster the fleet's Targets reach (not
/// those deferred) and of the clusters in `extra` (no Target names them,
/// but they hold resources of this fleet), concurrently; and, for the clusters in `demand`
/// (workload-enabled Targets'), their JobSets and pending TPU pods.
pub async fn observe(
    cloud: &Cloud,
    owners: &Owners,
    deferred: &BTreeMap<Scope, String>,
    extra: &[KubeRef],
    demand: &BTreeSet<KubeRef>,
) -> (Workloads, DemandViews) {
    let mut kubes: Vec<&KubeRef> = owners
        .scopes()
        .filter(|s| !deferred.contains_key(*s))
        .filter_map(|s| match s {
            Scope::Kube(k) => Some(k),
            _ => None,
        })
        .collect();
    for k in extra {
        if !kubes.contains(&k) {
            kubes.push(k);
        }
    }
    let observed_at = jiff::Timestamp::now();
    let lists = kubes.iter().map(|k| async move {
        let wants_demand = demand.contains(*k);
        let (nodes, pods, jobsets) = futures::join!(
            cloud.kube.nodes(k),
            cloud.kube.pods(k),
            async {
                if wants_demand {
                    Some(cloud.kube.jobsets(k).await)
                } else {
                    None
                }
            }
        );
        let demand_view = match (&pods, jobsets.as_ref()) {
            (_, None) => None,
            (Ok(pods), Some(Ok(js))) => Some(DemandView::Seen(Observed {
                jobsets: js.iter().map(super::demand::jobset).collect(),
                pending: pods.iter().filter_map(super::demand::pending_pod).collect(),
            })),
            (Err(e), Some(_)) | (_, Some(Err(e))) => {
                tracing::warn!(cluster = %k.endpoint, error = %e, "cannot list the JobSets and pods: no workload slice is created or released there this cycle");
                Some(DemandView::Unreadable(e.to_string()))
            }
        };
        let view = match (nodes, pods) {
            (Ok(nodes), Ok(pods)) => ClusterWorkloads::Seen(join(&nodes, &pods)),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(cluster = %k.endpoint, error = %e, "cannot list the Nodes and Pods: busy slice replicas there cannot be told from idle ones, their destructive steps are held");
                ClusterWorkloads::Unreadable(e.to_string())
            }
        };
        ((*k).clone(), view, demand_view)
    });
    let mut clusters = BTreeMap::new();
    let mut views = DemandViews::new();
    for (k, view, demand_view) in join_all(lists).await {
        if let Some(d) = demand_view {
            views.insert(k.clone(), d);
        }
        clusters.insert(k, view);
    }
    (
        Workloads {
            observed_at: Some(observed_at),
            clusters,
            simulated: false,
        },
        views,
    )
}

/// Whether a pod makes its Node busy: not terminal, not a mirror pod, not
/// a DaemonSet's.
pub fn makes_busy(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let annotations = p.metadata.annotations.as_ref();
    if annotations.is_some_and(|a| a.contains_key(MIRROR_ANNOTATION)) {
        return false;
    }
    let daemon = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet");
    !daemon
}

/// The pod as the plan shows it.
pub fn bound_pod(p: &Pod) -> BoundPod {
    let ns = p.metadata.namespace.clone().unwrap_or_default();
    let labels = p.metadata.labels.as_ref();
    let owner = labels
        .and_then(|l| l.get(JOBSET_NAME))
        .map(|j| format!("jobset {ns}/{j}"))
        .or_else(|| {
            let refs = p.metadata.owner_references.as_ref()?;
            let o = refs
                .iter()
                .find(|o| o.controller == Some(true))
                .or(refs.first())?;
            Some(format!("{} {ns}/{}", o.kind.to_lowercase(), o.name))
        });
    let annotations = p.metadata.annotations.as_ref();
    let do_not_disrupt = [DO_NOT_DISRUPT, KARPENTER_DO_NOT_DISRUPT]
        .iter()
        .any(|a| annotations.and_then(|m| m.get(*a)).map(String::as_str) == Some("true"));
    BoundPod {
        namespace: ns,
        name: p.metadata.name.clone().unwrap_or_default(),
        owner,
        do_not_disrupt,
    }
}

/// Nodes with the busy pods bound to them.
pub fn join(nodes: &[Node], pods: &[Pod]) -> Vec<HostNode> {
    let mut by_node: BTreeMap<&str, Vec<BoundPod>> = BTreeMap::new();
    for p in pods.iter().filter(|p| makes_busy(p)) {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            by_node.entry(n).or_default().push(bound_pod(p));
        }
    }
    nodes
        .iter()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            let labels = n.metadata.labels.clone().unwrap_or_default();
            let draining_since = labels
                .get(DRAINING_SINCE)
                .and_then(|s| s.parse::<i64>().ok())
                .and_then(|s| jiff::Timestamp::from_second(s).ok());
            let mut pods = by_node.remove(name.as_str()).unwrap_or_default();
            pods.sort();
            HostNode {
                provider_id: n
                    .spec
                    .as_ref()
                    .and_then(|s| s.provider_id.clone())
                    .unwrap_or_default(),
                cordoned: is_cordoned(n)
                    || n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true),
                draining_since,
                pods,
                labels,
                name,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn pod(name: &str, node: &str, phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ml".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.into()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..PodStatus::default()
            }),
        }
    }

    fn owned(mut p: Pod, kind: &str, name: &str) -> Pod {
        p.metadata.owner_references = Some(vec![OwnerReference {
            kind: kind.into(),
            name: name.into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        p
    }

    #[test]
    fn only_running_workload_pods_make_a_node_busy() {
        let node = Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                labels: Some([(DRAINING_SINCE.to_owned(), "1764136800".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        let mut mirror = pod("etcd", "n1", "Running");
        mirror.metadata.annotations = Some([(MIRROR_ANNOTATION.to_owned(), "x".to_owned())].into());
        let mut jobset = owned(pod("train-0", "n1", "Running"), "Job", "train-slice-0");
        jobset.metadata.labels = Some([(JOBSET_NAME.to_owned(), "train".to_owned())].into());
        jobset.metadata.annotations = Some([(DO_NOT_DISRUPT.to_owned(), "true".to_owned())].into());
        let pods = vec![
            pod("done", "n1", "Succeeded"),
            pod("failed", "n1", "Failed"),
            mirror,
            owned(
                pod("plugin", "n1", "Running"),
                "DaemonSet",
                "tpu-device-plugin",
            ),
            owned(pod("step", "n1", "Pending"), "Job", "step-3"),
            jobset,
            pod("elsewhere", "n2", "Running"),
        ];
        let view = join(&[node], &pods);
        assert_eq!(view.len(), 1);
        let n = &view[0];
        assert_eq!(n.draining_since.map(|t| t.as_second()), Some(1764136800));
        let shown: Vec<String> = n.pods.iter().map(BoundPod::describe).collect();
        assert_eq!(
            shown,
            ["ml/step (job ml/step-3)", "ml/train-0 (jobset ml/train)"]
        );
        assert!(n.pods[1].do_not_disrupt && !n.pods[0].do_not_disrupt);
    }
}
