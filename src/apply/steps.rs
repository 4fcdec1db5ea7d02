//! Expands a plan's actions into a dependency graph of executable steps:
//! dependencies first on the way up (workload policy → node pool), last on
//! the way down, delete → create inside a replacement, and create → delete
//! for a replica moved to another scope (its new resource first).

use std::collections::BTreeMap;

use crate::plan::{ActionKind, KindId, Plan, Reason};

/// What one step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOp {
    /// Wait for the operation already running on the resource.
    WaitInFlight,
    /// Create the resource.
    Create,
    /// Update it in place.
    Update,
    /// Delete it.
    Delete,
    /// Clean up after it and the kinds it depends on are deleted (Node
    /// objects and bootstrap Secrets after the VMs).
    Cleanup,
    /// Drain the busy slice replica's Nodes before its capacity is
    /// destroyed (`whenBusy: drain`; run by the executor itself).
    Drain,
    /// Read a resource's `preventDestroy` stamp again, before the create
    /// its delete is paired with (a moved replica's new resource, a renamed
    /// slice's): a stamp the plan's view missed (a lagging list) refuses
    /// the delete and skips the create, so no second copy of a protected
    /// replica is made that could never be pruned.
    Guard,
}

impl StepOp {
    /// Verb for progress lines.
    pub fn verb(self) -> &'static str {
        match self {
            StepOp::WaitInFlight => "waiting for in-flight operation",
            StepOp::Create => "creating",
            StepOp::Update => "updating",
            StepOp::Delete => "deleting",
            StepOp::Cleanup => "cleaning up",
            StepOp::Drain => "draining",
            StepOp::Guard => "checking protection",
        }
    }
}

/// One executable step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Index in the step list.
    pub id: usize,
    /// Index of the plan action it belongs to.
    pub action: usize,
    /// What it does.
    pub op: StepOp,
    /// Steps that must succeed first.
    pub deps: Vec<usize>,
}

/// What the step graph needs to know about a kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct KindInfo<'k> {
    /// Kinds created before it and deleted after it.
    pub depends_on: &'k [KindId],
    /// One resource per scope serving every slice there
    /// ([`crate::plan::Kind::shared`]).
    pub shared: bool,
    /// Deleting it ends with a [`StepOp::Cleanup`] after its dependencies'
    /// deletes ([`crate::plan::Kind::cleanup_after_dependencies`]).
    pub cleanup: bool,
}

/// Expands the plan into steps (each run once every step it depends on has
/// succeeded; the list is not in dependency order). Within a
/// slice replica, a kind is created after the kinds it depends on and
/// deleted before them (`info`, from the registered kinds). A kind with a
/// cleanup step cleans up once everything else of its replica is deleted.
/// A shared kind (one per scope) is created before, and deleted after, the
/// resources of every slice replica in that scope that depend on it.
pub fn expand<'k>(plan: &Plan, info: impl Fn(KindId) -> KindInfo<'k>) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    #[derive(Default, Clone, Copy)]
    struct Marks {
        delete: Option<usize>,
        create: Option<usize>,
        cleanup: Option<usize>,
        last: Option<usize>,
    }
    type Key<'a> = (&'a str, u32, KindId);
    let mut marks: BTreeMap<Key<'_>, Marks> = BTreeMap::new();
    // Shared kinds: by (kind, scope).
    let mut shared: BTreeMap<(KindId, &crate::plan::Scope), Marks> = BTreeMap::new();
    // Deletes of replicas moved elsewhere, with the replica and kind.
    let mut moved: Vec<(usize, Option<usize>, Key<'_>)> = Vec::new();
    let push = |steps: &mut Vec<Step>, action: usize, op: StepOp, deps: Vec<usize>| {
        let id = steps.len();
        steps.push(Step {
            id,
            action,
            op,
            deps,
        });
        id
    };
    let paired = paired_deletes(plan, &info);
    // Per paired delete (action index): its guard step.
    let mut guards: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, a) in plan.actions.iter().enumerate() {
        let ki = info(a.id.kind);
        let mut m = Marks::default();
        let mut prev: Option<usize> = None;
        if paired.contains(&i) {
            let g = push(&mut steps, i, StepOp::Guard, vec![]);
            guards.insert(i, g);
            prev = Some(g);
        }
        if a.operation.is_some() {
            prev = Some(push(&mut steps, i, StepOp::WaitInFlight, vec![]));
        }
        if a.disruption.as_ref().is_some_and(|d| {
            d.how == crate::plan::workload::DisruptHow::Drain && !d.nodes.is_empty()
        }) {
            prev = Some(push(
                &mut steps,
                i,
                StepOp::Drain,
                prev.into_iter().collect(),
            ));
        }
        let chain: &[StepOp] = match (a.action, ki.cleanup) {
            (ActionKind::Create, _) => &[StepOp::Create],
            (ActionKind::Update, _) => &[StepOp::Update],
            (ActionKind::Delete, false) => &[StepOp::Delete],
            (ActionKind::Delete, true) => &[StepOp::Delete, StepOp::Cleanup],
            (ActionKind::Replace, false) => &[StepOp::Delete, StepOp::Create],
            (ActionKind::Replace, true) => &[StepOp::Delete, StepOp::Cleanup, StepOp::Create],
            (ActionKind::Wait, _) => &[],
        };
        for op in chain {
            let id = push(&mut steps, i, *op, prev.into_iter().collect());
            match op {
                StepOp::Delete => m.delete = Some(id),
                StepOp::Create => m.create = Some(id),
                StepOp::Cleanup => m.cleanup = Some(id),
                _ => {}
            }
            prev = Some(id);
        }
        m.last = prev;
        // A replica moved to another scope: its old resource is deleted once
        // the new one is created (ordered below), never in its place.
        if matches!(a.reason, Reason::Moved { .. }) && a.action == ActionKind::Delete {
            if let Some(del) = m.delete {
                moved.push((
                    del,
                    guards.get(&i).copied(),
                    (a.owner.slice.as_str(), a.owner.replica, a.id.kind),
                ));
            }
            // Its delete still waits for its dependents' (a template
            // replaced by one of another name goes after the old MIG).
            m.last = None;
        }
        if ki.shared {
            shared.insert((a.id.kind, &a.id.scope), m);
        } else {
            // Two resources of one kind in a replica (a template created
            // while the one an adopted MIG brought is deleted): one mark,
            // its create what dependents wait for, its delete after theirs.
            let e = marks
                .entry((a.owner.slice.as_str(), a.owner.replica, a.id.kind))
                .or_default();
            *e = Marks {
                delete: e.delete.or(m.delete),
                create: e.create.or(m.create),
                cleanup: e.cleanup.or(m.cleanup),
                last: if m.create.is_some() {
                    m.last
                } else {
                    e.last.or(m.last)
                },
            };
        }
    }
    // Cross-kind ordering within a slice replica.
    let keys: Vec<Key<'_>> = marks.keys().copied().collect();
    for (s, r, kind) in keys.iter().copied() {
        let Some(me) = marks.get(&(s, r, kind)).copied() else {
            continue;
        };
        for dep in info(kind).depends_on {
            let Some(other) = marks.get(&(s, r, *dep)).copied() else {
                continue;
            };
            // Created only once what it needs is in place.
            if let (Some(create), Some(other_last)) = (me.create, other.last) {
                steps[create].deps.push(other_last);
            }
            // What it needs is deleted only after it is gone.
            if let (Some(other_del), Some(my_del)) = (other.delete, me.delete) {
                steps[other_del].deps.push(my_del);
            }
        }
        // The cleanup runs once every other resource of the replica is deleted.
        if let Some(cleanup) = me.cleanup {
            for (s2, r2, k2) in keys.iter().copied() {
                if (s2, r2) != (s, r) || k2 == kind {
                    continue;
                }
                if let Some(del) = marks.get(&(s2, r2, k2)).and_then(|o| o.delete) {
                    steps[cleanup].deps.push(del);
                }
            }
        }
    }
    // Create before delete across scopes: a moved replica's old resource
    // goes only once its new one is created (a failed create keeps it).
    // Its create waits for its protection to be read again.
    for (del, guard, key) in moved {
        if let Some(create) = marks.get(&key).and_then(|m| m.create) {
            steps[del].deps.push(create);
            if let Some(g) = guard {
                steps[create].deps.push(g);
            }
        }
    }
    // Shared kinds: before every dependent in their scope on the way up,
    // after all of them (their cleanups included) on the way down.
    for ((skind, sscope), sm) in &shared {
        for (i, a) in plan.actions.iter().enumerate() {
            if &&a.id.scope != sscope || !info(a.id.kind).depends_on.contains(skind) {
                continue;
            }
            let Some(me) = marks
                .get(&(a.owner.slice.as_str(), a.owner.replica, a.id.kind))
                .copied()
            else {
                continue;
            };
            let _ = i;
            if let (Some(create), Some(s_last)) = (me.create, sm.last) {
                steps[create].deps.push(s_last);
            }
            if let Some(s_del) = sm.delete
                && let Some(mine) = me.cleanup.or(me.delete)
            {
                steps[s_del].deps.push(mine);
            }
        }
    }
    create_before_delete(plan, &info, &mut steps, &guards);
    steps
}

/// The deletes a create is paired with (action indices): a moved
/// replica's old resource, and what [`create_before_delete`] orders after
/// a create under another name. Each gets a [`StepOp::Guard`] first.
fn paired_deletes<'k>(plan: &Plan, info: &impl Fn(KindId) -> KindInfo<'k>) -> Vec<usize> {
    let successor = successor_of(plan);
    plan.actions
        .iter()
        .enumerate()
        .filter(|(_, a)| a.action == ActionKind::Delete && !info(a.id.kind).shared)
        .filter(|(_, a)| {
            let moved = matches!(a.reason, Reason::Moved { .. });
            let to = successor(&a.owner.slice);
            moved
                || plan.actions.iter().any(|c| {
                    c.action == ActionKind::Create
                        && c.owner.slice == to
                        && c.id.kind == a.id.kind
                        && c.id.name != a.id.name
                })
        })
        .map(|(i, _)| i)
        .collect()
}

/// The slice an undeclared rename ([`crate::plan::Rename`]) looks like it
/// went to, or the slice itself.
fn successor_of(plan: &Plan) -> impl Fn(&str) -> String + '_ {
    |slice: &str| -> String {
        plan.renames
            .iter()
            .find(|r| !r.declared && r.from == slice)
            .map_or_else(|| slice.to_string(), |r| r.to.clone())
    }
}

/// Create before delete wherever names do not clash: the delete of a
/// resource of slice `s` (or of a slice that looks renamed to `s`, see
/// [`crate::plan::Rename`]) waits for every create of `s`'s resources of
/// the same kind under another name, so a failed create (a stockout) skips
/// the delete and the old capacity stays.
fn create_before_delete<'k>(
    plan: &Plan,
    info: &impl Fn(KindId) -> KindInfo<'k>,
    steps: &mut [Step],
    guards: &BTreeMap<usize, usize>,
) {
    let successor = successor_of(plan);
    let mut delete_step: BTreeMap<usize, usize> = BTreeMap::new();
    let mut create_step: BTreeMap<usize, usize> = BTreeMap::new();
    let mut last_step: BTreeMap<usize, usize> = BTreeMap::new();
    for s in steps.iter() {
        if s.op == StepOp::Delete {
            delete_step.insert(s.action, s.id);
        }
        if s.op == StepOp::Create {
            create_step.insert(s.action, s.id);
        }
        last_step.insert(s.action, s.id);
    }
    for (i, a) in plan.actions.iter().enumerate() {
        if a.action != ActionKind::Delete || info(a.id.kind).shared {
            continue;
        }
        let Some(&del) = delete_step.get(&i) else {
            continue;
        };
        let to = successor(&a.owner.slice);
        for (j, c) in plan.actions.iter().enumerate() {
            if c.action == ActionKind::Create
                && c.owner.slice == to
                && c.id.kind == a.id.kind
                && c.id.name != a.id.name
                && let Some(&last) = last_step.get(&j)
            {
                steps[del].deps.push(last);
                // The create waits for the delete's protection read.
                if let (Some(&g), Some(&create)) = (guards.get(&i), create_step.get(&j))
                    && !steps[create].deps.contains(&g)
                {
                    steps[create].deps.push(g);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use super::*;
    use crate::kinds::{node_pool, workload_policy};
    use crate::plan::{Action, PlanMode, Reason, ResourceId, Scope, SliceRef, Summary};
    use crate::resource::RegionRef;

    fn action(kind: KindId, action: ActionKind) -> Action {
        Action {
            id: ResourceId {
                scope: Scope::Region(RegionRef {
                    project: "p".into(),
                    region: "r".into(),
                }),
                kind,
                name: "n".into(),
            },
            owner: SliceRef {
                slice: "s".into(),
                replica: 0,
            },
            action,
            reason: Reason::Missing,
            changes: vec![],
            groups: BTreeSet::new(),
            before: None,
            desired: None,
            operation: None,
            timeout: Duration::from_secs(1),
            noun: "x",
            disruption: None,
            recheck: None,
        }
    }

    fn plan(actions: Vec<Action>) -> Plan {
        Plan {
            observed_fingerprint: String::new(),
            mode: PlanMode::Apply,
            actions,
            unmanaged: vec![],
            unjoined: vec![],
            refused: vec![],
            held: vec![],
            released: vec![],
            deferred: vec![],
            unobserved: vec![],
            undiscovered: vec![],
            renames: vec![],
            demand: Default::default(),
            preflight: Default::default(),
            summary: Summary::default(),
        }
    }

    fn deps(k: KindId) -> KindInfo<'static> {
        KindInfo {
            depends_on: if k == node_pool::KIND {
                &[workload_policy::KIND]
            } else {
                &[]
            },
            ..KindInfo::default()
        }
    }

    #[test]
    fn replacing_a_tpu7x_slice_orders_pool_delete_policy_replace_pool_create() {
        let p = plan(vec![
            action(workload_policy::KIND, ActionKind::Replace),
            action(node_pool::KIND, ActionKind::Replace),
        ]);
        let s = expand(&p, deps);
        // 0 policy delete, 1 policy create, 2 pool delete, 3 pool create
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].deps, vec![2], "policy delete waits for pool delete");
        assert_eq!(s[1].deps, vec![0]);
        assert_eq!(
            s[3].deps,
            vec![2, 1],
            "pool create waits for its delete and the new policy"
        );
    }

    /// The step of action `action` doing `op`.
    fn step(s: &[Step], action: usize, op: StepOp) -> &Step {
        s.iter()
            .find(|x| x.action == action && x.op == op)
            .unwrap_or_else(|| panic!("no {op:?} of action {action} in {s:?}"))
    }

    #[test]
    fn a_moved_replica_is_deleted_only_after_its_new_pool_is_created() {
        let mut old = action(node_pool::KIND, ActionKind::Delete);
        old.reason = Reason::Moved {
            now: "node pool n in c2".into(),
        };
        old.id.scope = Scope::Region(RegionRef {
            project: "p".into(),
            region: "old".into(),
        });
        let new = action(node_pool::KIND, ActionKind::Create);
        for (actions, c, d) in [
            (vec![new.clone(), old.clone()], 0, 1),
            (vec![old.clone(), new.clone()], 1, 0),
        ] {
            let s = expand(&plan(actions), deps);
            // The old pool's protection is read again first; the new one is
            // created only then, and the old one deleted only after that.
            assert_eq!(s.len(), 3, "{s:?}");
            let guard = step(&s, d, StepOp::Guard);
            let create = step(&s, c, StepOp::Create);
            let delete = step(&s, d, StepOp::Delete);
            assert!(guard.deps.is_empty(), "{s:?}");
            assert_eq!(create.deps, vec![guard.id], "{s:?}");
            assert!(
                delete.deps.contains(&create.id) && delete.deps.contains(&guard.id),
                "{s:?}"
            );
        }
        // A replacement in the new scope: the old one waits for its create.
        let mut again = action(node_pool::KIND, ActionKind::Replace);
        again.reason = Reason::StoredHashDiffers;
        let s = expand(&plan(vec![again, old]), deps);
        let create = step(&s, 0, StepOp::Create);
        let guard = step(&s, 1, StepOp::Guard);
        assert!(
            step(&s, 1, StepOp::Delete).deps.contains(&create.id),
            "{s:?}"
        );
        assert!(create.deps.contains(&guard.id), "{s:?}");
    }

    #[test]
    fn a_delete_waits_for_the_creates_of_its_slice_under_other_names() {
        let mut create = action(node_pool::KIND, ActionKind::Create);
        create.id.name = "s-0".into();
        let mut delete = action(node_pool::KIND, ActionKind::Delete);
        delete.id.name = "s-2".into();
        delete.owner.replica = 2;
        let mut other = action(node_pool::KIND, ActionKind::Delete);
        other.owner.slice = "t".into();
        let s = expand(&plan(vec![delete, create, other]), deps);
        let guard = step(&s, 0, StepOp::Guard);
        let del = step(&s, 0, StepOp::Delete);
        let cre = step(&s, 1, StepOp::Create);
        assert!(
            del.deps.contains(&cre.id),
            "the delete waits for the create: {s:?}"
        );
        assert_eq!(
            cre.deps,
            vec![guard.id],
            "the create waits for the guard: {s:?}"
        );
        let theirs = step(&s, 2, StepOp::Delete);
        assert!(
            theirs.deps.is_empty(),
            "another slice's delete does not wait: {s:?}"
        );
        assert!(
            !s.iter().any(|x| x.action == 2 && x.op == StepOp::Guard),
            "an unpaired delete has no guard: {s:?}"
        );
    }

    #[test]
    fn in_flight_operation_is_waited_first() {
        let mut a = action(node_pool::KIND, ActionKind::Create);
        a.operation = Some("op".into());
        let s = expand(&plan(vec![a]), deps);
        assert_eq!(
            s.iter().map(|s| s.op).collect::<Vec<_>>(),
            vec![StepOp::WaitInFlight, StepOp::Create]
        );
        assert_eq!(s[1].deps, vec![0]);
    }
}
