#![cfg(test)]
use super::*;
use crate::discovery;

/// Every endpoint's method id exists in the embedded discovery document.
#[test]
fn method_ids_exist_in_discovery() {
    let cases = [
        ("GET", "/v1/projects/p/locations/l/clusters/c"),
        ("GET", "/v1/projects/p/locations/l/clusters/c/nodePools"),
        ("POST", "/v1/projects/p/locations/l/clusters/c/nodePools"),
        ("GET", "/v1/projects/p/locations/l/clusters/c/nodePools/n"),
        ("PUT", "/v1/projects/p/locations/l/clusters/c/nodePools/n"),
        (
            "DELETE",
            "/v1/projects/p/locations/l/clusters/c/nodePools/n",
        ),
        ("GET", "/v1/projects/p/locations/l/operations/o"),
        ("GET", "/v1/projects/p/locations/l/operations"),
        ("POST", "/compute/v1/projects/p/regions/r/resourcePolicies"),
        ("GET", "/compute/v1/projects/p/regions/r/resourcePolicies"),
        ("GET", "/compute/v1/projects/p/regions/r/resourcePolicies/x"),
        (
            "DELETE",
            "/compute/v1/projects/p/regions/r/resourcePolicies/x",
        ),
        ("GET", "/compute/v1/projects/p/aggregated/resourcePolicies"),
        ("GET", "/compute/v1/projects/p/regions/r/operations/o"),
        ("POST", "/compute/v1/projects/p/regions/r/operations/o/wait"),
        ("GET", "/compute/v1/projects/p/regions/r/operations"),
        ("GET", "/compute/beta/projects/p/zones/z/operations/o"),
        (
            "POST",
            "/compute/alpha/projects/p/zones/z/operations/o/wait",
        ),
        ("GET", "/compute/v1/projects/p/zones/z/operations"),
        ("GET", "/compute/v1/projects/p/global/operations/o"),
        ("POST", "/compute/v1/projects/p/global/operations/o/wait"),
        ("GET", "/compute/v1/projects/p/global/operations"),
        ("GET", "/compute/v1/projects/p/zones/z"),
        ("GET", "/compute/v1/projects/p/regions/r"),
        ("GET", "/compute/v1/projects/p/zones/z/reservations"),
        ("GET", "/compute/v1/projects/p/zones/z/reservations/x"),
        ("GET", "/compute/v1/projects/p/aggregated/reservations"),
        ("POST", "/compute/v1/projects/p/global/instanceTemplates"),
        ("GET", "/compute/v1/projects/p/global/instanceTemplates"),
        ("GET", "/compute/v1/projects/p/global/instanceTemplates/t"),
        (
            "DELETE",
            "/compute/v1/projects/p/global/instanceTemplates/t",
        ),
        (
            "POST",
            "/compute/v1/projects/p/zones/z/instanceGroupManagers",
        ),
        (
            "GET",
            "/compute/v1/projects/p/zones/z/instanceGroupManagers",
        ),
        (
            "GET",
            "/compute/v1/projects/p/zones/z/instanceGroupManagers/m",
        ),
        (
            "DELETE",
            "/compute/v1/projects/p/zones/z/instanceGroupManagers/m",
        ),
        (
            "PATCH",
            "/compute/v1/projects/p/zones/z/instanceGroupManagers/m",
        ),
        (
            "POST",
            "/compute/v1/projects/p/zones/z/instanceGroupManagers/m/listManagedInstances",
        ),
        (
            "GET",
            "/compute/v1/projects/p/zones/z/instanceGroupManagers/m/listErrors",
        ),
        ("GET", "/compute/v1/projects/p/zones/z/autoscalers"),
        ("GET", "/compute/v1/projects/p/zones/z/instanceGroups"),
        ("GET", "/compute/v1/projects/p/zones/z/instances"),
        ("GET", "/compute/v1/projects/p/aggregated/instances"),
        (
            "GET",
            "/compute/v1/projects/p/aggregated/instanceGroupManagers",
        ),
        ("GET", "/compute/v1/projects/p/aggregated/instanceTemplates"),
        ("GET", "/compute/v1/projects/p/aggregated/operations"),
        ("GET", "/compute/v1/projects/p/zones/z/instances/i"),
        (
            "POST",
            "/compute/v1/projects/p/zones/z/instances/i/setMetadata",
        ),
        (
            "GET",
            "/compute/v1/projects/p/zones/z/instances/i/getGuestAttributes",
        ),
        (
            "GET",
            "/v1/projects/p/locations/global/services/compute.googleapis.com/quotaInfos/q",
        ),
        (
            "GET",
            "/v1/projects/p/locations/global/services/compute.googleapis.com/quotaInfos",
        ),
        (
            "GET",
            "/v1beta/projects/p/locations/global/services/compute.googleapis.com/quotaInfos/q",
        ),
        ("GET", "/v3/projects/p/timeSeries"),
    ];
    for (m, path) in cases {
        let method = Method::from_bytes(m.as_bytes()).unwrap();
        let r = resolve(&method, path).unwrap_or_else(|| panic!("{m} {path}"));
        let id = r.endpoint.method_id();
        let doc = match r.api {
            Api::Container => discovery::container().unwrap(),
            Api::Compute => discovery::compute().unwrap(),
            Api::CloudQuotas => discovery::cloudquotas().unwrap(),
            Api::Monitoring => discovery::monitoring().unwrap(),
        };
        let spec = doc
            .method(&id)
            .unwrap_or_else(|| panic!("{id} not in discovery"));
        assert_eq!(spec["httpMethod"], m, "{id}");
    }
    assert!(
        resolve(
            &Method::PATCH,
            "/v1/projects/p/locations/l/clusters/c/nodePools/n"
        )
        .is_none()
    );
    assert!(resolve(&Method::GET, "/v2/projects/p").is_none());
}
