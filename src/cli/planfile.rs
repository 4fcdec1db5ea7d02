//! Saved plans (`plan --out FILE`, `apply FILE`): the plan plus the targets
//! it was observed through, so that `apply FILE` can observe the same places
//! again and refuse when the live state has moved.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::plan::{FORMAT_VERSION, Plan};
use crate::spec::model::TargetSpec;
use crate::spec::{Fleet, Location, Target};

const KIND: &str = "slicectl-plan";

/// A saved plan file.
#[derive(Debug, Serialize, Deserialize)]
pub struct SavedPlan {
    /// Always `slicectl-plan`.
    pub kind: String,
    /// Plan format version.
    pub format_version: u32,
    /// Targets the plan observed (name, spec).
    pub targets: Vec<(String, TargetSpec)>,
    /// The plan.
    pub plan: Plan,
}

impl SavedPlan {
    /// A fleet with only the saved targets: enough to observe the same places.
    pub fn scope_fleet(&self) -> Fleet {
        let mut f = Fleet::default();
        for (name, spec) in &self.targets {
            f.targets.insert(
                name.clone(),
                Target {
                    name: name.clone(),
                    spec: spec.clone(),
                    location: Location {
                        file: "saved plan".into(),
                        line: 1,
                        column: 1,
                    },
                },
            );
        }
        f
    }
}

/// Writes the plan file.
pub fn save(path: &Path, plan: &Plan, fleet: &Fleet) -> Result<()> {
    let saved = SavedPlan {
        kind: KIND.to_string(),
        format_version: FORMAT_VERSION,
        targets: fleet
            .targets
            .values()
            .map(|t| (t.name.clone(), t.spec.clone()))
            .collect(),
        plan: plan.clone(),
    };
    let text = serde_json::to_string_pretty(&saved)?;
    std::fs::write(path, text)
        .with_context(|| format!("cannot write the plan file {}", path.display()))
}

/// Reads a plan file.
pub fn load(path: &Path) -> Result<SavedPlan> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the plan file {}", path.display()))?;
    let saved: SavedPlan = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a slicectl plan file (expected the output of `slicectl plan --out`)",
            path.display()
        )
    })?;
    if saved.kind != KIND || saved.format_version != FORMAT_VERSION {
        bail!(
            "{} is a {:?} file of format {}; this slicectl reads {KIND:?} format {FORMAT_VERSION}",
            path.display(),
            saved.kind,
            saved.format_version
        );
    }
    Ok(saved)
}
