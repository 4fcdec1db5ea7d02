//! Continuous reconciliation of a watched directory (`slicectl reconcile DIR
//! --watch`): the single-flight loop that decides when a cycle runs, and the
//! directory watcher that feeds it.
//!
//! The loop never runs two cycles at once. It runs one at start, one when
//! the directory changes, one every resync period without changes, and one
//! at the time a cycle asks for (the end of the settle period of the steps
//! it held, [`crate::cycle::settle`], or of a workload slice's grace
//! period).
//! Changes that arrive while a cycle runs make exactly one more cycle after
//! it (they are coalesced: the next cycle reads the whole directory anyway).
//! On a stop signal it starts no new cycle, and the in-flight cycle's
//! executor starts no new step ([`forward_signals`]' flag): the steps in
//! flight may finish within a grace period, and a second signal abandons
//! them at once. Abandoning
//! is safe: the engine keeps no local state, and the next run observes the
//! live state (operations in flight included) and continues from there.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

/// Tracing target of the loop's lines (one per cycle, at info).
pub const LOG_TARGET: &str = "slicectl::watch";

/// Why a cycle runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The first cycle.
    Start,
    /// The watched directory changed.
    Change,
    /// The resync period passed without a change.
    Resync,
    /// The settle period of steps held by the last cycle is over.
    Settle,
    /// The grace period a workload slice was kept for is over (its
    /// JobSet's end plus the Target's `gracePeriod`).
    Grace,
    /// A slice's capacity backoff (after a stockout) is over: it is tried
    /// again now, not at the next resync.
    Backoff,
}

impl Trigger {
    /// Its name in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Start => "start",
            Trigger::Change => "change",
            Trigger::Resync => "resync",
            Trigger::Settle => "settle",
            Trigger::Grace => "grace",
            Trigger::Backoff => "backoff",
        }
    }
}

/// Timing of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopOptions {
    /// A cycle runs when this long passed since the last one ended without a
    /// change.
    pub resync: Duration,
    /// How long an in-flight cycle may go on after a stop signal.
    pub grace: Duration,
}

/// How the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopEnd {
    /// Stopped by a signal between cycles, or after the in-flight cycle
    /// finished within the grace period.
    Stopped,
    /// The in-flight cycle was abandoned (grace period over, or a second
    /// signal).
    Abandoned,
}

/// Runs `cycle` at start, on each change (`changes`), on resync, and when
/// the last cycle asked (its output: run again at that time), one at a
/// time, until a stop signal (`signals`). See the module documentation.
pub async fn run<F, Fut>(
    opts: LoopOptions,
    mut changes: UnboundedReceiver<()>,
    mut signals: UnboundedReceiver<()>,
    mut cycle: F,
) -> LoopEnd
where
    F: FnMut(Trigger) -> Fut,
    Fut: Future<Output = Option<(Instant, Trigger)>>,
{
    let mut next = Some(Trigger::Start);
    let mut wake: Option<(Instant, Trigger)> = None;
    let mut resync_at = Instant::now() + opts.resync;
    let mut changes_open = true;
    let mut signals_open = true;
    loop {
        let trigger = match next.take() {
            Some(t) => t,
            None => tokio::select! {
                biased;
                s = signals.recv(), if signals_open => match s {
                    Some(()) => return LoopEnd::Stopped,
                    None => { signals_open = false; continue; }
                },
                c = changes.recv(), if changes_open => match c {
                    Some(()) => Trigger::Change,
                    None => {
                        tracing::warn!(target: LOG_TARGET, "the directory watcher stopped; only the periodic resync runs cycles now");
                        changes_open = false;
                        continue;
                    }
                },
                () = tokio::time::sleep_until(wake.map_or(resync_at, |w| w.0)), if wake.is_some_and(|w| w.0 < resync_at) => wake.map_or(Trigger::Resync, |w| w.1),
                () = tokio::time::sleep_until(resync_at) => Trigger::Resync,
            },
        };
        // Changes already queued are covered by this cycle: it reads the
        // whole directory after them.
        while changes.try_recv().is_ok() {}
        let fut = cycle(trigger);
        tokio::pin!(fut);
        tokio::select! {
            biased;
            w = &mut fut => wake = w,
            s = signals.recv(), if signals_open => {
                if s.is_some() {
                    tracing::warn!(
                        target: LOG_TARGET,
                        grace_secs = opts.grace.as_secs_f64(),
                        "stop signal: no new cycle and no new step starts; the steps in flight may finish within the grace period (a second signal abandons them now)"
                    );
                    return tokio::select! {
                        biased;
                        _ = &mut fut => LoopEnd::Stopped,
                        _ = signals.recv() => {
                            tracing::warn!(target: LOG_TARGET, "second stop signal: abandoning the in-flight cycle; the next run continues from the live state");
                            LoopEnd::Abandoned
                        }
                        () = tokio::time::sleep(opts.grace) => {
                            tracing::warn!(target: LOG_TARGET, "grace period over: abandoning the in-flight cycle; the next run continues from the live state");
                            LoopEnd::Abandoned
                        }
                    };
                }
                signals_open = false;
                wake = fut.await;
            }
        }
        resync_at = Instant::now() + opts.resync;
        let mut changed = false;
        while changes.try_recv().is_ok() {
            changed = true;
        }
        if changed {
            next = Some(Trigger::Change);
        }
    }
}

/// Forwards SIGINT (Ctrl-C) and SIGTERM into a channel, one message per
/// signal, and sets the returned flag at the first: a cycle's executor,
/// given it through [`crate::apply::progress::Stoppable`], then starts no
/// new step and lets the steps in flight finish. Once this runs, neither
/// signal kills the process by itself.
pub fn forward_signals() -> std::io::Result<(UnboundedReceiver<()>, Arc<AtomicBool>)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::spawn(async move {
            loop {
                let name = tokio::select! {
                    Some(()) = term.recv() => "SIGTERM",
                    Some(()) = int.recv() => "SIGINT",
                    else => break,
                };
                tracing::info!(target: LOG_TARGET, signal = name, "stop signal received");
                flag.store(true, Ordering::Relaxed);
                if tx.send(()).is_err() {
                    break;
                }
            }
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            flag.store(true, Ordering::Relaxed);
            if tx.send(()).is_err() {
                break;
            }
        }
    });
    Ok((rx, stop))
}

/// How often the revision of `--git-ref` is resolved again.
pub const GIT_POLL: Duration = Duration::from_secs(1);

/// Resolves `r` every `every` and sends a message when the commit it names
/// changes (or starts or stops failing to resolve), on its own thread until
/// the receiver is dropped. Resolving reads the reference and the commit,
/// no tree: cheap enough to poll, and it sees a ref moved by any means
/// (`git pull`, `git fetch`, `git reset`, packed refs, a worktree's HEAD).
pub fn watch_git(
    r: crate::source::git::GitRef,
    every: Duration,
    tx: UnboundedSender<()>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("slicectl-git".into())
        .spawn(move || {
            let resolve = || crate::source::git::resolve(&r).map_err(|e| e.to_string());
            let mut last = resolve();
            while !tx.is_closed() {
                std::thread::sleep(every);
                let now = resolve();
                if now != last {
                    match &now {
                        Ok(commit) => tracing::debug!(target: LOG_TARGET, reference = %r.reference, commit = %commit, "the revision moved"),
                        Err(e) => tracing::debug!(target: LOG_TARGET, reference = %r.reference, error = %e, "the revision cannot be resolved"),
                    }
                    last = now;
                    let _ = tx.send(());
                }
            }
        })
        .map(|_| ())
}

/// How often the watcher checks that the directory itself is still the one
/// it watches (it vanished, came back, or was replaced by another).
const DIR_CHECK: Duration = Duration::from_millis(500);

/// Watches `dir` recursively (never single files: a file watch dies when a
/// mounted ConfigMap swaps its `..data` link), debounced by `debounce`, and
/// sends one message per debounced batch of changes. Runs on its own thread
/// until the receiver is dropped. A directory that is missing, vanishes or is
/// replaced is watched again once it is back, with a message then.
pub fn watch_dir(dir: PathBuf, debounce: Duration, tx: UnboundedSender<()>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("slicectl-watch".into())
        .spawn(move || supervise(&dir, debounce, &tx))
        .map(|_| ())
}

/// The identity of a directory (device and inode), `None` when it is
/// missing or not a directory.
fn identity(dir: &Path) -> Option<(u64, u64)> {
    let m = std::fs::metadata(dir).ok().filter(|m| m.is_dir())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        Some((0, 0))
    }
}

/// What the watcher last saw of the source: a batch of events makes a
/// cycle only when what the source would read changed (its
/// [`crate::source::stamp::Stamp`]: the spec files' paths, bytes and
/// times) or the entries it reports as skipped came or went (a near-miss
/// such as `x.yaml.bak` is said in the next cycle). Files it neither reads
/// nor reports (`slicectl.log`, `README.md`) never make one, nor does a
/// skipped file's content. Nothing seen yet, or a directory that cannot
/// be read, counts as a change: a cycle is never missed, at worst one is
/// spare.
#[derive(Debug, Default)]
pub struct SpecStamp(Option<(crate::source::stamp::Stamp, Vec<PathBuf>)>);

impl SpecStamp {
    /// Reads `dir`'s spec files and says whether they differ from the last
    /// read (and remembers this one).
    pub fn changed(&mut self, dir: &Path) -> bool {
        match crate::source::list_dir(dir) {
            Ok(listing) => {
                let seen = (
                    listing.stamp,
                    listing.skipped.into_iter().map(|s| s.path).collect(),
                );
                let changed = self.0.as_ref() != Some(&seen);
                self.0 = Some(seen);
                changed
            }
            Err(e) => {
                tracing::debug!(target: LOG_TARGET, dir = %dir.display(), error = %e, "cannot read the spec directory after a change; running a cycle");
                self.0 = None;
                true
            }
        }
    }
}

fn supervise(dir: &Path, debounce: Duration, tx: &UnboundedSender<()>) {
    use notify::RecursiveMode;
    use notify_debouncer_full::{DebounceEventResult, new_debouncer};

    let events = tx.clone();
    let root = dir.to_path_buf();
    let mut seen = SpecStamp::default();
    let handler = move |res: DebounceEventResult| match res {
        Ok(batch) => {
            // Reading the directory (each cycle does) is not a change, and
            // neither is a write to a file the source does not read (a log
            // file kept in the directory).
            if batch.iter().any(|e| !e.kind.is_access()) && seen.changed(&root) {
                tracing::trace!(target: LOG_TARGET, events = batch.len(), "spec files changed");
                let _ = events.send(());
            }
        }
        Err(errors) => {
            for e in &errors {
                tracing::warn!(target: LOG_TARGET, error = %e, "directory watch error; running a cycle to be safe");
            }
            let _ = events.send(());
        }
    };
    let mut debouncer = match new_debouncer(debounce, None, handler) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(target: LOG_TARGET, error = %e, "cannot start the directory watcher; only the periodic resync runs cycles");
            return;
        }
    };
    let mut watching: Option<(u64, u64)> = None;
    let mut reported_missing = false;
    while !tx.is_closed() {
        let now = identity(dir);
        if now != watching {
            // A directory that vanished or was replaced makes a cycle, sent
            // only once the new one (if any) is watched: a change made
            // while that cycle reads it is then never missed.
            let replaced = watching.is_some();
            if replaced {
                let _ = debouncer.unwatch(dir);
                tracing::warn!(target: LOG_TARGET, dir = %dir.display(), "the watched directory vanished or was replaced");
                watching = None;
            }
            if now.is_some() {
                match debouncer.watch(dir, RecursiveMode::Recursive) {
                    Ok(()) => {
                        tracing::debug!(target: LOG_TARGET, dir = %dir.display(), "watching");
                        if reported_missing {
                            tracing::info!(target: LOG_TARGET, dir = %dir.display(), "the spec directory is back");
                        }
                        if reported_missing || replaced {
                            let _ = tx.send(());
                        }
                        watching = now;
                        reported_missing = false;
                    }
                    Err(e) => {
                        tracing::warn!(target: LOG_TARGET, dir = %dir.display(), error = %e, "cannot watch the spec directory; trying again");
                        if replaced {
                            let _ = tx.send(());
                        }
                        reported_missing = true;
                    }
                }
            } else {
                if !reported_missing {
                    tracing::warn!(target: LOG_TARGET, dir = %dir.display(), "the spec directory does not exist; waiting for it (nothing is planned meanwhile)");
                    reported_missing = true;
                }
                if replaced {
                    let _ = tx.send(());
                }
            }
        }
        std::thread::sleep(DIR_CHECK);
    }
}

#[cfg(test)]
#[path = "watch/tests.rs"]
mod tests;
