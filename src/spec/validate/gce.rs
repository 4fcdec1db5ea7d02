//! The `gce` backend's spec checks: its cluster (endpoint, Kubernetes API,
//! network), its slices (image, disk, metadata, service account), the
//! kubeadm join, and an instance template a slice brings; and the syntax of
//! what Compute Engine takes (networks, subnetworks, images, templates,
//! metadata keys, labels). Called by [`super::validate`]'s walk; what every
//! backend shares stays there.

use super::*;

pub(super) fn check_gce_cluster(
    d: &mut Diags<'_>,
    f: &FieldIndex,
    spec: &TargetSpec,
    gce: &GceCluster,
) {
    let base = ["spec", "gce"];
    if let Err(problem) = parse_endpoint(&gce.control_plane_endpoint) {
        d.push(
            f.value(&[base[0], base[1], "controlPlaneEndpoint"]),
            format!(
                "controlPlaneEndpoint {:?} {problem}",
                gce.control_plane_endpoint
            ),
        );
    }
    let api = &gce.kube_api;
    let api_at = |field: &str| f.value(&[base[0], base[1], "kubeApi", field]);
    match (&api.kubeconfig, api.in_cluster) {
        (Some(_), true) => d.push(
            f.key(&[base[0], base[1], "kubeApi", "inCluster"]),
            "kubeApi takes one of `kubeconfig` (a file, optionally with `context`) or \
             `inCluster: true` (slicectl runs in that cluster), not both",
        ),
        (None, false) => d.push(
            f.value(&[base[0], base[1], "kubeApi"]),
            "kubeApi needs one of `kubeconfig: PATH` (optionally with `context`) or `inCluster: true`",
        ),
        (Some(path), false) if path.trim().is_empty() => d.push(
            api_at("kubeconfig"),
            "kubeconfig must be a path, e.g. ~/.kube/config",
        ),
        _ => {}
    }
    if let Some(context) = &api.context {
        if api.kubeconfig.is_none() {
            d.push(
                f.key(&[base[0], base[1], "kubeApi", "context"]),
                "context names a context of `kubeconfig`; it is only allowed with `kubeconfig`",
            );
        } else if context.trim().is_empty() {
            d.push(
                api_at("context"),
                "context must not be empty; omit it to use the kubeconfig's current context",
            );
        }
    }
    if let Err(problem) = parse_network(&gce.network) {
        d.push(
            f.value(&[base[0], base[1], "network"]),
            format!("network {:?} {problem}", gce.network),
        );
    }
    if let Some(subnetwork) = &gce.subnetwork {
        let at = f.value(&[base[0], base[1], "subnetwork"]);
        match parse_subnetwork(subnetwork) {
            Err(problem) => d.push(at, format!("subnetwork {subnetwork:?} {problem}")),
            Ok(SubnetworkRef {
                region: Some(region),
                ..
            }) if is_zone(&spec.zone) && region != region_of(&spec.zone) => d.push(
                at,
                format!(
                    "subnetwork {subnetwork:?} is in region {region}, but the VMs go to zone {} \
                     (region {}); a VM's subnetwork must be in its region",
                    spec.zone,
                    region_of(&spec.zone)
                ),
            ),
            Ok(_) => {}
        }
    }
    if let Err(problem) = container_image_problem(&gce.device_plugin.image) {
        d.push(
            f.value(&[base[0], base[1], "devicePlugin", "image"]),
            format!("devicePlugin.image {:?} {problem}", gce.device_plugin.image),
        );
    }
}

/// The backend-gce checks of a slice: the `gce` block is there exactly when
/// the backend is gce, and, with a target (valid reference) and a shape
/// (valid accelerator and topology), every field of it.
pub(super) fn check_gce_slice(
    d: &mut Diags<'_>,
    f: &FieldIndex,
    spec: &SliceSpec,
    target: Option<&TargetSpec>,
    shape: Option<&catalog::SliceShape>,
) -> bool {
    let before = d.0.len();
    let gce = match (spec.backend, &spec.gce) {
        (Backend::Gke, Some(_)) => {
            d.push(
                f.key(&["spec", "gce"]),
                "`gce` settings are only for backend gce; a gke slice's nodes are set by GKE \
                 (remove `gce`, or set `backend: gce`)",
            );
            return false;
        }
        (Backend::Gke, None) => return true,
        (Backend::Gce, None) => {
            d.push(
                f.value(&["spec", "backend"]),
                "backend gce needs a `gce` block: `image` and `bootstrap: {kubeadm: {kubernetesVersion: \"1.N\"}}`, \
                 or `instanceTemplate` (your own template)",
            );
            return false;
        }
        (Backend::Gce, Some(gce)) => gce,
    };
    let at = |path: &[&str]| {
        let mut full = vec!["spec", "gce"];
        full.extend_from_slice(path);
        f.value(&full)
    };
    let key_at = |path: &[&str]| {
        let mut full = vec!["spec", "gce"];
        full.extend_from_slice(path);
        f.key(&full)
    };
    check_pinned_names(d, spec, gce, shape, &at);
    match (&gce.bootstrap, &gce.instance_template) {
        (Some(_), Some(_)) => d.push(
            key_at(&["instanceTemplate"]),
            "give one of `bootstrap` (slicectl renders the template and joins the VMs with kubeadm) \
             and `instanceTemplate` (your own template; slicectl does not bootstrap its VMs), not both",
        ),
        (None, None) => d.push(
            f.key(&["spec", "gce"]),
            "`gce` needs one of `bootstrap: {kubeadm: {kubernetesVersion: \"1.N\"}}` and \
             `instanceTemplate: projects/P/global/instanceTemplates/NAME`",
        ),
        _ => {}
    }
    if let Some(bootstrap) = &gce.bootstrap {
        check_bootstrapped(d, f, spec, gce, target, shape);
        let version = &bootstrap.kubeadm.kubernetes_version;
        if let Err(problem) = kubernetes_minor(version) {
            d.push(
                at(&["bootstrap", "kubeadm", "kubernetesVersion"]),
                format!("kubernetesVersion {version:?} {problem}"),
            );
        }
    }
    if let (None, Some(template)) = (&gce.bootstrap, &gce.instance_template) {
        check_own_template(d, f, spec, gce, template, target);
    }
    if spec.capacity.kind == CapacityType::FlexStart {
        match &spec.capacity.max_run_duration {
            None => d.push(
                f.value(&["spec", "capacity", "type"]),
                "flex-start on backend gce needs `capacity.maxRunDuration` (10m to 168h): Compute \
                 Engine deletes FLEX_START VMs at the end of their run duration, which it requires",
            ),
            Some(text) => {
                if let Ok(dur) = parse_duration(text)
                    && dur < MIN_GCE_RUN_DURATION
                {
                    d.push(
                        f.value(&["spec", "capacity", "maxRunDuration"]),
                        format!(
                            "maxRunDuration {text:?} is shorter than 10m, the least Compute Engine \
                             accepts for flex-start VMs"
                        ),
                    );
                }
            }
        }
    }
    d.0.len() == before
}

/// `gce.migName` and `gce.workloadPolicyName`: the names of an adopted
/// replica's MIG and policy (see docs/adopt.md), for the one replica of a
/// slice, and a policy only where the slice has one (multi-host).
fn check_pinned_names(
    d: &mut Diags<'_>,
    spec: &SliceSpec,
    gce: &GceSlice,
    shape: Option<&catalog::SliceShape>,
    at: &dyn Fn(&[&str]) -> Location,
) {
    let pinned = [
        ("migName", gce.mig_name.as_deref(), names::MIG_NAME_MAX),
        (
            "workloadPolicyName",
            gce.workload_policy_name.as_deref(),
            names::COMPUTE_NAME_MAX,
        ),
    ];
    for (field, name, max) in pinned {
        let Some(name) = name else { continue };
        if let Some(problem) = gce_name_problem(name, max) {
            d.push(at(&[field]), format!("{field} {name:?} {problem}"));
        } else if spec.replicas != 1 {
            d.push(
                at(&[field]),
                format!(
                    "{field} names the resource of a slice's one replica (an adopted MIG's, which \
                     cannot be renamed in place); with replicas: {} each replica needs its own name: \
                     remove {field} (replicas get <slice>-<N> names), or set replicas: 1",
                    spec.replicas
                ),
            );
        }
    }
    if gce.workload_policy_name.is_some() && shape.is_some_and(|s| s.hosts <= 1) {
        d.push(
            at(&["workloadPolicyName"]),
            "workloadPolicyName names a multi-host slice's workload policy; a single-host slice \
             has none (its MIG is not placed by a policy): remove it",
        );
    }
}

/// `gce.bootstrap`: slicectl renders the template: image, boot disk and
/// extra metadata are its inputs.
pub(super) fn check_bootstrapped(
    d: &mut Diags<'_>,
    f: &FieldIndex,
    spec: &SliceSpec,
    gce: &GceSlice,
    target: Option<&TargetSpec>,
    shape: Option<&catalog::SliceShape>,
) {
    match &gce.image {
        None => d.push(
            f.key(&["spec", "gce", "bootstrap"]),
            "a bootstrapped gce slice needs `gce.image`, e.g. \
             projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-tpu7x",
        ),
        Some(image) => {
            if let Err(problem) = parse_image(image) {
                d.push(
                    f.value(&["spec", "gce", "image"]),
                    format!("image {image:?} {problem}"),
                );
            }
        }
    }
    if let Some(size) = gce.boot_disk.size_gb
        && !BOOT_DISK_SIZE_GB.contains(&size)
    {
        d.push(
            f.value(&["spec", "gce", "bootDisk", "sizeGb"]),
            format!(
                "bootDisk.sizeGb {size} is out of range; expected {}..={}",
                BOOT_DISK_SIZE_GB.start(),
                BOOT_DISK_SIZE_GB.end()
            ),
        );
    }
    // The disk type in effect: the slice's, else the target's default.
    let (disk_type, from_target) = match (&gce.boot_disk.kind, target) {
        (Some(t), _) => (Some(t.as_str()), false),
        (None, Some(t)) => (t.node_defaults.disk_type.as_deref(), true),
        (None, None) => (None, false),
    };
    if let (Some(disk_type), Some(shape)) = (disk_type, shape)
        && let Some(support) = shape.generation.gce
        && !support.boot_disk_types.contains(&disk_type)
    {
        let whence = if from_target {
            format!(
                " (the Target {:?}'s nodeDefaults.diskType; set gce.bootDisk.type to override it)",
                spec.target
            )
        } else {
            String::new()
        };
        d.push(
            f.value(&["spec", "gce", "bootDisk", "type"]),
            format!(
                "boot disk type {disk_type:?}{whence} cannot boot a {} VM; expected: {} ({})",
                shape.generation.display,
                support.boot_disk_types.join(", "),
                catalog::GCE_SOURCES[2].url
            ),
        );
    }
    let mut total = 0usize;
    for (key, value) in &gce.metadata {
        total += key.len() + value.len();
        let key_at = f.key(&["spec", "gce", "metadata", key]);
        if let Some(problem) = metadata_key_problem(key) {
            d.push(key_at, format!("metadata key {key:?} {problem}"));
        }
        if value.len() > MAX_METADATA_VALUE_BYTES {
            d.push(
                f.value(&["spec", "gce", "metadata", key]),
                format!(
                    "metadata value of {key:?} is {} bytes; GCE allows at most {MAX_METADATA_VALUE_BYTES}",
                    value.len()
                ),
            );
        }
    }
    if total > MAX_USER_METADATA_BYTES {
        d.push(
            f.key(&["spec", "gce", "metadata"]),
            format!(
                "metadata keys and values total {total} bytes; at most {MAX_USER_METADATA_BYTES} \
                 (GCE allows 512 KiB per VM, and slicectl's own items need the rest)"
            ),
        );
    }
}

/// `gce.instanceTemplate`: the template carries image, disk, metadata and
/// scheduling itself; slicectl checks it when it reads it (tpu-operator's
/// rules: a TPU machine type, TERMINATE on host maintenance, a provisioning
/// model and termination action that fit).
pub(super) fn check_own_template(
    d: &mut Diags<'_>,
    f: &FieldIndex,
    spec: &SliceSpec,
    gce: &GceSlice,
    template: &str,
    target: Option<&TargetSpec>,
) {
    let own = "with `instanceTemplate`: the template has its own";
    if gce.image.is_some() {
        d.push(
            f.key(&["spec", "gce", "image"]),
            format!("`image` is not allowed {own} boot image; remove it"),
        );
    }
    if gce.boot_disk != Default::default() {
        d.push(
            f.key(&["spec", "gce", "bootDisk"]),
            format!("`bootDisk` is not allowed {own} disks; remove it"),
        );
    }
    if !gce.metadata.is_empty() {
        d.push(
            f.key(&["spec", "gce", "metadata"]),
            format!("`metadata` is not allowed {own} metadata; remove it"),
        );
    }
    if spec.capacity != Default::default() {
        d.push(
            f.key(&["spec", "capacity"]),
            format!(
                "`capacity` is not allowed {own} scheduling (provisioningModel, reservation); \
                 slicectl checks it when it reads the template"
            ),
        );
    }
    let at = f.value(&["spec", "gce", "instanceTemplate"]);
    match parse_instance_template(template) {
        Err(problem) => d.push(at, format!("instanceTemplate {template:?} {problem}")),
        Ok(t) => {
            if let Some(target) = target {
                if t.project != target.project {
                    d.push(
                        at.clone(),
                        format!(
                            "instanceTemplate {template:?} is in project {}, but the MIG is created in \
                             the Target's project {}; a MIG uses a template of its own project",
                            t.project, target.project
                        ),
                    );
                }
                if let Some(region) = &t.region
                    && is_zone(&target.zone)
                    && region != region_of(&target.zone)
                {
                    d.push(
                        at,
                        format!(
                            "instanceTemplate {template:?} is a regional template of {region}, but the \
                             MIG is in zone {} (region {}); use a global template or one of that region",
                            target.zone,
                            region_of(&target.zone)
                        ),
                    );
                }
            }
        }
    }
}

/// Why a node label key cannot go on a `gce` slice's nodes, if it cannot.
/// The kubelet registers them (`--node-labels`), so under NodeRestriction
/// only keys a node may set on itself: no `kubernetes.io` / `k8s.io`
/// namespace except `node.kubernetes.io` and `kubelet.kubernetes.io` (and
/// their subdomains), and none of the labels the kubelet sets itself; not
/// slicectl's own prefix, nor GKE's TPU labels (slicectl sets those).
pub fn gce_reserved_label_problem(key: &str) -> Option<String> {
    if key.starts_with(RESERVED_LABEL_PREFIX) {
        return Some(format!(
            "uses the prefix {RESERVED_LABEL_PREFIX} owned by slicectl (it stamps its own labels there)"
        ));
    }
    if key.starts_with(GKE_LABEL_PREFIX) {
        return Some(format!(
            "uses the prefix {GKE_LABEL_PREFIX}; slicectl sets the TPU labels (accelerator, topology, \
             chip count) from the spec"
        ));
    }
    let (prefix, _) = key.split_once('/')?;
    let in_namespace = |ns: &str| prefix == ns || prefix.ends_with(&format!(".{ns}"));
    if !in_namespace("kubernetes.io") && !in_namespace("k8s.io") {
        return None;
    }
    const KUBELET_SETS: &[&str] = &["node.kubernetes.io/instance-type"];
    if KUBELET_SETS.contains(&key) {
        return Some("is set by the kubelet itself".into());
    }
    if in_namespace("node.kubernetes.io") || in_namespace("kubelet.kubernetes.io") {
        return None;
    }
    Some(
        "is in a kubernetes.io/k8s.io namespace a node may not label itself with (NodeRestriction); \
         the kubelet registers a gce slice's labels, so use your own prefix, or node.kubernetes.io/ \
         or kubelet.kubernetes.io/"
            .into(),
    )
}

/// Why `key` is not an extra metadata key of a bootstrapped `gce` slice, if
/// it is not: GCE's key syntax, and not a key slicectl writes.
pub fn metadata_key_problem(key: &str) -> Option<String> {
    if key.is_empty() || key.len() > MAX_METADATA_KEY_LEN {
        return Some(format!(
            "must be 1 to {MAX_METADATA_KEY_LEN} characters long"
        ));
    }
    if !key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Some("may contain only letters, digits, '-' and '_' (GCE metadata keys)".into());
    }
    if RESERVED_METADATA_KEYS.contains(&key) || key.starts_with(RESERVED_METADATA_PREFIX) {
        return Some(format!(
            "is written by slicectl itself (it owns {} and every key starting {RESERVED_METADATA_PREFIX})",
            RESERVED_METADATA_KEYS.join(", ")
        ));
    }
    if key == "startup-script-url" {
        return Some(
            "would replace slicectl's `startup-script` (GCE runs the URL's script instead), so the \
             VMs would never join; bring your own `instanceTemplate` to run your own bootstrap"
                .into(),
        );
    }
    None
}

/// Parses a Kubernetes minor version `1.N` (N ≥ [`MIN_KUBERNETES_MINOR`]) into N.
pub fn kubernetes_minor(version: &str) -> Result<u32, String> {
    let rest = version.strip_prefix('v').unwrap_or(version);
    let parts: Vec<&str> = rest.split('.').collect();
    let number = |s: &str| {
        (!s.is_empty() && s.len() <= 3 && s.chars().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    match parts.as_slice() {
        [major, minor] if *major == "1" && !version.starts_with('v') => match number(minor) {
            Some(n) if n >= MIN_KUBERNETES_MINOR => Ok(n),
            Some(_) => Err(format!(
                "is older than 1.{MIN_KUBERNETES_MINOR}, the oldest minor slicectl bootstraps \
                 (kubeadm's v1beta4 configuration)"
            )),
            None => Err("is not a minor version; expected 1.N, e.g. \"1.36\"".into()),
        },
        [major, minor, _patch, ..] if *major == "1" && number(minor).is_some() => Err(format!(
            "is a patch version; give the minor, \"1.{minor}\": the VMs install the newest patch \
             of it from pkgs.k8s.io"
        )),
        _ => Err("is not a Kubernetes minor version; expected 1.N, e.g. \"1.36\"".into()),
    }
}

/// Parses a control-plane endpoint `HOST:PORT` (IPv4, bracketed IPv6, or a
/// DNS name; port 1–65535) into host and port.
pub fn parse_endpoint(endpoint: &str) -> Result<(String, u16), String> {
    let expected =
        "expected HOST:PORT, e.g. 10.128.0.2:6443, [fd00::2]:6443 or cp.example.internal:6443";
    let (host, port) = if let Some(rest) = endpoint.strip_prefix('[') {
        let (ip, port) = rest
            .split_once("]:")
            .ok_or_else(|| format!("is not HOST:PORT; {expected}"))?;
        if ip.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("has an invalid IPv6 address {ip:?}; {expected}"));
        }
        (ip.to_string(), port)
    } else {
        let (host, port) = endpoint
            .rsplit_once(':')
            .ok_or_else(|| format!("has no port; {expected}"))?;
        if host.contains(':') {
            return Err(format!("has an IPv6 address without brackets; {expected}"));
        }
        let ipv4_like = host.chars().all(|c| c.is_ascii_digit() || c == '.');
        if ipv4_like {
            if host.parse::<std::net::Ipv4Addr>().is_err() {
                return Err(format!("has an invalid IPv4 address {host:?}; {expected}"));
            }
        } else if !is_dns_name(host) {
            return Err(format!(
                "has an invalid host {host:?} (not an IP address or DNS name); {expected}"
            ));
        }
        (host.to_string(), port)
    };
    match port.parse::<u16>() {
        Ok(p) if p > 0 && port.chars().all(|c| c.is_ascii_digit()) => Ok((host, p)),
        _ => Err(format!(
            "has an invalid port {port:?} (1 to 65535); {expected}"
        )),
    }
}

/// Whether `s` is a DNS name: dot-separated labels of letters, digits and
/// '-' (case-insensitive), at most 253 characters.
pub(super) fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.')
            .all(|label| dns_label_problem(&label.to_ascii_lowercase(), 63).is_none())
}

/// The partial path (`projects/…`) of a compute resource given as a full
/// URL (`https://www.googleapis.com/compute/v1/projects/…` or
/// `https://compute.googleapis.com/compute/v1/projects/…`, any API
/// version) or as a partial path already.
pub(super) fn compute_partial(s: &str) -> Result<&str, String> {
    if !s.starts_with("https://") {
        return Ok(s);
    }
    for host in [
        "https://www.googleapis.com/compute/",
        "https://compute.googleapis.com/compute/",
    ] {
        if let Some(rest) = s.strip_prefix(host) {
            for version in ["v1/", "beta/", "alpha/"] {
                if let Some(partial) = rest.strip_prefix(version) {
                    return Ok(partial);
                }
            }
        }
    }
    Err(
        "is not a Compute Engine URL; expected https://www.googleapis.com/compute/v1/projects/… \
         or a partial path projects/…"
            .into(),
    )
}

/// `projects/P/<rest>` → (P, rest segments), P a valid project id.
pub(super) fn project_path(partial: &str) -> Option<(&str, Vec<&str>)> {
    let mut segs = partial.split('/');
    if segs.next() != Some("projects") {
        return None;
    }
    let project = segs.next()?;
    project_id_problem(project)
        .is_none()
        .then(|| (project, segs.collect()))
}

/// A VPC network: a name, or `projects/P/global/networks/N` (partial or URL).
pub fn parse_network(network: &str) -> Result<String, String> {
    let expected = "expected a network name (e.g. default) or projects/P/global/networks/NAME";
    if gce_name_problem(network, 63).is_none() {
        return Ok(network.to_string());
    }
    let partial = compute_partial(network)?;
    match project_path(partial) {
        Some((_, rest)) if matches!(rest.as_slice(), ["global", "networks", n] if gce_name_problem(n, 63).is_none()) => {
            Ok(partial.to_string())
        }
        _ => Err(format!("is not a GCE network; {expected}")),
    }
}

/// A subnetwork as written: its name, and its region when given as a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetworkRef {
    /// The subnetwork's name.
    pub name: String,
    /// Its region (paths and URLs only).
    pub region: Option<String>,
    /// The partial path `projects/P/regions/R/subnetworks/S` (paths and URLs only).
    pub path: Option<String>,
}

/// A subnetwork: a name, or `projects/P/regions/R/subnetworks/S` (partial or URL).
pub fn parse_subnetwork(subnetwork: &str) -> Result<SubnetworkRef, String> {
    let expected = "expected a subnetwork name or projects/P/regions/REGION/subnetworks/NAME";
    if gce_name_problem(subnetwork, 63).is_none() {
        return Ok(SubnetworkRef {
            name: subnetwork.to_string(),
            region: None,
            path: None,
        });
    }
    let partial = compute_partial(subnetwork)?;
    match project_path(partial) {
        Some((_, rest)) => match rest.as_slice() {
            ["regions", region, "subnetworks", name]
                if is_region(region) && gce_name_problem(name, 63).is_none() =>
            {
                Ok(SubnetworkRef {
                    name: name.to_string(),
                    region: Some(region.to_string()),
                    path: Some(partial.to_string()),
                })
            }
            _ => Err(format!("is not a GCE subnetwork; {expected}")),
        },
        None => Err(format!("is not a GCE subnetwork; {expected}")),
    }
}

/// A boot image: an image or an image family of a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// The image's project.
    pub project: String,
    /// `Some(family)` for `…/images/family/F`; `None` for a named image.
    pub family: Option<String>,
    /// The image (or family) name.
    pub name: String,
}

impl ImageRef {
    /// The partial path GCE takes as `initializeParams.sourceImage`.
    pub fn source_image(&self) -> String {
        match &self.family {
            Some(family) => format!("projects/{}/global/images/family/{family}", self.project),
            None => format!("projects/{}/global/images/{}", self.project, self.name),
        }
    }
}

/// An image: `projects/P/global/images/NAME` or
/// `projects/P/global/images/family/FAMILY` (partial or URL).
pub fn parse_image(image: &str) -> Result<ImageRef, String> {
    let expected = "expected projects/P/global/images/NAME or projects/P/global/images/family/FAMILY, \
                    e.g. projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-tpu7x";
    let partial = compute_partial(image)?;
    let Some((project, rest)) = project_path(partial) else {
        return Err(format!("is not an image path; {expected}"));
    };
    let ok = |n: &str| gce_name_problem(n, 63).is_none();
    match rest.as_slice() {
        ["global", "images", "family", family] if ok(family) => Ok(ImageRef {
            project: project.to_string(),
            family: Some(family.to_string()),
            name: family.to_string(),
        }),
        ["global", "images", name] if ok(name) => Ok(ImageRef {
            project: project.to_string(),
            family: None,
            name: name.to_string(),
        }),
        _ => Err(format!("is not an image path; {expected}")),
    }
}

/// An instance template the user brings: global or regional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateRef {
    /// Its project.
    pub project: String,
    /// `Some(region)` for a regional template.
    pub region: Option<String>,
    /// Its name.
    pub name: String,
}

impl TemplateRef {
    /// The partial path a MIG takes as `instanceTemplate`.
    pub fn path(&self) -> String {
        match &self.region {
            Some(region) => format!(
                "projects/{}/regions/{region}/instanceTemplates/{}",
                self.project, self.name
            ),
            None => format!(
                "projects/{}/global/instanceTemplates/{}",
                self.project, self.name
            ),
        }
    }
}

/// An instance template: `projects/P/global/instanceTemplates/NAME` or
/// `projects/P/regions/R/instanceTemplates/NAME` (partial or URL).
pub fn parse_instance_template(template: &str) -> Result<TemplateRef, String> {
    let expected = "expected projects/P/global/instanceTemplates/NAME or \
                    projects/P/regions/REGION/instanceTemplates/NAME (or its URL)";
    let partial = compute_partial(template)?;
    let Some((project, rest)) = project_path(partial) else {
        return Err(format!("is not an instance template path; {expected}"));
    };
    let ok = |n: &str| gce_name_problem(n, 63).is_none();
    let (region, name) = match rest.as_slice() {
        ["global", "instanceTemplates", name] if ok(name) => (None, *name),
        ["regions", region, "instanceTemplates", name] if is_region(region) && ok(name) => {
            (Some(region.to_string()), *name)
        }
        _ => return Err(format!("is not an instance template path; {expected}")),
    };
    Ok(TemplateRef {
        project: project.to_string(),
        region,
        name: name.to_string(),
    })
}

/// Checks that `image` is a plausible container image reference
/// (`[registry[:port]/]path[:tag][@sha256:hex]`); the error says why not.
pub fn container_image_problem(image: &str) -> Result<(), String> {
    let expected = "expected e.g. gcr.io/gke-release/tpu-device-plugin:1.35.7-gke.0";
    if image.is_empty() || image.len() > 4096 || image.chars().any(|c| c.is_whitespace()) {
        return Err(format!("is not an image reference; {expected}"));
    }
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    if let Some(digest) = digest {
        let valid = digest.strip_prefix("sha256:").is_some_and(|hex| {
            hex.len() == 64
                && hex
                    .chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        });
        if !valid {
            return Err(format!(
                "has an invalid digest {digest:?} (sha256: and 64 hex digits); {expected}"
            ));
        }
    }
    // A tag is after the last ':' that follows the last '/'.
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rsplit_once(':') {
        Some((_, tag)) => (&rest[..rest.len() - tag.len() - 1], Some(tag)),
        None => (rest, None),
    };
    if let Some(tag) = tag {
        let valid = !tag.is_empty()
            && tag.len() <= 128
            && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !valid {
            return Err(format!("has an invalid tag {tag:?}; {expected}"));
        }
    }
    let mut components: Vec<&str> = name.split('/').collect();
    // The first component is a registry host when it has a '.' or ':' or is localhost.
    if components.len() > 1 {
        let first = components[0];
        if first.contains('.') || first.contains(':') || first == "localhost" {
            let host = first.split(':').next().unwrap_or(first);
            if !is_dns_name(host) {
                return Err(format!("has an invalid registry {first:?}; {expected}"));
            }
            components.remove(0);
        }
    }
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.starts_with(is_lower_alnum)
            && c.ends_with(is_lower_alnum)
            && c.chars().all(|ch| is_lower_alnum(ch) || "._-".contains(ch))
    };
    if components.is_empty() || !components.iter().all(|c| component_ok(c)) {
        return Err(format!(
            "has an invalid repository path {name:?} (lowercase letters, digits, '.', '_', '-'); {expected}"
        ));
    }
    Ok(())
}
