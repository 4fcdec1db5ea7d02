//! SliceStatus objects on the real test control plane (`scripts/k8s-testenv.sh
//! up`; the test fails without it): the committed CRD applies; the writer's
//! objects read back as the real kstatus library (the Go program in
//! `tests/kstatus/`, built once into the testbin cache) and `kubectl wait`
//! expect, and as Argo CD's health with the committed Lua check
//! (`deploy/argocd/slicestatus-health.lua`, run by the same program as Argo CD
//! runs it); Events are recorded; objects of departed slices are deleted; a
//! hand edit of the spec does nothing. Without the control plane: the argocd-cm
//! snippet in docs/status-objects.md is that Lua script.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::k8s::*;
use common::status::one_slice;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use slicectl::engine::Approval;
use slicectl::status_object::{SliceStatus, StatusWriter};

/// The kstatus program, built once per content of `tests/kstatus/` into the
/// testbin cache ([`common::gotool::build`]).
fn kstatus_bin() -> PathBuf {
    common::gotool::build("tests/kstatus", "kstatus")
}

/// What kstatus computes for each object of a `kubectl get -o json` list.
fn kstatus(list_json: &str) -> BTreeMap<String, (String, String)> {
    run_kstatus(&[], list_json)
}

/// The committed Argo CD health check (the argocd-cm snippet in docs/status-objects.md).
fn health_lua() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/argocd/slicestatus-health.lua")
}

/// The health Argo CD gives each object of a `kubectl get -o json` list
/// with the committed Lua check, evaluated as Argo CD runs it
/// (`kstatus argocd SCRIPT`, tests/kstatus/argocd.go).
fn argocd_health(list_json: &str) -> BTreeMap<String, (String, String)> {
    let script = health_lua();
    run_kstatus(&["argocd".as_ref(), script.as_os_str()], list_json)
}

/// `name → (status, message)` printed by the kstatus program run with
/// `args` on `list_json`.
fn run_kstatus(args: &[&std::ffi::OsStr], list_json: &str) -> BTreeMap<String, (String, String)> {
    use std::io::Write;
    let mut child = Command::new(kstatus_bin())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kstatus");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(list_json.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["name"].as_str().unwrap().to_string(),
                (
                    v["status"].as_str().unwrap().to_string(),
                    v["message"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect()
}

fn list_json(ns: &str) -> String {
    ok(&kubectl(&["get", "slicestatuses", "-n", ns, "-o", "json"]))
}

fn kstatus_of(ns: &str) -> BTreeMap<String, (String, String)> {
    kstatus(&list_json(ns))
}

/// The message of the condition `type_` of object `name` in a list.
fn condition_message(list_json: &str, name: &str, type_: &str) -> String {
    let list: serde_json::Value = serde_json::from_str(list_json).unwrap();
    let obj = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no object {name}"));
    let c = obj["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("{name} has no {type_} condition"));
    c["message"].as_str().unwrap_or("").to_string()
}

#[tokio::test]
async fn status_objects_read_back_as_kstatus_and_kubectl_expect() {
    let client = client().await;
    // The committed CRD applies server-side and is established.
    apply_crd();
    let ns = namespace(&client, "slst").await;
    let api: Api<SliceStatus> = Api::namespaced(client.clone(), &ns);

    // A fresh object nobody has written a status for: the CRD's default
    // makes it InProgress, not Current.
    let fresh = serde_json::json!({
        "apiVersion": "slicectl.dev/v1alpha1", "kind": "SliceStatus",
        "metadata": {"name": "fresh"}, "spec": {}
    });
    let got = api
        .patch(
            "fresh",
            &PatchParams::apply("slicectl-tests"),
            &Patch::Apply(&fresh),
        )
        .await
        .expect("create a bare object");
    assert_eq!(got.status.and_then(|s| s.observed_generation), Some(-1));
    let list = list_json(&ns);
    assert_eq!(kstatus(&list)["fresh"].0, "InProgress");
    // Argo CD: Progressing, not Healthy.
    let a = argocd_health(&list);
    assert_eq!(
        a["fresh"],
        (
            "Progressing".to_string(),
            "Waiting for slicectl to write the status".to_string()
        ),
        "{a:?}"
    );
    api.delete("fresh", &DeleteParams::default())
        .await
        .expect("delete");

    // One object per state, written by the writer.
    let mut set = one_slice("ready", Approval::Auto, false).await;
    set.objects.extend(
        one_slice("inflight", Approval::Declined, false)
            .await
            .objects,
    );
    set.objects
        .extend(one_slice("stalled", Approval::Auto, true).await.objects);
    let writer = StatusWriter::new(client.clone(), &ns, Some("it".into()));
    let summary = writer.write(&set).await.expect("write");
    assert_eq!(summary.written, ["ready", "inflight", "stalled"]);
    assert!(
        summary.event_errors.is_empty(),
        "{:?}",
        summary.event_errors
    );

    let list = list_json(&ns);
    let k = kstatus(&list);
    assert_eq!(k["ready"].0, "Current", "{k:?}");
    assert_eq!(k["inflight"].0, "InProgress", "{k:?}");
    assert_eq!(k["stalled"].0, "Failed", "{k:?}");
    assert!(k["stalled"].1.contains("name_taken"), "{k:?}");

    // The same objects through the Argo CD health check, each with the
    // message of the condition that decides it.
    let a = argocd_health(&list);
    let expect = |status: &str, name: &str, condition: &str| {
        (
            status.to_string(),
            condition_message(&list, name, condition),
        )
    };
    assert_eq!(a["ready"], expect("Healthy", "ready", "Ready"), "{a:?}");
    assert_eq!(
        a["inflight"],
        expect("Progressing", "inflight", "Reconciling"),
        "{a:?}"
    );
    assert_eq!(
        a["stalled"],
        expect("Degraded", "stalled", "Stalled"),
        "{a:?}"
    );
    assert!(!a["ready"].1.is_empty(), "{a:?}");
    assert!(!a["inflight"].1.is_empty(), "{a:?}");
    assert!(a["stalled"].1.contains("name_taken"), "{a:?}");

    // kubectl wait: met for the ready one, not for the stalled one.
    ok(&kubectl(&[
        "wait",
        "-n",
        &ns,
        "--for=condition=Ready",
        "--timeout=30s",
        "slicestatus/ready",
    ]));
    let o = kubectl(&[
        "wait",
        "-n",
        &ns,
        "--for=condition=Ready",
        "--timeout=2s",
        "slicestatus/stalled",
    ]);
    assert!(!o.status.success(), "a stalled slice is not Ready");

    // The printer columns, through the short name.
    let table = ok(&kubectl(&["get", "slst", "-n", &ns]));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "READY", "REASON", "NODES", "AGE"],
        "{table}"
    );
    let ready: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("ready "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        &ready[..4],
        ["ready", "True", "Converged", "1/1"],
        "{table}"
    );

    // A status written for an older generation is InProgress for kstatus.
    let live = api.get("ready").await.unwrap();
    let mut stale = live.status.clone().unwrap();
    stale.observed_generation = Some(live.metadata.generation.unwrap() - 1);
    api.patch_status(
        "ready",
        &PatchParams::apply("slicectl").force(),
        &Patch::Apply(serde_json::json!({
            "apiVersion": "slicectl.dev/v1alpha1", "kind": "SliceStatus", "status": stale
        })),
    )
    .await
    .unwrap();
    let list = list_json(&ns);
    let k = kstatus(&list);
    assert_eq!(k["ready"].0, "InProgress", "{k:?}");
    assert!(k["ready"].1.contains("observed generation"), "{k:?}");
    // Argo CD: Progressing too, with kstatus's message, though Ready=True.
    let a = argocd_health(&list);
    assert_eq!(
        a["ready"],
        ("Progressing".to_string(), k["ready"].1.clone()),
        "{a:?}"
    );

    // Editing the spec by hand does nothing: the field is pruned, the
    // generation stays.
    let o = kubectl(&[
        "patch",
        "-n",
        &ns,
        "slicestatus/inflight",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":5,"topology":"4x4"}}"#,
    ]);
    ok(&o);
    let live = api.get("inflight").await.unwrap();
    assert_eq!(
        serde_json::to_value(&live.spec).unwrap(),
        serde_json::json!({})
    );
    assert_eq!(live.metadata.generation, Some(1));

    // Events on the objects, from the slicectl reporter.
    let events: Vec<Event> = Api::<Event>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let of = |name: &str| -> Vec<(String, String)> {
        events
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| {
                assert_eq!(e.reporting_controller.as_deref(), Some("slicectl"));
                (
                    e.type_.clone().unwrap_or_default(),
                    e.reason.clone().unwrap_or_default(),
                )
            })
            .collect()
    };
    assert_eq!(of("ready"), [("Normal".to_string(), "Created".to_string())]);
    assert!(of("stalled").contains(&("Warning".to_string(), "Refused".to_string())));
    assert!(of("inflight").is_empty());

    // A second write at a later time (of the stale status: written) keeps
    // the Ready condition's transition time; a set without two of the
    // slices deletes their objects.
    let before = api.get("ready").await.unwrap().status.unwrap().conditions[0]
        .last_transition_time
        .clone();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again = one_slice("ready", Approval::Auto, false).await;
    let summary = writer.write(&again).await.expect("write again");
    assert_eq!(summary.written, ["ready"]);
    let mut deleted = summary.deleted.clone();
    deleted.sort();
    assert_eq!(deleted, ["inflight", "stalled"]);
    let live = api.get("ready").await.unwrap();
    let status = live.status.unwrap();
    assert_eq!(status.conditions[0].last_transition_time, before);
    assert_eq!(status.observed_generation, live.metadata.generation);
    assert!(
        api.get_opt("stalled")
            .await
            .unwrap()
            .is_none_or(|o| o.metadata.deletion_timestamp.is_some())
    );
    assert_eq!(kstatus_of(&ns)["ready"].0, "Current");
    assert_eq!(argocd_health(&list_json(&ns))["ready"].0, "Healthy");

    // A write of an unchanged slice sends nothing: the object's
    // resourceVersion and its managedFields (their times) stay as they were.
    let first = api.get("ready").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let summary = writer.write(&again).await.expect("write unchanged");
    assert!(summary.written.is_empty(), "{summary:?}");
    assert_eq!(summary.unchanged, 1);
    let unchanged = api.get("ready").await.unwrap();
    assert_eq!(
        unchanged.metadata.resource_version,
        first.metadata.resource_version
    );
    assert_eq!(
        unchanged.metadata.managed_fields,
        first.metadata.managed_fields
    );

    // Another manager's change of a label slicectl sets is applied back
    // (the status, unchanged, is not sent again).
    ok(&kubectl(&[
        "label",
        "-n",
        &ns,
        "slicestatus",
        "ready",
        "slicectl.dev/slice=edited",
        "--overwrite",
    ]));
    let summary = writer
        .write(&again)
        .await
        .expect("write after a label edit");
    assert_eq!(summary.written, ["ready"]);
    let live = api.get("ready").await.unwrap();
    assert_eq!(live.labels()["slicectl.dev/slice"], "ready");
    assert_eq!(
        live.status.as_ref().unwrap().conditions[0].last_transition_time,
        before
    );
    let summary = writer.write(&again).await.expect("write once more");
    assert_eq!((summary.written.len(), summary.unchanged), (0, 1));

    // A changed condition is written, with a new transition time for the
    // condition that changed and none kept from before.
    let broken = one_slice("ready", Approval::Auto, true).await;
    let summary = writer.write(&broken).await.expect("write a change");
    assert_eq!(summary.written, ["ready"]);
    let live = api.get("ready").await.unwrap();
    let status = live.status.unwrap();
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    assert!(ready.last_transition_time.0 > before.0, "{ready:?}");
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Stalled" && c.status == "True")
    );
    assert_eq!(status.observed_generation, live.metadata.generation);
    assert_ne!(
        live.metadata.resource_version,
        unchanged.metadata.resource_version
    );

    let _ = Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::default())
        .await;
}

/// The Lua script of `deploy/argocd/slicestatus-health.lua`: the file minus
/// its header (the leading `--` lines and the blank line after them).
fn health_script_body() -> String {
    let text = std::fs::read_to_string(health_lua()).expect("deploy/argocd/slicestatus-health.lua");
    let (header, body) = text
        .split_once("\n\n")
        .expect("a header, a blank line, the script");
    assert!(
        header.lines().all(|l| l.starts_with("--")),
        "the header is Lua comments only:\n{header}"
    );
    assert!(!body.trim().is_empty());
    body.to_string()
}

#[test]
fn docs_argocd_snippet_is_the_committed_health_script() {
    const KEY: &str = "resource.customizations.health.slicectl.dev_SliceStatus";
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/status-objects.md"),
    )
    .expect("docs/status-objects.md");
    // The ```yaml block whose first line is the key.
    let lines: Vec<&str> = doc.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with(&format!("{KEY}: |")))
        .expect("the argocd-cm snippet in docs/status-objects.md");
    assert_eq!(
        lines[start - 1],
        "```yaml",
        "the snippet opens a yaml block"
    );
    let len = lines[start..]
        .iter()
        .position(|l| *l == "```")
        .expect("the snippet's block ends");
    let block = lines[start..start + len].join("\n") + "\n";
    // As argocd-cm's data would read it: a YAML map with that one key.
    let data: BTreeMap<String, String> =
        serde_saphyr::from_str(&block).expect("the snippet is YAML");
    assert_eq!(data.keys().collect::<Vec<_>>(), [KEY]);
    let body = health_script_body();
    if data[KEY] != body {
        let diff = similar::TextDiff::from_lines(body.as_str(), data[KEY].as_str());
        panic!(
            "docs/status-objects.md's argocd-cm snippet differs from deploy/argocd/slicestatus-health.lua \
             (below its header); make the snippet the script, indented two spaces:\n{}",
            diff.unified_diff()
                .header("slicestatus-health.lua", "docs/status-objects.md")
        );
    }
}

/// Sharded, a replica lists only the objects that may be its own: the API
/// server answers the held shards' labels and the objects whose label names
/// no shard of this count (none, or another `--shards`'s), and nothing of
/// the other shards reaches the replica.
#[tokio::test]
async fn a_sharded_replica_lists_only_the_objects_that_may_be_its_own() {
    use slicectl::controller::shard::{SHARD_LABEL, ShardScope, shard_of};
    let client = client().await;
    apply_crd();
    let ns = namespace(&client, "slst-shard").await;
    let api: Api<SliceStatus> = Api::namespaced(client.clone(), &ns);
    const SHARDS: u32 = 3;
    // (name, shard label); unlabelled and out-of-range objects belong to
    // the shard of their name (they have no status naming a Target).
    let mut objects: Vec<(String, Option<String>)> = Vec::new();
    for k in 0..SHARDS {
        for i in 0..3 {
            objects.push((format!("s{k}-{i}"), Some(k.to_string())));
        }
    }
    for i in 0..12 {
        objects.push((format!("bare-{i}"), None));
        objects.push((format!("other-n-{i}"), Some("7".into())));
    }
    for (name, label) in &objects {
        let mut labels = serde_json::json!({"app.kubernetes.io/managed-by": "slicectl"});
        if let Some(l) = label {
            labels[SHARD_LABEL] = serde_json::json!(l);
        }
        let body = serde_json::json!({
            "apiVersion": "slicectl.dev/v1alpha1", "kind": "SliceStatus",
            "metadata": {"name": name, "labels": labels}, "spec": {}
        });
        api.patch(
            name,
            &PatchParams::apply("slicectl-tests"),
            &Patch::Apply(&body),
        )
        .await
        .expect("create an object");
    }
    let mut writer = StatusWriter::new(client.clone(), &ns, Some("it".into()));
    writer.set_scope(Some(ShardScope {
        shards: SHARDS,
        held: [1].into(),
    }));
    let got: Vec<String> = writer.existing().await.expect("list").into_keys().collect();
    let mut want: Vec<String> = objects
        .iter()
        .filter(|(name, label)| match label.as_deref() {
            Some("1") => true,
            Some("0" | "2") => false,
            _ => shard_of(name, SHARDS) == 1,
        })
        .map(|(name, _)| name.clone())
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert!(
        want.iter().any(|n| n.starts_with("bare-"))
            && want.iter().any(|n| n.starts_with("other-n-")),
        "the fixture has unlabelled and out-of-range objects of shard 1: {want:?}"
    );
    // What the API server answers the writer's lists: no object of shards
    // 0 and 2, whatever the writer then filters; and together every object
    // of shard 1.
    let scope = ShardScope {
        shards: SHARDS,
        held: [1].into(),
    };
    let selectors = slicectl::status_object::writer::list_selectors(Some(&scope));
    assert_eq!(selectors.len(), 2, "{selectors:?}");
    let mut answered = 0;
    for selector in &selectors {
        let listed = api
            .list(&ListParams::default().labels(selector))
            .await
            .expect("list");
        for o in &listed.items {
            let l = o.labels().get(SHARD_LABEL).cloned().unwrap_or_default();
            assert!(l != "0" && l != "2", "{selector}: {} ({l})", o.name_any());
        }
        answered += listed.items.len();
    }
    assert_eq!(
        answered,
        3 + 24,
        "shard 1's three, and every unlabelled or out-of-range one"
    );
    let _ = Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::background())
        .await;
}
