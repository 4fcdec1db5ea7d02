//! The selective hash: a versioned hash of exactly the fields whose change
//! forces a replacement. In-place fields (labels, taints, resource labels)
//! are compared directly and never hashed; server-defaulted fields are
//! normalised away before comparing.

use std::collections::BTreeMap;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ownership::Ownership;

/// Version of the hash function, stored next to the hash. A release that
/// hashes differently bumps it; live resources stamped with another version
/// are compared field by field and re-stamped in place when equal, instead of
/// being recreated.
pub const HASH_VERSION: &str = "v1";

/// A flattened view of the replacement-class fields: dotted path → value.
pub type Projection = BTreeMap<String, Value>;

/// Removes a dotted path from a JSON object.
pub fn remove_path(v: &mut Value, path: &str) {
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
        // shift_remove keeps the other keys in order (diffs stay readable).
        m.shift_remove(last);
    }
}

/// The value at a dotted path.
pub fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
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

/// The projection of `v` on `fields` (flattened dotted paths).
pub fn project(v: &Value, fields: &[&str]) -> Projection {
    let mut out = Projection::new();
    for f in fields {
        if let Some(x) = lookup(v, f) {
            flatten(f, x, &mut out);
        }
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

/// Whether a live resource must be replaced. With a stored hash of this
/// version, the hash is the truth about what was sent. With another version,
/// or no hash at all (someone replaced the labels by hand), the fields are
/// compared: equal fields re-stamp the hash in place instead of replacing.
pub fn stale(
    own: Option<&Ownership>,
    desired_hash: &str,
    replacement_changes: &[FieldChange],
) -> bool {
    match own.map(|o| (o.hash_version.as_deref(), o.spec_hash.as_deref())) {
        Some((Some(v), Some(h))) if v == HASH_VERSION => h != desired_hash,
        _ => !replacement_changes.is_empty(),
    }
}
