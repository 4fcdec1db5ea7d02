#![cfg(test)]
use super::*;
use crate::resource::compute::{OperationError, OperationErrorItem};

/// `Page` reads with `#[serde(default)]`: a misspelt name would end a
/// listing after its first page. See tests/integration/wire_types_discovery.rs.
#[test]
fn page_fields_are_in_the_compute_discovery_document() {
    let doc = slicectl_sim::discovery::compute().unwrap();
    for (schema, id, leaf) in [
        (
            schemars::schema_for!(Page<ResourcePolicy>),
            "ResourcePolicyList",
            ".items[].name",
        ),
        (
            schemars::schema_for!(Page<Operation>),
            "OperationList",
            ".items[].name",
        ),
        (
            schemars::schema_for!(Page<InstanceTemplate>),
            "InstanceTemplateList",
            ".items[].name",
        ),
        (
            schemars::schema_for!(Page<InstanceGroupManager>),
            "InstanceGroupManagerList",
            ".items[].name",
        ),
        (
            schemars::schema_for!(Page<Instance>),
            "InstanceList",
            ".items[].name",
        ),
        (
            schemars::schema_for!(Page<InstanceManagedByIgmError>),
            "InstanceGroupManagersListErrorsResponse",
            ".items[].error.code",
        ),
    ] {
        let check = doc.check_wire_type(id, schema.as_value());
        assert!(check.mismatches.is_empty(), "{:?}", check.mismatches);
        assert!(check.checked.iter().any(|p| p.ends_with(".nextPageToken")));
        assert!(check.checked.iter().any(|p| p.ends_with(leaf)), "{id}");
    }
}

fn op(zone: Option<&str>, region: Option<&str>) -> Operation {
    Operation {
        name: "operation-1".into(),
        status: "RUNNING".into(),
        self_link: Some("https://compute.googleapis.com/compute/v1/projects/my-proj/regions/r/operations/operation-1".into()),
        zone: zone.map(Into::into),
        region: region.map(Into::into),
        ..Operation::default()
    }
}

#[test]
fn scope_of_operation() {
    assert_eq!(
        ComputeScope::of_operation(&op(
            Some("https://compute.googleapis.com/compute/v1/projects/p/zones/us-central2-b"),
            None
        )),
        ComputeScope::Zone("us-central2-b".into())
    );
    assert_eq!(
        ComputeScope::of_operation(&op(
            None,
            Some("http://127.0.0.1:9/compute/v1/projects/p/regions/us-central2")
        )),
        ComputeScope::Region("us-central2".into())
    );
    assert_eq!(
        ComputeScope::of_operation(&op(None, None)),
        ComputeScope::Global
    );
    let (project, _) = operation_location(&op(None, None)).unwrap();
    assert_eq!(project, "my-proj");
    let mut no_links = op(None, None);
    no_links.self_link = None;
    assert!(operation_location(&no_links).is_err());
    no_links.target_link = Some("projects/p2/global/instanceTemplates/t".into());
    assert_eq!(operation_location(&no_links).unwrap().0, "p2");
}

#[test]
fn failed_operation_is_an_error() {
    let mut o = op(Some("zones/z"), None);
    o.status = "DONE".into();
    o.error = Some(OperationError {
        errors: vec![
            OperationErrorItem {
                code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
                message: "The zone does not have enough resources".into(),
            },
            OperationErrorItem {
                code: "QUOTA".into(),
                message: "also".into(),
            },
        ],
    });
    o.http_error_status_code = Some(503);
    let err = operation_result(o.clone()).unwrap_err();
    assert!(
        matches!(&err, CloudError::OperationFailed { code, message, .. }
        if code == "ZONE_RESOURCE_POOL_EXHAUSTED" && message.contains("enough resources") && message.contains("QUOTA: also"))
    );
    assert!(err.is_stockout());
    // Only an HTTP error code.
    o.error = None;
    o.http_error_message = Some("SERVICE UNAVAILABLE".into());
    assert!(
        matches!(operation_result(o.clone()).unwrap_err(), CloudError::OperationFailed { code, .. } if code == "HTTP_503")
    );
    // Clean.
    o.http_error_status_code = None;
    assert!(operation_result(o).is_ok());
}

/// The filter names the operations waited on in Compute's regular
/// expression form; anything that is not a plain name, or a filter too
/// long for a URL, lists everything instead.
#[test]
fn waits_filter_the_list_by_name() {
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        waiting_filter(&names(&["operation-1-a", "operation-2_b"])).as_deref(),
        Some("name eq \"operation-1-a|operation-2_b\"")
    );
    assert_eq!(waiting_filter(&[]), None);
    assert_eq!(waiting_filter(&names(&["op.1"])), None);
    assert_eq!(waiting_filter(&names(&["a|b"])), None);
    let many: Vec<String> = (0..200).map(|i| format!("operation-{i:040}")).collect();
    assert_eq!(waiting_filter(&many), None);
}

#[test]
fn template_links() {
    assert_eq!(
        template_of_link(
            "https://compute.googleapis.com/compute/v1/projects/p/global/instanceTemplates/t"
        )
        .unwrap(),
        ("p".to_string(), "t".to_string())
    );
    assert_eq!(
        template_of_link("projects/p2/global/instanceTemplates/t2").unwrap(),
        ("p2".to_string(), "t2".to_string())
    );
    assert!(template_of_link("projects/p/regions/r/instanceTemplates/t").is_err());
    assert!(template_of_link("t").is_err());
}

#[test]
fn project_links() {
    assert_eq!(project_of_link("projects/a/zones/z"), Some("a"));
    assert_eq!(
        project_of_link("https://h/compute/v1/projects/b/global/x"),
        Some("b")
    );
    assert_eq!(project_of_link("https://h/compute/v1/"), None);
}
