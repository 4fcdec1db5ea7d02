#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet};

use super::*;

fn members(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn loads(a: &BTreeMap<u32, String>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for h in a.values() {
        *out.entry(h.clone()).or_default() += 1;
    }
    out
}

/// The hash is fixed (pinned vectors, computed apart with Python's
/// hashlib), not Rust's randomly seeded one: every replica and every
/// release shard alike; and similar names spread.
#[test]
fn the_shard_hash_is_fixed_and_spreads_similar_names() {
    assert_eq!(stable_hash(&["a"]), 0xffe9_aaea_a2a2_d504);
    assert_eq!(stable_hash(&[]), 0xe3b0_c442_98fc_1c14);
    assert_eq!(stable_hash(&[""]), 0x6e34_0b9c_ffb3_7a98);
    let targets = ["team-a", "team-b", "team-c", "team-d", "team-e", "team-f"];
    let shards: Vec<u32> = targets.iter().map(|t| shard_of(t, 6)).collect();
    // The e2e test relies on these six names landing on six shards.
    assert_eq!(shards, [2, 5, 1, 4, 3, 0]);
    assert_eq!(shard_of("anything", 1), 0);
    assert_eq!(shard_of("anything", 0), 0);
}

/// 6 shards over 3 replicas: each replica gets 2, whatever the names.
#[test]
fn six_shards_over_three_replicas_each_get_work() {
    for names in [
        ["replica-a", "replica-b", "replica-c"],
        [
            "slicectl-7d9f-abcde",
            "slicectl-7d9f-fghij",
            "slicectl-7d9f-klmno",
        ],
        ["x", "y", "z"],
    ] {
        let m = members(&names);
        let a = assign(6, &m, &BTreeMap::new());
        assert_eq!(a.len(), 6, "{a:?}");
        let l = loads(&a);
        assert_eq!(l.len(), 3, "{a:?}");
        assert!(l.values().all(|n| *n == 2), "{a:?}");
        // Deterministic: the same inputs, the same answer.
        assert_eq!(a, assign(6, &m, &BTreeMap::new()));
    }
    // 7 shards over 3: loads 3, 2, 2; 2 shards over 3: one replica idle.
    let l = loads(&assign(7, &members(&["a", "b", "c"]), &BTreeMap::new()));
    let mut v: Vec<usize> = l.values().copied().collect();
    v.sort_unstable();
    assert_eq!(v, [2, 2, 3]);
    assert_eq!(
        assign(2, &members(&["a", "b", "c"]), &BTreeMap::new()).len(),
        2
    );
    assert!(assign(3, &BTreeSet::new(), &BTreeMap::new()).is_empty());
}

/// A member leaving moves only its shards; the survivors keep theirs.
#[test]
fn a_member_leaving_moves_only_its_shards() {
    for (n, names) in [
        (6, vec!["a", "b", "c"]),
        (7, vec!["a", "b", "c"]),
        (5, vec!["r1", "r2", "r3", "r4"]),
        (12, vec!["p", "q", "r", "s", "t"]),
    ] {
        let all = members(&names);
        let before = assign(n, &all, &BTreeMap::new());
        for leaver in &names {
            let mut rest = all.clone();
            rest.remove(*leaver);
            // The survivors hold what they were assigned.
            let holders: BTreeMap<u32, String> = before
                .iter()
                .filter(|(_, h)| h.as_str() != *leaver)
                .map(|(k, h)| (*k, h.clone()))
                .collect();
            let after = assign(n, &rest, &holders);
            assert_eq!(after.len(), usize::try_from(n).unwrap());
            for (k, h) in &before {
                if h != leaver {
                    assert_eq!(after.get(k), Some(h), "n={n} leaver={leaver} shard {k}");
                } else {
                    assert_ne!(after.get(k), Some(h));
                }
            }
            let l = loads(&after);
            let (lo, hi) = (l.values().min().unwrap(), l.values().max().unwrap());
            assert!(hi - lo <= 1, "balanced: {after:?}");
        }
    }
}

/// A member joining takes only what the others shed to make room, and a
/// holder that is not a live member counts as none.
#[test]
fn a_member_joining_takes_a_fair_share_and_dead_holders_count_as_none() {
    let two = members(&["a", "b"]);
    let before = assign(6, &two, &BTreeMap::new());
    let three = members(&["a", "b", "c"]);
    let after = assign(6, &three, &before);
    assert_eq!(loads(&after).get("c"), Some(&2), "{after:?}");
    let moved = before
        .iter()
        .filter(|(k, h)| after.get(k) != Some(*h))
        .count();
    assert_eq!(
        moved, 2,
        "only the two c takes move: {before:?} → {after:?}"
    );
    // "gone" still names itself holder of shard 0 in a Lease not expired
    // yet, but its membership expired: shard 0 is assigned to a member.
    let mut holders = BTreeMap::new();
    holders.insert(0, "gone".to_string());
    let a = assign(3, &two, &holders);
    assert!(a.values().all(|h| h == "a" || h == "b"), "{a:?}");
    assert_eq!(a.len(), 3);
}
