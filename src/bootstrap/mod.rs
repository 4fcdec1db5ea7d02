//! The VM side of the kubeadm pull-model bootstrap: the metadata contract
//! between slicectl, the startup script it renders into instance templates,
//! and the VM (pure: no I/O).
//!
//! * Instance **template** metadata (static per slice): [`STARTUP_SCRIPT_KEY`],
//!   [`KUBERNETES_VERSION_KEY`], [`KUBE_LABELS_KEY`], [`KUBE_TAINTS_KEY`].
//! * Each **VM**'s metadata, written by slicectl with `setMetadata` once the
//!   VM is RUNNING: [`JOIN_TOKEN_KEY`] (removed after the node joined),
//!   [`API_ENDPOINT_KEY`], [`CA_HASH_KEY`].
//! * Progress the VM reports in guest attributes
//!   [`GUEST_NAMESPACE`]`/`[`GUEST_BOOTSTRAP_KEY`]: see [`BootstrapStatus`].
//!
//! The startup script ([`STARTUP_SCRIPT`]) takes every value from metadata;
//! nothing from a spec is pasted into its text.

use std::collections::BTreeMap;
use std::fmt;

/// The startup script slicectl puts in instance templates (`startup-script`).
/// Bash; reads everything it needs from the metadata server.
pub const STARTUP_SCRIPT: &str = include_str!("startup-script.sh");

/// Template metadata key: the startup script GCE runs at boot.
pub const STARTUP_SCRIPT_KEY: &str = "startup-script";
/// Template metadata key: the Kubernetes minor version (`1.36`) whose
/// kubelet/kubeadm the script installs.
pub const KUBERNETES_VERSION_KEY: &str = "slicectl-kubernetes-version";
/// Template metadata key: node labels, see [`encode_labels`]. The TPU device
/// plugin also reads this key (tpu-anchors.md §B.5).
pub const KUBE_LABELS_KEY: &str = "kube-labels";
/// Template metadata key: node taints registered with the node, see
/// [`encode_taints`].
pub const KUBE_TAINTS_KEY: &str = "kube-taints";
/// VM metadata key: the bootstrap token `<id>.<secret>`. A secret.
pub const JOIN_TOKEN_KEY: &str = "kubeadm-join-token";
/// VM metadata key: the API server the node joins, `HOST:PORT`.
pub const API_ENDPOINT_KEY: &str = "kubeadm-api-endpoint";
/// VM metadata key: kubeadm's CA pin, `sha256:<hex>`.
pub const CA_HASH_KEY: &str = "kubeadm-ca-hash";
/// Guest-attribute namespace the VM reports into.
pub const GUEST_NAMESPACE: &str = "slicectl";
/// Guest-attribute key (in [`GUEST_NAMESPACE`]) holding [`BootstrapStatus`].
pub const GUEST_BOOTSTRAP_KEY: &str = "bootstrap";
/// The guest-attribute path `NS/KEY` of the bootstrap status, as Compute
/// Engine's guest attributes (and the simulator's) key it.
pub const GUEST_BOOTSTRAP_PATH: &str = "slicectl/bootstrap";

/// The VM's bootstrap progress, as written to `slicectl/bootstrap`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapStatus {
    /// `waiting-for-token`: the VM polls its metadata for token, endpoint and
    /// CA hash.
    WaitingForToken,
    /// `joining`: `kubeadm join` (or the simulated join) is running.
    Joining,
    /// `joined`: the node joined the cluster.
    Joined,
    /// `failed: <reason>`: one line, never containing the token.
    Failed(String),
}

impl BootstrapStatus {
    /// Parses the guest-attribute value; `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "waiting-for-token" => Some(Self::WaitingForToken),
            "joining" => Some(Self::Joining),
            "joined" => Some(Self::Joined),
            other => other
                .strip_prefix("failed: ")
                .map(|r| Self::Failed(r.to_owned())),
        }
    }
}

impl fmt::Display for BootstrapStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WaitingForToken => f.write_str("waiting-for-token"),
            Self::Joining => f.write_str("joining"),
            Self::Joined => f.write_str("joined"),
            // One line, whatever the reason held.
            Self::Failed(r) => write!(f, "failed: {}", r.replace(['\n', '\r'], " ")),
        }
    }
}

/// Errors decoding `kube-labels` / `kube-taints`.
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

/// `kube-labels`: the labels comma-joined as `k=v`, sorted by key (the order
/// of the map).
pub fn encode_labels(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `kube-labels` (empty text: no labels). Keys and values are not
/// validated beyond the shape; the script and the node agent check them.
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

/// A taint's effect (`core/v1` `TaintEffect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaintEffect {
    /// `NoSchedule`.
    NoSchedule,
    /// `PreferNoSchedule`.
    PreferNoSchedule,
    /// `NoExecute`.
    NoExecute,
}

impl TaintEffect {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

impl std::str::FromStr for TaintEffect {
    type Err = DecodeError;
    fn from_str(s: &str) -> Result<Self, DecodeError> {
        match s {
            "NoSchedule" => Ok(Self::NoSchedule),
            "PreferNoSchedule" => Ok(Self::PreferNoSchedule),
            "NoExecute" => Ok(Self::NoExecute),
            other => Err(DecodeError::Effect(other.to_owned())),
        }
    }
}

/// A node taint registered at join.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

impl fmt::Display for Taint {
    /// `key=value:Effect`, or `key:Effect` for an empty value (the kubelet's
    /// `--register-with-taints` syntax).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

/// `kube-taints`: the taints comma-joined as `key=value:Effect` (`key:Effect`
/// when the value is empty), in the given order.
pub fn encode_taints(taints: &[Taint]) -> String {
    taints
        .iter()
        .map(Taint::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `kube-taints` (empty text: no taints).
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
            Ok(Taint {
                key: key.to_owned(),
                value: value.to_owned(),
                effect: effect.parse()?,
            })
        })
        .collect()
}

/// Whether a node may set this label on itself under the NodeRestriction
/// admission plugin (so it may go in `kube-labels` / `--node-labels`).
///
/// Labels in the `kubernetes.io` and `k8s.io` namespaces (and their
/// subdomains) are refused unless they are one of the kubelet's own labels or
/// under `[*.]kubelet.kubernetes.io` / `[*.]node.kubernetes.io`;
/// `node-restriction.kubernetes.io` is always refused. Source:
/// kubernetes/kubernetes `pkg/kubelet/apis/well_known_labels.go`
/// (`IsKubeletLabel`), `plugin/pkg/admission/noderestriction/admission.go`,
/// and the labels in `staging/src/k8s.io/api/core/v1/well_known_labels.go`.
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

/// The providerID of a GCE instance, as the GCE cloud provider and kubeadm
/// nodes on GCE use it: `gce://PROJECT/ZONE/INSTANCE`.
pub fn provider_id(project: &str, zone: &str, instance: &str) -> String {
    format!("gce://{project}/{zone}/{instance}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(items: &[(&str, &str)]) -> BTreeMap<String, String> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn labels_round_trip_sorted_by_key() {
        let labels = map(&[
            ("slicectl.dev/slice", "a"),
            ("cloud.google.com/gke-tpu-topology", "2x2x4"),
            ("cloud.google.com/gke-accelerator-count", "4"),
        ]);
        let text = encode_labels(&labels);
        assert_eq!(
            text,
            "cloud.google.com/gke-accelerator-count=4,cloud.google.com/gke-tpu-topology=2x2x4,slicectl.dev/slice=a"
        );
        assert_eq!(decode_labels(&text), Ok(labels));
        assert_eq!(decode_labels(""), Ok(BTreeMap::new()));
        assert_eq!(encode_labels(&BTreeMap::new()), "");
    }

    #[test]
    fn labels_reject_malformed_items() {
        assert_eq!(
            decode_labels("a=1,b"),
            Err(DecodeError::Label("b".to_owned()))
        );
        assert_eq!(
            decode_labels("=1"),
            Err(DecodeError::Label("=1".to_owned()))
        );
        assert_eq!(
            decode_labels("a=1,a=2"),
            Err(DecodeError::DuplicateLabel("a".to_owned()))
        );
        // An empty value is a valid label value.
        assert_eq!(decode_labels("a="), Ok(map(&[("a", "")])));
    }

    #[test]
    fn taints_round_trip_in_order() {
        let taints = vec![
            Taint {
                key: "google.com/tpu".to_owned(),
                value: "present".to_owned(),
                effect: TaintEffect::NoSchedule,
            },
            Taint {
                key: "dedicated".to_owned(),
                value: String::new(),
                effect: TaintEffect::NoExecute,
            },
        ];
        let text = encode_taints(&taints);
        assert_eq!(
            text,
            "google.com/tpu=present:NoSchedule,dedicated:NoExecute"
        );
        assert_eq!(decode_taints(&text), Ok(taints));
        assert_eq!(decode_taints(""), Ok(vec![]));
    }

    #[test]
    fn taints_reject_bad_items() {
        assert_eq!(
            decode_taints("a=b"),
            Err(DecodeError::Taint("a=b".to_owned()))
        );
        assert_eq!(
            decode_taints("a=b:Sometimes"),
            Err(DecodeError::Effect("Sometimes".to_owned()))
        );
        assert_eq!(
            decode_taints(":NoSchedule"),
            Err(DecodeError::Taint(":NoSchedule".to_owned()))
        );
    }

    #[test]
    fn node_restriction_label_rules() {
        for ok in [
            "cloud.google.com/gke-tpu-accelerator",
            "slicectl.dev/slice",
            "team",
            "kubernetes.io/hostname",
            "topology.kubernetes.io/zone",
            "node.kubernetes.io/instance-type",
            "node.kubernetes.io/anything",
            "x.kubelet.kubernetes.io/y",
            "example.com/kubernetes.io",
        ] {
            assert!(node_may_set_label(ok), "{ok}");
        }
        for refused in [
            "kubernetes.io/role",
            "node-role.kubernetes.io/worker",
            "node-restriction.kubernetes.io/x",
            "k8s.io/x",
            "foo.k8s.io/x",
        ] {
            assert!(!node_may_set_label(refused), "{refused}");
        }
    }

    #[test]
    fn status_round_trips_and_stays_one_line() {
        for s in [
            BootstrapStatus::WaitingForToken,
            BootstrapStatus::Joining,
            BootstrapStatus::Joined,
            BootstrapStatus::Failed("CA hash mismatch".to_owned()),
        ] {
            assert_eq!(BootstrapStatus::parse(&s.to_string()), Some(s));
        }
        assert_eq!(
            BootstrapStatus::Failed("a\nb".to_owned()).to_string(),
            "failed: a b"
        );
        assert_eq!(BootstrapStatus::parse("booting"), None);
    }

    #[test]
    fn provider_id_format() {
        assert_eq!(
            provider_id("p", "us-central1-a", "vm-0"),
            "gce://p/us-central1-a/vm-0"
        );
    }
}
