//! The one gate: whether a step that destroys or disrupts capacity a
//! workload uses may go ahead now, and how.
//!
//! Every such step asks [`consent`]: the planner for each slice replica
//! with a delete, a replacement, a move, a scale-down or a lost-Node
//! recreate ([`super::workload`]), for a device plugin's removal and for a
//! shared resource's delete; the executor before each eviction of a drain
//! and before the destructive step itself. What could not be seen counts
//! as busy ([`Known::Unknown`]): only an explicit override
//! (`destroy --disrupt`) lets such a step go.
//!
//! Pure: no I/O, the time is given.

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde::Serialize;

use super::workload::{BoundPod, pod_list};
use super::{Action, ActionKind, PlanMode, Reason};
use crate::spec::disruption::Policy;
use crate::spec::model::WhenBusy;

/// A step that destroys or disrupts capacity a workload may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// A slice replica's resource deleted (gone from the specs, destroy).
    Delete,
    /// A slice replica's resource replaced (delete, then create).
    Replace,
    /// A resource left where its replica no longer renders (another
    /// cluster or zone), deleted once the new one exists.
    Moved,
    /// A replica past the slice's `replicas`, deleted.
    ScaleDown,
    /// A MIG's VMs that lost their Node, recreated (`node_lost`).
    NodeLostRecreate,
    /// A drain starts (cordon, then evictions).
    Drain,
    /// One eviction of a drain under way.
    Eviction,
    /// The cluster's TPU device plugin removed.
    DevicePluginRemoval,
    /// A resource several slices may use (a brought instance template),
    /// deleted.
    SharedResourceDelete,
}

impl Step {
    /// Spelling in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Delete => "delete",
            Step::Replace => "replace",
            Step::Moved => "moved",
            Step::ScaleDown => "scale_down",
            Step::NodeLostRecreate => "node_lost_recreate",
            Step::Drain => "drain",
            Step::Eviction => "eviction",
            Step::DevicePluginRemoval => "device_plugin_removal",
            Step::SharedResourceDelete => "shared_resource_delete",
        }
    }

    /// The gated step a planned slice-replica action is, if it is one: a
    /// delete or replacement (by its reason), or a lost-Node recreate (an
    /// update in place that recreates VMs).
    pub fn of(a: &Action) -> Option<Step> {
        match (a.action, &a.reason) {
            (ActionKind::Replace, _) => Some(Step::Replace),
            (ActionKind::Delete, Reason::Moved { .. }) => Some(Step::Moved),
            (ActionKind::Delete, Reason::ReplicaNotDesired { .. }) => Some(Step::ScaleDown),
            (ActionKind::Delete, _) => Some(Step::Delete),
            (ActionKind::Update | ActionKind::Create, Reason::NodeLost { .. }) => {
                Some(Step::NodeLostRecreate)
            }
            _ => None,
        }
    }
}

/// What is known of the workloads the step would touch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Known<'a> {
    /// Nothing runs there (seen, or nothing can run: `--sim`).
    Idle,
    /// These pods run there.
    Running(&'a [BoundPod]),
    /// Whether anything runs there could not be read, and why (a deferred,
    /// unreachable or forbidden cluster API, a cluster never listed): busy.
    Unknown(&'a str),
    /// A shared resource still used by these (slices, MIGs, steps of this
    /// plan): never removed under them, whatever the override.
    InUse(&'a [String]),
}

/// A Target's disruption budget, as this plan has used it so far.
#[derive(Debug, Clone, Copy)]
pub struct Budget<'a> {
    /// The Target.
    pub target: &'a str,
    /// Its budget (`disruption.budget`).
    pub limit: u32,
    /// The replicas that use it already (`slice[replica]`).
    pub used_by: &'a BTreeSet<String>,
    /// Whether the replica asking is one of them (a drain already started).
    pub mine: bool,
}

/// One question to the gate.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// The step.
    pub step: Step,
    /// What it touches, for people: `slice replica a[1]`, `the TPU device
    /// plugin of kubernetes …`.
    pub subject: &'a str,
    /// What is known of its workloads.
    pub known: Known<'a>,
    /// The resolved disruption policy.
    pub policy: &'a Policy,
    /// The Target's budget, when it has one.
    pub budget: Option<Budget<'a>>,
    /// `apply` or `destroy`.
    pub mode: PlanMode,
    /// `destroy --disrupt`: the explicit override.
    pub disrupt: bool,
    /// Now (the observation's time in a plan, the clock in the executor).
    pub now: Timestamp,
}

/// How a step the gate lets through goes ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Go {
    /// Nothing runs there.
    Idle,
    /// Drain first (whenBusy: drain).
    Drain,
    /// With the pods running (whenBusy: replace: the policy consents).
    Replace,
    /// With whatever runs (`destroy --disrupt`).
    Forced,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Consent {
    /// Go ahead, this way.
    Go(Go),
    /// Held, with a stable code (`busy`, `busy_unknown`, `do_not_disrupt`,
    /// `outside_window`, `budget`, `in_use`) and what releases it.
    Held {
        /// Stable short code.
        code: &'static str,
        /// Why, and what releases it.
        message: String,
    },
}

impl Consent {
    fn held(code: &'static str, message: String) -> Consent {
        Consent::Held { code, message }
    }
}

/// The gate: the one place that decides whether a step that destroys or
/// disrupts capacity a workload uses may go ahead. Idle goes; unknown is
/// busy; a shared resource in use is kept; a busy replica follows its
/// policy (do-not-disrupt, whenBusy, windows, budget) unless
/// `destroy --disrupt` overrides it.
pub fn consent(ask: &Ask<'_>) -> Consent {
    let forced = ask.mode == PlanMode::Destroy && ask.disrupt;
    let subject = ask.subject;
    let hint = destroy_hint(ask.mode);
    let pods = match ask.known {
        Known::Idle => return Consent::Go(Go::Idle),
        Known::InUse([]) => return Consent::Go(Go::Idle),
        Known::InUse(by) => {
            return Consent::held(
                "in_use",
                format!(
                    "{subject} is still used by {}: it is removed only once nothing uses it (held, not \
                     forced by any override)",
                    by.join(", ")
                ),
            );
        }
        Known::Unknown(_) if forced => return Consent::Go(Go::Forced),
        Known::Unknown(why) => {
            return Consent::held(
                "busy_unknown",
                format!(
                    "whether {subject} runs workloads cannot be read ({why}); a step that destroys its \
                     capacity is never taken on an unknown: it is held until the cluster's Pods can be \
                     listed{hint}"
                ),
            );
        }
        Known::Running(pods) => pods,
    };
    if forced {
        return Consent::Go(Go::Forced);
    }
    let shown = pod_list(pods);
    let blockers: Vec<BoundPod> = pods.iter().filter(|p| p.do_not_disrupt).cloned().collect();
    if !blockers.is_empty() {
        return Consent::held(
            "do_not_disrupt",
            format!(
                "{subject} runs pods annotated slicectl.dev/do-not-disrupt: \"true\" ({}): not even a \
                 drain touches them. The step runs once they end or lose the annotation{hint}",
                pod_list(&blockers)
            ),
        );
    }
    if ask.policy.when_busy == WhenBusy::Wait {
        return Consent::held(
            "busy",
            format!(
                "{subject} is busy: {shown}. Its disruption policy is whenBusy: wait, so the step waits \
                 and runs by itself once the replica is idle (next apply, watch cycle or controller \
                 resync). To go ahead sooner, set `disruption.whenBusy: drain` (evicts, \
                 PodDisruptionBudgets hold) or `replace` (kills the pods) on the slice or its Target{hint}"
            ),
        );
    }
    if !ask.policy.in_window(ask.now) {
        let next = ask
            .policy
            .next_window(ask.now)
            .map(|t| format!("; the next window opens at {t}"))
            .unwrap_or_default();
        let ws: Vec<String> = ask.policy.windows.iter().map(|w| w.describe()).collect();
        return Consent::held(
            "outside_window",
            format!(
                "{subject} is busy ({shown}) and it is outside its disruption windows ({}){next}: the \
                 step runs in a window{hint}",
                ws.join(", ")
            ),
        );
    }
    if let Some(b) = ask.budget
        && !b.mine
        && b.used_by.len() >= b.limit as usize
    {
        return Consent::held(
            "budget",
            format!(
                "{subject} is busy ({shown}) and Target {}'s disruption budget ({}) is used by {}: the \
                 step runs once one of them is done{hint}",
                b.target,
                b.limit,
                b.used_by.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        );
    }
    match ask.policy.when_busy {
        WhenBusy::Drain => Consent::Go(Go::Drain),
        _ => Consent::Go(Go::Replace),
    }
}

fn destroy_hint(mode: PlanMode) -> &'static str {
    match mode {
        PlanMode::Destroy => {
            ". To destroy it anyway, killing the pods, run `slicectl destroy --disrupt`"
        }
        PlanMode::Apply => "",
    }
}

#[cfg(test)]
#[path = "consent/tests.rs"]
mod tests;
