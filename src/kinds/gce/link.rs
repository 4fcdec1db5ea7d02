//! Who owns a `gce` slice replica's instance template and workload policy
//! when their descriptions cannot say (`slicectl adopt`, `slicectl
//! release`): the MIG that uses them.
//!
//! Instance templates and resource policies cannot change after they are
//! made (compute v1 has no `update` or `patch` for templates, and resource
//! policies are changed by replacing them), so the ownership slicectl
//! writes in their descriptions is fixed at creation. A MIG's description
//! can be patched in place (`instanceGroupManagers.patch`). So the MIG
//! decides: a template or policy a MIG uses belongs to whoever owns that
//! MIG. A MIG slicectl does not own (released, or someone else's) makes
//! what it uses foreign, whatever their descriptions say; a MIG slicectl
//! adopted (`adopted=true` in its description) makes them its slice
//! replica's by reference. Pure: run on every observed inventory.

use std::sync::Arc;

use crate::kind::body_as;
use crate::kind::ownership::{self, Ownership};
use crate::kind::{Inventory, ResourceId};
use crate::resource::compute::{
    Held, InstanceGroupManager, InstanceTemplate, Linked, ResourcePolicy,
};

use super::nodes::NodeGroupLive;
use super::{mig, template};
use crate::kind::{Body, Scope};
use crate::kinds::{node_pool, workload_policy};
use crate::resource::gke::NodePool;

/// The `projects/…` tail of a link (links come back as full URLs).
fn tail(link: &str) -> &str {
    link.find("projects/").map_or(link, |i| &link[i..])
}

/// The ownership a template or policy has: from the MIG that uses it
/// ([`Held`]), else from its own description (`described`).
pub fn held_ownership(
    held: Option<&Held>,
    described: impl FnOnce() -> Option<Ownership>,
) -> Option<Ownership> {
    match held {
        Some(Held::Foreign { .. }) => None,
        Some(Held::Adopted { owner, .. }) => Some(Ownership {
            owner: owner.0.clone(),
            slice: owner.1.clone(),
            replica: owner.2,
            target: None,
            // No stored hash: compared field by field.
            spec_hash: None,
            hash_version: None,
            prevent_destroy: false,
        }),
        None => described(),
    }
}

/// How a MIG holds what it uses, or `None` when it is slicectl's own
/// (what it uses keeps the ownership its description records).
fn holding(m: &InstanceGroupManager) -> Option<Held> {
    let description = m.description.as_deref().unwrap_or_default();
    let own = mig::described_ownership(description, &m.name);
    match own {
        None => Some(Held::Foreign {
            holder: m.name.clone(),
        }),
        Some(o) if ownership::description_adopted(description) => Some(Held::Adopted {
            holder: m.name.clone(),
            owner: (o.owner, o.slice, o.replica),
        }),
        Some(_) => None,
    }
}

/// The name of the Node group of a MIG's VMs: its slice replica's
/// `<slice>-<replica>` (as the Nodes' labels name it), from the ownership
/// its description records, or had before it was released; else the MIG's
/// name. The two differ for a MIG under a name of its own (`gce.migName`).
fn group_of(m: &InstanceGroupManager) -> String {
    let d = m.description.as_deref().unwrap_or_default();
    mig::described_ownership(d, &m.name)
        .map(|o| (o.slice, o.replica))
        .or_else(|| super::adopt::released_from(d).map(|o| (o.slice, o.replica)))
        .map_or_else(
            || super::adopt::group_name(m),
            |(slice, replica)| crate::spec::names::mig(&slice, replica),
        )
}

/// `gce://PROJECT/ZONE/BASE`: the providerID of a MIG's VMs without their
/// `-xxxx` suffix (a MIG names its VMs `<baseInstanceName>-<4 random
/// characters>`, compute v1 `instanceGroupManagers.baseInstanceName`).
fn vm_stem(scope: &Scope, m: &InstanceGroupManager) -> Option<String> {
    let Scope::Zone(z) = scope else {
        return None;
    };
    let base = m.base_instance_name.as_deref().unwrap_or(&m.name);
    Some(format!("gce://{}/{}/{base}", z.project, z.zone))
}

/// A Node's providerID without the VM name's `-xxxx` suffix.
fn node_stem(provider_id: &str) -> Option<&str> {
    provider_id
        .rsplit_once('-')
        .filter(|(_, sfx)| sfx.len() == 4 && sfx.bytes().all(|b| b.is_ascii_alphanumeric()))
        .map(|(stem, _)| stem)
}

/// Gives the Nodes that joined without slicectl's labels (the unnamed
/// [`NodeGroupLive::unlabelled`] group the observer keeps them in) to the
/// group of the MIG whose VMs they are, by providerID: its slice
/// replica's group when slicectl owns the MIG (the next `apply` labels
/// them), else a group with no owner under the name adopting the MIG
/// gives it (what `slicectl adopt` labels). Nodes of no observed MIG are
/// nobody's business here and are dropped.
fn place_strays(
    inv: &mut Inventory,
    stems: &std::collections::HashMap<String, (String, Option<Ownership>)>,
) {
    let Some(groups) = inv.resources.get_mut(&super::nodes::KIND) else {
        return;
    };
    let mut strays: Vec<(Scope, Vec<super::nodes::NodeView>)> = Vec::new();
    groups.retain(|l| match body_as::<NodeGroupLive>(&l.body) {
        Some(g) if g.unlabelled && g.name.is_empty() => {
            strays.push((l.scope.clone(), g.nodes.clone()));
            false
        }
        _ => true,
    });
    for (scope, nodes) in strays {
        for n in nodes {
            let Some((name, own)) = node_stem(&n.provider_id).and_then(|s| stems.get(s)) else {
                continue;
            };
            let at = groups.iter().position(|l| {
                l.scope == scope
                    && body_as::<NodeGroupLive>(&l.body).is_some_and(|g| &g.name == name)
            });
            let mut g = match at.and_then(|i| body_as::<NodeGroupLive>(&groups[i].body)) {
                Some(g) => g.clone(),
                None => NodeGroupLive {
                    name: name.clone(),
                    owner: own.as_ref().map(|o| o.owner.clone()).unwrap_or_default(),
                    slice: own.as_ref().map(|o| o.slice.clone()).unwrap_or_default(),
                    replica: own.as_ref().map_or(0, |o| o.replica),
                    nodes: Vec::new(),
                    token_secrets: Vec::new(),
                    released: false,
                    unlabelled: own.is_none(),
                },
            };
            g.nodes.push(n);
            let body = Arc::new(g) as Body;
            match at {
                Some(i) => groups[i].body = body,
                None => groups.push(crate::kind::LiveResource {
                    scope: scope.clone(),
                    body,
                }),
            }
        }
    }
}

/// Links every MIG of `inv` with the template and policy it uses: each
/// used template's and policy's [`InstanceTemplate::held`] (see the module
/// docs), [`Inventory::held`], and, for a MIG slicectl does not own (what
/// `slicectl adopt` may describe), [`InstanceGroupManager::linked`]. A
/// fleet of slicectl's own MIGs costs one index per kind and no copy of a
/// body.
pub fn link(inv: &mut Inventory) {
    link_pools(inv);
    let templates = index(inv, template::KIND, template_link);
    let policies = index(inv, workload_policy::KIND, policy_link);
    // What each MIG uses: (MIG index, holder, how it holds, template index,
    // policy index).
    type Use = (
        usize,
        ResourceId,
        Option<Held>,
        Option<usize>,
        Option<usize>,
        String,
    );
    let mut stems = std::collections::HashMap::new();
    let uses: Vec<Use> = inv
        .live(mig::KIND)
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let m = body_as::<InstanceGroupManager>(&l.body)?;
            let template = m
                .instance_template
                .as_deref()
                .and_then(|t| templates.get(tail(t)).copied());
            let policy = m
                .resource_policies
                .as_ref()
                .and_then(|r| r.workload_policy.as_deref())
                .and_then(|p| policies.get(tail(p)).copied());
            let holder = ResourceId {
                scope: l.scope.clone(),
                kind: mig::KIND,
                name: m.name.clone(),
            };
            let held = holding(m);
            if let Some(stem) = vm_stem(&l.scope, m) {
                let own = match &held {
                    Some(Held::Foreign { .. }) => None,
                    _ => mig::described_ownership(
                        m.description.as_deref().unwrap_or_default(),
                        &m.name,
                    ),
                };
                stems.insert(stem, (group_of(m), own));
            }
            Some((i, holder, held, template, policy, group_of(m)))
        })
        .collect();
    place_strays(inv, &stems);
    let mut groups_of: std::collections::HashMap<String, (ResourceId, bool)> =
        std::collections::HashMap::new();
    for (i, holder, held, template, policy, group) in uses {
        let t = template.and_then(|at| mark(&TEMPLATE, inv, at, &holder, held.as_ref()));
        let p = policy.and_then(|at| mark(&POLICY, inv, at, &holder, held.as_ref()));
        let foreign = matches!(held, Some(Held::Foreign { .. }));
        if foreign
            && let Some(l) = inv.resources.get_mut(&mig::KIND).and_then(|v| v.get_mut(i))
            && let Some(m) = body_as::<InstanceGroupManager>(&l.body)
        {
            let mut m = m.clone();
            m.linked = Some(Box::new(Linked {
                template: t,
                policy: p,
            }));
            l.body = Arc::new(m) as Body;
        }
        groups_of.insert(group, (holder, foreign));
    }
    // The Nodes of a MIG's replica (the group named as the MIG) go with
    // it: released with it, adopted with it.
    let mut nodes_held = Vec::new();
    let mut released_in = Vec::new();
    if let Some(groups) = inv.resources.get_mut(&super::nodes::KIND) {
        for l in groups.iter_mut() {
            let Some(g) = body_as::<NodeGroupLive>(&l.body) else {
                continue;
            };
            let Some((holder, foreign)) = groups_of.get(&g.name) else {
                continue;
            };
            nodes_held.push((
                ResourceId {
                    scope: l.scope.clone(),
                    kind: super::nodes::KIND,
                    name: g.name.clone(),
                },
                holder.clone(),
            ));
            // Nodes that joined unlabelled are no slicectl release's.
            if *foreign && !g.unlabelled {
                let mut g = g.clone();
                g.released = true;
                l.body = Arc::new(g) as Body;
                released_in.push((l.scope.clone(), holder.clone()));
            }
        }
    }
    // The cluster's device plugin serves a released slice's Nodes too: it
    // is held by that MIG, so it is not removed with slicectl's last slice.
    for (scope, holder) in released_in {
        if let Some(dp) = inv
            .live(super::device_plugin::KIND)
            .iter()
            .find(|l| l.scope == scope)
        {
            let id = ResourceId {
                scope,
                kind: super::device_plugin::KIND,
                name: crate::kind::Kind::name(&super::device_plugin::DevicePlugins, &dp.body),
            };
            nodes_held.push((id, holder));
        }
    }
    inv.held.extend(nodes_held);
}

/// The live resources of `kind` by link (`projects/…`), as positions in
/// [`Inventory::resources`].
fn index<T: 'static>(
    inv: &Inventory,
    kind: crate::kind::KindId,
    link_of: impl Fn(&T, &Scope) -> String,
) -> std::collections::HashMap<String, usize> {
    inv.live(kind)
        .iter()
        .enumerate()
        .filter_map(|(i, l)| Some((link_of(body_as::<T>(&l.body)?, &l.scope), i)))
        .collect()
}

/// A global instance template's link, from its scope.
fn template_link(t: &InstanceTemplate, s: &Scope) -> String {
    let Scope::Global(p) = s else {
        return String::new();
    };
    format!("projects/{}/global/instanceTemplates/{}", p.project, t.name)
}

/// The region of a GKE location (a zone or a region).
fn region_of_location(location: &str) -> &str {
    if location.matches('-').count() >= 2 {
        crate::spec::validate::region_of(location)
    } else {
        location
    }
}

/// Links every GKE node pool placed by a workload policy
/// (`placementPolicy.policyName`, tpu7x multi-host) with it, the same way:
/// a pool slicectl owns (its labels, changed in place) owns the policy by
/// reference; a pool it does not own makes the policy foreign. A GKE slice
/// never brings its own policy, so no marker is needed.
fn link_pools(inv: &mut Inventory) {
    let pools: Vec<(Scope, NodePool)> = inv
        .live(node_pool::KIND)
        .iter()
        .filter_map(|l| Some((l.scope.clone(), body_as::<NodePool>(&l.body)?.clone())))
        .filter(|(_, p)| {
            p.placement_policy
                .as_ref()
                .is_some_and(|pp| pp.policy_name.is_some())
        })
        .collect();
    if pools.is_empty() {
        return;
    }
    let policies = index(inv, workload_policy::KIND, policy_link);
    let mut linked: Vec<(Scope, String, ResourcePolicy)> = Vec::new();
    for (scope, p) in &pools {
        let Scope::Cluster(c) = scope else {
            continue;
        };
        let Some(name) = p
            .placement_policy
            .as_ref()
            .and_then(|pp| pp.policy_name.clone())
        else {
            continue;
        };
        let location = p
            .locations
            .first()
            .map_or(c.location.as_str(), String::as_str);
        // `policyName` is a name in the cluster's project and the pool's
        // region (or a `projects/…` link: its tail).
        let link = if name.contains('/') {
            tail(&name).to_string()
        } else {
            format!(
                "projects/{}/regions/{}/resourcePolicies/{name}",
                c.project,
                region_of_location(location)
            )
        };
        let held = match p
            .config
            .as_ref()
            .and_then(|c| Ownership::from_labels(&c.labels))
        {
            None => Held::Foreign {
                holder: p.name.clone(),
            },
            Some(o) => Held::Adopted {
                holder: p.name.clone(),
                owner: (o.owner, o.slice, o.replica),
            },
        };
        let holder = ResourceId {
            scope: scope.clone(),
            kind: node_pool::KIND,
            name: p.name.clone(),
        };
        if let Some(found) = policies
            .get(&link)
            .and_then(|at| mark(&POLICY, inv, *at, &holder, Some(&held)))
        {
            linked.push((scope.clone(), p.name.clone(), found));
        }
    }
    if let Some(list) = inv.resources.get_mut(&node_pool::KIND) {
        for l in list.iter_mut() {
            let Some(p) = body_as::<NodePool>(&l.body) else {
                continue;
            };
            if let Some((_, _, policy)) = linked
                .iter()
                .find(|(s, n, _)| s == &l.scope && n == &p.name)
            {
                let mut p = p.clone();
                p.linked_policy = Some(Box::new(policy.clone()));
                l.body = Arc::new(p) as Body;
            }
        }
    }
}

/// A workload policy's link, from its scope.
fn policy_link(p: &ResourcePolicy, s: &Scope) -> String {
    let Scope::Region(r) = s else {
        return String::new();
    };
    format!(
        "projects/{}/regions/{}/resourcePolicies/{}",
        r.project, r.region, p.name
    )
}

/// How [`mark`] reads and stamps one kind: its name and its `held`.
struct Stamp<T> {
    kind: crate::kind::KindId,
    name: fn(&T) -> String,
    set: fn(&mut T, Option<Held>),
}

const TEMPLATE: Stamp<InstanceTemplate> = Stamp {
    kind: template::KIND,
    name: |t| t.name.clone(),
    set: |t, h| t.held = h,
};

const POLICY: Stamp<ResourcePolicy> = Stamp {
    kind: workload_policy::KIND,
    name: |p| p.name.clone(),
    set: |p, h| p.held = h,
};

/// Records that `holder` uses the resource `how.kind` holds at position
/// `at`, stamps `held` on it (a copy of its body only when there is
/// something to stamp), and returns it as observed when `holder` is not
/// slicectl's (what `slicectl adopt` reads).
fn mark<T: Clone + crate::kind::Resource + 'static>(
    how: &Stamp<T>,
    inv: &mut Inventory,
    at: usize,
    holder: &ResourceId,
    held: Option<&Held>,
) -> Option<T> {
    let l = inv.resources.get_mut(&how.kind)?.get_mut(at)?;
    let body = body_as::<T>(&l.body)?;
    let id = ResourceId {
        scope: l.scope.clone(),
        kind: how.kind,
        name: (how.name)(body),
    };
    let observed = match held {
        None => None,
        Some(h) => {
            let observed = body.clone();
            let mut stamped = observed.clone();
            (how.set)(&mut stamped, Some(h.clone()));
            l.body = Arc::new(stamped) as Body;
            matches!(h, Held::Foreign { .. }).then_some(observed)
        }
    };
    inv.users
        .entry(id.clone())
        .or_default()
        .insert(holder.clone());
    inv.held.insert(id, holder.clone());
    observed
}
