//! The drain before a step that destroys a busy slice replica's capacity
//! (`whenBusy: drain`): cordon its Nodes, mark when the drain started on
//! them (label [`DRAINING_SINCE`], so that a restarted run keeps the same
//! deadline), evict the pods bound to them through the Eviction API (a
//! PodDisruptionBudget that refuses is answered 429, and slicectl asks
//! again), and wait until none is left or `drainTimeout` has passed. A
//! drain that runs out of time leaves the step held (`pdb` when a budget
//! refused, `drain_timeout` when pods were still terminating): the
//! capacity is never destroyed under a pod that is still there.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::{ApplyError, StepOutcome};
use crate::cloud::Cloud;
use crate::observe::workloads::{bound_pod, makes_busy};
use crate::plan::Action;
use crate::plan::workload::{DisruptHow, pod_list};
use crate::spec::disruption::DRAINING_SINCE;

/// How often a drain lists the pods again.
pub const POLL: Duration = Duration::from_secs(2);

/// Drains the Nodes of action `a`'s replica, if it is the step that drains.
pub async fn run(cloud: &Cloud, a: &Action) -> Result<StepOutcome, ApplyError> {
    run_every(cloud, a, POLL).await
}

/// [`run`], listing the pods every `poll`.
pub async fn run_every(
    cloud: &Cloud,
    a: &Action,
    poll: Duration,
) -> Result<StepOutcome, ApplyError> {
    let Some(d) = a
        .disruption
        .as_ref()
        .filter(|d| d.how == DisruptHow::Drain && !d.nodes.is_empty())
    else {
        return Ok(StepOutcome::Done);
    };
    let Some(k) = &d.kube else {
        return Err(ApplyError::of_kind(
            a,
            "busy_unknown",
            "the replica's Nodes are busy but slicectl does not know their cluster's Kubernetes API, so it \
             cannot drain them; the step is held"
                .into(),
        ));
    };
    let since = d.draining_since.unwrap_or_else(Timestamp::now);
    for n in &d.nodes {
        cloud.kube.cordon_node(k, n).await?;
        if d.draining_since.is_none() {
            let labels: BTreeMap<String, Option<String>> = [(
                DRAINING_SINCE.to_owned(),
                Some(since.as_second().to_string()),
            )]
            .into();
            cloud.kube.patch_node(k, n, &labels, None).await?;
        }
    }
    tracing::info!(address = %a.address(), nodes = d.nodes.len(), since = %since, "draining slice replica");
    let timeout =
        SignedDuration::from_secs(i64::try_from(d.drain_timeout_secs).unwrap_or(i64::MAX));
    let deadline = since.checked_add(timeout).unwrap_or(Timestamp::MAX);
    loop {
        let pods: Vec<_> = cloud
            .kube
            .pods(k)
            .await?
            .into_iter()
            .filter(|p| {
                makes_busy(p)
                    && p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some_and(|n| d.nodes.iter().any(|x| x == n))
            })
            .collect();
        if pods.is_empty() {
            tracing::info!(address = %a.address(), "slice replica drained");
            return Ok(StepOutcome::Done);
        }
        let shown: Vec<_> = pods.iter().map(bound_pod).collect();
        let blockers: Vec<_> = shown.iter().filter(|p| p.do_not_disrupt).cloned().collect();
        if !blockers.is_empty() {
            return Err(ApplyError::of_kind(
                a,
                "do_not_disrupt",
                format!(
                    "held: pods annotated slicectl.dev/do-not-disrupt: \"true\" run on the replica's Nodes ({}); \
                     not even a drain touches them. The Nodes stay cordoned; the step runs once they end",
                    pod_list(&blockers)
                ),
            ));
        }
        let mut refused: Vec<String> = Vec::new();
        for p in &pods {
            // A pod being deleted already is waited for, not evicted again.
            if p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let ns = p.metadata.namespace.as_deref().unwrap_or_default();
            let name = p.metadata.name.as_deref().unwrap_or_default();
            match cloud.kube.evict_pod(k, ns, name).await? {
                crate::kube::Eviction::Evicted => {}
                crate::kube::Eviction::Refused(m) => refused.push(format!("{ns}/{name}: {m}")),
            }
        }
        let now = Timestamp::now();
        if now >= deadline {
            let (code, why) = if refused.is_empty() {
                (
                    "drain_timeout",
                    format!("pods still terminating: {}", pod_list(&shown)),
                )
            } else {
                (
                    "pdb",
                    format!(
                        "a PodDisruptionBudget refuses to evict {}",
                        refused.join("; ")
                    ),
                )
            };
            return Err(ApplyError::of_kind(
                a,
                code,
                format!(
                    "held: the drain started at {since} ran out its drainTimeout ({}s) and {why}. Nothing was \
                     destroyed and nothing is forced: the Nodes stay cordoned and the next run evicts again. \
                     Let the budget allow it (or end the pods), raise `disruption.drainTimeout`, or accept \
                     the loss with `whenBusy: replace`",
                    d.drain_timeout_secs
                ),
            ));
        }
        let left = Duration::try_from(deadline.duration_since(now)).unwrap_or(Duration::ZERO);
        tokio::time::sleep(poll.min(left)).await;
    }
}
