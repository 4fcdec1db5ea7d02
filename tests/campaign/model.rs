//! The spec model a run edits: one or two spec sources, each with its
//! Targets and Slices, rendered to the YAML files slicectl loads. The
//! model is the oracle's view of what each source asks for (policies,
//! protection, names), independent of what slicectl made of it.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use slicectl::spec::{Fleet, SourceFile};

/// The project every Target lives in (a Target moved to another project is
/// not a move slicectl can see: docs/planning-and-safety.md).
pub const PROJECT: &str = "camp-project";
/// The GKE location of every cluster.
pub const LOCATION: &str = "us-central1";
/// The clusters a Target can point at.
pub const CLUSTERS: &[&str] = &["c0", "c1", "c2"];

/// What a busy replica's policy says (the product's own spelling).
pub use slicectl::spec::model::WhenBusy;

/// A disruption window: open now (every minute, for an hour), or closed
/// now (29 February only, in 2028 next). Both hold whatever the wall clock
/// says, so a run does not depend on when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Open,
    Closed,
}

/// A slice shape: accelerator, topology, the zone its Target needs, and
/// whether it makes a workload policy (tpu7x multi-host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub accelerator: &'static str,
    pub topology: &'static str,
    pub zone: &'static str,
}

pub const SHAPES: &[Shape] = &[
    Shape {
        accelerator: "tpu-v6e-slice",
        topology: "1x1",
        zone: "us-central1-b",
    },
    Shape {
        accelerator: "tpu-v6e-slice",
        topology: "2x2",
        zone: "us-central1-b",
    },
    Shape {
        accelerator: "tpu7x",
        topology: "2x2x2",
        zone: "us-central1-c",
    },
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetM {
    pub name: String,
    /// The zone family: the index of a [`SHAPES`] zone.
    pub zone: &'static str,
    pub cluster: &'static str,
    pub when_busy: Option<WhenBusy>,
    /// `workloads.enabled` (pending JobSets ask for slices; a v6e zone).
    pub workloads: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceM {
    pub name: String,
    /// Index into the source's Targets.
    pub target: usize,
    pub shape: usize,
    pub replicas: u32,
    pub spot: bool,
    pub prevent_destroy: bool,
    pub when_busy: Option<WhenBusy>,
    pub window: Option<Window>,
    pub previous_names: Vec<String>,
    /// Which file of the source it is written in.
    pub file: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceM {
    /// `s0`, `s1`: what the log calls it.
    pub id: usize,
    pub owner: String,
    pub targets: Vec<TargetM>,
    pub slices: Vec<SliceM>,
    /// Slice files removed from the source (their slices are gone).
    pub removed_files: BTreeSet<u8>,
}

impl SourceM {
    /// The slices in the specs now (not in a removed file).
    pub fn live_slices(&self) -> impl Iterator<Item = &SliceM> {
        self.slices
            .iter()
            .filter(|s| !self.removed_files.contains(&s.file))
    }

    /// The slice named `name` in the specs now, or one that declares it in
    /// `previousNames`.
    pub fn slice_claiming(&self, name: &str) -> Option<&SliceM> {
        self.live_slices().find(|s| s.name == name).or_else(|| {
            self.live_slices()
                .find(|s| s.previous_names.iter().any(|p| p == name))
        })
    }

    pub fn target_named(&self, name: &str) -> Option<&TargetM> {
        self.targets.iter().find(|t| t.name == name)
    }

    /// The YAML files of this source.
    pub fn files(&self) -> Vec<SourceFile> {
        let mut out = Vec::new();
        let mut t = String::new();
        for tg in &self.targets {
            let _ = write!(
                t,
                "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {{name: {}}}\nspec:\n  project: {PROJECT}\n  zone: {}\n  ownerId: {}\n  gke: {{location: {LOCATION}, name: {}}}\n",
                tg.name, tg.zone, self.owner, tg.cluster
            );
            if let Some(w) = tg.when_busy {
                let _ = writeln!(t, "  disruption: {{whenBusy: {}}}", w.as_str());
            }
            if tg.workloads {
                t.push_str(
                    "  workloads: {enabled: true, gracePeriod: 2m, rules: [{capacity: [onDemand, spot]}]}\n",
                );
            }
            t.push_str("---\n");
        }
        out.push(SourceFile {
            path: format!("s{}/targets.yaml", self.id).into(),
            text: t,
        });
        let files: BTreeSet<u8> = self.slices.iter().map(|s| s.file).collect();
        for f in files.difference(&self.removed_files) {
            let mut y = String::new();
            for s in self.slices.iter().filter(|s| s.file == *f) {
                let shape = SHAPES[s.shape];
                let _ = write!(
                    y,
                    "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: {}}}\nspec:\n  target: {}\n  backend: gke\n  accelerator: {}\n  topology: {}\n  replicas: {}\n",
                    s.name,
                    self.targets[s.target].name,
                    shape.accelerator,
                    shape.topology,
                    s.replicas
                );
                if s.spot {
                    y.push_str("  capacity: {type: spot}\n");
                }
                if s.prevent_destroy {
                    y.push_str("  lifecycle: {preventDestroy: true}\n");
                }
                if !s.previous_names.is_empty() {
                    let _ = writeln!(y, "  previousNames: [{}]", s.previous_names.join(", "));
                }
                if s.when_busy.is_some() || s.window.is_some() {
                    y.push_str("  disruption:\n");
                    if let Some(w) = s.when_busy {
                        let _ = writeln!(y, "    whenBusy: {}", w.as_str());
                    }
                    match s.window {
                        Some(Window::Open) => {
                            y.push_str("    windows: [{schedule: \"* * * * *\", duration: 1h}]\n")
                        }
                        Some(Window::Closed) => {
                            y.push_str("    windows: [{schedule: \"0 0 29 2 *\", duration: 1m}]\n")
                        }
                        None => {}
                    }
                }
                y.push_str("---\n");
            }
            out.push(SourceFile {
                path: format!("s{}/slices-{f}.yaml", self.id).into(),
                text: y,
            });
        }
        out
    }

    /// The fleet slicectl loads from this source, or why it refuses it.
    pub fn fleet(&self) -> Result<Fleet, String> {
        slicectl::spec::load(&self.files()).map_err(|d| {
            d.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    /// The resolved policy of a live replica of slice `slice` on Target
    /// `target` (by the stamp on its pool): the slice's fields over its
    /// Target's, as documented (docs/spec-reference.md).
    pub fn policy(&self, slice: &str, target: &str) -> (WhenBusy, Option<Window>) {
        let s = self.slice_claiming(slice);
        let t = s
            .map(|s| &self.targets[s.target])
            .or_else(|| self.target_named(target));
        let wb = s
            .and_then(|s| s.when_busy)
            .or_else(|| t.and_then(|t| t.when_busy))
            .unwrap_or(WhenBusy::Wait);
        (wb, s.and_then(|s| s.window))
    }
}
