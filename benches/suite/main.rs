//! slicectl's benchmark suite: `cargo bench --bench suite [-- OPTIONS]`.
//!
//! Runs the real release `slicectl` binary against the embedded GCP
//! simulator (in this process, on loopback) and prints, at the end, one table
//! of ratios measured in this run: each measurement against its ideal or
//! target. Nothing is asserted; a ratio past its target is reported, not
//! failed. See docs/benchmarks.md for what each row means.
//!
//! Options (after `--`): `--quick` (smaller fleets, one run each),
//! `--smoke` (tiny fleets, no gcloud: checks the harness works, in seconds;
//! the default when run without cargo bench's `--bench`, as by
//! `cargo test --benches`; `--full` overrides),
//! `--latency 2s` (simulated operation latency L), `--write-rate 20` (R, sent
//! as `slicectl --write-rate`; 0 for no limit), `--quota 5` (the simulator's
//! per-cluster concurrent operations quota), `--runs 3` (plan repetitions),
//! `--plan-sizes 1000,10000,100000`, `--plan-clusters N` (every plan size
//! over N clusters; by default 10, or one per 1,000 slices beyond 10,000),
//! `--only plan,converge,…` (run only the named scenarios: plan, converge,
//! busy, gcloud, gce, jobset, shards, watch), `--skip-gcloud`, `--keep` (keep the
//! temporary spec and log directory). Each also reads `SLICECTL_BENCH_<NAME>` (e.g.
//! `SLICECTL_BENCH_LATENCY=1s`, `SLICECTL_BENCH_SKIP_GCLOUD=1`).

mod fleet;
mod jobset;
mod run;
mod shards;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use slicectl_sim::{
    DEFAULT_OPERATION_QUOTA, FaultConfig, SimConfig, SimHandle, SimStats, Simulator,
};

use fleet::{Fleet, LOCATION, PROJECT};
use run::Run;

const SLICECTL: &str = env!("CARGO_BIN_EXE_slicectl");
const NODE_POOL_CREATE: &str = "container.projects.locations.clusters.nodePools.create";

// ---------------------------------------------------------------- options

#[derive(Debug, Clone)]
struct Opts {
    mode: &'static str,
    latency: Duration,
    write_rate: f64,
    quota: u32,
    runs: usize,
    plan_sizes: Vec<usize>,
    /// Clusters of the plan fleets: at least this many, one per 1,000
    /// slices beyond (unless `plan_clusters_set`).
    plan_clusters: usize,
    /// `--plan-clusters` was given: every plan size gets exactly that many.
    plan_clusters_set: bool,
    /// `--only`: the scenarios to run (`None`: all).
    only: Option<BTreeSet<String>>,
    converge_slices: usize,
    /// Self-managed GCE slices (4 VMs each) in the gce scenario.
    gce_slices: usize,
    converge_clusters: usize,
    busy_slices: usize,
    skip_gcloud: bool,
    keep: bool,
}

impl Opts {
    fn full() -> Opts {
        Opts {
            mode: "full",
            latency: Duration::from_secs(2),
            // slicectl's own default --write-rate.
            write_rate: 20.0,
            quota: DEFAULT_OPERATION_QUOTA,
            runs: 3,
            plan_sizes: vec![1_000, 10_000, 100_000],
            plan_clusters: 10,
            plan_clusters_set: false,
            only: None,
            converge_slices: 40,
            gce_slices: 8,
            converge_clusters: 4,
            busy_slices: 20,
            skip_gcloud: false,
            keep: false,
        }
    }

    fn parse() -> Opts {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let has = |name: &str| {
            args.iter().any(|a| a == &format!("--{name}"))
                || std::env::var(env_name(name)).is_ok_and(|v| !v.is_empty() && v != "0")
        };
        let value = |name: &str| -> Option<String> {
            let flag = format!("--{name}");
            let eq = format!("--{name}=");
            args.iter()
                .enumerate()
                .find_map(|(i, a)| {
                    if a == &flag {
                        args.get(i + 1).cloned()
                    } else {
                        a.strip_prefix(&eq).map(str::to_string)
                    }
                })
                .or_else(|| std::env::var(env_name(name)).ok())
        };
        let mut o = Opts::full();
        if has("quick") {
            o = Opts {
                mode: "quick",
                latency: Duration::from_secs(1),
                runs: 1,
                plan_sizes: vec![1_000],
                converge_slices: 20,
                gce_slices: 4,
                busy_slices: 10,
                ..o
            };
        }
        // `cargo bench` passes `--bench`; `cargo test --benches` does not,
        // and gets the smoke mode unless a mode is named.
        let under_cargo_bench = args.iter().any(|a| a == "--bench");
        if has("smoke") || !(under_cargo_bench || has("quick") || has("full")) {
            o = Opts {
                mode: "smoke",
                latency: Duration::from_millis(300),
                runs: 1,
                plan_sizes: vec![40],
                plan_clusters: 2,
                converge_slices: 8,
                gce_slices: 2,
                converge_clusters: 2,
                busy_slices: 6,
                skip_gcloud: true,
                ..o
            };
        }
        if let Some(v) = value("latency") {
            o.latency = parse_duration(&v).unwrap_or_else(|| usage(&format!("bad --latency {v}")));
        }
        if let Some(v) = value("write-rate") {
            o.write_rate = v
                .parse()
                .unwrap_or_else(|_| usage(&format!("bad --write-rate {v}")));
        }
        if let Some(v) = value("quota") {
            o.quota = v
                .parse()
                .unwrap_or_else(|_| usage(&format!("bad --quota {v}")));
        }
        if let Some(v) = value("runs") {
            o.runs = v
                .parse::<usize>()
                .unwrap_or_else(|_| usage(&format!("bad --runs {v}")))
                .max(1);
        }
        if let Some(v) = value("plan-sizes") {
            o.plan_sizes = v
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.trim()
                        .parse()
                        .unwrap_or_else(|_| usage(&format!("bad --plan-sizes {v}")))
                })
                .collect();
        }
        if let Some(v) = value("plan-clusters") {
            o.plan_clusters = v
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .unwrap_or_else(|| usage(&format!("bad --plan-clusters {v}")));
            o.plan_clusters_set = true;
        }
        if let Some(v) = value("only") {
            let names: BTreeSet<String> = v.split(',').map(|s| s.trim().to_string()).collect();
            if let Some(bad) = names.iter().find(|n| !SCENARIOS.contains(&n.as_str())) {
                usage(&format!("bad --only {v}: no scenario {bad:?}"));
            }
            o.only = Some(names);
        }
        o.skip_gcloud |= has("skip-gcloud");
        o.keep = has("keep");
        for a in &args {
            let known = [
                "--bench",
                "--full",
                "--quick",
                "--smoke",
                "--skip-gcloud",
                "--keep",
                "--latency",
                "--write-rate",
                "--quota",
                "--runs",
                "--plan-sizes",
                "--plan-clusters",
                "--only",
            ];
            if a.starts_with("--")
                && !known
                    .iter()
                    .any(|k| a == k || a.starts_with(&format!("{k}=")))
            {
                usage(&format!("unknown option {a}"));
            }
        }
        o
    }

    /// Whether scenario `name` (one of [`SCENARIOS`]) runs.
    fn runs(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(name))
    }

    /// The clusters a plan fleet of `n` slices spreads over.
    fn plan_clusters_for(&self, n: usize) -> usize {
        if self.plan_clusters_set {
            self.plan_clusters
        } else {
            self.plan_clusters.max(n.div_ceil(1000))
        }
    }
}

/// The scenarios `--only` names.
const SCENARIOS: [&str; 8] = [
    "plan", "converge", "busy", "gcloud", "gce", "jobset", "shards", "watch",
];

fn env_name(option: &str) -> String {
    format!("SLICECTL_BENCH_{}", option.to_uppercase().replace('-', "_"))
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "{problem}\nusage: cargo bench --bench suite -- [--full|--quick|--smoke] [--latency 2s] [--write-rate 20] \
         [--quota 5] [--runs 3] [--plan-sizes 1000,10000,100000] [--plan-clusters N] \
         [--only plan,converge,busy,gcloud,gce,jobset,shards,watch] [--skip-gcloud] [--keep]"
    );
    std::process::exit(2)
}

/// `2s`, `500ms`, `1.5` (seconds).
fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.parse().ok()?;
    (v >= 0.0).then(|| Duration::from_secs_f64(v * scale))
}

// ---------------------------------------------------------------- results

/// One line of the final table.
struct Row {
    scenario: String,
    measured: String,
    reference: String,
    ratio: Option<f64>,
    target: String,
    /// Whether the ratio meets its target (`None`: no target).
    meets: Option<bool>,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Report {
    fn row(
        &mut self,
        scenario: impl Into<String>,
        measured: impl Into<String>,
        reference: impl Into<String>,
        ratio: Option<f64>,
        target: impl Into<String>,
        meets: Option<bool>,
    ) {
        self.rows.push(Row {
            scenario: scenario.into(),
            measured: measured.into(),
            reference: reference.into(),
            ratio,
            target: target.into(),
            meets,
        });
    }

    fn skipped(&mut self, scenario: impl Into<String>, why: impl Into<String>) {
        self.row(scenario, "skipped", why, None, "", None);
    }

    fn note(&mut self, s: impl Into<String>) {
        let s = s.into();
        println!("  {s}");
        self.notes.push(s);
    }

    fn print_table(&self) {
        let header = [
            "scenario",
            "measured",
            "ideal/target",
            "ratio",
            "target ratio",
            "meets",
        ];
        let cells: Vec<[String; 6]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.scenario.clone(),
                    r.measured.clone(),
                    r.reference.clone(),
                    r.ratio.map_or_else(|| "—".into(), |x| format!("{x:.2}")),
                    r.target.clone(),
                    match r.meets {
                        Some(true) => "yes".into(),
                        Some(false) => "NO".into(),
                        None => "".into(),
                    },
                ]
            })
            .collect();
        let mut w = header.map(|h| h.chars().count());
        for c in &cells {
            for (i, s) in c.iter().enumerate() {
                w[i] = w[i].max(s.chars().count());
            }
        }
        let line = |c: &[String]| {
            let parts: Vec<String> = c
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let pad = w[i] - s.chars().count();
                    if i < 3 {
                        format!("{s}{}", " ".repeat(pad))
                    } else {
                        format!("{}{s}", " ".repeat(pad))
                    }
                })
                .collect();
            format!("| {} |", parts.join(" | "))
        };
        println!("{}", line(&header.map(String::from)));
        let sep: Vec<String> = w.iter().map(|n| "-".repeat(*n)).collect();
        println!("|-{}-|", sep.join("-|-"));
        for c in &cells {
            println!("{}", line(c));
        }
    }
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 {
        format!("{s:.3} s")
    } else {
        format!("{s:.1} s")
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn lists(stats: &SimStats) -> u64 {
    stats
        .by_method
        .iter()
        .filter(|(m, _)| fleet::is_list(m))
        .map(|(_, n)| n)
        .sum()
}

fn by_method(stats: &SimStats) -> String {
    stats
        .by_method
        .iter()
        .map(|(m, n)| format!("{m} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------- harness

struct Bench {
    rt: tokio::runtime::Runtime,
    opts: Opts,
    work: PathBuf,
    logs: PathBuf,
    http: reqwest::Client,
    /// Whether this slicectl has `apply --write-rate`.
    has_write_rate: bool,
    report: Report,
}

impl Bench {
    fn sim(&self, fleet: &Fleet, latency: Duration, faults: FaultConfig) -> SimHandle {
        self.rt
            .block_on(Simulator::start(
                SimConfig {
                    clusters: fleet.cluster_paths(),
                    operation_latency: latency,
                    seed: 1,
                    faults,
                },
                "127.0.0.1:0".parse().expect("loopback address"),
            ))
            .expect("the simulator starts")
    }

    fn rules(&self) -> FaultConfig {
        FaultConfig {
            concurrency_rules: true,
            operation_quota: self.opts.quota,
            ..FaultConfig::default()
        }
    }

    /// A fresh spec directory holding `fleet`.
    fn specs(&self, name: &str, fleet: &Fleet) -> PathBuf {
        let dir = self.work.join(name);
        std::fs::create_dir_all(&dir).expect("creating a spec directory");
        fleet.write(&dir).expect("writing spec files");
        dir
    }

    fn slicectl(&self, sim: &SimHandle, args: &[&str]) -> Command {
        let mut c = Command::new(SLICECTL);
        c.args(args)
            .arg("--api-endpoint")
            .arg(sim.base_url())
            .env("NO_COLOR", "1")
            .env_remove("SLICECTL_API_ENDPOINT")
            .env_remove("SLICECTL_WRITE_RATE")
            .env_remove("SLICECTL_LOG");
        c
    }

    /// `slicectl apply DIR --auto-approve` with the write rate R.
    fn apply(&self, sim: &SimHandle, dir: &Path, tag: &str) -> Run {
        let d = dir.to_string_lossy();
        let mut args = vec!["apply", &*d, "--auto-approve"];
        // The client-side project write rate R (`--write-rate`, a token
        // bucket in slicectl); when an older slicectl lacks it, R is not
        // enforced and the row says so.
        let rate = self.opts.write_rate.to_string();
        if self.has_write_rate {
            args.extend(["--write-rate", &rate]);
        }
        run::run(&mut self.slicectl(sim, &args), &self.logs, tag)
    }

    fn gcloud(&self, sim: &SimHandle, script: &Path, config: &Path, tag: &str) -> Run {
        let base = sim.base_url();
        let mut c = Command::new("bash");
        c.arg(script)
            .env("CLOUDSDK_CONFIG", config)
            .env("CLOUDSDK_CORE_PROJECT", PROJECT)
            .env("CLOUDSDK_AUTH_DISABLE_CREDENTIALS", "true")
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER",
                format!("{base}/"),
            )
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE",
                format!("{base}/compute/v1/"),
            )
            .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
            .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
            .env("CLOUDSDK_CORE_CHECK_GCE_METADATA", "false")
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "true");
        run::run(&mut c, &self.logs, tag)
    }

    /// The node pools slicectl would create for the specs in `dir`, from
    /// `slicectl plan -o json`: (cluster name, pool body).
    fn desired_pools(&self, sim: &SimHandle, dir: &Path, tag: &str) -> Vec<(String, Value)> {
        let r = run::run(
            &mut self.slicectl(sim, &["plan", &dir.to_string_lossy(), "-o", "json"]),
            &self.logs,
            tag,
        );
        assert_eq!(
            r.code,
            Some(0),
            "slicectl plan -o json failed: {}",
            r.tail(20)
        );
        let plan: Value = serde_json::from_str(&r.out()).expect("plan JSON");
        plan["actions"]
            .as_array()
            .expect("actions")
            .iter()
            .filter(|a| a["action"] == "create" && a["kind"] == "node_pool")
            .map(|a| {
                (
                    a["scope"]["name"].as_str().unwrap_or_default().to_string(),
                    a["after"].clone(),
                )
            })
            .collect()
    }

    /// Creates `pools` directly through the simulator's GKE API (concurrency
    /// rules off, latency 0): a fast way to make a large fleet live.
    fn seed(&self, sim: &SimHandle, pools: Vec<(String, Value)>) {
        sim.set_faults(FaultConfig {
            concurrency_rules: false,
            ..FaultConfig::default()
        });
        let base = sim.base_url();
        let http = &self.http;
        let failures: Vec<String> = self.rt.block_on(async {
            futures::stream::iter(pools)
                .map(|(cluster, body)| {
                    let url = format!(
                        "{base}/v1/projects/{PROJECT}/locations/{LOCATION}/clusters/{cluster}/nodePools"
                    );
                    async move {
                        let resp = http.post(&url).json(&json!({"nodePool": body})).send().await;
                        match resp {
                            Ok(r) if r.status().is_success() => None,
                            Ok(r) => Some(format!("{url}: {} {}", r.status(), r.text().await.unwrap_or_default())),
                            Err(e) => Some(format!("{url}: {e}")),
                        }
                    }
                })
                .buffer_unordered(32)
                .filter_map(|x| async move { x })
                .collect()
                .await
        });
        assert!(failures.is_empty(), "seeding failed: {failures:?}");
        sim.set_faults(self.rules());
    }

    /// Size of the body of a GET, bytes.
    fn body_size(&self, url: &str) -> u64 {
        self.rt.block_on(async {
            let r = self.http.get(url).send().await.expect("GET");
            r.bytes().await.map_or(0, |b| b.len() as u64)
        })
    }

    /// Every live node pool of `fleet`, by (cluster, name).
    fn live_pools(&self, sim: &SimHandle, fleet: &Fleet) -> BTreeMap<(String, String), Value> {
        let base = sim.base_url();
        self.rt.block_on(async {
            let mut out = BTreeMap::new();
            for i in 0..fleet.per_cluster.len() {
                let c = fleet.cluster_name(i);
                let url = format!(
                    "{base}/v1/projects/{PROJECT}/locations/{LOCATION}/clusters/{c}/nodePools"
                );
                let v: Value = self
                    .http
                    .get(&url)
                    .send()
                    .await
                    .expect("listing node pools")
                    .json()
                    .await
                    .expect("node pool list JSON");
                for p in v["nodePools"].as_array().into_iter().flatten() {
                    let name = p["name"].as_str().unwrap_or_default().to_string();
                    out.insert((c.clone(), name), p.clone());
                }
            }
            out
        })
    }
}

// ---------------------------------------------------------------- scenarios

/// What one plan size measured.
struct Planned {
    n: usize,
    /// Peak RSS over the runs, bytes.
    rss: u64,
    /// The live inventory's own size: every cluster's node pool list and
    /// the location's operations list, bytes as served.
    inventory: u64,
}

/// The plan targets of issue 21: wall per size (none beyond 10,000:
/// "planned at all"), and peak RSS at 10,000.
fn plan_wall_target(n: usize) -> Option<Duration> {
    match n {
        0..=1_000 => Some(Duration::from_secs_f64(0.15 * n.max(1) as f64 / 1000.0)),
        1_001..=10_000 => Some(Duration::from_secs_f64(1.5 * n as f64 / 10_000.0)),
        _ => None,
    }
}

/// Peak RSS target of a 10,000-slice plan (issue 21).
const PLAN_RSS_TARGET: u64 = 80_000_000;

/// Plan over `n` live slices.
fn plan_scenario(b: &mut Bench, n: usize, gcloud_list: bool) -> Planned {
    let clusters = b.opts.plan_clusters_for(n);
    let fleet = Fleet::even("plan", clusters, n);
    let label = if n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    };
    println!("\n== plan: {n} slices over {clusters} clusters, all live");
    let dir = b.specs(&format!("plan-{n}"), &fleet);
    let sim = b.sim(&fleet, Duration::ZERO, b.rules());
    let t = Instant::now();
    let pools = b.desired_pools(&sim, &dir, &format!("plan-{n}-seed-plan"));
    let created = pools.len();
    b.seed(&sim, pools);
    let seeded = t.elapsed();
    let base = sim.base_url();
    let gke = format!("{base}/v1/projects/{PROJECT}/locations/{LOCATION}");
    let pools_bytes: Vec<u64> = (0..clusters)
        .map(|i| {
            b.body_size(&format!(
                "{gke}/clusters/{}/nodePools",
                fleet.cluster_name(i)
            ))
        })
        .collect();
    let ops_bytes = b.body_size(&format!("{gke}/operations"));
    let inventory = pools_bytes.iter().sum::<u64>() + ops_bytes;
    b.report.note(format!(
        "plan {n}: seeded {created} node pools (and as many DONE operations in {LOCATION}) in {}; \
         one cluster's node pool list is {}, the location's operations list {}, the whole live inventory {} ({} bytes per pool)",
        secs(seeded),
        mb(pools_bytes.first().copied().unwrap_or(0)),
        mb(ops_bytes),
        mb(inventory),
        inventory / (created.max(1) as u64)
    ));

    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    let mut rss = 0;
    let mut stats = SimStats::default();
    let mut all_ok = true;
    for k in 0..b.opts.runs {
        sim.reset_stats();
        let sim_cpu = run::own_cpu();
        let r = run::run(
            &mut b.slicectl(
                &sim,
                &["plan", &dir.to_string_lossy(), "--detailed-exitcode"],
            ),
            &b.logs,
            &format!("plan-{n}-run{k}"),
        );
        if r.code != Some(0) {
            all_ok = false;
            b.report.note(format!(
                "plan {n}: expected exit 0 (no changes), got: {}",
                r.tail(8)
            ));
        }
        // The bench's own CPU over the run: the simulator serving the lists.
        let sim_cpu = run::own_cpu().saturating_sub(sim_cpu);
        println!(
            "  run {k}: {} wall, {} CPU, peak RSS {}; simulator {} CPU",
            secs(r.wall),
            secs(r.cpu),
            mb(r.max_rss),
            secs(sim_cpu)
        );
        walls.push(r.wall);
        cpus.push(r.cpu);
        rss = rss.max(r.max_rss);
        stats = sim.stats();
    }
    let wall = median(walls);
    let ideal = fleet.ideal_lists();
    let got = lists(&stats);
    let gets = stats.reads - got;
    b.report.note(format!(
        "plan {n}: requests per run: {} (ideal lists: {} cluster, {} node pool, {} GKE operations, {} policy, {} region operations)",
        by_method(&stats),
        ideal.cluster_lists,
        ideal.node_pool_lists,
        ideal.gke_operation_lists,
        ideal.policy_lists,
        ideal.region_operation_lists
    ));
    let cpu = median(cpus);
    let scaled = if n == 1000 || n == 10_000 {
        ""
    } else {
        " (scaled)"
    };
    match plan_wall_target(n) {
        Some(target) => {
            let r = wall.as_secs_f64() / target.as_secs_f64();
            b.report.row(
                format!("plan {label}: wall (median of {})", b.opts.runs),
                secs(wall),
                format!("{}{scaled}", secs(target)),
                Some(r),
                "< 1",
                Some(all_ok && r < 1.0),
            );
        }
        None => b.report.row(
            format!("plan {label}: wall (median of {})", b.opts.runs),
            secs(wall),
            "planned at all",
            None,
            "exit 0",
            Some(all_ok),
        ),
    }
    b.report.row(
        format!("plan {label}: CPU user+sys (median)"),
        secs(cpu),
        "—",
        None,
        "",
        None,
    );
    let r = rss as f64 / PLAN_RSS_TARGET as f64;
    let rss_target = n == 10_000;
    b.report.row(
        format!("plan {label}: peak RSS of slicectl"),
        mb(rss),
        mb(PLAN_RSS_TARGET),
        Some(r),
        if rss_target { "< 1" } else { "— (10k only)" },
        rss_target.then_some(r < 1.0),
    );
    let r = got as f64 / ideal.total() as f64;
    b.report.row(
        format!("plan {label}: list calls (+{gets} gets)"),
        got.to_string(),
        format!("{} (ideal)", ideal.total()),
        Some(r),
        "≤ 1, 0 gets",
        Some(all_ok && r <= 1.0 && gets == 0),
    );

    if gcloud_list {
        if b.opts.skip_gcloud {
            b.report.skipped(
                format!("gcloud list {clusters} clusters: speed-up"),
                "--skip-gcloud",
            );
        } else if let Some(missing) = gcloud_missing() {
            b.report.skipped(
                format!("gcloud list {clusters} clusters: speed-up"),
                missing,
            );
        } else {
            // What people do without slicectl: list every cluster's pools.
            let mut script = String::from("set -e\n");
            for i in 0..clusters {
                script.push_str(&format!(
                    "gcloud container node-pools list --cluster={} --location={LOCATION} --format=json > /dev/null\n",
                    fleet.cluster_name(i)
                ));
            }
            let path = b.work.join(format!("gcloud-list-{n}.sh"));
            std::fs::write(&path, script).expect("writing the gcloud script");
            let config = b.work.join("gcloud-config-list");
            std::fs::create_dir_all(&config).expect("gcloud config dir");
            sim.reset_stats();
            let g = b.gcloud(&sim, &path, &config, &format!("gcloud-list-{n}"));
            let gs = sim.stats();
            println!(
                "  gcloud: {} wall for {clusters} `node-pools list`",
                secs(g.wall)
            );
            if g.code != Some(0) {
                b.report.note(format!("gcloud list failed: {}", g.tail(10)));
            }
            b.report.note(format!(
                "gcloud list {n}: {} requests ({}); slicectl plan also observes operations and policies and diffs every pool",
                gs.reads,
                by_method(&gs)
            ));
            let up = g.wall.as_secs_f64() / wall.as_secs_f64();
            b.report.row(
                format!("gcloud list {clusters} clusters ({label} pools): speed-up"),
                format!("{} slicectl plan", secs(wall)),
                format!("{} gcloud", secs(g.wall)),
                Some(up),
                "—",
                None,
            );
        }
    }
    b.rt.block_on(sim.shutdown());
    Planned { n, rss, inventory }
}

/// How peak RSS grows against the live inventory's own size, from 10,000
/// slices to each larger size planned (issue 21: no faster than the
/// inventory): RSS(n) ÷ RSS(10k) against inventory(n) ÷ inventory(10k),
/// and the memory each further pool costs against its bytes on the wire.
fn plan_growth(b: &mut Bench, planned: &[Planned]) {
    let Some(base) = planned.iter().find(|p| p.n == 10_000) else {
        return;
    };
    for p in planned.iter().filter(|p| p.n > base.n) {
        let rss = p.rss as f64 / base.rss.max(1) as f64;
        let inv = p.inventory as f64 / base.inventory.max(1) as f64;
        let r = rss / inv;
        b.report.row(
            format!("plan {}k ÷ 10k: RSS growth ÷ inventory growth", p.n / 1000),
            format!("RSS ×{rss:.2}"),
            format!("inventory ×{inv:.2}"),
            Some(r),
            "≤ 1",
            Some(r <= 1.0),
        );
        let more = (p.n - base.n) as f64;
        b.report.note(format!(
            "plan {} vs 10000: each further live pool costs {:.0} bytes of peak RSS; its share of the inventory is {:.0} bytes",
            p.n,
            p.rss.saturating_sub(base.rss) as f64 / more,
            p.inventory.saturating_sub(base.inventory) as f64 / more
        ));
    }
}

/// Converge a fleet from nothing under the concurrency rules; then, for the
/// converge fleet, a second (idle) apply. Returns slicectl's wall time and
/// the live pools it made.
fn converge_scenario(
    b: &mut Bench,
    name: &str,
    fleet: &Fleet,
    idle: bool,
) -> (Duration, BTreeMap<(String, String), Value>) {
    let n = fleet.slices();
    let l = b.opts.latency;
    println!(
        "\n== {name}: {n} new slices over {} cluster(s), latency {}, quota {}, write rate {}",
        fleet.per_cluster.len(),
        secs(l),
        b.opts.quota,
        b.opts.write_rate
    );
    let dir = b.specs(name, fleet);
    let sim = b.sim(fleet, l, b.rules());
    sim.reset_stats();
    let r = b.apply(&sim, &dir, name);
    let stats = sim.stats();
    let ok = r.code == Some(0);
    if !ok {
        b.report
            .note(format!("{name}: apply did not succeed: {}", r.tail(15)));
    }
    let creates = stats.by_method.get(NODE_POOL_CREATE).copied().unwrap_or(0);
    let refused = stats.writes.saturating_sub(n as u64);
    println!(
        "  apply: {} wall, {} CPU, exit {:?}, {} writes ({creates} creates), {} reads",
        secs(r.wall),
        secs(r.cpu),
        r.code,
        stats.writes,
        stats.reads
    );
    b.report.note(format!(
        "{name}: {} writes for {n} pools ({refused} refused and sent again), {} reads; {}",
        stats.writes,
        stats.reads,
        r.out()
            .lines()
            .find(|l| l.contains("refused")
                || l.contains("Apply complete")
                || l.contains("applied"))
            .unwrap_or("")
            .trim()
    ));
    let rate = (b.has_write_rate && b.opts.write_rate > 0.0).then_some(b.opts.write_rate);
    let ideal = fleet.converge_ideal(b.opts.quota, l, rate);
    let quota = b.opts.quota as usize;
    let waves = fleet
        .per_cluster
        .iter()
        .map(|c| c.div_ceil(quota))
        .max()
        .unwrap_or(0);
    let ratio = r.wall.as_secs_f64() / ideal.as_secs_f64();
    // Issue 21: the converge fleet at L = 5 s and more, within 1.1× of the
    // ideal (busy keeps 1.2: each of its four waves is seen finished up to
    // one poll tick late).
    let target = if idle && l >= Duration::from_secs(5) {
        1.1
    } else {
        1.2
    };
    let clusters = fleet.per_cluster.len();
    b.report.row(
        format!("{name}: {n} slices / {clusters} cluster(s): wall"),
        secs(r.wall),
        format!(
            "{} = max({waves}×L, N/R{})",
            secs(ideal),
            if rate.is_none() { " unlimited" } else { "" }
        ),
        Some(ratio),
        format!("≤ {target}"),
        Some(ok && ratio <= target),
    );
    // Operation reads while waiting: every operations list and get of the
    // apply but the one list per location its observation makes.
    let count = |m: &str| stats.by_method.get(m).copied().unwrap_or(0);
    let locations = fleet.ideal_lists().gke_operation_lists;
    let op_lists = count("container.projects.locations.operations.list");
    let op_gets = count("container.projects.locations.operations.get");
    let wait_reads = (op_lists + op_gets).saturating_sub(locations as u64);
    let bound = fleet::waits::read_bound(locations, r.wall);
    let one_by_one = fleet::waits::per_operation_polls(n, l);
    b.report.row(
        format!("{name}: operation reads while waiting"),
        format!("{wait_reads} ({op_lists} lists, {op_gets} gets)"),
        format!("{bound} = {locations} location(s) × ticks of ≥ 0.75 s"),
        Some(wait_reads as f64 / bound as f64),
        "≤ 1",
        Some(ok && wait_reads <= bound),
    );
    b.report.note(format!(
        "{name}: waits read operations {wait_reads} times; polled one operation at a time they would take about {one_by_one} gets ({:.0}× more)",
        one_by_one as f64 / wait_reads.max(1) as f64
    ));
    let wpr = stats.writes as f64 / n as f64;
    b.report.row(
        format!("{name}: writes per resource created"),
        format!("{} / {n}", stats.writes),
        "1",
        Some(wpr),
        if idle { "—" } else { "≤ 1.1" },
        (!idle).then_some(wpr <= 1.1),
    );
    if !b.has_write_rate {
        b.report.note(format!(
            "{name}: this slicectl has no --write-rate; R = {} was not applied and the ideal ignores it",
            b.opts.write_rate
        ));
    }
    let live = b.live_pools(&sim, fleet);

    if idle {
        println!("\n== idle: a second apply of the same {n} slices");
        let ideal = fleet.ideal_lists().total();
        sim.reset_stats();
        let r2 = b.apply(&sim, &dir, &format!("{name}-idle"));
        let s2 = sim.stats();
        println!(
            "  apply: {} wall, exit {:?}, {} writes, {} reads",
            secs(r2.wall),
            r2.code,
            s2.writes,
            s2.reads
        );
        let noop = r2.code == Some(0) && r2.out().contains("No changes");
        if !noop {
            b.report
                .note(format!("idle apply was not a no-op: {}", r2.tail(10)));
        }
        b.report.note(format!("idle: requests: {}", by_method(&s2)));
        b.report.row(
            format!("idle: 2nd apply of {n} slices: writes"),
            s2.writes.to_string(),
            "0",
            None,
            "= 0",
            Some(noop && s2.writes == 0),
        );
        let r = s2.reads as f64 / ideal as f64;
        b.report.row(
            format!("idle: 2nd apply of {n} slices: reads"),
            s2.reads.to_string(),
            format!("{ideal} (one observation)"),
            Some(r),
            "≤ 1",
            Some(noop && r <= 1.0),
        );
    }
    b.rt.block_on(sim.shutdown());
    (r.wall, live)
}

/// The same pools created with `gcloud container node-pools create`, one
/// after the other, each waiting for its operation (gcloud's default).
fn gcloud_converge(
    b: &mut Bench,
    fleet: &Fleet,
    slicectl_wall: Duration,
    slicectl_live: &BTreeMap<(String, String), Value>,
) {
    let n = fleet.slices();
    let title = format!("gcloud converge {n} pools: speed-up");
    if b.opts.skip_gcloud {
        b.report.skipped(title, "--skip-gcloud");
        return;
    }
    if let Some(missing) = gcloud_missing() {
        b.report.skipped(title, missing);
        return;
    }
    println!(
        "\n== gcloud: the same {n} pools, created one by one with `gcloud container node-pools create` (fresh clusters, latency {})",
        secs(b.opts.latency)
    );
    let dir = b.specs("gcloud-converge", fleet);
    let sim = b.sim(fleet, b.opts.latency, b.rules());
    let pools = b.desired_pools(&sim, &dir, "gcloud-converge-plan");
    let mut script = String::from("set -e\n");
    let mut untranslated = BTreeSet::new();
    let mut approximations = BTreeSet::new();
    for (cluster, body) in &pools {
        let g = fleet::gcloud_create_args(body, cluster, LOCATION);
        untranslated.extend(g.untranslated);
        approximations.extend(g.approximations);
        let words: Vec<String> = g.args.iter().map(|a| fleet::shell_quote(a)).collect();
        script.push_str(&format!("gcloud {}\n", words.join(" ")));
    }
    let path = b.work.join("gcloud-converge.sh");
    std::fs::write(&path, &script).expect("writing the gcloud script");
    let config = b.work.join("gcloud-config-converge");
    std::fs::create_dir_all(&config).expect("gcloud config dir");
    sim.reset_stats();
    let g = b.gcloud(&sim, &path, &config, "gcloud-converge");
    let gs = sim.stats();
    println!(
        "  gcloud: {} wall, exit {:?}, {} writes, {} reads",
        secs(g.wall),
        g.code,
        gs.writes,
        gs.reads
    );
    if g.code != Some(0) {
        b.report
            .note(format!("gcloud converge failed: {}", g.tail(10)));
    }
    b.report.note(format!(
        "gcloud converge: {} per pool (L = {}), {:.1} operation polls per pool, {} writes",
        secs(g.wall / u32::try_from(n.max(1)).unwrap_or(1)),
        secs(b.opts.latency),
        gs.reads as f64 / n.max(1) as f64,
        gs.writes
    ));
    b.report.note(format!(
        "gcloud converge: script {} ({} lines like: {})",
        path.display(),
        pools.len(),
        script.lines().nth(1).unwrap_or("")
    ));
    if !untranslated.is_empty() {
        b.report.note(format!(
            "gcloud converge: NOT EQUIVALENT: no gcloud flag for {untranslated:?}"
        ));
    }
    for a in &approximations {
        b.report
            .note(format!("gcloud converge: exact match impossible: {a}"));
    }
    // Equivalence, as slicectl judges it: its plan of the same specs over
    // the pools gcloud made.
    let check = run::run(
        &mut b.slicectl(
            &sim,
            &["plan", &dir.to_string_lossy(), "--detailed-exitcode"],
        ),
        &b.logs,
        "gcloud-converge-check",
    );
    let verdict = match check.code {
        Some(0) => "slicectl plan of the same specs over gcloud's pools: no changes".to_string(),
        _ => format!(
            "NOT EQUIVALENT: slicectl plan of the same specs over gcloud's pools wants changes: {}",
            check.tail(12)
        ),
    };
    b.report.note(format!("gcloud converge: {verdict}"));
    // And raw: the live pools, field by field, output-only fields left out.
    let live = b.live_pools(&sim, fleet);
    let mut differ: BTreeMap<String, usize> = BTreeMap::new();
    let mut missing = 0;
    for (key, p) in slicectl_live {
        match live.get(key) {
            Some(q) => {
                for f in fleet::differing_fields(p, q) {
                    *differ.entry(f).or_default() += 1;
                }
            }
            None => missing += 1,
        }
    }
    b.report.note(format!(
        "gcloud converge: live pools compared with slicectl's field by field (ignoring {:?}): {}{}",
        fleet::OUTPUT_ONLY,
        if differ.is_empty() {
            "identical".to_string()
        } else {
            format!("differ in {differ:?} (field: pools)")
        },
        if missing > 0 {
            format!("; {missing} of slicectl's pools missing")
        } else {
            String::new()
        }
    ));
    let up = g.wall.as_secs_f64() / slicectl_wall.as_secs_f64();
    b.report.row(
        title,
        format!("{} slicectl apply", secs(slicectl_wall)),
        format!("{} gcloud", secs(g.wall)),
        Some(up),
        "≥ 20×",
        Some(g.code == Some(0) && up >= 20.0),
    );
    b.rt.block_on(sim.shutdown());
}

fn gcloud_missing() -> Option<&'static str> {
    let ok = Command::new("gcloud")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then_some("gcloud not installed")
}

// ---------------------------------------------------------------- main

fn main() {
    let opts = Opts::parse();
    // reqwest is built without a default TLS provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let tmp = tempfile::Builder::new()
        .prefix("slicectl-bench-")
        .tempdir()
        .expect("temporary directory");
    let work = tmp.path().to_path_buf();
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs).expect("log directory");
    let help = run::capture(SLICECTL, &["apply", "--help"], None);
    let has_write_rate = help.contains("--write-rate");

    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    println!("slicectl benchmark suite ({} mode)", opts.mode);
    for l in run::machine(repo) {
        println!("{l}");
    }
    println!("binary: {SLICECTL}");
    println!(
        "settings: latency L = {}, write rate R = {}{}, operations quota = {} per cluster, plan runs = {}",
        secs(opts.latency),
        opts.write_rate,
        if has_write_rate {
            ""
        } else {
            " (NOT SUPPORTED by this slicectl)"
        },
        opts.quota,
        opts.runs
    );
    println!("work directory: {}", work.display());

    let mut b = Bench {
        rt,
        opts: opts.clone(),
        work: work.clone(),
        logs,
        http: reqwest::Client::new(),
        has_write_rate,
        report: Report::default(),
    };
    let started = Instant::now();
    if opts.runs("plan") {
        let planned: Vec<Planned> = opts
            .plan_sizes
            .iter()
            .enumerate()
            .map(|(i, n)| plan_scenario(&mut b, *n, i == 0 && opts.runs("gcloud")))
            .collect();
        plan_growth(&mut b, &planned);
    }
    if opts.runs("converge") || opts.runs("gcloud") {
        let converge = Fleet::even("conv", opts.converge_clusters, opts.converge_slices);
        let (wall, live) = converge_scenario(&mut b, "converge", &converge, true);
        if opts.runs("gcloud") {
            gcloud_converge(&mut b, &converge, wall, &live);
        }
    }
    if opts.runs("busy") {
        let busy = Fleet::even("busy", 1, opts.busy_slices);
        converge_scenario(&mut b, "busy", &busy, false);
    }
    if opts.runs("gce") {
        gce_scenario(&mut b, opts.gce_slices);
    }
    if opts.runs("jobset") {
        jobset::jobset_scenario(&mut b);
    }
    if opts.runs("shards") {
        shards::shards_scenario(&mut b);
    }
    if opts.runs("watch") {
        watch_scenario(&mut b);
    }

    println!(
        "\n== results ({} mode, {} in all; load average now {})\n",
        opts.mode,
        secs(started.elapsed()),
        run::loadavg()
    );
    for l in run::machine(repo) {
        println!("{l}");
    }
    println!(
        "L = {}, R = {}/s, quota = {} per cluster\n",
        secs(opts.latency),
        opts.write_rate,
        opts.quota
    );
    b.report.print_table();
    println!("\nnotes:");
    for n in &b.report.notes {
        println!("- {n}");
    }
    if opts.keep {
        let kept = tmp.keep();
        println!("\nspecs, scripts and logs kept in {}", kept.display());
    }
}

// ---------------------------------------------------------------- watch

/// Target of the time from a file change to the start of its cycle.
const WATCH_TARGET: Duration = Duration::from_millis(500);
/// `--debounce` of the watch scenario (slicectl's default).
const WATCH_DEBOUNCE: &str = "200ms";

/// `slicectl reconcile DIR --watch`: the time from a file change (a new
/// version written beside the directory and renamed into it) to the
/// `cycle started` line of the cycle it triggers, read from the binary's
/// own log as it arrives; median of several changes, each made once the
/// previous cycle has finished.
fn watch_scenario(b: &mut Bench) {
    use std::io::BufRead;
    let changes = b.opts.runs.max(5);
    println!("\n== watch: {changes} file changes, debounce {WATCH_DEBOUNCE}");
    let fleet = Fleet::even("watch", 1, 2);
    let dir = b.specs("watch", &fleet);
    let sim = b.sim(&fleet, Duration::from_millis(100), FaultConfig::default());
    let spawned = std::process::Command::new(SLICECTL)
        .args([
            "reconcile",
            &dir.display().to_string(),
            "--watch",
            "--debounce",
            WATCH_DEBOUNCE,
            "--log",
            "warn,slicectl::watch=debug",
        ])
        .env("SLICECTL_API_ENDPOINT", sim.base_url())
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            b.report.skipped(
                "watch: change → cycle start",
                format!("cannot start slicectl: {e}"),
            );
            return;
        }
    };
    let Some(stderr) = child.stderr.take() else {
        b.report
            .skipped("watch: change → cycle start", "no stderr pipe");
        return;
    };
    // Each log line with the moment it arrived.
    let (tx, rx) = std::sync::mpsc::channel::<(Instant, String)>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    let wait_for = |what: &str, pred: &dyn Fn(&str) -> bool| -> Option<Instant> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok((at, line)) if pred(&line) => return Some(at),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        println!("  watch: timed out waiting for {what}");
        None
    };
    let finished = |l: &str| l.contains("cycle finished");
    let mut latencies = Vec::new();
    if wait_for("the start cycle", &finished).is_some() {
        let file = dir.join(format!("{}.yaml", fleet.cluster_name(0)));
        let tmp = b.work.join("watch-edit.yaml");
        for i in 0..changes {
            let text = format!("{}# edit {i}\n", fleet.spec_file(0));
            std::fs::write(&tmp, text).expect("writing the new version");
            std::fs::rename(&tmp, &file).expect("renaming it into the watched directory");
            let changed = Instant::now();
            let started = wait_for("the change's cycle", &|l: &str| {
                l.contains("cycle started") && l.contains("change")
            });
            let Some(started) = started else { break };
            latencies.push(started.saturating_duration_since(changed));
            if wait_for("the change's cycle to finish", &finished).is_none() {
                break;
            }
        }
    }
    // SIGTERM: the watcher exits cleanly.
    // SAFETY: kill(2) on our own child's pid.
    let pid = i32::try_from(child.id()).unwrap_or(0);
    if pid > 0 {
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let code = child.wait().ok().and_then(|s| s.code());
    b.rt.block_on(sim.shutdown());
    if latencies.len() < changes {
        b.report.note(format!(
            "watch: only {} of {changes} changes started a cycle within 60 s",
            latencies.len()
        ));
    }
    if latencies.is_empty() {
        b.report
            .skipped("watch: change → cycle start", "no cycle started");
        return;
    }
    let each: Vec<String> = latencies.iter().map(|d| secs(*d)).collect();
    let m = median(latencies);
    let ratio = m.as_secs_f64() / WATCH_TARGET.as_secs_f64();
    println!("  change → cycle start: {} (median)", secs(m));
    b.report.note(format!(
        "watch: change → cycle start, each: {}; debounce {WATCH_DEBOUNCE}; exit after SIGTERM {code:?}",
        each.join(", ")
    ));
    b.report.row(
        "watch: change → cycle start",
        secs(m),
        format!("target {}", secs(WATCH_TARGET)),
        Some(ratio),
        "< 1",
        Some(ratio < 1.0 && code == Some(0)),
    );
}

// ---------------------------------------------------------------- gce

/// The self-managed GCE backend: `slices` v6e 4x4 slices (4 VMs each)
/// brought to Ready against the simulator and the real test control plane
/// (`SLICECTL_TEST_KUBECONFIG`; without one the rows say so). Measures the
/// `setMetadata` writes per VM against the pull model's ideal of two (the
/// join values in, the token out; tpu-operator writes every VM on every
/// pass), the time to Ready against the operations' own latency (policy,
/// template and MIG in turn, then the VMs boot: 4 L), and a second apply.
fn gce_scenario(b: &mut Bench, slices: usize) {
    println!("\n== gce: {slices} self-managed slices of 4 VMs join a real control plane");
    let Some(kc) = std::env::var_os("SLICECTL_TEST_KUBECONFIG").filter(|k| !k.is_empty()) else {
        b.report.skipped(
            "gce",
            "no control plane: run under eval \"$(scripts/k8s-testenv.sh up)\"",
        );
        return;
    };
    let kc = PathBuf::from(kc);
    let kubeconfig = std::fs::read_to_string(&kc).unwrap_or_default();
    let Some(endpoint) = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .map(|s| s.trim().trim_end_matches('/').to_string())
    else {
        b.report
            .skipped("gce", "the kubeconfig names no https server");
        return;
    };
    let dir = b.work.join("gce");
    std::fs::create_dir_all(&dir).expect("spec directory");
    let mut text = format!(
        "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {{name: k}}\nspec:\n  project: {PROJECT}\n  zone: us-central1-b\n  ownerId: bench-gce\n  gce:\n    controlPlaneEndpoint: \"{endpoint}\"\n    kubeApi: {{kubeconfig: \"{}\"}}\n",
        kc.display()
    );
    for i in 0..slices {
        text.push_str(&format!(
            "---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: bench-gce-{i}}}\nspec:\n  target: k\n  backend: gce\n  accelerator: tpu-v6e-slice\n  topology: \"4x4\"\n  gce:\n    image: projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-v6e\n    bootstrap: {{kubeadm: {{kubernetesVersion: \"1.36\"}}}}\n"
        ));
    }
    std::fs::write(dir.join("fleet.yaml"), text).expect("spec file");
    let latency = b.opts.latency;
    let sim =
        b.rt.block_on(Simulator::start(
            SimConfig {
                clusters: vec![],
                operation_latency: latency,
                seed: 1,
                faults: b.rules(),
            },
            "127.0.0.1:0".parse().expect("loopback address"),
        ))
        .expect("the simulator starts");
    let r = b.apply(&sim, &dir, "gce");
    let s = sim.stats();
    let vms = 4 * slices as u64;
    println!(
        "  apply: {} wall, exit {:?}, {} writes",
        secs(r.wall),
        r.code,
        s.writes
    );
    if r.code != Some(0) {
        b.report.note(format!("gce apply failed: {}", r.tail(15)));
    }
    let set_md = s
        .by_method
        .get("compute.instances.setMetadata")
        .copied()
        .unwrap_or(0);
    let ratio = set_md as f64 / (2 * vms) as f64;
    b.report.row(
        format!("gce: {slices} slices, {vms} VMs: setMetadata writes"),
        set_md.to_string(),
        format!("{} (2 per VM)", 2 * vms),
        Some(ratio),
        "≤ 1",
        Some(r.code == Some(0) && ratio <= 1.0),
    );
    let ideal = latency * 4;
    let ratio = r.wall.as_secs_f64() / ideal.as_secs_f64();
    b.report.row(
        format!("gce: {slices} slices to Ready (real joins)"),
        secs(r.wall),
        format!("{} (4 L: policy, template, MIG, boot)", secs(ideal)),
        Some(ratio),
        "≤ 2",
        Some(r.code == Some(0) && ratio <= 2.0),
    );
    sim.reset_stats();
    let r2 = b.apply(&sim, &dir, "gce-idle");
    let s2 = sim.stats();
    let noop = r2.code == Some(0) && r2.out().contains("No changes");
    b.report.row(
        format!("gce: 2nd apply of {slices} slices: cloud writes"),
        s2.writes.to_string(),
        "0",
        None,
        "= 0",
        Some(noop && s2.writes == 0),
    );
    // Compute operation reads while waiting: every zone, region and global
    // operations list, get and wait of the first apply, less what the
    // second (idle, no waits) apply's observation reads; against one read
    // per location (zone, region, global) per tick, as the GKE rows.
    let op_reads = |st: &SimStats| -> (u64, u64) {
        let mut lists_gets = (0, 0);
        for (m, n) in &st.by_method {
            let op = ["zoneOperations.", "regionOperations.", "globalOperations."]
                .iter()
                .any(|k| m.starts_with(&format!("compute.{k}")));
            if op && m.ends_with(".list") {
                lists_gets.0 += n;
            } else if op {
                lists_gets.1 += n;
            }
        }
        lists_gets
    };
    let ((l1, g1), (l2, g2)) = (op_reads(&s), op_reads(&s2));
    let wait_reads = (l1 + g1).saturating_sub(l2 + g2);
    let locations = 3;
    let bound = fleet::waits::read_bound(locations, r.wall);
    b.report.row(
        "gce: Compute operation reads while waiting",
        format!(
            "{wait_reads} ({l1} lists, {g1} gets/waits; idle apply {})",
            l2 + g2
        ),
        format!("{bound} = {locations} locations (zone, region, global) × ticks of ≥ 0.75 s"),
        Some(wait_reads as f64 / bound as f64),
        "≤ 1",
        Some(r.code == Some(0) && wait_reads <= bound),
    );
    let d = run::run(
        &mut b.slicectl(
            &sim,
            &[
                "destroy",
                &dir.to_string_lossy(),
                "--auto-approve",
                "--max-destroy",
                "1000",
            ],
        ),
        &b.logs,
        "gce-destroy",
    );
    if d.code != Some(0) {
        b.report.note(format!("gce destroy failed: {}", d.tail(15)));
    }
    b.rt.block_on(sim.shutdown());
}
