//! The VM side of slicectl's kubeadm bootstrap contract, as the simulated
//! VM's node agent (`kubelet`) reads it: the metadata keys the startup script
//! takes its values from, the guest attribute it reports progress into and
//! the values it writes there, the `kube-labels` / `kube-taints` encodings,
//! the labels NodeRestriction lets a node set on itself, and the providerID
//! of a GCE instance.
//!
//! This is the simulator's own copy: the simulated VM plays the real startup
//! script and kubelet, so it must not share the client's code for what the
//! VM understands. slicectl's test `sim_tables` checks that the client's
//! `slicectl::bootstrap` and this copy agree (keys, status values, encodings).

use std::collections::BTreeMap;
use std::fmt;

/// Template metadata key: node labels (`k=v,k2=v2`).
pub const KUBE_LABELS_KEY: &str = "kube-labels";
/// Template metadata key: node taints (`key[=value]:Effect,…`).
pub const KUBE_TAINTS_KEY: &str = "kube-taints";
/// VM metadata key: the bootstrap token `<id>.<secret>`.
pub const JOIN_TOKEN_KEY: &str = "kubeadm-join-token";
/// VM metadata key: the API server the node joins, `HOST:PORT`.
pub const API_ENDPOINT_KEY: &str = "kubeadm-api-endpoint";
/// VM metadata key: kubeadm's CA pin, `sha256:<hex>`.
pub const CA_HASH_KEY: &str = "kubeadm-ca-hash";
/// Guest-attribute namespace the VM reports into.
pub const GUEST_NAMESPACE: &str = "slicectl";
/// Guest-attribute key (in [`GUEST_NAMESPACE`]) of the bootstrap status.
pub const GUEST_BOOTSTRAP_KEY: &str = "bootstrap";
/// The guest-attribute path `NS/KEY` of the bootstrap status.
pub const GUEST_BOOTSTRAP_PATH: &str = "slicectl/bootstrap";

/// The VM's bootstrap progress, as written to [`GUEST_BOOTSTRAP_PATH`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapStatus {
    /// `waiting-for-token`.
    WaitingForToken,
    /// `joining`.
    Joining,
    /// `joined`.
    Joined,
    /// `failed: <reason>` (one line).
    Failed(String),
}

impl fmt::Display for BootstrapStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WaitingForToken => f.write_str("waiting-for-token"),
            Self::Joining => f.write_str("joining"),
            Self::Joined => f.write_str("joined"),
            Self::Failed(r) => write!(f, "failed: {}", r.replace(['\n', '\r'], " ")),
        }
    }
}

/// Errors decoding `kube-labels` / `kube-taints` (the startup script's
/// words, which the node agent reports).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A `kube-labels` item is not `key=value`.
    #[error("kube-labels item {0:?} is not key=value")]
    Label(String),
    /// A `kube-labels` key appears twice.
    #[error("kube-labels key {0:?} appears more than once")]
    DuplicateLabel(String),
    /// A `kube-taints` item is not `key[=value]:Effect`.
    #[error("kube-taints item {0:?} is not key[=value]:Effect")]
    Taint(String),
    /// A taint effect other than NoSchedule, PreferNoSchedule, NoExecute.
    #[error("kube-taints effect {0:?} is not NoSchedule, PreferNoSchedule or NoExecute")]
    Effect(String),
}

/// Parses `kube-labels` (empty text: no labels).
pub fn decode_labels(text: &str) -> Result<BTreeMap<String, String>, DecodeError> {
    let mut out = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| DecodeError::Label(item.to_owned()))?;
        if out.insert(k.to_owned(), v.to_owned()).is_some() {
            return Err(DecodeError::DuplicateLabel(k.to_owned()));
        }
    }
    Ok(out)
}

/// A taint from `kube-taints`, its effect one of Kubernetes' three
/// (`core/v1` `TaintEffect`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: &'static str,
}

/// Parses `kube-taints` (empty text: no taints), the kubelet's
/// `--register-with-taints` syntax.
pub fn decode_taints(text: &str) -> Result<Vec<Taint>, DecodeError> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let bad = || DecodeError::Taint(item.to_owned());
            let (kv, effect) = item.rsplit_once(':').ok_or_else(bad)?;
            let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
            if key.is_empty() {
                return Err(bad());
            }
            let effect = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
                .into_iter()
                .find(|e| *e == effect)
                .ok_or_else(|| DecodeError::Effect(effect.to_owned()))?;
            Ok(Taint {
                key: key.to_owned(),
                value: value.to_owned(),
                effect,
            })
        })
        .collect()
}

/// Whether a node may set this label on itself under the NodeRestriction
/// admission plugin. Source: kubernetes/kubernetes
/// `pkg/kubelet/apis/well_known_labels.go` (`IsKubeletLabel`),
/// `plugin/pkg/admission/noderestriction/admission.go`.
pub fn node_may_set_label(key: &str) -> bool {
    const KUBELET_LABELS: [&str; 11] = [
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
    ];
    let Some((namespace, _)) = key.split_once('/') else {
        return true;
    };
    let under = |ns: &str, domain: &str| ns == domain || ns.ends_with(&format!(".{domain}"));
    if under(namespace, "node-restriction.kubernetes.io") {
        return false;
    }
    if !under(namespace, "kubernetes.io") && !under(namespace, "k8s.io") {
        return true;
    }
    KUBELET_LABELS.contains(&key)
        || under(namespace, "kubelet.kubernetes.io")
        || under(namespace, "node.kubernetes.io")
}

/// The providerID the GCE cloud provider gives an instance's Node:
/// `gce://PROJECT/ZONE/INSTANCE` (kubernetes/cloud-provider-gcp).
pub fn provider_id(project: &str, zone: &str, instance: &str) -> String {
    format!("gce://{project}/{zone}/{instance}")
}

#[cfg(test)]
#[path = "contract/tests.rs"]
mod tests;
