//! The Kubernetes seam ([`slicectl::kube::KubeClients`]) against the real
//! control plane started by `scripts/k8s-testenv.sh up`.
//!
//! They read `SLICECTL_TEST_KUBECONFIG`; without it (or without a reachable
//! API server) they fail, with the commands that start the plane. Every test
//! uses its own object names, so they run concurrently.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::k8s::{hint, kubeconfig};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use slicectl::kube::fake::sample_device_plugin;
use slicectl::kube::{
    BootstrapToken, KubeClients, KubeError, KubeService, StoredToken, UNSCHEDULABLE_TAINT_KEY,
    ca_cert_hash, config_from_kubeconfig, is_cordoned,
};
use slicectl::resource::KubeRef;
use slicectl::spec::model::KubeApi;

/// The test cluster as the seam names it, with clients from the admin
/// kubeconfig; and an admin client for arranging and checking.
struct Cluster {
    k: KubeRef,
    kube: KubeClients,
    admin: Client,
}

async fn cluster() -> Cluster {
    let path = kubeconfig();
    let config = config_from_kubeconfig(&path, None)
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", hint()));
    let k = KubeRef {
        endpoint: config
            .cluster_url
            .authority()
            .expect("cluster URL authority")
            .to_string(),
    };
    let kube = KubeClients::new([(
        k.clone(),
        KubeApi {
            kubeconfig: Some(path.display().to_string()),
            context: None,
            in_cluster: false,
        },
    )]);
    kube.reachable(&k)
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", hint()));
    let admin = Client::try_from(config).expect("admin client");
    Cluster { k, kube, admin }
}

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

// ------------------------------------------------------------------ tokens

#[tokio::test]
async fn bootstrap_tokens_are_created_listed_by_label_reused_and_deleted() {
    let c = cluster().await;
    let slice = unique("slice");
    let mine = labels(&[("slicectl.dev/slice", &slice), ("slicectl.dev/owner", "t")]);
    let selector = format!("slicectl.dev/slice={slice}");

    assert!(
        c.kube
            .bootstrap_tokens(&c.k, &selector)
            .await
            .expect("list")
            .is_empty()
    );
    let long = BootstrapToken::generate();
    let short = BootstrapToken::generate();
    let other = BootstrapToken::generate();
    let created = c
        .kube
        .create_bootstrap_token(&c.k, &long, Duration::from_secs(3600), &mine)
        .await
        .expect("create");
    assert_eq!(created.secret_name, long.secret_name());
    assert_eq!(created.labels, mine);
    c.kube
        .create_bootstrap_token(&c.k, &short, Duration::from_secs(300), &mine)
        .await
        .expect("create short-lived");
    c.kube
        .create_bootstrap_token(
            &c.k,
            &other,
            Duration::from_secs(3600),
            &labels(&[("slicectl.dev/slice", &unique("else"))]),
        )
        .await
        .expect("create another slice's token");

    // The same id again: a conflict, and the error does not leak the secret.
    let dup = c
        .kube
        .create_bootstrap_token(&c.k, &long, Duration::from_secs(3600), &mine)
        .await
        .expect_err("duplicate token id");
    assert!(dup.is_conflict(), "{dup}");
    let full = long.expose();
    let secret = full.split_once('.').map(|(_, s)| s).expect("token form");
    assert!(!format!("{dup} {dup:?}").contains(secret));

    let listed = c
        .kube
        .bootstrap_tokens(&c.k, &selector)
        .await
        .expect("list");
    let mut names: Vec<&str> = listed.iter().map(|t| t.secret_name.as_str()).collect();
    names.sort_unstable();
    let mut want = vec![long.secret_name(), short.secret_name()];
    want.sort_unstable();
    assert_eq!(names, want);
    let now = jiff::Timestamp::now();
    for t in &listed {
        let left = t.remaining(now).expect("has an expiration");
        let ttl = if t.secret_name == long.secret_name() {
            60
        } else {
            5
        };
        assert!(
            left <= jiff::SignedDuration::from_mins(ttl)
                && left > jiff::SignedDuration::from_mins(ttl - 2),
            "{}: {left:?}",
            t.secret_name
        );
        // Read back, the token is the one minted (secret included).
        let read = t.token.as_ref().expect("well-formed").expose();
        assert!(read == long.expose() || read == short.expose());
        assert!(!format!("{t:?}").contains(read.split_once('.').expect("form").1));
    }
    // Reuse: the 1h one; the 5 min one has less than 10 min left.
    let pick = StoredToken::reusable(&listed, now, jiff::SignedDuration::from_mins(10))
        .expect("a reusable token");
    assert_eq!(pick.secret_name, long.secret_name());

    for t in [&long, &short, &other] {
        c.kube
            .delete_secret(&c.k, "kube-system", &t.secret_name())
            .await
            .expect("delete");
    }
    // Deleting again is fine.
    c.kube
        .delete_secret(&c.k, "kube-system", &long.secret_name())
        .await
        .expect("delete a missing secret");
    assert!(
        c.kube
            .bootstrap_tokens(&c.k, &selector)
            .await
            .expect("list")
            .is_empty()
    );
}

#[tokio::test]
async fn a_created_token_authenticates_for_discovery() {
    // The Secret create_bootstrap_token writes is a working node-join token:
    // the bootstrap signer signs cluster-info with it.
    let c = cluster().await;
    let token = BootstrapToken::generate();
    c.kube
        .create_bootstrap_token(
            &c.k,
            &token,
            Duration::from_secs(600),
            &labels(&[("slicectl.dev/slice", &unique("signed"))]),
        )
        .await
        .expect("create");
    let key = format!("jws-kubeconfig-{}", token.id());
    let cms =
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(c.admin.clone(), "kube-public");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let cm = cms.get("cluster-info").await.expect("cluster-info");
        if cm.data.unwrap_or_default().contains_key(&key) {
            break;
        }
        assert!(Instant::now() < deadline, "{key} never appeared");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    c.kube
        .delete_secret(&c.k, "kube-system", &token.secret_name())
        .await
        .expect("delete");
}

// ---------------------------------------------------------------------- CA

#[tokio::test]
async fn ca_hash_is_the_pin_of_the_cluster_ca() {
    let c = cluster().await;
    let hash = c.kube.ca_cert_hash(&c.k).await.expect("ca hash");
    // The CA the kubeconfig trusts (what k8s_controlplane checks too).
    let kc = kube::config::Kubeconfig::read_from(kubeconfig()).expect("read kubeconfig");
    let data = kc
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.certificate_authority_data.clone())
        .expect("certificate-authority-data");
    let pem = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64"),
    )
    .expect("utf8");
    assert_eq!(hash, ca_cert_hash(&pem).expect("hash the kubeconfig CA"));
    assert!(
        hash.starts_with("sha256:") && hash.len() == 7 + 64,
        "{hash}"
    );
}

// ------------------------------------------------------------------- nodes

async fn create_node(admin: &Client, name: &str) -> Node {
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels(&[("keep", "me"), ("drop", "me")])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("gce://p/us-central1-c/{name}")),
            taints: Some(vec![Taint {
                key: "google.com/tpu".into(),
                value: Some("present".into()),
                effect: "NoSchedule".into(),
                ..Taint::default()
            }]),
            ..NodeSpec::default()
        }),
        ..Node::default()
    };
    Api::<Node>::all(admin.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("create node as admin")
}

#[tokio::test]
async fn nodes_are_listed_labelled_tainted_cordoned_and_deleted() {
    let c = cluster().await;
    let name = unique("tpu-vm");
    let created = create_node(&c.admin, &name).await;
    // The TaintNodesByCondition admission adds `not-ready` on create, and
    // the node-lifecycle controller (scripts/k8s-testenv.sh runs it) syncs
    // the `node.kubernetes.io/*` condition taints of a Node with no kubelet
    // at any moment: compare the taints that are not its.
    let ours = |taints: Option<Vec<Taint>>| -> Vec<Taint> {
        taints
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !t.key.starts_with("node.kubernetes.io/"))
            .collect()
    };
    let created_taints = ours(created.spec.as_ref().and_then(|s| s.taints.clone()));
    assert!(created_taints.iter().any(|t| t.key == "google.com/tpu"));
    let nodes = Api::<Node>::all(c.admin.clone());

    let listed = c.kube.nodes(&c.k).await.expect("list nodes");
    let found = listed
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name.as_str()))
        .expect("the new node is listed");
    assert_eq!(
        found.spec.as_ref().and_then(|s| s.provider_id.clone()),
        Some(format!("gce://p/us-central1-c/{name}"))
    );

    // Labels: set, remove, keep the rest.
    let patch = BTreeMap::from([
        (
            "cloud.google.com/gke-tpu-accelerator".to_owned(),
            Some("tpu7x".to_owned()),
        ),
        ("drop".to_owned(), None),
    ]);
    c.kube
        .patch_node(&c.k, &name, &patch, None)
        .await
        .expect("patch labels");
    let node = nodes.get(&name).await.expect("get");
    let l = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        l.get("cloud.google.com/gke-tpu-accelerator")
            .map(String::as_str),
        Some("tpu7x")
    );
    assert_eq!(l.get("keep").map(String::as_str), Some("me"));
    assert!(!l.contains_key("drop"), "{l:?}");
    // Labels only: the taints are untouched.
    assert_eq!(
        ours(node.spec.as_ref().and_then(|s| s.taints.clone())),
        created_taints
    );

    // Taints: replaced as a whole.
    let new_taints = vec![
        Taint {
            key: "slicectl.dev/a".into(),
            value: Some("x".into()),
            effect: "NoSchedule".into(),
            ..Taint::default()
        },
        Taint {
            key: "slicectl.dev/b".into(),
            effect: "NoExecute".into(),
            ..Taint::default()
        },
    ];
    c.kube
        .patch_node(&c.k, &name, &BTreeMap::new(), Some(&new_taints))
        .await
        .expect("patch taints");
    let node = nodes.get(&name).await.expect("get");
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let keys: Vec<&str> = taints.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(keys, ["slicectl.dev/a", "slicectl.dev/b"]);

    // Nothing to change: no request, no new resourceVersion.
    let rv = node.metadata.resource_version.clone();
    c.kube
        .patch_node(&c.k, &name, &BTreeMap::new(), None)
        .await
        .expect("empty patch");
    assert_eq!(
        nodes
            .get(&name)
            .await
            .expect("get")
            .metadata
            .resource_version,
        rv
    );

    // Cordon: unschedulable and tainted, other taints kept; twice is a no-op.
    c.kube.cordon_node(&c.k, &name).await.expect("cordon");
    let node = nodes.get(&name).await.expect("get");
    assert!(is_cordoned(&node), "{:?}", node.spec);
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let keys: Vec<&str> = taints.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(
        keys,
        ["slicectl.dev/a", "slicectl.dev/b", UNSCHEDULABLE_TAINT_KEY]
    );
    let rv = node.metadata.resource_version.clone();
    c.kube.cordon_node(&c.k, &name).await.expect("cordon again");
    assert_eq!(
        nodes
            .get(&name)
            .await
            .expect("get")
            .metadata
            .resource_version,
        rv,
        "cordoning a cordoned node writes nothing"
    );
    let label = |n: &k8s_openapi::api::core::v1::Node, key: &str| {
        n.metadata.labels.as_ref().and_then(|l| l.get(key).cloned())
    };
    assert_eq!(
        label(&node, slicectl::spec::disruption::CORDONED_BY_SLICECTL).as_deref(),
        Some("true"),
        "slicectl's cordon is marked in the same write"
    );

    // Released: slicectl's cordon is lifted, with its labels; the other
    // taints stay.
    let drain = slicectl::spec::disruption::DRAINING_SINCE;
    let mut since = BTreeMap::new();
    since.insert(drain.to_owned(), Some("1764136800".to_owned()));
    c.kube
        .patch_node(&c.k, &name, &since, None)
        .await
        .expect("label");
    c.kube
        .uncordon_node(&c.k, &name, drain)
        .await
        .expect("uncordon");
    let node = nodes.get(&name).await.expect("get");
    assert!(!is_cordoned(&node), "{:?}", node.spec);
    assert_eq!(label(&node, drain), None);
    assert_eq!(
        label(&node, slicectl::spec::disruption::CORDONED_BY_SLICECTL),
        None
    );
    // A cordon someone else made (no mark) stays; only the drain label goes.
    let cordon = serde_json::json!({"spec": {"unschedulable": true}, "metadata": {"labels": {drain: "1764136800"}}});
    nodes
        .patch(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&cordon),
        )
        .await
        .expect("a person cordons");
    c.kube
        .uncordon_node(&c.k, &name, drain)
        .await
        .expect("release");
    let node = nodes.get(&name).await.expect("get");
    assert_eq!(node.spec.as_ref().and_then(|s| s.unschedulable), Some(true));
    assert_eq!(label(&node, drain), None);

    // Missing nodes: patch and cordon are not-found errors.
    let ghost = unique("ghost");
    let e = c
        .kube
        .patch_node(&c.k, &ghost, &patch, None)
        .await
        .expect_err("no such node");
    assert!(e.is_not_found(), "{e}");
    assert_eq!(e.code(), "kube_error");
    assert!(
        c.kube
            .cordon_node(&c.k, &ghost)
            .await
            .expect_err("no such node")
            .is_not_found()
    );

    c.kube.delete_node(&c.k, &name).await.expect("delete");
    assert!(nodes.get_opt(&name).await.expect("get").is_none());
    c.kube
        .delete_node(&c.k, &name)
        .await
        .expect("delete a missing node");
}

// ----------------------------------------------------------- device plugin

#[tokio::test]
async fn device_plugin_is_applied_idempotently_updated_and_deleted() {
    let c = cluster().await;
    // Own names, so that concurrent tests (and the lead's) do not collide.
    let suffix = unique("dp");
    let rename = |mut objs: slicectl::kube::DevicePluginObjects| {
        let ds_name = format!("tpu-device-plugin-{suffix}");
        let sa_name = format!("tpu-device-plugin-sa-{suffix}");
        let role = format!("slicectl:tpu-device-plugin-{suffix}");
        objs.daemonset.metadata.name = Some(ds_name);
        objs.service_account.metadata.name = Some(sa_name.clone());
        objs.cluster_role.metadata.name = Some(role.clone());
        objs.cluster_role_binding.metadata.name = Some(role.clone());
        objs.cluster_role_binding.role_ref.name = role;
        if let Some(s) = objs.cluster_role_binding.subjects.as_mut() {
            s[0].name = sa_name.clone();
        }
        if let Some(spec) = objs
            .daemonset
            .spec
            .as_mut()
            .and_then(|s| s.template.spec.as_mut())
        {
            spec.service_account_name = Some(sa_name);
        }
        objs
    };
    let mut v1 = rename(sample_device_plugin("registry.example/tpu-device-plugin:1"));
    // Select no node (other tests label theirs as TPU nodes), so that the
    // DaemonSet controller's status settles and no pods come and go.
    if let Some(term) = v1
        .daemonset
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .and_then(|s| s.affinity.as_mut())
        .and_then(|a| a.node_affinity.as_mut())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_mut()
        })
        .and_then(|s| s.node_selector_terms.first_mut())
    {
        term.match_expressions = Some(vec![k8s_openapi::api::core::v1::NodeSelectorRequirement {
            key: format!("slicectl.dev/no-such-node-{suffix}"),
            operator: "Exists".into(),
            values: None,
        }]);
    }
    let ds_name = v1.daemonset.metadata.name.clone().expect("name");

    assert!(
        c.kube
            .daemonset(&c.k, "kube-system", &ds_name)
            .await
            .expect("get")
            .is_none()
    );
    c.kube.apply_device_plugin(&c.k, &v1).await.expect("apply");
    // Wait until the DaemonSet controller has written its status (which
    // moves the resourceVersion, not the generation).
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        let ds = c
            .kube
            .daemonset(&c.k, "kube-system", &ds_name)
            .await
            .expect("get")
            .expect("created");
        let observed = ds.status.as_ref().and_then(|s| s.observed_generation);
        if observed.is_some() && observed == ds.metadata.generation {
            break ds;
        }
        assert!(
            Instant::now() < deadline,
            "status never observed the DaemonSet"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let image = |ds: &k8s_openapi::api::apps::v1::DaemonSet| {
        ds.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
    };
    assert_eq!(
        image(&first).as_deref(),
        Some("registry.example/tpu-device-plugin:1")
    );
    let managers: Vec<String> = first
        .meta()
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.iter().any(|m| m == "slicectl"), "{managers:?}");

    // The RBAC objects are there too.
    let sa_name = v1.service_account.metadata.name.clone().expect("name");
    let role_name = v1.cluster_role.metadata.name.clone().expect("name");
    let sas = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(
        c.admin.clone(),
        "kube-system",
    );
    let roles = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(c.admin.clone());
    let bindings = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(c.admin.clone());
    let sa_before = sas.get(&sa_name).await.expect("service account");
    let role_before = roles.get(&role_name).await.expect("cluster role");
    let binding_before = bindings.get(&role_name).await.expect("binding");

    // A second apply of the same objects changes nothing.
    c.kube
        .apply_device_plugin(&c.k, &v1)
        .await
        .expect("apply again");
    let second = c
        .kube
        .daemonset(&c.k, "kube-system", &ds_name)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    assert_eq!(second.metadata.generation, first.metadata.generation);
    for (before, after) in [
        (
            sa_before.metadata.resource_version,
            sas.get(&sa_name)
                .await
                .expect("sa")
                .metadata
                .resource_version,
        ),
        (
            role_before.metadata.resource_version,
            roles
                .get(&role_name)
                .await
                .expect("role")
                .metadata
                .resource_version,
        ),
        (
            binding_before.metadata.resource_version,
            bindings
                .get(&role_name)
                .await
                .expect("binding")
                .metadata
                .resource_version,
        ),
    ] {
        assert_eq!(before, after);
    }

    // A new image updates the DaemonSet: a new generation.
    let v2 = {
        let mut v = v1.clone();
        if let Some(c) = v
            .daemonset
            .spec
            .as_mut()
            .and_then(|s| s.template.spec.as_mut())
            .and_then(|s| s.containers.first_mut())
        {
            c.image = Some("registry.example/tpu-device-plugin:2".into());
        }
        v
    };
    c.kube
        .apply_device_plugin(&c.k, &v2)
        .await
        .expect("apply v2");
    let third = c
        .kube
        .daemonset(&c.k, "kube-system", &ds_name)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        image(&third).as_deref(),
        Some("registry.example/tpu-device-plugin:2")
    );
    assert_eq!(
        third.metadata.generation,
        first.metadata.generation.map(|g| g + 1)
    );
    assert_ne!(
        third.metadata.resource_version,
        first.metadata.resource_version
    );

    // Delete: all four gone; deleting again is fine.
    c.kube
        .delete_device_plugin(&c.k, &v2)
        .await
        .expect("delete");
    assert!(
        c.kube
            .daemonset(&c.k, "kube-system", &ds_name)
            .await
            .expect("get")
            .is_none_or(|ds| ds.metadata.deletion_timestamp.is_some())
    );
    assert!(sas.get_opt(&sa_name).await.expect("get").is_none());
    assert!(roles.get_opt(&role_name).await.expect("get").is_none());
    assert!(bindings.get_opt(&role_name).await.expect("get").is_none());
    c.kube
        .delete_device_plugin(&c.k, &v2)
        .await
        .expect("delete again");
}

// ------------------------------------------------------------------ errors

#[tokio::test]
async fn an_unreachable_endpoint_fails_fast_as_unreachable() {
    // A loopback port nothing listens on: connection refused.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    let text = std::fs::read_to_string(kubeconfig()).expect("read kubeconfig");
    // The admin kubeconfig, pointed at the dead port.
    let kc: serde_json::Value = serde_saphyr::from_str(&text).expect("parse kubeconfig");
    let mut kc = kc;
    kc["clusters"][0]["cluster"]["server"] = format!("https://127.0.0.1:{port}").into();
    std::fs::write(&path, serde_json::to_string(&kc).expect("json")).expect("write");

    let k = KubeRef {
        endpoint: format!("127.0.0.1:{port}"),
    };
    let kube = KubeClients::new([(
        k.clone(),
        KubeApi {
            kubeconfig: Some(path.display().to_string()),
            context: None,
            in_cluster: false,
        },
    )]);
    for call in ["reachable", "nodes"] {
        let started = Instant::now();
        let e = match call {
            "reachable" => kube.reachable(&k).await.expect_err("nothing listens"),
            _ => kube.nodes(&k).await.expect_err("nothing listens"),
        };
        let took = started.elapsed();
        assert!(
            matches!(e, KubeError::Unreachable { .. }),
            "{call}: not Unreachable: {e:?}"
        );
        assert_eq!(e.code(), "kube_unreachable");
        let text = e.to_string();
        assert!(
            text.contains(&k.endpoint) && text.contains("reachable from here"),
            "{text}"
        );
        assert!(took < Duration::from_secs(8), "{call} took {took:?}");
    }
}

#[tokio::test]
async fn an_unroutable_endpoint_times_out_quickly_as_unreachable() {
    // TEST-NET-1 (RFC 5737): never answers; a connect there blocks until the
    // connect timeout (or fails at once where there is no route).
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    let text = std::fs::read_to_string(kubeconfig()).expect("read kubeconfig");
    let mut kc: serde_json::Value = serde_saphyr::from_str(&text).expect("parse kubeconfig");
    kc["clusters"][0]["cluster"]["server"] = "https://192.0.2.1:6443".into();
    std::fs::write(&path, serde_json::to_string(&kc).expect("json")).expect("write");
    let k = KubeRef {
        endpoint: "192.0.2.1:6443".into(),
    };
    let kube = KubeClients::new([(
        k.clone(),
        KubeApi {
            kubeconfig: Some(path.display().to_string()),
            context: None,
            in_cluster: false,
        },
    )]);
    let started = Instant::now();
    let e = kube.nodes(&k).await.expect_err("never answers");
    let took = started.elapsed();
    assert!(matches!(e, KubeError::Unreachable { .. }), "{e:?}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

#[tokio::test]
async fn a_missing_context_is_a_config_error_naming_it() {
    let path = kubeconfig();
    let k = KubeRef {
        endpoint: "cp.example:6443".into(),
    };
    let kube = KubeClients::new([(
        k.clone(),
        KubeApi {
            kubeconfig: Some(path.display().to_string()),
            context: Some("no-such-context".into()),
            in_cluster: false,
        },
    )]);
    let e = kube.reachable(&k).await.expect_err("no such context");
    assert!(matches!(e, KubeError::Config { .. }), "{e:?}");
    assert_eq!(e.code(), "kube_config");
    let text = e.to_string();
    assert!(text.contains("\"no-such-context\""), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("cp.example:6443"), "{text}");
}

#[tokio::test]
async fn a_forbidden_call_names_the_verb_and_resource() {
    // A bootstrap token's identity may not list nodes.
    let c = cluster().await;
    let token = BootstrapToken::generate();
    c.kube
        .create_bootstrap_token(
            &c.k,
            &token,
            Duration::from_secs(600),
            &labels(&[("slicectl.dev/slice", &unique("forbidden"))]),
        )
        .await
        .expect("create");
    // A kubeconfig whose user is the token.
    let text = std::fs::read_to_string(kubeconfig()).expect("read kubeconfig");
    let mut kc: serde_json::Value = serde_saphyr::from_str(&text).expect("parse kubeconfig");
    kc["users"][0]["user"] = serde_json::json!({ "token": token.expose() });
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, serde_json::to_string(&kc).expect("json")).expect("write");
    let as_token = KubeClients::new([(
        c.k.clone(),
        KubeApi {
            kubeconfig: Some(path.display().to_string()),
            context: None,
            in_cluster: false,
        },
    )]);
    // The authenticator learns new tokens from an informer: retry 401s.
    let deadline = Instant::now() + Duration::from_secs(30);
    let e = loop {
        let e = as_token.nodes(&c.k).await.expect_err("may not list nodes");
        if matches!(e, KubeError::Api { status: 401, .. }) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        break e;
    };
    assert!(matches!(e, KubeError::Forbidden { .. }), "{e:?}");
    assert_eq!(e.code(), "kube_forbidden");
    let shown = e.to_string();
    assert!(shown.contains("may not list nodes"), "{shown}");
    let full = token.expose();
    assert!(
        !shown.contains(full.split_once('.').expect("form").1),
        "{shown}"
    );
    c.kube
        .delete_secret(&c.k, "kube-system", &token.secret_name())
        .await
        .expect("delete");
}
