//! The drain before a step that destroys a busy slice replica's capacity
//! (`whenBusy: drain`): cordon its Nodes, mark when the drain started on
//! them (label [`DRAINING_SINCE`], so that a restarted run keeps the same
//! deadline), evict the pods bound to them through the Eviction API (a
//! PodDisruptionBudget that refuses is answered 429, and slicectl asks
//! again), and wait until none is left or `drainTimeout` has passed. A
//! drain that runs out of time leaves the step held (`pdb` when a budget
//! refused, `drain_timeout` when pods were still terminating): the
//! capacity is never destroyed under a pod that is still there. A pod whose
//! eviction was accepted gets its termination grace period (and
//! [`TERMINATION_MARGIN`]) to end, even past `drainTimeout`: a budget that
//! allows the eviction after the deadline (the next run asks again) lets
//! that run finish the drain.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::{ApplyError, StepOutcome};
use crate::cloud::Cloud;
use crate::observe::workloads::{bound_pod, makes_busy};
use crate::plan::Action;
use crate::plan::workload::{BoundPod, DisruptHow, Disrupting, pod_list};
use crate::spec::disruption::DRAINING_SINCE;

/// How often a drain lists the pods again.
pub const POLL: Duration = Duration::from_secs(2);

/// The longest pause a refused eviction's `Retry-After` makes. The Eviction
/// API answers 429 Too Many Requests when a PodDisruptionBudget refuses, or
/// when the API server's rate limit does, and the caller is to try again
/// later (Kubernetes, *API-initiated Eviction*: "429 Too Many Requests: This
/// means the eviction is not currently allowed because of the configured
/// PodDisruptionBudget. You may be able to attempt the eviction again
/// later. You might also see this response because of API rate
/// limiting."). A request API Priority and Fairness rejects is answered
/// 429 with `Retry-After: 1` (kubernetes/kubernetes issue 117734, on
/// `maxinflight.go`); a budget's refusal usually
/// sends none (kubernetes/kubernetes issue 36409), and then the drain asks
/// again every [`POLL`]. A server asking for longer than this is asked
/// again after this (the drain has a `drainTimeout` to keep).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// `Retry-After`, bounded by [`MAX_RETRY_AFTER`].
pub fn bounded_retry_after(after: Duration) -> Duration {
    after.min(MAX_RETRY_AFTER)
}

/// How long past an evicted pod's `deletionTimestamp` (the end of its
/// termination grace period) the drain waits for the kubelet to report it
/// gone, even past `drainTimeout`.
pub const TERMINATION_MARGIN: SignedDuration = SignedDuration::from_secs(30);

/// The replica was idle when the plan was made: a pod bound to its Nodes
/// since then holds the step (`busy`), and the next run follows the
/// slice's disruption policy.
pub async fn recheck(
    cloud: &Cloud,
    a: &Action,
    k: &crate::resource::KubeRef,
    nodes: &[String],
) -> Result<StepOutcome, ApplyError> {
    let pods = busy_pods(cloud, k, nodes).await?;
    if pods.is_empty() {
        return Ok(StepOutcome::Done);
    }
    Err(ApplyError::of_kind(
        a,
        "busy",
        format!(
            "held: the replica was idle when the plan was made, but pods run on its Nodes now ({}); \
             nothing was destroyed. The next run follows the slice's disruption policy",
            pod_list(&pods)
        ),
    ))
}

/// [`busy_on`], as shown.
async fn busy_pods(
    cloud: &Cloud,
    k: &crate::resource::KubeRef,
    nodes: &[String],
) -> Result<Vec<BoundPod>, crate::kube::KubeError> {
    Ok(busy_on(cloud, k, nodes)
        .await?
        .iter()
        .map(bound_pod)
        .collect())
}

/// The pods that make `nodes` busy ([`makes_busy`]), from one list of the
/// cluster's pods.
async fn busy_on(
    cloud: &Cloud,
    k: &crate::resource::KubeRef,
    nodes: &[String],
) -> Result<Vec<k8s_openapi::api::core::v1::Pod>, crate::kube::KubeError> {
    Ok(cloud
        .kube
        .pods(k)
        .await?
        .into_iter()
        .filter(|p| {
            makes_busy(p)
                && p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| nodes.iter().any(|x| x == n))
        })
        .collect())
}

/// What a running drain asks between evictions, besides the pods: whether
/// a stop was requested (the first SIGINT or SIGTERM: no new step starts,
/// and a drain is a step that ends before its next eviction), and the time
/// (the slice's windows are judged at it).
#[derive(Clone)]
pub struct Checks {
    /// How often the pods are listed again.
    pub poll: Duration,
    /// Whether a stop was requested.
    pub stop: Arc<dyn Fn() -> bool + Send + Sync>,
    /// Now.
    pub clock: Arc<dyn Fn() -> Timestamp + Send + Sync>,
}

impl Checks {
    /// Every [`POLL`], the wall clock, stopped when `stop` answers true.
    pub fn new(stop: Arc<dyn Fn() -> bool + Send + Sync>) -> Checks {
        Checks {
            poll: POLL,
            stop,
            clock: Arc::new(Timestamp::now),
        }
    }
}

/// The code of a drain that a stop request ended before its next eviction.
pub const STOPPED: &str = "stopped";

/// Whether the slice's policy still consents, at `now`, to disrupting the
/// busy replica `d` whose Nodes run `pods`: the question the executor asks
/// before every eviction and right before the capacity goes (the plan
/// answered it when it was made; a window can close and a pod can turn
/// do-not-disrupt since). `Err` is the hold: its code and why.
/// `destroy --disrupt` (`Forced`) consents to everything.
pub fn consents_now(
    d: &Disrupting,
    pods: &[BoundPod],
    now: Timestamp,
) -> Result<(), (&'static str, String)> {
    if d.how == DisruptHow::Forced || pods.is_empty() {
        return Ok(());
    }
    let blockers: Vec<_> = pods.iter().filter(|p| p.do_not_disrupt).cloned().collect();
    if !blockers.is_empty() {
        return Err((
            "do_not_disrupt",
            format!(
                "pods annotated slicectl.dev/do-not-disrupt: \"true\" run on the replica's Nodes ({}); \
                 not even a drain touches them",
                pod_list(&blockers)
            ),
        ));
    }
    if !d.windows.is_empty() && !d.windows.iter().any(|w| w.contains(now)) {
        let next = d
            .windows
            .iter()
            .filter_map(|w| w.next_open(now))
            .min()
            .map(|t| format!("; the next window opens at {t}"))
            .unwrap_or_default();
        let ws: Vec<String> = d.windows.iter().map(|w| w.describe()).collect();
        return Err((
            "outside_window",
            format!(
                "it is {now}, outside the slice's disruption windows ({}){next}, and pods still run on the \
                 replica's Nodes ({})",
                ws.join(", "),
                pod_list(pods)
            ),
        ));
    }
    Ok(())
}

/// Asked right before a step destroys a slice replica's capacity (its
/// delete is about to be sent). A replica idle when planned ([`recheck`])
/// must still be idle. A busy replica the plan lets go ahead is asked
/// again ([`consents_now`]): after a drain, no pod may be left; with
/// `whenBusy: replace`, the window must still be open and no pod
/// do-not-disrupt. `destroy --disrupt` is not asked again.
pub async fn before_destroy(
    cloud: &Cloud,
    a: &Action,
    checks: &Checks,
) -> Result<StepOutcome, ApplyError> {
    if let Some((k, nodes)) = &a.recheck {
        return recheck(cloud, a, k, nodes).await;
    }
    let Some(d) = a
        .disruption
        .as_ref()
        .filter(|d| d.how != DisruptHow::Forced && !d.nodes.is_empty())
    else {
        return Ok(StepOutcome::Done);
    };
    let Some(k) = &d.kube else {
        return Ok(StepOutcome::Done);
    };
    let pods = busy_pods(cloud, k, &d.nodes).await?;
    if pods.is_empty() {
        return Ok(StepOutcome::Done);
    }
    let (code, why) = if d.how == DisruptHow::Drain {
        (
            "busy",
            format!(
                "pods run on the replica's Nodes again after its drain ({})",
                pod_list(&pods)
            ),
        )
    } else {
        match consents_now(d, &pods, (checks.clock)()) {
            Ok(()) => return Ok(StepOutcome::Done),
            Err(hold) => hold,
        }
    };
    Err(ApplyError::of_kind(
        a,
        code,
        format!(
            "held right before its capacity goes: {why}. Nothing was destroyed; the next run follows the \
             slice's disruption policy"
        ),
    ))
}

/// Drains the Nodes of action `a`'s replica, if it is the step that drains,
/// asking `checks` before every eviction.
pub async fn run(cloud: &Cloud, a: &Action, checks: &Checks) -> Result<StepOutcome, ApplyError> {
    let poll = checks.poll;
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
    let since = d.draining_since.unwrap_or_else(|| (checks.clock)());
    let mut cordoned = false;
    let timeout =
        SignedDuration::from_secs(i64::try_from(d.drain_timeout_secs).unwrap_or(i64::MAX));
    let deadline = since.checked_add(timeout).unwrap_or(Timestamp::MAX);
    // The last round's refusals and failed evictions, and when the next
    // round may start.
    let mut refused: Vec<String> = Vec::new();
    let mut failing: Vec<String> = Vec::new();
    let mut evict_at: Option<tokio::time::Instant> = None;
    loop {
        let pods = busy_on(cloud, k, &d.nodes).await?;
        if pods.is_empty() {
            tracing::info!(address = %a.address(), "slice replica drained");
            return Ok(StepOutcome::Done);
        }
        let shown: Vec<_> = pods.iter().map(bound_pod).collect();
        // Before every eviction: a stop request ends the drain here, and
        // the policy is asked again (a window may have closed, a pod may
        // have turned do-not-disrupt). The cordon and the drain label stay,
        // so the next run resumes it with the same deadline.
        if (checks.stop)() {
            tracing::warn!(address = %a.address(), "drain stopped before its next eviction: a stop was requested");
            return Err(ApplyError::of_kind(
                a,
                STOPPED,
                format!(
                    "the drain stopped before its next eviction: a stop was requested (SIGINT or SIGTERM). \
                     Nothing was destroyed; {} still run on the replica's Nodes, which keep their cordon and \
                     their label {DRAINING_SINCE} (since {since}), so the next `slicectl apply` resumes the \
                     drain with the same deadline",
                    pod_list(&shown)
                ),
            ));
        }
        // Pods already being deleted (evicted) are only waited for: the
        // policy is asked about the ones still to evict.
        let to_evict: Vec<_> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(bound_pod)
            .collect();
        if let Err((code, why)) = consents_now(d, &to_evict, (checks.clock)()) {
            tracing::warn!(address = %a.address(), code, "drain held again before its next eviction");
            return Err(ApplyError::of_kind(
                a,
                code,
                format!(
                    "held mid-drain: {why}. Nothing more is evicted and nothing is destroyed; the Nodes keep \
                     their cordon and their label {DRAINING_SINCE} until the next run plans the step again"
                ),
            ));
        }
        if !cordoned {
            cordon(cloud, k, d, since).await?;
            tracing::info!(address = %a.address(), nodes = d.nodes.len(), since = %since, "draining slice replica");
            cordoned = true;
        }
        // A refusal that asked for a pause (`Retry-After`) is honoured: the
        // pods are listed as often as before (to see them leave), but not
        // evicted again before then.
        let mut evicted = 0usize;
        if evict_at.is_none_or(|at| tokio::time::Instant::now() >= at) {
            refused.clear();
            failing.clear();
            let mut pause: Option<Duration> = None;
            for p in &pods {
                // A pod being deleted already is waited for, not evicted again.
                if p.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let ns = p.metadata.namespace.as_deref().unwrap_or_default();
                let name = p.metadata.name.as_deref().unwrap_or_default();
                match cloud.kube.evict_pod(k, ns, name).await {
                    Ok(crate::kube::Eviction::Evicted) => evicted += 1,
                    Ok(crate::kube::Eviction::Refused {
                        message,
                        retry_after,
                    }) => {
                        refused.push(format!("{ns}/{name}: {}", message.trim_end_matches('.')));
                        pause = pause.max(retry_after);
                    }
                    // The eviction client does not retry (see `Cx::evict`): a
                    // transient answer (5xx, unreachable) is asked again at the
                    // next poll, as a refused eviction is, until the deadline.
                    Err(e) if e.is_transient() => {
                        tracing::warn!(address = %a.address(), pod = %format!("{ns}/{name}"), error = %e, "eviction failed; asking again");
                        failing.push(format!("{ns}/{name}: {e}"));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            evict_at = pause.map(|p| tokio::time::Instant::now() + bounded_retry_after(p));
        }
        // A pod the API server accepted to evict gets its termination
        // grace period to end, even past drainTimeout: its
        // `deletionTimestamp` is when the grace period is over, and the
        // kubelet needs a moment more to report it gone. A pod evicted in
        // this round shows its deletionTimestamp in the next listing.
        let until = pods
            .iter()
            .filter_map(|p| p.metadata.deletion_timestamp.as_ref())
            .filter_map(|t| t.0.checked_add(TERMINATION_MARGIN).ok())
            .fold(deadline, Timestamp::max);
        let now = (checks.clock)();
        if now >= until && evicted == 0 {
            let (code, why) = if !refused.is_empty() {
                (
                    "pdb",
                    format!(
                        "a PodDisruptionBudget refuses to evict {}",
                        refused.join("; ")
                    ),
                )
            } else if !failing.is_empty() {
                (
                    "drain_timeout",
                    format!("evictions kept failing: {}", failing.join("; ")),
                )
            } else {
                (
                    "drain_timeout",
                    format!("pods still terminating: {}", pod_list(&shown)),
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
        let left = Duration::try_from(until.duration_since(now)).unwrap_or(Duration::ZERO);
        tokio::time::sleep(if evicted > 0 { poll } else { poll.min(left) }).await;
    }
}

/// Cordons `d`'s Nodes and, on a drain this run starts, labels them with
/// when it started ([`DRAINING_SINCE`], read back after a restart).
async fn cordon(
    cloud: &Cloud,
    k: &crate::resource::KubeRef,
    d: &Disrupting,
    since: Timestamp,
) -> Result<(), ApplyError> {
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
    Ok(())
}

#[cfg(test)]
#[path = "drain/tests.rs"]
mod tests;
