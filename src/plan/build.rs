//! The planner's decisions, one phase at a time, the way Terraform's plan
//! walker decides once per node: what is desired and what could not be
//! observed ([`Planner::new`]), names two slices would share
//! ([`Planner::name_collisions`]), one decision per desired resource
//! ([`Planner::decide_desired`]), resources that go with a dependency
//! created again ([`Planner::cascade_dependents`]), Nodes that will not
//! join by themselves ([`Planner::announce_lost_nodes`]), one decision per
//! owned live resource no longer desired ([`Planner::decide_orphan`]), the
//! rest of a refused slice replica held back ([`hold_back`]), the safety
//! rails over the whole plan ([`Planner::safety_rails`]), and the plan in
//! the order it runs ([`Planner::assemble`]).

use std::collections::{BTreeMap, BTreeSet};

use super::ownership::Ownership;
use super::{
    Action, ActionKind, Body, Comparison, Deferred, Desired, Inventory, Kind, KindId, LiveResource,
    LiveState, OperationRecord, Owners, Plan, PlanError, PlanMode, PlanOptions, Reason, Refusal,
    ResourceId, Scope, SliceRef, Summary, Undiscovered, Unmanaged, UnobservedTarget, delete_reason,
    disruption, empty_target, lost_nodes_note, other_source, other_source_refusal,
    owner_change_hint, protected, protection_unknown, rank_str, refusal, renames,
    render_fleet_settling, replace_reason, replica_indices, stems, target_removed,
};
use crate::spec::Fleet;

/// (owner id, slice, replica): a slice replica across owners.
type ReplicaKey = (String, String, u32);

/// What the phases read: the fleet, the inventory, the kinds, and what is
/// worked out from them once.
pub(super) struct Planner<'a> {
    fleet: &'a Fleet,
    inv: &'a Inventory,
    kinds: &'a [&'a dyn Kind],
    opts: &'a PlanOptions,
    mode: PlanMode,
    owners: Owners,
    /// Slice replica → the name stem its resources render under (declared
    /// renames).
    stems: BTreeMap<(String, u32), String>,
    /// What the specs render, in scopes that could be observed.
    desired: Vec<Desired>,
    /// Indices into `desired`, sorted by id: whether a resource is desired
    /// is a binary search ([`Planner::wanted`]), with no copy of every id.
    wanted: Vec<usize>,
    deferred: Vec<Deferred>,
    /// Targets that could not be observed, by name (see
    /// [`Planner::unobserved_targets`]).
    unobserved: BTreeMap<String, UnobservedTarget>,
    /// Per scope an unobserved Target needs: the owner ids of the
    /// unobserved Targets there (what may be theirs is not touched).
    guarded: BTreeMap<Scope, BTreeSet<String>>,
    /// Live resources by scope, kind and name (in [`ResourceId`]'s order),
    /// the scope borrowed from the inventory rather than copied per resource.
    live_by_id: BTreeMap<LiveKey<'a>, &'a LiveResource>,
    /// Per owned slice replica: how many hosts carry its per-host
    /// protection stamp (a self-managed slice's Nodes).
    stamped_hosts: BTreeMap<ReplicaKey, u32>,
    /// Per owned slice replica: how many hosts run (its MIG's RUNNING VMs),
    /// where, and in which group.
    running_hosts: BTreeMap<ReplicaKey, (u32, &'a Scope, String)>,
    /// The operation running on each resource (the first listed, as
    /// [`Inventory::running_operation`] finds it): one index, so that
    /// looking up every resource is not a scan of every operation.
    running_ops: BTreeMap<(KindId, &'a Scope, &'a str), &'a OperationRecord>,
    /// The workload source's decisions ([`crate::workload::derive`]).
    pub(super) demand: crate::workload::Demand,
    /// (Target, slice name) of the live workload slices: pruned only when
    /// [`Planner::demand`] releases them, never because the specs lack them.
    pub(super) workload_live: BTreeSet<(String, String)>,
}

/// The live workload slices of the fleet's Targets (owned node pools
/// labelled `slicectl.dev/source: workload`).
pub(super) fn live_workload_slices(
    fleet: &Fleet,
    inv: &Inventory,
    kinds: &[&dyn Kind],
) -> Vec<crate::workload::LiveSlice> {
    let owners = Owners::of(fleet, kinds);
    let mut out = Vec::new();
    for kind in kinds {
        for l in inv.live(kind.id()) {
            let Some((origin, chips)) = kind.workload_slice(&l.body) else {
                continue;
            };
            let Some(o) = kind
                .ownership(&l.body)
                .filter(|o| owners.owns(&l.scope, Some(o)))
            else {
                continue;
            };
            out.push(crate::workload::LiveSlice {
                target: o.target.unwrap_or_default(),
                slice: o.slice,
                pool: kind.name(&l.body),
                origin,
                chips,
            });
        }
    }
    out
}

/// [`crate::workload::derive`] over an observation.
pub(super) fn derive_demand(
    fleet: &Fleet,
    inv: &Inventory,
    kinds: &[&dyn Kind],
) -> crate::workload::Demand {
    let live = live_workload_slices(fleet, inv, kinds);
    let now = inv
        .workloads
        .observed_at
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    crate::workload::derive(fleet, &inv.demand, &live, &inv.workloads, now)
}

/// What the phases decide.
#[derive(Default)]
pub(super) struct Decisions<'d> {
    actions: Vec<Action>,
    unmanaged: Vec<Unmanaged>,
    /// Desired resources waiting on what slicectl does not drive
    /// ([`Kind::unjoined`]).
    unjoined: Vec<Unmanaged>,
    refused: Vec<Refusal>,
    errors: Vec<PlanError>,
    /// Unchanged desired resources that go with their dependencies, looked
    /// at again once every action is known.
    unchanged: Vec<(&'d Desired, &'d LiveResource)>,
    /// Owned live resources seen (for the empty-source guard's message).
    owned_live: usize,
    /// Per unobserved Target: its live resources seen and left untouched.
    untouched: BTreeMap<String, usize>,
    /// Steps held by a disruption policy.
    held: Vec<super::workload::Held>,
    /// Nodes cordoned for a drain no step plans any more.
    released: Vec<super::workload::Release>,
    /// Sharded: slice replicas that are another replica's business
    /// ([`super::elsewhere`]); all their actions and refusals are dropped.
    elsewhere: BTreeSet<(String, u32)>,
}

/// A live resource's key in [`Planner`]'s index: scope, kind, name.
type LiveKey<'a> = (&'a Scope, KindId, String);

/// Indices into `desired`, sorted by the resources' ids.
fn sorted_by_id(desired: &[Desired]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..desired.len()).collect();
    order.sort_unstable_by(|&a, &b| desired[a].id.cmp(&desired[b].id));
    order
}

/// Builds the plan: the phases in order.
pub(super) fn build(
    fleet: &Fleet,
    inv: &Inventory,
    kinds: &[&dyn Kind],
    opts: &PlanOptions,
    mode: PlanMode,
) -> Result<Plan, PlanError> {
    // The observation's fingerprint depends on no decision: a second thread
    // computes it while the planner decides (a tenth of a large plan's CPU,
    // off its critical path).
    std::thread::scope(|s| {
        let fingerprint = s.spawn(|| inv.fingerprint(kinds));
        let plan = decide(fleet, inv, kinds, opts, mode);
        // A fingerprint that panicked panics here, as it would have unthreaded.
        let fingerprint = fingerprint
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        plan.map(|p| Plan {
            observed_fingerprint: fingerprint,
            ..p
        })
    })
}

/// The plan's decisions ([`build`]), its fingerprint left empty.
fn decide(
    fleet: &Fleet,
    inv: &Inventory,
    kinds: &[&dyn Kind],
    opts: &PlanOptions,
    mode: PlanMode,
) -> Result<Plan, PlanError> {
    // Workload-driven slices join the fleet for this plan only (an apply;
    // a destroy tears down what is owned, workload slices included).
    let demand = match mode {
        PlanMode::Apply => derive_demand(fleet, inv, kinds),
        PlanMode::Destroy => crate::workload::Demand::default(),
    };
    let extended;
    let fleet = if demand.slices.is_empty() {
        fleet
    } else {
        extended = demand.extend(fleet);
        &extended
    };
    let mut planner = Planner::new(fleet, inv, kinds, opts, mode);
    planner.workload_live = live_workload_slices(fleet, inv, kinds)
        .into_iter()
        .map(|l| (l.target, l.slice))
        .collect();
    planner.demand = demand;
    let mut out = Decisions {
        errors: planner.name_collisions(),
        ..Decisions::default()
    };
    for d in &planner.desired {
        planner.decide_desired(d, &mut out);
    }
    planner.cascade_dependents(&mut out);
    planner.announce_lost_nodes(&mut out.actions);
    planner.note_unjoined(&mut out);
    for kind in kinds.iter().filter(|k| !k.observe_only()) {
        for l in inv.live(kind.id()) {
            planner.decide_orphan(*kind, l, &mut out);
        }
    }
    drop_elsewhere(&mut out);
    planner.no_blind_protected_creates(&mut out);
    hold_back(&mut out.actions, &mut out.refused);
    planner.respect_workloads(&mut out);
    planner.safety_rails(&mut out)?;
    Ok(planner.assemble(out))
}

impl<'a> Planner<'a> {
    /// What is desired (rendered at the replica indices kept, under the
    /// declared renames' stems), what could not be observed, the live
    /// resources by id, and the host counts of each owned slice replica.
    pub(super) fn new(
        fleet: &'a Fleet,
        inv: &'a Inventory,
        kinds: &'a [&'a dyn Kind],
        opts: &'a PlanOptions,
        mode: PlanMode,
    ) -> Planner<'a> {
        let indices = replica_indices(fleet, inv, kinds);
        let stems = match mode {
            PlanMode::Apply => stems(fleet, inv, kinds, &indices),
            PlanMode::Destroy => BTreeMap::new(),
        };
        // Kinds slicectl only observes (a GKE slice's Nodes) are never
        // planned: not even rendered, unless a deferred scope counts them
        // below (10,000 GKE slices would render 10,000 bodies to drop).
        let planned: Vec<&dyn Kind> = kinds
            .iter()
            .copied()
            .filter(|k| !k.observe_only() || !inv.deferred.is_empty())
            .collect();
        let mut planner = Planner {
            fleet,
            inv,
            kinds,
            opts,
            mode,
            owners: Owners::of(fleet, kinds),
            stems,
            wanted: Vec::new(),
            desired: Vec::new(),
            deferred: Vec::new(),
            unobserved: BTreeMap::new(),
            guarded: BTreeMap::new(),
            live_by_id: BTreeMap::new(),
            stamped_hosts: BTreeMap::new(),
            running_hosts: BTreeMap::new(),
            running_ops: BTreeMap::new(),
            demand: crate::workload::Demand::default(),
            workload_live: BTreeSet::new(),
        };
        for (kind, ops) in &inv.operations {
            for o in ops.iter().filter(|o| o.running) {
                planner
                    .running_ops
                    .entry((*kind, &o.scope, o.target.as_str()))
                    .or_insert(o);
            }
        }
        planner.index_live();
        let mut desired: Vec<Desired> = match mode {
            PlanMode::Apply => {
                render_fleet_settling(fleet, &planned, &indices, &planner.stems, &mut |kind, d| {
                    planner.settle(kind, d)
                })
            }
            PlanMode::Destroy => Vec::new(),
        };
        // Scopes that could not be observed are left out, and said so.
        let mut deferred: Vec<Deferred> = inv
            .deferred
            .iter()
            .map(|(scope, reason)| Deferred {
                scope: scope.clone(),
                reason: reason.clone(),
                resources: desired.iter().filter(|d| &d.id.scope == scope).count(),
            })
            .collect();
        deferred.sort_by(|a, b| a.scope.cmp(&b.scope));
        desired.retain(|d| !inv.deferred.contains_key(&d.id.scope));
        // Kinds slicectl only observes (a GKE slice's Nodes) are never planned.
        desired.retain(|d| {
            !kinds
                .iter()
                .any(|k| k.id() == d.id.kind && k.observe_only())
        });
        // Targets that could not be observed get no action at all: their
        // slices' resources are left out wherever they would live, and so
        // is anything in a scope that failed.
        let (unobserved, guarded) = Planner::unobserved_targets(fleet, inv, kinds);
        if !inv.unobserved.is_empty() {
            // A resource shared by a scope's slices (the device plugin) is
            // one of theirs too when only unobserved Targets need its scope.
            let observed_scopes: BTreeSet<Scope> = fleet
                .targets
                .iter()
                .filter(|(name, _)| !unobserved.contains_key(*name))
                .flat_map(|(_, t)| Owners::scopes_of(t, kinds))
                .collect();
            desired.retain(|d| {
                !inv.unobserved.contains_key(&d.id.scope)
                    && !fleet
                        .slices
                        .get(&d.owner.slice)
                        .is_some_and(|s| unobserved.contains_key(&s.spec.target))
                    && (!d.owner.is_shared() || observed_scopes.contains(&d.id.scope))
            });
        }
        planner.wanted = sorted_by_id(&desired);
        planner.desired = desired;
        planner.deferred = deferred;
        planner.unobserved = unobserved;
        planner.guarded = guarded;
        planner
    }

    /// Called on each desired resource as it is rendered: one that is
    /// already in sync (its live resource is this reconciler's, healthy,
    /// with no operation running on it, and compares equal) takes the live
    /// body in place of the rendered one, which is dropped at once. A
    /// desired body that *is* its live body ([`Planner::settled`]) is in
    /// sync without another comparison, and nothing reads its rendered
    /// fields again: only actions carry desired bodies. At 10,000 node
    /// pools this keeps the rendered bodies (some 16 MB) from ever being
    /// held together with the live ones. Left as rendered: shared
    /// resources, kinds replaced with their dependencies (an unchanged one
    /// may be replaced later, from its rendered body), resources waiting
    /// on VMs to join, and resources being adopted.
    fn settle(&self, kind: &dyn Kind, d: &mut Desired) {
        if kind.shared()
            || kind.observe_only()
            || kind.replaced_with_dependencies()
            || self.inv.adopting.contains(&d.id)
            || self.running_operation(&d.id).is_some()
        {
            return;
        }
        let Some(live) = self.live(&d.id) else {
            return;
        };
        if kind.state(&live.body) != LiveState::Ok
            || !self
                .owners
                .owns(&d.id.scope, kind.ownership(&live.body).as_ref())
            || kind.unjoined(d, Some(&live.body)).is_some()
            || !matches!(kind.compare(d, &live.body), Comparison::Equal)
        {
            return;
        }
        d.body = live.body.clone();
    }

    /// Whether `d` was found in sync as it was rendered
    /// ([`Planner::settle`]): its body is the live body itself.
    fn settled(d: &Desired, live: &LiveResource) -> bool {
        std::sync::Arc::ptr_eq(&d.body, &live.body)
    }

    /// The Targets that need a scope that could not be observed (each with
    /// its first failed scope, its cause and its slices), and per scope of
    /// theirs the owner ids of the unobserved Targets that need it.
    fn unobserved_targets(
        fleet: &Fleet,
        inv: &Inventory,
        kinds: &[&dyn Kind],
    ) -> (
        BTreeMap<String, UnobservedTarget>,
        BTreeMap<Scope, BTreeSet<String>>,
    ) {
        let mut out = BTreeMap::new();
        let mut guarded: BTreeMap<Scope, BTreeSet<String>> = BTreeMap::new();
        if inv.unobserved.is_empty() {
            return (out, guarded);
        }
        for (name, t) in &fleet.targets {
            let scopes = Owners::scopes_of(t, kinds);
            let Some((scope, why)) = scopes
                .iter()
                .find_map(|s| inv.unobserved.get(s).map(|w| (s, w)))
            else {
                continue;
            };
            for s in &scopes {
                guarded
                    .entry(s.clone())
                    .or_default()
                    .insert(t.spec.owner_id.clone());
            }
            out.insert(
                name.clone(),
                UnobservedTarget {
                    target: name.clone(),
                    scope: scope.clone(),
                    why: why.clone(),
                    slices: fleet
                        .slices
                        .values()
                        .filter(|s| &s.spec.target == name)
                        .map(|s| s.name.clone())
                        .collect(),
                    untouched: 0,
                },
            );
        }
        (out, guarded)
    }

    /// The unobserved Target an owned live resource is (or may be) part of:
    /// the Target of its slice when the slice is in the specs and its
    /// Target is unobserved; none when its Target is observed and the
    /// resource is in one of that Target's scopes; else (a slice no longer
    /// in the specs, a resource shared by a scope's slices, or one left in
    /// a scope its slice moved away from) an unobserved Target of its owner
    /// id that needs its scope, unless the resource names an observed
    /// Target as the one that wrote it. Such a resource is not touched: it
    /// may be what the unobserved Target still needs, and nothing is pruned
    /// from what was not seen.
    fn unobserved_owner(&self, scope: &Scope, o: &Ownership) -> Option<String> {
        if self.unobserved.is_empty() {
            return None;
        }
        if let Some(s) = self.fleet.claimant(&o.slice) {
            if self.unobserved.contains_key(&s.spec.target) {
                return Some(s.spec.target.clone());
            }
            // An observed Target's slice, in a scope of its own: as usual.
            if self
                .fleet
                .targets
                .get(&s.spec.target)
                .is_some_and(|t| Owners::scopes_of(t, self.kinds).contains(scope))
            {
                return None;
            }
            // Elsewhere (moved away from a scope an unobserved Target
            // needs): judged as below.
        }
        let owners = self.guarded.get(scope)?;
        if !owners.contains(&o.owner) {
            return None;
        }
        if let Some(t) = &o.target
            && self.fleet.targets.contains_key(t)
            && !self.unobserved.contains_key(t)
        {
            return None;
        }
        // Which of the unobserved Targets of that owner in this scope: the
        // one it names, else the first.
        o.target
            .clone()
            .filter(|t| self.unobserved.contains_key(t))
            .or_else(|| {
                self.unobserved
                    .values()
                    .find(|u| {
                        self.fleet.targets.get(&u.target).is_some_and(|t| {
                            t.spec.owner_id == o.owner
                                && Owners::scopes_of(t, self.kinds).contains(scope)
                        })
                    })
                    .map(|u| u.target.clone())
            })
    }

    /// Live resources by id, and per owned slice replica how many hosts
    /// carry its protection stamp and how many run: whether the Nodes can
    /// speak for every running host (a MIG without a stamp of its own), and
    /// whether Nodes are lost.
    fn index_live(&mut self) {
        for kind in self.kinds {
            for l in self.inv.live(kind.id()) {
                self.live_by_id
                    .insert((&l.scope, kind.id(), kind.name(&l.body)), l);
                let Some(o) = kind.ownership(&l.body) else {
                    continue;
                };
                if !self.owners.owns(&l.scope, Some(&o)) {
                    continue;
                }
                let key = (o.owner, o.slice, o.replica);
                if let Some(n) = kind.stamped_hosts(&l.body) {
                    *self.stamped_hosts.entry(key.clone()).or_default() += n;
                }
                if let Some(n) = kind.running_hosts(&l.body) {
                    self.running_hosts
                        .insert(key, (n, &l.scope, kind.name(&l.body)));
                }
            }
        }
    }

    /// The operation running on resource `id`, if any.
    fn running_operation(&self, id: &ResourceId) -> Option<&'a OperationRecord> {
        self.running_ops
            .get(&(id.kind, &id.scope, id.name.as_str()))
            .copied()
    }

    /// The live resource `id`, if any.
    fn live(&self, id: &ResourceId) -> Option<&'a LiveResource> {
        self.live_by_id
            .get(&(&id.scope, id.kind, id.name.clone()))
            .copied()
    }

    /// Whether `id` is desired (rendered from the specs).
    fn wanted(&self, id: &ResourceId) -> bool {
        self.wanted
            .binary_search_by(|&i| self.desired[i].id.cmp(id))
            .is_ok()
    }

    /// Whether `id` is live and not this reconciler's (a released MIG).
    fn released(&self, id: &ResourceId) -> bool {
        self.live(id).is_some_and(|l| {
            self.kind_of(id.kind)
                .is_some_and(|k| k.ownership(&l.body).is_none())
        })
    }

    fn kind_of(&self, id: KindId) -> Option<&'a dyn Kind> {
        self.kinds.iter().copied().find(|k| k.id() == id)
    }

    /// Validation rejects slices whose names collide (see
    /// `spec::validate::check_name_collisions`); refuse here too rather than
    /// trust it, since two slices sharing a name would fight over one pool.
    pub(super) fn name_collisions(&self) -> Vec<PlanError> {
        let mut errors = Vec::new();
        let mut seen: BTreeMap<&ResourceId, &SliceRef> = BTreeMap::new();
        for d in &self.desired {
            if let Some(first) = seen.insert(&d.id, &d.owner) {
                errors.push(PlanError::NameCollision {
                    kind: "resource",
                    name: d.id.name.clone(),
                    scope: d.id.scope.to_string(),
                    note: format!(
                        "both slice {} replica {} and slice {} replica {} render to this name",
                        first.slice, first.replica, d.owner.slice, d.owner.replica
                    ),
                });
            }
        }
        errors
    }

    /// The one decision for a desired resource: create it, leave it, wait
    /// on it, update or replace it, or refuse (someone else's, another
    /// source's, protected).
    pub(super) fn decide_desired<'d>(&self, d: &'d Desired, out: &mut Decisions<'d>)
    where
        'a: 'd,
    {
        let Some(kind) = self.kind_of(d.id.kind) else {
            return;
        };
        let running = self.running_operation(&d.id);
        let op = running.map(|o| o.name.clone());
        let Some(live) = self.live(&d.id) else {
            out.actions.push(action(
                d,
                kind,
                ActionKind::Create,
                Reason::Missing,
                None,
                Some(d.body.clone()),
                op,
            ));
            return;
        };
        let own = kind.ownership(&live.body);
        if !self.owners.owns(&d.id.scope, own.as_ref()) && !self.inv.adopting.contains(&d.id) {
            self.not_ours(d, kind, live, own.as_ref(), out);
            return;
        }
        if let Some(o) = own.as_ref()
            && let Some(t) = other_source(self.fleet, o)
        {
            let a = action(
                d,
                kind,
                ActionKind::Update,
                Reason::InPlaceFieldsChanged { groups: Vec::new() },
                None,
                None,
                None,
            );
            let msg = other_source_refusal(&a, o, t, self.mode);
            out.refused.push(refusal(&a, "other_source", msg));
            return;
        }
        let Some(planned) = self.diff(d, kind, live, own.as_ref(), out) else {
            return;
        };
        if planned.action == ActionKind::Replace {
            self.guard_replacement(d, kind, live, own.as_ref(), planned, out);
        } else {
            out.actions.push(planned);
        }
    }

    /// A desired name held by a resource this reconciler does not own: a
    /// shared one (the cluster's device plugin) is used as it is; anything
    /// else refuses the create (`name_taken`), saying whose it is.
    fn not_ours(
        &self,
        d: &Desired,
        kind: &dyn Kind,
        live: &LiveResource,
        own: Option<&Ownership>,
        out: &mut Decisions<'_>,
    ) {
        if kind.shared() {
            out.unmanaged.push(Unmanaged {
                kind: kind.id().as_str(),
                name: d.id.name.clone(),
                scope: d.id.scope.clone(),
                note: format!(
                    "{}; shared by every slice on this cluster, so slicectl uses it as it is",
                    kind.unmanaged_note(&live.body)
                ),
            });
            return;
        }
        let a = action(
            d,
            kind,
            ActionKind::Create,
            Reason::Missing,
            None,
            None,
            None,
        );
        let msg = PlanError::NameTaken {
            kind: kind.noun(),
            name: d.id.name.clone(),
            scope: d.id.scope.to_string(),
            note: kind.unmanaged_note(&live.body),
            hint: format!(
                "{}{}",
                kind.reclaim_hint(d, &live.body),
                owner_change_hint(d, own, kind.owner_relabels_in_place())
            ),
        };
        out.refused.push(refusal(&a, "name_taken", msg.to_string()));
    }

    /// The action that brings an owned live resource to `d`, from its state
    /// and the kind's comparison; `None` when it is in sync (an unchanged
    /// resource that goes with its dependencies is kept for
    /// [`Planner::cascade_dependents`]).
    fn diff<'d>(
        &self,
        d: &'d Desired,
        kind: &dyn Kind,
        live: &'d LiveResource,
        own: Option<&Ownership>,
        out: &mut Decisions<'d>,
    ) -> Option<Action> {
        let running = self.running_operation(&d.id);
        let op = running.map(|o| o.name.clone());
        // Shown only beside an action: a resource in sync (nearly all of a
        // large fleet) never has its live body rendered for display.
        let before = || Some(kind.display_live(&live.body, Some(d)));
        let wait = |o: &OperationRecord| Reason::OperationInFlight {
            operation: o.name.clone(),
            operation_type: o.operation_type.clone(),
        };
        let planned = match kind.state(&live.body) {
            LiveState::Stopping => action(
                d,
                kind,
                ActionKind::Create,
                Reason::RecreateAfterDelete,
                None,
                Some(d.body.clone()),
                op,
            ),
            // An operation still runs on it (GKE retrying a stockout that
            // left the pool RUNNING_WITH_ERROR, say): wait for it, as for a
            // healthy resource, rather than replace under it.
            LiveState::Error { .. } if running.is_some() => action(
                d,
                kind,
                ActionKind::Wait,
                running.map(wait).unwrap_or(Reason::Missing),
                before(),
                None,
                op,
            ),
            LiveState::Error { status, detail } => {
                let mut a = action(
                    d,
                    kind,
                    ActionKind::Replace,
                    Reason::ErrorState { status, detail },
                    before(),
                    Some(d.body.clone()),
                    None,
                );
                a.changes = match kind.compare(d, &live.body) {
                    Comparison::Equal => Vec::new(),
                    Comparison::Update { changes, .. } | Comparison::Replace { changes, .. } => {
                        changes
                    }
                };
                a
            }
            LiveState::Ok => match if Planner::settled(d, live) {
                Comparison::Equal
            } else {
                kind.compare(d, &live.body)
            } {
                Comparison::Equal if running.is_none() && kind.replaced_with_dependencies() => {
                    out.unchanged.push((d, live));
                    return None;
                }
                Comparison::Equal => {
                    let o = running?;
                    action(d, kind, ActionKind::Wait, wait(o), before(), None, op)
                }
                Comparison::Update { changes, groups } => Action {
                    changes,
                    groups: groups.clone(),
                    ..action(
                        d,
                        kind,
                        ActionKind::Update,
                        update_reason(d, kind, own, &groups),
                        before(),
                        Some(d.body.clone()),
                        op,
                    )
                },
                Comparison::Replace { changes, hash_only } => Action {
                    reason: replace_reason(kind, &changes, hash_only),
                    changes,
                    ..action(
                        d,
                        kind,
                        ActionKind::Replace,
                        Reason::StoredHashDiffers,
                        before(),
                        Some(d.body.clone()),
                        op,
                    )
                },
            },
        };
        Some(planned)
    }

    /// A replacement goes ahead unless the spec or the live stamp protects
    /// the slice. When only the live stamp does (the spec lifted it), this
    /// apply lifts the stamp in place and the next one replaces: protection
    /// always takes two applies to remove, so one commit cannot bypass it.
    fn guard_replacement(
        &self,
        d: &Desired,
        kind: &dyn Kind,
        live: &LiveResource,
        own: Option<&Ownership>,
        planned: Action,
        out: &mut Decisions<'_>,
    ) {
        let live_protected = own.is_some_and(|o| o.prevent_destroy);
        if !d.prevent_destroy && !live_protected {
            out.actions.push(planned);
            return;
        }
        if d.prevent_destroy {
            let mut msg = protected(&planned, self.mode, true).to_string();
            if let LiveState::Error { status, .. } = kind.state(&live.body) {
                msg.push_str(&kind.error_recovery_hint(&d.id, &status));
            }
            out.refused.push(refusal(&planned, "protected", msg));
            return;
        }
        match kind.lift_protection(d, &live.body) {
            Some((body, Comparison::Update { changes, groups })) => {
                out.refused.push(refusal(
                    &planned,
                    "protected_live",
                    format!(
                        "{} ({}) is still protected by preventDestroy on the live {}, so this apply does not replace it ({}). \
                         Your spec no longer protects it: this apply lifts the protection in place; apply again to replace it",
                        planned.address(),
                        planned.id.name,
                        kind.noun(),
                        planned.reason_text()
                    ),
                ));
                out.actions.push(lifting(planned, body, changes, groups));
            }
            _ => {
                let msg = protected(&planned, self.mode, true).to_string();
                out.refused.push(refusal(&planned, "protected", msg));
            }
        }
    }

    /// The dependency a resource of `owner` and `kind` is made from, when
    /// that dependency is created again or replaced: `(its noun, replaced)`.
    fn goes_with(
        &self,
        owner: &SliceRef,
        kind: &dyn Kind,
        actions: &[Action],
    ) -> Option<(&'static str, bool)> {
        actions
            .iter()
            .find(|a| {
                &a.owner == owner
                    && kind.depends_on().contains(&a.id.kind)
                    && self.kind_of(a.id.kind).is_some_and(|k| !k.shared())
                    && matches!(a.action, ActionKind::Create | ActionKind::Replace)
            })
            .map(|a| (a.noun, a.action == ActionKind::Replace))
    }

    /// A resource made from one that is created again or replaced goes with
    /// it, whether it was unchanged or only to be updated.
    pub(super) fn cascade_dependents(&self, out: &mut Decisions<'_>) {
        let how = |replaced: bool| {
            if replaced {
                "replaced"
            } else {
                "created again"
            }
        };
        let snapshot: Vec<(usize, &'static str, bool)> = out
            .actions
            .iter()
            .enumerate()
            .filter(|(_, a)| a.action == ActionKind::Update)
            .filter_map(|(i, a)| {
                let kind = self
                    .kind_of(a.id.kind)
                    .filter(|k| k.replaced_with_dependencies())?;
                let (noun, replaced) = self.goes_with(&a.owner, kind, &out.actions)?;
                Some((i, noun, replaced))
            })
            .collect();
        for (i, noun, replaced) in snapshot {
            let a = &mut out.actions[i];
            a.action = ActionKind::Replace;
            a.groups.clear();
            a.reason = Reason::DependencyReplaced {
                noun,
                how: how(replaced),
            };
        }
        for (d, live) in std::mem::take(&mut out.unchanged) {
            let Some(kind) = self.kind_of(d.id.kind) else {
                continue;
            };
            let Some((dep_noun, replaced)) = self.goes_with(&d.owner, kind, &out.actions) else {
                continue;
            };
            let planned = action(
                d,
                kind,
                ActionKind::Replace,
                Reason::DependencyReplaced {
                    noun: dep_noun,
                    how: how(replaced),
                },
                Some(kind.display_live(&live.body, Some(d))),
                Some(d.body.clone()),
                None,
            );
            let stamped = kind
                .ownership(&live.body)
                .is_some_and(|o| o.prevent_destroy);
            if d.prevent_destroy || stamped {
                let msg = protected(&planned, self.mode, true).to_string();
                out.refused.push(refusal(&planned, "protected", msg));
                continue;
            }
            out.actions.push(planned);
        }
    }

    /// Nodes planned to join while some of the replica's VMs already run:
    /// say that a VM whose Node was deleted will not join again by itself,
    /// and plan its recreation where the kind can.
    pub(super) fn announce_lost_nodes(&self, actions: &mut [Action]) {
        for a in actions {
            if !matches!(a.action, ActionKind::Create | ActionKind::Update)
                || !self.kind_of(a.id.kind).is_some_and(|k| k.reports_nodes())
            {
                continue;
            }
            let Some(owner) = self
                .fleet
                .slices
                .get(&a.owner.slice)
                .and_then(|s| self.fleet.target_of(s))
                .map(|t| t.spec.owner_id.clone())
            else {
                continue;
            };
            let key = (owner, a.owner.slice.clone(), a.owner.replica);
            let seen = self.stamped_hosts.get(&key).copied().unwrap_or(0);
            let Some((running, scope, mig)) = self.running_hosts.get(&key).filter(|r| r.0 > seen)
            else {
                continue;
            };
            let live = self.live(&a.id).map(|l| &l.body);
            match self
                .kind_of(a.id.kind)
                .and_then(|k| k.recreate_lost_hosts(a.desired.as_ref(), live))
            {
                // The fix is planned, with the usual consent, and counted as
                // a disruption: the executor recreates only VMs that joined
                // and lost their Node.
                Some(group) => {
                    a.groups.insert(group);
                    a.reason = Reason::NodeLost {
                        mig: mig.clone(),
                        running: *running,
                        nodes: seen,
                    };
                }
                None => a.changes.push(lost_nodes_note(*running, seen, scope, mig)),
            }
        }
    }

    /// Desired resources that wait only on what slicectl does not drive (a
    /// brought template's VMs that have not joined, [`Kind::unjoined`]):
    /// while nothing they depend on changes in their replica, their create
    /// step (which could only wait until its timeout) is left out and the
    /// note shown; a step planned for anything else (labels) stays.
    pub(super) fn note_unjoined(&self, out: &mut Decisions<'_>) {
        for d in &self.desired {
            let Some(kind) = self.kind_of(d.id.kind) else {
                continue;
            };
            let Some(note) = kind.unjoined(d, self.live(&d.id).map(|l| &l.body)) else {
                continue;
            };
            let deps = kind.depends_on();
            let moving = out
                .actions
                .iter()
                .any(|a| a.owner == d.owner && deps.contains(&a.id.kind))
                || out.held.iter().any(|h| {
                    h.slice == d.owner.slice
                        && h.replica == d.owner.replica
                        && deps.iter().any(|k| k.as_str() == h.kind)
                });
            if moving {
                continue;
            }
            out.actions
                .retain(|a| !(a.id == d.id && a.action == ActionKind::Create));
            out.unjoined.push(Unmanaged {
                kind: kind.id().as_str(),
                name: d.id.name.clone(),
                scope: d.id.scope.clone(),
                note,
            });
        }
    }

    /// The one decision for a live resource: not owned → listed as
    /// unmanaged (where a Target names its scope); owned and desired →
    /// decided above; owned and not desired → deleted, unless a guard
    /// refuses (another source's, protected, the per-Target empty-source
    /// guard, a removed Target, protection unknown).
    pub(super) fn decide_orphan(&self, kind: &dyn Kind, l: &LiveResource, out: &mut Decisions<'_>) {
        let name = kind.name(&l.body);
        let own = kind.ownership(&l.body);
        // Left behind: in a cluster (or zone) no Target names any more
        // (observed only because it holds this fleet's resources).
        let left = self.owners.left_behind(&l.scope, own.as_ref());
        let Some(o) = own.filter(|o| left || self.owners.owns(&l.scope, Some(o))) else {
            // Someone else's resources in a scope no Target names are none
            // of this fleet's business: not even listed.
            if kind.lists_unmanaged() && self.owners.by_scope.contains_key(&l.scope) {
                out.unmanaged.push(Unmanaged {
                    kind: kind.id().as_str(),
                    name,
                    scope: l.scope.clone(),
                    note: kind.unmanaged_note(&l.body),
                });
            }
            return;
        };
        let id = ResourceId {
            scope: l.scope.clone(),
            kind: kind.id(),
            name,
        };
        if !self.wanted(&id) && super::elsewhere(self.fleet, &self.owners, &l.scope, &o) {
            out.elsewhere.insert((o.slice.clone(), o.replica));
            return;
        }
        out.owned_live += 1;
        if self.wanted(&id) {
            return;
        }
        // A template or policy a MIG that stays still uses (an adopted
        // slice's brought template) is deleted with that MIG, never before
        // it (Compute Engine refuses it while the MIG uses it); and what a
        // live MIG slicectl no longer owns still uses (a released slice's
        // device plugin) is not slicectl's to delete.
        // A MIG replaced onto a template (or policy) of its own no longer
        // uses the one it held: that one is deleted, after the old MIG
        // (an adopted slice that brought its template and now renders one).
        let moves_off = |m: &ResourceId| {
            out.actions.iter().any(|a| {
                &a.id == m
                    && a.action == ActionKind::Replace
                    && a.desired
                        .as_ref()
                        .zip(self.kind_of(m.kind))
                        .is_some_and(|(d, k)| !k.uses(d, &id))
            })
        };
        if self
            .inv
            .held
            .get(&id)
            .is_some_and(|m| (self.wanted(m) && !moves_off(m)) || self.released(m))
        {
            return;
        }
        if let Some(t) = self.unobserved_owner(&l.scope, &o) {
            *out.untouched.entry(t).or_default() += 1;
            return;
        }
        // A workload slice (and what goes with it) is pruned only by the
        // workload source's own decision: never because the specs lack it.
        let target = o.target.clone().unwrap_or_default();
        if self.mode == PlanMode::Apply
            && self
                .workload_live
                .contains(&(target.clone(), o.slice.clone()))
        {
            let Some(r) = self.demand.release_of(&target, &o.slice) else {
                return;
            };
            let mut a = self.orphan_action(kind, l, id, &o);
            if a.action == ActionKind::Delete {
                a.reason = Reason::WorkloadEnded { why: r.why.clone() };
            }
            out.actions.push(a);
            return;
        }
        let a = self.orphan_action(kind, l, id, &o);
        match self.orphan_guard(kind, l, &a, &o, left) {
            Some((code, msg)) => {
                let lift = (code == "protected" && kind.unprotect(&l.body).is_some())
                    .then(|| self.lifts_leftover(kind, l, &a, &o))
                    .flatten();
                match lift {
                    Some(why) => self.lift_leftover(kind, l, a, why, out),
                    None => out.refused.push(refusal(&a, code, msg)),
                }
            }
            None => out.actions.push(a),
        }
    }

    /// Why the live stamp of a copy its slice left behind is lifted in
    /// place, if it is: an apply, the slice in the specs (same owner), and
    /// either its spec no longer protects it, or (a moved replica) the
    /// copy in its new place is live, usable and itself stamped: the
    /// leftover is then redundant, and protection stays on the copy that
    /// holds the slice. (A slice removed from the specs is lifted by
    /// putting it back unprotected, as the refusal says.)
    fn lifts_leftover(
        &self,
        kind: &dyn Kind,
        l: &LiveResource,
        a: &Action,
        o: &Ownership,
    ) -> Option<String> {
        if self.mode != PlanMode::Apply {
            return None;
        }
        let spec = self.fleet.slices.get(&o.slice).filter(|s| {
            self.fleet
                .targets
                .get(&s.spec.target)
                .is_some_and(|t| t.spec.owner_id == o.owner)
        })?;
        if !spec.spec.lifecycle.prevent_destroy {
            return Some("Your spec no longer protects the slice".to_string());
        }
        if !matches!(a.reason, Reason::Moved { .. }) {
            return None;
        }
        let standing = self.desired.iter().find(|d| {
            d.id.kind == kind.id()
                && d.owner.slice == o.slice
                && d.owner.replica == o.replica
                && d.id.scope != l.scope
                && self.live(&d.id).is_some_and(|x| {
                    kind.state(&x.body) == LiveState::Ok
                        && kind.ownership(&x.body).is_some_and(|w| {
                            w.prevent_destroy
                                && w.owner == o.owner
                                && w.slice == o.slice
                                && w.replica == o.replica
                        })
                })
        })?;
        Some(format!(
            "The replica's copy in its new place ({} in {}) runs and is itself protected: this one is \
             redundant",
            standing.id.name, standing.id.scope
        ))
    }

    /// The stamp of a copy a moved slice left behind, while its spec no
    /// longer protects it: no desired body lifts it (the slice is desired
    /// elsewhere), so this apply lifts it in place and refuses the delete
    /// (`protected_live`); the next apply deletes it, under the gate.
    /// Protection still takes two applies to remove.
    fn lift_leftover(
        &self,
        kind: &dyn Kind,
        l: &LiveResource,
        a: Action,
        why: String,
        out: &mut Decisions<'_>,
    ) {
        let Some((body, Comparison::Update { changes, groups })) = kind.unprotect(&l.body) else {
            return;
        };
        out.refused.push(refusal(
            &a,
            "protected_live",
            format!(
                "{} ({}) is still protected by preventDestroy on the live {} slice {} left behind, so this \
                 apply does not delete it ({}). {why}: this apply lifts the protection in place; apply \
                 again to delete it",
                a.address(),
                a.id.name,
                kind.noun(),
                a.owner.slice,
                a.reason_text()
            ),
        ));
        out.actions.push(lifting(a, body, changes, groups));
    }

    /// What becomes of an owned live resource no longer desired: waited on
    /// while it is being deleted, else deleted (why: see
    /// [`delete_reason`]).
    fn orphan_action(
        &self,
        kind: &dyn Kind,
        l: &LiveResource,
        id: ResourceId,
        o: &Ownership,
    ) -> Action {
        let running = self.running_operation(&id);
        let (action, reason) = if kind.state(&l.body) == LiveState::Stopping {
            (
                ActionKind::Wait,
                Reason::BeingDeleted {
                    operation: running.map(|r| r.name.clone()),
                },
            )
        } else if self.mode == PlanMode::Destroy {
            (ActionKind::Delete, Reason::Destroy)
        } else {
            (
                ActionKind::Delete,
                delete_reason(self.fleet, &self.desired, kind, o),
            )
        };
        Action {
            id,
            owner: SliceRef {
                slice: o.slice.clone(),
                replica: o.replica,
            },
            action,
            reason,
            changes: Vec::new(),
            groups: BTreeSet::new(),
            before: Some(kind.display_live(&l.body, None)),
            desired: None,
            operation: running.map(|r| r.name.clone()),
            timeout: crate::spec::DEFAULT_OPERATION_TIMEOUT,
            noun: kind.noun(),
            disruption: None,
            recheck: None,
        }
    }

    /// The guard that refuses the delete `a` of an owned live resource, if
    /// any: `(code, message)`.
    fn orphan_guard(
        &self,
        kind: &dyn Kind,
        l: &LiveResource,
        a: &Action,
        o: &Ownership,
        left: bool,
    ) -> Option<(&'static str, String)> {
        if a.action != ActionKind::Delete {
            return None;
        }
        let opts = self.opts;
        let not_in_specs = a.reason == Reason::NotInSpecs;
        let spec = self.fleet.slices.get(&a.owner.slice);
        // Another source's slice: refused, in a destroy too; an apply
        // deletes it only with the override (its Target was removed together
        // with its Slices: as the empty-source guard). In a scope no Target
        // names any more, an apply says so (`target_removed`, below).
        let removed_here = left && not_in_specs;
        if let Some(t) = other_source(self.fleet, o)
            && (self.mode == PlanMode::Destroy || (!opts.allow_empty_source && !removed_here))
        {
            return Some(("other_source", other_source_refusal(a, o, t, self.mode)));
        }
        // Every stamp is current (kept in step by each apply), so each
        // protects on its own: a pool's label, a MIG's description, a Node's
        // label.
        if o.prevent_destroy {
            return Some((
                "protected",
                protected(a, self.mode, spec.is_some()).to_string(),
            ));
        }
        if not_in_specs
            && !opts.allow_empty_source
            && !self.no_git_slices()
            && let Some(msg) = empty_target(self.fleet, self.kinds, a, o)
        {
            return Some(("empty_target", msg));
        }
        // Its stamp names a Target these specs still declare (same owner
        // id): the Target was not removed, it moved to another cluster, and
        // the slice was removed from it deliberately. The gate still asks.
        let target_declared = o.target.as_ref().is_some_and(|t| {
            self.fleet
                .targets
                .get(t)
                .is_some_and(|t| t.spec.owner_id == o.owner)
        });
        if left && not_in_specs && !opts.allow_empty_source && !target_declared {
            return Some(("target_removed", target_removed(a, o)));
        }
        // A MIG made before MIGs were stamped says nothing: its Nodes must,
        // one for every running VM.
        let seen = self
            .stamped_hosts
            .get(&(o.owner.clone(), o.slice.clone(), o.replica))
            .copied()
            .unwrap_or(0);
        let running = kind.running_hosts(&l.body).unwrap_or(0);
        if spec.is_none()
            && kind.protection_unrecorded(&l.body)
            && !opts.allow_unverified_delete
            && running > seen
        {
            return Some(("protection_unknown", protection_unknown(a, running, seen)));
        }
        None
    }

    /// Whether the specs define no slice (workload slices added for this
    /// plan do not count: an empty checkout is empty whatever JobSets ask).
    /// Sharded, the whole source counts: a replica whose shards hold no
    /// slice is not reading an empty source while the others' do.
    fn no_git_slices(&self) -> bool {
        self.fleet.slices.values().all(|s| s.workload.is_some())
            && self
                .fleet
                .shard
                .as_ref()
                .is_none_or(|c| c.others.is_empty())
    }

    /// The rails over the whole plan: an apply that would prune while the
    /// specs define no slice, and more destructive actions than allowed.
    /// Every error found (name collisions included) is reported at once.
    pub(super) fn safety_rails(&self, out: &mut Decisions<'_>) -> Result<(), PlanError> {
        if self.mode == PlanMode::Apply {
            let pruning = out
                .actions
                .iter()
                .filter(|a| {
                    a.action == ActionKind::Delete
                        && !matches!(a.reason, Reason::WorkloadEnded { .. })
                })
                .count()
                + out
                    .refused
                    .iter()
                    .filter(|r| r.action == ActionKind::Delete)
                    .count();
            if self.no_git_slices() && pruning > 0 && !self.opts.allow_empty_source {
                out.errors.insert(
                    0,
                    PlanError::EmptySource {
                        live: out.owned_live,
                    },
                );
            }
        }
        let destructive: Vec<&Action> = out
            .actions
            .iter()
            .filter(|a| a.action.is_destructive() || disruption(a) > 0)
            .collect();
        let count: usize = destructive.iter().map(|a| disruption(a).max(1)).sum();
        if count > self.opts.max_destroy {
            let slices: BTreeSet<String> = destructive
                .iter()
                .map(|a| format!("{}[{}]", a.owner.slice, a.owner.replica))
                .collect();
            out.errors.push(PlanError::TooManyDestructive {
                count,
                max: self.opts.max_destroy,
                slices: slices.into_iter().collect(),
            });
        }
        match out.errors.len() {
            0 => Ok(()),
            1 => Err(out.errors.remove(0)),
            _ => Err(PlanError::Multiple(std::mem::take(&mut out.errors))),
        }
    }

    /// Steps that destroy a busy slice replica's capacity follow its
    /// disruption policy ([`super::workload::decide`]).
    pub(super) fn respect_workloads(&self, out: &mut Decisions<'_>) {
        let inputs = super::workload::Inputs {
            fleet: self.fleet,
            kinds: self.kinds,
            workloads: &self.inv.workloads,
            deferred: &self.inv.deferred,
            mode: self.mode,
            disrupt: self.opts.disrupt,
            users: &self.inv.users,
            owned: self
                .live_by_id
                .iter()
                .filter_map(|((scope, kind, name), l)| {
                    let own = self.kind_of(*kind)?.ownership(&l.body)?;
                    self.owners.owns(scope, Some(&own)).then(|| {
                        let id = ResourceId {
                            scope: (*scope).clone(),
                            kind: *kind,
                            name: name.clone(),
                        };
                        (id, own)
                    })
                })
                .collect(),
        };
        let live_own = |a: &Action| {
            let kind = self.kind_of(a.id.kind)?;
            let l = self.live(&a.id)?;
            kind.ownership(&l.body)
        };
        let (held, released) = super::workload::decide(&inputs, live_own, &mut out.actions);
        out.held = held;
        out.released = released;
    }

    /// The plan, in the order it runs: by slice replica then kind, refusals
    /// likewise, and a slice that looks renamed right after the slice it
    /// looks renamed to (creates first).
    pub(super) fn assemble(&self, out: Decisions<'_>) -> Plan {
        let kinds = self.kinds;
        let Decisions {
            mut actions,
            mut unmanaged,
            mut unjoined,
            mut refused,
            untouched,
            mut held,
            released,
            ..
        } = out;
        held.sort_by(|a, b| {
            (&a.slice, a.replica, rank_str(kinds, a.kind), &a.name).cmp(&(
                &b.slice,
                b.replica,
                rank_str(kinds, b.kind),
                &b.name,
            ))
        });
        let rank = |k: KindId| kinds.iter().position(|x| x.id() == k).unwrap_or(usize::MAX);
        actions.sort_by(|a, b| {
            (&a.owner, rank(a.id.kind), &a.id.name).cmp(&(&b.owner, rank(b.id.kind), &b.id.name))
        });
        unmanaged.sort_by(|a, b| (&a.scope, &a.name).cmp(&(&b.scope, &b.name)));
        unjoined.sort_by(|a, b| (&a.scope, &a.name).cmp(&(&b.scope, &b.name)));
        refused.sort_by(|a, b| {
            (&a.slice, a.replica, rank_str(kinds, a.kind), &a.name).cmp(&(
                &b.slice,
                b.replica,
                rank_str(kinds, b.kind),
                &b.name,
            ))
        });
        let renames = match self.mode {
            PlanMode::Apply => renames(self.fleet, self.inv, kinds, &self.stems, &actions),
            PlanMode::Destroy => Vec::new(),
        };
        if renames.iter().any(|r| !r.declared) {
            actions.sort_by_key(|a| {
                match renames
                    .iter()
                    .find(|r| !r.declared && r.from == a.owner.slice)
                {
                    Some(r) => (r.to.clone(), 1u8),
                    None => (a.owner.slice.clone(), 0u8),
                }
            });
        }
        let mut plan = Plan {
            observed_fingerprint: String::new(),
            mode: self.mode,
            actions,
            unmanaged,
            unjoined,
            refused,
            held,
            released,
            deferred: self.deferred.clone(),
            unobserved: self
                .unobserved
                .values()
                .map(|u| UnobservedTarget {
                    untouched: untouched.get(&u.target).copied().unwrap_or(0),
                    ..u.clone()
                })
                .collect(),
            undiscovered: self
                .inv
                .undiscovered
                .iter()
                .map(|((project, backend), why)| Undiscovered {
                    project: project.clone(),
                    backend,
                    why: why.clone(),
                })
                .collect(),
            renames,
            demand: self.demand.clone(),
            preflight: Default::default(),
            summary: Summary::default(),
        };
        plan.summary = plan.count();
        plan
    }
}

/// Sharded: drops every action and refusal of the slice replicas another
/// replica plans ([`Decisions::elsewhere`]): the unstamped resources of
/// such a replica (a workload policy, a template) go with its capacity.
fn drop_elsewhere(out: &mut Decisions<'_>) {
    if out.elsewhere.is_empty() {
        return;
    }
    let theirs = |slice: &str, replica: u32| out.elsewhere.contains(&(slice.to_string(), replica));
    out.actions
        .retain(|a| !theirs(&a.owner.slice, a.owner.replica));
    out.refused.retain(|r| !theirs(&r.slice, r.replica));
}

impl Planner<'_> {
    /// A protected slice is never duplicated on a blind view: while a
    /// scope could not be read, a missing replica of a slice with
    /// `preventDestroy` may be live there (its Target moved away from it),
    /// and a second copy could never be pruned. Its create is refused
    /// `unread_scope` until every scope reads; other slices' creates go
    /// on (a duplicate of theirs is the next run's `moved` delete, under
    /// the consent gate).
    fn no_blind_protected_creates(&self, out: &mut Decisions<'_>) {
        let unread: Vec<&Scope> = self
            .inv
            .unobserved
            .keys()
            .chain(self.inv.deferred.keys())
            .collect();
        if unread.is_empty() {
            return;
        }
        // Where a copy of the resource could live: an unread scope of the
        // same sort as its own (a cluster for a node pool, a zone for a
        // MIG); an unread Kubernetes API holds no copy of either.
        let unread_like = |a: &Action| -> Vec<String> {
            unread
                .iter()
                .filter(|s| std::mem::discriminant(**s) == std::mem::discriminant(&a.id.scope))
                .map(|s| s.to_string())
                .collect()
        };
        let protected = |a: &Action| {
            a.action == ActionKind::Create
                && matches!(a.reason, Reason::Missing)
                && self
                    .fleet
                    .slices
                    .get(&a.owner.slice)
                    .is_some_and(|s| s.spec.lifecycle.prevent_destroy)
                && !unread_like(a).is_empty()
        };
        let (held, kept): (Vec<Action>, Vec<Action>) = std::mem::take(&mut out.actions)
            .into_iter()
            .partition(protected);
        out.actions = kept;
        for a in held {
            let msg = format!(
                "{} is not created: slice {} has lifecycle.preventDestroy and {} could not be read, \
                 where its replica {} may still live (a Target moved away from it); a second copy \
                 could never be pruned. It is created once every scope reads",
                a.address(),
                a.owner.slice,
                unread_like(&a).join(", "),
                a.owner.replica,
            );
            out.refused.push(refusal(&a, "unread_scope", msg));
        }
    }
}

/// `a` turned into the in-place update that lifts a live `preventDestroy`
/// stamp (the first of the two applies protection always takes to remove).
fn lifting(
    mut a: Action,
    body: Body,
    changes: Vec<super::FieldChange>,
    groups: BTreeSet<super::UpdateGroup>,
) -> Action {
    a.action = ActionKind::Update;
    a.reason = Reason::LiftProtection;
    a.changes = changes;
    a.groups = groups;
    a.desired = Some(body);
    a
}

/// A refused resource holds back the creates, replacements and deletes of
/// the rest of its slice replica (a policy must not be replaced under a
/// pool that stays, nor created for a pool that cannot be); its updates
/// and waits go on.
///
/// The exceptions are deletes made redundant by what the refusal keeps:
/// the delete of another copy of the same resource (the same kind in
/// another scope: a replica left behind by a move, or renamed away) whose
/// refused copy stays (its delete, replace or update refused); and the
/// delete of what a replica left behind when it moved, when every refusal
/// is of a replace or update of its new copy, which stays. Held back, the
/// replica would run twice until a person acts. A refused create (the new
/// copy cannot be made) still holds every delete back.
pub(super) fn hold_back(actions: &mut Vec<Action>, refused: &mut Vec<Refusal>) {
    let held: BTreeMap<(String, u32), String> = refused
        .iter()
        .map(|r| ((r.slice.clone(), r.replica), r.address.clone()))
        .collect();
    let redundant = |a: &Action| {
        a.action == ActionKind::Delete
            && refused
                .iter()
                .filter(|r| r.slice == a.owner.slice && r.replica == a.owner.replica)
                .all(|r| {
                    let stays = matches!(
                        r.action,
                        ActionKind::Replace | ActionKind::Update | ActionKind::Delete
                    );
                    let other_copy = r.kind == a.id.kind.as_str() && r.scope != a.id.scope;
                    let new_copy_stays = matches!(a.reason, Reason::Moved { .. })
                        && matches!(r.action, ActionKind::Replace | ActionKind::Update);
                    stays && (other_copy || new_copy_stays)
                })
    };
    let (kept, held_back): (Vec<Action>, Vec<Action>) =
        std::mem::take(actions).into_iter().partition(|a| {
            !held.contains_key(&(a.owner.slice.clone(), a.owner.replica))
                || matches!(a.action, ActionKind::Update | ActionKind::Wait)
                || redundant(a)
        });
    *actions = kept;
    for a in held_back {
        let by = held
            .get(&(a.owner.slice.clone(), a.owner.replica))
            .cloned()
            .unwrap_or_default();
        let msg = format!(
            "{} is held back ({} {}): {by} of the same slice replica is refused",
            a.address(),
            a.action.as_str(),
            a.id.name
        );
        refused.push(refusal(&a, "held_back", msg));
    }
}

/// Why an owned resource is updated in place: a declared rename relabels
/// the adopted resource (one whose ownership can change in place);
/// anything else is its in-place field groups.
fn update_reason(
    d: &Desired,
    kind: &dyn Kind,
    own: Option<&Ownership>,
    groups: &BTreeSet<super::UpdateGroup>,
) -> Reason {
    let renamed = own.filter(|o| {
        kind.ownership(&d.body)
            .is_some_and(|w| w.slice == d.owner.slice && o.slice != w.slice)
    });
    match renamed {
        Some(o) => Reason::Renamed {
            from: o.slice.clone(),
        },
        None => Reason::InPlaceFieldsChanged {
            groups: groups.iter().copied().collect(),
        },
    }
}

/// An action on desired resource `d`, with no field changes yet.
fn action(
    d: &Desired,
    kind: &dyn Kind,
    action: ActionKind,
    reason: Reason,
    before: Option<serde_json::Value>,
    desired: Option<Body>,
    operation: Option<String>,
) -> Action {
    Action {
        id: d.id.clone(),
        owner: d.owner.clone(),
        action,
        reason,
        changes: Vec::new(),
        groups: BTreeSet::new(),
        before,
        desired,
        operation,
        timeout: d.timeout,
        noun: kind.noun(),
        disruption: None,
        recheck: None,
    }
}

#[cfg(test)]
#[path = "build/tests.rs"]
mod tests;
