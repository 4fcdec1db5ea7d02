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
    let name = text("name");
    // `spec.suspend: true` (Kueue's preemption): since its `Suspended`
    // condition, or, without one yet, since now.
    let suspended =
        (v.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)).then(|| {
            v.pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Suspended")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
                .and_then(|c| {
                    c.get("lastTransitionTime")?
                        .as_str()?
                        .parse::<Timestamp>()
                        .ok()
                })
                .unwrap_or_else(Timestamp::now)
        });
    // The JobSet controller names its Jobs `<jobset>-<replicatedJob>-<index>`
    // (`placement.GenJobName`), `replicas` of each (default 1).
    let js_name = name.as_str();
    let jobs = v
        .pointer("/spec/replicatedJobs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|rj| {
            let rj_name = rj.get("name")?.as_str()?;
            let replicas = rj.get("replicas").and_then(Value::as_u64).unwrap_or(1);
            Some((0..replicas).map(move |i| format!("{js_name}-{rj_name}-{i}")))
        })
        .flatten()
        .collect::<Vec<_>>();
    ObservedJobSet {
        namespace: text("namespace"),
        uid: text("uid"),
        labels: map(meta.and_then(|m| m.get("labels"))),
        annotations: map(meta.and_then(|m| m.get("annotations"))),
        ended,
        deleting: meta.and_then(|m| m.get("deletionTimestamp")).is_some(),
        suspended,
        jobs,
        name,
    }
}

/// The most chips any TPU host has: a request over it is refused, not
/// guessed at.
const MAX_CHIPS_PER_HOST: u64 = 8;

/// A `google.com/tpu` request as a chip count: a Kubernetes quantity
/// (`8`, `1k` as Kubernetes stores 1000, `2e3`, `8000m`), which must be a
/// whole number of chips no host has more of than [`MAX_CHIPS_PER_HOST`].
pub fn tpu_chips(q: &str) -> Result<u32, String> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let bad = || format!("google.com/tpu request {q:?} is not a Kubernetes quantity");
    let n: f64 = num.parse().map_err(|_| bad())?;
    let scale: f64 = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().map_err(|_| bad())?;
            10f64.powi(exp)
        }
        _ => return Err(bad()),
    };
    let chips = n * scale;
    if !chips.is_finite() || chips < 0.0 || chips.fract() != 0.0 {
        return Err(format!(
            "google.com/tpu request {q:?} is not a whole number of chips"
        ));
    }
    if chips > MAX_CHIPS_PER_HOST as f64 {
        return Err(format!(
            "the leader pod requests {q} ({chips}) google.com/tpu, more than any TPU host has \
             (at most {MAX_CHIPS_PER_HOST} chips); request the chips of one host"
        ));
    }
    // Whole and at most MAX_CHIPS_PER_HOST: exact in a u32.
    Ok(chips as u32)
}

/// A pending pod that requests `google.com/tpu`, as observed; `None` for
/// any other pod.
pub fn pending_pod(p: &Pod) -> Option<PendingPod> {
    let status = p.status.as_ref()?;
    if status.phase.as_deref() != Some("Pending") {
        return None;
    }
    let spec = p.spec.as_ref()?;
    let mut chips: u32 = 0;
    let mut tpu_error = None;
    for q in spec.containers.iter().filter_map(|c| {
        c.resources
            .as_ref()?
            .requests
            .as_ref()?
            .get(keys::TPU_RESOURCE)
    }) {
        match tpu_chips(&q.0) {
            Ok(n) => chips = chips.saturating_add(n),
            Err(e) => {
                tpu_error.get_or_insert(e);
                // Still a TPU pod: refused with why, never ignored.
                chips = chips.max(1);
            }
        }
    }
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
        owner_job: p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "Job" && o.api_version == "batch/v1")
            .map(|o| o.name.clone()),
        tpu_error,
        deleting: p.metadata.deletion_timestamp.is_some(),
    })
}
