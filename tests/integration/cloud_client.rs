//! The Google Cloud clients against the GCP simulator (a real HTTP server
//! speaking the GKE and Compute REST wire format).

use std::time::Duration;

use slicectl::cloud::{
    ClientOptions, CloudClient, CloudError, ClusterRef, PollPolicy, RetryPolicy,
};
use slicectl::resource::compute::{ResourcePolicy, WorkloadPolicy};
use slicectl::resource::gke::{
    self, NodeConfig, NodeLabels, NodePool, PlacementPolicy, UpdateNodePoolRequest,
};
use slicectl_sim::{FaultConfig, SimConfig, SimHandle, Simulator};

const PROJECT: &str = "p";
const LOCATION: &str = "us-central2";
const ZONE: &str = "us-central2-b";
const REGION: &str = "us-central2";
const WAIT: Duration = Duration::from_secs(30);

fn cluster() -> ClusterRef {
    ClusterRef::new(PROJECT, LOCATION, "c")
}

async fn sim(latency: Duration, seed: u64, faults: FaultConfig) -> SimHandle {
    Simulator::start(
        SimConfig {
            clusters: vec![cluster().path()],
            operation_latency: latency,
            seed,
            faults,
        },
        "127.0.0.1:0".parse().expect("addr"),
    )
    .await
    .expect("simulator starts")
}

fn options(sim: &SimHandle) -> ClientOptions {
    ClientOptions {
        api_endpoint: Some(sim.base_url()),
        retry: RetryPolicy {
            max_attempts: 30,
            min_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(50),
        },
        poll: PollPolicy::fast_for_tests(),
        ..ClientOptions::default()
    }
}

fn client(sim: &SimHandle) -> CloudClient {
    CloudClient::new(options(sim)).expect("client")
}

/// A v4 2x2x4 slice: 16 chips on 4 VMs (v4 is offered in us-central2-b).
fn tpu_pool(name: &str) -> NodePool {
    NodePool {
        name: name.into(),
        initial_node_count: Some(4),
        locations: vec![ZONE.into()],
        config: Some(NodeConfig {
            machine_type: "ct4p-hightpu-4t".into(),
            labels: [("team".to_string(), "ml".to_string())]
                .into_iter()
                .collect(),
            ..NodeConfig::default()
        }),
        placement_policy: Some(PlacementPolicy {
            kind: Some("COMPACT".into()),
            tpu_topology: Some("2x2x4".into()),
            policy_name: None,
        }),
        ..NodePool::default()
    }
}

fn workload_policy(name: &str) -> ResourcePolicy {
    ResourcePolicy {
        name: name.into(),
        description: Some("managed-by: slicectl".into()),
        region: Some(REGION.into()),
        workload_policy: Some(WorkloadPolicy {
            kind: "HIGH_THROUGHPUT".into(),
            accelerator_topology: Some("4x4x4".into()),
            accelerator_topology_mode: None,
        }),
        ..ResourcePolicy::default()
    }
}

async fn create_and_wait(client: &CloudClient, pool: &NodePool) -> Result<(), CloudError> {
    let gke = client.gke();
    let op = gke.create_node_pool(&cluster(), pool).await?;
    gke.wait_operation(PROJECT, LOCATION, &op, WAIT).await?;
    Ok(())
}

#[tokio::test]
async fn node_pool_crud_with_operation_waits() {
    let sim = sim(Duration::from_millis(100), 1, FaultConfig::default()).await;
    let client = client(&sim);
    let gke = client.gke();
    let c = cluster();

    let op = gke.create_node_pool(&c, &tpu_pool("tpu-a")).await.unwrap();
    assert_eq!(op.operation_type, "CREATE_NODE_POOL");
    assert_ne!(op.status, "DONE", "latency makes the create asynchronous");
    let done = gke
        .wait_operation(PROJECT, LOCATION, &op, WAIT)
        .await
        .unwrap();
    assert_eq!(done.status, "DONE");
    assert!(done.error.is_none());

    let pool = gke.get_node_pool(&c, "tpu-a").await.unwrap();
    assert_eq!(pool.name, "tpu-a");
    assert_eq!(pool.status.as_deref(), Some("RUNNING"));
    assert_eq!(pool.initial_node_count, Some(4));
    let placement = pool.placement_policy.clone().unwrap();
    assert_eq!(placement.tpu_topology.as_deref(), Some("2x2x4"));
    let config = pool.config.clone().unwrap();
    assert_eq!(config.machine_type, "ct4p-hightpu-4t");
    assert_eq!(config.labels.get("team").map(String::as_str), Some("ml"));

    // Update the Kubernetes labels in place.
    let labels: gke::Labels = [
        ("team".to_string(), "research".to_string()),
        ("slice".to_string(), "a".to_string()),
    ]
    .into_iter()
    .collect();
    let op = gke
        .update_node_pool(
            &c,
            &UpdateNodePoolRequest {
                name: "tpu-a".into(),
                labels: Some(NodeLabels {
                    labels: labels.clone(),
                }),
                ..UpdateNodePoolRequest::default()
            },
        )
        .await
        .unwrap();
    gke.wait_operation(PROJECT, LOCATION, &op, WAIT)
        .await
        .unwrap();
    let pool = gke.get_node_pool(&c, "tpu-a").await.unwrap();
    assert_eq!(pool.config.unwrap().labels, labels);

    // Delete.
    let op = gke.delete_node_pool(&c, "tpu-a").await.unwrap();
    assert_eq!(op.operation_type, "DELETE_NODE_POOL");
    gke.wait_operation(PROJECT, LOCATION, &op, WAIT)
        .await
        .unwrap();
    let err = gke.get_node_pool(&c, "tpu-a").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let err = gke.delete_node_pool(&c, "tpu-a").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");

    let stats = client.stats();
    assert!(stats.writes >= 3 && stats.reads >= 3, "{stats:?}");
    assert_eq!(stats.retries, 0);
    sim.shutdown().await;
}

#[tokio::test]
async fn list_node_pools_and_operations() {
    let sim = sim(Duration::from_millis(20), 2, FaultConfig::default()).await;
    let client = client(&sim);
    let gke = client.gke();
    for name in ["tpu-a", "tpu-b"] {
        create_and_wait(&client, &tpu_pool(name)).await.unwrap();
    }
    let mut names: Vec<String> = gke
        .list_node_pools(&cluster())
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, vec!["tpu-a".to_string(), "tpu-b".to_string()]);

    let ops = gke.list_operations(PROJECT, LOCATION).await.unwrap();
    let creates: Vec<_> = ops
        .iter()
        .filter(|o| o.operation_type == "CREATE_NODE_POOL")
        .collect();
    assert_eq!(creates.len(), 2, "{ops:?}");
    assert!(creates.iter().all(|o| o.status == "DONE"));
    let one = gke
        .get_operation(PROJECT, LOCATION, &creates[0].name)
        .await
        .unwrap();
    assert_eq!(one.name, creates[0].name);

    // An unknown cluster is NOT_FOUND, not an empty list.
    let err = gke
        .list_node_pools(&ClusterRef::new(PROJECT, LOCATION, "nope"))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_stockout_operation_is_a_failure_not_a_success() {
    let faults = FaultConfig {
        stockout_rate: 1.0,
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(20), 3, faults).await;
    let client = client(&sim);
    let err = create_and_wait(&client, &tpu_pool("tpu-a"))
        .await
        .unwrap_err();
    match &err {
        CloudError::OperationFailed { operation, .. } => assert!(!operation.is_empty()),
        other => panic!("expected OperationFailed, got {other:?}"),
    }
    assert!(err.is_stockout(), "{err}");
    assert!(!err.is_retryable());
    sim.shutdown().await;
}

#[tokio::test]
async fn injected_429_and_503_are_retried_to_success() {
    let faults = FaultConfig {
        rate_429: 0.25,
        rate_503: 0.25,
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(20), 42, faults).await;
    let client = client(&sim);
    let gke = client.gke();
    let c = cluster();
    create_and_wait(&client, &tpu_pool("tpu-a")).await.unwrap();
    assert_eq!(gke.get_node_pool(&c, "tpu-a").await.unwrap().name, "tpu-a");
    assert_eq!(gke.list_node_pools(&c).await.unwrap().len(), 1);
    let op = client
        .compute()
        .insert_resource_policy(PROJECT, REGION, &workload_policy("wp-a"))
        .await
        .unwrap();
    client.compute().wait_operation(&op, WAIT).await.unwrap();
    assert_eq!(
        client
            .compute()
            .list_resource_policies(PROJECT, REGION)
            .await
            .unwrap()
            .len(),
        1,
        "retried insert with one requestId creates one policy"
    );
    let op = gke.delete_node_pool(&c, "tpu-a").await.unwrap();
    gke.wait_operation(PROJECT, LOCATION, &op, WAIT)
        .await
        .unwrap();
    assert!(gke.list_node_pools(&c).await.unwrap().is_empty());
    let stats = client.stats();
    assert!(
        stats.retries > 0,
        "faults at 50% must cause retries: {stats:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn without_retries_the_injected_faults_surface() {
    let faults = FaultConfig {
        rate_503: 1.0,
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(20), 5, faults).await;
    let client = CloudClient::new(ClientOptions {
        retry: RetryPolicy {
            max_attempts: 3,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        },
        ..options(&sim)
    })
    .unwrap();
    let err = client.gke().list_node_pools(&cluster()).await.unwrap_err();
    assert!(matches!(&err, CloudError::Api { status: 503, .. }), "{err}");
    assert_eq!(client.stats().reads, 3);
    assert_eq!(client.stats().retries, 2);
    sim.shutdown().await;
}

#[tokio::test]
async fn gke_concurrency_refusals_are_not_retried_blindly() {
    let sim = sim(Duration::from_secs(30), 6, FaultConfig::default()).await;
    let client = client(&sim);
    let gke = client.gke();
    let c = cluster();
    let first = gke.create_node_pool(&c, &tpu_pool("tpu-a")).await.unwrap();
    // One operation per node pool: the delete is refused at once, naming
    // the operation to wait for, and not retried by the client.
    let err = gke.delete_node_pool(&c, "tpu-a").await.unwrap_err();
    assert!(err.is_cluster_busy() && !err.is_retryable(), "{err}");
    assert_eq!(err.busy_operation(), Some(first.name.as_str()));
    // The quota: four more creates fill it, the sixth is refused naming it.
    for n in ["tpu-b", "tpu-c", "tpu-d", "tpu-e"] {
        gke.create_node_pool(&c, &tpu_pool(n)).await.unwrap();
    }
    let err = gke
        .create_node_pool(&c, &tpu_pool("tpu-f"))
        .await
        .unwrap_err();
    assert_eq!(err.operation_quota(), Some(Some(5)), "{err}");
    assert!(!err.is_retryable());
    assert_eq!(client.stats().retries, 0, "{:?}", client.stats());
    assert_eq!(client.stats().writes, 7);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_slow_operation_times_out() {
    let sim = sim(Duration::from_secs(60), 7, FaultConfig::default()).await;
    let client = client(&sim);
    let gke = client.gke();
    let op = gke
        .create_node_pool(&cluster(), &tpu_pool("tpu-a"))
        .await
        .unwrap();
    let err = gke
        .wait_operation(PROJECT, LOCATION, &op, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::Timeout { operation, after } if *operation == op.name && *after == Duration::from_millis(300)),
        "{err}"
    );
    let op = client
        .compute()
        .insert_resource_policy(PROJECT, REGION, &workload_policy("wp-a"))
        .await
        .unwrap();
    let err = client
        .compute()
        .wait_operation(&op, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(&err, CloudError::Timeout { .. }), "{err}");
    sim.shutdown().await;
}

#[tokio::test]
async fn resource_policy_crud_with_wait() {
    let sim = sim(Duration::from_millis(100), 8, FaultConfig::default()).await;
    let client = client(&sim);
    let compute = client.compute();

    let op = compute
        .insert_resource_policy(PROJECT, REGION, &workload_policy("wp-a"))
        .await
        .unwrap();
    assert!(
        op.region.is_some(),
        "resource policy writes are regional: {op:?}"
    );
    let running = compute
        .list_region_operations(PROJECT, REGION, true)
        .await
        .unwrap();
    assert!(running.iter().any(|o| o.name == op.name), "{running:?}");
    assert!(running.iter().all(|o| o.status != "DONE"));
    let done = compute.wait_operation(&op, WAIT).await.unwrap();
    assert_eq!(done.status, "DONE");

    let got = compute
        .get_resource_policy(PROJECT, REGION, "wp-a")
        .await
        .unwrap();
    let wp = got.workload_policy.unwrap();
    assert_eq!(wp.kind, "HIGH_THROUGHPUT");
    assert_eq!(wp.accelerator_topology.as_deref(), Some("4x4x4"));
    assert_eq!(got.description.as_deref(), Some("managed-by: slicectl"));

    // A duplicate insert is ALREADY_EXISTS (synchronously or as a failed operation).
    match compute
        .insert_resource_policy(PROJECT, REGION, &workload_policy("wp-a"))
        .await
    {
        Err(e) => assert!(e.is_already_exists(), "{e}"),
        Ok(dup) => {
            let e = compute.wait_operation(&dup, WAIT).await.unwrap_err();
            assert!(matches!(e, CloudError::OperationFailed { .. }), "{e}");
        }
    }

    let all = compute
        .list_resource_policies(PROJECT, REGION)
        .await
        .unwrap();
    assert_eq!(all.iter().filter(|p| p.name == "wp-a").count(), 1);
    let ops = compute
        .list_region_operations(PROJECT, REGION, false)
        .await
        .unwrap();
    assert!(ops.iter().any(|o| o.name == op.name && o.status == "DONE"));
    let running = compute
        .list_region_operations(PROJECT, REGION, true)
        .await
        .unwrap();
    assert!(running.iter().all(|o| o.name != op.name), "{running:?}");

    let op = compute
        .delete_resource_policy(PROJECT, REGION, "wp-a")
        .await
        .unwrap();
    compute.wait_operation(&op, WAIT).await.unwrap();
    let err = compute
        .get_resource_policy(PROJECT, REGION, "wp-a")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    sim.shutdown().await;
}

#[tokio::test]
async fn resource_policy_lists_follow_page_tokens() {
    let sim = sim(Duration::from_millis(5), 9, FaultConfig::default()).await;
    let client = CloudClient::new(ClientOptions {
        page_size: 2,
        ..options(&sim)
    })
    .unwrap();
    let compute = client.compute();
    let names: Vec<String> = (0..5).map(|i| format!("wp-{i}")).collect();
    for name in &names {
        let op = compute
            .insert_resource_policy(PROJECT, REGION, &workload_policy(name))
            .await
            .unwrap();
        compute.wait_operation(&op, WAIT).await.unwrap();
    }
    let before = client.stats().reads;
    let mut listed: Vec<String> = compute
        .list_resource_policies(PROJECT, REGION)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    listed.sort();
    assert_eq!(listed, names);
    assert_eq!(client.stats().reads - before, 3, "5 items in pages of 2");
    sim.shutdown().await;
}

/// A GKE cluster's Kubernetes API through `clusters.get` (the default
/// `endpoint` access), against the simulator's wire format: the cluster is
/// read with the Google token, and what it lacks is said with what to do.
/// The simulator's unlinked clusters report an endpoint but no CA, so no
/// client is ever built and nothing is dialled.
#[tokio::test]
async fn a_gke_clusters_api_is_resolved_from_clusters_get() {
    use slicectl::kube::{GkeLink, KubeClients, KubeService};
    use slicectl::resource::KubeRef;
    use slicectl::spec::model::{GkeAccess, GkeEndpoint};
    use std::sync::Arc;

    let sim = sim(Duration::ZERO, 1, FaultConfig::default()).await;
    // A token that is sent (loopback allows it): this is the Google access
    // token the API server would see as the bearer token.
    let client = CloudClient::new(ClientOptions {
        token_source: Some(Arc::new(slicectl::cloud::StaticToken::new(
            "ya29.test-token",
        ))),
        ..options(&sim)
    })
    .expect("client");
    let got = client
        .gke()
        .get_cluster(&cluster())
        .await
        .expect("clusters.get");
    assert_eq!(got.name, "c");
    assert!(got.endpoint.is_some(), "{got:?}");
    let missing = ClusterRef::new(PROJECT, LOCATION, "gone");
    let link = GkeLink::new(Arc::new(client.clone()), client.token_source());
    let kube = KubeClients::new([]).with_gke(
        [
            (cluster(), GkeAccess::Endpoint(GkeEndpoint::Public), None),
            (
                missing.clone(),
                GkeAccess::Endpoint(GkeEndpoint::Public),
                None,
            ),
        ],
        link,
    );
    let k = KubeRef::gke(&cluster());
    assert_eq!(
        kube.deferred(&k),
        None,
        "a token is held: reached, not deferred"
    );
    let e = kube
        .nodes(&k)
        .await
        .expect_err("no CA in the simulator's cluster");
    let text = e.to_string();
    assert_eq!(e.code(), "kube_config", "{text}");
    assert!(text.contains("masterAuth.clusterCaCertificate"), "{text}");
    assert!(!text.contains("ya29"), "{text}");
    let e = kube
        .nodes(&KubeRef::gke(&missing))
        .await
        .expect_err("no such cluster");
    let text = e.to_string();
    assert!(text.contains("clusters.get"), "{text}");
    assert!(text.contains("gone"), "{text}");
    // Named once by slicectl (gke://…/gone), once in Google's own message.
    assert_eq!(text.matches("clusters/gone").count(), 1, "{text}");
    assert_eq!(slicectl::error::repeated_segment(&text), None, "{text}");
    // Without credentials (the simulator's default), deferred and said so.
    let anon = CloudClient::new(options(&sim)).expect("client");
    let kube = KubeClients::new([]).with_gke(
        [(cluster(), GkeAccess::Endpoint(GkeEndpoint::Public), None)],
        GkeLink::new(Arc::new(anon.clone()), anon.token_source()),
    );
    let why = kube.deferred(&k).expect("deferred without a token");
    assert!(why.contains("no Google credentials"), "{why}");
}

/// The most lists one waiter alone would send for an operation of
/// `latency` under `poll` (each delay a tenth of the age, within the bounds,
/// less up to a quarter of jitter), plus one.
fn most_ticks(poll: PollPolicy, latency: Duration) -> u64 {
    let (mut t, mut ticks) = (Duration::ZERO, 1);
    while t < latency {
        t += poll
            .min_interval
            .max(t.mul_f64(0.1))
            .min(poll.max_interval)
            .mul_f64(0.75);
        ticks += 1;
    }
    ticks
}

const WAIT_POLL: PollPolicy = PollPolicy {
    min_interval: Duration::from_millis(20),
    max_interval: Duration::from_millis(100),
};

/// Twelve node pools created at once in one location, some of them stocked
/// out: every wait is served by the location's `operations.list`, never by
/// one `operations.get` per operation, and a failed operation fails only its
/// own wait.
#[tokio::test]
async fn gke_waits_share_one_operations_list_per_tick() {
    let latency = Duration::from_millis(400);
    let faults = FaultConfig {
        concurrency_rules: false,
        stockout_rate: 0.3,
        ..FaultConfig::default()
    };
    let sim = sim(latency, 11, faults).await;
    let client = CloudClient::new(ClientOptions {
        poll: WAIT_POLL,
        ..options(&sim)
    })
    .unwrap();
    let gke = client.gke();
    let mut ops = Vec::new();
    for i in 0..12 {
        ops.push(
            gke.create_node_pool(&cluster(), &tpu_pool(&format!("tpu-{i}")))
                .await
                .unwrap(),
        );
    }
    sim.reset_stats();
    let results = futures::future::join_all(
        ops.iter()
            .map(|op| gke.wait_operation(PROJECT, LOCATION, op, WAIT)),
    )
    .await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    assert!(
        (1..12).contains(&failed),
        "seed 11 stocks out some pools and not others: {results:?}"
    );
    for r in &results {
        if let Err(e) = r {
            assert!(e.is_stockout(), "{e}");
        }
    }
    let st = sim.stats();
    let lists = st.by_method["container.projects.locations.operations.list"];
    let gets = st
        .by_method
        .get("container.projects.locations.operations.get")
        .copied()
        .unwrap_or(0);
    assert_eq!(gets, 0, "{st:?}");
    let bound = most_ticks(WAIT_POLL, latency + Duration::from_millis(200));
    assert!(
        lists <= bound,
        "{lists} lists for 12 waiters in one location (one waiter alone: at most {bound})"
    );
    assert_eq!(
        st.reads, lists,
        "nothing else is read while waiting: {st:?}"
    );
    sim.shutdown().await;
}

/// Compute waits list their region once per tick, narrowed to the
/// operations waited on by a `name eq` filter and followed across pages:
/// operations nobody waits on stay out of the pages.
#[tokio::test]
async fn compute_waits_share_one_filtered_paged_list_per_tick() {
    let latency = Duration::from_millis(400);
    let sim = sim(latency, 12, FaultConfig::default()).await;
    let client = CloudClient::new(ClientOptions {
        poll: WAIT_POLL,
        page_size: 2,
        ..options(&sim)
    })
    .unwrap();
    let compute = client.compute();
    // Ten operations nobody will wait on (DONE before the waits start).
    let mut old = Vec::new();
    for i in 0..10 {
        let op = compute
            .insert_resource_policy(PROJECT, REGION, &workload_policy(&format!("old-{i}")))
            .await
            .unwrap();
        old.push(op);
    }
    for r in futures::future::join_all(old.iter().map(|op| compute.wait_operation(op, WAIT))).await
    {
        r.unwrap();
    }
    let mut ops = Vec::new();
    for i in 0..6 {
        let op = compute
            .insert_resource_policy(PROJECT, REGION, &workload_policy(&format!("wp-{i}")))
            .await
            .unwrap();
        ops.push(op);
    }
    sim.reset_stats();
    let results =
        futures::future::join_all(ops.iter().map(|op| compute.wait_operation(op, WAIT))).await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    let st = sim.stats();
    let lists = st.by_method["compute.regionOperations.list"];
    assert_eq!(
        st.by_method.get("compute.regionOperations.get"),
        None,
        "{st:?}"
    );
    assert_eq!(
        st.by_method.get("compute.regionOperations.wait"),
        None,
        "{st:?}"
    );
    // Six operations waited on, in pages of two: at most three pages a tick
    // (eight without the filter).
    let bound = 3 * most_ticks(WAIT_POLL, latency + Duration::from_millis(200));
    assert!(lists <= bound, "{lists} list pages (at most {bound})");
    assert_eq!(st.reads, lists, "{st:?}");
    sim.shutdown().await;
}
