//! Rendering a `gce` slice replica: its workload policy (multi-host), its
//! instance template (unless the spec brings its own), its BULK MIG and the
//! Nodes its VMs become. Pure.
//!
//! Hashes chain: the MIG's selective hash covers its own replacement-class
//! fields plus the template's and the policy's hashes, and the Nodes carry
//! the MIG's hash as their generation, so a change to any of them replaces
//! the slice replica as a whole (a TPU slice is all-or-nothing).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::bootstrap;
use crate::kind::hash::{self, HASH_VERSION, Projection, project};
use crate::kind::names;
use crate::kind::ownership::{self, Ownership};
use crate::resource::compute::{
    AttachedDisk, AttachedDiskInitializeParams, Duration as GDuration, InstanceGroupManager,
    InstanceLifecyclePolicy, InstanceProperties, InstanceTemplate, Metadata, MetadataItem,
    MigResourcePolicies, NetworkInterface, ReservationAffinity, ResourcePolicy, Scheduling,
    ServiceAccount, ShieldedInstanceConfig, Tags, TargetSizePolicy, WorkloadPolicy,
};
use crate::resource::{KubeRef, ProjectRef, RegionRef, ZoneRef};
use crate::spec::model::{Backend, CapacityType, TaintEffect};
use crate::spec::{Slice, Target};

/// The GKE-style accelerator label the device plugin and workloads select on.
pub const LABEL_ACCELERATOR: &str = "cloud.google.com/gke-tpu-accelerator";
/// The TPU topology label.
pub const LABEL_TOPOLOGY: &str = "cloud.google.com/gke-tpu-topology";
/// Chips per node.
pub const LABEL_ACCELERATOR_COUNT: &str = "cloud.google.com/gke-accelerator-count";
/// The extended resource TPU chips are advertised as.
pub const TPU_RESOURCE: &str = "google.com/tpu";
/// Default boot disk size (GB).
pub const DEFAULT_DISK_SIZE_GB: u32 = 100;
/// Boot disk type when neither the spec nor the catalogue says one.
pub const DEFAULT_DISK_TYPE: &str = "hyperdisk-balanced";
/// Default OAuth scope of the VMs' service account.
pub const DEFAULT_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Reservation affinity key of a specific reservation.
pub const RESERVATION_KEY: &str = "compute.googleapis.com/reservation-name";

/// Fields of an instance template that force replacement: all of them
/// (templates are immutable).
pub const TEMPLATE_REPLACEMENT_FIELDS: &[&str] = &["properties"];
/// Fields of a MIG slicectl sets; all force replacement of the slice.
pub const MIG_REPLACEMENT_FIELDS: &[&str] = &[
    "baseInstanceName",
    "instanceTemplate",
    "targetSize",
    "targetSizePolicy",
    "resourcePolicies",
];

/// The MIG's `targetSizePolicy.mode`. BULK (all VMs or none, gcp-api.md
/// §2.4) "is only supported with instance templates that specify either a
/// reservation-bound or flex-start provisioning model" (Compute Engine,
/// *Create a MIG that uses the bulk mode*,
/// docs.cloud.google.com/compute/docs/instance-groups/bulk-create-instances-in-mig):
/// reservation and flex-start slices, and a template the spec brings
/// (checked for such a model before the MIG is created). On-demand and spot
/// slices get INDIVIDUAL, said explicitly (the server's default, so a live
/// MIG never looks drifted): the VMs are created one by one, and slicectl
/// keeps the slice all-or-nothing itself: a replica is Ready only when
/// every VM runs and every Node is Ready, and a VM the MIG cannot create
/// (a stockout) fails the replica's step with code `stockout` at once,
/// however many of its VMs run (docs/gce-backend.md, "Capacity models and
/// MIG modes").
pub fn target_size_mode(slice: &Slice) -> &'static str {
    let brought = slice
        .spec
        .gce
        .as_ref()
        .is_some_and(|g| g.instance_template.is_some());
    match slice.spec.capacity.kind {
        _ if brought => MODE_BULK,
        CapacityType::Reservation | CapacityType::FlexStart => MODE_BULK,
        CapacityType::OnDemand | CapacityType::Spot => MODE_INDIVIDUAL,
    }
}

/// `targetSizePolicy.mode` BULK: all VMs at once, or none.
pub const MODE_BULK: &str = "BULK";
/// `targetSizePolicy.mode` INDIVIDUAL: VMs one by one (Compute Engine's default).
pub const MODE_INDIVIDUAL: &str = "INDIVIDUAL";

/// Everything one `gce` slice replica renders to.
#[derive(Debug, Clone)]
pub struct GceReplica {
    /// Where the VMs run.
    pub zone: ZoneRef,
    /// The workload policy's region.
    pub region: RegionRef,
    /// The project (templates are global).
    pub project: ProjectRef,
    /// The cluster the VMs join.
    pub kube: KubeRef,
    /// The workload policy (multi-host only).
    pub policy: Option<ResourcePolicy>,
    /// The instance template slicectl makes (`None` when the spec brings its own).
    pub template: Option<InstanceTemplate>,
    /// The MIG.
    pub mig: InstanceGroupManager,
    /// The Nodes the VMs become.
    pub nodes: NodeGroup,
}

/// The desired Nodes of a slice replica: what slicectl labels, taints and
/// waits for. Its `generation` is the MIG's hash: Nodes of another
/// generation belong to VMs that are being replaced.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroup {
    /// The MIG whose VMs these Nodes are.
    pub mig: String,
    /// The VMs' project.
    pub project: String,
    /// The VMs' zone.
    pub zone: String,
    /// `gce://PROJECT/ZONE/` (+ instance name = the providerID).
    pub provider_id_prefix: String,
    /// Hosts in the slice.
    pub hosts: u32,
    /// `google.com/tpu` per node.
    pub chips: u32,
    /// Labels every Node carries (registration labels + preventDestroy).
    pub labels: BTreeMap<String, String>,
    /// Taints every Node carries (`key=value:Effect`).
    pub taints: Vec<String>,
    /// The MIG hash the Nodes were registered with.
    pub generation: String,
    /// slicectl mints tokens for the VMs (false with a brought template).
    pub bootstrap: bool,
    /// The kubelet/kubeadm minor the VMs install (`bootstrap.kubeadm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The bootstrap-token Secret the step mints (or reuses) for the VMs,
    /// as the plan shows it: never a token, which exists only at apply time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_token: Option<TokenPlan>,
    /// The control-plane endpoint the VMs join.
    pub endpoint: String,
}

/// A network or subnetwork as a partial URL (`projects/P/global/networks/N`).
/// The bootstrap-token Secret of a slice replica, as planned.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenPlan {
    /// `kube-system`.
    pub namespace: String,
    /// `bootstrap.kubernetes.io/token`.
    #[serde(rename = "type")]
    pub kind: String,
    /// How long a minted token lives.
    pub ttl: String,
    /// A token is reused while it has more than this left.
    pub reused_while_left: String,
    /// The Secret's labels (the slice replica's ownership).
    pub labels: BTreeMap<String, String>,
    /// When it is deleted.
    pub deleted: String,
}

fn network_link(project: &str, v: &str) -> String {
    if v.contains('/') {
        v.to_string()
    } else {
        format!("projects/{project}/global/networks/{v}")
    }
}

fn subnetwork_link(project: &str, region: &str, v: &str) -> String {
    if v.contains('/') {
        v.to_string()
    } else {
        format!("projects/{project}/regions/{region}/subnetworks/{v}")
    }
}

fn google_seconds(s: &str) -> Option<i64> {
    let d: jiff::SignedDuration = s.parse().ok()?;
    Some(d.as_secs())
}

/// Replacement-class projection of a template.
pub fn template_projection(t: &InstanceTemplate) -> Projection {
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    // Metadata items in key order; a live template may list them otherwise.
    if let Some(items) = v
        .pointer_mut("/properties/metadata/items")
        .and_then(Value::as_array_mut)
    {
        items.sort_by(|a, b| a["key"].as_str().cmp(&b["key"].as_str()));
        // The startup script is long; compare it by digest.
        for i in items.iter_mut() {
            if i["key"] == "startup-script"
                && let Some(text) = i["value"].as_str()
            {
                i["value"] = Value::from(format!("sha256:{}", short_digest(text)));
            }
        }
    }
    hash::remove_path(&mut v, "properties.metadata.fingerprint");
    hash::remove_path(&mut v, "properties.metadata.kind");
    project(&v, TEMPLATE_REPLACEMENT_FIELDS)
}

fn short_digest(s: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(s.as_bytes())[..8])
}

/// Replacement-class projection of a MIG: its fields, plus the hashes of
/// its template and policy (which it cannot outlive).
pub fn mig_projection(m: &InstanceGroupManager) -> Projection {
    let v = serde_json::to_value(m).unwrap_or(Value::Null);
    let mut p = project(&v, MIG_REPLACEMENT_FIELDS);
    // Links may come back as full URLs: compare their `projects/…` tails.
    for (_, val) in p.iter_mut() {
        if let Some(s) = val.as_str()
            && let Some(i) = s.find("projects/")
        {
            *val = Value::from(&s[i..]);
        }
    }
    p
}

/// Whether the slice uses the GCE backend (and its target has a `gce` block).
pub fn is_gce(target: &Target, slice: &Slice) -> bool {
    slice.spec.backend == Backend::Gce && target.spec.gce.is_some() && slice.spec.gce.is_some()
}

/// Renders one `gce` slice replica; `None` for other backends.
pub fn render(target: &Target, slice: &Slice, replica: u32) -> Option<GceReplica> {
    if !is_gce(target, slice) {
        return None;
    }
    let t = &target.spec;
    let cluster = t.gce.as_ref()?;
    let g = slice.spec.gce.as_ref()?;
    let shape = &slice.shape;
    let project = t.project.clone();
    let region = crate::spec::validate::region_of(&t.zone).to_string();
    let own = |spec_hash: String| Ownership {
        owner: t.owner_id.clone(),
        slice: slice.name.clone(),
        replica,
        target: None,
        spec_hash: Some(spec_hash),
        hash_version: Some(HASH_VERSION.to_string()),
        prevent_destroy: false,
    };

    // Workload policy: any multi-host GCE slice (tpu-anchors §B.9).
    let policy = (shape.hosts > 1).then(|| {
        let mut p = ResourcePolicy {
            name: g
                .workload_policy_name
                .clone()
                .unwrap_or_else(|| names::workload_policy(&slice.name, replica)),
            region: Some(region.clone()),
            workload_policy: Some(WorkloadPolicy {
                kind: "HIGH_THROUGHPUT".to_string(),
                accelerator_topology: Some(shape.topology.clone()),
                accelerator_topology_mode: None,
            }),
            ..Default::default()
        };
        let h = hash::spec_hash(&crate::kinds::workload_policy::projection(&p));
        // The source stamp (the Target), as the MIG's description carries
        // it: another spec source never prunes the policy.
        let stamped = Ownership {
            target: Some(target.name.clone()),
            ..own(h)
        };
        p.description = Some(stamped.to_description());
        p
    });
    let policy_hash = policy
        .as_ref()
        .and_then(|p| p.description.as_deref())
        .and_then(Ownership::from_description)
        .and_then(|o| o.spec_hash);

    // Node labels registered by the kubelet (from `kube-labels`).
    let mut reg_labels: BTreeMap<String, String> = BTreeMap::new();
    reg_labels.insert(LABEL_ACCELERATOR.into(), slice.spec.accelerator.clone());
    reg_labels.insert(LABEL_TOPOLOGY.into(), shape.topology.clone());
    reg_labels.insert(
        LABEL_ACCELERATOR_COUNT.into(),
        shape.chips_per_host.to_string(),
    );
    reg_labels.extend(slice.spec.node_labels.clone());
    // Ownership, so the Nodes are found by label from registration on; the
    // generation (spec hash) and the protection stamp are patched on by
    // slicectl once it matched the Node to a VM of the current MIG.
    let mut reg_own = own(String::new()).to_labels();
    reg_own.remove(ownership::SPEC_HASH);
    reg_own.remove(ownership::HASH_VERSION);
    reg_labels.extend(reg_own);
    let taints: Vec<String> = slice
        .spec
        .taints
        .iter()
        .map(|x| {
            bootstrap::Taint {
                key: x.key.clone(),
                value: x.value.clone(),
                effect: match x.effect {
                    TaintEffect::NoSchedule => bootstrap::TaintEffect::NoSchedule,
                    TaintEffect::PreferNoSchedule => bootstrap::TaintEffect::PreferNoSchedule,
                    TaintEffect::NoExecute => bootstrap::TaintEffect::NoExecute,
                },
            }
            .to_string()
        })
        .collect();

    // The template (unless brought).
    let template_name = names::instance_template(&slice.name, replica);
    let (template, template_link, template_hash) = match &g.instance_template {
        Some(link) => (None, link.clone(), None),
        None => {
            let version = g
                .bootstrap
                .as_ref()
                .map(|b| b.kubeadm.kubernetes_version.clone())
                .unwrap_or_default();
            let mut items: BTreeMap<String, String> = g.metadata.clone();
            items.insert(
                bootstrap::STARTUP_SCRIPT_KEY.into(),
                bootstrap::STARTUP_SCRIPT.into(),
            );
            items.insert(bootstrap::KUBERNETES_VERSION_KEY.into(), version);
            items.insert(
                bootstrap::KUBE_LABELS_KEY.into(),
                bootstrap::encode_labels(&reg_labels),
            );
            items.insert(bootstrap::KUBE_TAINTS_KEY.into(), taints.join(","));
            let cap = &slice.spec.capacity;
            let (model, termination) = match cap.kind {
                CapacityType::OnDemand => ("STANDARD", None),
                // tpu-operator's validator: STOP for SPOT, DELETE for RESERVATION_BOUND (§B.4).
                CapacityType::Spot => ("SPOT", Some("STOP")),
                CapacityType::Reservation => ("RESERVATION_BOUND", Some("DELETE")),
                CapacityType::FlexStart => ("FLEX_START", Some("DELETE")),
            };
            let reservation_affinity = match (&cap.kind, &cap.reservation) {
                (CapacityType::Reservation, Some(r)) => Some(ReservationAffinity {
                    consume_reservation_type: "SPECIFIC_RESERVATION".into(),
                    key: Some(RESERVATION_KEY.into()),
                    values: vec![match &r.project {
                        Some(p) if p != &project => format!("projects/{p}/reservations/{}", r.name),
                        _ => r.name.clone(),
                    }],
                }),
                _ => None,
            };
            let nd = &t.node_defaults;
            let mut tpl = InstanceTemplate {
                name: template_name.clone(),
                properties: InstanceProperties {
                    machine_type: shape.machine_type.to_string(),
                    disks: vec![AttachedDisk {
                        boot: Some(true),
                        auto_delete: Some(true),
                        initialize_params: Some(AttachedDiskInitializeParams {
                            source_image: g.image.clone(),
                            disk_size_gb: Some(i64::from(
                                g.boot_disk
                                    .size_gb
                                    .or(nd.disk_size_gb)
                                    .unwrap_or(DEFAULT_DISK_SIZE_GB),
                            )),
                            disk_type: Some(
                                g.boot_disk
                                    .kind
                                    .clone()
                                    .or(nd.disk_type.clone())
                                    .unwrap_or_else(|| {
                                        shape
                                            .generation
                                            .gce
                                            .as_ref()
                                            .and_then(|g| g.boot_disk_types.first())
                                            .unwrap_or(&DEFAULT_DISK_TYPE)
                                            .to_string()
                                    }),
                            ),
                        }),
                        ..Default::default()
                    }],
                    network_interfaces: vec![NetworkInterface {
                        network: Some(network_link(&project, &cluster.network)),
                        subnetwork: cluster
                            .subnetwork
                            .as_deref()
                            .map(|s| subnetwork_link(&project, &region, s)),
                        ..Default::default()
                    }],
                    metadata: Some(Metadata {
                        items: items
                            .into_iter()
                            .map(|(key, value)| MetadataItem {
                                key,
                                value: Some(value),
                            })
                            .collect(),
                        ..Default::default()
                    }),
                    // The VMs carry the slice replica's ownership as GCE
                    // labels (`gcloud compute instances list --filter
                    // labels.slicectl-slice=NAME`); GCE label keys take no
                    // dots or slashes, so `slicectl-…` stands for `slicectl.dev/…`.
                    labels: {
                        let mut l = nd.resource_labels.clone();
                        l.insert("slicectl-managed-by".into(), ownership::MANAGER.into());
                        l.insert("slicectl-owner".into(), t.owner_id.clone());
                        l.insert("slicectl-slice".into(), slice.name.clone());
                        l.insert("slicectl-replica".into(), replica.to_string());
                        l
                    },
                    scheduling: Some(Scheduling {
                        provisioning_model: Some(model.into()),
                        instance_termination_action: termination.map(str::to_string),
                        // TPU VMs cannot live-migrate.
                        on_host_maintenance: Some("TERMINATE".into()),
                        automatic_restart: Some(false),
                        max_run_duration: match cap.kind {
                            CapacityType::FlexStart => cap
                                .max_run_duration
                                .as_deref()
                                .and_then(google_seconds)
                                .map(|seconds| GDuration {
                                    seconds,
                                    nanos: None,
                                }),
                            _ => None,
                        },
                        ..Default::default()
                    }),
                    reservation_affinity,
                    service_accounts: vec![ServiceAccount {
                        email: nd
                            .service_account
                            .clone()
                            .unwrap_or_else(|| "default".to_string()),
                        scopes: if nd.oauth_scopes.is_empty() {
                            vec![DEFAULT_SCOPE.to_string()]
                        } else {
                            nd.oauth_scopes.clone()
                        },
                    }],
                    tags: (!nd.tags.is_empty()).then(|| Tags {
                        items: nd.tags.clone(),
                    }),
                    shielded_instance_config: Some(ShieldedInstanceConfig {
                        enable_secure_boot: Some(nd.secure_boot),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let h = hash::spec_hash(&template_projection(&tpl));
            tpl.description = Some(own(h.clone()).to_description());
            (
                Some(tpl),
                format!("projects/{project}/global/instanceTemplates/{template_name}"),
                Some(h),
            )
        }
    };

    // The MIG.
    // An adopted MIG keeps its name (`gce.migName`: a MIG cannot be
    // renamed in place).
    let mig_name = g
        .mig_name
        .clone()
        .unwrap_or_else(|| names::mig(&slice.name, replica));
    let mut mig = InstanceGroupManager {
        name: mig_name.clone(),
        base_instance_name: Some(mig_name.clone()),
        instance_template: Some(template_link),
        target_size: i32::try_from(shape.hosts).unwrap_or(i32::MAX),
        target_size_policy: Some(TargetSizePolicy {
            mode: target_size_mode(slice).into(),
        }),
        // Flex-start in bulk mode requires DO_NOTHING on failure (Compute
        // Engine, "About resize requests in a MIG" / bulk MIG docs).
        instance_lifecycle_policy: (slice.spec.capacity.kind == CapacityType::FlexStart).then(
            || InstanceLifecyclePolicy {
                default_action_on_failure: Some("DO_NOTHING".into()),
            },
        ),
        resource_policies: policy.as_ref().map(|p| MigResourcePolicies {
            workload_policy: Some(format!(
                "projects/{project}/regions/{region}/resourcePolicies/{}",
                p.name
            )),
        }),
        ..Default::default()
    };
    let mut mp = mig_projection(&mig);
    if let Some(h) = &template_hash {
        mp.insert(
            "(instanceTemplate spec hash)".into(),
            Value::from(h.clone()),
        );
    }
    if let Some(h) = &policy_hash {
        mp.insert("(workload policy spec hash)".into(), Value::from(h.clone()));
    }
    let generation = hash::spec_hash(&mp);
    // The MIG holds the capacity, so it carries the protection too: its
    // description says `prevent-destroy=true` or `prevent-destroy=false`
    // (always one of them, so "recorded unprotected" is told from "never
    // recorded", a MIG made before the stamp existed). The planner reads it
    // even when the Nodes are gone. It is not part of the selective hash:
    // a change of `preventDestroy` patches it in place
    // (`instanceGroupManagers.patch`), never a replacement.
    let description = Ownership {
        prevent_destroy: slice.spec.lifecycle.prevent_destroy,
        target: Some(target.name.clone()),
        ..own(generation.clone())
    }
    .to_stamped_description();
    // A MIG under a name of its own (`gce.migName`) is told slicectl's by
    // the adoption marker, not by its name (see [`super::mig::described_ownership`]).
    mig.description = Some(if g.mig_name.is_some() {
        ownership::with_adopted(&description)
    } else {
        description
    });

    // The Nodes.
    let mut labels = reg_labels;
    labels.extend(
        Ownership {
            prevent_destroy: slice.spec.lifecycle.prevent_destroy,
            ..own(generation.clone())
        }
        .to_labels(),
    );
    let nodes = NodeGroup {
        mig: mig_name,
        project: project.clone(),
        zone: t.zone.clone(),
        provider_id_prefix: format!("gce://{project}/{}/", t.zone),
        hosts: shape.hosts,
        chips: shape.chips_per_host,
        labels,
        taints,
        generation,
        bootstrap: g.bootstrap.is_some(),
        kubernetes_version: g
            .bootstrap
            .as_ref()
            .map(|b| b.kubeadm.kubernetes_version.clone()),
        bootstrap_token: g.bootstrap.is_some().then(|| TokenPlan {
            namespace: "kube-system".into(),
            kind: "bootstrap.kubernetes.io/token".into(),
            ttl: "1h".into(),
            reused_while_left: "10m".into(),
            labels: own(String::new())
                .to_labels()
                .into_iter()
                .filter(|(k, _)| k != ownership::SPEC_HASH && k != ownership::HASH_VERSION)
                .collect(),
            deleted: "once every node of the replica joined, or on teardown".into(),
        }),
        endpoint: cluster.control_plane_endpoint.clone(),
    };
    Some(GceReplica {
        zone: ZoneRef {
            project: project.clone(),
            zone: t.zone.clone(),
        },
        region: RegionRef {
            project: project.clone(),
            region,
        },
        project: ProjectRef { project },
        kube: KubeRef {
            endpoint: cluster.control_plane_endpoint.clone(),
        },
        policy,
        template,
        mig,
        nodes,
    })
}
