#![cfg(test)]
use super::*;
use serde_json::json;

#[test]
fn unknown_field_nested_message() {
    let d = container().unwrap();
    let body = json!({"nodePool": {"name": "a", "config": {"fooBar": 1}}});
    let errs = d.validate("CreateNodePoolRequest", "", &body).unwrap_err();
    assert_eq!(
        errs[0].message,
        "Invalid JSON payload received. Unknown name \"fooBar\" at 'node_pool.config': Cannot find field."
    );
}

#[test]
fn normalises_enums_and_int64() {
    let d = container().unwrap();
    let body = json!({"nodePool": {"name": "a", "placementPolicy": {"type": 1},
        "maxPodsConstraint": {"maxPodsPerNode": 32}, "initialNodeCount": "16"}});
    let out = d.validate("CreateNodePoolRequest", "", &body).unwrap();
    assert_eq!(out["nodePool"]["placementPolicy"]["type"], "COMPACT");
    assert_eq!(out["nodePool"]["maxPodsConstraint"]["maxPodsPerNode"], "32");
    assert_eq!(out["nodePool"]["initialNodeCount"], 16);
}

#[test]
fn snake_case_names_are_accepted() {
    let d = container().unwrap();
    let out = d
        .validate(
            "CreateNodePoolRequest",
            "",
            &json!({"node_pool": {"name": "a"}}),
        )
        .unwrap();
    assert_eq!(out["nodePool"]["name"], "a");
}

#[test]
fn compute_rejects_int_enum() {
    let d = compute().unwrap();
    let body = json!({"name": "wp", "workloadPolicy": {"type": 1}});
    let errs = d
        .validate("ResourcePolicy", "resource_policy_resource", &body)
        .unwrap_err();
    assert_eq!(
        errs[0].message,
        "Invalid value at 'resource_policy_resource.workload_policy.type' (type.googleapis.com/google.cloud.compute.v1.ResourcePolicyWorkloadPolicy.Type), 1"
    );
}
