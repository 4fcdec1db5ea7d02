//! Semantic validation: from parsed documents to a [`Fleet`], or every
//! problem found (validation never stops at the first one).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::SignedDuration;

use super::catalog::{self, CatalogError, Placement};
use super::model::{Backend, CapacityType, GceCluster, GceSlice, SliceSpec, TargetSpec};
use super::names;
use super::parse::{Document, DocumentSpec, FieldIndex, ParsedFile, parse_file};
use super::{DEFAULT_OPERATION_TIMEOUT, Diagnostic, Fleet, Location, Slice, SourceFile, Target};

// The GCE backend's checks, beside the rest: its cluster, its slices, the
// join, the template it brings, and the syntax of what GCE takes.
mod gce;
pub use gce::*;

/// Node label prefix owned by slicectl (its ownership labels).
pub const RESERVED_LABEL_PREFIX: &str = "slicectl.dev/";

/// Node label key prefix GKE sets itself.
pub const GKE_LABEL_PREFIX: &str = "cloud.google.com/gke-";

/// Most replicas (identical slices) of one `Slice`.
pub const MAX_REPLICAS: u32 = 64;

/// Longest owner id (it is stamped into labels and resource names).
pub const MAX_OWNER_ID_LEN: usize = 40;

/// Most GCE resource labels on one resource.
pub const MAX_RESOURCE_LABELS: usize = 64;

/// Longest flex-start run (GKE's limit is seven days).
pub const MAX_RUN_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Longest per-operation timeout accepted.
pub const MAX_OPERATION_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Shortest flex-start run on backend `gce`: a MIG resize request's
/// `requestedRunDuration` is "between 10 minutes and seven days" (Compute
/// Engine's "About resize requests in a MIG").
pub const MIN_GCE_RUN_DURATION: Duration = Duration::from_secs(10 * 60);

/// Instance metadata keys slicectl writes itself on a `gce` slice's VMs
/// (template and per-VM `setMetadata`); any key starting with
/// [`RESERVED_METADATA_PREFIX`] is reserved too.
pub const RESERVED_METADATA_KEYS: &[&str] = &[
    "startup-script",
    "slicectl-kubernetes-version",
    "kube-labels",
    "kube-taints",
    "kubeadm-join-token",
    "kubeadm-api-endpoint",
    "kubeadm-ca-hash",
    "created-by",
];

/// Metadata key prefix owned by slicectl.
pub const RESERVED_METADATA_PREFIX: &str = "slicectl-";

/// Longest metadata key (compute `Metadata` schema: `[a-zA-Z0-9-_]{1,128}`).
pub const MAX_METADATA_KEY_LEN: usize = 128;

/// Largest metadata value (compute `Metadata` schema: 256 KiB per value).
pub const MAX_METADATA_VALUE_BYTES: usize = 256 * 1024;

/// Most bytes (keys and values) of a slice's extra metadata. GCE allows
/// 512 KiB for all of an instance's metadata; half is left for the items
/// slicectl writes (startup script, labels, taints, join data).
pub const MAX_USER_METADATA_BYTES: usize = 256 * 1024;

/// Oldest Kubernetes minor a `gce` slice may bootstrap: kubeadm's `v1beta4`
/// configuration API, the one slicectl's startup script writes, is served
/// from 1.31 on (`v1beta3` is deprecated there). pkgs.k8s.io, where the
/// script installs kubelet and kubeadm from, serves every minor from 1.24.
pub const MIN_KUBERNETES_MINOR: u32 = 31;

/// Boot disk size bounds in GB (GCE's 10 GB minimum; 64 TiB, the largest
/// Hyperdisk Balanced and Persistent Disk volume).
pub const BOOT_DISK_SIZE_GB: std::ops::RangeInclusive<u32> = 10..=65_536;

/// Parses the files, in order, on up to as many threads as there are
/// cores: reading YAML is a third of the time of planning a large fleet
/// (docs/benchmarks.md), and the files are independent.
fn parse_files(files: &[SourceFile]) -> Vec<ParsedFile> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(files.len());
    if threads <= 1 {
        return files.iter().map(parse_file).collect();
    }
    let per = files.len().div_ceil(threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = files
            .chunks(per)
            .map(|part| s.spawn(move || part.iter().map(parse_file).collect::<Vec<_>>()))
            .collect();
        parts
            .into_iter()
            // A parser that panicked panics here, as it would have unthreaded.
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// Parses and validates spec files: the whole desired state, or every problem
/// found, sorted by location. `Fleet::files` is `files.len()`.
pub fn load(files: &[SourceFile]) -> Result<Fleet, Vec<Diagnostic>> {
    let parsed = parse_files(files);
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    // Targets that exist but could not be read: references to them are not
    // reported as dangling (the real error is reported already).
    let mut broken_targets: BTreeSet<String> = BTreeSet::new();
    let mut any_unknown_broken = false;
    let mut documents = Vec::new();
    for file in parsed {
        diagnostics.extend(file.diagnostics);
        broken_targets.extend(file.broken_targets);
        any_unknown_broken |= file.unknown_broken;
        documents.extend(file.documents);
    }
    let fleet = validate(
        documents,
        files.len(),
        &References {
            broken_targets,
            any_unknown_broken,
        },
        &mut diagnostics,
    );
    if diagnostics.is_empty() {
        tracing::debug!(
            files = fleet.files,
            targets = fleet.targets.len(),
            slices = fleet.slices.len(),
            "specs loaded"
        );
        Ok(fleet)
    } else {
        diagnostics.sort();
        diagnostics.dedup();
        Err(diagnostics)
    }
}

/// What is known about documents that could not be parsed.
struct References {
    broken_targets: BTreeSet<String>,
    any_unknown_broken: bool,
}

struct Diags<'a>(&'a mut Vec<Diagnostic>);

impl Diags<'_> {
    fn push(&mut self, location: Location, message: impl Into<String>) {
        self.0.push(Diagnostic {
            location,
            message: message.into(),
        });
    }
}

/// Per cluster, the first Target that names it and how it reaches the
/// cluster's Kubernetes API.
type FirstApi<K, A> = BTreeMap<K, (String, A)>;

/// Records `target`'s `api` for cluster `key`; when an earlier Target named
/// the cluster with another API, that Target's name.
fn other_api<K: Ord, A: PartialEq + Clone>(
    seen: &mut FirstApi<K, A>,
    key: K,
    target: &str,
    api: &A,
) -> Option<String> {
    match seen.get(&key) {
        Some((first, a)) if a != api => Some(first.clone()),
        Some(_) => None,
        None => {
            seen.insert(key, (target.to_owned(), api.clone()));
            None
        }
    }
}

fn validate(
    documents: Vec<Document>,
    files: usize,
    refs: &References,
    diagnostics: &mut Vec<Diagnostic>,
) -> Fleet {
    let mut d = Diags(diagnostics);
    let mut fleet = Fleet {
        files,
        ..Fleet::default()
    };

    // Duplicates first: (kind, name) -> first location.
    let mut seen: BTreeMap<(&'static str, String), Location> = BTreeMap::new();
    // Target names defined more than once: which one a slice means is
    // ambiguous, so references to them are not checked further.
    let mut ambiguous: BTreeSet<String> = BTreeSet::new();
    let mut unique = Vec::with_capacity(documents.len());
    for doc in documents {
        let kind = doc.spec.kind();
        let name_at = doc.fields.value(&["metadata", "name"]);
        match seen.get(&(kind, doc.metadata.name.clone())) {
            Some(first) => {
                if kind == "Target" {
                    ambiguous.insert(doc.metadata.name.clone());
                }
                d.push(
                    name_at.clone(),
                    format!(
                        "duplicate {kind} {:?}: already defined at {first}",
                        doc.metadata.name
                    ),
                );
                d.push(
                    first.clone(),
                    format!(
                        "duplicate {kind} {:?}: defined again at {name_at}",
                        doc.metadata.name
                    ),
                );
            }
            None => {
                seen.insert((kind, doc.metadata.name.clone()), name_at);
                unique.push(doc);
            }
        }
    }

    // Targets before slices: slices refer to them (valid or not: an invalid
    // target is reported on its own, not as a dangling reference).
    let (targets, slices): (Vec<Document>, Vec<Document>) = unique
        .into_iter()
        .partition(|doc| matches!(doc.spec, DocumentSpec::Target(_)));
    let mut all_targets: BTreeMap<String, TargetSpec> = BTreeMap::new();
    // Where each target's zone is written, for the zone check of its slices.
    let mut zone_at: BTreeMap<String, Location> = BTreeMap::new();
    // (Target, ownerId, previous name, where it is written).
    let mut target_claims: Vec<(String, String, String, Location)> = Vec::new();
    // Cluster → (the first Target naming it, its kubeApi): one cluster has
    // one Kubernetes API, reached one way (a GKE cluster by project,
    // location and name; a self-managed one by its control-plane endpoint).
    let mut gke_api: FirstApi<(String, String, String), crate::spec::model::GkeKubeApi> =
        BTreeMap::new();
    let mut gce_api: FirstApi<String, crate::spec::model::KubeApi> = BTreeMap::new();
    // Cluster → the first workload-enabled Target naming it: one Target per
    // cluster may let its JobSets ask for slices (two would each claim the
    // other's pools and each apply its own maxChips).
    let mut workload_cluster: BTreeMap<(String, String, String), String> = BTreeMap::new();
    for doc in targets {
        if let DocumentSpec::Target(spec) = doc.spec {
            if let (Some(g), Some(true)) = (&spec.gke, spec.workloads.as_ref().map(|w| w.enabled)) {
                let key = (spec.project.clone(), g.location.clone(), g.name.clone());
                match workload_cluster.get(&key) {
                    Some(first) => d.push(
                        doc.fields.value(&["spec", "workloads", "enabled"]),
                        format!(
                            "Target {first:?} already lets the JobSets of GKE cluster {} ask for slices \
                             (workloads.enabled); one Target per cluster may, or the two would claim each \
                             other's pools and each count its own maxChips: set enabled: false here, or move \
                             the rules to Target {first:?}",
                            g.name
                        ),
                    ),
                    None => {
                        workload_cluster.insert(key, doc.metadata.name.clone());
                    }
                }
            }
            if let Some(g) = &spec.gke {
                let key = (spec.project.clone(), g.location.clone(), g.name.clone());
                if let Some(first) = other_api(&mut gke_api, key, &doc.metadata.name, &g.kube_api) {
                    d.push(
                        doc.fields.key(&["spec", "gke", "name"]),
                        format!(
                            "Target {first:?} names the same GKE cluster with another kubeApi; a \
                             cluster's Kubernetes API is reached one way: give every Target of \
                             cluster {} the same gke.kubeApi",
                            g.name
                        ),
                    );
                }
            }
            if let Some(g) = &spec.gce {
                let key = g.control_plane_endpoint.clone();
                if let Some(first) = other_api(&mut gce_api, key, &doc.metadata.name, &g.kube_api) {
                    d.push(
                        doc.fields.value(&["spec", "gce", "controlPlaneEndpoint"]),
                        format!(
                            "Target {first:?} names the same control plane ({}) with another kubeApi; a \
                             cluster's Kubernetes API is reached one way (otherwise the last Target read \
                             would win): give every Target of this controlPlaneEndpoint the same gce.kubeApi",
                            g.control_plane_endpoint
                        ),
                    );
                }
            }
            zone_at.insert(
                doc.metadata.name.clone(),
                doc.fields.value(&["spec", "zone"]),
            );
            let name_ok = check_name(&mut d, &doc.fields, "Target", &doc.metadata.name);
            let spec_ok = check_target(&mut d, &doc.fields, &spec)
                & check_target_previous_names(&mut d, &doc.fields, &doc.metadata.name, &spec);
            for (i, p) in spec.previous_names.iter().enumerate() {
                target_claims.push((
                    doc.metadata.name.clone(),
                    spec.owner_id.clone(),
                    p.clone(),
                    doc.fields.value(&["spec", "previousNames", &i.to_string()]),
                ));
            }
            all_targets.insert(doc.metadata.name.clone(), spec.clone());
            if name_ok && spec_ok {
                fleet.targets.insert(
                    doc.metadata.name.clone(),
                    Target {
                        name: doc.metadata.name,
                        spec,
                        location: doc.location,
                    },
                );
            }
        }
    }
    check_target_previous_names_across(&mut d, &mut fleet, &target_claims, &seen);
    // Valid slices in document order, for the name collision check.
    let mut rendered: Vec<Rendered> = Vec::new();
    // (slice, previous name, where it is written), for the checks across slices.
    let mut claims: Vec<(String, String, Location)> = Vec::new();
    for doc in slices {
        if let DocumentSpec::Slice(spec) = doc.spec {
            let fields = &doc.fields;
            let name_ok = check_name(&mut d, fields, "Slice", &doc.metadata.name);
            let target_ok = if ambiguous.contains(&spec.target) {
                false
            } else {
                check_target_ref(&mut d, fields, &spec, &all_targets, refs)
            };
            let shape = check_shape(&mut d, fields, &spec);
            let zone_ok = match (&shape, target_ok, all_targets.get(&spec.target)) {
                (Some(shape), true, Some(target)) => check_zone(
                    &mut d,
                    fields,
                    shape.generation,
                    &spec.target,
                    target,
                    zone_at.get(&spec.target),
                ),
                _ => true,
            };
            let target = all_targets.get(&spec.target).filter(|_| target_ok);
            let gce_ok = check_gce_slice(&mut d, fields, &spec, target, shape.as_ref());
            let previous_ok = check_previous_names(&mut d, fields, &doc.metadata.name, &spec);
            for (i, p) in spec.previous_names.iter().enumerate() {
                claims.push((
                    doc.metadata.name.clone(),
                    p.clone(),
                    fields.value(&["spec", "previousNames", &i.to_string()]),
                ));
            }
            let spec_ok = check_slice(&mut d, fields, &spec) && zone_ok && gce_ok && previous_ok;
            let timeout = check_operation_timeout(&mut d, fields, &spec);
            if let (true, true, true, Some(shape), Some(operation_timeout)) =
                (name_ok, target_ok, spec_ok, shape, timeout)
            {
                if let Some(target) = all_targets.get(&spec.target) {
                    rendered.push(Rendered {
                        slice: doc.metadata.name.clone(),
                        name_at: fields.value(&["metadata", "name"]),
                        target,
                        replicas: spec.replicas,
                        workload_policy: matches!(
                            shape.placement,
                            Placement::WorkloadPolicy { .. }
                        ),
                        gce: gce_resources(&spec),
                        node_pool: spec.node_pool_name.clone(),
                        pinned: spec
                            .gce
                            .as_ref()
                            .map(|g| (g.mig_name.clone(), g.workload_policy_name.clone()))
                            .unwrap_or_default(),
                    });
                }
                fleet.slices.insert(
                    doc.metadata.name.clone(),
                    Slice {
                        name: doc.metadata.name,
                        spec,
                        shape,
                        operation_timeout,
                        location: doc.location,
                        workload: None,
                    },
                );
            }
        }
    }
    check_name_collisions(&mut d, &rendered);
    check_previous_names_across(&mut d, &claims, &seen, &mut fleet);
    // Built again from its sorted entries: a B-tree filled one insert at a
    // time leaves its nodes about half empty, and a node holds whole slices
    // (at 10,000 slices 12.5 MB instead of 7 MB).
    fleet.slices = std::mem::take(&mut fleet.slices).into_iter().collect();
    fleet
}

/// A Target's `previousNames` on its own: valid Target names, none twice,
/// not its own name.
fn check_target_previous_names(
    d: &mut Diags<'_>,
    f: &FieldIndex,
    name: &str,
    spec: &TargetSpec,
) -> bool {
    let before = d.0.len();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, p) in spec.previous_names.iter().enumerate() {
        let at = f.value(&["spec", "previousNames", &i.to_string()]);
        if let Some(problem) = dns_label_problem(p, 63) {
            d.push(at, format!("previousNames entry {p:?} {problem}"));
        } else if p == name {
            d.push(
                at,
                format!(
                    "previousNames entry {p:?} is this Target's own name; list only the Targets whose slices it takes over"
                ),
            );
        } else if let Some(first) = seen.insert(p, i) {
            d.push(
                at,
                format!("previousNames entry {p:?} is already given as previousNames[{first}]"),
            );
        }
    }
    d.0.len() == before
}

/// Target `previousNames` across Targets: an entry must not name a Target
/// in the specs (its slices are its own), nor be claimed by two Targets of
/// one ownerId. Such Targets are left out of the fleet, like any invalid
/// Target.
fn check_target_previous_names_across(
    d: &mut Diags<'_>,
    fleet: &mut Fleet,
    claims: &[(String, String, String, Location)],
    seen: &BTreeMap<(&'static str, String), Location>,
) {
    let mut first_claim: BTreeMap<(&str, &str), (&str, &Location)> = BTreeMap::new();
    let mut invalid: BTreeSet<&str> = BTreeSet::new();
    for (name, owner, prev, at) in claims {
        if prev == name {
            continue;
        }
        if let Some(other) = seen.get(&("Target", prev.clone())) {
            d.push(
                at.clone(),
                format!(
                    "previousNames entry {prev:?} is the name of Target {prev:?} in the specs (defined at {other}); \
                     a Target takes over the slices of a Target these specs do not declare"
                ),
            );
            invalid.insert(name);
            continue;
        }
        match first_claim.get(&(owner.as_str(), prev.as_str())) {
            Some(&(first, first_at)) if first != name => {
                d.push(
                    at.clone(),
                    format!(
                        "previousNames entry {prev:?} is also claimed by Target {first:?} (at {first_at}), with the \
                         same ownerId; the slices of Target {prev:?} can go to one Target only"
                    ),
                );
                invalid.insert(name);
                invalid.insert(first);
            }
            Some(_) => {}
            None => {
                first_claim.insert((owner, prev), (name, at));
            }
        }
    }
    for name in invalid {
        fleet.targets.remove(name);
    }
}

/// A slice's `previousNames` on its own: valid slice names, none twice, not
/// its own name.
fn check_previous_names(d: &mut Diags<'_>, f: &FieldIndex, name: &str, spec: &SliceSpec) -> bool {
    let before = d.0.len();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, p) in spec.previous_names.iter().enumerate() {
        let at = f.value(&["spec", "previousNames", &i.to_string()]);
        let problem = match dns_label_problem(p, 63) {
            Some(problem) => Some(problem),
            None if !p.starts_with(|c: char| c.is_ascii_lowercase()) => {
                Some("must start with a lowercase letter, as a slice name does".to_string())
            }
            None => None,
        };
        if let Some(problem) = problem {
            d.push(at, format!("previousNames entry {p:?} {problem}"));
        } else if p == name {
            d.push(
                at,
                format!(
                    "previousNames entry {p:?} is this slice's own name; list only the names it had before"
                ),
            );
        } else if let Some(first) = seen.insert(p, i) {
            d.push(
                at,
                format!("previousNames entry {p:?} is already given as previousNames[{first}]"),
            );
        }
    }
    d.0.len() == before
}

/// `previousNames` across slices: a previous name must not be another
/// Slice's name in the specs (that slice's resources are its own), nor be
/// claimed by two slices (whose would its resources be?). A slice with such
/// an entry is left out of the fleet, like any invalid slice.
fn check_previous_names_across(
    d: &mut Diags<'_>,
    claims: &[(String, String, Location)],
    seen: &BTreeMap<(&'static str, String), Location>,
    fleet: &mut Fleet,
) {
    let mut first_claim: BTreeMap<&str, (&str, &Location)> = BTreeMap::new();
    let mut invalid: BTreeSet<&str> = BTreeSet::new();
    for (slice, prev, at) in claims {
        if prev == slice {
            continue;
        }
        if let Some(other) = seen.get(&("Slice", prev.clone())) {
            d.push(
                at.clone(),
                format!(
                    "previousNames entry {prev:?} is the name of Slice {prev:?} in the specs (defined at {other}); \
                     a slice can take over the resources of a slice that is gone, not of one that still exists"
                ),
            );
            invalid.insert(slice);
            continue;
        }
        match first_claim.get(prev.as_str()) {
            Some(&(first, first_at)) if first != slice => {
                d.push(
                    at.clone(),
                    format!(
                        "previousNames entry {prev:?} is also claimed by Slice {first:?} (at {first_at}); \
                         the resources of slice {prev:?} can go to one slice only"
                    ),
                );
                invalid.insert(slice);
                invalid.insert(first);
            }
            Some(_) => {}
            None => {
                first_claim.insert(prev, (slice, at));
            }
        }
    }
    for s in invalid {
        fleet.slices.remove(s);
    }
}

/// A valid slice, as much as the name collision check needs.
struct Rendered<'a> {
    slice: String,
    name_at: Location,
    /// Borrowed from the Targets read (one clone per slice was measurable
    /// at 10,000 slices).
    target: &'a TargetSpec,
    replicas: u32,
    workload_policy: bool,
    /// Backend gce: a MIG, and an instance template unless it brings its own.
    gce: Option<GceResources>,
    /// The node pool's name, when the spec sets it (`nodePoolName`).
    node_pool: Option<String>,
    /// The MIG's and workload policy's names, when the spec sets them
    /// (`gce.migName`, `gce.workloadPolicyName`).
    pinned: (Option<String>, Option<String>),
}

/// The GCE resources a `gce` slice replica gets.
#[derive(Debug, Clone, Copy)]
struct GceResources {
    /// slicectl renders the instance template (no `instanceTemplate`).
    template: bool,
}

fn gce_resources(spec: &SliceSpec) -> Option<GceResources> {
    (spec.backend == Backend::Gce).then(|| GceResources {
        template: spec
            .gce
            .as_ref()
            .is_none_or(|g| g.instance_template.is_none()),
    })
}

/// Two slices (any replicas) whose cloud resources get one name in one scope:
/// the same node pool name in one GKE cluster (whichever Targets name it),
/// the same workload policy name in one project and region, the same MIG
/// name in one project and zone, or the same instance template name in one
/// project (templates are global). Names are
/// distinct when short, but a long name is shortened with a hash, and a short
/// slice name can equal that shortened form. Both slices are reported at
/// their `metadata.name`, like a duplicate name.
fn check_name_collisions(d: &mut Diags<'_>, rendered: &[Rendered<'_>]) {
    // (kind, scope, name) -> (slice, replica, where the slice's name is).
    let mut seen: BTreeMap<(&str, String, String), (&str, u32, &Location)> = BTreeMap::new();
    for r in rendered {
        let t = &r.target;
        for replica in 0..r.replicas {
            let mut owned = Vec::with_capacity(3);
            if let Some(gce) = r.gce {
                owned.push((
                    "MIG",
                    format!("project {} zone {}", t.project, t.zone),
                    r.pinned
                        .0
                        .clone()
                        .unwrap_or_else(|| names::mig(&r.slice, replica)),
                    names::MIG_NAME_MAX,
                ));
                if gce.template {
                    owned.push((
                        "instance template",
                        format!("project {}", t.project),
                        names::instance_template(&r.slice, replica),
                        names::COMPUTE_NAME_MAX,
                    ));
                }
            } else if let Some(gke) = &t.gke {
                owned.push((
                    "node pool",
                    format!(
                        "cluster projects/{}/locations/{}/clusters/{}",
                        t.project, gke.location, gke.name
                    ),
                    r.node_pool
                        .clone()
                        .unwrap_or_else(|| names::node_pool(&r.slice, replica)),
                    names::NODE_POOL_NAME_MAX,
                ));
            }
            if r.workload_policy {
                owned.push((
                    "workload policy",
                    format!("project {} region {}", t.project, region_of(&t.zone)),
                    r.pinned
                        .1
                        .clone()
                        .unwrap_or_else(|| names::workload_policy(&r.slice, replica)),
                    names::COMPUTE_NAME_MAX,
                ));
            }
            for (kind, scope, name, max) in owned {
                let key = (kind, scope.clone(), name.clone());
                let Some(&(first, first_replica, first_at)) = seen.get(&key) else {
                    seen.insert(key, (r.slice.as_str(), replica, &r.name_at));
                    continue;
                };
                let advice = format!(
                    "(names longer than {max} characters are shortened with a hash of the full name, \
                     and a shorter slice name can equal the shortened form); \
                     rename one of the two slices"
                );
                d.push(
                    r.name_at.clone(),
                    format!(
                        "{kind} name collision: Slice {:?} replica {replica} renders {kind} {name:?} in {scope}, \
                         the same name as Slice {first:?} replica {first_replica} (defined at {first_at}) {advice}",
                        r.slice
                    ),
                );
                d.push(
                    first_at.clone(),
                    format!(
                        "{kind} name collision: Slice {first:?} replica {first_replica} renders {kind} {name:?} in {scope}, \
                         the same name as Slice {:?} replica {replica} (defined at {}) {advice}",
                        r.slice, r.name_at
                    ),
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Documents

fn check_name(d: &mut Diags<'_>, f: &FieldIndex, kind: &str, name: &str) -> bool {
    match dns_label_problem(name, 63) {
        None if name.starts_with(|c: char| c.is_ascii_lowercase()) => true,
        None => {
            d.push(
                f.value(&["metadata", "name"]),
                format!(
                    "{kind} name {name:?} must start with a lowercase letter (cloud resource names derived from it must)"
                ),
            );
            false
        }
        Some(problem) => {
            d.push(
                f.value(&["metadata", "name"]),
                format!("{kind} name {name:?} {problem}"),
            );
            false
        }
    }
}

fn check_target(d: &mut Diags<'_>, f: &FieldIndex, spec: &TargetSpec) -> bool {
    let before = d.0.len();
    if let Some(dis) = &spec.disruption {
        check_disruption(d, f, dis, true);
    }
    check_workloads(d, f, spec);
    if let Some(problem) = project_id_problem(&spec.project) {
        d.push(
            f.value(&["spec", "project"]),
            format!("project {:?} {problem}", spec.project),
        );
    }
    if !is_zone(&spec.zone) {
        d.push(
            f.value(&["spec", "zone"]),
            format!(
                "zone {:?} is not a zone; expected e.g. us-central2-b (region, '-', zone letter)",
                spec.zone
            ),
        );
    }
    if let Some(problem) = dns_label_problem(&spec.owner_id, MAX_OWNER_ID_LEN) {
        d.push(
            f.value(&["spec", "ownerId"]),
            format!("ownerId {:?} {problem}", spec.owner_id),
        );
    }
    if let Some(gke) = &spec.gke {
        let region_ok = is_region(&gke.location);
        let zone_ok = is_zone(&gke.location);
        if !region_ok && !zone_ok {
            d.push(
                f.value(&["spec", "gke", "location"]),
                format!(
                    "cluster location {:?} is neither a region (e.g. us-central2) nor a zone (e.g. us-central2-b)",
                    gke.location
                ),
            );
        } else if is_zone(&spec.zone) {
            if zone_ok && gke.location != spec.zone {
                d.push(
                    f.value(&["spec", "zone"]),
                    format!(
                        "zone {:?} differs from the zonal cluster's location {:?}; a zonal cluster's node pools live in its zone",
                        spec.zone, gke.location
                    ),
                );
            } else if region_ok && region_of(&spec.zone) != gke.location {
                d.push(
                    f.value(&["spec", "zone"]),
                    format!(
                        "zone {:?} is not in the cluster's region {:?}; expected a zone such as {}-a",
                        spec.zone, gke.location, gke.location
                    ),
                );
            }
        }
        if let Some(problem) = gce_name_problem(&gke.name, 40) {
            d.push(
                f.value(&["spec", "gke", "name"]),
                format!("cluster name {:?} {problem}", gke.name),
            );
        }
        check_gke_kube_api(d, f, &gke.kube_api);
    }
    if spec.gke.is_some() && spec.gce.is_some() {
        d.push(
            f.key(&["spec", "gce"]),
            "a Target names one cluster: `gke` (a GKE cluster, backend gke) or `gce` (a self-managed \
             kubeadm cluster, backend gce), not both; define a second Target for the other cluster \
             (two Targets may share a project and zone)",
        );
    }
    if let Some(gce) = &spec.gce {
        check_gce_cluster(d, f, spec, gce);
    }
    let nd = &spec.node_defaults;
    let base = ["spec", "nodeDefaults"];
    if let Some(sa) = &nd.service_account
        && !is_email(sa)
    {
        d.push(
            f.value(&[base[0], base[1], "serviceAccount"]),
            format!(
                "serviceAccount {sa:?} is not an email address; expected e.g. tpu-nodes@example-project.iam.gserviceaccount.com"
            ),
        );
    }
    for (i, scope) in nd.oauth_scopes.iter().enumerate() {
        let idx = i.to_string();
        if !scope.starts_with("https://") || scope.chars().any(char::is_whitespace) {
            d.push(
                f.value(&[base[0], base[1], "oauthScopes", &idx]),
                format!(
                    "OAuth scope {scope:?} must be a full URL, e.g. https://www.googleapis.com/auth/cloud-platform"
                ),
            );
        }
    }
    for (i, tag) in nd.tags.iter().enumerate() {
        let idx = i.to_string();
        if let Some(problem) = gce_name_problem(tag, 63) {
            d.push(
                f.value(&[base[0], base[1], "tags", &idx]),
                format!("network tag {tag:?} {problem}"),
            );
        }
    }
    if let Some(disk_type) = &nd.disk_type
        && (disk_type.is_empty()
            || !disk_type
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
    {
        d.push(
            f.value(&[base[0], base[1], "diskType"]),
            format!(
                "diskType {disk_type:?} is not a disk type; expected e.g. hyperdisk-balanced or pd-balanced"
            ),
        );
    }
    if let Some(size) = nd.disk_size_gb
        && !(10..=65_536).contains(&size)
    {
        d.push(
            f.value(&[base[0], base[1], "diskSizeGb"]),
            format!("diskSizeGb {size} is out of range; expected 10..=65536"),
        );
    }
    if !(8..=256).contains(&nd.max_pods_per_node) {
        d.push(
            f.value(&[base[0], base[1], "maxPodsPerNode"]),
            format!(
                "maxPodsPerNode {} is out of range; GKE accepts 8..=256",
                nd.max_pods_per_node
            ),
        );
    }
    for (i, net) in nd.additional_networks.iter().enumerate() {
        let idx = i.to_string();
        for (field, value) in [("network", &net.network), ("subnetwork", &net.subnetwork)] {
            if let Some(problem) = gce_name_problem(value, 63) {
                d.push(
                    f.value(&[base[0], base[1], "additionalNetworks", &idx, field]),
                    format!("{field} {value:?} {problem}"),
                );
            }
        }
    }
    if nd.resource_labels.len() > MAX_RESOURCE_LABELS {
        d.push(
            f.key(&[base[0], base[1], "resourceLabels"]),
            format!(
                "{} resource labels; GCE allows at most {MAX_RESOURCE_LABELS}",
                nd.resource_labels.len()
            ),
        );
    }
    for (key, value) in &nd.resource_labels {
        if let Some(problem) = gce_label_key_problem(key) {
            d.push(
                f.key(&[base[0], base[1], "resourceLabels", key]),
                format!("resource label key {key:?} {problem}"),
            );
        }
        if let Some(problem) = gce_label_value_problem(value) {
            d.push(
                f.value(&[base[0], base[1], "resourceLabels", key]),
                format!("resource label value {value:?} {problem}"),
            );
        }
    }
    d.0.len() == before
}

/// A GKE Target's `kubeApi`: at most one of `endpoint`, `kubeconfig` and
/// `inCluster`; `context` only with `kubeconfig`.
fn check_gke_kube_api(d: &mut Diags<'_>, f: &FieldIndex, api: &crate::spec::model::GkeKubeApi) {
    let at_key = |field: &str| f.key(&["spec", "gke", "kubeApi", field]);
    let at_value = |field: &str| f.value(&["spec", "gke", "kubeApi", field]);
    let chosen: Vec<&str> = [
        ("endpoint", api.endpoint.is_some()),
        ("kubeconfig", api.kubeconfig.is_some()),
        ("inCluster", api.in_cluster),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    if chosen.len() > 1 {
        d.push(
            at_key(chosen[1]),
            format!(
                "kubeApi takes one of `endpoint: public|private|dns` (the endpoint and CA from \
                 clusters.get, with slicectl's Google token), `kubeconfig: PATH` (optionally with \
                 `context`) or `inCluster: true`, not {}",
                chosen.join(" and ")
            ),
        );
    }
    if let Some(path) = &api.kubeconfig
        && path.trim().is_empty()
    {
        d.push(
            at_value("kubeconfig"),
            "kubeconfig must be a path, e.g. ~/.kube/config",
        );
    }
    if let Some(context) = &api.context {
        if api.kubeconfig.is_none() {
            d.push(
                at_key("context"),
                "context names a context of `kubeconfig`; it is only allowed with `kubeconfig`",
            );
        } else if context.trim().is_empty() {
            d.push(
                at_value("context"),
                "context must not be empty; omit it to use the kubeconfig's current context",
            );
        }
    }
}

fn check_target_ref(
    d: &mut Diags<'_>,
    f: &FieldIndex,
    spec: &SliceSpec,
    targets: &BTreeMap<String, TargetSpec>,
    refs: &References,
) -> bool {
    match targets.get(&spec.target) {
        Some(target) => {
            if spec.backend == Backend::Gke && target.gke.is_none() {
                d.push(
                    f.value(&["spec", "backend"]),
                    format!(
                        "backend gke needs a GKE cluster, but Target {:?} has no `gke` (location, name)",
                        spec.target
                    ),
                );
                return false;
            }
            if spec.backend == Backend::Gce && target.gce.is_none() {
                d.push(
                    f.value(&["spec", "backend"]),
                    format!(
                        "backend gce needs a self-managed cluster, but Target {:?} has no `gce` \
                         (controlPlaneEndpoint, kubeApi); add one, or use a Target that has it",
                        spec.target
                    ),
                );
                return false;
            }
        }
        None => {
            if refs.broken_targets.contains(&spec.target) || refs.any_unknown_broken {
                // The target's own file has errors, reported already.
                return false;
            }
            let defined = if targets.is_empty() {
                "no Target is defined".to_string()
            } else {
                format!(
                    "defined Targets: {}",
                    targets.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            };
            d.push(
                f.value(&["spec", "target"]),
                format!("Target {:?} is not defined; {defined}", spec.target),
            );
            return false;
        }
    }
    true
}

/// The zone check: the slice's TPU generation must be offered in its
/// target's zone ([`catalog::Generation::zones`]), unless the target sets
/// `allowUnlistedZone`. Reported at the slice's accelerator, naming the
/// target's zone and where it is written, and the zones that offer it.
fn check_zone(
    d: &mut Diags<'_>,
    f: &FieldIndex,
    generation: &catalog::Generation,
    target_name: &str,
    target: &TargetSpec,
    zone_at: Option<&Location>,
) -> bool {
    if target.allow_unlisted_zone || !is_zone(&target.zone) || generation.offered_in(&target.zone) {
        return true;
    }
    let written = zone_at.map(|l| format!(" ({l})")).unwrap_or_default();
    d.push(
        f.value(&["spec", "accelerator"]),
        format!(
            "accelerator {} ({}) is not offered in zone {:?} of Target {target_name:?}{written}; \
             Google offers it in: {} ({}). Use a Target in one of those zones, or, if Google \
             offers it in {:?} now, set `allowUnlistedZone: true` in Target {target_name:?}'s spec",
            generation.accelerator,
            generation.display,
            target.zone,
            generation.zones.join(", "),
            catalog::ZONE_SOURCES[0].url,
            target.zone,
        ),
    );
    false
}

fn check_shape(d: &mut Diags<'_>, f: &FieldIndex, spec: &SliceSpec) -> Option<catalog::SliceShape> {
    match catalog::resolve_for(
        spec.backend,
        &spec.accelerator,
        &spec.topology,
        spec.machine_type.as_deref(),
    ) {
        Ok(shape) => Some(shape),
        Err(err) => {
            let field = match err {
                CatalogError::UnknownAccelerator { .. } | CatalogError::NotOnBackend { .. } => {
                    "accelerator"
                }
                CatalogError::InvalidTopology { .. } => "topology",
                CatalogError::UnknownMachineType { .. }
                | CatalogError::MachineTypeDoesNotFit { .. } => "machineType",
            };
            d.push(f.value(&["spec", field]), err.to_string());
            None
        }
    }
}

fn check_slice(d: &mut Diags<'_>, f: &FieldIndex, spec: &SliceSpec) -> bool {
    let before = d.0.len();
    if let Some(dis) = &spec.disruption {
        check_disruption(d, f, dis, false);
    }
    if let Some(n) = &spec.node_pool_name {
        let at = f.value(&["spec", "nodePoolName"]);
        if let Some(problem) = gce_name_problem(n, names::NODE_POOL_NAME_MAX) {
            d.push(at, format!("nodePoolName {n:?} {problem}"));
        } else if spec.backend != Backend::Gke || spec.replicas != 1 {
            d.push(
                at,
                "nodePoolName names the one node pool of a backend gke slice with replicas: 1 (an adopted pool); remove it, or set backend: gke and replicas: 1",
            );
        }
    }
    if !(1..=MAX_REPLICAS).contains(&spec.replicas) {
        d.push(
            f.value(&["spec", "replicas"]),
            format!(
                "replicas {} is out of range; expected 1..={MAX_REPLICAS}",
                spec.replicas
            ),
        );
    }
    let cap = &spec.capacity;
    match (cap.kind, &cap.reservation) {
        (CapacityType::Reservation, None) => d.push(
            f.value(&["spec", "capacity", "type"]),
            "capacity type reservation needs `capacity.reservation` with the reservation's name (and project, if shared from another project)",
        ),
        (CapacityType::Reservation, Some(res)) => {
            if let Some(problem) = gce_name_problem(&res.name, 63) {
                d.push(
                    f.value(&["spec", "capacity", "reservation", "name"]),
                    format!("reservation name {:?} {problem}", res.name),
                );
            }
            if let Some(project) = &res.project
                && let Some(problem) = project_id_problem(project)
            {
                d.push(
                    f.value(&["spec", "capacity", "reservation", "project"]),
                    format!("reservation project {project:?} {problem}"),
                );
            }
        }
        (other, Some(_)) => d.push(
            f.key(&["spec", "capacity", "reservation"]),
            format!(
                "capacity.reservation is only allowed with `type: reservation` (type is {})",
                other.as_str()
            ),
        ),
        (_, None) => {}
    }
    if cap.queued && (cap.kind != CapacityType::FlexStart || spec.backend != Backend::Gke) {
        d.push(
            f.key(&["spec", "capacity", "queued"]),
            format!(
                "capacity.queued (GKE's queued provisioning) is only allowed with `type: flex-start` \
                 on backend gke (type is {}, backend is {})",
                cap.kind.as_str(),
                spec.backend.as_str()
            ),
        );
    }
    if let Some(text) = &cap.max_run_duration {
        let at = f.value(&["spec", "capacity", "maxRunDuration"]);
        if cap.kind != CapacityType::FlexStart {
            d.push(
                f.key(&["spec", "capacity", "maxRunDuration"]),
                format!(
                    "maxRunDuration is only allowed with `type: flex-start` (type is {})",
                    cap.kind.as_str()
                ),
            );
        } else {
            match parse_duration(text) {
                Ok(dur) if dur > MAX_RUN_DURATION => d.push(
                    at,
                    format!(
                        "maxRunDuration {text:?} is longer than flex-start's limit of 7 days (168h)"
                    ),
                ),
                Ok(dur) if dur.subsec_nanos() != 0 => d.push(
                    at,
                    format!("maxRunDuration {text:?} must be a whole number of seconds"),
                ),
                Ok(_) => {}
                Err(problem) => d.push(at, format!("maxRunDuration {problem}")),
            }
        }
    }
    let reserved = match spec.backend {
        Backend::Gke => reserved_label_problem,
        Backend::Gce => gce_reserved_label_problem,
    };
    check_node_labels(
        d,
        f,
        &["spec", "nodeLabels"],
        spec.node_labels.iter(),
        reserved,
    );
    check_taints(d, f, &["spec", "taints"], &spec.taints);
    d.0.len() == before
}

/// Node labels at `base` (a map): each key a qualified name not `reserved`,
/// each value a label value.
fn check_node_labels<'a>(
    d: &mut Diags<'_>,
    f: &FieldIndex,
    base: &[&str],
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
    reserved: fn(&str) -> Option<String>,
) {
    fn at<'k>(base: &[&'k str], key: &'k str) -> Vec<&'k str> {
        let mut p = base.to_vec();
        p.push(key);
        p
    }
    for (key, value) in labels {
        let key_at = f.key(&at(base, key));
        if let Some(problem) = label_key_problem(key) {
            d.push(key_at, format!("node label key {key:?} {problem}"));
        } else if let Some(problem) = reserved(key) {
            d.push(key_at, format!("node label key {key:?} {problem}"));
        }
        if let Some(problem) = label_value_problem(value) {
            d.push(
                f.value(&at(base, key)),
                format!("node label value {value:?} {problem}"),
            );
        }
    }
}

/// Taints at `base` (a list): keys and values valid, one per key and effect.
fn check_taints(d: &mut Diags<'_>, f: &FieldIndex, base: &[&str], taints: &[super::model::Taint]) {
    let mut taints_seen: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (i, taint) in taints.iter().enumerate() {
        let idx = i.to_string();
        let at = |field: Option<&'static str>| -> Vec<&str> {
            let mut p = base.to_vec();
            p.push(&idx);
            p.extend(field);
            p
        };
        if let Some(problem) = label_key_problem(&taint.key) {
            d.push(
                f.value(&at(Some("key"))),
                format!("taint key {:?} {problem}", taint.key),
            );
        }
        if let Some(problem) = label_value_problem(&taint.value) {
            d.push(
                f.value(&at(Some("value"))),
                format!("taint value {:?} {problem}", taint.value),
            );
        }
        let effect = match taint.effect {
            super::model::TaintEffect::NoSchedule => "NoSchedule",
            super::model::TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            super::model::TaintEffect::NoExecute => "NoExecute",
        };
        if let Some(first) = taints_seen.insert((taint.key.as_str(), effect), i) {
            d.push(
                f.value(&at(None)),
                format!(
                    "taint {:?} with effect {effect} is already given as taints[{first}]; Kubernetes allows one per key and effect",
                    taint.key
                ),
            );
        }
    }
}

/// Longest `workloads.gracePeriod`.
const MAX_GRACE_PERIOD: Duration = Duration::from_secs(168 * 3600);

/// A Target's `workloads` block: GKE only (tpu-provisioner's flow is
/// GKE's), a grace period that parses, rules naming namespaces,
/// accelerators the Target's zone offers, topologies valid for them, and
/// labels and taints as a slice's.
fn check_workloads(d: &mut Diags<'_>, f: &FieldIndex, spec: &TargetSpec) {
    let Some(w) = &spec.workloads else {
        return;
    };
    if spec.gke.is_none() {
        d.push(
            f.key(&["spec", "workloads"]),
            "workloads (slices for pending JobSets) are for GKE Targets only, as tpu-provisioner's are; \
             remove `workloads` from this Target or give it a `gke` cluster",
        );
    }
    if let Some(text) = &w.grace_period {
        let at = f.value(&["spec", "workloads", "gracePeriod"]);
        match parse_duration(text) {
            Ok(v) if v > MAX_GRACE_PERIOD => {
                d.push(at, format!("gracePeriod {text:?} is longer than 168h"))
            }
            Ok(_) => {}
            Err(problem) => d.push(at, format!("gracePeriod {problem}")),
        }
    }
    for (i, rule) in w.rules.iter().enumerate() {
        let idx = i.to_string();
        let at = |field: &'static str, j: Option<&str>| -> Location {
            let mut p = vec!["spec", "workloads", "rules", idx.as_str(), field];
            p.extend(j);
            f.value(&p)
        };
        for (j, ns) in rule.namespaces.iter().flatten().enumerate() {
            if let Some(problem) = dns_label_problem(ns, 63) {
                d.push(
                    at("namespaces", Some(&j.to_string())),
                    format!("namespace {ns:?} {problem}"),
                );
            }
        }
        let mut generations = Vec::new();
        for (j, acc) in rule.accelerators.iter().flatten().enumerate() {
            match catalog::generation(acc) {
                None => d.push(
                    at("accelerators", Some(&j.to_string())),
                    catalog::CatalogError::UnknownAccelerator { given: acc.clone() }.to_string(),
                ),
                Some(g) if !spec.allow_unlisted_zone && !g.offered_in(&spec.zone) => d.push(
                    at("accelerators", Some(&j.to_string())),
                    format!(
                        "accelerator {acc} ({}) is not offered in the Target's zone {}; zones that offer it: {} \
                         (or set allowUnlistedZone)",
                        g.display,
                        spec.zone,
                        g.zones.join(", ")
                    ),
                ),
                Some(g) => generations.push(g),
            }
        }
        if generations.is_empty() && rule.accelerators.is_none() {
            generations = catalog::GENERATIONS.iter().collect();
        }
        for (j, topo) in rule.topologies.iter().flatten().enumerate() {
            if !generations.is_empty()
                && !generations
                    .iter()
                    .any(|g| g.topologies.contains(&topo.as_str()))
            {
                d.push(
                    at("topologies", Some(&j.to_string())),
                    format!(
                        "topology {topo:?} is not valid for {}; see the TPU catalogue in docs/spec-reference.md",
                        generations.iter().map(|g| g.accelerator).collect::<Vec<_>>().join(", ")
                    ),
                );
            }
        }
        if rule.capacity.as_ref().is_some_and(Vec::is_empty) {
            d.push(
                at("capacity", None),
                "capacity lists no type; omit it for [onDemand], or list onDemand, spot, reservation or flexStart",
            );
        }
        if rule.max_chips == Some(0) {
            d.push(
                at("maxChips", None),
                "maxChips 0 allows nothing; omit the rule instead",
            );
        }
        check_node_labels(
            d,
            f,
            &["spec", "workloads", "rules", &idx, "labels"],
            &rule.labels,
            reserved_label_problem,
        );
        check_taints(
            d,
            f,
            &["spec", "workloads", "rules", &idx, "taints"],
            &rule.taints,
        );
    }
}

fn check_operation_timeout(
    d: &mut Diags<'_>,
    f: &FieldIndex,
    spec: &SliceSpec,
) -> Option<Duration> {
    let Some(text) = &spec.lifecycle.operation_timeout else {
        return Some(DEFAULT_OPERATION_TIMEOUT);
    };
    let at = f.value(&["spec", "lifecycle", "operationTimeout"]);
    match parse_duration(text) {
        Ok(dur) if dur < Duration::from_secs(60) || dur > MAX_OPERATION_TIMEOUT => {
            d.push(
                at,
                format!("operationTimeout {text:?} is out of range; expected between 1m and 24h"),
            );
            None
        }
        Ok(dur) => Some(dur),
        Err(problem) => {
            d.push(at, format!("operationTimeout {problem}"));
            None
        }
    }
}

/// A `disruption` block (a Target's when `on_target`: only there is
/// `budget` allowed).
fn check_disruption(
    d: &mut Diags<'_>,
    f: &FieldIndex,
    dis: &super::model::Disruption,
    on_target: bool,
) {
    use super::disruption::{MAX_DRAIN_TIMEOUT, MIN_DRAIN_TIMEOUT, Window};
    if let Some(t) = &dis.drain_timeout {
        let at = f.value(&["spec", "disruption", "drainTimeout"]);
        match parse_duration(t) {
            Ok(v) if !(MIN_DRAIN_TIMEOUT..=MAX_DRAIN_TIMEOUT).contains(&v) => d.push(
                at,
                format!("drainTimeout {t:?} is out of range; expected between 1m and 168h"),
            ),
            Ok(_) => {}
            Err(problem) => d.push(at, format!("drainTimeout {problem}")),
        }
    }
    for (i, w) in dis.windows.iter().flatten().enumerate() {
        if let Err((field, problem)) = Window::parse(w) {
            d.push(
                f.value(&["spec", "disruption", "windows", &i.to_string(), field]),
                problem,
            );
        }
    }
    if !on_target && dis.budget.is_some() {
        d.push(
            f.value(&["spec", "disruption", "budget"]),
            "budget is a Target's setting (at most N busy slice replicas of the Target disrupted at once); \
             move it to the Target's `disruption`",
        );
    }
}

// ---------------------------------------------------------------------------
// Syntax rules (public so that renderers and other checks share them)

/// Parses a positive duration such as `72h`, `30m`, `1h30m`, `90s` or ISO 8601
/// `PT72H`. The error says what is expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let parsed: SignedDuration = text.trim().parse().map_err(|_| {
        format!("{text:?} is not a duration; expected e.g. 72h, 30m, 1h30m or 90s (hours are the largest unit)")
    })?;
    if parsed.is_negative() || parsed.is_zero() {
        return Err(format!("{text:?} must be a positive duration"));
    }
    Duration::try_from(parsed).map_err(|_| format!("{text:?} must be a positive duration"))
}

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// Why `s` is not a DNS-1123 label of at most `max` characters, if it is not.
pub fn dns_label_problem(s: &str, max: usize) -> Option<String> {
    if s.is_empty() {
        return Some("must not be empty".into());
    }
    if s.len() > max {
        return Some(format!(
            "is {} characters long; at most {max} allowed",
            s.len()
        ));
    }
    if !s.chars().all(|c| is_lower_alnum(c) || c == '-') {
        return Some("must be a DNS-1123 label: lowercase letters, digits and '-' only".into());
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Some("must be a DNS-1123 label: start and end with a letter or digit".into());
    }
    None
}

/// Why `s` is not a GCE resource name (`[a-z]([-a-z0-9]*[a-z0-9])?`, at most
/// `max` characters), if it is not.
pub fn gce_name_problem(s: &str, max: usize) -> Option<String> {
    if let Some(p) = dns_label_problem(s, max) {
        return Some(p);
    }
    if !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Some("must start with a lowercase letter".into());
    }
    None
}

/// Why `s` is not a Google Cloud project id, if it is not: 6 to 30
/// characters, lowercase letters, digits and '-', starting with a letter and
/// not ending with '-'; optionally prefixed by a domain (`example.com:`).
pub fn project_id_problem(s: &str) -> Option<String> {
    let id = match s.rsplit_once(':') {
        Some((domain, id)) => {
            if domain.is_empty()
                || !domain
                    .chars()
                    .all(|c| is_lower_alnum(c) || c == '-' || c == '.')
            {
                return Some(
                    "has an invalid domain prefix; expected e.g. example.com:my-project".into(),
                );
            }
            id
        }
        None => s,
    };
    if !(6..=30).contains(&id.len()) {
        return Some(format!(
            "is not a project id: it must be 6 to 30 characters long (it is {})",
            id.len()
        ));
    }
    if !id.chars().all(|c| is_lower_alnum(c) || c == '-')
        || !id.starts_with(|c: char| c.is_ascii_lowercase())
        || id.ends_with('-')
    {
        return Some(
            "is not a project id: expected lowercase letters, digits and '-', starting with a letter and not ending with '-'".into(),
        );
    }
    None
}

/// Whether `s` is a region such as `us-central2` (`^[a-z]+-[a-z]+[0-9]+$`).
pub fn is_region(s: &str) -> bool {
    let Some((area, rest)) = s.split_once('-') else {
        return false;
    };
    let letters = rest.trim_end_matches(|c: char| c.is_ascii_digit());
    !area.is_empty()
        && area.chars().all(|c| c.is_ascii_lowercase())
        && !letters.is_empty()
        && letters.len() < rest.len()
        && letters.chars().all(|c| c.is_ascii_lowercase())
}

/// Whether `s` is a zone such as `us-central2-b` (`^[a-z]+-[a-z]+[0-9]+-[a-z]$`).
pub fn is_zone(s: &str) -> bool {
    match s.rsplit_once('-') {
        Some((region, letter)) => {
            is_region(region) && letter.len() == 1 && letter.chars().all(|c| c.is_ascii_lowercase())
        }
        None => false,
    }
}

/// The region of a zone (`us-central2-b` → `us-central2`).
pub fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(region, _)| region)
}

fn is_email(s: &str) -> bool {
    match s.split_once('@') {
        Some((user, domain)) => {
            !user.is_empty()
                && domain.contains('.')
                && !domain.contains('@')
                && !s.chars().any(|c| c.is_whitespace() || c.is_control())
        }
        None => false,
    }
}

/// Whether `s` matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_label_name(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars()
            .all(|c| alnum(c) || c == '-' || c == '_' || c == '.')
}

/// Whether `s` is a DNS-1123 subdomain (dot-separated labels, at most 253).
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.')
            .all(|label| dns_label_problem(label, 63).is_none())
}

/// Why `key` is not a Kubernetes qualified name (`[prefix/]name`), if it is not.
pub fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && (prefix.is_empty() || !is_dns_subdomain(prefix))
    {
        return Some(
            "has an invalid prefix: it must be a DNS subdomain (lowercase, at most 253 characters) followed by '/'".into(),
        );
    }
    if name.len() > 63 {
        return Some(format!(
            "has a name part of {} characters; at most 63 allowed",
            name.len()
        ));
    }
    if !is_label_name(name) {
        return Some(
            "is not a qualified name: expected [prefix/]name where name is alphanumeric, '-', '_' or '.', starting and ending with an alphanumeric character".into(),
        );
    }
    None
}

/// Why `value` is not a Kubernetes label value, if it is not.
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    if value.len() > 63 {
        return Some(format!(
            "is {} characters long; at most 63 allowed",
            value.len()
        ));
    }
    if !is_label_name(value) {
        return Some(
            "is not a label value: expected alphanumeric, '-', '_' or '.', starting and ending with an alphanumeric character (or empty)".into(),
        );
    }
    None
}

/// Why a node label key is reserved, if it is.
fn reserved_label_problem(key: &str) -> Option<String> {
    if key.starts_with(RESERVED_LABEL_PREFIX) {
        return Some(format!(
            "uses the prefix {RESERVED_LABEL_PREFIX} owned by slicectl (it stamps its own labels there)"
        ));
    }
    // GKE answers 400 "Node labels with key "cloud.google.com/compute-class"
    // are managed by GKE or Kubernetes and must not be manually specified."
    // (terraform-provider-google#19677).
    if key == "cloud.google.com/compute-class" {
        return Some(
            "is managed by GKE (custom compute classes label their own nodes) and must not be set on a TPU slice"
                .to_string(),
        );
    }
    if key.starts_with(GKE_LABEL_PREFIX) {
        return Some(format!(
            "uses the prefix {GKE_LABEL_PREFIX} that GKE sets itself (accelerator and topology labels come from the spec)"
        ));
    }
    if let Some((prefix, _)) = key.split_once('/') {
        for reserved in ["kubernetes.io", "k8s.io"] {
            if prefix == reserved || prefix.ends_with(&format!(".{reserved}")) {
                return Some(format!(
                    "uses the {reserved} prefix reserved for Kubernetes; kubelets may not set such labels"
                ));
            }
        }
    }
    None
}

/// Why `key` is not a GCE resource label key, if it is not.
pub fn gce_label_key_problem(key: &str) -> Option<String> {
    if key.is_empty() || key.len() > 63 {
        return Some("must be 1 to 63 characters long".into());
    }
    if !key.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Some("must start with a lowercase letter".into());
    }
    if !key
        .chars()
        .all(|c| is_lower_alnum(c) || c == '-' || c == '_')
    {
        return Some("may contain only lowercase letters, digits, '-' and '_'".into());
    }
    if key.starts_with("goog") {
        return Some("uses the goog prefix reserved by Google Cloud".into());
    }
    if key.starts_with("slicectl") {
        return Some("uses the slicectl prefix owned by slicectl (its ownership labels)".into());
    }
    None
}

/// Why `value` is not a GCE resource label value, if it is not.
pub fn gce_label_value_problem(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some(format!(
            "is {} characters long; at most 63 allowed",
            value.len()
        ));
    }
    if !value
        .chars()
        .all(|c| is_lower_alnum(c) || c == '-' || c == '_')
    {
        return Some("may contain only lowercase letters, digits, '-' and '_'".into());
    }
    None
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
