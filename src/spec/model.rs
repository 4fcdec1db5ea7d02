//! The spec documents as written by users: `Target` and `Slice`.
//!
//! These types are the YAML/JSON shape (camelCase, unknown fields rejected) and
//! the source of the JSON Schema in `schemas/`. Semantic checks live in
//! [`crate::spec::validate`]; the validated fleet is [`crate::spec::Fleet`].

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only `apiVersion` this release reads.
pub const API_VERSION: &str = "slicectl.dev/v1alpha1";

/// `metadata` of a document, Kubernetes-style.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// Name, unique per kind across the whole spec directory. DNS-1123 label
    /// (lowercase letters, digits and '-', at most 63 characters).
    pub name: String,
    /// Free-form labels; not sent to the cloud.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Free-form annotations; not sent to the cloud.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A `Target` says where slices go and scopes what this reconciler owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetSpec {
    /// Google Cloud project id.
    pub project: String,
    /// Zone the slices of this target are placed in (a TPU slice is single-zone).
    /// `validate` checks it against the zones Google offers each slice's TPU
    /// generation in (see `allowUnlistedZone`).
    pub zone: String,
    /// Accept a zone slicectl's table does not list for a slice's TPU
    /// generation (Google adds zones; the table, from Google's "TPU regions
    /// and zones", may lag). Default false: such a zone is rejected by
    /// `validate`, naming the zones that offer the generation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_unlisted_zone: bool,
    /// Owner id stamped on every resource this reconciler creates. Only
    /// resources carrying this owner id are ever changed or deleted.
    pub owner_id: String,
    /// GKE cluster the node pools are created in (backend `gke`). A Target
    /// has at most one of `gke` and `gce`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gke: Option<GkeCluster>,
    /// Self-managed Kubernetes cluster whose nodes are GCE TPU VMs joined with
    /// kubeadm (backend `gce`). A Target has at most one of `gke` and `gce`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gce: Option<GceCluster>,
    /// Defaults applied to every node of every slice of this target.
    #[serde(default)]
    pub node_defaults: NodeDefaults,
    /// Names this Target had before, or Targets of another spec source
    /// whose slices it takes over: a hand-over. slicectl stamps the name of
    /// the Target that last wrote a slice on the resource that holds its
    /// capacity (a node pool's `slicectl.dev/target` label, a MIG's
    /// description), and refuses to change or delete a slice stamped with a
    /// Target these specs do not declare (`other_source`): another spec
    /// directory applying the same ownerId made it. Listing that Target here
    /// makes its slices this Target's: one apply relabels them in place
    /// (nothing is deleted), and slices not in the specs are then pruned as
    /// usual. A name here must be a valid Target name, not this Target's
    /// own, and not the name of another Target in the specs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous_names: Vec<String>,
    /// Default disruption policy of this Target's slices (each field a
    /// slice's own `disruption` leaves out), and `budget`: at most that many
    /// busy slice replicas of this Target disrupted at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
    /// Workload-driven slices (GKE Targets only): pending JobSets whose
    /// leader pod is unschedulable for lack of TPU capacity get a slice per
    /// Job, within these rules, released when the JobSet ends (see
    /// docs/workloads.md). Absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<Workloads>,
}

/// Workload-driven slices of a GKE Target: what pending JobSets may ask
/// for, and how long a slice outlives its JobSet.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workloads {
    /// Turns workload-driven slices on (default false: a block with
    /// `enabled: false` keeps its rules but creates and releases nothing).
    #[serde(default)]
    pub enabled: bool,
    /// How long a slice outlives its JobSet's end (Completed or Failed
    /// condition, or the JobSet seen deleted), so that a JobSet restarted at
    /// once reuses it, e.g. `2m` (default 2m, at most 168h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period: Option<String>,
    /// What workloads may ask for: the first rule whose `namespaces` match
    /// the JobSet's namespace decides; no rule matching refuses the request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<WorkloadRule>,
}

/// One rule of a Target's `workloads`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadRule {
    /// Namespaces this rule is for. Omitted: every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// Accelerators allowed (values of `cloud.google.com/gke-tpu-accelerator`).
    /// Omitted: any the Target's zone offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerators: Option<Vec<String>>,
    /// Topologies allowed. Omitted: any valid one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topologies: Option<Vec<String>>,
    /// Capacity types allowed. Omitted: `[onDemand]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Vec<WorkloadCapacity>>,
    /// Most chips this namespace's workload slices may hold at once on this
    /// Target (the slices that exist, plus the one asked for). Omitted: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chips: Option<u32>,
    /// Kubernetes labels added to the pools (and so their Nodes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Kubernetes taints added to the pools' Nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

/// A capacity type a workload may ask for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum WorkloadCapacity {
    /// On-demand VMs (a pod selecting nothing else).
    OnDemand,
    /// Spot VMs (`cloud.google.com/gke-spot: "true"`).
    Spot,
    /// A specific reservation (`cloud.google.com/reservation-name`).
    Reservation,
    /// Flex-start (`cloud.google.com/gke-flex-start: "true"`).
    FlexStart,
}

impl WorkloadCapacity {
    /// The spelling used in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadCapacity::OnDemand => "onDemand",
            WorkloadCapacity::Spot => "spot",
            WorkloadCapacity::Reservation => "reservation",
            WorkloadCapacity::FlexStart => "flexStart",
        }
    }
}

/// What slicectl does before a step that destroys the capacity of a busy
/// slice replica (one with a pod bound to its Nodes that is not terminal,
/// not a mirror pod and not a DaemonSet's): replace, delete, destroy.
/// Fields left out come from the Target's `disruption`, then the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Disruption {
    /// `wait` (default): hold the step until the replica is idle; `drain`:
    /// cordon its Nodes, evict its pods through the Eviction API (so
    /// PodDisruptionBudgets hold), wait up to `drainTimeout`, then go ahead;
    /// `replace`: go ahead (explicit consent, said in the plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_busy: Option<WhenBusy>,
    /// How long a drain may take before the step is held (`pdb`), e.g.
    /// `30m` (default 30m, 1m to 7 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_timeout: Option<String>,
    /// When busy replicas may be disrupted. Omitted: any time. Outside every
    /// window a busy replica is never disrupted (idle ones are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<DisruptionWindow>>,
    /// Target only: at most this many busy slice replicas of the Target
    /// disrupted (drained or replaced while busy) at once. Omitted: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u32>,
}

/// What to do with a busy slice replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WhenBusy {
    /// Hold the step until the replica is idle.
    #[default]
    Wait,
    /// Cordon, evict (PodDisruptionBudgets hold), then go ahead.
    Drain,
    /// Go ahead: the running pods are killed (explicit consent).
    Replace,
}

impl WhenBusy {
    /// The spelling used in specs and output.
    pub fn as_str(self) -> &'static str {
        match self {
            WhenBusy::Wait => "wait",
            WhenBusy::Drain => "drain",
            WhenBusy::Replace => "replace",
        }
    }
}

/// A recurring window in which busy replicas may be disrupted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DisruptionWindow {
    /// When the window opens: a five-field cron expression (minute hour
    /// day-of-month month day-of-week), e.g. `0 2 * * SAT`.
    pub schedule: String,
    /// IANA time zone the schedule is read in, e.g. `Europe/Berlin`
    /// (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// How long the window stays open, e.g. `6h`.
    pub duration: String,
}

/// A GKE cluster, by location and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GkeCluster {
    /// Cluster location: a region (regional cluster) or a zone (zonal cluster).
    pub location: String,
    /// Cluster name.
    pub name: String,
    /// How slicectl reaches the cluster's Kubernetes API (to read its Nodes:
    /// a slice is Ready when they are). Omitted: `endpoint: public`.
    #[serde(default, skip_serializing_if = "GkeKubeApi::is_default")]
    pub kube_api: GkeKubeApi,
}

/// How slicectl reaches a GKE cluster's Kubernetes API: at most one of
/// `endpoint` (the way `gcloud container clusters get-credentials` and
/// `gke-gcloud-auth-plugin` do: the endpoint and CA from `clusters.get`,
/// slicectl's own Google access token as the bearer token), `kubeconfig`
/// (optionally with `context`) or `inCluster`. None given: `endpoint: public`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GkeKubeApi {
    /// Which of the cluster's endpoints `clusters.get` gives: `public` (the
    /// cluster's `endpoint`; a cluster whose IP endpoints are disabled is
    /// reached by its DNS endpoint, as gcloud does), `private` (its internal
    /// IP: slicectl runs in the cluster's VPC) or `dns` (its DNS-based
    /// endpoint, which must allow external traffic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<GkeEndpoint>,
    /// Path of a kubeconfig file instead (the same trust rules as a `gce`
    /// Target's: a kubeconfig only a spec names may not run a credential
    /// plugin or read files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<String>,
    /// Context in that kubeconfig (only with `kubeconfig`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Use the pod's service account (the controller runs in this cluster).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_cluster: bool,
}

impl GkeKubeApi {
    /// Nothing set: the public endpoint from `clusters.get`.
    pub fn is_default(&self) -> bool {
        self == &GkeKubeApi::default()
    }

    /// How to reach the API: an endpoint from `clusters.get`, or a
    /// kubeconfig / in-cluster ([`KubeApi`]).
    pub fn access(&self) -> GkeAccess {
        if self.kubeconfig.is_some() || self.in_cluster {
            GkeAccess::Api(KubeApi {
                kubeconfig: self.kubeconfig.clone(),
                context: self.context.clone(),
                in_cluster: self.in_cluster,
            })
        } else {
            GkeAccess::Endpoint(self.endpoint.unwrap_or(GkeEndpoint::Public))
        }
    }
}

/// How a GKE Target's Kubernetes API is reached, resolved from [`GkeKubeApi`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GkeAccess {
    /// The endpoint `clusters.get` gives, with the Google access token.
    Endpoint(GkeEndpoint),
    /// A kubeconfig (and context), or in-cluster.
    Api(KubeApi),
}

/// Which endpoint of a GKE cluster's control plane.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum GkeEndpoint {
    /// `endpoint` (gcloud's default).
    Public,
    /// The internal IP (gcloud's `--internal-ip`).
    Private,
    /// The DNS-based endpoint (gcloud's `--dns-endpoint`).
    Dns,
}

impl GkeEndpoint {
    /// The spelling used in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            GkeEndpoint::Public => "public",
            GkeEndpoint::Private => "private",
            GkeEndpoint::Dns => "dns",
        }
    }
}

/// A self-managed Kubernetes cluster on GCE (backend `gce`): where its API
/// is, how slicectl reaches it, and the network its TPU VMs join from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GceCluster {
    /// The control-plane endpoint the nodes join, `HOST:PORT`: an IPv4
    /// address, a bracketed IPv6 address or a DNS name, and the API server's
    /// port (1–65535, usually 6443), e.g. `10.128.0.2:6443`. Written into
    /// each VM's metadata for `kubeadm join`.
    pub control_plane_endpoint: String,
    /// How slicectl reaches this cluster's Kubernetes API (to mint bootstrap
    /// tokens, label Nodes, ensure the device plugin).
    pub kube_api: KubeApi,
    /// VPC network of the VMs: a name, or `projects/P/global/networks/NAME`
    /// (or its URL). Default `default`.
    #[serde(default = "default_network")]
    pub network: String,
    /// Subnetwork of the VMs: a name, or
    /// `projects/P/regions/REGION/subnetworks/NAME` (or its URL) in the
    /// target zone's region. Omitted: the network's subnetwork in that region
    /// (auto-mode networks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnetwork: Option<String>,
    /// The TPU device plugin DaemonSet slicectl ensures in `kube-system`.
    #[serde(default)]
    pub device_plugin: DevicePlugin,
}

fn default_network() -> String {
    "default".to_string()
}

/// How slicectl reaches a cluster's Kubernetes API: exactly one of a
/// kubeconfig (and optionally one of its contexts) or the in-cluster service
/// account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeApi {
    /// Path of a kubeconfig file (`~` is expanded; relative paths are relative
    /// to the working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<String>,
    /// Context in that kubeconfig (only with `kubeconfig`). Omitted: its
    /// current context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Use the pod's service account (slicectl runs inside this cluster).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_cluster: bool,
}

/// The TPU device plugin DaemonSet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DevicePlugin {
    /// Container image of the plugin (`[registry/]path[:tag][@sha256:…]`).
    #[serde(default = "default_device_plugin_image")]
    pub image: String,
}

/// The device plugin image tpu-operator deploys (its `device_plugin_test.go`).
pub const DEFAULT_DEVICE_PLUGIN_IMAGE: &str = "gcr.io/gke-release/tpu-device-plugin:1.35.7-gke.0";

fn default_device_plugin_image() -> String {
    DEFAULT_DEVICE_PLUGIN_IMAGE.to_string()
}

impl Default for DevicePlugin {
    fn default() -> Self {
        DevicePlugin {
            image: default_device_plugin_image(),
        }
    }
}

/// Node settings shared by all slices of a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeDefaults {
    /// Node service account email. Empty: the project's default compute SA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// OAuth scopes for the node service account.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oauth_scopes: Vec<String>,
    /// GCE network tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Shielded VM secure boot.
    #[serde(default = "default_true")]
    pub secure_boot: bool,
    /// Boot disk type, e.g. `hyperdisk-balanced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_type: Option<String>,
    /// Boot disk size in GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_size_gb: Option<u32>,
    /// Maximum pods per node (GKE `maxPodsConstraint`).
    #[serde(default = "default_max_pods")]
    pub max_pods_per_node: u32,
    /// Additional node networks (multi-NIC).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_networks: Vec<AdditionalNetwork>,
    /// GCE resource labels put on the VMs and disks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_labels: BTreeMap<String, String>,
}

impl Default for NodeDefaults {
    fn default() -> Self {
        NodeDefaults {
            service_account: None,
            oauth_scopes: Vec::new(),
            tags: Vec::new(),
            secure_boot: true,
            disk_type: None,
            disk_size_gb: None,
            max_pods_per_node: default_max_pods(),
            additional_networks: Vec::new(),
            resource_labels: BTreeMap::new(),
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_max_pods() -> u32 {
    15
}

fn default_replicas() -> u32 {
    1
}

/// An extra network interface for the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdditionalNetwork {
    /// VPC network name.
    pub network: String,
    /// Subnetwork name.
    pub subnetwork: String,
}

/// Which kind of infrastructure a slice becomes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// A GKE node pool per slice replica.
    Gke,
    /// A GCE workload policy + instance template + BULK MIG per slice replica,
    /// joined to a self-managed cluster with kubeadm.
    Gce,
}

impl Backend {
    /// The spelling used in specs and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Gke => "gke",
            Backend::Gce => "gce",
        }
    }
}

/// A `Slice`: what to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SliceSpec {
    /// Name of the `Target` document this slice goes to.
    pub target: String,
    /// `gke` (node pool) or `gce` (self-managed MIG).
    pub backend: Backend,
    /// TPU accelerator, as in GKE's `cloud.google.com/gke-tpu-accelerator`
    /// label: `tpu-v4-podslice`, `tpu-v5-lite-podslice`, `tpu-v5p-slice`,
    /// `tpu-v6e-slice`, `tpu7x`.
    pub accelerator: String,
    /// TPU topology, e.g. `2x2x2` (v4, v5p, tpu7x) or `4x4` (v5e, v6e).
    pub topology: String,
    /// Machine type. Optional: the catalogue's default for the accelerator and
    /// topology is used when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// Number of identical slices (multislice).
    #[serde(default = "default_replicas")]
    pub replicas: u32,
    /// How the capacity is obtained.
    #[serde(default)]
    pub capacity: Capacity,
    /// Kubernetes labels put on every node of the slice.
    // A sorted vector, not a B-tree (one 272-byte node per slice, 5.4 MB
    // of a 10,000-slice fleet).
    #[serde(
        default,
        skip_serializing_if = "crate::labels::Labels::is_empty",
        serialize_with = "crate::labels::labels_as_map",
        deserialize_with = "crate::labels::compact_labels"
    )]
    #[schemars(with = "BTreeMap<String, String>")]
    pub node_labels: crate::labels::Labels,
    /// Kubernetes taints put on every node of the slice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Lifecycle and safety settings.
    #[serde(default)]
    pub lifecycle: Lifecycle,
    /// Settings of a self-managed GCE slice (backend `gce`; required there,
    /// refused for `gke`).
    // Boxed: some 300 bytes that a GKE slice (most of a large fleet) would
    // carry empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gce: Option<Box<GceSlice>>,
    /// Names this slice had before: a declared rename (Terraform's `moved`
    /// block). The live resources of a slice named here, with the same
    /// owner id and Target, are this slice's: a node pool is relabelled in
    /// place and keeps its name (`alpha-0` becomes this slice's replica 0),
    /// nothing is deleted or created. Compute resources (workload policy,
    /// instance template, MIG) keep their old name and ownership, which
    /// cannot change in place, so keep the entry as long as resources made
    /// under the old name live. A name here must be a valid slice name,
    /// not this slice's own, and not the name of another Slice in the specs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous_names: Vec<String>,
    /// The node pool's name, when it is not `<slice>-0`: a pool made by
    /// another tool and adopted (`slicectl adopt` writes it; a node pool
    /// cannot be renamed in place). Backend `gke` and `replicas: 1` only; a
    /// GKE node pool name (lowercase letters, digits and `-`, starting with
    /// a letter, at most 40 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool_name: Option<String>,
    /// What happens before a step destroys the capacity of a busy replica
    /// (`budget` is a Target's only). Omitted fields come from the Target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
}

/// A `gce` slice's VMs: image, disk, metadata, and how they join.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GceSlice {
    /// Boot image: `projects/P/global/images/NAME` or
    /// `projects/P/global/images/family/FAMILY` (or its URL), e.g.
    /// `projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-tpu7x`.
    /// Required with `bootstrap`; not allowed with `instanceTemplate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Boot disk; omitted fields fall back to the target's `nodeDefaults`.
    /// Not allowed with `instanceTemplate`.
    #[serde(default)]
    pub boot_disk: BootDisk,
    /// Extra instance metadata: keys `[a-zA-Z0-9-_]{1,128}`, values up to
    /// 256 KiB, 256 KiB in all. Keys slicectl writes itself (`startup-script`,
    /// `kube-labels`, `kube-taints`, `kubeadm-*`, `created-by`, `slicectl-*`)
    /// and `startup-script-url` are refused. Not allowed with `instanceTemplate`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// How the VMs join the cluster. Exactly one of `bootstrap` and
    /// `instanceTemplate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<Bootstrap>,
    /// Bring your own instance template, in the target's project:
    /// `projects/P/global/instanceTemplates/NAME` or
    /// `projects/P/regions/REGION/instanceTemplates/NAME` (the target zone's
    /// region), or its URL. slicectl validates it when it reads it (TPU
    /// machine type, TERMINATE on host maintenance, a provisioning model and
    /// termination action that fit) and uses it for the MIG, but does not
    /// bootstrap its VMs. `image`, `bootDisk`, `metadata` and `capacity` then
    /// come from the template and are not allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_template: Option<String>,
    /// The MIG's name, when it is not `<slice>-0`: a MIG made by another
    /// tool (tpu-operator's `<group>-mig-<hash>`, a gcloud script's) and
    /// adopted; `slicectl adopt` writes it, since a MIG cannot be renamed
    /// in place. `replicas: 1` only; a Compute Engine name of at most 58
    /// characters (it is also the VMs' `baseInstanceName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_name: Option<String>,
    /// The workload policy's name, when it is not `<slice>-0-wp`: the
    /// policy of an adopted MIG (tpu-operator's `<group>-policy-<hash>`);
    /// `slicectl adopt` writes it. `replicas: 1` and a multi-host topology
    /// only; a Compute Engine name of at most 63 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_policy_name: Option<String>,
}

/// Boot disk of a `gce` slice's VMs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BootDisk {
    /// Size in GB, 10 to 65536. Default: the target's
    /// `nodeDefaults.diskSizeGb`, else 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_gb: Option<u32>,
    /// Disk type the TPU generation boots from: `hyperdisk-balanced` (v6e,
    /// TPU7x) or `pd-balanced` (v5p). Default: the target's
    /// `nodeDefaults.diskType`, else the generation's (the catalogue's first).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// How a `gce` slice's VMs join the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Bootstrap {
    /// Pull-model kubeadm join, driven by slicectl.
    pub kubeadm: Kubeadm,
}

/// kubeadm bootstrap settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kubeadm {
    /// Kubernetes minor version of kubelet and kubeadm on the VMs, `"1.N"`
    /// with N ≥ 31, e.g. `"1.36"` (not a patch version: the VMs install its
    /// newest patch from pkgs.k8s.io). Use the control plane's minor or up to
    /// three older, per Kubernetes' version skew policy.
    pub kubernetes_version: String,
}

/// Capacity model.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Capacity {
    /// `on-demand` (default), `spot`, `reservation` or `flex-start`.
    #[serde(default, rename = "type")]
    pub kind: CapacityType,
    /// The reservation to consume; required when `type: reservation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,
    /// For `flex-start`: the maximum run duration, e.g. `72h` (at most
    /// 168h; on backend `gce` required, and at least 10m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_duration: Option<String>,
    /// For `flex-start` on backend `gke`: GKE's queued provisioning
    /// (`queuedProvisioning.enabled`). Such a pool gets nodes only through a
    /// ProvisioningRequest (class `queued-provisioning.gke.io`) that you or
    /// Kueue submit; slicectl creates the pool and waits. Default false: a
    /// plain flex-start pool, scaled up by the cluster autoscaler for the
    /// pending pods that fit it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub queued: bool,
}

/// Capacity type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityType {
    /// Standard on-demand VMs.
    #[default]
    OnDemand,
    /// Spot VMs (preemptible, cheaper).
    Spot,
    /// A specific reservation.
    Reservation,
    /// Flex-start (Dynamic Workload Scheduler; on backend `gke` flex-start
    /// VMs scaled up by the cluster autoscaler, with `queued: true` GKE's
    /// queued provisioning; on backend `gce`, provisioning model FLEX_START
    /// in a BULK MIG).
    FlexStart,
}

impl CapacityType {
    /// The spelling used in specs and output.
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::OnDemand => "on-demand",
            CapacityType::Spot => "spot",
            CapacityType::Reservation => "reservation",
            CapacityType::FlexStart => "flex-start",
        }
    }
}

/// A specific reservation, possibly shared from another project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reservation {
    /// Reservation name.
    pub name: String,
    /// Project owning a shared reservation; omitted: the target's project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

/// A Kubernetes taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    /// Taint key (Kubernetes qualified name).
    pub key: String,
    /// Taint value (Kubernetes label value).
    #[serde(default)]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: TaintEffect,
}

/// Taint effect, spelled as in Kubernetes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum TaintEffect {
    /// Do not schedule new pods.
    NoSchedule,
    /// Avoid scheduling new pods.
    PreferNoSchedule,
    /// Evict running pods.
    NoExecute,
}

/// Lifecycle and safety settings of a slice.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lifecycle {
    /// Refuse to delete or replace this slice. Stamped on the live resource,
    /// so deleting the YAML cannot destroy it either.
    #[serde(default)]
    pub prevent_destroy: bool,
    /// Timeout for one long-running cloud operation of this slice, e.g. `45m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_timeout: Option<String>,
}
