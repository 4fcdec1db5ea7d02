//! The kind contract, proved by a kind written from the "Adding a resource
//! kind" guide (docs/architecture.md) in this file alone: one module
//! (below), one registration line (`REGISTRY`), nothing else in slicectl
//! touched. The engine's
//! planning, observation and execution run it like the built-in kinds:
//! the scopes it declares are observed, its resources are created,
//! compared, found in sync, deleted when their slice leaves the specs, and
//! its replacement ranking names the reason.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use slicectl::apply::{
    self, ApplyError, ApplyOptions, KindExec, Observed, PlainProgress, RegisteredKind, StepOp,
    StepOutcome, schedule::Scheduler,
};
use slicectl::cloud::{Cloud, CloudError};
use slicectl::plan::ownership::Ownership;
use slicectl::plan::{
    self, Action, ActionKind, Body, Comparison, Desired, FieldChange, Kind, KindId, LiveState,
    PlanOptions, RenderCtx, Scope,
};
use slicectl::resource::RegionRef;
use slicectl::spec::{Fleet, SourceFile, Target};

// ---- the kind: one module ------------------------------------------------

/// A note per slice replica, kept in the Target zone's region: the test
/// kind's "cloud" is this map (scope, name) → note.
static STORE: Mutex<BTreeMap<(String, String), Note>> = Mutex::new(BTreeMap::new());

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Note {
    name: String,
    /// Ownership, as compute resources keep it.
    description: String,
    /// Replacement-class: the slice's topology.
    topology: String,
    /// In place: the slice's replica count.
    replicas: u32,
}

const KIND: KindId = KindId("note");

struct Notes;

fn note(b: &Body) -> Option<&Note> {
    plan::kind::body_as::<Note>(b)
}

fn note_name(slice: &str, replica: u32) -> String {
    format!("{slice}-{replica}-note")
}

impl Kind for Notes {
    fn id(&self) -> KindId {
        KIND
    }
    fn scopes(&self, t: &Target) -> Vec<Scope> {
        vec![Scope::Region(RegionRef {
            project: t.spec.project.clone(),
            region: "us-central1".into(),
        })]
    }
    fn noun(&self) -> &'static str {
        "note"
    }
    fn render(&self, ctx: RenderCtx<'_>) -> Vec<Desired> {
        let own = Ownership {
            owner: ctx.target.spec.owner_id.clone(),
            slice: ctx.slice.name.clone(),
            replica: ctx.replica,
            target: None,
            spec_hash: None,
            hash_version: None,
            prevent_destroy: false,
        };
        let n = Note {
            name: note_name(&ctx.slice.name, ctx.replica),
            description: own.to_description(),
            topology: ctx.slice.spec.topology.clone(),
            replicas: ctx.slice.spec.replicas,
        };
        let scope = self.scopes(ctx.target).remove(0);
        vec![ctx.desired(KIND, scope, n.name.clone(), n)]
    }
    fn name(&self, live: &Body) -> String {
        note(live).map(|n| n.name.clone()).unwrap_or_default()
    }
    fn ownership(&self, live: &Body) -> Option<Ownership> {
        let n = note(live)?;
        Ownership::from_description_named(&n.description, &n.name, note_name)
    }
    fn state(&self, _live: &Body) -> LiveState {
        LiveState::Ok
    }
    fn compare(&self, desired: &Desired, live: &Body) -> Comparison {
        let (Some(d), Some(l)) = (note(&desired.body), note(live)) else {
            return Comparison::Equal;
        };
        let change = |path: &str, before: Value, after: Value, forces: bool| FieldChange {
            path: path.into(),
            before: Some(before),
            after: Some(after),
            forces_replacement: forces,
        };
        if d.topology != l.topology {
            return Comparison::Replace {
                changes: vec![
                    change("replicas", l.replicas.into(), d.replicas.into(), true),
                    change(
                        "topology",
                        l.topology.clone().into(),
                        d.topology.clone().into(),
                        true,
                    ),
                ],
                hash_only: false,
            };
        }
        if d.replicas != l.replicas {
            return Comparison::Update {
                changes: vec![change(
                    "replicas",
                    l.replicas.into(),
                    d.replicas.into(),
                    false,
                )],
                groups: BTreeSet::new(),
            };
        }
        Comparison::Equal
    }
    fn replacement_rank(&self, path: &str) -> usize {
        usize::from(path != "topology")
    }
    fn display_live(&self, live: &Body, _desired: Option<&Desired>) -> Value {
        serde_json::to_value(note(live)).unwrap_or(Value::Null)
    }
    fn parse(&self, json: Value) -> Result<Body, String> {
        serde_json::from_value::<Note>(json)
            .map(|n| Arc::new(n) as Body)
            .map_err(|e| e.to_string())
    }
}

#[async_trait]
impl KindExec for Notes {
    fn kind(&self) -> KindId {
        KIND
    }
    fn observes(&self, scope: &Scope) -> bool {
        matches!(scope, Scope::Region(_))
    }
    async fn observe(&self, _cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError> {
        let store = STORE
            .lock()
            .map_err(|e| CloudError::InvalidInput(e.to_string()))?;
        let items: Vec<Note> = store
            .iter()
            .filter(|((s, _), _)| *s == scope.to_string())
            .map(|(_, n)| n.clone())
            .collect();
        Ok(Observed::new(scope, items, Vec::new()))
    }
    async fn execute(
        &self,
        _cloud: &Cloud,
        _sched: &Scheduler,
        action: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        let mut store = STORE.lock().map_err(|e| ApplyError::Conflict {
            address: action.address(),
            reason: e.to_string(),
        })?;
        let key = (action.id.scope.to_string(), action.id.name.clone());
        match op {
            StepOp::Create | StepOp::Update => {
                let n = action.desired.as_ref().and_then(note).cloned();
                store.insert(
                    key,
                    n.ok_or_else(|| ApplyError::Conflict {
                        address: action.address(),
                        reason: "no desired note".into(),
                    })?,
                );
                Ok(StepOutcome::Done)
            }
            StepOp::Delete => Ok(match store.remove(&key) {
                Some(_) => StepOutcome::Done,
                None => StepOutcome::AlreadyGone,
            }),
            // A note carries no preventDestroy stamp to read again.
            StepOp::WaitInFlight | StepOp::Cleanup | StepOp::Drain | StepOp::Guard => {
                Ok(StepOutcome::Done)
            }
        }
    }
}

/// The registration line.
static REGISTRY: &[&dyn RegisteredKind] = &[&Notes];

// ---- the proof -----------------------------------------------------------

const TARGET: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {name: train}
spec:
  project: example-project
  zone: us-central1-b
  ownerId: notes
  gke: {location: us-central1, name: train}
";

fn slice(name: &str, topology: &str, replicas: u32) -> String {
    format!(
        "---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: {name}}}\nspec: {{target: train, backend: gke, accelerator: tpu-v6e-slice, topology: \"{topology}\", replicas: {replicas}}}\n"
    )
}

fn fleet(slices: &[String]) -> Fleet {
    slicectl::spec::load(&[SourceFile {
        path: "specs/f.yaml".into(),
        text: format!("{TARGET}{}", slices.concat()),
    }])
    .unwrap_or_else(|d| panic!("{d:?}"))
}

fn kinds() -> Vec<&'static dyn Kind> {
    REGISTRY.iter().map(|k| *k as &dyn Kind).collect()
}

/// Observe and plan with the test registry.
async fn plan_of(cloud: &Cloud, f: &Fleet, opts: &PlanOptions) -> plan::Plan {
    let inv = slicectl::observe::observe(cloud, f, REGISTRY).await;
    assert!(inv.unobserved.is_empty(), "{:?}", inv.unobserved);
    plan::plan(f, &inv, &kinds(), opts).unwrap()
}

fn actions(p: &plan::Plan) -> Vec<(String, ActionKind, &'static str)> {
    p.actions
        .iter()
        .map(|a| (a.id.name.clone(), a.action, a.reason.code()))
        .collect()
}

async fn apply(cloud: &Cloud, p: &plan::Plan) {
    let report = apply::execute(
        cloud,
        REGISTRY,
        p,
        &ApplyOptions::default(),
        Arc::new(PlainProgress::new()),
    )
    .await;
    assert!(report.success(), "{report:?}");
}

#[tokio::test]
async fn a_kind_written_from_the_guide_is_planned_observed_and_executed() {
    let cloud = slicectl::cloud::fake::FakeCloud::new().cloud();
    let opts = PlanOptions::default();
    // Created for every replica, in the scope the kind declares.
    let f = fleet(&[slice("a", "2x2", 2), slice("b", "1x1", 1)]);
    let p = plan_of(&cloud, &f, &opts).await;
    assert_eq!(
        actions(&p),
        vec![
            ("a-0-note".to_string(), ActionKind::Create, "missing"),
            ("a-1-note".to_string(), ActionKind::Create, "missing"),
            ("b-0-note".to_string(), ActionKind::Create, "missing"),
        ]
    );
    apply(&cloud, &p).await;
    // In sync.
    let p = plan_of(&cloud, &f, &opts).await;
    assert!(!p.summary.has_changes(), "{:?}", actions(&p));
    // An in-place change, and a replacement named by the kind's ranking
    // (topology first, though `replicas` also changed and comes first).
    let f = fleet(&[slice("a", "2x4", 3), slice("b", "1x1", 2)]);
    let p = plan_of(
        &cloud,
        &f,
        &PlanOptions {
            max_destroy: 10,
            ..opts
        },
    )
    .await;
    let a0 = p.actions.iter().find(|a| a.id.name == "a-0-note").unwrap();
    assert_eq!(a0.action, ActionKind::Replace);
    assert!(
        a0.reason_text().contains("topology"),
        "{}",
        a0.reason_text()
    );
    assert!(
        p.actions
            .iter()
            .any(|a| a.id.name == "a-2-note" && a.action == ActionKind::Create)
    );
    assert_eq!(
        p.actions
            .iter()
            .find(|a| a.id.name == "b-0-note")
            .map(|a| a.action),
        Some(ActionKind::Update)
    );
    apply(&cloud, &p).await;
    assert!(!plan_of(&cloud, &f, &opts).await.summary.has_changes());
    // A slice leaves the specs: its notes are pruned, the rest kept.
    let f = fleet(&[slice("b", "1x1", 2)]);
    let p = plan_of(&cloud, &f, &opts).await;
    assert_eq!(
        actions(&p),
        vec![
            ("a-0-note".to_string(), ActionKind::Delete, "not_in_specs"),
            ("a-1-note".to_string(), ActionKind::Delete, "not_in_specs"),
            ("a-2-note".to_string(), ActionKind::Delete, "not_in_specs"),
        ]
    );
    apply(&cloud, &p).await;
    let left: Vec<String> = STORE
        .lock()
        .unwrap()
        .values()
        .map(|n| n.name.clone())
        .collect();
    assert_eq!(left, vec!["b-0-note", "b-1-note"]);
}
