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

/// How much of the JobSet's name a pool name keeps.
const JOBSET_PREFIX: usize = 23;
/// Hex digits of the Job's hash in a pool name: 64 bits, so that no tenant
/// can search for a Job whose pool name is another's (a 5-digit suffix, as
/// tpu-provisioner's, falls to 2 s of search).
const JOB_SUFFIX: usize = 16;
/// Hex digits of the Target's hash in a workload slice's name.
const TARGET_SUFFIX: usize = 8;
/// How soon a slice past its grace, kept only because pods still run on
/// it, is looked at again (the controller's next cycle).
const BUSY_RECHECK: std::time::Duration = std::time::Duration::from_secs(30);
/// The Node label GKE puts the node pool's name in.
const NODEPOOL_LABEL: &str = "cloud.google.com/gke-nodepool";

fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The node pool of Job `job` of JobSet `namespace/jobset`:
/// `<first 23 of the JobSet's name>-<first 16 hex of sha256("<namespace>/<job>")>`.
/// The Job's name comes from the JobSet's own spec (`<jobset>-<replicatedJob>-<index>`),
/// so a JobSet submitted again under its name (same Jobs) asks for the same
/// pools, and the namespace is in the hash, so a tenant of another namespace
/// cannot name a Job whose pool is someone else's (64 bits: no search finds
/// one). Refused (with why) when GKE would refuse the name (a JobSet name
/// that starts with a digit or holds a '.').
pub fn pool_name(namespace: &str, jobset: &str, job: &str) -> Result<String, String> {
    let prefix: String = jobset.chars().take(JOBSET_PREFIX).collect();
    let hash = sha256_hex(&format!("{namespace}/{job}"));
    let name = format!("{prefix}-{}", &hash[..JOB_SUFFIX]);
    // GKE: `[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?`.
    let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.len() <= crate::spec::names::NODE_POOL_NAME_MAX;
    if ok {
        Ok(name)
    } else {
        Err(format!(
            "node pool name {name:?} (<first {JOBSET_PREFIX} of the JobSet name>-<hash of its Job>) \
             is not a GKE node pool name (a lowercase letter first, then lowercase letters, digits and '-'); \
             rename the JobSet"
        ))
    }
}

/// The slice name of workload pool `pool` of Target `target`:
/// `<pool>-<first 8 hex of sha256(target)>`. A pool name is unique in its
/// cluster only; the same JobSet in two clusters asks for the same pool
/// name in each, and each is its own slice (its own fleet entry, status
/// object and release).
pub fn slice_name(target: &str, pool: &str) -> String {
    format!("{pool}-{}", &sha256_hex(target)[..TARGET_SUFFIX])
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

/// Whether a git slice of `fleet` takes slice name `slice`, or renders
/// pool `pool` in `t`'s cluster (its `<name>-<replica>` pools, or the
/// `nodePoolName` an adopted slice pins).
fn git_pool(fleet: &Fleet, t: &Target, slice: &str, pool: &str) -> Option<String> {
    fleet.slices.values().find_map(|s| {
        if s.workload.is_some() {
            return None;
        }
        let other = fleet.targets.get(&s.spec.target)?;
        let same = other.spec.project == t.spec.project && other.spec.gke == t.spec.gke;
        let hit = s.name == slice
            || s.name == pool
            || (same
                && (s.spec.node_pool_name.as_deref() == Some(pool)
                    || (0..s.spec.replicas)
                        .any(|r| crate::spec::names::node_pool(&s.name, r) == pool)));
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
                    target: l.target.clone(),
                    slice: l.slice.clone(),
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

/// One Job's verdict: its slice and its rule's `maxChips`, or the refusal
/// (code, why).
type Verdict = Result<(Slice, Option<u32>), (&'static str, String)>;

/// One Job's request, before the JobSet's are admitted together.
struct Asked<'o> {
    pod: &'o PendingPod,
    origin: Origin,
    pool: String,
    slice: String,
}

/// A JobSet's requests of one cycle, admitted all together or refused all
/// together.
struct Group<'o> {
    js: &'o ObservedJobSet,
    asked: Vec<Asked<'o>>,
    /// The first refusal of one of its Jobs (code, why), if any.
    refused: Option<(&'static str, String)>,
    /// Refusals made before the group was complete (a bad name).
    early: Vec<Refused>,
}

/// The Job (one its JobSet's spec names) whose pod `p` is: its controller
/// ownerReference, and, when it carries one, its JobSet uid label, must
/// agree with the JobSet object; a pod that claims a JobSet it is not
/// owned by asks for nothing.
fn owning_job<'j>(p: &PendingPod, js: &'j ObservedJobSet) -> Result<&'j str, String> {
    if let Some(uid) = meta(p, keys::JOBSET_UID)
        && uid != js.uid
    {
        return Err(format!(
            "its leader pod {} names JobSet uid {uid}, not this JobSet's ({})",
            p.name, js.uid
        ));
    }
    let job = p.owner_job.as_deref().unwrap_or_default();
    js.jobs
        .iter()
        .find(|j| j.as_str() == job)
        .map(String::as_str)
        .ok_or_else(|| {
            format!(
                "its leader pod {} is not owned by a Job of the JobSet (controller ownerReference {}): \
                 only the JobSet's own Jobs ask for slices",
                p.name,
                if job.is_empty() {
                    "none".to_string()
                } else {
                    format!("Job {job}")
                }
            )
        })
}

/// The slices the pending leader pods of `t`'s cluster ask for, admitted
/// per JobSet all together or not at all; returns the pools asked for.
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
    let mut leaders: Vec<&PendingPod> = obs.pending.iter().filter(|p| is_trigger(p)).collect();
    leaders.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let mut skipped_seen: BTreeSet<String> = BTreeSet::new();
    let mut groups: BTreeMap<(String, String), Group<'_>> = BTreeMap::new();
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
        if js.deleting || js.ended.is_some() || js.suspended.is_some() {
            continue;
        }
        let job = match owning_job(p, js) {
            Ok(j) => j,
            Err(why) => {
                skip(why);
                continue;
            }
        };
        let origin = Origin {
            namespace: js.namespace.clone(),
            jobset: js.name.clone(),
            uid: js.uid.clone(),
            job_key: meta(p, keys::JOB_KEY).unwrap_or_default().to_string(),
        };
        let group = groups
            .entry((js.namespace.clone(), js.name.clone()))
            .or_insert_with(|| Group {
                js,
                asked: Vec::new(),
                refused: None,
                early: Vec::new(),
            });
        match pool_name(&origin.namespace, &origin.jobset, job) {
            Ok(pool) => {
                // Two leader pods of one Job (a pod being replaced): one request.
                if group.asked.iter().all(|a| a.pool != pool) {
                    group.asked.push(Asked {
                        pod: p,
                        slice: slice_name(&t.name, &pool),
                        pool,
                        origin,
                    });
                }
            }
            Err(e) => {
                group.early.push(refusal(t, &origin, "name", e.clone()));
                group.refused.get_or_insert(("name", e));
            }
        }
    }
    // Pools asked for this cycle, and by which JobSet (the first, by
    // namespace and name, wins; the second is refused).
    let mut asked: BTreeMap<String, String> = BTreeMap::new();
    // Chips admitted this cycle, per namespace (with the live ones: maxChips).
    let mut new_chips: BTreeMap<String, u32> = BTreeMap::new();
    for ((ns, _), g) in groups {
        let verdicts: Vec<Verdict> = g
            .asked
            .iter()
            .map(|a| admit(fleet, t, policy, mine, &asked, a).map(|(s, rule)| (s, rule.max_chips)))
            .collect();
        let chips: u32 = verdicts
            .iter()
            .filter_map(|v| v.as_ref().ok())
            .map(|(s, _)| s.shape.chips)
            .sum();
        let first = g
            .refused
            .clone()
            .or_else(|| verdicts.iter().find_map(|v| v.as_ref().err().cloned()));
        let over = match (&first, verdicts.iter().find_map(|v| v.as_ref().ok()?.1)) {
            (None, Some(max)) => {
                let ours: BTreeSet<&str> = g.asked.iter().map(|a| a.pool.as_str()).collect();
                let held: u32 = mine
                    .iter()
                    .filter(|l| l.origin.namespace == ns && !ours.contains(l.pool.as_str()))
                    .map(|l| l.chips)
                    .sum();
                let fresh = new_chips.get(&ns).copied().unwrap_or(0);
                (held + fresh + chips > max).then(|| {
                    format!(
                        "jobset {ns}/{} needs {chips} chips in {} slice(s), which would make namespace {ns}'s \
                         workload slices on Target {} hold {}, over its maxChips {max} ({held} held, {fresh} \
                         asked for this run); a JobSet's slices are made all together or not at all",
                        g.js.name,
                        g.asked.len(),
                        t.name,
                        held + fresh + chips
                    )
                })
            }
            _ => None,
        };
        out.refused.extend(g.early);
        if let Some(why) = over {
            for a in &g.asked {
                out.refused
                    .push(refusal(t, &a.origin, "max_chips", why.clone()));
            }
            continue;
        }
        if let Some((code, why)) = first {
            // The rest of the JobSet is refused with it: a JobSet that
            // cannot have all its slices cannot run on some of them.
            for (a, v) in g.asked.iter().zip(verdicts) {
                let (code, msg) = match v {
                    Err((c, m)) => (c, m),
                    Ok(_) => (
                        code,
                        format!(
                            "not created: another slice of this JobSet was refused ({code}: {why}); a JobSet's \
                             slices are made all together or not at all"
                        ),
                    ),
                };
                out.refused.push(refusal(t, &a.origin, code, msg));
            }
            continue;
        }
        *new_chips.entry(ns.clone()).or_default() += chips;
        for (a, v) in g.asked.iter().zip(verdicts) {
            if let Ok((slice, _)) = v {
                asked.insert(a.pool.clone(), a.origin.jobset_ref());
                out.slices.push(slice);
            }
        }
    }
    asked.into_keys().collect()
}

fn refusal(t: &Target, origin: &Origin, code: &'static str, message: String) -> Refused {
    Refused {
        target: t.name.clone(),
        namespace: origin.namespace.clone(),
        jobset: origin.jobset.clone(),
        uid: origin.uid.clone(),
        job_key: origin.job_key.clone(),
        code,
        message,
    }
}

/// One Job's request against the names already taken and the Target's
/// policy: its slice and the rule that allows it, or why it is refused.
fn admit<'p>(
    fleet: &Fleet,
    t: &Target,
    policy: &'p Policy,
    mine: &[&LiveSlice],
    asked: &BTreeMap<String, String>,
    a: &Asked<'_>,
) -> Result<(Slice, &'p WorkloadRule), (&'static str, String)> {
    let (pool, origin) = (&a.pool, &a.origin);
    if let Some(other) = asked.get(pool) {
        return Err((
            "name_taken",
            format!(
                "node pool {pool} is asked for by jobset {other} in the same run: the first asker has it"
            ),
        ));
    }
    if let Some(git) = git_pool(fleet, t, &a.slice, pool) {
        return Err((
            "name_taken",
            format!(
                "node pool {pool} is git slice {git}'s: a git slice wins the name; rename the JobSet"
            ),
        ));
    }
    // A live workload pool of that name is another JobSet's unless it is
    // this JobSet's (same namespace and name: the same one, or the one
    // submitted again under its name, whose Jobs and so pools are the
    // same). Never relabelled, re-tainted or replaced for another.
    if let Some(l) = mine.iter().find(|l| &l.pool == pool)
        && (l.origin.namespace != origin.namespace || l.origin.jobset != origin.jobset)
    {
        return Err((
            "name_taken",
            format!(
                "node pool {pool} belongs to jobset {} (uid {}): a workload slice is its JobSet's alone",
                l.origin.jobset_ref(),
                l.origin.uid
            ),
        ));
    }
    let p = a.pod;
    if let Some(e) = &p.tpu_error {
        return Err(("shape", e.clone()));
    }
    let req = request(p).map_err(|e| ("shape", e))?;
    let rule = policy
        .rules
        .iter()
        .find(|r| {
            r.namespaces
                .as_ref()
                .is_none_or(|ns| ns.contains(&origin.namespace))
        })
        .ok_or_else(|| {
            (
                "no_rule",
                format!(
                    "no workloads rule of Target {} matches namespace {}; add one to the Target's workloads.rules",
                    t.name, origin.namespace
                ),
            )
        })?;
    allowed(t, rule, &req)?;
    let shape = shape(&req, p.tpu_chips).map_err(|e| ("shape", e))?;
    Ok((
        Slice {
            name: a.slice.clone(),
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
                node_pool_name: Some(pool.clone()),
                disruption: None,
            },
            shape,
            operation_timeout: crate::spec::DEFAULT_OPERATION_TIMEOUT,
            location: Location {
                file: PathBuf::from(format!("jobset:{}", origin.jobset_ref())),
                line: 1,
                column: 1,
            },
            workload: Some(origin.clone()),
        },
        rule,
    ))
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
            target: l.target.clone(),
            slice: l.slice.clone(),
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
    // Its JobSet: the one of its uid, or one submitted again under its
    // name whose own spec still has the slice's Job (same Job names, same
    // pool). One of that name without it (fewer Jobs) is not its JobSet:
    // the slice's JobSet is gone.
    let js = obs
        .jobsets
        .iter()
        .find(|j| j.namespace == l.origin.namespace && j.name == l.origin.jobset)
        .filter(|j| {
            j.uid == l.origin.uid
                || j.jobs
                    .iter()
                    .any(|job| pool_name(&j.namespace, &j.name, job).is_ok_and(|p| p == l.pool))
        });
    let js_ref = l.origin.jobset_ref();
    let (ended_at, how) = match js {
        Some(j) if !j.deleting && j.ended.is_none() && j.suspended.is_some() => {
            (j.suspended, "suspended".to_string())
        }
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
        // Nothing watched says when those pods go (a deleted JobSet's pods
        // terminate for their own grace period, 30 s by default): the
        // controller looks again soon rather than at the next resync.
        out.due(now, BUSY_RECHECK);
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
        slice: l.slice.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two JobSets asking for one pool in one run (only a 64-bit hash
    /// collision makes that): the second is refused with why, never
    /// dropped silently.
    #[test]
    fn a_second_jobset_asking_for_a_pool_in_the_same_run_is_refused() {
        let fleet = crate::spec::load(&[crate::spec::SourceFile {
            path: "t.yaml".into(),
            text: "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {name: t}\nspec: {project: unit-project, zone: us-central1-b, ownerId: o, gke: {location: us-central1, name: c}}\n".into(),
        }])
        .unwrap();
        let t = &fleet.targets["t"];
        let policy = Policy {
            enabled: true,
            grace_period: None,
            rules: vec![WorkloadRule::default()],
        };
        let pod = PendingPod::default();
        let a = Asked {
            pod: &pod,
            origin: Origin {
                namespace: "b".into(),
                jobset: "second".into(),
                uid: "u2".into(),
                job_key: String::new(),
            },
            pool: "p-0123456789abcdef".into(),
            slice: slice_name("t", "p-0123456789abcdef"),
        };
        let asked = BTreeMap::from([("p-0123456789abcdef".to_string(), "a/first".to_string())]);
        let Err((code, why)) = admit(&fleet, t, &policy, &[], &asked, &a) else {
            panic!("admitted")
        };
        assert_eq!(code, "name_taken");
        assert!(
            why.contains("asked for by jobset a/first in the same run"),
            "{why}"
        );
    }
}
