//! The pull-model bootstrap's thin loop: each pass observes the MIG's VMs,
//! their Nodes and what the VMs report, asks [`decide`] for the moves, and
//! performs them (the last one waits, fails, or finishes the step).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::decide::{self, Memory, Move, Probe, Seen, decide};
use super::{token_selector, view};
use crate::bootstrap;
use crate::cloud::{Cloud, CloudError};
use crate::kind::Action;
use crate::kind::ownership::{self, Ownership};
use crate::kind::{ApplyError, StepOutcome};
use crate::kinds::gce::nodes::{self, NodeView};
use crate::kinds::gce::render::NodeGroup;
use crate::kube::{BootstrapToken, StoredToken};
use crate::resource::compute::{Metadata, MetadataItem};
use crate::resource::{KubeRef, ZoneRef};

/// How long a minted bootstrap token lives (tpu-operator: 1 h).
pub const TOKEN_TTL: Duration = Duration::from_secs(3600);
/// A token with less than this left is not reused (tpu-operator: 10 min).
pub const TOKEN_MIN_LEFT: Duration = Duration::from_secs(600);
/// The guest-attribute path the VMs report their bootstrap progress at.
pub const GUEST_QUERY: &str = "slicectl/";

/// What the drive holds between passes: the join values and what it
/// learned.
#[derive(Default)]
struct Held {
    token: Option<BootstrapToken>,
    ca_hash: Option<String>,
    memory: Memory,
}

/// One drive of a slice replica's VMs to Ready Nodes.
struct Drive<'a> {
    cloud: &'a Cloud,
    a: &'a Action,
    k: &'a KubeRef,
    want: &'a NodeGroup,
    zone: ZoneRef,
    own: Ownership,
    start: Instant,
    deadline: Instant,
}

/// Drives a slice replica's VMs to Ready Nodes: mints or reuses a token,
/// hands it to each RUNNING VM that has not joined, labels the Nodes that
/// joined, removes the token from their VMs, and once every Node is Ready
/// with its chips deletes the replica's bootstrap Secrets.
pub(super) async fn drive(
    cloud: &Cloud,
    a: &Action,
    k: &KubeRef,
    want: &NodeGroup,
) -> Result<StepOutcome, ApplyError> {
    let start = Instant::now();
    let own = Ownership::from_labels(&want.labels).ok_or_else(|| ApplyError::Body(a.address()))?;
    // A kubelet the cluster cannot take is refused before any VM gets a token.
    if want.bootstrap
        && let Some(v) = &want.kubernetes_version
    {
        let server = cloud.kube.server_version(k).await?;
        if let Some(problem) = decide::skew_problem(v, server) {
            return Err(ApplyError::Kind {
                code: crate::kinds::gce::BOOTSTRAP_FAILED,
                address: a.address(),
                message: problem,
            });
        }
    }
    let d = Drive {
        cloud,
        a,
        k,
        want,
        zone: ZoneRef {
            project: want.project.clone(),
            zone: want.zone.clone(),
        },
        own,
        start,
        deadline: start + a.timeout.max(Duration::from_secs(1)),
    };
    let mut held = Held::default();
    loop {
        let o = d.observe().await?;
        let seen = Seen {
            want,
            may_recreate: a.groups.contains(&nodes::GROUP_RECREATE_LOST),
            timeout: a.timeout,
            elapsed: o.elapsed,
            vms: o.vms,
            creation_error: o.creation_error,
            nodes: o.nodes,
            probes: o.probes,
            has_token: held.token.is_some(),
            has_ca_hash: held.ca_hash.is_some(),
            memory: &held.memory,
        };
        let moves = decide(&seen);
        let (probes, elapsed) = (seen.probes, seen.elapsed);
        held.memory.note(&probes, elapsed);
        if let Some(outcome) = d.perform(moves, &mut held).await? {
            return Ok(outcome);
        }
    }
}

/// Labels (and taints) the Nodes `names` that are there, and waits for
/// nothing: the step of a replica whose Nodes only need their labels (all
/// joined, or a brought template's that joined while others have not;
/// `slicectl adopt` labelling a foreign MIG's Nodes).
pub(super) async fn label_present(
    cloud: &Cloud,
    k: &KubeRef,
    want: &NodeGroup,
    names: &BTreeSet<String>,
) -> Result<StepOutcome, ApplyError> {
    for n in cloud.kube.nodes(k).await?.iter().map(view) {
        if !names.contains(&n.name) || !n.provider_id.starts_with(&want.provider_id_prefix) {
            continue;
        }
        if let Some(Move::LabelNode {
            node,
            labels,
            taints,
        }) = decide::label_move(want, &n)
        {
            let taints: Option<Vec<_>> =
                taints.map(|ts| ts.iter().filter_map(|t| parse_taint(t)).collect());
            tracing::info!(node = %node, mig = %want.mig, "labelling a Node that joined");
            cloud
                .kube
                .patch_node(k, &node, &labels, taints.as_deref())
                .await?;
        }
    }
    Ok(StepOutcome::Done)
}

/// What one pass observes.
struct Observation {
    elapsed: Duration,
    vms: BTreeMap<String, Option<String>>,
    creation_error: Option<(String, String)>,
    nodes: Vec<NodeView>,
    probes: BTreeMap<String, Probe>,
}

impl Drive<'_> {
    /// One pass's look: the MIG's VMs; unless they show a stockout, their
    /// Nodes and, while slicectl bootstraps, what each RUNNING VM without a
    /// Node reports (and, when it says it joined, whether it still holds a
    /// token).
    async fn observe(&self) -> Result<Observation, ApplyError> {
        let (cloud, want) = (self.cloud, self.want);
        let managed = cloud
            .compute
            .list_managed_instances(&self.zone, &want.mig)
            .await?;
        let vms: BTreeMap<String, Option<String>> = managed
            .iter()
            .map(|m| {
                let name = m.name.clone().unwrap_or_else(|| {
                    m.instance
                        .rsplit('/')
                        .next()
                        .unwrap_or_default()
                        .to_string()
                });
                (name, m.instance_status.clone())
            })
            .collect();
        let mut creation_error = managed
            .iter()
            .filter_map(|m| m.last_attempt.as_ref()?.errors.as_ref())
            .flat_map(|e| e.errors.iter())
            .next()
            .map(|e| (e.code.clone(), e.message.clone()));
        // VMs the MIG has not created yet, with no per-VM attempt saying
        // why: a BULK MIG waiting for capacity says it only in its own
        // status and in `listErrors` (Compute Engine, *About bulk mode*),
        // so read those, not to wait silently until the step's timeout.
        let uncreated: Vec<&str> = managed
            .iter()
            .filter(|m| m.instance_status.is_none())
            .map(|m| m.instance.as_str())
            .collect();
        if creation_error.is_none() && !uncreated.is_empty() {
            creation_error = mig_creation_error(cloud, &self.zone, &want.mig, &uncreated).await?;
        }
        let mut nodes = Vec::new();
        let mut probes = BTreeMap::new();
        if decide::stockout(&vms, creation_error.as_ref()).is_none() {
            nodes = cloud
                .kube
                .nodes(self.k)
                .await?
                .iter()
                .map(view)
                .filter(|n| {
                    n.provider_id
                        .strip_prefix(&want.provider_id_prefix)
                        .is_some_and(|inst| vms.contains_key(inst))
                })
                .collect();
            if want.bootstrap {
                probes = self.probe(&vms, &nodes).await?;
            }
        }
        Ok(Observation {
            elapsed: self.start.elapsed(),
            vms,
            creation_error,
            nodes,
            probes,
        })
    }

    /// What each RUNNING VM without a Node reports, all VMs at once.
    async fn probe(
        &self,
        vms: &BTreeMap<String, Option<String>>,
        nodes: &[NodeView],
    ) -> Result<BTreeMap<String, Probe>, ApplyError> {
        let joined: BTreeSet<&str> = nodes
            .iter()
            .filter_map(|n| n.provider_id.strip_prefix(&self.want.provider_id_prefix))
            .collect();
        let pending = vms
            .iter()
            .filter(|(vm, s)| s.as_deref() == Some("RUNNING") && !joined.contains(vm.as_str()))
            .map(|(vm, _)| async move {
                let status = bootstrap_status(self.cloud, &self.zone, vm).await;
                let holds_token = if status.as_deref() == Some("joined") {
                    let vm = self.cloud.compute.get_instance(&self.zone, vm).await?;
                    Some(vm.metadata.get(bootstrap::JOIN_TOKEN_KEY).is_some())
                } else {
                    None
                };
                Ok::<_, ApplyError>((
                    vm.clone(),
                    Probe {
                        status,
                        holds_token,
                    },
                ))
            });
        futures::future::join_all(pending)
            .await
            .into_iter()
            .collect()
    }

    /// Performs a pass's moves in order; `Some` when the step ends done.
    /// The metadata writes of consecutive moves go out at once: a VM's
    /// write does not wait for another's.
    async fn perform(
        &self,
        moves: Vec<Move>,
        held: &mut Held,
    ) -> Result<Option<StepOutcome>, ApplyError> {
        let mut writes: Vec<Move> = Vec::new();
        for m in moves {
            if matches!(m, Move::HandOut { .. } | Move::RemoveToken { .. }) {
                writes.push(m);
                continue;
            }
            self.write_metadata(std::mem::take(&mut writes), held)
                .await?;
            if let Some(outcome) = self.perform_one(m, held).await? {
                return Ok(Some(outcome));
            }
        }
        self.write_metadata(writes, held).await?;
        Ok(None)
    }

    /// The metadata moves of a pass, every VM at once.
    async fn write_metadata(&self, writes: Vec<Move>, held: &mut Held) -> Result<(), ApplyError> {
        if writes.is_empty() {
            return Ok(());
        }
        let secret = held.token.as_ref().map(BootstrapToken::expose);
        let (secret, hash) = (secret.as_deref(), held.ca_hash.as_deref());
        let endpoint = self.want.endpoint.as_str();
        let pending = writes.iter().map(|m| async move {
            match m {
                Move::RemoveToken { vm } => {
                    set_join_metadata(self.cloud, &self.zone, vm, None).await?;
                    Ok::<_, ApplyError>(Some(vm.clone()))
                }
                Move::HandOut { vm } => {
                    if let (Some(t), Some(h)) = (secret, hash) {
                        set_join_metadata(
                            self.cloud,
                            &self.zone,
                            vm,
                            Some([
                                (bootstrap::JOIN_TOKEN_KEY, t),
                                (bootstrap::API_ENDPOINT_KEY, endpoint),
                                (bootstrap::CA_HASH_KEY, h),
                            ]),
                        )
                        .await?;
                    }
                    Ok(None)
                }
                _ => Ok(None),
            }
        });
        for done in futures::future::join_all(pending).await {
            if let Some(vm) = done? {
                held.memory.cleaned.insert(vm);
            }
        }
        Ok(())
    }

    /// Performs one move other than a metadata write.
    async fn perform_one(
        &self,
        m: Move,
        held: &mut Held,
    ) -> Result<Option<StepOutcome>, ApplyError> {
        let (cloud, a, k, want) = (self.cloud, self.a, self.k, self.want);
        match m {
            Move::FailStockout { code, message } => {
                // The cloud's words as observed (a VM's last attempt, the
                // bulk operation's last check or `listErrors`), with how
                // many VMs exist when some do.
                Err(CloudError::OperationFailed {
                    operation: format!("managed instance group {} creating its VMs", want.mig),
                    code,
                    message,
                }
                .into())
            }
            Move::LabelNode {
                node,
                labels,
                taints,
            } => {
                let taints: Option<Vec<_>> =
                    taints.map(|ts| ts.iter().filter_map(|t| parse_taint(t)).collect());
                cloud
                    .kube
                    .patch_node(k, &node, &labels, taints.as_deref())
                    .await?;
                Ok(None)
            }
            Move::FetchCaHash => {
                held.ca_hash = Some(cloud.kube.ca_cert_hash(k).await?);
                Ok(None)
            }
            Move::ObtainToken => {
                held.token = Some(token_for(cloud, k, &self.own).await?);
                Ok(None)
            }
            Move::Recreate { vms } => {
                tracing::info!(mig = %want.mig, vms = ?vms, "recreating VMs whose Nodes are gone");
                let op = cloud
                    .compute
                    .recreate_instances(&self.zone, &want.mig, &vms)
                    .await?;
                let left = self.deadline.saturating_duration_since(Instant::now());
                cloud
                    .compute
                    .wait_operation(&op, left.max(Duration::from_secs(1)))
                    .await?;
                held.memory.recreated(&vms);
                Ok(None)
            }
            Move::FailNodeLost { vms } => Err(node_lost(a, want, &vms)),
            Move::FailBootstrap { message } | Move::TimeOut { message } => Err(ApplyError::Kind {
                code: crate::kinds::gce::BOOTSTRAP_FAILED,
                address: a.address(),
                message,
            }),
            Move::Finish { confirm } => {
                let mut left = Vec::new();
                for vm in &confirm {
                    let got = cloud.compute.get_instance(&self.zone, vm).await?;
                    if got.metadata.get(bootstrap::JOIN_TOKEN_KEY).is_some() {
                        left.push(vm.clone());
                    }
                }
                if !left.is_empty() {
                    for vm in &left {
                        held.memory.cleaned.remove(vm);
                    }
                    return Ok(None);
                }
                for t in cloud
                    .kube
                    .bootstrap_tokens(k, &token_selector(&self.own))
                    .await?
                {
                    cloud
                        .kube
                        .delete_secret(
                            k,
                            crate::kube::bootstrap_token::BOOTSTRAP_TOKEN_NAMESPACE,
                            &t.secret_name,
                        )
                        .await?;
                }
                Ok(Some(StepOutcome::Done))
            }
            Move::Wait(d) => {
                tokio::time::sleep(d).await;
                Ok(None)
            }
            // Metadata writes go through `write_metadata`.
            Move::HandOut { .. } | Move::RemoveToken { .. } => Ok(None),
        }
    }
}

fn parse_taint(s: &str) -> Option<k8s_openapi::api::core::v1::Taint> {
    let t = bootstrap::decode_taints(s).ok()?.into_iter().next()?;
    Some(k8s_openapi::api::core::v1::Taint {
        key: t.key,
        value: (!t.value.is_empty()).then_some(t.value),
        effect: t.effect.as_str().to_string(),
        ..Default::default()
    })
}

/// The token this step hands out: reused while it has more than
/// [`TOKEN_MIN_LEFT`] left, else minted for [`TOKEN_TTL`].
async fn token_for(
    cloud: &Cloud,
    k: &KubeRef,
    own: &Ownership,
) -> Result<BootstrapToken, ApplyError> {
    let sel = token_selector(own);
    let tokens = cloud.kube.bootstrap_tokens(k, &sel).await?;
    let min_left = jiff::SignedDuration::try_from(TOKEN_MIN_LEFT).unwrap_or_default();
    if let Some(t) = StoredToken::reusable(&tokens, jiff::Timestamp::now(), min_left)
        .and_then(|t| t.token.clone())
    {
        tracing::debug!(slice = %own.slice, replica = own.replica, "reusing a bootstrap token");
        return Ok(t);
    }
    let mut labels = Ownership {
        spec_hash: None,
        hash_version: None,
        prevent_destroy: false,
        ..own.clone()
    }
    .to_labels();
    labels.retain(|k, _| k != ownership::PREVENT_DESTROY);
    let token = BootstrapToken::generate();
    cloud
        .kube
        .create_bootstrap_token(k, &token, TOKEN_TTL, &labels)
        .await?;
    tracing::info!(slice = %own.slice, replica = own.replica, token_id = token.id(), "minted a bootstrap token");
    Ok(token)
}

/// Sets (or, with `None`, removes) the join keys in a VM's metadata, with
/// its current fingerprint; writes only when something differs. Returns
/// whether it wrote. A stale fingerprint (412) is retried with a fresh one.
async fn set_join_metadata(
    cloud: &Cloud,
    zone: &ZoneRef,
    instance: &str,
    join: Option<[(&str, &str); 3]>,
) -> Result<bool, ApplyError> {
    for _ in 0..5 {
        let vm = cloud.compute.get_instance(zone, instance).await?;
        let mut items: BTreeMap<String, Option<String>> = vm
            .metadata
            .items
            .iter()
            .map(|i| (i.key.clone(), i.value.clone()))
            .collect();
        let before = items.clone();
        match join {
            Some(kv) => {
                for (key, v) in kv {
                    items.insert(key.to_string(), Some(v.to_string()));
                }
            }
            None => {
                items.remove(bootstrap::JOIN_TOKEN_KEY);
            }
        }
        if items == before {
            return Ok(false);
        }
        let md = Metadata {
            fingerprint: vm.metadata.fingerprint.clone(),
            items: items
                .into_iter()
                .map(|(key, value)| MetadataItem { key, value })
                .collect(),
            ..Default::default()
        };
        match cloud
            .compute
            .set_instance_metadata(zone, instance, &md)
            .await
        {
            // The drive does not wait for the operation: its next pass reads
            // the VM again and writes once more if the change did not land
            // (an operation that failed on a stale fingerprint included).
            Ok(_op) => return Ok(true),
            Err(e) if e.is_stale_fingerprint() => {
                tracing::debug!(instance, "metadata fingerprint was stale; reading it again");
                continue;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApplyError::Kind {
code: crate::kinds::gce::BOOTSTRAP_FAILED,
        address: instance.to_string(),
        message: "the VM's metadata kept changing under slicectl (stale fingerprint 5 times); run apply again".into(),
    })
}

/// Why a MIG has not created VMs it should have, from the fields Compute
/// Engine documents for it: the bulk operation's last progress check
/// (`status.bulkInstanceOperation.lastProgressCheck.error`: "Bulk instance
/// operation is the creation of VMs in a MIG when the targetSizePolicy.mode
/// is set to BULK", compute v1), current by definition; else the newest
/// `listErrors` item of a CREATING action on one of the VMs still
/// uncreated (`uncreated`: their instance URLs), so an old error of a VM
/// that exists now is not taken for a current one.
async fn mig_creation_error(
    cloud: &Cloud,
    zone: &ZoneRef,
    mig: &str,
    uncreated: &[&str],
) -> Result<Option<(String, String)>, ApplyError> {
    let m = cloud.compute.get_instance_group_manager(zone, mig).await?;
    if let Some(e) = m
        .status
        .as_ref()
        .and_then(|s| s.bulk_instance_operation.as_ref())
        .and_then(|b| b.last_progress_check.as_ref())
        .and_then(|c| c.error.as_ref())
        .and_then(|e| e.errors.first())
    {
        return Ok(Some((e.code.clone(), e.message.clone())));
    }
    // `instance` URLs may name the VM from any API host or version; compare
    // from `projects/` on.
    let tail = |u: &str| {
        u.find("projects/")
            .map_or(u.to_string(), |i| u[i..].to_string())
    };
    let waiting: BTreeSet<String> = uncreated.iter().map(|u| tail(u)).collect();
    let mut errors = cloud.compute.list_mig_errors(zone, mig).await?;
    errors.sort_by(|a, b| b.timestamp.cmp(&a.timestamp));
    Ok(errors
        .into_iter()
        .find(|e| {
            e.instance_action_details.as_ref().is_some_and(|d| {
                d.action == "CREATING"
                    && d.instance
                        .as_deref()
                        .is_none_or(|i| waiting.contains(&tail(i)))
            })
        })
        .map(|e| (e.error.code, e.error.message)))
}

/// What a VM last reported about its bootstrap (guest attribute
/// `slicectl/bootstrap`), if anything.
async fn bootstrap_status(cloud: &Cloud, zone: &ZoneRef, instance: &str) -> Option<String> {
    let entries = cloud
        .compute
        .get_guest_attributes(zone, instance, GUEST_QUERY)
        .await
        .ok()?;
    entries
        .into_iter()
        .find(|e| e.key == bootstrap::GUEST_BOOTSTRAP_KEY)
        .map(|e| e.value)
}

/// The failure of a drive that found RUNNING VMs that joined once and whose
/// Nodes are gone: what is wrong, and the command that fixes it.
fn node_lost(a: &Action, want: &NodeGroup, vms: &[String]) -> ApplyError {
    ApplyError::Kind {
        code: crate::kinds::gce::NODE_LOST,
        address: a.address(),
        message: format!(
            "VM(s) {} of managed instance group {} run(s) but the Node is gone: the VM joined the cluster and its Node \
             was deleted since, and a kubelet does not register its Node again by itself. Recreate the VM(s); \
             the MIG makes them again from its template, and the next apply joins them: \
             gcloud compute instance-groups managed recreate-instances {} --instances={} --zone={} --project={}",
            vms.join(", "),
            want.mig,
            want.mig,
            vms.join(","),
            want.zone,
            want.project
        ),
    }
}
