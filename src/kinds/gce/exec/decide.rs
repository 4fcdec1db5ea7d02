//! The bootstrap's decisions, apart from its doing: [`decide`] is a pure
//! function from what one pass of the drive sees (the MIG's VMs, their
//! Nodes, what each VM reports, whether a token and the CA hash are in
//! hand, what earlier passes learned, the time into the drive) to the
//! [`Move`]s it makes. No I/O and no clock: the drive
//! (`exec/drive.rs`) observes, calls it, performs the moves and sleeps.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::kind::ownership;
use crate::kinds::gce::nodes::NodeView;
use crate::kinds::gce::render::{NodeGroup, TPU_RESOURCE};

/// How long a VM may keep reporting failures before the step fails.
pub const FAILING_GRACE: Duration = Duration::from_secs(60);

/// What a running VM without a Node reported in one pass (read only while
/// slicectl bootstraps the slice).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probe {
    /// Its bootstrap status (guest attribute `slicectl/bootstrap`:
    /// `waiting-for-token`, `joining`, `joined`, `failed: …`), if any.
    pub status: Option<String>,
    /// Whether its metadata still holds a join token: read only when it
    /// says it joined.
    pub holds_token: Option<bool>,
}

impl Probe {
    /// A VM that says it joined, whose token slicectl already removed (it
    /// saw its Node then), has lost its Node: no token makes its kubelet
    /// register again.
    pub fn lost_its_node(&self) -> bool {
        self.status.as_deref() == Some("joined") && self.holds_token == Some(false)
    }
}

/// What earlier passes of one drive learned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    /// Joined VMs whose join token was removed from their metadata.
    pub cleaned: BTreeSet<String>,
    /// When (time into the drive) each VM began reporting failures.
    pub failing_since: BTreeMap<String, Duration>,
    /// What each VM last reported.
    pub last_status: BTreeMap<String, String>,
    /// VMs recreated once already (never twice).
    pub recreated: BTreeSet<String>,
}

impl Memory {
    /// Takes in what the VMs reported in a pass `elapsed` into the drive
    /// (a VM that lost its Node excepted: its report is not a bootstrap's).
    pub fn note(&mut self, probes: &BTreeMap<String, Probe>, elapsed: Duration) {
        for (vm, p) in probes {
            let Some(s) = &p.status else {
                continue;
            };
            if p.lost_its_node() {
                continue;
            }
            if s.starts_with("failed") {
                self.failing_since.entry(vm.clone()).or_insert(elapsed);
            } else {
                self.failing_since.remove(vm);
            }
            self.last_status.insert(vm.clone(), s.clone());
        }
    }

    /// Forgets what was learned about VMs that were just recreated (they
    /// boot again as new ones), and remembers they were.
    pub fn recreated(&mut self, vms: &[String]) {
        for v in vms {
            self.failing_since.remove(v);
            self.last_status.remove(v);
            self.cleaned.remove(v);
            self.recreated.insert(v.clone());
        }
    }
}

/// What one pass of the drive sees.
#[derive(Debug, Clone)]
pub struct Seen<'a> {
    /// The slice replica's Nodes as they should be.
    pub want: &'a NodeGroup,
    /// The plan offered to recreate VMs whose Node is gone (reason
    /// `node_lost`).
    pub may_recreate: bool,
    /// The step's timeout, as planned (the drive's deadline is it, at
    /// least 1 s).
    pub timeout: Duration,
    /// Time into the drive.
    pub elapsed: Duration,
    /// The MIG's VMs and their status (`RUNNING`, …), by name.
    pub vms: BTreeMap<String, Option<String>>,
    /// The first error of the VMs' last creation attempt (`code`,
    /// `message`), if any.
    pub creation_error: Option<(String, String)>,
    /// The Nodes of the MIG's VMs (by providerID).
    pub nodes: Vec<NodeView>,
    /// What each running VM without a Node reported (bootstrapped slices).
    pub probes: BTreeMap<String, Probe>,
    /// A bootstrap token is in hand.
    pub has_token: bool,
    /// The cluster CA's hash is in hand.
    pub has_ca_hash: bool,
    /// What earlier passes learned.
    pub memory: &'a Memory,
}

/// A move of the drive, in the order [`decide`] lists them. A pass ends with
/// one of the moves that end it: a failure, [`Move::TimeOut`] or
/// [`Move::Wait`] ([`Move::Finish`] ends the drive when it completes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// The MIG has not created every VM and says why (a stockout): BULK
    /// none, INDIVIDUAL maybe some. Fail with the cloud's words (a VM's
    /// last attempt, else the bulk operation's last check, else
    /// `listErrors`).
    FailStockout { code: String, message: String },
    /// Bring a Node's labels (`None`: remove) and, when one is missing, its
    /// taints (the whole list, `key=value:Effect`) to the group's.
    LabelNode {
        node: String,
        labels: BTreeMap<String, Option<String>>,
        taints: Option<Vec<String>>,
    },
    /// Read the cluster CA's hash (for the join values).
    FetchCaHash,
    /// Reuse the slice replica's bootstrap token while it has enough time
    /// left, else mint one.
    ObtainToken,
    /// Remove the join token from a joined VM's metadata (nothing is
    /// written when it is gone already).
    RemoveToken { vm: String },
    /// Write the join token, API endpoint and CA hash into a VM's metadata
    /// (nothing is written when they are there already).
    HandOut { vm: String },
    /// Recreate, through the MIG, VMs whose Node is gone: they boot again
    /// from the template and join as new ones.
    Recreate { vms: Vec<String> },
    /// Fail: VMs whose Node is gone, which the plan did not offer to
    /// recreate (or which were recreated once already).
    FailNodeLost { vms: Vec<String> },
    /// Fail: VMs whose bootstrap failed.
    FailBootstrap { message: String },
    /// Every Node Ready with its chips and every token removed: read the
    /// VMs in `confirm` once more, and when none still holds a token,
    /// delete the replica's bootstrap Secrets; the step is done.
    Finish { confirm: Vec<String> },
    /// Fail: the deadline passed.
    TimeOut { message: String },
    /// Look again after this long.
    Wait(Duration),
}

/// The stockout a MIG's VMs show, if any: a VM the MIG has not created
/// (no status) and an error saying why (a VM's last attempt, the bulk
/// operation's last check or `listErrors`). BULK creates all VMs or none;
/// INDIVIDUAL (on-demand and spot slices) may have created some: a TPU
/// slice is all-or-nothing, so a partial one is a stockout all the same.
/// The MIG keeps retrying either way.
pub fn stockout<'a>(
    vms: &BTreeMap<String, Option<String>>,
    creation_error: Option<&'a (String, String)>,
) -> Option<&'a (String, String)> {
    let uncreated = vms.values().any(Option::is_none);
    creation_error.filter(|_| uncreated)
}

/// The failure of a stockout: the cloud's words, and how many VMs exist
/// when some do (an INDIVIDUAL MIG's partial slice).
fn stockout_move(vms: &BTreeMap<String, Option<String>>, code: &str, message: &str) -> Move {
    let created = vms.values().filter(|s| s.is_some()).count();
    let message = if created == 0 {
        message.to_string()
    } else {
        format!(
            "{message} ({created} of {} VM(s) created: a partial TPU slice is not a slice; the MIG \
             keeps creating the rest, and the VMs that run are billed meanwhile)",
            vms.len()
        )
    };
    Move::FailStockout {
        code: code.to_string(),
        message,
    }
}

/// Whether a VM's bootstrap status says it stopped trying (the startup
/// script's last attempt: `failed: … (attempt N/N)`).
pub fn gave_up(status: &str) -> bool {
    status
        .rsplit_once("(attempt ")
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .and_then(|r| r.split_once('/'))
        .is_some_and(|(n, of)| n == of)
}

/// How long to wait between passes, `elapsed` into the drive.
pub fn poll_delay(elapsed: Duration) -> Duration {
    (elapsed / 10).clamp(Duration::from_millis(500), Duration::from_secs(5))
}

/// The move that brings a Node's labels and taints to the group's, if any
/// differ.
pub fn label_move(want: &NodeGroup, n: &NodeView) -> Option<Move> {
    let mut labels: BTreeMap<String, Option<String>> = want
        .labels
        .iter()
        .filter(|(key, v)| n.labels.get(*key) != Some(v))
        .map(|(key, v)| (key.clone(), Some(v.clone())))
        .collect();
    if !want.labels.contains_key(ownership::PREVENT_DESTROY)
        && n.labels.contains_key(ownership::PREVENT_DESTROY)
    {
        labels.insert(ownership::PREVENT_DESTROY.to_string(), None);
    }
    let missing_taint = want.taints.iter().any(|t| !n.taints.contains(t));
    let taints = missing_taint.then(|| {
        let mut all: BTreeSet<String> = n.taints.iter().cloned().collect();
        all.extend(want.taints.iter().cloned());
        all.into_iter().collect()
    });
    if labels.is_empty() && taints.is_none() {
        return None;
    }
    Some(Move::LabelNode {
        node: n.name.clone(),
        labels,
        taints,
    })
}

/// Kubernetes' version skew policy for a kubelet joining a cluster: never
/// newer than the API server, at most three minors older
/// (kubernetes.io/releases/version-skew-policy, "kubelet"). `None` when the
/// kubelet's minor may join; else what is wrong and what to do.
pub fn skew_problem(kubelet: &str, server: (u32, u32)) -> Option<String> {
    let (major, minor) = kubelet.split_once('.')?;
    let (major, minor): (u32, u32) = (major.parse().ok()?, minor.parse().ok()?);
    let (s_major, s_minor) = server;
    if major != s_major || minor > s_minor || minor + 3 < s_minor {
        return Some(format!(
            "bootstrap.kubeadm.kubernetesVersion {kubelet} cannot join this cluster, whose API server is \
             {s_major}.{s_minor}: a kubelet may be at most three minors older than the API server and \
             never newer (Kubernetes version skew policy); set it to {s_major}.{} … {s_major}.{s_minor}",
            s_minor.saturating_sub(3)
        ));
    }
    None
}

/// The moves of one pass: fail on a stockout; label the Nodes that joined;
/// get a token and the CA hash while a RUNNING VM has not joined; remove
/// the token from VMs that joined, hand it to those that did not; recreate
/// (or fail on) VMs whose Node was lost; fail on VMs that gave up or kept
/// failing; finish once every Node is Ready and clean; else time out or
/// wait.
pub fn decide(seen: &Seen<'_>) -> Vec<Move> {
    let want = seen.want;
    if let Some((code, message)) = stockout(&seen.vms, seen.creation_error.as_ref()) {
        return vec![stockout_move(&seen.vms, code, message)];
    }
    let running: Vec<&str> = seen
        .vms
        .iter()
        .filter(|(_, s)| s.as_deref() == Some("RUNNING"))
        .map(|(n, _)| n.as_str())
        .collect();
    let joined: BTreeSet<&str> = seen
        .nodes
        .iter()
        .filter_map(|n| n.provider_id.strip_prefix(&want.provider_id_prefix))
        .collect();
    let mut moves: Vec<Move> = seen
        .nodes
        .iter()
        .filter_map(|n| label_move(want, n))
        .collect();
    let mut lost: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    if want.bootstrap {
        if running.iter().any(|i| !joined.contains(i)) {
            if !seen.has_ca_hash {
                moves.push(Move::FetchCaHash);
            }
            if !seen.has_token {
                moves.push(Move::ObtainToken);
            }
        }
        for vm in &running {
            if joined.contains(vm) {
                if !seen.memory.cleaned.contains(*vm) {
                    moves.push(Move::RemoveToken { vm: vm.to_string() });
                }
                continue;
            }
            let probe = seen.probes.get(*vm).cloned().unwrap_or_default();
            if probe.lost_its_node() {
                lost.push(vm.to_string());
                continue;
            }
            moves.push(Move::HandOut { vm: vm.to_string() });
            // A VM retries on its own (a token not yet signed into
            // cluster-info, an API server restarting): fail the step only
            // once it gave up or kept failing.
            if let Some(s) = probe.status.filter(|s| s.starts_with("failed")) {
                let since = seen
                    .memory
                    .failing_since
                    .get(*vm)
                    .copied()
                    .unwrap_or(seen.elapsed);
                if gave_up(&s) || seen.elapsed.saturating_sub(since) >= FAILING_GRACE {
                    failures.push(format!("VM {vm}: {s}"));
                }
            }
        }
    }
    if !lost.is_empty() {
        // The plan offered the fix (reason node_lost): recreate them once
        // through the MIG; each boots again from the template with fresh
        // metadata and joins like a new VM on the next passes.
        if !seen.may_recreate || lost.iter().any(|v| seen.memory.recreated.contains(v)) {
            moves.push(Move::FailNodeLost { vms: lost });
            return moves;
        }
        moves.push(Move::Recreate { vms: lost.clone() });
    }
    if !failures.is_empty() {
        moves.push(Move::FailBootstrap {
            message: format!(
                "{} of {} node(s) joined; {}",
                joined.len(),
                want.hosts,
                failures.join("; ")
            ),
        });
        return moves;
    }
    let hosts = want.hosts as usize;
    let ready = seen
        .nodes
        .iter()
        .filter(|n| n.ready_with(want.chips))
        .count();
    // Every joined VM is clean once this pass's removals are done.
    let all_cleaned = !want.bootstrap
        || running.iter().all(|i| {
            joined.contains(i) || (seen.memory.cleaned.contains(*i) && !lost.iter().any(|l| l == i))
        });
    if ready == hosts && joined.len() == hosts && all_cleaned {
        // Before calling it done, read every VM once more: a token removal
        // that did not land is written again on the next pass.
        let confirm = if want.bootstrap {
            running.iter().map(|i| i.to_string()).collect()
        } else {
            Vec::new()
        };
        moves.push(Move::Finish { confirm });
    }
    let deadline = seen.timeout.max(Duration::from_secs(1));
    if seen.elapsed >= deadline {
        // What each VM that has no Node last said, this pass included.
        let mut after = seen.memory.clone();
        after.note(&seen.probes, seen.elapsed);
        after.recreated(&lost);
        moves.push(Move::TimeOut {
            message: format!(
                "timed out after {:?}: {} of {} VM(s) RUNNING, {} node(s) joined, {} Ready with {} {TPU_RESOURCE}{}",
                seen.timeout,
                running.len(),
                want.hosts,
                joined.len(),
                ready,
                want.chips,
                after
                    .last_status
                    .iter()
                    .filter(|(i, _)| !joined.contains(i.as_str()))
                    .map(|(i, s)| format!("; VM {i} says: {s}"))
                    .collect::<String>()
            ),
        });
    } else {
        moves.push(Move::Wait(
            poll_delay(seen.elapsed).min(deadline - seen.elapsed),
        ));
    }
    moves
}

#[cfg(test)]
#[path = "decide/tests.rs"]
mod tests;
