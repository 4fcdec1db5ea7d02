#![cfg(test)]
use super::*;
use crate::spec::SourceFile;
use std::path::PathBuf;

const TARGET: &str = "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: t\nspec:\n  project: example-project\n  zone: us-central1-a\n  ownerId: team\n  gke:\n    location: us-central1\n    name: c\n";

fn slice(name: &str, topology: &str) -> String {
    format!(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: {name}\nspec:\n  target: t\n  backend: gke\n  accelerator: tpu-v5p-slice\n  topology: \"{topology}\"\n"
    )
}

fn file(p: &str, t: &str) -> SourceFile {
    SourceFile {
        path: PathBuf::from(p),
        text: t.to_string(),
    }
}

#[test]
fn an_invalid_file_names_the_slices_its_last_good_version_defines() {
    let mut lg = crate::source::last_good::LastGood::new();
    let good = [
        file("specs/t.yaml", TARGET),
        file("specs/a.yaml", &slice("a", "2x2x1")),
        file("specs/b.yaml", &slice("b", "2x2x1")),
    ];
    let r = lg.resolve(&good);
    let r = match r {
        Ok(r) => r,
        Err(u) => panic!("{:?}", u.diagnostics),
    };
    assert!(r.clean(), "{:?}", r.diagnostics);
    assert!(invalid_slices(&r).is_empty());
    let broken = [
        file("specs/t.yaml", TARGET),
        file("specs/a.yaml", &slice("a", "9x9x9")),
        file("specs/b.yaml", &slice("b", "2x2x1")),
    ];
    let r = lg
        .resolve(&broken)
        .unwrap_or_else(|u| panic!("{:?}", u.diagnostics));
    let inv = invalid_slices(&r);
    assert_eq!(inv.keys().collect::<Vec<_>>(), vec!["a"]);
    assert!(inv["a"].starts_with("specs/a.yaml:"), "{}", inv["a"]);
}

/// A pool GKE left RUNNING_WITH_ERROR after a stockout, found by the
/// plan (no step failed): counted once, the slice held (its replacement
/// left out), and once its backoff is over the replacement is the retry
/// (not held again). A pool in error for another reason is not a
/// stockout.
#[tokio::test]
async fn a_stockout_found_in_the_plan_holds_the_slice_once() {
    use crate::cloud::fake::FakeCloud;
    use crate::engine::{self, Approval, ReconcileOptions};
    use crate::resource::gke::StatusCondition;

    let files = [
        file("specs/t.yaml", TARGET),
        file("specs/a.yaml", &slice("a", "2x2x1")),
    ];
    let f = crate::spec::load(&files).unwrap();
    let fake = FakeCloud::new();
    let opts = ReconcileOptions {
        mode: crate::plan::PlanMode::Apply,
        plan: crate::plan::PlanOptions::default(),
        apply: crate::apply::ApplyOptions::default(),
    };
    struct Quiet;
    impl crate::apply::Progress for Quiet {
        fn started(&self, _: &str, _: &str) {}
        fn finished(&self, _: &str, _: &str, _: Result<(), &str>, _: std::time::Duration) {}
    }
    let r = engine::reconcile(
        &f,
        &fake.cloud(),
        &opts,
        |_| Approval::Auto,
        std::sync::Arc::new(Quiet),
    )
    .await
    .unwrap();
    assert!(r.success());
    let cluster = crate::resource::ClusterRef {
        project: "example-project".into(),
        location: "us-central1".into(),
        name: "c".into(),
    };
    let break_pool = |code: &str, message: &str| {
        let mut pool = fake.pools(&cluster).remove(0);
        pool.status = Some("RUNNING_WITH_ERROR".into());
        pool.status_message = Some(message.into());
        pool.conditions = vec![StatusCondition {
            code: Some(code.into()),
            message: Some(message.into()),
            ..Default::default()
        }];
        fake.seed_pool(&cluster, pool);
    };
    let plan = || async {
        engine::observe_and_plan(&f, &fake.cloud(), opts.mode, &opts.plan)
            .await
            .unwrap()
            .1
    };

    // Another error: replaced, not a capacity shortage.
    break_pool("UNKNOWN", "a node failed to register");
    let mut p = plan().await;
    assert!(stockouts_in_plan(&p, &BTreeSet::new()).is_empty());
    let mut tracker = CapacityTracker::default();
    let mut holds = BTreeMap::new();
    let now = Instant::now();
    let (left_out, found) =
        hold_for_capacity(&mut p, &f, &mut tracker, &mut holds, now, Timestamp::now());
    assert_eq!((left_out.len(), found), (0, 0));
    assert_eq!(p.actions.len(), 1, "the replacement stays");

    // A stockout: held, counted once.
    break_pool(
        "GCE_STOCKOUT",
        "Instance creation failed: ZONE_RESOURCE_POOL_EXHAUSTED",
    );
    let mut p = plan().await;
    let found = stockouts_in_plan(&p, &BTreeSet::new());
    assert_eq!(found.keys().collect::<Vec<_>>(), vec!["a"]);
    assert!(
        found["a"].contains("RUNNING_WITH_ERROR") && found["a"].contains("GCE_STOCKOUT"),
        "{found:?}"
    );
    let (left_out, found) =
        hold_for_capacity(&mut p, &f, &mut tracker, &mut holds, now, Timestamp::now());
    assert_eq!(found, 1);
    assert_eq!(left_out, vec!["replace slice.a[0].node_pool"]);
    assert!(p.actions.is_empty());
    assert_eq!(tracker.failures("a"), 1);
    assert!(holds.contains_key("a"));

    // Past the backoff: the replacement is the retry, not held again.
    let later = now + tracker.backoff(1) + std::time::Duration::from_secs(1);
    let mut holds = BTreeMap::new();
    let mut p = plan().await;
    let (left_out, found) = hold_for_capacity(
        &mut p,
        &f,
        &mut tracker,
        &mut holds,
        later,
        Timestamp::now(),
    );
    assert_eq!((left_out.len(), found), (0, 0));
    assert_eq!(p.actions.len(), 1);
    assert_eq!(tracker.failures("a"), 1);
}

#[test]
fn namespace_prefers_the_flag() {
    assert_eq!(namespace(Some("x")), "x");
}
