#![cfg(test)]
use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::Status;
use std::sync::atomic::{AtomicU32, Ordering};

fn deployment(name: Option<&str>, uid: Option<&str>) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: name.map(str::to_string),
            namespace: Some("slicectl".into()),
            uid: uid.map(str::to_string),
            ..ObjectMeta::default()
        },
        ..Deployment::default()
    }
}

fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(Status::failure("boom", reason).with_code(code).boxed())
}

#[test]
fn the_owner_reference_names_the_deployment_as_controller() {
    let r = owner_reference(&deployment(Some("slicectl"), Some("1234-abcd"))).unwrap();
    assert_eq!(
        r,
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "slicectl".into(),
            uid: "1234-abcd".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }
    );
    // As the API server reads it: no blockOwnerDeletion at all.
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "slicectl",
            "uid": "1234-abcd",
            "controller": true,
        })
    );
}

#[test]
fn a_deployment_without_uid_or_name_is_refused() {
    for d in [
        deployment(Some("slicectl"), None),
        deployment(Some("slicectl"), Some("")),
    ] {
        let e = owner_reference(&d).unwrap_err();
        assert!(
            matches!(e, OwnerError::Incomplete { field: "uid", .. }),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "Deployment slicectl/slicectl has no metadata.uid, so it cannot own the status objects; drop --owner-deployment"
        );
    }
    let e = owner_reference(&deployment(None, Some("u"))).unwrap_err();
    assert!(
        matches!(e, OwnerError::Incomplete { field: "name", .. }),
        "{e}"
    );
}

#[test]
fn server_errors_and_no_answer_are_transient_the_rest_not() {
    assert!(is_transient(&api_error(503, "ServiceUnavailable")));
    assert!(is_transient(&api_error(500, "InternalError")));
    assert!(is_transient(&api_error(429, "TooManyRequests")));
    assert!(is_transient(&kube::Error::Service(
        "connection refused".into()
    )));
    assert!(!is_transient(&api_error(404, "NotFound")));
    assert!(!is_transient(&api_error(403, "Forbidden")));
    assert!(!is_transient(&api_error(401, "Unauthorized")));
}

#[tokio::test(start_paused = true)]
async fn transient_errors_are_retried_then_the_get_succeeds() {
    let calls = AtomicU32::new(0);
    let got = get_with_retry("ns", "slicectl", RETRY, || {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if n < 2 {
                Err(api_error(503, "ServiceUnavailable"))
            } else {
                Ok(deployment(Some("slicectl"), Some("u")))
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(owner_reference(&got).unwrap().uid, "u");
}

#[tokio::test(start_paused = true)]
async fn a_missing_deployment_fails_at_once_naming_it_and_what_to_do() {
    let calls = AtomicU32::new(0);
    let e = get_with_retry::<Deployment, _, _>("ns", "missing", RETRY, || {
        calls.fetch_add(1, Ordering::SeqCst);
        async {
            Err(kube::Error::Api(
                Status::failure("deployments.apps \"missing\" not found", "NotFound")
                    .with_code(404)
                    .boxed(),
            ))
        }
    })
    .await
    .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        e.to_string(),
        "cannot get Deployment ns/missing (--owner-deployment missing): 404 NotFound: deployments.apps \"missing\" not found; --owner-deployment must name the controller's own Deployment, in namespace ns (--namespace); fix the name, or drop --owner-deployment"
    );
}

#[tokio::test(start_paused = true)]
async fn a_forbidden_get_says_which_permission_is_missing() {
    let e = get_with_retry::<Deployment, _, _>("ns", "slicectl", RETRY, || async {
        Err(api_error(403, "Forbidden"))
    })
    .await
    .unwrap_err();
    let m = e.to_string();
    assert!(m.starts_with("cannot get Deployment ns/slicectl"), "{m}");
    assert!(
        m.contains("the controller's Role must allow `get` on deployments/slicectl (apiGroups [apps], resourceNames [slicectl]) in namespace ns, or drop --owner-deployment"),
        "{m}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_that_keeps_failing_gives_up_after_the_last_attempt() {
    let calls = AtomicU32::new(0);
    let started = tokio::time::Instant::now();
    let e = get_with_retry::<Deployment, _, _>("ns", "slicectl", RETRY, || {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Err(api_error(503, "ServiceUnavailable")) }
    })
    .await
    .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), RETRY.attempts);
    // 250 + 500 + 1000 ms of backoff.
    assert_eq!(started.elapsed(), Duration::from_millis(1750));
    let m = e.to_string();
    assert!(
        m.contains(" after 4 attempts: 503 ServiceUnavailable: boom;"),
        "{m}"
    );
    assert!(m.contains("check that the API server is reachable"), "{m}");
}
