//! What observation hands the planner: the live resources' bodies as the
//! cloud returns them, read by each kind's own parser, and a cluster's
//! Nodes, Pods and JobSets as the Kubernetes API returns them; planned
//! against a fixed fleet and rendered.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Map, Value};

use crate::plan::workload::{ClusterWorkloads, Workloads};
use crate::plan::{self, Inventory, LiveResource, OperationRecord, PlanOptions, Scope, Unseen};
use crate::resource::KubeRef;
use crate::spec::Fleet;
use crate::workload::{DemandView, Observed};

/// The fleets a `live` input is planned against, by name: every golden
/// case's specs (`golden/NAME`), the example fleet (`specs`) and every
/// example (`examples/NAME`), read once from this checkout.
fn fleets() -> &'static BTreeMap<String, Fleet> {
    static FLEETS: OnceLock<BTreeMap<String, Fleet>> = OnceLock::new();
    FLEETS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut dirs = vec![("specs".to_string(), root.join("specs"))];
        for (prefix, parent, sub) in [
            ("golden", "tests/golden", "specs"),
            ("examples", "examples", ""),
        ] {
            let Ok(entries) = std::fs::read_dir(root.join(parent)) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let specs = e.path().join(sub);
                let specs = if specs.join("specs").is_dir() {
                    specs.join("specs")
                } else {
                    specs
                };
                dirs.push((format!("{prefix}/{name}"), specs));
            }
        }
        dirs.into_iter()
            .filter_map(|(name, dir)| Some((name, crate::source::load_dir(&dir).ok()?)))
            .collect()
    })
}

/// The Kubernetes APIs the fleet's Targets reach.
fn kube_refs(fleet: &Fleet) -> Vec<KubeRef> {
    let mut out: Vec<KubeRef> = Vec::new();
    for t in fleet.targets.values() {
        let scopes = crate::kinds::node_pool::nodes::kube_scope(t)
            .into_iter()
            .chain(crate::kinds::gce::kube_scope(t));
        for s in scopes {
            if let Scope::Kube(k) = s
                && !out.contains(&k)
            {
                out.push(k);
            }
        }
    }
    out
}

/// A live body read by its kind's parser; what the kind keeps reads back
/// the same.
fn parsed(kind: &dyn crate::kind::RegisteredKind, body: Value) -> Option<plan::Body> {
    let id = crate::plan::Kind::id(kind);
    let b = kind.parse(body).ok()?;
    let json = b.to_json();
    let again = kind
        .parse(json.clone())
        .unwrap_or_else(|e| panic!("a {} body read back fails: {e}\n{json}", id.as_str()));
    assert_eq!(again.to_json(), json, "{} body round trip", id.as_str());
    Some(b)
}

/// The cluster's Nodes, Pods and JobSets (`{"nodes": [...], "pods": [...],
/// "jobsets": [...]}`) as observation reads them.
fn cluster_views(v: &Value) -> (ClusterWorkloads, DemandView) {
    let list = |key: &str| v.get(key).cloned().unwrap_or(Value::Array(Vec::new()));
    let nodes = serde_json::from_value::<Vec<Node>>(list("nodes"));
    let pods = serde_json::from_value::<Vec<Pod>>(list("pods"));
    let jobsets = list("jobsets");
    match (nodes, pods, jobsets.as_array()) {
        (Ok(nodes), Ok(pods), Some(jobsets)) => {
            let _ = crate::kinds::node_pool::nodes::group(&nodes);
            for p in &pods {
                let _ = crate::observe::workloads::makes_busy(p);
                let _ = crate::observe::workloads::bound_pod(p);
            }
            (
                ClusterWorkloads::Seen(crate::observe::workloads::join(&nodes, &pods)),
                DemandView::Seen(Observed {
                    jobsets: jobsets.iter().map(crate::observe::demand::jobset).collect(),
                    pending: pods
                        .iter()
                        .filter_map(crate::observe::demand::pending_pod)
                        .collect(),
                }),
            )
        }
        _ => (
            ClusterWorkloads::Unreadable("cannot decode".into()),
            DemandView::Unreadable("cannot decode".into()),
        ),
    }
}

/// Reads the input's inventory (unknown keys and entries that do not
/// decode are left out: the target explores what decodes).
fn inventory(input: &Map<String, Value>, fleet: &Fleet) -> Inventory {
    let mut inv = Inventory::default();
    for kind in crate::kinds::plan_kinds() {
        let id = kind.id();
        let Some(reg) = crate::kinds::get(id) else {
            continue;
        };
        let Some(entries) = input.get(id.as_str()).and_then(Value::as_array) else {
            continue;
        };
        for e in entries {
            let Ok(scope) =
                serde_json::from_value::<Scope>(e.get("scope").cloned().unwrap_or_default())
            else {
                continue;
            };
            let Some(body) = parsed(reg, e.get("body").cloned().unwrap_or_default()) else {
                continue;
            };
            inv.resources
                .entry(id)
                .or_default()
                .push(LiveResource { scope, body });
        }
        if let Some(ops) = input.get("operations").and_then(|o| o.get(id.as_str()))
            && let Ok(ops) = serde_json::from_value::<Vec<OperationRecord>>(ops.clone())
        {
            inv.operations.entry(id).or_default().extend(ops);
        }
    }
    for u in input
        .get("unobserved")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Ok(scope), Some(code), Some(cause)) = (
            serde_json::from_value::<Scope>(u.get("scope").cloned().unwrap_or_default()),
            u.get("code").and_then(Value::as_str),
            u.get("cause").and_then(Value::as_str),
        ) {
            let unseen = Unseen {
                code: code.to_string(),
                cause: cause.to_string(),
            };
            inv.unobserved.insert(scope, unseen);
        }
    }
    if let Some(cluster) = input.get("cluster") {
        let (workloads, demand) = cluster_views(cluster);
        let demand_clusters = crate::observe::demand_clusters(fleet);
        let observed_at = input
            .get("now")
            .and_then(Value::as_str)
            .and_then(|t| t.parse().ok())
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let mut clusters = BTreeMap::new();
        for k in kube_refs(fleet) {
            if demand_clusters.contains(&k) {
                inv.demand.insert(k.clone(), demand.clone());
            }
            clusters.insert(k, workloads.clone());
        }
        inv.workloads = Workloads {
            observed_at: Some(observed_at),
            clusters,
            simulated: input
                .get("simulated")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
    }
    inv
}

/// Target `live`: a JSON object in the form of a golden case's `live.json`
/// (`tests/golden/README.md`: one key per kind, `operations`,
/// `unobserved`), plus `fleet` (which fleet to plan against: `specs`,
/// `golden/NAME`, `examples/NAME`; the first one otherwise), `destroy`
/// (plan a destroy), and `cluster` (`nodes`, `pods`, `jobsets` as the
/// Kubernetes API lists them, seen in every cluster of the fleet), with
/// `now` when it was observed. Planned and rendered as text and JSON.
pub fn live(data: &[u8]) {
    let Ok(Value::Object(input)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let fleets = fleets();
    let Some(fleet) = input
        .get("fleet")
        .and_then(Value::as_str)
        .and_then(|f| fleets.get(f))
        .or_else(|| fleets.values().next())
    else {
        return;
    };
    let inv = inventory(&input, fleet);
    let kinds = crate::kinds::plan_kinds();
    let planned = if input.get("destroy").and_then(Value::as_bool) == Some(true) {
        plan::plan_destroy(fleet, &inv, &kinds, 10)
    } else {
        plan::plan(fleet, &inv, &kinds, &PlanOptions::default())
    };
    match planned {
        Ok(p) => {
            let _ = plan::human::render(&p, false);
            let json = p.to_json();
            let _ = plan::view::effect(&json);
            let _ = p.effect();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}
