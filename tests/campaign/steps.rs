//! The step vocabulary, and how a seed draws a fleet and a sequence of
//! steps from it. A step names what it touches by index (modulo what
//! exists when it runs), so any subsequence of a run is still a run: what
//! shrinking needs.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::model::{CLUSTERS, SHAPES, SliceM, SourceM, TargetM, WhenBusy, Window};

/// A cloud fault for the next reconcile (the faults of a step end with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudFault {
    /// 503 on a pool create.
    CreateUnavailable,
    /// A pool create whose operation ends in a stockout.
    CreateStockout,
    /// A policy insert refused (quota, 503).
    PolicyUnavailable,
    /// 503 on a pool delete.
    DeleteUnavailable,
    /// GKE's "incompatible operation" on a pool update.
    UpdateBusy,
    /// 503 on a cluster's pool list (the scope is unobserved).
    ListUnavailable,
}

impl CloudFault {
    pub const ALL: &'static [CloudFault] = &[
        CloudFault::CreateUnavailable,
        CloudFault::CreateStockout,
        CloudFault::PolicyUnavailable,
        CloudFault::DeleteUnavailable,
        CloudFault::UpdateBusy,
        CloudFault::ListUnavailable,
    ];
}

/// How a cluster's Kubernetes API answers from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeState {
    Up,
    Unreachable,
    Forbidden,
    /// Not reached on purpose: no Google token it would accept.
    NoToken,
}

/// How a reconcile ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Runs to its end.
    None,
    /// Ctrl-C once `n` steps have started: no new step starts.
    Stop(u8),
    /// SIGKILL: the process is gone after `n` polls of its future.
    Kill(u8),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    // ---------------------------------------------------------------- runs
    /// `apply` of source `src` (how it ends: `cut`).
    Apply { src: usize, cut: Cut },
    /// `destroy` (without `--disrupt`) of source `src`.
    Destroy { src: usize },
    // ---------------------------------------------------------- spec edits
    /// A replacing change: capacity spot ⇄ on-demand.
    Replace { src: usize, slice: usize },
    /// A rename, declared (`previousNames`) or not.
    Rename {
        src: usize,
        slice: usize,
        declared: bool,
    },
    /// The Target points at another cluster (`gke.name`).
    Move {
        src: usize,
        target: usize,
        to: usize,
    },
    /// A slice goes to another Target of the same zone.
    Retarget { src: usize, slice: usize, to: usize },
    /// `replicas: n`.
    Scale { src: usize, slice: usize, to: u32 },
    /// A slice file removed, or back.
    ToggleFile { src: usize, file: u8 },
    /// `preventDestroy` set or lifted.
    Protect { src: usize, slice: usize, on: bool },
    /// The slice's `whenBusy`.
    Policy {
        src: usize,
        slice: usize,
        when_busy: Option<WhenBusy>,
    },
    /// The slice's window.
    SetWindow {
        src: usize,
        slice: usize,
        window: Option<Window>,
    },
    // ------------------------------------------------------------ workloads
    /// A pod starts on a Node of a live pool (picked by index among the
    /// pools with Nodes), annotated do-not-disrupt or not.
    StartPod { pool: usize, dnd: bool },
    /// A running pod ends (`Succeeded`).
    EndPod { pod: usize },
    /// A JobSet is submitted in the cluster of a workload-enabled Target
    /// (picked by index among them): its leader pod pending, asking for a
    /// v6e 2x2 slice. Names come from a small set, namespaces from two, so
    /// one JobSet in two clusters, and a JobSet of another namespace with
    /// the same name, both happen.
    SubmitJobSet {
        target: usize,
        name: usize,
        ns: usize,
    },
    /// A pending JobSet's leader pod is scheduled onto a pool of its
    /// cluster made for a JobSet of its name, if there is one.
    RunJobSet { jobset: usize },
    /// A JobSet ends (`Completed`, long ago: its grace period is over).
    EndJobSet { jobset: usize },
    /// The source's ownerId changes (every Target of it), or changes back:
    /// its live resources carry the old one, so they are another owner's
    /// now ([Changing a Target's ownerId]). Drawn by [`owner_change`].
    OwnerChange { src: usize },
    /// The same JobSet (namespace and name) submitted in every cluster a
    /// workload-enabled Target serves where it does not run yet: a
    /// pipeline deployed to two regions (issue 36, case 1). Drawn in the
    /// twin fleets ([`twin`]).
    SubmitJobSetEverywhere { name: usize, ns: usize },
    // --------------------------------------------------------------- faults
    /// A cloud fault for the next reconcile.
    Fault(CloudFault),
    /// A cluster's Kubernetes API from now on.
    Kube { cluster: usize, state: KubeState },
    /// The next reconcile lists node pools as they were when the previous
    /// reconcile started (a lagging list; a restart from an older view).
    StaleView,
}

impl Step {
    /// The kind, for classification and the docs' vocabulary table.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Apply { cut: Cut::None, .. } => "apply",
            Step::Apply {
                cut: Cut::Stop(_), ..
            } => "apply_ctrl_c",
            Step::Apply {
                cut: Cut::Kill(_), ..
            } => "apply_sigkill",
            Step::Destroy { .. } => "destroy",
            Step::Replace { .. } => "replacing_change",
            Step::Rename { declared: true, .. } => "rename_declared",
            Step::Rename { .. } => "rename_undeclared",
            Step::Move { .. } => "target_moved",
            Step::Retarget { .. } => "slice_to_other_target",
            Step::Scale { .. } => "scale",
            Step::ToggleFile { .. } => "file_removed_or_back",
            Step::Protect { on: false, .. } => "protection_lifted",
            Step::Protect { .. } => "protection_set",
            Step::Policy { .. } => "when_busy",
            Step::SetWindow { .. } => "window",
            Step::StartPod { dnd: true, .. } => "pod_do_not_disrupt",
            Step::StartPod { .. } => "pod",
            Step::EndPod { .. } => "pod_ends",
            Step::SubmitJobSet { .. } => "jobset_submitted",
            Step::RunJobSet { .. } => "jobset_runs",
            Step::EndJobSet { .. } => "jobset_ends",
            Step::SubmitJobSetEverywhere { .. } => "jobset_in_two_clusters",
            Step::Fault(_) => "cloud_fault",
            Step::StaleView => "stale_view",
            Step::OwnerChange { .. } => "owner_id_changed",
            Step::Kube {
                state: KubeState::NoToken,
                ..
            } => "kube_no_token",
            Step::Kube {
                state: KubeState::Up,
                ..
            } => "kube_up",
            Step::Kube { .. } => "kube_unreachable_or_forbidden",
        }
    }
}

fn when_busy(rng: &mut ChaCha8Rng) -> Option<WhenBusy> {
    match rng.random_range(0..4) {
        0 => None,
        1 => Some(WhenBusy::Wait),
        2 => Some(WhenBusy::Drain),
        _ => Some(WhenBusy::Replace),
    }
}

/// The fleet a seed starts from: one source, or two (with the same
/// ownerId half the time: two spec directories of one team).
pub fn fleet(rng: &mut ChaCha8Rng) -> Vec<SourceM> {
    let n_sources = if rng.random_bool(0.35) { 2 } else { 1 };
    let shared_owner = rng.random_bool(0.5);
    let mut out = Vec::new();
    for id in 0..n_sources {
        let owner = if id == 0 || shared_owner {
            "team".to_string()
        } else {
            format!("team{id}")
        };
        let mut targets = Vec::new();
        for t in 0..rng.random_range(1..=3usize) {
            let zone = SHAPES[rng.random_range(0..SHAPES.len())].zone;
            targets.push(TargetM {
                name: format!("t{id}{t}"),
                workloads: zone == "us-central1-b" && rng.random_bool(0.5),
                zone,
                cluster: CLUSTERS[rng.random_range(0..CLUSTERS.len())],
                when_busy: if rng.random_bool(0.3) {
                    when_busy(rng)
                } else {
                    None
                },
            });
        }
        let mut slices = Vec::new();
        for s in 0..rng.random_range(1..=4usize) {
            let target = rng.random_range(0..targets.len());
            let zone = targets[target].zone;
            let shapes: Vec<usize> = (0..SHAPES.len())
                .filter(|i| SHAPES[*i].zone == zone)
                .collect();
            slices.push(SliceM {
                name: format!("{}{s}", ["a", "b"][id]),
                target,
                shape: shapes[rng.random_range(0..shapes.len())],
                replicas: rng.random_range(1..=3),
                spot: rng.random_bool(0.3),
                prevent_destroy: rng.random_bool(0.15),
                when_busy: when_busy(rng),
                window: match rng.random_range(0..5) {
                    0 => Some(Window::Open),
                    1 => Some(Window::Closed),
                    _ => None,
                },
                previous_names: Vec::new(),
                file: rng.random_range(0..2),
            });
        }
        out.push(SourceM {
            id,
            owner,
            targets,
            slices,
            removed_files: Default::default(),
        });
    }
    out
}

/// The steps of a run: an apply of every source first (the fleet exists),
/// then `n` steps, a third of them applies.
pub fn steps(rng: &mut ChaCha8Rng, sources: &[SourceM], n: usize) -> Vec<Step> {
    let mut out: Vec<Step> = (0..sources.len())
        .map(|src| Step::Apply {
            src,
            cut: Cut::None,
        })
        .collect();
    let src = |rng: &mut ChaCha8Rng| rng.random_range(0..sources.len());
    let idx = |rng: &mut ChaCha8Rng| (rng.next_u32() % 8) as usize;
    for _ in 0..n {
        let s = match rng.random_range(0..100) {
            0..=29 => Step::Apply {
                src: src(rng),
                cut: match rng.random_range(0..10) {
                    0 => Cut::Stop(rng.random_range(0..4)),
                    1 => Cut::Kill(rng.random_range(1..40)),
                    _ => Cut::None,
                },
            },
            30..=31 => Step::Destroy { src: src(rng) },
            32..=35 => Step::Replace {
                src: src(rng),
                slice: idx(rng),
            },
            36..=39 => Step::Rename {
                src: src(rng),
                slice: idx(rng),
                declared: rng.random_bool(0.5),
            },
            40..=43 => Step::Move {
                src: src(rng),
                target: idx(rng),
                to: rng.random_range(0..CLUSTERS.len()),
            },
            44..=45 => Step::Retarget {
                src: src(rng),
                slice: idx(rng),
                to: idx(rng),
            },
            46..=50 => Step::Scale {
                src: src(rng),
                slice: idx(rng),
                to: rng.random_range(0..=3),
            },
            51..=52 => Step::ToggleFile {
                src: src(rng),
                file: rng.random_range(0..2),
            },
            53..=55 => Step::Protect {
                src: src(rng),
                slice: idx(rng),
                on: rng.random_bool(0.3),
            },
            56..=58 => Step::Policy {
                src: src(rng),
                slice: idx(rng),
                when_busy: when_busy(rng),
            },
            59..=60 => Step::SetWindow {
                src: src(rng),
                slice: idx(rng),
                window: match rng.random_range(0..3) {
                    0 => None,
                    1 => Some(Window::Open),
                    _ => Some(Window::Closed),
                },
            },
            61..=77 => Step::StartPod {
                pool: idx(rng),
                dnd: rng.random_bool(0.15),
            },
            78..=81 => Step::EndPod { pod: idx(rng) },
            82..=84 => Step::SubmitJobSet {
                target: idx(rng),
                name: rng.random_range(0..2),
                ns: usize::from(rng.random_bool(0.3)),
            },
            85..=86 => Step::RunJobSet { jobset: idx(rng) },
            87 => Step::EndJobSet { jobset: idx(rng) },
            88..=89 => Step::StaleView,
            90..=93 => Step::Fault(CloudFault::ALL[rng.random_range(0..CloudFault::ALL.len())]),
            _ => Step::Kube {
                cluster: rng.random_range(0..CLUSTERS.len()),
                state: match rng.random_range(0..5) {
                    0 | 1 => KubeState::Up,
                    2 => KubeState::Unreachable,
                    3 => KubeState::Forbidden,
                    _ => KubeState::NoToken,
                },
            },
        };
        out.push(s);
    }
    out
}

/// Inserts `block` into `steps` in order, at random places after the first
/// applies (one per source: the fleet exists).
fn insert_in_order(
    rng: &mut ChaCha8Rng,
    sources: usize,
    steps: &mut Vec<Step>,
    block: impl IntoIterator<Item = Step>,
) {
    let mut at = sources.min(steps.len());
    for st in block {
        at = rng.random_range(at..=steps.len());
        steps.insert(at, st);
        at += 1;
    }
}

/// An ownerId change: one seed in six, drawn from a stream of its own
/// (`ChaCha8Rng` stream 2 of the seed), so every other draw is unchanged.
/// A source's ownerId changes at a random place after the first applies,
/// an apply follows at a random later place, and half the time the ownerId
/// changes back later (the documented way back), then another apply.
pub fn owner_change(seed: u64, sources: &[SourceM], steps: &mut Vec<Step>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(2);
    if !rng.random_bool(1.0 / 6.0) || sources.is_empty() {
        return;
    }
    let src = rng.random_range(0..sources.len());
    let mut block = vec![
        Step::OwnerChange { src },
        Step::Apply {
            src,
            cut: Cut::None,
        },
    ];
    if rng.random_bool(0.5) {
        block.push(Step::OwnerChange { src });
        block.push(Step::Apply {
            src,
            cut: Cut::None,
        });
    }
    insert_in_order(&mut rng, sources.len(), steps, block);
}

/// Twin fleets (issue 36, case 1): one seed in four, drawn from a stream of
/// its own (`ChaCha8Rng` stream 1 of the seed), so the fleet and steps every
/// other seed draws are unchanged. A twin fleet has workload-enabled Targets
/// on two clusters (source 0 gains Target `t0w`, `whenBusy: drain` half the
/// time, on a cluster no workload-enabled Target serves, when fewer than two
/// clusters are served), and its steps gain, at random places in order, the
/// same JobSet submitted in both, an apply, its leaders run, one of the
/// JobSets ends, and an apply.
pub fn twin(seed: u64, sources: &mut [SourceM], steps: &mut Vec<Step>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(1);
    if !rng.random_bool(0.25) || sources.is_empty() {
        return;
    }
    let served = |sources: &[SourceM]| {
        let mut c: Vec<&'static str> = sources
            .iter()
            .flat_map(|s| s.targets.iter())
            .filter(|t| t.workloads)
            .map(|t| t.cluster)
            .collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    if served(sources).len() < 2 {
        let taken = served(sources);
        let free: Vec<&'static str> = CLUSTERS
            .iter()
            .copied()
            .filter(|c| !taken.contains(c))
            .collect();
        for cluster in free.into_iter().take(2 - taken.len()) {
            let n = sources[0].targets.len();
            sources[0].targets.push(TargetM {
                name: format!("t0w{n}"),
                zone: "us-central1-b",
                cluster,
                when_busy: rng.random_bool(0.5).then_some(WhenBusy::Drain),
                workloads: true,
            });
        }
    }
    let (name, ns) = (rng.random_range(0..2), usize::from(rng.random_bool(0.3)));
    let src = |rng: &mut ChaCha8Rng| rng.random_range(0..sources.len());
    let block = [
        Step::SubmitJobSetEverywhere { name, ns },
        Step::Apply {
            src: src(&mut rng),
            cut: Cut::None,
        },
        Step::RunJobSet {
            jobset: (rng.next_u32() % 8) as usize,
        },
        Step::RunJobSet {
            jobset: (rng.next_u32() % 8) as usize,
        },
        Step::EndJobSet {
            jobset: (rng.next_u32() % 8) as usize,
        },
        Step::Apply {
            src: src(&mut rng),
            cut: Cut::None,
        },
    ];
    // After the first applies (the fleet exists), in order, at random places.
    insert_in_order(&mut rng, sources.len(), steps, block);
}

/// A fleet `validate` accepts: one workload-enabled Target per cluster in a
/// source (two are refused at file:line:column since issue 36: they would
/// relabel each other's pools), so the later ones have workloads off.
pub fn one_workload_target_per_cluster(sources: &mut [SourceM]) {
    for s in sources {
        let mut served: Vec<&'static str> = Vec::new();
        for t in &mut s.targets {
            if t.workloads {
                if served.contains(&t.cluster) {
                    t.workloads = false;
                } else {
                    served.push(t.cluster);
                }
            }
        }
    }
}
