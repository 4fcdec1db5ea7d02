//! The invariants, checked after every reconcile against the oracle's own
//! ground truth, taken before it ([`Before`]): which pods ran on which
//! pool's Nodes, whether their replica's policy consented, who made each
//! resource, what was protected.
//!
//! - I1: no pod running on a replica is killed (its pool deleted or
//!   replaced, or the pod evicted) unless the replica's policy consented:
//!   `whenBusy` drain or replace, its window open, no do-not-disrupt pod
//!   on it. And a scale-down never takes a busy replica while it keeps an
//!   idle one of the same slice.
//! - I2: a source's reconcile deletes or changes only what it made.
//! - I3: a pool whose live stamp says `preventDestroy` is never deleted.
//! - I4: once faults stop, every source converges in a few cycles, with no
//!   duplicate replica and no leaked pool ([`converged`]).
//! - I6: every step the apply reports completed happened.
//! - I7: no panic, no hang (a bounded paused-clock timeout).

use std::collections::{BTreeMap, BTreeSet};

use slicectl::plan::{ActionKind, PlanMode, Scope};

use crate::model::{WhenBusy, Window};
use crate::steps::KubeState;
use crate::world::{Creator, LivePool, PodRec, RunResult, World};

/// An invariant broken, with what classifies it (`reason=moved`,
/// `kube=no_token`, `kind=resource_policy`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub detail: String,
    pub tags: Vec<String>,
}

impl Violation {
    pub fn new(invariant: &'static str, detail: String, tags: Vec<String>) -> Violation {
        Violation {
            invariant,
            detail,
            tags,
        }
    }
    pub fn has(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| t == tag)
    }
}

/// A running pod as it stood before the reconcile.
struct PodBefore {
    pod: PodRec,
    consent: bool,
    why: String,
    kube: KubeState,
}

/// The world before a reconcile.
pub struct Before {
    src: usize,
    mode: PlanMode,
    pools: Vec<LivePool>,
    policies: BTreeMap<String, String>,
    removed_len: usize,
    /// How many node pool deletes the fake had accepted.
    deletes_len: usize,
    pods: Vec<PodBefore>,
    /// Clusters the source's Targets name.
    named: BTreeSet<String>,
    /// Workload pools whose JobSet (by cluster, namespace and name) has
    /// not ended: pool key → `ns/name`.
    wanted: BTreeMap<String, String>,
}

impl Before {
    pub fn take(w: &World, src: usize, mode: PlanMode) -> Before {
        let pools = w.pools();
        let by_key: BTreeMap<String, &LivePool> = pools.iter().map(|p| (p.key(), p)).collect();
        let alive: Vec<&PodRec> = w.pods.iter().filter(|p| p.alive).collect();
        let mut pods = Vec::new();
        for p in &alive {
            let Some(pool) = by_key.get(&p.pool) else {
                continue;
            };
            let (wb, window) = w.policy_of(pool);
            let dnd = alive.iter().any(|q| q.pool == p.pool && q.dnd);
            let (consent, why) = if dnd {
                (false, "do-not-disrupt".to_string())
            } else if wb == WhenBusy::Wait {
                (false, "whenBusy: wait".to_string())
            } else if window == Some(Window::Closed) {
                (false, "outside its window".to_string())
            } else {
                (true, format!("whenBusy: {}", wb.as_str()))
            };
            let kube = w
                .kube_state
                .get(
                    &crate::model::CLUSTERS
                        .iter()
                        .position(|c| *c == p.cluster)
                        .unwrap_or(0),
                )
                .copied()
                .unwrap_or(KubeState::Up);
            pods.push(PodBefore {
                pod: (*p).clone(),
                consent,
                why,
                kube,
            });
        }
        // A workload pool is wanted while the Target that made it (its
        // stamp) still serves its cluster: moving that Target away is a
        // person's decision to stop serving it there (another Target of the
        // cluster makes its own pool for a JobSet still pending).
        let serves = |p: &LivePool| {
            p.stamp().is_some_and(|(owner, _, _, target)| {
                w.sources
                    .iter()
                    .filter(|s| s.owner == owner)
                    .flat_map(|s| s.targets.iter())
                    .any(|t| t.name == target && t.workloads && t.cluster == p.cluster)
            })
        };
        let wanted = pools
            .iter()
            .filter(|p| p.label("slicectl.dev/source") == Some("workload"))
            .filter(|p| serves(p))
            .filter_map(|p| {
                let (ns, name) = (
                    p.label("slicectl.dev/jobset-namespace")?,
                    p.label("slicectl.dev/jobset-name")?,
                );
                w.jobsets
                    .iter()
                    .any(|j| !j.ended && j.cluster == p.cluster && j.ns == ns && j.name == name)
                    .then(|| (p.key(), format!("{ns}/{name}")))
            })
            .collect();
        Before {
            wanted,
            src,
            mode,
            policies: w.policies(),
            removed_len: w.fake.removed().len(),
            deletes_len: w.fake.pool_deletes().len(),
            named: w.sources[src]
                .targets
                .iter()
                .map(|t| t.cluster.to_string())
                .collect(),
            pools,
            pods,
        }
    }

    /// The resources removed since.
    pub fn removed_since(&self, w: &World) -> Vec<String> {
        w.fake.removed().split_off(self.removed_len)
    }

    /// The node pools (keys) this run's accepted deletes were for.
    fn pool_deletes_sent(&self, w: &World) -> BTreeSet<String> {
        w.fake
            .pool_deletes()
            .split_off(self.deletes_len)
            .into_iter()
            .collect()
    }
}

fn kube_tag(k: KubeState) -> &'static str {
    match k {
        KubeState::Up => "kube=up",
        KubeState::Unreachable => "kube=unreachable",
        KubeState::Forbidden => "kube=forbidden",
        KubeState::NoToken => "kube=no_token",
    }
}

/// The reason code of the plan's destructive action on pool `name` in
/// cluster `cluster`, if the plan has one (`moved`, `replica_not_desired`…).
fn reason_of(r: &RunResult, cluster: &str, name: &str) -> Option<String> {
    let RunResult::Report(rep) = r else {
        return None;
    };
    rep.plan
        .actions
        .iter()
        .filter(|a| a.action.is_destructive() && a.id.name == name)
        .find(|a| matches!(&a.id.scope, Scope::Cluster(c) if c.name == cluster))
        .map(|a| a.reason.code().to_string())
}

/// Checks a reconcile; records who made what appeared; logs the plan.
pub fn check(w: &mut World, b: &Before, r: &RunResult) -> Vec<Violation> {
    let mut out = Vec::new();
    let removed: BTreeSet<String> = b.removed_since(w).into_iter().collect();
    let pools_now = w.pools();
    let now_keys: BTreeSet<String> = pools_now.iter().map(LivePool::key).collect();
    let policies_now = w.policies();
    log_result(w, b, r, &removed);
    // I7.
    match r {
        RunResult::Panicked(m) => out.push(Violation::new("I7", format!("panic: {m}"), vec![])),
        RunResult::Hung => out.push(Violation::new(
            "I7",
            format!(
                "no answer within {:?} of the paused clock",
                crate::world::HANG
            ),
            vec![],
        )),
        _ => {}
    }
    // I1: pods killed without consent.
    for p in &b.pods {
        let pool_gone = removed.contains(&p.pod.pool) || !now_keys.contains(&p.pod.pool);
        let listed = w
            .kube
            .pod_names(&slicectl::resource::KubeRef::gke(
                &crate::world::cluster_named(&p.pod.cluster),
            ))
            .contains(&format!("{}/{}", p.pod.ns, p.pod.name));
        if (!pool_gone && listed) || p.consent {
            continue;
        }
        let name = p.pod.pool.rsplit('/').next().unwrap_or_default();
        let reason = reason_of(r, &p.pod.cluster, name);
        let mut tags = vec![
            kube_tag(p.kube).to_string(),
            format!("reason={}", reason.as_deref().unwrap_or("none")),
            format!("mode={:?}", b.mode).to_lowercase(),
        ];
        if !b.named.contains(&p.pod.cluster) {
            tags.push("cluster_not_named".into());
        }
        out.push(Violation::new(
            "I1",
            format!(
                "pod {}/{} on Node {} of {} was {} without consent ({}; reason {}; its cluster's API {})",
                p.pod.ns,
                p.pod.name,
                p.pod.node,
                p.pod.pool,
                if pool_gone { "killed (its pool deleted)" } else { "evicted" },
                p.why,
                reason.as_deref().unwrap_or("none"),
                kube_tag(p.kube)
            ),
            tags,
        ));
    }
    // I1: a scale-down disrupts (or holds) a busy replica while it keeps
    // an idle one of the same slice.
    if let RunResult::Report(rep) = r {
        let busy: BTreeSet<&str> = b.pods.iter().map(|p| p.pod.pool.as_str()).collect();
        let key = |cluster: &str, name: &str| {
            format!(
                "node_pool {}/{name}",
                crate::world::cluster_named(cluster).path()
            )
        };
        let mut dropped: Vec<(String, String)> = Vec::new();
        for a in rep
            .plan
            .actions
            .iter()
            .filter(|a| a.reason.code() == "replica_not_desired")
        {
            if let Scope::Cluster(c) = &a.id.scope {
                dropped.push((c.name.clone(), a.id.name.clone()));
            }
        }
        for h in rep
            .plan
            .held
            .iter()
            // Held because its cluster cannot be read: slicectl could not
            // tell the busy replica from the idle one, and disrupts neither.
            .filter(|h| h.reason.contains("no longer desired") && h.code != "busy_unknown")
        {
            if let Scope::Cluster(c) = &h.scope {
                dropped.push((c.name.clone(), h.name.clone()));
            }
        }
        // A pool this plan deletes for any reason (moved with its Target),
        // or would delete but holds (a left-behind pool in a cluster whose
        // Pods cannot be read: `busy_unknown`) or refuses (its live stamp
        // still says `preventDestroy`: the lift takes an apply of its own),
        // is not kept by choice: taking the busy one instead would have
        // saved nothing.
        let deleted: Vec<(String, String)> = rep
            .plan
            .actions
            .iter()
            .filter(|a| a.action == ActionKind::Delete)
            .filter_map(|a| match &a.id.scope {
                Scope::Cluster(c) => Some((c.name.clone(), a.id.name.clone())),
                _ => None,
            })
            .chain(rep.plan.held.iter().filter_map(|h| match &h.scope {
                Scope::Cluster(c) => Some((c.name.clone(), h.name.clone())),
                _ => None,
            }))
            .chain(
                rep.plan
                    .refused
                    .iter()
                    .filter(|x| x.action == ActionKind::Delete)
                    .filter_map(|x| match &x.scope {
                        Scope::Cluster(c) => Some((c.name.clone(), x.name.clone())),
                        _ => None,
                    }),
            )
            .collect();
        for (c, name) in &dropped {
            if !busy.contains(key(c, name).as_str()) {
                continue;
            }
            let Some(dp) = b.pools.iter().find(|p| p.cluster == *c && p.name == *name) else {
                continue;
            };
            let Some((owner, slice, _, _)) = dp.stamp() else {
                continue;
            };
            // Kept in the same cluster: a pool of a Target's new cluster
            // is no choice against one its Target left (that goes anyway).
            let idle_kept = b.pools.iter().find(|p| {
                p.running
                    && p.cluster == *c
                    && p.stamp()
                        .is_some_and(|(o, s, _, _)| o == owner && s == slice)
                    && !busy.contains(p.key().as_str())
                    && !dropped
                        .iter()
                        .chain(&deleted)
                        .any(|(c2, n2)| *c2 == p.cluster && *n2 == p.name)
            });
            if let Some(idle) = idle_kept {
                out.push(Violation::new(
                    "I1",
                    format!(
                        "scale-down of slice {slice} takes busy pool {name} and keeps idle pool {}",
                        idle.name
                    ),
                    vec!["scale_down_busy".into()],
                ));
            }
        }
    }
    // I1 for workload slices: a pool made for a JobSet that has not ended
    // (in its own cluster) is never released; and it is never handed to
    // another JobSet's namespace.
    // (`destroy` tears down what it is given, workload slices included.)
    for (key, js) in b.wanted.iter().filter(|_| b.mode == PlanMode::Apply) {
        if removed.contains(key) || !now_keys.contains(key) {
            let name = key.rsplit('/').next().unwrap_or_default();
            let cluster = b
                .pools
                .iter()
                .find(|p| p.key() == *key)
                .map(|p| p.cluster.clone())
                .unwrap_or_default();
            let reason = reason_of(r, &cluster, name);
            // Not running before this apply and deleted by no step of it: the
            // delete of an earlier run (a `destroy`, which tears workload
            // slices down by design) finished during this one.
            let was_running = b.pools.iter().any(|p| p.key() == *key && p.running);
            if reason.is_none() && !was_running {
                continue;
            }
            let mut tags = vec!["workload_live_released".to_string()];
            // The same JobSet (namespace and name) in another cluster
            // (issue 36, case 1: a pool keyed by its name alone).
            if w.jobsets
                .iter()
                .any(|j| j.cluster != cluster && format!("{}/{}", j.ns, j.name) == *js)
            {
                tags.push("jobset_in_two_clusters".into());
            }
            out.push(Violation::new(
                "I1",
                format!(
                    "workload pool {key} deleted (reason {}) while its JobSet {js} has not ended in \
                     its cluster {cluster}",
                    reason.as_deref().unwrap_or("none")
                ),
                tags,
            ));
        }
    }
    for p in b
        .pools
        .iter()
        .filter(|p| p.label("slicectl.dev/source") == Some("workload"))
    {
        if let Some(q) = pools_now.iter().find(|q| q.key() == p.key())
            && q.label("slicectl.dev/jobset-namespace") != p.label("slicectl.dev/jobset-namespace")
        {
            out.push(Violation::new(
                "I2",
                format!(
                    "workload pool {} of JobSet namespace {:?} taken over by namespace {:?}",
                    p.key(),
                    p.label("slicectl.dev/jobset-namespace"),
                    q.label("slicectl.dev/jobset-namespace")
                ),
                vec!["workload_takeover".into()],
            ));
        }
    }
    let me = Creator::Source(b.src);
    let deletes_sent = b.pool_deletes_sent(w);
    // I2 and I3 on pools.
    for p in &b.pools {
        let key = p.key();
        let gone = removed.contains(&key) || !now_keys.contains(&key);
        let creator = w.creator.get(&key).cloned().unwrap_or(Creator::Unmanaged);
        let changed = pools_now
            .iter()
            .find(|q| q.key() == key)
            .is_some_and(|q| q.labels != p.labels);
        // I2 judges the deletes this run sent, when it sends them: a pool
        // whose delete another source sent earlier may finish going during
        // this run (seen as a `Wait being_deleted`), which is not this
        // run's doing (N4 was that: the oracle's mistake).
        let deleted = deletes_sent.contains(&key);
        // And only what carries its own ownerId: after an ownerId change,
        // what it made under the old one is another owner's.
        let mine_now = &w.sources[b.src].owner;
        if let Some((owner, ..)) = p.stamp()
            && (deleted || changed)
            && owner != *mine_now
            && creator == me
        {
            out.push(Violation::new(
                "I2",
                format!(
                    "source s{} (ownerId {mine_now}) {} pool {key}, stamped with ownerId {owner}",
                    b.src,
                    if deleted { "deleted" } else { "changed" }
                ),
                vec!["kind=node_pool".into(), "foreign_owner".into()],
            ));
        }
        if (deleted || changed) && creator != me {
            out.push(Violation::new(
                "I2",
                format!(
                    "source s{} {} pool {key}, made by {creator:?}",
                    b.src,
                    if deleted { "deleted" } else { "changed" }
                ),
                vec!["kind=node_pool".into()],
            ));
        }
        if gone && p.label("slicectl.dev/prevent-destroy") == Some("true") {
            out.push(Violation::new(
                "I3",
                format!("pool {key} was protected by preventDestroy and is deleted"),
                if w.stale_now {
                    vec!["stale_view".into()]
                } else {
                    vec![]
                },
            ));
        }
    }
    // I2 on workload policies.
    for key in b.policies.keys() {
        let gone = removed.contains(key) || !policies_now.contains_key(key);
        let creator = w.creator.get(key).cloned().unwrap_or(Creator::Unmanaged);
        if gone && creator != me {
            out.push(Violation::new(
                "I2",
                format!("source s{} deleted {key}, made by {creator:?}", b.src),
                vec!["kind=resource_policy".into()],
            ));
        }
    }
    // I6: what the apply says it completed happened.
    if let RunResult::Report(rep) = r
        && let Some(apply) = &rep.apply
    {
        for addr in &apply.completed {
            let acts: Vec<_> = rep
                .plan
                .actions
                .iter()
                .filter(|a| a.address() == *addr)
                .collect();
            let [a] = acts.as_slice() else { continue };
            let Scope::Cluster(c) = &a.id.scope else {
                continue;
            };
            let exists = pools_now
                .iter()
                .any(|p| p.cluster == c.name && p.name == a.id.name);
            let ok = match a.action {
                ActionKind::Delete => !exists,
                ActionKind::Create | ActionKind::Replace | ActionKind::Update => exists,
                _ => true,
            };
            if !ok {
                out.push(Violation::new(
                    "I6",
                    format!(
                        "{:?} {addr} reported completed but the pool says otherwise",
                        a.action
                    ),
                    vec![],
                ));
            }
        }
    }
    // Who made what appeared.
    let before_keys: BTreeSet<String> = b
        .pools
        .iter()
        .map(LivePool::key)
        .chain(b.policies.keys().cloned())
        .collect();
    for k in now_keys.iter().chain(policies_now.keys()) {
        if !before_keys.contains(k) || removed.contains(k) {
            w.creator.insert(k.clone(), me.clone());
        }
    }
    out
}

fn log_result(w: &mut World, b: &Before, r: &RunResult, removed: &BTreeSet<String>) {
    let line = match r {
        RunResult::Report(rep) => {
            let acts: Vec<String> = rep
                .plan
                .actions
                .iter()
                .map(|a| format!("{:?} {} {}", a.action, a.id.name, a.reason.code()))
                .collect();
            let held: Vec<String> = rep
                .plan
                .held
                .iter()
                .map(|h| format!("{} {}", h.name, h.code))
                .collect();
            let refused: Vec<String> = rep
                .plan
                .refused
                .iter()
                .map(|x| format!("{} {}", x.name, x.code))
                .collect();
            // A Target or scope the plan could not read (a list that
            // failed) is not quiet: what it holds was not judged this time.
            let unread: Vec<String> = rep
                .plan
                .unobserved
                .iter()
                .map(|u| u.target.clone())
                .chain(rep.plan.deferred.iter().map(|d| format!("{:?}", d.scope)))
                .collect();
            let unread_shown = if unread.is_empty() {
                String::new()
            } else {
                format!(" unread={unread:?}")
            };
            format!(
                "  plan s{} {:?} changes={} actions={acts:?} held={held:?} refused={refused:?}{unread_shown}",
                b.src,
                b.mode,
                rep.plan.summary.has_changes() || !rep.plan.held.is_empty() || !unread.is_empty()
            )
        }
        // The fleet-wide empty guard refuses a source with no slice left
        // (every file removed), and the cap on destructive steps per apply
        // (`--max-destroy`) refuses a plan over it, by design (one, the
        // other, or both at once): nothing changes until a person
        // overrides them.
        RunResult::Refused(code, why) => format!(
            "  plan s{} refused as a whole: {code} changes={} ({why})",
            b.src,
            !code
                .split('+')
                .all(|c| matches!(c, "empty_source" | "too_many_destructive"))
        ),
        RunResult::Killed => format!("  plan s{} killed changes=true", b.src),
        RunResult::Panicked(_) => format!("  plan s{} panicked changes=true", b.src),
        RunResult::Hung => format!("  plan s{} hung changes=true", b.src),
    };
    w.log.push(line);
    if !removed.is_empty() {
        w.log.push(format!("  removed {:?}", removed));
    }
}

/// I4 once quiet: no replica twice, no pool of a source's ownerId that no
/// source declares (unless `preventDestroy` keeps it, by design).
pub fn converged(w: &World) -> Vec<Violation> {
    let mut out = Vec::new();
    // Replicas with a pool the per-Target empty guard keeps (`empty_target`,
    // by design, until a person acts): the rest of such a replica is held
    // back with it (`held_back`, visible), wherever it lives.
    let emptied: BTreeSet<(String, String, u32)> = w
        .pools()
        .iter()
        .filter_map(|p| {
            let (owner, slice, replica, _) = p.stamp()?;
            empty_target_keeps(w, &owner, &p.cluster).then_some((owner, slice, replica))
        })
        .collect();
    let mut seen: BTreeMap<(String, String, u32), Vec<String>> = BTreeMap::new();
    // (owner, slice) → (replicas declared, the unprotected indices live).
    let mut kept: BTreeMap<(String, String), (u32, BTreeSet<u32>)> = BTreeMap::new();
    let owners: BTreeSet<&str> = w.sources.iter().map(|s| s.owner.as_str()).collect();
    // Made by a source whose ownerId changed since: another owner's now,
    // kept by design until a person acts (the documented way keeps a
    // Target with the old ownerId; `other_source`, `name_taken` say so).
    let orphaned_by_owner_change = |p: &LivePool| {
        let Some((owner, ..)) = p.stamp() else {
            return false;
        };
        matches!(w.creator.get(&p.key()), Some(Creator::Source(i))
            if w.sources.get(*i).is_some_and(|s| s.owner != owner))
    };
    for p in w.pools() {
        if orphaned_by_owner_change(&p) {
            continue;
        }
        if p.label("slicectl.dev/source") == Some("workload") {
            out.push(Violation::new(
                "I4",
                format!("workload pool {} leaked: every JobSet ended", p.key()),
                vec!["leak".into(), "workload".into()],
            ));
            continue;
        }
        let Some((owner, slice, replica, _)) = p.stamp() else {
            continue;
        };
        if !owners.contains(owner.as_str()) {
            continue;
        }

        seen.entry((owner.clone(), slice.clone(), replica))
            .or_default()
            .push(p.key());
        // The replicas a slice keeps are not always `0..replicas`: a
        // scale-down keeps the busy ones first, at their indices
        // (docs/planning-and-safety.md, "Scaling down"). So a replica is
        // declared while its slice is; how many it keeps is counted below.
        let wants = w
            .sources
            .iter()
            .filter(|s| s.owner == owner)
            .filter_map(|s| s.slice_claiming(&slice).map(|m| m.replicas))
            .max();
        let declared = wants.is_some();
        if p.label("slicectl.dev/prevent-destroy") != Some("true")
            && let Some(n) = wants
        {
            kept.entry((owner.clone(), slice.clone()))
                .or_insert((n, BTreeSet::new()))
                .1
                .insert(replica);
        }
        // A source with no slice left is refused as a whole (empty_source):
        // its pools stay, by design.
        let guarded = w
            .sources
            .iter()
            .any(|s| s.owner == owner && s.live_slices().next().is_none())
            || empty_target_keeps(w, &owner, &p.cluster)
            || emptied.contains(&(owner.clone(), slice.clone(), replica));
        if !declared && !guarded && p.label("slicectl.dev/prevent-destroy") != Some("true") {
            out.push(Violation::new(
                "I4",
                format!(
                    "pool {} leaked: no source declares {slice}[{replica}]",
                    p.key()
                ),
                vec!["leak".into()],
            ));
        }
    }
    for ((owner, slice), (n, live)) in kept {
        if live.len() > n as usize {
            out.push(Violation::new(
                "I4",
                format!(
                    "slice {owner}/{slice} keeps {} replicas {live:?}; its spec declares {n}",
                    live.len()
                ),
                vec!["leak".into()],
            ));
        }
    }
    for ((owner, slice, replica), keys) in seen {
        // A source refused as a whole (empty_source) keeps a moved slice's
        // old pools beside the new ones, by design.
        let guarded = w
            .sources
            .iter()
            .any(|s| s.owner == owner && s.live_slices().next().is_none())
            || emptied.contains(&(owner.clone(), slice.clone(), replica));
        if keys.len() > 1 && !guarded {
            let mut tags = vec!["duplicate".to_string()];
            let copies: Vec<LivePool> = w
                .pools()
                .into_iter()
                .filter(|p| keys.contains(&p.key()))
                .collect();
            let stamped = |p: &LivePool| p.label("slicectl.dev/prevent-destroy") == Some("true");
            // Every copy protected (a protected slice moved while busy, then
            // moved again): only a person can say which copy goes, by
            // lifting the protection; the plan refuses both (`protected`)
            // and says so. By design, not a leak.
            if copies.len() > 1 && copies.iter().all(stamped) {
                continue;
            }
            if copies.iter().any(stamped) && w.stale_seen {
                tags.push("protected_copy_stale_view".into());
            }
            out.push(Violation::new(
                "I4",
                format!("{owner}/{slice}[{replica}] runs twice: {keys:?}"),
                tags,
            ));
        }
    }
    out
}

/// The planner's per-Target empty guard (`empty_target`, by design): a pool
/// of `owner` in `cluster` is kept when a source of that owner has Targets
/// on the cluster and none of them has a Slice left.
fn empty_target_keeps(w: &World, owner: &str, cluster: &str) -> bool {
    w.sources.iter().filter(|s| s.owner == owner).any(|s| {
        let covering: Vec<usize> = (0..s.targets.len())
            .filter(|&i| s.targets[i].cluster == cluster)
            .collect();
        !covering.is_empty() && !s.live_slices().any(|sl| covering.contains(&sl.target))
    })
}
