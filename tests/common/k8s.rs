//! The real test control plane (`scripts/k8s-testenv.sh up`, which
//! `scripts/test.sh` runs): its kubeconfig, a client, `kubectl` against it,
//! a fresh namespace, the SliceStatus CRD. Every helper fails loudly, with
//! how to start the control plane, when it is not there.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};

/// What to do when the control plane is missing.
pub fn hint() -> &'static str {
    "start the test control plane first: eval \"$(scripts/k8s-testenv.sh up)\" (or run scripts/test.sh)"
}

/// The admin kubeconfig of the test control plane (`SLICECTL_TEST_KUBECONFIG`).
pub fn kubeconfig() -> PathBuf {
    match std::env::var_os("SLICECTL_TEST_KUBECONFIG") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!("SLICECTL_TEST_KUBECONFIG is not set; {}", hint()),
    }
}

/// An admin client, after the API server answered.
pub async fn client() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = slicectl::kube::config_from_kubeconfig(&kubeconfig(), None)
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", hint()));
    let client = Client::try_from(config).expect("client");
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!("API server unreachable: {e}; {}", hint()),
        Err(_) => panic!("API server did not answer in 10s; {}", hint()),
    }
}

/// The installed `kubectl` against the test control plane, from the
/// repository's root.
pub fn kubectl(args: &[&str]) -> Output {
    Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("kubectl is needed for this test")
}

/// The stdout of a command that must have succeeded.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A new namespace `PREFIX-xxxxxxxx`.
pub async fn namespace(client: &Client, prefix: &str) -> String {
    let ns = format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.clone()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .unwrap();
    ns
}

/// The committed SliceStatus CRD, applied server-side and established.
pub fn apply_crd() {
    ok(&kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=slicectl-tests",
        "-f",
        concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/crd-slicestatus.yaml"),
    ]));
    ok(&kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/slicestatuses.slicectl.dev",
    ]));
}

/// `slicectl controller` on `sim`, leading in namespace `ns` as pod `pod`,
/// serving metrics and probes on `port`, with a 4 s Lease and `extra`
/// arguments; its output collected, killed when dropped.
pub fn spawn_controller(
    sim: &slicectl_sim::SimHandle,
    ns: &str,
    pod: &str,
    port: u16,
    extra: &[&str],
) -> super::Piped {
    super::spawn_piped(
        tokio::process::Command::new(super::bin())
            .args([
                "controller",
                "--namespace",
                ns,
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--lease-duration",
                "4s",
            ])
            .args(extra)
            .env("SLICECTL_API_ENDPOINT", sim.base_url())
            .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
            .env("KUBECONFIG", kubeconfig())
            .env("POD_NAME", pod)
            .env("NO_COLOR", "1")
            .env_remove("SLICECTL_LOG")
            .env_remove("POD_NAMESPACE"),
    )
}

/// The reason of the `Ready` condition of slice status `name` in `ns`
/// (empty while the object does not exist).
pub fn ready_reason(ns: &str, name: &str) -> String {
    let o = kubectl(&[
        "get",
        "-n",
        ns,
        &format!("slicestatus/{name}"),
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}",
    ]);
    String::from_utf8_lossy(&o.stdout).into_owned()
}
