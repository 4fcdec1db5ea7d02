#![cfg(test)]
use super::*;

/// `deploy/crd-slicestatus.yaml` is what the Rust types generate.
/// `UPDATE_CRD=1 cargo test --lib status_object::crd` rewrites it.
#[test]
fn committed_crd_matches_the_types() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crd-slicestatus.yaml");
    let generated = crd_yaml().unwrap();
    if std::env::var_os("UPDATE_CRD").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap();
    if committed != generated {
        let diff = similar::TextDiff::from_lines(&committed, &generated);
        panic!(
            "{} differs from the CRD the types generate; run `slicectl crd > deploy/crd-slicestatus.yaml` \
             (or UPDATE_CRD=1 cargo test --lib status_object::crd):\n{}",
            path.display(),
            diff.unified_diff().header("committed", "generated")
        );
    }
}

#[test]
fn the_crd_defaults_observed_generation_to_minus_one_and_has_the_columns() {
    use kube::CustomResourceExt as _;
    let crd = serde_json::to_value(SliceStatus::crd()).unwrap();
    let v = &crd["spec"]["versions"][0];
    assert_eq!(
        v["schema"]["openAPIV3Schema"]["properties"]["status"]["default"],
        serde_json::json!({"observedGeneration": -1})
    );
    let cols: Vec<&str> = v["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(cols, ["Ready", "Reason", "Nodes", "Age"]);
    assert_eq!(v["subresources"]["status"], serde_json::json!({}));
    assert_eq!(crd["spec"]["names"]["shortNames"][0], SHORT_NAME);
}
