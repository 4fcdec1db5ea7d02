#![cfg(test)]
use super::*;

#[test]
fn schema_is_one_of_target_and_slice() {
    let schema = json_schema();
    let one_of = schema["oneOf"].as_array().expect("oneOf");
    assert_eq!(one_of.len(), 2);
    let text = schema.to_string();
    assert!(text.contains("slicectl.dev/v1alpha1"), "{text}");
    assert!(
        text.contains("`tpu7x`"),
        "accelerator docs in schema: {text}"
    );
    let accel = &schema["definitions"]["SliceSpec"]["properties"]["accelerator"];
    assert_eq!(accel["enum"].as_array().map(Vec::len), Some(5), "{accel}");
    let replicas = &schema["definitions"]["SliceSpec"]["properties"]["replicas"];
    assert_eq!(replicas["minimum"], 1);
    assert_eq!(replicas["maximum"], 64);
    assert!(text.contains("\"additionalProperties\":false"), "{text}");
}

/// The gce fields are in the schema, with their syntax rules.
#[test]
fn schema_covers_the_gce_backend() {
    let schema = json_schema();
    let defs = &schema["definitions"];
    let gce = &defs["GceCluster"]["properties"];
    for field in [
        "controlPlaneEndpoint",
        "kubeApi",
        "network",
        "subnetwork",
        "devicePlugin",
    ] {
        assert!(gce.get(field).is_some(), "GceCluster.{field}: {gce}");
    }
    assert!(
        gce["controlPlaneEndpoint"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("HOST:PORT")),
        "doc comments become descriptions"
    );
    assert_eq!(defs["KubeApi"]["oneOf"].as_array().map(Vec::len), Some(2));
    assert_eq!(defs["GceSlice"]["oneOf"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        defs["BootDisk"]["properties"]["type"]["enum"],
        json!(["hyperdisk-balanced", "pd-balanced"])
    );
    assert_eq!(
        defs["Kubeadm"]["properties"]["kubernetesVersion"]["pattern"],
        "^1\\.[0-9]+$"
    );
    assert!(defs["SliceSpec"]["properties"].get("gce").is_some());
}

/// The committed schema must be what the code generates.
#[test]
fn committed_schema_is_up_to_date() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_PATH);
    let generated = json_schema_string();
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        if std::env::var_os("SLICECTL_UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, &generated).expect("write schema");
            return;
        }
        panic!(
            "{SCHEMA_PATH} differs from the generated schema; regenerate it with\n    \
             cargo run -- schema > {SCHEMA_PATH}\n(or SLICECTL_UPDATE_SCHEMA=1 cargo test --lib spec::schema)"
        );
    }
}
