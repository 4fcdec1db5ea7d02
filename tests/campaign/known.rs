//! The known defects the campaign classifies a violation into, and the
//! committed table of the seeds that found them (`regressions.txt`),
//! replayed by every CI run.

use crate::oracle::Violation;

/// The known defects (issues 35 and 36), by id, with one line each.
pub const DEFECTS: &[(&str, &str)] = &[
    (
        "35.1",
        "a Target moved to another cluster deletes its busy old pool as `moved` with nothing held",
    ),
    (
        "35.2",
        "a cluster whose Kubernetes API is not read (no token: deferred) counts as idle",
    ),
    (
        "35.6",
        "a scale-down takes the busy replica and keeps the idle one",
    ),
    (
        "36.1",
        "workload slices keyed by pool name across clusters: a live JobSet's pool is released",
    ),
    (
        "36.2",
        "a JobSet of another namespace takes over a workload pool",
    ),
    (
        "N1",
        "found by the campaign: a workload pool leaked after its JobSet ended. Triaged: the oracle's \
         mistake (it took a plan that could not read a scope, a list that failed, for quiet and \
         judged the leak on it); the run converges once the list reads",
    ),
    (
        "N2",
        "found by the campaign on main: a slice with preventDestroy, its Target moved, runs twice: \
         the plan that could not read the old cluster (a list that failed) created it in the new one, \
         and the old copy can never be pruned. Fixed: such a create is refused `unread_scope` until \
         every scope reads",
    ),
    (
        "N3",
        "found by the campaign on main: `destroy` (no --disrupt) deletes a busy pool whose slice's file \
         was removed, under whenBusy: wait, with its cluster's API up (untriaged; likely 35.1's root: a \
         replica whose Target cannot be resolved is read as idle)",
    ),
    (
        "N4",
        "found by the campaign on main: one source blamed for deleting a workload pool another source \
         (same ownerId) made. Triaged: the oracle's mistake (the other source had sent the delete; its \
         operation finished during this source's run, seen as a `Wait being_deleted`); I2 now judges \
         the deletes a run sends",
    ),
    (
        "N5",
        "found by the campaign on main: after a replacing change, a destroy and a stale view, an apply \
         reports a replace completed that the pool does not show (untriaged: a defect of the report, \
         or of the oracle's reading of a lagging list)",
    ),
    (
        "N7",
        "found by the campaign on main (base 0, once the twin fleets' seeds no longer hid it): an apply \
         deletes a busy git pool as `not_in_specs` under whenBusy: wait, its cluster's API up, after \
         a slice moved to another Target of its cluster and an undeclared rename, with Ctrl-C'd applies \
         between (untriaged; issue 35's one gate: a left-behind pool's replica is read as idle)",
    ),
    (
        "35.10",
        "a workload policy carries no source stamp: another source's plan deletes it",
    ),
    (
        "N6",
        "found by the campaign on the gate branch: a delete planned from a lagging list (a stale view) \
         removes a pool stamped preventDestroy since that view: nothing reads the stamp again before \
         the delete is sent",
    ),
    (
        "N8",
        "found by the campaign on main once N6 was fixed: a plan made from a lagging list pairs a \
         create (a moved replica's new pool, a renamed slice's) with the delete of a pool stamped \
         preventDestroy since; the create went first, the delete was then refused: a second copy that \
         can never be pruned. Fixed: a guard step reads the stamp again before the paired create",
    ),
    (
        "N9",
        "the oracle's mistake: it took a slice's replicas for indices `0..replicas`, but a scale-down \
         keeps the busy replica at its index (docs/planning-and-safety.md, Scaling down)",
    ),
    (
        "N10",
        "the oracle's mistake: a replica part kept by the per-Target empty guard (`empty_target`, \
         waiting on a person) holds back the rest of its replica (`held_back`, visible); that is \
         not a leak",
    ),
    (
        "N11",
        "found by the long mode: a Target moved while its replica was busy (new copy made, old one \
         held), then preventDestroy set and a replacing change: the new copy's replace is refused \
         `protected`, and that refusal held back the old copy's delete (`held_back`): the replica ran \
         twice until a person acted. Fixed: a moved leftover goes when its new copy stays",
    ),
    (
        "N12",
        "the oracle's mistake: a scale-down's idle replica held for deletion (a left-behind pool in a \
         cluster whose Pods cannot be read) counted as kept by choice",
    ),
    (
        "N13",
        "the oracle's mistake: a workload pool whose Target moved away from its cluster counted as \
         wanted because another Target serves that cluster",
    ),
    (
        "N14",
        "the oracle's mistake: a scale-down's idle replica whose delete is refused (its live stamp \
         still says preventDestroy; the lift takes an apply of its own) counted as kept by choice",
    ),
    (
        "N15",
        "found by the CI campaign of commit c87fd24: a protected slice moved, its protection lifted in \
         the same commit, and a plan made from a stale view (a list that lags the writes) created it \
         again in the new cluster: two copies, and the one left behind kept its live stamp forever (no \
         desired body lifts a leftover's). Fixed twice: a leftover's stamp is lifted in place once \
         its spec lifts it (`protected_live`, then the delete), and a protected replica is not \
         created while a copy of it runs in another cluster of the project (`protected_copy`)",
    ),
    (
        "N16",
        "found by the campaign on the first version of N15's fix (never on main): the check before a \
         protected create refused it for any copy elsewhere, also an unprotected one the same plan \
         deletes as moved once the create is done: the fleet never converged. Only a protected copy \
         refuses it now",
    ),
    (
        "N17",
        "found by the long mode: a protected slice moved while busy, then renamed away without \
         previousNames: its protected new copy is refused, and that refusal held back the delete of \
         the unprotected copy left in the old cluster (`held_back`): the replica ran twice. Fixed: \
         another copy of the same resource goes when its refused copy stays",
    ),
    (
        "N18",
        "the oracle's mistake: a stale view drawn last was served to the first reconcile of the \
         quiet phase, whose plan (blind to the last writes) then counted as quiet; faults and stale \
         views now stop when the quiet phase starts",
    ),
    (
        "N19",
        "found by the CI campaign of commit d578bfd: a protected slice moved while busy (a protected \
         new copy made, the old one held), then moved back: the old copy, desired again, is stamped \
         too, and the copy just made is now the leftover. Partly fixed: a protected leftover is \
         lifted in place when its replica's copy in the new place runs and is itself stamped \
         (`protected_live`, then the delete); when every copy is protected and none stands where \
         the Target now points, only a person can choose (the plan refuses each, `protected`), and \
         the oracle takes that as by design",
    ),
];

/// The defect a violation shows, or `new`.
pub fn classify(v: &Violation) -> &'static str {
    match v.invariant {
        // A scale-down that kills a busy replica's pod without consent is
        // 35.6 whether or not an idle replica was kept beside it.
        "I1" if v.has("scale_down_busy") || v.has("reason=replica_not_desired") => "35.6",
        "I1" if v.has("kube=no_token") => "35.2",
        "I1" if v.has("reason=moved") || v.has("cluster_not_named") => "35.1",
        "I2" if v.has("kind=resource_policy") => "35.10",
        "I2" if v.detail.contains("deleted pool") && v.detail.contains("made by Source") => "N4",
        "I1" if v.has("workload_live_released") || v.has("reason=workload_ended") => "36.1",
        "I1" if v.has("reason=destroy") => "N3",
        "I1" if v.has("reason=not_in_specs") => "N7",
        "I2" if v.has("workload_takeover") => "36.2",
        "I6" => "N5",
        "I3" if v.has("stale_view") => "N6",
        "I4" if v.has("leak") && v.has("workload") => "N1",
        "I4" if v.has("protected_copy_stale_view") => "N15",
        "I4" if v.has("leak") || v.has("duplicate") => "N2",
        _ => "new",
    }
}

/// One row of `regressions.txt`: `DEFECT SEED SEEDS_TO_FIND STATUS`.
#[derive(Debug, Clone)]
pub struct Regression {
    pub defect: String,
    pub seed: u64,
    pub seeds_to_find: u64,
    /// `open`: not fixed yet (its seed must still find it); else `fixed`.
    pub open: bool,
}

pub const TABLE: &str = include_str!("regressions.txt");

pub fn regressions() -> Vec<Regression> {
    TABLE
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Regression {
                defect: f[0].to_string(),
                seed: crate::parse_seed(f[1]).expect("a seed in regressions.txt"),
                seeds_to_find: f[2].parse().expect("a count in regressions.txt"),
                open: match f.get(3).copied() {
                    Some("open") => true,
                    Some("fixed") => false,
                    other => {
                        panic!("regressions.txt: status {other:?} is neither open nor fixed: {l}")
                    }
                },
            }
        })
        .collect()
}

/// The defects still open (the table's `open` rows): the CI campaign
/// reports their hits without failing; anything else it finds fails it.
pub fn open_defects() -> std::collections::BTreeSet<String> {
    regressions()
        .into_iter()
        .filter(|r| r.open)
        .map(|r| r.defect)
        .collect()
}
