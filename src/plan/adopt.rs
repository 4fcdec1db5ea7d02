//! `slicectl adopt` and `slicectl release`, the pure part: which live
//! resources a command takes, the spec files that describe them, and the
//! plan edits that keep only what the command does (ownership labels
//! stamped or removed in place, nothing else).
//!
//! Adoption is planned by the ordinary planner: the generated Slices join
//! the fleet, the adopted resources are marked in
//! [`Inventory::adopting`] (planned as this reconciler's, with no stored
//! hash, so compared field by field), and [`keep_adoptions`] then keeps
//! their in-place label updates and refuses anything else (a replacement,
//! a change of any other field, an operation in flight). The plan a user
//! approves is that proof.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::kind::{Kind, LiveResource, ResourceId, SliceRef};
use super::ownership::Ownership;
use super::{Action, ActionKind, Comparison, Inventory, Plan, Reason, Refusal};
use crate::spec::model::SliceSpec;
use crate::spec::{Fleet, Target};

/// What a live resource slicectl does not own would be, adopted (from
/// [`Kind::adoptable`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Adoptable {
    /// The slice it becomes a replica of (the resource's name without its
    /// replica suffix, or its whole name when it has none).
    pub slice: String,
    /// Its replica index.
    pub replica: u32,
    /// The spec that describes it (`replicas: 1`), or every reason it
    /// cannot be described.
    pub spec: Result<SliceSpec, Vec<String>>,
    /// Its labels, for `--selector`.
    pub labels: BTreeMap<String, String>,
    /// Another tool that still manages it, and what to do first (a
    /// warning in the plan; it is adopted only when named with `--name`).
    pub manager: Option<String>,
    /// Keys of labels the other tool keeps on it that adoption removes
    /// (its hand-off): the only labels besides slicectl's own an adoption
    /// may change.
    pub handoff: Vec<String>,
}

/// Which live resources a command takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// These resources by name (and only these).
    Names(Vec<String>),
    /// Every resource with this label (`key=value`).
    Label(String, String),
    /// Every one in the Target.
    All,
}

/// One slice that `adopt` proposes: the live resources it takes (its
/// replicas in order), the spec file, and the warnings.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The slice's name.
    pub slice: String,
    /// Its live resources, replica 0 first.
    pub resources: Vec<ResourceId>,
    /// The spec (replicas set), or why it cannot be adopted.
    pub spec: Result<SliceSpec, Vec<String>>,
    /// Another tool's management, for the plan's warning.
    pub manager: Option<String>,
    /// Label keys the hand-off from that tool removes.
    pub handoff: Vec<String>,
    /// What its resources use and is adopted with them (a MIG's instance
    /// template and workload policy, [`Inventory::held`]): any change the
    /// plan makes to these refuses the adoption too.
    pub held: Vec<ResourceId>,
}

/// The resources of `target` that `selection` takes, grouped into slices.
/// A resource another tool manages is taken only when named; a resource
/// named that is not adoptable (another owner's, not in the Target) is a
/// proposal with its reason, so nothing named is silently skipped.
pub fn propose(
    target: &Target,
    inv: &Inventory,
    kinds: &[&dyn Kind],
    selection: &Selection,
) -> (Vec<Proposal>, Vec<String>) {
    let mut skipped = Vec::new();
    let mut found: BTreeMap<String, Vec<(ResourceId, Adoptable)>> = BTreeMap::new();
    let mut named_seen = BTreeSet::new();
    for kind in kinds.iter().filter(|k| k.is_primary()) {
        let scopes = kind.scopes(target);
        for l in inv.live(kind.id()) {
            if !scopes.contains(&l.scope) {
                continue;
            }
            let name = kind.name(&l.body);
            let named = matches!(selection, Selection::Names(n) if n.contains(&name));
            if named {
                named_seen.insert(name.clone());
            }
            if let Some(o) = kind.ownership(&l.body) {
                if named {
                    skipped.push(format!(
                        "{} {name:?} is already owned by slicectl (owner id {:?}, slice {}): nothing to adopt",
                        kind.noun(),
                        o.owner,
                        o.slice
                    ));
                }
                continue;
            }
            let Some(a) = kind.adoptable(&l.body, target) else {
                if named {
                    skipped.push(format!(
                        "{} {name:?} is not in Target {}'s zone {}: name the Target it belongs to",
                        kind.noun(),
                        target.name,
                        target.spec.zone
                    ));
                }
                continue;
            };
            let chosen = match selection {
                Selection::Names(_) => named,
                Selection::Label(k, v) => a.labels.get(k) == Some(v),
                Selection::All => true,
            };
            if !chosen {
                continue;
            }
            if let (Some(m), false) = (&a.manager, named) {
                skipped.push(format!(
                    "{} {name:?} is left alone: {m}. Name it with --name to adopt it anyway",
                    kind.noun()
                ));
                continue;
            }
            let id = ResourceId {
                scope: l.scope.clone(),
                kind: kind.id(),
                name,
            };
            found.entry(a.slice.clone()).or_default().push((id, a));
        }
    }
    if let Selection::Names(names) = selection {
        for n in names.iter().filter(|n| !named_seen.contains(*n)) {
            skipped.push(format!(
                "{n:?}: no such node pool or MIG was observed in Target {}",
                target.name
            ));
        }
    }
    let proposals = found
        .into_iter()
        .map(|(slice, members)| {
            let mut p = group(slice, members);
            // What a resource uses and is adopted with it; not what the
            // cluster shares (the device plugin its Nodes use).
            let shared = |id: &ResourceId| kinds.iter().any(|k| k.id() == id.kind && k.shared());
            p.held = inv
                .held
                .iter()
                .filter(|(id, holder)| p.resources.contains(holder) && !shared(id))
                .map(|(id, _)| id.clone())
                .collect();
            p
        })
        .collect();
    (proposals, skipped)
}

/// One slice from its replicas: indices 0..n, the same spec.
fn group(slice: String, mut members: Vec<(ResourceId, Adoptable)>) -> Proposal {
    members.sort_by_key(|(_, a)| a.replica);
    let mut reasons: Vec<String> = Vec::new();
    let mut spec: Option<SliceSpec> = None;
    for (i, (id, a)) in members.iter().enumerate() {
        match &a.spec {
            Err(r) => reasons.extend(r.iter().map(|r| format!("{}: {r}", id.name))),
            Ok(s) => match &spec {
                None => spec = Some(s.clone()),
                Some(first) if first != s => reasons.push(format!(
                    "{} differs from {}: the replicas of one slice are identical; adopt them one at a time under other names",
                    id.name, members[0].0.name
                )),
                Some(_) => {}
            },
        }
        if a.replica as usize != i {
            reasons.push(format!(
                "{} is replica {} of slice {slice}, but replica {i} is not adopted with it: slicectl would create the missing replica. Adopt every replica from 0 together",
                id.name, a.replica
            ));
        }
    }
    let manager = members.iter().find_map(|(_, a)| a.manager.clone());
    let mut handoff: Vec<String> = members
        .iter()
        .flat_map(|(_, a)| a.handoff.iter().cloned())
        .collect();
    handoff.sort();
    handoff.dedup();
    let spec = match spec {
        Some(mut s) if reasons.is_empty() => {
            s.replicas = u32::try_from(members.len()).unwrap_or(u32::MAX);
            Ok(s)
        }
        _ => Err(reasons),
    };
    Proposal {
        slice,
        resources: members.into_iter().map(|(id, _)| id).collect(),
        spec,
        manager,
        handoff,
        held: Vec::new(),
    }
}

/// The spec file of an adopted slice: a provenance header, then the Slice
/// with only the fields set that differ from their defaults.
pub fn spec_file(slice: &str, spec: &SliceSpec, from: &[ResourceId]) -> Result<String, String> {
    let mut value = serde_json::to_value(spec).map_err(|e| e.to_string())?;
    prune(&mut value);
    let doc = serde_json::json!({
        "apiVersion": crate::spec::model::API_VERSION,
        "kind": "Slice",
        "metadata": {"name": slice},
        "spec": value,
    });
    let yaml = serde_saphyr::to_string(&doc).map_err(|e| e.to_string())?;
    let names: Vec<String> = from
        .iter()
        .map(|id| format!("{} {} in {}", id.kind.as_str(), id.name, id.scope))
        .collect();
    Ok(format!(
        "# Written by `slicectl adopt` from the live {}.\n# Review it and commit it; `slicectl plan` then shows no changes.\n{yaml}",
        names.join(", ")
    ))
}

/// Drops what a spec leaves out: nulls, empty maps and lists, `false`,
/// and the defaults a person would not write (`replicas: 1`, an empty
/// lifecycle).
fn prune(v: &mut Value) {
    if let Value::Object(m) = v {
        for child in m.values_mut() {
            prune(child);
        }
        m.retain(|k, c| {
            !(c.is_null()
                || c == &Value::Bool(false)
                || c.as_object().is_some_and(|o| o.is_empty())
                || c.as_array().is_some_and(|a| a.is_empty())
                || (k == "type" && c == "on-demand"))
        });
    }
}

/// The paths an adoption may change: on a node pool slicectl's own labels
/// and resource labels, and the other tool's hand-off labels; on a MIG its
/// description (where slicectl records its ownership).
fn ownership_path(path: &str, handoff: &[String]) -> bool {
    if path == "description" || path.starts_with("description.") {
        return true;
    }
    let key = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix("\"]"))
            .map(str::to_string)
    };
    if let Some(k) = key("config.labels[\"") {
        return k.starts_with(super::ownership::PREFIX) || handoff.contains(&k);
    }
    if let Some(k) = key("config.resourceLabels[\"") {
        return k.starts_with("slicectl-") || handoff.contains(&k);
    }
    false
}

/// A label an adoption stamps on a Node that already joined (a `gce`
/// slice's, matched to its MIG's VMs by providerID): slicectl's own
/// labels, and labels the Node does not carry yet. A label another tool
/// set to another value is not changed by adopting.
fn node_label_added(c: &super::hash::FieldChange) -> bool {
    let Some(key) = c
        .path
        .strip_prefix("nodes[")
        .and_then(|r| r.split_once("].labels[\""))
        .and_then(|(_, k)| k.strip_suffix("\"]"))
    else {
        return false;
    };
    c.before.is_none() || key.starts_with(super::ownership::PREFIX)
}

/// Keeps, of a plan made with the adopted slices in the fleet, only the
/// adoptions: each adopted resource's in-place update whose changes are
/// all ownership labels (its reason says so, with the other tool's
/// warning). Anything else planned for an adopted resource refuses it
/// (`adopt_replace`, `adopt_changes`, `adopt_busy`, `adopt_elsewhere`); the rest of the plan
/// (other slices' changes) is left out: `adopt` changes nothing else.
pub fn keep_adoptions(plan: &mut Plan, proposals: &[Proposal]) {
    let of = |id: &ResourceId| {
        proposals
            .iter()
            .find(|p| p.resources.contains(id) || p.held.contains(id))
    };
    let mut refused: Vec<Refusal> = plan
        .refused
        .iter()
        .filter(|r| proposals.iter().any(|p| p.slice == r.slice))
        .cloned()
        .collect();
    let mut kept = Vec::new();
    for mut a in std::mem::take(&mut plan.actions) {
        let Some(p) = of(&a.id) else {
            continue;
        };
        let other: Vec<String> = a
            .changes
            .iter()
            .filter(|c| !ownership_path(&c.path, &p.handoff) && !node_label_added(c))
            .map(|c| {
                format!(
                    "{}: {} → {}",
                    c.path,
                    show(c.before.as_ref()),
                    show(c.after.as_ref())
                )
            })
            .collect();
        let refuse = match a.action {
            ActionKind::Update if other.is_empty() => None,
            ActionKind::Update => Some((
                "adopt_changes",
                format!(
                    "adopting it would change more than ownership labels: {}. Edit the generated spec (or the Target's nodeDefaults) to match the live {}, or change the live {} first",
                    other.join("; "),
                    a.noun,
                    a.noun
                ),
            )),
            ActionKind::Replace => Some((
                "adopt_replace",
                format!(
                    "adopting it would replace it ({}); adoption never replaces. What slicectl cannot express as it is: {}",
                    a.reason_text(),
                    if other.is_empty() {
                        "its state".to_string()
                    } else {
                        other.join("; ")
                    }
                ),
            )),
            _ => Some((
                "adopt_busy",
                format!(
                    "it is not ready to adopt ({}); try again when it is",
                    a.reason_text()
                ),
            )),
        };
        match refuse {
            None => {
                a.reason = Reason::Adopt {
                    note: p
                        .manager
                        .as_ref()
                        .map(|m| format!(". WARNING: {m}"))
                        .unwrap_or_default(),
                };
                kept.push(a);
            }
            Some((code, why)) => {
                let msg = format!("{} ({}): {why}", a.address(), a.id.name);
                refused.push(super::refusal(&a, code, msg));
            }
        }
    }
    // An adopted resource the fleet does not render (a Slice of its name
    // already in the specs that puts it elsewhere) gets no action: refused.
    for p in proposals {
        for (replica, id) in p.resources.iter().enumerate() {
            let seen =
                kept.iter().any(|a| &a.id == id) || refused.iter().any(|r| r.name == id.name);
            if seen {
                continue;
            }
            let owner = SliceRef {
                slice: p.slice.clone(),
                replica: u32::try_from(replica).unwrap_or(u32::MAX),
            };
            refused.push(Refusal {
                kind: id.kind.as_str(),
                name: id.name.clone(),
                address: owner.address(id.kind),
                slice: p.slice.clone(),
                replica: owner.replica,
                scope: id.scope.clone(),
                action: ActionKind::Update,
                code: "adopt_elsewhere".to_string(),
                message: format!(
                    "{} ({}): Slice {} in the specs does not render this {} (another Target, zone, name or replica count); adopt it under another name",
                    owner.address(id.kind),
                    id.name,
                    p.slice,
                    id.kind.as_str()
                ),
            });
        }
    }
    // A slice adopts whole or not at all: a refused resource (its MIG's
    // template, say) refuses the rest of its slice too.
    kept.retain(|a| !refused.iter().any(|r| r.slice == a.owner.slice));
    plan.actions = kept;
    plan.refused = refused;
    keep_only_actions(plan);
}

fn show(v: Option<&Value>) -> String {
    v.map_or_else(|| "(unset)".to_string(), Value::to_string)
}

/// What an adopt or release plan says besides its actions: nothing of
/// the rest of the fleet (Targets that could not be observed stay: they
/// stop the command).
fn keep_only_actions(plan: &mut Plan) {
    plan.unmanaged.clear();
    plan.unjoined.clear();
    plan.held.clear();
    plan.released.clear();
    plan.renames.clear();
    plan.demand = Default::default();
    plan.summary = plan.count();
}

/// The release plan: for each live resource this reconciler owns of the
/// chosen slices, an in-place update that removes slicectl's labels
/// ([`Kind::unlabel`]); a resource that cannot be relabelled in place,
/// or a protected slice, is refused. Nothing is deleted.
pub fn release(
    plan: &mut Plan,
    fleet: &Fleet,
    inv: &Inventory,
    kinds: &[&dyn Kind],
    slices: &BTreeSet<String>,
) {
    let owners = super::Owners::of(fleet, kinds);
    let mut planned = Vec::new();
    for kind in kinds.iter().filter(|k| !k.observe_only() && !k.shared()) {
        for l in inv.live(kind.id()) {
            let Some(o) = kind
                .ownership(&l.body)
                .filter(|o| owners.owns(&l.scope, Some(o)) && slices.contains(&o.slice))
            else {
                continue;
            };
            planned.push(release_action(*kind, l, &o));
        }
    }
    // What a released MIG uses (its template and policy) is released with
    // it: it follows the MIG's ownership (`kinds::gce::link`), so it needs
    // no change of its own.
    let released: BTreeSet<ResourceId> = planned
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|a| a.id.clone()))
        .collect();
    let follows = |address_of: &ResourceId| {
        inv.held
            .get(address_of)
            .is_some_and(|holder| released.contains(holder))
    };
    let mut actions = Vec::new();
    let mut refused = Vec::new();
    for r in planned {
        match r {
            Ok(a) => actions.push(a),
            Err(r) => {
                let id = ResourceId {
                    scope: r.scope.clone(),
                    kind: super::kind::KindId(r.kind),
                    name: r.name.clone(),
                };
                if r.code != "release_unsupported" || !follows(&id) {
                    refused.push(*r);
                }
            }
        }
    }
    plan.actions = actions;
    plan.refused = refused;
    keep_only_actions(plan);
}

fn release_action(
    kind: &dyn Kind,
    l: &LiveResource,
    o: &Ownership,
) -> Result<Action, Box<Refusal>> {
    let owner = SliceRef {
        slice: o.slice.clone(),
        replica: o.replica,
    };
    let id = ResourceId {
        scope: l.scope.clone(),
        kind: kind.id(),
        name: kind.name(&l.body),
    };
    let mut a = Action {
        id,
        owner,
        action: ActionKind::Update,
        reason: Reason::Release,
        changes: Vec::new(),
        groups: BTreeSet::new(),
        // The live body as it is: the released body is the same body
        // without the labels, so the diff shows exactly them.
        before: Some(l.body.to_json()),
        desired: None,
        operation: None,
        timeout: crate::spec::DEFAULT_OPERATION_TIMEOUT,
        noun: kind.noun(),
        disruption: None,
        recheck: None,
    };
    let (address, name) = (a.address(), a.id.name.clone());
    if o.prevent_destroy {
        let msg = format!(
            "{address} ({name}) is protected by preventDestroy: releasing it would drop the protection with the ownership. Set lifecycle.preventDestroy: false and apply first"
        );
        return Err(Box::new(super::refusal(&a, "protected", msg)));
    }
    let unsupported = |a: &Action| {
        let msg = format!(
            "{address} ({name}): slicectl records the ownership of a {} where it cannot remove it in place; it stays slicectl's",
            a.noun
        );
        Box::new(super::refusal(a, "release_unsupported", msg))
    };
    let Some((body, Comparison::Update { changes, groups })) = kind.unlabel(&l.body) else {
        return Err(unsupported(&a));
    };
    a.changes = changes;
    a.groups = groups;
    a.desired = Some(body);
    Ok(a)
}

/// The spec files that still name released slices, `file: slice`.
pub fn naming(fleet: &Fleet, slices: &BTreeSet<String>) -> Vec<String> {
    fleet
        .slices
        .values()
        .filter(|s| slices.contains(&s.name))
        .map(|s| format!("{}: Slice {}", s.location, s.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ownership_and_handoff_labels_are_adoption_changes() {
        let h = vec!["google.com/nodepool-manager".to_string()];
        assert!(ownership_path("config.labels[\"slicectl.dev/owner\"]", &h));
        assert!(ownership_path(
            "config.labels[\"google.com/nodepool-manager\"]",
            &h
        ));
        assert!(ownership_path(
            "config.resourceLabels[\"slicectl-owner\"]",
            &h
        ));
        assert!(!ownership_path("config.labels[\"team\"]", &h));
        assert!(!ownership_path("config.taints", &h));
        assert!(!ownership_path("placementPolicy.tpuTopology", &h));
    }

    #[test]
    fn prune_keeps_what_a_person_writes() {
        let mut v = serde_json::json!({"a": null, "b": {}, "c": [], "d": false, "e": 1,
            "capacity": {"type": "on-demand"}, "f": {"g": {}}});
        prune(&mut v);
        assert_eq!(v, serde_json::json!({"e": 1}));
    }
}
