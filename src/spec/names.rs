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

    #[test]
    fn gce_names_are_valid_bounded_and_distinct() {
        assert_eq!(instance_template("ironwood", 0), "ironwood-0-it");
        assert_eq!(mig("ironwood", 2), "ironwood-2");
        let compute = Regex::new(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$").unwrap();
        // The discovery document's baseInstanceName pattern (plain form).
        let base = Regex::new(r"^[a-z][-a-z0-9]{0,57}$").unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for name in [
            "a",
            "research-kubeadm-v6e",
            &"x".repeat(55),
            &"x".repeat(56),
            &format!("ironwood-{}", "y".repeat(54)),
            &format!("ironwood-{}", "z".repeat(54)),
        ] {
            for r in [0, 9, 10, 63] {
                let t = instance_template(name, r);
                assert!(compute.is_match(&t) && t.len() <= COMPUTE_NAME_MAX, "{t}");
                assert!(t.ends_with(&format!("-{r}-it")), "{t}");
                let m = mig(name, r);
                assert!(base.is_match(&m) && m.len() <= MIG_NAME_MAX, "{m}");
                assert!(compute.is_match(&m), "{m}");
                // A VM name: the base name, '-', four characters.
                let vm = format!("{m}-abcd");
                assert!(
                    compute.is_match(&vm) && vm.len() <= COMPUTE_NAME_MAX,
                    "{vm}"
                );
                assert!(seen.insert(t.clone()), "template collision {t}");
                assert!(seen.insert(m.clone()), "MIG collision {m}");
            }
        }
        // 56 + "-0" fits 58 untouched; 57 + "-0" is shortened.
        assert_eq!(mig(&"x".repeat(56), 0).len(), 58);
        assert_ne!(mig(&"x".repeat(57), 0), format!("{}-0", "x".repeat(57)));
    }
}
