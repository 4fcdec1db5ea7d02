//! Errors of the Google Cloud clients, and their classification
//! (not found, retryable, stockout, …).

use std::time::Duration;

use serde::Deserialize;

/// Anything that can go wrong talking to GKE or Compute Engine.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// The API answered with an error status (Google's JSON error envelope).
    #[error("{method}: HTTP {status} {code}{}: {message}", reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default())]
    Api {
        /// HTTP status code.
        status: u16,
        /// Canonical code name, e.g. `NOT_FOUND`, `FAILED_PRECONDITION`.
        code: String,
        /// Legacy `errors[].reason` (e.g. `notFound`, `rateLimitExceeded`), or the ErrorInfo reason.
        reason: Option<String>,
        /// Server message.
        message: String,
        /// What we were doing (API method id, e.g. `compute.resourcePolicies.insert`).
        method: String,
    },
    /// GKE's 429 "Reservation does not have enough resources for the
    /// request: specific reservation … is insufficient …": the specific
    /// reservation a node pool consumes has no room for its nodes. Capacity,
    /// not a rate limit: never retried by the request loop.
    #[error(
        "{method}: the specific reservation has no room for this node pool (HTTP 429 RESOURCE_EXHAUSTED: {message}). \
         This is capacity, not a rate limit, so slicectl does not retry it. Free room in the reservation \
         (delete or shrink the node pools that consume it), grow the reservation, or give the slice another \
         reservation or capacity type (spec.capacity), then apply again"
    )]
    ReservationFull {
        /// Server message (names the reservation, pool, zone and shortfall).
        message: String,
        /// What we were doing.
        method: String,
    },
    /// A long-running operation finished (DONE) with an error. This is a failure, never a success.
    #[error("operation {operation} failed: {code}: {message}")]
    OperationFailed {
        /// Operation name.
        operation: String,
        /// Most specific code: a compute `error.errors[].code` such as
        /// `ZONE_RESOURCE_POOL_EXHAUSTED`, a GKE condition code such as `GCE_STOCKOUT`,
        /// or the canonical name of the GKE `google.rpc.Status` code.
        code: String,
        /// Server message(s).
        message: String,
    },
    /// A long-running operation did not finish in time.
    #[error("operation {operation} did not finish within {after:?}")]
    Timeout {
        /// Operation name.
        operation: String,
        /// The timeout that elapsed.
        after: Duration,
    },
    /// The request could not be sent or the response could not be read.
    #[error("{method}: request to {url} failed: {source}")]
    Transport {
        /// What we were doing.
        method: String,
        /// The URL (never carries credentials).
        url: String,
        /// The underlying error.
        #[source]
        source: reqwest::Error,
    },
    /// A success response did not decode as the expected JSON.
    #[error("{method}: cannot decode response from {url}: {source} (body starts: {snippet:?})")]
    Decode {
        /// What we were doing.
        method: String,
        /// The URL.
        url: String,
        /// The first bytes of the body.
        snippet: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// No access token could be obtained.
    #[error("cannot obtain Google Cloud credentials: {0}")]
    Auth(String),
    /// The client was configured or called with an invalid value.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A Kubernetes call made while observing a self-managed cluster failed.
    #[error(transparent)]
    Kube(#[from] crate::kube::KubeError),
}

/// How GKE's 429 for a full specific reservation begins.
pub const RESERVATION_FULL_PREFIX: &str =
    "Reservation does not have enough resources for the request";

/// Error codes (compute operations, GKE conditions) that mean "no capacity in this zone".
pub const STOCKOUT_CODES: &[&str] = &[
    "GCE_STOCKOUT",
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
];

impl CloudError {
    /// True for a 404 / NOT_FOUND answer.
    pub fn is_not_found(&self) -> bool {
        matches!(self, CloudError::Api { status: 404, .. })
            || matches!(self, CloudError::Api { code, .. } if code == "NOT_FOUND")
    }

    /// True for a 409 / ALREADY_EXISTS answer (a create of an existing name).
    pub fn is_already_exists(&self) -> bool {
        matches!(self, CloudError::Api { code, .. } if code == "ALREADY_EXISTS")
            || matches!(self, CloudError::Api { status: 409, reason: Some(r), .. } if r == "alreadyExists")
    }

    /// True for a stale or missing metadata fingerprint: HTTP 412
    /// `conditionNotMet` from `setMetadata`, or its asynchronous form, an
    /// operation failing with "Supplied fingerprint does not match current
    /// metadata fingerprint." (gcp-api.md §2.5). Read the resource again and
    /// retry with its current fingerprint.
    pub fn is_stale_fingerprint(&self) -> bool {
        match self {
            CloudError::Api { status: 412, .. } => true,
            CloudError::Api {
                reason: Some(r), ..
            } => r == "conditionNotMet",
            CloudError::OperationFailed { message, .. } => {
                message.contains("Supplied fingerprint does not match")
            }
            _ => false,
        }
    }

    /// True when a failed operation reports a capacity stockout
    /// (`GCE_STOCKOUT`, `ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS]`).
    pub fn is_stockout(&self) -> bool {
        match self {
            CloudError::OperationFailed { code, message, .. } => {
                STOCKOUT_CODES.contains(&code.as_str())
                    || STOCKOUT_CODES.iter().any(|c| message.contains(c))
            }
            _ => false,
        }
    }

    /// True for a quota error: an operation or MIG failing with Compute
    /// Engine's `QUOTA_EXCEEDED` (`Quota 'TPU_V5P' exceeded. Limit: 8.0 in
    /// region us-central1.`) or GKE's `GCE_QUOTA_EXCEEDED`, or GKE's
    /// synchronous 403 "Insufficient regional quota to satisfy request".
    pub fn is_quota_exceeded(&self) -> bool {
        match self {
            CloudError::OperationFailed { code, message, .. } => {
                code.contains("QUOTA_EXCEEDED") || message.contains("QUOTA_EXCEEDED")
            }
            CloudError::Api {
                status: 403,
                message,
                ..
            } => message.contains("Insufficient regional quota"),
            _ => false,
        }
    }

    /// True for GKE's 400 FAILED_PRECONDITION "Cluster is running incompatible
    /// operation": another operation on the cluster is still running. Worth
    /// retrying for as long as that operation may take, not just a minute.
    pub fn is_cluster_busy(&self) -> bool {
        matches!(self, CloudError::Api { status: 400, code, message, .. }
            if code == "FAILED_PRECONDITION" && is_cluster_busy_message(message))
    }

    /// GKE's 429 for its per-cluster quota of concurrent operations ("Too
    /// many operations: cluster \"c\" hits the concurrent operations quota 5,
    /// please try again later."): `Some(quota)` with the number the message
    /// names (`Some(None)` when it names none), `None` for any other error.
    /// Not retried blindly: the executor waits for one of the cluster's
    /// operations to finish, and learns the quota.
    pub fn operation_quota(&self) -> Option<Option<u32>> {
        match self {
            CloudError::Api {
                status: 429,
                message,
                ..
            } if message.starts_with("Too many operations") => Some(
                message
                    .split("quota")
                    .nth(1)
                    .and_then(|rest| {
                        rest.trim_start()
                            .split(|c: char| !c.is_ascii_digit())
                            .next()
                    })
                    .and_then(|n| n.parse().ok()),
            ),
            _ => None,
        }
    }

    /// The operation GKE names in a "Cluster is running incompatible
    /// operation OP" answer.
    pub fn busy_operation(&self) -> Option<&str> {
        match self {
            CloudError::Api { message, .. } if self.is_cluster_busy() => message
                .split_whitespace()
                .find(|w| w.starts_with("operation-"))
                .map(|w| w.trim_end_matches(['.', ',', ';'])),
            _ => None,
        }
    }

    /// True for errors worth retrying the same request for, at once, with
    /// backoff: HTTP 429 (except GKE's concurrent-operations quota), 500,
    /// 502, 503, 504; a 403 `rateLimitExceeded`; transport failures. GKE's
    /// 400 "incompatible operation" and its operations quota are not: they
    /// last as long as other operations run, and the executor waits for
    /// those (see `apply::schedule`).
    pub fn is_retryable(&self) -> bool {
        if self.operation_quota().is_some() {
            return false;
        }
        match self {
            CloudError::Api { status, reason, .. } => match status {
                429 | 500 | 502 | 503 | 504 => true,
                403 => matches!(
                    reason.as_deref(),
                    Some("rateLimitExceeded" | "userRateLimitExceeded" | "RATE_LIMIT_EXCEEDED")
                ),
                _ => false,
            },
            CloudError::Transport { source, .. } => !source.is_builder(),
            _ => false,
        }
    }
}

/// GKE's messages for "another operation is running on this cluster, try later"
/// (current and older forms, see gcp-api.md §3.2).
fn is_cluster_busy_message(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("incompatible operation")
        || m.contains("please wait and try again")
        || m.contains("is currently being created, deleted, updated or repaired")
}

/// Google's error envelope `{"error": {...}}`.
#[derive(Debug, Deserialize)]
struct Envelope {
    error: EnvelopeBody,
}

#[derive(Debug, Default, Deserialize)]
struct EnvelopeBody {
    #[serde(default)]
    message: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    errors: Vec<LegacyError>,
    #[serde(default)]
    details: Vec<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct LegacyError {
    #[serde(default)]
    reason: Option<String>,
}

/// Builds a [`CloudError::Api`] from an HTTP error status and its body.
/// Bodies that are not Google's envelope (a proxy's HTML page) still give an
/// error with the code derived from the HTTP status.
pub(crate) fn api_error(status: u16, body: &[u8], method: &str) -> CloudError {
    match serde_json::from_slice::<Envelope>(body) {
        // GKE's answer when a specific reservation lacks room:
        // "Reservation does not have enough resources for the request:
        // specific reservation \"r\" is insufficient for node pool \"np\" at
        // zone \"z\": required 1 and short of 1 VM count of machine type m."
        // (HTTP 429; GoogleCloudPlatform/gsutil#1000).
        Ok(Envelope { error })
            if status == 429 && error.message.starts_with(RESERVATION_FULL_PREFIX) =>
        {
            CloudError::ReservationFull {
                message: error.message,
                method: method.to_string(),
            }
        }
        Ok(Envelope { error }) => {
            let reason = error
                .errors
                .iter()
                .find_map(|e| e.reason.clone())
                .or_else(|| error_info_reason(&error.details));
            CloudError::Api {
                status,
                code: error
                    .status
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| code_for_http_status(status).to_string()),
                reason,
                message: error.message,
                method: method.to_string(),
            }
        }
        Err(_) => CloudError::Api {
            status,
            code: code_for_http_status(status).to_string(),
            reason: None,
            message: snippet(body, 300),
            method: method.to_string(),
        },
    }
}

fn error_info_reason(details: &[serde_json::Value]) -> Option<String> {
    details.iter().find_map(|d| {
        let ty = d.get("@type")?.as_str()?;
        if ty.ends_with("google.rpc.ErrorInfo") {
            Some(d.get("reason")?.as_str()?.to_string())
        } else {
            None
        }
    })
}

/// The canonical code name Google maps an HTTP status to (AIP-193).
pub(crate) fn code_for_http_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        412 => "FAILED_PRECONDITION",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

/// The name of a numeric `google.rpc.Code`.
pub(crate) fn rpc_code_name(code: i32) -> String {
    let name = match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        other => return format!("CODE_{other}"),
    };
    name.to_string()
}

/// The first `max` characters of a body, lossily decoded, for error context.
pub(crate) fn snippet(body: &[u8], max: usize) -> String {
    String::from_utf8_lossy(body).chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, code: &str, reason: Option<&str>, message: &str) -> CloudError {
        CloudError::Api {
            status,
            code: code.into(),
            reason: reason.map(Into::into),
            message: message.into(),
            method: "m".into(),
        }
    }

    #[test]
    fn parses_compute_not_found_envelope() {
        let body = br#"{"error":{"code":404,"message":"The resource 'projects/p/regions/r/resourcePolicies/x' was not found",
            "errors":[{"message":"same","domain":"global","reason":"notFound"}],"status":"NOT_FOUND"}}"#;
        let e = api_error(404, body, "compute.resourcePolicies.get");
        match &e {
            CloudError::Api {
                status,
                code,
                reason,
                message,
                method,
            } => {
                assert_eq!(*status, 404);
                assert_eq!(code, "NOT_FOUND");
                assert_eq!(reason.as_deref(), Some("notFound"));
                assert!(message.contains("was not found"));
                assert_eq!(method, "compute.resourcePolicies.get");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(e.is_not_found());
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("HTTP 404 NOT_FOUND (notFound)"));
    }

    #[test]
    fn envelope_without_status_uses_http_code_and_error_info_reason() {
        let body = br#"{"error":{"code":429,"message":"Quota exceeded for quota metric 'Read requests'",
            "details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com"}]}}"#;
        let e = api_error(429, body, "m");
        assert!(matches!(&e, CloudError::Api { code, reason: Some(r), .. }
            if code == "RESOURCE_EXHAUSTED" && r == "RATE_LIMIT_EXCEEDED"));
        assert!(e.is_retryable());
    }

    #[test]
    fn non_json_error_body_still_classified() {
        let e = api_error(502, b"<html>Bad Gateway</html>", "m");
        assert!(matches!(&e, CloudError::Api { code, message, .. }
            if code == "UNKNOWN" && message.contains("Bad Gateway")));
        assert!(e.is_retryable());
        let e = api_error(404, b"", "m");
        assert!(e.is_not_found());
    }

    #[test]
    fn retry_classification() {
        for s in [429, 500, 502, 503, 504] {
            assert!(api(s, "X", None, "").is_retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 409, 412, 501] {
            assert!(!api(s, "X", None, "").is_retryable(), "{s}");
        }
        assert!(api(403, "PERMISSION_DENIED", Some("rateLimitExceeded"), "").is_retryable());
        assert!(!api(403, "PERMISSION_DENIED", Some("forbidden"), "").is_retryable());
        // GKE: the cluster is busy with another operation.
        let busy = api(
            400,
            "FAILED_PRECONDITION",
            Some("failedPrecondition"),
            "Cluster is running incompatible operation operation-1234-abcd.",
        );
        // Not retried blindly: the executor waits for the operation it names.
        assert!(busy.is_cluster_busy() && !busy.is_retryable());
        assert_eq!(busy.busy_operation(), Some("operation-1234-abcd"));
        let old_busy = api(
            400,
            "FAILED_PRECONDITION",
            None,
            "Operation operation-1558074043943-c4492e58 is currently upgrading cluster X. Please wait and try again once it is done.",
        );
        assert!(old_busy.is_cluster_busy() && !old_busy.is_retryable());
        assert_eq!(
            old_busy.busy_operation(),
            Some("operation-1558074043943-c4492e58")
        );
        // GKE's per-cluster operations quota: learned, never retried blindly.
        let quota = api(
            429,
            "RESOURCE_EXHAUSTED",
            Some("rateLimitExceeded"),
            "Too many operations: cluster \"c\" hits the concurrent operations quota 5, please try again later.",
        );
        assert_eq!(quota.operation_quota(), Some(Some(5)));
        assert!(!quota.is_retryable());
        let vague = api(429, "RESOURCE_EXHAUSTED", None, "Too many operations.");
        assert_eq!(vague.operation_quota(), Some(None));
        let rate = api(
            429,
            "RESOURCE_EXHAUSTED",
            Some("rateLimitExceeded"),
            "Quota exceeded",
        );
        assert_eq!(rate.operation_quota(), None);
        assert!(rate.is_retryable());
        // Other preconditions and invalid arguments are permanent.
        assert!(!api(400, "FAILED_PRECONDITION", None, "node pool is too big").is_retryable());
        assert!(!api(400, "INVALID_ARGUMENT", None, "incompatible operation").is_retryable());
        // 409 already exists is permanent (the caller GETs the resource).
        let exists = api(
            409,
            "ALREADY_EXISTS",
            Some("alreadyExists"),
            "Already exists: x",
        );
        assert!(exists.is_already_exists());
        assert!(!exists.is_retryable());
        // Operation outcomes are never retried at the HTTP level.
        let failed = CloudError::OperationFailed {
            operation: "op".into(),
            code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
            message: "no capacity".into(),
        };
        assert!(!failed.is_retryable());
        assert!(failed.is_stockout());
        assert!(
            !CloudError::Timeout {
                operation: "op".into(),
                after: Duration::from_secs(1)
            }
            .is_retryable()
        );
    }

    #[test]
    fn a_full_reservation_is_capacity_not_a_rate_limit() {
        let body = br#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"Reservation does not have enough resources for the request: specific reservation \"r1\" is insufficient for node pool \"np\" at zone \"us-central1-b\": required 4 and short of 2 VM count of machine type ct6e-standard-4t.","errors":[{"message":"x","domain":"global","reason":"resourceExhausted"}]}}"#;
        let e = api_error(
            429,
            body,
            "container.projects.locations.clusters.nodePools.create",
        );
        assert!(matches!(e, CloudError::ReservationFull { .. }), "{e:?}");
        assert!(!e.is_retryable());
        assert_eq!(e.operation_quota(), None);
        let text = e.to_string();
        assert!(
            text.contains("specific reservation \"r1\" is insufficient"),
            "{text}"
        );
        assert!(
            text.contains("does not retry it") && text.contains("grow the reservation"),
            "{text}"
        );
        // Any other 429 is still a rate limit.
        let rate = br#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"Quota exceeded for quota metric 'Requests'"}}"#;
        assert!(api_error(429, rate, "m").is_retryable());
    }

    #[test]
    fn rpc_code_names() {
        assert_eq!(rpc_code_name(8), "RESOURCE_EXHAUSTED");
        assert_eq!(rpc_code_name(9), "FAILED_PRECONDITION");
        assert_eq!(rpc_code_name(99), "CODE_99");
    }
}
