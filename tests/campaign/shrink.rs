//! Shrinking a failing run: delta debugging (Zeller's ddmin) over its
//! steps, keeping a subsequence while the same defect class still breaks
//! (steps name what they touch by index modulo what exists, so any
//! subsequence runs).

use crate::known;
use crate::run::{Scenario, run_steps};
use crate::steps::Step;

/// Whether `steps` still breaks the class `class`.
fn fails(sc: &Scenario, steps: &[Step], class: &str) -> bool {
    run_steps(&sc.sources, sc.foreign, steps)
        .violations
        .iter()
        .any(|(_, v)| known::classify(v) == class)
}

/// The smallest subsequence found of the steps up to the failing one that
/// still breaks `class`, and how many runs it took.
pub fn shrink(sc: &Scenario, upto: usize, class: &str) -> (Vec<Step>, usize) {
    let mut steps: Vec<Step> = sc.steps[..=upto.min(sc.steps.len().saturating_sub(1))].to_vec();
    let mut runs = 0usize;
    let mut n = 2usize;
    while steps.len() >= 2 {
        let chunk = steps.len().div_ceil(n);
        let mut reduced = false;
        let mut start = 0;
        while start < steps.len() {
            let end = (start + chunk).min(steps.len());
            let mut candidate = steps[..start].to_vec();
            candidate.extend_from_slice(&steps[end..]);
            runs += 1;
            if !candidate.is_empty() && fails(sc, &candidate, class) {
                steps = candidate;
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
            start = end;
        }
        if !reduced {
            if n >= steps.len() {
                break;
            }
            n = (n * 2).min(steps.len());
        }
    }
    (steps, runs)
}
