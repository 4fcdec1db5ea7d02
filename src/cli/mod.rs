//! The `slicectl` command line: parses arguments, wires the core to the shell
//! and maps outcomes to exit codes (0 ok, 1 error, 2 changes with
//! `plan --detailed-exitcode`).

mod adopt;
pub mod args;
mod controller;
mod cycle;
mod generate;
pub(crate) mod planfile;
mod watch;

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Parser;

use crate::apply::progress::{InFlight, Stoppable};
use crate::apply::{ApplyOptions, PlainProgress, Progress, TerminalProgress};
use crate::cloud::{ClientOptions, Cloud, CloudClient};
use crate::engine::{self, Approval, Outcome, ReconcileError, ReconcileOptions};
use crate::plan::{Plan, PlanMode, PlanOptions, human};
use crate::source::{self, LoadError};
use crate::spec::{Fleet, ShownPath};
use crate::status;
use args::{Cli, Command, Connection, Exec, LogFormat, Output, Safety, SimArgs};
use slicectl_sim::{FaultConfig, SimConfig, SimHandle, Simulator, StockoutStatus};

/// Exit code: success / no changes.
pub const EXIT_OK: u8 = 0;
/// Exit code: error.
pub const EXIT_ERROR: u8 = 1;
/// Exit code: changes present (`plan --detailed-exitcode`).
pub const EXIT_CHANGES: u8 = 2;

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // `reconcile` logs a line per cycle at info (target `slicectl::watch`)
    // unless the filter says otherwise about that target.
    let log = if matches!(
        cli.command,
        Command::Reconcile { .. } | Command::Controller { .. }
    ) && !cli.log.contains(crate::watch::LOG_TARGET)
    {
        format!("{},{}=info", cli.log, crate::watch::LOG_TARGET)
    } else {
        cli.log.clone()
    };
    init_logging(&log, cli.log_format);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let code = match rt.block_on(run(cli.command)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {}", crate::error::chain_anyhow(&e));
            ExitCode::from(EXIT_ERROR)
        }
    };
    // Everything of the run was awaited by now. Dropping a runtime waits
    // without end for its blocking threads (a DNS lookup, a file read stuck
    // on a hung mount): bounded, so that a stopped controller exits within
    // its pod's termination grace period.
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    code
}

fn init_logging(filter: &str, format: LogFormat) {
    // The simulator's VMs discover their cluster's CA the way kubeadm does:
    // over TLS they cannot verify yet, pinned by the CA hash. kube-rs warns
    // about every such request; that is noise unless asked for.
    let filter = if filter.contains("kube_client") {
        filter.to_string()
    } else {
        format!("{filter},kube_client::client::tls=error")
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colour codes only on a terminal, and never with NO_COLOR set
    // (no-color.org): a container's or a CI job's log is a file.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

async fn run(cmd: Command) -> Result<u8> {
    match cmd {
        Command::Validate { dir } => validate(&dir),
        Command::Schema => {
            print!("{}", crate::spec::schema::json_schema_string());
            Ok(EXIT_OK)
        }
        Command::Completions { shell } => {
            generate::completions(shell, &mut std::io::stdout().lock())?;
            Ok(EXIT_OK)
        }
        Command::Man { dir } => {
            match dir {
                Some(dir) => generate::man_pages(&dir)?,
                None => generate::man_page(&mut std::io::stdout().lock())?,
            }
            Ok(EXIT_OK)
        }
        Command::Crd => {
            let yaml = crate::status_object::crd_yaml()
                .map_err(|e| anyhow::anyhow!("cannot render the SliceStatus CRD as YAML: {e}"))?;
            print!("{yaml}");
            Ok(EXIT_OK)
        }
        Command::Sim {
            listen,
            clusters,
            link_gke,
            kubemark,
            link_max_nodes_per_pool,
            sim,
        } => {
            let links = sim_links(&link_gke, kubemark, link_max_nodes_per_pool)?;
            slicectl_sim::serve_forever_linked(sim_config(clusters, &sim, None)?, listen, links)
                .await?;
            Ok(EXIT_OK)
        }
        Command::Plan {
            dir,
            conn,
            safety,
            output,
            detailed_exitcode,
            out,
        } => {
            let Some(Loaded { fleet, files }) = load_observable(&dir)? else {
                return Ok(EXIT_ERROR);
            };
            // The spec files' text goes into a saved plan only: dropped before
            // observing otherwise (2.5 MB of a 10,000-slice plan's peak).
            let files = if out.is_some() {
                files
            } else {
                drop(files);
                Vec::new()
            };
            let fleet = &fleet;
            let session = Session::connect(&conn, fleet).await?;
            let opts = plan_options(&safety);
            let planned =
                engine::observe_and_plan(fleet, &session.cloud, PlanMode::Apply, &opts).await;
            let plan = match planned {
                Ok((_, p)) => p,
                Err(e) => {
                    session.close().await;
                    return Err(e.into());
                }
            };
            match output {
                Output::Human => print!("{}", human::render(&plan, color_stdout())),
                Output::Json => println!("{}", serde_json::to_string_pretty(&plan.to_json())?),
            }
            if let Some(path) = out {
                planfile::save(
                    &path,
                    &plan,
                    &files,
                    planfile::SavedOptions {
                        max_destroy: opts.max_destroy,
                        allow_empty_source: opts.allow_empty_source,
                        allow_unverified_delete: opts.allow_unverified_delete,
                    },
                )?;
                eprintln!(
                    "Saved the plan to {}. Apply exactly it with: slicectl apply {}",
                    path.display(),
                    path.display()
                );
            }
            session.close().await;
            let unobserved = report_unobserved(&plan);
            if !plan.refused.is_empty() {
                report_refusals(&plan);
                return Ok(EXIT_ERROR);
            }
            if unobserved {
                return Ok(EXIT_ERROR);
            }
            let pending = plan.summary.has_changes() || plan.summary.held > 0;
            Ok(if detailed_exitcode && pending {
                EXIT_CHANGES
            } else {
                EXIT_OK
            })
        }
        Command::Apply {
            path,
            conn,
            safety,
            exec,
        } => {
            // Anything that exists and is not a directory is a plan file
            // (read as a bounded regular file: a FIFO or a device is refused).
            if path.exists() && !path.is_dir() {
                if safety.max_destroy.is_some()
                    || safety.allow_empty_source
                    || safety.allow_unverified_delete
                {
                    bail!(
                        "--max-destroy, --allow-empty-source and --allow-unverified-delete cannot be used with a saved plan: \
                         {} was made with its own safety options, and applying it checks them again. \
                         Make a new plan with the options you want: `slicectl plan DIR --out FILE ...`",
                        path.display()
                    );
                }
                apply_saved(&path, &conn, &exec).await
            } else {
                let Some(loaded) = load_observable(&path)? else {
                    return Ok(EXIT_ERROR);
                };
                reconcile(
                    &loaded.fleet,
                    &conn,
                    PlanMode::Apply,
                    plan_options(&safety),
                    &exec,
                )
                .await
            }
        }
        Command::Reconcile {
            dir,
            watch,
            git_ref,
            watch_args,
            conn,
            safety,
            exec,
        } => {
            watch::run(
                dir,
                git_ref,
                watch.then_some(watch_args),
                conn,
                safety,
                exec.into(),
            )
            .await
        }
        Command::Controller {
            ctl,
            conn,
            safety,
            exec,
        } => controller::run(*ctl, conn, safety, exec.into()).await,
        Command::Destroy {
            dir,
            conn,
            max_destroy,
            allow_unverified_delete,
            disrupt,
            exec,
        } => {
            let Some(loaded) = load_observable(&dir)? else {
                return Ok(EXIT_ERROR);
            };
            let opts = PlanOptions {
                max_destroy,
                allow_empty_source: true,
                allow_unverified_delete,
                disrupt,
            };
            reconcile(&loaded.fleet, &conn, PlanMode::Destroy, opts, &exec).await
        }
        Command::Adopt {
            dir,
            target,
            names,
            selector,
            all: _,
            out,
            force,
            out_outside_source,
            plan_out,
            conn,
            exec,
        } => {
            let args = adopt::AdoptArgs {
                dir,
                target,
                selection: adopt::selection(names, selector)?,
                out,
                force,
                out_outside_source,
                plan_out,
            };
            adopt::adopt(args, &conn, &exec).await
        }
        Command::Release {
            dir,
            slices,
            plan_out,
            conn,
            exec,
        } => adopt::release(&dir, slices, plan_out.as_deref(), &conn, &exec).await,
        Command::Status { dir, conn, output } => {
            let Some(loaded) = load_observable(&dir)? else {
                return Ok(EXIT_ERROR);
            };
            let fleet = &loaded.fleet;
            let session = Session::connect(&conn, fleet).await?;
            let rows = engine::status(fleet, &session.cloud).await;
            session.close().await;
            match output {
                Output::Human => print!("{}", status::table(&rows)),
                Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
            }
            // A slice whose Target could not be observed is not known.
            let unseen = rows
                .iter()
                .filter(|r| r.state == status::NOT_OBSERVED)
                .count();
            if unseen > 0 {
                eprintln!(
                    "error: {unseen} slice replica(s) could not be observed (NOT OBSERVED above, with the cause)"
                );
                return Ok(EXIT_ERROR);
            }
            Ok(EXIT_OK)
        }
    }
}

/// `apply DIR` and `destroy DIR`: one reconciliation, printed.
async fn reconcile(
    fleet: &Fleet,
    conn: &Connection,
    mode: PlanMode,
    opts: PlanOptions,
    exec: &Exec,
) -> Result<u8> {
    let verb = match mode {
        PlanMode::Apply => "apply",
        PlanMode::Destroy => "destroy",
    };
    let session = Session::connect(conn, fleet).await?;
    let r = reconcile_in(&session, fleet, mode, opts, exec, verb, &|_| {}, &|_, _| {}).await;
    session.close().await;
    r
}

/// One reconciliation in `session`, printed: the plan, the confirmation
/// (or `--auto-approve`), the world observed again after `yes`, the apply
/// and its report. `prepare` and `edit` shape it for `adopt` and `release`
/// ([`engine::reconcile_shaped`]).
#[allow(clippy::too_many_arguments)]
async fn reconcile_in(
    session: &Session,
    fleet: &Fleet,
    mode: PlanMode,
    opts: PlanOptions,
    exec: &Exec,
    verb: &'static str,
    prepare: &dyn Fn(&mut crate::plan::Inventory),
    edit: &dyn Fn(&crate::plan::Inventory, &mut Plan),
) -> Result<u8> {
    let ropts = ReconcileOptions {
        mode,
        plan: opts,
        apply: apply_options(exec),
    };
    let mut prompt_error = None;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = Arc::new(Stoppable::new(progress(), stop.clone()));
    let in_flight = progress.in_flight();
    let approve = |plan: &Plan| {
        print!("{}", human::render(plan, color_stdout()));
        let approval = if exec.auto_approve {
            Approval::Auto
        } else {
            match confirm(verb) {
                Ok(true) => Approval::Confirmed,
                Ok(false) => Approval::Declined,
                Err(e) => {
                    prompt_error = Some(e);
                    Approval::Declined
                }
            }
        };
        if approval != Approval::Declined {
            interrupt_gracefully(verb, stop.clone(), in_flight.clone());
        }
        approval
    };
    let result = engine::reconcile_shaped(
        fleet,
        &session.cloud,
        &ropts,
        prepare,
        edit,
        approve,
        progress,
    )
    .await;
    if let Some(e) = prompt_error {
        return Err(e);
    }
    let report = match result {
        Ok(r) => r,
        Err(ReconcileError::Stale { now }) => {
            println!(
                "\nThe live state changed while waiting for confirmation; nothing was changed. The plan now is:\n"
            );
            print!("{}", human::render(&now, color_stdout()));
            bail!(
                "refusing to {verb}: the confirmed plan no longer matches the live state. Review the plan above and run `slicectl {verb}` again"
            );
        }
        Err(e) => return Err(e.into()),
    };
    Ok(print_report(&report, fleet, verb))
}

/// From here on (the plan is approved and about to be applied), Ctrl-C or
/// SIGTERM stops gracefully, as Terraform does: the first starts no new
/// step and lets the steps in flight finish (the run then reports the rest
/// as not run); a second exits at once with 130. Either way the next run
/// observes the live state, operations in flight included, and continues.
/// The second names what it abandons ([`InFlight::abandoned`]): the steps in
/// flight, and each replica whose replacement's delete was sent and whose
/// create will not run. Before approval the signals keep their default (the
/// process ends; nothing was sent).
fn interrupt_gracefully(
    verb: &'static str,
    stop: Arc<std::sync::atomic::AtomicBool>,
    in_flight: Arc<InFlight>,
) {
    let (mut signals, _) = match crate::watch::forward_signals() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGINT and SIGTERM; a signal ends the {verb} at once");
            return;
        }
    };
    tokio::spawn(async move {
        if signals.recv().await.is_none() {
            return;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        eprintln!(
            "\nInterrupt received: no new step starts, and the steps in flight finish (their operations are waited on; a replacement whose old resource is being deleted still creates its new one, so no replica is left without capacity; a drain ends before its next eviction, its Nodes kept cordoned for the next run, and its delete does not start). Interrupt again to stop at once: operations already sent go on in the cloud, and the next `slicectl {verb}` continues from the live state."
        );
        if signals.recv().await.is_some() {
            eprintln!(
                "{}",
                second_interrupt_message(verb, &in_flight.abandoned(verb))
            );
            std::process::exit(130);
        }
    });
}

/// What a second interrupt says: that it stops now, what it leaves (a line
/// each, from [`InFlight::abandoned`]), and how to continue.
fn second_interrupt_message(verb: &str, abandoned: &[String]) -> String {
    let mut m = String::from("Second interrupt: stopping now.");
    if abandoned.is_empty() {
        m.push_str(" No step was in flight.");
    } else {
        m.push_str(" Left as it is:");
        for line in abandoned {
            m.push_str("\n  ");
            m.push_str(line);
        }
    }
    m.push_str(&format!(
        "\nRun `slicectl {verb}` again to continue: it waits on the operations still running and does the rest."
    ));
    m
}

/// Prints a reconciliation's outcome; returns the exit code.
fn print_report(report: &engine::Report, fleet: &Fleet, verb: &str) -> u8 {
    match report.outcome {
        Outcome::NoChanges => {
            print!("{}", human::render(&report.plan, color_stdout()));
        }
        Outcome::Declined => {
            println!("{verb} cancelled.");
            return EXIT_ERROR;
        }
        Outcome::Applied => {}
    }
    if let Some(a) = &report.apply {
        println!("\n{}", a.summary_with_not_ready(report.not_ready.len()));
        for f in &a.failures {
            println!("  failed [{}]: {}: {}", f.code, f.address, f.message);
        }
        for addr in &a.skipped {
            println!("  skipped (a step it depends on failed): {addr}");
        }
        for (addr, why) in &a.not_run {
            println!("  not run: {addr}: {why}");
        }
        for addr in &a.already_gone {
            println!("  already gone (nothing to destroy): {addr}");
        }
        for r in &report.plan.refused {
            let what = if r.code == crate::plan::SETTLING {
                "held"
            } else {
                "refused"
            };
            println!("  {what}: {}", r.message);
        }
    }
    if !report.not_ready.is_empty() {
        println!(
            "\n{} slice replica(s) will not become ready as they stand:",
            report.not_ready.len()
        );
        for n in &report.not_ready {
            println!("  not ready [{}]: {}: {}", n.code, n.address, n.message);
        }
    }
    for h in &report.plan.held {
        println!("  held [{}]: {}: {}", h.code, h.address, h.message);
    }
    if !fleet.slices.is_empty() {
        println!();
        print!("{}", status::table(&report.status));
    }
    if !report.not_ready.is_empty() {
        println!(
            "The cloud keeps retrying: run `slicectl apply` again (or `slicectl status`) to see whether capacity came; \
             move the slice to a zone with capacity, or another capacity type, to get it elsewhere."
        );
        return EXIT_ERROR;
    }
    if report.apply.as_ref().is_some_and(|a| !a.success()) {
        println!(
            "Run `slicectl {verb}` again to retry: it observes what is live and continues from there."
        );
        return EXIT_ERROR;
    }
    let unobserved = report_unobserved(&report.plan);
    if !report.plan.refused.is_empty() {
        report_refusals(&report.plan);
        return EXIT_ERROR;
    }
    if unobserved {
        return EXIT_ERROR;
    }
    EXIT_OK
}

/// Prints each Target (and project) that could not be observed on stderr,
/// and whether there was any: the run then exits 1, whatever else converged.
fn report_unobserved(plan: &Plan) -> bool {
    for u in &plan.unobserved {
        eprintln!(
            "not observed: target {} [{}] ({}): {}; its {} slice(s) got no action",
            u.target,
            u.why.code,
            u.scope,
            u.why.cause,
            u.slices.len()
        );
    }
    for u in &plan.undiscovered {
        eprintln!(
            "not observed: left-behind {} resources in project {} [{}]: {}; nothing there was pruned",
            u.backend, u.project, u.why.code, u.why.cause
        );
    }
    if !plan.left_unobserved() {
        return false;
    }
    eprintln!(
        "error: {} target(s) could not be observed and were left alone{}; every other Target was planned as usual",
        plan.unobserved.len(),
        if plan.undiscovered.is_empty() {
            String::new()
        } else {
            format!(
                ", and left-behind discovery failed in {} project(s)",
                plan.undiscovered.len()
            )
        }
    );
    true
}

fn apply_options(exec: &Exec) -> ApplyOptions {
    ApplyOptions {
        parallelism: exec.parallelism,
        max_replacements: exec.max_replacements,
    }
}

fn progress() -> Arc<dyn Progress> {
    if std::io::stderr().is_terminal() {
        Arc::new(TerminalProgress::new())
    } else {
        Arc::new(PlainProgress::new())
    }
}

/// Options of a converging cycle of `reconcile --watch` and `controller`:
/// `apply --auto-approve` with the command's rails and limits.
fn converge_options(safety: &Safety, exec: &Exec) -> ReconcileOptions {
    ReconcileOptions {
        mode: PlanMode::Apply,
        plan: plan_options(safety),
        apply: apply_options(exec),
    }
}

fn plan_options(s: &Safety) -> PlanOptions {
    PlanOptions {
        max_destroy: s.max_destroy.unwrap_or(args::DEFAULT_MAX_DESTROY),
        allow_empty_source: s.allow_empty_source,
        allow_unverified_delete: s.allow_unverified_delete,
        disrupt: false,
    }
}

/// Prints each refusal on stderr (the plan text shows them too). Steps
/// held until the specs settle (watch mode) are not a rail's refusal: they
/// are said apart, as a note.
fn report_refusals(plan: &Plan) {
    let (held, refused): (Vec<_>, Vec<_>) = plan
        .refused
        .iter()
        .partition(|r| r.code == crate::plan::SETTLING);
    for r in &held {
        eprintln!("held: {}", r.message);
    }
    if !held.is_empty() {
        eprintln!(
            "note: {} step(s) that destroy capacity wait until the specs settle; they are planned again when the settle period is over",
            held.len()
        );
    }
    for r in &refused {
        eprintln!("refused: {}", r.message);
    }
    if !refused.is_empty() {
        eprintln!(
            "error: {} change(s) refused by a safety rail; everything else was planned normally",
            refused.len()
        );
    }
}

fn color_stdout() -> bool {
    anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never
}

/// Prints located problems on stderr, capped ([`crate::spec::report_lines`]).
fn print_diagnostics(diagnostics: &[crate::spec::Diagnostic]) {
    for line in crate::spec::report_lines(diagnostics) {
        eprintln!("{line}");
    }
}

/// Prints each entry of a spec source that was not read, and why (a
/// near-miss such as `x.yaml.bak` may be a spec the user meant to apply).
fn report_skipped(skipped: &[source::Skipped]) {
    for s in skipped {
        eprintln!("warning: {s}");
    }
}

/// A validated fleet and the spec files it was read from.
struct Loaded {
    fleet: Fleet,
    files: Vec<crate::spec::SourceFile>,
}

/// Loads and validates the spec directory; prints diagnostics and returns
/// `None` when it is invalid.
fn load(dir: &Path) -> Result<Option<Loaded>> {
    load_at(dir, None)
}

/// [`load`], from the revision `git_ref` of DIR when given
/// ([`source::git`]).
fn load_at(dir: &Path, git_ref: Option<&str>) -> Result<Option<Loaded>> {
    let listing = match git_ref {
        None => source::list_dir(dir),
        Some(r) => source::git::read(&source::git::GitRef {
            dir: dir.to_path_buf(),
            reference: r.to_string(),
        })
        .map(|rev| {
            eprintln!(
                "reading the specs under {} as committed at {r} (commit {})",
                ShownPath(dir),
                rev.commit
            );
            rev.listing
        }),
    }
    .map_err(anyhow::Error::new)
    .with_context(|| format!("cannot read the specs under {}", ShownPath(dir)))?;
    report_skipped(&listing.skipped);
    let files = listing.files;
    match crate::spec::load(&files).map_err(LoadError::Invalid) {
        Ok(fleet) => {
            if fleet.files == 0 {
                eprintln!(
                    "warning: no spec files (*.yaml, *.yml) under {}; nothing is desired, and nothing will be pruned without --allow-empty-source",
                    ShownPath(dir)
                );
            }
            Ok(Some(Loaded { fleet, files }))
        }
        Err(LoadError::Invalid(diags)) => {
            print_diagnostics(&diags);
            eprintln!(
                "error: {} problem(s) in the specs under {}; nothing was planned or changed",
                diags.len(),
                ShownPath(dir)
            );
            Ok(None)
        }
        Err(e) => Err(anyhow::Error::new(e))
            .with_context(|| format!("cannot read the specs under {}", ShownPath(dir))),
    }
}

/// [`load`] for a command that observes the cloud (`plan`, `apply`,
/// `status`, `destroy`, one `reconcile`): specs that name no Target give it
/// nowhere to look, so it says so and fails instead of reporting "no
/// changes" about a live state it never saw (a CI drift check on a wrong
/// path would read that as "in sync").
fn load_observable(dir: &Path) -> Result<Option<Loaded>> {
    load_observable_at(dir, None)
}

/// [`load_observable`], from the revision `git_ref` of DIR when given.
fn load_observable_at(dir: &Path, git_ref: Option<&str>) -> Result<Option<Loaded>> {
    let Some(loaded) = load_at(dir, git_ref)? else {
        return Ok(None);
    };
    if loaded.fleet.targets.is_empty() {
        eprintln!(
            "error: the specs under {} define no Target, so slicectl has nowhere to look: nothing was observed, \
             and nothing can be said about the live slices (an empty or wrong checkout path looks like this). \
             A Target names the project, zone and cluster to observe; check the path",
            dir.display()
        );
        return Ok(None);
    }
    Ok(Some(loaded))
}

fn validate(dir: &Path) -> Result<u8> {
    Ok(match load(dir)?.map(|l| l.fleet) {
        Some(f) => {
            println!(
                "{}: {} file(s), {} target(s), {} slice(s): valid",
                ShownPath(dir),
                f.files,
                f.targets.len(),
                f.slices.len()
            );
            EXIT_OK
        }
        None => EXIT_ERROR,
    })
}

/// `--link-gke CLUSTER=KUBECONFIG` flags as the simulator's links.
fn sim_links(
    flags: &[String],
    kubemark: Option<std::path::PathBuf>,
    max_nodes_per_pool: u32,
) -> Result<Vec<(String, slicectl_sim::link::GkeLink)>> {
    if flags.is_empty() {
        return Ok(Vec::new());
    }
    let Some(kubemark) = kubemark else {
        anyhow::bail!(
            "--link-gke needs the kubemark binary: pass --kubemark PATH or set SLICECTL_KUBEMARK (scripts/k8s-testbin.sh builds it; `scripts/k8s-testbin.sh dir` prints where)"
        );
    };
    flags
        .iter()
        .map(|f| {
            let Some((cluster, kubeconfig)) = f.split_once('=') else {
                anyhow::bail!(
                    "--link-gke {f:?}: expected projects/P/locations/L/clusters/C=KUBECONFIG"
                );
            };
            let mut link = slicectl_sim::link::GkeLink::new(kubeconfig, kubemark.clone());
            link.max_nodes_per_pool = max_nodes_per_pool;
            Ok((cluster.to_string(), link))
        })
        .collect()
}

fn sim_config(clusters: Vec<String>, s: &SimArgs, fleet: Option<&Fleet>) -> Result<SimConfig> {
    Ok(SimConfig {
        clusters,
        operation_latency: s.sim_latency,
        seed: s.sim_seed,
        faults: FaultConfig {
            rate_429: s.sim_fault_429,
            rate_503: s.sim_fault_503,
            stockout_rate: s.sim_stockout_rate,
            stockout_status: match s.sim_stockout_status.as_str() {
                "RUNNING_WITH_ERROR" => StockoutStatus::RunningWithError,
                _ => StockoutStatus::Error,
            },
            reservations: sim_reservations(fleet, &s.sim_reservation)?,
            concurrency_rules: !s.sim_no_concurrency_rules,
            operation_quota: s.sim_operation_quota,
            quotas: sim_quotas(&s.sim_quota)?,
            denied_methods: s.sim_deny.clone(),
            ..FaultConfig::default()
        },
    })
}

/// `--sim-quota REGION/METRIC=LIMIT` flags, by `REGION/METRIC` (a family
/// quota's METRIC is `TPUS_PER_TPU_FAMILY/FAMILY`, e.g. `…/CT6E`).
fn sim_quotas(flags: &[String]) -> Result<BTreeMap<String, u64>> {
    flags
        .iter()
        .map(|flag| {
            let parsed = flag.rsplit_once('=').and_then(|(key, limit)| {
                let (region, metric) = key.split_once('/')?;
                let family = metric.strip_prefix("TPUS_PER_TPU_FAMILY/");
                let ok = !region.is_empty()
                    && !metric.is_empty()
                    && family.map_or(!metric.contains('/'), |f| !f.is_empty() && !f.contains('/'));
                ok.then(|| (key.to_string(), limit.parse::<u64>().ok()))
            });
            match parsed {
                Some((key, Some(limit))) => Ok((key, limit)),
                _ => anyhow::bail!(
                    "--sim-quota {flag:?}: expected REGION/METRIC=LIMIT with LIMIT a whole number of chips, \
                     e.g. us-central1/TPU_V5P=64 or us-central1/TPUS_PER_TPU_FAMILY/CT6E=64"
                ),
            }
        })
        .collect()
}

/// The specific reservations the simulator knows: with a fleet (`--sim`),
/// every reservation its slices consume, at
/// `projects/P/zones/Z/reservations/NAME` (P the reservation's project or
/// the target's, Z the target's zone), sized to what those slices need
/// (hosts × replicas); then the `--sim-reservation NAME=SIZE` sizes, a bare
/// NAME applying to every reservation of that name the specs consume.
fn sim_reservations(fleet: Option<&Fleet>, flags: &[String]) -> Result<BTreeMap<String, u32>> {
    let mut out: BTreeMap<String, u32> = BTreeMap::new();
    for s in fleet.map(|f| f.slices.values()).into_iter().flatten() {
        let (Some(r), Some(t)) = (
            s.spec.capacity.reservation.as_ref(),
            fleet.and_then(|f| f.target_of(s)),
        ) else {
            continue;
        };
        if s.spec.capacity.kind != crate::spec::model::CapacityType::Reservation {
            continue;
        }
        let project = r.project.as_deref().unwrap_or(&t.spec.project);
        let key = format!(
            "projects/{project}/zones/{}/reservations/{}",
            t.spec.zone, r.name
        );
        *out.entry(key).or_default() += s.shape.hosts * s.spec.replicas;
    }
    for flag in flags {
        let Some((name, size)) = flag.rsplit_once('=') else {
            anyhow::bail!("--sim-reservation {flag:?}: expected NAME=SIZE, e.g. v6e-res=8");
        };
        let size: u32 = size.parse().with_context(|| {
            format!("--sim-reservation {flag:?}: SIZE must be a whole number of VMs")
        })?;
        if name.starts_with("projects/") {
            out.insert(name.to_string(), size);
            continue;
        }
        let suffix = format!("/reservations/{name}");
        let mut matched = false;
        for (key, v) in out.iter_mut() {
            if key.ends_with(&suffix) {
                *v = size;
                matched = true;
            }
        }
        if !matched {
            anyhow::bail!(
                "--sim-reservation {flag:?}: no slice consumes a reservation named {name:?}; \
                 give its full path, projects/P/zones/Z/reservations/{name}={size}"
            );
        }
    }
    Ok(out)
}

/// A cloud client, and the embedded simulator behind it with `--sim`.
struct Session {
    cloud: Cloud,
    sim: Option<SimHandle>,
    client: CloudClient,
    /// `--sim`: no Kubernetes API is reached.
    sealed: bool,
    /// `--unread-clusters-idle`.
    unread_idle: bool,
    /// `--trust-kubeconfig`.
    trusted: Vec<PathBuf>,
    /// `clusters.get` answers, kept across the fleets of this session (a
    /// watch loop's cycles).
    clusters: std::sync::Arc<crate::kube::clients::ClusterAccessCache>,
}

impl Session {
    async fn connect(conn: &Connection, fleet: &Fleet) -> Result<Session> {
        let (endpoint, sim) = if conn.sim {
            let clusters = crate::observe::clusters(fleet);
            let cfg = sim_config(
                clusters.iter().map(|c| c.path()).collect(),
                &conn.sim_args,
                Some(fleet),
            )?;
            let addr = "127.0.0.1:0".parse().context("loopback address")?;
            let handle = Simulator::start(cfg, addr)
                .await
                .context("cannot start the embedded GCP simulator")?;
            eprintln!(
                "{}",
                color_stderr(&format!(
                    "*** SIMULATOR MODE: slicectl is talking to an embedded GCP simulator at {} — nothing real is touched. ***",
                    handle.base_url()
                ))
            );
            (Some(handle.base_url()), Some(handle))
        } else {
            (conn.api_endpoint.clone(), None)
        };
        let client = CloudClient::new(ClientOptions {
            api_endpoint: endpoint,
            // Under --sim no credential is ever looked for (no ADC file, no
            // metadata server, no gcloud), whatever the environment holds.
            token_source: token_source(conn),
            allow_insecure_http: conn.allow_insecure_http,
            write_rate: (conn.write_rate != 0.0).then_some(crate::cloud::WriteRate {
                per_second: conn.write_rate,
                burst: conn.write_burst,
            }),
            ..ClientOptions::default()
        })
        .context("cannot create the Google Cloud client")?;
        if client.credentials_in_clear() {
            eprintln!(
                "{}",
                color_stderr(&format!(
                    "*** WARNING: --allow-insecure-http: the Google access token is sent UNENCRYPTED over plain http to {} ***",
                    client.endpoints().container.trim_end_matches('/')
                ))
            );
        }
        if conn.sim {
            seed_brought_templates(&client, fleet).await?;
        }
        let clusters = std::sync::Arc::default();
        let mut cloud = cloud_for(&client, fleet, conn.sim, &conn.trust_kubeconfig, &clusters);
        cloud.unread_idle = conn.unread_clusters_idle;
        Ok(Session {
            cloud,
            sim,
            client,
            sealed: conn.sim,
            unread_idle: conn.unread_clusters_idle,
            trusted: conn.trust_kubeconfig.clone(),
            clusters,
        })
    }

    /// The cloud for another fleet on the same connection (the targets'
    /// Kubernetes clients are the fleet's).
    fn cloud_for(&self, fleet: &Fleet) -> Cloud {
        let mut cloud = cloud_for(
            &self.client,
            fleet,
            self.sealed,
            &self.trusted,
            &self.clusters,
        );
        cloud.unread_idle = self.unread_idle;
        cloud
    }

    async fn close(self) {
        if let Some(sim) = self.sim {
            sim.shutdown().await;
        }
    }
}

/// Under `--sim`, the instance templates the specs bring
/// (`gce.instanceTemplate`, global ones) are created in the embedded
/// simulator first, as stand-ins, so that such a slice can be tried: the
/// simulator starts empty and outlives no run, so a template cannot be
/// created in it beforehand. Each stand-in is a template Compute Engine's
/// bulk mode takes for the slice's machine type (FLEX_START, DELETE at the
/// end of a 24 h run, TERMINATE on host maintenance), and a banner says
/// so. Never done against Google: there, a missing template fails the
/// slice's MIG step with `missing_template`.
async fn seed_brought_templates(client: &CloudClient, fleet: &Fleet) -> Result<()> {
    use crate::cloud::ComputeService;
    use crate::resource::compute::{
        self, AttachedDisk, AttachedDiskInitializeParams, InstanceProperties, InstanceTemplate,
        NetworkInterface, Scheduling,
    };
    for s in fleet.slices.values() {
        let Some(link) = s
            .spec
            .gce
            .as_ref()
            .and_then(|g| g.instance_template.as_deref())
        else {
            continue;
        };
        let Ok(t) = crate::spec::validate::parse_instance_template(link) else {
            continue;
        };
        if t.region.is_some() {
            continue;
        }
        // Already there (made by an earlier cycle of this run): a read, no
        // write.
        if client.get_instance_template(link).await.is_ok() {
            continue;
        }
        let project = crate::resource::ProjectRef {
            project: t.project.clone(),
        };
        let template = InstanceTemplate {
            name: t.name.clone(),
            description: Some(format!(
                "a stand-in for the template slice {} brings, made by slicectl --sim",
                s.name
            )),
            properties: InstanceProperties {
                machine_type: s.shape.machine_type.to_string(),
                disks: vec![AttachedDisk {
                    boot: Some(true),
                    auto_delete: Some(true),
                    initialize_params: Some(AttachedDiskInitializeParams {
                        source_image: Some(
                            "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-tpu7x"
                                .into(),
                        ),
                        ..AttachedDiskInitializeParams::default()
                    }),
                    ..AttachedDisk::default()
                }],
                network_interfaces: vec![NetworkInterface {
                    network: Some(format!("projects/{}/global/networks/default", t.project)),
                    ..NetworkInterface::default()
                }],
                scheduling: Some(Scheduling {
                    provisioning_model: Some("FLEX_START".into()),
                    instance_termination_action: Some("DELETE".into()),
                    on_host_maintenance: Some("TERMINATE".into()),
                    max_run_duration: Some(compute::Duration {
                        seconds: 24 * 3600,
                        nanos: None,
                    }),
                    ..Scheduling::default()
                }),
                ..InstanceProperties::default()
            },
            ..InstanceTemplate::default()
        };
        match client.insert_instance_template(&project, &template).await {
            Ok(op) => {
                ComputeService::wait_operation(client, &op, std::time::Duration::from_secs(60))
                    .await
                    .with_context(|| {
                        format!("--sim: cannot create a stand-in for instance template {link}")
                    })?;
            }
            Err(e) if e.is_already_exists() => continue,
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!(
                    "--sim: cannot create a stand-in for instance template {link}"
                )));
            }
        }
        eprintln!(
            "{}",
            color_stderr(&format!(
                "*** --sim: slice {} brings instance template {link}, which the simulator starts without: a stand-in \
                 was created there ({}, FLEX_START). Against Google, create your own template first. ***",
                s.name, s.shape.machine_type
            ))
        );
    }
    Ok(())
}

/// The Google token source `conn` asks for: none at all under `--sim` (no
/// ADC file, no metadata server, no gcloud is looked for, whatever the
/// environment holds); the file `--access-token-file` names, read at each
/// use; otherwise `None`, and [`CloudClient::new`] chooses (no credentials
/// for a loopback `--api-endpoint`, Application Default Credentials
/// otherwise).
fn token_source(conn: &Connection) -> Option<std::sync::Arc<dyn crate::cloud::TokenSource>> {
    if conn.sim {
        return Some(std::sync::Arc::new(crate::cloud::auth::NoAuth));
    }
    conn.access_token_file.as_ref().map(|path| {
        tracing::debug!(path = %path.display(), "Google access token from a file");
        std::sync::Arc::new(crate::cloud::AccessTokenFile::new(path)) as _
    })
}

/// The cloud on `client`, with the Kubernetes clients of `fleet`'s targets
/// (GKE clusters' `clusters.get` answers kept in `clusters`); under `--sim`
/// (`sim`), with none: nothing real is reached.
fn cloud_for(
    client: &CloudClient,
    fleet: &Fleet,
    sim: bool,
    trusted: &[PathBuf],
    clusters: &std::sync::Arc<crate::kube::clients::ClusterAccessCache>,
) -> Cloud {
    let cloud = Cloud::from(client.clone());
    if sim {
        return cloud.sealed_for_sim();
    }
    cloud.with_kube(std::sync::Arc::new(
        crate::kube::KubeClients::for_specs(
            fleet.targets.values().filter_map(|t| {
                let g = t.spec.gce.as_ref()?;
                Some((
                    crate::resource::KubeRef {
                        endpoint: g.control_plane_endpoint.clone(),
                    },
                    g.kube_api.clone(),
                    crate::kube::Origin {
                        target: t.name.clone(),
                        location: t.location.clone(),
                    },
                ))
            }),
            crate::kube::TrustedKubeconfigs::from_env(trusted),
        )
        .with_gke(
            fleet.targets.values().filter_map(|t| {
                let g = t.spec.gke.as_ref()?;
                Some((
                    crate::resource::ClusterRef {
                        project: t.spec.project.clone(),
                        location: g.location.clone(),
                        name: g.name.clone(),
                    },
                    g.kube_api.access(),
                    Some(crate::kube::Origin {
                        target: t.name.clone(),
                        location: t.location.clone(),
                    }),
                ))
            }),
            crate::kube::GkeLink {
                service: std::sync::Arc::new(client.clone()),
                tokens: client.token_source(),
                cache: clusters.clone(),
            },
        ),
    ))
}

fn color_stderr(s: &str) -> String {
    if anstream::AutoStream::choice(&std::io::stderr()) == anstream::ColorChoice::Never {
        s.to_string()
    } else {
        let st = anstyle::Style::new()
            .bold()
            .fg_color(Some(anstyle::AnsiColor::Yellow.into()));
        format!("{st}{s}{st:#}")
    }
}

fn confirm(verb: &str) -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        bail!(
            "refusing to {verb} without confirmation: standard input is not a terminal; review the plan and pass --auto-approve"
        );
    }
    print!("\nDo you want to perform these actions? Only 'yes' will be accepted: ");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim() == "yes")
}

async fn apply_saved(path: &Path, conn: &Connection, exec: &Exec) -> Result<u8> {
    let saved = planfile::load(path)?;
    let fleet = match crate::spec::load(&saved.specs) {
        Ok(f) => f,
        Err(diags) => {
            print_diagnostics(&diags);
            bail!(
                "the specs saved in {} are not valid for this slicectl; make the plan again",
                ShownPath(path)
            );
        }
    };
    let session = Session::connect(conn, &fleet).await?;
    let stale = |why: String| {
        anyhow::anyhow!(
            "the live state has changed since {} was saved ({why}); \
             the saved plan may no longer be safe. Run `slicectl plan DIR --out {}` again and review it",
            path.display(),
            path.display()
        )
    };
    // Every guard runs again: the saved specs are planned against a fresh
    // observation (shaped as the saved command shaped it: an adoption or a
    // release), and only a plan identical to the saved one is executed.
    let (prepare, edit) = adopt::shaping(saved.command.as_ref(), &fleet)?;
    let planned = engine::observe_prepared_and_plan(
        &fleet,
        &session.cloud,
        PlanMode::Apply,
        &saved.options.into(),
        &*prepare,
    )
    .await
    .map(|(inv, mut p)| {
        edit(&inv, &mut p);
        p.summary = p.count();
        p
    });
    let fresh = match planned {
        Ok(p) => p,
        Err(e) => {
            session.close().await;
            return Err(e.into());
        }
    };
    if fresh.observed_fingerprint != saved.observed_fingerprint {
        session.close().await;
        return Err(stale(format!(
            "observed fingerprint {} ≠ {}",
            fresh.observed_fingerprint, saved.observed_fingerprint
        )));
    }
    if fresh.effect() != saved.effect {
        session.close().await;
        return Err(stale(
            "planning its specs again now gives a different plan".to_string(),
        ));
    }
    print!("{}", human::render(&fresh, color_stdout()));
    if !fresh.summary.has_changes() {
        session.close().await;
        let report = engine::Report {
            outcome: Outcome::NoChanges,
            status: Vec::new(),
            slices: Vec::new(),
            not_ready: Vec::new(),
            plan: fresh,
            apply: None,
        };
        return Ok(print_report(&report, &Fleet::default(), "apply"));
    }
    if !exec.auto_approve && !confirm("apply")? {
        session.close().await;
        println!("apply cancelled.");
        return Ok(EXIT_ERROR);
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = Arc::new(Stoppable::new(progress(), stop.clone()));
    interrupt_gracefully("apply", stop, progress.in_flight());
    let report = engine::execute(
        &fleet,
        &session.cloud,
        fresh,
        &apply_options(exec),
        progress,
    )
    .await;
    session.close().await;
    Ok(print_report(&report?, &fleet, "apply"))
}

#[cfg(test)]
#[path = "token_file/tests.rs"]
mod token_file_tests;

#[cfg(test)]
#[path = "sim_quota/tests.rs"]
mod sim_quota_tests;
