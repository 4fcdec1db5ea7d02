//! Changes that respect running workloads: the observed workload view (per
//! cluster, its Nodes with the pods bound to them, their cordon and drain
//! state), and the planner's phase that decides, from it and each slice's
//! disruption policy, whether a step that destroys a busy slice replica's
//! capacity goes ahead, drains first, or is held.
//!
//! Pure: the shell (`crate::observe`) lists Nodes and Pods once per
//! cluster and fills [`Workloads`]; the time is the observation's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;

use super::consent::{Ask, Budget, Consent, Go, Known, Step, consent};
use super::kind::{Kind, KindId, Scope};
use super::ownership::Ownership;
use super::{Action, ActionKind, Owners, PlanMode, ResourceId};
use crate::resource::KubeRef;
use crate::spec::disruption::{CORDONED_BY_SLICECTL, Policy};
use crate::spec::{Fleet, Target};

/// What slicectl saw of the workloads, per cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Workloads {
    /// When the Pods and Nodes were listed (windows and drain deadlines are
    /// judged at this time).
    pub observed_at: Option<Timestamp>,
    /// Per Kubernetes API.
    pub clusters: BTreeMap<KubeRef, ClusterWorkloads>,
    /// Nothing runs in the clusters not read: `--sim` (no real Kubernetes
    /// API is read and nothing real runs) or the explicit
    /// `--unread-clusters-idle`. Otherwise a cluster not read is
    /// busy-unknown.
    pub simulated: bool,
}

/// One cluster's workloads.
#[derive(Debug, Clone, PartialEq)]
pub enum ClusterWorkloads {
    /// Its Nodes, with what is bound to them.
    Seen(Vec<HostNode>),
    /// Its Nodes or Pods could not be listed: whether a replica there is
    /// busy is unknown, and its destructive steps are held.
    Unreadable(String),
}

/// One Node and the pods that make it busy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostNode {
    /// Node name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Cordoned (`spec.unschedulable`).
    pub cordoned: bool,
    /// When slicectl started draining it (label
    /// [`crate::spec::disruption::DRAINING_SINCE`]), read back after a restart.
    pub draining_since: Option<Timestamp>,
    /// `spec.providerID` (`gce://PROJECT/ZONE/INSTANCE` for a GCE VM's Node;
    /// empty when it has none).
    pub provider_id: String,
    /// Pods bound to it that are not terminal, not mirror pods and not a
    /// DaemonSet's.
    pub pods: Vec<BoundPod>,
}

/// A pod that makes its Node busy.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct BoundPod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// What owns it, for people: `jobset ml/train`, `job ml/step-3`, or
    /// its controller's kind and name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Annotated `slicectl.dev/do-not-disrupt: "true"` (or Karpenter's).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub do_not_disrupt: bool,
}

impl BoundPod {
    /// `ns/name (jobset ml/train)`.
    pub fn describe(&self) -> String {
        match &self.owner {
            Some(o) => format!("{}/{} ({o})", self.namespace, self.name),
            None => format!("{}/{}", self.namespace, self.name),
        }
    }
}

/// Where the Nodes that run a resource's capacity are (see
/// [`Kind::hosts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hosts {
    /// The Kubernetes API they are in; `None` when the resource's Target
    /// names none (nothing can be seen).
    pub kube: Option<KubeRef>,
    /// Labels every one of its Nodes carries.
    pub selector: BTreeMap<String, String>,
    /// What every one of its Nodes' providerID starts with, when the
    /// resource's own VMs are known by it (a MIG's: `gce://PROJECT/ZONE/`).
    /// Labels name the slice replica, not the resource: after a zone move
    /// the old MIG and its replacement carry the same labels, and only
    /// the providerID tells their Nodes apart.
    pub provider_id_prefix: Option<String>,
}

impl Hosts {
    /// Whether `n` is one of these Nodes. A Node with the labels and no
    /// providerID (a kubelet started without one) may be either MIG's:
    /// it is picked, so a pod on it holds both (unknown is busy).
    pub fn picks(&self, n: &HostNode) -> bool {
        self.selector
            .iter()
            .all(|(l, v)| n.labels.get(l) == Some(v))
            && self
                .provider_id_prefix
                .as_deref()
                .is_none_or(|p| n.provider_id.is_empty() || n.provider_id.starts_with(p))
    }
}

/// A destructive step that goes ahead on a busy slice replica, and how.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disrupting {
    /// `drain`, `replace` (the policy consents) or `forced` (`destroy --disrupt`).
    pub how: DisruptHow,
    /// The pods bound to the replica's Nodes.
    pub pods: Vec<BoundPod>,
    /// The cluster the Nodes are in.
    #[serde(skip)]
    pub kube: Option<KubeRef>,
    /// The Nodes to drain.
    pub nodes: Vec<String>,
    /// How long a drain may take.
    pub drain_timeout_secs: u64,
    /// When the drain started, if an earlier run started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draining_since: Option<Timestamp>,
    /// The slice's disruption windows (empty: any time), asked again by the
    /// executor before every eviction and before the capacity goes: a
    /// window that closes mid-drain holds the step again.
    #[serde(skip)]
    pub windows: Vec<crate::spec::disruption::Window>,
}

/// How a busy replica is disrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DisruptHow {
    /// Cordon, evict through the Eviction API, wait, then destroy.
    Drain,
    /// Destroy with the pods running (`whenBusy: replace`).
    Replace,
    /// Destroy with the pods running (`destroy --disrupt`).
    Forced,
}

impl Disrupting {
    /// One line for people.
    pub fn describe(&self) -> String {
        let pods = pod_list(&self.pods);
        match self.how {
            DisruptHow::Drain => format!(
                "drains first (whenBusy: drain): cordons {} Node(s), evicts {pods} through the Eviction API \
                 (PodDisruptionBudgets hold), waits up to {}s{}",
                self.nodes.len(),
                self.drain_timeout_secs,
                self.draining_since
                    .map(|s| format!(", draining since {s}"))
                    .unwrap_or_default()
            ),
            DisruptHow::Replace => format!(
                "kills the running pods {pods} (whenBusy: replace: the slice's policy consents)"
            ),
            DisruptHow::Forced => {
                format!("kills the running pods {pods} (destroy --disrupt overrides the policy)")
            }
        }
    }
}

/// `a/b (jobset x/y), c/d and 3 more`.
pub fn pod_list(pods: &[BoundPod]) -> String {
    const SHOWN: usize = 5;
    let mut parts: Vec<String> = pods.iter().take(SHOWN).map(BoundPod::describe).collect();
    if pods.len() > SHOWN {
        parts.push(format!("and {} more", pods.len() - SHOWN));
    }
    parts.join(", ")
}

/// A step held by a slice's disruption policy: shown with why and the pods,
/// never executed; it runs by itself once the replica is idle (or the
/// window opens, or the budget frees up).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Held {
    /// Kind of the resource.
    pub kind: &'static str,
    /// Cloud resource name.
    pub name: String,
    /// `slice.NAME[REPLICA].KIND`.
    pub address: String,
    /// Slice name.
    pub slice: String,
    /// Replica index.
    pub replica: u32,
    /// Where the resource lives.
    pub scope: Scope,
    /// What slicectl would otherwise have done.
    pub action: ActionKind,
    /// Why it would have done it.
    pub reason: String,
    /// Stable short code: `busy` (whenBusy: wait), `do_not_disrupt`,
    /// `outside_window`, `budget`, `busy_unknown` (the cluster's pods could
    /// not be read).
    pub code: &'static str,
    /// Why it is held, and what releases it.
    pub message: String,
    /// The pods bound to the replica's Nodes.
    pub pods: Vec<BoundPod>,
}

/// Nodes slicectl cordoned for a drain that no step takes any more (the
/// spec changed back, the slice is no longer to be replaced or deleted,
/// its step is held: `whenBusy: wait`, do-not-disrupt, outside a window,
/// over budget): they are uncordoned and lose the drain label, so the
/// workload can use them while it waits. Nodes whose cordon slicectl did
/// not make ([`crate::spec::disruption::CORDONED_BY_SLICECTL`] missing)
/// only lose the label (`cordon_kept`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Release {
    /// The cluster.
    #[serde(skip)]
    pub kube: KubeRef,
    /// Its endpoint key, as published.
    pub cluster: String,
    /// The Nodes.
    pub nodes: Vec<String>,
    /// Those of `nodes` whose cordon is not slicectl's: it stays, only the
    /// drain label goes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cordon_kept: Vec<String>,
}

/// The Nodes that carry the drain label but belong to no replica whose
/// destructive step goes ahead in this plan (`in_use`), of those this fleet
/// owns (`ours`).
pub(super) fn releases(
    w: &Workloads,
    in_use: &BTreeSet<(KubeRef, String)>,
    ours: &BTreeSet<(KubeRef, String)>,
) -> Vec<Release> {
    let mut out = Vec::new();
    for (kube, c) in &w.clusters {
        let ClusterWorkloads::Seen(nodes) = c else {
            continue;
        };
        let free: Vec<&HostNode> = nodes
            .iter()
            .filter(|n| n.draining_since.is_some())
            .filter(|n| {
                let key = (kube.clone(), n.name.clone());
                !in_use.contains(&key) && ours.contains(&key)
            })
            .collect();
        if !free.is_empty() {
            out.push(Release {
                kube: kube.clone(),
                cluster: kube.endpoint.clone(),
                nodes: free.iter().map(|n| n.name.clone()).collect(),
                cordon_kept: free
                    .iter()
                    .filter(|n| !n.labels.contains_key(CORDONED_BY_SLICECTL))
                    .map(|n| n.name.clone())
                    .collect(),
            });
        }
    }
    out
}

/// The Nodes `hosts` picks out, in a cluster whose Nodes were seen.
fn nodes_of(w: &Workloads, hosts: &Hosts) -> Vec<(KubeRef, String)> {
    let Some(k) = &hosts.kube else {
        return Vec::new();
    };
    let Some(ClusterWorkloads::Seen(nodes)) = w.clusters.get(k) else {
        return Vec::new();
    };
    nodes
        .iter()
        .filter(|n| hosts.picks(n))
        .map(|n| (k.clone(), n.name.clone()))
        .collect()
}

/// Whether pods may run on the Nodes `hosts` picks out: they do, or
/// whether they do cannot be read (a cluster not read, outside `--sim`).
/// For choosing what a scale-down keeps; the gate itself is [`decide`].
pub fn may_be_busy(w: &Workloads, hosts: &Hosts) -> bool {
    let Some(k) = &hosts.kube else {
        return !w.simulated;
    };
    match w.clusters.get(k) {
        None => !w.simulated,
        Some(ClusterWorkloads::Unreadable(_)) => true,
        Some(ClusterWorkloads::Seen(nodes)) => {
            nodes.iter().any(|n| !n.pods.is_empty() && hosts.picks(n))
        }
    }
}

/// What is known of one slice replica's Nodes.
enum Busy {
    /// Nothing runs on it (or nothing can: `--sim` runs no pods), with its
    /// Nodes when they were seen.
    Idle(Option<(KubeRef, Vec<String>)>),
    /// Pods run on it.
    Running {
        kube: Option<KubeRef>,
        nodes: Vec<String>,
        pods: Vec<BoundPod>,
        draining_since: Option<Timestamp>,
    },
    /// Its cluster could not be read.
    Unknown(String),
}

/// The gate's key: (owner id, slice, replica, the cluster of its Nodes).
/// One replica can have Nodes in two clusters (a Target moved to another
/// cluster: the new pool and the one left behind); each is asked apart,
/// and a hold of either holds the whole replica.
type Key = (String, String, u32, Option<KubeRef>);

/// A replica's part in one cluster: (slice, replica, cluster).
type Part = (String, u32, Option<KubeRef>);

/// What the phase reads.
pub(super) struct Inputs<'a> {
    pub fleet: &'a Fleet,
    pub kinds: &'a [&'a dyn Kind],
    pub workloads: &'a Workloads,
    pub deferred: &'a BTreeMap<Scope, String>,
    pub mode: PlanMode,
    /// `destroy --disrupt`.
    pub disrupt: bool,
    /// The live resources this fleet owns, with their ownership: only their
    /// Nodes are ever released from a drain ([`releases`]).
    pub owned: Vec<(ResourceId, Ownership)>,
    /// Every live user of each shared resource ([`super::Inventory::users`]).
    pub users: &'a BTreeMap<ResourceId, BTreeSet<ResourceId>>,
}

/// The Target whose policy governs a live resource: its slice's, while the
/// specs declare it; else the one its source stamp names; else the one
/// Target of its owner id whose scopes hold it. Several such Targets and
/// no stamp is no Target: the default policy (`whenBusy: wait`) and,
/// for a MIG, Nodes in no known cluster (unknown, so busy). Never the
/// first that happens to match: another Target's `whenBusy: replace`
/// must not speak for a slice it never held.
fn target_of<'a>(i: &Inputs<'a>, own: &Ownership, scope: &Scope) -> Option<&'a Target> {
    let mine = |t: &&'a Target| t.spec.owner_id == own.owner;
    if let Some(t) = i
        .fleet
        .claimant(&own.slice)
        .and_then(|s| i.fleet.target_of(s))
        .filter(mine)
    {
        return Some(t);
    }
    if let Some(stamp) = &own.target {
        return i.fleet.targets.get(stamp).filter(mine);
    }
    let mut holding = i
        .fleet
        .targets
        .values()
        .filter(|t| mine(t) && Owners::scopes_of(t, i.kinds).contains(scope));
    match (holding.next(), holding.next()) {
        (Some(t), None) => Some(t),
        _ => None,
    }
}

fn kube_of(i: &Inputs<'_>, t: Option<&Target>) -> Option<KubeRef> {
    let t = t?;
    Owners::scopes_of(t, i.kinds)
        .into_iter()
        .find_map(|s| match s {
            Scope::Kube(k) => Some(k),
            _ => None,
        })
}

/// What is known of the Nodes `hosts` picks out. Unknown is busy: a
/// cluster whose Pods were not read (deferred, unreachable, forbidden,
/// never listed, or not known at all) is [`Busy::Unknown`], never idle.
/// Only under `--sim` ([`Workloads::simulated`]), where nothing real runs,
/// is a cluster not read idle.
fn busy_of(i: &Inputs<'_>, hosts: &Hosts) -> Busy {
    let sim = i.workloads.simulated;
    let Some(kube) = &hosts.kube else {
        if sim {
            return Busy::Idle(None);
        }
        return Busy::Unknown(
            "no Target of its owner names the cluster its Nodes are in, so its Pods are not read"
                .to_owned(),
        );
    };
    if let Some(why) = i.deferred.get(&Scope::Kube(kube.clone())) {
        if sim {
            // `--sim`: nothing real runs, no pod can be bound.
            return Busy::Idle(None);
        }
        return Busy::Unknown(format!("{kube}: its Pods are not read: {why}"));
    }
    match i.workloads.clusters.get(kube) {
        None if sim => Busy::Idle(None),
        // Never listed (a cluster no Target names whose Pods were not
        // looked at): nothing is known, so it is not idle.
        None => Busy::Unknown(format!("{kube}: its Nodes and Pods were not listed")),
        Some(ClusterWorkloads::Unreadable(e)) => Busy::Unknown(format!("{kube}: {e}")),
        Some(ClusterWorkloads::Seen(nodes)) => {
            let mine: Vec<&HostNode> = nodes.iter().filter(|n| hosts.picks(n)).collect();
            let pods: Vec<BoundPod> = mine.iter().flat_map(|n| n.pods.iter().cloned()).collect();
            let draining_since = mine.iter().filter_map(|n| n.draining_since).min();
            if pods.is_empty() {
                return Busy::Idle(Some((
                    kube.clone(),
                    mine.iter().map(|n| n.name.clone()).collect(),
                )));
            }
            Busy::Running {
                kube: Some(kube.clone()),
                nodes: mine.iter().map(|n| n.name.clone()).collect(),
                pods,
                draining_since,
            }
        }
    }
}

/// The label GKE puts on each Node of a node pool.
pub const GKE_NODEPOOL: &str = "cloud.google.com/gke-nodepool";

/// The phase: every destructive step (replace, delete) of a slice replica
/// whose Nodes are busy follows its slice's disruption policy. Held steps
/// leave `actions` for the returned list; steps that go ahead while busy
/// carry their [`Disrupting`].
pub(super) fn decide(
    i: &Inputs<'_>,
    live_own: impl Fn(&Action) -> Option<Ownership>,
    actions: &mut Vec<Action>,
) -> (Vec<Held>, Vec<Release>) {
    let now = i.workloads.observed_at.unwrap_or(Timestamp::UNIX_EPOCH);
    // The busy state of each replica with a destructive step on a resource
    // that holds capacity, with its Target.
    let mut replicas: BTreeMap<Key, (Busy, Option<&Target>, String, Step)> = BTreeMap::new();
    // The Nodes of every replica with a destructive step (busy or not): a
    // drain label on them stays while the step goes ahead (not when it is
    // held: the workload keeps running, and its Nodes are uncordoned).
    let mut replica_nodes: BTreeMap<(String, u32), BTreeSet<(KubeRef, String)>> = BTreeMap::new();
    for a in actions.iter().filter(|a| gated(a)) {
        let Some(step) = Step::of(a) else {
            continue;
        };
        let Some((own, target, hosts)) = hosts_of(i, &live_own, a) else {
            continue;
        };
        replica_nodes
            .entry((a.owner.slice.clone(), a.owner.replica))
            .or_default()
            .extend(nodes_of(i.workloads, &hosts));
        let key = (
            own.owner.clone(),
            a.owner.slice.clone(),
            a.owner.replica,
            hosts.kube.clone(),
        );
        if replicas.contains_key(&key) {
            continue;
        }
        let busy = busy_of(i, &hosts);
        replicas.insert(key, (busy, target, own.slice.clone(), step));
    }
    // Replicas a drain already started on (their Nodes carry the drain
    // label, read back after a restart) hold their Target's budget first.
    // A cluster is shared (other fleets, other owner ids, other tools):
    // only the Nodes of resources this fleet owns are ever released; a
    // drain label on anyone else's Node is theirs.
    let mut ours: BTreeSet<(KubeRef, String)> = BTreeSet::new();
    for (id, own) in &i.owned {
        let Some(kind) = i.kinds.iter().find(|k| k.id() == id.kind) else {
            continue;
        };
        let target = target_of(i, own, &id.scope);
        if let Some(hosts) = kind.hosts(id, own, kube_of(i, target).as_ref()) {
            ours.extend(nodes_of(i.workloads, &hosts));
        }
    }
    let mut draining: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for ((_, _, replica, _), (busy, target, live_slice, _)) in &replicas {
        if let (
            Busy::Running {
                draining_since: Some(_),
                ..
            },
            Some(t),
        ) = (busy, target)
        {
            draining
                .entry(t.name.clone())
                .or_default()
                .insert(format!("{live_slice}[{replica}]"));
        }
    }
    // (slice, replica) → the hold, or how it goes ahead: the gate
    // ([`consent`]) decides, nothing else.
    let mut holds: BTreeMap<(String, u32), (&'static str, String, Vec<BoundPod>)> = BTreeMap::new();
    let mut goes: BTreeMap<Part, Disrupting> = BTreeMap::new();
    let mut rechecks: BTreeMap<Part, (KubeRef, Vec<String>)> = BTreeMap::new();
    for ((_, slice, replica, cluster), (busy, target, live_slice, step)) in &replicas {
        let rk = (slice.clone(), *replica);
        let part = (slice.clone(), *replica, cluster.clone());
        let slice_spec = i.fleet.claimant(live_slice).or(i.fleet.slices.get(slice));
        let policy = Policy::resolve(
            target.and_then(|t| t.spec.disruption.as_ref()),
            slice_spec.and_then(|s| s.spec.disruption.as_ref()),
        );
        let (kube, nodes, pods, since) = match busy {
            Busy::Running {
                kube,
                nodes,
                pods,
                draining_since,
            } => (kube.clone(), nodes.clone(), pods.clone(), *draining_since),
            _ => (None, Vec::new(), Vec::new(), None),
        };
        let known = match busy {
            Busy::Idle(_) => Known::Idle,
            Busy::Unknown(e) => Known::Unknown(e),
            Busy::Running { .. } => Known::Running(&pods),
        };
        let group_label = format!("{live_slice}[{replica}]");
        let budget_of = |t: &Target| policy.budget.map(|limit| (t.name.clone(), limit));
        let budget = target.and_then(budget_of);
        let empty = BTreeSet::new();
        let used_by = budget
            .as_ref()
            .and_then(|(t, _)| draining.get(t))
            .unwrap_or(&empty);
        let subject = format!("slice replica {slice}[{replica}]");
        let answer = consent(&Ask {
            step: *step,
            subject: &subject,
            known,
            policy: &policy,
            budget: budget.as_ref().map(|(t, limit)| Budget {
                target: t,
                limit: *limit,
                used_by,
                mine: used_by.contains(&group_label),
            }),
            mode: i.mode,
            disrupt: i.disrupt,
            now,
        });
        let how = match answer {
            Consent::Held { code, message } => {
                holds.insert(rk, (code, message, pods));
                continue;
            }
            Consent::Go(Go::Idle) => {
                if let Busy::Idle(Some((k, nodes))) = busy
                    && !nodes.is_empty()
                {
                    rechecks.insert(part, (k.clone(), nodes.clone()));
                }
                continue;
            }
            Consent::Go(Go::Drain) => DisruptHow::Drain,
            Consent::Go(Go::Replace) => DisruptHow::Replace,
            Consent::Go(Go::Forced) => DisruptHow::Forced,
        };
        if how != DisruptHow::Forced
            && let Some((t, _)) = &budget
        {
            draining.entry(t.clone()).or_default().insert(group_label);
        }
        goes.insert(
            part,
            Disrupting {
                how,
                pods,
                kube,
                nodes,
                drain_timeout_secs: policy.drain_timeout.as_secs(),
                draining_since: since,
                windows: policy.windows.clone(),
            },
        );
    }
    let shared_holds = shared_in_use(i, actions, &holds, now);
    let in_use: BTreeSet<(KubeRef, String)> = replica_nodes
        .into_iter()
        .filter(|(rk, _)| !holds.contains_key(rk))
        .flat_map(|(_, n)| n)
        .collect();
    let released = releases(i.workloads, &in_use, &ours);
    let (kept, held): (Vec<Action>, Vec<Action>) =
        std::mem::take(actions).into_iter().partition(|a| {
            !((gated(a) && holds.contains_key(&(a.owner.slice.clone(), a.owner.replica)))
                || shared_holds.contains_key(&a.id))
        });
    *actions = kept;
    // The drain runs before the first capacity step of the replica; every
    // destructive step of a replica going ahead says so.
    let mut drained: BTreeSet<Part> = BTreeSet::new();
    let mut rechecked: BTreeSet<Part> = BTreeSet::new();
    for a in actions.iter_mut().filter(|a| gated(a)) {
        // The part of the replica this step acts on: its own Nodes' cluster,
        // or (a step on no Nodes, such as a policy) the replica's first.
        let own_part = hosts_of(i, &live_own, a)
            .map(|(_, _, h)| (a.owner.slice.clone(), a.owner.replica, h.kube));
        let holds_capacity = own_part.is_some();
        let part_of = |m: &BTreeSet<Part>| {
            own_part.clone().or_else(|| {
                m.iter()
                    .find(|(s, r, _)| *s == a.owner.slice && *r == a.owner.replica)
                    .cloned()
            })
        };
        let parts: BTreeSet<Part> = goes.keys().cloned().collect();
        if let Some(part) = own_part.clone()
            && let Some(r) = rechecks.get(&part)
            && rechecked.insert(part)
        {
            a.recheck = Some(r.clone());
        }
        let Some(part) = part_of(&parts) else {
            continue;
        };
        let Some(d) = goes.get(&part) else {
            continue;
        };
        let mut d = d.clone();
        if d.how == DisruptHow::Drain && (!holds_capacity || !drained.insert(part)) {
            // Only one step per replica drains; the others wait on it.
            d.nodes.clear();
        }
        a.disruption = Some(d);
    }
    let held = held
        .into_iter()
        .map(|a| {
            let (code, message, pods) = match shared_holds.get(&a.id) {
                Some((code, message)) => (*code, message.clone(), Vec::new()),
                None => holds
                    .get(&(a.owner.slice.clone(), a.owner.replica))
                    .cloned()
                    .unwrap_or(("busy", String::new(), Vec::new())),
            };
            Held {
                kind: a.id.kind.as_str(),
                name: a.id.name.clone(),
                address: a.address(),
                slice: a.owner.slice.clone(),
                replica: a.owner.replica,
                scope: a.id.scope.clone(),
                action: a.action,
                reason: a.reason_text(),
                code,
                message,
                pods,
            }
        })
        .collect();
    (held, released)
}

/// The Nodes a gated step acts on (its resource's, or, for a lost-Node
/// recreate, its MIG's), with the resource's ownership and Target; `None`
/// for a step on a resource that holds no capacity (a policy, a template).
fn hosts_of<'a>(
    i: &Inputs<'a>,
    live_own: &impl Fn(&Action) -> Option<Ownership>,
    a: &Action,
) -> Option<(Ownership, Option<&'a Target>, Hosts)> {
    let kind = i.kinds.iter().find(|k| k.id() == a.id.kind)?;
    let own_hosts = live_own(a).and_then(|own| {
        let target = target_of(i, &own, &a.id.scope);
        let hosts = kind.hosts(&a.id, &own, kube_of(i, target).as_ref())?;
        Some((own, target, hosts))
    });
    // A lost-Node recreate is planned on the replica's Nodes, and
    // recreates its MIG's VMs: asked with the MIG's Nodes.
    match (own_hosts, Step::of(a)) {
        (None, Some(Step::NodeLostRecreate)) => capacity_of(i, a),
        (found, _) => found,
    }
}

/// The deletes of shared resources of a cluster (its TPU device plugin)
/// that the gate holds because a slice resource whose Nodes are in that
/// cluster stays: one not deleted by this plan, or whose delete is held.
/// A running container survives its device plugin, but a restarted pod
/// could not get its TPUs.
fn shared_in_use(
    i: &Inputs<'_>,
    actions: &[Action],
    holds: &BTreeMap<(String, u32), (&'static str, String, Vec<BoundPod>)>,
    now: Timestamp,
) -> BTreeMap<ResourceId, (&'static str, String)> {
    let going: BTreeSet<&ResourceId> = actions
        .iter()
        .filter(|b| {
            b.action == ActionKind::Delete
                && !holds.contains_key(&(b.owner.slice.clone(), b.owner.replica))
        })
        .map(|b| &b.id)
        .collect();
    let mut out = BTreeMap::new();
    for a in actions.iter().filter(|a| a.action == ActionKind::Delete) {
        if holds.contains_key(&(a.owner.slice.clone(), a.owner.replica)) {
            // Held with its replica already.
            continue;
        }
        let Some(kind) = i.kinds.iter().find(|k| k.id() == a.id.kind) else {
            continue;
        };
        // The gate's answer for a shared resource still used by `by`.
        let ask = |step: Step, subject: &str, by: &[String]| match consent(&Ask {
            step,
            subject,
            known: Known::InUse(by),
            policy: &Policy::default(),
            budget: None,
            mode: i.mode,
            disrupt: i.disrupt,
            now,
        }) {
            Consent::Held { code, message } => Some((code, message)),
            Consent::Go(_) => None,
        };
        if let Some(users) = i.users.get(&a.id) {
            let by = users_staying(i, actions, &going, &a.id, users);
            if let Some(held) = ask(
                Step::SharedResourceDelete,
                &format!("{} {}", kind.noun(), a.id.name),
                &by,
            ) {
                out.insert(a.id.clone(), held);
            }
            continue;
        }
        let Scope::Kube(k) = &a.id.scope else {
            continue;
        };
        if !kind.shared() {
            continue;
        }
        let by: Vec<String> = i
            .owned
            .iter()
            .filter(|(id, _)| !going.contains(id))
            .filter_map(|(id, own)| {
                let user = i.kinds.iter().find(|u| u.id() == id.kind)?;
                let hosts =
                    user.hosts(id, own, kube_of(i, target_of(i, own, &id.scope)).as_ref())?;
                (hosts.kube.as_ref() == Some(k)).then(|| {
                    format!(
                        "{} {} (slice {}[{}])",
                        user.noun(),
                        id.name,
                        own.slice,
                        own.replica
                    )
                })
            })
            .collect();
        if let Some(held) = ask(
            Step::DevicePluginRemoval,
            &format!("the {} of {k}", kind.noun()),
            &by,
        ) {
            out.insert(a.id.clone(), held);
        }
    }
    out
}

/// Who still uses shared resource `id` (live users `users`) once this plan
/// has run: a live user not deleted by it (a delete held counts as
/// staying) and not replaced onto something else, and every step of the
/// plan whose resource, as desired, uses it.
fn users_staying(
    i: &Inputs<'_>,
    actions: &[Action],
    going: &BTreeSet<&ResourceId>,
    id: &ResourceId,
    users: &BTreeSet<ResourceId>,
) -> Vec<String> {
    let noun = |k: KindId| {
        i.kinds
            .iter()
            .find(|x| x.id() == k)
            .map_or("", |x| x.noun())
    };
    let uses = |a: &Action| {
        let kind = i.kinds.iter().find(|k| k.id() == a.id.kind);
        a.desired
            .as_ref()
            .zip(kind)
            .is_some_and(|(d, k)| k.uses(d, id))
    };
    let user_kinds: BTreeSet<KindId> = users.iter().map(|u| u.kind).collect();
    let mut by: BTreeSet<String> = users
        .iter()
        .filter(|u| !going.contains(u))
        .filter(|u| {
            // Replaced onto another resource: it stops using this one.
            !actions
                .iter()
                .any(|a| &a.id == *u && a.action == ActionKind::Replace && !uses(a))
        })
        .map(|u| format!("{} {}", noun(u.kind), u.name))
        .collect();
    by.extend(
        actions
            .iter()
            .filter(|a| {
                user_kinds.contains(&a.id.kind)
                    && matches!(
                        a.action,
                        ActionKind::Create | ActionKind::Replace | ActionKind::Update
                    )
                    && uses(a)
            })
            .map(|a| format!("{} {} (a step of this plan)", noun(a.id.kind), a.id.name)),
    );
    by.into_iter().collect()
}

/// The live resource of `a`'s slice replica that holds its capacity (its
/// MIG), with its ownership, Target and Nodes.
fn capacity_of<'a>(i: &Inputs<'a>, a: &Action) -> Option<(Ownership, Option<&'a Target>, Hosts)> {
    i.owned.iter().find_map(|(id, own)| {
        if own.slice != a.owner.slice || own.replica != a.owner.replica {
            return None;
        }
        let kind = i.kinds.iter().find(|k| k.id() == id.kind)?;
        let target = target_of(i, own, &id.scope);
        let hosts = kind.hosts(id, own, kube_of(i, target).as_ref())?;
        Some((own.clone(), target, hosts))
    })
}

/// Whether the gate is asked for `a` ([`Step::of`]).
fn gated(a: &Action) -> bool {
    Step::of(a).is_some()
}

/// The default drain poll interval of the executor.
pub const DRAIN_POLL: Duration = Duration::from_secs(2);
