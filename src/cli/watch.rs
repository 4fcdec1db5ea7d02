//! `slicectl reconcile DIR [--watch]`: one reconciliation, or the same in a
//! loop driven by changes under DIR and a periodic resync ([`crate::watch`]).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::args::{Connection, Exec, Safety, WatchArgs};
use super::cycle::{LoopConnect, TerminalSink, Wording};
use super::{EXIT_ERROR, EXIT_OK, plan_options, reconcile};
use crate::cycle::{CycleState, DirSource, run_cycle};
use crate::plan::PlanMode;
use crate::watch::{self, LOG_TARGET, LoopEnd, LoopOptions, Trigger};

/// `reconcile DIR`: one cycle (`apply --auto-approve`); with `watch`, the
/// loop.
pub(super) async fn run(
    dir: PathBuf,
    watch: Option<WatchArgs>,
    conn: Connection,
    safety: Safety,
    exec: Exec,
) -> Result<u8> {
    let Some(w) = watch else {
        let Some(loaded) = super::load_observable(&dir)? else {
            return Ok(EXIT_ERROR);
        };
        return reconcile(
            &loaded.fleet,
            &conn,
            PlanMode::Apply,
            plan_options(&safety),
            &exec,
        )
        .await;
    };
    let (signals, stop) =
        watch::forward_signals().context("cannot listen for SIGINT and SIGTERM")?;
    let (tx, changes) = tokio::sync::mpsc::unbounded_channel();
    watch::watch_dir(dir.clone(), w.debounce, tx)
        .context("cannot start the directory watcher thread")?;
    tracing::info!(
        target: LOG_TARGET,
        dir = %dir.display(),
        debounce_ms = w.debounce.as_millis(),
        resync_secs = w.resync.as_secs(),
        "watching the spec directory"
    );
    let state = CycleState::new(super::converge_options(&safety, &exec), stop);
    let state = Arc::new(tokio::sync::Mutex::new(Watcher {
        source: DirSource { dir: dir.clone() },
        sink: TerminalSink {
            wording: Wording::Watch(dir),
        },
        connect: LoopConnect::new(conn),
        state,
    }));
    let opts = LoopOptions {
        resync: w.resync,
        grace: w.grace,
    };
    let s = state.clone();
    let end = watch::run(opts, changes, signals, move |trigger| {
        let s = s.clone();
        async move { s.lock().await.cycle(trigger).await }
    })
    .await;
    state.lock().await.connect.close().await;
    Ok(match end {
        LoopEnd::Stopped => {
            tracing::info!(target: LOG_TARGET, "stopped");
            EXIT_OK
        }
        LoopEnd::Abandoned => {
            eprintln!(
                "error: the in-flight cycle was abandoned; operations it started go on in the cloud, and the next run observes them and continues from the live state"
            );
            EXIT_ERROR
        }
    })
}

/// The loop's wiring: the directory, the printer and the connection, and
/// what the library cycle keeps between cycles.
struct Watcher {
    source: DirSource,
    sink: TerminalSink,
    connect: LoopConnect,
    state: CycleState,
}

impl Watcher {
    async fn cycle(&mut self, trigger: Trigger) {
        let Watcher {
            source,
            sink,
            connect,
            state,
        } = self;
        run_cycle(state, source, connect, sink, trigger).await;
    }
}
