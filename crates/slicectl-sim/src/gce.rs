//! Compute Engine's self-managed TPU path: global instance templates, zonal
//! managed instance groups (MIGs, BULK mode with workload policies) and the
//! VMs they create, with their metadata (fingerprints, `setMetadata`), a
//! metadata server per VM (`sim::metadata`), their node agent once RUNNING
//! (`sim::kubelet`) and guest attributes.
//!
//! Timeline on the simulator's clock (latency L): a template insert is a
//! global operation of length L, the template exists when it is DONE. A MIG
//! insert is a zonal operation of length L ("DONE once the group exists, not
//! its VMs", gcp-api.md §2.1); then the MIG creates all its VMs at once,
//! each PROVISIONING, STAGING after L/2 and RUNNING after L. BULK
//! (`targetSizePolicy.mode`) is refused unless the template is
//! reservation-bound or flex-start, as Google refuses it. On a stockout (a
//! whole zone's, so INDIVIDUAL MIGs get no VM either) no VM is created and
//! the MIG reports `ZONE_RESOURCE_POOL_EXHAUSTED` until the stockout ends:
//! in `listErrors` always, in `status.bulkInstanceOperation` for BULK, in
//! each managed instance's `lastAttempt` for INDIVIDUAL. A MIG delete stops its VMs; the operation is DONE
//! after L, when the VMs and the group are gone.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::aggregated;
use super::compute::{
    NAME, NAME_RE, ZONE, list_body, matches, new_op, not_found, paginate, replayed,
};
use super::errors::ApiError;
use super::metadata::{GuestAttributes, MetadataServer, VmMetadata};
use super::operations::{ComputeEffect, Scope, project_number};
use super::server::Ctx;
use super::state::Inner;

/// The stockout message of a zone (gcp-api.md §3.3, the GCE operation and
/// MIG error text, two spaces before "Try" as Google sends it).
fn stockout_message(project: &str, zone: &str) -> String {
    format!(
        "The zone 'projects/{project}/zones/{zone}' does not have enough resources available to \
         fulfill the request.  Try a different zone, or try again later."
    )
}

/// The code MIGs report for a stockout (gcp-api.md §3.3).
const STOCKOUT_CODE: &str = "ZONE_RESOURCE_POOL_EXHAUSTED";

/// Node agents report heartbeats this often.
const HEARTBEAT: Duration = Duration::from_secs(5);

// ---- records ----------------------------------------------------------------

/// An instance template as stored.
#[derive(Debug, Clone)]
pub(crate) struct TemplateRec {
    /// `InstanceTemplate` JSON without `selfLink`.
    pub spec: Value,
    /// False while its insert operation runs (not visible yet).
    pub ready: bool,
}

/// Why a MIG's VMs are not created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stockout {
    /// The zone is in `FaultConfig::stockout_zones`.
    Zone,
    /// Drawn against `FaultConfig::stockout_rate`; lasts while the rate is
    /// above zero.
    Drawn,
    /// The zone is in `FaultConfig::zone_vm_limits` with fewer VMs than
    /// the MIG needs; lasts while that holds.
    Limited,
    /// The region's quota (`FaultConfig::quotas`) cannot hold the MIG's
    /// VMs; lasts while that holds (`sim::quotas::mig_quota_error`).
    Quota,
}

/// A MIG as stored.
#[derive(Debug, Clone)]
pub(crate) struct MigRec {
    pub project: String,
    pub zone: String,
    pub name: String,
    /// The normalised request plus `id`, `kind`, `creationTimestamp`,
    /// `fingerprint` (links are rendered per request).
    pub spec: Value,
    /// `projects/P/global/instanceTemplates/T`.
    pub template: String,
    /// `projects/P/regions/R/resourcePolicies/N`.
    pub policy: Option<String>,
    /// The workload policy's accelerator topology.
    pub topology: Option<String>,
    pub target_size: u32,
    pub bulk: bool,
    /// False while its insert operation runs (not visible yet).
    pub ready: bool,
    /// Decided at insert, effective once the group exists.
    pub stockout: Option<Stockout>,
    /// When the last creation attempt failed.
    pub error_time: Option<jiff::Timestamp>,
    /// The names of its VMs (known before the VMs exist).
    pub members: Vec<String>,
    /// Its VMs exist (created at once).
    pub created: bool,
    pub deleting: bool,
}

/// What runs for one VM: its metadata server, then its node agent; dropping
/// it stops both (the VM is gone).
#[derive(Debug)]
pub(crate) struct VmRuntime {
    meta: watch::Sender<VmMetadata>,
    /// `Some(node_agents)` once RUNNING.
    running: watch::Sender<Option<bool>>,
    guest: GuestAttributes,
    addr: Arc<OnceLock<SocketAddr>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for VmRuntime {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A VM as stored.
#[derive(Debug)]
pub(crate) struct VmRec {
    pub project: String,
    pub zone: String,
    pub name: String,
    pub id: String,
    pub machine_type: String,
    /// The template's `properties` (labels, scheduling, network interfaces, …).
    pub properties: Value,
    /// Metadata items in order.
    pub items: Vec<(String, String)>,
    pub fingerprint: [u8; 8],
    /// PROVISIONING, STAGING, RUNNING, STOPPING.
    pub status: &'static str,
    pub created_wall: jiff::Timestamp,
    pub staging_at: Instant,
    pub running_at: Instant,
    pub runtime: Option<VmRuntime>,
}

impl VmRec {
    fn metadata(&self) -> VmMetadata {
        VmMetadata {
            project_id: self.project.clone(),
            numeric_project_id: project_number(&self.project),
            zone: self.zone.clone(),
            name: self.name.clone(),
            id: self.id.clone(),
            machine_type: self.machine_type.clone(),
            attributes: self.items.iter().cloned().collect(),
        }
    }

    /// The metadata server's address, once it listens.
    pub fn metadata_host(&self) -> Option<SocketAddr> {
        self.runtime.as_ref().and_then(|r| r.addr.get().copied())
    }
}

// ---- keys and links ---------------------------------------------------------

pub(crate) fn template_key(project: &str, name: &str) -> String {
    format!("projects/{project}/global/instanceTemplates/{name}")
}

pub(crate) fn mig_key(project: &str, zone: &str, name: &str) -> String {
    format!("projects/{project}/zones/{zone}/instanceGroupManagers/{name}")
}

pub(crate) fn vm_key(project: &str, zone: &str, name: &str) -> String {
    format!("projects/{project}/zones/{zone}/instances/{name}")
}

/// The `projects/…` path of a full URL (any host and version) or a partial
/// one; `scope_prefix` completes a path relative to the project
/// (`global/…`, `regions/…`, `zones/…`).
fn resource_path(project: &str, link: &str) -> Option<String> {
    if let Some(i) = link.find("projects/") {
        let at_segment = i == 0 || link[..i].ends_with('/');
        if at_segment {
            return Some(link[i..].trim_end_matches('/').to_string());
        }
    }
    if ["global/", "regions/", "zones/"]
        .iter()
        .any(|p| link.starts_with(p))
    {
        return Some(format!("projects/{project}/{}", link.trim_end_matches('/')));
    }
    None
}

fn invalid_field(field: &str, value: &str, why: &str) -> ApiError {
    ApiError::invalid(
        "invalid",
        format!("Invalid value for field '{field}': '{value}'. {why}"),
    )
}

fn check_name(field: &str, name: &str) -> Result<(), ApiError> {
    if matches(&NAME, name) {
        Ok(())
    } else {
        Err(invalid_field(
            field,
            name,
            &format!("Must be a match of regex '{NAME_RE}'"),
        ))
    }
}

fn check_zone(project: &str, zone: &str) -> Result<(), ApiError> {
    if matches(&ZONE, zone) {
        Ok(())
    } else {
        Err(not_found(&format!("projects/{project}/zones/{zone}")))
    }
}

/// A fresh fingerprint: 8 random bytes (gcp-api.md §2.5: canonical
/// URL-safe base64 of opaque bytes).
fn new_fingerprint(inner: &mut Inner) -> [u8; 8] {
    inner.random_u64().to_be_bytes()
}

fn encode_fingerprint(b: &[u8; 8]) -> String {
    URL_SAFE.encode(b)
}

/// Decodes a client's fingerprint, accepting both base64 alphabets (gcloud
/// and google-cloud-rust decode and re-encode it, gcp-api.md §2.5).
fn decode_fingerprint(s: &str) -> Option<Vec<u8>> {
    URL_SAFE.decode(s).ok().or_else(|| STANDARD.decode(s).ok())
}

/// 412 conditionNotMet with `message` unless the request's `fingerprint`
/// is there and decodes to `current`.
fn require_fingerprint(body: &Value, current: &[u8], message: &str) -> Result<(), ApiError> {
    let supplied = body
        .get("fingerprint")
        .and_then(Value::as_str)
        .and_then(decode_fingerprint);
    if supplied.as_deref() == Some(current) {
        Ok(())
    } else {
        Err(ApiError::condition_not_met(message.into()))
    }
}

// ---- instance templates -----------------------------------------------------

fn render_template(key: &str, rec: &TemplateRec, ctx: &Ctx) -> Value {
    let mut v = rec.spec.clone();
    v["selfLink"] = json!(format!("{}/{key}", ctx.compute_api()));
    v
}

/// `POST projects/P/global/instanceTemplates`.
pub(crate) fn insert_template(
    inner: &mut Inner,
    ctx: &Ctx,
    project: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    if let Some(op) = replayed(inner, ctx) {
        return Ok(op);
    }
    let name = body.get("name").and_then(Value::as_str).unwrap_or_default();
    check_name("resource.name", name)?;
    let key = template_key(project, name);
    // Compute takes the name when it accepts an insert: a second insert of
    // it, while the first one's operation still runs, is 409 alreadyExists,
    // and GET serves 404 until that operation is done (`ready` below). Two
    // public reports of that 409 against an insert still in flight:
    // kubernetes/kubernetes#22029 (gcloud retried an instance template
    // insert whose first attempt "returned an error but apparently
    // successfully created the template": "The resource '…' already
    // exists"), and piercefreeman/cloud-gpu-reliability#5 ("The GCE API
    // returns a 409 error on instances.insert when the name is already in
    // use … calling insert twice in the same second"). MIGs and resource
    // policies are held the same way.
    if inner.templates.contains_key(&key) {
        return Err(ApiError::already_exists(format!(
            "The resource '{key}' already exists"
        )));
    }
    // `properties.machineType` is required for instanceTemplates.insert
    // (compute v1 discovery, `annotations.required`).
    let machine = body
        .pointer("/properties/machineType")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if machine.is_empty() {
        return Err(ApiError::invalid(
            "required",
            "Required field 'resource.properties.machineType' not specified".into(),
        ));
    }
    check_metadata_items(
        body.pointer("/properties/metadata"),
        "resource.properties.metadata",
    )?;
    let id = inner.numeric_id().to_string();
    let mut spec = body.clone();
    spec["kind"] = json!("compute#instanceTemplate");
    spec["id"] = json!(id);
    spec["creationTimestamp"] = json!(jiff::Timestamp::now().to_string());
    if let Some(meta) = spec
        .pointer_mut("/properties/metadata")
        .and_then(Value::as_object_mut)
    {
        meta.insert("kind".into(), json!("compute#metadata"));
    }
    let scope = Scope::Global {
        project: project.into(),
    };
    // "This field only accepts a machine type name … If you use the machine
    // type full or partial URL … the request will result in an
    // `INTERNAL_ERROR`" (compute v1 discovery, InstanceProperties.machineType).
    // Here the insert operation fails with that code and no template is made.
    if machine.contains('/') {
        let op = new_op(
            inner,
            ctx,
            scope,
            "compute.instanceTemplates.insert",
            key.clone(),
            id,
            ComputeEffect::Fail {
                code: "INTERNAL_ERROR".into(),
                message: format!(
                    "Internal error. Invalid value for field 'resource.properties.machineType': \
                     '{machine}'. Only a machine type name is accepted, not a URL."
                ),
                http_status: 500,
                http_message: "INTERNAL SERVER ERROR".into(),
            },
        );
        return Ok(op);
    }
    inner
        .templates
        .insert(key.clone(), TemplateRec { spec, ready: false });
    tracing::debug!(template = %key, "sim: insert instance template");
    Ok(new_op(
        inner,
        ctx,
        scope,
        "compute.instanceTemplates.insert",
        key.clone(),
        id,
        ComputeEffect::TemplateReady { key },
    ))
}

/// `GET projects/P/global/instanceTemplates/T`.
pub(crate) fn get_template(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let key = template_key(project, name);
    match inner.templates.get(&key) {
        Some(rec) if rec.ready => Ok(render_template(&key, rec, ctx)),
        _ => Err(not_found(&key)),
    }
}

/// `GET projects/P/global/instanceTemplates` (paginated).
pub(crate) fn list_templates(inner: &Inner, ctx: &Ctx, project: &str) -> Result<Value, ApiError> {
    let prefix = template_key(project, "");
    let items: Vec<Value> = inner
        .templates
        .iter()
        .filter(|(k, rec)| k.starts_with(&prefix) && rec.ready)
        .map(|(k, rec)| render_template(k, rec, ctx))
        .collect();
    let (page, next) = paginate(ctx, items)?;
    let collection = format!("projects/{project}/global/instanceTemplates");
    Ok(list_body(
        "compute#instanceTemplateList",
        collection.clone(),
        format!("{}/{collection}", ctx.compute_api()),
        page,
        next,
    ))
}

/// `DELETE projects/P/global/instanceTemplates/T`. A template a MIG uses
/// cannot go: `Error 400: The instance_template resource
/// 'projects/P/global/instanceTemplates/T' is already being used by
/// 'projects/P/zones/Z/instanceGroupManagers/M', resourceInUseByAnotherResource`
/// (the form terraform-provider-google users report, e.g.
/// hashicorp/terraform-provider-google#1601, #6277).
pub(crate) fn delete_template(
    inner: &mut Inner,
    ctx: &Ctx,
    project: &str,
    name: &str,
) -> Result<Value, ApiError> {
    if let Some(op) = replayed(inner, ctx) {
        return Ok(op);
    }
    let key = template_key(project, name);
    let id = match inner.templates.get(&key) {
        Some(rec) if rec.ready => rec.spec["id"].as_str().unwrap_or_default().to_string(),
        _ => return Err(not_found(&key)),
    };
    if let Some(user) = inner
        .migs
        .iter()
        .find(|(_, m)| m.template == key)
        .map(|(k, _)| k)
    {
        return Err(ApiError::in_use(format!(
            "The instance_template resource '{key}' is already being used by '{user}'"
        )));
    }
    tracing::debug!(template = %key, "sim: delete instance template");
    Ok(new_op(
        inner,
        ctx,
        Scope::Global {
            project: project.into(),
        },
        "compute.instanceTemplates.delete",
        key.clone(),
        id,
        ComputeEffect::TemplateDelete { key },
    ))
}

/// Metadata keys match `[a-zA-Z0-9-_]{1,128}`, values are at most 256 KiB
/// and all of it less than 512 KB (compute v1 discovery, `Metadata.items`).
/// The messages are this simulator's, in compute's "Invalid value" form.
fn check_metadata_items(meta: Option<&Value>, field: &str) -> Result<(), ApiError> {
    let Some(items) = meta.and_then(|m| m.get("items")).and_then(Value::as_array) else {
        return Ok(());
    };
    let mut total = 0usize;
    let mut seen = std::collections::BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let key = item.get("key").and_then(Value::as_str).unwrap_or_default();
        let value = item
            .get("value")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let key_ok = !key.is_empty()
            && key.len() <= 128
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !key_ok {
            return Err(invalid_field(
                &format!("{field}.items[{i}].key"),
                key,
                "Must be a match of regex '[a-zA-Z0-9-_]{1,128}'",
            ));
        }
        if !seen.insert(key) {
            return Err(invalid_field(
                &format!("{field}.items[{i}].key"),
                key,
                "Duplicate metadata key.",
            ));
        }
        if value.len() > 262_144 {
            return Err(invalid_field(
                &format!("{field}.items[{i}].value"),
                &format!("<{} bytes>", value.len()),
                "Metadata values must be at most 262144 bytes.",
            ));
        }
        total += key.len() + value.len();
    }
    if total >= 512 * 1024 {
        return Err(ApiError::invalid(
            "invalid",
            format!(
                "Invalid value for field '{field}': the total size of the metadata ({total} bytes) must be less than 512 KB."
            ),
        ));
    }
    Ok(())
}

/// Called when a template insert completes.
pub(crate) fn template_ready(inner: &mut Inner, key: &str) {
    if let Some(t) = inner.templates.get_mut(key) {
        t.ready = true;
    }
}

/// Called when a template delete completes.
pub(crate) fn template_delete(inner: &mut Inner, key: &str) {
    inner.templates.remove(key);
}

// ---- MIGs ---------------------------------------------------------------------

/// `POST projects/P/zones/Z/instanceGroupManagers`.
pub(crate) fn insert_mig(
    inner: &mut Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    check_zone(project, zone)?;
    if let Some(op) = replayed(inner, ctx) {
        return Ok(op);
    }
    let name = body.get("name").and_then(Value::as_str).unwrap_or_default();
    check_name("resource.name", name)?;
    let key = mig_key(project, zone, name);
    // The name is held from the insert on (see `insert_template`): 409 for
    // a second insert while the first runs; GET and list skip it until it
    // is `ready`.
    if inner.migs.contains_key(&key) {
        return Err(ApiError::already_exists(format!(
            "The resource '{key}' already exists"
        )));
    }
    // `baseInstanceName`: "The maximum character length is 58 and the name
    // must comply with RFC1035" (compute v1 discovery); the MIG's name when
    // not given (gcloud sends the group name; tpu-operator sends none).
    let base = match body.get("baseInstanceName").and_then(Value::as_str) {
        Some(b) => {
            if b.len() > 58 || !matches(&NAME, b) {
                return Err(invalid_field(
                    "resource.baseInstanceName",
                    b,
                    "Must be a match of regex '[a-z](([-a-z0-9]{0,57})|([-a-z0-9]{0,51}-#{1,10}(\\[[0-9]{1,10}\\])?))'",
                ));
            }
            b.to_string()
        }
        None => name
            .chars()
            .take(58)
            .collect::<String>()
            .trim_end_matches('-')
            .to_string(),
    };
    // targetSize is required on insert (compute v1 discovery,
    // `annotations.required: compute.instanceGroupManagers.insert`).
    let Some(size) = body.get("targetSize").and_then(Value::as_i64) else {
        return Err(ApiError::invalid(
            "required",
            "Required field 'resource.targetSize' not specified".into(),
        ));
    };
    let target_size = u32::try_from(size).map_err(|_| {
        invalid_field(
            "resource.targetSize",
            &size.to_string(),
            "Must be greater than or equal to 0.",
        )
    })?;
    let link = body
        .get("instanceTemplate")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if link.is_empty() {
        return Err(ApiError::invalid(
            "required",
            "Required field 'resource.instanceTemplate' not specified".into(),
        ));
    }
    let template = resource_path(project, link)
        .filter(|p| p.split('/').nth(2) == Some("global") && p.split('/').count() == 5)
        .ok_or_else(|| invalid_field("resource.instanceTemplate", link, "The URL is malformed."))?;
    let machine = match inner.templates.get(&template) {
        Some(t) if t.ready => t
            .spec
            .pointer("/properties/machineType")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => return Err(not_found(&template)),
    };
    check_machine_type_in_zone(&machine, zone)?;
    let (policy, topology) =
        check_workload_policy(inner, project, zone, body, &machine, target_size)?;
    let bulk = body
        .pointer("/targetSizePolicy/mode")
        .and_then(Value::as_str)
        == Some("BULK");
    if bulk {
        check_bulk_provisioning_model(inner, &template)?;
    }
    let limited = inner
        .faults
        .config
        .zone_vm_limits
        .get(zone)
        .is_some_and(|&n| n < target_size);
    let over_quota = inner.templates.get(&template).is_some_and(|t| {
        super::quotas::mig_quota_error(inner, project, zone, &t.spec, target_size).is_some()
    });
    let stockout = if over_quota {
        Some(Stockout::Quota)
    } else if inner.faults.config.stockout_zones.iter().any(|z| z == zone) {
        Some(Stockout::Zone)
    } else if limited {
        Some(Stockout::Limited)
    } else if inner.faults.draw_mig_stockout(zone) {
        inner.stats.faults_injected += 1;
        Some(Stockout::Drawn)
    } else {
        None
    };
    let id = inner.numeric_id().to_string();
    let fingerprint = encode_fingerprint(&new_fingerprint(inner));
    let mut spec = body.clone();
    spec["kind"] = json!("compute#instanceGroupManager");
    spec["id"] = json!(id);
    spec["creationTimestamp"] = json!(jiff::Timestamp::now().to_string());
    spec["fingerprint"] = json!(fingerprint);
    spec["baseInstanceName"] = json!(base);
    spec["instanceTemplate"] = json!(template);
    if let Some(p) = &policy {
        spec["resourcePolicies"] = json!({"workloadPolicy": p});
    }
    if spec.get("listManagedInstancesResults").is_none() {
        spec["listManagedInstancesResults"] = json!("PAGELESS");
    }
    inner.migs.insert(
        key.clone(),
        MigRec {
            project: project.to_string(),
            zone: zone.to_string(),
            name: name.to_string(),
            spec,
            template,
            policy,
            topology,
            target_size,
            bulk,
            ready: false,
            stockout,
            error_time: None,
            members: Vec::new(),
            created: false,
            deleting: false,
        },
    );
    tracing::debug!(mig = %key, ?stockout, "sim: insert MIG");
    Ok(new_op(
        inner,
        ctx,
        Scope::Zone {
            project: project.into(),
            zone: zone.into(),
        },
        "compute.instanceGroupManagers.insert",
        key.clone(),
        id,
        ComputeEffect::MigReady { key },
    ))
}

/// The provisioning models BULK mode takes: "Bulk mode in MIGs is only
/// supported with instance templates that specify either a
/// reservation-bound or flex-start provisioning model" (Compute Engine,
/// *Create a MIG that uses the bulk mode*,
/// docs.cloud.google.com/compute/docs/instance-groups/bulk-create-instances-in-mig).
const BULK_MODELS: [&str; 2] = ["RESERVATION_BOUND", "FLEX_START"];

/// Refuses `targetSizePolicy.mode: BULK` with a template whose
/// `scheduling.provisioningModel` is not one of [`BULK_MODELS`] (STANDARD,
/// the default, and SPOT). No public page quotes the error Compute Engine
/// returns for it; this is the closest documented shape, compute's 400
/// `invalid` "Invalid value for field '…': '…'. …" (the answer it gives for
/// a field whose value the request's other fields rule out), naming the
/// template's model and quoting the documented rule.
fn check_bulk_provisioning_model(inner: &Inner, template: &str) -> Result<(), ApiError> {
    let model = inner
        .templates
        .get(template)
        .and_then(|t| {
            t.spec
                .pointer("/properties/scheduling/provisioningModel")
                .and_then(Value::as_str)
        })
        .unwrap_or("STANDARD");
    if BULK_MODELS.contains(&model) {
        return Ok(());
    }
    Err(invalid_field(
        "resource.targetSizePolicy.mode",
        "BULK",
        &format!(
            "Bulk mode in MIGs is only supported with instance templates that specify either a \
             reservation-bound or flex-start provisioning model; instance template '{template}' \
             has provisioning model '{model}'."
        ),
    ))
}

/// A TPU machine type must be offered in the MIG's zone (the zones of
/// `tpu`, from Google's "TPU regions and zones", as
/// `tpu_rules` checks node pools). GCE's words for a machine type a
/// zone lacks: "Invalid value for field 'resource.machineType':
/// 'zones/Z/machineTypes/MT'. Machine type with name 'MT' does not exist in
/// zone 'Z'." (the common instances.insert answer, e.g.
/// gruntwork-io/terratest#1132, GoogleCloudPlatform/bank-of-anthos#1234).
/// Real MIGs report it per VM in
/// `listErrors`; refusing the insert is stricter.
fn check_machine_type_in_zone(machine: &str, zone: &str) -> Result<(), ApiError> {
    let Some(generation) = crate::tpu::machine_type(machine).map(|m| m.generation) else {
        return Ok(());
    };
    if generation.offered_in(zone) {
        return Ok(());
    }
    Err(invalid_field(
        "resource.instanceTemplate.properties.machineType",
        &format!("zones/{zone}/machineTypes/{machine}"),
        &format!("Machine type with name '{machine}' does not exist in zone '{zone}'."),
    ))
}

/// `resourcePolicies.workloadPolicy` must name an existing resource policy
/// in the zone's region (404 with compute's "not found" message otherwise),
/// and its `acceleratorTopology` must be what the MIG's VMs make: hosts ×
/// chips per host (from the machine type, `tpu`) = the topology's
/// chips, and a topology of the machine type's generation. Google's message
/// for a mismatch is not public; this one is the simulator's.
fn check_workload_policy(
    inner: &Inner,
    project: &str,
    zone: &str,
    body: &Value,
    machine: &str,
    target_size: u32,
) -> Result<(Option<String>, Option<String>), ApiError> {
    let Some(link) = body
        .pointer("/resourcePolicies/workloadPolicy")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    else {
        return Ok((None, None));
    };
    let region = crate::tpu::region_of(zone);
    // gcloud sends the bare name (`--workload-policy=wp1`, gcp-api.md §6).
    let path = if link.contains('/') {
        resource_path(project, link).ok_or_else(|| {
            invalid_field(
                "resource.resourcePolicies.workloadPolicy",
                link,
                "The URL is malformed.",
            )
        })?
    } else {
        format!("projects/{project}/regions/{region}/resourcePolicies/{link}")
    };
    let Some(rec) = inner.policies.get(&path) else {
        return Err(not_found(&path));
    };
    // A policy whose insert (or delete) is still running cannot be used
    // yet: compute's `resourceNotReady` ("The resource '…' is not ready"),
    // the answer it gives for resources in a transitional state.
    if rec.status != "READY" {
        return Err(ApiError::invalid(
            "resourceNotReady",
            format!("The resource '{path}' is not ready"),
        ));
    }
    if !path.starts_with(&format!("projects/{project}/regions/{region}/")) {
        return Err(invalid_field(
            "resource.resourcePolicies.workloadPolicy",
            link,
            &format!("The workload policy must be in the region of the zone '{zone}'."),
        ));
    }
    let topology = rec
        .spec
        .pointer("/workloadPolicy/acceleratorTopology")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(t) = &topology {
        let Some(crate::tpu::MachineType {
            generation: g,
            chips_per_vm: cph,
            ..
        }) = crate::tpu::machine_type(machine)
        else {
            return Err(invalid_field(
                "resource.resourcePolicies.workloadPolicy",
                link,
                &format!(
                    "Accelerator topology '{t}' requires a TPU machine type; the instance template has '{machine}'."
                ),
            ));
        };
        if !g.accepts_topology(t) {
            return Err(invalid_field(
                "resource.resourcePolicies.workloadPolicy",
                link,
                &format!("Accelerator topology '{t}' is not valid for machine type '{machine}'."),
            ));
        }
        let chips = crate::tpu::chips(t);
        if target_size.saturating_mul(cph) != chips {
            return Err(invalid_field(
                "resource.targetSize",
                &target_size.to_string(),
                &format!(
                    "Accelerator topology '{t}' has {chips} chips: it needs {} VMs of machine type '{machine}' ({cph} chips each).",
                    chips / cph.max(1)
                ),
            ));
        }
    }
    Ok((Some(path), topology))
}

fn zone_scope(m: &MigRec) -> Scope {
    Scope::Zone {
        project: m.project.clone(),
        zone: m.zone.clone(),
    }
}

/// VM name: `<base>-<4 random [a-z0-9]>` (compute v1 discovery,
/// `baseInstanceName`: "the MIG appends a hyphen and a random four-character
/// string").
fn member_name(inner: &mut Inner, base: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut r = inner.random_u64();
    let mut suffix = String::with_capacity(4);
    for _ in 0..4 {
        suffix.push(char::from(ALPHABET[(r % 36) as usize]));
        r /= 36;
    }
    format!("{base}-{suffix}")
}

/// Called when a MIG insert completes: the group exists; its VMs are
/// created now unless the zone is stocked out.
pub(crate) fn mig_ready(inner: &mut Inner, key: &str, at: Instant) {
    let Some(m) = inner.migs.get(key) else {
        return;
    };
    let base = m.spec["baseInstanceName"]
        .as_str()
        .unwrap_or("vm")
        .to_string();
    let (project, zone, size) = (m.project.clone(), m.zone.clone(), m.target_size);
    let mut members: Vec<String> = Vec::new();
    for _ in 0..size {
        let candidate = loop {
            let n = member_name(inner, &base);
            let clash =
                members.contains(&n) || inner.instances.contains_key(&vm_key(&project, &zone, &n));
            if !clash {
                break n;
            }
        };
        members.push(candidate);
    }
    if let Some(m) = inner.migs.get_mut(key) {
        m.ready = true;
        m.members = members;
        if m.stockout.is_some() {
            m.error_time = Some(jiff::Timestamp::now());
        }
    }
    try_create_vms(inner, key, at);
}

/// Whether a MIG's stockout still holds (a listed zone until unlisted; a
/// drawn one while the stockout rate is above zero).
fn still_stocked_out(inner: &Inner, m: &MigRec) -> bool {
    match m.stockout {
        None => false,
        Some(Stockout::Zone) => inner.faults.config.stockout_zones.contains(&m.zone),
        Some(Stockout::Drawn) => inner.faults.config.stockout_rate > 0.0,
        Some(Stockout::Limited) => inner
            .faults
            .config
            .zone_vm_limits
            .get(&m.zone)
            .is_some_and(|&n| n < m.target_size),
        Some(Stockout::Quota) => mig_failure(inner, m).0 == QUOTA_CODE,
    }
}

/// The code of a MIG's VMs refused for quota (gcp-api.md §3.3, Compute
/// Engine's `QUOTA_EXCEEDED`).
const QUOTA_CODE: &str = "QUOTA_EXCEEDED";

/// Why a MIG's VMs are not created: `(code, message)`, the quota's
/// (`QUOTA_EXCEEDED`) while it holds, else the zone's stockout.
fn mig_failure(inner: &Inner, m: &MigRec) -> (&'static str, String) {
    let quota = (m.stockout == Some(Stockout::Quota))
        .then(|| inner.templates.get(&m.template))
        .flatten()
        .and_then(|t| {
            super::quotas::mig_quota_error(inner, &m.project, &m.zone, &t.spec, m.target_size)
        });
    match quota {
        Some(message) => (QUOTA_CODE, message),
        None => (STOCKOUT_CODE, stockout_message(&m.project, &m.zone)),
    }
}

/// How many VMs a stocked-out MIG can have now: INDIVIDUAL "creates as many
/// instances as possible with the available capacity" (Compute Engine,
/// *About bulk mode*, docs.cloud.google.com/compute/docs/instance-groups/about-bulk-mode),
/// the zone's limit; BULK "doesn't create any instance until Compute
/// Engine has the capacity for the specified target size": none.
fn partial_capacity(inner: &Inner, m: &MigRec) -> usize {
    match m.stockout {
        Some(Stockout::Limited) if !m.bulk => inner
            .faults
            .config
            .zone_vm_limits
            .get(&m.zone)
            .map_or(0, |&n| n as usize),
        _ => 0,
    }
}

/// What a MIG's VMs are made of, from its template as it is now.
struct MemberShape {
    props: Value,
    machine: String,
    chips: u32,
    items: Vec<(String, String)>,
}

fn member_shape(inner: &Inner, m: &MigRec) -> Option<MemberShape> {
    let template = inner.templates.get(&m.template)?;
    let props = template
        .spec
        .get("properties")
        .cloned()
        .unwrap_or(json!({}));
    let machine = props["machineType"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let chips = crate::tpu::machine_type(&machine).map_or(0, |t| t.chips_per_vm);
    let num = project_number(&m.project);
    let mut items = metadata_items(props.pointer("/metadata/items"));
    // GCE adds `instance-template` and `created-by` to the metadata of a
    // MIG's VMs, both naming the project by number: `created-by` =
    // `projects/NUM/zones/Z/instanceGroupManagers/M` (GCE's default VM
    // metadata keys; the TPU device plugin, ai-on-gke/tpu-device-plugin,
    // reads `created-by` to annotate the Node with its MIG —
    // ../shared/reference/tpu-anchors.md §B.5).
    items.retain(|(k, _)| k != "created-by" && k != "instance-template");
    items.push((
        "instance-template".into(),
        format!(
            "projects/{num}/global/instanceTemplates/{}",
            m.template.rsplit('/').next().unwrap_or_default()
        ),
    ));
    items.push((
        "created-by".into(),
        format!(
            "projects/{num}/zones/{}/instanceGroupManagers/{}",
            m.zone, m.name
        ),
    ));
    Some(MemberShape {
        props,
        machine,
        chips,
        items,
    })
}

/// A new VM of a MIG, booting from `at` (PROVISIONING, then STAGING and
/// RUNNING after the simulated latency), with its own metadata server.
fn make_vm(inner: &mut Inner, m: &MigRec, name: &str, shape: &MemberShape, at: Instant) -> VmRec {
    let latency = inner.latency;
    let id = inner.numeric_id().to_string();
    let fingerprint = new_fingerprint(inner);
    let mut vm = VmRec {
        project: m.project.clone(),
        zone: m.zone.clone(),
        name: name.to_string(),
        id,
        machine_type: shape.machine.clone(),
        properties: shape.props.clone(),
        items: shape.items.clone(),
        fingerprint,
        status: "PROVISIONING",
        created_wall: jiff::Timestamp::now(),
        staging_at: at + latency / 2,
        running_at: at + latency,
        runtime: None,
    };
    vm.runtime = start_runtime(&vm, shape.chips);
    vm
}

/// Creates all of a MIG's VMs at once (BULK: all or none), unless it is
/// still stocked out.
fn try_create_vms(inner: &mut Inner, key: &str, at: Instant) {
    let Some(m) = inner.migs.get(key) else {
        return;
    };
    if !m.ready || m.created || m.deleting {
        return;
    }
    let stocked_out = still_stocked_out(inner, m);
    // All of them, or (stocked out) as many as the zone has room for.
    let room = if stocked_out {
        partial_capacity(inner, m)
    } else {
        m.members.len()
    };
    let m = m.clone();
    let exists = |inner: &Inner, n: &str| {
        inner
            .instances
            .contains_key(&vm_key(&m.project, &m.zone, n))
    };
    let have = m.members.iter().filter(|n| exists(inner, n)).count();
    if room > have
        && let Some(shape) = member_shape(inner, &m)
    {
        let missing: Vec<String> = m
            .members
            .iter()
            .filter(|n| !exists(inner, n))
            .take(room - have)
            .cloned()
            .collect();
        for name in &missing {
            let vm = make_vm(inner, &m, name, &shape, at);
            inner
                .instances
                .insert(vm_key(&m.project, &m.zone, name), vm);
        }
    }
    if stocked_out {
        if let Some(m) = inner.migs.get_mut(key) {
            m.error_time = Some(jiff::Timestamp::now());
        }
        return;
    }
    if let Some(m) = inner.migs.get_mut(key) {
        m.created = true;
        m.stockout = None;
    }
    tracing::debug!(mig = %key, vms = m.members.len(), "sim: MIG created its VMs");
}

/// Starts a VM's metadata server (and, once RUNNING, its node agent) in a
/// task; `None` outside a Tokio runtime.
fn start_runtime(vm: &VmRec, chips: u32) -> Option<VmRuntime> {
    let handle = tokio::runtime::Handle::try_current().ok()?;
    let (meta, meta_rx) = watch::channel(vm.metadata());
    let (running, mut running_rx) = watch::channel::<Option<bool>>(None);
    let guest: GuestAttributes = Arc::default();
    let addr: Arc<OnceLock<SocketAddr>> = Arc::default();
    let (guest2, addr2, name) = (guest.clone(), addr.clone(), vm.name.clone());
    let task = handle.spawn(async move {
        let server = match MetadataServer::start(meta_rx, guest2).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(vm = %name, error = %e, "sim: cannot start the VM's metadata server");
                return;
            }
        };
        let _ = addr2.set(server.addr);
        let agents = loop {
            if let Some(agents) = *running_rx.borrow_and_update() {
                break agents;
            }
            if running_rx.changed().await.is_err() {
                return;
            }
        };
        let _agent = agents.then(|| {
            tracing::debug!(vm = %name, "sim: starting the VM's node agent");
            super::kubelet::spawn(super::kubelet::AgentConfig {
                metadata_host: server.addr,
                chips,
                heartbeat: HEARTBEAT,
            })
        });
        std::future::pending::<()>().await;
    });
    Some(VmRuntime {
        meta,
        running,
        guest,
        addr,
        task,
    })
}

/// Moves VMs along PROVISIONING → STAGING → RUNNING, and retries
/// stocked-out MIGs. Called on every `advance`.
pub(crate) fn advance_vms(inner: &mut Inner, now: Instant) {
    let retry: Vec<String> = inner
        .migs
        .iter()
        .filter(|(_, m)| m.ready && !m.created && !m.deleting && m.stockout.is_some())
        .map(|(k, _)| k.clone())
        .collect();
    for key in retry {
        try_create_vms(inner, &key, now);
    }
    let agents = inner.faults.config.node_agents;
    for vm in inner.instances.values_mut() {
        if vm.status == "PROVISIONING" && vm.staging_at <= now {
            vm.status = "STAGING";
        }
        if vm.status == "STAGING" && vm.running_at <= now {
            vm.status = "RUNNING";
            if let Some(rt) = &vm.runtime {
                let _ = rt.running.send(Some(agents));
            }
        }
    }
}

/// Whether anything is waiting on the clock (MIG operations that create or
/// delete VMs, VMs booting, MIGs retrying after a stockout).
pub(crate) fn has_pending(inner: &Inner) -> bool {
    inner.compute_ops.iter().any(|op| {
        !op.done
            && matches!(
                op.effect,
                ComputeEffect::MigReady { .. }
                    | ComputeEffect::MigDelete { .. }
                    | ComputeEffect::MigRecreate { .. }
            )
    }) || inner
        .instances
        .values()
        .any(|v| v.status == "PROVISIONING" || v.status == "STAGING")
        || inner
            .migs
            .values()
            .any(|m| m.ready && !m.created && m.stockout.is_some())
}

fn mig_status_json(inner: &Inner, m: &MigRec) -> (Value, Value) {
    let vms: Vec<&VmRec> = m
        .members
        .iter()
        .filter_map(|n| inner.instances.get(&vm_key(&m.project, &m.zone, n)))
        .collect();
    let count = |s: &str| vms.iter().filter(|v| v.status == s).count() as i64;
    let n = i64::from(m.target_size);
    let running = count("RUNNING");
    let (creating, deleting, none) = if m.deleting {
        (0, vms.len() as i64, 0)
    } else if !m.created {
        // Stocked out: none created (BULK), or some (INDIVIDUAL).
        (n - running, 0, running)
    } else {
        (n - running, 0, running)
    };
    let actions = json!({
        "abandoning": 0, "creating": creating, "creatingWithoutRetries": 0, "deleting": deleting,
        "none": none, "recreating": 0, "refreshing": 0, "restarting": 0, "resuming": 0,
        "starting": 0, "stopping": 0, "suspending": 0, "verifying": 0,
    });
    let stable = creating == 0 && deleting == 0;
    let mut status = json!({
        "isStable": stable,
        "versionTarget": {"isReached": stable},
        "stateful": {"hasStatefulConfig": false, "perInstanceConfigs": {"allEffective": true}},
        "currentInstanceStatuses": {
            "nonExistent": n - vms.len() as i64,
            "provisioning": count("PROVISIONING"),
            "staging": count("STAGING"),
            "running": running,
            "stopping": count("STOPPING"),
        },
    });
    let error = m.stockout.map(|_| {
        let (code, message) = mig_failure(inner, m);
        json!({"errors": [{"code": code, "message": message}]})
    });
    if m.bulk {
        // "Bulk instance operation is the creation of VMs in a MIG when the
        // targetSizePolicy.mode is set to BULK" (compute v1 discovery).
        let mut check =
            json!({"timestamp": m.error_time.unwrap_or_else(jiff::Timestamp::now).to_string()});
        if let Some(e) = &error {
            check["error"] = e.clone();
        }
        status["bulkInstanceOperation"] = json!({
            "inProgress": !m.created && !m.deleting,
            "lastProgressCheck": check,
        });
    }
    if let Some(t) = &m.topology {
        // ACTIVATING until every VM runs, then ACTIVE (gcp-api.md §2.4, §3.3).
        let state = if m.created && running == n {
            "ACTIVE"
        } else {
            "ACTIVATING"
        };
        let mut topo = json!({"acceleratorTopology": t, "state": state});
        if let Some(e) = &error {
            topo["stateDetails"] = json!({"error": e, "timestamp": m.error_time.unwrap_or_else(jiff::Timestamp::now).to_string()});
        }
        status["appliedAcceleratorTopologies"] = json!([topo]);
    }
    (status, actions)
}

fn render_mig(inner: &Inner, key: &str, m: &MigRec, ctx: &Ctx) -> Value {
    let api = ctx.compute_api();
    let mut v = m.spec.clone();
    v["selfLink"] = json!(format!("{api}/{key}"));
    v["zone"] = json!(format!("{api}/projects/{}/zones/{}", m.project, m.zone));
    v["instanceGroup"] = json!(format!(
        "{api}/projects/{}/zones/{}/instanceGroups/{}",
        m.project, m.zone, m.name
    ));
    v["instanceTemplate"] = json!(format!("{api}/{}", m.template));
    v["versions"] = json!([{"instanceTemplate": format!("{api}/{}", m.template), "targetSize": {"calculated": m.target_size}}]);
    if let Some(p) = &m.policy {
        v["resourcePolicies"] = json!({"workloadPolicy": format!("{api}/{p}")});
    }
    let (status, actions) = mig_status_json(inner, m);
    v["status"] = status;
    v["currentActions"] = actions;
    v
}

fn find_mig<'a>(inner: &'a Inner, key: &str) -> Result<&'a MigRec, ApiError> {
    match inner.migs.get(key) {
        Some(m) if m.ready => Ok(m),
        _ => Err(not_found(key)),
    }
}

/// A MIG that exists and is not being deleted (a write's target).
fn live_mig<'a>(inner: &'a Inner, key: &str) -> Result<&'a MigRec, ApiError> {
    let m = find_mig(inner, key)?;
    if m.deleting {
        return Err(ApiError::invalid(
            "resourceNotReady",
            format!("The resource '{key}' is not ready"),
        ));
    }
    Ok(m)
}

/// `GET …/instanceGroupManagers/M`.
pub(crate) fn get_mig(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let key = mig_key(project, zone, name);
    let m = find_mig(inner, &key)?;
    Ok(render_mig(inner, &key, m, ctx))
}

/// `GET …/instanceGroupManagers` (paginated).
pub(crate) fn list_migs(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
) -> Result<Value, ApiError> {
    check_zone(project, zone)?;
    let prefix = mig_key(project, zone, "");
    let items: Vec<Value> = inner
        .migs
        .iter()
        .filter(|(k, m)| k.starts_with(&prefix) && m.ready)
        .map(|(k, m)| render_mig(inner, k, m, ctx))
        .collect();
    let (page, next) = paginate(ctx, items)?;
    let collection = format!("projects/{project}/zones/{zone}/instanceGroupManagers");
    Ok(list_body(
        "compute#instanceGroupManagerList",
        collection.clone(),
        format!("{}/{collection}", ctx.compute_api()),
        page,
        next,
    ))
}

/// `GET …/zones/Z/instanceGroups` (paginated, filtered): the instance group
/// each MIG manages, of the MIG's name, as `InstanceGroup` resources
/// (discovery document, schema `InstanceGroup`; "a managed instance group
/// … creates an instance group of the same name",
/// <https://cloud.google.com/compute/docs/instance-groups>). `size` counts
/// the group's VMs that exist. `gcloud compute instance-groups managed list`
/// reads it for its size column.
pub(crate) fn list_instance_groups(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
) -> Result<Value, ApiError> {
    check_zone(project, zone)?;
    let api = ctx.compute_api();
    let prefix = mig_key(project, zone, "");
    let items: Vec<Value> = inner
        .migs
        .iter()
        .filter(|(k, m)| k.starts_with(&prefix) && m.ready)
        .map(|(_, m)| {
            let size = m
                .members
                .iter()
                .filter(|n| inner.instances.contains_key(&vm_key(project, zone, n)))
                .count();
            let link = format!(
                "{api}/projects/{project}/zones/{zone}/instanceGroups/{}",
                m.name
            );
            json!({
                "kind": "compute#instanceGroup",
                "id": m.spec["id"],
                "creationTimestamp": m.spec["creationTimestamp"],
                "name": m.name,
                "description": format!(
                    "This instance group is controlled by Instance Group Manager '{}'. To modify \
                     instances in this group, use the Instance Group Manager API: \
                     https://cloud.google.com/compute/docs/reference/latest/instanceGroupManagers",
                    m.name
                ),
                "zone": format!("{api}/projects/{project}/zones/{zone}"),
                "size": size,
                "fingerprint": m.spec["fingerprint"],
                "selfLink": link,
            })
        })
        .collect();
    let (page, next) = paginate(ctx, items)?;
    let collection = format!("projects/{project}/zones/{zone}/instanceGroups");
    Ok(list_body(
        "compute#instanceGroupList",
        collection.clone(),
        format!("{api}/{collection}"),
        page,
        next,
    ))
}

/// `DELETE …/instanceGroupManagers/M`: its VMs stop and go; the operation
/// is DONE when they and the group are gone.
pub(crate) fn delete_mig(
    inner: &mut Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    name: &str,
) -> Result<Value, ApiError> {
    if let Some(op) = replayed(inner, ctx) {
        return Ok(op);
    }
    let key = mig_key(project, zone, name);
    let m = live_mig(inner, &key)?;
    let id = m.spec["id"].as_str().unwrap_or_default().to_string();
    let scope = zone_scope(m);
    let members = m.members.clone();
    if let Some(m) = inner.migs.get_mut(&key) {
        m.deleting = true;
    }
    for n in members {
        if let Some(vm) = inner.instances.get_mut(&vm_key(project, zone, &n)) {
            vm.status = "STOPPING";
        }
    }
    tracing::debug!(mig = %key, "sim: delete MIG");
    Ok(new_op(
        inner,
        ctx,
        scope,
        "compute.instanceGroupManagers.delete",
        key.clone(),
        id,
        ComputeEffect::MigDelete { key },
    ))
}

/// The fields `instanceGroupManagers.patch` changes in the simulator: the
/// description (slicectl's ownership and protection stamp) and the
/// fingerprint the request must carry. Anything else is refused, not
/// silently dropped.
const MIG_PATCHABLE: &[&str] = &["description", "fingerprint"];

/// `PATCH …/instanceGroupManagers/M` with a validated `InstanceGroupManager`
/// (a JSON merge patch; compute v1 discovery: "This method supports PATCH
/// semantics and uses the JSON merge patch format and processing rules").
/// The fingerprint is required and must be current: the discovery
/// document's `InstanceGroupManager.fingerprint` says "An up-to-date
/// fingerprint must be provided in order to update the
/// InstanceGroupManager, otherwise the request will fail with error 412
/// conditionNotMet". Google's exact message for a MIG is not public; the
/// one used is its wording for the same condition on other compute
/// resources ("Supplied fingerprint does not match current fingerprint of
/// instance settings.", quoted in GoogleCloudPlatform/magic-modules#14143;
/// "… current metadata fingerprint." for `setMetadata`). That `description`
/// is patchable is what Terraform's google provider relies on
/// (GoogleCloudPlatform/magic-modules#5322, fixing
/// hashicorp/terraform-provider-google#10323). Only the fields in
/// [`MIG_PATCHABLE`] are modelled: any other field is refused with 400
/// (stricter than Google, never more lenient). The group is patched at
/// once; the answer is a zonal operation that ends after the simulated
/// latency, like `setMetadata`'s.
pub(crate) fn patch_mig(
    inner: &mut Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    name: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    if let Some(op) = replayed(inner, ctx) {
        return Ok(op);
    }
    let key = mig_key(project, zone, name);
    let m = live_mig(inner, &key)?;
    if let Some(field) = body
        .as_object()
        .and_then(|o| o.keys().find(|k| !MIG_PATCHABLE.contains(&k.as_str())))
    {
        return Err(ApiError::invalid(
            "invalid",
            format!(
                "Invalid value for field 'resource.{field}': the simulator's instanceGroupManagers.patch \
                 changes only 'description' (with the current 'fingerprint'); '{field}' is not modelled"
            ),
        ));
    }
    let current = m.spec["fingerprint"]
        .as_str()
        .and_then(decode_fingerprint)
        .unwrap_or_default();
    require_fingerprint(
        body,
        &current,
        "Supplied fingerprint does not match current fingerprint of instance group manager.",
    )?;
    let id = m.spec["id"].as_str().unwrap_or_default().to_string();
    let scope = zone_scope(m);
    let fingerprint = encode_fingerprint(&new_fingerprint(inner));
    let Some(m) = inner.migs.get_mut(&key) else {
        return Err(not_found(&key));
    };
    // JSON merge patch: a null removes the field.
    match body.get("description") {
        Some(Value::Null) => {
            if let Some(o) = m.spec.as_object_mut() {
                o.remove("description");
            }
        }
        Some(d) => m.spec["description"] = d.clone(),
        None => {}
    }
    m.spec["fingerprint"] = json!(fingerprint);
    tracing::debug!(mig = %key, "sim: patch MIG");
    Ok(new_op(
        inner,
        ctx,
        scope,
        "compute.instanceGroupManagers.patch",
        key,
        id,
        ComputeEffect::None,
    ))
}

/// `POST …/instanceGroupManagers/M/recreateInstances` with a validated
/// `InstanceGroupManagersRecreateInstancesRequest`. Compute v1 discovery,
/// `instanceGroupManagers.recreateInstances`: "Flags the specified VM
/// instances in the managed instance group to be immediately recreated.
/// Each instance is recreated using the group's current configuration. This
/// operation is marked as DONE when the flag is set even if the instances
/// have not yet been recreated"; `instances` are "full URL or a partial URL,
/// such as zones/[ZONE]/instances/[INSTANCE_NAME]", at most 1000. The gcloud
/// reference (cloud.google.com/sdk/gcloud/reference/compute/instance-groups/
/// managed/recreate-instances): "The underlying virtual machine instances
/// are deleted and recreated based on the latest instance template
/// configured for the managed instance group". The managed instance is the
/// one named in the request, so the VM comes back under its name (the
/// simulator's reading; no page found says it in so many words) and boots
/// again from the template: fresh metadata, no guest attributes, a new node
/// agent. An instance that is not the group's is refused (the message is
/// the simulator's own; no public source quotes GCE's).
pub(crate) fn recreate_instances(
    inner: &mut Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    name: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    if let Some(op) = replayed(inner, ctx) {
        return Ok(op);
    }
    let key = mig_key(project, zone, name);
    let m = live_mig(inner, &key)?;
    let links: Vec<&str> = body["instances"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if links.is_empty() || links.len() > 1000 {
        return Err(invalid_field(
            "instances",
            &links.len().to_string(),
            "1 to 1000 instances must be given",
        ));
    }
    let mut vms = Vec::new();
    for link in links {
        let vm = link.rsplit_once("instances/").map_or(link, |(_, n)| n);
        if !m.members.iter().any(|n| n == vm) {
            return Err(invalid_field(
                "instances",
                link,
                &format!("it is not an instance of managed instance group {name}"),
            ));
        }
        vms.push(vm.to_string());
    }
    let id = m.spec["id"].as_str().unwrap_or_default().to_string();
    let scope = zone_scope(m);
    tracing::debug!(mig = %key, ?vms, "sim: recreate instances");
    Ok(new_op(
        inner,
        ctx,
        scope,
        "compute.instanceGroupManagers.recreateInstances",
        key.clone(),
        id,
        ComputeEffect::MigRecreate { key, vms },
    ))
}

/// Called when a recreateInstances operation completes: each VM is made
/// again under its name from the group's template (the old one, its
/// metadata server and its agent are gone).
pub(crate) fn mig_recreate(inner: &mut Inner, key: &str, vms: &[String], at: Instant) {
    let Some(m) = inner.migs.get(key).filter(|m| !m.deleting).cloned() else {
        return;
    };
    let Some(shape) = member_shape(inner, &m) else {
        return;
    };
    for name in vms {
        let vm = make_vm(inner, &m, name, &shape, at);
        inner
            .instances
            .insert(vm_key(&m.project, &m.zone, name), vm);
    }
}

/// Called when a MIG delete completes: its VMs (and their metadata servers
/// and agents) and the group are gone.
pub(crate) fn mig_delete(inner: &mut Inner, key: &str) {
    if let Some(m) = inner.migs.remove(key) {
        for n in &m.members {
            inner.instances.remove(&vm_key(&m.project, &m.zone, n));
        }
    }
}

/// `POST …/instanceGroupManagers/M/listManagedInstances` (PAGELESS: every
/// VM in one answer).
pub(crate) fn list_managed_instances(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let key = mig_key(project, zone, name);
    let m = find_mig(inner, &key)?;
    let api = ctx.compute_api();
    let template = format!("{api}/{}", m.template);
    let items: Vec<Value> = m
        .members
        .iter()
        .map(|n| {
            let vk = vm_key(project, zone, n);
            let mut v = json!({
                "name": n,
                "instance": format!("{api}/{vk}"),
                "targetStatus": "RUNNING",
                "version": {"instanceTemplate": template},
            });
            match inner.instances.get(&vk) {
                Some(vm) => {
                    v["id"] = json!(vm.id);
                    v["instanceStatus"] = json!(vm.status);
                    v["currentAction"] = json!(match vm.status {
                        "RUNNING" => "NONE",
                        "STOPPING" => "DELETING",
                        _ => "CREATING",
                    });
                }
                None => {
                    v["currentAction"] = json!(if m.deleting { "DELETING" } else { "CREATING" });
                    // BULK: "During this waiting period, the MIG creates
                    // managed instances" (Compute Engine, *About bulk
                    // mode*, docs.cloud.google.com/compute/docs/instance-groups/about-bulk-mode):
                    // listed CREATING, and the reason is the bulk
                    // operation's (`status.bulkInstanceOperation.lastProgressCheck.error`)
                    // and `listErrors`', not a per-VM attempt: the VMs are
                    // not tried one by one. INDIVIDUAL tries each VM, and
                    // each one's last attempt carries its error
                    // (`ManagedInstanceLastAttempt`, compute v1 discovery).
                    if m.stockout.is_some() && !m.bulk {
                        let (code, message) = mig_failure(inner, m);
                        v["lastAttempt"] = json!({"errors": {"errors": [
                            {"code": code, "message": message}
                        ]}});
                    }
                }
            }
            v
        })
        .collect();
    let mut out = json!({});
    if !items.is_empty() {
        out["managedInstances"] = Value::Array(items);
    }
    Ok(out)
}

/// `GET …/instanceGroupManagers/M/listErrors` (paginated): one
/// `ZONE_RESOURCE_POOL_EXHAUSTED` item per VM the MIG could not create.
pub(crate) fn list_errors(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let key = mig_key(project, zone, name);
    let m = find_mig(inner, &key)?;
    let api = ctx.compute_api();
    let items: Vec<Value> = if m.stockout.is_some() && !m.created {
        // One item per VM not created (an INDIVIDUAL MIG may have some).
        let ts = m
            .error_time
            .unwrap_or_else(jiff::Timestamp::now)
            .to_string();
        let (code, message) = mig_failure(inner, m);
        m.members
            .iter()
            .filter(|n| !inner.instances.contains_key(&vm_key(project, zone, n)))
            .map(|n| {
                json!({
                    "timestamp": ts,
                    "error": {"code": code, "message": message},
                    "instanceActionDetails": {
                        "action": "CREATING",
                        "instance": format!("{api}/{}", vm_key(project, zone, n)),
                        "version": {"instanceTemplate": format!("{api}/{}", m.template)},
                    },
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let (page, next) = paginate(ctx, items)?;
    let mut out = json!({});
    if !page.is_empty() {
        out["items"] = Value::Array(page);
    }
    if let Some(t) = next {
        out["nextPageToken"] = json!(t);
    }
    Ok(out)
}

/// `GET …/zones/Z/autoscalers`: none (gcloud lists them before deleting or
/// describing a MIG, gcp-api.md §6).
pub(crate) fn list_autoscalers(ctx: &Ctx, project: &str, zone: &str) -> Result<Value, ApiError> {
    check_zone(project, zone)?;
    let collection = format!("projects/{project}/zones/{zone}/autoscalers");
    Ok(list_body(
        "compute#autoscalerList",
        collection.clone(),
        format!("{}/{collection}", ctx.compute_api()),
        Vec::new(),
        None,
    ))
}

// ---- instances ------------------------------------------------------------

fn internal_ip(key: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(key.as_bytes());
    format!("10.128.{}.{}", d[0], d[1].max(2))
}

fn render_instance(key: &str, vm: &VmRec, ctx: &Ctx) -> Value {
    let api = ctx.compute_api();
    let zone_url = format!("{api}/projects/{}/zones/{}", vm.project, vm.zone);
    let items: Vec<Value> = vm
        .items
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    let mut nics: Vec<Value> = vm
        .properties
        .get("networkInterfaces")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_else(|| vec![json!({"network": format!("{api}/projects/{}/global/networks/default", vm.project)})]);
    for (i, nic) in nics.iter_mut().enumerate() {
        nic["kind"] = json!("compute#networkInterface");
        nic["name"] = json!(format!("nic{i}"));
        nic["networkIP"] = json!(internal_ip(&format!("{key}/{i}")));
    }
    let mut v = json!({
        "kind": "compute#instance",
        "id": vm.id,
        "name": vm.name,
        "status": vm.status,
        "machineType": format!("{zone_url}/machineTypes/{}", vm.machine_type),
        "zone": zone_url,
        "selfLink": format!("{api}/{key}"),
        "creationTimestamp": vm.created_wall.to_string(),
        "metadata": {
            "kind": "compute#metadata",
            "fingerprint": encode_fingerprint(&vm.fingerprint),
            "items": items,
        },
        "networkInterfaces": nics,
    });
    for field in [
        "labels",
        "scheduling",
        "serviceAccounts",
        "tags",
        "disks",
        "reservationAffinity",
        "shieldedInstanceConfig",
    ] {
        if let Some(x) = vm.properties.get(field) {
            v[field] = x.clone();
        }
    }
    v
}

fn find_vm<'a>(inner: &'a Inner, key: &str) -> Result<&'a VmRec, ApiError> {
    inner.instances.get(key).ok_or_else(|| not_found(key))
}

/// `GET …/zones/Z/instances` (paginated).
pub(crate) fn list_instances(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
) -> Result<Value, ApiError> {
    check_zone(project, zone)?;
    let prefix = vm_key(project, zone, "");
    let items: Vec<Value> = inner
        .instances
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(k, vm)| render_instance(k, vm, ctx))
        .collect();
    let (page, next) = paginate(ctx, items)?;
    let collection = format!("projects/{project}/zones/{zone}/instances");
    Ok(list_body(
        "compute#instanceList",
        collection.clone(),
        format!("{}/{collection}", ctx.compute_api()),
        page,
        next,
    ))
}

/// `GET projects/P/aggregated/instanceGroupManagers`: every MIG of the
/// project, keyed by `zones/Z` ([`aggregated`]).
pub(crate) fn aggregated_migs(inner: &Inner, ctx: &Ctx, project: &str) -> Result<Value, ApiError> {
    aggregated::of_store(
        ctx,
        project,
        aggregated::MIGS,
        &inner.migs,
        |m| m.ready,
        |k, m| render_mig(inner, k, m, ctx),
    )
}

/// `GET projects/P/aggregated/instances` (what `gcloud compute instances
/// list` without `--zones` calls, gcp-api.md §6).
pub(crate) fn aggregated_instances(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
) -> Result<Value, ApiError> {
    aggregated::of_store(
        ctx,
        project,
        aggregated::INSTANCES,
        &inner.instances,
        |_| true,
        |k, vm| render_instance(k, vm, ctx),
    )
}

/// `GET projects/P/aggregated/instanceTemplates` (what `gcloud compute
/// instance-templates list` calls): the global templates under `global`.
pub(crate) fn aggregated_templates(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
) -> Result<Value, ApiError> {
    aggregated::of_store(
        ctx,
        project,
        aggregated::TEMPLATES,
        &inner.templates,
        |t| t.ready,
        |k, t| render_template(k, t, ctx),
    )
}

/// `GET …/zones/Z/instances/I`.
pub(crate) fn get_instance(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let key = vm_key(project, zone, name);
    Ok(render_instance(&key, find_vm(inner, &key)?, ctx))
}

/// `POST …/instances/I/setMetadata` with the whole `Metadata`. "You must
/// always provide an up-to-date fingerprint hash in order to update or
/// change metadata, otherwise the request will fail with error 412
/// conditionNotMet" (compute v1 discovery, `Metadata.fingerprint`); the
/// message is the one Google sends ("Supplied fingerprint does not match
/// current metadata fingerprint.", cloudfoundry/bosh-google-cpi-release#159).
/// Fingerprints compare as decoded bytes, either base64 alphabet. The new
/// items (and a new fingerprint) take effect at once and reach the VM's
/// metadata server; the `setMetadata` operation is DONE after the latency.
pub(crate) fn set_metadata(
    inner: &mut Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    name: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    if let Some(op) = replayed(inner, ctx) {
        return Ok(op);
    }
    let key = vm_key(project, zone, name);
    let current = find_vm(inner, &key)?.fingerprint;
    require_fingerprint(
        body,
        &current,
        "Supplied fingerprint does not match current metadata fingerprint.",
    )?;
    check_metadata_items(Some(body), "metadata")?;
    let items = metadata_items(body.get("items"));
    let fingerprint = new_fingerprint(inner);
    let Some(vm) = inner.instances.get_mut(&key) else {
        return Err(not_found(&key));
    };
    vm.items = items;
    vm.fingerprint = fingerprint;
    let id = vm.id.clone();
    if let Some(rt) = &vm.runtime {
        let meta = vm.metadata();
        rt.meta.send_replace(meta);
    }
    tracing::debug!(instance = %key, "sim: setMetadata");
    Ok(new_op(
        inner,
        ctx,
        Scope::Zone {
            project: project.into(),
            zone: zone.into(),
        },
        "setMetadata",
        key,
        id,
        ComputeEffect::None,
    ))
}

/// `GET …/instances/I/getGuestAttributes?queryPath=NS/` (or `NS/KEY`, or
/// `variableKey=NS/KEY`): the attributes the VM wrote through its metadata
/// server. Nothing under the path is 404 (compute's not-found form; Google's
/// exact text for guest attributes is not public).
pub(crate) fn get_guest_attributes(
    inner: &Inner,
    ctx: &Ctx,
    project: &str,
    zone: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let key = vm_key(project, zone, name);
    let vm = find_vm(inner, &key)?;
    let attrs: BTreeMap<String, String> = vm
        .runtime
        .as_ref()
        .map(|rt| rt.guest.lock().unwrap_or_else(|e| e.into_inner()).clone())
        .unwrap_or_default();
    let self_link = format!("{}/{key}/guestAttributes", ctx.compute_api());
    if let Some(var) = ctx.query("variableKey").filter(|s| !s.is_empty()) {
        let value = attrs
            .get(var)
            .ok_or_else(|| not_found(&format!("{key}/guestAttributes/{var}")))?;
        return Ok(
            json!({"kind": "compute#guestAttributes", "selfLink": self_link,
                         "variableKey": var, "variableValue": value}),
        );
    }
    let query = ctx.query("queryPath").unwrap_or_default();
    let entries: Vec<Value> = attrs
        .iter()
        .filter(|(k, _)| {
            if query.is_empty() {
                true
            } else if query.ends_with('/') {
                k.starts_with(query)
            } else {
                k.as_str() == query
            }
        })
        .filter_map(|(k, v)| {
            let (ns, key) = k.split_once('/')?;
            Some(json!({"namespace": ns, "key": key, "value": v}))
        })
        .collect();
    if entries.is_empty() {
        return Err(not_found(&format!("{key}/guestAttributes/{query}")));
    }
    Ok(json!({
        "kind": "compute#guestAttributes",
        "selfLink": self_link,
        "queryPath": query,
        "queryValue": {"items": entries},
    }))
}

/// Writes `NS/KEY` into a VM's guest attributes (what its metadata server
/// does on the VM's `PUT`).
pub(crate) fn put_guest_attribute(
    inner: &Inner,
    project: &str,
    zone: &str,
    instance: &str,
    path: &str,
    value: &str,
) -> Result<(), String> {
    let key = vm_key(project, zone, instance);
    let vm = inner
        .instances
        .get(&key)
        .ok_or_else(|| format!("no VM {key}"))?;
    let rt = vm
        .runtime
        .as_ref()
        .ok_or_else(|| format!("VM {key} has no metadata server"))?;
    if !path.contains('/') {
        return Err(format!("guest attribute {path:?} is not NAMESPACE/KEY"));
    }
    rt.guest
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(path.to_string(), value.to_string());
    Ok(())
}

/// One row of `GET /_sim/instances`.
pub(crate) fn instance_rows(inner: &Inner) -> Vec<Value> {
    inner
        .instances
        .values()
        .map(|vm| {
            json!({
                "name": vm.name,
                "zone": vm.zone,
                "project": vm.project,
                "status": vm.status,
                "metadataHost": vm.metadata_host().map(|a| a.to_string()),
            })
        })
        .collect()
}

/// The `(key, value)` pairs of a `Metadata.items` array (a missing value is empty).
fn metadata_items(items: Option<&Value>) -> Vec<(String, String)> {
    items
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| {
                    Some((
                        i.get("key")?.as_str()?.to_string(),
                        i.get("value")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "gce/tests.rs"]
mod tests;
