//! The optional monitoring component (`deploy/monitoring/`): every alert and
//! dashboard expression parses with Prometheus' own parser (`testbin/promql`,
//! a Go program on `github.com/prometheus/prometheus`, built once into the
//! testbin cache), and every metric one names is exported on the `/metrics`
//! of a running `slicectl controller` (the real binary, leading on the real
//! control plane: `scripts/k8s-testenv.sh up`; the test fails without it).
//! The alerts cover what docs/monitoring.md says they do, and the component
//! builds with kustomize on top of `deploy/`.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::k8s::*;
use common::*;
use serde_json::Value;
use slicectl_sim::FaultConfig;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs promql-check on `files`: (exit success, its JSON lines).
fn promql_check(files: &[&Path]) -> (bool, Vec<Value>) {
    let bin = gotool::build("testbin/promql", "promql-check");
    let o = Command::new(bin).args(files).output().unwrap();
    let lines = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    (o.status.success(), lines)
}

/// The metric names an OpenMetrics exposition offers: each sample's name,
/// and for each `# TYPE` family the names its samples take (a counter's
/// `_total`, a histogram's `_bucket`, `_sum`, `_count`), so a family with no
/// sample yet (no labels seen) still counts as exported.
fn exported(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            let mut it = t.split(' ');
            let (Some(name), Some(kind)) = (it.next(), it.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !l.starts_with('#') && !l.is_empty() {
            let end = l.find(['{', ' ']).unwrap_or(l.len());
            names.insert(l[..end].to_string());
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn alerts_and_dashboard_parse_and_name_only_exported_metrics() {
    let dir = root().join("deploy/monitoring");
    let rules = dir.join("prometheusrule.yaml");
    let dashboard = dir.join("slicectl-dashboard.json");

    // The checker catches what Prometheus would refuse.
    let bad = tempfile::tempdir().unwrap();
    let bad_rule = bad.path().join("bad.yaml");
    std::fs::write(
        &bad_rule,
        "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nspec:\n  groups:\n  - name: g\n    rules:\n    - alert: A\n      expr: max(slicectl_leader\n      for: 5x\n",
    )
    .unwrap();
    let (passed, lines) = promql_check(&[&bad_rule]);
    assert!(!passed, "{lines:?}");
    assert!(lines.iter().any(|l| l.get("error").is_some()), "{lines:?}");

    let (passed, lines) = promql_check(&[&rules, &dashboard]);
    assert!(passed, "deploy/monitoring does not parse: {lines:#?}");
    let alerts: BTreeSet<String> = lines
        .iter()
        .filter(|l| l["file"].as_str().is_some_and(|f| f.ends_with(".yaml")))
        .filter_map(|l| {
            l["where"]
                .as_str()?
                .split_once('/')
                .map(|(_, a)| a.to_string())
        })
        .collect();
    let want = [
        "SlicectlSliceStalled",
        "SlicectlCyclesFailing",
        "SlicectlNoLeader",
        "SlicectlShardsUnheld",
        "SlicectlCapacityUnavailable",
        "SlicectlSlicesHeldForWorkloads",
        "SlicectlSpecStuckOnLastGood",
        "SlicectlTargetUnobserved",
    ];
    assert_eq!(alerts, want.iter().map(|s| s.to_string()).collect());
    let panels = lines
        .iter()
        .filter(|l| l["file"].as_str().is_some_and(|f| f.ends_with(".json")))
        .count();
    assert!(panels >= 10, "{lines:#?}");
    // Each alert has a section in docs/monitoring.md (its runbook annotation).
    let doc = std::fs::read_to_string(root().join("docs/monitoring.md")).unwrap();
    for a in want {
        assert!(
            doc.contains(&format!("### {a}")),
            "docs/monitoring.md has no section for {a}"
        );
    }

    // A running controller's /metrics: leading, one cycle done.
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "mon").await;
    let sim = sim(Duration::from_millis(200), 5, FaultConfig::default()).await;
    let specs = spec_dir(&[(
        "tiny.yaml",
        slice_yaml("tiny", "tpu-v6e-slice", "1x1", 1, ""),
    )]);
    let port = free_port();
    let ctl = spawn_piped(
        tokio::process::Command::new(bin())
            .args(["controller", "--namespace", &ns, "--dir"])
            .arg(specs.path())
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--lease-duration",
                "4s",
            ])
            .args(["--debounce", "100ms", "--settle", "1s"])
            .env("SLICECTL_API_ENDPOINT", sim.base_url())
            .env("SLICECTL_UNREAD_CLUSTERS_IDLE", "true")
            .env("KUBECONFIG", kubeconfig())
            .env("POD_NAME", "mon-0")
            .env("NO_COLOR", "1")
            .env_remove("SLICECTL_LOG")
            .env_remove("POD_NAMESPACE"),
    );
    let url = format!("http://127.0.0.1:{port}/metrics");
    let scrape_until = |what: &'static str, want: &'static [&'static str]| {
        let (url, stderr) = (url.clone(), ctl.stderr.clone());
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
            loop {
                let body = match reqwest::get(&url).await {
                    Ok(r) => r.text().await.unwrap_or_default(),
                    Err(_) => String::new(),
                };
                if want.iter().all(|w| body.contains(w)) {
                    return body;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{what} never showed on /metrics:\n{body}\n--- stderr\n{}",
                    stderr.lock().unwrap()
                );
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
    };
    let first = scrape_until(
        "a leader with a finished cycle",
        &["\nslicectl_leader 1", "slicectl_reconcile_cycles_total{"],
    )
    .await;
    // A family shows on /metrics once it has a series: an emptied spec
    // directory is refused (empty_source), which gives the refusal counter one.
    for f in ["tiny.yaml", "target.yaml"] {
        std::fs::remove_file(specs.path().join(f)).unwrap();
    }
    let body = scrape_until(
        "the empty_source refusal",
        &["slicectl_refused_actions_total{code=\"empty_source\"}"],
    )
    .await;
    assert!(first.contains("slicectl_slices{"), "{first}");
    let names = exported(&body);
    for l in &lines {
        for m in l["metrics"].as_array().unwrap() {
            let m = m.as_str().unwrap();
            assert!(
                names.contains(m),
                "{} ({}) names {m}, which the controller does not export; it exports {names:?}",
                l["where"],
                l["file"]
            );
        }
    }

    // kustomize: deploy/ with the component builds, into deploy's namespace.
    // (kustomize takes only relative paths: up from the overlay to `/`, then down.)
    let overlay = tempfile::tempdir().unwrap();
    let up = "../".repeat(overlay.path().components().count() - 1);
    let rel = |p: &Path| format!("{up}{}", p.strip_prefix("/").unwrap().display());
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: slicectl\nresources:\n  - {}\ncomponents:\n  - {}\n",
            rel(&root().join("deploy")),
            rel(&dir)
        ),
    )
    .unwrap();
    let o = kubectl(&["kustomize", overlay.path().to_str().unwrap()]);
    let out = ok(&o);
    for kind in [
        "kind: PrometheusRule",
        "kind: PodMonitor",
        "name: slicectl-dashboard",
        "grafana_dashboard: \"1\"",
        "kind: Deployment",
    ] {
        assert!(out.contains(kind), "{kind} missing from:\n{out}");
    }
    drop(ctl);
    sim.shutdown().await;
}
