//! An in-memory set of Kubernetes clusters that records every call and can be
//! told to fail the next one: the executor's unit tests run on it, with no
//! API server. Any [`KubeRef`] names a cluster; it starts empty (no Nodes,
//! no Secrets) with a CA pin derived from its endpoint.
//!
//! It is deliberately small: the real control plane (`scripts/k8s-testenv.sh`)
//! is the faithful stand-in for integration tests.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::spec::disruption::CORDONED_BY_SLICECTL;
use async_trait::async_trait;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus, Secret, ServiceAccount,
    Taint,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use super::bootstrap_token::{BOOTSTRAP_TOKEN_NAMESPACE, BootstrapToken, TokenSpec};
use super::error::{Attempt, KubeError};
use super::service::{
    DevicePluginObjects, Eviction, KubeService, LabelSelector, StoredToken,
    UNSCHEDULABLE_TAINT_KEY, expiration_after, is_cordoned, unschedulable_taint,
};
use crate::resource::KubeRef;

/// A failure the fake can be told to return from the next call of a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeFault {
    /// [`KubeError::Unreachable`] (connection refused).
    Unreachable,
    /// [`KubeError::Forbidden`] (403).
    Forbidden,
    /// [`KubeError::Api`] 401: the API server rejects the credentials.
    Unauthorized,
    /// [`KubeError::NotFound`] (404).
    NotFound,
    /// [`KubeError::Conflict`] (409).
    Conflict,
    /// [`KubeError::Api`] 500.
    Server,
    /// The call panics (a bug in a step must be reported, not lost).
    Panic,
}

/// The methods of [`KubeService`] that write.
pub const WRITE_METHODS: &[&str] = &[
    "create_event",
    "patch_node",
    "cordon_node",
    "delete_node",
    "create_bootstrap_token",
    "delete_secret",
    "apply_device_plugin",
    "delete_device_plugin",
    "evict_pod",
    "uncordon_node",
];

type Key = (String, String);

#[derive(Default)]
struct Cluster {
    /// Every call fails so (until set back).
    down: Option<KubeFault>,
    /// Not reached on purpose, with why ([`KubeService::deferred`]): a GKE
    /// cluster whose API needs a Google token slicectl does not hold.
    deferred: Option<String>,
    ca_hash: Option<String>,
    nodes: BTreeMap<String, Node>,
    pods: BTreeMap<Key, Pod>,
    /// Pods whose eviction a PodDisruptionBudget refuses (429).
    protected_pods: std::collections::BTreeSet<Key>,
    /// The `Retry-After` of a refused eviction.
    eviction_retry_after: Option<std::time::Duration>,
    secrets: BTreeMap<Key, Secret>,
    daemonsets: BTreeMap<Key, DaemonSet>,
    service_accounts: BTreeMap<Key, ServiceAccount>,
    cluster_roles: BTreeMap<String, ClusterRole>,
    cluster_role_bindings: BTreeMap<String, ClusterRoleBinding>,
    jobsets: Vec<serde_json::Value>,
    /// Events created, by name: `(involved object's name, type, reason, message)`.
    events: BTreeMap<String, (String, String, String, String)>,
}

#[derive(Default)]
struct State {
    clusters: BTreeMap<KubeRef, Cluster>,
    calls: Vec<String>,
    faults: VecDeque<(String, KubeFault)>,
    resource_version: u64,
}

/// Nodes a GKE cluster's API lists besides those seeded: what GKE
/// registers for the node pools of a fake cloud ([`FakeKube::with_gke_nodes`]).
pub type GkeNodeSource = Arc<dyn Fn(&KubeRef) -> Vec<Node> + Send + Sync>;

/// The recording fake. Share it with `Arc`; it implements [`KubeService`].
#[derive(Default)]
pub struct FakeKube {
    state: Mutex<State>,
    gke_nodes: Option<GkeNodeSource>,
}

impl std::fmt::Debug for FakeKube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeKube").finish_non_exhaustive()
    }
}

fn key(ns: &str, name: &str) -> Key {
    (ns.to_owned(), name.to_owned())
}

fn meta_name(m: &ObjectMeta) -> String {
    m.name.clone().unwrap_or_default()
}

/// The pin the fake reports for a cluster unless told otherwise.
pub fn default_ca_hash(k: &KubeRef) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(format!("fake-ca {}", k.endpoint)))
    )
}

impl FakeKube {
    /// No clusters touched yet.
    pub fn new() -> Arc<FakeKube> {
        Arc::new(FakeKube::default())
    }

    /// No clusters touched yet; a GKE cluster's API ([`KubeRef::gke`])
    /// also lists the Nodes `source` gives (the fake cloud's running node
    /// pools' Nodes, as GKE registers them).
    pub fn with_gke_nodes(source: GkeNodeSource) -> Arc<FakeKube> {
        Arc::new(FakeKube {
            gke_nodes: Some(source),
            ..FakeKube::default()
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock leaves usable data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn with<T>(&self, k: &KubeRef, f: impl FnOnce(&mut Cluster, &mut u64) -> T) -> T {
        let mut st = self.lock();
        let State {
            clusters,
            resource_version,
            ..
        } = &mut *st;
        f(clusters.entry(k.clone()).or_default(), resource_version)
    }

    // ------------------------------------------------------------ recording

    /// Every call so far, as `method endpoint[ target]`, in order.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// Calls whose method is `method`, in order.
    pub fn calls_of(&self, method: &str) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| c.split(' ').next() == Some(method))
            .collect()
    }

    /// Calls of writing methods ([`WRITE_METHODS`]), in order, whether or not
    /// they changed anything (compare the state for that).
    pub fn writes(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| {
                c.split(' ')
                    .next()
                    .is_some_and(|m| WRITE_METHODS.contains(&m))
            })
            .collect()
    }

    /// Forgets the recorded calls (not the state).
    pub fn clear_calls(&self) {
        self.lock().calls.clear();
    }

    /// The next call of `method` fails with `fault` (queued in order).
    pub fn fail_next(&self, method: &str, fault: KubeFault) {
        self.lock().faults.push_back((method.to_owned(), fault));
    }

    /// Forgets the faults queued by [`FakeKube::fail_next`] and not yet met.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Every call to this cluster fails as unreachable (until set back).
    pub fn set_unreachable(&self, k: &KubeRef, unreachable: bool) {
        self.set_failing(k, unreachable.then_some(KubeFault::Unreachable));
    }

    /// Every call to this cluster fails with `fault` (`None`: as usual).
    pub fn set_failing(&self, k: &KubeRef, fault: Option<KubeFault>) {
        self.with(k, |c, _| c.down = fault);
    }

    /// The cluster is deferred (`Some(why)`: slicectl holds no token its
    /// API would accept, so it is not reached on purpose) or reached as
    /// usual (`None`).
    pub fn set_deferred(&self, k: &KubeRef, why: Option<String>) {
        self.with(k, |c, _| c.deferred = why);
    }

    /// The CA pin [`KubeService::ca_cert_hash`] returns for this cluster.
    pub fn set_ca_hash(&self, k: &KubeRef, hash: &str) {
        self.with(k, |c, _| c.ca_hash = Some(hash.to_owned()));
    }

    /// Records a call; returns the error queued for it, if any.
    fn call(&self, method: &'static str, k: &KubeRef, target: &str) -> Result<(), KubeError> {
        let mut st = self.lock();
        st.calls.push(if target.is_empty() {
            format!("{method} {}", k.endpoint)
        } else {
            format!("{method} {} {target}", k.endpoint)
        });
        let attempt = Attempt::on(method_verb(method), method, target);
        if let Some(fault) = st.clusters.get(k).and_then(|c| c.down) {
            return Err(fault_error(fault, k, attempt));
        }
        if let Some(i) = st.faults.iter().position(|(m, _)| m == method) {
            let fault = st.faults.remove(i).map_or(KubeFault::Server, |(_, f)| f);
            drop(st);
            if fault == KubeFault::Panic {
                panic!("fake kube: injected panic in {method}");
            }
            return Err(fault_error(fault, k, attempt));
        }
        Ok(())
    }

    // -------------------------------------------------------------- pods

    /// A running pod `ns/name` bound to Node `node`, with `labels` and
    /// `annotations` (and, when `owner_kind` is given, a controller owner
    /// reference of that kind named `owner_name`).
    #[allow(clippy::too_many_arguments)]
    pub fn seed_pod(
        &self,
        k: &KubeRef,
        ns: &str,
        name: &str,
        node: &str,
        labels: &[(&str, &str)],
        annotations: &[(&str, &str)],
        owner: Option<(&str, &str)>,
    ) {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let map = |pairs: &[(&str, &str)]| -> Option<BTreeMap<String, String>> {
            (!pairs.is_empty()).then(|| {
                pairs
                    .iter()
                    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                    .collect()
            })
        };
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(ns.to_owned()),
                labels: map(labels),
                annotations: map(annotations),
                owner_references: owner.map(|(kind, n)| {
                    vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: kind.to_owned(),
                        name: n.to_owned(),
                        uid: format!("uid-{n}"),
                        controller: Some(true),
                        ..OwnerReference::default()
                    }]
                }),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.to_owned()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                ..PodStatus::default()
            }),
        };
        self.with(k, |c, _| {
            c.pods.insert(key(ns, name), pod);
        });
    }

    /// Puts any pod in place as it is (a pending one, say), or replaces
    /// the pod of the same namespace and name.
    pub fn put_pod(&self, k: &KubeRef, pod: Pod) {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = meta_name(&pod.metadata);
        self.with(k, |c, _| {
            c.pods.insert(key(&ns, &name), pod);
        });
    }

    /// Puts a JobSet (`jobset.x-k8s.io/v1alpha2`, as JSON) in place, or
    /// replaces the one of the same namespace and name.
    pub fn put_jobset(&self, k: &KubeRef, jobset: serde_json::Value) {
        let id = |v: &serde_json::Value| {
            (
                v.pointer("/metadata/namespace").cloned(),
                v.pointer("/metadata/name").cloned(),
            )
        };
        self.with(k, |c, _| {
            c.jobsets.retain(|j| id(j) != id(&jobset));
            c.jobsets.push(jobset);
        });
    }

    /// Sets a pod's phase (`Succeeded`, `Failed`: it is no longer listed).
    pub fn set_pod_phase(&self, k: &KubeRef, ns: &str, name: &str, phase: &str) {
        self.with(k, |c, _| {
            if let Some(p) = c.pods.get_mut(&key(ns, name)) {
                p.status.get_or_insert_with(PodStatus::default).phase = Some(phase.to_owned());
            }
        });
    }

    /// The `Retry-After` a refused eviction in cluster `k` answers with.
    pub fn set_eviction_retry_after(&self, k: &KubeRef, after: Option<std::time::Duration>) {
        self.with(k, |c, _| c.eviction_retry_after = after);
    }

    /// Makes a PodDisruptionBudget refuse (`true`) or allow the eviction of a pod.
    pub fn protect_pod(&self, k: &KubeRef, ns: &str, name: &str, protected: bool) {
        self.with(k, |c, _| {
            if protected {
                c.protected_pods.insert(key(ns, name));
            } else {
                c.protected_pods.remove(&key(ns, name));
            }
        });
    }

    /// Removes pod `ns/name`.
    pub fn remove_pod(&self, k: &KubeRef, ns: &str, name: &str) {
        self.with(k, |c, _| {
            c.pods.remove(&key(ns, name));
        });
    }

    /// Sets the JobSets a cluster lists (`jobset.x-k8s.io/v1alpha2`, as JSON).
    pub fn set_jobsets(&self, k: &KubeRef, jobsets: Vec<serde_json::Value>) {
        self.with(k, |c, _| c.jobsets = jobsets);
    }

    /// The Events created in a cluster: `(object, type, reason, message)`,
    /// in the order of their names.
    pub fn events(&self, k: &KubeRef) -> Vec<(String, String, String, String)> {
        self.with(k, |c, _| c.events.values().cloned().collect())
    }

    /// The pods of a cluster, `ns/name`.
    pub fn pod_names(&self, k: &KubeRef) -> Vec<String> {
        self.with(k, |c, _| {
            c.pods.keys().map(|(ns, n)| format!("{ns}/{n}")).collect()
        })
    }

    // -------------------------------------------------------------- nodes

    /// Puts a Node in place as it is (a resourceVersion is added).
    pub fn seed_node(&self, k: &KubeRef, mut node: Node) {
        self.with(k, |c, rv| {
            *rv += 1;
            node.metadata.resource_version = Some(rv.to_string());
            c.nodes.insert(meta_name(&node.metadata), node);
        });
    }

    /// A VM joining: its Node appears as a kubelet registers it after
    /// `kubeadm join`, with `providerID`, the hostname label, `Ready=True` and
    /// `google.com/tpu` capacity and allocatable `chips`. Returns it.
    pub fn join_node(&self, k: &KubeRef, name: &str, provider_id: &str, chips: u32) -> Node {
        let tpu = BTreeMap::from([("google.com/tpu".to_owned(), Quantity(chips.to_string()))]);
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(BTreeMap::from([(
                    "kubernetes.io/hostname".to_owned(),
                    name.to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(provider_id.to_owned()),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(tpu.clone()),
                allocatable: Some(tpu),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".to_owned(),
                    status: "True".to_owned(),
                    reason: Some("KubeletReady".to_owned()),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
        };
        self.seed_node(k, node.clone());
        self.node(k, name).unwrap_or(node)
    }

    /// Sets a Node's `Ready` condition.
    pub fn set_node_ready(&self, k: &KubeRef, name: &str, ready: bool) {
        self.with(k, |c, _| {
            if let Some(n) = c.nodes.get_mut(name) {
                let conditions = n
                    .status
                    .get_or_insert_with(NodeStatus::default)
                    .conditions
                    .get_or_insert_with(Vec::new);
                conditions.retain(|c| c.type_ != "Ready");
                conditions.push(NodeCondition {
                    type_: "Ready".to_owned(),
                    status: if ready { "True" } else { "False" }.to_owned(),
                    ..NodeCondition::default()
                });
            }
        });
    }

    /// One Node now.
    pub fn node(&self, k: &KubeRef, name: &str) -> Option<Node> {
        self.with(k, |c, _| c.nodes.get(name).cloned())
    }

    /// The names of the cluster's Nodes now.
    pub fn node_names(&self, k: &KubeRef) -> Vec<String> {
        self.with(k, |c, _| c.nodes.keys().cloned().collect())
    }

    // ------------------------------------------------------------- secrets

    /// Puts a bootstrap-token Secret in place, as an earlier run would have
    /// left it.
    pub fn seed_token(
        &self,
        k: &KubeRef,
        token: &BootstrapToken,
        expiration: jiff::Timestamp,
        labels: &BTreeMap<String, String>,
    ) {
        let mut secret = token.to_secret(&TokenSpec::node_join(expiration));
        secret.metadata.labels = Some(labels.clone());
        self.seed_secret(k, secret);
    }

    /// Puts any Secret in place (a resourceVersion is added).
    pub fn seed_secret(&self, k: &KubeRef, mut secret: Secret) {
        self.with(k, |c, rv| {
            *rv += 1;
            secret.metadata.resource_version = Some(rv.to_string());
            let ns = secret
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_owned());
            c.secrets
                .insert(key(&ns, &meta_name(&secret.metadata)), secret);
        });
    }

    /// The bootstrap tokens of the cluster now (all labels).
    pub fn tokens(&self, k: &KubeRef) -> Vec<StoredToken> {
        self.with(k, |c, _| {
            c.secrets
                .values()
                .filter_map(StoredToken::from_secret)
                .collect()
        })
    }

    /// `namespace/name` of every Secret of the cluster now.
    pub fn secret_names(&self, k: &KubeRef) -> Vec<String> {
        self.with(k, |c, _| {
            c.secrets
                .keys()
                .map(|(ns, n)| format!("{ns}/{n}"))
                .collect()
        })
    }

    // ------------------------------------------------------- device plugin

    /// The device plugin's objects present now, as `kind namespace/name`
    /// (`ServiceAccount kube-system/tpu-device-plugin-sa`, …).
    pub fn device_plugin_objects(&self, k: &KubeRef) -> Vec<String> {
        self.with(k, |c, _| {
            let mut out = Vec::new();
            out.extend(
                c.service_accounts
                    .keys()
                    .map(|(ns, n)| format!("ServiceAccount {ns}/{n}")),
            );
            out.extend(c.cluster_roles.keys().map(|n| format!("ClusterRole {n}")));
            out.extend(
                c.cluster_role_bindings
                    .keys()
                    .map(|n| format!("ClusterRoleBinding {n}")),
            );
            out.extend(
                c.daemonsets
                    .keys()
                    .map(|(ns, n)| format!("DaemonSet {ns}/{n}")),
            );
            out
        })
    }
}

fn method_verb(method: &str) -> &'static str {
    match method {
        "patch_node" | "cordon_node" | "uncordon_node" | "apply_device_plugin" => "patch",
        "delete_node" | "delete_secret" | "delete_device_plugin" => "delete",
        "create_bootstrap_token" | "evict_pod" => "create",
        "nodes" | "pods" | "bootstrap_tokens" => "list",
        _ => "get",
    }
}

fn fault_error(fault: KubeFault, k: &KubeRef, attempt: Attempt) -> KubeError {
    let endpoint = k.endpoint.clone();
    match fault {
        KubeFault::Unreachable => KubeError::Unreachable {
            endpoint,
            server: format!("https://{}", k.endpoint),
            attempt,
            detail: "connection refused (fake)".to_owned(),
        },
        KubeFault::Forbidden => KubeError::Forbidden {
            endpoint,
            attempt,
            message: "forbidden (fake)".to_owned(),
        },
        KubeFault::Unauthorized => KubeError::Api {
            endpoint,
            attempt,
            status: 401,
            message: "Unauthorized: Unauthorized (fake)".to_owned(),
        },
        KubeFault::NotFound => KubeError::NotFound {
            endpoint,
            attempt,
            message: "not found (fake)".to_owned(),
        },
        KubeFault::Conflict => KubeError::Conflict {
            endpoint,
            attempt,
            message: "conflict (fake)".to_owned(),
        },
        KubeFault::Server | KubeFault::Panic => KubeError::Api {
            endpoint,
            attempt,
            status: 500,
            message: "InternalError: internal error (fake)".to_owned(),
        },
    }
}

fn not_found(k: &KubeRef, attempt: Attempt) -> KubeError {
    let message = format!("{attempt}: not found");
    KubeError::NotFound {
        endpoint: k.endpoint.clone(),
        attempt,
        message,
    }
}

/// Stores `obj` under `at` when it differs from what is there (ignoring
/// server-set metadata); bumps its resourceVersion then. Returns whether it
/// changed.
fn put_if_changed<T>(
    slot: Option<&T>,
    obj: &T,
    rv: &mut u64,
    meta: impl Fn(&mut T) -> &mut ObjectMeta,
) -> Option<T>
where
    T: Clone + PartialEq,
{
    let strip = |o: &T| {
        let mut o = o.clone();
        let m = meta(&mut o);
        m.resource_version = None;
        m.generation = None;
        m.uid = None;
        m.creation_timestamp = None;
        m.managed_fields = None;
        o
    };
    if slot.is_some_and(|old| strip(old) == strip(obj)) {
        return None;
    }
    let mut new = strip(obj);
    *rv += 1;
    let m = meta(&mut new);
    m.resource_version = Some(rv.to_string());
    m.uid = slot
        .and_then(|old| meta(&mut old.clone()).uid.clone())
        .or_else(|| Some(format!("fake-uid-{rv}")));
    m.generation = Some(
        slot.and_then(|old| meta(&mut old.clone()).generation)
            .unwrap_or(0)
            + 1,
    );
    Some(new)
}

#[async_trait]
impl KubeService for FakeKube {
    fn deferred(&self, k: &KubeRef) -> Option<String> {
        self.lock().clusters.get(k).and_then(|c| c.deferred.clone())
    }

    async fn reachable(&self, k: &KubeRef) -> Result<(), KubeError> {
        self.call("reachable", k, "")
    }

    async fn server_version(&self, k: &KubeRef) -> Result<(u32, u32), KubeError> {
        self.call("server_version", k, "")?;
        Ok((1, 36))
    }

    async fn nodes(&self, k: &KubeRef) -> Result<Vec<Node>, KubeError> {
        self.call("nodes", k, "")?;
        let mut nodes: Vec<Node> = self.with(k, |c, _| c.nodes.values().cloned().collect());
        if let Some(source) = self
            .gke_nodes
            .as_ref()
            .filter(|_| k.gke_cluster().is_some())
        {
            nodes.extend(source(k));
        }
        Ok(nodes)
    }

    async fn patch_node(
        &self,
        k: &KubeRef,
        name: &str,
        labels: &BTreeMap<String, Option<String>>,
        taints: Option<&[Taint]>,
    ) -> Result<(), KubeError> {
        self.call("patch_node", k, name)?;
        if labels.is_empty() && taints.is_none() {
            return Ok(());
        }
        self.with(k, |c, rv| {
            let node = c
                .nodes
                .get_mut(name)
                .ok_or_else(|| not_found(k, Attempt::on("patch", "nodes", name)))?;
            let l = node.metadata.labels.get_or_insert_with(BTreeMap::new);
            for (key, value) in labels {
                match value {
                    Some(v) => l.insert(key.clone(), v.clone()),
                    None => l.remove(key),
                };
            }
            if let Some(t) = taints {
                node.spec.get_or_insert_with(NodeSpec::default).taints =
                    Some(t.to_vec()).filter(|t| !t.is_empty());
            }
            *rv += 1;
            node.metadata.resource_version = Some(rv.to_string());
            Ok(())
        })
    }

    async fn cordon_node(&self, k: &KubeRef, name: &str) -> Result<(), KubeError> {
        self.call("cordon_node", k, name)?;
        self.with(k, |c, rv| {
            let node = c
                .nodes
                .get_mut(name)
                .ok_or_else(|| not_found(k, Attempt::on("get", "nodes", name)))?;
            if is_cordoned(node) {
                return Ok(());
            }
            node.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(CORDONED_BY_SLICECTL.to_owned(), "true".to_owned());
            let spec = node.spec.get_or_insert_with(NodeSpec::default);
            spec.unschedulable = Some(true);
            let taints = spec.taints.get_or_insert_with(Vec::new);
            if !taints
                .iter()
                .any(|t| t.key == UNSCHEDULABLE_TAINT_KEY && t.effect == "NoSchedule")
            {
                taints.push(unschedulable_taint());
            }
            *rv += 1;
            node.metadata.resource_version = Some(rv.to_string());
            Ok(())
        })
    }

    async fn jobsets(&self, k: &KubeRef) -> Result<Vec<serde_json::Value>, KubeError> {
        self.call("jobsets", k, "")?;
        Ok(self.with(k, |c, _| c.jobsets.clone()))
    }

    async fn watch_workloads(
        &self,
        k: &KubeRef,
        _wake: tokio::sync::mpsc::UnboundedSender<()>,
    ) -> Result<(), KubeError> {
        self.call("watch_workloads", k, "")
    }

    async fn create_event(
        &self,
        k: &KubeRef,
        event: &k8s_openapi::api::core::v1::Event,
    ) -> Result<bool, KubeError> {
        let name = event.metadata.name.clone().unwrap_or_default();
        self.call("create_event", k, &name)?;
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        let what = (
            text(&event.involved_object.name),
            text(&event.type_),
            text(&event.reason),
            text(&event.message),
        );
        Ok(self.with(k, |c, _| {
            if c.events.contains_key(&name) {
                return false;
            }
            c.events.insert(name, what);
            true
        }))
    }

    async fn pods(&self, k: &KubeRef) -> Result<Vec<Pod>, KubeError> {
        self.call("pods", k, "")?;
        Ok(self.with(k, |c, _| {
            c.pods
                .values()
                .filter(|p| {
                    !matches!(
                        p.status.as_ref().and_then(|s| s.phase.as_deref()),
                        Some("Succeeded" | "Failed")
                    )
                })
                .cloned()
                .collect()
        }))
    }

    async fn evict_pod(
        &self,
        k: &KubeRef,
        namespace: &str,
        name: &str,
    ) -> Result<Eviction, KubeError> {
        self.call("evict_pod", k, &format!("{namespace}/{name}"))?;
        Ok(self.with(k, |c, _| {
            let id = key(namespace, name);
            if c.protected_pods.contains(&id) && c.pods.contains_key(&id) {
                return Eviction::Refused {
                    message: "Cannot evict pod as it would violate the pod's disruption budget."
                        .into(),
                    retry_after: c.eviction_retry_after,
                };
            }
            c.pods.remove(&id);
            Eviction::Evicted
        }))
    }

    async fn uncordon_node(&self, k: &KubeRef, name: &str, label: &str) -> Result<(), KubeError> {
        self.call("uncordon_node", k, name)?;
        self.with(k, |c, rv| {
            let Some(node) = c.nodes.get_mut(name) else {
                return;
            };
            let ours = node
                .metadata
                .labels
                .as_mut()
                .and_then(|l| {
                    l.remove(label);
                    l.remove(CORDONED_BY_SLICECTL)
                })
                .is_some();
            if let Some(spec) = node.spec.as_mut().filter(|_| ours) {
                spec.unschedulable = None;
                if let Some(t) = spec.taints.as_mut() {
                    t.retain(|t| !(t.key == UNSCHEDULABLE_TAINT_KEY && t.effect == "NoSchedule"));
                }
            }
            *rv += 1;
            node.metadata.resource_version = Some(rv.to_string());
        });
        Ok(())
    }

    async fn delete_node(&self, k: &KubeRef, name: &str) -> Result<(), KubeError> {
        self.call("delete_node", k, name)?;
        self.with(k, |c, _| c.nodes.remove(name));
        Ok(())
    }

    async fn bootstrap_tokens(
        &self,
        k: &KubeRef,
        selector: &str,
    ) -> Result<Vec<StoredToken>, KubeError> {
        self.call("bootstrap_tokens", k, selector)?;
        let sel = LabelSelector::parse(selector).map_err(|e| KubeError::Api {
            endpoint: k.endpoint.clone(),
            attempt: Attempt::new("list", "secrets"),
            status: 400,
            message: format!("BadRequest: {e}"),
        })?;
        Ok(self.with(k, |c, _| {
            c.secrets
                .iter()
                .filter(|((ns, _), _)| ns == BOOTSTRAP_TOKEN_NAMESPACE)
                .map(|(_, s)| s)
                .filter(|s| sel.matches(&s.metadata.labels.clone().unwrap_or_default()))
                .filter_map(StoredToken::from_secret)
                .collect()
        }))
    }

    async fn create_bootstrap_token(
        &self,
        k: &KubeRef,
        token: &BootstrapToken,
        ttl: Duration,
        labels: &BTreeMap<String, String>,
    ) -> Result<StoredToken, KubeError> {
        self.call("create_bootstrap_token", k, &token.secret_name())?;
        let attempt = Attempt::on(
            "create",
            "secrets",
            format!("{BOOTSTRAP_TOKEN_NAMESPACE}/{}", token.secret_name()),
        );
        let expiration = expiration_after(ttl).map_err(|message| KubeError::Invalid {
            endpoint: k.endpoint.clone(),
            attempt: attempt.clone(),
            message,
        })?;
        let mut secret = token.to_secret(&TokenSpec::node_join(expiration));
        secret.metadata.labels = Some(labels.clone());
        self.with(k, |c, rv| {
            let at = key(BOOTSTRAP_TOKEN_NAMESPACE, &token.secret_name());
            if c.secrets.contains_key(&at) {
                return Err(KubeError::Conflict {
                    endpoint: k.endpoint.clone(),
                    message: format!("secrets \"{}\" already exists", token.secret_name()),
                    attempt,
                });
            }
            *rv += 1;
            secret.metadata.resource_version = Some(rv.to_string());
            let stored = StoredToken::from_secret(&secret);
            c.secrets.insert(at, secret);
            stored.ok_or_else(|| KubeError::Invalid {
                endpoint: k.endpoint.clone(),
                attempt,
                message: "the created Secret does not read back as a token".to_owned(),
            })
        })
    }

    async fn delete_secret(
        &self,
        k: &KubeRef,
        namespace: &str,
        name: &str,
    ) -> Result<(), KubeError> {
        self.call("delete_secret", k, &format!("{namespace}/{name}"))?;
        self.with(k, |c, _| c.secrets.remove(&key(namespace, name)));
        Ok(())
    }

    async fn ca_cert_hash(&self, k: &KubeRef) -> Result<String, KubeError> {
        self.call("ca_cert_hash", k, "")?;
        Ok(self.with(k, |c, _| {
            c.ca_hash.clone().unwrap_or_else(|| default_ca_hash(k))
        }))
    }

    async fn daemonset(
        &self,
        k: &KubeRef,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DaemonSet>, KubeError> {
        self.call("daemonset", k, &format!("{namespace}/{name}"))?;
        Ok(self.with(k, |c, _| c.daemonsets.get(&key(namespace, name)).cloned()))
    }

    async fn apply_device_plugin(
        &self,
        k: &KubeRef,
        objects: &DevicePluginObjects,
    ) -> Result<(), KubeError> {
        let ds_ns = objects.daemonset.metadata.namespace.clone();
        let sa_ns = objects.service_account.metadata.namespace.clone();
        let ds_name = meta_name(&objects.daemonset.metadata);
        self.call(
            "apply_device_plugin",
            k,
            &format!("{}/{ds_name}", ds_ns.as_deref().unwrap_or("")),
        )?;
        let (Some(ds_ns), Some(sa_ns)) = (ds_ns, sa_ns) else {
            return Err(KubeError::Invalid {
                endpoint: k.endpoint.clone(),
                attempt: Attempt::new("patch", "apps/daemonsets"),
                message: "the device plugin's DaemonSet or ServiceAccount has no namespace"
                    .to_owned(),
            });
        };
        self.with(k, |c, rv| {
            let at = key(&sa_ns, &meta_name(&objects.service_account.metadata));
            if let Some(new) = put_if_changed(
                c.service_accounts.get(&at),
                &objects.service_account,
                rv,
                |o| &mut o.metadata,
            ) {
                c.service_accounts.insert(at, new);
            }
            let at = meta_name(&objects.cluster_role.metadata);
            if let Some(new) =
                put_if_changed(c.cluster_roles.get(&at), &objects.cluster_role, rv, |o| {
                    &mut o.metadata
                })
            {
                c.cluster_roles.insert(at, new);
            }
            let at = meta_name(&objects.cluster_role_binding.metadata);
            if let Some(new) = put_if_changed(
                c.cluster_role_bindings.get(&at),
                &objects.cluster_role_binding,
                rv,
                |o| &mut o.metadata,
            ) {
                c.cluster_role_bindings.insert(at, new);
            }
            let at = key(&ds_ns, &ds_name);
            if let Some(new) = put_if_changed(c.daemonsets.get(&at), &objects.daemonset, rv, |o| {
                &mut o.metadata
            }) {
                c.daemonsets.insert(at, new);
            }
        });
        Ok(())
    }

    async fn delete_device_plugin(
        &self,
        k: &KubeRef,
        objects: &DevicePluginObjects,
    ) -> Result<(), KubeError> {
        let ds_name = meta_name(&objects.daemonset.metadata);
        let ds_ns = objects
            .daemonset
            .metadata
            .namespace
            .clone()
            .unwrap_or_default();
        self.call("delete_device_plugin", k, &format!("{ds_ns}/{ds_name}"))?;
        self.with(k, |c, _| {
            c.daemonsets.remove(&key(&ds_ns, &ds_name));
            c.cluster_role_bindings
                .remove(&meta_name(&objects.cluster_role_binding.metadata));
            c.cluster_roles
                .remove(&meta_name(&objects.cluster_role.metadata));
            let sa_ns = objects
                .service_account
                .metadata
                .namespace
                .clone()
                .unwrap_or_default();
            c.service_accounts
                .remove(&key(&sa_ns, &meta_name(&objects.service_account.metadata)));
        });
        Ok(())
    }
}

/// A device plugin to test with: `kube-system/tpu-device-plugin` running
/// `image`, its ServiceAccount `tpu-device-plugin-sa`, and the ClusterRole
/// and binding `slicectl:tpu-device-plugin` (nodes and pods, as
/// tpu-operator's). The lead's renderer makes the real one.
pub fn sample_device_plugin(image: &str) -> DevicePluginObjects {
    use k8s_openapi::api::apps::v1::DaemonSetSpec;
    use k8s_openapi::api::core::v1::{
        Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
        PodTemplateSpec, Toleration,
    };
    use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as MetaSelector;

    let ns = "kube-system";
    let labels = BTreeMap::from([("k8s-app".to_owned(), "tpu-device-plugin".to_owned())]);
    let meta = |name: &str, namespace: Option<&str>| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(labels.clone()),
        ..ObjectMeta::default()
    };
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(groups.iter().map(|s| (*s).to_owned()).collect()),
        resources: Some(resources.iter().map(|s| (*s).to_owned()).collect()),
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        ..PolicyRule::default()
    };
    DevicePluginObjects {
        service_account: ServiceAccount {
            metadata: meta("tpu-device-plugin-sa", Some(ns)),
            ..ServiceAccount::default()
        },
        cluster_role: ClusterRole {
            metadata: meta("slicectl:tpu-device-plugin", None),
            rules: Some(vec![
                rule(
                    &[""],
                    &["nodes"],
                    &["get", "list", "watch", "patch", "update"],
                ),
                rule(&[""], &["nodes/status"], &["get", "patch", "update"]),
                rule(&[""], &["pods"], &["get", "list", "watch"]),
            ]),
            ..ClusterRole::default()
        },
        cluster_role_binding: ClusterRoleBinding {
            metadata: meta("slicectl:tpu-device-plugin", None),
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".to_owned()),
                kind: "ClusterRole".to_owned(),
                name: "slicectl:tpu-device-plugin".to_owned(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: "tpu-device-plugin-sa".to_owned(),
                namespace: Some(ns.to_owned()),
                ..Subject::default()
            }]),
        },
        daemonset: DaemonSet {
            metadata: meta("tpu-device-plugin", Some(ns)),
            spec: Some(DaemonSetSpec {
                selector: MetaSelector {
                    match_labels: Some(labels.clone()),
                    ..MetaSelector::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels.clone()),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        host_network: Some(true),
                        priority_class_name: Some("system-node-critical".to_owned()),
                        service_account_name: Some("tpu-device-plugin-sa".to_owned()),
                        affinity: Some(k8s_openapi::api::core::v1::Affinity {
                            node_affinity: Some(NodeAffinity {
                                required_during_scheduling_ignored_during_execution: Some(
                                    NodeSelector {
                                        node_selector_terms: vec![NodeSelectorTerm {
                                            match_expressions: Some(vec![
                                                NodeSelectorRequirement {
                                                    key: "cloud.google.com/gke-tpu-accelerator"
                                                        .to_owned(),
                                                    operator: "Exists".to_owned(),
                                                    values: None,
                                                },
                                            ]),
                                            ..NodeSelectorTerm::default()
                                        }],
                                    },
                                ),
                                ..NodeAffinity::default()
                            }),
                            ..Default::default()
                        }),
                        tolerations: Some(vec![
                            Toleration {
                                operator: Some("Exists".to_owned()),
                                effect: Some("NoExecute".to_owned()),
                                ..Toleration::default()
                            },
                            Toleration {
                                operator: Some("Exists".to_owned()),
                                effect: Some("NoSchedule".to_owned()),
                                ..Toleration::default()
                            },
                        ]),
                        containers: vec![Container {
                            name: "tpu-device-plugin".to_owned(),
                            image: Some(image.to_owned()),
                            command: Some(vec!["/usr/bin/tpu-device-plugin".to_owned()]),
                            args: Some(vec!["--logtostderr".to_owned()]),
                            ..Container::default()
                        }],
                        ..PodSpec::default()
                    }),
                },
                ..DaemonSetSpec::default()
            }),
            ..DaemonSet::default()
        },
    }
}

#[cfg(test)]
#[path = "fake/tests.rs"]
mod tests;
