//! One run: a seed's fleet and steps on a fresh world, on a current-thread
//! runtime with a paused clock (no wall-clock sleep, no network), stopped
//! at the first step that breaks an invariant; with no violation, faults
//! stop and I4 is checked.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::model::SourceM;
use crate::oracle::Violation;
use crate::steps::{self, Step};
use crate::world::World;

/// Steps drawn per seed (after the first apply of every source).
pub const STEPS: usize = 24;
/// Cycles allowed to converge once faults stop.
pub const QUIESCE_ROUNDS: usize = 6;

/// What a seed draws.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub seed: u64,
    pub sources: Vec<SourceM>,
    pub foreign: bool,
    pub steps: Vec<Step>,
}

impl Scenario {
    pub fn of(seed: u64) -> Scenario {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut sources = steps::fleet(&mut rng);
        steps::one_workload_target_per_cluster(&mut sources);
        let foreign = rng.random_bool(0.5);
        let mut steps = steps::steps(&mut rng, &sources, STEPS);
        steps::twin(seed, &mut sources, &mut steps);
        steps::owner_change(seed, &sources, &mut steps);
        Scenario {
            seed,
            sources,
            foreign,
            steps,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub log: Vec<String>,
    /// The first violations, with the index of the step that broke them
    /// (`steps.len()` for the quiet phase).
    pub violations: Vec<(usize, Violation)>,
}

pub fn run(sc: &Scenario) -> Outcome {
    let mut out = run_steps(&sc.sources, sc.foreign, &sc.steps);
    out.log.insert(0, format!("seed {:#018x}", sc.seed));
    out
}

pub fn run_steps(sources: &[SourceM], foreign: bool, steps: &[Step]) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    rt.block_on(async {
        let mut w = World::new(sources.to_vec(), foreign);
        w.log.push(format!("fleet {sources:?} foreign={foreign}"));
        for (i, s) in steps.iter().enumerate() {
            let v = w.step(i, s).await;
            if !v.is_empty() {
                for x in &v {
                    w.log
                        .push(format!("VIOLATION {} {}", x.invariant, x.detail));
                }
                return Outcome {
                    log: w.log,
                    violations: v.into_iter().map(|x| (i, x)).collect(),
                };
            }
        }
        let v = w.quiesce(QUIESCE_ROUNDS).await;
        for x in &v {
            w.log
                .push(format!("VIOLATION {} {}", x.invariant, x.detail));
        }
        Outcome {
            log: w.log,
            violations: v.into_iter().map(|x| (steps.len(), x)).collect(),
        }
    })
}
