//! What workload-driven slices are derived from: per workload-enabled
//! Target's cluster, its JobSets (one list) and its pending TPU pods (from
//! the pod list the workload view already makes), as the plain structs of
//! [`crate::workload`].

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::workload::{Ended, ObservedJobSet, PendingPod, keys};

fn map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A JobSet (`jobset.x-k8s.io/v1alpha2`, as JSON) as observed: its terminal
/// condition is `Completed` or `Failed` with status `True`
/// (`api/jobset/v1alpha2/jobset_types.go`).
pub fn jobset(v: &Value) -> ObservedJobSet {
    let meta = v.get("metadata");
    let text = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let ended = v
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        .find_map(|c| {
            let kind = c.get("type").and_then(Value::as_str)?;
            if !matches!(kind, "Completed" | "Failed") {
                return None;
            }
            let at = c
                .get("lastTransitionTime")
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<Timestamp>().ok())
                .unwrap_or(Timestamp::UNIX_EPOCH);
            Some(Ended {
                condition: kind.to_string(),
                at,
            })
        });
    ObservedJobSet {
        namespace: text("namespace"),
        name: text("name"),
        uid: text("uid"),
        labels: map(meta.and_then(|m| m.get("labels"))),
        annotations: map(meta.and_then(|m| m.get("annotations"))),
        ended,
        deleting: meta.and_then(|m| m.get("deletionTimestamp")).is_some(),
    }
}

/// A pending pod that requests `google.com/tpu`, as observed; `None` for
/// any other pod.
pub fn pending_pod(p: &Pod) -> Option<PendingPod> {
    let status = p.status.as_ref()?;
    if status.phase.as_deref() != Some("Pending") {
        return None;
    }
    let spec = p.spec.as_ref()?;
    let chips: u32 = spec
        .containers
        .iter()
        .filter_map(|c| {
            let q = c
                .resources
                .as_ref()?
                .requests
                .as_ref()?
                .get(keys::TPU_RESOURCE)?;
            q.0.parse::<u32>().ok()
        })
        .sum();
    if chips == 0 {
        return None;
    }
    let unschedulable = status.conditions.iter().flatten().any(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    });
    Some(PendingPod {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        labels: p.metadata.labels.clone().unwrap_or_default(),
        annotations: p.metadata.annotations.clone().unwrap_or_default(),
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        tpu_chips: chips,
        unschedulable,
        deleting: p.metadata.deletion_timestamp.is_some(),
    })
}
