#![cfg(test)]
//! The preflight's judgement, on plans made by the planner (`super` is the
//! planner's tests, whose fleets and inventories these reuse).

use std::collections::BTreeMap;

use super::*;
use crate::plan::preflight::{
    CloudQuotaRead, Facts, READ_WITH_CLOUD_QUOTAS, READ_WITH_REGION, ReservationKey, judge,
    observed_usage, quota_of, reads,
};
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
    // v5p is not in regions.get: its limit is read from Cloud Quotas.
    let r = reads(&p, &f, &all_kinds());
    assert!(r.regions.is_empty(), "{r:?}");
    assert_eq!(
        r.cloud_quotas,
        vec![CloudQuotaRead {
            project: "example-project".into(),
            quota_id: "TPU-V5P-per-project-region",
            uses: vec![("us-central1".into(), "TPU_V5P", None)],
        }]
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
                "the quota has 4 left (limit 20, usage 8 observed, 8 taken by this plan's earlier creates); \
                 Cloud Quotas gives the limit only, so the usage is the TPU pools and VMs slicectl sees in the region."
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
        text.contains("✗ TPU_V5P in us-central1 (project example-project): the plan needs 16 chips; the quota has 12 left (limit 20, usage 8 observed; limit from Cloud Quotas)"),
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
        p.preflight.unchecked[0].why.contains(
            "Cloud Quotas has no limit of PREEMPTIBLE-TPU-V5P-per-project-region \
                 (PREEMPTIBLE_TPU_V5P) for us-central1"
        ),
        "{}",
        p.preflight.unchecked[0].why
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

/// Every generation is charged where Compute Engine charges it: v4 and v5e
/// in `regions.get`, v5p, v6e and TPU7x in Cloud Quotas (v6e and TPU7x on
/// demand in the family quota with their `tpu_family`), and what has no
/// known quota id says so.
#[test]
fn each_generation_reads_its_quota_where_compute_engine_keeps_it() {
    use crate::plan::preflight::QuotaSource::{CloudQuotas, Region};
    let src = |a: &str, spot: bool| quota_of(a, spot).map(|q| (q.metric, q.source));
    assert_eq!(
        src("tpu-v4-podslice", false),
        Ok(("TPU_PODSLICE_V4", Region))
    );
    assert_eq!(
        src("tpu-v5-lite-podslice", true),
        Ok(("PREEMPTIBLE_TPU_LITE_PODSLICE_V5", Region))
    );
    assert_eq!(
        src("tpu-v5p-slice", false),
        Ok((
            "TPU_V5P",
            CloudQuotas {
                quota_id: "TPU-V5P-per-project-region",
                family: None
            }
        ))
    );
    assert_eq!(
        src("tpu-v6e-slice", false),
        Ok((
            "TPUS_PER_TPU_FAMILY/CT6E",
            CloudQuotas {
                quota_id: "TPUS-PER-TPU-FAMILY-per-project-region",
                family: Some("CT6E")
            }
        ))
    );
    assert_eq!(
        src("tpu-v6e-slice", true),
        Ok((
            "PREEMPTIBLE_TPU_V6E",
            CloudQuotas {
                quota_id: "PREEMPTIBLE-TPU-V6E-per-project-region",
                family: None
            }
        ))
    );
    assert_eq!(
        src("tpu7x", false).map(|q| q.0),
        Ok("TPUS_PER_TPU_FAMILY/TPU7X")
    );
    assert_eq!(
        src("tpu7x", true),
        Ok((
            "PREEMPTIBLE_TPU7X",
            CloudQuotas {
                quota_id: "PREEMPTIBLE-TPU7X-per-project-region",
                family: None
            }
        ))
    );
}

fn cloud_quota(metric: &str, limit: f64, usage: f64) -> Facts {
    quota("us-central1", metric, limit, usage)
}

/// A fleet of one single-replica slice.
fn one(name: &str, acc: &str, topo: &str, cap: CapacityType) -> Fleet {
    fleet(vec![slice(name, acc, topo, 1, cap)])
}

/// The plan of `f` from nothing live, judged against `facts`.
fn judged(f: &Fleet, facts: &Facts) -> Plan {
    let mut p = plan(f, &TestInv::default(), &PlanOptions::default()).unwrap();
    judge(&mut p, f, &all_kinds(), facts);
    p
}

#[test]
fn a_v6e_plan_past_its_family_quota_is_refused_with_the_figures_from_cloud_quotas() {
    // One on-demand v6e 4x4 (4 hosts x 4 chips = 16 chips); 12 left.
    let f = one("serve", "tpu-v6e-slice", "4x4", CapacityType::OnDemand);
    let p = plan(&f, &TestInv::default(), &PlanOptions::default()).unwrap();
    let r = reads(&p, &f, &all_kinds());
    assert_eq!(
        r.cloud_quotas[0].uses,
        vec![(
            "us-central1".to_string(),
            "TPUS_PER_TPU_FAMILY/CT6E",
            Some("CT6E")
        )]
    );
    let p = judged(&f, &cloud_quota("TPUS_PER_TPU_FAMILY/CT6E", 16.0, 4.0));
    let q = &p.preflight.quotas[0];
    assert_eq!((q.limit, q.usage, q.left, q.needed), (16, 4, 12, 16));
    assert_eq!(q.read_with, READ_WITH_CLOUD_QUOTAS);
    assert_eq!(p.refused[0].code, "quota_insufficient");
    for want in [
        "needs 16 TPUS_PER_TPU_FAMILY/CT6E chips in us-central1",
        "(limit 16, usage 4 observed, 0 taken by this plan's earlier creates); Cloud Quotas gives the limit only",
        "Raise the quota (IAM & Admin > Quotas, quota TPUS-PER-TPU-FAMILY-per-project-region, region us-central1)",
    ] {
        assert!(
            p.refused[0].message.contains(want),
            "{want:?} in {}",
            p.refused[0].message
        );
    }
    let text = crate::plan::human::render(&p, false);
    assert!(
        text.contains("(limit 16, usage 4 observed; limit from Cloud Quotas)"),
        "{text}"
    );
}

#[test]
fn tpu7x_on_demand_and_spot_are_checked_and_flex_start_says_why_not() {
    let f = fleet(vec![
        slice("od", "tpu7x", "2x2x1", 1, CapacityType::OnDemand),
        slice("sp", "tpu7x", "2x2x1", 1, CapacityType::Spot),
        slice("fx", "tpu-v5p-slice", "2x2x1", 1, CapacityType::FlexStart),
    ]);
    // The Spot slice reads PREEMPTIBLE-TPU7X-per-project-region.
    let p = plan(&f, &TestInv::default(), &PlanOptions::default()).unwrap();
    let r = reads(&p, &f, &all_kinds());
    assert!(
        r.cloud_quotas
            .iter()
            .any(|c| c.quota_id == "PREEMPTIBLE-TPU7X-per-project-region"),
        "{:?}",
        r.cloud_quotas
    );
    // 4 chips each: on demand fits 64, Spot does not fit 2 left.
    let mut facts = cloud_quota("TPUS_PER_TPU_FAMILY/TPU7X", 64.0, 0.0);
    for q in facts.quotas.values_mut() {
        q.insert("PREEMPTIBLE_TPU7X".to_string(), (2.0, 0.0));
    }
    let p = judged(&f, &facts);
    let refused: Vec<(&str, &str)> = p
        .refused
        .iter()
        .map(|r| (r.address.as_str(), r.code.as_str()))
        .collect();
    assert_eq!(
        refused,
        vec![("slice.sp[0].node_pool", "quota_insufficient")],
        "{:?}",
        p.refused
    );
    assert!(
        p.refused[0]
            .message
            .contains("needs 4 PREEMPTIBLE_TPU7X chips in us-central1"),
        "{}",
        p.refused[0].message
    );
    let metrics: Vec<&str> = p
        .preflight
        .quotas
        .iter()
        .map(|q| q.key.metric.as_str())
        .collect();
    assert_eq!(
        metrics,
        vec!["PREEMPTIBLE_TPU7X", "TPUS_PER_TPU_FAMILY/TPU7X"],
        "{metrics:?}"
    );
    let why: Vec<(&str, &str)> = p
        .preflight
        .unchecked
        .iter()
        .map(|u| (u.address.as_str(), u.why.as_str()))
        .collect();
    assert!(
        !why.iter().any(|(a, _)| a.starts_with("slice.sp[0]")),
        "{why:?}"
    );
    assert!(
        why.iter().any(|(a, w)| a.starts_with("slice.fx[0]")
            && w.contains("consume PREEMPTIBLE_TPU_V5P")
            && w.contains("not refused for quota")),
        "{why:?}"
    );
}

#[test]
fn a_cloud_quota_not_read_or_unlimited_refuses_nothing_and_regions_get_lines_say_so() {
    let f = one("llm", "tpu-v5p-slice", "2x2x2", CapacityType::OnDemand);
    // Not read (403): the warning stands, no line, no refusal.
    let facts = Facts {
        unread: [("example-project".to_string(), "TPU_V5P".to_string())].into(),
        errors: vec!["quota … not read".into()],
        ..Facts::default()
    };
    let p = judged(&f, &facts);
    assert!(p.refused.is_empty());
    assert!(p.preflight.quotas.is_empty() && p.preflight.unchecked.is_empty());
    assert_eq!(p.preflight.warnings, vec!["quota … not read".to_string()]);
    // Unlimited (-1): nothing to check.
    let p = judged(&f, &cloud_quota("TPU_V5P", -1.0, 0.0));
    assert!(p.refused.is_empty() && p.preflight.is_empty());
    // A v5e line is regions.get's.
    let f = one(
        "lite",
        "tpu-v5-lite-podslice",
        "2x2",
        CapacityType::OnDemand,
    );
    let p = judged(&f, &cloud_quota("TPU_LITE_PODSLICE_V5", 8.0, 0.0));
    assert_eq!(p.preflight.quotas[0].read_with, READ_WITH_REGION);
}

#[test]
fn observed_usage_counts_the_live_tpu_pools_by_their_quota() {
    // A converged on-demand v5p 2x2x2 (8 chips) and a spot v6e 2x2 (4 chips).
    let f = fleet(vec![
        slice("a", "tpu-v5p-slice", "2x2x2", 1, CapacityType::OnDemand),
        slice("b", "tpu-v6e-slice", "2x2", 1, CapacityType::Spot),
    ]);
    let inv = converged(&f).inventory();
    let used = observed_usage(&inv, "example-project", "us-central1");
    assert_eq!(
        used,
        BTreeMap::from([
            ("PREEMPTIBLE_TPU_V6E".to_string(), 4),
            ("TPU_V5P".to_string(), 8)
        ])
    );
    assert!(observed_usage(&inv, "example-project", "us-east5").is_empty());
    // A pool in ERROR holds no VMs.
    let mut broken = converged(&f);
    for np in &mut broken.node_pools {
        np.status = Some("ERROR".into());
    }
    assert!(observed_usage(&broken.inventory(), "example-project", "us-central1").is_empty());
    assert!(observed_usage(&inv, "other-project", "us-central1").is_empty());
}

#[test]
fn observed_usage_counts_the_vms_a_tpu_mig_has_created_by_its_template() {
    use crate::plan::kind::{Body, LiveResource, Scope};
    use crate::resource::compute::{
        ActionsSummary, InstanceGroupManager, InstanceProperties, InstanceTemplate, Scheduling,
    };
    use crate::resource::{ProjectRef, ZoneRef};
    let template = InstanceTemplate {
        name: "t".into(),
        properties: InstanceProperties {
            machine_type: "ct5p-hightpu-4t".into(),
            scheduling: Some(Scheduling {
                provisioning_model: Some("SPOT".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    // Two VMs wanted, one still being created: one VM of 4 chips.
    let mig = InstanceGroupManager {
        name: "m".into(),
        instance_template: Some("projects/example-project/global/instanceTemplates/t".into()),
        target_size: 2,
        current_actions: Some(ActionsSummary {
            creating: 1,
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut inv = Inventory::default();
    inv.resources.insert(
        crate::kinds::gce::template::KIND,
        vec![LiveResource {
            scope: Scope::Global(ProjectRef {
                project: "example-project".into(),
            }),
            body: std::sync::Arc::new(template) as Body,
        }],
    );
    inv.resources.insert(
        crate::kinds::gce::mig::KIND,
        vec![LiveResource {
            scope: Scope::Zone(ZoneRef {
                project: "example-project".into(),
                zone: "us-central1-a".into(),
            }),
            body: std::sync::Arc::new(mig) as Body,
        }],
    );
    assert_eq!(
        observed_usage(&inv, "example-project", "us-central1"),
        BTreeMap::from([("PREEMPTIBLE_TPU_V5P".to_string(), 4)])
    );
}

/// A usage Cloud Monitoring gave (larger than the observed one) is said so,
/// in the plan line, the JSON and the refusal.
#[test]
fn a_usage_from_cloud_monitoring_is_named_so() {
    let f = one("llm", "tpu-v5p-slice", "2x2x2", CapacityType::OnDemand);
    let mut facts = cloud_quota("TPU_V5P", 8.0, 4.0);
    facts.monitored.insert((
        "example-project".into(),
        "us-central1".into(),
        "TPU_V5P".into(),
    ));
    let p = judged(&f, &facts);
    let q = &p.preflight.quotas[0];
    assert_eq!(
        (q.usage, q.usage_from),
        (4, Some(crate::plan::preflight::USAGE_FROM_MONITORING))
    );
    assert!(
        p.refused[0]
            .message
            .contains("(limit 8, usage 4 from Cloud Monitoring, 0 taken by this plan's earlier creates). Nothing"),
        "{}",
        p.refused[0].message
    );
    let text = crate::plan::human::render(&p, false);
    assert!(
        text.contains("(limit 8, usage 4 from Cloud Monitoring; limit from Cloud Quotas)"),
        "{text}"
    );
    let observed = judged(&f, &cloud_quota("TPU_V5P", 8.0, 4.0));
    assert_eq!(
        observed.preflight.quotas[0].usage_from,
        Some(crate::plan::preflight::USAGE_FROM_OBSERVED)
    );
}

/// Issue 35 case 11: a pool in ERROR holds no VMs (its usage is not
/// counted), so its replacement is not credited its chips: with 8 chips
/// used elsewhere and 8 left of 16, a 16-chip replacement is refused.
#[test]
fn an_error_pools_replacement_is_not_credited_its_chips() {
    let f = fleet(vec![slice(
        "llm",
        "tpu-v5p-slice",
        "2x2x4",
        1,
        CapacityType::OnDemand,
    )]);
    let mut inv = converged(&f);
    for np in &mut inv.node_pools {
        np.status = Some("ERROR".into());
    }
    let mut p = plan(&f, &inv, &PlanOptions::default()).unwrap();
    assert_eq!(
        kinds(&p),
        vec![("slice.llm[0].node_pool".to_string(), ActionKind::Replace)]
    );
    judge(
        &mut p,
        &f,
        &all_kinds(),
        &quota("us-central1", "TPU_V5P", 16.0, 8.0),
    );
    assert_eq!(
        p.refused.first().map(|r| r.code.as_str()),
        Some("quota_insufficient"),
        "{:?}",
        p.preflight
    );
    assert!(
        !p.refused[0].message.contains("its replacement frees first"),
        "{}",
        p.refused[0].message
    );
}
