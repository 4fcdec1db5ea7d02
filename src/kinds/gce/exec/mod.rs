//! The shell halves of the Kubernetes-side `gce` kinds: observing Nodes and
//! bootstrap Secrets, the pull-model bootstrap drive, cordoning and cleanup,
//! and applying the device plugin.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;

use super::device_plugin::{self, DevicePluginBody, DevicePlugins};
use super::nodes::{self, NodeGroupLive, NodeView, Nodes};
use super::render::{NodeGroup, TPU_RESOURCE};
use crate::apply::{ApplyError, KindExec, Observed, StepOp, StepOutcome};
use crate::bootstrap;
use crate::cloud::{Cloud, CloudError};
use crate::kube::{BootstrapToken, DevicePluginObjects, StoredToken};
use crate::plan::kind::body_as;
use crate::plan::ownership::{self, Ownership};
use crate::plan::{Action, KindId, Scope};
use crate::resource::compute::{Metadata, MetadataItem};
use crate::resource::{KubeRef, ZoneRef};

/// How long a minted bootstrap token lives (tpu-operator: 1 h).
pub const TOKEN_TTL: Duration = Duration::from_secs(3600);
/// A token with less than this left is not reused (tpu-operator: 10 min).
pub const TOKEN_MIN_LEFT: Duration = Duration::from_secs(600);
/// The guest-attribute path the VMs report their bootstrap progress at.
pub const GUEST_QUERY: &str = "slicectl/";

fn kube_of(a: &Action) -> Result<&KubeRef, ApplyError> {
    match &a.id.scope {
        Scope::Kube(k) => Ok(k),
        _ => Err(ApplyError::Scope(a.address())),
    }
}

fn view(n: &Node) -> NodeView {
    let status = n.status.as_ref();
    let qty =
        |m: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
            m.and_then(|m| m.get(TPU_RESOURCE))
                .and_then(|q| q.0.parse::<u32>().ok())
        };
    let spec = n.spec.as_ref();
    NodeView {
        name: n.metadata.name.clone().unwrap_or_default(),
        provider_id: spec.and_then(|s| s.provider_id.clone()).unwrap_or_default(),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        tpu_capacity: qty(status.and_then(|s| s.capacity.as_ref())),
        tpu_allocatable: qty(status.and_then(|s| s.allocatable.as_ref())),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .map(|t| match t.value.as_deref().unwrap_or_default() {
                        "" => format!("{}:{}", t.key, t.effect),
                        v => format!("{}={v}:{}", t.key, t.effect),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
    }
}

/// The label selector of one slice replica's bootstrap Secrets.
fn token_selector(o: &Ownership) -> String {
    format!(
        "{}={},{}={},{}={},{}={}",
        ownership::MANAGED_BY,
        ownership::MANAGER,
        ownership::OWNER,
        o.owner,
        ownership::SLICE,
        o.slice,
        ownership::REPLICA,
        o.replica
    )
}

/// Groups a cluster's Nodes and bootstrap Secrets by the slice replica
/// their labels name.
pub fn group(nodes: &[Node], tokens: &[StoredToken]) -> Vec<NodeGroupLive> {
    let mut by: BTreeMap<(String, String, u32), NodeGroupLive> = BTreeMap::new();
    for n in nodes {
        let labels = n.metadata.labels.clone().unwrap_or_default();
        let Some(o) = Ownership::from_labels(&labels) else {
            continue;
        };
        let key = (o.owner.clone(), o.slice.clone(), o.replica);
        by.entry(key)
            .or_insert_with(|| empty_group(&o))
            .nodes
            .push(view(n));
    }
    for t in tokens {
        let Some(o) = Ownership::from_labels(&t.labels) else {
            continue;
        };
        let key = (o.owner.clone(), o.slice.clone(), o.replica);
        by.entry(key)
            .or_insert_with(|| empty_group(&o))
            .token_secrets
            .push(t.secret_name.clone());
    }
    by.into_values().collect()
}

fn empty_group(o: &Ownership) -> NodeGroupLive {
    NodeGroupLive {
        name: crate::plan::names::mig(&o.slice, o.replica),
        owner: o.owner.clone(),
        slice: o.slice.clone(),
        replica: o.replica,
        nodes: Vec::new(),
        token_secrets: Vec::new(),
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

/// Brings a Node's labels and taints to what the group wants (one patch,
/// only when something differs).
async fn ensure_labels(
    cloud: &Cloud,
    k: &KubeRef,
    want: &NodeGroup,
    n: &NodeView,
) -> Result<(), ApplyError> {
    let mut patch: BTreeMap<String, Option<String>> = want
        .labels
        .iter()
        .filter(|(key, v)| n.labels.get(*key) != Some(v))
        .map(|(key, v)| (key.clone(), Some(v.clone())))
        .collect();
    if !want.labels.contains_key(ownership::PREVENT_DESTROY)
        && n.labels.contains_key(ownership::PREVENT_DESTROY)
    {
        patch.insert(ownership::PREVENT_DESTROY.to_string(), None);
    }
    let missing_taint = want.taints.iter().any(|t| !n.taints.contains(t));
    let taints: Option<Vec<_>> = missing_taint.then(|| {
        let mut all: BTreeSet<String> = n.taints.iter().cloned().collect();
        all.extend(want.taints.iter().cloned());
        all.iter().filter_map(|t| parse_taint(t)).collect()
    });
    if patch.is_empty() && taints.is_none() {
        return Ok(());
    }
    cloud
        .kube
        .patch_node(k, &n.name, &patch, taints.as_deref())
        .await?;
    Ok(())
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
    Err(ApplyError::Bootstrap {
        address: instance.to_string(),
        message: "the VM's metadata kept changing under slicectl (stale fingerprint 5 times); run apply again".into(),
    })
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

/// What a drive pass records for a VM whose Node is gone (never a status a
/// VM reports: those are `waiting-for-token`, `joining`, `joined`, `failed: …`).
const NODE_LOST: &str = "(node lost)";

/// The failure of a drive that found RUNNING VMs that joined once and whose
/// Nodes are gone: what is wrong, and the command that fixes it.
fn node_lost(a: &Action, want: &NodeGroup, vms: &[String]) -> ApplyError {
    ApplyError::NodeLost {
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

/// How long a VM may keep reporting failures before the step fails.
pub const FAILING_GRACE: Duration = Duration::from_secs(60);

/// Whether a VM's bootstrap status says it stopped trying (the startup
/// script's last attempt: `failed: … (attempt N/N)`).
fn gave_up(status: &str) -> bool {
    status
        .rsplit_once("(attempt ")
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .and_then(|r| r.split_once('/'))
        .is_some_and(|(n, of)| n == of)
}

fn poll_delay(elapsed: Duration) -> Duration {
    (elapsed / 10).clamp(Duration::from_millis(500), Duration::from_secs(5))
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

/// Drives a slice replica's VMs to Ready Nodes: mints or reuses a token,
/// hands it to each RUNNING VM that has not joined, labels the Nodes that
/// joined, removes the token from their VMs, and once every Node is Ready
/// with its chips deletes the replica's bootstrap Secrets.
async fn drive(
    cloud: &Cloud,
    a: &Action,
    k: &KubeRef,
    want: &NodeGroup,
) -> Result<StepOutcome, ApplyError> {
    let start = Instant::now();
    let deadline = start + a.timeout.max(Duration::from_secs(1));
    let zone = ZoneRef {
        project: want.project.clone(),
        zone: want.zone.clone(),
    };
    let own = Ownership::from_labels(&want.labels).ok_or_else(|| ApplyError::Body(a.address()))?;
    // A kubelet the cluster cannot take is refused before any VM gets a token.
    if want.bootstrap
        && let Some(v) = &want.kubernetes_version
    {
        let server = cloud.kube.server_version(k).await?;
        if let Some(problem) = skew_problem(v, server) {
            return Err(ApplyError::Bootstrap {
                address: a.address(),
                message: problem,
            });
        }
    }
    let mut token: Option<BootstrapToken> = None;
    let mut ca_hash: Option<String> = None;
    let mut cleaned: BTreeSet<String> = BTreeSet::new();
    let mut failing_since: BTreeMap<String, Instant> = BTreeMap::new();
    let mut last_status: BTreeMap<String, String> = BTreeMap::new();
    let mut recreated: BTreeSet<String> = BTreeSet::new();
    loop {
        let managed = cloud
            .compute
            .list_managed_instances(&zone, &want.mig)
            .await?;
        let names: BTreeMap<String, Option<String>> = managed
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
        // BULK: a stockout leaves no VM and the MIG retrying. Fail the step
        // with the cloud's words; the next apply tries again.
        let running: Vec<&String> = names
            .iter()
            .filter(|(_, s)| s.as_deref() == Some("RUNNING"))
            .map(|(n, _)| n)
            .collect();
        if running.is_empty()
            && let Some(err) = managed
                .iter()
                .filter_map(|m| m.last_attempt.as_ref()?.errors.as_ref())
                .flat_map(|e| e.errors.iter())
                .next()
        {
            let (code, message) = match cloud.compute.list_mig_errors(&zone, &want.mig).await {
                Ok(errs) if !errs.is_empty() => {
                    (errs[0].error.code.clone(), errs[0].error.message.clone())
                }
                _ => (err.code.clone(), err.message.clone()),
            };
            return Err(CloudError::OperationFailed {
                operation: format!("managed instance group {} creating its VMs", want.mig),
                code,
                message,
            }
            .into());
        }
        let nodes: Vec<NodeView> = cloud
            .kube
            .nodes(k)
            .await?
            .iter()
            .map(view)
            .filter(|n| {
                n.provider_id
                    .strip_prefix(&want.provider_id_prefix)
                    .is_some_and(|inst| names.contains_key(inst))
            })
            .collect();
        let joined: BTreeSet<&str> = nodes
            .iter()
            .filter_map(|n| n.provider_id.strip_prefix(&want.provider_id_prefix))
            .collect();
        for n in &nodes {
            ensure_labels(cloud, k, want, n).await?;
        }
        let mut failures = Vec::new();
        let mut lost = Vec::new();
        if want.bootstrap {
            if running.iter().any(|i| !joined.contains(i.as_str())) {
                if ca_hash.is_none() {
                    ca_hash = Some(cloud.kube.ca_cert_hash(k).await?);
                }
                if token.is_none() {
                    token = Some(token_for(cloud, k, &own).await?);
                }
            }
            let secret = token.as_ref().map(BootstrapToken::expose);
            let (secret, hash) = (secret.as_deref(), ca_hash.as_deref());
            let mut pending = Vec::new();
            for inst in running.iter().map(|i| (*i).clone()) {
                let is_joined = joined.contains(inst.as_str());
                let done = cleaned.contains(&inst);
                let zone = &zone;
                pending.push(async move {
                    if is_joined {
                        if !done {
                            set_join_metadata(cloud, zone, &inst, None).await?;
                        }
                        return Ok::<_, ApplyError>((inst, true, None));
                    }
                    // A VM that says it joined, whose token slicectl already
                    // removed (it saw its Node then), has lost its Node: no
                    // token makes its kubelet register again.
                    let before = bootstrap_status(cloud, zone, &inst).await;
                    if before.as_deref() == Some("joined")
                        && cloud
                            .compute
                            .get_instance(zone, &inst)
                            .await?
                            .metadata
                            .get(bootstrap::JOIN_TOKEN_KEY)
                            .is_none()
                    {
                        return Ok((inst, false, Some(NODE_LOST.to_string())));
                    }
                    if let (Some(t), Some(h)) = (secret, hash) {
                        set_join_metadata(
                            cloud,
                            zone,
                            &inst,
                            Some([
                                (bootstrap::JOIN_TOKEN_KEY, t),
                                (bootstrap::API_ENDPOINT_KEY, want.endpoint.as_str()),
                                (bootstrap::CA_HASH_KEY, h),
                            ]),
                        )
                        .await?;
                    }
                    let status = bootstrap_status(cloud, zone, &inst).await;
                    Ok((inst, false, status))
                });
            }
            // Every VM of the pass at once: a VM's write does not wait for
            // another's.
            let passes = futures::future::join_all(pending).await;
            for pass in passes {
                let (inst, is_cleaned, status) = pass?;
                if is_cleaned {
                    cleaned.insert(inst);
                    continue;
                }
                let Some(s) = status else {
                    continue;
                };
                if s == NODE_LOST {
                    lost.push(inst);
                    continue;
                }
                if s.starts_with("failed") {
                    // A VM retries on its own (a token not yet signed into
                    // cluster-info, an API server restarting): fail the
                    // step only once it gave up or kept failing.
                    let since = *failing_since
                        .entry(inst.clone())
                        .or_insert_with(Instant::now);
                    if gave_up(&s) || since.elapsed() >= FAILING_GRACE {
                        failures.push(format!("VM {inst}: {s}"));
                    }
                } else {
                    failing_since.remove(&inst);
                }
                last_status.insert(inst, s);
            }
        }
        if !lost.is_empty() {
            // The plan offered the fix (reason node_lost): recreate them
            // once through the MIG; each boots again from the template with
            // fresh metadata and joins like a new VM on the next passes.
            if !a.groups.contains(&nodes::GROUP_RECREATE_LOST)
                || lost.iter().any(|v| recreated.contains(v))
            {
                return Err(node_lost(a, want, &lost));
            }
            tracing::info!(mig = %want.mig, vms = ?lost, "recreating VMs whose Nodes are gone");
            let op = cloud
                .compute
                .recreate_instances(&zone, &want.mig, &lost)
                .await?;
            let left = deadline.saturating_duration_since(Instant::now());
            cloud
                .compute
                .wait_operation(&op, left.max(Duration::from_secs(1)))
                .await?;
            for v in lost {
                failing_since.remove(&v);
                last_status.remove(&v);
                cleaned.remove(&v);
                recreated.insert(v);
            }
        }
        if !failures.is_empty() {
            return Err(ApplyError::Bootstrap {
                address: a.address(),
                message: format!(
                    "{} of {} node(s) joined; {}",
                    joined.len(),
                    want.hosts,
                    failures.join("; ")
                ),
            });
        }
        let ready = nodes.iter().filter(|n| n.ready_with(want.chips)).count();
        let all_cleaned = !want.bootstrap || running.iter().all(|i| cleaned.contains(*i));
        // Before calling it done, read every VM once more: a token removal
        // that did not land is written again on the next pass.
        let all_cleaned = all_cleaned && {
            let mut left = Vec::new();
            if want.bootstrap && ready == want.hosts as usize {
                for inst in &running {
                    let vm = cloud.compute.get_instance(&zone, inst).await?;
                    if vm.metadata.get(bootstrap::JOIN_TOKEN_KEY).is_some() {
                        left.push((*inst).clone());
                    }
                }
            }
            for inst in &left {
                cleaned.remove(inst);
            }
            left.is_empty()
        };
        if ready == want.hosts as usize && joined.len() == want.hosts as usize && all_cleaned {
            for t in cloud
                .kube
                .bootstrap_tokens(k, &token_selector(&own))
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
            return Ok(StepOutcome::Done);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(ApplyError::Bootstrap {
                address: a.address(),
                message: format!(
                    "timed out after {:?}: {} of {} VM(s) RUNNING, {} node(s) joined, {} Ready with {} {TPU_RESOURCE}{}",
                    a.timeout,
                    running.len(),
                    want.hosts,
                    joined.len(),
                    ready,
                    want.chips,
                    last_status
                        .iter()
                        .filter(|(i, _)| !joined.contains(i.as_str()))
                        .map(|(i, s)| format!("; VM {i} says: {s}"))
                        .collect::<String>()
                ),
            });
        }
        tokio::time::sleep(poll_delay(start.elapsed()).min(deadline - now)).await;
    }
}

/// The live group of an action, as planned (delete / cleanup).
fn planned_group(a: &Action) -> Option<NodeGroupLive> {
    serde_json::from_value(a.before.clone()?).ok()
}

#[async_trait]
impl KindExec for Nodes {
    fn kind(&self) -> KindId {
        nodes::KIND
    }

    fn observes(&self, scope: &Scope) -> bool {
        matches!(scope, Scope::Kube(_))
    }

    async fn observe(&self, cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError> {
        let Scope::Kube(k) = scope else {
            return Ok(Observed::default());
        };
        let sel = format!("{}={}", ownership::MANAGED_BY, ownership::MANAGER);
        let (nodes, tokens) =
            tokio::try_join!(cloud.kube.nodes(k), cloud.kube.bootstrap_tokens(k, &sel))?;
        Ok(Observed::new(scope, group(&nodes, &tokens), Vec::new()))
    }

    async fn execute(
        &self,
        cloud: &Cloud,
        _sched: &crate::apply::schedule::Scheduler,
        a: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        let k = kube_of(a)?;
        match op {
            StepOp::WaitInFlight => Ok(StepOutcome::Done),
            StepOp::Create | StepOp::Update => {
                let want = a
                    .desired
                    .as_ref()
                    .and_then(body_as::<NodeGroup>)
                    .ok_or_else(|| ApplyError::Body(a.address()))?;
                drive(cloud, a, k, want).await
            }
            StepOp::Delete => {
                // Cordon, before the VMs go.
                let Some(g) = planned_group(a) else {
                    return Ok(StepOutcome::Done);
                };
                for n in &g.nodes {
                    cloud.kube.cordon_node(k, &n.name).await?;
                }
                Ok(StepOutcome::Done)
            }
            StepOp::Cleanup => {
                let Some(g) = planned_group(a) else {
                    return Ok(StepOutcome::Done);
                };
                // Every Node of the replica now, not just those planned
                // (one may have registered since).
                let own = g.ownership();
                let live = group(
                    &cloud.kube.nodes(k).await?,
                    &cloud
                        .kube
                        .bootstrap_tokens(k, &token_selector(&own))
                        .await?,
                );
                let mine = live
                    .into_iter()
                    .find(|l| l.owner == g.owner && l.slice == g.slice && l.replica == g.replica);
                let (nodes, secrets) = match &mine {
                    Some(m) => (m.nodes.clone(), m.token_secrets.clone()),
                    None => (Vec::new(), Vec::new()),
                };
                for n in nodes {
                    cloud.kube.delete_node(k, &n.name).await?;
                }
                for s in secrets {
                    cloud
                        .kube
                        .delete_secret(
                            k,
                            crate::kube::bootstrap_token::BOOTSTRAP_TOKEN_NAMESPACE,
                            &s,
                        )
                        .await?;
                }
                Ok(StepOutcome::Done)
            }
        }
    }
}

fn objects_of(b: &DevicePluginBody) -> DevicePluginObjects {
    DevicePluginObjects {
        service_account: b.service_account.clone(),
        cluster_role: b.cluster_role.clone(),
        cluster_role_binding: b.cluster_role_binding.clone(),
        daemonset: b.daemon_set.clone(),
    }
}

#[async_trait]
impl KindExec for DevicePlugins {
    fn kind(&self) -> KindId {
        device_plugin::KIND
    }

    fn observes(&self, scope: &Scope) -> bool {
        matches!(scope, Scope::Kube(_))
    }

    async fn observe(&self, cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError> {
        let Scope::Kube(k) = scope else {
            return Ok(Observed::default());
        };
        let ds = cloud
            .kube
            .daemonset(k, device_plugin::NAMESPACE, device_plugin::NAME)
            .await?;
        Ok(Observed::new(scope, ds.into_iter().collect(), Vec::new()))
    }

    async fn execute(
        &self,
        cloud: &Cloud,
        _sched: &crate::apply::schedule::Scheduler,
        a: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        let k = kube_of(a)?;
        match op {
            StepOp::Create | StepOp::Update => {
                let b = a
                    .desired
                    .as_ref()
                    .and_then(body_as::<DevicePluginBody>)
                    .ok_or_else(|| ApplyError::Body(a.address()))?;
                cloud.kube.apply_device_plugin(k, &objects_of(b)).await?;
                Ok(StepOutcome::Done)
            }
            StepOp::Delete => {
                // Names are fixed: render the objects to name them.
                let Some(b) = device_plugin::objects("", "") else {
                    return Ok(StepOutcome::Done);
                };
                cloud.kube.delete_device_plugin(k, &objects_of(&b)).await?;
                Ok(StepOutcome::Done)
            }
            StepOp::WaitInFlight | StepOp::Cleanup => Ok(StepOutcome::Done),
        }
    }
}

#[cfg(test)]
mod tests;
