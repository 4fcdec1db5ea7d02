#![cfg(test)]
//! Tests of the regional TPU quotas, reservations and Cloud Quotas API
//! (`super` is `quotas`).

use super::*;

#[test]
fn metrics_follow_generation_and_provisioning_model() {
    assert_eq!(metric("ct5p-hightpu-4t", false), Some("TPU_V5P"));
    assert_eq!(metric("ct5p-hightpu-4t", true), Some("PREEMPTIBLE_TPU_V5P"));
    assert_eq!(
        metric("ct5lp-hightpu-4t", false),
        Some("TPU_LITE_PODSLICE_V5")
    );
    assert_eq!(
        metric("ct4p-hightpu-4t", true),
        Some("PREEMPTIBLE_TPU_PODSLICE_V4")
    );
    assert_eq!(
        metric("ct6e-standard-4t", false),
        Some("TPUS_PER_TPU_FAMILY/CT6E")
    );
    assert_eq!(
        metric("tpu7x-standard-4t", false),
        Some("TPUS_PER_TPU_FAMILY/TPU7X")
    );
    assert_eq!(metric("tpu7x-standard-4t", true), Some("PREEMPTIBLE_TPU7X"));
    assert_eq!(metric("n2-standard-4", false), None);
}

#[test]
fn pools_on_a_reservation_or_flex_start_are_not_charged() {
    let zones = vec!["us-east5-a".to_string()];
    let spot =
        json!({"initialNodeCount": 4, "config": {"machineType": "ct5p-hightpu-4t", "spot": true}});
    assert_eq!(
        pool_charges("p", &spot, &zones),
        vec![("us-east5".to_string(), "PREEMPTIBLE_TPU_V5P", 16)]
    );
    let reserved = json!({"initialNodeCount": 4, "config": {"machineType": "ct5p-hightpu-4t",
        "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name", "values": ["r"]}}});
    assert!(pool_charges("p", &reserved, &zones).is_empty());
    let flex = json!({"initialNodeCount": 4, "config": {"machineType": "ct5p-hightpu-4t", "flexStart": true}});
    assert!(pool_charges("p", &flex, &zones).is_empty());
}

#[test]
fn vms_are_charged_by_provisioning_model() {
    let spot = json!({"scheduling": {"provisioningModel": "SPOT"}});
    assert_eq!(
        vm_charge("ct6e-standard-4t", &spot),
        Some(("PREEMPTIBLE_TPU_V6E", 4))
    );
    let bound = json!({"scheduling": {"provisioningModel": "RESERVATION_BOUND"}});
    assert_eq!(vm_charge("ct6e-standard-4t", &bound), None);
    assert_eq!(
        vm_charge("ct6e-standard-4t", &json!({})),
        Some(("TPUS_PER_TPU_FAMILY/CT6E", 4))
    );
}

fn world(quotas: &[(&str, u64)], denied: &[&str]) -> Inner {
    let config = FaultConfig {
        quotas: quotas.iter().map(|(k, v)| ((*k).to_string(), *v)).collect(),
        denied_methods: denied.iter().map(|m| (*m).to_string()).collect(),
        ..FaultConfig::default()
    };
    Inner::new(
        std::time::Duration::ZERO,
        1,
        super::super::faults::Faults::new(config, 1),
    )
}

fn ctx(path: &str, query: &[(&str, &str)]) -> Ctx {
    Ctx {
        base: "http://sim".into(),
        version: "v1".into(),
        now: tokio::time::Instant::now(),
        query: query
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        request_id: "0x1".into(),
        path: path.into(),
    }
}

fn parent(location: &str, service: &str) -> QuotaParent {
    QuotaParent {
        project: "p".into(),
        location: location.into(),
        service: service.into(),
    }
}

/// Cloud Quotas serves the v5p, v6e and TPU7x limits set, per region
/// (and family), then the unlimited default, in the wire format of the
/// discovery document; `regions.get` keeps only the v4 and v5e ones.
#[test]
fn cloud_quotas_serve_the_limits_regions_get_does_not_list() {
    let inner = world(
        &[
            ("us-central1/TPU_V5P", 64),
            ("us-east5/TPUS_PER_TPU_FAMILY/CT6E", 32),
            ("us-central1/TPU_LITE_PODSLICE_V5", 16),
        ],
        &[],
    );
    let v5p = get_quota_info(
        &inner,
        &parent("global", "compute.googleapis.com"),
        "TPU-V5P-per-project-region",
    )
    .unwrap();
    let doc = crate::discovery::cloudquotas().unwrap();
    assert_eq!(doc.validate("QuotaInfo", "", &v5p), Ok(v5p.clone()));
    assert_eq!(v5p["metric"], "compute.googleapis.com/tpu_v5p");
    assert_eq!(
        v5p["dimensionsInfos"],
        json!([
            {"dimensions": {"region": "us-central1"}, "details": {"value": "64"},
             "applicableLocations": ["us-central1"]},
            {"details": {"value": "-1"}}
        ])
    );
    let family = get_quota_info(
        &inner,
        &parent("global", "compute.googleapis.com"),
        "TPUS-PER-TPU-FAMILY-per-project-region",
    )
    .unwrap();
    assert_eq!(family["dimensions"], json!(["region", "tpu_family"]));
    assert_eq!(
        family["dimensionsInfos"][0]["dimensions"],
        json!({"region": "us-east5", "tpu_family": "CT6E"})
    );
    let list = list_quota_infos(
        &inner,
        &ctx("", &[("pageSize", "10")]),
        &parent("global", "compute.googleapis.com"),
    )
    .unwrap();
    assert_eq!(
        doc.validate("ListQuotaInfosResponse", "", &list),
        Ok(list.clone())
    );
    assert_eq!(list["quotaInfos"].as_array().map(Vec::len), Some(5));
    assert!(list.get("nextPageToken").is_none(), "{list:#}");
    // regions.get: only the enum's metrics.
    let mut region = json!({});
    add_region_quotas(&inner, "p", "us-central1", &mut region);
    assert_eq!(
        region["quotas"],
        json!([{"metric": "TPU_LITE_PODSLICE_V5", "limit": 16.0, "usage": 0.0}])
    );
}

/// Requests are held to the API: `locations/global` only, compute's
/// quotas only, known quota ids only, an int32 `pageSize`.
#[test]
fn cloud_quotas_requests_are_validated() {
    let inner = world(&[], &[]);
    let e = get_quota_info(
        &inner,
        &parent("us-central1", "compute.googleapis.com"),
        "TPU-V5P-per-project-region",
    )
    .unwrap_err();
    assert_eq!(
        (e.http, e.message.contains("must be 'global'")),
        (400, true)
    );
    let e = get_quota_info(
        &inner,
        &parent("global", "compute.googleapis.com"),
        "NO-SUCH-per-project-region",
    )
    .unwrap_err();
    assert_eq!(e.http, 404);
    let e = get_quota_info(
        &inner,
        &parent("global", "tpu.googleapis.com"),
        "TPU-V5P-per-project-region",
    )
    .unwrap_err();
    assert_eq!(e.http, 404);
    let e = list_quota_infos(
        &inner,
        &ctx("", &[("pageSize", "many")]),
        &parent("global", "compute.googleapis.com"),
    )
    .unwrap_err();
    assert_eq!(e.http, 400);
}

/// `--sim-deny cloudquotas.quotas.get` answers Google's IAM denial.
#[test]
fn a_denied_cloud_quotas_read_is_403_with_the_permission() {
    let inner = world(&[], &["cloudquotas.quotas.get"]);
    let path = "/v1/projects/p/locations/global/services/compute.googleapis.com/quotaInfos/TPU-V5P-per-project-region";
    let r = crate::routes::resolve(&axum::http::Method::GET, path).unwrap();
    let e = denied(&inner.faults.config, &r, &ctx(path, &[])).unwrap();
    assert_eq!((e.http, e.status), (403, "PERMISSION_DENIED"));
    assert_eq!(
        e.message,
        "Permission 'cloudquotas.quotas.get' denied on resource \
         '//cloudquotas.googleapis.com/projects/p/locations/global/services/compute.googleapis.com/quotaInfos/TPU-V5P-per-project-region' \
         (or it may not exist)."
    );
    assert!(denied(&world(&[], &[]).faults.config, &r, &ctx(path, &[])).is_none());
}

#[test]
fn compute_names_the_family_quota_in_its_errors() {
    assert_eq!(
        error_name("TPUS_PER_TPU_FAMILY/CT6E"),
        "TPUS_PER_TPU_FAMILY"
    );
    assert_eq!(error_name("TPU_V5P"), "TPU_V5P");
}

/// `quotaInfos.list` pages as the API does: `pageSize` quotas a page, a
/// `nextPageToken` while more remain (none on the last page), each quota
/// once; a token this list did not return for this parent is 400
/// INVALID_ARGUMENT, and so is a negative `pageSize`.
#[test]
fn cloud_quotas_list_pages_with_page_tokens() {
    let inner = world(&[("us-central1/PREEMPTIBLE_TPU7X", 64)], &[]);
    let compute = parent("global", "compute.googleapis.com");
    let doc = crate::discovery::cloudquotas().unwrap();
    let mut ids = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut query = vec![("pageSize", "2")];
        if let Some(t) = &token {
            query.push(("pageToken", t.as_str()));
        }
        let page = list_quota_infos(&inner, &ctx("", &query), &compute).unwrap();
        assert_eq!(
            doc.validate("ListQuotaInfosResponse", "", &page),
            Ok(page.clone())
        );
        let infos = page["quotaInfos"].as_array().unwrap();
        assert!(!infos.is_empty() && infos.len() <= 2, "{page:#}");
        ids.extend(
            infos
                .iter()
                .map(|q| q["quotaId"].as_str().unwrap().to_string()),
        );
        pages += 1;
        match page.get("nextPageToken").and_then(Value::as_str) {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3, "5 quotas by 2: {ids:?}");
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), CLOUD_QUOTAS.len(), "{ids:?}");
    assert!(
        ids.contains(&"PREEMPTIBLE-TPU7X-per-project-region".to_string()),
        "{ids:?}"
    );
    // Unset and 0 are the default page (all five here); larger is coerced.
    for size in ["0", "100000"] {
        let all = list_quota_infos(&inner, &ctx("", &[("pageSize", size)]), &compute).unwrap();
        assert_eq!(
            all["quotaInfos"].as_array().map(Vec::len),
            Some(5),
            "{size}"
        );
    }
    // A token of another parent, a garbled one and one past the end: 400.
    let first = list_quota_infos(&inner, &ctx("", &[("pageSize", "2")]), &compute).unwrap();
    let t = first["nextPageToken"].as_str().unwrap();
    let other = QuotaParent {
        project: "q".into(),
        ..parent("global", "compute.googleapis.com")
    };
    let past = quota_page_token(&compute, CLOUD_QUOTAS.len());
    for (p, token) in [
        (&other, t),
        (&compute, "not-a-token"),
        (&compute, past.as_str()),
    ] {
        let e = list_quota_infos(&inner, &ctx("", &[("pageToken", token)]), p).unwrap_err();
        assert_eq!(
            (e.http, e.status, e.message.as_str()),
            (400, "INVALID_ARGUMENT", INVALID_ARGUMENT),
            "{token}"
        );
    }
    let e = list_quota_infos(&inner, &ctx("", &[("pageSize", "-1")]), &compute).unwrap_err();
    assert_eq!((e.http, e.status), (400, "INVALID_ARGUMENT"));
}
