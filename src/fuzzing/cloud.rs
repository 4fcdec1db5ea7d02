//! The Google Cloud APIs' answers (GKE container v1, Compute Engine v1), as
//! slicectl decodes them and then reads them.

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cloud::error::api_error;
use crate::cloud::gke::UnsettledOperations;
use crate::cloud::{CloudError, ClusterRef, ComputeScope};
use crate::kinds::gce::mig;
use crate::resource::{compute, gke};
use crate::spec::model::GkeEndpoint;

/// `body` decoded as `T`, if it is one; the value re-encoded decodes to
/// itself.
fn decoded<T>(body: &[u8]) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let v: T = serde_json::from_slice(body).ok()?;
    // A fuzz invariant, not input handling: this panic is the finding the fuzzer reports.
    let text = serde_json::to_vec(&v).expect("a decoded answer serialises");
    let again: T = serde_json::from_slice(&text).unwrap_or_else(|e| {
        panic!(
            "a decoded {} does not read back: {e}\n{}",
            std::any::type_name::<T>(),
            String::from_utf8_lossy(&text)
        )
    });
    assert_eq!(again, v, "round trip of {}", std::any::type_name::<T>());
    Some(v)
}

/// What every caller does with a cloud error: show it, classify it.
fn error_read(e: &CloudError) {
    let _ = e.to_string();
    let _ = e.is_retryable();
    let _ = crate::observe::unseen(e);
}

fn gke_operation(op: gke::Operation) {
    let _ = crate::cloud::gke::is_unsettled(&op);
    if let Err(e) = crate::cloud::gke::operation_result(op) {
        error_read(&e);
    }
}

fn compute_operation(op: compute::Operation) {
    let _ = ComputeScope::of_operation(&op);
    if let Err(e) = crate::cloud::compute::operation_result(op) {
        error_read(&e);
    }
}

fn cluster_access(cluster: &gke::ClusterAccess) {
    let c = ClusterRef::new("p", "us-central2", "c");
    for want in [GkeEndpoint::Public, GkeEndpoint::Private, GkeEndpoint::Dns] {
        let Ok(server) = crate::kube::gke::resolve_server(&c, cluster, want) else {
            continue;
        };
        let k = crate::kube::gke::kubeconfig(&c, &server, None);
        let options = kube::config::KubeConfigOptions::default();
        let _ = futures::executor::block_on(kube::Config::from_custom_kubeconfig(k, &options));
    }
}

fn mig_read(m: &compute::InstanceGroupManager) {
    let _ = mig::recorded_stamp(m);
    let _ = mig::running_vms(m);
    let _ = mig::not_ready(m);
    let _ = mig::creation_error(m);
}

/// Target `cloud`: the first byte picks the answer (a GKE or Compute type,
/// or an error body with the next two bytes as its HTTP status), the rest is
/// its JSON.
pub fn cloud(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 16 {
        0 => {
            let _ = decoded::<gke::ListNodePoolsResponse>(body);
        }
        1 => {
            if let Some(op) = decoded::<gke::Operation>(body) {
                gke_operation(op);
            }
        }
        2 => {
            if let Some(list) = decoded::<gke::ListOperationsResponse>(body) {
                list.operations.into_iter().for_each(gke_operation);
            }
            if let Ok(kept) = serde_json::from_slice::<UnsettledOperations>(body) {
                assert!(kept.operations.iter().all(crate::cloud::gke::is_unsettled));
            }
        }
        3 => {
            if let Some(cluster) = decoded::<gke::ClusterAccess>(body) {
                cluster_access(&cluster);
            }
        }
        4 => {
            let _ = decoded::<gke::ListClustersResponse>(body);
        }
        5 => {
            if let Some(op) = decoded::<compute::Operation>(body) {
                compute_operation(op);
            }
        }
        6 => {
            if let Some(list) = decoded::<compute::OperationList>(body) {
                list.items.into_iter().for_each(compute_operation);
            }
        }
        7 => {
            let _ = decoded::<compute::ResourcePolicyList>(body);
        }
        8 => {
            if let Some(list) = decoded::<compute::InstanceTemplateList>(body) {
                for t in &list.items {
                    let _ = mig::check_brought_template(t);
                }
            }
        }
        9 => {
            if let Some(list) = decoded::<compute::InstanceGroupManagerAggregatedList>(body) {
                for scoped in list.items.values() {
                    scoped.instance_group_managers.iter().for_each(mig_read);
                }
            }
        }
        10 => {
            if let Some(m) = decoded::<compute::InstanceGroupManager>(body) {
                mig_read(&m);
            }
        }
        11 => {
            let _ = decoded::<compute::ManagedInstanceList>(body);
            let _ = decoded::<compute::IgmErrorList>(body);
        }
        12 => {
            let _ = decoded::<compute::InstanceList>(body);
            let _ = decoded::<compute::GuestAttributes>(body);
        }
        13 => {
            let _ = decoded::<compute::Region>(body);
            let _ = decoded::<compute::ListTimeSeriesResponse>(body);
            let _ = decoded::<compute::Reservation>(body);
        }
        _ => {
            // An error answer: any status, any body (a proxy's HTML too).
            let (status, rest) = match body {
                [a, b, rest @ ..] => (u16::from_be_bytes([*a, *b]), rest),
                _ => (500, body),
            };
            let e = api_error(
                status,
                rest,
                "container.projects.locations.clusters.nodePools.list",
            );
            error_read(&e);
        }
    }
}
