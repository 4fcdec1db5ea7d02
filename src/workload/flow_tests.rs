#![cfg(test)]
//! Workload slices through the whole engine on the fakes (the fake cloud,
//! and a fake Kubernetes API per cluster listing JobSets and pods): what
//! is created, kept and released, the Events on the JobSets, and the
//! SliceStatus objects (issue 36).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::json;

use super::keys;
use crate::apply::{ApplyOptions, Progress};
use crate::cloud::Cloud;
use crate::cloud::fake::FakeCloud;
use crate::engine::{Approval, ReconcileOptions, Report, reconcile};
use crate::kube::fake::FakeKube;
use crate::plan::{PlanMode, PlanOptions};
use crate::resource::{ClusterRef, KubeRef};
use crate::spec::{Fleet, SourceFile};
use crate::status_object::{Cycle, CycleResult, derive as statuses};

struct Quiet;
impl Progress for Quiet {
    fn started(&self, _: &str, _: &str) {}
    fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
}

/// Workload-enabled Targets, one per cluster of `clusters`, in project
/// `unit-project`, zone us-central1-b (v6e), rule `extra`.
fn fleet(clusters: &[&str], rule: &str) -> Fleet {
    let files: Vec<SourceFile> = clusters
        .iter()
        .map(|c| SourceFile {
            path: format!("{c}.yaml").into(),
            text: format!(
                "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {{name: {c}}}\nspec:\n  project: unit-project\n  zone: us-central1-b\n  ownerId: unit\n  gke: {{location: us-central1, name: {c}}}\n  workloads:\n    enabled: true\n    gracePeriod: 1m\n    rules: [{{{rule}}}]\n"
            ),
        })
        .collect();
    crate::spec::load(&files).unwrap()
}

fn cluster(name: &str) -> ClusterRef {
    ClusterRef {
        project: "unit-project".into(),
        location: "us-central1".into(),
        name: name.into(),
    }
}

fn kube(name: &str) -> KubeRef {
    KubeRef::gke(&cluster(name))
}

/// The fake cloud, and a fake Kubernetes API that also lists the Nodes of
/// its running pools.
fn clouds() -> (Arc<FakeCloud>, Arc<FakeKube>, Cloud) {
    let fake = FakeCloud::new();
    let weak = Arc::downgrade(&fake);
    let kube = FakeKube::with_gke_nodes(Arc::new(move |k| {
        weak.upgrade().map(|f| f.gke_nodes(k)).unwrap_or_default()
    }));
    let cloud = Cloud {
        kube: kube.clone(),
        ..fake.cloud()
    };
    (fake, kube, cloud)
}

/// JobSet `ml/NAME` (uid `uid`) with replicatedJob `slice` of `jobs` Jobs;
/// `status` its `status` object.
fn jobset(name: &str, uid: &str, jobs: u32, status: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"namespace": "ml", "name": name, "uid": uid},
        "spec": {"replicatedJobs": [{"name": "slice", "replicas": jobs}]},
        "status": status,
    })
}

/// The pending, Unschedulable leader pod of Job `job` of JobSet `ml/JOBSET`
/// (uid `uid`): v6e 2x2, 4 chips (one ct6e-standard-4t host).
fn leader(jobset: &str, uid: &str, job: &str) -> Pod {
    let labels = BTreeMap::from([
        (keys::JOBSET_NAME.to_string(), jobset.to_string()),
        (keys::JOBSET_UID.to_string(), uid.to_string()),
        (keys::JOB_KEY.to_string(), format!("{job:0>40}")),
        (keys::COMPLETION_INDEX.to_string(), "0".to_string()),
    ]);
    Pod {
        metadata: ObjectMeta {
            namespace: Some("ml".into()),
            name: Some(format!("{job}-0-x")),
            labels: Some(labels.clone()),
            annotations: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name: job.into(),
                uid: format!("uid-{job}"),
                controller: Some(true),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_selector: Some(BTreeMap::from([
                (keys::ACCELERATOR.to_string(), "tpu-v6e-slice".to_string()),
                (keys::TOPOLOGY.to_string(), "2x2".to_string()),
            ])),
            containers: vec![Container {
                name: "train".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        keys::TPU_RESOURCE.to_string(),
                        Quantity("4".into()),
                    )])),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        }),
    }
}

async fn apply(f: &Fleet, cloud: &Cloud) -> Report {
    let opts = ReconcileOptions {
        mode: PlanMode::Apply,
        plan: PlanOptions::default(),
        apply: ApplyOptions::default(),
    };
    reconcile(f, cloud, &opts, |_| Approval::Auto, Arc::new(Quiet))
        .await
        .unwrap()
}

fn pool_names(fake: &FakeCloud, c: &str) -> Vec<String> {
    fake.pools(&cluster(c))
        .into_iter()
        .map(|p| p.name)
        .collect()
}

/// The pool of Job `job` of `ml/JOBSET`, and the slice of it on Target `t`.
fn names(t: &str, jobset: &str, job: &str) -> (String, String) {
    let pool = super::pool_name("ml", jobset, job).unwrap();
    let slice = super::slice_name(t, &pool);
    (pool, slice)
}

/// The JobSet's leader runs on its slice's Node now: no longer pending.
fn runs(kube: &FakeKube, c: &str, job: &str, pool: &str) {
    let k = self::kube(c);
    kube.remove_pod(&k, "ml", &format!("{job}-0-x"));
    kube.seed_pod(
        &k,
        "ml",
        &format!("{job}-0-x"),
        &format!("gke-{c}-{pool}-0"),
        &[(keys::JOBSET_NAME, "train")],
        &[],
        Some(("Job", job)),
    );
}

/// Issue 36, case 1 on the engine: the same JobSet in two clusters gets a
/// pool in each (one plan, two creates), and when it ends in one cluster
/// only that cluster's pool is released; the other's SliceStatus is Ready
/// while its JobSet runs on it (case 4), not "being deleted".
#[tokio::test]
async fn the_same_jobset_in_two_clusters_is_two_slices_through_the_engine() {
    let (fake, kube, cloud) = clouds();
    let f = fleet(&["east", "west"], "");
    for c in ["east", "west"] {
        kube.set_jobsets(&self::kube(c), vec![jobset("train", "uid-1", 1, json!({}))]);
        kube.put_pod(&self::kube(c), leader("train", "uid-1", "train-slice-0"));
    }
    let r = apply(&f, &cloud).await;
    assert!(r.plan.refused.is_empty(), "{:?}", r.plan.refused);
    let (pool, east) = names("east", "train", "train-slice-0");
    let (_, west) = names("west", "train", "train-slice-0");
    assert_eq!(pool_names(&fake, "east"), std::slice::from_ref(&pool));
    assert_eq!(pool_names(&fake, "west"), std::slice::from_ref(&pool));
    // Its pods run on both; east's JobSet completes (long ago: past the grace).
    runs(&kube, "east", "train-slice-0", &pool);
    runs(&kube, "west", "train-slice-0", &pool);
    kube.set_pod_phase(&self::kube("east"), "ml", "train-slice-0-0-x", "Succeeded");
    kube.set_jobsets(
        &self::kube("east"),
        vec![jobset(
            "train",
            "uid-1",
            1,
            json!({"conditions": [{"type": "Completed", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}),
        )],
    );
    let r = apply(&f, &cloud).await;
    let deletes: Vec<String> = r
        .plan
        .actions
        .iter()
        .map(|a| format!("{} {}", a.action.as_str(), a.address()))
        .collect();
    assert_eq!(deletes, [format!("delete slice.{east}[0].node_pool")]);
    assert!(pool_names(&fake, "east").is_empty());
    assert_eq!(pool_names(&fake, "west"), std::slice::from_ref(&pool));
    // West's slice, kept for its running JobSet, is Ready like a git slice.
    let set = statuses(&Cycle {
        fleet: &f,
        result: CycleResult::Report(&r),
        invalid: &BTreeMap::new(),
        unavailable_since: &BTreeMap::new(),
        stall_after: Duration::from_secs(1800),
        now: jiff::Timestamp::now(),
        existing: &BTreeMap::new(),
    });
    let o = set
        .objects
        .iter()
        .find(|o| o.name == west)
        .unwrap_or_else(|| panic!("an object for {west}: {set:#?}"));
    let ready: Vec<(String, String)> = o
        .status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone()))
        .collect();
    assert_eq!(
        ready,
        [("Ready".to_string(), "True".to_string())],
        "{:#?}",
        o.status
    );
    assert_eq!(o.status.source.as_deref(), Some("jobset ml/train"));
}

/// Issue 36, case 6 on the engine: when the quota admits one of a
/// JobSet's two slices, neither is created, and the JobSet gets a Warning
/// Event saying the quota is short (case 7).
#[tokio::test]
async fn a_jobset_the_quota_admits_only_part_of_gets_nothing_and_a_warning() {
    let (fake, kube, cloud) = clouds();
    let f = fleet(&["east"], "");
    fake.seed_quotas(
        "unit-project",
        "us-central1",
        vec![crate::resource::compute::Quota {
            metric: "TPUS_PER_TPU_FAMILY/CT6E".into(),
            limit: 4.0,
            usage: 0.0,
        }],
    );
    let k = self::kube("east");
    kube.set_jobsets(&k, vec![jobset("train", "uid-1", 2, json!({}))]);
    kube.put_pod(&k, leader("train", "uid-1", "train-slice-0"));
    kube.put_pod(&k, leader("train", "uid-1", "train-slice-1"));
    let r = apply(&f, &cloud).await;
    assert!(pool_names(&fake, "east").is_empty(), "none of the two");
    let codes: Vec<&str> = r.plan.refused.iter().map(|x| x.code.as_str()).collect();
    assert_eq!(
        codes,
        ["quota_insufficient", "quota_insufficient"],
        "{:#?}",
        r.plan.refused
    );
    let warnings: Vec<(String, String)> = kube
        .events(&k)
        .into_iter()
        .filter(|(_, t, _, _)| t == "Warning")
        .map(|(o, _, reason, m)| (o, format!("{reason}: {m}")))
        .collect();
    assert!(
        warnings
            .iter()
            .any(|(o, m)| o == "train" && m.starts_with("SliceRefused: quota_insufficient")),
        "{warnings:#?}"
    );
    // A second run refuses the same: no second Event.
    let before = kube.events(&k).len();
    apply(&f, &cloud).await;
    assert_eq!(kube.events(&k).len(), before);
}
