#![cfg(test)]
use super::*;

#[test]
fn home_is_expanded_only_at_the_start() {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return;
    };
    assert_eq!(expand_home("~/k/config"), home.join("k/config"));
    assert_eq!(expand_home("~"), home);
    assert_eq!(expand_home("/a/~/b"), PathBuf::from("/a/~/b"));
    assert_eq!(expand_home("~other/x"), PathBuf::from("~other/x"));
}

#[tokio::test]
async fn an_unknown_cluster_is_a_config_error() {
    let clients = KubeClients::new([]);
    let e = clients
        .nodes(&KubeRef {
            endpoint: "10.0.0.1:6443".into(),
        })
        .await
        .expect_err("no such cluster");
    assert_eq!(e.code(), "kube_config");
    assert!(e.to_string().contains("10.0.0.1:6443"), "{e}");
}

#[tokio::test]
async fn a_missing_kubeconfig_is_a_config_error_naming_it() {
    let clients = KubeClients::new([(
        KubeRef {
            endpoint: "cp:6443".into(),
        },
        KubeApi {
            kubeconfig: Some("/nonexistent/slicectl/kubeconfig".into()),
            context: None,
            in_cluster: false,
        },
    )]);
    let e = clients
        .reachable(&KubeRef {
            endpoint: "cp:6443".into(),
        })
        .await
        .expect_err("missing file");
    assert_eq!(e.code(), "kube_config");
    assert!(
        e.to_string().contains("/nonexistent/slicectl/kubeconfig"),
        "{e}"
    );
}

/// The controller makes a `KubeClients` per cycle: `clusters.get` is
/// read once for all of them while the answer is fresh; a failure is
/// not kept, and its error names the cluster once.
#[tokio::test]
async fn clusters_get_is_read_once_across_cycles() {
    use crate::resource::gke::{ClusterAccess, MasterAuth};
    use base64::Engine;
    let fake = crate::cloud::fake::FakeCloud::new();
    let c = ClusterRef::new("p1", "us-central2", "train");
    let ca = crate::kube::ca::tests::TEST_CA;
    fake.set_cluster_access(
        &c,
        ClusterAccess {
            name: "train".into(),
            status: Some("RUNNING".into()),
            endpoint: Some("127.0.0.1".into()),
            master_auth: Some(MasterAuth {
                cluster_ca_certificate: Some(base64::engine::general_purpose::STANDARD.encode(ca)),
            }),
            ..ClusterAccess::default()
        },
    );
    let gone = ClusterRef::new("p1", "us-central2", "gone");
    let link = GkeLink::new(fake.clone(), Arc::new(crate::cloud::auth::NoAuth));
    for _cycle in 0..3 {
        let clients = KubeClients::new([]).with_gke(
            [
                (c.clone(), GkeAccess::Endpoint(GkeEndpoint::Public), None),
                (gone.clone(), GkeAccess::Endpoint(GkeEndpoint::Public), None),
            ],
            link.clone(),
        );
        let config = clients.config(&KubeRef::gke(&c)).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1/");
        let e = clients.config(&KubeRef::gke(&gone)).await.unwrap_err();
        let text = e.to_string();
        assert!(text.contains("clusters.get"), "{text}");
        assert_eq!(text.matches("gone").count(), 1, "{text}");
    }
    assert_eq!(
        fake.calls_of("get_cluster"),
        vec![
            "get_cluster projects/p1/locations/us-central2/clusters/train",
            "get_cluster projects/p1/locations/us-central2/clusters/gone",
            "get_cluster projects/p1/locations/us-central2/clusters/gone",
            "get_cluster projects/p1/locations/us-central2/clusters/gone",
        ]
    );
    // Another link (another process) reads it again.
    let other = GkeLink::new(fake.clone(), Arc::new(crate::cloud::auth::NoAuth));
    let clients = KubeClients::new([]).with_gke(
        [(c.clone(), GkeAccess::Endpoint(GkeEndpoint::Public), None)],
        other,
    );
    clients.config(&KubeRef::gke(&c)).await.unwrap();
    assert_eq!(fake.calls_of("get_cluster").len(), 5);
}
