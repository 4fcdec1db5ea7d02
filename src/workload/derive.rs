//! The one decision of workload-driven slices: pending leader pods to
//! slices, the Target's policy, and the release of slices whose JobSet
//! ended.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use jiff::Timestamp;

use super::{
    Demand, DemandView, DemandViews, Kept, LiveSlice, Mark, OPT_OUTS, Observed, ObservedJobSet,
    Origin, PendingPod, RELEASED_AT, Refused, Released, Skipped, keys,
};
use crate::plan::workload::{ClusterWorkloads, HostNode, Workloads};
use crate::resource::{ClusterRef, KubeRef};
use crate::spec::catalog;
use crate::spec::model::{
    Backend, Capacity, CapacityType, Reservation, SliceSpec, WorkloadCapacity, WorkloadRule,
    Workloads as Policy,
};
use crate::spec::{Fleet, Location, Slice, Target};

/// tpu-provisioner's `maxJobSetPrefixLength` (`podToNodePoolName`).
const JOBSET_PREFIX: usize = 34;
/// tpu-provisioner's `jobKeySuffixLength`.
const JOB_KEY_SUFFIX: usize = 5;
/// The Node label GKE puts the node pool's name in.
const NODEPOOL_LABEL: &str = "cloud.google.com/gke-nodepool";

/// The node pool of a JobSet's Job: tpu-provisioner's name,
/// `<first 34 of the JobSet's name>-<first 5 of the job-key>`
/// (`podToNodePoolName`, anchors §A.9), so that the pools a migrated
/// cluster's tpu-provisioner made are recognised by name, and a restarted
/// JobSet (same Job names, same job-keys) asks for the same pool. Refused
/// (with why) when GKE would refuse the name (a JobSet name that starts
/// with a digit or holds a '.'), or the job-key is too short.
pub fn pool_name(jobset: &str, job_key: &str) -> Result<String, String> {
    if job_key.len() < JOB_KEY_SUFFIX || !job_key.is_ascii() {
        return Err(format!(
            "job-key {job_key:?} is shorter than {JOB_KEY_SUFFIX} characters (JobSet writes a sha1)"
        ));
    }
    let prefix: String = jobset.chars().take(JOBSET_PREFIX).collect();
    let name = format!("{prefix}-{}", &job_key[..JOB_KEY_SUFFIX]);
    // GKE: `[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?`.
    let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && name.len() <= crate::spec::names::NODE_POOL_NAME_MAX;
    if ok {
        Ok(name)
    } else {
        Err(format!(
            "node pool name {name:?} (tpu-provisioner's <first 34 of the JobSet name>-<first 5 of the job-key>) \
             is not a GKE node pool name (a lowercase letter first, then lowercase letters, digits and '-'); \
             rename the JobSet"
        ))
    }
}

fn cluster_kube(t: &Target) -> Option<KubeRef> {
    t.spec.gke.as_ref().map(|g| {
        KubeRef::gke(&ClusterRef {
            project: t.spec.project.clone(),
            location: g.location.clone(),
            name: g.name.clone(),
        })
    })
}

fn flag(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    key: &str,
) -> bool {
    labels
        .get(key)
        .or_else(|| annotations.get(key))
        .map(String::as_str)
        == Some("true")
}

fn opted_out(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<&'static str> {
    OPT_OUTS.into_iter().find(|k| flag(labels, annotations, k))
}

fn meta<'a>(p: &'a PendingPod, key: &str) -> Option<&'a str> {
    p.annotations
        .get(key)
        .or_else(|| p.labels.get(key))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// tpu-provisioner's trigger (`creation_controller.go`, anchors §A.3): a
/// JobSet's leader pod (completion index 0), pending and unschedulable,
/// requesting `google.com/tpu` and selecting a TPU topology, not deleted.
pub fn is_trigger(p: &PendingPod) -> bool {
    meta(p, keys::JOBSET_NAME).is_some()
        && meta(p, keys::COMPLETION_INDEX) == Some("0")
        && p.unschedulable
        && p.tpu_chips > 0
        && p.node_selector.contains_key(keys::TOPOLOGY)
        && !p.deleting
}

/// Whether the pod is another provisioner's: a ProvisioningRequest (Kueue's
/// provisioning admission check with GKE's `queued-provisioning.gke.io`
/// class) or a pinned node pool.
fn other_provisioner(p: &PendingPod) -> Option<String> {
    if p.annotations
        .contains_key(keys::CONSUME_PROVISIONING_REQUEST)
        || p.node_selector
            .contains_key(keys::PROVISIONING_REQUEST_SELECTOR)
    {
        return Some(
            "its pods consume a ProvisioningRequest (Kueue's provisioning admission check): GKE provisions \
             them, slicectl leaves them alone"
                .to_string(),
        );
    }
    p.node_selector
        .get(keys::NODEPOOL)
        .map(|pool| format!("its pods select node pool {pool:?} (cloud.google.com/gke-nodepool): not slicectl's to provision"))
}

/// What the leader pod asks for.
struct Request {
    accelerator: String,
    topology: String,
    capacity: Capacity,
    wanted: WorkloadCapacity,
}

fn request(p: &PendingPod) -> Result<Request, String> {
    let sel = &p.node_selector;
    let accelerator = sel.get(keys::ACCELERATOR).cloned().ok_or_else(|| {
        format!(
            "the leader pod selects no {} (its TPU generation)",
            keys::ACCELERATOR
        )
    })?;
    let topology = sel.get(keys::TOPOLOGY).cloned().unwrap_or_default();
    let spot = sel.get(keys::SPOT).map(String::as_str) == Some("true");
    let flex = sel.get(keys::FLEX_START).map(String::as_str) == Some("true");
    let reservation = sel.get(keys::RESERVATION);
    let (kind, wanted) = match (spot, flex, reservation) {
        (false, false, None) => (CapacityType::OnDemand, WorkloadCapacity::OnDemand),
        (true, false, None) => (CapacityType::Spot, WorkloadCapacity::Spot),
        (false, true, None) => (CapacityType::FlexStart, WorkloadCapacity::FlexStart),
        (false, false, Some(_)) => (CapacityType::Reservation, WorkloadCapacity::Reservation),
        _ => {
            return Err(format!(
                "the leader pod selects more than one capacity type ({}, {}, {}): pick one",
                keys::SPOT,
                keys::FLEX_START,
                keys::RESERVATION
            ));
        }
    };
    Ok(Request {
        accelerator,
        topology,
        capacity: Capacity {
            kind,
            reservation: reservation.map(|name| Reservation {
                name: name.clone(),
                project: sel.get(keys::RESERVATION_PROJECT).cloned(),
            }),
            max_run_duration: None,
            // A pod selecting flex-start gets a plain flex-start pool, which
            // the cluster autoscaler scales up for it; a queued-provisioning
            // pool would wait for a ProvisioningRequest nobody submits (pods
            // that consume one are left alone, see `is_trigger`).
            queued: false,
        },
        wanted,
    })
}

/// The rule's verdict on a request: `Err((code, why))` when refused.
fn allowed(t: &Target, rule: &WorkloadRule, r: &Request) -> Result<(), (&'static str, String)> {
    if let Some(accs) = &rule.accelerators
        && !accs.contains(&r.accelerator)
    {
        return Err((
            "accelerator",
            format!(
                "accelerator {} is not allowed by Target {}'s workloads rule (allowed: {})",
                r.accelerator,
                t.name,
                accs.join(", ")
            ),
        ));
    }
    if let Some(g) = catalog::generation(&r.accelerator)
        && !t.spec.allow_unlisted_zone
        && !g.offered_in(&t.spec.zone)
    {
        return Err((
            "accelerator",
            format!(
                "accelerator {} is not offered in Target {}'s zone {}",
                r.accelerator, t.name, t.spec.zone
            ),
        ));
    }
    if let Some(topos) = &rule.topologies
        && !topos.contains(&r.topology)
    {
        return Err((
            "topology",
            format!(
                "topology {} is not allowed by Target {}'s workloads rule (allowed: {})",
                r.topology,
                t.name,
                topos.join(", ")
            ),
        ));
    }
    let caps = rule
        .capacity
        .clone()
        .unwrap_or_else(|| vec![WorkloadCapacity::OnDemand]);
    if !caps.contains(&r.wanted) {
        return Err((
            "capacity",
            format!(
                "capacity {} is not allowed by Target {}'s workloads rule (allowed: {})",
                r.wanted.as_str(),
                t.name,
                caps.iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(())
}

/// The catalogue's shape for the request, with the machine type whose
/// chips per host equal the pod's `google.com/tpu` request (slicectl's own
/// rule: the hosts are the topology's chips over that, not tpu-provisioner's
/// `ceil(chips/4)`, anchors §A.17 item 4).
fn shape(r: &Request, chips: u32) -> Result<catalog::SliceShape, String> {
    let g = catalog::generation(&r.accelerator).ok_or_else(|| {
        catalog::CatalogError::UnknownAccelerator {
            given: r.accelerator.clone(),
        }
        .to_string()
    })?;
    let m = g
        .machine_types
        .iter()
        .find(|m| m.chips_per_host == chips)
        .ok_or_else(|| {
            format!(
                "the leader pod requests {chips} google.com/tpu, but no {} machine type has {chips} chips per host \
                 (machine types: {})",
                g.accelerator,
                g.machine_types
                    .iter()
                    .map(|m| format!("{} ({} chips)", m.name, m.chips_per_host))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    catalog::resolve(&r.accelerator, &r.topology, Some(m.name)).map_err(|e| e.to_string())
}

/// Node labels from the pod's own selectors that GKE does not set (as
/// tpu-provisioner copies them: a selector the Nodes lack would keep the pod
/// pending), plus the rule's labels.
fn node_labels(p: &PendingPod, rule: &WorkloadRule) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = p
        .node_selector
        .iter()
        .filter(|(k, _)| {
            let prefix = k.split_once('/').map(|(p, _)| p).unwrap_or("");
            !(prefix.ends_with("google.com")
                || prefix.ends_with("kubernetes.io")
                || prefix.ends_with("k8s.io")
                || prefix == "slicectl.dev")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.extend(rule.labels.clone());
    out
}

/// Whether a git slice of `fleet` renders pool `pool` in `t`'s cluster.
fn git_pool(fleet: &Fleet, t: &Target, pool: &str) -> Option<String> {
    fleet.slices.values().find_map(|s| {
        let other = fleet.targets.get(&s.spec.target)?;
        let same = other.spec.project == t.spec.project && other.spec.gke == t.spec.gke;
        let hit = s.name == pool
            || (same
                && (0..s.spec.replicas).any(|r| crate::spec::names::node_pool(&s.name, r) == pool));
        hit.then(|| s.name.clone())
    })
}

/// A Target's `gracePeriod` (default [`super::DEFAULT_GRACE`]).
pub fn grace(policy: &Policy) -> std::time::Duration {
    policy
        .grace_period
        .as_deref()
        .and_then(|g| crate::spec::validate::parse_duration(g).ok())
        .unwrap_or(super::DEFAULT_GRACE)
}

fn since(now: Timestamp, at: Timestamp) -> std::time::Duration {
    std::time::Duration::try_from(now.duration_since(at)).unwrap_or_default()
}

/// Derives the workload slices of every workload-enabled Target of `fleet`:
/// the ones pending leader pods ask for (within the policy), and the fate
/// of the live ones (`live`) nothing pending asks for: kept while their
/// JobSet is active or within `gracePeriod` of its end, released after,
/// never while a pod runs on them, and never in a cluster that could not
/// be read. `now` is when the cluster was observed.
pub fn derive(
    fleet: &Fleet,
    views: &DemandViews,
    live: &[LiveSlice],
    workloads: &Workloads,
    now: Timestamp,
) -> Demand {
    let mut out = Demand::default();
    for t in fleet.targets.values() {
        let Some(policy) = t.spec.workloads.as_ref().filter(|w| w.enabled) else {
            continue;
        };
        let Some(kube) = cluster_kube(t) else {
            continue;
        };
        let mine: Vec<&LiveSlice> = live.iter().filter(|l| l.target == t.name).collect();
        let Some(DemandView::Seen(obs)) = views.get(&kube) else {
            for l in mine {
                out.kept.push(Kept {
                    pool: l.pool.clone(),
                    jobset: l.origin.jobset_ref(),
                    why: "unobserved: its cluster's JobSets or pods could not be listed"
                        .to_string(),
                });
            }
            continue;
        };
        let nodes = match workloads.clusters.get(&kube) {
            Some(ClusterWorkloads::Seen(n)) => Some(n.as_slice()),
            _ => None,
        };
        let asked = requests(fleet, t, policy, obs, &mine, &mut out);
        for l in mine {
            if asked.contains(l.pool.as_str()) {
                continue;
            }
            release_or_keep(t, policy, obs, l, (&kube, nodes), now, &mut out);
        }
    }
    out
}

/// The slices the pending leader pods of `t`'s cluster ask for; returns
/// the pools asked for.
fn requests(
    fleet: &Fleet,
    t: &Target,
    policy: &Policy,
    obs: &Observed,
    mine: &[&LiveSlice],
    out: &mut Demand,
) -> BTreeSet<String> {
    let jobsets: BTreeMap<(&str, &str), &ObservedJobSet> = obs
        .jobsets
        .iter()
        .map(|j| ((j.namespace.as_str(), j.name.as_str()), j))
        .collect();
    let mut asked: BTreeSet<String> = BTreeSet::new();
    // Chips asked for this cycle, per namespace (with the live ones: maxChips).
    let mut new_chips: BTreeMap<String, u32> = BTreeMap::new();
    let mut leaders: Vec<&PendingPod> = obs.pending.iter().filter(|p| is_trigger(p)).collect();
    leaders.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let mut skipped_seen: BTreeSet<String> = BTreeSet::new();
    for p in leaders {
        let Some(js_name) = meta(p, keys::JOBSET_NAME) else {
            continue;
        };
        let js_ref = format!("{}/{js_name}", p.namespace);
        let mut skip = |why: String| {
            if skipped_seen.insert(js_ref.clone()) {
                out.skipped.push(Skipped {
                    target: t.name.clone(),
                    jobset: js_ref.clone(),
                    why,
                });
            }
        };
        let Some(js) = jobsets.get(&(p.namespace.as_str(), js_name)) else {
            skip("its JobSet is not (yet) listed".to_string());
            continue;
        };
        if let Some(k) =
            opted_out(&p.labels, &p.annotations).or_else(|| opted_out(&js.labels, &js.annotations))
        {
            skip(format!("opted out ({k}: \"true\")"));
            continue;
        }
        if let Some(why) = other_provisioner(p) {
            skip(why);
            continue;
        }
        if js.deleting || js.ended.is_some() {
            continue;
        }
        let Some(job_key) = meta(p, keys::JOB_KEY) else {
            skip(format!(
                "its leader pod {} has no {} label",
                p.name,
                keys::JOB_KEY
            ));
            continue;
        };
        let origin = Origin {
            namespace: p.namespace.clone(),
            jobset: js.name.clone(),
            uid: js.uid.clone(),
            job_key: job_key.to_string(),
        };
        let mut refuse = |code: &'static str, message: String| {
            out.refused.push(Refused {
                target: t.name.clone(),
                namespace: origin.namespace.clone(),
                jobset: origin.jobset.clone(),
                uid: origin.uid.clone(),
                job_key: origin.job_key.clone(),
                code,
                message,
            });
        };
        let pool = match pool_name(&origin.jobset, &origin.job_key) {
            Ok(p) => p,
            Err(e) => {
                refuse("name", e);
                continue;
            }
        };
        if !asked.insert(pool.clone()) {
            continue;
        }
        if let Some(git) = git_pool(fleet, t, &pool) {
            refuse(
                "name_taken",
                format!(
                    "node pool {pool} is git slice {git}'s: a git slice wins the name; rename the JobSet"
                ),
            );
            continue;
        }
        let req = match request(p) {
            Ok(r) => r,
            Err(e) => {
                refuse("shape", e);
                continue;
            }
        };
        let Some(rule) = policy.rules.iter().find(|r| {
            r.namespaces
                .as_ref()
                .is_none_or(|ns| ns.contains(&origin.namespace))
        }) else {
            refuse(
                "no_rule",
                format!(
                    "no workloads rule of Target {} matches namespace {}; add one to the Target's workloads.rules",
                    t.name, origin.namespace
                ),
            );
            continue;
        };
        if let Err((code, why)) = allowed(t, rule, &req) {
            refuse(code, why);
            continue;
        }
        let shape = match shape(&req, p.tpu_chips) {
            Ok(s) => s,
            Err(e) => {
                refuse("shape", e);
                continue;
            }
        };
        if let Some(max) = rule.max_chips {
            let held: u32 = mine
                .iter()
                .filter(|l| l.origin.namespace == origin.namespace && l.pool != pool)
                .map(|l| l.chips)
                .sum();
            let fresh = new_chips.get(&origin.namespace).copied().unwrap_or(0);
            if held + fresh + shape.chips > max {
                refuse(
                    "max_chips",
                    format!(
                        "{} more chips would make namespace {}'s workload slices on Target {} hold {}, over its maxChips {max} \
                         ({held} held, {fresh} asked for this cycle)",
                        shape.chips,
                        origin.namespace,
                        t.name,
                        held + fresh + shape.chips
                    ),
                );
                continue;
            }
        }
        *new_chips.entry(origin.namespace.clone()).or_default() += shape.chips;
        out.slices.push(Slice {
            name: pool.clone(),
            spec: SliceSpec {
                target: t.name.clone(),
                backend: Backend::Gke,
                accelerator: req.accelerator.clone(),
                topology: shape.topology.clone(),
                machine_type: Some(shape.machine_type.to_string()),
                replicas: 1,
                capacity: req.capacity,
                node_labels: node_labels(p, rule).into_iter().collect(),
                taints: rule.taints.clone(),
                lifecycle: Default::default(),
                gce: None,
                previous_names: Vec::new(),
                node_pool_name: None,
                disruption: None,
            },
            shape,
            operation_timeout: crate::spec::DEFAULT_OPERATION_TIMEOUT,
            location: Location {
                file: PathBuf::from(format!("jobset:{}", origin.jobset_ref())),
                line: 1,
                column: 1,
            },
            workload: Some(origin),
        });
    }
    asked
}

/// `90s` → `1m30s`, for people.
fn shown(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// Releases a live workload slice no pending pod asks for, or keeps it
/// (and says why): kept while its JobSet is active, or within the grace
/// period of its end (its Completed/Failed condition's time, or the
/// [`RELEASED_AT`] stamp slicectl wrote on its Nodes the first time it saw
/// the JobSet gone), and while any pod runs on it.
fn release_or_keep(
    t: &Target,
    policy: &Policy,
    obs: &Observed,
    l: &LiveSlice,
    (kube, nodes): (&KubeRef, Option<&[HostNode]>),
    now: Timestamp,
    out: &mut Demand,
) {
    let grace = grace(policy);
    let keep = |out: &mut Demand, why: String| {
        out.kept.push(Kept {
            pool: l.pool.clone(),
            jobset: l.origin.jobset_ref(),
            why,
        })
    };
    let Some(nodes) = nodes else {
        keep(
            out,
            "unobserved: its cluster's Nodes or pods could not be listed".to_string(),
        );
        return;
    };
    let pool_nodes: Vec<&HostNode> = nodes
        .iter()
        .filter(|n| n.labels.get(NODEPOOL_LABEL) == Some(&l.pool))
        .collect();
    let js = obs
        .jobsets
        .iter()
        .find(|j| j.namespace == l.origin.namespace && j.name == l.origin.jobset);
    let js_ref = l.origin.jobset_ref();
    let (ended_at, how) = match js {
        Some(j) if !j.deleting && j.ended.is_none() => {
            // A JobSet deleted and submitted again under its name within
            // the grace period: the stamp of the first one's end goes, or
            // the new one's end would release the slice at once.
            let stale: Vec<String> = pool_nodes
                .iter()
                .filter(|n| n.labels.contains_key(RELEASED_AT))
                .map(|n| n.name.clone())
                .collect();
            if !stale.is_empty() {
                out.marks.push(Mark {
                    kube: kube.clone(),
                    nodes: stale,
                    at: None,
                });
            }
            keep(out, format!("active: jobset {js_ref} has not ended"));
            return;
        }
        Some(ObservedJobSet {
            ended: Some(e),
            deleting: false,
            ..
        }) => (Some(e.at), e.condition.clone()),
        _ => {
            let stamped = pool_nodes
                .iter()
                .filter_map(|n| n.labels.get(RELEASED_AT)?.parse::<i64>().ok())
                .min()
                .and_then(|s| Timestamp::from_second(s).ok());
            match stamped {
                Some(at) => (Some(at), "deleted".to_string()),
                None if pool_nodes.is_empty() => (None, "deleted".to_string()),
                None => {
                    out.marks.push(Mark {
                        kube: kube.clone(),
                        nodes: pool_nodes.iter().map(|n| n.name.clone()).collect(),
                        at: Some(now.as_second()),
                    });
                    // The stamp has whole seconds, as it is read back.
                    let stamped = Timestamp::from_second(now.as_second()).unwrap_or(now);
                    out.due(stamped, grace);
                    keep(
                        out,
                        format!(
                            "grace: jobset {js_ref} is gone; released {} from now",
                            shown(grace)
                        ),
                    );
                    return;
                }
            }
        }
    };
    if let Some(at) = ended_at {
        let past = since(now, at);
        if past < grace {
            out.due(at, grace);
            keep(
                out,
                format!(
                    "grace: jobset {js_ref} {how} {} ago; released after gracePeriod {}",
                    shown(past),
                    shown(grace)
                ),
            );
            return;
        }
    }
    let busy: Vec<String> = pool_nodes
        .iter()
        .flat_map(|n| n.pods.iter().map(|p| p.describe()))
        .collect();
    if !busy.is_empty() {
        keep(
            out,
            format!(
                "busy: jobset {js_ref} {how}, but pods still run on it: {}",
                busy.join(", ")
            ),
        );
        return;
    }
    out.released.push(Released {
        target: t.name.clone(),
        pool: l.pool.clone(),
        jobset: js_ref.clone(),
        // Absolute times only: a plan confirmed a minute later must read the
        // same (`Plan::effect`).
        why: match ended_at {
            Some(at) => format!(
                "jobset {js_ref} {how} at {} (gracePeriod {})",
                at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                shown(grace)
            ),
            None => format!("jobset {js_ref} {how} and the pool has no Nodes"),
        },
    });
}
