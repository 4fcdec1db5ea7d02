//! `slicectl reconcile DIR [--watch] [--git-ref REF]`: one reconciliation,
//! or the same in a loop driven by changes under DIR (or moves of REF) and
//! a periodic resync ([`crate::watch`]). In the loop, steps that destroy
//! capacity wait until DIR's files have settled ([`crate::cycle::settle`]);
//! a commit (`--git-ref`) is atomic and needs no settle.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::args::{Connection, Exec, Safety, WatchArgs};
use super::cycle::{LoopConnect, TerminalSink, Wording};
use super::{EXIT_ERROR, EXIT_OK, plan_options, reconcile};
use crate::cycle::{AnySource, CycleState, DirSource, GitSource, run_cycle};
use crate::plan::PlanMode;
use crate::source::git::GitRef;
use crate::watch::{self, LOG_TARGET, LoopEnd, LoopOptions, Trigger};

/// `reconcile DIR`: one cycle (`apply --auto-approve`); with `watch`, the
/// loop.
pub(super) async fn run(
    dir: PathBuf,
    git_ref: Option<String>,
    watch: Option<WatchArgs>,
    conn: Connection,
    safety: Safety,
    exec: Exec,
) -> Result<u8> {
    let Some(w) = watch else {
        let Some(loaded) = super::load_observable_at(&dir, git_ref.as_deref())? else {
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
    let source = match git_ref {
        Some(reference) => {
            let git = GitRef {
                dir: dir.clone(),
                reference,
            };
            watch::watch_git(git.clone(), watch::GIT_POLL, tx)
                .context("cannot start the revision watcher thread")?;
            tracing::info!(
                target: LOG_TARGET,
                dir = %dir.display(),
                reference = %git.reference,
                poll_ms = watch::GIT_POLL.as_millis(),
                resync_secs = w.resync.as_secs(),
                "watching the revision of the spec directory (its committed files, not its working files)"
            );
            AnySource::Git(GitSource { git })
        }
        None => {
            watch::watch_dir(dir.clone(), w.debounce, tx)
                .context("cannot start the directory watcher thread")?;
            tracing::info!(
                target: LOG_TARGET,
                dir = %dir.display(),
                debounce_ms = w.debounce.as_millis(),
                resync_secs = w.resync.as_secs(),
                settle_secs = w.settle.as_secs_f64(),
                "watching the spec directory"
            );
            AnySource::Dir(DirSource { dir: dir.clone() })
        }
    };
    let state =
        CycleState::new(super::converge_options(&safety, &exec), stop).with_settle(w.settle);
    let state = Arc::new(tokio::sync::Mutex::new(Watcher {
        source,
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
    source: AnySource,
    sink: TerminalSink,
    connect: LoopConnect,
    state: CycleState,
}

impl Watcher {
    /// One cycle; when it held steps for the source to settle, the time to
    /// run the next.
    async fn cycle(&mut self, trigger: Trigger) -> Option<(tokio::time::Instant, Trigger)> {
        let Watcher {
            source,
            sink,
            connect,
            state,
        } = self;
        run_cycle(state, source, connect, sink, trigger).await;
        state.wake_at()
    }
}
