//! The workload source's writes in a cluster: the `slicectl.dev/released-at`
//! stamp on a gone JobSet's slice Nodes (the start of its grace period,
//! read back by the next cycle), and one `SliceRefused` Event per refused
//! request on its JobSet.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use sha2::{Digest, Sha256};

use crate::cloud::Cloud;
use crate::resource::{ClusterRef, KubeRef};
use crate::spec::Fleet;
use crate::workload::{Demand, RELEASED_AT, Refused};

/// The Event's reason on a refused request.
pub const REFUSED_REASON: &str = "SliceRefused";

/// The Event of a refusal: named after the JobSet and a hash of the
/// JobSet's uid, the Job and the message, so that it is created once (a
/// second create answers 409) and a changed reason gets its own.
pub fn refusal_event(r: &Refused) -> Event {
    let digest = Sha256::digest(format!("{}\n{}\n{}", r.uid, r.job_key, r.message).as_bytes());
    let name = format!(
        "{}.slicectl-{}",
        r.jobset.chars().take(200).collect::<String>(),
        hex::encode(&digest[..8])
    );
    let now = Time(jiff::Timestamp::now());
    Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(r.namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("jobset.x-k8s.io/v1alpha2".to_string()),
            kind: Some("JobSet".to_string()),
            name: Some(r.jobset.clone()),
            namespace: Some(r.namespace.clone()),
            uid: Some(r.uid.clone()),
            ..ObjectReference::default()
        },
        reason: Some(REFUSED_REASON.to_string()),
        message: Some(format!("{} ({}): {}", r.code, r.target, r.message)),
        type_: Some("Warning".to_string()),
        source: Some(EventSource {
            component: Some("slicectl".to_string()),
            host: None,
        }),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Event::default()
    }
}

fn kube_of(fleet: &Fleet, target: &str) -> Option<KubeRef> {
    let t = fleet.targets.get(target)?;
    let g = t.spec.gke.as_ref()?;
    Some(KubeRef::gke(&ClusterRef {
        project: t.spec.project.clone(),
        location: g.location.clone(),
        name: g.name.clone(),
    }))
}

/// Writes the stamps and Events `demand` asks for. Failures are logged and
/// left to the next cycle (a missed stamp only delays a release; a missed
/// Event is sent again).
pub async fn write(cloud: &Cloud, fleet: &Fleet, demand: &Demand) {
    for m in &demand.marks {
        let labels: BTreeMap<String, Option<String>> =
            BTreeMap::from([(RELEASED_AT.to_string(), Some(m.at.to_string()))]);
        for n in &m.nodes {
            match cloud.kube.patch_node(&m.kube, n, &labels, None).await {
                Ok(()) => {
                    tracing::info!(cluster = %m.kube.endpoint, node = %n, "stamped the released-at label: its JobSet is gone, the grace period starts")
                }
                Err(e) => {
                    tracing::warn!(cluster = %m.kube.endpoint, node = %n, error = %e, "cannot stamp released-at on the Node; the next cycle tries again")
                }
            }
        }
    }
    for r in &demand.refused {
        let Some(k) = kube_of(fleet, &r.target) else {
            continue;
        };
        match cloud.kube.create_event(&k, &refusal_event(r)).await {
            Ok(true) => {
                tracing::warn!(jobset = %format!("{}/{}", r.namespace, r.jobset), code = r.code, reason = %r.message, "refused a workload slice; Event SliceRefused recorded on the JobSet")
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(jobset = %format!("{}/{}", r.namespace, r.jobset), error = %e, "cannot record the SliceRefused Event; the next cycle tries again")
            }
        }
    }
}
