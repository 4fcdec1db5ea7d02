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
        let re = match a.id.kind {
            k if k == node_pool::KIND => &pool_re,
            // The shared device plugin is `kube-system/tpu-device-plugin`.
            k if k == slicectl::kinds::gce::device_plugin::KIND => continue,
            k => {
                assert!(
                    [
                        workload_policy::KIND,
                        slicectl::kinds::gce::template::KIND,
                        slicectl::kinds::gce::mig::KIND,
                        slicectl::kinds::gce::nodes::KIND
                    ]
                    .contains(&k),
                    "{k}"
                );
                &compute_re
            }
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
    // Long texts (the startup script) by size and digest, as `plan` shows them.
    fn short(v: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) if s.len() > 512 => Value::from(format!(
                "<{} bytes, sha256 {}>",
                s.len(),
                hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(s.as_bytes())[..8])
            )),
            Value::Array(a) => Value::Array(a.into_iter().map(short).collect()),
            Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, short(v))).collect()),
            other => other,
        }
    }
    let bodies: Vec<_> = p
        .actions
        .iter()
        .map(|a| (a.address(), a.desired.as_ref().map(|b| short(b.to_json()))))
        .collect();
    insta::assert_json_snapshot!("specs_fleet_bodies", bodies);
}

#[test]
fn every_example_plans() {
    for e in std::fs::read_dir("examples").unwrap() {
        let mut dir = e.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        // An example with files that are not specs keeps its specs in `specs/`.
        if dir.join("specs").is_dir() {
            dir = dir.join("specs");
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
