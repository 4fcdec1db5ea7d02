//! Which shard a Target belongs to, and a sharded replica's cut of the
//! fleet (`slicectl controller --shards N`; the coordination through Leases
//! is the shell's, in `controller::shard`). Pure: the planner reads the
//! cut ([`Fleet::shard`]) to leave the other replicas' resources alone.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use super::Fleet;

/// The first 8 bytes (big-endian) of the SHA-256 of `parts`, each followed
/// by a 0 byte: fixed, unlike Rust's randomly seeded `DefaultHasher`, so
/// every replica and release computes the same; and well mixed, so similar
/// Target names (`team-a`, `team-b`) spread over the shards (FNV-1a's low
/// bits do not: modulo 6 it put six such names on two shards).
pub fn stable_hash(parts: &[&str]) -> u64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    let d = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&d[..8]);
    u64::from_be_bytes(first)
}

/// The shard of Target `target` among `shards`.
pub fn shard_of(target: &str, shards: u32) -> u32 {
    let n = u64::from(shards.max(1));
    u32::try_from(stable_hash(&[target]) % n).unwrap_or(0)
}

/// The part of the fleet one replica plans: the Targets of the shards it
/// holds, and their Slices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardScope {
    /// Number of shards.
    pub shards: u32,
    /// The shards held for this cycle.
    pub held: BTreeSet<u32>,
}

impl ShardScope {
    /// Whether Target `target` is planned by this replica.
    pub fn keeps(&self, target: &str) -> bool {
        self.held.contains(&shard_of(target, self.shards))
    }

    /// `fleet` cut to the held shards' Targets and their Slices, and the
    /// names of the Slices left out (other replicas'). The other Targets
    /// become [`Fleet::foreign`] (their scopes are not left behind), and
    /// the cut records itself ([`Fleet::shard`]) so that the planner leaves
    /// the other replicas' resources alone, removed Targets' included. The
    /// file count is kept: the empty-source guard judges the whole source.
    pub fn cut(&self, mut fleet: Fleet) -> (Fleet, BTreeSet<String>) {
        let (mine, foreign) = std::mem::take(&mut fleet.targets)
            .into_iter()
            .partition(|(name, _)| self.keeps(name));
        fleet.targets = mine;
        fleet.foreign = foreign;
        let mut others = BTreeSet::new();
        fleet.slices.retain(|name, s| {
            let keep = self.keeps(&s.spec.target);
            if !keep {
                others.insert(name.clone());
                others.extend(s.spec.previous_names.iter().cloned());
            }
            keep
        });
        fleet.shard = Some(ShardCut {
            scope: self.clone(),
            others: others.clone(),
        });
        (fleet, others)
    }
}

/// What a cut left out, recorded in the cut fleet ([`Fleet::shard`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardCut {
    /// The shards this replica holds.
    pub scope: ShardScope,
    /// The other replicas' Slices (and their `previousNames`).
    pub others: BTreeSet<String>,
}
