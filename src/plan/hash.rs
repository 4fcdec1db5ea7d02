//! The selective hash: a versioned hash of exactly the fields whose change
//! forces a replacement. In-place fields (labels, taints, resource labels)
//! are compared directly and never hashed; server-defaulted fields are
//! normalised away before comparing.

use std::collections::BTreeMap;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::resource::compute::ResourcePolicy;
use crate::resource::gke::NodePool;

/// Version of the hash function, stored next to the hash. A release that
/// hashes differently bumps it; live resources stamped with another version
/// are compared field by field and re-stamped in place when equal, instead of
/// being recreated.
pub const HASH_VERSION: &str = "v1";

/// A flattened view of the replacement-class fields: dotted path → value.
pub type Projection = BTreeMap<String, Value>;

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
pub const NODE_POOL_OUTPUT_ONLY: &[&str] = &[
    "status",
    "statusMessage",
    "conditions",
    "selfLink",
    "etag",
    "version",
    "instanceGroupUrls",
    "config.imageType",
    "config.metadata",
];

fn remove_path(v: &mut Value, path: &str) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut cur = v;
    for p in parts {
        match cur.get_mut(p) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

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

/// Workload policy fields that force replacement (policies are immutable).
pub const POLICY_REPLACEMENT_FIELDS: &[&str] = &["workloadPolicy"];

fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

fn flatten(prefix: &str, v: &Value, out: &mut Projection) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        Value::Null => {}
        Value::Object(_) => {}
        Value::Array(a) if a.is_empty() => {}
        Value::Bool(false) => {}
        other => {
            out.insert(prefix.to_string(), other.clone());
        }
    }
}

fn project(v: &Value, fields: &[&str]) -> Projection {
    let mut out = Projection::new();
    for f in fields {
        if let Some(x) = lookup(v, f) {
            flatten(f, x, &mut out);
        }
    }
    out
}

/// Replacement-class projection of a node pool.
pub fn node_pool_projection(np: &NodePool) -> Projection {
    let v = serde_json::to_value(np).unwrap_or(Value::Null);
    project(&v, NODE_POOL_REPLACEMENT_FIELDS)
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

/// Replacement-class projection of a workload policy.
pub fn policy_projection(p: &ResourcePolicy) -> Projection {
    let v = serde_json::to_value(p).unwrap_or(Value::Null);
    let mut out = project(&v, POLICY_REPLACEMENT_FIELDS);
    // AUTO_CONNECT is the server default of acceleratorTopologyMode.
    if out.get("workloadPolicy.acceleratorTopologyMode") == Some(&Value::from("AUTO_CONNECT")) {
        out.remove("workloadPolicy.acceleratorTopologyMode");
    }
    out
}

/// The selective hash of a projection: SHA-256 of its canonical JSON (sorted
/// keys, compact), first 16 hex characters. Fits a Kubernetes label value.
pub fn spec_hash(p: &Projection) -> String {
    let canonical = serde_json::to_string(p).unwrap_or_default();
    let digest = Sha256::digest(canonical.as_bytes());
    hex::encode(&digest[..8])
}

/// A field-level difference between two projections or label sets.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FieldChange {
    /// Dotted path.
    pub path: String,
    /// Live value (absent: `null`).
    pub before: Option<Value>,
    /// Desired value (absent: `null`).
    pub after: Option<Value>,
    /// Whether this change alone forces a replacement.
    pub forces_replacement: bool,
}

/// Differences between two projections.
pub fn diff(before: &Projection, after: &Projection, forces_replacement: bool) -> Vec<FieldChange> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| FieldChange {
            path: k.clone(),
            before: before.get(k).cloned(),
            after: after.get(k).cloned(),
            forces_replacement,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::gke::{NodeConfig, PlacementPolicy};

    fn pool(machine: &str, topo: &str) -> NodePool {
        NodePool {
            name: "p".into(),
            config: Some(NodeConfig {
                machine_type: machine.into(),
                labels: [("team".to_string(), "a".to_string())].into(),
                ..Default::default()
            }),
            initial_node_count: Some(2),
            locations: vec!["us-central2-b".into()],
            placement_policy: Some(PlacementPolicy {
                kind: Some("COMPACT".into()),
                tpu_topology: Some(topo.into()),
                policy_name: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn labels_do_not_change_the_hash() {
        let a = pool("ct5p-hightpu-4t", "2x2x2");
        let mut b = a.clone();
        if let Some(c) = b.config.as_mut() {
            c.labels.insert("other".into(), "x".into());
        }
        assert_eq!(
            spec_hash(&node_pool_projection(&a)),
            spec_hash(&node_pool_projection(&b))
        );
    }

    #[test]
    fn topology_changes_the_hash_and_is_located() {
        let a = node_pool_projection(&pool("ct5p-hightpu-4t", "2x2x2"));
        let b = node_pool_projection(&pool("ct5p-hightpu-4t", "2x2x4"));
        assert_ne!(spec_hash(&a), spec_hash(&b));
        let d = diff(&a, &b, true);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, "placementPolicy.tpuTopology");
    }

    #[test]
    fn server_defaults_are_ignored_unless_desired() {
        let desired = pool("ct5p-hightpu-4t", "2x2x2");
        let mut live = desired.clone();
        if let Some(c) = live.config.as_mut() {
            c.disk_size_gb = Some(100);
            c.image_type = Some("COS_CONTAINERD".into());
            c.oauth_scopes = vec!["https://www.googleapis.com/auth/devstorage.read_only".into()];
        }
        let d = node_pool_projection(&desired);
        assert_eq!(live_node_pool_projection(&live, &d), d);
    }

    /// Golden vector: pinned so that an accidental change of the hash
    /// function (which would replace every live slice) fails this test. A
    /// deliberate change must bump HASH_VERSION and update this vector.
    #[test]
    fn golden_hash_vector() {
        let p = node_pool_projection(&pool("ct5p-hightpu-4t", "2x2x2"));
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"config.machineType":"ct5p-hightpu-4t","initialNodeCount":2,"locations":["us-central2-b"],"placementPolicy.tpuTopology":"2x2x2","placementPolicy.type":"COMPACT"}"#
        );
        assert_eq!(spec_hash(&p), "28769bd0c3ee0981");
    }
}
