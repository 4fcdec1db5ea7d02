#![cfg(test)]
//! The preflight's Cloud Monitoring reads (`super` is `preflight`).

use std::collections::BTreeMap;

use super::*;
use crate::resource::compute::{Labelled, Point, TypedValue};

fn read(family: Option<&'static str>) -> CloudQuotaRead {
    CloudQuotaRead {
        project: "p".into(),
        quota_id: "Q",
        uses: vec![("us-central1".into(), "M", family)],
    }
}

fn series(kind: &str, labels: &[(&str, &str)], location: &str, chips: &str) -> TimeSeries {
    let labels = labels
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    TimeSeries {
        metric: Labelled {
            kind: kind.into(),
            labels,
        },
        resource: Labelled {
            kind: "consumer_quota".into(),
            labels: BTreeMap::from([("location".to_string(), location.to_string())]),
        },
        points: vec![Point {
            value: TypedValue {
                int64_value: Some(chips.into()),
                double_value: None,
            },
        }],
    }
}

/// The family quota reads its own usage metric; the others the allocation
/// usage of the metric Cloud Quotas named; a quota naming none reads none.
#[test]
fn each_quota_reads_its_usage_metric() {
    let info = QuotaInfo {
        metric: "compute.googleapis.com/tpu_v5p".into(),
        ..QuotaInfo::default()
    };
    let f = usage_filter(&read(None), &info).unwrap();
    assert!(
        f.contains("metric.type = \"serviceruntime.googleapis.com/quota/allocation/usage\"")
            && f.contains("metric.labels.quota_metric = \"compute.googleapis.com/tpu_v5p\""),
        "{f}"
    );
    let f = usage_filter(&read(Some("CT6E")), &info).unwrap();
    assert!(
        f.contains("compute.googleapis.com/quota/tpus_per_tpu_family/usage"),
        "{f}"
    );
    assert_eq!(usage_filter(&read(None), &QuotaInfo::default()), None);
}

/// The usage of a region (and family) is the newest point of its series;
/// other regions and families do not count.
#[test]
fn the_usage_is_the_series_of_the_region_and_family() {
    let s = vec![
        series("u", &[("tpu_family", "ct6e")], "us-central1", "12"),
        series("u", &[("tpu_family", "TPU7X")], "us-central1", "64"),
        series("u", &[("tpu_family", "CT6E")], "us-east5", "99"),
    ];
    assert_eq!(monitored_usage(&s, "us-central1", Some("CT6E")), Some(12));
    assert_eq!(monitored_usage(&s, "us-central1", Some("tpu7x")), Some(64));
    assert_eq!(monitored_usage(&s, "europe-west4", Some("CT6E")), None);
    let v5p = vec![series("u", &[], "us-central1", "8")];
    assert_eq!(monitored_usage(&v5p, "us-central1", None), Some(8));
}
