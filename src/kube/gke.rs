//! Reaching a GKE cluster's Kubernetes API the way `gcloud container
//! clusters get-credentials` and `gke-gcloud-auth-plugin` do: the server
//! and its CA from `clusters.get`, and the caller's Google access token as
//! the bearer token.
//!
//! Which endpoint, from gcloud's own `_GetClusterEndpoint` and
//! `ClusterConfig.Persist` (google-cloud-sdk,
//! `lib/googlecloudsdk/api_lib/container/util.py`):
//!
//! - `public` (gcloud's default): the cluster's `endpoint`; when the
//!   cluster's IP endpoints are disabled
//!   (`controlPlaneEndpointsConfig.ipEndpointsConfig.enabled: false`),
//!   its DNS endpoint instead, as gcloud does;
//! - `private` (`--internal-ip`): the internal IP,
//!   `controlPlaneEndpointsConfig.ipEndpointsConfig.privateEndpoint`, or
//!   the deprecated `privateClusterConfig.privateEndpoint`; a cluster that
//!   has none is an error, as gcloud's `NonPrivateClusterError`;
//! - `dns` (`--dns-endpoint`): `controlPlaneEndpointsConfig.
//!   dnsEndpointConfig.endpoint`, which must allow external traffic
//!   (gcloud's `AllowExternalTrafficIsDisabledError`).
//!
//! The server is `https://ENDPOINT`. Its CA is `masterAuth.
//! clusterCaCertificate` (base64 of PEM, exactly what a kubeconfig's
//! `certificate-authority-data` holds), except for the DNS endpoint, whose
//! certificate is publicly trusted (gcloud writes no CA for it, `Cluster()`
//! in `kubeconfig.py`).

use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};
use secrecy::SecretString;

use crate::resource::ClusterRef;
use crate::resource::gke::ClusterAccess;
use crate::spec::model::GkeEndpoint;

/// Where a GKE cluster's API server is and which CA signs its certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GkeServer {
    /// `https://ENDPOINT`.
    pub url: String,
    /// Base64 of the PEM CA (`None`: the DNS endpoint, publicly trusted).
    pub ca_data: Option<String>,
    /// The endpoint actually used (`public` may fall back to `dns`).
    pub used: GkeEndpoint,
}

fn nonempty(s: Option<&String>) -> Option<&str> {
    s.map(String::as_str).filter(|s| !s.trim().is_empty())
}

/// The server and CA of `c` for the endpoint `want`, from its
/// `clusters.get`; an error says what is missing and what to choose
/// instead.
pub fn resolve_server(
    c: &ClusterRef,
    cluster: &ClusterAccess,
    want: GkeEndpoint,
) -> Result<GkeServer, String> {
    let cpe = cluster.control_plane_endpoints_config.as_ref();
    let ip = cpe.and_then(|x| x.ip_endpoints_config.as_ref());
    let dns = cpe.and_then(|x| x.dns_endpoint_config.as_ref());
    let ip_disabled = ip.and_then(|i| i.enabled) == Some(false);
    let used = match want {
        GkeEndpoint::Public if ip_disabled => GkeEndpoint::Dns,
        GkeEndpoint::Private if ip_disabled => {
            return Err(
                "the cluster has its IP endpoints disabled, so it has no private IP endpoint; \
                 set gke.kubeApi.endpoint: dns"
                    .to_owned(),
            );
        }
        w => w,
    };
    let host = match used {
        GkeEndpoint::Public => nonempty(cluster.endpoint.as_ref()).ok_or_else(|| {
            format!(
                "the cluster reports no endpoint (status {}; a cluster has none while it is \
                 provisioning)",
                cluster.status.as_deref().unwrap_or("unknown")
            )
        })?,
        GkeEndpoint::Private => nonempty(ip.and_then(|i| i.private_endpoint.as_ref()))
            .or_else(|| {
                nonempty(
                    cluster
                        .private_cluster_config
                        .as_ref()
                        .and_then(|p| p.private_endpoint.as_ref()),
                )
            })
            .ok_or_else(|| {
                "the cluster has no private endpoint (it is not a private cluster); set \
                     gke.kubeApi.endpoint: public or dns"
                    .to_owned()
            })?,
        GkeEndpoint::Dns => {
            let d = dns
                .and_then(|d| nonempty(d.endpoint.as_ref()).map(|e| (e, d)))
                .ok_or_else(|| {
                    format!(
                        "the cluster has no DNS-based control plane endpoint; enable it \
                         (`gcloud container clusters update {} --location {} --enable-dns-access`) \
                         or set gke.kubeApi.endpoint: public or private",
                        c.name, c.location
                    )
                })?;
            if d.1.allow_external_traffic != Some(true) {
                return Err(format!(
                    "the cluster's DNS endpoint {} does not allow external traffic \
                     (dnsEndpointConfig.allowExternalTraffic); allow it or choose another \
                     gke.kubeApi.endpoint",
                    d.0
                ));
            }
            d.0
        }
    };
    let ca_data = match used {
        GkeEndpoint::Dns => None,
        _ => Some(
            nonempty(
                cluster
                    .master_auth
                    .as_ref()
                    .and_then(|m| m.cluster_ca_certificate.as_ref()),
            )
            .ok_or_else(|| {
                "the cluster reports no CA certificate (masterAuth.clusterCaCertificate), \
                     so its API server cannot be verified"
                    .to_owned()
            })?
            .to_owned(),
        ),
    };
    let host = host.trim_start_matches("https://").trim_end_matches('/');
    Ok(GkeServer {
        url: format!("https://{host}"),
        ca_data,
        used,
    })
}

/// An in-memory kubeconfig for `server` with `token` as the bearer token
/// (never written anywhere).
pub fn kubeconfig(c: &ClusterRef, server: &GkeServer, token: Option<SecretString>) -> Kubeconfig {
    let name = format!("gke_{}_{}_{}", c.project, c.location, c.name);
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(Cluster {
                server: Some(server.url.clone()),
                certificate_authority_data: server.ca_data.clone(),
                ..Cluster::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(AuthInfo {
                token,
                ..AuthInfo::default()
            }),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            context: Some(Context {
                cluster: name.clone(),
                user: Some(name.clone()),
                ..Context::default()
            }),
            other: Default::default(),
        }],
        current_context: Some(name),
        ..Kubeconfig::default()
    }
}

#[cfg(test)]
#[path = "gke/tests.rs"]
mod tests;
