//! The command line, end to end: the binary as a user runs it.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("SLICECTL_API_ENDPOINT")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn out(o: &std::process::Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn validate_accepts_the_committed_fleet() {
    let o = run(&["validate", "specs"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("valid"),
        "{}",
        out(&o)
    );
}

/// Every malformed corpus file, run through the binary: exit 1, a located
/// error (file:line:column) for each expected problem, never a panic.
#[test]
fn validate_reports_every_corpus_error_located_and_exits_1() {
    let mut checked = 0;
    for entry in std::fs::read_dir("tests/corpus/invalid").unwrap() {
        let path = entry.unwrap().path();
        let dir = tempfile::tempdir().unwrap();
        let (target_dir, files): (&Path, Vec<std::path::PathBuf>) = if path.is_dir() {
            (path.as_path(), walk(&path))
        } else {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
            (dir.path(), vec![path.clone()])
        };
        let o = run(&["validate", target_dir.to_str().unwrap()]);
        let text = out(&o);
        assert_eq!(o.status.code(), Some(1), "{}: {text}", path.display());
        assert!(!text.contains("panicked"), "{}: {text}", path.display());
        let stderr = String::from_utf8_lossy(&o.stderr);
        for f in files {
            for line in std::fs::read_to_string(&f).unwrap_or_default().lines() {
                let Some(exp) = line.strip_prefix("# expect: ") else {
                    continue;
                };
                let (pos, msg) = exp.split_once(' ').unwrap();
                let name = f.file_name().unwrap().to_str().unwrap();
                assert!(
                    stderr
                        .lines()
                        .any(|l| l.contains(&format!("{name}:{pos}: ")) && l.contains(msg.trim())),
                    "{}: expected {name}:{pos} {msg:?} in\n{stderr}",
                    path.display()
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 20, "the corpus shrank: {checked}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

#[test]
fn schema_prints_the_committed_schema() {
    let o = run(&["schema"]);
    assert!(o.status.success());
    let committed = std::fs::read_to_string("schemas/slicectl.v1alpha1.schema.json").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        committed,
        "run: cargo run -- schema > schemas/slicectl.v1alpha1.schema.json"
    );
}

#[test]
fn crd_prints_the_committed_crd() {
    let o = run(&["crd"]);
    assert!(o.status.success());
    let committed = std::fs::read_to_string("deploy/crd-slicestatus.yaml").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        committed,
        "run: cargo run -- crd > deploy/crd-slicestatus.yaml"
    );
}

/// The README's first command: the whole main job on the embedded simulator.
#[test]
fn main_job_runs_end_to_end_on_the_embedded_simulator() {
    let o = run(&[
        "apply",
        "specs",
        "--sim",
        "--sim-latency",
        "100ms",
        "--auto-approve",
    ]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("SIMULATOR MODE"), "{text}");
    assert!(text.contains("nothing real is touched"), "{text}");
    assert!(text.contains("Apply complete: 12 created"), "{text}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let running = stdout.lines().filter(|l| l.contains("RUNNING")).count();
    assert_eq!(running, 9, "{stdout}");
    // The self-managed slice: its VMs run, but with no Kubernetes API
    // reachable nothing joins, and that is said, never faked.
    assert!(
        text.contains("Deferred: kubernetes 10.128.0.2:6443"),
        "{text}"
    );
    let gce = stdout
        .lines()
        .find(|l| l.contains("│ research-kubeadm-v6e"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(gce.contains("MIG STABLE, VMs 1/1"), "{gce}");
    assert!(gce.contains("?/1"), "{gce}");
    assert!(stdout.contains("not joined"), "{stdout}");
    // The GKE slices' Nodes are not read either: their readiness is
    // unknown, said so, never assumed from the RUNNING pools.
    assert!(
        text.contains("Deferred: kubernetes gke://example-project/"),
        "{text}"
    );
    let gke: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("RUNNING") && l.contains("┆ gke "))
        .collect();
    assert_eq!(gke.len(), 9, "{stdout}");
    for l in gke {
        assert!(l.contains("readiness unknown") && l.contains("?/"), "{l}");
    }
    assert!(!stdout.contains('\u{1b}'), "no colour when not a terminal");
}

/// A stockout the simulator already reports is not an apply's success:
/// the MIG is created, its VMs are not, and nothing will join (the
/// Kubernetes side is deferred under --sim): "Apply INCOMPLETE", the
/// replica named as not ready with GCE's stockout, exit 1.
#[test]
fn apply_never_reports_success_for_a_replica_known_not_to_become_ready() {
    let o = run(&[
        "apply",
        "examples/gce-spot",
        "--sim",
        "--sim-stockout-rate",
        "1",
        "--auto-approve",
    ]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "Apply INCOMPLETE: 3 created, 0 updated, 0 replaced, 0 destroyed, 0 waited on, 0 failed, 0 skipped, 1 not ready"
        ),
        "{text}"
    );
    assert!(!text.contains("Apply complete"), "{text}");
    assert!(
        text.contains(
            "not ready [stockout]: slice.ironwood-spot[0].mig: ZONE_RESOURCE_POOL_EXHAUSTED: The zone 'projects/example-project/zones/us-central1-c' does not have enough resources"
        ),
        "{text}"
    );
    assert!(
        text.contains("(VMs 0/2 running; the MIG keeps retrying)"),
        "{text}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let row = stdout
        .lines()
        .find(|l| l.contains("│ ironwood-spot"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.contains("MIG RETRYING, VMs 0/2"), "{row}");
    // A reservation-bound slice's MIG is BULK: it says why it waits only in
    // its bulk operation's last check (and listErrors); read there.
    let o = run(&[
        "apply",
        "examples/gce-reservation",
        "--sim",
        "--sim-stockout-rate",
        "1",
        "--auto-approve",
    ]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("Apply INCOMPLETE: "), "{text}");
    assert!(
        text.contains("not ready [stockout]: slice.")
            && text.contains("ZONE_RESOURCE_POOL_EXHAUSTED"),
        "{text}"
    );
    // The same fleet with capacity: complete, exit 0.
    let o = run(&["apply", "examples/gce-spot", "--sim", "--auto-approve"]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("Apply complete: 3 created"), "{text}");
    assert!(!text.contains("not ready"), "{text}");
}

/// The example that brings its own instance template works on the
/// embedded simulator: a stand-in template is created there first, said
/// in a banner.
#[test]
fn the_own_template_example_applies_on_the_simulator() {
    let o = run(&[
        "apply",
        "examples/gce-own-template",
        "--sim",
        "--auto-approve",
    ]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("a stand-in was created there"), "{text}");
    assert!(text.contains("Apply complete: 2 created"), "{text}");
}

#[test]
fn plan_and_status_with_sim_show_the_fresh_fleet() {
    let o = run(&["plan", "specs", "--sim", "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("Plan: 12 to create, 0 to update in place, 0 to replace, 0 to destroy.")
    );
    let o = run(&["status", "specs", "--sim", "-o", "json"]);
    assert!(o.status.success(), "{}", out(&o));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 10, "one row per slice replica");
    assert!(rows.iter().all(|r| r["state"] == "MISSING"), "{rows:?}");
}

#[test]
fn invalid_arguments_and_missing_dirs_are_errors() {
    let o = run(&["plan", "/nonexistent/specs", "--sim"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("/nonexistent/specs"),
        "{}",
        out(&o)
    );
    let o = run(&[
        "apply",
        "specs",
        "--sim",
        "--api-endpoint",
        "http://127.0.0.1:1",
    ]);
    assert_eq!(o.status.code(), Some(2), "clap usage error: {}", out(&o));
}

/// Linking a simulated cluster to a real API server is only `slicectl sim
/// --link-gke`, never `--sim`, and it needs kubemark.
#[test]
fn linking_is_an_explicit_sim_server_choice() {
    let o = run(&["apply", "specs", "--sim", "--link-gke", "c=kubeconfig"]);
    assert_eq!(o.status.code(), Some(2), "clap usage error: {}", out(&o));
    let o = Command::new(bin())
        .args([
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--link-gke",
            "projects/p/locations/l/clusters/c=/nonexistent/kubeconfig",
        ])
        .env_remove("SLICECTL_KUBEMARK")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--link-gke needs the kubemark binary"),
        "{}",
        out(&o)
    );
    let o = Command::new(bin())
        .args([
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--kubemark",
            "/bin/true",
            "--link-gke",
            "projects/p/locations/l/clusters/c=/nonexistent/kubeconfig",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("linking cluster projects/p/locations/l/clusters/c")
            && err.contains("/nonexistent/kubeconfig"),
        "{}",
        out(&o)
    );
}

/// `slicectl sim` as a separate server, driven by another slicectl process.
#[tokio::test(flavor = "multi_thread")]
async fn sim_server_serves_another_slicectl() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut server = tokio::process::Command::new(bin())
        .args([
            "sim",
            "--listen",
            &listen,
            "--cluster",
            CLUSTER,
            "--sim-latency",
            "20ms",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://{listen}");
    let mut up = false;
    for _ in 0..100 {
        if reqwest::get(format!("{url}/_sim/stats")).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "slicectl sim did not come up");
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, ""))]);
    let o = tokio::process::Command::new(bin())
        .args([
            "apply",
            dir.path().to_str().unwrap(),
            "--auto-approve",
            "--api-endpoint",
            &url,
        ])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(o.status.success(), "{}", out(&o));
    let stats: serde_json::Value = reqwest::get(format!("{url}/_sim/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        stats["by_method"]["container.projects.locations.clusters.nodePools.create"], 1,
        "{stats}"
    );
    server.start_kill().unwrap();
    let _ = server.wait().await;
}

/// On a terminal, apply asks and only `yes` proceeds. `script` gives the
/// child a pseudo-terminal.
#[test]
fn apply_on_a_terminal_asks_for_confirmation() {
    for (answer, proceeds) in [("no\n", false), ("yes\n", true)] {
        let cmd = format!("{} apply specs --sim --sim-latency 10ms", bin().display());
        let mut child = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("script(1) from util-linux is needed for the terminal test");
        std::thread::sleep(Duration::from_millis(1500));
        child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(answer.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        let text = out(&o);
        assert!(text.contains("Only 'yes' will be accepted"), "{text}");
        assert_eq!(text.contains("Apply complete"), proceeds, "{text}");
        if !proceeds {
            assert!(text.contains("apply cancelled"), "{text}");
        }
    }
}

/// Colour only on a terminal, and never with NO_COLOR.
#[test]
fn plan_colour_only_on_a_terminal_without_no_color() {
    let cmd = format!("{} plan specs --sim --sim-latency 10ms", bin().display());
    for (no_color, want_colour) in [(false, true), (true, false)] {
        let mut c = Command::new("script");
        c.args(["-qec", &cmd, "/dev/null"]).stdin(Stdio::null());
        if no_color {
            c.env("NO_COLOR", "1");
        } else {
            c.env_remove("NO_COLOR").env("TERM", "xterm-256color");
        }
        let o = c.output().expect("script(1) from util-linux");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("Plan: 12 to create"), "{text}");
        assert_eq!(
            text.contains("\u{1b}[3"),
            want_colour,
            "NO_COLOR={no_color}: {text}"
        );
    }
    // Piped (not a terminal): never colour, in the output or the logs,
    // even without NO_COLOR (a container's log is a pipe).
    let o = Command::new(bin())
        .args(["plan", "specs", "--sim", "--log", "info"])
        .env_remove("NO_COLOR")
        .env("TERM", "xterm-256color")
        .env_remove("SLICECTL_API_ENDPOINT")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", out(&o));
    let logs = String::from_utf8_lossy(&o.stderr);
    assert!(logs.contains("INFO"), "logs at info: {logs}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains('\u{1b}'));
    assert!(
        !logs.contains('\u{1b}'),
        "no colour codes in piped logs: {logs}"
    );
}

/// Plain http to a host that is not loopback would carry the Google access
/// token in clear text: refused before anything is sent (the client is built
/// before any request, and the refusal is immediate), with what to do instead.
/// The addresses are never contacted: nothing listens there and nothing is sent.
#[test]
fn plain_http_to_a_non_loopback_endpoint_is_refused_before_any_traffic() {
    for (endpoint, via_env) in [
        ("http://10.255.255.1:9", false),
        ("http://[::ffff:10.255.255.1]:9", false),
        ("http://10.255.255.1:9", true),
    ] {
        let mut cmd = Command::new(bin());
        cmd.args(["plan", "specs"])
            .env("NO_COLOR", "1")
            .env_remove("SLICECTL_API_ENDPOINT")
            // Belt and braces: were the refusal ever to regress, credential
            // discovery fails on this file instead of asking a metadata server.
            .env(
                "GOOGLE_APPLICATION_CREDENTIALS",
                "/nonexistent/slicectl-test-credentials.json",
            )
            .stdin(Stdio::null());
        if via_env {
            cmd.env("SLICECTL_API_ENDPOINT", endpoint)
                .env("SLICECTL_ALLOW_INSECURE_HTTP", "false");
        } else {
            cmd.env_remove("SLICECTL_ALLOW_INSECURE_HTTP")
                .args(["--api-endpoint", endpoint]);
        }
        let started = std::time::Instant::now();
        let o = cmd.output().unwrap();
        let text = out(&o);
        assert_eq!(o.status.code(), Some(1), "{endpoint}: {text}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        for want in [
            "refusing to send Google Cloud credentials",
            "unencrypted",
            "https",
            "loopback",
            "--allow-insecure-http",
        ] {
            assert!(stderr.contains(want), "{endpoint}: {want:?} in {text}");
        }
        assert!(o.stdout.is_empty(), "no plan: {text}");
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "refused without connecting (the connect timeout is 10s): {text}"
        );
    }
}

/// [`run`], failing the test instead of hanging when the command blocks
/// (on a FIFO, say) for 20 s.
fn run_within_20s(args: &[&str]) -> std::process::Output {
    let mut child = Command::new(bin())
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("SLICECTL_API_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("{args:?} blocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A FIFO named like a spec file is an error naming it (not skipped: its
/// slices would be pruned; not opened: that would block), for validate and plan.
#[cfg(unix)]
#[test]
fn fifo_named_yaml_is_an_error_for_validate_and_plan() {
    let dir = spec_dir(&[("a.yaml", slice_yaml("a", "tpu-v6e-slice", "1x1", 1, ""))]);
    let fifo = dir.path().join("b.yaml");
    let status = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo(1)");
    assert!(status.success());
    let d = dir.path().to_str().unwrap();
    for args in [vec!["validate", d], vec!["plan", d, "--sim"]] {
        let o = run_within_20s(&args);
        let text = out(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {text}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains(&format!(
                "{} is a FIFO (named pipe), not a regular file",
                fifo.display()
            )),
            "{args:?}: {text}"
        );
        assert!(!text.contains("Plan:"), "{args:?}: {text}");
    }
}

/// Issue 24: specs that name no Target give slicectl nowhere to look: a
/// drift check on an empty or wrong checkout path fails instead of saying
/// "No changes".
#[test]
fn specs_with_no_target_are_not_reported_in_sync() {
    let empty = tempfile::tempdir().unwrap();
    let only_slice = tempfile::tempdir().unwrap();
    std::fs::write(
        only_slice.path().join("s.yaml"),
        "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {name: s}\nspec: {target: t, backend: gke, accelerator: tpu-v6e-slice, topology: '1x1'}\n",
    )
    .unwrap();
    let d = empty.path().to_str().unwrap();
    for args in [
        vec!["plan", d, "--sim", "--detailed-exitcode"],
        vec!["apply", d, "--sim", "--auto-approve"],
        vec!["status", d, "--sim"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", out(&o));
        assert!(out(&o).contains("define no Target"), "{}", out(&o));
        assert!(!out(&o).contains("No changes"), "{}", out(&o));
    }
    // A Slice naming a missing Target is a located validation error.
    let o = run(&["plan", only_slice.path().to_str().unwrap(), "--sim"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
}

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One rule for which entries are specs: `x.YAML`, `y.Yml` and a hidden
/// `.gamma.yaml` are read (as the ConfigMap API reads them); near-misses
/// are not, and `validate` and `plan` say which and why.
#[test]
fn validate_and_plan_read_any_case_and_list_skipped_near_misses() {
    let slice = |n: &str| slice_yaml(n, "tpu-v6e-slice", "2x2", 1, "");
    let dir = spec_dir(&[
        ("a.yaml", slice("a")),
        ("x.YAML", slice("x")),
        ("y.Yml", slice("y")),
        (".gamma.yaml", slice("gamma")),
        ("z.yaml.bak", slice("z")),
        ("z.yaml~", slice("z")),
        ("z.json", "{}".to_string()),
        ("z.yaml ", slice("z")),
        ("README.md", "# notes".to_string()),
    ]);
    let d = dir.path().to_str().unwrap();
    let o = run(&["validate", d]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("5 file(s), 3 target(s), 4 slice(s): valid"),
        "{text}"
    );
    for args in [vec!["validate", d], vec!["plan", d, "--sim"]] {
        let o = run(&args);
        let stderr = stderr_of(&o);
        for (name, why) in [
            ("z.yaml.bak", "\".bak\""),
            ("z.yaml~", "\"~\""),
            ("z.json", "JSON"),
            ("z.yaml ", "whitespace"),
        ] {
            let want = format!("warning: {}/{name} was not read as a spec file: ", d);
            assert!(
                stderr
                    .lines()
                    .any(|l| l.starts_with(&want) && l.contains(why)),
                "{args:?}: {want:?} … {why} in\n{}",
                out(&o)
            );
        }
        assert!(!stderr.contains("README.md"), "{args:?}: {}", out(&o));
        assert!(!stderr.contains("gamma"), "{args:?}: {}", out(&o));
    }
    let plan = run(&["plan", d, "--sim"]);
    let stdout = String::from_utf8_lossy(&plan.stdout);
    for s in ["gamma", "x", "y"] {
        assert!(stdout.contains(&format!("slice.{s}[0]")), "{}", out(&plan));
    }
}

/// A file name cannot forge a diagnostic line or reach the terminal with
/// an escape sequence.
#[cfg(unix)]
#[test]
fn file_names_in_diagnostics_are_escaped() {
    let dir = spec_dir(&[]);
    let name = "a\nx.yaml:9:13: forged \u{1b}[31mred.yaml";
    std::fs::write(dir.path().join(name), "kind: Nope\n").unwrap();
    let o = run(&["validate", dir.path().to_str().unwrap()]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(
        !text.lines().any(|l| l.starts_with("x.yaml:9:13")),
        "a forged line: {text}"
    );
    assert!(
        text.contains("a\\nx.yaml:9:13: forged \\u{1b}[31mred.yaml:1:1: "),
        "{text}"
    );
}

/// A file with very many problems prints at most 50 of them and says how
/// many more; a long value is shortened in its diagnostic.
#[test]
fn diagnostics_are_capped_and_long_values_shortened() {
    let many = "---\nnot a mapping\n".repeat(1000);
    let long_zone = "z".repeat(5000);
    let dir = spec_dir(&[("many.yaml", many)]);
    std::fs::write(
        dir.path().join("target.yaml"),
        TARGET.replace("us-central1-b", &long_zone),
    )
    .unwrap();
    let o = run(&["validate", dir.path().to_str().unwrap()]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    let stderr = stderr_of(&o);
    let many_lines = stderr
        .lines()
        .filter(|l| l.contains("many.yaml:") && l.contains("must be a mapping"))
        .count();
    assert_eq!(many_lines, 50, "{text}");
    assert!(
        stderr.contains("many.yaml: … and 950 more problem(s) in this file"),
        "{text}"
    );
    let zone = stderr
        .lines()
        .find(|l| l.contains("target.yaml:") && l.contains("zzzz"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(zone.len() < 400, "{zone}");
    assert!(zone.contains("…\" (5000 characters)"), "{zone}");
    assert!(stderr.len() < 20_000, "{} bytes of errors", stderr.len());
}

/// A spec file within the size limit but of 2 million nodes is refused
/// with a located error (its memory is measured in the parser's tests).
#[test]
fn a_file_of_millions_of_nodes_is_refused_located() {
    let mut dense = String::from("x: [");
    dense.push_str(&"a,".repeat(2_000_000));
    dense.push_str("a]\n");
    let dir = spec_dir(&[("dense.yaml", dense)]);
    let o = run(&["validate", dir.path().to_str().unwrap()]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        stderr_of(&o)
            .lines()
            .any(|l| l.contains("dense.yaml:1:") && l.contains("YAML nodes")),
        "{text}"
    );
}

/// `apply PLANFILE` reads the plan file as a bounded regular file.
#[cfg(unix)]
#[test]
fn apply_of_a_fifo_or_device_plan_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("plan.json");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for path in [fifo.to_str().unwrap(), "/dev/zero"] {
        let o = run_within_20s(&["apply", path, "--sim", "--auto-approve"]);
        let text = out(&o);
        assert_ne!(o.status.code(), Some(0), "{text}");
        assert!(text.contains("not a regular file"), "{path}: {text}");
    }
}
