//! What is live: the observed inventory the planner diffs against. Pure
//! data, filled by `crate::observe` from one list per resource kind and
//! location, keyed by kind so that a new kind needs no change here.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::Unseen;
use super::kind::{Kind, KindId, LiveResource, OperationRecord, Scope};

/// Everything observed in one cycle.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// Live resources by kind (managed or not).
    pub resources: BTreeMap<KindId, Vec<LiveResource>>,
    /// Operations by the kind of the resource they act on (running ones,
    /// and recently finished ones where the API lists them).
    pub operations: BTreeMap<KindId, Vec<OperationRecord>>,
    /// Scopes that could not be observed, with why (`--sim` with a
    /// self-managed cluster whose Kubernetes API is not reachable): their
    /// desired resources are left out of the plan, never planned blind.
    pub deferred: BTreeMap<Scope, String>,
    /// Scopes whose listing failed (a deleted cluster, an unreachable
    /// Kubernetes API, a project the credentials cannot see), with why:
    /// every Target that needs one is unobserved and gets no action.
    pub unobserved: BTreeMap<Scope, Unseen>,
    /// Left-behind discovery that failed, per (project, backend): nothing
    /// is pruned there this time.
    pub undiscovered: BTreeMap<(String, &'static str), Unseen>,
    /// The workloads bound to the clusters' Nodes (busy slice replicas).
    pub workloads: super::workload::Workloads,
    /// The JobSets and pending TPU pods of workload-enabled Targets'
    /// clusters ([`crate::workload`]).
    pub demand: crate::workload::DemandViews,
    /// Live resources `slicectl adopt` is taking over: planned as if they
    /// were this reconciler's, with no stored hash (compared field by
    /// field), so the plan shows exactly what adopting them would change
    /// ([`crate::plan::adopt`]). Empty for every other command.
    pub adopting: std::collections::BTreeSet<super::kind::ResourceId>,
    /// Resources a MIG uses (its instance template and workload policy),
    /// each with that MIG: a resource a MIG that stays still uses is never
    /// deleted, and follows the MIG's ownership (`kinds::gce::link`).
    pub held: BTreeMap<super::kind::ResourceId, super::kind::ResourceId>,
    /// Every live resource that uses each resource several may share (the
    /// MIGs that name an instance template or a workload policy): such a
    /// resource is deleted only when none of them stays and no step of the
    /// plan will use it (the gate, `crate::plan::consent`).
    pub users:
        BTreeMap<super::kind::ResourceId, std::collections::BTreeSet<super::kind::ResourceId>>,
}

impl Inventory {
    /// Live resources of one kind.
    pub fn live(&self, kind: KindId) -> &[LiveResource] {
        self.resources.get(&kind).map(Vec::as_slice).unwrap_or(&[])
    }

    fn ops(
        &self,
        kind: KindId,
        scope: &Scope,
        name: &str,
    ) -> impl Iterator<Item = &OperationRecord> {
        self.operations
            .get(&kind)
            .into_iter()
            .flatten()
            .filter(move |o| &o.scope == scope && o.target == name)
    }

    /// The operation running on a resource, if any.
    pub fn running_operation(
        &self,
        kind: KindId,
        scope: &Scope,
        name: &str,
    ) -> Option<&OperationRecord> {
        self.ops(kind, scope, name).find(|o| o.running)
    }

    /// The most recent operation on a resource that finished with an error.
    pub fn last_error(&self, kind: KindId, scope: &Scope, name: &str) -> Option<&OperationRecord> {
        self.ops(kind, scope, name)
            .filter(|o| !o.running && o.error.is_some())
            .max_by(|a, b| a.end_time.cmp(&b.end_time))
    }

    /// A fingerprint of the observed state a plan was computed from: every
    /// live resource (in each kind's fingerprint view, without output-only
    /// noise), the running operations and the scopes that could not be
    /// observed. A saved plan is refused when the
    /// fingerprint of a fresh observation differs.
    pub fn fingerprint(&self, kinds: &[&dyn Kind]) -> String {
        let mut h = Sha256::new();
        // What slicectl only observes (a GKE slice's Nodes) never acts on a
        // plan: a Node turning Ready does not make a saved plan stale.
        for kind in kinds.iter().filter(|k| !k.observe_only()) {
            let id = kind.id();
            // Sorted by scope and name first; each resource's view is built,
            // hashed and dropped in turn, so the fleet's JSON is never held
            // at once (10,000 pools would take hundreds of MB).
            let mut items: Vec<(String, String, &LiveResource)> = self
                .live(id)
                .iter()
                .map(|l| (l.scope.to_string(), kind.name(&l.body), l))
                .collect();
            items.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
            h.update(id.as_str().as_bytes());
            for (scope, name, l) in items {
                h.update(scope.as_bytes());
                h.update(name.as_bytes());
                let view = kind.fingerprint_view(&l.body);
                // Straight into the hash: the same bytes as its JSON text.
                let _ = serde_json::to_writer(Digesting(&mut h), &view);
            }
            let mut running: Vec<&str> = self
                .operations
                .get(&id)
                .into_iter()
                .flatten()
                .filter(|o| o.running)
                .map(|o| o.name.as_str())
                .collect();
            running.sort_unstable();
            h.update(running.join(",").as_bytes());
        }
        // What could not be observed is part of what a plan was made from
        // (hashed only when there is any, so other fingerprints stay).
        for (scope, why) in &self.unobserved {
            h.update(b"unobserved");
            h.update(scope.to_string().as_bytes());
            h.update(why.code.as_bytes());
        }
        hex::encode(&h.finalize()[..16])
    }
}

/// A writer that feeds a SHA-256 (JSON serialised into a hash, with no
/// string in between).
struct Digesting<'a>(&'a mut Sha256);

impl std::io::Write for Digesting<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
