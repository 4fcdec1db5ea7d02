//! The invariant campaign (docs/testing.md, "The invariant campaign"):
//! seeded, deterministic runs of random fleets through spec edits,
//! workloads and faults, on the recording fakes and a paused clock, with
//! the safety invariants checked after every step.
//!
//! - `cargo test --test campaign`: the CI campaign (500 seeds from a base
//!   that changes with each commit), the committed regression seeds, and a
//!   seed replayed twice byte for byte.
//! - `SLICECTL_CAMPAIGN_SEED=0x… cargo test --test campaign -- --nocapture`:
//!   one seed, its log printed.
//! - `SLICECTL_CAMPAIGN_SEEDS=100000 cargo test --release --test campaign campaign -- --nocapture`
//!   (or `SLICECTL_CAMPAIGN_SECS=600`): the long mode.

mod edits;
mod known;
mod model;
mod oracle;
mod run;
mod shrink;
mod steps;
mod world;
mod yielding;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use run::{Outcome, Scenario};

/// Parses `0x…` (hex) or decimal.
pub fn parse_seed(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn env_u64(k: &str) -> Option<u64> {
    std::env::var(k).ok().and_then(|v| parse_seed(&v))
}

/// The first seed of this campaign: `SLICECTL_CAMPAIGN_BASE`, else the
/// first 16 hex digits of the checkout's commit (`SLICECTL_BUILD_COMMIT`
/// stamped at build time, else `git rev-parse HEAD`), so CI explores new
/// seeds on each commit; else 0.
///
/// While `regressions.txt` has `open` rows, the CI run starts at the
/// pinned base [`PINNED_BASE`] instead (`SLICECTL_CAMPAIGN_BASE=commit`
/// explores from the commit anyway): fresh seeds on a main with open
/// defects find new variants of them faster than they can be triaged, and
/// a red CI lands nothing. Once every row is `fixed`, CI explores again.
fn base_seed() -> u64 {
    match std::env::var("SLICECTL_CAMPAIGN_BASE").ok().as_deref() {
        Some("commit") => return commit_seed(),
        Some(v) => {
            if let Some(b) = parse_seed(v) {
                return b;
            }
        }
        None if !known::open_defects().is_empty() => return PINNED_BASE,
        None => {}
    }
    commit_seed()
}

/// The base the CI campaign runs from while defects are open: every class
/// its 500 seeds hit is an `open` row of `regressions.txt`.
const PINNED_BASE: u64 = 0xab6d_f297_2a0f_30c8;

fn commit_seed() -> u64 {
    let commit = option_env!("SLICECTL_BUILD_COMMIT")
        .map(str::to_string)
        .or_else(|| {
            let out = std::process::Command::new("git")
                .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
                .output()
                .ok()?;
            String::from_utf8(out.stdout).ok()
        })
        .unwrap_or_default();
    u64::from_str_radix(commit.trim().get(..16).unwrap_or(""), 16).unwrap_or(0)
}

fn replay_line(seed: u64) -> String {
    format!("SLICECTL_CAMPAIGN_SEED={seed:#018x} cargo test --test campaign -- --nocapture")
}

/// A class of failure: its first seed, index from the base, and count.
struct Found {
    seed: u64,
    index: u64,
    hits: u64,
    outcome: Outcome,
}

fn describe(class: &str) -> &'static str {
    known::DEFECTS
        .iter()
        .find(|(id, _)| *id == class)
        .map(|(_, d)| *d)
        .unwrap_or("not a known defect: a new one")
}

/// Shrinks the first failure of a class and says how to replay it.
fn report(class: &str, f: &Found) -> String {
    let sc = Scenario::of(f.seed);
    let (upto, v) = f
        .outcome
        .violations
        .iter()
        .find(|(_, v)| known::classify(v) == class)
        .cloned()
        .expect("a violation of the class");
    let (small, runs) = shrink::shrink(&sc, upto, class);
    let mut s = format!(
        "[{class}] {}\n  first seed {:#018x} ({} seeds from the base), {} seeds hit it\n  {} {}\n  replay: {}\n  shrunk from {} to {} steps ({runs} runs):\n",
        describe(class),
        f.seed,
        f.index + 1,
        f.hits,
        v.invariant,
        v.detail,
        replay_line(f.seed),
        upto + 1,
        small.len(),
    );
    for st in &small {
        s.push_str(&format!("    {:<22} {st:?}\n", st.kind()));
    }
    s
}

#[test]
fn campaign() {
    if let Some(seed) = env_u64("SLICECTL_CAMPAIGN_SEED") {
        let out = run::run(&Scenario::of(seed));
        for l in &out.log {
            println!("{l}");
        }
        assert!(
            out.violations.is_empty(),
            "seed {seed:#018x} breaks {:?}",
            out.violations
                .iter()
                .map(|(i, v)| format!("{} at step {i} ({})", v.invariant, known::classify(v)))
                .collect::<Vec<_>>()
        );
        return;
    }
    let base = base_seed();
    let seeds = env_u64("SLICECTL_CAMPAIGN_SEEDS").unwrap_or(500);
    let budget = env_u64("SLICECTL_CAMPAIGN_SECS").map(Duration::from_secs);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(env_u64("SLICECTL_CAMPAIGN_THREADS").unwrap_or(2) as usize)
        .max(1);
    println!(
        "campaign: base seed {base:#018x}, {} on {threads} thread(s)",
        budget.map_or(format!("{seeds} seeds"), |b| format!(
            "for {}s",
            b.as_secs()
        ))
    );
    let start = Instant::now();
    let next = AtomicU64::new(0);
    let found: Mutex<BTreeMap<&'static str, Found>> = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let over = match budget {
                        Some(b) => start.elapsed() >= b,
                        None => i >= seeds,
                    };
                    if over {
                        break;
                    }
                    let seed = base.wrapping_add(i);
                    let out = run::run(&Scenario::of(seed));
                    let mut f = found.lock().unwrap_or_else(|e| e.into_inner());
                    let classes: std::collections::BTreeSet<&'static str> = out
                        .violations
                        .iter()
                        .map(|(_, v)| known::classify(v))
                        .collect();
                    for c in classes {
                        match f.get_mut(c) {
                            Some(x) => {
                                x.hits += 1;
                                if i < x.index {
                                    *x = Found {
                                        seed,
                                        index: i,
                                        hits: x.hits,
                                        outcome: out.clone(),
                                    };
                                }
                            }
                            None => {
                                f.insert(
                                    c,
                                    Found {
                                        seed,
                                        index: i,
                                        hits: 1,
                                        outcome: out.clone(),
                                    },
                                );
                            }
                        }
                    }
                }
            });
        }
    });
    let elapsed = start.elapsed();
    let ran = next
        .load(Ordering::SeqCst)
        .min(if budget.is_some() { u64::MAX } else { seeds });
    let ran = if budget.is_some() {
        ran.saturating_sub(threads as u64)
    } else {
        ran
    };
    println!(
        "campaign: {ran} seeds in {:.1}s: {:.1} seeds/s",
        elapsed.as_secs_f64(),
        ran as f64 / elapsed.as_secs_f64()
    );
    let found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    if found.is_empty() {
        return;
    }
    let mut msg = String::new();
    for (class, f) in &found {
        msg.push_str(&report(class, f));
    }
    println!("{msg}");
    // A defect still open in regressions.txt is reported, not failed on:
    // its own row proves the campaign finds it. Anything else fails.
    let open = known::open_defects();
    let failing: Vec<String> = found
        .iter()
        .filter(|(c, _)| !open.contains(**c))
        .map(|(c, f)| format!("{c} ({} seeds)", f.hits))
        .collect();
    println!(
        "campaign: open known defects hit: {}",
        found
            .iter()
            .filter(|(c, _)| open.contains(**c))
            .map(|(c, f)| format!("{c} ({} seeds)", f.hits))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(
        failing.is_empty(),
        "the campaign broke invariants: {} (details above; each shrunk run replays with its command)",
        failing.join(", ")
    );
}

/// The committed seeds that found each known defect are replayed every
/// time: a `fixed` row's seed must pass every invariant, and an `open`
/// row's seed must still find its defect (the campaign sees it; when a fix
/// lands, its row flips to `fixed`).
#[test]
fn regression_seeds() {
    let mut wrong = Vec::new();
    for r in known::regressions() {
        let out = run::run(&Scenario::of(r.seed));
        let classes: std::collections::BTreeSet<&str> = out
            .violations
            .iter()
            .map(|(_, v)| known::classify(v))
            .collect();
        // A fixed row's seed must find neither its defect nor anything
        // new; it may still find a defect that is open.
        let open = known::open_defects();
        let ok = if r.open {
            classes.contains(r.defect.as_str())
        } else {
            classes.iter().all(|c| *c != "new" && open.contains(*c))
        };
        if !ok {
            wrong.push(format!(
                "{} ({}, seed {:#018x}, found after {} seeds): hits {:?}\n    {}",
                r.defect,
                if r.open {
                    "open: must still be found"
                } else {
                    "fixed: must find it no more, nor anything new"
                },
                r.seed,
                r.seeds_to_find,
                classes,
                replay_line(r.seed)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "regression seeds disagree with regressions.txt:\n  {}",
        wrong.join("\n  ")
    );
}

/// A seed gives the same run, byte for byte in its log.
#[test]
fn a_seed_replays_byte_for_byte() {
    for seed in [base_seed(), 0x5eed_u64, u64::MAX] {
        let a = run::run(&Scenario::of(seed)).log.join("\n");
        let b = run::run(&Scenario::of(seed)).log.join("\n");
        assert_eq!(a, b, "seed {seed:#018x} ran twice differently");
        assert!(a.lines().count() > 10, "a run logs its steps:\n{a}");
    }
}
