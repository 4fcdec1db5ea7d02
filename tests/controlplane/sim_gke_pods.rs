//! Pods on a simulated GKE slice: a simulated cluster linked to the real
//! control plane registers its TPU pool's Nodes as kubemark hollow nodes
//! (the real kubelet), the real kube-scheduler binds TPU pods to them, the
//! kubelet runs and ends them, and deleting the pool (or stopping the
//! simulator) takes the Nodes away.

use crate::sim_gke_support::*;

use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Node;
use serde_json::Value;

fn labels(n: &Node) -> std::collections::BTreeMap<String, String> {
    n.metadata.labels.clone().unwrap_or_default()
}

#[tokio::test]
async fn a_linked_tpu_pool_runs_schedules_and_ends_pods_and_goes_with_its_pool() {
    let client = client().await;
    let sim = sim(7).await;
    let name = unique("pods");
    let cluster = format!("projects/example-project/locations/us-central1/clusters/{name}");
    link(&sim, &cluster).await;

    // clusters.get reports the API server as GKE does: endpoint, CA.
    let got: Value = reqwest::get(format!("{}/v1/{cluster}", sim.base_url()))
        .await
        .expect("clusters.get")
        .json()
        .await
        .expect("cluster JSON");
    let kc = kube::config::Kubeconfig::read_from(kubeconfig()).expect("kubeconfig");
    let kc_cluster = kc.clusters[0].cluster.clone().expect("cluster");
    let server = kc_cluster.server.expect("server");
    assert_eq!(
        format!("https://{}", got["endpoint"].as_str().expect("endpoint")),
        server,
        "{got}"
    );
    let ca = base64::engine::general_purpose::STANDARD
        .decode(
            got["masterAuth"]["clusterCaCertificate"]
                .as_str()
                .expect("CA"),
        )
        .expect("base64 CA");
    let kc_ca = base64::engine::general_purpose::STANDARD
        .decode(kc_cluster.certificate_authority_data.expect("CA data"))
        .expect("base64 kubeconfig CA");
    assert_eq!(ca, kc_ca);
    assert!(String::from_utf8_lossy(&ca).starts_with("-----BEGIN CERTIFICATE-----"));
    // What `gcloud container clusters get-credentials` builds from them,
    // with a bearer token standing for the Google access token, reaches it.
    let ca_file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(ca_file.path(), &ca).expect("write CA");
    let o = std::process::Command::new("kubectl")
        .args(["--kubeconfig=/dev/null", "get", "--raw", "/version"])
        .arg(format!(
            "--server=https://{}",
            got["endpoint"].as_str().expect("endpoint")
        ))
        .arg(format!(
            "--certificate-authority={}",
            ca_file.path().display()
        ))
        .arg(format!("--token={}", gke_token()))
        .output()
        .expect("kubectl is needed for this test");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // A 2-host v5e slice (2x4, 4 chips per host) and a 1-host one.
    let multi = format!("{name}-multi");
    let single = format!("{name}-single");
    create_pool(
        &sim,
        &cluster,
        tpu_pool(&multi, "ct5lp-hightpu-4t", "us-central1-a", "2x4", 2),
    )
    .await;
    create_pool(
        &sim,
        &cluster,
        tpu_pool(&single, "ct5lp-hightpu-4t", "us-central1-a", "2x2", 1),
    )
    .await;
    let nodes = wait_pool_nodes(&client, &multi, 2).await;
    for n in &nodes {
        let node = n.metadata.name.clone().expect("name");
        assert!(node.starts_with(&format!("gke-{name}-{multi}-")), "{node}");
        let l = labels(n);
        assert_eq!(l["cloud.google.com/gke-nodepool"], multi);
        assert_eq!(
            l["cloud.google.com/gke-tpu-accelerator"],
            "tpu-v5-lite-podslice"
        );
        assert_eq!(l["cloud.google.com/gke-tpu-topology"], "2x4");
        assert_eq!(l["cloud.google.com/gke-accelerator-count"], "4");
        assert_eq!(l["topology.kubernetes.io/zone"], "us-central1-a");
        let taints = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let taints: Vec<String> = taints
            .iter()
            .map(|t| {
                format!(
                    "{}={}:{}",
                    t.key,
                    t.value.clone().unwrap_or_default(),
                    t.effect
                )
            })
            .collect();
        assert_eq!(taints, ["google.com/tpu=present:NoSchedule"]);
        let allocatable = n
            .status
            .as_ref()
            .and_then(|s| s.allocatable.clone())
            .unwrap_or_default();
        assert_eq!(allocatable["google.com/tpu"].0, "4");
    }
    let single_nodes = wait_pool_nodes(&client, &single, 1).await;
    assert_eq!(
        labels(&single_nodes[0])["cloud.google.com/gke-tpu-topology"],
        "2x2"
    );
    let pool_key = format!("{cluster}/nodePools/{multi}");
    let mut names = sim.hollow_nodes(&pool_key);
    names.sort();
    let mut listed: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    listed.sort();
    assert_eq!(names, listed);

    // A label and taint update of the pool reaches its Nodes, as on GKE.
    let r = reqwest::Client::new()
        .put(format!(
            "{}/v1/{cluster}/nodePools/{single}",
            sim.base_url()
        ))
        .json(&serde_json::json!({
            "labels": {"labels": {"team": "llm"}},
            "taints": {"taints": [{"key": "dedicated", "value": "llm", "effect": "NO_EXECUTE"}]},
        }))
        .send()
        .await
        .expect("update node pool");
    assert!(r.status().is_success(), "{:?}", r.text().await);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let n = &pool_nodes(&client, &single).await[0];
        let taints: Vec<String> = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .iter()
            .map(|t| {
                format!(
                    "{}={}:{}",
                    t.key,
                    t.value.clone().unwrap_or_default(),
                    t.effect
                )
            })
            .collect();
        if labels(n).get("team").map(String::as_str) == Some("llm") {
            assert_eq!(
                taints,
                [
                    "dedicated=llm:NoExecute",
                    "google.com/tpu=present:NoSchedule"
                ],
            );
            assert_eq!(labels(n)["cloud.google.com/gke-nodepool"], single);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            n.metadata.labels
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The real scheduler binds one 4-chip pod per host; a third finds none.
    let ns = crate::common::k8s::namespace(&client, "pods").await;
    for p in ["train-0", "train-1", "train-2"] {
        submit(
            &client,
            &ns,
            &tpu_pod(p, &multi, "tpu-v5-lite-podslice", "2x4", 4),
        )
        .await;
    }
    let mut running = Vec::new();
    let mut pending = None;
    for p in ["train-0", "train-1", "train-2"] {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let pod: k8s_openapi::api::core::v1::Pod = kube::Api::namespaced(client.clone(), &ns)
                .get(p)
                .await
                .expect("get pod");
            let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
            if phase.as_deref() == Some("Running") {
                running.push((p, pod.spec.and_then(|s| s.node_name).expect("bound")));
                break;
            }
            let unschedulable = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.reason.as_deref() == Some("Unschedulable"))
                });
            if unschedulable {
                pending = Some(p);
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{p}: {:?}",
                pod.status
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    assert_eq!(running.len(), 2, "{running:?}");
    assert_ne!(running[0].1, running[1].1, "one pod per host: {running:?}");
    assert!(
        running.iter().all(|(_, n)| listed.contains(n)),
        "{running:?}"
    );
    let pending = pending.expect("a third pod is unschedulable");
    let message = wait_unschedulable(&client, &ns, pending).await;
    assert!(message.contains("Insufficient google.com/tpu"), "{message}");

    // Ending pods, the kubelet real: a deadline fails one, which frees its
    // host for the pending pod; deleting one behind a finalizer succeeds it.
    let failed = fail_pod(&client, &ns, running[0].0).await;
    let status = failed.status.expect("status");
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    let now_running = wait_running(&client, &ns, pending).await;
    assert_eq!(
        now_running.spec.and_then(|s| s.node_name).as_deref(),
        Some(running[0].1.as_str())
    );
    let succeeded = succeed_pod(&client, &ns, running[1].0).await;
    let exit = succeeded
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.first().and_then(|c| c.state.clone()))
        .and_then(|s| s.terminated)
        .map(|t| t.exit_code);
    assert_eq!(exit, Some(0));
    release_pod(&client, &ns, running[1].0).await;

    // Deleting the pool stops its hollow nodes and deletes their Nodes.
    delete_pool(&sim, &cluster, &multi).await;
    wait_pool_nodes_gone(&client, &multi).await;
    assert!(sim.hollow_nodes(&pool_key).is_empty());
    for n in &listed {
        assert!(!hollow_process_running(n), "{n} still runs");
    }

    // Shutting the simulator down does the same for the pool left.
    let single_name = single_nodes[0].metadata.name.clone().expect("name");
    assert!(hollow_process_running(&single_name));
    sim.shutdown().await;
    assert!(
        !hollow_process_running(&single_name),
        "{single_name} still runs"
    );
    assert!(pool_nodes(&client, &single).await.is_empty());
    crate::common::k8s::kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

#[tokio::test]
async fn linking_fails_loudly_without_an_api_server_or_kubemark() {
    let sim = sim(7).await;
    let cluster = format!(
        "projects/example-project/locations/us-central1/clusters/{}",
        unique("nolink")
    );
    sim.add_cluster(&cluster).expect("register");
    let e = sim
        .link_gke(
            &cluster,
            slicectl_sim::link::GkeLink::new(kubeconfig(), "/nonexistent/kubemark"),
        )
        .await
        .expect_err("no kubemark");
    let text = format!("{e:#}");
    assert!(
        text.contains("kubemark not found at /nonexistent/kubemark"),
        "{text}"
    );
    let e = sim
        .link_gke(
            "projects/p/locations/l/clusters/unknown",
            slicectl_sim::link::GkeLink::new(kubeconfig(), kubemark()),
        )
        .await
        .expect_err("not a simulated cluster");
    assert!(
        format!("{e:#}").contains("is not a simulated cluster"),
        "{e:#}"
    );
    // Unlinked, clusters.get keeps the simulator's placeholder endpoint
    // and has no CA.
    let got: Value = reqwest::get(format!("{}/v1/{cluster}", sim.base_url()))
        .await
        .expect("clusters.get")
        .json()
        .await
        .expect("JSON");
    assert!(got.get("masterAuth").is_none(), "{got}");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_pool_bigger_than_the_hollow_node_bound_registers_no_node() {
    let client = client().await;
    let sim = sim(7).await;
    let name = unique("bound");
    let cluster = format!("projects/example-project/locations/us-central1/clusters/{name}");
    sim.add_cluster(&cluster).expect("register");
    let mut link = slicectl_sim::link::GkeLink::new(kubeconfig(), kubemark());
    link.max_nodes_per_pool = 1;
    sim.link_gke(&cluster, link).await.expect("link");
    let pool = format!("{name}-multi");
    create_pool(
        &sim,
        &cluster,
        tpu_pool(&pool, "ct5lp-hightpu-4t", "us-central1-a", "2x4", 2),
    )
    .await;
    assert!(
        sim.hollow_nodes(&format!("{cluster}/nodePools/{pool}"))
            .is_empty()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(pool_nodes(&client, &pool).await.is_empty());
    sim.shutdown().await;
}
