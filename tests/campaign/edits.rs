//! Spec edits on a source's model: the documented refactors of a spec
//! repository (docs/planning-and-safety.md, "Changing a fleet safely").
//! Indices wrap around what exists, so every edit applies to any model.

use crate::model::{CLUSTERS, SourceM};
use crate::steps::Step;

pub fn apply(m: &mut SourceM, step: &Step) {
    let n = m.slices.len();
    match step {
        Step::Replace { slice, .. } => {
            let s = &mut m.slices[slice % n];
            s.spot = !s.spot;
        }
        Step::Rename {
            slice, declared, ..
        } => {
            let s = &mut m.slices[slice % n];
            let old = s.name.clone();
            // a0 → a0r → a0rr: a new name, never one in use.
            s.name = format!("{old}r");
            if *declared {
                s.previous_names.push(old);
            }
        }
        Step::Move { target, to, .. } => {
            let t = target % m.targets.len();
            m.targets[t].cluster = CLUSTERS[to % CLUSTERS.len()];
        }
        Step::Retarget { slice, to, .. } => {
            let i = slice % n;
            let zone = m.targets[m.slices[i].target].zone;
            let same: Vec<usize> = (0..m.targets.len())
                .filter(|t| m.targets[*t].zone == zone)
                .collect();
            m.slices[i].target = same[to % same.len()];
        }
        Step::Scale { slice, to, .. } => m.slices[slice % n].replicas = *to,
        // Removed if present, back if removed.
        Step::ToggleFile { file, .. } if !m.removed_files.remove(file) => {
            m.removed_files.insert(*file);
        }
        Step::Protect { slice, on, .. } => m.slices[slice % n].prevent_destroy = *on,
        Step::Policy {
            slice, when_busy, ..
        } => m.slices[slice % n].when_busy = *when_busy,
        Step::SetWindow { slice, window, .. } => m.slices[slice % n].window = *window,
        Step::OwnerChange { .. } => {
            m.owner = match m.owner.strip_suffix("-new") {
                Some(old) => old.to_string(),
                None => format!("{}-new", m.owner),
            };
        }
        _ => {}
    }
}
