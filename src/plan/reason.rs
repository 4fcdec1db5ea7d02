//! Why an action is planned: a typed value that becomes text only when it
//! is rendered. The executor never looks at it.

use serde_json::Value;

use super::kind::{SliceRef, UpdateGroup};

/// Why an action is planned.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// The resource does not exist.
    Missing,
    /// The resource is being deleted by an earlier operation and is still
    /// desired: it is created again once that finishes.
    RecreateAfterDelete,
    /// Fields whose change forces a replacement differ; the one a person
    /// most likely edited is named.
    FieldsForceReplacement {
        /// Dotted path of the named field.
        path: String,
        /// Live value.
        before: Option<Value>,
        /// Desired value.
        after: Option<Value>,
        /// How many more fields force it.
        more: usize,
    },
    /// Only the stored spec hash differs from the desired one.
    StoredHashDiffers,
    /// The live resource is in an error state (`ERROR`,
    /// `RUNNING_WITH_ERROR`, …) and must be replaced.
    ErrorState {
        /// The status the cloud reports.
        status: String,
        /// What the cloud says.
        detail: String,
    },
    /// In-place fields changed.
    InPlaceFieldsChanged {
        /// The request groups that changed.
        groups: Vec<UpdateGroup>,
    },
    /// The live `preventDestroy` stamp is lifted in place; the replacement
    /// waits for the next apply.
    LiftProtection,
    /// An operation already runs on the resource; it is waited for.
    OperationInFlight {
        /// The operation.
        operation: String,
        /// What it does.
        operation_type: String,
    },
    /// The resource is already being deleted; that is waited for.
    BeingDeleted {
        /// The operation deleting it, if found.
        operation: Option<String>,
    },
    /// `slicectl destroy`.
    Destroy,
    /// `slicectl adopt`: ownership and hash labels stamped in place.
    Adopt {
        /// Who made it, when another tool did (a warning), else empty.
        note: String,
    },
    /// `slicectl release`: slicectl's ownership labels removed in place.
    Release,
    /// The slice is no longer in the specs.
    NotInSpecs,
    /// A workload slice whose JobSet ended (or was deleted) more than its
    /// Target's `workloads.gracePeriod` ago, with nothing running on it.
    WorkloadEnded {
        /// Which JobSet, how it ended and when.
        why: String,
    },
    /// The replica index is at or above the slice's replicas.
    ReplicaNotDesired {
        /// The slice's replicas now.
        replicas: u32,
        /// The replica indices kept (working replicas first after a
        /// scale-down).
        kept: Vec<u32>,
    },
    /// The replica now renders elsewhere (another target, name or scope).
    Moved {
        /// Where it is now, for people.
        now: String,
    },
    /// The replica no longer uses a resource of this kind.
    NotNeeded,
    /// A declared rename (`previousNames`): the resource of slice `from`
    /// is relabelled in place as this slice's and keeps its name.
    Renamed {
        /// The slice's previous name.
        from: String,
    },
    /// A resource it is made from is created again or replaced (a slice's
    /// Nodes when its MIG is: they are other VMs then).
    DependencyReplaced {
        /// The dependency's noun.
        noun: &'static str,
        /// `created again` or `replaced`.
        how: &'static str,
    },
    /// VMs of the replica run without a Node, and no bootstrap is under
    /// way: those that joined and lost their Node are recreated through
    /// their MIG (a kubelet does not register its Node again by itself).
    NodeLost {
        /// The MIG.
        mig: String,
        /// Its RUNNING VMs.
        running: u32,
        /// The replica's Nodes.
        nodes: u32,
    },
}

impl Reason {
    /// A stable short code (JSON `reason_code`, metric labels).
    pub fn code(&self) -> &'static str {
        match self {
            Reason::Missing => "missing",
            Reason::RecreateAfterDelete => "recreate_after_delete",
            Reason::FieldsForceReplacement { .. } => "fields_force_replacement",
            Reason::StoredHashDiffers => "stored_hash_differs",
            Reason::ErrorState { .. } => "error_state",
            Reason::InPlaceFieldsChanged { .. } => "in_place_fields_changed",
            Reason::LiftProtection => "lift_protection",
            Reason::OperationInFlight { .. } => "operation_in_flight",
            Reason::BeingDeleted { .. } => "being_deleted",
            Reason::Destroy => "destroy",
            Reason::Adopt { .. } => "adopt",
            Reason::Release => "release",
            Reason::NotInSpecs => "not_in_specs",
            Reason::WorkloadEnded { .. } => "workload_ended",
            Reason::ReplicaNotDesired { .. } => "replica_not_desired",
            Reason::Moved { .. } => "moved",
            Reason::NotNeeded => "not_needed",
            Reason::Renamed { .. } => "renamed",
            Reason::DependencyReplaced { .. } => "dependency_replaced",
            Reason::NodeLost { .. } => "node_lost",
        }
    }

    /// The reason for people. `noun` names the kind (`node pool`).
    pub fn text(&self, noun: &str, owner: &SliceRef) -> String {
        let (s, r) = (&owner.slice, owner.replica);
        // A resource shared by every slice of a cluster (the device plugin).
        if owner.is_shared() {
            match self {
                Reason::Missing => {
                    return format!("create because slices on this cluster need the {noun}");
                }
                Reason::Destroy => {
                    return format!(
                        "delete because `slicectl destroy` tears down every slice that used the {noun}"
                    );
                }
                Reason::NotInSpecs | Reason::NotNeeded | Reason::ReplicaNotDesired { .. } => {
                    return format!(
                        "delete because no slice on this cluster needs the {noun} any more"
                    );
                }
                _ => {}
            }
        }
        match self {
            Reason::Missing => {
                format!("create because replica {r} of slice {s} has no {noun} yet")
            }
            Reason::RecreateAfterDelete => format!(
                "the {noun} is being deleted by an earlier operation; it will be created again once that finishes"
            ),
            Reason::FieldsForceReplacement {
                path,
                before,
                after,
                more,
            } => {
                let more = match more {
                    0 => String::new(),
                    1 => " (and 1 more field)".to_string(),
                    n => format!(" (and {n} more fields)"),
                };
                format!(
                    "replace because {path} {} → {} forces replacement{more}",
                    show(before),
                    show(after)
                )
            }
            Reason::StoredHashDiffers => {
                "replace because the stored spec hash differs from the desired one".to_string()
            }
            Reason::ErrorState { status, detail } => format!(
                "replace because the {noun} is in {status} state{}",
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({detail})")
                }
            ),
            Reason::InPlaceFieldsChanged { groups } => {
                let names: Vec<&str> = groups.iter().map(|g| g.0).collect();
                format!("update in place because {} changed", names.join(" and "))
            }
            Reason::LiftProtection => format!(
                "update in place to lift preventDestroy from the live {noun} (the spec no longer sets it); \
                 its replacement waits for the next apply"
            ),
            Reason::OperationInFlight {
                operation,
                operation_type,
            } => format!(
                "operation {operation} ({operation_type}) is already running on this {noun}; \
                 waiting for it instead of starting a duplicate"
            ),
            Reason::BeingDeleted { operation } => format!(
                "the {noun} is already being deleted{}; waiting for it",
                operation
                    .as_ref()
                    .map(|o| format!(" by operation {o}"))
                    .unwrap_or_default()
            ),
            Reason::Destroy => format!("delete because `slicectl destroy` tears down slice {s}"),
            Reason::Adopt { note } => format!(
                "adopt: stamp slicectl's ownership and hash labels on the {noun} in place, as replica {r} of slice {s} (nothing else changes){note}"
            ),
            Reason::Release => format!(
                "release: remove slicectl's ownership labels from the {noun} of replica {r} of slice {s} in place (nothing is deleted)"
            ),
            Reason::NotInSpecs => format!("delete because slice {s} is no longer in the specs"),
            Reason::WorkloadEnded { why } => {
                format!("delete because workload slice {s} is released: {why}")
            }
            Reason::ReplicaNotDesired { replicas, kept } => {
                let kept: Vec<String> = kept.iter().map(u32::to_string).collect();
                let which = if kept.iter().eq((0..*replicas)
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .iter())
                {
                    String::new()
                } else {
                    format!(
                        "; the busy replicas, then the working ones, are kept first: {}",
                        kept.join(", ")
                    )
                };
                format!(
                    "delete because replica {r} of slice {s} is no longer desired (replicas: {replicas}{which})"
                )
            }
            Reason::Moved { now } => {
                format!("delete because replica {r} of slice {s} moved: it is now {now}")
            }
            Reason::DependencyReplaced { noun: dep, how } => {
                format!("replace because its {dep} is {how}: the {noun} of the old one go with it")
            }
            Reason::NotNeeded => {
                format!("delete because replica {r} of slice {s} no longer needs a {noun}")
            }
            Reason::NodeLost {
                mig,
                running,
                nodes,
            } => format!(
                "recreate because {running} VM(s) of managed instance group {mig} run and replica {r} of slice {s} \
                 has {nodes} Node(s): a VM that joined and whose Node was deleted does not register it again by \
                 itself, so each such VM ({} at most) is recreated through the MIG (recreateInstances) and joins \
                 again; a VM still bootstrapping is left to join",
                running.saturating_sub(*nodes)
            ),
            Reason::Renamed { from } => format!(
                "update in place because slice {from} is renamed to {s} (previousNames): the {noun} is \
                 relabelled as replica {r} of slice {s} and keeps its name; nothing is deleted"
            ),
        }
    }
}

fn show(v: &Option<Value>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => "(unset)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_snake_case() {
        let all = [
            Reason::Missing,
            Reason::RecreateAfterDelete,
            Reason::FieldsForceReplacement {
                path: "a".into(),
                before: None,
                after: None,
                more: 0,
            },
            Reason::StoredHashDiffers,
            Reason::ErrorState {
                status: "ERROR".into(),
                detail: "x".into(),
            },
            Reason::InPlaceFieldsChanged { groups: vec![] },
            Reason::LiftProtection,
            Reason::OperationInFlight {
                operation: "o".into(),
                operation_type: "t".into(),
            },
            Reason::BeingDeleted { operation: None },
            Reason::Destroy,
            Reason::Adopt {
                note: String::new(),
            },
            Reason::Release,
            Reason::NotInSpecs,
            Reason::WorkloadEnded { why: "w".into() },
            Reason::ReplicaNotDesired {
                replicas: 1,
                kept: vec![0],
            },
            Reason::Moved { now: "x".into() },
            Reason::NotNeeded,
            Reason::Renamed { from: "a".into() },
            Reason::DependencyReplaced {
                noun: "x",
                how: "replaced",
            },
            Reason::NodeLost {
                mig: "m".into(),
                running: 2,
                nodes: 1,
            },
        ];
        let codes: std::collections::BTreeSet<&str> = all.iter().map(Reason::code).collect();
        assert_eq!(codes.len(), all.len());
        assert!(
            codes
                .iter()
                .all(|c| c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_'))
        );
    }

    #[test]
    fn forced_field_text_names_the_field_and_counts_the_rest() {
        let r = Reason::FieldsForceReplacement {
            path: "placementPolicy.tpuTopology".into(),
            before: Some("2x2x2".into()),
            after: Some("2x2x4".into()),
            more: 1,
        };
        let owner = SliceRef {
            slice: "llm".into(),
            replica: 0,
        };
        assert_eq!(
            r.text("node pool", &owner),
            "replace because placementPolicy.tpuTopology \"2x2x2\" → \"2x2x4\" forces replacement (and 1 more field)"
        );
    }
}
