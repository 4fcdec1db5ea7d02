//! Golden plans, Terraform-style: every directory under `tests/golden/` is
//! one case. It holds the specs, the live inventory and the expected plan,
//! and this test plans the one against the other and compares.
//!
//! A case directory contains:
//!
//! - `README.md`: what the case shows (for people; not read).
//! - `specs/`: a spec directory, loaded like `slicectl plan specs/`.
//! - `live.json`: the observed inventory (below).
//! - `options.json` (optional): `{"mode": "apply" | "destroy",
//!   "max_destroy": N, "allow_empty_source": bool}`; every key is optional
//!   (defaults: apply, the CLI's `--max-destroy` default, false).
//! - The expected output: `plan.txt` (the plan as `slicectl plan` prints it,
//!   without colour) and `plan.json` (`plan --output json`), or `error.txt`
//!   when planning refuses the whole plan (empty source, too many
//!   destructive actions, …).
//!
//! `live.json` has one key per registered kind (its id: `node_pool`,
//! `workload_policy`) listing the live resources of that kind, and
//! `operations`, keyed by kind too, listing operations as observation
//! records them, and `unobserved`, the scopes whose listing failed
//! (`[{"scope": {...}, "code": "target_not_found", "cause": "..."}]`).
//! Bodies are Google's JSON of the resource (a GKE `NodePool`,
//! a compute `ResourcePolicy`) as the API returns it, server defaults
//! included, read by the kind's own parser. Every key is optional; an
//! unknown key, or a body field the kind does not read (a typo would
//! otherwise silently test nothing), fails the case.
//!
//! ```json
//! {
//!   "node_pool": [
//!     {"scope": {"scope": "cluster", "project": "p", "location": "us-central2", "name": "train"},
//!      "body": {"name": "llm-0", "config": {...}, "status": "RUNNING", ...}}
//!   ],
//!   "workload_policy": [
//!     {"scope": {"scope": "region", "project": "p", "region": "us-central2"},
//!      "body": {"name": "ironwood-0-wp", "workloadPolicy": {...}, "status": "READY", ...}}
//!   ],
//!   "operations": {
//!     "node_pool": [
//!       {"scope": {...}, "target": "llm-0", "name": "operation-1",
//!        "operation_type": "CREATE_NODE_POOL", "running": true}
//!     ]
//!   }
//! }
//! ```
//!
//! Regenerate the expected files after a deliberate change with
//! `SLICECTL_UPDATE_GOLDEN=1 cargo test --test integration golden::`, then review the diff.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use similar::TextDiff;
use slicectl::plan::{self, Inventory, KindId, LiveResource, OperationRecord, PlanOptions, Scope};

/// Set to `1` to (re)write the expected files instead of comparing.
const UPDATE_ENV: &str = "SLICECTL_UPDATE_GOLDEN";

/// Files a case directory may hold.
const KNOWN_FILES: &[&str] = &[
    "README.md",
    "specs",
    "live.json",
    "options.json",
    "plan.txt",
    "plan.json",
    "error.txt",
];

/// One live resource in `live.json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LiveEntry {
    scope: Scope,
    body: Value,
}

/// `options.json`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default)]
    mode: Mode,
    max_destroy: Option<usize>,
    allow_empty_source: Option<bool>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    #[default]
    Apply,
    Destroy,
}

/// The registered kind named `key` in `live.json`.
fn kind_id(key: &str, what: &str) -> Result<KindId, String> {
    let kinds = slicectl::kinds::plan_kinds();
    kinds
        .iter()
        .map(|k| k.id())
        .find(|id| id.as_str() == key)
        .ok_or_else(|| {
            let known: Vec<&str> = kinds.iter().map(|k| k.id().as_str()).collect();
            format!(
                "live.json: unknown {what} {key:?}; the registered kinds are {}",
                known.join(", ")
            )
        })
}

/// Whether a JSON value is a default (`null`, `false`, `0`, `""`, `[]`, or an
/// object of defaults): a field the wire types leave out when serialising.
fn is_default(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.values().all(is_default),
    }
}

/// Paths in `input` that do not come back out of `parsed` (the body the
/// kind read, as JSON): fields the kind does not read, most likely typos,
/// which would otherwise silently test nothing. Defaults may be dropped.
fn dropped(path: &str, input: &Value, parsed: Option<&Value>, out: &mut Vec<String>) {
    match (input, parsed) {
        (_, None) => {
            if !is_default(input) {
                out.push(path.to_string());
            }
        }
        (Value::Object(i), Some(Value::Object(p))) => {
            for (k, v) in i {
                dropped(&format!("{path}.{k}"), v, p.get(k), out);
            }
        }
        (Value::Array(i), Some(Value::Array(p))) if i.len() == p.len() => {
            for (n, (a, b)) in i.iter().zip(p).enumerate() {
                dropped(&format!("{path}[{n}]"), a, Some(b), out);
            }
        }
        (i, Some(p)) => {
            if i != p {
                out.push(format!("{path} (read back as {p})"));
            }
        }
    }
}

/// Output-only fields GKE sends that a kind deliberately does not keep
/// (nothing reads them): present in a real answer, so in `live.json`, and
/// not typos.
const NOT_KEPT: &[(&str, &str)] = &[
    ("node_pool", "body.selfLink"),
    ("node_pool", "body.etag"),
    ("node_pool", "body.instanceGroupUrls"),
];

fn read_inventory(path: &Path) -> Result<Inventory, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("live.json: {e}"))?;
    let file: serde_json::Map<String, Value> =
        serde_json::from_str(&text).map_err(|e| format!("live.json is not a JSON object: {e}"))?;
    let mut inv = Inventory::default();
    // No Kubernetes side: these cases plan the cloud's resources only, and
    // no pod runs anywhere, as under `--sim` (a cluster not read is busy
    // otherwise, and every destructive step would be held: the gate's own
    // cases are src/plan/tests/gate.rs).
    inv.workloads.simulated = true;
    for (key, value) in file {
        if key == "unobserved" {
            // Scopes whose listing failed: `[{"scope": …, "code": …, "cause": …}]`.
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Failed {
                scope: Scope,
                code: String,
                cause: String,
            }
            let failed: Vec<Failed> =
                serde_json::from_value(value).map_err(|e| format!("live.json: unobserved: {e}"))?;
            for f in failed {
                inv.unobserved.insert(
                    f.scope,
                    plan::Unseen {
                        code: f.code,
                        cause: f.cause,
                    },
                );
            }
            continue;
        }
        if key == "operations" {
            let by_kind: BTreeMap<String, Vec<OperationRecord>> =
                serde_json::from_value(value).map_err(|e| format!("live.json: operations: {e}"))?;
            for (k, ops) in by_kind {
                let id = kind_id(&k, "kind under \"operations\"")?;
                inv.operations.entry(id).or_default().extend(ops);
            }
            continue;
        }
        let id = kind_id(&key, "key (neither \"operations\" nor a kind)")?;
        let kind = slicectl::kinds::get(id)
            .ok_or_else(|| format!("live.json: kind {key:?} is not registered"))?;
        let entries: Vec<LiveEntry> =
            serde_json::from_value(value).map_err(|e| format!("live.json: {key}: {e}"))?;
        for (n, e) in entries.into_iter().enumerate() {
            let body = kind
                .parse(e.body.clone())
                .map_err(|err| format!("live.json: {key}[{n}].body: {err}"))?;
            let mut lost = Vec::new();
            dropped("body", &e.body, Some(&body.to_json()), &mut lost);
            lost.retain(|p| !NOT_KEPT.contains(&(key.as_str(), p.as_str())));
            if !lost.is_empty() {
                return Err(format!(
                    "live.json: {key}[{n}]: fields the {key} kind does not read (typo?): {}",
                    lost.join(", ")
                ));
            }
            inv.resources.entry(id).or_default().push(LiveResource {
                scope: e.scope,
                body,
            });
        }
    }
    Ok(inv)
}

fn read_options(dir: &Path) -> Result<Options, String> {
    let path = dir.join("options.json");
    if !path.exists() {
        return Ok(Options::default());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| format!("options.json: {e}"))?;
    let o: Options =
        serde_json::from_str(&text).map_err(|e| format!("options.json is not valid: {e}"))?;
    if o.mode == Mode::Destroy && o.allow_empty_source.is_some() {
        return Err("options.json: allow_empty_source has no effect in destroy mode".into());
    }
    Ok(o)
}

/// The files a case produces: name → content (`None`: must not exist).
fn outputs(dir: &Path) -> Result<Vec<(&'static str, Option<String>)>, String> {
    let fleet =
        slicectl::source::load_dir(&dir.join("specs")).map_err(|e| format!("specs: {e}"))?;
    let inv = read_inventory(&dir.join("live.json"))?;
    let opts = read_options(dir)?;
    let defaults = PlanOptions::default();
    let max_destroy = opts.max_destroy.unwrap_or(defaults.max_destroy);
    let kinds = slicectl::kinds::plan_kinds();
    let planned = match opts.mode {
        Mode::Apply => plan::plan(
            &fleet,
            &inv,
            &kinds,
            &PlanOptions {
                max_destroy,
                allow_empty_source: opts
                    .allow_empty_source
                    .unwrap_or(defaults.allow_empty_source),
                ..PlanOptions::default()
            },
        ),
        Mode::Destroy => plan::plan_destroy(&fleet, &inv, &kinds, max_destroy),
    };
    Ok(match planned {
        Ok(p) => {
            let json = serde_json::to_string_pretty(&p.to_json())
                .map_err(|e| format!("plan JSON: {e}"))?;
            vec![
                ("plan.txt", Some(plan::human::render(&p, false))),
                ("plan.json", Some(json + "\n")),
                ("error.txt", None),
            ]
        }
        Err(e) => vec![
            ("plan.txt", None),
            ("plan.json", None),
            ("error.txt", Some(format!("{e}\n"))),
        ],
    })
}

/// Runs one case: the problems found, empty when it passes.
fn run_case(dir: &Path, update: bool) -> Vec<String> {
    let mut problems = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !KNOWN_FILES.contains(&name.as_str()) {
                    problems.push(format!(
                        "unexpected file {name:?} (a case holds only {})",
                        KNOWN_FILES.join(", ")
                    ));
                }
            }
        }
        Err(e) => return vec![format!("cannot list: {e}")],
    }
    let outputs = match outputs(dir) {
        Ok(o) => o,
        Err(e) => {
            problems.push(e);
            return problems;
        }
    };
    for (file, actual) in outputs {
        let path = dir.join(file);
        let expected = std::fs::read_to_string(&path).ok();
        if update {
            let result = match &actual {
                Some(text) if expected.as_deref() != Some(text) => std::fs::write(&path, text),
                None if path.exists() => std::fs::remove_file(&path),
                _ => Ok(()),
            };
            if let Err(e) = result {
                problems.push(format!("cannot update {file}: {e}"));
            }
            continue;
        }
        match (expected, actual) {
            (Some(e), Some(a)) if e == a => {}
            (Some(e), Some(a)) => {
                let diff = TextDiff::from_lines(&e, &a)
                    .unified_diff()
                    .context_radius(3)
                    .header(&format!("{file} (expected)"), &format!("{file} (actual)"))
                    .to_string();
                problems.push(format!("{file} differs:\n{diff}"));
            }
            (None, Some(_)) => problems.push(format!(
                "{file} is missing; run `{UPDATE_ENV}=1 cargo test --test integration golden::` to write it, \
                 then review it"
            )),
            (Some(_), None) => problems.push(format!(
                "{file} exists but this case produces no {file} (the plan {}); \
                 run `{UPDATE_ENV}=1 cargo test --test integration golden::` to remove it",
                if file == "error.txt" {
                    "succeeds"
                } else {
                    "is refused"
                }
            )),
            (None, None) => {}
        }
    }
    problems
}

fn case_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn golden_plans() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var(UPDATE_ENV).is_ok_and(|v| v == "1");
    let dirs = case_dirs(&root);
    assert!(!dirs.is_empty(), "no golden cases under {}", root.display());
    let mut report = String::new();
    let mut failed = 0;
    for dir in &dirs {
        let problems = run_case(dir, update);
        if problems.is_empty() {
            continue;
        }
        failed += 1;
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        let _ = writeln!(report, "=== tests/golden/{name}");
        for p in problems {
            let _ = writeln!(report, "{p}");
        }
        report.push('\n');
    }
    assert!(
        failed == 0,
        "{failed} of {} golden case(s) failed{}:\n\n{report}",
        dirs.len(),
        if update {
            ""
        } else {
            "; if the new output is intended, run `SLICECTL_UPDATE_GOLDEN=1 cargo test --test integration golden::` and review the diff"
        }
    );
}
