//! `deploy/` on a real kubelet, with the real image (issue 19, item 2).
//!
//! Needs the test control plane and its node (`scripts/k8s-testnode.sh up`:
//! the real kubelet on Debian's containerd and runc, `SLICECTL_TEST_NODE`);
//! fails loudly without them. The image is built by `scripts/image.sh` (the
//! recipe users run) from the slicectl binary under test, twice under two
//! tags, and imported into the node's containerd. `slicectl sim` runs on the
//! host, linked to the control plane (its node pools register kubemark
//! hollow nodes there), and listens on the node's bridge, where the pods
//! reach it. A test overlay of `deploy/` (this image, the simulator's
//! endpoint and a throwaway token, a test ConfigMap whose Target reads the
//! cluster in-cluster, `deploy/workload-cluster/` bound to the
//! ServiceAccount, a 5 s resync, its own namespace, a toleration of the
//! node's test taint) is applied with
//! `kubectl apply --server-side -k`. Then, in order:
//!
//! - both replicas start on the node and their probes pass (Ready);
//! - one of them holds the Lease `slicectl`;
//! - the SliceStatus goes Ready (the pool's hollow node registered);
//! - deleting the leader's pod hands the Lease to another running replica
//!   (the standby or the replacement, whichever wins once the old leader
//!   releases it) within the lease duration (15 s) plus 10 s, with no
//!   duplicate create: the
//!   simulator saw exactly one CREATE_NODE_POOL and has one pool;
//! - a rollout to the second tag completes, every pod runs it, the slice
//!   stays Ready and nothing was created again;
//! - `kubectl drain` of the node evicts one pod and is refused the second by
//!   the PodDisruptionBudget (`maxUnavailable: 1`), so a pod keeps running.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::k8s::{kubeconfig, kubectl, ok};

const NS: &str = "slicectl-kubelet";
/// The overlay's name for deploy/workload-cluster/'s ClusterRoleBinding
/// (tests/controlplane/deploy.rs binds the same ClusterRole under its own name).
const BINDING: &str = "slicectl-workload-kubelet-test";
const CLUSTER: &str = "projects/example-project/locations/us-central1/clusters/train";
const POOLS: &str = "/v1/projects/example-project/locations/us-central1/clusters/train/nodePools";
const OPERATIONS: &str = "/v1/projects/example-project/locations/us-central1/operations";
/// The controller's --lease-duration default.
const LEASE: Duration = Duration::from_secs(15);

fn hint() -> &'static str {
    "start the test node: SLICECTL_K8S_DIR=<the plane's dir> scripts/k8s-testnode.sh up, and export what it prints (scripts/test.sh does)"
}

fn env(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{name} is not set; {}", hint()),
    }
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A child process killed when the test ends, however it ends.
struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn import(archive: &Path) {
    let o = Command::new(repo().join("scripts/k8s-testnode.sh"))
        .arg("import")
        .arg(archive)
        .output()
        .expect("scripts/k8s-testnode.sh runs");
    ok(&o);
}

/// A port free on `ip` now.
fn free_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .expect("bind on the node's bridge")
        .local_addr()
        .expect("local addr")
        .port()
}

/// `to` as a path relative to `from` (kustomize takes only relative bases).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let up = from.components().count() - 1;
    let mut p = PathBuf::new();
    for _ in 0..up {
        p.push("..");
    }
    p.join(to.strip_prefix("/").expect("absolute"))
}

/// The test overlay of deploy/ in `dir`, with the image tag `tag`.
fn write_overlay(dir: &Path, sim: &str, tag: &str) {
    let deploy = relative(dir, &repo().join("deploy"));
    let workload = deploy.join("workload-cluster");
    let kustomization = format!(
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {NS}
resources:
  - {deploy}
  - {workload}
  - token.yaml
configMapGenerator:
  - name: slicectl-specs
    behavior: replace
    files: [target.yaml, slice.yaml]
images:
  - name: us-docker.pkg.dev/PROJECT_ID/slicectl/slicectl
    newName: localhost/slicectl
    newTag: {tag}
patches:
  - target: {{kind: Namespace, name: slicectl}}
    patch: |
      - op: replace
        path: /metadata/name
        value: {NS}
  - target: {{kind: RoleBinding, name: slicectl}}
    patch: |
      - op: replace
        path: /subjects/0/namespace
        value: {NS}
  - target: {{kind: ClusterRoleBinding, name: slicectl-workload}}
    patch: |
      - op: replace
        path: /metadata/name
        value: {BINDING}
      - op: replace
        path: /subjects
        value: [{{kind: ServiceAccount, name: slicectl, namespace: {NS}}}]
  - target: {{kind: Deployment, name: slicectl}}
    patch: |
      - op: test
        path: /spec/template/spec/containers/0/args/9
        value: --resync
      - op: replace
        path: /spec/template/spec/containers/0/args/10
        value: 5s
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {{name: SLICECTL_API_ENDPOINT, value: "{sim}"}}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {{name: SLICECTL_ACCESS_TOKEN_FILE, value: /var/run/sim-token/token}}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {{name: SLICECTL_ALLOW_INSECURE_HTTP, value: "true"}}
      - op: add
        path: /spec/template/spec/tolerations
        value: [{{key: slicectl.dev/test-node, operator: Exists, effect: NoSchedule}}]
      - op: add
        path: /spec/template/spec/volumes
        value: [{{name: sim-token, secret: {{secretName: sim-token}}}}]
      - op: add
        path: /spec/template/spec/containers/0/volumeMounts
        value: [{{name: sim-token, mountPath: /var/run/sim-token, readOnly: true}}]
"#,
        deploy = deploy.display(),
        workload = workload.display(),
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).expect("write");
    std::fs::write(
        dir.join("token.yaml"),
        "apiVersion: v1\nkind: Secret\nmetadata: {name: sim-token}\nstringData: {token: not-a-real-token}\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("target.yaml"),
        "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {name: train}\nspec:\n  project: example-project\n  zone: us-central1-b\n  ownerId: kubelet-test\n  gke:\n    location: us-central1\n    name: train\n    kubeApi: {inCluster: true}\n",
    )
    .expect("write");
    std::fs::copy(
        repo().join("deploy/specs/slice.yaml"),
        dir.join("slice.yaml"),
    )
    .expect("copy");
}

/// `kubectl apply --server-side -k` of the overlay.
fn apply(overlay: &Path) {
    let dir = overlay.display().to_string();
    ok(&kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=slicectl-tests",
        "-k",
        &dir,
    ]));
}

/// `kubectl get` with a jsonpath in the test's namespace.
fn get(what: &str, jsonpath: &str) -> String {
    let o = kubectl(&["get", "-n", NS, what, "-o", &format!("jsonpath={jsonpath}")]);
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Poll `f` until it returns Some, at most `timeout`; panics with `what`
/// and the last value seen.
fn wait<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let start = Instant::now();
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) if start.elapsed() > timeout => {
                panic!("{what}: not within {timeout:?}; last seen: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// The controller's pods, as (name, image, ready) for the running ones.
fn pods() -> Vec<(String, String, bool)> {
    get(
        "pods",
        r#"{range .items[?(@.status.phase=="Running")]}{.metadata.name} {.spec.containers[0].image} {.status.containerStatuses[0].ready}{"\n"}{end}"#,
    )
    .lines()
    .filter_map(|l| {
        let mut w = l.split_whitespace();
        Some((w.next()?.into(), w.next()?.into(), w.next()? == "true"))
    })
    .collect()
}

fn two_ready_on(image: &str) -> Result<Vec<String>, String> {
    let p = pods();
    let ready: Vec<String> = p
        .iter()
        .filter(|(_, i, r)| *r && i == image)
        .map(|(n, _, _)| n.clone())
        .collect();
    if ready.len() == 2 && p.len() == 2 {
        Ok(ready)
    } else {
        Err(format!("{p:?}"))
    }
}

fn holder() -> String {
    get("lease/slicectl", "{.spec.holderIdentity}")
}

fn slice_ready() -> Result<(), String> {
    let s = get(
        "slicestatus/example-v6e",
        r#"{.status.conditions[?(@.type=="Ready")].status}"#,
    );
    if s == "True" { Ok(()) } else { Err(s) }
}

/// What the simulator has: node pool names, and the number of create operations.
fn sim_state(sim: &str) -> (Vec<String>, usize) {
    let get = |path: &str| -> serde_json::Value {
        let o = Command::new("curl")
            .args(["-sf", &format!("{sim}{path}")])
            .output()
            .expect("curl");
        serde_json::from_slice(&ok(&o).into_bytes()).expect("JSON from the simulator")
    };
    let pools = get(POOLS)["nodePools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let creates = get(OPERATIONS)["operations"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|o| o["operationType"] == "CREATE_NODE_POOL")
                .count()
        })
        .unwrap_or(0);
    (pools, creates)
}

#[test]
fn deploy_runs_on_a_real_kubelet_hands_over_rolls_out_and_drains_within_the_pdb() {
    let node = env("SLICECTL_TEST_NODE");
    let host_ip = env("SLICECTL_TEST_NODE_HOST_IP");
    let kubemark = env("SLICECTL_TEST_KUBEMARK");
    let t0 = Instant::now();

    // The image, under two tags (a rollout is a new tag), imported into the node.
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a.oci.tar"), dir.path().join("b.oci.tar"));
    let digest_a = common::image::build("kubelet-a", &a);
    let digest_b = common::image::build("kubelet-b", &b);
    assert_eq!(
        digest_a, digest_b,
        "the same binary under another tag is the same image"
    );
    import(&a);
    import(&b);
    let built = t0.elapsed();

    // The simulator, linked to the control plane, on the node's bridge.
    let port = free_port(&host_ip);
    let sim = format!("http://{host_ip}:{port}");
    let _sim = Killed(
        Command::new(env!("CARGO_BIN_EXE_slicectl"))
            .args([
                "sim",
                "--listen",
                &format!("{host_ip}:{port}"),
                "--link-gke",
            ])
            .arg(format!("{CLUSTER}={}", kubeconfig().display()))
            .env("SLICECTL_KUBEMARK", kubemark)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("slicectl sim starts"),
    );
    wait("the simulator to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect((host_ip.as_str(), port))
            .map(|_| ())
            .map_err(|e| e.to_string())
    });

    // Apply the overlay.
    let overlay = dir.path().join("overlay");
    std::fs::create_dir(&overlay).expect("mkdir");
    write_overlay(&overlay, &sim, "kubelet-a");
    let _ = kubectl(&[
        "delete",
        "namespace",
        NS,
        "--ignore-not-found",
        "--wait=true",
        "--timeout=60s",
    ]);
    apply(&overlay);

    // Both replicas start, on the real node, and their probes pass.
    let first = wait("both replicas Ready", Duration::from_secs(90), || {
        two_ready_on("localhost/slicectl:kubelet-a")
    });
    for p in &first {
        assert_eq!(get(&format!("pod/{p}"), "{.spec.nodeName}"), node);
    }
    let started = t0.elapsed();

    // One becomes leader.
    let leader = wait("a leader", Duration::from_secs(30), || {
        let h = holder();
        if first.contains(&h) { Ok(h) } else { Err(h) }
    });

    // The status object goes Ready.
    wait(
        "SliceStatus example-v6e Ready",
        Duration::from_secs(90),
        slice_ready,
    );
    let (pools, creates) = sim_state(&sim);
    assert_eq!(pools, vec!["example-v6e-0".to_string()]);
    assert_eq!(creates, 1);

    // Deleting the leader's pod hands over within the lease duration.
    // Whoever takes it, the standby or the replacement pod (the old leader
    // releases the Lease on SIGTERM, and a replica starting then may win).
    let deleted = Instant::now();
    ok(&kubectl(&[
        "delete",
        "pod",
        "-n",
        NS,
        &leader,
        "--wait=false",
    ]));
    let successor = wait(
        "another replica to take the Lease",
        LEASE + Duration::from_secs(10),
        || {
            let h = holder();
            let running = pods();
            if !h.is_empty() && h != leader && running.iter().any(|(n, _, _)| *n == h) {
                Ok(h)
            } else {
                Err(format!("holder {h:?}, pods {running:?}"))
            }
        },
    );
    let handover = deleted.elapsed();
    wait("two Ready replicas again", Duration::from_secs(90), || {
        two_ready_on("localhost/slicectl:kubelet-a")
    });
    slice_ready().expect("the slice stays Ready over the handover");
    assert_eq!(
        sim_state(&sim),
        (pools.clone(), 1),
        "no duplicate create after the handover"
    );

    // A rollout to a new tag keeps the fleet converged.
    write_overlay(&overlay, &sim, "kubelet-b");
    apply(&overlay);
    ok(&kubectl(&[
        "rollout",
        "status",
        "-n",
        NS,
        "deployment/slicectl",
        "--timeout=120s",
    ]));
    let rolled = wait(
        "both replicas on the new tag",
        Duration::from_secs(60),
        || two_ready_on("localhost/slicectl:kubelet-b"),
    );
    wait(
        "a leader after the rollout",
        Duration::from_secs(30),
        || {
            let h = holder();
            if rolled.contains(&h) { Ok(()) } else { Err(h) }
        },
    );
    wait(
        "the slice Ready after the rollout",
        Duration::from_secs(30),
        slice_ready,
    );
    assert_eq!(
        sim_state(&sim),
        (pools.clone(), 1),
        "no create after the rollout"
    );

    // A drain honours the PodDisruptionBudget: one pod goes, the other stays.
    let drain = kubectl(&[
        "drain",
        &node,
        "--pod-selector=app.kubernetes.io/name=slicectl",
        "--timeout=20s",
    ]);
    let _ = kubectl(&["uncordon", &node]);
    let err = String::from_utf8_lossy(&drain.stderr).into_owned();
    assert!(
        !drain.status.success(),
        "the drain must not evict both: {err}"
    );
    assert!(
        err.contains("disruption budget"),
        "the drain is refused by the PDB: {err}"
    );
    let left = pods();
    assert!(
        left.iter().any(|(n, _, _)| rolled.contains(n)),
        "one of the rolled-out pods still runs: {left:?}"
    );
    assert!(
        !rolled.iter().all(|n| left.iter().any(|(m, _, _)| m == n)),
        "one pod was evicted: {left:?}"
    );
    wait(
        "two Ready replicas after uncordon",
        Duration::from_secs(90),
        || two_ready_on("localhost/slicectl:kubelet-b"),
    );
    assert_eq!(sim_state(&sim), (pools, 1), "no create after the drain");

    eprintln!(
        "real_kubelet: image built twice and imported in {built:?}; both replicas Ready {:?} after; \
         handover to {successor} in {handover:?}; whole test {:?}",
        started - built,
        t0.elapsed()
    );
    ok(&kubectl(&["delete", "namespace", NS, "--wait=false"]));
    let _ = kubectl(&[
        "delete",
        "clusterrolebinding",
        BINDING,
        "--ignore-not-found",
    ]);
}
