//! The startup script slicectl renders into instance templates
//! (`slicectl::bootstrap::STARTUP_SCRIPT`): shellcheck-clean, and run under
//! bash against the simulator's metadata server with a `kubeadm` on PATH that
//! is the REAL kubeadm in dry-run mode, so token discovery really happens
//! against the real API server (`scripts/k8s-testenv.sh up`).

use crate::sim_kubelet_support;

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use sim_kubelet_support::*;
use slicectl::bootstrap::{self, STARTUP_SCRIPT};
use slicectl::kube::{BootstrapToken, ca_cert_hash};
use slicectl_sim::metadata::{GuestAttributes, MetadataServer, VmMetadata};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

#[test]
fn startup_script_passes_shellcheck() {
    let found = std::process::Command::new("shellcheck")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "shellcheck is not installed (Debian package `shellcheck`; .ci/run installs it)"
        );
        eprintln!("SKIPPED: shellcheck is not installed (apt-get install shellcheck)");
        return;
    }
    // The text slicectl renders, checked as bash (its shebang), all severities.
    let mut child = std::process::Command::new("shellcheck")
        .args(["--shell=bash", "--severity=style", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run shellcheck");
    std::io::Write::write_all(
        child.stdin.as_mut().expect("stdin"),
        STARTUP_SCRIPT.as_bytes(),
    )
    .expect("write script");
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("shellcheck");
    assert!(
        out.status.success(),
        "shellcheck found problems:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn script_takes_every_value_from_metadata() {
    assert!(STARTUP_SCRIPT.starts_with("#!/bin/bash\n"));
    assert!(STARTUP_SCRIPT.contains("set -Eeuo pipefail"));
    // No tracing (it would print the token) and no template placeholders.
    let code = || {
        STARTUP_SCRIPT
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
    };
    assert!(!code().any(|l| l.contains("set -x") || l.contains("xtrace")));
    assert!(!STARTUP_SCRIPT.contains("{{"));
    for key in [
        bootstrap::KUBERNETES_VERSION_KEY,
        bootstrap::KUBE_LABELS_KEY,
        bootstrap::KUBE_TAINTS_KEY,
        bootstrap::JOIN_TOKEN_KEY,
        bootstrap::API_ENDPOINT_KEY,
        bootstrap::CA_HASH_KEY,
    ] {
        assert!(
            STARTUP_SCRIPT.contains(&format!("instance/attributes/{key}")),
            "{key}"
        );
    }
    assert!(STARTUP_SCRIPT.contains("guest-attributes/slicectl/bootstrap"));
}

const LABELS: &str = "cloud.google.com/gke-accelerator-count=4,cloud.google.com/gke-tpu-accelerator=tpu-v5p-slice,cloud.google.com/gke-tpu-topology=2x2x1,slicectl.dev/slice=train-a";
const TAINTS: &str = "google.com/tpu=present:NoSchedule";

struct Vm {
    server: MetadataServer,
    tx: watch::Sender<VmMetadata>,
    guest: GuestAttributes,
    name: String,
}

async fn vm() -> Vm {
    let name = unique("bs");
    let md = vm_metadata(
        &name,
        &[
            (bootstrap::STARTUP_SCRIPT_KEY, STARTUP_SCRIPT),
            (bootstrap::KUBERNETES_VERSION_KEY, "1.36"),
            (bootstrap::KUBE_LABELS_KEY, LABELS),
            (bootstrap::KUBE_TAINTS_KEY, TAINTS),
        ],
    );
    let (tx, rx) = watch::channel(md);
    let guest = GuestAttributes::default();
    let server = MetadataServer::start(rx, guest.clone()).await.unwrap();
    Vm {
        server,
        tx,
        guest,
        name,
    }
}

impl Vm {
    /// What slicectl's setMetadata writes once the VM is RUNNING.
    fn write_join_values(&self, token: &BootstrapToken, endpoint: &str, hash: &str) {
        self.tx.send_modify(|m| {
            for (k, v) in [
                (bootstrap::JOIN_TOKEN_KEY, token.expose()),
                (bootstrap::API_ENDPOINT_KEY, endpoint.to_owned()),
                (bootstrap::CA_HASH_KEY, hash.to_owned()),
            ] {
                m.attributes.insert(k.to_owned(), v);
            }
        });
    }

    fn status(&self) -> Option<String> {
        self.guest
            .lock()
            .unwrap()
            .get(bootstrap::GUEST_BOOTSTRAP_PATH)
            .cloned()
    }
}

struct Run {
    dir: tempfile::TempDir,
    child: tokio::process::Child,
}

/// Starts the script under bash: metadata from `vm`, `kubeadm` = the real
/// binary with `--dry-run` (writing into a temp dir instead of
/// /etc/kubernetes) and preflight errors ignored (no kubelet or container
/// runtime here, and not root in general).
fn start_script(vm: &Vm, attempts: u32, discovery_timeout: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let wrapper = bin.join("kubeadm");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/bash\n# test double: the real kubeadm, dry run\nreal='{}'\ncase \"${{1:-}}\" in\n  join) exec \"$real\" \"$@\" --dry-run --ignore-preflight-errors=all ;;\n  reset) exec \"$real\" \"$@\" --dry-run ;;\n  *) exec \"$real\" \"$@\" ;;\nesac\n",
            kubeadm_binary().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = dir.path().join("startup-script");
    std::fs::write(&script, STARTUP_SCRIPT).unwrap();
    let dry_run = dir.path().join("dry-run");
    std::fs::create_dir(&dry_run).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = tokio::process::Command::new("bash")
        .arg(&script)
        .env("PATH", path)
        .env("GCE_METADATA_HOST", vm.server.addr.to_string())
        .env("SLICECTL_SKIP_HOST_SETUP", "1")
        .env("SLICECTL_JOIN_ATTEMPTS", attempts.to_string())
        .env("SLICECTL_JOIN_BACKOFF_SEC", "1")
        .env("SLICECTL_DISCOVERY_TIMEOUT", discovery_timeout)
        .env("SLICECTL_POLL_TIMEOUT_SEC", "5")
        .env("KUBEADM_JOIN_DRYRUN_DIR", &dry_run)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run bash");
    Run { dir, child }
}

impl Run {
    async fn finish(mut self) -> (Option<i32>, String, tempfile::TempDir) {
        let mut out = String::new();
        let mut err = String::new();
        let mut so = self.child.stdout.take().unwrap();
        let mut se = self.child.stderr.take().unwrap();
        let status = tokio::time::timeout(Duration::from_secs(240), async {
            let (a, b) = tokio::join!(so.read_to_string(&mut out), se.read_to_string(&mut err));
            a.unwrap();
            b.unwrap();
            self.child.wait().await.unwrap()
        })
        .await
        .expect("startup script did not finish in 240s");
        (status.code(), format!("{out}{err}"), self.dir)
    }
}

async fn wait_status(vm: &Vm, want: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while vm.status().as_deref() != Some(want) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "guest attribute never became {want:?} (is {:?})",
            vm.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn secret_of(token: &BootstrapToken) -> String {
    token.expose().split_once('.').unwrap().1.to_owned()
}

#[tokio::test]
async fn script_waits_for_the_token_then_joins_with_real_kubeadm_discovery() {
    let c = cluster().await;
    let token = mint_token(&c.client, in_one_hour()).await;
    wait_for_signature(&c.client, &token).await;
    let hash = ca_hash(&c.client).await;
    let endpoint = api_endpoint(&c.config);
    let vm = vm().await;

    let run = start_script(&vm, 1, "60s");
    // No token yet: the script long-polls and says so.
    wait_status(&vm, "waiting-for-token").await;
    vm.write_join_values(&token, &endpoint, &hash);
    let (code, output, dir) = run.finish().await;
    delete_token(&c.client, &token).await;

    assert!(
        !output.contains(&secret_of(&token)),
        "the token secret was printed"
    );
    assert_eq!(code, Some(0), "script failed:\n{output}");
    assert_eq!(vm.status().as_deref(), Some("joined"), "{output}");
    // Real discovery: kubeadm validated cluster-info's signature and our pin
    // against the real API server (dry-run only skips the kubelet start).
    assert!(
        output.contains("This node has joined the cluster"),
        "{output}"
    );
    assert!(
        !output.contains("[dryrun] Mutating the JoinConfiguration.Discovery.BootstrapToken"),
        "kubeadm fell back to its fake dry-run cluster-info:\n{output}"
    );
    let dry = dir.path().join("dry-run");
    let ca = std::fs::read_to_string(dry.join("ca.crt")).expect("dry-run ca.crt");
    assert_eq!(ca_cert_hash(&ca).unwrap(), hash);
    let kubeconfig = std::fs::read_to_string(dry.join("bootstrap-kubelet.conf"))
        .expect("bootstrap-kubelet.conf");
    assert!(kubeconfig.contains(&format!("server: https://{endpoint}")));
    // The kubelet flags kubeadm derived from our JoinConfiguration.
    let flags = std::fs::read_to_string(dry.join("kubeadm-flags.env")).unwrap_or_else(|_| {
        panic!(
            "no kubeadm-flags.env in the dry-run dir; files: {:?}\n{output}",
            std::fs::read_dir(&dry)
                .map(|d| d.map(|e| e.map(|e| e.file_name())).collect::<Vec<_>>())
                .ok()
        )
    });
    assert!(
        flags.contains(&format!(
            "--provider-id=gce://example-project/us-central1-a/{}",
            vm.name
        )),
        "{flags}"
    );
    assert!(
        flags.contains(&format!("--node-labels={LABELS}")),
        "{flags}"
    );
    assert!(
        flags.contains("--register-with-taints=google.com/tpu=present:NoSchedule"),
        "{flags}"
    );
}

#[tokio::test]
async fn script_reports_a_wrong_ca_hash() {
    let c = cluster().await;
    let token = mint_token(&c.client, in_one_hour()).await;
    wait_for_signature(&c.client, &token).await;
    let wrong = format!("sha256:{}", "ab".repeat(32));
    let vm = vm().await;
    vm.write_join_values(&token, &api_endpoint(&c.config), &wrong);

    // Two attempts: also exercises `kubeadm reset -f` and the backoff.
    let (code, output, _dir) = start_script(&vm, 2, "20s").finish().await;
    delete_token(&c.client, &token).await;
    assert_eq!(code, Some(1), "{output}");
    assert!(!output.contains(&secret_of(&token)));
    assert_eq!(
        vm.status().as_deref(),
        Some(
            "failed: CA hash mismatch: the cluster CA in cluster-info does not match kubeadm-ca-hash (attempt 2/2)"
        ),
        "{output}"
    );
    assert!(output.contains("attempt 2/2"), "{output}");
}

#[tokio::test]
async fn script_reports_an_expired_token() {
    let c = cluster().await;
    let token = mint_token(
        &c.client,
        jiff::Timestamp::now() - jiff::SignedDuration::from_mins(10),
    )
    .await;
    let vm = vm().await;
    vm.write_join_values(&token, &api_endpoint(&c.config), &ca_hash(&c.client).await);

    let (code, output, _dir) = start_script(&vm, 1, "10s").finish().await;
    delete_token(&c.client, &token).await;
    assert_eq!(code, Some(1), "{output}");
    assert!(!output.contains(&secret_of(&token)));
    assert_eq!(
        vm.status(),
        Some(format!(
            "failed: token rejected: cluster-info has no signature for token id {} (unknown or expired token) (attempt 1/1)",
            token.id()
        )),
        "{output}"
    );
}

#[tokio::test]
async fn script_refuses_malformed_template_metadata() {
    // No control plane needed: the script stops before kubeadm.
    let vm = vm().await;
    vm.tx.send_modify(|m| {
        m.attributes.insert(
            bootstrap::KUBE_LABELS_KEY.to_owned(),
            "a=$(touch /tmp/pwned)".to_owned(),
        );
    });
    let (code, output, _dir) = start_script(&vm, 1, "10s").finish().await;
    assert_eq!(code, Some(1), "{output}");
    assert_eq!(
        vm.status().as_deref(),
        Some("failed: metadata kube-labels has a malformed item")
    );
}

#[tokio::test]
async fn script_rereads_metadata_between_attempts() {
    let c = cluster().await;
    let token = mint_token(&c.client, in_one_hour()).await;
    wait_for_signature(&c.client, &token).await;
    let endpoint = api_endpoint(&c.config);
    let right = ca_hash(&c.client).await;
    let vm = vm().await;
    vm.write_join_values(&token, &endpoint, &format!("sha256:{}", "ab".repeat(32)));

    let run = start_script(&vm, 3, "20s");
    // The first attempt fails and says it will retry ...
    let deadline = tokio::time::Instant::now() + WAIT;
    while !vm
        .status()
        .is_some_and(|s| s.starts_with("failed: CA hash mismatch") && s.ends_with("; retrying"))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no retry status: {:?}",
            vm.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // ... slicectl corrects the metadata, and the next attempt uses it.
    vm.write_join_values(&token, &endpoint, &right);
    let (code, output, _dir) = run.finish().await;
    delete_token(&c.client, &token).await;
    assert_eq!(code, Some(0), "{output}");
    assert_eq!(vm.status().as_deref(), Some("joined"));
    assert!(
        output.contains("This node has joined the cluster"),
        "{output}"
    );
}
