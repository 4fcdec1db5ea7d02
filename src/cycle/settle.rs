//! The settle period: in watch mode and the controller's `--dir` mode,
//! steps that destroy capacity (delete, replace, a MIG's VM recreation)
//! wait until the spec source has been unchanged for a settle period.
//! Creates and in-place updates do not wait.
//!
//! Why: a spec file rewritten in place in chunks (`cat > file`, `scp`,
//! `rsync --inplace`, a slow network filesystem, `git checkout` of a large
//! file) can be read half written, and a half-written file is often valid
//! YAML that defines fewer slices. Acting on it at once deletes the missing
//! slices' capacity and recreates it moments later, killing the jobs on it.
//!
//! "Unchanged" is judged by the source's [`Stamp`] (a hash of every file
//! read, with its size, inode and times): the stamp read at the start of a
//! cycle must equal the one of the previous reads for the whole period, and
//! the source is stamped again just before the plan is approved, so a
//! change made while the cycle observed and planned holds the steps too (a
//! writer that pauses longer than one debounce but less than the settle
//! period is caught either way). The process's first read starts the period
//! (nothing is known of what came before it).
//!
//! Held steps are refusals with the code [`SETTLING`] (in the plan, its
//! JSON, the log and the status objects); the loop runs the next cycle when
//! the period is over ([`Settle::wake_at`]), so a genuine removal is pruned
//! then, with no delay beyond the period.
//!
//! The decision is pure: the caller passes the time and the stamps.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

use crate::plan::{Action, ActionKind, Plan};
use crate::source::stamp::Stamp;

pub use crate::plan::SETTLING;

/// The default settle period.
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(10);

/// Why the source is not settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The process has read the source for less than the period.
    FirstRead,
    /// The source changed less than the period ago.
    Changed,
    /// The source changed while this cycle observed and planned (or could
    /// not be read again).
    ChangedDuringCycle,
}

/// Whether steps that destroy capacity may run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Unchanged for the whole period: they may.
    Settled,
    /// Not yet.
    Settling {
        /// Since when the source has been as read.
        since: Instant,
        /// When the period is over (the next cycle runs then).
        until: Instant,
        /// Why.
        cause: Cause,
    },
}

/// What the loop remembers of its source between cycles.
#[derive(Debug, Clone)]
pub struct Settle {
    period: Duration,
    /// The stamp last read, since when it has been read unchanged, and
    /// whether that is since the process's first read.
    last: Option<(Stamp, Instant, bool)>,
    /// When the period of the last held steps is over.
    wake: Option<Instant>,
}

impl Settle {
    /// A settle period of `period` (non-zero: a zero period is refused by
    /// the CLI).
    pub fn new(period: Duration) -> Settle {
        Settle {
            period,
            last: None,
            wake: None,
        }
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Records the stamp a cycle read at `now`.
    pub fn read(&mut self, stamp: &Stamp, now: Instant) {
        self.wake = None;
        match &self.last {
            Some((s, _, _)) if s == stamp => {}
            Some(_) => self.last = Some((stamp.clone(), now, false)),
            None => self.last = Some((stamp.clone(), now, true)),
        }
    }

    /// The verdict at `now`, just before the plan is approved: `read` is
    /// the stamp this cycle read, `again` the source stamped again now
    /// (`None`: it could not be read).
    pub fn judge(&mut self, read: &Stamp, again: Option<&Stamp>, now: Instant) -> Verdict {
        if again != Some(read) {
            // Changed under the cycle: the period starts again from now.
            self.last = again.map(|s| (s.clone(), now, false));
            return Verdict::Settling {
                since: now,
                until: now + self.period,
                cause: Cause::ChangedDuringCycle,
            };
        }
        let (since, first) = match &self.last {
            Some((s, since, first)) if s == read => (*since, *first),
            _ => {
                self.last = Some((read.clone(), now, false));
                (now, false)
            }
        };
        if now.saturating_duration_since(since) >= self.period {
            Verdict::Settled
        } else {
            Verdict::Settling {
                since,
                until: since + self.period,
                cause: if first {
                    Cause::FirstRead
                } else {
                    Cause::Changed
                },
            }
        }
    }

    /// Notes that steps were held until `until`: the loop runs a cycle then.
    pub fn held_until(&mut self, until: Instant) {
        self.wake = Some(until);
    }

    /// When the loop must run the next cycle for the steps held (the end
    /// of their period), if any were held by the last cycle.
    pub fn wake_at(&self) -> Option<Instant> {
        self.wake
    }
}

/// Whether `a` destroys capacity: a delete, a replacement, or the
/// recreation of VMs (a MIG's `recreateInstances`).
pub fn destroys_capacity(a: &Action) -> bool {
    a.action.is_destructive() || matches!(a.reason, crate::plan::Reason::NodeLost { .. })
}

/// Holds every step of `plan` that destroys capacity, and the creates,
/// replacements and deletes of the same slice replicas (a policy is not
/// replaced under a pool that stays): each becomes a refusal with the code
/// [`SETTLING`] and `why`. Updates in place and waits go on, as do the
/// creates of other replicas. Returns how many steps were held.
pub fn hold(plan: &mut Plan, why: &str) -> usize {
    let replicas: BTreeSet<(String, u32)> = plan
        .actions
        .iter()
        .filter(|a| destroys_capacity(a))
        .map(|a| (a.owner.slice.clone(), a.owner.replica))
        .collect();
    if replicas.is_empty() {
        return 0;
    }
    let (held, kept): (Vec<Action>, Vec<Action>) = std::mem::take(&mut plan.actions)
        .into_iter()
        .partition(|a| {
            replicas.contains(&(a.owner.slice.clone(), a.owner.replica))
                && (destroys_capacity(a)
                    || matches!(
                        a.action,
                        ActionKind::Create | ActionKind::Replace | ActionKind::Delete
                    ))
        });
    plan.actions = kept;
    let n = held.len();
    for a in held {
        let msg = format!(
            "{} {} ({}) waits: {why}",
            a.action.as_str(),
            a.address(),
            a.id.name
        );
        plan.refused.push(crate::plan::refusal(&a, SETTLING, msg));
    }
    plan.summary = plan.count();
    n
}

/// The reason of the held steps, for people.
pub fn message(source: &str, period: Duration, verdict: &Verdict, now: Instant) -> String {
    let Verdict::Settling {
        since,
        until,
        cause,
    } = verdict
    else {
        return String::new();
    };
    let left = until.saturating_duration_since(now);
    let what = match cause {
        Cause::FirstRead => format!(
            "slicectl started reading the spec files in {source} {:.1}s ago",
            now.saturating_duration_since(*since).as_secs_f64()
        ),
        Cause::Changed => match now.saturating_duration_since(*since) {
            d if d < Duration::from_millis(100) => {
                format!("the spec files in {source} just changed")
            }
            d => format!(
                "the spec files in {source} changed {:.1}s ago",
                d.as_secs_f64()
            ),
        },
        Cause::ChangedDuringCycle => {
            format!("the spec files in {source} changed while this cycle planned")
        }
    };
    format!(
        "steps that destroy capacity run only once the specs have been unchanged for the settle period ({}s), so that a half-written file never deletes or replaces anything; {what}; planned again in {:.1}s",
        period.as_secs_f64(),
        left.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Stamp {
        Stamp::of_id(x)
    }

    const P: Duration = Duration::from_secs(10);

    #[test]
    fn the_first_read_starts_the_period() {
        let t0 = Instant::now();
        let mut st = Settle::new(P);
        st.read(&s("a"), t0);
        let v = st.judge(&s("a"), Some(&s("a")), t0 + Duration::from_secs(1));
        assert_eq!(
            v,
            Verdict::Settling {
                since: t0,
                until: t0 + P,
                cause: Cause::FirstRead
            }
        );
        st.read(&s("a"), t0 + P);
        assert_eq!(st.judge(&s("a"), Some(&s("a")), t0 + P), Verdict::Settled);
    }

    #[test]
    fn a_change_restarts_the_period_and_an_unchanged_source_settles() {
        let t0 = Instant::now();
        let mut st = Settle::new(P);
        st.read(&s("a"), t0);
        let t1 = t0 + Duration::from_secs(60);
        st.read(&s("a"), t1);
        assert_eq!(st.judge(&s("a"), Some(&s("a")), t1), Verdict::Settled);
        // The first chunk of a rewrite: held for the whole period.
        let t2 = t1 + Duration::from_secs(5);
        st.read(&s("half"), t2);
        assert_eq!(
            st.judge(&s("half"), Some(&s("half")), t2),
            Verdict::Settling {
                since: t2,
                until: t2 + P,
                cause: Cause::Changed
            }
        );
        // The second chunk 1.5 s later: the period starts again.
        let t3 = t2 + Duration::from_millis(1500);
        st.read(&s("whole"), t3);
        assert!(matches!(
            st.judge(&s("whole"), Some(&s("whole")), t3),
            Verdict::Settling { since, .. } if since == t3
        ));
        // A read just before the end: still held; at the end: settled.
        st.read(&s("whole"), t3 + P - Duration::from_millis(1));
        assert!(matches!(
            st.judge(
                &s("whole"),
                Some(&s("whole")),
                t3 + P - Duration::from_millis(1)
            ),
            Verdict::Settling { .. }
        ));
        st.read(&s("whole"), t3 + P);
        assert_eq!(
            st.judge(&s("whole"), Some(&s("whole")), t3 + P),
            Verdict::Settled
        );
    }

    /// A writer that pauses longer than a tick but shorter than the
    /// period: the read after the wait sees the change, and the period
    /// starts again; the same with a change between the read and the
    /// approval.
    #[test]
    fn a_change_seen_only_after_the_wait_or_during_the_cycle_holds() {
        let t0 = Instant::now();
        let mut st = Settle::new(P);
        st.read(&s("half"), t0);
        let _ = st.judge(&s("half"), Some(&s("half")), t0);
        // The period is over, but the source read now differs.
        let t1 = t0 + P;
        st.read(&s("whole"), t1);
        assert!(matches!(
            st.judge(&s("whole"), Some(&s("whole")), t1),
            Verdict::Settling {
                cause: Cause::Changed,
                ..
            }
        ));
        // Settled by the read, changed before the approval.
        let t2 = t1 + P;
        st.read(&s("whole"), t2);
        let t3 = t2 + Duration::from_secs(2);
        assert_eq!(
            st.judge(&s("whole"), Some(&s("again")), t3),
            Verdict::Settling {
                since: t3,
                until: t3 + P,
                cause: Cause::ChangedDuringCycle
            }
        );
        // Unreadable on the second look: held as well.
        let t4 = t3 + P;
        st.read(&s("again"), t4);
        assert!(matches!(
            st.judge(&s("again"), None, t4),
            Verdict::Settling {
                cause: Cause::ChangedDuringCycle,
                ..
            }
        ));
        // Nothing remembered: the next read starts over.
        st.read(&s("again"), t4 + P);
        assert!(matches!(
            st.judge(&s("again"), Some(&s("again")), t4 + P),
            Verdict::Settling { .. }
        ));
        st.read(&s("again"), t4 + P + P);
        assert_eq!(
            st.judge(&s("again"), Some(&s("again")), t4 + P + P),
            Verdict::Settled
        );
    }

    #[test]
    fn the_wake_is_kept_until_the_next_read() {
        let t0 = Instant::now();
        let mut st = Settle::new(P);
        assert_eq!(st.wake_at(), None);
        st.held_until(t0 + P);
        assert_eq!(st.wake_at(), Some(t0 + P));
        st.read(&s("a"), t0 + P);
        assert_eq!(st.wake_at(), None);
    }

    #[test]
    fn the_message_says_why_and_when() {
        let t0 = Instant::now();
        let v = Verdict::Settling {
            since: t0,
            until: t0 + P,
            cause: Cause::Changed,
        };
        let m = message("specs", P, &v, t0 + Duration::from_millis(1500));
        assert!(m.contains("settle period (10s)"), "{m}");
        assert!(
            m.contains("the spec files in specs changed 1.5s ago"),
            "{m}"
        );
        assert!(m.contains("planned again in 8.5s"), "{m}");
        let m = message("specs", P, &v, t0);
        assert!(m.contains("the spec files in specs just changed"), "{m}");
        assert!(m.contains("planned again in 10.0s"), "{m}");
        assert_eq!(message("specs", P, &Verdict::Settled, t0), "");
    }
}
