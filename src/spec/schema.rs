//! The JSON Schema of a spec document, for editors (yaml-language-server) and
//! `slicectl schema`. Committed as `schemas/slicectl.v1alpha1.schema.json`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// A `Target` document: where slices go (project, zone, GKE cluster) and the
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
        root.insert(
            "$id".to_string(),
            serde_json::Value::String(
                "https://slicectl.dev/schemas/slicectl.v1alpha1.schema.json".to_string(),
            ),
        );
    }
    value
}

/// The schema as committed: pretty JSON with a trailing newline.
pub fn json_schema_string() -> String {
    let mut text = serde_json::to_string_pretty(&json_schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_one_of_target_and_slice() {
        let schema = json_schema();
        let one_of = schema["oneOf"].as_array().expect("oneOf");
        assert_eq!(one_of.len(), 2);
        let text = schema.to_string();
        assert!(text.contains("slicectl.dev/v1alpha1"), "{text}");
        assert!(text.contains("\"tpu7x"), "accelerator docs in schema: {text}");
        assert!(text.contains("\"additionalProperties\":false"), "{text}");
    }
}
