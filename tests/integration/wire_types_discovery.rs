//! Our GKE and compute wire types cannot silently miss a field: every field
//! of every type in `slicectl::resource::{gke, compute}` (as `schemars` derives
//! its JSON schema from the serde attributes) must exist in Google's discovery
//! document under the same JSON name, with a compatible JSON type. The types
//! read with `#[serde(default)]`, so without this a misspelt output field
//! would read as absent.

use std::collections::BTreeSet;
use std::path::Path;

use schemars::{JsonSchema, schema_for};
use serde::Deserialize;
use slicectl::resource::{compute, gke};
use slicectl_sim::discovery::{self, Discovery, WireCheck};

fn check<T: JsonSchema>(doc: &Discovery, schema_id: &str) -> WireCheck {
    doc.check_wire_type(schema_id, schema_for!(T).as_value())
}

/// Every request and response body we send or read, by discovery schema id.
/// Nested types are reached through these.
fn gke_roots(doc: &Discovery) -> Vec<WireCheck> {
    vec![
        check::<gke::NodePool>(doc, "NodePool"),
        check::<gke::CreateNodePoolRequest>(doc, "CreateNodePoolRequest"),
        check::<gke::UpdateNodePoolRequest>(doc, "UpdateNodePoolRequest"),
        check::<gke::ListClustersResponse>(doc, "ListClustersResponse"),
        check::<gke::ClusterAccess>(doc, "Cluster"),
        check::<gke::ListNodePoolsResponse>(doc, "ListNodePoolsResponse"),
        check::<gke::Operation>(doc, "Operation"),
        check::<gke::ListOperationsResponse>(doc, "ListOperationsResponse"),
    ]
}

fn compute_roots(doc: &Discovery) -> Vec<WireCheck> {
    vec![
        check::<compute::ResourcePolicy>(doc, "ResourcePolicy"),
        check::<compute::ResourcePolicyList>(doc, "ResourcePolicyList"),
        check::<compute::Operation>(doc, "Operation"),
        check::<compute::OperationList>(doc, "OperationList"),
        check::<compute::InstanceTemplate>(doc, "InstanceTemplate"),
        check::<compute::InstanceTemplateList>(doc, "InstanceTemplateList"),
        check::<compute::InstanceGroupManager>(doc, "InstanceGroupManager"),
        check::<compute::InstanceGroupManagerList>(doc, "InstanceGroupManagerList"),
        check::<compute::InstanceGroupManagerAggregatedList>(
            doc,
            "InstanceGroupManagerAggregatedList",
        ),
        check::<compute::InstanceGroupManagerPatch>(doc, "InstanceGroupManager"),
        check::<compute::RecreateInstancesRequest>(
            doc,
            "InstanceGroupManagersRecreateInstancesRequest",
        ),
        check::<compute::ManagedInstanceList>(
            doc,
            "InstanceGroupManagersListManagedInstancesResponse",
        ),
        check::<compute::IgmErrorList>(doc, "InstanceGroupManagersListErrorsResponse"),
        check::<compute::Instance>(doc, "Instance"),
        check::<compute::InstanceList>(doc, "InstanceList"),
        check::<compute::Metadata>(doc, "Metadata"),
        check::<compute::GuestAttributes>(doc, "GuestAttributes"),
        check::<compute::Region>(doc, "Region"),
        check::<compute::Reservation>(doc, "Reservation"),
    ]
}

/// The Cloud Quotas types (in `compute.rs`: they read Compute Engine's
/// quotas), against the Cloud Quotas document.
fn cloudquotas_roots(doc: &Discovery) -> Vec<WireCheck> {
    vec![check::<compute::QuotaInfo>(doc, "QuotaInfo")]
}

/// The Cloud Monitoring types (in `compute.rs`: the usage of Compute
/// Engine's quotas), against the Cloud Monitoring subset.
fn monitoring_roots(doc: &Discovery) -> Vec<WireCheck> {
    vec![check::<compute::ListTimeSeriesResponse>(
        doc,
        "ListTimeSeriesResponse",
    )]
}

#[test]
fn every_wire_field_is_in_the_discovery_documents() {
    let container = discovery::container().unwrap();
    let compute = discovery::compute().unwrap();
    let checks: Vec<WireCheck> = gke_roots(container)
        .into_iter()
        .chain(compute_roots(compute))
        .chain(cloudquotas_roots(discovery::cloudquotas().unwrap()))
        .chain(monitoring_roots(discovery::monitoring().unwrap()))
        .collect();
    let mismatches: Vec<&String> = checks.iter().flat_map(|c| &c.mismatches).collect();
    assert!(
        mismatches.is_empty(),
        "wire types disagree with Google's discovery documents:\n  {}",
        mismatches
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    // The walk reached the leaves (it did not read a nested schema as "any").
    let checked: BTreeSet<&str> = checks
        .iter()
        .flat_map(|c| c.checked.iter().map(String::as_str))
        .collect();
    for leaf in [
        "NodePool.config.shieldedInstanceConfig.enableSecureBoot",
        "NodePool.config.taints[].effect",
        "NodePool.config.labels",
        "NodePool.maxPodsConstraint.maxPodsPerNode",
        "NodePool.networkConfig.additionalNodeNetworkConfigs[].subnetwork",
        "CreateNodePoolRequest.nodePool.placementPolicy.type",
        "ListOperationsResponse.operations[].nodepoolConditions[].canonicalCode",
        "Operation.error.code",
        "Operation.error.errors[].code",
        "OperationList.items[].httpErrorStatusCode",
        "ResourcePolicyList.items[].workloadPolicy.acceleratorTopologyMode",
        "InstanceTemplate.properties.disks[].initializeParams.diskSizeGb",
        "InstanceTemplate.properties.scheduling.maxRunDuration.seconds",
        "InstanceTemplate.properties.metadata.items[].value",
        "InstanceTemplate.properties.reservationAffinity.values",
        "InstanceTemplate.properties.shieldedInstanceConfig.enableSecureBoot",
        "InstanceTemplate.properties.networkInterfaces[].accessConfigs[].type",
        "InstanceGroupManager.targetSizePolicy.mode",
        "InstanceGroupManager.resourcePolicies.workloadPolicy",
        "InstanceGroupManager.status.bulkInstanceOperation.lastProgressCheck.error.errors[].code",
        "InstanceGroupManager.status.appliedAcceleratorTopologies[].state",
        "InstanceGroupManager.status.currentInstanceStatuses.nonExistent",
        "InstanceGroupManager.currentActions.creating",
        "ManagedInstanceList.managedInstances[].lastAttempt.errors.errors[].message",
        "IgmErrorList.items[].instanceActionDetails.version.instanceTemplate",
        "InstanceList.items[].metadata.fingerprint",
        "Instance.networkInterfaces[].networkIP",
        "GuestAttributes.queryValue.items[].namespace",
        "Region.quotas[].usage",
        "Reservation.specificReservation.inUseCount",
        "QuotaInfo.dimensionsInfos[].details.value",
        "QuotaInfo.dimensionsInfos[].applicableLocations",
        "ListTimeSeriesResponse.timeSeries[].points[].value.int64Value",
        "ListTimeSeriesResponse.timeSeries[].resource.labels",
    ] {
        assert!(checked.contains(leaf), "{leaf} not checked: {checked:#?}");
    }
}

/// `pub struct` names declared in a source file under `src/resource/`.
fn declared_structs(file: &str) -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/resource")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("pub struct "))
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

/// A wire type added later is checked only if a root reaches it: fail when a
/// struct in `gke.rs`/`compute.rs` is reached by none.
#[test]
fn every_wire_type_is_reached_by_a_checked_root() {
    let cases = [
        ("gke.rs", gke_roots(discovery::container().unwrap())),
        (
            "compute.rs",
            compute_roots(discovery::compute().unwrap())
                .into_iter()
                .chain(cloudquotas_roots(discovery::cloudquotas().unwrap()))
                .chain(monitoring_roots(discovery::monitoring().unwrap()))
                .collect(),
        ),
    ];
    for (file, checks) in cases {
        let reached: BTreeSet<String> = checks.into_iter().flat_map(|c| c.rust_types).collect();
        let declared = declared_structs(file);
        assert!(!declared.is_empty(), "no structs found in {file}");
        let missed: Vec<&String> = declared.difference(&reached).collect();
        assert!(
            missed.is_empty(),
            "src/resource/{file}: {missed:?} not reached by any root in tests/integration/wire_types_discovery.rs"
        );
    }
}

// ---- the walk itself catches what it must --------------------------------

/// A `NodePool` with a misspelt output field, a wrong type, a bad nested
/// field and an int64 read as a JSON number.
#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct BadNodePool {
    name: String,
    #[serde(default, rename = "statuss")]
    status: Option<String>,
    #[serde(default)]
    initial_node_count: Option<String>,
    #[serde(default)]
    config: Option<BadNodeConfig>,
    #[serde(default)]
    max_pods_constraint: Option<BadMaxPods>,
    #[serde(default)]
    conditions: Vec<BadCondition>,
    #[serde(default)]
    locations: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    placement_policy: Option<BadPlacement>,
}

#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct BadNodeConfig {
    #[serde(default)]
    machne_type: String,
    #[serde(default)]
    disk_size_gb: Option<i16>,
    #[serde(default)]
    labels: std::collections::BTreeMap<String, i32>,
}

#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct BadMaxPods {
    max_pods_per_node: i64,
}

#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct BadCondition {
    #[serde(default)]
    canonical_code: Option<bool>,
}

#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct BadPlacement {
    #[serde(rename = "type")]
    kind: Option<BadPlacementType>,
}

#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum BadPlacementType {
    Compact,
    Scattered,
}

#[test]
fn the_walk_reports_misspelt_fields_and_wrong_types_with_their_paths() {
    let doc = discovery::container().unwrap();
    let got = check::<BadNodePool>(doc, "NodePool");
    let want = [
        "BadNodePool.statuss: not in container v1 NodePool",
        "BadNodePool.initialNodeCount: ours is string, container v1 NodePool.initialNodeCount is integer (int32)",
        "BadNodePool.config.machneType: not in container v1 NodeConfig",
        "BadNodePool.config.diskSizeGb: ours is integer (int16), container v1 NodeConfig.diskSizeGb is integer (int32) (our range does not hold theirs)",
        "BadNodePool.config.labels{}: ours is integer (int32), container v1 NodeConfig.labels{} is string",
        "BadNodePool.maxPodsConstraint.maxPodsPerNode: ours is integer (int64), container v1 MaxPodsConstraint.maxPodsPerNode is string (int64) (64-bit integers travel as JSON strings: #[serde(with = \"int64_string\")] #[schemars(with = \"String\")])",
        "BadNodePool.conditions[].canonicalCode: ours is boolean, container v1 StatusCondition.canonicalCode is string (enum)",
        "BadNodePool.locations: ours is map (additionalProperties), container v1 NodePool.locations is array",
        "BadNodePool.placementPolicy.type: enum value \"SCATTERED\" not in container v1 PlacementPolicy.type",
    ];
    let mut got_sorted = got.mismatches.clone();
    got_sorted.sort();
    let mut want_sorted: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want_sorted.sort();
    assert_eq!(
        got_sorted,
        want_sorted,
        "got:\n{}",
        got.mismatches.join("\n")
    );
    for t in [
        "BadNodePool",
        "BadNodeConfig",
        "BadMaxPods",
        "BadCondition",
        "BadPlacement",
    ] {
        assert!(got.rust_types.contains(t), "{t} not recorded: {got:?}");
    }
}

#[test]
fn the_walk_reports_an_unknown_schema_id() {
    let doc = discovery::compute().unwrap();
    let got = check::<compute::ResourcePolicy>(doc, "ResourcePolicyy");
    assert_eq!(
        got.mismatches,
        ["ResourcePolicy: no schema ResourcePolicyy in compute v1"]
    );
}

/// compute's `Operation.error` is an inline object (no schema id).
#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct BadComputeOperation {
    #[serde(default)]
    error: Option<BadComputeError>,
}

#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
struct BadComputeError {
    #[serde(default)]
    errors: Vec<BadComputeErrorItem>,
}

#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
struct BadComputeErrorItem {
    #[serde(default)]
    cod: String,
}

#[test]
fn the_walk_goes_into_inline_discovery_objects_and_accepts_the_int64_adapter() {
    let compute = discovery::compute().unwrap();
    let got = check::<BadComputeOperation>(compute, "Operation");
    assert_eq!(
        got.mismatches,
        ["BadComputeOperation.error.errors[].cod: not in compute v1 Operation.error.errors[]"]
    );
    // maxPodsPerNode reads int64 strings through `int64_string`.
    let container = discovery::container().unwrap();
    let got = check::<gke::MaxPodsConstraint>(container, "MaxPodsConstraint");
    assert!(got.mismatches.is_empty(), "{:?}", got.mismatches);
}
