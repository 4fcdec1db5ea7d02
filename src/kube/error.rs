//! Errors of the Kubernetes seam ([`super::KubeService`]).
//!
//! Each error names the cluster (its control-plane endpoint), what slicectl
//! tried (`verb resource`), and what to do. Token secrets never appear in
//! them: the implementations redact server messages that could echo one.

use std::fmt;

/// What a call tried to do: a Kubernetes verb on a resource, for errors and
/// logs (`patch nodes/tpu-vm-0`, `list secrets in kube-system`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The RBAC verb (`get`, `list`, `create`, `patch`, `delete`).
    pub verb: &'static str,
    /// The resource (plural, with `group/` for non-core groups).
    pub resource: &'static str,
    /// The object's name (with `namespace/`), if the call is about one.
    pub object: Option<Box<str>>,
}

impl Attempt {
    /// A verb on a whole resource (`list nodes`).
    pub fn new(verb: &'static str, resource: &'static str) -> Self {
        Self {
            verb,
            resource,
            object: None,
        }
    }

    /// A verb on one object (`delete nodes tpu-vm-0`).
    pub fn on(verb: &'static str, resource: &'static str, object: impl Into<String>) -> Self {
        Self {
            verb,
            resource,
            object: Some(object.into().into_boxed_str()),
        }
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.object {
            Some(o) => write!(f, "{} {} {o}", self.verb, self.resource),
            None => write!(f, "{} {}", self.verb, self.resource),
        }
    }
}

/// An error talking to a cluster's Kubernetes API.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The API server could not be reached: connection refused, timeout,
    /// DNS, TLS handshake.
    #[error(
        "cannot reach the Kubernetes API of cluster {endpoint} at {server} ({attempt}): {detail}; \
         check that the control plane is running and reachable from here, and that the \
         target's kubeApi (gce.kubeApi, or gke.kubeApi: endpoint, kubeconfig, context) points at it"
    )]
    Unreachable {
        /// The cluster (its control-plane endpoint).
        endpoint: String,
        /// The API server URL slicectl dialled.
        server: String,
        /// What was being done.
        attempt: Attempt,
        /// The transport error, with its causes.
        detail: String,
    },
    /// RBAC denied the call (403).
    #[error(
        "forbidden on cluster {endpoint}: slicectl may not {attempt}: {message}; grant its \
         identity `{verb}` on `{resource}`",
        verb = attempt.verb,
        resource = attempt.resource
    )]
    Forbidden {
        /// The cluster.
        endpoint: String,
        /// The denied call.
        attempt: Attempt,
        /// The API server's message.
        message: String,
    },
    /// The object (or its namespace) does not exist (404).
    #[error("not found on cluster {endpoint} ({attempt}): {message}")]
    NotFound {
        /// The cluster.
        endpoint: String,
        /// The call.
        attempt: Attempt,
        /// The API server's message.
        message: String,
    },
    /// The object exists already, or changed since it was read (409).
    #[error("conflict on cluster {endpoint} ({attempt}): {message}")]
    Conflict {
        /// The cluster.
        endpoint: String,
        /// The call.
        attempt: Attempt,
        /// The API server's message.
        message: String,
    },
    /// Any other answer of the API server that is an error.
    #[error("Kubernetes API error on cluster {endpoint} ({attempt}): {status} {message}")]
    Api {
        /// The cluster.
        endpoint: String,
        /// The call.
        attempt: Attempt,
        /// The HTTP status.
        status: u16,
        /// The Status `reason` (`Invalid`, `TooManyRequests`, …) and the API
        /// server's message, `reason: message`.
        message: String,
    },
    /// The API server answered, but not with something slicectl can use
    /// (an undecodable body, a `kube-root-ca.crt` without a certificate).
    #[error("unexpected answer from cluster {endpoint} ({attempt}): {message}")]
    Invalid {
        /// The cluster.
        endpoint: String,
        /// The call.
        attempt: Attempt,
        /// What is wrong.
        message: String,
    },
    /// How to reach the cluster is not configured, or the configuration is
    /// unusable: kubeconfig missing or unreadable, context missing, no
    /// in-cluster service account.
    #[error("cannot configure a client for cluster {endpoint}: {message}")]
    Config {
        /// The cluster.
        endpoint: String,
        /// What is wrong and where.
        message: String,
    },
}

impl KubeError {
    /// A stable, machine-readable code: `kube_unreachable`, `kube_forbidden`,
    /// `kube_config`, or `kube_error` for everything else.
    pub fn code(&self) -> &'static str {
        match self {
            KubeError::Unreachable { .. } => "kube_unreachable",
            KubeError::Forbidden { .. } => "kube_forbidden",
            KubeError::Config { .. } => "kube_config",
            KubeError::NotFound { .. }
            | KubeError::Conflict { .. }
            | KubeError::Api { .. }
            | KubeError::Invalid { .. } => "kube_error",
        }
    }

    /// Whether this is a 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, KubeError::NotFound { .. })
    }

    /// Whether this is a 409.
    pub fn is_conflict(&self) -> bool {
        matches!(self, KubeError::Conflict { .. })
    }

    /// Whether trying again later may succeed: unreachable, 409, 429 and
    /// 5xx.
    pub fn is_transient(&self) -> bool {
        match self {
            KubeError::Unreachable { .. } | KubeError::Conflict { .. } => true,
            KubeError::Api { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }

    /// The same error with every occurrence of `secret` in its free text
    /// replaced by `<redacted>` (for calls that carry a token secret).
    pub fn redact(self, secret: &str) -> Self {
        if secret.is_empty() {
            return self;
        }
        let r = |s: String| s.replace(secret, "<redacted>");
        match self {
            KubeError::Unreachable {
                endpoint,
                server,
                attempt,
                detail,
            } => KubeError::Unreachable {
                endpoint,
                server,
                attempt,
                detail: r(detail),
            },
            KubeError::Forbidden {
                endpoint,
                attempt,
                message,
            } => KubeError::Forbidden {
                endpoint,
                attempt,
                message: r(message),
            },
            KubeError::NotFound {
                endpoint,
                attempt,
                message,
            } => KubeError::NotFound {
                endpoint,
                attempt,
                message: r(message),
            },
            KubeError::Conflict {
                endpoint,
                attempt,
                message,
            } => KubeError::Conflict {
                endpoint,
                attempt,
                message: r(message),
            },
            KubeError::Api {
                endpoint,
                attempt,
                status,
                message,
            } => KubeError::Api {
                endpoint,
                attempt,
                status,
                message: r(message),
            },
            KubeError::Invalid {
                endpoint,
                attempt,
                message,
            } => KubeError::Invalid {
                endpoint,
                attempt,
                message: r(message),
            },
            KubeError::Config { endpoint, message } => KubeError::Config {
                endpoint,
                message: r(message),
            },
        }
    }

    /// Classifies an error of the kube client.
    pub fn from_client(endpoint: &str, server: &str, attempt: Attempt, err: ::kube::Error) -> Self {
        let endpoint = endpoint.to_owned();
        match err {
            ::kube::Error::Api(status) => {
                let message = status.message.clone();
                match status.code {
                    403 => KubeError::Forbidden {
                        endpoint,
                        attempt,
                        message,
                    },
                    404 => KubeError::NotFound {
                        endpoint,
                        attempt,
                        message,
                    },
                    409 => KubeError::Conflict {
                        endpoint,
                        attempt,
                        message,
                    },
                    code => KubeError::Api {
                        endpoint,
                        attempt,
                        status: code,
                        message: if status.reason.is_empty() {
                            message
                        } else {
                            format!("{}: {message}", status.reason)
                        },
                    },
                }
            }
            e @ (::kube::Error::HyperError(_)
            | ::kube::Error::Service(_)
            | ::kube::Error::RustlsTls(_)
            | ::kube::Error::TlsRequired
            | ::kube::Error::ProxyProtocolUnsupported { .. }
            | ::kube::Error::ProxyProtocolDisabled { .. }) => KubeError::Unreachable {
                endpoint,
                server: server.to_owned(),
                attempt,
                detail: chain(&e),
            },
            e @ (::kube::Error::Auth(_)
            | ::kube::Error::InferConfig(_)
            | ::kube::Error::InferKubeconfig(_)) => KubeError::Config {
                endpoint,
                message: format!("{attempt}: {}", chain(&e)),
            },
            e => KubeError::Invalid {
                endpoint,
                attempt,
                message: chain(&e),
            },
        }
    }
}

/// An error and its causes, `a: b: c`, without repeats (kube's errors often
/// repeat their source in their own text).
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> ::kube::Error {
        ::kube::Error::Api(
            ::kube::core::Status {
                code,
                reason: reason.to_owned(),
                message: message.to_owned(),
                ..::kube::core::Status::default()
            }
            .boxed(),
        )
    }

    #[test]
    fn api_statuses_map_to_variants_and_codes() {
        let at = || Attempt::on("patch", "nodes", "n1");
        let cases = [
            (403, "kube_forbidden"),
            (404, "kube_error"),
            (409, "kube_error"),
            (422, "kube_error"),
            (500, "kube_error"),
        ];
        for (status, code) in cases {
            let e = KubeError::from_client("cp:6443", "https://x", at(), api(status, "R", "m"));
            assert_eq!(e.code(), code, "{status}");
        }
        let e = KubeError::from_client("cp:6443", "https://x", at(), api(404, "NotFound", "m"));
        assert!(e.is_not_found());
        let e = KubeError::from_client("cp:6443", "https://x", at(), api(409, "Conflict", "m"));
        assert!(e.is_conflict() && e.is_transient());
        let e = KubeError::from_client("cp:6443", "https://x", at(), api(429, "TooMany", "m"));
        assert!(e.is_transient());
        let e = KubeError::from_client("cp:6443", "https://x", at(), api(422, "Invalid", "m"));
        assert!(!e.is_transient());
    }

    #[test]
    fn forbidden_names_the_verb_and_resource() {
        let e = KubeError::from_client(
            "cp:6443",
            "https://x",
            Attempt::on("delete", "nodes", "tpu-vm-0"),
            api(403, "Forbidden", "nodes \"tpu-vm-0\" is forbidden"),
        );
        let text = e.to_string();
        assert!(text.contains("may not delete nodes tpu-vm-0"), "{text}");
        assert!(
            text.contains("grant its identity `delete` on `nodes`"),
            "{text}"
        );
        assert!(text.contains("cp:6443"), "{text}");
    }

    #[test]
    fn redact_removes_the_secret_everywhere() {
        let e = KubeError::Api {
            endpoint: "cp:6443".into(),
            attempt: Attempt::new("create", "secrets"),
            status: 422,
            message: "bad value 0123456789abcdef".into(),
        }
        .redact("0123456789abcdef");
        let text = format!("{e} {e:?}");
        assert!(!text.contains("0123456789abcdef"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
}
