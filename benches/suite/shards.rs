//! The sharded controller's cycle cost (issue 21, docs/benchmarks.md, the
//! `shards` rows): six Targets (one cluster each) with every pool live,
//! reconciled by `slicectl controller --dir` against the simulator and the
//! real test control plane (the Leases and the status objects need one:
//! `SLICECTL_TEST_KUBECONFIG`; without one the rows say so).
//!
//! Measured twice on the same live fleet: one leader (`--shards 1`), then
//! three replicas sharing `--shards 6`. For each replica the steady-state
//! cycle (the mean of whole cycles run once every shard is held, from its
//! own `slicectl_reconcile_duration_seconds`), the slices it holds (its
//! shard Leases' Targets), and so the cost per 1,000 slices and how many
//! slices one replica could hold within the default 10-minute resync.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use slicectl::controller::shard::shard_of;
use slicectl_sim::SimHandle;

use super::fleet::Fleet;
use super::{Bench, SLICECTL, secs};

/// Targets (= clusters) of the fleet.
const TARGETS: usize = 6;
/// `--shards` of the sharded run.
const SHARDS: u32 = 6;
/// Replicas of the sharded run.
const REPLICAS: usize = 3;
/// Whole cycles averaged per replica, once every shard is held.
const STEADY_CYCLES: f64 = 2.0;
/// The controller's default `--resync`.
const RESYNC: Duration = Duration::from_secs(600);
/// What the design note once advised one replica to hold at most.
const ADVISED: f64 = 10_000.0;

/// One replica's metrics: cycle seconds (sum), cycles, shards held.
type Sample = (f64, f64, f64);

/// One replica's steady state.
struct Cost {
    name: String,
    slices: usize,
    cycle: Duration,
}

impl Cost {
    fn per_1k(&self) -> f64 {
        self.cycle.as_secs_f64() * 1000.0 / self.slices.max(1) as f64
    }
}

/// A running `slicectl controller`, stopped (SIGTERM) when dropped.
struct Replica {
    name: String,
    child: Child,
    port: u16,
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kubectl(kc: &Path, args: &[&str]) -> Result<String, String> {
    let o = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kc)
        .output()
        .map_err(|e| format!("kubectl: {e}"))?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(format!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

/// The sum of the values of every metric line starting with `prefix`.
fn metric(body: &str, prefix: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The sharded controller's cycle cost; see the module docs.
pub fn shards_scenario(b: &mut Bench) {
    let per_target = match b.opts.mode {
        "full" => 1000,
        "quick" => 200,
        _ => 5,
    };
    let n = TARGETS * per_target;
    println!(
        "\n== shards: {n} live slices on {TARGETS} Targets, one leader, then {REPLICAS} replicas × --shards {SHARDS}"
    );
    let Some(kc) = std::env::var_os("SLICECTL_TEST_KUBECONFIG").filter(|k| !k.is_empty()) else {
        b.report.skipped(
            "shards",
            "no control plane: run under eval \"$(scripts/k8s-testenv.sh up)\"",
        );
        return;
    };
    let kc = PathBuf::from(kc);
    // Target names that land on six different shards, so that each
    // replica holds two Targets' worth (the hash is fixed: the same prefix
    // every run).
    let fleet = (0..10_000)
        .map(|i| Fleet::even(&format!("shard{i}"), TARGETS, n))
        .find(|f| {
            let on: std::collections::BTreeSet<u32> = (0..TARGETS)
                .map(|t| shard_of(&f.cluster_name(t), SHARDS))
                .collect();
            on.len() == TARGETS
        })
        .unwrap_or_else(|| Fleet::even("shard", TARGETS, n));
    let dir = b.specs("shards", &fleet);
    let sim = b.sim(&fleet, Duration::ZERO, b.rules());
    let pools = b.desired_pools(&sim, &dir, "shards-seed-plan");
    b.seed(&sim, pools);
    let ns = format!("bench-shards-{}", std::process::id());
    let crd = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crd-slicestatus.yaml");
    let setup = kubectl(&kc, &["create", "namespace", &ns]).and_then(|_| {
        kubectl(
            &kc,
            &[
                "apply",
                "--server-side",
                "--field-manager=slicectl-bench",
                "-f",
                &crd.to_string_lossy(),
            ],
        )
    });
    if let Err(e) = setup {
        b.report.skipped("shards", e);
        b.rt.block_on(sim.shutdown());
        return;
    }
    let timeout = Duration::from_secs(if b.opts.mode == "full" { 1200 } else { 300 });
    let single = measure(b, &sim, &fleet, &dir, &kc, &ns, 1, 1, timeout);
    let sharded = measure(b, &sim, &fleet, &dir, &kc, &ns, SHARDS, REPLICAS, timeout);
    let _ = kubectl(&kc, &["delete", "namespace", &ns, "--wait=false"]);
    b.rt.block_on(sim.shutdown());
    report(b, n, single, sharded);
}

/// The rows of the scenario.
fn report(
    b: &mut Bench,
    n: usize,
    single: Result<Vec<Cost>, String>,
    sharded: Result<Vec<Cost>, String>,
) {
    let one = match single {
        Ok(v) if !v.is_empty() => v.into_iter().next(),
        Ok(_) => None,
        Err(e) => {
            b.report.skipped("shards: one leader", e);
            None
        }
    };
    if let Some(c) = &one {
        b.report.row(
            format!("shards: one leader, {n} slices: steady cycle"),
            format!("{} ({:.3} s per 1k)", secs(c.cycle), c.per_1k()),
            "—",
            None,
            "—",
            None,
        );
    }
    let costs = match sharded {
        Ok(v) if !v.is_empty() => v,
        Ok(_) => {
            b.report.skipped("shards: sharded", "no replica measured");
            return;
        }
        Err(e) => {
            b.report.skipped("shards: sharded", e);
            return;
        }
    };
    for c in &costs {
        b.report.note(format!(
            "shards: replica {} holds {} slices, steady cycle {} ({:.3} s per 1k)",
            c.name,
            c.slices,
            secs(c.cycle),
            c.per_1k()
        ));
    }
    // The costliest replica per 1k bounds what one replica can hold.
    let worst = costs.iter().map(Cost::per_1k).fold(0.0_f64, f64::max);
    let slowest = costs.iter().map(|c| c.cycle).max().unwrap_or_default();
    let held: Vec<String> = costs.iter().map(|c| c.slices.to_string()).collect();
    match &one {
        Some(c) => {
            let r = worst / c.per_1k().max(1e-9);
            b.report.row(
                format!("shards: {REPLICAS} replicas × --shards {SHARDS}: cycle per 1k slices"),
                format!("{worst:.3} s (replicas hold {})", held.join(", ")),
                format!("{:.3} s one leader", c.per_1k()),
                Some(r),
                "—",
                None,
            );
            let r = slowest.as_secs_f64() / c.cycle.as_secs_f64().max(1e-9);
            b.report.row(
                format!("shards: {n} slices, cycle wall: {REPLICAS} replicas ÷ one leader"),
                secs(slowest),
                format!("{} one leader", secs(c.cycle)),
                Some(r),
                "< 1",
                Some(r < 1.0),
            );
        }
        None => b.report.skipped(
            format!("shards: {REPLICAS} replicas × --shards {SHARDS}: cycle per 1k slices"),
            "no one-leader reference",
        ),
    }
    let holds = RESYNC.as_secs_f64() / worst.max(1e-9) * 1000.0;
    b.report.row(
        "shards: slices one replica cycles within --resync 10m",
        format!("{holds:.0}"),
        format!("{ADVISED:.0} (advised per replica)"),
        Some(holds / ADVISED),
        "≥ 1",
        Some(holds >= ADVISED),
    );
}

/// Runs `replicas` controllers with `--shards shards` over the live fleet
/// until each has run [`STEADY_CYCLES`] whole cycles with every shard held;
/// each replica's mean cycle and the slices it held.
#[allow(clippy::too_many_arguments)]
fn measure(
    b: &Bench,
    sim: &SimHandle,
    fleet: &Fleet,
    dir: &Path,
    kc: &Path,
    ns: &str,
    shards: u32,
    replicas: usize,
    timeout: Duration,
) -> Result<Vec<Cost>, String> {
    let lease = format!("bench-{shards}");
    let mut running = Vec::new();
    for i in 0..replicas {
        let name = format!("bench-{shards}-{i}");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free port: {e}"))?;
        let log = |ext: &str| {
            std::fs::File::create(b.logs.join(format!("{name}.{ext}")))
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null())
        };
        let child = Command::new(SLICECTL)
            .args([
                "controller",
                "--dir",
                &dir.to_string_lossy(),
                "--namespace",
                ns,
                "--lease-name",
                &lease,
                "--lease-duration",
                "4s",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--resync",
                "1s",
                "--shards",
                &shards.to_string(),
            ])
            .env("SLICECTL_API_ENDPOINT", sim.base_url())
            .env("KUBECONFIG", kc)
            .env("POD_NAME", &name)
            .env("NO_COLOR", "1")
            .env_remove("SLICECTL_LOG")
            .env_remove("POD_NAMESPACE")
            .stdin(Stdio::null())
            .stdout(log("out"))
            .stderr(log("err"))
            .spawn()
            .map_err(|e| format!("cannot start slicectl controller: {e}"))?;
        running.push(Replica { name, child, port });
    }
    let started = Instant::now();
    // Per replica: (seconds, cycles) from its histogram.
    let read = |b: &Bench, r: &Replica| -> Option<Sample> {
        let url = format!("http://127.0.0.1:{}/metrics", r.port);
        let body =
            b.rt.block_on(async { b.http.get(&url).send().await.ok()?.text().await.ok() })?;
        Some((
            metric(&body, "slicectl_reconcile_duration_seconds_sum{"),
            metric(&body, "slicectl_reconcile_duration_seconds_count{"),
            metric(&body, "slicectl_shards_held "),
        ))
    };
    let snapshot =
        |b: &Bench| -> Vec<Option<Sample>> { running.iter().map(|r| read(b, r)).collect() };
    let wait = |b: &Bench,
                what: &str,
                done: &dyn Fn(&[Option<Sample>]) -> bool|
     -> Result<Vec<Sample>, String> {
        loop {
            let s = snapshot(b);
            if s.iter().all(Option::is_some) && done(&s) {
                return Ok(s.into_iter().flatten().collect());
            }
            if started.elapsed() > timeout {
                return Err(format!(
                    "timed out after {} waiting for {what} (logs: {})",
                    secs(timeout),
                    b.logs.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    let all_held = |s: &[Option<Sample>]| {
        s.iter().flatten().map(|x| x.2).sum::<f64>() >= f64::from(shards)
            && s.iter().flatten().all(|x| replicas == 1 || x.2 > 0.0)
    };
    let s0 = wait(b, "every shard held", &all_held)?;
    // Not yet steady: the cycle in flight at s0, and the one after it. A
    // shard taken while a cycle runs gets its first cycle once that one
    // ends (single flight), and that first cycle writes the shard's status
    // objects (a one-off, as one leader's start cycle is). So two cycles
    // ended after s0 before the steady ones are timed.
    let s1 = wait(b, "two cycles after every shard was held", &|s| {
        all_held(s) && s.iter().flatten().zip(&s0).all(|(x, y)| x.1 >= y.1 + 2.0)
    })?;
    let s2 = wait(b, "the steady cycles", &|s| {
        all_held(s)
            && s.iter()
                .flatten()
                .zip(&s1)
                .all(|(x, y)| x.1 >= y.1 + STEADY_CYCLES)
    })?;
    // Who holds which shard: the Targets (and slices) each replica cycles.
    let leases = kubectl(
        kc,
        &[
            "get",
            "leases",
            "-n",
            ns,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.holderIdentity}{\"\\n\"}{end}",
        ],
    )?;
    let holder: BTreeMap<u32, String> = (0..shards)
        .filter_map(|k| {
            let name = if shards == 1 {
                lease.clone()
            } else {
                format!("{lease}-{k}")
            };
            let h = leases
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))?;
            Some((k, h.to_string()))
        })
        .collect();
    let mut out = Vec::new();
    for (i, r) in running.iter().enumerate() {
        let slices: usize = (0..fleet.per_cluster.len())
            .filter(|t| {
                let k = shard_of(&fleet.cluster_name(*t), shards);
                holder.get(&k) == Some(&r.name)
            })
            .map(|t| fleet.per_cluster[t])
            .sum();
        let (d_sum, d_count) = (s2[i].0 - s1[i].0, s2[i].1 - s1[i].1);
        let cycle = Duration::from_secs_f64(d_sum / d_count.max(1.0));
        println!(
            "  {}: holds {slices} slices, {d_count:.0} steady cycles of {} each",
            r.name,
            secs(cycle)
        );
        out.push(Cost {
            name: r.name.clone(),
            slices,
            cycle,
        });
    }
    drop(running);
    Ok(out)
}
