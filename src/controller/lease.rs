//! The Lease managers of the controller: the leader Lease (`--shards 1`) and
//! each shard Lease (`--shards N`), both through kube-lease-manager.
//!
//! Each replica applies its Lease fields under a field manager of its own
//! ([`field_manager`]). Acquiring a free Lease is a server-side apply without
//! `force`: when two replicas race for the same free Lease, the API server
//! accepts the first and refuses the second with 409 Conflict, because
//! `spec.holderIdentity` is then owned by another manager with another value
//! (<https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts>).
//! Under one shared field manager both applies succeeded, the last writer
//! won, and the first replica believed it held the Lease until its next
//! renewal: two writers at once.

use std::time::Duration;

use anyhow::{Context, Result};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};

/// Prefix of the per-replica field managers.
const PREFIX: &str = "slicectl-lease-";
/// The API server refuses a longer field manager: `FieldManagerMaxLength`
/// in k8s.io/apimachinery/pkg/apis/meta/v1/validation.
const MAX_FIELD_MANAGER: usize = 128;

/// The field manager under which `identity` applies a Lease: its own, so
/// that two replicas' applies conflict. An identity too long for the API
/// server's limit is replaced by a stable hash of it (still one per replica).
pub fn field_manager(identity: &str) -> String {
    let plain = format!("{PREFIX}{identity}");
    if plain.len() <= MAX_FIELD_MANAGER {
        return plain;
    }
    format!(
        "{PREFIX}{:016x}",
        crate::spec::shard::stable_hash(&[identity])
    )
}

/// A manager of Lease `namespace/name` for `identity`, renewed a third of
/// `duration` (at least 3 s, whole seconds) before it expires.
pub async fn manager(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    identity: &str,
    duration: Duration,
) -> Result<LeaseManager> {
    let secs = duration.as_secs().max(3);
    LeaseManagerBuilder::new(client.clone(), name)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(secs)
        .with_grace((secs / 3).max(1))
        .with_field_manager(field_manager(identity))
        .build()
        .await
        .with_context(|| format!("cannot set up Lease {namespace}/{name}"))
}

#[cfg(test)]
#[path = "lease/tests.rs"]
mod tests;
