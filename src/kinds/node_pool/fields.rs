//! The node pool's fields, classified: forces replacement (hashed),
//! updated in place (labels, taints, resource labels, each its own request
//! group), or ignored (output-only, and server defaults unless desired).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::kind::UpdateGroup;
use crate::kind::hash::{FieldChange, Projection, diff, lookup, project, remove_path};
use crate::resource::gke::{NodeConfig, NodePool};

/// Node pool fields that force replacement (top-level paths; objects are
/// flattened below them).
pub const NODE_POOL_REPLACEMENT_FIELDS: &[&str] = &[
    "config.machineType",
    "config.spot",
    "config.flexStart",
    "config.maxRunDuration",
    "config.reservationAffinity",
    "config.serviceAccount",
    "config.oauthScopes",
    "config.tags",
    "config.diskType",
    "config.diskSizeGb",
    "config.shieldedInstanceConfig",
    "initialNodeCount",
    "locations",
    "placementPolicy",
    "queuedProvisioning",
    "autoscaling",
    "management",
    "maxPodsConstraint",
    "networkConfig",
];

/// Node pool fields updated in place.
pub const NODE_POOL_IN_PLACE_FIELDS: &[&str] =
    &["config.labels", "config.taints", "config.resourceLabels"];

/// Fields GKE fills in when they are not sent: when the desired resource
/// leaves them unset, the live value is ignored.
pub const NODE_POOL_SERVER_DEFAULTED: &[&str] = &[
    "config.diskSizeGb",
    "config.diskType",
    "config.oauthScopes",
    "config.serviceAccount",
    "config.shieldedInstanceConfig.enableIntegrityMonitoring",
    "config.shieldedInstanceConfig.enableSecureBoot",
    "management.upgradeOptions",
    "networkConfig",
];

/// Output-only node pool fields: never compared, never shown in diffs.
/// (`selfLink`, `etag` and `instanceGroupUrls` are output only too, but
/// [`NodePool`](crate::resource::gke::NodePool) does not keep them.)
pub const NODE_POOL_OUTPUT_ONLY: &[&str] = &[
    "status",
    "statusMessage",
    "conditions",
    "version",
    "config.imageType",
    "config.metadata",
];

/// In-place group: Kubernetes node labels (`nodePools.update` `labels`).
pub const LABELS: UpdateGroup = UpdateGroup("labels");
/// In-place group: node taints (`nodePools.update` `taints`).
pub const TAINTS: UpdateGroup = UpdateGroup("taints");
/// In-place group: GCE resource labels (`nodePools.update` `resourceLabels`).
pub const RESOURCE_LABELS: UpdateGroup = UpdateGroup("resource labels");

/// The live node pool as it should be shown next to the desired one:
/// output-only fields removed, server defaults the desired pool leaves unset
/// removed, and the `google.com/tpu` taint GKE adds dropped.
pub fn display_live_node_pool(live: &NodePool, desired: Option<&NodePool>) -> Value {
    let mut v = serde_json::to_value(live).unwrap_or(Value::Null);
    let d = desired
        .and_then(|d| serde_json::to_value(d).ok())
        .unwrap_or(Value::Null);
    for p in NODE_POOL_OUTPUT_ONLY {
        remove_path(&mut v, p);
    }
    for p in NODE_POOL_SERVER_DEFAULTED {
        if lookup(&d, p).is_none() {
            remove_path(&mut v, p);
        }
    }
    let want_tpu_taint = desired
        .and_then(|d| d.config.as_ref())
        .is_some_and(|c| c.taints.iter().any(|t| t.key == "google.com/tpu"));
    if !want_tpu_taint
        && let Some(t) = v
            .pointer_mut("/config/taints")
            .and_then(Value::as_array_mut)
    {
        t.retain(|t| t.get("key") != Some(&Value::from("google.com/tpu")));
        if t.is_empty() {
            remove_path(&mut v, "config.taints");
        }
    }
    // An emptied shieldedInstanceConfig is noise too.
    if v.pointer("/config/shieldedInstanceConfig")
        .is_some_and(|x| x.as_object().is_some_and(|m| m.is_empty()))
    {
        remove_path(&mut v, "config.shieldedInstanceConfig");
    }
    v
}

/// Replacement-class projection of a node pool.
pub fn node_pool_projection(np: &NodePool) -> Projection {
    let v = serde_json::to_value(replacement_view(np)).unwrap_or(Value::Null);
    project(&v, NODE_POOL_REPLACEMENT_FIELDS)
}

/// The pool with only the fields [`NODE_POOL_REPLACEMENT_FIELDS`] can read:
/// labels, taints, metadata and output-only fields left out, so that
/// projecting (once per desired and once per live pool of every plan) does
/// not turn them into JSON first. Projects exactly as the whole pool does
/// (`the_replacement_view_projects_as_the_whole_pool`).
fn replacement_view(np: &NodePool) -> NodePool {
    NodePool {
        config: np.config.as_ref().map(|c| NodeConfig {
            machine_type: c.machine_type.clone(),
            spot: c.spot,
            flex_start: c.flex_start,
            max_run_duration: c.max_run_duration.clone(),
            reservation_affinity: c.reservation_affinity.clone(),
            service_account: c.service_account.clone(),
            oauth_scopes: c.oauth_scopes.clone(),
            tags: c.tags.clone(),
            disk_type: c.disk_type.clone(),
            disk_size_gb: c.disk_size_gb,
            shielded_instance_config: c.shielded_instance_config.clone(),
            ..NodeConfig::default()
        }),
        initial_node_count: np.initial_node_count,
        locations: np.locations.clone(),
        placement_policy: np.placement_policy.clone(),
        queued_provisioning: np.queued_provisioning.clone(),
        autoscaling: np.autoscaling.clone(),
        management: np.management.clone(),
        max_pods_constraint: np.max_pods_constraint.clone(),
        network_config: np.network_config.clone(),
        ..NodePool::default()
    }
}

/// Replacement-class projection of a live node pool, normalised against the
/// desired one: server-defaulted paths the desired pool leaves unset are
/// dropped, so a GKE default never looks like drift.
pub fn live_node_pool_projection(live: &NodePool, desired: &Projection) -> Projection {
    let mut p = node_pool_projection(live);
    p.retain(|path, _| {
        desired.contains_key(path)
            || !NODE_POOL_SERVER_DEFAULTED
                .iter()
                .any(|d| path == d || path.starts_with(&format!("{d}.")))
    });
    p
}

/// Labels GKE manages itself on `config.labels`; never compared.
pub fn is_server_label(k: &str) -> bool {
    k.starts_with("cloud.google.com/gke-")
}

/// The in-place fields of a pool, one projection per request group. The
/// `google.com/tpu` taint GKE adds is ignored unless the desired pool sets it.
fn in_place_views(np: &NodePool, want_tpu_taint: bool) -> [(UpdateGroup, Projection); 3] {
    let mut labels = Projection::new();
    let mut taints = Projection::new();
    let mut resource_labels = Projection::new();
    if let Some(c) = &np.config {
        for (k, v) in &c.labels {
            if !is_server_label(k) {
                labels.insert(format!("config.labels[{k:?}]"), Value::from(v.clone()));
            }
        }
        let t: Vec<Value> = c
            .taints
            .iter()
            .filter(|t| want_tpu_taint || t.key != "google.com/tpu")
            .map(|t| Value::from(format!("{}={}:{}", t.key, t.value, t.effect)))
            .collect();
        if !t.is_empty() {
            taints.insert("config.taints".into(), Value::Array(t));
        }
        for (k, v) in &c.resource_labels {
            if !k.starts_with("goog-") {
                resource_labels.insert(
                    format!("config.resourceLabels[{k:?}]"),
                    Value::from(v.clone()),
                );
            }
        }
    }
    [
        (LABELS, labels),
        (TAINTS, taints),
        (RESOURCE_LABELS, resource_labels),
    ]
}

/// In-place differences between a live pool and the desired one, with the
/// request groups that carry them.
pub fn in_place_changes(
    live: &NodePool,
    desired: &NodePool,
) -> (Vec<FieldChange>, BTreeSet<UpdateGroup>) {
    let want_tpu_taint = desired
        .config
        .as_ref()
        .is_some_and(|c| c.taints.iter().any(|t| t.key == "google.com/tpu"));
    // A pool made before the Target stamp existed is not relabelled for it
    // alone: the stamp is written with its next update.
    let target_key = format!("config.labels[{:?}]", crate::kind::ownership::TARGET);
    let mut changes = Vec::new();
    let mut groups = BTreeSet::new();
    for ((group, have), (_, mut want)) in in_place_views(live, want_tpu_taint)
        .into_iter()
        .zip(in_place_views(desired, true))
    {
        if group == LABELS && !have.contains_key(&target_key) {
            want.remove(&target_key);
        }
        let d = diff(&have, &want, false);
        if !d.is_empty() {
            groups.insert(group);
            changes.extend(d);
        }
    }
    (changes, groups)
}

#[cfg(test)]
#[path = "fields/tests.rs"]
mod tests;
