#![cfg(test)]
//! The preflight's judgement, on plans made by the planner (`super` is the
//! planner's tests, whose fleets and inventories these reuse).

use std::collections::BTreeMap;

use super::*;
use crate::plan::preflight::{Facts, ReservationKey, judge, reads};
use crate::spec::model::Reservation;

fn quota(region: &str, metric: &str, limit: f64, usage: f64) -> Facts {
    Facts {
        quotas: BTreeMap::from([(
            ("example-project".to_string(), region.to_string()),
            BTreeMap::from([(metric.to_string(), (limit, usage))]),
        )]),
        ..Facts::default()
    }
}

#[test]
fn the_replica_past_the_quota_is_refused_with_its_figures_and_the_first_goes_ahead() {
    // Two on-demand v5p 2x2x2 replicas (8 chips each); 12 chips left.
    let f = fleet(vec![slice(
        "llm",
        "tpu-v5p-slice",
        "2x2x2",
        2,
        CapacityType::OnDemand,
    )]);
    let mut p = plan(&f, &TestInv::default(), &PlanOptions::default()).unwrap();
    let r = reads(&p, &f, &all_kinds());
    assert_eq!(
        r.regions,
        vec![("example-project".to_string(), "us-central1".to_string())]
    );
    judge(
        &mut p,
        &f,
        &all_kinds(),
        &quota("us-central1", "TPU_V5P", 20.0, 8.0),
    );
    let q = &p.preflight.quotas[0];
    assert_eq!((q.limit, q.usage, q.left, q.needed), (20, 8, 12, 16));
    assert_eq!(q.refused, vec!["slice.llm[1].node_pool".to_string()]);
    let codes: Vec<(&str, &str)> = p
        .refused
        .iter()
        .map(|r| (r.address.as_str(), r.code.as_str()))
        .collect();
    assert!(
        codes.contains(&("slice.llm[1].node_pool", "quota_insufficient")),
        "{codes:?}"
    );
    let msg = &p
        .refused
        .iter()
        .find(|r| r.code == "quota_insufficient")
        .unwrap()
        .message;
    assert!(
        msg.contains("needs 8 TPU_V5P chips in us-central1")
            && msg.contains(
                "the quota has 4 left (limit 20, usage 8, 8 taken by this plan's earlier creates)"
            ),
        "{msg}"
    );
    // Nothing of replica 1 is sent; replica 0 is created.
    assert!(
        p.actions.iter().all(|a| a.owner.replica == 0),
        "{:?}",
        kinds(&p)
    );
    assert!(
        p.actions
            .iter()
            .any(|a| a.address() == "slice.llm[0].node_pool")
    );
    assert_eq!(p.summary.create, p.actions.len());
    let text = human::render(&p, false);
    assert!(
        text.contains("✗ TPU_V5P in us-central1 (project example-project): the plan needs 16 chips; the quota has 12 left (limit 20, usage 8)"),
        "{text}"
    );
}

#[test]
fn spot_is_charged_to_the_preemptible_metric_and_an_unreported_metric_is_not_checked() {
    let f = fleet(vec![slice(
        "llm",
        "tpu-v5p-slice",
        "2x2x2",
        1,
        CapacityType::Spot,
    )]);
    let mut p = plan(&f, &TestInv::default(), &PlanOptions::default()).unwrap();
    judge(
        &mut p,
        &f,
        &all_kinds(),
        &quota("us-central1", "TPU_V5P", 0.0, 0.0),
    );
    assert!(p.refused.is_empty());
    assert!(p.preflight.quotas.is_empty());
    assert_eq!(p.preflight.unchecked.len(), 1);
    assert!(
        p.preflight.unchecked[0]
            .why
            .contains("no quota PREEMPTIBLE_TPU_V5P in us-central1")
    );
}

#[test]
fn a_replacement_is_credited_the_chips_its_own_delete_frees() {
    // 2x2x2 (8 chips) → 2x2x4 (16 chips); 8 chips left: only the
    // replacement's own freed 8 chips make it fit.
    let f = fleet(vec![slice(
        "llm",
        "tpu-v5p-slice",
        "2x2x2",
        1,
        CapacityType::OnDemand,
    )]);
    let inv = converged(&f);
    let f2 = fleet(vec![slice(
        "llm",
        "tpu-v5p-slice",
        "2x2x4",
        1,
        CapacityType::OnDemand,
    )]);
    let mut p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.llm[0].node_pool".to_string(), ActionKind::Replace)]
    );
    judge(
        &mut p,
        &f2,
        &all_kinds(),
        &quota("us-central1", "TPU_V5P", 16.0, 8.0),
    );
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    assert_eq!(p.preflight.quotas[0].needed, 8);
    // 7 chips left: short by one even with the credit.
    let mut p = plan(&f2, &inv, &PlanOptions::default()).unwrap();
    judge(
        &mut p,
        &f2,
        &all_kinds(),
        &quota("us-central1", "TPU_V5P", 15.0, 8.0),
    );
    assert_eq!(p.refused[0].code, "quota_insufficient");
    assert!(
        p.refused[0]
            .message
            .contains("after the 8 chips its replacement frees first")
    );
    assert!(p.actions.is_empty());
}

#[test]
fn a_reservation_short_by_one_vm_refuses_its_slice() {
    let mut s = slice(
        "res",
        "tpu-v5p-slice",
        "2x2x4",
        1,
        CapacityType::Reservation,
    );
    s.spec.capacity.reservation = Some(Reservation {
        name: "r".into(),
        project: None,
    });
    let f = fleet(vec![s]);
    let mut p = plan(&f, &TestInv::default(), &PlanOptions::default()).unwrap();
    let key = ReservationKey {
        project: "example-project".into(),
        zone: "us-central1-a".into(),
        name: "r".into(),
    };
    assert_eq!(reads(&p, &f, &all_kinds()).reservations, vec![key.clone()]);
    let facts = Facts {
        reservations: BTreeMap::from([(key, (8, 5))]),
        ..Facts::default()
    };
    judge(&mut p, &f, &all_kinds(), &facts);
    let r = &p.preflight.reservations[0];
    assert_eq!((r.count, r.in_use, r.free, r.needed), (8, 5, 3, 4));
    assert_eq!(p.refused[0].code, "reservation_insufficient");
    assert!(
        p.refused[0]
            .message
            .contains("needs 4 VMs of reservation r in us-central1-a")
    );
    assert!(
        p.refused[0]
            .message
            .contains("it has 3 of 8 free (5 in use")
    );
    assert!(p.actions.is_empty());
}

#[test]
fn unread_quotas_are_a_warning_and_refuse_nothing() {
    let f = fleet(vec![slice(
        "llm",
        "tpu-v5p-slice",
        "2x2x2",
        1,
        CapacityType::OnDemand,
    )]);
    let mut p = plan(&f, &TestInv::default(), &PlanOptions::default()).unwrap();
    let n = p.actions.len();
    let facts = Facts {
        errors: vec![
            "quotas of projects/example-project/regions/us-central1 not read (HTTP 403)".into(),
        ],
        ..Facts::default()
    };
    judge(&mut p, &f, &all_kinds(), &facts);
    assert!(p.refused.is_empty());
    assert_eq!(p.actions.len(), n);
    assert_eq!(p.preflight.warnings.len(), 1);
    assert!(
        human::render(&p, false)
            .contains("Warning: quotas of projects/example-project/regions/us-central1 not read")
    );
}
