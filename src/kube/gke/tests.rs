#![cfg(test)]
use super::*;
use crate::resource::gke::{
    ControlPlaneEndpointsConfig, DnsEndpointConfig, IpEndpointsConfig, MasterAuth,
    PrivateClusterConfig,
};

fn cref() -> ClusterRef {
    ClusterRef {
        project: "p1".into(),
        location: "us-central2".into(),
        name: "train".into(),
    }
}

fn cluster() -> ClusterAccess {
    ClusterAccess {
        name: "train".into(),
        status: Some("RUNNING".into()),
        endpoint: Some("34.1.2.3".into()),
        master_auth: Some(MasterAuth {
            cluster_ca_certificate: Some("LS0tQ0E=".into()),
        }),
        private_cluster_config: Some(PrivateClusterConfig {
            private_endpoint: Some("10.0.0.9".into()),
        }),
        control_plane_endpoints_config: Some(ControlPlaneEndpointsConfig {
            dns_endpoint_config: Some(DnsEndpointConfig {
                endpoint: Some("gke-abc.us-central2.gke.goog".into()),
                allow_external_traffic: Some(true),
            }),
            ip_endpoints_config: Some(IpEndpointsConfig {
                enabled: Some(true),
                public_endpoint: Some("34.1.2.3".into()),
                private_endpoint: Some("10.0.0.8".into()),
            }),
        }),
    }
}

#[test]
fn public_private_and_dns_endpoints_resolve_as_gcloud_does() {
    let c = cluster();
    let s = resolve_server(&cref(), &c, GkeEndpoint::Public).unwrap();
    assert_eq!(s.url, "https://34.1.2.3");
    assert_eq!(s.ca_data.as_deref(), Some("LS0tQ0E="));
    assert_eq!(s.used, GkeEndpoint::Public);
    // The current field before the deprecated one.
    let s = resolve_server(&cref(), &c, GkeEndpoint::Private).unwrap();
    assert_eq!(s.url, "https://10.0.0.8");
    assert_eq!(s.ca_data.as_deref(), Some("LS0tQ0E="));
    let mut old = c.clone();
    old.control_plane_endpoints_config = None;
    let s = resolve_server(&cref(), &old, GkeEndpoint::Private).unwrap();
    assert_eq!(s.url, "https://10.0.0.9");
    // The DNS endpoint is publicly trusted: no CA.
    let s = resolve_server(&cref(), &c, GkeEndpoint::Dns).unwrap();
    assert_eq!(s.url, "https://gke-abc.us-central2.gke.goog");
    assert_eq!(s.ca_data, None);
}

#[test]
fn disabled_ip_endpoints_fall_back_to_dns_for_public_only() {
    let mut c = cluster();
    if let Some(ip) = c
        .control_plane_endpoints_config
        .as_mut()
        .and_then(|x| x.ip_endpoints_config.as_mut())
    {
        ip.enabled = Some(false);
    }
    let s = resolve_server(&cref(), &c, GkeEndpoint::Public).unwrap();
    assert_eq!(s.used, GkeEndpoint::Dns);
    assert_eq!(s.url, "https://gke-abc.us-central2.gke.goog");
    let e = resolve_server(&cref(), &c, GkeEndpoint::Private).unwrap_err();
    assert!(e.contains("IP endpoints disabled"), "{e}");
    assert!(e.contains("endpoint: dns"), "{e}");
}

#[test]
fn what_is_missing_is_said_with_what_to_do() {
    let mut c = cluster();
    c.private_cluster_config = None;
    c.control_plane_endpoints_config = None;
    let e = resolve_server(&cref(), &c, GkeEndpoint::Private).unwrap_err();
    assert!(e.contains("not a private cluster"), "{e}");
    let e = resolve_server(&cref(), &c, GkeEndpoint::Dns).unwrap_err();
    assert!(e.contains("--enable-dns-access"), "{e}");
    let mut c = cluster();
    c.endpoint = None;
    c.status = Some("PROVISIONING".into());
    let e = resolve_server(&cref(), &c, GkeEndpoint::Public).unwrap_err();
    assert!(e.contains("PROVISIONING"), "{e}");
    // The caller's error names the cluster (gke://…); this does not again.
    assert!(!e.contains("clusters/train"), "{e}");
    let mut c = cluster();
    c.master_auth = None;
    let e = resolve_server(&cref(), &c, GkeEndpoint::Public).unwrap_err();
    assert!(e.contains("clusterCaCertificate"), "{e}");
    let mut c = cluster();
    if let Some(d) = c
        .control_plane_endpoints_config
        .as_mut()
        .and_then(|x| x.dns_endpoint_config.as_mut())
    {
        d.allow_external_traffic = Some(false);
    }
    let e = resolve_server(&cref(), &c, GkeEndpoint::Dns).unwrap_err();
    assert!(e.contains("allowExternalTraffic"), "{e}");
}

#[test]
fn the_kubeconfig_carries_the_ca_and_a_token_that_debug_hides() {
    let s = resolve_server(&cref(), &cluster(), GkeEndpoint::Public).unwrap();
    let k = kubeconfig(&cref(), &s, Some(SecretString::from("ya29.secret")));
    let shown = format!("{k:?}");
    assert!(!shown.contains("ya29.secret"), "{shown}");
    assert_eq!(
        k.clusters[0]
            .cluster
            .as_ref()
            .and_then(|c| c.certificate_authority_data.as_deref()),
        Some("LS0tQ0E=")
    );
    assert_eq!(
        k.current_context.as_deref(),
        Some("gke_p1_us-central2_train")
    );
}
