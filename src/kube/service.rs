//! The narrow seam between slicectl and a cluster's Kubernetes API: every
//! cluster operation the GCE backend needs, and the Nodes a GKE cluster's
//! readiness is read from. Two implementations
//! exist: the real one on kube-rs ([`super::KubeClients`]) and the in-memory
//! recording fake (`fake::FakeKube`, with the `test-support` feature) for the executor's unit tests.
//!
//! A cluster is named by its [`KubeRef`] (the control-plane endpoint its
//! nodes join); how slicectl reaches its API is the implementation's business.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, Secret, ServiceAccount, Taint};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};

use super::bootstrap_token::{BOOTSTRAP_TOKEN_SECRET_TYPE, BootstrapToken};
use super::error::KubeError;
use crate::resource::KubeRef;

/// The taint a cordoned node carries (`corev1.TaintNodeUnschedulable`).
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

/// The field manager of slicectl's server-side applies.
pub const FIELD_MANAGER: &str = "slicectl";

/// A handle on the Kubernetes seam, shareable across tasks.
pub type Kube = Arc<dyn KubeService>;

/// Every Kubernetes operation of the GCE backend, per cluster.
#[async_trait]
pub trait KubeService: Send + Sync {
    /// Why a cluster's API is deliberately not reached, if it is not (a GKE
    /// cluster whose Google token slicectl does not have: talking to a
    /// simulator). Observation defers such a cluster's Kubernetes side and
    /// says why, rather than fail or fake it.
    fn deferred(&self, _k: &KubeRef) -> Option<String> {
        None
    }

    /// Whether the cluster's API answers (a cheap `GET /version`), within a
    /// few seconds. `--sim` uses it to decide whether a GCE target's
    /// Kubernetes side can run.
    async fn reachable(&self, k: &KubeRef) -> Result<(), KubeError>;

    /// The API server's Kubernetes version, `(major, minor)` (from `/version`).
    async fn server_version(&self, k: &KubeRef) -> Result<(u32, u32), KubeError>;

    /// Every Node of the cluster (one paginated list).
    async fn nodes(&self, k: &KubeRef) -> Result<Vec<Node>, KubeError>;

    /// Merge-patches a Node's labels (`None` removes the label) and, when
    /// `taints` is given, replaces its `spec.taints` with them. Nothing is
    /// sent when `labels` is empty and `taints` is `None`.
    async fn patch_node(
        &self,
        k: &KubeRef,
        name: &str,
        labels: &BTreeMap<String, Option<String>>,
        taints: Option<&[Taint]>,
    ) -> Result<(), KubeError>;

    /// Cordons a Node: `spec.unschedulable: true` (what `kubectl cordon`
    /// does, and what the scheduler and `kubectl get nodes` read) **and** the
    /// taint `node.kubernetes.io/unschedulable:NoSchedule` (what tpu-operator
    /// adds, and what the node lifecycle controller would add; it keeps
    /// DaemonSet-free schedulers and clusters without that controller honest).
    /// Idempotent: an already cordoned node gets no write. Other taints are
    /// kept (optimistic concurrency on the Node's resourceVersion). The same
    /// write sets the label [`crate::spec::disruption::CORDONED_BY_SLICECTL`]:
    /// only a cordon slicectl made is ever lifted by it ([`Self::uncordon_node`]).
    async fn cordon_node(&self, k: &KubeRef, name: &str) -> Result<(), KubeError>;

    /// Deletes a Node object; a missing one is fine.
    async fn delete_node(&self, k: &KubeRef, name: &str) -> Result<(), KubeError>;

    /// Every JobSet (`jobset.x-k8s.io/v1alpha2`) of the cluster, as JSON
    /// (one paginated list). A cluster without the JobSet CRD has none.
    async fn jobsets(&self, k: &KubeRef) -> Result<Vec<serde_json::Value>, KubeError>;

    /// Watches the cluster's pending pods and JobSets, and sends on `wake`
    /// whenever a JobSet's leader pod turns Unschedulable for TPUs, or a
    /// JobSet ends or goes: the controller runs a cycle then, not at the
    /// next resync. (That cycle keeps the JobSet's slices for their grace
    /// period and asks for the next at its end:
    /// [`crate::workload::Demand::release_due`].) The watches run in the
    /// background until `wake` is closed; `Err` when they cannot start.
    async fn watch_workloads(
        &self,
        k: &KubeRef,
        wake: tokio::sync::mpsc::UnboundedSender<()>,
    ) -> Result<(), KubeError>;

    /// Creates `event` (a `core/v1` Event, named by the caller) in its
    /// namespace: `Ok(false)` when an Event of that name already exists, so
    /// a deterministic name makes it "once", across restarts too.
    async fn create_event(
        &self,
        k: &KubeRef,
        event: &k8s_openapi::api::core::v1::Event,
    ) -> Result<bool, KubeError>;

    /// Releases a Node from a drain that is no longer planned: the label
    /// `label` removed and, when the Node carries
    /// [`crate::spec::disruption::CORDONED_BY_SLICECTL`] (slicectl made the
    /// cordon), the cordon lifted (`spec.unschedulable` and the unschedulable
    /// taint removed) with that label. A cordon slicectl did not make stays.
    /// A missing Node is fine.
    async fn uncordon_node(&self, k: &KubeRef, name: &str, label: &str) -> Result<(), KubeError>;

    /// Every Pod of the cluster that is not terminal (one paginated list,
    /// field selector `status.phase!=Succeeded,status.phase!=Failed`): what
    /// tells whether a slice replica is busy.
    async fn pods(&self, k: &KubeRef) -> Result<Vec<Pod>, KubeError>;

    /// Evicts a Pod through the Eviction API (`pods/eviction`), so that
    /// PodDisruptionBudgets hold: [`Eviction::Refused`] when the API server
    /// answers 429 (a budget refuses it now). A Pod already gone is
    /// [`Eviction::Evicted`].
    async fn evict_pod(
        &self,
        k: &KubeRef,
        namespace: &str,
        name: &str,
    ) -> Result<Eviction, KubeError>;

    /// The `bootstrap.kubernetes.io/token` Secrets in `kube-system` matching
    /// a label selector (`a=b,c!=d,e`), as [`StoredToken`]s.
    async fn bootstrap_tokens(
        &self,
        k: &KubeRef,
        selector: &str,
    ) -> Result<Vec<StoredToken>, KubeError>;

    /// Creates the Secret of a node-join token (authentication, signing, the
    /// kubeadm node group) valid for `ttl` from now, with `labels`. A token
    /// id that exists already is a [`KubeError::Conflict`]: generate another.
    async fn create_bootstrap_token(
        &self,
        k: &KubeRef,
        token: &BootstrapToken,
        ttl: Duration,
        labels: &BTreeMap<String, String>,
    ) -> Result<StoredToken, KubeError>;

    /// Deletes a Secret; a missing one is fine.
    async fn delete_secret(
        &self,
        k: &KubeRef,
        namespace: &str,
        name: &str,
    ) -> Result<(), KubeError>;

    /// The kubeadm discovery pin (`sha256:<hex>`) of the cluster CA, from
    /// `kube-system/kube-root-ca.crt`.
    async fn ca_cert_hash(&self, k: &KubeRef) -> Result<String, KubeError>;

    /// One DaemonSet, if it exists.
    async fn daemonset(
        &self,
        k: &KubeRef,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DaemonSet>, KubeError>;

    /// Server-side applies (field manager `slicectl`, forced) the device
    /// plugin's ServiceAccount, ClusterRole, ClusterRoleBinding and
    /// DaemonSet, in that order. Applying what is live changes nothing.
    async fn apply_device_plugin(
        &self,
        k: &KubeRef,
        objects: &DevicePluginObjects,
    ) -> Result<(), KubeError>;

    /// Deletes the device plugin's DaemonSet, ClusterRoleBinding,
    /// ClusterRole and ServiceAccount, in that order; missing ones are fine.
    async fn delete_device_plugin(
        &self,
        k: &KubeRef,
        objects: &DevicePluginObjects,
    ) -> Result<(), KubeError>;
}

/// What an eviction came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eviction {
    /// The Pod is being deleted (or was gone already).
    Evicted,
    /// A PodDisruptionBudget (or the API server's rate limit) refuses it
    /// now (429), with the API server's message and how long it asks the
    /// caller to wait before asking again (`Retry-After`), when it says.
    Refused {
        /// The API server's message.
        message: String,
        /// `Retry-After`, when given and not 0.
        retry_after: Option<std::time::Duration>,
    },
}

/// The objects of the TPU device plugin, rendered by the pure core. Each
/// must have a name; the ServiceAccount and the DaemonSet a namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct DevicePluginObjects {
    /// The plugin's ServiceAccount.
    pub service_account: ServiceAccount,
    /// Its ClusterRole (nodes, nodes/status, pods).
    pub cluster_role: ClusterRole,
    /// The binding of the role to the ServiceAccount.
    pub cluster_role_binding: ClusterRoleBinding,
    /// The DaemonSet (`kube-system/tpu-device-plugin`).
    pub daemonset: DaemonSet,
}

/// A bootstrap-token Secret as read back from a cluster. Its `Debug` never
/// shows the secret.
#[derive(Debug, Clone)]
pub struct StoredToken {
    /// The Secret's name (`bootstrap-token-<id>`), in `kube-system`.
    pub secret_name: String,
    /// The token; `None` when the Secret does not hold a well-formed token
    /// id, secret and expiration. Such a Secret is never reused but is still
    /// listed, so that teardown deletes it.
    pub token: Option<BootstrapToken>,
    /// When the token expires; `None` for a token without expiration.
    pub expiration: Option<jiff::Timestamp>,
    /// The Secret's labels.
    pub labels: BTreeMap<String, String>,
}

impl StoredToken {
    /// Reads a bootstrap-token Secret; `None` when it is not one.
    pub fn from_secret(secret: &Secret) -> Option<StoredToken> {
        if secret.type_.as_deref() != Some(BOOTSTRAP_TOKEN_SECRET_TYPE) {
            return None;
        }
        let secret_name = secret.metadata.name.clone()?;
        let data = secret.data.as_ref();
        let field = |key: &str| {
            data.and_then(|d| d.get(key))
                .and_then(|v| std::str::from_utf8(&v.0).ok())
                .map(str::to_owned)
        };
        let id = field("token-id");
        let expiration_text = field("expiration");
        let expiration = expiration_text
            .as_deref()
            .map(|t| t.parse::<jiff::Timestamp>());
        let well_formed_expiration = !matches!(expiration, Some(Err(_)));
        let token = match (id, field("token-secret")) {
            (Some(id), Some(s)) if well_formed_expiration => {
                // The id must match the name, as the authenticator requires.
                BootstrapToken::parse(&format!("{id}.{s}"))
                    .ok()
                    .filter(|t| t.secret_name() == secret_name)
            }
            _ => None,
        };
        if token.is_none() {
            tracing::warn!(
                secret = %secret_name,
                "bootstrap-token Secret does not hold a well-formed token; it is not reused"
            );
        }
        Some(StoredToken {
            secret_name,
            token,
            expiration: expiration.and_then(Result::ok),
            labels: secret.metadata.labels.clone().unwrap_or_default(),
        })
    }

    /// How long the token stays valid after `now` (`None`: no expiration;
    /// negative: expired).
    pub fn remaining(&self, now: jiff::Timestamp) -> Option<jiff::SignedDuration> {
        self.expiration.map(|e| e.duration_since(now))
    }

    /// Whether the token is well-formed and valid for at least `min_left`
    /// after `now`.
    pub fn usable_for(&self, now: jiff::Timestamp, min_left: jiff::SignedDuration) -> bool {
        self.token.is_some() && self.remaining(now).is_none_or(|left| left >= min_left)
    }

    /// The token to reuse among `tokens`: of those usable for at least
    /// `min_left`, the one that expires last (tpu-operator's rule, with a
    /// fixed order among equals: the Secret name).
    pub fn reusable(
        tokens: &[StoredToken],
        now: jiff::Timestamp,
        min_left: jiff::SignedDuration,
    ) -> Option<&StoredToken> {
        tokens
            .iter()
            .filter(|t| t.usable_for(now, min_left))
            .max_by(|a, b| {
                // No expiration sorts last (it never expires).
                let key = |t: &StoredToken| (t.expiration.is_none(), t.expiration);
                key(a)
                    .cmp(&key(b))
                    .then_with(|| b.secret_name.cmp(&a.secret_name))
            })
    }
}

/// One requirement of an equality-based label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

/// An equality-based label selector (`a=b`, `a==b`, `a!=b`, `a`, `!a`,
/// comma-separated), as the fake and unit tests match it. Set-based forms
/// (`in`, `notin`) are not supported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector(Vec<Requirement>);

/// A label selector the fake cannot read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unsupported label selector {0:?}: only a=b, a==b, a!=b, a and !a are understood")]
pub struct SelectorError(String);

impl LabelSelector {
    /// Parses a selector; the empty selector matches everything.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bad = || SelectorError(text.to_owned());
            let req = if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::NotExists(k.trim().to_owned())
            } else if part.contains(' ') || part.contains('(') {
                return Err(bad());
            } else {
                Requirement::Exists(part.to_owned())
            };
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        })
    }
}

/// When a token minted now for `ttl` expires, in whole seconds (truncated:
/// the Secret stores RFC 3339 without fractions).
pub(crate) fn expiration_after(ttl: Duration) -> Result<jiff::Timestamp, String> {
    let ttl = jiff::SignedDuration::try_from(ttl)
        .map_err(|e| format!("token lifetime out of range: {e}"))?;
    let at = jiff::Timestamp::now()
        .checked_add(ttl)
        .map_err(|e| format!("token lifetime out of range: {e}"))?;
    Ok(at
        .round(
            jiff::TimestampRound::new()
                .smallest(jiff::Unit::Second)
                .mode(jiff::RoundMode::Trunc),
        )
        .unwrap_or(at))
}

/// The unschedulable taint a cordon adds.
pub fn unschedulable_taint() -> Taint {
    Taint {
        key: UNSCHEDULABLE_TAINT_KEY.to_owned(),
        effect: "NoSchedule".to_owned(),
        ..Taint::default()
    }
}

/// Whether a Node is cordoned the way [`KubeService::cordon_node`] leaves it.
pub fn is_cordoned(node: &Node) -> bool {
    let spec = node.spec.as_ref();
    let unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    let tainted = spec.and_then(|s| s.taints.as_ref()).is_some_and(|ts| {
        ts.iter()
            .any(|t| t.key == UNSCHEDULABLE_TAINT_KEY && t.effect == "NoSchedule")
    });
    unschedulable && tainted
}

#[cfg(test)]
#[path = "service/tests.rs"]
mod tests;
