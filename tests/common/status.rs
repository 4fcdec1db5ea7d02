//! Status objects of a one-slice fleet, derived after one cycle on the
//! recording fake cloud (no Google, no API server): what the status-object
//! and deploy tests write to the real control plane.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use slicectl::apply::{ApplyOptions, Progress};
use slicectl::cloud::fake::FakeCloud;
use slicectl::engine::{Approval, ReconcileOptions, reconcile};
use slicectl::plan::{PlanMode, PlanOptions};
use slicectl::spec::SourceFile;
use slicectl::status_object::{Cycle, CycleResult, StatusSet, derive};

/// Progress that prints nothing.
pub struct Quiet;
impl Progress for Quiet {
    fn started(&self, _: &str, _: &str) {}
    fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: Duration) {}
}

/// The status set of a one-slice fleet after one cycle on a fake cloud;
/// `taken` seeds a node pool slicectl does not own under its name.
pub async fn one_slice(name: &str, approval: Approval, taken: bool) -> StatusSet {
    let fleet = slicectl::spec::load(&[SourceFile {
        path: "f.yaml".into(),
        text: format!(
            "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata: {{name: t}}
spec: {{project: it-project, zone: us-central1-b, ownerId: it, gke: {{location: us-central1, name: c}}}}
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata: {{name: {name}}}
spec: {{target: t, backend: gke, accelerator: tpu-v6e-slice, topology: 1x1}}
"
        ),
    }])
    .expect("fleet");
    let fake = FakeCloud::new();
    if taken {
        fake.seed_pool(
            &slicectl::resource::ClusterRef {
                project: "it-project".into(),
                location: "us-central1".into(),
                name: "c".into(),
            },
            slicectl::resource::gke::NodePool {
                name: format!("{name}-0"),
                status: Some("RUNNING".into()),
                ..Default::default()
            },
        );
    }
    let opts = ReconcileOptions {
        mode: PlanMode::Apply,
        plan: PlanOptions::default(),
        apply: ApplyOptions::default(),
    };
    let report = reconcile(&fleet, &fake.cloud(), &opts, |_| approval, Arc::new(Quiet))
        .await
        .expect("reconcile");
    derive(&Cycle {
        fleet: &fleet,
        result: CycleResult::Report(&report),
        invalid: &BTreeMap::new(),
        unavailable_since: &BTreeMap::new(),
        stall_after: Duration::from_secs(1800),
        now: jiff::Timestamp::now(),
        existing: &BTreeMap::new(),
    })
}
