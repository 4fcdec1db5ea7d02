#![cfg(test)]
//! Unit tests of the planner's phases, each on its own.

use std::sync::Arc;

use super::*;
use crate::kinds::node_pool;
use crate::resource::gke::NodePool;
use crate::spec::SourceFile;

const SPECS: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: train}
spec:
  project: example-project
  zone: us-central1-b
  ownerId: platform
  gke: {location: us-central1, name: train}
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {name: s}
spec: {target: train, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1, replicas: 2}
";

fn fleet(text: &str) -> Fleet {
    crate::spec::load(&[SourceFile {
        path: "specs/f.yaml".into(),
        text: text.to_string(),
    }])
    .unwrap_or_else(|d| panic!("{d:?}"))
}

fn kinds() -> Vec<&'static dyn Kind> {
    crate::kinds::plan_kinds()
}

/// The live pools of `f` as rendered, each changed by `edit`.
fn live(f: &Fleet, edit: impl Fn(&mut NodePool)) -> Inventory {
    let mut inv = Inventory::default();
    for d in super::super::render_fleet(f, &kinds()) {
        if let Some(np) = super::super::kind::body_as::<NodePool>(&d.body) {
            let mut np = np.clone();
            np.status = Some("RUNNING".into());
            edit(&mut np);
            inv.resources
                .entry(node_pool::KIND)
                .or_default()
                .push(LiveResource {
                    scope: d.id.scope.clone(),
                    body: Arc::new(np),
                });
        }
    }
    inv
}

fn label(np: &mut NodePool, k: &str, v: &str) {
    if let Some(c) = np.config.as_mut() {
        c.labels.insert(k.into(), v.into());
    }
}

/// Each outcome of the one decision per desired resource.
#[test]
fn decide_desired_covers_each_outcome() {
    let f = fleet(SPECS);
    let kinds = kinds();
    let opts = PlanOptions::default();
    let decide = |inv: &Inventory| {
        let p = Planner::new(&f, inv, &kinds, &opts, PlanMode::Apply);
        let mut out = Decisions::default();
        for d in &p.desired {
            p.decide_desired(d, &mut out);
        }
        (
            out.actions
                .iter()
                .map(|a| (a.id.name.clone(), a.action, a.reason.code()))
                .collect::<Vec<_>>(),
            out.refused
                .iter()
                .map(|r| (r.name.clone(), r.code.clone()))
                .collect::<Vec<_>>(),
        )
    };
    // Missing → create.
    let (actions, refused) = decide(&Inventory::default());
    assert_eq!(
        actions,
        vec![
            ("s-0".into(), ActionKind::Create, "missing"),
            ("s-1".into(), ActionKind::Create, "missing")
        ]
    );
    assert!(refused.is_empty());
    // In sync → nothing.
    let (actions, refused) = decide(&live(&f, |_| {}));
    assert!(actions.is_empty() && refused.is_empty(), "{actions:?}");
    // A changed in-place field → update.
    let (actions, _) = decide(&live(&f, |np| label(np, "team", "x")));
    assert_eq!(actions[0].1, ActionKind::Update, "{actions:?}");
    // Another owner's pool under the name → name_taken.
    let (actions, refused) = decide(&live(&f, |np| {
        label(np, "slicectl.dev/owner", "someone-else")
    }));
    assert!(actions.is_empty(), "{actions:?}");
    assert_eq!(refused[0].1, "name_taken");
    // Another source's (a Target these specs do not declare) → other_source.
    let (actions, refused) = decide(&live(&f, |np| label(np, "slicectl.dev/target", "gone")));
    assert!(actions.is_empty(), "{actions:?}");
    assert_eq!(refused.len(), 2);
    assert!(refused.iter().all(|r| r.1 == "other_source"), "{refused:?}");
}

/// The guards on a delete, in their order: another source's before
/// protected, protected before the empty-source guards; destroy refuses
/// another source's slices even though it overrides the empty-source guard.
#[test]
fn orphan_guards_decide_in_order() {
    let f = fleet(SPECS);
    let none = fleet(&SPECS.replace("metadata: {name: s}", "metadata: {name: t}"));
    let kinds = kinds();
    let node_pool_kind = kinds
        .iter()
        .position(|k| k.id() == node_pool::KIND)
        .unwrap();
    let guard = |fleet: &Fleet, inv: &Inventory, mode: PlanMode, opts: PlanOptions| {
        let p = Planner::new(fleet, inv, &kinds, &opts, mode);
        let mut out = Decisions::default();
        for l in inv.live(node_pool::KIND) {
            p.decide_orphan(kinds[node_pool_kind], l, &mut out);
        }
        (
            out.refused
                .iter()
                .map(|r| r.code.clone())
                .collect::<BTreeSet<_>>(),
            out.actions.len(),
        )
    };
    let set = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let protected_elsewhere = live(&f, |np| {
        label(np, "slicectl.dev/target", "gone");
        label(np, "slicectl.dev/prevent-destroy", "true");
    });
    assert_eq!(
        guard(
            &none,
            &protected_elsewhere,
            PlanMode::Apply,
            PlanOptions::default()
        ),
        (set(&["other_source"]), 0)
    );
    let destroy = PlanOptions {
        allow_empty_source: true,
        ..PlanOptions::default()
    };
    assert_eq!(
        guard(&none, &protected_elsewhere, PlanMode::Destroy, destroy),
        (set(&["other_source"]), 0)
    );
    let protected_here = live(&f, |np| label(np, "slicectl.dev/prevent-destroy", "true"));
    assert_eq!(
        guard(
            &none,
            &protected_here,
            PlanMode::Apply,
            PlanOptions::default()
        ),
        (set(&["protected"]), 0)
    );
    // Slice `s` left the specs while its Target has another Slice: pruned.
    assert_eq!(
        guard(
            &none,
            &live(&f, |_| {}),
            PlanMode::Apply,
            PlanOptions::default()
        ),
        (BTreeSet::new(), 2)
    );
}

/// A refused resource holds back the rest of its slice replica's creates,
/// replacements and deletes, not its updates and waits, nor other replicas.
#[test]
fn hold_back_keeps_updates_waits_and_other_replicas() {
    let f = fleet(SPECS);
    let kinds = kinds();
    // The node pools (the GKE Nodes, observe-only, are rendered too).
    let desired: Vec<_> = super::super::render_fleet(&f, &kinds)
        .into_iter()
        .filter(|d| d.id.kind == node_pool::KIND)
        .collect();
    let kind = kinds
        .iter()
        .copied()
        .find(|k| k.id() == node_pool::KIND)
        .unwrap();
    let mk =
        |i: usize, a: ActionKind| action(&desired[i], kind, a, Reason::Missing, None, None, None);
    let mut actions = vec![
        mk(0, ActionKind::Create),
        mk(0, ActionKind::Update),
        mk(0, ActionKind::Wait),
        mk(1, ActionKind::Create),
    ];
    let mut refused = vec![refusal(
        &mk(0, ActionKind::Replace),
        "protected",
        "no".into(),
    )];
    hold_back(&mut actions, &mut refused);
    let left: Vec<(u32, ActionKind)> = actions
        .iter()
        .map(|a| (a.owner.replica, a.action))
        .collect();
    assert_eq!(
        left,
        vec![
            (0, ActionKind::Update),
            (0, ActionKind::Wait),
            (1, ActionKind::Create)
        ]
    );
    assert_eq!(refused.len(), 2);
    assert_eq!(refused[1].code, "held_back");
    assert!(
        refused[1].message.contains("slice.s[0].node_pool"),
        "{}",
        refused[1].message
    );
}

/// The delete of what a moved replica left behind goes on when the only
/// refusal of its replica is a replace of its new copy (which stays): held
/// back, the replica would run twice until a person acts (campaign seed
/// 0x1234abcd00000074). A refused create of the new copy still holds it.
#[test]
fn hold_back_lets_a_moved_leftover_go_when_its_new_copy_stays() {
    let f = fleet(SPECS);
    let kinds = kinds();
    let desired: Vec<_> = super::super::render_fleet(&f, &kinds)
        .into_iter()
        .filter(|d| d.id.kind == node_pool::KIND)
        .collect();
    let kind = kinds
        .iter()
        .copied()
        .find(|k| k.id() == node_pool::KIND)
        .unwrap();
    let moved = || {
        action(
            &desired[0],
            kind,
            ActionKind::Delete,
            Reason::Moved {
                now: "node pool s-0 in c2".into(),
            },
            None,
            None,
            None,
        )
    };
    let mk = |a: ActionKind| action(&desired[0], kind, a, Reason::Missing, None, None, None);
    for (refused_action, goes) in [
        (ActionKind::Replace, true),
        (ActionKind::Update, true),
        (ActionKind::Create, false),
        (ActionKind::Delete, false),
    ] {
        let mut actions = vec![moved()];
        let mut refused = vec![refusal(&mk(refused_action), "protected", "no".into())];
        hold_back(&mut actions, &mut refused);
        assert_eq!(actions.len() == 1, goes, "{refused_action:?}: {refused:?}");
        assert_eq!(refused.len() == 1, goes, "{refused_action:?}: {refused:?}");
    }
    // Another copy of the same pool in another cluster (a replica renamed
    // away after a move): its refused delete keeps it, so this copy goes;
    // a refused create there holds it back.
    let elsewhere = |a: ActionKind| {
        let mut x = mk(a);
        x.id.scope = Scope::Cluster(crate::resource::ClusterRef {
            project: "p".into(),
            location: "l".into(),
            name: "elsewhere".into(),
        });
        x
    };
    for (refused_action, goes) in [(ActionKind::Delete, true), (ActionKind::Create, false)] {
        let mut actions = vec![action(
            &desired[0],
            kind,
            ActionKind::Delete,
            Reason::NotInSpecs,
            None,
            None,
            None,
        )];
        let mut refused = vec![refusal(
            &elsewhere(refused_action),
            "protected",
            "no".into(),
        )];
        hold_back(&mut actions, &mut refused);
        assert_eq!(actions.len() == 1, goes, "{refused_action:?}: {refused:?}");
    }
    // A delete that is not a move is still held back by a refused replace
    // of the same resource.
    let mut actions = vec![action(
        &desired[0],
        kind,
        ActionKind::Delete,
        Reason::NotInSpecs,
        None,
        None,
        None,
    )];
    let mut refused = vec![refusal(&mk(ActionKind::Replace), "protected", "no".into())];
    hold_back(&mut actions, &mut refused);
    assert!(actions.is_empty(), "{actions:?}");
}

/// Every safety rail is reported at once: pruning with no Slice in the
/// specs, and more destructive actions than allowed.
#[test]
fn safety_rails_report_every_error_at_once() {
    let f = fleet(SPECS);
    let empty = fleet(SPECS.split("---").next().unwrap());
    let kinds = kinds();
    let inv = live(&f, |_| {});
    let opts = PlanOptions {
        max_destroy: 1,
        ..PlanOptions::default()
    };
    let p = Planner::new(&empty, &inv, &kinds, &opts, PlanMode::Apply);
    // The node pools (the GKE Nodes, observe-only, are rendered too).
    let desired: Vec<_> = super::super::render_fleet(&f, &kinds)
        .into_iter()
        .filter(|d| d.id.kind == node_pool::KIND)
        .collect();
    let kind = kinds
        .iter()
        .copied()
        .find(|k| k.id() == node_pool::KIND)
        .unwrap();
    let mut out = Decisions {
        actions: desired
            .iter()
            .map(|d| {
                action(
                    d,
                    kind,
                    ActionKind::Delete,
                    Reason::NotInSpecs,
                    None,
                    None,
                    None,
                )
            })
            .collect(),
        owned_live: 2,
        ..Decisions::default()
    };
    match p.safety_rails(&mut out) {
        Err(PlanError::Multiple(errors)) => {
            assert!(
                matches!(errors[0], PlanError::EmptySource { live: 2 }),
                "{errors:?}"
            );
            assert!(
                matches!(
                    errors[1],
                    PlanError::TooManyDestructive {
                        count: 2,
                        max: 1,
                        ..
                    }
                ),
                "{errors:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Within the limits and with Slices in the specs: no error.
    let opts = PlanOptions::default();
    let p = Planner::new(&f, &inv, &kinds, &opts, PlanMode::Apply);
    assert!(p.safety_rails(&mut out).is_ok());
}

/// Two desired resources under one id are a collision, reported with both
/// slice replicas.
#[test]
fn name_collisions_name_both_replicas() {
    let f = fleet(SPECS);
    let kinds = kinds();
    let inv = Inventory::default();
    let opts = PlanOptions::default();
    let mut p = Planner::new(&f, &inv, &kinds, &opts, PlanMode::Apply);
    assert!(p.name_collisions().is_empty());
    let mut twin = p.desired[0].clone();
    twin.owner.slice = "twin".into();
    p.desired.push(twin);
    let errors = p.name_collisions();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let text = errors[0].to_string();
    assert!(
        text.contains("slice s replica 0 and slice twin replica 0"),
        "{text}"
    );
}

/// The planner's indexes (desired ids as sorted indices, live resources
/// keyed by a borrowed scope) find every desired and live resource by its
/// id, and nothing under another name, scope or kind.
#[test]
fn indexes_find_exactly_the_resources_by_id() {
    let f = fleet(&SPECS.replace("replicas: 2", "replicas: 5"));
    let kinds = kinds();
    let opts = PlanOptions::default();
    let inv = live(&f, |_| {});
    let p = Planner::new(&f, &inv, &kinds, &opts, PlanMode::Apply);
    assert_eq!(p.desired.len(), 5, "{:?}", p.desired);
    for d in &p.desired {
        assert!(p.wanted(&d.id), "{:?}", d.id);
        let l = p
            .live(&d.id)
            .unwrap_or_else(|| panic!("{:?} not live", d.id));
        assert_eq!(l.scope, d.id.scope);
    }
    let id = p.desired[2].id.clone();
    let other_name = ResourceId {
        name: "s-9".into(),
        ..id.clone()
    };
    let other_scope = ResourceId {
        scope: Scope::Global(crate::resource::ProjectRef {
            project: "example-project".into(),
        }),
        ..id.clone()
    };
    let other_kind = ResourceId {
        kind: crate::kinds::gce::mig::KIND,
        ..id.clone()
    };
    for missing in [&other_name, &other_scope, &other_kind] {
        assert!(!p.wanted(missing), "{missing:?}");
        assert!(p.live(missing).is_none(), "{missing:?}");
    }
    // Kinds slicectl only observes are never among the desired.
    assert!(
        p.desired.iter().all(|d| kinds
            .iter()
            .any(|k| k.id() == d.id.kind && !k.observe_only())),
        "{:?}",
        p.desired
    );
}

/// A desired resource found in sync as it is rendered takes the live body
/// in place of its own (the rendered one is dropped at once: a 10,000-pool
/// fleet's rendered bodies are never held together with the live ones);
/// one that differs, is unhealthy, has an operation running on it or is
/// not this reconciler's keeps its rendered body, and is decided from it.
#[test]
fn only_resources_in_sync_give_up_their_rendered_bodies() {
    let f = fleet(SPECS);
    let kinds = kinds();
    let opts = PlanOptions::default();
    // Per desired pool (s-0, s-1): settled, and the action decided.
    let settle = |inv: &Inventory| {
        let p = Planner::new(&f, inv, &kinds, &opts, PlanMode::Apply);
        let mut out = Decisions::default();
        for d in &p.desired {
            p.decide_desired(d, &mut out);
        }
        let settled: Vec<bool> = p
            .desired
            .iter()
            .map(|d| p.live(&d.id).is_some_and(|l| Planner::settled(d, l)))
            .collect();
        let actions: Vec<(String, ActionKind)> = out
            .actions
            .iter()
            .map(|a| (a.id.name.clone(), a.action))
            .collect();
        (settled, actions, out.refused.len())
    };
    // Both live as rendered: both settled, nothing to do.
    let (settled, actions, refused) = settle(&live(&f, |_| {}));
    assert_eq!(settled, [true, true]);
    assert!(actions.is_empty() && refused == 0, "{actions:?}");
    // s-1's labels changed: only s-0 settles; s-1 is updated from its
    // rendered body, not the live one.
    let one = |edit: fn(&mut NodePool)| {
        live(&f, move |np| {
            if np.name == "s-1" {
                edit(np)
            }
        })
    };
    let (settled, actions, _) = settle(&one(|np| label(np, "team", "x")));
    assert_eq!(settled, [true, false]);
    assert_eq!(actions, [("s-1".to_string(), ActionKind::Update)]);
    // In ERROR: replaced from the rendered body.
    let (settled, actions, _) = settle(&one(|np| np.status = Some("ERROR".into())));
    assert_eq!(settled, [true, false]);
    assert_eq!(actions, [("s-1".to_string(), ActionKind::Replace)]);
    // Another owner's: refused, never settled.
    let (settled, actions, refused) =
        settle(&one(|np| label(np, "slicectl.dev/owner", "someone-else")));
    assert_eq!(settled, [true, false]);
    assert!(actions.is_empty() && refused == 1, "{actions:?}");
    // An operation running on it: waited on, not settled.
    let mut inv = live(&f, |_| {});
    let scope = inv.resources[&node_pool::KIND][1].scope.clone();
    inv.operations
        .entry(node_pool::KIND)
        .or_default()
        .push(OperationRecord {
            scope,
            target: "s-1".into(),
            name: "operation-1".into(),
            operation_type: "UPDATE_NODE_POOL".into(),
            running: true,
            error: None,
            end_time: None,
        });
    let (settled, actions, _) = settle(&inv);
    assert_eq!(settled, [true, false]);
    assert_eq!(actions, [("s-1".to_string(), ActionKind::Wait)]);
    // A settled desired body is the live body itself, not a copy.
    let inv = live(&f, |_| {});
    let p = Planner::new(&f, &inv, &kinds, &opts, PlanMode::Apply);
    for (d, l) in p.desired.iter().zip(&inv.resources[&node_pool::KIND]) {
        assert!(Arc::ptr_eq(&d.body, &l.body), "{:?}", d.id);
    }
}
