//! Base URLs of the GKE and Compute Engine APIs, and the `--api-endpoint`
//! override that points both at one server (the simulator, a proxy).

use std::net::{Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

use super::error::CloudError;

/// Environment variable behind `--api-endpoint`.
pub const API_ENDPOINT_ENV: &str = "SLICECTL_API_ENDPOINT";

/// Default GKE base URL (method paths start with `v1/`).
pub const DEFAULT_CONTAINER: &str = "https://container.googleapis.com/";
/// Default Compute Engine base URL (method paths start with `projects/`).
pub const DEFAULT_COMPUTE: &str = "https://compute.googleapis.com/compute/v1/";
/// Default Cloud Quotas base URL (method paths start with `v1/`): the
/// limits of the quotas `regions.get` does not list (TPU v5p, v6e, TPU7x).
pub const DEFAULT_CLOUDQUOTAS: &str = "https://cloudquotas.googleapis.com/";
/// Default Cloud Monitoring base URL (method paths start with `v3/`): the
/// usage of those quotas.
pub const DEFAULT_MONITORING: &str = "https://monitoring.googleapis.com/";

/// Base URLs, each ending in `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// GKE base, e.g. `https://container.googleapis.com/`; calls go to `{container}v1/...`.
    pub container: String,
    /// Compute base including the version, e.g. `https://compute.googleapis.com/compute/v1/`.
    pub compute: String,
    /// Cloud Quotas base, e.g. `https://cloudquotas.googleapis.com/`; calls go to `{cloudquotas}v1/...`.
    pub cloudquotas: String,
    /// Cloud Monitoring base, e.g. `https://monitoring.googleapis.com/`; calls go to `{monitoring}v3/...`.
    pub monitoring: String,
    /// True when the override names a loopback host (no credentials are sent
    /// unless a token source is injected).
    pub loopback: bool,
    /// True when the override uses plain `http` (no TLS).
    pub plain_http: bool,
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints {
            container: DEFAULT_CONTAINER.to_string(),
            compute: DEFAULT_COMPUTE.to_string(),
            cloudquotas: DEFAULT_CLOUDQUOTAS.to_string(),
            monitoring: DEFAULT_MONITORING.to_string(),
            loopback: false,
            plain_http: false,
        }
    }
}

impl Endpoints {
    /// The production endpoints, or with `Some(url)` every API on that server:
    /// GKE at `{url}/v1/...`, Compute at `{url}/compute/v1/...` and Cloud
    /// Quotas at `{url}/v1/projects/P/locations/global/services/...`, Cloud
    /// Monitoring at `{url}/v3/projects/P/timeSeries`.
    pub fn new(api_endpoint: Option<&str>) -> Result<Endpoints, CloudError> {
        let Some(raw) = api_endpoint.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(Endpoints::default());
        };
        let url = Url::parse(raw)
            .map_err(|e| CloudError::InvalidInput(format!("--api-endpoint {raw:?}: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(CloudError::InvalidInput(format!(
                "--api-endpoint {raw:?}: scheme must be http or https"
            )));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(CloudError::InvalidInput(format!(
                "--api-endpoint {raw:?}: must not have a query or fragment"
            )));
        }
        let base = url.as_str().trim_end_matches('/');
        Ok(Endpoints {
            container: format!("{base}/"),
            compute: format!("{base}/compute/v1/"),
            cloudquotas: format!("{base}/"),
            monitoring: format!("{base}/"),
            loopback: url.host().is_some_and(|h| is_loopback_host(&h)),
            plain_http: url.scheme() == "http",
        })
    }

    /// True when a bearer token sent to these endpoints would travel
    /// unencrypted over the network: plain `http` to a host that is not
    /// loopback.
    pub fn credentials_in_clear(&self) -> bool {
        self.plain_http && !self.loopback
    }

    /// `{container}v1/{path}`.
    pub fn container_url(&self, path: &str) -> String {
        format!("{}v1/{}", self.container, path.trim_start_matches('/'))
    }

    /// `{cloudquotas}v1/{path}`.
    pub fn cloudquotas_url(&self, path: &str) -> String {
        format!("{}v1/{}", self.cloudquotas, path.trim_start_matches('/'))
    }

    /// `{monitoring}v3/{path}`.
    pub fn monitoring_url(&self, path: &str) -> String {
        format!("{}v3/{}", self.monitoring, path.trim_start_matches('/'))
    }

    /// `{compute}{path}`.
    pub fn compute_url(&self, path: &str) -> String {
        format!("{}{}", self.compute, path.trim_start_matches('/'))
    }
}

/// `localhost` (and `*.localhost`), 127.0.0.0/8, `[::1]` and the IPv4-mapped
/// IPv6 form of 127.0.0.0/8 (`[::ffff:127.0.0.1]`, `[::ffff:7f00:1]`).
/// The URL parser has already normalised IP literals (`127.1`, `0x7f.1`,
/// `2130706433` are all `Host::Ipv4(127.0.0.1)`), so no string parsing here.
fn is_loopback_host(host: &Host<&str>) -> bool {
    match host {
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => is_loopback_v6(ip),
        Host::Domain(d) => {
            let d = d.to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    }
}

/// `::1`, or an IPv4-mapped `::ffff:a.b.c.d` with `a.b.c.d` in 127.0.0.0/8.
fn is_loopback_v6(ip: &Ipv6Addr) -> bool {
    ip.is_loopback()
        || ip
            .to_ipv4_mapped()
            .is_some_and(|v4: Ipv4Addr| v4.is_loopback())
}

/// Checks a path segment taken from user input or an operation (project,
/// location, name): non-empty and free of characters that would change the URL.
pub(crate) fn segment<'a>(what: &str, value: &'a str) -> Result<&'a str, CloudError> {
    if value.is_empty()
        || value.chars().any(|c| {
            matches!(c, '/' | '?' | '#' | '%' | '\\') || c.is_whitespace() || c.is_control()
        })
    {
        return Err(CloudError::InvalidInput(format!("bad {what} {value:?}")));
    }
    Ok(value)
}

#[cfg(test)]
#[path = "endpoints/tests.rs"]
mod tests;
