#![cfg(test)]
use super::*;
use crate::resource::gke::{RpcStatus, StatusCondition};

#[test]
fn cluster_paths() {
    let c = ClusterRef::new("p", "us-central2", "c1");
    assert_eq!(c.path(), "projects/p/locations/us-central2/clusters/c1");
    assert_eq!(
        c.node_pool_path("np"),
        "projects/p/locations/us-central2/clusters/c1/nodePools/np"
    );
    assert_eq!(ClusterRef::parse(&c.path()).unwrap(), c);
    assert_eq!(
        ClusterRef::parse(
            "https://container.googleapis.com/v1/projects/p/zones/us-central2/clusters/c1"
        )
        .unwrap(),
        c
    );
    assert!(ClusterRef::parse("projects/p/clusters/c").is_err());
    assert!(ClusterRef::new("p", "l/x", "c").checked_path().is_err());
}

#[test]
fn short_names() {
    assert_eq!(short_name("operation-1"), "operation-1");
    assert_eq!(
        short_name("projects/p/locations/l/operations/operation-1"),
        "operation-1"
    );
}

fn done(error: Option<RpcStatus>, conditions: Vec<StatusCondition>) -> Operation {
    Operation {
        name: "operation-1".into(),
        status: "DONE".into(),
        error,
        nodepool_conditions: conditions,
        ..Operation::default()
    }
}

#[test]
fn a_stockout_in_cluster_conditions_is_a_stockout() {
    let mut op = done(
        Some(RpcStatus {
            code: 8,
            message: "Insufficient capacity.".into(),
        }),
        vec![],
    );
    op.cluster_conditions = vec![StatusCondition {
        code: Some("GCE_STOCKOUT".into()),
        message: Some("no TPU capacity in us-central2-b".into()),
        ..Default::default()
    }];
    let err = operation_result(op).unwrap_err();
    assert!(err.is_stockout(), "{err}");
    assert!(
        matches!(&err, CloudError::OperationFailed { code, .. } if code == "GCE_STOCKOUT"),
        "{err}"
    );
}

#[test]
fn done_with_error_is_a_failure() {
    let err = operation_result(done(
        Some(RpcStatus {
            code: 8,
            message: "quota".into(),
        }),
        vec![],
    ))
    .unwrap_err();
    assert!(
        matches!(&err, CloudError::OperationFailed { operation, code, message }
        if operation == "operation-1" && code == "RESOURCE_EXHAUSTED" && message == "quota")
    );
    assert!(!err.is_stockout());
}

#[test]
fn stockout_condition_gives_the_specific_code() {
    let cond = StatusCondition {
        code: Some("GCE_STOCKOUT".into()),
        message: Some("Try a different zone".into()),
        canonical_code: None,
    };
    let err = operation_result(done(
        Some(RpcStatus {
            code: 8,
            message: "no capacity".into(),
        }),
        vec![cond.clone()],
    ))
    .unwrap_err();
    assert!(matches!(&err, CloudError::OperationFailed { code, .. } if code == "GCE_STOCKOUT"));
    assert!(err.is_stockout());
    // Even without `error`, a stockout condition on a DONE operation is a failure.
    let err = operation_result(done(None, vec![cond])).unwrap_err();
    assert!(err.is_stockout());
}

#[test]
fn done_without_error_is_ok() {
    assert!(operation_result(done(None, vec![])).is_ok());
}

/// Observation's operations list keeps, as it decodes, only what it reads:
/// running operations and failed ones, in the list's order; a list with no
/// operations is empty, and a malformed operation is an error, never a
/// shorter list.
#[test]
fn the_unsettled_operations_are_kept_as_the_list_is_decoded() {
    let op = |name: &str, status: &str, error: &str| {
        format!(
            r#"{{"name":"{name}","operationType":"CREATE_NODE_POOL","status":"{status}"{error},
                "targetLink":"https://container.googleapis.com/v1/projects/p/locations/l/clusters/c/nodePools/{name}"}}"#
        )
    };
    let failed = r#","error":{"code":8,"message":"stockout"}"#;
    let body = format!(
        r#"{{"operations":[{},{},{},{},{}]}}"#,
        op("a", "DONE", ""),
        op("b", "RUNNING", ""),
        op("c", "DONE", failed),
        op("d", "PENDING", ""),
        op("e", "DONE", ""),
    );
    let kept: UnsettledOperations = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = kept.operations.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["b", "c", "d"]);
    assert!(kept.operations.iter().all(is_unsettled));
    assert_eq!(
        kept.operations[1]
            .error
            .as_ref()
            .map(|e| e.message.as_str()),
        Some("stockout")
    );
    let empty: UnsettledOperations = serde_json::from_str("{}").unwrap();
    assert!(empty.operations.is_empty());
    let bad = r#"{"operations":[{"name":"a","status":7}]}"#;
    assert!(serde_json::from_str::<UnsettledOperations>(bad).is_err());
}
