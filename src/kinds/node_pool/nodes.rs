//! The Nodes of a GKE slice replica, as an observe-only kind: GKE makes and
//! removes them with the node pool, slicectl only reads them, in the
//! cluster's Kubernetes API (scope [`KubeRef::gke`]), to say whether the
//! replica is ready for a TPU job ([`crate::kinds::readiness`]).
//!
//! Desired: one group per node pool, `hosts` Nodes labelled
//! `cloud.google.com/gke-nodepool=POOL` with the slice's accelerator and
//! topology labels and `google.com/tpu` = chips per host. Live: the
//! cluster's Nodes grouped by their `cloud.google.com/gke-nodepool` label.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cloud::{Cloud, CloudError};
use crate::kind::ownership::Ownership;
use crate::kind::{
    Action, ApplyError, Body, Comparison, Desired, Kind, KindExec, KindId, LiveReport, LiveState,
    Observed, RenderCtx, Scheduler, Scope, StepOp, StepOutcome, body_as,
};
use crate::kinds::gce::nodes::NodeView;
use crate::kinds::readiness::{self, Expect, LABEL_ACCELERATOR, LABEL_NODEPOOL, LABEL_TOPOLOGY};
use crate::resource::{ClusterRef, KubeRef};

/// The kind's name.
pub const KIND: KindId = KindId("gke_nodes");

/// The GKE Nodes kind.
#[derive(Debug, Clone, Copy)]
pub struct GkeNodes;

/// What a GKE slice replica's Nodes must be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GkeNodesWant {
    /// The node pool (the Nodes' `cloud.google.com/gke-nodepool`).
    pub pool: String,
    /// Nodes in the pool (hosts of the topology).
    pub hosts: u32,
    /// `google.com/tpu` per Node.
    pub chips: u32,
    /// `cloud.google.com/gke-tpu-accelerator`.
    pub accelerator: String,
    /// `cloud.google.com/gke-tpu-topology`.
    pub topology: String,
}

impl GkeNodesWant {
    /// The readiness expectation.
    pub fn expectation(&self) -> Expect {
        Expect {
            hosts: self.hosts,
            chips: self.chips,
            labels: BTreeMap::from([
                (LABEL_NODEPOOL.to_string(), self.pool.clone()),
                (LABEL_ACCELERATOR.to_string(), self.accelerator.clone()),
                (LABEL_TOPOLOGY.to_string(), self.topology.clone()),
            ]),
        }
    }
}

/// The live Nodes of one node pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GkeNodesLive {
    /// The node pool.
    pub pool: String,
    /// Its Nodes.
    #[serde(default)]
    pub nodes: Vec<NodeView>,
}

fn live(b: &Body) -> Option<&GkeNodesLive> {
    body_as::<GkeNodesLive>(b)
}

/// The GKE cluster of a Target, if it has one.
fn cluster_of(t: &crate::spec::Target) -> Option<ClusterRef> {
    t.spec.gke.as_ref().map(|g| ClusterRef {
        project: t.spec.project.clone(),
        location: g.location.clone(),
        name: g.name.clone(),
    })
}

/// The Kubernetes API scope of a GKE Target (none for other backends).
pub fn kube_scope(t: &crate::spec::Target) -> Option<Scope> {
    cluster_of(t).map(|c| Scope::Kube(KubeRef::gke(&c)))
}

/// Groups a cluster's Nodes by their node pool label.
pub fn group(nodes: &[Node]) -> Vec<GkeNodesLive> {
    let mut by: BTreeMap<String, GkeNodesLive> = BTreeMap::new();
    for n in nodes {
        let Some(pool) = n
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_NODEPOOL))
        else {
            continue;
        };
        by.entry(pool.clone())
            .or_insert_with(|| GkeNodesLive {
                pool: pool.clone(),
                nodes: Vec::new(),
            })
            .nodes
            .push(crate::kinds::gce::exec::view(n));
    }
    by.into_values().collect()
}

impl Kind for GkeNodes {
    fn id(&self) -> KindId {
        KIND
    }

    fn scopes(&self, t: &crate::spec::Target) -> Vec<Scope> {
        kube_scope(t).into_iter().collect()
    }

    fn noun(&self) -> &'static str {
        "nodes"
    }

    fn depends_on(&self) -> &'static [KindId] {
        &[super::KIND]
    }

    fn lists_unmanaged(&self) -> bool {
        false
    }

    fn observe_only(&self) -> bool {
        true
    }

    fn reports_nodes(&self) -> bool {
        true
    }

    fn render(&self, ctx: RenderCtx<'_>) -> Vec<Desired> {
        let Some(scope) = kube_scope(ctx.target) else {
            return Vec::new();
        };
        if ctx.slice.spec.backend != crate::spec::model::Backend::Gke {
            return Vec::new();
        }
        // The pool's name, as the node pool kind renders it (without
        // rendering the whole pool again).
        let pool = super::render::pool_name(ctx.slice, ctx.stem, ctx.replica);
        let shape = &ctx.slice.shape;
        let want = GkeNodesWant {
            pool: pool.clone(),
            hosts: shape.hosts,
            chips: shape.chips_per_host,
            accelerator: ctx.slice.spec.accelerator.clone(),
            topology: shape.topology.clone(),
        };
        vec![ctx.desired(KIND, scope, pool, want)]
    }

    fn name(&self, live_body: &Body) -> String {
        live(live_body).map(|g| g.pool.clone()).unwrap_or_default()
    }

    fn ownership(&self, _live: &Body) -> Option<Ownership> {
        // Never acted on: the node pool carries the ownership.
        None
    }

    fn state(&self, _live: &Body) -> LiveState {
        LiveState::Ok
    }

    fn compare(&self, _desired: &Desired, _live: &Body) -> Comparison {
        Comparison::Equal
    }

    fn display_live(&self, live_body: &Body, _desired: Option<&Desired>) -> Value {
        serde_json::to_value(live(live_body)).unwrap_or(Value::Null)
    }

    fn parse(&self, json: Value) -> Result<Body, String> {
        serde_json::from_value::<GkeNodesLive>(json)
            .map(|g| Arc::new(g) as Body)
            .map_err(|e| e.to_string())
    }

    fn report_nodes(&self, live_body: Option<&Body>, desired: &Desired, hosts: u32) -> LiveReport {
        let Some(want) = body_as::<GkeNodesWant>(&desired.body) else {
            return LiveReport {
                nodes: format!("?/{hosts}"),
                ..LiveReport::default()
            };
        };
        let nodes: Vec<&NodeView> = live_body
            .and_then(live)
            .map(|g| g.nodes.iter().collect())
            .unwrap_or_default();
        let r = readiness::judge(&nodes, &want.expectation());
        LiveReport {
            state: if nodes.iter().any(|n| n.unschedulable) {
                "CORDONED".into()
            } else {
                String::new()
            },
            nodes: r.nodes_column(),
            error: if r.why.is_empty() {
                String::new()
            } else {
                format!("{}{}", crate::kinds::readiness::NOT_READY_PREFIX, r.why)
            },
            topology: String::new(),
        }
    }
}

#[async_trait]
impl KindExec for GkeNodes {
    fn kind(&self) -> KindId {
        KIND
    }

    fn observes(&self, scope: &Scope) -> bool {
        matches!(scope, Scope::Kube(k) if k.gke_cluster().is_some())
    }

    async fn observe(&self, cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError> {
        let Scope::Kube(k) = scope else {
            return Ok(Observed::default());
        };
        let nodes = cloud.kube.nodes(k).await?;
        Ok(Observed::new(scope, group(&nodes), Vec::new()))
    }

    async fn execute(
        &self,
        _cloud: &Cloud,
        _sched: &Scheduler,
        a: &Action,
        _op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        // Never planned (observe-only); nothing to do if asked.
        tracing::debug!(address = %a.address(), "GKE Nodes are observed only");
        Ok(StepOutcome::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn node(name: &str, pool: &str, ready: bool, chips: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(BTreeMap::from([
            (LABEL_NODEPOOL.to_string(), pool.to_string()),
            (LABEL_ACCELERATOR.to_string(), "tpu-v6e-slice".to_string()),
            (LABEL_TOPOLOGY.to_string(), "2x4".to_string()),
        ]));
        let q = BTreeMap::from([("google.com/tpu".to_string(), Quantity(chips.into()))]);
        n.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..NodeCondition::default()
            }]),
            capacity: Some(q.clone()),
            allocatable: Some(q),
            ..NodeStatus::default()
        });
        n
    }

    fn want() -> Desired {
        Desired {
            id: crate::kind::ResourceId {
                scope: Scope::Kube(KubeRef {
                    endpoint: "gke://p/l/c".into(),
                }),
                kind: KIND,
                name: "a-0".into(),
            },
            owner: crate::kind::SliceRef {
                slice: "a".into(),
                replica: 0,
            },
            owner_id: "o".into(),
            body: Arc::new(GkeNodesWant {
                pool: "a-0".into(),
                hosts: 2,
                chips: 4,
                accelerator: "tpu-v6e-slice".into(),
                topology: "2x4".into(),
            }),
            prevent_destroy: false,
            timeout: std::time::Duration::from_secs(1),
        }
    }

    #[test]
    fn nodes_are_grouped_by_pool_and_judged_by_the_shared_rule() {
        let nodes = vec![
            node("n1", "a-0", true, "4"),
            node("n2", "a-0", false, "4"),
            node("n3", "b-0", true, "4"),
            Node::default(),
        ];
        let groups = group(&nodes);
        assert_eq!(groups.len(), 2);
        let a: Body = Arc::new(groups[0].clone());
        assert_eq!(GkeNodes.name(&a), "a-0");
        let r = GkeNodes.report_nodes(Some(&a), &want(), 2);
        assert_eq!(r.nodes, "1/2 ready");
        assert!(r.error.contains("node n2: not Ready"), "{}", r.error);

        let ok: Body = Arc::new(
            group(&[node("n1", "a-0", true, "4"), node("n2", "a-0", true, "4")])[0].clone(),
        );
        let r = GkeNodes.report_nodes(Some(&ok), &want(), 2);
        assert_eq!((r.nodes.as_str(), r.error.as_str()), ("2/2 ready", ""));

        let wrong: Body = Arc::new(
            group(&[node("n1", "a-0", true, "4"), node("n2", "a-0", true, "1")])[0].clone(),
        );
        let r = GkeNodes.report_nodes(Some(&wrong), &want(), 2);
        assert!(r.error.contains("allocatable 1, want 4"), "{}", r.error);

        let r = GkeNodes.report_nodes(None, &want(), 2);
        assert_eq!(r.nodes, "0/2 ready");
        assert!(
            r.error.contains("2 of 2 node(s) not registered"),
            "{}",
            r.error
        );
    }

    #[test]
    fn observes_only_gke_clusters_apis() {
        assert!(GkeNodes.observes(&Scope::Kube(KubeRef {
            endpoint: "gke://p/l/c".into()
        })));
        assert!(!GkeNodes.observes(&Scope::Kube(KubeRef {
            endpoint: "10.0.0.2:6443".into()
        })));
        assert!(GkeNodes.observe_only());
    }
}
