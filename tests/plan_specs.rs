//! The committed fleet (`specs/`) and every example plan cleanly from an empty
//! inventory, with valid names, and the rendered node pools are pinned.

use std::path::Path;

use regex::Regex;
use slicectl::kinds::{node_pool, plan_kinds, workload_policy};
use slicectl::plan::{self, ActionKind, Inventory, PlanOptions};
use slicectl::source;

#[test]
fn committed_fleet_renders_and_plans() {
    let fleet = source::load_dir(Path::new("specs")).unwrap();
    assert!(fleet.slices.len() >= 6, "a realistic fleet");
    let p = plan::plan(
        &fleet,
        &Inventory::default(),
        &plan_kinds(),
        &PlanOptions::default(),
    )
    .unwrap();
    let pool_re = Regex::new(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$").unwrap();
    let compute_re = Regex::new(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$").unwrap();
    for a in &p.actions {
        assert_eq!(a.action, ActionKind::Create);
        let re = if a.id.kind == node_pool::KIND {
            &pool_re
        } else {
            assert_eq!(a.id.kind, workload_policy::KIND);
            &compute_re
        };
        assert!(re.is_match(&a.id.name), "{}", a.id.name);
    }
    // One node pool per replica of each gke slice (gce slices get none).
    let replicas: u32 = fleet
        .slices
        .values()
        .filter(|s| s.spec.backend == slicectl::spec::model::Backend::Gke)
        .map(|s| s.spec.replicas)
        .sum();
    let pools = p
        .actions
        .iter()
        .filter(|a| a.id.kind == node_pool::KIND)
        .count();
    assert_eq!(pools as u32, replicas);
    let bodies: Vec<_> = p
        .actions
        .iter()
        .map(|a| (a.address(), a.desired.as_ref().map(|b| b.to_json())))
        .collect();
    insta::assert_json_snapshot!("specs_fleet_bodies", bodies);
}

#[test]
fn every_example_plans() {
    for e in std::fs::read_dir("examples").unwrap() {
        let dir = e.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let fleet = source::load_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let p = plan::plan(
            &fleet,
            &Inventory::default(),
            &plan_kinds(),
            &PlanOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert!(p.summary.create >= 1, "{}", dir.display());
    }
}
