//! Live progress: a spinner per running step on a terminal, plain lines
//! otherwise (CI, logs, pipes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::StepOp;

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
    /// The replacement of slice replica `replica` (`slice.rep[0]`) has
    /// `left` steps not finished: called as its first step (the old
    /// resource's delete) starts, and after each of its steps ends (`0`:
    /// over, whatever the outcome). While it is open, the replica's old
    /// capacity may be gone and its new one is not there yet.
    fn replacement(&self, replica: &str, left: usize) {
        let _ = (replica, left);
    }
}

/// What an apply has in flight at a moment: the steps started and not
/// finished, and the replacements begun and not over. Shared with a signal
/// handler, which names what a stop at once abandons.
#[derive(Debug, Default)]
pub struct InFlight {
    state: Mutex<InFlightState>,
}

#[derive(Debug, Default)]
struct InFlightState {
    /// (address, verb) of the steps running, in start order.
    steps: Vec<(String, String)>,
    /// Open replacements: replica address → steps left.
    replacements: std::collections::BTreeMap<String, usize>,
}

impl InFlight {
    fn started(&self, key: &str, what: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.steps.push((key.to_string(), what.to_string()));
        }
    }

    fn finished(&self, key: &str, what: &str) {
        if let Ok(mut s) = self.state.lock()
            && let Some(i) = s.steps.iter().position(|(k, w)| k == key && w == what)
        {
            s.steps.remove(i);
        }
    }

    fn replacement(&self, replica: &str, left: usize) {
        if let Ok(mut s) = self.state.lock() {
            if left == 0 {
                s.replacements.remove(replica);
            } else {
                s.replacements.insert(replica.to_string(), left);
            }
        }
    }

    /// What stopping now abandons, a line each: every step in flight (its
    /// operation, once sent, goes on in the cloud), and every replacement
    /// whose old resource's delete was sent and whose new resource's create
    /// will not run: that replica has no capacity until the next run
    /// creates it. A replacement whose last step (the create) is in flight
    /// gets its capacity back when that operation ends.
    pub fn abandoned(&self, verb: &str) -> Vec<String> {
        let Ok(s) = self.state.lock() else {
            return Vec::new();
        };
        let mut lines: Vec<String> = s
            .steps
            .iter()
            .map(|(k, w)| {
                format!("{k}: {w} (in flight: an operation already sent goes on in the cloud)")
            })
            .collect();
        for (replica, left) in &s.replacements {
            let prefix = format!("{replica}.");
            let creating = s
                .steps
                .iter()
                .any(|(k, w)| k.starts_with(&prefix) && w == StepOp::Create.verb());
            if *left == 1 && creating {
                continue;
            }
            lines.push(format!(
                "{replica} has no capacity until the next `slicectl {verb}` creates it: \
                 its replacement's delete was sent, and its create will not run"
            ));
        }
        lines
    }
}

/// Another [`Progress`] that also answers [`Progress::stop_requested`]
/// from a flag the caller sets (on SIGINT or SIGTERM).
/// It also keeps what is in flight ([`Stoppable::in_flight`]), for a
/// signal handler that stops at once to say what it leaves.
pub struct Stoppable {
    inner: Arc<dyn Progress>,
    stop: Arc<AtomicBool>,
    in_flight: Arc<InFlight>,
}

impl Stoppable {
    /// `inner`, stopped when `stop` is set.
    pub fn new(inner: Arc<dyn Progress>, stop: Arc<AtomicBool>) -> Self {
        Stoppable {
            inner,
            stop,
            in_flight: Arc::default(),
        }
    }

    /// What is in flight, kept up to date as steps start and finish.
    pub fn in_flight(&self) -> Arc<InFlight> {
        self.in_flight.clone()
    }
}

impl Progress for Stoppable {
    fn started(&self, key: &str, what: &str) {
        self.in_flight.started(key, what);
        self.inner.started(key, what);
    }

    fn finished(&self, key: &str, what: &str, result: Result<(), &str>, elapsed: Duration) {
        self.in_flight.finished(key, what);
        self.inner.finished(key, what, result, elapsed);
    }

    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.inner.stop_requested()
    }

    fn replacement(&self, replica: &str, left: usize) {
        self.in_flight.replacement(replica, left);
        self.inner.replacement(replica, left);
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
