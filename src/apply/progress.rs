//! Live progress: a spinner per running step on a terminal, plain lines
//! otherwise (CI, logs, pipes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Receives step events from the executor.
pub trait Progress: Send + Sync {
    /// A step started.
    fn started(&self, key: &str, what: &str);
    /// A step finished (`Err` holds the failure message).
    fn finished(&self, key: &str, what: &str, result: Result<(), &str>, elapsed: Duration);
    /// Whether the caller asks the executor to start no new step (a stop
    /// signal): the steps in flight finish, the others are reported as not
    /// run, and the next run continues from the live state.
    fn stop_requested(&self) -> bool {
        false
    }
}

/// Another [`Progress`] that also answers [`Progress::stop_requested`]
/// from a flag the caller sets (on SIGINT or SIGTERM).
pub struct Stoppable {
    inner: Arc<dyn Progress>,
    stop: Arc<AtomicBool>,
}

impl Stoppable {
    /// `inner`, stopped when `stop` is set.
    pub fn new(inner: Arc<dyn Progress>, stop: Arc<AtomicBool>) -> Self {
        Stoppable { inner, stop }
    }
}

impl Progress for Stoppable {
    fn started(&self, key: &str, what: &str) {
        self.inner.started(key, what);
    }

    fn finished(&self, key: &str, what: &str, result: Result<(), &str>, elapsed: Duration) {
        self.inner.finished(key, what, result, elapsed);
    }

    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.inner.stop_requested()
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// Plain lines on stderr: `[   3.2s] slice.a[0].node_pool: creating ...`.
pub struct PlainProgress {
    start: Instant,
}

impl PlainProgress {
    /// New, timed from now.
    pub fn new() -> Self {
        PlainProgress {
            start: Instant::now(),
        }
    }
}

impl Default for PlainProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress for PlainProgress {
    fn started(&self, key: &str, what: &str) {
        eprintln!("[{:>7}] {key}: {what} ...", secs(self.start.elapsed()));
    }

    fn finished(&self, key: &str, what: &str, result: Result<(), &str>, elapsed: Duration) {
        let at = secs(self.start.elapsed());
        match result {
            Ok(()) => eprintln!("[{at:>7}] {key}: {what} done after {}", secs(elapsed)),
            Err(e) => eprintln!(
                "[{at:>7}] {key}: {what} FAILED after {}: {e}",
                secs(elapsed)
            ),
        }
    }
}

/// A spinner per running step on a terminal.
pub struct TerminalProgress {
    multi: MultiProgress,
    bars: Mutex<HashMap<String, ProgressBar>>,
}

impl TerminalProgress {
    /// New, drawing to stderr.
    pub fn new() -> Self {
        TerminalProgress {
            multi: MultiProgress::new(),
            bars: Mutex::new(HashMap::new()),
        }
    }
}

impl Default for TerminalProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress for TerminalProgress {
    fn started(&self, key: &str, what: &str) {
        let bar = self.multi.add(ProgressBar::new_spinner());
        if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed:>4}] {msg}") {
            bar.set_style(style);
        }
        bar.set_message(format!("{key}: {what}"));
        bar.enable_steady_tick(Duration::from_millis(120));
        if let Ok(mut bars) = self.bars.lock() {
            bars.insert(format!("{key}/{what}"), bar);
        }
    }

    fn finished(&self, key: &str, what: &str, result: Result<(), &str>, elapsed: Duration) {
        let bar = self
            .bars
            .lock()
            .ok()
            .and_then(|mut b| b.remove(&format!("{key}/{what}")));
        let line = match result {
            Ok(()) => format!("✓ {key}: {what} done after {}", secs(elapsed)),
            Err(e) => format!("✗ {key}: {what} FAILED after {}: {e}", secs(elapsed)),
        };
        match bar {
            Some(bar) => bar.finish_with_message(line),
            None => {
                let _ = self.multi.println(line);
            }
        }
    }
}
