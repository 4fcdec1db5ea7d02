//! The owner of the status objects (`--owner-deployment NAME`): the
//! controller's own Deployment, read once at start, so that deleting the
//! Deployment garbage-collects the SliceStatus objects it wrote.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;

/// How the Deployment is read: transient errors (5xx, 429, the connection)
/// are retried this many times in all, the wait doubling from `first`.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Attempts in all (at least one is made).
    pub attempts: u32,
    /// The wait after the first failed attempt; doubles after each.
    pub first: Duration,
}

/// The controller's: 4 attempts over about 2 s.
pub const RETRY: Retry = Retry {
    attempts: 4,
    first: Duration::from_millis(250),
};

/// Why no owner reference could be made.
#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    /// The GET failed (after retrying, when the error was transient).
    #[error(
        "cannot get Deployment {namespace}/{name} (--owner-deployment {name}){tries}: {api}; {hint}",
        tries = tries(*.attempts),
        api = describe(.error),
        hint = hint(.error, .namespace, .name)
    )]
    Get {
        /// Namespace.
        namespace: String,
        /// Deployment name.
        name: String,
        /// Attempts made.
        attempts: u32,
        /// The last error (its text is in the message already, so it is not
        /// chained as a source).
        error: kube::Error,
    },
    /// The Deployment came back without the field an owner reference needs.
    #[error(
        "Deployment {namespace}/{name} has no metadata.{field}, so it cannot own the status objects; drop --owner-deployment"
    )]
    Incomplete {
        /// Namespace.
        namespace: String,
        /// Deployment name (as asked for when the object has none).
        name: String,
        /// The missing field (`uid`, `name`).
        field: &'static str,
    },
}

fn tries(attempts: u32) -> String {
    if attempts > 1 {
        format!(" after {attempts} attempts")
    } else {
        String::new()
    }
}

/// The API's error, short: `404 NotFound: deployments.apps "x" not found`.
fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        e => crate::kube::error::chain(e),
    }
}

fn hint(e: &kube::Error, namespace: &str, name: &str) -> String {
    let grant = format!(
        "the controller's Role must allow `get` on deployments/{name} (apiGroups [apps], resourceNames [{name}]) in namespace {namespace}"
    );
    match e {
        kube::Error::Api(s) if s.code == 404 => format!(
            "--owner-deployment must name the controller's own Deployment, in namespace {namespace} (--namespace); fix the name, or drop --owner-deployment"
        ),
        kube::Error::Api(s) if s.code == 403 || s.code == 401 => {
            format!("{grant}, or drop --owner-deployment")
        }
        _ => format!("check that the API server is reachable; {grant}, or drop --owner-deployment"),
    }
}

/// Whether trying again may succeed: a 5xx or 429 answer, or no answer
/// (connection refused or reset, timeout).
pub fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code >= 500 || s.code == 429,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// The owner reference to `d`: `apps/v1` `Deployment`, its name and uid,
/// `controller: true`. `blockOwnerDeletion` is left unset: setting it needs
/// `update` on `deployments/finalizers` under the
/// OwnerReferencesPermissionEnforcement admission plugin, and nothing is
/// gained (the garbage collector deletes the dependents either way).
pub fn owner_reference(d: &Deployment) -> Result<OwnerReference, OwnerError> {
    use k8s_openapi::Resource as _;
    let namespace = d.metadata.namespace.clone().unwrap_or_default();
    let Some(name) = d.metadata.name.clone().filter(|n| !n.is_empty()) else {
        return Err(OwnerError::Incomplete {
            namespace,
            name: String::new(),
            field: "name",
        });
    };
    let Some(uid) = d.metadata.uid.clone().filter(|u| !u.is_empty()) else {
        return Err(OwnerError::Incomplete {
            namespace,
            name,
            field: "uid",
        });
    };
    Ok(OwnerReference {
        api_version: Deployment::API_VERSION.to_string(),
        kind: Deployment::KIND.to_string(),
        name,
        uid,
        controller: Some(true),
        block_owner_deletion: None,
    })
}

/// GETs Deployment `namespace/name` and makes its owner reference,
/// retrying transient errors per `retry`.
pub async fn resolve(
    api: &Api<Deployment>,
    namespace: &str,
    name: &str,
    retry: Retry,
) -> Result<OwnerReference, OwnerError> {
    let d = get_with_retry(namespace, name, retry, || api.get(name)).await?;
    owner_reference(&d).map_err(|e| match e {
        OwnerError::Incomplete { field, .. } => OwnerError::Incomplete {
            namespace: namespace.to_string(),
            name: name.to_string(),
            field,
        },
        e => e,
    })
}

/// Calls `get` until it succeeds, fails with an error that is not
/// transient, or `retry.attempts` were made.
pub async fn get_with_retry<T, F, Fut>(
    namespace: &str,
    name: &str,
    retry: Retry,
    mut get: F,
) -> Result<T, OwnerError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut wait = retry.first;
    let mut attempt = 1;
    loop {
        match get().await {
            Ok(v) => return Ok(v),
            Err(error) if attempt < retry.attempts.max(1) && is_transient(&error) => {
                tracing::warn!(
                    namespace,
                    deployment = name,
                    attempt,
                    error = %describe(&error),
                    retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    "cannot get the owner Deployment; retrying"
                );
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
                attempt += 1;
            }
            Err(error) => {
                return Err(OwnerError::Get {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    attempts: attempt,
                    error,
                });
            }
        }
    }
}

#[cfg(test)]
#[path = "owner/tests.rs"]
mod tests;
