//! Writes the status objects: server-side apply of each object and of its
//! status subresource (field manager `slicectl`), Events on them, and the
//! deletion of objects whose slice is gone.
//!
//! Only what changed is written, as a Kubernetes controller compares what it
//! wants with what it observes and writes on a difference: the objects are
//! listed once per write (the list [`StatusWriter::existing`] read, else a
//! new one), and an object's metadata apply is skipped when the fields
//! slicectl's apply owns are exactly the fields its body sets, with the
//! body's values ([`metadata_current`]: the apply would then change
//! nothing, including fields another manager took over, whose values would
//! differ), and its status apply when the merged status equals the live one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::crd::{API_VERSION, KIND, SliceStatus, SliceStatusStatus};
use super::derive::{EventNote, SliceObject, StatusSet};
use crate::controller::shard::{SHARD_LABEL, ShardScope, shard_of};

/// Field manager of every write, and the Events' reporting controller.
pub const MANAGER: &str = "slicectl";
/// Label on every object slicectl manages (`app.kubernetes.io/managed-by`).
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Label naming the slice an object reports on.
pub const SLICE_LABEL: &str = "slicectl.dev/slice";

/// A write that failed, with which object and what was being done.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Listing the existing objects failed (nothing was deleted).
    #[error("cannot list the SliceStatus objects in namespace {namespace}: {source}")]
    List {
        /// Namespace.
        namespace: String,
        /// The API's error.
        #[source]
        source: kube::Error,
    },
    /// One or more objects could not be written or deleted; the others were.
    #[error("{} status object write(s) failed: {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Objects(Vec<ObjectError>),
}

/// One object's failed write.
#[derive(Debug, thiserror::Error)]
#[error("{what} SliceStatus {namespace}/{name}: {source}")]
pub struct ObjectError {
    /// What was being done (`apply`, `apply the status of`, `delete`).
    pub what: &'static str,
    /// Namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// The API's error.
    #[source]
    pub source: kube::Error,
}

/// What a write did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteSummary {
    /// Objects applied: their metadata, their status or both (a write of
    /// an object as it already was is not sent, and counted `unchanged`).
    pub written: Vec<String>,
    /// Objects already as they should be: nothing sent for them.
    pub unchanged: usize,
    /// Objects deleted.
    pub deleted: Vec<String>,
    /// Events recorded.
    pub events: usize,
    /// Events that could not be recorded (`NAME: error`); they never fail a
    /// write.
    pub event_errors: Vec<String>,
}

/// Writes status objects into one namespace.
pub struct StatusWriter {
    api: Api<SliceStatus>,
    namespace: String,
    recorder: Recorder,
    owner: Option<OwnerReference>,
    /// With sharding: only the held shards' objects are written, listed as
    /// existing and deleted; each carries its shard's label.
    scope: Option<ShardScope>,
    /// The list [`StatusWriter::existing`] read, taken by the next
    /// [`StatusWriter::write`] (one LIST per cycle, not two).
    listed: Mutex<Option<Vec<SliceStatus>>>,
}

impl StatusWriter {
    /// A writer for `namespace`. `instance` names this replica of the
    /// controller in Events (its pod name); `None` uses the controller name.
    pub fn new(client: Client, namespace: &str, instance: Option<String>) -> StatusWriter {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: MANAGER.into(),
                instance,
            },
        );
        StatusWriter {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            recorder,
            owner: None,
            scope: None,
            listed: Mutex::new(None),
        }
    }

    /// Confines the next writes to the shards `scope` holds (sharded
    /// controller); `None` writes and prunes every object (one leader).
    pub fn set_scope(&mut self, scope: Option<ShardScope>) {
        self.scope = scope;
    }

    /// The shard of an object: its label, else its slice's Target's, else
    /// its name's (a slice whose Target is not known: a file never valid).
    fn shard(&self, obj: &SliceStatus) -> Option<u32> {
        let s = self.scope.as_ref()?;
        let labelled = obj
            .labels()
            .get(SHARD_LABEL)
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|k| *k < s.shards);
        Some(labelled.unwrap_or_else(|| {
            let status = obj.status.as_ref().and_then(|x| x.slice.as_ref());
            object_shard(&obj.name_any(), status.map(|x| x.target.as_str()), s.shards)
        }))
    }

    /// Whether `obj` is this replica's to list and delete.
    fn in_scope(&self, obj: &SliceStatus) -> bool {
        match (&self.scope, self.shard(obj)) {
            (Some(s), Some(k)) => s.held.contains(&k),
            _ => true,
        }
    }

    /// The shard label of the object for slice object `o`, and whether it
    /// is this replica's to write.
    fn label_of(&self, o: &SliceObject) -> (Option<u32>, bool) {
        match &self.scope {
            None => (None, true),
            Some(s) => {
                let target = o.status.slice.as_ref().map(|x| x.target.as_str());
                let k = object_shard(&o.name, target, s.shards);
                (Some(k), s.held.contains(&k))
            }
        }
    }

    /// Makes every object owned by `owner` (e.g. the controller's
    /// Deployment), so deleting the controller deletes its status objects.
    pub fn with_owner(mut self, owner: OwnerReference) -> StatusWriter {
        self.owner = Some(owner);
        self
    }

    /// The objects slicectl manages in the namespace now (not those being
    /// deleted), by name, with their status: what [`super::Cycle::existing`]
    /// wants.
    /// The list is kept for the next [`StatusWriter::write`].
    pub async fn existing(&self) -> Result<BTreeMap<String, SliceStatusStatus>, WriteError> {
        let listed = self.managed().await?;
        let existing = listed
            .iter()
            .filter(|o| o.meta().deletion_timestamp.is_none() && self.in_scope(o))
            .map(|o| (o.name_any(), o.status.clone().unwrap_or_default()))
            .collect();
        if let Ok(mut g) = self.listed.lock() {
            *g = Some(listed);
        }
        Ok(existing)
    }

    /// The list [`StatusWriter::existing`] kept, else a new one.
    async fn live(&self) -> Result<Vec<SliceStatus>, WriteError> {
        let kept = self.listed.lock().ok().and_then(|mut g| g.take());
        match kept {
            Some(l) => Ok(l),
            None => self.managed().await,
        }
    }

    /// Every object slicectl manages in the namespace that may be this
    /// replica's ([`list_selectors`]: sharded, the API server leaves out
    /// the other shards' objects, so a replica reads its share, not the
    /// whole fleet's).
    async fn managed(&self) -> Result<Vec<SliceStatus>, WriteError> {
        let mut out = Vec::new();
        for selector in list_selectors(self.scope.as_ref()) {
            let list = self
                .api
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|source| WriteError::List {
                    namespace: self.namespace.clone(),
                    source,
                })?;
            out.extend(list.items);
        }
        Ok(out)
    }

    fn params() -> PatchParams {
        PatchParams::apply(MANAGER).force()
    }

    /// Applies every object of `set` and its status where they differ from
    /// the live ones, records its Events, records the Events of removed
    /// slices on their objects and deletes every other object slicectl
    /// manages in the namespace. Every object is attempted; failures are
    /// returned together.
    pub async fn write(&self, set: &StatusSet) -> Result<WriteSummary, WriteError> {
        let mut summary = WriteSummary::default();
        let mut failures = Vec::new();
        let listed = self.live().await?;
        let live: BTreeMap<String, &SliceStatus> = listed
            .iter()
            .filter(|o| o.meta().deletion_timestamp.is_none())
            .map(|o| (o.name_any(), o))
            .collect();
        for o in &set.objects {
            if !self.label_of(o).1 {
                continue;
            }
            match self
                .write_one(o, live.get(&o.name).copied(), &mut summary)
                .await
            {
                Ok(true) => summary.written.push(o.name.clone()),
                Ok(false) => summary.unchanged += 1,
                Err(e) => failures.push(e),
            }
        }
        let keep: BTreeSet<&str> = set.objects.iter().map(|o| o.name.as_str()).collect();
        for obj in listed {
            let name = obj.name_any();
            if keep.contains(name.as_str())
                || obj.meta().deletion_timestamp.is_some()
                || !self.in_scope(&obj)
            {
                continue;
            }
            if let Some(gone) = set.removed.iter().find(|r| r.name == name) {
                self.publish(&obj, &gone.events, &mut summary).await;
            }
            match self.api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => summary.deleted.push(name),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => failures.push(ObjectError {
                    what: "delete",
                    namespace: self.namespace.clone(),
                    name,
                    source,
                }),
            }
        }
        if failures.is_empty() {
            Ok(summary)
        } else {
            Err(WriteError::Objects(failures))
        }
    }

    /// Writes one object where it differs from `live` (its listed version);
    /// whether anything was sent.
    async fn write_one(
        &self,
        o: &SliceObject,
        live: Option<&SliceStatus>,
        summary: &mut WriteSummary,
    ) -> Result<bool, ObjectError> {
        let err = |what, source| ObjectError {
            what,
            namespace: self.namespace.clone(),
            name: o.name.clone(),
            source,
        };
        let body = object_body(&o.name, self.owner.as_ref(), self.label_of(o).0);
        let mut sent = false;
        let live = match live.filter(|l| metadata_current(&l.metadata, &body)) {
            Some(l) => l.clone(),
            None => {
                sent = true;
                self.api
                    .patch(&o.name, &Self::params(), &Patch::Apply(&body))
                    .await
                    .map_err(|e| err("apply", e))?
            }
        };
        let generation = live.metadata.generation;
        let status = merged(&o.status, live.status.as_ref(), generation);
        let live = if live.status.as_ref() == Some(&status) {
            live
        } else {
            sent = true;
            let body = json!({
                "apiVersion": API_VERSION,
                "kind": KIND,
                "status": status,
            });
            self.api
                .patch_status(&o.name, &Self::params(), &Patch::Apply(&body))
                .await
                .map_err(|e| err("apply the status of", e))?
        };
        self.publish(&live, &o.events, summary).await;
        Ok(sent)
    }

    async fn publish(&self, obj: &SliceStatus, events: &[EventNote], summary: &mut WriteSummary) {
        let reference = obj.object_ref(&());
        for e in events {
            let ev = Event {
                type_: if e.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: e.reason.clone(),
                note: Some(e.note.clone()),
                action: e.action.clone(),
                secondary: None,
            };
            match self.recorder.publish(&ev, &reference).await {
                Ok(()) => summary.events += 1,
                Err(error) => {
                    tracing::warn!(object = %obj.name_any(), %error, "cannot record an event");
                    summary
                        .event_errors
                        .push(format!("{}: {error}", obj.name_any()));
                }
            }
        }
    }
}

/// The label selectors of the lists that find every object slicectl
/// manages which may be in `scope`: one leader, all of them; sharded, those
/// labelled with a held shard, and those whose label names no shard of this
/// count (none, or one of another `--shards`), which
/// [`StatusWriter::in_scope`] then judges by their slice's Target. The two
/// never overlap. (`notin` also matches objects without the label:
/// <https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#set-based-requirement>.)
pub fn list_selectors(scope: Option<&ShardScope>) -> Vec<String> {
    let managed = format!("{MANAGED_BY}={MANAGER}");
    let Some(s) = scope else {
        return vec![managed];
    };
    let mut out = Vec::new();
    if !s.held.is_empty() {
        let held = shard_set(s.held.iter().copied());
        out.push(format!("{managed},{SHARD_LABEL} in ({held})"));
    }
    let every = shard_set(0..s.shards);
    out.push(format!("{managed},{SHARD_LABEL} notin ({every})"));
    out
}

/// Shards as a label selector's set (`0,3`).
fn shard_set(shards: impl Iterator<Item = u32>) -> String {
    shards.map(|k| k.to_string()).collect::<Vec<_>>().join(",")
}

/// The shard of slice `name`'s object: its Target's, else its own name's.
fn object_shard(name: &str, target: Option<&str>, shards: u32) -> u32 {
    shard_of(target.unwrap_or(name), shards)
}

/// The object `write` server-side applies for slice `name` (the status is
/// applied separately): its labels (with its shard's, sharded) and, with
/// an owner, `ownerReferences` holding only it. Without an owner the field
/// is absent, so the apply removes an owner reference slicectl set before.
pub fn object_body(
    name: &str,
    owner: Option<&OwnerReference>,
    shard: Option<u32>,
) -> serde_json::Value {
    let mut metadata = json!({
        "name": name,
        "labels": {MANAGED_BY: MANAGER, SLICE_LABEL: name},
    });
    if let Some(k) = shard {
        metadata["labels"][SHARD_LABEL] = json!(k.to_string());
    }
    if let Some(owner) = owner {
        metadata["ownerReferences"] = json!([owner]);
    }
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {},
    })
}

/// Whether applying `body` (an [`object_body`]) to an object whose metadata
/// is `live` would change nothing: slicectl's apply (field manager
/// [`MANAGER`], operation `Apply`, not the status subresource) owns exactly
/// the labels and owner references `body` sets, and they have its values. A
/// label or owner reference another manager changed has another value (or
/// owner) and is applied again; one slicectl set and no longer sets is still
/// owned, so applied away. Fields other managers own that slicectl never
/// set are left alone either way, as the apply would leave them.
pub fn metadata_current(live: &ObjectMeta, body: &serde_json::Value) -> bool {
    let want_labels = body["metadata"]["labels"].as_object();
    let want_owners: Vec<OwnerReference> =
        serde_json::from_value(body["metadata"]["ownerReferences"].clone()).unwrap_or_default();
    let Some(entry) = live.managed_fields.iter().flatten().find(|m| {
        m.manager.as_deref() == Some(MANAGER)
            && m.operation.as_deref() == Some("Apply")
            && m.subresource.as_deref().unwrap_or("").is_empty()
    }) else {
        return false;
    };
    let Some(fields) = entry.fields_v1.as_ref().map(|f| &f.0["f:metadata"]) else {
        return false;
    };
    // `f:labels` holds `f:KEY` per owned label; `f:ownerReferences` holds
    // `k:{"uid":"…"}` per owned reference (the structured-merge-diff field
    // set, https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management).
    let keys = |f: &serde_json::Value| -> BTreeSet<String> {
        f.as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    let owned_labels: BTreeSet<String> = keys(&fields["f:labels"])
        .into_iter()
        .filter_map(|k| k.strip_prefix("f:").map(str::to_string))
        .collect();
    let owned_owners: BTreeSet<String> = keys(&fields["f:ownerReferences"])
        .into_iter()
        .filter_map(|k| {
            let v: serde_json::Value = serde_json::from_str(k.strip_prefix("k:")?).ok()?;
            v["uid"].as_str().map(str::to_string)
        })
        .collect();
    let labels_current = want_labels.is_some_and(|want| {
        want.keys().cloned().collect::<BTreeSet<_>>() == owned_labels
            && want.iter().all(|(k, v)| {
                live.labels
                    .as_ref()
                    .and_then(|l| l.get(k))
                    .map(String::as_str)
                    == v.as_str()
            })
    });
    let owners_current = want_owners
        .iter()
        .map(|o| o.uid.clone())
        .collect::<BTreeSet<_>>()
        == owned_owners
        && want_owners
            .iter()
            .all(|w| live.owner_references.iter().flatten().any(|l| l == w));
    labels_current && owners_current
}

/// The status to write: `new`, with `observedGeneration` (its own and each
/// condition's) set to the object's generation, and each condition whose
/// status did not change keeping its `lastTransitionTime`.
pub fn merged(
    new: &SliceStatusStatus,
    old: Option<&SliceStatusStatus>,
    generation: Option<i64>,
) -> SliceStatusStatus {
    let mut out = new.clone();
    out.observed_generation = generation;
    for c in &mut out.conditions {
        c.observed_generation = generation;
        if let Some(prev) = old.and_then(|o| same_type(&o.conditions, c))
            && prev.status == c.status
        {
            c.last_transition_time = prev.last_transition_time.clone();
        }
    }
    out
}

fn same_type<'a>(conds: &'a [Condition], c: &Condition) -> Option<&'a Condition> {
    conds.iter().find(|p| p.type_ == c.type_)
}
