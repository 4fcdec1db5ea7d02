#![cfg(test)]
//! List responses that arrive broken (a JSON body cut short, a transfer
//! that ends early): a clear error naming the URL, never a panic, and never
//! a plan that deletes what the list failed to show.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{ClientOptions, CloudClient, CloudError, GkeService, PollPolicy, RetryPolicy};
use crate::plan::{ActionKind, PlanMode, PlanOptions};
use crate::resource::ClusterRef;

/// A cluster's node pool list cut short: its first pool, whole, is this
/// fleet's and no longer in the specs (read leniently, the list would
/// plan its deletion).
const CUT_LIST: &str = r#"{"nodePools":[{"name":"gone-0","config":{"machineType":"ct5p-hightpu-4t","labels":{"slicectl.dev/managed-by":"slicectl","slicectl.dev/owner":"o","slicectl.dev/slice":"gone","slicectl.dev/replica":"0","slicectl.dev/target":"train"}}},{"name":"keep-0","conf"#;

/// How the server answers a node pool list.
#[derive(Clone, Copy)]
enum Break {
    /// 200 with a complete header and a body that is not whole JSON.
    Json,
    /// 200 announcing more bytes than it sends, then the connection closes.
    Transfer,
}

/// A node pool list of `n` pools of this fleet (past `STREAM_ABOVE` for a
/// few thousand, so it is decoded as it arrives).
fn big_list(n: usize) -> String {
    let pools: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"name":"gone{i}-0","config":{{"machineType":"ct5p-hightpu-4t","labels":{{"slicectl.dev/managed-by":"slicectl","slicectl.dev/owner":"o","slicectl.dev/slice":"gone{i}","slicectl.dev/replica":"0","slicectl.dev/target":"train"}}}},"status":"RUNNING"}}"#
            )
        })
        .collect();
    format!(r#"{{"nodePools":[{}]}}"#, pools.join(","))
}

/// A raw HTTP server: the node pool list is `body`, announced as `announce`
/// bytes long; every other GET (the cluster and operations lists) an
/// empty list.
async fn serve(body: String, announce: usize) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let body = Arc::new(body);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let body = body.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let (body, len) = if line.contains("/nodePools") {
                    (body.as_str(), announce)
                } else {
                    ("{}", 2)
                };
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n"
                );
                let _ = sock.write_all(reply.as_bytes()).await;
                // In pieces, as a large answer arrives.
                for part in body.as_bytes().chunks(64 * 1024) {
                    if sock.write_all(part).await.is_err() {
                        return;
                    }
                }
                let _ = sock.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

async fn server(how: Break) -> String {
    match how {
        Break::Json => serve(CUT_LIST.to_string(), CUT_LIST.len()).await,
        Break::Transfer => serve(CUT_LIST.to_string(), CUT_LIST.len() + 4096).await,
    }
}

fn client(base: &str) -> CloudClient {
    CloudClient::new(ClientOptions {
        api_endpoint: Some(base.to_string()),
        retry: RetryPolicy {
            max_attempts: 2,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
        poll: PollPolicy::fast_for_tests(),
        ..ClientOptions::default()
    })
    .unwrap()
}

fn cluster() -> ClusterRef {
    ClusterRef {
        project: "proj-one".into(),
        location: "us-central1".into(),
        name: "train".into(),
    }
}

#[tokio::test]
async fn a_list_body_that_is_not_whole_json_is_an_error_naming_the_url() {
    let base = server(Break::Json).await;
    let err = client(&base).list_node_pools(&cluster()).await.unwrap_err();
    assert!(matches!(err, CloudError::Decode { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "{base}/v1/projects/proj-one/locations/us-central1/clusters/train/nodePools"
        )),
        "{msg}"
    );
    assert!(msg.contains("nodePools.list"), "{msg}");
}

#[tokio::test]
async fn a_transfer_cut_short_is_an_error_naming_the_url() {
    let base = server(Break::Transfer).await;
    let err = client(&base).list_node_pools(&cluster()).await.unwrap_err();
    assert!(matches!(err, CloudError::Transport { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("/clusters/train/nodePools"), "{msg}");
}

#[tokio::test]
async fn a_large_list_is_decoded_as_it_arrives() {
    let body = big_list(3000);
    assert!(
        body.len() as u64 > super::http::STREAM_ABOVE,
        "{}",
        body.len()
    );
    let base = serve(body.clone(), body.len()).await;
    let pools = client(&base).list_node_pools(&cluster()).await.unwrap();
    assert_eq!(pools.len(), 3000);
    assert_eq!(pools[2999].name, "gone2999-0");
    // Cut short, in either way: an error naming the URL, never a shorter list.
    let cut = &body[..body.len() - 1000];
    let base = serve(cut.to_string(), cut.len()).await;
    let err = client(&base).list_node_pools(&cluster()).await.unwrap_err();
    assert!(matches!(err, CloudError::Decode { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("/clusters/train/nodePools"), "{msg}");
    assert!(msg.contains(r#"body starts: "{\"nodePools\""#), "{msg}");
    let base = serve(cut.to_string(), body.len()).await;
    let err = client(&base).list_node_pools(&cluster()).await.unwrap_err();
    assert!(matches!(err, CloudError::Transport { .. }), "{err:?}");
    assert!(
        err.to_string().contains("/clusters/train/nodePools"),
        "{err}"
    );
    // Trailing bytes after the JSON are an error too, as read whole.
    let trailing = format!("{body} x");
    let base = serve(trailing.clone(), trailing.len()).await;
    let err = client(&base).list_node_pools(&cluster()).await.unwrap_err();
    assert!(matches!(err, CloudError::Decode { .. }), "{err:?}");
}

const SPECS: &str = r#"apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: train
spec:
  project: proj-one
  zone: us-central1-a
  ownerId: o
  gke:
    location: us-central1
    name: train
---
apiVersion: slicectl.dev/v1alpha1
kind: Slice
metadata:
  name: keep
spec:
  target: train
  backend: gke
  accelerator: tpu-v5p-slice
  topology: 2x2x2
"#;

/// Slice `gone` was removed from the specs, and its cluster's list breaks:
/// the live pool the list would have shown is not deleted (the Target is
/// not observed, and said so).
#[tokio::test]
async fn a_broken_list_never_plans_a_delete() {
    let big = big_list(3000);
    let cut = big[..big.len() - 1000].to_string();
    let bases = [
        server(Break::Json).await,
        server(Break::Transfer).await,
        serve(cut.clone(), cut.len()).await,
        serve(cut.clone(), big.len()).await,
    ];
    for base in bases {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("t.yaml"), SPECS).unwrap();
        let fleet = crate::source::load_dir(d.path()).unwrap();
        let fake = crate::cloud::fake::FakeCloud::new();
        let mut cloud = fake.cloud();
        cloud.gke = Arc::new(client(&base));
        let (inv, plan) = crate::engine::observe_and_plan(
            &fleet,
            &cloud,
            PlanMode::Apply,
            &PlanOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(inv.unobserved.len(), 1, "{:?}", inv.unobserved);
        assert!(plan.left_unobserved());
        assert!(
            plan.actions
                .iter()
                .all(|a| !matches!(a.action, ActionKind::Delete | ActionKind::Replace)),
            "{:?}",
            plan.actions
        );
        let why = inv.unobserved.values().next().unwrap();
        assert!(
            why.cause.contains("/clusters/train/nodePools"),
            "{}",
            why.cause
        );
    }
}
