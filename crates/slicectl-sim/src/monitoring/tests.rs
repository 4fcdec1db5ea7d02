#![cfg(test)]
//! Tests of Cloud Monitoring's quota usage (`super` is `monitoring`).

use super::*;
use crate::faults::Faults;
use crate::gce::VmRec;

fn world(denied: &[&str]) -> Inner {
    let config = FaultConfig {
        denied_methods: denied.iter().map(|m| (*m).to_string()).collect(),
        ..FaultConfig::default()
    };
    Inner::new(std::time::Duration::ZERO, 1, Faults::new(config, 1))
}

/// A TPU VM of `machine` in `zone`, Spot when `spot`.
fn vm(inner: &mut Inner, zone: &str, name: &str, machine: &str, spot: bool) {
    let model = if spot { "SPOT" } else { "STANDARD" };
    let now = tokio::time::Instant::now();
    inner.instances.insert(
        format!("projects/p/zones/{zone}/instances/{name}"),
        VmRec {
            project: "p".into(),
            zone: zone.into(),
            name: name.into(),
            id: "1".into(),
            machine_type: machine.into(),
            properties: json!({"scheduling": {"provisioningModel": model}}),
            items: Vec::new(),
            fingerprint: [0; 8],
            status: "RUNNING",
            created_wall: jiff::Timestamp::now(),
            staging_at: now,
            running_at: now,
            runtime: None,
        },
    );
}

fn ctx(query: &[(&str, &str)]) -> Ctx {
    Ctx {
        base: "http://sim".into(),
        version: "v3".into(),
        now: tokio::time::Instant::now(),
        query: query
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        request_id: "0x1".into(),
        path: "/v3/projects/p/timeSeries".into(),
    }
}

const END: (&str, &str) = ("interval.endTime", "2026-11-26T18:00:00Z");

/// The v5p allocation usage and the TPU family usage of the VMs that
/// exist, per region (and family), in the wire format of the API; a
/// filter selects by metric, resource and labels.
#[test]
fn usage_series_follow_the_vms_by_quota_and_region() {
    let mut inner = world(&[]);
    vm(&mut inner, "us-east5-a", "a", "ct5p-hightpu-4t", false);
    vm(&mut inner, "us-east5-b", "b", "ct5p-hightpu-4t", false);
    vm(&mut inner, "us-central1-a", "c", "ct6e-standard-4t", false);
    vm(&mut inner, "us-central1-a", "d", "tpu7x-standard-4t", true);
    let doc = crate::discovery::monitoring().unwrap();
    let v5p = format!(
        "metric.type = \"{ALLOCATION_USAGE}\" AND resource.type = \"consumer_quota\" AND \
         metric.label.quota_metric = \"compute.googleapis.com/tpu_v5p\""
    );
    let got = list_time_series(&inner, &ctx(&[("filter", &v5p), END]), "p").unwrap();
    assert_eq!(
        doc.validate("ListTimeSeriesResponse", "", &got),
        Ok(got.clone())
    );
    let series = got["timeSeries"].as_array().unwrap();
    assert_eq!(series.len(), 1, "{got:#}");
    assert_eq!(
        series[0]["resource"]["labels"],
        json!({"project_id": "p", "service": "compute.googleapis.com", "location": "us-east5"})
    );
    assert_eq!(
        series[0]["metric"]["labels"]["limit_name"],
        "TPU-V5P-per-project-region"
    );
    assert_eq!(series[0]["points"][0]["value"]["int64Value"], "8");
    let family = format!("metric.type = \"{FAMILY_USAGE}\"");
    let got = list_time_series(&inner, &ctx(&[("filter", &family), END]), "p").unwrap();
    let series = got["timeSeries"].as_array().unwrap();
    assert_eq!(series.len(), 1, "{got:#}");
    assert_eq!(series[0]["metric"]["labels"]["tpu_family"], "CT6E");
    assert_eq!(series[0]["resource"]["labels"]["location"], "us-central1");
    assert_eq!(series[0]["points"][0]["value"]["int64Value"], "4");
    // The Spot TPU7x VM: PREEMPTIBLE-TPU7X-per-project-region.
    let spot = format!(
        "metric.type = \"{ALLOCATION_USAGE}\" AND \
         metric.labels.limit_name = \"PREEMPTIBLE-TPU7X-per-project-region\""
    );
    let got = list_time_series(&inner, &ctx(&[("filter", &spot), END]), "p").unwrap();
    assert_eq!(
        got["timeSeries"][0]["points"][0]["value"]["int64Value"], "4",
        "{got:#}"
    );
    // A label the family series do not have selects none of them.
    let none = format!("{family} AND metric.labels.quota_metric = \"x\"");
    let got = list_time_series(&inner, &ctx(&[("filter", &none), END]), "p").unwrap();
    assert_eq!(got, json!({}));
    // Another project has no usage.
    let got = list_time_series(&inner, &ctx(&[("filter", &family), END]), "q").unwrap();
    assert_eq!(got, json!({}));
}

/// The request is held to the API: a filter and an end time are required,
/// a clause the simulator does not serve is refused, no page token was
/// ever issued; a caller without the permission gets Monitoring's 403.
#[test]
fn requests_are_validated_and_a_denied_caller_gets_403() {
    let inner = world(&[]);
    let ok = format!("metric.type = \"{FAMILY_USAGE}\"");
    for query in [
        vec![END],
        vec![("filter", ok.as_str())],
        vec![("filter", ok.as_str()), ("interval.endTime", "yesterday")],
        vec![("filter", "metric.type = starts_with(\"x\")"), END],
        vec![("filter", ok.as_str()), END, ("pageToken", "t")],
    ] {
        let e = list_time_series(&inner, &ctx(&query), "p").unwrap_err();
        assert_eq!((e.http, e.status), (400, "INVALID_ARGUMENT"), "{query:?}");
    }
    assert_eq!(
        list_time_series(&inner, &ctx(&[("filter", &ok), END]), "p").unwrap(),
        json!({})
    );
    let config = world(&["monitoring.timeSeries.list"]).faults.config;
    let e = denied(&config, "monitoring.projects.timeSeries.list").unwrap();
    assert_eq!(
        (e.http, e.status, e.message.as_str()),
        (
            403,
            "PERMISSION_DENIED",
            "Permission monitoring.timeSeries.list denied (or the resource may not exist)."
        )
    );
    assert!(
        denied(
            &FaultConfig::default(),
            "monitoring.projects.timeSeries.list"
        )
        .is_none()
    );
}
