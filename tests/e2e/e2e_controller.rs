//! `slicectl controller` end to end: the real binary against the real
//! control plane (`scripts/k8s-testenv.sh up`; the test fails without it)
//! and an in-test simulator. Specs from a ConfigMap; pools created; the
//! SliceStatus objects become Ready (`kubectl wait`); an edit updates in
//! place; a broken file keeps its last good version and the object is
//! Stalled with the located error; a deleted slice is deleted; an emptied
//! ConfigMap is refused; two replicas: SIGKILL the leader mid-apply, the
//! standby takes over with no duplicate create and no leak. Specs from a
//! directory (`--dir`): a stockout backed off per slice; a mounted
//! ConfigMap's layout followed through the kubelet's atomic swaps. With
//! `--owner-deployment` the objects are owned by that Deployment and
//! garbage-collected with it; a missing one stops the controller at start.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::k8s::*;
use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use slicectl::status_object::SliceStatus;
use slicectl_sim::{FaultConfig, SimHandle};

const CREATE: &str = "container.projects.locations.clusters.nodePools.create";

pub(crate) struct Replica {
    name: &'static str,
    pub(crate) child: tokio::process::Child,
    port: u16,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Replica {
    fn start(sim: &SimHandle, ns: &str, name: &'static str) -> Replica {
        Replica::start_with(sim, ns, name, &["--resync", "3s"])
    }

    /// A replica reading the specs from a mounted directory (`--dir`),
    /// with a short debounce and `more` arguments.
    fn start_dir(
        sim: &SimHandle,
        ns: &str,
        dir: &std::path::Path,
        name: &'static str,
        more: &[&str],
    ) -> Replica {
        let mut args = vec![
            "--dir",
            dir.to_str().unwrap(),
            "--debounce",
            "100ms",
            "--settle",
            "1s",
        ];
        args.extend_from_slice(more);
        Replica::start_with(sim, ns, name, &args)
    }

    /// A replica in `ns` with a 4 s Lease, and `extra` arguments.
    pub(crate) fn start_with(
        sim: &SimHandle,
        ns: &str,
        name: &'static str,
        extra: &[&str],
    ) -> Replica {
        let port = free_port();
        let Piped {
            child,
            stdout,
            stderr,
        } = crate::common::k8s::spawn_controller(sim, ns, name, port, extra);
        Replica {
            name,
            child,
            port,
            stdout,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub(crate) fn text(&self) -> String {
        format!(
            "=== replica {}\n--- stdout\n{}\n--- stderr\n{}",
            self.name,
            self.stdout.lock().unwrap(),
            self.stderr()
        )
    }

    fn cycles(&self) -> usize {
        self.stderr().matches("cycle finished").count()
    }

    pub(crate) async fn get(&self, path: &str) -> Option<(u16, String)> {
        let r = reqwest::get(format!("http://127.0.0.1:{}{path}", self.port))
            .await
            .ok()?;
        Some((r.status().as_u16(), r.text().await.ok()?))
    }

    pub(crate) async fn metric(&self, line_start: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics").await?;
        body.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }
}

pub(crate) async fn wait_for<F, Fut>(what: &str, secs: u64, logs: &[&Replica], mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done().await {
        if tokio::time::Instant::now() >= deadline {
            let t: Vec<String> = logs.iter().map(|r| r.text()).collect();
            panic!("timed out waiting for {what}\n{}", t.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) async fn set_specs(api: &Api<ConfigMap>, files: &[(&str, String)]) {
    let data: BTreeMap<String, String> = files
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let cm = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slicectl-specs"},
        "data": data,
    });
    api.patch(
        "slicectl-specs",
        &PatchParams::apply("slicectl-tests").force(),
        &Patch::Apply(&cm),
    )
    .await
    .unwrap();
}

fn tiny(team: &str) -> String {
    slice_yaml(
        "tiny",
        "tpu-v6e-slice",
        "1x1",
        1,
        &format!("  nodeLabels:\n    team: {team}\n"),
    )
}

async fn label(sim: &SimHandle, pool: &str, key: &str) -> Option<String> {
    node_pools(sim)
        .await
        .iter()
        .find(|p| p["name"] == pool)
        .and_then(|p| p["config"]["labels"][key].as_str().map(str::to_string))
}

fn condition(ns: &str, name: &str, cond: &str) -> String {
    let o = kubectl(&[
        "get",
        "-n",
        ns,
        &format!("slicestatus/{name}"),
        "-o",
        &format!(
            "jsonpath={{.status.conditions[?(@.type==\"{cond}\")].status}} {{.status.conditions[?(@.type==\"{cond}\")].message}}"
        ),
    ]);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `kubectl wait --for=condition=COND` on objects, once they exist
/// (`kubectl wait` fails at once on a missing object).
async fn wait_condition(ns: &str, cond: &str, names: &[&str], logs: &Replica) {
    for n in names {
        wait_for(
            &format!("slicestatus/{n} to exist"),
            60,
            &[logs],
            || async {
                kubectl(&["get", "-n", ns, &format!("slicestatus/{n}")])
                    .status
                    .success()
            },
        )
        .await;
    }
    let mut args = vec![
        "wait".to_string(),
        "-n".to_string(),
        ns.to_string(),
        format!("--for=condition={cond}"),
        "--timeout=60s".to_string(),
    ];
    args.extend(names.iter().map(|n| format!("slicestatus/{n}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = kubectl(&args);
    assert!(o.status.success(), "{}\n{}", text(&o), logs.text());
}

/// Waits (60 s at most) until each slice has converged as far as the
/// controller can see: against the simulator no real Kubernetes API holds
/// its GKE Nodes, so `Ready` is `Unknown` (`NodesNotObserved`: every
/// resource done, readiness not known) rather than True; True, were the
/// Nodes read, counts too.
pub(crate) async fn wait_converged(ns: &str, names: &[&str], logs: &Replica) {
    for n in names {
        wait_for(
            &format!("slicestatus/{n} converged (Ready True, or Unknown with its Nodes not read)"),
            60,
            &[logs],
            || async {
                let c = condition(ns, n, "Ready");
                c.starts_with("True ")
                    || (c.starts_with("Unknown ") && c.contains("its Nodes were not read"))
            },
        )
        .await;
    }
}

/// Waits (60 s at most) until `slicestatus/NAME` in `ns` is gone.
fn wait_deleted(ns: &str, name: &str, logs: &Replica) {
    let o = kubectl(&[
        "wait",
        "-n",
        ns,
        "--for=delete",
        "--timeout=60s",
        &format!("slicestatus/{name}"),
    ]);
    assert!(o.status.success(), "{}\n{}", text(&o), logs.text());
}

pub(crate) fn creates(sim: &SimHandle) -> u64 {
    sim.stats().by_method.get(CREATE).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn controller_converges_a_configmap_and_hands_over_on_leader_death() {
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "ctl").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let sim = sim(Duration::from_millis(1500), 7, FaultConfig::default()).await;
    let llm = slice_yaml("llm", "tpu-v6e-slice", "2x2", 1, "");

    // Create the ConfigMap → pools are created → status objects Ready.
    set_specs(
        &cms,
        &[
            ("target.yaml", TARGET.to_string()),
            ("tiny.yaml", tiny("a")),
            ("llm.yaml", llm.clone()),
        ],
    )
    .await;
    let a = Replica::start(&sim, &ns, "replica-a");
    wait_for("both pools", 60, &[&a], || async {
        pool_names(&sim).await == ["llm-0", "tiny-0"]
    })
    .await;
    wait_converged(&ns, &["tiny", "llm"], &a).await;
    assert_eq!(a.get("/readyz").await.map(|x| x.0), Some(200));
    assert_eq!(a.get("/healthz").await.map(|x| x.0), Some(200));
    assert_eq!(
        a.metric("slicectl_leader ").await,
        Some(1.0),
        "{}",
        a.text()
    );
    assert!(
        a.metric("slicectl_reconcile_cycles_total{result=\"applied\"}")
            .await
            .unwrap_or(0.0)
            >= 1.0
    );
    assert!(
        a.metric("slicectl_cloud_requests_total{api=\"container\",method=\"projects.locations.clusters.nodePools.create\",code=\"200\"}")
            .await
            .unwrap_or(0.0)
            >= 2.0,
        "{:?}",
        a.get("/metrics").await
    );
    // Converged, but against the simulator the GKE Nodes are not read:
    // readiness unknown (Reconciling, NodesNotObserved), never counted Ready.
    assert_eq!(
        a.metric("slicectl_slices{condition=\"Ready\"}").await,
        Some(0.0)
    );
    assert_eq!(
        a.metric("slicectl_slices{condition=\"Reconciling\"}").await,
        Some(2.0)
    );
    assert_eq!(creates(&sim), 2);

    // Edit a slice, moved to a hidden key in upper case (read, as a
    // checkout of the same files reads it), beside a near-miss (not read,
    // and said) → updated in place (its label), no new create.
    set_specs(
        &cms,
        &[
            ("target.yaml", TARGET.to_string()),
            (".tiny.YAML", tiny("b")),
            ("tiny.yaml.bak", tiny("z")),
            ("llm.yaml", llm.clone()),
        ],
    )
    .await;
    wait_for("the label update", 60, &[&a], || async {
        label(&sim, "tiny-0", "team").await.as_deref() == Some("b")
    })
    .await;
    assert_eq!(creates(&sim), 2);
    wait_for("the near-miss reported", 30, &[&a], || async {
        a.stderr().contains(
            "warning: slicectl-specs/tiny.yaml.bak was not read as a spec file: the name ends in \".bak\"",
        )
    })
    .await;
    assert_eq!(pool_names(&sim).await, ["llm-0", "tiny-0"]);

    // Break a file → the last good version stays; the object is Stalled
    // with the located error.
    let broken = llm.replace("\"2x2\"", "\"9x9\"");
    set_specs(
        &cms,
        &[
            ("target.yaml", TARGET.to_string()),
            ("tiny.yaml", tiny("b")),
            ("llm.yaml", broken),
        ],
    )
    .await;
    wait_condition(&ns, "Stalled", &["llm"], &a).await;
    let c = condition(&ns, "llm", "Stalled");
    assert!(c.starts_with("True slicectl-specs/llm.yaml:"), "{c}");
    assert!(c.contains("9x9"), "{c}");
    assert_eq!(pool_names(&sim).await, ["llm-0", "tiny-0"]);
    assert!(
        a.metric("slicectl_spec_last_good_age_seconds")
            .await
            .is_some()
    );

    // Fix it and delete tiny → tiny's pool and object are deleted.
    set_specs(
        &cms,
        &[
            ("target.yaml", TARGET.to_string()),
            ("llm.yaml", llm.clone()),
        ],
    )
    .await;
    wait_for("tiny deleted", 60, &[&a], || async {
        pool_names(&sim).await == ["llm-0"]
    })
    .await;
    wait_deleted(&ns, "tiny", &a);
    wait_converged(&ns, &["llm"], &a).await;

    // Empty the ConfigMap → refused, nothing deleted.
    set_specs(&cms, &[]).await;
    wait_for("the empty-source refusal", 60, &[&a], || async {
        a.stderr().contains("refused: no spec files")
    })
    .await;
    let seen = a.cycles();
    wait_for("another cycle", 30, &[&a], || async { a.cycles() > seen }).await;
    assert_eq!(pool_names(&sim).await, ["llm-0"]);
    assert!(
        a.metric("slicectl_refused_actions_total{code=\"empty_source\"}")
            .await
            .unwrap_or(0.0)
            >= 1.0
    );
    let c = condition(&ns, "llm", "Stalled");
    assert!(c.starts_with("True [empty_source]"), "{c}\n{}", a.text());

    // Two replicas: b stands by (ready, not leading).
    set_specs(
        &cms,
        &[
            ("target.yaml", TARGET.to_string()),
            ("llm.yaml", llm.clone()),
        ],
    )
    .await;
    let b = Replica::start(&sim, &ns, "replica-b");
    wait_for("b ready", 30, &[&b], || async {
        b.get("/readyz").await.map(|x| x.0) == Some(200)
    })
    .await;
    assert_eq!(
        b.metric("slicectl_leader ").await,
        Some(0.0),
        "{}",
        b.text()
    );
    assert_eq!(b.cycles(), 0, "a standby runs no cycle\n{}", b.text());

    // A new slice; SIGKILL the leader once its create was sent (the
    // operation takes 1.5 s).
    let before = creates(&sim);
    set_specs(
        &cms,
        &[
            ("target.yaml", TARGET.to_string()),
            ("llm.yaml", llm.clone()),
            ("mid.yaml", slice_yaml("mid", "tpu-v6e-slice", "2x2", 1, "")),
        ],
    )
    .await;
    wait_for("mid's create", 60, &[&a], || async {
        creates(&sim) > before
    })
    .await;
    let mut a = a;
    a.child.start_kill().unwrap();
    let _ = a.child.wait().await;
    let taken = tokio::time::Instant::now();
    wait_for("b to lead", 30, &[&b], || async {
        b.metric("slicectl_leader ").await == Some(1.0)
    })
    .await;
    assert!(
        taken.elapsed() <= Duration::from_secs(10),
        "took over in {:?}",
        taken.elapsed()
    );
    wait_converged(&ns, &["mid", "llm"], &b).await;
    assert_eq!(pool_names(&sim).await, ["llm-0", "mid-0"], "no leak");
    assert_eq!(
        creates(&sim),
        before + 1,
        "no duplicate create\n{}",
        b.text()
    );

    // SIGTERM: b stops cleanly.
    stop(b).await;
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Stops `r` with SIGTERM (a clean stop: its Lease or Leases released, a
/// sharded replica's membership deleted) and requires exit 0 within 30 s.
pub(crate) async fn stop(mut r: Replica) {
    let pid = r.child.id().unwrap();
    ok(&Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .output()
        .unwrap());
    let st = tokio::time::timeout(Duration::from_secs(30), r.child.wait())
        .await
        .unwrap_or_else(|_| panic!("no exit after SIGTERM\n{}", r.text()))
        .unwrap();
    assert!(st.success(), "{}", r.text());
}

fn reason(ns: &str, name: &str) -> String {
    crate::common::k8s::ready_reason(ns, name)
}

/// A stockout holds the slice back (no hot loop: one create in the whole
/// backoff), the status says CapacityUnavailable and becomes Stalled past
/// --stall-after, it is counted, and another slice keeps converging. Specs
/// from a mounted directory (--dir).
#[tokio::test(flavor = "multi_thread")]
async fn a_stockout_is_backed_off_per_slice_while_others_converge() {
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "cap").await;
    let sim = sim(Duration::from_millis(300), 3, FaultConfig::default()).await;
    let dir = spec_dir(&[("tiny.yaml", tiny("a"))]);
    let r = Replica::start_dir(
        &sim,
        &ns,
        dir.path(),
        "cap",
        &["--resync", "1s", "--stall-after", "4s"],
    );
    wait_for("tiny", 60, &[&r], || async {
        pool_names(&sim).await == ["tiny-0"]
    })
    .await;
    wait_converged(&ns, &["tiny"], &r).await;

    // Every create stocks out now; a new slice meets it.
    sim.set_faults(FaultConfig {
        stockout_rate: 1.0,
        ..FaultConfig::default()
    });
    let before = creates(&sim);
    put(
        dir.path(),
        "big.yaml",
        &slice_yaml("big", "tpu-v6e-slice", "2x2", 1, ""),
    );
    wait_for("the stockout", 60, &[&r], || async {
        r.metric("slicectl_capacity_unavailable_total")
            .await
            .unwrap_or(0.0)
            >= 1.0
    })
    .await;
    wait_for("big held", 30, &[&r], || async {
        r.stderr().contains("held: slice big: capacity unavailable")
    })
    .await;
    wait_for(
        "big Reconciling or Stalled for capacity",
        30,
        &[&r],
        || async { reason(&ns, "big") == "CapacityUnavailable" },
    )
    .await;
    // Meanwhile tiny keeps converging: an edit is applied.
    put(dir.path(), "tiny.yaml", &tiny("b"));
    wait_for("tiny's update", 60, &[&r], || async {
        label(&sim, "tiny-0", "team").await.as_deref() == Some("b")
    })
    .await;
    // Past --stall-after: Stalled, CapacityUnavailable.
    wait_condition(&ns, "Stalled", &["big"], &r).await;
    assert_eq!(reason(&ns, "big"), "CapacityUnavailable");
    // Many 1 s resyncs, but inside the 30 s backoff big was tried once.
    let seen = r.cycles();
    wait_for("more cycles", 30, &[&r], || async {
        r.cycles() >= seen + 3
    })
    .await;
    assert_eq!(creates(&sim), before + 1, "no hot loop\n{}", r.text());
    assert!(r.metric("slicectl_capacity_held_slices").await == Some(1.0));
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Lease `name` in `ns` taken by holder "intruder" for 60 s; then `r`
/// must exit 1 within 20 s.
pub(crate) async fn steal_lease(ns: &str, name: &str, r: &mut Replica) {
    let now = jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        .to_string();
    let patch = format!(
        r#"{{"spec":{{"holderIdentity":"intruder","acquireTime":"{now}","renewTime":"{now}","leaseDurationSeconds":60}}}}"#
    );
    ok(&kubectl(&[
        "patch", "lease", name, "-n", ns, "--type", "merge", "-p", &patch,
    ]));
    let st = tokio::time::timeout(Duration::from_secs(20), r.child.wait())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} did not exit after losing Lease {name}\n{}",
                r.name,
                r.text()
            )
        })
        .unwrap();
    assert_eq!(st.code(), Some(1), "{}", r.text());
}

/// A leader whose Lease is taken over by another holder stops writing and
/// exits non-zero at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_leader_that_loses_its_lease_exits_non_zero() {
    let client = client().await;
    let ns = namespace(&client, "lease").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    set_specs(&cms, &[]).await;
    let sim = sim(Duration::from_millis(100), 1, FaultConfig::default()).await;
    let mut a = Replica::start(&sim, &ns, "replica-a");
    wait_for("a to lead", 30, &[&a], || async {
        a.metric("slicectl_leader ").await == Some(1.0)
    })
    .await;
    steal_lease(&ns, "slicectl", &mut a).await;
    assert!(a.stderr().contains("lost the leader Lease"), "{}", a.text());
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// A directory laid out as the kubelet mounts a ConfigMap: the keys in a
/// timestamped directory `..2026_…`, `..data` naming it, and each key a
/// symlink `KEY -> ..data/KEY`.
struct Mount {
    root: PathBuf,
    version: usize,
    keys: std::collections::BTreeSet<String>,
}

impl Mount {
    fn new(root: PathBuf) -> Mount {
        std::fs::create_dir(&root).unwrap();
        Mount {
            root,
            version: 0,
            keys: Default::default(),
        }
    }

    fn data_dir(version: usize) -> String {
        format!("..2026_01_01_00_00_{version:02}.000000001")
    }

    /// The kubelet's atomic update (AtomicWriter): the new version written
    /// to a new timestamped directory, a `..data_tmp` symlink to it renamed
    /// over `..data`, the new keys' symlinks added, the vanished keys'
    /// symlinks removed, the old version's directory removed.
    fn swap(&mut self, files: &[(&str, &str)]) {
        use std::os::unix::fs::symlink;
        let old = self.version;
        self.version += 1;
        let new = Mount::data_dir(self.version);
        let data = self.root.join(&new);
        std::fs::create_dir(&data).unwrap();
        for (key, text) in files {
            std::fs::write(data.join(key), text).unwrap();
        }
        let tmp = self.root.join("..data_tmp");
        symlink(&new, &tmp).unwrap();
        std::fs::rename(&tmp, self.root.join("..data")).unwrap();
        let keys: std::collections::BTreeSet<String> =
            files.iter().map(|(k, _)| k.to_string()).collect();
        for k in keys.difference(&self.keys) {
            symlink(format!("..data/{k}"), self.root.join(k)).unwrap();
        }
        for k in self.keys.difference(&keys) {
            std::fs::remove_file(self.root.join(k)).unwrap();
        }
        if old > 0 {
            std::fs::remove_dir_all(self.root.join(Mount::data_dir(old))).unwrap();
        }
        self.keys = keys;
    }
}

fn team(name: &str, team: &str) -> String {
    slice_yaml(
        name,
        "tpu-v6e-slice",
        "1x1",
        1,
        &format!("  nodeLabels:\n    team: {team}\n"),
    )
}

const DELETE: &str = "container.projects.locations.clusters.nodePools.delete";

fn deletes(sim: &SimHandle) -> u64 {
    sim.stats().by_method.get(DELETE).copied().unwrap_or(0)
}

/// Cycles run because the directory changed (not at start, not a resync).
fn change_cycles(r: &Replica) -> usize {
    r.stderr()
        .lines()
        .filter(|l| l.contains("cycle finished") && l.contains("trigger=\"change\""))
        .count()
}

/// `--dir` on a directory laid out and updated as the kubelet does for a
/// mounted ConfigMap (`..data` swapped atomically): each swap is seen; an
/// edit updates in place, a new key creates, a vanished key deletes, and a
/// key turned into invalid YAML keeps its last good version (the pool
/// untouched, the object Stalled with the located error). No duplicate
/// create, nothing deleted but the removed slice.
#[tokio::test(flavor = "multi_thread")]
async fn controller_follows_a_mounted_configmap_through_the_kubelets_swaps() {
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "mnt").await;
    let sim = sim(Duration::from_millis(300), 5, FaultConfig::default()).await;
    let tmp = tempfile::tempdir().unwrap();
    let mut m = Mount::new(tmp.path().join("specs"));
    m.swap(&[("target.yaml", TARGET), ("a.yaml", &team("a", "one"))]);
    let r = Replica::start_dir(&sim, &ns, &m.root, "mnt", &["--resync", "2s"]);

    // The first version: a created, Ready.
    wait_for("a", 60, &[&r], || async {
        pool_names(&sim).await == ["a-0"]
    })
    .await;
    wait_converged(&ns, &["a"], &r).await;
    assert_eq!(creates(&sim), 1);

    // a edited (a label: in place), b added.
    let seen = change_cycles(&r);
    m.swap(&[
        ("target.yaml", TARGET),
        ("a.yaml", &team("a", "two")),
        ("b.yaml", &team("b", "one")),
    ]);
    wait_for("a updated, b created", 60, &[&r], || async {
        label(&sim, "a-0", "team").await.as_deref() == Some("two")
            && pool_names(&sim).await == ["a-0", "b-0"]
    })
    .await;
    wait_converged(&ns, &["a", "b"], &r).await;
    wait_for("the swap seen by the watcher", 30, &[&r], || async {
        change_cycles(&r) > seen
    })
    .await;
    assert_eq!(creates(&sim), 2, "a updated in place\n{}", r.text());
    assert_eq!(deletes(&sim), 0, "{}", r.text());

    // b's key gone: b deleted, its object too; a stays.
    let seen = change_cycles(&r);
    m.swap(&[("target.yaml", TARGET), ("a.yaml", &team("a", "two"))]);
    wait_for("b deleted", 60, &[&r], || async {
        pool_names(&sim).await == ["a-0"]
    })
    .await;
    wait_deleted(&ns, "b", &r);
    assert_eq!(deletes(&sim), 1, "{}", r.text());
    // The delete waited for the files to settle (`--settle 1s`), then ran
    // in the cycle at the end of the period.
    assert!(
        r.stderr().contains("outcome=\"settling\"") && r.stderr().contains("trigger=\"settle\""),
        "{}",
        r.text()
    );
    wait_for("the swap seen by the watcher", 30, &[&r], || async {
        change_cycles(&r) > seen
    })
    .await;

    // a's key invalid YAML: its last good version stays in force, the pool
    // untouched, the object Stalled with the located error.
    let broken = "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: a\nspec:\n  topology: \"1x1\n";
    let seen = change_cycles(&r);
    m.swap(&[("target.yaml", TARGET), ("a.yaml", broken)]);
    wait_condition(&ns, "Stalled", &["a"], &r).await;
    wait_for("the swap seen by the watcher", 30, &[&r], || async {
        change_cycles(&r) > seen
    })
    .await;
    let c = condition(&ns, "a", "Stalled");
    let located = format!("True {}:", m.root.join("a.yaml").display());
    assert!(c.starts_with(&located), "{c}\n{}", r.text());
    assert!(c.contains("invalid YAML"), "{c}");
    assert!(
        r.stderr().contains(&format!(
            "warning: {} is invalid (or valid only with a file that is); its last good version stays in force",
            m.root.join("a.yaml").display()
        )),
        "{}",
        r.text()
    );
    // Through further resyncs too.
    let seen = r.cycles();
    wait_for("two more cycles", 30, &[&r], || async {
        r.cycles() >= seen + 2
    })
    .await;
    assert_eq!(pool_names(&sim).await, ["a-0"]);
    assert_eq!(label(&sim, "a-0", "team").await.as_deref(), Some("two"));
    assert_eq!(creates(&sim), 2, "no duplicate create\n{}", r.text());
    assert_eq!(deletes(&sim), 1, "{}", r.text());
    // The mount is as the kubelet leaves it: one data directory, the keys.
    let mut entries: Vec<String> = std::fs::read_dir(&m.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(
        entries,
        [
            Mount::data_dir(m.version).as_str(),
            "..data",
            "a.yaml",
            "target.yaml"
        ]
    );
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// `--dir` in a git work tree with `--git-ref HEAD` (a git-sync volume,
/// say): the committed revision is reconciled, a working file nobody
/// committed is never read, a commit is applied when HEAD moves, and a
/// committed removal is pruned in the cycle that sees it (a commit needs
/// no settle period).
#[tokio::test(flavor = "multi_thread")]
async fn controller_reconciles_the_committed_revision_of_a_git_work_tree() {
    use crate::e2e_settle::git;
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "gitref").await;
    let sim = sim(Duration::from_millis(100), 6, FaultConfig::default()).await;
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path();
    let specs = repo.join("specs");
    std::fs::create_dir(&specs).unwrap();
    std::fs::write(specs.join("target.yaml"), TARGET).unwrap();
    std::fs::write(specs.join("a.yaml"), team("a", "one")).unwrap();
    git(repo, &["init", "-q"]);
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "a"]);
    let r = Replica::start_dir(&sim, &ns, &specs, "gitref", &["--git-ref", "HEAD"]);
    wait_for("a", 60, &[&r], || async {
        pool_names(&sim).await == ["a-0"]
    })
    .await;
    wait_converged(&ns, &["a"], &r).await;

    // b written but not committed: never read.
    std::fs::write(specs.join("b.yaml"), team("b", "one")).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(pool_names(&sim).await, ["a-0"], "{}", r.text());
    // Committed: created.
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "b"]);
    wait_for("b created", 60, &[&r], || async {
        pool_names(&sim).await == ["a-0", "b-0"]
    })
    .await;
    // A committed removal: pruned without a settle period.
    git(repo, &["rm", "-q", "specs/b.yaml"]);
    git(repo, &["commit", "-q", "-m", "no b"]);
    wait_for("b deleted", 60, &[&r], || async {
        pool_names(&sim).await == ["a-0"]
    })
    .await;
    assert_eq!(deletes(&sim), 1, "{}", r.text());
    assert!(!r.stderr().contains("outcome=\"settling\""), "{}", r.text());
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// `--owner-deployment slicectl`: the status objects are owned by that
/// Deployment (controller, its uid), and when it is deleted the real
/// garbage collector (kube-controller-manager) deletes them, the controller
/// being stopped. The test control plane runs no scheduler and no
/// Deployment controller, so the Deployment runs nothing: it only owns.
#[tokio::test(flavor = "multi_thread")]
async fn status_objects_are_owned_by_the_deployment_and_collected_with_it() {
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "own").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let labels = serde_json::json!({"app.kubernetes.io/name": "slicectl"});
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "slicectl"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "slicectl", "image": "slicectl"}]},
            },
        },
    }))
    .unwrap();
    let uid = deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap()
        .metadata
        .uid
        .expect("a uid");
    let sim = sim(Duration::from_millis(100), 5, FaultConfig::default()).await;
    let dir = spec_dir(&[("tiny.yaml", tiny("a"))]);
    let dir_arg = dir.path().to_str().unwrap();
    let mut r = Replica::start_with(
        &sim,
        &ns,
        "owned",
        &[
            "--dir",
            dir_arg,
            "--owner-deployment",
            "slicectl",
            "--grace",
            "5s",
        ],
    );
    let statuses: Api<SliceStatus> = Api::namespaced(client.clone(), &ns);
    wait_for("slicestatus/tiny", 30, &[&r], || async {
        statuses.get_opt("tiny").await.ok().flatten().is_some()
    })
    .await;
    let live = statuses.get("tiny").await.unwrap();
    let owners = live.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    let o = &owners[0];
    assert_eq!(
        (
            o.api_version.as_str(),
            o.kind.as_str(),
            o.name.as_str(),
            o.uid.as_str()
        ),
        ("apps/v1", "Deployment", "slicectl", uid.as_str())
    );
    assert_eq!(o.controller, Some(true));
    assert_eq!(o.block_owner_deletion, None);

    // Stop the controller (SIGTERM: a clean exit), then delete the
    // Deployment: the garbage collector deletes the object.
    ok(&Command::new("kill")
        .args(["-TERM", &r.child.id().unwrap().to_string()])
        .output()
        .unwrap());
    let st = tokio::time::timeout(Duration::from_secs(15), r.child.wait())
        .await
        .unwrap_or_else(|_| panic!("no exit after SIGTERM\n{}", r.text()))
        .unwrap();
    assert!(st.success(), "{}", r.text());
    deployments
        .delete("slicectl", &DeleteParams::background())
        .await
        .unwrap();
    // The garbage collector may first need to notice the new CRD (it
    // re-reads discovery every 30 s).
    wait_for("slicestatus/tiny garbage-collected", 60, &[&r], || async {
        matches!(statuses.get_opt("tiny").await, Ok(None))
    })
    .await;
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// `--owner-deployment` naming a Deployment that does not exist: the
/// controller exits 1 at start, saying which and what to do.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_owner_deployment_stops_the_controller_at_start() {
    let client = client().await;
    let ns = namespace(&client, "noown").await;
    let sim = sim(Duration::from_millis(100), 1, FaultConfig::default()).await;
    let dir = spec_dir(&[("tiny.yaml", tiny("a"))]);
    let dir_arg = dir.path().to_str().unwrap();
    let mut r = Replica::start_with(
        &sim,
        &ns,
        "orphan",
        &["--dir", dir_arg, "--owner-deployment", "missing"],
    );
    let st = tokio::time::timeout(Duration::from_secs(10), r.child.wait())
        .await
        .unwrap_or_else(|_| panic!("still running\n{}", r.text()))
        .unwrap();
    assert_eq!(st.code(), Some(1), "{}", r.text());
    // The output is collected by tasks: give them the last bytes.
    wait_for("the error on stderr", 5, &[&r], || async {
        r.stderr().contains("drop --owner-deployment")
    })
    .await;
    let e = r.stderr();
    assert!(
        e.contains(&format!(
            "error: cannot get Deployment {ns}/missing (--owner-deployment missing): 404 NotFound: "
        )),
        "{e}"
    );
    assert!(
        e.contains("fix the name, or drop --owner-deployment"),
        "{e}"
    );
    assert!(!e.contains("leading"), "{e}");
    assert_eq!(
        sim.stats().by_method.values().sum::<u64>(),
        0,
        "nothing called"
    );
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 17 item 1 in the controller: one Target's cluster was deleted.
/// Its slice's object is Stalled with reason TargetUnreachable and the
/// cause; the other Target's slice converges (Ready, or readiness unknown
/// against the simulator) and keeps converging (an edit
/// is applied next cycle); the metric names the unobserved Target; once
/// the Target points at a cluster that exists, its slice is made.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_target_is_stalled_while_the_others_converge() {
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "iso").await;
    let sim = sim(Duration::from_millis(50), 17, FaultConfig::default()).await;
    let gone_target = |cluster: &str| {
        format!(
            "---\napiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: gone\nspec:\n  project: example-project\n  zone: us-central1-a\n  ownerId: e2e\n  gke:\n    location: us-central1\n    name: {cluster}\n"
        )
    };
    let lost = slice_yaml("lost", "tpu-v5-lite-podslice", "2x2", 1, "")
        .replace("target: train-a", "target: gone");
    let dir = spec_dir(&[("tiny.yaml", tiny("a")), ("lost.yaml", lost)]);
    put(
        dir.path(),
        "target.yaml",
        &format!("{TARGET}{}", gone_target("deleted-cluster")),
    );
    let r = Replica::start_dir(&sim, &ns, dir.path(), "iso", &["--resync", "1s"]);
    wait_converged(&ns, &["tiny"], &r).await;
    wait_condition(&ns, "Stalled", &["lost"], &r).await;
    assert_eq!(reason(&ns, "lost"), "TargetUnreachable");
    let stalled = condition(&ns, "lost", "Stalled");
    assert!(stalled.starts_with("True "), "{stalled}");
    assert!(stalled.contains("[target_not_found]"), "{stalled}");
    assert!(stalled.contains("clusters/deleted-cluster"), "{stalled}");
    assert_eq!(
        slicectl::error::repeated_segment(&stalled),
        None,
        "{stalled}"
    );
    assert_eq!(pool_names(&sim).await, ["tiny-0"]);
    wait_for("the metric", 30, &[&r], || async {
        r.metric("slicectl_target_unobserved{target=\"gone\"}")
            .await
            == Some(1.0)
    })
    .await;
    assert_eq!(
        r.metric("slicectl_target_unobserved{target=\"train\"}")
            .await,
        Some(0.0)
    );
    // The other Target keeps converging: an edit is applied.
    put(dir.path(), "tiny.yaml", &tiny("b"));
    wait_for("tiny's update", 60, &[&r], || async {
        label(&sim, "tiny-0", "team").await.as_deref() == Some("b")
    })
    .await;
    assert!(
        ["Converged", "NodesNotObserved"].contains(&reason(&ns, "tiny").as_str()),
        "{}",
        reason(&ns, "tiny")
    );
    // The Target is pointed at a cluster that exists: lost is made.
    put(
        dir.path(),
        "target.yaml",
        &format!("{TARGET}{}", gone_target("train")),
    );
    wait_for("lost's pool", 60, &[&r], || async {
        pool_names(&sim).await == ["lost-0", "tiny-0"]
    })
    .await;
    wait_converged(&ns, &["lost"], &r).await;
    wait_for("the metric back to 0", 30, &[&r], || async {
        r.metric("slicectl_target_unobserved{target=\"gone\"}")
            .await
            == Some(0.0)
    })
    .await;
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Issue 20 item 3 in the controller: a slice the region's quota cannot
/// hold is refused by the preflight (nothing sent for it), its object is
/// Stalled with reason QuotaExceeded and the figures, another slice
/// converges; once the quota is raised, the next cycle creates it.
#[tokio::test(flavor = "multi_thread")]
async fn a_slice_past_its_quota_is_stalled_quota_exceeded_until_the_quota_is_raised() {
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "quota").await;
    let quota = |limit: u64| FaultConfig {
        quotas: BTreeMap::from([(format!("{REGION}/TPU_V5P"), limit)]),
        ..FaultConfig::default()
    };
    let sim = sim(Duration::from_millis(50), 19, quota(4)).await;
    // big: v5p 2x2x2, 8 chips; 4 left.
    let dir = spec_dir(&[
        ("tiny.yaml", tiny("a")),
        (
            "big.yaml",
            slice_yaml("big", "tpu-v5p-slice", "2x2x2", 1, ""),
        ),
    ]);
    let r = Replica::start_dir(&sim, &ns, dir.path(), "quota", &["--resync", "1s"]);
    wait_converged(&ns, &["tiny"], &r).await;
    wait_condition(&ns, "Stalled", &["big"], &r).await;
    assert_eq!(reason(&ns, "big"), "QuotaExceeded");
    let stalled = condition(&ns, "big", "Stalled");
    assert!(stalled.contains("[quota_insufficient]"), "{stalled}");
    assert!(
        stalled.contains("needs 8 TPU_V5P chips in us-central1") && stalled.contains("4 left"),
        "{stalled}"
    );
    assert_eq!(pool_names(&sim).await, ["tiny-0"]);
    assert_eq!(creates(&sim), 1, "nothing sent for big\n{}", r.text());
    // Raised: the next cycle creates it.
    sim.set_faults(quota(8));
    wait_for("big created", 60, &[&r], || async {
        pool_names(&sim).await == ["big-0", "tiny-0"]
    })
    .await;
    wait_converged(&ns, &["big"], &r).await;
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Server-side applies ConfigMap `name` with `labels` and `files`.
async fn put_configmap(
    api: &Api<ConfigMap>,
    name: &str,
    labels: &[(&str, &str)],
    files: &[(&str, String)],
) {
    let data: BTreeMap<&str, &str> = files.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let cm = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": data,
    });
    api.patch(
        name,
        &PatchParams::apply("slicectl-tests").force(),
        &Patch::Apply(&cm),
    )
    .await
    .unwrap();
}

/// The Role rule docs/controller.md gives for `--configmap-selector` (list
/// and watch on ConfigMaps, no names) lets a ServiceAccount run the
/// selector's watch, and grants nothing more on them.
async fn selector_rbac_is_enough(ns: &str) {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let rbac = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sel\n  namespace: {ns}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: sel\n  namespace: {ns}\nrules:\n\
         \x20 - apiGroups: [\"\"]\n    resources: [configmaps]\n    verbs: [list, watch]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: sel\n  namespace: {ns}\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: sel\n\
         subjects:\n  - kind: ServiceAccount\n    name: sel\n    namespace: {ns}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rbac.yaml");
    std::fs::write(&file, rbac).unwrap();
    let o = kubectl(&["apply", "-f", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let mut config = slicectl::kube::config_from_kubeconfig(&kubeconfig(), None)
        .await
        .unwrap();
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:sel"));
    let sa = kube::Client::try_from(config).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(sa, ns);
    let cfg = watcher::Config::default().labels("slicectl.dev/specs=true");
    // RBAC takes a moment to reach the authorizer's cache.
    let mut names = Vec::new();
    for _ in 0..50 {
        names.clear();
        let mut stream = watcher(api.clone(), cfg.clone()).boxed();
        let mut ok = false;
        while let Some(Ok(ev)) = stream.next().await {
            match ev {
                watcher::Event::InitApply(cm) => names.extend(cm.metadata.name),
                watcher::Event::InitDone => {
                    ok = true;
                    break;
                }
                _ => {}
            }
        }
        if ok {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    names.sort();
    assert_eq!(
        names,
        ["platform", "team-a", "team-b"],
        "the selector's watch as the ServiceAccount"
    );
    let denied = api.get("platform").await;
    assert!(
        matches!(denied, Err(kube::Error::Api(ref e)) if e.code == 403),
        "no get: {denied:?}"
    );
}

/// `--configmap-selector`: every ConfigMap the label selector matches, one
/// per team, is one fleet; an unlabelled ConfigMap is not read; an error
/// names the ConfigMap and key; a team's ConfigMap deleted and created
/// again within the settle period prunes nothing; a key removed is pruned
/// (after the settle period); no ConfigMap matching prunes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_label_selector_reads_every_matching_configmap_as_one_fleet() {
    const SEL: (&str, &str) = ("slicectl.dev/specs", "true");
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "sel").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let sim = sim(Duration::from_millis(300), 21, FaultConfig::default()).await;
    let slice = |name: &str| slice_yaml(name, "tpu-v6e-slice", "1x1", 1, "");
    put_configmap(
        &cms,
        "platform",
        &[SEL],
        &[("target.yaml", TARGET.to_string())],
    )
    .await;
    put_configmap(&cms, "team-a", &[SEL], &[("alpha.yaml", slice("alpha"))]).await;
    let beta = [("beta.yaml", slice("beta")), ("gamma.yaml", slice("gamma"))];
    put_configmap(&cms, "team-b", &[SEL], &beta).await;
    put_configmap(&cms, "unlabelled", &[], &[("stray.yaml", slice("stray"))]).await;
    selector_rbac_is_enough(&ns).await;
    let r = Replica::start_with(
        &sim,
        &ns,
        "sel",
        &[
            "--configmap-selector",
            "slicectl.dev/specs=true",
            "--settle",
            "4s",
            "--resync",
            "1s",
        ],
    );
    wait_for("the three teams' pools", 60, &[&r], || async {
        pool_names(&sim).await == ["alpha-0", "beta-0", "gamma-0"]
    })
    .await;
    wait_converged(&ns, &["alpha", "beta", "gamma"], &r).await;
    assert_eq!(r.get("/readyz").await.map(|x| x.0), Some(200));

    // A broken key: its last good version stands, and the error names the
    // ConfigMap and the key.
    put_configmap(
        &cms,
        "team-b",
        &[SEL],
        &[
            ("beta.yaml", "kind: [".into()),
            ("gamma.yaml", slice("gamma")),
        ],
    )
    .await;
    wait_condition(&ns, "Stalled", &["beta"], &r).await;
    let stalled = condition(&ns, "beta", "Stalled");
    assert!(stalled.contains("team-b/beta.yaml"), "{stalled}");
    put_configmap(&cms, "team-b", &[SEL], &beta).await;

    // team-b deleted and created again within the settle period: held,
    // never pruned.
    cms.delete("team-b", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the vanished ConfigMap held", 30, &[&r], || async {
        r.stderr().contains("settle period")
    })
    .await;
    put_configmap(&cms, "team-b", &[SEL], &beta).await;
    let seen = r.cycles();
    wait_for("cycles past the settle period", 60, &[&r], || async {
        r.cycles() >= seen + 5
    })
    .await;
    assert_eq!(deletes(&sim), 0, "{}", r.text());
    assert_eq!(pool_names(&sim).await, ["alpha-0", "beta-0", "gamma-0"]);

    // A key removed for good is pruned once the set has settled.
    put_configmap(&cms, "team-b", &[SEL], &beta[..1]).await;
    wait_for("gamma pruned", 60, &[&r], || async {
        pool_names(&sim).await == ["alpha-0", "beta-0"]
    })
    .await;

    // No ConfigMap matching: a missing source, nothing pruned.
    for name in ["platform", "team-a", "team-b"] {
        cms.delete(name, &DeleteParams::default()).await.unwrap();
    }
    wait_for("a source_missing cycle", 60, &[&r], || async {
        r.metric("slicectl_reconcile_cycles_total{result=\"source_missing\"}")
            .await
            .unwrap_or(0.0)
            >= 2.0
    })
    .await;
    assert_eq!(
        pool_names(&sim).await,
        ["alpha-0", "beta-0"],
        "{}",
        r.text()
    );
    assert_eq!(deletes(&sim), 1);
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
}
