//! Deterministic, valid cloud resource names: node pool `<slice>-<replica>`,
//! workload policy `<slice>-<replica>-wp`, shortened with a hash of the full
//! name past the cloud's length limit. Used by rendering ([`crate::plan`],
//! which re-exports this module) and by validation, which rejects two slices
//! whose names collide (a short slice name can equal a long one's shortened
//! form).

use sha2::{Digest, Sha256};

/// GKE node pool names: `[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?`, at most 40 characters.
pub const NODE_POOL_NAME_MAX: usize = 40;
/// Compute resource names: RFC1035, at most 63 characters.
pub const COMPUTE_NAME_MAX: usize = 63;

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

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    #[test]
    fn short_names_are_kept() {
        assert_eq!(node_pool("llm-v5p", 0), "llm-v5p-0");
        assert_eq!(workload_policy("ironwood", 3), "ironwood-3-wp");
    }

    #[test]
    fn long_names_are_truncated_valid_and_distinct() {
        let re = Regex::new(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$").unwrap();
        let a = "a-very-long-slice-name-for-the-research-team-alpha";
        let b = "a-very-long-slice-name-for-the-research-team-bravo";
        let mut seen = std::collections::BTreeSet::new();
        for name in [a, b] {
            for r in [0, 1, 12] {
                let n = node_pool(name, r);
                assert!(n.len() <= NODE_POOL_NAME_MAX, "{n}");
                assert!(re.is_match(&n), "{n}");
                assert!(seen.insert(n.clone()), "collision {n}");
            }
        }
        let p = workload_policy(&"x".repeat(63), 63);
        assert!(p.len() <= COMPUTE_NAME_MAX, "{p}");
    }
}
