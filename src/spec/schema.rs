//! The JSON Schema of a spec document, for editors (yaml-language-server) and
//! `slicectl schema`. Committed as `schemas/slicectl.v1alpha1.schema.json`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::model::{Metadata, SliceSpec, TargetSpec};

/// Where the committed schema lives, relative to the repository root.
pub const SCHEMA_PATH: &str = "schemas/slicectl.v1alpha1.schema.json";

/// The `apiVersion` of every document.
#[derive(Serialize, Deserialize, JsonSchema)]
enum ApiVersion {
    /// The only version this release reads.
    #[serde(rename = "slicectl.dev/v1alpha1")]
    V1alpha1,
}

/// `kind: Target`.
#[derive(Serialize, Deserialize, JsonSchema)]
enum TargetKind {
    /// A target.
    Target,
}

/// `kind: Slice`.
#[derive(Serialize, Deserialize, JsonSchema)]
enum SliceKind {
    /// A slice.
    Slice,
}

/// A `Target` document: where slices go (project, zone, and a GKE cluster or a
/// self-managed kubeadm cluster on GCE) and the
/// owner id that scopes what this reconciler may change.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TargetDocument {
    /// Always `slicectl.dev/v1alpha1`.
    api_version: ApiVersion,
    /// `Target`.
    kind: TargetKind,
    /// Name (referenced by slices' `spec.target`) and free-form labels.
    metadata: Metadata,
    /// The target.
    spec: TargetSpec,
}

/// A `Slice` document: a TPU slice (or several identical ones) to run on a target.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SliceDocument {
    /// Always `slicectl.dev/v1alpha1`.
    api_version: ApiVersion,
    /// `Slice`.
    kind: SliceKind,
    /// Name (unique among slices; node pool names derive from it) and free-form labels.
    metadata: Metadata,
    /// The slice.
    spec: SliceSpec,
}

/// A slicectl spec document (`Target` or `Slice`). A file may hold several,
/// separated by `---`.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[schemars(title = "slicectl spec document (slicectl.dev/v1alpha1)")]
// Only its JSON schema is used: no value of it is ever held.
#[allow(clippy::large_enum_variant)]
enum SpecDocument {
    /// A target.
    Target(TargetDocument),
    /// A slice.
    Slice(SliceDocument),
}

/// The JSON Schema (draft-07, which yaml-language-server reads) of one spec
/// document: `oneOf` a `Target` or a `Slice` document.
pub fn json_schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft07().into_generator();
    let mut value = generator.into_root_schema_for::<SpecDocument>().to_value();
    if let Some(root) = value.as_object_mut() {
        // The kinds exclude each other, so exactly one branch matches.
        if let Some(branches) = root.remove("anyOf") {
            root.insert("oneOf".to_string(), branches);
        }
    }
    refine(&mut value);
    value
}

/// Adds the syntax rules validation enforces that a schema can express, so
/// that editors flag them while typing. (Validation stays the authority.)
fn refine(schema: &mut serde_json::Value) {
    let accelerators: Vec<serde_json::Value> = super::catalog::GENERATIONS
        .iter()
        .map(|g| serde_json::Value::String(g.accelerator.to_string()))
        .collect();
    let mut boot_disk_types: Vec<&str> = super::catalog::GENERATIONS
        .iter()
        .filter_map(|g| g.gce)
        .flat_map(|g| g.boot_disk_types.iter().copied())
        .collect();
    boot_disk_types.sort_unstable();
    boot_disk_types.dedup();
    let rules = [
        (
            "Metadata",
            "name",
            json!({"pattern": "^[a-z]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}),
        ),
        (
            "TargetSpec",
            "project",
            json!({"pattern": "^([a-z0-9.-]+:)?[a-z][-a-z0-9]{4,28}[a-z0-9]$"}),
        ),
        (
            "TargetSpec",
            "zone",
            json!({"pattern": "^[a-z]+-[a-z]+[0-9]+-[a-z]$"}),
        ),
        (
            "TargetSpec",
            "ownerId",
            json!({"pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 40}),
        ),
        (
            "GkeCluster",
            "location",
            json!({"pattern": "^[a-z]+-[a-z]+[0-9]+(-[a-z])?$"}),
        ),
        ("SliceSpec", "accelerator", json!({ "enum": accelerators })),
        (
            "SliceSpec",
            "topology",
            json!({"pattern": "^[0-9]+x[0-9]+(x[0-9]+)?$"}),
        ),
        (
            "SliceSpec",
            "replicas",
            json!({"minimum": 1, "maximum": 64}),
        ),
        (
            "NodeDefaults",
            "maxPodsPerNode",
            json!({"minimum": 8, "maximum": 256}),
        ),
        (
            "Capacity",
            "maxRunDuration",
            json!({"examples": ["72h", "24h", "90m"]}),
        ),
        (
            "Lifecycle",
            "operationTimeout",
            json!({"examples": ["45m", "2h"]}),
        ),
        (
            "GceCluster",
            "controlPlaneEndpoint",
            json!({"pattern": "^(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9.-]+):[0-9]{1,5}$",
                   "examples": ["10.128.0.2:6443", "cp.example.internal:6443"]}),
        ),
        (
            "Kubeadm",
            "kubernetesVersion",
            json!({"pattern": "^1\\.[0-9]+$", "examples": ["1.36", "1.35"]}),
        ),
        (
            "BootDisk",
            "sizeGb",
            json!({"minimum": 10, "maximum": 65536}),
        ),
        ("BootDisk", "type", json!({ "enum": boot_disk_types })),
        (
            "GceSlice",
            "metadata",
            json!({"propertyNames": {"pattern": "^[a-zA-Z0-9_-]{1,128}$"}}),
        ),
        (
            "GceSlice",
            "image",
            json!({"examples": ["projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-tpu7x"]}),
        ),
        (
            "GceSlice",
            "instanceTemplate",
            json!({"pattern": "^(https://(www|compute)\\.googleapis\\.com/compute/(v1|beta|alpha)/)?projects/[^/]+/(global|regions/[a-z0-9-]+)/instanceTemplates/[a-z]([-a-z0-9]*[a-z0-9])?$"}),
        ),
    ];
    for (definition, property, extra) in rules {
        let target = schema
            .get_mut("definitions")
            .and_then(|d| d.get_mut(definition))
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(property))
            .and_then(|p| p.as_object_mut());
        if let (Some(target), Some(extra)) = (target, extra.as_object()) {
            for (k, v) in extra {
                target.insert(k.clone(), v.clone());
            }
        }
    }
    // Rules across a definition's properties.
    let exclusive = [
        // Exactly one of kubeconfig and inCluster: true.
        (
            "KubeApi",
            json!({"oneOf": [
                {"required": ["kubeconfig"], "properties": {"inCluster": {"const": false}}},
                {"required": ["inCluster"], "properties": {"inCluster": {"const": true}},
                 "not": {"anyOf": [{"required": ["kubeconfig"]}, {"required": ["context"]}]}}
            ]}),
        ),
        // Exactly one of bootstrap and instanceTemplate.
        (
            "GceSlice",
            json!({"oneOf": [
                {"required": ["bootstrap"], "not": {"required": ["instanceTemplate"]}},
                {"required": ["instanceTemplate"],
                 "not": {"anyOf": [{"required": ["bootstrap"]}, {"required": ["image"]},
                                   {"required": ["bootDisk"]}, {"required": ["metadata"]}]}}
            ]}),
        ),
    ];
    for (definition, extra) in exclusive {
        let target = schema
            .get_mut("definitions")
            .and_then(|d| d.get_mut(definition))
            .and_then(|d| d.as_object_mut());
        if let (Some(target), Some(extra)) = (target, extra.as_object()) {
            for (k, v) in extra {
                target.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The schema as committed: pretty JSON with a trailing newline.
pub fn json_schema_string() -> String {
    let mut text = serde_json::to_string_pretty(&json_schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
#[path = "schema/tests.rs"]
mod tests;
