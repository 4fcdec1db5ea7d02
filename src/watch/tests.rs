#![cfg(test)]
use super::*;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::unbounded_channel;

const OPTS: LoopOptions = LoopOptions {
    resync: Duration::from_secs(600),
    grace: Duration::from_secs(30),
};

type Log = Arc<Mutex<Vec<(Trigger, Instant)>>>;

/// What a cycle asks of the loop: the next cycle's time and trigger.
type Wake = Option<(Instant, Trigger)>;

/// A cycle that records its trigger and start, takes `len`, and flags
/// any overlap.
fn cycle(
    log: Log,
    running: Arc<Mutex<bool>>,
    len: Duration,
) -> impl FnMut(Trigger) -> std::pin::Pin<Box<dyn Future<Output = Wake> + Send>> {
    move |t| {
        let (log, running) = (log.clone(), running.clone());
        Box::pin(async move {
            {
                let mut r = running.lock().unwrap();
                assert!(!*r, "two cycles at once");
                *r = true;
            }
            log.lock().unwrap().push((t, Instant::now()));
            tokio::time::sleep(len).await;
            *running.lock().unwrap() = false;
            None
        })
    }
}

/// A cycle that records its trigger and start, and asks for the next as
/// `ask` says.
fn asking(
    log: Log,
    ask: fn(Trigger, Instant) -> Wake,
) -> impl FnMut(Trigger) -> std::future::Ready<Wake> {
    move |t| {
        let now = Instant::now();
        log.lock().unwrap().push((t, now));
        std::future::ready(ask(t, now))
    }
}

fn triggers(log: &Log) -> Vec<Trigger> {
    log.lock().unwrap().iter().map(|x| x.0).collect()
}

#[tokio::test(start_paused = true)]
async fn changes_during_a_cycle_make_exactly_one_more_cycle() {
    let (ctx, crx) = unbounded_channel();
    let (stx, srx) = unbounded_channel();
    let log: Log = Arc::default();
    let h = tokio::spawn(run(
        OPTS,
        crx,
        srx,
        cycle(log.clone(), Arc::default(), Duration::from_secs(10)),
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Five changes while the start cycle runs.
    for _ in 0..5 {
        ctx.send(()).unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Long after: the start cycle and exactly one more.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(triggers(&log), vec![Trigger::Start, Trigger::Change]);
    let starts: Vec<Instant> = log.lock().unwrap().iter().map(|x| x.1).collect();
    assert!(
        starts[1] - starts[0] >= Duration::from_secs(10),
        "not before the first ended"
    );
    // An idle change runs a cycle at once.
    let sent = Instant::now();
    ctx.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(log.lock().unwrap().len(), 3);
    assert_eq!(log.lock().unwrap()[2].1, sent);
    tokio::time::sleep(Duration::from_secs(20)).await;
    stx.send(()).unwrap();
    assert_eq!(h.await.unwrap(), LoopEnd::Stopped);
    assert_eq!(
        triggers(&log),
        vec![Trigger::Start, Trigger::Change, Trigger::Change]
    );
}

#[tokio::test(start_paused = true)]
async fn resync_runs_after_the_period_without_changes_and_a_change_postpones_it() {
    let (ctx, crx) = unbounded_channel();
    let (stx, srx) = unbounded_channel();
    let log: Log = Arc::default();
    let t0 = Instant::now();
    let h = tokio::spawn(run(
        OPTS,
        crx,
        srx,
        cycle(log.clone(), Arc::default(), Duration::from_secs(1)),
    ));
    tokio::time::sleep(Duration::from_secs(601 + 5)).await;
    assert_eq!(triggers(&log), vec![Trigger::Start, Trigger::Resync]);
    assert_eq!(log.lock().unwrap()[1].1 - t0, Duration::from_secs(601));
    // A change 100 s later: the next resync is 600 s after it ended.
    tokio::time::sleep(Duration::from_secs(100)).await;
    ctx.send(()).unwrap();
    let change_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(599)).await;
    assert_eq!(triggers(&log).len(), 3);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        triggers(&log),
        vec![
            Trigger::Start,
            Trigger::Resync,
            Trigger::Change,
            Trigger::Resync
        ]
    );
    assert_eq!(
        log.lock().unwrap()[3].1 - change_at,
        Duration::from_secs(601)
    );
    stx.send(()).unwrap();
    assert_eq!(h.await.unwrap(), LoopEnd::Stopped);
}

#[tokio::test(start_paused = true)]
async fn a_signal_lets_the_cycle_finish_within_grace_and_starts_no_new_one() {
    let (ctx, crx) = unbounded_channel();
    let (stx, srx) = unbounded_channel();
    let log: Log = Arc::default();
    let done = Arc::new(Mutex::new(false));
    let d = done.clone();
    let h = tokio::spawn(run(OPTS, crx, srx, move |t| {
        let (log, d) = (log.clone(), d.clone());
        async move {
            log.lock().unwrap().push((t, Instant::now()));
            tokio::time::sleep(Duration::from_secs(10)).await;
            *d.lock().unwrap() = true;
            None
        }
    }));
    tokio::time::sleep(Duration::from_secs(1)).await;
    ctx.send(()).unwrap();
    stx.send(()).unwrap();
    let t = Instant::now();
    assert_eq!(h.await.unwrap(), LoopEnd::Stopped);
    assert!(*done.lock().unwrap(), "the in-flight cycle finished");
    assert_eq!(Instant::now() - t, Duration::from_secs(9));
}

#[tokio::test(start_paused = true)]
async fn grace_over_or_a_second_signal_abandons_the_cycle() {
    for second_signal in [false, true] {
        let (_ctx, crx) = unbounded_channel();
        let (stx, srx) = unbounded_channel();
        let done = Arc::new(Mutex::new(false));
        let d = done.clone();
        let h = tokio::spawn(run(OPTS, crx, srx, move |_| {
            let d = d.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                *d.lock().unwrap() = true;
                None
            }
        }));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t = Instant::now();
        stx.send(()).unwrap();
        if second_signal {
            tokio::time::sleep(Duration::from_secs(2)).await;
            stx.send(()).unwrap();
        }
        assert_eq!(h.await.unwrap(), LoopEnd::Abandoned);
        assert!(!*done.lock().unwrap());
        let waited = Instant::now() - t;
        let want = if second_signal { 2 } else { 30 };
        assert_eq!(waited, Duration::from_secs(want), "{second_signal}");
    }
}

/// A cycle that held steps asks for the next at the end of their settle
/// period: it runs then, exactly, with no change and long before the
/// resync; a change before it runs a cycle at once (which asks again).
#[tokio::test(start_paused = true)]
async fn a_cycle_asking_to_run_again_at_a_time_gets_a_settle_cycle_then() {
    let (ctx, crx) = unbounded_channel();
    let (stx, srx) = unbounded_channel();
    let log: Log = Arc::default();
    let t0 = Instant::now();
    // The start and change cycles hold steps for 10 s.
    let h = tokio::spawn(run(
        OPTS,
        crx,
        srx,
        asking(log.clone(), |t, now| {
            matches!(t, Trigger::Start | Trigger::Change)
                .then(|| (now + Duration::from_secs(10), Trigger::Settle))
        }),
    ));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(triggers(&log), vec![Trigger::Start, Trigger::Settle]);
    assert_eq!(log.lock().unwrap()[1].1 - t0, Duration::from_secs(10));
    // A change 3 s into a new period: at once, then its own settle.
    ctx.send(()).unwrap();
    let c = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    ctx.send(()).unwrap();
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(
        triggers(&log),
        vec![
            Trigger::Start,
            Trigger::Settle,
            Trigger::Change,
            Trigger::Change,
            Trigger::Settle
        ]
    );
    let at: Vec<Instant> = log.lock().unwrap().iter().map(|x| x.1).collect();
    assert_eq!(at[2], c);
    assert_eq!(at[4] - at[3], Duration::from_secs(10));
    stx.send(()).unwrap();
    assert_eq!(h.await.unwrap(), LoopEnd::Stopped);
}

#[tokio::test(start_paused = true)]
async fn a_signal_between_cycles_stops_at_once() {
    let (_ctx, crx) = unbounded_channel();
    let (stx, srx) = unbounded_channel();
    let log: Log = Arc::default();
    let h = tokio::spawn(run(
        OPTS,
        crx,
        srx,
        cycle(log.clone(), Arc::default(), Duration::from_secs(1)),
    ));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let t = Instant::now();
    stx.send(()).unwrap();
    assert_eq!(h.await.unwrap(), LoopEnd::Stopped);
    assert_eq!(Instant::now(), t);
    assert_eq!(triggers(&log), vec![Trigger::Start]);
}

#[tokio::test]
async fn the_watcher_reports_a_rename_into_the_directory_and_a_directory_that_comes_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("specs");
    std::fs::create_dir(&dir).unwrap();
    let (tx, mut rx) = unbounded_channel();
    watch_dir(dir.clone(), Duration::from_millis(50), tx).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    async fn next(
        rx: &mut UnboundedReceiver<()>,
    ) -> Result<Option<()>, tokio::time::error::Elapsed> {
        tokio::time::timeout(Duration::from_secs(10), rx.recv()).await
    }
    std::fs::write(tmp.path().join("a.tmp"), "x").unwrap();
    std::fs::rename(tmp.path().join("a.tmp"), dir.join("a.yaml")).unwrap();
    assert_eq!(next(&mut rx).await, Ok(Some(())));
    // A nested directory created later is watched too.
    std::fs::create_dir(dir.join("team")).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    while rx.try_recv().is_ok() {}
    std::fs::write(dir.join("team/b.yaml"), "y").unwrap();
    assert_eq!(next(&mut rx).await, Ok(Some(())));
    // Vanished, then back.
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(next(&mut rx).await, Ok(Some(())));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    while rx.try_recv().is_ok() {}
    std::fs::create_dir(&dir).unwrap();
    assert_eq!(next(&mut rx).await, Ok(Some(())));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    while rx.try_recv().is_ok() {}
    std::fs::write(dir.join("c.yaml"), "z").unwrap();
    assert_eq!(next(&mut rx).await, Ok(Some(())));
}

/// A log file (or any file the source does not read) written inside
/// the watched directory makes no cycle, or a cycle that writes its log
/// there would run for ever; a spec file still does.
#[tokio::test]
async fn only_files_the_source_reads_make_a_cycle() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::write(dir.join("a.yaml"), "x: 1\n").unwrap();
    let mut stamp = SpecStamp::default();
    assert!(stamp.changed(&dir), "nothing seen yet counts as a change");
    assert!(!stamp.changed(&dir));
    // A near-miss that appears is reported by the next cycle.
    std::fs::write(dir.join("a.yaml.bak"), "x").unwrap();
    assert!(stamp.changed(&dir));
    let (tx, mut rx) = unbounded_channel();
    watch_dir(dir.clone(), Duration::from_millis(50), tx).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The first batch after start always counts (nothing seen yet).
    std::fs::write(dir.join("a.yaml"), "x: 2\n").unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert_eq!(got, Ok(Some(())));
    for i in 0..5 {
        std::fs::write(dir.join("slicectl.log"), format!("cycle {i}\n")).unwrap();
        std::fs::write(dir.join("a.yaml.bak"), format!("{i}")).unwrap();
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    let got = tokio::time::timeout(Duration::from_millis(800), rx.recv()).await;
    assert!(got.is_err(), "a log file write made a cycle: {got:?}");
    std::fs::write(dir.join("a.yaml"), "x: 3\n").unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
    assert_eq!(got, Ok(Some(())));
}

/// A cycle that asks for the next at a grace period's end gets it then,
/// with that trigger, and the resync is not moved forward by it.
#[tokio::test(start_paused = true)]
async fn a_grace_wake_runs_a_cycle_at_its_time() {
    let (_ctx, crx) = unbounded_channel();
    let (stx, srx) = unbounded_channel();
    let log: Log = Arc::default();
    let t0 = Instant::now();
    let h = tokio::spawn(run(
        OPTS,
        crx,
        srx,
        asking(log.clone(), |t, now| {
            (t == Trigger::Start).then(|| (now + Duration::from_secs(7), Trigger::Grace))
        }),
    ));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(triggers(&log), vec![Trigger::Start, Trigger::Grace]);
    assert_eq!(log.lock().unwrap()[1].1 - t0, Duration::from_secs(7));
    assert_eq!(Trigger::Grace.as_str(), "grace");
    stx.send(()).unwrap();
    assert_eq!(h.await.unwrap(), LoopEnd::Stopped);
}
