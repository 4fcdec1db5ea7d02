//! Deterministic, valid cloud resource names: node pool `<slice>-<replica>`,
//! workload policy `<slice>-<replica>-wp`, instance template
//! `<slice>-<replica>-it`, MIG `<slice>-<replica>` (also its
//! `baseInstanceName`), shortened with a hash of the full
//! name past the cloud's length limit. Used by rendering ([`crate::plan`],
//! which re-exports this module) and by validation, which rejects two slices
//! whose names collide (a short slice name can equal a long one's shortened
//! form).

use sha2::{Digest, Sha256};

/// GKE node pool names: `[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?`, at most 40 characters.
pub const NODE_POOL_NAME_MAX: usize = 40;
/// Compute resource names: RFC1035, at most 63 characters.
pub const COMPUTE_NAME_MAX: usize = 63;
/// A MIG's name, which slicectl also uses as its `baseInstanceName`: the
/// compute discovery document caps `baseInstanceName` at 58 characters
/// (pattern `[a-z](([-a-z0-9]{0,57})|…)`), since GCE appends `-xxxx` (4
/// random characters) to name each VM, and a VM name is at most 63.
pub const MIG_NAME_MAX: usize = 58;

fn short_hash(s: &str) -> String {
    let digest = Sha256::digest(s.as_bytes());
    hex::encode(&digest[..3])
}

/// Joins `base` and `suffix` with `-`, truncating `base` and inserting a
/// 6-hex hash of the untruncated name when the result would exceed `max`.
/// Untruncated results of distinct inputs are distinct, and so are two
/// truncated ones (up to a 24-bit hash collision of two long names that share
/// their first `max - 8 - suffix` characters), but a short `base` can equal a
/// long one's truncated `head-hash`: validation rejects that
/// (`spec::validate`), since it cannot be avoided here without renaming
/// existing resources.
fn bounded(base: &str, suffix: &str, max: usize) -> String {
    let full = format!("{base}-{suffix}");
    if full.len() <= max {
        return full;
    }
    let hash = short_hash(&full);
    // base' + "-" + hash + "-" + suffix
    let keep = max.saturating_sub(hash.len() + suffix.len() + 2);
    let mut head: String = base.chars().take(keep).collect();
    while head.ends_with('-') {
        head.pop();
    }
    format!("{head}-{hash}-{suffix}")
}

/// Node pool name of replica `replica` of slice `slice`.
pub fn node_pool(slice: &str, replica: u32) -> String {
    bounded(slice, &replica.to_string(), NODE_POOL_NAME_MAX)
}

/// Workload policy name of replica `replica` of slice `slice`.
pub fn workload_policy(slice: &str, replica: u32) -> String {
    bounded(slice, &format!("{replica}-wp"), COMPUTE_NAME_MAX)
}

/// Instance template name of replica `replica` of slice `slice` (global
/// template, unique per project).
pub fn instance_template(slice: &str, replica: u32) -> String {
    bounded(slice, &format!("{replica}-it"), COMPUTE_NAME_MAX)
}

/// MIG name of replica `replica` of slice `slice` (zonal, unique per project
/// and zone); at most [`MIG_NAME_MAX`] characters so that it is also a valid
/// `baseInstanceName`, and its VMs are `<mig>-xxxx`.
pub fn mig(slice: &str, replica: u32) -> String {
    bounded(slice, &replica.to_string(), MIG_NAME_MAX)
}

#[cfg(test)]
#[path = "names/tests.rs"]
mod tests;
