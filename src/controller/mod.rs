//! `slicectl controller`: the in-cluster loop (design §3). The engine, the
//! single-flight loop ([`crate::watch`]) and the last-good store
//! ([`crate::source::last_good`]) are shared with `reconcile --watch`; this
//! module adds what only the controller needs:
//!
//! - [`configmap`]: specs from one ConfigMap through an API watch;
//! - [`capacity`]: the unavailable-capacity cache and per-slice backoff;
//! - [`metrics`]: the Prometheus metrics;
//! - [`server`]: `/healthz`, `/readyz`, `/metrics`;
//! - [`owner`]: the owner reference of the status objects (`--owner-deployment`);
//! - here: the pure helpers of a cycle (which plan actions a capacity hold
//!   leaves out, which slices an invalid file stands for, who we are).
//!
//! The wiring (leader election, the cycle itself) is in `cli/controller.rs`.

pub mod capacity;
pub mod configmap;
pub mod metrics;
pub mod owner;
pub mod server;

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::{ActionKind, Plan};
use crate::source::last_good::Resolved;

/// Removes from `plan` every action of a slice in `held` except deletes
/// (a held slice is still in the specs, so it has none of its own; deletes
/// of what the specs no longer define are never held). Returns the
/// addresses left out, in plan order.
pub fn hold_actions(plan: &mut Plan, held: &BTreeSet<String>) -> Vec<String> {
    if held.is_empty() {
        return Vec::new();
    }
    let mut left_out = Vec::new();
    plan.actions.retain(|a| {
        let keep = a.action == ActionKind::Delete || !held.contains(&a.owner.slice);
        if !keep {
            left_out.push(format!("{} {}", a.action.as_str(), a.address()));
        }
        keep
    });
    plan.summary = plan.count();
    left_out
}

/// Slices defined by a file that is invalid now (held at its last good
/// version) → that file's first located error, as `validate` prints it.
pub fn invalid_slices(resolved: &Resolved) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for file in &resolved.held {
        let Some(d) = resolved
            .diagnostics
            .iter()
            .find(|d| &d.location.file == file)
        else {
            continue;
        };
        for s in resolved.fleet.slices.values() {
            if &s.location.file == file {
                out.insert(s.name.clone(), d.to_string());
            }
        }
    }
    out
}

/// This replica's identity in the Lease and in Events: `POD_NAME`, else
/// the hostname.
pub fn identity() -> String {
    let from_env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    from_env("POD_NAME")
        .or_else(|| from_env("HOSTNAME"))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "slicectl".to_string())
}

/// The controller's namespace: `--namespace`, else `POD_NAMESPACE`, else
/// `slicectl`.
pub fn namespace(flag: Option<&str>) -> String {
    flag.map(str::to_string)
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| "slicectl".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::SourceFile;
    use std::path::PathBuf;

    const TARGET: &str = "apiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata:\n  name: t\nspec:\n  project: example-project\n  zone: us-central1-a\n  ownerId: team\n  gke:\n    location: us-central1\n    name: c\n";

    fn slice(name: &str, topology: &str) -> String {
        format!(
            "apiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: {name}\nspec:\n  target: t\n  backend: gke\n  accelerator: tpu-v5p-slice\n  topology: \"{topology}\"\n"
        )
    }

    fn file(p: &str, t: &str) -> SourceFile {
        SourceFile {
            path: PathBuf::from(p),
            text: t.to_string(),
        }
    }

    #[test]
    fn an_invalid_file_names_the_slices_its_last_good_version_defines() {
        let mut lg = crate::source::last_good::LastGood::new();
        let good = [
            file("specs/t.yaml", TARGET),
            file("specs/a.yaml", &slice("a", "2x2x1")),
            file("specs/b.yaml", &slice("b", "2x2x1")),
        ];
        let r = lg.resolve(&good);
        let r = match r {
            Ok(r) => r,
            Err(u) => panic!("{:?}", u.diagnostics),
        };
        assert!(r.clean(), "{:?}", r.diagnostics);
        assert!(invalid_slices(&r).is_empty());
        let broken = [
            file("specs/t.yaml", TARGET),
            file("specs/a.yaml", &slice("a", "9x9x9")),
            file("specs/b.yaml", &slice("b", "2x2x1")),
        ];
        let r = lg
            .resolve(&broken)
            .unwrap_or_else(|u| panic!("{:?}", u.diagnostics));
        let inv = invalid_slices(&r);
        assert_eq!(inv.keys().collect::<Vec<_>>(), vec!["a"]);
        assert!(inv["a"].starts_with("specs/a.yaml:"), "{}", inv["a"]);
    }

    #[test]
    fn namespace_prefers_the_flag() {
        assert_eq!(namespace(Some("x")), "x");
    }
}
