//! Google's JSON error envelope (AIP-193), as both GKE and Compute send it:
//! `{"error":{"code","message","status","errors":[{"message","domain","reason"}],"details":[…]}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One API error, rendered as Google's envelope.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    /// HTTP status code.
    pub http: u16,
    /// google.rpc.Code name, e.g. `NOT_FOUND`.
    pub status: &'static str,
    /// Legacy `errors[].reason`, e.g. `notFound`.
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details[]` entries (`@type`-tagged).
    pub details: Vec<Value>,
}

impl ApiError {
    fn new(http: u16, status: &'static str, reason: &'static str, message: String) -> Self {
        Self {
            http,
            status,
            reason,
            message,
            details: Vec::new(),
        }
    }

    /// 404 NOT_FOUND / notFound.
    pub fn not_found(message: String) -> Self {
        Self::new(404, "NOT_FOUND", "notFound", message)
    }

    /// 409 ALREADY_EXISTS / alreadyExists.
    pub fn already_exists(message: String) -> Self {
        Self::new(409, "ALREADY_EXISTS", "alreadyExists", message)
    }

    /// 400 INVALID_ARGUMENT with the given legacy reason (`badRequest` for
    /// GKE, `invalid` for Compute).
    pub fn invalid(reason: &'static str, message: String) -> Self {
        Self::new(400, "INVALID_ARGUMENT", reason, message)
    }

    /// 400 FAILED_PRECONDITION (GKE's "incompatible operation").
    pub fn failed_precondition(message: String) -> Self {
        Self::new(400, "FAILED_PRECONDITION", "failedPrecondition", message)
    }

    /// 412 FAILED_PRECONDITION / conditionNotMet (a stale or missing
    /// fingerprint). The legacy reason is from the compute `Metadata`
    /// schema ("the request will fail with error 412 conditionNotMet"); the
    /// `status` name is the canonical code for HTTP 412 (AIP-193 mapping).
    pub fn condition_not_met(message: String) -> Self {
        Self::new(412, "FAILED_PRECONDITION", "conditionNotMet", message)
    }

    /// 400 / resourceInUseByAnotherResource (deleting a resource another
    /// one still uses, e.g. an instance template of a MIG).
    pub fn in_use(message: String) -> Self {
        Self::new(
            400,
            "FAILED_PRECONDITION",
            "resourceInUseByAnotherResource",
            message,
        )
    }

    /// 409 ABORTED (GKE etag mismatch).
    pub fn aborted(message: String) -> Self {
        Self::new(409, "ABORTED", "aborted", message)
    }

    /// 429 RESOURCE_EXHAUSTED / rateLimitExceeded with an ErrorInfo detail.
    pub fn rate_limited(service: &str) -> Self {
        let mut e = Self::new(
            429,
            "RESOURCE_EXHAUSTED",
            "rateLimitExceeded",
            format!(
                "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' of service '{service}'."
            ),
        );
        e.details.push(json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "RATE_LIMIT_EXCEEDED",
            "domain": "googleapis.com",
            "metadata": {"service": service, "quota_metric": format!("{service}/requests")}
        }));
        e
    }

    /// 429 RESOURCE_EXHAUSTED for GKE's per-cluster concurrent operations
    /// quota ("Too many operations: …").
    pub fn too_many_operations(message: String) -> Self {
        Self::new(429, "RESOURCE_EXHAUSTED", "rateLimitExceeded", message)
    }

    /// 429 RESOURCE_EXHAUSTED for a capacity shortage (not a rate limit),
    /// such as a specific reservation without room for a node pool.
    pub fn capacity_exhausted(message: String) -> Self {
        Self::new(429, "RESOURCE_EXHAUSTED", "resourceExhausted", message)
    }

    /// 403 PERMISSION_DENIED / forbidden: the caller lacks a permission
    /// (`sim::quotas::denied`), or GKE's regional quota cannot hold a node
    /// pool create (`sim::quotas::check_pool_quota`).
    pub fn forbidden(message: String) -> Self {
        Self::new(403, "PERMISSION_DENIED", "forbidden", message)
    }

    /// 503 UNAVAILABLE / backendError.
    pub fn unavailable() -> Self {
        Self::new(
            503,
            "UNAVAILABLE",
            "backendError",
            "The service is currently unavailable.".to_string(),
        )
    }

    /// 405-style "method not allowed" as Google words it (404 for unknown URLs).
    pub fn unknown_route(method: &str, path: &str) -> Self {
        Self::new(
            404,
            "NOT_FOUND",
            "notFound",
            format!("The requested URL {path} was not found on this server (method {method})."),
        )
    }

    /// 500 INTERNAL / backendError.
    pub fn internal(message: String) -> Self {
        Self::new(500, "INTERNAL", "backendError", message)
    }

    /// Adds a `google.rpc.RequestInfo` detail (GKE attaches one to 400s).
    pub fn with_request_info(mut self, request_id: &str) -> Self {
        self.details.push(json!({
            "@type": "type.googleapis.com/google.rpc.RequestInfo",
            "requestId": request_id
        }));
        self
    }

    /// The JSON envelope.
    pub fn body(&self) -> Value {
        json!({
            "error": {
                "code": self.http,
                "message": self.message,
                "status": self.status,
                "errors": [{"message": self.message, "domain": "global", "reason": self.reason}],
                "details": self.details,
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (code, axum::Json(self.body())).into_response()
    }
}

/// The numeric google.rpc.Code for a canonical status name (for GKE
/// `Operation.error.code`).
pub(crate) fn rpc_code(status: &str) -> i32 {
    match status {
        "CANCELLED" => 1,
        "UNKNOWN" => 2,
        "INVALID_ARGUMENT" => 3,
        "DEADLINE_EXCEEDED" => 4,
        "NOT_FOUND" => 5,
        "ALREADY_EXISTS" => 6,
        "PERMISSION_DENIED" => 7,
        "RESOURCE_EXHAUSTED" => 8,
        "FAILED_PRECONDITION" => 9,
        "ABORTED" => 10,
        "OUT_OF_RANGE" => 11,
        "UNIMPLEMENTED" => 12,
        "INTERNAL" => 13,
        "UNAVAILABLE" => 14,
        "DATA_LOSS" => 15,
        "UNAUTHENTICATED" => 16,
        _ => 0,
    }
}
