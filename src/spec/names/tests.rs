#![cfg(test)]
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
