#![cfg(test)]
use super::*;
use jiff::SignedDuration;

fn cluster() -> KubeRef {
    KubeRef {
        endpoint: "10.0.0.2:6443".into(),
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test]
async fn tokens_are_created_listed_by_selector_and_deleted() {
    let fake = FakeKube::new();
    let k = cluster();
    let a = BootstrapToken::generate();
    let b = BootstrapToken::generate();
    let slice_a = labels(&[("slicectl.dev/slice", "a")]);
    let created = fake
        .create_bootstrap_token(&k, &a, Duration::from_secs(3600), &slice_a)
        .await
        .expect("create");
    assert_eq!(created.secret_name, a.secret_name());
    let left = created.remaining(jiff::Timestamp::now()).expect("expires");
    assert!(left > SignedDuration::from_mins(59) && left <= SignedDuration::from_mins(60));
    fake.seed_token(
        &k,
        &b,
        jiff::Timestamp::now() + SignedDuration::from_mins(5),
        &labels(&[("slicectl.dev/slice", "b")]),
    );

    let listed = fake
        .bootstrap_tokens(&k, "slicectl.dev/slice=a")
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].token.as_ref().map(BootstrapToken::expose),
        Some(a.expose())
    );
    assert_eq!(fake.bootstrap_tokens(&k, "").await.expect("list").len(), 2);

    // The same id again is a conflict.
    let again = fake
        .create_bootstrap_token(&k, &a, Duration::from_secs(3600), &slice_a)
        .await
        .expect_err("duplicate id");
    assert!(again.is_conflict());

    fake.delete_secret(&k, "kube-system", &a.secret_name())
        .await
        .expect("delete");
    fake.delete_secret(&k, "kube-system", &a.secret_name())
        .await
        .expect("deleting again is fine");
    assert!(
        fake.bootstrap_tokens(&k, "slicectl.dev/slice=a")
            .await
            .expect("list")
            .is_empty()
    );
    assert_eq!(
        fake.writes(),
        vec![
            format!("create_bootstrap_token 10.0.0.2:6443 {}", a.secret_name()),
            format!("create_bootstrap_token 10.0.0.2:6443 {}", a.secret_name()),
            format!(
                "delete_secret 10.0.0.2:6443 kube-system/{}",
                a.secret_name()
            ),
            format!(
                "delete_secret 10.0.0.2:6443 kube-system/{}",
                a.secret_name()
            ),
        ]
    );
    // Recorded calls never carry the secret.
    let full = a.expose();
    let secret = full.split_once('.').map(|(_, s)| s).unwrap_or_default();
    assert!(fake.calls().iter().all(|c| !c.contains(secret)));
}

#[tokio::test]
async fn joined_nodes_are_labelled_tainted_cordoned_and_deleted() {
    let fake = FakeKube::new();
    let k = cluster();
    fake.join_node(&k, "vm-0", "gce://p/z/vm-0", 4);
    let nodes = fake.nodes(&k).await.expect("nodes");
    assert_eq!(nodes.len(), 1);
    assert_eq!(
        nodes[0]
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref()),
        Some("gce://p/z/vm-0")
    );
    let tpu = nodes[0]
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get("google.com/tpu"))
        .map(|q| q.0.clone());
    assert_eq!(tpu.as_deref(), Some("4"));

    let patch = BTreeMap::from([
        ("a".to_owned(), Some("1".to_owned())),
        ("kubernetes.io/hostname".to_owned(), None),
    ]);
    let taint = Taint {
        key: "google.com/tpu".into(),
        effect: "NoSchedule".into(),
        value: Some("present".into()),
        ..Taint::default()
    };
    fake.patch_node(&k, "vm-0", &patch, Some(std::slice::from_ref(&taint)))
        .await
        .expect("patch");
    let node = fake.node(&k, "vm-0").expect("node");
    assert_eq!(node.metadata.labels, Some(labels(&[("a", "1")])));
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.taints.clone()),
        Some(vec![taint.clone()])
    );

    fake.cordon_node(&k, "vm-0").await.expect("cordon");
    let node = fake.node(&k, "vm-0").expect("node");
    assert!(is_cordoned(&node));
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    assert_eq!(taints.len(), 2, "{taints:?}");
    let rv = node.metadata.resource_version;
    fake.cordon_node(&k, "vm-0").await.expect("cordon again");
    assert_eq!(
        fake.node(&k, "vm-0")
            .expect("node")
            .metadata
            .resource_version,
        rv,
        "a second cordon changes nothing"
    );

    let missing = fake
        .patch_node(&k, "nope", &patch, None)
        .await
        .expect_err("no such node");
    assert!(missing.is_not_found());
    fake.delete_node(&k, "vm-0").await.expect("delete");
    fake.delete_node(&k, "vm-0").await.expect("delete again");
    assert!(fake.node_names(&k).is_empty());
}

#[tokio::test]
async fn device_plugin_apply_is_idempotent_and_updates_on_change() {
    let fake = FakeKube::new();
    let k = cluster();
    let v1 = sample_device_plugin("example.com/plugin:1");
    fake.apply_device_plugin(&k, &v1).await.expect("apply");
    let first = fake
        .daemonset(&k, "kube-system", "tpu-device-plugin")
        .await
        .expect("get")
        .expect("present");
    fake.apply_device_plugin(&k, &v1)
        .await
        .expect("apply again");
    let second = fake
        .daemonset(&k, "kube-system", "tpu-device-plugin")
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        first.metadata.resource_version,
        second.metadata.resource_version
    );
    assert_eq!(second.metadata.generation, Some(1));

    let v2 = sample_device_plugin("example.com/plugin:2");
    fake.apply_device_plugin(&k, &v2).await.expect("apply v2");
    let third = fake
        .daemonset(&k, "kube-system", "tpu-device-plugin")
        .await
        .expect("get")
        .expect("present");
    assert_eq!(third.metadata.generation, Some(2));
    assert_ne!(
        third.metadata.resource_version,
        second.metadata.resource_version
    );
    assert_eq!(fake.device_plugin_objects(&k).len(), 4);

    fake.delete_device_plugin(&k, &v2).await.expect("delete");
    assert!(fake.device_plugin_objects(&k).is_empty());
    fake.delete_device_plugin(&k, &v2)
        .await
        .expect("delete again");
}

#[tokio::test]
async fn faults_and_unreachable_clusters() {
    let fake = FakeKube::new();
    let k = cluster();
    fake.fail_next("nodes", KubeFault::Forbidden);
    let e = fake.nodes(&k).await.expect_err("injected");
    assert_eq!(e.code(), "kube_forbidden");
    fake.nodes(&k).await.expect("only the next call fails");

    fake.set_unreachable(&k, true);
    let e = fake.reachable(&k).await.expect_err("unreachable");
    assert_eq!(e.code(), "kube_unreachable");
    assert!(e.to_string().contains("10.0.0.2:6443"), "{e}");
    fake.set_unreachable(&k, false);
    fake.reachable(&k).await.expect("reachable again");

    assert_eq!(
        fake.ca_cert_hash(&k).await.expect("hash"),
        default_ca_hash(&k)
    );
    fake.set_ca_hash(&k, "sha256:00");
    assert_eq!(fake.ca_cert_hash(&k).await.expect("hash"), "sha256:00");
    assert_eq!(fake.calls_of("nodes").len(), 2);
    assert!(fake.writes().is_empty());
}
