//! GKE's and Compute Engine's rules on a node pool create that need more of
//! the simulated world than the request body: the named placement policy
//! must exist, a TPU machine type must be offered in the pool's zones, and a
//! specific reservation must exist and have room for the pool's nodes.
//! Called from `gke::create_pool`; each rule cites its public source.

use serde_json::{Map, Value};

use super::errors::ApiError;
use super::gke::{ClusterRef, default_locations, is_zone};
use super::state::Inner;

/// The reservation affinity key GKE and gcloud use for a specific
/// reservation (the v1 discovery text reads `googleapis.com/reservation-name`
/// with its markup mangled; both are accepted).
const RESERVATION_KEYS: [&str; 2] = [
    "compute.googleapis.com/reservation-name",
    "googleapis.com/reservation-name",
];

/// The checks that depend only on the request and the world as it is:
/// placement policy and machine type zones. Run before GKE's sizing rules.
pub(crate) fn check_request(
    inner: &Inner,
    c: &ClusterRef,
    pool: &Map<String, Value>,
    request_id: &str,
) -> Result<(), ApiError> {
    check_policy_name(inner, c, pool)
        .and_then(|()| check_machine_type_zones(c, pool))
        .map_err(|e| e.with_request_info(request_id))
}

/// The region of the cluster (its location, or its zone's region).
fn cluster_region(c: &ClusterRef) -> &str {
    if is_zone(&c.location) {
        crate::tpu::region_of(&c.location)
    } else {
        c.location.as_str()
    }
}

/// The zones a pool's nodes go to: its `locations`, or the cluster's.
fn pool_zones(c: &ClusterRef, pool: &Map<String, Value>) -> Vec<String> {
    match pool.get("locations").and_then(Value::as_array) {
        Some(zones) if !zones.is_empty() => zones
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => default_locations(&c.location),
    }
}

/// `placementPolicy.policyName` must name a resource policy in the node
/// pool's project and region. Container v1 discovery, `PlacementPolicy.policyName`:
/// "The resource policy must be in the same project and region as the node
/// pool. If not found, InvalidArgument error is returned." The message text
/// is not from a source (none public was found); it is this simulator's,
/// in GKE's style.
fn check_policy_name(
    inner: &Inner,
    c: &ClusterRef,
    pool: &Map<String, Value>,
) -> Result<(), ApiError> {
    let Some(policy) = pool
        .get("placementPolicy")
        .and_then(|p| p.get("policyName"))
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
    else {
        return Ok(());
    };
    let region = cluster_region(c);
    let key = format!(
        "projects/{}/regions/{region}/resourcePolicies/{policy}",
        c.project
    );
    // A full path is accepted only when it names the pool's project and
    // region (a policy elsewhere is "not found" for this pool).
    let found = if policy.contains('/') {
        let path = policy
            .split_once("projects/")
            .map(|(_, rest)| format!("projects/{rest}"))
            .unwrap_or_default();
        path.starts_with(&format!("projects/{}/regions/{region}/", c.project))
            && inner.policies.contains_key(&path)
    } else {
        inner.policies.contains_key(&key)
    };
    if found {
        return Ok(());
    }
    Err(ApiError::invalid(
        "badRequest",
        format!(
            "Placement policy \"{policy}\" was not found in project \"{}\" region \"{region}\": \
             the resource policy must be in the same project and region as the node pool.",
            c.project
        ),
    ))
}

/// A TPU machine type must be offered in every zone of the pool, as Compute
/// Engine offers it (the zones of `crate::tpu`, from Google's "TPU regions
/// and zones"). GKE's answer for a machine type a zone does not offer:
/// `Error 400: Invalid machine type "e2-standard-4" in zone "us-central2-b":
/// GCE_NOT_FOUND` (keras-team/kinetic#305). Only TPU machine types are
/// checked: the simulator's TPU tables (`crate::tpu`) know no other's zones.
fn check_machine_type_zones(c: &ClusterRef, pool: &Map<String, Value>) -> Result<(), ApiError> {
    let Some(machine) = pool
        .get("config")
        .and_then(|c| c.get("machineType"))
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    let Some(generation) = crate::tpu::machine_type(machine).map(|m| m.generation) else {
        return Ok(());
    };
    match pool_zones(c, pool)
        .into_iter()
        .find(|z| !generation.offered_in(z))
    {
        None => Ok(()),
        Some(zone) => Err(ApiError::invalid(
            "badRequest",
            format!("Invalid machine type \"{machine}\" in zone \"{zone}\": GCE_NOT_FOUND"),
        )),
    }
}

/// The specific reservation a pool consumes: `(project, name)` for each
/// value of a `SPECIFIC_RESERVATION` affinity (`NAME` in the pool's project,
/// or `projects/P/reservations/NAME` for a shared one), with the value as
/// given.
pub(crate) fn reservations_of(project: &str, pool: &Value) -> Vec<(String, String, String)> {
    let Some(affinity) = pool.pointer("/config/reservationAffinity") else {
        return Vec::new();
    };
    let specific = affinity
        .get("consumeReservationType")
        .and_then(Value::as_str)
        == Some("SPECIFIC_RESERVATION");
    let keyed = affinity
        .get("key")
        .and_then(Value::as_str)
        .is_some_and(|k| RESERVATION_KEYS.contains(&k));
    if !specific || !keyed {
        return Vec::new();
    }
    affinity
        .get("values")
        .and_then(Value::as_array)
        .map(|values| {
            values
                .iter()
                .filter_map(Value::as_str)
                .map(|v| {
                    match v.strip_prefix("projects/").and_then(|r| {
                        let (p, rest) = r.split_once('/')?;
                        Some((p, rest.strip_prefix("reservations/")?))
                    }) {
                        Some((p, name)) => (p.to_string(), name.to_string(), v.to_string()),
                        None => (project.to_string(), v.to_string(), v.to_string()),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Nodes a pool puts in each of its zones.
pub(crate) fn nodes_per_zone(pool: &Value) -> u32 {
    pool.get("initialNodeCount")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0)
}

/// A node pool that consumes a specific reservation needs it to exist in
/// each of its zones, with room for its nodes next to those of the live
/// pools already consuming it (a pool left in `ERROR` holds no VM).
///
/// - Missing: `Error 404: Google Compute Engine: reservation "NAME" not found
///   for node pool "POOL" at zone "ZONE".` (GoogleCloudPlatform/cluster-toolkit#5043,
///   for a reservation block path; the same words for a plain name).
/// - Full: `code=429, message=Reservation does not have enough resources for
///   the request: specific reservation "reservation" is insufficient for node
///   pool "np4" at zone "us-central1-c": required 1 and short of 1 VM count of
///   machine type n2-standard-2.` (GoogleCloudPlatform/gsutil#1000). The
///   legacy `errors[].reason` is not in the source; `resourceExhausted` is
///   this simulator's choice.
pub(crate) fn check_reservation(
    inner: &Inner,
    c: &ClusterRef,
    name: &str,
    pool: &Map<String, Value>,
    request_id: &str,
) -> Result<(), ApiError> {
    let body = Value::Object(pool.clone());
    let wanted = reservations_of(&c.project, &body);
    if wanted.is_empty() {
        return Ok(());
    }
    let required = nodes_per_zone(&body);
    let machine = body
        .pointer("/config/machineType")
        .and_then(Value::as_str)
        .unwrap_or_default();
    for zone in pool_zones(c, pool) {
        let mut first_full: Option<(String, u32)> = None;
        let mut any_exists = false;
        let mut fits = false;
        for (project, res, given) in &wanted {
            let key = format!("projects/{project}/zones/{zone}/reservations/{res}");
            let Some(size) = inner.faults.config.reservations.get(&key) else {
                continue;
            };
            any_exists = true;
            let used = super::quotas::reservation_in_use(inner, project, &zone, res);
            let free = size.saturating_sub(used);
            if required <= free {
                fits = true;
                break;
            }
            if first_full.is_none() {
                first_full = Some((given.clone(), required - free));
            }
        }
        if fits {
            continue;
        }
        let given = wanted.first().map(|w| w.2.as_str()).unwrap_or_default();
        return Err(match (any_exists, first_full) {
            (true, Some((res, short))) => ApiError::capacity_exhausted(format!(
                "Reservation does not have enough resources for the request: specific reservation \"{res}\" \
                 is insufficient for node pool \"{name}\" at zone \"{zone}\": required {required} and \
                 short of {short} VM count of machine type {machine}."
            )),
            _ => ApiError::not_found(format!(
                "Google Compute Engine: reservation \"{given}\" not found for node pool \"{name}\" at zone \"{zone}\"."
            )),
        }
        .with_request_info(request_id));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shared_and_local_reservations_resolve_to_project_and_name() {
        let pool = json!({"config": {"reservationAffinity": {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": ["r1", "projects/shared/reservations/r2"]}}});
        let got: Vec<(String, String)> = reservations_of("p", &pool)
            .into_iter()
            .map(|(p, n, _)| (p, n))
            .collect();
        assert_eq!(
            got,
            vec![
                ("p".to_string(), "r1".to_string()),
                ("shared".to_string(), "r2".to_string())
            ]
        );
        let any = json!({"config": {"reservationAffinity": {"consumeReservationType": "ANY_RESERVATION"}}});
        assert!(reservations_of("p", &any).is_empty());
    }
}
