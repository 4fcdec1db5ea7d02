//! Expands a plan's actions into a dependency graph of executable steps:
//! workload policy → node pool on the way up, node pool → workload policy on
//! the way down, delete → create inside a replacement.

use std::collections::BTreeMap;

use crate::plan::{ActionKind, Plan, ResourceKind};

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
}

impl StepOp {
    /// Verb for progress lines.
    pub fn verb(self) -> &'static str {
        match self {
            StepOp::WaitInFlight => "waiting for in-flight operation",
            StepOp::Create => "creating",
            StepOp::Update => "updating",
            StepOp::Delete => "deleting",
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

/// Expands the plan into steps (in a valid topological order).
pub fn expand(plan: &Plan) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    // (slice, replica, kind) → (first delete step, create step, last step)
    #[derive(Default, Clone, Copy)]
    struct Marks {
        delete: Option<usize>,
        create: Option<usize>,
        first: Option<usize>,
        last: Option<usize>,
    }
    let mut marks: BTreeMap<(String, u32, ResourceKind), Marks> = BTreeMap::new();
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
    for (i, a) in plan.actions.iter().enumerate() {
        let mut m = Marks::default();
        let mut prev: Option<usize> = None;
        if a.operation.is_some() {
            prev = Some(push(&mut steps, i, StepOp::WaitInFlight, vec![]));
            m.first = prev;
        }
        let chain: &[StepOp] = match a.action {
            ActionKind::Create => &[StepOp::Create],
            ActionKind::Update => &[StepOp::Update],
            ActionKind::Delete => &[StepOp::Delete],
            ActionKind::Replace => &[StepOp::Delete, StepOp::Create],
            ActionKind::Wait => &[],
        };
        for op in chain {
            let id = push(&mut steps, i, *op, prev.into_iter().collect());
            match op {
                StepOp::Delete => m.delete = Some(id),
                StepOp::Create => m.create = Some(id),
                _ => {}
            }
            m.first.get_or_insert(id);
            prev = Some(id);
        }
        m.last = prev;
        marks.insert((a.slice.clone(), a.replica, a.kind), m);
    }
    // Cross-resource ordering within a slice replica.
    let keys: std::collections::BTreeSet<(String, u32)> =
        marks.keys().map(|(s, r, _)| (s.clone(), *r)).collect();
    for (s, r) in keys {
        let pol = marks
            .get(&(s.clone(), r, ResourceKind::WorkloadPolicy))
            .copied();
        let pool = marks.get(&(s.clone(), r, ResourceKind::NodePool)).copied();
        if let (Some(pol), Some(pool)) = (pol, pool) {
            // The pool is created only once its policy is in place.
            if let (Some(create), Some(pol_last)) = (pool.create, pol.last) {
                steps[create].deps.push(pol_last);
            }
            // The policy is deleted only after the pool that uses it is gone.
            if let (Some(pol_del), Some(pool_del)) = (pol.delete, pool.delete) {
                steps[pol_del].deps.push(pool_del);
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Action, FORMAT_VERSION, PlanMode, Scope, Summary};
    use crate::resource::RegionRef;

    fn action(kind: ResourceKind, action: ActionKind) -> Action {
        Action {
            action,
            kind,
            name: "n".into(),
            address: "a".into(),
            slice: "s".into(),
            replica: 0,
            scope: Scope::Region(RegionRef {
                project: "p".into(),
                region: "r".into(),
            }),
            reason: String::new(),
            changes: vec![],
            before: None,
            after: None,
            operation: None,
            timeout_secs: 1,
        }
    }

    fn plan(actions: Vec<Action>) -> Plan {
        Plan {
            format_version: FORMAT_VERSION,
            observed_fingerprint: String::new(),
            mode: PlanMode::Apply,
            actions,
            unmanaged: vec![],
            refused: vec![],
            summary: Summary::default(),
        }
    }

    #[test]
    fn replacing_a_tpu7x_slice_orders_pool_delete_policy_replace_pool_create() {
        let p = plan(vec![
            action(ResourceKind::WorkloadPolicy, ActionKind::Replace),
            action(ResourceKind::NodePool, ActionKind::Replace),
        ]);
        let s = expand(&p);
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

    #[test]
    fn in_flight_operation_is_waited_first() {
        let mut a = action(ResourceKind::NodePool, ActionKind::Create);
        a.operation = Some("op".into());
        let s = expand(&plan(vec![a]));
        assert_eq!(
            s.iter().map(|s| s.op).collect::<Vec<_>>(),
            vec![StepOp::WaitInFlight, StepOp::Create]
        );
        assert_eq!(s[1].deps, vec![0]);
    }
}
