//! Command-line arguments.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `slicectl --version`: the package version and the commit it was built
/// from (build.rs; `commit unknown` for a build outside git without
/// `SLICECTL_BUILD_COMMIT`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("SLICECTL_BUILD_VERSION"),
    ")"
);

/// Declarative, GitOps-style reconciler for Google Cloud TPU slices.
#[derive(Debug, Parser)]
#[command(name = "slicectl", version = VERSION, about, long_about = None)]
pub struct Cli {
    /// Command.
    #[command(subcommand)]
    pub command: Command,
    /// Log filter (tracing EnvFilter syntax), e.g. `debug` or `slicectl=trace`.
    #[arg(long, global = true, env = "SLICECTL_LOG", default_value = "warn")]
    pub log: String,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable.
    Text,
    /// One JSON object per line.
    Json,
}

/// Output format of `plan` and `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// For people.
    Human,
    /// Stable JSON for machines.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check every spec file; print each problem as file:line:column.
    Validate {
        /// Spec directory.
        dir: PathBuf,
    },
    /// Show what apply would do.
    Plan {
        /// Spec directory.
        dir: PathBuf,
        /// Connection settings.
        #[command(flatten)]
        conn: Connection,
        /// Safety settings.
        #[command(flatten)]
        safety: Safety,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = Output::Human)]
        output: Output,
        /// Exit 0 when there is nothing to do, 2 when there are changes, 1 on error.
        #[arg(long)]
        detailed_exitcode: bool,
        /// Save the plan to FILE; `slicectl apply FILE` applies exactly it, and
        /// refuses once the live state has moved.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Plan and apply: converge the live slices to the specs.
    Apply {
        /// Spec directory, or a plan file saved with `plan --out`.
        path: PathBuf,
        /// Connection settings.
        #[command(flatten)]
        conn: Connection,
        /// Safety settings.
        #[command(flatten)]
        safety: Safety,
        /// Execution settings.
        #[command(flatten)]
        exec: Exec,
    },
    /// Reconcile DIR (as `apply --auto-approve`); with --watch, keep doing it
    /// on every change under DIR and every --resync.
    Reconcile {
        /// Spec directory.
        dir: PathBuf,
        /// Keep running: watch DIR recursively and run a cycle on every change
        /// (debounced) and every --resync; Ctrl-C or SIGTERM stops.
        #[arg(long)]
        watch: bool,
        /// Reconcile the specs under DIR as committed at this revision (HEAD,
        /// main, origin/main, a tag or a commit id) instead of DIR's working
        /// files: a commit is never half written. With --watch, a cycle runs
        /// when the revision moves. DIR must be in a git work tree.
        #[arg(long, value_name = "REF", value_parser = clap::builder::NonEmptyStringValueParser::new())]
        git_ref: Option<String>,
        /// Watch settings.
        #[command(flatten)]
        watch_args: WatchArgs,
        /// Connection settings.
        #[command(flatten)]
        conn: Connection,
        /// Safety settings.
        #[command(flatten)]
        safety: Safety,
        /// Execution settings.
        #[command(flatten)]
        exec: ReconcileExec,
    },
    /// Run in a cluster: reconcile the specs of a ConfigMap (watched through
    /// the API) or of a mounted directory on every change and every
    /// --resync, as the leader elected through a Lease; serve /healthz,
    /// /readyz and /metrics; write a SliceStatus object per slice.
    Controller {
        /// Controller settings (boxed: the largest variant by far).
        #[command(flatten)]
        ctl: Box<ControllerArgs>,
        /// Connection settings.
        #[command(flatten)]
        conn: Connection,
        /// Safety settings.
        #[command(flatten)]
        safety: Safety,
        /// Execution settings.
        #[command(flatten)]
        exec: ReconcileExec,
    },
    /// Show the live state of every slice.
    Status {
        /// Spec directory.
        dir: PathBuf,
        /// Connection settings.
        #[command(flatten)]
        conn: Connection,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = Output::Human)]
        output: Output,
    },
    /// Tear down every slice owned by the specs' targets (plan first).
    Destroy {
        /// Spec directory.
        dir: PathBuf,
        /// Connection settings.
        #[command(flatten)]
        conn: Connection,
        /// Maximum resources (of every kind) this destroy may delete.
        #[arg(long, default_value_t = DEFAULT_MAX_DESTROY)]
        max_destroy: usize,
        /// Allow deleting a self-managed slice replica whose protection
        /// cannot be read (refusal `protection_unknown`).
        #[arg(long)]
        allow_unverified_delete: bool,
        /// Destroy busy slice replicas too, killing the pods bound to their
        /// Nodes, whatever their disruption policy says (named in the plan).
        #[arg(long)]
        disrupt: bool,
        /// Execution settings.
        #[command(flatten)]
        exec: Exec,
    },
    /// Bring live node pools (GKE) or MIGs with their template and policy
    /// (GCE) slicectl does not own under specs: write the Slice files that
    /// describe them, show the plan (ownership stamped in place, nothing
    /// else), and on approval stamp them.
    #[command(group(clap::ArgGroup::new("which").required(true).args(["names", "selector", "all"])))]
    Adopt {
        /// Spec directory (its Targets; the Slices already there).
        dir: PathBuf,
        /// The Target whose cluster and zone hold the resources.
        #[arg(long)]
        target: String,
        /// Adopt this node pool or MIG (repeatable). The only way to adopt
        /// one another tool still manages (Terraform, tpu-provisioner, xpk,
        /// tpu-operator).
        #[arg(long = "name", value_name = "POOL|MIG")]
        names: Vec<String>,
        /// Adopt every node pool with this node label (every MIG whose
        /// instance template carries this label).
        #[arg(long, value_name = "LABEL=VALUE")]
        selector: Option<String>,
        /// Adopt every node pool or MIG of the Target that no tool manages.
        #[arg(long)]
        all: bool,
        /// Where the Slice files are written (`SLICE.yaml`).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Overwrite a Slice file that exists.
        #[arg(long)]
        force: bool,
        /// Write the Slice files to an `--out` outside DIR: only when that is
        /// the spec source that will reconcile them (another checkout, the
        /// controller's ConfigMap). An adopted resource is slicectl's, and an
        /// apply of specs without its file prunes it.
        #[arg(long)]
        out_outside_source: bool,
        /// Write the Slice files and save the adoption plan to FILE instead
        /// of applying it; `slicectl apply FILE` applies exactly it.
        #[arg(long, value_name = "FILE")]
        plan_out: Option<PathBuf>,
        /// Connection settings.
        #[command(flatten)]
        conn: Connection,
        /// Execution settings.
        #[command(flatten)]
        exec: Exec,
    },
    /// Remove slicectl's ownership from slices (nothing is deleted),
    /// to hand them to another tool; lists the spec files that still name
    /// them.
    Release {
        /// Spec directory (the Targets that own the slices).
        dir: PathBuf,
        /// The slice to release (repeatable).
        #[arg(long = "slice", value_name = "SLICE", required = true)]
        slices: Vec<String>,
        /// Save the release plan to FILE instead of applying it; `slicectl
        /// apply FILE` applies exactly it.
        #[arg(long, value_name = "FILE")]
        plan_out: Option<PathBuf>,
        /// Connection settings.
        #[command(flatten)]
        conn: Connection,
        /// Execution settings.
        #[command(flatten)]
        exec: Exec,
    },
    /// Print the JSON Schema of spec files.
    Schema,
    /// Print a shell completion script, generated from this CLI
    /// (e.g. `slicectl completions bash > /etc/bash_completion.d/slicectl`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), generated from this CLI; with `--dir`,
    /// write it and one page per subcommand (`slicectl-plan.1`, …) there.
    Man {
        /// Write `slicectl.1` and every `slicectl-SUBCOMMAND.1` into this directory.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Print the CustomResourceDefinition of the SliceStatus status objects
    /// (kept in deploy/crd-slicestatus.yaml).
    Crd,
    /// Run the GCP simulator as a server.
    Sim {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8085")]
        listen: SocketAddr,
        /// A cluster that exists, `projects/P/locations/L/clusters/C` (repeatable).
        #[arg(long = "cluster")]
        clusters: Vec<String>,
        /// Link a simulated GKE cluster to a real Kubernetes API server, as
        /// `projects/P/locations/L/clusters/C=KUBECONFIG` (repeatable; the
        /// cluster is registered if it is not). Its `clusters.get` then gives
        /// that API server's endpoint and CA, and its node pools register
        /// Nodes there: one kubemark hollow node (a real kubelet with a fake
        /// container runtime, about 80 MiB) per VM.
        #[arg(long = "link-gke", value_name = "CLUSTER=KUBECONFIG")]
        link_gke: Vec<String>,
        /// The kubemark binary linked clusters run their hollow nodes with
        /// (`scripts/k8s-testbin.sh` builds it).
        #[arg(long, env = "SLICECTL_KUBEMARK", value_name = "PATH")]
        kubemark: Option<std::path::PathBuf>,
        /// Most hollow nodes a linked cluster's node pool starts; a pool of
        /// more VMs starts none and the simulator logs why.
        #[arg(long, value_name = "N", default_value_t = slicectl_sim::link::DEFAULT_MAX_NODES_PER_POOL)]
        link_max_nodes_per_pool: u32,
        /// Simulator behaviour.
        #[command(flatten)]
        sim: SimArgs,
    },
}

/// Where the Google APIs are.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// Send container calls to URL/v1/... and compute calls to URL/compute/v1/...
    /// (no credentials are used for a loopback URL; plain http to any other
    /// host is refused unless --allow-insecure-http).
    #[arg(
        long,
        env = "SLICECTL_API_ENDPOINT",
        value_name = "URL",
        conflicts_with = "sim"
    )]
    pub api_endpoint: Option<String>,
    /// Read the Google access token from this file instead of Application
    /// Default Credentials, as gcloud's --access-token-file does: the file
    /// holds only the token; it is read again at each use, so a process
    /// that rewrites it renews the token. It authenticates the Google API
    /// calls and GKE clusters' Kubernetes APIs (reached through
    /// clusters.get). It is sent even to a loopback --api-endpoint (a
    /// simulator linked to a real API server); plain http to any other host
    /// still needs --allow-insecure-http. Ignored under --sim.
    #[arg(long, env = "SLICECTL_ACCESS_TOKEN_FILE", value_name = "PATH")]
    pub access_token_file: Option<std::path::PathBuf>,
    /// Allow sending the Google access token over plain http to an
    /// --api-endpoint that is not loopback (it travels unencrypted).
    #[arg(long, env = "SLICECTL_ALLOW_INSECURE_HTTP")]
    pub allow_insecure_http: bool,
    /// Writes per second per project, client-side (a token bucket; 0: no
    /// limit). The default stays well inside GKE's documented project rate
    /// limit of 3000 requests per minute.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20.0,
        env = "SLICECTL_WRITE_RATE"
    )]
    pub write_rate: f64,
    /// Writes that may go at once before --write-rate paces them.
    #[arg(long, value_name = "N", default_value_t = 40)]
    pub write_burst: u32,
    /// A kubeconfig a Target may name that is trusted to run its credential
    /// plugin (`exec`, `auth-provider`) and read the files it refers to
    /// (repeatable). KUBECONFIG's entries and ~/.kube/config are always
    /// trusted; any other kubeconfig a spec names must embed its credentials.
    #[arg(long, value_name = "PATH")]
    pub trust_kubeconfig: Vec<std::path::PathBuf>,
    /// Declare that nothing runs in the clusters whose Pods slicectl does
    /// not read (a cluster deferred behind a loopback --api-endpoint with no
    /// Google token: a simulator with no cluster linked), so their slice
    /// replicas count as idle. Without it such a replica is busy-unknown and
    /// every step that would destroy its capacity is held (`busy_unknown`).
    /// An explicit override, as --sim is: never set it where jobs may run.
    #[arg(long, env = "SLICECTL_UNREAD_CLUSTERS_IDLE")]
    pub unread_clusters_idle: bool,
    /// Start the GCP simulator in-process and target it: nothing real is
    /// touched (no real Google API, and no Kubernetes API at all: the
    /// Kubernetes side of every Target is deferred, gce Targets' joins and
    /// gke Targets' Nodes, so readiness is unknown).
    #[arg(long)]
    pub sim: bool,
    /// Simulator behaviour (with --sim).
    #[command(flatten)]
    pub sim_args: SimArgs,
}

/// Simulator behaviour.
#[derive(Debug, Clone, Args)]
pub struct SimArgs {
    /// Time a simulated long-running operation takes.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub sim_latency: std::time::Duration,
    /// Seed of the simulator's fault injection.
    #[arg(long, default_value_t = 0)]
    pub sim_seed: u64,
    /// Fraction of requests answered 429.
    #[arg(long, default_value_t = 0.0)]
    pub sim_fault_429: f64,
    /// Fraction of requests answered 503.
    #[arg(long, default_value_t = 0.0)]
    pub sim_fault_503: f64,
    /// Fraction of node pool creates that end in a stockout.
    #[arg(long, default_value_t = 0.0)]
    pub sim_stockout_rate: f64,
    /// How a stocked-out create ends: ERROR (the operation fails, the pool
    /// is left in ERROR) or RUNNING_WITH_ERROR (the operation ends DONE with
    /// the GCE_STOCKOUT condition and the pool stays RUNNING_WITH_ERROR while
    /// GKE keeps retrying).
    #[arg(long, value_name = "STATUS", default_value = "ERROR", value_parser = ["ERROR", "RUNNING_WITH_ERROR"])]
    pub sim_stockout_status: String,
    /// Size (VMs) of a specific reservation, as NAME=SIZE (a reservation the
    /// specs name) or projects/P/zones/Z/reservations/NAME=SIZE; repeatable.
    /// With --sim, every reservation the specs name exists, sized to what
    /// their slices need, unless set here.
    #[arg(long, value_name = "NAME=SIZE")]
    pub sim_reservation: Vec<String>,
    /// Concurrent operations GKE allows per cluster (past it: 429 "Too many
    /// operations").
    #[arg(long, value_name = "N", default_value_t = slicectl_sim::DEFAULT_OPERATION_QUOTA)]
    pub sim_operation_quota: u32,
    /// Switch off GKE's concurrency rules (one operation per node pool, a
    /// cluster-level operation excludes the rest, the per-cluster quota).
    #[arg(long)]
    pub sim_no_concurrency_rules: bool,
    /// A regional TPU quota, in chips, as REGION/METRIC=LIMIT (e.g.
    /// us-central1/TPU_V5P=64, us-central1/TPUS_PER_TPU_FAMILY/CT6E=64 for
    /// v6e on demand); repeatable. Usage follows the simulated
    /// node pools and VMs; a node pool create past it gets GKE's 403
    /// (docs/preflight.md). Unset metrics are unlimited.
    #[arg(long, value_name = "REGION/METRIC=LIMIT")]
    pub sim_quota: Vec<String>,
    /// A discovery method the simulated caller lacks the permission for
    /// (e.g. compute.regions.get, cloudquotas.quotas.get): answered 403;
    /// repeatable.
    #[arg(long, value_name = "METHOD")]
    pub sim_deny: Vec<String>,
}

/// Default of `--max-destroy`.
pub const DEFAULT_MAX_DESTROY: usize = 10;

/// Safety rails of planning.
#[derive(Debug, Clone, Copy, Args)]
pub struct Safety {
    /// Maximum resources (of every kind) destroyed or replaced by one apply
    /// [default: 10]. Not accepted with a saved plan file, which carries its own.
    #[arg(long, value_name = "N")]
    pub max_destroy: Option<usize>,
    /// Allow pruning every slice when the specs define none, or none left
    /// for a Target (empty_target), or whose Target was removed with its
    /// Slices (target_removed, and the deletes refused as other_source).
    #[arg(long)]
    pub allow_empty_source: bool,
    /// Allow deleting a self-managed slice gone from the specs whose
    /// protection cannot be read (refusal `protection_unknown`: its MIG
    /// carries no stamp and some of its running VMs have no Node).
    #[arg(long)]
    pub allow_unverified_delete: bool,
}

/// Timing of `reconcile --watch`.
#[derive(Debug, Clone, Copy, Args)]
pub struct WatchArgs {
    /// Wait this long after a change for more before running a cycle (with --watch).
    #[arg(long, default_value = "200ms", value_parser = parse_duration, requires = "watch")]
    pub debounce: std::time::Duration,
    /// Run a cycle when this long passed without one (with --watch).
    #[arg(long, default_value = "10m", value_parser = parse_duration, requires = "watch")]
    pub resync: std::time::Duration,
    /// After Ctrl-C or SIGTERM, how long the in-flight cycle may go on before
    /// it is abandoned (a second signal abandons it at once).
    #[arg(long, default_value = "60s", value_parser = parse_duration, requires = "watch")]
    pub grace: std::time::Duration,
    /// Deletes and replacements wait until DIR's files have been unchanged
    /// this long, so a half-written file never destroys anything (creates
    /// and updates do not wait; not needed with --git-ref, which reads
    /// whole commits). Must be more than 0.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = parse_settle, requires = "watch")]
    pub settle: std::time::Duration,
}

/// Settings of `slicectl controller`.
#[derive(Debug, Clone, Args)]
pub struct ControllerArgs {
    /// Read the specs from this ConfigMap in --namespace, through an API
    /// watch (its data keys are file names) [default: slicectl-specs].
    #[arg(long, value_name = "NAME", conflicts_with = "dir")]
    pub configmap: Option<String>,
    /// Read the specs from every ConfigMap in --namespace that this label
    /// selector matches (`team-specs=true`, say), as one fleet, through an
    /// API watch: each key a file, shown as CONFIGMAP/KEY. None matching
    /// plans and prunes nothing; deletes and replacements wait for the set
    /// to settle (--settle). Needs list and watch on ConfigMaps.
    #[arg(long, value_name = "SELECTOR", conflicts_with_all = ["dir", "configmap"], value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub configmap_selector: Option<String>,
    /// Read the specs from this mounted directory instead (watched; a
    /// mounted ConfigMap's `..data` swap is handled).
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// With --dir in a git work tree (a git-sync volume, say): read the
    /// specs as committed at this revision instead of the working files,
    /// and run a cycle when it moves (no settle period: a commit is never
    /// half written).
    #[arg(long, value_name = "REF", requires = "dir", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub git_ref: Option<String>,
    /// Namespace of the ConfigMap, the Lease and the status objects
    /// [default: $POD_NAMESPACE, else slicectl].
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Name of the leader-election Lease.
    #[arg(long, value_name = "NAME", default_value = "slicectl")]
    pub lease_name: String,
    /// Split the fleet by Target into N shards, one Lease each
    /// (`<lease-name>-<k>`), shared fairly by the live replicas
    /// (docs/controller.md, "Sharding"). 1: one leader does all.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: u32,
    /// Make the status objects owned by this Deployment in --namespace (the
    /// controller's own; read once at start, `get` on it is needed), so
    /// deleting the Deployment garbage-collects them. Without it the objects
    /// have no owner reference.
    #[arg(long, value_name = "NAME", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub owner_deployment: Option<String>,
    /// How long a leader's Lease lasts without renewal: a standby takes over
    /// within it after the leader dies.
    #[arg(long, value_name = "DUR", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: std::time::Duration,
    /// Serve /healthz, /readyz and /metrics here.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Run a cycle when this long passed without one.
    #[arg(long, value_name = "DUR", default_value = "10m", value_parser = parse_duration)]
    pub resync: std::time::Duration,
    /// A slice whose capacity has been unavailable this long is Stalled
    /// (reason CapacityUnavailable) rather than Reconciling.
    #[arg(long, value_name = "DUR", default_value = "30m", value_parser = parse_duration)]
    pub stall_after: std::time::Duration,
    /// How long a stockout or full reservation is remembered for its
    /// (project, zone, machine type, capacity type).
    #[arg(long, value_name = "DUR", default_value = "3m", value_parser = parse_duration)]
    pub capacity_cache_ttl: std::time::Duration,
    /// First backoff of a slice that met unavailable capacity (doubles on
    /// each further failure).
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = parse_duration)]
    pub capacity_backoff: std::time::Duration,
    /// Longest backoff of a slice that met unavailable capacity.
    #[arg(long, value_name = "DUR", default_value = "10m", value_parser = parse_duration)]
    pub capacity_backoff_max: std::time::Duration,
    /// Debounce of the directory watcher (with --dir).
    #[arg(long, value_name = "DUR", default_value = "200ms", value_parser = parse_duration)]
    pub debounce: std::time::Duration,
    /// With --dir or --configmap-selector: deletes and replacements wait until
    /// the directory's files (the selected ConfigMaps) have been unchanged
    /// this long, so a half-written source never destroys anything (creates
    /// and updates do not wait). Must be more than 0.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = parse_settle)]
    pub settle: std::time::Duration,
    /// After SIGTERM, how long the in-flight cycle may go on before it is
    /// abandoned.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = parse_duration)]
    pub grace: std::time::Duration,
}

/// Execution settings of `reconcile` (which never asks for confirmation).
#[derive(Debug, Clone, Copy, Args)]
pub struct ReconcileExec {
    /// Maximum requests being sent at once (as `apply --parallelism`).
    #[arg(long, default_value_t = 16)]
    pub parallelism: usize,
    /// Maximum replacements in flight.
    #[arg(long, default_value_t = 2)]
    pub max_replacements: usize,
}

impl From<ReconcileExec> for Exec {
    fn from(e: ReconcileExec) -> Exec {
        Exec {
            auto_approve: true,
            parallelism: e.parallelism,
            max_replacements: e.max_replacements,
        }
    }
}

/// Execution settings.
#[derive(Debug, Clone, Copy, Args)]
pub struct Exec {
    /// Do not ask for confirmation.
    #[arg(long)]
    pub auto_approve: bool,
    /// Maximum requests being sent at once. Operations in flight are not
    /// limited by it: a running operation holds no worker, and writes are
    /// paced by the cloud's own limits (GKE's per-cluster operations quota,
    /// learned from its first 429, and --write-rate).
    #[arg(long, default_value_t = 16)]
    pub parallelism: usize,
    /// Maximum replacements in flight.
    #[arg(long, default_value_t = 2)]
    pub max_replacements: usize,
}

/// A settle period: a duration, never 0 (working files can always be read
/// half written; a commit needs no settle: `--git-ref`).
fn parse_settle(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(
            "the settle period cannot be 0: without it a half-written spec file can delete or replace slices. \
             To act on changes at once, reconcile committed revisions with --git-ref (a commit is never half written), \
             or give a short period such as 1s"
                .to_string(),
        );
    }
    Ok(d)
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("invalid duration {s:?}: {e} (e.g. 500ms, 2s, 1m)"))?;
    std::time::Duration::try_from(d).map_err(|e| format!("invalid duration {s:?}: {e}"))
}
