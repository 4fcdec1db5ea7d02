//! The impure half of the suite: running a child process and measuring its
//! wall time and its own peak RSS, and the machine's description.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One finished child process.
#[derive(Debug, Clone)]
pub struct Run {
    /// From spawn to reaped.
    pub wall: Duration,
    /// The child's own peak resident set size (`ru_maxrss`), bytes.
    pub max_rss: u64,
    /// CPU time in user and kernel mode.
    pub cpu: Duration,
    /// Exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Where its stdout and stderr were written.
    pub stdout: PathBuf,
    /// See `stdout`.
    pub stderr: PathBuf,
}

impl Run {
    /// Its stdout.
    pub fn out(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// The last `n` lines of stdout and stderr, for a report of what went wrong.
    pub fn tail(&self, n: usize) -> String {
        let tail = |p: &Path| {
            let s = std::fs::read_to_string(p).unwrap_or_default();
            let lines: Vec<&str> = s.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        };
        format!(
            "exit {:?}\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
            self.code,
            tail(&self.stdout),
            tail(&self.stderr)
        )
    }
}

/// Runs `cmd` to completion with stdin closed and stdout/stderr written to
/// `<logs>/<tag>.out` / `.err`, measuring its wall and CPU time with `wait4`
/// and its own peak RSS with GNU time when installed (see below).
pub fn run(cmd: &mut Command, logs: &Path, tag: &str) -> Run {
    // The child's `ru_maxrss` from wait4 is not its own when it was started
    // by posix_spawn (vfork-style, sharing this big process's memory until
    // exec): Linux records the parent's high-water mark into the child at
    // exec. GNU time forks its own (small) child, whose peak is then truly
    // its own; use it when installed.
    const TIME: &str = "/usr/bin/time";
    let rss_file = logs.join(format!("{tag}.rss"));
    let mut timed = Path::new(TIME).exists().then(|| {
        let mut t = Command::new(TIME);
        t.arg("-f").arg("%M").arg("-o").arg(&rss_file);
        t.arg(cmd.get_program()).args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => t.env(k, v),
                None => t.env_remove(k),
            };
        }
        if let Some(d) = cmd.get_current_dir() {
            t.current_dir(d);
        }
        t
    });
    let cmd = timed.as_mut().unwrap_or(cmd);
    let mut r = run_direct(cmd, logs, tag);
    if timed.is_some() {
        let kib = std::fs::read_to_string(&rss_file)
            .ok()
            .and_then(|s| s.lines().last().and_then(|l| l.trim().parse::<u64>().ok()));
        if let Some(kib) = kib {
            r.max_rss = kib * 1024;
        }
    }
    r
}

fn run_direct(cmd: &mut Command, logs: &Path, tag: &str) -> Run {
    let stdout = logs.join(format!("{tag}.out"));
    let stderr = logs.join(format!("{tag}.err"));
    cmd.stdin(Stdio::null())
        .stdout(File::create(&stdout).expect("creating a log file"))
        .stderr(File::create(&stderr).expect("creating a log file"));
    let t0 = Instant::now();
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own unreaped child; the pointers are valid
        // for the call. `child` is never waited on through std afterwards.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            panic!("wait4({pid}): {err}");
        }
    }
    let wall = t0.elapsed();
    drop(child);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Run {
        wall,
        // Linux reports ru_maxrss in KiB.
        max_rss: u64::try_from(ru.ru_maxrss).unwrap_or(0) * 1024,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        code,
        stdout,
        stderr,
    }
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
        + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
}

/// CPU (user + sys) this process (the bench, with the in-process simulator)
/// has used so far.
pub fn own_cpu() -> Duration {
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer is valid for the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Output of a short command, trimmed (empty when it fails).
pub fn capture(program: &str, args: &[&str], dir: Option<&Path>) -> String {
    let mut c = Command::new(program);
    c.args(args);
    if let Some(d) = dir {
        c.current_dir(d);
    }
    c.stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// One line describing the machine and the code measured.
pub fn machine(repo: &Path) -> Vec<String> {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let commit = capture("git", &["rev-parse", "--short=12", "HEAD"], Some(repo));
    let branch = capture("git", &["rev-parse", "--abbrev-ref", "HEAD"], Some(repo));
    let dirty = !capture("git", &["status", "--porcelain"], Some(repo)).is_empty();
    vec![
        format!(
            "machine: {cores} core(s) available ({cpu}), Linux {}, load average {}",
            capture("uname", &["-r"], None),
            loadavg()
        ),
        format!(
            "code: commit {commit}{} on {branch}",
            if dirty { " + uncommitted changes" } else { "" }
        ),
    ]
}

/// The 1-minute load average, as /proc/loadavg says.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}
