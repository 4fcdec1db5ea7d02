//! The workload source's writes in a cluster: the `slicectl.dev/released-at`
//! stamp on a gone JobSet's slice Nodes (the start of its grace period,
//! read back by the next cycle), one `SliceRefused` Event per refused
//! request on its JobSet, and one Event per phase of a JobSet's slice
//! (`SliceCreating`, `WaitingForCapacity`, `SliceReady`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use sha2::{Digest, Sha256};

use crate::cloud::Cloud;
use crate::plan::{ActionKind, Plan, Scope};
use crate::resource::{ClusterRef, KubeRef};
use crate::spec::Fleet;
use crate::status::Row;
use crate::workload::{Demand, Origin, Phase, RELEASED_AT, Refused, Standing};

/// The Event's reason on a refused request.
pub const REFUSED_REASON: &str = "SliceRefused";

/// An Event on JobSet `namespace/jobset` (uid `uid`), named after the
/// JobSet and a hash of its uid and `key`, so that it is created once (a
/// second create answers 409): whatever many cycles, or restarted
/// controllers, see the same thing.
fn jobset_event(
    namespace: &str,
    jobset: &str,
    uid: &str,
    key: &str,
    reason: &str,
    type_: &str,
    message: String,
) -> Event {
    let digest = Sha256::digest(format!("{uid}\n{key}").as_bytes());
    let name = format!(
        "{}.slicectl-{}",
        jobset.chars().take(200).collect::<String>(),
        hex::encode(&digest[..8])
    );
    let now = Time(jiff::Timestamp::now());
    Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("jobset.x-k8s.io/v1alpha2".to_string()),
            kind: Some("JobSet".to_string()),
            name: Some(jobset.to_string()),
            namespace: Some(namespace.to_string()),
            uid: Some(uid.to_string()),
            ..ObjectReference::default()
        },
        reason: Some(reason.to_string()),
        message: Some(message),
        type_: Some(type_.to_string()),
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

/// The Event of a refusal, keyed by the Job, the code and the message
/// without its numbers: a changed reason gets its own, changed counts (the
/// chips a `max_chips` refusal adds up, the quota left) do not.
pub fn refusal_event(r: &Refused) -> Event {
    let reason: String = r.message.chars().filter(|c| !c.is_ascii_digit()).collect();
    jobset_event(
        &r.namespace,
        &r.jobset,
        &r.uid,
        &format!("{}\n{}\n{reason}", r.job_key, r.code),
        REFUSED_REASON,
        "Warning",
        format!("{} ({}): {}", r.code, r.target, r.message),
    )
}

/// The Event of a workload slice's phase, keyed by the Job and the phase:
/// one per phase the slice goes through (created once, like a refusal).
pub fn phase_event(origin: &Origin, phase: &Phase) -> Event {
    jobset_event(
        &origin.namespace,
        &origin.jobset,
        &origin.uid,
        &format!("{}\n{}", origin.job_key, phase.reason),
        phase.reason,
        "Normal",
        phase.message.clone(),
    )
}

async fn record_phase(cloud: &Cloud, k: &KubeRef, origin: &Origin, pool: &str, phase: &Phase) {
    let jobset = origin.jobset_ref();
    match cloud
        .kube
        .create_event(k, &phase_event(origin, phase))
        .await
    {
        Ok(true) => {
            tracing::info!(jobset = %jobset, pool = %pool, reason = phase.reason, message = %phase.message, "workload slice phase recorded as an Event on its JobSet")
        }
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(jobset = %jobset, pool = %pool, reason = phase.reason, error = %e, "cannot record the workload slice's phase Event; the next cycle tries again")
        }
    }
}

/// Records each workload slice's phase (`status` rows) as an Event on its
/// JobSet, once per phase. Failures are logged and left to the next cycle.
pub async fn write_phases(cloud: &Cloud, rows: &[Row]) {
    for row in rows {
        let Some(Standing {
            origin,
            phase: Some(phase),
        }) = &row.workload
        else {
            continue;
        };
        let k = KubeRef::gke(&ClusterRef {
            project: row.project.clone(),
            location: row.location.clone(),
            name: row.cluster.clone(),
        });
        record_phase(cloud, &k, origin, &row.node_pool, phase).await;
    }
}

/// Records `SliceCreating` on the JobSet of each workload slice whose node
/// pool `plan` creates (or replaces), before it runs.
pub async fn write_creating(cloud: &Cloud, plan: &Plan) {
    for a in &plan.actions {
        if !matches!(a.action, ActionKind::Create | ActionKind::Replace) {
            continue;
        }
        let (Scope::Cluster(c), Some(origin)) = (
            &a.id.scope,
            plan.demand
                .slices
                .iter()
                .find(|s| s.name == a.owner.slice)
                .and_then(|s| s.workload.as_ref()),
        ) else {
            continue;
        };
        let phase = crate::workload::phase::creating(&a.id.name);
        record_phase(cloud, &KubeRef::gke(c), origin, &a.id.name, &phase).await;
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
            BTreeMap::from([(RELEASED_AT.to_string(), m.at.map(|at| at.to_string()))]);
        for n in &m.nodes {
            match (cloud.kube.patch_node(&m.kube, n, &labels, None).await, m.at) {
                (Ok(()), Some(_)) => {
                    tracing::info!(cluster = %m.kube.endpoint, node = %n, "stamped the released-at label: its JobSet is gone, the grace period starts")
                }
                (Ok(()), None) => {
                    tracing::info!(cluster = %m.kube.endpoint, node = %n, "removed the released-at label: a JobSet of that name is back")
                }
                (Err(e), _) => {
                    tracing::warn!(cluster = %m.kube.endpoint, node = %n, error = %e, "cannot write released-at on the Node; the next cycle tries again")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: &'static str, message: &str) -> Refused {
        Refused {
            target: "train".into(),
            namespace: "ml".into(),
            jobset: "train".into(),
            uid: "uid-1".into(),
            job_key: "k".into(),
            code,
            message: message.into(),
        }
    }

    /// Issue 36, case 7: a `max_chips` refusal whose counts change (other
    /// slices came and went) is the same Event, said once; another reason
    /// is another Event.
    #[test]
    fn a_refusal_is_one_event_whatever_its_counts() {
        let name = |r: &Refused| refusal_event(r).metadata.name.unwrap_or_default();
        let a = refused(
            "max_chips",
            "8 more chips would make 24, over its maxChips 16 (16 held)",
        );
        let b = refused(
            "max_chips",
            "8 more chips would make 32, over its maxChips 16 (24 held)",
        );
        assert_eq!(name(&a), name(&b));
        let c = refused("topology", "topology 4x4 is not allowed");
        assert_ne!(name(&a), name(&c));
        let e = refusal_event(&c);
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.reason.as_deref(), Some(REFUSED_REASON));
    }
}
