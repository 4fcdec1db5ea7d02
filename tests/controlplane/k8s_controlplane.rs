//! Integration tests against the real control plane (etcd, kube-apiserver,
//! kube-controller-manager, kubeadm) started by `scripts/k8s-testenv.sh up`.
//!
//! They read `SLICECTL_TEST_KUBECONFIG` (and `SLICECTL_TEST_KUBEADM`, else
//! `scripts/k8s-testbin.sh dir`); without a reachable API server they fail.
//! Every test works in its own namespace or with its own object names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use futures::{StreamExt, TryStreamExt};
use hmac::{Hmac, Mac};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, Config};
use slicectl::kube::{BootstrapToken, TokenSpec, ca_cert_hash, config_from_kubeconfig};

const WAIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------- harness

struct Cluster {
    client: Client,
    config: Config,
    kubeconfig: PathBuf,
}

fn hint() -> &'static str {
    "start the test control plane first: scripts/k8s-testbin.sh && \
     eval \"$(scripts/k8s-testenv.sh up)\" (or run scripts/test.sh)"
}

async fn cluster() -> Cluster {
    let kubeconfig = match std::env::var_os("SLICECTL_TEST_KUBECONFIG") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!("SLICECTL_TEST_KUBECONFIG is not set; {}", hint()),
    };
    let config = config_from_kubeconfig(&kubeconfig, None)
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", hint()));
    let client = Client::try_from(config.clone()).expect("client");
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => panic!(
            "API server in {} unreachable: {e}; {}",
            kubeconfig.display(),
            hint()
        ),
        Err(_) => panic!(
            "API server in {} did not answer in 10s; {}",
            kubeconfig.display(),
            hint()
        ),
    }
    Cluster {
        client,
        config,
        kubeconfig,
    }
}

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

async fn create_namespace(client: &Client, prefix: &str) -> String {
    let name = unique(prefix);
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    name
}

async fn delete_namespace(client: &Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

/// Polls `f` every 200ms until it returns `Some`, failing after [`WAIT`].
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates the token's Secret in kube-system; returns its API for cleanup.
async fn create_token_secret(
    client: &Client,
    token: &BootstrapToken,
    spec: &TokenSpec,
) -> Api<Secret> {
    let secrets = Api::<Secret>::namespaced(client.clone(), "kube-system");
    secrets
        .create(&PostParams::default(), &token.to_secret(spec))
        .await
        .expect("create bootstrap token secret");
    secrets
}

fn in_one_hour() -> jiff::Timestamp {
    jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)
}

async fn cluster_info(client: &Client) -> ConfigMap {
    Api::<ConfigMap>::namespaced(client.clone(), "kube-public")
        .get("cluster-info")
        .await
        .expect("get kube-public/cluster-info")
}

/// Waits for the bootstrap signer to add `jws-kubeconfig-<id>`; returns it.
async fn wait_for_signature(client: &Client, token: &BootstrapToken) -> (String, String) {
    let key = format!("jws-kubeconfig-{}", token.id());
    eventually(&format!("{key} in kube-public/cluster-info"), || async {
        let cm = cluster_info(client).await;
        let data = cm.data.unwrap_or_default();
        let jws = data.get(&key)?.clone();
        Some((jws, data.get("kubeconfig")?.clone()))
    })
    .await
}

async fn root_ca_pem(client: &Client, namespace: &str) -> String {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get("kube-root-ca.crt")
        .await
        .expect("get kube-root-ca.crt");
    cm.data
        .and_then(|d| d.get("ca.crt").cloned())
        .expect("ca.crt in kube-root-ca.crt")
}

fn kubeconfig_ca_pem(kubeconfig: &Path) -> String {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let data = kc
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.certificate_authority_data.clone())
        .expect("certificate-authority-data in kubeconfig");
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64 CA"),
    )
    .expect("utf8 CA")
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn configmap_round_trip_is_seen_by_a_watch() {
    let c = cluster().await;
    let ns = create_namespace(&c.client, "cm-watch").await;
    let api = Api::<ConfigMap>::namespaced(c.client.clone(), &ns);
    let name = "round-trip";

    let mut events = watcher(
        api.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .boxed();
    // Wait until the watch is established (initial list done).
    eventually_event(&mut events, "initial list", |e| {
        matches!(e, watcher::Event::InitDone).then_some(())
    })
    .await;

    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "greeting".to_owned(),
            "hello".to_owned(),
        )])),
        ..ConfigMap::default()
    };
    let created = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let fetched = api.get(name).await.expect("get");
    assert_eq!(fetched.data, cm.data);
    assert_eq!(fetched.metadata.uid, created.metadata.uid);

    let seen = eventually_event(&mut events, "the create", |e| match e {
        watcher::Event::Apply(o) => Some(o.clone()),
        _ => None,
    })
    .await;
    assert_eq!(seen.data, cm.data);

    let mut changed = fetched.clone();
    changed.data = Some(BTreeMap::from([(
        "greeting".to_owned(),
        "bonjour".to_owned(),
    )]));
    let replaced = api
        .replace(name, &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_ne!(
        replaced.metadata.resource_version,
        fetched.metadata.resource_version
    );
    let seen = eventually_event(&mut events, "the update", |e| match e {
        watcher::Event::Apply(o) => Some(o.clone()),
        _ => None,
    })
    .await;
    assert_eq!(seen.data, changed.data);
    assert_eq!(
        seen.metadata.resource_version,
        replaced.metadata.resource_version
    );
    delete_namespace(&c.client, &ns).await;
}

async fn eventually_event<T>(
    events: &mut (
             impl futures::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin
         ),
    what: &str,
    mut pick: impl FnMut(&watcher::Event<ConfigMap>) -> Option<T>,
) -> T {
    let wait = async {
        while let Some(event) = events.try_next().await.expect("watch stream error") {
            if let Some(v) = pick(&event) {
                return v;
            }
        }
        panic!("watch stream ended before {what}");
    };
    tokio::time::timeout(WAIT, wait)
        .await
        .unwrap_or_else(|_| panic!("watch did not deliver {what} within {WAIT:?}"))
}

#[tokio::test]
async fn kube_root_ca_is_published_into_a_new_namespace() {
    let c = cluster().await;
    let ns = create_namespace(&c.client, "root-ca").await;
    let api = Api::<ConfigMap>::namespaced(c.client.clone(), &ns);
    let pem = eventually("kube-root-ca.crt in the new namespace", || async {
        api.get_opt("kube-root-ca.crt")
            .await
            .expect("get kube-root-ca.crt")
            .and_then(|cm| cm.data)
            .and_then(|d| d.get("ca.crt").cloned())
    })
    .await;
    // It is the cluster CA the kubeconfig trusts.
    assert_eq!(
        ca_cert_hash(&pem).expect("hash published CA"),
        ca_cert_hash(&kubeconfig_ca_pem(&c.kubeconfig)).expect("hash kubeconfig CA")
    );
    delete_namespace(&c.client, &ns).await;
}

#[tokio::test]
async fn bootstrap_signer_signs_cluster_info_with_a_new_token() {
    let c = cluster().await;
    let token = BootstrapToken::generate();
    let secrets =
        create_token_secret(&c.client, &token, &TokenSpec::node_join(in_one_hour())).await;
    let (jws, kubeconfig) = wait_for_signature(&c.client, &token).await;

    // A detached JWS (header..signature), HS256 over the kubeconfig, keyed with
    // the token secret, kid = token id: verify it.
    let (header_b64, signature_b64) = jws.split_once("..").expect("detached JWS");
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header: serde_json::Value =
        serde_json::from_slice(&b64.decode(header_b64).expect("header b64")).expect("header json");
    assert_eq!(header["alg"], "HS256");
    assert_eq!(header["kid"], token.id());
    let full = token.expose();
    let (_, secret) = full.split_once('.').expect("token form");
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("hmac key");
    mac.update(format!("{header_b64}.{}", b64.encode(kubeconfig.as_bytes())).as_bytes());
    mac.verify_slice(&b64.decode(signature_b64).expect("signature b64"))
        .expect("cluster-info signature verifies with the token secret");

    secrets
        .delete(&token.secret_name(), &DeleteParams::default())
        .await
        .expect("delete token");
    // The signer removes the signature of a deleted token.
    let key = format!("jws-kubeconfig-{}", token.id());
    eventually("signature removal after token deletion", || async {
        let data = cluster_info(&c.client).await.data.unwrap_or_default();
        (!data.contains_key(&key)).then_some(())
    })
    .await;
}

// ------------------------------------------------- kubeadm join discovery

fn kubeadm_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("SLICECTL_TEST_KUBEADM").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/k8s-testbin.sh");
    let out = std::process::Command::new(&script)
        .arg("dir")
        .output()
        .expect("run scripts/k8s-testbin.sh dir");
    let dir = String::from_utf8(out.stdout).expect("utf8");
    let kubeadm = PathBuf::from(dir.trim()).join("kubeadm");
    assert!(
        kubeadm.is_file(),
        "{} missing; run scripts/k8s-testbin.sh",
        kubeadm.display()
    );
    kubeadm
}

struct JoinResult {
    success: bool,
    /// stdout+stderr with the token secret redacted.
    output: String,
    dry_run_dir: tempfile::TempDir,
}

/// Runs the real `kubeadm join` in dry-run mode: token discovery against the
/// API server, CA pinning, then the kubelet-start steps written to a
/// temporary dry-run directory instead of /etc/kubernetes.
async fn kubeadm_join_dry_run(
    endpoint: &str,
    token: &BootstrapToken,
    ca_hash: &str,
    discovery_timeout: &str,
) -> JoinResult {
    let work = tempfile::tempdir().expect("tempdir");
    let dry_run_dir = tempfile::tempdir().expect("tempdir");
    // A JoinConfiguration rather than flags, for timeouts.discovery (the
    // default is 5 minutes). No kubelet or container runtime here, so all
    // preflight errors are ignored; dryRun keeps the host untouched.
    let config = format!(
        "apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
dryRun: true
discovery:
  bootstrapToken:
    apiServerEndpoint: \"{endpoint}\"
    token: \"{}\"
    caCertHashes: [\"{ca_hash}\"]
nodeRegistration:
  name: {}
  ignorePreflightErrors: [all]
timeouts:
  discovery: {discovery_timeout}
",
        token.expose(),
        unique("join-test-node"),
    );
    let config_path = work.path().join("join.yaml");
    std::fs::write(&config_path, config).expect("write join config");
    let child = tokio::process::Command::new(kubeadm_binary())
        .arg("join")
        .arg("--config")
        .arg(&config_path)
        .env("KUBEADM_JOIN_DRYRUN_DIR", dry_run_dir.path())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), child)
        .await
        .expect("kubeadm join did not finish in 180s")
        .expect("run kubeadm");
    let full = token.expose();
    let secret = full.split_once('.').map(|(_, s)| s).unwrap_or_default();
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .replace(secret, "<redacted>");
    JoinResult {
        success: out.status.success(),
        output,
        dry_run_dir,
    }
}

fn api_endpoint(config: &Config) -> String {
    let auth = config
        .cluster_url
        .authority()
        .expect("cluster URL authority");
    auth.as_str().to_owned()
}

#[tokio::test]
async fn kubeadm_join_discovery_succeeds_with_token_and_ca_hash() {
    let c = cluster().await;
    let token = BootstrapToken::generate();
    let secrets =
        create_token_secret(&c.client, &token, &TokenSpec::node_join(in_one_hour())).await;
    wait_for_signature(&c.client, &token).await;
    // The pin slicectl computes, from the CA the cluster publishes.
    let ca_hash = ca_cert_hash(&root_ca_pem(&c.client, "kube-system").await).expect("CA hash");
    let endpoint = api_endpoint(&c.config);

    let join = kubeadm_join_dry_run(&endpoint, &token, &ca_hash, "60s").await;
    assert!(join.success, "kubeadm join failed:\n{}", join.output);
    assert!(
        join.output.contains("This node has joined the cluster"),
        "{}",
        join.output
    );
    // Discovery's products, written to the dry-run dir: the CA it validated
    // against our pin and the bootstrap kubeconfig pointing at our server.
    // (Success alone proves nothing in dry-run mode: when the token's
    // signature is missing kubeadm falls back to a fake cluster-info with
    // another CA and endpoint, so these checks are what rule that out.)
    let ca =
        std::fs::read_to_string(join.dry_run_dir.path().join("ca.crt")).expect("dry-run ca.crt");
    assert_eq!(ca_cert_hash(&ca).expect("hash"), ca_hash);
    let bootstrap = std::fs::read_to_string(join.dry_run_dir.path().join("bootstrap-kubelet.conf"))
        .expect("dry-run bootstrap-kubelet.conf");
    assert!(
        bootstrap.contains(&format!("server: https://{endpoint}")),
        "bootstrap-kubelet.conf does not point at {endpoint}"
    );
    secrets
        .delete(&token.secret_name(), &DeleteParams::default())
        .await
        .expect("delete token");
}

#[tokio::test]
async fn kubeadm_join_discovery_fails_with_a_wrong_ca_hash() {
    let c = cluster().await;
    let token = BootstrapToken::generate();
    let secrets =
        create_token_secret(&c.client, &token, &TokenSpec::node_join(in_one_hour())).await;
    wait_for_signature(&c.client, &token).await;
    let right = ca_cert_hash(&root_ca_pem(&c.client, "kube-system").await).expect("CA hash");
    // Another CA's pin (well-formed, not ours).
    let wrong = format!("sha256:{}", "ab".repeat(32));
    assert_ne!(wrong, right);

    let join = kubeadm_join_dry_run(&api_endpoint(&c.config), &token, &wrong, "20s").await;
    assert!(
        !join.success,
        "kubeadm join succeeded with a wrong CA hash:\n{}",
        join.output
    );
    assert!(
        join.output.contains("are pinned") && join.output.contains(&right),
        "unexpected failure:\n{}",
        join.output
    );
    assert!(
        !join
            .dry_run_dir
            .path()
            .join("bootstrap-kubelet.conf")
            .exists()
    );
    secrets
        .delete(&token.secret_name(), &DeleteParams::default())
        .await
        .expect("delete token");
}

#[tokio::test]
async fn kubeadm_join_discovery_fails_with_an_expired_token() {
    let c = cluster().await;
    let token = BootstrapToken::generate();
    let expired = jiff::Timestamp::now() - jiff::SignedDuration::from_mins(10);
    // The token cleaner deletes it soon; either way discovery must fail.
    create_token_secret(&c.client, &token, &TokenSpec::node_join(expired)).await;
    let ca_hash = ca_cert_hash(&root_ca_pem(&c.client, "kube-system").await).expect("CA hash");

    let join = kubeadm_join_dry_run(&api_endpoint(&c.config), &token, &ca_hash, "10s").await;
    assert!(
        !join.success,
        "kubeadm join succeeded with an expired token:\n{}",
        join.output
    );
    // In dry-run mode kubeadm reacts to "no JWS signature for this token ID in
    // cluster-info" by switching to its built-in fake token (abcdef.…) and a
    // fake endpoint, which then fails against the real cluster-info too. That
    // switch is logged exactly when our token's signature was missing.
    assert!(
        join.output.contains(
            "[dryrun] Mutating the JoinConfiguration.Discovery.BootstrapToken to satisfy \
             the dry-run without a real cluster-info ConfigMap"
        ) && join
            .output
            .contains("could not find a JWS signature in the cluster-info ConfigMap"),
        "unexpected failure:\n{}",
        join.output
    );
    assert!(
        !join
            .dry_run_dir
            .path()
            .join("bootstrap-kubelet.conf")
            .exists()
    );
    let data = cluster_info(&c.client).await.data.unwrap_or_default();
    assert!(!data.contains_key(&format!("jws-kubeconfig-{}", token.id())));
    // The token cleaner removes the expired Secret.
    let secrets = Api::<Secret>::namespaced(c.client.clone(), "kube-system");
    eventually("the token cleaner to delete the expired token", || async {
        secrets
            .get_opt(&token.secret_name())
            .await
            .expect("get token secret")
            .is_none()
            .then_some(())
    })
    .await;
}

// ------------------------------------------------ bootstrap-token authn

#[tokio::test]
async fn bootstrap_token_authenticates_as_system_bootstrap_user() {
    let c = cluster().await;
    let token = BootstrapToken::generate();
    let secrets =
        create_token_secret(&c.client, &token, &TokenSpec::node_join(in_one_hour())).await;

    let as_token = Client::try_from(token.client_config(&c.config)).expect("token client");
    let reviews = Api::<SelfSubjectReview>::all(as_token);
    // The authenticator reads tokens from an informer: allow it to catch up.
    let review = eventually("the bootstrap token to authenticate", || async {
        match reviews
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
        {
            Ok(r) => Some(r),
            Err(kube::Error::Api(e)) if e.code == 401 => None,
            Err(e) => panic!("SelfSubjectReview failed: {e}"),
        }
    })
    .await;
    let user = review
        .status
        .and_then(|s| s.user_info)
        .expect("userInfo in SelfSubjectReview");
    assert_eq!(user.username.as_deref(), Some(token.user_name().as_str()));
    assert_eq!(
        token.user_name(),
        format!("system:bootstrap:{}", token.id())
    );
    let groups = user.groups.unwrap_or_default();
    for g in [
        "system:bootstrappers",
        "system:bootstrappers:kubeadm:default-node-token",
        "system:authenticated",
    ] {
        assert!(groups.iter().any(|x| x == g), "{g} missing from {groups:?}");
    }

    // kubeadm's node-bootstrap RBAC applies to it: it may post CSRs and read
    // kubeadm-config, and nothing beyond that (e.g. no Secrets).
    let as_token = Client::try_from(token.client_config(&c.config)).expect("token client");
    for (verb, group, resource, namespace, name, want) in [
        (
            "create",
            "certificates.k8s.io",
            "certificatesigningrequests",
            None,
            None,
            true,
        ),
        (
            "get",
            "",
            "configmaps",
            Some("kube-system"),
            Some("kubeadm-config"),
            true,
        ),
        (
            "get",
            "",
            "configmaps",
            Some("kube-system"),
            Some("kubelet-config"),
            true,
        ),
        ("list", "", "secrets", Some("kube-system"), None, false),
        ("delete", "", "nodes", None, None, false),
    ] {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.to_owned()),
                    group: Some(group.to_owned()),
                    resource: Some(resource.to_owned()),
                    namespace: namespace.map(str::to_owned),
                    name: name.map(str::to_owned),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let answer = Api::<SelfSubjectAccessReview>::all(as_token.clone())
            .create(&PostParams::default(), &review)
            .await
            .expect("SelfSubjectAccessReview");
        let allowed = answer.status.map(|s| s.allowed).unwrap_or(false);
        assert_eq!(
            allowed, want,
            "{verb} {group}/{resource} {namespace:?}/{name:?}"
        );
    }

    // A token with the right id but a wrong secret is rejected.
    let forged =
        BootstrapToken::parse(&format!("{}.{}", token.id(), "0".repeat(16))).expect("forged");
    let forged_reviews = Api::<SelfSubjectReview>::all(
        Client::try_from(forged.client_config(&c.config)).expect("forged client"),
    );
    match forged_reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 401),
        other => panic!("forged token was not rejected with 401: {other:?}"),
    }
    secrets
        .delete(&token.secret_name(), &DeleteParams::default())
        .await
        .expect("delete token");
}

// ------------------------------------------------------------- leases

#[tokio::test]
async fn lease_is_acquired_renewed_and_protected_from_a_second_holder() {
    let c = cluster().await;
    let ns = create_namespace(&c.client, "lease").await;
    let leases = Api::<Lease>::namespaced(c.client.clone(), &ns);
    let now = || MicroTime(jiff::Timestamp::now());

    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("slicectl-leader".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("holder-a".to_owned()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(now()),
            renew_time: Some(now()),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    };
    let acquired = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("acquire lease");
    // Creating it again (a second would-be leader) is a conflict.
    match leases.create(&PostParams::default(), &lease).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 409, "{e:?}"),
        other => panic!("second create was not a 409: {other:?}"),
    }

    // holder-a renews: same holder, newer renewTime, carrying resourceVersion.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut renew = acquired.clone();
    let spec = renew.spec.as_mut().expect("spec");
    spec.renew_time = Some(now());
    let renewed = leases
        .replace("slicectl-leader", &PostParams::default(), &renew)
        .await
        .expect("renew lease");
    let old_renew = acquired
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.clone())
        .expect("renewTime");
    let new_renew = renewed
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.clone())
        .expect("renewTime");
    assert!(new_renew.0 > old_renew.0, "renewTime did not advance");
    assert_ne!(
        renewed.metadata.resource_version,
        acquired.metadata.resource_version
    );

    // holder-b, working from the stale object it read before the renewal,
    // tries to take over: rejected with 409 Conflict.
    let mut takeover = acquired.clone();
    let spec = takeover.spec.as_mut().expect("spec");
    spec.holder_identity = Some("holder-b".to_owned());
    spec.acquire_time = Some(now());
    spec.renew_time = Some(now());
    spec.lease_transitions = Some(1);
    match leases
        .replace("slicectl-leader", &PostParams::default(), &takeover)
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 409, "{e:?}"),
        other => panic!("stale takeover was not a 409: {other:?}"),
    }
    let current = leases.get("slicectl-leader").await.expect("get lease");
    assert_eq!(
        current.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("holder-a")
    );
    delete_namespace(&c.client, &ns).await;
}
