#![cfg(test)]
use super::*;
use crate::cloud::fake::{FakeCloud, Fault};

const SPECS: &str = r#"apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: train
spec:
  project: proj-one
  zone: us-central1-b
  ownerId: o
  gke:
    location: us-central1
    name: train
---
apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: other
spec:
  project: proj-one
  zone: us-central1-b
  ownerId: o
  gke:
    location: us-central1
    name: other
"#;

fn fleet() -> Fleet {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("t.yaml"), SPECS).unwrap();
    crate::source::load_dir(d.path()).unwrap()
}

#[tokio::test]
async fn a_failed_scope_is_unobserved_and_the_others_are_observed() {
    let fake = FakeCloud::new();
    fake.fail_next("list_node_pools", Fault::NotFound);
    let inv = observe(&fake.cloud(), &fleet(), crate::kinds::REGISTRY).await;
    assert_eq!(inv.unobserved.len(), 1, "{:?}", inv.unobserved);
    let (scope, why) = inv.unobserved.iter().next().unwrap();
    assert!(matches!(scope, Scope::Cluster(_)), "{scope}");
    assert_eq!(why.code, "target_not_found");
    assert!(why.cause.contains("404"), "{}", why.cause);
    // Both clusters were listed: one failed, the other was observed.
    assert_eq!(
        fake.calls_of("list_node_pools").len(),
        2,
        "{:?}",
        fake.calls()
    );
    assert!(inv.undiscovered.is_empty());
}

#[tokio::test]
async fn a_failed_left_behind_listing_is_undiscovered_not_unobserved() {
    let fake = FakeCloud::new();
    fake.fail_next("list_clusters", Fault::Unavailable);
    let inv = observe(&fake.cloud(), &fleet(), crate::kinds::REGISTRY).await;
    assert!(inv.unobserved.is_empty(), "{:?}", inv.unobserved);
    let why = inv.undiscovered.get(&("proj-one".to_string(), "gke"));
    assert_eq!(
        why.map(|w| w.code.as_str()),
        Some("target_unreachable"),
        "{:?}",
        inv.undiscovered
    );
}

#[test]
fn codes_follow_what_the_error_says() {
    let api = |status: u16, code: &str| CloudError::Api {
        status,
        code: code.into(),
        reason: None,
        message: "m".into(),
        method: "container.projects.locations.clusters.nodePools.list".into(),
    };
    assert_eq!(unseen(&api(404, "NOT_FOUND")).code, "target_not_found");
    assert_eq!(
        unseen(&api(403, "PERMISSION_DENIED")).code,
        "target_forbidden"
    );
    assert_eq!(unseen(&api(503, "UNAVAILABLE")).code, "target_unreachable");
    // A GKE cluster's API that rejects the Google token (401).
    let unauthorized = CloudError::Kube(crate::kube::KubeError::Api {
        endpoint: "gke://p/us-central1/train".into(),
        attempt: crate::kube::error::Attempt::new("list", "nodes"),
        status: 401,
        message: "Unauthorized: Unauthorized".into(),
    });
    assert_eq!(unseen(&unauthorized).code, "target_forbidden");
    let kube = CloudError::Kube(crate::kube::KubeError::Config {
        endpoint: "10.0.0.1:6443".into(),
        message: "kubeconfig ~/.kube/config: no such file".into(),
    });
    let u = unseen(&kube);
    assert_eq!(u.code, "target_unconfigured");
    assert_eq!(u.cause, kube.to_string());
    assert_eq!(crate::error::repeated_segment(&u.cause), None);
}
