//! Base URLs of the GKE and Compute Engine APIs, and the `--api-endpoint`
//! override that points both at one server (the simulator, a proxy).

use std::net::IpAddr;

use reqwest::Url;

use super::error::CloudError;

/// Environment variable behind `--api-endpoint`.
pub const API_ENDPOINT_ENV: &str = "SLICECTL_API_ENDPOINT";

/// Default GKE base URL (method paths start with `v1/`).
pub const DEFAULT_CONTAINER: &str = "https://container.googleapis.com/";
/// Default Compute Engine base URL (method paths start with `projects/`).
pub const DEFAULT_COMPUTE: &str = "https://compute.googleapis.com/compute/v1/";

/// Base URLs, each ending in `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// GKE base, e.g. `https://container.googleapis.com/`; calls go to `{container}v1/...`.
    pub container: String,
    /// Compute base including the version, e.g. `https://compute.googleapis.com/compute/v1/`.
    pub compute: String,
    /// True when the override names a loopback host (no credentials are sent).
    pub loopback: bool,
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints {
            container: DEFAULT_CONTAINER.to_string(),
            compute: DEFAULT_COMPUTE.to_string(),
            loopback: false,
        }
    }
}

impl Endpoints {
    /// The production endpoints, or with `Some(url)` both APIs on that server:
    /// GKE at `{url}/v1/...` and Compute at `{url}/compute/v1/...`.
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
            loopback: is_loopback_host(url.host_str().unwrap_or_default()),
        })
    }

    /// `{container}v1/{path}`.
    pub fn container_url(&self, path: &str) -> String {
        format!("{}v1/{}", self.container, path.trim_start_matches('/'))
    }

    /// `{compute}{path}`.
    pub fn compute_url(&self, path: &str) -> String {
        format!("{}{}", self.compute, path.trim_start_matches('/'))
    }
}

/// `localhost` (and `*.localhost`), 127.0.0.0/8 and `[::1]`.
fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = h.parse::<IpAddr>() {
        return ip.is_loopback();
    }
    let h = h.to_ascii_lowercase();
    h == "localhost" || h.ends_with(".localhost")
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
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let e = Endpoints::new(None).unwrap();
        assert_eq!(
            e.container_url("projects/p/locations/l/clusters/c/nodePools"),
            "https://container.googleapis.com/v1/projects/p/locations/l/clusters/c/nodePools"
        );
        assert_eq!(
            e.compute_url("projects/p/regions/r/resourcePolicies"),
            "https://compute.googleapis.com/compute/v1/projects/p/regions/r/resourcePolicies"
        );
        assert!(!e.loopback);
        assert_eq!(Endpoints::new(Some("  ")).unwrap(), Endpoints::default());
    }

    #[test]
    fn override_with_and_without_trailing_slash() {
        for raw in ["http://127.0.0.1:8080", "http://127.0.0.1:8080/"] {
            let e = Endpoints::new(Some(raw)).unwrap();
            assert_eq!(e.container, "http://127.0.0.1:8080/");
            assert_eq!(e.compute, "http://127.0.0.1:8080/compute/v1/");
            assert_eq!(
                e.container_url("projects/p/locations/l/operations/op"),
                "http://127.0.0.1:8080/v1/projects/p/locations/l/operations/op"
            );
            assert!(e.loopback);
        }
        let e = Endpoints::new(Some("https://proxy.example.com/gcp/")).unwrap();
        assert_eq!(e.container, "https://proxy.example.com/gcp/");
        assert_eq!(e.compute, "https://proxy.example.com/gcp/compute/v1/");
        assert!(!e.loopback);
    }

    #[test]
    fn loopback_detection() {
        for (raw, lo) in [
            ("http://127.0.0.1:1", true),
            ("http://127.9.8.7", true),
            ("http://localhost:9", true),
            ("http://LOCALHOST", true),
            ("http://[::1]:9/", true),
            ("http://10.0.0.1", false),
            ("http://128.0.0.1", false),
            ("http://localhost.example.com", false),
            ("https://container.googleapis.com", false),
        ] {
            assert_eq!(Endpoints::new(Some(raw)).unwrap().loopback, lo, "{raw}");
        }
    }

    #[test]
    fn rejects_bad_overrides() {
        assert!(Endpoints::new(Some("not a url")).is_err());
        assert!(Endpoints::new(Some("ftp://x/")).is_err());
        assert!(Endpoints::new(Some("http://x/?a=b")).is_err());
    }

    #[test]
    fn segments() {
        assert!(segment("project", "my-proj").is_ok());
        assert!(segment("project", "example.com:proj").is_ok());
        for bad in ["", "a/b", "a?b", "a b", "a#b", "%2F"] {
            assert!(segment("name", bad).is_err(), "{bad}");
        }
    }
}
