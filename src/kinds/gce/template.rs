//! The instance template kind: one global template per bootstrapped `gce`
//! slice replica, carrying the machine type, disk, network, capacity model
//! and the startup script with its metadata. Templates are immutable: any
//! change replaces the slice replica. Templates have no labels, so
//! ownership is written into the description.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::render::{self, template_projection};
use crate::cloud::{Cloud, CloudError};
use crate::kind::body_as;
use crate::kind::hash;
use crate::kind::ownership::Ownership;
use crate::kind::{Body, Comparison, Desired, Kind, KindId, LiveState, RenderCtx, Scope};
use crate::kinds::compute_shell::{self, ComputeKind};
use crate::resource::ProjectRef;
use crate::resource::compute::{self, InstanceTemplate};

/// The kind's name.
pub const KIND: KindId = KindId("instance_template");

/// The instance template kind.
#[derive(Debug, Clone, Copy)]
pub struct InstanceTemplates;

fn template(b: &Body) -> Option<&InstanceTemplate> {
    body_as::<InstanceTemplate>(b)
}

fn ownership_of(t: &InstanceTemplate) -> Option<Ownership> {
    super::link::held_ownership(t.held.as_ref(), || {
        Ownership::from_description_named(
            t.description.as_deref()?,
            &t.name,
            crate::spec::names::instance_template,
        )
    })
}

/// The template as shown: what was sent (output-only fields dropped).
fn shown(t: &InstanceTemplate) -> Value {
    let mut v = serde_json::to_value(InstanceTemplate {
        name: t.name.clone(),
        description: t.description.clone(),
        properties: t.properties.clone(),
        ..Default::default()
    })
    .unwrap_or(Value::Null);
    hash::remove_path(&mut v, "properties.metadata.fingerprint");
    hash::remove_path(&mut v, "properties.metadata.kind");
    // The startup script is long: show its digest, not its text.
    if let Some(items) = v
        .pointer_mut("/properties/metadata/items")
        .and_then(Value::as_array_mut)
    {
        for i in items.iter_mut() {
            if i["key"] == crate::bootstrap::STARTUP_SCRIPT_KEY
                && let Some(text) = i["value"].as_str()
            {
                i["value"] = Value::from(format!("<startup script, {} bytes>", text.len()));
            }
        }
    }
    v
}

impl Kind for InstanceTemplates {
    fn scopes(&self, t: &crate::spec::Target) -> Vec<Scope> {
        t.spec
            .gce
            .as_ref()
            .map(|_| {
                Scope::Global(crate::resource::ProjectRef {
                    project: t.spec.project.clone(),
                })
            })
            .into_iter()
            .collect()
    }

    fn id(&self) -> KindId {
        KIND
    }

    fn noun(&self) -> &'static str {
        "instance template"
    }

    fn depends_on(&self) -> &'static [KindId] {
        &[crate::kinds::workload_policy::KIND]
    }

    fn lists_unmanaged(&self) -> bool {
        false // a project holds many unrelated templates
    }

    fn render(&self, ctx: RenderCtx<'_>) -> Vec<Desired> {
        let Some(r) = render::render(ctx.target, &ctx.stem_slice(), ctx.replica) else {
            return Vec::new();
        };
        let Some(t) = r.template else {
            return Vec::new();
        };
        vec![ctx.desired(KIND, Scope::Global(r.project), t.name.clone(), t)]
    }

    fn name(&self, live: &Body) -> String {
        template(live).map(|t| t.name.clone()).unwrap_or_default()
    }

    fn ownership(&self, live: &Body) -> Option<Ownership> {
        ownership_of(template(live)?)
    }

    fn state(&self, _live: &Body) -> LiveState {
        LiveState::Ok
    }

    fn compare(&self, desired: &Desired, live: &Body) -> Comparison {
        let (Some(d), Some(l)) = (template(&desired.body), template(live)) else {
            return Comparison::Equal;
        };
        let want = template_projection(d);
        let changes = hash::diff(&template_projection(l), &want, true);
        if hash::stale(ownership_of(l).as_ref(), &hash::spec_hash(&want), &changes) {
            let hash_only = changes.is_empty();
            Comparison::Replace { changes, hash_only }
        } else {
            Comparison::Equal
        }
    }

    fn display_live(&self, live: &Body, _desired: Option<&Desired>) -> Value {
        template(live).map(shown).unwrap_or(Value::Null)
    }

    fn parse(&self, json: Value) -> Result<Body, String> {
        serde_json::from_value::<InstanceTemplate>(json)
            .map(|t| Arc::new(t) as Body)
            .map_err(|e| e.to_string())
    }

    fn fingerprint_view(&self, live: &Body) -> Value {
        template(live).map(shown).unwrap_or(Value::Null)
    }
}

#[async_trait]
impl ComputeKind for InstanceTemplates {
    type Place = ProjectRef;
    type Item = InstanceTemplate;
    const COLLECTION: &'static str = "instanceTemplates";

    fn ownership_of(t: &InstanceTemplate) -> Option<Ownership> {
        ownership_of(t)
    }

    async fn list(cloud: &Cloud, p: &ProjectRef) -> Result<Vec<InstanceTemplate>, CloudError> {
        cloud.compute.list_instance_templates(p).await
    }

    async fn list_operations(
        cloud: &Cloud,
        p: &ProjectRef,
    ) -> Result<Vec<compute::Operation>, CloudError> {
        cloud.compute.list_global_operations(p).await
    }

    async fn insert(
        cloud: &Cloud,
        p: &ProjectRef,
        t: &InstanceTemplate,
    ) -> Result<compute::Operation, CloudError> {
        cloud.compute.insert_instance_template(p, t).await
    }

    async fn delete(
        cloud: &Cloud,
        p: &ProjectRef,
        name: &str,
    ) -> Result<compute::Operation, CloudError> {
        cloud.compute.delete_instance_template(p, name).await
    }

    async fn find(
        cloud: &Cloud,
        p: &ProjectRef,
        t: &InstanceTemplate,
    ) -> Result<Option<InstanceTemplate>, CloudError> {
        let link = format!("projects/{}/global/instanceTemplates/{}", p.project, t.name);
        compute_shell::found(cloud.compute.get_instance_template(&link).await)
    }
}
